/* SPDX-License-Identifier: MIT */
/*
 * wgmma_loops.cuh: the sm90 forward's tile loops of a consumer warpgroup (fwd_wgmma.cuh):
 * the overlapped loop (a tile's softmax beside the last tile's P V), its trimmed last
 * tile, the serial loop's invisible-tile skip, the ring's releases and the diagnostic
 * build's tile clocks.
 */
#ifndef FMHA_KERNEL_WGMMA_LOOPS_CUH
#define FMHA_KERNEL_WGMMA_LOOPS_CUH

/* FlashAttention-3's overlap inside a warpgroup (INTRA_WG_OVERLAP): the P V of tile j - 1
 * runs on the tensor cores while the warpgroup computes the softmax of tile j. Per tile:
 * issue S(j) = Q K(j)^T, scale O by tile j - 1's correction, issue O += P(j-1) V(j-1),
 * wait for S(j) only, its softmax, then wait for P V and pack P(j). The registers are
 * those of the serial loop (s, o, pa), live together: S(j) is in s while P(j-1) sits in
 * pa. The first tile is peeled (no P V to overlap) and the last P V follows the loop, so
 * that nothing is in flight across a branch of the loop (a wgmma in flight across one
 * makes ptxas serialise them all, perf-notes run 14). K of a stage frees after its S and
 * V after its P V, as in the serial loop; V(j - 1) frees one softmax later than there,
 * which the ring absorbs (its next copy is wanted STAGES tiles on).
 * Where (perf-notes run 72): hd128 (+5-15% unmasked, to +9% causal at 2k-16k) and hd256
 * unmasked (+2-6% from 1k); hd256 causal on 64-key tiles lost 2-13% (and skips invisible
 * tiles there, which this loop cannot), but on 80-key tiles gains 13-14% from 4k (run
 * 85); hd64's three 160-register
 * consumers spill with it, so those keep the serial loop, as does fp8 hd256 (its 128-key
 * tiles spill 138 bytes with it at 224 registers, none without). fp8 hd64 took it on
 * 128-row tiles but runs faster on 192 rows without it (perf-notes run 150). FMHA_WG_OVERLAP=0
 * turns it off (the bench's A/B). */
#define INTRA_WG_OVERLAP (FMHA_WG_OVERLAP && TM == 128 && (DV <= 128 || (!FMHA_MASK && !FMHA_FP8) || TN == 80))

/* In the serial loop, a warpgroup runs only the key tiles its rows can see on the right
 * (visible_keys_end, mask.cuh: causal or a right window, and none for rows past the
 * sequence), then keeps only the ring's handshakes for the item's remaining tiles: the
 * mask would zero their S, softmax and P V. The bound is taken once per item and ends
 * the loop like the item's last tile, so that the loop itself is unchanged (run 22's test
 * of every tile cost hd64 12%; perf-notes run 91). Where tile_m > tile_n, the first
 * warpgroups' rows end before the item's last tile starts: at hd64's 192 x 128 tiles on
 * 512 causal keys a quarter of the warpgroups' tiles, at hd256's 128 x 64 a tile an
 * item, and at hd256's 128 x 80 (the overlapped loop) a tile an item too. fp8 hd256 (128 x
 * 128, such tiles only where Sq != Sk) spills in its loop with it. */
#define SKIP_INVISIBLE (FMHA_MASK && TM > TN)

/* S(j) of the ring's tile j (its first COLS keys) into s, issued and committed, not
 * waited for. */
template <int COLS = TN>
__device__ __forceinline__ void start_s(float *s, const char *sQw, const in_t *sK0, u64 *full_k, int j)
{
    ring_wait_full(full_k, j);
    issue_s<COLS>(s, sQw, sK0 + ring_stage(j) * TN * DQK);
    wgmma_commit();
}

/* S(j) has landed: K's stage is free (unless O is to be staged there: `hold`), and after
 * the item's last S, Q. */
__device__ __forceinline__ void release_k(u64 *empty_k, u64 *q_empty, bool &q_held, int j, bool last, bool hold)
{
    if (!(STAGED_IN_RING && hold)) mbar_arrive(&empty_k[ring_stage(j)]);
    if (last && (!STAGED_IN_Q || STAGED_IN_RING)) { /* staged in Q: Q is freed after the stores */
        mbar_arrive(q_empty);
        q_held = false;
    }
}

/* The diagnostic build's tile clocks (FMHA_PHASE_TILES, on top of FMHA_PHASE_CLOCKS): for
 * the ring's tiles PT_FIRST .. PT_FIRST + 15, each consumer warpgroup's thread 0 notes
 * when it goes to issue S, S has landed, the softmax is done, P V has landed, K had landed
 * (S issued) and V had (P V issued) (clock64, one SM's clock for both warpgroups),
 * reported as "PT" lines: whether the two warpgroups' softmaxes coincide or alternate.
 * Their own switch, because the notes' registers inside the tile loop make ptxas
 * serialise the wgmmas (C7511) in the fp8 hd128 kernel and others: such a build's tile
 * steps are not the kernel's (scripts/phase_clocks.sh warns when ptxas says so). */
