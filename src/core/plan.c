/* SPDX-License-Identifier: MIT */
/*
 * plan.c: plan creation (validation + the selector's choice per stage + workspace
 * layout), explain, execution (pointer checks, alias checks, stage calls) and
 * description.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "plan_cache.h"
#include "registry.h"
#include "select.h"

static fmha_status_t check_plan_args(fmha_context_t *ctx, const fmha_problem_t *p,
                                     const fmha_plan_options_t *opt)
{
    if (!p) return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT, "problem is NULL");
    if (opt && opt->struct_size < sizeof(fmha_plan_options_t))
        return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT,
                          "plan options struct_size is %u; expected %zu (set struct_size = "
                          "sizeof(fmha_plan_options_t))",
                          (unsigned)opt->struct_size, sizeof(fmha_plan_options_t));
    if (opt && opt->num_threads < 0)
        return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT,
                          "plan options num_threads is %d; expected >= 0", opt->num_threads);
    if (opt && (opt->check_index_data < 0 || opt->check_index_data > 1))
        return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT,
                          "plan options check_index_data is %d; expected 0 or 1", opt->check_index_data);
    return FMHA_STATUS_SUCCESS;
}

int fmha__opt_check_index(const fmha_plan_options_t *opt)
{
    if (opt && opt->check_index_data) return 1;
    const char *env = getenv("FMHA_CHECK_INDEX");
    return env && env[0] && strcmp(env, "0") != 0;
}

#define WS_ALIGN 256 /* each stage's workspace starts on a 256-byte boundary */

/* Bytes stage descriptor d needs for problem p, and the same rounded up to WS_ALIGN:
 * where the next stage's workspace starts. */
static size_t stage_bytes(const kdesc_t *d, const fmha_problem_t *p, int threads)
{
    return d->workspace ? d->workspace(d, p, threads) : 0;
}
static size_t ws_round(size_t bytes) { return (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

static fmha_status_t plan_new(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                              fmha_plan_t **out);

/* A decode-shaped forward on a GPU runs as split-KV decode. The forward's kernels read K
 * and V once per query head, a CTA streaming all the keys (fwd_pagedkv's the same over
 * pages: 0.198 ms against 14 µs at B1 x 8192 keys, 32/8 heads); the decode kernel
 * (kernels/splitkv/decode_mma.cuh) packs a GQA group's query rows into one block, so K and
 * V are read once per KV head, and splits long key ranges over the SMs (perf-notes run 70:
 * 48 -> 21-29 µs a call at B8 x 1 x 1024 keys). Its O and LSE are the forward's, so a
 * backward planned on them is unchanged. Decode-shaped: batch mode, at most DECODE_MAX_SQ
 * query rows and DECODE_ROWS rows per KV head (the decode kernel's row blocks of 16 and
 * 32), no dropout, not fp8, no kernel forced. Returns 1 and the problem to try in *alt;
 * the caller plans p itself where alt does not validate or select. */
#define DECODE_MAX_SQ 16
#define DECODE_ROWS 32
static int decode_route(const fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                        fmha_problem_t *alt)
{
    if (ctx->target.arch == KA_CPU || (opt && opt->force_kernel && opt->force_kernel[0])) return 0;
    const int64_t fam = fmha__i(p, FMHA_PARAM_FAMILY);
    if ((fam != FMHA_FAMILY_FWD && fam != FMHA_FAMILY_FWD_PAGEDKV) || fmha__i(p, FMHA_PARAM_MODE) != FMHA_MODE_BATCH)
        return 0;
    const fmha_tensor_desc_t *q = fmha__t(p, FMHA_TENSOR_Q);
    const int64_t hq = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q), hk = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    const int64_t sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    if (!q || q->dtype == FMHA_DTYPE_FP8_E4M3 || fmha__f(p, FMHA_PARAM_DROPOUT_P) != 0.0) return 0;
    if (hk <= 0 || hq % hk || sq > DECODE_MAX_SQ || sq * (hq / hk) > DECODE_ROWS) return 0;
    *alt = *p;
    alt->i64[FMHA_PARAM_FAMILY] = FMHA_FAMILY_FWD_SPLITKV;
    alt->i64[FMHA_PARAM_NUM_SPLITS] = 0;
    return 1;
}

/* decode_route, then alt validated and selected (the selection's account into sb, when
 * given): 1 routed (*alt, *sel), 0 tried and refused (the context's error says why), -1
 * not decode-shaped. */
static int select_routed(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                         fmha_problem_t *alt, selection_t *sel, strbuf_t *sb)
{
    if (!decode_route(ctx, p, opt, alt)) return -1;
    return !fmha__problem_check(alt, fmha__ctx_err(ctx)) && !fmha__select(ctx, alt, NULL, sel, sb, fmha__ctx_err(ctx));
}

fmha_status_t fmha_plan_create(fmha_context_t *ctx, const fmha_problem_t *p,
                               const fmha_plan_options_t *opt, fmha_plan_t **out)
{
    if (!out) return ctx ? fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT, "out is NULL")
                         : FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    fmha_status_t st = check_plan_args(ctx, p, opt);
    if (st) return st;
    /* an equal problem planned before: a copy of its plan (plan_cache.h) */
    plan_key_t *key = fmha__plan_cache_enabled(ctx->plans) ? fmha__plan_key(p, opt) : NULL;
    pthread_rwlock_rdlock(&ctx->lock); /* other threads plan too; registering waits */
    if (key && (*out = fmha__plan_cache_get(ctx->plans, key))) {
        pthread_rwlock_unlock(&ctx->lock);
        free(key);
        fmha__ctx_err(ctx)[0] = '\0';
        return FMHA_STATUS_SUCCESS;
    }
    st = plan_new(ctx, p, opt, out);
    if (st == FMHA_STATUS_SUCCESS && key) fmha__plan_cache_put(ctx->plans, key, *out);
    else free(key);
    pthread_rwlock_unlock(&ctx->lock);
    return st;
}

