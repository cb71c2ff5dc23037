# SPDX-License-Identifier: MIT
"""Loading libfmha and declaring its C functions (ctypes).

The library is found, in order: $FMHA_LIBRARY (a path to libfmha.so); the package
folder (an installed wheel ships it there); the build folder of a source checkout
(../../build/libfmha.so relative to this file, or $FMHA_BUILD_DIR); the loader path.
"""
import ctypes
import ctypes.util
import os

from .errors import FmhaError, error_for_status

PACKAGE_VERSION = "0.2.0"

c_status = ctypes.c_int


class ParamInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("name", ctypes.c_char_p), ("doc", ctypes.c_char_p),
                ("type", ctypes.c_int), ("default_i64", ctypes.c_int64), ("lo_i64", ctypes.c_int64),
                ("hi_i64", ctypes.c_int64), ("default_f64", ctypes.c_double), ("lo_f64", ctypes.c_double),
                ("hi_f64", ctypes.c_double)]


class TensorPtr(ctypes.Structure):
    _fields_ = [("role", ctypes.c_int), ("data", ctypes.c_void_p)]


class PlanOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("force_kernel", ctypes.c_char_p), ("num_threads", ctypes.c_int),
                ("check_index_data", ctypes.c_int)]


BUILD_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p)


class BuildOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("arch", ctypes.c_char_p), ("receipt", ctypes.c_char_p),
                ("filter", ctypes.c_char_p), ("threads", ctypes.c_int), ("progress", BUILD_PROGRESS),
                ("user", ctypes.c_void_p), ("names", ctypes.c_char_p)]


class BuildResult(ctypes.Structure):
    _fields_ = [("compiled", ctypes.c_size_t), ("cached", ctypes.c_size_t), ("skipped", ctypes.c_size_t),
                ("failed", ctypes.c_size_t)]


def _candidates():
    env = os.environ.get("FMHA_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libfmha.so")]
    build = os.environ.get("FMHA_BUILD_DIR", os.path.join(here, "..", "..", "build"))
    out.append(os.path.join(build, "libfmha.so"))
    found = ctypes.util.find_library("fmha")
    if found:
        out.append(found)
    return out


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("fmha: cannot load libfmha; tried " + "; ".join(tried) +
                      ". Build it with `make build` or set FMHA_LIBRARY to its path.")


lib, LIBRARY_PATH = _load()

P = ctypes.c_void_p
_SIGNATURES = {
    "fmha_version_number": (ctypes.c_uint, []),
    "fmha_version_string": (ctypes.c_char_p, []),
    "fmha_status_name": (ctypes.c_char_p, [c_status]),
    "fmha_status_string": (ctypes.c_char_p, [c_status]),
    "fmha_build_info": (ctypes.c_char_p, []),
    "fmha_context_create_error": (ctypes.c_char_p, []),
    "fmha_dtype_parse": (c_status, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "fmha_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "fmha_family_parse": (c_status, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "fmha_family_name": (ctypes.c_char_p, [ctypes.c_int]),
    "fmha_param_lookup": (c_status, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "fmha_param_info": (c_status, [ctypes.c_int, ctypes.POINTER(ParamInfo)]),
    "fmha_tensor_role_name": (ctypes.c_char_p, [ctypes.c_int]),
    "fmha_problem_create": (c_status, [ctypes.POINTER(P)]),
    "fmha_problem_destroy": (None, [P]),
    "fmha_problem_clone": (c_status, [P, ctypes.POINTER(P)]),
    "fmha_problem_last_error": (ctypes.c_char_p, [P]),
    "fmha_problem_set_i64": (c_status, [P, ctypes.c_int, ctypes.c_int64]),
    "fmha_problem_set_f64": (c_status, [P, ctypes.c_int, ctypes.c_double]),
    "fmha_problem_get_i64": (c_status, [P, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]),
    "fmha_problem_get_f64": (c_status, [P, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]),
    "fmha_problem_set_mask": (c_status, [P, ctypes.c_char_p]),
    "fmha_problem_set_tensor": (c_status, [P, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]),
    "fmha_problem_clear_tensor": (c_status, [P, ctypes.c_int]),
    "fmha_problem_has_tensor": (ctypes.c_int, [P, ctypes.c_int]),
    "fmha_problem_validate": (c_status, [P, ctypes.c_char_p, ctypes.c_size_t]),
    "fmha_context_create": (c_status, [ctypes.POINTER(P), ctypes.c_int, ctypes.c_int]),
    "fmha_context_create_virtual": (c_status, [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_int]),
    "fmha_context_destroy": (None, [P]),
    "fmha_context_backend": (ctypes.c_int, [P]),
    "fmha_context_arch": (ctypes.c_char_p, [P]),
    "fmha_context_last_error": (ctypes.c_char_p, [P]),
    "fmha_context_kernels_json": (P, [P, ctypes.c_int]),
    "fmha_context_load_tune_db": (c_status, [P, ctypes.c_char_p]),
    "fmha_free": (None, [P]),
    "fmha_kernel_set_enumerate": (c_status, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P),
                                             ctypes.c_char_p, ctypes.c_size_t]),
    "fmha_kernel_set_destroy": (None, [P]),
    "fmha_kernel_set_count": (ctypes.c_size_t, [P]),
    "fmha_kernel_set_name": (ctypes.c_char_p, [P, ctypes.c_size_t]),
    "fmha_kernel_set_family": (ctypes.c_char_p, [P, ctypes.c_size_t]),
    "fmha_build": (c_status, [ctypes.POINTER(BuildOptions), ctypes.POINTER(BuildResult), ctypes.c_char_p,
                              ctypes.c_size_t]),
    "fmha_plan_create": (c_status, [P, P, ctypes.POINTER(PlanOptions), ctypes.POINTER(P)]),
    "fmha_plan_destroy": (None, [P]),
    "fmha_plan_workspace_size": (c_status, [P, ctypes.POINTER(ctypes.c_size_t)]),
    "fmha_plan_execute": (c_status, [P, ctypes.POINTER(TensorPtr), ctypes.c_size_t, P, ctypes.c_size_t, P]),
    "fmha_plan_describe": (ctypes.c_size_t, [P, ctypes.c_char_p, ctypes.c_size_t]),
    "fmha_plan_kernel_name": (ctypes.c_char_p, [P, ctypes.c_int]),
    "fmha_plan_last_error": (ctypes.c_char_p, [P]),
    "fmha_explain": (c_status, [P, P, ctypes.POINTER(PlanOptions), ctypes.POINTER(P)]),
}
for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args

