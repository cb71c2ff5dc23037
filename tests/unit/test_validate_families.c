/* SPDX-License-Identifier: MIT */
/*
 * test_validate_families.c: one test per validation rule of the families beyond the
 * forward (fwd_splitkv, fwd_pagedkv, batch_prefill, appendkv, bwd). Each starts from a
 * valid problem of its family (checked valid first, so a rule that fires on everything
 * is caught), breaks one thing, and checks the status and the rule id in the message.
 */
#include <stdlib.h>

#include "testing.h"

enum { B = 2, HQ = 4, HK = 2, SQ = 3, SK = 40, D = 32, PAGES = 12, PAGE = 4, SNEW = 2 };

static void set_i(fmha_problem_t *p, fmha_param_t k, int64_t v) { CHECK_STATUS(fmha_problem_set_i64(p, k, v), FMHA_STATUS_SUCCESS); }

static void set_t(fmha_problem_t *p, fmha_tensor_role_t r, fmha_dtype_t dt, int rank, const int64_t *dims)
{
    CHECK_STATUS(fmha_problem_set_tensor(p, r, dt, rank, dims, NULL), FMHA_STATUS_SUCCESS);
}

static fmha_problem_t *common(fmha_family_t fam)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    set_i(p, FMHA_PARAM_FAMILY, fam);
    set_i(p, FMHA_PARAM_BATCH, B);
    set_i(p, FMHA_PARAM_NUM_HEADS_Q, HQ);
    set_i(p, FMHA_PARAM_NUM_HEADS_KV, HK);
    set_i(p, FMHA_PARAM_SEQLEN_Q, SQ);
    set_i(p, FMHA_PARAM_SEQLEN_KV, SK);
    set_i(p, FMHA_PARAM_HEAD_DIM_QK, D);
    set_i(p, FMHA_PARAM_HEAD_DIM_V, D);
    return p;
}

/* fwd_pagedkv over a block table, NHD. */
static fmha_problem_t *paged(void)
{
    fmha_problem_t *p = common(FMHA_FAMILY_FWD_PAGEDKV);
    set_i(p, FMHA_PARAM_PAGE_SIZE, PAGE);
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, D});
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, D});
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP16, 4, (int64_t[]){PAGES, PAGE, HK, D});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP16, 4, (int64_t[]){PAGES, PAGE, HK, D});
    set_t(p, FMHA_TENSOR_BLOCK_TABLE, FMHA_DTYPE_INT32, 2, (int64_t[]){B, 10});
    set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    return p;
}

static fmha_problem_t *csr(void)
{
    fmha_problem_t *p = paged();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_BLOCK_TABLE);
    fmha_problem_clear_tensor(p, FMHA_TENSOR_SEQLENS_KV);
    set_i(p, FMHA_PARAM_KV_LOOKUP, FMHA_KV_LOOKUP_CSR);
    set_t(p, FMHA_TENSOR_KV_INDPTR, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1});
    set_t(p, FMHA_TENSOR_KV_INDICES, FMHA_DTYPE_INT32, 1, (int64_t[]){7});
    set_t(p, FMHA_TENSOR_KV_LAST_PAGE_LEN, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    return p;
}

/* fwd_splitkv over a contiguous cache with shuffled rows. */
static fmha_problem_t *split(void)
{
    fmha_problem_t *p = common(FMHA_FAMILY_FWD_SPLITKV);
    set_i(p, FMHA_PARAM_NUM_SPLITS, 3);
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_BF16, 4, (int64_t[]){B, SQ, HQ, D});
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_BF16, 4, (int64_t[]){B, SQ, HQ, D});
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_BF16, 4, (int64_t[]){5, SK, HK, D});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_BF16, 4, (int64_t[]){5, SK, HK, D});
    set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    set_t(p, FMHA_TENSOR_CACHE_BATCH_IDX, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    return p;
}

/* appendkv into a contiguous cache, rotating q. */
static fmha_problem_t *append(void)
{
    fmha_problem_t *p = common(FMHA_FAMILY_APPENDKV);
    set_i(p, FMHA_PARAM_SEQLEN_KNEW, SNEW);
    set_i(p, FMHA_PARAM_ROTARY_DIM, 16);
    set_t(p, FMHA_TENSOR_K_NEW, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SNEW, HK, D});
    set_t(p, FMHA_TENSOR_V_NEW, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SNEW, HK, D});
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HK, D});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HK, D});
    set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    set_t(p, FMHA_TENSOR_ROTARY_COS, FMHA_DTYPE_FP32, 2, (int64_t[]){64, 8});
    set_t(p, FMHA_TENSOR_ROTARY_SIN, FMHA_DTYPE_FP32, 2, (int64_t[]){64, 8});
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, D});
    set_t(p, FMHA_TENSOR_Q_ROT, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, D});
    return p;
}

