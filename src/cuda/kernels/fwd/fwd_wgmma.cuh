/* SPDX-License-Identifier: MIT */
/*
 * fwd_wgmma.cuh: the sm90a forward kernel: warp-specialised, wgmma on tensor cores.
 *
 * A CTA owns TILE_M = 64 * CONSUMERS query rows of one (batch, head) and has
 * CONSUMERS + 1 warpgroups. The last warpgroup is the producer: it copies Q once and
 * then the K and V tiles (TILE_N keys) into a ring of FMHA_STAGES stages (the key's) in
 * shared memory -- by TMA from one thread when the host could encode the tensor maps
 * (batch mode), else by cp.async from all 128 -- handing K and V of a stage over
 * separately with mbarriers ("full_k", "full_v"); consumers give K back as soon as S is
 * computed and V after P V ("empty_k", "empty_v"), so the next K copy overlaps the
 * softmax. Each consumer warpgroup owns 64 rows: S = Q K^T with
 * wgmma (both operands in shared memory), then the mask, bias and online softmax in
 * registers (the m64nN accumulator holds, per warp, the m16n8 fragments the sm80 kernel
 * uses, so that code carries over), then O += P V with P straight from registers as
 * wgmma's A operand and V read transposed from shared memory. At head dim 256, O is two
 * m64n128 accumulators (128 registers per thread), so that key tiles are 64 or 80 wide
 * there (80: S is m64n80, 40 registers).
 *
 * Shared memory holds every operand in wgmma's 128-byte-swizzle layout (load_sw128): Q
 * and K as K-major, V as MN-major for the transposed B of P V; all three are stored the
 * same way, rows of 64 head-dim elements with their 16-byte chunks permuted by row.
 *
 * FP8 (FMHA_FP8): Q, K, V are e4m3 bytes, so a 128-byte swizzled row holds 128 head-dim
 * elements, S = Q K^T runs k32 steps, and scores take the descales of q and k. wgmma has
 * no transposed fp8 operand, so V goes through a K-major copy: producer warps 1-3
 * transpose each V stage into "Vt" (transpose_v) while warp 0 issues the boxes; they
 * free the V stage as soon as it is read and hand Vt over on its own barriers. P goes to
 * e4m3 in registers in the order that makes the accumulator's columns wgmma's A layout
 * (pack_p), and the transpose writes V's keys in that same order. At head dim 64 a row of
 * Q, K or V is 64 bytes, so those tiles take the 64-byte swizzle (SW_BYTES, desc_sw64);
 * Vt's rows are TN keys long and keep the 128-byte one. At head dim 128 without LSE, Vt
 * has eight more rows, one of them all ones, so that P V also sums P's rows (ROWSUM_MMA;
 * the sums move into fp32 a key tile at a time, ROWSUM_PROMOTE);
 * that kernel's softmax bases its exponentials on the row's max of the tiles before and
 * corrects a row only when its max rises (STALE_MAX), so it gives K back after the
 * softmax rather than after S. Batch mode, TMA only.
 *
 * Variants: variant.cuh's, plus FMHA_WARPS = 4 * (CONSUMERS + 1). Compiles under NVRTC
 * with the embedded headers of src/cuda/kernels (fwd/, device/); sm_90a only.
 */
#include "fwd_params.h"
#include "tail_trim.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 128
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 128
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 12
#endif
/* The stale-max softmax (STALE_MAX, below) keeps P at 2^6 of its row's max, not 2^8, so
 * that a max 2.75 above the old one still fits e4m3 (variant.cuh's P_LOG2_SCALE). */
#ifndef FMHA_STALE_MAX
#define FMHA_STALE_MAX 1
#endif
#if FMHA_STALE_MAX && defined(FMHA_FP8) && FMHA_FP8 && FMHA_HDIM_V == 128 && !(defined(FMHA_LSE) && FMHA_LSE) && \
    !defined(FMHA_P_LOG2_SCALE)
#define FMHA_P_LOG2_SCALE 6
#endif
#include "variant.cuh"

#define CONSUMERS (TM / 64)
#define NTHREADS (128 * (CONSUMERS + 1))

static_assert(FMHA_WARPS == 4 * (CONSUMERS + 1), "wgmma: warps = 4 x (1 producer + consumers)");
static_assert(TM % 64 == 0 && CONSUMERS >= 1 && CONSUMERS <= 3, "wgmma: 64 rows per consumer warpgroup, 1..3 of them");
static_assert(DQK % 16 == 0 && DV % 16 == 0 && TN % 16 == 0, "wgmma: dims multiples of 16");
static_assert(TN == 64 || TN == 128 || (TN == 80 && DV == 256 && !FMHA_FP8 && !FMHA_PAGED),
              "this kernel has wgmma shapes for tile_n 64 and 128, and 80 at 16-bit head dim 256 without pages");
static_assert(DV == 64 || DV == 128 || DV == 256, "this kernel has wgmma shapes for head_dim_v 64, 128 and 256");
static_assert(!FMHA_FP8 || ((DQK == 64 || DQK == 128 || DQK == 256) && DV == DQK && TN == 128 &&
                            TM == (DQK == 64 ? 192 : 128) && FMHA_BF16 && !FMHA_GROUP && !FMHA_PAGED &&
                            !FMHA_BIAS && !FMHA_DROPOUT),
              "fp8: hd64 on 192 x 128 tiles, hd128 or hd256 on 128 x 128, bf16 out, batch mode without pages, "
              "bias or dropout");

/* The fp8 kernel's softmax: several max and sum chains a row (softmax.cuh; how many per
 * head dim and mask: below), since with the GEMMs at fp8 rate the softmax's latency is
 * the tile's critical path; and O rescaled only when a row's max moved (RESCALE_SKIP: the
 * overlapped loop's start_pv; the serial loop always skips), in fp8 and in the masked
 * 16-bit kernels. Measured (perf-notes run 76,
 * hd128): fp8 +5-12% unmasked, +3% causal at 16k; 16-bit causal +3-5% from 4k with the
 * skip alone; 16-bit unmasked lost 3-9% with either (the GEMMs there already cover the
 * softmax's latency), so it keeps the single chains and the unconditional rescale --
 * except on hd256's 80-key tile, where a rescale is 128 multiplies a thread against 40
 * scores: the skip took it +1% at 1k, +3% at 4k, +11% at 16k (run 85). fp8 hd64 (128-key
 * rows, as at hd128, but half the GEMM a score) measured two chains against four at +0-2%
 * unmasked and +3-5% causal at 512 and 1k, one chain at -7 to -16% (run 149, on its former
 * 128-row tile and the overlapped loop). On the serial loops (fp8 hd64's 192-row tile,
 * hd256) the best count follows the mask, in opposite directions (run 152, 4k and 16k):
 * hd64 unmasked +3% with four, masked -5% with four; hd256 unmasked +3.5-4.3% with two,
 * masked level. hd128 measured level with two. */
#ifndef FMHA_SOFTMAX_CHAINS
#define FMHA_SOFTMAX_CHAINS (!FMHA_FP8 ? 1 : DV == 64 ? (FMHA_MASK ? 2 : 4) : DV == 256 && !FMHA_MASK ? 2 : 4)
#endif
#ifndef FMHA_RESCALE_SKIP
#define FMHA_RESCALE_SKIP (FMHA_FP8 || FMHA_MASK || TN == 80)
#endif
/* Every 8th block of an unmasked tile's exponentials by softmax.cuh's cubic on the FMA
 * pipe (FMHA_POLY_EXP) in fp8 hd256 with a mask: +2.6% at causal 4k, +3-4% from 8k
 * (perf-notes run 149). Elsewhere MUFU alone: fp8 hd128 and hd64's overlapped loop lost
 * 10-17% with any share (runs 123, 149), unmasked hd256 0.6-1.8% (run 149; why a mask
 * changes the sign is not measured). */
#ifndef FMHA_POLY_EXP
#define FMHA_POLY_EXP (FMHA_FP8 && DV > 128 && FMHA_MASK ? 8 : 0)
#endif
#define SOFTMAX_CHAINS FMHA_SOFTMAX_CHAINS
/* Causal kernels test a score against its row's right bound alone (softmax.cuh): level to
 * +7.6% on bf16 and fp8 causal cells of 512-4k, but -2.9% and -3.7% at fp8 hd256 4k and
 * 8k, which keeps the window-general test (perf-notes run 169). */
#ifndef FMHA_CAUSAL_BOUND_ONLY
#define FMHA_CAUSAL_BOUND_ONLY (FMHA_MASK == 1 && !(FMHA_FP8 && DV > 128))
#endif
#define CAUSAL_BOUND_ONLY FMHA_CAUSAL_BOUND_ONLY

#include "common.cuh"
#include "epilogue.cuh"
#include "mask.cuh"
#include "phase_clock.cuh"
#include "sequence.cuh"
#include "sm90.cuh"
#include "softmax.cuh"

/* The element type of Q, K and V in global and shared memory; the bytes of a swizzled
 * row (one block of the layout): 128, or 64 where a head-dim row is only that long (fp8 at
 * hd64); how many elements make such a row and a 16-byte chunk. */
#if FMHA_FP8
typedef unsigned char in_t; /* e4m3 */
#else
typedef elem_t in_t;
#endif
#define SW_BYTES (DQK * (int)sizeof(in_t) < 128 ? 64 : 128)
#define ROW_ELEMS (SW_BYTES / (int)sizeof(in_t))
#define CHUNK_ELEMS (16 / (int)sizeof(in_t))
static_assert(SW_BYTES == 128 || (FMHA_FP8 && DQK == 64 && DV == 64), "the 64-byte swizzle is fp8 hd64's");

/* Where 16-byte chunk c of row r of a swizzled [ROWS, D] tile lies (bytes): the head dim
 * is cut into blocks of ROW_ELEMS elements, a block is ROWS rows of SW_BYTES, and inside
 * it chunk c of row r is stored at chunk c ^ (r % 8) (128-byte swizzle) or c ^ (r / 2 % 4)
 * (64-byte): the pattern TMA writes and wgmma reads (desc_sw128, desc_sw64). */
template <int ROWS>
__device__ __forceinline__ int sw_offset(int r, int c)
{
    constexpr int CPR = SW_BYTES / 16; /* chunks a block row */
    const int swz = SW_BYTES == 128 ? (r & 7) : ((r >> 1) & 3);
    return (c / CPR) * (ROWS * SW_BYTES) + r * SW_BYTES + (((c % CPR) ^ swz) * 16);
}

/* The descriptor of a K-major Q or K operand at p (issue_s). */
__device__ __forceinline__ u64 desc_kmajor(const void *p) { return SW_BYTES == 128 ? desc_sw128(p, 16) : desc_sw64(p); }

/* Copy rows [0, ROWS) of a [ROWS, D] tile (zeros for rows without data) into the
 * swizzled layout (sw_offset). Consecutive threads copy the chunks of one row: their
 * global reads are one contiguous line and their shared-memory writes hit distinct bank
 * groups, so the fill is conflict-free (an unswizzled core-matrix layout puts those
 * chunks 128 bytes apart: an 8-way bank conflict on every copy). The same layout serves
 * as K-major (Q, K: rows are M/N, a block's elements are K) and as MN-major (16-bit V:
 * rows are the keys, i.e. P V's K, a block's 64 elements are its N).
 * FROM_FIRST (Q's copy: rows above the sequence, fwd_params.h top_partial): rows before
 * `first` read as zeros too. A compile-time switch, since that test at run time in the
 * loop that copies every cp.async K/V tile cost group mode 2% (perf-notes run 140). */
template <int ROWS, int D, bool FROM_FIRST = false>
__device__ __forceinline__ void load_sw128(in_t *dst, const in_t *src, long long row_stride, int valid, int ptid,
                                           int first = 0)
{
    const int chunks = D / CHUNK_ELEMS;
    char *base = (char *)dst;
#pragma unroll 4
    for (int i = ptid; i < ROWS * chunks; i += 128) {
        const int r = i / chunks, c = i % chunks;
        const bool in = r < valid && (!FROM_FIRST || r >= first);
        const in_t *g = src + (long long)(in ? r : FROM_FIRST ? first : 0) * row_stride + c * CHUNK_ELEMS;
        cp_async16(base + sw_offset<ROWS>(r, c), g, in ? 16 : 0);
    }
}

