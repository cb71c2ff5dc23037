# SPDX-License-Identifier: MIT
"""FlashAttention-style entry points over the dispatcher: FA's argument names and
semantics (BSHD layout, bottom-right causal, window_size=(left, right), softcap,
alibi_slopes, dropout_p, softmax_scale), on NumPy arrays (CPU backend), PyTorch CPU
tensors (CPU backend) or PyTorch CUDA tensors (CUDA backend, zero-copy, on the current
stream). Outputs come back in the inputs' library, dtype and device."""
import collections
import os
import struct
import threading

from . import _lib
from . import tensors as T
from .dispatch import Context, Plan, Problem
from .errors import FmhaError

_contexts = {}
_contexts_lock = threading.Lock()


def context_for(device):
    """The shared context of a device ("cpu" or "cuda:N"), created on first use."""
    with _contexts_lock:
        ctx = _contexts.get(device)
        if ctx is None:
            ctx = Context("cpu") if device == "cpu" else Context("cuda", int(device.split(":")[1]))
            _contexts[device] = ctx
        return ctx


def _signed64(x):
    x = int(x) & 0xFFFFFFFFFFFFFFFF
    return x - (1 << 64) if x >= (1 << 63) else x


def _mask_params(causal, window_size):
    left, right = (int(window_size[0]), int(window_size[1])) if window_size is not None else (-1, -1)
    if causal:
        right = 0
    return {"window_left": left, "window_right": right, "mask_align": 1}  # FA: bottom-right


# Plans of the calls made so far, keyed on everything that defines a problem (family,
# parameters, each tensor's role, dtype, shape and strides, the device); data pointers are
# not part of it. A repeated call skips building the Problem (some 40 ctypes calls) and
# planning; the library's own plan cache (fmha_context_plan_cache_stats) serves the
# Problem/Plan level. Bounded: the least recently used plan goes past _PLANS_MAX.
_PLANS_MAX = int(os.environ.get("FMHA_PY_PLAN_CACHE", "256"))
_plans = collections.OrderedDict()
_plans_lock = threading.Lock()
_plan_stats = {"hits": 0, "misses": 0}


def plan_cache_info():
    """The Python entry points' plan cache: {"hits", "misses", "entries", "capacity"} of the
    general path, and "fast_entries": call signatures the fast path of fmha.attention
    serves (its hits are not counted: counting would cost what it saves)."""
    with _plans_lock:
        return dict(_plan_stats, entries=len(_plans), capacity=_PLANS_MAX, fast_entries=len(_fast))


def plan_cache_clear():
    with _plans_lock:
        _plans.clear()
        _unsupported.clear()
    with _fast_lock:
        _fast.clear()


# Problems that no kernel supports, by the same key, with the error: a repeated call is
# refused without planning it again.
_unsupported = {}


def _plan_for(family, params, arrs, device):
    key = (family, device, tuple(sorted(params.items())),
           tuple(sorted((r, a.dtype, tuple(a.dims), tuple(a.strides)) for r, a in arrs.items())))
    with _plans_lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            _plan_stats["hits"] += 1
            return plan
        if key in _unsupported:
            raise _unsupported[key]
        _plan_stats["misses"] += 1
    p = Problem(family=family, **params)
    for role, a in arrs.items():
        p.tensor(role, a.dtype, a.dims, a.strides)
    try:
        plan = Plan(context_for(device), p)
    except FmhaError as e:
        if e.status == "NOT_SUPPORTED" and _PLANS_MAX > 0:
            with _plans_lock:
                if len(_unsupported) >= _PLANS_MAX:
                    _unsupported.clear()
                _unsupported[key] = e
        raise
    plan.workspace_bytes = plan.workspace_size
    if _PLANS_MAX > 0:
        with _plans_lock:
            _plans[key] = plan
            while len(_plans) > _PLANS_MAX:
                _plans.popitem(last=False)
    return plan


def _run(family, params, ins, outs):
    """Describe, plan (or find the plan of an equal call) and execute one problem.
    ins/outs: {role: Arr or None}. Returns the plan."""
    arrs = {r: a for r, a in list(ins.items()) + list(outs.items()) if a is not None}
    devices = {a.device for a in arrs.values()}
    if len(devices) != 1:
        raise ValueError("fmha: the tensors are on different devices (%s); expected one" % ", ".join(sorted(devices)))
    like = next(iter(arrs.values()))
    plan = _plan_for(family, params, arrs, like.device)
    keep, ws = T.workspace(like, plan.workspace_bytes)
    plan.execute({r: a.ptr for r, a in arrs.items()}, ws, plan.workspace_bytes, T.stream_of(like))
    del keep  # torch frees it stream-ordered; NumPy runs synchronously
    return plan


def _output(like, out, shape, dtype, name="out"):
    """The caller's out= array, checked against what the call writes, or a new one."""
    if out is None:
        return T.empty(like, shape, dtype)
    o = T.Arr(out, name)
    if o.dims != tuple(shape) or o.dtype != dtype or o.kind != like.kind or o.device != like.device:
        raise ValueError("fmha: %s is %s %s %s on %s; expected shape %s, dtype %s on %s (the inputs' library and "
                         "device)" % (name, o.kind, o.dtype, o.dims, o.device, tuple(shape), dtype, like.device))
    return out


# ---------------------------------------------------------------- the fast path
# A repeated fmha.attention call on torch tensors (no grad, no dropout, no ALiBi or
# sinks: the serving case) skips everything above after its first call: one dict lookup
# on the tensors' shapes, strides, dtypes and devices and the call's scalars, the output
# allocation, the pointers packed into one bytes object and one C call. The first call
# of a signature goes the general way (which validates it) and records the entry.
_fast = {}
_fast_lock = threading.Lock()
_PTR = struct.Struct("<i4xQ")


