/* SPDX-License-Identifier: MIT */
/* test_dtype.c: fp16/bf16/fp8-e4m3 conversions (round to nearest even), used by every backend. */
#include <math.h>

#include "../../src/core/dtype.h"
#include "testing.h"

static void test_fp16_known_values(void)
{
    CHECK(fmha_f32_to_f16(1.0f) == 0x3c00);
    CHECK(fmha_f32_to_f16(-2.0f) == 0xc000);
    CHECK(fmha_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(fmha_f32_to_f16(65520.0f) == 0x7c00); /* the tie above the max rounds to inf */
    CHECK(fmha_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(fmha_f32_to_f16(INFINITY) == 0x7c00);
    CHECK((fmha_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (fmha_f32_to_f16(NAN) & 0x3ff) != 0);
    CHECK(fmha_f32_to_f16(5.9604644775390625e-08f) == 0x0001); /* 2^-24, smallest subnormal */
    CHECK(fmha_f32_to_f16(2.98023223876953125e-08f) == 0x0000); /* 2^-25 ties to even: 0 */
    CHECK(fmha_f32_to_f16(4.5e-08f) == 0x0001);
    CHECK(fmha_f32_to_f16(2049.0f) == 0x6800); /* 2049 ties between 2048 and 2050: even */
    CHECK(fmha_f32_to_f16(2051.0f) == 0x6802); /* 2051 ties between 2050 and 2052: 2052 */
    CHECK(fmha_f16_to_f32(0x3555) == 0.333251953125f);
    CHECK(fmha_f16_to_f32(0x8001) == -5.9604644775390625e-08f);
}

/* Every finite fp16 survives a round trip through float. */
static void test_fp16_round_trip_exhaustive(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN */
        if (fmha_f32_to_f16(fmha_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0);
}

/* Rounding a float halfway between two fp16 neighbours picks the even one. */
static void test_fp16_midpoints(void)
{
    int bad = 0;
    for (uint32_t h = 0x0400; h < 0x7bff; h += 7) {
        float lo = fmha_f16_to_f32((uint16_t)h), hi = fmha_f16_to_f32((uint16_t)(h + 1));
        float mid = (lo + hi) * 0.5f; /* exact in float */
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (fmha_f32_to_f16(mid) != want) bad++;
        if (fmha_f32_to_f16(nextafterf(mid, 0)) != h) bad++;
        if (fmha_f32_to_f16(nextafterf(mid, INFINITY)) != h + 1) bad++;
    }
    CHECK(bad == 0);
}

static void test_bf16(void)
{
    CHECK(fmha_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(fmha_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(fmha_f32_to_bf16(fmha_bits_f32(0x3f808000u)) == 0x3f80); /* tie, even stays */
    CHECK(fmha_f32_to_bf16(fmha_bits_f32(0x3f818000u)) == 0x3f82); /* tie, odd rounds up */
    CHECK(fmha_f32_to_bf16(fmha_bits_f32(0x3f808001u)) == 0x3f81);
    CHECK(fmha_f32_to_bf16(INFINITY) == 0x7f80);
    uint16_t n = fmha_f32_to_bf16(NAN);
    CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) continue;
        if (fmha_f32_to_bf16(fmha_bf16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0);
}

/* e4m3: every encoding decodes to its value and survives a round trip; midpoints round
 * to even; the range saturates at 448 (the GPU's satfinite conversion). */
static void test_e4m3(void)
{
    CHECK(fmha_e4m3_to_f32(0x38) == 1.0f);
    CHECK(fmha_e4m3_to_f32(0x7e) == 448.0f);
    CHECK(fmha_e4m3_to_f32(0xfe) == -448.0f);
    CHECK(fmha_e4m3_to_f32(0x01) == 0.001953125f); /* 2^-9, smallest subnormal */
    CHECK(fmha_e4m3_to_f32(0x08) == 0.015625f);    /* 2^-6, smallest normal */
    CHECK(isnan(fmha_e4m3_to_f32(0x7f)) && isnan(fmha_e4m3_to_f32(0xff)));
    int bad = 0;
    for (uint32_t x = 0; x < 256; x++) {
        if ((x & 0x7f) == 0x7f) continue; /* NaN */
        if (fmha_f32_to_e4m3(fmha_e4m3_to_f32((uint8_t)x)) != x && x != 0x80) bad++;
        if (x < 0x7e) { /* the midpoint to the next encoding ties to the even one */
            const float lo = fmha_e4m3_to_f32((uint8_t)x), hi = fmha_e4m3_to_f32((uint8_t)(x + 1));
            const uint8_t want = (x & 1u) ? (uint8_t)(x + 1) : (uint8_t)x;
            if (fmha_f32_to_e4m3(0.5f * (lo + hi)) != want) bad++;
        }
    }
    CHECK(bad == 0);
    CHECK(fmha_f32_to_e4m3(0.0009765625f) == 0x00); /* 2^-10 ties to even: 0 */
    CHECK(fmha_f32_to_e4m3(0.0009766f) == 0x01);
    CHECK(fmha_f32_to_e4m3(460.0f) == 0x7e); /* saturates */
    CHECK(fmha_f32_to_e4m3(1e9f) == 0x7e && fmha_f32_to_e4m3(-INFINITY) == 0xfe);
    CHECK((fmha_f32_to_e4m3(NAN) & 0x7f) == 0x7f);
    CHECK(fmha_round_to(FMHA_DTYPE_FP8_E4M3, 1.0625f) == 1.0f);  /* tie: even mantissa */
    CHECK(fmha_round_to(FMHA_DTYPE_FP8_E4M3, 1.1875f) == 1.25f); /* tie: even mantissa */
}

int main(void)
{
    RUN(test_fp16_known_values);
    RUN(test_fp16_round_trip_exhaustive);
    RUN(test_fp16_midpoints);
    RUN(test_bf16);
    RUN(test_e4m3);
    TEST_MAIN_END();
}
