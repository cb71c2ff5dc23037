#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""decode_split_sweep.py: the decode kernel's GPU time per call against its split count
(0: the library's choice, src/cuda/splitkv.c fmha__cuda_num_splits), timed as
decode_bench.py times (a CUDA graph of whole rounds of the input sets, median replay): the
data the num_splits heuristic is checked against. bf16, hd128, contiguous cache (or pages,
SWEEP_PAGE).

Run: PYTHONPATH=python FMHA_LIBRARY=build/libfmha.so python3 bench/decode_split_sweep.py
Environment: SWEEP_HEADS (32/8,64/8), SWEEP_SEQS (2048,8192,32768), SWEEP_B1 (split
counts at batch 1: 0,8,16,24,32,48,64), SWEEP_B16 (at batch 16: 0,1,2,3,4), SWEEP_PAGE (a
page size: the caches as shuffled pages of that many tokens, a block table; default none).
The calls rotate over input sets as decode_bench.py's do (SWEEP_ROTATE=0: one set).
"""
import os

from decode_bench import inputs, kvcache_call, paged  # bench/ is the script's folder, first on sys.path
from gpu_timing import gpu_ms, rotating_sets


def main():
    env = os.environ.get
    heads = [tuple(int(y) for y in x.split("/")) for x in env("SWEEP_HEADS", "32/8,64/8").split(",")]
    seqs = [int(x) for x in env("SWEEP_SEQS", "2048,8192,32768").split(",")]
    counts = {1: [int(x) for x in env("SWEEP_B1", "0,8,16,24,32,48,64").split(",")],
              16: [int(x) for x in env("SWEEP_B16", "0,1,2,3,4").split(",")]}
    page = int(env("SWEEP_PAGE", "0"))
    rotate = env("SWEEP_ROTATE", "1") != "0"
    d = 128
    print("decode time per call in us (graph replay) against num_splits; 0 = the library's choice; " +
          (f"pages of {page} tokens" if page else "contiguous cache") + ("; calls rotate over input sets" if rotate else ""))
    for (h, hk) in heads:
        for b, ns in counts.items():
            print(f"{h}/{hk} B{b:<3} {'seqlen_k':>8} | " + " ".join(f"{n:>6}" for n in ns))
            for sk in seqs:
                kv_bytes = 2 * b * sk * hk * d * 2
                sets = [inputs(b, sk, h, hk, d) for _ in range(rotating_sets(kv_bytes) if rotate else 1)]
                if page:
                    sets = [(q, *paged(kc, vc, page), lens) for q, kc, vc, lens in sets]
                else:
                    sets = [(q, kc, vc, None, lens) for q, kc, vc, lens in sets]

                us = [1e3 * gpu_ms([kvcache_call(q, kc, vc, lens, table, n) for q, kc, vc, table, lens in sets])
                      for n in ns]
                best = min(us)
                print(f"{'':9} {sk:8d} | " + " ".join(f"{u:5.1f}{'*' if u == best else ' '}" for u in us), flush=True)
                del sets


if __name__ == "__main__":
    main()
