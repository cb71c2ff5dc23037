/*
 * validate.c: the validation rules of the forward family. Each failure message starts
 * with "[rule <id>]" and names what was found and what was expected; docs/rules.md
 * lists the ids and tests/unit/test_validate.c has a test per rule.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef struct vctx {
    const fmha_problem_t *p;
    char *err;
} vctx_t;

#define FAIL(v, status, ...) fmha__fail((v)->err, (status), __VA_ARGS__)
#define INVALID FMHA_STATUS_INVALID_PROBLEM
#define TRY(expr)                           \
    do {                                    \
        fmha_status_t st_ = (expr);         \
        if (st_ != FMHA_STATUS_SUCCESS) return st_; \
    } while (0)

static const char *rname(fmha_tensor_role_t r) { return fmha_tensor_role_name(r); }

static fmha_status_t check_positive(vctx_t *v, fmha_param_t k)
{
    int64_t x = fmha__i(v->p, k);
    if (x <= 0)
        return FAIL(v, INVALID, "[rule dims.positive] %s is %lld; expected > 0 (is it set?)",
                    fmha__param_name(k), (long long)x);
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t check_head_dim(vctx_t *v, fmha_param_t k)
{
    int64_t d = fmha__i(v->p, k);
    if (d % 8 != 0 || d > 256)
        return FAIL(v, INVALID, "[rule hdim.shape] %s is %lld; expected a multiple of 8 up to 256",
                    fmha__param_name(k), (long long)d);
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t require(vctx_t *v, fmha_tensor_role_t r, const char *why)
{
    if (!fmha__t(v->p, r))
        return FAIL(v, INVALID, "[rule tensor.required] tensor %s is not set; %s", rname(r), why);
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t check_dtype(vctx_t *v, fmha_tensor_role_t r, fmha_dtype_t want,
                                 const char *expected_text)
{
    const fmha_tensor_desc_t *t = fmha__t(v->p, r);
    if (t && t->dtype != want)
        return FAIL(v, INVALID, "[rule dtype.supported] tensor %s has dtype %s; expected %s",
                    rname(r), fmha_dtype_name(t->dtype), expected_text);
    return FMHA_STATUS_SUCCESS;
}

/* Expected dims: a value >= 0 must match exactly; ANY matches anything; for a value
 * flagged in bcast_mask the dim may also be 1 (broadcast). */
#define ANY (-1)

