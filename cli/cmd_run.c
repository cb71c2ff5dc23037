/* SPDX-License-Identifier: MIT */
/*
 * cmd_run.c: `fmha run`, the forward with CK's flags (-name=value). Builds random inputs,
 * plans, times -warmup + -repeat executions, prints TFLOPS by REFERENCE.md's rule, and
 * with -v=1 checks the output against the naive references (pass/fail).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bench_measure.h"
#include "commands.h"
#include "fmha/fmha.h"
#include "run_config.h"
#include "runner.h"

/* The front half run and explain share: parse the flags (printing -help) and configure;
 * for explain (fc not NULL) also build the case without data. Returns -1 to go on, else
 * the exit code. */
static int setup(const char *cmd, const char *usage, int argc, char **argv, run_opts_t *o, fwd_case_t **fc)
{
    args_t a;
    memset(o, 0, sizeof *o);
    if (fc) *fc = NULL;
    if (args_parse(&a, RUN_FLAGS, RUN_FLAG_COUNT, argc, argv, 2)) {
        fprintf(stderr, "fmha %s: %s\n", cmd, a.err);
        return EXIT_BAD_INPUT;
    }
    if (a.help) {
        args_print_help(&a, usage);
        return EXIT_OK;
    }
    if (run_configure(&a, o)) {
        fprintf(stderr, "fmha %s: %s\n", cmd, a.err);
        return EXIT_BAD_INPUT;
    }
    if (!fc) return -1;
    o->cfg.describe_only = 1;
    char why[1024];
    fmha_status_t st = fwd_case_create(&o->cfg, fc, why, sizeof why);
    if (st) {
        fprintf(stderr, "fmha %s: %s: %s\n", cmd, fmha_status_name(st), why);
        return st == FMHA_STATUS_ALLOC_FAILED ? EXIT_RUN_FAILED : EXIT_BAD_INPUT;
    }
    return -1;
}

/* explain takes run's problem flags plus -arch and -force_kernel, so both commands
 * describe problems the same way. */
