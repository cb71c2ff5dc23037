/* SPDX-License-Identifier: MIT */
/*
 * validate.c: the shared validation rules, the forward's, and the dispatch by family.
 * Each failure message starts with "[rule <id>]" and names what was found and what was
 * expected; docs/rules.md lists the ids and tests/unit/test_validate.c (and
 * test_validate_families.c) test each.
 */
#include <stdio.h>
#include <string.h>

#include "validate.h"

#define FAIL VFAIL
#define INVALID VINVALID
#define TRY VTRY

static const char *rname(fmha_tensor_role_t r) { return fmha_tensor_role_name(r); }

fmha_status_t fmha__v_positive(vctx_t *v, fmha_param_t k)
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

fmha_status_t fmha__v_require(vctx_t *v, fmha_tensor_role_t r, const char *why)
{
    if (!fmha__t(v->p, r))
        return FAIL(v, INVALID, "[rule tensor.required] tensor %s is not set; %s", rname(r), why);
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__v_dtype(vctx_t *v, fmha_tensor_role_t r, fmha_dtype_t want,
                                 const char *expected_text)
{
    const fmha_tensor_desc_t *t = fmha__t(v->p, r);
    if (t && t->dtype != want)
        return FAIL(v, INVALID, "[rule dtype.supported] tensor %s has dtype %s; expected %s",
                    rname(r), fmha_dtype_name(t->dtype), expected_text);
    return FMHA_STATUS_SUCCESS;
}

#define ANY VANY

static void dims_text(char *buf, size_t len, int rank, const int64_t *dims)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, len - n, "[");
    for (int d = 0; d < rank && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, d ? ", %lld" : "%lld", (long long)dims[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

fmha_status_t fmha__v_shape(vctx_t *v, fmha_tensor_role_t r, int rank, const int64_t *want,
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

/* The tensors each family reads or writes; any other role set on the problem is a
 * mistake the caller should hear about rather than a tensor silently ignored. */
#define R(x) (1ull << FMHA_TENSOR_##x)
static const uint64_t QUERY_SIDE = R(Q) | R(O) | R(LSE) | R(BIAS) | R(ALIBI_SLOPES) | R(SINK) | R(CU_SEQLENS_Q);
static const uint64_t PAGED = R(SEQLENS_KV) | R(BLOCK_TABLE) | R(KV_INDPTR) | R(KV_INDICES) | R(KV_LAST_PAGE_LEN);

static uint64_t family_roles(fmha_family_t f)
{
    switch (f) {
    case FMHA_FAMILY_FWD:
        return QUERY_SIDE | R(K) | R(V) | R(DROPOUT_MASK) | R(CU_SEQLENS_KV) | R(SEQUSED_KV) | R(Q_DESCALE) |
               R(K_DESCALE) | R(V_DESCALE);
    case FMHA_FAMILY_FWD_SPLITKV:
        return QUERY_SIDE | R(K) | R(V) | R(CU_SEQLENS_KV) | R(SEQUSED_KV) | PAGED | R(CACHE_BATCH_IDX);
    case FMHA_FAMILY_FWD_PAGEDKV:
    case FMHA_FAMILY_BATCH_PREFILL:
        return QUERY_SIDE | R(K) | R(V) | PAGED;
    case FMHA_FAMILY_APPENDKV:
        return R(Q) | R(Q_ROT) | R(K) | R(V) | R(K_NEW) | R(V_NEW) | PAGED | R(CACHE_BATCH_IDX) | R(ROTARY_COS) |
               R(ROTARY_SIN);
    case FMHA_FAMILY_BWD:
        return QUERY_SIDE | R(K) | R(V) | R(CU_SEQLENS_KV) | R(SEQUSED_KV) | R(DO) | R(DQ) | R(DK) | R(DV) |
               R(DBIAS) | R(DSINK);
    }
    return 0;
}
#undef R

static fmha_status_t check_family_roles(vctx_t *v, fmha_family_t fam)
{
    const uint64_t allowed = family_roles(fam);
    for (int r = 1; r < FMHA_ROLE_SLOTS; r++)
        if (fmha__t(v->p, (fmha_tensor_role_t)r) && !(allowed >> r & 1u))
            return FAIL(v, INVALID, "[rule family.tensor] tensor %s is set but family %s does not use it",
                        rname((fmha_tensor_role_t)r), fmha_family_name(fam));
    return FMHA_STATUS_SUCCESS;
}

/* Dims, GQA and head dims: the rules every family shares. */
static fmha_status_t validate_scalars(vctx_t *v, int needs_seqlens)
{
    const fmha_problem_t *p = v->p;
    const fmha_param_t positive[] = {FMHA_PARAM_BATCH, FMHA_PARAM_NUM_HEADS_Q, FMHA_PARAM_NUM_HEADS_KV,
                                     FMHA_PARAM_HEAD_DIM_QK, FMHA_PARAM_HEAD_DIM_V};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) TRY(fmha__v_positive(v, positive[i]));
    if (needs_seqlens) {
        TRY(fmha__v_positive(v, FMHA_PARAM_SEQLEN_Q));
        TRY(fmha__v_positive(v, FMHA_PARAM_SEQLEN_KV));
    }
    const int64_t Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q), Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    if (Hq % Hk != 0)
        return FAIL(v, INVALID, "[rule heads.gqa] num_heads_q (%lld) must be a multiple of num_heads_kv (%lld)",
                    (long long)Hq, (long long)Hk);
    TRY(check_head_dim(v, FMHA_PARAM_HEAD_DIM_QK));
    TRY(check_head_dim(v, FMHA_PARAM_HEAD_DIM_V));
    return FMHA_STATUS_SUCCESS;
}

/* The element type of the problem: q's (or, without q, `fallback`'s). fp8 e4m3 inputs
 * are the forward's only (check_fp8). */
static fmha_status_t check_main_dtype(vctx_t *v, fmha_tensor_role_t r, fmha_family_t fam, fmha_dtype_t *out)
{
    const fmha_dtype_t dt = fmha__t(v->p, r)->dtype;
    if (dt == FMHA_DTYPE_FP8_E4M3 && fam != FMHA_FAMILY_FWD)
        return FAIL(v, INVALID,
                    "[rule dtype.fp8] tensor %s has dtype fp8e4m3, which family %s does not take; fp8 e4m3 "
                    "inputs are computed by the fwd family (family %s takes fp16, bf16 or fp32)",
                    rname(r), fmha_family_name(fam), fmha_family_name(fam));
    if (dt != FMHA_DTYPE_FP16 && dt != FMHA_DTYPE_BF16 && dt != FMHA_DTYPE_FP32 && dt != FMHA_DTYPE_FP8_E4M3)
        return FAIL(v, INVALID, "[rule dtype.supported] tensor %s has dtype %s; expected fp16, bf16, fp32 or fp8e4m3",
                    rname(r), fmha_dtype_name(dt));
    *out = dt;
    return FMHA_STATUS_SUCCESS;
}

/* fp8 e4m3 inputs (docs/semantics.md, "FP8"), after check_same_dtype has held k and v to
 * q's e4m3: o in bf16, each input
 * with an optional fp32 descale of [1] or [B, Hk]; no bias, ALiBi or dropout. Descales
 * without fp8 inputs are a mistake: they would be ignored. */
static fmha_status_t check_fp8(vctx_t *v, fmha_dtype_t dt)
{
    const fmha_problem_t *p = v->p;
    const fmha_tensor_role_t descales[] = {FMHA_TENSOR_Q_DESCALE, FMHA_TENSOR_K_DESCALE, FMHA_TENSOR_V_DESCALE};
    if (dt != FMHA_DTYPE_FP8_E4M3) {
        for (size_t i = 0; i < 3; i++)
            if (fmha__t(p, descales[i]))
                return FAIL(v, INVALID,
                            "[rule dtype.descale] tensor %s is set but q is %s; descales apply to fp8e4m3 inputs",
                            rname(descales[i]), fmha_dtype_name(dt));
        return FMHA_STATUS_SUCCESS;
    }
    TRY(fmha__v_dtype(v, FMHA_TENSOR_O, FMHA_DTYPE_BF16, "bf16 (fp8e4m3 inputs give a bf16 output)"));
    if (fmha__t(p, FMHA_TENSOR_BIAS) || fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES))
        return FAIL(v, INVALID, "[rule dtype.fp8_features] tensor %s is set; fp8e4m3 inputs take no bias and no ALiBi",
                    fmha__t(p, FMHA_TENSOR_BIAS) ? "bias" : "alibi_slopes");
    if (fmha__f(p, FMHA_PARAM_DROPOUT_P) > 0 || fmha__t(p, FMHA_TENSOR_DROPOUT_MASK))
        return FAIL(v, INVALID, "[rule dtype.fp8_features] dropout is asked for (dropout_p %g%s); fp8e4m3 inputs take "
                    "no dropout", fmha__f(p, FMHA_PARAM_DROPOUT_P),
                    fmha__t(p, FMHA_TENSOR_DROPOUT_MASK) ? ", dropout_mask set" : "");
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    for (size_t i = 0; i < 3; i++) {
        const fmha_tensor_desc_t *t = fmha__t(p, descales[i]);
        if (!t) continue;
        TRY(fmha__v_dtype(v, descales[i], FMHA_DTYPE_FP32, "fp32"));
        if (t->rank == 1)
            TRY(fmha__v_shape(v, descales[i], 1, (int64_t[]){1}, 0, "[1] or [B, Hk]"));
        else
            TRY(fmha__v_shape(v, descales[i], 2, (int64_t[]){B, Hk}, 0, "[1] or [B, Hk]"));
    }
    return FMHA_STATUS_SUCCESS;
}

