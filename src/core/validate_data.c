/* SPDX-License-Identifier: MIT */
/*
 * validate_data.c: the rules that depend on tensor contents (sequence lengths, page
 * indices, cache rows, rotary positions). A host backend checks them at execute, before
 * any read through them; every later index computed from these tensors is then known to
 * be in bounds. A device backend cannot see the data without a copy: its kernels bound
 * every access whatever the data say (docs/semantics.md), and with check_index_data the
 * core copies the index tensors to the host and applies the same rules
 * (fmha__validate_device_data).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

#define FAILD(...)                                        \
    do {                                                  \
        snprintf(msg, sizeof msg, __VA_ARGS__);           \
        fmha__copy_msg(err, err_len, msg);                \
        return FMHA_STATUS_INVALID_PROBLEM;               \
    } while (0)

static fmha_status_t check_cu_seqlens(const fmha_problem_t *p, void *const *data, char *err, size_t err_len)
{
    char msg[FMHA_ERR_LEN];
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH);
    const int32_t *cu_q = data[FMHA_TENSOR_CU_SEQLENS_Q], *cu_k = data[FMHA_TENSOR_CU_SEQLENS_KV];
    const int32_t *used_k = data[FMHA_TENSOR_SEQUSED_KV];
    const struct {
        const int32_t *cu;
        fmha_tensor_role_t tokens_of;
        const char *name, *max_name;
        int64_t max;
    } sides[2] = {{cu_q, FMHA_TENSOR_Q, "cu_seqlens_q", "seqlen_q (max_seqlen_q)", fmha__i(p, FMHA_PARAM_SEQLEN_Q)},
                  {cu_k, FMHA_TENSOR_K, "cu_seqlens_kv", "seqlen_kv (max_seqlen_k)", fmha__i(p, FMHA_PARAM_SEQLEN_KV)}};
    for (int s = 0; s < 2; s++) {
        const int32_t *cu = sides[s].cu;
        if (!cu) continue; /* a paged family's keys have no cu_seqlens_kv */
        const int64_t total = fmha__t(p, sides[s].tokens_of)->dims[0];
        if (cu[0] != 0) FAILD("[rule varlen.cu_seqlens] %s[0] is %d; expected 0", sides[s].name, cu[0]);
        /* Monotonic and in bounds first, so that every later read through cu_seqlens is
         * known to be inside the tensors. */
        for (int64_t b = 0; b < B; b++)
            if (cu[b + 1] < cu[b])
                FAILD("[rule varlen.cu_seqlens] %s is decreasing at %lld (%d then %d); expected non-decreasing",
                      sides[s].name, (long long)b, cu[b], cu[b + 1]);
        if (cu[B] > total)
            FAILD("[rule varlen.cu_seqlens] %s[%lld] = %d exceeds the %lld tokens of the tensor", sides[s].name,
                  (long long)B, cu[B], (long long)total);
        for (int64_t b = 0; b < B; b++) {
            int64_t len = (int64_t)cu[b + 1] - cu[b];
            if (len > sides[s].max)
                FAILD("[rule varlen.max_seqlen] sequence %lld has length %lld in %s; expected <= %s = %lld",
                      (long long)b, (long long)len, sides[s].name, sides[s].max_name, (long long)sides[s].max);
        }
    }
    if (used_k)
        for (int64_t b = 0; b < B; b++) {
            int64_t alloc = (int64_t)cu_k[b + 1] - cu_k[b];
            if (used_k[b] < 0 || used_k[b] > alloc)
                FAILD("[rule varlen.seqused] seqused_kv[%lld] = %d; expected 0..%lld (the allocated length from "
                      "cu_seqlens_kv)",
                      (long long)b, used_k[b], (long long)alloc);
        }
    return FMHA_STATUS_SUCCESS;
}

