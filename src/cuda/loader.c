/* SPDX-License-Identifier: MIT */
/*
 * loader.c: the CUDA backend's kernels as registry descriptors. Registration walks the
 * family table (families.c); plan creation compiles (NVRTC, cached on disk) and loads a
 * chosen kernel once per context (prepare); execute only launches through its row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/kset.h"
#include "../core/registry.h"
#include "../core/specs.h"
#include "jit.h"
#include "state.h"

static cuda_kernel_t *find_loaded(cuda_state_t *s, const char *name)
{
    cuda_kernel_t *found = NULL;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nkernels && !found; i++)
        if (strcmp(s->kernels[i]->name, name) == 0) found = s->kernels[i];
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* The state owns every loaded kernel (unloaded at release); a second thread that
 * loaded the same one meanwhile keeps its own copy in the list too (harmless). */
static int keep(cuda_state_t *s, cuda_kernel_t *m)
{
    pthread_mutex_lock(&s->lock);
    if (s->nkernels == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        cuda_kernel_t **k = realloc(s->kernels, cap * sizeof *k);
        if (k) s->kernels = k, s->cap = cap;
    }
    int kept = s->nkernels < s->cap;
    if (kept) s->kernels[s->nkernels++] = m;
    pthread_mutex_unlock(&s->lock);
    return kept;
}

static void unload(cuda_state_t *s, cuda_kernel_t *m)
{
    CUcontext popped;
    s->cu->cuCtxPushCurrent(s->primary);
    if (m->module) s->cu->cuModuleUnload(m->module);
    s->cu->cuCtxPopCurrent(&popped);
    free(m);
}

void fmha__cuda_unload_all(cuda_state_t *s)
{
    for (size_t i = 0; i < s->nkernels; i++) unload(s, s->kernels[i]);
    free(s->kernels);
    s->kernels = NULL;
    s->nkernels = s->cap = 0;
}

/* Does the cubin define the phase report printer (phase_clock.cuh)? Its name is in the
 * ELF string table of a diagnostic build's cubin and in no other. */
static int has_phase_print(const void *cubin, size_t size)
{
    static const char name[] = "fmha_phase_print";
    const char *c = cubin;
    for (size_t i = 0; i + sizeof name <= size; i++)
        if (c[i] == 'f' && memcmp(c + i, name, sizeof name) == 0) return 1; /* with its NUL */
    return 0;
}

