# SPDX-License-Identifier: MIT
"""Array adapters: NumPy arrays and PyTorch tensors as (dtype, dims, element strides,
address, device), and outputs allocated like an input (same library, same device)."""
import ctypes

try:
    import numpy as np
except ImportError:  # torch-only installs still work
    np = None

try:
    import torch
except ImportError:
    torch = None

_NP = {"float32": "fp32", "float16": "fp16", "int32": "int32", "uint8": "uint8"}
_TORCH = {}
if torch is not None:
    _TORCH = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int32: "int32",
              torch.uint8: "uint8"}
    if hasattr(torch, "float8_e4m3fn"):
        _TORCH[torch.float8_e4m3fn] = "fp8e4m3"
FLOATS = ("fp32", "fp16", "bf16")
# what the forward's q, k and v may be: fp8 e4m3 (torch.float8_e4m3fn) with descales
FWD_INPUTS = FLOATS + ("fp8e4m3",)


class Arr:
    """One array argument: its dtype name, dims, element strides, address and device
    ("cpu" or "cuda:N"); `obj` is the array itself (kept alive by the Arr)."""

    __slots__ = ("obj", "kind", "dtype", "dims", "strides", "ptr", "device")

    def __init__(self, x, name, allowed=FLOATS):
        if np is not None and isinstance(x, np.ndarray):
            dt = _NP.get(x.dtype.name)
            if dt is None:
                raise TypeError("fmha: %s has NumPy dtype %s; expected %s" % (name, x.dtype.name, _expected(allowed, "numpy")))
            if any(s % x.itemsize for s in x.strides):
                raise ValueError("fmha: %s has byte strides %s that are not multiples of its item size" % (name, x.strides))
            self.kind, self.device = "numpy", "cpu"
            self.strides = tuple(s // x.itemsize for s in x.strides)
            self.ptr = x.ctypes.data
        elif torch is not None and isinstance(x, torch.Tensor):
            dt = _TORCH.get(x.dtype)
            if dt is None:
                raise TypeError("fmha: %s has torch dtype %s; expected %s" % (name, x.dtype, _expected(allowed, "torch")))
            if x.device.type not in ("cpu", "cuda"):
                raise ValueError("fmha: %s is on device %s; expected cpu or cuda" % (name, x.device))
            self.kind = "torch"
            self.device = "cpu" if x.device.type == "cpu" else "cuda:%d" % x.device.index
            self.strides = tuple(x.stride())
            self.ptr = x.data_ptr()
        else:
            raise TypeError("fmha: %s is a %s; expected a NumPy array or a torch tensor" % (name, type(x).__name__))
        if dt not in allowed:
            raise TypeError("fmha: %s has dtype %s; expected %s" % (name, dt, _expected(allowed, self.kind)))
        if allowed in (FLOATS, FWD_INPUTS) and len(x.shape) >= 2 and x.shape[-1] > 1 and self.strides[-1] != 1:
            raise ValueError("fmha: %s has stride %d in its last dimension; expected a contiguous last dimension "
                             "(call .contiguous() / np.ascontiguousarray)" % (name, self.strides[-1]))
        self.obj, self.dtype, self.dims = x, dt, tuple(int(d) for d in x.shape)


def _expected(allowed, kind):
    if allowed not in (FLOATS, FWD_INPUTS):
        return " or ".join(allowed)
    if kind == "numpy":
        return "float32 or float16 (bfloat16 and float8_e4m3fn through PyTorch)"
    return "float32, float16, bfloat16 or float8_e4m3fn (the forward)" if "fp8e4m3" in allowed else \
        "float32, float16 or bfloat16"


def wrap(x, name, allowed=FLOATS):
    return None if x is None else Arr(x, name, allowed)


def index_array(x, like, name):
    """An int32 index tensor (cu_seqlens, block tables, ...) from an array or a list, on
    the device of `like`."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)) or (np is not None and isinstance(x, np.integer)) or isinstance(x, int):
        if like.kind == "numpy" or torch is None:
            x = np.ascontiguousarray(np.asarray(x, dtype=np.int32).reshape(-1))
        else:
            x = torch.tensor(list(x) if not isinstance(x, int) else [x], dtype=torch.int32, device=like.obj.device)
    elif like.kind == "numpy" and np is not None and isinstance(x, np.ndarray) and x.dtype != np.int32:
        x = np.ascontiguousarray(x.astype(np.int32))
    elif torch is not None and isinstance(x, torch.Tensor) and x.dtype != torch.int32:
        x = x.to(torch.int32)
    return Arr(x, name, ("int32",))


def empty(like, shape, dtype):
    """An uninitialised array of dtype name `dtype` like `like` (library and device)."""
    if like.kind == "numpy":
        npdt = {"fp32": np.float32, "fp16": np.float16, "uint8": np.uint8, "int32": np.int32}.get(dtype)
        if npdt is None:
            raise TypeError("fmha: dtype %s has no NumPy type" % dtype)
        return np.empty(shape, dtype=npdt)
    tdt = {v: k for k, v in _TORCH.items()}[dtype]
    return torch.empty(shape, dtype=tdt, device=like.obj.device)


def workspace(like, nbytes):
    """A workspace of nbytes on like's device: (keep-alive object, address)."""
    if nbytes == 0:
        return None, 0
    if like.kind == "numpy":
        buf = np.empty(nbytes + 256, dtype=np.uint8)
        addr = (buf.ctypes.data + 255) & ~255
        return buf, addr
    buf = torch.empty(nbytes, dtype=torch.uint8, device=like.obj.device)
    return buf, buf.data_ptr()


def stream_of(like):
    """The CUDA stream to run on: the current torch stream of like's device (None on CPU)."""
    if like.device == "cpu":
        return None
    return torch.cuda.current_stream(like.obj.device).cuda_stream
