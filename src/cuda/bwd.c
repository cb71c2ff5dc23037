/* SPDX-License-Identifier: MIT */
/*
 * bwd.c: the backward family's three rows of the kernel table (families.c), one per
 * stage: dot_do_o (kernels/bwd/bwd_dot.cuh), dq_dk_dv on mma.sync (kernels/bwd/bwd_mma.cuh)
 * and on sm90 wgmma (kernels/bwd/bwd_wgmma.cuh), and convert_dq (kernels/bwd/bwd_convert.cuh). All take fmha_bwd_params_t
 * (kernels/bwd/bwd_params.h); stage 0's workspace holds D and the fp32 dq accumulator,
 * which the later stages find through the launch's workspace0.
 */
#include <stdio.h>
#include <string.h>

#include "../core/specs.h"
#include "bwd.h"
#include "fwd.h"
#include "kernels/bwd/bwd_params.h"

#define WS_ALIGN 256

static size_t round_up(size_t n) { return (n + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

/* ------------------------------------------------------------------ variants */

int fmha__cuda_bwd_dot_accepts(const fmha_key_t *k)
{
    return k->family == KF_BWD_DOT_DO_O && k->pipeline == KPIPE_MMASYNC && k->tile_n == 0 && k->warps > 0;
}

int fmha__cuda_bwd_convert_accepts(const fmha_key_t *k)
{
    return k->family == KF_BWD_CONVERT_DQ && k->pipeline == KPIPE_MMASYNC && k->tile_n == 0 && k->warps > 0;
}

/* bwd_mma.cuh's static asserts, as a predicate: whole warps per 16-key slab, each warp's
 * share of dK/dV and of dQ a multiple of 16 columns. */
int fmha__cuda_bwd_accepts_mma(const fmha_key_t *k)
{
    if (k->family != KF_BWD_DQ_DK_DV || k->pipeline != KPIPE_MMASYNC || k->stages != 2) return 0;
    const int tm = k->tile_m, tn = k->tile_n, w = k->warps;
    if (tm <= 0 || tn <= 0 || tm % 16 || tn % 16 || w % (tn / 16)) return 0;
    const int split = w / (tn / 16), qslabs = tm / 16;
    if (k->hdim_qk % (16 * split) || k->hdim_v % (16 * split)) return 0;
    if (w % qslabs && qslabs % w) return 0;
    const int groups = w >= qslabs ? w / qslabs : 1;
    return k->hdim_qk % (16 * groups) == 0;
}

/* bwd_wgmma.cuh's variants: batch mode, head dims 64 (128 x 128) and 128 (64 x 128),
 * 16-bit inputs. */
int fmha__cuda_bwd_accepts_wgmma(const fmha_key_t *k)
{
    if (k->family != KF_BWD_DQ_DK_DV || k->pipeline != KPIPE_WGMMAWS || k->stages != 2 || k->warps != 12) return 0;
    if (k->mode != KM_BATCH || (k->dtype != KD_FP16 && k->dtype != KD_BF16)) return 0;
    if (k->hdim_qk != k->hdim_v || k->tile_n != 128) return 0;
    return (k->hdim_qk == 64 && k->tile_m == 128) || (k->hdim_qk == 128 && k->tile_m == 64);
}

/* The element-wise stages: one head dim (dot: Dv; convert: Dqk, select.c sets both). */
int fmha__cuda_bwd_elementwise_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN])
{
    int n = 0;
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_BF16=%d", k->dtype == KD_BF16);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_QK=%d", k->hdim_qk);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_V=%d", k->hdim_v);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_WARPS=%d", k->warps);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_GROUP=%d", k->mode == KM_GROUP);
    return n;
}

int fmha__cuda_bwd_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN])
{
    int n = fmha__cuda_fwd_defines(k, defs); /* the forward's list, dropout included */
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_DBIAS=%d", k->dbias);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_DETERMINISTIC=%d", k->deterministic);
    return n;
}

/* ------------------------------------------------------------------ workspace */

static int64_t rows_of(const fmha_problem_t *p) { return fmha__query_tokens(p) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q); }

/* Is dbias broadcast over batch or heads (summed in fp32 first, bwd_params.h)? */
static int dbias_broadcast(const fmha_problem_t *p)
{
    const fmha_tensor_desc_t *t = fmha__t(p, FMHA_TENSOR_DBIAS);
    return t && (t->dims[0] != fmha__i(p, FMHA_PARAM_BATCH) || t->dims[1] != fmha__i(p, FMHA_PARAM_NUM_HEADS_Q));
}

