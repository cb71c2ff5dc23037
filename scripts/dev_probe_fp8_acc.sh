#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dev_probe_fp8_acc.sh: on a GPU machine, the fp8 forward's error against the fp8 accuracy
# rule's tolerance (docs/semantics.md, "FP8") on 700 x 1536 rows, over seeds, q scales,
# masks, head dims, with and without LSE (perf-notes run 158). Prints the worst ratios,
# then every ratio by shape; the runs in $OUT/probe.txt. PROBE_HDIMS (256 128), PROBE_LSE
# (0 1), PROBE_QS (30 300 1000), PROBE_SEEDS (1 2 3 4) pick the runs; PROBE_SQ (700) and
# PROBE_SK (1536) the rows and keys (an error that grows with the row's length shows at
# 4000-16384 keys: perf-notes run 162).
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/variant_tree.sh
export FMHA_CACHE_DIR=$PWD/build-gpu/cache
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=OFF "${CMAKE_EXTRA[@]}" >"$OUT/build.log" 2>&1 && cmake --build build-gpu -j 16 --target fmha_cli >>"$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
F=build-gpu/fmha
# each run: O's error, its ratio to the tolerance, LSE's ratio ("-" without LSE: with
# huge scores the LSE is about the row's top score, so its ratio speaks of S's
# accumulation more than O's does), pass or fail
one() { $F run -prec=fp8bf16 -backend=cuda -v=1 -descale=0 -b=1 -h=2 -h_k=1 -s="${PROBE_SQ:-700}" -s_k="${PROBE_SK:-1536}" "$@" 2>&1 |
        awk '/check o:/{e=$4; t=$NF} /check lse:/{l=$4 / $NF} /valid/{v=$2}
             END{printf "%s %.2f %s %s", e, e/t, (l == "" ? "-" : sprintf("%.2f", l)), v}'; echo "  <- $*"; }
for d in ${PROBE_HDIMS:-256 128}; do for lse in ${PROBE_LSE:-0 1}; do
 for qs in ${PROBE_QS:-30 300 1000}; do for m in 0 b:579,0; do for seed in ${PROBE_SEEDS:-1 2 3 4}; do
  one -d=$d -lse=$lse -q_scale=$qs -mask=$m -seed=$seed
 done; done; done; done; done >"$OUT/probe.txt"
echo "worst O ratios:"; sort -k2 -n -r "$OUT/probe.txt" | head -5
echo "O ratio (LSE ratio) by shape:"
awk '{k=$6" "$7" "$8" "$9; r[k]=r[k]" "$2"("$3")"} END{for(k in r) print k": "r[k]}' "$OUT/probe.txt" | sort
