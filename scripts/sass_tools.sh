#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sass_tools.sh PACK: unpack the GPU machine's cuobjdump and nvdisasm (the pack that
# `SASS_TOOLS=1 scripts/gpu_check.sh ...` leaves in $OUT/sasstools.tar.xz) into .sasstools/
# (ignored by git), where scripts/fwd_sass.sh finds them when the PATH has no cuobjdump:
# the development machine's toolkit has NVRTC and ptxas, not the disassemblers.
set -euo pipefail
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: scripts/sass_tools.sh PACK (sasstools.tar.xz)" >&2; exit 2; }
dir="$(cd "$(dirname "$0")/.." && pwd)/.sasstools"
mkdir -p "$dir"
xz -dc "$1" | tar -x -C "$dir"
"$dir/cuobjdump" --version | tail -1
echo "unpacked into $dir"
