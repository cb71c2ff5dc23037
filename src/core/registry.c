/* SPDX-License-Identifier: MIT */
/* registry.c: see registry.h. One mutex; every public function takes it exactly once. */
#include "registry.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "specs.h"

int fmha__registry_init(registry_t *r)
{
    memset(r, 0, sizeof *r);
    return pthread_mutex_init(&r->lock, NULL) ? -1 : 0;
}

static void free_desc(kdesc_t *d)
{
    if (!d) return;
    free(d->name);
    free(d);
}

void fmha__registry_destroy(registry_t *r)
{
    for (size_t i = 0; i < r->count; i++) free_desc(r->entries[i]);
    for (size_t i = 0; i < r->nreplaced; i++) free_desc(r->replaced[i]);
    free(r->entries);
    free(r->replaced);
    free(r->index);
    pthread_mutex_destroy(&r->lock);
    memset(r, 0, sizeof *r);
}

/* Names are looked up through a hash index: a set of every kernel of an arch holds
 * 70k, and registering it entry by entry against a linear scan took minutes (found by
 * tests/fuzz/fuzz_kset_json). */
static size_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 0x100000001b3ull;
    return (size_t)(h ^ h >> 29);
}

static long find_locked(const registry_t *r, const char *name)
{
    if (!r->nindex) return -1;
    for (size_t i = name_hash(name) & (r->nindex - 1);; i = (i + 1) & (r->nindex - 1)) {
        const size_t e = r->index[i];
        if (e == 0) return -1;
        if (strcmp(r->entries[e - 1]->name, name) == 0) return (long)(e - 1);
    }
}

/* Index entry `at` (a new name); the table doubles past half full. 0 or -1. */
static int index_locked(registry_t *r, size_t at)
{
    if (2 * (r->count + 1) > r->nindex) {
        const size_t n = r->nindex ? 2 * r->nindex : 256;
        size_t *t = calloc(n, sizeof *t);
        if (!t) return -1;
        for (size_t e = 0; e < r->count; e++) {
            size_t i = name_hash(r->entries[e]->name) & (n - 1);
            while (t[i]) i = (i + 1) & (n - 1);
            t[i] = e + 1;
        }
        free(r->index);
        r->index = t, r->nindex = n;
    }
    size_t i = name_hash(r->entries[at]->name) & (r->nindex - 1);
    while (r->index[i]) i = (i + 1) & (r->nindex - 1);
    r->index[i] = at + 1;
    return 0;
}

static int grow(kdesc_t ***arr, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? 2 * *cap : 64;
    while (c < need) c *= 2;
    kdesc_t **a = realloc(*arr, c * sizeof *a);
    if (!a) return -1;
    *arr = a;
    *cap = c;
    return 0;
}