/* Validate, select and prepare: a plan the cache did not have. */
static fmha_status_t plan_new(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                              fmha_plan_t **out)
{
    fmha_status_t st;
    if ((st = fmha__problem_check(p, fmha__ctx_err(ctx)))) return st;

    selection_t sel;
    fmha_problem_t alt;
    if (select_routed(ctx, p, opt, &alt, &sel, NULL) == 1)
        p = &alt; /* every stage the split-KV family's; else the forward's own, below */
    else if ((st = fmha__select(ctx, p, opt ? opt->force_kernel : NULL, &sel, NULL, fmha__ctx_err(ctx))))
        return st;
    for (int s = 0; s < sel.num_stages; s++)
        if (!sel.chosen[s]->run)
            return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_NOT_COMPILED,
                              "kernel %s was selected for stage %d but this build cannot run it (%s%s)",
                              sel.chosen[s]->name, s, ctx->target.is_virtual ? "virtual context; " : "",
                              fmha_build_info());

    fmha_plan_t *plan = calloc(1, sizeof *plan);
    if (!plan) return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_ALLOC_FAILED, "plan allocation failed");
    memcpy(&plan->problem, p, sizeof plan->problem);
    plan->problem.err[0] = '\0';
    plan->ops = ctx->ops;
    plan->ctx = ctx;
    plan->check_index = fmha__opt_check_index(opt);
    plan->num_threads = ctx->ops->plan_threads(opt ? opt->num_threads : 0);
    plan->num_stages = sel.num_stages;
    size_t offset = 0;
    for (int s = 0; s < sel.num_stages; s++) {
        const kdesc_t *d = sel.chosen[s];
        snprintf(plan->stage_kernel[s], FMHA_KERNEL_NAME_LEN, "%s", d->name);
        snprintf(plan->stage_how[s], sizeof plan->stage_how[s], "%s", sel.how[s]);
        plan->stage_fn[s] = d->run;
        if (d->prepare && (st = d->prepare(d, ctx, p, &plan->stage_data[s], fmha__ctx_err(ctx), FMHA_ERR_LEN))) {
            free(plan);
            return st;
        }
        plan->stage_offset[s] = offset;
        offset += ws_round(stage_bytes(d, p, plan->num_threads));
    }
    plan->workspace_bytes = offset;
    fmha__ctx_err(ctx)[0] = '\0';
    *out = plan;
    return FMHA_STATUS_SUCCESS;
}

static fmha_status_t explain_into(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                                  char **text);

