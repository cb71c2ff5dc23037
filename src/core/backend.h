/* SPDX-License-Identifier: MIT */
/*
 * backend.h: what the core knows of a backend -- one table of operations. The core
 * (context, plan, select) calls a backend only through it and includes no backend
 * header; each backend defines its table (src/ref/ref_backend.c, src/cuda/backend.c)
 * and the linker joins them.
 *
 * A context holds its backend's table and an opaque state the backend made at init.
 * Every operation takes the context; memory operations work on the backend's memory
 * (host for the CPU, device for CUDA).
 */
#ifndef FMHA_CORE_BACKEND_H
#define FMHA_CORE_BACKEND_H

#include <stddef.h>

#include "internal.h"

struct fmha_key;

typedef struct fmha_backend_ops {
    const char *name;     /* "cpu", "cuda" */
    fmha_backend_t kind;  /* what fmha_context_backend() reports */
    int host_data;        /* tensors are host memory: the core validates their contents */

    /* Why the backend cannot be used in this process, or NULL when it can (static). */
    const char *(*unavailable)(void);
    /* One line for fmha_build_info() ("openmp=on", "cuda=on nvrtc=on", ...). */
    void (*build_info)(char *buf, size_t len);

    /* Open `device`: make the state, fill ctx->target and register the kernels this
     * build can run there. On failure ctx->err says why; release is still called. */
    fmha_status_t (*init)(fmha_context_t *ctx, int device);
    void (*release)(fmha_context_t *ctx);
    /* Whether the backend has kernels of a kernel family (kfamily_t) on some device:
     * what a refusal names when a context's backend has none. */
    int (*has_family)(int kfamily);
    /* Register descriptors of `arch` for a virtual context (plans, explain; no
     * execution), each with the backend's own plan-time checks. NULL: none. */
    int (*register_virtual)(fmha_context_t *ctx, int arch);

    fmha_status_t (*alloc)(fmha_context_t *ctx, size_t bytes, void **ptr);
    void (*free)(fmha_context_t *ctx, void *ptr);
    fmha_status_t (*copy)(fmha_context_t *ctx, void *dst, const void *src, size_t bytes, int to_device);
    fmha_status_t (*synchronize)(fmha_context_t *ctx);
    /* Copy n device buffers to the host in the order of `stream` (the data the calls
     * before it on the stream wrote) and wait for them; a failure's message goes to err
     * (FMHA_ERR_LEN bytes). Refused while the stream captures a graph. NULL on host
     * backends. */
    fmha_status_t (*read_on_stream)(fmha_context_t *ctx, struct CUstream_st *stream, int n, void *const *dst,
                                    const void *const *src, const size_t *bytes, char *err);

    /* Heuristic hooks. The worker threads a plan runs with for a request (0 = the
     * backend's default); the lines a plan's description adds for this backend. */
    int (*plan_threads)(int requested);
    void (*describe_plan)(const struct fmha_plan *plan, strbuf_t *out);
    /* Optional: lines about one stage's kernel on problem p (a split count and why), for
     * fmha_explain, which selects without building a plan. */
    void (*describe_stage)(const struct fmha_key *key, const fmha_problem_t *p, int threads, strbuf_t *out);
} fmha_backend_ops_t;

extern const fmha_backend_ops_t fmha__cpu_backend;  /* src/ref/ref_backend.c */
extern const fmha_backend_ops_t fmha__cuda_backend; /* src/cuda/backend.c */

/* The name of a backend other than ctx's that has kernels of kfamily, or NULL. */
const char *fmha__backend_with_family(const fmha_context_t *ctx, int kfamily);

#endif /* FMHA_CORE_BACKEND_H */
