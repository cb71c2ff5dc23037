#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""decode_one.py: one decode problem, a few calls of one implementation, for a profiler
(scripts/decode_ncu.sh runs it under ncu beside torch SDPA's kernels on the same cache).

Run: PYTHONPATH=python FMHA_LIBRARY=build/libfmha.so python3 bench/decode_one.py IMPL B SK [H/HK]
IMPL: fmha (contiguous cache), page16 / page1 (fmha, a block table of shuffled pages),
fa2, cudnn (torch SDPA backends). bf16, hd128, one query token per sequence.
"""
import sys

import torch
from torch.nn.attention import SDPBackend

import fmha
from decode_bench import inputs, paged, sdpa_call  # bench/ is the script's folder, first on sys.path


def main():
    impl, b, sk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    h, hk = (int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "32/8").split("/"))
    q, kc, vc, lens = inputs(b, sk, h, hk, 128)
    if impl == "fmha":
        call = lambda: fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens)
    elif impl.startswith("page"):
        kp, vp, table = paged(kc, vc, int(impl[4:]))
        call = lambda: fmha.attention_with_kvcache(q, kp, vp, cache_seqlens=lens, block_table=table)
    else:
        call = sdpa_call(q, kc, vc, {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[impl])
    for _ in range(3):
        call()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
