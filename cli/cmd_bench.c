/* SPDX-License-Identifier: MIT */
/*
 * cmd_bench.c: `fmha bench` and `fmha tune`, the benchmark engine over a shape matrix
 * (bench_sweep.h) and the autotuner that turns a sweep of every candidate into the
 * tuning database the selector reads (docs/bench.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "bench_sweep.h"
#include "commands.h"

/* The flags bench and tune share: what to sweep and how to measure it. */
#define SWEEP_FLAGS                                                                                                   \
    {"matrix", "", "the shape matrix: one case per line, '<tier> <category> run|bwd <flags>' (default: the shipped " \
                   "one, bench/matrix.txt of a checkout or share/fmha/matrix.txt of an install)"},                  \
        {"tier", "smoke", "smoke | full | nightly (a tier includes those before it)"},                                \
        {"family", "", "comma list of families: fwd, fwd_splitkv, fwd_pagedkv, batch_prefill, appendkv, bwd"},        \
        {"category", "", "comma list of category prefixes (e.g. decode,fwd/causal)"},                                 \
        {"receipt", "", "cut the candidates to a receipt's kernels (default, flash, ..., all)"},                       \
        {"filter", "", "cut the candidates to kernels matching an expression, e.g. 'pipeline==wgmmaws'"},             \
        {"warmup", "3", "untimed executions before each row's samples"},                                              \
        {"repeat", "10", "timed samples per row (min, median, max of their means)"},                                  \
        {"sample_ms", "1", "a sample repeats the execution until it lasts about this many ms"},                       \
        {"verify", "0", "1: check each row's poisoned execution against the CPU oracle"},                             \
        {"verify_max_gflop", "8", "rows whose unmasked forward exceeds this many GFLOP are not verified (skipped)"},  \
        {"isolate", "0", "1: each row in its own process (a GPU fault loses one row, not the sweep)"},                \
        {"timeout", "300", "--isolate: seconds before a row's process is killed (0: none)"},                          \
        {"backend", "auto", "auto | cpu | cuda"},                                                                       \
        {"csv", "", "write the rows to this CSV as they are measured"},                                               \
        {"resume", "0", "1: keep the rows of an existing --csv and measure only the missing ones"},                   \
        {"quiet", "0", "1: no progress bar"}

static const flag_spec_t BENCH_FLAGS[] = {
    SWEEP_FLAGS,
    {"all", "0", "1: every candidate kernel of each case's measured stage, not only the selector's choice"},
    {"best", "0", "1: like --all, and the table shows each case's fastest kernel beside the selector's"},
    {"json", "", "write every row (resumed ones too) to this JSON file at the end"},
    {"dry_run", "0", "1: plan every case and print what would run; measure nothing"},
    {"arch", "", "--dry-run: plan for a virtual GPU arch (sm80, sm86, sm89, sm90)"},
    {"tune_db", "", "a tuning database the selector consults"},
    {"from", "", "measure nothing: write the rows of this bench CSV to --json (e.g. a CSV from another machine)"},
};
static const char *const BENCH_SWITCHES[] = {"all", "best", "verify", "isolate", "resume", "dry_run", "quiet", NULL};

static const flag_spec_t TUNE_FLAGS[] = {
    SWEEP_FLAGS,
    {"out", "fmha_tune.json", "the tuning database to write"},
    {"from", "", "tune from this bench CSV (of `fmha bench --all`) instead of measuring"},
};
static const char *const TUNE_SWITCHES[] = {"verify", "isolate", "resume", "quiet", NULL};

