# SPDX-License-Identifier: MIT
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


def paged_from_logical(logical, page, hk, d, layout="NHD", spare=3, values=None):
    """A shuffled page pool holding each sequence's tokens (and a second pool of the same
    pages holding `values`), its block table and CSR lists."""
    npages = [(len(x) + page - 1) // page for x in logical]
    pool = sum(npages) + spare
    order = rng.permutation(pool).astype(np.int32)
    shape = (pool, page, hk, d) if layout == "NHD" else (pool, hk, page, d)
    pools = [np.full(shape, 7.0, np.float32) for _ in range(1 if values is None else 2)]
    table = np.zeros((len(logical), max(1, max(npages))), np.int32)
    at = 0
    for s in range(len(logical)):
        table[s, :npages[s]] = order[at:at + npages[s]]
        at += npages[s]
        for pool_, rows in zip(pools, (logical, values)):
            for t in range(len(rows[s])):
                pg, slot = table[s, t // page], t % page
                if layout == "NHD":
                    pool_[pg, slot] = rows[s][t]
                else:
                    pool_[pg, :, slot] = rows[s][t]
    indptr = np.concatenate([[0], np.cumsum(npages)]).astype(np.int32)
    indices = np.concatenate([table[s, :npages[s]] for s in range(len(logical))]).astype(np.int32)
    last = np.array([(len(x) - 1) % page + 1 if len(x) else 0 for x in logical], np.int32)
    return (pools[0] if values is None else tuple(pools)), table, (indptr, indices, last)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("page", [1, 4, 16])
@pytest.mark.parametrize("causal", [False, True])
def test_batch_prefill_block_table_and_csr(layout, page, causal):
    """attention_varlen(block_table=) and attention_paged_csr(cu_seqlens_q=): ragged
    queries over pages, chunked prefill (fewer queries than keys, bottom-right causal),
    an empty query sequence, against the reference per sequence."""
    h, hk, d = 4, 2, 32
    lq, lk = [5, 0, 9], [12, 3, 9]
    lkeys = [rand(n, hk, d) for n in lk]
    lvals = [rand(n, hk, d) for n in lk]
    (kp, vp), table, csr = paged_from_logical(lkeys, page, hk, d, layout, values=lvals)
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q = rand(int(cu_q[-1]), h, d)
    got, lse = fmha.attention_varlen(q, kp, vp, cu_q, cu_k, max(lq), max(lk), causal=causal, block_table=table,
                                     kv_layout=layout, return_lse=True)
    got_csr, lse_csr = fmha.attention_paged_csr(q, kp, vp, *csr, causal=causal, kv_layout=layout,
                                                cu_seqlens_q=cu_q, max_seqlen_q=max(lq), return_softmax_lse=True)
    np.testing.assert_array_equal(got, got_csr)
    np.testing.assert_array_equal(lse, lse_csr)
    for s in range(3):
        if lq[s] == 0:
            continue
        rows = slice(cu_q[s], cu_q[s + 1])
        ok, err, tol = R.check_rule(got[None, rows], q[None, rows], lkeys[s][None], lvals[s][None], causal=causal)
        assert ok, (s, err, tol)


def test_batch_prefill_refuses_training():
    kp = rand(4, 4, 1, 16)
    with pytest.raises(ValueError, match="inference only"):
        fmha.attention_varlen(rand(3, 1, 16), kp, kp, [0, 3], [0, 5], 3, 5, dropout_p=0.1,
                              block_table=np.array([[0, 1]], np.int32))


@pytest.mark.parametrize("rot,interleaved", [(0, True), (16, True), (32, False)])
def test_append_kv_cache_block_table_and_csr(rot, interleaved):
    """append_kv_cache writes the same slots through a block table (lengths before the
    append) and through CSR lists (describing the cache after it), rotates q, and
    touches nothing else."""
    b, h, hk, d, page, snew = 3, 4, 2, 32, 4, 3
    old = [5, 0, 8]
    logical = [rand(n + snew, hk, d) for n in old]
    kp, table, (indptr, indices, last) = paged_from_logical(logical, page, hk, d)
    kn = np.stack([x[n:] for x, n in zip(logical, old)])
    vn = rand(b, snew, hk, d)
    q = rand(b, snew, h, d)
    cos, sin = rope_tables(64, rot) if rot else (None, None)
    results = []
    for lookup in ("table", "csr"):
        kc, vc = kp.copy(), np.zeros_like(kp)
        before_k, before_v = kc.copy(), vc.copy()
        if lookup == "table":
            q_rot = fmha.append_kv_cache(kc, vc, kn, vn, cache_seqlens=np.array(old, np.int32), block_table=table,
                                         rotary_cos=cos, rotary_sin=sin, rotary_interleaved=interleaved,
                                         q=q if rot else None, causal=True)
        else:
            q_rot = fmha.append_kv_cache(kc, vc, kn, vn, kv_indptr=indptr, kv_indices=indices, kv_last_page_len=last,
                                         rotary_cos=cos, rotary_sin=sin, rotary_interleaved=interleaved,
                                         q=q if rot else None, causal=True)
        written = np.zeros(kc.shape[:2], bool)
        for s in range(b):
            pos = old[s] + np.arange(snew)
            want = R.rope(kn[s], pos[:, None], cos, sin, interleaved) if rot else kn[s]
            for t in range(snew):
                pg, slot = table[s, pos[t] // page], pos[t] % page
                written[pg, slot] = True
                assert np.abs(kc[pg, slot] - want[t]).max() < 1e-5
                assert np.array_equal(vc[pg, slot], vn[s, t])
            if rot:
                assert np.abs(q_rot[s] - R.rope(q[s], pos[:, None], cos, sin, interleaved)).max() < 1e-5
        assert np.array_equal(kc[~written], before_k[~written]) and np.array_equal(vc[~written], before_v[~written])
        results.append((kc, vc, q_rot))
    assert all(np.array_equal(x, y) for x, y in zip(results[0][:2], results[1][:2]))


def test_append_kv_cache_csr_needs_the_appended_tokens():
    kp = rand(4, 4, 1, 16)
    before = kp.copy()
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule appendkv.capacity\]"):
        fmha.append_kv_cache(kp, kp.copy(), rand(1, 3, 1, 16), rand(1, 3, 1, 16), kv_indptr=[0, 1], kv_indices=[2],
                             kv_last_page_len=[2])
    assert np.array_equal(kp, before)
