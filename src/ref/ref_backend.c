/* SPDX-License-Identifier: MIT */
/*
 * ref_backend.c: the CPU backend's operations table (core/backend.h): host memory, the
 * OpenMP thread count, and its kernels, registered as generic descriptors that each run
 * every signature of their kernel family that validation admits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/backend.h"
#include "../core/registry.h"
#include "../core/specs.h"
#include "ref.h"

typedef struct cpu_kernel {
    const char *name;
    kfamily_t family;
    fmha_stage_fn run;
    size_t (*workspace)(const fmha_problem_t *p, int threads);
} cpu_kernel_t;

static const cpu_kernel_t CPU_KERNELS[] = {
    {"cpu_ref_fwd", KF_FWD, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_splitkv", KF_SPLITKV, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_combine", KF_COMBINE, fmha__ref_combine, NULL},
    {"cpu_ref_pagedkv", KF_PAGEDKV, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_appendkv", KF_APPENDKV, fmha__ref_appendkv, fmha__ref_appendkv_workspace},
    {"cpu_ref_batch_prefill", KF_PREFILL, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_bwd_dot_do_o", KF_BWD_DOT_DO_O, fmha__ref_bwd_dot, fmha__ref_bwd_dot_workspace},
    {"cpu_ref_bwd_dq_dk_dv", KF_BWD_DQ_DK_DV, fmha__ref_bwd_main, fmha__ref_bwd_main_workspace},
    {"cpu_ref_bwd_convert_dq", KF_BWD_CONVERT_DQ, fmha__ref_bwd_convert, NULL},
};

static size_t cpu_workspace(const kdesc_t *d, const fmha_problem_t *p, int threads)
{
    const cpu_kernel_t *k = d->impl;
    return k->workspace ? k->workspace(p, threads) : 0;
}

static int register_kernels(struct registry *r)
{
    for (size_t i = 0; i < sizeof CPU_KERNELS / sizeof CPU_KERNELS[0]; i++) {
        kdesc_t d;
        memset(&d, 0, sizeof d);
        fmha__key_default(&d.key);
        d.key.family = CPU_KERNELS[i].family;
        d.key.dtype = KD_FP32;
        d.key.arch = KA_CPU;
        d.key.pipeline = KPIPE_CPUREF;
        d.key.tile_m = 64, d.key.tile_n = 0, d.key.warps = 0, d.key.stages = 0;
        d.name = (char *)CPU_KERNELS[i].name;
        d.generic = 1;
        d.run = CPU_KERNELS[i].run;
        d.workspace = cpu_workspace;
        d.impl = &CPU_KERNELS[i];
        if (fmha__registry_add(r, &d) < 0) return -1;
    }
    return 0;
}

static const char *cpu_unavailable(void) { return NULL; }

/* The oracle has a generic kernel for every stage of every family. */
static int cpu_has_family(int kfamily)
{
    (void)kfamily;
    return 1;
}

static void cpu_build_info(char *buf, size_t len)
{
#ifdef _OPENMP
    snprintf(buf, len, "openmp=on");
#else
    snprintf(buf, len, "openmp=off");
#endif
}

static fmha_status_t cpu_init(fmha_context_t *ctx, int device)
{
    (void)device;
    fmha__target_of_arch(&ctx->target, KA_CPU, 0, 0);
    return register_kernels(ctx->registry) ? FMHA_STATUS_ALLOC_FAILED : FMHA_STATUS_SUCCESS;
}

static void cpu_release(fmha_context_t *ctx) { (void)ctx; }

static fmha_status_t cpu_alloc(fmha_context_t *ctx, size_t bytes, void **ptr)
{
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? FMHA_STATUS_SUCCESS : fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_ALLOC_FAILED, "malloc(%zu) failed", bytes);
}

static void cpu_free(fmha_context_t *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

static fmha_status_t cpu_copy(fmha_context_t *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    (void)ctx, (void)to_device;
    memmove(dst, src, bytes);
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t cpu_synchronize(fmha_context_t *ctx)
{
    (void)ctx;
    return FMHA_STATUS_SUCCESS;
}

static void cpu_describe_stage(const fmha_key_t *key, const fmha_problem_t *p, int threads, strbuf_t *out)
{
    if (key->family == KF_SPLITKV)
        fmha__sb_printf(out, "  num_splits %d (%s)\n", fmha__ref_num_splits(p, threads),
                        fmha__i(p, FMHA_PARAM_NUM_SPLITS) ? "given" : "chosen");
}

static void cpu_describe_plan(const fmha_plan_t *plan, strbuf_t *out)
{
    const fmha_key_t k = {.family = KF_SPLITKV};
    if (fmha__i(&plan->problem, FMHA_PARAM_FAMILY) == FMHA_FAMILY_FWD_SPLITKV)
        cpu_describe_stage(&k, &plan->problem, plan->num_threads, out);
}

const fmha_backend_ops_t fmha__cpu_backend = {
    .name = "cpu",
    .kind = FMHA_BACKEND_CPU,
    .host_data = 1,
    .unavailable = cpu_unavailable,
    .build_info = cpu_build_info,
    .has_family = cpu_has_family,
    .init = cpu_init,
    .release = cpu_release,
    .register_virtual = NULL,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .plan_threads = fmha__ref_threads,
    .describe_plan = cpu_describe_plan,
    .describe_stage = cpu_describe_stage,
};
