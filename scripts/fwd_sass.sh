#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fwd_sass.sh NAME ROOT "DEFINES": compile one sm90 wgmma forward variant of the tree at
# ROOT with nvcc, write its SASS to $OUT/NAME.sass, and print ptxas's line (spills, C75xx
# serialisation warnings), the counts of the instructions that tell a consumer loop's
# health (HGMMA/QGMMA and the warpgroup barriers around them, R2UR: uniform copies, e.g.
# of wgmma descriptors, local-memory spills, MUFU), then the tile loop's own counts
# (sass_loop.py). Needs cuobjdump: the GPU machine has it; the development machine has
# nvcc and ptxas only, until a device call copies cuobjdump back (CONTRIBUTING.md).
#   scripts/fwd_sass.sh carry . "HDIM_QK=128 HDIM_V=128 TILE_M=128 TILE_N=128 WARPS=12 MASK=0"
# Defines left out default to 0 (FMHA_BF16=1, FMHA_STAGES=2; FMHA_STAGES=N in the environment
# sets the ring's depth).
set -euo pipefail
name=$1 root=$2
OUT=${OUT:-out}; mkdir -p "$OUT"
defs=(-DFMHA_BF16=1 -DFMHA_STAGES=${FMHA_STAGES:-2})
for d in BIAS LSE SOFTCAP SINK GROUP MASK; do defs+=(-DFMHA_$d=0); done
for kv in $3; do defs+=(-DFMHA_$kv); done
tmp=$(mktemp -d)
nvcc -cubin -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -diag-suppress 550 \
    -I "$root/src/cuda/kernels/device" -I "$root/src/cuda/kernels/fwd" -I "$root/src/cuda/kernels/fwd/wgmma" "${defs[@]}" -x cu \
    "$root/src/cuda/kernels/fwd/fwd_wgmma.cuh" -o "$tmp/k.cubin" 2>"$tmp/ptxas.txt" ||
    { cat "$tmp/ptxas.txt"; exit 1; }
cuobjdump -sass "$tmp/k.cubin" >"$OUT/$name.sass"
ptxas=$(grep -E "spill|C75[0-9][0-9]" "$tmp/ptxas.txt" | tr -s ' ' | tr '\n' ' ')
counts=""
for op in GMMA WARPGROUP.ARRIVE WARPGROUP.DEPBAR R2UR STL LDL MUFU.EX2 SYNCS BAR.SYNC; do
    counts+="$op $(grep -c "$op" "$OUT/$name.sass" || true)  "
done
echo "$name: $(grep -cE "^ +/\*[0-9a-f]+\*/ " "$OUT/$name.sass") instructions; $counts; $ptxas"
python3 "$(dirname "$0")/sass_loop.py" "$OUT/$name.sass"
rm -rf "$tmp"
