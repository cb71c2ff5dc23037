/* SPDX-License-Identifier: MIT */
/*
 * test_ref_fwd.c: the CPU forward against the naive references (REFERENCE.md's accuracy
 * rule), on a grid of awkward shapes and every feature, through the same harness as
 * `fmha run`. A failing case prints the `fmha run` line that reproduces it.
 */
#include <math.h>
#include <stdlib.h>

#include "../../src/core/dtype.h"
#include "runner.h"
#include "testing.h"

static fmha_context_t *ctx;

/* Run one configuration; returns 1 when it passes. */
static int run_case(const fwd_config_t *c, int threads)
{
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = threads};
    return fwd_run_once(c, ctx, &opt, stdout);
}

static fwd_config_t base(void)
{
    fwd_config_t c;
    fwd_config_default(&c);
    c.b = 2, c.h = 4, c.h_k = 2, c.s = 17, c.s_k = 33, c.d = 32, c.d_v = 32, c.lse = 1;
    return c;
}

/* Each feature alone, so a failure names the feature. */
static void test_each_feature(void)
{
    const char *masks[] = {"0", "t", "b", "t:3,2", "b:16,4", "b:-1,0,2", "t:4,0,3", "xt:5", "xb:6", "b:0,0", "t:-1,3"};
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        fwd_config_t c = base();
        c.mask = masks[i];
        CHECK(run_case(&c, 0));
    }
    for (int bias = BIAS_ELEM_11; bias <= BIAS_ALIBI_BH; bias++) {
        fwd_config_t c = base();
        c.bias = (bias_kind_t)bias;
        c.mask = "b";
        CHECK(run_case(&c, 0));
    }
    fwd_config_t c = base();
    c.bias = BIAS_ELEM_1H, c.bias_fp32 = 1, c.mask = "t:3,2"; /* the CPU backend reads an fp32 bias too */
    CHECK(run_case(&c, 0));
    c = base();
    c.softcap = 2.0, c.scale = 0.7; /* scores reach the cap */
    CHECK(run_case(&c, 0));
    c = base();
    c.sink = 1;
    CHECK(run_case(&c, 0));
    c = base();
    c.p_drop = 0.3, c.dropout_mask = 1, c.drop_seed = 0x123456789abcdefull, c.drop_offset = 77;
    CHECK(run_case(&c, 0));
    c = base();
    c.iperm = 0, c.operm = 0, c.pad = 8; /* BSHD with padded rows */
    CHECK(run_case(&c, 0));
    c = base();
    c.iperm = 1, c.operm = 0, c.pad = 3;
    CHECK(run_case(&c, 0));
}

static void test_dtypes_and_head_dims(void)
{
    const fmha_dtype_t dts[] = {FMHA_DTYPE_FP16, FMHA_DTYPE_BF16, FMHA_DTYPE_FP32};
    const int64_t dims[][2] = {{8, 8}, {32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}, {40, 24}};
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
            fwd_config_t c = base();
            c.dtype = dts[t], c.d = dims[k][0], c.d_v = dims[k][1], c.mask = "b";
            CHECK(run_case(&c, 0));
        }
}

/* Sq > Sk with causal masks leaves rows without keys: O = 0 and LSE = -inf. */
static void test_rows_without_keys(void)
{
    const char *masks[] = {"b", "b:2,0", "t:0,-1"};
    for (size_t i = 0; i < 3; i++) {
        fwd_config_t c = base();
        c.s = 77, c.s_k = 20, c.mask = masks[i];
        CHECK(run_case(&c, 0));
    }
    fwd_config_t c = base(); /* with a sink logit, an empty row has LSE = sink and O = 0 */
    c.s = 40, c.s_k = 9, c.mask = "b", c.sink = 1;
    CHECK(run_case(&c, 0));
}

/* Windows up to the documented 2^31 - 1: a kernel that adds them to row indices in 32
 * bits wraps and hides keys (the GPU conformance runs the same masks). Sq < Sk and
 * Sq > Sk, so that the bottom-right diagonal offset is positive and negative. */
static void test_huge_windows(void)
{
    const char *masks[] = {"b:2147483647,2147483647", "t:2147483647,0", "b:2147483647,5", "b:3,2147483647",
                           "t:0,2147483647,2"};
    const int64_t shapes[][2] = {{77, 301}, {301, 77}};
    for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
        for (size_t i = 0; i < 2; i++) {
            fwd_config_t c = base();
            c.mask = masks[m], c.s = shapes[i][0], c.s_k = shapes[i][1];
            CHECK(run_case(&c, 0));
        }
}

