/* SPDX-License-Identifier: MIT */
/* select.c: see select.h. */
#include "select.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "heuristics.h"
#include "specs.h"

/* The kernel families of each API family's stages, in execution order. */
static int stages_of(fmha_family_t f, kfamily_t *out)
{
    switch (f) {
    case FMHA_FAMILY_FWD: out[0] = KF_FWD; return 1;
    case FMHA_FAMILY_FWD_SPLITKV: out[0] = KF_SPLITKV, out[1] = KF_COMBINE; return 2;
    case FMHA_FAMILY_FWD_PAGEDKV: out[0] = KF_PAGEDKV; return 1;
    case FMHA_FAMILY_APPENDKV: out[0] = KF_APPENDKV; return 1;
    case FMHA_FAMILY_BATCH_PREFILL: out[0] = KF_PREFILL; return 1;
    case FMHA_FAMILY_BWD: out[0] = KF_BWD_DOT_DO_O, out[1] = KF_BWD_DQ_DK_DV, out[2] = KF_BWD_CONVERT_DQ; return 3;
    }
    return 0;
}

static int kdtype_of(fmha_dtype_t d)
{
    switch (d) {
    case FMHA_DTYPE_FP16: return KD_FP16;
    case FMHA_DTYPE_BF16: return KD_BF16;
    case FMHA_DTYPE_FP32: return KD_FP32;
    case FMHA_DTYPE_FP8_E4M3: return KD_FP8;
    default: return -1;
    }
}

/* The signature a kernel needs to compute this problem's stage. */
static void problem_signature(const fmha_problem_t *p, kfamily_t fam, fmha_key_t *k)
{
    fmha__key_default(k);
    k->family = fam;
    /* the element type: q's, or for appendkv (q optional) the new keys' */
    const fmha_tensor_desc_t *main = fmha__t(p, FMHA_TENSOR_Q) ? fmha__t(p, FMHA_TENSOR_Q) : fmha__t(p, FMHA_TENSOR_K_NEW);
    k->dtype = main ? kdtype_of(main->dtype) : -1;
    k->hdim_qk = (int32_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_QK);
    k->hdim_v = (int32_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_V);
    k->mode = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP ? KM_GROUP : KM_BATCH;
    fmha_mask_t m = fmha__problem_mask(p);
    k->mask = (m.left < 0 && m.right < 0 && m.sink_tokens == 0)   ? KMASK_NONE
              : (m.left < 0 && m.right == 0 && m.sink_tokens == 0) ? KMASK_CAUSAL
                                                                   : KMASK_WINDOW;
    k->bias = fmha__t(p, FMHA_TENSOR_BIAS) ? KB_ELEMENTWISE : fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES) ? KB_ALIBI : KB_NONE;
    k->lse = fmha__t(p, FMHA_TENSOR_LSE) != NULL;
    k->dropout = fmha__f(p, FMHA_PARAM_DROPOUT_P) > 0 || fmha__t(p, FMHA_TENSOR_DROPOUT_MASK) != NULL;
    k->softcap = fmha__f(p, FMHA_PARAM_SOFTCAP) > 0;
    k->sink = fmha__t(p, FMHA_TENSOR_SINK) != NULL;
    /* how keys are found, how new keys are rotated, the backward's modes: a paged problem
     * must not match a kernel that reads a contiguous cache */
    if (fmha__i(p, FMHA_PARAM_PAGE_SIZE) > 0)
        k->paged = fmha__i(p, FMHA_PARAM_KV_LOOKUP) == FMHA_KV_LOOKUP_CSR ? KP_CSR : KP_VLLM;
    if (fmha__i(p, FMHA_PARAM_ROTARY_DIM) > 0)
        k->rope = fmha__i(p, FMHA_PARAM_ROTARY_INTERLEAVED) ? KR_INTERLEAVED : KR_HALF;
    k->deterministic = fmha__i(p, FMHA_PARAM_DETERMINISTIC) != 0;
    k->dbias = fmha__t(p, FMHA_TENSOR_DBIAS) != NULL;
    /* A stage's keys carry only their family's features (kset.c's axes): the split stage
     * leaves the LSE and the element-wise stages the mask to others. The rest take the
     * default, and element-wise stages are keyed on one head dim as enumerated. */
    fmha_key_t def;
    fmha__key_default(&def);
    for (int f = KFIELD_mode; f < KFIELD_COUNT_; f++)
        if (fmha__kfield((kfield_t)f)->is_signature && !fmha__family_has_axis(fam, (kfield_t)f))
            fmha__key_set(k, (kfield_t)f, fmha__key_get(&def, (kfield_t)f));
    if (fam == KF_COMBINE || fam == KF_BWD_DOT_DO_O) k->hdim_qk = k->hdim_v;
    if (fam == KF_BWD_CONVERT_DQ) k->hdim_v = k->hdim_qk;
}

