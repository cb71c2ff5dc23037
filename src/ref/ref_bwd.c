/* SPDX-License-Identifier: MIT */
/*
 * ref_bwd.c: the CPU backward, REFERENCE.md "Backward" in double, as three stages:
 *   dot_do_o    D_i = sum(dO_i * O_i) into the workspace
 *   dq_dk_dv    two passes that recompute the scores: one over query rows writes the
 *               dq accumulator (and dbias), one over key blocks writes dk and dv
 *               (summing the query heads of each KV head)
 *   convert_dq  the dq accumulator to dq's type, and dsink
 * Each output element is computed by exactly one work item in a fixed order, so the
 * result is bitwise reproducible for any thread count: the deterministic flag asks for
 * nothing more here. Stage 0's workspace holds D [tokens][Hq] and the dq accumulator
 * [tokens][Hq][Dqk] (doubles); the other stages find it with fmha__stage_workspace.
 */
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/dtype.h"
#include "ref.h"
#include "ref_dropout.h"
#include "ref_tok.h"

#define ROWS 64 /* query rows or keys per work item */

typedef struct bwd_args {
    const fmha_problem_t *p;
    void *const *data;
    int group;
    int64_t B, Hq, Hk, Dqk, Dv, Sq_max, Sk_max, tokens;
    double scale, softcap;
    ref_dropout_t drop;
    fmha_mask_t mask;
    tok_view_t q, k, v, o, dO, dq, dk, dv;
    double *D, *dq_acc; /* stage 0's workspace */
} bwd_args_t;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static int64_t tokens_of(const fmha_problem_t *p)
{
    return fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP ? fmha__t(p, FMHA_TENSOR_Q)->dims[0]
                                                           : fmha__i(p, FMHA_PARAM_BATCH) * fmha__i(p, FMHA_PARAM_SEQLEN_Q);
}

static void args_init(bwd_args_t *a, const struct fmha_plan *plan, int stage, void *const *data, void *ws)
{
    const fmha_problem_t *p = &plan->problem;
    memset(a, 0, sizeof *a);
    a->p = p;
    a->data = data;
    a->group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    a->B = fmha__i(p, FMHA_PARAM_BATCH);
    a->Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    a->Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    a->Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK);
    a->Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    a->Sq_max = fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    a->Sk_max = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    a->tokens = tokens_of(p);
    a->scale = fmha__effective_scale(p);
    a->softcap = fmha__f(p, FMHA_PARAM_SOFTCAP);
    a->drop = fmha__ref_dropout(p);
    a->mask = fmha__problem_mask(p);
    const fmha_tensor_role_t roles[8] = {FMHA_TENSOR_Q,  FMHA_TENSOR_K,  FMHA_TENSOR_V,  FMHA_TENSOR_O,
                                         FMHA_TENSOR_DO, FMHA_TENSOR_DQ, FMHA_TENSOR_DK, FMHA_TENSOR_DV};
    tok_view_t *views[8] = {&a->q, &a->k, &a->v, &a->o, &a->dO, &a->dq, &a->dk, &a->dv};
    for (int i = 0; i < 8; i++) *views[i] = fmha__tok_view(fmha__t(p, roles[i]), a->group);
    char *w0 = fmha__stage_workspace(plan, ws, stage, 0);
    a->D = (double *)w0;
    a->dq_acc = (double *)(w0 + round64((size_t)(a->tokens * a->Hq) * sizeof(double)));
}

size_t fmha__ref_bwd_dot_workspace(const fmha_problem_t *p, int threads)
{
    (void)threads;
    const size_t rows = (size_t)(tokens_of(p) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q));
    return round64(rows * sizeof(double)) + round64(rows * (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK) * sizeof(double));
}

/* Lengths of sequence b: queries, keys used, keys allocated (group mode's seqused). */
static void lengths(const bwd_args_t *a, int64_t b, int64_t *sq, int64_t *sk, int64_t *alloc_k)
{
    if (!a->group) {
        *sq = a->Sq_max, *sk = *alloc_k = a->Sk_max;
        return;
    }
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q], *cu_k = a->data[FMHA_TENSOR_CU_SEQLENS_KV];
    const int32_t *used = a->data[FMHA_TENSOR_SEQUSED_KV];
    *sq = (int64_t)cu_q[b + 1] - cu_q[b];
    *alloc_k = (int64_t)cu_k[b + 1] - cu_k[b];
    *sk = used ? used[b] : *alloc_k;
}

