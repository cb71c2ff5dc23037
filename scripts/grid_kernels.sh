# SPDX-License-Identifier: MIT
# grid_kernels.sh: sourced (from the repository root) by gpu_check.sh and
# jit_cache_pack.sh.
# grid_kernels BUILD ARCH OUT LIST_MAX LIST_HD FAMILY...: the kernels that the
# conformance grids of these families plan for ARCH (LIST_MAX cases of head dim LIST_HD,
# 0: all, as the drivers' arguments), the union one name a line in OUT. Each driver's
# list mode (`gpu_conf_FAM MAX HD list ARCH`) plans its grid on a virtual context and
# runs nothing, so this needs no GPU. A driver whose list fails is named on stderr with
# its last lines.
grid_kernels() {
    local build=$1 arch=$2 out=$3 max=$4 hd=$5 bin fam log
    shift 5
    log=$(mktemp)
    : >"$out.all"
    for bin in "$build"/tests/gpu_conf_*; do
        fam=${bin##*/gpu_conf_}
        [[ " $* " == *" $fam "* ]] || continue
        if "$bin" "$max" "$hd" list "$arch" >"$log" 2>&1; then
            awk '/^kernel /{print $2}' "$log" >>"$out.all"
        else
            echo "${bin##*/}: list mode failed: $(grep -v '^kernel ' "$log" | tail -2)" >&2
        fi
    done
    sort -u "$out.all" >"$out"
    rm -f "$out.all" "$log"
}
