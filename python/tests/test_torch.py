# SPDX-License-Identifier: MIT
"""PyTorch front end: CPU tensors in, tensors out; autograd through fmha.attention
against torch's math attention in float64; CUDA tensors zero-copy on the current stream
(skipped without a GPU). Skipped as a whole where torch is not installed (CI)."""
import math
import os
import sys

if os.environ.get("FMHA_TEST_INSTALLED") != "1":  # also run as a script
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

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


def lowp_attention(q, k, v, causal=False):
    """REFERENCE.md's naive low-precision attention, differentiable: inputs in their low
    type, S and softmax in fp32, P rounded to the low type before P V."""
    dt = q.dtype
    q, k, v = (x.float().transpose(1, 2) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    sq, sk = s.shape[-2], s.shape[-1]
    if causal:
        i, j = torch.arange(sq, device=s.device)[:, None], torch.arange(sk, device=s.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    p = torch.softmax(s, -1)
    p = p + (p.to(dt).float() - p).detach()  # rounded forward, fp32 gradient
    return (p @ v).transpose(1, 2)


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_training_step_on_the_gpu():
    """Forward and backward of CUDA tensors through fmha.attention (GQA, causal, bf16 and
    fp16): gradients within REFERENCE.md's rule of torch's float64 math attention, and no
    host copy on the way (Tensor.cpu refuses while the step runs)."""
    dev = torch.device("cuda")
    for dt, causal in ((torch.bfloat16, True), (torch.float16, False)):
        torch.manual_seed(3)
        q = torch.randn(2, 257, 8, 64, device=dev, dtype=dt, requires_grad=True)
        k = torch.randn(2, 301, 2, 64, device=dev, dtype=dt, requires_grad=True)
        v = torch.randn(2, 301, 2, 64, device=dev, dtype=dt, requires_grad=True)
        g = torch.randn(2, 257, 8, 64, device=dev, dtype=dt)
        cpu = torch.Tensor.cpu

        def refuse(*a, **kw):
            raise AssertionError("a host copy during the training step")

        torch.Tensor.cpu = refuse
        try:
            out = fmha.attention(q, k, v, causal=causal)
            out.backward(g)
        finally:
            torch.Tensor.cpu = cpu
        assert q.grad.device.type == "cuda" and q.grad.dtype == dt
        ref = [x.detach().double().requires_grad_() for x in (q, k, v)]
        math_attention(*ref, causal=causal).backward(g.double())
        low = [x.detach().requires_grad_() for x in (q, k, v)]
        lowp_attention(*low, causal=causal).backward(g.float())
        for name, a, r, lo in zip("qkv", (q.grad, k.grad, v.grad), ref, low):
            err, tol = (a.double() - r.grad).abs().max().item(), 2 * (lo.grad.double() - r.grad).abs().max().item() + 1e-5
            assert err <= tol, "d%s: error %.3g, tolerance %.3g (%s, causal %s)" % (name, err, tol, dt, causal)


def _devices():
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_fast_path_matches_the_general_path():
    """The second call of a signature takes the fast path; it computes what a fresh plan
    computes, with out= and return_lse too."""
    for dev in _devices():
        dt = torch.float16 if dev == "cuda" else torch.float32
        q, k, v = (torch.randn(2, n, h, 64, device=dev, dtype=dt) for n, h in ((33, 8), (65, 2), (65, 2)))
        fmha.plan_cache_clear()
        fmha.attention(q, k, v, causal=True, return_lse=True)  # the miss records the entry
        assert fmha.plan_cache_info()["fast_entries"] == 1
        q2 = torch.randn_like(q)
        out, lse = fmha.attention(q2, k, v, causal=True, return_lse=True)  # a hit
        buf = torch.full_like(out, float("nan"))
        assert fmha.attention(q2, k, v, causal=True, out=buf) is buf  # another signature (out=), then its hit
        assert fmha.attention(q2, k, v, causal=True, out=buf) is buf
        fmha.plan_cache_clear()
        ref, ref_lse = fmha.attention(q2, k, v, causal=True, return_lse=True)
        assert torch.equal(out, ref) and torch.equal(lse, ref_lse) and torch.equal(buf, ref)
        try:
            fmha.attention(q2, k, v, out=torch.empty(2, 33, 8, 32, device=dev, dtype=dt))
        except ValueError as e:
            assert "expected shape (2, 33, 8, 64)" in str(e)
        else:
            raise AssertionError("a wrong out= was accepted")


def test_kvcache_fast_path_matches_the_general_path():
    for dev in _devices():
        dt = torch.float16 if dev == "cuda" else torch.float32
        q = torch.randn(3, 1, 8, 64, device=dev, dtype=dt)
        kc, vc = (torch.randn(5, 300, 2, 64, device=dev, dtype=dt) for _ in range(2))
        lens = torch.tensor([300, 1, 150], dtype=torch.int32, device=dev)
        rows = torch.tensor([4, 0, 2], dtype=torch.int32, device=dev)
        call = lambda x: fmha.attention_with_kvcache(x, kc, vc, cache_seqlens=lens, cache_batch_idx=rows,  # noqa: E731
                                                     causal=True, return_softmax_lse=True)
        fmha.plan_cache_clear()
        call(q)
        assert fmha.plan_cache_info()["fast_entries"] == 1
        q2 = torch.randn_like(q)
        out, lse = call(q2)  # the fast path
        fmha.plan_cache_clear()
        ref, ref_lse = call(q2)
        assert torch.equal(out, ref) and torch.equal(lse, ref_lse)


def _torch_at_least(major, minor):
    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


@_mark("skipif", not torch.cuda.is_available() or not _torch_at_least(2, 4), reason="needs CUDA and torch >= 2.4")
def test_torch_compile_traces_without_graph_breaks():
    dev = torch.device("cuda")
    q = torch.randn(2, 77, 8, 64, device=dev, dtype=torch.bfloat16)
    k = torch.randn(2, 130, 2, 64, device=dev, dtype=torch.bfloat16)
    v = torch.randn(2, 130, 2, 64, device=dev, dtype=torch.bfloat16)

    def f(q, k, v):
        return fmha.attention(q, k, v, causal=True, window_size=(40, 0)).float() * 2.0

    explained = torch._dynamo.explain(f)(q, k, v)
    assert explained.graph_break_count == 0, explained.break_reasons
    got = torch.compile(f, fullgraph=True)(q, k, v)
    assert torch.equal(got, f(q, k, v))
    # training through the custom op's autograd formula
    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
    loss = lambda a, b, c: fmha.attention(a, b, c, causal=True).float().sum()  # noqa: E731
    torch.compile(loss, fullgraph=True)(qg, kg, vg).backward()
    qe, ke, ve = (x.detach().requires_grad_() for x in (q, k, v))
    loss(qe, ke, ve).backward()
    for a, b in ((qg.grad, qe.grad), (kg.grad, ke.grad), (vg.grad, ve.grad)):
        assert a is not None and torch.equal(a, b)
    # varlen: cu_seqlens as device tensors
    qv, kv, vv = q.reshape(-1, 8, 64), k.reshape(-1, 2, 64), v.reshape(-1, 2, 64)
    cu_q = torch.tensor([0, 77, 154], dtype=torch.int32, device=dev)
    cu_k = torch.tensor([0, 130, 260], dtype=torch.int32, device=dev)

    def g(q, k, v):
        return fmha.attention_varlen(q, k, v, cu_q, cu_k, 77, 130, causal=True)

    explained = torch._dynamo.explain(g)(qv, kv, vv)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert torch.equal(torch.compile(g, fullgraph=True)(qv, kv, vv), g(qv, kv, vv))


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_kvcache_matches_the_cpu():
    """attention_with_kvcache on a contiguous CUDA cache (the split-KV kernels) against
    the CPU backend on the same tensors; lengths, rows and splits vary."""
    torch.manual_seed(3)
    b, sk, h, hk, d = 3, 700, 8, 2, 128
    q = torch.randn(b, 1, h, d, dtype=torch.float16)
    kc, vc = torch.randn(b + 2, sk, hk, d, dtype=torch.float16), torch.randn(b + 2, sk, hk, d, dtype=torch.float16)
    lens = torch.tensor([700, 1, 333], dtype=torch.int32)
    rows = torch.tensor([4, 0, 2], dtype=torch.int32)
    for splits in (0, 1, 3):
        for causal in (False, True):
            want, want_lse = fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens, cache_batch_idx=rows,
                                                         causal=causal, num_splits=splits, return_softmax_lse=True)
            got, lse = fmha.attention_with_kvcache(q.cuda(), kc.cuda(), vc.cuda(), cache_seqlens=lens.cuda(),
                                                   cache_batch_idx=rows.cuda(), causal=causal, num_splits=splits,
                                                   return_softmax_lse=True)
            assert (got.cpu().float() - want.float()).abs().max() < 2e-3
            assert (lse.cpu() - want_lse).abs().max() < 1e-3


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_decode_shaped_attention_runs_split_kv():
    """fmha.attention with a few query rows per KV head on CUDA tensors plans the split-KV
    family (the decode kernel reads K/V once per KV head) and matches the CPU backend's
    forward; its LSE serves the backward."""
    import importlib
    A = importlib.import_module("fmha.attention")
    fmha.plan_cache_clear()
    torch.manual_seed(5)
    b, sk, h, hk, d = 3, 700, 8, 2, 128
    for sq, kw in ((1, {}), (1, {"causal": True}), (4, {"causal": True}),
                   (3, {"window_size": (100, 0), "softcap": 20.0})):
        q = torch.randn(b, sq, h, d, dtype=torch.float16)
        k, v = torch.randn(b, sk, hk, d, dtype=torch.float16), torch.randn(b, sk, hk, d, dtype=torch.float16)
        want, want_lse = fmha.attention(q, k, v, return_lse=True, **kw)
        for _ in range(2):  # the general path, then the fast one
            got, lse = fmha.attention(q.cuda(), k.cuda(), v.cuda(), return_lse=True, **kw)
            assert (got.cpu().float() - want.float()).abs().max() < 2e-3, (sq, kw)
            assert (lse.cpu() - want_lse).abs().max() < 1e-3, (sq, kw)
    # every call plans fwd; the library routes the GPU's to split-KV (src/core/plan.c)
    routed = [k for key, plan in A._plans.items() if key[1] != "cpu" for k in plan.kernels()]
    assert {key[0] for key in A._plans} == {"fwd"}
    assert routed and all("splitkv" in k or "combine" in k for k in routed), routed
    q, k, v = (torch.randn(b, n, heads, d, dtype=torch.float16) for n, heads in ((2, h), (sk, hk), (sk, hk)))
    grads = []
    for dev in ("cpu", "cuda"):
        x = [t.detach().to(dev).requires_grad_() for t in (q, k, v)]
        fmha.attention(*x, causal=True).float().sum().backward()
        grads.append([t.grad.cpu().float() for t in x])
    for name, a, r in zip("qkv", *grads):
        assert (a - r).abs().max() < 5e-3, "d%s" % name


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_capture_replays():
    dev = torch.device("cuda")
    q = torch.randn(2, 100, 8, 128, device=dev, dtype=torch.float16)
    k = torch.randn(2, 300, 8, 128, device=dev, dtype=torch.float16)
    v = torch.randn(2, 300, 8, 128, device=dev, dtype=torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: plan (and compile) outside the capture
        fmha.attention(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fmha.attention(q, k, v, causal=True)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, fmha.attention(q, k, v, causal=True))


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_replays_split_decode():
    """The decode kernel's split arrivals are tagged per launch, not zeroed by a launch
    first: a graph replays its launch with the same tag over the words the last replay
    left, and an eager call between replays leaves its own tag there. Each result must
    still equal the eager one (all splits reduced, none twice)."""
    dev = torch.device("cuda")
    q = torch.randn(3, 1, 32, 128, device=dev, dtype=torch.bfloat16)
    kc = torch.randn(3, 3000, 8, 128, device=dev, dtype=torch.bfloat16)
    vc = torch.randn(3, 3000, 8, 128, device=dev, dtype=torch.bfloat16)
    lens = torch.tensor([3000, 1234, 77], dtype=torch.int32, device=dev)
    call = lambda: fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens, num_splits=7)  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = call()
    for i in range(4):
        kc.copy_(torch.randn_like(kc))
        g.replay()
        torch.cuda.synchronize()
        if i % 2:  # the same launch eagerly: the same sums in the same order
            assert torch.equal(out, call()), i
        else:  # one split: no arrivals at all
            want = fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens, num_splits=1)
            assert (out.float() - want.float()).abs().max() < 2e-2, i


