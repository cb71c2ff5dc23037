/* SPDX-License-Identifier: MIT */
/*
 * bwd_wgmma.cuh: the backward's main stage (dq_dk_dv) on sm90a: warp-specialised, wgmma.
 *
 * A CTA owns TILE_N = 128 keys of one (batch, KV head) and has three warpgroups. The last
 * is the producer: one thread copies K and V once and then, per item (a query head of the
 * group and an m-block of TILE_M rows that sees the keys), Q and dO by TMA into a
 * two-stage ring; a second warp copies the item's LSE and D rows beside them. Each of the
 * two consumer warpgroups owns 64 of the keys and, per item, computes
 *   S^T = K Q^T, dP^T = V dO^T      both operands K-major in shared memory, as the
 *                                   forward's S = Q K^T with the roles swapped
 *   P z, dS (scores_to_grads)       in the accumulator layout, as the sm80 kernel
 *   dV += (P z)^T dO, dK += dS^T Q  P and dS from registers as wgmma's A (the
 *                                   accumulator layout is the A layout), dO and Q read
 *                                   MN-major from the same tiles
 *   dQ = dS K                       dS^T through shared memory (both warpgroups' keys),
 *                                   A and B MN-major; each warpgroup takes 64 x 64 of
 *                                   dQ (TILE_M 64: half the columns; 128: half the rows)
 * and hands its dQ share to the producer's warps 2 and 3, the writers, taking items in
 * turn, through shared memory (one fp32 buffer in the accumulator's layout, dq_acc.cuh).
 * A writer adds the item's rows, one contiguous range of the accumulator, with one bulk
 * reduce-add (cp.reduce.async.bulk): the consumers neither issue atomics (the writer
 * measured +11-23% over the consumers' float2 atomics at hd64, perf-notes run 67) nor
 * wait for the deterministic mode's turn. dK and dV stay in registers; dK is scaled at the end, dQ
 * in convert_dq.
 *
 * Shared memory holds every tile in the 128-byte-swizzle layout TMA writes (fwd_wgmma.cuh's
 * load_sw128): rows of 64 elements, 16-byte chunk c of row r at c ^ (r % 8).
 *
 * FMHA_DETERMINISTIC: the writer adds an m-block's rows only in its turn (bwd_params.h's
 * semaphores), waiting for its reduce-adds to land before it passes the turn on. The
 * turn: after every key tile of the cohorts before (counted as bwd_mma.cuh counts them),
 * then the cohort's tiles in the order their walks reach the m-block (cohort_turn). The
 * j-th tile of a cohort starts its walk j m-blocks along, so the tiles, which start
 * together, reach an m-block one step apart, and later cohorts run a wave behind.
 *
 * Variants: variant.cuh's (masks, ALiBi, bias with dbias, soft-cap, sinks, dropout,
 * deterministic), batch mode; head dims 64 (TILE_M 128) and 128 (TILE_M 64). Group mode
 * runs on bwd_mma.cuh.
 */
#include "bwd_params.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 64
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 128
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 12
#endif
#include "variant.cuh"

#define CONSUMERS (TN / 64)
#define NTHREADS (128 * (CONSUMERS + 1))
/* dQ columns per consumer warpgroup: at TILE_M 64 each takes half of the head dim, at 128
 * half of the rows and all of it */
#define DQ_N (DQK * TM / 128)

static_assert(FMHA_WARPS == 4 * (CONSUMERS + 1), "wgmma backward: warps = 4 x (1 producer + consumers)");
static_assert(TN == 128, "wgmma backward: two consumer warpgroups of 64 keys");
static_assert(TM == 64 || TM == 128, "wgmma backward: m-blocks of 64 or 128 rows");
static_assert(DQK == DV && (DQK == 64 || DQK == 128), "wgmma backward: head dims 64 and 128");
static_assert(DQ_N == 64, "wgmma backward: each warpgroup's dQ is 64 x 64 (hd64 with tile_m 128, hd128 with 64)");
#if FMHA_GROUP || FMHA_SPLIT || FMHA_PAGED || FMHA_FP8
#error "the wgmma backward runs batch mode (bwd_mma.cuh runs group mode)"
#endif

#include "common.cuh"
#include "mask.cuh"
#include "sequence.cuh"
#include "sm90.cuh"
#if FMHA_DROPOUT
#include "dropout.cuh"
#endif
#include "bwd_common.cuh"

