/* SPDX-License-Identifier: MIT */
/*
 * naive_bwd.h: a naive backward, written separately from the CPU backend's: per (b, h)
 * it recomputes the softmax from scratch (its own row max and sum, not the lse given to
 * the backend) and applies REFERENCE.md "Backward" formula by formula. Tensors are read
 * through the public problem description.
 */
#ifndef FMHA_CHECK_NAIVE_BWD_H
#define FMHA_CHECK_NAIVE_BWD_H

#include "naive_fwd.h"

/* Dense gradients: dq [tokens_q][Hq][Dqk], dk [tokens_k][Hk][Dqk], dv [tokens_k][Hk][Dv]
 * (token = b*S + i in batch mode, the global token in group mode), dbias in the bias
 * tensor's dims [Bb][Hb][Sq][Sk], dsink [Hq]. */
typedef struct naive_grads {
    int64_t tokens_q, tokens_k;
    double *dq, *dk, *dv, *dbias, *dsink;
} naive_grads_t;

/* Gradients of sum(dO * O) for a validated bwd problem; data[role] are host pointers
 * (q, k, v, o, do, bias, alibi, sink, cu_seqlens). NAIVE_LOWP works in the kernel's
 * precision: fp32 scores and softmax, P and dS rounded to the input type before the
 * products. Returns 0, or -1 when out of memory. */
int naive_bwd(const fmha_problem_t *p, void *const *data, naive_precision_t prec, naive_grads_t *g);
void naive_grads_free(naive_grads_t *g);

#endif /* FMHA_CHECK_NAIVE_BWD_H */
