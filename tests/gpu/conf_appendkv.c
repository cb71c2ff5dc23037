/* SPDX-License-Identifier: MIT */
/*
 * conf_appendkv.c: appendkv on the GPU, then attention over the cache it wrote
 * (conformance.h). The harness checks the appended values and the unrotated key dims bit
 * for bit, the rotated keys and q_rot against REFERENCE.md's RoPE with the accuracy rule,
 * every cache slot outside the appended ones unchanged bit for bit, and the attention's
 * output. Grid: contiguous caches (rows in order or through cache_batch_idx), block
 * tables and CSR lists over pages of 1, 3, 16 and 64 (NHD and HND), no RoPE,
 * interleaved and half-rotated RoPE over 16 dims to the whole head, head dims 32-256 (and
 * 192/128), 1 to 77 new tokens, caches empty before the append or ending on a page edge,
 * GQA, q's positions per row (causal, windows) or all at the cache length.
 */
#include "conformance.h"

const char *const conformance_family = "appendkv";

void conformance_cases(conformance_t *t)
{
    const int64_t pages[] = {0, 0, 1, 3, 16, 64};
    const int64_t hd[][2] = {{128, 128}, {64, 64}, {256, 256}, {32, 32}, {192, 128}, {96, 96}};
    const char *masks[] = {"b", "0", "b:40,0", "t"};
    /* lengths after the append (each >= s_knew): empty before it, a page edge, ragged */
    static const int32_t lens[][3] = {{5, 64, 700}, {77, 78, 200}, {1, 33, 48}};
    const int64_t knew[] = {5, 77, 1};
    int n = 0;
    for (int pi = 0; pi < 6; pi++)
        for (int rope = 0; rope < 3; rope++)
            for (int lookup = 0; lookup < 2; lookup++, n++) {
                if (lookup && pages[pi] == 0) continue; /* CSR lists are paged */
                fwd_config_t c;
                fwd_config_default(&c);
                c.family = pages[pi] ? FMHA_FAMILY_FWD_PAGEDKV : FMHA_FAMILY_FWD_SPLITKV;
                c.page_size = pages[pi], c.kv_lookup = lookup, c.kv_layout = n % 2;
                c.cache_batch_idx = pages[pi] == 0 && pi == 1;
                c.b = 3, c.s_knew = knew[n % 3], c.seqlens_k = lens[n % 3], c.s_k = 1024;
                c.s = n % 4 == 1 ? 1 : c.s_knew;
                c.h = 8, c.h_k = n % 3 == 0 ? 8 : n % 3 == 1 ? 2 : 1;
                c.d = hd[n % 6][0], c.d_v = hd[n % 6][1];
                c.dtype = n % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
                c.rotary_dim = rope == 0 ? 0 : n % 3 == 0 ? c.d : n % 3 == 1 ? 16 : (c.d / 2 / 16) * 16;
                if (c.rotary_dim == 0 && rope) c.rotary_dim = 16;
                c.rotary_interleaved = rope == 1;
                c.mask = masks[n % 4], c.lse = 1;
                c.seed = (uint64_t)n + 1201;
                conformance_fwd(t, &c, NULL, NULL, 0);
            }
    /* a decode step of a serving batch: 64 sequences, one new token each, page 16 */
    static int32_t many[64];
    for (int b = 0; b < 64; b++) many[b] = 1 + (b * 37) % 900;
    for (int i = 0; i < 2; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.family = FMHA_FAMILY_FWD_SPLITKV, c.page_size = 16, c.kv_lookup = i;
        c.b = 64, c.s = 1, c.s_knew = 1, c.seqlens_k = many, c.s_k = 1024, c.h = 32, c.h_k = 8;
        c.d = c.d_v = 128, c.dtype = FMHA_DTYPE_BF16, c.rotary_dim = 128, c.rotary_interleaved = i;
        c.mask = "b", c.lse = 1, c.seed = (uint64_t)i + 1301;
        conformance_fwd(t, &c, NULL, NULL, 0);
    }
}
