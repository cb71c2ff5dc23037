/* SPDX-License-Identifier: MIT */
/* heuristics.c: see heuristics.h. Each function states its cost model. */
#include "heuristics.h"

#include <math.h>

#include "specs.h"
#include "../cuda/kernels/fwd/tail_trim.h"

double fmha__heur_padding_waste(int64_t seqlen_q, int tile_m)
{
    if (seqlen_q <= 0 || tile_m <= 0) return 0.0;
    int64_t tiles = (seqlen_q + tile_m - 1) / tile_m;
    return (double)(tiles * tile_m - seqlen_q) / (double)(tiles * tile_m);
}

/* Occupancy: min over the three per-SM budgets. Registers per thread are taken as the
 * accumulators plus 64 for addresses, fragments and softmax state (FA2's 4-warp hd128
 * kernel compiles to about 255 with 192 accumulators). */
int fmha__heur_occupancy(const fmha_key_t *k, const hw_t *hw)
{
    if (k->pipeline == KPIPE_CPUREF) return 1;
    int smem = fmha__smem_bytes(k);
    int by_smem = smem > 0 ? hw->smem_per_sm / smem : 32;
    int threads = 32 * k->warps;
    int regs = fmha__acc_regs(k) + 64;
    if (regs > 255) regs = 255;
    int by_regs = threads > 0 ? hw->regs_per_sm / (threads * regs) : 32;
    int by_threads = threads > 0 ? 2048 / threads : 32;
    int occ = by_smem < by_regs ? by_smem : by_regs;
    if (by_threads < occ) occ = by_threads;
    return occ > 0 ? occ : 1;
}

double fmha__heur_wave_efficiency(int64_t ctas, int sm_count, int occupancy)
{
    double slots = (double)sm_count * (occupancy > 0 ? occupancy : 1);
    if (ctas <= 0 || slots <= 0) return 1.0;
    double waves = (double)ctas / slots;
    return waves / ceil(waves);
}

/* The wgmma forward's rate per key for a key tile wider than the shape's base: at head
 * dim 256 a tile's fixed costs (O's rescale over 128 registers a thread, the barriers,
 * the row statistics) spread over 80 keys instead of 64, and the 80-key kernel also runs
 * the overlapped loop when masked, skips O's rescale where no row max moved and folds the
 * scale into the exponent (fwd_wgmma.cuh). Measured (bf16, 16k tokens, 80 against 64):
 * run 85 unmasked +4% at 512, +9% at 1k, +13-21% from 2k; causal -4% at 512 (the
 * diagonal crosses more partly masked tiles, and 80 > tile_m / 2 leaves no tile that a
 * warpgroup can skip), +4% at 1k, +13-22% from 2k. Run 101 (after the staged epilogue and
 * the cut): unmasked -3.5% at 512 (512 keys fill 7 tiles of 80, 560 keys of work, or 8 of
 * 64 exactly), +3% at 1k, +6% at 2k. Run 148 (H200, each forced in one binary, after the
 * O storer of run 137): causal +2.8% at 512 (321.7 / 313.0 TFLOPS), +9% at 1k, +13% at
 * 2k; unmasked level at 512, +5% at 1k. With fmha__heur_cost's fill term (two key tiles a
 * CTA) and its last tile's padding, these factors make each of those choices: 80 keys
 * wherever a mask is set, 64 unmasked at 512 where the 80-key kernel computes whole tiles
 * (wgmma_computed_keys: with its last tile trimmed, 80 there too, run 185). */
static double wgmma_tile_gain(const fmha_key_t *k)
{
    if (k->hdim_v == 256 && k->tile_n == 80) return k->mask != KMASK_NONE ? 1.08 : 1.10;
    return 1.0;
}

