#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_check.sh: on a GPU machine, in one call: build, run the GPU conformance of every
# kernel family (tests/gpu/conf_<family>.c) against the CPU oracle's math, benchmark
# against torch SDPA (FA2 and cuDNN backends), and print a short table last. Full logs go
# to $OUT (or ./out).
# Usage: scripts/gpu_check.sh [--no-bench | --bench-only | --build-only | --conf-only]
#                             [--family NAME] [--bench LIST] [--before DIR]
#   --conf-only    the build, the conformance grids (and the index driver, the sanitizers'
#                  samples) of --family, then the summary: none of the thread, Python,
#                  transformers, host-time or benchmark steps
#   --family LIST  run only these families' conformance (comma-separated: fwd,splitkv,...);
#                  "index" is the index-safety driver (tests/gpu/index_safety.c, plain and
#                  under memcheck), which runs when LIST is empty or names it
#   --bench LIST   which benchmarks (comma-separated): fwd (bench/bench_gpu.py, forward
#                  TFLOPS), fp8 (the same in fp8 e4m3, hd64, hd128 and hd256), decode (bench/decode_bench.py, GB/s), bwd (bench/bwd_bench.py,
#                  backward TFLOPS), prefill (bench/prefill_bench.py, paged batch prefill vs
#                  varlen and padded SDPA), append (bench/append_bench.py, appendkv GB/s vs
#                  copy bandwidth); default all. Not in the default: engine (fmha bench's
#                  smoke tier, every candidate, verified, to CSV/JSON; a crash-isolated
#                  decode subset; torch SDPA rows; fmha tune's before/after; the PNGs;
#                  all under $OUT/engine; ENGINE_TIER, default smoke)
#   --before DIR   also build the tree at DIR (an older checkout) and benchmark both,
#                  alternating, as before= and after= (bench_gpu.py)
# Environment: BENCH_HDIMS, BENCH_MASKS, BENCH_SEQS (bench_gpu.py) pick benchmark cells;
# GPU_CASES="max_cases [hdim]" limits the conformance grids (unset: each grid runs as one
# process per head dim, in parallel, and CONF_SHARDS, default "256:3 128:2", splits the
# head dims it names among that many processes); CONF_FIRST=N starts each grid at case N; CONF_TIMEOUT
# (seconds, default 540) bounds all of them together (the families' grids run side by side;
# CONF_SERIAL=1 runs them in turn); SAN_CASES (default 6, 0: skip) the
# cases of each fp8, split-KV, paged, prefill, appendkv and backward grid run under
# memcheck, racecheck and synccheck, side by side. GPU_CHECK_BUDGET (seconds, default 570:
# the device tool's 600-s call less a margin) bounds the whole script: each phase's timeout
# is cut to what is left and a phase with no time left is skipped and named so, so that a
# call always reaches its summary and its logs (a command killed by the call's limit
# returns neither). SASS_TOOLS=1 also packs the machine's cuobjdump and nvdisasm into
# $OUT/sasstools.tar.xz (about 4 MB), for reading SASS on the development machine, which
# has neither (scripts/sass_tools.sh unpacks it). A pack of cubins in .jit-cache/ARCH.tar.xz (scripts/jit_cache_pack.sh,
# carried with the call) is unpacked into the kernel cache before the precompile of the
# grids' kernels. A full run leaves its logs in $OUT/logs.tgz (bundle_logs), the
# benchmark tables as files; a run stopped by TERM or INT still prints what it has and
# bundles its logs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
t0=$(date +%s)
script_deadline=$((t0 + ${GPU_CHECK_BUDGET:-570}))
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((script_deadline - $(date +%s))); }
# cap SECONDS: the smaller of SECONDS and the script's time left less 5 s for the summary,
# and at least 1 (timeout 0 would mean no limit at all)
cap() {
    local l=$(($(left) - 5))
    [ "$l" -lt 1 ] && l=1
    [ "$1" -lt "$l" ] && echo "$1" || echo "$l"
}
phase() { echo "== $* (at $(elapsed) s)"; }
export FMHA_CACHE_DIR=${FMHA_CACHE_DIR:-$PWD/build-gpu/cache}
mode="" family="" before="" benches="fwd,fp8,decode,bwd,prefill,append"
while [ $# -gt 0 ]; do
    case $1 in
    --no-bench | --bench-only | --build-only | --conf-only) mode=$1 ;;
    --family) family=$2; shift ;;
    --before) before=$2; shift ;;
    --bench) benches=$2; shift ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
