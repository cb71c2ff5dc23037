/*
 * gpu_conformance.c: the CUDA forward against the CPU oracle's math (the naive references
 * and REFERENCE.md's accuracy rule), outputs poisoned before each run, on a grid of
 * dtypes x head dims x masks x features x awkward shapes. Each failure prints the
 * `fmha run` line that reproduces it; the last line is "N passed, N failed". Each case's
 * line is printed before it runs, so that the log of a run killed by a timeout ends at
 * the case that hung.
 * Usage: gpu_conformance [max_cases [hdim]]: a head dim runs only its cases (a dev loop).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwd_case.h"

static fmha_context_t *ctx;
static int passed, failed;

static int forced_passed, forced_failed;
static int only_hdim; /* 0: every head dim */

/* On sm90 the selector picks mma.sync or wgmma by shape: the other pipeline is then run
 * on the same case too (forced by name), so both kernels see every feature and shape.
 * The wgmma kernel has shapes for head dims 64 (m192_n128_w16), 128 (m128_n128_w12) and
 * 256 (m128_n64_w12). */
static int alternate_kernel(const char *chosen, const fwd_config_t *c, char *out, size_t len)
{
    const char *arch = strstr(chosen, "_sm90_");
    if (!arch || c->d != c->d_v || (c->d != 64 && c->d != 128 && c->d != 256) || strstr(chosen, "_wgmmaws_")) return 0;
    const char *tile = c->d == 64 ? "m192_n128_w16_s2" : c->d == 128 ? "m128_n128_w12_s2" : "m128_n64_w12_s2";
    snprintf(out, len, "%.*s_sm90_wgmmaws_%s", (int)(arch - chosen), chosen, tile);
    return 1;
}

static void run_one(const fwd_config_t *c, const char *force, char *chosen, size_t chosen_len);

static void run(const fwd_config_t *c)
{
    char chosen[256] = "", alt[256];
    if (only_hdim && c->d != only_hdim) return;
    /* before the case, so that a case that hangs is the last line of a killed run's log */
    char cli[1024];
    fwd_config_cli(c, cli, sizeof cli);
    printf("case %d: %s\n", passed + failed + 1, cli);
    run_one(c, NULL, chosen, sizeof chosen);
    if (alternate_kernel(chosen, c, alt, sizeof alt)) run_one(c, alt, NULL, 0);
}

static void run_one(const fwd_config_t *c, const char *force, char *chosen, size_t chosen_len)
{
    char cli[1024], why[1024];
    fwd_config_cli(c, cli, sizeof cli);
    if (force) snprintf(cli + strlen(cli), sizeof cli - strlen(cli), " -force_kernel=%s", force);
    fwd_case_t *fc = NULL;
    fmha_plan_t *plan = NULL;
    fwd_check_t r;
    memset(&r, 0, sizeof r);
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .force_kernel = force};
    fmha_status_t st = fwd_case_create(c, &fc, why, sizeof why);
    if (!st) st = fwd_case_bind(fc, ctx, why, sizeof why);
    if (!st && (st = fmha_plan_create(ctx, fwd_case_problem(fc), &opt, &plan)))
        snprintf(why, sizeof why, "%s", fmha_context_last_error(ctx));
    if (!st && chosen) snprintf(chosen, chosen_len, "%s", fmha_plan_kernel_name(plan, 0));
    if (!st && (st = fwd_case_execute(fc, plan))) snprintf(why, sizeof why, "%s", fmha_plan_last_error(plan));
    int ok = !st && fwd_case_check(fc, &r) == 0 && r.pass;
    if (force) ok ? forced_passed++ : forced_failed++;
    if (ok) {
        passed++;
    } else {
        failed++;
        if (st)
            printf("FAIL %s: %s -- %s\n", fmha_status_name(st), why, cli);
        else
            printf("FAIL o err %.3g tol %.3g%s, lse err %.3g tol %.3g, unwritten %lld -- %s\n", r.o.max_err, r.o.tol,
                   r.o.nan_or_inf ? " NaN/inf" : "", r.lse.max_err, r.lse.tol, (long long)r.unwritten, cli);
    }
    fmha_plan_destroy(plan);
    fwd_case_destroy(fc);
}

