/* SPDX-License-Identifier: MIT */
/*
 * backend.c: the CUDA backend's operations table (core/backend.h). A context retains the
 * device's primary CUDA context, reads the device's properties into its target and
 * registers the kernels of the family table (loader.c); memory operations are the
 * driver's, made current on the primary context around each call.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/backend.h"
#include "../core/kset.h"
#include "../core/specs.h"
#include "jit.h"
#include "splitkv.h"
#include "state.h"

static const char *cuda_unavailable(void)
{
    const char *why;
    return fmha__cuda(&why) ? NULL : why;
}

/* ' key="value"', the value's own double quotes turned single (fmha.h, fmha_build_info). */
static void quoted_pair(char *buf, size_t len, const char *key, const char *value)
{
    int at = snprintf(buf, len, " %s=\"", key);
    for (const char *v = value; *v && at + 2 < (int)len; v++) buf[at++] = *v == '"' ? '\'' : *v;
    buf[at++] = '"';
    buf[at] = '\0';
}

static void cuda_build_info(char *buf, size_t len)
{
    const char *cuda = cuda_unavailable(), *nv_why;
    const int nv = fmha__nvrtc_available(&nv_why);
    char c_why[200] = "", n_why[200] = "";
    if (cuda) quoted_pair(c_why, sizeof c_why, "cuda_off", cuda);
    if (!nv) quoted_pair(n_why, sizeof n_why, "nvrtc_off", nv_why);
    snprintf(buf, len, "cuda=%s%s nvrtc=%s%s", cuda ? "off" : "on", c_why, nv ? "on" : "off", n_why);
}

static int cuda_has_family(int kfamily)
{
    for (int r = 0; r < fmha__cuda_family_count; r++)
        if ((int)fmha__cuda_families[r].family == kfamily) return 1;
    return 0;
}

static karch_t arch_of_sm(int sm)
{
    for (int a = KA_SM80; a < KA_COUNT_; a++)
        if (fmha__cuda_sm_of((karch_t)a) == sm) return (karch_t)a;
    return KA_CPU;
}

static fmha_status_t cuda_init(fmha_context_t *ctx, int device)
{
    const char *why;
    const cuda_api_t *cu = fmha__cuda(&why);
    if (!cu) return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_NOT_COMPILED, "CUDA backend unavailable: %s", why);
    cuda_state_t *s = calloc(1, sizeof *s);
    if (!s) return FMHA_STATUS_ALLOC_FAILED;
    pthread_mutex_init(&s->lock, NULL);
    s->cu = cu;
    ctx->state = s;
    CUresult r = cu->cuDeviceGet(&s->dev, device);
    if (r) return fmha__cuda_fail(fmha__ctx_err(ctx), FMHA_STATUS_CUDA_ERROR, r, "cuDeviceGet(%d), the CUDA device ordinal", device);
    int major = 0, minor = 0, sms = 0, smem_block = 0, smem_sm = 0;
    cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev);
    cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->dev);
    cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s->dev);
    cu->cuDeviceGetAttribute(&smem_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, s->dev);
    cu->cuDeviceGetAttribute(&smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, s->dev);
    cu->cuDeviceGetAttribute(&s->info.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, s->dev);
    /* FMHA_L2_BYTES: the L2 size masked grids size their head groups by (grid_order.h
     * fmha_l2_layout); small values make many groups, which the conformance drivers use
     * to reach them */
    const char *l2 = getenv("FMHA_L2_BYTES");
    if (l2 && *l2) {
        char *end;
        const long v = strtol(l2, &end, 10);
        if (*end == '\0' && v > 0 && v <= INT_MAX) s->info.l2_bytes = (int)v;
    }
    s->info.sm_count = sms;
    const int sm = major * 10 + minor;
    const char *pdl = getenv("FMHA_PDL");
    s->info.dependent_launch = sm >= 90 && cu->cuLaunchKernelEx && !(pdl && strcmp(pdl, "0") == 0);
    const karch_t arch = arch_of_sm(sm);
    if (arch == KA_CPU)
        return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_ARCH_MISMATCH,
                          "device %d is sm_%d; this version has kernels for sm_80, sm_86, sm_89 and sm_90", device, sm);
    r = cu->cuDevicePrimaryCtxRetain(&s->primary, s->dev);
    if (r) return fmha__cuda_fail(fmha__ctx_err(ctx), FMHA_STATUS_CUDA_ERROR, r, "cuDevicePrimaryCtxRetain");
    fmha__target_of_arch(&ctx->target, arch, sms, 0);
    ctx->target.smem_per_block = smem_block;
    ctx->target.smem_per_sm = smem_sm;
    return fmha__cuda_register(ctx, arch, RECEIPT_ALL, 1) ? FMHA_STATUS_ALLOC_FAILED : FMHA_STATUS_SUCCESS;
}