/* The producer's 24 registers and the consumers' 240 fill the pool of 3 x 168 (the
 * forward's split, fwd_wgmma.cuh REG_SPLIT). */
#define PRODUCER_REGS 24
#define CONSUMER_REGS 240

/* An item's query head and first row: heads of the group in turn, each over the per_head
 * m-blocks from mb_lo that see the key tile, ascending from the rot-th and wrapping. The
 * deterministic mode rotates the j-th key tile of a cohort by j, so that the tiles of a
 * cohort, which start together, reach an m-block one after another, not all at once. */
__device__ __forceinline__ int item_head(int it, int h0, int per_head) { return h0 + it / per_head; }
__device__ __forceinline__ int item_row(int it, int mb_lo, int per_head, int rot)
{
    const int x = it % per_head + rot;
    return (mb_lo + (x >= per_head ? x - per_head : x)) * TM;
}

#if FMHA_DETERMINISTIC
/* The deterministic mode's turn of item `it` (query head h, m-block at m0) of the cohort's
 * j-th key tile: every tile of the cohorts before adds first (dq_turn), then the cohort's
 * tiles in the order of their walks' steps there, ties by j. Lane l of the calling warp
 * holds tile first + l's m-blocks [mlo, mlo + mlen) (mlen 0: none, or no such tile) and
 * its rotation mrot. */
__device__ __forceinline__ int cohort_turn(const fmha_bwd_params_t &p, int it, int h, int h0, int m0, int sk,
                                           int diag, int first, int j, int lane, int mlo, int mlen, int mrot)
{
    const int mb = m0 / TM;
    bool before = false;
    if (mlen > 0 && mb >= mlo && mb < mlo + mlen) {
        const int x = mb - mlo - mrot; /* the lane's tile's step there, as item_row walks */
        const int step = (h - h0) * mlen + (x < 0 ? x + mlen : x);
        before = step < it || (step == it && lane < j);
    }
    return dq_turn(p, m0, sk, diag, first) + __popc(__ballot_sync(0xffffffffu, before));
}
#endif

/* Bulk reduce-add of `bytes` (a multiple of 16) from shared to global memory, fp32, in
 * the thread's bulk group (committed and waited for with sm90.cuh's bulk_commit,
 * bulk_wait_read and bulk_wait). */
