/* SPDX-License-Identifier: MIT */
/*
 * build.c: fmha_build, the parallel precompiler. Enumerates the set, keeps the instances
 * a row of the family table accepts (fmha__cuda_family_of), and compiles
 * them with a pool of threads into the JIT's disk cache. A caller's list of names (the
 * bench's candidates) is built as given instead.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/kset.h"
#include "family.h"
#include "jit.h"

typedef struct pool {
    const kset_t *set;
    const size_t *todo;
    size_t n, next, done;
    int sm;
    const fmha_build_options_t *opt;
    fmha_build_result_t *res;
    pthread_mutex_t lock;
    char first_err[1024];
} pool_t;

static void *worker(void *arg)
{
    pool_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next < p->n ? p->next++ : (size_t)-1;
        pthread_mutex_unlock(&p->lock);
        if (i == (size_t)-1) return NULL;
        const fmha_key_t *k = &p->set->keys[p->todo[i]];
        char defs[FMHA_MAX_DEFINES][FMHA_DEFINE_LEN], err[4096] = "";
        const char *dp[FMHA_MAX_DEFINES];
        const int nd = fmha__cuda_key_defines(k, defs, dp);
        void *cubin = NULL;
        size_t size = 0;
        int cached = 0;
        fmha_status_t st = fmha__jit_cubin(fmha__cuda_family_of(k)->source, dp, nd, p->sm, &cubin, &size, &cached,
                                           err, sizeof err);
        free(cubin);
        pthread_mutex_lock(&p->lock);
        if (st) {
            p->res->failed++;
            if (!p->first_err[0])
                snprintf(p->first_err, sizeof p->first_err, "%.200s: %.800s", p->set->names[p->todo[i]], err);
        } else if (cached) {
            p->res->cached++;
        } else {
            p->res->compiled++;
        }
        p->done++;
        if (p->opt->progress) p->opt->progress(p->done, p->n, p->set->names[p->todo[i]], cached, p->opt->user);
        pthread_mutex_unlock(&p->lock);
    }
}

/* Add a name list (one per line), all of one arch, to an empty set. Returns 0, or -1 with
 * why. */
static int set_of_names(const char *names, const char *arch, kset_t *set, char *why, size_t len)
{
    for (const char *at = names; *at;) {
        const size_t n = strcspn(at, "\n");
        char name[512];
        if (n >= sizeof name) {
            snprintf(why, len, "kernel name of %zu characters in the list; a name has fewer than %zu", n, sizeof name);
            return -1;
        }
        memcpy(name, at, n);
        name[n] = '\0';
        at += n + (at[n] == '\n');
        if (!name[0]) continue;
        fmha_key_t k;
        char msg[512];
        if (fmha__key_parse(name, &k, msg, sizeof msg)) {
            snprintf(why, len, "kernel name '%.200s': %.300s", name, msg);
            return -1;
        }
        const char *karch = fmha__arch_names[k.arch];
        const char *want = arch ? arch : set->count ? fmha__arch_names[set->keys[0].arch] : karch;
        if (strcmp(karch, want) != 0) {
            snprintf(why, len, "kernel '%.200s' is for %s; the list's arch is %.16s (one arch per build)", name, karch, want);
            return -1;
        }
        if (fmha__kset_add(set, &k) < 0) {
            snprintf(why, len, "out of memory");
            return -1;
        }
    }
    return 0;
}

fmha_status_t fmha_build(const fmha_build_options_t *opt, fmha_build_result_t *res, char *why, size_t why_len)
{
    char msg[1024] = "";
    if (!opt || !res || opt->struct_size < offsetof(fmha_build_options_t, names)) return FMHA_STATUS_INVALID_ARGUMENT;
    memset(res, 0, sizeof *res);
    const char *names = opt->struct_size >= sizeof(fmha_build_options_t) ? opt->names : NULL;
    if (names && (opt->receipt || opt->filter)) {
        fmha__copy_msg(why, why_len, "build options: names is given with a receipt or a filter; a name list is the whole set");
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    const char *nv_why;
    if (!fmha__nvrtc_available(&nv_why)) {
        fmha__copy_msg(why, why_len, nv_why);
        return FMHA_STATUS_NOT_COMPILED;
    }
    fmha_kernel_set_t *pub = NULL;
    kset_t named; /* the name list's set (empty without one) */
    fmha__kset_init(&named);
    const kset_t *set;
    if (names) {
        if (set_of_names(names, opt->arch, &named, msg, sizeof msg)) {
            fmha__kset_free(&named);
            fmha__copy_msg(why, why_len, msg);
            return FMHA_STATUS_INVALID_ARGUMENT;
        }
        set = &named;
    } else {
        fmha_status_t st = fmha_kernel_set_enumerate(opt->arch, opt->receipt, opt->filter, &pub, msg, sizeof msg);
        if (st) {
            fmha__copy_msg(why, why_len, msg);
            return st;
        }
        set = (const kset_t *)pub; /* the public set wraps a kset_t as its only member */
    }
    size_t *todo = malloc((set->count + 1) * sizeof *todo), n = 0;
    if (!todo) {
        fmha_kernel_set_destroy(pub);
        fmha__kset_free(&named);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    for (size_t i = 0; i < set->count; i++) {
        const fmha_key_t *k = &set->keys[i];
        if (fmha__cuda_family_of(k)) todo[n++] = i;
        else res->skipped++;
    }
    const int sm = fmha__cuda_sm_of(set->count ? (karch_t)set->keys[0].arch : KA_CPU);
    pool_t pool = {set, todo, n, 0, 0, sm, opt, res, PTHREAD_MUTEX_INITIALIZER, ""};
    int threads = opt->threads > 0 ? opt->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if ((size_t)threads > n) threads = n ? (int)n : 1;
    pthread_t th[256];
    int started = 0;
    for (; started < threads && started < 256; started++)
        if (pthread_create(&th[started], NULL, worker, &pool)) break;
    if (started == 0) worker(&pool);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(todo);
    fmha_kernel_set_destroy(pub);
    fmha__kset_free(&named);
    fmha__copy_msg(why, why_len, pool.first_err);
    return res->failed ? FMHA_STATUS_COMPILE_FAILED : FMHA_STATUS_SUCCESS;
}