#if FMHA_PAGED
/* A paged K or V tile (FMHA_PAGED: fwd_pagedkv, batch_prefill) in load_sw128's layout,
 * each row from its page. Four threads share a row: a pass copies 32 rows, each thread
 * the row's chunks t, t + 4, t + 8, ... (t = ptid % 4). So a thread looks up the page of
 * one row per pass (TN / 32 lookups a tile, issued together before the copies, and kept
 * for V), a warp's copy instruction reads 64 contiguous bytes of each of 8 rows (whole
 * sectors), and its shared-memory writes still fall in distinct bank groups (chunk
 * c ^ (r % 8) over 8 consecutive rows and 4 consecutive chunks covers each group 4
 * times: the 4-wavefront minimum). Rows past the keys or in no page are zeros. */
#define PG_TPR 4                    /* threads per row */
#define PG_ROWS (128 / PG_TPR)      /* rows a pass copies */
#define PG_PASSES (TN / PG_ROWS)    /* passes a tile: rows per thread */
static_assert(TN % PG_ROWS == 0, "the paged producer copies key tiles of whole passes");

typedef struct {
    int page[PG_PASSES], slot[PG_PASSES]; /* page -1: the row reads as zeros */
} tile_pages_t;

/* The pages and slots of the thread's rows of key tile n. */
__device__ __forceinline__ tile_pages_t paged_rows(const fmha_fwd_params_t &p, const seq_t &s, int n, int ptid)
{
    tile_pages_t t;
#pragma unroll
    for (int pass = 0; pass < PG_PASSES; pass++) {
        const int2 ps = key_page_slot(p, s.pages, s.sk, n + pass * PG_ROWS + ptid / PG_TPR);
        t.page[pass] = ps.x, t.slot[pass] = ps.y;
    }
    return t;
}

template <int D>
__device__ __forceinline__ void load_sw128_paged(elem_t *dst, const elem_t *base, long long page_stride,
                                                 long long row_stride, const tile_pages_t &t, int ptid)
{
    constexpr int CH = D / 8; /* 16-byte chunks of a row */
    constexpr int UNROLL = CONSUMERS == 2 ? 2 : 1; /* a row's copies; more spill at the producer's registers */
    static_assert(CH % PG_TPR == 0, "a row's chunks split evenly over its threads");
    char *sbase = (char *)dst;
#pragma unroll
    for (int pass = 0; pass < PG_PASSES; pass++) {
        const int r = pass * PG_ROWS + ptid / PG_TPR, pg = t.page[pass];
        const elem_t *row = base + (pg >= 0 ? pg * page_stride + (long long)t.slot[pass] * row_stride : 0);
#pragma unroll UNROLL
        for (int k = 0; k < CH / PG_TPR; k++) {
            const int c = k * PG_TPR + ptid % PG_TPR;
            cp_async16(sbase + sw_offset<TN>(r, c), row + c * 8, pg >= 0 ? 16 : 0);
        }
    }
}
#define LOAD_K_TILE(dst, n, ps) load_sw128_paged<DQK>(dst, K, p.k_page, p.k_row, ps, ptid)
#define LOAD_V_TILE(dst, n, ps) load_sw128_paged<DV>(dst, V, p.v_page, p.v_row, ps, ptid)
#else
#define LOAD_K_TILE(dst, n, ps) load_sw128<TN, DQK>(dst, K + (long long)(n) * p.k_row, p.k_row, w.s.sk - (n), ptid)
#define LOAD_V_TILE(dst, n, ps) load_sw128<TN, DV>(dst, V + (long long)(n) * p.v_row, p.v_row, w.s.sk - (n), ptid)
#endif


/* The row sums of P by the tensor cores (ROWSUM_MMA: fp8 hd128 without LSE). P V runs
 * as m64n136k32 over Vt stages with eight more rows, row DV all ones (e4m3 1.0, written
 * once by the transposer) and the rest zero, so O's column DV accumulates each row's sum
 * of P as P V uses it, and the softmax drops its FADD a score (softmax.cuh's SUM); O's
 * rescale covers the column, so the online softmax's correction of the sum comes with
 * it. The sums sit in quad lane 0 (column DV + 2t, t = 0); the epilogue's quad sum adds
 * the other lanes' zeros. The output is then normalised by the sum of the e4m3-rounded P
 * rather than of the fp32 P (docs/semantics.md: within fp8's accuracy rule); the LSE
 * variants keep the fp32 sum, whose log the LSE is. Measured (perf-notes run 130): +1-4%
 * unmasked and causal, at 1k-16k; FMHA_ROWSUM_MMA=0 turns it off (the bench's A/B). */
#ifndef FMHA_ROWSUM_MMA
#define FMHA_ROWSUM_MMA 1
#endif
#ifndef FMHA_WG_OVERLAP /* (the overlapped loop's switch: below) */
#define FMHA_WG_OVERLAP 1
#endif
#define ROWSUM_MMA (FMHA_ROWSUM_MMA && FMHA_FP8 && DV == 128 && TM == 128 && TN == 128 && FMHA_WG_OVERLAP && !FMHA_LSE)
#define O_COLS (DV + (ROWSUM_MMA ? 8 : 0)) /* O's accumulator columns */
#define VT_ROWS O_COLS                      /* rows of a Vt stage */
/* The fp8 tensor cores add into their accumulator on a grid of 2^-13 of its largest term
 * and keep 14 significant bits, truncating (docs/semantics.md, FP8; measured in perf-notes
 * run 165): a sum of positive terms over a whole row loses up to 2^-13 of itself at every
 * k32 step, always downward. Left in the accumulator over the row, the sums made O fail
 * the fp8 rule from about 4000 keys: 1.0-1.3 times the tolerance there, 2.6-3.0 at 8000,
 * 6.5-6.9 at 16384 (perf-notes runs 160 and 162; O's own columns, of mixed signs, and the
 * LSE kernel's fp32 sums stay at 0.5). So each P V starts the column from zero: start_pv
 * moves it, rescaled with O, into row_sum (fp32), and the accumulator sums one tile, 4
 * steps, at a time. Measured (run 163): 0.3-1.2% slower than without, 7-8% faster than fp32
 * sums (FMHA_ROWSUM_MMA=0).
 * FMHA_ROWSUM_PROMOTE=0 leaves the sums in the accumulator (A/B only: wrong past ~3000
 * keys). */
#ifndef FMHA_ROWSUM_PROMOTE
#define FMHA_ROWSUM_PROMOTE 1
#endif
#define ROWSUM_PROMOTE (FMHA_ROWSUM_PROMOTE && ROWSUM_MMA)
/* The K/V ring's depth (the key's stages; the host sizes shared memory by it): tile j of
 * the ring (counted over the CTA's items) sits in stage ring_stage(j), and the stage's
 * barriers are in phase ring_phase(j) for it. A stage is refilled for tile j once tile
 * j - STAGES has released it. */
#ifndef FMHA_STAGES
#define FMHA_STAGES 2
#endif
#define STAGES FMHA_STAGES
static_assert(STAGES >= 2 && STAGES <= 4, "the ring has 2 to 4 stages");
/* the barrier block (6 STAGES + 6 eight-byte slots: q_full, q_empty, item_full, the
 * scheduler's index, v_stop, and six barriers a stage) fits the 256 bytes specs.c gives it */
static_assert((6 * STAGES + 6) * 8 <= 256, "the kernel's barriers outgrow specs.c's 256 bytes");
__device__ __forceinline__ int ring_stage(int j) { return (int)((unsigned)j % STAGES); }
__device__ __forceinline__ u32 ring_phase(int j) { return ((unsigned)j / STAGES) & 1; }
/* Wait until tile j has landed in its stage (a full barrier: full_k, full_v, Vt's). */
__device__ __forceinline__ void ring_wait_full(u64 *full, int j) { mbar_wait(&full[ring_stage(j)], ring_phase(j)); }
/* Wait until tile j's stage is free again: tile j - STAGES has released it. */
__device__ __forceinline__ void ring_wait_free(u64 *empty, int j)
{
    if (j >= STAGES) mbar_wait(&empty[ring_stage(j)], ring_phase(j - STAGES));
}

#if FMHA_FP8
#define V_OPERAND_STAGE (TN * VT_ROWS) /* elements between the P V operand's stages */
#else
#define V_OPERAND_STAGE (TN * DV)
#endif

/* S = Q K^T for one key tile (its first COLS keys: TAIL_TRIM's last tile): both operands
 * from the swizzled shared memory; the first k16 step overwrites the accumulator. */
template <int COLS = TN>
__device__ __forceinline__ void issue_s(float *s, const char *sQw, const in_t *sK)
{
    static_assert(COLS == TN || !FMHA_FP8, "fp8 computes whole key tiles");
    wgmma_fence();
    /* a k step is 32 bytes of a row: k16 of 16-bit elements, k32 of e4m3 */
    constexpr int STEPS = SW_BYTES / 32; /* k steps a block row */
    const u64 da0 = desc_kmajor(sQw), db0 = desc_kmajor(sK);
#pragma unroll
    for (int kk = 0; kk < DQK * (int)sizeof(in_t) / 32; kk++) {
        const u64 da = desc_advance(da0, (kk / STEPS) * (TM * SW_BYTES) + (kk % STEPS) * 32),
                  db = desc_advance(db0, (kk / STEPS) * (TN * SW_BYTES) + (kk % STEPS) * 32);
#if FMHA_FP8
        wgmma_ss_n128_e4m3(s, da, db, kk);
#else
        wgmma_ss_cols<COLS>(s, da, db, kk);
#endif
    }
}

#if FMHA_FP8
/* Four floats to e4m3 in one word, a in the lowest byte (cvt puts its first operand in
 * the upper byte of the pair), rounded to nearest even and saturated at +-448. */
__device__ __forceinline__ u32 pack4_e4m3(float a, float b, float c, float d)
{
    unsigned short lo, hi;
    u32 r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
    asm("mov.b32 %0, {%1, %2};\n" : "=r"(r) : "h"(lo), "h"(hi));
    return r;
}

/* P (fp32, accumulator layout) to e4m3 in wgmma's k32 register A layout. A thread's A
 * word v of k-chunk kk holds row g + 8 (v & 1), k positions 4t..4t+3 (+16 for v >= 2);
 * its accumulator holds, per n8 block, keys 2t, 2t + 1 of rows g and g + 8. So word v
 * takes the thread's own keys of two n8 blocks: positions 16h + 4t + i (h = v >> 1) are
 * keys 16h + 8(i >> 1) + 2t + (i & 1) of the chunk, and transpose_v writes V's rows in
 * that order. */
template <int COLS = TN>
__device__ __forceinline__ void pack_p(u32 *pa, const float *s)
{
    static_assert(COLS == TN, "fp8 computes whole key tiles");
#pragma unroll
    for (int kk = 0; kk < TN / 32; kk++)
#pragma unroll
        for (int v = 0; v < 4; v++) {
            const float *b = s + 16 * kk + 8 * (v >> 1) + 2 * (v & 1); /* n8 blocks 4kk + 2h, +1; row half v & 1 */
            pa[4 * kk + v] = pack4_e4m3(b[0], b[1], b[4], b[5]);
        }
}
#else
/* P (fp32, accumulator layout; its first COLS keys) packed to 16-bit pairs: the
 * accumulator layout is wgmma's register A layout. */
template <int COLS = TN>
__device__ __forceinline__ void pack_p(u32 *pa, const float *s)
{
#pragma unroll
    for (int i = 0; i < COLS / 4; i++) pa[i] = pack2(s[2 * i], s[2 * i + 1]);
}
#endif

/* O += P V for one key tile (its first COLS keys): P (packed, wgmma's A layout) from
 * registers, V from the swizzled stage as the transposed B. */
