#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ptx_snapshot.sh ROOT OUTDIR: compile a fixed sample of forward-kernel variants of the
# tree at ROOT to PTX with nvcc (no GPU needed), one file per variant, so that a refactor
# of the device code can be checked for an unchanged PTX:
#   scripts/ptx_snapshot.sh /tmp/before /tmp/ptx.before
#   scripts/ptx_snapshot.sh . /tmp/ptx.after && diff -r /tmp/ptx.before /tmp/ptx.after
# Each variant names its defines; the mma kernel builds for sm_80, wgmma for sm_90a.
# PTX_EXTRA: more nvcc flags for every variant, split on spaces (e.g. -DJOINT_SLABS=0).
set -euo pipefail
root=$1 out=$2
mkdir -p "$out"
incs=()
while IFS= read -r d; do incs+=(-I "$d"); done < <(find "$root/src/cuda" -name '*.h' -o -name '*.cuh' | xargs -n1 dirname | sort -u)
src_of() { find "$root/src/cuda" -name "$1" | head -1; }
variants=(
  "HDIM_QK=64 HDIM_V=64 TILE_M=128 TILE_N=64 WARPS=4 MASK=0"
  "HDIM_QK=128 HDIM_V=128 TILE_M=128 TILE_N=32 WARPS=4 MASK=1 LSE=1 BIAS=1"
  "HDIM_QK=128 HDIM_V=128 TILE_M=128 TILE_N=32 WARPS=4 MASK=2 BIAS=2 SOFTCAP=1 SINK=1 BF16=1"
  "HDIM_QK=64 HDIM_V=64 TILE_M=64 TILE_N=64 WARPS=4 MASK=1 GROUP=1 BIAS=2 LSE=1"
  "HDIM_QK=192 HDIM_V=128 TILE_M=64 TILE_N=32 WARPS=4 MASK=2 LSE=1"
)
wvariants=(
  "HDIM_QK=64 HDIM_V=64 TILE_M=192 TILE_N=128 WARPS=16 MASK=0"
  "HDIM_QK=128 HDIM_V=128 TILE_M=128 TILE_N=128 WARPS=12 MASK=1 LSE=1 BIAS=1"
  "HDIM_QK=128 HDIM_V=128 TILE_M=128 TILE_N=128 WARPS=12 MASK=2 BIAS=2 SOFTCAP=1 SINK=1 BF16=1"
  "HDIM_QK=64 HDIM_V=64 TILE_M=192 TILE_N=128 WARPS=16 MASK=1 GROUP=1 BIAS=2 LSE=1"
  "HDIM_QK=256 HDIM_V=256 TILE_M=128 TILE_N=64 WARPS=12 MASK=1 LSE=1"
)
one() { # kernel arch variant
  local defs=() name=$1
  for kv in $3; do defs+=(-DFMHA_$kv); name+="_${kv//=/}"; done
  nvcc -w -ptx -std=c++17 -arch="$2" ${PTX_EXTRA:-} "${incs[@]}" "${defs[@]}" -x cu "$(src_of "$1.cuh")" -o "$out/$name.ptx" &
}
for v in "${variants[@]}"; do one fwd_mma sm_80 "$v"; done
for v in "${wvariants[@]}"; do one fwd_wgmma sm_90a "$v"; done
wait
n=$(ls "$out" | wc -l); echo "$n PTX files in $out"; [ "$n" -eq 10 ]
