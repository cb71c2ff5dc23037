/* SPDX-License-Identifier: MIT */
/*
 * softmax.cuh: the online softmax over one key tile of scores in the m16n8 accumulator
 * layout both tensor-core paths share (mma.sync's m16n8 tiles; wgmma's m64nN accumulator
 * holds the same fragments per warp): a thread holds rows i0 and i0 + 8 of its 16-row
 * slab, and for each 8-column block jj the columns 2t and 2t + 1, at
 * s[jj * 4 + 2 * half + e] (half 0/1: the row, e: the column of the pair). The O
 * accumulator has the same layout over head-dim blocks, o[d * 4 + 2 * half + e].
 */
#ifndef FMHA_KERNEL_SOFTMAX_CUH
#define FMHA_KERNEL_SOFTMAX_CUH

#include "common.cuh"
#include "mask.cuh"

/* Where a thread's scores sit: rows i0 and i0 + 8 of the sequence, columns n0 + 8 jj +
 * 2 t + e of the key tile. */
typedef struct {
    int i0, sq, sk, diag, t;
} tile_rows_t;

/* The same for rows that pack several query heads (the split-KV stage, fwd_mma.cuh):
 * each half has its own position, ALiBi slope and bias rows. */
typedef struct {
    int i[2], sq, sk, diag, t;
    float slope[2];
    const elem_t *bias[2];
} packed_rows_t;

/* A half's position, slope and bias rows: for tile_rows_t i0 + 8 half and the tile's
 * operands, for packed_rows_t its own. */
__device__ __forceinline__ int row_of(const tile_rows_t &w, int half) { return w.i0 + 8 * half; }
__device__ __forceinline__ float slope_of(const tile_rows_t &, float slope, int) { return slope; }
__device__ __forceinline__ const elem_t *bias_of(const tile_rows_t &, const elem_t *bias, int) { return bias; }
__device__ __forceinline__ int row_of(const packed_rows_t &w, int half) { return w.i[half]; }
__device__ __forceinline__ float slope_of(const packed_rows_t &w, float, int half) { return w.slope[half]; }
__device__ __forceinline__ const elem_t *bias_of(const packed_rows_t &w, const elem_t *, int half) { return w.bias[half]; }

/* SOFTMAX_CHAINS, which a kernel may set before including this header (default 1, the
 * form every kernel had): the row max and the row sum as this many independent chains,
 * combined at the end, so that ptxas can overlap their latencies. In the sm90 fp8 kernel
 * a 32-long dependent chain of FMNMX and of FADD per row was most of the softmax's stall
 * time (perf-notes run 76). */
#ifndef SOFTMAX_CHAINS
#define SOFTMAX_CHAINS 1
#endif

/* FMHA_POLY_EXP = k > 0 (fp8, unmasked tiles): the exponentials of every k-th block of 8
 * columns by a cubic on the FMA pipe instead of MUFU.EX2. MUFU does 16 exponentials a
 * clock an SM, which for a 128 x 128 fp8 tile is as long as its GEMMs at peak (perf-notes
 * run 119); the FMA pipe has issue slots to spare. 2^y = 2^round(y) 2^f, f in [-0.5,
 * 0.5]: round(y) by the 1.5 x 2^23 shift, 2^f by a cubic fitted for relative error
 * (7.5e-5 at most, against e4m3's 2^-4 rounding of P), times 2^round(y) built from its
 * exponent bits. y >= -126 keeps that exponent in range, so -inf gives 2^-126 x 2^f, not
 * 0, which is why masked tiles (where a row may see no key) keep MUFU. A NaN score stays
 * NaN (max.NaN, then the product), as the row's NaN rule wants (docs/semantics.md).
 * A kernel that wants it sets k before including this header (fwd_wgmma.cuh: which of
 * its kernels, and why); 0 (MUFU only) by default. */
#ifndef FMHA_POLY_EXP
#define FMHA_POLY_EXP 0
#endif
#define POLY_EXP_AT(masked, jj) \
    (FMHA_FP8 && FMHA_POLY_EXP > 0 && !(masked) && (jj) % (FMHA_POLY_EXP > 0 ? FMHA_POLY_EXP : 1) == FMHA_POLY_EXP - 1)

__device__ __forceinline__ float poly_exp2(float y)
{
    asm("max.NaN.f32 %0, %0, 0fC2FC0000;\n" : "+f"(y)); /* max(y, -126), NaN kept */
    const float t = __fadd_rn(y, 12582912.f);         /* 1.5 x 2^23: t's low mantissa bits are round(y) */
    const float f = __fsub_rn(y, __fsub_rn(t, 12582912.f));
    const float p = fmaf(fmaf(fmaf(0.0551716688f, f, 0.242611148f), f, 0.693260988f), f, 0.999928072f);
    return p * __int_as_float((__float_as_int(t) << 23) + 0x3f800000); /* x 2^round(y) */
}

