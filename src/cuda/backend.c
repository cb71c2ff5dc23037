/*
 * backend.c: the CUDA backend. A context retains the device's primary CUDA context,
 * reads the device's properties into its target, and registers the forward instances
 * this build can run (mma.sync, every hdim pair, every feature but dropout). Plan
 * creation compiles (NVRTC, cached) and loads the chosen kernel; execute only launches.
 */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/kset.h"
#include "../core/registry.h"
#include "../core/specs.h"
#include "driver.h"
#include "jit.h"
#include "params.h"

typedef struct loaded {
    char name[FMHA_KERNEL_NAME_LEN];
    CUcontext primary; /* made current around launches */
    CUmodule module;
    CUfunction fn;
    int smem, threads, tile_m;
    int masked;   /* the kernel's grid is 1-d, longest-first in L2 groups (common.cuh) */
    int l2_bytes; /* the device's L2 cache */
    int sm_count;
    int tma_rows; /* sm90 kernel: takes TMA maps of Q (boxes of tile_m rows), K and V (this many); else 0 */
    int hdim_qk, hdim_v;
} loaded_t;

struct cuda_ctx {
    const cuda_api_t *cu;
    CUdevice dev;
    CUcontext primary;
    int l2_bytes, sm_count;
    pthread_mutex_t lock; /* guards the loaded-module list */
    loaded_t **mods;
    size_t nmods, cap;
};

const char *fmha__cuda_status(void)
{
    const char *why;
    return fmha__cuda(&why) ? "ok" : why;
}

static fmha_status_t cu_fail(char *err, size_t len, const char *what, CUresult r)
{
    char buf[256];
    snprintf(err, len, "%s: %s", what, fmha__cuda_error(r, buf, sizeof buf));
    return FMHA_STATUS_CUDA_ERROR;
}

/* The preprocessor defines of a key, for the JIT. */
int fmha__cuda_key_defines(const fmha_key_t *k, char defs[][48])
{
    int n = 0;
    snprintf(defs[n++], 48, "FMHA_BF16=%d", k->dtype == KD_BF16);
    snprintf(defs[n++], 48, "FMHA_HDIM_QK=%d", k->hdim_qk);
    snprintf(defs[n++], 48, "FMHA_HDIM_V=%d", k->hdim_v);
    snprintf(defs[n++], 48, "FMHA_TILE_M=%d", k->tile_m);
    snprintf(defs[n++], 48, "FMHA_TILE_N=%d", k->tile_n);
    snprintf(defs[n++], 48, "FMHA_WARPS=%d", k->warps);
    snprintf(defs[n++], 48, "FMHA_STAGES=%d", k->stages);
    snprintf(defs[n++], 48, "FMHA_MASK=%d", k->mask);
    snprintf(defs[n++], 48, "FMHA_BIAS=%d", k->bias);
    snprintf(defs[n++], 48, "FMHA_LSE=%d", k->lse);
    snprintf(defs[n++], 48, "FMHA_SOFTCAP=%d", k->softcap);
    snprintf(defs[n++], 48, "FMHA_SINK=%d", k->sink);
    snprintf(defs[n++], 48, "FMHA_GROUP=%d", k->mode == KM_GROUP);
    return n;
}


const char *fmha__cuda_kernel_source(const fmha_key_t *k, const char **entry, int *smem)
{
    if (k->family != KF_FWD || k->dropout) return NULL;
    if (k->pipeline == KPIPE_MMASYNC && k->stages == 2) {
        *entry = "fmha_fwd_mma";
        *smem = fmha__smem_bytes(k); /* the kernel's layout: Q + 2 x (K, V), padded rows */
        return fmha_src_fwd_mma;
    }
    const int dims_ok = k->hdim_qk == k->hdim_v && (k->hdim_v == 64 || k->hdim_v == 128 || k->hdim_v == 256);
    if (k->pipeline == KPIPE_WGMMAWS && k->arch == KA_SM90 && (k->dtype == KD_FP16 || k->dtype == KD_BF16) && dims_ok &&
        (k->tile_n == 64 || k->tile_n == 128) && k->stages == 2) {
        *entry = "fmha_fwd_wgmma";
        /* Q, two stages of K and V (128B-swizzle layout, no padding), ten mbarriers, and
         * 1 KiB of slack to start the tiles 1024-byte aligned */
        *smem = (k->tile_m * k->hdim_qk + 2 * k->tile_n * (k->hdim_qk + k->hdim_v)) * 2 + 128 + 1024;
        return fmha_src_fwd_wgmma;
    }
    return NULL;
}

