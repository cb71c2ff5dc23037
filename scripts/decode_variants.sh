#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# decode_variants.sh: on a GPU machine, an A/B of decode kernel variants in one call. Each
# variant is this tree with one sed expression applied to one file (a tile row of
# src/core/specs.c, a macro of a kernel header); each builds its own libfmha (the kernels
# are JIT-compiled, so a build takes seconds) and runs bench/decode_bench.py with its own
# kernel cache. The unchanged tree runs first with the SDPA columns and last without them,
# so the spread of the two shows the noise.
# Usage: scripts/decode_variants.sh NAME:FILE:SED_EXPR[@@FILE:SED_EXPR...] ...   (DECODE_* as
#        decode_bench.py; @@ separates the edits of one variant)
# Example: scripts/decode_variants.sh 's4:src/core/specs.c:/KF_SPLITKV), 128, 1/s/{16, 64, 4, 3}/{16, 64, 4, 4}/'
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
CMAKE_EXTRA=()
if [ -f .deps/jansson/include/jansson.h ] && [ ! -f /usr/include/jansson.h ]; then
    CMAKE_EXTRA=(-DJANSSON_INCLUDE_DIR="$PWD/.deps/jansson/include" -DJANSSON_LIBRARY="$PWD/.deps/jansson/lib/libjansson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/jansson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# tree NAME [EDITS]: build-var-NAME/src with the edits (FILE:EXPR@@...) applied, its
# library in build-var-NAME/lib
tree() {
    local dir=build-var-$1 edit file expr
    rm -rf "$dir" && mkdir -p "$dir/src"
    git ls-files | tar -cT - | tar -x -C "$dir/src"
    local rest=${2:-}
    while [ -n "$rest" ]; do
        edit=${rest%%@@*}
        [ "$edit" = "$rest" ] && rest="" || rest=${rest#*@@}
        file=${edit%%:*} expr=${edit#*:}
        cp "$dir/src/$file" "$dir/orig"
        sed -i "$expr" "$dir/src/$file"
        if cmp -s "$dir/orig" "$dir/src/$file"; then echo "variant $1: '$expr' changed nothing in $file" >&2; return 1; fi
        diff "$dir/orig" "$dir/src/$file" | sed "s/^/  $1: /"
    done
    { cmake -S "$dir/src" -B "$dir/lib" -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=OFF "${CMAKE_EXTRA[@]}" &&
        cmake --build "$dir/lib" -j "$(nproc)" --target fmha; } >"$OUT/build-$1.log" 2>&1 || {
        tail -20 "$OUT/build-$1.log"; return 1; }
}
bench() { # NAME SDPA
    echo "== $1"
    PYTHONPATH=python FMHA_LIBRARY=build-var-$1/lib/libfmha.so FMHA_CACHE_DIR=$PWD/build-var-$1/cache DECODE_SDPA=$2 \
        python3 bench/decode_bench.py 2>&1 | tee "$OUT/decode-$1-$2.txt"
}

tree base || exit 1
names=()
for v in "$@"; do
    tree "${v%%:*}" "${v#*:}" && names+=("${v%%:*}")
done
bench base 1
for n in "${names[@]}"; do bench "$n" 0; done
bench base 0
