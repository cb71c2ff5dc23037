#!/usr/bin/env python3
"""decode_bench.py: decode (one query token per sequence against a KV cache) on the GPU:
fmha.attention_with_kvcache (the split-KV kernels) against torch SDPA's FlashAttention-2
and cuDNN backends, in the same run. bf16, Hq/Hk 32/8, hd128; batch x cache length.
Reports GPU time per call (CUDA events, median of 50) and the K/V read rate in GB/s
(REFERENCE.md: bytes of K and V actually read, over the time) beside the device's
measured copy bandwidth (a 1 GiB device-to-device copy: bytes read + written / time).

Run: PYTHONPATH=python FMHA_LIBRARY=build/libfmha.so python3 bench/decode_bench.py
Environment: DECODE_BATCHES (default 1,8,32,128), DECODE_SEQS (2048,8192,32768),
DECODE_PAGE (default 0: contiguous caches; N > 0: fmha reads N-token pages in shuffled
order through a block table, SDPA the contiguous copy).
"""
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import fmha


def gpu_ms(fn, reps=50):
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth():
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = gpu_ms(lambda: y.copy_(x), reps=20)
    return 2 * x.numel() / ms / 1e6


PAGE = int(os.environ.get("DECODE_PAGE", "0"))


def main():
    batches = [int(x) for x in os.environ.get("DECODE_BATCHES", "1,8,32,128").split(",")]
    seqs = [int(x) for x in os.environ.get("DECODE_SEQS", "2048,8192,32768").split(",")]
    h, hk, d = 32, 8, 128
    bw = copy_bandwidth()
    print(f"device copy bandwidth: {bw:.0f} GB/s; fmha cache: " + (f"pages of {PAGE}, block table" if PAGE else "contiguous"))
    print(f"{'batch':>5} {'seqlen_k':>8} | {'fmha us':>8} {'GB/s':>6} | {'FA2 us':>8} {'GB/s':>6} | "
          f"{'cuDNN us':>8} {'GB/s':>6} | fmha/FA2  fmha/cuDNN (time ratio, < 1 is faster)")
    for b in batches:
        for sk in seqs:
            if b * sk * hk * d * 2 * 2 > 24 << 30:
                continue
            q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
            kc = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
            vc = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
            lens = torch.full((b,), sk, dtype=torch.int32, device="cuda")
            kv_bytes = 2 * b * sk * hk * d * 2
            if PAGE:
                npg = sk // PAGE
                perm = torch.randperm(b * npg, device="cuda")
                table = perm.view(b, npg).to(torch.int32)
                kp = torch.empty(b * npg, PAGE, hk, d, device="cuda", dtype=torch.bfloat16)
                vp = torch.empty_like(kp)
                kp[perm] = kc.reshape(b * npg, PAGE, hk, d)
                vp[perm] = vc.reshape(b * npg, PAGE, hk, d)
                ours = gpu_ms(lambda: fmha.attention_with_kvcache(q, kp, vp, cache_seqlens=lens, block_table=table))
            else:
                ours = gpu_ms(lambda: fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens))
            qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
            row = [ours]
            for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
                try:
                    with sdpa_kernel(backend):
                        row.append(gpu_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)))
                except RuntimeError:
                    row.append(float("nan"))
            rates = [kv_bytes / (ms * 1e6) for ms in row]
            print(f"{b:5d} {sk:8d} | {row[0] * 1e3:8.1f} {rates[0]:6.0f} | {row[1] * 1e3:8.1f} {rates[1]:6.0f} | "
                  f"{row[2] * 1e3:8.1f} {rates[2]:6.0f} | {row[0] / row[1]:8.2f}  {row[0] / row[2]:8.2f}", flush=True)
            del q, kc, vc


main()
