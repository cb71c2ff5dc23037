#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_wgmma_probe.sh: on a GPU machine, a dev loop for the sm90 wgmma kernel: conformance,
# then the wgmma kernel forced on cells of the benchmark, then its ptxas report (NVRTC's)
# and SASS spill count. scripts/gpu_check.sh is the full one-call check. Logs under $OUT.
# Usage: scripts/gpu_wgmma_probe.sh [HDIM...]   (default 64 128 256)
#   PROBE_CONF=all (default) | none | a head dim: which conformance cases run first
#   PROBE_SEQS="1024 4096 16384": the sequence lengths forced
cd "$(dirname "$0")/.."; OUT=${OUT:-out}; mkdir -p "$OUT"
set -u
export FMHA_CACHE_DIR=$PWD/build-gpu/cache
HDIMS=${*:-64 128 256}
tile_of() { case $1 in 64) echo m192_n128_w16_s2 ;; 128) echo m128_n128_w12_s2 ;; 256) echo m128_n64_w12_s2 ;; esac; }
case ${PROBE_CONF:-all} in
  none) scripts/gpu_check.sh --build-only > $OUT/check.txt 2>&1 || { tail -30 $OUT/check.txt; exit 1; } ;;
  all) CONF_TIMEOUT=${CONF_TIMEOUT:-500} scripts/gpu_check.sh --no-bench > $OUT/check.txt 2>&1; tail -6 $OUT/check.txt ;;
  *) GPU_CASES="100000 $PROBE_CONF" CONF_TIMEOUT=${CONF_TIMEOUT:-300} scripts/gpu_check.sh --no-bench > $OUT/check.txt 2>&1
     tail -6 $OUT/check.txt ;;
esac
B=build-gpu/fmha
for d in $HDIMS; do
  t=$(tile_of $d)
  for m in none causal; do
    mk=$([ $m = none ] && echo 0 || echo t); infix=$([ $m = none ] && echo "" || echo "causal_")
    for s in ${PROBE_SEQS:-1024 4096 16384}; do
      b=$((16384/s)); h=$((2048/d))
      r=$(FMHA_DEBUG=1 timeout 30 $B run -b=$b -h=$h -s=$s -d=$d -prec=bf16 -mask=$mk -warmup=5 -repeat=20 -backend=cuda -force_kernel=fmha_fwd_bf16_hq${d}_hv${d}_${infix}sm90_wgmmaws_$t 2>&1 | grep -E "fmha:|TFLOP|rror" | tr '\n' ' ')
      echo "wgmma d=$d $m s=$s: $r"
    done
  done
done
for d in $HDIMS; do for mk in 0 1; do
  t=$(tile_of $d); tm=${t#m}; tm=${tm%%_*}; tn=${t#*_n}; tn=${tn%%_*}; w=${t#*_w}; w=${w%%_*}
  # NVRTC, as the library builds it (nvcc's ptxas can disagree: perf-notes run 195)
  python3 scripts/nvrtc_cubin.py . fwd/fwd_wgmma.cuh /tmp/w$d.cubin BF16=1 HDIM_QK=$d HDIM_V=$d TILE_M=$tm TILE_N=$tn \
      WARPS=$w MASK=$mk STAGES=2 BIAS=0 LSE=0 SOFTCAP=0 SINK=0 GROUP=0 | grep -E "spill|C75"
  cuobjdump -sass /tmp/w$d.cubin > $OUT/w${d}_mask$mk.sass
  # the producer's code follows its register DEALLOC; spills before it are the consumers'
  awk -v d=$d -v mk=$mk '/DEALLOC/{p=1} /STL|LDL/{n[p]++} /HGMMA/{h++} END{printf "d=%s mask=%s spill ops: consumers %d, producer %d; HGMMA %d\n", d, mk, n[0], n[1], h}' $OUT/w${d}_mask$mk.sass
done; done
