/* SPDX-License-Identifier: MIT */
/*
 * wgmma_producer.cuh: the sm90 forward's producer warpgroup (fwd_wgmma.cuh): the Q tiles'
 * hand-over to the consumers, the K and V boxes by TMA, Q and paged K/V by cp.async or
 * TMA, and fp8's V transpose by warps 1-3.
 */
#ifndef FMHA_KERNEL_WGMMA_PRODUCER_CUH
#define FMHA_KERNEL_WGMMA_PRODUCER_CUH

/* Q_BUFS: how many Q tiles the CTA holds, items taking them in turn (item it in buffer
 * it % Q_BUFS). With one, the producer hands item it + 1 over only once every consumer
 * warpgroup has released item it's Q (its last S), so a warpgroup that finishes an item
 * early waits for the slowest one's last S and then for the next Q's load. With two (16-bit
 * hd64, whose 192-row items leave the top warpgroup a tile or two short of the bottom one
 * under a causal mask: perf-notes run 146), the next item's Q is loaded while this one
 * runs, and a warpgroup goes on to the next item's first key tile as soon as the ring has
 * it. specs.c (wgmma_q_tiles) is the host's copy of the condition. */
#ifndef FMHA_Q_BUFS
#define FMHA_Q_BUFS (!FMHA_FP8 && DV == 64 ? 2 : 1)
#endif
#define Q_BUFS FMHA_Q_BUFS
static_assert(Q_BUFS == 1 || (Q_BUFS == 2 && !STAGED_IN_Q), "one or two Q tiles; O staged in Q's rows needs one");
/* The Q hand-over's slots in the barrier block (eight bytes each; the kernel lays the
 * block out): tile 0's q_full, q_empty, item_full and index, and the first of tile 1's
 * four, which follow o_note (item_full + 6) in the same order. */
#define SLOT_Q_FULL 0
#define SLOT_Q_EMPTY (1 + 4 * STAGES) /* past q_full and the ring's four barriers a stage */
#define SLOT_ITEM (SLOT_Q_EMPTY + 1 + 2 * STAGES) /* past fp8's Vt barriers */
#define SLOT_IDX (SLOT_ITEM + 1)
#define SLOT_Q1 (SLOT_ITEM + 7)
static_assert(Q_BUFS == 1 || (SLOT_Q1 + 4) * 8 <= 256, "the kernel's barriers outgrow specs.c's 256 bytes");

/* A Q tile's hand-over slots: its barriers (full: landed; empty: every consumer thread
 * done with it), its item's (item_full) and the item's index (sched_idx). */
typedef struct {
    u64 *full, *empty, *item;
    int *idx;
} q_slot_t;
/* Q tile qb's slots (0 or 1; the item's it % Q_BUFS), from tile 0's: each of tile 1's lies
 * a constant beyond its tile-0 twin (the SLOT_ positions), so that a consumer's slot is an
 * address computed from its uniform qb. A select between two sets of pointers kept them
 * all live through the tile loop: 90 more bytes of spill in the causal hd64 kernel. */
__device__ __forceinline__ q_slot_t q_slot(const q_slot_t &q0, int qb)
{
    if (Q_BUFS == 1) return q0;
    return {q0.full + qb * (SLOT_Q1 - SLOT_Q_FULL), q0.empty + qb * (SLOT_Q1 + 1 - SLOT_Q_EMPTY),
            q0.item + qb * (SLOT_Q1 + 2 - SLOT_ITEM), q0.idx + qb * 2 * (SLOT_Q1 + 3 - SLOT_IDX)};
}
/* the phase of item it's Q barriers */
__device__ __forceinline__ u32 q_phase(int it) { return ((unsigned)it / Q_BUFS) & 1; }

