/* SPDX-License-Identifier: MIT */
/*
 * ref_attn.c: the CPU forward of every attention family (fwd, fwd_splitkv with its
 * combine, fwd_pagedkv, batch_prefill), exactly REFERENCE.md's math with double
 * accumulation. The families differ only in where keys live (ref_kv.h) and in whether a
 * work item covers all keys or one split of them.
 *
 * Work is split into items of (batch b, query head h, block of ROWS query rows, split)
 * and spread over OpenMP threads. Each item first converts the K and V rows of its KV
 * head and key range to float (exact for fp16/bf16/fp32; fp8 e4m3 times its descale,
 * rounded once to float), so the inner loops are
 * contiguous; scores, softmax and the P*V sum are double.
 *
 * A split writes its partial result, normalised within the split and without the sink
 * term, to the plan's workspace in double: O_s [split][token][h][Dv], LSE_s
 * [split][token][h]. The combine stage merges them (REFERENCE.md "Split-KV and combine")
 * and adds the sink. Doubles, not the fp32 a GPU uses, because this is the oracle.
 *
 * Index conventions (element offsets from strides):
 *   batch mode  Q[b, i, h, d] = b*s0 + i*s1 + h*s2 + d*s3
 *   group mode  Q[t, h, d]    = t*s0 + h*s1 + d*s2, token t = cu_seqlens_q[b] + i
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
#endif

#include "../core/dtype.h"
#include "ref.h"
#include "ref_dropout.h"
#include "ref_kv.h"
#include "ref_tok.h"

#define ROWS 64 /* query rows per work item: large enough to amortise the K/V conversion */

typedef struct fwd_args {
    const fmha_problem_t *p;
    void *const *data;
    int group;
    int64_t B, Hq, Hk, Dqk, Dv, Sq_max, Sk_max;
    double scale, softcap;
    ref_dropout_t drop;
    fmha_mask_t mask;
    tok_view_t q, o;
    kv_view_t kv;
    int64_t tokens;    /* query rows of Q: B*Sq_max (batch) or total_q (group) */
    int nsplit;        /* 1: write O and LSE; > 1: write partials of this many splits */
    double *part_o, *part_lse;
} fwd_args_t;

/* Lengths of sequence b. */
static void seq_lengths(const fwd_args_t *a, int64_t b, int64_t *sq, int64_t *sk)
{
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
    *sq = a->group ? (int64_t)cu_q[b + 1] - cu_q[b] : a->Sq_max;
    *sk = fmha__kv_len(&a->kv, b);
}

/* Global query row of (b, i): the token index of group mode, b*Sq_max + i in batch mode. */
static int64_t token_of(const fwd_args_t *a, int64_t b, int64_t i)
{
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
    return a->group ? (int64_t)cu_q[b] + i : b * a->Sq_max + i;
}

/* The descale of fp8 input `role` (q_descale, k_descale, v_descale) for sequence b and KV
 * head hk: [1] or [B, Hk] fp32; 1 when absent (and for every other dtype). */
static float descale_of(const fwd_args_t *a, fmha_tensor_role_t role, int64_t b, int64_t hk)
{
    const fmha_tensor_desc_t *t = fmha__t(a->p, role);
    const float *d = a->data[role];
    if (!t || !d) return 1.0f;
    return t->rank == 1 ? d[0] : d[b * t->strides[0] + hk * t->strides[1]];
}

/* Keys [*j0, *j1) of split s: the key blocks of the sequence dealt out evenly, in order. */
static void split_range(int64_t sk, int nsplit, int s, int64_t *j0, int64_t *j1)
{
    const int64_t blocks = (sk + ROWS - 1) / ROWS, per = (blocks + nsplit - 1) / nsplit;
    *j0 = s * per * ROWS;
    *j1 = (s + 1) * per * ROWS;
    if (*j0 > sk) *j0 = sk;
    if (*j1 > sk) *j1 = sk;
}

/* Per-thread scratch. */
typedef struct scratch {
    float *k, *v, *q; /* [Sk_max, Dqk], [Sk_max, Dv], [Dqk] */
    double *s, *acc;  /* [Sk_max], [Dv] */
    unsigned char *vis;
} scratch_t;

/* Query row i of (b, h) against keys [j0, j1); w->k and w->v hold those keys' rows from
 * index 0. Split s of a split plan writes its partials, else O and LSE are written. */