/* The split-KV decode kernel (fmha__decode_layout) reads each key once per KV head and is
 * bound by bandwidth, not by its tile: its warps split each key tile, so tile_n does not
 * change what a key costs (its rate below is taken at 64 keys), and on a contiguous cache
 * it runs one CTA per SM (fmha__cuda_num_splits), so neither does occupancy. What the
 * warps do change is the last split's reduction, a warp per query row (GQA group x query
 * rows): with more rows than warps each warp pays one L2 round trip per row. Measured on
 * the H100 (perf-notes runs 108 and 111, 128-key tiles over 8 warps against 64 over 4,
 * bf16 hd128 B1): a group of 8 +4-6% at 2k and +8-9% at 8k, but level or -6% at 32k,
 * where the reduction is a small part of a split's time; a group of 4, one row a warp
 * either way, -6% at 2k; batch 16, one split and no reduction, -2%. So the term holds up
 * to 16k keys, and splits are taken to exist while batch x KV heads fill at most half
 * the SMs (num_splits then picks two or more). Over pages the same (run 115, 128-key
 * tiles over 4 against 8 warps, page 16): a group of 8 -8% at B1 2k and -5% at 8k on 4
 * warps, a group of 4 level at 2k and +4% at 8k. The factor on the rate: */
static double decode_rows_factor(const fmha_key_t *k, const work_t *w, const hw_t *hw)
{
    const int64_t heads_kv = w->heads_kv > 0 ? w->heads_kv : w->heads_q;
    const int64_t rows = (heads_kv > 0 ? w->heads_q / heads_kv : 1) * w->seqlen_q;
    const int64_t per_warp = k->warps > 0 ? (rows + k->warps - 1) / k->warps : 1;
    const int reduced = 2 * w->batch * heads_kv <= hw->sm_count && w->seqlen_kv <= 16384;
    return reduced && per_warp > 1 ? 1.0 / (1.0 + 0.06 * (double)(per_warp - 1)) : 1.0;
}

/* The keys the wgmma kernel computes for `keys` of a sequence on tile_n-key tiles:
 * whole tiles, but for the kernels that run the last tile on the columns it has
 * (fwd_wgmma.cuh's TAIL_TRIM, by tail_trim.h's rule, which both read: hd256's 80-key
 * tile, unmasked, batch mode, no bias, soft-cap, sinks or pages, 16-bit), whose last tile computes its keys rounded up to
 * 16, and at least 32. Measured (perf-notes run 185, H200, 80-key tile forced): 512 keys
 * +1.5% trimmed against whole, 1k-4k +0.9-1.5%; trimmed against the 64-key tile at 512
 * +1.5%. */
static double wgmma_computed_keys(const fmha_key_t *k, double keys, double tiles, double n)
{
    const int trims = FMHA_TAIL_TRIMS(k->tile_m, k->tile_n, k->hdim_v, k->dtype == KD_FP8, k->mask != KMASK_NONE, k->lse,
                                      k->bias != KB_NONE, k->softcap, k->sink, k->mode != KM_BATCH, k->paged != KP_NONE);
    const double tail = keys - (tiles - 1.0) * n; /* the last tile's keys, 1..n */
    if (!trims || tail > 64.0) return tiles * n;
    const double last = tail <= 32.0 ? 32.0 : 16.0 * ceil(tail / 16.0);
    return (tiles - 1.0) * n + last;
}