/* The producer hands each item to the consumers through shared memory: its index in the
 * slot's idx, then one arrival (the leader's) on its item barrier, so that the consumers
 * set up the item (item_at, its operands' scalars) while its Q is still in flight; -1 ends
 * the walk. Before it writes, the Q tile's previous item must have released it (q_empty),
 * which the consumers do after reading the index; `it` counts the items handed over.
 * fp8: the slot's second word carries the item's Q and K descales' product (dq dk), which
 * the consumers read from there instead of loading it: loaded by each consumer at the
 * item's start, it held the item's first S back for a global load's latency, since the
 * softmax's copy (SCALE_FOLD's test of its sign) is chosen before S is issued (perf-notes
 * run 208). The producer's loads are in flight through its wait for the Q tile.
 * Measured (run 208, two calls): hd128 +5% at 512 unmasked, +3.3-3.6% causal, +1.3% at 1k,
 * level to -0.5% from 4k; unmasked hd256 +2% at 512-1k, +0.5-1.8% from 4k. Not in the
 * 192-row hd64 tile, whose producer has 32 registers (fp8 lost 3-13% unmasked with it),
 * nor in masked hd256 (-0.5 to -0.7% from 4k in both calls). FMHA_DESCALE_SLOT=0 turns it
 * off (the bench's A/B). */
#ifndef FMHA_DESCALE_SLOT
#define FMHA_DESCALE_SLOT 1
#endif
#define DESCALE_SLOT (FMHA_DESCALE_SLOT && FMHA_FP8 && TM == 128 && !(FMHA_MASK && DV == 256))
__device__ __forceinline__ void hand_over(int idx, int it, const q_slot_t &q, bool leader, float dq = 1.f,
                                          float dk = 1.f)
{
    const q_slot_t qs = q_slot(q, it % Q_BUFS);
    if (it >= Q_BUFS) mbar_wait(qs.empty, q_phase(it - Q_BUFS));
    if (leader) {
#if DESCALE_SLOT
        ((volatile float *)qs.idx)[1] = dq * dk;
#else
        (void)dq, (void)dk;
#endif
        *(volatile int *)qs.idx = idx;
        mbar_arrive(qs.item);
    }
}

/* Item idx handed over; false (nothing handed over) for an item without rows (group mode). */
__device__ __forceinline__ bool producer_item(const fmha_fwd_params_t &p, int idx, int &it, const q_slot_t &q,
                                              bool leader, item_t &w)
{
    if (!item_at(p, idx, w)) return false;
#if DESCALE_SLOT
    hand_over(idx, it, q, leader, descale_of(p, 0, w.b, w.hk), descale_of(p, 1, w.b, w.hk));
#else
    hand_over(idx, it, q, leader);
#endif
    it++;
    return true;
}

/* The end of the walk: -1 for the consumers. */
__device__ __forceinline__ void producer_end(int it, const q_slot_t &q, bool leader)
{
    hand_over(-1, it, q, leader);
}

/* Thread 0's K and V boxes of ring tile j into its stage, each after the stage's release
 * and with the bytes its barrier expects. (row, head, outer) are the maps' coordinates past
 * the head dim: (key, KV head, batch) contiguous, (slot, KV head, page) paged. */
__device__ __forceinline__ void issue_kv_boxes(const fmha_tma_maps_t &tma, in_t *sK0, in_t *sV0, u64 *full_k,
                                               u64 *full_v, u64 *empty_k, u64 *empty_v, int j, int row, int head,
                                               int outer)
{
    const int st = ring_stage(j);
    ring_wait_free(empty_k, j);
    mbar_expect_tx(&full_k[st], TN * DQK * (int)sizeof(in_t));
    for (int cb = 0; cb < DQK / ROW_ELEMS; cb++)
        tma_load_4d(sK0 + st * TN * DQK + cb * TN * ROW_ELEMS, tma.k, cb * ROW_ELEMS, row, head, outer, &full_k[st]);
    ring_wait_free(empty_v, j);
    mbar_expect_tx(&full_v[st], TN * DV * (int)sizeof(in_t));
    for (int cb = 0; cb < DV / ROW_ELEMS; cb++)
        tma_load_4d(sV0 + st * TN * DV + cb * TN * ROW_ELEMS, tma.v, cb * ROW_ELEMS, row, head, outer, &full_v[st]);
}

