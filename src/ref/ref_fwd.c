/*
 * ref_fwd.c: the CPU forward, exactly REFERENCE.md's math with double accumulation.
 *
 * Work is split into items of (batch b, query head h, block of ROWS query rows) and
 * spread over OpenMP threads. Each item first converts the K and V rows of its KV head
 * to float (exact for fp16/bf16/fp32), so the inner loops are contiguous; scores,
 * softmax and the P*V sum are double.
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

#define ROWS 64 /* query rows per work item: large enough to amortise the K/V conversion */

/* How to reach token i, head h, feature d of one sequence in a token-major tensor. */
typedef struct tok_view {
    const fmha_tensor_desc_t *t;
    int64_t tok, head, dim; /* strides */
} tok_view_t;

static tok_view_t tok_view(const fmha_tensor_desc_t *t, int group)
{
    tok_view_t v = {t, 0, 0, 0};
    int o = group ? 0 : 1; /* batch mode has a leading batch dim */
    v.tok = t->strides[o];
    v.head = t->strides[o + 1];
    v.dim = t->strides[o + 2];
    return v;
}

/* Element offset of (sequence b, token 0) in a token-major tensor. */
static int64_t seq_base(const fmha_tensor_desc_t *t, int group, int64_t b, const int32_t *cu)
{
    return group ? (int64_t)cu[b] * t->strides[0] : b * t->strides[0];
}

typedef struct fwd_args {
    const fmha_problem_t *p;
    void *const *data;
    int group;
    int64_t B, Hq, Hk, Dqk, Dv, Sq_max, Sk_max;
    double scale, softcap, p_drop, rp_keep;
    uint32_t drop_threshold, seed[2], offset[2];
    fmha_mask_t mask;
    tok_view_t q, k, v, o;
} fwd_args_t;

/* Lengths and token offsets of sequence b. */
static void seq_lengths(const fwd_args_t *a, int64_t b, int64_t *sq, int64_t *sk)
{
    if (!a->group) {
        *sq = a->Sq_max;
        *sk = a->Sk_max;
        return;
    }
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
    const int32_t *cu_k = a->data[FMHA_TENSOR_CU_SEQLENS_KV];
    const int32_t *used = a->data[FMHA_TENSOR_SEQUSED_KV];
    *sq = (int64_t)cu_q[b + 1] - cu_q[b];
    *sk = used ? used[b] : (int64_t)cu_k[b + 1] - cu_k[b];
}

/* Dropout: the keep bit of element e, from REFERENCE.md's Philox stream. One Philox call
 * yields the words of four consecutive elements, cached in c. */
typedef struct drop_cache {
    uint64_t block; /* e / 4 of the cached words, or UINT64_MAX */
    uint32_t words[4];
} drop_cache_t;

static int drop_keep(const fwd_args_t *a, drop_cache_t *c, uint64_t e)
{
    uint64_t blk = e / 4;
    if (c->block != blk) {
        uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), a->offset[0], a->offset[1]};
        fmha_philox4x32_10(ctr, a->seed, c->words);
        c->block = blk;
    }
    return c->words[e % 4] >= a->drop_threshold;
}

/* Per-thread scratch. */
typedef struct scratch {
    float *k, *v, *q; /* [Sk_max, Dqk], [Sk_max, Dv], [Dqk] */
    double *s, *acc;  /* [Sk_max], [Dv] */
    unsigned char *vis;
} scratch_t;

