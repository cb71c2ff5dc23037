/* SPDX-License-Identifier: MIT */
/*
 * wgmma_epilogue.cuh: the sm90 forward's epilogue (fwd_wgmma.cuh): the consumers' named
 * barriers, O through a staging tile and TMA stores, and, at hd256, O staged in the ring's
 * last stage and stored by the producer's idle warp.
 */
#ifndef FMHA_KERNEL_WGMMA_EPILOGUE_CUH
#define FMHA_KERNEL_WGMMA_EPILOGUE_CUH

/* ------------------------------------------------------------------ the epilogue */

/* Named barrier 2 + wg over one consumer warpgroup's 128 threads (0 is __syncthreads, 1
 * the cp.async producer's). The id is a register: chosen by a branch on wg, as immediates,
 * it made ptxas take the tile loop for a divergent region (BRA.DIV before every shuffle,
 * the wgmma descriptors built in vector registers: perf-notes run 88b's signs); a register
 * id only makes ptxas count all 16 barriers as used, which one CTA an SM can spare. */
__device__ __forceinline__ void warpgroup_sync(int wg)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
}

/* Named barrier 2 + CONSUMERS (after the warpgroups' own) over every consumer thread. */
__device__ __forceinline__ void consumers_sync()
{
    asm volatile("bar.sync %0, %1;\n" ::"n"(2 + CONSUMERS), "n"(128 * CONSUMERS) : "memory");
}

#if STAGED_EPILOGUE
/* What block blk of O skips past the staging tile's blocks: in a ring stage, its V lies
 * STAGES K stages past its K (DQK == DV where O is staged in the ring) */
#define O_BLOCK_SKIP(blk)                                                                                       \
    (STAGED_IN_RING && (blk) >= O_LO_BLOCKS ? STAGES * TN * DQK * (int)sizeof(in_t) - O_LO_BLOCKS * O_BLOCK_BYTES \
                                            : 0)

/* Item w's epilogue through the warpgroup's staging tile sOw (STAGED_EPILOGUE): 64 rows a
 * warpgroup, DV / 64 blocks of 64 rows x 128 bytes in the 128-byte swizzle of the O map's
 * boxes (16-byte chunk c of row r at c ^ (r & 7)); in a ring stage (STAGED_IN_RING),
 * O_LO_BLOCKS of them in its K and the rest at the same rows of its V. The thread's rows
 * are wr and wr + 8 of the warpgroup (wr = warp * 16 + g), its columns 8 d + 2 t. The
 * LSE rows are written directly. */
__device__ __forceinline__ void write_o_tile(const fmha_fwd_params_t &p, elem_t *sOw, const item_t &w, const float *o,
                                             const float *row_max, const float *row_sum, int wg, int wr, int t,
                                             float out_scale)
{
#if STAGED_IN_RING
    /* by stmatrix: four 8 x 8 blocks a warp instruction (rows g and g + 8 of two 16-byte
     * chunks) where a 4-byte store wrote one; lane 8 mx + rr addresses row rr of block mx */
    float inv[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        float m, l;
        finish_row(p, w.h, row_max, row_sum, half, out_scale, inv[half], m, l);
        const int i = w.m0 + wg * 64 + wr + 8 * half;
        if ((unsigned)i < (unsigned)w.s.sq) store_lse(p, w.s, i, t, m, l); /* top_partial: i may be < 0 */
    }
    const int lane = threadIdx.x % 32, mx = lane / 8, rr = lane % 8;
    const u32 row = smem_addr(sOw) + ((wr & ~7) + 8 * (mx & 1) + rr) * 128;
#pragma unroll
    for (int d = 0; d < DV / 8; d += 2)
        stsm_x4(row + (d / 8) * O_BLOCK_BYTES + O_BLOCK_SKIP(d / 8) + ((((d % 8) + (mx >> 1)) ^ rr) << 4),
                pack2(o[d * 4] * inv[0], o[d * 4 + 1] * inv[0]), pack2(o[d * 4 + 2] * inv[1], o[d * 4 + 3] * inv[1]),
                pack2(o[d * 4 + 4] * inv[0], o[d * 4 + 5] * inv[0]), pack2(o[d * 4 + 6] * inv[1], o[d * 4 + 7] * inv[1]));
#else
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = wr + 8 * half;
        float inv, m, l;
        finish_row(p, w.h, row_max, row_sum, half, out_scale, inv, m, l);
        char *row = (char *)sOw + r * 128;
#pragma unroll
        for (int d = 0; d < DV / 8; d++)
            *(u32 *)(row + (d / 8) * O_BLOCK_BYTES + O_BLOCK_SKIP(d / 8) + (((d % 8) ^ (r & 7)) << 4) + 4 * t) =
                pack2(o[d * 4 + 2 * half] * inv, o[d * 4 + 2 * half + 1] * inv);
        const int i = w.m0 + wg * 64 + r;
        if ((unsigned)i < (unsigned)w.s.sq) store_lse(p, w.s, i, t, m, l); /* top_partial: i may be < 0 */
    }
#endif
    fence_async_shared(); /* the tile's writes, visible to the copy engine */
}

