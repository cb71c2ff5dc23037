/* SPDX-License-Identifier: MIT */
/*
 * fwd_case_kv.c: the KV-cache half of a forward case. From the logical K/V a case made
 * (every key of every sequence, contiguous), build what a serving engine holds: a cache
 * whose sequences live in shuffled rows (cache_batch_idx) or in shuffled pages of any
 * size, looked up through a block table or CSR page lists, with garbage in every slot no
 * sequence owns so that a stray read shows. With s_knew > 0 the last s_knew keys of
 * each sequence are not in the cache yet: an appendkv problem writes them (rotated when
 * rotary_dim > 0) before the attention runs. The naive references run ref_p, a plain
 * forward over the logical tensors, so "equals the contiguous forward" is the check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/dtype.h"
#include "fwd_case_impl.h"

#define GARBAGE 64.0f /* finite, so that a stray read shows as a wrong value, not as NaN */

typedef struct layout_info {
    int paged, hnd;
    int64_t page, pages, rows, cap; /* paged: pages; contiguous: rows x cap tokens */
    int32_t *page_list;             /* pages in assignment order */
    int64_t *first;                 /* index in page_list of each sequence's first page */
    int32_t *row_of;                /* contiguous: cache row of each sequence */
} layout_info_t;

/* Element offset of (sequence b, token j, head h, dim 0) in a contiguous cache. */
static int64_t cache_off(const layout_info_t *L, int64_t Hk, int64_t D, int64_t b, int64_t j, int64_t h)
{
    if (!L->paged) return ((L->row_of[b] * L->cap + j) * Hk + h) * D;
    int64_t pg = L->page_list[L->first[b] + j / L->page], slot = j % L->page;
    return L->hnd ? ((pg * Hk + h) * L->page + slot) * D : ((pg * L->page + slot) * Hk + h) * D;
}

/* Element offset of (b, j, h, 0) in the logical K/V (strides of the desc). */
static int64_t logical_off(const fwd_case_t *fc, const int64_t *str, int64_t b, int64_t j, int64_t h)
{
    if (fc->cfg.mode == FMHA_MODE_GROUP) return ((int64_t)fc->cu_k[b] + j) * str[0] + h * str[1];
    return b * str[0] + j * str[1] + h * str[2];
}