int fmha__registry_add(registry_t *r, const kdesc_t *d)
{
    kdesc_t *copy = malloc(sizeof *copy);
    if (!copy) return -1;
    *copy = *d;
    copy->name = strdup(d->name);
    if (!copy->name) {
        free(copy);
        return -1;
    }
    int rc = 1;
    pthread_mutex_lock(&r->lock);
    long at = find_locked(r, d->name);
    if (at >= 0) {
        if (d->priority > r->entries[at]->priority && !grow(&r->replaced, &r->capreplaced, r->nreplaced + 1)) {
            r->replaced[r->nreplaced++] = r->entries[at];
            r->entries[at] = copy;
        } else {
            rc = d->priority > r->entries[at]->priority ? -1 : 0;
            free_desc(copy);
        }
    } else if (grow(&r->entries, &r->cap, r->count + 1)) {
        free_desc(copy);
        rc = -1;
    } else {
        r->entries[r->count] = copy;
        if (index_locked(r, r->count)) {
            free_desc(copy);
            rc = -1;
        } else {
            r->count++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

const kdesc_t *fmha__registry_find(registry_t *r, const char *name)
{
    pthread_mutex_lock(&r->lock);
    long at = find_locked(r, name);
    const kdesc_t *d = at >= 0 ? r->entries[at] : NULL;
    pthread_mutex_unlock(&r->lock);
    return d;
}

const kdesc_t *fmha__registry_find_key(registry_t *r, const fmha_key_t *k)
{
    char name[512];
    fmha__key_name(k, name, sizeof name);
    return fmha__registry_find(r, name);
}

int fmha__registry_filter(registry_t *r, int arch, int receipt, const kfilter_t *filter, kset_t *out)
{
    int rc = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->count && rc == 0; i++) {
        const kdesc_t *d = r->entries[i];
        if (d->generic || (arch >= 0 && d->key.arch != arch)) continue;
        /* tile rank 0: the receipt's preferred-tile condition cannot be judged here */
        if (receipt >= 0 && !fmha__receipt_accepts((receipt_t)receipt, &d->key, 0)) continue;
        if (filter && !fmha__filter_eval(filter, &d->key)) continue;
        if (fmha__kset_add(out, &d->key) < 0) rc = -1;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void fmha__registry_each(registry_t *r, void (*fn)(const kdesc_t *d, void *user), void *user)
{
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->count; i++) fn(r->entries[i], user);
    pthread_mutex_unlock(&r->lock);
}

static json_t *key_object(const fmha_key_t *k)
{
    json_t *o = json_object();
    char tmp[32];
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        const kfield_info_t *fi = fmha__kfield((kfield_t)f);
        int32_t v = fmha__key_get(k, (kfield_t)f);
        json_t *jv = fi->kind == KKIND_ENUM   ? json_string(fmha__kfield_value_text((kfield_t)f, v, tmp, sizeof tmp))
                     : fi->kind == KKIND_BOOL ? json_boolean(v)
                                              : json_integer(v);
        json_object_set_new(o, fi->name, jv);
    }
    return o;
}

static void count(json_t *stats, const char *group, const char *value)
{
    json_t *g = json_object_get(stats, group);
    json_t *c = json_object_get(g, value);
    json_object_set_new(g, value, json_integer(c ? json_integer_value(c) + 1 : 1));
}

char *fmha__registry_json(registry_t *r, const char *registry_name, int with_stats)
{
    json_t *root = json_object(), *kernels = json_array(), *stats = json_object();
    json_object_set_new(stats, "by_family", json_object());
    json_object_set_new(stats, "by_dtype", json_object());
    json_object_set_new(stats, "by_pipeline", json_object());
    json_object_set_new(stats, "by_arch", json_object());
    pthread_mutex_lock(&r->lock);
    size_t n = r->count;
    for (size_t i = 0; i < r->count; i++) {
        const kdesc_t *d = r->entries[i];
        json_t *e = json_object();
        json_object_set_new(e, "name", json_string(d->name));
        json_object_set_new(e, "priority", json_integer(d->priority));
        json_object_set_new(e, "generic", json_boolean(d->generic));
        json_object_set_new(e, "runnable", json_boolean(d->run != NULL));
        json_object_set_new(e, "key", key_object(&d->key));
        json_array_append_new(kernels, e);
        count(stats, "by_family", fmha__family_names[d->key.family]);
        count(stats, "by_dtype", d->generic ? "any" : fmha__dtype_names[d->key.dtype]);
        count(stats, "by_pipeline", fmha__pipe_names[d->key.pipeline]);
        count(stats, "by_arch", fmha__arch_names[d->key.arch]);
    }
    pthread_mutex_unlock(&r->lock);
    json_t *meta = json_object();
    json_object_set_new(meta, "registry_name", json_string(registry_name));
    json_object_set_new(meta, "total_kernels", json_integer((json_int_t)n));
    json_object_set_new(meta, "library_version", json_string(fmha_version_string()));
    json_object_set_new(root, "metadata", meta);
    if (with_stats)
        json_object_set_new(root, "statistics", stats);
    else
        json_decref(stats);
    json_object_set_new(root, "kernels", kernels);
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    return text;
}