/* Why cannot d run stage `want` of problem p on the context's target? NULL if it can. */
static const char *reject_reason(const fmha_context_t *ctx, const kdesc_t *d, const fmha_key_t *want,
                                 const fmha_problem_t *p, char *buf, size_t len)
{
    const fmha_key_t *k = &d->key;
    char a[32], b[32];
    if (k->family != want->family) return NULL; /* not a candidate of this stage: skipped */
    if (k->arch != ctx->target.arch) {
        snprintf(buf, len, "built for %s; the context targets %s", fmha__arch_names[k->arch],
                 fmha__arch_names[ctx->target.arch]);
        return buf;
    }
    if (d->generic) {
        if (!(fmha__arch_spec((karch_t)k->arch)->dtypes & (1u << want->dtype))) {
            snprintf(buf, len, "dtype %s is not supported by this backend", fmha__dtype_names[want->dtype]);
            return buf;
        }
        return NULL;
    }
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        const kfield_info_t *fi = fmha__kfield((kfield_t)f);
        if (!fi->is_signature) continue;
        int32_t kv = fmha__key_get(k, (kfield_t)f), pv = fmha__key_get(want, (kfield_t)f);
        if (kv != pv) {
            snprintf(buf, len, "%s is %s; the problem needs %s", fi->name,
                     fmha__kfield_value_text((kfield_t)f, kv, a, sizeof a),
                     fmha__kfield_value_text((kfield_t)f, pv, b, sizeof b));
            return buf;
        }
    }
    if (k->even_k) {
        int64_t sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
        if (sk % k->tile_n) {
            snprintf(buf, len, "even_k needs seqlen_kv (%lld) to be a multiple of tile_n %d", (long long)sk, k->tile_n);
            return buf;
        }
    }
    int smem = fmha__smem_bytes(k);
    if (smem > ctx->target.smem_per_block) {
        snprintf(buf, len, "needs %d bytes of shared memory; the device allows %d", smem, ctx->target.smem_per_block);
        return buf;
    }
    return d->check ? d->check(d, p, &ctx->target, buf, len) : NULL;
}

static void problem_work(const fmha_problem_t *p, work_t *w)
{
    w->batch = fmha__i(p, FMHA_PARAM_BATCH);
    w->heads_q = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    w->heads_kv = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    w->seqlen_q = fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    w->seqlen_kv = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    fmha_mask_t m = fmha__problem_mask(p);
    /* visible fraction of the (max) square; exact for batch mode, an estimate in group mode */
    double pairs = (double)fmha_mask_visible_pairs(&m, w->seqlen_q, w->seqlen_kv);
    w->visible_fraction = pairs / ((double)w->seqlen_q * (double)w->seqlen_kv);
}

typedef struct cand {
    const kdesc_t *d;
    double cost;
    int occupancy;
    double wave_eff, padding;
} cand_t;

typedef struct collect {
    /* the rejected candidate that differs from the problem in the fewest signature
     * fields, and its reason: what "no kernel" reports */
    int nearest_distance;
    char nearest[FMHA_KERNEL_NAME_LEN + 256];
    const fmha_context_t *ctx;
    const fmha_problem_t *p;
    const fmha_key_t *want;
    const hw_t *hw;
    const work_t *work;
    cand_t *cands;
    size_t n, cap, seen;
    strbuf_t *explain;
    int oom;
} collect_t;

