/* SPDX-License-Identifier: MIT */
/*
 * index_safety.c: bad index data of every kind (cu_seqlens, seqused_kv, seqlens_kv,
 * cache_batch_idx, block_table, CSR kv_indptr / kv_indices / kv_last_page_len) against
 * the contract of docs/semantics.md, "Index data":
 *
 *   - a host backend (CPU) refuses each with INVALID_PROBLEM and a message naming the
 *     bad entry, before any read through it;
 *   - a device backend without check_index_data runs bounded: SUCCESS, no access outside
 *     the described tensors (guard bands around every tensor stay intact; run it under
 *     compute-sanitizer memcheck for the reads), the context keeps working;
 *   - with check_index_data every backend refuses with the host's message;
 *   - after each bad call the same plan with valid data gives the first valid run's
 *     output again, bit for bit.
 *
 * appendkv's outputs are the caches it writes into (and q_rot): poisoned before each
 * run, so that the appended slots are what the runs compare.
 *
 * Usage: gpu_index_safety [cpu|cuda] (default cuda). Families without a kernel on the
 * context print "skip" (the CUDA backend runs only what it has kernels for).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha/fmha.h"

#define GUARD 256         /* bytes before and after every tensor */
#define GUARD_BYTE 0x5A
#define MAX_T 16

typedef struct {
    fmha_tensor_role_t role;
    fmha_dtype_t dtype;
    int rank;
    int64_t dims[4];
    const int32_t *index; /* int32 contents (index tensors); NULL: random fp16 */
    int output;           /* written by the family (poisoned before each run) */
} tspec_t;

typedef struct {
    const char *name;
    fmha_family_t family;
    int64_t params[16][2]; /* (param, value), ends at param 0 */
    const char *mask;
    tspec_t t[MAX_T];
    const char *force; /* on a GPU, this kernel (a path the selector would not take here) */
} icase_t;

typedef struct {
    fmha_tensor_role_t role;
    int64_t at;     /* element of the index tensor */
    int32_t value;
    const char *msg; /* what the refusal must say */
} corruption_t;

static fmha_context_t *ctx;
static int is_host, passed, failed, skipped;

static size_t elems_of(const tspec_t *s)
{
    size_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= (size_t)s->dims[d];
    return n;
}

typedef struct {
    const icase_t *c;
    int n;
    size_t bytes[MAX_T];
    unsigned char *host[MAX_T]; /* guard + contents + guard, as last uploaded */
    void *dev[MAX_T];           /* the allocation; the tensor starts GUARD bytes in */
    fmha_problem_t *p;
} bench_t;

static void fill(bench_t *b, int i, uint32_t seed)
{
    const tspec_t *s = &b->c->t[i];
    unsigned char *h = b->host[i];
    memset(h, GUARD_BYTE, b->bytes[i] + 2 * GUARD);
    if (s->output) {
        memset(h + GUARD, 0xFF, b->bytes[i]); /* fp16 NaN poison */
    } else if (s->index) {
        memcpy(h + GUARD, s->index, b->bytes[i]);
    } else {
        uint16_t *x = (uint16_t *)(h + GUARD);
        for (size_t e = 0; e < b->bytes[i] / 2; e++) {
            seed = seed * 1664525u + 1013904223u;
            x[e] = (uint16_t)(0x3000 + ((seed >> 16) & 0x0FFF)) | (uint16_t)((seed & 0x100) << 7); /* |x| in [0.125, 1) */
        }
    }
}

static int upload(bench_t *b, int i)
{
    return fmha_context_copy(ctx, b->dev[i], b->host[i], b->bytes[i] + 2 * GUARD, 1) != FMHA_STATUS_SUCCESS;
}

static void bench_free(bench_t *b)
{
    for (int i = 0; i < b->n; i++) {
        if (b->dev[i]) fmha_context_free(ctx, b->dev[i]);
        free(b->host[i]);
    }
    fmha_problem_destroy(b->p);
}

