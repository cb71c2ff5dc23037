/* SPDX-License-Identifier: MIT */
/*
 * test_threads.c: one context, many threads. Each thread builds its own cases (forward,
 * GQA, varlen with an empty sequence, split-KV over pages, batch prefill over CSR lists,
 * appendkv with RoPE, a deterministic backward), plans them on the shared context, runs
 * them and compares every output bit for bit with a single-threaded run of the same
 * cases; meanwhile the threads also explain problems, list the context's kernels and
 * make plans that must fail, checking that each thread reads its own error message.
 * Built into the ThreadSanitizer job too (make tsan-test), where a data race fails it.
 * Usage: test_threads [cpu|cuda] [threads] [rounds]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "runner.h"
#include "testing.h"

enum { CASES = 7, MAX_THREADS = 64 };

static fmha_context_t *ctx;
static int n_threads = 8, rounds = 3;

/* Case i's configuration. Small: the CPU oracle runs each in milliseconds. */
static void config_of(int i, bwd_config_t *bc)
{
    static const int32_t lq[3] = {5, 0, 33}, lk[3] = {17, 9, 64};
    memset(bc, 0, sizeof *bc);
    fwd_config_t *c = &bc->fwd;
    fwd_config_default(c);
    c->seed = 700 + (uint64_t)i;
    switch (i) {
    case 0: /* batch, GQA, causal, LSE */
        c->b = 2, c->h = 4, c->h_k = 2, c->s = 77, c->s_k = 129, c->d = c->d_v = 64;
        c->mask = "b", c->lse = 1;
        break;
    case 1: /* varlen with an empty sequence, a window, bf16 */
        c->mode = FMHA_MODE_GROUP, c->b = 3, c->seqlens_q = lq, c->seqlens_k = lk, c->s = 33, c->s_k = 64;
        c->h = c->h_k = 2, c->d = c->d_v = 128, c->dtype = FMHA_DTYPE_BF16, c->mask = "b:8,0";
        break;
    case 2: /* split-KV decode over a paged cache */
        c->family = FMHA_FAMILY_FWD_SPLITKV, c->num_splits = 3, c->page_size = 16;
        c->b = 3, c->h = 8, c->h_k = 2, c->s = 1, c->s_k = 300, c->d = c->d_v = 128, c->lse = 1;
        break;
    case 3: /* batch prefill over CSR page lists, soft-cap, ALiBi */
        c->family = FMHA_FAMILY_BATCH_PREFILL, c->mode = FMHA_MODE_GROUP, c->page_size = 7;
        c->kv_lookup = FMHA_KV_LOOKUP_CSR, c->b = 3, c->seqlens_q = lq, c->seqlens_k = lk, c->s = 33, c->s_k = 64;
        c->h = 4, c->h_k = 1, c->d = c->d_v = 64, c->mask = "b", c->softcap = 6.0, c->bias = BIAS_ALIBI_H;
        break;
    case 4: /* appendkv with half-rotated RoPE into a block-table cache, then attention */
        c->page_size = 16, c->family = FMHA_FAMILY_FWD_PAGEDKV, c->s_knew = 5, c->rotary_dim = 32;
        c->b = 2, c->h = 4, c->h_k = 2, c->s = 5, c->s_k = 40, c->d = c->d_v = 64, c->mask = "b";
        break;
    case 5: /* sink tokens and sink logits, fp16 */
        c->b = 1, c->h = c->h_k = 3, c->s = 50, c->s_k = 50, c->d = c->d_v = 32, c->mask = "b:16,0,4", c->sink = 1;
        break;
    default: /* a deterministic backward */
        c->b = 2, c->h = 4, c->h_k = 2, c->s = 45, c->s_k = 45, c->d = c->d_v = 64, c->mask = "b";
        bc->deterministic = 1;
        break;
    }
}
static int is_bwd(int i) { return i == CASES - 1; }

/* Bytes a tensor's elements span. */
static size_t tensor_bytes(const fmha_problem_t *p, fmha_tensor_role_t role)
{
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], strides[FMHA_MAX_RANK];
    if (fmha_problem_get_tensor(p, role, &dt, &rank, dims, strides)) return 0;
    return (size_t)test_span_elems(p, role) * fmha_dtype_size(dt);
}