/* Every role in `roles` that is set must have dtype dt (the problem's element type). */
static fmha_status_t check_same_dtype(vctx_t *v, const fmha_tensor_role_t *roles, size_t n, fmha_dtype_t dt,
                                      fmha_tensor_role_t from)
{
    char same[64];
    snprintf(same, sizeof same, "%s, the dtype of %s", fmha_dtype_name(dt), rname(from));
    for (size_t i = 0; i < n; i++) TRY(fmha__v_dtype(v, roles[i], dt, same));
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t check_fixed_dtypes(vctx_t *v)
{
    const fmha_tensor_role_t i32[] = {FMHA_TENSOR_CU_SEQLENS_Q, FMHA_TENSOR_CU_SEQLENS_KV,
                                      FMHA_TENSOR_SEQUSED_KV,   FMHA_TENSOR_SEQLENS_KV,
                                      FMHA_TENSOR_BLOCK_TABLE,  FMHA_TENSOR_KV_INDPTR,
                                      FMHA_TENSOR_KV_INDICES,   FMHA_TENSOR_KV_LAST_PAGE_LEN,
                                      FMHA_TENSOR_CACHE_BATCH_IDX};
    for (size_t i = 0; i < sizeof i32 / sizeof i32[0]; i++) TRY(fmha__v_dtype(v, i32[i], FMHA_DTYPE_INT32, "int32"));
    const fmha_tensor_role_t f32[] = {FMHA_TENSOR_LSE,        FMHA_TENSOR_ALIBI_SLOPES, FMHA_TENSOR_SINK,
                                      FMHA_TENSOR_DSINK,      FMHA_TENSOR_ROTARY_COS,   FMHA_TENSOR_ROTARY_SIN,
                                      FMHA_TENSOR_Q_DESCALE,  FMHA_TENSOR_K_DESCALE,    FMHA_TENSOR_V_DESCALE};
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) TRY(fmha__v_dtype(v, f32[i], FMHA_DTYPE_FP32, "fp32"));
    TRY(fmha__v_dtype(v, FMHA_TENSOR_DROPOUT_MASK, FMHA_DTYPE_UINT8, "uint8"));
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__validate_query_side(vctx_t *v)
{
    const fmha_problem_t *p = v->p;
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q),
                  Sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q), Sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV),
                  Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK), Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const fmha_dtype_t qt = fmha__t(p, FMHA_TENSOR_Q)->dtype;
    const fmha_tensor_desc_t *bias = fmha__t(p, FMHA_TENSOR_BIAS);
    if (bias && bias->dtype != qt && bias->dtype != FMHA_DTYPE_FP32)
        return FAIL(v, INVALID, "[rule dtype.supported] tensor bias has dtype %s; expected %s or fp32",
                    fmha_dtype_name(bias->dtype), fmha_dtype_name(qt));
    if (bias && fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES))
        return FAIL(v, INVALID, "[rule bias.exclusive] both bias and alibi_slopes are set; expected at most one");

    if (!group) {
        if (fmha__t(p, FMHA_TENSOR_CU_SEQLENS_Q))
            return FAIL(v, INVALID,
                        "[rule mode.varlen] tensor cu_seqlens_q is set in batch mode; it is only used in group "
                        "mode (mode = 1)");
        TRY(fmha__v_shape(v, FMHA_TENSOR_Q, 4, (int64_t[]){B, Sq, Hq, Dqk}, 0, "[B, Sq, Hq, Dqk]"));
        TRY(fmha__v_shape(v, FMHA_TENSOR_O, 4, (int64_t[]){B, Sq, Hq, Dv}, 0, "[B, Sq, Hq, Dv]"));
        TRY(fmha__v_shape(v, FMHA_TENSOR_LSE, 3, (int64_t[]){B, Hq, Sq}, 0, "[B, Hq, Sq]"));
    } else {
        TRY(fmha__v_require(v, FMHA_TENSOR_CU_SEQLENS_Q, "group mode needs cu_seqlens_q [batch + 1]"));
        const int64_t tq = fmha__t(p, FMHA_TENSOR_Q)->dims[0];
        TRY(fmha__v_shape(v, FMHA_TENSOR_Q, 3, (int64_t[]){ANY, Hq, Dqk}, 0, "[total_q, Hq, Dqk]"));
        TRY(fmha__v_shape(v, FMHA_TENSOR_O, 3, (int64_t[]){tq, Hq, Dv}, 0, "[total_q, Hq, Dv], total_q from q"));
        TRY(fmha__v_shape(v, FMHA_TENSOR_LSE, 2, (int64_t[]){Hq, tq}, 0, "[Hq, total_q]"));
        TRY(fmha__v_shape(v, FMHA_TENSOR_CU_SEQLENS_Q, 1, (int64_t[]){B + 1}, 0, "[B + 1]"));
    }
    TRY(fmha__v_shape(v, FMHA_TENSOR_BIAS, 4, (int64_t[]){B, Hq, Sq, Sk}, 0x3u, "[B or 1, Hq or 1, Sq, Sk]"));
    const fmha_tensor_desc_t *alibi = fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES);
    if (alibi && alibi->rank == 1)
        TRY(fmha__v_shape(v, FMHA_TENSOR_ALIBI_SLOPES, 1, (int64_t[]){Hq}, 0, "[Hq] or [B, Hq]"));
    else
        TRY(fmha__v_shape(v, FMHA_TENSOR_ALIBI_SLOPES, 2, (int64_t[]){B, Hq}, 0, "[Hq] or [B, Hq]"));
    TRY(fmha__v_shape(v, FMHA_TENSOR_SINK, 1, (int64_t[]){Hq}, 0, "[Hq]"));
    TRY(fmha__v_shape(v, FMHA_TENSOR_DROPOUT_MASK, 4, (int64_t[]){B, Hq, Sq, Sk}, 0, "[B, Hq, Sq, Sk]"));
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__validate_kv_contiguous(vctx_t *v, int64_t cache_batch_rows)
{
    const fmha_problem_t *p = v->p;
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV),
                  Sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV), Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                  Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    if (fmha__i(p, FMHA_PARAM_MODE) != FMHA_MODE_GROUP) {
        const fmha_tensor_role_t varlen[] = {FMHA_TENSOR_CU_SEQLENS_KV, FMHA_TENSOR_SEQUSED_KV};
        for (size_t i = 0; i < 2; i++)
            if (fmha__t(p, varlen[i]))
                return FAIL(v, INVALID,
                            "[rule mode.varlen] tensor %s is set in batch mode; it is only used in group mode "
                            "(mode = 1)",
                            rname(varlen[i]));
        const int64_t rows = cache_batch_rows > 0 ? cache_batch_rows : B;
        const char *lk = cache_batch_rows > 0 ? "[B_cache, Sk, Hk, Dqk]" : "[B, Sk, Hk, Dqk]";
        const char *lv = cache_batch_rows > 0 ? "[B_cache, Sk, Hk, Dv]" : "[B, Sk, Hk, Dv]";
        TRY(fmha__v_shape(v, FMHA_TENSOR_K, 4, (int64_t[]){rows, Sk, Hk, Dqk}, 0, lk));
        TRY(fmha__v_shape(v, FMHA_TENSOR_V, 4, (int64_t[]){rows, Sk, Hk, Dv}, 0, lv));
        TRY(fmha__v_shape(v, FMHA_TENSOR_SEQLENS_KV, 1, (int64_t[]){B}, 0, "[B]"));
        TRY(fmha__v_shape(v, FMHA_TENSOR_CACHE_BATCH_IDX, 1, (int64_t[]){B}, 0, "[B]"));
        return FMHA_STATUS_SUCCESS;
    }
    const fmha_tensor_role_t batch_only[] = {FMHA_TENSOR_SEQLENS_KV, FMHA_TENSOR_CACHE_BATCH_IDX};
    for (size_t i = 0; i < 2; i++)
        if (fmha__t(p, batch_only[i]))
            return FAIL(v, INVALID,
                        "[rule mode.varlen] tensor %s is set in group mode; group mode gives key lengths with "
                        "cu_seqlens_kv and seqused_kv",
                        rname(batch_only[i]));
    TRY(fmha__v_require(v, FMHA_TENSOR_CU_SEQLENS_KV, "group mode needs cu_seqlens_kv [batch + 1]"));
    const int64_t tk = fmha__t(p, FMHA_TENSOR_K)->dims[0];
    TRY(fmha__v_shape(v, FMHA_TENSOR_K, 3, (int64_t[]){ANY, Hk, Dqk}, 0, "[total_k, Hk, Dqk]"));
    TRY(fmha__v_shape(v, FMHA_TENSOR_V, 3, (int64_t[]){tk, Hk, Dv}, 0, "[total_k, Hk, Dv], total_k from k"));
    TRY(fmha__v_shape(v, FMHA_TENSOR_CU_SEQLENS_KV, 1, (int64_t[]){B + 1}, 0, "[B + 1]"));
    TRY(fmha__v_shape(v, FMHA_TENSOR_SEQUSED_KV, 1, (int64_t[]){B}, 0, "[B]"));
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t validate_fwd(vctx_t *v)
{
    const char *need = "the forward needs q, k, v and o";
    const fmha_tensor_role_t req[] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (size_t i = 0; i < 4; i++) TRY(fmha__v_require(v, req[i], need));
    TRY(fmha__validate_query_side(v));
    return fmha__validate_kv_contiguous(v, 0);
}

