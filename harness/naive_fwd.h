/* SPDX-License-Identifier: MIT */
/*
 * naive_fwd.h: naive forward references, written separately from the CPU backend so
 * that each can catch the other's mistakes. One (b, h, i) row at a time, no blocking,
 * no threads beyond a parallel loop over rows; tensors are read through the public
 * problem description (fmha_problem_get_*), never through backend internals.
 */
#ifndef FMHA_CHECK_NAIVE_FWD_H
#define FMHA_CHECK_NAIVE_FWD_H

#include <stdint.h>

#include "fmha/fmha.h"

typedef enum naive_precision {
    NAIVE_F64,  /* REFERENCE.md's math in double: the ground truth */
    NAIVE_LOWP  /* the kernel's precision: S and softmax in fp32, P rounded to the input type */
} naive_precision_t;

/* Dense results of the naive forward, indexed by global query token t (batch mode:
 * t = b*Sq + i; group mode: t = cu_seqlens_q[b] + i):
 *   o[(t*Hq + h)*Dv + d], lse[t*Hq + h],
 *   keep[((b*Hq + h)*Sq_max + i)*Sk_max + j] (dropout keep bits, 0 outside a sequence). */
typedef struct naive_out {
    int64_t tokens;  /* rows of o and lse */
    double *o, *lse;
    unsigned char *keep;
} naive_out_t;

/* Compute the forward of a validated problem. data[role] are the host pointers. In
 * batch mode a seqlens_kv tensor, when given, sets the keys of each sequence.
 * Returns 0, or -1 when out of memory. Free with naive_out_free. */
int naive_fwd(const fmha_problem_t *p, void *const *data, naive_precision_t prec, naive_out_t *out);
void naive_out_free(naive_out_t *out);

#endif /* FMHA_CHECK_NAIVE_FWD_H */