/* Page indices of pages [first, last) of block-table row b. */
static fmha_status_t check_table_row(const fmha_problem_t *p, const int32_t *table, int64_t b, int64_t first,
                                     int64_t last, char *err, size_t err_len)
{
    char msg[FMHA_ERR_LEN];
    const fmha_tensor_desc_t *t = fmha__t(p, FMHA_TENSOR_BLOCK_TABLE);
    const int64_t pages = fmha__t(p, FMHA_TENSOR_K)->dims[0];
    for (int64_t i = first; i < last; i++) {
        int32_t pg = table[b * t->strides[0] + i * t->strides[1]];
        if (pg < 0 || pg >= pages)
            FAILD("[rule paged.index] block_table[%lld][%lld] = %d; expected a page index in [0, %lld)", (long long)b,
                  (long long)i, pg, (long long)pages);
    }
    return FMHA_STATUS_SUCCESS;
}

/* Rotary positions [len - ..., ...) of appendkv: each sequence rotates its new keys at
 * base + t and q at base + i (per row) or base, base being its length before the append;
 * the tables must hold them. */
static fmha_status_t check_rope_positions(const fmha_problem_t *p, int64_t b, int64_t base, char *err, size_t err_len)
{
    char msg[FMHA_ERR_LEN];
    if (fmha__i(p, FMHA_PARAM_ROTARY_DIM) <= 0) return FMHA_STATUS_SUCCESS;
    const int64_t Snew = fmha__i(p, FMHA_PARAM_SEQLEN_KNEW);
    const int64_t max_pos = fmha__t(p, FMHA_TENSOR_ROTARY_COS)->dims[0];
    fmha_mask_t m = fmha__problem_mask(p);
    const int per_row = m.left >= 0 || m.right >= 0 || m.sink_tokens > 0;
    const int64_t sq = fmha__t(p, FMHA_TENSOR_Q) ? fmha__i(p, FMHA_PARAM_SEQLEN_Q) : 0;
    const int64_t q_span = sq == 0 ? 0 : per_row ? sq : 1;
    const int64_t need = base + (Snew > q_span ? Snew : q_span);
    if (need > max_pos)
        FAILD("[rule rope.positions] sequence %lld rotates positions up to %lld; rotary_cos/sin hold %lld positions",
              (long long)b, (long long)(need - 1), (long long)max_pos);
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t check_csr(const fmha_problem_t *p, void *const *data, int append, char *err, size_t err_len)
{
    char msg[FMHA_ERR_LEN];
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), page = fmha__i(p, FMHA_PARAM_PAGE_SIZE);
    const int64_t Sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV), pages = fmha__t(p, FMHA_TENSOR_K)->dims[0];
    const int32_t *indptr = data[FMHA_TENSOR_KV_INDPTR], *indices = data[FMHA_TENSOR_KV_INDICES];
    const int32_t *last = data[FMHA_TENSOR_KV_LAST_PAGE_LEN];
    const int64_t s_ptr = fmha__t(p, FMHA_TENSOR_KV_INDPTR)->strides[0];
    const int64_t s_idx = fmha__t(p, FMHA_TENSOR_KV_INDICES)->strides[0];
    const int64_t s_last = fmha__t(p, FMHA_TENSOR_KV_LAST_PAGE_LEN)->strides[0];
    const int64_t nnz = fmha__t(p, FMHA_TENSOR_KV_INDICES)->dims[0];
    if (indptr[0] < 0) FAILD("[rule paged.csr] kv_indptr[0] is %d; expected >= 0", indptr[0]);
    for (int64_t b = 0; b < B; b++) {
        const int64_t lo = indptr[b * s_ptr], hi = indptr[(b + 1) * s_ptr];
        if (hi < lo)
            FAILD("[rule paged.csr] kv_indptr is decreasing at %lld (%lld then %lld); expected non-decreasing",
                  (long long)b, (long long)lo, (long long)hi);
        if (hi > nnz)
            FAILD("[rule paged.csr] kv_indptr[%lld] = %lld exceeds the %lld entries of kv_indices", (long long)(b + 1),
                  (long long)hi, (long long)nnz);
        const int64_t lp = last[b * s_last];
        if (hi > lo ? (lp < 1 || lp > page) : lp != 0)
            FAILD("[rule paged.csr] kv_last_page_len[%lld] = %lld; expected %s", (long long)b, (long long)lp,
                  hi > lo ? "1..page_size for a sequence with pages" : "0 for a sequence without pages");
        const int64_t len = hi > lo ? page * (hi - lo - 1) + lp : 0;
        const int64_t Snew = append ? fmha__i(p, FMHA_PARAM_SEQLEN_KNEW) : 0;
        if (append && len < Snew)
            FAILD("[rule appendkv.capacity] sequence %lld holds %lld tokens in its CSR pages and appends %lld; the "
                  "lists describe the cache after the append, so they need at least the appended tokens",
                  (long long)b, (long long)len, (long long)Snew);
        if (append) {
            fmha_status_t st = check_rope_positions(p, b, len - Snew, err, err_len);
            if (st) return st;
        }
        if (len > Sk)
            FAILD("[rule paged.seqlen] sequence %lld holds %lld tokens in its pages; expected <= seqlen_kv "
                  "(max_seqlen_k) = %lld",
                  (long long)b, (long long)len, (long long)Sk);
        for (int64_t i = lo; i < hi; i++)
            if (indices[i * s_idx] < 0 || indices[i * s_idx] >= pages)
                FAILD("[rule paged.index] kv_indices[%lld] = %d (sequence %lld); expected a page index in [0, %lld)",
                      (long long)i, indices[i * s_idx], (long long)b, (long long)pages);
    }
    return FMHA_STATUS_SUCCESS;
}

