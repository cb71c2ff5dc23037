/* SPDX-License-Identifier: MIT */
/* test_params.c: the parameter table: info, defaults, bounds, types, reset, lookup. */
#include <math.h>

#include "testing.h"

static const fmha_param_t ALL[] = {
#define X(NAME, key, name, type, def, lo, hi, doc) FMHA_PARAM_##NAME,
    FMHA_PARAM_MAP(X)
#undef X
};
#define N_ALL (sizeof ALL / sizeof ALL[0])

static void test_info_and_defaults(void)
{
    fmha_problem_t *p;
    CHECK_STATUS(fmha_problem_create(&p), FMHA_STATUS_SUCCESS);
    for (size_t i = 0; i < N_ALL; i++) {
        fmha_param_info_t info = {.struct_size = sizeof info};
        CHECK_STATUS(fmha_param_info(ALL[i], &info), FMHA_STATUS_SUCCESS);
        fmha_param_t back;
        CHECK_STATUS(fmha_param_lookup(info.name, &back), FMHA_STATUS_SUCCESS);
        CHECK(back == ALL[i]);
        if (info.type == FMHA_PARAM_TYPE_I64) {
            int64_t v = 12345;
            CHECK_STATUS(fmha_problem_get_i64(p, ALL[i], &v), FMHA_STATUS_SUCCESS);
            CHECK(v == info.default_i64);
            CHECK(info.lo_i64 <= info.default_i64 && info.default_i64 <= info.hi_i64);
        } else {
            double v = 12345;
            CHECK_STATUS(fmha_problem_get_f64(p, ALL[i], &v), FMHA_STATUS_SUCCESS);
            CHECK(v == info.default_f64);
            CHECK(info.lo_f64 <= info.default_f64 && info.default_f64 <= info.hi_f64);
        }
    }
    fmha_param_info_t small = {.struct_size = sizeof small - 1};
    CHECK_STATUS(fmha_param_info(FMHA_PARAM_BATCH, &small), FMHA_STATUS_INVALID_ARGUMENT);
    fmha_param_info_t info = {.struct_size = sizeof info};
    CHECK_STATUS(fmha_param_info((fmha_param_t)999, &info), FMHA_STATUS_UNKNOWN_PARAM);
    fmha_param_t k;
    CHECK_STATUS(fmha_param_lookup("no_such_param", &k), FMHA_STATUS_UNKNOWN_PARAM);
    fmha_problem_destroy(p);
}

/* Values at the bounds are taken; one past them is refused, never clamped. */
static void test_bounds_refuse_and_keep_old_value(void)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    for (size_t i = 0; i < N_ALL; i++) {
        fmha_param_info_t info = {.struct_size = sizeof info};
        fmha_param_info(ALL[i], &info);
        if (info.type == FMHA_PARAM_TYPE_I64) {
            int64_t v;
            CHECK_STATUS(fmha_problem_set_i64(p, ALL[i], info.lo_i64), FMHA_STATUS_SUCCESS);
            CHECK_STATUS(fmha_problem_set_i64(p, ALL[i], info.hi_i64), FMHA_STATUS_SUCCESS);
            if (info.lo_i64 > INT64_MIN) {
                CHECK_STATUS(fmha_problem_set_i64(p, ALL[i], info.lo_i64 - 1), FMHA_STATUS_OUT_OF_RANGE);
                CHECK_CONTAINS(fmha_problem_last_error(p), "[rule param.range]");
                CHECK_CONTAINS(fmha_problem_last_error(p), info.name);
            }
            if (info.hi_i64 < INT64_MAX)
                CHECK_STATUS(fmha_problem_set_i64(p, ALL[i], info.hi_i64 + 1), FMHA_STATUS_OUT_OF_RANGE);
            fmha_problem_get_i64(p, ALL[i], &v);
            CHECK(v == info.hi_i64);
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], 1.0), FMHA_STATUS_INVALID_ARGUMENT);
            CHECK_CONTAINS(fmha_problem_last_error(p), "fmha_problem_*_i64");
        } else {
            double v;
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], info.lo_f64), FMHA_STATUS_SUCCESS);
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], info.hi_f64), FMHA_STATUS_SUCCESS);
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], nextafter(info.hi_f64, INFINITY)),
                         FMHA_STATUS_OUT_OF_RANGE);
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], nextafter(info.lo_f64, -INFINITY)),
                         FMHA_STATUS_OUT_OF_RANGE);
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], NAN), FMHA_STATUS_OUT_OF_RANGE);
            CHECK_CONTAINS(fmha_problem_last_error(p), "[rule param.finite]");
            CHECK_STATUS(fmha_problem_set_f64(p, ALL[i], INFINITY), FMHA_STATUS_OUT_OF_RANGE);
            fmha_problem_get_f64(p, ALL[i], &v);
            CHECK(v == info.hi_f64);
            int64_t iv;
            CHECK_STATUS(fmha_problem_get_i64(p, ALL[i], &iv), FMHA_STATUS_INVALID_ARGUMENT);
        }
    }
    fmha_problem_destroy(p);
}

