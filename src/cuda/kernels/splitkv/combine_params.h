/* SPDX-License-Identifier: MIT */
/*
 * combine_params.h: the splitkv family's second stage (combine.cuh), shared by host C
 * (src/cuda/splitkv.c) and the kernel. It reads the first stage's fp32 partials
 * (fwd_params.h, "Split-KV") and writes O and LSE: LSE = log(sum_s exp(LSE_s) +
 * exp(sink)), O = sum_s exp(LSE_s - LSE) O_s (REFERENCE.md, "Split-KV and combine").
 */
#ifndef FMHA_CUDA_COMBINE_PARAMS_H
#define FMHA_CUDA_COMBINE_PARAMS_H

#ifdef __CUDACC_RTC__
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
#else
#include <stdint.h>
#endif

typedef struct fmha_combine_params {
    uint64_t part_o, part_lse;      /* the first stage's partials */
    uint64_t o, lse, sink;          /* outputs; sink: fp32 per-head logits, 0 when absent */
    uint64_t cu_seqlens_q;          /* group mode: which tokens belong to which sequence */
    int64_t o_batch, o_row, o_head; /* element strides (o_batch unused in group mode) */
    int64_t lse_batch, lse_head, lse_row;
    int64_t sink_head, part_rows;
    int32_t batch, heads_q, seqlen_q, num_splits, total_q;
} fmha_combine_params_t;

#endif /* FMHA_CUDA_COMBINE_PARAMS_H */
