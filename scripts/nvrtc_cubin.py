#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nvrtc_cubin.py ROOT ENTRY OUT.cubin [NAME=VALUE ...]: compile kernel entry file ENTRY
(e.g. fwd/fwd_wgmma.cuh, under ROOT/src/cuda/kernels) of the tree at ROOT with NVRTC, as
the library's JIT does (src/cuda/jit.c: sm_90a, -std=c++17, device code by default, each
NAME=VALUE as -DFMHA_NAME=VALUE), write the cubin to OUT.cubin and print ptxas's report
(registers, spills, C75xx warnings) on stdout. The headers come from every folder under
ROOT/src/cuda that holds one, where the library embeds them by file name.

NVRTC, not nvcc: nvcc's ptxas reported no C7511 (wgmmas serialised) for a kernel whose
NVRTC build had it and ran 25% slower (docs/perf-notes.md, run 195), so a register check
or a SASS reading is of this compiler's output. FMHA_CUDA_PATH or CUDA_HOME name the
toolkit when libnvrtc is not on the loader's path. Exit status 1 when NVRTC fails (its
log printed), 2 on bad arguments."""
import ctypes
import ctypes.util
import glob
import os
import sys


def load_nvrtc():
    names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    dirs = [os.path.join(os.environ[v], "lib64") for v in ("FMHA_CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
    dirs.append("/usr/local/cuda/lib64")
    for d in dirs:
        for n in names:
            if os.path.exists(os.path.join(d, n)):
                return ctypes.CDLL(os.path.join(d, n))
    found = ctypes.util.find_library("nvrtc")
    if found:
        return ctypes.CDLL(found)
    sys.exit("nvrtc_cubin.py: libnvrtc not found (FMHA_CUDA_PATH, CUDA_HOME, /usr/local/cuda/lib64, the loader path)")


def main():
    if len(sys.argv) < 4 or any("=" not in d for d in sys.argv[4:]):
        print(__doc__, file=sys.stderr)
        return 2
    root, entry, out = sys.argv[1], sys.argv[2], sys.argv[3]
    path = os.path.join(root, "src/cuda/kernels", entry)
    if not os.path.isfile(path):
        print(f"nvrtc_cubin.py: no kernel entry file {path}", file=sys.stderr)
        return 2
    nv = load_nvrtc()
    headers = glob.glob(os.path.join(root, "src/cuda/**/*.cuh"), recursive=True)
    headers += glob.glob(os.path.join(root, "src/cuda/kernels/**/*.h"), recursive=True)
    dirs = sorted({os.path.dirname(h) for h in headers})
    opts = ["--gpu-architecture=sm_90a", "-std=c++17", "--device-as-default-execution-space",
            "--ptxas-options=-v"] + ["-I" + d for d in dirs] + ["-DFMHA_" + d for d in sys.argv[4:]]
    prog = ctypes.c_void_p()
    src = open(path, "rb").read()
    if nv.nvrtcCreateProgram(ctypes.byref(prog), src, os.path.basename(path).encode(), 0, None, None):
        print("nvrtc_cubin.py: nvrtcCreateProgram failed", file=sys.stderr)
        return 1
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = nv.nvrtcCompileProgram(prog, len(opts), argv)
    n = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetProgramLog(prog, log)
    print(log.value.decode(errors="replace").rstrip())
    if rc:
        print(f"nvrtc_cubin.py: NVRTC failed (result {rc})", file=sys.stderr)
        return 1
    nv.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetCUBIN(prog, cubin)
    with open(out, "wb") as f:
        f.write(cubin.raw)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return 0


if __name__ == "__main__":
    sys.exit(main())
