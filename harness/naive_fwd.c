/* SPDX-License-Identifier: MIT */
/* naive_fwd.c: see naive_fwd.h. The math follows REFERENCE.md line by line. */
#include "naive_fwd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/dtype.h" /* fp16/bf16 bit conversions (tested on their own) */
#include "fp8_tensor_core.h"
#include "problem_view.h"

static double load(const tensor_t *t, int64_t off) { return fmha_load_f32(t->data, t->dt, off); }

/* An fp8 input's descale for (b, hk): [1] or [B, Hk]; 1 when absent. */
static double descale(const tensor_t *t, int64_t b, int64_t hk)
{
    if (!t->set) return 1.0;
    return ((const float *)t->data)[t->rank == 1 ? 0 : b * t->str[0] + hk * t->str[1]];
}

/* The low-precision P * V operand of fp8 e4m3 inputs: the kernel's quantisation of the
 * unnormalised e = exp(s - m) as e4m3(256 e) / 256 (docs/semantics.md, "FP8"), divided by
 * the row's sum afterwards. */
static double fp8_p(float e, float sum)
{
    return (double)(fmha_round_to(FMHA_DTYPE_FP8_E4M3, 256.0f * e) / 256.0f / sum);
}

/* Dropout keep bit of element e (REFERENCE.md "Dropout"), one Philox call per element. */
static int keep_bit(uint64_t seed, uint64_t offset, double p, uint64_t e)
{
    uint32_t ctr[4] = {(uint32_t)(e / 4), (uint32_t)((e / 4) >> 32), (uint32_t)offset,
                       (uint32_t)(offset >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t w[4];
    fmha_philox4x32_10(ctr, key, w);
    double thr = floor(p * 4294967296.0);
    uint32_t threshold = thr > 4294967295.0 ? 4294967295u : (uint32_t)thr;
    return w[e % 4] >= threshold;
}

void naive_out_free(naive_out_t *out)
{
    free(out->o);
    free(out->lse);
    free(out->keep);
    memset(out, 0, sizeof *out);
}

/* Query rows per work item (see naive_fwd's loop). */
#define NAIVE_ROWS 32

/* The keys [*lo, *hi) that the row on diagonal c (its index plus the bottom-right shift)
 * may see in sk keys: up to c + right, and from c - left, or from key 0 where there are
 * sink tokens (they obey the right bound only). Windows are at most 2^31 - 1 (the mask
 * grammar), so c +- a window does not overflow. */
static void key_bounds(int64_t c, int64_t sk, int64_t left, int64_t right, int64_t nsink, int64_t *lo, int64_t *hi)
{
    *hi = right < 0 || c + right >= sk ? sk : (c + right < 0 ? 0 : c + right + 1);
    *lo = left < 0 || nsink > 0 || c - left <= 0 ? 0 : (c - left < *hi ? c - left : *hi);
}

int naive_fwd(const fmha_problem_t *p, void *const *data, naive_precision_t prec, naive_out_t *out)
{
    memset(out, 0, sizeof *out);
    const int group = geti(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const int64_t B = geti(p, FMHA_PARAM_BATCH), Hq = geti(p, FMHA_PARAM_NUM_HEADS_Q),
                  Hk = geti(p, FMHA_PARAM_NUM_HEADS_KV), SQ = geti(p, FMHA_PARAM_SEQLEN_Q),
                  SK = geti(p, FMHA_PARAM_SEQLEN_KV), Dqk = geti(p, FMHA_PARAM_HEAD_DIM_QK),
                  Dv = geti(p, FMHA_PARAM_HEAD_DIM_V);
    double scale = getf(p, FMHA_PARAM_SCALE);
    if (scale == 0.0) scale = 1.0 / sqrt((double)Dqk);
    const double cap = getf(p, FMHA_PARAM_SOFTCAP), pdrop = getf(p, FMHA_PARAM_DROPOUT_P);
    const uint64_t seed = (uint64_t)geti(p, FMHA_PARAM_DROPOUT_SEED);
    const uint64_t offset = (uint64_t)geti(p, FMHA_PARAM_DROPOUT_OFFSET);
    const int64_t left = geti(p, FMHA_PARAM_WINDOW_LEFT), right = geti(p, FMHA_PARAM_WINDOW_RIGHT);
    const int64_t nsink = geti(p, FMHA_PARAM_SINK_TOKENS);
    const int bottom_right = geti(p, FMHA_PARAM_MASK_ALIGN) == FMHA_MASK_ALIGN_BOTTOM_RIGHT;

    tensor_t q = get(p, data, FMHA_TENSOR_Q), k = get(p, data, FMHA_TENSOR_K),
             v = get(p, data, FMHA_TENSOR_V), bias = get(p, data, FMHA_TENSOR_BIAS),
             alibi = get(p, data, FMHA_TENSOR_ALIBI_SLOPES), sink = get(p, data, FMHA_TENSOR_SINK);
    const int32_t *cu_q = data[FMHA_TENSOR_CU_SEQLENS_Q], *cu_k = data[FMHA_TENSOR_CU_SEQLENS_KV];
    const int32_t *used = data[FMHA_TENSOR_SEQUSED_KV];
    const int32_t *kv_lens = data[FMHA_TENSOR_SEQLENS_KV]; /* batch mode: keys per sequence */
    tensor_t qdesc = get(p, data, FMHA_TENSOR_Q_DESCALE), kdesc = get(p, data, FMHA_TENSOR_K_DESCALE),
             vdesc = get(p, data, FMHA_TENSOR_V_DESCALE);
    const fmha_dtype_t lowt = q.dt, outt = get(p, data, FMHA_TENSOR_O).dt;
    const int fp8 = lowt == FMHA_DTYPE_FP8_E4M3;

    out->tokens = group ? q.dims[0] : B * SQ;
    out->o = calloc((size_t)(out->tokens * Hq * Dv) + 1, sizeof(double));
    out->lse = calloc((size_t)(out->tokens * Hq) + 1, sizeof(double));
    /* keep bits are [B, Hq, Sq, Sk]: only allocated when dropout or its mask is asked for */
    const int want_keep = pdrop > 0 || fmha_problem_has_tensor(p, FMHA_TENSOR_DROPOUT_MASK);
    if (want_keep) out->keep = calloc((size_t)(B * Hq * SQ * SK) + 1, 1);
    if (!out->o || !out->lse || (want_keep && !out->keep)) {
        naive_out_free(out);
        return -1;
    }

    /* Work items are (b, h, a block of NAIVE_ROWS query rows), so that a case of one or
     * two heads still spreads over every core (a 700 x 1536 fp8 case of two heads took a
     * minute on two threads). An item gathers its rows of Q and the keys its rows can
     * reach; each row's sums are the same, and in the same order, in any split. */
    int64_t sq_max = SQ;
    for (int64_t b = 0; group && b < B; b++)
        if (b == 0 || cu_q[b + 1] - cu_q[b] > sq_max) sq_max = cu_q[b + 1] - cu_q[b];
    const int64_t blocks = (sq_max + NAIVE_ROWS - 1) / NAIVE_ROWS;
    int failed = 0;
#pragma omp parallel for collapse(3) schedule(dynamic) reduction(| : failed)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t blk = 0; blk < blocks; blk++) {
                const int64_t sq = group ? cu_q[b + 1] - cu_q[b] : SQ;
                const int64_t sk = group ? (used ? used[b] : cu_k[b + 1] - cu_k[b]) : kv_lens ? kv_lens[b] : SK;
                const int64_t i0 = blk * NAIVE_ROWS, i1 = i0 + NAIVE_ROWS < sq ? i0 + NAIVE_ROWS : sq;
                if (i0 >= sq) continue;
                const int64_t q0 = group ? cu_q[b] : 0, k0 = group ? cu_k[b] : 0;
                const int64_t hk = h / (Hq / Hk);
                const int64_t dshift = bottom_right ? sk - sq : 0;
                const double qds = descale(&qdesc, b, hk), kds = descale(&kdesc, b, hk), vds = descale(&vdesc, b, hk);
                /* the block's keys [kb0, kb1): from its first row's left bound to its last
                 * row's right bound (both grow with the row), as key_bounds gives them */
                int64_t kb0, kb1, unused0, unused1;
                key_bounds(i0 + dshift, sk, left, right, nsink, &kb0, &unused1);
                key_bounds(i1 - 1 + dshift, sk, left, right, nsink, &unused0, &kb1);
                if (kb1 < kb0) kb1 = kb0;
                double *s = malloc(sizeof(double) * (size_t)(kb1 - kb0 + 1));
                /* the block's Q rows and its KV head's K and V rows (problem_view.h), s, kr
                 * and vr indexed from key kb0 */
                float *qr = malloc(sizeof(float) * (size_t)((i1 - i0) * Dqk + 1)),
                      *kr = malloc(sizeof(float) * (size_t)((kb1 - kb0) * Dqk + 1)),
                      *vr = malloc(sizeof(float) * (size_t)((kb1 - kb0) * Dv + 1));
                if (!s || !qr || !kr || !vr) {
                    free(s), free(qr), free(kr), free(vr);
                    failed = 1;
                    continue;
                }
                gather_rows(&q, group, b, q0 + i0, i1 - i0, h, Dqk, qr);
                gather_rows(&k, group, b, k0 + kb0, kb1 - kb0, hk, Dqk, kr);
                gather_rows(&v, group, b, k0 + kb0, kb1 - kb0, hk, Dv, vr);
                for (int64_t i = i0; i < i1; i++) {
                    const int64_t tq = group ? q0 + i : b * SQ + i; /* row of the dense output */
                    double m = -INFINITY;
                    /* keys [jlo, jhi) hold every key the row can see; the rest score -inf and
                     * add exactly 0 to the sums, so the loops skip them: a 66k-token window
                     * costs its window, not 66k^2 exponentials */
                    int64_t jlo, jhi;
                    key_bounds(i + dshift, sk, left, right, nsink, &jlo, &jhi);
                    for (int64_t j = jlo; j < jhi; j++) {
                        /* the window test, written out; sinks obey the right bound only */
                        int in_right = right < 0 || j <= i + dshift + right;
                        int in_left = left < 0 || j >= i + dshift - left;
                        if (!(in_right && (in_left || j < nsink))) {
                            s[j - kb0] = -INFINITY;
                            continue;
                        }
                        /* the dot product in the precision asked for: double, or the kernel's
                         * fp32, or for e4m3 inputs the tensor core's sums, k32 step by step */
                        double dot = 0;
                        float dotf = 0;
                        const float *qi = qr + (i - i0) * Dqk, *kj = kr + (j - kb0) * Dqk;
                        if (prec == NAIVE_F64)
                            for (int64_t d = 0; d < Dqk; d++) dot += (qds * qi[d]) * (kds * kj[d]);
                        else if (!fp8)
                            for (int64_t d = 0; d < Dqk; d++) dotf += (float)(qds * qi[d]) * (float)(kds * kj[d]);
                        else
                            for (int64_t d = 0; d < Dqk; d += 32)
                                dotf = fp8_tensor_core_step(dotf, qi + d, kj + d, (int)(Dqk - d < 32 ? Dqk - d : 32));
                        if (fp8) dotf *= (float)(qds * kds);
                        double x;
                        if (prec == NAIVE_F64) {
                            x = scale * dot;
                            if (cap > 0) x = cap * tanh(x / cap);
                        } else {
                            float xf = (float)scale * dotf;
                            if (cap > 0) xf = (float)cap * tanhf(xf / (float)cap);
                            x = xf;
                        }
                        if (bias.set) {
                            int64_t bo = (bias.dims[0] == 1 ? 0 : b) * bias.str[0] +
                                         (bias.dims[1] == 1 ? 0 : h) * bias.str[1] + i * bias.str[2] +
                                         j * bias.str[3];
                            x += load(&bias, bo);
                        }
                        if (alibi.set) {
                            double slope = alibi.rank == 1
                                               ? ((const float *)alibi.data)[h * alibi.str[0]]
                                               : ((const float *)alibi.data)[b * alibi.str[0] + h * alibi.str[1]];
                            x += -slope * fabs((double)(i + sk - sq - j));
                        }
                        if (prec == NAIVE_LOWP) x = (float)x;
                        s[j - kb0] = x;
                        if (x > m || isnan(x)) m = x; /* NaN dominates: its row is NaN */
                    }
                    double sinkv = sink.set ? ((const float *)sink.data)[h * sink.str[0]] : -INFINITY;
                    if (sinkv > m) m = sinkv;
                    double *orow = out->o + (tq * Hq + h) * Dv;
                    const uint64_t e0 = (((uint64_t)b * Hq + h) * SQ + i) * SK;
                    for (int64_t j = 0; want_keep && j < sk; j++)
                        out->keep[e0 + j] = (unsigned char)(pdrop == 0 || keep_bit(seed, offset, pdrop, e0 + j));
                    if (m == -INFINITY) {
                        out->lse[tq * Hq + h] = -INFINITY;
                        continue; /* o stays 0 */
                    }
                    double sum = 0;
                    float sumf = 0;
                    for (int64_t j = jlo; j < jhi; j++) {
                        sum += exp(s[j - kb0] - m);
                        sumf += expf((float)(s[j - kb0] - m));
                    }
                    if (sink.set) {
                        sum += exp(sinkv - m);
                        sumf += expf((float)(sinkv - m));
                    }
                    if (prec == NAIVE_LOWP) sum = sumf;
                    out->lse[tq * Hq + h] = prec == NAIVE_F64 ? m + log(sum) : (double)((float)m + logf(sumf));
                    for (int64_t j = jlo; j < jhi; j++) {
                        if (s[j - kb0] == -INFINITY) continue;
                        double pj = prec == NAIVE_F64 ? exp(s[j - kb0] - m) / sum
                                    : fp8             ? fp8_p(expf((float)(s[j - kb0] - m)), sumf)
                                                      : (double)(expf((float)(s[j - kb0] - m)) / sumf);
                        if (pdrop > 0) pj = out->keep[e0 + j] ? pj / (1.0 - pdrop) : 0.0;
                        if (prec == NAIVE_LOWP && !fp8) pj = fmha_round_to(lowt, (float)pj);
                        for (int64_t d = 0; d < Dv; d++) {
                            double vv = vds * (double)vr[(j - kb0) * Dv + d];
                            orow[d] = prec == NAIVE_F64 ? orow[d] + pj * vv
                                                        : (double)((float)orow[d] + (float)pj * (float)vv);
                        }
                    }
                    if (prec == NAIVE_LOWP)
                        for (int64_t d = 0; d < Dv; d++) orow[d] = fmha_round_to(outt, (float)orow[d]);
                }
                free(s), free(qr), free(kr), free(vr);
            }
    if (failed) {
        naive_out_free(out);
        return -1;
    }
    return 0;
}
