/* SPDX-License-Identifier: MIT */
/* fwd_case.c: see fwd_case.h. */
#include "fwd_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/dtype.h" /* fp16/bf16 bit conversions */
#include "fwd_case_impl.h"
#include "naive_fwd.h"
#include "runner.h" /* run_now_ms */

void fwd_config_default(fwd_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->mode = FMHA_MODE_BATCH;
    c->b = 2, c->h = 8, c->h_k = 8, c->d = 128, c->d_v = 128, c->s = 128, c->s_k = 128;
    c->dtype = FMHA_DTYPE_FP16;
    c->descale = 2;
    c->iperm = 1, c->operm = 1;
    c->drop_seed = 1;
    c->seed = 11939;
}

/* splitmix64: small, good enough for test data, and reproducible from one seed. */
#define SPLITMIX_STEP 0x9E3779B97F4A7C15ull /* the state's step a draw (SplitMix64) */

uint64_t fwd_case_next_u64(uint64_t *st)
{
    uint64_t z = (*st += SPLITMIX_STEP);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double fwd_case_uniform(uint64_t *st, double lo, double hi)
{
    return lo + (hi - lo) * (double)(fwd_case_next_u64(st) >> 11) * 0x1.0p-53;
}

int fwd_case_alloc_buffer(buffer_t *b, fmha_dtype_t dt, size_t elems, int is_output)
{
    b->dt = dt;
    b->elems = elems;
    b->data = malloc(elems * fmha_dtype_size(dt) + 1);
    if (is_output) b->logical = calloc(elems + 1, 1);
    return b->data && (!is_output || b->logical);
}

void fwd_case_free_buffer(buffer_t *b)
{
    free(b->data);
    free(b->logical);
    memset(b, 0, sizeof *b);
}

/* Token-major tensor [B, S, H, D] (batch) or [T, H, D] (group) in BHSD (perm = 1) or BSHD
 * order, with pad extra elements after each D row. Sets dims/strides, returns elements. */
static size_t layout(int group, int64_t B, int64_t S, int64_t H, int64_t D, int perm, int64_t pad,
                     int *rank, int64_t *dims, int64_t *str)
{
    const int64_t Dp = D + pad;
    int64_t sb, ss, sh;
    if (perm) {
        ss = Dp, sh = S * Dp, sb = H * S * Dp;
    } else {
        sh = Dp, ss = H * Dp, sb = S * H * Dp;
    }
    if (group) {
        *rank = 3;
        dims[0] = S, dims[1] = H, dims[2] = D;
        str[0] = ss, str[1] = sh, str[2] = 1;
        return (size_t)(H * S * Dp);
    }
    *rank = 4;
    dims[0] = B, dims[1] = S, dims[2] = H, dims[3] = D;
    str[0] = sb, str[1] = ss, str[2] = sh, str[3] = 1;
    return (size_t)(B * H * S * Dp);
}

void fwd_case_mark_logical(buffer_t *b, int rank, const int64_t *dims, const int64_t *str)
{
    int64_t idx[FMHA_MAX_RANK] = {0};
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0) return;
    for (;;) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++) off += idx[d] * str[d];
        b->logical[off] = 1;
        int d = rank - 1;
        while (d >= 0 && ++idx[d] == dims[d]) idx[d--] = 0;
        if (d < 0) return;
    }
}

/* SplitMix64 steps its state by a constant, so element i's draw depends only on the
 * start state and i: large buffers (numerics' 9.2 GB padded cache) fill in parallel with
 * exactly the serial stream's values, and the state ends where the serial loop left it. */
void fwd_case_fill_random(buffer_t *b, uint64_t *st, double lo, double hi)
{
    const uint64_t st0 = *st;
    const int64_t n = (int64_t)b->elems;
#pragma omp parallel for schedule(static) if (n > (1 << 20))
    for (int64_t i = 0; i < n; i++) {
        uint64_t s = st0 + (uint64_t)i * SPLITMIX_STEP;
        fmha_store_f32(b->data, b->dt, i, (float)fwd_case_uniform(&s, lo, hi));
    }
    *st = st0 + (uint64_t)n * SPLITMIX_STEP;
}

