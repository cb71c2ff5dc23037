#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_bench_plot.sh FMHA PYTHON SRC: a `fmha bench` CSV on the CPU backend becomes a PNG
# through bench/plot_bench.py, one panel per family, both --by modes; bench/sdpa_ratio.py
# reads SDPA rows (made here from fmha's: 2x and 0.5x its time) into per-family ratios.
set -eu
fmha=$1 python=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/m.txt" <<'MATRIX'
smoke t/fwd run -prec=bf16 -b=1 -h=2 -d=32 -s={16|64} -mask={0|t}
smoke t/dec run -prec=bf16 -family=fwd_splitkv -b=2 -h=4 -h_k=2 -d=32 -s=1 -s_k={50|200}
smoke t/bwd bwd -prec=bf16 -b=1 -h=2 -d=32 -s=24
MATRIX
"$fmha" bench --matrix="$work/m.txt" --repeat=2 --sample-ms=0.05 --quiet --csv="$work/b.csv" >/dev/null
for by in kernel library; do
    out=$("$python" "$src/bench/plot_bench.py" "$work/b.csv" "$work/$by.png" --by "$by")
    grep -q "^wrote $work/$by.png: 7 rows in 3 panels$" <<<"$out" || { echo "FAIL: $out"; exit 1; }
    [ "$(head -c 8 "$work/$by.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "FAIL: $by.png is not a PNG"; exit 1; }
done
"$python" - "$work/b.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
with open(sys.argv[1], "a", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    for r in rows:
        if r["selector_choice"] == "1":
            for lib, k in (("torch-sdpa-flash", 2.0), ("torch-sdpa-cudnn", 0.5)):
                w.writerow(dict(r, library=lib, selector_choice="0", median_ms=float(r["median_ms"]) * k))
PY
out=$("$python" "$src/bench/sdpa_ratio.py" "$work/b.csv")
for want in '| fwd | 4 | 2.00x | 0.50x | 0.50x | 0.50-0.50x |' '| fwd_splitkv | 2 | 2.00x | 0.50x | 0.50x |' '| bwd | 1 | 2.00x | 0.50x |'; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: sdpa_ratio lacks '$want' in:"; echo "$out"; exit 1; }
done
echo "plot ok"
