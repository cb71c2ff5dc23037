/* SPDX-License-Identifier: MIT */
/*
 * fwd.c: the forward family's two rows of the kernel table (families.c): the sm80-path
 * mma.sync kernel (kernels/fwd/fwd_mma.cuh) and the sm90 warp-specialised wgmma kernel
 * (kernels/fwd/fwd_wgmma.cuh). Both take fmha_fwd_params_t (kernels/fwd/fwd_params.h);
 * the wgmma kernel also takes TMA maps of Q, K and V.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/specs.h"
#include "fwd.h"
#include "kernels/fwd/fwd_params.h"
#include "paged.h"

/* ------------------------------------------------------------------ variants */

int fmha__cuda_fwd_accepts_mma(const fmha_key_t *k)
{
    return k->family == KF_FWD && k->pipeline == KPIPE_MMASYNC && k->stages == 2;
}

/* The K/V ring depths the wgmma kernel builds (fwd_wgmma.cuh's STAGES). */
static int wgmma_stages_ok(const fmha_key_t *k) { return k->stages >= 2 && k->stages <= 4; }

/* The wgmma kernel's shapes: equal head dims of 64, 128 or 256, 16-bit types, key tiles
 * of 64 or 128 -- or 80 at head dim 256 without pages (the paged producer copies tiles in
 * passes of 32 rows) -- and no dropout. */
static int wgmma_shape_ok(const fmha_key_t *k)
{
    const int dims_ok = k->hdim_qk == k->hdim_v && (k->hdim_v == 64 || k->hdim_v == 128 || k->hdim_v == 256);
    const int tile_n_ok = k->tile_n == 64 || k->tile_n == 128 ||
                          (k->tile_n == 80 && k->hdim_v == 256 && k->paged == KP_NONE);
    return k->pipeline == KPIPE_WGMMAWS && k->arch == KA_SM90 && (k->dtype == KD_FP16 || k->dtype == KD_BF16) &&
           dims_ok && tile_n_ok && wgmma_stages_ok(k) && !k->dropout;
}

/* Its fp8 e4m3 variant (FMHA_FP8): hd64 on 192 x 128 tiles (three consumer warpgroups on
 * the serial loop), hd128 and hd256 on 128 x 128, batch mode over contiguous K/V (TMA
 * only), no bias (the rules exclude bias and dropout for fp8 everywhere). */
static int wgmma_fp8_ok(const fmha_key_t *k)
{
    return k->pipeline == KPIPE_WGMMAWS && k->arch == KA_SM90 && k->dtype == KD_FP8 &&
           (k->hdim_qk == 64 || k->hdim_qk == 128 || k->hdim_qk == 256) && k->hdim_v == k->hdim_qk &&
           k->tile_m == (k->hdim_qk == 64 ? 192 : 128) &&
           k->tile_n == 128 && wgmma_stages_ok(k) && k->mode == KM_BATCH && k->paged == KP_NONE && !k->bias && !k->dropout;
}

int fmha__cuda_fwd_accepts_wgmma(const fmha_key_t *k)
{
    return k->family == KF_FWD && (wgmma_shape_ok(k) || wgmma_fp8_ok(k));
}

int fmha__cuda_fwd_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN])
{
    int n = 0;
    /* fp8 inputs write bf16: FMHA_BF16 is the output's type there */
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_BF16=%d", k->dtype == KD_BF16 || k->dtype == KD_FP8);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_QK=%d", k->hdim_qk);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_V=%d", k->hdim_v);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_TILE_M=%d", k->tile_m);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_TILE_N=%d", k->tile_n);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_WARPS=%d", k->warps);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_STAGES=%d", k->stages);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_MASK=%d", k->mask);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_BIAS=%d", k->bias);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_LSE=%d", k->lse);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_SOFTCAP=%d", k->softcap);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_SINK=%d", k->sink);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_GROUP=%d", k->mode == KM_GROUP);
    /* only when set: the contiguous kernels keep their define lists (and cache entries) */
    if (k->paged != KP_NONE) snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_PAGED=%d", k->paged == KP_VLLM ? 1 : 2);
    if (k->dropout) snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_DROPOUT=1");
    if (k->dtype == KD_FP8) snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_FP8=1");
    return n;
}

/* The paged families on the forward's kernels: fwd_pagedkv (batch-mode queries) and
 * batch_prefill (ragged ones, cu_seqlens_q), by block table or CSR lists. */
