/* SPDX-License-Identifier: MIT */
/*
 * bwd_mma.cuh: the backward's main stage (dq_dk_dv) on mma.sync.m16n8k16, sm80 and up:
 * FlashAttention-2's design, with the scores computed transposed.
 *
 * A CTA owns TILE_N keys of one (batch, KV head): K and V stay in shared memory, dK and
 * dV in registers. It walks every query head of the KV head's group and, for each, the
 * m-blocks (TILE_M query rows) that see its keys; Q, dO and the rows' LSE and D are
 * double-buffered (cp.async), so the next m-block loads while this one computes. Warp w
 * owns the 16-key slab w % (TILE_N / 16) and, when several warps share a slab, a share
 * of dK's and dV's columns. Per m-block each warp computes
 *   S^T = K Q^T and dP^T = V dO^T  (its slab x TILE_M; the forward's QK step with the roles
 *                                   of Q and K swapped, so the fragments need no transpose)
 *   P = exp2(S - LSE), dropout z, dS = P (dP z - D), the soft-cap chain, dbias = dS
 *   dV += (P z)^T dO, dK += dS^T Q (P and dS are already the A operands, as in P V)
 * then writes dS^T to shared memory, and the warps split dQ = dS K (TILE_M x head dim)
 * and add it to the fp32 accumulator in the workspace: atomics, or with
 * FMHA_DETERMINISTIC plain adds in key-tile order (bwd_params.h's semaphores).
 * dK is scaled at the end; dQ in convert_dq.
 *
 * Variants: variant.cuh's (FMHA_DROPOUT, FMHA_DBIAS, FMHA_DETERMINISTIC among them);
 * FMHA_TILE_M, FMHA_TILE_N, FMHA_WARPS the tile shape.
 */
#include "bwd_params.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 64
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 128
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 8
#endif
#include "variant.cuh"

#define NTHREADS (32 * FMHA_WARPS)
#define KSLABS (TN / 16)             /* 16-key slabs of the key tile */
#define WSPLIT (FMHA_WARPS / KSLABS) /* warps per slab, each with a share of dK's and dV's columns */
#define DQK_W (DQK / WSPLIT)
#define DV_W (DV / WSPLIT)
#define QSLABS (TM / 16)
/* dQ = dS K, TILE_M x DQK, over the warps: each a 16-row slab and a column group, or
 * several slabs */
#define DQ_GROUPS (FMHA_WARPS >= QSLABS ? FMHA_WARPS / QSLABS : 1)
#define DQ_SLABS (FMHA_WARPS >= QSLABS ? 1 : QSLABS / FMHA_WARPS)
#define DQ_COLS (DQK / DQ_GROUPS)
#define PAD 8 /* halves per smem row: conflict-free ldmatrix, as in the forward */
#define SK_STRIDE (DQK + PAD)
#define SV_STRIDE (DV + PAD)
#define SQ_STRIDE (DQK + PAD)
#define SDO_STRIDE (DV + PAD)
#define SDS_STRIDE (TM + PAD)

static_assert(TN % 16 == 0 && TM % 16 == 0, "tiles are multiples of 16");
static_assert(FMHA_WARPS % KSLABS == 0, "every key slab needs whole warps (TILE_N <= 16 * WARPS)");
static_assert(DQK_W % 16 == 0 && DV_W % 16 == 0, "a warp's share of dK/dV is a multiple of 16 columns");
static_assert(FMHA_WARPS % QSLABS == 0 || QSLABS % FMHA_WARPS == 0, "dQ's row slabs and the warps divide");
static_assert(DQ_COLS % 16 == 0, "dQ's column groups are multiples of 16");
#if FMHA_SPLIT || FMHA_PAGED
#error "the backward reads contiguous K/V"
#endif

#include "common.cuh"
#include "mask.cuh"
#include "mma.cuh"
#include "sequence.cuh"
#if FMHA_DROPOUT
#include "dropout.cuh"
#endif
#include "bwd_common.cuh"

