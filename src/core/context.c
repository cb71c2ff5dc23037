/* context.c: contexts (backend, target, registry, tuning database), version and build info. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/backend.h"
#include "../cuda/driver.h"
#include "../cuda/jit.h"
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

static char build_info[512];
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

static void make_build_info(void)
{
    const char *nv_why;
    int nv = fmha__nvrtc_available(&nv_why);
    const char *cuda = fmha__cuda_status();
    snprintf(build_info, sizeof build_info,
             "version=%s backends=cpu,cuda " OPENMP_INFO " cuda=%s%s%s nvrtc=%s%s%s",
             fmha_version_string(), strcmp(cuda, "ok") ? "off(" : "on", strcmp(cuda, "ok") ? cuda : "",
             strcmp(cuda, "ok") ? ")" : "", nv ? "on" : "off(", nv ? "" : nv_why, nv ? "" : ")");
}

const char *fmha_build_info(void)
{
    pthread_once(&build_once, make_build_info);
    return build_info;
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
    fmha_context_t *ctx = context_new();
    if (!ctx) return FMHA_STATUS_ALLOC_FAILED;
    ctx->device = device;
    if (backend != FMHA_BACKEND_CPU && strcmp(fmha__cuda_status(), "ok") == 0) {
        fmha_status_t st = fmha__cuda_context_init(ctx, device);
        if (st == FMHA_STATUS_SUCCESS) {
            ctx->backend = FMHA_BACKEND_CUDA;
            *out = ctx;
            return st;
        }
        if (backend == FMHA_BACKEND_CUDA) {
            fmha_context_destroy(ctx);
            return st;
        }
        /* AUTO: a device that cannot be used falls back to the CPU */
        fmha__cuda_context_release(ctx);
        fmha__registry_destroy(ctx->registry);
        fmha__registry_init(ctx->registry);
    } else if (backend == FMHA_BACKEND_CUDA) {
        fmha_context_destroy(ctx);
        return FMHA_STATUS_NOT_COMPILED; /* fmha_build_info() says why */
    }
    ctx->backend = FMHA_BACKEND_CPU;
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
        kdesc_t d = {set.names[i], set.keys[i], 0, 0, NULL, NULL, NULL};
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
    fmha__cuda_context_release(ctx);
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

/* ------------------------------------------------------------------ memory */

fmha_status_t fmha_context_alloc(fmha_context_t *ctx, size_t bytes, void **ptr)
{
    if (!ctx || !ptr) return FMHA_STATUS_INVALID_ARGUMENT;
    *ptr = NULL;
    if (!ctx->cuda) {
        *ptr = malloc(bytes ? bytes : 1);
        return *ptr ? FMHA_STATUS_SUCCESS : fmha__fail(ctx->err, FMHA_STATUS_ALLOC_FAILED, "malloc(%zu) failed", bytes);
    }
    const cuda_api_t *cu = fmha__cuda(NULL);
    CUdeviceptr d = 0;
    CUcontext popped;
    cu->cuCtxPushCurrent(fmha__cuda_primary(ctx));
    CUresult r = cu->cuMemAlloc(&d, bytes ? bytes : 1);
    cu->cuCtxPopCurrent(&popped);
    char buf[256];
    if (r) return fmha__fail(ctx->err, FMHA_STATUS_ALLOC_FAILED, "cuMemAlloc(%zu): %s", bytes, fmha__cuda_error(r, buf, sizeof buf));
    *ptr = (void *)(uintptr_t)d;
    return FMHA_STATUS_SUCCESS;
}

void fmha_context_free(fmha_context_t *ctx, void *ptr)
{
    if (!ctx || !ptr) return;
    if (!ctx->cuda) {
        free(ptr);
        return;
    }
    const cuda_api_t *cu = fmha__cuda(NULL);
    CUcontext popped;
    cu->cuCtxPushCurrent(fmha__cuda_primary(ctx));
    cu->cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    cu->cuCtxPopCurrent(&popped);
}

fmha_status_t fmha_context_copy(fmha_context_t *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    if (!ctx || (bytes && (!dst || !src))) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!ctx->cuda) {
        memmove(dst, src, bytes);
        return FMHA_STATUS_SUCCESS;
    }
    const cuda_api_t *cu = fmha__cuda(NULL);
    CUcontext popped;
    cu->cuCtxPushCurrent(fmha__cuda_primary(ctx));
    CUresult r = to_device ? cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes)
                           : cu->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes);
    cu->cuCtxPopCurrent(&popped);
    char buf[256];
    if (r) return fmha__fail(ctx->err, FMHA_STATUS_CUDA_ERROR, "copy of %zu bytes: %s", bytes, fmha__cuda_error(r, buf, sizeof buf));
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_context_synchronize(fmha_context_t *ctx)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!ctx->cuda) return FMHA_STATUS_SUCCESS;
    const cuda_api_t *cu = fmha__cuda(NULL);
    CUcontext popped;
    cu->cuCtxPushCurrent(fmha__cuda_primary(ctx));
    CUresult r = cu->cuCtxSynchronize();
    cu->cuCtxPopCurrent(&popped);
    char buf[256];
    if (r) return fmha__fail(ctx->err, FMHA_STATUS_CUDA_ERROR, "synchronize: %s", fmha__cuda_error(r, buf, sizeof buf));
    return FMHA_STATUS_SUCCESS;
}
