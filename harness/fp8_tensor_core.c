/* SPDX-License-Identifier: MIT */
/* fp8_tensor_core.c: see fp8_tensor_core.h. */
#include "fp8_tensor_core.h"

#include <limits.h>
#include <math.h>

/* An e4m3 value's exponent field as the tensor core aligns by it: subnormals sit at -6. */
static int e4m3_exponent(float x)
{
    const int e = ilogb(x);
    return e < -6 ? -6 : e;
}

float fp8_tensor_core_step(float acc, const float *a, const float *b, int n)
{
    double exact = acc;
    int top = acc != 0 ? ilogb(acc) : INT_MIN;
    for (int i = 0; i < n; i++) {
        exact += (double)a[i] * b[i];
        if (a[i] == 0 || b[i] == 0) continue;
        const int e = e4m3_exponent(a[i]) + e4m3_exponent(b[i]);
        if (e > top) top = e;
    }
    if (!isfinite(exact)) return (float)exact; /* NaN passes on (e4m3 has no infinity) */
    if (top == INT_MIN) return acc;            /* nothing but zeros */
    /* the terms on one grid: a product of two e4m3 values divided by a power of two is
     * exact in double, and so is the sum of at most 33 integers below 2^16 */
    const double ulp = ldexp(1.0, top - 13);
    double sum = trunc(acc / ulp);
    for (int i = 0; i < n; i++) sum += trunc((double)a[i] * b[i] / ulp);
    sum *= ulp;
    if (sum == 0) return 0.0f;
    const double kept = ldexp(1.0, ilogb(sum) - 13); /* 14 significant bits */
    return (float)(trunc(sum / kept) * kept);
}
