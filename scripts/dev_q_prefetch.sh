#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dev_q_prefetch.sh: on a GPU machine, in one call, fwd_wgmma.cuh's Q_PREFETCH (each next
# item's Q fetched into L2 before the producer waits to hand it over; off in the tree;
# perf-notes run 187, where it ran on the H200 with the switch on by default):
# the A/B of bench/ablate/q_prefetch.txt in bf16 and fp8, the phase clocks of the short
# cells with and without it, -v=1 checks and the three sanitizers on persistent launches,
# then the forward conformance in the time left. Logs under $OUT.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
t0=$(date +%s)
at() { echo "== $1 at $(($(date +%s) - t0)) s"; }
at "bf16 A/B"
AB_PREC=bf16 AB_HDIMS="64 128 256" AB_MASKS="full causal" AB_SEQS="512 1024 4096" OUT=$OUT/ab16 \
    scripts/gpu_ablate.sh bench/ablate/q_prefetch.txt >"$OUT/ab16.log" 2>&1
grep -E "^d=|^\||rror" "$OUT/ab16.log" | head -60
at "fp8 A/B"
AB_PREC=fp8bf16 AB_HDIMS="128 256" AB_MASKS="full causal" AB_SEQS="1024 4096 8192" OUT=$OUT/ab8 \
    scripts/gpu_ablate.sh bench/ablate/q_prefetch.txt >"$OUT/ab8.log" 2>&1
grep -E "^d=|^\||rror" "$OUT/ab8.log" | head -40
cells=("-b=32 -h=32 -s=512 -d=64 -mask=t -prec=bf16" "-b=32 -h=8 -s=512 -d=256 -mask=0 -prec=bf16"
    "-b=32 -h=16 -s=512 -d=128 -mask=0 -prec=bf16")
for pf in 1 0; do
    at "phase clocks, Q_PREFETCH $pf"
    edit=""
    [ $pf = 1 ] && edit="src/cuda/kernels/fwd/fwd_wgmma.cuh:s|#define FMHA_Q_PREFETCH 0|#define FMHA_Q_PREFETCH 1|"
    PHASE_FILE=src/cuda/kernels/fwd/fwd_wgmma.cuh PHASE_EDITS="$edit" OUT=$OUT/phases$pf \
        scripts/phase_clocks.sh "${cells[@]}" >"$OUT/phases$pf.log" 2>&1
    grep -E "^==|^ [1-7] |  tile  |overlapped" "$OUT/phases$pf.log"
done
at "checks"
B=build-var-on/lib/fmha # the prefetch on
for sh in "-b=8 -h=32 -s=600 -d=64 -mask=t -lse=1 -prec=bf16" "-b=16 -h=8 -s=520 -d=256 -mask=0 -prec=bf16" \
    "-b=8 -h=16 -h_k=4 -s=700 -s_k=900 -d=128 -mask=b -prec=fp16" "-b=4 -h=16 -s=1000 -d=128 -mask=t -prec=fp8bf16" \
    "-b=4 -h=8 -s=777 -d=256 -mask=0 -prec=fp8bf16"; do
    echo -n "$sh: "
    $B run $sh -backend=cuda -v=1 2>&1 | grep -E "^valid|rror" | tr '\n' ' '
    echo
done
for tool in memcheck racecheck synccheck; do
    echo -n "$tool: "
    /usr/local/cuda/bin/compute-sanitizer --tool $tool $B run -b=4 -h=32 -s=600 -d=64 -mask=t -prec=bf16 \
        -backend=cuda -v=1 2>&1 | grep -E "SUMMARY|^valid" | tr '\n' ' '
    echo
done
at "conformance"
GPU_CHECK_BUDGET=$((585 - ($(date +%s) - t0))) SAN_CASES=0 OUT=$OUT/conf \
    scripts/gpu_check.sh --conf-only --family fwd,fp8 >"$OUT/conf.log" 2>&1
grep -E "passed|FAIL|fail" "$OUT/conf.log" | tail -6
at "end"