/* ... through the warpgroup's own staging tile: ctid 0 stores the blocks, and before the
 * next item's writes waits until the copy engine has read them. */
__device__ __forceinline__ void staged_epilogue(const fmha_fwd_params_t &p, const fmha_tma_maps_t &tma, elem_t *sOw,
                                                const item_t &w, const float *o, const float *row_max,
                                                const float *row_sum, int wg, int wr, int t, float out_scale)
{
    const int ctid = threadIdx.x % 128;
    if (ctid == 0) bulk_wait_read(); /* the previous item's stores have read the tile */
    warpgroup_sync(wg);
    write_o_tile(p, sOw, w, o, row_max, row_sum, wg, wr, t, out_scale);
    warpgroup_sync(wg);
    if (ctid == 0) {
#pragma unroll
        for (int blk = 0; blk < DV / 64; blk++)
            if (w.m0 + wg * 64 >= 0) /* rows above the sequence (top_partial): no store */
                tma_store_4d(&tma.o, (char *)sOw + blk * O_BLOCK_BYTES + O_BLOCK_SKIP(blk), blk * 64, w.m0 + wg * 64, w.h,
                         w.b);
        bulk_commit();
    }
}
#endif

#if STAGED_IN_RING
/* The ring's O stores, issued by warp 1 of the producer warpgroup (idle in 16-bit): the
 * consumers write an item's O into its last ring stage and go on to the next item, while
 * this thread stores the rows, waits until the copy engine has read them and gives the
 * stage back to the producer. In the consumers this cost 3-5.5k cycles an item at hd256
 * (perf-notes run 137): issuing a warpgroup's four stores took 2-4.5k (queued, it seems,
 * behind the copy engine's loads), and the stage may not be released before they have
 * read it.
 *
 * The hand-over: warpgroup 0 notes the item (o_note: its stage, first row, head and
 * batch; stage -1 ends the walk), each consumer warpgroup's thread 0 arrives on o_full
 * once its rows are written, and this thread arrives on o_free once it has read the note.
 * Warpgroup 0 waits on o_free for the previous note before writing the next, so there is
 * one note in flight and o_full never runs two phases ahead of this thread. */
__device__ __forceinline__ void ring_o_storer(const fmha_tma_maps_t &tma, const in_t *sK0, u64 *o_full, u64 *o_free,
                                              const volatile int *o_note, u64 *empty_k, u64 *empty_v)
{
    for (u32 k = 0;; k++) {
        mbar_wait(o_full, k & 1);
        const int st = o_note[0], m0 = o_note[1], h = o_note[2], b = o_note[3];
        mbar_arrive(o_free);
        if (st < 0) break;
        const char *stage = (const char *)(sK0 + st * TN * DQK);
#pragma unroll
        for (int wg = 0; wg < CONSUMERS; wg++)
#pragma unroll
            for (int blk = 0; blk < DV / 64; blk++)
                if (m0 + wg * 64 >= 0) /* rows above the sequence (top_partial): no store */
                    tma_store_4d(&tma.o, stage + wg * 64 * 128 + blk * O_BLOCK_BYTES + O_BLOCK_SKIP(blk), blk * 64,
                             m0 + wg * 64, h, b);
        bulk_commit();
        bulk_wait_read();
        mbar_arrive_count(&empty_k[st], 128 * CONSUMERS);
        mbar_arrive_count(&empty_v[st], 128 * CONSUMERS);
    }
    bulk_wait(); /* the CTA's shared memory must outlive the stores that read it */
}

/* Before the n-th hand-over, warpgroup 0 waits until the storer has read note n - 1 (all
 * of it: a wait in one thread's branch cost the tile loop its uniform registers). The
 * caller then meets its warpgroup (warpgroup_sync) before hand_o_to_storer: o_free
 * completes phase n as soon as thread 0 has handed note n over and the storer has read
 * it, and a warp still to test phase n - 1 would then find the barrier in phase n + 1,
 * of the same parity, and wait for good. It did: a hd256 launch whose last CTAs hung
 * with one warp of warpgroup 0 left (perf-notes run 172), since the other three warps
 * do not arrive on what they wait for. */
__device__ __forceinline__ void wait_o_note_free(u64 *o_free, u32 n, int wg_u)
{
    if (wg_u == 0 && n > 0) mbar_wait(o_free, (n - 1) & 1);
}

/* Each consumer thread, its warpgroup's rows written and wait_o_note_free passed by all
 * of warpgroup 0: the n-th hand-over to the storer (stage -1: the end). Warpgroup 0's
 * thread 0 writes note n; each warpgroup's thread 0 arrives. */
__device__ __forceinline__ void hand_o_to_storer(u64 *o_full, volatile int *o_note, int wg_u, int ctid, int st,
                                                 int m0, int h, int b)
{
    if (ctid == 0) {
        if (wg_u == 0) o_note[0] = st, o_note[1] = m0, o_note[2] = h, o_note[3] = b;
        mbar_arrive(o_full);
    }
}
#endif

#endif /* FMHA_KERNEL_WGMMA_EPILOGUE_CUH */
