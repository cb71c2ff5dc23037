/* SPDX-License-Identifier: MIT */
/*
 * test_ref_bwd.c: the CPU backward.
 *  - Every feature against central finite differences of L = sum(dO * O) in double
 *    (the naive forward, an independent implementation), on small fp32 shapes: each
 *    element of q, k, v, bias and sink is perturbed both ways.
 *  - dq, dk, dv (dbias, dsink) against the naive backward with the accuracy rule, on
 *    larger fp16/bf16 shapes, through the harness `fmha bwd` uses.
 *  - Bitwise identical gradients for 1, 2 and 3 threads.
 */
#include <math.h>
#include <stdlib.h>

#include "../../src/core/dtype.h"
#include "runner.h"
#include "naive_fwd.h"
#include "testing.h"

static fmha_context_t *ctx;

static fmha_status_t plan_and_run(bwd_case_t *bc, int threads, fmha_plan_t **plan_out)
{
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = threads};
    fmha_plan_t *plan;
    fmha_status_t st = fmha_plan_create(ctx, bwd_case_problem(bc), &opt, &plan);
    if (st) {
        printf("  plan: %s\n", fmha_context_last_error(ctx));
        return st;
    }
    st = bwd_case_execute(bc, plan);
    if (st) printf("  execute: %s\n", fmha_plan_last_error(plan));
    if (plan_out) *plan_out = plan;
    else fmha_plan_destroy(plan);
    return st;
}

/* L = sum(dO * O) with O from the naive forward in double. */
static double loss(const fmha_problem_t *p, void *const *data)
{
    naive_out_t o;
    if (naive_fwd(p, data, NAIVE_F64, &o)) return NAN;
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    fmha_problem_get_tensor(p, FMHA_TENSOR_DO, &dt, &rank, dims, str);
    const int64_t H = dims[rank - 2], D = dims[rank - 1], S = rank == 4 ? dims[1] : 0;
    double L = 0;
    for (int64_t t = 0; t < o.tokens; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < D; d++) {
                int64_t off = rank == 4 ? (t / S) * str[0] + (t % S) * str[1] + h * str[2] + d * str[3]
                                        : t * str[0] + h * str[1] + d * str[2];
                L += fmha_load_f32(data[FMHA_TENSOR_DO], dt, off) * o.o[(t * H + h) * D + d];
            }
    naive_out_free(&o);
    return L;
}

/* Compare gradient role g with finite differences of the input role x, element by
 * element. Returns the number of mismatches. */
static int fd_compare(bwd_case_t *bc, fmha_tensor_role_t x, fmha_tensor_role_t g, const char *label)
{
    const fmha_problem_t *p = bwd_case_problem(bc);
    void *const *data = bwd_case_data(bc);
    if (!fmha_problem_has_tensor(p, g)) return 0;
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK], idx[FMHA_MAX_RANK] = {0};
    fmha_problem_get_tensor(p, x, &dt, &rank, dims, str);
    float *X = data[x];
    const float *G = data[g];
    int bad = 0;
    for (;;) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++) off += idx[d] * str[d];
        const float x0 = X[off], xp = x0 + 1e-3f, xm = x0 - 1e-3f;
        X[off] = xp;
        const double lp = loss(p, data);
        X[off] = xm;
        const double lm = loss(p, data);
        X[off] = x0;
        const double fd = (lp - lm) / ((double)xp - (double)xm), got = G[off];
        if (!(fabs(fd - got) <= 2e-5 + 2e-4 * fabs(fd))) {
            if (bad < 3) printf("  %s: d%s at offset %lld: finite difference %.8g, backward %.8g\n", label,
                                fmha_tensor_role_name(x), (long long)off, fd, got);
            bad++;
        }
        int d = rank - 1;
        while (d >= 0 && ++idx[d] == dims[d]) idx[d--] = 0;
        if (d < 0) break;
    }
    return bad;
}

static bwd_config_t small(void)
{
    bwd_config_t c;
    memset(&c, 0, sizeof c);
    fwd_config_default(&c.fwd);
    c.fwd.b = 2, c.fwd.h = 2, c.fwd.h_k = 1, c.fwd.s = 5, c.fwd.s_k = 7, c.fwd.d = 8, c.fwd.d_v = 8;
    c.fwd.dtype = FMHA_DTYPE_FP32;
    return c;
}