/* An item's Q by cp.async from the whole producer warpgroup (group mode, pages), then each
 * thread's arrival on q_full. */
__device__ __forceinline__ void load_q_by_cp_async(const fmha_fwd_params_t &p, const item_t &w, in_t *sQ, u64 *q_full,
                                                   int ptid)
{
    /* rows from the sequence's row 0 on (m0 < 0: top_partial); a row outside reads row 0's
     * address, with no bytes */
    load_sw128<TM, DQK, true>(sQ, (const in_t *)p.q + w.s.q + (long long)w.m0 * p.q_row, p.q_row, w.s.sq - w.m0, ptid,
                              -w.m0);
    cp_async_commit();
    cp_async_wait_all();
    fence_async_shared();
    mbar_arrive(q_full);
}

/* Paged K/V by TMA where the producer's registers allow it: the two-consumer tiles (the
 * three-consumer hd64 tile's producer has 32). The host asks for it by encoding maps
 * (fwd.c encode_page_maps) only for tile_m 128. */
#define PAGED_TMA (FMHA_PAGED && TM == 128)
#if PAGED_TMA
/* The producer's item with K/V by TMA over the page pool (kv_tma). A key tile lies in one
 * page (the page size is a multiple of TN), so thread 0 issues each whole tile as boxes at
 * (dims, slot, head, page); a row in no page (page -1) is out of the map's bounds and lands
 * as zeros, so the caller's page numbers cannot move a read outside the pool. The last
 * tile of a sequence, when partial, goes by cp.async from all 128 producer threads: its
 * rows past the keys must be zeros (a page's unused slots may hold anything, and the
 * masked P = 0 times a non-finite V would still poison the row), and then thread 0 makes
 * the one arrival the barrier expects. j counts the ring's tiles (in and out). */
__device__ __forceinline__ void paged_tiles_by_tma(const fmha_fwd_params_t &p, const fmha_tma_maps_t &tma,
                                                   const item_t &w, elem_t *sK0, elem_t *sV0, u64 *full_k, u64 *full_v,
                                                   u64 *empty_k, u64 *empty_v, int &j, int ptid)
{
    /* the cp.async rows start at the item's KV head (w.s.k, w.s.v); the boxes name it */
    const elem_t *K = (const elem_t *)p.k + w.s.k, *V = (const elem_t *)p.v + w.s.v;
    for (int n = next_tile(-1, w.kt); n >= 0; n = next_tile(n, w.kt), j++) {
        const int st = ring_stage(j);
        if (n + TN <= w.s.sk) { /* a whole tile of keys: thread 0's boxes */
            if (ptid != 0) continue;
            const int2 ps = key_page_slot(p, w.s.pages, w.s.sk, n); /* page -1: zeros */
            issue_kv_boxes(tma, sK0, sV0, full_k, full_v, empty_k, empty_v, j, ps.y, w.hk, ps.x);
            continue;
        }
        const tile_pages_t ps = paged_rows(p, w.s, n, ptid);
        /* Threads 1..127 skipped the whole tiles: let thread 0 issue them first. A parity
         * wait is only exact within one phase of the barrier, and a thread two tiles ahead
         * of the ring would see the release of tile j - 2 STAGES as that of j - STAGES. */
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        ring_wait_free(empty_k, j);
        load_sw128_paged<DQK>(sK0 + st * TN * DQK, K, p.k_page, p.k_row, ps, ptid);
        ring_wait_free(empty_v, j);
        load_sw128_paged<DV>(sV0 + st * TN * DV, V, p.v_page, p.v_row, ps, ptid);
        cp_async_commit();
        cp_async_wait_all();
        fence_async_shared();
        asm volatile("bar.sync 1, 128;\n" ::: "memory"); /* the producer warpgroup's copies have all landed */
        if (ptid == 0) {
            mbar_arrive(&full_k[st]);
            mbar_arrive(&full_v[st]);
        }
    }
}

