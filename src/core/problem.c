/* SPDX-License-Identifier: MIT */
/* problem.c: problem handles, tensor descriptions, and the names of the public enums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *fmha_dtype_name(fmha_dtype_t dt)
{
    switch (dt) {
#define X(name, value, size, str) \
    case FMHA_DTYPE_##name: return str;
        FMHA_DTYPE_MAP(X)
#undef X
    case FMHA_DTYPE_NONE: break;
    }
    return NULL;
}

size_t fmha_dtype_size(fmha_dtype_t dt)
{
    switch (dt) {
#define X(name, value, size, str) \
    case FMHA_DTYPE_##name: return size;
        FMHA_DTYPE_MAP(X)
#undef X
    case FMHA_DTYPE_NONE: break;
    }
    return 0;
}

fmha_status_t fmha_dtype_parse(const char *name, fmha_dtype_t *out)
{
    if (!name || !out) return FMHA_STATUS_INVALID_ARGUMENT;
#define X(NAME, value, size, str)                 \
    if (strcmp(name, str) == 0) {                 \
        *out = FMHA_DTYPE_##NAME;                 \
        return FMHA_STATUS_SUCCESS;               \
    }
    FMHA_DTYPE_MAP(X)
#undef X
    return FMHA_STATUS_INVALID_ARGUMENT;
}

const char *fmha_family_name(fmha_family_t f)
{
    switch (f) {
#define X(name, value, str) \
    case FMHA_FAMILY_##name: return str;
        FMHA_FAMILY_MAP(X)
#undef X
    }
    return NULL;
}

fmha_status_t fmha_family_parse(const char *s, fmha_family_t *out)
{
    if (!s || !out) return FMHA_STATUS_INVALID_ARGUMENT;
#define X(name, value, str)         \
    if (strcmp(s, str) == 0) {      \
        *out = FMHA_FAMILY_##name;  \
        return FMHA_STATUS_SUCCESS; \
    }
    FMHA_FAMILY_MAP(X)
#undef X
    return FMHA_STATUS_INVALID_ARGUMENT;
}

const char *fmha_tensor_role_name(fmha_tensor_role_t role)
{
    switch (role) {
#define X(name, value, str) \
    case FMHA_TENSOR_##name: return str;
        FMHA_TENSOR_ROLE_MAP(X)
#undef X
    case FMHA_TENSOR_ROLE_END_: break;
    }
    return NULL;
}

fmha_status_t fmha_problem_create(fmha_problem_t **out)
{
    if (!out) return FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    fmha_problem_t *p = calloc(1, sizeof *p);
    if (!p) return FMHA_STATUS_ALLOC_FAILED;
    fmha__problem_defaults(p);
    *out = p;
    return FMHA_STATUS_SUCCESS;
}

void fmha_problem_destroy(fmha_problem_t *p) { free(p); }

fmha_status_t fmha_problem_reset(fmha_problem_t *p)
{
    if (!p) return FMHA_STATUS_INVALID_ARGUMENT;
    memset(p, 0, sizeof *p);
    fmha__problem_defaults(p);
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_clone(const fmha_problem_t *p, fmha_problem_t **out)
{
    if (!p || !out) return FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    fmha_problem_t *c = malloc(sizeof *c);
    if (!c) return FMHA_STATUS_ALLOC_FAILED;
    memcpy(c, p, sizeof *c);
    c->err[0] = '\0';
    *out = c;
    return FMHA_STATUS_SUCCESS;
}

const char *fmha_problem_last_error(const fmha_problem_t *p) { return p ? p->err : ""; }

static int role_known(fmha_tensor_role_t role) { return fmha_tensor_role_name(role) != NULL; }

fmha_status_t fmha_problem_set_tensor(fmha_problem_t *p, fmha_tensor_role_t role,
                                      fmha_dtype_t dtype, int rank, const int64_t *dims,
                                      const int64_t *strides)
{
    if (!p) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!role_known(role))
        return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT, "unknown tensor role %d", (int)role);
    const char *rn = fmha_tensor_role_name(role);
    if (!fmha_dtype_name(dtype))
        return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT,
                          "tensor %s: unknown dtype %d", rn, (int)dtype);
    if (rank < 1 || rank > FMHA_MAX_RANK)
        return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT,
                          "tensor %s: rank %d; expected 1..%d", rn, rank, FMHA_MAX_RANK);
    if (!dims)
        return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT, "tensor %s: dims is NULL", rn);
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0)
            return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT,
                              "[rule tensor.shape] tensor %s: dims[%d] = %lld is negative", rn,
                              d, (long long)dims[d]);
        if (strides && strides[d] < 0)
            return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT,
                              "[rule tensor.strides] tensor %s: strides[%d] = %lld is negative; "
                              "expected >= 0",
                              rn, d, (long long)strides[d]);
    }
    /* packed strides when none are given: the product of the inner dims, which must not
     * overflow (tensor.extent bounds a tensor at 2^59 elements) */
    int64_t packed[FMHA_MAX_RANK], step = 1;
    for (int d = rank - 1; d >= 0; d--) {
        packed[d] = step;
        if (d > 0 && (__builtin_mul_overflow(step, dims[d] > 0 ? dims[d] : 1, &step) || step > ((int64_t)1 << 59)))
            return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT,
                              "[rule tensor.extent] tensor %s: its dims from %d inward hold more than 2^59 elements, "
                              "so packed strides cannot describe it; expected a tensor of at most 2^59 elements",
                              rn, d);
    }
    fmha_tensor_desc_t *t = &p->tensors[role];
    memset(t, 0, sizeof *t);
    t->set = 1;
    t->dtype = dtype;
    t->rank = rank;
    for (int d = 0; d < rank; d++) {
        t->dims[d] = dims[d];
        t->strides[d] = strides ? strides[d] : packed[d];
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_clear_tensor(fmha_problem_t *p, fmha_tensor_role_t role)
{
    if (!p) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!role_known(role))
        return fmha__fail(p->err, FMHA_STATUS_INVALID_ARGUMENT, "unknown tensor role %d", (int)role);
    memset(&p->tensors[role], 0, sizeof p->tensors[role]);
    return FMHA_STATUS_SUCCESS;
}