class _FastEntry:
    __slots__ = ("plan", "handle", "o_shape", "lse_shape", "roles", "pack", "ws_bytes", "extra")

    def __init__(self, plan, o_shape, lse_shape, extra=()):
        self.plan = plan  # keeps the plan (and its context) alive
        self.handle = plan._h
        self.o_shape, self.lse_shape = o_shape, lse_shape
        self.extra = tuple(_lib.ROLES[r] for r in extra)  # further inputs, after q, k, v, o (, lse)
        names = ("q", "k", "v", "o") + (("lse",) if lse_shape is not None else ()) + tuple(extra)
        self.roles = tuple(_lib.ROLES[r] for r in names)
        self.pack = struct.Struct("<" + "i4xQ" * len(names)).pack
        self.ws_bytes = plan.workspace_bytes


def _fast_execute(e, q, dev, tensors):
    """Run entry e's plan on tensors (in e.roles order)."""
    args = []
    for role, t in zip(e.roles, tensors):
        args.append(role)
        args.append(t.data_ptr())
    _fast_launch(e, q, dev, e.pack(*args))


def _fast_launch(e, q, dev, ptrs):
    """Entry e's plan on the packed pointer list ptrs: on q's current stream (device dev,
    -1 for the CPU), with a workspace when the plan needs one; one C call."""
    global _raw_stream
    if dev >= 0:
        if _raw_stream is None:
            _raw_stream = _raw_stream_fn()
        stream = _raw_stream(dev)
    else:
        stream = None
    ws = T.torch.empty(e.ws_bytes, dtype=T.torch.uint8, device=q.device) if e.ws_bytes else None
    st = _lib.execute_packed(e.handle, ptrs, len(e.roles), ws.data_ptr() if ws is not None else None, e.ws_bytes,
                             stream)
    if st:
        _lib.check(st, e.plan.last_error)


def _raw_stream_fn():
    torch = T.torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) if torch is not None else None
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


_raw_stream = None


def _fast_forward(q, k, v, softmax_scale, causal, window_size, softcap, return_lse, out):
    dev = q.get_device()
    key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype, v.dtype, dev,
           k.get_device(), v.get_device(), softmax_scale, causal, tuple(window_size), softcap, return_lse,
           None if out is None else (out.shape, out.stride(), out.dtype, out.get_device()))
    e = _fast.get(key)
    if e is None:  # the general path validates; its plan serves the next calls
        o, lse, _, _, plan = _forward(q, k, v, 0.0, softmax_scale, causal, window_size, softcap, None, None,
                                      return_lse, False, None, 0, out=out, _with_plan=True)
        if _PLANS_MAX > 0:
            with _fast_lock:
                if len(_fast) >= _PLANS_MAX:
                    _fast.clear()
                _fast[key] = _FastEntry(plan, tuple(o.shape), tuple(lse.shape) if lse is not None else None)
        return (o, lse) if return_lse else o
    torch = T.torch
    o = out if out is not None else torch.empty(e.o_shape, dtype=q.dtype, device=q.device)
    r = e.roles
    if return_lse:
        lse = torch.empty(e.lse_shape, dtype=torch.float32, device=q.device)
        ptrs = e.pack(r[0], q.data_ptr(), r[1], k.data_ptr(), r[2], v.data_ptr(), r[3], o.data_ptr(), r[4],
                      lse.data_ptr())
    else:
        ptrs = e.pack(r[0], q.data_ptr(), r[1], k.data_ptr(), r[2], v.data_ptr(), r[3], o.data_ptr())
    _fast_launch(e, q, dev, ptrs)
    return (o, lse) if return_lse else o


def _is_fp8(x):
    torch = T.torch
    return torch is not None and isinstance(x, torch.Tensor) and getattr(torch, "float8_e4m3fn", None) == x.dtype


def _fast_path_ok(q, k, v, dropout_p, alibi_slopes, sink, return_attn_probs):
    torch = T.torch
    return (torch is not None and type(q) is torch.Tensor and type(k) is torch.Tensor and type(v) is torch.Tensor
            and dropout_p == 0 and alibi_slopes is None and sink is None and not return_attn_probs)


def _descale(x, name):
    """An fp8 descale: a float32 tensor of shape (1,) or (batch, heads_k) on the inputs'
    device, or None (1)."""
    if isinstance(x, (int, float)):
        raise TypeError("fmha: %s is a Python number; pass a float32 tensor of shape (1,) or (batch, heads_k) on the "
                        "inputs' device (the value is read on the device, so a new scale needs no new plan)" % name)
    return T.wrap(x, name, ("fp32",))


def _random_seed():
    return int.from_bytes(os.urandom(8), "little")


def _common(dropout_p, softmax_scale, causal, window_size, softcap, dropout_seed, dropout_offset):
    params = {"scale": 0.0 if softmax_scale is None else float(softmax_scale), "softcap": float(softcap),
              "dropout_p": float(dropout_p), "dropout_seed": _signed64(dropout_seed or 0),
              "dropout_offset": _signed64(dropout_offset or 0)}
    params.update(_mask_params(causal, window_size))
    return params


