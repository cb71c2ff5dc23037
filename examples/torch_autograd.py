# SPDX-License-Identifier: MIT
"""fmha.attention trains: torch tensors that require grad go through fmha's backward."""
import torch

import _path  # noqa: F401
import fmha

q = torch.randn(2, 64, 8, 64, requires_grad=True)
k = torch.randn(2, 64, 2, 64, requires_grad=True)
v = torch.randn(2, 64, 2, 64, requires_grad=True)
out = fmha.attention(q, k, v, causal=True)
out.square().mean().backward()
print("grad norms", q.grad.norm().item(), k.grad.norm().item(), v.grad.norm().item())
