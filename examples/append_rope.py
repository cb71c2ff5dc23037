# SPDX-License-Identifier: MIT
"""Append new keys to a contiguous cache with rotary embeddings (GPT-NeoX halves)."""
import numpy as np

import _path  # noqa: F401
import fmha

rng = np.random.default_rng(3)
b, s_new, heads, dim, smax, rot = 2, 4, 4, 64, 128, 64
angles = np.arange(smax)[:, None] * 10000.0 ** (-2.0 * np.arange(rot // 2) / rot)
cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
k_cache = np.zeros((b, smax, heads, dim), np.float32)
v_cache = np.zeros((b, smax, heads, dim), np.float32)
q = rng.standard_normal((b, s_new, heads, dim)).astype(np.float32)
k = rng.standard_normal((b, s_new, heads, dim)).astype(np.float32)
v = rng.standard_normal((b, s_new, heads, dim)).astype(np.float32)
out = fmha.attention_with_kvcache(q, k_cache, v_cache, k=k, v=v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=[10, 0],
                                  causal=True, rotary_interleaved=False)
print("out", out.shape, "cache rows written:", int((np.abs(k_cache).sum(axis=(2, 3)) > 0).sum()))
