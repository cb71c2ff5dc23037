/* SPDX-License-Identifier: MIT */
/*
 * test_ref_kv.c: the CPU backend's KV-cache families against the forward over the same
 * logical keys: fwd_splitkv (+combine), fwd_pagedkv, batch_prefill and appendkv with
 * RoPE, through the harness `fmha run` uses (shuffled rows and pages, garbage in slots
 * no sequence owns, outputs poisoned). Page sizes 1, 3, 7, 16 and 64 against lengths
 * they do not divide; NHD and HND; block tables and CSR; empty sequences; GQA; every
 * mask kind. A failing case prints the `fmha run` line that reproduces it. Also: the
 * data-dependent rules (page indices, capacity, cache rows, rotary positions) refuse
 * bad tables at execute and write nothing.
 */
#include <math.h>
#include <stdlib.h>

#include "runner.h"
#include "testing.h"

static fmha_context_t *ctx;

static int run_case(const fwd_config_t *c, int threads)
{
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = threads};
    return fwd_run_once(c, ctx, &opt, stdout);
}

static fwd_config_t base(fmha_family_t fam)
{
    fwd_config_t c;
    fwd_config_default(&c);
    c.family = fam;
    c.b = 3, c.h = 4, c.h_k = 2, c.s = 5, c.s_k = 70, c.d = 32, c.d_v = 32, c.lse = 1;
    return c;
}

static const int32_t KV_LENS[3] = {70, 0, 33}; /* an empty sequence, lengths no page size divides */

static void test_splitkv_contiguous(void)
{
    const int64_t splits[] = {0, 1, 2, 3, 7, 40}; /* 0: chosen; 40: more splits than key blocks */
    const char *masks[] = {"0", "b", "t", "b:10,0", "t:3,2,2"};
    for (size_t s = 0; s < 6; s++)
        for (size_t m = 0; m < 5; m++) {
            fwd_config_t c = base(FMHA_FAMILY_FWD_SPLITKV);
            c.num_splits = splits[s], c.mask = masks[m], c.s_k = 300, c.s = m % 2 ? 1 : 9;
            CHECK(run_case(&c, 2));
        }
}

/* Splits whose keys are all masked (a window near the diagonal of a long sequence) and
 * the sink logit, which only the combine may add. */
static void test_splitkv_masked_splits_and_sinks(void)
{
    fwd_config_t c = base(FMHA_FAMILY_FWD_SPLITKV);
    c.s = 4, c.s_k = 500, c.num_splits = 8, c.mask = "b:5,0", c.sink = 1;
    CHECK(run_case(&c, 2));
    c.mask = "t:2,1";
    CHECK(run_case(&c, 2));
    c.mask = "b:3,0,4"; /* window plus sink tokens */
    CHECK(run_case(&c, 3));
}

static void test_splitkv_features(void)
{
    const bias_kind_t bias[] = {BIAS_ELEM_BH, BIAS_ELEM_11, BIAS_ALIBI_H, BIAS_ALIBI_BH};
    for (size_t i = 0; i < 4; i++) {
        fwd_config_t c = base(FMHA_FAMILY_FWD_SPLITKV);
        c.num_splits = 3, c.bias = bias[i], c.softcap = i % 2 ? 10.0 : 0.0, c.sink = (int)(i % 2);
        c.dtype = i < 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        CHECK(run_case(&c, 2));
    }
    fwd_config_t c = base(FMHA_FAMILY_FWD_SPLITKV);
    c.num_splits = 4, c.cache_batch_idx = 1, c.seqlens_k = KV_LENS, c.mask = "b";
    CHECK(run_case(&c, 2));
    int32_t lq[3] = {7, 0, 40}, lk[3] = {100, 5, 64};
    c = base(FMHA_FAMILY_FWD_SPLITKV);
    c.mode = FMHA_MODE_GROUP, c.seqlens_q = lq, c.seqlens_k = lk, c.s = 40, c.s_k = 100, c.num_splits = 3, c.mask = "b";
    CHECK(run_case(&c, 2));
}

/* The unsplit forward and every split count give the same output within fp32 rounding
 * (REFERENCE.md): fp32 tensors, compared element by element. */