@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_bad_cu_seqlens_bounded_or_refused():
    """Bad device-side cu_seqlens: without the check the call stays inside the tensors and
    the process goes on; with check_index_data it is refused with the entry named; a
    capturing stream refuses the check."""
    dev = torch.device("cuda")
    total, h, d = 40, 4, 64
    q, k, v = (torch.randn(total, h, d, device=dev, dtype=torch.float16) for _ in range(3))
    good = torch.tensor([0, 10, 25, 40], dtype=torch.int32, device=dev)
    ref = fmha.attention_varlen(q, k, v, good, good, 15, 15, causal=True)
    for bad_values in ([0, 10, 5, 40], [0, 10, 25, 1 << 30], [7, 10, 25, 40], [0, -100, 25, 40]):
        bad = torch.tensor(bad_values, dtype=torch.int32, device=dev)
        fmha.attention_varlen(q, k, v, bad, good, 15, 15, causal=True)
        fmha.attention_varlen(q, k, v, good, bad, 15, 15, causal=True)
        torch.cuda.synchronize()  # a fault would surface here
    assert torch.equal(fmha.attention_varlen(q, k, v, good, good, 15, 15, causal=True), ref)

    ctx = fmha.context_for("cuda:0")
    p = fmha.Problem(family="fwd", mode=1, batch=3, num_heads_q=h, num_heads_kv=h, seqlen_q=15, seqlen_kv=15,
                     head_dim_qk=d, head_dim_v=d, window_right=0, mask_align=1)
    for role in ("q", "k", "v", "o"):
        p.tensor(role, "fp16", (total, h, d))
    p.tensor("cu_seqlens_q", "int32", (4,)).tensor("cu_seqlens_kv", "int32", (4,))
    plan = ctx.plan(p, check_index_data=True)
    o = torch.empty_like(q)
    bad = torch.tensor([0, 10, 5, 40], dtype=torch.int32, device=dev)
    ptrs = {"q": q.data_ptr(), "k": k.data_ptr(), "v": v.data_ptr(), "o": o.data_ptr(),
            "cu_seqlens_q": bad.data_ptr(), "cu_seqlens_kv": good.data_ptr()}
    stream = torch.cuda.current_stream().cuda_stream
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device=dev)
    run = lambda s: plan.execute(ptrs, ws.data_ptr(), plan.workspace_size, s)  # noqa: E731
    try:
        run(stream)
    except fmha.InvalidProblemError as e:
        assert "cu_seqlens_q is decreasing at 1 (10 then 5)" in str(e)
    else:
        raise AssertionError("the checked plan accepted decreasing cu_seqlens_q")
    ptrs["cu_seqlens_q"] = good.data_ptr()
    run(stream)
    torch.cuda.synchronize()
    assert torch.equal(o, ref)
    g = torch.cuda.CUDAGraph()
    refused = None
    try:
        with torch.cuda.graph(g):
            try:
                run(torch.cuda.current_stream().cuda_stream)
            except fmha.FmhaError as e:
                refused = str(e)
    except RuntimeError:
        pass  # an empty capture may be reported by torch; the point is the refusal above
    assert refused is not None and "capturing a CUDA graph" in refused, refused
    torch.cuda.synchronize()
    assert torch.equal(fmha.attention_varlen(q, k, v, good, good, 15, 15, causal=True), ref)