static int paged_family_ok(const fmha_key_t *k)
{
    const int mode_ok = k->family == KF_PAGEDKV ? k->mode == KM_BATCH : k->family == KF_PREFILL && k->mode == KM_GROUP;
    return mode_ok && (k->paged == KP_VLLM || k->paged == KP_CSR);
}

int fmha__cuda_paged_accepts_mma(const fmha_key_t *k)
{
    return paged_family_ok(k) && k->pipeline == KPIPE_MMASYNC && k->stages == 2;
}

int fmha__cuda_paged_accepts_wgmma(const fmha_key_t *k) { return paged_family_ok(k) && wgmma_shape_ok(k); }

int fmha__cuda_fwd_threads(const fmha_key_t *k) { return 32 * k->warps; }

/* ------------------------------------------------------------------ plan-time limits */

/* Does the kernel walk a 1-d list of work items (the wgmma kernel; masked grids)? */
static int linear_grid(const fmha_key_t *k) { return k->pipeline == KPIPE_WGMMAWS || k->mask != KMASK_NONE; }

const char *fmha__cuda_layout_why(const fmha_problem_t *p, const fmha_tensor_role_t *rows, int n, char *why, size_t len)
{
    for (int r = 0; r < n; r++) {
        const fmha_tensor_desc_t *t = fmha__t(p, rows[r]);
        if (!t) continue;
        const int last = t->rank - 1;
        if (t->strides[last] != 1 && t->dims[last] > 1) {
            snprintf(why, len,
                     "[rule cuda.layout] tensor %s has head-dim stride %lld; the CUDA kernels need it contiguous (1)",
                     fmha_tensor_role_name(rows[r]), (long long)t->strides[last]);
            return why;
        }
        for (int d = 0; d < last; d++)
            if (t->dims[d] > 1 && t->strides[d] % 8) {
                snprintf(why, len,
                         "[rule cuda.layout] tensor %s: stride %lld of dim %d is not a multiple of 8 elements; the CUDA "
                         "kernels copy rows in 16-byte vectors",
                         fmha_tensor_role_name(rows[r]), (long long)t->strides[d], d);
                return why;
            }
    }
    return NULL;
}

/* The byte strides of a batch-mode Q, K or V map (row, head, batch; elem bytes an element)
 * as TMA takes them; a batch of one has no batch stride of its own, any valid one does.
 * Nonzero when TMA refuses them: each must be a nonzero multiple of 16 bytes. */
static int tma_byte_strides(int64_t row, int64_t head, int64_t bstride, int batch, int seqlen, int elem,
                            unsigned long long out[3])
{
    const unsigned long long e = (unsigned long long)elem;
    out[0] = (unsigned long long)row * e, out[1] = (unsigned long long)head * e;
    out[2] = batch > 1 ? (unsigned long long)bstride * e : out[0] * (unsigned long long)seqlen;
    for (int i = 0; i < 3; i++)
        if (out[i] == 0 || out[i] % 16) return 1;
    return 0;
}

const char *fmha__cuda_tma_why(const fmha_problem_t *p, const fmha_tensor_role_t *roles, int n, const char *rule,
                               const char *kernel, char *why, size_t len)
{
    for (int r = 0; r < n; r++) {
        const fmha_tensor_desc_t *t = fmha__t(p, roles[r]);
        int64_t batch, row, head;
        unsigned long long bytes[3];
        fmha__cuda_row_strides(t, 0, &batch, &row, &head);
        if (tma_byte_strides(row, head, batch, (int)fmha__i(p, FMHA_PARAM_BATCH), (int)t->dims[1],
                             (int)fmha_dtype_size(t->dtype), bytes)) {
            snprintf(why, len,
                     "[rule %s] %s has strides (batch %lld, row %lld, head %lld) elements; %s copies by TMA, which "
                     "needs multiples of 16 bytes",
                     rule, fmha_tensor_role_name(roles[r]), (long long)batch, (long long)row, (long long)head, kernel);
            return why;
        }
    }
    return NULL;
}

/* The kernels index rows, keys and window bounds in 32 bits (kernels/device/mask.cuh):
 * exact while sequences stay below 2^30 and windows are clamped (fmha__cuda_fwd_params). */
#define MAX_SEQLEN ((1 << 30) - 1)

