#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tuned_vs_best.py ALL.CSV SELECTOR.CSV: a second measurement of a selector against the
per-case best of a `fmha bench --all` sweep. ALL.CSV has every candidate of each case;
SELECTOR.CSV is `fmha bench` (selector only, e.g. with --tune-db) over the same cases,
measured later. Prints how often the selector's kernel is the sweep's best kernel and the
geometric mean over the cases of selector time / best time, both times as measured
(median), so the figure includes the drift between the two runs.
"""
import csv, math, sys


def rows(path):
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["library"] == "fmha" and r["status"] == "ok"
                and r["verify"] != "fail"]


best = {}
for r in rows(sys.argv[1]):
    key = (r["command"], r["flags"])
    if key not in best or float(r["median_ms"]) < float(best[key]["median_ms"]):
        best[key] = r
logs, hits, worst = [], 0, (1.0, "")
for r in rows(sys.argv[2]):
    b = best.get((r["command"], r["flags"]))
    if not b:
        continue
    ratio = float(r["median_ms"]) / float(b["median_ms"])
    logs.append(math.log(ratio))
    hits += r["kernel"] == b["kernel"]
    worst = max(worst, (ratio, r["flags"]))
if not logs:
    sys.exit("tuned_vs_best.py: no case in both files")
g = math.exp(sum(logs) / len(logs))
print(f"measured again: the sweep's best kernel in {hits} of {len(logs)} cases; geometric-mean time vs the "
      f"sweep's best {100 * (g - 1):+.2f}% (worst {100 * (worst[0] - 1):+.1f}%: {worst[1]})")
