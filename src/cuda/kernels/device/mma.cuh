/* SPDX-License-Identifier: MIT */
/*
 * mma.cuh: the mma.sync path's building blocks, shared by the kernels that run on it
 * (kernels/fwd/fwd_mma.cuh, kernels/splitkv/decode_mma.cuh): ldmatrix fragment loads,
 * the m16n8k16 MMA in the variant's dtype, cp.async group waits and a tile copy.
 * Include after variant.cuh (FMHA_BF16).
 */
#ifndef FMHA_KERNEL_MMA_CUH
#define FMHA_KERNEL_MMA_CUH

#include "common.cuh"

template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Four 8x8 matrices of 16-bit values from shared memory; lane l gives the address of
 * row l % 8 of matrix l / 8 (16-byte aligned). .trans hands each thread the transposed
 * fragment, which turns row-major V into the column-major B operand of P V. */
__device__ __forceinline__ void ldmatrix_x4(u32 *r, const elem_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 *r, const elem_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c += a b over one m16n8k16 block: fp32 accumulators, fp16 or bf16 operands. */
__device__ __forceinline__ void mma16816(float *c, const u32 *a, const u32 *b)
{
#if FMHA_BF16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#endif
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* cp_async16 that also asks L2 to fetch the whole 256-byte block around the source: for
 * streams read once (a decode's K and V rows), DRAM then serves larger requests. */
__device__ __forceinline__ void cp_async16_l2_256(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_bytes));
}

/* Element (row, col) of a tile in shared memory whose rows are SD elements apart, col a
 * multiple of 8 (one 16-byte chunk). Padded rows (SWZ false, SD = D + 8) keep ldmatrix's
 * eight rows of a chunk in different banks by their skew. Swizzled rows (SWZ, SD = D, D a
 * multiple of 64) stay whole and 128-byte aligned and move each chunk within its 128-byte
 * line instead, chunk ^ (row & 7): the same eight banks apart. A cp.async fill into
 * unaligned padded rows ran 4% under the swizzled layout's rate from HBM (perf-notes run
 * 99), so the kernels whose copies are their bound swizzle (the decode kernel; the 64-row
 * split stage on contiguous caches). With SWZ false the SASS of every caller is as it was. */
/* Head dims whose K and V rows a kernel may swizzle: whole 128-byte lines, and not past
 * 128, where the swizzle's extra ldmatrix bases spilled the decode kernel (hd256: 255
 * registers already). src/core/specs.c (fmha__smem_bytes) is the host's copy. */
#define KV_ROWS_SWIZZLABLE(dqk, dv) ((dqk) % 64 == 0 && (dv) % 64 == 0 && (dqk) <= 128 && (dv) <= 128)

template <int SD, bool SWZ>
__device__ __forceinline__ int tile_offset(int row, int col)
{
    return SWZ ? row * SD + (((col >> 3) ^ (row & 7)) << 3) + (col & 7) : row * SD + col;
}

/* The A fragment of one 16-row slab (rows r0 .. r0 + 15 of sA, row stride SA_) for
 * head-dim block kk: matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
template <int SA_>
__device__ __forceinline__ void ldmatrix_a(u32 *a, const elem_t *sA, int r0, int kk, int mat, int mrow)
{
    ldmatrix_x4(a, sA + (r0 + (mat % 2) * 8 + mrow) * SA_ + kk * 16 + (mat / 2) * 8);
}

/* S of NS 16-row slabs (KEYS columns each) += A K^T over head-dim block kk: a[n] is slab
 * n's A fragment of that block, K row-major in shared memory (row stride SK_) from sK.
 * Each B fragment is loaded once for all NS slabs: a warp that owns several slabs reads
 * K from shared memory once a tile, not once a slab. */
template <int NS, int KEYS, int SK_, bool SWZ = false>
__device__ __forceinline__ void mma_qk_step_slabs(float (*s)[KEYS / 8][4], const u32 (*a)[4], const elem_t *sK, int kk,
                                                  int mat, int mrow)
{
#pragma unroll
    for (int j = 0; j < KEYS / 8; j += 2) {
        /* B of key tiles j and j+1: matrices (tile j, k 0-7), (j, 8-15), (j+1, 0-7), (j+1, 8-15) */
        u32 bf[4];
        ldmatrix_x4(bf, sK + tile_offset<SK_, SWZ>((j + mat / 2) * 8 + mrow, kk * 16 + (mat % 2) * 8));
#pragma unroll
        for (int n = 0; n < NS; n++) {
            mma16816(s[n][j], a[n], bf);
            mma16816(s[n][j + 1], a[n], bf + 2);
        }
    }
}

/* One slab's S += A K^T (mma_qk_step_slabs with NS 1). */
template <int KEYS, int SK_, bool SWZ = false>
__device__ __forceinline__ void mma_qk_step(float (*s)[4], const u32 *a, const elem_t *sK, int kk, int mat, int mrow)
{
    mma_qk_step_slabs<1, KEYS, SK_, SWZ>((float (*)[KEYS / 8][4])s, (const u32 (*)[4])a, sK, kk, mat, mrow);
}

/* O of NS 16-row slabs (DV_ columns each) += P V over KEYS keys: P is each slab's scores
 * after the softmax, in registers (the m16n8 accumulator layout is the m16k16 A-operand
 * layout, so it needs only packing); V is row-major in shared memory (row stride SV_),
 * turned into the column-major B operand by ldmatrix.trans, once for all NS slabs. mat,
 * mrow: the lane's ldmatrix matrix and row. */
template <int NS, int KEYS, int DV_, int SV_, bool SWZ = false>
__device__ __forceinline__ void mma_pv_slabs(float (*o)[DV_ / 8][4], float (*s)[KEYS / 8][4], const elem_t *sV, int mat,
                                             int mrow)
{
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; kk++) {
        u32 a[NS][4];
#pragma unroll
        for (int n = 0; n < NS; n++) {
            a[n][0] = pack2(s[n][2 * kk][0], s[n][2 * kk][1]);
            a[n][1] = pack2(s[n][2 * kk][2], s[n][2 * kk][3]);
            a[n][2] = pack2(s[n][2 * kk + 1][0], s[n][2 * kk + 1][1]);
            a[n][3] = pack2(s[n][2 * kk + 1][2], s[n][2 * kk + 1][3]);
        }
#pragma unroll
        for (int d = 0; d < DV_ / 8; d += 2) {
            /* B of dim tiles d and d+1: matrices (keys 0-7, tile d), (8-15, d), (0-7, d+1), (8-15, d+1) */
            u32 bf[4];
            ldmatrix_x4_trans(bf, sV + tile_offset<SV_, SWZ>(kk * 16 + (mat % 2) * 8 + mrow, (d + mat / 2) * 8));
#pragma unroll
            for (int n = 0; n < NS; n++) {
                mma16816(o[n][d], a[n], bf);
                mma16816(o[n][d + 1], a[n], bf + 2);
            }
        }
    }
}