def _forward(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
             alibi_slopes=None, sink=None, return_lse=False, return_attn_probs=False, dropout_seed=None,
             dropout_offset=0, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
             seqused_k=None, out=None, _with_plan=False, q_descale=None, k_descale=None, v_descale=None):
    Q, K, V = T.wrap(q, "q", T.FWD_INPUTS), T.wrap(k, "k", T.FWD_INPUTS), T.wrap(v, "v", T.FWD_INPUTS)
    group = cu_seqlens_q is not None
    if group:
        if len(Q.dims) != 3 or len(K.dims) != 3:
            raise ValueError("fmha: varlen q, k, v are (total, heads, head_dim); got %s, %s" % (Q.dims, K.dims))
        cq, ck = T.index_array(cu_seqlens_q, Q, "cu_seqlens_q"), T.index_array(cu_seqlens_k, Q, "cu_seqlens_k")
        B = cq.dims[0] - 1
        H, D, Hk, Dv = Q.dims[1], Q.dims[2], K.dims[1], V.dims[2]
        Sq, Sk = int(max_seqlen_q), int(max_seqlen_k)
        o_shape, lse_shape = (Q.dims[0], H, Dv), (H, Q.dims[0])
    else:
        if len(Q.dims) != 4 or len(K.dims) != 4 or len(V.dims) != 4:
            raise ValueError("fmha: q, k, v are (batch, seqlen, heads, head_dim); got %s, %s, %s" % (Q.dims, K.dims, V.dims))
        B, Sq, H, D = Q.dims
        Sk, Hk, Dv = K.dims[1], K.dims[2], V.dims[3]
        o_shape, lse_shape = (B, Sq, H, Dv), (B, H, Sq)
    if dropout_p > 0 and dropout_seed is None:
        dropout_seed = _random_seed()
    params = _common(dropout_p, softmax_scale, causal, window_size, softcap, dropout_seed, dropout_offset)
    params.update(mode=1 if group else 0, batch=B, num_heads_q=H, num_heads_kv=Hk, seqlen_q=Sq, seqlen_kv=Sk,
                  head_dim_qk=D, head_dim_v=Dv)
    # fp8 e4m3 inputs give a bf16 output (docs/semantics.md, "FP8")
    out = _output(Q, out, o_shape, "bf16" if Q.dtype == "fp8e4m3" else Q.dtype)
    lse = T.empty(Q, lse_shape, "fp32") if (return_lse or return_attn_probs) else None
    mask = T.empty(Q, (B, H, Sq, Sk), "uint8") if return_attn_probs else None
    ins = {"q": Q, "k": K, "v": V, "alibi_slopes": T.wrap(alibi_slopes, "alibi_slopes", ("fp32",)),
           "sink": T.wrap(sink, "sink", ("fp32",)), "q_descale": _descale(q_descale, "q_descale"),
           "k_descale": _descale(k_descale, "k_descale"), "v_descale": _descale(v_descale, "v_descale")}
    if group:
        ins.update(cu_seqlens_q=cq, cu_seqlens_kv=ck, seqused_kv=T.index_array(seqused_k, Q, "seqused_k"))
    outs = {"o": T.Arr(out, "out"), "lse": T.wrap(lse, "lse", ("fp32",)),
            "dropout_mask": T.wrap(mask, "dropout_mask", ("uint8",))}
    # a decode-shaped call on a GPU runs the split-KV decode kernel: the library routes it
    # (src/core/plan.c, decode_route)
    plan = _run("fwd", params, ins, outs)
    if _with_plan:
        return out, lse, mask, dropout_seed, plan
    return out, lse, mask, dropout_seed




def _backward(dout, q, k, v, out, lse, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
              softcap=0.0, alibi_slopes=None, sink=None, deterministic=False, dropout_seed=0, dropout_offset=0,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, seqused_k=None):
    Q, K, V, O, dO = T.wrap(q, "q"), T.wrap(k, "k"), T.wrap(v, "v"), T.wrap(out, "out"), T.wrap(dout, "dout")
    L = T.wrap(lse, "lse", ("fp32",))
    group = cu_seqlens_q is not None
    if group:
        cq, ck = T.index_array(cu_seqlens_q, Q, "cu_seqlens_q"), T.index_array(cu_seqlens_k, Q, "cu_seqlens_k")
        B, H, D, Hk, Dv = cq.dims[0] - 1, Q.dims[1], Q.dims[2], K.dims[1], V.dims[2]
        Sq, Sk = int(max_seqlen_q), int(max_seqlen_k)
    else:
        B, Sq, H, D = Q.dims
        Sk, Hk, Dv = K.dims[1], K.dims[2], V.dims[3]
    params = _common(dropout_p, softmax_scale, causal, window_size, softcap, dropout_seed, dropout_offset)
    params.update(family="bwd", mode=1 if group else 0, batch=B, num_heads_q=H, num_heads_kv=Hk, seqlen_q=Sq,
                  seqlen_kv=Sk, head_dim_qk=D, head_dim_v=Dv, deterministic=1 if deterministic else 0)
    dq, dk, dv = T.empty(Q, Q.dims, Q.dtype), T.empty(Q, K.dims, K.dtype), T.empty(Q, V.dims, V.dtype)
    S = T.wrap(sink, "sink", ("fp32",))
    dsink = T.empty(Q, S.dims, "fp32") if S is not None else None
    ins = {"q": Q, "k": K, "v": V, "o": O, "lse": L, "do": dO,
           "alibi_slopes": T.wrap(alibi_slopes, "alibi_slopes", ("fp32",)), "sink": S}
    if group:
        ins.update(cu_seqlens_q=cq, cu_seqlens_kv=ck, seqused_kv=T.index_array(seqused_k, Q, "seqused_k"))
    family = params.pop("family")
    _run(family, params, ins, {"dq": T.Arr(dq, "dq"), "dk": T.Arr(dk, "dk"), "dv": T.Arr(dv, "dv"),
                               "dsink": T.wrap(dsink, "dsink", ("fp32",))})
    return dq, dk, dv, dsink


