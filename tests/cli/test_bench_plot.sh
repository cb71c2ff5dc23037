#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_bench_plot.sh FMHA PYTHON SRC: a `fmha bench` CSV on the CPU backend becomes a PNG
# through bench/plot_bench.py, one panel per family, both --by modes.
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
echo "plot ok"
