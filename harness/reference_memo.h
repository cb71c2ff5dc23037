/* SPDX-License-Identifier: MIT */
/*
 * reference_memo.h: the naive references of one case, kept for the next check of the
 * same case. A bench sweep checks every candidate kernel of a case on the same seeded
 * inputs, and the naive references in double cost far more than the kernels' runs; with a
 * memo the case pays for them once. A memo holds one case: checking another replaces it.
 *
 * The key is the case's identity: its full command line plus a hash of its per-sequence
 * lengths (fwd_case_key), which fixes every input. Cases and checks take the memo as an
 * optional argument; without one they compute the references and free them.
 */
#ifndef FMHA_HARNESS_REFERENCE_MEMO_H
#define FMHA_HARNESS_REFERENCE_MEMO_H

#include "fmha/fmha.h"
#include "naive_bwd.h"
#include "naive_fwd.h"

typedef struct reference_memo reference_memo_t;

reference_memo_t *reference_memo_create(void);
void reference_memo_destroy(reference_memo_t *m);
/* How many checks computed their references, and how many took them from the memo. */
void reference_memo_counts(const reference_memo_t *m, long *computed, long *reused);

/* The forward's references (NAIVE_F64 and NAIVE_LOWP) of problem p over data: the memo's
 * when it holds key, else computed and kept (replacing what it held). Owned by the memo.
 * Returns 0, or -1 when out of memory. */
int reference_memo_fwd(reference_memo_t *m, const char *key, const fmha_problem_t *p, void *const *data,
                       const naive_out_t **ref, const naive_out_t **low);
/* The same for the backward's gradients. */
int reference_memo_bwd(reference_memo_t *m, const char *key, const fmha_problem_t *p, void *const *data,
                       const naive_grads_t **ref, const naive_grads_t **low);

#endif /* FMHA_HARNESS_REFERENCE_MEMO_H */
