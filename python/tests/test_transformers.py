# SPDX-License-Identifier: MIT
"""fmha.integrations.transformers: transformers' attention-function conventions (BHSD
in, BSHD out, GQA, scaling, causal, sliding windows, soft-cap, sink logits, masks that
are the causal pattern; padding refused) against torch's math on CPU tensors; and the
registration where transformers is installed."""
import math

import pytest

torch = pytest.importorskip("torch")
import fmha.integrations.transformers as hf  # noqa: E402


class Module(torch.nn.Module):
    is_causal = True


def reference(q, k, v, scaling, causal, window, softcap=0.0, sinks=None):
    """Math attention in float64, BHSD in, BSHD out; window w: i - j < w."""
    q, k, v = (x.double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * scaling
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    sq, sk = s.shape[-2:]
    i = torch.arange(sq)[:, None] + sk - sq
    j = torch.arange(sk)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        vis &= j <= i
    if window:
        vis &= i - j < window
    s = s.masked_fill(~vis, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double()[None, :, None, None].expand(*s.shape[:3], 1)], -1)
    p = torch.softmax(s, -1)[..., :sk]
    return (p @ v).transpose(1, 2)


@pytest.mark.parametrize("kw", [dict(), dict(sliding_window=5), dict(softcap=2.0), dict(sinks=True)])
@pytest.mark.parametrize("sq,sk", [(9, 9), (1, 12), (4, 12)])
def test_attention_forward_conventions(kw, sq, sk):
    g = torch.Generator().manual_seed(sq * 100 + sk)
    b, h, hk, d = 2, 4, 2, 16
    q = torch.randn(b, h, sq, d, generator=g)
    k, v = torch.randn(b, hk, sk, d, generator=g), torch.randn(b, hk, sk, d, generator=g)
    sinks = torch.randn(h, generator=g) if kw.get("sinks") else None
    scaling = 1 / math.sqrt(d) * 1.3
    out, weights = hf.attention_forward(Module(), q, k, v, None, scaling=scaling,
                                        sliding_window=kw.get("sliding_window"), softcap=kw.get("softcap"),
                                        s_aux=sinks)
    assert weights is None and out.shape == (b, sq, h, d)
    want = reference(q, k, v, scaling, True, kw.get("sliding_window"), kw.get("softcap", 0.0), sinks)
    assert (out.double() - want).abs().max() < 1e-5


def test_masks_the_pattern_or_refused():
    b, h, d, sq, sk = 2, 2, 8, 3, 10
    q, k, v = torch.randn(b, h, sq, d), torch.randn(b, h, sk, d), torch.randn(b, h, sk, d)
    i = torch.arange(sq)[:, None] + sk - sq
    j = torch.arange(sk)[None, :]
    for window in (None, 4):
        keep = (j <= i) & ((i - j < window) if window else True)
        mask = keep.expand(b, 1, sq, sk)
        out, _ = hf.attention_forward(Module(), q, k, v, mask, scaling=0.3, sliding_window=window)
        assert (out.double() - reference(q, k, v, 0.3, True, window)).abs().max() < 1e-5
        additive = torch.zeros(b, 1, sq, sk).masked_fill(~mask, float("-inf"))
        out2, _ = hf.attention_forward(Module(), q, k, v, additive, scaling=0.3, sliding_window=window)
        assert torch.equal(out, out2)
    padded = mask.clone()
    padded[1, :, :, :2] = False  # left padding of the second sequence
    with pytest.raises(ValueError, match="padding"):
        hf.attention_forward(Module(), q, k, v, padded, scaling=0.3)


def test_register_with_transformers():
    transformers = pytest.importorskip("transformers")
    name = hf.register()
    assert name in transformers.AttentionInterface()