int cmd_explain(int argc, char **argv)
{
    run_opts_t o;
    fwd_case_t *fc = NULL;
    fmha_context_t *ctx = NULL;
    char *text = NULL;
    int rc = setup("explain",
                   "usage: fmha explain [run's flags] [-arch=sm90]\n"
                   "Shows the kernel chosen for each stage, why every other candidate was\n"
                   "rejected, and the workspace. Exit 0 when a plan exists, 2 otherwise.",
                   argc, argv, &o, &fc);
    if (rc >= 0) goto done;
    rc = EXIT_OK;
    fmha_status_t st;
    if (run_make_context(&o, &ctx)) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    fmha_plan_options_t opt = run_plan_options(&o, 1);
    if (fwd_case_append_problem(fc)) { /* the append runs first: explain it first */
        fmha_plan_options_t aopt = run_plan_options(&o, 0);
        st = fmha_explain(ctx, fwd_case_append_problem(fc), &aopt, &text);
        if (text) printf("appendkv:\n%s", text);
        fmha_free(text);
        text = NULL;
        if (st) {
            fprintf(stderr, "fmha explain: appendkv: %s: %s\n", fmha_status_name(st), fmha_context_last_error(ctx));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        printf("attention:\n");
    }
    st = fmha_explain(ctx, fwd_case_problem(fc), &opt, &text);
    if (text) fputs(text, stdout);
    if (st) {
        fprintf(stderr, "fmha explain: %s: %s\n", fmha_status_name(st), fmha_context_last_error(ctx));
        rc = EXIT_BAD_INPUT;
    }
done:
    fmha_free(text);
    fwd_case_destroy(fc);
    fmha_context_destroy(ctx);
    free(o.lens_q);
    free(o.lens_k);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    run_opts_t o;
    fmha_context_t *ctx = NULL;
    fwd_run_t r;
    memset(&r, 0, sizeof r);
    int rc = setup("run",
                   "usage: fmha run [-name=value ...]\n"
                   "Runs a forward attention problem on random inputs; -v=1 checks it.\n"
                   "Exit: 0 ok, 1 check failed, 2 bad arguments or invalid problem, 3 execution failed.",
                   argc, argv, &o, NULL); /* the runner builds the case */
    if (rc >= 0) goto done;
    if (o.json) {
        rc = bench_print_json(&o, NULL);
        goto done;
    }
    rc = EXIT_OK;
    fmha_status_t st;
    if ((st = run_make_context(&o, &ctx))) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    fmha_plan_options_t opt = run_plan_options(&o, 1);
    st = fwd_run_prepare(&r, &o.cfg, ctx, &opt);
    if (st) {
        fprintf(stderr, "fmha run: %s: %s: %s\n", r.step, fmha_status_name(st), r.why);
        rc = strcmp(r.step, "bind") == 0 || st == FMHA_STATUS_ALLOC_FAILED ? EXIT_RUN_FAILED : EXIT_BAD_INPUT;
        goto done;
    }
    run_print_plan(r.plan);
    printf("plan created in %.2f ms (selection%s)\n", r.plan_ms,
           fmha_context_backend(ctx) == FMHA_BACKEND_CUDA ? " + JIT compile or cache load" : "");
    if (o.kname)
        for (int s = 0; fmha_plan_kernel_name(r.plan, s); s++) printf("kernel: %s\n", fmha_plan_kernel_name(r.plan, s));
    if (r.append_plan) printf("appendkv kernel: %s\n", fmha_plan_kernel_name(r.append_plan, 0));

    /* one checked execution (poisoned outputs, the append first), then the timed ones */
    double ms = 0;
    st = fwd_run_execute(&r);
    if (!st && (st = fwd_case_time(r.fc, r.plan, o.warmup, o.repeat, &ms)))
        snprintf(r.why, sizeof r.why, "%s", run_execute_error(r.plan, ctx));
    if (st) {
        fprintf(stderr, "fmha run: %s: %s: %s\n", r.step ? r.step : "execute", fmha_status_name(st), r.why);
        rc = st == FMHA_STATUS_INVALID_PROBLEM || st == FMHA_STATUS_INVALID_ARGUMENT ? EXIT_BAD_INPUT
                                                                                      : EXIT_RUN_FAILED;
        goto done;
    }
    double flops = fwd_case_flops(r.fc);
    printf("backend %s, time %.4f ms (mean of %d), %.4f TFLOPS (%.4g GFLOP by 2*Hq*(Dqk+Dv)*visible pairs)\n",
           fmha_context_arch(ctx), ms, o.repeat, flops / (ms * 1e-3) / 1e12, flops / 1e9);
    if (r.append_plan) { /* it rewrites the same slots with the same values: timing it changes nothing */
        double ams = 0;
        if ((st = fwd_case_time_append(r.fc, r.append_plan, o.warmup, o.repeat, &ams))) {
            fprintf(stderr, "fmha run: timing appendkv: %s: %s\n", fmha_status_name(st),
                    run_execute_error(r.append_plan, ctx));
            rc = EXIT_RUN_FAILED;
            goto done;
        }
        const double bytes = fwd_case_append_bytes(r.fc);
        printf("appendkv time %.4f ms (mean of %d), %.1f GB/s (%.4g MB: k_new, v_new read, cache slots written%s)\n",
               ams, o.repeat, bytes / (ams * 1e-3) / 1e9, bytes / 1e6, o.cfg.rotary_dim ? ", q read, q_rot written" : "");
    }

    if (o.verify) {
        /* The host buffers hold the poisoned run's outputs: on the GPU the timed runs
         * never copy back; on the CPU they rewrite the same values (rows are computed
         * independently and deterministically), and skip the same unwritten ones. */
        fwd_run_check(&r, NULL);
        if (r.status) {
            fprintf(stderr, "fmha run: %s\n", r.why);
            rc = EXIT_RUN_FAILED;
            goto done;
        }
        const fwd_check_t *k = &r.check;
        printf("check o:   max_err %.3g, naive low-precision err %.3g, tolerance %.3g%s\n", k->o.max_err,
               k->o.lowp_err, k->o.tol, k->o.nan_or_inf ? ", NaN/inf mismatch" : "");
        if (o.cfg.lse)
            printf("check lse: max_err %.3g, naive low-precision err %.3g, tolerance %.3g%s\n", k->lse.max_err,
                   k->lse.lowp_err, k->lse.tol, k->lse.nan_or_inf ? ", NaN/inf mismatch" : "");
        if (o.cfg.dropout_mask) printf("check dropout mask: %lld mismatching bits\n", (long long)k->mask_mismatches);
        if (r.append_plan) {
            printf("check appended k: max_err %.3g, naive low-precision err %.3g, tolerance %.3g; unrotated dims "
                   "differing: %lld\n",
                   k->k_new.max_err, k->k_new.lowp_err, k->k_new.tol, (long long)k->k_plain_mismatches);
            if (o.cfg.rotary_dim)
                printf("check q_rot: max_err %.3g, naive low-precision err %.3g, tolerance %.3g\n", k->q_rot.max_err,
                       k->q_rot.lowp_err, k->q_rot.tol);
            printf("check appended v: %lld values differ; cache slots outside the append changed: %lld\n",
                   (long long)k->v_new_mismatches, (long long)k->cache_clobbered);
        }
        if (k->unwritten)
            printf("check writes: %lld output elements unwritten or written out of bounds\n", (long long)k->unwritten);
        printf("valid: %s\n", r.pass ? "pass" : "fail");
        if (!r.pass) rc = EXIT_CHECK_FAILED;
    }
done:
    fwd_run_release(&r);
    fmha_context_destroy(ctx);
    free(o.lens_q);
    free(o.lens_k);
    return rc;
}