static size_t dbias_elems(const fmha_problem_t *p)
{
    const fmha_tensor_desc_t *t = fmha__t(p, FMHA_TENSOR_DBIAS);
    return t ? (size_t)(t->dims[0] * t->dims[1] * t->dims[2] * t->dims[3]) : 0;
}

/* dot_do_o's (stage 0): D [rows] fp32, dq_acc rows x Dqk fp32 (dq_acc.cuh), a broadcast dbias's fp32
 * accumulator */
size_t fmha__cuda_bwd_dot_workspace(const fmha_key_t *k, const fmha_problem_t *p)
{
    (void)k;
    const size_t rows = (size_t)rows_of(p);
    return round_up(rows * 4) + round_up(rows * (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK) * 4) +
           (dbias_broadcast(p) ? dbias_elems(p) * 4 : 0);
}

static int64_t mblocks_of(const fmha_key_t *k, const fmha_problem_t *p)
{
    return (fmha__i(p, FMHA_PARAM_SEQLEN_Q) + k->tile_m - 1) / k->tile_m;
}

/* dq_dk_dv's: the deterministic mode's semaphores, one int32 per (batch, head, m-block) */
size_t fmha__cuda_bwd_workspace(const fmha_key_t *k, const fmha_problem_t *p)
{
    if (!k->deterministic) return 0;
    return (size_t)(fmha__i(p, FMHA_PARAM_BATCH) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) * mblocks_of(k, p)) * 4;
}

/* ------------------------------------------------------------------ plan-time limits */

static const fmha_tensor_role_t GRAD_ROWS[4] = {FMHA_TENSOR_DO, FMHA_TENSOR_DQ, FMHA_TENSOR_DK, FMHA_TENSOR_DV};

/* dbias: zeroed, then written in place by the key tiles that see it; or, broadcast over
 * batch or heads, summed in an fp32 accumulator and converted as a whole. Either way the
 * kernels take it dense (row-major), and a broadcast sum (fp32 atomics) is not bitwise
 * reproducible, so the deterministic mode takes a full-shaped dbias only. */
static const char *dbias_why(const fmha_problem_t *p, char *why, size_t len)
{
    const fmha_tensor_desc_t *t = fmha__t(p, FMHA_TENSOR_DBIAS);
    if (!t) return NULL;
    if (dbias_broadcast(p) && fmha__i(p, FMHA_PARAM_DETERMINISTIC)) {
        snprintf(why, len,
                 "[rule cuda.dbias_deterministic] dbias is [%lld, %lld, ...], broadcast over %s; the CUDA backward sums "
                 "it with fp32 atomics, which the deterministic mode does not allow (use a [%lld, %lld, Sq, Sk] dbias "
                 "and sum it, or deterministic = 0)",
                 (long long)t->dims[0], (long long)t->dims[1], t->dims[0] == 1 ? "batch" : "heads",
                 (long long)fmha__i(p, FMHA_PARAM_BATCH), (long long)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q));
        return why;
    }
    int64_t dense = 1;
    for (int d = 3; d >= 0; d--) {
        if (t->dims[d] > 1 && t->strides[d] != dense) {
            snprintf(why, len,
                     "[rule cuda.dbias_layout] dbias has stride %lld in dim %d; the CUDA backward writes dbias as "
                     "one dense block (expected %lld)",
                     (long long)t->strides[d], d, (long long)dense);
            return why;
        }
        dense *= t->dims[d];
    }
    return NULL;
}

/* The wgmma kernel copies Q, dO, K and V by TMA (the mma.sync kernel takes the rest). */
static const fmha_tensor_role_t TMA_ROWS[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_DO, FMHA_TENSOR_K, FMHA_TENSOR_V};

