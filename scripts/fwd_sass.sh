#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fwd_sass.sh NAME ROOT "DEFINES": compile one sm90 wgmma forward variant of the tree at
# ROOT with NVRTC, as the library does (scripts/nvrtc_cubin.py: nvcc's ptxas can disagree
# with NVRTC's, perf-notes run 195), write its SASS to $OUT/NAME.sass, and print ptxas's
# line (spills, C75xx serialisation warnings), the counts of the instructions that tell a
# consumer loop's health (HGMMA/QGMMA and the warpgroup barriers around them, R2UR:
# uniform copies, e.g. of wgmma descriptors, local-memory spills, MUFU), then the tile
# loop's own counts and the TMA boxes' R2URs (sass_loop.py). Needs cuobjdump: the GPU
# machine has it; the development machine has NVRTC and ptxas only (scripts/nvrtc_cubin.py
# alone prints the ptxas report there).
#   scripts/fwd_sass.sh carry . "HDIM_QK=128 HDIM_V=128 TILE_M=128 TILE_N=128 WARPS=12 MASK=0"
# Defines left out default to 0 (FMHA_BF16=1, FMHA_STAGES=2; FMHA_STAGES=N in the environment
# sets the ring's depth); a define given replaces its default.
set -euo pipefail
# the disassembler: the PATH's, or the GPU machine's copy (scripts/sass_tools.sh)
here=$(cd "$(dirname "$0")/.." && pwd)
command -v cuobjdump >/dev/null || [ ! -x "$here/.sasstools/cuobjdump" ] || export PATH="$here/.sasstools:$PATH"
command -v cuobjdump >/dev/null ||
    { echo "fwd_sass.sh: no cuobjdump (SASS_TOOLS=1 scripts/gpu_check.sh brings one back: scripts/sass_tools.sh)" >&2; exit 1; }
name=$1 root=$2
OUT=${OUT:-out}; mkdir -p "$OUT"
declare -A def=([BF16]=1 [STAGES]=${FMHA_STAGES:-2} [BIAS]=0 [LSE]=0 [SOFTCAP]=0 [SINK]=0 [GROUP]=0 [MASK]=0)
for kv in $3; do def[${kv%%=*}]=${kv#*=}; done
defs=()
for k in "${!def[@]}"; do defs+=("$k=${def[$k]}"); done
tmp=$(mktemp -d)
python3 "$(dirname "$0")/nvrtc_cubin.py" "$root" fwd/fwd_wgmma.cuh "$tmp/k.cubin" "${defs[@]}" >"$tmp/ptxas.txt" ||
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
