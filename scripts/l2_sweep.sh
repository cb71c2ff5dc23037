#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# l2_sweep.sh: on a GPU machine, time the masked forward's short cells with the L2 size
# its head groups are sized by (FMHA_L2_BYTES, backend.c; grid_order.h fmha_l2_layout) at several
# values, alternating, in one process tree (perf-notes run 181). Prints TFLOPS (best of
# L2_REPEAT runs of -repeat=20) per cell and value. Environment: L2_VALUES (bytes; "dev"
# is the device's own), L2_CELLS ("hdim:seqlen" list), L2_REPEAT (default 3), L2_MASK (t).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export FMHA_CACHE_DIR=${FMHA_CACHE_DIR:-$PWD/build-gpu/cache}
[ -x build-gpu/fmha ] || GPU_CHECK_BUDGET=300 OUT="$OUT/build" scripts/gpu_check.sh --build-only >"$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
values=${L2_VALUES:-"dev 104857600 26214400 13107200 6553600"}
cells=${L2_CELLS:-"128:512 256:512 64:512 128:1024 256:1024"}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv,noheader
for cell in $cells; do
    d=${cell%:*} s=${cell#*:}
    b=$((16384 / s)) h=$((2048 / d))
    declare -A best=()
    for _ in $(seq "${L2_REPEAT:-3}"); do
        for v in $values; do
            env_l2=(); [ "$v" = dev ] || env_l2=(FMHA_L2_BYTES="$v")
            ms=$(env "${env_l2[@]}" build-gpu/fmha run -b=$b -h=$h -s=$s -d=$d -prec=bf16 -mask=${L2_MASK:-t} \
                -warmup=5 -repeat=20 -backend=cuda | sed -n 's/.*time \([0-9.]*\) ms.*/\1/p' | head -1)
            [ -n "$ms" ] || { echo "cell $cell L2 $v: no time" >&2; continue; }
            if [ -z "${best[$v]:-}" ] || awk "BEGIN{exit !($ms < ${best[$v]})}"; then best[$v]=$ms; fi
        done
    done
    line="d=$d s=$s b=$b h=$h"
    for v in $values; do
        t=${best[$v]:-0}
        line+=$(awk -v b=$b -v h=$h -v s=$s -v d=$d -v t=$t -v v=$v -v c=${L2_MASK:-t} 'BEGIN{
            p = (c == "t") ? s * (s + 1) / 2 : s * s
            printf "  %s %.1f", v, (t > 0 ? 4.0 * b * h * d * p / (t * 1e-3) / 1e12 : 0) }')
    done
    echo "$line" | tee -a "$OUT/l2_sweep.txt"
    unset best
done
