#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dev_probe_fp8_acc.sh: on a GPU machine, the fp8 forward's error against the fp8 accuracy
# rule's tolerance (docs/semantics.md, "FP8") on 700 x 1536 rows, over seeds, q scales,
# masks, hd256 and hd128 with and without LSE (perf-notes run 158). Prints the worst
# ratios, then every ratio by shape; the runs in $OUT/probe.txt.
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/variant_tree.sh
export FMHA_CACHE_DIR=$PWD/build-gpu/cache
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=OFF "${CMAKE_EXTRA[@]}" >"$OUT/build.log" 2>&1 && cmake --build build-gpu -j 16 --target fmha_cli >>"$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
F=build-gpu/fmha
one() { $F run -prec=fp8bf16 -backend=cuda -v=1 -descale=0 -b=1 -h=2 -h_k=1 -s=700 -s_k=1536 "$@" 2>&1 | awk '/check o:/{e=$4; t=$NF} /valid/{v=$2} END{printf "%s %.2f %s", e, e/t, v}'; echo "  <- $*"; }
for d in 256 128; do for lse in 0 1; do [ $d = 128 ] || [ $lse = 0 ] || continue
 for qs in 30 300 1000; do for m in 0 b:579,0; do for seed in 1 2 3 4; do
  one -d=$d -lse=$lse -q_scale=$qs -mask=$m -seed=$seed
 done; done; done; done; done | tee "$OUT/probe.txt" | awk '{print $2, $3, $5, $6, $7, $8}' | sort | uniq -c | sort -k2 -n -r | head -5
echo; awk '{r[$5" "$6" "$7" "$8]=r[$5" "$6" "$7" "$8]" "$2} END{for(k in r) print k": "r[k]}' "$OUT/probe.txt" | sort
