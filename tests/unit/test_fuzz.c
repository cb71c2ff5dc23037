/* SPDX-License-Identifier: MIT */
/*
 * test_fuzz.c: random parameter/tensor/mask sequences. Every call must return one of its
 * documented statuses with a message; a problem that validates must plan, and (when
 * small) execute on buffers sized from its own strides, with random cu_seqlens content
 * either accepted or refused with INVALID_PROBLEM. Run under ASan/UBSan in CI, this is
 * also the memory-safety net for the host code.
 */
#include <stdlib.h>

#include "testing.h"

static uint64_t rng = 0x1234abcdull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

static int64_t interesting_i64(void)
{
    static const int64_t v[] = {-2, -1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 17, 24, 32, 64, 256, 264, 1 << 20, INT32_MAX, INT64_MAX, INT64_MIN};
    return next() % 3 ? pick(-1, 9) : v[next() % (sizeof v / sizeof v[0])];
}

static const char *MASKS[] = {"0", "1", "2", "t", "b", "t:2,1", "b:0,0", "b:3,-1,2", "xt:5", "xb:0", "t:",
                              "zz", "b:-5,1", "", "t:1,2,3,4", "xt:9"};

/* Allowed statuses for each call kind. */
static int allowed(fmha_status_t st, const fmha_status_t *ok, int n)
{
    for (int i = 0; i < n; i++)
        if (st == ok[i]) return 1;
    return 0;
}

static void try_execute(fmha_context_t *ctx, const fmha_problem_t *p, int *executed)
{
    fmha_plan_t *plan;
    fmha_status_t st = fmha_plan_create(ctx, p, NULL, &plan);
    CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
    if (st) return;
    int64_t total = 0;
    for (int r = 1; r < FMHA_TENSOR_ROLE_END_; r++)
        if (fmha_problem_has_tensor(p, (fmha_tensor_role_t)r)) total += test_span_elems(p, (fmha_tensor_role_t)r);
    int64_t B, SQ, SK;
    fmha_problem_get_i64(p, FMHA_PARAM_BATCH, &B);
    fmha_problem_get_i64(p, FMHA_PARAM_SEQLEN_Q, &SQ);
    fmha_problem_get_i64(p, FMHA_PARAM_SEQLEN_KV, &SK);
    if (total > 200000 || B * SQ * SK > 200000) { /* keep the fuzz fast */
        fmha_plan_destroy(plan);
        return;
    }
    fmha_tensor_ptr_t ptrs[FMHA_TENSOR_ROLE_END_];
    void *bufs[FMHA_TENSOR_ROLE_END_] = {0};
    size_t n = 0;
    for (int r = 1; r < FMHA_TENSOR_ROLE_END_; r++) {
        if (!fmha_problem_has_tensor(p, (fmha_tensor_role_t)r)) continue;
        int64_t e = test_span_elems(p, (fmha_tensor_role_t)r);
        bufs[r] = calloc((size_t)e + 1, 8);
        if (r == FMHA_TENSOR_CU_SEQLENS_Q || r == FMHA_TENSOR_CU_SEQLENS_KV || r == FMHA_TENSOR_SEQUSED_KV) {
            int32_t *cu = bufs[r];
            int mono = (int)(next() % 2);
            for (int64_t i = 0; i < e; i++) cu[i] = mono ? (i ? cu[i - 1] + (int32_t)pick(0, 4) : 0) : (int32_t)pick(-2, 12);
        } else if (r == FMHA_TENSOR_Q || r == FMHA_TENSOR_K || r == FMHA_TENSOR_V) {
            for (int64_t i = 0; i < e * 8; i++) ((unsigned char *)bufs[r])[i] = (unsigned char)(next() & 0x3f);
        }
        ptrs[n].role = (fmha_tensor_role_t)r;
        ptrs[n].data = bufs[r];
        n++;
    }
    size_t ws = 0;
    fmha_plan_workspace_size(plan, &ws);
    void *w = malloc(ws + 1);
    st = fmha_plan_execute(plan, ptrs, n, w, ws, NULL);
    const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_INVALID_PROBLEM};
    CHECK(allowed(st, ok, 2));
    if (st == FMHA_STATUS_INVALID_PROBLEM) CHECK_CONTAINS(fmha_plan_last_error(plan), "[rule varlen.");
    if (st == FMHA_STATUS_SUCCESS) (*executed)++;
    free(w);
    for (int r = 0; r < FMHA_TENSOR_ROLE_END_; r++) free(bufs[r]);
    fmha_plan_destroy(plan);
}