fmha_status_t fmha_problem_validate(const fmha_problem_t *p, char *why, size_t why_len)
{
    if (!p) {
        fmha__copy_msg(why, why_len, "problem is NULL");
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    char *err = (char *)p->err; /* the handle's last error: mutable on a const handle */
    const fmha_status_t st = fmha__problem_check(p, err);
    fmha__copy_msg(why, why_len, err);
    return st;
}

fmha_status_t fmha__problem_check(const fmha_problem_t *p, char *err)
{
    vctx_t vc = {p, err};
    vctx_t *v = &vc;
    const fmha_family_t fam = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    fmha_status_t st = validate_scalars(v, fam != FMHA_FAMILY_APPENDKV);
    if (!st) st = check_family_roles(v, fam);
    /* The element type comes from q, or for appendkv (where q is optional) from k_new. */
    const fmha_tensor_role_t main_role = fam == FMHA_FAMILY_APPENDKV ? FMHA_TENSOR_K_NEW : FMHA_TENSOR_Q;
    if (!st) st = fmha__v_require(v, main_role, fam == FMHA_FAMILY_APPENDKV ? "appendkv needs k_new and v_new"
                                                                              : "every attention family needs q");
    fmha_dtype_t dt = FMHA_DTYPE_FP32;
    if (!st) st = check_main_dtype(v, main_role, fam, &dt);
    if (!st) {
        /* o last: with fp8 inputs it is bf16 instead (check_fp8) */
        const fmha_tensor_role_t same[] = {FMHA_TENSOR_Q,     FMHA_TENSOR_K,     FMHA_TENSOR_V,  FMHA_TENSOR_K_NEW,
                                           FMHA_TENSOR_V_NEW, FMHA_TENSOR_Q_ROT, FMHA_TENSOR_DO, FMHA_TENSOR_DQ,
                                           FMHA_TENSOR_DK,    FMHA_TENSOR_DV,    FMHA_TENSOR_O};
        const size_t n = sizeof same / sizeof same[0];
        st = check_same_dtype(v, same, dt == FMHA_DTYPE_FP8_E4M3 ? n - 1 : n, dt, main_role);
    }
    if (!st) st = check_fp8(v, dt);
    if (!st) st = check_fixed_dtypes(v);
    if (!st && fmha__f(p, FMHA_PARAM_DROPOUT_P) > 0 && fam != FMHA_FAMILY_FWD && fam != FMHA_FAMILY_BWD)
        st = FAIL(v, INVALID,
                  "[rule dropout.family] dropout_p is %g but family %s is an inference family; dropout is "
                  "computed by fwd and bwd",
                  fmha__f(p, FMHA_PARAM_DROPOUT_P), fmha_family_name(fam));
    if (!st) {
        switch (fam) {
        case FMHA_FAMILY_FWD: st = validate_fwd(v); break;
        case FMHA_FAMILY_FWD_SPLITKV:
        case FMHA_FAMILY_FWD_PAGEDKV:
        case FMHA_FAMILY_BATCH_PREFILL: st = fmha__validate_kv_families(v); break;
        case FMHA_FAMILY_APPENDKV: st = fmha__validate_appendkv(v); break;
        case FMHA_FAMILY_BWD: st = fmha__validate_bwd(v); break;
        }
    }
    for (int r = 1; !st && r < FMHA_ROLE_SLOTS; r++) st = check_strides(v, (fmha_tensor_role_t)r);
    if (st == FMHA_STATUS_SUCCESS) v->err[0] = '\0';
    return st;
}