static int bench_make(bench_t *b, const icase_t *c)
{
    memset(b, 0, sizeof *b);
    b->c = c;
    if (fmha_problem_create(&b->p)) return -1;
    fmha_problem_set_i64(b->p, FMHA_PARAM_FAMILY, c->family);
    for (int k = 0; c->params[k][0]; k++)
        if (fmha_problem_set_i64(b->p, (fmha_param_t)c->params[k][0], c->params[k][1])) goto bad;
    if (c->mask && fmha_problem_set_mask(b->p, c->mask)) goto bad;
    for (; b->n < MAX_T && c->t[b->n].role; b->n++) {
        const tspec_t *s = &c->t[b->n];
        b->bytes[b->n] = elems_of(s) * (s->dtype == FMHA_DTYPE_FP16 ? 2 : 4);
        if (fmha_problem_set_tensor(b->p, s->role, s->dtype, s->rank, s->dims, NULL)) goto bad;
        b->host[b->n] = malloc(b->bytes[b->n] + 2 * GUARD);
        if (!b->host[b->n] || fmha_context_alloc(ctx, b->bytes[b->n] + 2 * GUARD, &b->dev[b->n])) goto bad;
        fill(b, b->n, 77u + 31u * (uint32_t)b->n);
        if (upload(b, b->n)) goto bad;
    }
    return 0;
bad:
    printf("  %s: cannot build the problem: %s\n", c->name, fmha_problem_last_error(b->p));
    return -1;
}

/* Poison the outputs, run; 0 or the status. */
static fmha_status_t bench_run(bench_t *b, fmha_plan_t *plan)
{
    fmha_tensor_ptr_t ptrs[MAX_T];
    for (int i = 0; i < b->n; i++) {
        if (b->c->t[i].output) {
            fill(b, i, 0);
            if (upload(b, i)) return FMHA_STATUS_CUDA_ERROR;
        }
        ptrs[i].role = b->c->t[i].role;
        ptrs[i].data = (char *)b->dev[i] + GUARD;
    }
    size_t ws_bytes = 0;
    fmha_plan_workspace_size(plan, &ws_bytes);
    void *ws = NULL;
    if (ws_bytes && fmha_context_alloc(ctx, ws_bytes, &ws)) return FMHA_STATUS_ALLOC_FAILED;
    fmha_status_t st = fmha_plan_execute(plan, ptrs, (size_t)b->n, ws, ws_bytes, NULL);
    fmha_status_t sync = fmha_context_synchronize(ctx);
    if (ws) fmha_context_free(ctx, ws);
    return st ? st : sync;
}

/* Every guard band as filled; the outputs into out[i] (NULL: not kept). Returns the
 * number of corrupted guard bytes, or -1 when a copy failed. */
static long guards_and_outputs(bench_t *b, unsigned char **out)
{
    long bad = 0;
    for (int i = 0; i < b->n; i++) {
        size_t total = b->bytes[i] + 2 * GUARD;
        unsigned char *h = malloc(total);
        if (!h || fmha_context_copy(ctx, h, b->dev[i], total, 0)) {
            free(h);
            return -1;
        }
        for (size_t e = 0; e < GUARD; e++) bad += (h[e] != GUARD_BYTE) + (h[GUARD + b->bytes[i] + e] != GUARD_BYTE);
        if (out && b->c->t[i].output) {
            free(out[i]);
            out[i] = malloc(b->bytes[i]);
            if (out[i]) memcpy(out[i], h + GUARD, b->bytes[i]);
        }
        free(h);
    }
    return bad;
}

static int find(const bench_t *b, fmha_tensor_role_t role)
{
    for (int i = 0; i < b->n; i++)
        if (b->c->t[i].role == role) return i;
    return -1;
}

#define EXPECT(cond, ...)                 \
    do {                                  \
        if (!(cond)) {                    \
            printf("  FAIL %s: ", what);  \
            printf(__VA_ARGS__);          \
            printf("\n");                 \
            ok = 0;                       \
        }                                 \
    } while (0)

