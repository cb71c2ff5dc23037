# SPDX-License-Identifier: MIT
"""torch.autograd integration: fmha.attention / attention_varlen on tensors that require
grad run through AttentionFunction, whose backward is fmha's, on the tensors' device
(the CUDA backend's backward kernels for CUDA tensors: no host copy)."""
import torch

from .attention import _backward, _forward


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, sink, opts):
        (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, seed, offset,
         varlen) = opts
        extra = {}
        if varlen is not None:
            extra = dict(cu_seqlens_q=varlen[0], cu_seqlens_k=varlen[1], max_seqlen_q=varlen[2],
                         max_seqlen_k=varlen[3], seqused_k=varlen[4])
        # _forward returns the dropout seed it used (drawn when none was given): the backward needs it
        out, lse, _, seed = _forward(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                                     sink, True, False, seed, offset, **extra)
        ctx.save_for_backward(q, k, v, out, lse, sink)
        ctx.opts = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, seed, offset,
                    extra)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse, sink = ctx.saved_tensors
        dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, seed, offset, extra = ctx.opts
        dq, dk, dv, dsink = backward_on_device(dout.contiguous(), q, k, v, out, lse, dropout_p, softmax_scale, causal,
                                               window_size, softcap, alibi_slopes, sink, deterministic, seed or 0,
                                               offset, extra)
        return dq, dk, dv, dsink, None


def backward_on_device(dout, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                       sink, deterministic, seed, offset, extra):
    """fmha's backward of tensors on q's device: (dq, dk, dv, dsink or None). extra: the
    varlen arguments of _backward."""
    return _backward(dout, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                     sink, deterministic, seed, offset, **extra)


def attention_autograd(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                       sink, seed, offset, varlen=None):
    opts = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, seed, offset, varlen)
    return AttentionFunction.apply(q, k, v, sink, opts)