def _wants_grad(*xs):
    torch = T.torch
    if torch is None or not torch.is_grad_enabled():
        return False
    for x in xs:  # a loop, not any(<generator>): this runs on every call
        if isinstance(x, torch.Tensor) and x.requires_grad:
            return True
    return False


def _find_is_compiling():
    torch = T.torch
    if torch is None:
        return lambda: False
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return compiler.is_compiling
    try:
        import torch._dynamo as dynamo
        return dynamo.is_compiling
    except (ImportError, AttributeError):  # torch < 2.0: nothing compiles
        return lambda: False


_is_compiling = None


def _compiling():
    """True while torch.compile (dynamo) traces the caller."""
    global _is_compiling
    if _is_compiling is None:
        _is_compiling = _find_is_compiling()
    return _is_compiling()


def attention(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
              alibi_slopes=None, deterministic=False, return_attn_probs=False, return_lse=False, sink=None,
              dropout_seed=None, dropout_offset=0, out=None, q_descale=None, k_descale=None, v_descale=None):
    """Attention over q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k,
    heads_k, head_dim[_v]); heads % heads_k == 0 (GQA/MQA). FlashAttention semantics:
    causal is aligned bottom-right, window_size=(left, right) with -1 unbounded, softcap
    > 0 caps logits, alibi_slopes (heads,) or (batch, heads) fp32, sink (heads,) fp32
    per-head sink logits. Returns out (batch, seqlen_q, heads, head_dim_v); with
    return_lse also lse (batch, heads, seqlen_q) fp32; with return_attn_probs
    (out, lse, keep mask (batch, heads, seqlen_q, seqlen_k) uint8). Torch tensors that
    require grad go through the autograd function, so the result trains. out= writes the
    output into a caller array of that shape and dtype (and returns it).

    FP8: q, k and v as torch.float8_e4m3fn (all three) give a bfloat16 output; each may
    have a float32 descale tensor of shape (1,) or (batch, heads_k) (FlashAttention-3's
    q_descale, k_descale, v_descale; None means 1): the inputs are read as their e4m3
    values times the descale. No dropout, ALiBi or gradients with fp8.

    Under torch.compile the call is the custom op torch.ops.fmha.attention (no graph
    break; dropout and return_attn_probs are not traced). A repeated call on torch
    tensors without grad takes a fast path (one dictionary lookup and one C call)."""
    fp8 = _is_fp8(q) or q_descale is not None or k_descale is not None or v_descale is not None
    if fp8:
        if _wants_grad(q, k, v, sink):
            raise ValueError("fmha: fp8 attention has no backward; call it under torch.no_grad() or without "
                             "requires_grad")
        out, lse, _, _ = _forward(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, sink,
                                  return_lse, return_attn_probs, dropout_seed, dropout_offset, out=out,
                                  q_descale=q_descale, k_descale=k_descale, v_descale=v_descale)
        return (out, lse) if return_lse else out
    if _compiling() and dropout_p == 0 and not return_attn_probs:
        from .torch_ops import attention_op
        o, lse = attention_op(q, k, v, softmax_scale, causal, int(window_size[0]), int(window_size[1]), float(softcap),
                              alibi_slopes, sink, bool(deterministic))
        if out is not None:
            out.copy_(o)
            o = out
        return (o, lse) if return_lse else o
    grad = _wants_grad(q, k, v, sink)
    if not grad and _fast_path_ok(q, k, v, dropout_p, alibi_slopes, sink, return_attn_probs):
        return _fast_forward(q, k, v, softmax_scale, causal, window_size, softcap, return_lse, out)
    if out is not None and grad:
        raise ValueError("fmha: out= is for calls without autograd (the output of a differentiable call is a new "
                         "tensor); call under torch.no_grad() or drop out=")
    if grad and not return_attn_probs:
        from .autograd import attention_autograd
        out, lse = attention_autograd(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                                      deterministic, sink, dropout_seed, dropout_offset)
        return (out, lse) if return_lse else out
    out, lse, mask, _ = _forward(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, sink,
                                 return_lse, return_attn_probs, dropout_seed, dropout_offset, out=out)
    if return_attn_probs:
        return out, lse, mask
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                     softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                     deterministic=False, return_attn_probs=False, return_lse=False, sink=None, seqused_k=None,
                     dropout_seed=None, dropout_offset=0, out=None, block_table=None, kv_layout="NHD"):
    """Attention over packed sequences: q (total_q, heads, head_dim), k, v (total_k,
    heads_k, ...), int32 cu_seqlens (batch + 1) starting at 0; max_seqlen_* bound every
    sequence. lse is (heads, total_q). Otherwise as attention() (under torch.compile:
    torch.ops.fmha.attention_varlen, cu_seqlens as tensors). On a GPU the kernels stay
    inside the tensors whatever cu_seqlens say; FMHA_CHECK_INDEX=1 checks them first
    (docs/semantics.md, "Index data").

    With block_table (batch, max_pages) int32 (FlashAttention's name), k and v are a
    paged cache (num_pages, page_size, heads_k, d) (kv_layout "HND": (num_pages, heads_k,
    page_size, d)) and sequence b's keys are the first seqused_k[b] (default
    cu_seqlens_k[b + 1] - cu_seqlens_k[b]) tokens of its pages: the batch_prefill family
    (chunked prefill: causal aligns bottom-right when a sequence has more keys than
    queries). Inference only: no dropout, no gradients."""
    if block_table is not None:
        return _prefill(q, k, v, cu_seqlens_q, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size,
                        softcap, alibi_slopes, sink, return_lse, out, kv_layout,
                        seqlens_k=seqused_k if seqused_k is not None else _diff(cu_seqlens_k), block_table=block_table,
                        what="attention_varlen with block_table", dropout_p=dropout_p,
                        return_attn_probs=return_attn_probs, grad=_wants_grad(q, k, v, sink))
    if _compiling() and dropout_p == 0 and not return_attn_probs:
        from .torch_ops import attention_varlen_op
        o, lse = attention_varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
                                     seqused_k, softmax_scale, causal, int(window_size[0]), int(window_size[1]),
                                     float(softcap), alibi_slopes, sink, bool(deterministic))
        if out is not None:
            out.copy_(o)
            o = out
        return (o, lse) if return_lse else o
    grad = _wants_grad(q, k, v, sink)
    if out is not None and grad:
        raise ValueError("fmha: out= is for calls without autograd; call under torch.no_grad() or drop out=")
    if grad and not return_attn_probs:
        from .autograd import attention_autograd
        out, lse = attention_autograd(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                                      deterministic, sink, dropout_seed, dropout_offset,
                                      varlen=(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k))
        return (out, lse) if return_lse else out
    out, lse, mask, _ = _forward(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, sink,
                                 return_lse, return_attn_probs, dropout_seed, dropout_offset, cu_seqlens_q, cu_seqlens_k,
                                 max_seqlen_q, max_seqlen_k, seqused_k, out=out)
    if return_attn_probs:
        return out, lse, mask
    return (out, lse) if return_lse else out


