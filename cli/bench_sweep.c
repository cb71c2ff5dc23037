/* SPDX-License-Identifier: MIT */
/* bench_sweep.c: see bench_sweep.h. */
#include "bench_sweep.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Is item in the comma list (exactly, or as a prefix of it when prefix is set)? An empty
 * list holds everything. */
static int in_list(const char *list, const char *item, int prefix)
{
    if (!list || !list[0]) return 1;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n && strncmp(p, item, n) == 0 && (prefix || item[n] == '\0')) return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The kernel set that cuts the candidates: sorted names. */
typedef struct name_set {
    char **names;
    size_t n;
} name_set_t;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int name_set_load(name_set_t *s, const char *arch, const char *receipt, const char *filter, char *why,
                         size_t len)
{
    memset(s, 0, sizeof *s);
    fmha_kernel_set_t *set = NULL;
    fmha_status_t st = fmha_kernel_set_enumerate(arch, receipt[0] ? receipt : "all", filter[0] ? filter : NULL, &set,
                                                 why, len);
    if (st) return -1;
    s->n = fmha_kernel_set_count(set);
    s->names = calloc(s->n + 1, sizeof *s->names);
    for (size_t i = 0; s->names && i < s->n; i++)
        if (!(s->names[i] = strdup(fmha_kernel_set_name(set, i)))) s->n = i;
    fmha_kernel_set_destroy(set);
    if (!s->names) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    qsort(s->names, s->n, sizeof *s->names, cmp_str);
    return 0;
}

static int name_set_has(const name_set_t *s, const char *name)
{
    return bsearch(&name, s->names, s->n, sizeof *s->names, cmp_str) != NULL;
}

static void name_set_free(name_set_t *s)
{
    for (size_t i = 0; s->names && i < s->n; i++) free(s->names[i]);
    free(s->names);
}

static int already_done(const sweep_opts_t *o, const bench_case_t *c, const char *requested)
{
    for (size_t i = 0; i < o->n_done; i++) {
        const bench_row_t *r = &o->done[i];
        if (strcmp(r->command, c->command) == 0 && strcmp(r->flags, c->flags) == 0 &&
            strcmp(r->requested, requested) == 0)
            return 1;
    }
    return 0;
}

static int push_row(sweep_result_t *res, size_t *cap, const bench_row_t *r)
{
    if (res->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        bench_row_t *p = realloc(res->rows, nc * sizeof *p);
        if (!p) return -1;
        res->rows = p;
        *cap = nc;
    }
    res->rows[res->n++] = *r;
    return 0;
}

static void progress(const sweep_opts_t *o, size_t done, size_t total, const bench_case_t *c, const char *what)
{
    if (o->quiet) return;
    const int width = 24, fill = total ? (int)((size_t)width * done / total) : width;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-14.14s %-60.60s", fill, "########################", width - fill, "", done,
            total, c ? c->category : "", what);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

/* ---------------------------------------------------------------- isolate */

/* Measure one row in a child `fmha <command> <flags> -json=1 ...`; a child killed by a
 * signal (a GPU fault, the timeout) gives a "crashed" row. */
