/* SPDX-License-Identifier: MIT */
/*
 * internal.h: the structures behind the public handles, shared by src/core and the
 * backends. Never included by cli/, harness/ or tests that exercise the public API only.
 */
#ifndef FMHA_CORE_INTERNAL_H
#define FMHA_CORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "fmha/fmha.h"

#define FMHA_ERR_LEN 1024

/* Number of slots in per-param and per-role tables; keys and roles index them directly. */
#define FMHA_PARAM_SLOTS 64
#define FMHA_ROLE_SLOTS ((int)FMHA_TENSOR_ROLE_END_)

typedef struct fmha_tensor_desc {
    int set;
    fmha_dtype_t dtype;
    int rank;
    int64_t dims[FMHA_MAX_RANK];
    int64_t strides[FMHA_MAX_RANK];
} fmha_tensor_desc_t;

/* Parameter values live in one union-free pair of arrays indexed by key, so adding a
 * parameter to FMHA_PARAM_MAP is the only change needed here. */
struct fmha_problem {
    int64_t i64[FMHA_PARAM_SLOTS];
    double f64[FMHA_PARAM_SLOTS];
    fmha_tensor_desc_t tensors[FMHA_ROLE_SLOTS];
    char err[FMHA_ERR_LEN];
};

struct registry;
struct tune_db;
struct plan_cache;

/* The device (or, for a virtual context, the arch) a context selects kernels for. */
typedef struct fmha_target {
    int arch;           /* karch_t */
    int is_virtual;     /* selects and explains; plan creation refuses (NOT_COMPILED) */
    int sm_count, smem_per_block, smem_per_sm, regs_per_sm;
} fmha_target_t;

struct fmha_backend_ops;

struct fmha_context {
    fmha_backend_t backend;
    int device;
    fmha_target_t target;
    const struct fmha_backend_ops *ops; /* backend.h */
    void *state;                        /* the backend's own (its init made it) */
    struct registry *registry;
    struct tune_db *tune;
    struct plan_cache *plans; /* plan_cache.h */
    uint64_t serial;          /* tells a context from an earlier one at the same address */
    /* Planning, explaining and listing read the registry and the tuning database;
     * registering kernels and loading a database change them: readers share the lock,
     * writers take it alone. */
    pthread_rwlock_t lock;
};

/* The buffer (FMHA_ERR_LEN) for the message of this thread's last failure on ctx: kept
 * per thread, so that threads using one context at once neither race on it nor read
 * each other's (context.c). */
char *fmha__ctx_err(const fmha_context_t *ctx);

/* A growable string (explain, describe, JSON). oom is set when an append failed. */
typedef struct strbuf {
    char *buf;
    size_t len, cap;
    int oom;
} strbuf_t;

