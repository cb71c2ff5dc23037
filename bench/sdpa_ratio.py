#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Per family, the geometric mean of SDPA's time over fmha's selector time, from a bench
CSV that bench/sdpa_rows.py extended with torch SDPA rows (cases SDPA can express only).

    python3 bench/sdpa_ratio.py bench/results/h100-smoke/bench-smoke-with-sdpa.csv

Above 1.0x, fmha is faster. The best SDPA backend is the fastest of flash, cuDNN and
efficient per case."""
import csv
import math
import sys
from collections import defaultdict


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(path):
    fmha, sdpa = {}, defaultdict(dict)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["status"] != "ok" or float(r["median_ms"] or 0) <= 0:
                continue
            case = (r["command"], r["flags"])
            if r["library"] == "fmha" and r["selector_choice"] == "1":
                fmha[case] = (r["family"], float(r["median_ms"]))
            elif r["library"].startswith("torch-sdpa-"):
                sdpa[case][r["library"][len("torch-sdpa-"):]] = float(r["median_ms"])
    ratios = defaultdict(lambda: defaultdict(list))
    for case, backends in sdpa.items():
        if case not in fmha:
            continue
        family, t = fmha[case]
        for name, ts in list(backends.items()) + [("best", min(backends.values()))]:
            ratios[family][name].append(ts / t)
    print("| family | cases | vs FA2 (flash) | vs cuDNN | vs the best SDPA backend | range vs the best |")
    print("|---|---|---|---|---|---|")
    for family in sorted(ratios):
        r = ratios[family]
        cell = lambda n: "%.2fx" % geomean(r[n]) if r.get(n) else "-"
        print("| %s | %d | %s | %s | %s | %.2f-%.2fx |" % (family, len(r["best"]), cell("flash"), cell("cudnn"),
                                                        cell("best"), min(r["best"]), max(r["best"])))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: sdpa_ratio.py BENCH_WITH_SDPA.csv")
    main(sys.argv[1])