static void test_splitkv_equals_unsplit(void)
{
    float *first = NULL;
    size_t n = 0;
    const int64_t splits[] = {1, 2, 5, 16};
    for (size_t s = 0; s < 4; s++) {
        fwd_config_t c = base(FMHA_FAMILY_FWD_SPLITKV);
        c.dtype = FMHA_DTYPE_FP32, c.num_splits = splits[s], c.s_k = 1000, c.s = 3, c.mask = "b", c.sink = 1;
        c.iperm = 0, c.operm = 0;
        fwd_case_t *fc;
        char why[256];
        CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
        fmha_plan_t *plan;
        CHECK_STATUS(fmha_plan_create(ctx, fwd_case_problem(fc), NULL, &plan), FMHA_STATUS_SUCCESS);
        CHECK_STATUS(fwd_case_execute(fc, plan), FMHA_STATUS_SUCCESS);
        fwd_check_t r;
        CHECK(fwd_case_check(fc, &r) == 0 && r.pass);
        const float *o = (const float *)fwd_case_output(fc, &n);
        if (!first) {
            first = malloc(n * sizeof(float));
            memcpy(first, o, n * sizeof(float));
        } else {
            double worst = 0;
            for (size_t i = 0; i < n; i++) {
                double d = fabs((double)o[i] - first[i]) / (fabs((double)first[i]) + 1e-3);
                if (d > worst) worst = d;
            }
            if (worst > 4e-7) printf("  %lld splits differ from 1 split by %.3g (relative)\n", (long long)splits[s], worst);
            CHECK(worst <= 4e-7);
        }
        fmha_plan_destroy(plan);
        fwd_case_destroy(fc);
    }
    free(first);
}

static void test_paged_grid(void)
{
    const int64_t pages[] = {1, 3, 7, 16, 64};
    const char *masks[] = {"0", "b", "b:9,0", "t:4,4,2"};
    int n = 0;
    for (size_t pg = 0; pg < 5; pg++)
        for (int layout = 0; layout < 2; layout++)
            for (int lookup = 0; lookup < 2; lookup++)
                for (int group = 0; group < 2; group++) {
                    fwd_config_t c = base(group ? FMHA_FAMILY_BATCH_PREFILL : FMHA_FAMILY_FWD_PAGEDKV);
                    int32_t lq[3] = {5, 1, 12};
                    c.page_size = pages[pg], c.kv_layout = layout, c.kv_lookup = lookup;
                    c.mask = masks[n++ % 4];
                    c.seqlens_k = KV_LENS;
                    c.h_k = (n % 3) ? 2 : 1;
                    if (group) c.mode = FMHA_MODE_GROUP, c.seqlens_q = lq, c.s = 12;
                    CHECK(run_case(&c, 2));
                }
}

static void test_paged_features_and_splits(void)
{
    fwd_config_t c = base(FMHA_FAMILY_FWD_PAGEDKV);
    c.page_size = 5, c.seqlens_k = KV_LENS, c.bias = BIAS_ELEM_1H, c.softcap = 8, c.sink = 1, c.dtype = FMHA_DTYPE_BF16;
    CHECK(run_case(&c, 2));
    c.bias = BIAS_ALIBI_BH, c.kv_layout = 1, c.kv_lookup = 1;
    CHECK(run_case(&c, 2));
    c = base(FMHA_FAMILY_FWD_SPLITKV); /* split-KV over pages, as decode kernels do */
    c.page_size = 16, c.num_splits = 3, c.s = 1, c.s_k = 1000, c.h = 8, c.h_k = 2, c.mask = "b";
    CHECK(run_case(&c, 2));
    c.kv_lookup = 1, c.page_size = 1, c.mask = "0";
    CHECK(run_case(&c, 2));
}

static void test_appendkv(void)
{
    const int64_t rot[] = {0, 16, 32};
    const char *masks[] = {"0", "b", "b:8,0"}; /* q positions: all at seqlen_k, or per row */
    int n = 0;
    for (size_t r = 0; r < 3; r++)
        for (int inter = 0; inter < 2; inter++)
            for (int paged = 0; paged < 3; paged++) { /* contiguous, block table, CSR lists */
                fwd_config_t c = base(paged ? FMHA_FAMILY_FWD_PAGEDKV : FMHA_FAMILY_FWD_SPLITKV);
                int32_t lens[3] = {70, 4, 33};
                c.s = 4, c.s_knew = 4, c.rotary_dim = rot[r], c.rotary_interleaved = inter, c.seqlens_k = lens;
                c.mask = masks[n++ % 3];
                if (paged) c.page_size = 7, c.kv_lookup = paged == 2;
                else c.cache_batch_idx = n % 2;
                if (rot[r] == 0 && inter) continue;
                CHECK(run_case(&c, 2));
            }
    fwd_config_t c = base(FMHA_FAMILY_FWD_SPLITKV); /* rotary over the whole head, d_v != d */
    c.s = 1, c.s_knew = 3, c.rotary_dim = 64, c.d = 64, c.d_v = 32, c.dtype = FMHA_DTYPE_BF16, c.num_splits = 2;
    CHECK(run_case(&c, 2));
}

