/* SPDX-License-Identifier: MIT */
/*
 * test_plan_cache.c: a context's plan cache through the public API: a repeated problem
 * is a hit whose plan runs and checks like a fresh one; strides, features and options
 * make different plans; registering kernels empties it; the capacity bounds it (least
 * recently used first; $FMHA_PLAN_CACHE, 0 turns it off); invalid problems are never
 * cached; concurrent planning keeps the counts exact; explain reports it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "runner.h"
#include "testing.h"

static fmha_plan_cache_stats_t stats(fmha_context_t *ctx)
{
    fmha_plan_cache_stats_t s = {.struct_size = sizeof s};
    CHECK_STATUS(fmha_context_plan_cache_stats(ctx, &s), FMHA_STATUS_SUCCESS);
    return s;
}

static fwd_config_t config(int64_t s)
{
    fwd_config_t c;
    fwd_config_default(&c);
    c.b = 2, c.h = 4, c.h_k = 2, c.s = s, c.s_k = s + 9, c.d = c.d_v = 32, c.mask = "b", c.lse = 1;
    return c;
}

static fmha_status_t plan_of(fmha_context_t *ctx, const fwd_case_t *fc, const fmha_plan_options_t *opt,
                             fmha_plan_t **plan)
{
    return fmha_plan_create(ctx, fwd_case_problem(fc), opt, plan);
}

static void test_hit_runs_like_a_fresh_plan(void)
{
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    fmha_plan_cache_stats_t s = stats(ctx);
    CHECK(s.entries == 0 && s.hits == 0 && s.misses == 0 && s.capacity == 256);
    fwd_config_t c = config(17);
    fwd_case_t *fc;
    char why[256];
    CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    fmha_plan_t *a, *b;
    CHECK_STATUS(plan_of(ctx, fc, NULL, &a), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(plan_of(ctx, fc, NULL, &b), FMHA_STATUS_SUCCESS);
    s = stats(ctx);
    CHECK(s.misses == 1 && s.hits == 1 && s.entries == 1);
    CHECK(a != b && strcmp(fmha_plan_kernel_name(a, 0), fmha_plan_kernel_name(b, 0)) == 0);
    /* the copy is the caller's: it outlives the first plan and computes the same */
    fmha_plan_destroy(a);
    fwd_check_t r;
    CHECK_STATUS(fwd_case_execute(fc, b), FMHA_STATUS_SUCCESS);
    CHECK(fwd_case_check(fc, &r) == 0 && r.pass);
    fmha_plan_destroy(b);

    /* a problem built again from scratch is the same problem */
    fwd_case_t *again;
    CHECK_STATUS(fwd_case_create(&c, &again, why, sizeof why), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(plan_of(ctx, again, NULL, &a), FMHA_STATUS_SUCCESS);
    CHECK(stats(ctx).hits == 2);
    fmha_plan_destroy(a);
    fwd_case_destroy(again);

    /* explain says so, and does not count */
    char *text = NULL;
    CHECK_STATUS(fmha_explain(ctx, fwd_case_problem(fc), NULL, &text), FMHA_STATUS_SUCCESS);
    CHECK_CONTAINS(text, "plan cache: this problem is cached (planning it again is a lookup); 1 of 256 entries, 2 hits, 1 misses");
    fmha_free(text);
    fwd_case_destroy(fc);

    fmha_plan_cache_stats_t bad = {.struct_size = 4};
    CHECK_STATUS(fmha_context_plan_cache_stats(ctx, &bad), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "struct_size is 4");
    fmha_context_destroy(ctx);
}