static void dims_text(char *buf, size_t len, int rank, const int64_t *dims)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, len - n, "[");
    for (int d = 0; d < rank && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, d ? ", %lld" : "%lld", (long long)dims[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

static fmha_status_t check_shape(vctx_t *v, fmha_tensor_role_t r, int rank, const int64_t *want,
                                 unsigned bcast_mask, const char *layout)
{
    const fmha_tensor_desc_t *t = fmha__t(v->p, r);
    if (!t) return FMHA_STATUS_SUCCESS;
    char got[160];
    dims_text(got, sizeof got, t->rank, t->dims);
    if (t->rank != rank)
        return FAIL(v, INVALID, "[rule tensor.shape] tensor %s has rank %d %s; expected rank %d %s",
                    rname(r), t->rank, got, rank, layout);
    for (int d = 0; d < rank; d++) {
        if (want[d] == ANY || t->dims[d] == want[d]) continue;
        if ((bcast_mask >> d & 1u) && t->dims[d] == 1) continue;
        return FAIL(v, INVALID,
                    "[rule tensor.shape] tensor %s has dims %s; dim %d is %lld, expected %lld%s "
                    "(layout %s)",
                    rname(r), got, d, (long long)t->dims[d], (long long)want[d],
                    (bcast_mask >> d & 1u) ? " or 1" : "", layout);
    }
    return FMHA_STATUS_SUCCESS;
}

/* Strides are consistent with dims when no two distinct in-range indices reach the same
 * element: ordered by stride, each dim of extent > 1 must step over the whole span of
 * the dims inside it. The span must also fit in int64 bytes. */
static fmha_status_t check_strides(vctx_t *v, fmha_tensor_role_t r)
{
    const fmha_tensor_desc_t *t = fmha__t(v->p, r);
    if (!t) return FMHA_STATUS_SUCCESS;
    int order[FMHA_MAX_RANK], n = 0;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] == 0) return FMHA_STATUS_SUCCESS; /* no elements, nothing can overlap */
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] > 1) order[n++] = d;
    for (int a = 1; a < n; a++) /* insertion sort by stride; n <= 6 */
        for (int b = a; b > 0 && t->strides[order[b]] < t->strides[order[b - 1]]; b--) {
            int tmp = order[b];
            order[b] = order[b - 1];
            order[b - 1] = tmp;
        }
    const int64_t limit = INT64_MAX / 16;
    int64_t span = 1; /* elements covered by the dims checked so far */
    for (int k = 0; k < n; k++) {
        int d = order[k];
        if (t->strides[d] < span)
            return FAIL(v, INVALID,
                        "[rule tensor.strides] tensor %s: stride %lld of dim %d (extent %lld) "
                        "overlaps the inner dims, which span %lld elements; strides must not "
                        "make two indices share an element",
                        rname(r), (long long)t->strides[d], d, (long long)t->dims[d],
                        (long long)span);
        if (t->dims[d] - 1 > (limit - 1) / t->strides[d])
            return FAIL(v, INVALID, "[rule tensor.extent] tensor %s: extent exceeds 2^59 elements",
                        rname(r));
        span = t->strides[d] * (t->dims[d] - 1) + 1;
    }
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t validate_fwd(vctx_t *v)
{
    const fmha_problem_t *p = v->p;
    const fmha_param_t positive[] = {FMHA_PARAM_BATCH,       FMHA_PARAM_NUM_HEADS_Q,
                                     FMHA_PARAM_NUM_HEADS_KV, FMHA_PARAM_SEQLEN_Q,
                                     FMHA_PARAM_SEQLEN_KV,    FMHA_PARAM_HEAD_DIM_QK,
                                     FMHA_PARAM_HEAD_DIM_V};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        TRY(check_positive(v, positive[i]));

    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q),
                  Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV), Sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q),
                  Sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV), Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                  Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;

    if (Hq % Hk != 0)
        return FAIL(v, INVALID,
                    "[rule heads.gqa] num_heads_q (%lld) must be a multiple of num_heads_kv (%lld)",
                    (long long)Hq, (long long)Hk);
    TRY(check_head_dim(v, FMHA_PARAM_HEAD_DIM_QK));
    TRY(check_head_dim(v, FMHA_PARAM_HEAD_DIM_V));

    TRY(require(v, FMHA_TENSOR_Q, "the forward needs q, k, v and o"));
    TRY(require(v, FMHA_TENSOR_K, "the forward needs q, k, v and o"));
    TRY(require(v, FMHA_TENSOR_V, "the forward needs q, k, v and o"));
    TRY(require(v, FMHA_TENSOR_O, "the forward needs q, k, v and o"));

    const fmha_dtype_t qt = fmha__t(p, FMHA_TENSOR_Q)->dtype;
    if (qt != FMHA_DTYPE_FP16 && qt != FMHA_DTYPE_BF16 && qt != FMHA_DTYPE_FP32)
        return FAIL(v, INVALID,
                    "[rule dtype.supported] tensor q has dtype %s; expected fp16, bf16 or fp32 "
                    "(fp8 arrives with the sm90 kernels)",
                    fmha_dtype_name(qt));
    const char *qname = fmha_dtype_name(qt);
    char same[64];
    snprintf(same, sizeof same, "%s, the dtype of q", qname);
    TRY(check_dtype(v, FMHA_TENSOR_K, qt, same));
    TRY(check_dtype(v, FMHA_TENSOR_V, qt, same));
    TRY(check_dtype(v, FMHA_TENSOR_O, qt, same));
    TRY(check_dtype(v, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, "fp32"));
    TRY(check_dtype(v, FMHA_TENSOR_ALIBI_SLOPES, FMHA_DTYPE_FP32, "fp32"));
    TRY(check_dtype(v, FMHA_TENSOR_SINK, FMHA_DTYPE_FP32, "fp32"));
    TRY(check_dtype(v, FMHA_TENSOR_DROPOUT_MASK, FMHA_DTYPE_UINT8, "uint8"));
    TRY(check_dtype(v, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, "int32"));
    TRY(check_dtype(v, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_DTYPE_INT32, "int32"));
    TRY(check_dtype(v, FMHA_TENSOR_SEQUSED_KV, FMHA_DTYPE_INT32, "int32"));
    const fmha_tensor_desc_t *bias = fmha__t(p, FMHA_TENSOR_BIAS);
    if (bias && bias->dtype != qt && bias->dtype != FMHA_DTYPE_FP32)
        return FAIL(v, INVALID, "[rule dtype.supported] tensor bias has dtype %s; expected %s or fp32",
                    fmha_dtype_name(bias->dtype), qname);

    if (bias && fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES))
        return FAIL(v, INVALID,
                    "[rule bias.exclusive] both bias and alibi_slopes are set; expected at most one");

    const fmha_tensor_role_t varlen_roles[] = {FMHA_TENSOR_CU_SEQLENS_Q, FMHA_TENSOR_CU_SEQLENS_KV,
                                               FMHA_TENSOR_SEQUSED_KV};
    if (!group) {
        for (size_t i = 0; i < 3; i++)
            if (fmha__t(p, varlen_roles[i]))
                return FAIL(v, INVALID,
                            "[rule mode.varlen] tensor %s is set in batch mode; it is only used in "
                            "group mode (mode = 1)",
                            rname(varlen_roles[i]));
    } else {
        TRY(require(v, FMHA_TENSOR_CU_SEQLENS_Q, "group mode needs cu_seqlens_q [batch + 1]"));
        TRY(require(v, FMHA_TENSOR_CU_SEQLENS_KV, "group mode needs cu_seqlens_kv [batch + 1]"));
    }

    /* Shapes. In group mode the token dims are free but must agree between tensors. */
    if (!group) {
        TRY(check_shape(v, FMHA_TENSOR_Q, 4, (int64_t[]){B, Sq, Hq, Dqk}, 0, "[B, Sq, Hq, Dqk]"));
        TRY(check_shape(v, FMHA_TENSOR_K, 4, (int64_t[]){B, Sk, Hk, Dqk}, 0, "[B, Sk, Hk, Dqk]"));
        TRY(check_shape(v, FMHA_TENSOR_V, 4, (int64_t[]){B, Sk, Hk, Dv}, 0, "[B, Sk, Hk, Dv]"));
        TRY(check_shape(v, FMHA_TENSOR_O, 4, (int64_t[]){B, Sq, Hq, Dv}, 0, "[B, Sq, Hq, Dv]"));
        TRY(check_shape(v, FMHA_TENSOR_LSE, 3, (int64_t[]){B, Hq, Sq}, 0, "[B, Hq, Sq]"));
    } else {
        const int64_t tq = fmha__t(p, FMHA_TENSOR_Q)->dims[0];
        const int64_t tk = fmha__t(p, FMHA_TENSOR_K)->dims[0];
        TRY(check_shape(v, FMHA_TENSOR_Q, 3, (int64_t[]){ANY, Hq, Dqk}, 0, "[total_q, Hq, Dqk]"));
        TRY(check_shape(v, FMHA_TENSOR_K, 3, (int64_t[]){ANY, Hk, Dqk}, 0, "[total_k, Hk, Dqk]"));
        TRY(check_shape(v, FMHA_TENSOR_V, 3, (int64_t[]){tk, Hk, Dv}, 0,
                        "[total_k, Hk, Dv], total_k from k"));
        TRY(check_shape(v, FMHA_TENSOR_O, 3, (int64_t[]){tq, Hq, Dv}, 0,
                        "[total_q, Hq, Dv], total_q from q"));
        TRY(check_shape(v, FMHA_TENSOR_LSE, 2, (int64_t[]){Hq, tq}, 0, "[Hq, total_q]"));
        TRY(check_shape(v, FMHA_TENSOR_CU_SEQLENS_Q, 1, (int64_t[]){B + 1}, 0, "[B + 1]"));
        TRY(check_shape(v, FMHA_TENSOR_CU_SEQLENS_KV, 1, (int64_t[]){B + 1}, 0, "[B + 1]"));
        TRY(check_shape(v, FMHA_TENSOR_SEQUSED_KV, 1, (int64_t[]){B}, 0, "[B]"));
    }
    TRY(check_shape(v, FMHA_TENSOR_BIAS, 4, (int64_t[]){B, Hq, Sq, Sk}, 0x3u,
                    "[B or 1, Hq or 1, Sq, Sk]"));
    const fmha_tensor_desc_t *alibi = fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES);
    if (alibi && alibi->rank == 1)
        TRY(check_shape(v, FMHA_TENSOR_ALIBI_SLOPES, 1, (int64_t[]){Hq}, 0, "[Hq] or [B, Hq]"));
    else
        TRY(check_shape(v, FMHA_TENSOR_ALIBI_SLOPES, 2, (int64_t[]){B, Hq}, 0, "[Hq] or [B, Hq]"));
    TRY(check_shape(v, FMHA_TENSOR_SINK, 1, (int64_t[]){Hq}, 0, "[Hq]"));
    TRY(check_shape(v, FMHA_TENSOR_DROPOUT_MASK, 4, (int64_t[]){B, Hq, Sq, Sk}, 0,
                    "[B, Hq, Sq, Sk]"));

    for (int r = 1; r < FMHA_ROLE_SLOTS; r++)
        TRY(check_strides(v, (fmha_tensor_role_t)r));
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_validate(const fmha_problem_t *p, char *why, size_t why_len)
{
    if (!p) {
        fmha__copy_msg(why, why_len, "problem is NULL");
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    vctx_t v = {p, (char *)p->err}; /* the error buffer is mutable on a const handle */
    fmha_status_t st;
    fmha_family_t fam = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    if (fam != FMHA_FAMILY_FWD)
        st = FAIL(&v, FMHA_STATUS_NOT_SUPPORTED,
                  "[rule family.supported] family %s is not implemented in this version; "
                  "expected fwd",
                  fmha_family_name(fam));
    else
        st = validate_fwd(&v);
    if (st == FMHA_STATUS_SUCCESS) v.err[0] = '\0';
    fmha__copy_msg(why, why_len, v.err);
    return st;
}

fmha_status_t fmha__validate_seqlens(const fmha_problem_t *p, const int32_t *cu_q,
                                     const int32_t *cu_k, const int32_t *used_k, char *err,
                                     size_t err_len)
{
    char msg[FMHA_ERR_LEN];
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH);
    const int64_t max_q = fmha__i(p, FMHA_PARAM_SEQLEN_Q), max_k = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    const int64_t total_q = fmha__t(p, FMHA_TENSOR_Q)->dims[0];
    const int64_t total_k = fmha__t(p, FMHA_TENSOR_K)->dims[0];
    const struct {
        const int32_t *cu;
        const char *name, *max_name;
        int64_t max, total;
    } sides[2] = {{cu_q, "cu_seqlens_q", "seqlen_q (max_seqlen_q)", max_q, total_q},
                  {cu_k, "cu_seqlens_kv", "seqlen_kv (max_seqlen_k)", max_k, total_k}};
    for (int s = 0; s < 2; s++) {
        const int32_t *cu = sides[s].cu;
        if (cu[0] != 0) {
            snprintf(msg, sizeof msg, "[rule varlen.cu_seqlens] %s[0] is %d; expected 0",
                     sides[s].name, cu[0]);
            goto fail;
        }
        /* Order matters: monotonic and in-bounds first, so that every later read of the
         * tensors through cu_seqlens is known to be inside them. */
        for (int64_t b = 0; b < B; b++)
            if (cu[b + 1] < cu[b]) {
                snprintf(msg, sizeof msg,
                         "[rule varlen.cu_seqlens] %s is decreasing at %lld (%d then %d); "
                         "expected non-decreasing",
                         sides[s].name, (long long)b, cu[b], cu[b + 1]);
                goto fail;
            }
        if (cu[B] > sides[s].total) {
            snprintf(msg, sizeof msg,
                     "[rule varlen.cu_seqlens] %s[%lld] = %d exceeds the %lld tokens of the "
                     "tensor",
                     sides[s].name, (long long)B, cu[B], (long long)sides[s].total);
            goto fail;
        }
        for (int64_t b = 0; b < B; b++) {
            int64_t len = (int64_t)cu[b + 1] - cu[b];
            if (len > sides[s].max) {
                snprintf(msg, sizeof msg,
                         "[rule varlen.max_seqlen] sequence %lld has length %lld in %s; expected "
                         "<= %s = %lld",
                         (long long)b, (long long)len, sides[s].name, sides[s].max_name,
                         (long long)sides[s].max);
                goto fail;
            }
        }
    }
    if (used_k)
        for (int64_t b = 0; b < B; b++) {
            int64_t alloc = (int64_t)cu_k[b + 1] - cu_k[b];
            if (used_k[b] < 0 || used_k[b] > alloc) {
                snprintf(msg, sizeof msg,
                         "[rule varlen.seqused] seqused_kv[%lld] = %d; expected 0..%lld (the "
                         "allocated length from cu_seqlens_kv)",
                         (long long)b, used_k[b], (long long)alloc);
                goto fail;
            }
        }
    return FMHA_STATUS_SUCCESS;
fail:
    fmha__copy_msg(err, err_len, msg);
    return FMHA_STATUS_INVALID_PROBLEM;
}