extern "C" __global__ void __launch_bounds__(NTHREADS) fmha_bwd_mma(const fmha_bwd_params_t p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    elem_t *sK = (elem_t *)smem_raw;
    elem_t *sV = sK + TN * SK_STRIDE;
    elem_t *sQ0 = sV + TN * SV_STRIDE;  /* two buffers each of Q, dO, LSE and D */
    elem_t *sdO0 = sQ0 + 2 * TM * SQ_STRIDE;
    elem_t *sdS = sdO0 + 2 * TM * SDO_STRIDE;
    float *sL0 = (float *)(sdS + TN * SDS_STRIDE);
    float *sD0 = sL0 + 2 * TM;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4, mat = lane / 8, mrow = lane % 8;
    const int slab = warp % KSLABS, part = warp / KSLABS;
    const bwd_cta_t cta = bwd_cta(p);
    const int nb = cta.nb, b = cta.b, hk = cta.hk, n0 = nb * TN;
    const int group = p.f.group, h0 = hk * group;
    const seq_t seq = sequence_of(p.f, b, h0, hk);
    const int sq = seq.sq, sk = seq.sk;
    int tk0, alloc;
    key_rows(p, b, &tk0, &alloc);
    if (n0 >= alloc) return;
    const int diag = p.f.bottom_right ? sk - sq : 0;

    int mb_lo, mb_hi; /* the m-blocks that see this key tile */
    mblocks_of_key_tile(p.f, n0, sq, sk, diag, &mb_lo, &mb_hi);
    const int per_head = mb_hi - mb_lo + 1, items = per_head * group;
    /* item it: head h0 + it / per_head and an m-block of the range, ascending; in the
     * deterministic mode descending, so that every key tile of a head starts at the last
     * m-block together and the ordered adds wait for one add, not for the lower tiles'
     * whole walk down to this tile's diagonal (causal: they start earlier rows) */
    auto item_mblock = [&](int it) { return FMHA_DETERMINISTIC ? mb_hi - it % per_head : mb_lo + it % per_head; };

    const elem_t *K = (const elem_t *)p.f.k + seq.k, *V = (const elem_t *)p.f.v + seq.v;
#if FMHA_GROUP
    const long long do0 = seq.tq0 * p.do_row, tok0 = seq.tq0;
#else
    const long long do0 = (long long)b * p.do_batch, tok0 = (long long)b * p.f.seqlen_q;
#endif

    /* Q, dO, LSE and D of item `it` into buffer `buf`; rows past the sequence are zeros */
    auto load_item = [&](int it, int buf) {
        const int h = h0 + it / per_head, m0 = item_mblock(it) * TM;
        const elem_t *Q = (const elem_t *)p.f.q + seq.q + (long long)(h - h0) * p.f.q_head;
        const elem_t *dO = (const elem_t *)p.dout + do0 + (long long)h * p.do_head;
        load_tile_by_chunk<TM, DQK, SQ_STRIDE, NTHREADS>(sQ0 + buf * TM * SQ_STRIDE, Q + (long long)m0 * p.f.q_row,
                                                         p.f.q_row, sq - m0, tid);
        load_tile_by_chunk<TM, DV, SDO_STRIDE, NTHREADS>(sdO0 + buf * TM * SDO_STRIDE, dO + (long long)m0 * p.do_row,
                                                         p.do_row, sq - m0, tid);
        if (tid < TM) {
            const int i = m0 + tid, ok = i < sq ? 4 : 0, ic = i < sq ? i : 0;
            cp_async4(sL0 + buf * TM + tid,
                      (const float *)p.f.lse + seq.lse + (long long)(h - h0) * p.f.lse_head + (long long)ic * p.f.lse_row, ok);
            cp_async4(sD0 + buf * TM + tid, (const float *)p.dsum + (tok0 + ic) * p.f.heads_q + h, ok);
        }
    };

    float dk[DQK_W / 8][4], dv[DV_W / 8][4];
#pragma unroll
    for (int d = 0; d < DQK_W / 8; d++) dk[d][0] = dk[d][1] = dk[d][2] = dk[d][3] = 0.f;
#pragma unroll
    for (int d = 0; d < DV_W / 8; d++) dv[d][0] = dv[d][1] = dv[d][2] = dv[d][3] = 0.f;

    /* the key tile and the first item in one group; each iteration then commits one */
    load_tile_by_chunk<TN, DQK, SK_STRIDE, NTHREADS>(sK, K + (long long)n0 * p.f.k_row, p.f.k_row, sk - n0, tid);
    load_tile_by_chunk<TN, DV, SV_STRIDE, NTHREADS>(sV, V + (long long)n0 * p.f.v_row, p.f.v_row, sk - n0, tid);
    if (items > 0) load_item(0, 0);
    cp_async_commit();

    for (int it = 0; it < items; it++) {
        const int buf = it & 1, h = h0 + it / per_head, mb = item_mblock(it), m0 = mb * TM;
        cp_async_wait<0>();
        __syncthreads(); /* this item landed; every warp is done with the other buffer */
        if (it + 1 < items) load_item(it + 1, buf ^ 1);
        cp_async_commit();
        const elem_t *cQ = sQ0 + buf * TM * SQ_STRIDE, *cdO = sdO0 + buf * TM * SDO_STRIDE;
        const float *cL = sL0 + buf * TM, *cD = sD0 + buf * TM;

        /* S^T = K Q^T and dP^T = V dO^T for this warp's slab */
        float st[TM / 8][4], dpt[TM / 8][4];
#pragma unroll
        for (int j = 0; j < TM / 8; j++)
            st[j][0] = st[j][1] = st[j][2] = st[j][3] = dpt[j][0] = dpt[j][1] = dpt[j][2] = dpt[j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < DQK / 16; kk++) {
            u32 a[4];
            ldmatrix_a<SK_STRIDE>(a, sK, slab * 16, kk, mat, mrow);
            mma_qk_step<TM, SQ_STRIDE>(st, a, cQ, kk, mat, mrow);
        }
#pragma unroll
        for (int kk = 0; kk < DV / 16; kk++) {
            u32 a[4];
            ldmatrix_a<SV_STRIDE>(a, sV, slab * 16, kk, mat, mrow);
            mma_qk_step<TM, SDO_STRIDE>(dpt, a, cdO, kk, mat, mrow);
        }

        /* P, dropout, dS; st becomes P z (dV's operand), dpt dS with the soft-cap chain
         * (dK's and dQ's) */
        const bwd_item_t wi = {b, h, m0, sq, sk, diag, alibi_slope(p.f, b, h), bias_rows(p.f, b, h)};
        const int key0 = n0 + slab * 16 + g;
        if (block_needs_mask(p, m0, n0, sq, sk, diag))
            scores_to_grads<TM / 8, true>(p, wi, &st[0][0], &dpt[0][0], cL, cD, key0, t, part == 0);
        else
            scores_to_grads<TM / 8, false>(p, wi, &st[0][0], &dpt[0][0], cL, cD, key0, t, part == 0);

        /* dV += (P z)^T dO and dK += dS^T Q over this warp's columns */
        mma_pv<TM, DV_W, SDO_STRIDE>(dv, st, cdO + part * DV_W, mat, mrow);
        mma_pv<TM, DQK_W, SQ_STRIDE>(dk, dpt, cQ + part * DQK_W, mat, mrow);

        /* dS^T into shared memory for dQ (one warp per slab writes it) */
        if (part == 0) {
#pragma unroll
            for (int jj = 0; jj < TM / 8; jj++)
#pragma unroll
                for (int half = 0; half < 2; half++)
                    *(u32 *)(sdS + (slab * 16 + g + 8 * half) * SDS_STRIDE + jj * 8 + 2 * t) =
                        pack2(dpt[jj][2 * half], dpt[jj][2 * half + 1]);
        }
        __syncthreads();

        /* dQ = dS K: A from dS^T by ldmatrix.trans, B = K row-major as V in P V */
#if FMHA_DETERMINISTIC
        const int *sem = dq_semaphore(p, b, h, m0);
        if (tid == 0) wait_turn(sem, dq_turn(p, m0, sk, diag, nb));
        __syncthreads();
#endif
#pragma unroll
        for (int qs = 0; qs < DQ_SLABS; qs++) {
            const int qslab = FMHA_WARPS >= QSLABS ? warp % QSLABS : warp + qs * FMHA_WARPS;
            const int col0 = FMHA_WARPS >= QSLABS ? warp / QSLABS * DQ_COLS : 0;
            float acc[DQ_COLS / 8][4];
#pragma unroll
            for (int d = 0; d < DQ_COLS / 8; d++) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < TN / 16; kk++) {
                u32 a[4];
                ldmatrix_x4_trans(a, sdS + (kk * 16 + (mat / 2) * 8 + mrow) * SDS_STRIDE + qslab * 16 + (mat % 2) * 8);
#pragma unroll
                for (int d = 0; d < DQ_COLS / 8; d += 2) {
                    u32 bf[4];
                    ldmatrix_x4_trans(bf, sK + (kk * 16 + (mat % 2) * 8 + mrow) * SK_STRIDE + col0 + (d + mat / 2) * 8);
                    mma16816(acc[d], a, bf);
                    mma16816(acc[d + 1], a, bf + 2);
                }
            }
            const int r0 = m0 + qslab * 16;
            add_dq<DQ_COLS>(p, &acc[0][0], tok0, h, r0, sq, col0, g, t);
        }
#if FMHA_DETERMINISTIC
        __threadfence();
        __syncthreads();
        if (tid == 0) atomicAdd((int *)sem, 1);
#endif
    }

    cp_async_wait<0>(); /* a CTA with no item still has its key tile in flight */

    /* dK (times the scale) and dV rows below the allocated keys; [sk, alloc) get zeros */
#if FMHA_GROUP
    const long long dk0 = (long long)tk0 * p.dk_row, dv0 = (long long)tk0 * p.dv_row;
#else
    const long long dk0 = (long long)b * p.dk_batch, dv0 = (long long)b * p.dv_batch;
#endif
    elem_t *dK = (elem_t *)p.dk + dk0 + (long long)hk * p.dk_head + part * DQK_W;
    elem_t *dV = (elem_t *)p.dv + dv0 + (long long)hk * p.dv_head + part * DV_W;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int j = n0 + slab * 16 + g + 8 * half;
        if (j >= alloc) continue;
#pragma unroll
        for (int d = 0; d < DQK_W / 8; d++)
            *(u32 *)(dK + (long long)j * p.dk_row + d * 8 + 2 * t) =
                pack2(dk[d][2 * half] * p.f.scale, dk[d][2 * half + 1] * p.f.scale);
#pragma unroll
        for (int d = 0; d < DV_W / 8; d++)
            *(u32 *)(dV + (long long)j * p.dv_row + d * 8 + 2 * t) = pack2(dv[d][2 * half], dv[d][2 * half + 1]);
    }
}
