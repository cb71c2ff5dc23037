#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_install.sh BUILD_DIR SOURCE_DIR [C_FLAGS]: install the build into a temporary
# prefix, then build and run tests/install/consumer.c against it four ways: CMake's
# find_package with fmha::fmha and fmha::fmha_static, and pkg-config shared and --static;
# and once with the source tree as a subproject (add_subdirectory: libraries only).
# A static consumer must not need libfmha.so; C_FLAGS (the sanitizer build's) are passed
# to every consumer.
set -euo pipefail
build=$1 src=$2 flags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
pc=$(find "$prefix" -name fmha.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: no fmha.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
# the installed CLI finds its shape matrix under share/fmha from any directory
if [ -x "$prefix/bin/fmha" ]; then
    [ -f "$prefix/share/fmha/matrix.txt" ] || { echo "FAIL: share/fmha/matrix.txt not installed"; exit 1; }
    out=$(cd "$tmp" && LD_LIBRARY_PATH=$libdir "$prefix/bin/fmha" bench --dry-run --tier=smoke --quiet 2>&1 | tail -1)
    grep -q "^dry run: 128 cases planned" <<<"$out" || { echo "FAIL: installed fmha bench: $out"; exit 1; }
    echo "ok   installed fmha bench finds share/fmha/matrix.txt: $out"
fi
passed=0
run() { # name, binary, [static]
    local out
    if ! out=$(LD_LIBRARY_PATH=$libdir "$2" 2>&1); then echo "FAIL $1: $out"; exit 1; fi
    if [ "${3:-}" = static ] && readelf -d "$2" | grep -q 'NEEDED.*libfmha'; then
        echo "FAIL $1: a static consumer needs libfmha.so"; exit 1
    fi
    echo "ok   $1: $out"
    passed=$((passed + 1))
}
for kind in shared static; do
    cmake -S "$src/tests/install" -B "$tmp/cmake-$kind" -DCMAKE_PREFIX_PATH="$prefix" -DFMHA_KIND=$kind \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$tmp/cmake-$kind.log" 2>&1 ||
        { cat "$tmp/cmake-$kind.log"; echo "FAIL find_package ($kind): configure"; exit 1; }
    cmake --build "$tmp/cmake-$kind" >>"$tmp/cmake-$kind.log" 2>&1 ||
        { cat "$tmp/cmake-$kind.log"; echo "FAIL find_package ($kind): build"; exit 1; }
    target=fmha::fmha
    [ $kind = static ] && target=fmha::fmha_static
    run "find_package, $target" "$tmp/cmake-$kind/consumer" $kind
done
# as a subproject: the libraries only (no CLI, no tests, nothing installed)
cmake -S "$src/tests/install" -B "$tmp/sub" -DFMHA_SOURCE_DIR="$src" -DFMHA_KIND=static \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$tmp/sub.log" 2>&1 &&
    cmake --build "$tmp/sub" -j "$(nproc 2>/dev/null || echo 2)" >>"$tmp/sub.log" 2>&1 ||
    { tail -30 "$tmp/sub.log"; echo "FAIL add_subdirectory: configure or build"; exit 1; }
if [ -e "$tmp/sub/fmha/fmha" ] || grep -q "test_status\|fmha_cli" "$tmp/sub/fmha/Makefile" 2>/dev/null; then
    echo "FAIL add_subdirectory: the CLI or the tests were built"; exit 1
fi
run "add_subdirectory, fmha::fmha_static" "$tmp/sub/consumer" static

export PKG_CONFIG_PATH=$(dirname "$pc")
cc=${CC:-cc}
# shellcheck disable=SC2046,SC2086
$cc $flags "$src/tests/install/consumer.c" -o "$tmp/pc-shared" $(pkg-config --cflags --libs fmha)
run "pkg-config --libs fmha" "$tmp/pc-shared"
# -l:libfmha.a: the archive even where the shared library sits beside it
# shellcheck disable=SC2046,SC2086
$cc $flags "$src/tests/install/consumer.c" -o "$tmp/pc-static" $(pkg-config --cflags fmha) \
    $(pkg-config --static --libs fmha | sed 's/-lfmha\b/-l:libfmha.a/')
run "pkg-config --static --libs fmha" "$tmp/pc-static" static
echo "$passed passed, 0 failed"