static fmha_status_t set_tensor(fwd_case_t *fc, fmha_tensor_role_t role, fmha_dtype_t dt, int rank,
                                const int64_t *dims, const int64_t *str, size_t elems, int is_output,
                                char *why, size_t why_len)
{
    if (fc->cfg.describe_only) {
        fmha_status_t st = fmha_problem_set_tensor(fc->p, role, dt, rank, dims, str);
        if (st) snprintf(why, why_len, "%s", fmha_problem_last_error(fc->p));
        return st;
    }
    if (!fwd_case_alloc_buffer(&fc->buf[role], dt, elems, is_output)) {
        snprintf(why, why_len, "out of memory for tensor %s (%zu elements)",
                 fmha_tensor_role_name(role), elems);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    fmha_status_t st = fmha_problem_set_tensor(fc->p, role, dt, rank, dims, str);
    if (st) {
        snprintf(why, why_len, "%s", fmha_problem_last_error(fc->p));
        return st;
    }
    if (is_output) { /* mark with the strides the problem holds (str may be NULL) */
        fmha_dtype_t got_dt;
        int got_rank;
        int64_t got_dims[FMHA_MAX_RANK], got_str[FMHA_MAX_RANK];
        fmha_problem_get_tensor(fc->p, role, &got_dt, &got_rank, got_dims, got_str);
        fwd_case_mark_logical(&fc->buf[role], got_rank, got_dims, got_str);
    }
    return FMHA_STATUS_SUCCESS;
}

const char *fwd_case_key(const fwd_case_t *fc) { return fc->key; }

/* FNV-1a over n lengths (none when the list is absent). */
static uint64_t hash_lengths(uint64_t h, const int32_t *v, int64_t n)
{
    for (int64_t i = 0; v && i < n; i++)
        for (int byte = 0; byte < 4; byte++) h = (h ^ (((uint32_t)v[i] >> (8 * byte)) & 0xffu)) * 0x100000001b3ull;
    return h;
}

/* fwd_case_key, made at create while the config's length lists are the caller's. */
static char *make_key(const fwd_config_t *c)
{
    const int n = fwd_config_cli(c, NULL, 0);
    char *key = n >= 0 ? malloc((size_t)n + 32) : NULL;
    if (!key) return NULL;
    fwd_config_cli(c, key, (size_t)n + 1);
    uint64_t h = 0xcbf29ce484222325ull;
    h = hash_lengths(h, c->mode == FMHA_MODE_GROUP ? c->seqlens_q : NULL, c->b);
    h = hash_lengths(h, c->seqlens_k, c->b);
    h = hash_lengths(h, c->seqused_k, c->b);
    snprintf(key + n, 32, " #%016llx", (unsigned long long)h);
    return key;
}

fmha_status_t fwd_case_create(const fwd_config_t *c, fwd_case_t **out, char *why, size_t why_len)
{
    *out = NULL;
    fwd_case_t *fc = calloc(1, sizeof *fc);
    if (!fc) return FMHA_STATUS_ALLOC_FAILED;
    fc->cfg = *c;
    fmha_status_t st = FMHA_STATUS_ALLOC_FAILED;
    if (!(fc->key = make_key(c))) goto fail;
    if ((st = fmha_problem_create(&fc->p))) goto fail;
    const int group = c->mode == FMHA_MODE_GROUP;
    const int fp8 = c->dtype == FMHA_DTYPE_FP8_E4M3;
    uint64_t rng = c->seed;

    if (group) {
        if (!c->seqlens_q || !c->seqlens_k || c->b > FWD_CASE_MAX_BATCH) {
            snprintf(why, why_len, "group mode needs per-sequence lengths (at most %d sequences)",
                     FWD_CASE_MAX_BATCH);
            st = FMHA_STATUS_INVALID_ARGUMENT;
            goto fail;
        }
        fc->cu_q = malloc(sizeof(int32_t) * (size_t)(c->b + 1));
        fc->cu_k = malloc(sizeof(int32_t) * (size_t)(c->b + 1));
        if (!fc->cu_q || !fc->cu_k) {
            st = FMHA_STATUS_ALLOC_FAILED;
            goto fail;
        }
        fc->cu_q[0] = fc->cu_k[0] = 0;
        int64_t tq = 0, tk = 0; /* cu_seqlens are int32: the totals must fit (found by fuzz_cli_flags) */
        for (int64_t b = 0; b < c->b; b++) {
            tq += c->seqlens_q[b], tk += c->seqlens_k[b];
            if (tq > INT32_MAX || tk > INT32_MAX) {
                snprintf(why, why_len,
                         "group mode: the first %lld sequences hold %lld query and %lld key tokens; cu_seqlens are "
                         "int32, so each total must be at most 2^31 - 1",
                         (long long)b + 1, (long long)tq, (long long)tk);
                st = FMHA_STATUS_INVALID_ARGUMENT;
                goto fail;
            }
            fc->cu_q[b + 1] = (int32_t)tq;
            fc->cu_k[b + 1] = (int32_t)tk;
        }
        fc->total_q = fc->cu_q[c->b];
        fc->total_k = fc->cu_k[c->b];
    }

#define SET(k, v)                                          \
    do {                                                   \
        if ((st = fmha_problem_set_i64(fc->p, k, v))) goto param_fail; \
    } while (0)
#define SETF(k, v)                                         \
    do {                                                   \
        if ((st = fmha_problem_set_f64(fc->p, k, v))) goto param_fail; \
    } while (0)
    SET(FMHA_PARAM_FAMILY, c->family);
    SET(FMHA_PARAM_MODE, c->mode);
    SET(FMHA_PARAM_BATCH, c->b);
    SET(FMHA_PARAM_NUM_HEADS_Q, c->h);
    SET(FMHA_PARAM_NUM_HEADS_KV, c->h_k);
    SET(FMHA_PARAM_SEQLEN_Q, c->s);
    SET(FMHA_PARAM_SEQLEN_KV, c->s_k);
    SET(FMHA_PARAM_HEAD_DIM_QK, c->d);
    SET(FMHA_PARAM_HEAD_DIM_V, c->d_v);
    SETF(FMHA_PARAM_SCALE, c->scale);
    SETF(FMHA_PARAM_SOFTCAP, c->softcap);
    SETF(FMHA_PARAM_DROPOUT_P, c->p_drop);
    SET(FMHA_PARAM_DROPOUT_SEED, (int64_t)c->drop_seed);
    SET(FMHA_PARAM_DROPOUT_OFFSET, (int64_t)c->drop_offset);
    if ((st = fmha_problem_set_mask(fc->p, c->mask ? c->mask : "0"))) goto param_fail;
#undef SET
#undef SETF

    /* Dimensions of a problem that validation will reject may be absurd: only allocate
     * for problems that pass. */
    {
        int64_t dq[6], sq[6], dk[6], sk[6], dv[6], sv[6], dox[6], so[6];
        int rq, rk, rv, ro;
        const int64_t Sq = group ? fc->total_q : c->s, Sk = group ? fc->total_k : c->s_k;
        if (c->b <= 0 || c->h <= 0 || c->h_k <= 0 || c->d <= 0 || c->d_v <= 0 || Sq < 0 || Sk < 0 ||
            c->pad < 0) {
            snprintf(why, why_len, "dims must be positive (b %lld, h %lld, h_k %lld, d %lld, d_v %lld)",
                     (long long)c->b, (long long)c->h, (long long)c->h_k, (long long)c->d,
                     (long long)c->d_v);
            st = FMHA_STATUS_INVALID_ARGUMENT;
            goto fail;
        }
        size_t nq = layout(group, c->b, Sq, c->h, c->d, c->iperm, c->pad, &rq, dq, sq);
        size_t nk = layout(group, c->b, Sk, c->h_k, c->d, c->iperm, c->pad, &rk, dk, sk);
        size_t nv = layout(group, c->b, Sk, c->h_k, c->d_v, c->iperm, c->pad, &rv, dv, sv);
        size_t no = layout(group, c->b, Sq, c->h, c->d_v, c->operm, c->pad, &ro, dox, so);
        if ((st = set_tensor(fc, FMHA_TENSOR_Q, c->dtype, rq, dq, sq, nq, 0, why, why_len)) ||
            (st = set_tensor(fc, FMHA_TENSOR_K, c->dtype, rk, dk, sk, nk, 0, why, why_len)) ||
            (st = set_tensor(fc, FMHA_TENSOR_V, c->dtype, rv, dv, sv, nv, 0, why, why_len)) ||
            (st = set_tensor(fc, FMHA_TENSOR_O, fp8 ? FMHA_DTYPE_BF16 : c->dtype, ro, dox, so, no, 1, why, why_len)))
            goto fail;
    }
    if (fp8 && c->descale) { /* q_descale, k_descale, v_descale: [1] (descale 1) or [B, Hk] (2) */
        const fmha_tensor_role_t roles[3] = {FMHA_TENSOR_Q_DESCALE, FMHA_TENSOR_K_DESCALE, FMHA_TENSOR_V_DESCALE};
        const int per_tensor = c->descale == 1;
        const int64_t dims[2] = {per_tensor ? 1 : c->b, c->h_k};
        for (int i = 0; i < 3; i++)
            if ((st = set_tensor(fc, roles[i], FMHA_DTYPE_FP32, per_tensor ? 1 : 2, dims, NULL,
                                 per_tensor ? 1 : (size_t)(c->b * c->h_k), 0, why, why_len)))
                goto fail;
    }
    if (c->lse) {
        int64_t dims[3] = {c->b, c->h, c->s}, dims_g[2] = {c->h, fc->total_q};
        if (group)
            st = set_tensor(fc, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 2, dims_g, NULL,
                            (size_t)(c->h * fc->total_q), 1, why, why_len);
        else
            st = set_tensor(fc, FMHA_TENSOR_LSE, FMHA_DTYPE_FP32, 3, dims, NULL,
                            (size_t)(c->b * c->h * c->s), 1, why, why_len);
        if (st) goto fail;
    }
    if (c->bias >= BIAS_ELEM_11 && c->bias <= BIAS_ELEM_BH) {
        int64_t dims[4] = {c->bias == BIAS_ELEM_BH ? c->b : 1, c->bias == BIAS_ELEM_11 ? 1 : c->h,
                           c->s, c->s_k};
        size_t n = (size_t)(dims[0] * dims[1] * dims[2] * dims[3]);
        if ((st = set_tensor(fc, FMHA_TENSOR_BIAS, c->bias_fp32 ? FMHA_DTYPE_FP32 : c->dtype, 4, dims, NULL, n, 0, why,
                             why_len)))
            goto fail;
    } else if (c->bias == BIAS_ALIBI_H || c->bias == BIAS_ALIBI_BH) {
        int64_t dims[2] = {c->b, c->h};
        int bh = c->bias == BIAS_ALIBI_BH;
        if ((st = set_tensor(fc, FMHA_TENSOR_ALIBI_SLOPES, FMHA_DTYPE_FP32, bh ? 2 : 1,
                             bh ? dims : dims + 1, NULL, (size_t)(bh ? c->b * c->h : c->h), 0, why,
                             why_len)))
            goto fail;
    }
    if (c->sink) {
        int64_t dims[1] = {c->h};
        if ((st = set_tensor(fc, FMHA_TENSOR_SINK, FMHA_DTYPE_FP32, 1, dims, NULL, (size_t)c->h, 0,
                             why, why_len)))
            goto fail;
    }
    if (c->dropout_mask) {
        int64_t dims[4] = {c->b, c->h, c->s, c->s_k};
        if ((st = set_tensor(fc, FMHA_TENSOR_DROPOUT_MASK, FMHA_DTYPE_UINT8, 4, dims, NULL,
                             (size_t)(c->b * c->h * c->s * c->s_k), 1, why, why_len)))
            goto fail;
    }
    if (group) {
        int64_t dims[1] = {c->b + 1};
        if ((st = fmha_problem_set_tensor(fc->p, FMHA_TENSOR_CU_SEQLENS_Q, FMHA_DTYPE_INT32, 1, dims, NULL)) ||
            (st = fmha_problem_set_tensor(fc->p, FMHA_TENSOR_CU_SEQLENS_KV, FMHA_DTYPE_INT32, 1, dims, NULL)))
            goto param_fail;
        if (c->seqused_k) {
            dims[0] = c->b;
            fc->used_k = malloc(sizeof(int32_t) * (size_t)c->b);
            if (!fc->used_k) {
                st = FMHA_STATUS_ALLOC_FAILED;
                goto fail;
            }
            memcpy(fc->used_k, c->seqused_k, sizeof(int32_t) * (size_t)c->b);
            if ((st = fmha_problem_set_tensor(fc->p, FMHA_TENSOR_SEQUSED_KV, FMHA_DTYPE_INT32, 1, dims, NULL)))
                goto param_fail;
        }
    }

    if (c->describe_only) goto kv_setup;
    /* Inputs: uniform in [-1, 1) (bias too), sinks in [-1, 2), ALiBi slopes 2^(-8(h+1)/H). */
    const double qs = c->q_scale > 0 ? c->q_scale : 1.0;
    if (fp8 && c->descale) {
        /* as a quantiser would write them: e4m3 values over most of the format's range
         * (+-448) and descales of about amax / 448, each (batch, KV head) its own */
        fwd_case_fill_random(&fc->buf[FMHA_TENSOR_Q], &rng, -400 * qs, 400 * qs);
        fwd_case_fill_random(&fc->buf[FMHA_TENSOR_K], &rng, -400, 400);
        fwd_case_fill_random(&fc->buf[FMHA_TENSOR_V], &rng, -400, 400);
        const fmha_tensor_role_t roles[3] = {FMHA_TENSOR_Q_DESCALE, FMHA_TENSOR_K_DESCALE, FMHA_TENSOR_V_DESCALE};
        for (int i = 0; i < 3; i++)
            if (fc->buf[roles[i]].data) fwd_case_fill_random(&fc->buf[roles[i]], &rng, 0.5 / 400, 1.5 / 400);
    } else {
        fwd_case_fill_random(&fc->buf[FMHA_TENSOR_Q], &rng, -qs, qs);
        fwd_case_fill_random(&fc->buf[FMHA_TENSOR_K], &rng, -1, 1);
        fwd_case_fill_random(&fc->buf[FMHA_TENSOR_V], &rng, -1, 1);
    }
    if (c->poison) { /* one non-finite element: the fourth of the buffer (row 0, dim 3) */
        const fmha_tensor_role_t role = c->poison == POISON_NAN_Q   ? FMHA_TENSOR_Q
                                        : c->poison == POISON_NAN_K ? FMHA_TENSOR_K
                                                                    : FMHA_TENSOR_V;
        buffer_t *b = &fc->buf[role];
        int64_t at = b->elems > 3 ? 3 : (int64_t)b->elems - 1;
        if (c->poison_token > 0) { /* dim 3 of head 0 at that token: the token's stride */
            fmha_dtype_t dt;
            int rank = 0;
            int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
            if ((st = fmha_problem_get_tensor(fc->p, role, &dt, &rank, dims, str))) goto param_fail;
            /* Past sequence 0's tokens the element would belong to another sequence or head,
             * or lie outside the buffer: the case would test something else than it says. */
            const char *name = role == FMHA_TENSOR_Q ? "q" : role == FMHA_TENSOR_K ? "k" : "v";
            const int32_t *lens = role == FMHA_TENSOR_Q ? c->seqlens_q : c->seqlens_k;
            const int64_t tokens = rank < 3                                       ? 0
                                   : c->mode == FMHA_MODE_GROUP && lens && c->b > 0 ? lens[0]
                                                                                  : dims[rank - 3];
            if (role != FMHA_TENSOR_Q && c->page_size > 0) {
                snprintf(why, why_len, "-poison_token=%lld: %s is a paged cache; the token rule is for contiguous tensors",
                         (long long)c->poison_token, name);
                st = FMHA_STATUS_INVALID_ARGUMENT;
                goto fail;
            }
            if (c->poison_token >= tokens) {
                snprintf(why, why_len, "-poison_token=%lld: sequence 0 of %s has %lld tokens; the poisoned token must be one of them",
                         (long long)c->poison_token, name, (long long)tokens);
                st = FMHA_STATUS_OUT_OF_RANGE;
                goto fail;
            }
            at = c->poison_token * str[rank - 3] + 3;
        }
        if (b->elems && at >= 0 && at < (int64_t)b->elems)
            fmha_store_f32(b->data, b->dt, at, c->poison == POISON_INF_V ? INFINITY : NAN);
    }
    if (fc->buf[FMHA_TENSOR_BIAS].data) fwd_case_fill_random(&fc->buf[FMHA_TENSOR_BIAS], &rng, -1, 1);
    if (fc->buf[FMHA_TENSOR_SINK].data) fwd_case_fill_random(&fc->buf[FMHA_TENSOR_SINK], &rng, -1, 2);
    buffer_t *al = &fc->buf[FMHA_TENSOR_ALIBI_SLOPES];
    for (size_t i = 0; al->data && i < al->elems; i++)
        ((float *)al->data)[i] =
            (float)(pow(2.0, -8.0 * (double)((int64_t)i % c->h + 1) / (double)c->h) * fwd_case_uniform(&rng, 0.5, 1.5));
kv_setup:
    if ((c->family != FMHA_FAMILY_FWD || c->s_knew > 0) && (st = fwd_case_kv_setup(fc, why, why_len))) goto fail;
    *out = fc;
    return FMHA_STATUS_SUCCESS;

param_fail:
    snprintf(why, why_len, "%s", fmha_problem_last_error(fc->p));
fail:
    fwd_case_destroy(fc);
    return st;
}

void fwd_case_destroy(fwd_case_t *fc)
{
    if (!fc) return;
    for (int i = 0; i < fc->ndmap; i++) fmha_context_free(fc->dev, fc->dmap[i].dev);
    if (fc->dev && fc->workspace) fmha_context_free(fc->dev, fc->workspace), fc->workspace = NULL;
    fwd_case_kv_destroy(fc);
    for (int r = 0; r < NROLES; r++) fwd_case_free_buffer(&fc->buf[r]);
    free(fc->cu_q);
    free(fc->cu_k);
    free(fc->used_k);
    free(fc->workspace);
    free(fc->key);
    fmha_problem_destroy(fc->p);
    free(fc);
}

const fmha_problem_t *fwd_case_problem(const fwd_case_t *fc) { return fc->p; }

const void *fwd_case_output(const fwd_case_t *fc, size_t *elems)
{
    *elems = fc->buf[FMHA_TENSOR_O].elems;
    return fc->buf[FMHA_TENSOR_O].data;
}

void *fwd_case_role_data(const fwd_case_t *fc, int r)
{
    if (r == FMHA_TENSOR_CU_SEQLENS_Q) return fc->cu_q;
    if (r == FMHA_TENSOR_CU_SEQLENS_KV) return fc->cu_k;
    if (r == FMHA_TENSOR_SEQUSED_KV) return fc->used_k;
    return fc->buf[r].data;
}

/* Poison: a NaN with a payload arithmetic never makes (fp32 0x7fededed, fp16 0x7eed,
 * bf16 0x7fed) in every float output element, padding included; 0xAA in byte outputs.
 * A distinct payload, not any NaN: outputs of inputs holding NaN on purpose
 * (fwd_config_t.poison) are NaN too, yet written. */
static size_t poison_bits(fmha_dtype_t dt, unsigned char bits[4])
{
    const uint32_t f32 = 0x7fedededu;
    const uint16_t f16 = 0x7eed, b16 = 0x7fed;
    if (dt == FMHA_DTYPE_FP32) return memcpy(bits, &f32, 4), 4;
    if (dt == FMHA_DTYPE_FP16) return memcpy(bits, &f16, 2), 2;
    if (dt == FMHA_DTYPE_BF16) return memcpy(bits, &b16, 2), 2;
    return 0;
}

void fwd_case_poison(buffer_t *b)
{
    if (b->dt == FMHA_DTYPE_UINT8) {
        memset(b->data, 0xAA, b->elems);
        return;
    }
    unsigned char bits[4];
    const size_t size = poison_bits(b->dt, bits);
    for (size_t i = 0; i < b->elems; i++) {
        if (size) memcpy((unsigned char *)b->data + i * size, bits, size);
        else fmha_store_f32(b->data, b->dt, (int64_t)i, NAN);
    }
}

static int is_poison(const buffer_t *b, size_t i)
{
    if (b->dt == FMHA_DTYPE_UINT8) return ((const unsigned char *)b->data)[i] == 0xAA;
    unsigned char bits[4];
    const size_t size = poison_bits(b->dt, bits);
    if (size) return memcmp((const unsigned char *)b->data + i * size, bits, size) == 0;
    return isnan(fmha_load_f32(b->data, b->dt, (int64_t)i));
}

size_t fwd_case_role_bytes(const fwd_case_t *fc, int r)
{
    if (r == FMHA_TENSOR_CU_SEQLENS_Q || r == FMHA_TENSOR_CU_SEQLENS_KV) return sizeof(int32_t) * (size_t)(fc->cfg.b + 1);
    if (r == FMHA_TENSOR_SEQUSED_KV) return sizeof(int32_t) * (size_t)fc->cfg.b;
    return fc->buf[r].elems * fmha_dtype_size(fc->buf[r].dt);
}

/* ---------------------------------------------------------- device copies */

void *fwd_case_dev_of(const fwd_case_t *fc, const void *host)
{
    for (int i = 0; i < fc->ndmap; i++)
        if (fc->dmap[i].host == host) return fc->dmap[i].dev;
    return NULL;
}

/* A device copy of a host buffer (once per buffer), uploaded. */
fmha_status_t fwd_case_dev_register(fwd_case_t *fc, const void *host, size_t bytes, const char *what, char *why,
                                    size_t why_len)
{
    if (!host || fwd_case_dev_of(fc, host)) return FMHA_STATUS_SUCCESS;
    if (fc->ndmap == MAX_DEVICE_BUFFERS) {
        snprintf(why, why_len, "more than %d device buffers", MAX_DEVICE_BUFFERS);
        return FMHA_STATUS_INTERNAL;
    }
    void *d = NULL;
    fmha_status_t st = fmha_context_alloc(fc->dev, bytes, &d);
    if (!st) {
        fc->dmap[fc->ndmap].host = host, fc->dmap[fc->ndmap].dev = d, fc->dmap[fc->ndmap].bytes = bytes;
        fc->ndmap++;
        st = fmha_context_copy(fc->dev, d, host, bytes, 1);
    }
    if (st) snprintf(why, why_len, "device buffer for %s: %s", what, fmha_context_last_error(fc->dev));
    return st;
}

/* Copy a buffer between host and its device copy (no-op when not bound). */
fmha_status_t fwd_case_dev_sync(fwd_case_t *fc, void *host, int to_device)
{
    for (int i = 0; fc->dev && i < fc->ndmap; i++)
        if (fc->dmap[i].host == host)
            return to_device ? fmha_context_copy(fc->dev, fc->dmap[i].dev, host, fc->dmap[i].bytes, 1)
                             : fmha_context_copy(fc->dev, host, fc->dmap[i].dev, fc->dmap[i].bytes, 0);
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fwd_case_bind(fwd_case_t *fc, fmha_context_t *ctx, char *why, size_t why_len)
{
    if (fmha_context_backend(ctx) != FMHA_BACKEND_CUDA) return FMHA_STATUS_SUCCESS;
    fc->dev = ctx;
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    for (int r = 1; !st && r < NROLES; r++)
        if (fmha_problem_has_tensor(fc->p, (fmha_tensor_role_t)r))
            st = fwd_case_dev_register(fc, fwd_case_role_data(fc, r), fwd_case_role_bytes(fc, r),
                              fmha_tensor_role_name((fmha_tensor_role_t)r), why, why_len);
    const buffer_t *app[] = {&fc->app.k_new, &fc->app.v_new, &fc->app.cos, &fc->app.sin, &fc->app.q_in, &fc->app.lens_old};
    for (size_t i = 0; !st && i < sizeof app / sizeof app[0]; i++)
        st = fwd_case_dev_register(fc, app[i]->data, app[i]->elems * fmha_dtype_size(app[i]->dt), "appendkv input", why, why_len);
    return st;
}

/* The pointers of every role of problem p (host[role], or its device copy when bound)
 * and a large-enough workspace. */
static fmha_status_t prepare_run(fwd_case_t *fc, const fmha_problem_t *p, void *const *host, const fmha_plan_t *plan,
                                 fmha_tensor_ptr_t *ptrs, size_t *n)
{
    *n = 0;
    for (int r = 1; r < NROLES; r++) {
        if (!fmha_problem_has_tensor(p, (fmha_tensor_role_t)r)) continue;
        ptrs[*n].role = (fmha_tensor_role_t)r;
        ptrs[*n].data = fc->dev ? fwd_case_dev_of(fc, host[r]) : host[r];
        (*n)++;
    }
    size_t need = 0;
    fmha_status_t st = fmha_plan_workspace_size(plan, &need);
    if (st) return st;
    if (need > fc->workspace_bytes) {
        void *w = NULL;
        if (fc->dev) {
            if (fc->workspace) fmha_context_free(fc->dev, fc->workspace);
            fc->workspace = NULL;
            if ((st = fmha_context_alloc(fc->dev, need, &w))) return st;
        } else if (!(w = realloc(fc->workspace, need))) {
            return FMHA_STATUS_ALLOC_FAILED;
        }
        fc->workspace = w;
        fc->workspace_bytes = need;
    }
    return FMHA_STATUS_SUCCESS;
}

static void host_pointers(const fwd_case_t *fc, void **host)
{
    for (int r = 0; r < NROLES; r++) host[r] = fwd_case_role_data(fc, r);
}

const fmha_problem_t *fwd_case_append_problem(const fwd_case_t *fc) { return fc->app.p; }

fmha_status_t fwd_case_execute_append(fwd_case_t *fc, const fmha_plan_t *append_plan)
{
    if (!fc->app.p) return FMHA_STATUS_BAD_STATE;
    /* The cache as it was before any append: old keys, garbage, and poison in the slots
     * the append must write; q_rot poisoned. */
    for (int w = 0; w < 2; w++) {
        buffer_t *c = &fc->buf[w ? FMHA_TENSOR_V : FMHA_TENSOR_K];
        memcpy(c->data, fc->app.cache_init[w], c->elems * fmha_dtype_size(c->dt));
    }
    if (fc->app.q_in.data) fwd_case_poison(&fc->buf[FMHA_TENSOR_Q]);
    void *const sync[] = {fc->buf[FMHA_TENSOR_K].data, fc->buf[FMHA_TENSOR_V].data, fc->buf[FMHA_TENSOR_Q].data};
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    for (int i = 0; !st && i < 3; i++) st = fwd_case_dev_sync(fc, sync[i], 1);
    fmha_tensor_ptr_t ptrs[NROLES];
    size_t n;
    if (!st) st = prepare_run(fc, fc->app.p, fc->app.data, append_plan, ptrs, &n);
    if (!st) st = fmha_plan_execute(append_plan, ptrs, n, fc->workspace, fc->workspace_bytes, NULL);
    if (!st && fc->dev) st = fmha_context_synchronize(fc->dev);
    for (int i = 0; !st && i < 3; i++) st = fwd_case_dev_sync(fc, sync[i], 0);
    return st;
}

/* The workspace as a careless caller leaves it: bytes of a fixed pseudo-random stream, so
 * that no kernel may rely on what it held (the decode kernel's arrival counters among
 * them: their words look like counts under a foreign tag, kernels/device/common.cuh). */
static fmha_status_t scribble_workspace(fwd_case_t *fc)
{
    if (!fc->workspace_bytes) return FMHA_STATUS_SUCCESS;
    unsigned char *bytes = fc->dev ? malloc(fc->workspace_bytes) : fc->workspace;
    if (!bytes) return FMHA_STATUS_ALLOC_FAILED;
    uint64_t rng = 0x5eed, word = 0;
    for (size_t i = 0; i < fc->workspace_bytes; i++, word >>= 8) {
        if (i % 8 == 0) word = fwd_case_next_u64(&rng);
        bytes[i] = (unsigned char)word;
    }
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    if (fc->dev) {
        st = fmha_context_copy(fc->dev, fc->workspace, bytes, fc->workspace_bytes, 1);
        free(bytes);
    }
    return st;
}

fmha_status_t fwd_case_execute(fwd_case_t *fc, const fmha_plan_t *plan)
{
    fmha_tensor_ptr_t ptrs[NROLES];
    void *host[NROLES];
    size_t n;
    host_pointers(fc, host);
    fmha_status_t st = prepare_run(fc, fc->p, host, plan, ptrs, &n);
    if (!st) st = scribble_workspace(fc);
    for (int r = 1; !st && r < NROLES; r++) {
        if (!fc->buf[r].logical || !fmha_problem_has_tensor(fc->p, (fmha_tensor_role_t)r)) continue;
        fwd_case_poison(&fc->buf[r]);
        st = fwd_case_dev_sync(fc, fc->buf[r].data, 1);
    }
    if (st) return st;
    st = fmha_plan_execute(plan, ptrs, n, fc->workspace, fc->workspace_bytes, NULL);
    if (st || !fc->dev) return st;
    if ((st = fmha_context_synchronize(fc->dev))) return st;
    for (int r = 1; !st && r < NROLES; r++)
        if (fc->buf[r].logical && fmha_problem_has_tensor(fc->p, (fmha_tensor_role_t)r))
            st = fwd_case_dev_sync(fc, fc->buf[r].data, 0);
    return st;
}

/* Time plan over problem p's tensors (data: their host pointers). */
static fmha_status_t time_plan(fwd_case_t *fc, const fmha_problem_t *p, void *const *data, const fmha_plan_t *plan,
                               int warmup, int repeat, double *ms, double *host_us)
{
    fmha_tensor_ptr_t ptrs[NROLES];
    size_t n;
    fmha_status_t st = prepare_run(fc, p, data, plan, ptrs, &n);
    for (int i = 0; !st && i < warmup; i++) st = fmha_plan_execute(plan, ptrs, n, fc->workspace, fc->workspace_bytes, NULL);
    if (!st && fc->dev) st = fmha_context_synchronize(fc->dev);
    const double t0 = run_now_ms();
    for (int i = 0; !st && i < repeat; i++) st = fmha_plan_execute(plan, ptrs, n, fc->workspace, fc->workspace_bytes, NULL);
    const double t1 = run_now_ms();
    if (!st && fc->dev) st = fmha_context_synchronize(fc->dev);
    const int reps = repeat > 0 ? repeat : 1;
    *ms = (run_now_ms() - t0) / reps;
    if (host_us) *host_us = 1e3 * (t1 - t0) / reps;
    return st;
}

fmha_status_t fwd_case_time_calls(fwd_case_t *fc, const fmha_plan_t *plan, int warmup, int repeat, double *ms,
                                  double *host_us)
{
    void *host[NROLES];
    host_pointers(fc, host);
    return time_plan(fc, fc->p, host, plan, warmup, repeat, ms, host_us);
}

fmha_status_t fwd_case_time_append(fwd_case_t *fc, const fmha_plan_t *append_plan, int warmup, int repeat, double *ms)
{
    if (!fc->app.p) return FMHA_STATUS_BAD_STATE;
    return time_plan(fc, fc->app.p, fc->app.data, append_plan, warmup, repeat, ms, NULL);
}

double fwd_case_append_bytes(const fwd_case_t *fc)
{
    const fwd_config_t *c = &fc->cfg;
    if (!fc->app.p) return 0;
    const double es = (double)fmha_dtype_size(c->dtype), rows = (double)(c->b * c->s_knew * c->h_k);
    double bytes = 2.0 * rows * (double)(c->d + c->d_v) * es; /* k_new, v_new read; the cache slots written */
    if (fc->app.q_in.data) bytes += 2.0 * (double)(c->b * c->s * c->h * c->d) * es; /* q read, q_rot written */
    return bytes;
}

fmha_status_t fwd_case_time(fwd_case_t *fc, const fmha_plan_t *plan, int warmup, int repeat, double *ms)
{
    return fwd_case_time_calls(fc, plan, warmup, repeat, ms, NULL);
}

/* Poison left in a logical element means it was never written; poison gone from a
 * padding element means something wrote outside the tensor. */
int64_t fwd_case_bad_writes(const buffer_t *b)
{
    int64_t bad = 0;
    if (!b->logical) return 0;
    for (size_t i = 0; i < b->elems; i++) bad += b->logical[i] ? is_poison(b, i) : !is_poison(b, i);
    return bad;
}

int fwd_case_check(const fwd_case_t *fc, fwd_check_t *r) { return fwd_case_check_memo(fc, NULL, r); }

int fwd_case_check_memo(const fwd_case_t *fc, reference_memo_t *memo, fwd_check_t *r)
{
    memset(r, 0, sizeof *r);
    const fwd_config_t *c = &fc->cfg;
    void *data[NROLES];
    host_pointers(fc, data);
    /* A cached configuration is checked against the forward over its logical tensors. */
    const fmha_problem_t *rp = fc->cached ? fc->ref_p : fc->p;
    void *const *rd = fc->cached ? fc->ref_data : data;
    reference_memo_t *own = memo ? NULL : reference_memo_create(), *m = memo ? memo : own;
    const naive_out_t *refs, *lows;
    if (!m || reference_memo_fwd(m, fc->key, rp, rd, &refs, &lows)) {
        reference_memo_destroy(own);
        return -1;
    }
    const naive_out_t ref = *refs, low = *lows;
    const int group = c->mode == FMHA_MODE_GROUP;
    const int64_t T = ref.tokens, H = c->h, Dv = c->d_v;
    double *got = malloc(sizeof(double) * (size_t)(T * H * Dv + 1));
    if (!got) {
        reference_memo_destroy(own);
        return -1;
    }
    /* Gather our O into the naive layout [token][h][d]. */
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    fmha_problem_get_tensor(fc->p, FMHA_TENSOR_O, &dt, &rank, dims, str);
    const buffer_t *ob = &fc->buf[FMHA_TENSOR_O];
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < Dv; d++) {
                int64_t off = group ? t * str[0] + h * str[1] + d * str[2]
                                    : (t / c->s) * str[0] + (t % c->s) * str[1] + h * str[2] + d * str[3];
                got[(t * H + h) * Dv + d] = fmha_load_f32(ob->data, dt, off);
            }
    r->o = (c->poison ? acc_compare_nonfinite : acc_compare)(got, ref.o, low.o, (size_t)(T * H * Dv), 2.0);
    r->poison_unseen = c->poison && r->o.ref_nonfinite == 0;
    r->lse.pass = 1;
    if (c->lse) {
        const float *L = fc->buf[FMHA_TENSOR_LSE].data;
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++)
                got[t * H + h] = group ? L[h * T + t] : L[((t / c->s) * H + h) * c->s + t % c->s];
        r->lse = (c->poison ? acc_compare_nonfinite : acc_compare)(got, ref.lse, low.lse, (size_t)(T * H), 2.0);
    }
    if (c->dropout_mask) {
        const unsigned char *M = fc->buf[FMHA_TENSOR_DROPOUT_MASK].data;
        size_t n = (size_t)(c->b * c->h * c->s * c->s_k);
        for (size_t i = 0; i < n; i++) r->mask_mismatches += M[i] != ref.keep[i];
    }
    for (int i = 1; i < NROLES; i++) r->unwritten += fwd_case_bad_writes(&fc->buf[i]);
    r->k_new.pass = r->q_rot.pass = 1;
    if (fc->app.p && fwd_case_kv_check(fc, r)) {
        free(got);
        reference_memo_destroy(own);
        return -1;
    }
    r->pass = r->o.pass && r->lse.pass && r->mask_mismatches == 0 && r->unwritten == 0 && r->k_new.pass &&
              r->q_rot.pass && r->v_new_mismatches == 0 && r->k_plain_mismatches == 0 && r->cache_clobbered == 0 &&
              !r->poison_unseen;
    free(got);
    reference_memo_destroy(own);
    return 0;
}

