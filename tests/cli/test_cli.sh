#!/usr/bin/env bash
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
expect_pass -b=4 -h=4 -h_k=1 -mode=1 -s=0,5,17,1 -s_k=3,0,40,9 -d=32 -mask=b -lse=1 -v=1
expect_pass -b=2 -h=4 -s=33 -s_k=65 -d=64 -prec=bf16 -bias=e:2 -lse=1 -p_drop=0.3 -init_sink=1 -mask=t:5,2,3 -v=1
expect_pass -b=2 -h=2 -s=50 -d=40 -d_v=24 -prec=fp32 -iperm=0 -operm=0 -pad=8 -mask=xb:9 -bias=a:1 -lse=1 -v=1

# Ten kinds of bad input: exit 2, a message naming the flag or rule, no crash.
expect_error 2 'unknown flag -bogus' run -bogus=1
expect_error 2 'flag -b=abc: expected an integer' run -b=abc
expect_error 2 'flag -d needs a value' run -d
expect_error 2 '\[rule hdim.shape\] head_dim_qk is 100' run -d=100 -s=8
expect_error 2 '\[rule heads.gqa\] num_heads_q \(8\) must be a multiple of num_heads_kv \(3\)' run -h=8 -h_k=3 -s=8
expect_error 2 "\[rule mask.grammar\] mask 'q:1' is not understood; expected one of" run -mask=q:1 -s=8
expect_error 2 'flag -prec=fp64: expected fp16, bf16 or fp32' run -prec=fp64
expect_error 2 'flag -p_drop=1: expected a number in \[0, 1\)' run -p_drop=1
expect_error 2 'flag -bias=x: expected n, e, e:1, e:2, a or a:1' run -bias=x
expect_error 2 'flag -s: 2 lengths for -b=3 sequences' run -mode=1 -b=3 -s=4,5
expect_error 2 'flag -softcap=-1: expected a number' run -softcap=-1
expect_error 2 "argument 'extra' is not a flag" run extra
expect_error 2 'unknown command' frobnicate
expect_error 2 'NOT_COMPILED' run -backend=cuda -s=8

# -help lists the CK flags and exits 0.
help=$("$fmha" run -help)
for f in -b -h -h_k -s -s_k -d -d_v -scale -mask -bias -lse -p_drop -drop_seed -drop_offset -prec -mode -iperm -operm -softcap -v -seed -warmup -repeat -kname; do
    if grep -qE -- "^  $f " <<<"$help"; then ok; else bad "run -help does not list $f"; fi
done
if "$fmha" run -s=8 -kname=1 | grep -q '^kernel: cpu_ref_fwd$'; then ok; else bad "-kname=1 prints the kernel"; fi
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
    rm -rf "$cache"
fi
expect_error 2 "unknown field 'colour'" build --filter 'colour==1'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
