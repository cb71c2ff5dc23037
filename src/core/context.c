/* SPDX-License-Identifier: MIT */
/* context.c: contexts (backend, target, registry, tuning database), version and build
 * info. Backends are reached through their operations tables (backend.h) only. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "kset.h"
#include "plan_cache.h"
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

static char build_info[512];
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

static void make_build_info(void)
{
    char cpu[128] = "", cuda[256] = "";
    fmha__cpu_backend.build_info(cpu, sizeof cpu);
    fmha__cuda_backend.build_info(cuda, sizeof cuda);
    snprintf(build_info, sizeof build_info, "version=%s backends=cpu,cuda %s %s", fmha_version_string(), cpu, cuda);
}

const char *fmha_build_info(void)
{
    pthread_once(&build_once, make_build_info);
    return build_info;
}

void fmha_free(void *ptr) { free(ptr); }

/* The message of a context's last failure, per thread (internal.h). A thread keeps the
 * messages of the last ERR_SLOTS contexts it used; an older one's is dropped. A context
 * is known by its address and its serial, so a new context at a freed one's address does
 * not inherit its message. */
enum { ERR_SLOTS = 8 };
static _Thread_local struct {
    const fmha_context_t *ctx;
    uint64_t serial, last_use;
    char msg[FMHA_ERR_LEN];
} err_slots[ERR_SLOTS];
static _Thread_local uint64_t err_clock;
static uint64_t next_serial; /* atomic */

static int err_slot_of(const fmha_context_t *ctx)
{
    for (int i = 0; i < ERR_SLOTS; i++)
        if (err_slots[i].ctx == ctx && err_slots[i].serial == ctx->serial) return i;
    return -1;
}

char *fmha__ctx_err(const fmha_context_t *ctx)
{
    int i = err_slot_of(ctx);
    if (i < 0) { /* the least recently used slot */
        i = 0;
        for (int j = 1; j < ERR_SLOTS; j++)
            if (err_slots[j].last_use < err_slots[i].last_use) i = j;
        err_slots[i].ctx = ctx, err_slots[i].serial = ctx->serial;
        err_slots[i].msg[0] = '\0';
    }
    err_slots[i].last_use = ++err_clock;
    return err_slots[i].msg;
}

static fmha_context_t *context_new(void)
{
    fmha_context_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->serial = __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
    if (pthread_rwlock_init(&ctx->lock, NULL)) {
        free(ctx);
        return NULL;
    }
    ctx->registry = malloc(sizeof *ctx->registry);
    ctx->plans = malloc(sizeof *ctx->plans);
    int reg_ok = ctx->registry && fmha__registry_init(ctx->registry) == 0;
    int plans_ok = ctx->plans && fmha__plan_cache_init(ctx->plans) == 0;
    if (reg_ok && plans_ok) return ctx;
    if (reg_ok) fmha__registry_destroy(ctx->registry);
    if (plans_ok) fmha__plan_cache_destroy(ctx->plans);
    free(ctx->registry);
    free(ctx->plans);
    pthread_rwlock_destroy(&ctx->lock);
    free(ctx);
    return NULL;
}

/* Open ctx on a backend: its state, target and kernels. On failure the backend's state
 * is released and the registry emptied, so the context can try another backend. */
static fmha_status_t open_backend(fmha_context_t *ctx, const fmha_backend_ops_t *ops, int device)
{
    ctx->ops = ops;
    ctx->backend = ops->kind;
    fmha_status_t st = ops->init(ctx, device);
    if (st == FMHA_STATUS_SUCCESS) return st;
    ops->release(ctx);
    ctx->ops = NULL;
    fmha__registry_destroy(ctx->registry);
    if (fmha__registry_init(ctx->registry)) st = FMHA_STATUS_ALLOC_FAILED;
    return st;
}

/* A failed create has no context to hold its message: it is kept per thread. */
static _Thread_local char create_err[FMHA_ERR_LEN];

