/* SPDX-License-Identifier: MIT */
/*
 * fwd_mma.cuh: the sm80 forward kernel (runs on A100 and H100): FlashAttention-2's
 * design on mma.sync.m16n8k16.
 *
 * A CTA owns TILE_M query rows of one (batch, head); each of its WARPS warps owns
 * TILE_M / WARPS rows as 16-row slabs. K and V tiles (TILE_N keys) are double-buffered
 * in shared memory and loaded with cp.async: tile j+1 loads while tile j computes. Each
 * slab runs S = Q K^T, the mask, bias and online softmax (exp2) and O += P V in turn, so
 * only one slab's S tile is live (two-slab tiles fit in registers). S is reused directly
 * as the A operand of P V (the m16n8 accumulator layout is the m16k16 operand layout);
 * operands come from shared memory through ldmatrix.
 *
 * Variants: variant.cuh's; FMHA_TILE_M, FMHA_TILE_N, FMHA_WARPS the tile shape
 * (TILE_M = 16 * WARPS * slabs). FMHA_SPLIT=1 makes it the splitkv family's first stage
 * (flash-decoding): grid z covers KV heads x splits, a CTA visits only its split's key
 * tiles and writes fp32 partials (fwd_params.h) for the combine stage instead of O.
 * Its rows pack the query heads of one KV head (GQA), so K and V are read once per KV
 * head: packed row r is query head r / pack_rows of the group, position r % pack_rows
 * (pack_rows: 8 for up to 8 query rows, else seqlen_q rounded up to 16, 32 or a multiple
 * of TILE_M, so that a block's positions lie in [pos0, pos0 + TILE_M)); each half-row
 * carries its own head's position, slope and bias rows (packed_rows_t, softmax.cuh). Compiles under nvcc and NVRTC with the embedded headers
 * of src/cuda/kernels (fwd/, device/).
 */
#include "fwd_params.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 128
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 64
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 4
#endif
#include "variant.cuh"

#define NTHREADS (32 * FMHA_WARPS)
#define ROWS_PER_WARP (TM / FMHA_WARPS)
#define SLABS (ROWS_PER_WARP / 16)
#define PAD 8 /* halves of padding per smem row: row strides of 4 mod 32 words, so the 8x4
                 fragment loads of a warp hit 32 distinct banks */
/* The split-KV stage reads K and V once, so its copies are its bound: on a contiguous
 * cache its K and V rows are whole and swizzled (mma.cuh tile_offset; a cp.async fill
 * into padded rows runs 4% under the swizzled rate, perf-notes run 99), as in the decode
 * kernel, up to hd128: +4-5% (run 105). Its paged copies lost 18% with them and keep the
 * padded rows; so does the forward, with its exact instruction stream. src/core/specs.c
 * (fmha__smem_bytes) sizes the same. */
#define SWZ_KV (FMHA_SPLIT && !FMHA_PAGED && KV_ROWS_SWIZZLABLE(DQK, DV))
#define SQ_STRIDE (DQK + PAD)
#define SK_STRIDE (SWZ_KV ? DQK : DQK + PAD)
#define SV_STRIDE (SWZ_KV ? DV : DV + PAD)
/* JOINT_SLABS: a warp with several slabs runs S = Q K^T and O += P V for all of them
 * together, each K and V fragment read from shared memory once a tile, not once a slab
 * (mma.cuh's _slabs steps); the softmax still goes slab by slab. Else each slab's S,
 * softmax and P V in turn, which keeps one slab's S live instead of all of them. Joint on
 * 32-key tiles only: hd128 m128 n32 w4 +2-5% unmasked, level causal; on m128 n64 w4 it
 * lost 9-12% unmasked and 1-2% causal (H200, forced, perf-notes run 174). */
#ifndef JOINT_SLABS
#define JOINT_SLABS (TN <= 32)
#endif

static_assert(DQK % 16 == 0 && DV % 16 == 0, "head dims must be multiples of 16");
static_assert(TN % 16 == 0, "TILE_N must be a multiple of 16");
#if FMHA_DROPOUT && FMHA_SPLIT
#error "the split-KV stage takes no dropout (rule inference.dropout)"
#endif
#if defined(FMHA_STAGES) && FMHA_STAGES != 2
#error "fwd_mma double-buffers K and V: FMHA_STAGES must be 2"
#endif
static_assert(ROWS_PER_WARP % 16 == 0 && SLABS >= 1, "TILE_M must be 16 * WARPS * slabs");

#include "common.cuh"
#if FMHA_DROPOUT
#include "dropout.cuh"
#endif
#include "epilogue.cuh"
#include "mask.cuh"
#include "mma.cuh"
#include "sequence.cuh"
#include "softmax.cuh"

