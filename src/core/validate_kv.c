/* SPDX-License-Identifier: MIT */
/*
 * validate_kv.c: the rules of the KV-cache families: fwd_splitkv, fwd_pagedkv and
 * batch_prefill (attention over a contiguous or paged cache) and appendkv (writing new
 * tokens into a cache, with RoPE). The data-dependent rules (lengths, page indices,
 * positions) are in validate_data.c.
 */
#include <stdio.h>

#include "validate.h"

#define rname fmha_tensor_role_name

/* The paged cache: K [pages, page, Hk, Dqk] (NHD) or [pages, Hk, page, Dqk] (HND), V the
 * same with Dv, and one of the two lookups. */
static fmha_status_t validate_paged(vctx_t *v)
{
    const fmha_problem_t *p = v->p;
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV),
                  Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK), Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V),
                  page = fmha__i(p, FMHA_PARAM_PAGE_SIZE);
    const int hnd = fmha__i(p, FMHA_PARAM_KV_LAYOUT) == FMHA_KV_LAYOUT_HND;
    const fmha_tensor_role_t contiguous_only[] = {FMHA_TENSOR_CU_SEQLENS_KV, FMHA_TENSOR_SEQUSED_KV,
                                                  FMHA_TENSOR_CACHE_BATCH_IDX};
    for (size_t i = 0; i < 3; i++)
        if (fmha__t(p, contiguous_only[i]))
            return VFAIL(v, VINVALID,
                         "[rule paged.tensor] tensor %s is set with a paged cache (page_size %lld); it "
                         "describes a contiguous cache",
                         rname(contiguous_only[i]), (long long)page);
    const int64_t pages = fmha__t(p, FMHA_TENSOR_K)->dims[0];
    const char *lk = hnd ? "[pages, Hk, page_size, Dqk] (kv_layout HND)" : "[pages, page_size, Hk, Dqk] (kv_layout NHD)";
    const char *lv = hnd ? "[pages, Hk, page_size, Dv] (kv_layout HND)" : "[pages, page_size, Hk, Dv] (kv_layout NHD)";
    VTRY(fmha__v_shape(v, FMHA_TENSOR_K, 4,
                       hnd ? (int64_t[]){VANY, Hk, page, Dqk} : (int64_t[]){VANY, page, Hk, Dqk}, 0, lk));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_V, 4,
                       hnd ? (int64_t[]){pages, Hk, page, Dv} : (int64_t[]){pages, page, Hk, Dv}, 0, lv));

    if (fmha__i(p, FMHA_PARAM_KV_LOOKUP) == FMHA_KV_LOOKUP_BLOCK_TABLE) {
        const fmha_tensor_role_t csr[] = {FMHA_TENSOR_KV_INDPTR, FMHA_TENSOR_KV_INDICES, FMHA_TENSOR_KV_LAST_PAGE_LEN};
        for (size_t i = 0; i < 3; i++)
            if (fmha__t(p, csr[i]))
                return VFAIL(v, VINVALID,
                             "[rule paged.lookup] tensor %s is set but kv_lookup is 0 (block table); set "
                             "kv_lookup = 1 for CSR page lists",
                             rname(csr[i]));
        VTRY(fmha__v_require(v, FMHA_TENSOR_BLOCK_TABLE, "a paged cache with kv_lookup 0 needs block_table [B, max_pages]"));
        VTRY(fmha__v_require(v, FMHA_TENSOR_SEQLENS_KV, "a paged cache with kv_lookup 0 needs seqlens_kv [B]"));
        VTRY(fmha__v_shape(v, FMHA_TENSOR_BLOCK_TABLE, 2, (int64_t[]){B, VANY}, 0, "[B, max_pages]"));
        VTRY(fmha__v_shape(v, FMHA_TENSOR_SEQLENS_KV, 1, (int64_t[]){B}, 0, "[B]"));
        return FMHA_STATUS_SUCCESS;
    }
    const fmha_tensor_role_t table[] = {FMHA_TENSOR_BLOCK_TABLE, FMHA_TENSOR_SEQLENS_KV};
    for (size_t i = 0; i < 2; i++)
        if (fmha__t(p, table[i]))
            return VFAIL(v, VINVALID,
                         "[rule paged.lookup] tensor %s is set but kv_lookup is 1 (CSR pages); the lengths "
                         "come from kv_indptr and kv_last_page_len",
                         rname(table[i]));
    VTRY(fmha__v_require(v, FMHA_TENSOR_KV_INDPTR, "CSR pages need kv_indptr [B + 1]"));
    VTRY(fmha__v_require(v, FMHA_TENSOR_KV_INDICES, "CSR pages need kv_indices [nnz_pages]"));
    VTRY(fmha__v_require(v, FMHA_TENSOR_KV_LAST_PAGE_LEN, "CSR pages need kv_last_page_len [B]"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_KV_INDPTR, 1, (int64_t[]){B + 1}, 0, "[B + 1]"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_KV_INDICES, 1, (int64_t[]){VANY}, 0, "[nnz_pages]"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_KV_LAST_PAGE_LEN, 1, (int64_t[]){B}, 0, "[B]"));
    return FMHA_STATUS_SUCCESS;
}