/* CAUSAL_BOUND_ONLY (on by default where FMHA_MASK is 1): test each score against the
 * row's right bound alone. A causal kernel runs only problems with no left window and no
 * sink tokens (select.c's signature: KMASK_CAUSAL), so the other two compares always
 * pass. Measured per kernel: the sm90 forward's causal PTX is 10-16% shorter with no more
 * spills, level to +7.6% on causal cells from 512 to 4k, but -3-4% at fp8 hd256 from 4k,
 * which sets it to 0 (fwd_wgmma.cuh; perf-notes run 169); the mma.sync forward +10-13% on
 * hd128 causal cells (run 172; ptxas spills 32 -> 76 bytes for sm_90, 116 -> 24 for
 * sm_80); the split-KV decode kernel +1-3% at 32/8 heads and up to +23% at 64/8 with four
 * query tokens a sequence (32 query rows a block, twice the compares per key byte; run
 * 173). A kernel defines it as 0 before this header to keep the window-general test. */
#ifndef CAUSAL_BOUND_ONLY
#define CAUSAL_BOUND_ONLY (FMHA_MASK == 1)
#endif
#if CAUSAL_BOUND_ONLY && FMHA_MASK != 1
#error "CAUSAL_BOUND_ONLY is for causal kernels (FMHA_MASK 1) only"
#endif

/* Scale, soft-cap, bias and mask one tile of scores, then the online-softmax update:
 * s becomes P (unnormalised, exp2 domain), the row max and sum move on, and alpha[half]
 * is the factor the caller must apply to O's rows (rescale_o). `masked` says whether
 * any score of the tile needs the mask test. COLS: the scores' columns (the key tile, or
 * the warp's share of it in the decode kernel). The sm90 kernel passes it as a constant
 * (online_softmax<MASKED>, two inlined copies): a runtime test inside the element loop
 * cuts it into one basic block per element and ptxas cannot interleave the chains across
 * them (perf-notes run 17). The sm80 kernel still passes its per-tile flag at run time
 * (one copy, a uniform branch per element); moving it to the two-copy form changes its
 * registers and spills and waits for a measurement on the device.
 * FOLD (only without soft-cap and bias, and only for a positive scale_log2, which the
 * caller tests): the scores stay raw through the mask and the max, since for a positive
 * scale max(x scale) = max(x) scale, and the scale goes into the exponent's one FFMA,
 * 2^(x scale_log2 - base): one FMUL less a score.
 * SUM false: the row sums are left alone, for a caller that has the tensor cores add P's
 * rows up with P V (fwd_wgmma.cuh's ROWSUM_MMA). */
template <typename Params, typename Rows, int COLS = TN, bool FOLD = false, bool SUM = true>
__device__ __forceinline__ void online_softmax_tile(bool masked, float *s, float *row_max, float *row_sum,
                                                    float *alpha, const Params &p, const Rows &w, int n0,
                                                    float slope, const elem_t *bias)
{
    constexpr int CHAINS = COLS / 8 < SOFTMAX_CHAINS ? COLS / 8 : SOFTMAX_CHAINS;
    static_assert(!FOLD || (!FMHA_SOFTCAP && !FMHA_BIAS), "the scale folds into the exponent only when it is linear");
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = row_of(w, half);
        /* the row's visible keys: [lo, hi] (64-bit sums, clamped) and the sink tokens;
         * under CAUSAL_BOUND_ONLY the right bound alone (above) */
        int hi = w.sk - 1;
#if FMHA_MASK
        int lo = -1;
        if (masked) {
            const long long c = (long long)i + w.diag;
            if (p.window_right >= 0 && c + p.window_right < hi) hi = (int)(c + p.window_right < -1 ? -1 : c + p.window_right);
            if (!CAUSAL_BOUND_ONLY && p.window_left >= 0 && c - p.window_left > lo)
                lo = (int)(c - p.window_left > w.sk ? w.sk : c - p.window_left);
        }
#endif
        float mxc[CHAINS]; /* the row's max in CHAINS independent chains (block jj feeds jj % CHAINS) */
#pragma unroll
        for (int c = 0; c < CHAINS; c++) mxc[c] = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < COLS / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = n0 + jj * 8 + 2 * w.t + e;
                float x = FOLD ? s[jj * 4 + 2 * half + e]
                               : score_log2(s[jj * 4 + 2 * half + e], p, i, col, w.sq, w.sk, slope_of(w, slope, half),
                                            bias_of(w, bias, half));
                if (masked) {
#if FMHA_MASK && !CAUSAL_BOUND_ONLY
                    const bool visible = col <= hi && (col >= lo || col < p.sink_tokens);
#else
                    const bool visible = col <= hi;
#endif
                    x = visible ? x : -INFINITY;
                }
                s[jj * 4 + 2 * half + e] = x;
                mxc[jj % CHAINS] = fmaxf(mxc[jj % CHAINS], x);
            }
        float mx = mxc[0];
