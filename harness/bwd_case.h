/* SPDX-License-Identifier: MIT */
/*
 * bwd_case.h: one backward test case through the public API. Inputs come from a forward
 * case (same flags, same data); o and lse are the naive forward's in double, do is
 * random; the gradients are checked against the naive backward with REFERENCE.md's
 * accuracy rule (factor 2; 3 in group mode; 8 with ALiBi). Host buffers, with device
 * copies on a CUDA context (bwd_case_bind).
 */
#ifndef FMHA_CHECK_BWD_CASE_H
#define FMHA_CHECK_BWD_CASE_H

#include "fwd_case.h"

typedef struct bwd_config {
    fwd_config_t fwd;  /* problem, data and features (family and cache fields unused) */
    int dbias;         /* also compute dbias (needs an elementwise bias) */
    int deterministic; /* ask for bitwise-reproducible gradients */
    int library_outputs; /* o and lse from the library's forward on the case's context
                            (bwd_case_forward), not the naive one in double: for timing
                            large shapes; the naive check still uses them as given */
} bwd_config_t;

typedef struct bwd_case bwd_case_t;

fmha_status_t bwd_case_create(const bwd_config_t *c, bwd_case_t **out, char *why, size_t why_len);
void bwd_case_destroy(bwd_case_t *bc);
/* The backward problem of c without any data (for explain): tensors described only. */
fmha_status_t bwd_problem_describe(const bwd_config_t *c, fmha_problem_t **out, char *why, size_t why_len);
/* The forward case whose o and lse a case with library_outputs takes (bwd_case_forward),
 * without data (describe_only); the caller destroys it. */
fmha_status_t bwd_forward_describe(const bwd_config_t *c, fwd_case_t **out, char *why, size_t why_len);
/* On a CUDA context: device copies of every input and gradient, the workspace on the
 * device; execute then uploads the poisoned gradients and reads them back. A no-op on
 * the CPU. */
fmha_status_t bwd_case_bind(bwd_case_t *bc, fmha_context_t *ctx, char *why, size_t why_len);
/* o and lse by the library's forward on ctx (after bind), replacing the naive ones. */
fmha_status_t bwd_case_forward(bwd_case_t *bc, fmha_context_t *ctx, char *why, size_t why_len);
const fmha_problem_t *bwd_case_problem(const bwd_case_t *bc);
/* The host pointer of each role (for callers that build their own execute). */
void *const *bwd_case_data(const bwd_case_t *bc);

/* Poison the gradients and execute once. */
fmha_status_t bwd_case_execute(bwd_case_t *bc, const fmha_plan_t *plan);
/* Mean milliseconds of repeat executions after warmup. */
fmha_status_t bwd_case_time(bwd_case_t *bc, const fmha_plan_t *plan, int warmup, int repeat, double *ms);
/* Execute again and compare every gradient bit for bit with the last execution. */
fmha_status_t bwd_case_rerun_identical(bwd_case_t *bc, const fmha_plan_t *plan, int *identical);

typedef struct bwd_check {
    acc_result_t dq, dk, dv, dbias, dsink;
    int64_t unwritten; /* gradient elements left poisoned or written outside the tensors */
    int pass;
} bwd_check_t;

/* Compare the last execution with the naive backward. 0, or -1 when out of memory. */
int bwd_case_check(const bwd_case_t *bc, bwd_check_t *r);
/* The same, with the naive gradients from memo when it holds this case's (see
 * fwd_case_check_memo). */
int bwd_case_check_memo(const bwd_case_t *bc, reference_memo_t *memo, bwd_check_t *r);

/* REFERENCE.md: backward FLOPs = 2.5 x the forward's. */
double bwd_case_flops(const bwd_case_t *bc);
/* The least bytes the backward moves (for GB/s): q, k, v, o, do and lse read, dq, dk, dv
 * written, each once. */
double bwd_case_bytes(const bwd_case_t *bc);

#endif /* FMHA_CHECK_BWD_CASE_H */