/* A case's outputs, concatenated: o (forward) or dq, dk, dv (backward). */
typedef struct {
    unsigned char *bytes;
    size_t n;
    char why[1200];
} outputs_t;

static void append(outputs_t *o, const void *data, size_t n)
{
    if (!n) return;
    o->bytes = realloc(o->bytes, o->n + n);
    if (!o->bytes) abort();
    memcpy(o->bytes + o->n, data, n);
    o->n += n;
}

/* Plan case i on the shared context, run it once, and collect its outputs. 0 or -1 (why). */
static int run_case(int i, outputs_t *out)
{
    bwd_config_t bc;
    config_of(i, &bc);
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = 1};
    memset(out, 0, sizeof *out);
    if (!is_bwd(i)) {
        fwd_run_t r;
        if (fwd_run_prepare(&r, &bc.fwd, ctx, &opt) || fwd_run_execute(&r)) {
            snprintf(out->why, sizeof out->why, "case %d, %s: %s", i, r.step, r.why);
            fwd_run_release(&r);
            return -1;
        }
        size_t elems;
        const void *o = fwd_case_output(r.fc, &elems);
        append(out, o, tensor_bytes(fwd_case_problem(r.fc), FMHA_TENSOR_O));
        fwd_run_release(&r);
        return 0;
    }
    bwd_case_t *b = NULL;
    fmha_plan_t *plan = NULL;
    int rc = -1;
    if (bwd_case_create(&bc, &b, out->why, sizeof out->why) || bwd_case_bind(b, ctx, out->why, sizeof out->why))
        goto done;
    if (fmha_plan_create(ctx, bwd_case_problem(b), &opt, &plan)) {
        snprintf(out->why, sizeof out->why, "case %d, plan: %s", i, fmha_context_last_error(ctx));
        goto done;
    }
    if (bwd_case_execute(b, plan)) {
        snprintf(out->why, sizeof out->why, "case %d, execute: %s", i, fmha_plan_last_error(plan));
        goto done;
    }
    const fmha_tensor_role_t grads[3] = {FMHA_TENSOR_DQ, FMHA_TENSOR_DK, FMHA_TENSOR_DV};
    for (int g = 0; g < 3; g++) append(out, bwd_case_data(b)[grads[g]], tensor_bytes(bwd_case_problem(b), grads[g]));
    rc = 0;
done:
    fmha_plan_destroy(plan);
    bwd_case_destroy(b);
    return rc;
}

static outputs_t expected[CASES];

/* A plan that must fail, and the message this thread must then read (another thread's
 * failure or success must not change it). */
static int failing_plan_reads_its_own_error(int salt)
{
    fmha_problem_t *p = NULL;
    if (fmha_problem_create(&p)) return -1;
    const int64_t heads = 2 * (salt % 7) + 5, kv_heads = 2; /* odd: not a multiple of kv_heads */
    fmha_problem_set_i64(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_FWD);
    fmha_problem_set_i64(p, FMHA_PARAM_BATCH, 1);
    fmha_problem_set_i64(p, FMHA_PARAM_NUM_HEADS_Q, heads);
    fmha_problem_set_i64(p, FMHA_PARAM_NUM_HEADS_KV, kv_heads);
    fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_Q, 8);
    fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_KV, 8);
    fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_QK, 64);
    fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_V, 64);
    fmha_plan_t *plan = NULL;
    const fmha_status_t st = fmha_plan_create(ctx, p, NULL, &plan);
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)heads);
    int ok = st != FMHA_STATUS_SUCCESS && plan == NULL;
    for (int k = 0; k < 50 && ok; k++) { /* other threads plan meanwhile */
        ok = strstr(fmha_context_last_error(ctx), want) != NULL;
        if (!ok) printf("  thread's message changed: \"%s\" (wanted one naming %s heads)\n", fmha_context_last_error(ctx), want);
    }
    fmha_problem_destroy(p);
    return ok ? 0 : -1;
}