template <int COLS = TN>
__device__ __forceinline__ void issue_pv(float *o, const u32 *pa, const in_t *sV)
{
    static_assert(COLS == TN || !FMHA_FP8, "fp8 computes whole key tiles");
#if FMHA_FP8
    const u64 d0 = desc_sw128(sV, 16);
    /* V transposed (transpose_v): K-major rows of TN keys per head-dim row, k32 steps */
#pragma unroll
    for (int kk = 0; kk < TN / 32; kk++) {
#if DV == 64
        wgmma_rs_n64_e4m3(o, pa + 4 * kk, desc_advance(d0, kk * 32));
#elif ROWSUM_MMA
        wgmma_rs_n136_e4m3(o, pa + 4 * kk, desc_advance(d0, kk * 32));
#else
#pragma unroll
        for (int hv = 0; hv < DV / 128; hv++) /* n128 halves: Vt rows 128 hv .. 128 hv + 127 */
            wgmma_rs_n128_e4m3(o + 64 * hv, pa + 4 * kk, desc_advance(d0, hv * (128 * 128) + kk * 32));
#endif
    }
#else
    const u64 d0 = desc_sw128(sV, TN * 128);
#pragma unroll
    for (int kk = 0; kk < COLS / 16; kk++) {
#if DV <= 128
        WGMMA_RS(DV)(o, pa + 4 * kk, desc_advance(d0, kk * 2048));
#else
        /* head dim 256 as two n128 halves: each spans two 64-element blocks of V */
#pragma unroll
        for (int hv = 0; hv < DV / 128; hv++)
            wgmma_rs_n128(o + 64 * hv, pa + 4 * kk, desc_advance(d0, hv * 2 * (TN * 128) + kk * 2048));
#endif
    }
#endif
}

/* The register split (REG_SPLIT): the CTA's pool is what the launch gave it, 168 per
 * thread for 384 threads, 128 for 512 (ptxas allocates the launch-bounds maximum when the
 * kernel uses setmaxnreg). The consumers' setmaxnreg.inc blocks until the producer's dec
 * has returned enough, so producer + consumers must fit the pool exactly or the CTA
 * hangs: 24 + 2 x 240 = 72 + 2 x 216 = 3 x 168; 32 + 3 x 160 = 4 x 128. A TMA producer
 * is one thread issuing boxes: it needs little. A cp.async producer (group mode, pages)
 * computes the addresses of 128 rows a pass: with two consumers, at 24 registers it
 * spilled (72 bytes contiguous, 248 paged, hd128), at 56 it did not until the paged
 * producer also got its TMA path (88-96 bytes); at 72 it spills 16 and the consumers none
 * at 216 (ptxas, hd128); with the TMA walk in a loop of its own, 12. Measured (perf-notes
 * run 51): 72 / 216 runs group mode 9-11% faster than 56 / 224, and pages of 16 and 64
 * tokens 1-2% faster than before the TMA path (run 51e). With three consumers (hd64),
 * consumers below 160 spill hundreds of bytes, so the producer keeps 32 (some 50 bytes
 * paged) and the paged TMA path is left out there (PAGED_TMA). */
#if TM == 64 /* one consumer: 168 registers each, no split */
#define SETMAXNREG(op, n)
#else
#if (FMHA_GROUP || FMHA_PAGED) && TM == 128
#define PRODUCER_REGS 72
#define CONSUMER_REGS 216
#elif TM == 128 && FMHA_FP8 /* warps 1-3 of the producer transpose V (transpose_v) */
#define PRODUCER_REGS 56
#define CONSUMER_REGS 224
#elif TM == 192 && FMHA_FP8 /* the transposer warps, as above, beside three consumers (no spills
                              * but with soft-capping and a mask: 44-48 bytes) */
#define PRODUCER_REGS 56
#define CONSUMER_REGS 152
#elif TM == 128
#define PRODUCER_REGS 24
#define CONSUMER_REGS 240
#else
#define PRODUCER_REGS 32
#define CONSUMER_REGS 160
#endif
static_assert(PRODUCER_REGS + CONSUMERS * CONSUMER_REGS == (CONSUMERS + 1) * (CONSUMERS == 2 ? 168 : 128),
              "the register split must fill the CTA's pool exactly");
#define SETMAXNREG(op, n) SM90_SETMAXNREG(op, n)
#endif

/* The staged epilogue: a consumer warpgroup writes its 64 rows of O, normalised and in 16
 * bits, into a staging tile in shared memory, and one of its threads stores the tile with
 * TMA (the O map, fwd_params.h), so that the warpgroup goes on to its next item while the
 * copy engine writes; from registers, O was 32 four-byte stores a thread and about 17% of
 * the consumers' stall samples at 512 tokens (perf-notes run 89). Batch mode without
 * pages only (a tile's rows past the sequence are past the tensor, which the store drops;
 * group mode packs the next sequence there), head dims whose rows are whole 64-column
 * boxes. Up to hd128 the tile sits beside the others; hd256 has no room for it (230,656
 * of 232,448 bytes), so there a warpgroup stages O in its own 64 rows of Q, which no
 * other warpgroup reads (STAGED_IN_Q: 16-bit, Q's rows as wide as O's), and Q is
 * released for the next item only once the stores have read them. fmha__staged_epilogue
 * (specs.c) is the host's copy of these conditions: it sizes the launch's shared memory
 * and encodes the map. Where the map could not be encoded (tma.o_tma == 0) the kernel
 * writes O from registers as before.
 * Staged in Q, the next item's Q load waits for the stores and its latency is exposed at
 * every item start. STAGED_IN_RING (FMHA_O_IN_RING) stages O in the item's last K/V ring
 * stage instead, whose K and V are dead once both warpgroups have run their last S and
 * P V: O's first DV / 128 blocks in the K stage, the rest in the V stage. Q is then freed
 * at the last S, as below hd256, and the stage at the stores' end (the last tile's ring
 * releases are held until then); the two warpgroups meet before writing, as each
 * overwrites keys the other reads. An item without key tiles has no stage: it writes O
 * from registers. */
/* where O may be staged at all: batch mode without pages, rows of whole 64-column boxes */
#define STAGED_ROWS (!FMHA_GROUP && !FMHA_PAGED && DV % 64 == 0)
#define STAGED_IN_Q (STAGED_ROWS && DV > 128 && DQK == DV && !FMHA_FP8)
#define STAGED_EPILOGUE ((STAGED_ROWS && DV <= 128 && DQK <= 128) || STAGED_IN_Q)
#ifndef FMHA_O_IN_RING
#define FMHA_O_IN_RING 1
#endif
#define STAGED_IN_RING (STAGED_IN_Q && FMHA_O_IN_RING)
/* The distance between the staging tile's 64-column blocks: its own tile's 64 rows, or
 * Q's (or a ring stage's) TM rows, whose blocks hold all of the tile's rows */
#define O_BLOCK_BYTES (STAGED_IN_Q ? TM * 128 : 64 * 128)
/* O's blocks in a ring stage's K (STAGED_IN_RING); the rest go to its V */
#define O_LO_BLOCKS ((DV + 127) / 128)
#if STAGED_IN_RING
/* 4 more slots of the barrier block: o_full, o_free and the store's note (ring_o_storer) */
static_assert((6 * STAGES + 10) * 8 <= 256, "the kernel's barriers outgrow specs.c's 256 bytes");
static_assert(O_LO_BLOCKS * TM * 128 <= TN * DQK * (int)sizeof(in_t) &&
                  (DV / 64 - O_LO_BLOCKS) * TM * 128 <= TN * DV * (int)sizeof(in_t),
              "O's blocks must fit a ring stage's K and V");
#endif

/* ------------------------------------------------------------------ work items */

/* One work item: TM query rows of one (batch, head), where its operands live and the key
 * tiles it visits. */
typedef struct {
    int b, h, hk, m0, diag;
    seq_t s;
    key_tiles_t kt;
} item_t;

/* Item `idx` of the grid's list: masked, longest-first within L2 groups of heads
 * (masked_cta_coords); unmasked, the m-blocks of one (batch, head) next to each other so
 * that the CTAs running together share its K and V in L2. False when the item has no
 * rows (group mode: a sequence shorter than the longest). */
__device__ __forceinline__ bool item_at(const fmha_fwd_params_t &p, int idx, item_t &w)
{
    const int mblocks = (p.seqlen_q + TM - 1) / TM, pairs = p.batch * p.heads_q;
    int mblock;
#if FMHA_MASK
    masked_cta_coords(idx, mblocks, p.heads_q, pairs, p.l2_pairs, p.l2_head_pairs, p.l2_tail_pair, &mblock, &w.b, &w.h);
#else
    (void)pairs;
    mblock = idx % mblocks;
    w.b = idx / mblocks / p.heads_q;
    w.h = idx / mblocks % p.heads_q;
#endif
    w.hk = w.h / p.group;
    w.s = sequence_of(p, w.b, w.h, w.hk);
#if FMHA_MASK
    /* top_partial (fwd_params.h): the m-blocks shifted up by whole warpgroups, so that the
     * sequence's partial block is its first; rows above 0 read as zeros and are not stored */
    w.m0 = mblock * TM - (p.top_partial ? (TM - w.s.sq % TM) % TM / 64 * 64 : 0);
#else
    w.m0 = mblock * TM;
#endif
    w.diag = p.bottom_right ? w.s.sk - w.s.sq : 0;
    w.kt = key_tiles(p, w.m0, w.s.sk, w.diag);
    return w.m0 < w.s.sq;
}

/* ------------------------------------------------------------------ the item scheduler */

/* A CTA per item (sched_slot -1): item blockIdx.x. Persistent (the host launches one CTA
 * per SM when there are more items): a CTA starts with item blockIdx.x and takes each next
 * one from a counter, in list order (FlashAttention-3's dynamic scheduler): whichever CTA
 * frees first takes the next, so a list of unequal items (causal, heaviest first) balances
 * as the hardware's CTA scheduler would balance a CTA per item, while the producer loads
 * the next item's Q and K beside the current one's softmax. A static walk could not
 * balance a long causal list (perf-notes run 20).
 *
 * The counters live in the module: FMHA_SCHED_SLOTS pairs (the next item, the CTAs that
 * have fetched their last), zero at load. The host gives launches the slots in turn, so
 * that launches in flight together on several streams count apart; the last CTA of a
 * launch to fetch past the end zeroes its pair again, when every fetch of the launch has
 * returned. Only the TMA producer (one thread) fetches: the cp.async producers run a CTA
 * per item (fwd.c). */
__device__ unsigned int fmha_fwd_sched[FMHA_SCHED_SLOTS][2];

/* The item after the current one: past the end (items) with a CTA per item; else the
 * counter's next, counted from gridDim.x since the first round is blockIdx.x. */
__device__ __forceinline__ int fetch_next_item(const fmha_fwd_params_t &p, int items)
{
    if (p.sched_slot < 0) return items;
    return (int)atomicAdd(&fmha_fwd_sched[p.sched_slot][0], 1u) + (int)gridDim.x;
}

/* After the CTA's fetch past the end: the launch's last such CTA zeroes the slot for the
 * next launch that takes it. */
__device__ __forceinline__ void retire_sched_slot(const fmha_fwd_params_t &p)
{
    if (p.sched_slot < 0) return;
    unsigned int *c = fmha_fwd_sched[p.sched_slot];
    if (atomicAdd(&c[1], 1u) == gridDim.x - 1) {
        atomicExch(&c[0], 0u);
        atomicExch(&c[1], 0u);
    }
}

/* ------------------------------------------------------------------ kernel */

/* Q_BUFS: how many Q tiles the CTA holds, items taking them in turn (item it in buffer
 * it % Q_BUFS). With one, the producer hands item it + 1 over only once every consumer
 * warpgroup has released item it's Q (its last S), so a warpgroup that finishes an item
 * early waits for the slowest one's last S and then for the next Q's load. With two (16-bit
 * hd64, whose 192-row items leave the top warpgroup a tile or two short of the bottom one
 * under a causal mask: perf-notes run 146), the next item's Q is loaded while this one
 * runs, and a warpgroup goes on to the next item's first key tile as soon as the ring has
 * it. specs.c (wgmma_q_tiles) is the host's copy of the condition. */
#ifndef FMHA_Q_BUFS
#define FMHA_Q_BUFS (!FMHA_FP8 && DV == 64 ? 2 : 1)
#endif
#define Q_BUFS FMHA_Q_BUFS
static_assert(Q_BUFS == 1 || (Q_BUFS == 2 && !STAGED_IN_Q), "one or two Q tiles; O staged in Q's rows needs one");
/* The Q hand-over's slots in the barrier block (eight bytes each; the kernel lays the
 * block out): tile 0's q_full, q_empty, item_full and index, and the first of tile 1's
 * four, which follow o_note (item_full + 6) in the same order. */
#define SLOT_Q_FULL 0
#define SLOT_Q_EMPTY (1 + 4 * STAGES) /* past q_full and the ring's four barriers a stage */
#define SLOT_ITEM (SLOT_Q_EMPTY + 1 + 2 * STAGES) /* past fp8's Vt barriers */
#define SLOT_IDX (SLOT_ITEM + 1)
#define SLOT_Q1 (SLOT_ITEM + 7)
static_assert(Q_BUFS == 1 || (SLOT_Q1 + 4) * 8 <= 256, "the kernel's barriers outgrow specs.c's 256 bytes");

