/* SPDX-License-Identifier: MIT */
/*
 * registry.h: kernel descriptors and the thread-safe registry of a context.
 *
 * A descriptor is a key (or, for the CPU backend, a generic kernel that handles every
 * signature of its family at run time), a unique name, a priority, and the entry point
 * of its stage when this build can run it (NULL: a descriptor only, e.g. an sm90
 * instance in a build without CUDA; selecting it for a plan gives NOT_COMPILED).
 */
#ifndef FMHA_CORE_REGISTRY_H
#define FMHA_CORE_REGISTRY_H

#include <pthread.h>

#include "internal.h"
#include "key.h"
#include "kset.h"

typedef struct kdesc {
    char *name;
    fmha_key_t key;
    int priority;
    int generic;          /* handles any signature of key.family (CPU backend) */
    fmha_stage_fn run;    /* NULL when this build cannot run it */
    /* Workspace bytes the stage needs for p; NULL: none. */
    size_t (*workspace)(const struct kdesc *d, const fmha_problem_t *p, int threads);
    /* Make the kernel ready at plan time (compile and load it); *data goes to the plan's
     * stage_data. NULL when nothing is needed. */
    fmha_status_t (*prepare)(const struct kdesc *d, fmha_context_t *ctx, const fmha_problem_t *p, void **data,
                             char *err, size_t err_len);
    /* The backend's plan-time limits beyond the key (grid sizes, layouts the kernel
     * cannot address): NULL when the kernel can run p on target t, else why (written
     * to buf, which it returns). The selector, `fmha explain` and plan creation ask it,
     * so that a plan never fails at execute for a reason known at plan time. NULL: none. */
    const char *(*check)(const struct kdesc *d, const fmha_problem_t *p, const fmha_target_t *t, char *buf,
                         size_t len);
    const void *impl;     /* the backend's own description of the kernel (its table row) */
} kdesc_t;

typedef struct registry {
    pthread_mutex_t lock;
    kdesc_t **entries;
    size_t count, cap;
    kdesc_t **replaced; /* kept until destroy: a reader may still hold one */
    size_t nreplaced, capreplaced;
    size_t *index, nindex; /* open addressing by name: entry + 1, 0 empty (at most half full) */
} registry_t;

int fmha__registry_init(registry_t *r);
void fmha__registry_destroy(registry_t *r);
/* Register a copy of d. A duplicate name replaces the old entry only with a strictly
 * higher priority. Returns 1 registered, 0 kept the old one, -1 out of memory. */
int fmha__registry_add(registry_t *r, const kdesc_t *d);
/* Look up by name; the entry stays valid until the registry is destroyed. */
const kdesc_t *fmha__registry_find(registry_t *r, const char *name);
/* Look up by key (names are a bijection of keys, so this is the key's name). */
const kdesc_t *fmha__registry_find_key(registry_t *r, const fmha_key_t *k);
/* The keys of the entries of an arch (-1: any) that a receipt (-1: any) and a filter
 * (NULL: any) accept, generic entries left out. Returns 0 or -1 (out of memory). */
int fmha__registry_filter(registry_t *r, int arch, int receipt, const kfilter_t *filter, kset_t *out);
/* Registry export: {"metadata": {...}, "statistics": {...}, "kernels": [...]}. Returns a
 * malloc'd string or NULL. Takes the lock once (no re-entry, no deadlock). */
char *fmha__registry_json(registry_t *r, const char *registry_name, int with_stats);
/* Call fn for every entry under the lock, in registration order; fn must not call back
 * into the registry. */
void fmha__registry_each(registry_t *r, void (*fn)(const kdesc_t *d, void *user), void *user);

#endif /* FMHA_CORE_REGISTRY_H */
