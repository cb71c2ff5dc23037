/* SPDX-License-Identifier: MIT */
/* fwd.h: the forward family's row functions (fwd.c) for the kernel table (families.c). */
#ifndef FMHA_CUDA_FWD_H
#define FMHA_CUDA_FWD_H

#include "family.h"

int fmha__cuda_fwd_accepts_mma(const fmha_key_t *k);
int fmha__cuda_fwd_accepts_wgmma(const fmha_key_t *k);
/* fwd_pagedkv (batch mode) and batch_prefill (group mode) over a paged cache */
int fmha__cuda_paged_accepts_mma(const fmha_key_t *k);
int fmha__cuda_paged_accepts_wgmma(const fmha_key_t *k);
int fmha__cuda_fwd_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
int fmha__cuda_fwd_threads(const fmha_key_t *k);
const char *fmha__cuda_fwd_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                         char *why, size_t len);
fmha_status_t fmha__cuda_fwd_launch_mma(const cuda_launch_t *l);

/* Shared with the families that run on the forward's kernels (splitkv.c): the params of
 * the launch's problem and pointers (INVALID_ARGUMENT for a misaligned pointer), and a
 * launch of the stage's kernel on the grid. */
struct fmha_fwd_params;
fmha_status_t fmha__cuda_fwd_params(const cuda_launch_t *l, struct fmha_fwd_params *a);
fmha_status_t fmha__cuda_launch(const cuda_launch_t *l, unsigned gx, unsigned gy, unsigned gz, void **args);
fmha_status_t fmha__cuda_fwd_launch_wgmma(const cuda_launch_t *l);
/* The batch, row and head element strides of a token-major tensor ([B, S, H, D], or
 * [tokens, H, D] in group mode, where the batch stride is 0). */
void fmha__cuda_row_strides(const fmha_tensor_desc_t *t, int group, int64_t *batch, int64_t *row, int64_t *head);
/* SUCCESS when the launch's pointer of each role in `rows` is 16-byte aligned (the kernels
 * move rows in 16-byte vectors), else INVALID_ARGUMENT with rule cuda.alignment in l->err. */
fmha_status_t fmha__cuda_alignment_check(const cuda_launch_t *l, const fmha_tensor_role_t *rows, int n);
/* NULL when each tensor of `rows` that the problem has keeps its head dim contiguous and
 * its other strides multiples of 8 elements (rule cuda.layout), else why. */
const char *fmha__cuda_layout_why(const fmha_problem_t *p, const fmha_tensor_role_t *rows, int n, char *why, size_t len);
/* NULL when TMA takes the batch-mode strides of each tensor of `roles` (nonzero multiples
 * of 16 bytes), else why: "[rule <rule>] ...; <kernel> copies by TMA". */
const char *fmha__cuda_tma_why(const fmha_problem_t *p, const fmha_tensor_role_t *roles, int n, const char *rule,
                               const char *kernel, char *why, size_t len);
/* One TMA map over a batch-mode Q, K or V (or a page pool, encode_page_maps): dims (head
 * dim, seqlen, heads, batch), boxes of 64 x rows (128-byte rows, the kernel's swizzled
 * blocks); rows past seqlen read as zeros. Nonzero when the driver refuses the layout. */
CUresult fmha__cuda_encode_map(const cuda_api_t *cu, uint64_t *map, uint64_t addr, int hdim, int seqlen, int heads,
                               int batch, int64_t row, int64_t head, int64_t bstride, int rows, int elem);

#endif /* FMHA_CUDA_FWD_H */
