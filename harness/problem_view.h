/* SPDX-License-Identifier: MIT */
/*
 * problem_view.h: how the naive references read a problem, through the public API only:
 * a tensor's description with its host pointer, and parameters by key.
 */
#ifndef FMHA_CHECK_PROBLEM_VIEW_H
#define FMHA_CHECK_PROBLEM_VIEW_H

#include <string.h>

#include "../src/core/dtype.h"
#include "fmha/fmha.h"

typedef struct tensor {
    int set;
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    const void *data;
} tensor_t;

static inline tensor_t get(const fmha_problem_t *p, void *const *data, fmha_tensor_role_t r)
{
    tensor_t t;
    memset(&t, 0, sizeof t);
    if (fmha_problem_has_tensor(p, r)) {
        fmha_problem_get_tensor(p, r, &t.dt, &t.rank, t.dims, t.str);
        t.set = 1;
        t.data = data[r];
    }
    return t;
}

static inline int64_t geti(const fmha_problem_t *p, fmha_param_t k)
{
    int64_t v = 0;
    fmha_problem_get_i64(p, k, &v);
    return v;
}

static inline double getf(const fmha_problem_t *p, fmha_param_t k)
{
    double v = 0;
    fmha_problem_get_f64(p, k, &v);
    return v;
}

/* Rows [tok0, tok0 + n) of head h of a Q/K/V/O-shaped tensor, D values each, into
 * rows[n][D] as the floats fmha_load_f32 gives (exact for every input type): the
 * references read a (batch, head)'s rows from there in order, rather than decode an element
 * a multiply-add (about 8 ns each, most of a -v=1 run). In group mode token is global and
 * b unused. */
static inline void gather_rows(const tensor_t *t, int group, int64_t b, int64_t tok0, int64_t n, int64_t h, int64_t D,
                               float *rows)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t d = 0; d < D; d++) {
            const int64_t tok = tok0 + r;
            const int64_t off = group ? tok * t->str[0] + h * t->str[1] + d * t->str[2]
                                      : b * t->str[0] + tok * t->str[1] + h * t->str[2] + d * t->str[3];
            rows[r * D + d] = fmha_load_f32(t->data, t->dt, off);
        }
}

#endif /* FMHA_CHECK_PROBLEM_VIEW_H */
