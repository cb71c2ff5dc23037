#!/usr/bin/env bash
# gpu_check.sh: on a GPU machine, in one call: build, run the GPU conformance grid against
# the CPU oracle's math, benchmark against torch SDPA (FA2 and cuDNN backends), and print a
# short table last. Full logs go to $OUT (or ./out).
# Usage: scripts/gpu_check.sh [--no-bench | --bench-only | --build-only]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export FMHA_CACHE_DIR=${FMHA_CACHE_DIR:-$PWD/build-gpu/cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

# A machine without Debian's libjansson-dev can bring it in .deps/jansson (include/, lib/).
CMAKE_EXTRA=()
if [ -f .deps/jansson/include/jansson.h ] && [ ! -f /usr/include/jansson.h ]; then
    CMAKE_EXTRA=(-DJANSSON_INCLUDE_DIR="$PWD/.deps/jansson/include" -DJANSSON_LIBRARY="$PWD/.deps/jansson/lib/libjansson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/jansson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

echo "== build"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${CMAKE_EXTRA[@]}" >"$OUT/build.log" 2>&1 &&
    cmake --build build-gpu -j "$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
build-gpu/fmha version
[ "${1:-}" = "--build-only" ] && exit 0
if [ "${1:-}" = "--bench-only" ]; then
    OUT="$OUT" python3 bench/bench_gpu.py build-gpu/fmha 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
    tail -5 "$OUT/bench.err"
    exit 0
fi

echo "== precompile the default receipt in parallel (the grid's other variants JIT-compile as they come)"
start=$(date +%s)
arch=sm$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
build-gpu/fmha build -arch="$arch" -j "$(nproc)" 2>/dev/null | tail -1
echo "($(($(date +%s) - start)) s)"

echo "== conformance"
start=$(date +%s)
# line-buffered so that a killed run leaves its log; a kernel that hangs ends in a timeout
timeout "${CONF_TIMEOUT:-540}" stdbuf -oL build-gpu/tests/gpu_conformance ${GPU_CASES:-} >"$OUT/conformance.log" 2>&1
conf_rc=$?
[ $conf_rc -eq 124 ] && echo "conformance: TIMEOUT after ${CONF_TIMEOUT:-540} s (a kernel hung?); last case: $(tail -1 "$OUT/conformance.log")"
grep -E "^FAIL" "$OUT/conformance.log" | head -20
conf_summary=$(grep -v "^case " "$OUT/conformance.log" | tail -1)
echo "$conf_summary ($(($(date +%s) - start)) s)"

echo "== run -v=1 on the GPU"
build-gpu/fmha run -b=2 -h=8 -s=1024 -d=128 -mask=b -v=1 -backend=cuda | tee "$OUT/run.log" | tail -4

echo "== python package on torch CUDA tensors"
FMHA_LIBRARY="$PWD/build-gpu/libfmha.so" python3 python/tests/test_torch.py >"$OUT/python.log" 2>&1
py_rc=$?
grep -E "^FAIL" "$OUT/python.log" | head; py_summary=$(tail -1 "$OUT/python.log"); echo "$py_summary"

if [ "${1:-}" != "--no-bench" ]; then
    echo "== benchmark (bf16, TFLOPS)"
    OUT="$OUT" python3 bench/bench_gpu.py build-gpu/fmha 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
    tail -5 "$OUT/bench.err"
fi

echo "== summary"
echo "conformance: $conf_summary"
grep -E "^valid:" "$OUT/run.log" | sed 's/^/run -v=1: /'
grep -E "^plan created" "$OUT/run.log" | sed 's/^/run -v=1: /'
echo "python: $py_summary"
[ $conf_rc -eq 0 ] && exit $py_rc
exit $conf_rc