static fmha_status_t prepare(const kdesc_t *d, fmha_context_t *ctx, const fmha_problem_t *p, void **data, char *err,
                             size_t len)
{
    (void)p;
    struct cuda_ctx *c = ctx->cuda;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nmods; i++)
        if (strcmp(c->mods[i]->name, d->name) == 0) {
            *data = c->mods[i];
            pthread_mutex_unlock(&c->lock);
            return FMHA_STATUS_SUCCESS;
        }
    pthread_mutex_unlock(&c->lock);

    char defs[16][48];
    const char *dp[16];
    int nd = fmha__cuda_key_defines(&d->key, defs);
    for (int i = 0; i < nd; i++) dp[i] = defs[i];
    static const int sm_of[KA_COUNT_] = {0, 80, 86, 89, 90};
    const char *entry = NULL;
    int smem = 0;
    const char *source = fmha__cuda_kernel_source(&d->key, &entry, &smem);
    if (!source) return fmha__fail(err, FMHA_STATUS_NOT_COMPILED, "this build has no kernel source for %s", d->name);
    void *cubin = NULL;
    size_t size = 0;
    int cached;
    fmha_status_t st = fmha__jit_cubin(source, dp, nd, sm_of[d->key.arch], &cubin, &size, &cached, err, len);
    if (st) return st;
    loaded_t *m = calloc(1, sizeof *m);
    if (!m) {
        free(cubin);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    snprintf(m->name, sizeof m->name, "%s", d->name);
    m->smem = smem;
    m->threads = 32 * d->key.warps;
    m->tile_m = d->key.tile_m;
    m->masked = d->key.mask != KMASK_NONE;
    m->l2_bytes = c->l2_bytes;
    m->sm_count = c->sm_count;
    m->tma_rows = strcmp(entry, "fmha_fwd_wgmma") == 0 ? d->key.tile_n : 0;
    m->hdim_qk = d->key.hdim_qk, m->hdim_v = d->key.hdim_v;
    m->primary = c->primary;
    const cuda_api_t *cu = c->cu;
    cu->cuCtxPushCurrent(c->primary);
    CUresult r = cu->cuModuleLoadData(&m->module, cubin);
    if (!r) r = cu->cuModuleGetFunction(&m->fn, m->module, entry);
    if (!r) r = cu->cuFuncSetAttribute(m->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, m->smem);
    CUcontext popped;
    cu->cuCtxPopCurrent(&popped);
    free(cubin);
    if (r) {
        free(m);
        return cu_fail(err, len, "loading the compiled kernel", r);
    }
    /* the context owns every loaded module (unloaded at context destroy) */
    pthread_mutex_lock(&c->lock);
    if (c->nmods == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        loaded_t **mods = realloc(c->mods, cap * sizeof *mods);
        if (mods) c->mods = mods, c->cap = cap;
    }
    int owned = c->nmods < c->cap;
    if (owned) c->mods[c->nmods++] = m;
    pthread_mutex_unlock(&c->lock);
    if (!owned) {
        cu->cuCtxPushCurrent(c->primary);
        cu->cuModuleUnload(m->module);
        cu->cuCtxPopCurrent(&popped);
        free(m);
        return fmha__fail(err, FMHA_STATUS_ALLOC_FAILED, "out of memory recording loaded kernel %s", d->name);
    }
    *data = m;
    return FMHA_STATUS_SUCCESS;
}