/* The rules the issue names for scalars: softcap >= 0, dropout p in [0, 1), scale finite. */
static void test_scalar_rules(void)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    CHECK_STATUS(fmha_problem_set_f64(p, FMHA_PARAM_SOFTCAP, -0.5), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(fmha_problem_last_error(p), "softcap");
    CHECK_STATUS(fmha_problem_set_f64(p, FMHA_PARAM_DROPOUT_P, 1.0), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(fmha_problem_last_error(p), "dropout_p");
    CHECK_STATUS(fmha_problem_set_f64(p, FMHA_PARAM_DROPOUT_P, 0.999), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_problem_set_f64(p, FMHA_PARAM_DROPOUT_P, -1e-9), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_STATUS(fmha_problem_set_f64(p, FMHA_PARAM_SCALE, INFINITY), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(fmha_problem_last_error(p), "scale");
    CHECK_STATUS(fmha_problem_set_i64(p, FMHA_PARAM_WINDOW_LEFT, -2), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_STATUS(fmha_problem_set_i64(p, FMHA_PARAM_SINK_TOKENS, -1), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_STATUS(fmha_problem_set_i64(p, FMHA_PARAM_FAMILY, 6), FMHA_STATUS_OUT_OF_RANGE);
    CHECK_STATUS(fmha_problem_set_i64(p, (fmha_param_t)0, 1), FMHA_STATUS_UNKNOWN_PARAM);
    CHECK_STATUS(fmha_problem_set_i64(p, (fmha_param_t)63, 1), FMHA_STATUS_UNKNOWN_PARAM);
    fmha_problem_destroy(p);
}

static void test_reset_and_clone(void)
{
    fmha_problem_t *p, *c;
    fmha_problem_create(&p);
    fmha_problem_set_i64(p, FMHA_PARAM_BATCH, 7);
    fmha_problem_set_f64(p, FMHA_PARAM_SOFTCAP, 30);
    int64_t dims[1] = {8};
    CHECK_STATUS(fmha_problem_set_tensor(p, FMHA_TENSOR_SINK, FMHA_DTYPE_FP32, 1, dims, NULL), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_problem_clone(p, &c), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(fmha_problem_reset(p), FMHA_STATUS_SUCCESS);
    int64_t b;
    double cap;
    fmha_problem_get_i64(p, FMHA_PARAM_BATCH, &b);
    fmha_problem_get_f64(p, FMHA_PARAM_SOFTCAP, &cap);
    CHECK(b == 0 && cap == 0.0);
    CHECK(!fmha_problem_has_tensor(p, FMHA_TENSOR_SINK));
    fmha_problem_get_i64(c, FMHA_PARAM_BATCH, &b);
    CHECK(b == 7);
    CHECK(fmha_problem_has_tensor(c, FMHA_TENSOR_SINK));
    fmha_problem_destroy(p);
    fmha_problem_destroy(c);
}

int main(void)
{
    RUN(test_info_and_defaults);
    RUN(test_bounds_refuse_and_keep_old_value);
    RUN(test_scalar_rules);
    RUN(test_reset_and_clone);
    TEST_MAIN_END();
}
