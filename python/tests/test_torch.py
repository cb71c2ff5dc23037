"""PyTorch front end: CPU tensors in, tensors out; autograd through fmha.attention
against torch's math attention in float64; CUDA tensors zero-copy on the current stream
(skipped without a GPU). Skipped as a whole where torch is not installed (CI)."""
import math

import pytest

torch = pytest.importorskip("torch")
import fmha  # noqa: E402


def math_attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0):
    """Reference in float64 (BSHD, GQA, bottom-right masks)."""
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    sq, sk = s.shape[-2], s.shape[-1]
    i = torch.arange(sq)[:, None]
    j = torch.arange(sk)[None, :]
    left, right = window
    if causal:
        right = 0
    vis = torch.ones(sq, sk, dtype=torch.bool)
    if right >= 0:
        vis &= j <= i + sk - sq + right
    if left >= 0:
        vis &= j >= i + sk - sq - left
    s = s.masked_fill(~vis.to(s.device), float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return (p @ v).transpose(1, 2)


def test_cpu_tensors_forward():
    q, k, v = torch.randn(2, 17, 4, 32), torch.randn(2, 23, 2, 32), torch.randn(2, 23, 2, 32)
    for dt in (torch.float32, torch.bfloat16):
        out = fmha.attention(q.to(dt), k.to(dt), v.to(dt), causal=True)
        assert isinstance(out, torch.Tensor) and out.dtype == dt and out.shape == (2, 17, 4, 32)
        ref = math_attention(q.to(dt), k.to(dt), v.to(dt), causal=True)
        assert (out.double() - ref).abs().max() < (2e-2 if dt == torch.bfloat16 else 1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(window=(3, 2)), dict(softcap=3.0)])
def test_autograd_matches_math_attention(kw):
    q = torch.randn(2, 9, 4, 16, requires_grad=True)
    k = torch.randn(2, 13, 2, 16, requires_grad=True)
    v = torch.randn(2, 13, 2, 16, requires_grad=True)
    out = fmha.attention(q, k, v, causal=kw.get("causal", False), window_size=kw.get("window", (-1, -1)),
                         softcap=kw.get("softcap", 0.0))
    g = torch.randn_like(out)
    out.backward(g)
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = math_attention(qd, kd, vd, kw.get("causal", False), kw.get("window", (-1, -1)), kw.get("softcap", 0.0))
    ref.backward(g.double())
    for a, b in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert (a.double() - b).abs().max() < 2e-5 * max(1.0, b.abs().max().item())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_tensors_on_the_current_stream():
    dev = torch.device("cuda")
    q = torch.randn(2, 128, 8, 64, device=dev, dtype=torch.float16)
    k = torch.randn(2, 256, 2, 64, device=dev, dtype=torch.float16)
    v = torch.randn(2, 256, 2, 64, device=dev, dtype=torch.float16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = fmha.attention(q, k, v, causal=True)
    s.synchronize()
    assert out.device.type == "cuda" and out.dtype == torch.float16
    ref = math_attention(q, k, v, causal=True)
    assert (out.double() - ref).abs().max() < 1e-2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_autograd_uses_the_cpu_backward():
    dev = torch.device("cuda")
    q = torch.randn(1, 33, 4, 64, device=dev, dtype=torch.float16, requires_grad=True)
    k = torch.randn(1, 47, 4, 64, device=dev, dtype=torch.float16, requires_grad=True)
    v = torch.randn(1, 47, 4, 64, device=dev, dtype=torch.float16, requires_grad=True)
    out = fmha.attention(q, k, v, causal=True)
    out.float().sum().backward()
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    math_attention(qd, kd, vd, causal=True).sum().backward()
    assert q.grad.device.type == "cuda"
    for a, b in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert (a.double() - b).abs().max() < 2e-2
