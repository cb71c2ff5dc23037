# SPDX-License-Identifier: MIT
"""fmha as a HuggingFace transformers attention implementation.

    import fmha.integrations.transformers as fmha_hf
    fmha_hf.register()                                   # name "fmha"
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation="fmha")

register() adds `attention_forward` to transformers' AttentionInterface, and sdpa's mask
function under the same name to AttentionMaskInterface (without one, transformers would
pass no mask at all). attention_forward takes transformers' conventions and calls
fmha.attention on strided views (no copies):

- query (batch, heads, seqlen_q, dim) and key/value (batch, heads_k, seqlen_k, dim),
  BHSD; GQA/MQA as they come (heads a multiple of heads_k); the output is (batch,
  seqlen_q, heads, dim), as transformers' other implementations return it;
- `scaling` is the softmax scale, `dropout` applies while the module trains;
- causal: `is_causal` when given, else the module's is_causal; fmha aligns causal masks
  bottom-right, which is where the queries of a KV-cache step sit;
- `sliding_window` (Mistral, Gemma 2/3, ...: key j visible from query i when
  i - j < sliding_window), `softcap` (Gemma 2's logit soft-cap), `s_aux` (per-head sink
  logits, gpt-oss);
- an attention mask: transformers materialises one where it cannot skip it (a sliding
  window shorter than the keys, padding). A mask that is exactly the causal (and
  window) pattern is replaced by fmha's own; any other (padding) is refused with a
  ValueError that says so: run unpadded batches (one sequence per call, or packed
  sequences through fmha.attention_varlen).
"""
import torch

import fmha

NAME = "fmha"


def _visible(sq, sk, causal, window, device):
    """The (sq, sk) pattern fmha applies: bottom-right aligned causal mask and window."""
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        vis &= j <= i
    if window[0] >= 0:
        vis &= j >= i - window[0]
    if window[1] >= 0:
        vis &= j <= i + window[1]
    return vis


def _mask_is_pattern(mask, sq, sk, causal, window):
    """Is transformers' mask (bool: True attends; float: 0 attends) the pattern itself?"""
    keep = mask if mask.dtype == torch.bool else mask == 0
    if keep.dim() != 4 or keep.shape[-2:] != (sq, sk):
        return False
    return bool(torch.equal(keep, _visible(sq, sk, causal, window, keep.device).expand_as(keep)))


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                      sliding_window=None, softcap=None, s_aux=None, **kwargs):
    """transformers' attention-function signature over fmha.attention; returns
    (output (batch, seqlen_q, heads, dim), None)."""
    sq, sk = query.shape[2], key.shape[2]
    # sdpa takes causality from the mask when there is one; fmha applies its own, so it is
    # the module's (bottom-right: one query row sees every key either way)
    causal = bool(getattr(module, "is_causal", True) if is_causal is None else is_causal)
    # transformers' windows: key j visible from query i when i - j < w (and, without a
    # causal mask, |i - j| < w)
    w = int(sliding_window) - 1 if sliding_window else -1
    window = (w, -1) if causal else (w, w)
    if attention_mask is not None:
        if not _mask_is_pattern(attention_mask, sq, sk, causal, window):
            raise ValueError(
                "fmha: the attention mask is not the causal%s pattern (padding?); the fmha attention implementation "
                "takes unpadded batches: run one sequence per call or pack sequences for fmha.attention_varlen"
                % (" and sliding-window" if window[0] >= 0 else ""))
    p = dropout if (dropout and getattr(module, "training", False)) else 0.0
    out = fmha.attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), dropout_p=p,
                         softmax_scale=scaling, causal=causal, window_size=window, softcap=float(softcap or 0.0),
                         sink=None if s_aux is None else s_aux.float())
    return out, None


def register(name=NAME):
    """Make attn_implementation=name use fmha (and sdpa's masks). Returns name."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, attention_forward)
    try:
        from transformers import AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask
    except ImportError:  # transformers before the mask interface: masks come as for sdpa
        return name
    AttentionMaskInterface.register(name, sdpa_mask)
    return name