static int flag_int(args_t *a, const char *name, int64_t lo, int64_t hi, int *out)
{
    int64_t v;
    if (args_i64(a, name, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

/* The matrix that ships with fmha: bench/matrix.txt under the working directory (a
 * checkout), else share/fmha/matrix.txt beside the executable's bin/ (an install). NULL,
 * with the places tried in buf, when neither exists. */
static const char *shipped_matrix(char *buf, size_t len)
{
    if (access("bench/matrix.txt", R_OK) == 0) return snprintf(buf, len, "bench/matrix.txt"), buf;
    char exe[2048];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0'; /* the executable's directory, bin/ when installed */
        snprintf(buf, len, "%s/../share/fmha/matrix.txt", exe);
        if (access(buf, R_OK) == 0) return buf;
    }
    snprintf(buf, len, "tried ./bench/matrix.txt and %s/../share/fmha/matrix.txt", n > 0 ? exe : "<the executable's directory>");
    return NULL;
}

/* The sweep's options and the matrix from the shared flags. */
static int sweep_configure(const char *cmd, args_t *a, sweep_opts_t *o, bench_matrix_t *m)
{
    memset(o, 0, sizeof *o);
    int verify, isolate, timeout, quiet, warm, rep;
    double sample_ms, vmax;
    if (flag_int(a, "warmup", 0, 1000000, &warm) || flag_int(a, "repeat", 1, 100000, &rep) ||
        flag_int(a, "verify", 0, 1, &verify) || flag_int(a, "isolate", 0, 1, &isolate) ||
        flag_int(a, "timeout", 0, 86400, &timeout) || flag_int(a, "quiet", 0, 1, &quiet) ||
        args_f64(a, "sample_ms", 0, 60000, "[0, 60000]", &sample_ms) ||
        args_f64(a, "verify_max_gflop", 0, 1e9, "[0, 1e9]", &vmax)) {
        fprintf(stderr, "fmha %s: %s\n", cmd, a->err);
        return -1;
    }
    const int tier = bench_tier_parse(args_str(a, "tier"));
    if (tier < 0) {
        fprintf(stderr, "fmha %s: flag -tier=%s: expected smoke, full or nightly\n", cmd, args_str(a, "tier"));
        return -1;
    }
    char why[1024];
    static char shipped[4096];
    const char *matrix = args_str(a, "matrix");
    if (!matrix[0] && !(matrix = shipped_matrix(shipped, sizeof shipped))) {
        fprintf(stderr, "fmha %s: no --matrix given and no shipped matrix found (%s); give --matrix=FILE\n", cmd, shipped);
        return -1;
    }
    if (bench_matrix_load(matrix, (bench_tier_t)tier, m, why, sizeof why)) {
        fprintf(stderr, "fmha %s: %s\n", cmd, why);
        return -1;
    }
    o->matrix = m, o->matrix_path = matrix;
    o->families = args_str(a, "family"), o->categories = args_str(a, "category");
    o->receipt = args_str(a, "receipt"), o->filter = args_str(a, "filter");
    o->set = (bench_settings_t){warm, rep, sample_ms, verify, vmax, NULL};
    o->isolate = isolate, o->timeout_s = timeout, o->quiet = quiet;
    o->backend = args_str(a, "backend");
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    o->self = self;
    if (isolate && !self[0]) {
        fprintf(stderr, "fmha %s: --isolate needs /proc/self/exe to find this program\n", cmd);
        return -1;
    }
    return 0;
}

static int make_context(const char *cmd, const char *backend, const char *arch, const char *tune_db,
                        fmha_context_t **ctx)
{
    fmha_backend_t b = FMHA_BACKEND_AUTO;
    if (strcmp(backend, "cpu") == 0) b = FMHA_BACKEND_CPU;
    else if (strcmp(backend, "cuda") == 0) b = FMHA_BACKEND_CUDA;
    else if (strcmp(backend, "auto") != 0) {
        fprintf(stderr, "fmha %s: flag -backend=%s: expected auto, cpu or cuda\n", cmd, backend);
        return -1;
    }
    fmha_status_t st = arch && arch[0] ? fmha_context_create_virtual(ctx, arch, 0) : fmha_context_create(ctx, b, 0);
    if (st) {
        fprintf(stderr, "fmha %s: cannot create a context for %s: %s (%s)\n", cmd, arch && arch[0] ? arch : backend,
                fmha_context_create_error(), fmha_build_info());
        return -1;
    }
    if (tune_db && tune_db[0] && fmha_context_load_tune_db(*ctx, tune_db)) {
        fprintf(stderr, "fmha %s: %s\n", cmd, fmha_context_last_error(*ctx));
        fmha_context_destroy(*ctx);
        *ctx = NULL;
        return -1;
    }
    return 0;
}

/* Open the CSV: with resume and an existing file, read its rows and append; else write a
 * new one with its header. */
static FILE *open_csv(const char *cmd, const char *path, int resume, bench_row_t **done, size_t *n_done)
{
    *done = NULL, *n_done = 0;
    if (!path[0]) {
        if (resume) fprintf(stderr, "fmha %s: --resume needs --csv (the file to resume from)\n", cmd);
        return resume ? NULL : stdin; /* stdin: "no file", never written */
    }
    char why[1024];
    if (resume && access(path, F_OK) == 0) {
        if (bench_csv_read(path, done, n_done, why, sizeof why)) {
            fprintf(stderr, "fmha %s: --resume: %s\n", cmd, why);
            return NULL;
        }
        FILE *f = fopen(path, "a");
        if (!f) fprintf(stderr, "fmha %s: cannot append to %s\n", cmd, path);
        return f;
    }
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "fmha %s: cannot write %s\n", cmd, path);
    else bench_csv_header(f);
    return f;
}

/* The rows as a short table: each row, or with best_only each case's fastest with the
 * selector's choice beside it. */
static void print_table(const bench_row_t *rows, size_t n, int best_only)
{
    printf("%-18s %-8s %-62s %10s %9s %9s %-7s %s\n", "category", "family", "flags", "median_ms", "TFLOPS", "GB/s",
           "verify", best_only ? "best kernel (selector's, x slower)" : "kernel");
    if (!best_only) {
        for (size_t i = 0; i < n; i++) {
            const bench_row_t *r = &rows[i];
            if (strcmp(r->status, "ok") == 0)
                printf("%-18.18s %-8.8s %-62.62s %10.4f %9.2f %9.1f %-7s %s%s\n", r->category, r->family, r->flags,
                       r->median_ms, r->tflops, r->gbps, r->verify, r->kernel, r->selector_choice ? " *" : "");
            else
                printf("%-18.18s %-8.8s %-62.62s %10s %9s %9s %-7s %s: %s\n", r->category, r->family, r->flags, "-",
                       "-", "-", r->verify, r->status, r->error);
        }
        return;
    }
    bench_cases_t cs;
    if (bench_cases_group(rows, n, &cs)) return;
    for (size_t i = 0; i < cs.n; i++) {
        const bench_case_rows_t *c = &cs.cases[i];
        const bench_row_t *b = c->best, *r0 = c->rows[0];
        if (!b) {
            printf("%-18.18s %-8.8s %-62.62s %10s %9s %9s %-7s no row ran\n", r0->category, r0->family, r0->flags, "-",
                   "-", "-", "-");
            continue;
        }
        const bench_row_t *s = bench_case_kernel(c, bench_recorded_selector(c, NULL));
        printf("%-18.18s %-8.8s %-62.62s %10.4f %9.2f %9.1f %-7s %s", b->category, b->family, b->flags, b->median_ms,
               b->tflops, b->gbps, b->verify, b->kernel);
        if (s && s != b) printf(" (selector: %s, %.3fx)", s->kernel, s->median_ms / b->median_ms);
        else if (s) printf(" (= selector)");
        putchar('\n');
    }
    bench_cases_free(&cs);
}

static int write_json(const char *cmd, const char *path, const char *matrix, const char *tier, const char *arch,
                      const bench_row_t *old, size_t n_old, const sweep_result_t *res)
{
    bench_row_t *all = malloc(sizeof *all * (n_old + res->n + 1));
    FILE *f = all ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "fmha %s: cannot write %s\n", cmd, path);
        free(all);
        return -1;
    }
    if (n_old) memcpy(all, old, sizeof *all * n_old);
    if (res->n) memcpy(all + n_old, res->rows, sizeof *all * res->n);
    char meta[1024], date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(meta, sizeof meta,
             "{\"tool\": \"fmha bench\", \"version\": \"%s\", \"arch\": \"%s\", \"matrix\": \"%s\", \"tier\": \"%s\", "
             "\"written\": \"%s\"}",
             fmha_version_string(), arch, matrix, tier, date);
    int rc = bench_json_write(f, meta, all, n_old + res->n);
    rc |= fclose(f);
    free(all);
    if (rc) fprintf(stderr, "fmha %s: writing %s failed\n", cmd, path);
    return rc ? -1 : 0;
}