const char *fmha__cuda_bwd_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                         char *why, size_t len)
{
    if (fmha__cuda_fwd_can_implement(k, p, t, why, len)) return why; /* q, k, v, o, bias, lengths */
    if (fmha__cuda_layout_why(p, GRAD_ROWS, 4, why, len)) return why;
    if (dbias_why(p, why, len)) return why;
    const int64_t batch = fmha__i(p, FMHA_PARAM_BATCH), hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    /* the dot and convert stages' keys have no key tile (tile_n 0) */
    const int64_t key_tiles = k->tile_n ? (fmha__i(p, FMHA_PARAM_SEQLEN_KV) + k->tile_n - 1) / k->tile_n : 0;
    if (k->family == KF_BWD_DQ_DK_DV && key_tiles * batch * hk > 0x7fffffff) {
        snprintf(why, len,
                 "[rule cuda.grid] the backward's grid is key tiles of %d (%lld) x batch (%lld) x KV heads (%lld) = "
                 "%lld CTAs in one dimension; the limit is 2^31 - 1",
                 k->tile_n, (long long)key_tiles, (long long)batch, (long long)hk,
                 (long long)(key_tiles * batch * hk));
        return why;
    }
    if (k->pipeline == KPIPE_WGMMAWS &&
        fmha__cuda_tma_why(p, TMA_ROWS, 4, "cuda.bwd_tma", "the sm90 backward", why, len))
        return why;
    const int64_t items = fmha__i(p, FMHA_PARAM_SEQLEN_Q) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    if (k->family != KF_BWD_DQ_DK_DV && (batch > 65535 || items / k->warps + fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) > 0x7fffffff)) {
        snprintf(why, len,
                 "[rule cuda.grid] the backward's row stages walk batch (%lld, grid y, at most 65535) x rows x heads "
                 "(%lld, grid x)",
                 (long long)batch, (long long)items);
        return why;
    }
    return NULL;
}

/* ------------------------------------------------------------------ params */

static fmha_status_t bwd_params(const cuda_launch_t *l, fmha_bwd_params_t *a)
{
    memset(a, 0, sizeof *a);
    fmha_status_t st = fmha__cuda_fwd_params(l, &a->f);
    if (st) return st;
    const fmha_problem_t *p = l->problem;
    void *const *data = l->data;
    if ((st = fmha__cuda_alignment_check(l, GRAD_ROWS, 4))) return st;
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    a->dout = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DO];
    a->dq = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DQ];
    a->dk = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DK];
    a->dv = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DV];
    fmha__cuda_row_strides(fmha__t(p, FMHA_TENSOR_DO), group, &a->do_batch, &a->do_row, &a->do_head);
    fmha__cuda_row_strides(fmha__t(p, FMHA_TENSOR_DQ), group, &a->dq_batch, &a->dq_row, &a->dq_head);
    fmha__cuda_row_strides(fmha__t(p, FMHA_TENSOR_DK), group, &a->dk_batch, &a->dk_row, &a->dk_head);
    fmha__cuda_row_strides(fmha__t(p, FMHA_TENSOR_DV), group, &a->dv_batch, &a->dv_row, &a->dv_head);
    const fmha_tensor_desc_t *db = fmha__t(p, FMHA_TENSOR_DBIAS), *ds = fmha__t(p, FMHA_TENSOR_DSINK);
    if (db) {
        a->dbias = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DBIAS];
        a->dbias_batch = db->strides[0], a->dbias_head = db->strides[1];
        a->dbias_row = db->strides[2], a->dbias_col = db->strides[3];
    }
    if (ds) a->dsink = (uint64_t)(uintptr_t)data[FMHA_TENSOR_DSINK], a->dsink_head = ds->strides[0];
    const int64_t rows = rows_of(p);
    a->dsum = (uint64_t)(uintptr_t)l->workspace0;
    a->dq_acc = a->dsum + round_up((size_t)rows * 4);
    if (dbias_broadcast(p)) {
        a->dbias_acc = a->dq_acc + round_up((size_t)rows * (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK) * 4);
        a->dbias_acc_batch = db->dims[0] == 1 ? 0 : db->dims[1] * db->dims[2] * db->dims[3];
        a->dbias_acc_head = db->dims[1] == 1 ? 0 : db->dims[2] * db->dims[3];
        a->dbias_elems = (int64_t)dbias_elems(p);
    }
    a->tokens = (int32_t)fmha__query_tokens(p);
    a->hdim_qk = (int32_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK);
    return FMHA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ launches */

