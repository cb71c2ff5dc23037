/* SPDX-License-Identifier: MIT */
/*
 * bench_sweep.h: a matrix's cases times their kernels, measured into rows. Each case
 * runs the selector's choice, or with `all` every candidate of its measured stage (cut
 * to a kernel set when one is given); rows go to the CSV as they are measured (flushed,
 * so an interrupted sweep resumes from it), in this process or, with `isolate`, each in
 * a child `fmha run|bwd -json=1` so that a GPU fault costs one row. A progress bar goes
 * to stderr.
 */
#ifndef FMHA_CLI_BENCH_SWEEP_H
#define FMHA_CLI_BENCH_SWEEP_H

#include <stdio.h>

#include "bench_matrix.h"
#include "bench_measure.h"

typedef struct sweep_opts {
    const bench_matrix_t *matrix;
    const char *matrix_path; /* its file (the JSON's metadata) */
    const char *families;   /* comma list of row families (fwd, fwd_splitkv, ..., bwd); "" all */
    const char *categories; /* comma list of category prefixes; "" all */
    int all;                /* every candidate kernel, not only the selector's choice */
    const char *receipt, *filter; /* candidates cut to this kernel set ("" none) */
    bench_settings_t set;
    int isolate;            /* one child process per row */
    int timeout_s;          /* isolate: a child running longer is killed (0: no limit) */
    const char *self;       /* isolate: the fmha executable */
    const char *backend;    /* isolate: the children's -backend */
    int dry_run;            /* plan and list, measure nothing */
    FILE *csv;              /* rows appended here (may be NULL) */
    const bench_row_t *done; /* resume: rows already measured (skipped) */
    size_t n_done;
    int quiet;              /* no progress bar */
} sweep_opts_t;

typedef struct sweep_result {
    bench_row_t *rows; /* the new rows */
    size_t n;
    size_t cases, skipped_cases, failed, verify_failed, resumed;
    int bad_cases;     /* cases whose flags or problem are invalid (dry run: planning failed) */
    long references_computed, references_reused; /* verified rows: naive references computed
                                                    or taken from the previous kernel's row */
} sweep_result_t;

/* Run the sweep on ctx. Returns 0, or -1 when out of memory (why says so). */
int bench_sweep(fmha_context_t *ctx, const sweep_opts_t *o, sweep_result_t *res, char *why, size_t why_len);
void sweep_result_free(sweep_result_t *r);

#endif /* FMHA_CLI_BENCH_SWEEP_H */