static void run_case(const icase_t *c, const corruption_t *bad, int n_bad)
{
    bench_t b;
    if (bench_make(&b, c)) {
        failed++;
        bench_free(&b);
        return;
    }
    fmha_plan_options_t plain = {.struct_size = sizeof plain, .force_kernel = is_host ? NULL : c->force}, checked = plain;
    checked.check_index_data = 1;
    fmha_plan_t *plan = NULL, *cplan = NULL;
    fmha_status_t st = fmha_plan_create(ctx, b.p, &plain, &plan);
    if (st == FMHA_STATUS_NOT_SUPPORTED && !is_host) {
        /* the refusal must name the backend that has the family */
        const int named = strstr(fmha_context_last_error(ctx), "the cpu backend runs it") != NULL;
        printf("%s %s: no kernel on this context (%s)\n", named ? "skip" : "FAIL", c->name,
               fmha_context_last_error(ctx));
        skipped += named, failed += !named;
        bench_free(&b);
        return;
    }
    if (st || fmha_plan_create(ctx, b.p, &checked, &cplan)) {
        printf("FAIL %s: plan: %s\n", c->name, fmha_context_last_error(ctx));
        failed++;
        fmha_plan_destroy(plan);
        bench_free(&b);
        return;
    }
    unsigned char *first[MAX_T] = {0}, *again[MAX_T] = {0};
    const char *what = c->name;
    int ok = 1;
    st = bench_run(&b, plan);
    EXPECT(st == FMHA_STATUS_SUCCESS, "the valid run returned %s: %s", fmha_status_name(st), fmha_plan_last_error(plan));
    EXPECT(guards_and_outputs(&b, first) == 0, "the valid run wrote outside its tensors");
    if (!ok) goto done;
    for (int k = 0; k < n_bad; k++) {
        char label[160];
        snprintf(label, sizeof label, "%s, %s[%lld] = %d", c->name, fmha_tensor_role_name(bad[k].role),
                 (long long)bad[k].at, bad[k].value);
        what = label;
        const int i = find(&b, bad[k].role);
        int32_t *cell = (int32_t *)(b.host[i] + GUARD) + bad[k].at;
        const int32_t good = *cell;
        *cell = bad[k].value;
        if (upload(&b, i)) {
            EXPECT(0, "upload failed");
            break;
        }
        /* without the check: a host backend refuses, a device one stays in bounds */
        st = bench_run(&b, plan);
        if (is_host) {
            EXPECT(st == FMHA_STATUS_INVALID_PROBLEM, "returned %s, expected INVALID_PROBLEM", fmha_status_name(st));
            EXPECT(strstr(fmha_plan_last_error(plan), bad[k].msg), "message \"%s\" lacks \"%s\"",
                   fmha_plan_last_error(plan), bad[k].msg);
        } else {
            EXPECT(st == FMHA_STATUS_SUCCESS, "unchecked run returned %s: %s", fmha_status_name(st),
                   fmha_plan_last_error(plan));
        }
        long g = guards_and_outputs(&b, NULL);
        EXPECT(g == 0, "%ld guard bytes around the tensors changed (or a copy failed: -1)", g);
        /* with the check: refused with the same message everywhere */
        st = bench_run(&b, cplan);
        EXPECT(st == FMHA_STATUS_INVALID_PROBLEM, "checked run returned %s, expected INVALID_PROBLEM",
               fmha_status_name(st));
        EXPECT(strstr(fmha_plan_last_error(cplan), bad[k].msg), "checked message \"%s\" lacks \"%s\"",
               fmha_plan_last_error(cplan), bad[k].msg);
        /* the context survives: valid data give the first output again */
        *cell = good;
        if (upload(&b, i)) {
            EXPECT(0, "upload failed");
            break;
        }
        st = bench_run(&b, plan);
        EXPECT(st == FMHA_STATUS_SUCCESS, "the valid run after it returned %s: %s", fmha_status_name(st),
               fmha_plan_last_error(plan));
        EXPECT(guards_and_outputs(&b, again) == 0, "the valid run after it wrote outside its tensors");
        for (int t = 0; t < b.n; t++)
            if (first[t]) EXPECT(again[t] && memcmp(first[t], again[t], b.bytes[t]) == 0,
                                 "the valid run after it differs from the first in %s",
                                 fmha_tensor_role_name(b.c->t[t].role));
        printf("%s %s\n", ok ? "ok  " : "FAIL", label);
        if (ok) passed++;
        else failed++;
        ok = 1;
    }
done:
    if (!ok) failed++;
    for (int t = 0; t < MAX_T; t++) free(first[t]), free(again[t]);
    fmha_plan_destroy(plan);
    fmha_plan_destroy(cplan);
    bench_free(&b);
}

/* ------------------------------------------------------------------ the cases */

#define P(name) FMHA_PARAM_##name
#define T(name) FMHA_TENSOR_##name
#define H FMHA_DTYPE_FP16
#define I FMHA_DTYPE_INT32
#define F FMHA_DTYPE_FP32
#define IN(r, dt, rank, ...) {T(r), dt, rank, {__VA_ARGS__}, NULL, 0}
#define OUT(r, dt, rank, ...) {T(r), dt, rank, {__VA_ARGS__}, NULL, 1}
#define IDX(r, data, rank, ...) {T(r), I, rank, {__VA_ARGS__}, data, 0}

