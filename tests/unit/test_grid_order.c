/* SPDX-License-Identifier: MIT */
/* test_grid_order.c: kernels/device/grid_order.h's masked-grid order over every layout of
 * up to 40 pairs, groups of 1 to all of them, 1 to 9 m-blocks, 1, 8 or 132 SMs and tails
 * of at most 1, 7 or every pair: each
 * item (m-block, pair) comes exactly once; a group's items run longest-first; the groups
 * are the remainder, then whole ones, then the tail of whole groups; and the tail is the
 * fewest whole groups whose work covers its longest item once an SM (the whole list where
 * none does), unless one more group would take it past its most pairs. */
#include <stdint.h>
#include <stdlib.h>

#include "testing.h"
#include "grid_order.h"

/* The list of one layout checked; 0 when it holds. */
static int wrong_layout(int pairs, int group, int mblocks, int sms, int max_tail)
{
    int head, tail;
    fmha_masked_layout(pairs, group, mblocks, sms, max_tail, &head, &tail);
    int wrong = 0;
    /* the groups: [0, head), whole ones of `group`, then [tail, pairs) of whole groups */
    wrong += head < 0 || head >= group || tail < head || (tail - head) % group != 0;
    const int rest = pairs % group;
    /* a tail of n pairs may grow to the next size, n + group or, from the whole groups,
     * the whole list, where n does not cover and the next size is within max_tail */
#define COVERS(n)   ((long)(n) * (mblocks + 1) >= 2L * sms)
#define NEXT(n)     ((n) + group <= pairs - rest ? (n) + group : pairs)
#define MAY_GROW(n) (!COVERS(n) && NEXT(n) <= max_tail)
    if (pairs <= group) {
        wrong += tail != 0 || head != 0;
    } else {
        const int tail_pairs = tail == 0 ? pairs : pairs - tail;
        wrong += tail == 0 ? head != 0 : head != rest;
        /* it got here by growing from one group, and grows no further */
        for (int n = group; n < tail_pairs; n = NEXT(n)) wrong += !MAY_GROW(n);
        if (tail != 0) wrong += MAY_GROW(tail_pairs);
        wrong += tail_pairs > group && tail_pairs > max_tail;
    }
#undef COVERS
#undef NEXT
#undef MAY_GROW
    char *seen = calloc((size_t)pairs * (size_t)mblocks, 1);
    int last_pair_group = -1, last_mblock = mblocks;
    for (int idx = 0; idx < pairs * mblocks; idx++) {
        int mblock, pair;
        fmha_masked_item(idx, mblocks, pairs, group, head, tail, &mblock, &pair);
        if (mblock < 0 || mblock >= mblocks || pair < 0 || pair >= pairs) {
            wrong++;
            continue;
        }
        wrong += seen[pair * mblocks + mblock]++ != 0;
        /* the group this pair belongs to, by the layout's boundaries */
        const int g = pair < head ? -1 : pair >= tail ? 1 << 30 : (pair - head) / group;
        if (g != last_pair_group) {
            wrong += g < last_pair_group; /* groups in order */
            last_pair_group = g, last_mblock = mblocks;
        }
        wrong += mblock > last_mblock; /* longest-first within a group */
        last_mblock = mblock;
    }
    free(seen);
    return wrong;
}

static void test_every_layout(void)
{
    static const int sms[] = {1, 8, 132};
    int wrong = 0, layouts = 0;
    for (int pairs = 1; pairs <= 40; pairs++)
        for (int group = 1; group <= pairs; group++)
            for (int mblocks = 1; mblocks <= 9; mblocks++)
                for (int s = 0; s < 3; s++)
                    for (int t = 0; t < 3; t++, layouts++) {
                        const int max_tail = t == 0 ? 1 : t == 1 ? 7 : pairs;
                        wrong += wrong_layout(pairs, group, mblocks, sms[s], max_tail) != 0;
                    }
    CHECK(layouts == 40 * 41 / 2 * 9 * 3 * 3);
    CHECK(wrong == 0);
}

/* Groups of 3 pairs over 16 with 64 m-blocks on 132 SMs, the tail unbounded: the
 * remainder of one pair first, the last two groups as one (perf-notes run 142's layout). */
static void test_two_group_tail(void)
{
    int head, tail;
    fmha_masked_layout(16, 3, 64, 132, 16, &head, &tail);
    CHECK(head == 1);
    CHECK(tail == 10);
    int mblock, pair;
    fmha_masked_item(0, 64, 16, 3, head, tail, &mblock, &pair);
    CHECK(mblock == 63 && pair == 0);
    fmha_masked_item(64, 64, 16, 3, head, tail, &mblock, &pair); /* the first whole group */
    CHECK(mblock == 63 && pair == 1);
    fmha_masked_item(16 * 64 - 1, 64, 16, 3, head, tail, &mblock, &pair);
    CHECK(mblock == 0 && pair == 15);
}

/* The bench's shapes on a 50 MB L2 and 132 SMs (K and V at 2 bytes an element): hd128
 * causal 512 (512 pairs of 256 KiB) runs groups of 25; hd256 causal 8k (16 pairs of
 * 8 MiB) groups of one pair, its tail stopped at 4 pairs (37.5 MB of K and V) where 5
 * would cover; hd256 16k (8 pairs of 16 MiB) a tail of 2 (perf-notes runs 181-182). */
static void test_bench_shapes(void)
{
    const int64_t l2 = 50 << 20;
    CHECK(fmha_l2_group(512, 512 * 256 * 2, l2) == 25);
    CHECK(fmha_l2_tail_pairs(512, 512 * 256 * 2, l2) == 150);
    int head, tail;
    const int64_t kv8k = (int64_t)8192 * 512 * 2, kv16k = 2 * kv8k;
    CHECK(fmha_l2_group(16, kv8k, l2) == 1);
    fmha_masked_layout(16, 1, 64, 132, fmha_l2_tail_pairs(16, kv8k, l2), &head, &tail);
    CHECK(head == 0 && tail == 12);
    fmha_masked_layout(8, fmha_l2_group(8, kv16k, l2), 128, 132, fmha_l2_tail_pairs(8, kv16k, l2), &head, &tail);
    CHECK(head == 0 && tail == 6);
}

int main(void)
{
    RUN(test_every_layout);
    RUN(test_two_group_tail);
    RUN(test_bench_shapes);
    TEST_MAIN_END();
}
