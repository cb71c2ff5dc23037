/* SPDX-License-Identifier: MIT */
/*
 * divisor.h: division by a number that is fixed for a launch (a page size, a split
 * count), as one multiply-high and one shift whose constants the host works out once.
 * The GPU has no integer divider: n / d by a runtime d is a ~20-instruction sequence
 * through a float reciprocal. A decode CTA runs its prologue once, with its code cold in
 * the instruction cache, so there every instruction costs cycles (perf-notes run 114).
 *
 * The method: for d in [1, 2^31) let l = ceil(log2 d) and mul = ceil(2^(31 + l) / d),
 * which fits 32 bits. For n in [0, 2^31), floor(n / d) = floor(n * mul / 2^(31 + l)):
 * mul * d = 2^(31 + l) + e with 0 <= e < d <= 2^l, so the product overshoots n / d by
 * n * e / (d * 2^(31 + l)) < 1 / d, which never carries past the next integer. On the
 * device that is umulhi(2n, mul) >> l (2n < 2^32).
 *
 * Shared by host C and device code: params structs carry fmha_divisor_t fields
 * (fwd_params.h, appendkv_params.h), the host fills them with fmha_divisor_of, kernels
 * divide with fmha_div. Include after the params header's integer typedefs.
 */
#ifndef FMHA_KERNEL_DIVISOR_H
#define FMHA_KERNEL_DIVISOR_H

typedef struct fmha_divisor {
    uint32_t mul, shift; /* 0, 0 when unset: every quotient 0 (a field its kernel never divides by) */
} fmha_divisor_t;

#ifdef __CUDACC__
#define FMHA_DIVISOR_FN __host__ __device__ __forceinline__
#else
#define FMHA_DIVISOR_FN static inline
#endif

/* floor(n / d) for n in [0, 2^31) and d the divisor of fmha_divisor_of(d) */
FMHA_DIVISOR_FN uint32_t fmha_div(uint32_t n, fmha_divisor_t d)
{
    return (uint32_t)(((uint64_t)(n << 1) * d.mul) >> 32) >> d.shift;
}

#ifndef __CUDACC_RTC__
/* The constants of divisor d, 1 <= d < 2^31 (0 gives the unset divisor). */
FMHA_DIVISOR_FN fmha_divisor_t fmha_divisor_of(uint32_t d)
{
    fmha_divisor_t r = {0, 0};
    if (d == 0 || d >= 0x80000000u) return r;
    uint32_t l = 0;
    while ((1ull << l) < d) l++;
    r.mul = (uint32_t)(((1ull << (31 + l)) + d - 1) / d);
    r.shift = l;
    return r;
}
#endif

#endif /* FMHA_KERNEL_DIVISOR_H */