static void test_gqa_ratios(void)
{
    const int64_t ratios[] = {1, 2, 4, 8};
    for (size_t i = 0; i < 4; i++) {
        fwd_config_t c = base();
        c.h = 8, c.h_k = 8 / ratios[i], c.mask = "b:5,1";
        CHECK(run_case(&c, 0));
    }
}

static void test_varlen(void)
{
    const int32_t lq[] = {1, 0, 17, 64, 3}, lk[] = {5, 7, 0, 100, 3}, used[] = {5, 2, 0, 61, 1};
    for (int variant = 0; variant < 4; variant++) {
        fwd_config_t c = base();
        c.mode = FMHA_MODE_GROUP;
        c.b = 5, c.s = 64, c.s_k = 100, c.seqlens_q = lq, c.seqlens_k = lk;
        c.mask = variant == 0 ? "b" : variant == 1 ? "t:7,2,1" : "0";
        if (variant == 2) c.seqused_k = used, c.bias = BIAS_ELEM_BH;
        if (variant == 3) c.p_drop = 0.25, c.dropout_mask = 1, c.bias = BIAS_ALIBI_BH, c.sink = 1, c.iperm = 0;
        CHECK(run_case(&c, 0));
    }
}

/* A random grid: every option drawn independently, small awkward shapes. */
static void test_random_grid(void)
{
    uint64_t st = 2024;
#define R(n) ((int)((st = st * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (n))
    const char *masks[] = {"0", "t", "b", "t:3,2", "b:16,4", "b:-1,0,2", "xt:5", "xb:8", "b:0,0", "t:9,-1,1"};
    const int64_t seqs[] = {1, 2, 7, 17, 33, 64, 65, 100};
    const int64_t hdims[][2] = {{8, 8}, {16, 16}, {32, 32}, {64, 64}, {48, 80}, {128, 128}};
    int32_t lq[4], lk[4];
    int failures = 0;
    for (int i = 0; i < 250; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.seed = (uint64_t)i + 1;
        c.b = 1 + R(3);
        c.h_k = 1 + R(3);
        c.h = c.h_k * (1 + R(4));
        c.s = seqs[R(8)], c.s_k = seqs[R(8)];
        int hd = R(6);
        c.d = hdims[hd][0], c.d_v = hdims[hd][1];
        c.dtype = (fmha_dtype_t)(1 + R(3));
        c.mask = masks[R(10)];
        c.bias = (bias_kind_t)R(6);
        c.lse = R(2);
        c.sink = R(3) == 0;
        c.softcap = R(3) == 0 ? 5.0 : 0.0;
        c.p_drop = R(4) == 0 ? 0.2 : 0.0;
        c.dropout_mask = c.p_drop > 0 && R(2);
        c.drop_seed = (uint64_t)R(1000), c.drop_offset = (uint64_t)R(1000);
        c.iperm = R(2), c.operm = R(2), c.pad = R(3) == 0 ? 8 : 0;
        if (R(3) == 0) {
            c.mode = FMHA_MODE_GROUP;
            int64_t mq = 1, mk = 1;
            for (int b = 0; b < c.b; b++) {
                lq[b] = R(40), lk[b] = R(40);
                if (lq[b] > mq) mq = lq[b];
                if (lk[b] > mk) mk = lk[b];
            }
            c.seqlens_q = lq, c.seqlens_k = lk, c.s = mq, c.s_k = mk;
        }
        if (!run_case(&c, 0)) failures++;
    }
#undef R
    CHECK(failures == 0);
}

/* Values worked out by hand. */
/* The hand-computed cases' problem: one sequence, one head, 2 queries and 2 keys of head
 * dim 8, the given score scale; tensors are the caller's. */
static fmha_problem_t *two_rows_of_eight(double scale)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    const fmha_param_t ones[] = {FMHA_PARAM_BATCH, FMHA_PARAM_NUM_HEADS_Q, FMHA_PARAM_NUM_HEADS_KV};
    for (int i = 0; i < 3; i++) fmha_problem_set_i64(p, ones[i], 1);
    fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_Q, 2);
    fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_KV, 2);
    fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_QK, 8);
    fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_V, 8);
    fmha_problem_set_f64(p, FMHA_PARAM_SCALE, scale);
    return p;
}

