# SPDX-License-Identifier: MIT
# variant_tree.sh: sourced (from the repository root) by the GPU scripts that build the
# tree: gpu_check.sh, decode_variants.sh, gpu_ablate.sh.
# - CMAKE_EXTRA: a machine without Debian's libjansson-dev can bring it in .deps/jansson
#   (include/, lib/); then CMAKE_EXTRA points CMake there and LD_LIBRARY_PATH finds it.
# - variant_lines FILE: the variants of a variants file, one a line.
# - variant_tree NAME TARGET [EDITS]: the working tree copied to build-var-NAME/src with
#   EDITS applied (FILE:SED_EXPR, several joined by @@; each must change its file, and its
#   diff is printed), and TARGET built in build-var-NAME/lib (build_tree, which also
#   builds an existing checkout: gpu_ablate.sh's AB_BEFORE).
CMAKE_EXTRA=()
if [ -f .deps/jansson/include/jansson.h ] && [ ! -f /usr/include/jansson.h ]; then
    CMAKE_EXTRA=(-DJANSSON_INCLUDE_DIR="$PWD/.deps/jansson/include" -DJANSSON_LIBRARY="$PWD/.deps/jansson/lib/libjansson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/jansson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

variant_tree() {
    local dir=build-var-$1 target=$2 rest=${3:-} edit file expr
    rm -rf "$dir" && mkdir -p "$dir/src"
    # the working tree as it is, not `git ls-files`: on the GPU machine the repository's
    # index can lag the tree it was sent (files added or removed since were missed; perf-notes
    # run 102), so every file but build outputs, logs and dependencies is copied
    tar -c --exclude=./.git --exclude='./build*' --exclude=./out --exclude=./.deps --exclude=./.jit-cache --exclude=./.before \
        --exclude=__pycache__ . | tar -x -C "$dir/src"
    while [ -n "$rest" ]; do
        edit=${rest%%@@*}
        [ "$edit" = "$rest" ] && rest="" || rest=${rest#*@@}
        file=${edit%%:*} expr=${edit#*:}
        cp "$dir/src/$file" "$dir/orig"
        sed -i "$expr" "$dir/src/$file"
        if cmp -s "$dir/orig" "$dir/src/$file"; then echo "variant $1: '$expr' changed nothing in $file" >&2; return 1; fi
        diff "$dir/orig" "$dir/src/$file" | sed "s/^/  $1: /"
    done
    build_tree "$1" "$dir/src" "$target"
}

# variant_lines FILE: a variants file's variants, one a line (blank lines and # comments
# aside), as gpu_ablate.sh and decode_variants.sh -f read them.
variant_lines() {
    local v
    while IFS= read -r v; do
        [ -z "$v" ] || [ "${v#\#}" != "$v" ] && continue
        printf '%s\n' "$v"
    done <"$1"
}

# variant_trees BASE FILE [REGEX]: the CLI (fmha_cli) of the tree as it is, as BASE, and of
# each variant of FILE whose name matches REGEX (default: all), built in parallel in the
# background; appends their names to the caller's `names` and their pids to `pids`, for it
# to wait on (gpu_ablate.sh, dev_stale_max.sh).
variant_trees() {
    local v
    names+=("$1")
    variant_tree "$1" fmha_cli & pids+=($!)
    while IFS= read -r v; do
        names+=("${v%%:*}")
        variant_tree "${v%%:*}" fmha_cli "${v#*:}" & pids+=($!)
    done < <(variant_lines "$2" | grep -E "^(${3:-[^:]*}):")
}

# build_tree NAME SRC TARGET: TARGET of the source tree SRC built in build-var-NAME/lib
# (Release, no tests; log: $OUT/build-NAME.log, its tail on failure).
build_tree() {
    local dir=build-var-$1
    { cmake -S "$2" -B "$dir/lib" -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=OFF "${CMAKE_EXTRA[@]}" &&
        cmake --build "$dir/lib" -j "$(nproc)" --target "$3"; } >"$OUT/build-$1.log" 2>&1 || {
        tail -20 "$OUT/build-$1.log"; return 1; }
}
