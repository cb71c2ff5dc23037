#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""phase_clocks.py: the phase marks of a diagnostic build (src/cuda/kernels/device/
phase_clock.cuh) as a table. Reads the `PH ...` lines that `fmha run` printed (stdin or a
file), keeps the last launch's (the last line of each CTA), and prints per mark the
median and the maximum over the CTAs of the cycles since each CTA's start, the reducing
CTAs (tag 1) apart, and the launch's span from its first CTA's start to its last CTA's
report (globaltimer).

A persistent kernel's per-item lines (`PI <cta> <slot> <item> <start ns> <tile-loop cycles>
<SM> <done ns> [<key tiles> <start cycles>]`, fwd_wgmma.cuh's diagnostic build) add a
table: the tile loop's cycles per item slot over the CTAs, the clock they imply, and when
the CTAs finished by item count (the last round's idle SMs). With the last two fields, a
least-squares line of an item's cost against its key tiles, for the tile loop alone and
for the whole item (its start to the next one's in the same CTA: loop, epilogue, waits):
the slope is a tile's cost, the intercept an item's fixed cost, and their ratio that cost
in tiles (perf-notes run 158's model, measured).

Usage: fmha run ... | python3 bench/phase_clocks.py [--names "1:wait,2:Q issued,..."]
"""
import argparse
import collections
import statistics
import sys

MAX_TILE_CYCLES = 1_000_000  # longer than any tile: two notes from different launches
DECODE_NAMES = ("1:prior grids waited,2:Q's copies issued,3:first K/V copies issued,4:first tile landed,"
                "5:tile loop,6:warps merged,7:rows out,8:arrival,9:last split's reduction,"
                "10:its first row's LSEs,11:its first row summed,12:page lookups in,13:lookups shared,"
                "14:tile 0's copies issued")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", help="fmha run's output (default: stdin)")
    ap.add_argument("--names", default=DECODE_NAMES, help="mark:name pairs, comma-separated (default: the decode's)")
    args = ap.parse_args()
    text = list(open(args.file) if args.file else sys.stdin)
    items([tuple(map(int, l.split()[1:])) for l in text if l.startswith("PI ")])
    tiles([tuple(map(int, l.split()[1:])) for l in text if l.startswith("PT ")])
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


def tiles(rows):
    """PT lines (cta, warpgroup, ring tile, go, S landed, softmax done, P V landed, S issued,
    P V issued; clock64): each warpgroup's tile split into its steps, medians over the
    CTAs and tiles, and how much of warpgroup 0's softmax warpgroup 1's overlaps."""
    if not rows:
        return
    d = {(r[0], r[1], r[2]): r[3:] for r in rows}  # the last launch's values
    steps = collections.defaultdict(list)
    overlap = []
    names = ("K wait + S issue", "rescale + V wait + P V issue", "S landed after", "softmax", "P V wait",
             "pack + to the next tile")
    for (cta, wg, j), a in d.items():
        b = d.get((cta, wg, j + 1))
        # the notes live in a module array across launches: a tile whose next one was noted
        # by another launch (the CTA ran fewer tiles this time) is not a tile's length
        if not b or 0 in a or 0 in b or not 0 < b[0] - a[0] < MAX_TILE_CYCLES:
            continue
        go, s_in, smax, pv, s_iss, pv_iss = a
        for name, v in zip(names, (s_iss - go, pv_iss - s_iss, s_in - pv_iss, smax - s_in, pv - smax, b[0] - pv)):
            steps[name].append(v)
        steps["tile"].append(b[0] - go)
        if wg == 0:
            o = [d.get((cta, 1, jj)) for jj in range(j - 2, j + 3)]
            both = sum(max(0, min(smax, x[2]) - max(s_in, x[1])) for x in o if x and 0 not in x)
            overlap.append(both / max(1, smax - s_in))
    if not steps:
        print("tile steps: none noted (the serial loop notes no tile clocks; or the CTAs ran fewer tiles than "
              "PT_FIRST + 1)")
        return
    print("tile steps per warpgroup (cycles, median / p10 / p90):")
    for name in names + ("tile",):
        v = sorted(steps[name])
        print(f"  {name:30} {statistics.median(v):7.0f} {v[len(v) // 10]:7d} {v[9 * len(v) // 10]:7d}")
    if overlap:
        print(f"  warpgroup 0's softmax overlapped by warpgroup 1's: median {statistics.median(overlap):.2f}")


def items(rows):
    """The last launch's PI lines: rows (cta, slot, item, start ns, loop cycles, SM, done ns)."""
    if not rows:
        return
    rows.sort(key=lambda r: r[3])
    # launches run one after another: an item that starts after every item so far is done
    # starts the next
    last, all_done = [], 0
    for r in rows:
        if r[3] > all_done:
            last = []
        last.append(r)
        all_done = max(all_done, r[6])
    t0 = min(r[3] for r in last)
    by = collections.defaultdict(dict)
    for cta, slot, _item, ns, loop, _sm, done, *_ in last:
        by[cta][slot] = (ns - t0, loop, done - t0)
    # an upper bound on the clock: the loop's cycles over the time to the next item's start
    clock = [its[k][1] / (its[k + 1][0] - its[k][0]) for its in by.values() for k in its
             if k + 1 in its and its[k + 1][0] > its[k][0]]
    bound = f"at most ~{statistics.median(clock):.2f} cycles/ns" if clock else "no CTA ran two items"
    print(f"items: {len(last)} on {len(by)} CTAs; tile loop cycles per item (loop over item start to start: {bound})")
    for slot in sorted({k for its in by.values() for k in its}):
        x = [its[slot][1] for its in by.values() if slot in its]
        print(f"  slot {slot:2}: {len(x):4} CTAs, median {statistics.median(x):9.0f} min {min(x):9d} max {max(x):9d}")
    for n, count in sorted(collections.Counter(len(its) for its in by.values()).items()):
        done = [next(iter(its.values()))[2] for its in by.values() if len(its) == n]
        print(f"  {count} CTAs ran {n} items: done at {min(done)}-{max(done)} ns")
    if all(len(r) >= 9 for r in last):
        item_costs(last)


def fit(points):
    """Least squares y = a + b x over (x, y) points: (a, b), or None without two x values."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def item_costs(last):
    """An item's cycles against its key tiles (PI lines with tiles and start cycles)."""
    by = collections.defaultdict(dict)
    for cta, slot, _item, _ns, loop, _sm, _done, ntiles, clk in last:
        by[cta][slot] = (ntiles, loop, clk)
    loops = [(t, loop) for its in by.values() for t, loop, _ in its.values()]
    whole = [(its[k][0], its[k + 1][2] - its[k][2]) for its in by.values() for k in its if k + 1 in its]
    print("an item's cycles against its key tiles (least squares):")
    for name, points in (("tile loop", loops), ("whole item", whole)):
        f = fit(points) if points else None
        if not f:
            print(f"  {name:10}: too few items of different lengths")
            continue
        a, b = f
        print(f"  {name:10}: {b:8.0f} a tile + {a:8.0f} an item ({a / b:.2f} tiles), over {len(points)} items")
    counts = collections.defaultdict(list)
    for t, span in whole:
        counts[t].append(span)
    shown = sorted(counts)
    if len(shown) > 8:  # the shortest, the longest and six between
        shown = sorted({shown[round(i * (len(shown) - 1) / 7)] for i in range(8)})
    for t in shown:
        print(f"  {t:3} tiles: whole item median {statistics.median(counts[t]):9.0f} over {len(counts[t])}")


if __name__ == "__main__":
    main()
