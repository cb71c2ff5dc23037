/* SPDX-License-Identifier: MIT */
/* plan_cache.c: see plan_cache.h. */
#include "plan_cache.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_CAPACITY 256
#define MAX_CAPACITY 65536

int fmha__plan_cache_init(plan_cache_t *c)
{
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->lock, NULL)) return -1;
    c->capacity = DEFAULT_CAPACITY;
    const char *env = getenv("FMHA_PLAN_CACHE");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 0) c->capacity = (size_t)(v > MAX_CAPACITY ? MAX_CAPACITY : v);
    }
    return 0;
}

void fmha__plan_cache_clear(plan_cache_t *c)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->count; i++) {
        free(c->entries[i].key);
        free(c->entries[i].plan);
    }
    c->count = 0;
    pthread_mutex_unlock(&c->lock);
}

void fmha__plan_cache_destroy(plan_cache_t *c)
{
    fmha__plan_cache_clear(c);
    free(c->entries);
    pthread_mutex_destroy(&c->lock);
}

/* FNV-1a, 64 bits. */
static uint64_t fnv(const unsigned char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

typedef struct writer {
    unsigned char *p;
    size_t len;
} writer_t;

static void put(writer_t *w, const void *src, size_t n)
{
    if (w->p) memcpy(w->p + w->len, src, n);
    w->len += n;
}

/* Field by field (no struct padding), tensors only when set, so that equal problems give
 * equal bytes however they were built. Run twice: to size, then to write. */
static void serialise(writer_t *w, const fmha_problem_t *p, const fmha_plan_options_t *opt)
{
    put(w, p->i64, sizeof p->i64);
    put(w, p->f64, sizeof p->f64);
    for (int r = 0; r < FMHA_ROLE_SLOTS; r++) {
        const fmha_tensor_desc_t *t = &p->tensors[r];
        if (!t->set) continue;
        const int32_t head[3] = {r, (int32_t)t->dtype, t->rank};
        put(w, head, sizeof head);
        put(w, t->dims, (size_t)t->rank * sizeof t->dims[0]);
        put(w, t->strides, (size_t)t->rank * sizeof t->strides[0]);
    }
    const int32_t threads = opt ? opt->num_threads : 0;
    put(w, &threads, sizeof threads);
    const char *force = opt && opt->force_kernel ? opt->force_kernel : "";
    put(w, force, strlen(force) + 1);
    const int32_t check_index = fmha__opt_check_index(opt);
    put(w, &check_index, sizeof check_index);
}

plan_key_t *fmha__plan_key(const fmha_problem_t *p, const fmha_plan_options_t *opt)
{
    writer_t size = {NULL, 0};
    serialise(&size, p, opt);
    plan_key_t *k = malloc(sizeof *k + size.len);
    if (!k) return NULL;
    writer_t w = {k->bytes, 0};
    serialise(&w, p, opt);
    k->len = w.len;
    k->hash = fnv(k->bytes, k->len);
    return k;
}

static int same(const plan_key_t *a, const plan_key_t *b)
{
    return a->hash == b->hash && a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

struct fmha_plan *fmha__plan_cache_get(plan_cache_t *c, const plan_key_t *key)
{
    struct fmha_plan *copy = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->count; i++)
        if (same(c->entries[i].key, key)) {
            if ((copy = malloc(sizeof *copy))) {
                memcpy(copy, c->entries[i].plan, sizeof *copy);
                c->entries[i].last_use = ++c->clock;
                c->hits++;
            }
            break;
        }
    if (!copy && c->capacity) c->misses++;
    pthread_mutex_unlock(&c->lock);
    return copy;
}

void fmha__plan_cache_stats(plan_cache_t *c, fmha_plan_cache_stats_t *out)
{
    pthread_mutex_lock(&c->lock);
    out->hits = c->hits, out->misses = c->misses;
    out->entries = c->count, out->capacity = c->capacity;
    pthread_mutex_unlock(&c->lock);
}

int fmha__plan_cache_contains(plan_cache_t *c, const plan_key_t *key)
{
    int found = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->count && !found; i++) found = same(c->entries[i].key, key);
    pthread_mutex_unlock(&c->lock);
    return found;
}

void fmha__plan_cache_put(plan_cache_t *c, plan_key_t *key, const struct fmha_plan *plan)
{
    struct fmha_plan *kept = malloc(sizeof *kept);
    if (kept) memcpy(kept, plan, sizeof *kept);
    pthread_mutex_lock(&c->lock);
    int present = 0; /* another thread may have put it first */
    for (size_t i = 0; i < c->count && !present; i++) present = same(c->entries[i].key, key);
    if (!kept || c->capacity == 0 || present) goto drop;
    size_t slot = c->count;
    if (c->count == c->capacity) { /* full: the least recently used goes */
        slot = 0;
        for (size_t i = 1; i < c->count; i++)
            if (c->entries[i].last_use < c->entries[slot].last_use) slot = i;
        free(c->entries[slot].key);
        free(c->entries[slot].plan);
    } else {
        if (!c->entries) {
            c->entries = calloc(c->capacity, sizeof *c->entries);
            if (!c->entries) goto drop;
        }
        c->count++;
    }
    c->entries[slot] = (plan_cache_entry_t){key, kept, ++c->clock};
    pthread_mutex_unlock(&c->lock);
    return;
drop:
    pthread_mutex_unlock(&c->lock);
    free(key);
    free(kept);
}
