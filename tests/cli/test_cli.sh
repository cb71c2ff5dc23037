#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_cli.sh FMHA: the `fmha` tool end to end. The issue's commands must print a passing
# check; each kind of bad input must exit 2 with a message naming the problem, and never
# crash (a signal shows as an exit code >= 128).
set -u
fmha="$1"
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_pass ARGS...: exit 0 and the word "valid: pass"
expect_pass() {
    out=$("$fmha" run "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^valid: pass$' <<<"$out"; then ok; else bad "run $* (rc $rc): $out"; fi
}

# expect_error WANT_RC PATTERN ARGS...: exit WANT_RC and stderr matching PATTERN
expect_error() {
    want=$1 pattern=$2
    shift 2
    err=$("$fmha" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq "$want" ] && grep -qE -- "$pattern" <<<"$err"; then ok; else bad "$* -> rc $rc (want $want), stderr: $err"; fi
}

# The commands of the issue, at sizes a 2-core CI machine runs in seconds.
expect_pass -b=2 -h=8 -s=1024 -d=128 -mask=b -v=1
expect_pass -b=3 -h=8 -h_k=2 -s=77 -s_k=301 -d=64 -mask=b:16,4 -v=1
expect_pass -b=2 -h=4 -s=100 -d=64 -bias=a -softcap=30 -v=1
expect_pass -b=3 -h=4 -s=60 -d=64 -mode=1 -v=1
expect_pass -b=2 -h=4 -h_k=2 -s=77 -s_k=130 -d=128 -mask=b -lse=1 -prec=fp8bf16 -v=1
expect_pass -b=3 -h=4 -s=30,0,50 -s_k=40,9,50 -d=64 -mode=1 -prec=fp8bf16 -descale=1 -init_sink=1 -v=1
expect_pass -b=4 -h=4 -h_k=1 -mode=1 -s=0,5,17,1 -s_k=3,0,40,9 -d=32 -mask=b -lse=1 -v=1
expect_pass -b=2 -h=4 -s=33 -s_k=65 -d=64 -prec=bf16 -bias=e:2 -lse=1 -p_drop=0.3 -init_sink=1 -mask=t:5,2,3 -v=1
expect_pass -b=2 -h=2 -s=50 -d=40 -d_v=24 -prec=fp32 -iperm=0 -operm=0 -pad=8 -mask=xb:9 -bias=a:1 -lse=1 -v=1

# Ten kinds of bad input: exit 2, a message naming the flag or rule, no crash.
expect_error 2 'unknown flag -bogus' run -bogus=1
expect_error 2 'flag -b=abc: expected an integer' run -b=abc
expect_error 2 'flag -d needs a value' run -d
# group-mode lengths whose total passes int32 cu_seqlens (found by tests/fuzz/fuzz_cli_flags)
expect_error 2 'cu_seqlens are int32, so each total must be at most 2\^31 - 1' run -mode=1 -b=3 -s=1000000000,1000000000,1000000000 -d=64
expect_error 2 '\[rule hdim.shape\] head_dim_qk is 100' run -d=100 -s=8
expect_error 2 '\[rule heads.gqa\] num_heads_q \(8\) must be a multiple of num_heads_kv \(3\)' run -h=8 -h_k=3 -s=8
expect_error 2 "\[rule mask.grammar\] mask 'q:1' is not understood; expected one of" run -mask=q:1 -s=8
expect_error 2 'flag -prec=fp64: expected fp16, bf16, fp32 or fp8bf16' run -prec=fp64
expect_error 2 'fp8e4m3 inputs take no bias and no ALiBi' run -prec=fp8bf16 -bias=a -s=16 -backend=cpu
# the poisoned token stays inside sequence 0 of its tensor (not another sequence's or past the buffer)
expect_pass -b=2 -h=2 -s=8 -s_k=16 -d=64 -poison=nan_k -poison_token=15 -iperm=0 -v=1
expect_error 2 '-poison_token=20: sequence 0 of k has 16 tokens' run -b=2 -h=2 -s=8 -s_k=16 -d=64 -poison=nan_k -poison_token=20 -iperm=0
expect_error 2 '-poison_token=3: sequence 0 of q has 2 tokens' run -mode=1 -b=2 -h=2 -s=2,9 -s_k=5,5 -d=64 -poison=nan_q -poison_token=3
expect_error 2 '-poison_token=3: k is a paged cache' run -family=fwd_pagedkv -page_block_size=4 -b=2 -h=2 -s=1 -s_k=16 -d=64 -poison=nan_k -poison_token=3
expect_error 2 'flag -p_drop=1: expected a number in \[0, 1\)' run -p_drop=1
expect_error 2 'flag -bias=x: expected n, e, e:1, e:2, a or a:1' run -bias=x
expect_error 2 'flag -s: 2 lengths for -b=3 sequences' run -mode=1 -b=3 -s=4,5
expect_error 2 'flag -softcap=-1: expected a number' run -softcap=-1
expect_error 2 "argument 'extra' is not a flag" run extra
expect_error 2 'unknown command' frobnicate
expect_error 2 'NOT_COMPILED' run -backend=cuda -s=8

# The KV-cache families and the backward (issue 3's commands, at CI sizes).
expect_pass -b=2 -h=8 -h_k=2 -s=1 -s_k=1000 -d=128 -num_splits=4 -v=1
expect_pass -b=2 -h=8 -h_k=2 -s=1 -s_k=1000 -d=128 -page_block_size=1 -v=1
expect_pass -b=2 -h=8 -h_k=2 -s=3 -s_k=1000 -d=128 -s_knew=3 -rotary_dim=64 -mask=b -v=1
expect_pass -b=3 -h=4 -h_k=2 -s=2 -s_k=90,0,33 -d=64 -page_block_size=7 -kv_layout=1 -kv_lookup=1 -mask=b -lse=1 -v=1
expect_pass -b=3 -h=4 -h_k=1 -mode=1 -s=5,0,17 -s_k=30,9,64 -d=64 -page_block_size=16 -mask=b -init_sink=1 -v=1
expect_pass -b=2 -h=4 -s=4 -s_k=65 -d=64 -s_knew=4 -rotary_dim=32 -rotary_interleaved=1 -page_block_size=8 -prec=bf16 -v=1
expect_pass -b=3 -h=4 -h_k=2 -s=3 -s_k=40 -d=64 -s_knew=3 -rotary_dim=16 -page_block_size=4 -kv_lookup=1 -mask=b -v=1  # appendkv over CSR pages
expect_pass -b=3 -h=4 -s=2 -s_k=50 -d=64 -cache_batch_idx=1 -num_splits=3 -mask=b -bias=a -v=1
expect_bwd() { # expect_bwd ARGS...: `fmha bwd` exits 0 with "valid: pass"
    out=$("$fmha" bwd "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^valid: pass$' <<<"$out"; then ok; else bad "bwd $* (rc $rc): $out"; fi
}
expect_bwd -b=2 -h=4 -h_k=2 -s=65 -s_k=129 -d=64 -mask=b -v=1
expect_bwd -b=2 -h=4 -h_k=2 -s=65 -s_k=129 -d=64 -mask=b -p_drop=0.2 -deterministic=1 -v=1
expect_bwd -b=2 -h=4 -h_k=1 -s=33 -s_k=20 -d=32 -bias=e:1 -dbias=1 -init_sink=1 -softcap=15 -mask=t:5,3 -prec=bf16 -v=1
expect_bwd -b=3 -h=2 -mode=1 -s=5,0,40 -s_k=9,7,33 -d=48 -mask=b -bias=a:1 -p_drop=0.1 -v=1
if "$fmha" bwd -s=8 -deterministic=1 -v=1 | grep -q '^check deterministic: a second run is bitwise identical$'; then ok; else bad "bwd -deterministic=1 compares a second run"; fi
expect_error 2 'flag -num_splits=999: expected an integer in 0..256' run -num_splits=999
expect_error 2 'flag -family=bwd: expected auto, fwd, fwd_splitkv' run -family=bwd
expect_error 2 '\[rule mode.family\] fwd_pagedkv takes batch-mode queries' run -family=fwd_pagedkv -mode=1 -b=2 -s=3,4 -page_block_size=4
expect_error 2 'sequence 0 has 2 keys; expected s_knew \(3\) to s_k' run -s=1 -s_k=2 -s_knew=3
expect_error 2 '\[rule rope.dim\] rotary_dim is 24' run -s=1 -s_k=20 -s_knew=2 -rotary_dim=24
expect_error 2 '\[rule dropout.family\]' run -s=1 -s_k=20 -num_splits=2 -p_drop=0.1
expect_error 2 'dbias needs an elementwise bias' bwd -s=8 -dbias=1
expect_error 2 'the KV-cache flags .* describe inference problems' bwd -s=8 -num_splits=2
expect_error 2 'flag -s_k: a list in batch mode gives the keys of each' run -b=2 -s=4 -s_k=5,6

# -help lists the CK flags and exits 0.
help=$("$fmha" run -help)
for f in -b -h -h_k -s -s_k -d -d_v -scale -mask -bias -lse -p_drop -drop_seed -drop_offset -prec -mode -iperm -operm -softcap -v -seed -warmup -repeat -kname; do
    if grep -qE -- "^  $f " <<<"$help"; then ok; else bad "run -help does not list $f"; fi
done
if "$fmha" run -s=8 -kname=1 | grep -q '^kernel: cpu_ref_fwd$'; then ok; else bad "-kname=1 prints the kernel"; fi
help=$("$fmha" run -help)
for f in -num_splits -page_block_size -kv_layout -kv_lookup -cache_batch_idx -s_knew -rotary_dim -rotary_interleaved; do
    if grep -qE -- "^  $f " <<<"$help"; then ok; else bad "run -help does not list $f"; fi
done
help=$("$fmha" bwd -help)
for f in -deterministic -dbias -p_drop -mask -h_k; do
    if grep -qE -- "^  $f " <<<"$help"; then ok; else bad "bwd -help does not list $f"; fi
done
if "$fmha" run -s=1 -s_k=100 -num_splits=2 -kname=1 | grep -q '^kernel: cpu_ref_combine$'; then ok; else bad "-kname=1 prints every stage"; fi
if "$fmha" version | grep -q 'backends=cpu'; then ok; else bad "version prints build info"; fi

# Registry and dispatcher commands.
expect_out() { # expect_out PATTERN ARGS...: exit 0 and stdout matching PATTERN
    pattern=$1
    shift
    out=$("$fmha" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -qE -- "$pattern" <<<"$out"; then ok; else bad "$* (rc $rc): $(head -c 600 <<<"$out")"; fi
}
expect_out '^arch sm90, receipt all: [0-9]+ kernels' enumerate --arch=sm90 --receipt=all
expect_out '^  bwddqdkdv +[1-9]' enumerate --arch=sm90 --receipt=all
expect_out '^fmha_fwd_bf16_hq128_hv128' enumerate --arch=sm80 --receipt=all --filter 'hdim_qk==128 && dtype==bf16' --list
expect_out '"total_kernels": 9' kernels --json
expect_out '"registry_name": "sm90 \(virtual\)"' kernels --json --arch=sm90
expect_out 'chosen: cpu_ref_fwd' explain -b=2 -h=8 -s=1024 -d=128 -mask=b
expect_out 'chosen: fmha_fwd_bf16_hq128_hv128_causal_sm90_wgmmaws_m128_n128_w12_s2' explain -b=2 -h=8 -s=1024 -d=128 -mask=b -prec=bf16 -arch=sm90
expect_out 'rejected fmha_fwd_fp16_hq64_hv64_sm90_mmasync_m128_n64_w4_s2: hdim_qk is 64; the problem needs 128' explain -s=64 -arch=sm90
expect_error 2 'no registered kernel runs stage fwd' explain -s=64 -d=40 -arch=sm90
# the backward's plan without data: three stages, the GPU's rules
expect_out 'chosen: fmha_bwddqdkdv_bf16_hq128_hv128_causal_sm90_wgmmaws_m64_n128_w12_s2' bwd -explain=1 -b=2 -h=8 -h_k=2 -s=4096 -d=128 -mask=b -prec=bf16 -arch=sm90
expect_out 'chosen: cpu_ref_bwd_convert_dq' bwd -explain=1 -b=2 -h=8 -s=512 -d=64
# fp8 rows padded to 136 bytes: TMA needs 16-byte multiples, and the fp8 kernel has no other copy
expect_error 2 'rule cuda.fp8_tma\] q has strides \(batch 1114112, row 136, head 139264\)' explain -prec=fp8bf16 -d=128 -pad=8 -arch=sm90
# the backward's one-dimensional grid of key tiles x batch x KV heads (2^31 CTAs here)
expect_error 2 'rule cuda.grid\] the backward.s grid is key tiles of 128 \(8388608\) x batch \(256\) x KV heads \(1\) = 2147483648' bwd -explain=1 -b=256 -h=1 -s=1 -s_k=1073741823 -d=64 -prec=bf16 -arch=sm90
expect_error 2 'rule cuda.dbias_deterministic' bwd -explain=1 -b=2 -h=8 -s=512 -d=64 -bias=e:1 -dbias=1 -deterministic=1 -arch=sm90
expect_error 2 'NOT_COMPILED' run -s=64 -arch=sm90
expect_error 2 "unknown field 'hdim'" enumerate --filter 'hdim==3'
expect_error 2 "receipt 'bogus' is unknown" enumerate --receipt=bogus
cfg=$(mktemp)
echo '{"variant": "fwd", "trait_config": {"dtype": {"values": ["bf16"]}, "hdim_qk": {"values": [64]}, "mask": {"values": ["causal"]}}}' >"$cfg"
expect_out '^  fwd +[1-9]' enumerate --arch=sm90 --config="$cfg"
echo '{"variant": "fwd", "trait_config": {"colour": {"values": [1]}}}' >"$cfg"
expect_error 2 "unknown trait 'colour'" enumerate --arch=sm90 --config="$cfg"
rm -f "$cfg"

# fmha build compiles into the cache (NVRTC, no GPU), then finds it there.
if "$fmha" version | grep -q 'nvrtc=on'; then
    cache=$(mktemp -d)
    FMHA_CACHE_DIR=$cache expect_out '^built 1, already cached 0' build --arch=sm80 --filter 'dtype==bf16 && hdim_qk==64 && mask==causal && !lse && mode==batch' -j 1
    FMHA_CACHE_DIR=$cache expect_out '^built 0, already cached 1' build --arch=sm80 --filter 'dtype==bf16 && hdim_qk==64 && mask==causal && !lse && mode==batch' -j 1
    # FMHA_PTXAS_LOG=1: NVRTC's ptxas report of each kernel compiled, named by its defines
    # (one compile, both lines checked)
    rm -f "$cache"/*.cubin
    out=$(FMHA_PTXAS_LOG=1 FMHA_CACHE_DIR=$cache "$fmha" build --arch=sm80 --filter 'dtype==bf16 && hdim_qk==64 && mask==causal && !lse && mode==batch' -j 1 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -qE 'fmha: ptxas \(NVRTC sm_80\) for FMHA_BF16=1 FMHA_HDIM_QK=64 ' <<<"$out" &&
        grep -qE 'ptxas info +: Used [0-9]+ registers' <<<"$out"; then ok; else bad "FMHA_PTXAS_LOG=1 build (rc $rc): $(head -c 600 <<<"$out")"; fi
    # a cached cubin overwritten with 100 random bytes: refused with FMHA_JIT=off (naming
    # the file), rebuilt otherwise (tests/unit/test_jit_cache.c has the other damages)
    entry=$(ls "$cache"/*.cubin)
    head -c 100 /dev/urandom >"$entry"
    FMHA_JIT=off FMHA_CACHE_DIR=$cache expect_error 3 "the cached kernel $entry is unusable \(not an fmha cache entry" build --arch=sm80 --filter 'dtype==bf16 && hdim_qk==64 && mask==causal && !lse && mode==batch' -j 1
    FMHA_DEBUG=1 FMHA_CACHE_DIR=$cache expect_out "cache entry $entry is unusable.*compiling the kernel again" build --arch=sm80 --filter 'dtype==bf16 && hdim_qk==64 && mask==causal && !lse && mode==batch' -j 1
    FMHA_CACHE_DIR=$cache expect_out '^built 0, already cached 1' build --arch=sm80 --filter 'dtype==bf16 && hdim_qk==64 && mask==causal && !lse && mode==batch' -j 1
    # --names builds exactly a list (fmha bench --all precompiles its candidates this way)
    names=$(mktemp)
    printf 'fmha_fwd_bf16_hq64_hv64_causal_sm80_mmasync_m128_n64_w4_s2\n\nfmha_fwd_bf16_hq64_hv64_causal_sm80_mmasync_m128_n64_w4_s2\n' >"$names"
    FMHA_CACHE_DIR=$cache expect_out '^built 0, already cached 1, failed 0' build --names="$names" -j 2
    printf 'fmha_fwd_bf16_hq64_hv64_causal_sm90_mmasync_m128_n64_w4_s2\n' >>"$names"
    FMHA_CACHE_DIR=$cache expect_error 2 "is for sm90; the list's arch is sm80 \(one arch per build\)" build --names="$names"
    echo 'fmha_fwd_bogus' >"$names"
    FMHA_CACHE_DIR=$cache expect_error 2 "kernel name 'fmha_fwd_bogus'" build --names="$names"
    rm -rf "$cache" "$names"
fi
expect_error 2 "takes no --family, --receipt or --filter" build --names=/dev/null --filter 'dtype==bf16'
expect_error 2 "cannot read --names=/nonexistent/names" build --names=/nonexistent/names
expect_error 2 "unknown field 'colour'" build --filter 'colour==1'

# fmha bench and fmha tune on the CPU backend (docs/bench.md): a small matrix over every
# family, verified, to CSV and JSON; a resumed sweep measures only the missing rows; a
# crash-isolated sweep; `run -json=1`; the tuner from the CSV; bad matrices and flags.
work=$(mktemp -d)
cat >"$work/m.txt" <<'MATRIX'
smoke t/fwd  run -prec=bf16 -b=2 -h=4 -h_k=2 -d=32 -s={33|64} -mask={0|b}
smoke t/dec  run -prec=bf16 -family=fwd_splitkv -b=2 -h=4 -h_k=2 -d=32 -s=1 -s_k=100
smoke t/pg   run -prec=bf16 -b=2 -h=4 -h_k=2 -d=32 -s=1 -s_k=100 -page_block_size=1
smoke t/pre  run -prec=bf16 -mode=1 -b=3 -h=4 -h_k=2 -d=32 -s=5,0,9 -s_k=20,3,9 -page_block_size=4 -mask=b
smoke t/app  run -prec=bf16 -b=2 -h=4 -h_k=2 -d=32 -s=1 -s_k=100 -s_knew=1 -rotary_dim=32
smoke t/bwd  bwd -prec=bf16 -b=2 -h=4 -d=32 -s=40 -mask=t
full  t/big  run -prec=bf16 -b=64 -h=64 -d=256 -s=16384
MATRIX
expect_out '^9 cases, 9 rows measured' bench --matrix="$work/m.txt" --all --verify --repeat=2 --sample-ms=0.1 --quiet --csv="$work/b.csv" --json="$work/b.json"
if [ "$(grep -c ',ok,' "$work/b.csv")" -eq 9 ] && [ "$(grep -c ',pass,' "$work/b.csv")" -eq 9 ] &&
    grep -q '"rows": \[' "$work/b.json" && grep -q '"family": "appendkv"' "$work/b.json" &&
    grep -q '"family": "batch_prefill"' "$work/b.json"; then ok; else bad "bench CSV/JSON: $(cat "$work/b.csv")"; fi
head -4 "$work/b.csv" >"$work/r.csv"
expect_out '^9 cases, 6 rows measured \(3 resumed from the CSV\)' bench --matrix="$work/m.txt" --all --repeat=2 --quiet --csv="$work/r.csv" --resume --isolate
if [ "$(wc -l <"$work/r.csv")" -eq 10 ]; then ok; else bad "resumed CSV has $(wc -l <"$work/r.csv") lines, want 10"; fi
expect_out '"status":"ok"' run -b=1 -h=2 -s=33 -d=32 -json=1 -v=1 -repeat=2
expect_out '"verify":"pass"' bwd -b=1 -h=2 -s=33 -d=32 -json=1 -v=1 -repeat=2
expect_out '^after tuning .*: the best kernel in 9 of 9 cases' tune --from="$work/b.csv" --out="$work/tune.json"
expect_out 'tuning database' run -b=2 -h=4 -h_k=2 -d=32 -s=33 -prec=bf16 -tune_db="$work/tune.json"
expect_out "^wrote $work/c.json: 9 rows" bench --from="$work/b.csv" --json="$work/c.json"
expect_error 2 '--from: needs --json' bench --from="$work/b.csv"
expect_out 'dry run: 10 cases planned on cpu, 0 invalid' bench --matrix="$work/m.txt" --tier=full --dry-run
# a row whose process dies (here: --timeout's SIGALRM) is a "crashed" row; the sweep goes on.
# The slow row takes ~30 s on one thread here, the fast one ~0.02 s: 5 s leaves the fast row room
# on a machine loaded by the rest of ctest (1 s once timed it out there too).
printf 'smoke t/slow run -prec=bf16 -b=2 -h=16 -d=128 -s=2048 -threads=1\nsmoke t/fast run -b=1 -h=2 -d=32 -s=16\n' >"$work/slow.txt"
"$fmha" bench --matrix="$work/slow.txt" --isolate --timeout=5 --quiet --csv="$work/slow.csv" >/dev/null 2>"$work/slow.err"
rc=$?
if [ $rc -eq 3 ] && grep -q ',crashed,the child was killed by signal 14 (Alarm clock): over the --timeout' "$work/slow.csv" &&
    [ "$(grep -c ',ok,' "$work/slow.csv")" -eq 1 ]; then ok; else bad "isolate timeout: rc $rc, $(cat "$work/slow.csv" "$work/slow.err")"; fi
printf 'smoke a run -b={1|2\n' >"$work/bad.txt"
expect_error 2 "bad.txt:1: a '\{' at column 16 is not closed" bench --matrix="$work/bad.txt"
printf 'smoke a run -b=2 -repeat=3\n' >"$work/bad.txt"
expect_error 2 'matrix line 1: run -b=2 -repeat=3: -repeat says how to run a case' bench --matrix="$work/bad.txt" --dry-run
expect_error 2 'cannot read the matrix' bench --matrix="$work/none.txt"
expect_error 2 '--resume needs --csv' bench --matrix="$work/m.txt" --resume
expect_error 2 'use it with --dry-run' bench --matrix="$work/m.txt" --arch=sm90
expect_error 2 "tier=weekly: expected smoke, full or nightly" bench --tier=weekly
rm -rf "$work"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
