/* ref.h: entry points of the CPU backend (the oracle every GPU kernel is tested against). */
#ifndef FMHA_REF_REF_H
#define FMHA_REF_REF_H

#include "../core/internal.h"

/* Forward attention, batch and group mode, every feature of REFERENCE.md.
 * data[role] holds the host pointer of each role (NULL when the role is absent). */
fmha_status_t fmha__ref_fwd(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                            struct CUstream_st *stream, char *err, size_t err_len);

/* Threads the CPU backend uses for a request (0 = the OpenMP default). */
int fmha__ref_threads(int requested);
/* Workspace bytes of fmha__ref_fwd with the given thread count: per-thread scratch. */
size_t fmha__ref_fwd_workspace(const fmha_problem_t *p, int threads);

struct registry;
/* Register the CPU backend's kernels. Returns 0 or -1 (out of memory). */
int fmha__ref_register(struct registry *r);

#endif /* FMHA_REF_REF_H */