fmha_status_t fmha_explain(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                           char **text)
{
    if (!ctx || !text) return FMHA_STATUS_INVALID_ARGUMENT;
    *text = NULL;
    fmha_status_t st = check_plan_args(ctx, p, opt);
    if (st) return st;
    pthread_rwlock_rdlock(&ctx->lock);
    st = explain_into(ctx, p, opt, text);
    pthread_rwlock_unlock(&ctx->lock);
    return st;
}

fmha_status_t fmha_kernel_candidates(fmha_context_t *ctx, const fmha_problem_t *p, int stage, char **names)
{
    if (!ctx) return FMHA_STATUS_INVALID_ARGUMENT;
    if (!names) return fmha__fail(fmha__ctx_err(ctx), FMHA_STATUS_INVALID_ARGUMENT, "names is NULL");
    *names = NULL;
    fmha_status_t st = check_plan_args(ctx, p, NULL);
    if (st || (st = fmha__problem_check(p, fmha__ctx_err(ctx)))) return st;
    strbuf_t sb = {0};
    fmha__sb_printf(&sb, "%s", ""); /* an empty list is "", not NULL */
    pthread_rwlock_rdlock(&ctx->lock);
    st = fmha__candidates(ctx, p, stage, &sb, fmha__ctx_err(ctx));
    pthread_rwlock_unlock(&ctx->lock);
    if (st) {
        free(sb.buf);
        return st;
    }
    fmha__ctx_err(ctx)[0] = '\0';
    *names = sb.buf;
    return FMHA_STATUS_SUCCESS;
}

size_t fmha_problem_class(const fmha_problem_t *p, char *buf, size_t len)
{
    char cls[256] = "";
    if (p) fmha__problem_class(p, cls, sizeof cls);
    if (buf && len) snprintf(buf, len, "%s", cls);
    return strlen(cls);
}

/* explain's account of decode_route: 1 when p is planned as split-KV (*alt the problem,
 * *sel its selection, whose account follows the routing line), else 0, saying why where
 * the route was tried. */
static int explain_route(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                         fmha_problem_t *alt, selection_t *sel, strbuf_t *sb)
{
    strbuf_t detail = {0};
    const int routed = select_routed(ctx, p, opt, alt, sel, &detail);
    if (routed < 0) return 0;
    const char *fname = fmha__i(p, FMHA_PARAM_FAMILY) == FMHA_FAMILY_FWD ? "forward" : "fwd_pagedkv";
    const long long rows =
        fmha__i(p, FMHA_PARAM_SEQLEN_Q) * (fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) / fmha__i(p, FMHA_PARAM_NUM_HEADS_KV));
    if (routed)
        fmha__sb_printf(sb,
                        "decode-shaped %s (%lld query rows per KV head, batch mode, no dropout): planned as "
                        "fwd_splitkv, whose decode kernel reads K and V once per KV head\n%s",
                        fname, rows, detail.buf ? detail.buf : "");
    else
        fmha__sb_printf(sb, "decode-shaped %s: no split-KV kernel runs it (%s); the family's own kernels follow\n",
                        fname, fmha__ctx_err(ctx));
    free(detail.buf);
    return routed;
}

