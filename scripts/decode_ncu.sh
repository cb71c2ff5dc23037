#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# decode_ncu.sh: on a GPU machine after a build (LIB, default build-gpu/libfmha.so), Nsight
# Compute's launch shape, duration and DRAM figures for every kernel of one decode problem,
# per implementation (bench/decode_one.py: fmha, page16, page1, fa2, cudnn), side by side.
# Usage: scripts/decode_ncu.sh B SK [H/HK] [IMPLS (default "fmha page16 fa2 cudnn")]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
b=$1 sk=$2 heads=${3:-32/8} impls=${4:-fmha page16 fa2 cudnn}
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,\
launch__shared_mem_per_block_static,launch__occupancy_limit_shared_mem,launch__cluster_max_active,\
lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
for impl in $impls; do
    echo "== $impl B$b Sk$sk $heads"
    PYTHONPATH=python FMHA_LIBRARY=${LIB:-build-gpu/libfmha.so} ncu --metrics "$metrics" --launch-skip 0 \
        --csv --page raw python3 bench/decode_one.py "$impl" "$b" "$sk" "$heads" >"$OUT/ncu-$impl-$b-$sk.csv" 2>"$OUT/ncu-$impl-$b-$sk.err"
    python3 - "$OUT/ncu-$impl-$b-$sk.csv" "$metrics" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]  # ncu's own lines are not CSV rows
head, rows = rows[0], rows[2:]  # the names, the units, then a row per kernel launch
wanted = sys.argv[2].split(",")
keep = [head.index("Kernel Name")] + [i for i, h in enumerate(head) if h in wanted]
last = {}
for r in rows:
    last[r[head.index("Kernel Name")][:60]] = r  # the last call of each kernel
for name, r in last.items():
    print(name)
    for i in keep[1:]:
        print(f"    {head[i]:60s} {r[i]}")
PY
done
