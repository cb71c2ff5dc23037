#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bwd_tile_sweep.sh [FMHA_BIN]: on a GPU machine, time every registered dq_dk_dv tile of
# the mma.sync backward (forced by name) on FlashAttention's 16k-token shapes, bf16, hd 64
# and 128, causal and not, and the deterministic mode of each; one line per run:
# "hd MASK s TILE det ms TFLOPS". BWD_SEQS (default "1024 4096") picks the lengths.
set -uo pipefail
bin=${1:-build-gpu/fmha}
for d in 64 128; do
    # the device context registers every tile (the "all" receipt)
    tiles=$("$bin" kernels 2>/dev/null | grep -o "fmha_bwddqdkdv_bf16_hq${d}_hv${d}_sm90_mmasync_m[0-9]*_n[0-9]*_w[0-9]*_s2" | sort -u)
    for mask in 0 t; do
        for s in ${BWD_SEQS:-1024 4096}; do
            for name in $tiles; do
                tile=${name##*_mmasync_}
                forced=$name
                [ $mask = t ] && forced=${name/_hv${d}_sm90/_hv${d}_causal_sm90}
                for det in 0 1; do
                    f=$forced
                    [ $det = 1 ] && f=${forced/_sm90/_det_sm90}
                    out=$("$bin" bwd -b=$((16384 / s)) -h=$((2048 / d)) -s=$s -d=$d -prec=bf16 -mask=$mask -backend=cuda \
                        -deterministic=$det -warmup=3 -repeat=10 -force_kernel="$f" 2>&1)
                    echo "hd$d mask=$mask s=$s $tile det=$det $(grep -oE "time [0-9.]+ ms|[0-9.]+ TFLOPS" <<<"$out" | tr '\n' ' ')$(grep -m1 -oE "FMHA_STATUS_[A-Z_]+.*" <<<"$out" | cut -c1-160)"
                done
            done
        done
    done
done
