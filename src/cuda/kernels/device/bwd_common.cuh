/* SPDX-License-Identifier: MIT */
/*
 * bwd_common.cuh: what the backward's dq_dk_dv kernels share (bwd_mma.cuh on mma.sync,
 * bwd_wgmma.cuh on sm90a): which m-blocks see a key tile, the mask of an element, the
 * element loop that turns S^T and dP^T into P z and dS (scores_to_grads), and dQ's adds
 * into the fp32 accumulator (atomics, or the deterministic mode's ordered adds). Include
 * after variant.cuh, common.cuh, mask.cuh and sequence.cuh (and dropout.cuh with
 * FMHA_DROPOUT); TM and TN are the kernel's tile.
 */
#ifndef FMHA_KERNEL_BWD_COMMON_CUH
#define FMHA_KERNEL_BWD_COMMON_CUH

#include "dq_acc.cuh"

/* The CTA's key tile (n-block nb), sequence b and KV head hk, and its cohort: `size`
 * consecutive key tiles of one head from `first` (bwd_params.h's cohort). The grid is one
 * dimension, cohort by cohort, each over every (sequence, KV head): with cohorts of every
 * key tile (the atomic mode) a head's tiles run side by side and share its Q and dO in
 * L2; the deterministic mode's shorter cohorts leave the tiles of a later cohort a wave
 * behind those they add after (perf-notes run 65). Either way a head's lower cohorts have
 * lower block indices and start first, which the ordered adds rely on not to deadlock. */
typedef struct {
    int nb, b, hk, first, size;
} bwd_cta_t;

__device__ __forceinline__ bwd_cta_t bwd_cta(const fmha_bwd_params_t &p)
{
    const int heads = p.f.batch * p.f.heads_kv, tiles = (p.f.seqlen_k + TN - 1) / TN, c = p.cohort;
    const int whole = tiles / c * heads * c; /* the CTAs of whole cohorts */
    int x = (int)blockIdx.x, first, size;
    if (x < whole) first = x / (heads * c) * c, size = c, x %= heads * c;
    else first = tiles / c * c, size = tiles - first, x -= whole;
    const int head = x / size;
    return bwd_cta_t{first + x % size, head / p.f.heads_kv, head % p.f.heads_kv, first, size};
}

/* The keys of sequence b as allocated (group mode: cu_seqlens_k, bounded; seqused_k may
 * use fewer) and its first key token. */
__device__ __forceinline__ void key_rows(const fmha_bwd_params_t &p, int b, int *tk0, int *alloc)
{
#if FMHA_GROUP
    group_rows((const int *)p.f.cu_seqlens_k, b, p.f.total_k, p.f.seqlen_k, tk0, alloc);
#else
    (void)b;
    *tk0 = 0, *alloc = p.f.seqlen_k;
#endif
}

/* Does the m-block at m0 visit key tile n0? Exactly when the forward's walk of that
 * m-block (key_tiles, next_tile) would: the deterministic mode's ordering counts on it. */
__device__ __forceinline__ bool visits(const key_tiles_t &kt, int n0)
{
    return n0 < kt.end && (n0 < kt.sink_end || n0 >= kt.win_begin);
}

/* The m-blocks that see key tile n0: one range [*lo, *hi] (empty: hi < lo), the same for
 * every head of a group (windows move monotonically with the rows). */
__device__ __forceinline__ void mblocks_of_key_tile(const fmha_fwd_params_t &p, int n0, int sq, int sk, int diag,
                                                    int *lo, int *hi)
{
    const int mblocks = (sq + TM - 1) / TM;
    int mb_lo = 0, mb_hi = -1;
    if (n0 < sk) {
        while (mb_lo < mblocks && !visits(key_tiles(p, mb_lo * TM, sk, diag), n0)) mb_lo++;
        mb_hi = mb_lo - 1;
        while (mb_hi + 1 < mblocks && visits(key_tiles(p, (mb_hi + 1) * TM, sk, diag), n0)) mb_hi++;
    }
    *lo = mb_lo, *hi = mb_hi;
}

/* How many key tiles before n-block nb the m-block visits: the adds to its dQ rows that
 * must land before nb's (deterministic mode). */
__device__ __forceinline__ int tiles_before(const key_tiles_t &kt, int nb)
{
    const int e = (kt.end + TN - 1) / TN, s = kt.sink_end / TN, w = kt.win_begin / TN;
    const int below = min(nb, e);
    return min(below, s) + max(0, below - max(w, s));
}

/* Is key j visible to query row i (REFERENCE.md's mask; rows past sq and keys past sk
 * are not)? */
__device__ __forceinline__ bool visible(const fmha_bwd_params_t &p, int i, int j, int sq, int sk, int diag)
{
    if (i >= sq || j >= sk) return false;
#if FMHA_MASK
    const int c = i + diag; /* windows clamped to max(sq, sk) (mask.cuh): no overflow */
    if (p.f.window_right >= 0 && j > c + p.f.window_right) return false;
    if (p.f.window_left >= 0 && j < c - p.f.window_left && j >= p.f.sink_tokens) return false;
#else
    (void)p, (void)diag;
#endif
    return true;
}

/* Does any (row, key) of the m-block at m0 and key tile n0 fall outside the sequence or
 * the mask? The forward's per-tile test (mask.cuh) plus the rows past the sequence, which
 * the forward never stores; blocks wholly inside run the element loop without the
 * per-element test. */
__device__ __forceinline__ bool block_needs_mask(const fmha_bwd_params_t &p, int m0, int n0, int sq, int sk, int diag)
{
    return m0 + TM > sq || tile_needs_mask(p.f, n0, m0, sk, diag);
}

