/* SPDX-License-Identifier: MIT */
/*
 * mask.cuh: REFERENCE.md's mask on the device, for any family's params (fields
 * window_left, window_right, sink_tokens; -1 = unbounded side). Query row i sees key j
 * when j <= i + diag + window_right and (j >= i + diag - window_left or j < sink_tokens),
 * diag = sk - sq for bottom-right alignment, else 0.
 *
 * 32-bit bounds are exact because the host hands the kernels windows clamped to
 * max(seqlen_q, seqlen_k) -- a wider window changes nothing, any key is then in reach --
 * and the CUDA kernels take sequences below 2^30 (rule cuda.seqlen): row + diag +
 * window + a tile stays below 2^31. (Windows go up to 2^31 - 1, docs/rules.md: unclamped,
 * i + diag + window wrapped and hid every key.) The per-row bounds are in 64 bits all
 * the same. The per-tile tests run in the consumers' loop of kernels at their register
 * limit; 64-bit or precomputed forms there cost 3-7% on causal cells (perf-notes run 23).
 * Include after variant.cuh (TM, TN, FMHA_MASK).
 */
#ifndef FMHA_KERNEL_MASK_CUH
#define FMHA_KERNEL_MASK_CUH

#include "common.cuh"

/* The key tiles rows [m0, m0 + TM) visit: [0, sink_end) and [win_begin, end), each
 * boundary TN-aligned but end (next_tile walks them). */
typedef struct {
    int end, win_begin, sink_end;
} key_tiles_t;

/* The next tile of r after n0 (the first when n0 < 0), -1 past the last. */
__device__ __forceinline__ int next_tile(int n0, const key_tiles_t &r) { return next_tile(n0, r.sink_end, r.win_begin, r.end); }

template <typename Params>
__device__ __forceinline__ key_tiles_t key_tiles(const Params &p, int m0, int sk, int diag)
{
    key_tiles_t r = {sk, 0, 0};
#if FMHA_MASK
    if (p.window_right >= 0) {
        const int last = m0 + TM - 1 + diag + p.window_right + 1; /* one past the last key */
        r.end = last < sk ? last : sk;
    }
    if (p.window_left >= 0) {
        const int first = (m0 > 0 ? m0 : 0) + diag - p.window_left; /* m0 < 0: fwd_params.h top_partial */
        r.win_begin = first > 0 ? first / TN * TN : 0;
    }
    r.sink_end = (p.sink_tokens + TN - 1) / TN * TN;
#else
    (void)p, (void)m0, (void)diag;
#endif
    return r;
}

/* Does any element of key tile n0 for rows [m0, m0 + TM) need the mask test? Only tiles
 * crossing the sequence end or a window edge do; the rest skip it. */
template <typename Params>
__device__ __forceinline__ bool tile_needs_mask(const Params &p, int n0, int m0, int sk, int diag)
{
    bool need = n0 + TN > sk;
#if FMHA_MASK
    if (p.window_right >= 0 && n0 + TN - 1 > m0 + diag + p.window_right) need = true;
    if (p.window_left >= 0 && n0 < m0 + TM - 1 + diag - p.window_left) need = true;
#else
    (void)p, (void)m0, (void)diag;
#endif
    return need;
}

/* The end (exclusive) of the keys that any of rows [r_first, r_last] of a sequence of sq
 * query rows can see on the right: a right window (causal) hides every key past the last
 * row's diagonal plus window_right, and rows outside the sequence see none. Key tiles that
 * start there are invisible to all those rows. Unmasked: no end. */
template <typename Params>
__device__ __forceinline__ int visible_keys_end(const Params &p, int r_first, int r_last, int sq, int diag)
{
#if FMHA_MASK
    if (r_first >= sq || r_last < 0) return 0;
    if (r_last > sq - 1) r_last = sq - 1;
    if (p.window_right >= 0) {
        const long long end = (long long)r_last + diag + p.window_right + 1;
        return end < 0 ? 0 : end > 0x7fffffffLL ? 0x7fffffff : (int)end;
    }
#else
    (void)p, (void)r_first, (void)r_last, (void)sq, (void)diag;
#endif
    return 0x7fffffff;
}

/* The per-score test -- row i sees key col when col <= hi and (col >= lo or col <
 * sink_tokens), with [lo, hi] the row's window in 64-bit sums -- is written inline in
 * softmax.cuh's element loop: as a pair of helper functions here it compiled to other
 * PTX (operands reordered, a 64-bit select narrowed) and ptxas then lost 4-8% at hd64
 * causal (perf-notes run 23). */

#endif /* FMHA_KERNEL_MASK_CUH */