/* Group mode: 3 sequences, q lengths 5, 0, 9 (of 16 tokens), k lengths 7, 3, 6 (16), max 9 / 7. */
static const int32_t cu_q[] = {0, 5, 5, 14}, cu_k[] = {0, 7, 10, 16}, used_k[] = {6, 3, 0};

static void varlen(void)
{
    const icase_t c = {
        "fwd varlen", FMHA_FAMILY_FWD,
        {{P(MODE), FMHA_MODE_GROUP}, {P(BATCH), 3}, {P(NUM_HEADS_Q), 4}, {P(NUM_HEADS_KV), 2}, {P(SEQLEN_Q), 9},
         {P(SEQLEN_KV), 7}, {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}},
        "b",
        {IN(Q, H, 3, 16, 4, 64),
         IN(K, H, 3, 16, 2, 64),
         IN(V, H, 3, 16, 2, 64),
         OUT(O, H, 3, 16, 4, 64),
         OUT(LSE, F, 2, 4, 16),
         IDX(CU_SEQLENS_Q, cu_q, 1, 4),
         IDX(CU_SEQLENS_KV, cu_k, 1, 4),
         IDX(SEQUSED_KV, used_k, 1, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(CU_SEQLENS_Q), 0, 3, "cu_seqlens_q[0] is 3; expected 0"},
        {T(CU_SEQLENS_Q), 0, -1000000, "cu_seqlens_q[0] is -1000000; expected 0"},
        {T(CU_SEQLENS_Q), 2, 1, "cu_seqlens_q is decreasing at 1 (5 then 1)"},
        {T(CU_SEQLENS_Q), 1, -7, "cu_seqlens_q is decreasing at 0 (0 then -7)"},
        {T(CU_SEQLENS_Q), 3, 1 << 30, "cu_seqlens_q[3] = 1073741824 exceeds the 16 tokens"},
        {T(CU_SEQLENS_Q), 3, 2147483647, "cu_seqlens_q[3] = 2147483647 exceeds the 16 tokens"},
        {T(CU_SEQLENS_Q), 3, 16, "sequence 2 has length 11 in cu_seqlens_q; expected <= seqlen_q"},
        {T(CU_SEQLENS_KV), 3, 17, "cu_seqlens_kv[3] = 17 exceeds the 16 tokens"},
        {T(CU_SEQLENS_KV), 2, -2147483647 - 1, "cu_seqlens_kv is decreasing at 1"},
        {T(CU_SEQLENS_KV), 1, 9, "sequence 0 has length 9 in cu_seqlens_kv"},
        {T(SEQUSED_KV), 1, -1, "seqused_kv[1] = -1; expected 0..3"},
        {T(SEQUSED_KV), 0, 1 << 29, "seqused_kv[0] = 536870912; expected 0..7"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* The backward over the same sequences (deterministic: the reruns must match bit for bit). */
static void varlen_bwd(void)
{
    const icase_t c = {
        "bwd varlen", FMHA_FAMILY_BWD,
        {{P(MODE), FMHA_MODE_GROUP}, {P(BATCH), 3}, {P(NUM_HEADS_Q), 4}, {P(NUM_HEADS_KV), 2}, {P(SEQLEN_Q), 9},
         {P(SEQLEN_KV), 7}, {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}, {P(DETERMINISTIC), 1}},
        "b",
        {IN(Q, H, 3, 16, 4, 64),
         IN(K, H, 3, 16, 2, 64),
         IN(V, H, 3, 16, 2, 64),
         IN(O, H, 3, 16, 4, 64),
         IN(LSE, F, 2, 4, 16),
         IN(DO, H, 3, 16, 4, 64),
         OUT(DQ, H, 3, 16, 4, 64),
         OUT(DK, H, 3, 16, 2, 64),
         OUT(DV, H, 3, 16, 2, 64),
         IDX(CU_SEQLENS_Q, cu_q, 1, 4),
         IDX(CU_SEQLENS_KV, cu_k, 1, 4),
         IDX(SEQUSED_KV, used_k, 1, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(CU_SEQLENS_Q), 0, 3, "cu_seqlens_q[0] is 3; expected 0"},
        {T(CU_SEQLENS_Q), 2, 1, "cu_seqlens_q is decreasing at 1 (5 then 1)"},
        {T(CU_SEQLENS_Q), 3, 2147483647, "cu_seqlens_q[3] = 2147483647 exceeds the 16 tokens"},
        {T(CU_SEQLENS_Q), 3, 16, "sequence 2 has length 11 in cu_seqlens_q; expected <= seqlen_q"},
        {T(CU_SEQLENS_KV), 3, 17, "cu_seqlens_kv[3] = 17 exceeds the 16 tokens"},
        {T(CU_SEQLENS_KV), 2, -2147483647 - 1, "cu_seqlens_kv is decreasing at 1"},
        {T(CU_SEQLENS_KV), 1, 9, "sequence 0 has length 9 in cu_seqlens_kv"},
        {T(SEQUSED_KV), 0, 1 << 29, "seqused_kv[0] = 536870912; expected 0..7"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* A contiguous cache of 5 rows of 12 tokens; 3 sequences of 4, 12, 1 keys in rows 4, 0, 2. */
static const int32_t lens3[] = {4, 12, 1}, rows3[] = {4, 0, 2};

static void kvcache(void)
{
    const icase_t c = {
        "fwd_splitkv cache", FMHA_FAMILY_FWD_SPLITKV,
        {{P(BATCH), 3}, {P(NUM_HEADS_Q), 4}, {P(NUM_HEADS_KV), 2}, {P(SEQLEN_Q), 1}, {P(SEQLEN_KV), 12},
         {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}, {P(NUM_SPLITS), 2}},
        NULL,
        {IN(Q, H, 4, 3, 1, 4, 64),
         IN(K, H, 4, 5, 12, 2, 64),
         IN(V, H, 4, 5, 12, 2, 64),
         OUT(O, H, 4, 3, 1, 4, 64),
         IDX(SEQLENS_KV, lens3, 1, 3),
         IDX(CACHE_BATCH_IDX, rows3, 1, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(SEQLENS_KV), 0, -3, "seqlens_kv[0] = -3; expected >= 0"},
        {T(SEQLENS_KV), 2, 13, "seqlens_kv[2] = 13 exceeds the cache's 12 tokens"},
        {T(SEQLENS_KV), 1, 2147483647, "seqlens_kv[1] = 2147483647 exceeds"},
        {T(CACHE_BATCH_IDX), 0, -1, "cache_batch_idx[0] = -1; expected a cache row in [0, 5)"},
        {T(CACHE_BATCH_IDX), 2, 5, "cache_batch_idx[2] = 5; expected a cache row in [0, 5)"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* 6 pages of 3 tokens (NHD); 2 sequences of 7 and 2 keys; table rows of 3 pages. */
static const int32_t lens2[] = {7, 2}, table[] = {5, 1, 3, 0, 4, 2};

static void paged_table(void)
{
    const icase_t c = {
        "fwd_pagedkv block table", FMHA_FAMILY_FWD_PAGEDKV,
        {{P(BATCH), 2}, {P(NUM_HEADS_Q), 2}, {P(NUM_HEADS_KV), 1}, {P(SEQLEN_Q), 1}, {P(SEQLEN_KV), 9},
         {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}, {P(PAGE_SIZE), 3}},
        NULL,
        {IN(Q, H, 4, 2, 1, 2, 64),
         IN(K, H, 4, 6, 3, 1, 64),
         IN(V, H, 4, 6, 3, 1, 64),
         OUT(O, H, 4, 2, 1, 2, 64),
         IDX(SEQLENS_KV, lens2, 1, 2),
         IDX(BLOCK_TABLE, table, 2, 2, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(BLOCK_TABLE), 1, -1, "block_table[0][1] = -1; expected a page index in [0, 6)"},
        {T(BLOCK_TABLE), 3, 6, "block_table[1][0] = 6; expected a page index in [0, 6)"},
        {T(SEQLENS_KV), 1, 10, "seqlens_kv[1] = 10 exceeds the cache's 9 tokens"},
        {T(SEQLENS_KV), 0, -1, "seqlens_kv[0] = -1; expected >= 0"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* CSR: 2 sequences over pages {4, 0, 2} (last page 2 of 3 tokens: 8 keys) and {1} (3). */
static const int32_t indptr[] = {0, 3, 4}, indices[] = {4, 0, 2, 1}, last_len[] = {2, 3};

static void paged_csr(void)
{
    const icase_t c = {
        "fwd_pagedkv CSR", FMHA_FAMILY_FWD_PAGEDKV,
        {{P(BATCH), 2}, {P(NUM_HEADS_Q), 2}, {P(NUM_HEADS_KV), 1}, {P(SEQLEN_Q), 1}, {P(SEQLEN_KV), 9},
         {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}, {P(PAGE_SIZE), 3}, {P(KV_LOOKUP), FMHA_KV_LOOKUP_CSR}},
        NULL,
        {IN(Q, H, 4, 2, 1, 2, 64),
         IN(K, H, 4, 5, 3, 1, 64),
         IN(V, H, 4, 5, 3, 1, 64),
         OUT(O, H, 4, 2, 1, 2, 64),
         IDX(KV_INDPTR, indptr, 1, 3),
         IDX(KV_INDICES, indices, 1, 4),
         IDX(KV_LAST_PAGE_LEN, last_len, 1, 2)},
         NULL};
    const corruption_t bad[] = {
        {T(KV_INDPTR), 0, -1, "kv_indptr[0] is -1; expected >= 0"},
        {T(KV_INDPTR), 1, 5, "kv_indptr[1] = 5 exceeds the 4 entries of kv_indices"},
        {T(KV_INDPTR), 2, 2, "kv_indptr is decreasing at 1 (3 then 2)"},
        {T(KV_INDPTR), 2, 9, "kv_indptr[2] = 9 exceeds the 4 entries of kv_indices"},
        {T(KV_INDICES), 3, 5, "kv_indices[3] = 5 (sequence 1); expected a page index in [0, 5)"},
        {T(KV_INDICES), 0, -2147483647 - 1, "kv_indices[0] = -2147483648 (sequence 0)"},
        {T(KV_LAST_PAGE_LEN), 0, 0, "kv_last_page_len[0] = 0; expected 1..page_size"},
        {T(KV_LAST_PAGE_LEN), 1, 4, "kv_last_page_len[1] = 4; expected 1..page_size"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* batch_prefill: the varlen queries above over the block table above (lengths 7, 2, 0). */
static const int32_t lens_pf[] = {7, 2, 0}, table_pf[] = {5, 1, 3, 0, 4, 2, 2, 2, 2};

static void prefill(void)
{
    const icase_t c = {
        "batch_prefill block table", FMHA_FAMILY_BATCH_PREFILL,
        {{P(MODE), FMHA_MODE_GROUP}, {P(BATCH), 3}, {P(NUM_HEADS_Q), 4}, {P(NUM_HEADS_KV), 2}, {P(SEQLEN_Q), 9},
         {P(SEQLEN_KV), 9}, {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}, {P(PAGE_SIZE), 3}},
        "b",
        {IN(Q, H, 3, 16, 4, 64),
         IN(K, H, 4, 6, 3, 2, 64),
         IN(V, H, 4, 6, 3, 2, 64),
         OUT(O, H, 3, 16, 4, 64),
         OUT(LSE, F, 2, 4, 16),
         IDX(CU_SEQLENS_Q, cu_q, 1, 4),
         IDX(SEQLENS_KV, lens_pf, 1, 3),
         IDX(BLOCK_TABLE, table_pf, 2, 3, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(CU_SEQLENS_Q), 3, 2147483647, "cu_seqlens_q[3] = 2147483647 exceeds the 16 tokens"},
        {T(CU_SEQLENS_Q), 1, -7, "cu_seqlens_q is decreasing at 0 (0 then -7)"},
        {T(BLOCK_TABLE), 2, 6, "block_table[0][2] = 6; expected a page index in [0, 6)"},
        {T(BLOCK_TABLE), 3, -1, "block_table[1][0] = -1; expected a page index in [0, 6)"},
        {T(SEQLENS_KV), 1, 10, "seqlens_kv[1] = 10 exceeds the cache's 9 tokens"},
        {T(SEQLENS_KV), 2, -2147483647 - 1, "seqlens_kv[2] = -2147483648; expected >= 0"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* batch_prefill over 128-token pages, head dim 128, forced onto the sm90 wgmma kernel:
 * its whole key tiles come by TMA, a box per page (fwd.c encode_page_maps), the partial
 * last tile by cp.async. A bad page number must read as zeros, never outside the pool.
 * 3 sequences of 5, 4, 3 queries over 200, 128 and 0 keys; table rows of 2 pages. */
static const int32_t cu_q_tma[] = {0, 5, 9, 12}, lens_tma[] = {200, 128, 0}, table_tma[] = {3, 0, 1, 2, 2, 2};

static void prefill_tma_pages(void)
{
    const icase_t c = {
        "batch_prefill 128-token pages (TMA)", FMHA_FAMILY_BATCH_PREFILL,
        {{P(MODE), FMHA_MODE_GROUP}, {P(BATCH), 3}, {P(NUM_HEADS_Q), 2}, {P(NUM_HEADS_KV), 1}, {P(SEQLEN_Q), 5},
         {P(SEQLEN_KV), 256}, {P(HEAD_DIM_QK), 128}, {P(HEAD_DIM_V), 128}, {P(PAGE_SIZE), 128}},
        "b",
        {IN(Q, H, 3, 12, 2, 128),
         IN(K, H, 4, 4, 128, 1, 128),
         IN(V, H, 4, 4, 128, 1, 128),
         OUT(O, H, 3, 12, 2, 128),
         IDX(CU_SEQLENS_Q, cu_q_tma, 1, 4),
         IDX(SEQLENS_KV, lens_tma, 1, 3),
         IDX(BLOCK_TABLE, table_tma, 2, 3, 2)},
        "fmha_prefill_fp16_hq128_hv128_group_causal_pagevllm_sm90_wgmmaws_m128_n128_w12_s2"};
    const corruption_t bad[] = {
        {T(BLOCK_TABLE), 0, -1, "block_table[0][0] = -1; expected a page index in [0, 4)"},
        {T(BLOCK_TABLE), 2, 4, "block_table[1][0] = 4; expected a page index in [0, 4)"},
        {T(BLOCK_TABLE), 1, 2147483647, "block_table[0][1] = 2147483647; expected a page index in [0, 4)"},
        {T(SEQLENS_KV), 1, 300, "seqlens_kv[1] = 300 exceeds the cache's 256 tokens"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* appendkv, 2 new tokens each, RoPE (16 of 64 dims, per-row q positions) over a
 * contiguous cache of 5 rows x 12 tokens: 3 sequences of 4, 10, 1 tokens in rows 4, 0, 2;
 * the caches and q_rot are the outputs (poisoned before each run). */
static const int32_t lens_app[] = {4, 10, 1};

#define APPEND_PARAMS(b, ...)                                                                                  \
    {{P(BATCH), b}, {P(NUM_HEADS_Q), 4}, {P(NUM_HEADS_KV), 2}, {P(SEQLEN_Q), 2}, {P(SEQLEN_KV), 12},          \
     {P(SEQLEN_KNEW), 2}, {P(HEAD_DIM_QK), 64}, {P(HEAD_DIM_V), 64}, {P(ROTARY_DIM), 16}, __VA_ARGS__}
#define APPEND_INPUTS(b)                                                                                         \
    IN(K_NEW, H, 4, b, 2, 2, 64), IN(V_NEW, H, 4, b, 2, 2, 64), IN(Q, H, 4, b, 2, 4, 64),                     \
        OUT(Q_ROT, H, 4, b, 2, 4, 64), IN(ROTARY_COS, F, 2, 13, 8), IN(ROTARY_SIN, F, 2, 13, 8)

static void appendkv_cache(void)
{
    const icase_t c = {"appendkv cache", FMHA_FAMILY_APPENDKV, APPEND_PARAMS(3, {0, 0}), "b",
                       {APPEND_INPUTS(3),
                        OUT(K, H, 4, 5, 12, 2, 64),
                        OUT(V, H, 4, 5, 12, 2, 64),
                        IDX(SEQLENS_KV, lens_app, 1, 3),
                        IDX(CACHE_BATCH_IDX, rows3, 1, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(SEQLENS_KV), 0, -3, "seqlens_kv[0] = -3; expected >= 0"},
        {T(SEQLENS_KV), 1, 11, "[rule appendkv.capacity] sequence 1 has 11 tokens and appends 2"},
        {T(SEQLENS_KV), 2, 2147483647, "[rule appendkv.capacity] sequence 2 has 2147483647 tokens"},
        {T(CACHE_BATCH_IDX), 0, -1, "cache_batch_idx[0] = -1; expected a cache row in [0, 5)"},
        {T(CACHE_BATCH_IDX), 2, 5, "cache_batch_idx[2] = 5; expected a cache row in [0, 5)"},
        {T(CACHE_BATCH_IDX), 1, 4, "cache_batch_idx[0] and [1] are both 4"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* appendkv through the block table above: 2 sequences of 5 and 1 tokens before the append. */
static const int32_t lens_app2[] = {5, 1};

static void appendkv_table(void)
{
    const icase_t c = {"appendkv block table", FMHA_FAMILY_APPENDKV, APPEND_PARAMS(2, {P(PAGE_SIZE), 3}), "b",
                       {APPEND_INPUTS(2),
                        OUT(K, H, 4, 6, 3, 2, 64),
                        OUT(V, H, 4, 6, 3, 2, 64),
                        IDX(SEQLENS_KV, lens_app2, 1, 2),
                        IDX(BLOCK_TABLE, table, 2, 2, 3)},
         NULL};
    const corruption_t bad[] = {
        {T(BLOCK_TABLE), 1, -1, "block_table[0][1] = -1; expected a page index in [0, 6)"},
        {T(BLOCK_TABLE), 3, 6, "block_table[1][0] = 6; expected a page index in [0, 6)"},
        {T(SEQLENS_KV), 1, 8, "[rule appendkv.capacity] sequence 1 has 8 tokens and appends 2"},
        {T(SEQLENS_KV), 0, -2147483647 - 1, "seqlens_kv[0] = -2147483648; expected >= 0"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

/* appendkv through the CSR lists above, which describe the cache after the append
 * (8 and 3 tokens: 6 and 1 before it). */
static void appendkv_csr(void)
{
    const icase_t c = {"appendkv CSR", FMHA_FAMILY_APPENDKV,
                       APPEND_PARAMS(2, {P(PAGE_SIZE), 3}, {P(KV_LOOKUP), FMHA_KV_LOOKUP_CSR}), "b",
                       {APPEND_INPUTS(2),
                        OUT(K, H, 4, 5, 3, 2, 64),
                        OUT(V, H, 4, 5, 3, 2, 64),
                        IDX(KV_INDPTR, indptr, 1, 3),
                        IDX(KV_INDICES, indices, 1, 4),
                        IDX(KV_LAST_PAGE_LEN, last_len, 1, 2)},
         NULL};
    const corruption_t bad[] = {
        {T(KV_INDPTR), 1, 5, "kv_indptr[1] = 5 exceeds the 4 entries of kv_indices"},
        {T(KV_INDPTR), 2, 2, "kv_indptr is decreasing at 1 (3 then 2)"},
        {T(KV_INDICES), 3, 5, "kv_indices[3] = 5 (sequence 1); expected a page index in [0, 5)"},
        {T(KV_INDICES), 1, -1, "kv_indices[1] = -1 (sequence 0)"},
        {T(KV_LAST_PAGE_LEN), 1, 1, "[rule appendkv.capacity] sequence 1 holds 1 tokens in its CSR pages"},
        {T(KV_LAST_PAGE_LEN), 0, 2147483647, "kv_last_page_len[0] = 2147483647; expected 1..page_size"},
    };
    run_case(&c, bad, (int)(sizeof bad / sizeof bad[0]));
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "cuda";
    const int cpu = strcmp(which, "cpu") == 0;
    if (!cpu && strcmp(which, "cuda") != 0) {
        fprintf(stderr, "usage: gpu_index_safety [cpu|cuda]\n");
        return 2;
    }
    if (fmha_context_create(&ctx, cpu ? FMHA_BACKEND_CPU : FMHA_BACKEND_CUDA, 0)) {
        fprintf(stderr, "no %s context: %s\n", which, fmha_build_info());
        return 2;
    }
    is_host = cpu;
    printf("index safety on %s (%s)\n", which, fmha_context_arch(ctx));
    varlen();
    varlen_bwd();
    kvcache();
    paged_table();
    paged_csr();
    prefill();
    prefill_tma_pages();
    appendkv_cache();
    appendkv_table();
    appendkv_csr();
    fmha_context_destroy(ctx);
    printf("%d passed, %d failed, %d skipped (no kernel on this backend)\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