int main(int argc, char **argv)
{
    int max_cases = argc > 1 ? atoi(argv[1]) : 100000;
    only_hdim = argc > 2 ? atoi(argv[2]) : 0;
    fmha_status_t st = fmha_context_create(&ctx, FMHA_BACKEND_CUDA, 0);
    if (st) {
        printf("no CUDA context: %s (%s)\n", fmha_status_name(st), fmha_build_info());
        return 2;
    }
    printf("device arch %s; %s\n", fmha_context_arch(ctx), fmha_build_info());
    const fmha_dtype_t dts[] = {FMHA_DTYPE_FP16, FMHA_DTYPE_BF16};
    const int64_t hd[][2] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}};
    const char *masks[] = {"0", "t", "b", "b:16,4", "t:7,0,3", "xb:31"};
    const int64_t shapes[][2] = {{1, 1}, {17, 17}, {1000, 1000}, {77, 301}, {301, 77}, {4097, 129}, {1, 1000}};
    int n = 0;
    /* dtype x hdim x mask x shape, with features rotating through the cases */
    for (size_t a = 0; a < 2; a++)
        for (size_t h = 0; h < sizeof hd / sizeof hd[0]; h++)
            for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                    if (n >= max_cases) break;
                    if (shapes[s][0] * shapes[s][1] > 600000 && (h % 2 || m % 2)) continue; /* keep the oracle's time in check */
                    fwd_config_t c;
                    fwd_config_default(&c);
                    c.dtype = dts[a], c.d = hd[h][0], c.d_v = hd[h][1], c.mask = masks[m];
                    c.s = shapes[s][0], c.s_k = shapes[s][1];
                    c.b = 2, c.h = 4, c.h_k = (n % 4 == 0) ? 4 : (n % 4 == 1) ? 2 : 1;
                    c.seed = (uint64_t)n + 7;
                    c.lse = n % 2;
                    c.bias = (bias_kind_t)(n % 7 == 3 ? BIAS_ELEM_1H : n % 7 == 5 ? BIAS_ALIBI_H : n % 11 == 4 ? BIAS_ALIBI_BH : BIAS_NONE);
                    c.softcap = n % 5 == 2 ? 4.0 : 0.0;
                    c.sink = n % 6 == 1;
                    c.iperm = n % 3 == 0, c.operm = n % 4 == 0;
                    c.pad = n % 9 == 4 ? 8 : 0;
                    run(&c);
                    n++;
                }
    /* GQA ratios and varlen with empty sequences */
    const int64_t ratios[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.h = 8, c.h_k = 8 / ratios[i], c.s = 333, c.s_k = 555, c.mask = "b", c.d = c.d_v = 128, c.lse = 1;
        c.dtype = i % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        run(&c);
    }
    const int32_t lq[] = {0, 1, 17, 1000, 0, 129}, lk[] = {5, 0, 17, 1200, 0, 4097}, used[] = {5, 0, 9, 1000, 0, 4000};
    for (int v = 0; v < 8; v++) {
        fwd_config_t c;
        fwd_config_default(&c);
        c.mode = FMHA_MODE_GROUP, c.b = 6, c.h = 4, c.h_k = 2, c.s = 1000, c.s_k = 4097;
        c.seqlens_q = lq, c.seqlens_k = lk, c.seqused_k = v % 2 ? used : NULL;
        c.d = c.d_v = v < 4 ? 64 : 128, c.dtype = v % 4 < 2 ? FMHA_DTYPE_FP16 : FMHA_DTYPE_BF16;
        c.mask = v % 3 == 0 ? "b" : v % 3 == 1 ? "t:64,0,4" : "0";
        c.lse = 1, c.sink = v == 5, c.bias = v == 6 ? BIAS_ALIBI_BH : BIAS_NONE;
        run(&c);
    }
    printf("(of which the other sm90 pipeline, forced: %d passed, %d failed)\n", forced_passed, forced_failed);
    printf("%d passed, %d failed\n", passed, failed);
    fmha_context_destroy(ctx);
    return failed ? 1 : 0;
}