int fmha_problem_has_tensor(const fmha_problem_t *p, fmha_tensor_role_t role)
{
    return p && role_known(role) && p->tensors[role].set;
}

fmha_status_t fmha_problem_get_tensor(const fmha_problem_t *p, fmha_tensor_role_t role,
                                      fmha_dtype_t *dtype, int *rank, int64_t *dims,
                                      int64_t *strides)
{
    if (!p || !dtype || !rank || !dims || !strides) return FMHA_STATUS_INVALID_ARGUMENT;
    char *err = (char *)p->err;
    if (!role_known(role))
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT, "unknown tensor role %d", (int)role);
    const fmha_tensor_desc_t *t = &p->tensors[role];
    if (!t->set)
        return fmha__fail(err, FMHA_STATUS_BAD_STATE, "tensor %s is not set",
                          fmha_tensor_role_name(role));
    *dtype = t->dtype;
    *rank = t->rank;
    memcpy(dims, t->dims, sizeof t->dims);
    memcpy(strides, t->strides, sizeof t->strides);
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_set_mask(fmha_problem_t *p, const char *mask)
{
    if (!p) return FMHA_STATUS_INVALID_ARGUMENT;
    fmha_mask_t m;
    fmha_status_t st = fmha_mask_parse(mask, &m, p->err, FMHA_ERR_LEN);
    if (st) return st;
    p->i64[FMHA_PARAM_WINDOW_LEFT] = m.left;
    p->i64[FMHA_PARAM_WINDOW_RIGHT] = m.right;
    p->i64[FMHA_PARAM_MASK_ALIGN] = m.align;
    p->i64[FMHA_PARAM_SINK_TOKENS] = m.sink_tokens;
    return FMHA_STATUS_SUCCESS;
}

double fmha__effective_scale(const fmha_problem_t *p)
{
    double s = p->f64[FMHA_PARAM_SCALE];
    return s != 0.0 ? s : 1.0 / sqrt((double)p->i64[FMHA_PARAM_HEAD_DIM_QK]);
}

uint32_t fmha__dropout_threshold(double p)
{
    const double thr = floor(p * 4294967296.0); /* p < 1: below 2^32 but for rounding at the top */
    return thr >= 4294967295.0 ? 4294967295u : (uint32_t)thr;
}

int64_t fmha__query_tokens(const fmha_problem_t *p)
{
    return p->i64[FMHA_PARAM_MODE] == FMHA_MODE_GROUP ? p->tensors[FMHA_TENSOR_Q].dims[0]
                                                      : p->i64[FMHA_PARAM_BATCH] * p->i64[FMHA_PARAM_SEQLEN_Q];
}

fmha_mask_t fmha__problem_mask(const fmha_problem_t *p)
{
    fmha_mask_t m;
    m.left = p->i64[FMHA_PARAM_WINDOW_LEFT];
    m.right = p->i64[FMHA_PARAM_WINDOW_RIGHT];
    m.align = (fmha_mask_align_t)p->i64[FMHA_PARAM_MASK_ALIGN];
    m.sink_tokens = p->i64[FMHA_PARAM_SINK_TOKENS];
    return m;
}