static void visit(const kdesc_t *d, void *user)
{
    collect_t *c = user;
    if (d->key.family != c->want->family) return;
    c->seen++;
    char why[256];
    const char *r = reject_reason(c->ctx, d, c->want, c->p, why, sizeof why);
    if (r) {
        if (c->explain) fmha__sb_printf(c->explain, "    rejected %s: %s\n", d->name, r);
        int dist = d->key.arch != c->ctx->target.arch ? 1000 : 0;
        for (int f = 0; f < KFIELD_COUNT_; f++)
            if (fmha__kfield((kfield_t)f)->is_signature)
                dist += fmha__key_get(&d->key, (kfield_t)f) != fmha__key_get(c->want, (kfield_t)f);
        if (dist < c->nearest_distance) {
            c->nearest_distance = dist;
            snprintf(c->nearest, sizeof c->nearest, "%s: %s", d->name, r);
        }
        return;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        cand_t *nc = realloc(c->cands, cap * sizeof *nc);
        if (!nc) {
            c->oom = 1;
            return;
        }
        c->cands = nc;
        c->cap = cap;
    }
    cand_t *x = &c->cands[c->n++];
    x->d = d;
    x->cost = fmha__heur_cost(&d->key, c->work, c->hw);
    x->occupancy = fmha__heur_occupancy(&d->key, c->hw);
    int64_t ctas = c->work->batch * c->work->heads_q *
                   ((c->work->seqlen_q + d->key.tile_m - 1) / (d->key.tile_m > 0 ? d->key.tile_m : 1));
    x->wave_eff = fmha__heur_wave_efficiency(ctas, c->hw->sm_count, x->occupancy);
    x->padding = fmha__heur_padding_waste(c->work->seqlen_q, d->key.tile_m);
}

/* Lower cost first; ties keep registration order, which is the tile tables' order
 * (measured-best tiles first): callers scan in order and replace only when strictly
 * better. */
static int better(const cand_t *a, const cand_t *b) { return a->cost < b->cost; }