static void shuffle(int32_t *a, int64_t n, uint64_t *rng)
{
    for (int64_t i = 0; i < n; i++) a[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(fwd_case_next_u64(rng) % (uint64_t)(i + 1));
        int32_t t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

static fmha_status_t set_t(fmha_problem_t *p, fmha_tensor_role_t r, fmha_dtype_t dt, int rank, const int64_t *dims,
                           char *why, size_t why_len)
{
    fmha_status_t st = fmha_problem_set_tensor(p, r, dt, rank, dims, NULL);
    if (st) snprintf(why, why_len, "%s", fmha_problem_last_error(p));
    return st;
}

static int32_t *i32_buffer(buffer_t *b, size_t n)
{
    if (!fwd_case_alloc_buffer(b, FMHA_DTYPE_INT32, n ? n : 1, 0)) return NULL;
    memset(b->data, 0, b->elems * 4);
    return b->data;
}

/* cos/sin tables of REFERENCE.md's RoPE: angle pos * 10000^(-2i/rot). */
static void rope_tables(append_part_t *a, int64_t max_pos, int64_t rot)
{
    float *c = a->cos.data, *s = a->sin.data;
    for (int64_t pos = 0; pos < max_pos; pos++)
        for (int64_t i = 0; i < rot / 2; i++) {
            double ang = (double)pos * pow(10000.0, -2.0 * (double)i / (double)rot);
            c[pos * (rot / 2) + i] = (float)cos(ang);
            s[pos * (rot / 2) + i] = (float)sin(ang);
        }
}

/* Rotate row x (D dims) at pos: ref in double, low in fp32 rounded to dt. */
static void rope_row(const fwd_config_t *c, const append_part_t *a, const float *x, int64_t D, int64_t pos,
                     fmha_dtype_t dt, double *ref, double *low)
{
    const int64_t rot = c->rotary_dim, half = rot / 2;
    for (int64_t d = 0; d < D; d++) ref[d] = low[d] = x[d];
    const float *ct = a->cos.data, *st = a->sin.data;
    for (int64_t i = 0; i < half; i++) {
        const int64_t i0 = c->rotary_interleaved ? 2 * i : i, i1 = c->rotary_interleaved ? 2 * i + 1 : i + half;
        const float cf = ct[pos * half + i], sf = st[pos * half + i];
        ref[i0] = (double)x[i0] * cf - (double)x[i1] * sf;
        ref[i1] = (double)x[i0] * sf + (double)x[i1] * cf;
        low[i0] = fmha_round_to(dt, x[i0] * cf - x[i1] * sf);
        low[i1] = fmha_round_to(dt, x[i0] * sf + x[i1] * cf);
    }
}

static fmha_status_t setup_append(fwd_case_t *fc, const layout_info_t *L, const int64_t *qstr, char *why,
                                  size_t why_len);

fmha_status_t fwd_case_kv_setup(fwd_case_t *fc, char *why, size_t why_len)
{
    const fwd_config_t *c = &fc->cfg;
    const int group = c->mode == FMHA_MODE_GROUP;
    fmha_problem_t *p = fc->p;
    fmha_status_t st;
    const struct {
        fmha_param_t k;
        int64_t v;
    } params[] = {{FMHA_PARAM_NUM_SPLITS, c->num_splits},
                  {FMHA_PARAM_PAGE_SIZE, c->page_size},
                  {FMHA_PARAM_KV_LAYOUT, c->kv_layout},
                  {FMHA_PARAM_KV_LOOKUP, c->kv_lookup}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if ((st = fmha_problem_set_i64(p, params[i].k, params[i].v))) {
            snprintf(why, why_len, "%s", fmha_problem_last_error(p));
            return st;
        }
    if (c->s_knew > 0 && group) {
        snprintf(why, why_len, "appendkv (s_knew %lld) takes batch mode; expected mode 0", (long long)c->s_knew);
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    if (c->family == FMHA_FAMILY_FWD && (c->page_size || c->cache_batch_idx)) {
        snprintf(why, why_len, "family fwd reads contiguous K/V; a cache (page size %lld, cache_batch_idx %d) needs "
                 "fwd_splitkv, fwd_pagedkv or batch_prefill", (long long)c->page_size, c->cache_batch_idx);
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    /* A contiguous group-mode cache is the logical K/V itself. */
    if (group && c->page_size == 0) return FMHA_STATUS_SUCCESS;

    fc->lens = malloc(sizeof(int32_t) * (size_t)c->b);
    if (!fc->lens) return FMHA_STATUS_ALLOC_FAILED;
    for (int64_t b = 0; b < c->b; b++) {
        int64_t len = group ? (c->seqused_k ? c->seqused_k[b] : c->seqlens_k[b]) : c->seqlens_k ? c->seqlens_k[b] : c->s_k;
        if (len < c->s_knew || (!group && len > c->s_k)) {
            snprintf(why, why_len, "sequence %lld has %lld keys; expected s_knew (%lld) to s_k (%lld)", (long long)b,
                     (long long)len, (long long)c->s_knew, (long long)c->s_k);
            return FMHA_STATUS_INVALID_ARGUMENT;
        }
        fc->lens[b] = (int32_t)len;
    }
    fc->cached = 1;

    /* Where each sequence lives. */
    layout_info_t L;
    memset(&L, 0, sizeof L);
    uint64_t rng = c->seed ^ 0x5DEECE66Dull;
    L.paged = c->page_size > 0, L.hnd = c->kv_layout == FMHA_KV_LAYOUT_HND, L.page = c->page_size;
    int64_t max_pages = 1, nnz = 0;
    if (L.paged) {
        L.first = malloc(sizeof(int64_t) * (size_t)c->b);
        if (!L.first) return FMHA_STATUS_ALLOC_FAILED;
        for (int64_t b = 0; b < c->b; b++) {
            int64_t np = (fc->lens[b] + L.page - 1) / L.page;
            L.first[b] = nnz;
            nnz += np;
            if (np > max_pages) max_pages = np;
        }
        L.pages = nnz + 3; /* spare pages nobody owns */
        L.page_list = malloc(sizeof(int32_t) * (size_t)L.pages);
        if (!L.page_list) return FMHA_STATUS_ALLOC_FAILED;
        shuffle(L.page_list, L.pages, &rng);
    } else {
        L.rows = c->cache_batch_idx ? c->b + 2 : c->b;
        L.cap = c->s_k;
        L.row_of = malloc(sizeof(int32_t) * (size_t)L.rows);
        if (!L.row_of) return FMHA_STATUS_ALLOC_FAILED;
        if (c->cache_batch_idx) shuffle(L.row_of, L.rows, &rng);
        else
            for (int64_t b = 0; b < L.rows; b++) L.row_of[b] = (int32_t)b;
    }

    /* The logical K/V move aside (ref_p reads them); the problem gets the cache. */
    int64_t lk_dims[2][FMHA_MAX_RANK], lk_str[2][FMHA_MAX_RANK], qstr[FMHA_MAX_RANK], qdims[FMHA_MAX_RANK];
    int lk_rank[2], qrank;
    fmha_dtype_t dt;
    fmha_problem_get_tensor(p, FMHA_TENSOR_K, &dt, &lk_rank[0], lk_dims[0], lk_str[0]);
    fmha_problem_get_tensor(p, FMHA_TENSOR_V, &dt, &lk_rank[1], lk_dims[1], lk_str[1]);
    fmha_problem_get_tensor(p, FMHA_TENSOR_Q, &dt, &qrank, qdims, qstr);
    const int64_t Dk[2] = {c->d, c->d_v};
    int64_t cdims[2][4];
    for (int w = 0; w < 2; w++) {
        int64_t *d = cdims[w];
        if (L.paged) {
            d[0] = L.pages, d[1] = L.hnd ? c->h_k : L.page, d[2] = L.hnd ? L.page : c->h_k, d[3] = Dk[w];
        } else {
            d[0] = L.rows, d[1] = L.cap, d[2] = c->h_k, d[3] = Dk[w];
        }
        if ((st = set_t(p, w ? FMHA_TENSOR_V : FMHA_TENSOR_K, c->dtype, 4, d, why, why_len))) goto out;
    }
    const int64_t B = c->b;
    if (group) { /* a paged cache gives key lengths through its lookup */
        fmha_problem_clear_tensor(p, FMHA_TENSOR_CU_SEQLENS_KV);
        fmha_problem_clear_tensor(p, FMHA_TENSOR_SEQUSED_KV);
    }
    if (!L.paged || c->kv_lookup == FMHA_KV_LOOKUP_BLOCK_TABLE)
        if ((st = set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, why, why_len))) goto out;
    if (!L.paged && c->cache_batch_idx &&
        (st = set_t(p, FMHA_TENSOR_CACHE_BATCH_IDX, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, why, why_len)))
        goto out;
    if (L.paged && c->kv_lookup == FMHA_KV_LOOKUP_BLOCK_TABLE &&
        (st = set_t(p, FMHA_TENSOR_BLOCK_TABLE, FMHA_DTYPE_INT32, 2, (int64_t[]){B, max_pages + 1}, why, why_len)))
        goto out;
    if (L.paged && c->kv_lookup == FMHA_KV_LOOKUP_CSR &&
        ((st = set_t(p, FMHA_TENSOR_KV_INDPTR, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1}, why, why_len)) ||
         (st = set_t(p, FMHA_TENSOR_KV_INDICES, FMHA_DTYPE_INT32, 1, (int64_t[]){nnz}, why, why_len)) ||
         (st = set_t(p, FMHA_TENSOR_KV_LAST_PAGE_LEN, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, why, why_len))))
        goto out;
    if (c->describe_only) { /* the append's problem is described too (explain, bench) */
        if (c->s_knew > 0) st = setup_append(fc, &L, qstr, why, why_len);
        goto out;
    }

    fc->lk = fc->buf[FMHA_TENSOR_K], fc->lv = fc->buf[FMHA_TENSOR_V];
    memset(&fc->buf[FMHA_TENSOR_K], 0, sizeof(buffer_t));
    memset(&fc->buf[FMHA_TENSOR_V], 0, sizeof(buffer_t));
    for (int w = 0; w < 2; w++) {
        buffer_t *cb = &fc->buf[w ? FMHA_TENSOR_V : FMHA_TENSOR_K];
        size_t n = (size_t)(cdims[w][0] * cdims[w][1] * cdims[w][2] * cdims[w][3]);
        if (!fwd_case_alloc_buffer(cb, c->dtype, n ? n : 1, 0)) {
            st = FMHA_STATUS_ALLOC_FAILED;
            goto out;
        }
        for (size_t i = 0; i < cb->elems; i++) fmha_store_f32(cb->data, cb->dt, (int64_t)i, GARBAGE);
        const buffer_t *lb = w ? &fc->lv : &fc->lk;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < fc->lens[b] - c->s_knew; j++)
                for (int64_t h = 0; h < c->h_k; h++) {
                    int64_t so = logical_off(fc, lk_str[w], b, j, h), d0 = cache_off(&L, c->h_k, Dk[w], b, j, h);
                    for (int64_t d = 0; d < Dk[w]; d++)
                        fmha_store_f32(cb->data, cb->dt, d0 + d, fmha_load_f32(lb->data, lb->dt, so + d * lk_str[w][lk_rank[w] - 1]));
                }
    }
    /* Lookups. Block-table columns past a sequence's pages hold -1: never read. */
    int32_t *x;
    if (fmha_problem_has_tensor(p, FMHA_TENSOR_SEQLENS_KV)) {
        if (!(x = i32_buffer(&fc->buf[FMHA_TENSOR_SEQLENS_KV], (size_t)B))) goto oom;
        memcpy(x, fc->lens, sizeof(int32_t) * (size_t)B);
    }
    if (fmha_problem_has_tensor(p, FMHA_TENSOR_CACHE_BATCH_IDX)) {
        if (!(x = i32_buffer(&fc->buf[FMHA_TENSOR_CACHE_BATCH_IDX], (size_t)B))) goto oom;
        memcpy(x, L.row_of, sizeof(int32_t) * (size_t)B);
    }
    if (fmha_problem_has_tensor(p, FMHA_TENSOR_BLOCK_TABLE)) {
        if (!(x = i32_buffer(&fc->buf[FMHA_TENSOR_BLOCK_TABLE], (size_t)(B * (max_pages + 1))))) goto oom;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i <= max_pages; i++) {
                int64_t np = (fc->lens[b] + L.page - 1) / L.page;
                x[b * (max_pages + 1) + i] = i < np ? L.page_list[L.first[b] + i] : -1;
            }
    }
    if (fmha_problem_has_tensor(p, FMHA_TENSOR_KV_INDPTR)) {
        int32_t *ptr = i32_buffer(&fc->buf[FMHA_TENSOR_KV_INDPTR], (size_t)B + 1);
        int32_t *idx = i32_buffer(&fc->buf[FMHA_TENSOR_KV_INDICES], (size_t)nnz);
        int32_t *last = i32_buffer(&fc->buf[FMHA_TENSOR_KV_LAST_PAGE_LEN], (size_t)B);
        if (!ptr || !idx || !last) goto oom;
        for (int64_t b = 0; b < B; b++) {
            int64_t np = (fc->lens[b] + L.page - 1) / L.page;
            ptr[b + 1] = (int32_t)(L.first[b] + np);
            last[b] = np ? (int32_t)(fc->lens[b] - L.page * (np - 1)) : 0;
        }
        memcpy(idx, L.page_list, sizeof(int32_t) * (size_t)nnz);
    }

    /* ref_p: the forward over the logical tensors. */
    if ((st = fmha_problem_clone(p, &fc->ref_p))) goto out;
    fmha_problem_set_i64(fc->ref_p, FMHA_PARAM_FAMILY, FMHA_FAMILY_FWD);
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) fmha_problem_set_i64(fc->ref_p, params[i].k, 0);
    const fmha_tensor_role_t drop[] = {FMHA_TENSOR_BLOCK_TABLE, FMHA_TENSOR_KV_INDPTR, FMHA_TENSOR_KV_INDICES,
                                       FMHA_TENSOR_KV_LAST_PAGE_LEN, FMHA_TENSOR_CACHE_BATCH_IDX};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) fmha_problem_clear_tensor(fc->ref_p, drop[i]);
    fmha_problem_set_tensor(fc->ref_p, FMHA_TENSOR_K, c->dtype, lk_rank[0], lk_dims[0], lk_str[0]);
    fmha_problem_set_tensor(fc->ref_p, FMHA_TENSOR_V, c->dtype, lk_rank[1], lk_dims[1], lk_str[1]);
    if (group) {
        fmha_problem_set_tensor(fc->ref_p, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1}, NULL);
        if (fc->used_k) fmha_problem_set_tensor(fc->ref_p, FMHA_TENSOR_SEQUSED_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, NULL);
    } else {
        fmha_problem_set_tensor(fc->ref_p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, NULL);
    }
    for (int r = 0; r < NROLES; r++) fc->ref_data[r] = fwd_case_role_data(fc, r);
    fc->ref_data[FMHA_TENSOR_K] = fc->lk.data;
    fc->ref_data[FMHA_TENSOR_V] = fc->lv.data;
    fc->ref_data[FMHA_TENSOR_CU_SEQLENS_KV] = fc->cu_k;
    fc->ref_data[FMHA_TENSOR_SEQUSED_KV] = fc->used_k;
    fc->ref_data[FMHA_TENSOR_SEQLENS_KV] = group ? NULL : fc->lens;
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) fc->ref_data[drop[i]] = NULL;

    if (c->s_knew > 0) st = setup_append(fc, &L, qstr, why, why_len);
    goto out;