__device__ __forceinline__ void bulk_reduce_add_f32(float *dst, const float *src, int bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(smem_addr(src)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void fence_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
    fmha_bwd_wgmma(const fmha_bwd_params_t p, const __grid_constant__ fmha_bwd_tma_maps_t tma)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    /* every swizzled tile starts 1024-aligned (the launch asks for 1 KiB of slack) */
    elem_t *sK = (elem_t *)(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
    elem_t *sV = sK + TN * DQK;
    elem_t *sQ0 = sV + TN * DV;          /* two stages of Q, */
    elem_t *sdO0 = sQ0 + 2 * TM * DQK;   /* of dO, */
    elem_t *sdS0 = sdO0 + 2 * TM * DV;   /* two buffers of dS^T (TN rows of TM) */
    float *sdQ = (float *)(sdS0 + 2 * TN * TM); /* the item's dQ, TM rows as in dq_acc */
    float *sL0 = sdQ + TM * DQK, *sD0 = sL0 + 2 * TM; /* two stages of the rows' LSE and D */
    u64 *bars = (u64 *)(sD0 + 2 * TM);
    u64 *kv_full = bars, *q_full = bars + 1, *q_empty = bars + 3, *dq_full = bars + 5, *dq_empty = bars + 7;

    const int tid = threadIdx.x, wg = tid / 128;
    const bwd_cta_t cta = bwd_cta(p);
    const int nb = cta.nb, n0 = nb * TN, b = cta.b, hk = cta.hk;
    const int group = p.f.group, h0 = hk * group;
    const seq_t seq = sequence_of(p.f, b, h0, hk);
    const int sq = seq.sq, sk = seq.sk, diag = p.f.bottom_right ? sk - sq : 0;
    int mb_lo, mb_hi;
    mblocks_of_key_tile(p.f, n0, sq, sk, diag, &mb_lo, &mb_hi);
    const int per_head = mb_hi - mb_lo + 1, items = per_head * group;
    const int rot = FMHA_DETERMINISTIC && per_head > 0 ? (nb - cta.first) % per_head : 0;
    const long long tok0 = (long long)b * p.f.seqlen_q; /* the rows of D and of the dQ accumulator */

    if (tid == 0) {
        mbar_init(kv_full, 1);
        for (int i = 0; i < 2; i++) {
            mbar_init(&q_full[i], 1 + 32); /* the TMA thread's expect_tx and the LSE/D warp's lanes */
            mbar_init(&q_empty[i], 128 * CONSUMERS);
        }
        for (int i = 0; i < 2; i++) mbar_init(&dq_full[i], 128 * CONSUMERS); /* one a writer warp */
        mbar_init(dq_empty, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == CONSUMERS) {
        /* ---------------- producer */
        SM90_SETMAXNREG(dec, PRODUCER_REGS);
        const int ptid = tid - 128 * CONSUMERS;
        if (ptid == 0) {
            if (items > 0) { /* a CTA with no item leaves no copy in flight */
                mbar_expect_tx(kv_full, TN * (DQK + DV) * (int)sizeof(elem_t));
                for (int cb = 0; cb < DQK / 64; cb++)
                    tma_load_4d(sK + cb * TN * 64, tma.k, cb * 64, n0, hk, b, kv_full);
                for (int cb = 0; cb < DV / 64; cb++)
                    tma_load_4d(sV + cb * TN * 64, tma.v, cb * 64, n0, hk, b, kv_full);
            }
            for (int it = 0; it < items; it++) {
                const int st = it & 1, h = item_head(it, h0, per_head), m0 = item_row(it, mb_lo, per_head, rot);
                if (it >= 2) mbar_wait(&q_empty[st], ((it - 2) >> 1) & 1);
                mbar_expect_tx(&q_full[st], TM * (DQK + DV) * (int)sizeof(elem_t));
                for (int cb = 0; cb < DQK / 64; cb++)
                    tma_load_4d(sQ0 + st * TM * DQK + cb * TM * 64, tma.q, cb * 64, m0, h, b, &q_full[st]);
                for (int cb = 0; cb < DV / 64; cb++)
                    tma_load_4d(sdO0 + st * TM * DV + cb * TM * 64, tma.dout, cb * 64, m0, h, b, &q_full[st]);
            }
        } else if (ptid >= 32 && ptid < 64) {
            /* the rows' LSE and D (zeros past the sequence: those rows are masked) */
            const int lane = ptid - 32;
            const float *lse = (const float *)p.f.lse + seq.lse, *dsum = (const float *)p.dsum;
            for (int it = 0; it < items; it++) {
                const int st = it & 1, h = item_head(it, h0, per_head), m0 = item_row(it, mb_lo, per_head, rot);
                if (it >= 2) mbar_wait(&q_empty[st], ((it - 2) >> 1) & 1);
                for (int r = lane; r < TM; r += 32) {
                    const int i = m0 + r;
                    float l = 0.f, d = 0.f;
                    if (i < sq) {
                        l = lse[(long long)(h - h0) * p.f.lse_head + (long long)i * p.f.lse_row];
                        d = dsum[(tok0 + i) * p.f.heads_q + h];
                    }
                    sL0[st * TM + r] = l;
                    sD0[st * TM + r] = d;
                }
                mbar_arrive(&q_full[st]);
            }
        } else if (ptid >= 64) {
            /* the dQ writers, warps 2 and 3 taking the items in turn (so that one's wait for
             * its adds to land, in the deterministic mode, overlaps the other's next item):
             * each item's rows (those of the sequence) into the accumulator, where they
             * are as many consecutive rows as in the buffer: one bulk reduce-add */
            const int writer = (ptid - 64) / 32, lane = ptid % 32;
#if FMHA_DETERMINISTIC
            int mlo = 0, mhi = -1; /* this lane's key tile of the cohort: its m-blocks */
            if (lane < cta.size) mblocks_of_key_tile(p.f, (cta.first + lane) * TN, sq, sk, diag, &mlo, &mhi);
            const int mlen = mhi - mlo + 1, mrot = mlen > 0 ? lane % mlen : 0;
#endif
            for (int it = writer; it < items; it += 2) {
                const int h = item_head(it, h0, per_head), m0 = item_row(it, mb_lo, per_head, rot);
                mbar_wait(&dq_full[it & 1], (it >> 1) & 1);
#if FMHA_DETERMINISTIC
                const int *sem = dq_semaphore(p, b, h, m0);
                const int turn = cohort_turn(p, it, h, h0, m0, sk, diag, cta.first, nb - cta.first, lane, mlo, mlen, mrot);
                if (lane == 0) wait_turn(sem, turn);
                __syncwarp();
                fence_async_global(); /* the previous tiles' adds, seen through the turn, before ours */
#endif
                if (lane == 0) {
                    bulk_reduce_add_f32((float *)p.dq_acc + dq_acc_row(p, tok0 + m0, h, DQK), sdQ,
                                        min(TM, sq - m0) * DQK * 4);
                    bulk_commit();
                    bulk_wait_read();
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(dq_empty); /* the buffer is free */
#if FMHA_DETERMINISTIC
                bulk_wait(); /* this tile's adds have landed: pass the turn on */
                fence_async_global();
                __threadfence();
                __syncwarp();
                if (lane == 0) atomicAdd((int *)sem, 1);
#endif
            }
            bulk_wait();
        }
        return;
    }

    /* ---------------- consumers: 64 keys per warpgroup */
    SM90_SETMAXNREG(inc, CONSUMER_REGS);
    const int ctid = tid % 128, warp = ctid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int key0 = n0 + wg * 64 + warp * 16 + g; /* this thread's first key (and key0 + 8) */
    /* this warpgroup's 64 keys, in each 64-element block of K and V */
    const char *sKw = (const char *)sK + wg * 64 * 128, *sVw = (const char *)sV + wg * 64 * 128;
    /* dQ's share: TILE_M 64, columns [64 wg, +64) of all rows; 128, rows [64 wg, +64) */
    const int dq_rows = TM == 128 ? wg * 64 : 0, dq_cols = TM == 128 ? 0 : wg * 64;

    float dk[DQK / 2], dv[DV / 2]; /* m64 x head dim, fp32 */
#pragma unroll
    for (int i = 0; i < DQK / 2; i++) dk[i] = 0.f;
#pragma unroll
    for (int i = 0; i < DV / 2; i++) dv[i] = 0.f;

    if (items > 0) mbar_wait(kv_full, 0);
    for (int it = 0; it < items; it++) {
        const int st = it & 1, h = item_head(it, h0, per_head), m0 = item_row(it, mb_lo, per_head, rot);
        const char *cQ = (const char *)(sQ0 + st * TM * DQK), *cdO = (const char *)(sdO0 + st * TM * DV);
        mbar_wait(&q_full[st], (it >> 1) & 1);

        /* S^T = K Q^T and dP^T = V dO^T (a k16 step is 32 bytes of a 128-byte row) */
        float s[TM / 2], dp[TM / 2];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < DQK / 16; kk++)
            WGMMA_SS(TM)(s, desc_sw128(sKw + (kk / 4) * (TN * 128) + (kk % 4) * 32, 16),
                         desc_sw128(cQ + (kk / 4) * (TM * 128) + (kk % 4) * 32, 16), kk);
#pragma unroll
        for (int kk = 0; kk < DV / 16; kk++)
            WGMMA_SS(TM)(dp, desc_sw128(sVw + (kk / 4) * (TN * 128) + (kk % 4) * 32, 16),
                         desc_sw128(cdO + (kk / 4) * (TM * 128) + (kk % 4) * 32, 16), kk);
        wgmma_commit();
        wgmma_wait_all();
        fence_regs<TM / 2>(s);
        fence_regs<TM / 2>(dp);

        /* P z into s, dS into dp */
        const bwd_item_t w = {b, h, m0, sq, sk, diag, alibi_slope(p.f, b, h), bias_rows(p.f, b, h)};
        const float *cL = sL0 + st * TM, *cD = sD0 + st * TM;
        if (block_needs_mask(p, m0, n0, sq, sk, diag))
            scores_to_grads<TM / 8, true>(p, w, s, dp, cL, cD, key0, t, true);
        else
            scores_to_grads<TM / 8, false>(p, w, s, dp, cL, cD, key0, t, true);
        /* both in wgmma's A layout, packed before any wgmma reads them (fwd_wgmma.cuh) */
        u32 pa[TM / 4], pds[TM / 4];
#pragma unroll
        for (int i = 0; i < TM / 4; i++) pa[i] = pack2(s[2 * i], s[2 * i + 1]), pds[i] = pack2(dp[2 * i], dp[2 * i + 1]);

        /* dV += (P z)^T dO, dK += dS^T Q: dO and Q MN-major (16 rows = 2048 bytes a k step;
         * LBO: from one 64-element block of the row to the next) */
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < TM / 16; kk++) WGMMA_RS(DV)(dv, pa + 4 * kk, desc_sw128(cdO + kk * 2048, TM * 128));
#pragma unroll
        for (int kk = 0; kk < TM / 16; kk++) WGMMA_RS(DQK)(dk, pds + 4 * kk, desc_sw128(cQ + kk * 2048, TM * 128));
        wgmma_commit();

        /* dS^T into this item's buffer: row = key, 64-element blocks of query rows. The
         * thread's rows are key0 - n0 and + 8, both = g (mod 8): chunk jj % 8 goes to
         * (jj ^ g) % 8, and a warp's stores of one jj fill 32 distinct banks. */
        char *sdS = (char *)(sdS0 + st * TN * TM);
#pragma unroll
        for (int jj = 0; jj < TM / 8; jj++)
#pragma unroll
            for (int half = 0; half < 2; half++)
                *(u32 *)(sdS + (jj / 8) * (TN * 128) + (key0 - n0 + 8 * half) * 128 + (((jj % 8) ^ g) * 16) + 4 * t) =
                    pds[2 * jj + half];
        fence_async_shared(); /* generic-proxy stores, read next by wgmma */
        asm volatile("bar.sync 1, %0;\n" ::"n"(128 * CONSUMERS) : "memory"); /* both warpgroups' keys */

        /* dQ = dS K over all TN keys: A = dS^T MN-major, B = K MN-major */
        float dq[32];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < TN / 16; kk++)
            wgmma_ss_n64<1, 1>(dq, desc_sw128(sdS + (dq_rows / 64) * (TN * 128) + kk * 2048, TN * 128),
                               desc_sw128((const char *)sK + (dq_cols / 64) * (TN * 128) + kk * 2048, TN * 128), kk);
        wgmma_commit();
        wgmma_wait_1(); /* dV and dK: Q and dO of this stage are free */
        fence_regs<DV / 2>(dv);
        fence_regs<DQK / 2>(dk);
        mbar_arrive(&q_empty[st]);
        wgmma_wait_all();
        fence_regs<32>(dq);
        /* dQ into the writer's buffer once it has read the previous item's */
        if (it > 0) mbar_wait(dq_empty, (it - 1) & 1);
        float *dqw = sdQ + (dq_rows + warp * 16 + g) * DQK; /* rows g and g + 8 of the slab: i % 8 = g */
#pragma unroll
        for (int d = 0; d < 8; d++)
#pragma unroll
            for (int half = 0; half < 2; half++)
                *(float2 *)(dqw + half * 8 * DQK + dq_acc_col(g, dq_cols + d * 8 + 2 * t, DQK)) =
                    make_float2(dq[4 * d + 2 * half], dq[4 * d + 2 * half + 1]);
        fence_async_shared(); /* read next by the bulk copies */
        mbar_arrive(&dq_full[it & 1]);
    }

    /* dK (times the scale) and dV of this thread's keys */
    elem_t *dK = (elem_t *)p.dk + (long long)b * p.dk_batch + (long long)hk * p.dk_head;
    elem_t *dV = (elem_t *)p.dv + (long long)b * p.dv_batch + (long long)hk * p.dv_head;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int j = key0 + 8 * half;
        if (j >= sk) continue;
#pragma unroll
        for (int d = 0; d < DQK / 8; d++)
            *(u32 *)(dK + (long long)j * p.dk_row + d * 8 + 2 * t) =
                pack2(dk[4 * d + 2 * half] * p.f.scale, dk[4 * d + 2 * half + 1] * p.f.scale);
#pragma unroll
        for (int d = 0; d < DV / 8; d++)
            *(u32 *)(dV + (long long)j * p.dv_row + d * 8 + 2 * t) = pack2(dv[4 * d + 2 * half], dv[4 * d + 2 * half + 1]);
    }
}