/* The paged producer's item with K/V by TMA: its Q by cp.async (all 128 threads), then
 * its key tiles (paged_tiles_by_tma); a CTA per item (fwd.c). A function of its own, apart
 * from the cp.async producer's, so that one does not carry this one's registers
 * (perf-notes run 51). */
__device__ __forceinline__ void paged_producer_by_tma(const fmha_fwd_params_t &p, const fmha_tma_maps_t &tma, elem_t *sQ,
                                                      elem_t *sK0, elem_t *sV0, const q_slot_t &q, u64 *full_k,
                                                      u64 *full_v, u64 *empty_k, u64 *empty_v, int ptid)
{
    int j = 0, it = 0;
    item_t w;
    if (producer_item(p, blockIdx.x, it, q, ptid == 0, w)) { /* item 0: Q tile 0 */
        load_q_by_cp_async(p, w, sQ, q.full, ptid);
        paged_tiles_by_tma(p, tma, w, sK0, sV0, full_k, full_v, empty_k, empty_v, j, ptid);
    }
    producer_end(it, q, ptid == 0);
}
#endif

#if FMHA_FP8
/* One V stage (TN keys x DV dims, sw_offset's layout as TMA wrote it) into Vt: DV rows
 * of TN key bytes, K-major in the 128-byte swizzle, keys in P's order (pack_p: position
 * 16h + 4t + i of a 32-key unit holds key 16h + 8(i >> 1) + 2t + (i & 1)). 96 threads
 * (producer warps 1-3) share the groups of 16 head dims, each TN / 32 units of 32 keys
 * x 16 dims. For a unit, one
 * transposing ldmatrix of 16-bit pairs (matrix m: keys 8m..8m+7 of the unit, each row the
 * 16 dims' 16 bytes) gives lane 4g + t, in word m, keys 8m + 2t and 8m + 2t + 1 of dims
 * 2g and 2g + 1; one byte permute of words (0, 1) makes dim 2g's Vt word of keys 2t,
 * 2t + 1, 2t + 8, 2t + 9 -- positions 4t..4t+3 of the unit's first 16 -- another dim
 * 2g + 1's, and words (2, 3) the same for positions 16..31. One stmatrix writes the four
 * 8-row matrices. A lane holds two adjacent dims, so a matrix's rows are one of each
 * pair: rows 2g (g < 4) and 2g + 1 (g >= 4) in one, the others in the other, which puts
 * its 8 rows in distinct bank groups under the swizzle (even rows alone would be 2-way).
 * Both instructions are conflict-free; per 512 bytes a warp issues 2 shared-memory
 * instructions and 4 permutes, where 16-byte loads and 4-byte stores took 5 and 8. */
