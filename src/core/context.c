/* context.c: contexts (backend, target, registry, tuning database), version and build info. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/ref.h"
#include "internal.h"
#include "kset.h"
#include "registry.h"
#include "select.h"
#include "specs.h"

#define STR_(x) #x
#define STR(x) STR_(x)

unsigned fmha_version_number(void) { return FMHA_VERSION_NUMBER; }

const char *fmha_version_string(void)
{
    return STR(FMHA_VERSION_MAJOR) "." STR(FMHA_VERSION_MINOR) "." STR(FMHA_VERSION_PATCH);
}

#ifdef _OPENMP
#define OPENMP_INFO "openmp=on"
#else
#define OPENMP_INFO "openmp=off"
#endif

const char *fmha_build_info(void)
{
    return "version=" STR(FMHA_VERSION_MAJOR) "." STR(FMHA_VERSION_MINOR) "." STR(
        FMHA_VERSION_PATCH) " backends=cpu " OPENMP_INFO
                            " cuda=off(the CUDA backend is not part of this version) nvrtc=off";
}

void fmha_free(void *ptr) { free(ptr); }

static fmha_context_t *context_new(void)
{
    fmha_context_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->registry = malloc(sizeof *ctx->registry);
    if (!ctx->registry || fmha__registry_init(ctx->registry)) {
        free(ctx->registry);
        free(ctx);
        return NULL;
    }
    return ctx;
}

static void set_target(fmha_context_t *ctx, karch_t arch, int sm_count, int is_virtual)
{
    const arch_spec_t *a = fmha__arch_spec(arch);
    ctx->target.arch = arch;
    ctx->target.is_virtual = is_virtual;
    ctx->target.sm_count = sm_count > 0 ? sm_count : a->default_sm_count;
    ctx->target.smem_per_block = a->smem_per_block;
    ctx->target.smem_per_sm = a->smem_per_sm;
    ctx->target.regs_per_sm = a->regs_per_sm;
}

fmha_status_t fmha_context_create(fmha_context_t **out, fmha_backend_t backend, int device)
{
    if (!out) return FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    if (backend != FMHA_BACKEND_AUTO && backend != FMHA_BACKEND_CPU && backend != FMHA_BACKEND_CUDA)
        return FMHA_STATUS_INVALID_ARGUMENT;
    if (backend == FMHA_BACKEND_CUDA) return FMHA_STATUS_NOT_COMPILED;
    fmha_context_t *ctx = context_new();
    if (!ctx) return FMHA_STATUS_ALLOC_FAILED;
    ctx->backend = FMHA_BACKEND_CPU; /* AUTO: no CUDA backend in this build */
    ctx->device = device;
    set_target(ctx, KA_CPU, 0, 0);
    if (fmha__ref_register(ctx->registry)) {
        fmha_context_destroy(ctx);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    *out = ctx;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_context_create_virtual(fmha_context_t **out, const char *arch, int sm_count)
{
    if (!out || !arch || sm_count < 0) return FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    int a = fmha__arch_lookup(arch);
    if (a < 0 || a == KA_CPU) return FMHA_STATUS_INVALID_ARGUMENT;
    fmha_context_t *ctx = context_new();
    if (!ctx) return FMHA_STATUS_ALLOC_FAILED;
    ctx->backend = FMHA_BACKEND_CUDA;
    set_target(ctx, (karch_t)a, sm_count, 1);
    kset_t set;
    fmha__kset_init(&set);
    char why[256];
    int rc = fmha__enumerate((karch_t)a, RECEIPT_DEFAULT, NULL, &set, why, sizeof why);
    for (size_t i = 0; rc == 0 && i < set.count; i++) {
        kdesc_t d = {set.names[i], set.keys[i], 0, 0, NULL, NULL};
        if (fmha__registry_add(ctx->registry, &d) < 0) rc = -1;
    }
    fmha__kset_free(&set);
    if (rc) {
        fmha_context_destroy(ctx);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    *out = ctx;
    return FMHA_STATUS_SUCCESS;
}

void fmha_context_destroy(fmha_context_t *ctx)
{
    if (!ctx) return;
    if (ctx->registry) fmha__registry_destroy(ctx->registry);
    free(ctx->registry);
    fmha__tune_free(ctx->tune);
    free(ctx);
}

fmha_backend_t fmha_context_backend(const fmha_context_t *ctx)
{
    return ctx ? ctx->backend : FMHA_BACKEND_AUTO;
}

const char *fmha_context_arch(const fmha_context_t *ctx)
{
    return ctx ? fmha__arch_names[ctx->target.arch] : "";
}

const char *fmha_context_last_error(const fmha_context_t *ctx) { return ctx ? ctx->err : ""; }

fmha_status_t fmha_context_load_tune_db(fmha_context_t *ctx, const char *path)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!path) return fmha__fail(ctx->err, FMHA_STATUS_INVALID_ARGUMENT, "tuning database path is NULL");
    if (fmha__tune_load(ctx, path, ctx->err, FMHA_ERR_LEN)) return FMHA_STATUS_INVALID_ARGUMENT;
    ctx->err[0] = '\0';
    return FMHA_STATUS_SUCCESS;
}

char *fmha_context_kernels_json(fmha_context_t *ctx, int with_stats)
{
    if (!ctx) return NULL;
    char name[64];
    snprintf(name, sizeof name, "%s%s", fmha__arch_names[ctx->target.arch], ctx->target.is_virtual ? " (virtual)" : "");
    return fmha__registry_json(ctx->registry, name, with_stats);
}
