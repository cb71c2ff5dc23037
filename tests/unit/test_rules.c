/* SPDX-License-Identifier: MIT */
/*
 * test_rules.c: every key rule. For each rule, a key that is valid except for one thing
 * must be refused by exactly that rule, with a message; the valid starting keys pass.
 */
#include "../../src/core/rules.h"
#include "testing.h"

static fmha_key_t fwd_key(void)
{
    fmha_key_t k;
    fmha__key_default(&k); /* fwd fp16 128/128 sm80 mmasync m128 n64 w4 s2 */
    return k;
}

typedef struct rule_case {
    const char *rule;
    fmha_key_t k;
} rule_case_t;

static void expect(const char *rule, fmha_key_t k)
{
    char why[256] = "";
    const key_rule_t *r = fmha__key_check(&k, why, sizeof why);
    if (!r || strcmp(r->id, rule) != 0) {
        char name[512];
        fmha__key_name(&k, name, sizeof name);
        printf("  %s: expected rule %s, got %s (%s)\n", name, rule, r ? r->id : "none", why);
        CHECK(0);
        return;
    }
    CHECK(why[0] != '\0');
}

static void test_valid_keys_pass(void)
{
    fmha_key_t k = fwd_key();
    char why[256];
    CHECK(fmha__key_check(&k, why, sizeof why) == NULL);
    k.arch = KA_SM90, k.pipeline = KPIPE_WGMMAWS, k.tile_m = 128, k.tile_n = 128, k.warps = 12, k.dtype = KD_FP8;
    CHECK(fmha__key_check(&k, why, sizeof why) == NULL);
}

static void test_each_rule(void)
{
    fmha_key_t k;
#define CASE(rule, ...) \
    k = fwd_key();      \
    __VA_ARGS__;        \
    expect(rule, k)
    CASE("arch.known", k.arch = 9);
    CASE("family.known", k.family = 42);
    CASE("enum.range", k.mask = 7);
    CASE("pipeline.arch", k.pipeline = KPIPE_WGMMAWS, k.tile_m = 128, k.warps = 12);
    CASE("dtype.arch", k.dtype = KD_FP8);
    CASE("dtype.bwd", k.arch = KA_SM90, k.family = KF_BWD_DOT_DO_O, k.dtype = KD_FP8, k.tile_m = 32, k.tile_n = 0);
    CASE("dtype.arch", k.dtype = KD_FP32); /* fp32 runs on the cpu backend only */
    CASE("dtype.fp8_features", k.arch = KA_SM90, k.dtype = KD_FP8);
    CASE("hdim.shape", k.hdim_qk = 100);
    CASE("hdim.pair", k.hdim_qk = 128, k.hdim_v = 64);
    CASE("tile.m", k.tile_m = 96);
    CASE("tile.n", k.tile_n = 40);
    CASE("tile.warps", k.warps = 0, k.tile_m = 128);
    CASE("smem.fit", k.tile_n = 256, k.stages = 4);
    CASE("regs.fit", k.tile_n = 192, k.stages = 1);
    CASE("dbias.bias", k.dbias = 1);
    CASE("det.bwd", k.deterministic = 1);
    CASE("paged.family", k.paged = KP_VLLM);
    CASE("paged.family", k.family = KF_PAGEDKV);
    CASE("rope.appendkv", k.rope = KR_HALF);
    CASE("prefill.group", k.family = KF_PREFILL, k.paged = KP_CSR);
    CASE("scoreless.features", k.family = KF_COMBINE, k.tile_n = 0, k.mask = KMASK_CAUSAL, k.max_splits_log2 = 7);
    CASE("appendkv.batch", k.family = KF_APPENDKV, k.tile_n = 0, k.mode = KM_GROUP);
    CASE("inference.dropout", k.family = KF_SPLITKV, k.dropout = 1, k.max_splits_log2 = 7);
    CASE("splits.range", k.family = KF_SPLITKV, k.max_splits_log2 = 0);
    CASE("splits.range", k.max_splits_log2 = 3);
    CASE("bwd.lse", k.family = KF_BWD_DQ_DK_DV, k.tile_m = 64, k.tile_n = 128, k.warps = 8, k.lse = 1);
    CASE("even_k.batch", k.even_k = 1, k.mode = KM_GROUP);
#undef CASE
    /* every rule in the table has a case above */
    const char *covered = "arch.known family.known enum.range pipeline.arch dtype.arch dtype.bwd "
                          "dtype.fp8_features hdim.shape hdim.pair tile.m tile.n tile.warps smem.fit regs.fit dbias.bias "
                          "det.bwd paged.family rope.appendkv prefill.group scoreless.features appendkv.batch "
                          "inference.dropout splits.range bwd.lse even_k.batch";
    for (int i = 0; i < fmha__num_key_rules; i++) {
        if (!strstr(covered, fmha__key_rules[i].id)) printf("  rule %s has no test\n", fmha__key_rules[i].id);
        CHECK(strstr(covered, fmha__key_rules[i].id) != NULL);
    }
    CHECK(fmha__num_key_rules >= 21);
}

int main(void)
{
    RUN(test_valid_keys_pass);
    RUN(test_each_rule);
    TEST_MAIN_END();
}
