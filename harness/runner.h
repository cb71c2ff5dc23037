/* SPDX-License-Identifier: MIT */
/*
 * runner.h: one case, end to end, the way every caller runs it: the CLI's `-v=1`, the
 * CPU-oracle tests (tests/ref) and the GPU conformance drivers (tests/gpu). Create the
 * case, bind it to the context's device, plan it (and the appendkv plan that runs
 * first), execute it with poisoned outputs, check it against the naive references, and
 * say in one line what failed with the `fmha run` line that reproduces it.
 *
 *   fwd_run_t r;
 *   if (fwd_run_prepare(&r, &config, ctx, &opt) == 0 && fwd_run_execute(&r) == 0) fwd_run_check(&r, NULL);
 *   if (!r.pass) fwd_run_report(&r, stdout);
 *   fwd_run_release(&r);
 *
 * or fwd_run_once(&config, ctx, &opt, stdout), which is the same.
 */
#ifndef FMHA_HARNESS_RUNNER_H
#define FMHA_HARNESS_RUNNER_H

#include <stdio.h>

#include "bwd_case.h"
#include "fwd_case.h"

typedef struct fwd_run {
    fwd_case_t *fc;
    const fmha_context_t *ctx;       /* the prepare's: run_execute_error reads its message */
    fmha_plan_t *plan, *append_plan; /* append_plan: when the case appends keys first */
    fmha_status_t status;            /* of the step that failed, else SUCCESS */
    const char *step;                /* "create", "bind", "plan", "append", "execute", "check" */
    char why[1024];
    char cli[1200];                  /* the `fmha run` line of the case (-force_kernel included) */
    fwd_check_t check;
    int pass;                        /* set by fwd_run_check */
    double plan_ms;                  /* fmha_plan_create of the attention plan, wall time */
} fwd_run_t;

/* The message of a failed execution or timing of plan on ctx: the plan's last error, or
 * the context's where the plan holds none, since the device copies and the synchronize
 * after a launch record there (a kernel's fault reads "synchronize: CUDA_ERROR_..."). */
const char *run_execute_error(const fmha_plan_t *plan, const fmha_context_t *ctx);

/* Milliseconds of CLOCK_MONOTONIC: wall time for the plan and case timings. */
double run_now_ms(void);

/* Create, bind (a CUDA context gets device copies) and plan. Returns the status. */
fmha_status_t fwd_run_prepare(fwd_run_t *r, const fwd_config_t *c, fmha_context_t *ctx,
                              const fmha_plan_options_t *opt);
/* The append (when there is one), then one poisoned execution, outputs copied back. */
fmha_status_t fwd_run_execute(fwd_run_t *r);
/* Compare with the naive references; returns r->pass. memo (may be NULL) keeps them for
 * the next run of the same case (reference_memo.h). */
int fwd_run_check(fwd_run_t *r, reference_memo_t *memo);
/* One line: "FAIL <what> -- <cli>" (status and why, or the check's errors). */
void fwd_run_report(const fwd_run_t *r, FILE *out);
void fwd_run_release(fwd_run_t *r);
/* All of the above; reports a failure to `report` (NULL: silent). Returns 1 on pass. */
int fwd_run_once(const fwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *report);

typedef struct bwd_run {
    bwd_case_t *bc;
    const fmha_context_t *ctx;
    fmha_plan_t *plan;
    fmha_status_t status;
    const char *step;
    char why[1024];
    char cli[1200];                  /* the `fmha bwd` line of the case */
    bwd_check_t check;
    int pass;
} bwd_run_t;

fmha_status_t bwd_run_prepare(bwd_run_t *r, const bwd_config_t *c, fmha_context_t *ctx,
                              const fmha_plan_options_t *opt);
fmha_status_t bwd_run_execute(bwd_run_t *r);
int bwd_run_check(bwd_run_t *r, reference_memo_t *memo);
void bwd_run_report(const bwd_run_t *r, FILE *out);
void bwd_run_release(bwd_run_t *r);
int bwd_run_once(const bwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *report);

/* Stage `stage`'s choice in an fmha_explain text, its "  chosen: NAME (how)" line: the
 * kernel's name and the reason into kernel / how (either may be NULL). 0 when the text
 * names no choice for that stage. */
int run_explain_choice(const char *text, int stage, char *kernel, size_t kernel_len, char *how, size_t how_len);

/* The kernels fwd_run_prepare / bwd_run_prepare would plan for c on ctx, stage by stage,
 * as "kernel NAME" lines to out, from fmha_explain: nothing is compiled or allocated, so
 * a virtual context answers for a device (the conformance drivers' list mode, which
 * precompiles a grid's kernels in parallel before it runs). stage0 / dq_dk_dv (may be
 * NULL) get the name the run's `chosen` would. Returns explain's status. */
fmha_status_t fwd_run_list(const fwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *out,
                           char *stage0, size_t len);
fmha_status_t bwd_run_list(const bwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *out,
                           char *dq_dk_dv, size_t len);

#endif /* FMHA_HARNESS_RUNNER_H */