__device__ __forceinline__ void transpose_v(const in_t *sV, in_t *sVt, int lane, int warp)
{
    const int g = lane / 4;
    /* selectors of the bytes of dim 2g (even) and 2g + 1 (odd) from words (w0, w1) */
    const u32 sel_a = g < 4 ? 0x6420u : 0x7531u, sel_b = g < 4 ? 0x7531u : 0x6420u;
    /* the stmatrix row this lane addresses (matrix m = lane / 8, row r = lane % 8): Vt row
     * 16 dg + vt_row, 16-byte chunk 2c + m / 2 of unit c, swizzled by the row (mod 8) */
    const int m = lane / 8, r = lane % 8;
    const int vt_row = 2 * r + ((m & 1) ^ (r >= 4));
    constexpr int UNITS = TN / 32; /* 32-key units of a head-dim group */
    u32 st_off[UNITS];
#pragma unroll
    for (int c = 0; c < UNITS; c++) st_off[c] = smem_addr(sVt) + vt_row * 128 + (((2 * c + (m >> 1)) ^ (vt_row & 7)) << 4);
    /* a warp's head-dim groups dg = warp, warp + 3, ...: the group's loads all in flight
     * before its stores (one unit at a time, each waiting for its load, ran 2-8% slower
     * than the 4-byte stores) */
#pragma unroll 1
    for (int dg = warp; dg < DV / 16; dg += 3) {
        const u32 ld = smem_addr(sV) + sw_offset<TN>(lane, dg); /* unit c: 32 c rows on */
        u32 w[UNITS][4];
#pragma unroll
        for (int c = 0; c < UNITS; c++) ldsm_x4_trans(w[c], ld + c * 32 * SW_BYTES);
#pragma unroll
        for (int c = 0; c < UNITS; c++)
            stsm_x4(st_off[c] + dg * 16 * 128, __byte_perm(w[c][0], w[c][1], sel_a), __byte_perm(w[c][0], w[c][1], sel_b),
                    __byte_perm(w[c][2], w[c][3], sel_a), __byte_perm(w[c][2], w[c][3], sel_b));
    }
}

/* Producer warps 1-3: each key tile's V, once TMA has landed it, into its Vt stage after
 * the consumers have released that stage; then V is free for the next box and Vt ready.
 * They follow the ring's tiles, not the items: the walk ends at the tile whose stage the
 * producer marks in v_stop (end_transposer) instead of filling it. */
__device__ __forceinline__ void transposer(const in_t *sV0, in_t *sVt0, u64 *full_v, u64 *empty_v, u64 *vt_full,
                                           u64 *vt_empty, const int *v_stop, int ptid)
{
    const int lane = ptid % 32, warp = ptid / 32 - 1;
#if ROWSUM_MMA
    /* Vt's rows DV .. DV + 7 in every stage, once, as 16-byte chunks over the 96 threads:
     * row DV all e4m3 1.0 (0x38), the others 0 (uniform rows: the swizzle moves nothing);
     * fenced for wgmma with the first tile. A row is TN = 128 bytes, one swizzle row. */
    constexpr int ROW_CHUNKS = TN / 16, STAGE_CHUNKS = 8 * ROW_CHUNKS;
    for (int c = ptid - 32; c < STAGES * STAGE_CHUNKS; c += 96) {
        const int st = c / STAGE_CHUNKS, row = c % STAGE_CHUNKS / ROW_CHUNKS;
        const u32 v = row == 0 ? 0x38383838u : 0u;
        *(uint4 *)((char *)(sVt0 + st * V_OPERAND_STAGE + DV * TN) + (c % STAGE_CHUNKS) * 16) = make_uint4(v, v, v, v);
    }
#endif
    for (int j = 0;; j++) {
        const int st = ring_stage(j);
        ring_wait_full(full_v, j);
        if (*(const volatile int *)&v_stop[st]) return;
        ring_wait_free(vt_empty, j);
        transpose_v(sV0 + st * TN * DV, sVt0 + st * V_OPERAND_STAGE, lane, warp);
        fence_async_shared(); /* generic-proxy stores, read next by wgmma */
        mbar_arrive(&vt_full[st]);
        mbar_arrive(&empty_v[st]);
    }
}

/* The producer's end of the transposer's walk at ring tile j: once the transposer has
 * released V(j - STAGES), which it does after reading that stage's v_stop (so the write does
 * not race the read), mark the stage and complete its full_v phase with no box. */
__device__ __forceinline__ void end_transposer(int j, int *v_stop, u64 *full_v, u64 *empty_v)
{
    ring_wait_free(empty_v, j);
    *(volatile int *)&v_stop[ring_stage(j)] = 1;
    mbar_arrive(&full_v[ring_stage(j)]);
}
#endif /* FMHA_FP8 */

#endif /* FMHA_KERNEL_WGMMA_PRODUCER_CUH */