static void row(const fwd_args_t *a, scratch_t *w, int64_t b, int64_t h, int64_t i, int64_t sq,
                int64_t sk, int64_t j0, int64_t j1, int split, int64_t q_base, int64_t o_base)
{
    const fmha_problem_t *p = a->p;
    const fmha_tensor_desc_t *qt = a->q.t, *ot = a->o.t;
    const void *Q = a->data[FMHA_TENSOR_Q];
    void *O = a->data[FMHA_TENSOR_O];

    const float qd = descale_of(a, FMHA_TENSOR_Q_DESCALE, b, h / (a->Hq / a->Hk));
    for (int64_t d = 0; d < a->Dqk; d++)
        w->q[d] = qd * fmha_load_f32(Q, qt->dtype, q_base + i * a->q.tok + h * a->q.head + d * a->q.dim);

    const fmha_tensor_desc_t *bias = fmha__t(p, FMHA_TENSOR_BIAS);
    const fmha_tensor_desc_t *alibi = fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES);
    const fmha_tensor_desc_t *sinkt = fmha__t(p, FMHA_TENSOR_SINK);
    int64_t bias_row = 0;
    if (bias)
        bias_row = (bias->dims[0] == 1 ? 0 : b * bias->strides[0]) +
                   (bias->dims[1] == 1 ? 0 : h * bias->strides[1]) + i * bias->strides[2];
    double slope = 0.0;
    if (alibi) {
        const float *al = a->data[FMHA_TENSOR_ALIBI_SLOPES];
        slope = alibi->rank == 1 ? al[h * alibi->strides[0]]
                                 : al[b * alibi->strides[0] + h * alibi->strides[1]];
    }

    /* Scores of visible keys and their maximum (with the sink logit). */
    double m = -INFINITY;
    for (int64_t j = j0; j < j1; j++) {
        w->vis[j - j0] = (unsigned char)fmha_mask_visible(&a->mask, sq, sk, i, j);
        if (!w->vis[j - j0]) continue;
        const float *kj = w->k + (j - j0) * a->Dqk;
        double dot = 0.0;
        for (int64_t d = 0; d < a->Dqk; d++) dot += (double)w->q[d] * kj[d];
        double s = a->scale * dot;
        if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap);
        if (bias) s += fmha_load_f32(a->data[FMHA_TENSOR_BIAS], bias->dtype, bias_row + j * bias->strides[3]);
        if (alibi) s -= slope * fabs((double)(i + sk - sq - j));
        w->s[j - j0] = s;
        if (s > m || isnan(s)) m = s; /* a NaN score makes the row NaN (docs/semantics.md) */
    }
    double sink = 0.0;
    if (sinkt && a->nsplit == 1) { /* a split plan adds the sink in the combine */
        sink = ((const float *)a->data[FMHA_TENSOR_SINK])[h * sinkt->strides[0]];
        if (sink > m) m = sink;
    }

    double lse;
    memset(w->acc, 0, (size_t)a->Dv * sizeof(double));
    drop_cache_t dc = DROP_CACHE_INIT;
    unsigned char *mask_out = a->data[FMHA_TENSOR_DROPOUT_MASK];
    const fmha_tensor_desc_t *mt = fmha__t(p, FMHA_TENSOR_DROPOUT_MASK);
    const uint64_t e_row = (((uint64_t)b * a->Hq + h) * a->Sq_max + i) * a->Sk_max;
    if (m == -INFINITY) {
        lse = -INFINITY; /* no visible key and no sink: O = 0 */
    } else {
        double sum = sinkt && a->nsplit == 1 ? exp(sink - m) : 0.0;
        for (int64_t j = j0; j < j1; j++)
            if (w->vis[j - j0]) sum += exp(w->s[j - j0] - m);
        lse = m + log(sum);
        for (int64_t j = j0; j < j1; j++) {
            if (!w->vis[j - j0]) continue;
            double pj = exp(w->s[j - j0] - m) / sum;
            if (a->drop.p > 0) pj = fmha__ref_keep(&a->drop, &dc, e_row + (uint64_t)j) ? pj * a->drop.rp_keep : 0.0;
            const float *vj = w->v + (j - j0) * a->Dv;
            for (int64_t d = 0; d < a->Dv; d++) w->acc[d] += pj * vj[d];
        }
    }
    if (mask_out) {
        int64_t mrow = b * mt->strides[0] + h * mt->strides[1] + i * mt->strides[2];
        for (int64_t j = 0; j < a->Sk_max; j++)
            mask_out[mrow + j * mt->strides[3]] =
                (unsigned char)(j < sk && (a->drop.p == 0 || fmha__ref_keep(&a->drop, &dc, e_row + (uint64_t)j)));
    }
    if (a->nsplit > 1) {
        const int64_t at = (int64_t)split * a->tokens + token_of(a, b, i);
        memcpy(a->part_o + (at * a->Hq + h) * a->Dv, w->acc, (size_t)a->Dv * sizeof(double));
        a->part_lse[at * a->Hq + h] = lse;
        return;
    }
    for (int64_t d = 0; d < a->Dv; d++)
        fmha_store_f32(O, ot->dtype, o_base + i * a->o.tok + h * a->o.head + d * a->o.dim,
                       (float)w->acc[d]);
    const fmha_tensor_desc_t *lt = fmha__t(p, FMHA_TENSOR_LSE);
    if (lt) {
        float *L = a->data[FMHA_TENSOR_LSE];
        int64_t off;
        if (a->group) {
            const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
            off = h * lt->strides[0] + ((int64_t)cu_q[b] + i) * lt->strides[1];
        } else {
            off = b * lt->strides[0] + h * lt->strides[1] + i * lt->strides[2];
        }
        L[off] = (float)lse;
    }
}

