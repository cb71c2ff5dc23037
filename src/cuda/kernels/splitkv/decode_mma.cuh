/* SPDX-License-Identifier: MIT */
/*
 * decode_mma.cuh: the splitkv family's decode kernel (sm80 and later, mma.sync), for
 * problems whose whole GQA group of query rows fits one small row block: group x
 * seqlen_q <= TILE_M (16 or 32). One CTA per (split, KV head, sequence).
 *
 * Decode reads every key once and computes little with it, so the kernel is shaped by
 * bandwidth, not by FLOPs:
 * - rows: the group's query heads packed densely, row r = query head r / seqlen_q of the
 *   group at position r % seqlen_q, so K and V are read once per KV head;
 * - keys: the warps split each key tile (TILE_N / WARPS keys each) instead of the rows,
 *   so a warp's MMAs cover 16 rows, not the forward's 16 x WARPS; each warp keeps its own
 *   online softmax over its keys, and the warps' states merge once, at the end, in shared
 *   memory (the split-KV combine of REFERENCE.md inside the CTA);
 * - pipeline: FMHA_STAGES K/V buffers filled by cp.async, STAGES - 1 tiles in flight
 *   while one computes, one barrier per tile;
 * - paged caches (FMHA_PAGED): the page of each key row is looked up once per tile, a
 *   tile ahead (its load in flight during a tile's math), and kept in shared memory as
 *   the addresses of its K and V rows, which the copies of K and V read; over a block
 *   table the first tiles' lookups go out beside the sequence's length;
 * - the warps' merge: fp32 rows padded against bank conflicts (SO_PAD).
 * Output: O and LSE with the sink logit folded in, so the combine stage's launch is
 * skipped: with one split directly (part_o 0); with several, each split writes fp32
 * partials (fwd_params.h, "Split-KV") and the last split of a KV head to finish reduces
 * them (split_counters); without counters, partials for the combine stage.
 *
 * Variants: variant.cuh's (FMHA_SPLIT is 1: sequence.cuh's cache rows and lengths);
 * FMHA_TILE_M, FMHA_TILE_N, FMHA_WARPS, FMHA_STAGES.
 */
#include "fwd_params.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 16
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 64
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 4
#endif
#ifndef FMHA_STAGES
#define FMHA_STAGES 3
#endif
#include "variant.cuh"

#define NTHREADS (32 * FMHA_WARPS)
#define STAGES FMHA_STAGES
#define SLABS (TM / 16)
#define WN (TN / FMHA_WARPS) /* keys per warp per tile */
#define PAD 8                /* halves of padding per smem row (fwd_mma.cuh) */
/* K and V rows whole and swizzled (mma.cuh tile_offset) where the head dims allow it,
 * else padded (at hd256 the swizzle's four extra ldmatrix bases per operand spilled, 20
 * bytes reloaded each tile). src/core/specs.c (fmha__smem_bytes) sizes the same. */
#define SWZ_KV KV_ROWS_SWIZZLABLE(DQK, DV)
#define SQ_STRIDE (DQK + PAD)
#define SK_STRIDE (SWZ_KV ? DQK : DQK + PAD)
#define SV_STRIDE (SWZ_KV ? DV : DV + PAD)
/* The merge area's fp32 O rows are DV + SO_PAD floats apart. A fragment store covers 8
 * rows x 32 bytes; rows a multiple of 128 bytes apart put them all on the same banks (4
 * wavefronts a half-warp instead of 1), 32 bytes more spreads them (perf-notes run 112).
 * src/core/specs.c sizes the same. */
#define SO_PAD 8
#define SO_STRIDE (DV + SO_PAD)
/* Q's fragments stay in registers when they are few; else ldmatrix per tile */
#define Q_IN_REGS (SLABS * DQK <= 128)

