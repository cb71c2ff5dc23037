/* SPDX-License-Identifier: MIT */
/* appendkv.h: the appendkv family's row functions (appendkv.c) for the kernel table
 * (families.c): new keys and values into a contiguous or paged cache, RoPE on k and q. */
#ifndef FMHA_CUDA_APPENDKV_H
#define FMHA_CUDA_APPENDKV_H

#include "family.h"

int fmha__cuda_appendkv_accepts(const fmha_key_t *k);
int fmha__cuda_appendkv_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
const char *fmha__cuda_appendkv_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                              char *why, size_t len);
fmha_status_t fmha__cuda_appendkv_launch(const cuda_launch_t *l);

#endif /* FMHA_CUDA_APPENDKV_H */