/* A Q tile's hand-over slots: its barriers (full: landed; empty: every consumer thread
 * done with it), its item's (item_full) and the item's index (sched_idx). */
typedef struct {
    u64 *full, *empty, *item;
    int *idx;
} q_slot_t;
/* Q tile qb's slots (0 or 1; the item's it % Q_BUFS), from tile 0's: each of tile 1's lies
 * a constant beyond its tile-0 twin (the SLOT_ positions), so that a consumer's slot is an
 * address computed from its uniform qb. A select between two sets of pointers kept them
 * all live through the tile loop: 90 more bytes of spill in the causal hd64 kernel. */
__device__ __forceinline__ q_slot_t q_slot(const q_slot_t &q0, int qb)
{
    if (Q_BUFS == 1) return q0;
    return {q0.full + qb * (SLOT_Q1 - SLOT_Q_FULL), q0.empty + qb * (SLOT_Q1 + 1 - SLOT_Q_EMPTY),
            q0.item + qb * (SLOT_Q1 + 2 - SLOT_ITEM), q0.idx + qb * 2 * (SLOT_Q1 + 3 - SLOT_IDX)};
}
/* the phase of item it's Q barriers */
__device__ __forceinline__ u32 q_phase(int it) { return ((unsigned)it / Q_BUFS) & 1; }

/* The producer hands each item to the consumers through shared memory: its index in the
 * slot's idx, then one arrival (the leader's) on its item barrier, so that the consumers
 * set up the item (item_at, its operands' scalars) while its Q is still in flight; -1 ends
 * the walk. Before it writes, the Q tile's previous item must have released it (q_empty),
 * which the consumers do after reading the index; `it` counts the items handed over. */
__device__ __forceinline__ void hand_over(int idx, int it, const q_slot_t &q, bool leader)
{
    const q_slot_t qs = q_slot(q, it % Q_BUFS);
    if (it >= Q_BUFS) mbar_wait(qs.empty, q_phase(it - Q_BUFS));
    if (leader) {
        *(volatile int *)qs.idx = idx;
        mbar_arrive(qs.item);
    }
}

/* Item idx handed over; false (nothing handed over) for an item without rows (group mode). */
__device__ __forceinline__ bool producer_item(const fmha_fwd_params_t &p, int idx, int &it, const q_slot_t &q,
                                              bool leader, item_t &w)
{
    if (!item_at(p, idx, w)) return false;
    hand_over(idx, it, q, leader);
    it++;
    return true;
}

/* The end of the walk: -1 for the consumers. */
__device__ __forceinline__ void producer_end(int it, const q_slot_t &q, bool leader)
{
    hand_over(-1, it, q, leader);
}

/* Thread 0's K and V boxes of ring tile j into its stage, each after the stage's release
 * and with the bytes its barrier expects. (row, head, outer) are the maps' coordinates past
 * the head dim: (key, KV head, batch) contiguous, (slot, KV head, page) paged. */
__device__ __forceinline__ void issue_kv_boxes(const fmha_tma_maps_t &tma, in_t *sK0, in_t *sV0, u64 *full_k,
                                               u64 *full_v, u64 *empty_k, u64 *empty_v, int j, int row, int head,
                                               int outer)
{
    const int st = ring_stage(j);
    ring_wait_free(empty_k, j);
    mbar_expect_tx(&full_k[st], TN * DQK * (int)sizeof(in_t));
    for (int cb = 0; cb < DQK / ROW_ELEMS; cb++)
        tma_load_4d(sK0 + st * TN * DQK + cb * TN * ROW_ELEMS, tma.k, cb * ROW_ELEMS, row, head, outer, &full_k[st]);
    ring_wait_free(empty_v, j);
    mbar_expect_tx(&full_v[st], TN * DV * (int)sizeof(in_t));
    for (int cb = 0; cb < DV / ROW_ELEMS; cb++)
        tma_load_4d(sV0 + st * TN * DV + cb * TN * ROW_ELEMS, tma.v, cb * ROW_ELEMS, row, head, outer, &full_v[st]);
}

/* An item's Q by cp.async from the whole producer warpgroup (group mode, pages), then each
 * thread's arrival on q_full. */
__device__ __forceinline__ void load_q_by_cp_async(const fmha_fwd_params_t &p, const item_t &w, in_t *sQ, u64 *q_full,
                                                   int ptid)
{
    /* rows from the sequence's row 0 on (m0 < 0: top_partial); a row outside reads row 0's
     * address, with no bytes */
    load_sw128<TM, DQK, true>(sQ, (const in_t *)p.q + w.s.q + (long long)w.m0 * p.q_row, p.q_row, w.s.sq - w.m0, ptid,
                              -w.m0);
    cp_async_commit();
    cp_async_wait_all();
    fence_async_shared();
    mbar_arrive(q_full);
}

/* Paged K/V by TMA where the producer's registers allow it: the two-consumer tiles (the
 * three-consumer hd64 tile's producer has 32). The host asks for it by encoding maps
 * (fwd.c encode_page_maps) only for tile_m 128. */
#define PAGED_TMA (FMHA_PAGED && TM == 128)
#if PAGED_TMA
/* The producer's item with K/V by TMA over the page pool (kv_tma). A key tile lies in one
 * page (the page size is a multiple of TN), so thread 0 issues each whole tile as boxes at
 * (dims, slot, head, page); a row in no page (page -1) is out of the map's bounds and lands
 * as zeros, so the caller's page numbers cannot move a read outside the pool. The last
 * tile of a sequence, when partial, goes by cp.async from all 128 producer threads: its
 * rows past the keys must be zeros (a page's unused slots may hold anything, and the
 * masked P = 0 times a non-finite V would still poison the row), and then thread 0 makes
 * the one arrival the barrier expects. j counts the ring's tiles (in and out). */
__device__ __forceinline__ void paged_tiles_by_tma(const fmha_fwd_params_t &p, const fmha_tma_maps_t &tma,
                                                   const item_t &w, elem_t *sK0, elem_t *sV0, u64 *full_k, u64 *full_v,
                                                   u64 *empty_k, u64 *empty_v, int &j, int ptid)
{
    /* the cp.async rows start at the item's KV head (w.s.k, w.s.v); the boxes name it */
    const elem_t *K = (const elem_t *)p.k + w.s.k, *V = (const elem_t *)p.v + w.s.v;
    for (int n = next_tile(-1, w.kt); n >= 0; n = next_tile(n, w.kt), j++) {
        const int st = ring_stage(j);
        if (n + TN <= w.s.sk) { /* a whole tile of keys: thread 0's boxes */
            if (ptid != 0) continue;
            const int2 ps = key_page_slot(p, w.s.pages, w.s.sk, n); /* page -1: zeros */
            issue_kv_boxes(tma, sK0, sV0, full_k, full_v, empty_k, empty_v, j, ps.y, w.hk, ps.x);
            continue;
        }
        const tile_pages_t ps = paged_rows(p, w.s, n, ptid);
        /* Threads 1..127 skipped the whole tiles: let thread 0 issue them first. A parity
         * wait is only exact within one phase of the barrier, and a thread two tiles ahead
         * of the ring would see the release of tile j - 2 STAGES as that of j - STAGES. */
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        ring_wait_free(empty_k, j);
        load_sw128_paged<DQK>(sK0 + st * TN * DQK, K, p.k_page, p.k_row, ps, ptid);
        ring_wait_free(empty_v, j);
        load_sw128_paged<DV>(sV0 + st * TN * DV, V, p.v_page, p.v_row, ps, ptid);
        cp_async_commit();
        cp_async_wait_all();
        fence_async_shared();
        asm volatile("bar.sync 1, 128;\n" ::: "memory"); /* the producer warpgroup's copies have all landed */
        if (ptid == 0) {
            mbar_arrive(&full_k[st]);
            mbar_arrive(&full_v[st]);
        }
    }
}

/* The paged producer's item with K/V by TMA: its Q by cp.async (all 128 threads), then
 * its key tiles (paged_tiles_by_tma); a CTA per item (fwd.c). A function of its own, apart
 * from the cp.async producer's, so that one does not carry this one's registers
 * (perf-notes run 51). */
__device__ __forceinline__ void paged_producer_by_tma(const fmha_fwd_params_t &p, const fmha_tma_maps_t &tma, elem_t *sQ,
                                                      elem_t *sK0, elem_t *sV0, const q_slot_t &q, u64 *full_k,
                                                      u64 *full_v, u64 *empty_k, u64 *empty_v, int ptid)
{
    int j = 0, it = 0;
    item_t w;
    if (producer_item(p, blockIdx.x, it, q, ptid == 0, w)) { /* item 0: Q tile 0 */
        load_q_by_cp_async(p, w, sQ, q.full, ptid);
        paged_tiles_by_tma(p, tma, w, sK0, sV0, full_k, full_v, empty_k, empty_v, j, ptid);
    }
    producer_end(it, q, ptid == 0);
}
#endif

#if FMHA_FP8
/* One V stage (TN keys x DV dims, sw_offset's layout as TMA wrote it) into Vt: DV rows
 * of TN key bytes, K-major in the 128-byte swizzle, keys in P's order (pack_p: position
 * 16h + 4t + i of a 32-key unit holds key 16h + 8(i >> 1) + 2t + (i & 1)). 96 threads
 * (producer warps 1-3) share the groups of 16 head dims, each TN / 32 units of 32 keys
 * x 16 dims. For a unit, one
 * transposing ldmatrix of 16-bit pairs (matrix m: keys 8m..8m+7 of the unit, each row the
 * 16 dims' 16 bytes) gives lane 4g + t, in word m, keys 8m + 2t and 8m + 2t + 1 of dims
 * 2g and 2g + 1; one byte permute of words (0, 1) makes dim 2g's Vt word of keys 2t,
 * 2t + 1, 2t + 8, 2t + 9 -- positions 4t..4t+3 of the unit's first 16 -- another dim
 * 2g + 1's, and words (2, 3) the same for positions 16..31. One stmatrix writes the four
 * 8-row matrices. A lane holds two adjacent dims, so a matrix's rows are one of each
 * pair: rows 2g (g < 4) and 2g + 1 (g >= 4) in one, the others in the other, which puts
 * its 8 rows in distinct bank groups under the swizzle (even rows alone would be 2-way).
 * Both instructions are conflict-free; per 512 bytes a warp issues 2 shared-memory
 * instructions and 4 permutes, where 16-byte loads and 4-byte stores took 5 and 8. */
__device__ __forceinline__ void transpose_v(const in_t *sV, in_t *sVt, int lane, int warp)
{
    const int g = lane / 4;
    /* selectors of the bytes of dim 2g (even) and 2g + 1 (odd) from words (w0, w1) */
    const u32 sel_a = g < 4 ? 0x6420u : 0x7531u, sel_b = g < 4 ? 0x7531u : 0x6420u;
    /* the stmatrix row this lane addresses (matrix m = lane / 8, row r = lane % 8): Vt row
     * 16 dg + vt_row, 16-byte chunk 2c + m / 2 of unit c, swizzled by the row (mod 8) */
    const int m = lane / 8, r = lane % 8;
    const int vt_row = 2 * r + ((m & 1) ^ (r >= 4));
    constexpr int UNITS = TN / 32; /* 32-key units of a head-dim group */
    u32 st_off[UNITS];
#pragma unroll
    for (int c = 0; c < UNITS; c++) st_off[c] = smem_addr(sVt) + vt_row * 128 + (((2 * c + (m >> 1)) ^ (vt_row & 7)) << 4);
    /* a warp's head-dim groups dg = warp, warp + 3, ...: the group's loads all in flight
     * before its stores (one unit at a time, each waiting for its load, ran 2-8% slower
     * than the 4-byte stores) */
#pragma unroll 1
    for (int dg = warp; dg < DV / 16; dg += 3) {
        const u32 ld = smem_addr(sV) + sw_offset<TN>(lane, dg); /* unit c: 32 c rows on */
        u32 w[UNITS][4];
#pragma unroll
        for (int c = 0; c < UNITS; c++) ldsm_x4_trans(w[c], ld + c * 32 * SW_BYTES);
#pragma unroll
        for (int c = 0; c < UNITS; c++)
            stsm_x4(st_off[c] + dg * 16 * 128, __byte_perm(w[c][0], w[c][1], sel_a), __byte_perm(w[c][0], w[c][1], sel_b),
                    __byte_perm(w[c][2], w[c][3], sel_a), __byte_perm(w[c][2], w[c][3], sel_b));
    }
}

