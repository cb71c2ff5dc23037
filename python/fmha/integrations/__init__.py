# SPDX-License-Identifier: MIT
"""Bridges from frameworks to fmha: `fmha.integrations.transformers` (HuggingFace)."""