/* The score constants the kernels take in fp32 (fwd_params.h): the scale, scale * log2(e),
 * the cap, softcap * log2(e), soft-cap's 2 log2(e) scale / softcap, and its series'
 * coefficients (kernels/device/common.cuh softcap_tanh). Computed in double once, for the
 * launch's params and for can_implement's range check alike. From SC_CAP_IN on none is
 * refused: the coefficients are smaller than softcap * log2(e), and SC_CAP_IN is clamped
 * to fp32's range: past it, the clamped factor saturates tanh as the exact one does for
 * every score but those within about 1e-38 of zero (inputs below 1e-19 or so; at 0 itself
 * both give 0). */
enum { SC_SCALE, SC_SCALE_LOG2, SC_CAP, SC_CAP_LOG2, SC_CAP_IN, SC_CAP_LIN, SC_CAP_CUB, SC_COUNT };
static void score_constants(const fmha_problem_t *p, double c[SC_COUNT])
{
    const double log2e = 1.4426950408889634, scale = fmha__effective_scale(p), cap = fmha__f(p, FMHA_PARAM_SOFTCAP);
    c[SC_SCALE] = scale, c[SC_SCALE_LOG2] = scale * log2e, c[SC_CAP] = cap, c[SC_CAP_LOG2] = cap * log2e;
    c[SC_CAP_IN] = cap > 0 ? fmax(-FLT_MAX, fmin(FLT_MAX, 2.0 * log2e * scale / cap)) : 0.0;
    c[SC_CAP_LIN] = cap / 2, c[SC_CAP_CUB] = -cap / (24 * log2e * log2e);
}

const char *fmha__cuda_fwd_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                         char *why, size_t len)
{
    (void)t;
    static const fmha_tensor_role_t rows[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    if (fmha__cuda_layout_why(p, rows, 4, why, len)) return why;
    const fmha_tensor_desc_t *bias = fmha__t(p, FMHA_TENSOR_BIAS), *q = fmha__t(p, FMHA_TENSOR_Q);
    if (bias && bias->dtype != q->dtype) {
        snprintf(why, len, "[rule cuda.bias_dtype] bias has dtype %s; the CUDA kernels read it in q's dtype (%s)",
                 fmha_dtype_name(bias->dtype), fmha_dtype_name(q->dtype));
        return why;
    }
    if (k->dtype == KD_FP8 && /* the fp8 kernel reads Q, K and V by TMA only */
        fmha__cuda_tma_why(p, rows, 3, "cuda.fp8_tma", "the fp8 kernel", why, len))
        return why;
    /* the API takes scale and softcap up to 1e300; in fp32 a larger constant would turn
     * every score into inf or NaN where the CPU backend, in double, computes the answer
     * (SC_CAP_IN, clamped, is never refused) */
    static const char *const names[SC_CAP_IN] = {"scale", "scale * log2(e)", "softcap", "softcap * log2(e)"};
    double c[SC_COUNT];
    score_constants(p, c);
    for (int i = 0; i < SC_CAP_IN; i++)
        if (fabs(c[i]) > FLT_MAX) {
            snprintf(why, len,
                     "[rule cuda.fp32_scale] %s is %g (scale %g, softcap %g); the CUDA kernels take it in fp32, "
                     "whose largest magnitude is %g",
                     names[i], c[i], c[SC_SCALE], c[SC_CAP], (double)FLT_MAX);
            return why;
        }
    const int64_t sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q), sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    if (sq > MAX_SEQLEN || sk > MAX_SEQLEN) {
        snprintf(why, len,
                 "[rule cuda.seqlen] seqlen_q %lld, seqlen_kv %lld; the CUDA kernels take sequences up to 2^30 - 1 "
                 "(32-bit index arithmetic)",
                 (long long)sq, (long long)sk);
        return why;
    }
    const int64_t batch = fmha__i(p, FMHA_PARAM_BATCH), heads = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    const int64_t mblocks = (fmha__i(p, FMHA_PARAM_SEQLEN_Q) + k->tile_m - 1) / k->tile_m;
    if (linear_grid(k)) {
        const int64_t items = mblocks * batch * heads;
        if (items > 0x7fffffff) {
            snprintf(why, len,
                     "[rule cuda.grid] this kernel walks m-blocks x batch x heads = %lld work items in one grid "
                     "dimension; the limit is 2^31 - 1",
                     (long long)items);
            return why;
        }
    } else if (batch > 65535 || heads > 65535) {
        snprintf(why, len,
                 "[rule cuda.grid] batch (%lld) and heads (%lld) are grid dimensions y and z of this kernel; the "
                 "limit is 65535",
                 (long long)batch, (long long)heads);
        return why;
    }
    return NULL;
}

