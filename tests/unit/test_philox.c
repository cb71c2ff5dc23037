/* SPDX-License-Identifier: MIT */
/* test_philox.c: Philox4x32-10 against the published Random123 known-answer vectors. */
#include "testing.h"

static void test_known_answers(void)
{
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        fmha_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int w = 0; w < 4; w++) CHECK(out[w] == kat[i].want[w]);
    }
}

/* The dropout keep rate over many elements is close to 1 - p (a loose statistical
 * check that the threshold direction is right: keep iff word >= p * 2^32). */
static void test_keep_rate(void)
{
    const double p = 0.25;
    const uint32_t thr = (uint32_t)(p * 4294967296.0);
    uint32_t key[2] = {1234, 0}, out[4];
    long kept = 0, n = 0;
    for (uint32_t c = 0; c < 50000; c++) {
        uint32_t ctr[4] = {c, 0, 0, 0};
        fmha_philox4x32_10(ctr, key, out);
        for (int w = 0; w < 4; w++, n++) kept += out[w] >= thr;
    }
    double rate = (double)kept / (double)n;
    CHECK(rate > 0.745 && rate < 0.755);
}

int main(void)
{
    RUN(test_known_answers);
    RUN(test_keep_rate);
    TEST_MAIN_END();
}
