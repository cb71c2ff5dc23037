/* SPDX-License-Identifier: MIT */
/*
 * heuristics.h: pure cost functions the selector ranks kernels with. No state, no I/O;
 * tests/unit/test_select.c locks their decisions in a table.
 */
#ifndef FMHA_CORE_HEURISTICS_H
#define FMHA_CORE_HEURISTICS_H

#include <stdint.h>

#include "key.h"

typedef struct hw {
    int sm_count, smem_per_sm, regs_per_sm;
} hw_t;

typedef struct work {
    int64_t batch, heads_q, seqlen_q, seqlen_kv; /* seqlens: the (max) lengths */
    double visible_fraction;                     /* visible pairs / (Sq * Sk), 1 without a mask */
    int64_t heads_kv;                            /* 0: as heads_q (no GQA) */
} work_t;

/* Fraction of the rows a kernel computes that are padding: the last M tile of each
 * sequence is partly empty. 0 when Sq is a multiple of tile_m. */
double fmha__heur_padding_waste(int64_t seqlen_q, int tile_m);
/* CTAs of one SM that run at once, limited by shared memory, registers and threads. */
int fmha__heur_occupancy(const fmha_key_t *k, const hw_t *hw);
/* Useful fraction of the last wave: waves / ceil(waves). */
double fmha__heur_wave_efficiency(int64_t ctas, int sm_count, int occupancy);
/* Estimated time in arbitrary units (lower is better). */
double fmha__heur_cost(const fmha_key_t *k, const work_t *w, const hw_t *hw);

#endif /* FMHA_CORE_HEURISTICS_H */
