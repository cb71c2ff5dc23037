/* SPDX-License-Identifier: MIT */
/* kernels_api.c: the public kernel-set and registry functions over kset/registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kset.h"
#include "plan_cache.h"
#include "registry.h"
#include "specs.h"

/* The set is the first (only) member: src/cuda/build.c reads it as a kset_t. */
struct fmha_kernel_set {
    kset_t set;
};

static fmha_status_t new_set(fmha_kernel_set_t **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return FMHA_STATUS_ALLOC_FAILED;
    fmha__kset_init(&(*out)->set);
    return FMHA_STATUS_SUCCESS;
}

static int gpu_arch(const char *arch, char *why, size_t len)
{
    int a = arch ? fmha__arch_lookup(arch) : -1;
    if (a <= KA_CPU) {
        snprintf(why, len, "arch '%s' is not a GPU arch; expected sm80, sm86, sm89 or sm90", arch ? arch : "(null)");
        return -1;
    }
    return a;
}

fmha_status_t fmha_kernel_set_enumerate(const char *arch, const char *receipt, const char *filter,
                                        fmha_kernel_set_t **out, char *why, size_t why_len)
{
    char msg[512] = "";
    fmha_status_t st = FMHA_STATUS_INVALID_ARGUMENT;
    kfilter_t *f = NULL;
    if (!out) return st;
    *out = NULL;
    int a = gpu_arch(arch, msg, sizeof msg);
    int r = receipt ? fmha__receipt_lookup(receipt) : RECEIPT_DEFAULT;
    if (a < 0) goto done;
    if (r < 0) {
        snprintf(msg, sizeof msg, "receipt '%s' is unknown; expected default, flash, pytorch, serving, training, fp8 or all", receipt);
        goto done;
    }
    if (filter && !(f = fmha__filter_compile(filter, msg, sizeof msg))) goto done;
    if ((st = new_set(out))) goto done;
    if (fmha__enumerate((karch_t)a, (receipt_t)r, f, &(*out)->set, msg, sizeof msg)) {
        fmha_kernel_set_destroy(*out);
        *out = NULL;
        st = FMHA_STATUS_ALLOC_FAILED;
    }
done:
    fmha__filter_free(f);
    fmha__copy_msg(why, why_len, msg);
    return st;
}

fmha_status_t fmha_kernel_set_from_json(const char *arch, const char *json, fmha_kernel_set_t **out, char *why,
                                        size_t why_len)
{
    char msg[512] = "";
    if (!out) return FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    int a = gpu_arch(arch, msg, sizeof msg);
    fmha_status_t st = FMHA_STATUS_INVALID_ARGUMENT;
    if (a >= 0 && !json) snprintf(msg, sizeof msg, "json text is NULL");
    if (a >= 0 && json && !(st = new_set(out)) && fmha__kset_from_json((karch_t)a, json, &(*out)->set, msg, sizeof msg)) {
        fmha_kernel_set_destroy(*out);
        *out = NULL;
        st = FMHA_STATUS_INVALID_ARGUMENT;
    }
    fmha__copy_msg(why, why_len, msg);
    return st;
}

fmha_status_t fmha_kernel_set_merge(fmha_kernel_set_t *dst, const fmha_kernel_set_t *src)
{
    if (!dst || !src) return FMHA_STATUS_INVALID_ARGUMENT;
    return fmha__kset_merge(&dst->set, &src->set) ? FMHA_STATUS_ALLOC_FAILED : FMHA_STATUS_SUCCESS;
}

void fmha_kernel_set_destroy(fmha_kernel_set_t *set)
{
    if (!set) return;
    fmha__kset_free(&set->set);
    free(set);
}

size_t fmha_kernel_set_count(const fmha_kernel_set_t *set) { return set ? set->set.count : 0; }

const char *fmha_kernel_set_name(const fmha_kernel_set_t *set, size_t i)
{
    return set && i < set->set.count ? set->set.names[i] : NULL;
}

const char *fmha_kernel_set_family(const fmha_kernel_set_t *set, size_t i)
{
    return set && i < set->set.count ? fmha__family_names[set->set.keys[i].family] : NULL;
}

fmha_status_t fmha_kernel_name_parse(const char *name, char *key_json, size_t len, char *why, size_t why_len)
{
    fmha_key_t k;
    char msg[512];
    if (fmha__key_parse(name, &k, msg, sizeof msg)) {
        fmha__copy_msg(why, why_len, msg);
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    if (key_json) fmha__key_json(&k, key_json, len);
    fmha__copy_msg(why, why_len, "");
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha_context_register(fmha_context_t *ctx, const fmha_kernel_set_t *set, int priority)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!set) return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT, "kernel set is NULL");
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    pthread_rwlock_wrlock(&ctx->lock); /* waits for the plans being made */
    for (size_t i = 0; i < set->set.count && !st; i++) {
        /* descriptors only: this build has no GPU code to run them */
        kdesc_t d = {.name = set->set.names[i], .key = set->set.keys[i], .priority = priority};
        if (fmha__registry_add(ctx->registry, &d) < 0)
            st = fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_ALLOC_FAILED, "out of memory registering kernels");
    }
    fmha__plan_cache_clear(ctx->plans); /* new kernels can change what is selected */
    pthread_rwlock_unlock(&ctx->lock);
    return st;
}