#pragma unroll
        for (int c = 1; c < CHAINS; c++) mx = fmaxf(mx, mxc[c]);
        mx = quad_max(mx);
        if (FOLD) mx *= p.scale_log2; /* -inf stays -inf: the scale is positive */
        const float m_new = fmaxf(row_max[half], mx);
        /* a row that has seen no visible key keeps m = -inf: use 0 as the base so that
         * exp2(-inf - 0) = 0 instead of NaN */
        const float base = m_new == -INFINITY ? 0.f : m_new;
        alpha[half] = fast_exp2(row_max[half] - base);
        row_max[half] = m_new;
#if FMHA_FP8
        const float pbase = base - P_LOG2_SCALE; /* P carries 2^P_LOG2_SCALE (variant.cuh) */
#else
        const float pbase = base;
#endif
        float sumc[CHAINS];
#pragma unroll
        for (int c = 0; c < CHAINS; c++) sumc[c] = 0.f;
#pragma unroll
        for (int jj = 0; jj < COLS / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float x = s[jj * 4 + 2 * half + e];
                const float y = FOLD ? fmaf(x, p.scale_log2, -pbase) : x - pbase;
                const float pe = POLY_EXP_AT(masked, jj) ? poly_exp2(y) : fast_exp2(y);
                s[jj * 4 + 2 * half + e] = pe;
                if (SUM) sumc[jj % CHAINS] += pe;
            }
        if (SUM) {
            float sum = sumc[0];
#pragma unroll
            for (int c = 1; c < CHAINS; c++) sum += sumc[c];
            row_sum[half] = row_sum[half] * alpha[half] + sum;
        }
    }
}

/* The stale-max softmax of an unmasked key tile (fwd_wgmma.cuh's STALE_MAX): the same
 * result as online_softmax_tile<.., TN, FOLD, false>(false, ..), with the exponentials
 * based on the row's max of the tiles before, so that none waits for this tile's max (the
 * max chains, the quad shuffles and the FMNMX with the old max: run 155 measured that wait
 * at two thirds of the max's cost in fp8). The tile's max is still taken, beside, and
 * checked after: a row whose max rose by at most STALE_SLACK keeps its old base (its P is
 * then at most 2^(P_LOG2_SCALE + STALE_SLACK) = 2^8.75 = 430, inside e4m3's 448, and the
 * epilogue's normalisation holds for any base); a row that rose further moves its base to
 * the new max, its P times alpha = 2^(old - new), the factor O gets anyway. That product
 * is the exponential on the new base to the ulp of the factor while the rise is at most
 * STALE_RESCALE_MAX: P was at most 2^(P_LOG2_SCALE + 64), finite, and what flushed to zero
 * would flush on the new base too. Past it (or for a row with no key before: its old max
 * -inf, base 0), P may have overflowed, so `refetch` (the kernel's: raw scores of the
 * thread's rows and columns, into s) computes the tile's scores again, and both rows are
 * redone on their new bases. The vote keeps a warp's lanes together; the common tile takes
 * no branch but it. No row sums: the kernel's tensor cores add up the quantised P
 * (fwd_wgmma.cuh's ROWSUM_MMA), so that a value's rounding cancels between P V and the sum
 * (why only there: fwd_wgmma.cuh's STALE_MAX). How often a warp's 16 rows move, with slack
 * 0.75 (P at 2^8) and 2.75 (at 2^6), scores N(0, 1.44^2) in log2 units (randn q and k at
 * hd128), 32 and 128 key tiles (NumPy): 38% and 15% of the tiles, against 2.3% and 1.8%.
 */
#define STALE_SLACK (8.75f - P_LOG2_SCALE)
#define STALE_RESCALE_MAX 64.f

