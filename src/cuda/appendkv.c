/* SPDX-License-Identifier: MIT */
/*
 * appendkv.c: the appendkv family's row of the kernel table (families.c): the kernel
 * kernels/appendkv/appendkv.cuh over fmha_appendkv_params_t (appendkv_params.h). One
 * launch writes the new keys (rotated) and values into the cache and q's rotation into
 * q_rot.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "appendkv.h"
#include "fwd.h"
#include "kernels/appendkv/appendkv_params.h"
#include "paged.h"

int fmha__cuda_appendkv_accepts(const fmha_key_t *k)
{
    return k->family == KF_APPENDKV && k->pipeline == KPIPE_MMASYNC && k->warps > 0 &&
           (k->dtype == KD_FP16 || k->dtype == KD_BF16) && k->hdim_qk % 8 == 0 && k->hdim_v % 8 == 0;
}

int fmha__cuda_appendkv_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN])
{
    int n = 0;
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_BF16=%d", k->dtype == KD_BF16);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_QK=%d", k->hdim_qk);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_V=%d", k->hdim_v);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_WARPS=%d", k->warps);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_PAGED=%d", k->paged == KP_VLLM ? 1 : k->paged == KP_CSR ? 2 : 0);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_ROPE=%d", k->rope == KR_INTERLEAVED ? 1 : k->rope == KR_HALF ? 2 : 0);
    return n;
}

/* The tensors the kernel moves in 16-byte vectors. */
static const fmha_tensor_role_t ROWS[6] = {FMHA_TENSOR_K_NEW, FMHA_TENSOR_V_NEW, FMHA_TENSOR_K,
                                           FMHA_TENSOR_V,     FMHA_TENSOR_Q,     FMHA_TENSOR_Q_ROT};

/* The grid's x blocks of one sequence, per tensor (K, V, q): each tensor's 16-byte units
 * (appendkv.cuh units_of_row: half-rotated RoPE gives a thread a pair of K's or q's
 * chunks) in blocks of `threads`. The three ranges follow each other on grid x, so no
 * block is launched without work (before: one x range for all three, sized by the
 * largest, left most of a RoPE append's K and q blocks empty; perf-notes run 52). */
static void blocks_per_sequence(const fmha_key_t *k, const fmha_problem_t *p, int64_t threads, int64_t out[3])
{
    const int64_t sn = fmha__i(p, FMHA_PARAM_SEQLEN_KNEW), hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    const int64_t paired = k->rope == KR_HALF ? fmha__i(p, FMHA_PARAM_ROTARY_DIM) / 16 : 0;
    const int64_t units_qk = k->hdim_qk / 8 - paired;
    int64_t units[3] = {sn * hk * units_qk, sn * hk * (k->hdim_v / 8), 0};
    if (fmha__t(p, FMHA_TENSOR_Q))
        units[2] = fmha__i(p, FMHA_PARAM_SEQLEN_Q) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) * units_qk;
    for (int i = 0; i < 3; i++) out[i] = (units[i] + threads - 1) / threads;
}

const char *fmha__cuda_appendkv_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                              char *why, size_t len)
{
    (void)t;
    if (fmha__cuda_layout_why(p, ROWS, 6, why, len)) return why;
    const fmha_tensor_desc_t *kn = fmha__t(p, FMHA_TENSOR_K_NEW);
    for (int r = 1; r < 6; r++) {
        const fmha_tensor_desc_t *d = fmha__t(p, ROWS[r]);
        if (d && d->dtype != kn->dtype) {
            snprintf(why, len,
                     "[rule cuda.appendkv_dtype] tensor %s has dtype %s; the CUDA appendkv copies without conversion, "
                     "so it needs k_new's dtype (%s)",
                     fmha_tensor_role_name(ROWS[r]), fmha_dtype_name(d->dtype), fmha_dtype_name(kn->dtype));
            return why;
        }
    }
    const fmha_tensor_role_t tables[2] = {FMHA_TENSOR_ROTARY_COS, FMHA_TENSOR_ROTARY_SIN};
    for (int r = 0; r < 2; r++) {
        const fmha_tensor_desc_t *d = fmha__t(p, tables[r]);
        if (d && d->dtype != FMHA_DTYPE_FP32) {
            snprintf(why, len, "[rule cuda.appendkv_dtype] tensor %s has dtype %s; the CUDA appendkv reads fp32 tables",
                     fmha_tensor_role_name(tables[r]), fmha_dtype_name(d->dtype));
            return why;
        }
    }
    const int64_t batch = fmha__i(p, FMHA_PARAM_BATCH);
    int64_t per[3];
    blocks_per_sequence(k, p, 32 * k->warps, per);
    const int64_t blocks = per[0] + per[1] + per[2];
    if (batch > 65535 || blocks > 0x7fffffff) {
        snprintf(why, len,
                 "[rule cuda.grid] appendkv runs %lld sequences (grid y, limit 65535) of %lld blocks (grid x, limit "
                 "2^31 - 1)",
                 (long long)batch, (long long)blocks);
        return why;
    }
    const fmha_tensor_desc_t *kc = fmha__t(p, FMHA_TENSOR_K);
    const int64_t positions = fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0 ? 0 : kc->dims[1];
    if (positions > 0x7fffffff || fmha__i(p, FMHA_PARAM_SEQLEN_KNEW) > 0x7fffffff) {
        snprintf(why, len,
                 "[rule cuda.seqlen] the cache holds %lld positions and %lld are appended; the CUDA appendkv indexes "
                 "positions in 32 bits",
                 (long long)positions, (long long)fmha__i(p, FMHA_PARAM_SEQLEN_KNEW));
        return why;
    }
    return NULL;
}

