/* SPDX-License-Identifier: MIT */
/*
 * dtype.h: scalar conversions between fp16/bf16/fp8-e4m3 bit patterns and float, with
 * round-to-nearest-even, written out so that no compiler extension (_Float16) is
 * needed. Shared by the CPU backend and the naive checkers; tested in test_dtype.c.
 */
#ifndef FMHA_CORE_DTYPE_H
#define FMHA_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "fmha/fmha.h"

static inline uint32_t fmha_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float fmha_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float fmha_bf16_to_f32(uint16_t h) { return fmha_bits_f32((uint32_t)h << 16); }

static inline uint16_t fmha_f32_to_bf16(float f)
{
    uint32_t u = fmha_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static inline float fmha_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return fmha_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24, exact in float */
        float v = (float)man * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return fmha_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t fmha_f32_to_f16(float f)
{
    uint32_t u = fmha_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {
        /* below the smallest normal half (2^-14): subnormal half or zero. Round the value
         * times 2^24 to an integer, ties to even. */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to zero */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* value*2^24 = m * 2^(e-127-23+24) = m >> (126 - e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round 13 dropped mantissa bits to nearest even */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

/* fp8 e4m3 (OCP "E4M3FN", torch.float8_e4m3fn): 1 sign, 4 exponent bits (bias 7), 3
 * mantissa bits; no infinities, S.1111.111 is NaN, the largest finite value is 448,
 * subnormals are man * 2^-9. */
static inline float fmha_e4m3_to_f32(uint8_t x)
{
    const uint32_t exp = (x >> 3) & 0xfu, man = x & 0x7u;
    float v;
    if (exp == 0xf && man == 0x7)
        v = fmha_bits_f32(0x7fc00000u); /* NaN */
    else if (exp == 0)
        v = (float)man * 0.001953125f; /* man * 2^-9, exact */
    else
        v = fmha_bits_f32(((exp + 120u) << 23) | (man << 20));
    return (x & 0x80u) ? -v : v;
}

/* Round a float to e4m3, to nearest with ties to even, saturating finite values to
 * +-448 (the "satfinite" conversion of the GPU's cvt.rn.satfinite.e4m3x2.f32); NaN stays
 * NaN and infinities saturate too. */
static inline uint8_t fmha_f32_to_e4m3(float f)
{
    const uint32_t u = fmha_f32_bits(f);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
    if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); /* >= 448: saturate (448 itself too) */
    if (a < 0x3c800000u) {
        /* below 2^-6, the smallest normal: a multiple of 2^-9; round |f| * 2^9 to an
         * integer, ties to even (0x3a800000 = 2^-10: below it, zero) */
        if (a <= 0x3a800000u) return sign;
        const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 141u - e; /* |f| * 2^9 = m * 2^(e - 141) */
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint8_t)(sign | q); /* q = 8 carries into the smallest normal's encoding */
    }
    /* normal: rebias the exponent (127 -> 7), round 20 dropped mantissa bits to even */
    const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
    return (uint8_t)(sign | ((r - 0x3c000000u) >> 20));
}

/* Load element i (an element offset) of a tensor of dtype dt as float. */
static inline float fmha_load_f32(const void *base, fmha_dtype_t dt, int64_t i)
{
    switch (dt) {
    case FMHA_DTYPE_FP32: return ((const float *)base)[i];
    case FMHA_DTYPE_FP16: return fmha_f16_to_f32(((const uint16_t *)base)[i]);
    case FMHA_DTYPE_BF16: return fmha_bf16_to_f32(((const uint16_t *)base)[i]);
    case FMHA_DTYPE_FP8_E4M3: return fmha_e4m3_to_f32(((const uint8_t *)base)[i]);
    default: return 0.0f; /* validation admits no other dtype for float tensors */
    }
}

/* Round a float to dtype dt and store it at element offset i. */
static inline void fmha_store_f32(void *base, fmha_dtype_t dt, int64_t i, float v)
{
    switch (dt) {
    case FMHA_DTYPE_FP32: ((float *)base)[i] = v; break;
    case FMHA_DTYPE_FP16: ((uint16_t *)base)[i] = fmha_f32_to_f16(v); break;
    case FMHA_DTYPE_BF16: ((uint16_t *)base)[i] = fmha_f32_to_bf16(v); break;
    case FMHA_DTYPE_FP8_E4M3: ((uint8_t *)base)[i] = fmha_f32_to_e4m3(v); break;
    default: break;
    }
}

/* Round a float to the precision of dt and back (identity for fp32). */
static inline float fmha_round_to(fmha_dtype_t dt, float v)
{
    switch (dt) {
    case FMHA_DTYPE_FP16: return fmha_f16_to_f32(fmha_f32_to_f16(v));
    case FMHA_DTYPE_BF16: return fmha_bf16_to_f32(fmha_f32_to_bf16(v));
    case FMHA_DTYPE_FP8_E4M3: return fmha_e4m3_to_f32(fmha_f32_to_e4m3(v));
    default: return v;
    }
}

#endif /* FMHA_CORE_DTYPE_H */
