#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dev_tail_trim.sh: on a GPU machine, in one call, fwd_wgmma.cuh's TAIL_TRIM (the 80-key
# tile's last tile on the columns it has; perf-notes run 185): the SASS of the unmasked
# hd256 80-key kernel with and without it, the A/B of bench/ablate/tail_trim.txt (both
# forced to the 80-key tile, beside the selector's choice), -v=1 checks and the three
# sanitizers on tails of every width, then the hd256 forward conformance. Logs under $OUT.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT/sass"
n80() { echo "fmha_fwd_$1_hq256_hv256$2_sm90_wgmmaws_m128_n80_w12_s2"; } # dtype, "_lse" or ""
t0=$(date +%s)
for v in "MASK=0" "MASK=0 LSE=1"; do
    for tt in 1 0; do
        OUT=$OUT/sass scripts/fwd_sass.sh "n80_${v// /_}_trim$tt" . \
            "HDIM_QK=256 HDIM_V=256 TILE_M=128 TILE_N=80 WARPS=12 $v TAIL_TRIM=$tt" 2>&1 | head -4
    done
done
echo "== ablate at $(($(date +%s) - t0)) s"
BENCH_FORCE_base=$(n80 bf16 "") BENCH_FORCE_off=$(n80 bf16 "") AB_PREC=bf16 AB_HDIMS=256 AB_MASKS=full \
    AB_SEQS="512 1024 2048 4096 16384" OUT=$OUT/ab scripts/gpu_ablate.sh bench/ablate/tail_trim.txt >"$OUT/ab.log" 2>&1
grep -E "^d=|rror" "$OUT/ab.log" | head -40
echo "== checks at $(($(date +%s) - t0)) s"
B=build-var-base/lib/fmha
# last tiles of 1, 20, 32, 40, 60 and 80 keys; GQA; Sq != Sk both ways
for sh in "bf16 0 -b=2 -h=4 -s=77 -s_k=161" "bf16 1 -b=2 -h=4 -s=300 -s_k=100" "bf16 0 -b=16 -h=8 -s=512" \
    "fp16 0 -b=2 -h=4 -s=333 -s_k=520" "bf16 1 -b=1 -h=8 -s=1000 -s_k=460" "fp16 1 -b=3 -h=4 -s=64 -s_k=300" \
    "bf16 0 -b=2 -h=4 -h_k=2 -s=200 -s_k=400"; do
    set -- $sh
    dt=$1 lse=$2; shift 2
    echo -n "$dt lse=$lse $*: "
    $B run "$@" -d=256 -mask=0 -prec=$dt -lse=$lse -backend=cuda -v=1 -force_kernel=$(n80 $dt "$([ $lse = 1 ] && echo _lse)") 2>&1 |
        grep -E "^valid|rror" | tr '\n' ' '
    echo
done
for tool in memcheck racecheck synccheck; do
    echo -n "$tool: "
    /usr/local/cuda/bin/compute-sanitizer --tool $tool $B run -b=4 -h=8 -s=300 -s_k=520 -d=256 -mask=0 -lse=1 -prec=bf16 \
        -backend=cuda -v=1 -force_kernel=$(n80 bf16 _lse) 2>&1 | grep -E "SUMMARY|^valid" | tr '\n' ' '
    echo
done
echo "== conformance hd256 at $(($(date +%s) - t0)) s"
GPU_CHECK_BUDGET=$((585 - ($(date +%s) - t0))) GPU_CASES="100000 256" SAN_CASES=0 OUT=$OUT/conf \
    scripts/gpu_check.sh --conf-only --family fwd >"$OUT/conf.log" 2>&1
grep -E "passed|FAIL|fail" "$OUT/conf.log" | tail -4
echo "== end at $(($(date +%s) - t0)) s"