# fmha_plan_execute once more, taking the pointer list as packed bytes (TENSOR_PTRS): the
# per-call fast path builds one bytes object instead of a ctypes array.
execute_packed = lib["fmha_plan_execute"]
execute_packed.restype = c_status
execute_packed.argtypes = [P, ctypes.c_char_p, ctypes.c_size_t, P, ctypes.c_size_t, P]
assert ctypes.sizeof(TensorPtr) == 16 and TensorPtr.data.offset == 8


def text(b):
    """A C string from the library as str ("" for NULL)."""
    return b.decode("utf-8", "replace") if b else ""


LIBRARY_VERSION = text(lib.fmha_version_string())
if LIBRARY_VERSION.split(".")[:2] != PACKAGE_VERSION.split(".")[:2]:
    raise ImportError("fmha: the library at %s is version %s but this package is %s; expected the same "
                      "major.minor (rebuild the library or reinstall the package)"
                      % (LIBRARY_PATH, LIBRARY_VERSION, PACKAGE_VERSION))


def status_name(st):
    """"INVALID_PROBLEM", ... (the C name without its FMHA_STATUS_ prefix)."""
    name = text(lib.fmha_status_name(st))
    return name[len("FMHA_STATUS_"):] if name.startswith("FMHA_STATUS_") else name


def check(st, message):
    """Raise the exception of status st (non-zero) with the library's message."""
    if st != 0:
        raise error_for_status(status_name(st), message() if callable(message) else message)


def take_string(ptr):
    """A malloc'd C string from the library, decoded and freed."""
    if not ptr:
        raise FmhaError("ALLOC_FAILED", "the library returned no text (out of memory)")
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.fmha_free(ptr)


def _lookup(fn, name, kind):
    out = ctypes.c_int()
    st = fn(name.encode(), ctypes.byref(out))
    if st:
        raise ValueError("fmha: unknown %s %r" % (kind, name))
    return out.value


def dtype_code(name):
    return _lookup(lib.fmha_dtype_parse, name, "dtype")


def family_code(name):
    return _lookup(lib.fmha_family_parse, name, "family")


def param_code(name):
    return _lookup(lib.fmha_param_lookup, name, "parameter")


def _roles():
    roles = {}
    for v in range(1, 64):
        n = lib.fmha_tensor_role_name(v)
        if n:
            roles[text(n)] = v
    return roles


ROLES = _roles()
