#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# decode_split_sweep.sh: on a GPU machine after scripts/gpu_check.sh built build-gpu, the
# decode kernel's time per call (fmha run, 200 back-to-back launches) against the split
# count (0: the library's choice) at batch 1 and 16, Hq/Hk 32/8, hd128, bf16: the data the
# num_splits heuristic (src/cuda/splitkv.c) is checked against.
for h in 32; do for sk in 2048 8192 32768; do for n in 0 4 8 16 32 64; do
  t=$(build-gpu/fmha run -backend=cuda -family=fwd_splitkv -num_splits=$n -b=1 -h=$h -h_k=8 -s=1 -s_k=$sk -d=128 -prec=bf16 -iperm=0 -operm=0 -warmup=20 -repeat=200 2>&1 | grep -o "time [0-9.]* ms")
  echo "B1 h$h sk$sk splits $n: $t"
done; done; done
for sk in 2048 8192; do for n in 0 1 2 4; do
  t=$(build-gpu/fmha run -backend=cuda -family=fwd_splitkv -num_splits=$n -b=16 -h=32 -h_k=8 -s=1 -s_k=$sk -d=128 -prec=bf16 -iperm=0 -operm=0 -warmup=20 -repeat=200 2>&1 | grep -o "time [0-9.]* ms")
  echo "B16 sk$sk splits $n: $t"
done; done