/* One m-block's item against a key tile: where it is, and what its scores need. */
typedef struct {
    int b, h, m0, sq, sk, diag;
    float slope;        /* ALiBi */
    const elem_t *bias; /* elementwise bias rows of (b, h) */
} bwd_item_t;

/* The element loop of one 16-key slab: S^T and dP^T (rows: keys key0 and key0 + 8; columns:
 * the item's query rows 8 jj + 2t, +1, in the m16n8 accumulator layout that mma.sync and
 * wgmma share: st[4 jj + x], x = 2 half + e) become P z (dV's operand, in st) and dS with
 * the soft-cap chain (dK's and dQ's, in dpt):
 *   P = exp2(S - LSE), z the dropout factor, dS = P (dP z - D), dbias = dS.
 * cL and cD are the item's rows' LSE and D. MASKED: the per-element mask test (a runtime
 * test inside would split the loop into one basic block per element; softmax.cuh).
 * write_dbias: this thread owns these elements' dbias (one warp per slab does). */
template <int NJ, bool MASKED>
__device__ __forceinline__ void scores_to_grads(const fmha_bwd_params_t &p, const bwd_item_t &w, float *st,
                                                float *dpt, const float *cL, const float *cD, int key0, int t,
                                                bool write_dbias)
{
#if FMHA_DBIAS
    /* in place, or summed over the broadcast dims in fp32 (bwd_params.h) */
    elem_t *dbias = (elem_t *)p.dbias + (long long)w.b * p.dbias_batch + (long long)w.h * p.dbias_head;
    float *dbias_acc = p.dbias_acc ? (float *)p.dbias_acc + (long long)w.b * p.dbias_acc_batch +
                                         (long long)w.h * p.dbias_acc_head
                                   : nullptr;
#else
    (void)write_dbias;
#endif
#pragma unroll
    for (int jj = 0; jj < NJ; jj++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int c = jj * 8 + 2 * t + e, i = w.m0 + c;
            const float lse = cL[c], Di = cD[c];
            const float lse2 = lse > -INFINITY ? lse * LOG2E : INFINITY; /* a row with no key has P = 0 */
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int j = key0 + 8 * half, x = 4 * jj + 2 * half + e;
                float dcap;
                const float s = score_log2_dcap(st[x], p.f, i, j, w.sq, w.sk, w.slope, w.bias, &dcap);
                const bool vis = !MASKED || visible(p, i, j, w.sq, w.sk, w.diag);
                const float pv = vis ? fast_exp2(s - lse2) : 0.f;
#if FMHA_DROPOUT
                const float z = dropout_keep(p.f, dropout_element(p.f, w.b, w.h, i, j)) ? p.f.rp_keep : 0.f;
#else
                const float z = 1.f;
#endif
                const float ds = pv * (dpt[x] * z - Di);
#if FMHA_DBIAS
                if (write_dbias && i < w.sq && j < w.sk) {
                    if (dbias_acc) atomicAdd(dbias_acc + (long long)i * p.f.seqlen_k + j, ds);
                    else dbias[(long long)i * p.dbias_row + (long long)j * p.dbias_col] = (elem_t)(pack2(ds, 0.f) & 0xffff);
                }
#endif
                st[x] = pv * z;
                dpt[x] = ds * dcap;
            }
        }
}

/* dQ of rows [m0, m0 + 16) of head h (one 16-row slab of an item, m0 a multiple of 16;
 * columns col0 + 8 d + 2t, +1, in the accumulator layout, COLS of them) into the fp32
 * accumulator (dq_acc.cuh), token tok0 + m0 the slab's first: red.add, or deterministic
 * plain adds (the caller holds the m-block's turn). */
template <int COLS>
__device__ __forceinline__ void add_dq(const fmha_bwd_params_t &p, const float *acc, long long tok0, int h, int m0,
                                       int sq, int col0, int g, int t)
{
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = m0 + g + 8 * half;
        if (i >= sq) continue;
        float *dst = (float *)p.dq_acc + dq_acc_row(p, tok0 + i, h, DQK);
#pragma unroll
        for (int d = 0; d < COLS / 8; d++) {
            const float a0 = acc[4 * d + 2 * half], a1 = acc[4 * d + 2 * half + 1];
            float2 *v = (float2 *)(dst + dq_acc_col(i, col0 + d * 8 + 2 * t, DQK));
#if FMHA_DETERMINISTIC
            /* L2, not L1: the previous key tile's adds came from another SM */
            float2 x = __ldcg(v);
            x.x += a0, x.y += a1;
            __stcg(v, x);
#elif __CUDA_ARCH__ >= 900 /* one vector atomic per pair */
            atomicAdd(v, make_float2(a0, a1));
#else
            atomicAdd(&v->x, a0);
            atomicAdd(&v->y, a1);
#endif
        }
    }
}

/* The deterministic mode's semaphore of (b, h)'s m-block at m0 (bwd_params.h's dq_sem) and
 * the turn of key tile nb there: how many adds to its rows must land before nb's. */
__device__ __forceinline__ const int *dq_semaphore(const fmha_bwd_params_t &p, int b, int h, int m0)
{
    return (const int *)p.dq_sem + ((long long)b * p.f.heads_q + h) * ((p.f.seqlen_q + TM - 1) / TM) + m0 / TM;
}
__device__ __forceinline__ int dq_turn(const fmha_bwd_params_t &p, int m0, int sk, int diag, int nb)
{
    return tiles_before(key_tiles(p.f, m0, sk, diag), nb);
}

/* Wait until the m-block's dQ rows have `turn` adds (spin of one thread). */
__device__ __forceinline__ void wait_turn(const int *sem, int turn)
{
    int v;
    for (;;) {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(sem) : "memory");
        if (v >= turn) break;
        __nanosleep(64);
    }
}

#endif /* FMHA_KERNEL_BWD_COMMON_CUH */
