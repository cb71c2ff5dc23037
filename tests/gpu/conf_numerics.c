/* SPDX-License-Identifier: MIT */
/*
 * conf_numerics.c: numerics under stress (conformance.h), on the CPU backend and on a
 * GPU: huge logits (q scaled by 1e4, fp16 and bf16), rows that see no key (O = 0, LSE =
 * -inf, through the split-KV combine too), NaN and Inf in q, k and v, and NaN in fp8 k
 * (the outputs follow the oracle's non-finite pattern: docs/semantics.md, "Non-finite
 * inputs"), one query row and one key, 64k+ keys in a decode step, a 66k-token prefill
 * under a window, key offsets past 2^31 elements (a padded cache), and head dim 8 where a
 * backend has it.
 */
#include "conformance.h"

const char *const conformance_family = "numerics";

static int on_gpu(const conformance_t *t) { return fmha_context_backend(t->ctx) == FMHA_BACKEND_CUDA; }

static void base(fwd_config_t *c, int n)
{
    fwd_config_default(c);
    c->b = 2, c->h = 4, c->h_k = 2, c->s = 67, c->s_k = 131, c->d = c->d_v = 64, c->lse = 1;
    c->dtype = n % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
    c->seed = 1500 + (uint64_t)n;
}

void conformance_cases(conformance_t *t)
{
    int n = 0;
    /* huge logits: scores of order 1e4 * sqrt(d) */
    const int64_t hd[] = {64, 128};
    const char *masks[] = {"b", "0", "b:32,0"};
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < 3; m++, n++) {
            fwd_config_t c;
            base(&c, n);
            c.q_scale = 1e4, c.d = c.d_v = hd[h], c.mask = masks[m];
            conformance_fwd(t, &c, NULL, NULL, 0);
        }
    /* rows that see no key: bottom-right causal and windows with Sq > Sk, batch, split-KV
     * (their partials are -inf and the combine must skip them) and paged */
    const char *empty_rows[] = {"b", "b:4,0", "b:0,0"};
    for (int m = 0; m < 3; m++)
        for (int fam = 0; fam < 3; fam++, n++) {
            fwd_config_t c;
            base(&c, n);
            c.s = 150, c.s_k = 40, c.mask = empty_rows[m];
            if (fam == 1) c.family = FMHA_FAMILY_FWD_SPLITKV, c.num_splits = 3;
            if (fam == 2) c.family = FMHA_FAMILY_FWD_PAGEDKV, c.page_size = 16;
            conformance_fwd(t, &c, NULL, NULL, 0);
        }
    /* NaN and Inf inputs, plain and split: key 0 is visible to every row (no mask, or a
     * causal mask whose rows all see key 0) */
    const fwd_poison_t poisons[] = {POISON_NAN_Q, POISON_NAN_K, POISON_NAN_V, POISON_INF_V};
    for (int pz = 0; pz < 4; pz++)
        for (int split = 0; split < 2; split++, n++) {
            fwd_config_t c;
            base(&c, n);
            c.poison = poisons[pz], c.mask = split ? "0" : "t";
            if (split) c.family = FMHA_FAMILY_FWD_SPLITKV, c.num_splits = 3;
            conformance_fwd(t, &c, NULL, NULL, 0);
        }
    /* fp8 (e4m3 NaN in k): at key 0, and at key 63, a column that FMHA_POLY_EXP 8
     * exponentiates with the cubic (softmax.cuh poly_exp2) in the kernels that have it
     * (hd256 with a mask): the row must still turn NaN. Bottom-right causal at 130 x 300
     * leaves key tile 0 unmasked for every row, so key 63 goes through the cubic there;
     * unmasked, through MUFU. */
    const int64_t fp8_hd[] = {128, 256}, fp8_key[] = {0, 63};
    const char *fp8_mask[] = {"0", "b"};
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 2; k++)
            for (int m = 0; m < 2; m++, n++) {
                fwd_config_t c;
                base(&c, n);
                c.dtype = FMHA_DTYPE_FP8_E4M3, c.d = c.d_v = fp8_hd[h], c.mask = fp8_mask[m];
                c.s = 130, c.s_k = 300, c.poison = POISON_NAN_K, c.poison_token = fp8_key[k];
                conformance_fwd(t, &c, NULL, NULL, 0);
            }
    /* one query row against one key, and against 64k+ keys (decode) */
    for (int i = 0; i < 2; i++, n++) {
        fwd_config_t c;
        base(&c, n);
        c.s = 1, c.s_k = i ? 65600 : 1, c.h = 8, c.mask = "b";
        if (i) c.family = FMHA_FAMILY_FWD_SPLITKV, c.num_splits = 0, c.d = c.d_v = 128;
        conformance_fwd(t, &c, NULL, NULL, 0);
    }
    if (on_gpu(t)) {
        /* a 66k-token prefill under a window (the naive reference's cost is Sq x Sk) */
        fwd_config_t c;
        base(&c, n++);
        c.b = 1, c.h = 2, c.h_k = 1, c.s = c.s_k = 66000, c.mask = "b:64,0";
        conformance_fwd(t, &c, NULL, NULL, 0);
        /* keys whose element offsets pass 2^31: 70000 keys x 8 heads x a 4096-element row
         * (d 64 plus 4032 elements of padding) */
        base(&c, n++);
        c.b = 1, c.h = c.h_k = 8, c.s = 1, c.s_k = 70000, c.pad = 4032, c.mask = "0";
        c.family = FMHA_FAMILY_FWD_SPLITKV;
        conformance_fwd(t, &c, NULL, NULL, 0);
    } else {
        /* head dim 8: the CPU backend's smallest (the CUDA kernels start at 32) */
        fwd_config_t c;
        base(&c, n++);
        c.d = c.d_v = 8, c.mask = "b";
        conformance_fwd(t, &c, NULL, NULL, 0);
    }
}