@_mark("skipif", not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_append_and_batch_prefill_match_the_cpu():
    """append_kv_cache (RoPE, block table and CSR lists) on CUDA writes what the CPU
    backend writes into the same cache (values bit for bit, rotated keys and q_rot within
    one bf16 rounding); attention_varlen(block_table=) and attention_paged_csr(cu_seqlens_q=)
    on CUDA (batch_prefill) match the CPU."""
    torch.manual_seed(5)
    b, h, hk, d, page, snew = 3, 8, 2, 128, 16, 5
    old = [30, 0, 77]
    npages = [(n + snew + page - 1) // page for n in old]
    pool = sum(npages) + 4
    order = torch.randperm(pool).to(torch.int32)
    table = torch.zeros(b, max(npages), dtype=torch.int32)
    at = 0
    for s in range(b):
        table[s, :npages[s]] = order[at:at + npages[s]]
        at += npages[s]
    indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
    indices = torch.cat([table[s, :npages[s]] for s in range(b)])
    last = torch.tensor([(n + snew - 1) % page + 1 for n in old], dtype=torch.int32)
    kp = torch.randn(pool, page, hk, d, dtype=torch.bfloat16)
    vp = torch.randn(pool, page, hk, d, dtype=torch.bfloat16)
    kn, vn = torch.randn(b, snew, hk, d, dtype=torch.bfloat16), torch.randn(b, snew, hk, d, dtype=torch.bfloat16)
    q = torch.randn(b, snew, h, d, dtype=torch.bfloat16)
    ang = torch.arange(256)[:, None] * 10000.0 ** (-2.0 * torch.arange(64) / 128)
    cos, sin = ang.cos().float(), ang.sin().float()
    lens = torch.tensor(old, dtype=torch.int32)
    for interleaved in (True, False):
        for csr in (False, True):
            look = dict(kv_indptr=indptr, kv_indices=indices, kv_last_page_len=last) if csr else \
                dict(cache_seqlens=lens, block_table=table)
            cuda_look = {k_: v_.cuda() for k_, v_ in look.items()}
            kc, vc = kp.clone(), vp.clone()
            kg, vg = kp.cuda(), vp.cuda()
            want = fmha.append_kv_cache(kc, vc, kn, vn, rotary_cos=cos, rotary_sin=sin, q=q, causal=True,
                                        rotary_interleaved=interleaved, **look)
            got = fmha.append_kv_cache(kg, vg, kn.cuda(), vn.cuda(), rotary_cos=cos.cuda(), rotary_sin=sin.cuda(),
                                       q=q.cuda(), causal=True, rotary_interleaved=interleaved, **cuda_look)
            torch.cuda.synchronize()
            what = "interleaved %s, %s" % (interleaved, "CSR" if csr else "block table")
            assert torch.equal(vg.cpu(), vc), "v cache differs from the CPU's: " + what
            # rotated values: within one bf16 rounding of the CPU's (both compute in double)
            for name, g_, w_ in (("k cache", kg.cpu(), kc), ("q_rot", got.cpu(), want)):
                diff = (g_.float() - w_.float()).abs()
                assert (diff <= w_.float().abs() * 2.0 ** -7 + 1e-6).all(), "%s differs from the CPU's by %g: %s" % (
                    name, diff.max(), what)
    # batch prefill over the appended cache: 3 ragged query chunks against 35, 5 and 82 keys
    lq = [7, 0, 20]
    cu_q = torch.tensor([0, 7, 7, 27], dtype=torch.int32)
    klens = torch.tensor([n + snew for n in old], dtype=torch.int32)
    cu_k = torch.tensor([0] + list(klens.cumsum(0)), dtype=torch.int32)
    qv = torch.randn(27, h, d, dtype=torch.bfloat16)
    for causal in (False, True):
        want, want_lse = fmha.attention_varlen(qv, kc, vc, cu_q, cu_k, max(lq), int(klens.max()), causal=causal,
                                               block_table=table, return_lse=True)
        got, lse = fmha.attention_varlen(qv.cuda(), kg, vg, cu_q.cuda(), cu_k.cuda(), max(lq), int(klens.max()),
                                         causal=causal, block_table=table.cuda(), return_lse=True)
        got2 = fmha.attention_paged_csr(qv.cuda(), kg, vg, indptr.cuda(), indices.cuda(), last.cuda(),
                                        max_seqlen_k=int(klens.max()), causal=causal, cu_seqlens_q=cu_q.cuda(),
                                        max_seqlen_q=max(lq))
        err = (got.cpu().float() - want.float()).abs().max()
        assert err < 2e-2, "batch prefill (block table) differs from the CPU's by %g" % err
        err = (lse.cpu() - want_lse).abs().max()
        assert err < 1e-3, "batch prefill LSE differs from the CPU's by %g" % err
        err = (got2.float() - got.float()).abs().max()  # the selector may pick another kernel for either
        assert err < 2e-2, "CSR and block table differ by %g" % err


def _fp8_inputs(device, b=2, sq=65, sk=130, h=4, hk=2, d=128):
    """fp8 e4m3 q, k, v spanning most of the format's range, with (b, hk) descales."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.empty(b, s, n, d).uniform_(-400, 400, generator=g).to(torch.float8_e4m3fn)
               for s, n in ((sq, h), (sk, hk), (sk, hk)))
    ds = [torch.empty(b, hk).uniform_(0.5 / 400, 1.5 / 400, generator=g) for _ in range(3)]
    return [x.to(device) for x in (q, k, v)], [x.to(device) for x in ds]


def _dequantised(x, descale, heads):
    """x (b, s, heads, d) in e4m3 times its (b, heads_k) descale, in float64."""
    rep = heads // descale.shape[1]
    return x.double() * descale.double().repeat_interleave(rep, 1)[:, None, :, None]


@_mark("skipif", not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_fp8_forward_matches_math_attention_of_the_dequantised_inputs():
    (q, k, v), (qd, kd, vd) = _fp8_inputs("cpu")
    out = fmha.attention(q, k, v, causal=True, q_descale=qd, k_descale=kd, v_descale=vd)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 65, 4, 128)
    ref = math_attention(_dequantised(q, qd, 4), _dequantised(k, kd, 2), _dequantised(v, vd, 2), causal=True)
    # P is quantised to e4m3 for P V (docs/semantics.md, "FP8"): a few percent of |V| at most
    err = (out.double() - ref).abs().max().item()
    assert err < 0.03 * ref.abs().max().item(), err
    # the descales are applied: without them the result is another one
    plain = fmha.attention(q, k, v, causal=True)
    assert (plain.double() - ref).abs().max().item() > 10 * err
    try:
        fmha.attention(q, k, v, q_descale=0.5)
        raise AssertionError("a Python number as a descale was accepted")
    except TypeError as e:
        assert "float32 tensor" in str(e)


@_mark("skipif", not hasattr(torch, "float8_e4m3fn") or not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_fp8_forward_matches_the_cpu():
    (q, k, v), ds = _fp8_inputs("cuda")
    for causal in (False, True):
        out = fmha.attention(q, k, v, causal=causal, q_descale=ds[0], k_descale=ds[1], v_descale=ds[2], return_lse=True)
        ref = fmha.attention(*(x.cpu() for x in (q, k, v)), causal=causal, q_descale=ds[0].cpu(),
                             k_descale=ds[1].cpu(), v_descale=ds[2].cpu(), return_lse=True)
        assert out[0].is_cuda and out[0].dtype == torch.bfloat16
        assert (out[0].cpu().double() - ref[0].double()).abs().max().item() < 0.05
        assert (out[1].cpu() - ref[1]).abs().max().item() < 1e-3


if __name__ == "__main__":  # the GPU machine's check (scripts/gpu_check.sh): no pytest there
    failed = 0
    tests = []
    # every test_ function of this file, found by name (a list kept by hand once missed a
    # new test), with pytest's conditions: CUDA tests need a GPU, fp8 ones float8_e4m3fn
    for name, fn in list(globals().items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        if "cuda" in name and not torch.cuda.is_available():
            continue
        if "fp8" in name and not hasattr(torch, "float8_e4m3fn"):
            continue
        if name == "test_torch_compile_traces_without_graph_breaks" and not (torch.cuda.is_available()
                                                                           and _torch_at_least(2, 4)):
            continue
        if name == "test_autograd_matches_math_attention":
            tests += [("%s[%d]" % (name, i), fn, {"kw": kw}) for i, kw in enumerate(AUTOGRAD_CASES)]
        else:
            tests.append((name, fn, {}))
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

