"""PyTorch front end: CPU tensors in, tensors out; autograd through fmha.attention
against torch's math attention in float64; CUDA tensors zero-copy on the current stream
(skipped without a GPU). Skipped as a whole where torch is not installed (CI)."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # also run as a script

try:
    import pytest
except ImportError:  # run as a script on a machine without pytest
    pytest = None

if pytest is not None and __name__ != "__main__":
    torch = pytest.importorskip("torch")
else:
    import torch
import fmha  # noqa: E402

AUTOGRAD_CASES = [dict(), dict(causal=True), dict(window=(3, 2)), dict(softcap=3.0)]


def _mark(decorator, *args, **kw):
    """pytest marks when pytest is there; identity otherwise."""
    if pytest is None:
        return lambda f: f
    return getattr(pytest.mark, decorator)(*args, **kw)


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


@_mark("parametrize", "kw", AUTOGRAD_CASES)
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


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
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


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
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


if __name__ == "__main__":  # the GPU machine's check (scripts/gpu_check.sh): no pytest there
    failed = 0
    tests = [("test_cpu_tensors_forward", test_cpu_tensors_forward, {})]
    tests += [("test_autograd_matches_math_attention[%d]" % i, test_autograd_matches_math_attention, {"kw": kw})
              for i, kw in enumerate(AUTOGRAD_CASES)]
    if torch.cuda.is_available():
        tests += [("test_cuda_tensors_on_the_current_stream", test_cuda_tensors_on_the_current_stream, {}),
                  ("test_cuda_autograd_uses_the_cpu_backward", test_cuda_autograd_uses_the_cpu_backward, {})]
    for name, fn, kw in tests:
        try:
            fn(**kw)
            print("PASS", name)
        except Exception as e:  # report every failure, then fail
            failed += 1
            print("FAIL", name, repr(e))
    print("python torch checks: %d passed, %d failed%s" % (len(tests) - failed, failed,
                                                          "" if torch.cuda.is_available() else " (no CUDA)"))
    sys.exit(1 if failed else 0)