static void test_hand_computed(void)
{
    /* One key: the output is that key's value row, whatever the scores; LSE = the score. */
    fmha_problem_t *p = two_rows_of_eight(0.5);
    fmha_problem_set_mask(p, "t"); /* row 0 sees key 0, row 1 sees keys 0 and 1 */
    const int64_t dq[4] = {1, 2, 1, 8}, dl[3] = {1, 1, 2};
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP32, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_K, FMHA_DTYPE_FP32, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_V, FMHA_DTYPE_FP32, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_O, FMHA_DTYPE_FP32, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 3, dl, NULL);
    float q[16] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0};
    float k[16] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    float v[16], o[16], lse[2];
    for (int i = 0; i < 16; i++) v[i] = (float)i;
    fmha_plan_t *plan;
    CHECK_STATUS(fmha_plan_create(ctx, p, NULL, &plan), FMHA_STATUS_SUCCESS);
    size_t ws;
    fmha_plan_workspace_size(plan, &ws);
    void *w = malloc(ws);
    fmha_tensor_ptr_t ptrs[5] = {{FMHA_TENSOR_Q, q}, {FMHA_TENSOR_K, k}, {FMHA_TENSOR_V, v}, {FMHA_TENSOR_O, o}, {FMHA_TENSOR_LSE, lse}};
    CHECK_STATUS(fmha_plan_execute(plan, ptrs, 5, w, ws, NULL), FMHA_STATUS_SUCCESS);
    /* row 0: score 0.5*1*2 = 1 on key 0 only: o = v[0], lse = 1 */
    for (int d = 0; d < 8; d++) CHECK(o[d] == v[d]);
    CHECK(fabsf(lse[0] - 1.0f) < 1e-6f);
    /* row 1: scores 0 (key 0) and 0.5*2*1 = 1 (key 1): p = (1, e)/(1 + e) */
    const double e = exp(1.0), p0 = 1 / (1 + e), p1 = e / (1 + e);
    for (int d = 0; d < 8; d++) CHECK(fabs(o[8 + d] - (p0 * v[d] + p1 * v[8 + d])) < 1e-5);
    CHECK(fabs(lse[1] - log(1 + e)) < 1e-6);
    free(w);
    fmha_plan_destroy(plan);
    fmha_problem_destroy(p);
}

/* fp8 e4m3 inputs with descales, by hand: q = 0 gives equal scores, so row 0 averages
 * the two value rows: o = v_descale * (2 + 4) / 2 with v_descale 0.25 (exact in bf16);
 * q_descale and k_descale scale the scores: row 1 scores q.k = 1 * 2 (e4m3 0x38 = 1,
 * 0x40 = 2) times 0.5 * 3 (descales) times scale 1 = 3 against 0 for key 0. */
static void test_fp8_hand_computed(void)
{
    fmha_problem_t *p = two_rows_of_eight(1.0);
    const int64_t dq[4] = {1, 2, 1, 8}, d1[1] = {1};
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q, FMHA_DTYPE_FP8_E4M3, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_K, FMHA_DTYPE_FP8_E4M3, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_V, FMHA_DTYPE_FP8_E4M3, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_O, FMHA_DTYPE_BF16, 4, dq, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_Q_DESCALE, FMHA_DTYPE_FP32, 1, d1, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_K_DESCALE, FMHA_DTYPE_FP32, 1, d1, NULL);
    fmha_problem_set_tensor(p, FMHA_TENSOR_V_DESCALE, FMHA_DTYPE_FP32, 1, d1, NULL);
    uint8_t q[16] = {0}, k[16] = {0}, v[16];
    q[8 + 1] = 0x38; /* row 1: q[1] = 1 */
    k[8 + 1] = 0x40; /* key 1: k[1] = 2 */
    for (int d = 0; d < 8; d++) v[d] = 0x40, v[8 + d] = 0x48; /* 2 and 4 */
    float qs = 0.5f, ks = 3.0f, vs = 0.25f;
    uint16_t o[16];
    fmha_plan_t *plan;
    CHECK_STATUS(fmha_plan_create(ctx, p, NULL, &plan), FMHA_STATUS_SUCCESS);
    size_t ws;
    fmha_plan_workspace_size(plan, &ws);
    void *w = malloc(ws ? ws : 1);
    fmha_tensor_ptr_t ptrs[7] = {{FMHA_TENSOR_Q, q},          {FMHA_TENSOR_K, k},          {FMHA_TENSOR_V, v},
                                 {FMHA_TENSOR_O, o},          {FMHA_TENSOR_Q_DESCALE, &qs}, {FMHA_TENSOR_K_DESCALE, &ks},
                                 {FMHA_TENSOR_V_DESCALE, &vs}};
    CHECK_STATUS(fmha_plan_execute(plan, ptrs, 7, w, ws, NULL), FMHA_STATUS_SUCCESS);
    for (int d = 0; d < 8; d++) CHECK(fmha_bf16_to_f32(o[d]) == 0.75f);
    const double e3 = exp(3.0), want = 0.25 * (2.0 + 4.0 * e3) / (1.0 + e3);
    for (int d = 0; d < 8; d++) CHECK(fabs(fmha_bf16_to_f32(o[8 + d]) - want) < 4e-3);
    free(w);
    fmha_plan_destroy(plan);
    fmha_problem_destroy(p);
}

