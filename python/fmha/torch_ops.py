# SPDX-License-Identifier: MIT
"""fmha as PyTorch custom operators (torch.library), so that torch.compile traces
fmha.attention as one graph node instead of breaking the graph at a ctypes call:

    torch.ops.fmha.attention(q, k, v, softmax_scale, causal, window_left, window_right,
                             softcap, alibi_slopes, sink, deterministic) -> (out, lse)
    torch.ops.fmha.attention_backward(dout, q, k, v, out, lse, ...) -> (dq, dk, dv, dsink)
    torch.ops.fmha.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, seqused_k, ...) -> (out, lse)
    torch.ops.fmha.attention_varlen_backward(...) -> (dq, dk, dv, dsink)

Each has a fake (meta) implementation giving the output shapes, and the forward has an
autograd formula through the backward op. fmha.attention calls these while dynamo traces
(fmha.attention._compiling); eager calls do not pay the dispatcher's cost. Needs torch
>= 2.4 (torch.library.custom_op); importing this module on an older torch raises.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .attention import _forward

if not hasattr(torch.library, "custom_op"):
    raise ImportError("fmha.torch_ops needs torch >= 2.4 (torch.library.custom_op); this is torch %s"
                      % torch.__version__)


@torch.library.custom_op("fmha::attention", mutates_args=())
def attention_op(q: Tensor, k: Tensor, v: Tensor, softmax_scale: Optional[float], causal: bool, window_left: int,
                 window_right: int, softcap: float, alibi_slopes: Optional[Tensor], sink: Optional[Tensor],
                 deterministic: bool) -> Tuple[Tensor, Tensor]:
    out, lse, _, _ = _forward(q, k, v, 0.0, softmax_scale, causal, (window_left, window_right), softcap,
                                alibi_slopes, sink, True)
    return out, lse


@attention_op.register_fake
def _attention_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, sink,
                    deterministic):
    b, sq, h, _ = q.shape
    return q.new_empty((b, sq, h, v.shape[3])), q.new_empty((b, h, sq), dtype=torch.float32)


@torch.library.custom_op("fmha::attention_backward", mutates_args=())
def attention_backward_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                          softmax_scale: Optional[float], causal: bool, window_left: int, window_right: int,
                          softcap: float, alibi_slopes: Optional[Tensor], sink: Optional[Tensor],
                          deterministic: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    from .autograd import backward_on_device
    dq, dk, dv, dsink = backward_on_device(dout, q, k, v, out, lse, 0.0, softmax_scale, causal,
                                           (window_left, window_right), softcap, alibi_slopes, sink, deterministic,
                                           0, 0, {})
    return dq, dk, dv, dsink if dsink is not None else q.new_empty((0,), dtype=torch.float32)


@attention_backward_op.register_fake
def _attention_backward_fake(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
                             alibi_slopes, sink, deterministic):
    dsink = torch.empty_like(sink) if sink is not None else q.new_empty((0,), dtype=torch.float32)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), dsink


def _setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, sink, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, sink, alibi_slopes)
    ctx.scalars = (softmax_scale, causal, window_left, window_right, softcap, deterministic)
    ctx.has_sink = sink is not None
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    q, k, v, out, lse, sink, alibi_slopes = ctx.saved_tensors
    softmax_scale, causal, window_left, window_right, softcap, deterministic = ctx.scalars
    dq, dk, dv, dsink = attention_backward_op(dout.contiguous(), q, k, v, out, lse, softmax_scale, causal, window_left,
                                              window_right, softcap, alibi_slopes, sink, deterministic)
    return dq, dk, dv, None, None, None, None, None, None, (dsink if ctx.has_sink else None), None


attention_op.register_autograd(_backward, setup_context=_setup_context)


# ------------------------------------------------------------------ varlen


@torch.library.custom_op("fmha::attention_varlen", mutates_args=())
def attention_varlen_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                        max_seqlen_q: int, max_seqlen_k: int, seqused_k: Optional[Tensor],
                        softmax_scale: Optional[float], causal: bool, window_left: int, window_right: int,
                        softcap: float, alibi_slopes: Optional[Tensor], sink: Optional[Tensor],
                        deterministic: bool) -> Tuple[Tensor, Tensor]:
    out, lse, _, _ = _forward(q, k, v, 0.0, softmax_scale, causal, (window_left, window_right), softcap,
                              alibi_slopes, sink, True, False, None, 0, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, seqused_k)
    return out, lse


@attention_varlen_op.register_fake
def _attention_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, softmax_scale,
                           causal, window_left, window_right, softcap, alibi_slopes, sink, deterministic):
    total, h, _ = q.shape
    return q.new_empty((total, h, v.shape[2])), q.new_empty((h, total), dtype=torch.float32)


@torch.library.custom_op("fmha::attention_varlen_backward", mutates_args=())
def attention_varlen_backward_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                                 cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                                 seqused_k: Optional[Tensor], softmax_scale: Optional[float], causal: bool,
                                 window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
                                 sink: Optional[Tensor], deterministic: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    from .autograd import backward_on_device
    extra = dict(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                 max_seqlen_k=max_seqlen_k, seqused_k=seqused_k)
    dq, dk, dv, dsink = backward_on_device(dout, q, k, v, out, lse, 0.0, softmax_scale, causal,
                                           (window_left, window_right), softcap, alibi_slopes, sink, deterministic,
                                           0, 0, extra)
    return dq, dk, dv, dsink if dsink is not None else q.new_empty((0,), dtype=torch.float32)


@attention_varlen_backward_op.register_fake
def _attention_varlen_backward_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    seqused_k, softmax_scale, causal, window_left, window_right, softcap,
                                    alibi_slopes, sink, deterministic):
    dsink = torch.empty_like(sink) if sink is not None else q.new_empty((0,), dtype=torch.float32)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), dsink


def _setup_varlen(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, max_q, max_k, used_k, softmax_scale, causal, window_left, window_right, softcap,
     alibi_slopes, sink, deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, used_k, sink, alibi_slopes)
    ctx.scalars = (max_q, max_k, softmax_scale, causal, window_left, window_right, softcap, deterministic)
    ctx.has_sink = sink is not None
    ctx.mark_non_differentiable(lse)


def _backward_varlen(ctx, dout, _dlse):
    q, k, v, out, lse, cu_q, cu_k, used_k, sink, alibi_slopes = ctx.saved_tensors
    max_q, max_k, softmax_scale, causal, window_left, window_right, softcap, deterministic = ctx.scalars
    dq, dk, dv, dsink = attention_varlen_backward_op(dout.contiguous(), q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                                                     used_k, softmax_scale, causal, window_left, window_right, softcap,
                                                     alibi_slopes, sink, deterministic)
    return (dq, dk, dv) + (None,) * 11 + ((dsink if ctx.has_sink else None), None)


attention_varlen_op.register_autograd(_backward_varlen, setup_context=_setup_varlen)
