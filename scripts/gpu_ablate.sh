#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_ablate.sh VARIANTS_FILE: on a GPU machine, time variants of the tree that leave a
# stage out (timing only: such variants compute wrong numbers) against each other in one
# bench_gpu.py call, to place time inside a kernel without counters (perf-notes run 82).
# VARIANTS_FILE is sourced; each line `mk NAME [FILE SED_EXPR]...` copies the tracked
# tree to build-tNAME, applies the sed expressions to the files, and builds its CLI. F and
# S name fwd_wgmma.cuh and softmax.cuh. Example:
#   mk base
#   mk notr $F '/transpose_v(sV0 + st/d'
# Environment: AB_PREC (default fp8bf16), AB_HDIMS (128), AB_SEQS ("1024 4096 16384"),
# AB_MASKS ("full causal"). Logs and the table under $OUT.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: scripts/gpu_ablate.sh VARIANTS_FILE" >&2; exit 2; }
export FMHA_CACHE_DIR=$PWD/build-ablate-cache
CM=()
if [ -f .deps/jansson/include/jansson.h ] && [ ! -f /usr/include/jansson.h ]; then
    CM=(-DJANSSON_INCLUDE_DIR="$PWD/.deps/jansson/include" -DJANSSON_LIBRARY="$PWD/.deps/jansson/lib/libjansson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/jansson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
F=src/cuda/kernels/fwd/fwd_wgmma.cuh
S=src/cuda/kernels/device/softmax.cuh
names=()
mk() { # NAME [FILE SED_EXPR]...
    local n=$1; shift
    rm -rf "build-t$n"; mkdir -p "build-t$n"
    git ls-files | tar cf - -T - | tar xf - -C "build-t$n"
    while [ $# -gt 0 ]; do
        sed -i "$2" "build-t$n/$1"
        cmp -s "$1" "build-t$n/$1" && echo "gpu_ablate: variant $n: '$2' changed nothing in $1" >&2
        shift 2
    done
    names+=("$n")
    (cmake -S "build-t$n" -B "build-t$n/b" -DCMAKE_BUILD_TYPE=Release "${CM[@]}" >"$OUT/build_$n.log" 2>&1 &&
        cmake --build "build-t$n/b" -j8 --target fmha_cli >>"$OUT/build_$n.log" 2>&1 || tail -20 "$OUT/build_$n.log") &
}
. "$1"
wait
args=()
for n in "${names[@]}"; do args+=("$n=build-t$n/b/fmha"); done
BENCH_PREC=${AB_PREC:-fp8bf16} BENCH_HDIMS=${AB_HDIMS:-128} BENCH_SEQS=${AB_SEQS:-"1024 4096 16384"} \
    BENCH_MASKS=${AB_MASKS:-"full causal"} OUT="$OUT" python3 bench/bench_gpu.py "${args[@]}" 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
tail -5 "$OUT/bench.err"
