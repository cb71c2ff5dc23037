/* SPDX-License-Identifier: MIT */
/* test_fp8_tensor_core.c: the fp8 rule's model of an e4m3 wgmma's sums
 * (harness/fp8_tensor_core.c) against results measured on an H200 (fp8_wgmma_steps.h,
 * perf-notes run 165), bit for bit, and a few steps worked by hand. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../harness/fp8_tensor_core.h"
#include "../../src/core/dtype.h"
#include "fp8_wgmma_steps.h"
#include "testing.h"

static float bits_to_float(unsigned u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static unsigned float_to_bits(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* a vector's hex codes as e4m3 values */
static int decode(const char *hex, float *out)
{
    int n = 0;
    for (; hex[0] && hex[1]; hex += 2, n++) {
        unsigned code;
        if (sscanf(hex, "%2x", &code) != 1) return -1;
        out[n] = fmha_e4m3_to_f32((uint8_t)code);
    }
    return n;
}

/* D = C + A B^T over the vector's codes, k32 step by step: how many differ from the GPU */
static int mismatches(const fp8_step_vector_t *v, size_t count)
{
    int bad = 0;
    for (size_t i = 0; i < count; i++) {
        float a[256], b[256];
        const int n = decode(v[i].a, a);
        if (n <= 0 || decode(v[i].b, b) != n) return -1;
        float acc = bits_to_float(v[i].c);
        for (int k = 0; k < n; k += 32) acc = fp8_tensor_core_step(acc, a + k, b + k, n - k < 32 ? n - k : 32);
        if (float_to_bits(acc) != v[i].d) {
            if (bad < 4)
                printf("  vector %zu: model %a, GPU %a (C %a)\n", i, acc, bits_to_float(v[i].d), bits_to_float(v[i].c));
            bad++;
        }
    }
    return bad;
}

static void test_measured_single_steps(void)
{
    CHECK(sizeof fp8_one_steps / sizeof fp8_one_steps[0] >= 96);
    CHECK(mismatches(fp8_one_steps, sizeof fp8_one_steps / sizeof fp8_one_steps[0]) == 0);
}

static void test_measured_eight_steps(void)
{
    CHECK(mismatches(fp8_eight_steps, sizeof fp8_eight_steps / sizeof fp8_eight_steps[0]) == 0);
}

/* By hand: 1 + 31 products of 2^-14 (each below the grid of 2^(0 - 13)) keeps 1; 1 + 31 x
 * 1.5 x 2^-13 keeps 1 + 31 x 2^-13 (each truncated to one step of the grid); 448 x 448
 * (exponent fields 8 + 8, mantissas 1.75^2 = 3.0625) is exact, 200704; a NaN passes on;
 * zeros leave acc as it is. */
static void test_hand_worked(void)
{
    float a[32], b[32];
    for (int i = 0; i < 32; i++) a[i] = 0x1p-7f, b[i] = 0x1p-7f;
    a[0] = 0, b[0] = 0;
    CHECK(fp8_tensor_core_step(1.0f, a, b, 32) == 1.0f);
    for (int i = 0; i < 32; i++) a[i] = 0x1.8p-7f, b[i] = 0x1p-6f;
    a[0] = 0;
    CHECK(fp8_tensor_core_step(1.0f, a, b, 32) == 1.0f + 31 * 0x1p-13f);
    CHECK(fp8_tensor_core_step(0.0f, (float[]){448.0f}, (float[]){448.0f}, 1) == 200704.0f);
    /* the sum keeps 14 significant bits: acc = 8 is on the grid of 2^(16 - 13), but
     * 32 x 200704 + 8 = 6422536 is cut to a multiple of 2^(22 - 13) = 512: 6422528 */
    float big[32];
    for (int i = 0; i < 32; i++) big[i] = 448.0f;
    CHECK(fp8_tensor_core_step(8.0f, big, big, 32) == 6422528.0f);
    CHECK(fp8_tensor_core_step(512.0f, big, big, 32) == 6423040.0f);
    CHECK(isnan(fp8_tensor_core_step(0.0f, (float[]){NAN}, (float[]){1.0f}, 1)));
    CHECK(fp8_tensor_core_step(0.0f, a, (float[32]){0}, 32) == 0.0f);
}

int main(void)
{
    RUN(test_measured_single_steps);
    RUN(test_measured_eight_steps);
    RUN(test_hand_worked);
    TEST_MAIN_END();
}
