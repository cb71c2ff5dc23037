/* SPDX-License-Identifier: MIT */
/*
 * test_select.c: the heuristics (a decision table of pure functions) and the selector's
 * choices on a table of problems, forced kernels, the tuning database, "no kernel", and
 * explain output.
 */
#include <math.h>
#include <stdlib.h>

#include "../../src/core/heuristics.h"
#include "../../src/core/specs.h"
#include "../../src/cuda/family.h"
#include "bwd_case.h"
#include "fwd_case.h"
#include "testing.h"

static void test_heuristic_table(void)
{
    CHECK(fmha__heur_padding_waste(1024, 128) == 0.0);
    CHECK(fabs(fmha__heur_padding_waste(1000, 128) - 24.0 / 1024.0) < 1e-12);
    CHECK(fabs(fmha__heur_padding_waste(1, 64) - 63.0 / 64.0) < 1e-12);
    CHECK(fmha__heur_wave_efficiency(132, 132, 1) == 1.0);
    CHECK(fabs(fmha__heur_wave_efficiency(133, 132, 1) - (133.0 / 132.0) / 2.0) < 1e-12);
    CHECK(fmha__heur_wave_efficiency(264, 132, 2) == 1.0);
    hw_t h100 = {132, 233472, 65536};
    fmha_key_t k;
    fmha__key_default(&k); /* mmasync fp16 hd128 128x64 w4 s2: 96 KiB smem, 192 accumulators */
    k.arch = KA_SM90;
    CHECK(fmha__heur_occupancy(&k, &h100) == 2);
    k.pipeline = KPIPE_WGMMAWS, k.tile_m = 128, k.tile_n = 128, k.warps = 12; /* 160 KiB smem */
    CHECK(fmha__heur_occupancy(&k, &h100) == 1);
    /* wgmma beats mma.sync on the same work */
    work_t w = {2, 8, 1024, 1024, 0.5, 8};
    fmha_key_t mma;
    fmha__key_default(&mma);
    CHECK(fmha__heur_cost(&k, &w, &h100) < fmha__heur_cost(&mma, &w, &h100));
    /* 128 CTAs leave most of 132 SMs x 2 slots idle: the 64-row tile fills twice as many
     * and wins */
    fmha_key_t small = mma;
    small.tile_m = 64, small.tile_n = 64;
    CHECK(fmha__heur_cost(&small, &w, &h100) < fmha__heur_cost(&mma, &w, &h100));
    /* with many waves: a tile past 160 accumulators (128x64 at hd128: 192) pays the
     * measured spill penalty against 128x32 (160); a very narrow tile (64x16) pays for
     * reloading K/V */
    work_t big = {8, 16, 4096, 4096, 1.0, 16};
    fmha_key_t narrow_n = mma;
    narrow_n.tile_n = 32;
    CHECK(fmha__heur_cost(&narrow_n, &big, &h100) < fmha__heur_cost(&mma, &big, &h100));
    fmha_key_t thin = small;
    thin.tile_n = 16;
    CHECK(fmha__heur_cost(&small, &big, &h100) < fmha__heur_cost(&thin, &big, &h100));
    /* wgmma at hd256: unmasked the 80-key tile, which runs its last tile on the keys it
     * has (run 185), but for kernels that compute whole tiles (with a bias or LSE, here)
     * the 64-key one at 512 (512 keys are 8 tiles of 64 or 7 of 80 with 48 keys of padding;
     * LSE kernels do not trim since NVRTC's ptxas serialised their wgmmas with it, run 198);
     * causal the 80-key tile from 512 on (perf-notes runs 85, 101 and 148, 16k tokens) */
    fmha_key_t n64 = k;
    n64.hdim_qk = n64.hdim_v = 256, n64.tile_n = 64;
    fmha_key_t n80 = n64;
    n80.tile_n = 80;
    fmha_key_t c64 = n64, c80 = n80, b64 = n64, b80 = n80, l64 = n64, l80 = n80;
    c64.mask = c80.mask = KMASK_CAUSAL;
    b64.bias = b80.bias = KB_ELEMENTWISE;
    l64.lse = l80.lse = 1;
    CHECK(k.mode == KM_BATCH && k.bias == KB_NONE && !k.lse && !k.softcap && !k.sink && k.paged == KP_NONE);
    for (int64_t s = 512; s <= 16384; s *= 2) {
        const work_t full = {16384 / s, 8, s, s, 1.0, 8}, causal = {16384 / s, 8, s, s, (s + 1) / (2.0 * s), 8};
        CHECK(fmha__heur_cost(&n80, &full, &h100) < fmha__heur_cost(&n64, &full, &h100));
        CHECK((fmha__heur_cost(&b80, &full, &h100) < fmha__heur_cost(&b64, &full, &h100)) == (s >= 1024));
        CHECK((fmha__heur_cost(&l80, &full, &h100) < fmha__heur_cost(&l64, &full, &h100)) == (s >= 1024));
        CHECK(fmha__heur_cost(&c80, &causal, &h100) < fmha__heur_cost(&c64, &causal, &h100));
    }
    /* the split-KV decode kernel on a contiguous cache (perf-notes run 111): 8 warps (128
     * keys a tile) only where a GQA group outnumbers 4 warps and splits are reduced, up to
     * 16k keys; otherwise the two cost the same and registration order keeps 4 */
    fmha_key_t w4;
    fmha__key_default(&w4);
    w4.arch = KA_SM90, w4.family = KF_SPLITKV, w4.dtype = KD_BF16, w4.max_splits_log2 = 7;
    w4.tile_m = 16, w4.tile_n = 64, w4.warps = 4, w4.stages = 3;
    fmha_key_t w8 = w4;
    w8.tile_n = 128, w8.warps = 8;
    CHECK(fmha__decode_layout(&w4) && fmha__decode_layout(&w8));
    const work_t g8_b1 = {1, 64, 1, 8192, 1.0, 8}, g4_b1 = {1, 32, 1, 8192, 1.0, 8}, g8_b16 = {16, 64, 1, 8192, 1.0, 8};
    const work_t g8_b1_32k = {1, 64, 1, 32768, 1.0, 8};
    CHECK(fmha__heur_cost(&w8, &g8_b1, &h100) < fmha__heur_cost(&w4, &g8_b1, &h100));
    CHECK(fmha__heur_cost(&w8, &g8_b1_32k, &h100) == fmha__heur_cost(&w4, &g8_b1_32k, &h100));
    CHECK(fmha__heur_cost(&w8, &g4_b1, &h100) == fmha__heur_cost(&w4, &g4_b1, &h100));
    CHECK(fmha__heur_cost(&w8, &g8_b16, &h100) == fmha__heur_cost(&w4, &g8_b16, &h100));
}

