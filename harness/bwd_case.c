/* SPDX-License-Identifier: MIT */
/* bwd_case.c: see bwd_case.h. */
#include "bwd_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/core/dtype.h"
#include "fwd_case_impl.h"
#include "naive_bwd.h"

/* The gradient roles and the tensor each takes its shape from. */
static const fmha_tensor_role_t GRADS[] = {FMHA_TENSOR_DQ, FMHA_TENSOR_DK, FMHA_TENSOR_DV, FMHA_TENSOR_DBIAS,
                                           FMHA_TENSOR_DSINK};
static const fmha_tensor_role_t GRAD_OF[] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_BIAS,
                                             FMHA_TENSOR_SINK};
#define NGRADS 5

struct bwd_case {
    bwd_config_t cfg;
    fwd_case_t *fc;       /* q, k, v, o, lse, bias, alibi, sink, cu_seqlens */
    fmha_problem_t *p;    /* the bwd problem */
    buffer_t dO, grad[NGRADS];
    void *data[NROLES];
    void *workspace;
    size_t workspace_bytes;
    void *last[NGRADS];   /* copies of the last gradients, for rerun_identical */
    fmha_context_t *dev;  /* set by bwd_case_bind for a CUDA context */
};

const fmha_problem_t *bwd_case_problem(const bwd_case_t *bc) { return bc->p; }
void *const *bwd_case_data(const bwd_case_t *bc) { return bc->data; }

void bwd_case_destroy(bwd_case_t *bc)
{
    if (!bc) return;
    if (bc->dev && bc->workspace) fmha_context_free(bc->dev, bc->workspace);
    else free(bc->workspace);
    fwd_case_destroy(bc->fc); /* and every device copy */
    fmha_problem_destroy(bc->p);
    fwd_case_free_buffer(&bc->dO);
    for (int g = 0; g < NGRADS; g++) fwd_case_free_buffer(&bc->grad[g]), free(bc->last[g]);
    free(bc);
}

/* o and lse of the forward, from the naive forward in double. */
static int forward_outputs(bwd_case_t *bc)
{
    fwd_case_t *fc = bc->fc;
    const fwd_config_t *c = &bc->cfg.fwd;
    void *data[NROLES];
    for (int r = 0; r < NROLES; r++) data[r] = fwd_case_role_data(fc, r);
    naive_out_t ref;
    if (naive_fwd(fc->p, data, NAIVE_F64, &ref)) return -1;
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    fmha_problem_get_tensor(fc->p, FMHA_TENSOR_O, &dt, &rank, dims, str);
    const int group = c->mode == FMHA_MODE_GROUP;
    float *L = fc->buf[FMHA_TENSOR_LSE].data;
    fwd_case_poison(&fc->buf[FMHA_TENSOR_O]); /* padding stays NaN: never read */
    for (int64_t t = 0; t < ref.tokens; t++)
        for (int64_t h = 0; h < c->h; h++) {
            const int64_t b = group ? 0 : t / c->s, i = group ? t : t % c->s;
            const int64_t base = group ? t * str[0] + h * str[1] : b * str[0] + i * str[1] + h * str[2];
            for (int64_t d = 0; d < c->d_v; d++)
                fmha_store_f32(fc->buf[FMHA_TENSOR_O].data, dt, base + d * str[rank - 1], (float)ref.o[(t * c->h + h) * c->d_v + d]);
            L[group ? h * ref.tokens + t : (b * c->h + h) * c->s + i] = (float)ref.lse[t * c->h + h];
        }
    naive_out_free(&ref);
    return 0;
}

/* The forward case a backward case reads: the same flags, with LSE, no keep mask, no
 * KV-cache features. */
static fwd_config_t forward_config(const bwd_config_t *c, int describe_only)
{
    fwd_config_t fcfg = c->fwd;
    fcfg.family = FMHA_FAMILY_FWD, fcfg.lse = 1, fcfg.dropout_mask = 0, fcfg.describe_only = describe_only;
    fcfg.num_splits = fcfg.page_size = fcfg.s_knew = 0, fcfg.cache_batch_idx = 0;
    return fcfg;
}

/* The backward problem of forward problem fwd (cloned into *out): family, deterministic,
 * do with o's layout, each gradient with its tensor's (dbias when asked, dsink when the
 * forward has sinks). */