static void measure_isolated(const sweep_opts_t *o, const bench_case_t *c, const char *kernel, int verify,
                             bench_row_t *r)
{
    char extra[6][224];
    snprintf(extra[0], sizeof extra[0], "-json=1");
    snprintf(extra[1], sizeof extra[1], "-backend=%s", o->backend ? o->backend : "auto");
    snprintf(extra[2], sizeof extra[2], "-warmup=%d", o->set.warmup);
    snprintf(extra[3], sizeof extra[3], "-repeat=%d", o->set.samples > 0 ? o->set.samples : 1);
    snprintf(extra[4], sizeof extra[4], "-v=%d", verify);
    snprintf(extra[5], sizeof extra[5], "-force_kernel=%s", kernel ? kernel : "");
    char flags[sizeof c->flags];
    snprintf(flags, sizeof flags, "%s", c->flags);
    char *argv[sizeof c->flags / 2 + 10]; /* tokens of the flags, each at least one character and a space */
    int argc = 0;
    argv[argc++] = (char *)o->self;
    argv[argc++] = (char *)c->command;
    char *save = NULL;
    for (char *t = strtok_r(flags, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) argv[argc++] = t;
    for (int i = 0; i < 6; i++)
        if (i < 5 || kernel) argv[argc++] = extra[i];
    argv[argc] = NULL;

    snprintf(r->requested, sizeof r->requested, "%s", kernel ? kernel : "selector");
    int fds[2];
    if (pipe(fds)) {
        snprintf(r->status, sizeof r->status, "crashed");
        snprintf(r->error, sizeof r->error, "pipe failed");
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        if (o->timeout_s > 0) alarm((unsigned)o->timeout_s); /* kept across exec */
        execv(o->self, argv);
        _exit(127);
    }
    close(fds[1]);
    char out[1 << 15];
    size_t n = 0;
    ssize_t got;
    while ((got = read(fds[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)got;
    out[n] = '\0';
    close(fds[0]);
    int wst = 0;
    if (pid < 0 || waitpid(pid, &wst, 0) < 0) {
        snprintf(r->status, sizeof r->status, "crashed");
        snprintf(r->error, sizeof r->error, "could not start %s", o->self);
        return;
    }
    if (WIFSIGNALED(wst)) {
        const int sig = WTERMSIG(wst);
        snprintf(r->status, sizeof r->status, "crashed");
        snprintf(r->error, sizeof r->error, "the child was killed by signal %d (%s)%s", sig, strsignal(sig),
                 sig == SIGALRM ? ": over the --timeout" : "");
        return;
    }
    /* the last line that is a JSON object is the row */
    char *line = NULL;
    for (char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (*p == '{') line = p;
    char why[256];
    bench_row_t child;
    if (line) line[strcspn(line, "\n")] = '\0';
    if (!line || bench_row_from_json(line, &child, why, sizeof why)) {
        snprintf(r->status, sizeof r->status, "crashed");
        snprintf(r->error, sizeof r->error, "the child exited with %d and printed no row%s%s",
                 WIFEXITED(wst) ? WEXITSTATUS(wst) : -1, line ? ": " : "", line ? why : "");
        return;
    }
    /* the child measured; the parent's description stands (tier, category, flags) */
    snprintf(r->kernel, sizeof r->kernel, "%s", child.kernel);
    snprintf(r->plan_kernels, sizeof r->plan_kernels, "%s", child.plan_kernels);
    snprintf(r->how, sizeof r->how, "%s", child.how);
    snprintf(r->verify, sizeof r->verify, "%s", child.verify);
    snprintf(r->status, sizeof r->status, "%s", child.status);
    snprintf(r->error, sizeof r->error, "%s", child.error);
    memcpy(r->key, child.key, sizeof r->key);
    r->samples = child.samples, r->inner = child.inner;
    r->min_ms = child.min_ms, r->median_ms = child.median_ms, r->max_ms = child.max_ms;
    r->tflops = child.tflops, r->gbps = child.gbps, r->gflop = child.gflop, r->mbytes = child.mbytes;
    r->max_err = child.max_err, r->tol = child.tol;
}

/* ------------------------------------------------------------------ sweep */

/* The kernels of a case into *k (malloc'd; names point into *text): the selector's (one
 * NULL) or every candidate in the set. Returns the count, or -1 with why. */
static int case_kernels(fmha_context_t *ctx, const sweep_opts_t *o, const bench_spec_t *spec, const name_set_t *set,
                        char **text, const char ***k, char *why, size_t len)
{
    *text = NULL;
    *k = NULL;
    size_t lines = 1;
    if (o->all) {
        if (bench_candidates(spec, ctx, text, why, len)) return -1;
        for (const char *c = *text; *c; c++) lines += *c == '\n';
    }
    if (!(*k = calloc(lines, sizeof **k))) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    if (!o->all) return 1; /* (*k)[0] is NULL: the selector */
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(*text, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
        if (!set->names || name_set_has(set, t)) (*k)[n++] = t;
    if (n == 0) snprintf(why, len, "no candidate kernel%s", set->names ? " in the kernel set" : "");
    return n;
}

/* Parse and describe case c into spec and tmpl. Returns 1 when the case is in the sweep,
 * 0 when its category or family is not, -1 when its flags or problem are invalid (err says
 * why). On 1 the caller releases spec. */
static int open_case(fmha_context_t *ctx, const sweep_opts_t *o, const bench_case_t *c, bench_spec_t *spec,
                     bench_row_t *tmpl, char *err, size_t len)
{
    if (!in_list(o->categories, c->category, 1)) return 0;
    memset(tmpl, 0, sizeof *tmpl);
    if (bench_spec_parse(spec, c->command, c->flags, err, len)) return -1;
    if (bench_describe(spec, ctx, tmpl, err, len)) {
        bench_spec_release(spec);
        return -1;
    }
    if (!in_list(o->families, tmpl->family, 0)) {
        bench_spec_release(spec);
        return 0;
    }
    snprintf(tmpl->tier, sizeof tmpl->tier, "%s", bench_tier_name(c->tier));
    snprintf(tmpl->category, sizeof tmpl->category, "%s", c->category);
    snprintf(tmpl->flags, sizeof tmpl->flags, "%s", c->flags);
    return 1;
}

static void build_progress(size_t done, size_t total, const char *kernel, int from_cache, void *user)
{
    const sweep_opts_t *o = user;
    char what[200];
    snprintf(what, sizeof what, "%s %s", from_cache ? "cached" : "compiled", kernel);
    progress(o, done, total, NULL, what);
}

/* Compile every candidate of the sweep in parallel before measuring (GPU contexts, --all):
 * the JIT would otherwise compile each kernel at its first plan, one at a time, which
 * took as long as the measurements themselves. A failure here is not fatal: the rows
 * then say what failed to compile. */
static void precompile(fmha_context_t *ctx, const sweep_opts_t *o, const name_set_t *set, bench_row_t *tmpl)
{
    size_t len = 0, cap = 0;
    char *names = NULL;
    for (size_t ci = 0; ci < o->matrix->n; ci++) {
        const bench_case_t *c = &o->matrix->cases[ci];
        bench_spec_t spec;
        char err[1024], *text = NULL;
        const char **kernels = NULL;
        if (open_case(ctx, o, c, &spec, tmpl, err, sizeof err) != 1) continue;
        const int nk = case_kernels(ctx, o, &spec, set, &text, &kernels, err, sizeof err);
        for (int i = 0; i < nk; i++) {
            const size_t n = strlen(kernels[i]);
            if (len + n + 2 > cap) {
                char *grown = realloc(names, cap = 2 * (len + n + 2));
                if (!grown) break;
                names = grown;
            }
            memcpy(names + len, kernels[i], n);
            len += n;
            names[len++] = '\n';
            names[len] = '\0';
        }
        free(kernels);
        fmha_free(text);
        bench_spec_release(&spec);
    }
    if (names) {
        if (!o->quiet) fprintf(stderr, "compiling the sweep's kernels (the disk cache keeps them)\n");
        fmha_build_options_t b = {.struct_size = sizeof b, .arch = fmha_context_arch(ctx), .names = names,
                                  .progress = build_progress, .user = (void *)o};
        fmha_build_result_t res;
        char why[2048];
        if (fmha_build(&b, &res, why, sizeof why))
            fprintf(stderr, "%sprecompiling the sweep's kernels: %s (their rows will say so)\n", o->quiet ? "" : "\n",
                    why);
    }
    free(names);
}

int bench_sweep(fmha_context_t *ctx, const sweep_opts_t *o, sweep_result_t *res, char *why, size_t why_len)
{
    memset(res, 0, sizeof *res);
    size_t cap = 0;
    name_set_t set = {0};
    if ((o->receipt[0] || o->filter[0]) &&
        name_set_load(&set, fmha_context_arch(ctx), o->receipt, o->filter, why, why_len))
        return -1;
    const bench_matrix_t *m = o->matrix;
    bench_row_t *row = calloc(1, sizeof *row), *tmpl = calloc(1, sizeof *tmpl);
    if (!row || !tmpl) {
        free(row), free(tmpl), name_set_free(&set);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    if (!o->dry_run && o->all && fmha_context_backend(ctx) == FMHA_BACKEND_CUDA) precompile(ctx, o, &set, tmpl);
    /* a case's kernels are measured one after another: its references are computed once */
    bench_settings_t settings = o->set;
    settings.refs = o->set.verify && !o->isolate ? reference_memo_create() : NULL;
    int rc = 0;
    for (size_t ci = 0; ci < m->n && rc == 0; ci++) {
        const bench_case_t *c = &m->cases[ci];
        char err[1024] = "";
        bench_spec_t spec;
        const int open = open_case(ctx, o, c, &spec, tmpl, err, sizeof err);
        if (open < 0) {
            fprintf(stderr, "%smatrix line %d: %s %s: %s\n", o->quiet ? "" : "\n", c->line, c->command, c->flags, err);
            res->bad_cases++;
        }
        if (open != 1) continue;
        res->cases++;
        char sel[160] = "", how[64] = "", *text = NULL;
        const char **kernels = NULL;
        int nk = -1;
        if (bench_selector_choice(&spec, ctx, sel, sizeof sel, how, sizeof how, err, sizeof err) == 0)
            nk = case_kernels(ctx, o, &spec, &set, &text, &kernels, err, sizeof err);
        if (nk <= 0) {
            fprintf(stderr, "%smatrix line %d: %s %s: %s\n", o->quiet ? "" : "\n", c->line, c->command, c->flags, err);
            res->bad_cases++;
            free(kernels);
            fmha_free(text);
            bench_spec_release(&spec);
            continue;
        }
        if (o->dry_run) {
            printf("%s %s %s %s\n  class %s; selector: %s (%s)\n", tmpl->tier, c->category, c->command, c->flags,
                   tmpl->problem_class, sel, how);
            for (int i = 0; o->all && i < nk; i++) printf("  candidate %s\n", kernels[i]);
        }
        for (int i = 0; !o->dry_run && i < nk && rc == 0; i++) {
            const char *requested = kernels[i] ? kernels[i] : "selector";
            if (already_done(o, c, requested)) {
                res->resumed++;
                continue;
            }
            progress(o, ci, m->n, c, kernels[i] ? kernels[i] : sel);
            *row = *tmpl;
            const int verify = o->set.verify && bench_spec_work_gflop(&spec) <= o->set.verify_max_gflop;
            if (o->isolate) {
                measure_isolated(o, c, kernels[i], verify, row);
                if (o->set.verify && !verify) snprintf(row->verify, sizeof row->verify, "skipped");
            } else {
                bench_measure(&spec, ctx, kernels[i], &settings, row); /* keeps the tier and category */
            }
            row->selector_choice = strcmp(row->kernel, sel) == 0;
            res->failed += strcmp(row->status, "ok") != 0;
            res->verify_failed += strcmp(row->verify, "fail") == 0;
            if (strcmp(row->status, "ok") != 0 || strcmp(row->verify, "fail") == 0)
                fprintf(stderr, "%s%s %s [%s]: %s %s\n", o->quiet ? "" : "\n", c->command, c->flags, requested,
                        row->status, row->error);
            if (o->csv) {
                bench_csv_row(o->csv, row);
                fflush(o->csv);
            }
            if (push_row(res, &cap, row)) {
                snprintf(why, why_len, "out of memory");
                rc = -1;
            }
        }
        free(kernels);
        fmha_free(text);
        bench_spec_release(&spec);
    }
    if (!o->dry_run) progress(o, m->n, m->n, NULL, "done");
    if (settings.refs) {
        reference_memo_counts(settings.refs, &res->references_computed, &res->references_reused);
        reference_memo_destroy(settings.refs);
    }
    free(row);
    free(tmpl);
    name_set_free(&set);
    return rc;
}

void sweep_result_free(sweep_result_t *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}