static_assert(DQK % 16 == 0 && DV % 16 == 0, "head dims must be multiples of 16");
static_assert(TM == 16 || TM == 32, "decode row blocks are 16 or 32 rows");
static_assert(WN % 16 == 0, "each warp's share of a key tile is a multiple of 16 keys");
static_assert(STAGES >= 2, "at least two K/V stages");
static_assert(TN <= NTHREADS, "a thread per key row looks up its page");
static_assert(TM * SQ_STRIDE * 2 % 128 == 0, "K's buffers start 128-byte aligned after Q's rows");
static_assert(WN % 8 == 0, "a warp's keys start on a swizzle period (8 rows)");

#include "common.cuh"
#include "epilogue.cuh"
#include "mask.cuh"
#include "mma.cuh"
#include "phase_clock.cuh"
#include "sequence.cuh"
#include "softmax.cuh"

/* Key tile n into dk and dv: contiguous rows, or each row from where `rows` (TN
 * entries of key_row_addrs) says; rows past the keys read as zeros. Both ask L2 for
 * whole 256-byte blocks (copy_chunk's stream: K and V are read once; on pages +1-4% at
 * batch >= 16, perf-notes run 77). */
#if FMHA_PAGED
/* A row of key_row_addrs as a pointer (bit 0, the zero flag, cleared: the base then) */
__device__ __forceinline__ const elem_t *row_at(unsigned long long a) { return (const elem_t *)(a & ~1ull); }
#endif

template <typename Params>
__device__ __forceinline__ void load_kv(elem_t *dk, elem_t *dv, const elem_t *K, const elem_t *V, const Params &p,
                                        int sk, int n, const ulonglong2 *rows, int tid)
{
#if FMHA_PAGED
    (void)K, (void)V, (void)p, (void)sk, (void)n;
    constexpr int CK = DQK / 8, CV = DV / 8;
    if constexpr (CK == CV && walks_whole_rows<TN, DQK, NTHREADS>()) {
        /* each thread one 16-byte column of K and V and rows STEP apart: one lookup per
         * row for both, no per-chunk division (mma.cuh load_tile, perf-notes run 59) */
        constexpr int STEP = NTHREADS / CK;
        const int r0 = tid / CK, k = (tid % CK) * 8;
        /* every row's address first: ptxas keeps a shared load behind an earlier cp.async
         * (both touch shared memory), so row by row each copy waited for its own load */
        ulonglong2 at[TN / STEP];
#pragma unroll
        for (int i = 0; i < TN / STEP; i++) at[i] = rows[r0 + i * STEP];
#pragma unroll
        for (int i = 0; i < TN / STEP; i++) {
            const int r = r0 + i * STEP;
            const bool ok = !(at[i].x & 1ull);
            copy_chunk<true>(dk + tile_offset<SK_STRIDE, SWZ_KV>(r, k), row_at(at[i].x) + k, ok);
            copy_chunk<true>(dv + tile_offset<SV_STRIDE, SWZ_KV>(r, k), row_at(at[i].y) + k, ok);
        }
    } else {
        for (int c = tid; c < TN * CK; c += NTHREADS) {
            const int r = c / CK, k = (c % CK) * 8;
            const unsigned long long at = rows[r].x;
            copy_chunk<true>(dk + tile_offset<SK_STRIDE, SWZ_KV>(r, k), row_at(at) + k, !(at & 1ull));
        }
        for (int c = tid; c < TN * CV; c += NTHREADS) {
            const int r = c / CV, k = (c % CV) * 8;
            const unsigned long long at = rows[r].y;
            copy_chunk<true>(dv + tile_offset<SV_STRIDE, SWZ_KV>(r, k), row_at(at) + k, !(at & 1ull));
        }
    }
#else
    (void)rows;
    load_tile<TN, DQK, SK_STRIDE, NTHREADS, true, SWZ_KV>(dk, K + (long long)n * p.k_row, p.k_row, sk - n, tid);
    load_tile<TN, DV, SV_STRIDE, NTHREADS, true, SWZ_KV>(dv, V + (long long)n * p.v_row, p.v_row, sk - n, tid);
#endif
}

/* Two columns (d, d + 1) of O at the group's query head gq, position i, times inv; the
 * row's LSE (natural log) once per row. */