/* Producer warps 1-3: each key tile's V, once TMA has landed it, into its Vt stage after
 * the consumers have released that stage; then V is free for the next box and Vt ready.
 * They follow the ring's tiles, not the items: the walk ends at the tile whose stage the
 * producer marks in v_stop (end_transposer) instead of filling it. */
__device__ __forceinline__ void transposer(const in_t *sV0, in_t *sVt0, u64 *full_v, u64 *empty_v, u64 *vt_full,
                                           u64 *vt_empty, const int *v_stop, int ptid)
{
    const int lane = ptid % 32, warp = ptid / 32 - 1;
#if ROWSUM_MMA
    /* Vt's rows DV .. DV + 7 in every stage, once, as 16-byte chunks over the 96 threads:
     * row DV all e4m3 1.0 (0x38), the others 0 (uniform rows: the swizzle moves nothing);
     * fenced for wgmma with the first tile. A row is TN = 128 bytes, one swizzle row. */
    constexpr int ROW_CHUNKS = TN / 16, STAGE_CHUNKS = 8 * ROW_CHUNKS;
    for (int c = ptid - 32; c < STAGES * STAGE_CHUNKS; c += 96) {
        const int st = c / STAGE_CHUNKS, row = c % STAGE_CHUNKS / ROW_CHUNKS;
        const u32 v = row == 0 ? 0x38383838u : 0u;
        *(uint4 *)((char *)(sVt0 + st * V_OPERAND_STAGE + DV * TN) + (c % STAGE_CHUNKS) * 16) = make_uint4(v, v, v, v);
    }
#endif
    for (int j = 0;; j++) {
        const int st = ring_stage(j);
        ring_wait_full(full_v, j);
        if (*(const volatile int *)&v_stop[st]) return;
        ring_wait_free(vt_empty, j);
        transpose_v(sV0 + st * TN * DV, sVt0 + st * V_OPERAND_STAGE, lane, warp);
        fence_async_shared(); /* generic-proxy stores, read next by wgmma */
        mbar_arrive(&vt_full[st]);
        mbar_arrive(&empty_v[st]);
    }
}

/* The producer's end of the transposer's walk at ring tile j: once the transposer has
 * released V(j - STAGES), which it does after reading that stage's v_stop (so the write does
 * not race the read), mark the stage and complete its full_v phase with no box. */
__device__ __forceinline__ void end_transposer(int j, int *v_stop, u64 *full_v, u64 *empty_v)
{
    ring_wait_free(empty_v, j);
    *(volatile int *)&v_stop[ring_stage(j)] = 1;
    mbar_arrive(&full_v[ring_stage(j)]);
}

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

/* An fp8 input's descale for (b, hk) (fwd_params.h); 1 when absent. */
__device__ __forceinline__ float descale_of(const fmha_fwd_params_t &p, int i, int b, int hk)
{
    const float *d = (const float *)p.descale[i];
    return d ? d[b * p.descale_batch[i] + hk * p.descale_head[i]] : 1.f;
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

/* FlashAttention-3's overlap inside a warpgroup (INTRA_WG_OVERLAP): the P V of tile j - 1
 * runs on the tensor cores while the warpgroup computes the softmax of tile j. Per tile:
 * issue S(j) = Q K(j)^T, scale O by tile j - 1's correction, issue O += P(j-1) V(j-1),
 * wait for S(j) only, its softmax, then wait for P V and pack P(j). The registers are
 * those of the serial loop (s, o, pa), live together: S(j) is in s while P(j-1) sits in
 * pa. The first tile is peeled (no P V to overlap) and the last P V follows the loop, so
 * that nothing is in flight across a branch of the loop (a wgmma in flight across one
 * makes ptxas serialise them all, perf-notes run 14). K of a stage frees after its S and
 * V after its P V, as in the serial loop; V(j - 1) frees one softmax later than there,
 * which the ring absorbs (its next copy is wanted STAGES tiles on).
 * Where (perf-notes run 72): hd128 (+5-15% unmasked, to +9% causal at 2k-16k) and hd256
 * unmasked (+2-6% from 1k); hd256 causal on 64-key tiles lost 2-13% (and skips invisible
 * tiles there, which this loop cannot), but on 80-key tiles gains 13-14% from 4k (run
 * 85); hd64's three 160-register
 * consumers spill with it, so those keep the serial loop, as does fp8 hd256 (its 128-key
 * tiles spill 138 bytes with it at 224 registers, none without). fp8 hd64 took it on
 * 128-row tiles but runs faster on 192 rows without it (perf-notes run 150). FMHA_WG_OVERLAP=0
 * turns it off (the bench's A/B). */
#ifndef FMHA_WG_OVERLAP
#define FMHA_WG_OVERLAP 1
#endif
#define INTRA_WG_OVERLAP (FMHA_WG_OVERLAP && TM == 128 && (DV <= 128 || (!FMHA_MASK && !FMHA_FP8) || TN == 80))

/* In the serial loop, a warpgroup runs only the key tiles its rows can see on the right
 * (visible_keys_end, mask.cuh: causal or a right window, and none for rows past the
 * sequence), then keeps only the ring's handshakes for the item's remaining tiles: the
 * mask would zero their S, softmax and P V. The bound is taken once per item and ends
 * the loop like the item's last tile, so that the loop itself is unchanged (run 22's test
 * of every tile cost hd64 12%; perf-notes run 91). Where tile_m > tile_n, the first
 * warpgroups' rows end before the item's last tile starts: at hd64's 192 x 128 tiles on
 * 512 causal keys a quarter of the warpgroups' tiles, at hd256's 128 x 64 a tile an
 * item, and at hd256's 128 x 80 (the overlapped loop) a tile an item too. fp8 hd256 (128 x
 * 128, such tiles only where Sq != Sk) spills in its loop with it. */
#define SKIP_INVISIBLE (FMHA_MASK && TM > TN)

/* S(j) of the ring's tile j (its first COLS keys) into s, issued and committed, not
 * waited for. */
template <int COLS = TN>
__device__ __forceinline__ void start_s(float *s, const char *sQw, const in_t *sK0, u64 *full_k, int j)
{
    ring_wait_full(full_k, j);
    issue_s<COLS>(s, sQw, sK0 + ring_stage(j) * TN * DQK);
    wgmma_commit();
}

/* S(j) has landed: K's stage is free (unless O is to be staged there: `hold`), and after
 * the item's last S, Q. */
__device__ __forceinline__ void release_k(u64 *empty_k, u64 *q_empty, bool &q_held, int j, bool last, bool hold)
{
    if (!(STAGED_IN_RING && hold)) mbar_arrive(&empty_k[ring_stage(j)]);
    if (last && (!STAGED_IN_Q || STAGED_IN_RING)) { /* staged in Q: Q is freed after the stores */
        mbar_arrive(q_empty);
        q_held = false;
    }
}

/* The diagnostic build's tile clocks: for the ring's tiles PT_FIRST .. PT_FIRST + 15, each
 * consumer warpgroup's thread 0 notes when it goes to issue S, S has landed, the softmax
 * is done, P V has landed, K had landed (S issued) and V had (P V issued) (clock64, one
 * SM's clock for both warpgroups), printed as "PT" lines
 * after the launch: whether the two warpgroups' softmaxes coincide or alternate. */
#ifdef FMHA_PHASE_CLOCKS
#define PT_FIRST 40
__device__ long long fmha_phase_tiles[160][2][16][6];
#define PT_NOTE(j, k)                                                                                            \
    do {                                                                                                         \
        if (threadIdx.x % 128 == 0 && blockIdx.x < 160 && (j) >= PT_FIRST && (j) < PT_FIRST + 16)                  \
            fmha_phase_tiles[blockIdx.x][threadIdx.x / 128][(j) - PT_FIRST][k] = clock64();                      \
    } while (0)
#else
#define PT_NOTE(j, k) ((void)0)
#endif

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
static_assert(!STALE_MAX || FMHA_P_LOG2_SCALE == 6, "the stale-max softmax wants P at 2^6 (the top of this file)");

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

#if INTRA_WG_OVERLAP

/* O = O alpha + P V(j), issued and committed, not waited for. With ROWSUM_PROMOTE, the
 * row sums of the tiles before (O's column DV: quad lane 0's o[DV / 2] and o[DV / 2 + 2],
 * zeros on the other lanes) move into row_sum first, which takes O's alpha too. */
template <int COLS = TN>
__device__ __forceinline__ void start_pv(float *o, float *row_sum, const float *alpha, const u32 *pa, const in_t *sV0,
                                         u64 *v_ready, int j)
{
#if FMHA_RESCALE_SKIP
    rescale_o_if_moved<O_COLS>(o, alpha);
#else
    rescale_o<O_COLS>(o, alpha);
#endif
#if ROWSUM_PROMOTE
    /* row_sum = row_sum alpha + column, column = 0 (column - column: NaN stays NaN), in
     * asm, which updates O's register in place: written from C (= 0.f, or col - col), the
     * column's register got copies around the last k32 step of P V, and ptxas serialised
     * the wgmmas "for insufficient register resources" (C7511; 3.6 KB of spills unmasked;
     * run 162 measured a quarter of the speed causal) */
#pragma unroll
    for (int h = 0; h < 2; h++)
        asm("fma.rn.f32 %0, %0, %2, %1;\n\t"
            "sub.f32 %1, %1, %1;\n"
            : "+f"(row_sum[h]), "+f"(o[DV / 2 + 2 * h])
            : "f"(alpha[h]));
#endif
    ring_wait_full(v_ready, j);
    wgmma_fence();
    issue_pv<COLS>(o, pa, sV0 + ring_stage(j) * V_OPERAND_STAGE);
    wgmma_commit();
}

/* TAIL_TRIM: a warpgroup's last key tile runs on the columns it has. Where the keys it
 * sees end inside that tile (the sequence's end: the kernels below are unmasked), S, the softmax
 * and P V take the first NE keys, NE that end rounded up to 16 and at least 32
 * (heuristics.c's wgmma_computed_keys counts the same), instead of the whole tile: at
 * hd256's 80-key tile an unmasked 512-key item computes 560 keys for 512 (the
 * selector's reason for 64-key tiles there, perf-notes run 101). The columns past NE
 * keep the last tile's stale registers, never read: the softmax, pack and P V of
 * the tile are NE wide. Only where ptxas keeps the kernel as it was: at hd256's 168
 * registers a masked, biased, soft-capped, sink or group-mode kernel spilled more or had
 * its wgmmas serialised (C7511) with the sizes' copies (perf-notes run 185).
 * FMHA_TAIL_TRIM=0 turns it off (the bench's A/B). */
#ifndef FMHA_TAIL_TRIM
#define FMHA_TAIL_TRIM 1
#endif
#define TAIL_TRIM                                                                                               \
    (FMHA_TAIL_TRIM && INTRA_WG_OVERLAP &&                                                                      \
     FMHA_TAIL_TRIMS(TM, TN, DV, FMHA_FP8, FMHA_MASK, FMHA_BIAS, FMHA_SOFTCAP, FMHA_SINK, FMHA_GROUP, FMHA_PAGED))

/* The overlapped loop's last tile j (key tile n0) on its first NE keys: S(j) beside the
 * P V of tile j - 1, its softmax, then its own P V. Every wgmma it issues is waited for
 * before it returns, so that none is in flight across the caller's switch between sizes.
 * It repeats the loop's body (and the P V after the loop) with NE for TN: written as one
 * function that both call, the same steps made ptxas serialise the plain unmasked
 * kernel's wgmmas (C7511), which this form does not. */
template <int NE, typename SP>
__device__ __forceinline__ void overlapped_last_tile(const fmha_fwd_params_t &p, const SP &sp, const item_t &w,
                                                     const tile_rows_t &rows, float slope, const elem_t *bias,
                                                     const char *sQw, const in_t *sK0, const in_t *sV0, u64 *full_k,
                                                     u64 *empty_k, u64 *v_ready, u64 *v_done, u64 *q_empty,
                                                     bool &q_held, bool hold_last, float *o, float *s, u32 *pa,
                                                     float *row_max, float *row_sum, float *alpha, int n0, int j)
{
    start_s<NE>(s, sQw, sK0, full_k, j);
    start_pv(o, row_sum, alpha, pa, sV0, v_ready, j - 1);
    wgmma_wait_1(); /* S(j) is done; P V may still run */
    fence_regs<NE / 2>(s);
    release_k(empty_k, q_empty, q_held, j, true, hold_last);
    softmax_of_tile<NE>(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
    wgmma_wait_all();
    fence_regs<O_COLS / 2>(o);
    fence_regs<TN / 2 * (int)sizeof(in_t) / 4>(pa); /* the P V read pa until here */
    mbar_arrive(&v_done[ring_stage(j - 1)]);
    pack_p<NE>(pa, s);
    start_pv<NE>(o, row_sum, alpha, pa, sV0, v_ready, j);
    wgmma_wait_all();
    fence_regs<O_COLS / 2>(o);
    if (!(STAGED_IN_RING && hold_last)) mbar_arrive(&v_done[ring_stage(j)]);
}

/* An item's key tiles for one consumer warpgroup (w.kt: the item's, or its cut); j counts
 * the ring's tiles. hold_last: the last tile's stage is kept (STAGED_IN_RING). */
template <typename SP>
__device__ __forceinline__ void consume_tiles_overlapped(const fmha_fwd_params_t &p, const SP &sp, const item_t &w,
                                                         const tile_rows_t &rows, float slope, const elem_t *bias,
                                                         const char *sQw, const in_t *sK0, const in_t *sV0,
                                                         u64 *full_k, u64 *empty_k, u64 *v_ready, u64 *v_done,
                                                         u64 *q_empty, bool &q_held, bool hold_last, float *o, float *s,
                                                         u32 *pa, float *row_max, float *row_sum, int &j)
{
    int n0 = next_tile(-1, w.kt);
    if (n0 < 0) return;
    float alpha[2];
    int n1 = next_tile(n0, w.kt);
    start_s(s, sQw, sK0, full_k, j);
    wgmma_wait_all();
    fence_regs<TN / 2>(s);
    release_k(empty_k, q_empty, q_held, j, n1 < 0, n1 < 0 && hold_last);
    softmax_of_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
    pack_p(pa, s);
    for (n0 = n1; n0 >= 0; n0 = n1) {
        n1 = next_tile(n0, w.kt);
        j++;
#if TAIL_TRIM
        if (n1 < 0) { /* the last tile, by its width */
#define LAST_TILE(ne)                                                                                            \
    overlapped_last_tile<ne>(p, sp, w, rows, slope, bias, sQw, sK0, sV0, full_k, empty_k, v_ready, v_done, q_empty, \
                             q_held, hold_last, o, s, pa, row_max, row_sum, alpha, n0, j)
            switch ((w.kt.end - n0 + 15) >> 4) { /* the tile's keys in k16 steps */
            case 1: /* 16 keys on 32 columns: a fourth size made ptxas serialise the wgmmas (C7511) */
            case 2: LAST_TILE(32); break;
            case 3: LAST_TILE(48); break;
            case 4: LAST_TILE(64); break;
            default: LAST_TILE(TN); break;
            }
#undef LAST_TILE
            j++;
            return;
        }
#endif
        PT_NOTE(j, 0);
        start_s(s, sQw, sK0, full_k, j);
        PT_NOTE(j, 4);
        start_pv(o, row_sum, alpha, pa, sV0, v_ready, j - 1);
        PT_NOTE(j, 5);
        wgmma_wait_1(); /* S(j) is done; P V may still run */
        fence_regs<TN / 2>(s);
        PT_NOTE(j, 1);
#if STALE_MAX
        const score_refetch_t refetch = {sQw, sK0 + ring_stage(j) * TN * DQK};
        softmax_of_later_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha, refetch);
        release_k(empty_k, q_empty, q_held, j, n1 < 0, n1 < 0 && hold_last);
#else
        release_k(empty_k, q_empty, q_held, j, n1 < 0, n1 < 0 && hold_last);
        softmax_of_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
#endif
        PT_NOTE(j, 2);
        wgmma_wait_all();
        fence_regs<O_COLS / 2>(o);
        PT_NOTE(j, 3);
        fence_regs<TN / 2 * (int)sizeof(in_t) / 4>(pa); /* the P V read pa until here */
        mbar_arrive(&v_done[ring_stage(j - 1)]);
        pack_p(pa, s);
    }
    /* the last tile's P V */
    start_pv(o, row_sum, alpha, pa, sV0, v_ready, j);
    wgmma_wait_all();
    fence_regs<O_COLS / 2>(o);
    if (!(STAGED_IN_RING && hold_last)) mbar_arrive(&v_done[ring_stage(j)]);
    j++;
}
#endif

/* ------------------------------------------------------------------ the epilogue */

/* Named barrier 2 + wg over one consumer warpgroup's 128 threads (0 is __syncthreads, 1
 * the cp.async producer's). The id is a register: chosen by a branch on wg, as immediates,
 * it made ptxas take the tile loop for a divergent region (BRA.DIV before every shuffle,
 * the wgmma descriptors built in vector registers: perf-notes run 88b's signs); a register
 * id only makes ptxas count all 16 barriers as used, which one CTA an SM can spare. */
__device__ __forceinline__ void warpgroup_sync(int wg)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
}

