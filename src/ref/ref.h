/* SPDX-License-Identifier: MIT */
/* ref.h: entry points of the CPU backend (the oracle every GPU kernel is tested against).
 * Each is a stage function (fmha_stage_fn): data[role] holds the host pointer of each
 * role (NULL when the role is absent); workspace is the stage's slice. */
#ifndef FMHA_REF_REF_H
#define FMHA_REF_REF_H

#include "../core/internal.h"

/* Threads the CPU backend uses for a request (0 = the OpenMP default). */
int fmha__ref_threads(int requested);

/* Attention over any K/V source (ref_attn.c): fwd, fwd_pagedkv, batch_prefill, and the
 * split stage of fwd_splitkv; then the combine stage of fwd_splitkv. */
fmha_status_t fmha__ref_attn(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                             struct CUstream_st *stream, char *err, size_t err_len);
size_t fmha__ref_attn_workspace(const fmha_problem_t *p, int threads);
fmha_status_t fmha__ref_combine(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                struct CUstream_st *stream, char *err, size_t err_len);
/* The number of KV splits a fwd_splitkv plan uses: num_splits, or chosen from the shape
 * and the thread count; 1 for the other families. */
int fmha__ref_num_splits(const fmha_problem_t *p, int threads);

/* appendkv (ref_appendkv.c). */
fmha_status_t fmha__ref_appendkv(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                 struct CUstream_st *stream, char *err, size_t err_len);
size_t fmha__ref_appendkv_workspace(const fmha_problem_t *p, int threads);

/* The backward's three stages (ref_bwd.c). */
fmha_status_t fmha__ref_bwd_dot(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                struct CUstream_st *stream, char *err, size_t err_len);
size_t fmha__ref_bwd_dot_workspace(const fmha_problem_t *p, int threads);
fmha_status_t fmha__ref_bwd_main(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                 struct CUstream_st *stream, char *err, size_t err_len);
size_t fmha__ref_bwd_main_workspace(const fmha_problem_t *p, int threads);
fmha_status_t fmha__ref_bwd_convert(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                    struct CUstream_st *stream, char *err, size_t err_len);

#endif /* FMHA_REF_REF_H */