/* Build a forward problem (no data) and explain/select it on ctx; returns the chosen
 * kernel of stage 0 in `chosen` ("" when none) and the explain text. */
static fmha_status_t choose(fmha_context_t *ctx, fwd_config_t c, const char *force, char *chosen, size_t len, char **text)
{
    c.describe_only = 1;
    fwd_case_t *fc;
    char why[512];
    fmha_status_t st = fwd_case_create(&c, &fc, why, sizeof why);
    CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
    if (st) return st;
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .force_kernel = force};
    st = fmha_explain(ctx, fwd_case_problem(fc), &opt, text);
    chosen[0] = '\0';
    const char *p = *text ? strstr(*text, "  chosen: ") : NULL;
    if (p) {
        p += 10;
        size_t n = strcspn(p, " \n");
        snprintf(chosen, len, "%.*s", (int)n, p);
    }
    fwd_case_destroy(fc);
    return st;
}

static fwd_config_t problem(fmha_dtype_t dt, int64_t d, const char *mask, int64_t b, int64_t h, int64_t s)
{
    fwd_config_t c;
    fwd_config_default(&c);
    c.dtype = dt, c.d = c.d_v = d, c.mask = mask, c.b = b, c.h = c.h_k = h, c.s = c.s_k = s;
    return c;
}

