# SPDX-License-Identifier: MIT
# ncu_env.sh: sourced (from the repository root) by the Nsight Compute scripts,
# gpu_profile.sh and decode_kernel_times.sh.
# - ncu_env NAME: builds build-gpu (scripts/gpu_check.sh --build-only; log
#   $OUT/build_NAME.log, its tail on failure), points the JIT cache at build-gpu/cache,
#   puts a carried jansson (.deps) on the library path and sets NCU to the profiler.
ncu_env() {
    export FMHA_CACHE_DIR=${FMHA_CACHE_DIR:-$PWD/build-gpu/cache}
    scripts/gpu_check.sh --build-only >"$OUT/build_$1.log" 2>&1 || { tail -20 "$OUT/build_$1.log"; return 1; }
    [ -f .deps/jansson/lib/libjansson.so ] &&
        export LD_LIBRARY_PATH="$PWD/.deps/jansson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
}