template <bool FOLD, typename Params, typename Refetch>
__device__ __forceinline__ void online_softmax_stale(float *s, float *row_max, float *alpha, const Params &p,
                                                     const tile_rows_t &w, int n0, float slope, const elem_t *bias,
                                                     const Refetch &refetch)
{
    constexpr int CHAINS = TN / 8 < SOFTMAX_CHAINS ? TN / 8 : SOFTMAX_CHAINS;
    static_assert(!FOLD || (!FMHA_SOFTCAP && !FMHA_BIAS), "the scale folds into the exponent only when it is linear");
    float m_tile[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = row_of(w, half);
        const float pbase = (row_max[half] == -INFINITY ? 0.f : row_max[half]) - P_LOG2_SCALE;
        float mxc[CHAINS];
#pragma unroll
        for (int c = 0; c < CHAINS; c++) mxc[c] = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < TN / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float &x = s[jj * 4 + 2 * half + e];
                const float v = FOLD ? x : score_log2(x, p, i, n0 + jj * 8 + 2 * w.t + e, w.sq, w.sk, slope, bias);
                mxc[jj % CHAINS] = fmaxf(mxc[jj % CHAINS], v);
                x = fast_exp2(FOLD ? fmaf(v, p.scale_log2, -pbase) : v - pbase);
            }
        float mx = mxc[0];
#pragma unroll
        for (int c = 1; c < CHAINS; c++) mx = fmaxf(mx, mxc[c]);
        mx = quad_max(mx);
        if (FOLD) mx *= p.scale_log2;
        m_tile[half] = mx;
    }
    alpha[0] = alpha[1] = 1.f;
    const bool moved0 = m_tile[0] > row_max[0] + STALE_SLACK, moved1 = m_tile[1] > row_max[1] + STALE_SLACK;
    /* a warp's votes, one a row half: a half that no lane moved skips its multiplies */
    const bool any0 = __any_sync(0xffffffffu, moved0), any1 = __any_sync(0xffffffffu, moved1);
    if (!(any0 || any1)) return;
    /* a rise past STALE_RESCALE_MAX, or from -inf (inf > it; -inf - -inf is NaN, not) */
    const bool far = m_tile[0] - row_max[0] > STALE_RESCALE_MAX || m_tile[1] - row_max[1] > STALE_RESCALE_MAX;
    if (moved0) alpha[0] = fast_exp2(row_max[0] - m_tile[0]), row_max[0] = m_tile[0];
    if (moved1) alpha[1] = fast_exp2(row_max[1] - m_tile[1]), row_max[1] = m_tile[1];
    if (far) {
        refetch(s);
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int i = row_of(w, half);
            const float pbase = (row_max[half] == -INFINITY ? 0.f : row_max[half]) - P_LOG2_SCALE;
#pragma unroll
            for (int jj = 0; jj < TN / 8; jj++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float &x = s[jj * 4 + 2 * half + e];
                    const float v = FOLD ? x : score_log2(x, p, i, n0 + jj * 8 + 2 * w.t + e, w.sq, w.sk, slope, bias);
                    x = fast_exp2(FOLD ? fmaf(v, p.scale_log2, -pbase) : v - pbase);
                }
        }
        return;
    }
#pragma unroll
    for (int half = 0; half < 2; half++) {
        if (!(half ? any1 : any0)) continue;
#pragma unroll
        for (int jj = 0; jj < TN / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) s[jj * 4 + 2 * half + e] *= alpha[half];
    }
}

template <bool MASKED, bool FOLD = false, bool SUM = true, int COLS = TN, typename Params>
__device__ __forceinline__ void online_softmax(float *s, float *row_max, float *row_sum, float *alpha, const Params &p,
                                               const tile_rows_t &w, int n0, float slope, const elem_t *bias)
{
    online_softmax_tile<Params, tile_rows_t, COLS, FOLD, SUM>(MASKED, s, row_max, row_sum, alpha, p, w, n0, slope, bias);
}

/* The online softmax's start for SLABS_ slabs: O zero, each row's max -inf and sum 0. */
template <int SLABS_, int DV_>
__device__ __forceinline__ void init_softmax_state(float (*o)[DV_ / 8][4], float (*row_max)[2], float (*row_sum)[2])
{
#pragma unroll
    for (int s = 0; s < SLABS_; s++) {
#pragma unroll
        for (int d = 0; d < DV_ / 8; d++) o[s][d][0] = o[s][d][1] = o[s][d][2] = o[s][d][3] = 0.f;
        row_max[s][0] = row_max[s][1] = -INFINITY;
        row_sum[s][0] = row_sum[s][1] = 0.f;
    }
}

/* O's rows times the online softmax's correction (DV_ columns). */
template <int DV_>
__device__ __forceinline__ void rescale_o(float *o, const float *alpha)
{
#pragma unroll
    for (int d = 0; d < DV_ / 8; d++) {
        o[d * 4 + 0] *= alpha[0];
        o[d * 4 + 1] *= alpha[0];
        o[d * 4 + 2] *= alpha[1];
        o[d * 4 + 3] *= alpha[1];
    }
}

/* rescale_o unless no row of the warp moved its max this tile (alpha 1 on every lane):
 * past a long row's first tiles its max rarely moves. A vote, so the warp stays
 * converged (and a NaN alpha, != 1, still scales). */
template <int DV_>
__device__ __forceinline__ void rescale_o_if_moved(float *o, const float *alpha)
{
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) rescale_o<DV_>(o, alpha);
}

#endif /* FMHA_KERNEL_SOFTMAX_CUH */