const char *fmha_context_create_error(void) { return create_err; }

fmha_status_t fmha_context_create(fmha_context_t **out, fmha_backend_t backend, int device)
{
    create_err[0] = '\0';
    if (!out) return fmha__fail(create_err, FMHA_STATUS_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (backend != FMHA_BACKEND_AUTO && backend != FMHA_BACKEND_CPU && backend != FMHA_BACKEND_CUDA)
        return fmha__fail(create_err, FMHA_STATUS_INVALID_ARGUMENT,
                          "backend is %d; expected FMHA_BACKEND_AUTO (0), FMHA_BACKEND_CPU (1) or FMHA_BACKEND_CUDA (2)",
                          (int)backend);
    fmha_context_t *ctx = context_new();
    if (!ctx) return fmha__fail(create_err, FMHA_STATUS_ALLOC_FAILED, "out of memory creating a context");
    ctx->device = device;
    fmha_status_t st = FMHA_STATUS_NOT_COMPILED; /* fmha_build_info() says why */
    if (backend != FMHA_BACKEND_CPU && !fmha__cuda_backend.unavailable()) {
        st = open_backend(ctx, &fmha__cuda_backend, device);
        /* AUTO: a device that cannot be used falls back to the CPU */
        if (st == FMHA_STATUS_SUCCESS || backend == FMHA_BACKEND_CUDA || st == FMHA_STATUS_ALLOC_FAILED) goto done;
    } else if (backend == FMHA_BACKEND_CUDA) {
        fmha__fail(fmha__ctx_err(ctx), st, "the CUDA backend is unavailable: %s", fmha__cuda_backend.unavailable());
        goto done;
    }
    st = open_backend(ctx, &fmha__cpu_backend, device);
done:
    if (st) {
        fmha__copy_msg(create_err, sizeof create_err, fmha__ctx_err(ctx)[0] ? fmha__ctx_err(ctx) : fmha_status_name(st));
        fmha_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_context_create_virtual(fmha_context_t **out, const char *arch, int sm_count)
{
    create_err[0] = '\0';
    if (!out || !arch)
        return fmha__fail(create_err, FMHA_STATUS_INVALID_ARGUMENT, "%s is NULL", out ? "arch" : "out");
    *out = NULL;
    int a = fmha__arch_lookup(arch);
    if (a < 0 || a == KA_CPU) {
        char known[64] = "";
        for (int k = KA_CPU + 1; k < KA_COUNT_; k++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k > KA_CPU + 1 ? ", " : "",
                     fmha__arch_names[k]);
        return fmha__fail(create_err, FMHA_STATUS_INVALID_ARGUMENT,
                          "arch \"%s\" is not a GPU arch fmha has kernels for; expected one of %s", arch, known);
    }
    if (sm_count < 0)
        return fmha__fail(create_err, FMHA_STATUS_INVALID_ARGUMENT,
                          "sm_count is %d; expected >= 0 (0: the arch's default count)", sm_count);
    fmha_context_t *ctx = context_new();
    if (!ctx) return fmha__fail(create_err, FMHA_STATUS_ALLOC_FAILED, "out of memory creating a context");
    /* plans and explain only: the CUDA backend's descriptors and plan-time checks, no
     * device; memory stays on the host */
    ctx->backend = FMHA_BACKEND_CUDA;
    fmha__target_of_arch(&ctx->target, (karch_t)a, sm_count, 1);
    if (fmha__cuda_backend.register_virtual(ctx, a)) {
        fmha_context_destroy(ctx);
        return fmha__fail(create_err, FMHA_STATUS_ALLOC_FAILED, "out of memory registering the kernels of %s", arch);
    }
    ctx->ops = &fmha__cpu_backend;
    *out = ctx;
    return FMHA_STATUS_SUCCESS;
}

const char *fmha__backend_with_family(const fmha_context_t *ctx, int kfamily)
{
    const fmha_backend_ops_t *all[] = {&fmha__cuda_backend, &fmha__cpu_backend};
    for (int i = 0; i < 2; i++)
        if (all[i]->kind != ctx->backend && all[i]->has_family(kfamily)) return all[i]->name;
    return NULL;
}

void fmha_context_destroy(fmha_context_t *ctx)
{
    if (!ctx) return;
    if (ctx->ops) ctx->ops->release(ctx);
    if (ctx->registry) fmha__registry_destroy(ctx->registry);
    free(ctx->registry);
    if (ctx->plans) fmha__plan_cache_destroy(ctx->plans);
    free(ctx->plans);
    fmha__tune_free(ctx->tune);
    pthread_rwlock_destroy(&ctx->lock);
    const int slot = err_slot_of(ctx); /* this thread's message for it goes with it */
    if (slot >= 0) err_slots[slot].ctx = NULL;
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

const char *fmha_context_last_error(const fmha_context_t *ctx)
{
    if (!ctx) return "";
    const int slot = err_slot_of(ctx);
    return slot >= 0 ? err_slots[slot].msg : "";
}

fmha_status_t fmha_context_load_tune_db(fmha_context_t *ctx, const char *path)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!path) return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT, "tuning database path is NULL");
    pthread_rwlock_wrlock(&ctx->lock);
    const int failed = fmha__tune_load(ctx, path, fmha__ctx_err(ctx), FMHA_ERR_LEN);
    if (!failed) fmha__plan_cache_clear(ctx->plans); /* the database can change what is selected */
    pthread_rwlock_unlock(&ctx->lock);
    if (failed) return FMHA_STATUS_INVALID_ARGUMENT;
    fmha__ctx_err(ctx)[0] = '\0';
    return FMHA_STATUS_SUCCESS;
}

char *fmha_context_kernels_json(fmha_context_t *ctx, int with_stats)
{
    if (!ctx) return NULL;
    char name[64];
    snprintf(name, sizeof name, "%s%s", fmha__arch_names[ctx->target.arch], ctx->target.is_virtual ? " (virtual)" : "");
    pthread_rwlock_rdlock(&ctx->lock);
    char *json = fmha__registry_json(ctx->registry, name, with_stats);
    pthread_rwlock_unlock(&ctx->lock);
    return json;
}

/* ------------------------------------------------------------------ memory */

fmha_status_t fmha_context_alloc(fmha_context_t *ctx, size_t bytes, void **ptr)
{
    if (!ctx || !ptr) return FMHA_STATUS_INVALID_ARGUMENT;
    *ptr = NULL;
    return ctx->ops->alloc(ctx, bytes, ptr);
}

void fmha_context_free(fmha_context_t *ctx, void *ptr)
{
    if (ctx && ptr) ctx->ops->free(ctx, ptr);
}

fmha_status_t fmha_context_copy(fmha_context_t *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    if (!ctx || (bytes && (!dst || !src))) return FMHA_STATUS_INVALID_ARGUMENT;
    return ctx->ops->copy(ctx, dst, src, bytes, to_device);
}

fmha_status_t fmha_context_synchronize(fmha_context_t *ctx)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    return ctx->ops->synchronize(ctx);
}

/* ------------------------------------------------------------------ plan cache */

fmha_status_t fmha_context_plan_cache_stats(fmha_context_t *ctx, fmha_plan_cache_stats_t *out)
{
    if (!ctx || !out) return FMHA_STATUS_INVALID_ARGUMENT;
    if (out->struct_size < sizeof *out)
        return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT,
                          "plan cache stats struct_size is %u; expected %zu (set struct_size = "
                          "sizeof(fmha_plan_cache_stats_t))",
                          (unsigned)out->struct_size, sizeof *out);
    fmha__plan_cache_stats(ctx->plans, out);
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_context_plan_cache_clear(fmha_context_t *ctx)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    fmha__plan_cache_clear(ctx->plans);
    return FMHA_STATUS_SUCCESS;
}
