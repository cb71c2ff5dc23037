/* SPDX-License-Identifier: MIT */
/*
 * paged.cuh: where a sequence's keys live in a paged cache (FMHA_PAGED 1: vLLM block
 * table + seqlens_k; 2: FlashInfer/SGLang CSR lists kv_indptr / kv_indices /
 * kv_last_page_len), for any family's params with the fields of fwd_params.h's "Paged
 * K/V". Page sizes are any value >= 1.
 *
 * The lists are the caller's device integers, bounded like cu_seqlens (sequence.cuh):
 * a length is clamped to the table's pages and to seqlen_k, CSR offsets into the
 * indices, a last-page length into 1..page_size; a page index outside the cache makes
 * its keys read as zeros (page_of_entry returns -1), so no access leaves the tensors.
 */
#ifndef FMHA_KERNEL_PAGED_CUH
#define FMHA_KERNEL_PAGED_CUH

/* Sequence b's key count and the start of its page list (an element offset into the
 * block table, or an entry of kv_indices). */
template <typename Params>
__device__ __forceinline__ void paged_sequence(const Params &p, int b, int *sk, long long *first)
{
#if FMHA_PAGED == 1
    const long long cap = (long long)p.table_width * p.page_size;
    long long len = p.seqlens_k ? ((const int *)p.seqlens_k)[b] : p.seqlen_k;
    len = len < 0 ? 0 : len > cap ? cap : len;
    *sk = (int)(len < p.seqlen_k ? len : p.seqlen_k);
    *first = (long long)b * p.table_row;
#elif FMHA_PAGED == 2
    const int *ip = (const int *)p.kv_indptr;
    const int lo = min(max(ip[(long long)b * p.indptr_stride], 0), p.num_indices);
    const int hi = min(max(ip[(long long)(b + 1) * p.indptr_stride], lo), p.num_indices);
    const int last = min(max(((const int *)p.kv_last_page_len)[(long long)b * p.last_stride], 1), p.page_size);
    const long long len = hi > lo ? (long long)(hi - lo - 1) * p.page_size + last : 0;
    *sk = (int)(len < p.seqlen_k ? len : p.seqlen_k);
    *first = lo;
#else
    (void)p, (void)b, (void)sk, (void)first;
#endif
}

/* The integers paged_sequence reads for sequence b, pulled into L2 before the prior
 * grid's end (prefetch_sequence's paged half, sequence.cuh; common.cuh's prefetch_l2).
 * A block table's length is seqlens_k[b], which batch-mode split-KV's sequence_of reads
 * as well: there the same line is asked for twice, one instruction of one thread. */
template <typename Params>
__device__ __forceinline__ void prefetch_paged_sequence(const Params &p, int b)
{
#if FMHA_PAGED == 1
    if (p.seqlens_k) prefetch_l2((const int *)p.seqlens_k + b);
#elif FMHA_PAGED == 2
    prefetch_l2((const int *)p.kv_indptr + (long long)b * p.indptr_stride);
    prefetch_l2((const int *)p.kv_last_page_len + (long long)b * p.last_stride);
#endif
    (void)p, (void)b;
}

/* The q-th entry of the list at `first` (q below the sequence's page count), unchecked. */
template <typename Params>
__device__ __forceinline__ int table_entry(const Params &p, long long first, int q)
{
#if FMHA_PAGED == 1
    return ((const int *)p.block_table)[first + (long long)q * p.table_col];
#elif FMHA_PAGED == 2
    return ((const int *)p.kv_indices)[(first + q) * p.indices_stride];
#else
    (void)p, (void)first, (void)q;
    return -1;
#endif
}

/* An entry as a page of the cache, -1 outside it. */
template <typename Params>
__device__ __forceinline__ int cache_page(const Params &p, int entry)
{
    return entry >= 0 && entry < p.num_pages ? entry : -1;
}

/* The q-th page of the list at `first` (q below the sequence's page count); -1 outside
 * the cache. */
template <typename Params>
__device__ __forceinline__ int page_of_entry(const Params &p, long long first, int q)
{
    return cache_page(p, table_entry(p, first, q));
}

/* Key j[i] of a sequence of sk keys whose page list starts at `first`, for N keys at
 * once: its page and its slot in the page; page -1 past the keys or outside the cache.
 * Every table load goes out before any result is used, so the N lookups cost one memory
 * round trip. (N lookups each behind its own branch made ptxas wait for each load before
 * issuing the next: perf-notes run 110.) The page of a key is a multiply and a shift
 * (page_div, divisor.h), not a division: perf-notes run 114. */
template <int N, typename Params>
__device__ __forceinline__ void key_pages_slots(const Params &p, long long first, int sk, const int (&j)[N],
                                                int2 (&out)[N])
{
    int q[N], entry[N];
#pragma unroll
    for (int i = 0; i < N; i++) q[i] = j[i] >= 0 && j[i] < sk ? (int)fmha_div((unsigned)j[i], p.page_div) : -1;
#pragma unroll
    for (int i = 0; i < N; i++) entry[i] = q[i] >= 0 ? table_entry(p, first, q[i]) : -1;
#pragma unroll
    for (int i = 0; i < N; i++) out[i] = make_int2(cache_page(p, entry[i]), q[i] >= 0 ? j[i] - q[i] * p.page_size : 0);
}

/* key_pages_slots of one key. */
template <typename Params>
__device__ __forceinline__ int2 key_page_slot(const Params &p, long long first, int sk, int j)
{
    const int key[1] = {j};
    int2 out[1];
    key_pages_slots(p, first, sk, key, out);
    return out[0];
}

/* A key's (page, slot) as the addresses of its K and V rows, from head hk's bases K and
 * V (x: K, y: V), computed once per key so that a copy needs one add, not 64-bit
 * multiplies (perf-notes runs 110, 113); page and slot are non-negative here, so unsigned
 * products skip the sign extension (run 115). A key that reads zeros gets the bases with
 * bit 0 set (rows are 16-byte aligned, so the bit is free): copies of it read nothing. */
template <typename Params, typename T>
__device__ __forceinline__ ulonglong2 key_row_addrs(const Params &p, int2 ps, const T *K, const T *V)
{
    if (ps.x < 0) return make_ulonglong2((unsigned long long)K | 1ull, (unsigned long long)V | 1ull);
    const unsigned long long page = (unsigned)ps.x, slot = (unsigned)ps.y;
    return make_ulonglong2((unsigned long long)K + (page * p.k_page + slot * p.k_row) * sizeof(T),
                           (unsigned long long)V + (page * p.v_page + slot * p.v_row) * sizeof(T));
}

#endif /* FMHA_KERNEL_PAGED_CUH */