static void row(const fwd_args_t *a, scratch_t *w, int64_t b, int64_t h, int64_t i, int64_t sq,
                int64_t sk, int64_t q_base, int64_t o_base)
{
    const fmha_problem_t *p = a->p;
    const fmha_tensor_desc_t *qt = a->q.t, *ot = a->o.t;
    const void *Q = a->data[FMHA_TENSOR_Q];
    void *O = a->data[FMHA_TENSOR_O];

    for (int64_t d = 0; d < a->Dqk; d++)
        w->q[d] = fmha_load_f32(Q, qt->dtype, q_base + i * a->q.tok + h * a->q.head + d * a->q.dim);

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
    for (int64_t j = 0; j < sk; j++) {
        w->vis[j] = (unsigned char)fmha_mask_visible(&a->mask, sq, sk, i, j);
        if (!w->vis[j]) continue;
        const float *kj = w->k + j * a->Dqk;
        double dot = 0.0;
        for (int64_t d = 0; d < a->Dqk; d++) dot += (double)w->q[d] * kj[d];
        double s = a->scale * dot;
        if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap);
        if (bias) s += fmha_load_f32(a->data[FMHA_TENSOR_BIAS], bias->dtype, bias_row + j * bias->strides[3]);
        if (alibi) s -= slope * fabs((double)(i + sk - sq - j));
        w->s[j] = s;
        if (s > m) m = s;
    }
    double sink = 0.0;
    if (sinkt) {
        sink = ((const float *)a->data[FMHA_TENSOR_SINK])[h * sinkt->strides[0]];
        if (sink > m) m = sink;
    }

    double lse;
    memset(w->acc, 0, (size_t)a->Dv * sizeof(double));
    drop_cache_t dc = {UINT64_MAX, {0}};
    unsigned char *mask_out = a->data[FMHA_TENSOR_DROPOUT_MASK];
    const fmha_tensor_desc_t *mt = fmha__t(p, FMHA_TENSOR_DROPOUT_MASK);
    const uint64_t e_row = (((uint64_t)b * a->Hq + h) * a->Sq_max + i) * a->Sk_max;
    if (m == -INFINITY) {
        lse = -INFINITY; /* no visible key and no sink: O = 0 */
    } else {
        double sum = sinkt ? exp(sink - m) : 0.0;
        for (int64_t j = 0; j < sk; j++)
            if (w->vis[j]) sum += exp(w->s[j] - m);
        lse = m + log(sum);
        for (int64_t j = 0; j < sk; j++) {
            if (!w->vis[j]) continue;
            double pj = exp(w->s[j] - m) / sum;
            if (a->p_drop > 0) pj = drop_keep(a, &dc, e_row + (uint64_t)j) ? pj * a->rp_keep : 0.0;
            const float *vj = w->v + j * a->Dv;
            for (int64_t d = 0; d < a->Dv; d++) w->acc[d] += pj * vj[d];
        }
    }
    if (mask_out) {
        int64_t mrow = b * mt->strides[0] + h * mt->strides[1] + i * mt->strides[2];
        for (int64_t j = 0; j < a->Sk_max; j++)
            mask_out[mrow + j * mt->strides[3]] =
                (unsigned char)(j < sk && (a->p_drop == 0 || drop_keep(a, &dc, e_row + (uint64_t)j)));
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

static void item(const fwd_args_t *a, scratch_t *w, int64_t b, int64_t h, int64_t row0)
{
    int64_t sq, sk;
    seq_lengths(a, b, &sq, &sk);
    const int32_t *cu_q = a->data[FMHA_TENSOR_CU_SEQLENS_Q];
    const int32_t *cu_k = a->data[FMHA_TENSOR_CU_SEQLENS_KV];
    int64_t row1 = row0 + ROWS < a->Sq_max ? row0 + ROWS : a->Sq_max;
    if (a->data[FMHA_TENSOR_DROPOUT_MASK])
        for (int64_t i = (row0 > sq ? row0 : sq); i < row1; i++) zero_mask_row(a, b, h, i);
    if (row1 > sq) row1 = sq;
    if (row0 >= row1) return;

    const int64_t hk = h / (a->Hq / a->Hk);
    const int64_t k_base = seq_base(a->k.t, a->group, b, cu_k);
    const int64_t v_base = seq_base(a->v.t, a->group, b, cu_k);
    const void *K = a->data[FMHA_TENSOR_K], *V = a->data[FMHA_TENSOR_V];
    for (int64_t j = 0; j < sk; j++) {
        for (int64_t d = 0; d < a->Dqk; d++)
            w->k[j * a->Dqk + d] =
                fmha_load_f32(K, a->k.t->dtype, k_base + j * a->k.tok + hk * a->k.head + d * a->k.dim);
        for (int64_t d = 0; d < a->Dv; d++)
            w->v[j * a->Dv + d] =
                fmha_load_f32(V, a->v.t->dtype, v_base + j * a->v.tok + hk * a->v.head + d * a->v.dim);
    }
    const int64_t q_base = seq_base(a->q.t, a->group, b, cu_q);
    const int64_t o_base = seq_base(a->o.t, a->group, b, cu_q);
    for (int64_t i = row0; i < row1; i++) row(a, w, b, h, i, sq, sk, q_base, o_base);
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

size_t fmha__ref_fwd_workspace(const fmha_problem_t *p, int threads)
{
    return (size_t)threads * scratch_bytes(fmha__i(p, FMHA_PARAM_SEQLEN_KV),
                                           fmha__i(p, FMHA_PARAM_HEAD_DIM_QK),
                                           fmha__i(p, FMHA_PARAM_HEAD_DIM_V));
}

fmha_status_t fmha__ref_fwd(const struct fmha_plan *plan, int stage, void *const *data, void *workspace,
                            struct CUstream_st *stream, char *err, size_t err_len)
{
    (void)stage, (void)stream, (void)err, (void)err_len;
    const fmha_problem_t *p = &plan->problem;
    fwd_args_t a;
    memset(&a, 0, sizeof a);
    a.p = p;
    a.data = data;
    a.group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    a.B = fmha__i(p, FMHA_PARAM_BATCH);
    a.Hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    a.Hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    a.Dqk = fmha__i(p, FMHA_PARAM_HEAD_DIM_QK);
    a.Dv = fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    a.Sq_max = fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    a.Sk_max = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    a.scale = fmha__effective_scale(p);
    a.softcap = fmha__f(p, FMHA_PARAM_SOFTCAP);
    a.p_drop = fmha__f(p, FMHA_PARAM_DROPOUT_P);
    a.rp_keep = 1.0 / (1.0 - a.p_drop);
    /* threshold = min(floor(p * 2^32), 2^32 - 1); p < 1 so the product is < 2^32 */
    double thr = floor(a.p_drop * 4294967296.0);
    a.drop_threshold = thr >= 4294967295.0 ? 4294967295u : (uint32_t)thr;
    uint64_t seed = (uint64_t)fmha__i(p, FMHA_PARAM_DROPOUT_SEED);
    uint64_t offset = (uint64_t)fmha__i(p, FMHA_PARAM_DROPOUT_OFFSET);
    a.seed[0] = (uint32_t)seed, a.seed[1] = (uint32_t)(seed >> 32);
    a.offset[0] = (uint32_t)offset, a.offset[1] = (uint32_t)(offset >> 32);
    a.mask = fmha__problem_mask(p);
    a.q = tok_view(fmha__t(p, FMHA_TENSOR_Q), a.group);
    a.k = tok_view(fmha__t(p, FMHA_TENSOR_K), a.group);
    a.v = tok_view(fmha__t(p, FMHA_TENSOR_V), a.group);
    a.o = tok_view(fmha__t(p, FMHA_TENSOR_O), a.group);

    const int64_t blocks = (a.Sq_max + ROWS - 1) / ROWS;
    const int64_t items = a.B * a.Hq * blocks;
    /* The workspace holds plan->num_threads scratch slices; OpenMP may give fewer
     * threads than asked for, never more. */
#pragma omp parallel num_threads(plan->num_threads)
    {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        scratch_t w = scratch_at(workspace, tid, a.Sk_max, a.Dqk, a.Dv);
#pragma omp for schedule(dynamic)
        for (int64_t it = 0; it < items; it++) {
            int64_t blk = it % blocks, bh = it / blocks;
            item(&a, &w, bh / a.Hq, bh % a.Hq, blk * ROWS);
        }
    }
    return FMHA_STATUS_SUCCESS;
}
