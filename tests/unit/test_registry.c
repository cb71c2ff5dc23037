/* SPDX-License-Identifier: MIT */
/*
 * test_registry.c: priorities (a duplicate replaces only with a strictly higher
 * priority), lookup, concurrent registration and export from several threads (no
 * deadlock, nothing lost), the JSON export parsed back, and a whole arch's catalogue
 * registered at once.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "../../src/core/registry.h"
#include "testing.h"

static kdesc_t desc(const char *name, int priority, int tile_m)
{
    kdesc_t d;
    memset(&d, 0, sizeof d);
    fmha__key_default(&d.key);
    d.key.tile_m = tile_m;
    d.name = (char *)name;
    d.priority = priority;
    return d;
}

static void test_priorities(void)
{
    registry_t r;
    fmha__registry_init(&r);
    kdesc_t a = desc("k1", 1, 64), b = desc("k1", 1, 128), c = desc("k1", 2, 256), d = desc("k1", 0, 32);
    CHECK(fmha__registry_add(&r, &a) == 1);
    CHECK(fmha__registry_add(&r, &b) == 0); /* equal priority: first writer wins */
    CHECK(fmha__registry_find(&r, "k1")->key.tile_m == 64);
    const kdesc_t *old = fmha__registry_find(&r, "k1");
    CHECK(fmha__registry_add(&r, &c) == 1); /* higher replaces */
    CHECK(fmha__registry_find(&r, "k1")->key.tile_m == 256);
    CHECK(old->key.tile_m == 64); /* a reader's old pointer stays valid */
    CHECK(fmha__registry_add(&r, &d) == 0); /* lower never replaces */
    CHECK(fmha__registry_find(&r, "k1")->key.tile_m == 256);
    CHECK(fmha__registry_find(&r, "k2") == NULL);
    CHECK(r.count == 1);
    fmha__registry_destroy(&r);
}

typedef struct worker {
    registry_t *r;
    int id;
    int exports;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    char name[64];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "t%d_k%d", w->id, i);
        kdesc_t d = desc(name, i % 3, 64);
        fmha__registry_add(w->r, &d);
        snprintf(name, sizeof name, "shared_k%d", i); /* contended names */
        kdesc_t s = desc(name, w->id, 64 * (w->id + 1));
        fmha__registry_add(w->r, &s);
        if (i % 50 == 0) {
            char *json = fmha__registry_json(w->r, "t", 1); /* export while others register */
            if (json) w->exports++;
            free(json);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    registry_t r;
    fmha__registry_init(&r);
    pthread_t th[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){&r, i, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(r.count == 4 * 300 + 300);
    for (int i = 0; i < 4; i++) CHECK(w[i].exports == 6);
    /* the highest priority (worker 3) owns every shared name */
    char name[64];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "shared_k%d", i);
        const kdesc_t *d = fmha__registry_find(&r, name);
        CHECK(d && d->priority == 3 && d->key.tile_m == 256);
    }
    fmha__registry_destroy(&r);
}

static void test_json_export(void)
{
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "sm90", 0), FMHA_STATUS_SUCCESS);
    /* what the virtual sm90 registers by itself (a device's kernels), before the extra set */
    char *text = fmha_context_kernels_json(ctx, 1);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    CHECK(root != NULL);
    const size_t preloaded = json_array_size(json_object_get(root, "kernels"));
    const json_int_t preloaded_fwd =
        json_integer_value(json_object_get(json_object_get(json_object_get(root, "statistics"), "by_family"), "fwd"));
    CHECK(preloaded > 1000 && preloaded_fwd > 144); /* every receipt, not only the default's 144 forward kernels */
    json_decref(root);
    fmha_free(text);
    fmha_kernel_set_t *extra;
    char why[256];
    fmha_kernel_set_enumerate("sm80", "default", "family==fwd", &extra, why, sizeof why);
    CHECK_STATUS(fmha_context_register(ctx, extra, 1), FMHA_STATUS_SUCCESS);
    text = fmha_context_kernels_json(ctx, 1);
    root = json_loads(text, 0, &err);
    CHECK(root != NULL);
    json_t *kernels = json_object_get(root, "kernels");
    size_t n = json_array_size(kernels);
    CHECK(n == preloaded + fmha_kernel_set_count(extra)); /* the sm90 kernels + the sm80 set */
    CHECK((size_t)json_integer_value(json_object_get(json_object_get(root, "metadata"), "total_kernels")) == n);
    json_t *by_family = json_object_get(json_object_get(root, "statistics"), "by_family");
    CHECK(json_integer_value(json_object_get(by_family, "fwd")) == preloaded_fwd + (json_int_t)fmha_kernel_set_count(extra));
    json_t *by_arch = json_object_get(json_object_get(root, "statistics"), "by_arch");
    CHECK(json_integer_value(json_object_get(by_arch, "sm80")) == (json_int_t)fmha_kernel_set_count(extra));
    /* every exported name parses back to the exported key */
    size_t i;
    json_t *e;
    int bad = 0;
    json_array_foreach(kernels, i, e) {
        char kj[2048];
        const char *name = json_string_value(json_object_get(e, "name"));
        if (fmha_kernel_name_parse(name, kj, sizeof kj, why, sizeof why)) {
            bad++;
            continue;
        }
        json_t *k1 = json_loads(kj, 0, &err);
        if (!json_equal(k1, json_object_get(e, "key"))) bad++;
        json_decref(k1);
    }
    CHECK(bad == 0);
    json_decref(root);
    fmha_free(text);
    fmha_kernel_set_destroy(extra);
    fmha_context_destroy(ctx);
}

