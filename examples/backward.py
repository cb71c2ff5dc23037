# SPDX-License-Identifier: MIT
"""Gradients of attention (CPU backend): dq, dk, dv and the sink logits' gradient."""
import numpy as np

import _path  # noqa: F401
import fmha

rng = np.random.default_rng(4)
q = rng.standard_normal((2, 33, 4, 32)).astype(np.float32)
k = rng.standard_normal((2, 65, 2, 32)).astype(np.float32)
v = rng.standard_normal((2, 65, 2, 32)).astype(np.float32)
sink = rng.standard_normal(4).astype(np.float32)
out, lse = fmha.attention(q, k, v, causal=True, sink=sink, return_lse=True)
dout = rng.standard_normal(out.shape).astype(np.float32)
dq, dk, dv, dsink = fmha.attention_backward(dout, q, k, v, out, lse, causal=True, sink=sink, deterministic=True)
print("dq", dq.shape, "dk", dk.shape, "dv", dv.shape, "dsink", dsink)
