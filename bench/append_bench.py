#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""append_bench.py: appendkv's GB/s against the device's copy bandwidth, bf16 hd128, Hq/Hk
32/8, every row in one run.

fmha.append_kv_cache writes k_new / v_new (batch x new tokens) after 512 cached tokens of
each sequence, into a contiguous cache or 16-token pages (shuffled, block table), plain or
with RoPE (half-rotated, on the keys and on one query token per sequence, as a decode step
does). Bytes moved (REFERENCE.md: memory-bound work is bytes / time): k_new and v_new read
and their slots written, plus q read and q_rot written with RoPE (tables not counted).

GPU time per call: 10 calls in a CUDA graph, the median of 30 replays (gpu_timing.py), the
way a serving engine replays its steps; the same for the two references:
  - torch slice copy_: the new keys and values copied into a contiguous cache slice (no
    RoPE, uniform lengths: a framework's best case);
  - same-size copy: one contiguous device copy of the same bytes. Small appends are
    bound by a launch's latency, not bandwidth; this row says what any kernel moving those
    bytes can reach.
The copy bandwidth is a 1 GiB device-to-device copy. BENCH_BATCHES, BENCH_NEW select;
rows as JSON to $OUT/append_bench.json when OUT is set.

Run: PYTHONPATH=python FMHA_LIBRARY=build/libfmha.so python3 bench/append_bench.py
"""
import json
import os

import torch

import fmha
from gpu_timing import copy_bandwidth, gpu_ms  # bench/ is the script's folder, first on sys.path

HQ, HK, D, OLD, PAGE = 32, 8, 128, 512, 16
BATCHES = [int(x) for x in os.environ.get("BENCH_BATCHES", "16 64").split()]
NEW = [int(x) for x in os.environ.get("BENCH_NEW", "1 64 512").split()]


def rope_tables(positions):
    ang = torch.arange(positions, device="cuda")[:, None] * 10000.0 ** (-2.0 * torch.arange(D // 2, device="cuda") / D)
    return ang.cos().float(), ang.sin().float()


def caches(b, snew, page):
    """The caches, and the lookup arguments of append_kv_cache."""
    seq = OLD + snew
    lens = torch.full((b,), OLD, dtype=torch.int32, device="cuda")
    if not page:
        kc = torch.randn(b, seq, HK, D, device="cuda", dtype=torch.bfloat16)
        return kc, torch.randn_like(kc), dict(cache_seqlens=lens)
    npg = (seq + page - 1) // page
    kc = torch.randn(b * npg, page, HK, D, device="cuda", dtype=torch.bfloat16)
    table = torch.randperm(b * npg, device="cuda").view(b, npg).to(torch.int32)
    return kc, torch.randn_like(kc), dict(cache_seqlens=lens, block_table=table)


def main():
    peak = copy_bandwidth()
    print(f"# device copy bandwidth {peak:.0f} GB/s (1 GiB device-to-device copy); GPU time per call from CUDA graphs",
          flush=True)
    rows = []
    for b in BATCHES:
        for snew in NEW:
            kn = torch.randn(b, snew, HK, D, device="cuda", dtype=torch.bfloat16)
            vn = torch.randn_like(kn)
            q = torch.randn(b, 1, HQ, D, device="cuda", dtype=torch.bfloat16)
            cos, sin = rope_tables(OLD + snew + 1)
            kv_bytes = 2 * 2 * kn.numel() * 2  # k_new, v_new read and written
            # references: torch's slice copy (no RoPE) and one copy of the same bytes
            kc, vc, _ = caches(b, snew, 0)
            slice_ms = gpu_ms(lambda: (kc[:, OLD:].copy_(kn), vc[:, OLD:].copy_(vn)))
            for rope in (False, True):
                nbytes = kv_bytes + (2 * q.numel() * 2 if rope else 0)
                src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                same_ms = gpu_ms(lambda: dst.copy_(src))
                for page in (0, PAGE):
                    kc, vc, look = caches(b, snew, page)
                    extra = dict(rotary_cos=cos, rotary_sin=sin, rotary_interleaved=False, q=q, causal=True) if rope else {}
                    ms = gpu_ms(lambda: fmha.append_kv_cache(kc, vc, kn, vn, **look, **extra))
                    row = {"batch": b, "new": snew, "rope": rope, "page": page, "fmha_gbs": nbytes / ms / 1e6,
                           "same_size_copy_gbs": nbytes / same_ms / 1e6,
                           "torch_slice_copy_gbs": kv_bytes / slice_ms / 1e6, "fmha_us": 1e3 * ms}
                    row["of_copy"] = row["fmha_gbs"] / peak
                    row["of_same_size_copy"] = row["fmha_gbs"] / row["same_size_copy_gbs"]
                    rows.append(row)
                    print(f"append b={b:3d} new={snew:4d} {'rope' if rope else 'copy'} "
                          f"{'page %-3d' % page if page else 'contig  '} fmha {row['fmha_gbs']:7.1f} GB/s "
                          f"({row['fmha_us']:6.1f} us)  of copy {row['of_copy']:4.2f}  "
                          f"same-size copy {row['same_size_copy_gbs']:7.1f} GB/s (fmha at {row['of_same_size_copy']:4.2f} of it)  "
                          f"torch slice copy_ {row['torch_slice_copy_gbs']:7.1f}", flush=True)
            torch.cuda.empty_cache()
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "append_bench.json"), "w") as f:
            json.dump({"copy_gbs": peak, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
