# SPDX-License-Identifier: MIT
"""The dispatcher level: describe a problem, see which kernel each stage would use on an
H100 (a virtual sm90 context), and run it on the CPU."""
import _path  # noqa: F401
import fmha

p = fmha.Problem(family="fwd", batch=2, num_heads_q=8, num_heads_kv=8, seqlen_q=1024, seqlen_kv=1024,
                 head_dim_qk=128, head_dim_v=128, mask="b")
for role, dims in (("q", (2, 1024, 8, 128)), ("k", (2, 1024, 8, 128)), ("v", (2, 1024, 8, 128)), ("o", (2, 1024, 8, 128))):
    p.tensor(role, "bf16", dims)
print(fmha.Context(arch="sm90").explain(p).splitlines()[-4:])
plan = fmha.Context("cpu").plan(p)
print(plan.describe())
print(len(fmha.enumerate_kernels("sm90", "all")), "kernel instances in sm90's 'all' receipt")
