/* SPDX-License-Identifier: MIT */
/*
 * accuracy.h: REFERENCE.md's accuracy rule (FlashAttention's):
 *   max|out - ref64| <= factor * max|naive_lowp - ref64| + 1e-5,   factor 2 by default.
 * NaN never passes; infinities must match exactly (a fully masked row has LSE = -inf).
 */
#ifndef FMHA_CHECK_ACCURACY_H
#define FMHA_CHECK_ACCURACY_H

#include <stddef.h>

typedef struct acc_result {
    double max_err;   /* max |out - ref| */
    double lowp_err;  /* max |lowp - ref| */
    double tol;       /* factor * lowp_err + 1e-5 */
    size_t worst;     /* index of max_err (or of the first NaN / infinity mismatch) */
    int nan_or_inf;   /* 1 when out had a NaN, or an infinity where ref had none */
    size_t ref_nonfinite; /* acc_compare_nonfinite: elements where ref is NaN or infinite */
    int pass;
} acc_result_t;

/* Compare n values of out and lowp against ref. */
acc_result_t acc_compare(const double *out, const double *ref, const double *lowp, size_t n,
                         double factor);

/* For inputs that hold NaN or Inf on purpose (docs/semantics.md, "Non-finite inputs"):
 * where ref is not finite, out must not be finite either (NaN and Inf may stand for each
 * other: 0 x Inf, or a NaN score that a maximum skipped, give either); where ref is
 * finite, the rule above. ref_nonfinite counts the first kind. */
acc_result_t acc_compare_nonfinite(const double *out, const double *ref, const double *lowp, size_t n,
                                   double factor);

#endif /* FMHA_CHECK_ACCURACY_H */