/* Key tile n of K and V into dk and dv: contiguous rows, or with FMHA_PAGED each row from
 * its page (paged.cuh); rows past the keys or in no page are zeros. A macro, so that the
 * contiguous kernels keep their exact instruction stream (perf-notes run 23). */
#if FMHA_PAGED
/* One thread's rows of a paged K (or V) tile, in batches of LOOKUPS: a batch's page
 * lookups are issued together, so their latencies overlap, then its copies; V reuses K's
 * lookups when the rows match. Larger batches spill (registers of the lookups). */
#define LOOKUPS 4
template <typename Params>
__device__ __forceinline__ void load_paged_kv(elem_t *dk, elem_t *dv, const elem_t *K, const elem_t *V, const Params &p,
                                              const seq_t &s, int n0, int tid)
{
    constexpr int CK = DQK / 8, CV = DV / 8, IT = (TN * CK + NTHREADS - 1) / NTHREADS;
#pragma unroll 1
    for (int i0 = 0; i0 < IT; i0 += LOOKUPS) {
        int pg[LOOKUPS], slot[LOOKUPS];
#pragma unroll
        for (int u = 0; u < LOOKUPS; u++) {
            const int c = tid + (i0 + u) * NTHREADS, j = n0 + c / CK, q = (int)fmha_div(j, p.page_div);
            pg[u] = c < TN * CK && j < s.sk ? page_of_entry(p, s.pages, q) : -1;
            slot[u] = j - q * p.page_size;
        }
#pragma unroll
        for (int u = 0; u < LOOKUPS; u++) {
            const int c = tid + (i0 + u) * NTHREADS, r = c / CK, k = (c % CK) * 8;
            if (c < TN * CK) {
                const long long row = pg[u] >= 0 ? pg[u] * p.k_page + (long long)slot[u] * p.k_row : 0;
                cp_async16(dk + r * SK_STRIDE + k, K + row + k, pg[u] >= 0 ? 16 : 0);
                if (CV == CK) {
                    const long long vrow = pg[u] >= 0 ? pg[u] * p.v_page + (long long)slot[u] * p.v_row : 0;
                    cp_async16(dv + r * SV_STRIDE + k, V + vrow + k, pg[u] >= 0 ? 16 : 0);
                }
            }
        }
    }
    if (CV != CK)
        for (int c = tid; c < TN * CV; c += NTHREADS) {
            const int r = c / CV, k = (c % CV) * 8, j = n0 + r, q = (int)fmha_div(j, p.page_div);
            const int g = j < s.sk ? page_of_entry(p, s.pages, q) : -1;
            const long long vrow = g >= 0 ? g * p.v_page + (long long)(j - q * p.page_size) * p.v_row : 0;
            cp_async16(dv + r * SV_STRIDE + k, V + vrow + k, g >= 0 ? 16 : 0);
        }
}
#define LOAD_KV(dk, dv, n) load_paged_kv(dk, dv, K, V, p, seq, n, tid)
#else
#define LOAD_KV(dk, dv, n)                                                                       \
    do {                                                                                         \
        load_tile<TN, DQK, SK_STRIDE, NTHREADS, false, SWZ_KV>(dk, K + (long long)(n) * p.k_row, p.k_row, sk - (n), tid); \
        load_tile<TN, DV, SV_STRIDE, NTHREADS, false, SWZ_KV>(dv, V + (long long)(n) * p.v_row, p.v_row, sk - (n), tid); \
    } while (0)
#endif

#if FMHA_SPLIT
/* The packed Q tile (see the top): row r of the block is query head h0 + (m0 + r) /
 * pack_rows of the group at position (m0 + r) % pack_rows; rows past the group or the
 * sequence are zeros. Q points at the group's first head, row 0. */
template <typename Params>
__device__ __forceinline__ void load_q_packed(elem_t *dst, const elem_t *Q, const Params &p, int m0, int group, int sq,
                                              int tid)
{
    const int chunks = DQK / 8;
    for (int c = tid; c < TM * chunks; c += NTHREADS) {
        const int r = c / chunks, k = (c % chunks) * 8, gq = (m0 + r) / p.pack_rows, i = (m0 + r) % p.pack_rows;
        const bool ok = gq < group && i < sq;
        const elem_t *src = Q + (ok ? (long long)i * p.q_row + (long long)gq * p.q_head : 0) + k;
        cp_async16(dst + r * SQ_STRIDE + k, src, ok ? 16 : 0);
    }
}
#endif

/* One 16-row slab's scores of key tile n0 (r: the lane's first row) to the log2 domain,
 * masked, then the online softmax update (alpha: the factors of O's rows) and dropout. */