/* fp8 e4m3 inputs (docs/semantics.md, "FP8") against the naive references: masks, sinks,
 * soft-cap, GQA, head dims, each descale shape, varlen with an empty sequence. */
static void test_fp8(void)
{
    const char *masks[] = {"0", "b", "t:5,3", "b:-1,0,2"};
    const int64_t dims[] = {64, 128, 256};
    for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
        for (size_t k = 0; k < 3; k++) {
            fwd_config_t c = base();
            c.dtype = FMHA_DTYPE_FP8_E4M3, c.mask = masks[m], c.d = c.d_v = dims[k];
            c.descale = (int)((m + k) % 3);
            c.sink = m == 3, c.softcap = m == 2 ? 20.0 : 0.0;
            CHECK(run_case(&c, 0));
        }
    const int32_t sq[3] = {9, 0, 40}, sk[3] = {20, 7, 33};
    fwd_config_t c = base();
    c.dtype = FMHA_DTYPE_FP8_E4M3, c.mode = FMHA_MODE_GROUP, c.b = 3, c.s = 40, c.s_k = 33;
    c.seqlens_q = sq, c.seqlens_k = sk, c.mask = "b", c.d = c.d_v = 128;
    CHECK(run_case(&c, 0));
}

/* The check must be able to fail: corrupt one output element after a correct run. */
static void test_checker_catches_errors(void)
{
    fwd_config_t c = base();
    c.dtype = FMHA_DTYPE_FP32;
    fwd_case_t *fc;
    char why[512];
    CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    fmha_plan_t *plan;
    fmha_plan_create(ctx, fwd_case_problem(fc), NULL, &plan);
    CHECK_STATUS(fwd_case_execute(fc, plan), FMHA_STATUS_SUCCESS);
    fwd_check_t r;
    fwd_case_check(fc, &r);
    CHECK(r.pass);
    /* a problem with a different scale stands for "the kernel computed the wrong thing" */
    fmha_problem_t *wrong;
    fmha_problem_clone(fwd_case_problem(fc), &wrong);
    fmha_problem_set_f64(wrong, FMHA_PARAM_SCALE, 0.2);
    fmha_plan_t *wrong_plan;
    fmha_plan_create(ctx, wrong, NULL, &wrong_plan);
    CHECK_STATUS(fwd_case_execute(fc, wrong_plan), FMHA_STATUS_SUCCESS);
    fwd_case_check(fc, &r);
    CHECK(!r.pass && !r.o.pass);
    fmha_plan_destroy(wrong_plan);
    fmha_problem_destroy(wrong);
    fmha_plan_destroy(plan);
    fwd_case_destroy(fc);
}

/* Rows are computed independently, so the thread count cannot change a bit. */
static void test_threads_bitwise_identical(void)
{
    fwd_config_t c = base();
    c.s = 130, c.s_k = 70, c.mask = "b:20,3", c.p_drop = 0.1;
    fwd_case_t *a, *b;
    char why[512];
    fwd_case_create(&c, &a, why, sizeof why);
    fwd_case_create(&c, &b, why, sizeof why);
    fmha_plan_t *p1, *p2;
    fmha_plan_options_t o1 = {.struct_size = sizeof o1, .num_threads = 1}, o2 = {.struct_size = sizeof o2, .num_threads = 2};
    fmha_plan_create(ctx, fwd_case_problem(a), &o1, &p1);
    fmha_plan_create(ctx, fwd_case_problem(b), &o2, &p2);
    CHECK_STATUS(fwd_case_execute(a, p1), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fwd_case_execute(b, p2), FMHA_STATUS_SUCCESS);
    fwd_check_t ra, rb;
    fwd_case_check(a, &ra);
    fwd_case_check(b, &rb);
    CHECK(ra.pass && rb.pass && ra.o.max_err == rb.o.max_err && ra.lse.max_err == rb.lse.max_err);
    fmha_plan_destroy(p1);
    fmha_plan_destroy(p2);
    fwd_case_destroy(a);
    fwd_case_destroy(b);
}

int main(void)
{
    fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0);
    RUN(test_hand_computed);
    RUN(test_fp8_hand_computed);
    RUN(test_fp8);
    RUN(test_checker_catches_errors);
    RUN(test_each_feature);
    RUN(test_dtypes_and_head_dims);
    RUN(test_rows_without_keys);
    RUN(test_huge_windows);
    RUN(test_gqa_ratios);
    RUN(test_varlen);
    RUN(test_random_grid);
    RUN(test_threads_bitwise_identical);
    fmha_context_destroy(ctx);
    TEST_MAIN_END();
}