static fmha_status_t prepare(const kdesc_t *d, fmha_context_t *ctx, const fmha_problem_t *p, void **data, char *err,
                             size_t len)
{
    (void)p;
    cuda_state_t *s = ctx->state;
    if ((*data = find_loaded(s, d->name))) return FMHA_STATUS_SUCCESS;
    const cuda_family_t *f = d->impl;
    char defs[FMHA_MAX_DEFINES][FMHA_DEFINE_LEN];
    const char *dp[FMHA_MAX_DEFINES];
    const int nd = fmha__cuda_key_defines(&d->key, defs, dp);
    void *cubin = NULL;
    size_t size = 0;
    int cached;
    fmha_status_t st = fmha__jit_cubin(f->source, dp, nd, fmha__cuda_sm_of((karch_t)d->key.arch), &cubin, &size,
                                       &cached, err, len);
    if (st) return st;
    cuda_kernel_t *m = calloc(1, sizeof *m);
    if (!m) {
        free(cubin);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    snprintf(m->name, sizeof m->name, "%s", d->name);
    m->family = f;
    m->key = d->key;
    m->primary = s->primary;
    m->smem = fmha__smem_bytes(&d->key);
    m->threads = f->threads(&d->key);
    m->device = s->info;
    CUcontext popped;
    s->cu->cuCtxPushCurrent(s->primary);
    CUresult r = s->cu->cuModuleLoadData(&m->module, cubin);
    if (!r) r = s->cu->cuModuleGetFunction(&m->fn, m->module, f->entry);
    if (!r) r = s->cu->cuFuncSetAttribute(m->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, m->smem);
    /* only a diagnostic build (FMHA_PHASE_CLOCKS) has it: looked up only when the cubin's
     * symbols name it, since a failed lookup is an API error to compute-sanitizer */
    if (!r && has_phase_print(cubin, size) &&
        s->cu->cuModuleGetFunction(&m->phase_print, m->module, "fmha_phase_print"))
        m->phase_print = NULL;
    s->cu->cuCtxPopCurrent(&popped);
    free(cubin);
    if (r) {
        unload(s, m);
        return fmha__cuda_fail(err, FMHA_STATUS_CUDA_ERROR, r, "loading the compiled kernel %s", d->name);
    }
    if (!keep(s, m)) {
        unload(s, m);
        return fmha__fail(err, FMHA_STATUS_ALLOC_FAILED, "out of memory recording loaded kernel %s", d->name);
    }
    *data = m;
    return FMHA_STATUS_SUCCESS;
}

/* Every stage of every CUDA family: the plan's loaded kernel launches through its row. */
static fmha_status_t run_stage(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                               struct CUstream_st *stream, char *err, size_t len)
{
    const cuda_kernel_t *m = plan->stage_data[stage];
    void *ws0 = plan->workspace_bytes ? fmha__stage_workspace(plan, workspace, stage, 0) : NULL;
    const cuda_launch_t l = {m, &plan->problem, data, workspace, ws0, plan->stage_data[0], (CUstream)stream, err, len};
    const cuda_api_t *cu = fmha__cuda(NULL);
    CUcontext popped;
    cu->cuCtxPushCurrent(m->primary); /* the driver calls of a launch want a current context */
    fmha_status_t st = m->family->launch(&l);
    /* a diagnostic build's kernel leaves its phase report in the module: printed after it,
     * by a kernel of its own (phase_clock.cuh: a printf would serialise its wgmmas) */
    if (!st && m->phase_print)
        cu->cuLaunchKernel(m->phase_print, 1, 1, 1, 1, 1, 1, 0, (CUstream)stream, NULL, NULL);
    cu->cuCtxPopCurrent(&popped);
    return st;
}

static const char *check(const kdesc_t *d, const fmha_problem_t *p, const fmha_target_t *t, char *buf, size_t len)
{
    const cuda_family_t *f = d->impl;
    return f && f->can_implement ? f->can_implement(&d->key, p, t, buf, len) : NULL;
}

static size_t workspace(const kdesc_t *d, const fmha_problem_t *p, int threads)
{
    (void)threads;
    const cuda_family_t *f = d->impl;
    return f && f->workspace ? f->workspace(&d->key, p) : 0;
}

static int add_set(fmha_context_t *ctx, const kset_t *set, int runnable)
{
    for (size_t i = 0; i < set->count; i++) {
        const cuda_family_t *f = fmha__cuda_family_of(&set->keys[i]);
        if (!f) continue; /* no row of the table implements it: not a kernel of this version */
        kdesc_t d;
        memset(&d, 0, sizeof d);
        d.name = set->names[i];
        d.key = set->keys[i];
        d.run = runnable ? run_stage : NULL;
        d.prepare = runnable ? prepare : NULL;
        d.workspace = workspace;
        d.check = check;
        d.impl = f;
        if (fmha__registry_add(ctx->registry, &d) < 0) return -1;
    }
    return 0;
}

/* Enumerate arch's receipt (filter: NULL for all) and register what add_set keeps. */
static int register_receipt(fmha_context_t *ctx, int arch, int receipt, const char *filter, int runnable)
{
    char why[256];
    kfilter_t *f = filter ? fmha__filter_compile(filter, why, sizeof why) : NULL;
    kset_t set;
    fmha__kset_init(&set);
    int rc = filter && !f ? -1 : fmha__enumerate((karch_t)arch, receipt, f, &set, why, sizeof why);
    if (rc == 0) rc = add_set(ctx, &set, runnable);
    fmha__kset_free(&set);
    fmha__filter_free(f);
    return rc;
}

int fmha__cuda_register(fmha_context_t *ctx, int arch, int receipt, int runnable)
{
    /* the keys of each family the table has rows for, once per family; a virtual context
     * (runnable 0) registers the same keys in the same order, minus the launches */
    for (int r = 0; r < fmha__cuda_family_count; r++) {
        const kfamily_t fam = fmha__cuda_families[r].family;
        int seen = 0;
        for (int e = 0; e < r; e++) seen |= fmha__cuda_families[e].family == fam;
        char filter[64];
        snprintf(filter, sizeof filter, "family==%s", fmha__family_names[fam]);
        if (!seen && register_receipt(ctx, arch, receipt, filter, runnable)) return -1;
    }
    return 0;
}