/* A problem over a tiny paged cache built by hand, to feed bad tables to execute. */
typedef struct tiny {
    fmha_problem_t *p;
    float q[1 * 1 * 1 * 8], o[8], k[4 * 2 * 1 * 8], v[4 * 2 * 1 * 8], kn[1 * 2 * 1 * 8], vn[1 * 2 * 1 * 8];
    int32_t table[1 * 2], lens[1], idx[1], indptr[2], indices[2], last[1];
} tiny_t;

static void tiny_paged(tiny_t *t, fmha_family_t fam)
{
    memset(t, 0, sizeof *t);
    fmha_problem_create(&t->p);
    const int64_t params[][2] = {{FMHA_PARAM_FAMILY, fam},      {FMHA_PARAM_BATCH, 1},       {FMHA_PARAM_NUM_HEADS_Q, 1},
                                 {FMHA_PARAM_NUM_HEADS_KV, 1}, {FMHA_PARAM_SEQLEN_Q, 1},    {FMHA_PARAM_SEQLEN_KV, 4},
                                 {FMHA_PARAM_HEAD_DIM_QK, 8},  {FMHA_PARAM_HEAD_DIM_V, 8},  {FMHA_PARAM_PAGE_SIZE, 2},
                                 {FMHA_PARAM_SEQLEN_KNEW, 2}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        fmha_problem_set_i64(t->p, (fmha_param_t)params[i][0], params[i][1]);
    fmha_problem_set_tensor(t->p, FMHA_TENSOR_K, FMHA_DTYPE_FP32, 4, (int64_t[]){4, 2, 1, 8}, NULL);
    fmha_problem_set_tensor(t->p, FMHA_TENSOR_V, FMHA_DTYPE_FP32, 4, (int64_t[]){4, 2, 1, 8}, NULL);
    fmha_problem_set_tensor(t->p, FMHA_TENSOR_BLOCK_TABLE, FMHA_DTYPE_INT32, 2, (int64_t[]){1, 2}, NULL);
    fmha_problem_set_tensor(t->p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){1}, NULL);
    if (fam == FMHA_FAMILY_APPENDKV) {
        fmha_problem_set_tensor(t->p, FMHA_TENSOR_K_NEW, FMHA_DTYPE_FP32, 4, (int64_t[]){1, 2, 1, 8}, NULL);
        fmha_problem_set_tensor(t->p, FMHA_TENSOR_V_NEW, FMHA_DTYPE_FP32, 4, (int64_t[]){1, 2, 1, 8}, NULL);
    } else {
        fmha_problem_set_tensor(t->p, FMHA_TENSOR_Q, FMHA_DTYPE_FP32, 4, (int64_t[]){1, 1, 1, 8}, NULL);
        fmha_problem_set_tensor(t->p, FMHA_TENSOR_O, FMHA_DTYPE_FP32, 4, (int64_t[]){1, 1, 1, 8}, NULL);
    }
    t->table[0] = 2, t->table[1] = 0;
}

static fmha_status_t tiny_run(tiny_t *t, char *err, size_t len)
{
    fmha_plan_t *plan;
    fmha_status_t st = fmha_plan_create(ctx, t->p, NULL, &plan);
    if (st) {
        snprintf(err, len, "%s", fmha_context_last_error(ctx));
        return st;
    }
    size_t ws = 0;
    fmha_plan_workspace_size(plan, &ws);
    void *w = malloc(ws + 1);
    fmha_tensor_ptr_t ptrs[] = {{FMHA_TENSOR_K, t->k}, {FMHA_TENSOR_V, t->v}, {FMHA_TENSOR_BLOCK_TABLE, t->table},
                                {FMHA_TENSOR_SEQLENS_KV, t->lens}, {FMHA_TENSOR_Q, t->q}, {FMHA_TENSOR_O, t->o},
                                {FMHA_TENSOR_K_NEW, t->kn}, {FMHA_TENSOR_V_NEW, t->vn}, {FMHA_TENSOR_KV_INDPTR, t->indptr},
                                {FMHA_TENSOR_KV_INDICES, t->indices}, {FMHA_TENSOR_KV_LAST_PAGE_LEN, t->last}};
    fmha_tensor_ptr_t use[11];
    size_t n = 0;
    for (size_t i = 0; i < 11; i++)
        if (fmha_problem_has_tensor(t->p, ptrs[i].role)) use[n++] = ptrs[i];
    st = fmha_plan_execute(plan, use, n, w, ws, NULL);
    snprintf(err, len, "%s", fmha_plan_last_error(plan));
    free(w);
    fmha_plan_destroy(plan);
    return st;
}