/* Sequence b's query and (used) key lengths. */
static void sequence_lengths(const fwd_case_t *fc, int64_t b, int64_t *sq, int64_t *sk)
{
    const fwd_config_t *c = &fc->cfg;
    *sq = c->s, *sk = c->s_k;
    if (c->mode == FMHA_MODE_GROUP) {
        *sq = fc->cu_q[b + 1] - fc->cu_q[b];
        *sk = fc->used_k ? fc->used_k[b] : fc->cu_k[b + 1] - fc->cu_k[b];
    }
    if (fc->lens) *sk = fc->lens[b];
}

double fwd_case_flops(const fwd_case_t *fc)
{
    const fwd_config_t *c = &fc->cfg;
    fmha_mask_t m;
    if (fmha_mask_parse(c->mask ? c->mask : "0", &m, NULL, 0)) return 0;
    double pairs = 0;
    for (int64_t b = 0; b < c->b; b++) {
        int64_t sq, sk;
        sequence_lengths(fc, b, &sq, &sk);
        pairs += (double)fmha_mask_visible_pairs(&m, sq, sk);
    }
    return 2.0 * (double)c->h * (double)(c->d + c->d_v) * pairs;
}

void fwd_case_traffic(const fwd_case_t *fc, double *qkvo, double *lse)
{
    const fwd_config_t *c = &fc->cfg;
    const double es = (double)fmha_dtype_size(c->dtype);
    double tokens_q = 0, tokens_k = 0;
    for (int64_t b = 0; b < c->b; b++) {
        int64_t sq, sk;
        sequence_lengths(fc, b, &sq, &sk);
        tokens_q += (double)sq;
        tokens_k += (double)sk;
    }
    *qkvo = tokens_q * (double)c->h * (double)(c->d + c->d_v) * es /* q, o */
            + tokens_k * (double)c->h_k * (double)(c->d + c->d_v) * es; /* k and v, once */
    *lse = tokens_q * (double)c->h * 4.0;
}

