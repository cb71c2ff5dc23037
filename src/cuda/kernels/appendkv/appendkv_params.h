/* SPDX-License-Identifier: MIT */
/*
 * appendkv_params.h: the appendkv family's parameters, one struct shared by host C
 * (src/cuda/appendkv.c) and the kernel (appendkv.cuh). The paged-cache fields carry
 * fwd_params.h's names, so kernels/device/paged.cuh reads them unchanged. Pointers are
 * uint64, strides int64 element strides.
 *
 * Token t of sequence b goes to cache position L_b + t: L_b = seqlens_k[b] (contiguous
 * cache, row cache_batch_idx[b] or b; block table), or for CSR page lists, which
 * describe each sequence after the append, its length minus seqlen_new. q is rotated
 * into q_rot at positions L_b + i (q_per_row) or L_b.
 */
#ifndef FMHA_CUDA_APPENDKV_PARAMS_H
#define FMHA_CUDA_APPENDKV_PARAMS_H

#ifdef __CUDACC_RTC__
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef unsigned int uint32_t;
#else
#include <stdint.h>
#endif
#include "divisor.h"

typedef struct fmha_appendkv_params {
    uint64_t k_new, v_new, k, v, q, q_rot, rotary_cos, rotary_sin; /* q, q_rot, tables: 0 when absent */
    uint64_t seqlens_k, cache_batch_idx;                            /* int32 [batch] */
    int64_t kn_batch, kn_row, kn_head, vn_batch, vn_row, vn_head;   /* k_new, v_new [B, Snew, Hk, D] */
    int64_t q_batch, q_row, q_head, qr_batch, qr_row, qr_head;      /* q, q_rot [B, Sq, Hq, D] */
    int64_t k_batch, k_row, k_head, v_batch, v_row, v_head;         /* contiguous caches [rows, Smax, Hk, D] */
    int64_t cos_row, cos_col, sin_row, sin_col;                     /* the fp32 [max_pos, rotary_dim / 2] tables */
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_new;
    int32_t rotary_dim, max_pos, q_per_row;
    int32_t rope_vec; /* both tables have unit column stride, rows and bases 16-byte aligned: float4 loads */
    int32_t cache_rows, cache_len; /* contiguous: the cache's batch rows (bounds cache_batch_idx) and Smax */
    int32_t seqlen_k;              /* paged.cuh's bound on a CSR sequence's length: the cache's capacity */
    int32_t blocks_k, blocks_kv;   /* grid x: K's blocks [0, blocks_k), V's up to blocks_kv, q's after */

    /* Paged caches (FMHA_PAGED 1: block table, 2: CSR lists), fwd_params.h's fields:
     * K + page * k_page + slot * k_row + hk * k_head. */
    uint64_t block_table, kv_indptr, kv_indices, kv_last_page_len;
    int64_t k_page, v_page;
    int64_t table_row, table_col, indptr_stride, indices_stride, last_stride;
    int32_t page_size, num_pages, table_width, num_indices;
    fmha_divisor_t page_div; /* page_size's (divisor.h) */
} fmha_appendkv_params_t;

#endif /* FMHA_CUDA_APPENDKV_PARAMS_H */