static uint64_t ptr(void *const *data, fmha_tensor_role_t r) { return (uint64_t)(uintptr_t)data[r]; }

/* Whether a rotary table's rows can be read four fp32 entries at a time: unit column
 * stride, the base and every row start on 16 bytes (rotary_dim is a multiple of 16, so a
 * thread's 4 or 8 entries never cross a row's end). */
static bool table_rows_vectorise(uint64_t base, int64_t row_stride, int64_t col_stride)
{
    return col_stride == 1 && base % 16 == 0 && row_stride % 4 == 0;
}

fmha_status_t fmha__cuda_appendkv_launch(const cuda_launch_t *l)
{
    const fmha_problem_t *p = l->problem;
    void *const *data = l->data;
    fmha_status_t st = fmha__cuda_alignment_check(l, ROWS, 6);
    if (st) return st;
    fmha_appendkv_params_t a;
    memset(&a, 0, sizeof a);
    const fmha_tensor_desc_t *kn = fmha__t(p, FMHA_TENSOR_K_NEW), *vn = fmha__t(p, FMHA_TENSOR_V_NEW),
                             *q = fmha__t(p, FMHA_TENSOR_Q), *qr = fmha__t(p, FMHA_TENSOR_Q_ROT),
                             *kc = fmha__t(p, FMHA_TENSOR_K), *vc = fmha__t(p, FMHA_TENSOR_V),
                             *cs = fmha__t(p, FMHA_TENSOR_ROTARY_COS), *sn = fmha__t(p, FMHA_TENSOR_ROTARY_SIN);
    a.k_new = ptr(data, FMHA_TENSOR_K_NEW), a.v_new = ptr(data, FMHA_TENSOR_V_NEW);
    a.k = ptr(data, FMHA_TENSOR_K), a.v = ptr(data, FMHA_TENSOR_V);
    a.q = ptr(data, FMHA_TENSOR_Q), a.q_rot = ptr(data, FMHA_TENSOR_Q_ROT);
    a.seqlens_k = ptr(data, FMHA_TENSOR_SEQLENS_KV), a.cache_batch_idx = ptr(data, FMHA_TENSOR_CACHE_BATCH_IDX);
    fmha__cuda_row_strides(kn, 0, &a.kn_batch, &a.kn_row, &a.kn_head);
    fmha__cuda_row_strides(vn, 0, &a.vn_batch, &a.vn_row, &a.vn_head);
    if (q) {
        fmha__cuda_row_strides(q, 0, &a.q_batch, &a.q_row, &a.q_head);
        fmha__cuda_row_strides(qr, 0, &a.qr_batch, &a.qr_row, &a.qr_head);
    }
    a.batch = (int32_t)fmha__i(p, FMHA_PARAM_BATCH);
    a.heads_q = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    a.heads_kv = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    a.seqlen_q = q ? (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_Q) : 0;
    a.seqlen_new = (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_KNEW);
    a.rotary_dim = (int32_t)fmha__i(p, FMHA_PARAM_ROTARY_DIM);
    if (a.rotary_dim > 0) {
        a.rotary_cos = ptr(data, FMHA_TENSOR_ROTARY_COS), a.rotary_sin = ptr(data, FMHA_TENSOR_ROTARY_SIN);
        a.cos_row = cs->strides[0], a.cos_col = cs->strides[1];
        a.sin_row = sn->strides[0], a.sin_col = sn->strides[1];
        a.max_pos = (int32_t)(cs->dims[0] < INT32_MAX ? cs->dims[0] : INT32_MAX);
        a.rope_vec = table_rows_vectorise(a.rotary_cos, a.cos_row, a.cos_col) &&
                     table_rows_vectorise(a.rotary_sin, a.sin_row, a.sin_col);
    }
    /* q's positions: one per row under a causal or windowed mask, else all at L_b
     * (REFERENCE.md, FlashAttention's flash_attn_with_kvcache) */
    const fmha_mask_t m = fmha__problem_mask(p);
    a.q_per_row = m.left >= 0 || m.right >= 0 || m.sink_tokens > 0;
    if (fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0) {
        FMHA_CUDA_PAGED_PARAMS(&a, p, data);
        const int64_t cap = (int64_t)a.num_indices * a.page_size; /* a CSR sequence's pages bound its length */
        a.seqlen_k = (int32_t)(cap < INT32_MAX ? cap : INT32_MAX);
    } else {
        a.k_batch = kc->strides[0], a.k_row = kc->strides[1], a.k_head = kc->strides[2];
        a.v_batch = vc->strides[0], a.v_row = vc->strides[1], a.v_head = vc->strides[2];
        a.cache_rows = (int32_t)(kc->dims[0] < INT32_MAX ? kc->dims[0] : INT32_MAX);
        a.cache_len = (int32_t)kc->dims[1]; /* can_implement: below 2^31 */
    }
    int64_t per[3];
    blocks_per_sequence(&l->kernel->key, p, l->kernel->threads, per);
    a.blocks_k = (int32_t)per[0], a.blocks_kv = (int32_t)(per[0] + per[1]); /* can_implement: sum below 2^31 */
    const unsigned blocks = (unsigned)(per[0] + per[1] + per[2]);
    if (blocks == 0) return FMHA_STATUS_SUCCESS; /* nothing to move */
    void *args[1] = {&a};
    return fmha__cuda_launch(l, blocks, (unsigned)a.batch, 1u, args);
}
