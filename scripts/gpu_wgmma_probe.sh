#!/usr/bin/env bash
# gpu_wgmma_probe.sh: on a GPU machine: full conformance (no bench), then the sm90 wgmma kernel forced
# on hd64/hd128 cells of the benchmark, and its ptxas report and SASS spill count. A dev loop
# for kernel work; scripts/gpu_check.sh is the full one-call check. Logs under $OUT.
cd "$(dirname "$0")/.."; OUT=${OUT:-out}; mkdir -p "$OUT"
set -u
export FMHA_CACHE_DIR=$PWD/build-gpu/cache
CONF_TIMEOUT=${CONF_TIMEOUT:-500} scripts/gpu_check.sh --no-bench > $OUT/check.txt 2>&1; tail -6 $OUT/check.txt
B=build-gpu/fmha
for d in 64 128; do
  if [ $d = 64 ]; then t=m192_n128_w16_s2; else t=m128_n128_w12_s2; fi
  for m in none causal; do
    mk=$([ $m = none ] && echo 0 || echo t); infix=$([ $m = none ] && echo "" || echo "causal_")
    for s in 1024 4096 16384; do
      b=$((16384/s)); h=$((2048/d))
      r=$(FMHA_DEBUG=1 timeout 30 $B run -b=$b -h=$h -s=$s -d=$d -prec=bf16 -mask=$mk -warmup=5 -repeat=20 -backend=cuda -force_kernel=fmha_fwd_bf16_hq${d}_hv${d}_${infix}sm90_wgmmaws_$t 2>&1 | grep -E "fmha:|TFLOP" | tr '\n' ' ')
      echo "wgmma d=$d $m s=$s: $r"
    done
  done
done
for f in $(ls $FMHA_CACHE_DIR/*.cubin 2>/dev/null | head -400); do :; done
ls $FMHA_CACHE_DIR | head -3
for d in 64 128; do tm=$([ $d = 64 ] && echo 192 || echo 128); w=$([ $d = 64 ] && echo 16 || echo 12)
nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -Isrc/cuda/kernels -Isrc/cuda -DFMHA_BF16=1 -DFMHA_HDIM_QK=$d -DFMHA_TILE_M=$tm -DFMHA_TILE_N=128 -DFMHA_WARPS=$w -x cu src/cuda/kernels/fwd_wgmma.cuh -o /tmp/w$d.cubin 2>&1 | grep -E "registers|spill"
cuobjdump -sass /tmp/w$d.cubin > $OUT/w$d.sass
# the producer's code follows its register DEALLOC; spills before it are the consumers'
awk -v d=$d '/DEALLOC/{p=1} /STL|LDL/{n[p]++} /HGMMA/{h++} END{printf "d=%s spill ops: consumers %d, producer %d; HGMMA %d\n", d, n[0], n[1], h}' $OUT/w$d.sass
done
