/* SPDX-License-Identifier: MIT */
/* kset.c: kernel sets and enumeration; see kset.h. */
#include "kset.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"
#include "specs.h"

void fmha__kset_init(kset_t *s) { memset(s, 0, sizeof *s); }

void fmha__kset_free(kset_t *s)
{
    for (size_t i = 0; i < s->count; i++) free(s->names[i]);
    free(s->keys);
    free(s->names);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

static int rehash(kset_t *s, size_t nslots)
{
    size_t *slots = malloc(nslots * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < nslots; i++) slots[i] = SIZE_MAX;
    for (size_t i = 0; i < s->count; i++) {
        size_t h = (size_t)fmha__key_hash(&s->keys[i]) & (nslots - 1);
        while (slots[h] != SIZE_MAX) h = (h + 1) & (nslots - 1);
        slots[h] = i;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    return 0;
}

long fmha__kset_find(const kset_t *s, const fmha_key_t *k)
{
    if (!s->nslots) return -1;
    size_t h = (size_t)fmha__key_hash(k) & (s->nslots - 1);
    for (; s->slots[h] != SIZE_MAX; h = (h + 1) & (s->nslots - 1))
        if (fmha__key_equal(&s->keys[s->slots[h]], k)) return (long)s->slots[h];
    return -1;
}

int fmha__kset_add(kset_t *s, const fmha_key_t *k)
{
    if (fmha__kset_find(s, k) >= 0) return 0;
    if (s->count == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        fmha_key_t *keys = realloc(s->keys, cap * sizeof *keys);
        if (!keys) return -1;
        s->keys = keys;
        char **names = realloc(s->names, cap * sizeof *names);
        if (!names) return -1;
        s->names = names;
        s->cap = cap;
    }
    if (2 * (s->count + 1) > s->nslots && rehash(s, s->nslots ? 2 * s->nslots : 128)) return -1;
    char name[512];
    fmha__key_name(k, name, sizeof name);
    s->names[s->count] = strdup(name);
    if (!s->names[s->count]) return -1;
    s->keys[s->count] = *k;
    size_t h = (size_t)fmha__key_hash(k) & (s->nslots - 1);
    while (s->slots[h] != SIZE_MAX) h = (h + 1) & (s->nslots - 1);
    s->slots[h] = s->count++;
    return 1;
}

int fmha__kset_merge(kset_t *dst, const kset_t *src)
{
    for (size_t i = 0; i < src->count; i++)
        if (fmha__kset_add(dst, &src->keys[i]) < 0) return -1;
    return 0;
}

/* ------------------------------------------------------------------ receipts */

const char *const fmha__receipt_names[RECEIPT_COUNT_] = {"default", "flash", "pytorch", "serving",
                                                         "training", "fp8", "all"};

int fmha__receipt_lookup(const char *name)
{
    for (int r = 0; r < RECEIPT_COUNT_; r++)
        if (strcmp(fmha__receipt_names[r], name) == 0) return r;
    return -1;
}

#define FAM(x) (1 << (x))
#define BWD_FAMS (FAM(KF_BWD_DOT_DO_O) | FAM(KF_BWD_DQ_DK_DV) | FAM(KF_BWD_CONVERT_DQ))
#define INFER_FAMS (FAM(KF_FWD) | FAM(KF_SPLITKV) | FAM(KF_COMBINE) | FAM(KF_PAGEDKV) | FAM(KF_APPENDKV) | FAM(KF_PREFILL))

int fmha__receipt_accepts(receipt_t r, const fmha_key_t *k, int tile_rank)
{
    const int fam = FAM(k->family), half = k->dtype == KD_FP16 || k->dtype == KD_BF16;
    switch (r) {
    case RECEIPT_ALL: return 1;
    case RECEIPT_FP8: return k->dtype == KD_FP8;
    case RECEIPT_DEFAULT:
        /* What a build precompiles: fp16/bf16, hd 64/128/256, the preferred tile, the
         * common features (masks, lse, varlen, vLLM pages, both RoPE styles). */
        return half && tile_rank == 0 && k->hdim_qk == k->hdim_v &&
               (k->hdim_qk == 64 || k->hdim_qk == 128 || k->hdim_qk == 256) && !k->bias && !k->dropout &&
               !k->softcap && !k->sink && k->paged != KP_CSR && !k->dbias && !k->deterministic;
    case RECEIPT_FLASH: /* FlashAttention 2's surface: no elementwise bias, no sinks */
        return half && (fam & (INFER_FAMS | BWD_FAMS)) && fam != FAM(KF_PREFILL) && k->bias != KB_ELEMENTWISE &&
               !k->sink && k->paged != KP_CSR;
    case RECEIPT_PYTORCH: /* SDPA: fwd/bwd, elementwise bias (attn_mask), no softcap */
        return half && (fam & (FAM(KF_FWD) | BWD_FAMS)) && k->bias != KB_ALIBI && k->mask != KMASK_WINDOW &&
               !k->softcap && !k->sink;
    case RECEIPT_SERVING: /* inference: no dropout, fp8 welcome */
        return (fam & INFER_FAMS) && !k->dropout && k->bias != KB_ELEMENTWISE;
    case RECEIPT_TRAINING:
        return half && (fam & (FAM(KF_FWD) | BWD_FAMS)) && !k->sink && !k->paged;
    case RECEIPT_COUNT_: break;
    }
    return 0;
}

/* ---------------------------------------------------------------- enumeration */

/* Feature axes per family: each axis lists the values enumeration tries. */
typedef struct axis {
    kfield_t field;
    int n;
    int32_t values[4];
} axis_t;

static int family_axes(kfamily_t fam, axis_t *ax)
{
    int n = 0;
#define AX(f, ...)                                                    \
    do {                                                              \
        int32_t v_[] = {__VA_ARGS__};                                 \
        ax[n].field = KFIELD_##f;                                     \
        ax[n].n = (int)(sizeof v_ / sizeof v_[0]);                    \
        memcpy(ax[n].values, v_, sizeof v_);                          \
        n++;                                                          \
    } while (0)
    switch (fam) {
    case KF_FWD:
    case KF_PAGEDKV:
    case KF_PREFILL:
    case KF_SPLITKV:
    case KF_BWD_DQ_DK_DV:
        AX(mode, KM_BATCH, KM_GROUP);
        AX(mask, KMASK_NONE, KMASK_CAUSAL, KMASK_WINDOW);
        AX(bias, KB_NONE, KB_ELEMENTWISE, KB_ALIBI);
        AX(softcap, 0, 1);
        AX(sink, 0, 1);
        if (fam != KF_BWD_DQ_DK_DV && fam != KF_SPLITKV) AX(lse, 0, 1);
        if (fam == KF_FWD || fam == KF_BWD_DQ_DK_DV) AX(dropout, 0, 1);
        if (fam == KF_PAGEDKV || fam == KF_PREFILL) AX(paged, KP_VLLM, KP_CSR);
        if (fam == KF_SPLITKV) AX(paged, KP_NONE, KP_VLLM, KP_CSR);
        if (fam == KF_SPLITKV) AX(max_splits_log2, 7);
        if (fam == KF_BWD_DQ_DK_DV) AX(dbias, 0, 1);
        if (fam == KF_BWD_DQ_DK_DV) AX(deterministic, 0, 1);
        break;
    case KF_COMBINE:
        AX(mode, KM_BATCH, KM_GROUP);
        AX(lse, 0, 1);
        AX(max_splits_log2, 7);
        break;
    case KF_APPENDKV:
        AX(paged, KP_NONE, KP_VLLM, KP_CSR);
        AX(rope, KR_NONE, KR_INTERLEAVED, KR_HALF);
        break;
    case KF_BWD_DOT_DO_O: AX(mode, KM_BATCH, KM_GROUP); break;
    case KF_BWD_CONVERT_DQ:
        AX(mode, KM_BATCH, KM_GROUP);
        AX(deterministic, 0, 1);
        break;
    case KF_COUNT_: break;
    }
#undef AX
    return n;
}

int fmha__family_has_axis(kfamily_t fam, kfield_t f)
{
    axis_t ax[12];
    const int n = family_axes(fam, ax);
    for (int i = 0; i < n; i++)
        if (ax[i].field == f) return 1;
    return 0;
}

typedef struct enum_ctx {
    receipt_t receipt;
    const kfilter_t *filter;
    kset_t *out;
    int tile_layout;   /* the tile's TILE_* layout restriction */
    int tile_rank[2];  /* its rank among the arch's tiles for contiguous [0] and paged [1] keys */
    int oom;
} enum_ctx_t;

static void product(enum_ctx_t *c, fmha_key_t *k, const axis_t *ax, int n, int i)
{
    if (c->oom) return;
    if (i == n) {
        char why[256];
        const int paged = k->paged != KP_NONE;
        if (c->tile_layout == (paged ? TILE_CONTIGUOUS : TILE_PAGED)) return;
        if (fmha__key_check(k, why, sizeof why)) return;
        if (!fmha__receipt_accepts(c->receipt, k, c->tile_rank[paged])) return;
        if (c->filter && !fmha__filter_eval(c->filter, k)) return;
        if (fmha__kset_add(c->out, k) < 0) c->oom = 1;
        return;
    }
    for (int v = 0; v < ax[i].n; v++) {
        fmha__key_set(k, ax[i].field, ax[i].values[v]);
        product(c, k, ax, n, i + 1);
    }
}

int fmha__enumerate(karch_t arch, receipt_t r, const kfilter_t *filter, kset_t *out, char *why, size_t len)
{
    const arch_spec_t *spec = fmha__arch_spec(arch);
    if (!spec || arch == KA_CPU) {
        snprintf(why, len, "enumeration covers GPU archs (sm80, sm86, sm89, sm90); the cpu backend has one generic kernel per family");
        return -1;
    }
    enum_ctx_t c = {r, filter, out, TILE_ANY_LAYOUT, {0, 0}, 0};
    for (int pipe = 0; pipe < KPIPE_COUNT_; pipe++) {
        if (!(spec->pipelines & (1u << pipe))) continue;
        for (int fam = 0; fam < KF_COUNT_; fam++)
            for (int dt = 0; dt < KD_COUNT_; dt++) {
                if (!(spec->dtypes & (1u << dt))) continue;
                for (int hp = 0; hp < fmha__num_hdim_pairs; hp++) {
                    tile_t tiles[MAX_TILES];
                    int nt = fmha__tiles(arch, (kpipe_t)pipe, (kfamily_t)fam, (kdtype_t)dt, fmha__hdim_pairs[hp].qk,
                                         fmha__hdim_pairs[hp].v, tiles);
                    int rank[2] = {0, 0}; /* position among the tiles valid on this arch, per layout */
                    for (int t = 0; t < nt; t++) {
                        fmha_key_t k;
                        fmha__key_default(&k);
                        k.arch = arch, k.pipeline = pipe, k.family = fam, k.dtype = dt;
                        k.hdim_qk = fmha__hdim_pairs[hp].qk, k.hdim_v = fmha__hdim_pairs[hp].v;
                        /* element-wise stages depend on hdim_v only: one key per hdim_v */
                        if (fam == KF_COMBINE || fam == KF_BWD_CONVERT_DQ || fam == KF_BWD_DOT_DO_O)
                            k.hdim_qk = k.hdim_v;
                        if (fam == KF_BWD_CONVERT_DQ) k.hdim_v = k.hdim_qk = fmha__hdim_pairs[hp].qk;
                        k.tile_m = tiles[t].m, k.tile_n = tiles[t].n, k.warps = tiles[t].warps, k.stages = tiles[t].stages;
                        /* a tile the arch cannot hold (shared memory, registers) with no
                         * feature on is skipped and does not take a rank */
                        char why_tile[256];
                        fmha_key_t bare = k;
                        if (fam == KF_SPLITKV || fam == KF_COMBINE) bare.max_splits_log2 = 7;
                        if (fam == KF_PAGEDKV || fam == KF_PREFILL || tiles[t].layout == TILE_PAGED)
                            bare.paged = KP_VLLM;
                        if (fam == KF_PREFILL) bare.mode = KM_GROUP;
                        if (fmha__key_check(&bare, why_tile, sizeof why_tile)) continue;
                        axis_t ax[12];
                        int na = family_axes((kfamily_t)fam, ax);
                        c.tile_layout = tiles[t].layout;
                        c.tile_rank[0] = rank[0], c.tile_rank[1] = rank[1];
                        if (tiles[t].layout != TILE_PAGED) rank[0]++;
                        if (tiles[t].layout != TILE_CONTIGUOUS) rank[1]++;
                        product(&c, &k, ax, na, 0);
                    }
                }
            }
    }
    if (c.oom) {
        snprintf(why, len, "out of memory during enumeration");
        return -1;
    }
    return 0;
}
