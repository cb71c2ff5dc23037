/* SPDX-License-Identifier: MIT */
/* test_grid_order.c: kernels/device/grid_order.h's masked-grid order over every layout of
 * up to 40 pairs, groups of 1 to all of them, 1 to 9 m-blocks and 1, 8 or 132 SMs: each
 * item (m-block, pair) comes exactly once; a group's items run longest-first; the groups
 * are the remainder, then whole ones, then the tail of one or two; and the tail merges
 * exactly where its work cannot cover its longest item. */
#include <stdint.h>
#include <stdlib.h>

#include "testing.h"
#include "grid_order.h"

/* The list of one layout checked; 0 when it holds. */
static int wrong_layout(int pairs, int group, int mblocks, int sms)
{
    int head, tail;
    fmha_masked_layout(pairs, group, mblocks, sms, &head, &tail);
    int wrong = 0;
    /* the groups: [0, head), whole ones of `group`, then [tail, pairs) of one or two */
    wrong += head < 0 || head >= group || tail < head || (tail - head) % group != 0;
    const int tail_pairs = pairs - tail, merged = group * (mblocks + 1) < 2 * sms && pairs > group;
    if (tail == 0) wrong += head != 0 || tail_pairs > 2 * group || (pairs > group && !merged);
    else wrong += tail_pairs != (merged ? 2 * group : group) || head != pairs % group;
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
                for (int s = 0; s < 3; s++, layouts++) wrong += wrong_layout(pairs, group, mblocks, sms[s]) != 0;
    CHECK(layouts == 40 * 41 / 2 * 9 * 3);
    CHECK(wrong == 0);
}

/* The bench's hd256 causal 8k on an H100 (16 pairs in groups of 3, 64 m-blocks, 132
 * SMs): the remainder of one pair first, the last two groups as one (perf-notes run 142). */
static void test_bench_shape(void)
{
    int head, tail;
    fmha_masked_layout(16, 3, 64, 132, &head, &tail);
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

int main(void)
{
    RUN(test_every_layout);
    RUN(test_bench_shape);
    TEST_MAIN_END();
}
