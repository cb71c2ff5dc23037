/* SPDX-License-Identifier: MIT */
/*
 * grid_order.h: the order of a masked forward grid's work items, shared by host C (fwd.c
 * lays the groups out, tests/unit/test_grid_order.c checks the order) and the kernels
 * (common.cuh masked_cta_coords, through fwd_params.h's l2_* fields). Include after the
 * params header's integer typedefs.
 *
 * An item is an m-block of one (batch, head) pair. Later m-blocks see more keys (causal),
 * so a masked grid runs longest-first; but a global longest-first order reads each pair's
 * K and V once per m-block at widely spaced times, from HBM when the pairs do not fit in
 * L2 together (short sequences, many heads). So the pairs go in groups whose K and V fit
 * in L2, and within a group every pair's heaviest m-block runs first, then every pair's
 * next one, and so on.
 *
 * A CTA that finishes a group's short items takes the next group's long ones, so the
 * boundaries between groups cost nothing; the list's last group is the launch's tail and
 * must have the work to cover its own longest items. When the remainder of the pairs came
 * last, it often had not (a pair or two): a list-scheduling model put hd256's causal
 * launches at 1.11-1.17x their balanced time from 512 to 8k tokens (perf-notes run 142).
 * So the remainder goes first (`head` pairs), the groups after it have `group` pairs, and
 * the last group, from pair `tail_first`, is as many whole groups as it takes to have
 * that work, as far as their K and V fit in L2 together. Groups are small (an eighth of
 * L2, run 181), so a tail of several still reads K and V about once.
 */
#ifndef FMHA_KERNEL_GRID_ORDER_H
#define FMHA_KERNEL_GRID_ORDER_H

#ifdef __CUDACC__
#define FMHA_GRID_FN __host__ __device__ __forceinline__
#else
#define FMHA_GRID_FN static inline
#endif

/* Item idx of the list (0 <= idx < pairs x mblocks): its m-block and pair. Groups of
 * `group` pairs after a first one of `head` (0: none), the last from pair `tail_first`
 * (a multiple of `group` past `head`) to the end. */
FMHA_GRID_FN void fmha_masked_item(int idx, int mblocks, int pairs, int group, int head, int tail_first, int *mblock,
                                   int *pair)
{
    int first, in_group, r;
    if (idx < head * mblocks) {
        first = 0;
        in_group = head;
        r = idx;
    } else if (idx >= tail_first * mblocks) {
        first = tail_first;
        in_group = pairs - tail_first;
        r = idx - tail_first * mblocks;
    } else {
        const int c = idx - head * mblocks;
        first = head + c / (group * mblocks) * group;
        in_group = group;
        r = c % (group * mblocks);
    }
    *pair = first + r % in_group;
    *mblock = mblocks - 1 - r / in_group;
}

#ifndef __CUDACC_RTC__
/* How many pairs, 1 to `pairs`, have their K and V (kv_bytes a pair) within `bytes`. */
FMHA_GRID_FN int fmha_pairs_within(int64_t pairs, int64_t kv_bytes, int64_t bytes)
{
    int64_t n = kv_bytes > 0 ? bytes / kv_bytes : pairs;
    if (n < 1) n = 1;
    return (int)(n < pairs ? n : pairs);
}

/* The pairs of a group: as many as have their K and V (kv_bytes a pair) in an eighth of L2
 * (l2_bytes), 1 to `pairs`. Half, the first rule (perf-notes run 18: the other half for
 * the Q and O streaming through), was measured too large on the H100 (run 181): at causal
 * 512 its groups read K and V 1.25-1.8 times from HBM (hd256: 304 MB against 201, the
 * HBM 76% busy), and FMHA_L2_BYTES at a quarter of the device's L2 (this eighth) made
 * hd128 causal 512 +12%, hd256 +29%, both at 1k +8%. Past 2k a pair's K and V fill the
 * eighth alone, a group is a pair or two, and the tail (fmha_masked_layout) keeps the
 * balance. */
FMHA_GRID_FN int fmha_l2_group(int64_t pairs, int64_t kv_bytes, int64_t l2_bytes)
{
    return fmha_pairs_within(pairs, kv_bytes, l2_bytes / 8);
}

/* The most pairs the tail may hold: as many as have their K and V in three quarters of
 * L2, at least 1. The tail runs its pairs' heaviest m-blocks together, so their K and V
 * are read side by side: at hd256 causal 16k (8 pairs of 16 MB) a tail of 5 pairs ran 13%
 * slower than one of 2 (run 182). */
FMHA_GRID_FN int fmha_l2_tail_pairs(int64_t pairs, int64_t kv_bytes, int64_t l2_bytes)
{
    return fmha_pairs_within(pairs, kv_bytes, l2_bytes / 4 * 3);
}

/* The layout of `pairs` pairs in groups of `group` (1 <= group <= pairs) whose items are
 * m-blocks of 1..mblocks key tiles, on `sms` SMs: the remainder first (*head pairs), then
 * whole groups; the last group takes in the ones before it, a whole group at a time,
 * until its work covers its own longest item once an SM (its pairs x (mblocks + 1) / 2
 * tiles a pair, against mblocks) or one more group would take it past `max_tail` pairs
 * (fmha_l2_tail_pairs). A group of one pair at 4k (hd256: 32 m-blocks) would otherwise
 * end the launch with 32 items on 132 SMs (run 181, -5%). *tail_first: the last group's
 * first pair; 0, with no head, when the whole list is one group. */
FMHA_GRID_FN void fmha_masked_layout(int pairs, int group, int64_t mblocks, int64_t sms, int max_tail, int *head,
                                     int *tail_first)
{
    const int rest = pairs % group;
    int tail = pairs - group;
    while (tail > 0 && (pairs - tail) * (mblocks + 1) < 2 * sms) {
        const int wider = tail > rest ? tail - group : 0;
        if (pairs - wider > max_tail) break;
        tail = wider;
    }
    *head = tail > 0 ? rest : 0; /* merged into the tail: no head group */
    *tail_first = tail;
}

/* The masked grid of `pairs` pairs (kv_bytes of K and V each) on an L2 of l2_bytes and
 * `sms` SMs: its group size, head and tail, as fwd.c launches it and test_grid_model
 * models it. */
FMHA_GRID_FN void fmha_l2_layout(int pairs, int64_t kv_bytes, int64_t l2_bytes, int64_t mblocks, int64_t sms,
                                 int *group, int *head, int *tail_first)
{
    *group = fmha_l2_group(pairs, kv_bytes, l2_bytes);
    fmha_masked_layout(pairs, *group, mblocks, sms, fmha_l2_tail_pairs(pairs, kv_bytes, l2_bytes), head, tail_first);
}
#endif

#endif /* FMHA_KERNEL_GRID_ORDER_H */
