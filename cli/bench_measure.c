/* SPDX-License-Identifier: MIT */
/* bench_measure.c: see bench_measure.h. */
#include "bench_measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "runner.h"

/* The flags that say how to run a problem, which the bench sets for every case. */
static const char *const RUN_ONLY[] = {"v", "warmup", "repeat", "backend", "arch", "force_kernel",
                                       "tune_db", "json", "kname", "explain"};

int bench_spec_parse(bench_spec_t *s, const char *command, const char *flags, char *why, size_t len)
{
    memset(s, 0, sizeof *s);
    flag_spec_t specs[ARGS_MAX];
    int n;
    if (strcmp(command, "run") == 0) {
        memcpy(specs, RUN_FLAGS, sizeof specs[0] * (size_t)RUN_FLAG_COUNT);
        n = RUN_FLAG_COUNT;
    } else if (strcmp(command, "bwd") == 0) {
        n = bwd_flag_table(specs);
        s->bwd = 1;
    } else {
        snprintf(why, len, "command '%s': expected run or bwd", command);
        return -1;
    }
    /* the flags' text outlives the spec's options, which point into it */
    size_t tl = strlen(flags);
    s->text = malloc(2 * (tl + 1)); /* the copy to split, then the copy to keep */
    s->argv = calloc(tl / 2 + 2, sizeof *s->argv);
    if (!s->text || !s->argv) {
        snprintf(why, len, "out of memory");
        bench_spec_release(s);
        return -1;
    }
    memcpy(s->text, flags, tl + 1);
    memcpy(s->text + tl + 1, flags, tl + 1);
    s->flags = s->text + tl + 1;
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(s->text, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) s->argv[argc++] = t;
    args_t a;
    int bad = args_parse(&a, specs, n, argc, s->argv, 0);
    if (!bad && a.help) snprintf(a.err, sizeof a.err, "-help is not a problem flag"), bad = 1;
    for (size_t i = 0; !bad && i < sizeof RUN_ONLY / sizeof RUN_ONLY[0]; i++)
        if (args_given(&a, RUN_ONLY[i]))
            snprintf(a.err, sizeof a.err, "-%s says how to run a case, which fmha bench sets for all; remove it",
                     RUN_ONLY[i]),
                bad = 1;
    if (!bad) bad = s->bwd ? bwd_configure(&a, &s->o, &s->bcfg, NULL) : run_configure(&a, &s->o);
    s->owns_lens = 1;
    if (bad) {
        snprintf(why, len, "%s", a.err);
        bench_spec_release(s);
        return -1;
    }
    s->bcfg.fwd = s->o.cfg;
    return 0;
}

void bench_spec_release(bench_spec_t *s)
{
    if (s->owns_lens) {
        free(s->o.lens_q);
        free(s->o.lens_k);
    }
    free(s->text);
    free(s->argv);
    memset(s, 0, sizeof *s);
}

/* The spec's problem without data, and the measured stage's problem and index. */
typedef struct described {
    fwd_case_t *fc;
    fmha_problem_t *bwd_p;
    const fmha_problem_t *measured;
    int stage;
} described_t;

static fmha_status_t describe(const bench_spec_t *s, described_t *d, char *why, size_t len)
{
    memset(d, 0, sizeof *d);
    fmha_status_t st;
    if (s->bwd) {
        if ((st = bwd_problem_describe(&s->bcfg, &d->bwd_p, why, len))) return st;
        d->measured = d->bwd_p;
        d->stage = 1; /* dq_dk_dv */
        return FMHA_STATUS_SUCCESS;
    }
    fwd_config_t c = s->o.cfg;
    c.describe_only = 1;
    if ((st = fwd_case_create(&c, &d->fc, why, len))) return st;
    d->measured = fwd_case_append_problem(d->fc) ? fwd_case_append_problem(d->fc) : fwd_case_problem(d->fc);
    return FMHA_STATUS_SUCCESS;
}

static void described_release(described_t *d)
{
    fwd_case_destroy(d->fc);
    fmha_problem_destroy(d->bwd_p);
}

