#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# phase_clocks.sh: on a GPU machine, where a kernel's CTAs spend their time: this tree is
# built once more with FMHA_PHASE_CLOCKS defined in one kernel file (its PHASE_MARKs,
# src/cuda/kernels/device/phase_clock.cuh), `fmha run` runs each problem given (a few
# launches; each CTA reports its marks into a buffer that a kernel of its own prints
# after each launch), and bench/phase_clocks.py tabulates the last launch. Nothing is
# printed while the kernel runs; but `fmha run` launches one at a time, without CUDA
# graphs, and the marks' local-memory stores cost a little (perf-notes run 206: launch
# spans 3-6% over the normal kernels' times).
# Usage: scripts/phase_clocks.sh "RUN FLAGS" ["RUN FLAGS" ...]
#        PHASE_FILE (default src/cuda/kernels/splitkv/decode_mma.cuh), PHASE_NAMES (marks,
#        as phase_clocks.py --names; default the decode's), PHASE_EDITS (more edits of
#        the tree, as variant_tree.sh's: FILE:SED_EXPR[@@...], e.g. a switch turned on, or
#        another reporting thread: "src/cuda/kernels/fwd/fwd_wgmma.cuh:1i #define
#        PHASE_REPORTER (128 * (CONSUMERS - 1))" for the forward's last consumer warpgroup,
#        whose waits differ from the first's where causal rows load them unequally);
#        PHASE_TILES=1 also notes the forward's tile steps (PT lines: wgmma_loops.cuh).
#        Every kernel compiles afresh with ptxas's report (FMHA_PTXAS_LOG), and the script
#        says so where the diagnostic build serialised its wgmmas (C7510/C7511): such a
#        build's times are not the kernel's. Full output under $OUT.
# Example: scripts/phase_clocks.sh "-family=fwd_splitkv -b=1 -h=64 -h_k=8 -s=1 -s_k=2048 -d=128 -prec=bf16"
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
. scripts/variant_tree.sh
file=${PHASE_FILE:-src/cuda/kernels/splitkv/decode_mma.cuh}
[ $# -gt 0 ] || { sed -n '2,22p' "$0"; exit 2; }
edits="$file:1i #define FMHA_PHASE_CLOCKS 1"
[ "${PHASE_TILES:-0}" = 1 ] && edits+="@@$file:1i #define FMHA_PHASE_TILES 1"
variant_tree phases fmha_cli "$edits${PHASE_EDITS:+@@$PHASE_EDITS}" >/dev/null || exit 1
# a fresh cache, so that every kernel compiles here and ptxas reports on it
export FMHA_CACHE_DIR=$PWD/build-var-phases/cache-$$ FMHA_PTXAS_LOG=1
rm -rf "$FMHA_CACHE_DIR"
names=(); [ -n "${PHASE_NAMES:-}" ] && names=(--names "$PHASE_NAMES")
n=0
for flags in "$@"; do
    n=$((n + 1))
    echo "== $flags"
    # shellcheck disable=SC2086 # the flags are words
    build-var-phases/lib/fmha run -backend=cuda -warmup=3 -repeat=1 $flags >"$OUT/phases-$n.txt" 2>&1 ||
        { tail -5 "$OUT/phases-$n.txt"; continue; }
    grep -q "C751[01]" "$OUT/phases-$n.txt" &&
        echo "WARNING: ptxas serialised this diagnostic build's wgmmas (C7510/C7511, in $OUT/phases-$n.txt): its times are not the kernel's"
    python3 bench/phase_clocks.py "${names[@]}" "$OUT/phases-$n.txt"
done