/* What defines a plan: a change of stride, feature, shape or option is another plan. */
static void test_keys(void)
{
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    fwd_config_t variants[5];
    for (int i = 0; i < 5; i++) variants[i] = config(17);
    variants[1].iperm = 0;       /* strides */
    variants[2].lse = 0;         /* a tensor less */
    variants[3].mask = "b:3,2";  /* a parameter */
    variants[4].s_k = 27;        /* a shape */
    char why[256];
    for (int i = 0; i < 5; i++) {
        fwd_case_t *fc;
        fmha_plan_t *p;
        CHECK_STATUS(fwd_case_create(&variants[i], &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
        CHECK_STATUS(plan_of(ctx, fc, NULL, &p), FMHA_STATUS_SUCCESS);
        fmha_plan_destroy(p);
        fwd_case_destroy(fc);
    }
    fmha_plan_cache_stats_t s = stats(ctx);
    CHECK(s.misses == 5 && s.hits == 0 && s.entries == 5);
    /* options: threads and a forced kernel */
    fwd_case_t *fc;
    fmha_plan_t *p;
    CHECK_STATUS(fwd_case_create(&variants[0], &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = 1};
    CHECK_STATUS(plan_of(ctx, fc, &opt, &p), FMHA_STATUS_SUCCESS);
    fmha_plan_destroy(p);
    opt.force_kernel = "cpu_ref_fwd";
    CHECK_STATUS(plan_of(ctx, fc, &opt, &p), FMHA_STATUS_SUCCESS);
    fmha_plan_destroy(p);
    CHECK(stats(ctx).misses == 7);
    /* an invalid problem is refused every time and never cached */
    opt.force_kernel = "no_such_kernel";
    CHECK_STATUS(plan_of(ctx, fc, &opt, &p), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_STATUS(plan_of(ctx, fc, &opt, &p), FMHA_STATUS_NOT_SUPPORTED);
    CHECK(stats(ctx).entries == 7);
    /* registering kernels can change a selection: the cache empties */
    fmha_kernel_set_t *set;
    CHECK_STATUS(fmha_kernel_set_enumerate("sm80", "default", "hdim_qk==64", &set, why, sizeof why), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_context_register(ctx, set, 0), FMHA_STATUS_SUCCESS);
    fmha_kernel_set_destroy(set);
    CHECK(stats(ctx).entries == 0);
    CHECK_STATUS(fmha_context_plan_cache_clear(ctx), FMHA_STATUS_SUCCESS);
    fwd_case_destroy(fc);
    fmha_context_destroy(ctx);
}

/* $FMHA_PLAN_CACHE bounds it (least recently used first) or turns it off. */
static void test_capacity(void)
{
    setenv("FMHA_PLAN_CACHE", "2", 1);
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    unsetenv("FMHA_PLAN_CACHE");
    fwd_case_t *fc[3];
    char why[256];
    for (int i = 0; i < 3; i++) {
        fwd_config_t c = config(10 + i);
        CHECK_STATUS(fwd_case_create(&c, &fc[i], why, sizeof why), FMHA_STATUS_SUCCESS);
    }
    const int order[] = {0, 1, 0, 2, 0, 1}; /* 2 evicts 1 (0 was used since), then 1 evicts 2 */
    const int hit[] = {0, 0, 1, 0, 1, 0};
    for (int i = 0; i < 6; i++) {
        fmha_plan_cache_stats_t before = stats(ctx);
        fmha_plan_t *p;
        CHECK_STATUS(plan_of(ctx, fc[order[i]], NULL, &p), FMHA_STATUS_SUCCESS);
        fmha_plan_destroy(p);
        CHECK(stats(ctx).hits - before.hits == (uint64_t)hit[i]);
        CHECK(stats(ctx).entries <= 2);
    }
    fmha_context_destroy(ctx);

    setenv("FMHA_PLAN_CACHE", "0", 1);
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    unsetenv("FMHA_PLAN_CACHE");
    for (int i = 0; i < 2; i++) {
        fmha_plan_t *p;
        CHECK_STATUS(plan_of(ctx, fc[0], NULL, &p), FMHA_STATUS_SUCCESS);
        fmha_plan_destroy(p);
    }
    fmha_plan_cache_stats_t s = stats(ctx);
    CHECK(s.capacity == 0 && s.entries == 0 && s.hits == 0 && s.misses == 0);
    fmha_context_destroy(ctx);
    for (int i = 0; i < 3; i++) fwd_case_destroy(fc[i]);
}

typedef struct worker {
    fmha_context_t *ctx;
    fwd_case_t **cases;
    int failures;
} worker_t;

static void *plan_many(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < 150; i++) {
        fmha_plan_t *p;
        if (plan_of(w->ctx, w->cases[i % 3], NULL, &p)) w->failures++;
        else fmha_plan_destroy(p);
    }
    return NULL;
}

static void test_threads(void)
{
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    fwd_case_t *fc[3];
    char why[256];
    for (int i = 0; i < 3; i++) {
        fwd_config_t c = config(20 + i);
        c.describe_only = 1;
        CHECK_STATUS(fwd_case_create(&c, &fc[i], why, sizeof why), FMHA_STATUS_SUCCESS);
    }
    pthread_t th[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){ctx, fc, 0};
        CHECK(pthread_create(&th[i], NULL, plan_many, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].failures == 0);
    }
    fmha_plan_cache_stats_t s = stats(ctx);
    CHECK(s.hits + s.misses == 600 && s.entries == 3 && s.misses >= 3);
    fmha_context_destroy(ctx);
    for (int i = 0; i < 3; i++) fwd_case_destroy(fc[i]);
}

int main(void)
{
    unsetenv("FMHA_PLAN_CACHE");
    RUN(test_hit_runs_like_a_fresh_plan);
    RUN(test_keys);
    RUN(test_capacity);
    RUN(test_threads);
    TEST_MAIN_END();
}
