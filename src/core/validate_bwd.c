/* SPDX-License-Identifier: MIT */
/*
 * validate_bwd.c: the rules of the backward. It takes the forward's tensors (q, k, v,
 * o, lse and the optional bias, ALiBi and sink) plus do, and writes dq, dk, dv and,
 * when asked, dbias and dsink.
 */
#include <stdio.h>

#include "validate.h"

#define rname fmha_tensor_role_name

/* A gradient has its tensor's shape; in group mode the token dim comes from q or k. */
static fmha_status_t same_shape(vctx_t *v, fmha_tensor_role_t grad, fmha_tensor_role_t of)
{
    const fmha_tensor_desc_t *t = fmha__t(v->p, of);
    char layout[64];
    snprintf(layout, sizeof layout, "the shape of %s", rname(of));
    return fmha__v_shape(v, grad, t->rank, t->dims, 0, layout);
}

fmha_status_t fmha__validate_bwd(vctx_t *v)
{
    const fmha_problem_t *p = v->p;
    const char *need = "the backward needs q, k, v, o, lse, do, dq, dk and dv";
    const fmha_tensor_role_t req[] = {FMHA_TENSOR_Q,  FMHA_TENSOR_K,  FMHA_TENSOR_V,  FMHA_TENSOR_O, FMHA_TENSOR_LSE,
                                      FMHA_TENSOR_DO, FMHA_TENSOR_DQ, FMHA_TENSOR_DK, FMHA_TENSOR_DV};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) VTRY(fmha__v_require(v, req[i], need));
    VTRY(fmha__validate_query_side(v));
    VTRY(fmha__validate_kv_contiguous(v, 0));
    VTRY(same_shape(v, FMHA_TENSOR_DO, FMHA_TENSOR_O));
    VTRY(same_shape(v, FMHA_TENSOR_DQ, FMHA_TENSOR_Q));
    VTRY(same_shape(v, FMHA_TENSOR_DK, FMHA_TENSOR_K));
    VTRY(same_shape(v, FMHA_TENSOR_DV, FMHA_TENSOR_V));

    const fmha_tensor_desc_t *bias = fmha__t(p, FMHA_TENSOR_BIAS), *dbias = fmha__t(p, FMHA_TENSOR_DBIAS);
    if (dbias && !bias)
        return VFAIL(v, VINVALID, "[rule bwd.dbias] dbias is set without bias; dbias is the gradient of bias");
    if (dbias) {
        VTRY(same_shape(v, FMHA_TENSOR_DBIAS, FMHA_TENSOR_BIAS));
        VTRY(fmha__v_dtype(v, FMHA_TENSOR_DBIAS, bias->dtype, "the dtype of bias"));
    }
    if (fmha__t(p, FMHA_TENSOR_DSINK) && !fmha__t(p, FMHA_TENSOR_SINK))
        return VFAIL(v, VINVALID, "[rule bwd.dsink] dsink is set without sink; dsink is the gradient of sink");
    VTRY(fmha__v_shape(v, FMHA_TENSOR_DSINK, 1, (int64_t[]){fmha__i(p, FMHA_PARAM_NUM_HEADS_Q)}, 0, "[Hq]"));
    return FMHA_STATUS_SUCCESS;
}