/* The lookup and layout parameters mean something only with pages: refuse them on a
 * contiguous cache rather than ignore them. */
static fmha_status_t forbid_paged(vctx_t *v, const char *family_note)
{
    const fmha_problem_t *p = v->p;
    const fmha_tensor_role_t paged[] = {FMHA_TENSOR_BLOCK_TABLE, FMHA_TENSOR_KV_INDPTR, FMHA_TENSOR_KV_INDICES,
                                        FMHA_TENSOR_KV_LAST_PAGE_LEN};
    for (size_t i = 0; i < 4; i++)
        if (fmha__t(p, paged[i]))
            return VFAIL(v, VINVALID,
                         "[rule paged.page_size] tensor %s is set but page_size is 0 (a contiguous cache); "
                         "expected page_size > 0 %s",
                         rname(paged[i]), family_note);
    if (fmha__i(p, FMHA_PARAM_KV_LAYOUT) || fmha__i(p, FMHA_PARAM_KV_LOOKUP))
        return VFAIL(v, VINVALID,
                     "[rule paged.page_size] kv_layout or kv_lookup is set but page_size is 0 (a contiguous "
                     "cache); expected page_size > 0");
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__validate_kv_families(vctx_t *v)
{
    const fmha_problem_t *p = v->p;
    const fmha_family_t fam = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    const char *fname = fmha_family_name(fam);
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const int paged = fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0;

    if (fam == FMHA_FAMILY_FWD_PAGEDKV && group)
        return VFAIL(v, VINVALID,
                     "[rule mode.family] fwd_pagedkv takes batch-mode queries (mode 0); ragged queries over a "
                     "paged cache are family batch_prefill");
    if (fam == FMHA_FAMILY_BATCH_PREFILL && !group)
        return VFAIL(v, VINVALID,
                     "[rule mode.family] batch_prefill takes ragged queries (mode 1 with cu_seqlens_q); "
                     "batch-mode queries over a paged cache are family fwd_pagedkv");
    if (fam != FMHA_FAMILY_FWD_SPLITKV && !paged)
        return VFAIL(v, VINVALID, "[rule paged.page_size] family %s reads a paged cache; page_size is 0, expected > 0",
                     fname);
    if (fam != FMHA_FAMILY_FWD_SPLITKV && fmha__i(p, FMHA_PARAM_NUM_SPLITS) > 1)
        return VFAIL(v, VINVALID,
                     "[rule splits.family] num_splits is %lld but family %s does not split; use fwd_splitkv",
                     (long long)fmha__i(p, FMHA_PARAM_NUM_SPLITS), fname);

    char need[96];
    snprintf(need, sizeof need, "family %s needs q, k, v and o", fname);
    const fmha_tensor_role_t req[] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (size_t i = 0; i < 4; i++) VTRY(fmha__v_require(v, req[i], need));
    VTRY(fmha__validate_query_side(v));
    if (paged) return validate_paged(v);
    VTRY(forbid_paged(v, "for a paged cache"));
    const fmha_tensor_desc_t *idx = fmha__t(p, FMHA_TENSOR_CACHE_BATCH_IDX);
    if (idx && !fmha__t(p, FMHA_TENSOR_SEQLENS_KV))
        return VFAIL(v, VINVALID,
                     "[rule cache.seqlens] cache_batch_idx is set without seqlens_kv; a cache addressed by row "
                     "needs the length of each sequence");
    return fmha__validate_kv_contiguous(v, idx ? fmha__t(p, FMHA_TENSOR_K)->dims[0] : 0);
}

fmha_status_t fmha__validate_appendkv(vctx_t *v)
{
    const fmha_problem_t *p = v->p;
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q),
                  Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV), Sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q),
                  Snew = fmha__i(p, FMHA_PARAM_SEQLEN_KNEW), Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                  Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V), rot = fmha__i(p, FMHA_PARAM_ROTARY_DIM);
    if (fmha__i(p, FMHA_PARAM_MODE) != FMHA_MODE_BATCH)
        return VFAIL(v, VINVALID, "[rule mode.family] appendkv takes batch-mode tensors (mode 0)");
    VTRY(fmha__v_positive(v, FMHA_PARAM_SEQLEN_KNEW));
    /* CSR page lists give each sequence's length themselves: they describe the cache after
     * the append (FlashInfer's append_paged_kv_cache), the new tokens being its last Snew */
    const int csr = fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0 && fmha__i(p, FMHA_PARAM_KV_LOOKUP) == FMHA_KV_LOOKUP_CSR;
    const char *need = csr ? "appendkv needs k_new, v_new and the k and v caches"
                           : "appendkv needs k_new, v_new, the k and v caches and seqlens_kv";
    const fmha_tensor_role_t req[] = {FMHA_TENSOR_K_NEW, FMHA_TENSOR_V_NEW, FMHA_TENSOR_K, FMHA_TENSOR_V,
                                      FMHA_TENSOR_SEQLENS_KV};
    for (size_t i = 0; i < (csr ? 4u : 5u); i++) VTRY(fmha__v_require(v, req[i], need));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_K_NEW, 4, (int64_t[]){B, Snew, Hk, Dqk}, 0, "[B, Snew, Hk, Dqk]"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_V_NEW, 4, (int64_t[]){B, Snew, Hk, Dv}, 0, "[B, Snew, Hk, Dv]"));

    /* Q is passed only to be rotated: into q_rot, never in place. */
    const int has_q = fmha__t(p, FMHA_TENSOR_Q) != NULL, has_qrot = fmha__t(p, FMHA_TENSOR_Q_ROT) != NULL;
    if (has_q != has_qrot)
        return VFAIL(v, VINVALID,
                     "[rule appendkv.q] %s is set without %s; appendkv rotates q into q_rot, both or neither",
                     has_q ? "q" : "q_rot", has_q ? "q_rot" : "q");
    if (has_q && rot == 0)
        return VFAIL(v, VINVALID, "[rule appendkv.q] q is set but rotary_dim is 0; q is only read to be rotated");
    if (has_q) {
        VTRY(fmha__v_positive(v, FMHA_PARAM_SEQLEN_Q));
        VTRY(fmha__v_shape(v, FMHA_TENSOR_Q, 4, (int64_t[]){B, Sq, Hq, Dqk}, 0, "[B, Sq, Hq, Dqk]"));
        VTRY(fmha__v_shape(v, FMHA_TENSOR_Q_ROT, 4, (int64_t[]){B, Sq, Hq, Dqk}, 0, "[B, Sq, Hq, Dqk]"));
    }

    if (rot > 0) {
        if (rot % 16 != 0 || rot > Dqk)
            return VFAIL(v, VINVALID, "[rule rope.dim] rotary_dim is %lld; expected a multiple of 16 up to head_dim_qk (%lld)",
                         (long long)rot, (long long)Dqk);
        VTRY(fmha__v_require(v, FMHA_TENSOR_ROTARY_COS, "rotary_dim > 0 needs rotary_cos [max_pos, rotary_dim / 2]"));
        VTRY(fmha__v_require(v, FMHA_TENSOR_ROTARY_SIN, "rotary_dim > 0 needs rotary_sin [max_pos, rotary_dim / 2]"));
        const int64_t max_pos = fmha__t(p, FMHA_TENSOR_ROTARY_COS)->dims[0];
        VTRY(fmha__v_shape(v, FMHA_TENSOR_ROTARY_COS, 2, (int64_t[]){VANY, rot / 2}, 0, "[max_pos, rotary_dim / 2]"));
        VTRY(fmha__v_shape(v, FMHA_TENSOR_ROTARY_SIN, 2, (int64_t[]){max_pos, rot / 2}, 0,
                           "[max_pos, rotary_dim / 2], max_pos from rotary_cos"));
    } else if (fmha__t(p, FMHA_TENSOR_ROTARY_COS) || fmha__t(p, FMHA_TENSOR_ROTARY_SIN)) {
        return VFAIL(v, VINVALID, "[rule rope.dim] rotary_cos/rotary_sin are set but rotary_dim is 0; expected rotary_dim > 0");
    } else if (fmha__i(p, FMHA_PARAM_ROTARY_INTERLEAVED)) {
        return VFAIL(v, VINVALID, "[rule rope.dim] rotary_interleaved is 1 but rotary_dim is 0; expected rotary_dim > 0");
    }

    if (fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0) {
        if (fmha__t(p, FMHA_TENSOR_CACHE_BATCH_IDX))
            return VFAIL(v, VINVALID,
                         "[rule appendkv.cache_batch_idx] cache_batch_idx is set with a paged cache; the block "
                         "table already says where each sequence lives");
        return validate_paged(v);
    }
    VTRY(forbid_paged(v, "for a paged cache"));
    const fmha_tensor_desc_t *idx = fmha__t(p, FMHA_TENSOR_CACHE_BATCH_IDX);
    const int64_t rows = idx ? fmha__t(p, FMHA_TENSOR_K)->dims[0] : B;
    const int64_t cap = fmha__t(p, FMHA_TENSOR_K)->dims[1];
    VTRY(fmha__v_shape(v, FMHA_TENSOR_K, 4, (int64_t[]){rows, VANY, Hk, Dqk}, 0,
                       idx ? "[B_cache, Smax, Hk, Dqk]" : "[B, Smax, Hk, Dqk]"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_V, 4, (int64_t[]){rows, cap, Hk, Dv}, 0,
                       idx ? "[B_cache, Smax, Hk, Dv], Smax from k" : "[B, Smax, Hk, Dv], Smax from k"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_SEQLENS_KV, 1, (int64_t[]){B}, 0, "[B]"));
    VTRY(fmha__v_shape(v, FMHA_TENSOR_CACHE_BATCH_IDX, 1, (int64_t[]){B}, 0, "[B]"));
    return FMHA_STATUS_SUCCESS;
}