/* ------------------------------------------------------------------ params */

static int64_t stride_of(const fmha_tensor_desc_t *t, int d) { return t ? t->strides[d] : 0; }

void fmha__cuda_row_strides(const fmha_tensor_desc_t *t, int group, int64_t *batch, int64_t *row, int64_t *head)
{
    const int o = group ? 0 : 1; /* index of the token dim */
    *batch = group ? 0 : t->strides[0];
    *row = t->strides[o], *head = t->strides[o + 1];
}

/* Dropout (kernels/device/dropout.cuh): the Philox key and counter halves, the threshold
 * (REFERENCE.md), 1 / (1 - p), and the keep mask's pointer and strides. */
static void dropout_params(const fmha_problem_t *p, void *const *data, fmha_fwd_params_t *a)
{
    const double prob = fmha__f(p, FMHA_PARAM_DROPOUT_P);
    const uint64_t seed = (uint64_t)fmha__i(p, FMHA_PARAM_DROPOUT_SEED),
                   offset = (uint64_t)fmha__i(p, FMHA_PARAM_DROPOUT_OFFSET);
    a->drop_threshold = fmha__dropout_threshold(prob);
    a->drop_seed[0] = (uint32_t)seed, a->drop_seed[1] = (uint32_t)(seed >> 32);
    a->drop_offset[0] = (uint32_t)offset, a->drop_offset[1] = (uint32_t)(offset >> 32);
    a->rp_keep = (float)(1.0 / (1.0 - prob));
    const fmha_tensor_desc_t *m = fmha__t(p, FMHA_TENSOR_DROPOUT_MASK);
    if (m) {
        a->dropout_mask = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DROPOUT_MASK];
        a->mask_batch = m->strides[0], a->mask_head = m->strides[1];
        a->mask_row = m->strides[2], a->mask_col = m->strides[3];
    }
}

fmha_status_t fmha__cuda_alignment_check(const cuda_launch_t *l, const fmha_tensor_role_t *rows, int n)
{
    for (int i = 0; i < n; i++)
        if ((uintptr_t)l->data[rows[i]] % 16)
            return fmha__fail(l->err, FMHA_STATUS_INVALID_ARGUMENT,
                              "[rule cuda.alignment] tensor %s at %p is not 16-byte aligned; the CUDA kernels move "
                              "rows in 16-byte vectors",
                              fmha_tensor_role_name(rows[i]), l->data[rows[i]]);
    return FMHA_STATUS_SUCCESS;
}

/* The params of the plan's problem and the launch's pointers; INVALID_ARGUMENT when a
 * pointer the kernels read in 16-byte vectors is not 16-byte aligned. */
