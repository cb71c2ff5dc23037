/* SPDX-License-Identifier: MIT */
/*
 * ref_kv.h: where token j of sequence b lives in a K/V cache, for every way fmha
 * describes one: contiguous batch [B, Sk, Hk, D] (rows picked by cache_batch_idx,
 * lengths by seqlens_kv), contiguous group [total_k, Hk, D] (cu_seqlens_kv,
 * seqused_kv), and paged [pages, page, Hk, D] / [pages, Hk, page, D] through a block
 * table or CSR page lists. Validation has checked every index this reads.
 */
#ifndef FMHA_REF_KV_H
#define FMHA_REF_KV_H

#include "../core/internal.h"

typedef enum kv_kind { KV_BATCH, KV_GROUP, KV_PAGED_TABLE, KV_PAGED_CSR } kv_kind_t;

typedef struct kv_view {
    kv_kind_t kind;
    int hnd;      /* paged page layout [pages, Hk, page, D] */
    int64_t page; /* tokens per page */
    int64_t Sk;   /* batch mode length without seqlens_kv */
    const fmha_tensor_desc_t *t[2]; /* K, V */
    const int32_t *cu_k, *used_k, *seqlens, *cache_idx, *table, *indptr, *indices, *last;
    int64_t s_seqlens, s_cache_idx, s_table[2], s_indptr, s_indices, s_last;
} kv_view_t;

/* The cache of problem p (K and V roles) with data[role] host pointers. */
kv_view_t fmha__kv_view(const fmha_problem_t *p, void *const *data);

/* Number of keys of sequence b. */
int64_t fmha__kv_len(const kv_view_t *kv, int64_t b);

/* Element offset of (sequence b, token j, kv head h, dim 0) in K (which 0) or V (1);
 * step to the next dim with fmha__kv_dim_stride. j may be past the length (appendkv
 * writes there) but must be inside the cache's capacity. */
int64_t fmha__kv_offset(const kv_view_t *kv, int which, int64_t b, int64_t j, int64_t h);
static inline int64_t fmha__kv_dim_stride(const kv_view_t *kv, int which) { return kv->t[which]->strides[kv->t[which]->rank - 1]; }

#endif /* FMHA_REF_KV_H */