static int64_t token(const bwd_args_t *a, int64_t b, int64_t i)
{
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
    return a->group ? (int64_t)cu_q[b] + i : b * a->Sq_max + i;
}

static double lse_of(const bwd_args_t *a, int64_t b, int64_t h, int64_t i)
{
    const fmha_tensor_desc_t *lt = fmha__t(a->p, FMHA_TENSOR_LSE);
    const float *L = a->data[FMHA_TENSOR_LSE];
    return a->group ? L[h * lt->strides[0] + token(a, b, i) * lt->strides[1]]
                    : L[b * lt->strides[0] + h * lt->strides[1] + i * lt->strides[2]];
}

/* Load row (b, i, h) of a token-major tensor into x as float. */
static void load_row(const bwd_args_t *a, const tok_view_t *v, fmha_tensor_role_t r, int64_t b, int64_t i, int64_t h,
                     int64_t D, float *x)
{
    const int32_t *cu = a->data[r == FMHA_TENSOR_K || r == FMHA_TENSOR_V ? FMHA_TENSOR_CU_SEQLENS_KV
                                                                         : FMHA_TENSOR_CU_SEQLENS_Q];
    const int64_t base = fmha__seq_base(v->t, a->group, b, cu) + i * v->tok + h * v->head;
    for (int64_t d = 0; d < D; d++) x[d] = fmha_load_f32(a->data[r], v->t->dtype, base + d * v->dim);
}

/* The score s_ij (REFERENCE.md order: scale, soft-cap, bias or ALiBi) and ds/dx of the
 * soft-cap, which the chain rule needs for dq and dk. */
static double score(const bwd_args_t *a, const float *q, const float *k, int64_t b, int64_t h, int64_t i,
                    int64_t j, int64_t sq, int64_t sk, double *dcap)
{
    double dot = 0.0;
    for (int64_t d = 0; d < a->Dqk; d++) dot += (double)q[d] * k[d];
    double s = a->scale * dot;
    *dcap = 1.0;
    if (a->softcap > 0) {
        const double t = tanh(s / a->softcap);
        s = a->softcap * t;
        *dcap = 1.0 - t * t;
    }
    const fmha_tensor_desc_t *bias = fmha__t(a->p, FMHA_TENSOR_BIAS), *al = fmha__t(a->p, FMHA_TENSOR_ALIBI_SLOPES);
    if (bias)
        s += fmha_load_f32(a->data[FMHA_TENSOR_BIAS], bias->dtype,
                           (bias->dims[0] == 1 ? 0 : b) * bias->strides[0] +
                               (bias->dims[1] == 1 ? 0 : h) * bias->strides[1] + i * bias->strides[2] +
                               j * bias->strides[3]);
    if (al) {
        const float *sl = a->data[FMHA_TENSOR_ALIBI_SLOPES];
        const double slope = al->rank == 1 ? sl[h * al->strides[0]] : sl[b * al->strides[0] + h * al->strides[1]];
        s -= slope * fabs((double)(i + sk - sq - j));
    }
    return s;
}

/* Dropout factor of element (b, h, i, j): 1/(1-p) kept, 0 dropped, 1 without dropout. */
static double drop_factor(const bwd_args_t *a, drop_cache_t *c, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (a->drop.p <= 0) return 1.0;
    const uint64_t e = (((uint64_t)b * (uint64_t)a->Hq + (uint64_t)h) * (uint64_t)a->Sq_max + (uint64_t)i) *
                           (uint64_t)a->Sk_max + (uint64_t)j;
    return fmha__ref_keep(&a->drop, c, e) ? a->drop.rp_keep : 0.0;
}

/* ------------------------------------------------------------ dot_do_o */

