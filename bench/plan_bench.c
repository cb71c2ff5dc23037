/* SPDX-License-Identifier: MIT */
/*
 * plan_bench.c: the host cost of the API calls an engine makes per layer and step, on
 * the context of this machine (CUDA when a device is there, else the CPU):
 *   plan creation, a miss (validate, select, prepare; JIT from the disk cache on a GPU)
 *   plan creation, a hit in the context's plan cache (a lookup and a copy)
 *   fmha_plan_execute's host time (on a GPU: the launch; the calls before a synchronise)
 * for a decode-sized problem (B8, Sq 1, Sk 1024, Hq/Hk 32/8, hd128) and a prefill one.
 * Usage: fmha_plan_bench [-backend=cpu|cuda|auto]. Prints one line per problem.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fwd_case.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int bench(fmha_context_t *ctx, const char *label, fwd_config_t c)
{
    char why[512];
    fwd_case_t *fc;
    fmha_status_t st = fwd_case_create(&c, &fc, why, sizeof why);
    if (!st) st = fwd_case_bind(fc, ctx, why, sizeof why);
    if (st) {
        printf("%s: %s: %s\n", label, fmha_status_name(st), why);
        return 1;
    }
    const fmha_problem_t *p = fwd_case_problem(fc);
    fmha_plan_t *plan;
    fmha_context_plan_cache_clear(ctx);
    double t0 = now_us();
    st = fmha_plan_create(ctx, p, NULL, &plan); /* kernel load (JIT from the disk cache) */
    const double first = now_us() - t0;
    if (st) {
        printf("%s: plan: %s\n", label, fmha_context_last_error(ctx));
        fwd_case_destroy(fc);
        return 1;
    }
    fmha_plan_destroy(plan);
    /* misses with the kernel loaded: validate and select every time */
    const int misses = 200, hits = 20000;
    t0 = now_us();
    for (int i = 0; i < misses; i++) {
        fmha_context_plan_cache_clear(ctx);
        fmha_plan_create(ctx, p, NULL, &plan);
        fmha_plan_destroy(plan);
    }
    const double miss = (now_us() - t0) / misses;
    t0 = now_us();
    for (int i = 0; i < hits; i++) {
        fmha_plan_create(ctx, p, NULL, &plan);
        fmha_plan_destroy(plan);
    }
    const double hit = (now_us() - t0) / hits;
    fmha_plan_create(ctx, p, NULL, &plan);
    double ms = 0, host_us = 0;
    st = fwd_case_time_calls(fc, plan, 20, 200, &ms, &host_us);
    printf("%-8s %s: plan first %.1f us, miss %.1f us, hit %.2f us; execute host %.2f us/call, %.1f us/call "
           "with the kernel (%s)\n",
           label, fmha_context_arch(ctx), first, miss, hit, host_us, 1e3 * ms,
           st ? fmha_plan_last_error(plan) : fmha_plan_kernel_name(plan, 0));
    fmha_plan_destroy(plan);
    fwd_case_destroy(fc);
    return st != FMHA_STATUS_SUCCESS;
}

int main(int argc, char **argv)
{
    fmha_backend_t be = FMHA_BACKEND_AUTO;
    if (argc > 1 && strcmp(argv[1], "-backend=cpu") == 0) be = FMHA_BACKEND_CPU;
    if (argc > 1 && strcmp(argv[1], "-backend=cuda") == 0) be = FMHA_BACKEND_CUDA;
    fmha_context_t *ctx;
    fmha_status_t st = fmha_context_create(&ctx, be, 0);
    if (st) {
        printf("no context: %s (%s)\n", fmha_status_name(st), fmha_build_info());
        return 2;
    }
    const int gpu = fmha_context_backend(ctx) == FMHA_BACKEND_CUDA;
    fwd_config_t decode;
    fwd_config_default(&decode);
    decode.b = 8, decode.h = 32, decode.h_k = 8, decode.s = 1, decode.s_k = gpu ? 1024 : 128;
    decode.d = decode.d_v = 128, decode.dtype = FMHA_DTYPE_BF16, decode.mask = "b", decode.iperm = decode.operm = 0;
    fwd_config_t prefill = decode;
    prefill.b = 2, prefill.s = prefill.s_k = gpu ? 2048 : 64;
    int rc = bench(ctx, "decode", decode) | bench(ctx, "prefill", prefill);
    fmha_context_destroy(ctx);
    return rc;
}
