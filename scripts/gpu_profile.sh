#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_profile.sh KERNEL [fmha run flags...]: on a GPU machine, build, then profile one
# kernel launch of `fmha run` with Nsight Compute: stall reasons, pipe utilisation, and the
# per-SASS source page as CSV, under $OUT (details.txt, src.csv; PROFILE_TAG=name prefixes
# them, so that several profiles of one call do not overwrite each other).
# KERNEL is forced with -force_kernel, or "auto" leaves the choice to the selector.
# NCU_KERNEL (a regex, default fmha_fwd) picks the launch that is profiled, e.g.
# fmha_appendkv for the append plan of a -s_knew run. PROFILE_PREC (default bf16) is the
# run's -prec, e.g. fp8bf16 for the fp8 forward.
# Example: scripts/gpu_profile.sh fmha_fwd_bf16_hq128_hv128_sm90_wgmmaws_m128_n128_w12_s2 -b=4 -h=16 -s=4096 -d=128
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/ncu_env.sh
ncu_env profile || exit 1
kernel=$1; shift
force=(-force_kernel="$kernel"); [ "$kernel" = auto ] && force=()
tag=${PROFILE_TAG:+$PROFILE_TAG-}
timeout 300 "$NCU" -k "regex:${NCU_KERNEL:-fmha_fwd}" -c 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,regex:sm__pipe_tensor.*cycles_active.avg.pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_.*.avg.pct_of_peak_sustained_active" \
    -o "$OUT/${tag}prof" build-gpu/fmha run "$@" -prec="${PROFILE_PREC:-bf16}" -warmup=0 -repeat=1 -backend=cuda "${force[@]}" >"$OUT/${tag}ncu_log.txt" 2>&1
"$NCU" -i "$OUT/${tag}prof.ncu-rep" --page details >"$OUT/${tag}details.txt" 2>&1
"$NCU" -i "$OUT/${tag}prof.ncu-rep" --page source --csv --print-source sass >"$OUT/${tag}src.csv" 2>&1
rm -f "$OUT/${tag}prof.ncu-rep"
grep -E "stalled|tensor|pipe_" "$OUT/${tag}details.txt" | awk '{print $NF, $1}' | sort -g -r | head -30
