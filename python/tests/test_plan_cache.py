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
