/* SPDX-License-Identifier: MIT */
/*
 * test_validate.c: one test per validation rule of the forward family. Each starts from
 * a valid problem, breaks one thing, and checks the status and the rule id in the
 * message; the valid problem itself must validate (so a rule that fires on everything
 * would be caught).
 */
#include <stdlib.h>

#include "testing.h"

enum { B = 2, HQ = 8, HK = 2, SQ = 33, SK = 65, DQK = 64, DV = 32 };

static void set_i(fmha_problem_t *p, fmha_param_t k, int64_t v) { CHECK_STATUS(fmha_problem_set_i64(p, k, v), FMHA_STATUS_SUCCESS); }
static void set_f(fmha_problem_t *p, fmha_param_t k, double v) { CHECK_STATUS(fmha_problem_set_f64(p, k, v), FMHA_STATUS_SUCCESS); }

static void set_t(fmha_problem_t *p, fmha_tensor_role_t r, fmha_dtype_t dt, int rank, const int64_t *dims)
{
    CHECK_STATUS(fmha_problem_set_tensor(p, r, dt, rank, dims, NULL), FMHA_STATUS_SUCCESS);
}

static fmha_problem_t *valid_batch(void)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    set_i(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_FWD);
    set_i(p, FMHA_PARAM_BATCH, B);
    set_i(p, FMHA_PARAM_NUM_HEADS_Q, HQ);
    set_i(p, FMHA_PARAM_NUM_HEADS_KV, HK);
    set_i(p, FMHA_PARAM_SEQLEN_Q, SQ);
    set_i(p, FMHA_PARAM_SEQLEN_KV, SK);
    set_i(p, FMHA_PARAM_HEAD_DIM_QK, DQK);
    set_i(p, FMHA_PARAM_HEAD_DIM_V, DV);
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, DQK});
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HK, DQK});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HK, DV});
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, DV});
    return p;
}

static fmha_problem_t *valid_group(void)
{
    fmha_problem_t *p = valid_batch();
    set_i(p, FMHA_PARAM_MODE, FMHA_MODE_GROUP);
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 3, (int64_t[]){50, HQ, DQK});
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP16, 3, (int64_t[]){90, HK, DQK});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP16, 3, (int64_t[]){90, HK, DV});
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 3, (int64_t[]){50, HQ, DV});
    set_t(p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1});
    set_t(p, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1});
    return p;
}

/* Validate and expect status + rule id; also checks the why buffer and the handle agree. */
static void expect_rule(fmha_problem_t *p, fmha_status_t want, const char *rule)
{
    char why[1024];
    fmha_status_t st = fmha_problem_validate(p, why, sizeof why);
    CHECK_STATUS(st, want);
    CHECK_CONTAINS(why, rule);
    CHECK(strcmp(why, fmha_problem_last_error(p)) == 0);
    fmha_problem_destroy(p);
}

static void expect_valid(fmha_problem_t *p)
{
    char why[1024];
    fmha_status_t st = fmha_problem_validate(p, why, sizeof why);
    CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
    if (st) printf("  why: %s\n", why);
    CHECK(why[0] == '\0');
    fmha_problem_destroy(p);
}