/* The row stages' grid: x over a sequence's (row, head) items, `warps` per CTA; y the batch. */
static unsigned row_ctas(const cuda_launch_t *l)
{
    const int64_t items = fmha__i(l->problem, FMHA_PARAM_SEQLEN_Q) * fmha__i(l->problem, FMHA_PARAM_NUM_HEADS_Q);
    return (unsigned)((items + l->kernel->key.warps - 1) / l->kernel->key.warps);
}

fmha_status_t fmha__cuda_bwd_dot_launch(const cuda_launch_t *l)
{
    fmha_bwd_params_t a;
    fmha_status_t st = bwd_params(l, &a);
    if (st) return st;
    if (a.dbias_acc) { /* the broadcast dbias's sum starts at 0 */
        CUresult r = fmha__cuda(NULL)->cuMemsetD32Async((CUdeviceptr)a.dbias_acc, 0, (size_t)a.dbias_elems, l->stream);
        if (r) return fmha__cuda_fail(l->err, FMHA_STATUS_CUDA_ERROR, r, "zeroing the dbias accumulator");
    }
    void *args[1] = {&a};
    const unsigned x = row_ctas(l);
    return x ? fmha__cuda_launch(l, x, (unsigned)a.f.batch, 1, args) : FMHA_STATUS_SUCCESS;
}

/* A dense dbias (not summed in the fp32 accumulator) is written by the key tiles that see
 * it, in place: the rest of it is 0. */
static fmha_status_t zero_dense_dbias(const cuda_launch_t *l, const fmha_bwd_params_t *a)
{
    if (!a->dbias || a->dbias_acc) return FMHA_STATUS_SUCCESS;
    const fmha_tensor_desc_t *db = fmha__t(l->problem, FMHA_TENSOR_DBIAS);
    const size_t bytes = (size_t)(db->dims[0] * db->dims[1] * db->dims[2] * db->dims[3]) * fmha_dtype_size(db->dtype);
    CUresult r = fmha__cuda(NULL)->cuMemsetD8Async((CUdeviceptr)a->dbias, 0, bytes, l->stream);
    return r ? fmha__cuda_fail(l->err, FMHA_STATUS_CUDA_ERROR, r, "zeroing dbias (%zu bytes)", bytes) : FMHA_STATUS_SUCCESS;
}

/* What both dq_dk_dv kernels launch with: the params, a dense dbias zeroed, the
 * deterministic mode's semaphores zeroed; *nblocks the grid's key tiles (0: nothing to
 * launch). */
static fmha_status_t dq_dk_dv_prepare(const cuda_launch_t *l, fmha_bwd_params_t *a, unsigned *nblocks)
{
    fmha_status_t st = bwd_params(l, a);
    if (st) return st;
    const fmha_key_t *k = &l->kernel->key;
    if ((st = zero_dense_dbias(l, a))) return st;
    if (k->deterministic) {
        a->dq_sem = (uint64_t)(uintptr_t)l->workspace;
        const size_t n = fmha__cuda_bwd_workspace(k, l->problem) / 4;
        CUresult r = n ? fmha__cuda(NULL)->cuMemsetD32Async((CUdeviceptr)a->dq_sem, 0, n, l->stream) : 0;
        if (r) return fmha__cuda_fail(l->err, FMHA_STATUS_CUDA_ERROR, r, "zeroing the dq semaphores");
    }
    *nblocks = a->f.batch ? (unsigned)((a->f.seqlen_k + k->tile_n - 1) / k->tile_n) : 0;
    return FMHA_STATUS_SUCCESS;
}

/* The wgmma kernel's cohorts in the deterministic mode (bwd_params.h). A cohort's tiles
 * wait for each other, so one must fit on the device beside others (a quarter of the
 * SMs at most, one CTA each); 16 tiles leave a cohort's successors at least a wave
 * behind it at 16 or more heads x sequences, and share a head's Q and dO in L2 among 16
 * tiles (perf-notes run 65). */
static unsigned deterministic_cohort(unsigned tiles, int sms)
{
    unsigned c = tiles < 16 ? tiles : 16; /* at most 32: a lane of the dQ writer per tile */
    if (sms > 0 && c > (unsigned)sms / 4) c = sms >= 4 ? (unsigned)sms / 4 : 1;
    return c;
}

/* The dq_dk_dv grid: one dimension, cohorts of a->cohort key tiles x batch x KV heads
 * (bwd_common.cuh's bwd_cta). A cohort is every key tile of a head, side by side, except
 * in the wgmma kernel's deterministic mode. args holds a. */
