/* SPDX-License-Identifier: MIT */
/*
 * validate.h: the helpers every family's validation rules are written with. Each
 * failure message starts with "[rule <id>]" and names what was found and what was
 * expected; docs/rules.md lists the ids.
 */
#ifndef FMHA_CORE_VALIDATE_H
#define FMHA_CORE_VALIDATE_H

#include "internal.h"

typedef struct vctx {
    const fmha_problem_t *p;
    char *err;
} vctx_t;

#define VFAIL(v, status, ...) fmha__fail((v)->err, (status), __VA_ARGS__)
#define VINVALID FMHA_STATUS_INVALID_PROBLEM
#define VTRY(expr)                                  \
    do {                                            \
        fmha_status_t st_ = (expr);                 \
        if (st_ != FMHA_STATUS_SUCCESS) return st_; \
    } while (0)

/* In an expected-dims list: any extent is accepted. */
#define VANY (-1)

fmha_status_t fmha__v_positive(vctx_t *v, fmha_param_t k);
fmha_status_t fmha__v_require(vctx_t *v, fmha_tensor_role_t r, const char *why);
fmha_status_t fmha__v_dtype(vctx_t *v, fmha_tensor_role_t r, fmha_dtype_t want, const char *expected_text);
/* Rank and dims; a dim flagged in bcast_mask may also be 1. */
fmha_status_t fmha__v_shape(vctx_t *v, fmha_tensor_role_t r, int rank, const int64_t *want, unsigned bcast_mask,
                            const char *layout);

/* Family rules, each after the shared ones (validate.c). */
fmha_status_t fmha__validate_kv_families(vctx_t *v); /* splitkv, pagedkv, batch_prefill */
fmha_status_t fmha__validate_appendkv(vctx_t *v);
fmha_status_t fmha__validate_bwd(vctx_t *v);

/* Shared by the attention families: Q/O/LSE, bias, ALiBi, sink, dropout mask, and the
 * varlen tensors of the query side. */
fmha_status_t fmha__validate_query_side(vctx_t *v);
/* Contiguous K/V: batch [B, Sk, Hk, D] (cache_batch_rows rows when > 0) or group
 * [total_k, Hk, D] with cu_seqlens_kv. */
fmha_status_t fmha__validate_kv_contiguous(vctx_t *v, int64_t cache_batch_rows);

#endif /* FMHA_CORE_VALIDATE_H */
