#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""append_bench.py FMHA_BIN: appendkv's GB/s against the device's measured copy bandwidth,
bf16 hd128, Hq/Hk 32/8, in one run.

Bytes moved (REFERENCE.md: memory-bound work is reported as bytes / time): k_new and
v_new read and their cache slots written, plus q read and q_rot written when RoPE rotates
q (the rotary tables are not counted). The copy bandwidth is torch's device-to-device
copy of a 1 GiB tensor (2 x bytes / time). Reference row: torch writing the same k_new /
v_new into a contiguous cache slice with copy_ (no RoPE, uniform lengths: the best case of
a framework's slice assignment). fmha runs through `fmha run -backend=cuda -s_knew=N`,
which times the appendkv plan alone. BENCH_BATCHES, BENCH_NEW (new tokens per sequence)
select; rows as JSON to $OUT/append_bench.json when OUT is set.
"""
import json, os, re, subprocess, sys

import torch

binary = sys.argv[1] if len(sys.argv) > 1 else "build/fmha"
HQ, HK, D = 32, 8, 128
BATCHES = [int(x) for x in os.environ.get("BENCH_BATCHES", "16 64").split()]
NEW = [int(x) for x in os.environ.get("BENCH_NEW", "1 64 512").split()]


def cuda_time(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def copy_bandwidth():
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_time(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def torch_slice_copy(b, snew, old=512):
    kc = torch.empty(b, old + snew, HK, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.empty_like(kc)
    kn = torch.randn(b, snew, HK, D, device="cuda", dtype=torch.bfloat16)
    vn = torch.randn_like(kn)

    def step():
        kc[:, old:old + snew].copy_(kn)
        vc[:, old:old + snew].copy_(vn)
    ms = cuda_time(step)
    return 2 * 2 * kn.numel() * 2 / (ms * 1e-3) / 1e9


def fmha_append(b, snew, rope, page):
    cmd = [binary, "run", f"-b={b}", f"-h={HQ}", f"-h_k={HK}", "-s=1", f"-s_k={snew + 512}", f"-s_knew={snew}",
           f"-d={D}", "-prec=bf16", "-mask=b", "-warmup=10", "-repeat=50", "-backend=cuda"]
    if rope:
        cmd += [f"-rotary_dim={D}", "-rotary_interleaved=0"]
    if page:
        cmd += [f"-page_block_size={page}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"appendkv time ([0-9.]+) ms .*?, ([0-9.]+) GB/s", out.stdout)
    if not m:
        print(f"  fmha failed: {' '.join(cmd)}\n{out.stdout[-400:]}{out.stderr[-400:]}", file=sys.stderr)
        return None, None
    k = re.search(r"appendkv kernel: (\S+)", out.stdout)
    return float(m.group(2)), (k.group(1) if k else None)


peak = copy_bandwidth()
print(f"# device copy bandwidth {peak:.0f} GB/s (torch copy_ of 1 GiB)", flush=True)
rows = []
fmt = lambda x: f"{x:7.1f}" if x else "    n/a"
for b in BATCHES:
    for snew in NEW:
        ref = torch_slice_copy(b, snew)
        for rope in (False, True):
            for page in (0, 16):
                gbs, kernel = fmha_append(b, snew, rope, page)
                row = {"batch": b, "new": snew, "rope": rope, "page": page, "fmha_gbs": gbs,
                       "of_copy": gbs / peak if gbs else None, "torch_slice_copy_gbs": ref, "kernel": kernel}
                rows.append(row)
                print(f"append b={b:3d} new={snew:4d} {'rope' if rope else 'copy'} {'page 16' if page else 'contig '}"
                      f"  fmha {fmt(gbs)} GB/s  of copy {row['of_copy'] or 0:4.2f}  torch slice copy_ {fmt(ref)}",
                      flush=True)
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "append_bench.json"), "w") as f:
        json.dump({"copy_gbs": peak, "rows": rows}, f, indent=1)
