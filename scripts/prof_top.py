#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""prof_top.py SRC_CSV [--top N] [--regions PCT] [--diff OTHER_CSV]: read the per-SASS source
page that gpu_profile.sh writes ($OUT/[TAG-]src.csv) and say where a kernel's warps stall.

  --top N        the N instructions with the most stall samples, each with its two leading
                 reasons and how many times it ran (default 25)
  --regions PCT  runs of consecutive instructions that ran equally often (the code of one
                 item, of one key tile, of the producer ...), those with at least PCT% of
                 the samples (default 1), with their leading reasons: how perf-notes runs
                 94-95 split an item's head, loop and tail
  --diff OTHER   each stall reason's samples here and in OTHER (e.g. the same kernel
                 before a change), largest growth first
"""
import argparse
import csv
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # the first row names the kernel; the second is the header
    header, data = rows[1], [r for r in rows[2:] if len(r) == len(rows[1])]
    col = {name: i for i, name in enumerate(header)}
    reasons = [(name[len("stall_"):], i) for name, i in col.items()
               if name.startswith("stall_") and "Not Issued" not in name]
    out = []
    for r in data:
        out.append({
            "sass": r[col["Source"]].strip(),
            "samples": int(r[col["Warp Stall Sampling (All Samples)"]] or 0),
            "executed": int(r[col["Instructions Executed"]] or 0),
            "reasons": {name: int(r[i] or 0) for name, i in reasons},
        })
    return out


def leading(reasons, n=2):
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{name} {count}" for name, count in top if count)


def top_instructions(insts, n, total):
    print(f"{'#':>5} {'share':>6} {'ran':>8}  instruction")
    order = sorted(range(len(insts)), key=lambda k: -insts[k]["samples"])[:n]
    for k in sorted(order):
        i = insts[k]
        print(f"{k:5d} {100 * i['samples'] / total:5.1f}% {i['executed']:8d}  {i['sass'][:60]:60s} {leading(i['reasons'])}")


def regions(insts, pct, total):
    print(f"{'first':>5}-{'last':<5} {'share':>6} {'ran':>8}  first instruction / leading reasons")
    start = 0
    for k in range(1, len(insts) + 1):
        if k < len(insts) and insts[k]["executed"] == insts[start]["executed"]:
            continue
        span = insts[start:k]
        samples = sum(i["samples"] for i in span)
        if samples * 100 >= pct * total:
            agg = totals(span)
            print(f"{start:5d}-{k - 1:<5d} {100 * samples / total:5.1f}% {span[0]['executed']:8d}  "
                  f"{span[0]['sass'][:40]:40s} {leading(agg, 3)}")
        start = k


def totals(insts):
    agg = {}
    for i in insts:
        for name, count in i["reasons"].items():
            agg[name] = agg.get(name, 0) + count
    return agg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--regions", type=float, default=1.0)
    ap.add_argument("--diff")
    a = ap.parse_args()
    insts = load(a.src)
    total = sum(i["samples"] for i in insts)
    if not total:
        sys.exit(f"prof_top.py: {a.src} has no stall samples")
    print(f"{a.src}: {len(insts)} instructions, {total} stall samples")
    top_instructions(insts, a.top, total)
    print()
    regions(insts, a.regions, total)
    if a.diff:
        here, there = totals(insts), totals(load(a.diff))
        print(f"\nstall reason          here  {a.diff}")
        for name in sorted(here, key=lambda n: -(here[n] - there.get(n, 0))):
            print(f"{name:18s} {here[name]:7d} {there.get(name, 0):7d} {here[name] - there.get(name, 0):+7d}")


if __name__ == "__main__":
    main()
