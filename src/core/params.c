/* SPDX-License-Identifier: MIT */
/*
 * params.c: the parameter table (generated from FMHA_PARAM_MAP), typed setters and
 * getters with bounds, defaults and reset. Setters never clamp: a value out of bounds
 * is refused and the old value stays.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct param_row {
    fmha_param_t key;
    const char *name, *doc;
    fmha_param_type_t type;
    double def, lo, hi;        /* meaningful for F64 rows */
    int64_t def_i, lo_i, hi_i; /* meaningful for I64 rows */
} param_row_t;

/* Each row fills only the columns of its type, so that no F64 bound (1e300) is ever
 * converted to int64 (undefined) and no I64 bound loses bits as a double. */
#define AS_INT_I64(x) ((int64_t)(x))
#define AS_INT_F64(x) ((int64_t)0)
#define AS_DBL_I64(x) (0.0)
#define AS_DBL_F64(x) ((double)(x))

static const param_row_t PARAMS[] = {
#define X(NAME, key, name, type, def, lo, hi, doc)                                        \
    {FMHA_PARAM_##NAME, name, doc, FMHA_PARAM_TYPE_##type, AS_DBL_##type(def),              \
     AS_DBL_##type(lo), AS_DBL_##type(hi), AS_INT_##type(def), AS_INT_##type(lo),          \
     AS_INT_##type(hi)},
    FMHA_PARAM_MAP(X)
#undef X
};
#define NUM_PARAMS (sizeof PARAMS / sizeof PARAMS[0])

/* Every key must fit the per-problem value arrays; checked once here at compile time. */
#define X(NAME, key, name, type, def, lo, hi, doc) \
    _Static_assert((key) > 0 && (key) < FMHA_PARAM_SLOTS, "param key " #NAME " out of slots");
FMHA_PARAM_MAP(X)
#undef X

static const param_row_t *row_of(fmha_param_t k)
{
    for (size_t i = 0; i < NUM_PARAMS; i++)
        if (PARAMS[i].key == k) return &PARAMS[i];
    return NULL;
}

int fmha__param_known(fmha_param_t k) { return row_of(k) != NULL; }

const char *fmha__param_name(fmha_param_t k)
{
    const param_row_t *r = row_of(k);
    return r ? r->name : "?";
}

void fmha__problem_defaults(fmha_problem_t *p)
{
    memset(p->i64, 0, sizeof p->i64);
    memset(p->f64, 0, sizeof p->f64);
    for (size_t i = 0; i < NUM_PARAMS; i++) {
        p->i64[PARAMS[i].key] = PARAMS[i].def_i;
        p->f64[PARAMS[i].key] = PARAMS[i].def;
    }
}

fmha_status_t fmha_param_info(fmha_param_t k, fmha_param_info_t *info)
{
    if (!info || info->struct_size < sizeof(fmha_param_info_t)) return FMHA_STATUS_INVALID_ARGUMENT;
    const param_row_t *r = row_of(k);
    if (!r) return FMHA_STATUS_UNKNOWN_PARAM;
    uint32_t size = info->struct_size;
    memset(info, 0, sizeof *info);
    info->struct_size = size;
    info->name = r->name;
    info->doc = r->doc;
    info->type = r->type;
    info->default_i64 = r->def_i;
    info->lo_i64 = r->lo_i;
    info->hi_i64 = r->hi_i;
    info->default_f64 = r->def;
    info->lo_f64 = r->lo;
    info->hi_f64 = r->hi;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_param_lookup(const char *name, fmha_param_t *out)
{
    if (!name || !out) return FMHA_STATUS_INVALID_ARGUMENT;
    for (size_t i = 0; i < NUM_PARAMS; i++)
        if (strcmp(PARAMS[i].name, name) == 0) {
            *out = PARAMS[i].key;
            return FMHA_STATUS_SUCCESS;
        }
    return FMHA_STATUS_UNKNOWN_PARAM;
}

/* Shared front half of the four accessors: handle, key and type checks. */
static fmha_status_t typed_row(const fmha_problem_t *p, fmha_param_t k, fmha_param_type_t want,
                               const param_row_t **out)
{
    char *err = (char *)p->err; /* the error buffer is mutable even on a const handle */
    const param_row_t *r = row_of(k);
    if (!r) return fmha__fail(err, FMHA_STATUS_UNKNOWN_PARAM, "unknown parameter key %d", (int)k);
    if (r->type != want)
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                          "parameter %s is of type %s; use the fmha_problem_*_%s accessor",
                          r->name, r->type == FMHA_PARAM_TYPE_I64 ? "int64" : "double",
                          r->type == FMHA_PARAM_TYPE_I64 ? "i64" : "f64");
    *out = r;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_set_i64(fmha_problem_t *p, fmha_param_t k, int64_t v)
{
    if (!p) return FMHA_STATUS_INVALID_ARGUMENT;
    const param_row_t *r = NULL;
    fmha_status_t st = typed_row(p, k, FMHA_PARAM_TYPE_I64, &r);
    if (st) return st;
    if (v < r->lo_i || v > r->hi_i)
        return fmha__fail(p->err, FMHA_STATUS_OUT_OF_RANGE,
                          "[rule param.range] %s = %lld is out of range; expected %lld..%lld",
                          r->name, (long long)v, (long long)r->lo_i, (long long)r->hi_i);
    p->i64[k] = v;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_set_f64(fmha_problem_t *p, fmha_param_t k, double v)
{
    if (!p) return FMHA_STATUS_INVALID_ARGUMENT;
    const param_row_t *r = NULL;
    fmha_status_t st = typed_row(p, k, FMHA_PARAM_TYPE_F64, &r);
    if (st) return st;
    if (!isfinite(v))
        return fmha__fail(p->err, FMHA_STATUS_OUT_OF_RANGE,
                          "[rule param.finite] %s = %g is not finite; expected a finite number",
                          r->name, v);
    if (v < r->lo || v > r->hi)
        return fmha__fail(p->err, FMHA_STATUS_OUT_OF_RANGE,
                          "[rule param.range] %s = %.17g is out of range; expected %.17g..%.17g",
                          r->name, v, r->lo, r->hi);
    p->f64[k] = v;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_get_i64(const fmha_problem_t *p, fmha_param_t k, int64_t *v)
{
    if (!p || !v) return FMHA_STATUS_INVALID_ARGUMENT;
    const param_row_t *r = NULL;
    fmha_status_t st = typed_row(p, k, FMHA_PARAM_TYPE_I64, &r);
    if (st) return st;
    *v = p->i64[k];
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_problem_get_f64(const fmha_problem_t *p, fmha_param_t k, double *v)
{
    if (!p || !v) return FMHA_STATUS_INVALID_ARGUMENT;
    const param_row_t *r = NULL;
    fmha_status_t st = typed_row(p, k, FMHA_PARAM_TYPE_F64, &r);
    if (st) return st;
    *v = p->f64[k];
    return FMHA_STATUS_SUCCESS;
}