oom:
    st = FMHA_STATUS_ALLOC_FAILED;
out:
    free(L.first);
    free(L.page_list);
    free(L.row_of);
    return st;
}

/* The appendkv problem: the cache holds keys [0, len - s_knew) of each sequence; k_new
 * and v_new hold the rest, and the logical K (and Q) become their rotations. */
static fmha_status_t setup_append(fwd_case_t *fc, const layout_info_t *L, const int64_t *qstr, char *why,
                                  size_t why_len)
{
    const fwd_config_t *c = &fc->cfg;
    append_part_t *a = &fc->app;
    const int64_t B = c->b, Sn = c->s_knew, Hk = c->h_k, rot = c->rotary_dim;
    fmha_status_t st;
    if ((st = fmha_problem_create(&a->p))) return st;
    fmha_problem_t *ap = a->p;
    const struct {
        fmha_param_t k;
        int64_t v;
    } params[] = {{FMHA_PARAM_FAMILY, FMHA_FAMILY_APPENDKV}, {FMHA_PARAM_BATCH, B},
                  {FMHA_PARAM_NUM_HEADS_Q, c->h},            {FMHA_PARAM_NUM_HEADS_KV, Hk},
                  {FMHA_PARAM_HEAD_DIM_QK, c->d},            {FMHA_PARAM_HEAD_DIM_V, c->d_v},
                  {FMHA_PARAM_SEQLEN_Q, c->s},               {FMHA_PARAM_SEQLEN_KV, c->s_k},
                  {FMHA_PARAM_SEQLEN_KNEW, Sn},              {FMHA_PARAM_ROTARY_DIM, rot},
                  {FMHA_PARAM_ROTARY_INTERLEAVED, c->rotary_interleaved},
                  {FMHA_PARAM_PAGE_SIZE, c->page_size},      {FMHA_PARAM_KV_LAYOUT, c->kv_layout},
                  {FMHA_PARAM_KV_LOOKUP, c->kv_lookup}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if ((st = fmha_problem_set_i64(ap, params[i].k, params[i].v))) goto param_fail;
    if ((st = fmha_problem_set_mask(ap, c->mask ? c->mask : "0"))) goto param_fail;
    /* the cache and its lookup; CSR lists describe the cache after the append, so the
     * attention's lists serve it as they are */
    const fmha_tensor_role_t shared[] = {FMHA_TENSOR_K,          FMHA_TENSOR_V,          FMHA_TENSOR_BLOCK_TABLE,
                                         FMHA_TENSOR_CACHE_BATCH_IDX, FMHA_TENSOR_KV_INDPTR, FMHA_TENSOR_KV_INDICES,
                                         FMHA_TENSOR_KV_LAST_PAGE_LEN};
    const int csr = c->page_size > 0 && c->kv_lookup == FMHA_KV_LOOKUP_CSR;
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        fmha_dtype_t dt;
        int rank;
        int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
        if (fmha_problem_get_tensor(fc->p, shared[i], &dt, &rank, dims, str)) continue;
        fmha_problem_set_tensor(ap, shared[i], dt, rank, dims, str);
        a->data[shared[i]] = fc->buf[shared[i]].data;
    }
    const int64_t max_pos = c->s_k + c->s + 1;
    if ((st = set_t(ap, FMHA_TENSOR_K_NEW, c->dtype, 4, (int64_t[]){B, Sn, Hk, c->d}, why, why_len)) ||
        (st = set_t(ap, FMHA_TENSOR_V_NEW, c->dtype, 4, (int64_t[]){B, Sn, Hk, c->d_v}, why, why_len)) ||
        (!csr && (st = set_t(ap, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, why, why_len))))
        return st;
    if (rot > 0) {
        fmha_dtype_t dt;
        int rank;
        int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
        fmha_problem_get_tensor(fc->p, FMHA_TENSOR_Q, &dt, &rank, dims, str);
        if ((st = set_t(ap, FMHA_TENSOR_ROTARY_COS, FMHA_DTYPE_FP32, 2, (int64_t[]){max_pos, rot / 2}, why, why_len)) ||
            (st = set_t(ap, FMHA_TENSOR_ROTARY_SIN, FMHA_DTYPE_FP32, 2, (int64_t[]){max_pos, rot / 2}, why, why_len)))
            return st;
        fmha_problem_set_tensor(ap, FMHA_TENSOR_Q, dt, rank, dims, str);
        fmha_problem_set_tensor(ap, FMHA_TENSOR_Q_ROT, dt, rank, dims, str);
    }
    if (c->describe_only) return FMHA_STATUS_SUCCESS;

    if (!fwd_case_alloc_buffer(&a->k_new, c->dtype, (size_t)(B * Sn * Hk * c->d), 0) ||
        !fwd_case_alloc_buffer(&a->v_new, c->dtype, (size_t)(B * Sn * Hk * c->d_v), 0) ||
        !i32_buffer(&a->lens_old, (size_t)B))
        return FMHA_STATUS_ALLOC_FAILED;
    int32_t *old = a->lens_old.data;
    for (int64_t b = 0; b < B; b++) old[b] = (int32_t)(fc->lens[b] - Sn);
    a->data[FMHA_TENSOR_K_NEW] = a->k_new.data;
    a->data[FMHA_TENSOR_V_NEW] = a->v_new.data;
    if (!csr) a->data[FMHA_TENSOR_SEQLENS_KV] = a->lens_old.data;

    /* k_new/v_new from the logical rows; the logical K becomes the rotation. */
    const size_t nk = (size_t)(B * Sn * Hk * c->d);
    a->k_ref = malloc(sizeof(double) * (nk + 1));
    a->k_low = malloc(sizeof(double) * (nk + 1));
    float *row = malloc(sizeof(float) * (size_t)(c->d > c->d_v ? c->d : c->d_v));
    if (!a->k_ref || !a->k_low || !row) {
        free(row);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    if (rot > 0) {
        if (!fwd_case_alloc_buffer(&a->cos, FMHA_DTYPE_FP32, (size_t)(max_pos * rot / 2), 0) ||
            !fwd_case_alloc_buffer(&a->sin, FMHA_DTYPE_FP32, (size_t)(max_pos * rot / 2), 0)) {
            free(row);
            return FMHA_STATUS_ALLOC_FAILED;
        }
        rope_tables(a, max_pos, rot);
        a->data[FMHA_TENSOR_ROTARY_COS] = a->cos.data;
        a->data[FMHA_TENSOR_ROTARY_SIN] = a->sin.data;
    }
    int64_t kstr[FMHA_MAX_RANK], vstr[FMHA_MAX_RANK], dims[FMHA_MAX_RANK];
    fmha_dtype_t dt;
    int rank;
    fmha_problem_get_tensor(fc->ref_p, FMHA_TENSOR_K, &dt, &rank, dims, kstr);
    fmha_problem_get_tensor(fc->ref_p, FMHA_TENSOR_V, &dt, &rank, dims, vstr);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < Sn; t++)
            for (int64_t h = 0; h < Hk; h++) {
                const int64_t j = old[b] + t, at = ((b * Sn + t) * Hk + h);
                const int64_t ko = logical_off(fc, kstr, b, j, h), vo = logical_off(fc, vstr, b, j, h);
                for (int64_t d = 0; d < c->d; d++) {
                    row[d] = fmha_load_f32(fc->lk.data, c->dtype, ko + d);
                    fmha_store_f32(a->k_new.data, c->dtype, at * c->d + d, row[d]);
                }
                rope_row(c, a, row, c->d, j, c->dtype, a->k_ref + at * c->d, a->k_low + at * c->d);
                for (int64_t d = 0; d < c->d; d++)
                    fmha_store_f32(fc->lk.data, c->dtype, ko + d, fmha_round_to(c->dtype, (float)a->k_ref[at * c->d + d]));
                for (int64_t d = 0; d < c->d_v; d++)
                    fmha_store_f32(a->v_new.data, c->dtype, at * c->d_v + d, fmha_load_f32(fc->lv.data, c->dtype, vo + d));
            }

    /* q: appendkv reads it from q_in and writes q_rot, which the attention reads. */
    if (rot > 0) {
        buffer_t *q = &fc->buf[FMHA_TENSOR_Q];
        a->q_in = *q;
        memset(q, 0, sizeof *q);
        const size_t nq = (size_t)(B * c->s * c->h * c->d);
        a->q_ref = malloc(sizeof(double) * (nq + 1));
        a->q_low = malloc(sizeof(double) * (nq + 1));
        if (!fwd_case_alloc_buffer(q, c->dtype, a->q_in.elems, 0) ||
            !fwd_case_alloc_buffer(&fc->lq, c->dtype, a->q_in.elems, 0) || !a->q_ref || !a->q_low) {
            free(row);
            return FMHA_STATUS_ALLOC_FAILED;
        }
        memcpy(fc->lq.data, a->q_in.data, a->q_in.elems * fmha_dtype_size(c->dtype));
        fmha_mask_t m;
        fmha_mask_parse(c->mask ? c->mask : "0", &m, NULL, 0);
        const int per_row = m.left >= 0 || m.right >= 0 || m.sink_tokens > 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < c->s; i++)
                for (int64_t h = 0; h < c->h; h++) {
                    const int64_t qo = b * qstr[0] + i * qstr[1] + h * qstr[2], at = (b * c->s + i) * c->h + h;
                    for (int64_t d = 0; d < c->d; d++) row[d] = fmha_load_f32(a->q_in.data, c->dtype, qo + d);
                    rope_row(c, a, row, c->d, old[b] + (per_row ? i : 0), c->dtype, a->q_ref + at * c->d,
                             a->q_low + at * c->d);
                    for (int64_t d = 0; d < c->d; d++)
                        fmha_store_f32(fc->lq.data, c->dtype, qo + d, fmha_round_to(c->dtype, (float)a->q_ref[at * c->d + d]));
                }
        a->data[FMHA_TENSOR_Q] = a->q_in.data;
        a->data[FMHA_TENSOR_Q_ROT] = q->data;
        fc->ref_data[FMHA_TENSOR_Q] = fc->lq.data;
    } else {
        for (int64_t i = 0; i < (int64_t)nk; i++) a->k_ref[i] = a->k_low[i] = fmha_load_f32(a->k_new.data, c->dtype, i);
    }
    free(row);

    /* The cache before the append: the new slots poisoned. */
    for (int w = 0; w < 2; w++) {
        buffer_t *cb = &fc->buf[w ? FMHA_TENSOR_V : FMHA_TENSOR_K];
        const int64_t D = w ? c->d_v : c->d;
        if (!(a->slot[w] = malloc(sizeof(int64_t) * (size_t)(B * Sn * Hk)))) return FMHA_STATUS_ALLOC_FAILED;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < Sn; t++)
                for (int64_t h = 0; h < Hk; h++) {
                    const int64_t o = cache_off(L, Hk, D, b, old[b] + t, h);
                    a->slot[w][(b * Sn + t) * Hk + h] = o;
                    for (int64_t d = 0; d < D; d++) fmha_store_f32(cb->data, cb->dt, o + d, NAN);
                }
        size_t bytes = cb->elems * fmha_dtype_size(cb->dt);
        if (!(a->cache_init[w] = malloc(bytes))) return FMHA_STATUS_ALLOC_FAILED;
        memcpy(a->cache_init[w], cb->data, bytes);
    }
    return FMHA_STATUS_SUCCESS;