static void test_random_sequences(void)
{
    fmha_context_t *ctx;
    fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0);
    int validated = 0, executed = 0;
    for (int iter = 0; iter < 4000; iter++) {
        fmha_problem_t *p;
        fmha_problem_create(&p);
        /* Start near a valid problem most of the time so validation gets past the basics. */
        int group = (int)(next() % 2);
        int64_t B = pick(1, 3), H = pick(1, 4), G = pick(1, 2), SQ = pick(1, 9), SK = pick(1, 9), D = 8 * pick(1, 3);
        fmha_problem_set_i64(p, FMHA_PARAM_MODE, group);
        fmha_problem_set_i64(p, FMHA_PARAM_BATCH, B);
        fmha_problem_set_i64(p, FMHA_PARAM_NUM_HEADS_Q, H * G);
        fmha_problem_set_i64(p, FMHA_PARAM_NUM_HEADS_KV, H);
        fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_Q, SQ);
        fmha_problem_set_i64(p, FMHA_PARAM_SEQLEN_KV, SK);
        fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_QK, D);
        fmha_problem_set_i64(p, FMHA_PARAM_HEAD_DIM_V, D);
        fmha_dtype_t dt = (fmha_dtype_t)pick(1, 3);
        if (group) {
            fmha_problem_set_tensor(p, FMHA_TENSOR_Q, dt, 3, (int64_t[]){B * SQ, H * G, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_K, dt, 3, (int64_t[]){B * SK, H, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_V, dt, 3, (int64_t[]){B * SK, H, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_O, dt, 3, (int64_t[]){B * SQ, H * G, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_DTYPE_INT32, 1, (int64_t[]){B + 1}, NULL);
        } else {
            fmha_problem_set_tensor(p, FMHA_TENSOR_Q, dt, 4, (int64_t[]){B, SQ, H * G, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_K, dt, 4, (int64_t[]){B, SK, H, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_V, dt, 4, (int64_t[]){B, SK, H, D}, NULL);
            fmha_problem_set_tensor(p, FMHA_TENSOR_O, dt, 4, (int64_t[]){B, SQ, H * G, D}, NULL);
        }
        int steps = (int)pick(0, 6);
        for (int s = 0; s < steps; s++) {
            fmha_status_t st;
            switch (next() % 5) {
            case 0: {
                const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_UNKNOWN_PARAM, FMHA_STATUS_OUT_OF_RANGE, FMHA_STATUS_INVALID_ARGUMENT};
                st = fmha_problem_set_i64(p, (fmha_param_t)pick(0, 30), interesting_i64());
                CHECK(allowed(st, ok, 4));
                break;
            }
            case 1: {
                const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_UNKNOWN_PARAM, FMHA_STATUS_OUT_OF_RANGE, FMHA_STATUS_INVALID_ARGUMENT};
                static const double v[] = {0, 0.1, 0.5, 0.99, 1, -1, 30, 1e308, -0.0};
                st = fmha_problem_set_f64(p, (fmha_param_t)pick(19, 25), v[next() % 9]);
                CHECK(allowed(st, ok, 4));
                break;
            }
            case 2: {
                const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_INVALID_ARGUMENT};
                int rank = (int)pick(0, 5);
                int64_t dims[6], str[6];
                for (int d = 0; d < 6; d++) dims[d] = pick(-1, 5), str[d] = pick(-1, 40);
                st = fmha_problem_set_tensor(p, (fmha_tensor_role_t)pick(0, 13), (fmha_dtype_t)pick(0, 7), rank,
                                             dims, next() % 2 ? str : NULL);
                CHECK(allowed(st, ok, 2));
                break;
            }
            case 3: {
                const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_INVALID_ARGUMENT};
                st = fmha_problem_clear_tensor(p, (fmha_tensor_role_t)pick(0, 13));
                CHECK(allowed(st, ok, 2));
                break;
            }
            default: {
                const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_INVALID_ARGUMENT};
                st = fmha_problem_set_mask(p, MASKS[next() % (sizeof MASKS / sizeof MASKS[0])]);
                CHECK(allowed(st, ok, 2));
            }
            }
            if (st != FMHA_STATUS_SUCCESS) CHECK(fmha_problem_last_error(p)[0] != '\0');
        }
        char why[1024];
        fmha_status_t st = fmha_problem_validate(p, why, sizeof why);
        const fmha_status_t ok[] = {FMHA_STATUS_SUCCESS, FMHA_STATUS_INVALID_PROBLEM, FMHA_STATUS_NOT_SUPPORTED};
        CHECK(allowed(st, ok, 3));
        if (st != FMHA_STATUS_SUCCESS) {
            CHECK_CONTAINS(why, "[rule ");
        } else {
            validated++;
            try_execute(ctx, p, &executed);
        }
        fmha_problem_destroy(p);
    }
    printf("  fuzz: %d of 4000 problems validated, %d executed\n", validated, executed);
    CHECK(validated > 400 && executed > 200); /* the fuzz reaches execution, not only errors */
    fmha_context_destroy(ctx);
}

int main(void)
{
    RUN(test_random_sequences);
    TEST_MAIN_END();
}
