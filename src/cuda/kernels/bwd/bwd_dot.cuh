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

/* The row (b, i, h) of a walk over one sequence's (row, head) items: its token, or -1
 * past the sequence. */
template <typename Params>
__device__ __forceinline__ long long walk_token(const Params &p, int b, int i, int *sq)
{
#if FMHA_GROUP
    int t0;
    group_rows((const int *)p.cu_seqlens_q, b, p.total_q, p.seqlen_q, &t0, sq);
    return i < *sq ? (long long)t0 + i : -1;
#else
    *sq = p.seqlen_q;
    return i < *sq ? (long long)b * p.seqlen_q + i : -1;
#endif
}

extern "C" __global__ void __launch_bounds__(32 * FMHA_WARPS) fmha_bwd_dot(const fmha_bwd_params_t p)
{
    const int lane = threadIdx.x % 32;
    /* grid: x over the (row, head) items of a sequence, FMHA_WARPS per CTA; y the sequence */
    const long long item = (long long)blockIdx.x * FMHA_WARPS + threadIdx.x / 32;
    const int b = blockIdx.y, h = (int)(item % p.f.heads_q), i = (int)(item / p.f.heads_q);
    int sq;
    const long long token = walk_token(p.f, b, i, &sq);
    if (token < 0) return;
    const long long row = token * p.f.heads_q + h;
#if FMHA_GROUP
    const long long o_at = token * p.f.o_row, do_at = token * p.do_row;
#else
    const long long o_at = (long long)b * p.f.o_batch + (long long)i * p.f.o_row;
    const long long do_at = (long long)b * p.do_batch + (long long)i * p.do_row;
#endif
    const elem_t *O = (const elem_t *)p.f.o + o_at + (long long)h * p.f.o_head;
    const elem_t *dO = (const elem_t *)p.dout + do_at + (long long)h * p.do_head;
    float sum = 0.f;
    for (int d = 2 * lane; d < DV; d += 64) {
        const u32 o2 = *(const u32 *)(O + d), g2 = *(const u32 *)(dO + d);
        sum += to_float((elem_t)(o2 & 0xffff)) * to_float((elem_t)(g2 & 0xffff)) +
               to_float((elem_t)(o2 >> 16)) * to_float((elem_t)(g2 >> 16));
    }
#pragma unroll
    for (int m = 16; m >= 1; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (lane == 0) ((float *)p.dsum)[row] = sum;
    float4 *acc = (float4 *)((float *)p.dq_acc + row * p.hdim_qk); /* hdim_qk: a multiple of 8 */
    for (int d = lane; d < p.hdim_qk / 4; d += 32) acc[d] = make_float4(0.f, 0.f, 0.f, 0.f);
}
