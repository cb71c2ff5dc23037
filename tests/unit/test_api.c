/* SPDX-License-Identifier: MIT */
/*
 * test_api.c: API misuse (NULLs, calls out of order, destroy(NULL), bad pointers,
 * workspace too small) and the rules that need data: cu_seqlens content and output
 * aliasing, checked at execute; planning leaves the problem as it was.
 */
#include <stdlib.h>

#include "testing.h"

enum { B = 2, H = 2, S = 5, D = 8 };

/* A small valid batch problem with contiguous fp32 tensors, plus buffers for it. */
typedef struct fixture {
    fmha_context_t *ctx;
    fmha_problem_t *p;
    fmha_plan_t *plan;
    float q[B * S * H * D], k[B * S * H * D], v[B * S * H * D], o[B * S * H * D];
    void *ws;
    size_t ws_bytes;
} fixture_t;

static void fixture_problem(fmha_problem_t *p, int group)
{
    fmha_problem_set_i64(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_FWD);
    fmha_problem_set_i64(p, FMHA_PARAM_MODE, group);
    fmha_problem_set_i64(p, FMHA_PARAM_BATCH, B);
    fmha_problem_set_i64(p, FMHA_PARAM_NUM_HEADS_Q, H);
    fmha_problem_set_i64(p, FMHA_PARAM_NUM_HEADS_KV, H);
    fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_Q, S);
    fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_KV, S);
    fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_QK, D);
    fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_V, D);
    const fmha_tensor_role_t roles[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (int i = 0; i < 4; i++) {
        if (group)
            fmha_problem_set_tensor(p, roles[i], FMHA_DTYPE_FP32, 3, (int64_t[]){B * S, H, D}, NULL);
        else
            fmha_problem_set_tensor(p, roles[i], FMHA_DTYPE_FP32, 4, (int64_t[]){B, S, H, D}, NULL);
    }
    if (group) {
        fmha_problem_set_tensor(p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1}, NULL);
        fmha_problem_set_tensor(p, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1}, NULL);
    }
}

static fixture_t *fixture_create(int group)
{
    fixture_t *f = calloc(1, sizeof *f);
    for (int i = 0; i < B * S * H * D; i++) f->q[i] = f->k[i] = f->v[i] = (float)(i % 7) * 0.1f;
    CHECK_STATUS(fmha_context_create(&f->ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_problem_create(&f->p), FMHA_STATUS_SUCCESS);
    fixture_problem(f->p, group);
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = 2};
    CHECK_STATUS(fmha_plan_create(f->ctx, f->p, &opt, &f->plan), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_plan_workspace_size(f->plan, &f->ws_bytes), FMHA_STATUS_SUCCESS);
    f->ws = malloc(f->ws_bytes);
    return f;
}

static void fixture_destroy(fixture_t *f)
{
    fmha_plan_destroy(f->plan);
    fmha_problem_destroy(f->p);
    fmha_context_destroy(f->ctx);
    free(f->ws);
    free(f);
}

static fmha_status_t run(fixture_t *f, fmha_tensor_ptr_t *ptrs, size_t n)
{
    return fmha_plan_execute(f->plan, ptrs, n, f->ws, f->ws_bytes, NULL);
}