void fmha__sb_printf(strbuf_t *sb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A backend entry point for one stage: computes stage `stage` of the plan's problem.
 * data[role] holds the pointer of each role (NULL when absent). */
struct fmha_plan;
typedef fmha_status_t (*fmha_stage_fn)(const struct fmha_plan *plan, int stage, void *const *data,
                                       void *workspace, struct CUstream_st *stream, char *err,
                                       size_t err_len);

#define FMHA_MAX_STAGES 4
#define FMHA_KERNEL_NAME_LEN 160

struct fmha_plan {
    fmha_problem_t problem; /* private copy, immutable */
    const struct fmha_backend_ops *ops; /* the backend that runs it */
    fmha_context_t *ctx;    /* the context it was planned on (outlives it) */
    int num_threads;
    int check_index;        /* device backends: check index tensors on the host first */
    int num_stages;
    char stage_kernel[FMHA_MAX_STAGES][FMHA_KERNEL_NAME_LEN];
    char stage_how[FMHA_MAX_STAGES][96]; /* the selector's reason: describe shows it */
    fmha_stage_fn stage_fn[FMHA_MAX_STAGES];
    void *stage_data[FMHA_MAX_STAGES]; /* backend data of each stage (loaded kernel), owned by the context */
    size_t stage_offset[FMHA_MAX_STAGES]; /* where each stage's workspace starts (256-aligned) */
    size_t workspace_bytes;
    char err[FMHA_ERR_LEN];
};

/* Stage `other`'s workspace, from the workspace pointer stage `stage` was given: stages
 * of one plan share buffers this way (split partials, the backward's dq accumulator). */
static inline void *fmha__stage_workspace(const struct fmha_plan *plan, void *ws, int stage, int other)
{
    return (char *)ws - plan->stage_offset[stage] + plan->stage_offset[other];
}

/* Record a printf-style message in a handle's error buffer and return status. Used as
 *   return fmha__fail(p->err, FMHA_STATUS_OUT_OF_RANGE, "batch (%lld) must be > 0", b); */
fmha_status_t fmha__fail(char *err, fmha_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
fmha_status_t fmha__vfail(char *err, fmha_status_t status, const char *fmt, va_list ap);

/* Whether plans made with opt check their index tensors before each execute: the option
 * or FMHA_CHECK_INDEX=1 (fmha_plan_options_t.check_index_data). */
int fmha__opt_check_index(const fmha_plan_options_t *opt);

/* Copy a message into a caller buffer with the snprintf contract. */
void fmha__copy_msg(char *dst, size_t len, const char *src);

/* Whether FMHA_DEBUG asks for the library's notes on stderr (set, and not "0"). */
int fmha__debug_enabled(void);

/* Parameter table access (params.c). */
int fmha__param_known(fmha_param_t k);
const char *fmha__param_name(fmha_param_t k);
void fmha__problem_defaults(fmha_problem_t *p);

/* Shorthand getters for validated problems; the key must be of the right type. */
static inline int64_t fmha__i(const fmha_problem_t *p, fmha_param_t k) { return p->i64[k]; }
static inline double fmha__f(const fmha_problem_t *p, fmha_param_t k) { return p->f64[k]; }
static inline const fmha_tensor_desc_t *fmha__t(const fmha_problem_t *p, fmha_tensor_role_t r)
{
    return p->tensors[r].set ? &p->tensors[r] : 0;
}

/* The effective softmax scale: SCALE, or 1/sqrt(Dqk) when SCALE is 0. */
double fmha__effective_scale(const fmha_problem_t *p);
/* REFERENCE.md's dropout threshold: min(floor(p * 2^32), 2^32 - 1); an element is kept iff
 * its Philox word is >= it. */
uint32_t fmha__dropout_threshold(double p);
/* Query rows of q: batch x seqlen_q, or q's packed tokens in group mode (what split-KV
 * partials are indexed by). */
int64_t fmha__query_tokens(const fmha_problem_t *p);
/* The mask of a problem as the public struct. */
fmha_mask_t fmha__problem_mask(const fmha_problem_t *p);
/* Keys [*j0, *j1): every key that any of the query rows [i0, i1) can see under m lies in
 * it (each row sees a part; with sink tokens it starts at key 0). The CPU references load
 * and scan only these keys, so a long sequence under a short window costs its window. */
void fmha__mask_key_span(const fmha_mask_t *m, int64_t sq, int64_t sk, int64_t i0, int64_t i1, int64_t *j0,
                         int64_t *j1);

/* Every rule of p's family (fmha_problem_validate's checks), the first broken one's message
 * in err (FMHA_ERR_LEN bytes; "" on success). Nothing is written into p: planning reads a
 * const problem that other threads may be planning at the same time. */
fmha_status_t fmha__problem_check(const fmha_problem_t *p, char *err);
/* The rules that depend on tensor contents (cu_seqlens, seqlens_kv, page indices, cache
 * rows, rotary positions); data[role] are host pointers. Host backends call it at
 * execute. Writes a "[rule ...]" message to err. */
fmha_status_t fmha__validate_data(const fmha_problem_t *p, void *const *data, char *err, size_t err_len);
/* The same rules for data on a device: the index tensors copied to the host in stream
 * order (check_index_data). */
struct CUstream_st;
fmha_status_t fmha__validate_device_data(const struct fmha_plan *plan, void *const *data, struct CUstream_st *stream,
                                         char *err, size_t err_len);

#endif /* FMHA_CORE_INTERNAL_H */
