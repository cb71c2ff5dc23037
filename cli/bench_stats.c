/* SPDX-License-Identifier: MIT */
/* bench_stats.c: see bench_stats.h. */
#include "bench_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Differences below this are timing noise: the choice counts as the best. */
#define HIT_TOLERANCE 1.005

int bench_row_usable(const bench_row_t *r)
{
    return strcmp(r->status, "ok") == 0 && strcmp(r->verify, "fail") != 0 && r->median_ms > 0;
}

static int same_case(const bench_row_t *a, const bench_row_t *b)
{
    return strcmp(a->command, b->command) == 0 && strcmp(a->flags, b->flags) == 0;
}

int bench_cases_group(const bench_row_t *rows, size_t n, bench_cases_t *out)
{
    memset(out, 0, sizeof *out);
    out->cases = calloc(n + 1, sizeof *out->cases);
    if (!out->cases) return -1;
    for (size_t i = 0; i < n; i++) {
        const bench_row_t *r = &rows[i];
        if (strcmp(r->library, "fmha") != 0) continue;
        bench_case_rows_t *c = NULL;
        for (size_t k = 0; k < out->n && !c; k++)
            if (same_case(out->cases[k].rows[0], r)) c = &out->cases[k];
        if (!c) {
            c = &out->cases[out->n++];
            if (!(c->rows = calloc(n, sizeof *c->rows))) {
                bench_cases_free(out);
                return -1;
            }
        }
        c->rows[c->n++] = r;
        if (bench_row_usable(r) && (!c->best || r->median_ms < c->best->median_ms)) c->best = r;
    }
    return 0;
}

void bench_cases_free(bench_cases_t *c)
{
    for (size_t i = 0; c->cases && i < c->n; i++) free(c->cases[i].rows);
    free(c->cases);
    memset(c, 0, sizeof *c);
}

const bench_row_t *bench_case_kernel(const bench_case_rows_t *c, const char *kernel)
{
    const bench_row_t *found = NULL;
    for (size_t i = 0; kernel && i < c->n; i++)
        if (bench_row_usable(c->rows[i]) && strcmp(c->rows[i]->kernel, kernel) == 0 &&
            (!found || c->rows[i]->median_ms < found->median_ms))
            found = c->rows[i];
    return found;
}

void bench_choice_stats(const bench_cases_t *cs, bench_choose_fn choose, void *user, bench_choice_stats_t *out)
{
    memset(out, 0, sizeof *out);
    double log_sum = 0;
    for (size_t i = 0; i < cs->n; i++) {
        const bench_case_rows_t *c = &cs->cases[i];
        if (!c->best) continue;
        const bench_row_t *r = bench_case_kernel(c, choose(c, user));
        if (!r) {
            out->unmeasured++;
            continue;
        }
        const double ratio = r->median_ms / c->best->median_ms;
        out->cases++;
        out->hits += ratio <= HIT_TOLERANCE;
        log_sum += log(ratio);
        if (ratio > out->worst) out->worst = ratio, out->worst_row = r;
    }
    out->geomean = out->cases ? exp(log_sum / (double)out->cases) : 1.0;
}

const char *bench_recorded_selector(const bench_case_rows_t *c, void *user)
{
    (void)user;
    for (size_t i = 0; i < c->n; i++)
        if (c->rows[i]->selector_choice) return c->rows[i]->kernel;
    return NULL;
}

void bench_choice_print(FILE *f, const char *label, const bench_choice_stats_t *s)
{
    fprintf(f, "%s: the best kernel in %zu of %zu cases; geometric-mean slowdown vs the per-case best %.2f%%", label,
            s->hits, s->cases, 100.0 * (s->geomean - 1.0));
    if (s->worst_row)
        fprintf(f, " (worst %.1f%%: %s %s)", 100.0 * (s->worst - 1.0), s->worst_row->command, s->worst_row->flags);
    if (s->unmeasured) fprintf(f, "; %zu cases whose choice was not measured", s->unmeasured);
    fputc('\n', f);
}
