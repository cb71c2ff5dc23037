/* SPDX-License-Identifier: MIT */
/*
 * wgmma_softmax.cuh: the sm90 forward's softmax of a key tile (fwd_wgmma.cuh, over
 * softmax.cuh): fp8's folded descales, the exact online softmax with its masked copy, and
 * fp8 hd128's stale-max softmax with its rare recomputation.
 */
#ifndef FMHA_KERNEL_WGMMA_SOFTMAX_CUH
#define FMHA_KERNEL_WGMMA_SOFTMAX_CUH

#if FMHA_FP8
/* What the softmax and the score transform read of the params (softmax.cuh, common.cuh),
 * with an item's q and k descales folded into the scale and soft-cap's exponent factor:
 * the scores then cost one multiply each, as in the 16-bit kernel. No bias with fp8, so
 * neither the plain scale nor the bias strides (common.cuh reads them for a bias only). */
typedef struct {
    float scale_log2, softcap_in, softcap_log2, softcap_lin, softcap_cub;
    int window_left, window_right, sink_tokens;
} fp8_softmax_params_t;

__device__ __forceinline__ fp8_softmax_params_t fp8_softmax_params(const fmha_fwd_params_t &p, float qk_descale)
{
    return {p.scale_log2 * qk_descale, p.softcap_in * qk_descale, p.softcap_log2, p.softcap_lin, p.softcap_cub,
            p.window_left, p.window_right, p.sink_tokens};
}
#endif

/* The scale folded into the exponent (softmax.cuh's FOLD: one FMUL a score less) where
 * the score transform is linear, for the items whose scale is positive; the others, a
 * negative scale (an fp8 descale may be one) or soft-cap or bias, take the plain copy.
 * Measured (perf-notes run 80): 16-bit hd64 +5-12%, hd128 +1-8%, fp8 +0-3% unmasked and
 * +3-20% causal; 16-bit hd256 on 64-key tiles lost up to 5% from 4k, so it keeps the
 * plain copy, while on 80-key tiles it gains 2-4% unmasked and 3-6% causal (run 85).
 * FMHA_SCALE_FOLD=0 turns it off (the bench's A/B). */
#ifndef FMHA_SCALE_FOLD
#define FMHA_SCALE_FOLD (FMHA_FP8 || DV <= 128 || TN == 80)
#endif
#define SCALE_FOLD (FMHA_SCALE_FOLD && !FMHA_SOFTCAP && !FMHA_BIAS)

/* The online softmax of key tile n0 (softmax.cuh): its masked copy only where the tile
 * needs the mask test (`masked`, the caller's tile_needs_mask). */
template <int COLS = TN, typename SP>
__device__ __forceinline__ void exact_softmax_of_tile(bool masked, const SP &sp, const tile_rows_t &rows, int n0,
                                                      float slope, const elem_t *bias, float *s, float *row_max,
                                                      float *row_sum, float *alpha)
{
#if SCALE_FOLD
    if (sp.scale_log2 > 0.f) {
        if (masked)
            online_softmax<true, true, !ROWSUM_MMA, COLS>(s, row_max, row_sum, alpha, sp, rows, n0, slope, bias);
        else
            online_softmax<false, true, !ROWSUM_MMA, COLS>(s, row_max, row_sum, alpha, sp, rows, n0, slope, bias);
        return;
    }
#endif
    if (masked)
        online_softmax<true, false, !ROWSUM_MMA, COLS>(s, row_max, row_sum, alpha, sp, rows, n0, slope, bias);
    else
        online_softmax<false, false, !ROWSUM_MMA, COLS>(s, row_max, row_sum, alpha, sp, rows, n0, slope, bias);
}

template <int COLS = TN, typename SP>
__device__ __forceinline__ void softmax_of_tile(const fmha_fwd_params_t &p, const SP &sp, const item_t &w,
                                                const tile_rows_t &rows, int n0, float slope, const elem_t *bias,
                                                float *s, float *row_max, float *row_sum, float *alpha)
{
    exact_softmax_of_tile<COLS>(tile_needs_mask(p, n0, w.m0, w.s.sk, w.diag), sp, rows, n0, slope, bias, s,
                                row_max, row_sum, alpha);
}

/* The stale-max softmax (softmax.cuh's online_softmax_stale) on the unmasked tiles of the
 * overlapped loop after an item's first, in fp8 hd128 where the tensor cores sum P's rows
 * (ROWSUM_MMA, no LSE): there the row max's wait was most of its cost (perf-notes run
 * 155). Only there, because a row whose max was not yet reached quantises its P on a base
 * below the max, where its top values need not be powers of two: with the sums of the
 * quantised P (ROWSUM_MMA) a value's rounding cancels between P V and the sum, with fp32
 * sums of the unquantised P it does not, and rows of equal scores (soft-capped q scaled
 * 1e4) then carry one rounding error through O: 2.1x the exact form's error, past the
 * fp8 rule (perf-notes run 157). Its rare recomputation reads the tile's K stage and Q,
 * so in that loop K (and, after the item's last tile, Q) is released after the softmax
 * instead of after S (measured: 0-2.4% of the gain). Not in fp8 hd256, whose serial loop
 * spilled 150-240 bytes with it (O takes 128 registers there). FMHA_STALE_MAX=0 turns it
 * off (the bench's A/B). */
