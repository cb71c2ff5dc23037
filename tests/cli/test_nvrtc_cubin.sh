#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_nvrtc_cubin.sh PYTHON SRC: scripts/nvrtc_cubin.py compiles a wgmma forward variant
# with NVRTC, prints ptxas's report and writes the cubin (an ELF file); bad arguments and a
# missing entry file exit 2; a variant NVRTC refuses exits 1 with NVRTC's log. Skipped
# (exit 77) where the machine has no libnvrtc.
set -u
python=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
tool() { "$python" "$src/scripts/nvrtc_cubin.py" "$@" 2>&1; }
hd64="BF16=1 HDIM_QK=64 HDIM_V=64 TILE_M=192 TILE_N=128 WARPS=16 STAGES=2 MASK=0 BIAS=0 LSE=0 SOFTCAP=0 SINK=0 GROUP=0"

# shellcheck disable=SC2086
out=$(tool "$src" fwd/fwd_wgmma.cuh "$work/k.cubin" $hd64)
rc=$?
if grep -q "libnvrtc not found" <<<"$out"; then echo "skipped: $out"; exit 77; fi
if [ $rc -eq 0 ] && grep -qE "ptxas info +: Used [0-9]+ registers" <<<"$out"; then ok; else bad "hd64 variant (rc $rc): $out"; fi
if [ "$(head -c 4 "$work/k.cubin" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; then ok; else bad "no ELF cubin written"; fi
out=$(tool "$src" fwd/fwd_wgmma.cuh)
[ $? -eq 2 ] && ok || bad "too few arguments: $out"
out=$(tool "$src" fwd/fwd_wgmma.cuh "$work/x.cubin" HDIM_QK)
[ $? -eq 2 ] && ok || bad "a define without a value: $out"
out=$(tool "$src" fwd/no_such.cuh "$work/x.cubin" BF16=1)
rc=$?
if [ $rc -eq 2 ] && grep -q "no kernel entry file" <<<"$out"; then ok; else bad "missing entry (rc $rc): $out"; fi
# shellcheck disable=SC2086
out=$(tool "$src" fwd/fwd_wgmma.cuh "$work/x.cubin" ${hd64/HDIM_QK=64/HDIM_QK=100})
rc=$?
if [ $rc -eq 1 ] && grep -q "NVRTC failed" <<<"$out" && grep -q "error" <<<"$out"; then ok; else bad "refused variant (rc $rc): $(tail -3 <<<"$out")"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