__device__ __forceinline__ void softmax_slab(float (*sacc)[4], float *row_max, float *row_sum, float *alpha,
                                             const fmha_fwd_params_t &p, bool need_mask, int b, int h, int r, int n0,
                                             int sq, int sk, int diag, int t, float slope, const elem_t *bias)
{
#if FMHA_SPLIT
    /* each half-row's query head (clamped past the group: computed, not stored) and position */
    packed_rows_t rows;
    rows.sq = sq, rows.sk = sk, rows.diag = diag, rows.t = t;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int rh = r + 8 * half, hr = min(h + rh / p.pack_rows, p.heads_q - 1);
        rows.i[half] = rh % p.pack_rows;
        rows.slope[half] = alibi_slope(p, b, hr);
        rows.bias[half] = bias_rows(p, b, hr);
    }
#else
    const tile_rows_t rows = {r, sq, sk, diag, t};
#endif
    online_softmax_tile(need_mask, &sacc[0][0], row_max, row_sum, alpha, p, rows, n0, slope, bias);
#if FMHA_DROPOUT
    apply_dropout<TN>(&sacc[0][0], p, b, h, r, n0, t); /* the row sums keep every term */
#endif
}

/* ------------------------------------------------------------------ kernel */

extern "C" __global__ void __launch_bounds__(NTHREADS) fmha_fwd_mma(const fmha_fwd_params_t p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    elem_t *sQ = (elem_t *)smem_raw;
    elem_t *sK0 = sQ + TM * SQ_STRIDE; /* two K buffers, then two V buffers */
    elem_t *sV0 = sK0 + 2 * TN * SK_STRIDE;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4; /* fragment row and column pair */
    /* Grid: unmasked, (m-blocks, batch, heads), so that the CTAs running together share
     * one head's K/V in L2. Masked, longest-first within groups of heads that fit in L2
     * (masked_cta_coords). */
#if FMHA_SPLIT
    const int mblock = (int)blockIdx.x, b = blockIdx.y, hk = (int)blockIdx.z % p.heads_kv,
              split = (int)blockIdx.z / p.heads_kv;
    const int group = p.group, h = hk * group; /* h: the group's first query head */
#elif FMHA_MASK
    int mblock, b, h;
    masked_cta_coords((int)blockIdx.x, (p.seqlen_q + TM - 1) / TM, p.heads_q, p.batch * p.heads_q, p.l2_pairs,
                      p.l2_head_pairs, p.l2_tail_pair, &mblock, &b, &h);
#else
    const int mblock = (int)blockIdx.x, b = blockIdx.y, h = blockIdx.z;
#endif
    const int m0 = mblock * TM;
    const int mat = lane / 8, mrow = lane % 8; /* ldmatrix: which matrix and row this lane addresses */
#if !FMHA_SPLIT
    const int hk = h / p.group;
#endif

    const seq_t seq = sequence_of(p, b, h, hk);
    const int sq = seq.sq, sk = seq.sk;
#if FMHA_SPLIT
    const int pos0 = p.pack_rows >= TM ? m0 % p.pack_rows : 0; /* the block's first position */
    if (pos0 >= sq) return;
#else
    const int pos0 = m0;
#if FMHA_DROPOUT
    if (p.dropout_mask) write_keep_mask<TM, NTHREADS>(p, b, h, m0, sq, sk, tid); /* rows past sq too */
#endif
    if (m0 >= sq) return;
#endif
    const elem_t *Q = (const elem_t *)p.q + seq.q;
    const elem_t *K = (const elem_t *)p.k + seq.k;
    const elem_t *V = (const elem_t *)p.v + seq.v;
    const int diag = p.bottom_right ? sk - sq : 0;
#if FMHA_SPLIT
    /* this split's tiles only: [lo, lo + per) within the rows' visible ones */
    key_tiles_t kt = key_tiles(p, pos0, sk, diag);
    const int per = split_keys(p, sk), lo = split * per;
    if (lo + per < kt.end) kt.end = lo + per;
#else
    const key_tiles_t kt = key_tiles(p, m0, sk, diag); /* the key tiles this CTA visits */
#endif

    float o[SLABS][DV / 8][4];
    float row_max[SLABS][2], row_sum[SLABS][2];
    init_softmax_state<SLABS, DV>(o, row_max, row_sum);

#if FMHA_SPLIT
    const float slope = 0.f; /* each half-row's own: softmax_slab */
    const elem_t *bias = nullptr;
#else
    const float slope = alibi_slope(p, b, h);
    const elem_t *bias = bias_rows(p, b, h);
#endif

    /* Prologue: one cp.async group per key tile, the first also carrying Q. Every loop
     * iteration commits exactly one group (possibly empty), so waiting for all but the
     * newest group means "the current tile has landed". */
    int n0 = next_tile(-1, kt);
#if FMHA_SPLIT
    while (n0 >= 0 && n0 < lo) n0 = next_tile(n0, kt);
#endif
    int n1 = n0 >= 0 ? next_tile(n0, kt) : -1;
#if FMHA_SPLIT
    load_q_packed(sQ, Q, p, m0, group, sq, tid);
#else
    load_tile<TM, DQK, SQ_STRIDE, NTHREADS>(sQ, Q + (long long)m0 * p.q_row, p.q_row, sq - m0, tid);
#endif
    if (n0 >= 0) {
        LOAD_KV(sK0, sV0, n0);
    }
    cp_async_commit();
    if (n1 >= 0) {
        LOAD_KV(sK0 + TN * SK_STRIDE, sV0 + TN * SV_STRIDE, n1);
    }
    cp_async_commit();

    for (int buf = 0; n0 >= 0; buf ^= 1) {
        cp_async_wait<1>();
        __syncthreads();
        const elem_t *sK = sK0 + buf * TN * SK_STRIDE, *sV = sV0 + buf * TN * SV_STRIDE;

        /* only tiles crossing the sequence end or a window edge test each score */
        const bool need_mask = tile_needs_mask(p, n0, pos0, sk, diag);
#if JOINT_SLABS
        /* S = Q K^T for all of the warp's slabs together: each K fragment is read once */
        float sacc[SLABS][TN / 8][4];
#pragma unroll
        for (int s = 0; s < SLABS; s++)
#pragma unroll
            for (int j = 0; j < TN / 8; j++) sacc[s][j][0] = sacc[s][j][1] = sacc[s][j][2] = sacc[s][j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < DQK / 16; kk++) {
            u32 a[SLABS][4];
#pragma unroll
            for (int s = 0; s < SLABS; s++) ldmatrix_a<SQ_STRIDE>(a[s], sQ, warp * ROWS_PER_WARP + s * 16, kk, mat, mrow);
            mma_qk_step_slabs<SLABS, TN, SK_STRIDE, SWZ_KV>(sacc, a, sK, kk, mat, mrow);
        }
#pragma unroll
        for (int s = 0; s < SLABS; s++) {
            const int r0 = warp * ROWS_PER_WARP + s * 16;
            float alpha[2];
            softmax_slab(sacc[s], row_max[s], row_sum[s], alpha, p, need_mask, b, h, m0 + r0 + g, n0, sq, sk, diag, t,
                         slope, bias);
            rescale_o<DV>(&o[s][0][0], alpha);
        }
        mma_pv_slabs<SLABS, TN, DV, SV_STRIDE, SWZ_KV>(o, sacc, sV, mat, mrow); /* O += P V, each V fragment read once */
#else
#pragma unroll
        for (int s = 0; s < SLABS; s++) {
            const int r0 = warp * ROWS_PER_WARP + s * 16;
            float sacc[TN / 8][4];
#pragma unroll
            for (int j = 0; j < TN / 8; j++) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < DQK / 16; kk++) { /* S = Q K^T */
                u32 a[4];
                ldmatrix_a<SQ_STRIDE>(a, sQ, r0, kk, mat, mrow);
                mma_qk_step<TN, SK_STRIDE, SWZ_KV>(sacc, a, sK, kk, mat, mrow);
            }
            float alpha[2];
            softmax_slab(sacc, row_max[s], row_sum[s], alpha, p, need_mask, b, h, m0 + r0 + g, n0, sq, sk, diag, t, slope,
                         bias);
            rescale_o<DV>(&o[s][0][0], alpha);
            mma_pv<TN, DV, SV_STRIDE, SWZ_KV>(o[s], sacc, sV, mat, mrow); /* O += P V */
        }
#endif

        __syncthreads(); /* every warp is done with this buffer: it may be refilled */
        const int n2 = n1 >= 0 ? next_tile(n1, kt) : -1;
        if (n2 >= 0) {
            LOAD_KV(sK0 + buf * TN * SK_STRIDE, sV0 + buf * TN * SV_STRIDE, n2);
        }
        cp_async_commit();
        n0 = n1;
        n1 = n2;
    }
    cp_async_wait<0>(); /* a CTA that saw no key tile still has Q in flight */

    /* Epilogue: normalise, add the sink term, write O and LSE (a split: its partials). */
#pragma unroll
    for (int s = 0; s < SLABS; s++)
#if FMHA_SPLIT
    {
        const int r = m0 + warp * ROWS_PER_WARP + s * 16 + g;
        const int heads[2] = {r / p.pack_rows < group ? h + r / p.pack_rows : -1,
                              (r + 8) / p.pack_rows < group ? h + (r + 8) / p.pack_rows : -1};
        const int rows[2] = {r % p.pack_rows, (r + 8) % p.pack_rows};
        store_partial<DV>(p, seq, b, heads, rows, split, &o[s][0][0], row_max[s], row_sum[s], t);
    }
#else
        store_o_lse<DV>(p, seq, h, &o[s][0][0], row_max[s], row_sum[s], m0 + warp * ROWS_PER_WARP + s * 16 + g, t);
#endif
}
