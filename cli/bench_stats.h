/* SPDX-License-Identifier: MIT */
/*
 * bench_stats.h: what a sweep of every candidate says about a kernel choice. Rows are
 * grouped by case (command and flags); a case's best is its fastest row that ran and did
 * not fail its check (median time). Against it: how often a choice is the best, and the
 * geometric mean of choice time / best time over the cases (the slowdown it leaves).
 */
#ifndef FMHA_CLI_BENCH_STATS_H
#define FMHA_CLI_BENCH_STATS_H

#include <stdio.h>

#include "bench_result.h"

typedef struct bench_case_rows {
    const bench_row_t **rows; /* the case's rows, in file order */
    size_t n;
    const bench_row_t *best;  /* NULL when no row ran */
} bench_case_rows_t;

typedef struct bench_cases {
    bench_case_rows_t *cases;
    size_t n;
} bench_cases_t;

/* A row counts for a case's best when it ran and its check did not fail. */
int bench_row_usable(const bench_row_t *r);

/* Group rows by case (fmha rows only; comparison rows are left out). -1 when out of memory. */
int bench_cases_group(const bench_row_t *rows, size_t n, bench_cases_t *out);
void bench_cases_free(bench_cases_t *c);
/* The case's usable row of kernel k, or NULL. */
const bench_row_t *bench_case_kernel(const bench_case_rows_t *c, const char *kernel);

typedef struct bench_choice_stats {
    size_t cases;     /* cases with a best and a measured choice */
    size_t hits;      /* the choice is the best (or within 0.5% of it: timing noise) */
    size_t unmeasured; /* cases whose choice has no usable row */
    double geomean;   /* of choice / best over the counted cases (1 = always the best) */
    double worst;     /* the largest choice / best */
    const bench_row_t *worst_row;
} bench_choice_stats_t;

/* choose(case) names the kernel a policy picks for a case (NULL: none). */
typedef const char *(*bench_choose_fn)(const bench_case_rows_t *c, void *user);
void bench_choice_stats(const bench_cases_t *cs, bench_choose_fn choose, void *user, bench_choice_stats_t *out);

/* The untuned selector's choice as the sweep recorded it (selector_choice == 1). */
const char *bench_recorded_selector(const bench_case_rows_t *c, void *user);

/* "<label>: the choice is the best in H of N cases; geometric-mean slowdown vs the best
 * X% (worst Y%: <case>)". */
void bench_choice_print(FILE *f, const char *label, const bench_choice_stats_t *s);

#endif /* FMHA_CLI_BENCH_STATS_H */
