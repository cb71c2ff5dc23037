/* SPDX-License-Identifier: MIT */
/*
 * bench_result.h: one row of `fmha bench` (a problem, the kernel that ran it, its times,
 * rates and check) and the files it lives in. The CSV and the JSON have the same
 * columns, in the order of one table (bench_result.c), so a row read back from a CSV is
 * the row that was written: resuming a sweep, `fmha tune --from`, and the plot and
 * comparison scripts all read what the writer wrote.
 */
#ifndef FMHA_CLI_BENCH_RESULT_H
#define FMHA_CLI_BENCH_RESULT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The kernel key's fields as columns "key_<name>" (fmha_kernel_name_parse), so that a row
 * reconstructs the kernel's identity without parsing its name. */
#define BENCH_KEY_FIELDS 23
extern const char *const BENCH_KEY_NAMES[BENCH_KEY_FIELDS];

typedef struct bench_row {
    /* the case: its matrix entry and the problem it describes */
    char tier[12], category[48], command[8], flags[640];
    char family[24], dtype[8], mask[40], problem_class[200];
    int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_kv, hdim_qk, hdim_v;
    /* the kernel */
    char requested[160];    /* "selector", or the kernel name the row forced */
    char kernel[160];       /* the kernel of the measured stage */
    char plan_kernels[640]; /* every stage's kernel, '+' between */
    char how[32];           /* the selector's reason for the measured stage */
    int selector_choice;    /* 1: this is the kernel the selector picks without forcing */
    char library[32];       /* "fmha", or the library of a comparison row (torch-sdpa-flash, ...) */
    char device[64];
    /* measured: samples of `inner` executions each, their mean per execution */
    int samples, inner;
    double min_ms, median_ms, max_ms, tflops, gbps, gflop, mbytes;
    char verify[12];        /* pass | fail | skipped | off */
    double max_err, tol;
    char status[32];        /* ok, a status name, or "crashed" */
    char error[2400];
    char key[BENCH_KEY_FIELDS][24];
} bench_row_t;

/* Fill the key columns from a kernel name (left empty when the name is not a key). */
void bench_row_set_key(bench_row_t *r, const char *kernel);

/* CSV (RFC 4180 quoting): the header line, and one row. */
void bench_csv_header(FILE *f);
void bench_csv_row(FILE *f, const bench_row_t *r);

/* Read every row of a CSV the writer wrote. Columns are found by header name (unknown ones
 * are ignored, missing ones left empty), so files from another version still resume.
 * Returns 0, or -1 with why (unreadable file, a malformed line named by number). */
int bench_csv_read(const char *path, bench_row_t **rows, size_t *n, char *why, size_t why_len);

/* JSON: {"metadata": {...}, "rows": [{column: value, ...}, ...]}; numbers stay numbers.
 * metadata is a JSON object text (may be NULL). Returns 0, or -1 when out of memory. */
int bench_json_write(FILE *f, const char *metadata, const bench_row_t *rows, size_t n);

/* The row's JSON object text alone (malloc'd; NULL when out of memory): `fmha run -json=1`. */
char *bench_row_json(const bench_row_t *r);

/* Parse a row back from bench_row_json's text (`fmha bench --isolate` reads its children
 * this way). Returns 0, or -1 with why. */
int bench_row_from_json(const char *text, bench_row_t *r, char *why, size_t why_len);

#endif /* FMHA_CLI_BENCH_RESULT_H */
