/* SPDX-License-Identifier: MIT */
/*
 * conf_prefill.c: batch_prefill on the GPU against the CPU oracle's math (conformance.h):
 * ragged queries (cu_seqlens_q, empty sequences included) over a paged cache, page sizes
 * 1, 3, 16, 64, 128, 256 and 2048 (pages in shuffled order; from 128, for the hd128 wgmma
 * kernel, whole key tiles by TMA), NHD and HND, block tables and CSR
 * lists, chunked prefill (fewer queries than keys, bottom-right causal), queries past
 * their keys, GQA, windows with sink tokens, ALiBi, soft-cap, sink logits and LSE. On
 * sm90 each case runs on both pipelines (the wgmma kernel's paged producer and the
 * mma.sync kernel), forced by name.
 */
#include "conformance.h"

const char *const conformance_family = "prefill";

void conformance_cases(conformance_t *t)
{
    const int64_t pages[] = {1, 3, 16, 64, 2048};
    const char *masks[] = {"b", "0", "b:100,0,3", "t", "xb:31"};
    const int64_t hd[] = {128, 64, 256};
    /* per-sequence query and key lengths: chunked prefill (sq < sk), a whole prompt
     * (sq == sk), empty queries, empty caches, queries past their keys */
    static const int32_t lq[][5] = {{77, 0, 300, 1, 33}, {5, 200, 0, 33, 1}, {300, 17, 64, 0, 250}};
    static const int32_t lk[][5] = {{700, 5, 300, 1, 2048}, {5, 700, 0, 16, 900}, {300, 64, 63, 7, 251}};
    int n = 0;
    for (int pi = 0; pi < 5; pi++)
        for (int layout = 0; layout < 2; layout++)
            for (int lookup = 0; lookup < 2; lookup++, n++) {
                fwd_config_t c;
                fwd_config_default(&c);
                c.family = FMHA_FAMILY_BATCH_PREFILL, c.mode = FMHA_MODE_GROUP;
                c.page_size = pages[pi], c.kv_layout = layout, c.kv_lookup = lookup;
                c.b = 5, c.seqlens_q = lq[n % 3], c.seqlens_k = lk[n % 3];
                c.s = 300, c.s_k = 2048;
                c.h = n % 2 ? 8 : 6, c.h_k = n % 2 ? 2 : n % 4 == 0 ? 6 : 1;
                c.d = c.d_v = hd[n % 3];
                c.dtype = n % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
                c.mask = masks[n % 5];
                c.lse = n % 3 != 1, c.sink = n % 5 == 2, c.softcap = n % 7 == 4 ? 6.0 : 0.0;
                c.bias = n % 6 == 5 ? BIAS_ALIBI_H : n % 6 == 3 ? BIAS_ALIBI_BH : BIAS_NONE;
                c.seed = (uint64_t)n + 901;
                conformance_fwd_pipelines(t, &c, 1);
            }
    /* head dims the wgmma kernel has no shape for (mma.sync only), page size 1 and 7 */
    const int64_t odd[][2] = {{32, 32}, {96, 96}, {192, 128}, {192, 192}};
    for (int i = 0; i < 4; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = FMHA_FAMILY_BATCH_PREFILL, c.mode = FMHA_MODE_GROUP;
        c.page_size = i % 2 ? 7 : 1, c.kv_lookup = i % 2, c.kv_layout = i / 2;
        c.b = 3, c.seqlens_q = lq[i % 3], c.seqlens_k = lk[i % 3], c.s = 300, c.s_k = 2048;
        c.h = 4, c.h_k = 2, c.mask = i % 2 ? "b" : "0";
        c.d = odd[i][0], c.d_v = odd[i][1], c.lse = 1, c.seed = (uint64_t)i + 977;
        conformance_fwd_pipelines(t, &c, 1);
    }
    /* pages that hold whole key tiles (128 and 256 tokens, hd128 and hd256): the wgmma
     * kernel copies K/V by TMA, a box per page, and the partial last tile by cp.async */
    for (int i = 0; i < 8; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = FMHA_FAMILY_BATCH_PREFILL, c.mode = FMHA_MODE_GROUP;
        c.page_size = i % 2 ? 256 : 128, c.kv_lookup = i / 2 % 2, c.kv_layout = i / 4;
        c.b = 5, c.seqlens_q = lq[i % 3], c.seqlens_k = lk[i % 3], c.s = 300, c.s_k = 2048;
        c.h = 8, c.h_k = i % 3 ? 2 : 8, c.d = c.d_v = i == 5 ? 256 : 128;
        c.dtype = i % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.mask = masks[i % 5], c.lse = 1, c.softcap = i == 3 ? 6.0 : 0.0, c.sink = i == 6;
        c.seed = (uint64_t)i + 1201;
        conformance_fwd_pipelines(t, &c, 1);
    }
    /* a serving-sized step: 16 prompts of mixed length, page 16 and 64, causal and not */
    static const int32_t mq[16] = {1, 2048, 37, 512, 900, 3, 1500, 64, 255, 700, 16, 1024, 128, 333, 1, 1200};
    for (int i = 0; i < 2; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = FMHA_FAMILY_BATCH_PREFILL, c.mode = FMHA_MODE_GROUP;
        c.page_size = i ? 64 : 16, c.kv_lookup = i, c.b = 16, c.seqlens_q = mq, c.seqlens_k = mq;
        c.s = 2048, c.s_k = 2048, c.h = 8, c.h_k = 2, c.mask = i ? "0" : "b";
        c.d = c.d_v = 128, c.dtype = FMHA_DTYPE_BF16, c.lse = 1, c.seed = (uint64_t)i + 991;
        conformance_fwd_pipelines(t, &c, 1);
    }
}
