/* SPDX-License-Identifier: MIT */
/* runner.c: see runner.h. */
#include "runner.h"

#include <string.h>
#include <time.h>

double run_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Record a failed step; the message is the context's or the plan's last error unless
 * `why` already holds one. */
static fmha_status_t failed(fmha_status_t st, const char **step_out, const char *step, char *why, size_t len,
                            const char *msg)
{
    *step_out = step;
    if (msg && !why[0]) snprintf(why, len, "%s", msg);
    return st;
}

const char *run_execute_error(const fmha_plan_t *plan, const fmha_context_t *ctx)
{
    const char *m = plan ? fmha_plan_last_error(plan) : "";
    return m && *m ? m : ctx ? fmha_context_last_error(ctx) : "";
}

/* Can kernel run stage 0 of p on ctx? */
static int is_candidate(fmha_context_t *ctx, const fmha_problem_t *p, const char *kernel)
{
    char *names = NULL;
    if (fmha_kernel_candidates(ctx, p, 0, &names)) return 0;
    int found = 0;
    const size_t n = strlen(kernel);
    for (const char *at = names; !found && (at = strstr(at, kernel)); at += n)
        found = (at == names || at[-1] == '\n') && (at[n] == '\n' || at[n] == '\0');
    fmha_free(names);
    return found;
}

/* The options of a case's two plans: a forced kernel that can run the append goes to the
 * append plan (aopt), any other to the attention's (mopt). */
static void split_options(fmha_context_t *ctx, const fwd_case_t *fc, const fmha_plan_options_t *opt,
                          fmha_plan_options_t *aopt, fmha_plan_options_t *mopt)
{
    *aopt = (fmha_plan_options_t){.struct_size = sizeof *aopt, .num_threads = opt ? opt->num_threads : 0,
                                  .check_index_data = opt ? opt->check_index_data : 0};
    *mopt = opt ? *opt : *aopt;
    if (opt && opt->force_kernel && fwd_case_append_problem(fc) &&
        is_candidate(ctx, fwd_case_append_problem(fc), opt->force_kernel)) {
        aopt->force_kernel = opt->force_kernel;
        mopt->force_kernel = NULL;
    }
}

