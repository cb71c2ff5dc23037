# SPDX-License-Identifier: MIT
"""fmha.attention_backward / attention_varlen_backward on NumPy arrays against the
float64 NumPy gradients (REFERENCE.md "Backward"), every feature."""
import numpy as np
import pytest

import fmha
import reference as R

rng = np.random.default_rng(5)


def rand(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def close(got, ref, tol=2e-5):
    if np.asarray(ref).size == 0:
        return np.asarray(got).size == 0, 0.0
    err = np.abs(np.asarray(got, np.float64) - ref).max()
    return err <= tol * max(1.0, np.abs(ref).max()), err


@pytest.mark.parametrize("kw", [
    dict(),
    dict(causal=True),
    dict(window=(3, 1)),
    dict(softcap=2.0),
    dict(alibi=True, causal=True),
    dict(sink=True),
    dict(dropout=0.3),
], ids=["plain", "causal", "window", "softcap", "alibi", "sink", "dropout"])
def test_grads(kw):
    b, sq, sk, h, hk, d = 2, 9, 13, 4, 2, 16
    q, k, v, dout = rand(b, sq, h, d), rand(b, sk, hk, d), rand(b, sk, hk, d), rand(b, sq, h, d)
    slopes = (2.0 ** -np.arange(1, h + 1)).astype(np.float32) if kw.get("alibi") else None
    sink = rand(h) if kw.get("sink") else None
    p = kw.get("dropout", 0.0)
    window = kw.get("window", (-1, -1))
    causal = kw.get("causal", False)
    softcap = kw.get("softcap", 0.0)
    res = fmha.attention(q, k, v, dropout_p=p, causal=causal, window_size=window, softcap=softcap, alibi_slopes=slopes,
                         sink=sink, dropout_seed=11, return_attn_probs=True)
    out, lse, keep = res
    grads = fmha.attention_backward(dout, q, k, v, out, lse, dropout_p=p, causal=causal, window_size=window,
                                    softcap=softcap, alibi_slopes=slopes, sink=sink, dropout_seed=11)
    ref = R.attention_grads(q, k, v, dout, causal=causal, window=window, softcap=softcap, alibi=slopes, sink=sink,
                            keep=keep if p > 0 else None, p_drop=p)
    for name, g, r in zip(("dq", "dk", "dv", "dsink"), grads, ref):
        if r is None:
            continue
        ok, err = close(g, r)
        assert ok, (name, err)


def test_varlen_grads_and_determinism():
    lens_q, lens_k = [4, 0, 7], [6, 3, 9]
    h, hk, d = 2, 1, 16
    cu_q, cu_k = np.cumsum([0] + lens_q).astype(np.int32), np.cumsum([0] + lens_k).astype(np.int32)
    q, k, v = rand(cu_q[-1], h, d), rand(cu_k[-1], hk, d), rand(cu_k[-1], hk, d)
    dout = rand(cu_q[-1], h, d)
    out, lse = fmha.attention_varlen(q, k, v, cu_q, cu_k, 7, 9, causal=True, return_lse=True)
    dq, dk, dv = fmha.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, 7, 9, causal=True,
                                                deterministic=True)
    again = fmha.attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, 7, 9, causal=True, deterministic=True)
    assert all(np.array_equal(a, b) for a, b in zip((dq, dk, dv), again))
    for i in range(3):
        sl_q, sl_k = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        rq, rk, rv, _ = R.attention_grads(q[None, sl_q], k[None, sl_k], v[None, sl_k], dout[None, sl_q], causal=True)
        for g, r in ((dq[sl_q], rq[0]), (dk[sl_k], rk[0]), (dv[sl_k], rv[0])):
            ok, err = close(g, r)
            assert ok, (i, err)
