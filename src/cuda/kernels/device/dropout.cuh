/* SPDX-License-Identifier: MIT */
/*
 * dropout.cuh: REFERENCE.md's dropout on the device, bit for bit the CPU oracle's
 * (src/core/philox.c): element e = ((b * Hq + h) * Sq_max + i) * Sk_max + j (local
 * indices in group mode) is kept iff word e % 4 of Philox4x32-10, keyed by the seed, at
 * counter (e / 4, offset), is >= drop_threshold. The forward and the backward call the
 * same function, so they see the same mask. Params: the forward's drop_* fields.
 */
#ifndef FMHA_KERNEL_DROPOUT_CUH
#define FMHA_KERNEL_DROPOUT_CUH

#include "common.cuh"

/* Philox4x32-10: ten rounds of two 32x32 -> 64-bit multiplies and a Weyl key schedule. */
__device__ __forceinline__ void philox4x32_10(u32 c[4], u32 k0, u32 k1)
{
#pragma unroll
    for (int round = 0; round < 10; round++) {
        const u32 lo0 = 0xD2511F53u * c[0], hi0 = __umulhi(0xD2511F53u, c[0]);
        const u32 lo1 = 0xCD9E8D57u * c[2], hi1 = __umulhi(0xCD9E8D57u, c[2]);
        const u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0, c[1] = lo1, c[2] = n2, c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

/* The element index of (b, h, i, j). */
template <typename Params>
__device__ __forceinline__ unsigned long long dropout_element(const Params &p, int b, int h, int i, int j)
{
    return (((unsigned long long)b * p.heads_q + h) * (unsigned long long)p.seqlen_q + i) * (unsigned long long)p.seqlen_k + j;
}

/* Is element e kept? */
template <typename Params>
__device__ __forceinline__ bool dropout_keep(const Params &p, unsigned long long e)
{
    const unsigned long long blk = e >> 2;
    u32 c[4] = {(u32)blk, (u32)(blk >> 32), p.drop_offset[0], p.drop_offset[1]};
    philox4x32_10(c, p.drop_seed[0], p.drop_seed[1]);
    const int w = (int)(e & 3);
    const u32 word = w == 0 ? c[0] : w == 1 ? c[1] : w == 2 ? c[2] : c[3];
    return word >= p.drop_threshold;
}

/* Elements e and e + 1 (one Philox call when they share a block of four). */
template <typename Params>
__device__ __forceinline__ void dropout_keep2(const Params &p, unsigned long long e, bool *k0, bool *k1)
{
    if ((e & 3) == 3) {
        *k0 = dropout_keep(p, e);
        *k1 = dropout_keep(p, e + 1);
        return;
    }
    const unsigned long long blk = e >> 2;
    u32 c[4] = {(u32)blk, (u32)(blk >> 32), p.drop_offset[0], p.drop_offset[1]};
    philox4x32_10(c, p.drop_seed[0], p.drop_seed[1]);
    const int w = (int)(e & 3);
    const u32 a = w == 0 ? c[0] : w == 1 ? c[1] : c[2], n = w == 0 ? c[1] : w == 1 ? c[2] : c[3];
    *k0 = a >= p.drop_threshold;
    *k1 = n >= p.drop_threshold;
}

/* Drop elements of one slab's P (the m16n8 accumulator layout, softmax.cuh: rows i0 and
 * i0 + 8, columns n0 + 8 jj + 2 t + e) of (b, h): a dropped one becomes 0; kept ones stay
 * unscaled (the epilogue scales O by rp_keep). COLS: the tile's columns. */
template <int COLS, typename Params>
__device__ __forceinline__ void apply_dropout(float *s, const Params &p, int b, int h, int i0, int n0, int t)
{
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const unsigned long long row = dropout_element(p, b, h, i0 + 8 * half, n0 + 2 * t);
#pragma unroll
        for (int jj = 0; jj < COLS / 8; jj++) {
            bool k0, k1;
            dropout_keep2(p, row + jj * 8, &k0, &k1);
            if (!k0) s[jj * 4 + 2 * half] = 0.f;
            if (!k1) s[jj * 4 + 2 * half + 1] = 0.f;
        }
    }
}

/* The keep mask's rows [m0, m0 + TM_) of (b, h) (rows < Sq_max): for i < sq the keep bit
 * of every key j < sk, 0 past sk and for the rows past sq (group mode), as the CPU
 * oracle writes it. A debugging output: one Philox call per element. */
template <int TM_, int THREADS, typename Params>
__device__ __forceinline__ void write_keep_mask(const Params &p, int b, int h, int m0, int sq, int sk, int tid)
{
    unsigned char *mask = (unsigned char *)p.dropout_mask + (long long)b * p.mask_batch + (long long)h * p.mask_head;
    const int rows = min(TM_, p.seqlen_q - m0);
    for (long long c = tid; c < (long long)rows * p.seqlen_k; c += THREADS) {
        const int r = (int)(c / p.seqlen_k), j = (int)(c % p.seqlen_k), i = m0 + r;
        const bool keep = i < sq && j < sk && dropout_keep(p, dropout_element(p, b, h, i, j));
        mask[(long long)i * p.mask_row + (long long)j * p.mask_col] = keep ? 1 : 0;
    }
}

#endif /* FMHA_KERNEL_DROPOUT_CUH */
