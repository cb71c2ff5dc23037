/* SPDX-License-Identifier: MIT */
/*
 * combine.cuh: the splitkv family's second stage. One warp per (sequence, query row,
 * head): the lanes read the splits' LSEs, reduce them (with the sink logit) to the row's
 * LSE, then each lane sums its pairs of head-dim columns over the splits and writes O in
 * the input dtype. Rows are walked like the first stage walked them (sequence.cuh's
 * bounds), so rows outside every sequence are never written.
 *
 * Variants: FMHA_BF16, FMHA_HDIM_V, FMHA_LSE, FMHA_GROUP (variant.cuh).
 */
#include "combine_params.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 32
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 0
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 4
#endif
#include "variant.cuh"
#include "common.cuh"
#include "sequence.cuh"

extern "C" __global__ void __launch_bounds__(32 * FMHA_WARPS) fmha_combine(const fmha_combine_params_t p)
{
    wait_prior_grids();
    const int lane = threadIdx.x % 32;
    const row_item_t it = row_item<FMHA_WARPS>(p); /* a warp per (row, head) of sequence b */
    const int h = it.h;
    const long long token = it.token;
    if (it.i >= it.sq) return;
    elem_t *O = (elem_t *)p.o + row_offset(it, p.o_batch, p.o_row) + (long long)h * p.o_head;
    const long long row = token * p.heads_q + h;
    const float *lse_s = (const float *)p.part_lse + row;

    /* the row's LSE: max, then the sum of exponentials, over the lanes' splits */
    float m = p.sink ? ((const float *)p.sink)[h * p.sink_head] : -INFINITY;
    for (int s = lane; s < p.num_splits; s += 32) m = max_nan(m, lse_s[(long long)s * p.part_rows]);
    m = warp_max_nan(m);
    float l = 0.f;
    if (m != -INFINITY) {
        for (int s = lane; s < p.num_splits; s += 32) l += __expf(lse_s[(long long)s * p.part_rows] - m);
        if (p.sink && lane == 0) l += __expf(((const float *)p.sink)[h * p.sink_head] - m);
    }
    l = warp_sum(l);
    const float lse = l != 0.f ? m + __logf(l) : -INFINITY;

    for (int d = 2 * lane; d < DV; d += 64) {
        float o0 = 0.f, o1 = 0.f;
        if (l != 0.f)
            for (int s = 0; s < p.num_splits; s++) {
                const float w = __expf(lse_s[(long long)s * p.part_rows] - lse); /* 0 for an empty split */
                const float2 x = *(const float2 *)((const float *)p.part_o + ((long long)s * p.part_rows + row) * DV + d);
                o0 += w * x.x, o1 += w * x.y;
            }
        *(u32 *)(O + d) = pack2(o0, o1);
    }
#if FMHA_LSE
    if (lane == 0) {
        ((float *)p.lse)[row_offset(it, p.lse_batch, p.lse_row) + (long long)h * p.lse_head] = lse;
    }
#endif
}