fmha_status_t fmha__ref_bwd_dot(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stream, (void)err, (void)err_len;
    bwd_args_t a;
    args_init(&a, plan, stage, data, workspace);
#pragma omp parallel for schedule(dynamic) num_threads(plan->num_threads)
    for (int64_t bh = 0; bh < a.B * a.Hq; bh++) {
        const int64_t b = bh / a.Hq, h = bh % a.Hq;
        int64_t sq, sk, alloc;
        lengths(&a, b, &sq, &sk, &alloc);
        const int32_t *cu_q = data[FMHA_TENSOR_CU_SEQLENS_Q];
        const int64_t ob = fmha__seq_base(a.o.t, a.group, b, cu_q), db = fmha__seq_base(a.dO.t, a.group, b, cu_q);
        for (int64_t i = 0; i < sq; i++) {
            double sum = 0.0;
            for (int64_t d = 0; d < a.Dv; d++)
                sum += (double)fmha_load_f32(data[FMHA_TENSOR_O], a.o.t->dtype, ob + i * a.o.tok + h * a.o.head + d * a.o.dim) *
                       fmha_load_f32(data[FMHA_TENSOR_DO], a.dO.t->dtype, db + i * a.dO.tok + h * a.dO.head + d * a.dO.dim);
            a.D[token(&a, b, i) * a.Hq + h] = sum;
        }
    }
    return FMHA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ dq_dk_dv */

typedef struct scratch {
    float *k, *v, *q, *dO; /* [Sk_max][Dqk], [Sk_max][Dv], [Dqk], [Dv] */
    double *dq;            /* [Dqk] */
    double *dk, *dv;       /* [ROWS][Dqk], [ROWS][Dv] */
    double *dbias;         /* [ROWS][Sk_max] when dbias is asked for */
} scratch_t;

static size_t scratch_bytes(const fmha_problem_t *p)
{
    const size_t Sk = (size_t)fmha__i(p, FMHA_PARAM_SEQLEN_KV), Dqk = (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                 Dv = (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    size_t n = round64(Sk * Dqk * 4) + round64(Sk * Dv * 4) + round64(Dqk * 4) + round64(Dv * 4) + round64(Dqk * 8) +
               round64(ROWS * Dqk * 8) + round64(ROWS * Dv * 8);
    if (fmha__t(p, FMHA_TENSOR_DBIAS)) n += round64(ROWS * Sk * 8);
    return n;
}

static scratch_t scratch_at(const fmha_problem_t *p, void *ws, int tid)
{
    const size_t Sk = (size_t)fmha__i(p, FMHA_PARAM_SEQLEN_KV), Dqk = (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                 Dv = (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    char *c = (char *)ws + (size_t)tid * scratch_bytes(p);
    scratch_t w;
    w.k = (float *)c, c += round64(Sk * Dqk * 4);
    w.v = (float *)c, c += round64(Sk * Dv * 4);
    w.q = (float *)c, c += round64(Dqk * 4);
    w.dO = (float *)c, c += round64(Dv * 4);
    w.dq = (double *)c, c += round64(Dqk * 8);
    w.dk = (double *)c, c += round64(ROWS * Dqk * 8);
    w.dv = (double *)c, c += round64(ROWS * Dv * 8);
    w.dbias = fmha__t(p, FMHA_TENSOR_DBIAS) ? (double *)c : NULL;
    return w;
}

size_t fmha__ref_bwd_main_workspace(const fmha_problem_t *p, int threads) { return (size_t)threads * scratch_bytes(p); }

/* Keys [j0, j1) of (b, kv head hk) into w->k, w->v from row 0. */
static void load_keys(const bwd_args_t *a, scratch_t *w, int64_t b, int64_t hk, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        load_row(a, &a->k, FMHA_TENSOR_K, b, j, hk, a->Dqk, w->k + (j - j0) * a->Dqk);
        load_row(a, &a->v, FMHA_TENSOR_V, b, j, hk, a->Dv, w->v + (j - j0) * a->Dv);
    }
}

/* Pass 1: dq of rows [row0, row1) of (b, h) into the accumulator, and their dS into
 * w->dbias (added: a broadcast dbias sums several (b, h)). */
static void dq_rows(const bwd_args_t *a, scratch_t *w, int64_t b, int64_t h, int64_t row0, int64_t row1)
{
    int64_t sq, sk, alloc;
    lengths(a, b, &sq, &sk, &alloc);
    if (row1 > sq) row1 = sq;
    if (row0 >= row1) return;
    int64_t k0, k1; /* the keys these rows can see, the only ones loaded and scanned */
    fmha__mask_key_span(&a->mask, sq, sk, row0, row1, &k0, &k1);
    load_keys(a, w, b, h / (a->Hq / a->Hk), k0, k1);
    drop_cache_t dc = DROP_CACHE_INIT;
    for (int64_t i = row0; i < row1; i++) {
        const int64_t t = token(a, b, i);
        const double lse = lse_of(a, b, h, i), Di = a->D[t * a->Hq + h];
        memset(w->dq, 0, (size_t)a->Dqk * sizeof(double));
        if (lse > -INFINITY) {
            load_row(a, &a->q, FMHA_TENSOR_Q, b, i, h, a->Dqk, w->q);
            load_row(a, &a->dO, FMHA_TENSOR_DO, b, i, h, a->Dv, w->dO);
            for (int64_t j = k0; j < k1; j++) {
                if (!fmha_mask_visible(&a->mask, sq, sk, i, j)) continue;
                const float *kj = w->k + (j - k0) * a->Dqk, *vj = w->v + (j - k0) * a->Dv;
                double dcap;
                const double pij = exp(score(a, w->q, kj, b, h, i, j, sq, sk, &dcap) - lse);
                double dp = 0.0;
                for (int64_t d = 0; d < a->Dv; d++) dp += (double)w->dO[d] * vj[d];
                const double ds = pij * (dp * drop_factor(a, &dc, b, h, i, j) - Di);
                const double g = a->scale * ds * dcap;
                for (int64_t d = 0; d < a->Dqk; d++) w->dq[d] += g * kj[d];
                if (w->dbias) w->dbias[(i - row0) * a->Sk_max + j] += ds;
            }
        }
        memcpy(a->dq_acc + (t * a->Hq + h) * a->Dqk, w->dq, (size_t)a->Dqk * sizeof(double));
    }
}

/* Pass 2: dk and dv of keys [j0, j0 + ROWS) of (b, kv head hk), over every query row of
 * every query head that reads this KV head. */
static void dkdv_block(const bwd_args_t *a, scratch_t *w, int64_t b, int64_t hk, int64_t j0)
{
    int64_t sq, sk, alloc;
    lengths(a, b, &sq, &sk, &alloc);
    if (j0 >= alloc) return;
    const int64_t j1 = j0 + ROWS < alloc ? j0 + ROWS : alloc, jv = j1 < sk ? j1 : sk; /* [sk, alloc): zeros */
    memset(w->dk, 0, (size_t)(ROWS * a->Dqk) * sizeof(double));
    memset(w->dv, 0, (size_t)(ROWS * a->Dv) * sizeof(double));
    if (j0 < jv) load_keys(a, w, b, hk, j0, jv);
    const int64_t group = a->Hq / a->Hk;
    for (int64_t h = hk * group; j0 < jv && h < (hk + 1) * group; h++) {
        drop_cache_t dc = DROP_CACHE_INIT;
        for (int64_t i = 0; i < sq; i++) {
            const double lse = lse_of(a, b, h, i);
            if (lse == -INFINITY) continue;
            const double Di = a->D[token(a, b, i) * a->Hq + h];
            int loaded = 0;
            for (int64_t j = j0; j < jv; j++) {
                if (!fmha_mask_visible(&a->mask, sq, sk, i, j)) continue;
                if (!loaded) {
                    load_row(a, &a->q, FMHA_TENSOR_Q, b, i, h, a->Dqk, w->q);
                    load_row(a, &a->dO, FMHA_TENSOR_DO, b, i, h, a->Dv, w->dO);
                    loaded = 1;
                }
                const float *kj = w->k + (j - j0) * a->Dqk, *vj = w->v + (j - j0) * a->Dv;
                double dcap;
                const double pij = exp(score(a, w->q, kj, b, h, i, j, sq, sk, &dcap) - lse);
                const double z = drop_factor(a, &dc, b, h, i, j);
                double dp = 0.0;
                for (int64_t d = 0; d < a->Dv; d++) dp += (double)w->dO[d] * vj[d];
                const double g = a->scale * pij * (dp * z - Di) * dcap;
                double *dkj = w->dk + (j - j0) * a->Dqk, *dvj = w->dv + (j - j0) * a->Dv;
                for (int64_t d = 0; d < a->Dqk; d++) dkj[d] += g * w->q[d];
                for (int64_t d = 0; d < a->Dv; d++) dvj[d] += pij * z * w->dO[d];
            }
        }
    }
    const int32_t *cu_k = a->data[FMHA_TENSOR_CU_SEQLENS_KV];
    const int64_t kb = fmha__seq_base(a->dk.t, a->group, b, cu_k), vb = fmha__seq_base(a->dv.t, a->group, b, cu_k);
    for (int64_t j = j0; j < j1; j++) {
        for (int64_t d = 0; d < a->Dqk; d++)
            fmha_store_f32(a->data[FMHA_TENSOR_DK], a->dk.t->dtype, kb + j * a->dk.tok + hk * a->dk.head + d * a->dk.dim,
                           (float)w->dk[(j - j0) * a->Dqk + d]);
        for (int64_t d = 0; d < a->Dv; d++)
            fmha_store_f32(a->data[FMHA_TENSOR_DV], a->dv.t->dtype, vb + j * a->dv.tok + hk * a->dv.head + d * a->dv.dim,
                           (float)w->dv[(j - j0) * a->Dv + d]);
    }
}

fmha_status_t fmha__ref_bwd_main(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                 struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stream, (void)err, (void)err_len;
    bwd_args_t a;
    args_init(&a, plan, stage, data, workspace);
    const fmha_tensor_desc_t *dbt = fmha__t(a.p, FMHA_TENSOR_DBIAS);
    /* Pass 1 items: (b', h', row block) over dbias's leading dims, so that a dbias
     * broadcast over b or h is summed inside one item, in a fixed order. */
    const int64_t nb = dbt ? dbt->dims[0] : a.B, nh = dbt ? dbt->dims[1] : a.Hq;
    const int64_t qblocks = (a.Sq_max + ROWS - 1) / ROWS, kblocks = (a.Sk_max + ROWS - 1) / ROWS;
    const int64_t items1 = nb * nh * qblocks, items2 = a.B * a.Hk * kblocks;
#pragma omp parallel num_threads(plan->num_threads)
    {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        scratch_t w = scratch_at(a.p, workspace, tid);
#pragma omp for schedule(dynamic)
        for (int64_t it = 0; it < items1; it++) {
            const int64_t blk = it % qblocks, hh = (it / qblocks) % nh, bb = it / (qblocks * nh);
            const int64_t row0 = blk * ROWS, row1 = row0 + ROWS < a.Sq_max ? row0 + ROWS : a.Sq_max;
            if (w.dbias) memset(w.dbias, 0, (size_t)(ROWS * a.Sk_max) * sizeof(double));
            for (int64_t b = nb == 1 ? 0 : bb; b < (nb == 1 ? a.B : bb + 1); b++)
                for (int64_t h = nh == 1 ? 0 : hh; h < (nh == 1 ? a.Hq : hh + 1); h++) dq_rows(&a, &w, b, h, row0, row1);
            for (int64_t i = row0; w.dbias && i < row1; i++)
                for (int64_t j = 0; j < a.Sk_max; j++)
                    fmha_store_f32(data[FMHA_TENSOR_DBIAS], dbt->dtype,
                                   bb * dbt->strides[0] + hh * dbt->strides[1] + i * dbt->strides[2] + j * dbt->strides[3],
                                   (float)w.dbias[(i - row0) * a.Sk_max + j]);
        }
#pragma omp for schedule(dynamic)
        for (int64_t it = 0; it < items2; it++) {
            const int64_t blk = it % kblocks, hk = (it / kblocks) % a.Hk, b = it / (kblocks * a.Hk);
            dkdv_block(&a, &w, b, hk, blk * ROWS);
        }
    }
    return FMHA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ convert_dq */

fmha_status_t fmha__ref_bwd_convert(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                    struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stream, (void)err, (void)err_len;
    bwd_args_t a;
    args_init(&a, plan, stage, data, workspace);
    const fmha_tensor_desc_t *st = fmha__t(a.p, FMHA_TENSOR_SINK), *dst = fmha__t(a.p, FMHA_TENSOR_DSINK);
    const int32_t *cu_q = data[FMHA_TENSOR_CU_SEQLENS_Q];
#pragma omp parallel for schedule(dynamic) num_threads(plan->num_threads)
    for (int64_t h = 0; h < a.Hq; h++) {
        double dsink = 0.0;
        const double sink = st ? ((const float *)data[FMHA_TENSOR_SINK])[h * st->strides[0]] : 0.0;
        for (int64_t b = 0; b < a.B; b++) {
            int64_t sq, sk, alloc;
            lengths(&a, b, &sq, &sk, &alloc);
            const int64_t base = fmha__seq_base(a.dq.t, a.group, b, cu_q);
            for (int64_t i = 0; i < sq; i++) {
                const int64_t t = token(&a, b, i);
                const double *acc = a.dq_acc + (t * a.Hq + h) * a.Dqk;
                for (int64_t d = 0; d < a.Dqk; d++)
                    fmha_store_f32(data[FMHA_TENSOR_DQ], a.dq.t->dtype, base + i * a.dq.tok + h * a.dq.head + d * a.dq.dim,
                                   (float)acc[d]);
                const double lse = lse_of(&a, b, h, i);
                if (dst && lse > -INFINITY) dsink -= exp(sink - lse) * a.D[t * a.Hq + h];
            }
        }
        if (dst) ((float *)data[FMHA_TENSOR_DSINK])[h * dst->strides[0]] = (float)dsink;
    }
    return FMHA_STATUS_SUCCESS;
}