static fmha_problem_t *bwd(void)
{
    fmha_problem_t *p = common(FMHA_FAMILY_BWD);
    const fmha_tensor_role_t qs[] = {FMHA_TENSOR_Q, FMHA_TENSOR_O, FMHA_TENSOR_DO, FMHA_TENSOR_DQ};
    const fmha_tensor_role_t ks[] = {FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_DK, FMHA_TENSOR_DV};
    for (int i = 0; i < 4; i++) {
        set_t(p, qs[i], FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, D});
        set_t(p, ks[i], FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HK, D});
    }
    set_t(p, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 3, (int64_t[]){B, HQ, SQ});
    return p;
}

static void expect(fmha_problem_t *p, const char *rule)
{
    char why[1024];
    CHECK_STATUS(fmha_problem_validate(p, why, sizeof why), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(why, rule);
    fmha_problem_destroy(p);
}

static void test_valid_problems(void)
{
    fmha_problem_t *(*make[])(void) = {paged, csr, split, append, bwd};
    for (size_t i = 0; i < sizeof make / sizeof make[0]; i++) {
        fmha_problem_t *p = make[i]();
        char why[1024];
        CHECK_STATUS(fmha_problem_validate(p, why, sizeof why), FMHA_STATUS_SUCCESS);
        if (why[0]) printf("  problem %zu: %s\n", i, why);
        fmha_problem_destroy(p);
    }
    fmha_problem_t *p = paged(); /* batch_prefill: ragged q over pages */
    set_i(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_BATCH_PREFILL);
    set_i(p, FMHA_PARAM_MODE, FMHA_MODE_GROUP);
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 3, (int64_t[]){5, HQ, D});
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 3, (int64_t[]){5, HQ, D});
    set_t(p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1});
    CHECK_STATUS(fmha_problem_validate(p, NULL, 0), FMHA_STATUS_SUCCESS);
    set_i(p, FMHA_PARAM_KV_LAYOUT, FMHA_KV_LAYOUT_HND); /* HND wants [pages, Hk, page, D] */
    expect(p, "[rule tensor.shape] tensor k has dims [12, 4, 2, 32]; dim 1 is 4, expected 2");
}

static void test_rule_mode_family(void)
{
    fmha_problem_t *p = paged();
    set_i(p, FMHA_PARAM_MODE, FMHA_MODE_GROUP);
    expect(p, "[rule mode.family] fwd_pagedkv takes batch-mode queries");
    p = paged();
    set_i(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_BATCH_PREFILL);
    expect(p, "[rule mode.family] batch_prefill takes ragged queries");
    p = append();
    set_i(p, FMHA_PARAM_MODE, FMHA_MODE_GROUP);
    expect(p, "[rule mode.family] appendkv takes batch-mode tensors");
}

static void test_rule_paged_page_size(void)
{
    fmha_problem_t *p = paged();
    set_i(p, FMHA_PARAM_PAGE_SIZE, 0);
    expect(p, "[rule paged.page_size] family fwd_pagedkv reads a paged cache; page_size is 0");
    p = split();
    set_t(p, FMHA_TENSOR_BLOCK_TABLE, FMHA_DTYPE_INT32, 2, (int64_t[]){B, 4});
    expect(p, "[rule paged.page_size] tensor block_table is set but page_size is 0");
    p = split();
    set_i(p, FMHA_PARAM_KV_LAYOUT, 1);
    expect(p, "[rule paged.page_size] kv_layout or kv_lookup is set but page_size is 0");
}

static void test_rule_splits_family(void)
{
    fmha_problem_t *p = paged();
    set_i(p, FMHA_PARAM_NUM_SPLITS, 4);
    expect(p, "[rule splits.family] num_splits is 4 but family fwd_pagedkv does not split");
}

static void test_rule_paged_tensor(void)
{
    fmha_problem_t *p = paged();
    set_i(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_FWD_SPLITKV);
    set_t(p, FMHA_TENSOR_CACHE_BATCH_IDX, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect(p, "[rule paged.tensor] tensor cache_batch_idx is set with a paged cache");
}

static void test_rule_paged_lookup(void)
{
    fmha_problem_t *p = paged();
    set_t(p, FMHA_TENSOR_KV_INDPTR, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1});
    expect(p, "[rule paged.lookup] tensor kv_indptr is set but kv_lookup is 0");
    p = csr();
    set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect(p, "[rule paged.lookup] tensor seqlens_kv is set but kv_lookup is 1");
    p = paged();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_BLOCK_TABLE);
    expect(p, "[rule tensor.required] tensor block_table is not set");
}

