/* SPDX-License-Identifier: MIT */
/*
 * wgmma_smem.cuh: the sm90 forward's operands in shared memory (fwd_wgmma.cuh, included
 * after its configuration): the element type of Q, K and V, the swizzled layout that TMA
 * writes and wgmma reads, and the cp.async copies into it (contiguous and paged).
 */
#ifndef FMHA_KERNEL_WGMMA_SMEM_CUH
#define FMHA_KERNEL_WGMMA_SMEM_CUH

/* The element type of Q, K and V in global and shared memory; the bytes of a swizzled
 * row (one block of the layout): 128, or 64 where a head-dim row is only that long (fp8 at
 * hd64); how many elements make such a row and a 16-byte chunk. */
#if FMHA_FP8
typedef unsigned char in_t; /* e4m3 */
#else
typedef elem_t in_t;
#endif
#define SW_BYTES (DQK * (int)sizeof(in_t) < 128 ? 64 : 128)
#define ROW_ELEMS (SW_BYTES / (int)sizeof(in_t))
#define CHUNK_ELEMS (16 / (int)sizeof(in_t))
static_assert(SW_BYTES == 128 || (FMHA_FP8 && DQK == 64 && DV == 64), "the 64-byte swizzle is fp8 hd64's");

/* Where 16-byte chunk c of row r of a swizzled [ROWS, D] tile lies (bytes): the head dim
 * is cut into blocks of ROW_ELEMS elements, a block is ROWS rows of SW_BYTES, and inside
 * it chunk c of row r is stored at chunk c ^ (r % 8) (128-byte swizzle) or c ^ (r / 2 % 4)
 * (64-byte): the pattern TMA writes and wgmma reads (desc_sw128, desc_sw64). */
template <int ROWS>
__device__ __forceinline__ int sw_offset(int r, int c)
{
    constexpr int CPR = SW_BYTES / 16; /* chunks a block row */
    const int swz = SW_BYTES == 128 ? (r & 7) : ((r >> 1) & 3);
    return (c / CPR) * (ROWS * SW_BYTES) + r * SW_BYTES + (((c % CPR) ^ swz) * 16);
}

/* The descriptor of a K-major Q or K operand at p (issue_s). */
__device__ __forceinline__ u64 desc_kmajor(const void *p) { return SW_BYTES == 128 ? desc_sw128(p, 16) : desc_sw64(p); }

/* Copy rows [0, ROWS) of a [ROWS, D] tile (zeros for rows without data) into the
 * swizzled layout (sw_offset). Consecutive threads copy the chunks of one row: their
 * global reads are one contiguous line and their shared-memory writes hit distinct bank
 * groups, so the fill is conflict-free (an unswizzled core-matrix layout puts those
 * chunks 128 bytes apart: an 8-way bank conflict on every copy). The same layout serves
 * as K-major (Q, K: rows are M/N, a block's elements are K) and as MN-major (16-bit V:
 * rows are the keys, i.e. P V's K, a block's 64 elements are its N).
 * FROM_FIRST (Q's copy: rows above the sequence, fwd_params.h top_partial): rows before
 * `first` read as zeros too. A compile-time switch, since that test at run time in the
 * loop that copies every cp.async K/V tile cost group mode 2% (perf-notes run 140). */
template <int ROWS, int D, bool FROM_FIRST = false>
__device__ __forceinline__ void load_sw128(in_t *dst, const in_t *src, long long row_stride, int valid, int ptid,
                                           int first = 0)
{
    const int chunks = D / CHUNK_ELEMS;
    char *base = (char *)dst;
#pragma unroll 4
    for (int i = ptid; i < ROWS * chunks; i += 128) {
        const int r = i / chunks, c = i % chunks;
        const bool in = r < valid && (!FROM_FIRST || r >= first);
        const in_t *g = src + (long long)(in ? r : FROM_FIRST ? first : 0) * row_stride + c * CHUNK_ELEMS;
        cp_async16(base + sw_offset<ROWS>(r, c), g, in ? 16 : 0);
    }
}