int bench_describe(const bench_spec_t *s, fmha_context_t *ctx, bench_row_t *r, char *why, size_t len)
{
    const fwd_config_t *c = &s->o.cfg;
    snprintf(r->library, sizeof r->library, "fmha");
    snprintf(r->device, sizeof r->device, "%s", ctx ? fmha_context_arch(ctx) : "");
    snprintf(r->command, sizeof r->command, "%s", s->bwd ? "bwd" : "run");
    if (s->flags) snprintf(r->flags, sizeof r->flags, "%s", s->flags);
    const char *fam = s->bwd ? "bwd" : c->s_knew > 0 ? "appendkv" : fmha_family_name(c->family);
    snprintf(r->family, sizeof r->family, "%s", fam);
    snprintf(r->dtype, sizeof r->dtype, "%s", fmha_dtype_name(c->dtype));
    snprintf(r->mask, sizeof r->mask, "%s", c->mask ? c->mask : "0");
    r->batch = c->b, r->heads_q = c->h, r->heads_kv = c->h_k, r->seqlen_q = c->s, r->seqlen_kv = c->s_k;
    r->hdim_qk = c->d, r->hdim_v = c->d_v;
    described_t d;
    if (describe(s, &d, why, len)) return -1;
    fmha_problem_class(d.measured, r->problem_class, sizeof r->problem_class);
    described_release(&d);
    return 0;
}

fmha_status_t bench_candidates(const bench_spec_t *s, fmha_context_t *ctx, char **names, char *why, size_t len)
{
    described_t d;
    fmha_status_t st = describe(s, &d, why, len);
    if (st) return st;
    if ((st = fmha_kernel_candidates(ctx, d.measured, d.stage, names)))
        snprintf(why, len, "%s", fmha_context_last_error(ctx));
    described_release(&d);
    return st;
}

/* How the plan chose the measured stage's kernel: fmha_plan_describe's "(reason; ...)"
 * after its name. */
static void plan_how(const fmha_plan_t *plan, int stage, char *how, size_t len)
{
    char desc[8192];
    fmha_plan_describe(plan, desc, sizeof desc);
    const char *k = fmha_plan_kernel_name(plan, stage), *at = k ? strstr(desc, k) : NULL;
    snprintf(how, len, "?");
    if (at && (at = strchr(at, '('))) {
        const char *end = strpbrk(at, ";)");
        if (end) snprintf(how, len, "%.*s", (int)(end - at - 1), at + 1);
    }
}

fmha_status_t bench_selector_choice(const bench_spec_t *s, fmha_context_t *ctx, char *kernel, size_t kernel_len,
                                    char *how, size_t how_len, char *why, size_t why_len)
{
    described_t d;
    fmha_status_t st = describe(s, &d, why, why_len);
    if (st) return st;
    /* explain's choice is the plan's (one selector) and needs no compile, so a virtual
     * context answers too: the measured stage's "  chosen: NAME (how)" line */
    char *text = NULL;
    fmha_plan_options_t opt = run_plan_options(&s->o, 0);
    if ((st = fmha_explain(ctx, d.measured, &opt, &text))) {
        snprintf(why, why_len, "%s", fmha_context_last_error(ctx));
    } else if (!run_explain_choice(text, d.stage, kernel, kernel_len, how, how_len)) {
        st = FMHA_STATUS_INTERNAL;
        snprintf(why, why_len, "explain names no choice for stage %d", d.stage);
    }
    fmha_free(text);
    described_release(&d);
    return st;
}

/* ------------------------------------------------------------- the timing */

typedef fmha_status_t (*time_fn)(void *u, int warmup, int repeat, double *ms);

typedef struct timed {
    fwd_case_t *fc;
    bwd_case_t *bc;
    const fmha_plan_t *plan;
    int append;
} timed_t;

