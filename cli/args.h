/* SPDX-License-Identifier: MIT */
/*
 * args.h: CK-style "-name=value" flags. A command declares its flags in a table
 * (name, default, help); parsing rejects unknown flags and malformed values with a
 * message that names the flag and the expected form.
 */
#ifndef FMHA_CLI_ARGS_H
#define FMHA_CLI_ARGS_H

#include <stdint.h>

typedef struct flag_spec {
    const char *name; /* without the dash */
    const char *def;  /* default value as text */
    const char *help;
} flag_spec_t;

#define ARGS_MAX 64

typedef struct args {
    const flag_spec_t *specs;
    int n_specs;
    const char *value[ARGS_MAX]; /* per spec: given value or default */
    int given[ARGS_MAX];
    int help;                    /* -help or --help was given */
    char err[512];
} args_t;

/* Parse argv[first..argc). Returns 0, or -1 with a message in a->err. */
int args_parse(args_t *a, const flag_spec_t *specs, int n_specs, int argc, char **argv, int first);
void args_print_help(const args_t *a, const char *usage);

/* Typed access; each returns 0 or -1 with a message naming the flag and expected form. */
const char *args_str(const args_t *a, const char *name);
int args_given(const args_t *a, const char *name);
int args_i64(args_t *a, const char *name, int64_t lo, int64_t hi, int64_t *out);
int args_u64(args_t *a, const char *name, uint64_t *out);
/* range is the text of [lo, hi] for the message, e.g. "[0, 1)". */
int args_f64(args_t *a, const char *name, double lo, double hi, const char *range, double *out);
/* A comma-separated list of integers in [lo, hi]; n_out receives the count (<= max). */
int args_i64_list(args_t *a, const char *name, int64_t lo, int64_t hi, int64_t *out, int max,
                  int *n_out);

/* The prologue of the commands that also take GNU-style flags: --name=value, --name value,
 * -name=value, and the names in switches (NULL-terminated, may be NULL) alone as
 * --name (meaning -name=1); a "--" name's dashes read as underscores (--dry-run is
 * -dry_run). Parses argv[2..] into *a against specs and prints usage for -help. Returns
 * -1 to go on, else the exit code (0 after -help; 2 after printing "fmha <cmd>: <why>").
 * Free *nv with args_free_argv(*nv, *nc) either way. */
int args_parse_command(const char *cmd, const flag_spec_t *specs, int n_specs, const char *const *switches,
                       const char *usage, int argc, char **argv, args_t *a, char ***nv, int *nc);
void args_free_argv(char **v, int n);

#endif /* FMHA_CLI_ARGS_H */