static fmha_status_t explain_into(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                                  char **text)
{
    fmha_status_t st;
    strbuf_t sb = {0};
    if (ctx->target.arch == KA_CPU)
        fmha__sb_printf(&sb, "target cpu backend\n");
    else
        fmha__sb_printf(&sb, "target %s%s, %d SMs, %d bytes shared memory per block\n", fmha_context_arch(ctx),
                        ctx->target.is_virtual ? " (virtual)" : "", ctx->target.sm_count, ctx->target.smem_per_block);
    st = fmha__problem_check(p, fmha__ctx_err(ctx));
    if (st) {
        fmha__sb_printf(&sb, "problem invalid: %s\n", fmha__ctx_err(ctx));
    } else {
        selection_t sel;
        fmha_problem_t alt;
        if (explain_route(ctx, p, opt, &alt, &sel, &sb))
            p = &alt, st = FMHA_STATUS_SUCCESS;
        else
            st = fmha__select(ctx, p, opt ? opt->force_kernel : NULL, &sel, &sb, fmha__ctx_err(ctx));
        if (st) {
            fmha__sb_printf(&sb, "no plan: %s\n", fmha__ctx_err(ctx));
        } else {
            fmha__sb_printf(&sb, "plan: %d stage%s\n", sel.num_stages, sel.num_stages > 1 ? "s" : "");
            size_t offset = 0;
            int threads = ctx->ops->plan_threads(opt ? opt->num_threads : 0);
            for (int s = 0; s < sel.num_stages; s++) {
                const kdesc_t *d = sel.chosen[s];
                size_t bytes = stage_bytes(d, p, threads);
                fmha__sb_printf(&sb, "  stage %d %-10s %s (%s), workspace [%zu, +%zu)%s\n", s,
                                fmha__family_names[sel.family[s]], d->name, sel.how[s], offset, bytes,
                                d->run ? "" : ", not runnable in this build");
                /* a virtual GPU context plans with the CPU's ops but GPU keys: the CUDA
                 * backend describes those */
                const fmha_backend_ops_t *ops = d->key.arch == KA_CPU ? ctx->ops : &fmha__cuda_backend;
                if (ops->describe_stage) ops->describe_stage(&d->key, p, threads, &sb);
                offset += ws_round(bytes);
            }
            fmha__sb_printf(&sb, "workspace %zu bytes\n", offset);
            plan_key_t *key = fmha__plan_key(p, opt);
            fmha_plan_cache_stats_t cs;
            fmha__plan_cache_stats(ctx->plans, &cs);
            if (key)
                fmha__sb_printf(&sb, "plan cache: this problem is %s; %zu of %zu entries, %llu hits, %llu misses\n",
                                fmha__plan_cache_contains(ctx->plans, key) ? "cached (planning it again is a lookup)"
                                                                           : "not cached",
                                cs.entries, cs.capacity, (unsigned long long)cs.hits, (unsigned long long)cs.misses);
            free(key);
        }
    }
    if (sb.oom) {
        free(sb.buf);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    *text = sb.buf;
    return st;
}

void fmha_plan_destroy(fmha_plan_t *plan) { free(plan); }

fmha_status_t fmha_plan_workspace_size(const fmha_plan_t *plan, size_t *bytes)
{
    if (!plan || !bytes) return FMHA_STATUS_INVALID_ARGUMENT;
    *bytes = plan->workspace_bytes;
    return FMHA_STATUS_SUCCESS;
}

const char *fmha_plan_kernel_name(const fmha_plan_t *plan, int stage)
{
    if (!plan || stage < 0 || stage >= plan->num_stages) return NULL;
    return plan->stage_kernel[stage];
}

const char *fmha_plan_last_error(const fmha_plan_t *plan) { return plan ? plan->err : ""; }

/* Byte range [lo, hi) a tensor's elements can touch. Validation bounded the span. */
static void byte_range(const fmha_tensor_desc_t *t, const void *data, uintptr_t *lo, uintptr_t *hi)
{
    int64_t last = 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] == 0) {
            *lo = *hi = (uintptr_t)data; /* empty tensor touches nothing */
            return;
        }
        last += (t->dims[d] - 1) * t->strides[d];
    }
    *lo = (uintptr_t)data;
    *hi = *lo + (uintptr_t)(last + 1) * fmha_dtype_size(t->dtype);
}

/* The tensors a family writes (appendkv's caches are read and written in place). */
static int is_output(fmha_family_t fam, fmha_tensor_role_t r)
{
    switch (fam) {
    case FMHA_FAMILY_APPENDKV: return r == FMHA_TENSOR_K || r == FMHA_TENSOR_V || r == FMHA_TENSOR_Q_ROT;
    case FMHA_FAMILY_BWD:
        return r == FMHA_TENSOR_DQ || r == FMHA_TENSOR_DK || r == FMHA_TENSOR_DV || r == FMHA_TENSOR_DBIAS ||
               r == FMHA_TENSOR_DSINK;
    default: return r == FMHA_TENSOR_O || r == FMHA_TENSOR_LSE || r == FMHA_TENSOR_DROPOUT_MASK;
    }
}