static fmha_status_t time_one(void *u, int warmup, int repeat, double *ms)
{
    const timed_t *t = u;
    if (t->bc) return bwd_case_time(t->bc, t->plan, warmup, repeat, ms);
    if (t->append) return fwd_case_time_append(t->fc, t->plan, warmup, repeat, ms);
    return fwd_case_time(t->fc, t->plan, warmup, repeat, ms);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Warm up, size a sample to about set->sample_ms, take the samples. The size comes from
 * the fastest of three single executions: one hiccup (a clock ramp, a page fault) in a
 * single calibration made samples of a few microsecond-scale executions, timed mostly
 * as launch and synchronise overhead (an 8x outlier on the H100, docs/bench.md). */
static fmha_status_t take_samples(timed_t *t, const bench_settings_t *set, bench_row_t *r)
{
    double first = INFINITY, one = 0;
    fmha_status_t st = time_one(t, set->warmup, 1, &one);
    for (int i = 0; !st && i < 3; i++)
        if (!(st = time_one(t, 0, 1, &one)) && one < first) first = one;
    if (st) return st;
    int inner = 1;
    if (first < set->sample_ms) inner = first > 0 ? (int)ceil(set->sample_ms / first) : 1000;
    if (inner > 1000) inner = 1000;
    const int n = set->samples > 0 ? set->samples : 1;
    double *ms = malloc(sizeof *ms * (size_t)n);
    if (!ms) return FMHA_STATUS_ALLOC_FAILED;
    for (int i = 0; !st && i < n; i++) st = time_one(t, 0, inner, &ms[i]);
    if (!st) {
        qsort(ms, (size_t)n, sizeof *ms, cmp_double);
        r->samples = n, r->inner = inner;
        r->min_ms = ms[0], r->max_ms = ms[n - 1];
        r->median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    }
    free(ms);
    return st;
}

/* ------------------------------------------------------------ measuring */

static int row_failed(bench_row_t *r, fmha_status_t st, const char *step, const char *why)
{
    snprintf(r->status, sizeof r->status, "%s", fmha_status_name(st));
    snprintf(r->error, sizeof r->error, "%s: %s", step ? step : "?", why);
    return -1;
}

static void row_kernels(bench_row_t *r, const fmha_plan_t *plan, int stage)
{
    r->plan_kernels[0] = '\0';
    for (int i = 0; fmha_plan_kernel_name(plan, i); i++) {
        size_t at = strlen(r->plan_kernels);
        snprintf(r->plan_kernels + at, sizeof r->plan_kernels - at, "%s%s", i ? "+" : "", fmha_plan_kernel_name(plan, i));
    }
    snprintf(r->kernel, sizeof r->kernel, "%s", fmha_plan_kernel_name(plan, stage));
    plan_how(plan, stage, r->how, sizeof r->how);
    bench_row_set_key(r, r->kernel);
}

double bench_spec_work_gflop(const bench_spec_t *s)
{
    const fwd_config_t *c = &s->o.cfg;
    return 2.0 * (double)c->b * (double)c->h * (double)c->s * (double)c->s_k * (double)(c->d + c->d_v) / 1e9;
}

static void set_rates(bench_row_t *r, double flops, double bytes)
{
    r->gflop = flops / 1e9, r->mbytes = bytes / 1e6;
    r->tflops = r->median_ms > 0 ? flops / (r->median_ms * 1e-3) / 1e12 : 0;
    r->gbps = r->median_ms > 0 ? bytes / (r->median_ms * 1e-3) / 1e9 : 0;
}

static int measure_fwd(const bench_spec_t *s, fmha_context_t *ctx, const fmha_plan_options_t *opt,
                       const bench_settings_t *set, int verify, bench_row_t *r)
{
    fwd_run_t run;
    fwd_config_t c = s->o.cfg;
    c.describe_only = 0;
    c.dropout_mask = verify && c.p_drop > 0;
    fmha_status_t st = fwd_run_prepare(&run, &c, ctx, opt);
    int rc = -1;
    if (st) {
        row_failed(r, st, run.step, run.why);
        goto done;
    }
    const int append = run.append_plan != NULL;
    const fmha_plan_t *mplan = append ? run.append_plan : run.plan;
    row_kernels(r, mplan, 0);
    if ((st = fwd_run_execute(&run))) {
        row_failed(r, st, run.step, run.why);
        goto done;
    }
    if (verify) {
        fwd_run_check(&run, set->refs);
        if (run.status) {
            row_failed(r, run.status, run.step, run.why);
            goto done;
        }
        const acc_result_t *a = append ? &run.check.k_new : &run.check.o;
        r->max_err = a->max_err, r->tol = a->tol;
        snprintf(r->verify, sizeof r->verify, "%s", run.pass ? "pass" : "fail");
        if (!run.pass) {
            char line[2048];
            FILE *m = fmemopen(line, sizeof line, "w");
            if (m) {
                fwd_run_report(&run, m);
                fclose(m);
                line[sizeof line - 1] = '\0';
                line[strcspn(line, "\n")] = '\0';
                snprintf(r->error, sizeof r->error, "%s", line);
            }
        }
    }
    timed_t t = {run.fc, NULL, mplan, append};
    if ((st = take_samples(&t, set, r))) {
        row_failed(r, st, "time", run_execute_error(mplan, run.ctx));
        goto done;
    }
    if (append) set_rates(r, 0, fwd_case_append_bytes(run.fc));
    else set_rates(r, fwd_case_flops(run.fc), fwd_case_bytes(run.fc));
    rc = 0;
done:
    fwd_run_release(&run);
    return rc;
}

/* Of two gradients' checks, the one whose error is the larger fraction of its tolerance
 * (a row reports one error; the backward's is its worst gradient's). */
static const acc_result_t *closer_to_tolerance(const acc_result_t *a, const acc_result_t *b)
{
    return b->max_err / (b->tol > 0 ? b->tol : 1) > a->max_err / (a->tol > 0 ? a->tol : 1) ? b : a;
}

static int measure_bwd(const bench_spec_t *s, fmha_context_t *ctx, const fmha_plan_options_t *opt,
                       const bench_settings_t *set, int verify, bench_row_t *r)
{
    bwd_run_t run;
    bwd_config_t c = s->bcfg;
    c.library_outputs = !verify; /* unchecked runs skip the naive forward in double */
    fmha_status_t st = bwd_run_prepare(&run, &c, ctx, opt);
    int rc = -1;
    if (st) {
        row_failed(r, st, run.step, run.why);
        goto done;
    }
    row_kernels(r, run.plan, 1);
    if ((st = bwd_run_execute(&run))) {
        row_failed(r, st, run.step, run.why);
        goto done;
    }
    if (verify) {
        bwd_run_check(&run, set->refs);
        if (run.status) {
            row_failed(r, run.status, run.step, run.why);
            goto done;
        }
        const acc_result_t *worst = closer_to_tolerance(closer_to_tolerance(&run.check.dq, &run.check.dk), &run.check.dv);
        r->max_err = worst->max_err, r->tol = worst->tol;
        snprintf(r->verify, sizeof r->verify, "%s", run.pass ? "pass" : "fail");
        if (!run.pass)
            snprintf(r->error, sizeof r->error, "check: dq %.3g/%.3g, dk %.3g/%.3g, dv %.3g/%.3g, unwritten %lld -- %s",
                     run.check.dq.max_err, run.check.dq.tol, run.check.dk.max_err, run.check.dk.tol,
                     run.check.dv.max_err, run.check.dv.tol, (long long)run.check.unwritten, run.cli);
    }
    timed_t t = {NULL, run.bc, run.plan, 0};
    if ((st = take_samples(&t, set, r))) {
        row_failed(r, st, "time", run_execute_error(run.plan, run.ctx));
        goto done;
    }
    set_rates(r, bwd_case_flops(run.bc), bwd_case_bytes(run.bc));
    rc = 0;
done:
    bwd_run_release(&run);
    return rc;
}

int bench_measure(const bench_spec_t *s, fmha_context_t *ctx, const char *kernel, const bench_settings_t *set,
                  bench_row_t *r)
{
    char why[1024] = "";
    if (bench_describe(s, ctx, r, why, sizeof why)) {
        snprintf(r->status, sizeof r->status, "%s", fmha_status_name(FMHA_STATUS_INVALID_PROBLEM));
        snprintf(r->error, sizeof r->error, "describe: %s", why);
        return -1;
    }
    snprintf(r->requested, sizeof r->requested, "%s", kernel ? kernel : "selector");
    r->selector_choice = kernel == NULL; /* a sweep of candidates sets it by name */
    const int verify = set->verify && bench_spec_work_gflop(s) <= set->verify_max_gflop;
    snprintf(r->verify, sizeof r->verify, "%s", !set->verify ? "off" : verify ? "?" : "skipped");
    fmha_plan_options_t opt = run_plan_options(&s->o, 0);
    opt.force_kernel = kernel;
    int rc = s->bwd ? measure_bwd(s, ctx, &opt, set, verify, r) : measure_fwd(s, ctx, &opt, set, verify, r);
    if (rc == 0) snprintf(r->status, sizeof r->status, "ok");
    return rc;
}

int bench_print_json(const run_opts_t *o, const bwd_config_t *bcfg)
{
    bench_spec_t s;
    memset(&s, 0, sizeof s);
    s.o = *o; /* borrowed: the caller frees the lengths */
    if (bcfg) s.bwd = 1, s.bcfg = *bcfg;
    fmha_context_t *ctx = NULL;
    if (run_make_context(o, &ctx)) return EXIT_BAD_INPUT;
    bench_settings_t set = {o->warmup, o->repeat, 1.0, o->verify, INFINITY, NULL};
    bench_row_t *r = calloc(1, sizeof *r);
    int rc = EXIT_RUN_FAILED;
    if (r) {
        const int failed = bench_measure(&s, ctx, o->force_kernel[0] ? o->force_kernel : NULL, &set, r);
        char *json = bench_row_json(r);
        if (json) printf("%s\n", json);
        free(json);
        rc = !failed ? (strcmp(r->verify, "fail") == 0 ? EXIT_CHECK_FAILED : EXIT_OK)
             : strcmp(r->status, "FMHA_STATUS_INVALID_PROBLEM") == 0 || strcmp(r->status, "FMHA_STATUS_INVALID_ARGUMENT") == 0 ||
                     strcmp(r->status, "FMHA_STATUS_NOT_SUPPORTED") == 0
                 ? EXIT_BAD_INPUT
                 : EXIT_RUN_FAILED;
    }
    free(r);
    fmha_context_destroy(ctx);
    return rc;
}
