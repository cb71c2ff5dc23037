# SPDX-License-Identifier: MIT
"""Bad inputs get a precise TypeError / ValueError / FmhaError, never a crash."""
import numpy as np
import pytest

import fmha


def t(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def test_dtypes_and_kinds():
    with pytest.raises(TypeError, match="q has NumPy dtype float64; expected float32 or float16"):
        fmha.attention(t(1, 4, 2, 8, dtype=np.float64), t(1, 4, 2, 8), t(1, 4, 2, 8))
    with pytest.raises(TypeError, match="k is a list; expected a NumPy array or a torch tensor"):
        fmha.attention(t(1, 4, 2, 8), [[0.0]], t(1, 4, 2, 8))
    with pytest.raises(TypeError, match="alibi_slopes has dtype fp16; expected fp32"):
        fmha.attention(t(1, 4, 2, 8), t(1, 4, 2, 8), t(1, 4, 2, 8), alibi_slopes=t(2, dtype=np.float16))
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule dtype.supported\] tensor k has dtype fp16"):
        fmha.attention(t(1, 4, 2, 8), t(1, 4, 2, 8, dtype=np.float16), t(1, 4, 2, 8))


def test_shapes_and_layouts():
    with pytest.raises(ValueError, match="q, k, v are \\(batch, seqlen, heads, head_dim\\)"):
        fmha.attention(t(4, 2, 8), t(1, 4, 2, 8), t(1, 4, 2, 8))
    x = t(1, 4, 2, 16)[..., ::2]  # last dim stride 2
    with pytest.raises(ValueError, match="contiguous last dimension"):
        fmha.attention(x, t(1, 4, 2, 8), t(1, 4, 2, 8))
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule heads.gqa\]"):
        fmha.attention(t(1, 4, 3, 8), t(1, 4, 2, 8), t(1, 4, 2, 8))
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule hdim.shape\]"):
        fmha.attention(t(1, 4, 2, 12), t(1, 4, 2, 12), t(1, 4, 2, 12))


def test_bad_varlen_content_is_caught_at_execute():
    q = t(5, 2, 8)
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule varlen.cu_seqlens\] cu_seqlens_q is decreasing"):
        fmha.attention_varlen(q, q, q, [0, 4, 3], [0, 2, 5], 4, 4)
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule varlen.max_seqlen\]"):
        fmha.attention_varlen(q, q, q, [0, 5], [0, 5], 4, 5)


def test_kvcache_errors():
    q, kc = t(1, 1, 2, 8), t(1, 16, 2, 8)
    with pytest.raises(ValueError, match="cache_leftpad is not supported"):
        fmha.attention_with_kvcache(q, kc, kc, cache_leftpad=[0])
    with pytest.raises(ValueError, match="kv_layout 'XYZ'"):
        fmha.attention_with_kvcache(q, kc, kc, kv_layout="XYZ")
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule paged.index\] block_table\[0\]\[0\] = 7"):
        fmha.attention_with_kvcache(q, t(2, 4, 2, 8), t(2, 4, 2, 8), cache_seqlens=3,
                                    block_table=np.array([[7]], np.int32))
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule cache.seqlens\]"):
        fmha.attention_with_kvcache(q, kc, kc, cache_seqlens=17)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown tensor role 'qq'"):
        fmha.Problem().tensor("qq", "fp32", (1,))
    with pytest.raises(ValueError, match="unknown dtype"):
        fmha.Problem().tensor("q", "fp64", (1,))
    with pytest.raises(ValueError, match="backend 'tpu'"):
        fmha.Context("tpu")