double fwd_case_bytes(const fwd_case_t *fc)
{
    double qkvo, lse;
    fwd_case_traffic(fc, &qkvo, &lse);
    return qkvo + (fc->cfg.lse ? lse : 0);
}

const char *const FWD_POISON_NAMES[5] = {"n", "nan_q", "nan_k", "nan_v", "inf_v"};

int fwd_config_cli(const fwd_config_t *c, char *buf, size_t len)
{
    static const char *bias[] = {"n", "e", "e:1", "e:2", "a", "a:1"};
    char sq[256] = "", sk[256] = "";
    if (c->mode == FMHA_MODE_GROUP || c->seqlens_k) {
        size_t nq = 0, nk = 0;
        for (int64_t b = 0; b < c->b; b++) {
            /* a long list is cut at the buffer (a case's key adds a hash of the whole list) */
            if (c->mode == FMHA_MODE_GROUP && nq < sizeof sq)
                nq += (size_t)snprintf(sq + nq, sizeof sq - nq, b ? ",%d" : "%d", c->seqlens_q[b]);
            if (nk < sizeof sk)
                nk += (size_t)snprintf(sk + nk, sizeof sk - nk, b ? ",%d" : "%d",
                                       c->seqused_k ? c->seqused_k[b] : c->seqlens_k[b]);
        }
    }
    if (c->mode != FMHA_MODE_GROUP) snprintf(sq, sizeof sq, "%lld", (long long)c->s);
    if (!c->seqlens_k) snprintf(sk, sizeof sk, "%lld", (long long)c->s_k);
    char kv[256] = "";
    if (c->family != FMHA_FAMILY_FWD || c->s_knew > 0)
        snprintf(kv, sizeof kv,
                 " -family=%s -num_splits=%lld -page_block_size=%lld -kv_layout=%d -kv_lookup=%d -cache_batch_idx=%d "
                 "-s_knew=%lld -rotary_dim=%lld -rotary_interleaved=%d",
                 fmha_family_name(c->family), (long long)c->num_splits, (long long)c->page_size, c->kv_layout,
                 c->kv_lookup, c->cache_batch_idx, (long long)c->s_knew, (long long)c->rotary_dim, c->rotary_interleaved);
    char stress[96] = "";
    if (c->q_scale > 0 && c->q_scale != 1) snprintf(stress, sizeof stress, " -q_scale=%g", c->q_scale);
    if (c->poison)
        snprintf(stress + strlen(stress), sizeof stress - strlen(stress), " -poison=%s", FWD_POISON_NAMES[c->poison]);
    if (c->poison && c->poison_token > 0)
        snprintf(stress + strlen(stress), sizeof stress - strlen(stress), " -poison_token=%lld",
                 (long long)c->poison_token);
    const int fp8 = c->dtype == FMHA_DTYPE_FP8_E4M3;
    if (fp8) snprintf(stress + strlen(stress), sizeof stress - strlen(stress), " -descale=%d", c->descale);
    return snprintf(buf, len,
                    "fmha run -v=1 -mode=%d -b=%lld -h=%lld -h_k=%lld -s=%s -s_k=%s -d=%lld -d_v=%lld "
                    "-prec=%s -mask=%s -bias=%s -lse=%d -init_sink=%d -softcap=%g -scale=%g -p_drop=%g "
                    "-drop_seed=%llu -drop_offset=%llu -iperm=%d -operm=%d -pad=%lld -seed=%llu%s%s%s",
                    (int)c->mode, (long long)c->b, (long long)c->h, (long long)c->h_k, sq, sk,
                    (long long)c->d, (long long)c->d_v, fp8 ? "fp8bf16" : fmha_dtype_name(c->dtype), c->mask ? c->mask : "0",
                    bias[c->bias], c->lse, c->sink, c->softcap, c->scale, c->p_drop,
                    (unsigned long long)c->drop_seed, (unsigned long long)c->drop_offset, c->iperm, c->operm,
                    (long long)c->pad, (unsigned long long)c->seed, c->bias_fp32 ? " -bias_fp32=1" : "", kv, stress);
}