static void test_valid_problems_pass(void)
{
    expect_valid(valid_batch());
    expect_valid(valid_group());
    fmha_problem_t *p = valid_batch(); /* every optional tensor at once, broadcast bias */
    set_t(p, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 3, (int64_t[]){B, HQ, SQ});
    set_t(p, FMHA_TENSOR_BIAS, FMHA_DTYPE_FP32, 4, (int64_t[]){1, HQ, SQ, SK});
    set_t(p, FMHA_TENSOR_SINK, FMHA_DTYPE_FP32, 1, (int64_t[]){HQ});
    set_t(p, FMHA_TENSOR_DROPOUT_MASK, FMHA_DTYPE_UINT8, 4, (int64_t[]){B, HQ, SQ, SK});
    expect_valid(p);
    p = valid_group();
    set_t(p, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 2, (int64_t[]){HQ, 50});
    set_t(p, FMHA_TENSOR_ALIBI_SLOPES, FMHA_DTYPE_FP32, 2, (int64_t[]){B, HQ});
    set_t(p, FMHA_TENSOR_SEQUSED_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect_valid(p);
}

static void test_rule_family_tensor(void)
{
    fmha_problem_t *p = valid_batch();
    set_t(p, FMHA_TENSOR_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule family.tensor] tensor seqlens_kv is set but family fwd");
}

static void test_rule_dims_positive(void)
{
    const fmha_param_t dims[] = {FMHA_PARAM_BATCH, FMHA_PARAM_NUM_HEADS_Q, FMHA_PARAM_NUM_HEADS_KV,
                                 FMHA_PARAM_SEQLEN_Q, FMHA_PARAM_SEQLEN_KV, FMHA_PARAM_HEAD_DIM_QK,
                                 FMHA_PARAM_HEAD_DIM_V};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        fmha_problem_t *p = valid_batch();
        set_i(p, dims[i], 0);
        fmha_param_info_t info = {.struct_size = sizeof info};
        fmha_param_info(dims[i], &info);
        char want[128];
        snprintf(want, sizeof want, "[rule dims.positive] %s is 0", info.name);
        expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, want);
    }
    fmha_problem_t *p; /* a fresh problem: nothing set */
    fmha_problem_create(&p);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dims.positive] batch is 0");
}

static void test_rule_heads_gqa(void)
{
    fmha_problem_t *p = valid_batch();
    set_i(p, FMHA_PARAM_NUM_HEADS_KV, 3);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule heads.gqa] num_heads_q (8) must be a multiple of num_heads_kv (3)");
}

static void test_rule_hdim_shape(void)
{
    fmha_problem_t *p = valid_batch();
    set_i(p, FMHA_PARAM_HEAD_DIM_QK, 60);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule hdim.shape] head_dim_qk is 60; expected a multiple of 8 up to 256");
    p = valid_batch();
    set_i(p, FMHA_PARAM_HEAD_DIM_V, 264);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule hdim.shape] head_dim_v is 264");
}

static void test_rule_tensor_required(void)
{
    const fmha_tensor_role_t need[] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (size_t i = 0; i < 4; i++) {
        fmha_problem_t *p = valid_batch();
        fmha_problem_clear_tensor(p, need[i]);
        char want[64];
        snprintf(want, sizeof want, "tensor %s is not set", fmha_tensor_role_name(need[i]));
        CHECK(!fmha_problem_has_tensor(p, need[i]));
        char why[512];
        CHECK_STATUS(fmha_problem_validate(p, why, sizeof why), FMHA_STATUS_INVALID_PROBLEM);
        CHECK_CONTAINS(why, "[rule tensor.required]");
        CHECK_CONTAINS(why, want);
        fmha_problem_destroy(p);
    }
    fmha_problem_t *p = valid_group();
    fmha_problem_clear_tensor(p, FMHA_TENSOR_CU_SEQLENS_KV);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule tensor.required] tensor cu_seqlens_kv is not set");
}

static void test_rule_dtype_supported(void)
{
    fmha_problem_t *p = valid_batch();
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_INT32, 4, (int64_t[]){B, SQ, HQ, DQK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dtype.supported] tensor q has dtype int32");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_BF16, 4, (int64_t[]){B, SK, HK, DQK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor k has dtype bf16; expected fp16, the dtype of q");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_LSE, FMHA_DTYPE_FP16, 3, (int64_t[]){B, HQ, SQ});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor lse has dtype fp16; expected fp32");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_BIAS, FMHA_DTYPE_BF16, 4, (int64_t[]){B, HQ, SQ, SK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor bias has dtype bf16; expected fp16 or fp32");
    p = valid_group();
    set_t(p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_FP32, 1, (int64_t[]){B + 1});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor cu_seqlens_q has dtype fp32; expected int32");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_DROPOUT_MASK, FMHA_DTYPE_INT32, 4, (int64_t[]){B, HQ, SQ, SK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dtype.supported] tensor dropout_mask");
}

