/* SPDX-License-Identifier: MIT */
/*
 * conf_pagedkv.c: paged-KV attention on the GPU against the CPU oracle's math
 * (conformance.h): the pagedkv family (one stage) and split-KV over pages, for page sizes
 * 1, 3, 7, 16, 64, 256 and 2048 (pages in shuffled order), NHD and HND layouts, vLLM block
 * tables and CSR page lists, per-sequence lengths (0, 1, page edges), decode and short
 * query blocks, GQA, masks, ALiBi, soft-cap, sink logits and LSE.
 */
#include <stdio.h>

#include "conformance.h"

const char *const conformance_family = "pagedkv";

void conformance_cases(conformance_t *t)
{
    const int64_t pages[] = {1, 3, 7, 16, 64, 256, 2048};
    const char *masks[] = {"0", "b", "b:100,0", "b:50,0,3"};
    const int64_t sqs[] = {1, 5, 77};
    const int32_t lens[][3] = {{0, 1, 700}, {2048, 16, 17}, {999, 1000, 63}};
    int n = 0;
    for (int pi = 0; pi < 7; pi++)
        for (int layout = 0; layout < 2; layout++)
            for (int lookup = 0; lookup < 2; lookup++)
                for (int split = 0; split < 2; split++, n++) {
                    fwd_config_t c;
                    fwd_config_default(&c);
                    c.family = split ? FMHA_FAMILY_FWD_SPLITKV : FMHA_FAMILY_FWD_PAGEDKV;
                    c.page_size = pages[pi], c.kv_layout = layout, c.kv_lookup = lookup;
                    c.num_splits = split ? (n % 3 == 0 ? 0 : 1 + n % 5) : 0;
                    c.b = 3, c.h = n % 2 ? 8 : 6, c.h_k = n % 2 ? 2 : 6;
                    c.s = sqs[n % 3], c.s_k = 2048;
                    c.seqlens_k = lens[n % 3];
                    c.d = c.d_v = n % 4 == 3 ? 64 : 128;
                    c.dtype = n % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
                    c.mask = masks[n % 4];
                    c.lse = n % 3 != 1, c.sink = n % 5 == 2, c.softcap = n % 7 == 4 ? 6.0 : 0.0;
                    c.bias = n % 6 == 5 ? BIAS_ALIBI_H : BIAS_NONE;
                    c.seed = (uint64_t)n + 501;
                    conformance_fwd_split(t, &c);
                }
    /* head dims beyond 64/128 and page size 1 (SGLang's token-level pages) at longer lengths */
    const int64_t hd[][2] = {{32, 32}, {96, 96}, {192, 128}, {256, 256}};
    for (int i = 0; i < 4; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = i % 2 ? FMHA_FAMILY_FWD_SPLITKV : FMHA_FAMILY_FWD_PAGEDKV;
        c.page_size = i < 2 ? 1 : 32, c.kv_lookup = i % 2, c.kv_layout = i / 2;
        c.b = 2, c.h = 4, c.h_k = 1, c.s = 1, c.s_k = 3000, c.mask = "b";
        c.d = hd[i][0], c.d_v = hd[i][1], c.lse = 1;
        conformance_fwd_split(t, &c);
    }
    /* 64k keys: contiguous and paged, GQA 16, a 16-row query block */
    for (int i = 0; i < 3; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = FMHA_FAMILY_FWD_SPLITKV;
        c.page_size = i == 0 ? 0 : i == 1 ? 16 : 3, c.kv_lookup = i == 2;
        c.b = 2, c.h = 16, c.h_k = 1, c.s = i == 0 ? 16 : 1, c.s_k = 65536, c.mask = i == 1 ? "0" : "b";
        c.d = c.d_v = 128, c.dtype = FMHA_DTYPE_BF16, c.lse = 1;
        conformance_fwd_split(t, &c);
    }
}