#if defined(FMHA_PHASE_CLOCKS) && defined(FMHA_PHASE_TILES)
#define PT_FIRST 40
__device__ long long fmha_phase_tiles[160][2][16][6];
#define PT_NOTE(j, k)                                                                                            \
    do {                                                                                                         \
        if (threadIdx.x % 128 == 0 && blockIdx.x < 160 && (j) >= PT_FIRST && (j) < PT_FIRST + 16)                  \
            fmha_phase_tiles[blockIdx.x][threadIdx.x / 128][(j) - PT_FIRST][k] = clock64();                      \
    } while (0)
#else
#define PT_NOTE(j, k) ((void)0)
#endif

#if INTRA_WG_OVERLAP

/* O = O alpha + P V(j), issued and committed, not waited for. With ROWSUM_PROMOTE, the
 * row sums of the tiles before (O's column DV: quad lane 0's o[DV / 2] and o[DV / 2 + 2],
 * zeros on the other lanes) move into row_sum first, which takes O's alpha too. */
template <int COLS = TN>
__device__ __forceinline__ void start_pv(float *o, float *row_sum, const float *alpha, const u32 *pa, const in_t *sV0,
                                         u64 *v_ready, int j)
{
#if FMHA_RESCALE_SKIP
    rescale_o_if_moved<O_COLS>(o, alpha);
#else
    rescale_o<O_COLS>(o, alpha);
#endif
#if ROWSUM_PROMOTE
    /* row_sum = row_sum alpha + column, column = 0 (column - column: NaN stays NaN), in
     * asm, which updates O's register in place: written from C (= 0.f, or col - col), the
     * column's register got copies around the last k32 step of P V, and ptxas serialised
     * the wgmmas "for insufficient register resources" (C7511; 3.6 KB of spills unmasked;
     * run 162 measured a quarter of the speed causal) */
#pragma unroll
    for (int h = 0; h < 2; h++)
        asm("fma.rn.f32 %0, %0, %2, %1;\n\t"
            "sub.f32 %1, %1, %1;\n"
            : "+f"(row_sum[h]), "+f"(o[DV / 2 + 2 * h])
            : "f"(alpha[h]));
#endif
    ring_wait_full(v_ready, j);
    wgmma_fence();
    issue_pv<COLS>(o, pa, sV0 + ring_stage(j) * V_OPERAND_STAGE);
    wgmma_commit();
}

/* TAIL_TRIM: a warpgroup's last key tile runs on the columns it has. Where the keys it
 * sees end inside that tile (the sequence's end: the kernels below are unmasked), S, the softmax
 * and P V take the first NE keys, NE that end rounded up to 16 and at least 32
 * (heuristics.c's wgmma_computed_keys counts the same), instead of the whole tile: at
 * hd256's 80-key tile an unmasked 512-key item computes 560 keys for 512 (the
 * selector's reason for 64-key tiles there, perf-notes run 101). The columns past NE
 * keep the last tile's stale registers, never read: the softmax, pack and P V of
 * the tile are NE wide. Only where ptxas keeps the kernel as it was: at hd256's 168
 * registers a masked, biased, soft-capped, sink or group-mode kernel spilled more or had
 * its wgmmas serialised (C7511) with the sizes' copies (perf-notes run 185), and so did an
 * LSE kernel under NVRTC's ptxas (run 198; tail_trim.h).
 * FMHA_TAIL_TRIM=0 turns it off (the bench's A/B). */
#ifndef FMHA_TAIL_TRIM
#define FMHA_TAIL_TRIM 1
#endif
#define TAIL_TRIM                                                                                               \
    (FMHA_TAIL_TRIM && INTRA_WG_OVERLAP &&                                                                      \
     FMHA_TAIL_TRIMS(TM, TN, DV, FMHA_FP8, FMHA_MASK, FMHA_LSE, FMHA_BIAS, FMHA_SOFTCAP, FMHA_SINK, FMHA_GROUP, \
                     FMHA_PAGED))

/* The overlapped loop's last tile j (key tile n0) on its first NE keys: S(j) beside the
 * P V of tile j - 1, its softmax, then its own P V. Every wgmma it issues is waited for
 * before it returns, so that none is in flight across the caller's switch between sizes.
 * It repeats the loop's body (and the P V after the loop) with NE for TN: written as one
 * function that both call, the same steps made ptxas serialise the plain unmasked
 * kernel's wgmmas (C7511), which this form does not. */
