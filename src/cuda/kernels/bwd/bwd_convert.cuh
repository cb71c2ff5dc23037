/* SPDX-License-Identifier: MIT */
/*
 * bwd_convert.cuh: the backward's last stage (convert_dq). One warp per (sequence, query
 * row, head) turns the row's fp32 dq accumulator (the sum of dS K over key tiles) into dq:
 * times the scale, in dq's dtype. With sink logits, CTA row_ctas + h of grid row 0 also
 * reduces dsink_h = -sum_i exp(sink_h - lse_i) D_i over every row of head h in a fixed
 * order (bitwise reproducible), and the CTAs after those turn a broadcast dbias's fp32
 * accumulator into dbias. Rows outside every sequence are not written.
 *
 * Variants: FMHA_BF16, FMHA_HDIM_QK (dq's head dim), FMHA_GROUP, FMHA_WARPS.
 */
#include "bwd_params.h"

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
#include "dq_acc.cuh"

#define NTHREADS (32 * FMHA_WARPS)

/* dsink of head h: each thread sums a fixed subset of the rows, then a fixed tree. */
__device__ void reduce_dsink(const fmha_bwd_params_t &p, int h)
{
    __shared__ float part[NTHREADS];
    const float sink = ((const float *)p.f.sink)[(long long)h * p.f.sink_head] * LOG2E;
    float sum = 0.f;
    for (int b = 0; b < p.f.batch; b++) {
#if FMHA_GROUP
        int t0, sq;
        group_rows((const int *)p.f.cu_seqlens_q, b, p.f.total_q, p.f.seqlen_q, &t0, &sq);
#else
        const int t0 = b * p.f.seqlen_q, sq = p.f.seqlen_q;
#endif
        for (int i = threadIdx.x; i < sq; i += NTHREADS) {
            const row_item_t r = {b, h, i, sq, (long long)t0 + i};
            const float lse = ((const float *)p.f.lse)[row_offset(r, p.f.lse_batch, p.f.lse_row) + (long long)h * p.f.lse_head];
            if (lse > -INFINITY)
                sum -= exp2f(sink - lse * LOG2E) * ((const float *)p.dsum)[((long long)t0 + i) * p.f.heads_q + h];
        }
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int w = NTHREADS / 2; w >= 1; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) ((float *)p.dsink)[(long long)h * p.dsink_head] = part[0];
}

/* A broadcast dbias from its fp32 accumulator (bwd_params.h), 8 elements per thread. */
__device__ void convert_dbias(const fmha_bwd_params_t &p, int cta)
{
    const long long first = ((long long)cta * NTHREADS + threadIdx.x) * 8;
    const float *acc = (const float *)p.dbias_acc;
    elem_t *out = (elem_t *)p.dbias;
    for (long long e = first; e < first + 8 && e < p.dbias_elems; e++) out[e] = (elem_t)(pack2(acc[e], 0.f) & 0xffff);
}

extern "C" __global__ void __launch_bounds__(NTHREADS) fmha_bwd_convert(const fmha_bwd_params_t p)
{
    if ((int)blockIdx.x >= p.row_ctas) { /* grid row 0 only: dsink, then a broadcast dbias */
        const int x = (int)blockIdx.x - p.row_ctas;
        if (blockIdx.y != 0) return;
        if (x < p.sink_ctas) reduce_dsink(p, x);
        else convert_dbias(p, x - p.sink_ctas);
        return;
    }
    const int lane = threadIdx.x % 32;
    const row_item_t it = row_item<FMHA_WARPS>(p.f); /* a warp per (row, head) of sequence b */
    if (it.i >= it.sq) return;
    const int h = it.h;
    const float *acc = (const float *)p.dq_acc + dq_acc_row(p, it.token, h, DQK);
    elem_t *dq = (elem_t *)p.dq + row_offset(it, p.dq_batch, p.dq_row) + (long long)h * p.dq_head;
    for (int d = 2 * lane; d < DQK; d += 64) {
        const float2 a = *(const float2 *)(acc + dq_acc_col(it.i, d, DQK));
        *(u32 *)(dq + d) = pack2(a.x * p.f.scale, a.y * p.f.scale);
    }
}
