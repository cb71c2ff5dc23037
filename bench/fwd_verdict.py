#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fwd_verdict.py DIR [LABEL]: issue 20's done-when, read off one bench call's JSON.

DIR holds bench/bench_gpu.py's bench.json (bf16) and bench_fp8bf16.json (BENCH_PREC=fp8bf16),
as scripts/gpu_check.sh --bench fwd,fp8 writes them; LABEL is the fmha binary's label
(default: the first one in the rows). The rules (issue 20, "Done when"), each on the cells
of this one call:
  - bf16: every cell at or above cuDNN, and at or above FA2 (stretch: 1.10x cuDNN from 2k);
  - fp8: hd128 and hd256, from 4k keys, causal and not: at least 900 TFLOPS.
Prints each rule's count and the cells that miss it, then one verdict line. Only what the
call measured is judged: a missing file, a cell without a figure or a cell of another
shape than the issue's (16384 tokens, hidden 2048; BENCH_TOKENS changes it) is reported as
such, never as passing. The machine is not in the JSON: the issue's table is an H100's."""
import json
import os
import sys

ISSUE_TOKENS = 16384  # the issue's cells: batch x seqlen tokens (bench_gpu.py's default BENCH_TOKENS)
ISSUE_HIDDEN = 2048   # and heads x hdim
FP8_BAR = 900.0
FP8_FROM = 4096
STRETCH = 1.10


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def label_of(rows):
    """The first fmha label of the rows: a *_tflops key that is neither SDPA column."""
    for key in rows[0]:
        if key.endswith("_tflops") and key not in ("fa2_tflops", "cudnn_tflops"):
            return key[: -len("_tflops")]
    return None


def cell(r):
    return f"hd{r['hdim']} {'causal' if r['causal'] else 'unmasked'} {r['seqlen']}"


def off_shape(rows):
    """The cells not of the issue's shape: batch x seqlen = ISSUE_TOKENS, heads x hdim = ISSUE_HIDDEN."""
    return [f"{cell(r)} (b{r.get('batch')} h{r.get('heads')})" for r in rows
            if r.get("batch", 0) * r["seqlen"] != ISSUE_TOKENS or r.get("heads", 0) * r["hdim"] != ISSUE_HIDDEN]


def bf16_rules(rows, label):
    """(met, lines): every cell >= cuDNN and >= FA2; the stretch is reported, not required."""
    under_cudnn, under_fa2, unmeasured, stretch_miss = [], [], [], []
    long_cells = 0
    for r in rows:
        ours, cudnn, fa2 = r.get(f"{label}_tflops"), r.get("cudnn_tflops"), r.get("fa2_tflops")
        if not ours or not cudnn or not fa2:
            unmeasured.append(cell(r))
            continue
        if ours < cudnn:
            under_cudnn.append(f"{cell(r)} {ours / cudnn:.3f}")
        if ours < fa2:
            under_fa2.append(f"{cell(r)} {ours / fa2:.2f}")
        if r["seqlen"] >= 2048:
            long_cells += 1
            if ours < STRETCH * cudnn:
                stretch_miss.append(f"{cell(r)} {ours / cudnn:.3f}")
    n = len(rows)
    ratios = [r[f"{label}_tflops"] / r["fa2_tflops"] for r in rows if r.get(f"{label}_tflops") and r.get("fa2_tflops")]
    lines = [
        f"bf16: {n - len(unmeasured) - len(under_cudnn)} of {n} cells at or above cuDNN"
        + (f"; under: {', '.join(under_cudnn)}" if under_cudnn else ""),
        f"bf16: {n - len(unmeasured) - len(under_fa2)} of {n} at or above FA2"
        + (f" ({min(ratios):.2f}-{max(ratios):.2f}x)" if ratios else "")
        + (f"; under: {', '.join(under_fa2)}" if under_fa2 else ""),
        f"bf16 stretch: {long_cells - len(stretch_miss)} of {long_cells} cells from 2k at {STRETCH:.2f}x cuDNN or more"
        + (f"; under: {', '.join(stretch_miss)}" if stretch_miss else ""),
    ]
    if unmeasured:
        lines.append(f"bf16: not measured: {', '.join(unmeasured)}")
    met = n == 36 and not under_cudnn and not under_fa2 and not unmeasured
    if n != 36:
        lines.append(f"bf16: {n} cells in the call, the issue's table has 36")
    return met, lines


def fp8_rules(rows, label):
    """(met, lines): hd128 and hd256 from 4k, both masks, at FP8_BAR TFLOPS or more."""
    judged = [r for r in rows if r["hdim"] in (128, 256) and r["seqlen"] >= FP8_FROM]
    under, unmeasured = [], []
    for r in judged:
        ours = r.get(f"{label}_tflops")
        if not ours:
            unmeasured.append(cell(r))
        elif ours < FP8_BAR:
            under.append(f"{cell(r)} {ours:.1f}")
    lines = [
        f"fp8: {len(judged) - len(under) - len(unmeasured)} of {len(judged)} cells (hd128, hd256 from {FP8_FROM // 1024}k)"
        f" at {FP8_BAR:.0f} TFLOPS or more" + (f"; under: {', '.join(under)}" if under else "")
    ]
    if unmeasured:
        lines.append(f"fp8: not measured: {', '.join(unmeasured)}")
    masks = {(r["hdim"], r["causal"]) for r in judged}
    complete = len(masks) == 4 and all(
        {r["seqlen"] for r in judged if (r["hdim"], r["causal"]) == m} >= {4096, 8192, 16384} for m in masks)
    if not complete:
        lines.append("fp8: the call lacks some of hd128 and hd256, causal and not, at 4k, 8k and 16k")
    return complete and not under and not unmeasured, lines


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    out_dir = argv[1]
    verdicts = []
    for name, rules in (("bench.json", bf16_rules), ("bench_fp8bf16.json", fp8_rules)):
        rows = load(os.path.join(out_dir, name))
        if not rows:
            print(f"{name}: not found or empty in {out_dir}: that rule was not measured")
            verdicts.append(False)
            continue
        label = argv[2] if len(argv) == 3 else label_of(rows)
        met, lines = rules(rows, label)
        odd = off_shape(rows)
        if odd:
            lines.append(f"{name}: {len(odd)} cells not of the issue's shape ({ISSUE_TOKENS} tokens, hidden {ISSUE_HIDDEN}): "
                         + ", ".join(odd[:3]) + (", ..." if len(odd) > 3 else ""))
        print("\n".join(lines))
        verdicts.append(met and not odd)
    print("done-when (issue 20, on this call's machine): " + ("met" if all(verdicts) else "not met"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
