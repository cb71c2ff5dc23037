#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""prefill_bench.py FMHA_BIN: batch prefill over a paged cache against fmha's own
contiguous varlen forward on the same tokens, and against torch SDPA (FA2 and cuDNN
backends) on the padded equivalent, bf16 hd128, in one run.

The tokens: 16k in ragged sequences of mixed length (1 to 4096, a fixed seed), heads
16 (hidden 2048), causal and not. Every TFLOPS figure counts the same useful FLOPs
(REFERENCE.md: 2 * Hq * (Dqk + Dv) * visible pairs of the ragged sequences), so the
padded torch runs are charged for their padding in time, not credited for it in FLOPs.
fmha runs through `fmha run -backend=cuda` (-family=batch_prefill -page_block_size=P for
the paged rows, -mode=1 alone for the contiguous varlen one; pages of 128 and 256 tokens hold whole
key tiles, which the sm90 kernel copies by TMA, a box per page). BENCH_PAGES (default
"16 64 128 256"), BENCH_MASKS ("causal full"), BENCH_HEADS ("16 16": Hq Hk) select; rows as JSON
to $OUT/prefill_bench.json when OUT is set.
"""
import json, os, random, re, subprocess, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

binary = sys.argv[1] if len(sys.argv) > 1 else "build/fmha"
TOKENS, D = 16384, 128
HQ, HK = (int(x) for x in os.environ.get("BENCH_HEADS", "16 16").split())
PAGES = [int(x) for x in os.environ.get("BENCH_PAGES", "16 64 128 256").split()]
MASKS = [m == "causal" for m in os.environ.get("BENCH_MASKS", "causal full").split()]


def ragged_lengths(total, seed=7):
    rng, lens = random.Random(seed), []
    while sum(lens) < total:
        lens.append(min(rng.randint(1, 4096), total - sum(lens)))
    return lens


def useful_flops(lens, causal):
    pairs = sum(s * (s + 1) // 2 if causal else s * s for s in lens)
    return 2.0 * HQ * (2 * D) * pairs


def time_fmha(lens, causal, page):
    csv = ",".join(str(s) for s in lens)
    cmd = [binary, "run", "-mode=1", f"-b={len(lens)}", f"-h={HQ}", f"-h_k={HK}", f"-s={csv}", f"-s_k={csv}",
           f"-d={D}", "-prec=bf16", f"-mask={'b' if causal else '0'}", "-warmup=5", "-repeat=20", "-backend=cuda"]
    if page:
        cmd += ["-family=batch_prefill", f"-page_block_size={page}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"time ([0-9.]+) ms", out.stdout)
    if not m:
        print(f"  fmha failed: {' '.join(cmd[:12])} ...\n{out.stdout[-400:]}{out.stderr[-400:]}", file=sys.stderr)
    kname = re.search(r"stage 0: (\S+)", out.stdout)
    return (float(m.group(1)) if m else None), (kname.group(1) if kname else None)


def time_torch_padded(backend, lens, causal):
    """SDPA on [B, H, max_len, D]: what a caller without varlen or pages runs."""
    try:
        b, s = len(lens), max(lens)
        q = torch.randn(b, HQ, s, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, HK, s, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        kw = {"enable_gqa": True} if HQ != HK else {}
        with sdpa_kernel(backend):
            for _ in range(3):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 10
    except Exception as e:  # a backend that refuses the shape
        print(f"  torch {backend}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
        return None


lens = ragged_lengths(TOKENS)
print(f"# {len(lens)} sequences, {sum(lens)} tokens, max {max(lens)}: {lens}", flush=True)
rows = []
tf = lambda flops, ms: flops / (ms * 1e-3) / 1e12 if ms else None
fmt = lambda x: f"{x:6.1f}" if x else "   n/a"
for causal in MASKS:
    flops = useful_flops(lens, causal)
    fa2 = tf(flops, time_torch_padded(SDPBackend.FLASH_ATTENTION, lens, causal))
    cudnn = tf(flops, time_torch_padded(SDPBackend.CUDNN_ATTENTION, lens, causal))
    torch.cuda.empty_cache()
    ms, kernel = time_fmha(lens, causal, 0)
    varlen = tf(flops, ms)
    mask = "causal" if causal else "full  "
    print(f"varlen  {mask} contiguous  fmha {fmt(varlen)}  fa2(padded) {fmt(fa2)}  cudnn(padded) {fmt(cudnn)}  {kernel}",
          flush=True)
    rows.append({"causal": causal, "page": 0, "fmha_tflops": varlen, "fa2_tflops": fa2, "cudnn_tflops": cudnn,
                 "kernel": kernel})
    for page in PAGES:
        ms, kernel = time_fmha(lens, causal, page)
        paged = tf(flops, ms)
        r_var = paged / varlen if paged and varlen else 0
        r_fa2 = paged / fa2 if paged and fa2 else 0
        r_cud = paged / cudnn if paged and cudnn else 0
        print(f"prefill {mask} page {page:4d}   fmha {fmt(paged)}  of varlen {r_var:4.2f}  /fa2 {r_fa2:4.2f}"
              f"  /cudnn {r_cud:4.2f}  {kernel}", flush=True)
        rows.append({"causal": causal, "page": page, "fmha_tflops": paged, "of_varlen": r_var, "over_fa2": r_fa2,
                     "over_cudnn": r_cud, "kernel": kernel})
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "prefill_bench.json"), "w") as f:
        json.dump({"lengths": lens, "heads": [HQ, HK], "hdim": D, "rows": rows}, f, indent=1)