template <int NE, typename SP>
__device__ __forceinline__ void overlapped_last_tile(const fmha_fwd_params_t &p, const SP &sp, const item_t &w,
                                                     const tile_rows_t &rows, float slope, const elem_t *bias,
                                                     const char *sQw, const in_t *sK0, const in_t *sV0, u64 *full_k,
                                                     u64 *empty_k, u64 *v_ready, u64 *v_done, u64 *q_empty,
                                                     bool &q_held, bool hold_last, float *o, float *s, u32 *pa,
                                                     float *row_max, float *row_sum, float *alpha, int n0, int j)
{
    start_s<NE>(s, sQw, sK0, full_k, j);
    start_pv(o, row_sum, alpha, pa, sV0, v_ready, j - 1);
    wgmma_wait_1(); /* S(j) is done; P V may still run */
    fence_regs<NE / 2>(s);
    release_k(empty_k, q_empty, q_held, j, true, hold_last);
    softmax_of_tile<NE>(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
    wgmma_wait_all();
    fence_regs<O_COLS / 2>(o);
    fence_regs<TN / 2 * (int)sizeof(in_t) / 4>(pa); /* the P V read pa until here */
    mbar_arrive(&v_done[ring_stage(j - 1)]);
    pack_p<NE>(pa, s);
    start_pv<NE>(o, row_sum, alpha, pa, sV0, v_ready, j);
    wgmma_wait_all();
    fence_regs<O_COLS / 2>(o);
    if (!(STAGED_IN_RING && hold_last)) mbar_arrive(&v_done[ring_stage(j)]);
}

/* An item's key tiles for one consumer warpgroup (w.kt: the item's, or its cut); j counts
 * the ring's tiles. hold_last: the last tile's stage is kept (STAGED_IN_RING). */
template <typename SP>
__device__ __forceinline__ void consume_tiles_overlapped(const fmha_fwd_params_t &p, const SP &sp, const item_t &w,
                                                         const tile_rows_t &rows, float slope, const elem_t *bias,
                                                         const char *sQw, const in_t *sK0, const in_t *sV0,
                                                         u64 *full_k, u64 *empty_k, u64 *v_ready, u64 *v_done,
                                                         u64 *q_empty, bool &q_held, bool hold_last, float *o, float *s,
                                                         u32 *pa, float *row_max, float *row_sum, int &j)
{
    int n0 = next_tile(-1, w.kt);
    if (n0 < 0) return;
    float alpha[2];
    int n1 = next_tile(n0, w.kt);
    start_s(s, sQw, sK0, full_k, j);
    wgmma_wait_all();
    fence_regs<TN / 2>(s);
    release_k(empty_k, q_empty, q_held, j, n1 < 0, n1 < 0 && hold_last);
    softmax_of_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
    pack_p(pa, s);
    for (n0 = n1; n0 >= 0; n0 = n1) {
        n1 = next_tile(n0, w.kt);
        j++;
#if TAIL_TRIM
        if (n1 < 0) { /* the last tile, by its width */
#define LAST_TILE(ne)                                                                                            \
    overlapped_last_tile<ne>(p, sp, w, rows, slope, bias, sQw, sK0, sV0, full_k, empty_k, v_ready, v_done, q_empty, \
                             q_held, hold_last, o, s, pa, row_max, row_sum, alpha, n0, j)
            switch ((w.kt.end - n0 + 15) >> 4) { /* the tile's keys in k16 steps */
            case 1: /* 16 keys on 32 columns: a fourth size made ptxas serialise the wgmmas (C7511) */
            case 2: LAST_TILE(32); break;
            case 3: LAST_TILE(48); break;
            case 4: LAST_TILE(64); break;
            default: LAST_TILE(TN); break;
            }
#undef LAST_TILE
            j++;
            return;
        }
#endif
        PT_NOTE(j, 0);
        start_s(s, sQw, sK0, full_k, j);
        PT_NOTE(j, 4);
        start_pv(o, row_sum, alpha, pa, sV0, v_ready, j - 1);
        PT_NOTE(j, 5);
        wgmma_wait_1(); /* S(j) is done; P V may still run */
        fence_regs<TN / 2>(s);
        PT_NOTE(j, 1);
#if STALE_MAX
        const score_refetch_t refetch = {sQw, sK0 + ring_stage(j) * TN * DQK};
        softmax_of_later_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha, refetch);
        release_k(empty_k, q_empty, q_held, j, n1 < 0, n1 < 0 && hold_last);
#else
        release_k(empty_k, q_empty, q_held, j, n1 < 0, n1 < 0 && hold_last);
        softmax_of_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
#endif
        PT_NOTE(j, 2);
        wgmma_wait_all();
        fence_regs<O_COLS / 2>(o);
        PT_NOTE(j, 3);
        fence_regs<TN / 2 * (int)sizeof(in_t) / 4>(pa); /* the P V read pa until here */
        mbar_arrive(&v_done[ring_stage(j - 1)]);
        pack_p(pa, s);
    }
    /* the last tile's P V */
    start_pv(o, row_sum, alpha, pa, sV0, v_ready, j);
    wgmma_wait_all();
    fence_regs<O_COLS / 2>(o);
    if (!(STAGED_IN_RING && hold_last)) mbar_arrive(&v_done[ring_stage(j)]);
    j++;
}
#endif

#endif /* FMHA_KERNEL_WGMMA_LOOPS_CUH */