static void test_null_arguments(void)
{
    fmha_problem_destroy(NULL);
    fmha_context_destroy(NULL);
    fmha_plan_destroy(NULL);
    CHECK_STATUS(fmha_problem_create(NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_context_create(NULL, FMHA_BACKEND_CPU, 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_set_i64(NULL, FMHA_PARAM_BATCH, 1), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_set_f64(NULL, FMHA_PARAM_SCALE, 1), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_get_i64(NULL, FMHA_PARAM_BATCH, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_reset(NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_set_mask(NULL, "b"), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_problem_validate(NULL, NULL, 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_plan_workspace_size(NULL, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_plan_execute(NULL, NULL, 0, NULL, 0, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(fmha_plan_describe(NULL, NULL, 0) == 0);
    CHECK(fmha_plan_kernel_name(NULL, 0) == NULL);
    CHECK(strcmp(fmha_problem_last_error(NULL), "") == 0);
    CHECK(strcmp(fmha_context_last_error(NULL), "") == 0);
    CHECK(strcmp(fmha_plan_last_error(NULL), "") == 0);
    CHECK(!fmha_problem_has_tensor(NULL, FMHA_TENSOR_Q));
    fmha_context_t *ctx;
    fmha_plan_t *plan = (fmha_plan_t *)&plan; /* must be reset to NULL on failure */
    fmha_context_create(&ctx, FMHA_BACKEND_AUTO, 0);
    CHECK(fmha_context_backend(ctx) == FMHA_BACKEND_CPU);
    CHECK_STATUS(fmha_plan_create(ctx, NULL, NULL, &plan), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(plan == NULL);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "problem is NULL");
    CHECK_STATUS(fmha_plan_create(NULL, NULL, NULL, &plan), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_plan_create(ctx, NULL, NULL, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    fmha_context_destroy(ctx);
    CHECK_STATUS(fmha_context_create(&ctx, (fmha_backend_t)9, 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CUDA, 0), FMHA_STATUS_NOT_COMPILED);
}

/* A failed create says why on fmha_context_create_error (no context holds it). */
static void test_create_errors(void)
{
    fmha_context_t *ctx = NULL;
    CHECK_STATUS(fmha_context_create(&ctx, (fmha_backend_t)9, 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_create_error(), "backend is 9; expected FMHA_BACKEND_AUTO (0)");
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "sm75", 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_create_error(), "arch \"sm75\" is not a GPU arch fmha has kernels for; expected one "
                                                "of sm80, sm86, sm89, sm90");
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "sm90", -1), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_create_error(), "sm_count is -1; expected >= 0");
    CHECK_STATUS(fmha_context_create_virtual(&ctx, NULL, 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_create_error(), "arch is NULL");
    if (fmha_context_create(&ctx, FMHA_BACKEND_CUDA, 0) == FMHA_STATUS_SUCCESS) {
        fmha_context_destroy(ctx);
    } else {
        CHECK_CONTAINS(fmha_context_create_error(), "the CUDA backend is unavailable: ");
        CHECK_CONTAINS(fmha_build_info(), "cuda=off cuda_off=\"");
    }
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(fmha_context_create_error(), "") == 0);
    fmha_context_destroy(ctx);
    /* build info: space-separated pairs, quoted values hold no quote */
    int quotes = 0;
    for (const char *c = fmha_build_info(); *c; c++) quotes += *c == '"';
    CHECK(quotes % 2 == 0);
}

/* check_index_data: an option value other than 0/1 is refused; on the host backend a
 * checked plan refuses bad data like an unchecked one (the host always checks). */
static void test_check_index_option(void)
{
    fmha_context_t *ctx;
    fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0);
    fmha_problem_t *p;
    fmha_problem_create(&p);
    fixture_problem(p, 1);
    fmha_plan_t *plan = NULL;
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .check_index_data = 2};
    CHECK_STATUS(fmha_plan_create(ctx, p, &opt, &plan), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "check_index_data is 2; expected 0 or 1");
    opt.check_index_data = 1;
    CHECK_STATUS(fmha_plan_create(ctx, p, &opt, &plan), FMHA_STATUS_SUCCESS);
    fmha_plan_destroy(plan);
    fmha_problem_destroy(p);
    fmha_context_destroy(ctx);
}

static void test_out_of_order(void)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    /* reading a tensor that was never set */
    CHECK_STATUS(fmha_problem_get_tensor(p, FMHA_TENSOR_LSE, &dt, &rank, dims, str), FMHA_STATUS_BAD_STATE);
    CHECK_CONTAINS(fmha_problem_last_error(p), "tensor lse is not set");
    /* planning an empty problem */
    fmha_context_t *ctx;
    fmha_plan_t *plan;
    fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0);
    CHECK_STATUS(fmha_plan_create(ctx, p, NULL, &plan), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "[rule dims.positive]");
    /* bad options */
    fixture_problem(p, 0);
    fmha_plan_options_t small = {.struct_size = 4};
    CHECK_STATUS(fmha_plan_create(ctx, p, &small, &plan), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "struct_size");
    fmha_plan_options_t force = {.struct_size = sizeof force, .force_kernel = "no_such_kernel"};
    CHECK_STATUS(fmha_plan_create(ctx, p, &force, &plan), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "no_such_kernel");
    force.force_kernel = "cpu_ref_fwd";
    CHECK_STATUS(fmha_plan_create(ctx, p, &force, &plan), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(fmha_plan_kernel_name(plan, 0), "cpu_ref_fwd") == 0);
    CHECK(fmha_plan_kernel_name(plan, 1) == NULL);
    /* the plan owns a copy: changing the problem afterwards does not change the plan */
    fmha_problem_set_i64(p, FMHA_PARAM_BATCH, 1000);
    char buf[2048];
    size_t n = fmha_plan_describe(plan, buf, sizeof buf);
    CHECK(n == strlen(buf));
    CHECK_CONTAINS(buf, "batch 2,");
    /* describe honours the snprintf contract */
    char tiny[8];
    CHECK(fmha_plan_describe(plan, tiny, sizeof tiny) == n);
    CHECK(strlen(tiny) == sizeof tiny - 1);
    fmha_plan_destroy(plan);
    fmha_context_destroy(ctx);
    fmha_problem_destroy(p);
}

static void test_execute_pointer_checks(void)
{
    fixture_t *f = fixture_create(0);
    fmha_tensor_ptr_t ok[4] = {{FMHA_TENSOR_Q, f->q}, {FMHA_TENSOR_K, f->k}, {FMHA_TENSOR_V, f->v}, {FMHA_TENSOR_O, f->o}};
    CHECK_STATUS(run(f, ok, 4), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(run(f, ok, 3), FMHA_STATUS_INVALID_ARGUMENT); /* o missing */
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "no pointer for tensor o");
    fmha_tensor_ptr_t dup[5] = {ok[0], ok[1], ok[2], ok[3], ok[0]};
    CHECK_STATUS(run(f, dup, 5), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "tensor q is given twice");
    fmha_tensor_ptr_t extra[5] = {ok[0], ok[1], ok[2], ok[3], {FMHA_TENSOR_LSE, f->o}};
    CHECK_STATUS(run(f, extra, 5), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "tensor lse is not part of the problem");
    fmha_tensor_ptr_t unknown[5] = {ok[0], ok[1], ok[2], ok[3], {(fmha_tensor_role_t)77, f->o}};
    CHECK_STATUS(run(f, unknown, 5), FMHA_STATUS_INVALID_ARGUMENT);
    fmha_tensor_ptr_t nulled[4] = {ok[0], ok[1], {FMHA_TENSOR_V, NULL}, ok[3]};
    CHECK_STATUS(run(f, nulled, 4), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "tensor v is NULL");
    CHECK_STATUS(fmha_plan_execute(f->plan, NULL, 4, f->ws, f->ws_bytes, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_plan_execute(f->plan, ok, 4, f->ws, f->ws_bytes, (struct CUstream_st *)f), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "stream");
    fixture_destroy(f);
}

static void test_workspace_too_small(void)
{
    fixture_t *f = fixture_create(0);
    CHECK(f->ws_bytes > 0); /* the CPU backend keeps its per-thread scratch there */
    fmha_tensor_ptr_t ok[4] = {{FMHA_TENSOR_Q, f->q}, {FMHA_TENSOR_K, f->k}, {FMHA_TENSOR_V, f->v}, {FMHA_TENSOR_O, f->o}};
    CHECK_STATUS(fmha_plan_execute(f->plan, ok, 4, f->ws, f->ws_bytes - 1, NULL), FMHA_STATUS_WORKSPACE_TOO_SMALL);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "the plan needs");
    CHECK_STATUS(fmha_plan_execute(f->plan, ok, 4, NULL, f->ws_bytes, NULL), FMHA_STATUS_INVALID_ARGUMENT);
    fixture_destroy(f);
}

static void test_rule_tensor_alias(void)
{
    fixture_t *f = fixture_create(0);
    fmha_tensor_ptr_t alias[4] = {{FMHA_TENSOR_Q, f->q}, {FMHA_TENSOR_K, f->k}, {FMHA_TENSOR_V, f->v}, {FMHA_TENSOR_O, f->q + 3}};
    float before = f->q[3];
    CHECK_STATUS(run(f, alias, 4), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "[rule tensor.alias] output o overlaps tensor q");
    CHECK(f->q[3] == before); /* nothing the caller owns was touched */
    fixture_destroy(f);
}

/* Planning only reads the problem (the header's thread note: several threads may plan
 * one problem at once, and a write into its error buffer raced under TSan): the problem's
 * last error stays as it was whether the plan is made or refused, and the refusal's
 * message is on the context. */
static void test_planning_leaves_the_problem(void)
{
    fixture_t *f = fixture_create(0);
    CHECK_STATUS(fmha_problem_set_i64(f->p, FMHA_PARAM_BATCH, -1), FMHA_STATUS_OUT_OF_RANGE);
    char before[512];
    snprintf(before, sizeof before, "%s", fmha_problem_last_error(f->p));
    CHECK_CONTAINS(before, "[rule param.range]");
    CHECK_STATUS(fmha_context_plan_cache_clear(f->ctx), FMHA_STATUS_SUCCESS); /* a cached plan skips validation */
    fmha_plan_t *plan = NULL;
    CHECK_STATUS(fmha_plan_create(f->ctx, f->p, NULL, &plan), FMHA_STATUS_SUCCESS);
    fmha_plan_destroy(plan);
    CHECK(strcmp(fmha_problem_last_error(f->p), before) == 0);
    CHECK_STATUS(fmha_problem_set_i64(f->p, FMHA_PARAM_HEAD_DIM_V, 2 * D), FMHA_STATUS_SUCCESS); /* o, v stay D wide */
    CHECK_STATUS(fmha_plan_create(f->ctx, f->p, NULL, &plan), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_context_last_error(f->ctx), "[rule ");
    CHECK(strcmp(fmha_problem_last_error(f->p), before) == 0);
    fixture_destroy(f);
}

static void test_rules_varlen_content(void)
{
    fixture_t *f = fixture_create(1);
    int32_t cu_q[B + 1] = {0, 3, 8}, cu_k[B + 1] = {0, 5, 10};
    fmha_tensor_ptr_t p[6] = {{FMHA_TENSOR_Q, f->q}, {FMHA_TENSOR_K, f->k}, {FMHA_TENSOR_V, f->v},
                              {FMHA_TENSOR_O, f->o}, {FMHA_TENSOR_CU_SEQLENS_Q, cu_q}, {FMHA_TENSOR_CU_SEQLENS_KV, cu_k}};
    CHECK_STATUS(run(f, p, 6), FMHA_STATUS_SUCCESS);
    cu_q[0] = 1;
    CHECK_STATUS(run(f, p, 6), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "[rule varlen.cu_seqlens] cu_seqlens_q[0] is 1; expected 0");
    cu_q[0] = 0, cu_q[1] = 2, cu_q[2] = 1;
    CHECK_STATUS(run(f, p, 6), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "decreasing");
    cu_q[1] = 3, cu_q[2] = 8, cu_k[2] = 11; /* 11 > the 10 tokens of k */
    CHECK_STATUS(run(f, p, 6), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "exceeds the 10 tokens");
    cu_k[1] = 0, cu_k[2] = 6; /* sequence 1 has 6 keys > max_seqlen_k 5 */
    CHECK_STATUS(run(f, p, 6), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_plan_last_error(f->plan), "[rule varlen.max_seqlen] sequence 1 has length 6");
    fixture_destroy(f);

    /* seqused_kv must lie within the allocated lengths */
    fixture_t *g = calloc(1, sizeof *g);
    fmha_context_create(&g->ctx, FMHA_BACKEND_CPU, 0);
    fmha_problem_create(&g->p);
    fixture_problem(g->p, 1);
    fmha_problem_set_tensor(g->p, FMHA_TENSOR_SEQUSED_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B}, NULL);
    CHECK_STATUS(fmha_plan_create(g->ctx, g->p, NULL, &g->plan), FMHA_STATUS_SUCCESS);
    fmha_plan_workspace_size(g->plan, &g->ws_bytes);
    g->ws = malloc(g->ws_bytes);
    int32_t cq[B + 1] = {0, 3, 8}, ck[B + 1] = {0, 5, 10}, used[B] = {2, 6};
    fmha_tensor_ptr_t u[7] = {{FMHA_TENSOR_Q, g->q}, {FMHA_TENSOR_K, g->k}, {FMHA_TENSOR_V, g->v}, {FMHA_TENSOR_O, g->o},
                              {FMHA_TENSOR_CU_SEQLENS_Q, cq}, {FMHA_TENSOR_CU_SEQLENS_KV, ck}, {FMHA_TENSOR_SEQUSED_KV, used}};
    CHECK_STATUS(run(g, u, 7), FMHA_STATUS_INVALID_PROBLEM);
    CHECK_CONTAINS(fmha_plan_last_error(g->plan), "[rule varlen.seqused] seqused_kv[1] = 6; expected 0..5");
    used[1] = 5;
    CHECK_STATUS(run(g, u, 7), FMHA_STATUS_SUCCESS);
    fixture_destroy(g);
}

int main(void)
{
    RUN(test_null_arguments);
    RUN(test_out_of_order);
    RUN(test_execute_pointer_checks);
    RUN(test_workspace_too_small);
    RUN(test_create_errors);
    RUN(test_check_index_option);
    RUN(test_rule_tensor_alias);
    RUN(test_rules_varlen_content);
    RUN(test_planning_leaves_the_problem);
    TEST_MAIN_END();
}