fmha_status_t fmha__cuda_fwd_params(const cuda_launch_t *l, struct fmha_fwd_params *a)
{
    const fmha_problem_t *p = l->problem;
    void *const *data = l->data;
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const fmha_tensor_desc_t *q = fmha__t(p, FMHA_TENSOR_Q), *k = fmha__t(p, FMHA_TENSOR_K),
                             *v = fmha__t(p, FMHA_TENSOR_V), *out = fmha__t(p, FMHA_TENSOR_O),
                             *lse = fmha__t(p, FMHA_TENSOR_LSE), *bias = fmha__t(p, FMHA_TENSOR_BIAS),
                             *alibi = fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES), *sink = fmha__t(p, FMHA_TENSOR_SINK);
    const fmha_tensor_role_t vec[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    fmha_status_t st = fmha__cuda_alignment_check(l, vec, 4);
    if (st) return st;
    memset(a, 0, sizeof *a);
    a->q = (uint64_t)(uintptr_t)data[FMHA_TENSOR_Q];
    a->k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_K];
    a->v = (uint64_t)(uintptr_t)data[FMHA_TENSOR_V];
    a->o = (uint64_t)(uintptr_t)data[FMHA_TENSOR_O];
    a->lse = (uint64_t)(uintptr_t)data[FMHA_TENSOR_LSE];
    a->bias = (uint64_t)(uintptr_t)data[FMHA_TENSOR_BIAS];
    a->alibi = (uint64_t)(uintptr_t)data[FMHA_TENSOR_ALIBI_SLOPES];
    a->sink = (uint64_t)(uintptr_t)data[FMHA_TENSOR_SINK];
    a->cu_seqlens_q = (uint64_t)(uintptr_t)data[FMHA_TENSOR_CU_SEQLENS_Q];
    a->cu_seqlens_k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_CU_SEQLENS_KV];
    a->seqused_k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_SEQUSED_KV];
    fmha__cuda_row_strides(q, group, &a->q_batch, &a->q_row, &a->q_head);
    fmha__cuda_row_strides(k, group, &a->k_batch, &a->k_row, &a->k_head);
    fmha__cuda_row_strides(v, group, &a->v_batch, &a->v_row, &a->v_head);
    fmha__cuda_row_strides(out, group, &a->o_batch, &a->o_row, &a->o_head);
    if (lse) {
        if (group) a->lse_head = lse->strides[0], a->lse_row = lse->strides[1];
        else a->lse_batch = lse->strides[0], a->lse_head = lse->strides[1], a->lse_row = lse->strides[2];
    }
    if (bias) {
        a->bias_batch = bias->dims[0] == 1 ? 0 : bias->strides[0];
        a->bias_head = bias->dims[1] == 1 ? 0 : bias->strides[1];
        a->bias_row = bias->strides[2], a->bias_col = bias->strides[3];
    }
    if (alibi) {
        a->alibi_batch = alibi->rank == 2 ? alibi->strides[0] : 0;
        a->alibi_head = alibi->strides[alibi->rank - 1];
    }
    a->sink_head = stride_of(sink, 0);
    a->batch = (int32_t)fmha__i(p, FMHA_PARAM_BATCH);
    a->heads_q = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    a->heads_kv = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    a->group = a->heads_q / a->heads_kv;
    a->seqlen_q = (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    a->seqlen_k = (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    /* group mode: the bounds the kernels clamp device-side offsets to (sequence.cuh);
     * offsets are int32, so rows past 2^31 - 1 are out of their reach anyway */
    a->total_q = (int32_t)(q->dims[0] < INT32_MAX ? q->dims[0] : INT32_MAX);
    a->total_k = (int32_t)(k->dims[0] < INT32_MAX ? k->dims[0] : INT32_MAX);
    /* A window reaching past every key is the same window as one of max(sq, sk): clamped,
     * the kernels' 32-bit bounds cannot wrap (kernels/device/mask.cuh); likewise sink
     * tokens past the keys. */
    fmha_mask_t mk = fmha__problem_mask(p);
    const int64_t reach = a->seqlen_q > a->seqlen_k ? a->seqlen_q : a->seqlen_k;
    a->window_left = (int32_t)(mk.left > reach ? reach : mk.left);
    a->window_right = (int32_t)(mk.right > reach ? reach : mk.right);
    a->sink_tokens = (int32_t)(mk.sink_tokens > reach ? reach : mk.sink_tokens);
    a->bottom_right = mk.align == FMHA_MASK_ALIGN_BOTTOM_RIGHT;
    if (fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0) {
        FMHA_CUDA_PAGED_PARAMS(a, p, data);
        a->seqlens_k = (uint64_t)(uintptr_t)data[FMHA_TENSOR_SEQLENS_KV];
    }
    dropout_params(p, data, a);
    const fmha_tensor_role_t descales[3] = {FMHA_TENSOR_Q_DESCALE, FMHA_TENSOR_K_DESCALE, FMHA_TENSOR_V_DESCALE};
    for (int i = 0; i < 3; i++) { /* [1]: both strides 0; [B, Hk]: its own */
        const fmha_tensor_desc_t *t = fmha__t(p, descales[i]);
        if (!t) continue;
        a->descale[i] = (uint64_t)(uintptr_t)data[descales[i]];
        a->descale_batch[i] = t->rank == 2 ? t->strides[0] : 0;
        a->descale_head[i] = t->rank == 2 ? t->strides[1] : 0;
    }
    double c[SC_COUNT]; /* within fp32's range: can_implement */
    score_constants(p, c);
    a->scale = (float)c[SC_SCALE], a->scale_log2 = (float)c[SC_SCALE_LOG2];
    a->softcap = (float)c[SC_CAP], a->softcap_in = (float)c[SC_CAP_IN], a->softcap_log2 = (float)c[SC_CAP_LOG2];
    a->softcap_lin = (float)c[SC_CAP_LIN], a->softcap_cub = (float)c[SC_CAP_CUB];
    return FMHA_STATUS_SUCCESS;
}

/* Masked grids run (batch, head) pairs in groups that share L2 (masked_cta_coords,
 * kernels/device/common.cuh), sized by the K and V bytes of a pair: the query heads of one
 * GQA group read one K/V head. */
static int64_t kv_bytes_per_pair(const cuda_kernel_t *m, const fmha_fwd_params_t *a)
{
    return (int64_t)a->seqlen_k * (m->key.hdim_qk + m->key.hdim_v) * 2 / (a->heads_q / a->heads_kv);
}

/* The masked grid's groups and tail, sized by L2 and laid out as grid_order.h says why. */
static void set_l2_groups(const cuda_kernel_t *m, fmha_fwd_params_t *a)
{
    const int64_t mblocks = (a->seqlen_q + m->key.tile_m - 1) / m->key.tile_m;
    const int64_t l2 = m->device.l2_bytes > 0 ? m->device.l2_bytes : 50 << 20;
    fmha_l2_layout(a->batch * a->heads_q, kv_bytes_per_pair(m, a), l2, mblocks, m->device.sm_count, &a->l2_pairs,
                   &a->l2_head_pairs, &a->l2_tail_pair);
}

/* Does fmha__cuda_launch start kernel m as a programmatic dependent (family.h)? */
static int launches_dependent(const cuda_kernel_t *m)
{
    return m->family->dependent_launch && m->device.dependent_launch && fmha__cuda_sm_of((karch_t)m->key.arch) >= 90;
}

fmha_status_t fmha__cuda_launch(const cuda_launch_t *l, unsigned gx, unsigned gy, unsigned gz, void **args)
{
    const cuda_kernel_t *m = l->kernel;
    const cuda_api_t *cu = fmha__cuda(NULL);
    CUresult r;
    if (launches_dependent(m)) {
        /* a programmatic dependent of the stream's prior kernel (family.h) */
        cu_launch_attribute_t attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic_stream_serialization_allowed = 1;
        const cu_launch_config_t c = {{gx, gy, gz}, {(unsigned)m->threads, 1, 1}, (unsigned)m->smem, l->stream, &attr, 1};
        r = cu->cuLaunchKernelEx(&c, m->fn, args, NULL);
    } else {
        r = cu->cuLaunchKernel(m->fn, gx, gy, gz, (unsigned)m->threads, 1, 1, (unsigned)m->smem, l->stream, args, NULL);
    }
    return r ? fmha__cuda_fail(l->err, FMHA_STATUS_CUDA_ERROR, r, "launching %s", m->name) : FMHA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ mma.sync */

fmha_status_t fmha__cuda_fwd_launch_mma(const cuda_launch_t *l)
{
    fmha_fwd_params_t a;
    fmha_status_t st = fmha__cuda_fwd_params(l, &a);
    if (st) return st;
    set_l2_groups(l->kernel, &a);
    const unsigned mblocks = (unsigned)((a.seqlen_q + l->kernel->key.tile_m - 1) / l->kernel->key.tile_m);
    void *args[1] = {&a};
    /* unmasked: (m-blocks, batch, heads), the CTAs of one head side by side; masked: a
     * 1-d list, longest first within L2 groups (can_implement bounded both) */
    if (linear_grid(&l->kernel->key)) return fmha__cuda_launch(l, mblocks * (unsigned)a.batch * (unsigned)a.heads_q, 1, 1, args);
    return fmha__cuda_launch(l, mblocks, (unsigned)a.batch, (unsigned)a.heads_q, args);
}

/* ------------------------------------------------------------------ wgmma + TMA */

CUresult fmha__cuda_encode_map(const cuda_api_t *cu, uint64_t *map, uint64_t addr, int hdim, int seqlen, int heads,
                               int batch, int64_t row, int64_t head, int64_t bstride, int rows, int elem)
{
    const unsigned long long dims[4] = {(unsigned long long)hdim, (unsigned long long)seqlen,
                                        (unsigned long long)heads, (unsigned long long)batch};
    unsigned long long strides[3];
    if (tma_byte_strides(row, head, bstride, batch, seqlen, elem, strides)) return 1; /* the kernel falls back */
    /* a box row is 128 bytes (64 16-bit elements or 128 e4m3) in the 128-byte swizzle, or
     * a whole head-dim row of 64 bytes (e4m3 at hd64) in the 64-byte one (fwd_wgmma.cuh's
     * SW_BYTES) */
    const unsigned row_bytes = (unsigned)hdim * (unsigned)elem < 128u ? 64u : 128u;
    const unsigned box[4] = {row_bytes / (unsigned)elem, (unsigned)rows, 1, 1}, ones[4] = {1, 1, 1, 1};
    return cu->cuTensorMapEncodeTiled(map, elem == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 4,
                                      (void *)(uintptr_t)addr, dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* FMHA_DEBUG: say on stderr, once per process, why a launch copies Q/K/V with cp.async
 * (docs/env.md: the library prints only when asked). */
static void tma_fallback_note(const cuda_kernel_t *m, const char *q_why, const char *k_why, const char *v_why)
{
    static int said;
    if (fmha__debug_enabled() && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "fmha: %s copies Q/K/V with cp.async: TMA map of Q: %s, of K: %s, of V: %s\n", m->name, q_why,
                k_why, v_why);
}

/* K and V maps over a page pool: encode_map with the pool as the tensor, (slot, KV head,
 * page) in place of (key, head, batch) and the pool's strides, so both layouts work; a
 * tile of tile_n keys is one box per 64 dims when the page size is a multiple of tile_n.
 * Nonzero when not (the kernel then copies with cp.async). */
static CUresult encode_page_maps(const cuda_api_t *cu, const cuda_kernel_t *m, const fmha_fwd_params_t *a,
                                 fmha_tma_maps_t *maps)
{
    const int tn = m->key.tile_n;
    if (m->key.tile_m != 128 || a->page_size % tn != 0) return 1; /* the kernel's PAGED_TMA */
    CUresult r = fmha__cuda_encode_map(cu, maps->k, a->k, m->key.hdim_qk, a->page_size, a->heads_kv, a->num_pages, a->k_row,
                            a->k_head, a->k_page, tn, 2);
    if (!r)
        r = fmha__cuda_encode_map(cu, maps->v, a->v, m->key.hdim_v, a->page_size, a->heads_kv, a->num_pages, a->v_row, a->v_head,
                       a->v_page, tn, 2);
    return r;
}

/* The wgmma kernel's Q, K and V maps (fwd_params.h). Group mode keeps cp.async: its tiles
 * end inside the packed tensor, where TMA would read the next sequence's rows, not zeros.
 * Paged caches copy Q by cp.async and K/V by TMA, a box per page, where the page size is a
 * multiple of the key tile (encode_page_maps); smaller pages gather rows by cp.async. */
static void encode_tma(const cuda_api_t *cu, const cuda_kernel_t *m, const fmha_fwd_params_t *a, int cp_async,
                       fmha_tma_maps_t *maps)
{
    memset(maps, 0, sizeof *maps);
    if (m->key.paged != KP_NONE) {
        maps->use_tma = cu->cuTensorMapEncodeTiled && encode_page_maps(cu, m, a, maps) == 0;
        return;
    }
    if (cp_async) return;
    if (!cu->cuTensorMapEncodeTiled) {
        tma_fallback_note(m, "the driver has no cuTensorMapEncodeTiled", "likewise", "likewise");
        return;
    }
    const int hqk = m->key.hdim_qk, hv = m->key.hdim_v, e = m->key.dtype == KD_FP8 ? 1 : 2;
    CUresult rq = fmha__cuda_encode_map(cu, maps->q, a->q, hqk, a->seqlen_q, a->heads_q, a->batch, a->q_row, a->q_head,
                             a->q_batch, m->key.tile_m, e);
    CUresult rk = fmha__cuda_encode_map(cu, maps->k, a->k, hqk, a->seqlen_k, a->heads_kv, a->batch, a->k_row, a->k_head,
                             a->k_batch, m->key.tile_n, e);
    CUresult rv = fmha__cuda_encode_map(cu, maps->v, a->v, hv, a->seqlen_k, a->heads_kv, a->batch, a->v_row, a->v_head,
                             a->v_batch, m->key.tile_n, e);
    maps->use_tma = rq == 0 && rk == 0 && rv == 0;
    /* O's map, 64 rows a box (a consumer warpgroup's), 16-bit whatever the inputs (fp8
     * writes bf16); where it cannot be encoded the kernel writes O from registers */
    if (fmha__staged_epilogue(&m->key))
        maps->o_tma = fmha__cuda_encode_map(cu, maps->o, a->o, hv, a->seqlen_q, a->heads_q, a->batch, a->o_row,
                                            a->o_head, a->o_batch, 64, 2) == 0;
    if (!maps->use_tma) {
        char e0[128], e1[128], e2[128];
        tma_fallback_note(m, rq ? fmha__cuda_error(rq, e0, sizeof e0) : "ok",
                          rk ? fmha__cuda_error(rk, e1, sizeof e1) : "ok",
                          rv ? fmha__cuda_error(rv, e2, sizeof e2) : "ok");
    }
}

/* The item scheduler's slot of the next persistent launch (fwd_params.h sched_slot): in
 * turn over all launches of the process, so that launches in flight together (several
 * streams, a graph's nodes) count their items on different counters. */
static unsigned next_sched_slot(void)
{
    static unsigned counter;
    return __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED) % FMHA_SCHED_SLOTS;
}

/* Does a persistent launch of kernel k walk its items statically (wgmma_items.cuh
 * fetch_next_item: no scheduler slot), instead of taking each next one from the counter?
 * Only where the items are all alike (unmasked) and the static walk measured ahead or
 * level: 16-bit hd128 (+0.8-2.8%, perf-notes run 199) and hd256 (+1.5-2.3% at 512, +0.5-1%
 * at 1k, runs 203-205; level, within 0.5%, from 2k to 16k, run 206). Runs 199 and 202 saw
 * hd256's static walk lose past 1k, but those kernels also had the uniform producer, which
 * alone loses as much there (run 205). The counter elsewhere: hd64 level, fp8 -0.4 to -3%
 * static, and masked lists need it for their unequal items (run 20). */
static int walks_statically(const fmha_key_t *k)
{
    if (k->mask != KMASK_NONE || k->dtype == KD_FP8) return 0;
    return k->hdim_v == 128 || k->hdim_v == 256;
}

fmha_status_t fmha__cuda_fwd_launch_wgmma(const cuda_launch_t *l)
{
    const cuda_kernel_t *m = l->kernel;
    fmha_fwd_params_t a;
    fmha_status_t st = fmha__cuda_fwd_params(l, &a);
    if (st) return st;
    set_l2_groups(m, &a);
    const int cp_async = fmha__i(l->problem, FMHA_PARAM_MODE) == FMHA_MODE_GROUP || m->key.paged != KP_NONE;
    fmha_tma_maps_t maps; /* the kernel's second argument */
    encode_tma(fmha__cuda(NULL), m, &a, cp_async, &maps);
    if (m->key.dtype == KD_FP8 && !maps.use_tma) /* can_implement checked the strides: the driver refused */
        return FMHA_STATUS_NOT_SUPPORTED;
    /* A masked grid's items start above a sequence's row 0 (fwd_params.h top_partial):
     * under a right bound (causal) the top rows see the fewest keys, so the partial
     * m-block costs least there, and the other blocks end on the sequence's last row. Where
     * a warpgroup walks only the key tiles its rows see (tile_m > tile_n: the kernel's
     * cut), that shortens the items' longest warpgroup walks: hd64 causal +5% at 1k and
     * +4-6% at odd lengths, hd256 +3% at 777 tokens; at 128 x 128 it cost 3% (perf-notes
     * run 140). Whole warpgroups only: a TMA store at a negative row is an illegal
     * instruction, so a warpgroup above row 0 skips its stores and every other one starts
     * at a row >= 0 (TMA loads read zeros above row 0, the cp.async loads skip the rows). */
    a.top_partial = m->key.mask != KMASK_NONE && m->key.tile_m > m->key.tile_n && a.window_right >= 0;
    void *args[2] = {&a, &maps};
    /* Persistent where the producer is one TMA thread: one CTA per SM (its registers admit
     * one) takes item after item from the item scheduler's counter (wgmma_items.cuh), so
     * one item's epilogue overlaps the next one's loads (+20-35% at 512 in perf-notes run
     * 20, with a static walk) and a causal list still balances (the static walk lost 10-40%
     * at 16k there); or walks statically (walks_statically: no slot). The cp.async
     * producers (group mode, pages) run a CTA per item. */
    const int64_t items = (a.seqlen_q + m->key.tile_m - 1) / m->key.tile_m * (int64_t)a.batch * a.heads_q;
    unsigned ctas = (unsigned)items;
    a.sched_slot = -1;
    if (maps.use_tma && !cp_async && items > m->device.sm_count) {
        ctas = (unsigned)m->device.sm_count;
        if (!walks_statically(&m->key)) a.sched_slot = (int32_t)next_sched_slot();
    }
    return fmha__cuda_launch(l, ctas, 1, 1, args);
}
