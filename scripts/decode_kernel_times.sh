#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# decode_kernel_times.sh: on a GPU machine, each kernel's own duration in one decode call
# of fmha and of torch SDPA (FA2, cuDNN), batch 1 (bench/decode_kernel_times.py), from
# Nsight Compute with the caches warm in L2 and the clocks free, as decode_bench.py's
# graph timing sees them. The difference between a call's graph time and the sum of its
# kernels is what its launches cost. Full ncu CSV and the script's log under $OUT.
# Usage: scripts/decode_kernel_times.sh   (DECODE_SEQS, DECODE_HEADS, DECODE_BATCHES as the script)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/ncu_env.sh
ncu_env kernel_times || exit 1
PYTHONPATH=python FMHA_LIBRARY=$PWD/build-gpu/libfmha.so timeout 500 "$NCU" --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum --csv --log-file "$OUT/kernel_times.csv" \
    python3 bench/decode_kernel_times.py >"$OUT/kernel_times.log" 2>&1 || { tail -20 "$OUT/kernel_times.log"; exit 1; }
python3 - "$OUT/kernel_times.log" "$OUT/kernel_times.csv" <<'PY'
import csv, sys
labels = [l.split(" ", 1)[1].strip() for l in open(sys.argv[1]) if l.startswith("CALL ")]
rows = [r for r in csv.reader(l for l in open(sys.argv[2]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
name, unit, value = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
calls, cur = {}, None
for r in rows:
    if "sleep" in r[name] or "spin" in r[name]:
        cur = labels[len(calls)] if len(calls) < len(labels) else None
        calls[cur] = []
        continue
    if cur is not None:
        v = float(r[value].replace(",", "")) * {"nsecond": 1e-3, "ns": 1e-3, "msecond": 1e3, "ms": 1e3}.get(r[unit], 1)
        calls[cur].append((r[name].split("(")[0][:60], v))
print(f"{'call':34} {'us':>7}  kernels (us each)")
for label, ks in calls.items():
    if label and label.endswith(" 2"):
        print(f"{label[:-2]:34} {sum(v for _, v in ks):7.2f}  " + "; ".join(f"{n} {v:.2f}" for n, v in ks))
PY
