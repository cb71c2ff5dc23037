#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_sass_loop.sh PYTHON SRC: scripts/sass_loop.py on a made-up cuobjdump -sass listing (the
# GPU machine makes real ones: scripts/fwd_sass.sh): the innermost loop with 8 HGMMA and an
# exponential is found and counted, and the TMA loads' R2URs are counted only where they
# set up a box (the few instructions before a UTMALDG), predicated or not.
set -eu
python=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
    a=0
    ins() { printf '        /*%04x*/                   %s ;\n' "$a" "$1"; a=$((a + 16)); }
    ins "R2UR UR4, R2"                 # far from any box: not counted
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do ins "IADD3 R1, R1, 0x1, RZ"; done
    ins "@P2 R2UR UR13, R2"            # a vector producer's box: two R2UR before it
    ins "@P2 R2UR UR12, R9"
    ins "PLOP3.LUT P2, PT, PT, PT, PT, 0x8, 0x0"
    ins "UTMALDG.4D [UR8], [UR18]"
    ins "UMOV UR19, UR11"              # a uniform producer's box: none
    ins "UTMALDG.4D [UR16], [UR6]"
    top=$a
    for i in 1 2 3 4 5 6 7 8; do ins "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24"; done
    ins "MUFU.EX2 R3, R3"
    ins "R2UR UR5, R4"
    ins "$(printf '@P0 BRA 0x%x' "$top")"
    ins "EXIT"
} >"$work/k.sass"
out=$("$python" "$src/scripts/sass_loop.py" "$work/k.sass")
echo "$out"
grep -q "^tile loop 0x130-0x1d0: 11 instructions; GMMA 8, R2UR 1, .* MUFU.EX2 1$" <<<"$out" ||
    { echo "FAIL: the tile loop"; exit 1; }
grep -q "^TMA boxes: 2 UTMALDG, 2 R2UR in the 8 instructions before them$" <<<"$out" ||
    { echo "FAIL: the boxes' R2URs"; exit 1; }
echo "ok"
