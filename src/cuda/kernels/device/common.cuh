/* SPDX-License-Identifier: MIT */
/*
 * common.cuh: device helpers every kernel may use: copies, conversions, exp2, quad
 * reductions, the score transform, the key-tile walk and the masked grids' order.
 * Like every header in src/cuda/kernels/device it is embedded in the library and handed
 * to NVRTC by its file name. Include after variant.cuh (FMHA_BF16, FMHA_SOFTCAP,
 * FMHA_BIAS, TN: the key tile width next_tile steps by).
 */
#ifndef FMHA_KERNEL_COMMON_CUH
#define FMHA_KERNEL_COMMON_CUH

#include "grid_order.h"

#define LOG2E 1.4426950408889634f
#ifndef INFINITY /* NVRTC has no math.h */
#define INFINITY __int_as_float(0x7f800000)
#endif

typedef unsigned short elem_t; /* fp16 or bf16 bits */
typedef unsigned int u32;

__device__ __forceinline__ u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }

/* 16-byte async copy; src_bytes 0 fills the destination with zeros (out-of-range rows). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
/* 4-byte async copy (per-row scalars); src_bytes 0 fills zeros. */
__device__ __forceinline__ void cp_async4(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/* Wait for every group, or all but the newest; a memory clobber orders the reads after. */
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

/* Programmatic dependent launch (sm90; family.h's dependent_launch). A kernel whose row
 * sets it may start while the stream's prior kernel still runs, so before its first
 * access to global memory (reads included: the prior kernel may write what this one
 * reads, or read what it writes) it waits for the prior grid to finish and its writes to
 * be visible. Then it lets the next dependent launch start: after the wait, so at most
 * two grids overlap. Both are no-ops in a plain launch and before sm90. */
__device__ __forceinline__ void wait_prior_grids()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* A line of global memory pulled into L2, nothing returned: what a kernel may do before
 * wait_prior_grids where a load may not. L2 is where every SM's reads and writes meet, so
 * if the prior grid writes the line after the prefetch, a load after the wait still
 * reads the write; the prefetch only moves the first round trip into the prior grid's
 * end. The address must lie inside a tensor the problem describes. */
__device__ __forceinline__ void prefetch_l2(const void *at) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(at)); }

/* One CTA's arrival at a device-scope counter, by one thread after a barrier of the CTA:
 * the atomic releases every write the CTA made before the barrier (the release is
 * cumulative, so one thread's covers the others') and acquires the writes that the
 * earlier arrivals released, which a barrier after it passes on to the CTA. Cheaper than
 * a __threadfence in every thread on both sides (a MEMBAR.SC each; perf-notes run 106).
 *
 * The counter needs no zeroing before the launch (which took a launch of its own, perf-
 * notes run 124): its 64-bit word holds the launch's tag (bits 16-63, from splitkv.c's
 * arrival_tag) and the arrivals under that tag (bits 0-15). A word under any
 * other tag (a previous launch's, or whatever the workspace held) counts as none: the
 * arrival that meets it claims the word for this launch by a compare-and-swap, which
 * holds only if nobody touched the word since; an arrival the claim overwrote adds
 * again. Every arrival is thus counted once, under the tag, by the atomic that returns.
 * Returns the arrivals before this one. The last one resets the word to (tag, 0)
 * (arrival_reset), so a graph replaying the launch with the same tag counts from zero. */
__device__ __forceinline__ int arrive_tagged(unsigned long long *word, unsigned long long tag)
{
    unsigned long long old, seen;
    asm volatile("atom.add.acq_rel.gpu.global.u64 %0, [%1], 1;\n" : "=l"(old) : "l"(word) : "memory");
    if (old >> 16 == tag) return (int)(old & 0xffff);
    for (unsigned long long expect = old + 1;; expect = seen) {
        asm volatile("atom.cas.acq_rel.gpu.global.b64 %0, [%1], %2, %3;\n"
                     : "=l"(seen)
                     : "l"(word), "l"(expect), "l"(tag << 16 | 1)
                     : "memory");
        if (seen == expect) return 0; /* claimed: the first arrival under the tag */
        if (seen >> 16 == tag) break; /* another claimed it over this arrival's add */
    }
    asm volatile("atom.add.acq_rel.gpu.global.u64 %0, [%1], 1;\n" : "=l"(old) : "l"(word) : "memory");
    return (int)(old & 0xffff);
}

/* An early claim of the word for the launch, by one thread of one CTA (after
 * wait_prior_grids, with the first copies in flight), so that the arrivals, which come
 * close together at the end, find the tag and each take one add (arrive_tagged's claim
 * at arrival time would take them three round trips). Only a foreign word is replaced:
 * one under the tag, arrivals and all, stays. */