static int exit_code(const sweep_result_t *r)
{
    return r->bad_cases ? EXIT_BAD_INPUT : r->failed ? EXIT_RUN_FAILED : r->verify_failed ? EXIT_CHECK_FAILED : EXIT_OK;
}

static void print_summary(const sweep_result_t *r)
{
    printf("%zu cases, %zu rows measured (%zu resumed from the CSV); %zu did not run, %zu failed the check, %d cases "
           "invalid\n",
           r->cases, r->n, r->resumed, r->failed, r->verify_failed, r->bad_cases);
    if (r->references_computed + r->references_reused)
        printf("naive references: %ld computed, %ld reused from the case's previous row\n", r->references_computed,
               r->references_reused);
}

int cmd_bench(int argc, char **argv)
{
    char **nv = NULL;
    int nc = 0;
    args_t a;
    bench_matrix_t m = {0};
    fmha_context_t *ctx = NULL;
    sweep_result_t res = {0};
    bench_row_t *done = NULL;
    size_t n_done = 0;
    FILE *csv = NULL;
    int rc = args_parse_command(
        "bench", BENCH_FLAGS, (int)(sizeof BENCH_FLAGS / sizeof BENCH_FLAGS[0]), BENCH_SWITCHES,
        "usage: fmha bench [--matrix=FILE] [--tier=smoke] [--family=fwd,bwd] [--all|--best]\n"
        "                  [--verify] [--isolate] [--csv=out.csv [--resume]] [--json=out.json] [--dry-run [--arch=sm90]]\n"
        "Measures the cases of a shape matrix: the selector's kernel, or every candidate (--all). Rows have the\n"
        "problem, the full kernel key, min/median/max ms, TFLOPS and GB/s (REFERENCE.md), and the check.\n"
        "Exit: 0 ok, 1 a check failed, 2 bad arguments or an invalid case, 3 a row failed to run.",
        argc, argv, &a, &nv, &nc);
    if (rc >= 0) goto done;
    if (args_str(&a, "from")[0]) { /* CSV -> JSON, no context, no matrix */
        char why[1024];
        const char *json = args_str(&a, "json");
        if (!json[0] || bench_csv_read(args_str(&a, "from"), &done, &n_done, why, sizeof why)) {
            fprintf(stderr, "fmha bench: --from: %s\n", json[0] ? why : "needs --json (the file to write)");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        rc = write_json("bench", json, args_str(&a, "from"), "", n_done ? done[0].device : "", done, n_done, &res)
                 ? EXIT_RUN_FAILED
                 : EXIT_OK;
        if (!rc) printf("wrote %s: %zu rows\n", json, n_done);
        goto done;
    }
    sweep_opts_t o;
    int all, best, dry;
    if (sweep_configure("bench", &a, &o, &m) || flag_int(&a, "all", 0, 1, &all) || flag_int(&a, "best", 0, 1, &best) ||
        flag_int(&a, "dry_run", 0, 1, &dry)) {
        if (!a.err[0]) snprintf(a.err, sizeof a.err, "see above");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    if (args_str(&a, "arch")[0] && !dry) {
        fprintf(stderr, "fmha bench: --arch plans for a virtual GPU, which runs nothing: use it with --dry-run\n");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    o.all = all || best, o.dry_run = dry;
    if (make_context("bench", o.backend, args_str(&a, "arch"), args_str(&a, "tune_db"), &ctx)) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    int resume;
    if (flag_int(&a, "resume", 0, 1, &resume) ||
        !(csv = dry ? stdin : open_csv("bench", args_str(&a, "csv"), resume, &done, &n_done))) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    o.csv = csv == stdin ? NULL : csv;
    o.done = done, o.n_done = n_done;
    char why[1024];
    if (bench_sweep(ctx, &o, &res, why, sizeof why)) {
        fprintf(stderr, "fmha bench: %s\n", why);
        rc = EXIT_RUN_FAILED;
        goto done;
    }
    rc = exit_code(&res);
    if (dry) {
        printf("dry run: %zu cases planned on %s, %d invalid\n", res.cases, fmha_context_arch(ctx), res.bad_cases);
        goto done;
    }
    print_table(res.rows, res.n, best);
    print_summary(&res);
    if (o.all) {
        bench_cases_t cs;
        if (bench_cases_group(res.rows, res.n, &cs) == 0) {
            bench_choice_stats_t st;
            bench_choice_stats(&cs, bench_recorded_selector, NULL, &st);
            bench_choice_print(stdout, "selector", &st);
            bench_cases_free(&cs);
        }
    }
    if (args_str(&a, "json")[0] &&
        write_json("bench", args_str(&a, "json"), o.matrix_path, args_str(&a, "tier"), fmha_context_arch(ctx), done,
                   n_done, &res))
        rc = EXIT_RUN_FAILED;
done:
    if (csv && csv != stdin) fclose(csv);
    free(done);
    sweep_result_free(&res);
    bench_matrix_free(&m);
    fmha_context_destroy(ctx);
    args_free_argv(nv, nc);
    return rc;
}

/* ------------------------------------------------------------------- tune */

/* user: {the grouping, the tuned selector's kernel per case} */
static const char *tuned_pick(const bench_case_rows_t *c, void *user)
{
    const bench_cases_t *cs = ((void **)user)[0];
    char **k = ((void **)user)[1];
    return k[c - cs->cases];
}

/* The kernel of a class: the one measured on every case of the class with the smallest
 * geometric-mean ratio to each case's best. Returns NULL when no kernel covers them all. */
static const char *class_winner(const bench_cases_t *cs, const char *cls, double *geomean, size_t *cases)
{
    const char *win = NULL;
    double best = INFINITY;
    *cases = 0;
    for (size_t i = 0; i < cs->n; i++) {
        const bench_case_rows_t *c = &cs->cases[i];
        if (!c->best || strcmp(c->rows[0]->problem_class, cls)) continue;
        (*cases)++;
        for (size_t r = 0; r < c->n; r++) { /* each kernel measured on some case of the class */
            const char *k = c->rows[r]->kernel;
            if (!bench_row_usable(c->rows[r])) continue;
            double sum = 0;
            size_t n = 0;
            int covers = 1;
            for (size_t j = 0; j < cs->n && covers; j++) {
                const bench_case_rows_t *d = &cs->cases[j];
                if (!d->best || strcmp(d->rows[0]->problem_class, cls)) continue;
                const bench_row_t *x = bench_case_kernel(d, k);
                if (!x) covers = 0;
                else sum += log(x->median_ms / d->best->median_ms), n++;
            }
            if (covers && n && sum / (double)n < best - 1e-12) best = sum / (double)n, win = k;
        }
    }
    *geomean = win ? exp(best) : 0;
    return win;
}

/* The rows' problem classes as this version defines them (fmha_problem_class): a CSV
 * from another version may have coarser ones. */
static void reclassify(bench_row_t *rows, size_t n)
{
    bench_row_t *tmp = calloc(1, sizeof *tmp);
    for (size_t i = 0; tmp && i < n; i++) {
        bench_row_t *r = &rows[i];
        if (i && strcmp(r->command, rows[i - 1].command) == 0 && strcmp(r->flags, rows[i - 1].flags) == 0) {
            memcpy(r->problem_class, rows[i - 1].problem_class, sizeof r->problem_class);
            continue;
        }
        bench_spec_t spec;
        char why[512];
        if (strcmp(r->library, "fmha") || bench_spec_parse(&spec, r->command, r->flags, why, sizeof why)) continue;
        if (bench_describe(&spec, NULL, tmp, why, sizeof why) == 0)
            memcpy(r->problem_class, tmp->problem_class, sizeof r->problem_class);
        bench_spec_release(&spec);
    }
    free(tmp);
}

/* A database entry: a class and its kernel (pointers into the rows). */
typedef struct tune_entry {
    const char *cls, *kernel;
    size_t cases;
    double geomean;
} tune_entry_t;

/* One entry per class of the measured cases that some kernel covers. */
static tune_entry_t *tune_entries(const bench_cases_t *cs, size_t *n)
{
    tune_entry_t *e = calloc(cs->n + 1, sizeof *e);
    *n = 0;
    for (size_t i = 0; e && i < cs->n; i++) {
        const char *cls = cs->cases[i].rows[0]->problem_class;
        if (!cs->cases[i].best) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = cs->cases[j].best && !strcmp(cs->cases[j].rows[0]->problem_class, cls);
        if (seen) continue;
        tune_entry_t *x = &e[*n];
        x->cls = cls;
        if ((x->kernel = class_winner(cs, cls, &x->geomean, &x->cases))) (*n)++;
        else fprintf(stderr, "fmha tune: class %s: no kernel was measured on all its %zu cases; no entry\n", cls, x->cases);
    }
    return e;
}

static const char *tune_entry_kernel(const tune_entry_t *e, size_t n, const char *cls)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].cls, cls) == 0) return e[i].kernel;
    return NULL;
}

