/* SPDX-License-Identifier: MIT */
/*
 * cmd_bwd.c: `fmha bwd`, the backward with CK's flags: run's problem flags plus -dbias,
 * -deterministic and -explain. Inputs are random; o and lse come from the naive forward
 * with -v=1 (the gradients then checked against the naive backward), else from the
 * library's forward (timing runs); -explain=1 shows the plan of the problem, no data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "commands.h"
#include "run_config.h"
#include "bench_measure.h"

/* -explain=1: the plan of the backward problem, described without data, on this machine's
 * context or a virtual one (-arch). */
static int explain_bwd(const run_opts_t *o, const bwd_config_t *c)
{
    fmha_problem_t *p = NULL;
    fmha_context_t *ctx = NULL;
    char why[1024], *text = NULL;
    int rc = EXIT_OK;
    fmha_status_t st = bwd_problem_describe(c, &p, why, sizeof why);
    if (st) {
        fprintf(stderr, "fmha bwd: %s: %s\n", fmha_status_name(st), why);
        return EXIT_BAD_INPUT;
    }
    if (run_make_context(o, &ctx)) {
        fmha_problem_destroy(p);
        return EXIT_BAD_INPUT;
    }
    fmha_plan_options_t opt = run_plan_options(o, 1);
    st = fmha_explain(ctx, p, &opt, &text);
    if (text) fputs(text, stdout);
    if (st) {
        fprintf(stderr, "fmha bwd: explain: %s: %s\n", fmha_status_name(st), fmha_context_last_error(ctx));
        rc = EXIT_BAD_INPUT;
    }
    fmha_free(text);
    fmha_problem_destroy(p);
    fmha_context_destroy(ctx);
    return rc;
}

int cmd_bwd(int argc, char **argv)
{
    flag_spec_t flags[ARGS_MAX];
    const int n = bwd_flag_table(flags);
    args_t a;
    run_opts_t o;
    memset(&o, 0, sizeof o);
    bwd_run_t r;
    memset(&r, 0, sizeof r);
    fmha_context_t *ctx = NULL;
    int rc = EXIT_OK;
    if (args_parse(&a, flags, n, argc, argv, 2)) {
        fprintf(stderr, "fmha bwd: %s\n", a.err);
        return EXIT_BAD_INPUT;
    }
    if (a.help) {
        args_print_help(&a, "usage: fmha bwd [-name=value ...]\n"
                            "Runs the backward (dq, dk, dv; dbias with -dbias=1; dsink with -init_sink=1) on random\n"
                            "inputs; -v=1 checks it against the naive backward. The KV-cache flags of run do not apply.\n"
                            "Exit: 0 ok, 1 check failed, 2 bad arguments or invalid problem, 3 execution failed.");
        return EXIT_OK;
    }
    bwd_config_t bcfg;
    int explain = 0;
    if (bwd_configure(&a, &o, &bcfg, &explain)) {
        fprintf(stderr, "fmha bwd: %s\n", a.err);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    const int64_t dbias = bcfg.dbias, det = bcfg.deterministic;
    if (explain) {
        rc = explain_bwd(&o, &bcfg);
        goto done;
    }
    if (o.json) {
        rc = bench_print_json(&o, &bcfg);
        goto done;
    }
    if (run_make_context(&o, &ctx)) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    fmha_plan_options_t opt = run_plan_options(&o, 1);
    fmha_status_t st = bwd_run_prepare(&r, &bcfg, ctx, &opt);
    if (st) {
        fprintf(stderr, "fmha bwd: %s: %s: %s\n", r.step, fmha_status_name(st), r.why);
        rc = st == FMHA_STATUS_ALLOC_FAILED ? EXIT_RUN_FAILED : EXIT_BAD_INPUT;
        goto done;
    }
    bwd_case_t *bc = r.bc;
    fmha_plan_t *plan = r.plan;
    run_print_plan(plan);
    double ms = 0;
    st = bwd_run_execute(&r);
    if (!st) st = bwd_case_time(bc, plan, o.warmup, o.repeat, &ms);
    if (st) {
        fprintf(stderr, "fmha bwd: execute: %s: %s\n", fmha_status_name(st),
                r.status ? r.why : run_execute_error(plan, ctx));
        rc = st == FMHA_STATUS_INVALID_PROBLEM || st == FMHA_STATUS_INVALID_ARGUMENT ? EXIT_BAD_INPUT : EXIT_RUN_FAILED;
        goto done;
    }
    const double flops = bwd_case_flops(bc);
    printf("backend %s, time %.4f ms (mean of %d), %.4f TFLOPS (%.4g GFLOP: 2.5x the forward's)\n", fmha_context_arch(ctx),
           ms, o.repeat, flops / (ms * 1e-3) / 1e12, flops / 1e9);
    if (o.verify) {
        int identical = 1;
        /* every timed run rewrote the same gradients; check the last */
        bwd_run_check(&r, NULL);
        if (r.status) {
            fprintf(stderr, "fmha bwd: %s\n", r.why);
            rc = EXIT_RUN_FAILED;
            goto done;
        }
        const bwd_check_t *k = &r.check;
        const struct {
            const char *name;
            const acc_result_t *res;
            int shown;
        } rows[] = {{"dq", &k->dq, 1}, {"dk", &k->dk, 1}, {"dv", &k->dv, 1}, {"dbias", &k->dbias, (int)dbias},
                    {"dsink", &k->dsink, o.cfg.sink}};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            if (rows[i].shown)
                printf("check %-6s max_err %.3g, naive low-precision err %.3g, tolerance %.3g%s\n", rows[i].name,
                       rows[i].res->max_err, rows[i].res->lowp_err, rows[i].res->tol,
                       rows[i].res->nan_or_inf ? ", NaN/inf mismatch" : "");
        if (k->unwritten)
            printf("check writes: %lld gradient elements unwritten or written out of bounds\n", (long long)k->unwritten);
        if (det) {
            if ((st = bwd_case_rerun_identical(bc, plan, &identical))) {
                fprintf(stderr, "fmha bwd: rerun: %s: %s\n", fmha_status_name(st), run_execute_error(plan, ctx));
                rc = EXIT_RUN_FAILED;
                goto done;
            }
            printf("check deterministic: a second run is %s\n", identical ? "bitwise identical" : "DIFFERENT");
        }
        const int pass = r.pass && identical;
        printf("valid: %s\n", pass ? "pass" : "fail");
        if (!pass) rc = EXIT_CHECK_FAILED;
    }
done:
    bwd_run_release(&r);
    fmha_context_destroy(ctx);
    free(o.lens_q);
    free(o.lens_k);
    return rc;
}