/* Rows [sq, Sq_max) of a group-mode sequence exist only in the dropout mask: zero them. */
static void zero_mask_row(const fwd_args_t *a, int64_t b, int64_t h, int64_t i)
{
    const fmha_tensor_desc_t *mt = fmha__t(a->p, FMHA_TENSOR_DROPOUT_MASK);
    unsigned char *mask_out = a->data[FMHA_TENSOR_DROPOUT_MASK];
    int64_t mrow = b * mt->strides[0] + h * mt->strides[1] + i * mt->strides[2];
    for (int64_t j = 0; j < a->Sk_max; j++) mask_out[mrow + j * mt->strides[3]] = 0;
}

static void item(const fwd_args_t *a, scratch_t *w, int64_t b, int64_t h, int64_t row0, int split)
{
    int64_t sq, sk;
    seq_lengths(a, b, &sq, &sk);
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
    int64_t row1 = row0 + ROWS < a->Sq_max ? row0 + ROWS : a->Sq_max;
    if (a->data[FMHA_TENSOR_DROPOUT_MASK])
        for (int64_t i = (row0 > sq ? row0 : sq); i < row1; i++) zero_mask_row(a, b, h, i);
    if (row1 > sq) row1 = sq;
    if (row0 >= row1) return;

    int64_t j0 = 0, j1 = sk, v0, v1;
    if (a->nsplit > 1) split_range(sk, a->nsplit, split, &j0, &j1);
    /* only the keys these rows can see: the same sums, in the same order, with the keys
     * the mask hides from every row neither converted nor scanned */
    fmha__mask_key_span(&a->mask, sq, sk, row0, row1, &v0, &v1);
    if (j0 < v0) j0 = v0;
    if (j1 > v1) j1 = v1;
    if (j1 < j0) j1 = j0;
    const int64_t hk = h / (a->Hq / a->Hk);
    const void *K = a->data[FMHA_TENSOR_K], *V = a->data[FMHA_TENSOR_V];
    const fmha_dtype_t kt = a->kv.t[0]->dtype, vt = a->kv.t[1]->dtype;
    const int64_t kd = fmha__kv_dim_stride(&a->kv, 0), vd = fmha__kv_dim_stride(&a->kv, 1);
    /* fp8 inputs are dequantised here, once per item: e4m3 value times its descale */
    const float kdesc = descale_of(a, FMHA_TENSOR_K_DESCALE, b, hk), vdesc = descale_of(a, FMHA_TENSOR_V_DESCALE, b, hk);
    for (int64_t j = j0; j < j1; j++) {
        const int64_t ko = fmha__kv_offset(&a->kv, 0, b, j, hk), vo = fmha__kv_offset(&a->kv, 1, b, j, hk);
        for (int64_t d = 0; d < a->Dqk; d++) w->k[(j - j0) * a->Dqk + d] = kdesc * fmha_load_f32(K, kt, ko + d * kd);
        for (int64_t d = 0; d < a->Dv; d++) w->v[(j - j0) * a->Dv + d] = vdesc * fmha_load_f32(V, vt, vo + d * vd);
    }
    const int64_t q_base = fmha__seq_base(a->q.t, a->group, b, cu_q);
    const int64_t o_base = fmha__seq_base(a->o.t, a->group, b, cu_q);
    for (int64_t i = row0; i < row1; i++) row(a, w, b, h, i, sq, sk, j0, j1, split, q_base, o_base);
}