static fmha_status_t backward_problem(const fmha_problem_t *fwd, const bwd_config_t *c, fmha_problem_t **out, char *why,
                                      size_t why_len)
{
    if (c->dbias && !fmha_problem_has_tensor(fwd, FMHA_TENSOR_BIAS)) {
        snprintf(why, why_len, "dbias needs an elementwise bias (-bias=e, e:1 or e:2)");
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    fmha_problem_t *p = NULL;
    fmha_status_t st = fmha_problem_clone(fwd, &p);
    if (st) return st;
    if (!(st = fmha_problem_set_i64(p, FMHA_PARAM_FAMILY, FMHA_FAMILY_BWD)))
        st = fmha_problem_set_i64(p, FMHA_PARAM_DETERMINISTIC, c->deterministic);
    for (int g = -1; !st && g < NGRADS; g++) {
        const fmha_tensor_role_t role = g < 0 ? FMHA_TENSOR_DO : GRADS[g], of = g < 0 ? FMHA_TENSOR_O : GRAD_OF[g];
        if (!fmha_problem_has_tensor(p, of) || (role == FMHA_TENSOR_DBIAS && !c->dbias)) continue;
        fmha_dtype_t dt;
        int rank;
        int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
        fmha_problem_get_tensor(p, of, &dt, &rank, dims, str);
        st = fmha_problem_set_tensor(p, role, dt, rank, dims, str);
    }
    if (st) {
        snprintf(why, why_len, "%s", fmha_problem_last_error(p));
        fmha_problem_destroy(p);
        return st;
    }
    *out = p;
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t bwd_forward_describe(const bwd_config_t *c, fwd_case_t **out, char *why, size_t why_len)
{
    const fwd_config_t fcfg = forward_config(c, 1);
    return fwd_case_create(&fcfg, out, why, why_len);
}

fmha_status_t bwd_problem_describe(const bwd_config_t *c, fmha_problem_t **out, char *why, size_t why_len)
{
    *out = NULL;
    fwd_case_t *fc = NULL;
    fmha_status_t st = bwd_forward_describe(c, &fc, why, why_len);
    if (!st) st = backward_problem(fwd_case_problem(fc), c, out, why, why_len);
    fwd_case_destroy(fc);
    return st;
}

fmha_status_t bwd_case_create(const bwd_config_t *c, bwd_case_t **out, char *why, size_t why_len)
{
    *out = NULL;
    bwd_case_t *bc = calloc(1, sizeof *bc);
    if (!bc) return FMHA_STATUS_ALLOC_FAILED;
    bc->cfg = *c;
    const fwd_config_t fcfg = forward_config(c, 0);
    fmha_status_t st = fwd_case_create(&fcfg, &bc->fc, why, why_len);
    if (st || (st = backward_problem(bc->fc->p, c, &bc->p, why, why_len))) goto fail;
    for (int r = 0; r < NROLES; r++) bc->data[r] = fwd_case_role_data(bc->fc, r);

    /* buffers for do (random) and the gradients (poisoned per run), as described */
    uint64_t rng = c->fwd.seed ^ 0xD0D0D0D0ull;
    for (int g = -1; g < NGRADS; g++) {
        const fmha_tensor_role_t role = g < 0 ? FMHA_TENSOR_DO : GRADS[g], of = g < 0 ? FMHA_TENSOR_O : GRAD_OF[g];
        if (!fmha_problem_has_tensor(bc->p, role)) continue;
        fmha_dtype_t dt;
        int rank;
        int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
        fmha_problem_get_tensor(bc->p, role, &dt, &rank, dims, str);
        buffer_t *b = g < 0 ? &bc->dO : &bc->grad[g];
        const buffer_t *src = &bc->fc->buf[of];
        if (!fwd_case_alloc_buffer(b, dt, src->elems, g >= 0)) {
            st = FMHA_STATUS_ALLOC_FAILED;
            goto fail;
        }
        if (g >= 0) fwd_case_mark_logical(b, rank, dims, str);
        else
            fwd_case_fill_random(b, &rng, -1, 1);
        bc->data[role] = b->data;
    }
    if (!c->library_outputs && forward_outputs(bc)) {
        st = FMHA_STATUS_ALLOC_FAILED;
        goto fail;
    }
    *out = bc;
    return FMHA_STATUS_SUCCESS;
fail:
    bwd_case_destroy(bc);
    return st;
}

fmha_status_t bwd_case_bind(bwd_case_t *bc, fmha_context_t *ctx, char *why, size_t why_len)
{
    if (fmha_context_backend(ctx) != FMHA_BACKEND_CUDA) return FMHA_STATUS_SUCCESS;
    fmha_status_t st = fwd_case_bind(bc->fc, ctx, why, why_len);
    bc->dev = ctx;
    const buffer_t *bufs[NGRADS + 1] = {&bc->dO, &bc->grad[0], &bc->grad[1], &bc->grad[2], &bc->grad[3], &bc->grad[4]};
    for (int i = 0; !st && i <= NGRADS; i++)
        if (bufs[i]->data)
            st = fwd_case_dev_register(bc->fc, bufs[i]->data, bufs[i]->elems * fmha_dtype_size(bufs[i]->dt),
                                       i ? "a gradient" : "do", why, why_len);
    return st;
}

fmha_status_t bwd_case_forward(bwd_case_t *bc, fmha_context_t *ctx, char *why, size_t why_len)
{
    fmha_plan_t *plan = NULL;
    fmha_status_t st = fmha_plan_create(ctx, bc->fc->p, NULL, &plan);
    if (!st) st = fwd_case_execute(bc->fc, plan);
    if (st) snprintf(why, why_len, "the forward for o and lse: %s", plan ? fmha_plan_last_error(plan) : fmha_context_last_error(ctx));
    fmha_plan_destroy(plan);
    return st;
}

static fmha_status_t run_once(bwd_case_t *bc, const fmha_plan_t *plan)
{
    fmha_tensor_ptr_t ptrs[NROLES];
    size_t n = 0, need = 0;
    for (int r = 1; r < NROLES; r++)
        if (fmha_problem_has_tensor(bc->p, (fmha_tensor_role_t)r)) {
            ptrs[n].role = (fmha_tensor_role_t)r;
            ptrs[n++].data = bc->dev ? fwd_case_dev_of(bc->fc, bc->data[r]) : bc->data[r];
        }
    fmha_status_t st = fmha_plan_workspace_size(plan, &need);
    if (st) return st;
    if (need > bc->workspace_bytes) {
        void *w = NULL;
        if (bc->dev) {
            if (bc->workspace) fmha_context_free(bc->dev, bc->workspace);
            bc->workspace = NULL, bc->workspace_bytes = 0;
            if ((st = fmha_context_alloc(bc->dev, need, &w))) return st;
        } else if (!(w = realloc(bc->workspace, need))) {
            return FMHA_STATUS_ALLOC_FAILED;
        }
        bc->workspace = w, bc->workspace_bytes = need;
    }
    return fmha_plan_execute(plan, ptrs, n, bc->workspace, bc->workspace_bytes, NULL);
}

fmha_status_t bwd_case_execute(bwd_case_t *bc, const fmha_plan_t *plan)
{
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    for (int g = 0; !st && g < NGRADS; g++)
        if (bc->grad[g].data) {
            fwd_case_poison(&bc->grad[g]);
            st = fwd_case_dev_sync(bc->fc, bc->grad[g].data, 1);
        }
    if (!st) st = run_once(bc, plan);
    if (st || !bc->dev) return st;
    if ((st = fmha_context_synchronize(bc->dev))) return st;
    for (int g = 0; !st && g < NGRADS; g++)
        if (bc->grad[g].data) st = fwd_case_dev_sync(bc->fc, bc->grad[g].data, 0);
    return st;
}

fmha_status_t bwd_case_time(bwd_case_t *bc, const fmha_plan_t *plan, int warmup, int repeat, double *ms)
{
    fmha_status_t st = FMHA_STATUS_SUCCESS;
    for (int i = 0; !st && i < warmup; i++) st = run_once(bc, plan);
    if (!st && bc->dev) st = fmha_context_synchronize(bc->dev);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; !st && i < repeat; i++) st = run_once(bc, plan);
    if (!st && bc->dev) st = fmha_context_synchronize(bc->dev);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = (1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec)) / (repeat > 0 ? repeat : 1);
    return st;
}

