#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dev_stale_max.sh: one device call for the stale-max softmax (perf-notes run 157): the
# bench against the variants of bench/ablate/stale_max.txt (plain data, q scaled 3x:
# randn-like scores, and 8x), -v=1 on shapes whose max moves, the whole fp8 grid,
# conf_numerics, memcheck, racecheck and synccheck. VARIANTS (default nostale): which
# variants of the file.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/variant_tree.sh
export FMHA_CACHE_DIR=$PWD/build-gpu/cache
t0=$(date +%s)
build() { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=ON "${CMAKE_EXTRA[@]}" &&
          cmake --build build-gpu -j 8; } >"$OUT/build.log" 2>&1
build & pids=($!)
names=()
variant_trees stale bench/ablate/stale_max.txt "${VARIANTS:-nostale}"
for p in "${pids[@]}"; do wait $p || { tail -20 "$OUT"/build*.log; exit 1; }; done
echo "== built in $(( $(date +%s) - t0 )) s"
args=(); for n in "${names[@]}"; do args+=("$n=build-var-$n/lib/fmha"); done
ab() { BENCH_PREC=fp8bf16 BENCH_HDIMS=128 BENCH_SEQS=${SEQS:-"1024 4096 16384"} BENCH_MASKS="full causal" OUT="$OUT" \
       python3 bench/bench_gpu.py "${args[@]}" 2>>"$OUT/bench.err"; }
echo "== bench (plain data)"; ab | tee "$OUT/bench_plain.txt"
echo "== bench (q x3, randn-like)"; BENCH_ARGS="-q_scale=3 -descale=0" SEQS="4096 16384" ab | tee "$OUT/bench_q3.txt"
echo "== bench (q x8)"; BENCH_ARGS="-q_scale=8 -descale=0" SEQS="4096 16384" ab | tee "$OUT/bench_q8.txt"
echo "== bench done at $(( $(date +%s) - t0 )) s"
F=build-gpu/fmha
v1() { timeout 60 $F run -prec=fp8bf16 -backend=cuda -v=1 -descale=0 "$@" 2>&1 | grep -E "valid|error|check" | tr '\n' ' '; echo " <- $*"; }
{
for qs in 1 3 8 30 300 10000; do
  v1 -b=1 -h=2 -h_k=1 -s=700 -s_k=1536 -d=128 -mask=0 -q_scale=$qs
  v1 -b=1 -h=2 -h_k=1 -s=700 -s_k=1536 -d=128 -mask=b:579,0 -q_scale=$qs -lse=1
done
v1 -b=2 -h=4 -h_k=2 -s=1000 -s_k=3000 -d=128 -mask=t -q_scale=300 -descale=2
v1 -b=1 -h=4 -s=2049 -d=128 -mask=0 -q_scale=30 -softcap=20 -init_sink=1 -lse=1
v1 -b=1 -h=4 -s=2049 -d=128 -mask=b:300,40 -q_scale=300 -scale=-0.1
v1 -b=1 -h=2 -s=777 -s_k=1600 -d=128 -mask=0 -poison=nan_k -q_scale=30
v1 -b=1 -h=2 -h_k=1 -s=700 -s_k=1536 -d=128 -mask=b:579,0 -softcap=30 -seed=955 -q_scale=10000
v1 -b=1 -h=2 -h_k=1 -s=700 -s_k=1536 -d=128 -mask=b:579,0 -softcap=30 -seed=955 -q_scale=10000 -lse=1
v1 -b=1 -h=2 -h_k=1 -s=700 -s_k=1536 -d=128 -mask=b:579,0 -seed=951 -q_scale=30
v1 -b=3 -h=8 -h_k=2 -s=4000 -d=128 -mask=t -q_scale=8
} | tee "$OUT/v1.txt"
echo "== conformance"
for hd in 64 128 256; do timeout 230 build-gpu/tests/gpu_conf_fp8 1000000 $hd >"$OUT/conf_fp8_$hd.log" 2>&1 & done
timeout 230 build-gpu/tests/gpu_conf_numerics >"$OUT/conf_numerics.log" 2>&1 &
wait
for f in "$OUT"/conf_fp8_*.log "$OUT/conf_numerics.log"; do echo "$f: $(grep -v "^case " "$f" | tail -1)"; grep -E "^FAIL" "$f" | head -5; done
echo "== sanitizers"
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $F run -prec=fp8bf16 -backend=cuda -v=1 -b=1 -h=2 -h_k=1 -s=300 -s_k=1536 -d=128 -mask=b:579,0 -q_scale=300 -descale=0 >"$OUT/san_$tool.log" 2>&1
  echo "$tool rc $?: $(grep -E "ERROR SUMMARY|valid" "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "== done at $(( $(date +%s) - t0 )) s"
cat "$OUT"/bench_*.txt
