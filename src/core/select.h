/* SPDX-License-Identifier: MIT */
/*
 * select.h: the one selector behind fmha_plan_create, "is it supported?" and
 * fmha_explain. For each stage of the problem's family it filters the context's
 * registry by signature, asks each candidate why it cannot run the problem, ranks the
 * survivors with the heuristics, and lets a forced name or a tuning-database winner
 * override the ranking.
 */
#ifndef FMHA_CORE_SELECT_H
#define FMHA_CORE_SELECT_H

#include "internal.h"
#include "registry.h"

typedef struct selection {
    int num_stages;
    kfamily_t family[FMHA_MAX_STAGES];
    const kdesc_t *chosen[FMHA_MAX_STAGES];
    char how[FMHA_MAX_STAGES][96]; /* "forced", "tuning database", "lowest estimated cost" */
} selection_t;

/* Select kernels for a validated problem. explain may be NULL; when given, every
 * candidate and its fate is written to it. On failure returns NOT_SUPPORTED with the
 * message in err. */
fmha_status_t fmha__select(fmha_context_t *ctx, const fmha_problem_t *p, const char *force_kernel,
                           selection_t *sel, strbuf_t *explain, char *err);

/* The kernels that can run stage `stage` of a validated problem, one name per line in
 * registration order (no ranking, no tuning database, no forced name). */
fmha_status_t fmha__candidates(fmha_context_t *ctx, const fmha_problem_t *p, int stage, strbuf_t *out, char *err);

/* The problem's class for the tuning database, e.g. "fwd_bf16_hq128_hv128_causal_batch_sq1024_sk1024"
 * (seqlens rounded up to powers of two). */
void fmha__problem_class(const fmha_problem_t *p, char *buf, size_t len);

/* Tuning database: class -> kernel name, loaded from JSON {"entries": [{"class": ..., "kernel": ...}]}. */
int fmha__tune_load(fmha_context_t *ctx, const char *path, char *why, size_t len);
const char *fmha__tune_lookup(const fmha_context_t *ctx, const char *cls);
void fmha__tune_free(struct tune_db *t);

#endif /* FMHA_CORE_SELECT_H */
