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
#        scripts/decode_variants.sh -f VARIANTS_FILE   (one variant a line, as gpu_ablate.sh's
#        files; blank lines and # comments aside)
#        DECODE_BEFORE=DIR: also an older source tree (e.g. `git archive REV | tar -x -C
#        build-before-src`, carried to the GPU machine), built and benched as "before"
# Example: scripts/decode_variants.sh 's4:src/core/specs.c:/KF_SPLITKV), 128, 1/s/{16, 64, 4, 3}/{16, 64, 4, 4}/'
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
. scripts/variant_tree.sh

bench() { # NAME SDPA
    echo "== $1"
    PYTHONPATH=python FMHA_LIBRARY=build-var-$1/lib/libfmha.so FMHA_CACHE_DIR=$PWD/build-var-$1/cache DECODE_SDPA=$2 \
        python3 bench/decode_bench.py 2>&1 | tee "$OUT/decode-$1-$2.txt"
}

if [ "${1:-}" = -f ]; then
    [ -f "${2:-}" ] || { echo "usage: scripts/decode_variants.sh -f VARIANTS_FILE" >&2; exit 2; }
    mapfile -t variants < <(variant_lines "$2")
    set -- "${variants[@]}"
fi
variant_tree base fmha || exit 1
names=()
if [ -n "${DECODE_BEFORE:-}" ]; then
    build_tree before "$DECODE_BEFORE" fmha && names+=(before)
fi
for v in "$@"; do
    variant_tree "${v%%:*}" fmha "${v#*:}" && names+=("${v%%:*}")
done
bench base 1
for n in "${names[@]}"; do bench "$n" 0; done
bench base 0
