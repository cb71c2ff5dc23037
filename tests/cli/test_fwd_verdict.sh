#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_fwd_verdict.sh PYTHON SRC: bench/fwd_verdict.py on made-up bench JSON (the 36 bf16
# cells and the fp8 cells, as bench/bench_gpu.py writes them): all rules met; one bf16 cell
# under cuDNN and one fp8 cell under 900; a cell without a figure; the fp8 file missing;
# a call with another batch at 512 (BENCH_TOKENS=16896: 33 sequences there).
# A verdict of "met" must need every rule measured and met.
set -eu
python=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# write_bench DIR [EDIT...]: the two files, every cell passing; an EDIT "prec hdim causal seq value"
# sets that cell's fmha figure (value "none": not measured); TOKENS (default 16384) the
# tokens of every cell
write_bench() {
    local dir=$1; shift
    mkdir -p "$dir"
    TOKENS=${TOKENS:-16384} "$python" - "$dir" "$@" <<'PY'
import json, os, sys
out, edits = sys.argv[1], [e.split() for e in sys.argv[2:]]
tokens = int(os.environ["TOKENS"])
for prec, name in (("bf16", "bench.json"), ("fp8", "bench_fp8bf16.json")):
    rows = []
    for d in (64, 128, 256):
        for causal in (False, True):
            for s in (512, 1024, 2048, 4096, 8192, 16384):
                ours = 1000.0 if prec == "fp8" else 600.0
                for p, hd, c, seq, v in edits:
                    if (p, int(hd), c == "causal", int(seq)) == (prec, d, causal, s):
                        ours = None if v == "none" else float(v)
                rows.append({"hdim": d, "causal": causal, "seqlen": s, "batch": tokens // s, "heads": 2048 // d,
                             "fa2_tflops": 300.0, "cudnn_tflops": 500.0, "kernel": "k",
                             "fmha_tflops": ours, "fmha_all_tflops": [ours] if ours else []})
    with open(f"{out}/{name}", "w") as f:
        json.dump(rows, f)
PY
}
verdict() { "$python" "$src/bench/fwd_verdict.py" "$1"; }
expect() { # output, pattern, what
    grep -qF -- "$2" <<<"$1" || { echo "FAIL: $3: no '$2' in:"; echo "$1"; exit 1; }
}

write_bench "$work/all"
out=$(verdict "$work/all"); echo "$out"
expect "$out" "bf16: 36 of 36 cells at or above cuDNN" "all met"
expect "$out" "fp8: 12 of 12 cells" "all met"
expect "$out" "bf16 stretch: 24 of 24" "all met"
expect "$out" "done-when (issue 20, on this call's machine): met" "all met"

write_bench "$work/under" "bf16 256 full 512 480" "fp8 128 causal 4096 820.7"
out=$(verdict "$work/under"); echo "$out"
expect "$out" "35 of 36 cells at or above cuDNN; under: hd256 unmasked 512 0.960" "a bf16 cell under"
expect "$out" "11 of 12 cells (hd128, hd256 from 4k) at 900 TFLOPS or more; under: hd128 causal 4096 820.7" "an fp8 cell under"
expect "$out" ": not met" "cells under"

write_bench "$work/stretch" "bf16 128 causal 4096 540"
out=$(verdict "$work/stretch"); echo "$out"
expect "$out" "23 of 24 cells from 2k at 1.10x cuDNN or more; under: hd128 causal 4096 1.080" "the stretch reported"
expect "$out" ": met" "the stretch is not required"

write_bench "$work/gap" "bf16 64 causal 1024 none"
out=$(verdict "$work/gap"); echo "$out"
expect "$out" "bf16: not measured: hd64 causal 1024" "a cell without a figure"
expect "$out" ": not met" "an unmeasured cell is not a pass"

write_bench "$work/nofp8"; rm "$work/nofp8/bench_fp8bf16.json"
out=$(verdict "$work/nofp8"); echo "$out"
expect "$out" "bench_fp8bf16.json: not found" "the fp8 file missing"
expect "$out" ": not met" "a rule not measured is not a pass"
TOKENS=16896 write_bench "$work/tokens"
out=$(verdict "$work/tokens"); echo "$out"
expect "$out" "bench.json: 6 cells not of the issue's shape (16384 tokens, hidden 2048): hd64 unmasked 512 (b33 h32)" "another batch"
expect "$out" ": not met" "another shape is not the issue's table"
echo "ok"
