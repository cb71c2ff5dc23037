#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""decode_kernel_times.py: the kernels one decode call launches, for fmha and torch SDPA
(FA2, cuDNN), on the batch-1 rows of decode_bench.py, run under Nsight Compute so that
each kernel's own duration is seen apart from the launch gaps between them (which the
graph-timed bench counts). Meant for `scripts/decode_kernel_times.sh`, which runs it under
ncu without cache flushing or clock locking (the cache stays in L2, as in the bench) and
tabulates the durations by call.

Environment: DECODE_SEQS (default 2048,8192), DECODE_HEADS (32/8,64/8), DECODE_BATCHES (1).
"""
import os

import torch
from torch.nn.attention import SDPBackend

import fmha
from decode_bench import inputs, sdpa_call  # bench/ is the script's folder, first on sys.path

CALLS = 3  # per implementation; the table keeps the last (warm L2, JIT done)


def marker(label):
    """Print the call's label and launch torch's spin kernel ahead of it: in ncu's list of
    kernels, those after the n-th spin kernel belong to the n-th label."""
    print(f"CALL {label}", flush=True)
    torch.cuda._sleep(10)


def main():
    env = os.environ.get
    seqs = [int(x) for x in env("DECODE_SEQS", "2048,8192").split(",")]
    heads = [tuple(int(y) for y in x.split("/")) for x in env("DECODE_HEADS", "32/8,64/8").split(",")]
    batches = [int(x) for x in env("DECODE_BATCHES", "1").split(",")]
    for h, hk in heads:
        for b in batches:
            for sk in seqs:
                q, kc, vc, lens = inputs(b, sk, h, hk, 128)
                impls = [("fmha", lambda: fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens)),
                         ("FA2", sdpa_call(q, kc, vc, SDPBackend.FLASH_ATTENTION)),
                         ("cuDNN", sdpa_call(q, kc, vc, SDPBackend.CUDNN_ATTENTION))]
                for name, fn in impls:
                    for i in range(CALLS):
                        torch.cuda.synchronize()
                        marker(f"{h}/{hk} b{b} sk{sk} {name} {i}")
                        fn()
                        torch.cuda.synchronize()
                marker("end")  # what follows (the next row's inputs) belongs to no call
                del q, kc, vc


if __name__ == "__main__":
    main()