static void test_decision_table(void)
{
    static const struct {
        const char *arch;
        fmha_dtype_t dt;
        int64_t d;
        const char *mask;
        int64_t b, h, s;
        const char *extra_filter; /* more kernels registered before selecting, or NULL */
        const char *want;
    } rows[] = {
        {"sm90", FMHA_DTYPE_BF16, 128, "b", 2, 8, 1024, NULL, "fmha_fwd_bf16_hq128_hv128_causal_sm90_wgmmaws_m128_n128_w12_s2"},
        /* the bench's 512 cells (16k tokens): causal stays on wgmma (a padding term that
         * counted the diagonal's masked keys sent hd64 and hd128 to mma.sync at half the
         * speed, perf-notes run 104); hd256 the 80-key tile, unmasked (its last tile
         * trimmed, run 185) and with a mask (run 148) */
        {"sm90", FMHA_DTYPE_BF16, 64, "t", 32, 32, 512, NULL, "fmha_fwd_bf16_hq64_hv64_causal_sm90_wgmmaws_m192_n128_w16_s2"},
        {"sm90", FMHA_DTYPE_BF16, 128, "t", 32, 16, 512, NULL, "fmha_fwd_bf16_hq128_hv128_causal_sm90_wgmmaws_m128_n128_w12_s2"},
        {"sm90", FMHA_DTYPE_BF16, 128, "0", 32, 16, 512, NULL, "fmha_fwd_bf16_hq128_hv128_sm90_wgmmaws_m128_n128_w12_s2"},
        {"sm90", FMHA_DTYPE_BF16, 256, "0", 32, 8, 512, NULL, "fmha_fwd_bf16_hq256_hv256_sm90_wgmmaws_m128_n80_w12_s2"},
        {"sm90", FMHA_DTYPE_BF16, 256, "0", 16, 8, 1024, NULL, "fmha_fwd_bf16_hq256_hv256_sm90_wgmmaws_m128_n80_w12_s2"},
        {"sm90", FMHA_DTYPE_BF16, 256, "t", 32, 8, 512, NULL, "fmha_fwd_bf16_hq256_hv256_causal_sm90_wgmmaws_m128_n80_w12_s2"},
        {"sm90", FMHA_DTYPE_FP16, 64, "0", 4, 16, 4096, "family==fwd && dtype==fp16 && hdim_qk==64 && !lse && mask==nomask && !bias && !dropout && !softcap && !sink",
         "fmha_fwd_fp16_hq64_hv64_sm90_wgmmaws_m192_n128_w16_s2"},
        /* one key tile per CTA: the wgmma pipeline's fill is not paid back (perf-notes run 8) */
        {"sm90", FMHA_DTYPE_FP16, 64, "0", 1, 1, 100, "family==fwd && dtype==fp16 && hdim_qk==64 && !lse && mask==nomask && !bias && !dropout && !softcap && !sink",
         "fmha_fwd_fp16_hq64_hv64_sm90_mmasync_m128_n128_w8_s2"},
        {"sm80", FMHA_DTYPE_FP16, 128, "0", 4, 16, 2048, "family==fwd && dtype==fp16 && hdim_qk==128 && !lse && mask==nomask && !bias && !dropout && !softcap && !sink",
         "fmha_fwd_fp16_hq128_hv128_sm80_mmasync_m64_n64_w4_s2"},
        {"sm86", FMHA_DTYPE_BF16, 128, "t", 2, 8, 512, NULL, "fmha_fwd_bf16_hq128_hv128_causal_sm86_mmasync_m128_n32_w4_s2"},
        {"sm80", FMHA_DTYPE_FP16, 256, "0", 2, 8, 1024, NULL, "fmha_fwd_fp16_hq256_hv256_sm80_mmasync_m64_n32_w4_s2"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fmha_context_t *ctx;
        CHECK_STATUS(fmha_context_create_virtual(&ctx, rows[i].arch, 0), FMHA_STATUS_SUCCESS);
        if (rows[i].extra_filter) {
            fmha_kernel_set_t *s;
            char why[256];
            CHECK_STATUS(fmha_kernel_set_enumerate(rows[i].arch, "all", rows[i].extra_filter, &s, why, sizeof why), FMHA_STATUS_SUCCESS);
            CHECK(fmha_kernel_set_count(s) > 1);
            fmha_context_register(ctx, s, 0);
            fmha_kernel_set_destroy(s);
        }
        char chosen[256], *text = NULL;
        CHECK_STATUS(choose(ctx, problem(rows[i].dt, rows[i].d, rows[i].mask, rows[i].b, rows[i].h, rows[i].s), NULL, chosen,
                            sizeof chosen, &text),
                     FMHA_STATUS_SUCCESS);
        if (strcmp(chosen, rows[i].want) != 0) {
            printf("  row %zu: chose %s, expected %s\n%s", i, chosen, rows[i].want, text ? text : "");
            CHECK(0);
        }
        fmha_free(text);
        fmha_context_destroy(ctx);
    }
}

/* A decode-shaped forward or fwd_pagedkv on a GPU target is planned as split-KV decode
 * (plan.c, decode_route); every condition of the rule keeps the family's kernels when it
 * fails. */
static void test_decode_shaped_forward_routes_to_split_kv(void)
{
    fmha_context_t *gpu, *cpu;
    fmha_context_create_virtual(&gpu, "sm90", 0);
    CHECK_STATUS(fmha_context_create(&cpu, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    char chosen[256], *text = NULL;
    fwd_config_t dec = problem(FMHA_DTYPE_BF16, 128, "b", 8, 32, 1);
    dec.h_k = 8, dec.s_k = 1024; /* one query row, a GQA group of 4 */
    CHECK_STATUS(choose(gpu, dec, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK_CONTAINS(text, "decode-shaped forward (4 query rows per KV head");
    CHECK_CONTAINS(chosen, "fmha_splitkv_bf16_hq128_hv128_causal_sm90_mmasync_m16");
    CHECK_CONTAINS(text, "num_splits");
    fmha_free(text);
    /* over a paged cache: the paged decode kernel, not the pagedkv family's 128-row tile */
    fwd_config_t paged = dec;
    paged.family = FMHA_FAMILY_FWD_PAGEDKV, paged.page_size = 16;
    CHECK_STATUS(choose(gpu, paged, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK_CONTAINS(text, "decode-shaped fwd_pagedkv (4 query rows per KV head");
    CHECK_CONTAINS(chosen, "fmha_splitkv_bf16_hq128_hv128_causal_pagevllm_sm90_mmasync_m16");
    fmha_free(text);
    paged.s = 17; /* too many query rows: the family's own kernel */
    CHECK_STATUS(choose(gpu, paged, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(!strstr(text, "decode-shaped") && strncmp(chosen, "fmha_pagedkv_", 13) == 0);
    fmha_free(text);
    static const int32_t lens_q[2] = {1, 1}, lens_k[2] = {1024, 700};
    const struct {
        const char *what;
        int64_t b, h, h_k, s;
        double p_drop;
        int group;
    } keep[] = {
        {"17 query rows", 8, 8, 8, 17, 0.0, 0},
        {"33 rows per KV head", 8, 33, 1, 1, 0.0, 0},
        {"dropout", 8, 32, 8, 1, 0.1, 0},
        {"group mode", 2, 8, 8, 1, 0.0, 1},
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        fwd_config_t c = problem(FMHA_DTYPE_BF16, 128, "b", keep[i].b, keep[i].h, keep[i].s);
        c.h_k = keep[i].h_k, c.s_k = 1024, c.p_drop = keep[i].p_drop;
        if (keep[i].group) c.mode = FMHA_MODE_GROUP, c.seqlens_q = lens_q, c.seqlens_k = lens_k;
        CHECK_STATUS(choose(gpu, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
        if (strstr(text, "decode-shaped") || strncmp(chosen, "fmha_fwd_", 9) != 0) {
            printf("  %s: routed or not a forward kernel (%s)\n%s", keep[i].what, chosen, text);
            CHECK(0);
        }
        fmha_free(text);
    }
    /* a forced forward kernel, and the CPU backend, plan the forward itself */
    const char *mma = "fmha_fwd_bf16_hq128_hv128_causal_sm90_mmasync_m128_n32_w4_s2";
    CHECK_STATUS(choose(gpu, dec, mma, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(chosen, mma) == 0 && !strstr(text, "decode-shaped"));
    fmha_free(text);
    CHECK_STATUS(choose(cpu, dec, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(chosen, "cpu_ref_fwd") == 0 && !strstr(text, "decode-shaped"));
    fmha_free(text);
    fmha_context_destroy(cpu);
    fmha_context_destroy(gpu);
}

static void test_force_tune_and_failures(void)
{
    fmha_context_t *ctx;
    fmha_context_create_virtual(&ctx, "sm90", 0);
    char chosen[256], *text = NULL;
    fwd_config_t c = problem(FMHA_DTYPE_BF16, 128, "b", 2, 8, 1024);
    const char *mma = "fmha_fwd_bf16_hq128_hv128_causal_sm90_mmasync_m128_n32_w4_s2";
    CHECK_STATUS(choose(ctx, c, mma, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(chosen, mma) == 0);
    CHECK_CONTAINS(text, "forced by name");
    fmha_free(text);
    CHECK_STATUS(choose(ctx, c, "fmha_no_such", chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "forced kernel 'fmha_no_such'");
    fmha_free(text);
    /* a split-KV plan: the forced first stage, the combine chosen as usual; a name of
     * another family belongs to no stage */
    fwd_config_t dec = problem(FMHA_DTYPE_BF16, 128, "b", 4, 8, 1);
    dec.family = FMHA_FAMILY_FWD_SPLITKV, dec.h_k = 2, dec.s_k = 4096;
    const char *split = "fmha_splitkv_bf16_hq128_hv128_causal_sm90_mmasync_m16_n64_w4_s3_sp7";
    CHECK_STATUS(choose(ctx, dec, split, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(chosen, split) == 0);
    CHECK_CONTAINS(text, "chosen: fmha_combine_bf16");
    fmha_free(text);
    CHECK_STATUS(choose(ctx, dec, mma, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "is a fwd kernel and belongs to no stage of this problem (stages: splitkv, combine)");
    fmha_free(text);

    /* the tuning database overrides the heuristic */
    const char *path = "test_select_tune.json";
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"entries\": [{\"class\": \"fwd_bf16_hq128_hv128_causal_batch_sq1024_sk1024\", \"kernel\": \"%s\"}]}", mma);
    fclose(f);
    CHECK_STATUS(fmha_context_load_tune_db(ctx, path), FMHA_STATUS_SUCCESS);
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(chosen, mma) == 0);
    CHECK_CONTAINS(text, "(tuning database)");
    fmha_free(text);
    f = fopen(path, "w");
    fprintf(f, "{\"entries\": [{\"class\": 3}]}");
    fclose(f);
    CHECK_STATUS(fmha_context_load_tune_db(ctx, path), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "needs string fields");
    CHECK_STATUS(fmha_context_load_tune_db(ctx, "/nonexistent/tune.json"), FMHA_STATUS_INVALID_ARGUMENT);
    remove(path);

    /* head dim 40 validates but no GPU instance computes it */
    CHECK_STATUS(choose(ctx, problem(FMHA_DTYPE_FP16, 40, "0", 1, 2, 64), NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "no registered kernel runs stage fwd");
    CHECK_CONTAINS(text, "nearest: fmha_fwd_fp16_hq32_hv32_sm90_mmasync_m128_n128_w4_s2: hdim_qk is 32; the problem needs 40");
    CHECK_CONTAINS(text, "rejected fmha_fwd_fp16_hq64_hv64_sm90_mmasync_m128_n64_w4_s2: hdim_qk is 64; the problem needs 40");
    fmha_free(text);

    /* a virtual context registers what a device of its arch does (every receipt, the
     * kernels the family table implements): dropout, outside the default receipt, plans */
    fwd_config_t dc = problem(FMHA_DTYPE_BF16, 128, "b", 2, 8, 1024);
    dc.p_drop = 0.1;
    CHECK_STATUS(choose(ctx, dc, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strstr(chosen, "_causal_dropout_sm90_") != NULL);
    fmha_free(text);

    /* a virtual context plans but cannot run */
    c.describe_only = 1;
    fwd_case_t *fc;
    char why[256];
    fwd_case_create(&c, &fc, why, sizeof why);
    fmha_plan_t *plan;
    CHECK_STATUS(fmha_plan_create(ctx, fwd_case_problem(fc), NULL, &plan), FMHA_STATUS_NOT_COMPILED);
    CHECK_CONTAINS(fmha_context_last_error(ctx), "this build cannot run it");
    fwd_case_destroy(fc);
    fmha_context_destroy(ctx);

    /* the CPU context plans its generic kernel, and explain says so */
    fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0);
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    CHECK(strcmp(chosen, "cpu_ref_fwd") == 0);
    CHECK_CONTAINS(text, "workspace");
    fmha_free(text);
    fmha_context_destroy(ctx);
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "cpu", 0), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(ctx == NULL);
}

/* The CUDA kernels' limits beyond their keys are checked at plan time (the family
 * table's can_implement), so explain and plan creation refuse what execute could not
 * run, on virtual contexts too, with the rule that refuses it. */
static void test_plan_time_limits(void)
{
    fmha_context_t *ctx;
    char chosen[256], *text = NULL;
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "sm90", 0), FMHA_STATUS_SUCCESS);
    /* rows padded by 3 elements: 16-byte row copies cannot address them */
    fwd_config_t c = problem(FMHA_DTYPE_FP16, 64, "b", 2, 4, 300);
    c.pad = 3;
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "[rule cuda.layout] tensor q: stride 67 of dim 1 is not a multiple of 8 elements");
    fmha_free(text);
    c.pad = 8; /* a multiple of 8: fine */
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    fmha_free(text);
    /* 32-bit index arithmetic: sequences below 2^30 */
    c = problem(FMHA_DTYPE_FP16, 64, "0", 1, 1, 1);
    c.s_k = (int64_t)1 << 30;
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "[rule cuda.seqlen] seqlen_q 1, seqlen_kv 1073741824");
    fmha_free(text);
    /* a scale past fp32's range: the API takes it (the CPU backend computes in double),
     * the CUDA kernels, which take it in fp32, refuse it */
    c = problem(FMHA_DTYPE_FP16, 64, "0", 1, 2, 33);
    c.scale = 1e300;
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "[rule cuda.fp32_scale] scale is 1e+300 (scale 1e+300, softcap 0); the CUDA kernels take it "
                         "in fp32");
    fmha_free(text);
    c.scale = -2.4e38; /* in range, but not times log2(e) */
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "[rule cuda.fp32_scale] scale * log2(e) is -3.46247e+38");
    fmha_free(text);
    c.scale = 1e30;
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    fmha_free(text);
    /* an fp32 bias: the CPU backend takes it, the CUDA kernels read bias in q's dtype.
     * The default receipt (a virtual context's catalogue) has no bias variants, so the
     * table row is asked directly. */
    c = problem(FMHA_DTYPE_FP16, 64, "0", 1, 2, 33);
    c.bias = BIAS_ELEM_11, c.bias_fp32 = 1, c.describe_only = 1;
    fwd_case_t *fc;
    char why[256];
    CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    fmha_key_t k;
    fmha__key_default(&k);
    k.arch = KA_SM90, k.hdim_qk = k.hdim_v = 64, k.bias = KB_ELEMENTWISE;
    const cuda_family_t *row = fmha__cuda_family_of(&k);
    CHECK(row != NULL && strcmp(row->name, "fwd_mma") == 0);
    fmha_target_t target;
    fmha__target_of_arch(&target, KA_SM90, 0, 1);
    CHECK(row && row->can_implement(&k, fwd_case_problem(fc), &target, why, sizeof why) != NULL);
    CHECK_CONTAINS(why, "[rule cuda.bias_dtype] bias has dtype fp32; the CUDA kernels read it in q's dtype (fp16)");
    fwd_case_destroy(fc);
    c.bias_fp32 = 0;
    CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    CHECK(row && row->can_implement(&k, fwd_case_problem(fc), &target, why, sizeof why) == NULL);
    fwd_case_destroy(fc);
    /* soft-cap: a cap past fp32's range is refused; a cap far below the scale is taken (its
     * exponent's factor clamps to fp32's range, which saturates tanh as the true one does) */
    const double caps[] = {1e39, 1e-300};
    for (int i = 0; i < 2; i++) {
        c.softcap = caps[i];
        CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
        const char *refused = row ? row->can_implement(&k, fwd_case_problem(fc), &target, why, sizeof why) : "no row";
        CHECK((refused != NULL) == (i == 0));
        if (i == 0) CHECK_CONTAINS(why, "[rule cuda.fp32_scale] softcap is 1e+39");
        fwd_case_destroy(fc);
    }
    c.softcap = 0;
    /* the decode kernel holds a GQA group's query rows in one 16-row block: 4 heads per KV
     * head x 4 query rows fit, x 5 do not (the 64-row split kernel takes those) */
    c = problem(FMHA_DTYPE_BF16, 128, "b", 2, 8, 4);
    c.family = FMHA_FAMILY_FWD_SPLITKV, c.h_k = 2, c.s_k = 1000, c.describe_only = 1;
    fmha__key_default(&k);
    k.arch = KA_SM90, k.family = KF_SPLITKV, k.dtype = KD_BF16, k.hdim_qk = k.hdim_v = 128, k.mask = KMASK_CAUSAL;
    k.tile_m = 16, k.tile_n = 64, k.warps = 4, k.stages = 3, k.max_splits_log2 = 7;
    row = fmha__cuda_family_of(&k);
    CHECK(row != NULL && strcmp(row->name, "decode_mma") == 0);
    CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    CHECK(row && row->can_implement(&k, fwd_case_problem(fc), &target, why, sizeof why) == NULL);
    fwd_case_destroy(fc);
    c.s = 5;
    CHECK_STATUS(fwd_case_create(&c, &fc, why, sizeof why), FMHA_STATUS_SUCCESS);
    CHECK(row && row->can_implement(&k, fwd_case_problem(fc), &target, why, sizeof why) != NULL);
    CHECK_CONTAINS(why, "[rule cuda.decode_rows] the decode kernel holds a GQA group's query rows in one block: 4 "
                        "query heads per KV head x seqlen_q 5 = 20 rows; this instance has 16");
    fwd_case_destroy(fc);
    /* the backward's dbias broadcast over batch is summed with fp32 atomics: refused in
     * the deterministic mode (with what to do instead), taken otherwise */
    {
        bwd_config_t bcfg;
        memset(&bcfg, 0, sizeof bcfg);
        fwd_config_default(&bcfg.fwd);
        bcfg.fwd.b = 2, bcfg.fwd.h = 2, bcfg.fwd.h_k = 2, bcfg.fwd.s = bcfg.fwd.s_k = 16, bcfg.fwd.d = bcfg.fwd.d_v = 64;
        bcfg.fwd.bias = BIAS_ELEM_1H, bcfg.dbias = 1, bcfg.deterministic = 1;
        fmha__key_default(&k);
        k.arch = KA_SM90, k.family = KF_BWD_DQ_DK_DV, k.dtype = KD_FP16, k.hdim_qk = k.hdim_v = 64;
        k.bias = KB_ELEMENTWISE, k.dbias = 1, k.deterministic = 1;
        k.tile_m = 128, k.tile_n = 128, k.warps = 8, k.stages = 2;
        row = fmha__cuda_family_of(&k);
        CHECK(row != NULL && strcmp(row->name, "bwd_mma") == 0);
        bwd_case_t *bc = NULL;
        CHECK_STATUS(bwd_case_create(&bcfg, &bc, why, sizeof why), FMHA_STATUS_SUCCESS);
        CHECK(row && bc && row->can_implement(&k, bwd_case_problem(bc), &target, why, sizeof why) != NULL);
        CHECK_CONTAINS(why, "[rule cuda.dbias_deterministic] dbias is [1, 2, ...], broadcast over batch; the CUDA "
                            "backward sums it with fp32 atomics");
        bwd_case_destroy(bc);
        bcfg.deterministic = 0, k.deterministic = 0;
        CHECK_STATUS(bwd_case_create(&bcfg, &bc, why, sizeof why), FMHA_STATUS_SUCCESS);
        CHECK(row && bc && row->can_implement(&k, bwd_case_problem(bc), &target, why, sizeof why) == NULL);
        bwd_case_destroy(bc);
    }
    fmha_context_destroy(ctx);

    /* the sm80 kernel's unmasked grid has batch and heads as dimensions y and z (at most
     * 65535); masked it walks a 1-d list */
    CHECK_STATUS(fmha_context_create_virtual(&ctx, "sm80", 0), FMHA_STATUS_SUCCESS);
    c = problem(FMHA_DTYPE_BF16, 64, "0", 70000, 1, 1);
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "[rule cuda.grid] batch (70000) and heads (1) are grid dimensions y and z");
    fmha_free(text);
    c.mask = "b";
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_SUCCESS);
    fmha_free(text);
    /* 2^31 work items do not fit one grid dimension */
    c = problem(FMHA_DTYPE_BF16, 64, "b", 65536, 512, 8192);
    CHECK_STATUS(choose(ctx, c, NULL, chosen, sizeof chosen, &text), FMHA_STATUS_NOT_SUPPORTED);
    CHECK_CONTAINS(text, "[rule cuda.grid] this kernel walks m-blocks x batch x heads");
    fmha_free(text);
    fmha_context_destroy(ctx);
}

int main(void)
{
    RUN(test_heuristic_table);
    RUN(test_decision_table);
    RUN(test_decode_shaped_forward_routes_to_split_kv);
    RUN(test_force_tune_and_failures);
    RUN(test_plan_time_limits);
    TEST_MAIN_END();
}