/* Per-thread scratch, carved from the workspace: execution never allocates. Each piece
 * is rounded up to 64 bytes so that threads do not share cache lines. */
static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t scratch_bytes(int64_t Sk, int64_t Dqk, int64_t Dv)
{
    return round64((size_t)(Sk * Dqk) * sizeof(float)) + round64((size_t)(Sk * Dv) * sizeof(float)) +
           round64((size_t)Dqk * sizeof(float)) + round64((size_t)Sk * sizeof(double)) +
           round64((size_t)Dv * sizeof(double)) + round64((size_t)Sk);
}

static scratch_t scratch_at(void *workspace, int thread, int64_t Sk, int64_t Dqk, int64_t Dv)
{
    char *base = (char *)workspace + (size_t)thread * scratch_bytes(Sk, Dqk, Dv);
    scratch_t w;
    w.k = (float *)base;
    base += round64((size_t)(Sk * Dqk) * sizeof(float));
    w.v = (float *)base;
    base += round64((size_t)(Sk * Dv) * sizeof(float));
    w.q = (float *)base;
    base += round64((size_t)Dqk * sizeof(float));
    w.s = (double *)base;
    base += round64((size_t)Sk * sizeof(double));
    w.acc = (double *)base;
    base += round64((size_t)Dv * sizeof(double));
    w.vis = (unsigned char *)base;
    return w;
}

int fmha__ref_threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

int fmha__ref_num_splits(const fmha_problem_t *p, int threads)
{
    if (fmha__i(p, FMHA_PARAM_FAMILY) != FMHA_FAMILY_FWD_SPLITKV) return 1;
    int64_t n = fmha__i(p, FMHA_PARAM_NUM_SPLITS);
    if (n > 0) return (int)n;
    /* Chosen: enough items to feed every thread, at least 256 keys per split, at most 16. */
    const int64_t Sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV), Sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    const int64_t items = fmha__i(p, FMHA_PARAM_BATCH) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) * ((Sq + ROWS - 1) / ROWS);
    n = (2 * threads + items - 1) / items;
    if (n > (Sk + 255) / 256) n = (Sk + 255) / 256;
    if (n > 16) n = 16;
    return n < 1 ? 1 : (int)n;
}

/* Bytes of the split partials at the start of a split plan's stage-0 workspace. */
static size_t partial_bytes(const fmha_problem_t *p, int nsplit)
{
    if (nsplit <= 1) return 0;
    const size_t rows = (size_t)nsplit * (size_t)fmha__query_tokens(p) * (size_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    return round64(rows * (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_V) * sizeof(double)) + round64(rows * sizeof(double));
}

size_t fmha__ref_attn_workspace(const fmha_problem_t *p, int threads)
{
    return partial_bytes(p, fmha__ref_num_splits(p, threads)) +
           (size_t)threads * scratch_bytes(fmha__i(p, FMHA_PARAM_SEQLEN_KV), fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                                           fmha__i(p, FMHA_PARAM_HEAD_DIM_V));
}

static void args_init(fwd_args_t *a, const struct fmha_plan *plan, void *const *data)
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
    a->scale = fmha__effective_scale(p);
    a->softcap = fmha__f(p, FMHA_PARAM_SOFTCAP);
    a->drop = fmha__ref_dropout(p);
    a->mask = fmha__problem_mask(p);
    a->q = fmha__tok_view(fmha__t(p, FMHA_TENSOR_Q), a->group);
    a->o = fmha__tok_view(fmha__t(p, FMHA_TENSOR_O), a->group);
    a->kv = fmha__kv_view(p, data);
    a->tokens = fmha__query_tokens(p);
    a->nsplit = fmha__ref_num_splits(p, plan->num_threads);
}

/* The split partials live at the start of stage 0's workspace (combine reads them). */
static void partials_at(fwd_args_t *a, void *stage0_ws)
{
    const size_t rows = (size_t)a->nsplit * (size_t)a->tokens * (size_t)a->Hq;
    a->part_o = stage0_ws;
    a->part_lse = (double *)((char *)stage0_ws + round64(rows * (size_t)a->Dv * sizeof(double)));
}

