/* SPDX-License-Identifier: MIT */
/*
 * wgmma_items.cuh: the sm90 forward's work items (fwd_wgmma.cuh): what an item is, where
 * the grid's list puts it, and the persistent CTAs' item scheduler (an atomic counter).
 */
#ifndef FMHA_KERNEL_WGMMA_ITEMS_CUH
#define FMHA_KERNEL_WGMMA_ITEMS_CUH

/* ------------------------------------------------------------------ work items */

/* One work item: TM query rows of one (batch, head), where its operands live and the key
 * tiles it visits. */
typedef struct {
    int b, h, hk, m0, diag;
    seq_t s;
    key_tiles_t kt;
} item_t;

/* Item `idx` of the grid's list: masked, longest-first within L2 groups of heads
 * (masked_cta_coords); unmasked, the m-blocks of one (batch, head) next to each other so
 * that the CTAs running together share its K and V in L2. False when the item has no
 * rows (group mode: a sequence shorter than the longest). */
__device__ __forceinline__ bool item_at(const fmha_fwd_params_t &p, int idx, item_t &w)
{
    const int mblocks = (p.seqlen_q + TM - 1) / TM, pairs = p.batch * p.heads_q;
    int mblock;
#if FMHA_MASK
    masked_cta_coords(idx, mblocks, p.heads_q, pairs, p.l2_pairs, p.l2_head_pairs, p.l2_tail_pair, &mblock, &w.b, &w.h);
#else
    (void)pairs;
    mblock = idx % mblocks;
    w.b = idx / mblocks / p.heads_q;
    w.h = idx / mblocks % p.heads_q;
#endif
    w.hk = w.h / p.group;
    w.s = sequence_of(p, w.b, w.h, w.hk);
#if FMHA_MASK
    /* top_partial (fwd_params.h): the m-blocks shifted up by whole warpgroups, so that the
     * sequence's partial block is its first; rows above 0 read as zeros and are not stored */
    w.m0 = mblock * TM - (p.top_partial ? (TM - w.s.sq % TM) % TM / 64 * 64 : 0);
#else
    w.m0 = mblock * TM;
#endif
    w.diag = p.bottom_right ? w.s.sk - w.s.sq : 0;
    w.kt = key_tiles(p, w.m0, w.s.sk, w.diag);
    return w.m0 < w.s.sq;
}

#if FMHA_FP8
/* An fp8 input's descale for (b, hk) (fwd_params.h); 1 when absent. */
__device__ __forceinline__ float descale_of(const fmha_fwd_params_t &p, int i, int b, int hk)
{
    const float *d = (const float *)p.descale[i];
    return d ? d[b * p.descale_batch[i] + hk * p.descale_head[i]] : 1.f;
}
#endif

/* ------------------------------------------------------------------ the item scheduler */

/* A CTA per item (sched_slot -1): item blockIdx.x. Persistent (the host launches one CTA
 * per SM when there are more items): a CTA starts with item blockIdx.x and takes each next
 * one from a counter, in list order (FlashAttention-3's dynamic scheduler): whichever CTA
 * frees first takes the next, so a list of unequal items (causal, heaviest first) balances
 * as the hardware's CTA scheduler would balance a CTA per item, while the producer loads
 * the next item's Q and K beside the current one's softmax. A static walk could not
 * balance a long causal list (perf-notes run 20); where the items are alike, the host may
 * give the launch no slot, and then the CTAs walk statically (fetch_next_item).
 *
 * The counters live in the module: FMHA_SCHED_SLOTS pairs (the next item, the CTAs that
 * have fetched their last), zero at load. The host gives launches the slots in turn, so
 * that launches in flight together on several streams count apart; the last CTA of a
 * launch to fetch past the end zeroes its pair again, when every fetch of the launch has
 * returned. Only the TMA producer (one thread) fetches: the cp.async producers run a CTA
 * per item (fwd.c). */
__device__ unsigned int fmha_fwd_sched[FMHA_SCHED_SLOTS][2];

/* The item after the current one, idx. Without a slot (sched_slot -1) the walk is static,
 * idx + gridDim.x: the host's choice for a persistent grid where that measured ahead of the
 * counter (fwd.c walks_statically), and past the end with a CTA per item. Else the
 * counter's next, counted from gridDim.x since the first round is blockIdx.x. On this
 * (TMA) path the grid is at most the SM count either way (fwd.c), so idx + gridDim.x
 * cannot overflow.
 *
 * The caller is the TMA producer, lane 0 alone. With FMHA_UNIFORM_FETCH (fwd_wgmma.cuh)
 * the counter's value passes through a one-lane warp reduction, whose result is a uniform
 * register: the item's coordinates and the walk's test then stay uniform, and so do the
 * operands of the producer's TMA boxes. From the atomic's own vector register, ptxas built
 * the whole producer loop on vector registers, with five R2UR before each box (perf-notes
 * runs 204-205). */
__device__ __forceinline__ int fetch_next_item(const fmha_fwd_params_t &p, int idx)
{
    if (p.sched_slot < 0) return idx + (int)gridDim.x;
    const int next = (int)atomicAdd(&fmha_fwd_sched[p.sched_slot][0], 1u);
    return (FMHA_UNIFORM_FETCH ? __reduce_max_sync(1u, next) : next) + (int)gridDim.x;
}

/* After the CTA's fetch past the end: the launch's last such CTA zeroes the slot for the
 * next launch that takes it. */
__device__ __forceinline__ void retire_sched_slot(const fmha_fwd_params_t &p)
{
    if (p.sched_slot < 0) return;
    unsigned int *c = fmha_fwd_sched[p.sched_slot];
    if (atomicAdd(&c[1], 1u) == gridDim.x - 1) {
        atomicExch(&c[0], 0u);
        atomicExch(&c[1], 0u);
    }
}

#endif /* FMHA_KERNEL_WGMMA_ITEMS_CUH */