#define STALE_MAX (FMHA_STALE_MAX && ROWSUM_MMA)
static_assert(!STALE_MAX || FMHA_P_LOG2_SCALE == 6, "the stale-max softmax wants P at 2^6 (the top of fwd_wgmma.cuh)");

#if STALE_MAX
/* Four e4m3 bytes (the lowest first) to fp32, through f16x2: exact, every e4m3 value is
 * an f16 one (NaN stays NaN). */
__device__ __forceinline__ void e4m3x4_to_f32(u32 v, float *f)
{
    asm("{\n"
        " .reg .b16 a, b, h0, h1, h2, h3;\n"
        " .reg .b32 x, y;\n"
        " mov.b32 {a, b}, %4;\n"
        " cvt.rn.f16x2.e4m3x2 x, a;\n"
        " cvt.rn.f16x2.e4m3x2 y, b;\n"
        " mov.b32 {h0, h1}, x;\n"
        " mov.b32 {h2, h3}, y;\n"
        " cvt.f32.f16 %0, h0;\n"
        " cvt.f32.f16 %1, h1;\n"
        " cvt.f32.f16 %2, h2;\n"
        " cvt.f32.f16 %3, h3;\n"
        "}\n"
        : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3])
        : "r"(v));
}

/* The stale-max softmax's recomputation: a thread's raw scores of one key tile (rows r and
 * r + 8 of its warpgroup's 64, r = 16 warp + g; columns 8 jj + 2 t + e), in the
 * accumulator layout, from Q's and K's swizzled bytes (sw_offset: what issue_s's
 * descriptors read) on the CUDA cores, fp32 sums of exact products. Slow (DQK / 4 passes
 * over the tile's 32 K rows a thread) and rare: a row's max rising by more than 64 (a factor
 * of 2^64) between tiles, or a row's first visible key in an unmasked tile. */
typedef struct {
    const char *q;  /* the warpgroup's Q rows (sQw) */
    const in_t *k;  /* the tile's K stage */

    __device__ __forceinline__ void operator()(float *s) const
    {
        const int lane = threadIdx.x % 32, r = (int)(threadIdx.x % 128) / 32 * 16 + lane / 4, t = lane % 4;
#pragma unroll
        for (int i = 0; i < TN / 2; i++) s[i] = 0.f;
#pragma unroll 1
        for (int c = 0; c < DQK / 4; c++) { /* 4 bytes of each row a pass: a quarter of a 16-byte chunk */
            const int chunk = c / 4, byte = (c % 4) * 4;
            float qf[2][4];
#pragma unroll
            for (int h = 0; h < 2; h++) e4m3x4_to_f32(*(const u32 *)(q + sw_offset<TM>(r + 8 * h, chunk) + byte), qf[h]);
#pragma unroll
            for (int e = 0; e < 2; e++) {
                /* K rows 8 jj + 2 t + e share their swizzle (it repeats every 8 rows): one
                 * address a pass, the blocks jj at immediate offsets */
                const char *ke = (const char *)k + sw_offset<TN>(2 * t + e, chunk) + byte;
#pragma unroll
                for (int jj = 0; jj < TN / 8; jj++) {
                    float kf[4];
                    e4m3x4_to_f32(*(const u32 *)(ke + jj * 8 * SW_BYTES), kf);
#pragma unroll
                    for (int d = 0; d < 4; d++) {
                        s[jj * 4 + e] = fmaf(qf[0][d], kf[d], s[jj * 4 + e]);
                        s[jj * 4 + 2 + e] = fmaf(qf[1][d], kf[d], s[jj * 4 + 2 + e]);
                    }
                }
            }
        }
    }
} score_refetch_t;

/* softmax_of_tile for the overlapped loop's tiles after an item's first: the stale-max
 * form on unmasked tiles, the exact one on masked tiles (their rows may see no key). */
template <typename SP>
__device__ __forceinline__ void softmax_of_later_tile(const fmha_fwd_params_t &p, const SP &sp, const item_t &w,
                                                      const tile_rows_t &rows, int n0, float slope,
                                                      const elem_t *bias, float *s, float *row_max, float *row_sum,
                                                      float *alpha, const score_refetch_t &refetch)
{
    if (tile_needs_mask(p, n0, w.m0, w.s.sk, w.diag)) {
        exact_softmax_of_tile(true, sp, rows, n0, slope, bias, s, row_max, row_sum, alpha);
        return;
    }
#if SCALE_FOLD
    if (sp.scale_log2 > 0.f) {
        online_softmax_stale<true>(s, row_max, alpha, sp, rows, n0, slope, bias, refetch);
        return;
    }
#endif
    online_softmax_stale<false>(s, row_max, alpha, sp, rows, n0, slope, bias, refetch);
}
#endif

#endif /* FMHA_KERNEL_WGMMA_SOFTMAX_CUH */