static void test_find_key_and_filter(void)
{
    registry_t r;
    fmha__registry_init(&r);
    kset_t s;
    fmha__kset_init(&s);
    char why[256];
    fmha__enumerate(KA_SM90, RECEIPT_DEFAULT, NULL, &s, why, sizeof why);
    kset_t s80;
    fmha__kset_init(&s80);
    fmha__enumerate(KA_SM80, RECEIPT_DEFAULT, NULL, &s80, why, sizeof why);
    for (size_t i = 0; i < s.count; i++) {
        kdesc_t d = {.name = s.names[i], .key = s.keys[i]};
        fmha__registry_add(&r, &d);
    }
    for (size_t i = 0; i < s80.count; i++) {
        kdesc_t d = {.name = s80.names[i], .key = s80.keys[i]};
        fmha__registry_add(&r, &d);
    }
    const kdesc_t *d = fmha__registry_find_key(&r, &s.keys[5]);
    CHECK(d && fmha__key_equal(&d->key, &s.keys[5]));
    kset_t out;
    fmha__kset_init(&out);
    CHECK(fmha__registry_filter(&r, KA_SM80, -1, NULL, &out) == 0 && out.count == s80.count);
    fmha__kset_free(&out);
    fmha__kset_init(&out);
    kfilter_t *f = fmha__filter_compile("family==fwd && pipeline==wgmmaws", why, sizeof why);
    CHECK(fmha__registry_filter(&r, -1, -1, f, &out) == 0 && out.count == 72);
    fmha__kset_free(&out);
    fmha__kset_init(&out);
    CHECK(fmha__registry_filter(&r, KA_SM90, RECEIPT_FP8, NULL, &out) == 0 && out.count == 0);
    fmha__kset_free(&out);
    fmha__filter_free(f);
    fmha__kset_free(&s);
    fmha__kset_free(&s80);
    fmha__registry_destroy(&r);
}

/* A whole arch's catalogue (70k kernels) registers in well under a second: names are
 * hashed. The linear scan this replaced took minutes (tests/fuzz/fuzz_kset_json's
 * timeout); the bound leaves room for sanitizers and slow machines. */
static void test_register_a_whole_catalogue(void)
{
    fmha_context_t *ctx = NULL;
    fmha_kernel_set_t *all = NULL;
    char why[256];
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "sm90", 0), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_kernel_set_enumerate("sm90", "all", NULL, &all, why, sizeof why), FMHA_STATUS_SUCCESS);
    if (!ctx || !all) return;
    CHECK(fmha_kernel_set_count(all) > 50000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_STATUS(fmha_context_register(ctx, all, 5), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_context_register(ctx, all, 6), FMHA_STATUS_SUCCESS); /* every name again: replaced */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("  registered %zu kernels twice in %.3f s\n", fmha_kernel_set_count(all), s);
    CHECK(s < 20.0);
    fmha_kernel_set_destroy(all);
    fmha_context_destroy(ctx);
}

int main(void)
{
    RUN(test_find_key_and_filter);
    RUN(test_priorities);
    RUN(test_threads);
    RUN(test_json_export);
    RUN(test_register_a_whole_catalogue);
    TEST_MAIN_END();
}
