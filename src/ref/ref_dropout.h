/* SPDX-License-Identifier: MIT */
/*
 * ref_dropout.h: REFERENCE.md's dropout stream for the CPU backend, shared by the
 * forward and the backward so both see the same keep bit for element
 * e = ((b*Hq + h)*Sq_max + i)*Sk_max + j.
 */
#ifndef FMHA_REF_DROPOUT_H
#define FMHA_REF_DROPOUT_H

#include <math.h>

#include "../core/internal.h"

typedef struct ref_dropout {
    double p, rp_keep; /* probability, 1 / (1 - p) */
    uint32_t threshold, seed[2], offset[2];
} ref_dropout_t;

static inline ref_dropout_t fmha__ref_dropout(const fmha_problem_t *p)
{
    ref_dropout_t d;
    d.p = fmha__f(p, FMHA_PARAM_DROPOUT_P);
    d.rp_keep = 1.0 / (1.0 - d.p);
    d.threshold = fmha__dropout_threshold(d.p);
    uint64_t seed = (uint64_t)fmha__i(p, FMHA_PARAM_DROPOUT_SEED);
    uint64_t offset = (uint64_t)fmha__i(p, FMHA_PARAM_DROPOUT_OFFSET);
    d.seed[0] = (uint32_t)seed, d.seed[1] = (uint32_t)(seed >> 32);
    d.offset[0] = (uint32_t)offset, d.offset[1] = (uint32_t)(offset >> 32);
    return d;
}

/* One Philox call yields the words of four consecutive elements: cache them. */
typedef struct drop_cache {
    uint64_t block; /* e / 4 of the cached words, or UINT64_MAX */
    uint32_t words[4];
} drop_cache_t;

#define DROP_CACHE_INIT {UINT64_MAX, {0}}

static inline int fmha__ref_keep(const ref_dropout_t *d, drop_cache_t *c, uint64_t e)
{
    uint64_t blk = e / 4;
    if (c->block != blk) {
        uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), d->offset[0], d->offset[1]};
        fmha_philox4x32_10(ctr, d->seed, c->words);
        c->block = blk;
    }
    return c->words[e % 4] >= d->threshold;
}

#endif /* FMHA_REF_DROPOUT_H */