fmha_status_t fwd_run_prepare(fwd_run_t *r, const fwd_config_t *c, fmha_context_t *ctx,
                              const fmha_plan_options_t *opt)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    int n = fwd_config_cli(c, r->cli, sizeof r->cli);
    if (opt && opt->force_kernel && n > 0 && (size_t)n < sizeof r->cli)
        snprintf(r->cli + n, sizeof r->cli - (size_t)n, " -force_kernel=%s", opt->force_kernel);
    fmha_status_t st = fwd_case_create(c, &r->fc, r->why, sizeof r->why);
    if (st) return r->status = failed(st, &r->step, "create", r->why, sizeof r->why, NULL);
    if ((st = fwd_case_bind(r->fc, ctx, r->why, sizeof r->why)))
        return r->status = failed(st, &r->step, "bind", r->why, sizeof r->why, NULL);
    fmha_plan_options_t aopt, mopt;
    split_options(ctx, r->fc, opt, &aopt, &mopt);
    const double t0 = run_now_ms();
    st = fmha_plan_create(ctx, fwd_case_problem(r->fc), opt ? &mopt : NULL, &r->plan);
    r->plan_ms = run_now_ms() - t0;
    if (st) return r->status = failed(st, &r->step, "plan", r->why, sizeof r->why, fmha_context_last_error(ctx));
    if (fwd_case_append_problem(r->fc)) {
        if ((st = fmha_plan_create(ctx, fwd_case_append_problem(r->fc), &aopt, &r->append_plan)))
            return r->status = failed(st, &r->step, "plan appendkv", r->why, sizeof r->why, fmha_context_last_error(ctx));
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fwd_run_execute(fwd_run_t *r)
{
    fmha_status_t st;
    if (r->append_plan && (st = fwd_case_execute_append(r->fc, r->append_plan)))
        return r->status =
                   failed(st, &r->step, "append", r->why, sizeof r->why, run_execute_error(r->append_plan, r->ctx));
    if ((st = fwd_case_execute(r->fc, r->plan)))
        return r->status = failed(st, &r->step, "execute", r->why, sizeof r->why, run_execute_error(r->plan, r->ctx));
    return FMHA_STATUS_SUCCESS;
}

int fwd_run_check(fwd_run_t *r, reference_memo_t *memo)
{
    if (fwd_case_check_memo(r->fc, memo, &r->check)) {
        r->status = failed(FMHA_STATUS_ALLOC_FAILED, &r->step, "check", r->why, sizeof r->why, "out of memory in the check");
        return r->pass = 0;
    }
    if (!r->check.pass) r->step = "check";
    return r->pass = r->check.pass;
}

void fwd_run_report(const fwd_run_t *r, FILE *out)
{
    if (r->status) {
        fprintf(out, "FAIL %s: %s: %s -- %s\n", r->step ? r->step : "?", fmha_status_name(r->status), r->why, r->cli);
        return;
    }
    const fwd_check_t *k = &r->check;
    fprintf(out,
            "FAIL check: o err %.3g tol %.3g%s, lse err %.3g tol %.3g, dropout mask %lld, unwritten %lld, "
            "k_new %.3g/%.3g (unrotated dims differing %lld), q_rot %.3g/%.3g, v_new %lld, clobbered %lld%s -- %s\n",
            k->o.max_err, k->o.tol, k->o.nan_or_inf ? " NaN/inf" : "", k->lse.max_err, k->lse.tol,
            (long long)k->mask_mismatches, (long long)k->unwritten, k->k_new.max_err, k->k_new.tol, (long long)k->k_plain_mismatches, k->q_rot.max_err,
            k->q_rot.tol, (long long)k->v_new_mismatches, (long long)k->cache_clobbered,
            k->poison_unseen ? ", the poisoned input reached no output" : "", r->cli);
}

void fwd_run_release(fwd_run_t *r)
{
    /* plans first: the case holds device buffers of the context */
    fmha_plan_destroy(r->plan);
    fmha_plan_destroy(r->append_plan);
    fwd_case_destroy(r->fc);
    r->plan = r->append_plan = NULL;
    r->fc = NULL;
}

int fwd_run_once(const fwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *report)
{
    fwd_run_t r;
    if (fwd_run_prepare(&r, c, ctx, opt) == FMHA_STATUS_SUCCESS && fwd_run_execute(&r) == FMHA_STATUS_SUCCESS)
        fwd_run_check(&r, NULL);
    if (!r.pass && report) fwd_run_report(&r, report);
    fwd_run_release(&r);
    return r.pass;
}

/* ------------------------------------------------------------------ backward */

fmha_status_t bwd_run_prepare(bwd_run_t *r, const bwd_config_t *c, fmha_context_t *ctx,
                              const fmha_plan_options_t *opt)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    char fwd[1024];
    fwd_config_cli(&c->fwd, fwd, sizeof fwd);
    /* the same flags as `fmha run`, under `fmha bwd` */
    snprintf(r->cli, sizeof r->cli, "fmha bwd%s -dbias=%d -deterministic=%d", fwd + strlen("fmha run"), c->dbias,
             c->deterministic);
    fmha_status_t st = bwd_case_create(c, &r->bc, r->why, sizeof r->why);
    if (!st) st = bwd_case_bind(r->bc, ctx, r->why, sizeof r->why);
    if (!st && c->library_outputs) st = bwd_case_forward(r->bc, ctx, r->why, sizeof r->why);
    if (st) return r->status = failed(st, &r->step, "create", r->why, sizeof r->why, NULL);
    if ((st = fmha_plan_create(ctx, bwd_case_problem(r->bc), opt, &r->plan)))
        return r->status = failed(st, &r->step, "plan", r->why, sizeof r->why, fmha_context_last_error(ctx));
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t bwd_run_execute(bwd_run_t *r)
{
    fmha_status_t st = bwd_case_execute(r->bc, r->plan);
    if (st)
        return r->status = failed(st, &r->step, "execute", r->why, sizeof r->why, run_execute_error(r->plan, r->ctx));
    return FMHA_STATUS_SUCCESS;
}

int bwd_run_check(bwd_run_t *r, reference_memo_t *memo)
{
    if (bwd_case_check_memo(r->bc, memo, &r->check)) {
        r->status = failed(FMHA_STATUS_ALLOC_FAILED, &r->step, "check", r->why, sizeof r->why, "out of memory in the check");
        return r->pass = 0;
    }
    if (!r->check.pass) r->step = "check";
    return r->pass = r->check.pass;
}

void bwd_run_report(const bwd_run_t *r, FILE *out)
{
    if (r->status) {
        fprintf(out, "FAIL %s: %s: %s -- %s\n", r->step ? r->step : "?", fmha_status_name(r->status), r->why, r->cli);
        return;
    }
    const bwd_check_t *k = &r->check;
    fprintf(out, "FAIL check: dq %.3g/%.3g dk %.3g/%.3g dv %.3g/%.3g dbias %.3g/%.3g dsink %.3g/%.3g unwritten %lld -- %s\n",
            k->dq.max_err, k->dq.tol, k->dk.max_err, k->dk.tol, k->dv.max_err, k->dv.tol, k->dbias.max_err,
            k->dbias.tol, k->dsink.max_err, k->dsink.tol, (long long)k->unwritten, r->cli);
}

void bwd_run_release(bwd_run_t *r)
{
    fmha_plan_destroy(r->plan);
    bwd_case_destroy(r->bc);
    r->plan = NULL;
    r->bc = NULL;
}

int bwd_run_once(const bwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *report)
{
    bwd_run_t r;
    if (bwd_run_prepare(&r, c, ctx, opt) == FMHA_STATUS_SUCCESS && bwd_run_execute(&r) == FMHA_STATUS_SUCCESS)
        bwd_run_check(&r, NULL);
    if (!r.pass && report) bwd_run_report(&r, report);
    bwd_run_release(&r);
    return r.pass;
}

/* ------------------------------------------------------------------ kernel lists */

int run_explain_choice(const char *text, int stage, char *kernel, size_t kernel_len, char *how, size_t how_len)
{
    static const char tag[] = "\n  chosen: ";
    const char *at = text;
    for (int i = 0; at && i <= stage; i++)
        if ((at = strstr(at, tag))) at += sizeof tag - 1;
    const char *sp = at ? strchr(at, ' ') : NULL, *close = sp ? strchr(sp, ')') : NULL;
    if (!sp || !close || sp[1] != '(') return 0;
    if (kernel && kernel_len) snprintf(kernel, kernel_len, "%.*s", (int)(sp - at), at);
    if (how && how_len) snprintf(how, how_len, "%.*s", (int)(close - sp - 2), sp + 2);
    return 1;
}

/* Each stage's choice in fmha_explain's account of p as a "kernel NAME" line to out;
 * stage `want`'s name also into name (when given). */
static fmha_status_t list_chosen(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                                 FILE *out, int want, char *name, size_t len)
{
    char *text = NULL;
    fmha_status_t st = fmha_explain(ctx, p, opt, &text);
    if (st) return st;
    char kernel[256];
    for (int stage = 0; run_explain_choice(text, stage, kernel, sizeof kernel, NULL, 0); stage++) {
        fprintf(out, "kernel %s\n", kernel);
        if (stage == want && name && len) snprintf(name, len, "%s", kernel);
    }
    fmha_free(text);
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fwd_run_list(const fwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *out,
                           char *stage0, size_t len)
{
    if (stage0 && len) stage0[0] = '\0';
    fwd_config_t described = *c;
    described.describe_only = 1;
    fwd_case_t *fc = NULL;
    char why[512];
    fmha_status_t st = fwd_case_create(&described, &fc, why, sizeof why);
    if (st) return st;
    fmha_plan_options_t aopt, mopt;
    split_options(ctx, fc, opt, &aopt, &mopt);
    st = list_chosen(ctx, fwd_case_problem(fc), opt ? &mopt : NULL, out, 0, stage0, len);
    if (!st && fwd_case_append_problem(fc)) st = list_chosen(ctx, fwd_case_append_problem(fc), &aopt, out, -1, NULL, 0);
    fwd_case_destroy(fc);
    return st;
}

fmha_status_t bwd_run_list(const bwd_config_t *c, fmha_context_t *ctx, const fmha_plan_options_t *opt, FILE *out,
                           char *dq_dk_dv, size_t len)
{
    if (dq_dk_dv && len) dq_dk_dv[0] = '\0';
    char why[512];
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    if (c->library_outputs) { /* bwd_run_prepare's forward, planned without options */
        fwd_case_t *fc = NULL;
        if ((st = bwd_forward_describe(c, &fc, why, sizeof why))) return st;
        st = list_chosen(ctx, fwd_case_problem(fc), NULL, out, -1, NULL, 0);
        fwd_case_destroy(fc);
        if (st) return st;
    }
    fmha_problem_t *p = NULL;
    if ((st = bwd_problem_describe(c, &p, why, sizeof why))) return st;
    st = list_chosen(ctx, p, opt, out, 1, dq_dk_dv, len);
    fmha_problem_destroy(p);
    return st;
}
