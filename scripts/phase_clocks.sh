#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# phase_clocks.sh: on a GPU machine, where a kernel's CTAs spend their time: this tree is
# built once more with FMHA_PHASE_CLOCKS defined in one kernel file (its PHASE_MARKs,
# src/cuda/kernels/device/phase_clock.cuh), `fmha run` runs each problem given (a few
# launches; each CTA prints its marks), and bench/phase_clocks.py tabulates the last
# launch. The printing slows nothing before a CTA's report, so the marks are as in a
# normal launch; but `fmha run` launches one at a time, without CUDA graphs.
# Usage: scripts/phase_clocks.sh "RUN FLAGS" ["RUN FLAGS" ...]
#        PHASE_FILE (default src/cuda/kernels/splitkv/decode_mma.cuh), PHASE_NAMES (marks,
#        as phase_clocks.py --names; default the decode's), PHASE_EDITS (more edits of
#        the tree, as variant_tree.sh's: FILE:SED_EXPR[@@...], e.g. a switch turned on, or
#        another reporting thread: "src/cuda/kernels/fwd/fwd_wgmma.cuh:1i #define
#        PHASE_REPORTER (128 * (CONSUMERS - 1))" for the forward's last consumer warpgroup,
#        whose waits differ from the first's where causal rows load them unequally).
#        Full output under $OUT.
# Example: scripts/phase_clocks.sh "-family=fwd_splitkv -b=1 -h=64 -h_k=8 -s=1 -s_k=2048 -d=128 -prec=bf16"
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/variant_tree.sh
file=${PHASE_FILE:-src/cuda/kernels/splitkv/decode_mma.cuh}
[ $# -gt 0 ] || { sed -n '2,17p' "$0"; exit 2; }
variant_tree phases fmha_cli "$file:1i #define FMHA_PHASE_CLOCKS 1${PHASE_EDITS:+@@$PHASE_EDITS}" >/dev/null || exit 1
export FMHA_CACHE_DIR=$PWD/build-var-phases/cache
names=(); [ -n "${PHASE_NAMES:-}" ] && names=(--names "$PHASE_NAMES")
n=0
for flags in "$@"; do
    n=$((n + 1))
    echo "== $flags"
    # shellcheck disable=SC2086 # the flags are words
    build-var-phases/lib/fmha run -backend=cuda -warmup=3 -repeat=1 $flags >"$OUT/phases-$n.txt" 2>&1 ||
        { tail -5 "$OUT/phases-$n.txt"; continue; }
    python3 bench/phase_clocks.py "${names[@]}" "$OUT/phases-$n.txt"
done