/* The database fmha_context_load_tune_db reads, with what each entry rests on. */
static int write_tune_db(const char *path, const tune_entry_t *e, size_t n, const char *arch, const char *source)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\n \"metadata\": {\"tool\": \"fmha tune\", \"version\": \"%s\", \"arch\": \"%s\", \"measured\": \"%s\"},\n"
               " \"entries\": [",
            fmha_version_string(), arch, source);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n  {\"class\": \"%s\", \"kernel\": \"%s\", \"cases\": %zu, \"geomean_vs_best\": %.4f}",
                i ? "," : "", e[i].cls, e[i].kernel, e[i].cases, e[i].geomean);
    fprintf(f, "\n ]\n}\n");
    return fclose(f) ? -1 : 0;
}

int cmd_tune(int argc, char **argv)
{
    char **nv = NULL;
    int nc = 0;
    args_t a;
    bench_matrix_t m = {0};
    fmha_context_t *ctx = NULL;
    tune_entry_t *out_entries = NULL;
    size_t n_entries = 0;
    sweep_result_t res = {0};
    bench_row_t *done = NULL;
    size_t n_done = 0;
    FILE *csv = NULL;
    bench_cases_t cs = {0};
    char **picks = NULL;
    int rc = args_parse_command(
        "tune", TUNE_FLAGS, (int)(sizeof TUNE_FLAGS / sizeof TUNE_FLAGS[0]), TUNE_SWITCHES,
        "usage: fmha tune [--matrix=FILE] [--tier=smoke] [--out=fmha_tune.json] [--from=bench.csv]\n"
        "                 [bench's sweep flags]\n"
        "Measures every candidate kernel of each case (or reads a `fmha bench --all` CSV), picks for each problem\n"
        "class the kernel closest to the per-case best, writes the tuning database, and reports how the selector\n"
        "does against the per-case best before and after (load it with -tune_db / fmha_context_load_tune_db).",
        argc, argv, &a, &nv, &nc);
    if (rc >= 0) goto done;
    rc = EXIT_OK;
    const char *from = args_str(&a, "from"), *out = args_str(&a, "out");
    sweep_opts_t o;
    char why[1024];
    const bench_row_t *rows;
    size_t n_rows;
    if (from[0]) {
        if (bench_csv_read(from, &done, &n_done, why, sizeof why)) {
            fprintf(stderr, "fmha tune: --from: %s\n", why);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        rows = done, n_rows = n_done;
    } else {
        int resume;
        if (sweep_configure("tune", &a, &o, &m) || flag_int(&a, "resume", 0, 1, &resume) ||
            make_context("tune", o.backend, NULL, NULL, &ctx) ||
            !(csv = open_csv("tune", args_str(&a, "csv"), resume, &done, &n_done))) {
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        o.all = 1;
        o.csv = csv == stdin ? NULL : csv;
        o.done = done, o.n_done = n_done;
        if (bench_sweep(ctx, &o, &res, why, sizeof why)) {
            fprintf(stderr, "fmha tune: %s\n", why);
            rc = EXIT_RUN_FAILED;
            goto done;
        }
        print_summary(&res);
        /* the resumed rows and the new ones together */
        bench_row_t *all = realloc(done, sizeof *all * (n_done + res.n + 1));
        if (!all) {
            rc = EXIT_RUN_FAILED;
            goto done;
        }
        if (res.n) memcpy(all + n_done, res.rows, sizeof *all * res.n);
        done = all, n_done += res.n;
        rows = done, n_rows = n_done;
    }
    reclassify(done, n_done);
    if (bench_cases_group(rows, n_rows, &cs) || !(picks = calloc(cs.n + 1, sizeof *picks))) {
        rc = EXIT_RUN_FAILED;
        goto done;
    }
    bench_choice_stats_t before, after;
    bench_choice_stats(&cs, bench_recorded_selector, NULL, &before);
    const char *arch = ctx ? fmha_context_arch(ctx) : n_rows ? rows[0].device : "?";
    if (!(out_entries = tune_entries(&cs, &n_entries)) ||
        write_tune_db(out, out_entries, n_entries, arch, from[0] ? from : "this sweep")) {
        fprintf(stderr, "fmha tune: cannot write %s\n", out);
        rc = EXIT_RUN_FAILED;
        goto done;
    }
    printf("wrote %s: %zu classes from %zu cases\n", out, n_entries, cs.n);
    /* The selector with the database takes a class's kernel whenever it can run the
     * problem, which is when the sweep measured it on the case (it measured every
     * candidate); otherwise its heuristics choose, as recorded. */
    size_t from_db = 0;
    for (size_t i = 0; i < cs.n; i++) {
        const bench_case_rows_t *c = &cs.cases[i];
        const char *k = tune_entry_kernel(out_entries, n_entries, c->rows[0]->problem_class);
        const int db = k && bench_case_kernel(c, k);
        from_db += db;
        picks[i] = strdup(db ? k : bench_recorded_selector(c, NULL) ? bench_recorded_selector(c, NULL) : "");
    }
    void *user[2] = {&cs, picks};
    bench_choice_stats(&cs, tuned_pick, user, &after);
    bench_choice_print(stdout, "before tuning (the selector's heuristics)", &before);
    bench_choice_print(stdout, "after tuning  (the selector with the database)", &after);
    printf("the database decides %zu of %zu cases (fmha explain shows \"tuning database\" for them)\n", from_db, cs.n);
done:
    for (size_t i = 0; picks && i < cs.n; i++) free(picks[i]);
    free(picks);
    bench_cases_free(&cs);
    if (csv && csv != stdin) fclose(csv);
    free(done);
    sweep_result_free(&res);
    bench_matrix_free(&m);
    fmha_context_destroy(ctx);
    free(out_entries);
    args_free_argv(nv, nc);
    return rc;
}
