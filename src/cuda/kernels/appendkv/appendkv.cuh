/* SPDX-License-Identifier: MIT */
/*
 * appendkv.cuh: the appendkv family's kernel. Writes token t of each sequence's k_new /
 * v_new into the cache at position L_b + t (appendkv_params.h), rotating the first
 * rotary_dim dims of each key (RoPE, REFERENCE.md "Append-KV and RoPE"), and rotates q
 * into q_rot. Memory-bound: a thread moves one 16-byte chunk (8 elements) of one row;
 * grid y picks the sequence, grid x the tensor and the chunks of its rows: K's blocks,
 * then V's, then q's (p.blocks_k, p.blocks_kv), each range sized to its tensor's units
 * (units_of_row: half-rotated RoPE gives a thread both chunks of a pair).
 *
 * The rotation is computed in fp32 (x0 c - x1 s as one product and one fused multiply-add),
 * then rounded to the cache's type. The CPU oracle computes it in double: the two differ by
 * at most an fp32 rounding before the final one, inside the accuracy rule
 * (tests/gpu/conf_appendkv.c checks the rotated dims by that rule, the rest bit for bit).
 * perf-notes runs 37-38 have the bandwidth of this and the earlier variants.
 *
 * The lengths, rows and page lists are the caller's device integers: a write whose
 * position falls outside the sequence's pages (block table width, CSR list) or the
 * contiguous cache, or whose page or cache row is out of range, is dropped, and a rotary
 * position is clamped to the table; no access leaves the described tensors.
 *
 * Variants: FMHA_BF16, FMHA_HDIM_QK, FMHA_HDIM_V, FMHA_PAGED (0 contiguous, 1 block
 * table, 2 CSR), FMHA_ROPE (0 none, 1 interleaved, 2 half-rotated), FMHA_WARPS.
 */
#include "appendkv_params.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 32
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 0
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 4
#endif
#ifndef FMHA_ROPE
#define FMHA_ROPE 0
#endif
#include "variant.cuh" /* first: the helpers below use its types and tile macros */

#include "common.cuh"
#include "paged.cuh"

#define NTHREADS (32 * FMHA_WARPS)
static_assert(DQK % 8 == 0 && DV % 8 == 0, "rows copy in 16-byte chunks of 8 elements");

/* Where sequence b's appended tokens go: the first position, the positions' bound, and
 * the cache row (contiguous) or page list (paged). */
typedef struct {
    int first_pos, end_pos; /* positions [first_pos, end_pos) have a slot */
    long long row_or_list;
} target_t;

__device__ __forceinline__ target_t target_of(const fmha_appendkv_params_t &p, int b)
{
    target_t g;
#if FMHA_PAGED == 1
    const long long cap = min((long long)p.table_width * p.page_size, 0x7fffffffll);
    g.first_pos = (int)min(max((long long)((const int *)p.seqlens_k)[b], 0ll), cap);
    g.end_pos = (int)cap;
    g.row_or_list = (long long)b * p.table_row;
#elif FMHA_PAGED == 2
    int len;
    long long list;
    paged_sequence(p, b, &len, &list); /* the lists hold the sequence after the append */
    g.first_pos = max(len - p.seqlen_new, 0);
    g.end_pos = len;
    g.row_or_list = list;
#else
    const int row = p.cache_batch_idx ? ((const int *)p.cache_batch_idx)[b] : b;
    const bool inside = row >= 0 && row < p.cache_rows;
    g.first_pos = min(max(((const int *)p.seqlens_k)[b], 0), p.cache_len);
    g.end_pos = inside ? p.cache_len : 0; /* a row outside the cache takes no write */
    g.row_or_list = inside ? row : 0;
#endif
    return g;
}

/* Element offset of (position pos, kv head hk) in K (v = false) or V; -1 when the slot
 * does not exist. */
__device__ __forceinline__ long long cache_offset(const fmha_appendkv_params_t &p, const target_t &g, int pos, int hk,
                                                  bool v)
{
    if (pos < g.first_pos || pos >= g.end_pos) return -1;
#if FMHA_PAGED
    const int2 ps = key_page_slot(p, g.row_or_list, g.end_pos, pos);
    if (ps.x < 0) return -1;
    return ps.x * (v ? p.v_page : p.k_page) + (long long)ps.y * (v ? p.v_row : p.k_row) +
           (long long)hk * (v ? p.v_head : p.k_head);
#else
    return g.row_or_list * (v ? p.v_batch : p.k_batch) + (long long)pos * (v ? p.v_row : p.k_row) +
           (long long)hk * (v ? p.v_head : p.k_head);
#endif
}

