/* SPDX-License-Identifier: MIT */
/* ref_kv.c: see ref_kv.h. */
#include "ref_kv.h"

kv_view_t fmha__kv_view(const fmha_problem_t *p, void *const *data)
{
    kv_view_t kv = {0};
    kv.t[0] = fmha__t(p, FMHA_TENSOR_K);
    kv.t[1] = fmha__t(p, FMHA_TENSOR_V);
    kv.page = fmha__i(p, FMHA_PARAM_PAGE_SIZE);
    kv.hnd = fmha__i(p, FMHA_PARAM_KV_LAYOUT) == FMHA_KV_LAYOUT_HND;
    kv.Sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    kv.cu_k = data[FMHA_TENSOR_CU_SEQLENS_KV];
    kv.used_k = data[FMHA_TENSOR_SEQUSED_KV];
    kv.seqlens = data[FMHA_TENSOR_SEQLENS_KV];
    kv.cache_idx = data[FMHA_TENSOR_CACHE_BATCH_IDX];
    kv.table = data[FMHA_TENSOR_BLOCK_TABLE];
    kv.indptr = data[FMHA_TENSOR_KV_INDPTR];
    kv.indices = data[FMHA_TENSOR_KV_INDICES];
    kv.last = data[FMHA_TENSOR_KV_LAST_PAGE_LEN];
#define STRIDE0(role) (fmha__t(p, role) ? fmha__t(p, role)->strides[0] : 0)
    kv.s_seqlens = STRIDE0(FMHA_TENSOR_SEQLENS_KV);
    kv.s_cache_idx = STRIDE0(FMHA_TENSOR_CACHE_BATCH_IDX);
    kv.s_indptr = STRIDE0(FMHA_TENSOR_KV_INDPTR);
    kv.s_indices = STRIDE0(FMHA_TENSOR_KV_INDICES);
    kv.s_last = STRIDE0(FMHA_TENSOR_KV_LAST_PAGE_LEN);
#undef STRIDE0
    if (fmha__t(p, FMHA_TENSOR_BLOCK_TABLE)) {
        kv.s_table[0] = fmha__t(p, FMHA_TENSOR_BLOCK_TABLE)->strides[0];
        kv.s_table[1] = fmha__t(p, FMHA_TENSOR_BLOCK_TABLE)->strides[1];
    }
    if (kv.page > 0)
        kv.kind = fmha__i(p, FMHA_PARAM_KV_LOOKUP) == FMHA_KV_LOOKUP_CSR ? KV_PAGED_CSR : KV_PAGED_TABLE;
    else
        kv.kind = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP ? KV_GROUP : KV_BATCH;
    return kv;
}

int64_t fmha__kv_len(const kv_view_t *kv, int64_t b)
{
    switch (kv->kind) {
    case KV_BATCH: return kv->seqlens ? kv->seqlens[b * kv->s_seqlens] : kv->Sk;
    case KV_GROUP: return kv->used_k ? kv->used_k[b] : (int64_t)kv->cu_k[b + 1] - kv->cu_k[b];
    case KV_PAGED_TABLE: return kv->seqlens[b * kv->s_seqlens];
    case KV_PAGED_CSR: {
        int64_t npages = (int64_t)kv->indptr[(b + 1) * kv->s_indptr] - kv->indptr[b * kv->s_indptr];
        return npages > 0 ? kv->page * (npages - 1) + kv->last[b * kv->s_last] : 0;
    }
    }
    return 0;
}

int64_t fmha__kv_offset(const kv_view_t *kv, int which, int64_t b, int64_t j, int64_t h)
{
    const int64_t *s = kv->t[which]->strides;
    switch (kv->kind) {
    case KV_BATCH: {
        int64_t row = kv->cache_idx ? kv->cache_idx[b * kv->s_cache_idx] : b;
        return row * s[0] + j * s[1] + h * s[2];
    }
    case KV_GROUP: return ((int64_t)kv->cu_k[b] + j) * s[0] + h * s[1];
    case KV_PAGED_TABLE:
    case KV_PAGED_CSR: {
        int64_t pg = kv->kind == KV_PAGED_TABLE
                         ? kv->table[b * kv->s_table[0] + (j / kv->page) * kv->s_table[1]]
                         : kv->indices[((int64_t)kv->indptr[b * kv->s_indptr] + j / kv->page) * kv->s_indices];
        int64_t slot = j % kv->page;
        return kv->hnd ? pg * s[0] + h * s[1] + slot * s[2] : pg * s[0] + slot * s[1] + h * s[2];
    }
    }
    return 0;
}