def _prefill(q, k_pages, v_pages, cu_seqlens_q, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size,
             softcap, alibi_slopes, sink, return_lse, out, kv_layout, seqlens_k=None, block_table=None,
             kv_indptr=None, kv_indices=None, kv_last_page_len=None, what="", dropout_p=0.0,
             return_attn_probs=False, grad=False):
    """batch_prefill: ragged queries (cu_seqlens_q) over a paged cache, by block table
    (with seqlens_k) or CSR page lists. Returns out or (out, lse (heads, total_q))."""
    if dropout_p or return_attn_probs or grad:
        raise ValueError("fmha: %s is inference only: no dropout, attention probabilities or gradients "
                         "(the batch_prefill family)" % what)
    Q, KP, VP = T.wrap(q, "q"), T.wrap(k_pages, "k"), T.wrap(v_pages, "v")
    if len(Q.dims) != 3 or len(KP.dims) != 4 or len(VP.dims) != 4:
        raise ValueError("fmha: %s takes q (total_q, heads, head_dim) and pages (num_pages, page_size, heads_k, d); "
                         "got %s, %s, %s" % (what, Q.dims, KP.dims, VP.dims))
    hnd = _is_hnd(kv_layout)
    cq = T.index_array(cu_seqlens_q, Q, "cu_seqlens_q")
    B, (H, D) = cq.dims[0] - 1, Q.dims[1:]
    Hk, page, Dv = (KP.dims[1], KP.dims[2], VP.dims[3]) if hnd else (KP.dims[2], KP.dims[1], VP.dims[3])
    csr = block_table is None
    if csr:
        ins = {"kv_indptr": T.index_array(kv_indptr, Q, "kv_indptr"),
               "kv_indices": T.index_array(kv_indices, Q, "kv_indices"),
               "kv_last_page_len": T.index_array(kv_last_page_len, Q, "kv_last_page_len")}
        sk = int(max_seqlen_k) if max_seqlen_k is not None else max(1, ins["kv_indices"].dims[0] * page)
    else:
        ins = {"block_table": T.index_array(block_table, Q, "block_table"),
               "seqlens_kv": T.index_array(seqlens_k, Q, "seqlens_k")}
        sk = int(max_seqlen_k) if max_seqlen_k is not None else ins["block_table"].dims[1] * page
    params = dict(mode=1, batch=B, num_heads_q=H, num_heads_kv=Hk, head_dim_qk=D, head_dim_v=Dv, page_size=page,
                  kv_layout=1 if hnd else 0, kv_lookup=1 if csr else 0, seqlen_q=int(max_seqlen_q), seqlen_kv=sk,
                  scale=0.0 if softmax_scale is None else float(softmax_scale), softcap=float(softcap),
                  **_mask_params(causal, window_size))
    out = _output(Q, out, (Q.dims[0], H, Dv), Q.dtype)
    lse = T.empty(Q, (H, Q.dims[0]), "fp32") if return_lse else None
    ins.update(q=Q, k=KP, v=VP, cu_seqlens_q=cq, alibi_slopes=T.wrap(alibi_slopes, "alibi_slopes", ("fp32",)),
               sink=T.wrap(sink, "sink", ("fp32",)))
    _run("batch_prefill", params, ins, {"o": T.Arr(out, "out"), "lse": T.wrap(lse, "lse", ("fp32",))})
    return (out, lse) if return_lse else out


def _diff(cu):
    """Lengths from cumulative offsets (cu[1:] - cu[:-1]) in the array's own library."""
    if cu is None:
        raise ValueError("fmha: a paged cache needs cu_seqlens_k or seqused_k for the key lengths")
    if isinstance(cu, (list, tuple)):
        return [int(b) - int(a) for a, b in zip(cu[:-1], cu[1:])]
    if T.np is not None and isinstance(cu, T.np.ndarray):
        return (cu[1:].astype(T.np.int64) - cu[:-1]).astype(T.np.int32)
    return (cu[1:] - cu[:-1]).to(T.torch.int32)


def attention_backward(dout, q, k, v, out, lse, dropout_p=0.0, softmax_scale=None, causal=False,
                       window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, sink=None,
                       dropout_seed=0, dropout_offset=0):
    """Gradients of attention(): returns (dq, dk, dv), plus dsink when sink is given.
    out and lse are the forward's; dropout_seed/offset must be the forward's."""
    dq, dk, dv, dsink = _backward(dout, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, sink, deterministic, dropout_seed, dropout_offset)
    return (dq, dk, dv) if dsink is None else (dq, dk, dv, dsink)


def attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                              alibi_slopes=None, deterministic=False, sink=None, seqused_k=None, dropout_seed=0,
                              dropout_offset=0):
    """Gradients of attention_varlen(), as attention_backward()."""
    dq, dk, dv, dsink = _backward(dout, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, sink, deterministic, dropout_seed, dropout_offset, cu_seqlens_q,
                                  cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k)
    return (dq, dk, dv) if dsink is None else (dq, dk, dv, dsink)


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                           cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False,
                           sink=None, kv_layout="NHD", out=None):
    """FlashAttention's flash_attn_with_kvcache. q (batch, seqlen_q, heads, head_dim);
    k_cache/v_cache (batch_cache, seqlen_cache, heads_k, d) or, with block_table
    (batch, max_pages) int32, pages (num_pages, page_size, heads_k, d) (kv_layout "HND":
    (num_pages, heads_k, page_size, d)). With k, v (batch, seqlen_new, heads_k, d) the new
    tokens are written into the cache in place at cache_seqlens (rotated with
    rotary_cos/sin (max_pos, rotary_dim / 2) first; q is rotated too, out of place), then
    attention runs over cache_seqlens + seqlen_new keys. cache_seqlens: int or (batch,)
    int32. num_splits: 0 lets the library choose, 1 disables splitting. out= writes the
    output into a caller array (batch, seqlen_q, heads, head_dim_v)."""
    if cache_leftpad is not None:
        raise ValueError("fmha: cache_leftpad is not supported; pass caches whose sequences start at position 0")
    torch = T.torch
    fast = (k is None and alibi_slopes is None and sink is None and torch is not None and type(q) is torch.Tensor
            and type(k_cache) is torch.Tensor and type(v_cache) is torch.Tensor
            and type(cache_seqlens) is torch.Tensor and cache_seqlens.dtype == torch.int32
            and (cache_batch_idx is None or type(cache_batch_idx) is torch.Tensor)
            and (block_table is None or type(block_table) is torch.Tensor))
    if fast:  # the serving step: a repeated signature is one lookup and one C call
        opt = (cache_batch_idx, block_table)
        key = ("kvcache", q.shape, q.stride(), q.dtype, k_cache.shape, k_cache.stride(), v_cache.shape,
               v_cache.stride(), k_cache.dtype, q.get_device(), k_cache.get_device(), v_cache.get_device(),
               cache_seqlens.shape, cache_seqlens.stride(), cache_seqlens.get_device(),
               tuple(None if x is None else (x.shape, x.stride(), x.dtype, x.get_device()) for x in opt),
               softmax_scale, causal, tuple(window_size), softcap, num_splits, return_softmax_lse, str(kv_layout),
               None if out is None else (out.shape, out.stride(), out.dtype, out.get_device()))
        e = _fast.get(key)
        if e is not None:
            dev = q.get_device()
            o = out if out is not None else torch.empty(e.o_shape, dtype=q.dtype, device=q.device)
            lse = torch.empty(e.lse_shape, dtype=torch.float32, device=q.device) if return_softmax_lse else None
            extra = [cache_seqlens] + [x for x in opt if x is not None]
            _fast_execute(e, q, dev, [q, k_cache, v_cache, o] + ([lse] if lse is not None else []) + extra)
            return (o, lse) if return_softmax_lse else o
    Q, KC, VC = T.wrap(q, "q"), T.wrap(k_cache, "k_cache"), T.wrap(v_cache, "v_cache")
    B, Sq, H, D = Q.dims
    hnd = _is_hnd(kv_layout)
    paged = block_table is not None
    Hk = KC.dims[1] if (paged and hnd) else KC.dims[2]
    Dv = VC.dims[3]
    BT = T.index_array(block_table, Q, "block_table") if paged else None
    page = (KC.dims[2] if hnd else KC.dims[1]) if paged else 0
    capacity = BT.dims[1] * page if paged else KC.dims[1]
    if cache_seqlens is None:
        if paged:
            raise ValueError("fmha: a paged cache (block_table) needs cache_seqlens")
        cache_seqlens = [capacity] * B if k is None else [0] * B
    if isinstance(cache_seqlens, int):
        cache_seqlens = [cache_seqlens] * B
    lens = T.index_array(cache_seqlens, Q, "cache_seqlens")
    idx = T.index_array(cache_batch_idx, Q, "cache_batch_idx")
    mask = _mask_params(causal, window_size)
    base = {"batch": B, "num_heads_q": H, "num_heads_kv": Hk, "head_dim_qk": D, "head_dim_v": Dv,
            "page_size": page, "kv_layout": 1 if hnd else 0}
    q_att = q
    if k is not None:
        snew = T.wrap(k, "k").dims[1]
        q_rot = append_kv_cache(k_cache, v_cache, k, v, cache_seqlens=cache_seqlens, block_table=block_table,
                                cache_batch_idx=cache_batch_idx, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                                rotary_interleaved=rotary_interleaved, q=q if rotary_cos is not None else None,
                                causal=causal, window_size=window_size, kv_layout=kv_layout)
        if q_rot is not None:
            q_att = q_rot
        lens = T.index_array(_plus(cache_seqlens, snew, Q), Q, "cache_seqlens")
    QA = T.wrap(q_att, "q")
    # split-KV for every decode step, paged or not: it packs the query heads of a KV head
    # (K/V read once) and splits long caches; num_splits 0 lets the library choose
    family = "fwd_splitkv"
    params = dict(base, mode=0, seqlen_q=Sq, seqlen_kv=capacity, num_splits=int(num_splits),
                  scale=0.0 if softmax_scale is None else float(softmax_scale), softcap=float(softcap), **mask)
    out = _output(Q, out, (B, Sq, H, Dv), Q.dtype)
    lse = T.empty(Q, (B, H, Sq), "fp32") if return_softmax_lse else None
    ins = {"q": QA, "k": KC, "v": VC, "seqlens_kv": lens, "block_table": BT, "cache_batch_idx": idx,
           "alibi_slopes": T.wrap(alibi_slopes, "alibi_slopes", ("fp32",)), "sink": T.wrap(sink, "sink", ("fp32",))}
    plan = _run(family, params, ins, {"o": T.Arr(out, "out"), "lse": T.wrap(lse, "lse", ("fp32",))})
    if k is None and fast and _PLANS_MAX > 0:  # the next equal call takes the fast path above
        extra = ("seqlens_kv",) + (("cache_batch_idx",) if cache_batch_idx is not None else ()) + \
                (("block_table",) if block_table is not None else ())
        with _fast_lock:
            if len(_fast) >= _PLANS_MAX:
                _fast.clear()
            _fast[key] = _FastEntry(plan, tuple(out.shape), tuple(lse.shape) if lse is not None else None, extra)
    return (out, lse) if return_softmax_lse else out


