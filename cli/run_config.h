/* SPDX-License-Identifier: MIT */
/*
 * run_config.h: the flags that describe a problem and how to run it, shared by `fmha
 * run`, `fmha explain` and `fmha bwd` (CK's flag names, -name=value).
 */
#ifndef FMHA_CLI_RUN_CONFIG_H
#define FMHA_CLI_RUN_CONFIG_H

#include "args.h"
#include "fmha/fmha.h"
#include "bwd_case.h"
#include "fwd_case.h"

extern const flag_spec_t RUN_FLAGS[];
extern const int RUN_FLAG_COUNT;

typedef struct run_opts {
    fwd_config_t cfg;
    int verify, kname, json, warmup, repeat, threads, check_index;
    fmha_backend_t backend;
    const char *arch, *force_kernel, *tune_db;
    int32_t *lens_q, *lens_k; /* owned: free both */
} run_opts_t;

/* Flags -> configuration. Returns 0 or -1 with the message in a->err. */
int run_configure(args_t *a, run_opts_t *o);
/* `fmha bwd`'s flags: run's, then these. bwd_flag_table writes both into flags (room for
 * ARGS_MAX) and returns the count. */
extern const flag_spec_t BWD_ONLY_FLAGS[];
extern const int BWD_ONLY_FLAG_COUNT;
int bwd_flag_table(flag_spec_t *flags);
/* Flags (of bwd_flag_table) -> run options and the backward's configuration; explain (may
 * be NULL) receives -explain. Returns 0 or -1 with the message in a->err. */
int bwd_configure(args_t *a, run_opts_t *o, bwd_config_t *c, int *explain);

/* The context the commands use: a virtual one for -arch, else the backend's (with the
 * tuning database of -tune_db). Prints the reason on failure. */
fmha_status_t run_make_context(const run_opts_t *o, fmha_context_t **ctx);

/* The plan options of the flags (-force_kernel, -threads, -check_index); the append
 * plan of a case takes them without the forced kernel. */
fmha_plan_options_t run_plan_options(const run_opts_t *o, int with_force);

/* Print "plan:" and the plan's description. */
void run_print_plan(const fmha_plan_t *plan);

#endif /* FMHA_CLI_RUN_CONFIG_H */