static void fd_case(const bwd_config_t *c, const char *label)
{
    bwd_case_t *bc;
    char why[512];
    fmha_status_t st = bwd_case_create(c, &bc, why, sizeof why);
    CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
    if (st) {
        printf("  %s: %s\n", label, why);
        return;
    }
    CHECK_STATUS(plan_and_run(bc, 2, NULL), FMHA_STATUS_SUCCESS);
    int bad = fd_compare(bc, FMHA_TENSOR_Q, FMHA_TENSOR_DQ, label) + fd_compare(bc, FMHA_TENSOR_K, FMHA_TENSOR_DK, label) +
              fd_compare(bc, FMHA_TENSOR_V, FMHA_TENSOR_DV, label) +
              fd_compare(bc, FMHA_TENSOR_BIAS, FMHA_TENSOR_DBIAS, label) +
              fd_compare(bc, FMHA_TENSOR_SINK, FMHA_TENSOR_DSINK, label);
    if (bad) printf("  %s: %d gradient elements disagree with finite differences\n", label, bad);
    CHECK(bad == 0);
    bwd_case_destroy(bc);
}

static void test_fd_each_feature(void)
{
    bwd_config_t c = small();
    fd_case(&c, "plain");
    c = small(), c.fwd.mask = "b";
    fd_case(&c, "causal bottom-right, GQA 2");
    c = small(), c.fwd.mask = "t:2,1,2";
    fd_case(&c, "window with sink tokens");
    c = small(), c.fwd.softcap = 1.5;
    fd_case(&c, "soft-cap");
    c = small(), c.fwd.bias = BIAS_ELEM_BH, c.dbias = 1;
    fd_case(&c, "bias [B, H, Sq, Sk]");
    c = small(), c.fwd.bias = BIAS_ELEM_1H, c.dbias = 1, c.fwd.mask = "b";
    fd_case(&c, "bias [1, H, Sq, Sk] (dbias sums over b)");
    c = small(), c.fwd.bias = BIAS_ELEM_11, c.dbias = 1, c.fwd.softcap = 2;
    fd_case(&c, "bias [1, 1, Sq, Sk] with soft-cap");
    c = small(), c.fwd.bias = BIAS_ALIBI_BH, c.fwd.mask = "t";
    fd_case(&c, "ALiBi");
    c = small(), c.fwd.sink = 1, c.fwd.mask = "b";
    fd_case(&c, "sink logits");
    c = small(), c.fwd.p_drop = 0.3, c.fwd.drop_seed = 99, c.fwd.drop_offset = 5;
    fd_case(&c, "dropout 0.3");
    c = small(), c.fwd.d = 16, c.fwd.d_v = 8, c.fwd.h = 4, c.fwd.h_k = 2, c.fwd.scale = 0.7;
    fd_case(&c, "Dqk != Dv, GQA, scale");
    int32_t lq[3] = {4, 0, 6}, lk[3] = {6, 3, 2}, used[3] = {5, 3, 0};
    c = small(), c.fwd.b = 3, c.fwd.mode = FMHA_MODE_GROUP, c.fwd.seqlens_q = lq, c.fwd.seqlens_k = lk;
    c.fwd.seqused_k = used, c.fwd.s = 6, c.fwd.s_k = 6, c.fwd.mask = "b", c.fwd.sink = 1;
    fd_case(&c, "group mode with empty sequences and seqused");
}

static int naive_case(const bwd_config_t *c)
{
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = 2};
    return bwd_run_once(c, ctx, &opt, stdout);
}