static void cuda_release(fmha_context_t *ctx)
{
    cuda_state_t *s = ctx->state;
    if (!s) return;
    if (s->primary) {
        fmha__cuda_unload_all(s);
        s->cu->cuDevicePrimaryCtxRelease(s->dev);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
    ctx->state = NULL;
}

static int cuda_register_virtual(fmha_context_t *ctx, int arch)
{
    return fmha__cuda_register(ctx, arch, RECEIPT_ALL, 0);
}

/* Run one driver call with the context's primary context current. */
#define WITH_PRIMARY(s, call)                                                                                          \
    do {                                                                                                               \
        CUcontext popped_;                                                                                             \
        (s)->cu->cuCtxPushCurrent((s)->primary);                                                                       \
        r = (call);                                                                                                    \
        (s)->cu->cuCtxPopCurrent(&popped_);                                                                            \
    } while (0)

static fmha_status_t cuda_alloc(fmha_context_t *ctx, size_t bytes, void **ptr)
{
    cuda_state_t *s = ctx->state;
    CUdeviceptr d = 0;
    CUresult r;
    WITH_PRIMARY(s, s->cu->cuMemAlloc(&d, bytes ? bytes : 1));
    if (r) return fmha__cuda_fail(fmha__ctx_err(ctx), FMHA_STATUS_ALLOC_FAILED, r, "cuMemAlloc(%zu)", bytes);
    *ptr = (void *)(uintptr_t)d;
    return FMHA_STATUS_SUCCESS;
}

static void cuda_free(fmha_context_t *ctx, void *ptr)
{
    cuda_state_t *s = ctx->state;
    CUresult r;
    WITH_PRIMARY(s, s->cu->cuMemFree((CUdeviceptr)(uintptr_t)ptr));
    (void)r;
}

static fmha_status_t cuda_copy(fmha_context_t *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    cuda_state_t *s = ctx->state;
    CUresult r;
    WITH_PRIMARY(s, to_device ? s->cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes)
                              : s->cu->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
    if (r) return fmha__cuda_fail(fmha__ctx_err(ctx), FMHA_STATUS_CUDA_ERROR, r, "copy of %zu bytes", bytes);
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t cuda_synchronize(fmha_context_t *ctx)
{
    cuda_state_t *s = ctx->state;
    CUresult r;
    WITH_PRIMARY(s, s->cu->cuCtxSynchronize());
    return r ? fmha__cuda_fail(fmha__ctx_err(ctx), FMHA_STATUS_CUDA_ERROR, r, "synchronize") : FMHA_STATUS_SUCCESS;
}

/* check_index_data: the index tensors, copied after the work queued on the stream. A
 * blocking read cannot be part of a graph, so a capturing stream is refused (the capture
 * goes on; nothing was queued). */
static fmha_status_t cuda_read_on_stream(fmha_context_t *ctx, struct CUstream_st *stream, int n, void *const *dst,
                                         const void *const *src, const size_t *bytes, char *err)
{
    cuda_state_t *s = ctx->state;
    CUresult r;
    int capturing = 0;
    WITH_PRIMARY(s, s->cu->cuStreamIsCapturing((CUstream)stream, &capturing));
    if (r) return fmha__cuda_fail(err, FMHA_STATUS_CUDA_ERROR, r, "check_index_data: querying the stream");
    if (capturing)
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                          "check_index_data reads the index tensors back to the host, which a stream capturing a "
                          "CUDA graph cannot do; plan without it (and unset FMHA_CHECK_INDEX) for capture");
    for (int i = 0; i < n; i++) {
        WITH_PRIMARY(s, s->cu->cuMemcpyDtoHAsync(dst[i], (CUdeviceptr)(uintptr_t)src[i], bytes[i], (CUstream)stream));
        if (r)
            return fmha__cuda_fail(err, FMHA_STATUS_CUDA_ERROR, r, "check_index_data: copying %zu bytes of index data",
                                   bytes[i]);
    }
    WITH_PRIMARY(s, s->cu->cuStreamSynchronize((CUstream)stream));
    if (r) return fmha__cuda_fail(err, FMHA_STATUS_CUDA_ERROR, r, "check_index_data: waiting for the copies");
    return FMHA_STATUS_SUCCESS;
}

/* A GPU plan's host-side work is one launch per stage: no worker threads. */
static int cuda_plan_threads(int requested)
{
    (void)requested;
    return 1;
}

/* The split stage's count and why; whether the decode kernel leaves the combine nothing to do. */
static void cuda_describe_stage(const fmha_key_t *key, const fmha_problem_t *p, int threads, strbuf_t *out)
{
    (void)threads;
    if (key->family != KF_SPLITKV) return;
    char why[200];
    const int n = fmha__cuda_num_splits(key, p, why, sizeof why);
    fmha__sb_printf(out, "  num_splits %d (%s)\n", n, why);
    const cuda_family_t *f = fmha__cuda_family_of(key);
    if (f && f->accepts == fmha__cuda_decode_accepts)
        fmha__sb_printf(out, "  the decode kernel writes O and LSE (%s), the combine launch is skipped\n",
                        n == 1 ? "one split" : "the last split of each KV head reduces them all");
}

static void cuda_describe_plan(const fmha_plan_t *plan, strbuf_t *out)
{
    for (int s = 0; s < plan->num_stages; s++) {
        const cuda_kernel_t *m = plan->stage_data[s];
        if (!m) continue;
        fmha__sb_printf(out, "  stage %d kernel %s: %d threads, %d bytes shared memory\n", s, m->family->name,
                        m->threads, m->smem);
        cuda_describe_stage(&m->key, &plan->problem, 0, out);
    }
}

const fmha_backend_ops_t fmha__cuda_backend = {
    .name = "cuda",
    .kind = FMHA_BACKEND_CUDA,
    .host_data = 0,
    .unavailable = cuda_unavailable,
    .build_info = cuda_build_info,
    .has_family = cuda_has_family,
    .init = cuda_init,
    .release = cuda_release,
    .register_virtual = cuda_register_virtual,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .read_on_stream = cuda_read_on_stream,
    .plan_threads = cuda_plan_threads,
    .describe_plan = cuda_describe_plan,
    .describe_stage = cuda_describe_stage,
};
