/* SPDX-License-Identifier: MIT */
/* test_divisor.c: kernels/device/divisor.h's multiply-and-shift quotients against C's
 * division: every divisor up to 4096 over the small dividends and the top of the range,
 * the powers of two and their neighbours (page sizes), and random pairs up to 2^31 - 1. */
#include <stdint.h>

#include "testing.h"
#include "divisor.h"

/* floor(n / d) by the divisor's constants, for n just below, at and above each multiple
 * of d near `around` */
static int wrong_near(uint32_t d, fmha_divisor_t v, uint32_t around)
{
    int wrong = 0;
    const uint32_t m = around / d * d;
    for (int64_t n = (int64_t)m - 2; n <= (int64_t)m + 2; n++)
        if (n >= 0 && n <= 0x7fffffff) wrong += fmha_div((uint32_t)n, v) != (uint32_t)n / d;
    return wrong;
}

static void test_small_divisors(void)
{
    int wrong = 0;
    for (uint32_t d = 1; d <= 4096; d++) {
        const fmha_divisor_t v = fmha_divisor_of(d);
        for (uint32_t n = 0; n < 3 * 4096; n++) wrong += fmha_div(n, v) != n / d;
        wrong += wrong_near(d, v, 0x7fffffffu) + wrong_near(d, v, 0x40000000u);
    }
    CHECK(wrong == 0);
}

static void test_powers_of_two(void)
{
    int wrong = 0;
    for (int l = 0; l < 31; l++)
        for (int64_t d = ((int64_t)1 << l) - 1; d <= ((int64_t)1 << l) + 1; d++) {
            if (d < 1 || d > 0x7fffffff) continue;
            const fmha_divisor_t v = fmha_divisor_of((uint32_t)d);
            for (uint32_t k = 0; k < 64; k++) wrong += wrong_near((uint32_t)d, v, k * (uint32_t)d);
            wrong += wrong_near((uint32_t)d, v, 0x7fffffffu);
        }
    CHECK(wrong == 0);
}

static uint32_t next_random(uint64_t *s) /* xorshift64*, 31 bits */
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (uint32_t)((*s * 2685821657736338717ull) >> 33);
}

static void test_random_pairs(void)
{
    uint64_t s = 88172645463325252ull;
    int wrong = 0;
    for (int i = 0; i < 2000000; i++) {
        const uint32_t d = next_random(&s) >> (next_random(&s) % 31);
        if (d == 0) continue;
        const uint32_t n = next_random(&s);
        const fmha_divisor_t v = fmha_divisor_of(d);
        wrong += fmha_div(n, v) != n / d;
        wrong += wrong_near(d, v, n);
    }
    CHECK(wrong == 0);
}

static void test_unset(void)
{
    const fmha_divisor_t zero = fmha_divisor_of(0), big = fmha_divisor_of(0x80000000u);
    CHECK(zero.mul == 0 && zero.shift == 0);
    CHECK(big.mul == 0 && big.shift == 0);
    CHECK(fmha_div(12345, zero) == 0);
}

int main(void)
{
    RUN(test_small_divisors);
    RUN(test_powers_of_two);
    RUN(test_random_pairs);
    RUN(test_unset);
    TEST_MAIN_END();
}
