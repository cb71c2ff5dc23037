# SPDX-License-Identifier: MIT
"""NumPy references in float64, written from REFERENCE.md independently of the library:
attention (GQA, bottom-right/top-left windows, sink tokens, ALiBi, soft-cap, sink
logits, dropout keep masks), its gradients, and RoPE."""
import numpy as np


def visible(sq, sk, left, right, align_bottom_right=True, sink_tokens=0):
    d = sk - sq if align_bottom_right else 0
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    ok_right = (right < 0) | (j <= i + d + right)
    ok_left = (left < 0) | (j >= i + d - left)
    return ok_right & (ok_left | (j < sink_tokens))


def scores(q, k, scale, softcap, alibi, h, b, sq, sk):
    """q (sq, d), k (sk, d) of one (b, h) -> s (sq, sk) and d(softcap)/dx."""
    x = scale * q @ k.T
    dcap = np.ones_like(x)
    if softcap > 0:
        t = np.tanh(x / softcap)
        x, dcap = softcap * t, 1 - t * t
    if alibi is not None:
        slope = alibi[h] if alibi.ndim == 1 else alibi[b, h]
        i = np.arange(sq)[:, None]
        j = np.arange(sk)[None, :]
        x = x - slope * np.abs(i + sk - sq - j)
    return x, dcap


def attention(q, k, v, causal=False, window=(-1, -1), scale=None, softcap=0.0, alibi=None, sink=None, keep=None,
              p_drop=0.0, lowp=None):
    """q (B, Sq, H, D), k/v (B, Sk, Hk, D). keep (B, H, Sq, Sk) 0/1 for dropout. In float64,
    or with lowp (e.g. np.float16) the kernel's precision: float32 math, P and out
    rounded to lowp. Returns out (B, Sq, H, Dv), lse (B, H, Sq)."""
    acc = np.float64 if lowp is None else np.float32
    q, k, v = (np.asarray(x).astype(acc) for x in (q, k, v))
    B, Sq, H, D = q.shape
    Sk, Hk, Dv = k.shape[1], k.shape[2], v.shape[3]
    scale = 1 / np.sqrt(D) if scale is None else scale
    left, right = window
    if causal:
        right = 0
    out = np.zeros((B, Sq, H, Dv))
    lse = np.full((B, H, Sq), -np.inf)
    for b in range(B):
        for h in range(H):
            hk = h // (H // Hk)
            s, _ = scores(q[b, :, h], k[b, :, hk], scale, softcap, alibi, h, b, Sq, Sk)
            s = np.where(visible(Sq, Sk, left, right), s, -np.inf)
            m = s.max(axis=1)
            if sink is not None:
                m = np.maximum(m, sink[h])
            for i in range(Sq):
                if m[i] == -np.inf:
                    continue
                e = np.exp(s[i] - m[i])
                tot = e.sum() + (np.exp(sink[h] - m[i]) if sink is not None else 0.0)
                p = e / tot
                lse[b, h, i] = m[i] + np.log(tot)
                if keep is not None:
                    p = p * keep[b, h, i] / (1 - p_drop)
                if lowp is not None:
                    p = p.astype(lowp).astype(acc)
                out[b, i, h] = p @ v[b, :, hk]
    if lowp is not None:
        out = out.astype(lowp).astype(np.float64)
    return out, lse


def check_rule(got, q, k, v, factor=2.0, **kw):
    """REFERENCE.md's accuracy rule for attention(): returns (ok, error, tolerance)."""
    ref, _ = attention(q, k, v, **kw)
    low, _ = attention(q, k, v, lowp=np.asarray(q).dtype.type if np.asarray(q).dtype != np.float32 else np.float32, **kw)
    err = np.abs(np.asarray(got, np.float64) - ref).max()
    tol = factor * np.abs(low - ref).max() + 1e-5
    return bool(np.isfinite(got).all() and err <= tol), err, tol


def attention_grads(q, k, v, dout, causal=False, window=(-1, -1), scale=None, softcap=0.0, alibi=None, sink=None,
                    keep=None, p_drop=0.0):
    """Gradients of sum(dout * out) in float64: dq, dk, dv, dsink."""
    q, k, v, dout = (np.asarray(x, np.float64) for x in (q, k, v, dout))
    B, Sq, H, D = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    scale = 1 / np.sqrt(D) if scale is None else scale
    left, right = window
    if causal:
        right = 0
    out, lse = attention(q, k, v, causal, window, scale, softcap, alibi, sink, keep, p_drop)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    dsink = np.zeros(H) if sink is not None else None
    for b in range(B):
        for h in range(H):
            hk = h // (H // Hk)
            s, dcap = scores(q[b, :, h], k[b, :, hk], scale, softcap, alibi, h, b, Sq, Sk)
            vis = visible(Sq, Sk, left, right)
            L = lse[b, h][:, None]
            p = np.where(vis & np.isfinite(L), np.exp(np.where(vis, s, 0) - np.where(np.isfinite(L), L, 0)), 0.0)
            z = keep[b, h] / (1 - p_drop) if keep is not None else 1.0
            Di = (dout[b, :, h] * out[b, :, h]).sum(axis=1)
            dp = dout[b, :, h] @ v[b, :, hk].T
            ds = p * (dp * z - Di[:, None])
            dq[b, :, h] += scale * (ds * dcap) @ k[b, :, hk]
            dk[b, :, hk] += scale * (ds * dcap).T @ q[b, :, h]
            dv[b, :, hk] += (p * z).T @ dout[b, :, h]
            if sink is not None:
                ps = np.where(np.isfinite(lse[b, h]), np.exp(sink[h] - lse[b, h]), 0.0)
                dsink[h] -= (ps * Di).sum()
    return dq, dk, dv, dsink


def rope(x, pos, cos, sin, interleaved):
    """Rotate the first 2*cos.shape[1] dims of x (..., D) at positions pos (broadcast)."""
    x = np.array(x, np.float64)
    half = cos.shape[1]
    c, s = np.asarray(cos, np.float64)[pos], np.asarray(sin, np.float64)[pos]
    if interleaved:
        x0, x1 = x[..., 0:2 * half:2].copy(), x[..., 1:2 * half:2].copy()
        x[..., 0:2 * half:2], x[..., 1:2 * half:2] = x0 * c - x1 * s, x0 * s + x1 * c
    else:
        x0, x1 = x[..., :half].copy(), x[..., half:2 * half].copy()
        x[..., :half], x[..., half:2 * half] = x0 * c - x1 * s, x0 * s + x1 * c
    return x
