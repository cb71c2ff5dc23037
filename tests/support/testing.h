/* SPDX-License-Identifier: MIT */
/*
 * testing.h: a minimal test harness. A test file defines functions `static void
 * test_x(void)` and lists them in main with RUN(test_x). A failed CHECK prints the
 * file, line and expression and marks the current test failed; the run ends with
 * "N passed, N failed" and exits non-zero when anything failed.
 */
#ifndef FMHA_TESTS_TESTING_H
#define FMHA_TESTS_TESTING_H

#include <stdio.h>
#include <string.h>

#include "fmha/fmha.h"

static int t_failed_checks, t_passed, t_failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            t_failed_checks++;                                               \
        }                                                                    \
    } while (0)

/* expr must return status want. */
#define CHECK_STATUS(expr, want)                                                          \
    do {                                                                                  \
        fmha_status_t got_ = (expr);                                                      \
        if (got_ != (want)) {                                                             \
            printf("  %s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #expr,   \
                   fmha_status_name(got_), fmha_status_name(want));                       \
            t_failed_checks++;                                                            \
        }                                                                                 \
    } while (0)

/* haystack must contain needle. */
#define CHECK_CONTAINS(haystack, needle)                                                   \
    do {                                                                                   \
        const char *h_ = (haystack);                                                       \
        if (!h_ || !strstr(h_, (needle))) {                                                \
            printf("  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,        \
                   h_ ? h_ : "(null)", (needle));                                          \
            t_failed_checks++;                                                             \
        }                                                                                  \
    } while (0)

/* Elements a tensor of the problem spans, from its first to its last (non-negative
 * strides); 0 for an empty tensor or a role without one. */
static inline int64_t test_span_elems(const fmha_problem_t *p, fmha_tensor_role_t role)
{
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    if (fmha_problem_get_tensor(p, role, &dt, &rank, dims, str)) return 0;
    int64_t last = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 0) return 0;
        last += (dims[d] - 1) * str[d];
    }
    return last + 1;
}

#define RUN(fn)                                          \
    do {                                                 \
        int before_ = t_failed_checks;                   \
        fn();                                            \
        if (t_failed_checks == before_) {                \
            t_passed++;                                  \
        } else {                                         \
            t_failed++;                                  \
            printf("FAIL %s\n", #fn);                    \
        }                                                \
    } while (0)

#define TEST_MAIN_END()                                        \
    do {                                                       \
        printf("%d passed, %d failed\n", t_passed, t_failed); \
        return t_failed ? 1 : 0;                               \
    } while (0)

#endif /* FMHA_TESTS_TESTING_H */