/* Lengths, rows and pages of a cache addressed by seqlens_kv (contiguous or block table). */
static fmha_status_t check_seqlens_kv(const fmha_problem_t *p, void *const *data, int append, char *err,
                                      size_t err_len)
{
    char msg[FMHA_ERR_LEN];
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), page = fmha__i(p, FMHA_PARAM_PAGE_SIZE);
    const int64_t Snew = append ? fmha__i(p, FMHA_PARAM_SEQLEN_KNEW) : 0;
    const fmha_tensor_desc_t *k = fmha__t(p, FMHA_TENSOR_K), *tt = fmha__t(p, FMHA_TENSOR_BLOCK_TABLE);
    const int64_t cap = page > 0 ? page * tt->dims[1] : k->dims[1];
    const char *cap_text = page > 0 ? "max_pages * page_size" : "the cache's sequence dim";
    const int32_t *lens = data[FMHA_TENSOR_SEQLENS_KV];
    const int64_t s_len = fmha__t(p, FMHA_TENSOR_SEQLENS_KV)->strides[0];
    const int32_t *idx = data[FMHA_TENSOR_CACHE_BATCH_IDX];
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = lens[b * s_len];
        if (len < 0) FAILD("[rule cache.seqlens] seqlens_kv[%lld] = %lld; expected >= 0", (long long)b, (long long)len);
        if (append && len + Snew > cap)
            FAILD("[rule appendkv.capacity] sequence %lld has %lld tokens and appends %lld; the cache holds %lld "
                  "(%s), a write past it is refused",
                  (long long)b, (long long)len, (long long)Snew, (long long)cap, cap_text);
        if (!append && len > cap)
            FAILD("[rule cache.seqlens] seqlens_kv[%lld] = %lld exceeds the cache's %lld tokens (%s)", (long long)b,
                  (long long)len, (long long)cap, cap_text);
        if (!append && len > fmha__i(p, FMHA_PARAM_SEQLEN_KV))
            FAILD("[rule cache.seqlens] seqlens_kv[%lld] = %lld; expected <= seqlen_kv (max_seqlen_k) = %lld",
                  (long long)b, (long long)len, (long long)fmha__i(p, FMHA_PARAM_SEQLEN_KV));
        if (page > 0) {
            const int64_t first = append ? len / page : 0, last = (len + Snew + page - 1) / page;
            fmha_status_t st = check_table_row(p, data[FMHA_TENSOR_BLOCK_TABLE], b, first, last, err, err_len);
            if (st) return st;
        }
        if (idx) {
            const int64_t s_idx = fmha__t(p, FMHA_TENSOR_CACHE_BATCH_IDX)->strides[0];
            const int64_t row = idx[b * s_idx];
            if (row < 0 || row >= k->dims[0])
                FAILD("[rule cache.batch_idx] cache_batch_idx[%lld] = %lld; expected a cache row in [0, %lld)",
                      (long long)b, (long long)row, (long long)k->dims[0]);
            for (int64_t c = 0; append && c < b; c++)
                if (idx[c * s_idx] == row)
                    FAILD("[rule cache.batch_idx] cache_batch_idx[%lld] and [%lld] are both %lld; appendkv needs "
                          "distinct rows (two sequences would write the same cache row)",
                          (long long)c, (long long)b, (long long)row);
        }
    }
    for (int64_t b = 0; append && b < B; b++) {
        fmha_status_t st = check_rope_positions(p, b, lens[b * s_len], err, err_len);
        if (st) return st;
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__validate_data(const fmha_problem_t *p, void *const *data, char *err, size_t err_len)
{
    const fmha_family_t fam = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    fmha_status_t st = check_cu_seqlens(p, data, err, err_len);
    if (!st && data[FMHA_TENSOR_KV_INDPTR]) st = check_csr(p, data, fam == FMHA_FAMILY_APPENDKV, err, err_len);
    if (!st && data[FMHA_TENSOR_SEQLENS_KV]) st = check_seqlens_kv(p, data, fam == FMHA_FAMILY_APPENDKV, err, err_len);
    return st;
}

/* The index tensors: what the device check copies. */
static const fmha_tensor_role_t index_roles[] = {
    FMHA_TENSOR_CU_SEQLENS_Q, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_TENSOR_SEQUSED_KV,
    FMHA_TENSOR_SEQLENS_KV,   FMHA_TENSOR_BLOCK_TABLE,   FMHA_TENSOR_KV_INDPTR,
    FMHA_TENSOR_KV_INDICES,   FMHA_TENSOR_KV_LAST_PAGE_LEN, FMHA_TENSOR_CACHE_BATCH_IDX};
#define N_INDEX_ROLES ((int)(sizeof index_roles / sizeof index_roles[0]))

/* Bytes from a tensor's first element to one past its last (strides are >= 0). */
static size_t span_bytes(const fmha_tensor_desc_t *t)
{
    int64_t last = 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] == 0) return 0;
        last += (t->dims[d] - 1) * t->strides[d];
    }
    return (size_t)(last + 1) * fmha_dtype_size(t->dtype);
}

