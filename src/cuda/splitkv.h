/* SPDX-License-Identifier: MIT */
/* splitkv.h: the splitkv family's row functions (splitkv.c): its first stage on the decode
 * kernel or on the forward's mma.sync kernel (FMHA_SPLIT), and its combine kernel. */
#ifndef FMHA_CUDA_SPLITKV_H
#define FMHA_CUDA_SPLITKV_H

#include "family.h"

int fmha__cuda_splitkv_accepts(const fmha_key_t *k);
int fmha__cuda_splitkv_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
size_t fmha__cuda_splitkv_workspace(const fmha_key_t *k, const fmha_problem_t *p);
const char *fmha__cuda_splitkv_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                             char *why, size_t len);
fmha_status_t fmha__cuda_splitkv_launch(const cuda_launch_t *l);

int fmha__cuda_decode_accepts(const fmha_key_t *k);
fmha_status_t fmha__cuda_decode_launch(const cuda_launch_t *l);

int fmha__cuda_combine_accepts(const fmha_key_t *k);
int fmha__cuda_combine_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
const char *fmha__cuda_combine_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                             char *why, size_t len);
fmha_status_t fmha__cuda_combine_launch(const cuda_launch_t *l);

/* The split count of a splitkv problem on key k's arch, and one line saying why
 * ("given" or the heuristic's reason) into why. */
int fmha__cuda_num_splits(const fmha_key_t *k, const fmha_problem_t *p, char *why, size_t len);

#endif /* FMHA_CUDA_SPLITKV_H */
