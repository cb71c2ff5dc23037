#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sdpa_rows.py BENCH.CSV [--backends flash,cudnn,efficient] [--warmup 3] [--repeat 10]:
put torch SDPA's backends in a `fmha bench` CSV, as rows of the same columns.

For every case of the CSV that scaled_dot_product_attention can express (batch mode,
contiguous q/k/v, no mask or a causal one that SDPA's top-left convention computes,
optional GQA; forward, split-KV decode and the backward), each backend is timed the way
fmha bench times: warmup, then samples of repeated calls lasting about 1 ms, reporting
min/median/max of the per-call means. TFLOPS and GB/s use the fmha row's gflop and mbytes
(REFERENCE.md's counts, the same problem), so the columns compare directly. A backend
that refuses a shape gets a row with status NOT_SUPPORTED and torch's message. Rows are
appended to the CSV (library "torch-sdpa-<backend>"); cases are skipped when the CSV
already has that backend's row, so the script resumes too.
"""
import argparse, csv, re, statistics, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def flag(flags, name, default=None):
    m = re.search(r"(?:^|\s)-%s=(\S+)" % name, flags)
    return m.group(1) if m else default


def expressible(row):
    """(causal, why-not) for a fmha row: SDPA computes it, or the reason it cannot."""
    f = row["flags"]
    if row["dtype"] not in DTYPES:  # fp8: SDPA has none (bench/bench_gpu.py compares with bf16 SDPA)
        return None, f"dtype {row['dtype']}"
    if row["command"] == "run" and row["family"] not in ("fwd", "fwd_splitkv"):
        return None, f"family {row['family']}"
    if flag(f, "mode", "0") != "0":
        return None, "group mode (varlen)"
    for name in ("bias", "softcap", "init_sink", "p_drop", "cache_batch_idx", "pad"):
        if flag(f, name, "0") not in ("0", "n"):
            return None, f"-{name}"
    if flag(f, "s_knew", "0") != "0" or flag(f, "page_block_size", "0") != "0":
        return None, "a KV cache"
    mask = flag(f, "mask", "0")
    sq, sk = int(row["seqlen_q"]), int(row["seqlen_kv"])
    if mask == "0":
        return False, None
    if mask in ("1", "t") or (mask in ("2", "b") and sq == sk):
        return True, None  # SDPA's is_causal is top-left
    return None, f"mask {mask}"


def time_call(fn, warmup, repeat):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    first = start.elapsed_time(end)
    inner = max(1, min(1000, int(1.0 / first) + 1)) if first < 1.0 else 1
    ms = []
    for _ in range(repeat):
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        torch.cuda.synchronize()
        ms.append(start.elapsed_time(end) / inner)
    return inner, sorted(ms)


def measure(row, backend, causal, warmup, repeat):
    b, hq, hk = int(row["batch"]), int(row["heads_q"]), int(row["heads_kv"])
    sq, sk, d, dv = (int(row[k]) for k in ("seqlen_q", "seqlen_kv", "hdim_qk", "hdim_v"))
    dt = DTYPES[row["dtype"]]
    bwd = row["command"] == "bwd"
    q = torch.randn(b, hq, sq, d, device="cuda", dtype=dt, requires_grad=bwd)
    k = torch.randn(b, hk, sk, d, device="cuda", dtype=dt, requires_grad=bwd)
    v = torch.randn(b, hk, sk, dv, device="cuda", dtype=dt, requires_grad=bwd)
    gqa = {"enable_gqa": True} if hq != hk else {}
    with sdpa_kernel(BACKENDS[backend]):
        if not bwd:
            return time_call(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa), warmup, repeat)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
        do = torch.randn_like(o)
        # the backward alone: gradients of a kept graph, as fmha bwd times dq/dk/dv
        return time_call(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), warmup, repeat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--backends", default="flash,cudnn,efficient")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    with open(a.csv, newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    have = {(r["library"], r["command"], r["flags"]) for r in rows}
    cases, seen = [], set()
    for r in rows:
        if r["library"] == "fmha" and r["status"] == "ok" and (r["command"], r["flags"]) not in seen:
            seen.add((r["command"], r["flags"]))
            cases.append(r)
    device = torch.cuda.get_device_name()
    out = open(a.csv, "a", newline="")
    w = csv.DictWriter(out, fieldnames=header)
    counts = {"ok": 0, "refused": 0, "not expressible": 0}
    for i, r in enumerate(cases):
        causal, why = expressible(r)
        if causal is None:
            counts["not expressible"] += 1
            continue
        for be in a.backends.split(","):
            lib = f"torch-sdpa-{be}"
            if (lib, r["command"], r["flags"]) in have:
                continue
            new = {k: r.get(k, "") for k in header}
            new.update({k: "" for k in header if k.startswith("key_")})
            new.update(library=lib, device=device, requested=lib, kernel=lib, plan_kernels=lib, how="torch sdpa_kernel",
                       selector_choice="0", verify="off", max_err="0", tol="0", error="")
            try:
                inner, ms = measure(r, be, causal, a.warmup, a.repeat)
                med = statistics.median(ms)
                new.update(status="ok", samples=str(len(ms)), inner=str(inner), min_ms=repr(ms[0]),
                           median_ms=repr(med), max_ms=repr(ms[-1]),
                           tflops=repr(float(r["gflop"]) / med), gbps=repr(float(r["mbytes"]) / med))
                counts["ok"] += 1
            except Exception as e:  # a backend that refuses the shape
                new.update(status="NOT_SUPPORTED", samples="0", inner="0", min_ms="0", median_ms="0", max_ms="0",
                           tflops="0", gbps="0", error=f"{type(e).__name__}: {str(e)[:300]}")
                counts["refused"] += 1
            w.writerow(new)
            out.flush()
        print(f"\r[{i + 1}/{len(cases)}] {r['category']:<16} {r['flags'][:60]:<60}", end="", file=sys.stderr)
    print(file=sys.stderr)
    out.close()
    print(f"sdpa rows: {counts['ok']} measured, {counts['refused']} refused by the backend, "
          f"{counts['not expressible']} cases SDPA cannot express (paged, varlen, windows, appendkv, ...)")


if __name__ == "__main__":
    main()
