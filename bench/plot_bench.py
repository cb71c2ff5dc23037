#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot_bench.py BENCH.CSV OUT.PNG [--by kernel|library] [--title T]: one panel per family of
a `fmha bench` CSV (with sdpa_rows.py's rows when present): the rate of each row against its
sequence length. Compute-bound families (fwd, batch_prefill, bwd) plot TFLOPS; memory-bound
ones (fwd_splitkv and fwd_pagedkv decode, appendkv) plot GB/s, both by REFERENCE.md's
counts. --by kernel (default) draws a series per fmha kernel pipeline and tile plus one per
comparison library; --by library draws fmha's selector choice against the comparison
libraries. The x axis is seqlen_kv for decode and append, else seqlen_q (log scale).
Rows that did not run are left out; the figure's footer says how many.
"""
import argparse, csv, sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MEMORY_BOUND = {"fwd_splitkv", "fwd_pagedkv", "appendkv"}


def label(row, by):
    if row["library"] != "fmha":
        return row["library"]
    if by == "library":
        return "fmha (selector)"
    pipe, tm, tn = row.get("key_pipeline", ""), row.get("key_tile_m", ""), row.get("key_tile_n", "")
    return f"fmha {pipe} m{tm} n{tn}" if pipe else f"fmha {row['kernel']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--by", choices=("kernel", "library"), default="kernel")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    with open(a.csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    used = [r for r in rows if r["status"] == "ok" and float(r["median_ms"] or 0) > 0
            and (a.by == "kernel" or r["library"] != "fmha" or r["selector_choice"] == "1")]
    left_out = len(rows) - len([r for r in rows if r["status"] == "ok"])
    families = sorted({r["family"] for r in used})
    if not families:
        sys.exit(f"plot_bench.py: no measured rows in {a.csv}")
    cols = min(3, len(families))
    nrows = (len(families) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4.2 * nrows), squeeze=False)
    for ax, fam in zip(axes.flat, families):
        mem = fam in MEMORY_BOUND
        series = defaultdict(list)
        for r in used:
            if r["family"] != fam:
                continue
            x = int(r["seqlen_kv"] if mem else r["seqlen_q"])
            series[label(r, a.by)].append((x, float(r["gbps"] if mem else r["tflops"])))
        for name in sorted(series, key=lambda s: (not s.startswith("fmha"), s)):
            pts = sorted(series[name])
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=18, label=name,
                       marker="o" if name.startswith("fmha") else "x")
        ax.set_xscale("log", base=2)
        ax.set_title(fam)
        ax.set_xlabel("seqlen_kv" if mem else "seqlen_q")
        ax.set_ylabel("GB/s" if mem else "TFLOPS")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(families):]:
        ax.axis("off")
    device = next((r["device"] for r in used if r["library"] == "fmha"), "")
    fig.suptitle(a.title or f"fmha bench, {device}: {len(used)} rows")
    fig.text(0.01, 0.005, f"{a.csv}; {left_out} rows that did not run are left out", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(a.png, dpi=110)
    print(f"wrote {a.png}: {len(used)} rows in {len(families)} panels")


if __name__ == "__main__":
    main()
