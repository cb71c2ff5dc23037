/* SPDX-License-Identifier: MIT */
/*
 * plan_cache.h: a context's cache of plans. Creating a plan for a problem equal to one
 * already planned -- same parameters, tensor dtypes, shapes and strides, and plan options;
 * data pointers are not part of a problem -- copies the cached plan instead of validating
 * and selecting again. Bounded (least recently used goes first), thread-safe, counted.
 * Anything that can change a selection (registering kernels, loading a tuning database)
 * clears it.
 */
#ifndef FMHA_CORE_PLAN_CACHE_H
#define FMHA_CORE_PLAN_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* A problem and its plan options in canonical bytes: what makes two plans the same. */
typedef struct plan_key {
    uint64_t hash;
    size_t len;
    unsigned char bytes[]; /* len bytes */
} plan_key_t;

typedef struct plan_cache_entry {
    plan_key_t *key;
    struct fmha_plan *plan; /* the cached plan; callers get copies */
    uint64_t last_use;
} plan_cache_entry_t;

typedef struct plan_cache {
    pthread_mutex_t lock;
    plan_cache_entry_t *entries;
    size_t count, capacity; /* capacity 0: caching off */
    uint64_t clock, hits, misses;
} plan_cache_t;

/* capacity: $FMHA_PLAN_CACHE when set (0 turns caching off), else the default (256). */
int fmha__plan_cache_init(plan_cache_t *c);
void fmha__plan_cache_destroy(plan_cache_t *c);
void fmha__plan_cache_clear(plan_cache_t *c);

/* The key of (p, opt); NULL when out of memory. Free with free(). */
plan_key_t *fmha__plan_key(const fmha_problem_t *p, const fmha_plan_options_t *opt);
/* A malloc'd copy of the cached plan of key, or NULL (a miss, counted). */
struct fmha_plan *fmha__plan_cache_get(plan_cache_t *c, const plan_key_t *key);
/* Hits, misses, entries and capacity. */
void fmha__plan_cache_stats(plan_cache_t *c, fmha_plan_cache_stats_t *out);
/* Does it keep plans at all (capacity > 0, fixed at init)? */
static inline int fmha__plan_cache_enabled(const plan_cache_t *c) { return c->capacity > 0; }
/* Is key cached? (Not counted as a hit or miss; for explain.) */
int fmha__plan_cache_contains(plan_cache_t *c, const plan_key_t *key);
/* Keep a copy of plan under key (takes the key; frees it when not kept). */
void fmha__plan_cache_put(plan_cache_t *c, plan_key_t *key, const struct fmha_plan *plan);

#endif /* FMHA_CORE_PLAN_CACHE_H */
