#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_repeat.sh N SECONDS CMD...: on a GPU machine, run CMD (an `fmha run ...` line from a
# conformance log, say) N times, each under a SECONDS limit, to tell a flaky hang or failure
# from a slow case. Prints one line per outcome (how many runs ended so, the first run's
# number) and keeps the output of the first run of each outcome as $OUT/repeat-<rc>.log.
# When a run outlives its limit and cuda-gdb is on the PATH, it first attaches to the
# process and writes the GPU's kernels, blocks and warps (with their PCs) to
# $OUT/repeat-hang.txt, then kills it: where a hung kernel waits. MAX_HANGS (default 2)
# hangs end the loop early, since each costs its whole limit.
#
# A/B on one machine (did a change fix a flaky hang?): REPEAT_BEFORE=DIR, an older tree
# copied there beforehand (`git archive REV | tar -x -C DIR`, on this machine: the device
# gets no .git; DIR must not be git-ignored, so that it travels with the tree). Both DIR's
# CLI and this tree's are built (build-var-before, build-var-after), "{fmha}" in CMD stands
# for the binary (without REPEAT_BEFORE: build-gpu/fmha), and the two take turns, run
# after run; outcomes and logs are per label (repeat-before-<rc>.log). REPEAT_KERNELS=FILE
# (kernel names, one a line) precompiles those kernels with each tree first, so that no
# run's limit is spent in NVRTC. Each tree keeps its own kernel cache (build-var-*/cache).
# Example: REPEAT_BEFORE=_before scripts/gpu_repeat.sh 20 10 {fmha} run -v=1 -b=2 -h=4 \
#          -s=4097 -s_k=129 -d=256 -prec=bf16 -mask=b -bias=e:1
set -u
[ $# -ge 3 ] || { echo "usage: scripts/gpu_repeat.sh N SECONDS CMD..." >&2; exit 2; }
cd "$(dirname "$0")/.."
n=$1 limit=$2
shift 2
OUT=${OUT:-out}; mkdir -p "$OUT"
labels=("") bins=("$PWD/build-gpu/fmha")
if [ -n "${REPEAT_BEFORE:-}" ]; then
    [ -f "$REPEAT_BEFORE/CMakeLists.txt" ] || { echo "REPEAT_BEFORE=$REPEAT_BEFORE: no source tree there" >&2; exit 2; }
    . scripts/variant_tree.sh
    build_tree before "$REPEAT_BEFORE" fmha_cli & b1=$!
    build_tree after . fmha_cli & b2=$!
    wait $b1 && wait $b2 || exit 1
    labels=(before after) bins=("$PWD/build-var-before/lib/fmha" "$PWD/build-var-after/lib/fmha")
    if [ -n "${REPEAT_KERNELS:-}" ]; then
        for k in 0 1; do
            FMHA_CACHE_DIR="$PWD/build-var-${labels[$k]}/cache" "${bins[$k]}" build -names="$REPEAT_KERNELS" | tail -1 &
        done
        wait
    fi
fi
declare -A count first
# one run of CMD ({fmha} replaced by the label's binary) under the limit: sets rc
run_once() { # label binary run-number
    local cmd=() a log pid waited=0 tag=${1:+$1-}
    for a in "${@:4}"; do cmd+=("${a//\{fmha\}/$2}"); done
    log=$(mktemp)
    if [ -n "$1" ]; then FMHA_CACHE_DIR="$PWD/build-var-$1/cache" "${cmd[@]}" >"$log" 2>&1 &
    else "${cmd[@]}" >"$log" 2>&1 & fi
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$limit" ]; do sleep 1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        rc=hang
        if command -v cuda-gdb >/dev/null && [ ! -f "$OUT/repeat-${tag}hang.txt" ]; then
            timeout 120 cuda-gdb -batch -p "$pid" -ex "info cuda kernels" -ex "info cuda blocks" \
                -ex "info cuda warps" -ex "bt" >"$OUT/repeat-${tag}hang.txt" 2>&1
        fi
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    else
        wait "$pid"
        rc=$?
        grep -q "^valid: fail" "$log" && rc=fail
    fi
    local key="${tag}$rc"
    count[$key]=$((${count[$key]:-0} + 1))
    if [ -z "${first[$key]:-}" ]; then first[$key]=$3; cp "$log" "$OUT/repeat-$key.log"; fi
    rm -f "$log"
}
done_runs=0
for i in $(seq 1 "$n"); do
    stop=1
    for k in "${!labels[@]}"; do
        l=${labels[$k]}
        [ "${count[${l:+$l-}hang]:-0}" -ge "${MAX_HANGS:-2}" ] && continue
        run_once "$l" "${bins[$k]}" "$i" "$@"
        stop=0
    done
    [ "$stop" = 1 ] && break
    done_runs=$i
done
for key in $(printf '%s\n' "${!count[@]}" | sort); do
    echo "outcome ${key}: ${count[$key]} runs (first: run ${first[$key]})"
done
echo "($done_runs rounds of $n; a label stops after ${MAX_HANGS:-2} hangs)"
