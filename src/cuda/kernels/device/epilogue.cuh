/* SPDX-License-Identifier: MIT */
/*
 * epilogue.cuh: the end of a forward row block: normalise O by the softmax sum, fold in
 * the per-head sink logit (FMHA_SINK), write O and the LSE (FMHA_LSE). out_scale multiplies
 * O (fp8: V's descale); the sums carry P's 2^P_LOG2_SCALE (variant.cuh). O in the m16n8
 * accumulator layout (softmax.cuh): o[d * 4 + 2 * half + e] for rows i0 and i0 + 8.
 */
#ifndef FMHA_KERNEL_EPILOGUE_CUH
#define FMHA_KERNEL_EPILOGUE_CUH

#include "common.cuh"
#include "sequence.cuh"

/* The thread's row `half` of head h finished: O's factor (inv: the softmax sum's inverse,
 * the sink's rescale, out_scale or dropout's 1 / (1 - p)) and the row's final max and sum
 * in the log2 domain, for store_lse. */
template <typename Params>
__device__ __forceinline__ void finish_row(const Params &p, int h, const float *row_max, const float *row_sum,
                                           int half, float out_scale, float &inv, float &m, float &l)
{
    l = quad_sum(row_sum[half]);
    m = row_max[half];
#if FMHA_SINK
    /* the sink logit joins the softmax's denominator only (REFERENCE.md) */
    const float sink = ((const float *)p.sink)[h * p.sink_head] * LOG2E;
    const float m_fin = fmaxf(m, sink);
#if FMHA_FP8
    l = (m == -INFINITY ? 0.f : l * exp2f(m - m_fin)) + exp2f(sink - m_fin + P_LOG2_SCALE);
#else
    l = (m == -INFINITY ? 0.f : l * exp2f(m - m_fin)) + exp2f(sink - m_fin);
#endif
    const float rescale = m == -INFINITY ? 0.f : exp2f(m - m_fin);
    m = m_fin;
#else
    const float rescale = 1.f;
    (void)h;
#endif
#if FMHA_DROPOUT
    (void)out_scale;
    inv = l != 0.f ? rescale / l * p.rp_keep : 0.f; /* kept terms scaled by 1 / (1 - p) */
#else
    inv = l != 0.f ? rescale / l * out_scale : 0.f;
#endif
}

/* Row i's LSE in natural units, -inf for a row that saw no key (FMHA_LSE; lane t == 0 of
 * the row's quad writes it; the caller checks 0 <= i < s.sq). */
template <typename Params>
__device__ __forceinline__ void store_lse(const Params &p, const seq_t &s, int i, int t, float m, float l)
{
#if FMHA_LSE
    if (t == 0)
        ((float *)p.lse)[s.lse + (long long)i * p.lse_row] =
            l != 0.f ? (FMHA_FP8 ? m + log2f(l) - P_LOG2_SCALE : m + log2f(l)) / LOG2E : -INFINITY;
#else
    (void)p, (void)s, (void)i, (void)t, (void)m, (void)l;
#endif
}

/* Rows i0 and i0 + 8 of sequence s (rows outside [0, s.sq) are not written), head h; t is the
 * lane's column pair. */
template <int DV_, typename Params>
__device__ __forceinline__ void store_o_lse(const Params &p, const seq_t &s, int h, const float *o,
                                            const float *row_max, const float *row_sum, int i0, int t,
                                            float out_scale = 1.f)
{
    elem_t *O = (elem_t *)p.o + s.o;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = i0 + 8 * half;
        float inv, m, l;
        finish_row(p, h, row_max, row_sum, half, out_scale, inv, m, l);
        if ((unsigned)i < (unsigned)s.sq) { /* rows above the sequence too (fwd_params.h top_partial) */
            elem_t *orow = O + (long long)i * p.o_row;
#pragma unroll
            for (int d = 0; d < DV_ / 8; d++)
                *(u32 *)(orow + d * 8 + 2 * t) = pack2(o[d * 4 + 2 * half] * inv, o[d * 4 + 2 * half + 1] * inv);
            store_lse(p, s, i, t, m, l);
        }
    }
}

/* The partial row (fwd_params.h, "Split-KV") of query head hq at position i of sequence b,
 * within one split's block of part_rows. */
template <typename Params>
__device__ __forceinline__ long long partial_row(const Params &p, const seq_t &s, int b, int hq, int i)
{
#if FMHA_GROUP
    (void)b;
    return (s.tq0 + i) * p.heads_q + hq;
#else
    (void)s;
    return ((long long)b * p.seqlen_q + i) * p.heads_q + hq;
#endif
}

/* A split's rows (FMHA_SPLIT): O normalised within the split and the split's LSE, in
 * fp32, at the partial row of (token, head) (fwd_params.h); -inf and zeros for a row
 * that saw no key. Sink logits join in the combine. Each half-row has its own query head
 * (heads[half], -1: a row past the group, not stored) and position (rows[half]). */
template <int DV_, typename Params>
__device__ __forceinline__ void store_partial(const Params &p, const seq_t &s, int b, const int *heads, const int *rows,
                                              int split, const float *o, const float *row_max, const float *row_sum,
                                              int t)
{
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = rows[half], h = heads[half];
        const float l = quad_sum(row_sum[half]), m = row_max[half];
        const float inv = l != 0.f ? 1.f / l : 0.f;
        if (h >= 0 && i < s.sq) {
            const long long row = (long long)split * p.part_rows + partial_row(p, s, b, h, i);
            float *orow = (float *)p.part_o + row * DV_;
#pragma unroll
            for (int d = 0; d < DV_ / 8; d++)
                *(float2 *)(orow + d * 8 + 2 * t) = make_float2(o[d * 4 + 2 * half] * inv, o[d * 4 + 2 * half + 1] * inv);
            if (t == 0) ((float *)p.part_lse)[row] = l != 0.f ? (m + log2f(l)) / LOG2E : -INFINITY;
        }
    }
}

#endif /* FMHA_KERNEL_EPILOGUE_CUH */
