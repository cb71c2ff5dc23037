# SPDX-License-Identifier: MIT
"""fmha.attention and attention_varlen on NumPy arrays (CPU backend) against the NumPy
reference, with REFERENCE.md's accuracy rule: GQA, windows, ALiBi, soft-cap, sinks,
dropout and odd shapes."""
import numpy as np
import pytest

import fmha
import reference as R

rng = np.random.default_rng(1234)


def rand(*shape, dtype=np.float32):
    return rng.uniform(-1, 1, size=shape).astype(dtype)


CASES = [
    # b, sq, sk, h, hk, d, dv
    (1, 1, 1, 1, 1, 8, 8),
    (2, 17, 33, 4, 2, 32, 32),
    (3, 33, 17, 6, 1, 40, 24),
    (2, 64, 64, 8, 8, 64, 64),
    (1, 5, 130, 4, 4, 16, 16),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", CASES)
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (False, (5, 2)), (True, (3, -1))])
def test_attention_masks_and_shapes(dtype, shape, causal, window):
    b, sq, sk, h, hk, d, dv = shape
    q, k, v = rand(b, sq, h, d, dtype=dtype), rand(b, sk, hk, d, dtype=dtype), rand(b, sk, hk, dv, dtype=dtype)
    out, lse = fmha.attention(q, k, v, causal=causal, window_size=window, return_lse=True)
    assert out.dtype == dtype and out.shape == (b, sq, h, dv) and lse.shape == (b, h, sq)
    ok, err, tol = R.check_rule(out, q, k, v, causal=causal, window=window)
    assert ok, (err, tol)
    _, ref_lse = R.attention(q, k, v, causal=causal, window=window)
    fin = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), fin)  # rows without keys: -inf
    assert np.abs(lse[fin] - ref_lse[fin]).max() < 1e-4


@pytest.mark.parametrize("alibi_shape", ["h", "bh"])
def test_alibi_softcap_scale(alibi_shape):
    b, sq, sk, h, hk, d = 2, 19, 23, 4, 2, 32
    q, k, v = rand(b, sq, h, d), rand(b, sk, hk, d), rand(b, sk, hk, d)
    slopes = (2.0 ** -np.arange(1, h + 1)).astype(np.float32)
    if alibi_shape == "bh":
        slopes = np.stack([slopes, slopes * 0.5])
    out = fmha.attention(q, k, v, causal=True, alibi_slopes=slopes, softcap=5.0, softmax_scale=0.3)
    ok, err, tol = R.check_rule(out, q, k, v, causal=True, alibi=slopes, softcap=5.0, scale=0.3)
    assert ok, (err, tol)


def test_sink_logits():
    b, sq, sk, h, d = 2, 9, 40, 4, 16
    q, k, v = rand(b, sq, h, d), rand(b, sk, 2, d), rand(b, sk, 2, d)
    sink = rand(h) * 3
    out, lse = fmha.attention(q, k, v, window_size=(4, 0), sink=sink, return_lse=True)
    ok, err, tol = R.check_rule(out, q, k, v, window=(4, 0), sink=sink)
    assert ok, (err, tol)


def test_dropout_mask_and_output():
    b, sq, sk, h, d = 2, 11, 29, 2, 16
    q, k, v = rand(b, sq, h, d), rand(b, sk, h, d), rand(b, sk, h, d)
    out, lse, keep = fmha.attention(q, k, v, dropout_p=0.25, dropout_seed=7, return_attn_probs=True)
    assert keep.dtype == np.uint8 and keep.shape == (b, h, sq, sk)
    assert 0.6 < keep.mean() < 0.9  # keep probability 0.75
    ok, err, tol = R.check_rule(out, q, k, v, keep=keep, p_drop=0.25)
    assert ok, (err, tol)
    out2 = fmha.attention(q, k, v, dropout_p=0.25, dropout_seed=7)
    assert np.array_equal(out, out2)  # same seed, same mask


def test_varlen_matches_per_sequence():
    lens_q, lens_k = [5, 0, 17], [9, 4, 30]
    h, hk, d = 4, 2, 32
    cu_q, cu_k = np.cumsum([0] + lens_q).astype(np.int32), np.cumsum([0] + lens_k).astype(np.int32)
    q, k, v = rand(cu_q[-1], h, d), rand(cu_k[-1], hk, d), rand(cu_k[-1], hk, d)
    out, lse = fmha.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True, return_lse=True)
    assert out.shape == (cu_q[-1], h, d) and lse.shape == (h, cu_q[-1])
    for i in range(3):
        if lens_q[i] == 0:
            continue
        qs, ks, vs = (x[None, c[i]:c[i + 1]] for x, c in ((q, cu_q), (k, cu_k), (v, cu_k)))
        ok, err, tol = R.check_rule(out[None, cu_q[i]:cu_q[i + 1]], qs, ks, vs, factor=3.0, causal=True)
        assert ok, (i, err, tol)


def test_strided_views_and_lists():
    qkv = rand(2, 13, 3, 4, 32)  # packed qkv: q = qkv[:, :, 0]
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    out = fmha.attention(q, k, v, causal=True)
    ok, err, tol = R.check_rule(out, q, k, v, causal=True)
    assert ok, (err, tol)
    cu = [0, 6, 13]
    flat_q = np.ascontiguousarray(q.reshape(26, 4, 32))
    flat_k = np.ascontiguousarray(k.reshape(26, 4, 32))
    flat_v = np.ascontiguousarray(v.reshape(26, 4, 32))
    o2 = fmha.attention_varlen(flat_q, flat_k, flat_v, cu, cu, 7, 7)  # python lists as cu_seqlens
    assert o2.shape == (26, 4, 32)