/* Cost model: the grid has B * Hq * ceil(Sq / tile_m) CTAs; each SM runs `occupancy` of
 * them at once, sharing its tensor cores, so a wave takes occupancy * (CTA work / rate)
 * and the grid takes ceil(waves) of them. CTA work = tile_m * Sk * visible fraction *
 * (Dqk + Dv) multiply-adds. Rates are relative to the sm80-path kernel with a saturated
 * tile, and measured on an H100 (docs/perf-notes.md):
 *  - mma.sync: each K/V tile is reused by tile_m rows: rate scales with m*n/(m+n),
 *    saturating at a 64x32 tile (tile sweep: 64x64 and 128x32 match 128x64 once register
 *    pressure is equal); more than 160 fp32 accumulators per thread spill (ptxas: 116
 *    bytes at 192): measured 0.8x (hd64 128x128 190 vs 128x64 239 TFLOPS; hd128 128x64
 *    240 vs 128x32 265, bf16, s=4096); masked tiles cost it more: causal runs at about
 *    0.7 of the unmasked rate (run 6), modelled as 0.75;
 *  - wgmma (run 17: TMA loads into 128-byte-swizzled tiles, a branch-free softmax): at
 *    long sequences 1.8x the sm80 kernel at hd64 (480 vs ~262 TFLOPS unmasked at 16k),
 *    1.85x at hd128 (545 vs 292), 2.4x at hd256 (664 vs 270); a mask costs it a factor
 *    0.95 (causal 431 / 557 / 623 at 16k) against the sm80 kernel's 0.75; each CTA pays
 *    about two key tiles of pipeline fill, so the shortest masked sequences at hd64
 *    (tile_m 192) are a tie (107 vs 106 TFLOPS at 512). Run 72's overlap inside a
 *    warpgroup took wgmma hd128 to 618-648 unmasked at 8k-16k (about 2.2x); the rates
 *    were not refitted, since every cell of the bench already selects wgmma. The wgmma
 *    kernel computes whole key tiles, so unmasked, a tile's keys past the sequence cost as
 *    much as any (run 101: at hd256 unmasked 512 the 64-key tile's 8 tiles beat the
 *    80-key tile's 7), except where it trims the last one (wgmma_computed_keys). */
double fmha__heur_cost(const fmha_key_t *k, const work_t *w, const hw_t *hw)
{
    if (k->pipeline == KPIPE_CPUREF) return 1e30; /* any GPU kernel beats the oracle */
    int64_t tiles_m = (w->seqlen_q + k->tile_m - 1) / k->tile_m;
    int64_t ctas = w->batch * w->heads_q * tiles_m;
    /* the decode kernel over a contiguous cache: see decode_rows_factor (over pages its
     * CTAs share SMs, and the 128-key tile is chosen by occupancy, perf-notes run 77) */
    const int decode = fmha__decode_layout(k) && k->paged == KP_NONE;
    int occ = decode ? 1 : fmha__heur_occupancy(k, hw);
    double slots = (double)hw->sm_count * occ;
    double waves = ceil((double)ctas / slots);
    double cta_work = (double)k->tile_m * (double)w->seqlen_kv * w->visible_fraction * (k->hdim_qk + k->hdim_v);
    double n = k->tile_n > 0 ? k->tile_n : 64;
    double rate;
    if (k->pipeline == KPIPE_WGMMAWS) {
        rate = k->hdim_qk <= 64 ? 1.8 : k->hdim_qk <= 128 ? 1.85 : 2.4;
        if (k->mask != KMASK_NONE) rate *= 0.95;
        const double keys = (double)w->seqlen_kv * w->visible_fraction;
        double tiles = ceil(keys / n);
        if (tiles < 1) tiles = 1;
        rate *= tiles / (tiles + 2.0);
        /* unmasked, the last tile's keys past the sequence that it computes; a mask's
         * partial tiles are in the rates above (and counting them here sent causal 512
         * to mma.sync: run 104) */
        if (keys > 0 && k->mask == KMASK_NONE) rate *= keys / wgmma_computed_keys(k, keys, tiles, n);
        rate *= wgmma_tile_gain(k);
    } else {
        if (decode) n = 64;
        double intensity = ((double)k->tile_m * n / (k->tile_m + n)) / (64.0 * 32.0 / 96.0); /* 1.0 at 64x32 */
        rate = intensity < 1.0 ? intensity : 1.0;
        if (fmha__acc_regs(k) > 160) rate *= 0.8;
        if (k->mask != KMASK_NONE) rate *= 0.75;
        /* over pages only between the 16-row tiles (run 115): the 32-row tile's place
         * against the 64-row kernel stays with occupancy there, as measured before */
        if (decode || (fmha__decode_layout(k) && k->tile_m == 16)) rate *= decode_rows_factor(k, w, hw);
    }
    return waves * occ * cta_work / rate;
}
