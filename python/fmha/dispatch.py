# SPDX-License-Identifier: MIT
"""The dispatcher level: contexts, problems, plans, kernel sets, explain and build.

These are thin, checked wrappers of the C API: every failure raises an FmhaError
subclass carrying the library's status name and message.
"""
import ctypes
import json
import shlex
import sys

from . import _lib
from ._lib import lib, check, text

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}


def build_info():
    """The library's build information as a dict: version, backends, openmp, cuda and nvrtc
    ("on"/"off"), and cuda_off / nvrtc_off (why) when off."""
    return {k: v for k, _, v in (item.partition("=") for item in shlex.split(text(lib.fmha_build_info())))}


class Context:
    """Where plans run: backend "cpu", "cuda" (device ordinal `device`) or "auto"; or,
    with `arch` ("sm80", "sm90", ...), a virtual GPU that selects and explains as such a
    device would but runs nothing (planning on it raises, naming the kernel selected)."""

    def __init__(self, backend="auto", device=0, arch=None, sm_count=0):
        self._h = ctypes.c_void_p()
        if arch:
            st = lib.fmha_context_create_virtual(ctypes.byref(self._h), str(arch).encode(), int(sm_count))
            check(st, lambda: "cannot create a virtual context: " + text(lib.fmha_context_create_error()))
        else:
            if backend not in BACKENDS:
                raise ValueError("fmha: backend %r; expected one of %s" % (backend, ", ".join(BACKENDS)))
            st = lib.fmha_context_create(ctypes.byref(self._h), BACKENDS[backend], int(device))
            check(st, lambda: "cannot create a %s context: %s" % (backend, text(lib.fmha_context_create_error())))

    def close(self):
        if self._h:
            lib.fmha_context_destroy(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        self.close()

    @property
    def handle(self):
        return self._h

    @property
    def backend(self):
        return {1: "cpu", 2: "cuda"}[lib.fmha_context_backend(self._h)]

    @property
    def arch(self):
        return text(lib.fmha_context_arch(self._h))

    def last_error(self):
        return text(lib.fmha_context_last_error(self._h))

    def kernels(self, with_stats=False):
        """The registry export: {"metadata", "statistics" (with_stats), "kernels"}."""
        return json.loads(_lib.take_string(lib.fmha_context_kernels_json(self._h, 1 if with_stats else 0)))

    def kernel_names(self):
        return [k["name"] for k in self.kernels()["kernels"]]

    def load_tune_db(self, path):
        check(lib.fmha_context_load_tune_db(self._h, path.encode()), self.last_error)

    def plan(self, problem, force_kernel=None, num_threads=0, check_index_data=False):
        return Plan(self, problem, force_kernel=force_kernel, num_threads=num_threads,
                    check_index_data=check_index_data)

    def explain(self, problem, force_kernel=None, num_threads=0):
        """Every candidate kernel of every stage with its rejection reason or cost, and the
        choice, as text. Raises when no plan exists (the text is on the exception)."""
        opt = _plan_options(force_kernel, num_threads)
        out = ctypes.c_void_p()
        st = lib.fmha_explain(self._h, problem.handle, ctypes.byref(opt), ctypes.byref(out))
        txt = _lib.take_string(out.value) if out.value else ""
        if st:
            err = _lib.error_for_status(_lib.status_name(st), self.last_error())
            err.explain = txt
            raise err
        return txt


def _plan_options(force_kernel, num_threads, check_index_data=False):
    opt = _lib.PlanOptions()
    opt.struct_size = ctypes.sizeof(_lib.PlanOptions)
    opt.force_kernel = force_kernel.encode() if force_kernel else None
    opt.num_threads = int(num_threads)
    opt.check_index_data = 1 if check_index_data else 0
    return opt


def _param(name):
    """(key, is it an F64 parameter) of a parameter name."""
    key = _lib.param_code(name)
    info = _lib.ParamInfo()
    info.struct_size = ctypes.sizeof(_lib.ParamInfo)
    lib.fmha_param_info(key, ctypes.byref(info))
    return key, info.type == 2


class Problem:
    """An attention problem: parameters by name and tensor descriptions by role.

        p = Problem(family="fwd", batch=2, num_heads_q=8, ...)
        p.set(mask="b", softcap=30.0)
        p.tensor("q", "fp16", dims=(2, 128, 8, 64), strides=None)
    """

    def __init__(self, **params):
        self._h = ctypes.c_void_p()
        check(lib.fmha_problem_create(ctypes.byref(self._h)), "cannot create a problem")
        self.set(**params)

    def __del__(self):
        if getattr(self, "_h", None):
            lib.fmha_problem_destroy(self._h)
            self._h = None

    @property
    def handle(self):
        return self._h

    def last_error(self):
        return text(lib.fmha_problem_last_error(self._h))

    def set(self, **params):
        """Set parameters by name; `family` takes a family name, `mask` a mask string in CK's
        grammar, floats go to F64 parameters."""
        for name, value in params.items():
            if name == "mask":
                check(lib.fmha_problem_set_mask(self._h, str(value).encode()), self.last_error)
                continue
            if name == "family" and isinstance(value, str):
                value = _lib.family_code(value)
            key, is_f64 = _param(name)
            if is_f64:
                st = lib.fmha_problem_set_f64(self._h, key, float(value))
            else:
                if isinstance(value, float) and not value.is_integer():
                    raise TypeError("fmha: parameter %s takes an integer, got %r" % (name, value))
                st = lib.fmha_problem_set_i64(self._h, key, int(value))
            check(st, self.last_error)
        return self

    def get(self, name):
        key, is_f64 = _param(name)
        if is_f64:
            v = ctypes.c_double()
            check(lib.fmha_problem_get_f64(self._h, key, ctypes.byref(v)), self.last_error)
        else:
            v = ctypes.c_int64()
            check(lib.fmha_problem_get_i64(self._h, key, ctypes.byref(v)), self.last_error)
        return v.value

    def tensor(self, role, dtype, dims, strides=None):
        """Describe the tensor of a role ("q", "k", "block_table", ...): dtype name, dims and
        element strides (None: contiguous row-major)."""
        if role not in _lib.ROLES:
            raise ValueError("fmha: unknown tensor role %r; expected one of %s" % (role, ", ".join(sorted(_lib.ROLES))))
        rank = len(dims)
        d = (ctypes.c_int64 * max(rank, 1))(*dims)
        s = (ctypes.c_int64 * max(rank, 1))(*strides) if strides is not None else None
        check(lib.fmha_problem_set_tensor(self._h, _lib.ROLES[role], _lib.dtype_code(dtype), rank, d, s), self.last_error)
        return self

    def has(self, role):
        return bool(lib.fmha_problem_has_tensor(self._h, _lib.ROLES[role]))

    def validate(self):
        """Raise InvalidProblemError with the rule's message when the problem is invalid."""
        buf = ctypes.create_string_buffer(1024)
        st = lib.fmha_problem_validate(self._h, buf, len(buf))
        check(st, text(buf.value))


class Plan:
    """Validated problem + chosen kernels + workspace size. execute(tensors, workspace).
    check_index_data: on a GPU, check the index tensors (cu_seqlens, page tables, ...) on
    the host before each execute (docs/semantics.md, "Index data")."""

    def __init__(self, context, problem, force_kernel=None, num_threads=0, check_index_data=False):
        self.context = context  # keeps the context alive as long as the plan
        self._h = ctypes.c_void_p()
        opt = _plan_options(force_kernel, num_threads, check_index_data)
        st = lib.fmha_plan_create(context.handle, problem.handle, ctypes.byref(opt), ctypes.byref(self._h))
        check(st, context.last_error)
        self.roles = [r for r in _lib.ROLES if problem.has(r)]

    def __del__(self):
        if getattr(self, "_h", None):
            lib.fmha_plan_destroy(self._h)
            self._h = None

    @property
    def workspace_size(self):
        n = ctypes.c_size_t()
        check(lib.fmha_plan_workspace_size(self._h, ctypes.byref(n)), "plan is invalid")
        return n.value

    def kernels(self):
        names, s = [], 0
        while True:
            n = lib.fmha_plan_kernel_name(self._h, s)
            if not n:
                return names
            names.append(text(n))
            s += 1

    def describe(self):
        n = lib.fmha_plan_describe(self._h, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib.fmha_plan_describe(self._h, buf, n + 1)
        return text(buf.value)

    def last_error(self):
        return text(lib.fmha_plan_last_error(self._h))

    def execute(self, pointers, workspace=0, workspace_bytes=0, stream=None):
        """Run with pointers {role: address (int)}; workspace an address with
        workspace_bytes; stream a CUDA stream handle (int) or None."""
        arr = (_lib.TensorPtr * max(len(pointers), 1))()
        for i, (role, ptr) in enumerate(pointers.items()):
            if role not in _lib.ROLES:
                raise ValueError("fmha: unknown tensor role %r" % (role,))
            arr[i].role, arr[i].data = _lib.ROLES[role], ptr
        st = lib.fmha_plan_execute(self._h, arr, len(pointers), workspace or None, workspace_bytes, stream or None)
        check(st, self.last_error)


class KernelSet:
    """Kernel instances of an arch and receipt: names and families."""

    def __init__(self, arch, receipt="default", filter=None):
        self._h = ctypes.c_void_p()
        why = ctypes.create_string_buffer(1024)
        st = lib.fmha_kernel_set_enumerate(arch.encode(), receipt.encode(), filter.encode() if filter else None,
                                           ctypes.byref(self._h), why, len(why))
        check(st, text(why.value))

    def __del__(self):
        if getattr(self, "_h", None):
            lib.fmha_kernel_set_destroy(self._h)
            self._h = None

    def __len__(self):
        return lib.fmha_kernel_set_count(self._h)

    def names(self):
        return [text(lib.fmha_kernel_set_name(self._h, i)) for i in range(len(self))]

    def families(self):
        return [text(lib.fmha_kernel_set_family(self._h, i)) for i in range(len(self))]


def enumerate_kernels(arch, receipt="default", filter=None):
    """Names of every valid kernel instance of arch in a receipt, kept by filter."""
    return KernelSet(arch, receipt, filter).names()


def build(arch, receipt="default", filter=None, threads=0, progress=True, names=None):
    """Precompile kernels into the on-disk cache with NVRTC (no GPU needed). progress:
    True draws a bar on stderr, a callable gets (done, total, kernel, from_cache).
    names: a list of kernel names to build instead of a receipt and filter (arch may
    then be None). Returns {"compiled", "cached", "skipped", "failed"}."""
    def draw(done, total, kernel, from_cache):
        width = 30
        fill = width * done // max(total, 1)
        sys.stderr.write("\r[%s%s] %d/%d %s%s" % ("#" * fill, "." * (width - fill), done, total,
                                                 "cached " if from_cache else "", kernel[:60]))
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    user_fn = draw if progress is True else progress if callable(progress) else None

    def trampoline(done, total, kernel, from_cache, _user):
        try:
            user_fn(done, total, text(kernel), bool(from_cache))
        except Exception:  # a callback must not unwind through C
            pass

    cb = _lib.BUILD_PROGRESS(trampoline) if user_fn else _lib.BUILD_PROGRESS()
    opt = _lib.BuildOptions()
    opt.struct_size = ctypes.sizeof(_lib.BuildOptions)
    if names is not None and filter:
        raise ValueError("build: names is the whole set; give no filter with it")
    opt.arch = arch.encode() if arch else None
    opt.receipt = receipt.encode() if names is None else None
    opt.filter = filter.encode() if filter else None
    opt.names = "\n".join(names).encode() if names is not None else None
    opt.threads, opt.progress, opt.user = threads, cb, None
    res = _lib.BuildResult()
    why = ctypes.create_string_buffer(4096)
    st = lib.fmha_build(ctypes.byref(opt), ctypes.byref(res), why, len(why))
    check(st, text(why.value))
    return {"compiled": res.compiled, "cached": res.cached, "skipped": res.skipped, "failed": res.failed}
