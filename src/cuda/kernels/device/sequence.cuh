/* SPDX-License-Identifier: MIT */
/*
 * sequence.cuh: where one (batch, head)'s sequence lives, for any family's params with
 * the forward's layout fields (q/k/v/o/lse strides; cu_seqlens_q, cu_seqlens_k and
 * seqused_k in group mode). Batch mode: b's slice, lengths seqlen_q / seqlen_k. Group
 * mode (FMHA_GROUP): the token offsets cu_seqlens_q[b] and cu_seqlens_k[b], the lengths
 * their differences (seqused_k[b] keys when given).
 *
 * The group-mode integers live on the device and are the caller's: whatever they say,
 * the sequence stays inside the tensors (docs/semantics.md, "Index data"). Offsets are
 * clamped into [0, total tokens], an end before its start makes an empty sequence,
 * seqused_k into [0, allocated keys], and lengths to the problem's maxima (the grid,
 * the bias and the host's window clamp are sized by them). Valid data pass unchanged;
 * check_index_data reports invalid data instead.
 */
#ifndef FMHA_KERNEL_SEQUENCE_CUH
#define FMHA_KERNEL_SEQUENCE_CUH

#include "paged.cuh"

typedef struct {
    int sq, sk;
    long long tq0;            /* the sequence's first query token (group mode; else 0) */
    long long pages;          /* FMHA_PAGED: where its page list starts (paged.cuh) */
    long long q, k, v, o, lse; /* element offsets of row 0 of head h (q, o, lse) or hk (k, v) */
} seq_t;

/* Group mode: sequence b's first token and length from cu_seqlens, bounded by the
 * tensor's tokens and the maximum length (the clamps described above). */
__device__ __forceinline__ void group_rows(const int *cu, int b, int total, int max_len, int *first, int *len)
{
    const int t0 = min(max(cu[b], 0), total), t1 = min(max(cu[b + 1], t0), total);
    *first = t0;
    *len = min(t1 - t0, max_len);
}

template <typename Params>
__device__ __forceinline__ seq_t sequence_of(const Params &p, int b, int h, int hk)
{
    seq_t s;
#if FMHA_GROUP
    const int *cu_q = (const int *)p.cu_seqlens_q, *cu_k = (const int *)p.cu_seqlens_k;
    int tq0, tk0 = 0, sk = 0;
    group_rows(cu_q, b, p.total_q, p.seqlen_q, &tq0, &s.sq);
#if !FMHA_PAGED
    group_rows(cu_k, b, p.total_k, 0x7fffffff, &tk0, &sk); /* the allocated keys, then the used ones */
    if (p.seqused_k) sk = min(max(((const int *)p.seqused_k)[b], 0), sk);
#else
    (void)cu_k;
#endif
    s.tq0 = tq0;
    s.sk = min(sk, p.seqlen_k);
    s.q = s.tq0 * p.q_row;
    s.k = (long long)tk0 * p.k_row;
    s.v = (long long)tk0 * p.v_row;
    s.o = s.tq0 * p.o_row;
    s.lse = s.tq0 * p.lse_row;
#else
    s.tq0 = 0;
    s.sq = p.seqlen_q, s.sk = p.seqlen_k;
    long long kb = b; /* the K/V row */
#if FMHA_SPLIT
    /* a KV cache: per-sequence lengths and rows, bounded like the offsets above (a row
     * outside the cache reads no key) */
    if (p.seqlens_k) s.sk = min(max(((const int *)p.seqlens_k)[b], 0), p.seqlen_k);
    if (p.cache_batch_idx) {
        const int row = ((const int *)p.cache_batch_idx)[b];
        const bool inside = row >= 0 && row < p.cache_rows;
        kb = inside ? row : 0;
        if (!inside) s.sk = 0;
    }
#endif
    s.q = (long long)b * p.q_batch;
    s.k = kb * p.k_batch;
    s.v = kb * p.v_batch;
    s.o = (long long)b * p.o_batch;
    s.lse = (long long)b * p.lse_batch;
#endif
    s.q += (long long)h * p.q_head;
#if FMHA_PAGED
    paged_sequence(p, b, &s.sk, &s.pages); /* the keys live in pages: no sequence offset */
    s.k = 0, s.v = 0;
#endif
    s.k += (long long)hk * p.k_head;
    s.v += (long long)hk * p.v_head;
    s.o += (long long)h * p.o_head;
    s.lse += (long long)h * p.lse_head;
    return s;
}

/* The integers sequence_of reads for sequence b, pulled into L2 before the prior grid's
 * end (common.cuh's prefetch_l2), so that its loads after the wait hit L2. */
template <typename Params>
__device__ __forceinline__ void prefetch_sequence(const Params &p, int b)
{
#if FMHA_GROUP
    prefetch_l2((const int *)p.cu_seqlens_q + b);
#if !FMHA_PAGED
    prefetch_l2((const int *)p.cu_seqlens_k + b);
    if (p.seqused_k) prefetch_l2((const int *)p.seqused_k + b);
#endif
#elif FMHA_SPLIT
    if (p.seqlens_k) prefetch_l2((const int *)p.seqlens_k + b);
    if (p.cache_batch_idx) prefetch_l2((const int *)p.cache_batch_idx + b);
#endif
    prefetch_paged_sequence(p, b); /* paged.cuh: what paged_sequence reads */
    (void)p, (void)b;
}

/* The walk of the row kernels (the split-KV combine, the backward's dot_do_o and
 * convert_dq): grid x over one sequence's (query row, head) items, WARPS_ warps per CTA
 * and a warp per item; grid y the sequence. token: the row's token (b * seqlen_q + i,
 * or in group mode cu_seqlens_q[b] + i, bounded like sequence_of's); sq: the sequence's
 * rows (the item exists when i < sq). */
typedef struct {
    int b, h, i, sq;
    long long token;
} row_item_t;

template <int WARPS_, typename Params>
__device__ __forceinline__ row_item_t row_item(const Params &p)
{
    row_item_t r;
    const long long item = (long long)blockIdx.x * WARPS_ + threadIdx.x / 32;
    r.b = blockIdx.y, r.h = (int)(item % p.heads_q), r.i = (int)(item / p.heads_q);
#if FMHA_GROUP
    int t0;
    group_rows((const int *)p.cu_seqlens_q, r.b, p.total_q, p.seqlen_q, &t0, &r.sq);
    r.token = (long long)t0 + r.i;
#else
    r.sq = p.seqlen_q;
    r.token = (long long)r.b * p.seqlen_q + r.i;
#endif
    return r;
}

/* Element offset of the item's row in a token-major tensor with these batch and row
 * strides (group mode: the token's row). */
__device__ __forceinline__ long long row_offset(const row_item_t &r, long long batch, long long row)
{
#if FMHA_GROUP
    (void)batch;
    return r.token * row;
#else
    return (long long)r.b * batch + (long long)r.i * row;
#endif
}

#endif /* FMHA_KERNEL_SEQUENCE_CUH */