static void test_naive_grid(void)
{
    const int64_t sq[] = {1, 17, 65}, sk[] = {17, 1, 129};
    const char *masks[] = {"0", "b", "t", "b:8,0", "t:4,4,2", "xb:9"};
    const fmha_dtype_t dts[] = {FMHA_DTYPE_FP16, FMHA_DTYPE_BF16};
    int n = 0;
    for (size_t i = 0; i < 3; i++)
        for (size_t m = 0; m < 6; m++) {
            bwd_config_t c;
            memset(&c, 0, sizeof c);
            fwd_config_default(&c.fwd);
            c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = n % 3 == 0 ? 1 : 2, c.fwd.s = sq[i], c.fwd.s_k = sk[i];
            c.fwd.d = n % 2 ? 64 : 40, c.fwd.d_v = c.fwd.d, c.fwd.mask = masks[m], c.fwd.dtype = dts[n % 2];
            c.fwd.bias = n % 4 == 1 ? BIAS_ELEM_1H : n % 4 == 3 ? BIAS_ALIBI_H : BIAS_NONE;
            c.dbias = n % 4 == 1;
            c.fwd.sink = n % 5 == 0, c.fwd.softcap = n % 3 == 2 ? 20 : 0, c.fwd.p_drop = n % 4 == 2 ? 0.2 : 0;
            c.fwd.iperm = n % 2, c.fwd.operm = (n / 2) % 2;
            n++;
            CHECK(naive_case(&c));
        }
    int32_t lq[4] = {33, 0, 1, 20}, lk[4] = {40, 7, 0, 64};
    bwd_config_t c;
    memset(&c, 0, sizeof c);
    fwd_config_default(&c.fwd);
    c.fwd.mode = FMHA_MODE_GROUP, c.fwd.b = 4, c.fwd.h = 4, c.fwd.h_k = 2, c.fwd.d = 32, c.fwd.d_v = 32;
    c.fwd.seqlens_q = lq, c.fwd.seqlens_k = lk, c.fwd.s = 33, c.fwd.s_k = 64, c.fwd.mask = "b", c.fwd.p_drop = 0.1;
    CHECK(naive_case(&c));
}

/* Does the checker catch a wrong gradient? Flip one dk element after the run. */
static void test_checker_catches_errors(void)
{
    bwd_config_t c = small();
    c.fwd.dtype = FMHA_DTYPE_FP16;
    bwd_case_t *bc;
    char why[256];
    CHECK_STATUS(bwd_case_create(&c, &bc, why, sizeof why), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(plan_and_run(bc, 1, NULL), FMHA_STATUS_SUCCESS);
    bwd_check_t r;
    CHECK(bwd_case_check(bc, &r) == 0 && r.pass);
    void *dk = bwd_case_data(bc)[FMHA_TENSOR_DK];
    fmha_store_f32(dk, FMHA_DTYPE_FP16, 3, fmha_load_f32(dk, FMHA_DTYPE_FP16, 3) + 0.01f);
    CHECK(bwd_case_check(bc, &r) == 0 && !r.pass && !r.dk.pass);
    bwd_case_destroy(bc);
}

static void test_threads_bitwise_identical(void)
{
    bwd_config_t c;
    memset(&c, 0, sizeof c);
    fwd_config_default(&c.fwd);
    c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = 1, c.fwd.s = 70, c.fwd.s_k = 130, c.fwd.d = 32, c.fwd.d_v = 32;
    c.fwd.mask = "b", c.fwd.bias = BIAS_ELEM_11, c.dbias = 1, c.fwd.sink = 1, c.fwd.p_drop = 0.1, c.deterministic = 1;
    void *first[5] = {0};
    const fmha_tensor_role_t grads[5] = {FMHA_TENSOR_DQ, FMHA_TENSOR_DK, FMHA_TENSOR_DV, FMHA_TENSOR_DBIAS, FMHA_TENSOR_DSINK};
    size_t bytes[5] = {0};
    for (int threads = 1; threads <= 3; threads++) {
        bwd_case_t *bc;
        char why[256];
        CHECK_STATUS(bwd_case_create(&c, &bc, why, sizeof why), FMHA_STATUS_SUCCESS);
        CHECK_STATUS(plan_and_run(bc, threads, NULL), FMHA_STATUS_SUCCESS);
        for (int g = 0; g < 5; g++) {
            fmha_dtype_t dt;
            int rank;
            int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
            fmha_problem_get_tensor(bwd_case_problem(bc), grads[g], &dt, &rank, dims, str);
            size_t n = fmha_dtype_size(dt);
            for (int d = 0; d < rank; d++) n *= (size_t)dims[d];
            if (threads == 1) {
                bytes[g] = n;
                first[g] = malloc(n);
                memcpy(first[g], bwd_case_data(bc)[grads[g]], n);
            } else {
                CHECK(memcmp(first[g], bwd_case_data(bc)[grads[g]], bytes[g]) == 0);
            }
        }
        bwd_case_destroy(bc);
    }
    for (int g = 0; g < 5; g++) free(first[g]);
}

int main(void)
{
    if (fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0)) return 1;
    RUN(test_fd_each_feature);
    RUN(test_naive_grid);
    RUN(test_checker_catches_errors);
    RUN(test_threads_bitwise_identical);
    fmha_context_destroy(ctx);
    TEST_MAIN_END();
}
