/* SPDX-License-Identifier: MIT */
/*
 * wgmma_gemms.cuh: the sm90 forward's K/V ring and the two GEMMs of a key tile
 * (fwd_wgmma.cuh): the row sums by the tensor cores (ROWSUM_MMA), the ring's stages and
 * phases, S = Q K^T, P packed to wgmma's A layout, and O += P V.
 */
#ifndef FMHA_KERNEL_WGMMA_GEMMS_CUH
#define FMHA_KERNEL_WGMMA_GEMMS_CUH

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

#endif /* FMHA_KERNEL_WGMMA_GEMMS_CUH */
