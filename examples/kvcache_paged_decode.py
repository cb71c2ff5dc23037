# SPDX-License-Identifier: MIT
"""Decode over a paged KV cache (vLLM block table), appending this step's token first."""
import numpy as np

import _path  # noqa: F401
import fmha

rng = np.random.default_rng(2)
batch, heads, heads_k, dim, page = 3, 8, 2, 64, 16
k_cache = rng.standard_normal((64, page, heads_k, dim)).astype(np.float16)  # 64 pages
v_cache = rng.standard_normal((64, page, heads_k, dim)).astype(np.float16)
block_table = rng.permutation(64)[: batch * 8].reshape(batch, 8).astype(np.int32)  # 8 pages each
cache_seqlens = np.array([100, 3, 47], np.int32)  # tokens already in the cache
q = rng.standard_normal((batch, 1, heads, dim)).astype(np.float16)
k_new = rng.standard_normal((batch, 1, heads_k, dim)).astype(np.float16)
v_new = rng.standard_normal((batch, 1, heads_k, dim)).astype(np.float16)
out = fmha.attention_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=cache_seqlens,
                                  block_table=block_table, causal=True, num_splits=4)
print("decode out", out.shape, "- the new tokens are now in their pages")
