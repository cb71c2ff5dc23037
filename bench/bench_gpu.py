#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_gpu.py FMHA_BIN [LABEL=FMHA_BIN ...]: forward TFLOPS of fmha vs torch SDPA (flash = FA2,
cuDNN), bf16 (BENCH_PREC=fp8bf16: fmha's fp8 forward against the same bf16 SDPA). With several binaries (before=old/fmha after=new/fmha), each runs every cell
twice, alternating (b, a, b, a), so that a change is measured against the same GPU state;
the table shows each label's best of two, and fmha/fa2 for the first label.

Shapes follow REFERENCE.md's FLOP convention and FlashAttention's benchmark: 16k tokens
per batch (batch = 16384 / seqlen), 2048 / hdim heads, hdim 64/128/256, causal and not.
FLOPs = 2 * B * H * (Dqk + Dv) * visible pairs (causal: S(S+1)/2), for every column.
Prints one table row per shape and writes the rows as JSON to $OUT/bench.json if set.
"""
import json, os, re, subprocess, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

bins = [a.split("=", 1) if "=" in a else ("fmha", a) for a in sys.argv[1:]]
rows = []


def tflops(b, h, s, d, causal, ms):
    pairs = s * (s + 1) // 2 if causal else s * s
    return 2.0 * b * h * (2 * d) * pairs / (ms * 1e-3) / 1e12


def time_torch(backend, q, k, v, causal):
    try:
        with sdpa_kernel(backend):
            for _ in range(5):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 20
    except Exception as e:  # a backend that refuses the shape
        print(f"  torch {backend}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
        return None


# BENCH_HDIMS="64 128", BENCH_MASKS="causal" (or "full"), BENCH_SEQS="1024 16384": a subset;
# BENCH_PREC=fp8bf16: fmha in fp8 e4m3 (bf16 out; torch SDPA stays bf16, the reference point)
# BENCH_FORCE_<label>=NAME: that binary runs kernel NAME (-force_kernel) instead of the selector's
# choice; {mask} in NAME becomes "causal_" on causal cells (a tile A/B with one binary twice)
# BENCH_ARGS="-softcap=30": more flags for every fmha run (the SDPA columns run without them,
# so only the fmha columns compare with each other then)
# BENCH_TOKENS=16896: tokens per cell instead of 16384 (batch = tokens // seqlen), e.g. 33
# sequences of 512, whose items fill whole rounds of 132 SMs (perf-notes run 191)
PREC = os.environ.get("BENCH_PREC", "bf16")
HDIMS = [int(x) for x in os.environ.get("BENCH_HDIMS", "64 128 256").split()]
MASKS = [m == "causal" for m in os.environ.get("BENCH_MASKS", "full causal").split()]
SEQS = [int(x) for x in os.environ.get("BENCH_SEQS", "512 1024 2048 4096 8192 16384").split()]
TOKENS = int(os.environ.get("BENCH_TOKENS", "16384"))
if any(TOKENS < s for s in SEQS):
    sys.exit(f"bench_gpu.py: BENCH_TOKENS={TOKENS} is shorter than a sequence of {max(SEQS)} (BENCH_SEQS): "
             "a cell needs at least one whole sequence")
for d in HDIMS:
    for causal in MASKS:
        for s in SEQS:
            b, h = TOKENS // s, 2048 // d
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            fa2 = time_torch(SDPBackend.FLASH_ATTENTION, q, k, v, causal)
            cudnn = time_torch(SDPBackend.CUDNN_ATTENTION, q, k, v, causal)
            del q, k, v
            def run_fmha(label, binary):
                cmd = [binary, "run", f"-b={b}", f"-h={h}", f"-s={s}", f"-d={d}", f"-prec={PREC}",
                       f"-mask={'t' if causal else '0'}", "-warmup=5", "-repeat=20", "-backend=cuda"]
                cmd += os.environ.get("BENCH_ARGS", "").split()
                force = os.environ.get(f"BENCH_FORCE_{label}")
                if force:
                    cmd.append("-force_kernel=" + force.replace("{mask}", "causal_" if causal else ""))
                out = subprocess.run(cmd, capture_output=True, text=True)
                m = re.search(r"time ([0-9.]+) ms", out.stdout)
                if not m:
                    print(f"  fmha failed: {' '.join(cmd)}\n{out.stdout[-400:]}{out.stderr[-400:]}", file=sys.stderr)
                kname = re.search(r"stage 0: (\S+)", out.stdout)
                return (float(m.group(1)) if m else None), (kname.group(1) if kname else None)

            times = {label: [] for label, _ in bins}
            kernel = None
            for _ in range(2 if len(bins) > 1 else 1):
                for label, binary in bins:
                    ms, kernel = run_fmha(label, binary)
                    if ms: times[label].append(ms)
            row = {"hdim": d, "causal": causal, "seqlen": s, "batch": b, "heads": h,
                   "fa2_tflops": tflops(b, h, s, d, causal, fa2) if fa2 else None,
                   "cudnn_tflops": tflops(b, h, s, d, causal, cudnn) if cudnn else None, "kernel": kernel}
            for label, _ in bins:
                row[f"{label}_tflops"] = tflops(b, h, s, d, causal, min(times[label])) if times[label] else None
                row[f"{label}_all_tflops"] = [tflops(b, h, s, d, causal, t) for t in times[label]]
            rows.append(row)
            fmt = lambda x: f"{x:7.1f}" if x else "    n/a"
            first = row[f"{bins[0][0]}_tflops"]
            ratio = first / row["fa2_tflops"] if first and row["fa2_tflops"] else 0
            ours = "  ".join(f"{label} {fmt(row[label + '_tflops'])}" for label, _ in bins)
            print(f"d={d:3d} {'causal' if causal else 'full  '} s={s:5d} b={b:2d} h={h:2d}  {ours}"
                  f"  fa2 {fmt(row['fa2_tflops'])}  cudnn {fmt(row['cudnn_tflops'])}  {bins[0][0]}/fa2 {ratio:4.2f}", flush=True)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "bench.json" if PREC == "bf16" else f"bench_{PREC}.json"), "w") as f:
        json.dump(rows, f, indent=1)
