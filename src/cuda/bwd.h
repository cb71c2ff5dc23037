/* SPDX-License-Identifier: MIT */
/* bwd.h: the backward family's row functions (bwd.c): dot_do_o, dq_dk_dv on mma.sync and
 * on sm90 wgmma, convert_dq. */
#ifndef FMHA_CUDA_BWD_H
#define FMHA_CUDA_BWD_H

#include "family.h"

int fmha__cuda_bwd_dot_accepts(const fmha_key_t *k);
int fmha__cuda_bwd_accepts_mma(const fmha_key_t *k);
int fmha__cuda_bwd_accepts_wgmma(const fmha_key_t *k);
int fmha__cuda_bwd_convert_accepts(const fmha_key_t *k);
int fmha__cuda_bwd_elementwise_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
int fmha__cuda_bwd_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
size_t fmha__cuda_bwd_dot_workspace(const fmha_key_t *k, const fmha_problem_t *p);
size_t fmha__cuda_bwd_workspace(const fmha_key_t *k, const fmha_problem_t *p);
const char *fmha__cuda_bwd_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                         char *why, size_t len);
fmha_status_t fmha__cuda_bwd_dot_launch(const cuda_launch_t *l);
fmha_status_t fmha__cuda_bwd_launch_mma(const cuda_launch_t *l);
fmha_status_t fmha__cuda_bwd_launch_wgmma(const cuda_launch_t *l);
fmha_status_t fmha__cuda_bwd_convert_launch(const cuda_launch_t *l);

#endif /* FMHA_CUDA_BWD_H */
