# SPDX-License-Identifier: MIT
"""A serving engine's prefill step over a paged KV cache: write each prompt chunk's keys
(rotated, GPT-NeoX halves) and values into its pages with append_kv_cache, then attend
the ragged query chunks to everything in their pages with attention_varlen(block_table=)
(batch prefill; chunked prefill: causal aligns bottom-right)."""
import numpy as np

import _path  # noqa: F401
import fmha

rng = np.random.default_rng(5)
heads, heads_k, dim, page = 8, 2, 64, 16
cached = [40, 0, 7]   # tokens already in each sequence's pages
chunk = [9, 30, 1]    # this step's new tokens per sequence
total = [c + n for c, n in zip(cached, chunk)]
pages_of = [(t + page - 1) // page for t in total]
pool = sum(pages_of) + 2
k_pages = np.zeros((pool, page, heads_k, dim), np.float32)
v_pages = np.zeros((pool, page, heads_k, dim), np.float32)
table = np.zeros((3, max(pages_of)), np.int32)
order, at = rng.permutation(pool), 0
for s, n in enumerate(pages_of):
    table[s, :n] = order[at:at + n]
    at += n
angles = np.arange(256)[:, None] * 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)

# the new tokens, padded to the longest chunk for append_kv_cache; q packed for the prefill
width = max(chunk)
k_new = rng.standard_normal((3, width, heads_k, dim)).astype(np.float32)
v_new = rng.standard_normal((3, width, heads_k, dim)).astype(np.float32)
q_pad = rng.standard_normal((3, width, heads, dim)).astype(np.float32)
for s in range(3):  # append sequence by sequence: each writes its own chunk length
    q_rot = fmha.append_kv_cache(k_pages, v_pages, k_new[s:s + 1, :chunk[s]], v_new[s:s + 1, :chunk[s]],
                                 cache_seqlens=[cached[s]], block_table=table[s:s + 1], rotary_cos=cos,
                                 rotary_sin=sin, rotary_interleaved=False, q=q_pad[s:s + 1, :chunk[s]], causal=True)
    q_pad[s, :chunk[s]] = q_rot[0]
q = np.concatenate([q_pad[s, :chunk[s]] for s in range(3)])
cu_q = np.concatenate([[0], np.cumsum(chunk)]).astype(np.int32)
cu_k = np.concatenate([[0], np.cumsum(total)]).astype(np.int32)
out = fmha.attention_varlen(q, k_pages, v_pages, cu_q, cu_k, max(chunk), max(total), causal=True, block_table=table)
print("out", out.shape, "keys per sequence", total)