/* 8 elements of a 16-byte chunk as floats, and back (round to nearest even). */
__device__ __forceinline__ void unpack8(const uint4 &u, float *x)
{
    const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        x[2 * i] = to_float((elem_t)(w[i] & 0xffffu));
        x[2 * i + 1] = to_float((elem_t)(w[i] >> 16));
    }
}
__device__ __forceinline__ uint4 pack8(const float *x)
{
    return make_uint4(pack2(x[0], x[1]), pack2(x[2], x[3]), pack2(x[4], x[5]), pack2(x[6], x[7]));
}

/* Rotate the pair (x0, x1) by (c, s): x0' = x0 c - x1 s, x1' = x0 s + x1 c. fp32: the
 * double version of run 37 (the oracle's operations) spent more time converting to and
 * from double than moving the bytes. */
__device__ __forceinline__ void rotate_pair(float &x0, float &x1, float c, float s)
{
    const float r0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
    const float r1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
    x0 = r0, x1 = r1;
}

/* N consecutive entries of a rotary table row from entry i: float4 loads when the host
 * found the tables contiguous and 16-byte aligned (rope_vec), else one by one. */
template <int N>
__device__ __forceinline__ void table_entries(const fmha_appendkv_params_t &p, const float *row, long long col, int i,
                                              float *out)
{
    if (p.rope_vec) {
#pragma unroll
        for (int k = 0; k < N; k += 4) *(float4 *)(out + k) = *(const float4 *)(row + i + k);
    } else {
#pragma unroll
        for (int k = 0; k < N; k++) out[k] = row[(i + k) * col];
    }
}

/* The units of work of a row of D dims: its 16-byte chunks, except that half-rotated
 * RoPE pairs element e with e + rotary_dim / 2, a chunk away, so there the first
 * rotary_dim / 16 units each rotate a pair of chunks (ch, ch + rotary_dim / 16) and the
 * rest copy the chunks past the rotary dims: every thread has work, none reads a chunk
 * twice. */
__device__ __forceinline__ int units_of_row(const fmha_appendkv_params_t &p, int D, bool rotate)
{
    return FMHA_ROPE == 2 && rotate ? D / 8 - p.rotary_dim / 16 : D / 8;
}

/* Unit u of a row: the chunk it writes, whether it rotates, and its source chunks (for
 * half-rotated RoPE the pair's second chunk too). Loaded before the sequence's length and
 * page are looked up, so the loads of the data overlap that chain (perf-notes run 53). */
typedef struct {
    uint4 x, y;
    int chunk;
    bool rotated;
} unit_t;

__device__ __forceinline__ unit_t load_unit(const fmha_appendkv_params_t &p, const elem_t *src, int u, bool rotate)
{
    unit_t w;
    w.chunk = u;
    w.rotated = false;
#if FMHA_ROPE == 1
    w.rotated = rotate && u * 8 < p.rotary_dim; /* interleaved: pairs (2i, 2i + 1) inside chunk u */
#elif FMHA_ROPE == 2
    const int half = p.rotary_dim / 16; /* chunks in each half of the rotary dims */
    w.rotated = rotate && u < half;
    if (rotate && !w.rotated) w.chunk = u + half; /* a chunk past the rotary dims */
    if (w.rotated) w.y = __ldg((const uint4 *)(src + (u + half) * 8));
#endif
    (void)p, (void)rotate;
    w.x = __ldg((const uint4 *)(src + w.chunk * 8));
    return w;
}

/* Unit w into the row at dst, its rotary pairs rotated to position pos. The rotary tables
 * are read here, after the page lookup: read before it, their 16 values held registers
 * across the lookup and gained nothing measurable (perf-notes run 53). */
