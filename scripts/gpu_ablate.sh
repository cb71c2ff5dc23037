#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_ablate.sh VARIANTS_FILE: on a GPU machine, time variants of the tree that leave a
# stage out (timing only: such variants compute wrong numbers) against the tree itself in
# one bench_gpu.py call (each cell alternating over the binaries), to place time inside a
# kernel without counters (perf-notes run 82). Each line of VARIANTS_FILE (blank lines and
# # comments aside) is NAME:FILE:SED_EXPR[@@FILE:SED_EXPR...], as decode_variants.sh's
# arguments; the unchanged tree runs as "base". Every tree builds its CLI in parallel
# (variant_tree.sh).
# Environment: AB_PREC (default fp8bf16), AB_HDIMS (128), AB_SEQS ("1024 4096 16384"),
# AB_MASKS ("full causal"); AB_BEFORE=DIR also builds an older checkout in DIR (its CLI,
# as it is) and times it as "before" beside the variants. Logs and the table under $OUT.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: scripts/gpu_ablate.sh VARIANTS_FILE" >&2; exit 2; }
. scripts/variant_tree.sh
export FMHA_CACHE_DIR=$PWD/build-ablate-cache
names=() pids=()
variant_trees base "$1"
if [ -n "${AB_BEFORE:-}" ]; then
    names+=(before)
    build_tree before "$AB_BEFORE" fmha_cli & pids+=($!)
fi
for pid in "${pids[@]}"; do wait "$pid" || exit 1; done
args=()
for n in "${names[@]}"; do args+=("$n=build-var-$n/lib/fmha"); done
BENCH_PREC=${AB_PREC:-fp8bf16} BENCH_HDIMS=${AB_HDIMS:-128} BENCH_SEQS=${AB_SEQS:-"1024 4096 16384"} \
    BENCH_MASKS=${AB_MASKS:-"full causal"} OUT="$OUT" python3 bench/bench_gpu.py "${args[@]}" 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
tail -5 "$OUT/bench.err"