/* Named barrier 2 + CONSUMERS (after the warpgroups' own) over every consumer thread. */
__device__ __forceinline__ void consumers_sync()
{
    asm volatile("bar.sync %0, %1;\n" ::"n"(2 + CONSUMERS), "n"(128 * CONSUMERS) : "memory");
}

#if STAGED_EPILOGUE
/* What block blk of O skips past the staging tile's blocks: in a ring stage, its V lies
 * STAGES K stages past its K (DQK == DV where O is staged in the ring) */
#define O_BLOCK_SKIP(blk)                                                                                       \
    (STAGED_IN_RING && (blk) >= O_LO_BLOCKS ? STAGES * TN * DQK * (int)sizeof(in_t) - O_LO_BLOCKS * O_BLOCK_BYTES \
                                            : 0)

/* Item w's epilogue through the warpgroup's staging tile sOw (STAGED_EPILOGUE): 64 rows a
 * warpgroup, DV / 64 blocks of 64 rows x 128 bytes in the 128-byte swizzle of the O map's
 * boxes (16-byte chunk c of row r at c ^ (r & 7)); in a ring stage (STAGED_IN_RING),
 * O_LO_BLOCKS of them in its K and the rest at the same rows of its V. The thread's rows
 * are wr and wr + 8 of the warpgroup (wr = warp * 16 + g), its columns 8 d + 2 t. The
 * LSE rows are written directly. */
__device__ __forceinline__ void write_o_tile(const fmha_fwd_params_t &p, elem_t *sOw, const item_t &w, const float *o,
                                             const float *row_max, const float *row_sum, int wg, int wr, int t,
                                             float out_scale)
{
#if STAGED_IN_RING
    /* by stmatrix: four 8 x 8 blocks a warp instruction (rows g and g + 8 of two 16-byte
     * chunks) where a 4-byte store wrote one; lane 8 mx + rr addresses row rr of block mx */
    float inv[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        float m, l;
        finish_row(p, w.h, row_max, row_sum, half, out_scale, inv[half], m, l);
        const int i = w.m0 + wg * 64 + wr + 8 * half;
        if ((unsigned)i < (unsigned)w.s.sq) store_lse(p, w.s, i, t, m, l); /* top_partial: i may be < 0 */
    }
    const int lane = threadIdx.x % 32, mx = lane / 8, rr = lane % 8;
    const u32 row = smem_addr(sOw) + ((wr & ~7) + 8 * (mx & 1) + rr) * 128;
#pragma unroll
    for (int d = 0; d < DV / 8; d += 2)
        stsm_x4(row + (d / 8) * O_BLOCK_BYTES + O_BLOCK_SKIP(d / 8) + ((((d % 8) + (mx >> 1)) ^ rr) << 4),
                pack2(o[d * 4] * inv[0], o[d * 4 + 1] * inv[0]), pack2(o[d * 4 + 2] * inv[1], o[d * 4 + 3] * inv[1]),
                pack2(o[d * 4 + 4] * inv[0], o[d * 4 + 5] * inv[0]), pack2(o[d * 4 + 6] * inv[1], o[d * 4 + 7] * inv[1]));
#else
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = wr + 8 * half;
        float inv, m, l;
        finish_row(p, w.h, row_max, row_sum, half, out_scale, inv, m, l);
        char *row = (char *)sOw + r * 128;
#pragma unroll
        for (int d = 0; d < DV / 8; d++)
            *(u32 *)(row + (d / 8) * O_BLOCK_BYTES + O_BLOCK_SKIP(d / 8) + (((d % 8) ^ (r & 7)) << 4) + 4 * t) =
                pack2(o[d * 4 + 2 * half] * inv, o[d * 4 + 2 * half + 1] * inv);
        const int i = w.m0 + wg * 64 + r;
        if ((unsigned)i < (unsigned)w.s.sq) store_lse(p, w.s, i, t, m, l); /* top_partial: i may be < 0 */
    }
#endif
    fence_async_shared(); /* the tile's writes, visible to the copy engine */
}

/* ... through the warpgroup's own staging tile: ctid 0 stores the blocks, and before the
 * next item's writes waits until the copy engine has read them. */
__device__ __forceinline__ void staged_epilogue(const fmha_fwd_params_t &p, const fmha_tma_maps_t &tma, elem_t *sOw,
                                                const item_t &w, const float *o, const float *row_max,
                                                const float *row_sum, int wg, int wr, int t, float out_scale)
{
    const int ctid = threadIdx.x % 128;
    if (ctid == 0) bulk_wait_read(); /* the previous item's stores have read the tile */
    warpgroup_sync(wg);
    write_o_tile(p, sOw, w, o, row_max, row_sum, wg, wr, t, out_scale);
    warpgroup_sync(wg);
    if (ctid == 0) {
#pragma unroll
        for (int blk = 0; blk < DV / 64; blk++)
            if (w.m0 + wg * 64 >= 0) /* rows above the sequence (top_partial): no store */
                tma_store_4d(&tma.o, (char *)sOw + blk * O_BLOCK_BYTES + O_BLOCK_SKIP(blk), blk * 64, w.m0 + wg * 64, w.h,
                         w.b);
        bulk_commit();
    }
}
#endif

#if STAGED_IN_RING
/* The ring's O stores, issued by warp 1 of the producer warpgroup (idle in 16-bit): the
 * consumers write an item's O into its last ring stage and go on to the next item, while
 * this thread stores the rows, waits until the copy engine has read them and gives the
 * stage back to the producer. In the consumers this cost 3-5.5k cycles an item at hd256
 * (perf-notes run 137): issuing a warpgroup's four stores took 2-4.5k (queued, it seems,
 * behind the copy engine's loads), and the stage may not be released before they have
 * read it.
 *
 * The hand-over: warpgroup 0 notes the item (o_note: its stage, first row, head and
 * batch; stage -1 ends the walk), each consumer warpgroup's thread 0 arrives on o_full
 * once its rows are written, and this thread arrives on o_free once it has read the note.
 * Warpgroup 0 waits on o_free for the previous note before writing the next, so there is
 * one note in flight and o_full never runs two phases ahead of this thread. */
__device__ __forceinline__ void ring_o_storer(const fmha_tma_maps_t &tma, const in_t *sK0, u64 *o_full, u64 *o_free,
                                              const volatile int *o_note, u64 *empty_k, u64 *empty_v)
{
    for (u32 k = 0;; k++) {
        mbar_wait(o_full, k & 1);
        const int st = o_note[0], m0 = o_note[1], h = o_note[2], b = o_note[3];
        mbar_arrive(o_free);
        if (st < 0) break;
        const char *stage = (const char *)(sK0 + st * TN * DQK);
#pragma unroll
        for (int wg = 0; wg < CONSUMERS; wg++)
#pragma unroll
            for (int blk = 0; blk < DV / 64; blk++)
                if (m0 + wg * 64 >= 0) /* rows above the sequence (top_partial): no store */
                    tma_store_4d(&tma.o, stage + wg * 64 * 128 + blk * O_BLOCK_BYTES + O_BLOCK_SKIP(blk), blk * 64,
                             m0 + wg * 64, h, b);
        bulk_commit();
        bulk_wait_read();
        mbar_arrive_count(&empty_k[st], 128 * CONSUMERS);
        mbar_arrive_count(&empty_v[st], 128 * CONSUMERS);
    }
    bulk_wait(); /* the CTA's shared memory must outlive the stores that read it */
}

