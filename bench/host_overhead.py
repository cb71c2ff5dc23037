#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""host_overhead.py: host time per call of fmha.attention against torch SDPA (the
default backend choice) on CUDA tensors, for a decode-sized problem (B8, Sq 1, Sk 1024,
Hq/Hk 32/8, hd128, bf16) and a prefill one (B2, S 2048, H 16, hd128, causal).

Host time: the wall time of N calls with no synchronise in between, divided by N (the
GPU queue is deep enough not to block); the GPU time per call is printed beside it.
Also the library's and the package's plan-cache counts. Run: PYTHONPATH=python
FMHA_LIBRARY=build/libfmha.so python3 bench/host_overhead.py [--profile FILE]
(--profile: cProfile of the fmha calls of each case, the top functions, into FILE).
"""
import cProfile
import io
import pstats
import sys
import time

import torch
import torch.nn.functional as F

import fmha


def per_call(fn, n=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return 1e6 * (t1 - t0) / n, 1e6 * (t2 - t0) / n


def case(label, b, sq, sk, h, hk, d, causal):
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    # SDPA takes (b, h, s, d) and repeats kv heads for GQA itself (enable_gqa)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    ours = per_call(lambda: fmha.attention(q, k, v, causal=causal))
    sdpa = per_call(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=hk != h))
    print(f"{label:8s} host us/call: fmha {ours[0]:7.1f}  sdpa {sdpa[0]:7.1f}  ratio {ours[0] / sdpa[0]:4.2f}   "
          f"(with the GPU: fmha {ours[1]:7.1f}  sdpa {sdpa[1]:7.1f})", flush=True)
    if PROFILE:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            fmha.attention(q, k, v, causal=causal)
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
        with open(PROFILE, "a") as f:
            f.write(f"== {label}: 200 calls\n{text.getvalue()}\n")


PROFILE = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None


def kvcache_case(label, b, sk, h, hk, d):
    """attention_with_kvcache over a contiguous cache with device lengths (the split-KV
    family) against SDPA on the same keys."""
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    lens = torch.full((b,), sk, dtype=torch.int32, device="cuda")
    qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
    ours = per_call(lambda: fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens))
    sdpa = per_call(lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=hk != h))
    print(f"{label:8s} host us/call: fmha {ours[0]:7.1f}  sdpa {sdpa[0]:7.1f}  ratio {ours[0] / sdpa[0]:4.2f}   "
          f"(with the GPU: fmha {ours[1]:7.1f}  sdpa {sdpa[1]:7.1f})", flush=True)


case("decode", 8, 1, 1024, 32, 8, 128, False)
case("prefill", 2, 2048, 2048, 16, 16, 128, True)
try:
    kvcache_case("kvcache", 8, 1024, 32, 8, 128)
except fmha.FmhaError as e:  # no GPU split-KV kernel for this case
    print("kvcache  not run:", e)
print("package plan cache:", fmha.plan_cache_info())