static void test_rule_appendkv(void)
{
    fmha_problem_t *p = append();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_Q_ROT);
    expect(p, "[rule appendkv.q] q is set without q_rot");
    p = append();
    set_i(p, FMHA_PARAM_ROTARY_DIM, 0);
    fmha_problem_clear_tensor(p, FMHA_TENSOR_ROTARY_COS);
    fmha_problem_clear_tensor(p, FMHA_TENSOR_ROTARY_SIN);
    expect(p, "[rule appendkv.q] q is set but rotary_dim is 0");
    p = append();
    set_i(p, FMHA_PARAM_PAGE_SIZE, PAGE);
    set_i(p, FMHA_PARAM_KV_LOOKUP, FMHA_KV_LOOKUP_CSR);
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP16, 4, (int64_t[]){PAGES, PAGE, HK, D});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP16, 4, (int64_t[]){PAGES, PAGE, HK, D});
    fmha_problem_clear_tensor(p, FMHA_TENSOR_SEQLENS_KV);
    set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    /* CSR lists give the lengths (after the append): seqlens_kv is refused with them */
    expect(p, "[rule paged.lookup] tensor seqlens_kv is set but kv_lookup is 1");
    p = append();
    set_i(p, FMHA_PARAM_PAGE_SIZE, PAGE);
    set_t(p, FMHA_TENSOR_CACHE_BATCH_IDX, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect(p, "[rule appendkv.cache_batch_idx] cache_batch_idx is set with a paged cache");
    p = append();
    set_i(p, FMHA_PARAM_SEQLEN_KNEW, 3); /* k_new holds 2 */
    expect(p, "[rule tensor.shape] tensor k_new");
}

static void test_rule_rope_dim(void)
{
    fmha_problem_t *p = append();
    set_i(p, FMHA_PARAM_ROTARY_DIM, 24);
    expect(p, "[rule rope.dim] rotary_dim is 24; expected a multiple of 16 up to head_dim_qk (32)");
    p = append();
    set_i(p, FMHA_PARAM_ROTARY_DIM, 48);
    expect(p, "[rule rope.dim] rotary_dim is 48");
    p = append();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_Q);
    fmha_problem_clear_tensor(p, FMHA_TENSOR_Q_ROT);
    set_i(p, FMHA_PARAM_ROTARY_DIM, 0);
    expect(p, "[rule rope.dim] rotary_cos/rotary_sin are set but rotary_dim is 0");
    p = append();
    set_t(p, FMHA_TENSOR_ROTARY_SIN, FMHA_DTYPE_FP32, 2, (int64_t[]){63, 8});
    expect(p, "[rule tensor.shape] tensor rotary_sin");
}

static void test_rule_cache_seqlens(void)
{
    fmha_problem_t *p = split();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_SEQLENS_KV);
    expect(p, "[rule cache.seqlens] cache_batch_idx is set without seqlens_kv");
}

static void test_rule_dropout_family(void)
{
    fmha_problem_t *p = split();
    CHECK_STATUS(fmha_problem_set_f64(p, FMHA_PARAM_DROPOUT_P, 0.1), FMHA_STATUS_SUCCESS);
    expect(p, "[rule dropout.family] dropout_p is 0.1 but family fwd_splitkv is an inference family");
}

static void test_rules_bwd(void)
{
    fmha_problem_t *p = bwd();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_DO);
    expect(p, "[rule tensor.required] tensor do is not set");
    p = bwd();
    set_t(p, FMHA_TENSOR_DBIAS, FMHA_DTYPE_FP16, 4, (int64_t[]){1, HQ, SQ, SK});
    expect(p, "[rule bwd.dbias] dbias is set without bias");
    p = bwd();
    set_t(p, FMHA_TENSOR_BIAS, FMHA_DTYPE_FP32, 4, (int64_t[]){1, HQ, SQ, SK});
    set_t(p, FMHA_TENSOR_DBIAS, FMHA_DTYPE_FP32, 4, (int64_t[]){B, HQ, SQ, SK});
    expect(p, "[rule tensor.shape] tensor dbias");
    p = bwd();
    set_t(p, FMHA_TENSOR_DSINK, FMHA_DTYPE_FP32, 1, (int64_t[]){HQ});
    expect(p, "[rule bwd.dsink] dsink is set without sink");
    p = bwd();
    set_t(p, FMHA_TENSOR_DK, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HQ, D});
    expect(p, "[rule tensor.shape] tensor dk has dims [2, 40, 4, 32]");
    p = bwd();
    set_t(p, FMHA_TENSOR_DQ, FMHA_DTYPE_BF16, 4, (int64_t[]){B, SQ, HQ, D});
    expect(p, "[rule dtype.supported] tensor dq has dtype bf16; expected fp16");
    p = bwd();
    set_t(p, FMHA_TENSOR_BLOCK_TABLE, FMHA_DTYPE_INT32, 2, (int64_t[]){B, 3});
    expect(p, "[rule family.tensor] tensor block_table is set but family bwd does not use it");
}

int main(void)
{
    RUN(test_valid_problems);
    RUN(test_rule_mode_family);
    RUN(test_rule_paged_page_size);
    RUN(test_rule_splits_family);
    RUN(test_rule_paged_tensor);
    RUN(test_rule_paged_lookup);
    RUN(test_rule_appendkv);
    RUN(test_rule_rope_dim);
    RUN(test_rule_cache_seqlens);
    RUN(test_rule_dropout_family);
    RUN(test_rules_bwd);
    TEST_MAIN_END();
}