/* Before the n-th hand-over, warpgroup 0 waits until the storer has read note n - 1 (all
 * of it: a wait in one thread's branch cost the tile loop its uniform registers). The
 * caller then meets its warpgroup (warpgroup_sync) before hand_o_to_storer: o_free
 * completes phase n as soon as thread 0 has handed note n over and the storer has read
 * it, and a warp still to test phase n - 1 would then find the barrier in phase n + 1,
 * of the same parity, and wait for good. It did: a hd256 launch whose last CTAs hung
 * with one warp of warpgroup 0 left (perf-notes run 172), since the other three warps
 * do not arrive on what they wait for. */
__device__ __forceinline__ void wait_o_note_free(u64 *o_free, u32 n, int wg_u)
{
    if (wg_u == 0 && n > 0) mbar_wait(o_free, (n - 1) & 1);
}

/* Each consumer thread, its warpgroup's rows written and wait_o_note_free passed by all
 * of warpgroup 0: the n-th hand-over to the storer (stage -1: the end). Warpgroup 0's
 * thread 0 writes note n; each warpgroup's thread 0 arrives. */
__device__ __forceinline__ void hand_o_to_storer(u64 *o_full, volatile int *o_note, int wg_u, int ctid, int st,
                                                 int m0, int h, int b)
{
    if (ctid == 0) {
        if (wg_u == 0) o_note[0] = st, o_note[1] = m0, o_note[2] = h, o_note[3] = b;
        mbar_arrive(o_full);
    }
}
#endif

/* The grid is 1-d over work items (item_at); a CTA runs item blockIdx.x, and, persistent
 * (fewer CTAs than items), the next ones from the item scheduler: the producer loads the
 * next item's Q as soon as the consumers have issued their last S of the current one,
 * and its K/V ring runs on across items, so one item's softmax, P V and epilogue overlap
 * the next one's loads. */
#ifdef FMHA_PHASE_CLOCKS
__device__ unsigned fmha_phase_done; /* CTAs done, over the module's launches (PI lines) */
#endif
/* The CTA's dynamic shared memory from its 1024-aligned start: Q's tiles, the ring's K
 * stages, its V stages, (fp8) the stages of V transposed, the staged epilogue's O tile
 * (16-bit elements), the barrier block (256 bytes). The launch must give it
 * SMEM_LAYOUT_BYTES, the alignment's slack included: specs.c's fmha__smem_bytes is the
 * host's copy, and test_nvrtc reads fmha_smem_layout_bytes back from every compiled
 * kernel and checks that the two agree. */