fmha_status_t bwd_case_rerun_identical(bwd_case_t *bc, const fmha_plan_t *plan, int *identical)
{
    for (int g = 0; g < NGRADS; g++) {
        const buffer_t *b = &bc->grad[g];
        if (!b->data) continue;
        size_t bytes = b->elems * fmha_dtype_size(b->dt);
        free(bc->last[g]);
        if (!(bc->last[g] = malloc(bytes))) return FMHA_STATUS_ALLOC_FAILED;
        memcpy(bc->last[g], b->data, bytes);
    }
    fmha_status_t st = bwd_case_execute(bc, plan);
    *identical = 1;
    for (int g = 0; !st && g < NGRADS; g++)
        if (bc->grad[g].data && memcmp(bc->last[g], bc->grad[g].data, bc->grad[g].elems * fmha_dtype_size(bc->grad[g].dt)))
            *identical = 0;
    return st;
}

/* Our gradient of role r gathered into the naive layout ([token][h][d], bias dims, [Hq]). */
static void gather(const bwd_case_t *bc, fmha_tensor_role_t r, double *out)
{
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK], idx[FMHA_MAX_RANK] = {0};
    fmha_problem_get_tensor(bc->p, r, &dt, &rank, dims, str);
    size_t n = 0;
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0) return;
    for (;;) { /* row-major over dims: the naive layout of every gradient */
        int64_t off = 0;
        for (int d = 0; d < rank; d++) off += idx[d] * str[d];
        out[n++] = fmha_load_f32(bc->data[r], dt, off);
        int d = rank - 1;
        while (d >= 0 && ++idx[d] == dims[d]) idx[d--] = 0;
        if (d < 0) return;
    }
}

