#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bwd_bench.py FMHA_BIN: backward TFLOPS of fmha vs torch SDPA's backward (flash = FA2,
cuDNN), bf16, in one run. FlashAttention's shapes: 16k tokens (batch = 16384 / seqlen),
hidden 2048 (heads = 2048 / hdim), causal and not. FLOPs by REFERENCE.md: backward =
2.5 x the forward's 2 * B * H * (Dqk + Dv) * visible pairs. Torch is timed on
autograd.grad of one forward's output (the backward kernels only); fmha with
`fmha bwd -backend=cuda` (its stages 0-2, o and lse from its own forward).
BENCH_HDIMS, BENCH_MASKS ("full causal"), BENCH_SEQS, FMHA_BWD_FLAGS (e.g.
"-deterministic=1") select; rows as JSON to $OUT/bwd_bench.json when OUT is set.
"""
import json, os, re, subprocess, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

binary = sys.argv[1] if len(sys.argv) > 1 else "build/fmha"
extra = os.environ.get("FMHA_BWD_FLAGS", "").split()


def tflops(b, h, s, d, causal, ms):
    pairs = s * (s + 1) // 2 if causal else s * s
    return 2.5 * 2.0 * b * h * (2 * d) * pairs / (ms * 1e-3) / 1e12


def time_torch(backend, b, h, s, d, causal):
    try:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            g = torch.randn_like(out)
            for _ in range(3):
                torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 10
    except Exception as e:  # a backend that refuses the shape
        print(f"  torch {backend}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
        return None


def time_fmha(b, h, s, d, causal):
    cmd = [binary, "bwd", f"-b={b}", f"-h={h}", f"-s={s}", f"-d={d}", "-prec=bf16", f"-mask={'t' if causal else '0'}",
           "-warmup=3", "-repeat=10", "-backend=cuda"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"time ([0-9.]+) ms", out.stdout)
    if not m:
        print(f"  fmha failed: {' '.join(cmd)}\n{out.stdout[-400:]}{out.stderr[-400:]}", file=sys.stderr)
    kname = re.search(r"stage 1: (\S+)", out.stdout)
    return (float(m.group(1)) if m else None), (kname.group(1) if kname else None)


HDIMS = [int(x) for x in os.environ.get("BENCH_HDIMS", "64 128").split()]
MASKS = [m == "causal" for m in os.environ.get("BENCH_MASKS", "full causal").split()]
SEQS = [int(x) for x in os.environ.get("BENCH_SEQS", "512 1024 2048 4096 8192 16384").split()]
rows = []
fmt = lambda x: f"{x:7.1f}" if x else "    n/a"
for d in HDIMS:
    for causal in MASKS:
        for s in SEQS:
            b, h = 16384 // s, 2048 // d
            fa2 = time_torch(SDPBackend.FLASH_ATTENTION, b, h, s, d, causal)
            cudnn = time_torch(SDPBackend.CUDNN_ATTENTION, b, h, s, d, causal)
            torch.cuda.empty_cache()
            ms, kernel = time_fmha(b, h, s, d, causal)
            row = {"hdim": d, "causal": causal, "seqlen": s, "batch": b, "heads": h, "kernel": kernel,
                   "fmha_tflops": tflops(b, h, s, d, causal, ms) if ms else None,
                   "fa2_tflops": tflops(b, h, s, d, causal, fa2) if fa2 else None,
                   "cudnn_tflops": tflops(b, h, s, d, causal, cudnn) if cudnn else None}
            rows.append(row)
            r_fa2 = row["fmha_tflops"] / row["fa2_tflops"] if row["fmha_tflops"] and row["fa2_tflops"] else 0
            r_cud = row["fmha_tflops"] / row["cudnn_tflops"] if row["fmha_tflops"] and row["cudnn_tflops"] else 0
            print(f"bwd d={d:3d} {'causal' if causal else 'full  '} s={s:5d} b={b:2d} h={h:2d}  fmha {fmt(row['fmha_tflops'])}"
                  f"  fa2 {fmt(row['fa2_tflops'])}  cudnn {fmt(row['cudnn_tflops'])}  fmha/fa2 {r_fa2:4.2f}"
                  f"  fmha/cudnn {r_cud:4.2f}", flush=True)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "bwd_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
