"""fmha.attention_with_kvcache on NumPy arrays: decode and append over contiguous caches
(with cache_batch_idx) and paged caches (block tables, NHD and HND), RoPE interleaved and
half-rotated, the cache updated in place and nothing else in it touched."""
import numpy as np
import pytest

import fmha
import reference as R

rng = np.random.default_rng(77)


def rand(*shape, dtype=np.float32):
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def rope_tables(max_pos, rot):
    ang = np.arange(max_pos)[:, None] * 10000.0 ** (-2.0 * np.arange(rot // 2) / rot)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


@pytest.mark.parametrize("num_splits", [0, 1, 3])
def test_decode_contiguous(num_splits):
    b, h, hk, d, smax = 3, 8, 2, 64, 200
    kc, vc = rand(b, smax, hk, d), rand(b, smax, hk, d)
    q = rand(b, 1, h, d)
    lens = np.array([200, 1, 77], np.int32)
    out, lse = fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=lens, num_splits=num_splits, return_softmax_lse=True)
    for i in range(b):
        ok, err, tol = R.check_rule(out[i:i + 1], q[i:i + 1], kc[i:i + 1, :lens[i]], vc[i:i + 1, :lens[i]])
        assert ok, (i, err, tol)


@pytest.mark.parametrize("rot,interleaved", [(0, True), (32, True), (32, False), (64, False)])
@pytest.mark.parametrize("causal", [False, True])
def test_append_rope_contiguous_with_batch_idx(rot, interleaved, causal):
    b, h, hk, d, smax, snew = 2, 4, 2, 64, 50, 3
    kc, vc = rand(4, smax, hk, d), rand(4, smax, hk, d)  # 4 cache rows, 2 sequences
    before_k, before_v = kc.copy(), vc.copy()
    idx = np.array([3, 1], np.int32)
    lens = np.array([10, 0], np.int32)
    q, kn, vn = rand(b, snew, h, d), rand(b, snew, hk, d), rand(b, snew, hk, d)
    cos, sin = rope_tables(smax + 8, rot) if rot else (None, None)
    out = fmha.attention_with_kvcache(q, kc, vc, k=kn, v=vn, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lens,
                                      cache_batch_idx=idx, causal=causal, rotary_interleaved=interleaved)
    for i in range(b):
        row, L = idx[i], lens[i]
        pos = L + np.arange(snew)
        kref = R.rope(kn[i], pos[:, None], cos, sin, interleaved) if rot else kn[i]
        assert np.abs(kc[row, L:L + snew] - kref).max() < 1e-5
        assert np.array_equal(vc[row, L:L + snew], vn[i])
        # nothing else in the cache changed
        mask = np.ones(smax, bool)
        mask[L:L + snew] = False
        assert np.array_equal(kc[row, mask], before_k[row, mask])
        qpos = (L + np.arange(snew)) if causal else np.full(snew, L)
        qref = R.rope(q[i], qpos[:, None], cos, sin, interleaved) if rot else q[i]
        ok, err, tol = R.check_rule(out[i:i + 1], qref[None].astype(np.float32), kc[row:row + 1, :L + snew],
                                    vc[row:row + 1, :L + snew], causal=causal)
        assert ok, (i, err, tol)
    for r in (0, 2):  # rows no sequence uses
        assert np.array_equal(kc[r], before_k[r]) and np.array_equal(vc[r], before_v[r])


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("page", [1, 5, 16])
def test_paged_decode_and_append(layout, page):
    b, h, hk, d = 3, 4, 2, 32
    lens = np.array([37, 0, 12], np.int32)
    snew = 2
    total = lens + snew
    npages = (total + page - 1) // page
    pool = int(npages.sum()) + 4
    perm = rng.permutation(pool).astype(np.int32)
    table = np.full((b, int(npages.max())), -1, np.int32)
    logical_k = [rand(int(t), hk, d) for t in total]
    logical_v = [rand(int(t), hk, d) for t in total]
    shape = (pool, page, hk, d) if layout == "NHD" else (pool, hk, page, d)
    kc, vc = np.full(shape, 9.0, np.float32), np.full(shape, 9.0, np.float32)
    at = 0
    for i in range(b):
        for p in range(npages[i]):
            table[i, p] = perm[at]
            at += 1
        for t in range(lens[i]):  # only the old tokens are in the cache
            pg, slot = table[i, t // page], t % page
            if layout == "NHD":
                kc[pg, slot], vc[pg, slot] = logical_k[i][t], logical_v[i][t]
            else:
                kc[pg, :, slot], vc[pg, :, slot] = logical_k[i][t], logical_v[i][t]
    kn = np.stack([lk[L:L + snew] for lk, L in zip(logical_k, lens)])
    vn = np.stack([lv[L:L + snew] for lv, L in zip(logical_v, lens)])
    q = rand(b, 1, h, d)
    out = fmha.attention_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, block_table=table, kv_layout=layout)
    for i in range(b):
        ok, err, tol = R.check_rule(out[i:i + 1], q[i:i + 1], logical_k[i][None], logical_v[i][None])
        assert ok, (i, err, tol)
    out_split = fmha.attention_with_kvcache(q, kc, vc, cache_seqlens=total, block_table=table, kv_layout=layout,
                                            num_splits=3)
    assert np.abs(out_split - out).max() < 1e-5


def test_capacity_is_refused_before_any_write():
    kc, vc = rand(1, 8, 1, 16), rand(1, 8, 1, 16)
    before = kc.copy()
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule appendkv.capacity\]"):
        fmha.attention_with_kvcache(rand(1, 1, 1, 16), kc, vc, k=rand(1, 3, 1, 16), v=rand(1, 3, 1, 16), cache_seqlens=6)
    assert np.array_equal(kc, before)


def test_csr_pages_match_the_block_table():
    """attention_paged_csr over FlashInfer-style lists gives what attention_with_kvcache
    gives over a block table of the same pages (and page size 1, SGLang's)."""
    rng = np.random.default_rng(21)
    for page in (1, 5):
        b, h, hk, d = 3, 4, 2, 32
        lens = [7, 0, 13]
        npages = [(n + page - 1) // page for n in lens]
        total = sum(npages) + 3
        kp = rng.standard_normal((total, page, hk, d)).astype(np.float32)
        vp = rng.standard_normal((total, page, hk, d)).astype(np.float32)
        order = rng.permutation(total)
        indptr = np.concatenate([[0], np.cumsum(npages)]).astype(np.int32)
        indices = order[:sum(npages)].astype(np.int32)
        last = np.array([(n - 1) % page + 1 if n else 0 for n in lens], np.int32)
        width = max(npages)
        table = np.zeros((b, width), np.int32)
        for s in range(b):
            table[s, :npages[s]] = indices[indptr[s]:indptr[s + 1]]
        q = rng.standard_normal((b, 1, h, d)).astype(np.float32)
        for causal in (False, True):
            got, lse = fmha.attention_paged_csr(q, kp, vp, indptr, indices, last, causal=causal,
                                                return_softmax_lse=True)
            want, want_lse = fmha.attention_with_kvcache(q, kp, vp, cache_seqlens=np.array(lens, np.int32),
                                                         block_table=table, causal=causal, return_softmax_lse=True)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(lse, want_lse, rtol=1e-6, atol=1e-6)