wants() { [ -z "$family" ] || [[ ",$family," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

. scripts/variant_tree.sh # CMAKE_EXTRA: jansson from .deps where the machine lacks it
. scripts/grid_kernels.sh # grid_kernels: what the conformance grids will plan
build() { # source dir, build dir, log
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=ON "${CMAKE_EXTRA[@]}" >"$3" 2>&1 &&
        cmake --build "$2" -j "$(nproc)" >>"$3" 2>&1 || { tail -30 "$3"; return 1; }
}

if [ "${SASS_TOOLS:-0}" = 1 ]; then
    tools=$(dirname "$(command -v cuobjdump)")
    tar -C "$tools" -cf - cuobjdump nvdisasm | xz -T0 >"$OUT/sasstools.tar.xz" ||
        echo "gpu_check.sh: SASS_TOOLS: no cuobjdump and nvdisasm to pack" >&2
fi
phase build
if [ -n "$before" ]; then build "$before" build-before "$OUT/build-before.log" & fi
build . build-gpu "$OUT/build.log" || exit 1
[ -n "$before" ] && { wait || exit 1; }
build-gpu/fmha version
[ "$mode" = "--build-only" ] && exit 0
bench() {
    local bins=(build-gpu/fmha)
    [ -n "$before" ] && bins=(after=build-gpu/fmha before=build-before/fmha)
    if [[ ",$benches," == *",fwd,"* ]]; then
        echo "== benchmark: forward (bf16, TFLOPS)"
        OUT="$OUT" python3 bench/bench_gpu.py "${bins[@]}" 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
        tail -5 "$OUT/bench.err"
    fi
    if [[ ",$benches," == *",fp8,"* ]]; then
        echo "== benchmark: fp8 e4m3 forward (hd64, hd128 and hd256, TFLOPS; torch SDPA in bf16 for reference)"
        OUT="$OUT" BENCH_PREC=fp8bf16 BENCH_HDIMS=${BENCH_HDIMS:-"64 128 256"} python3 bench/bench_gpu.py "${bins[@]}" \
            2>"$OUT/bench_fp8.err" | tee "$OUT/bench_fp8.txt"
        tail -5 "$OUT/bench_fp8.err"
    fi
    if [[ ",$benches," == *",fwd,"* && ",$benches," == *",fp8,"* && -z "$before" ]]; then
        echo "== issue 20's done-when on this call's cells (bench/fwd_verdict.py; the issue's table is an H100's)"
        nvidia-smi --query-gpu=name --format=csv,noheader | head -1
        python3 bench/fwd_verdict.py "$OUT" | tee "$OUT/fwd_verdict.txt"
    fi
    if [[ ",$benches," == *",bwd,"* ]]; then
        echo "== benchmark: backward (bf16, TFLOPS = 2.5x the forward's FLOPs)"
        OUT="$OUT" python3 bench/bwd_bench.py build-gpu/fmha 2>"$OUT/bwd_bench.err" | tee "$OUT/bwd_bench.txt"
        tail -5 "$OUT/bwd_bench.err"
    fi
    if [[ ",$benches," == *",prefill,"* ]]; then
        echo "== benchmark: batch prefill over pages (bf16 hd128, 16k ragged tokens, TFLOPS)"
        OUT="$OUT" python3 bench/prefill_bench.py build-gpu/fmha 2>"$OUT/prefill_bench.err" | tee "$OUT/prefill_bench.txt"
        tail -5 "$OUT/prefill_bench.err"
    fi
    if [[ ",$benches," == *",append,"* ]]; then
        echo "== benchmark: appendkv (bf16 hd128, GB/s against the device's copy bandwidth)"
        OUT="$OUT" PYTHONPATH=python FMHA_LIBRARY="$PWD/build-gpu/libfmha.so" python3 bench/append_bench.py \
            2>"$OUT/append_bench.err" | tee "$OUT/append_bench.txt"
        tail -5 "$OUT/append_bench.err"
    fi
    if [[ ",$benches," == *",engine,"* ]]; then
        # the required steps first (sweep, tune, plot), then the comparisons; ENGINE_RESUME=CSV
        # continues an interrupted sweep from its CSV
        local e="$OUT/engine" tier=${ENGINE_TIER:-smoke} arch resume=()
        arch=sm$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
        mkdir -p "$e"
        # the sweep compiles its candidates in parallel first (fmha build --names), then measures
        echo "== bench engine: fmha bench --tier=$tier --all --best --verify (every candidate of every case)"
        start=$(date +%s)
        [ -n "${ENGINE_RESUME:-}" ] && cp "$ENGINE_RESUME" "$e/bench-$tier.csv" && resume=(--resume)
        build-gpu/fmha bench "${resume[@]}" --tier="$tier" --all --best --verify --verify-max-gflop=40 --backend=cuda \
            --quiet --csv="$e/bench-$tier.csv" --json="$e/bench-$tier.json" >"$e/bench-$tier.txt" 2>"$e/bench-$tier.err"
        echo "rc $? ($(($(date +%s) - start)) s)"; tail -3 "$e/bench-$tier.txt"; grep -v '^$' "$e/bench-$tier.err" | tail -5
        echo "== bench engine: fmha tune --from the sweep"
        build-gpu/fmha tune --from="$e/bench-$tier.csv" --out="$e/tune-$arch.json" | tee "$e/tune.txt"
        python3 bench/plot_bench.py "$e/bench-$tier.csv" "$e/bench-$tier-kernels.png" --by kernel
        echo "== bench engine: --isolate (one process per row) on the split-KV decode cases"
        timeout 120 build-gpu/fmha bench --tier=smoke --category=decode/splitkv --all --isolate --timeout=60 \
            --backend=cuda --quiet --csv="$e/isolate.csv" >"$e/isolate.txt" 2>&1
        echo "rc $?"; tail -2 "$e/isolate.txt"
        echo "== bench engine: torch SDPA's backends in the same CSV"
        cp "$e/bench-$tier.csv" "$e/bench-$tier-with-sdpa.csv"
        timeout 150 python3 bench/sdpa_rows.py "$e/bench-$tier-with-sdpa.csv" 2>"$e/sdpa.err" | tail -1
        python3 bench/plot_bench.py "$e/bench-$tier-with-sdpa.csv" "$e/bench-$tier-libraries.png" --by library
        echo "== bench engine: the selector with the database, measured again"
        timeout 150 build-gpu/fmha bench --tier="$tier" --backend=cuda --quiet --tune-db="$e/tune-$arch.json" \
            --csv="$e/bench-$tier-tuned.csv" >"$e/bench-$tier-tuned.txt" 2>&1
        echo "rc $?"; tail -1 "$e/bench-$tier-tuned.txt"
        python3 bench/tuned_vs_best.py "$e/bench-$tier.csv" "$e/bench-$tier-tuned.csv" | tee -a "$e/tune.txt"
        # the device tool returns at most 8 files: the engine's many come back as one archive
        tar -C "$OUT" -czf "$OUT/engine.tar.gz" engine && rm -rf "$e"
    fi
    if [[ ",$benches," == *",decode,"* ]]; then
        echo "== benchmark: decode (bf16 hd128, GB/s of K and V)"
        PYTHONPATH=python FMHA_LIBRARY="$PWD/build-gpu/libfmha.so" python3 bench/decode_bench.py \
            2>"$OUT/decode.err" | tee "$OUT/decode.txt"
        tail -5 "$OUT/decode.err"
    fi
}
# The device tool brings back at most 8 files from $OUT, and a full run writes a score of
# logs: they go back as one archive (logs.tgz), the benchmark tables beside it. Only the
# files this script names are moved, so a caller's own file in $OUT (its redirected
# output, say) stays where it is.
bundle_logs() {
    local files=() f
    for f in "$OUT"/*.log "$OUT"/{gpu,host_overhead,host_profile,plan_bench,transformers}.txt; do
        [ -f "$f" ] && files+=("${f##*/}")
    done
    [ ${#files[@]} -gt 0 ] || return 0
    tar -C "$OUT" -czf "$OUT/logs.tgz" "${files[@]}" && (cd "$OUT" && rm -f "${files[@]}")
}
summary() { # what ran, what did not: from any point of the script, the signal trap's too
    echo "== summary (at $(elapsed) s)"
    echo "conformance: ${conf_summary:-not run}"
    if [ -f "$OUT/run.log" ]; then
        grep -E "^valid:" "$OUT/run.log" | sed 's/^/run -v=1: /'
        grep -E "^plan created" "$OUT/run.log" | sed 's/^/run -v=1: /'
    fi
    echo "index safety: ${idx_summary:-not run}"
    [ "$mode" = --conf-only ] || echo "threads: ${threads_summary:-not run}"
    echo "sanitizers: ${san_summary:-not run}"
    if [ "$mode" != --conf-only ]; then
        [ -f "$OUT/host_overhead.txt" ] && grep -E "^(decode|prefill) " "$OUT/host_overhead.txt" | sed 's/^/host: /'
        echo "python: ${py_summary:-not run}"
        echo "transformers example: ${hf_rc:+rc }${hf_rc:-not run}"
    fi
}
stopped() {
    trap - TERM INT
    echo "== stopped by a signal at $(elapsed) s"
    kill $(jobs -p) 2>/dev/null
    summary
    bundle_logs
    exit 124
}
trap stopped TERM INT
if [ "$mode" = "--bench-only" ]; then bench; exit 0; fi

if [ "$family" != index ]; then # the grids' kernels; the index driver needs few
    # Each grid's kernels, listed on a virtual context of this arch (a driver's list mode:
    # the selector's choices and the forced re-runs, nothing run), compiled side by side
    # before the grids start: planned one after another inside the grids, the JIT was
    # most of their time (perf-notes run 170). A kernel the list misses is compiled by
    # its grid as before. Then the default receipt, for the steps after the grids.
    phase "precompile the grids' kernels and the default receipt in parallel"
    start=$(date +%s)
    arch=sm$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    read -r list_max list_hd <<<"${GPU_CASES:-1000000 0}"
    list_fams=()
    for bin in build-gpu/tests/gpu_conf_*; do wants "${bin##*/gpu_conf_}" && list_fams+=("${bin##*/gpu_conf_}"); done
    : >build-gpu/grid-kernels.txt
    [ ${#list_fams[@]} -gt 0 ] &&
        grid_kernels build-gpu "$arch" build-gpu/grid-kernels.txt "$list_max" "${list_hd:-0}" "${list_fams[@]}"
    # a pack of cubins compiled elsewhere for this tree (scripts/jit_cache_pack.sh), carried
    # in .jit-cache: what matches this tree's keys is found in the cache, the rest compiled
    if [ -f ".jit-cache/$arch.tar.xz" ]; then
        mkdir -p "$FMHA_CACHE_DIR" &&
            echo "unpacked .jit-cache/$arch.tar.xz: $(tar -xvJf ".jit-cache/$arch.tar.xz" -C "$FMHA_CACHE_DIR" |
                grep -c '\.cubin$') cubins"
    fi
    echo "$(wc -l <build-gpu/grid-kernels.txt) kernels listed: $(build-gpu/fmha build -arch="$arch" \
        -names=build-gpu/grid-kernels.txt -j "$(nproc)" 2>/dev/null | tail -1)"
    build-gpu/fmha build -arch="$arch" -j "$(nproc)" 2>/dev/null | tail -1
    echo "($(($(date +%s) - start)) s)"
fi

phase conformance
# One family's grid into $OUT/conformance-FAM.log, within LEFT seconds; its exit status
# (124: the time ran out) into conformance-FAM.rc, and for each process that ran out, its
# head dim, shard and last case into conformance-FAM.timeouts. The grid runs as one
# process per head dim in parallel (the CPU oracle and the JIT are most of the time), the
# head dims of CONF_SHARDS as several (CONF_SHARD, conformance.c); the logs are joined, the
# summary line adds the counts. Line-buffered, so that a killed run leaves its log.
shards_of() { # head dim: its number of shards in CONF_SHARDS ("256:3 128:2": hd256 in 3)
    local e
    for e in ${CONF_SHARDS-256:3 128:2}; do [ "${e%%:*}" = "$1" ] && { echo "${e##*:}"; return; }; done
    echo 1
}
run_grid() { # family, binary, seconds left
    local fam=$1 bin=$2 left=$3 rc=0 pids=() logs=() r hd k n i name counts gstart
    gstart=$(date +%s)
    rm -f "$OUT/conformance-$fam.timeouts"
    if [ -z "${GPU_CASES:-}" ]; then
        for hd in 32 64 96 128 192 256; do
            n=$(shards_of $hd)
            for ((k = 0; k < n; k++)); do
                logs+=("$OUT/conformance-$fam-d$hd-s$k.log")
                CONF_SHARD=$k/$n timeout "$left" stdbuf -oL "$bin" 1000000 $hd >"${logs[-1]}" 2>&1 &
                pids+=($!)
            done
        done
        for i in "${!pids[@]}"; do
            wait "${pids[$i]}" && continue
            r=$?
            { [ $rc -eq 0 ] || [ $r -eq 124 ]; } && rc=$r
            name=${logs[$i]##*/conformance-$fam-}
            [ $r -eq 124 ] && echo "${name%.log}: $(grep "^case " "${logs[$i]}" | tail -1 | cut -c1-300)" \
                >>"$OUT/conformance-$fam.timeouts"
        done
        cat "${logs[@]}" >"$OUT/conformance-$fam.log"
        rm -f "${logs[@]}"
        counts=$(grep -E "^[0-9]+ passed, [0-9]+ failed" "$OUT/conformance-$fam.log" |
            awk '{p += $1; f += $3} END {printf "%d passed, %d failed", p, f}')
        echo "$counts (head dims in parallel)" >>"$OUT/conformance-$fam.log"
    else
        timeout "$left" stdbuf -oL "$bin" ${GPU_CASES:-} >"$OUT/conformance-$fam.log" 2>&1
        rc=$?
        [ $rc -eq 124 ] && grep "^case " "$OUT/conformance-$fam.log" | tail -1 >"$OUT/conformance-$fam.timeouts"
    fi
    echo "$rc $(($(date +%s) - gstart))" >"$OUT/conformance-$fam.rc" # status, seconds
}
# The families' grids run side by side (CONF_SERIAL=1: one after another): each is mostly
# CPU oracle on six processes, so two or three fill the machine's cores and one call
# covers fwd and fp8 together (run 91's call ran out of time with them in turn).
conf_rc=0 conf_summary="" fams=()
start=$(date +%s)
# the grids' share: CONF_TIMEOUT, within the script's budget less what the index driver
# and the sanitizers' samples need after them (about 60 s side by side)
reserve=0
{ wants index || [ "${SAN_CASES:-6}" != 0 ]; } && reserve=60
deadline=$((start + $(cap "${CONF_TIMEOUT:-540}") - reserve))
for bin in build-gpu/tests/gpu_conf_*; do
    fam=${bin##*/gpu_conf_}
    wants "$fam" || continue
    fams+=("$fam")
    left=$((deadline - $(date +%s)))
    [ $left -lt 10 ] && { echo "$fam: no time left"; echo "124 0" >"$OUT/conformance-$fam.rc"; continue; }
    if [ "${CONF_SERIAL:-0}" = 1 ]; then run_grid "$fam" "$bin" "$left"; else run_grid "$fam" "$bin" "$left" & fi
done
wait
for fam in "${fams[@]}"; do
    read -r rc secs <"$OUT/conformance-$fam.rc" 2>/dev/null || rc=1 secs="?"
    rm -f "$OUT/conformance-$fam.rc"
    [ "$rc" -ne 0 ] && conf_rc=$rc
    [ -f "$OUT/conformance-$fam.log" ] || continue
    [ "$rc" -eq 124 ] && echo "$fam: TIMEOUT (a kernel hung, or the grids outlasted CONF_TIMEOUT); the last case each unfinished process started:" &&
        sed 's/^/  /' "$OUT/conformance-$fam.timeouts"
    rm -f "$OUT/conformance-$fam.timeouts"
    grep -E "^FAIL" "$OUT/conformance-$fam.log" | head -20
    line="$fam: $(grep -v "^case " "$OUT/conformance-$fam.log" | tail -1) (in $secs s)"
    [ "$rc" -ne 0 ] && line+=", exit status $rc"
    echo "$line"
    conf_summary+="$line; "
done

phase "index safety (bad cu_seqlens, page tables, ...: bounded, or refused with check_index_data)"
idx_rc=0
if wants index && [ "$(left)" -lt 20 ]; then
    idx_summary="skipped: no time left (GPU_CHECK_BUDGET)"; echo "$idx_summary"
elif wants index; then
    # plain and under memcheck side by side: the GPU has room for both
    timeout "$(cap 300)" build-gpu/tests/gpu_index_safety cuda >"$OUT/index.log" 2>&1 &
    idx_pid=$!
    if command -v compute-sanitizer >/dev/null; then
        timeout "$(cap 300)" compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/gpu_index_safety cuda \
            >"$OUT/index-memcheck.log" 2>&1 || idx_rc=1
    fi
    wait $idx_pid || idx_rc=1
    grep -E "FAIL" "$OUT/index.log" | head; idx_summary=$(tail -1 "$OUT/index.log")
    [ -f "$OUT/index-memcheck.log" ] &&
        idx_summary+="; memcheck: $(grep -E "ERROR SUMMARY" "$OUT/index-memcheck.log" | tail -1)"
    echo "$idx_summary"
fi

threads_rc=0 threads_summary="not run"
if [ "$mode" != --conf-only ]; then
    phase "one CUDA context from 8 threads (tests/unit/test_threads.c: bitwise equal to one thread)"
    timeout "$(cap 300)" build-gpu/tests/test_threads cuda 8 3 >"$OUT/threads.log" 2>&1
    threads_rc=$?
    threads_summary="rc $threads_rc, $(tail -1 "$OUT/threads.log")"
    echo "$threads_summary"
fi

phase "compute-sanitizer (memcheck, racecheck, synccheck) on a sample of each new family's grid"
san_summary=""
san_fams="fp8 splitkv pagedkv prefill appendkv bwd"
if command -v compute-sanitizer >/dev/null && [ "${SAN_CASES:-6}" != 0 ]; then
    if [ "$(left)" -lt 30 ]; then
        san_summary="skipped: no time left (GPU_CHECK_BUDGET)"
    else
        # every tool on every family at once: each sample is a few cases, mostly the
        # sanitizer's own CPU work, and 18 of them in turn outlasted a device call (the
        # first call of session 50)
        san_runs=()
        for tool in memcheck racecheck synccheck; do
            for fam in $san_fams; do
                wants "$fam" || continue
                timeout "$(cap 240)" compute-sanitizer --tool $tool --error-exitcode 9 \
                    build-gpu/tests/gpu_conf_$fam ${SAN_CASES:-6} >"$OUT/$tool-$fam.log" 2>&1 &
                san_runs+=("$! $tool $fam")
            done
        done
        for r in "${san_runs[@]}"; do
            read -r pid tool fam <<<"$r"
            wait "$pid"
            san_summary+="$tool $fam: rc $? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$tool-$fam.log" | tail -1); "
        done
    fi
    echo "$san_summary"
fi

if [ "$mode" = --conf-only ]; then
    summary
    bundle_logs
    [ $conf_rc -ne 0 ] && exit $conf_rc
    exit $idx_rc
fi

phase "run -v=1 on the GPU"
timeout "$(cap 60)" build-gpu/fmha run -b=2 -h=8 -s=1024 -d=128 -mask=b -v=1 -backend=cuda | tee "$OUT/run.log" | tail -4

phase "python package on torch CUDA tensors"
FMHA_LIBRARY="$PWD/build-gpu/libfmha.so" timeout "$(cap 240)" python3 python/tests/test_torch.py >"$OUT/python.log" 2>&1
py_rc=$?
grep -E "^FAIL" "$OUT/python.log" | head; py_summary=$(tail -1 "$OUT/python.log"); echo "$py_summary"

phase "transformers decoders with attn_implementation=fmha vs sdpa (examples/torch_transformers_decoder.py)"
FMHA_LIBRARY="$PWD/build-gpu/libfmha.so" timeout "$(cap 300)" python3 examples/torch_transformers_decoder.py \
    >"$OUT/transformers.txt" 2>&1
hf_rc=$?
cat "$OUT/transformers.txt" | tail -4

phase "host time per call, fmha.attention vs torch SDPA"
FMHA_LIBRARY="$PWD/build-gpu/libfmha.so" PYTHONPATH=python timeout "$(cap 180)" python3 bench/host_overhead.py --profile "$OUT/host_profile.txt" 2>&1 | tee "$OUT/host_overhead.txt"
timeout "$(cap 60)" build-gpu/fmha_plan_bench -backend=cuda 2>&1 | tee "$OUT/plan_bench.txt" | tail -6

if [ "$mode" != "--no-bench" ]; then
    bench
fi

summary
bundle_logs
[ $conf_rc -ne 0 ] && exit $conf_rc
[ $idx_rc -ne 0 ] && exit $idx_rc
[ $threads_rc -ne 0 ] && exit $threads_rc
[ $py_rc -ne 0 ] && exit $py_rc
exit $hf_rc