static int64_t stride_of(const fmha_tensor_desc_t *t, int d) { return t ? t->strides[d] : 0; }

/* One TMA map over a batch-mode Q, K or V: dims (head dim, seqlen, heads, batch), boxes of
 * 64 x rows (128-byte rows, the kernel's swizzled blocks); rows past seqlen read as zeros.
 * Nonzero when the driver refuses the layout. */
static CUresult encode_map(const cuda_api_t *cu, uint64_t *map, uint64_t addr, int hdim, int seqlen, int heads, int batch,
                           int64_t row, int64_t head, int64_t bstride, int rows)
{
    const unsigned long long dims[4] = {(unsigned long long)hdim, (unsigned long long)seqlen,
                                        (unsigned long long)heads, (unsigned long long)batch};
    /* byte strides; a batch of one has no batch stride of its own, any valid one does */
    const unsigned long long strides[3] = {(unsigned long long)row * 2, (unsigned long long)head * 2,
                                           batch > 1 ? (unsigned long long)bstride * 2
                                                     : (unsigned long long)row * 2 * (unsigned long long)seqlen};
    for (int i = 0; i < 3; i++)
        if (strides[i] == 0 || strides[i] % 16) return 1; /* TMA's rule; the kernel falls back */
    const unsigned box[4] = {64, (unsigned)rows, 1, 1}, ones[4] = {1, 1, 1, 1};
    return cu->cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)(uintptr_t)addr, dims, strides,
                                      box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* FMHA_DEBUG: say on stderr, once per process, why a launch copies Q/K/V with cp.async. */
static void tma_fallback_note(const loaded_t *m, const char *q_why, const char *k_why, const char *v_why)
{
    static int said;
    const char *debug = getenv("FMHA_DEBUG");
    if (debug && *debug && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "fmha: %s copies Q/K/V with cp.async: TMA map of Q: %s, of K: %s, of V: %s\n", m->name, q_why,
                k_why, v_why);
}

/* The sm90 kernel's Q, K and V maps (params.h). Group mode keeps cp.async: its tiles end
 * inside the packed tensor, where TMA would read the next sequence's rows, not zeros. */
static void encode_tma(const cuda_api_t *cu, const loaded_t *m, const fmha_fwd_params_t *a, int group,
                       fmha_tma_maps_t *maps)
{
    memset(maps, 0, sizeof *maps);
    if (group) return;
    if (!cu->cuTensorMapEncodeTiled) {
        tma_fallback_note(m, "the driver has no cuTensorMapEncodeTiled", "likewise", "likewise");
        return;
    }
    CUresult rq = encode_map(cu, maps->q, a->q, m->hdim_qk, a->seqlen_q, a->heads_q, a->batch, a->q_row, a->q_head,
                             a->q_batch, m->tile_m);
    CUresult rk = encode_map(cu, maps->k, a->k, m->hdim_qk, a->seqlen_k, a->heads_kv, a->batch, a->k_row, a->k_head,
                             a->k_batch, m->tma_rows);
    CUresult rv = encode_map(cu, maps->v, a->v, m->hdim_v, a->seqlen_k, a->heads_kv, a->batch, a->v_row, a->v_head,
                             a->v_batch, m->tma_rows);
    maps->use_tma = rq == 0 && rk == 0 && rv == 0;
    if (!maps->use_tma) {
        char e0[128], e1[128], e2[128];
        tma_fallback_note(m, rq ? fmha__cuda_error(rq, e0, sizeof e0) : "ok", rk ? fmha__cuda_error(rk, e1, sizeof e1) : "ok",
                          rv ? fmha__cuda_error(rv, e2, sizeof e2) : "ok");
    }
}

/* The sm90 kernel runs persistent up to this many keys (measured at 512 to 2k; at 16k it loses). */
#define PERSISTENT_MAX_KEYS 2048