template <typename Params>
__device__ __forceinline__ void store_row_pair(const Params &p, const seq_t &s, int gq, int i, int d, float o0,
                                               float o1, float inv, float lse)
{
    elem_t *O = (elem_t *)p.o + s.o + (long long)gq * p.o_head + (long long)i * p.o_row;
    *(u32 *)(O + d) = pack2(o0 * inv, o1 * inv);
    if (p.lse && d == 0) ((float *)p.lse)[s.lse + (long long)gq * p.lse_head + (long long)i * p.lse_row] = lse;
}

/* Splits [s0, s0 + C) of a row's partials (part, one split every `step` floats): this
 * lane's column quads, zeros past the n splits or the row. L2 loads: other CTAs wrote
 * them. 16-byte loads and a pointer stepped from split to split: the tail's code runs
 * cold, so its instruction count is its time (perf-notes run 116). */
template <int C, int PER_LANE>
__device__ __forceinline__ void load_partials(float4 (&x)[C][PER_LANE], const float *part, long long step, int s0,
                                              int n, int lane)
{
    const float4 *at = (const float4 *)(part + s0 * step) + lane;
#pragma unroll
    for (int c = 0; c < C; c++, at += step / 4)
#pragma unroll
        for (int k = 0; k < PER_LANE; k++)
            x[c][k] = s0 + c < n && lane + 32 * k < DV / 4 ? __ldcg(at + 32 * k) : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* A split's key tiles for a sequence of sk keys: the visible ones of row positions
 * [0, TM) (kt; its end cut to the split's), and the first of them (-1: none). */
typedef struct {
    key_tiles_t kt;
    int first;
} split_tiles_t;

__device__ __forceinline__ split_tiles_t split_tiles(const fmha_fwd_params_t &p, int split, int sk, int sq)
{
    split_tiles_t st;
    st.kt = key_tiles(p, 0, sk, p.bottom_right ? sk - sq : 0);
    const int per = split_keys(p, sk), lo = split * per;
    if (lo + per < st.kt.end) st.kt.end = lo + per;
    st.first = next_tile(lo - TN, st.kt); /* the first visible tile at or after key lo */
    return st;
}

#if FMHA_PAGED
/* This thread's key (tid < TN; else -1) in each of the split's first STAGES + 1 tiles,
 * -1 past its tiles: the keys the prologue looks up. Returns tile STAGES's start (-1:
 * none), where the lookups a tile ahead go on. */
__device__ __forceinline__ int prologue_keys(const split_tiles_t &st, int tid, int (&key)[STAGES + 1])
{
    int n = st.first;
#pragma unroll
    for (int s = 0; s <= STAGES; s++) {
        key[s] = n >= 0 && tid < TN ? n + tid : -1;
        if (s < STAGES) n = n >= 0 ? next_tile(n, st.kt) : -1;
    }
    return n;
}
#endif

extern "C" __global__ void __launch_bounds__(NTHREADS) fmha_decode_mma(const fmha_fwd_params_t p)
{
    PHASE_START(); /* phase marks: a diagnostic build's only (phase_clock.cuh) */
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    /* grid: (split, KV head, sequence), a head's splits side by side. No runtime division
     * runs before the first copies: this code runs once a CTA, cold in the instruction
     * cache, so its length is its time (perf-notes run 114). */
    const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
    /* the sequence's lengths go to L2 while the prior grid ends: with them in L2, page 16
     * 64/8 B1 8k +4-7%; prefetching the block table's first entries too measured -1 to
     * -7% (perf-notes run 118) */
    if (tid == 0) prefetch_sequence(p, b);
#if FMHA_PAGED == 1
    /* A block table's lookups start before the sequence's length is in: the first tiles'
     * pages as if it had all the keys the table and seqlen_k allow (the usual case at batch
     * 1), so the two round trips overlap. Kept below for each key the real tiles share
     * (perf-notes run 112); always inside the table, as those keys are. Worked out before
     * the prior grid ends: arithmetic on the params alone. */
    const long long table_keys = (long long)p.table_width * p.page_size;
    const int sk_max = table_keys < p.seqlen_k ? (int)table_keys : p.seqlen_k;
    int key_max[STAGES + 1];
    prologue_keys(split_tiles(p, split, sk_max, p.seqlen_q), tid, key_max);
#endif
    wait_prior_grids();
    PHASE_MARK(1);
    extern __shared__ __align__(128) unsigned char smem_raw[];
    elem_t *sQ = (elem_t *)smem_raw;
    elem_t *sK0 = sQ + TM * SQ_STRIDE; /* STAGES K buffers, then STAGES V buffers */
    elem_t *sV0 = sK0 + STAGES * TN * SK_STRIDE;
#if FMHA_PAGED
    ulonglong2 *sRows = (ulonglong2 *)(sV0 + STAGES * TN * SV_STRIDE); /* STAGES x TN key_row_addrs */
#else
    ulonglong2 *sRows = nullptr;
#endif

    const int g = lane / 4, t = lane % 4;      /* fragment row and column pair */
    const int mat = lane / 8, mrow = lane % 8; /* ldmatrix: which matrix and row this lane addresses */
    const int group = p.group, h = hk * group; /* h: the group's first query head */

    const seq_t seq = sequence_of(p, b, h, hk);
#if FMHA_PAGED == 1
    int2 ps_max[STAGES + 1];
    key_pages_slots(p, (long long)b * p.table_row, sk_max, key_max, ps_max);
#endif
    const int sq = seq.sq, sk = seq.sk, rows = group * sq; /* rows <= TM (the host's rule) */
    if (sq <= 0) return;
    const elem_t *Q = (const elem_t *)p.q + seq.q;
    const elem_t *K = (const elem_t *)p.k + seq.k;
    const elem_t *V = (const elem_t *)p.v + seq.v;
    const int diag = p.bottom_right ? sk - sq : 0;
    /* this split's tiles: [lo, lo + per) within the visible ones of positions [0, TM) */
    const split_tiles_t st = split_tiles(p, split, sk, sq);
    const key_tiles_t &kt = st.kt;

    /* Q: packed row r is head r / sq of the group at position r % sq; rows past the
     * group are zeros. Its own cp.async group, ahead of the tiles'. */
    constexpr int Q_CHUNKS = TM * (DQK / 8);
#pragma unroll
    for (int i = 0; i < (Q_CHUNKS + NTHREADS - 1) / NTHREADS; i++) {
        const int c = tid + i * NTHREADS, r = c / (DQK / 8), k = (c % (DQK / 8)) * 8;
        if (Q_CHUNKS % NTHREADS && c >= Q_CHUNKS) break;
        const bool ok = r < rows;
        const int2 hi = small_divmod(r, sq); /* (head, position) */
        const long long src = ok ? (long long)hi.y * p.q_row + (long long)hi.x * p.q_head : 0;
        cp_async16(sQ + r * SQ_STRIDE + k, Q + src + k, ok ? 16 : 0);
    }
    cp_async_commit();
    PHASE_MARK(2);

    const int first = st.first;
#if FMHA_PAGED
    /* The rows of the first STAGES tiles, and `look`: tile STAGES's pages, which then carry
     * the next tile's, loaded a tile ahead of its store into the slot the finished tile
     * frees. The first STAGES + 1 lookups share one round trip (key_pages_slots). */
    int key[STAGES + 1];
    int2 ps[STAGES + 1];
    int n_look = prologue_keys(st, tid, key);
#if FMHA_PAGED == 1
    bool same = true; /* this thread's keys those looked up above: no second round trip */
#pragma unroll
    for (int s = 0; s <= STAGES; s++) same &= key[s] == key_max[s];
    if (same) {
#pragma unroll
        for (int s = 0; s <= STAGES; s++) ps[s] = key[s] < sk ? ps_max[s] : make_int2(-1, 0);
    } else
#endif
        key_pages_slots(p, seq.pages, seq.sk, key, ps);
#pragma unroll
    for (int s = 0; s < STAGES; s++)
        if (tid < TN) sRows[s * TN + tid] = key_row_addrs(p, ps[s], K, V);
    int2 look = ps[STAGES];
    PHASE_MARK(12);
    __syncthreads();
    PHASE_MARK(13);
#endif

    /* Prologue: tiles 0 .. STAGES - 2, one cp.async group each (possibly empty). */
    int n_load = first;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (n_load >= 0) load_kv(sK0 + s * TN * SK_STRIDE, sV0 + s * TN * SV_STRIDE, K, V, p, sk, n_load, sRows + s * TN, tid);
        cp_async_commit();
        n_load = n_load >= 0 ? next_tile(n_load, kt) : -1;
        if (s == 0) PHASE_MARK(14);
    }

    PHASE_MARK(3);
    /* the split counter claimed for this launch while the copies fly (claim_tagged) */
    unsigned long long *counter = (unsigned long long *)p.split_counters + (long long)b * p.heads_kv + hk;
    if (split == 0 && tid == 0 && p.split_counters) claim_tagged(counter, p.split_tag);
    /* The rows a thread's fragments hold: rows[s] for slab s (softmax.cuh); past the
     * group, head 0 at position 0 (computed, never stored). */
    packed_rows_t prow[SLABS];
#pragma unroll
    for (int s = 0; s < SLABS; s++) {
        prow[s].sq = sq, prow[s].sk = sk, prow[s].diag = diag, prow[s].t = t;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int r = s * 16 + g + 8 * half, ok = r < rows;
            const int2 hi = ok ? small_divmod(r, sq) : make_int2(0, 0); /* (head, position) */
            prow[s].i[half] = hi.y;
            prow[s].slope[half] = alibi_slope(p, b, h + hi.x);
            prow[s].bias[half] = bias_rows(p, b, h + hi.x);
        }
    }

#if Q_IN_REGS
    u32 qf[SLABS][DQK / 16][4];
    cp_async_wait<STAGES - 1>(); /* Q's group */
    __syncthreads();
#pragma unroll
    for (int s = 0; s < SLABS; s++)
#pragma unroll
        for (int kk = 0; kk < DQK / 16; kk++)
            ldmatrix_a<SQ_STRIDE>(qf[s][kk], sQ, s * 16, kk, mat, mrow);
#endif

    float o[SLABS][DV / 8][4];
    float row_max[SLABS][2], row_sum[SLABS][2];
    init_softmax_state<SLABS, DV>(o, row_max, row_sum);

    int n0 = first;
    for (int j = 0; n0 >= 0; j++) {
        cp_async_wait<STAGES - 2>(); /* tile j has landed */
        __syncthreads();             /* ... for every thread; buffer (j - 1) % STAGES is free */
        if (j == 0) PHASE_MARK(4);
        const int fill = (j + STAGES - 1) % STAGES;
        if (n_load >= 0)
            load_kv(sK0 + fill * TN * SK_STRIDE, sV0 + fill * TN * SV_STRIDE, K, V, p, sk, n_load, sRows + fill * TN, tid);
        cp_async_commit();
        n_load = n_load >= 0 ? next_tile(n_load, kt) : -1;

        const int buf = j % STAGES;
        const elem_t *sK = sK0 + (buf * TN + warp * WN) * SK_STRIDE; /* this warp's keys */
        const elem_t *sV = sV0 + (buf * TN + warp * WN) * SV_STRIDE;
        const bool need_mask = tile_needs_mask(p, n0, 0, sk, diag);
#pragma unroll
        for (int s = 0; s < SLABS; s++) {
            float sacc[WN / 8][4];
#pragma unroll
            for (int jn = 0; jn < WN / 8; jn++) sacc[jn][0] = sacc[jn][1] = sacc[jn][2] = sacc[jn][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < DQK / 16; kk++) { /* S = Q K^T over the warp's keys */
#if Q_IN_REGS
                const u32 *a = qf[s][kk];
#else
                u32 a[4];
                ldmatrix_a<SQ_STRIDE>(a, sQ, s * 16, kk, mat, mrow);
#endif
                mma_qk_step<WN, SK_STRIDE, SWZ_KV>(sacc, a, sK, kk, mat, mrow);
            }
            float alpha[2];
            online_softmax_tile<fmha_fwd_params_t, packed_rows_t, WN>(need_mask, &sacc[0][0], row_max[s], row_sum[s],
                                                                     alpha, p, prow[s], n0 + warp * WN, 0.f, nullptr);
            rescale_o<DV>(&o[s][0][0], alpha);
            mma_pv<WN, DV, SV_STRIDE, SWZ_KV>(o[s], sacc, sV, mat, mrow); /* O += P V over the warp's keys */
        }
#if FMHA_PAGED
        /* tile j's pages are used (its copies went out STAGES - 1 tiles ago): its slot
         * takes the next tile's, and that one's lookup starts (perf-notes run 117) */
        n_look = n_look >= 0 ? next_tile(n_look, kt) : -1;
        if constexpr (NTHREADS >= 2 * TN) {
            /* two threads a key: the half that looked a tile up stores its rows a tile
             * later while the other half looks the next one up, so each thread does one of
             * the two a tile, not both (the prologue's lookups are the first half's) */
            const int half = tid / TN, k = tid % TN;
            if (half == (j & 1)) sRows[buf * TN + k] = key_row_addrs(p, look, K, V);
            else if (half < 2) look = key_page_slot(p, seq.pages, seq.sk, n_look >= 0 ? n_look + k : -1);
        } else if (tid < TN) {
            sRows[buf * TN + tid] = key_row_addrs(p, look, K, V);
            look = key_page_slot(p, seq.pages, seq.sk, n_look >= 0 ? n_look + tid : -1);
        }
#endif
        n0 = next_tile(n0, kt);
    }
    cp_async_wait<0>();
    __syncthreads(); /* the K/V buffers become the merge area */
    PHASE_MARK(5);

    /* Merge the warps' softmax states: per row the max M over the warps, each warp's O
     * and sum scaled by exp2(m_w - M), summed (all in the exp2 domain). */
    float *sO = (float *)sK0;                   /* [WARPS][TM][SO_STRIDE] */
    float *sM = sO + FMHA_WARPS * TM * SO_STRIDE; /* [WARPS][TM] */
    float *sL = sM + FMHA_WARPS * TM;             /* [WARPS][TM] */
#pragma unroll
    for (int s = 0; s < SLABS; s++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const float l = quad_sum(row_sum[s][half]);
            if (t == 0) sM[warp * TM + s * 16 + g + 8 * half] = row_max[s][half], sL[warp * TM + s * 16 + g + 8 * half] = l;
        }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < SLABS; s++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int r = s * 16 + g + 8 * half;
            if (r >= rows) continue; /* padding: never read (with 8 rows or fewer, half the stores) */
            float m = -INFINITY;
#pragma unroll
            for (int w = 0; w < FMHA_WARPS; w++) m = fmaxf(m, sM[w * TM + r]);
            const float f = row_max[s][half] == -INFINITY ? 0.f : fast_exp2(row_max[s][half] - m);
            float *orow = sO + (warp * TM + r) * SO_STRIDE;
#pragma unroll
            for (int d = 0; d < DV / 8; d++)
                *(float2 *)(orow + d * 8 + 2 * t) = make_float2(o[s][d][2 * half] * f, o[s][d][2 * half + 1] * f);
        }
    __syncthreads();

    PHASE_MARK(6);
    /* The rows out: partials (fp32, normalised within the split) or, with one split, O
     * and LSE with the sink logit (epilogue.cuh's rule). A thread takes OUT_PAIRS column
     * pairs of one row, a chunk apart (so a warp's loads and stores stay contiguous), and
     * works out the row's max, sum and scale once for them (perf-notes run 107). */
    constexpr int OUT_PAIRS = 4, CHUNKS = DV / 2 / OUT_PAIRS; /* a row's threads */
    static_assert(DV % (2 * OUT_PAIRS) == 0, "a row's column pairs split evenly");
    for (int c = tid; c < rows * CHUNKS; c += NTHREADS) {
        const int r = c / CHUNKS, chunk = c % CHUNKS;
        const int2 hi = small_divmod(r, sq);
        const int gq = hi.x, i = hi.y;
        float m = -INFINITY, l = 0.f;
#pragma unroll
        for (int w = 0; w < FMHA_WARPS; w++) m = fmaxf(m, sM[w * TM + r]);
        float2 o[OUT_PAIRS];
#pragma unroll
        for (int k = 0; k < OUT_PAIRS; k++) o[k] = make_float2(0.f, 0.f);
#pragma unroll
        for (int w = 0; w < FMHA_WARPS; w++) {
            const float mw = sM[w * TM + r];
            const float lw = sL[w * TM + r]; /* NaN when the warp's scores were all NaN */
            l += mw == -INFINITY ? (lw != lw ? lw : 0.f) : lw * fast_exp2(mw - m);
#pragma unroll
            for (int k = 0; k < OUT_PAIRS; k++) {
                const float2 x = *(const float2 *)(sO + (w * TM + r) * SO_STRIDE + 2 * (chunk + k * CHUNKS));
                o[k].x += x.x, o[k].y += x.y;
            }
        }
        if (p.part_o) {
            const long long row = (long long)split * p.part_rows + partial_row(p, seq, b, h + gq, i);
            const float inv = l != 0.f ? 1.f / l : 0.f;
            float *out = (float *)p.part_o + row * DV;
#pragma unroll
            for (int k = 0; k < OUT_PAIRS; k++)
                *(float2 *)(out + 2 * (chunk + k * CHUNKS)) = make_float2(o[k].x * inv, o[k].y * inv);
            if (chunk == 0) ((float *)p.part_lse)[row] = l != 0.f ? (m + log2f(l)) / LOG2E : -INFINITY;
        } else {
            float rescale = 1.f;
            if (p.sink) { /* the sink logit joins the denominator only */
                const float sink = ((const float *)p.sink)[(long long)(h + gq) * p.sink_head] * LOG2E;
                const float m_fin = fmaxf(m, sink);
                rescale = m == -INFINITY ? 0.f : exp2f(m - m_fin);
                l = l * rescale + exp2f(sink - m_fin);
                m = m_fin;
            }
            const float inv = l != 0.f ? rescale / l : 0.f;
            const float lse = l != 0.f ? (m + log2f(l)) / LOG2E : -INFINITY;
#pragma unroll
            for (int k = 0; k < OUT_PAIRS; k++)
                store_row_pair(p, seq, gq, i, 2 * (chunk + k * CHUNKS), o[k].x, o[k].y, inv, lse);
        }
    }
    PHASE_MARK(7);
    if (!p.part_o || !p.split_counters) {
        PHASE_REPORT(0);
        return;
    }

    /* Several splits: the last of this KV head's splits to arrive reduces them all
     * (REFERENCE.md's combine, as combine.cuh), so no second kernel runs. */
    __syncthreads(); /* every thread's partials are written; thread 0's arrival releases them */
    int *last = (int *)sL; /* the merge area is free again */
    if (tid == 0) {
        *last = arrive_tagged(counter, p.split_tag) == p.num_splits - 1;
        if (*last) arrival_reset(counter, p.split_tag);
    }
    __syncthreads();
    PHASE_MARK(8);
    if (!*last) {
        PHASE_REPORT(0);
        return;
    }
    /* A warp per row: lane s loads split s's LSE and, without waiting for it, each lane its
     * column quads of the first CHUNK splits' partials, so up to CHUNK splits cost one
     * round trip through L2 (perf-notes run 69); each split's weight exp(LSE_s - LSE) is
     * broadcast from its lane. Loops past the first 32 splits stay rolled: the tail runs
     * once a KV head, so its code is fetched cold and its length is its cost (run 106). */
    constexpr int QUADS = DV / 4, PER_LANE = (QUADS + 31) / 32, CHUNK = PER_LANE <= 16 ? 16 / PER_LANE : 1;
    static_assert(32 % CHUNK == 0, "a chunk of splits lies within one lane's block of 32");
    const int n = p.num_splits;
    for (int r = warp; r < rows; r += FMHA_WARPS) {
        const int2 hi = small_divmod(r, sq);
        const int gq = hi.x, i = hi.y;
        const long long prow = partial_row(p, seq, b, h + gq, i);
        const float *lse_s = (const float *)p.part_lse + prow;
        const float *part = (const float *)p.part_o + prow * DV;
        const long long lse_step = p.part_rows, part_step = p.part_rows * DV;
        const float ls0 = lane < n ? __ldcg(lse_s + lane * lse_step) : -INFINITY; /* splits 0-31 */
        float4 x[CHUNK][PER_LANE];
        load_partials<CHUNK, PER_LANE>(x, part, part_step, 0, n, lane);

        const float sink = p.sink ? ((const float *)p.sink)[(long long)(h + gq) * p.sink_head] : -INFINITY;
        float m = max_nan(sink, ls0);
#pragma unroll 1
        for (int s0 = 32; s0 < n; s0 += 32)
            m = max_nan(m, lane + s0 < n ? __ldcg(lse_s + (lane + s0) * lse_step) : -INFINITY);
        m = warp_max_nan(m);
        if (r == warp) PHASE_MARK(10); /* the first row's LSEs are in */
        float l = 0.f;
        if (m != -INFINITY) {
            l = __expf(ls0 - m); /* 0 past the splits (-inf) */
#pragma unroll 1
            for (int s0 = 32; s0 < n; s0 += 32)
                l += __expf((lane + s0 < n ? __ldcg(lse_s + (lane + s0) * lse_step) : -INFINITY) - m);
            l = warp_sum(l);
            if (p.sink) l += __expf(sink - m);
        }
        const float lse = l != 0.f ? m + __logf(l) : -INFINITY;
        float wl = lse == -INFINITY ? 0.f : __expf(ls0 - lse); /* this lane's split's weight; 0 for an empty one */

        float4 o[PER_LANE];
#pragma unroll
        for (int k = 0; k < PER_LANE; k++) o[k] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
        for (int s0 = 0; s0 < n; s0 += CHUNK) {
            if (s0) {
                if (s0 % 32 == 0) { /* the next block of 32 splits' weights */
                    const float ls = lane + s0 < n ? __ldcg(lse_s + (lane + s0) * lse_step) : -INFINITY;
                    wl = lse == -INFINITY ? 0.f : __expf(ls - lse);
                }
                load_partials<CHUNK, PER_LANE>(x, part, part_step, s0, n, lane);
            }
#pragma unroll
            for (int c = 0; c < CHUNK; c++) {
                const float ws = __shfl_sync(0xffffffffu, wl, s0 % 32 + c); /* 0 past the splits */
#pragma unroll
                for (int k = 0; k < PER_LANE; k++) {
                    o[k].x += ws * x[c][k].x, o[k].y += ws * x[c][k].y;
                    o[k].z += ws * x[c][k].z, o[k].w += ws * x[c][k].w;
                }
            }
        }
        if (r == warp) PHASE_MARK(11); /* ... and its partials summed */
#pragma unroll
        for (int k = 0; k < PER_LANE; k++)
            if (lane + 32 * k < QUADS) {
                store_row_pair(p, seq, gq, i, 4 * (lane + 32 * k), o[k].x, o[k].y, 1.f, lse);
                store_row_pair(p, seq, gq, i, 4 * (lane + 32 * k) + 2, o[k].z, o[k].w, 1.f, lse);
            }
    }
    PHASE_MARK(9);
    PHASE_REPORT(1);
}