static size_t count_of(const bwd_case_t *bc, fmha_tensor_role_t r)
{
    fmha_dtype_t dt;
    int rank;
    int64_t dims[FMHA_MAX_RANK], str[FMHA_MAX_RANK];
    fmha_problem_get_tensor(bc->p, r, &dt, &rank, dims, str);
    size_t n = 1;
    for (int d = 0; d < rank; d++) n *= (size_t)dims[d];
    return n;
}

int bwd_case_check(const bwd_case_t *bc, bwd_check_t *r) { return bwd_case_check_memo(bc, NULL, r); }

int bwd_case_check_memo(const bwd_case_t *bc, reference_memo_t *memo, bwd_check_t *r)
{
    memset(r, 0, sizeof *r);
    const fwd_config_t *c = &bc->cfg.fwd;
    /* the forward's inputs, the backward's own (dbias, the source of o and lse) */
    char key[4096];
    const int n = snprintf(key, sizeof key, "bwd -dbias=%d -library_outputs=%d %s", bc->cfg.dbias,
                           bc->cfg.library_outputs, fwd_case_key(bc->fc));
    reference_memo_t *own = memo && n < (int)sizeof key ? NULL : reference_memo_create(), *m = own ? own : memo;
    const naive_grads_t *refp, *lowp;
    if (!m || reference_memo_bwd(m, key, bc->p, bc->data, &refp, &lowp)) {
        reference_memo_destroy(own);
        return -1;
    }
    /* REFERENCE.md: factor 2, 3 for varlen, 8 with ALiBi */
    const double factor = c->bias >= BIAS_ALIBI_H ? 8.0 : c->mode == FMHA_MODE_GROUP ? 3.0 : 2.0;
    acc_result_t *res[NGRADS] = {&r->dq, &r->dk, &r->dv, &r->dbias, &r->dsink};
    const double *refs[NGRADS] = {refp->dq, refp->dk, refp->dv, refp->dbias, refp->dsink};
    const double *lows[NGRADS] = {lowp->dq, lowp->dk, lowp->dv, lowp->dbias, lowp->dsink};
    int failed = 0;
    for (int g = 0; g < NGRADS; g++) {
        res[g]->pass = 1;
        if (!bc->grad[g].data) continue;
        size_t count = count_of(bc, GRADS[g]);
        double *got = malloc(sizeof(double) * (count + 1));
        if (!got) {
            failed = 1;
            break;
        }
        gather(bc, GRADS[g], got);
        *res[g] = acc_compare(got, refs[g], lows[g], count, factor);
        free(got);
        r->unwritten += fwd_case_bad_writes(&bc->grad[g]);
    }
    reference_memo_destroy(own);
    if (failed) return -1;
    r->pass = r->dq.pass && r->dk.pass && r->dv.pass && r->dbias.pass && r->dsink.pass && r->unwritten == 0;
    return 0;
}

double bwd_case_flops(const bwd_case_t *bc) { return 2.5 * fwd_case_flops(bc->fc); }

/* q, k, v, o, do and lse read, dq, dk, dv written: twice the forward's q/k/v/o traffic
 * plus the lse. */
double bwd_case_bytes(const bwd_case_t *bc)
{
    double qkvo, lse;
    fwd_case_traffic(bc->fc, &qkvo, &lse);
    return 2.0 * qkvo + lse;
}