/* A valid fp8 forward: q, k, v in e4m3, o in bf16, descales [1], [B, Hk] and none. */
static fmha_problem_t *valid_fp8(void)
{
    fmha_problem_t *p = valid_batch();
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP8_E4M3, 4, (int64_t[]){B, SQ, HQ, DQK});
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP8_E4M3, 4, (int64_t[]){B, SK, HK, DQK});
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP8_E4M3, 4, (int64_t[]){B, SK, HK, DV});
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_BF16, 4, (int64_t[]){B, SQ, HQ, DV});
    set_t(p, FMHA_TENSOR_Q_DESCALE, FMHA_DTYPE_FP32, 1, (int64_t[]){1});
    set_t(p, FMHA_TENSOR_K_DESCALE, FMHA_DTYPE_FP32, 2, (int64_t[]){B, HK});
    return p;
}

static void test_rules_fp8(void)
{
    fmha_problem_t *p = valid_fp8();
    expect_valid(p);
    p = valid_fp8();
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SQ, HQ, DV});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor o has dtype fp16; expected bf16 (fp8e4m3 inputs give a bf16 output)");
    p = valid_fp8();
    set_t(p, FMHA_TENSOR_V, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK, HK, DV});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor v has dtype fp16; expected fp8e4m3, the dtype of q");
    p = valid_fp8();
    set_t(p, FMHA_TENSOR_V_DESCALE, FMHA_DTYPE_FP32, 2, (int64_t[]){HK, B + 1});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor v_descale");
    p = valid_fp8();
    set_t(p, FMHA_TENSOR_V_DESCALE, FMHA_DTYPE_FP16, 1, (int64_t[]){1});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor v_descale has dtype fp16; expected fp32");
    p = valid_fp8();
    set_t(p, FMHA_TENSOR_ALIBI_SLOPES, FMHA_DTYPE_FP32, 1, (int64_t[]){HQ});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dtype.fp8_features] tensor alibi_slopes is set");
    p = valid_fp8();
    set_f(p, FMHA_PARAM_DROPOUT_P, 0.1);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dtype.fp8_features] dropout is asked for (dropout_p 0.1)");
    p = valid_batch(); /* a descale without fp8 inputs would be ignored: refused */
    set_t(p, FMHA_TENSOR_K_DESCALE, FMHA_DTYPE_FP32, 1, (int64_t[]){1});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dtype.descale] tensor k_descale is set but q is fp16");
    p = valid_fp8(); /* fp8 is the forward's */
    fmha_problem_clear_tensor(p, FMHA_TENSOR_Q_DESCALE);
    fmha_problem_clear_tensor(p, FMHA_TENSOR_K_DESCALE);
    set_i(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_FWD_SPLITKV);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule dtype.fp8] tensor q has dtype fp8e4m3, which family fwd_splitkv");
}

static void test_rule_tensor_shape(void)
{
    fmha_problem_t *p = valid_batch();
    set_t(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 3, (int64_t[]){B, SQ, HQ});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule tensor.shape] tensor q has rank 3");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_K, FMHA_DTYPE_FP16, 4, (int64_t[]){B, SK + 1, HK, DQK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "dim 1 is 66, expected 65");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_BIAS, FMHA_DTYPE_FP16, 4, (int64_t[]){3, HQ, SQ, SK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "dim 0 is 3, expected 2 or 1");
    p = valid_batch();
    set_t(p, FMHA_TENSOR_ALIBI_SLOPES, FMHA_DTYPE_FP32, 1, (int64_t[]){HK});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor alibi_slopes");
    p = valid_group(); /* o must have q's token count */
    set_t(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 3, (int64_t[]){49, HQ, DV});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor o has dims [49, 8, 32]; dim 0 is 49, expected 50");
    p = valid_group();
    set_t(p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "tensor cu_seqlens_q");
}

