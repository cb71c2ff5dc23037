/* SPDX-License-Identifier: MIT */
/*
 * bwd_dot.cuh: the backward's first stage (dot_do_o). One warp per (sequence, query row,
 * head): D = rowsum(dO * O) in fp32 into the workspace's dsum, and the row's dq
 * accumulator zeroed for the dq_dk_dv stage's adds (bwd_params.h). Rows are walked per
 * sequence like the forward's (sequence.cuh's bounds), so rows outside every sequence
 * are neither read nor written.
 *
 * Variants: FMHA_BF16, FMHA_HDIM_V (O's and dO's head dim), FMHA_GROUP, FMHA_WARPS.
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

extern "C" __global__ void __launch_bounds__(32 * FMHA_WARPS) fmha_bwd_dot(const fmha_bwd_params_t p)
{
    const int lane = threadIdx.x % 32;
    const row_item_t it = row_item<FMHA_WARPS>(p.f); /* a warp per (row, head) of sequence b */
    if (it.i >= it.sq) return;
    const int h = it.h;
    const long long row = it.token * p.f.heads_q + h;
    const elem_t *O = (const elem_t *)p.f.o + row_offset(it, p.f.o_batch, p.f.o_row) + (long long)h * p.f.o_head;
    const elem_t *dO = (const elem_t *)p.dout + row_offset(it, p.do_batch, p.do_row) + (long long)h * p.do_head;
    float sum = 0.f;
    for (int d = 2 * lane; d < DV; d += 64) {
        const u32 o2 = *(const u32 *)(O + d), g2 = *(const u32 *)(dO + d);
        sum += to_float((elem_t)(o2 & 0xffff)) * to_float((elem_t)(g2 & 0xffff)) +
               to_float((elem_t)(o2 >> 16)) * to_float((elem_t)(g2 >> 16));
    }
    sum = warp_sum(sum);
    if (lane == 0) ((float *)p.dsum)[row] = sum;
    /* the row of dq_acc, zeroed (its layout: dq_acc.cuh; hdim_qk a multiple of 8) */
    float4 *acc = (float4 *)((float *)p.dq_acc + dq_acc_row(p, it.token, h, p.hdim_qk));
    for (int d = lane; d < p.hdim_qk / 4; d += 32) acc[d] = make_float4(0.f, 0.f, 0.f, 0.f);
}
