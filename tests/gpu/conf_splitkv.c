/* SPDX-License-Identifier: MIT */
/*
 * conf_splitkv.c: the splitkv family's GPU conformance grid (conformance.h): decode and
 * short-prefill shapes against the CPU oracle's math, over split counts (1, 2, 7, the
 * library's choice, more splits than key tiles), head dims, masks (sequences whose
 * split ranges end inside a window, sink tokens), GQA, ALiBi, soft-cap, sink logits, LSE,
 * per-sequence cache lengths (including 0 and 1), cache_batch_idx rows and varlen
 * queries with empty sequences.
 */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

const char *const conformance_family = "splitkv";

void conformance_cases(conformance_t *t)
{
    const fmha_dtype_t dts[] = {FMHA_DTYPE_FP16, FMHA_DTYPE_BF16};
    const int64_t hd[][2] = {{64, 64}, {128, 128}, {256, 256}, {32, 32}, {96, 96}, {192, 128}};
    const char *masks[] = {"0", "b", "b:100,0", "xb:64", "b:300,0,4"};
    const int64_t splits[] = {0, 1, 2, 7, 64};
    const int64_t shapes[][2] = {{1, 1}, {1, 1000}, {1, 4097}, {3, 777}, {17, 2048}, {70, 300}};
    /* per-sequence lengths: empty, one key, a tile edge, beyond half */
    const int32_t lens[][4] = {{0, 1, 128, 700}, {1000, 999, 1, 0}, {4097, 64, 65, 2000}};
    /* (the second also serves the 3-sequence GQA cases below: its first three) */
    int n = 0;
    for (size_t h = 0; h < sizeof hd / sizeof hd[0]; h++)
        for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++, n++) {
                fwd_config_t c;
                fwd_config_default(&c);
                c.family = FMHA_FAMILY_FWD_SPLITKV;
                c.dtype = dts[n % 2], c.d = hd[h][0], c.d_v = hd[h][1], c.mask = masks[m];
                c.s = shapes[s][0], c.s_k = shapes[s][1];
                c.b = 4, c.h = 8, c.h_k = n % 3 == 0 ? 8 : n % 3 == 1 ? 2 : 1;
                c.num_splits = splits[n % 5];
                c.seed = (uint64_t)n + 101;
                c.lse = n % 2;
                c.sink = n % 4 == 1;
                c.softcap = n % 5 == 3 ? 5.0 : 0.0;
                c.bias = n % 7 == 2 ? BIAS_ALIBI_H : n % 7 == 5 ? BIAS_ALIBI_BH : BIAS_NONE;
                c.cache_batch_idx = n % 3 == 2;
                /* per-sequence cache lengths where they fit below s_k */
                if (n % 2 && c.s_k >= 4097) c.seqlens_k = lens[2];
                else if (n % 2 && c.s_k >= 1000) c.seqlens_k = lens[1];
                conformance_fwd_split(t, &c);
            }
    /* GQA packing: groups of 1 to 16 query heads per KV head, positions packed at 16, 32
     * and 64-row strides (seqlen_q 1, 17, 40, 70) */
    const int64_t groups[][2] = {{32, 4}, {16, 1}, {12, 4}, {6, 6}};
    const int64_t sqs[] = {1, 17, 40, 70};
    for (int gi = 0; gi < 4; gi++)
        for (int si = 0; si < 4; si++) {
            fwd_config_t c;
            fwd_config_default(&c);
            c.family = FMHA_FAMILY_FWD_SPLITKV;
            c.b = 3, c.h = groups[gi][0], c.h_k = groups[gi][1], c.s = sqs[si], c.s_k = 1500;
            c.d = c.d_v = si % 2 ? 64 : 128, c.dtype = gi % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
            c.mask = si % 3 == 0 ? "b" : si % 3 == 1 ? "b:90,0" : "0";
            c.num_splits = (gi + si) % 3 == 0 ? 0 : 3, c.lse = 1, c.sink = si == 2;
            c.bias = gi == 1 ? BIAS_ALIBI_BH : BIAS_NONE;
            c.seqlens_k = (gi + si) % 2 ? lens[1] : NULL;
            conformance_fwd_split(t, &c);
        }
    /* varlen queries (group mode) with empty sequences */
    const int32_t lq[] = {0, 1, 5, 33}, lk[] = {300, 0, 1000, 4000};
    for (int v = 0; v < 6; v++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = FMHA_FAMILY_FWD_SPLITKV;
        c.mode = FMHA_MODE_GROUP, c.b = 4, c.h = 8, c.h_k = 2, c.s = 33, c.s_k = 4000;
        c.seqlens_q = lq, c.seqlens_k = lk;
        c.d = c.d_v = v < 3 ? 64 : 128, c.dtype = v % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.mask = v % 3 == 0 ? "b" : v % 3 == 1 ? "b:200,0,2" : "0";
        c.num_splits = v % 2 ? 0 : 5, c.lse = 1, c.sink = v == 4;
        conformance_fwd_split(t, &c);
    }
}
