#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bwd_modes.sh [FMHA_BIN]: on a GPU machine, the backward's deterministic mode against its
# atomic one, fmha alone (no torch), on FlashAttention's 16k-token shapes (hidden 2048),
# bf16: one line per cell "hd MASK s atomic_TFLOPS det_TFLOPS det/atomic", the kernels the
# selector picks. BWD_HDIMS (default "64 128"), BWD_MASKS ("0 t"), BWD_SEQS (default
# "512 1024 2048 4096 8192 16384") pick the cells; BWD_REPEAT (default 10) the timed runs.
set -uo pipefail
bin=${1:-build-gpu/fmha}
tflops() { # the TFLOPS figure of one `fmha bwd` run, or "error: ..." when it fails
    local out
    out=$("$bin" bwd "$@" -prec=bf16 -backend=cuda -warmup=3 -repeat="${BWD_REPEAT:-10}" 2>&1)
    grep -oE "[0-9.]+ TFLOPS" <<<"$out" | head -1 | cut -d' ' -f1 | grep . ||
        echo "error: $(grep -m1 -E "FMHA_STATUS|error" <<<"$out" | cut -c1-120)"
}
printf "%-5s %-6s %6s %10s %10s %8s\n" hd mask s atomic det det/atomic
for d in ${BWD_HDIMS:-64 128}; do
    for mask in ${BWD_MASKS:-0 t}; do
        for s in ${BWD_SEQS:-512 1024 2048 4096 8192 16384}; do
            shape=(-b=$((16384 / s)) -h=$((2048 / d)) -s="$s" -d="$d" -mask="$mask")
            a=$(tflops "${shape[@]}" -deterministic=0)
            t=$(tflops "${shape[@]}" -deterministic=1)
            r=$(awk -v a="$a" -v t="$t" 'BEGIN { if (a + 0 > 0 && t + 0 > 0) printf "%.2f", t / a; else print "-" }')
            printf "%-5s %-6s %6s %10s %10s %8s\n" "$d" "$([ "$mask" = 0 ] && echo full || echo causal)" "$s" "$a" "$t" "$r"
        done
    done
done