#define SMEM_K_AT (Q_BUFS * TM * DQK)               /* in_t elements from the start */
#define SMEM_V_AT (SMEM_K_AT + STAGES * TN * DQK)   /* in_t elements */
#define SMEM_VT_AT (SMEM_V_AT + STAGES * TN * DV)   /* in_t elements (fp8) */
#define SMEM_O_BYTES ((SMEM_VT_AT + (FMHA_FP8 ? STAGES * V_OPERAND_STAGE : 0)) * (int)sizeof(in_t))
#define SMEM_BARS_BYTES (SMEM_O_BYTES + (STAGED_EPILOGUE && !STAGED_IN_Q ? TM * DV * (int)sizeof(elem_t) : 0))
#define SMEM_LAYOUT_BYTES (1024 + SMEM_BARS_BYTES + 256)
extern "C" __constant__ int fmha_smem_layout_bytes = SMEM_LAYOUT_BYTES;

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
    fmha_fwd_wgmma(const fmha_fwd_params_t p, const __grid_constant__ fmha_tma_maps_t tma)
{
    /* phase sums of consumer thread 0, a diagnostic build's only (phase_clock.cuh): 1 the
     * waits for an item, 2 for its Q, 3 the tile loops, 4 the epilogues, 5 items, 7 the end */
    PHASE_START();
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    /* the swizzle pattern repeats every 1024 bytes, so every block starts 1024-aligned
     * (the launch asks for 1 KiB of slack) */
    in_t *sQ = (in_t *)(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
    in_t *sK0 = sQ + SMEM_K_AT; /* the ring's K stages */
    in_t *sV0 = sQ + SMEM_V_AT; /* its V stages */
#if FMHA_FP8
    in_t *sVt0 = sQ + SMEM_VT_AT; /* the stages of V transposed */
#endif
    elem_t *sO = (elem_t *)((unsigned char *)sQ + SMEM_O_BYTES);
    /* the staged epilogue's O tile, 64 rows x DV a warpgroup (1024-aligned: every tile
     * before it is a multiple of 8 KiB) */
    u64 *bars = (u64 *)((unsigned char *)sQ + SMEM_BARS_BYTES);
    /* K and V of a stage are handed over separately: K frees as soon as S is computed,
     * so the next K copy overlaps the softmax and P V. Q is freed ("q_empty") once the
     * consumers have issued an item's last S. */
    u64 *q_full = bars + SLOT_Q_FULL, *full_k = bars + 1, *full_v = full_k + STAGES, *empty_k = full_v + STAGES,
        *empty_v = empty_k + STAGES;
    u64 *q_empty = bars + SLOT_Q_EMPTY;
    /* the item the producer hands over (producer_item); in fp8, per stage, whether the
     * transposer's walk ends there (end_transposer) */
    u64 *item_full = bars + SLOT_ITEM;
    int *sched_idx = (int *)(bars + SLOT_IDX), *v_stop = (int *)(item_full + 2);
#if STAGED_IN_RING
    /* the O stores' hand-over (ring_o_storer), past v_stop's two slots */
    u64 *o_full = item_full + 4, *o_free = item_full + 5;
    volatile int *o_note = (volatile int *)(item_full + 6);
#endif
    /* Q tile 0's slots (q_slot gives tile 1's) */
    const q_slot_t qsl = {q_full, q_empty, item_full, sched_idx};
#if FMHA_FP8
    /* Vt of a stage: written by the transposer warps, read by the consumers' P V */
    u64 *vt_full = q_empty + 1, *vt_empty = vt_full + STAGES;
#define V_READY vt_full
#define V_DONE vt_empty
#define V_OPERAND sVt0
#else
#define V_READY full_v
#define V_DONE empty_v
#define V_OPERAND sV0
#endif

    const int tid = threadIdx.x, wg = tid / 128;
    const int items = (p.seqlen_q + TM - 1) / TM * p.batch * p.heads_q;

#if FMHA_GROUP || FMHA_PAGED
    const bool use_tma = false; /* Q (and contiguous group-mode K/V) by cp.async */
#elif FMHA_FP8
    const bool use_tma = true; /* the host launches fp8 only with its maps (fwd.c) */
#else
    const bool use_tma = tma.use_tma != 0;
#endif
#if PAGED_TMA
    /* K/V by TMA, a box per page (the host encodes maps over the page pool when the page
     * size is a multiple of TN, so every key tile lies in one page) */
    const bool kv_tma = tma.use_tma != 0;
#elif FMHA_PAGED
    const bool kv_tma = false;
#else
    const bool kv_tma = use_tma;
#endif
    if (tid == 0) {
        for (int i = 0; i < STAGES; i++) v_stop[i] = 0;
        for (int b = 0; b < Q_BUFS; b++) {
            mbar_init(q_slot(qsl, b).full, use_tma ? 1 : 128);
            mbar_init(q_slot(qsl, b).item, 1);
            mbar_init(q_slot(qsl, b).empty, 128 * CONSUMERS);
        }
        for (int i = 0; i < STAGES; i++) { /* TMA: one expect_tx arrival; cp.async: every producer thread */
            mbar_init(&full_k[i], kv_tma ? 1 : 128);
            mbar_init(&full_v[i], kv_tma ? 1 : 128);
            mbar_init(&empty_k[i], 128 * CONSUMERS);
#if FMHA_FP8
            mbar_init(&empty_v[i], 96); /* the transposer warps read V */
            mbar_init(&vt_full[i], 96);
            mbar_init(&vt_empty[i], 128 * CONSUMERS);
#else
            mbar_init(&empty_v[i], 128 * CONSUMERS);
#endif
        }
#if STAGED_IN_RING
        mbar_init(o_full, CONSUMERS);
        mbar_init(o_free, 1);
#endif
        /* the copy engine completes transactions on these barriers: make their
         * initialisation visible to it (the async proxy) before any TMA is issued */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    /* Both sides walk the same items and key tiles: `it` counts the items run (the Q
     * barriers' phase), `j` the key tiles over all of them (the ring's stage and phase). */
    if (wg == CONSUMERS) {
        /* ---------------- producer: each item's Q, then its key tiles into the ring */
        /* The CTA's register pool is what the launch gave it (REG_SPLIT) */
        SETMAXNREG(dec, PRODUCER_REGS);
        const int ptid = tid - 128 * CONSUMERS;
#if FMHA_FP8
        if (ptid >= 32) { /* warps 1-3 transpose V for P V */
            transposer(sV0, sVt0, full_v, empty_v, vt_full, vt_empty, v_stop, ptid);
            return;
        }
#endif
        int j = 0, it = 0;
        if (use_tma) { /* one thread issues every Q, K and V box, item after item */
#if STAGED_IN_RING
            if (ptid == 32 && tma.o_tma) { /* warp 1's first thread stores O */
                ring_o_storer(tma, sK0, o_full, o_free, o_note, empty_k, empty_v);
                return;
            }
#endif
            if (ptid != 0) return;
            for (int idx = blockIdx.x; idx < items;) {
                item_t w;
                const int it_q = it; /* the item's Q tile, if it is handed over */
                if (producer_item(p, idx, it, qsl, true, w)) {
                    /* Q and the first K tile are in flight together: a short item's fill
                     * is one load latency, not two */
                    u64 *q_full_it = q_slot(qsl, it_q % Q_BUFS).full;
                    in_t *sQ_it = sQ + it_q % Q_BUFS * TM * DQK;
                    mbar_expect_tx(q_full_it, TM * DQK * (int)sizeof(in_t));
                    for (int cb = 0; cb < DQK / ROW_ELEMS; cb++)
                        tma_load_4d(sQ_it + cb * TM * ROW_ELEMS, &tma.q, cb * ROW_ELEMS, w.m0, w.h, w.b, q_full_it);
                    for (int n = next_tile(-1, w.kt); n >= 0; n = next_tile(n, w.kt), j++)
                        issue_kv_boxes(tma, sK0, sV0, full_k, full_v, empty_k, empty_v, j, n, w.hk, w.b);
                }
                /* the next item claimed once this one's boxes are issued (the ring holds
                 * the consumers two tiles behind): late enough that a CTA holds no item
                 * it cannot start soon, early enough that the atomic's latency hides */
                idx = fetch_next_item(p, items);
            }
            retire_sched_slot(p);
#if FMHA_FP8
            end_transposer(j, v_stop, full_v, empty_v);
#endif
            producer_end(it, qsl, true);
            return;
        }
#if PAGED_TMA
        if (kv_tma) { /* its own function: the cp.async producer below keeps its registers */
            paged_producer_by_tma(p, tma, sQ, sK0, sV0, qsl, full_k, full_v, empty_k, empty_v, ptid);
            return;
        }
#endif
        /* cp.async from all 128 threads: a CTA per item (fwd.c) */
        item_t w;
        if (producer_item(p, blockIdx.x, it, qsl, ptid == 0, w)) { /* item 0: Q tile 0 */
            const in_t *K = (const in_t *)p.k + w.s.k, *V = (const in_t *)p.v + w.s.v;
            load_q_by_cp_async(p, w, sQ, q_full, ptid);
            /* Commit groups go K0, V0, K1, V1, ...; after issuing K(j) and waiting for all
             * but the newest group, V(j-1) has landed; after issuing V(j), likewise K(j).
             * The item's last V is handed over at its end. */
            int jj = 0;
            for (int n = next_tile(-1, w.kt); n >= 0;
                 n = next_tile(n, w.kt), j++, jj++) {
                const int st = ring_stage(j);
#if FMHA_PAGED
                const tile_pages_t ps = paged_rows(p, w.s, n, ptid); /* before the wait: its latency hides there */
#endif
                ring_wait_free(empty_k, j);
                LOAD_K_TILE(sK0 + st * TN * DQK, n, ps);
                cp_async_commit();
                if (jj >= 1) {
                    cp_async_wait_1();
                    fence_async_shared();
                    mbar_arrive(&full_v[ring_stage(j - 1)]);
                }
                ring_wait_free(empty_v, j);
                LOAD_V_TILE(sV0 + st * TN * DV, n, ps);
                cp_async_commit();
                cp_async_wait_1();
                fence_async_shared();
                mbar_arrive(&full_k[st]);
            }
            if (jj >= 1) {
                cp_async_wait_all();
                fence_async_shared();
                mbar_arrive(&full_v[ring_stage(j - 1)]);
            }
        }
        producer_end(it, qsl, ptid == 0);
        return;
    }

    /* ---------------- consumers: 64 rows per warpgroup */
    SETMAXNREG(inc, CONSUMER_REGS);
    const int ctid = tid % 128, warp = ctid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int r0 = wg * 64 + warp * 16; /* this warp's first row in the tile */
    /* wg through a warp reduction: its result lives in a uniform register, and so do what
     * is derived from it (from tid / 128 ptxas cannot tell that a warp agrees: it then
     * rebuilt Q's address from threadIdx in every tile, and a loop bound taken from it
     * cost the loop its uniform wgmma descriptors, perf-notes run 91) */
    const int wg_u = (int)__reduce_max_sync(0xffffffffu, (unsigned)wg);
    /* this warpgroup's 64 rows of Q, in each 64-element block (of Q tile 0) */
    const char *sQw0 = (const char *)sQ + wg_u * 64 * SW_BYTES;

    int j = 0;
#if STAGED_IN_RING
    const bool o_storer = use_tma && tma.o_tma; /* the producer's warp 1 stores O (ring_o_storer) */
    u32 o_notes = 0;                            /* the stores noted so far */
#endif
#ifdef FMHA_PHASE_CLOCKS
    /* each item's index, start (globaltimer ns) and tile-loop cycles, printed as "PI"
     * lines once every CTA of the launch is done (so that no print slows a CTA still
     * running: a persistent launch's CTAs are all resident) */
    unsigned long long item_ns[24];
    int item_idx[24];
    long long item_loop[24];
#endif
    for (int it = 0;; it++) {
        /* the producer's next item (producer_item), or -1: the end */
        PHASE_T(t_item);
        /* the item's Q tile, through a warp reduction as wg_u: `it` is not uniform to
         * ptxas (the loop ends on a value read from shared memory), and Q's address must
         * be, for the loop's wgmma descriptors */
        const int qb = Q_BUFS == 1 ? 0 : (int)__reduce_max_sync(0xffffffffu, (unsigned)it % Q_BUFS);
        const q_slot_t qs = q_slot(qsl, qb);
        u64 *const q_empty_it = qs.empty; /* this item's Q tile's: released after its last S */
        mbar_wait(qs.item, q_phase(it));
        PHASE_ADD(1, t_item);
        const int idx = *(const volatile int *)qs.idx;
        if (idx < 0) break;
        const char *sQw = sQw0 + qb * TM * DQK * (int)sizeof(in_t);
        item_t w;
        item_at(p, idx, w);
        float o[O_COLS / 2];
#pragma unroll
        for (int i = 0; i < O_COLS / 2; i++) o[i] = 0.f;
        float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
        const float slope = alibi_slope(p, w.b, w.h);
        const elem_t *bias = bias_rows(p, w.b, w.h);
#if FMHA_FP8
        const fp8_softmax_params_t sp = fp8_softmax_params(p, descale_of(p, 0, w.b, w.hk) * descale_of(p, 1, w.b, w.hk));
        const float v_descale = descale_of(p, 2, w.b, w.hk);
#else
        const fmha_fwd_params_t &sp = p;
#endif
        const tile_rows_t rows = {w.m0 + r0 + g, w.s.sq, w.s.sk, w.diag, t};

        float s[TN / 2];
        u32 pa[TN / 2 * (int)sizeof(in_t) / 4]; /* P in wgmma's A layout: 16-bit pairs or e4m3 quads */
        PHASE_T(t_q);
        mbar_wait(qs.full, q_phase(it));
        PHASE_ADD(2, t_q);
        PHASE_COUNT(5);
#ifdef FMHA_PHASE_CLOCKS
        if (it < 24) item_ns[it] = phase_globaltimer(), item_idx[it] = idx;
#endif
        PHASE_T(t_loop);
        bool q_held = true;
        const int j_item = j; /* the item's first ring tile: j > j_item after it when it had any */
#if SKIP_INVISIBLE
        /* this warpgroup's tiles: the item's, cut at its rows' visible end; how many lie
         * past the cut is counted first, so that the item's own end is not held through
         * the loop */
        const int vis_end = visible_keys_end(p, w.m0 + wg_u * 64, w.m0 + wg_u * 64 + 63, w.s.sq, w.diag);
        int cut_tiles = 0;
        for (int n = next_tile(-1, w.kt); n >= 0; n = next_tile(n, w.kt)) cut_tiles += n >= vis_end;
        if (w.kt.end > vis_end) w.kt.end = vis_end;
        const bool hold_last = STAGED_IN_RING && cut_tiles == 0; /* the item's last tile is among this warpgroup's */
#else
        const bool hold_last = STAGED_IN_RING;
#endif
#if INTRA_WG_OVERLAP
        consume_tiles_overlapped(p, sp, w, rows, slope, bias, sQw, sK0, V_OPERAND, full_k, empty_k, V_READY, V_DONE,
                                 q_empty_it, q_held, hold_last, o, s, pa, row_max, row_sum, j);
#else
        /* Each warpgroup runs S, softmax and P V of a tile in turn; the two or three
         * consumer warpgroups drift out of phase, so one's softmax overlaps another's
         * wgmmas. */
        for (int n0 = next_tile(-1, w.kt), n1; n0 >= 0; n0 = n1, j++) {
            n1 = next_tile(n0, w.kt);
            const int st = ring_stage(j);
            start_s(s, sQw, sK0, full_k, j);
            wgmma_wait_all();
            fence_regs<TN / 2>(s);
            release_k(empty_k, q_empty_it, q_held, j, n1 < 0, n1 < 0 && hold_last);

            float alpha[2];
            softmax_of_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
            /* skipped where no row of the warp moved its max: the serial loop's kernels
             * (hd64, hd256 on 64-key tiles, fp8 hd256) measured +0-3% with it, never
             * below noise (perf-notes runs 86-87); the result is the same bits */
            rescale_o_if_moved<DV>(o, alpha);
            /* P in wgmma's A layout, packed before any wgmma reads it: registers written
             * between two wgmmas of a group make ptxas insert a wait before each */
            pack_p(pa, s);

            ring_wait_full(V_READY, j);
            wgmma_fence();
            issue_pv(o, pa, V_OPERAND + st * V_OPERAND_STAGE);
            wgmma_commit();
            wgmma_wait_all();
            fence_regs<O_COLS / 2>(o);
            if (!(STAGED_IN_RING && n1 < 0 && hold_last)) mbar_arrive(&V_DONE[st]);
        }
#endif
#if SKIP_INVISIBLE
        /* the item's tiles past the cut: only the handshakes (Q went with the last
         * visible S, or goes below). Waiting for each stage keeps the arrivals in its
         * phase: the producer refilled it only after every consumer had released the
         * previous one. */
        for (; cut_tiles > 0; cut_tiles--) {
            const int st = ring_stage(j);
            const bool hold = STAGED_IN_RING && cut_tiles == 1; /* the item's last: O's stage */
            ring_wait_full(full_k, j);
            if (!hold) mbar_arrive(&empty_k[st]);
            ring_wait_full(V_READY, j);
            if (!hold) mbar_arrive(&V_DONE[st]);
            j++;
        }
#endif
#if !STAGED_IN_Q || STAGED_IN_RING
        if (q_held) mbar_arrive(q_empty_it); /* an item (or warpgroup) with no visible key tiles */
#endif
        PHASE_ADD(3, t_loop);
#ifdef FMHA_PHASE_CLOCKS
        if (it < 24) item_loop[it] = clock64() - t_loop;
#endif
#if ROWSUM_MMA
        /* column DV + 2t of rows g and g + 8: the sums at t = 0, zeros elsewhere; the
         * last tile's, beside the others' in row_sum (ROWSUM_PROMOTE; else still 0) */
        row_sum[0] += o[DV / 2];
        row_sum[1] += o[DV / 2 + 2];
#endif
        PHASE_T(t_epi);

        /* Epilogue: normalise, add the sink term, write O and LSE. */
#if FMHA_FP8
        const float out_scale = v_descale;
#else
        const float out_scale = 1.f;
#endif
#if STAGED_IN_RING
        if (o_storer && j > j_item) {
            /* the item's last ring stage, once both warpgroups are done with it: this
             * warpgroup's rows of its K (O's first blocks) and of its V (the rest); the
             * storer (ring_o_storer) stores them and releases the stage */
            const int st = ring_stage(j - 1);
            consumers_sync();
            wait_o_note_free(o_free, o_notes++, wg_u);
            write_o_tile(p, (elem_t *)((char *)(sK0 + st * TN * DQK) + wg_u * 64 * 128), w, o, row_max, row_sum, wg,
                         warp * 16 + g, t, out_scale);
            warpgroup_sync(wg); /* the rows written, and every warp past its wait */
            hand_o_to_storer(o_full, o_note, wg_u, ctid, st, w.m0, w.h, w.b);
            PHASE_ADD(4, t_epi);
            continue;
        }
#elif STAGED_EPILOGUE
        if (tma.o_tma) {
#if STAGED_IN_Q
            /* this warpgroup's rows of Q, as the staging tile's (their last S is done) */
            staged_epilogue(p, tma, (elem_t *)((char *)sQ + wg_u * 64 * SW_BYTES), w, o, row_max, row_sum, wg,
                            warp * 16 + g, t, out_scale);
            /* Q is the next item's once the copy engine has read these rows */
            if (ctid == 0) bulk_wait_read();
            warpgroup_sync(wg);
            mbar_arrive(q_empty_it);
#else
            staged_epilogue(p, tma, sO + wg * 64 * DV, w, o, row_max, row_sum, wg, warp * 16 + g, t, out_scale);
#endif
            PHASE_ADD(4, t_epi);
            continue;
        }
#endif
        store_o_lse<DV>(p, w.s, w.h, o, row_max, row_sum, w.m0 + r0 + g, t, out_scale);
#if STAGED_IN_RING
        if (j > j_item) { /* no map: the held stage goes back at once */
            mbar_arrive(&empty_k[ring_stage(j - 1)]);
            mbar_arrive(&V_DONE[ring_stage(j - 1)]);
        }
#elif STAGED_IN_Q
        mbar_arrive(q_empty_it);
#endif
        PHASE_ADD(4, t_epi);
    }
#if STAGED_IN_RING
    if (o_storer) { /* the storer's walk ends, after every arrival of the last store's */
        consumers_sync();
        wait_o_note_free(o_free, o_notes, wg_u);
        warpgroup_sync(wg);
        hand_o_to_storer(o_full, o_note, wg_u, ctid, -1, 0, 0, 0);
    }
#elif STAGED_EPILOGUE
    /* the CTA's shared memory must outlive the stores that read it */
    if (tma.o_tma && ctid == 0) bulk_wait();
#endif
    PHASE_MARK(7);
#ifdef FMHA_PHASE_CLOCKS
    if (tid == PHASE_REPORTER) {
        const unsigned long long done_ns = phase_globaltimer();
        atomicAdd(&fmha_phase_done, 1u);
        while (p.sched_slot >= 0 && *(volatile unsigned *)&fmha_phase_done % gridDim.x != 0) {
        } /* persistent only: a CTA per item may have more CTAs than fit at once */
        for (int i = 0; i < 24 && i < (int)(phase_cycles_[5] - phase_cycles_[0]); i++)
            printf("PI %d %d %d %llu %lld %u %llu\n", (int)blockIdx.x, i, item_idx[i], item_ns[i], item_loop[i],
                   phase_smid(), done_ns);
        for (int wgi = 0; wgi < 2 && blockIdx.x < 160; wgi++)
            for (int t = 0; t < 16; t++) {
                const long long *c = fmha_phase_tiles[blockIdx.x][wgi][t];
                printf("PT %d %d %d %lld %lld %lld %lld %lld %lld\n", (int)blockIdx.x, wgi, PT_FIRST + t, c[0], c[1], c[2],
                       c[3], c[4], c[5]);
            }
    }
#endif
    PHASE_REPORT(0);
}
