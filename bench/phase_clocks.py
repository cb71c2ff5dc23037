#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""phase_clocks.py: the phase marks of a diagnostic build (src/cuda/kernels/device/
phase_clock.cuh) as a table. Reads the `PH ...` lines that `fmha run` printed (stdin or a
file), keeps the last launch's (the last line of each CTA), and prints per mark the
median and the maximum over the CTAs of the cycles since each CTA's start, the reducing
CTAs (tag 1) apart, and the launch's span from its first CTA's start to its last CTA's
report (globaltimer).

Usage: fmha run ... | python3 bench/phase_clocks.py [--names "1:wait,2:Q issued,..."]
"""
import argparse
import statistics
import sys

DECODE_NAMES = ("1:prior grids waited,2:Q's copies issued,3:first K/V copies issued,4:first tile landed,"
                "5:tile loop,6:warps merged,7:rows out,8:arrival,9:last split's reduction,"
                "10:its first row's LSEs,11:its first row summed,12:page lookups in,13:lookups shared,"
                "14:tile 0's copies issued")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", help="fmha run's output (default: stdin)")
    ap.add_argument("--names", default=DECODE_NAMES, help="mark:name pairs, comma-separated (default: the decode's)")
    args = ap.parse_args()
    text = open(args.file) if args.file else sys.stdin
    lines = [l.split() for l in text if l.startswith("PH ")]
    if not lines:
        sys.exit("phase_clocks.py: no PH lines (was the build made with FMHA_PHASE_CLOCKS?)")
    last = {}  # the last report of each CTA: the last launch
    for l in lines:
        last[(int(l[1]), int(l[2]))] = l
    ctas = list(last.values())
    start = min(int(l[4]) for l in ctas)
    end = max(int(l[5]) for l in ctas)
    reducing = [l for l in ctas if l[3] == "1"]
    sms = len({l[21] for l in ctas if len(l) > 21})  # older builds print no SM
    print(f"{len(ctas)} CTAs ({len(reducing)} reducing) on {sms or '?'} SMs; launch span {end - start} ns; "
          f"CTA starts spread over {max(int(l[4]) for l in ctas) - start} ns")
    print(f"{'mark':34} {'median':>8} {'max':>8} {'reducing':>9}   (cycles since the CTA's start)")
    for pair in args.names.split(","):
        mark, name = pair.split(":", 1)
        col = 5 + int(mark)
        got = [int(l[col]) for l in ctas if int(l[col]) > 0]
        red = [int(l[col]) for l in reducing if int(l[col]) > 0]
        if not got:
            continue
        print(f"{mark:>2} {name:31} {statistics.median(got):8.0f} {max(got):8d} "
              f"{statistics.median(red) if red else float('nan'):9.0f}")


if __name__ == "__main__":
    main()
