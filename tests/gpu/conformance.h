/* SPDX-License-Identifier: MIT */
/*
 * conformance.h: the shape of a GPU conformance driver, one per kernel family
 * (conf_<family>.c): the family's grid of cases against the CPU oracle's math (the
 * harness's naive references and REFERENCE.md's accuracy rule), outputs poisoned before
 * each run, on a CUDA context. The driver (conformance.c) opens the context, parses
 * the arguments, prints each case before it runs (so that the log of a run killed by a
 * timeout ends at the case that hung), a FAIL line with the reproducing command for
 * each failure, and last "N passed, N failed". Every other forward case runs with
 * FMHA_L2_BYTES=1 (conformance_t.ctx_small_l2); its case line says so.
 *
 * A family's file defines:
 *   const char *const conformance_family = "fwd";
 *   void conformance_cases(conformance_t *t);   calls conformance_fwd() / _bwd() per case
 * Usage of each binary: gpu_conf_<family> [max_cases [hdim [cpu]]] (hdim: only those cases,
 * 0 all; cpu: on the CPU backend, as ctest runs a few cases of each driver; list [ARCH]:
 * no run, but the kernels each case would plan on a device of ARCH, sm90 by default, as
 * "kernel NAME" lines, for `fmha build -names`); CONF_FIRST=N and CONF_SHARD=I/N in the
 * environment pick the grid's cases (conformance.c).
 */
#ifndef FMHA_TESTS_GPU_CONFORMANCE_H
#define FMHA_TESTS_GPU_CONFORMANCE_H

#include "runner.h"

typedef struct conformance {
    fmha_context_t *ctx;
    /* on a GPU, every other forward case runs on a second context made with FMHA_L2_BYTES=1
     * (docs/env.md), so that masked grids of two or more (batch, head) pairs take the
     * many-group orders of kernels/device/grid_order.h that the grid's
     * small problems never reach on the device's L2 size; NULL on the CPU */
    fmha_context_t *ctx_small_l2;
    int max_cases, only_hdim;
    int passed, failed;
    int forced_passed, forced_failed; /* of the cases run with a forced kernel */
    long first, shard, shards;        /* CONF_FIRST and CONF_SHARD (conformance.c) */
    long seen;                        /* the grid's cases reached, forced re-runs aside */
    int rerun;                        /* the current case's forced re-runs so far */
    int case_runs;                    /* whether the current case runs in this process */
    int list, listed;                 /* list mode: print the kernels, run nothing (main) */
} conformance_t;

extern const char *const conformance_family;
void conformance_cases(conformance_t *t);

/* Run one forward-like case (any forward family, appendkv first when it asks); `force`
 * names a kernel or is NULL. `chosen` (may be NULL) gets stage 0's kernel. Returns 1 on
 * pass; 0 also when skipped (max_cases reached or another head dim). */
int conformance_fwd(conformance_t *t, const fwd_config_t *c, const char *force, char *chosen, size_t chosen_len);
/* A case, then on sm90 the same case on the other pipeline, forced by name: wgmma when
 * the selector chose mma.sync (where the wgmma kernel has the shape), and with both_ways
 * mma.sync when it chose wgmma; so both kernels see every feature and shape. */
int conformance_fwd_pipelines(conformance_t *t, const fwd_config_t *c, int both_ways);
/* A split-KV case, then, when the selector chose the decode kernel, the same case on the
 * 64-row split kernel (forced by name), so both first-stage kernels see every shape. */
int conformance_fwd_split(conformance_t *t, const fwd_config_t *c);
/* Is the next case skipped (max_cases reached, another head dim, before CONF_FIRST,
 * another shard's)? A forced re-run (`forced`) of the case before it goes with it. */
int conformance_skip(conformance_t *t, int64_t d, int forced);
/* The case's line, printed before it runs: "case N: [FMHA_L2_BYTES=1 ]CLI TAIL", N the
 * grid's case number (so the same in every shard), "N.R" for its R-th forced re-run. */
void conformance_case_line(const conformance_t *t, int small_l2, const char *cli, const char *tail);
/* A list-mode case (t->list) after fwd_run_list / bwd_run_list returned st: counted as
 * listed, or as failed with a "not listed" line. Returns 1 when listed. */
int conformance_listed(conformance_t *t, fmha_status_t st);
/* Run one backward case; `chosen` (may be NULL) gets the dq_dk_dv stage's kernel. */
int conformance_bwd(conformance_t *t, const bwd_config_t *c, const char *force, char *chosen, size_t chosen_len);
/* A backward case, then on sm90 the same case with the dq_dk_dv stage on its other
 * kernel, forced by name (wgmma <-> mma.sync where both have the shape). */
int conformance_bwd_pipelines(conformance_t *t, const bwd_config_t *c);
/* The name of that other kernel for a case whose dq_dk_dv stage chose `chosen` (the
 * dq_dk_dv stage's), or 0 when there is none. */
int conformance_other_bwd_kernel(const char *chosen, const bwd_config_t *c, char *out, size_t len);

#endif /* FMHA_TESTS_GPU_CONFORMANCE_H */
