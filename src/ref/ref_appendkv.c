/* SPDX-License-Identifier: MIT */
/*
 * ref_appendkv.c: the CPU appendkv. Token t of sequence b's k_new/v_new goes to cache
 * position seqlens_kv[b] + t (contiguous rows picked by cache_batch_idx, or pages of the
 * block table; CSR page lists describe the cache after the append, the new tokens being
 * the last Snew of each sequence); with rotary_dim > 0 the first rotary_dim dims of each new K row are
 * rotated at that absolute position, and q is rotated into q_rot at positions
 * seqlens_kv[b] + i when the attention is causal or windowed, else all at
 * seqlens_kv[b] (FlashAttention's flash_attn_with_kvcache rule). The rotation is done
 * in double and rounded once to the cache's type.
 */
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/dtype.h"
#include "ref.h"
#include "ref_kv.h"

typedef struct rope {
    int64_t rot;     /* rotated dims; 0: none */
    int interleaved; /* pairs (2i, 2i+1), else (i, i + rot/2) */
    const float *cos, *sin;
    int64_t cos_s[2], sin_s[2]; /* strides of the [max_pos, rot/2] tables */
} rope_t;

/* Rotate x[0..rot) in place at position pos. */
static void rope_apply(const rope_t *r, double *x, int64_t pos)
{
    const int64_t half = r->rot / 2;
    for (int64_t i = 0; i < half; i++) {
        const double c = r->cos[pos * r->cos_s[0] + i * r->cos_s[1]], s = r->sin[pos * r->sin_s[0] + i * r->sin_s[1]];
        const int64_t i0 = r->interleaved ? 2 * i : i, i1 = r->interleaved ? 2 * i + 1 : i + half;
        const double x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
    }
}

/* Copy row src (dims D, stride sd) into dst through x, rotating it at pos when r->rot. */
static void move_row(const rope_t *r, double *x, const void *src, fmha_dtype_t st, int64_t so, int64_t sd,
                     void *dst, fmha_dtype_t dt, int64_t doff, int64_t dd, int64_t D, int64_t pos, int rotate)
{
    for (int64_t d = 0; d < D; d++) x[d] = fmha_load_f32(src, st, so + d * sd);
    if (rotate && r->rot) rope_apply(r, x, pos);
    for (int64_t d = 0; d < D; d++) fmha_store_f32(dst, dt, doff + d * dd, (float)x[d]);
}

/* Sequence b's length before the append: seqlens_kv, or for CSR page lists, which
 * describe the cache after it, their length less the appended tokens. */
static int64_t append_base(const kv_view_t *kv, int64_t b, int64_t Snew)
{
    return fmha__kv_len(kv, b) - (kv->kind == KV_PAGED_CSR ? Snew : 0);
}

size_t fmha__ref_appendkv_workspace(const fmha_problem_t *p, int threads)
{
    const int64_t D = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK) > fmha__i(p, FMHA_PARAM_HEAD_DIM_V)
                          ? fmha__i(p, FMHA_PARAM_HEAD_DIM_QK)
                          : fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    return (size_t)threads * (size_t)D * sizeof(double);
}

fmha_status_t fmha__ref_appendkv(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                 struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stage, (void)stream, (void)err, (void)err_len;
    const fmha_problem_t *p = &plan->problem;
    const int64_t B = fmha__i(p, FMHA_PARAM_BATCH), Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q),
                  Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV), Snew = fmha__i(p, FMHA_PARAM_SEQLEN_KNEW),
                  Sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q), Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                  Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    const int64_t Dmax = Dqk > Dv ? Dqk : Dv;
    const kv_view_t kv = fmha__kv_view(p, data);
    rope_t r = {0};
    r.rot = fmha__i(p, FMHA_PARAM_ROTARY_DIM);
    r.interleaved = (int)fmha__i(p, FMHA_PARAM_ROTARY_INTERLEAVED);
    if (r.rot) {
        const fmha_tensor_desc_t *ct = fmha__t(p, FMHA_TENSOR_ROTARY_COS), *stt = fmha__t(p, FMHA_TENSOR_ROTARY_SIN);
        r.cos = data[FMHA_TENSOR_ROTARY_COS];
        r.sin = data[FMHA_TENSOR_ROTARY_SIN];
        r.cos_s[0] = ct->strides[0], r.cos_s[1] = ct->strides[1];
        r.sin_s[0] = stt->strides[0], r.sin_s[1] = stt->strides[1];
    }
    const fmha_tensor_desc_t *kn = fmha__t(p, FMHA_TENSOR_K_NEW), *vn = fmha__t(p, FMHA_TENSOR_V_NEW);
    const fmha_tensor_desc_t *qt = fmha__t(p, FMHA_TENSOR_Q), *qr = fmha__t(p, FMHA_TENSOR_Q_ROT);
    const fmha_mask_t m = fmha__problem_mask(p);
    const int q_per_row = m.left >= 0 || m.right >= 0 || m.sink_tokens > 0;
    const int64_t kv_items = B * Snew * Hk, q_items = qt ? B * Sq * Hq : 0;

#pragma omp parallel num_threads(plan->num_threads)
    {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        double *x = (double *)workspace + (size_t)tid * (size_t)Dmax;
#pragma omp for schedule(static)
        for (int64_t it = 0; it < kv_items + q_items; it++) {
            if (it < kv_items) {
                const int64_t h = it % Hk, t = (it / Hk) % Snew, b = it / (Hk * Snew);
                const int64_t pos = append_base(&kv, b, Snew) + t;
                move_row(&r, x, data[FMHA_TENSOR_K_NEW], kn->dtype,
                         b * kn->strides[0] + t * kn->strides[1] + h * kn->strides[2], kn->strides[3],
                         data[FMHA_TENSOR_K], kv.t[0]->dtype, fmha__kv_offset(&kv, 0, b, pos, h),
                         fmha__kv_dim_stride(&kv, 0), Dqk, pos, 1);
                move_row(&r, x, data[FMHA_TENSOR_V_NEW], vn->dtype,
                         b * vn->strides[0] + t * vn->strides[1] + h * vn->strides[2], vn->strides[3],
                         data[FMHA_TENSOR_V], kv.t[1]->dtype, fmha__kv_offset(&kv, 1, b, pos, h),
                         fmha__kv_dim_stride(&kv, 1), Dv, pos, 0);
            } else {
                const int64_t q = it - kv_items;
                const int64_t h = q % Hq, i = (q / Hq) % Sq, b = q / (Hq * Sq);
                const int64_t pos = append_base(&kv, b, Snew) + (q_per_row ? i : 0);
                move_row(&r, x, data[FMHA_TENSOR_Q], qt->dtype,
                         b * qt->strides[0] + i * qt->strides[1] + h * qt->strides[2], qt->strides[3],
                         data[FMHA_TENSOR_Q_ROT], qr->dtype,
                         b * qr->strides[0] + i * qr->strides[1] + h * qr->strides[2], qr->strides[3], Dqk, pos, 1);
            }
        }
    }
    return FMHA_STATUS_SUCCESS;
}
