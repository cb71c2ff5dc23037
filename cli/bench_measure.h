/* SPDX-License-Identifier: MIT */
/*
 * bench_measure.h: one problem, one kernel, one bench row. A spec is a problem written
 * as `fmha run` or `fmha bwd` flags; measuring it plans it (the selector's choice or a
 * forced kernel), executes it once with poisoned outputs, optionally checks that run
 * against the CPU oracle (REFERENCE.md's accuracy rule), then times samples of repeated
 * executions. `fmha bench`, `fmha tune` and `fmha run/bwd -json=1` all measure here.
 *
 * The measured stage: the appendkv plan when the case appends keys (-s_knew), dq_dk_dv
 * for the backward, else the plan's first stage (splitkv for split-KV decode). Candidates
 * are that stage's; rates are of the whole plan.
 */
#ifndef FMHA_CLI_BENCH_MEASURE_H
#define FMHA_CLI_BENCH_MEASURE_H

#include "bench_result.h"
#include "run_config.h"

typedef struct bench_spec {
    int bwd;           /* the command is bwd */
    const char *flags; /* the flags as given (NULL for a spec built from parsed options) */
    char *text;        /* owned: the flags, split in place into argv (the options point into it) */
    char **argv;
    run_opts_t o;      /* the problem's flags (o.cfg) */
    bwd_config_t bcfg; /* bwd: the backward's configuration */
    int owns_lens;     /* release frees o.lens_q and o.lens_k */
} bench_spec_t;

/* command "run" or "bwd", and its flags as one line ("-b=2 -h=8 ..."). The flags that say how to
 * run (-v, -warmup, -repeat, -backend, -arch, -force_kernel, -tune_db, -json, -kname) are
 * the bench's to set: given here they are refused. Returns 0, or -1 with why. */
int bench_spec_parse(bench_spec_t *s, const char *command, const char *flags, char *why, size_t len);
void bench_spec_release(bench_spec_t *s);

typedef struct bench_settings {
    int warmup;              /* untimed executions before the samples */
    int samples;             /* timed samples: min, median and max of their means */
    double sample_ms;        /* a sample repeats the execution until it lasts about this long */
    int verify;              /* check the poisoned execution against the CPU oracle */
    double verify_max_gflop; /* larger problems are not checked (verify "skipped") */
    reference_memo_t *refs;  /* may be NULL: the naive references of the last case checked,
                                reused by the next kernel of the same case */
} bench_settings_t;

/* The forward's work without the mask, in GFLOP (2 * B * Hq * Sq * Sk * (Dqk + Dv)): an
 * upper bound that needs no data, which decides whether a row is verified. */
double bench_spec_work_gflop(const bench_spec_t *s);

/* The row's problem columns (and its class), no data, no kernel. Returns 0, or -1 with
 * why (an invalid problem). */
int bench_describe(const bench_spec_t *s, fmha_context_t *ctx, bench_row_t *row, char *why, size_t len);

/* The kernels that can run the measured stage on ctx, one per line (free with fmha_free). */
fmha_status_t bench_candidates(const bench_spec_t *s, fmha_context_t *ctx, char **names, char *why, size_t len);

/* The selector's kernel for the measured stage (the tuning database consulted when ctx
 * has one), and how it chose. Plans the described problem: on a GPU this compiles or
 * loads that kernel. */
fmha_status_t bench_selector_choice(const bench_spec_t *s, fmha_context_t *ctx, char *kernel, size_t kernel_len,
                                    char *how, size_t how_len, char *why, size_t why_len);

/* Measure the spec with kernel (NULL: the selector's choice) into row (described first).
 * Returns 0 when measured (row->status "ok"; row->verify says whether it passed), else -1
 * with row->status (a status name) and row->error. */
int bench_measure(const bench_spec_t *s, fmha_context_t *ctx, const char *kernel, const bench_settings_t *set,
                  bench_row_t *row);

/* `fmha run -json=1` / `fmha bwd -json=1`: measure o's problem (bcfg NULL for run) with
 * o's -force_kernel, -warmup, -repeat (samples) and -v, print the row as one JSON line.
 * Returns the command's exit code. */
int bench_print_json(const run_opts_t *o, const bwd_config_t *bcfg);

#endif /* FMHA_CLI_BENCH_MEASURE_H */