fmha_status_t fmha__select(fmha_context_t *ctx, const fmha_problem_t *p, const char *force_kernel,
                           selection_t *sel, strbuf_t *explain, char *err)
{
    memset(sel, 0, sizeof *sel);
    fmha_family_t api = (fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY);
    kfamily_t fams[FMHA_MAX_STAGES] = {KF_FWD};
    sel->num_stages = stages_of(api, fams);
    hw_t hw = {ctx->target.sm_count, ctx->target.smem_per_sm, ctx->target.regs_per_sm};
    work_t work;
    problem_work(p, &work);
    char cls[256];
    fmha__problem_class(p, cls, sizeof cls);
    const char *tuned = fmha__tune_lookup(ctx, cls);
    if (explain) fmha__sb_printf(explain, "problem class %s\n", cls);

    /* A forced kernel replaces the selector in the stage of its family; the other stages
     * of a multi-stage plan select as usual. A name the registry does not hold is forced on
     * every stage (and each refuses it). */
    int forced_stage = -1;
    const kdesc_t *forced = force_kernel ? fmha__registry_find(ctx->registry, force_kernel) : NULL;
    for (int s = 0; force_kernel && s < sel->num_stages; s++)
        if (!forced || (int)fams[s] == forced->key.family) forced_stage = s;
    if (forced && forced_stage < 0) {
        char stages[128] = "";
        for (int s = 0; s < sel->num_stages; s++)
            snprintf(stages + strlen(stages), sizeof stages - strlen(stages), "%s%s", s ? ", " : "",
                     fmha__family_names[fams[s]]);
        return fmha__fail(err, FMHA_STATUS_NOT_SUPPORTED,
                          "forced kernel '%s' is a %s kernel and belongs to no stage of this problem (stages: %s)",
                          force_kernel, fmha__family_names[forced->key.family], stages);
    }

    for (int s = 0; s < sel->num_stages; s++) {
        const char *force = !forced || s == forced_stage ? force_kernel : NULL;
        fmha_key_t want;
        problem_signature(p, fams[s], &want);
        sel->family[s] = fams[s];
        collect_t c = {1 << 30, "", ctx, p, &want, &hw, &work, NULL, 0, 0, 0, explain, 0};
        if (explain) fmha__sb_printf(explain, "stage %d (%s):\n", s, fmha__family_names[fams[s]]);
        fmha__registry_each(ctx->registry, visit, &c);
        if (c.oom) {
            free(c.cands);
            return fmha__fail(err, FMHA_STATUS_ALLOC_FAILED, "out of memory while selecting");
        }
        const cand_t *best = NULL;
        const char *how = "lowest estimated cost";
        for (size_t i = 0; i < c.n; i++) {
            const cand_t *x = &c.cands[i];
            if (force && strcmp(x->d->name, force) == 0) {
                best = x;
                how = "forced by name";
                break;
            }
            if (!force && tuned && strcmp(x->d->name, tuned) == 0) {
                best = x;
                how = "tuning database";
                break;
            }
        }
        if (!best && !force)
            for (size_t i = 0; i < c.n; i++)
                if (!best || better(&c.cands[i], best)) best = &c.cands[i];
        if (explain) {
            fmha__sb_printf(explain, "  %zu candidates, %zu can run it\n", c.seen, c.n);
            for (size_t i = 0; i < c.n; i++) {
                const cand_t *x = &c.cands[i];
                fmha__sb_printf(explain, "    %s %s: cost %.4g, occupancy %d, wave efficiency %.2f, padding %.2f\n",
                                x == best ? "*" : " ", x->d->name, x->cost, x->occupancy, x->wave_eff, x->padding);
            }
        }
        if (!best) {
            free(c.cands);
            if (force)
                return fmha__fail(err, FMHA_STATUS_NOT_SUPPORTED,
                                  "forced kernel '%s' is not registered for stage %s or cannot run this problem (fmha explain lists why)",
                                  force, fmha__family_names[fams[s]]);
            const char *other = c.seen ? NULL : fmha__backend_with_family(ctx, fams[s]);
            if (other)
                return fmha__fail(err, FMHA_STATUS_NOT_SUPPORTED,
                                  "the %s backend has no kernel for stage %s on %s; the %s backend runs it: create "
                                  "the context on backend %s",
                                  ctx->backend == FMHA_BACKEND_CUDA ? "cuda" : "cpu", fmha__family_names[fams[s]],
                                  fmha__arch_names[ctx->target.arch], other, other);
            return fmha__fail(err, FMHA_STATUS_NOT_SUPPORTED,
                              "no registered kernel runs stage %s of this problem on %s (%zu candidates; nearest: %s; "
                              "fmha explain lists all)",
                              fmha__family_names[fams[s]], fmha__arch_names[ctx->target.arch], c.seen,
                              c.nearest[0] ? c.nearest : "none");
        }
        sel->chosen[s] = best->d;
        snprintf(sel->how[s], sizeof sel->how[s], "%s", how);
        if (explain) fmha__sb_printf(explain, "  chosen: %s (%s)\n", best->d->name, how);
        free(c.cands);
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__candidates(fmha_context_t *ctx, const fmha_problem_t *p, int stage, strbuf_t *out, char *err)
{
    kfamily_t fams[FMHA_MAX_STAGES] = {KF_FWD};
    const int n = stages_of((fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY), fams);
    if (stage < 0 || stage >= n)
        return fmha__fail(err, FMHA_STATUS_INVALID_ARGUMENT, "stage %d does not exist: this problem has %d stage%s (0 to %d)",
                          stage, n, n == 1 ? "" : "s", n - 1);
    hw_t hw = {ctx->target.sm_count, ctx->target.smem_per_sm, ctx->target.regs_per_sm};
    work_t work;
    problem_work(p, &work);
    fmha_key_t want;
    problem_signature(p, fams[stage], &want);
    collect_t c = {1 << 30, "", ctx, p, &want, &hw, &work, NULL, 0, 0, 0, NULL, 0};
    fmha__registry_each(ctx->registry, visit, &c);
    for (size_t i = 0; !c.oom && i < c.n; i++) fmha__sb_printf(out, "%s\n", c.cands[i].d->name);
    free(c.cands);
    if (c.oom || out->oom) return fmha__fail(err, FMHA_STATUS_ALLOC_FAILED, "out of memory while listing candidates");
    return FMHA_STATUS_SUCCESS;
}

static int64_t pow2_ceil(int64_t x)
{
    int64_t p = 1;
    while (p < x) p <<= 1;
    return p;
}

void fmha__problem_class(const fmha_problem_t *p, char *buf, size_t len)
{
    fmha_key_t k;
    problem_signature(p, KF_FWD, &k);
    char tmp[32];
    /* the features that pick different kernels, so that one entry can serve every problem
     * of its class: "" when absent */
    const int64_t rot = fmha__i(p, FMHA_PARAM_ROTARY_DIM), page = fmha__i(p, FMHA_PARAM_PAGE_SIZE);
    char features[160];
    snprintf(features, sizeof features, "%s%s%s%s%s%s%s%s%s%s",
             fmha__t(p, FMHA_TENSOR_BIAS) ? "_bias" : fmha__t(p, FMHA_TENSOR_ALIBI_SLOPES) ? "_alibi" : "",
             fmha__t(p, FMHA_TENSOR_LSE) ? "_lse" : "",
             fmha__f(p, FMHA_PARAM_DROPOUT_P) > 0 || fmha__t(p, FMHA_TENSOR_DROPOUT_MASK) ? "_dropout" : "",
             fmha__f(p, FMHA_PARAM_SOFTCAP) > 0 ? "_softcap" : "", fmha__t(p, FMHA_TENSOR_SINK) ? "_sink" : "",
             page <= 0 ? "" : fmha__i(p, FMHA_PARAM_KV_LOOKUP) == FMHA_KV_LOOKUP_CSR ? "_pagecsr" : "_pagevllm",
             rot <= 0 ? "" : fmha__i(p, FMHA_PARAM_ROTARY_INTERLEAVED) ? "_ropeinter" : "_ropehalf",
             fmha__i(p, FMHA_PARAM_DETERMINISTIC) ? "_deterministic" : "", fmha__t(p, FMHA_TENSOR_DBIAS) ? "_dbias" : "",
             fmha__i(p, FMHA_PARAM_NUM_HEADS_KV) != fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) ? "_gqa" : "");
    snprintf(buf, len, "%s_%s_hq%d_hv%d_%s_%s%s_sq%lld_sk%lld",
             fmha_family_name((fmha_family_t)fmha__i(p, FMHA_PARAM_FAMILY)),
             k.dtype >= 0 ? fmha__dtype_names[k.dtype] : "?", k.hdim_qk, k.hdim_v,
             fmha__kfield_value_text(KFIELD_mask, k.mask, tmp, sizeof tmp), k.mode ? "group" : "batch", features,
             (long long)pow2_ceil(fmha__i(p, FMHA_PARAM_SEQLEN_Q)), (long long)pow2_ceil(fmha__i(p, FMHA_PARAM_SEQLEN_KV)));
}

/* ------------------------------------------------------------ tuning database */

typedef struct tune_entry {
    char *cls, *kernel;
} tune_entry_t;

struct tune_db {
    tune_entry_t *e;
    size_t n;
};

void fmha__tune_free(struct tune_db *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->e[i].cls), free(t->e[i].kernel);
    free(t->e);
    free(t);
}