def append_kv_cache(k_cache, v_cache, k, v, cache_seqlens=None, block_table=None, cache_batch_idx=None,
                    kv_indptr=None, kv_indices=None, kv_last_page_len=None, rotary_cos=None, rotary_sin=None,
                    rotary_interleaved=True, q=None, causal=False, window_size=(-1, -1), kv_layout="NHD"):
    """Write new keys and values into a KV cache in place (the appendkv family; vLLM's
    reshape_and_cache, FlashInfer's append_paged_kv_cache), rotating the keys with RoPE.

    k, v (batch, seqlen_new, heads_k, d). The cache, as attention_with_kvcache takes it:
    contiguous (batch_cache, seqlen_cache, heads_k, d) with cache_seqlens (int or (batch,)
    int32: each sequence's tokens before the append) and optional cache_batch_idx; pages
    (num_pages, page_size, heads_k, d) ("HND": (num_pages, heads_k, page_size, d)) with
    block_table and cache_seqlens; or pages with CSR lists kv_indptr / kv_indices /
    kv_last_page_len, which describe each sequence AFTER the append (FlashInfer's
    convention): its last seqlen_new tokens are the new ones. Token t of sequence b goes
    to position L_b + t. rotary_cos/sin (max_pos, rotary_dim / 2): the first rotary_dim
    dims of each new key are rotated at its position (interleaved pairs (2i, 2i+1), GPT-J,
    or half-rotated (i, i + rotary_dim / 2), GPT-NeoX). With q (batch, seqlen_q, heads, d)
    q is rotated too, out of place, at L_b + i when causal or windowed, else all at L_b
    (flash_attn_with_kvcache's rule), and returned; else returns None. Nothing in the
    cache outside the appended slots changes; a refused call changes nothing."""
    KN, VN, KC, VC = T.wrap(k, "k"), T.wrap(v, "v"), T.wrap(k_cache, "k_cache"), T.wrap(v_cache, "v_cache")
    if len(KN.dims) != 4 or len(VN.dims) != 4 or len(KC.dims) != 4:
        raise ValueError("fmha: k, v are (batch, seqlen_new, heads_k, d) and the cache 4-d; got %s, %s, %s"
                         % (KN.dims, VN.dims, KC.dims))
    hnd = _is_hnd(kv_layout)
    csr = kv_indptr is not None
    paged = csr or block_table is not None
    B, snew, Hk, D = KN.dims
    Q = T.wrap(q, "q") if q is not None else None
    H = Q.dims[2] if Q is not None else Hk
    page = (KC.dims[2] if hnd else KC.dims[1]) if paged else 0
    params = dict(batch=B, num_heads_q=H, num_heads_kv=Hk, head_dim_qk=D, head_dim_v=VN.dims[3], page_size=page,
                  kv_layout=1 if (paged and hnd) else 0, kv_lookup=1 if csr else 0, seqlen_knew=snew,
                  seqlen_q=Q.dims[1] if Q is not None else 1, **_mask_params(causal, window_size))
    ins = {"k_new": KN, "v_new": VN}
    if csr:
        ins.update(kv_indptr=T.index_array(kv_indptr, KN, "kv_indptr"),
                   kv_indices=T.index_array(kv_indices, KN, "kv_indices"),
                   kv_last_page_len=T.index_array(kv_last_page_len, KN, "kv_last_page_len"))
        params["seqlen_kv"] = max(1, ins["kv_indices"].dims[0] * page)
    else:
        if cache_seqlens is None:
            raise ValueError("fmha: append_kv_cache needs cache_seqlens (each sequence's tokens before the append)")
        if isinstance(cache_seqlens, int):
            cache_seqlens = [cache_seqlens] * B
        ins.update(seqlens_kv=T.index_array(cache_seqlens, KN, "cache_seqlens"),
                   block_table=T.index_array(block_table, KN, "block_table"),
                   cache_batch_idx=T.index_array(cache_batch_idx, KN, "cache_batch_idx"))
        params["seqlen_kv"] = ins["block_table"].dims[1] * page if paged else KC.dims[1]
    rot = 0 if rotary_cos is None else 2 * T.Arr(rotary_cos, "rotary_cos").dims[1]
    params.update(rotary_dim=rot, rotary_interleaved=1 if (rot and rotary_interleaved) else 0)
    outs = {"k": KC, "v": VC}
    q_rot = None
    if rot:
        ins["rotary_cos"] = T.Arr(_as_fp32(rotary_cos), "rotary_cos", ("fp32",))
        ins["rotary_sin"] = T.Arr(_as_fp32(rotary_sin), "rotary_sin", ("fp32",))
        if Q is not None:
            q_rot = T.empty(Q, Q.dims, Q.dtype)
            ins["q"] = Q
            outs["q_rot"] = T.Arr(q_rot, "q_rot")
    elif Q is not None:
        raise ValueError("fmha: q is given without rotary_cos/rotary_sin; q is only read to be rotated")
    _run("appendkv", params, ins, outs)
    return q_rot


