# SPDX-License-Identifier: MIT
"""The entry points' plan cache: a repeated call reuses its plan (a hit) and computes the
same; a different shape, stride, dtype or feature is another plan; the cache is bounded
and can be cleared. NumPy arrays on the CPU backend."""
import numpy as np

import fmha


def rand(rng, *shape, dtype=np.float16):
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def test_repeated_call_hits_and_matches():
    rng = np.random.default_rng(7)
    fmha.plan_cache_clear()
    q, k, v = rand(rng, 2, 9, 4, 32), rand(rng, 2, 21, 2, 32), rand(rng, 2, 21, 2, 32)
    before = fmha.plan_cache_info()
    out1 = fmha.attention(q, k, v, causal=True)
    mid = fmha.plan_cache_info()
    assert mid["misses"] == before["misses"] + 1 and mid["hits"] == before["hits"]
    # new data, same problem: a hit, and the same result as a fresh plan would give
    q2 = rand(rng, 2, 9, 4, 32)
    out2 = fmha.attention(q2, k, v, causal=True)
    after = fmha.plan_cache_info()
    assert after["hits"] == mid["hits"] + 1 and after["misses"] == mid["misses"]
    fmha.plan_cache_clear()
    fresh = fmha.attention(q2, k, v, causal=True)
    np.testing.assert_array_equal(out2, fresh)
    assert not np.array_equal(out1, out2)


def test_what_makes_another_plan():
    rng = np.random.default_rng(8)
    fmha.plan_cache_clear()
    q, k, v = rand(rng, 1, 5, 2, 16), rand(rng, 1, 7, 2, 16), rand(rng, 1, 7, 2, 16)
    fmha.attention(q, k, v)
    calls = [
        lambda: fmha.attention(q, k, v, causal=True),                     # a feature
        lambda: fmha.attention(rand(rng, 1, 6, 2, 16), k, v),             # a shape
        lambda: fmha.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)),  # a dtype
        lambda: fmha.attention(np.pad(q, ((0, 0), (0, 0), (0, 0), (0, 8)))[..., :16], k, v),  # strides
        lambda: fmha.attention(q, k, v, window_size=(2, 1)),              # a parameter
    ]
    for i, call in enumerate(calls):
        before = fmha.plan_cache_info()
        call()
        after = fmha.plan_cache_info()
        assert after["misses"] == before["misses"] + 1, i
    info = fmha.plan_cache_info()
    assert info["entries"] == 6 and info["capacity"] >= 6
    fmha.plan_cache_clear()
    assert fmha.plan_cache_info()["entries"] == 0


def test_invalid_call_is_not_cached():
    rng = np.random.default_rng(9)
    fmha.plan_cache_clear()
    q, k = rand(rng, 1, 5, 3, 16), rand(rng, 1, 7, 2, 16)  # 3 query heads over 2 kv heads
    for _ in range(2):
        try:
            fmha.attention(q, k, k)
            assert False, "expected an error"
        except ValueError as e:
            assert "heads.gqa" in str(e)
    assert fmha.plan_cache_info()["entries"] == 0


def test_out_argument_writes_into_the_callers_array():
    rng = np.random.default_rng(9)
    q, k, v = rand(rng, 2, 7, 4, 16), rand(rng, 2, 11, 2, 16), rand(rng, 2, 11, 2, 16)
    want = fmha.attention(q, k, v, causal=True)
    out = np.full((2, 7, 4, 16), np.nan, dtype=np.float16)
    got = fmha.attention(q, k, v, causal=True, out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)
    for bad in (np.empty((2, 7, 4, 8), np.float16), np.empty((2, 7, 4, 16), np.float32)):
        try:
            fmha.attention(q, k, v, out=bad)
        except ValueError as e:
            assert "expected shape (2, 7, 4, 16), dtype fp16" in str(e)
        else:
            raise AssertionError("a wrong out= was accepted")
    # an out= that overlaps an input is refused by the library
    try:
        fmha.attention(q, k, v, out=q)
    except fmha.FmhaError as e:
        assert "[rule tensor.alias] output o overlaps tensor q" in str(e)
    else:
        raise AssertionError("out= aliasing q was accepted")


def test_index_check_option_on_the_cpu_refuses_like_the_default():
    """The CPU backend always checks index data; check_index_data changes nothing there
    but is accepted (and a GPU context honours it: tests/gpu/index_safety.c)."""
    ctx = fmha.Context("cpu")
    p = fmha.Problem(family="fwd", mode=1, batch=2, num_heads_q=2, num_heads_kv=2, seqlen_q=4, seqlen_kv=4,
                     head_dim_qk=16, head_dim_v=16)
    for role in ("q", "k", "v", "o"):
        p.tensor(role, "fp32", (8, 2, 16))
    p.tensor("cu_seqlens_q", "int32", (3,)).tensor("cu_seqlens_kv", "int32", (3,))
    plan = ctx.plan(p, check_index_data=True)
    x = np.zeros((8, 2, 16), np.float32)
    o = np.zeros((8, 2, 16), np.float32)
    cq = np.array([0, 4, 2], np.int32)
    ck = np.array([0, 4, 8], np.int32)
    ptrs = {"q": x.ctypes.data, "k": x.ctypes.data, "v": x.ctypes.data, "o": o.ctypes.data,
            "cu_seqlens_q": cq.ctypes.data, "cu_seqlens_kv": ck.ctypes.data}
    ws = np.zeros(plan.workspace_size + 64, np.uint8)
    run = lambda: plan.execute(ptrs, ws.ctypes.data, plan.workspace_size)  # noqa: E731
    try:
        run()
    except fmha.InvalidProblemError as e:
        assert "cu_seqlens_q is decreasing at 1 (4 then 2)" in str(e)
    else:
        raise AssertionError("decreasing cu_seqlens_q was accepted")
    cq[2] = 8
    run()  # the plan (and its context) keep working
