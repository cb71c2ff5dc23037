/* SPDX-License-Identifier: MIT */
/*
 * ref_tok.h: how the CPU backend walks token-major tensors (q, o, do, dq, ... and the
 * contiguous k, v of the forward and backward):
 *   batch mode  X[b, i, h, d] = b*s0 + i*s1 + h*s2 + d*s3
 *   group mode  X[t, h, d]    = t*s0 + h*s1 + d*s2, token t = cu_seqlens[b] + i
 */
#ifndef FMHA_REF_TOK_H
#define FMHA_REF_TOK_H

#include "../core/internal.h"

typedef struct tok_view {
    const fmha_tensor_desc_t *t;
    int64_t tok, head, dim; /* strides */
} tok_view_t;

static inline tok_view_t fmha__tok_view(const fmha_tensor_desc_t *t, int group)
{
    tok_view_t v = {t, 0, 0, 0};
    if (!t) return v;
    int o = group ? 0 : 1; /* batch mode has a leading batch dim */
    v.tok = t->strides[o];
    v.head = t->strides[o + 1];
    v.dim = t->strides[o + 2];
    return v;
}

/* Element offset of (sequence b, token 0) in a token-major tensor. */
static inline int64_t fmha__seq_base(const fmha_tensor_desc_t *t, int group, int64_t b, const int32_t *cu)
{
    return group ? (int64_t)cu[b] * t->strides[0] : b * t->strides[0];
}

#endif /* FMHA_REF_TOK_H */