static void test_data_rules(void)
{
    tiny_t t;
    char err[1024];
    for (size_t i = 0; i < sizeof t.k / sizeof t.k[0]; i++) t.k[i] = t.v[i] = 7.0f;

    tiny_paged(&t, FMHA_FAMILY_FWD_PAGEDKV);
    t.lens[0] = 3, t.table[1] = 4; /* page 4 of 4 pages */
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule paged.index] block_table[0][1] = 4; expected a page index in [0, 4)");
    t.lens[0] = 2; /* the bad entry is past the sequence: never read, accepted */
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_SUCCESS);
    t.lens[0] = 5;
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule cache.seqlens] seqlens_kv[0] = 5 exceeds the cache's 4 tokens");
    fmha_problem_destroy(t.p);

    tiny_paged(&t, FMHA_FAMILY_APPENDKV);
    float before[sizeof t.k / sizeof t.k[0]];
    memcpy(before, t.k, sizeof before);
    t.lens[0] = 3; /* 3 + 2 new > 4 = 2 pages x 2 */
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule appendkv.capacity] sequence 0 has 3 tokens and appends 2; the cache holds 4");
    CHECK(memcmp(before, t.k, sizeof before) == 0); /* nothing written */
    t.lens[0] = 2;
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_SUCCESS);
    CHECK(t.k[0 * 16 + 0] == t.kn[0] && t.k[0 * 16 + 8] == t.kn[8]); /* tokens 2, 3 -> page table[1] = 0 */
    fmha_problem_destroy(t.p);

    /* CSR page lists */
    tiny_paged(&t, FMHA_FAMILY_FWD_PAGEDKV);
    fmha_problem_clear_tensor(t.p, FMHA_TENSOR_BLOCK_TABLE);
    fmha_problem_clear_tensor(t.p, FMHA_TENSOR_SEQLENS_KV);
    fmha_problem_set_i64(t.p, FMHA_PARAM_KV_LOOKUP, FMHA_KV_LOOKUP_CSR);
    fmha_problem_set_tensor(t.p, FMHA_TENSOR_KV_INDPTR, FMHA_DTYPE_INT32, 1, (int64_t[]){2}, NULL);
    fmha_problem_set_tensor(t.p, FMHA_TENSOR_KV_INDICES, FMHA_DTYPE_INT32, 1, (int64_t[]){2}, NULL);
    fmha_problem_set_tensor(t.p, FMHA_TENSOR_KV_LAST_PAGE_LEN, FMHA_DTYPE_INT32, 1, (int64_t[]){1}, NULL);
    t.indptr[0] = 0, t.indptr[1] = 2, t.indices[0] = 1, t.indices[1] = 3, t.last[0] = 1;
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_SUCCESS);
    t.last[0] = 3; /* pages hold 2 tokens */
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule paged.csr] kv_last_page_len[0] = 3; expected 1..page_size");
    t.last[0] = 2, t.indptr[1] = 3;
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule paged.csr] kv_indptr[1] = 3 exceeds the 2 entries of kv_indices");
    t.indptr[1] = 2, t.indices[1] = -1;
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule paged.index] kv_indices[1] = -1 (sequence 0); expected a page index in [0, 4)");
    t.indices[1] = 0, t.indptr[0] = 1, t.indptr[1] = 0;
    CHECK_STATUS(tiny_run(&t, err, sizeof err), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(err, "[rule paged.csr] kv_indptr is decreasing at 0");
    fmha_problem_destroy(t.p);
}

int main(void)
{
    if (fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0)) return 1;
    RUN(test_splitkv_contiguous);
    RUN(test_splitkv_masked_splits_and_sinks);
    RUN(test_splitkv_features);
    RUN(test_splitkv_equals_unsplit);
    RUN(test_paged_grid);
    RUN(test_paged_features_and_splits);
    RUN(test_appendkv);
    RUN(test_data_rules);
    fmha_context_destroy(ctx);
    TEST_MAIN_END();
}
