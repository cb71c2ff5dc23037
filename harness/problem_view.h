/* SPDX-License-Identifier: MIT */
/*
 * problem_view.h: how the naive references read a problem, through the public API only:
 * a tensor's description with its host pointer, and parameters by key.
 */
#ifndef FMHA_CHECK_PROBLEM_VIEW_H
#define FMHA_CHECK_PROBLEM_VIEW_H

#include <string.h>

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

#endif /* FMHA_CHECK_PROBLEM_VIEW_H */