static fmha_status_t launch_dq_dk_dv(const cuda_launch_t *l, fmha_bwd_params_t *a, unsigned nblocks, void **args)
{
    const fmha_key_t *k = &l->kernel->key;
    const int ordered_by_cohort = k->deterministic && k->pipeline == KPIPE_WGMMAWS;
    a->cohort = (int32_t)(ordered_by_cohort ? deterministic_cohort(nblocks, l->kernel->device.sm_count) : nblocks);
    return fmha__cuda_launch(l, nblocks * (unsigned)a->f.batch * (unsigned)a->f.heads_kv, 1, 1, args);
}

fmha_status_t fmha__cuda_bwd_launch_mma(const cuda_launch_t *l)
{
    fmha_bwd_params_t a;
    unsigned nblocks = 0;
    fmha_status_t st = dq_dk_dv_prepare(l, &a, &nblocks);
    if (st || !nblocks) return st;
    void *args[1] = {&a};
    return launch_dq_dk_dv(l, &a, nblocks, args);
}

/* The wgmma kernel: the mma.sync kernel's grid, with Q, dO, K and V maps (bwd_params.h). */
fmha_status_t fmha__cuda_bwd_launch_wgmma(const cuda_launch_t *l)
{
    fmha_bwd_params_t a;
    unsigned nblocks = 0;
    fmha_status_t st = dq_dk_dv_prepare(l, &a, &nblocks);
    if (st || !nblocks) return st;
    const cuda_api_t *cu = fmha__cuda(NULL);
    const fmha_key_t *k = &l->kernel->key;
    if (!cu->cuTensorMapEncodeTiled)
        return fmha__fail(l->err, FMHA_STATUS_NOT_SUPPORTED,
                          "the sm90 backward copies by TMA, and the driver has no cuTensorMapEncodeTiled");
    fmha_bwd_tma_maps_t maps;
    memset(&maps, 0, sizeof maps);
    const int d = k->hdim_qk, e = 2;
    CUresult r = fmha__cuda_encode_map(cu, maps.q, a.f.q, d, a.f.seqlen_q, a.f.heads_q, a.f.batch, a.f.q_row,
                                       a.f.q_head, a.f.q_batch, k->tile_m, e);
    if (!r)
        r = fmha__cuda_encode_map(cu, maps.dout, a.dout, d, a.f.seqlen_q, a.f.heads_q, a.f.batch, a.do_row, a.do_head,
                                  a.do_batch, k->tile_m, e);
    if (!r)
        r = fmha__cuda_encode_map(cu, maps.k, a.f.k, d, a.f.seqlen_k, a.f.heads_kv, a.f.batch, a.f.k_row, a.f.k_head,
                                  a.f.k_batch, k->tile_n, e);
    if (!r)
        r = fmha__cuda_encode_map(cu, maps.v, a.f.v, d, a.f.seqlen_k, a.f.heads_kv, a.f.batch, a.f.v_row, a.f.v_head,
                                  a.f.v_batch, k->tile_n, e);
    if (r) /* can_implement checked the strides: the driver refused */
        return fmha__cuda_fail(l->err, FMHA_STATUS_NOT_SUPPORTED, r, "encoding the backward's TMA maps");
    void *args[2] = {&a, &maps};
    return launch_dq_dk_dv(l, &a, nblocks, args);
}

fmha_status_t fmha__cuda_bwd_convert_launch(const cuda_launch_t *l)
{
    fmha_bwd_params_t a;
    fmha_status_t st = bwd_params(l, &a);
    if (st) return st;
    a.row_ctas = (int32_t)row_ctas(l);
    a.sink_ctas = a.dsink ? a.f.heads_q : 0;
    const int64_t per_cta = (int64_t)l->kernel->threads * 8; /* convert_dbias: 8 elements a thread */
    a.dbias_ctas = a.dbias_acc ? (int32_t)((a.dbias_elems + per_cta - 1) / per_cta) : 0;
    const unsigned x = (unsigned)a.row_ctas + (unsigned)a.sink_ctas + (unsigned)a.dbias_ctas;
    void *args[1] = {&a};
    return x && a.f.batch ? fmha__cuda_launch(l, x, (unsigned)a.f.batch, 1, args) : FMHA_STATUS_SUCCESS;
}