def attention_paged_csr(q, k_pages, v_pages, kv_indptr, kv_indices, kv_last_page_len, max_seqlen_k=None,
                        softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                        num_splits=0, return_softmax_lse=False, sink=None, kv_layout="NHD", out=None,
                        cu_seqlens_q=None, max_seqlen_q=None):
    """Attention over caches of pages listed FlashInfer/SGLang-style: sequence b owns pages
    kv_indices[kv_indptr[b]:kv_indptr[b+1]] (int32), all full but the last, which holds
    kv_last_page_len[b] tokens (0 for a sequence without pages). q (batch, seqlen_q, heads,
    head_dim); k_pages/v_pages (num_pages, page_size, heads_k, d) ("NHD") or (num_pages,
    heads_k, page_size, d) ("HND"); any page size >= 1 (SGLang's token-level pages are
    page_size 1). max_seqlen_k bounds every sequence (default: every page of kv_indices).
    Causal is aligned bottom-right as in attention_with_kvcache; other arguments as there.

    With cu_seqlens_q (batch + 1) int32 and max_seqlen_q, q is ragged (total_q, heads,
    head_dim), the batch_prefill family (FlashInfer's BatchPrefillWithPagedKVCache); lse is
    then (heads, total_q) and num_splits does not apply."""
    if cu_seqlens_q is not None:
        if max_seqlen_q is None:
            raise ValueError("fmha: ragged queries (cu_seqlens_q) need max_seqlen_q")
        return _prefill(q, k_pages, v_pages, cu_seqlens_q, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                        window_size, softcap, alibi_slopes, sink, return_softmax_lse, out, kv_layout,
                        kv_indptr=kv_indptr, kv_indices=kv_indices, kv_last_page_len=kv_last_page_len,
                        what="attention_paged_csr with cu_seqlens_q")
    Q, KP, VP = T.wrap(q, "q"), T.wrap(k_pages, "k_pages"), T.wrap(v_pages, "v_pages")
    if len(Q.dims) != 4 or len(KP.dims) != 4 or len(VP.dims) != 4:
        raise ValueError("fmha: q is (batch, seqlen_q, heads, head_dim) and the pages 4-d; got %s, %s, %s"
                         % (Q.dims, KP.dims, VP.dims))
    hnd = _is_hnd(kv_layout)
    B, Sq, H, D = Q.dims
    Hk, page, Dv = (KP.dims[1], KP.dims[2], VP.dims[3]) if hnd else (KP.dims[2], KP.dims[1], VP.dims[3])
    ptr, idx, last = (T.index_array(x, Q, n) for x, n in ((kv_indptr, "kv_indptr"), (kv_indices, "kv_indices"),
                                                            (kv_last_page_len, "kv_last_page_len")))
    sk = int(max_seqlen_k) if max_seqlen_k is not None else max(1, idx.dims[0] * page)
    params = dict(batch=B, num_heads_q=H, num_heads_kv=Hk, head_dim_qk=D, head_dim_v=Dv, page_size=page,
                  kv_layout=1 if hnd else 0, kv_lookup=1, mode=0, seqlen_q=Sq, seqlen_kv=sk,
                  num_splits=int(num_splits), scale=0.0 if softmax_scale is None else float(softmax_scale),
                  softcap=float(softcap), **_mask_params(causal, window_size))
    out = _output(Q, out, (B, Sq, H, Dv), Q.dtype)
    lse = T.empty(Q, (B, H, Sq), "fp32") if return_softmax_lse else None
    ins = {"q": Q, "k": KP, "v": VP, "kv_indptr": ptr, "kv_indices": idx, "kv_last_page_len": last,
           "alibi_slopes": T.wrap(alibi_slopes, "alibi_slopes", ("fp32",)), "sink": T.wrap(sink, "sink", ("fp32",))}
    _run("fwd_splitkv", params, ins, {"o": T.Arr(out, "out"), "lse": T.wrap(lse, "lse", ("fp32",))})
    return (out, lse) if return_softmax_lse else out


def _is_hnd(kv_layout):
    """kv_layout "HND" (pages (num_pages, heads_k, page_size, d)) or "NHD"; anything else is refused."""
    name = str(kv_layout).upper()
    if name not in ("NHD", "HND"):
        raise ValueError("fmha: kv_layout %r; expected 'NHD' or 'HND'" % (kv_layout,))
    return name == "HND"


def _as_fp32(x):
    if T.np is not None and isinstance(x, T.np.ndarray):
        return T.np.ascontiguousarray(x, dtype=T.np.float32)
    return x.float().contiguous()


def _plus(lens, n, like):
    """cache_seqlens + n on like's device."""
    if isinstance(lens, (list, tuple)):
        return [int(x) + n for x in lens]
    if T.np is not None and isinstance(lens, T.np.ndarray):
        return (lens.astype(T.np.int32) + n).astype(T.np.int32)
    return (lens.to(T.torch.int32) + n).to(T.torch.int32)