param_fail:
    snprintf(why, why_len, "%s", fmha_problem_last_error(ap));
    return st;
}

void fwd_case_kv_destroy(fwd_case_t *fc)
{
    append_part_t *a = &fc->app;
    fmha_problem_destroy(a->p);
    buffer_t *bufs[] = {&a->k_new, &a->v_new, &a->cos, &a->sin, &a->q_in, &a->lens_old, &fc->lk, &fc->lv, &fc->lq};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) fwd_case_free_buffer(bufs[i]);
    for (int w = 0; w < 2; w++) free(a->cache_init[w]), free(a->slot[w]);
    free(a->k_ref), free(a->k_low), free(a->q_ref), free(a->q_low);
    fmha_problem_destroy(fc->ref_p);
    free(fc->lens);
}

int fwd_case_kv_check(const fwd_case_t *fc, fwd_check_t *r)
{
    const fwd_config_t *c = &fc->cfg;
    const append_part_t *a = &fc->app;
    const int64_t B = c->b, Sn = c->s_knew, Hk = c->h_k, rows = B * Sn * Hk;
    const buffer_t *ck = &fc->buf[FMHA_TENSOR_K], *cv = &fc->buf[FMHA_TENSOR_V];
    size_t n = (size_t)(rows * c->d), nq = (size_t)(B * c->s * c->h * c->d);
    double *got = malloc(sizeof(double) * ((n > nq ? n : nq) + 1));
    unsigned char *fresh[2] = {calloc(ck->elems + 1, 1), calloc(cv->elems + 1, 1)};
    if (!got || !fresh[0] || !fresh[1]) {
        free(got), free(fresh[0]), free(fresh[1]);
        return -1;
    }
    for (int64_t x = 0; x < rows; x++) {
        for (int64_t d = 0; d < c->d; d++) {
            got[x * c->d + d] = fmha_load_f32(ck->data, ck->dt, a->slot[0][x] + d);
            fresh[0][a->slot[0][x] + d] = 1;
            if (d >= c->rotary_dim) { /* a plain copy */
                float want = fmha_load_f32(a->k_new.data, c->dtype, x * c->d + d), have = (float)got[x * c->d + d];
                r->k_plain_mismatches += memcmp(&want, &have, sizeof want) != 0;
            }
        }
        for (int64_t d = 0; d < c->d_v; d++) {
            float want = fmha_load_f32(a->v_new.data, c->dtype, x * c->d_v + d);
            float have = fmha_load_f32(cv->data, cv->dt, a->slot[1][x] + d);
            r->v_new_mismatches += memcmp(&want, &have, sizeof want) != 0;
            fresh[1][a->slot[1][x] + d] = 1;
        }
    }
    r->k_new = acc_compare(got, a->k_ref, a->k_low, n, 2.0);
    /* every slot the append does not own keeps its bytes */
    for (int w = 0; w < 2; w++) {
        const buffer_t *cb = w ? cv : ck;
        const size_t es = fmha_dtype_size(cb->dt);
        for (size_t i = 0; i < cb->elems; i++)
            if (!fresh[w][i]) r->cache_clobbered += memcmp((char *)cb->data + i * es, (char *)a->cache_init[w] + i * es, es) != 0;
    }
    r->q_rot.pass = 1;
    if (a->q_in.data) {
        fmha_dtype_t dt;
        int rank;
        int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
        fmha_problem_get_tensor(fc->p, FMHA_TENSOR_Q, &dt, &rank, dims, str);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < c->s; i++)
                for (int64_t h = 0; h < c->h; h++)
                    for (int64_t d = 0; d < c->d; d++)
                        got[((b * c->s + i) * c->h + h) * c->d + d] =
                            fmha_load_f32(fc->buf[FMHA_TENSOR_Q].data, dt, b * str[0] + i * str[1] + h * str[2] + d * str[3]);
        r->q_rot = acc_compare(got, a->q_ref, a->q_low, nq, 2.0);
    }
    free(got), free(fresh[0]), free(fresh[1]);
    return 0;
}
