# SPDX-License-Identifier: MIT
"""Causal GQA attention on NumPy arrays (CPU backend), FlashAttention's argument names."""
import numpy as np

import _path  # noqa: F401  (finds the package in this checkout)
import fmha

rng = np.random.default_rng(0)
q = rng.standard_normal((2, 128, 8, 64)).astype(np.float16)  # (batch, seqlen, heads, head_dim)
k = rng.standard_normal((2, 256, 2, 64)).astype(np.float16)  # 2 KV heads: GQA 4:1
v = rng.standard_normal((2, 256, 2, 64)).astype(np.float16)
out, lse = fmha.attention(q, k, v, causal=True, window_size=(64, 0), softcap=30.0, return_lse=True)
print("out", out.shape, out.dtype, "lse", lse.shape, "finite rows", np.isfinite(lse).mean())