__device__ __forceinline__ void claim_tagged(unsigned long long *word, unsigned long long tag)
{
    unsigned long long v, seen;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(word) : "memory");
    while (v >> 16 != tag) {
        asm volatile("atom.cas.relaxed.gpu.global.b64 %0, [%1], %2, %3;\n"
                     : "=l"(seen)
                     : "l"(word), "l"(v), "l"(tag << 16)
                     : "memory");
        if (seen == v) break;
        v = seen;
    }
}

/* The last arrival's reset of its word: no other arrival of the launch touches it again. */
__device__ __forceinline__ void arrival_reset(unsigned long long *word, unsigned long long tag)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(word), "l"(tag << 16) : "memory");
}

/* Two floats to a packed pair of 16-bit values, round to nearest even (lo in the low half). */
__device__ __forceinline__ u32 pack2(float lo, float hi)
{
    u32 r;
#if FMHA_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ float to_float(elem_t x)
{
#if FMHA_BF16
    return __uint_as_float(((u32)x) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(x));
    return f;
#endif
}

/* max(a, b) that returns NaN when either is NaN (fmaxf returns the other). The split
 * combines reduce the splits' LSEs with it, so that a NaN partial, from NaN inputs, makes
 * its row NaN instead of being outweighed (docs/semantics.md, "Non-finite inputs"). The
 * sums of exponentials are tested with l != 0 rather than l > 0 for the same reason. */
__device__ __forceinline__ float max_nan(float a, float b) { return a != a ? a : b != b ? b : fmaxf(a, b); }

/* A warp's max_nan and sum, every lane receiving it. */
__device__ __forceinline__ float warp_max_nan(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* 2^x with the hardware approximation (relative error ~2^-22, subnormal results flushed
 * to zero): softmax exponents are <= 0, so results lie in [0, 1] and a flushed
 * subnormal weighs nothing next to the row's largest term (which is 1). exp2f adds
 * range handling around the same instruction. */
__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* 1/x with the hardware approximation (within 1 ulp; subnormals flushed): soft-capping's
 * tanh (softcap_tanh), where the IEEE division cost more than the rest of the score. */
__device__ __forceinline__ float fast_rcp(float x)
{
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Max and sum over the four lanes that share a fragment row. */
__device__ __forceinline__ float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* Soft-cap's factor times tanh(y), y = scale x / softcap, from a = 2 log2(e) y (one
 * multiply by fwd_params.h softcap_in): s tanh(y) = s (1 - 2 r), r = 1 / (1 + e^(2y)), by
 * ex2 and rcp on MUFU (rcp of (1 + e^(2y)) / 2, so that one FMA by -s and s finishes it
 * and 2 s need not fit in fp32). tanhf of an IEEE division by the cap had made soft-capped
 * kernels 1.8-2.8x slower (perf-notes run 151). 1 - 2 r is off by up to 4.3e-7 absolute
 * (an fp32 emulation with ex2 and rcp at their worst, 2^-22 and 2^-23), which the softmax
 * sees times the cap: below |y| = 1/16 (|a| < log2(e) / 8) the series y - y^3 / 3 takes
 * over, as a (lin + cub a^2) with the factor folded into its two coefficients, so that a
 * cap far above the scores (near the identity) loses little: under 2.1e-6 of the logit
 * (the y^5 term left out), 6.2e-6 above the bound. Both sides are computed and one
 * selected, with no branch a score (perf-notes run 153). e^(2y) overflowing or flushing
 * to zero gives exactly s or -s; NaN stays NaN (it fails the series' test). */
__device__ __forceinline__ float softcap_tanh(float a, float s, float lin, float cub)
{
    const float r2 = fast_rcp(fmaf(0.5f, fast_exp2(a), 0.5f));
    const float series = a * fmaf(a * a, cub, lin), saturating = fmaf(-s, r2, s);
    return fabsf(a) < LOG2E / 8 ? series : saturating;
}

/* The series' coefficients for s = 1: y = a ln(2) / 2, y^3 / 3 = a^3 ln(2)^3 / 24. */
#define SOFTCAP_UNIT_LIN (0.5f / LOG2E)
#define SOFTCAP_UNIT_CUB (-1.f / (24.f * LOG2E * LOG2E * LOG2E))

/* One score of row i, column col into the softmax's exp2 domain: scale, soft-cap, then
 * the elementwise bias or ALiBi (REFERENCE.md's order), times log2(e). Without soft-cap or
 * bias that is one multiply by scale * log2(e); with soft-cap alone, cap * log2(e) is
 * folded into softcap_tanh's constants. *dcap gets soft-cap's derivative 1 - tanh^2 (1
 * without soft-cap), which the backward's chain rule needs: there, and wherever a bias
 * adds in natural units, tanh itself comes first and is then scaled by the cap. */
template <typename Params>
__device__ __forceinline__ float score_log2_dcap(float x, const Params &p, int i, int col, int sq, int sk, float slope,
                                                 const elem_t *bias, float *dcap)
{
    (void)i, (void)col, (void)sq, (void)sk, (void)slope, (void)bias;
#if FMHA_SOFTCAP
    x = softcap_tanh(x * p.softcap_in, 1.f, SOFTCAP_UNIT_LIN, SOFTCAP_UNIT_CUB); /* tanh, to be scaled by the cap */
    *dcap = fmaf(-x, x, 1.f);
#else
    *dcap = 1.f;
#endif
#if !FMHA_BIAS
    return x * (FMHA_SOFTCAP ? p.softcap_log2 : p.scale_log2);
#else
    x *= FMHA_SOFTCAP ? p.softcap : p.scale;
#if FMHA_BIAS == 1
    if ((unsigned)i < (unsigned)sq && col < sk) x += to_float(bias[(long long)i * p.bias_row + (long long)col * p.bias_col]);
#elif FMHA_BIAS == 2
    x -= slope * fabsf((float)(i + sk - sq - col));
#endif
    return x * LOG2E;
#endif
}

/* score_log2_dcap without the derivative (the forward). */
template <typename Params>
__device__ __forceinline__ float score_log2(float x, const Params &p, int i, int col, int sq, int sk, float slope,
                                            const elem_t *bias)
{
#if FMHA_SOFTCAP && !FMHA_BIAS
    (void)i, (void)col, (void)sq, (void)sk, (void)slope, (void)bias;
    return softcap_tanh(x * p.softcap_in, p.softcap_log2, p.softcap_lin, p.softcap_cub);
#else
    float unused;
    return score_log2_dcap(x, p, i, col, sq, sk, slope, bias, &unused);
#endif
}

/* The bias operands of (batch b, head h): ALiBi's slope, the elementwise bias's rows. */
template <typename Params>
__device__ __forceinline__ float alibi_slope(const Params &p, int b, int h)
{
#if FMHA_BIAS == 2
    return ((const float *)p.alibi)[b * p.alibi_batch + h * p.alibi_head];
#else
    (void)p, (void)b, (void)h;
    return 0.f;
#endif
}
template <typename Params>
__device__ __forceinline__ const elem_t *bias_rows(const Params &p, int b, int h)
{
#if FMHA_BIAS == 1
    return (const elem_t *)p.bias + b * p.bias_batch + h * p.bias_head;
#else
    (void)p, (void)b, (void)h;
    return 0;
#endif
}

/* Keys per split of a sequence of sk keys (fwd_params.h, "Split-KV"): ceil(ceil(sk / TN)
 * / num_splits) tiles, the division by num_splits a multiply (splits_div, divisor.h). */
template <typename Params>
__device__ __forceinline__ int split_keys(const Params &p, int sk)
{
    return (int)fmha_div((unsigned)((sk + TN - 1) / TN + p.num_splits - 1), p.splits_div) * TN;
}

/* n / d (x) and n % d (y) for 0 <= n < 256 and 1 <= d < 256, such as a packed row of a
 * decode block and its query rows, through a float reciprocal: (n + 0.5) / d lies at
 * least 1 / 512 from an integer, and __fdividef's error below 256 is under 2^-15. Six
 * instructions, where an integer division by a runtime d takes about twenty. */
__device__ __forceinline__ int2 small_divmod(int n, int d)
{
    const int q = (int)__fdividef((float)n + 0.5f, (float)d);
    return make_int2(q, n - q * d);
}

/* Next key tile to visit after tile `n0` (or the first one when n0 < 0); TN-aligned.
 * Tiles below `sink_end` (sink tokens) and from `win_begin` up to `end` are visited. */
__device__ __forceinline__ int next_tile(int n0, int sink_end, int win_begin, int end)
{
    int n = n0 < 0 ? 0 : n0 + TN;
    if (n >= sink_end && n < win_begin) n = win_begin;
    return n < end ? n : -1;
}

/* Which m-block, batch and head entry `cta` of a masked grid's work list owns: the order
 * and its reasons are grid_order.h's (the params' l2_* fields, fwd.c set_l2_groups). The
 * list is m-blocks x pairs long (the mma kernel's 1-d grid). Pairs are numbered
 * head-fastest, so the query heads sharing a GQA K/V head are neighbours. */
__device__ __forceinline__ void masked_cta_coords(int cta, int mblocks, int heads, int pairs, int group, int head,
                                                  int tail_first, int *mblock, int *b, int *h)
{
    int pair;
    fmha_masked_item(cta, mblocks, pairs, group, head, tail_first, mblock, &pair);
    *b = pair / heads;
    *h = pair % heads;
}

#endif /* FMHA_KERNEL_COMMON_CUH */
