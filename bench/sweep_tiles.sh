#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sweep_tiles.sh FMHA_BIN: time every registered tile of a few forward signatures by forcing
# each kernel (bf16, 16k tokens), to choose the tile tables' order from measurements.
fmha=$1
for d in ${SWEEP_HDIMS:-64 128}; do
    for mask in nomask causal; do
        s=4096; b=4; h=$((2048 / d))
        flag=$([ $mask = causal ] && echo t || echo 0)
        filter="family==fwd && dtype==bf16 && hdim_qk==$d && mask==$mask && !lse && !bias && !softcap && !sink && !dropout && mode==batch && pipeline==mmasync"
        for k in $($fmha enumerate --arch=sm90 --receipt=all --filter "$filter" --list | grep '^fmha_'); do
            t=$($fmha run -b=$b -h=$h -s=$s -d=$d -prec=bf16 -mask=$flag -warmup=5 -repeat=20 -backend=cuda -force_kernel=$k | grep -o '[0-9.]* TFLOPS')
            echo "d=$d $mask $k: $t"
        done
    done
done
