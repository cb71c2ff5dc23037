#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# jit_cache_pack.sh: compile here, without a GPU (NVRTC), every kernel that the conformance
# grids and the default receipt plan for ARCH, and pack the cubins into
# .jit-cache/ARCH.tar.xz (git-ignored) for a device call to carry (`carry: [".deps",
# ".jit-cache"]`). gpu_check.sh unpacks it into its cache before its precompile, which then
# compiles only what the pack lacks (perf-notes run 171: the precompile took 129 s of a
# call on 16 cores). A cubin's cache key covers the kernel sources and headers, the
# defines, the NVRTC version and fmha's version, so any kernel change makes the pack stale
# (run this again); a stale or foreign entry is never loaded, only left unused.
# Usage: scripts/jit_cache_pack.sh [ARCH]   (default sm90; BUILD, default build-gpu, must
#        hold a build with FMHA_BUILD_TESTS=ON; JOBS, default nproc; FRESH=1 ignores the
#        last pack)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-sm90} build=${BUILD:-build-gpu} jobs=${JOBS:-$(nproc)}
. scripts/grid_kernels.sh
[ -x "$build/fmha" ] && ls "$build"/tests/gpu_conf_* >/dev/null 2>&1 ||
    { echo "jit_cache_pack.sh: no fmha build with tests in $build (cmake -DFMHA_BUILD_TESTS=ON)" >&2; exit 2; }
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
fams=()
for bin in "$build"/tests/gpu_conf_*; do fams+=("${bin##*/gpu_conf_}"); done
grid_kernels "$build" "$arch" "$cache/names.txt" 1000000 0 "${fams[@]}"
echo "$(wc -l <"$cache/names.txt") kernels listed for $arch; compiling on $jobs cores"
start=$(date +%s)
# The last pack seeds the cache, so that only what changed compiles again (a full compile
# is 10-40 min on 2 cores). Its entries' access times go to the epoch: an entry this build
# reads (its key still current) gets today's, and only those and the new ones are packed.
mkdir -p "$cache/c"
if [ -f ".jit-cache/$arch.tar.xz" ] && [ -z "${FRESH:-}" ]; then
    tar -xJf ".jit-cache/$arch.tar.xz" -C "$cache/c"
    find "$cache/c" -name '*.cubin' -exec touch -a -d @0 {} +
    echo "seeded from .jit-cache/$arch.tar.xz: $(ls "$cache/c" | grep -c '\.cubin$') cubins (FRESH=1: start empty)"
fi
FMHA_CACHE_DIR="$cache/c" "$build/fmha" build -arch="$arch" -names="$cache/names.txt" -j "$jobs" | tail -1
FMHA_CACHE_DIR="$cache/c" "$build/fmha" build -arch="$arch" -j "$jobs" | tail -1 # the default receipt
mkdir -p .jit-cache
(cd "$cache/c" && find . -maxdepth 1 -name '*.cubin' -newerat @1 -printf '%f\n' | sort >"$cache/cubins.txt" &&
    tar -cf - -T "$cache/cubins.txt" | xz -T "$jobs" -6 >"$cache/pack.tar.xz")
mv "$cache/pack.tar.xz" ".jit-cache/$arch.tar.xz"
echo ".jit-cache/$arch.tar.xz: $(wc -l <"$cache/cubins.txt") cubins, $(du -h ".jit-cache/$arch.tar.xz" | cut -f1), in $(($(date +%s) - start)) s; tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' with uncommitted kernel changes')"