static void *worker(void *arg)
{
    const int id = (int)(intptr_t)arg;
    intptr_t bad = 0;
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < CASES; k++) {
            const int i = (k + id + r) % CASES; /* each thread its own order */
            outputs_t got;
            if (run_case(i, &got)) {
                printf("  thread %d: %s\n", id, got.why);
                bad++;
            } else if (got.n != expected[i].n || memcmp(got.bytes, expected[i].bytes, got.n) != 0) {
                printf("  thread %d: case %d's outputs differ from the single-threaded run\n", id, i);
                bad++;
            } else if (fmha_context_last_error(ctx)[0]) {
                printf("  thread %d: a success left the message \"%s\"\n", id, fmha_context_last_error(ctx));
                bad++;
            }
            free(got.bytes);
            if ((k + id) % 3 == 0 && failing_plan_reads_its_own_error(id * 31 + k)) bad++;
            if ((k + id) % 4 == 1) { /* explain and list while others plan */
                char *json = fmha_context_kernels_json(ctx, 1);
                bad += json == NULL;
                fmha_free(json);
            }
        }
    return (void *)bad;
}

static void test_threads_match_one_thread(void)
{
    for (int i = 0; i < CASES; i++) {
        if (run_case(i, &expected[i])) printf("  single-threaded: %s\n", expected[i].why);
        CHECK(expected[i].n > 0);
    }
    pthread_t th[MAX_THREADS];
    int started = 0;
    for (; started < n_threads; started++)
        if (pthread_create(&th[started], NULL, worker, (void *)(intptr_t)started)) break;
    CHECK(started == n_threads);
    intptr_t bad = 0;
    for (int t = 0; t < started; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad += (intptr_t)r;
    }
    CHECK(bad == 0);
    fmha_plan_cache_stats_t cs = {.struct_size = sizeof cs};
    CHECK_STATUS(fmha_context_plan_cache_stats(ctx, &cs), FMHA_STATUS_SUCCESS);
    CHECK(cs.hits > 0); /* the threads shared plans */
}

/* Explain runs alongside plans too (it reads the registry and the plan cache). */
static void *explainer(void *arg)
{
    (void)arg;
    intptr_t bad = 0;
    bwd_config_t bc;
    config_of(0, &bc);
    fwd_config_t c = bc.fwd;
    c.describe_only = 1;
    fwd_case_t *fc = NULL;
    char why[512];
    if (fwd_case_create(&c, &fc, why, sizeof why)) return (void *)1;
    for (int k = 0; k < 40; k++) {
        char *text = NULL;
        if (fmha_explain(ctx, fwd_case_problem(fc), NULL, &text) || !text || !strstr(text, "chosen")) bad++;
        fmha_free(text);
    }
    fwd_case_destroy(fc);
    return (void *)bad;
}

static void test_explain_alongside_plans(void)
{
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, explainer, NULL) == 0);
    CHECK(pthread_create(&b, NULL, worker, (void *)(intptr_t)1) == 0);
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    CHECK(ra == NULL && rb == NULL);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "cpu";
    if (argc > 2) n_threads = atoi(argv[2]);
    if (argc > 3) rounds = atoi(argv[3]);
    if (n_threads < 1 || n_threads > MAX_THREADS || rounds < 1) {
        printf("usage: test_threads [cpu|cuda] [threads 1-%d] [rounds >= 1]\n", MAX_THREADS);
        return 2;
    }
    const fmha_backend_t b = strcmp(backend, "cuda") == 0 ? FMHA_BACKEND_CUDA : FMHA_BACKEND_CPU;
    if (fmha_context_create(&ctx, b, 0)) {
        printf("no %s context: %s\n", backend, fmha_context_create_error());
        return b == FMHA_BACKEND_CUDA ? 77 : 1;
    }
    printf("%s backend, %d threads x %d rounds x %d cases\n", backend, n_threads, rounds, CASES);
    RUN(test_threads_match_one_thread);
    RUN(test_explain_alongside_plans);
    for (int i = 0; i < CASES; i++) free(expected[i].bytes);
    fmha_context_destroy(ctx);
    TEST_MAIN_END();
}
