#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""decode_bench.py: decode (one query token per sequence against a KV cache) on the GPU,
all in one run: fmha.attention_with_kvcache (split-KV kernels) over a contiguous cache,
over 16-token pages and over 1-token pages (pages in shuffled order, block table), and
torch SDPA's FlashAttention-2 and cuDNN backends on the contiguous cache. bf16, hd128,
Hq/Hk 32/8 and 64/8, batch x cache length. GPU time per call: a CUDA graph of at least
10 calls, whole rounds of the input sets below (gpu_timing.gpu_ms), the median of 30
replays (run 28 and before timed single eager calls, which counted the host's time per
call on the small cells); the calls rotate over copies of the inputs, at
least three times the L2 cache together, so that no call reads K and V from L2 that an
earlier one left there (run 118: before, batch 1 at 8k read 33 MB at up to 107% of the
copy bandwidth, a measure of L2, and a model's other layers pass between two reads of
one cache);
GB/s = bytes of K and V read / time (REFERENCE.md), beside the device's copy bandwidth
(a 1 GiB device-to-device copy: bytes read + written / time).

Run: PYTHONPATH=python FMHA_LIBRARY=build/libfmha.so python3 bench/decode_bench.py
Environment: DECODE_BATCHES (default 1,16,64,128), DECODE_SEQS (2048,8192,32768),
DECODE_HEADS (32/8,64/8), DECODE_PAGES (16,1; empty: contiguous only), DECODE_PAGE_ORDER
(shuffled; sequential: page i holds tokens 16i.., the contiguous cache's layout), DECODE_SDPA (1;
0: fmha's columns alone, for A/B runs of several builds: scripts/decode_variants.sh),
DECODE_ROTATE (1; 0: every call on one input set, as run 117 and before measured),
DECODE_SQ (1; N > 1: N query tokens a sequence under a bottom-right causal mask, as a
speculative decoder's verify step; torch SDPA's causal is top-left and its FA2 backend
takes no explicit mask, so the SDPA columns are left out then).
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import fmha
from gpu_timing import copy_bandwidth, gpu_ms, rotating_sets  # bench/ is the script's folder, first on sys.path


def paged(kc, vc, page, order="shuffled"):
    """The caches as pages of `page` tokens (shuffled, or in order: the contiguous cache's
    own layout, which isolates the cost of scattered pages) and their block table."""
    b, sk, hk, d = kc.shape
    npg = sk // page
    perm = torch.randperm(b * npg, device="cuda") if order == "shuffled" else torch.arange(b * npg, device="cuda")
    kp = torch.empty(b * npg, page, hk, d, device="cuda", dtype=kc.dtype)
    vp = torch.empty_like(kp)
    kp[perm] = kc.reshape(b * npg, page, hk, d)
    vp[perm] = vc.reshape(b * npg, page, hk, d)
    return kp, vp, perm.view(b, npg).to(torch.int32)


def inputs(b, sk, h, hk, d, sq=1):
    """sq query tokens per sequence against full caches of sk tokens: q, k, v, lengths."""
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    return q, kc, vc, torch.full((b,), sk, dtype=torch.int32, device="cuda")


def kvcache_call(q, kc, vc, lens, table=None, num_splits=0):
    """fmha.attention_with_kvcache on one input set (a block table: kc, vc are pages;
    num_splits 0: the library's choice); causal (bottom-right) where q has several tokens."""
    return lambda: fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table,
                                               num_splits=num_splits, causal=q.shape[1] > 1)


def sdpa_call(q, kc, vc, backend):
    """torch SDPA on the same caches (heads-major views, GQA), with one backend."""
    qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)

    def call():
        with sdpa_kernel(backend):
            F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    return call


def main():
    env = os.environ.get
    batches = [int(x) for x in env("DECODE_BATCHES", "1,16,64,128").split(",")]
    seqs = [int(x) for x in env("DECODE_SEQS", "2048,8192,32768").split(",")]
    heads = [tuple(int(y) for y in x.split("/")) for x in env("DECODE_HEADS", "32/8,64/8").split(",")]
    pages = [int(x) for x in env("DECODE_PAGES", "16,1").split(",") if x]
    sq = int(env("DECODE_SQ", "1"))
    if sq < 1:
        sys.exit(f"decode_bench.py: DECODE_SQ is {sq}; expected a query count of 1 or more")
    sdpa = env("DECODE_SDPA", "1") != "0" and sq == 1
    rotate = env("DECODE_ROTATE", "1") != "0"
    order = env("DECODE_PAGE_ORDER", "shuffled")
    if order not in ("shuffled", "sequential"):
        sys.exit(f"decode_bench.py: DECODE_PAGE_ORDER is {order!r}; expected shuffled or sequential")
    d = 128
    bw = copy_bandwidth()
    print(f"device copy bandwidth: {bw:.0f} GB/s (bf16, hd{d}, {sq} query token{'s, causal' if sq > 1 else ''} "
          f"a sequence; GB/s of K+V read; best = the better of FA2/cuDNN; "
          f"{order} pages; " + ("calls rotate over input sets of 3x L2 together)" if rotate else "one input set)"))
    cols = ["contig"] + [f"page{p}" for p in pages] + (["FA2", "cuDNN"] if sdpa else [])
    print(f"{'heads':>6} {'batch':>5} {'seqlen_k':>8} | " + " ".join(f"{c:>7}" for c in cols) +
          (" | contig/best" if sdpa else " |") + "  %copy" + "".join(f"  page{p}/contig" for p in pages))
    for h, hk in heads:
        for b in batches:
            for sk in seqs:
                if 2 * b * sk * hk * d * 2 * (1 + (1 if pages else 0)) > 40 << 30:
                    continue
                kv_bytes = 2 * b * sk * hk * d * 2
                sets = [inputs(b, sk, h, hk, d, sq) for _ in range(rotating_sets(kv_bytes) if rotate else 1)]
                ms = [gpu_ms([kvcache_call(q, kc, vc, lens) for q, kc, vc, lens in sets])]
                for p in pages:
                    pg = [(q, *paged(kc, vc, p, order), lens) for q, kc, vc, lens in sets]
                    ms.append(gpu_ms([kvcache_call(q, kp, vp, lens, table) for q, kp, vp, table, lens in pg]))
                    del pg
                for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION) if sdpa else ():
                    try:
                        ms.append(gpu_ms([sdpa_call(q, kc, vc, backend) for q, kc, vc, _ in sets]))
                    except RuntimeError:
                        ms.append(float("nan"))
                rate = [kv_bytes / (m * 1e6) for m in ms]
                line = f"{h:>3}/{hk:<2} {b:5d} {sk:8d} | " + " ".join(f"{r:7.0f}" for r in rate)
                line += f" | {rate[0] / max(rate[-2], rate[-1]):10.3f}" if sdpa else " |"  # ties at the roof
                line += f"  {100 * rate[0] / bw:4.0f}%"
                line += "".join(f"  {rate[1 + i] / rate[0]:11.2f}" for i in range(len(pages)))
                print(line, flush=True)
                del sets


if __name__ == "__main__":
    main()
