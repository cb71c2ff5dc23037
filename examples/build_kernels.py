# SPDX-License-Identifier: MIT
"""Precompile GPU kernels into the on-disk cache with NVRTC (no GPU needed), with a
progress bar, so that plan creation on the GPU machine only loads them."""
import _path  # noqa: F401
import fmha

try:
    print(fmha.build("sm90", "default", "family==fwd && hdim_qk==128 && dtype==bf16 && mask==causal && lse==0"))
except fmha.NotCompiledError as e:
    print("no NVRTC here:", e.message)
