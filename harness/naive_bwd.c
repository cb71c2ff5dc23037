/* SPDX-License-Identifier: MIT */
/* naive_bwd.c: see naive_bwd.h. */
#include "naive_bwd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/dtype.h"
#include "problem_view.h"

void naive_grads_free(naive_grads_t *g)
{
    free(g->dq), free(g->dk), free(g->dv), free(g->dbias), free(g->dsink);
    memset(g, 0, sizeof *g);
}

int naive_bwd(const fmha_problem_t *p, void *const *data, naive_precision_t prec, naive_grads_t *g)
{
    memset(g, 0, sizeof *g);
    const int group = geti(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const int64_t B = geti(p, FMHA_PARAM_BATCH), Hq = geti(p, FMHA_PARAM_NUM_HEADS_Q),
                  Hk = geti(p, FMHA_PARAM_NUM_HEADS_KV), SQ = geti(p, FMHA_PARAM_SEQLEN_Q),
                  SK = geti(p, FMHA_PARAM_SEQLEN_KV), Dqk = geti(p, FMHA_PARAM_HEAD_DIM_QK),
                  Dv = geti(p, FMHA_PARAM_HEAD_DIM_V);
    double scale = getf(p, FMHA_PARAM_SCALE);
    if (scale == 0.0) scale = 1.0 / sqrt((double)Dqk);
    const double cap = getf(p, FMHA_PARAM_SOFTCAP), pdrop = getf(p, FMHA_PARAM_DROPOUT_P);
    fmha_mask_t mask = {geti(p, FMHA_PARAM_WINDOW_LEFT), geti(p, FMHA_PARAM_WINDOW_RIGHT),
                        (fmha_mask_align_t)geti(p, FMHA_PARAM_MASK_ALIGN), geti(p, FMHA_PARAM_SINK_TOKENS)};
    const uint64_t seed = (uint64_t)geti(p, FMHA_PARAM_DROPOUT_SEED), offset = (uint64_t)geti(p, FMHA_PARAM_DROPOUT_OFFSET);
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const double thr_d = floor(pdrop * 4294967296.0);
    const uint32_t thr = thr_d > 4294967295.0 ? 4294967295u : (uint32_t)thr_d;
    tensor_t q = get(p, data, FMHA_TENSOR_Q), k = get(p, data, FMHA_TENSOR_K), v = get(p, data, FMHA_TENSOR_V),
             o = get(p, data, FMHA_TENSOR_O), dO = get(p, data, FMHA_TENSOR_DO), bias = get(p, data, FMHA_TENSOR_BIAS),
             alibi = get(p, data, FMHA_TENSOR_ALIBI_SLOPES), sink = get(p, data, FMHA_TENSOR_SINK);
    const int32_t *cu_q = data[FMHA_TENSOR_CU_SEQLENS_Q], *cu_k = data[FMHA_TENSOR_CU_SEQLENS_KV];
    const int32_t *used = data[FMHA_TENSOR_SEQUSED_KV];
    const fmha_dtype_t lowt = q.dt;
    const int low = prec == NAIVE_LOWP;
#define LOW(x) (low ? (double)fmha_round_to(lowt, (float)(x)) : (x))
#define F32(x) (low ? (double)(float)(x) : (x))

    g->tokens_q = group ? q.dims[0] : B * SQ;
    g->tokens_k = group ? k.dims[0] : B * SK;
    g->dq = calloc((size_t)(g->tokens_q * Hq * Dqk) + 1, sizeof(double));
    g->dk = calloc((size_t)(g->tokens_k * Hk * Dqk) + 1, sizeof(double));
    g->dv = calloc((size_t)(g->tokens_k * Hk * Dv) + 1, sizeof(double));
    g->dsink = calloc((size_t)Hq + 1, sizeof(double));
    size_t nbias = bias.set ? (size_t)(bias.dims[0] * bias.dims[1] * bias.dims[2] * bias.dims[3]) : 0;
    g->dbias = calloc(nbias + 1, sizeof(double));
    if (!g->dq || !g->dk || !g->dv || !g->dsink || !g->dbias) {
        naive_grads_free(g);
        return -1;
    }
    /* dk, dv and dsink receive sums over several query heads and sequences: threads take
     * whole KV heads (their query heads and every sequence), so each sum is added by one
     * thread in the serial order and the result is bitwise the serial one. dbias may be
     * shared across heads: serial then. */
    const int64_t group_size = Hq / Hk;
    int failed = 0;
#pragma omp parallel for schedule(dynamic) reduction(| : failed) if (!bias.set)
    for (int64_t kv_head = 0; kv_head < Hk; kv_head++)
        for (int64_t b = 0; b < B; b++)
        for (int64_t h = kv_head * group_size; h < (kv_head + 1) * group_size; h++) {
            const int64_t sq = group ? cu_q[b + 1] - cu_q[b] : SQ;
            const int64_t sk = group ? (used ? used[b] : cu_k[b + 1] - cu_k[b]) : SK;
            const int64_t q0 = group ? cu_q[b] : 0, k0 = group ? cu_k[b] : 0, hk = h / (Hq / Hk);
            const int64_t tq0 = group ? q0 : b * SQ, tk0 = group ? k0 : b * SK;
            const double sinkv = sink.set ? ((const float *)sink.data)[h * sink.str[0]] : -INFINITY;
            double *s = malloc(sizeof(double) * (size_t)(sk + 1)), *dcap = malloc(sizeof(double) * (size_t)(sk + 1));
            float *qr = malloc(sizeof(float) * (size_t)(sq * Dqk + 1)), *dor = malloc(sizeof(float) * (size_t)(sq * Dv + 1)),
                  *orow = malloc(sizeof(float) * (size_t)(sq * Dv + 1)), *kr = malloc(sizeof(float) * (size_t)(sk * Dqk + 1)),
                  *vr = malloc(sizeof(float) * (size_t)(sk * Dv + 1));
            if (!s || !dcap || !qr || !dor || !orow || !kr || !vr) {
                free(s), free(dcap), free(qr), free(dor), free(orow), free(kr), free(vr);
                failed = 1;
                continue;
            }
            gather_rows(&q, group, b, q0, sq, h, Dqk, qr);
            gather_rows(&dO, group, b, q0, sq, h, Dv, dor);
            gather_rows(&o, group, b, q0, sq, h, Dv, orow);
            gather_rows(&k, group, b, k0, sk, hk, Dqk, kr);
            gather_rows(&v, group, b, k0, sk, hk, Dv, vr);
            for (int64_t i = 0; i < sq; i++) {
                double m = sinkv;
                for (int64_t j = 0; j < sk; j++) {
                    s[j] = -INFINITY;
                    if (!fmha_mask_visible(&mask, sq, sk, i, j)) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < Dqk; d++)
                        dot += F32((double)qr[i * Dqk + d] * (double)kr[j * Dqk + d]);
                    double x = F32(scale * dot);
                    dcap[j] = 1.0;
                    if (cap > 0) {
                        double t = tanh(x / cap);
                        x = cap * t;
                        dcap[j] = 1.0 - t * t;
                    }
                    if (bias.set)
                        x += fmha_load_f32(bias.data, bias.dt,
                                           (bias.dims[0] == 1 ? 0 : b) * bias.str[0] + (bias.dims[1] == 1 ? 0 : h) * bias.str[1] +
                                               i * bias.str[2] + j * bias.str[3]);
                    if (alibi.set) {
                        double slope = alibi.rank == 1 ? ((const float *)alibi.data)[h * alibi.str[0]]
                                                       : ((const float *)alibi.data)[b * alibi.str[0] + h * alibi.str[1]];
                        x -= slope * fabs((double)(i + sk - sq - j));
                    }
                    s[j] = F32(x);
                    if (s[j] > m) m = s[j];
                }
                if (m == -INFINITY) continue; /* no key, no sink: no gradient */
                double sum = sink.set ? exp(sinkv - m) : 0.0;
                for (int64_t j = 0; j < sk; j++)
                    if (s[j] > -INFINITY) sum += exp(s[j] - m);
                double Di = 0;
                for (int64_t d = 0; d < Dv; d++) Di += F32((double)dor[i * Dv + d] * (double)orow[i * Dv + d]);
                if (sink.set) g->dsink[h] -= exp(sinkv - m) / sum * Di;
                for (int64_t j = 0; j < sk; j++) {
                    if (s[j] == -INFINITY) continue;
                    const double pij = F32(exp(s[j] - m) / sum);
                    double z = 1.0;
                    if (pdrop > 0) {
                        uint64_t e = (((uint64_t)b * (uint64_t)Hq + (uint64_t)h) * (uint64_t)SQ + (uint64_t)i) * (uint64_t)SK + (uint64_t)j;
                        uint32_t ctr[4] = {(uint32_t)(e / 4), (uint32_t)((e / 4) >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)}, w[4];
                        fmha_philox4x32_10(ctr, key, w);
                        z = w[e % 4] >= thr ? 1.0 / (1.0 - pdrop) : 0.0;
                    }
                    double dp = 0;
                    for (int64_t d = 0; d < Dv; d++) dp += F32((double)dor[i * Dv + d] * (double)vr[j * Dv + d]);
                    const double ds = F32(pij * (dp * z - Di));
                    const double dsl = LOW(ds * dcap[j]), pl = LOW(pij * z);
                    for (int64_t d = 0; d < Dqk; d++) {
                        g->dq[((tq0 + i) * Hq + h) * Dqk + d] += F32(scale * dsl * (double)kr[j * Dqk + d]);
                        g->dk[((tk0 + j) * Hk + hk) * Dqk + d] += F32(scale * dsl * (double)qr[i * Dqk + d]);
                    }
                    for (int64_t d = 0; d < Dv; d++) g->dv[((tk0 + j) * Hk + hk) * Dv + d] += F32(pl * (double)dor[i * Dv + d]);
                    if (bias.set)
                        g->dbias[(((bias.dims[0] == 1 ? 0 : b) * bias.dims[1] + (bias.dims[1] == 1 ? 0 : h)) * bias.dims[2] + i) *
                                     bias.dims[3] + j] += ds;
                }
            }
            free(s), free(dcap), free(qr), free(dor), free(orow), free(kr), free(vr);
        }
    if (failed) {
        naive_grads_free(g);
        return -1;
    }
    if (low) { /* the gradients are stored in the tensors' types */
        const size_t nq = (size_t)(g->tokens_q * Hq * Dqk), nk = (size_t)(g->tokens_k * Hk * Dqk),
                     nv = (size_t)(g->tokens_k * Hk * Dv);
        for (size_t i = 0; i < nq; i++) g->dq[i] = fmha_round_to(lowt, (float)g->dq[i]);
        for (size_t i = 0; i < nk; i++) g->dk[i] = fmha_round_to(lowt, (float)g->dk[i]);
        for (size_t i = 0; i < nv; i++) g->dv[i] = fmha_round_to(lowt, (float)g->dv[i]);
        for (size_t i = 0; i < nbias; i++) g->dbias[i] = fmha_round_to(bias.dt, (float)g->dbias[i]);
        for (int64_t h = 0; h < Hq; h++) g->dsink[h] = (float)g->dsink[h];
    }
#undef LOW
#undef F32
    return 0;
}