fmha_status_t fmha__validate_device_data(const struct fmha_plan *plan, void *const *data, struct CUstream_st *stream,
                                         char *err, size_t err_len)
{
    const fmha_problem_t *p = &plan->problem;
    if (!plan->ops->read_on_stream)
        return fmha__fail(err, FMHA_STATUS_NOT_SUPPORTED, "backend %s cannot read device data for check_index_data",
                          plan->ops->name);
    void *host[FMHA_ROLE_SLOTS] = {0};
    void *dst[N_INDEX_ROLES];
    const void *src[N_INDEX_ROLES];
    size_t bytes[N_INDEX_ROLES], total = 0;
    int n = 0;
    for (int i = 0; i < N_INDEX_ROLES; i++) {
        const fmha_tensor_desc_t *t = fmha__t(p, index_roles[i]);
        if (!t || !data[index_roles[i]] || !span_bytes(t)) continue;
        bytes[n] = span_bytes(t);
        src[n] = data[index_roles[i]];
        total += (bytes[n] + 7) / 8 * 8;
        n++;
    }
    if (n == 0) return FMHA_STATUS_SUCCESS;
    char *buf = malloc(total);
    if (!buf)
        return fmha__fail(err, FMHA_STATUS_ALLOC_FAILED, "check_index_data: %zu bytes of host memory for the copies",
                          total);
    size_t at = 0;
    for (int i = 0, k = 0; i < N_INDEX_ROLES; i++) {
        const fmha_tensor_desc_t *t = fmha__t(p, index_roles[i]);
        if (!t || !data[index_roles[i]] || !span_bytes(t)) continue;
        dst[k] = host[index_roles[i]] = buf + at;
        at += (bytes[k] + 7) / 8 * 8;
        k++;
    }
    fmha_status_t st = plan->ops->read_on_stream(plan->ctx, stream, n, dst, src, bytes, err);
    if (!st) st = fmha__validate_data(p, host, err, err_len);
    free(buf);
    return st;
}
