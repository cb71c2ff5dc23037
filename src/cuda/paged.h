/* SPDX-License-Identifier: MIT */
/*
 * paged.h: the host side of kernels/device/paged.cuh. Every family that reads a paged
 * cache carries fwd_params.h's paged fields by the same names; this fills them.
 */
#ifndef FMHA_CUDA_PAGED_H
#define FMHA_CUDA_PAGED_H

#include <stdint.h>

#include "../core/internal.h"

/* The paged-cache fields of params `a` (any family's struct with fwd_params.h's names)
 * from problem p and its pointers: K/V [pages, page, Hk, D] (NHD) or [pages, Hk, page, D]
 * (HND), and the lookup's arrays with their strides. Counts past 2^31 - 1 are clamped:
 * the kernels index pages and list entries in 32 bits, and bound every lookup by them. */
#define FMHA_CUDA_PAGED_PARAMS(a, p, data)                                                                        \
    do {                                                                                                          \
        const fmha_tensor_desc_t *pk_ = fmha__t(p, FMHA_TENSOR_K), *pv_ = fmha__t(p, FMHA_TENSOR_V);                \
        const int hnd_ = fmha__i(p, FMHA_PARAM_KV_LAYOUT) == FMHA_KV_LAYOUT_HND;                                  \
        (a)->k_batch = (a)->v_batch = 0;                                                                          \
        (a)->k_page = pk_->strides[0], (a)->v_page = pv_->strides[0];                                             \
        (a)->k_row = pk_->strides[hnd_ ? 2 : 1], (a)->k_head = pk_->strides[hnd_ ? 1 : 2];                        \
        (a)->v_row = pv_->strides[hnd_ ? 2 : 1], (a)->v_head = pv_->strides[hnd_ ? 1 : 2];                        \
        (a)->page_size = (int32_t)fmha__i(p, FMHA_PARAM_PAGE_SIZE);                                               \
        (a)->page_div = fmha_divisor_of((uint32_t)(a)->page_size);                                                \
        (a)->num_pages = (int32_t)(pk_->dims[0] < INT32_MAX ? pk_->dims[0] : INT32_MAX);                          \
        const fmha_tensor_desc_t *bt_ = fmha__t(p, FMHA_TENSOR_BLOCK_TABLE);                                      \
        if (bt_) {                                                                                                \
            (a)->block_table = (uint64_t)(uintptr_t)(data)[FMHA_TENSOR_BLOCK_TABLE];                              \
            (a)->table_row = bt_->strides[0], (a)->table_col = bt_->strides[1];                                   \
            (a)->table_width = (int32_t)(bt_->dims[1] < INT32_MAX ? bt_->dims[1] : INT32_MAX);                    \
        } else {                                                                                                  \
            const fmha_tensor_desc_t *ip_ = fmha__t(p, FMHA_TENSOR_KV_INDPTR),                                    \
                                     *ix_ = fmha__t(p, FMHA_TENSOR_KV_INDICES),                                   \
                                     *ll_ = fmha__t(p, FMHA_TENSOR_KV_LAST_PAGE_LEN);                             \
            (a)->kv_indptr = (uint64_t)(uintptr_t)(data)[FMHA_TENSOR_KV_INDPTR];                                  \
            (a)->kv_indices = (uint64_t)(uintptr_t)(data)[FMHA_TENSOR_KV_INDICES];                                \
            (a)->kv_last_page_len = (uint64_t)(uintptr_t)(data)[FMHA_TENSOR_KV_LAST_PAGE_LEN];                    \
            (a)->indptr_stride = ip_->strides[0], (a)->indices_stride = ix_->strides[0];                          \
            (a)->last_stride = ll_->strides[0];                                                                   \
            (a)->num_indices = (int32_t)(ix_->dims[0] < INT32_MAX ? ix_->dims[0] : INT32_MAX);                    \
        }                                                                                                         \
    } while (0)

#endif /* FMHA_CUDA_PAGED_H */