fmha_status_t fmha__ref_attn(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                             struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stage, (void)stream, (void)err, (void)err_len;
    fwd_args_t a;
    args_init(&a, plan, data);
    if (a.nsplit > 1) partials_at(&a, workspace);
    char *scratch = (char *)workspace + partial_bytes(a.p, a.nsplit);

    const int64_t blocks = (a.Sq_max + ROWS - 1) / ROWS;
    const int64_t items = a.B * a.Hq * blocks * a.nsplit;
    /* The workspace holds plan->num_threads scratch slices; OpenMP may give fewer
     * threads than asked for, never more. */
#pragma omp parallel num_threads(plan->num_threads)
    {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        scratch_t w = scratch_at(scratch, tid, a.Sk_max, a.Dqk, a.Dv);
#pragma omp for schedule(dynamic)
        for (int64_t it = 0; it < items; it++) {
            int64_t split = it % a.nsplit, rest = it / a.nsplit;
            int64_t blk = rest % blocks, bh = rest / blocks;
            item(&a, &w, bh / a.Hq, bh % a.Hq, blk * ROWS, (int)split);
        }
    }
    return FMHA_STATUS_SUCCESS;
}

/* Combine: for every query row, merge the splits' partials (and the sink logit). */
fmha_status_t fmha__ref_combine(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                                struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stream, (void)err, (void)err_len;
    fwd_args_t a;
    args_init(&a, plan, data);
    if (a.nsplit <= 1) return FMHA_STATUS_SUCCESS; /* one split wrote O and LSE itself */
    partials_at(&a, fmha__stage_workspace(plan, workspace, stage, 0));
    const fmha_tensor_desc_t *sinkt = fmha__t(a.p, FMHA_TENSOR_SINK), *lt = fmha__t(a.p, FMHA_TENSOR_LSE);
    const fmha_dtype_t odt = a.o.t->dtype;
    const int32_t *cu_q = data[FMHA_TENSOR_CU_SEQLENS_Q];
    const int64_t items = a.B * a.Hq;
#pragma omp parallel for schedule(dynamic) num_threads(plan->num_threads)
    for (int64_t it = 0; it < items; it++) {
        const int64_t b = it / a.Hq, h = it % a.Hq;
        int64_t sq, sk;
        seq_lengths(&a, b, &sq, &sk);
        const int64_t o_base = fmha__seq_base(a.o.t, a.group, b, cu_q);
        const double sink = sinkt ? ((const float *)data[FMHA_TENSOR_SINK])[h * sinkt->strides[0]] : -INFINITY;
        for (int64_t i = 0; i < sq; i++) {
            const int64_t t = token_of(&a, b, i);
            double m = sink;
            for (int s = 0; s < a.nsplit; s++) {
                double l = a.part_lse[((int64_t)s * a.tokens + t) * a.Hq + h];
                if (l > m || isnan(l)) m = l;
            }
            double lse = -INFINITY; /* NaN partials (NaN inputs) make the row NaN */
            if (m != -INFINITY) {
                double sum = exp(sink - m); /* 0 without a sink */
                for (int s = 0; s < a.nsplit; s++) sum += exp(a.part_lse[((int64_t)s * a.tokens + t) * a.Hq + h] - m);
                lse = m + log(sum);
            }
            for (int64_t d = 0; d < a.Dv; d++) {
                double o = 0.0;
                for (int s = 0; lse != -INFINITY && s < a.nsplit; s++) {
                    const int64_t at = (int64_t)s * a.tokens + t;
                    const double l = a.part_lse[at * a.Hq + h];
                    if (l != -INFINITY) o += exp(l - lse) * a.part_o[(at * a.Hq + h) * a.Dv + d];
                }
                fmha_store_f32(data[FMHA_TENSOR_O], odt, o_base + i * a.o.tok + h * a.o.head + d * a.o.dim, (float)o);
            }
            if (lt) {
                float *L = data[FMHA_TENSOR_LSE];
                const int64_t off = a.group ? h * lt->strides[0] + t * lt->strides[1]
                                            : b * lt->strides[0] + h * lt->strides[1] + i * lt->strides[2];
                L[off] = (float)lse;
            }
        }
    }
    return FMHA_STATUS_SUCCESS;
}