/* One slab's O += P V (mma_pv_slabs with NS 1). */
template <int KEYS, int DV_, int SV_, bool SWZ = false>
__device__ __forceinline__ void mma_pv(float (*o)[4], float (*s)[4], const elem_t *sV, int mat, int mrow)
{
    mma_pv_slabs<1, KEYS, DV_, SV_, SWZ>((float (*)[DV_ / 8][4])o, (float (*)[KEYS / 8][4])s, sV, mat, mrow);
}

/* One 16-byte chunk of a tile row into shared memory, zero-filled when !ok; STREAM: with
 * the 256-byte L2 prefetch. */
template <bool STREAM>
__device__ __forceinline__ void copy_chunk(elem_t *dst, const elem_t *src, bool ok)
{
    if (STREAM) cp_async16_l2_256(dst, src, ok ? 16 : 0);
    else cp_async16(dst, src, ok ? 16 : 0);
}

/* Copy rows [0, TILE) of a [TILE, D] tile from global (row stride in elements) into
 * shared memory (row stride SD) with THREADS threads, zero-filling rows >= valid (whose
 * address is row 0's: never formed past the tensor). Chunk by chunk, each recomputing its
 * row, column and 64-bit row offset: about 24 instructions per cp.async, but few live
 * registers (the backward at 255 registers spills more with load_tile's walk). */
template <int TILE, int D, int SD, int THREADS, bool STREAM = false, bool SWZ = false>
__device__ __forceinline__ void load_tile_by_chunk(elem_t *dst, const elem_t *src, long long row_stride, int valid,
                                                   int tid)
{
    constexpr int CHUNKS = D / 8; /* 16-byte chunks per row */
    for (int c = tid; c < TILE * CHUNKS; c += THREADS) {
        const int r = c / CHUNKS, k = (c % CHUNKS) * 8;
        copy_chunk<STREAM>(dst + tile_offset<SD, SWZ>(r, k), src + (long long)(r < valid ? r : 0) * row_stride + k, r < valid);
    }
}

/* Whether THREADS threads cover a [TILE, D] tile in whole rows: each thread then keeps one
 * 16-byte column and its rows are THREADS / (D / 8) apart (load_tile's walk, and the paged
 * decode copy's in decode_mma.cuh). */
template <int TILE, int D, int THREADS>
__device__ constexpr bool walks_whole_rows()
{
    return THREADS % (D / 8) == 0 && TILE % (THREADS / (D / 8)) == 0;
}

/* load_tile_by_chunk's copy, but when the threads split evenly into whole rows each
 * thread keeps one 16-byte column and walks its rows by a fixed step: one 64-bit add per
 * chunk. The per-chunk arithmetic had made the batch-1 decode kernel issue-bound
 * (perf-notes run 58). */
template <int TILE, int D, int SD, int THREADS, bool STREAM = false, bool SWZ = false>
__device__ __forceinline__ void load_tile(elem_t *dst, const elem_t *src, long long row_stride, int valid, int tid)
{
    constexpr int CHUNKS = D / 8;
    if constexpr (walks_whole_rows<TILE, D, THREADS>()) {
        constexpr int STEP = THREADS / CHUNKS; /* rows one pass covers */
        const int r0 = tid / CHUNKS, k = (tid % CHUNKS) * 8;
        const elem_t *g = src + (long long)r0 * row_stride + k;
        const long long step = (long long)STEP * row_stride;
#pragma unroll
        for (int i = 0; i < TILE / STEP; i++, g += step) {
            const bool ok = r0 + i * STEP < valid;
            copy_chunk<STREAM>(dst + tile_offset<SD, SWZ>(r0 + i * STEP, k), ok ? g : src + k, ok);
        }
    } else {
        load_tile_by_chunk<TILE, D, SD, THREADS, STREAM, SWZ>(dst, src, row_stride, valid, tid);
    }
}

#endif /* FMHA_KERNEL_MMA_CUH */
