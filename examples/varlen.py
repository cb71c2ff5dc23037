# SPDX-License-Identifier: MIT
"""Packed variable-length sequences: cu_seqlens instead of padding."""
import numpy as np

import _path  # noqa: F401
import fmha

lens = [5, 0, 17, 64]
cu = np.cumsum([0] + lens).astype(np.int32)
rng = np.random.default_rng(1)
q = rng.standard_normal((cu[-1], 4, 32)).astype(np.float32)  # (total, heads, head_dim)
k = rng.standard_normal((cu[-1], 4, 32)).astype(np.float32)
v = rng.standard_normal((cu[-1], 4, 32)).astype(np.float32)
out = fmha.attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=True)
print("packed out", out.shape)
