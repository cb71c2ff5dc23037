# SPDX-License-Identifier: MIT
"""fmha: fused multi-head attention (a C library with a kernel registry and dispatcher).

FlashAttention-style entry points:
    fmha.attention(q, k, v, causal=True)                  # (batch, seqlen, heads, dim)
    fmha.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    fmha.attention_with_kvcache(q, k_cache, v_cache, k=..., v=..., cache_seqlens=..., block_table=...)
    fmha.attention_varlen(q, k_pages, v_pages, ..., block_table=...)   # batch prefill over pages
    fmha.attention_paged_csr(q, k_pages, v_pages, kv_indptr, kv_indices, kv_last_page_len[, cu_seqlens_q=...])
    fmha.append_kv_cache(k_cache, v_cache, k, v, cache_seqlens=..., rotary_cos=..., rotary_sin=...)
    fmha.attention_backward(dout, q, k, v, out, lse, ...)
NumPy arrays run on the CPU backend; PyTorch CUDA tensors on the GPU, zero-copy, on the
current stream. The dispatcher level: Context, Problem, Plan, KernelSet, build().
Errors raise FmhaError subclasses carrying the library's status name and message.
"""
from ._lib import LIBRARY_PATH, LIBRARY_VERSION, PACKAGE_VERSION as __version__
from .attention import (append_kv_cache, attention, attention_backward, attention_paged_csr, attention_varlen,
                        attention_varlen_backward, attention_with_kvcache, context_for, plan_cache_clear,
                        plan_cache_info)
from .dispatch import Context, KernelSet, Plan, Problem, build, build_info, enumerate_kernels
from .errors import FmhaError, InvalidProblemError, NotCompiledError, NotSupportedError

__all__ = ["attention", "attention_varlen", "attention_with_kvcache", "attention_paged_csr", "append_kv_cache",
           "attention_backward",
           "attention_varlen_backward", "Context", "Problem", "Plan", "KernelSet", "build", "build_info",
           "enumerate_kernels", "context_for", "plan_cache_info", "plan_cache_clear", "FmhaError", "InvalidProblemError", "NotSupportedError",
           "NotCompiledError", "LIBRARY_PATH", "LIBRARY_VERSION", "__version__"]