__device__ __forceinline__ void store_unit(const fmha_appendkv_params_t &p, const unit_t &w, elem_t *dst, int pos)
{
#if FMHA_ROPE
    if (w.rotated) {
        const int prow = min(max(pos, 0), p.max_pos - 1); /* the table's rows bound the position */
        const float *cs = (const float *)p.rotary_cos + (long long)prow * p.cos_row;
        const float *sn = (const float *)p.rotary_sin + (long long)prow * p.sin_row;
        float x[8];
        unpack8(w.x, x);
#if FMHA_ROPE == 1 /* interleaved: pair m of the chunk is (x[2m], x[2m + 1]), table entry 4 chunk + m */
        float c[4], s[4];
        table_entries<4>(p, cs, p.cos_col, 4 * w.chunk, c);
        table_entries<4>(p, sn, p.sin_col, 4 * w.chunk, s);
#pragma unroll
        for (int m = 0; m < 4; m++) rotate_pair(x[2 * m], x[2 * m + 1], c[m], s[m]);
        *(uint4 *)(dst + w.chunk * 8) = pack8(x);
#else /* half-rotated: pair m is (x[m], y[m]), dims 8 chunk + m and that + rotary_dim / 2, entry 8 chunk + m */
        float y[8], c[8], s[8];
        unpack8(w.y, y);
        table_entries<8>(p, cs, p.cos_col, 8 * w.chunk, c);
        table_entries<8>(p, sn, p.sin_col, 8 * w.chunk, s);
#pragma unroll
        for (int m = 0; m < 8; m++) rotate_pair(x[m], y[m], c[m], s[m]);
        *(uint4 *)(dst + w.chunk * 8) = pack8(x);
        *(uint4 *)(dst + (w.chunk + p.rotary_dim / 16) * 8) = pack8(y);
#endif
        return;
    }
#endif
    (void)p, (void)pos;
    *(uint4 *)(dst + w.chunk * 8) = w.x;
}

extern "C" __global__ void __launch_bounds__(NTHREADS) fmha_appendkv(const fmha_appendkv_params_t p)
{
    wait_prior_grids();
    const int b = blockIdx.y, x = blockIdx.x;
    const int which = x < p.blocks_k ? 0 : x < p.blocks_kv ? 1 : 2; /* K, V, q into q_rot */
    const int first = which == 0 ? 0 : which == 1 ? p.blocks_k : p.blocks_kv;
    const long long item = (long long)(x - first) * NTHREADS + threadIdx.x;
    if (which < 2) {
        const int units = units_of_row(p, which == 0 ? DQK : DV, which == 0);
        const int u = (int)(item % units);
        const long long r = item / units; /* (t, hk) of sequence b */
        if (r >= (long long)p.seqlen_new * p.heads_kv) return;
        const int t = (int)(r / p.heads_kv), hk = (int)(r % p.heads_kv);
        const unit_t w =
            which == 0
                ? load_unit(p, (const elem_t *)p.k_new + b * p.kn_batch + t * p.kn_row + hk * p.kn_head, u, true)
                : load_unit(p, (const elem_t *)p.v_new + b * p.vn_batch + t * p.vn_row + hk * p.vn_head, u, false);
        const target_t g = target_of(p, b);
        const int pos = g.first_pos + t;
        const long long at = cache_offset(p, g, pos, hk, which == 1);
        if (at < 0) return;
        if (which == 0) /* two calls, so each store is a st.global (one merged pointer made it generic) */
            store_unit(p, w, (elem_t *)p.k + at, pos);
        else
            store_unit(p, w, (elem_t *)p.v + at, pos);
        return;
    }
    /* q's blocks: the host launches them only when q is given (blocks_per_sequence) */
    const int units = units_of_row(p, DQK, true);
    const int u = (int)(item % units);
    const long long r = item / units; /* (i, h) of sequence b */
    if (r >= (long long)p.seqlen_q * p.heads_q) return;
    const int i = (int)(r / p.heads_q), h = (int)(r % p.heads_q);
    const unit_t w = load_unit(p, (const elem_t *)p.q + b * p.q_batch + i * p.q_row + h * p.q_head, u, true);
    const target_t g = target_of(p, b);
    store_unit(p, w, (elem_t *)p.q_rot + b * p.qr_batch + i * p.qr_row + h * p.qr_head,
               g.first_pos + (p.q_per_row ? i : 0));
}