int fmha__tune_load(fmha_context_t *ctx, const char *path, char *why, size_t len)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(why, len, "tuning database '%s': %s (line %d)", path, jerr.text, jerr.line);
        return -1;
    }
    json_t *entries = json_object_get(root, "entries");
    if (!json_is_array(entries)) {
        json_decref(root);
        snprintf(why, len, "tuning database '%s': expected {\"entries\": [{\"class\": ..., \"kernel\": ...}]}", path);
        return -1;
    }
    struct tune_db *t = calloc(1, sizeof *t);
    t->e = calloc(json_array_size(entries) + 1, sizeof *t->e);
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        const char *cls = json_string_value(json_object_get(e, "class"));
        const char *kernel = json_string_value(json_object_get(e, "kernel"));
        if (!cls || !kernel) {
            snprintf(why, len, "tuning database '%s': entry %zu needs string fields \"class\" and \"kernel\"", path, i);
            fmha__tune_free(t);
            json_decref(root);
            return -1;
        }
        t->e[t->n].cls = strdup(cls);
        t->e[t->n].kernel = strdup(kernel);
        t->n++;
    }
    json_decref(root);
    fmha__tune_free(ctx->tune);
    ctx->tune = t;
    return 0;
}

const char *fmha__tune_lookup(const fmha_context_t *ctx, const char *cls)
{
    if (!ctx->tune) return NULL;
    for (size_t i = 0; i < ctx->tune->n; i++)
        if (strcmp(ctx->tune->e[i].cls, cls) == 0) return ctx->tune->e[i].kernel;
    return NULL;
}