fmha_status_t fmha_plan_execute(const fmha_plan_t *plan, const fmha_tensor_ptr_t *ptrs,
                                size_t n_ptrs, void *workspace, size_t workspace_bytes,
                                struct CUstream_st *stream)
{
    if (!plan) return FMHA_STATUS_INVALID_ARGUMENT;
    char *err = (char *)plan->err; /* per-plan message; see the header's thread note */
    const fmha_problem_t *p = &plan->problem;
    if (!ptrs && n_ptrs)
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT, "ptrs is NULL but n_ptrs is %zu",
                          n_ptrs);
    if (stream && plan->ops->host_data)
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                          "a stream was given to a plan of the %s backend; expected NULL", plan->ops->name);

    void *data[FMHA_ROLE_SLOTS] = {0};
    for (size_t i = 0; i < n_ptrs; i++) {
        fmha_tensor_role_t r = ptrs[i].role;
        const char *rn = fmha_tensor_role_name(r);
        if (!rn)
            return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT, "ptrs[%zu]: unknown role %d", i,
                              (int)r);
        if (!fmha__t(p, r))
            return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                              "ptrs[%zu]: tensor %s is not part of the problem", i, rn);
        if (data[r])
            return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                              "ptrs[%zu]: tensor %s is given twice", i, rn);
        if (!ptrs[i].data)
            return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT, "ptrs[%zu]: tensor %s is NULL",
                              i, rn);
        data[r] = ptrs[i].data;
    }
    for (int r = 1; r < FMHA_ROLE_SLOTS; r++)
        if (fmha__t(p, (fmha_tensor_role_t)r) && !data[r])
            return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                              "no pointer for tensor %s, which the problem describes",
                              fmha_tensor_role_name((fmha_tensor_role_t)r));

    /* An output that overlaps any other tensor would be read while written. */
    const fmha_family_t fam = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    for (int o = 1; o < FMHA_ROLE_SLOTS; o++) {
        const fmha_tensor_desc_t *to = fmha__t(p, (fmha_tensor_role_t)o);
        if (!to || !is_output(fam, (fmha_tensor_role_t)o)) continue;
        uintptr_t olo, ohi;
        byte_range(to, data[o], &olo, &ohi);
        for (int r = 1; r < FMHA_ROLE_SLOTS; r++) {
            const fmha_tensor_desc_t *tr = fmha__t(p, (fmha_tensor_role_t)r);
            if (r == o || !tr) continue;
            uintptr_t rlo, rhi;
            byte_range(tr, data[r], &rlo, &rhi);
            if (olo < rhi && rlo < ohi)
                return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                                  "[rule tensor.alias] output %s overlaps tensor %s in memory; "
                                  "expected disjoint buffers",
                                  fmha_tensor_role_name((fmha_tensor_role_t)o),
                                  fmha_tensor_role_name((fmha_tensor_role_t)r));
        }
    }

    if (workspace_bytes < plan->workspace_bytes)
        return fmha__fail(err, FMHA_STATUS_WORKSPACE_TOO_SMALL,
                          "workspace is %zu bytes; the plan needs %zu", workspace_bytes,
                          plan->workspace_bytes);
    if (plan->workspace_bytes && !workspace)
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT,
                          "workspace is NULL; the plan needs %zu bytes", plan->workspace_bytes);

    if (plan->ops->host_data || plan->check_index) {
        fmha_status_t st = plan->ops->host_data ? fmha__validate_data(p, data, err, FMHA_ERR_LEN)
                                                : fmha__validate_device_data(plan, data, stream, err, FMHA_ERR_LEN);
        if (st) return st;
    }

    for (int s = 0; s < plan->num_stages; s++) {
        void *ws = plan->workspace_bytes ? (char *)workspace + plan->stage_offset[s] : NULL;
        fmha_status_t st = plan->stage_fn[s](plan, s, data, ws, stream, err, FMHA_ERR_LEN);
        if (st) return st;
    }
    return FMHA_STATUS_SUCCESS;
}