static void test_rule_tensor_strides(void)
{
    fmha_problem_t *p = valid_batch();
    /* head stride 32 < head dim 64: two heads would share elements */
    int64_t dims[4] = {B, SQ, HQ, DQK}, str[4] = {SQ * HQ * 32, HQ * 32, 32, 1};
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, dims, str), FMHA_STATUS_SUCCESS);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule tensor.strides] tensor q: stride 32 of dim 2");
    p = valid_batch(); /* stride 0 on a dim of extent > 1 */
    int64_t str0[4] = {0, HQ * DQK, DQK, 1};
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, dims, str0);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule tensor.strides]");
    p = valid_batch(); /* negative strides are refused when set */
    int64_t neg[4] = {SQ * HQ * DQK, HQ * DQK, DQK, -1};
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, dims, neg), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_problem_last_error(p), "[rule tensor.strides] tensor q: strides[3] = -1 is negative");
    fmha_problem_destroy(p);
    p = valid_group(); /* an empty tensor has no elements to overlap, whatever its strides */
    int64_t empty[3] = {0, HQ, DQK}, zero[3] = {DQK, 0, 1};
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 3, empty, zero);
    fmha_problem_set_tensor(p, FMHA_TENSOR_O, FMHA_DTYPE_FP16, 3, (int64_t[]){0, HQ, DV}, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 2, (int64_t[]){HQ, 0}, NULL);
    expect_valid(p);
    p = valid_batch(); /* padded and permuted strides are fine (BHSD with a gap) */
    int64_t bhsd[4] = {HQ * SQ * 72, 72, SQ * 72, 1};
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, dims, bhsd);
    expect_valid(p);
}

static void test_rule_tensor_extent(void)
{
    fmha_problem_t *p = valid_batch();
    int64_t dims[4] = {B, SQ, HQ, DQK}, str[4] = {INT64_C(1) << 60, HQ * DQK, DQK, 1};
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, dims, str);
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule tensor.extent]");
    /* packed strides of dims whose product overflows int64 (found by tests/fuzz/fuzz_problem):
     * refused when set, the tensor left as it was */
    fmha_problem_t *q = NULL;
    CHECK_STATUS(fmha_problem_create(&q), FMHA_STATUS_SUCCESS);
    int64_t huge[4] = {2, INT64_C(5392485283202588039), 5512, 8};
    CHECK_STATUS(fmha_problem_set_tensor(q, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 4, huge, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_problem_last_error(q), "[rule tensor.extent] tensor q: its dims from 1 inward");
    CHECK(!fmha_problem_has_tensor(q, FMHA_TENSOR_Q));
    fmha_problem_destroy(q);
}

static void test_rule_bias_exclusive(void)
{
    fmha_problem_t *p = valid_batch();
    set_t(p, FMHA_TENSOR_BIAS, FMHA_DTYPE_FP16, 4, (int64_t[]){B, HQ, SQ, SK});
    set_t(p, FMHA_TENSOR_ALIBI_SLOPES, FMHA_DTYPE_FP32, 1, (int64_t[]){HQ});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule bias.exclusive]");
}

static void test_rule_mode_varlen(void)
{
    fmha_problem_t *p = valid_batch();
    set_t(p, FMHA_TENSOR_SEQUSED_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B});
    expect_rule(p, FMHA_STATUS_INVALID_PROBLEM, "[rule mode.varlen] tensor seqused_kv is set in batch mode");
}

static void test_rule_tensor_set_arguments(void)
{
    fmha_problem_t *p = valid_batch();
    int64_t dims[7] = {1, 1, 1, 1, 1, 1, 1};
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 7, dims, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_problem_last_error(p), "rank 7; expected 1..6");
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 0, dims, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, (fmha_dtype_t)42, 1, dims, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_problem_last_error(p), "unknown dtype 42");
    CHECK_STATUS(fmha_problem_set_tensor(p, (fmha_tensor_role_t)99, FMHA_DTYPE_FP16, 1, dims, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_problem_last_error(p), "unknown tensor role 99");
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 1, NULL, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    int64_t negd[1] = {-4};
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP16, 1, negd, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    expect_valid(p); /* failed sets left q as it was */
}

int main(void)
{
    RUN(test_valid_problems_pass);
    RUN(test_rule_family_tensor);
    RUN(test_rule_dims_positive);
    RUN(test_rule_heads_gqa);
    RUN(test_rule_hdim_shape);
    RUN(test_rule_tensor_required);
    RUN(test_rule_dtype_supported);
    RUN(test_rules_fp8);
    RUN(test_rule_tensor_shape);
    RUN(test_rule_tensor_strides);
    RUN(test_rule_tensor_extent);
    RUN(test_rule_bias_exclusive);
    RUN(test_rule_mode_varlen);
    RUN(test_rule_tensor_set_arguments);
    TEST_MAIN_END();
}
