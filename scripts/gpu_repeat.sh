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
# Example: scripts/gpu_repeat.sh 20 30 build-gpu/fmha run -v=1 -b=2 -h=4 -s=4097 -s_k=129 -d=256 -mask=b
set -u
[ $# -ge 3 ] || { echo "usage: scripts/gpu_repeat.sh N SECONDS CMD..." >&2; exit 2; }
n=$1 limit=$2
shift 2
OUT=${OUT:-out}; mkdir -p "$OUT"
declare -A count first
for i in $(seq 1 "$n"); do
    log=$(mktemp)
    "$@" >"$log" 2>&1 &
    pid=$!
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$limit" ]; do sleep 1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        rc=hang
        if command -v cuda-gdb >/dev/null && [ ! -f "$OUT/repeat-hang.txt" ]; then
            timeout 120 cuda-gdb -batch -p "$pid" -ex "info cuda kernels" -ex "info cuda blocks" \
                -ex "info cuda warps" -ex "bt" >"$OUT/repeat-hang.txt" 2>&1
        fi
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    else
        wait "$pid"
        rc=$?
        grep -q "^valid: fail" "$log" && rc=fail
    fi
    count[$rc]=$((${count[$rc]:-0} + 1))
    if [ -z "${first[$rc]:-}" ]; then first[$rc]=$i; cp "$log" "$OUT/repeat-$rc.log"; fi
    rm -f "$log"
    [ "${count[hang]:-0}" -ge "${MAX_HANGS:-2}" ] && { n=$i; break; }
done
for rc in "${!count[@]}"; do echo "outcome $rc: ${count[$rc]} of $n runs (first: run ${first[$rc]})"; done