size_t fmha_plan_describe(const fmha_plan_t *plan, char *buf, size_t len)
{
    if (buf && len) buf[0] = '\0';
    if (!plan) return 0;
    strbuf_t t = {0};
    const fmha_problem_t *p = &plan->problem;
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    fmha__sb_printf(&t, "family %s, %s mode, backend %s\n",
        fmha_family_name((fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY)), group ? "group" : "batch",
        plan->ops->name);
    fmha__sb_printf(&t, "  batch %lld, heads q %lld kv %lld, %s q %lld kv %lld, head dim qk %lld v %lld\n",
        (long long)fmha__i(p, FMHA_PARAM_BATCH), (long long)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q),
        (long long)fmha__i(p, FMHA_PARAM_NUM_HEADS_KV), group ? "max seqlen" : "seqlen",
        (long long)fmha__i(p, FMHA_PARAM_SEQLEN_Q), (long long)fmha__i(p, FMHA_PARAM_SEQLEN_KV),
        (long long)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK), (long long)fmha__i(p, FMHA_PARAM_HEAD_DIM_V));
    fmha_mask_t m = fmha__problem_mask(p);
    fmha__sb_printf(&t, "  scale %.6g, mask window (%lld, %lld) %s, sink tokens %lld\n",
        fmha__effective_scale(p), (long long)m.left, (long long)m.right,
        m.align == FMHA_MASK_ALIGN_BOTTOM_RIGHT ? "bottom-right" : "top-left",
        (long long)m.sink_tokens);
    if (fmha__f(p, FMHA_PARAM_SOFTCAP) > 0) fmha__sb_printf(&t, "  softcap %g\n", fmha__f(p, FMHA_PARAM_SOFTCAP));
    if (fmha__f(p, FMHA_PARAM_DROPOUT_P) > 0)
        fmha__sb_printf(&t, "  dropout p %g, seed %llu, offset %llu\n", fmha__f(p, FMHA_PARAM_DROPOUT_P),
            (unsigned long long)fmha__i(p, FMHA_PARAM_DROPOUT_SEED),
            (unsigned long long)fmha__i(p, FMHA_PARAM_DROPOUT_OFFSET));
    for (int r = 1; r < FMHA_ROLE_SLOTS; r++) {
        const fmha_tensor_desc_t *d = fmha__t(p, (fmha_tensor_role_t)r);
        if (!d) continue;
        fmha__sb_printf(&t, "  %-13s %-5s dims [", fmha_tensor_role_name((fmha_tensor_role_t)r),
            fmha_dtype_name(d->dtype));
        for (int k = 0; k < d->rank; k++) fmha__sb_printf(&t, k ? ", %lld" : "%lld", (long long)d->dims[k]);
        fmha__sb_printf(&t, "] strides [");
        for (int k = 0; k < d->rank; k++) fmha__sb_printf(&t, k ? ", %lld" : "%lld", (long long)d->strides[k]);
        fmha__sb_printf(&t, "]\n");
    }
    const fmha_family_t fam = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    if (plan->ops->describe_plan) plan->ops->describe_plan(plan, &t);
    if (fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0)
        fmha__sb_printf(&t, "  paged KV: page_size %lld, %s pages, %s\n", (long long)fmha__i(p, FMHA_PARAM_PAGE_SIZE),
                        fmha__i(p, FMHA_PARAM_KV_LAYOUT) == FMHA_KV_LAYOUT_HND ? "HND" : "NHD",
                        fmha__i(p, FMHA_PARAM_KV_LOOKUP) == FMHA_KV_LOOKUP_CSR ? "CSR page lists" : "block table");
    if (fam == FMHA_FAMILY_APPENDKV)
        fmha__sb_printf(&t, "  append %lld tokens, rotary_dim %lld%s\n", (long long)fmha__i(p, FMHA_PARAM_SEQLEN_KNEW),
                        (long long)fmha__i(p, FMHA_PARAM_ROTARY_DIM),
                        fmha__i(p, FMHA_PARAM_ROTARY_DIM) ? (fmha__i(p, FMHA_PARAM_ROTARY_INTERLEAVED) ? " (interleaved)" : " (half-rotated)") : "");
    if (fam == FMHA_FAMILY_BWD && fmha__i(p, FMHA_PARAM_DETERMINISTIC)) fmha__sb_printf(&t, "  deterministic\n");
    for (int s = 0; s < plan->num_stages; s++)
        fmha__sb_printf(&t, "  stage %d: %s (%s; workspace offset %zu)\n", s, plan->stage_kernel[s], plan->stage_how[s],
                        plan->stage_offset[s]);
    fmha__sb_printf(&t, "  workspace %zu bytes (%d threads)\n", plan->workspace_bytes, plan->num_threads);
    size_t n = t.len;
    if (t.buf) fmha__copy_msg(buf, len, t.buf);
    free(t.buf);
    return t.oom ? 0 : n;
}
