/* SPDX-License-Identifier: MIT */
/*
 * dq_acc.cuh: the layout of the backward's fp32 dQ accumulator (bwd_params.h's dq_acc),
 * written by dot_do_o (zeros), dq_dk_dv (the adds) and read by convert_dq.
 *
 *   head-major: [heads_q][tokens][hdim_qk], so that an m-block's rows of one head (what
 *     a key tile adds per item) are one contiguous range: the sm90 kernel's dQ writer
 *     adds an item with one bulk reduce-add instead of one per row (perf-notes run 67);
 *   swizzled: within a row, the 16-byte chunk c sits at c ^ (i % 8), i the row's index
 *     in its sequence, so that the writer's shared copy of an item (rows unpadded, the
 *     same bytes) takes the consumers' float2 stores of 8 rows on distinct banks. An
 *     m-block starts at a multiple of 8 rows, so row r of an item has i % 8 = r % 8.
 */
#ifndef FMHA_KERNEL_DQ_ACC_CUH
#define FMHA_KERNEL_DQ_ACC_CUH

/* The first float of token `token`'s row for query head h (hdim: the row's length). */
__device__ __forceinline__ long long dq_acc_row(const fmha_bwd_params_t &p, long long token, int h, int hdim)
{
    return ((long long)h * p.tokens + token) * hdim;
}

/* Where column `col` of row i (in its sequence) is stored within its row of hdim floats.
 * Columns 4c..4c+3 stay together, so a float2 at an even column stays whole; a chunk is
 * swizzled only within a whole group of 8 (hdim 40's last 2 chunks stay in place). */
__device__ __forceinline__ int dq_acc_col(int i, int col, int hdim)
{
    const int c = col >> 2;
    return (hdim % 32 == 0 || (c | 7) < hdim / 4) ? ((c ^ (i & 7)) << 2) | (col & 3) : col;
}

#endif /* FMHA_KERNEL_DQ_ACC_CUH */
