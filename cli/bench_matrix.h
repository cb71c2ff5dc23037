/* SPDX-License-Identifier: MIT */
/*
 * bench_matrix.h: the shape matrix `fmha bench` and `fmha tune` sweep (bench/matrix.txt).
 * One case per line:
 *
 *   <tier> <category> <command> <flags ...>       # comment
 *   smoke  fwd/causal run -b=2 -h=16 -s={512|1024} -d={64|128} -mask=t -prec=bf16
 *
 * tier: smoke, full or nightly (a tier includes those before it); category: a name for
 * plots and filters; command: run or bwd; flags: that command's problem flags. A value
 * written {a|b|c} expands to one case per item, several in a line to their product
 * (the last varies fastest). Items are split at '|' because flag values hold commas
 * (-mask=t:128,0, -s=100,0,300).
 */
#ifndef FMHA_CLI_BENCH_MATRIX_H
#define FMHA_CLI_BENCH_MATRIX_H

#include <stddef.h>

typedef enum bench_tier { TIER_SMOKE = 0, TIER_FULL = 1, TIER_NIGHTLY = 2 } bench_tier_t;

typedef struct bench_case {
    bench_tier_t tier;
    int line;          /* of the matrix file */
    char category[48];
    char command[8];   /* run | bwd */
    char flags[640];   /* expanded */
} bench_case_t;

typedef struct bench_matrix {
    bench_case_t *cases;
    size_t n;
} bench_matrix_t;

/* Parse a tier name; -1 when unknown. */
int bench_tier_parse(const char *name);
const char *bench_tier_name(bench_tier_t t);

/* The cases of tiers up to max_tier, in file order, expanded. name is for messages.
 * Returns 0, or -1 with why naming the line (unknown tier or command, a brace left open,
 * an empty item, more than 4096 cases from one line, a line too long). */
int bench_matrix_parse(const char *text, const char *name, bench_tier_t max_tier, bench_matrix_t *m, char *why,
                       size_t why_len);
int bench_matrix_load(const char *path, bench_tier_t max_tier, bench_matrix_t *m, char *why, size_t why_len);
void bench_matrix_free(bench_matrix_t *m);

#endif /* FMHA_CLI_BENCH_MATRIX_H */