#if FMHA_PAGED
/* A paged K or V tile (FMHA_PAGED: fwd_pagedkv, batch_prefill) in load_sw128's layout,
 * each row from its page. Four threads share a row: a pass copies 32 rows, each thread
 * the row's chunks t, t + 4, t + 8, ... (t = ptid % 4). So a thread looks up the page of
 * one row per pass (TN / 32 lookups a tile, issued together before the copies, and kept
 * for V), a warp's copy instruction reads 64 contiguous bytes of each of 8 rows (whole
 * sectors), and its shared-memory writes still fall in distinct bank groups (chunk
 * c ^ (r % 8) over 8 consecutive rows and 4 consecutive chunks covers each group 4
 * times: the 4-wavefront minimum). Rows past the keys or in no page are zeros. */
#define PG_TPR 4                    /* threads per row */
#define PG_ROWS (128 / PG_TPR)      /* rows a pass copies */
#define PG_PASSES (TN / PG_ROWS)    /* passes a tile: rows per thread */
static_assert(TN % PG_ROWS == 0, "the paged producer copies key tiles of whole passes");

typedef struct {
    int page[PG_PASSES], slot[PG_PASSES]; /* page -1: the row reads as zeros */
} tile_pages_t;

/* The pages and slots of the thread's rows of key tile n. */
__device__ __forceinline__ tile_pages_t paged_rows(const fmha_fwd_params_t &p, const seq_t &s, int n, int ptid)
{
    tile_pages_t t;
#pragma unroll
    for (int pass = 0; pass < PG_PASSES; pass++) {
        const int2 ps = key_page_slot(p, s.pages, s.sk, n + pass * PG_ROWS + ptid / PG_TPR);
        t.page[pass] = ps.x, t.slot[pass] = ps.y;
    }
    return t;
}

template <int D>
__device__ __forceinline__ void load_sw128_paged(elem_t *dst, const elem_t *base, long long page_stride,
                                                 long long row_stride, const tile_pages_t &t, int ptid)
{
    constexpr int CH = D / 8; /* 16-byte chunks of a row */
    constexpr int UNROLL = CONSUMERS == 2 ? 2 : 1; /* a row's copies; more spill at the producer's registers */
    static_assert(CH % PG_TPR == 0, "a row's chunks split evenly over its threads");
    char *sbase = (char *)dst;
#pragma unroll
    for (int pass = 0; pass < PG_PASSES; pass++) {
        const int r = pass * PG_ROWS + ptid / PG_TPR, pg = t.page[pass];
        const elem_t *row = base + (pg >= 0 ? pg * page_stride + (long long)t.slot[pass] * row_stride : 0);
#pragma unroll UNROLL
        for (int k = 0; k < CH / PG_TPR; k++) {
            const int c = k * PG_TPR + ptid % PG_TPR;
            cp_async16(sbase + sw_offset<TN>(r, c), row + c * 8, pg >= 0 ? 16 : 0);
        }
    }
}
#define LOAD_K_TILE(dst, n, ps) load_sw128_paged<DQK>(dst, K, p.k_page, p.k_row, ps, ptid)
#define LOAD_V_TILE(dst, n, ps) load_sw128_paged<DV>(dst, V, p.v_page, p.v_row, ps, ptid)
#else
#define LOAD_K_TILE(dst, n, ps) load_sw128<TN, DQK>(dst, K + (long long)(n) * p.k_row, p.k_row, w.s.sk - (n), ptid)
#define LOAD_V_TILE(dst, n, ps) load_sw128<TN, DV>(dst, V + (long long)(n) * p.v_row, p.v_row, w.s.sk - (n), ptid)
#endif

#endif /* FMHA_KERNEL_WGMMA_SMEM_CUH */