/* Masked grids: how many (batch, head) pairs share L2 at a time (masked_cta_coords).
 * Their K and V should fit in half of L2 (the rest streams Q and O); the query heads of
 * one GQA group read one K/V head. */
static int l2_group(const loaded_t *m, const fmha_fwd_params_t *a)
{
    const int64_t pairs = (int64_t)a->batch * a->heads_q;
    const int64_t kv_bytes = (int64_t)a->seqlen_k * (m->hdim_qk + m->hdim_v) * 2 / (a->heads_q / a->heads_kv);
    const int64_t l2 = m->l2_bytes > 0 ? m->l2_bytes : 50 << 20;
    int64_t group = kv_bytes > 0 ? l2 / 2 / kv_bytes : pairs;
    if (group < 1) group = 1;
    return (int)(group < pairs ? group : pairs);
}

static fmha_status_t run_fwd(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                             struct CUstream_st *stream, char *err, size_t len)
{
    (void)workspace;
    const fmha_problem_t *p = &plan->problem;
    const loaded_t *m = plan->stage_data[stage];
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const int o = group ? 0 : 1; /* index of the token dim */
    const fmha_tensor_desc_t *q = fmha__t(p, FMHA_TENSOR_Q), *k = fmha__t(p, FMHA_TENSOR_K),
                             *v = fmha__t(p, FMHA_TENSOR_V), *out = fmha__t(p, FMHA_TENSOR_O),
                             *lse = fmha__t(p, FMHA_TENSOR_LSE), *bias = fmha__t(p, FMHA_TENSOR_BIAS),
                             *alibi = fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES), *sink = fmha__t(p, FMHA_TENSOR_SINK);
    /* 16-byte vector loads need aligned rows */
    const fmha_tensor_role_t vec[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)data[vec[i]] % 16)
            return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                              "[rule cuda.alignment] tensor %s at %p is not 16-byte aligned; the CUDA kernels load rows in 16-byte vectors",
                              fmha_tensor_role_name(vec[i]), data[vec[i]]);
    fmha_fwd_params_t a;
    memset(&a, 0, sizeof a);
    a.q = (uint64_t)(uintptr_t)data[FMHA_TENSOR_Q];
    a.k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_K];
    a.v = (uint64_t)(uintptr_t)data[FMHA_TENSOR_V];
    a.o = (uint64_t)(uintptr_t)data[FMHA_TENSOR_O];
    a.lse = (uint64_t)(uintptr_t)data[FMHA_TENSOR_LSE];
    a.bias = (uint64_t)(uintptr_t)data[FMHA_TENSOR_BIAS];
    a.alibi = (uint64_t)(uintptr_t)data[FMHA_TENSOR_ALIBI_SLOPES];
    a.sink = (uint64_t)(uintptr_t)data[FMHA_TENSOR_SINK];
    a.cu_seqlens_q = (uint64_t)(uintptr_t)data[FMHA_TENSOR_CU_SEQLENS_Q];
    a.cu_seqlens_k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_CU_SEQLENS_KV];
    a.seqused_k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_SEQUSED_KV];
    a.q_batch = group ? 0 : q->strides[0], a.q_row = q->strides[o], a.q_head = q->strides[o + 1];
    a.k_batch = group ? 0 : k->strides[0], a.k_row = k->strides[o], a.k_head = k->strides[o + 1];
    a.v_batch = group ? 0 : v->strides[0], a.v_row = v->strides[o], a.v_head = v->strides[o + 1];
    a.o_batch = group ? 0 : out->strides[0], a.o_row = out->strides[o], a.o_head = out->strides[o + 1];
    if (lse) {
        if (group) a.lse_head = lse->strides[0], a.lse_row = lse->strides[1];
        else a.lse_batch = lse->strides[0], a.lse_head = lse->strides[1], a.lse_row = lse->strides[2];
    }
    if (bias) {
        a.bias_batch = bias->dims[0] == 1 ? 0 : bias->strides[0];
        a.bias_head = bias->dims[1] == 1 ? 0 : bias->strides[1];
        a.bias_row = bias->strides[2], a.bias_col = bias->strides[3];
    }
    if (alibi) {
        a.alibi_batch = alibi->rank == 2 ? alibi->strides[0] : 0;
        a.alibi_head = alibi->strides[alibi->rank - 1];
    }
    a.sink_head = stride_of(sink, 0);
    a.batch = (int32_t)fmha__i(p, FMHA_PARAM_BATCH);
    a.heads_q = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    a.heads_kv = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    a.seqlen_q = (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    a.seqlen_k = (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    fmha_mask_t mk = fmha__problem_mask(p);
    a.window_left = (int32_t)mk.left, a.window_right = (int32_t)mk.right;
    a.sink_tokens = (int32_t)mk.sink_tokens, a.bottom_right = mk.align == FMHA_MASK_ALIGN_BOTTOM_RIGHT;
    a.scale = (float)fmha__effective_scale(p);
    a.scale_log2 = (float)(fmha__effective_scale(p) * 1.4426950408889634);
    a.softcap = (float)fmha__f(p, FMHA_PARAM_SOFTCAP);

    /* the context that made the plan retains the primary context for the plan's life */
    const cuda_api_t *cu = fmha__cuda(NULL);
    const unsigned gx = (unsigned)((a.seqlen_q + m->tile_m - 1) / m->tile_m);
    /* the wgmma kernel and masked grids walk a 1-d list of work items (common.cuh) */
    const int64_t items = (int64_t)gx * a.batch * a.heads_q;
    const int linear = m->masked || m->tma_rows;
    if (linear && items > 0x7fffffff)
        return fmha__fail(err, FMHA_STATUS_NOT_SUPPORTED,
                          "[rule cuda.grid] this forward kernel walks m-blocks x batch x heads = %lld work items in one "
                          "grid dimension; the limit is 2^31 - 1",
                          (long long)items);
    a.l2_pairs = l2_group(m, &a);
    fmha_tma_maps_t maps; /* the sm90 kernel's second argument */
    void *args[2] = {&a, &maps};
    cu->cuCtxPushCurrent(m->primary);
    if (m->tma_rows) encode_tma(cu, m, &a, group, &maps); /* the driver wants a current context */
    /* Short sequences run the sm90 kernel persistent: one CTA per SM (its registers admit
     * one) walks several items, overlapping one's epilogue with the next one's loads
     * (+20-35% at 512). Long ones keep a CTA per item: the static walk cannot balance a
     * long causal list (-10 to -40% at 16k) the way the hardware's CTA scheduler does,
     * and there the overlap is worth little (perf-notes run 20). */
    unsigned ctas = (unsigned)items;
    if (m->tma_rows && maps.use_tma && a.seqlen_k <= PERSISTENT_MAX_KEYS && items > m->sm_count)
        ctas = (unsigned)m->sm_count;
    const unsigned grid[3] = {linear ? ctas : gx, linear ? 1u : (unsigned)a.batch, linear ? 1u : (unsigned)a.heads_q};
    CUresult r = cu->cuLaunchKernel(m->fn, grid[0], grid[1], grid[2], (unsigned)m->threads, 1, 1, (unsigned)m->smem,
                                    (CUstream)stream, args, NULL);
    CUcontext popped;
    cu->cuCtxPopCurrent(&popped);
    if (r) return cu_fail(err, len, "launching the forward kernel", r);
    return FMHA_STATUS_SUCCESS;
}

/* Registration: every valid forward instance of the device's arch (all tiles, features
 * and modes) that this build has a kernel source for (fmha__cuda_kernel_source): the
 * sm80-path kernel everywhere, the wgmma kernel's shapes on sm90. Dropout is not
 * implemented on the GPU yet. */
static int register_kernels(fmha_context_t *ctx)
{
    char why[256];
    kfilter_t *f = fmha__filter_compile("family==fwd && !dropout", why, sizeof why);
    kset_t set;
    fmha__kset_init(&set);
    int rc = f ? fmha__enumerate((karch_t)ctx->target.arch, RECEIPT_ALL, f, &set, why, sizeof why) : -1;
    for (size_t i = 0; rc == 0 && i < set.count; i++) {
        const char *entry;
        int smem;
        if (!fmha__cuda_kernel_source(&set.keys[i], &entry, &smem)) continue;
        kdesc_t d = {set.names[i], set.keys[i], 0, 0, run_fwd, NULL, prepare};
        if (fmha__registry_add(ctx->registry, &d) < 0) rc = -1;
    }
    fmha__kset_free(&set);
    fmha__filter_free(f);
    return rc;
}

fmha_status_t fmha__cuda_context_init(fmha_context_t *ctx, int device)
{
    const char *why;
    const cuda_api_t *cu = fmha__cuda(&why);
    if (!cu) return fmha__fail(ctx->err, FMHA_STATUS_NOT_COMPILED, "CUDA backend unavailable: %s", why);
    struct cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return FMHA_STATUS_ALLOC_FAILED;
    pthread_mutex_init(&c->lock, NULL);
    c->cu = cu;
    ctx->cuda = c;
    CUresult r = cu->cuDeviceGet(&c->dev, device);
    if (r) return cu_fail(ctx->err, FMHA_ERR_LEN, "cuDeviceGet", r);
    int major = 0, minor = 0, sms = 0, smem_block = 0, smem_sm = 0;
    cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev);
    cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev);
    cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev);
    cu->cuDeviceGetAttribute(&smem_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, c->dev);
    cu->cuDeviceGetAttribute(&smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, c->dev);
    cu->cuDeviceGetAttribute(&c->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, c->dev);
    c->sm_count = sms;
    int sm = major * 10 + minor;
    karch_t arch = sm == 80 ? KA_SM80 : sm == 86 ? KA_SM86 : sm == 89 ? KA_SM89 : sm == 90 ? KA_SM90 : KA_CPU;
    if (arch == KA_CPU)
        return fmha__fail(ctx->err, FMHA_STATUS_ARCH_MISMATCH,
                          "device %d is sm_%d; this version has kernels for sm_80, sm_86, sm_89 and sm_90", device, sm);
    r = cu->cuDevicePrimaryCtxRetain(&c->primary, c->dev);
    if (r) return cu_fail(ctx->err, FMHA_ERR_LEN, "cuDevicePrimaryCtxRetain", r);
    const arch_spec_t *spec = fmha__arch_spec(arch);
    ctx->target.arch = arch;
    ctx->target.is_virtual = 0;
    ctx->target.sm_count = sms;
    ctx->target.smem_per_block = smem_block;
    ctx->target.smem_per_sm = smem_sm;
    ctx->target.regs_per_sm = spec->regs_per_sm;
    if (register_kernels(ctx)) return FMHA_STATUS_ALLOC_FAILED;
    return FMHA_STATUS_SUCCESS;
}

void fmha__cuda_context_release(fmha_context_t *ctx)
{
    struct cuda_ctx *c = ctx->cuda;
    if (!c) return;
    for (size_t i = 0; i < c->nmods; i++) {
        if (c->primary) {
            c->cu->cuCtxPushCurrent(c->primary);
            c->cu->cuModuleUnload(c->mods[i]->module);
            CUcontext popped;
            c->cu->cuCtxPopCurrent(&popped);
        }
        free(c->mods[i]);
    }
    free(c->mods);
    if (c->primary) c->cu->cuDevicePrimaryCtxRelease(c->dev);
    pthread_mutex_destroy(&c->lock);
    free(c);
    ctx->cuda = NULL;
}

struct CUctx_st *fmha__cuda_primary(fmha_context_t *ctx) { return ctx->cuda ? ctx->cuda->primary : NULL; }
