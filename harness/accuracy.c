/* SPDX-License-Identifier: MIT */
/* accuracy.c: see accuracy.h. */
#include "accuracy.h"

#include <math.h>

/* |a - b|, with equal infinities counting as 0 and unequal ones as +inf. */
static double dist(double a, double b)
{
    if (isinf(a) || isinf(b)) return a == b ? 0.0 : INFINITY;
    return fabs(a - b);
}

/* The rule over n values. With nonfinite_ref (acc_compare_nonfinite), an element whose
 * reference is NaN or infinite only needs a non-finite output; the others take the rule. */
static acc_result_t compare(const double *out, const double *ref, const double *lowp, size_t n, double factor,
                            int nonfinite_ref)
{
    acc_result_t r = {0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (nonfinite_ref && !isfinite(ref[i])) {
            r.ref_nonfinite++;
            if (isfinite(out[i]) && !r.nan_or_inf) r.worst = i, r.nan_or_inf = 1;
            continue;
        }
        double l = dist(lowp[i], ref[i]);
        if (l > r.lowp_err && isfinite(l)) r.lowp_err = l;
        if (isnan(out[i]) || (isinf(dist(out[i], ref[i])))) {
            if (!r.nan_or_inf) r.worst = i;
            r.nan_or_inf = 1;
            continue;
        }
        double e = dist(out[i], ref[i]);
        if (e > r.max_err) {
            r.max_err = e;
            if (!r.nan_or_inf) r.worst = i;
        }
    }
    r.tol = factor * r.lowp_err + 1e-5;
    r.pass = !r.nan_or_inf && r.max_err <= r.tol;
    return r;
}

acc_result_t acc_compare(const double *out, const double *ref, const double *lowp, size_t n, double factor)
{
    return compare(out, ref, lowp, n, factor, 0);
}

acc_result_t acc_compare_nonfinite(const double *out, const double *ref, const double *lowp, size_t n,
                                   double factor)
{
    return compare(out, ref, lowp, n, factor, 1);
}
