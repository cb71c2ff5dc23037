/* SPDX-License-Identifier: MIT */
/*
 * splitkv.c: the splitkv family on CUDA (flash-decoding), two first-stage kernels and
 * the combine. Decode shapes (the GQA group's query rows fit 16 or 32 rows) run
 * kernels/splitkv/decode_mma.cuh: grid (splits, KV heads, batch), the warps splitting
 * each key tile, deep K/V pipelines; it writes O itself (with several splits the last
 * split of each KV head to finish reduces them) and the combine launch is skipped. Larger groups x query rows run the forward's mma.sync kernel with
 * FMHA_SPLIT: grid (row blocks, batch, KV heads x splits), a 64-row block packing the
 * query heads of one KV head. Either way K and V are read once per KV head, not once per
 * query head, and the splits write fp32 partials into the workspace (fwd_params.h).
 * Stage 1 (kernels/splitkv/combine.cuh) reduces the splits per row, adds the sink logit
 * and writes O and LSE. Every stage derives the split count from the problem and the
 * first stage's key alone (fmha__cuda_num_splits), so the workspace the plan sized is
 * the one they use.
 */
#include "splitkv.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/specs.h"
#include "fwd.h"
#include "kernels/fwd/fwd_params.h"
#include "kernels/splitkv/combine_params.h"

#define MIN_SPLIT_KEYS 256 /* fewer keys per split and the combine costs more than it saves */
#define MIN_DECODE_SPLIT_KEYS 128 /* two of the decode kernel's key tiles */
#define SPLIT_TILE_M 64    /* the splitkv keys' row block (specs.c) */

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/* ------------------------------------------------------------------ the grid */

/* Packed rows per query head (fwd_mma.cuh): 8 for up to 8 query rows (a 64-row block then
 * holds 8 query heads: GQA groups up to 8 read K/V once), else seqlen_q rounded up to 16,
 * 32 or a multiple of the row block, so that a block's positions stay in one window of
 * TILE_M. */
static int64_t pack_rows(const fmha_problem_t *p)
{
    const int64_t sq = fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    return sq <= 8 ? 8 : sq <= 16 ? 16 : sq <= 32 ? 32 : (sq + SPLIT_TILE_M - 1) / SPLIT_TILE_M * SPLIT_TILE_M;
}

/* Row blocks per (sequence, KV head): the group's query heads x packed rows. */
static int64_t row_blocks(const fmha_problem_t *p)
{
    const int64_t group = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) / fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    return (group * pack_rows(p) + SPLIT_TILE_M - 1) / SPLIT_TILE_M;
}

/* ------------------------------------------------------------------ the split count */

int fmha__cuda_num_splits(const fmha_key_t *k, const fmha_problem_t *p, char *why, size_t len)
{
    const int64_t given = fmha__i(p, FMHA_PARAM_NUM_SPLITS);
    if (given > 0) {
        const int n = given < FMHA_MAX_SPLITS ? (int)given : FMHA_MAX_SPLITS;
        if (why)
            snprintf(why, len, "given (num_splits %lld%s)", (long long)given, given > FMHA_MAX_SPLITS ? ", capped at 128" : "");
        return n;
    }
    /* The fewest splits whose waves fill the GPU as well as any split count can (within
     * 5%), each split at least a minimum of keys. The 64-row kernel: one CTA slot per SM
     * beyond head dim 64 (its K/V stages take most of an SM's shared memory), two below,
     * >= 256 keys per split. The decode kernel, >= 128 keys: on a contiguous cache one slot
     * per SM although two fit (perf-notes run 30: at batch 1, 128 CTAs of 16 splits ran
     * 12-19 us where 256 of 32 ran 14-22: an SM's share of the bandwidth is the limit, and
     * each split adds to the reduction); on pages as many as shared memory holds (run 31:
     * with one per SM, paged batch 16 fell from 0.93-0.96 of contiguous to 0.69-0.74, the
     * page lookups' latency no longer hidden by a second CTA). */
    const arch_spec_t *a = fmha__arch_spec((karch_t)k->arch);
    const int sms = a && a->default_sm_count > 0 ? a->default_sm_count : 108;
    const int decode = fmha__decode_layout(k);
    int per_sm = !decode && fmha__i(p, FMHA_PARAM_HEAD_DIM_QK) <= 64 ? 2 : 1;
    if (decode && k->paged && a) { /* 1 KiB per CTA is the system's */
        per_sm = a->smem_per_sm / (fmha__smem_bytes(k) + 1024);
        if (per_sm < 1) per_sm = 1;
    }
    const int min_keys = decode ? MIN_DECODE_SPLIT_KEYS : MIN_SPLIT_KEYS;
    const int64_t slots = (int64_t)sms * per_sm;
    const int64_t sk = fmha__i(p, FMHA_PARAM_SEQLEN_KV);
    const int64_t ctas =
        fmha__i(p, FMHA_PARAM_BATCH) * fmha__i(p, FMHA_PARAM_NUM_HEADS_KV) * (decode ? 1 : row_blocks(p));
    int64_t most = (sk + min_keys - 1) / min_keys;
    if (most > FMHA_MAX_SPLITS) most = FMHA_MAX_SPLITS;
    if (most < 1) most = 1;
    double eff[FMHA_MAX_SPLITS + 1], best = 0;
    for (int64_t s = 1; s <= most; s++) {
        const int64_t total = ctas * s, waves = (total + slots - 1) / slots;
        eff[s] = (double)total / (double)(waves * slots);
        if (eff[s] > best) best = eff[s];
    }
    int64_t n = 1;
    while (n < most && eff[n] < 0.95 * best) n++;
    if (why)
        snprintf(why, len,
                 "chosen: %lld CTAs per split (GQA-packed row blocks) on %lld CTA slots (%d SMs x %d), %.0f%% of the "
                 "last wave busy; >= %d keys per split of %lld",
                 (long long)ctas, (long long)slots, sms, per_sm, 100 * eff[n], min_keys, (long long)sk);
    return (int)n;
}

/* Partial rows (token x head) and where the LSEs start after the O partials. */
static int64_t part_rows(const fmha_problem_t *p) { return fmha__query_tokens(p) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q); }
static size_t part_o_bytes(const fmha_problem_t *p, int nsplit)
{
    return align256((size_t)nsplit * (size_t)part_rows(p) * (size_t)fmha__i(p, FMHA_PARAM_HEAD_DIM_V) * 4);
}

/* ------------------------------------------------------------------ stage 0: split */

int fmha__cuda_splitkv_accepts(const fmha_key_t *k)
{
    return k->family == KF_SPLITKV && k->pipeline == KPIPE_MMASYNC && k->stages == 2 && !k->dropout && !k->lse &&
           k->tile_m == SPLIT_TILE_M;
}

int fmha__cuda_decode_accepts(const fmha_key_t *k)
{
    return fmha__decode_layout(k) && !k->dropout && !k->lse && (k->tile_m == 16 || k->tile_m == 32) &&
           k->tile_n % (16 * k->warps) == 0 && k->stages >= 2;
}

int fmha__cuda_splitkv_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN])
{
    fmha_key_t f = *k;
    f.lse = 0, f.sink = 0; /* both belong to the combine */
    int n = fmha__cuda_fwd_defines(&f, defs);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_SPLIT=1");
    return n;
}

/* The decode kernel's arrival counters (one uint64 per sequence x KV head), after the partials. */
static size_t counters_bytes(const fmha_key_t *k, const fmha_problem_t *p, int nsplit)
{
    return fmha__decode_layout(k) && nsplit > 1
               ? align256((size_t)fmha__i(p, FMHA_PARAM_BATCH) * (size_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_KV) * 8)
               : 0;
}
static size_t part_lse_bytes(const fmha_problem_t *p, int nsplit)
{
    return align256((size_t)nsplit * (size_t)part_rows(p) * 4);
}

size_t fmha__cuda_splitkv_workspace(const fmha_key_t *k, const fmha_problem_t *p)
{
    const int n = fmha__cuda_num_splits(k, p, NULL, 0);
    return part_o_bytes(p, n) + part_lse_bytes(p, n) + counters_bytes(k, p, n);
}

const char *fmha__cuda_splitkv_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                             char *why, size_t len)
{
    if (fmha__cuda_fwd_can_implement(k, p, t, why, len)) return why;
    const int n = fmha__cuda_num_splits(k, p, NULL, 0);
    if (fmha__decode_layout(k)) {
        const int64_t group = fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) / fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
        const int64_t rows = group * fmha__i(p, FMHA_PARAM_SEQLEN_Q);
        if (rows > k->tile_m) {
            snprintf(why, len,
                     "[rule cuda.decode_rows] the decode kernel holds a GQA group's query rows in one block: %lld "
                     "query heads per KV head x seqlen_q %lld = %lld rows; this instance has %d",
                     (long long)group, (long long)fmha__i(p, FMHA_PARAM_SEQLEN_Q), (long long)rows, k->tile_m);
            return why;
        }
        if (fmha__i(p, FMHA_PARAM_BATCH) > 65535 || fmha__i(p, FMHA_PARAM_NUM_HEADS_KV) > 65535) {
            snprintf(why, len,
                     "[rule cuda.grid] KV heads (%lld) and batch (%lld) are grid dimensions y and z of the decode "
                     "kernel (limit 65535 each)",
                     (long long)fmha__i(p, FMHA_PARAM_NUM_HEADS_KV), (long long)fmha__i(p, FMHA_PARAM_BATCH));
            return why;
        }
        return NULL;
    }
    const int64_t batch = fmha__i(p, FMHA_PARAM_BATCH), heads = fmha__i(p, FMHA_PARAM_NUM_HEADS_KV);
    if (batch > 65535 || heads * n > 65535 || row_blocks(p) > 0x7fffffff) {
        snprintf(why, len,
                 "[rule cuda.grid] batch (%lld) and KV heads x splits (%lld x %d) are grid dimensions y and z of the "
                 "split stage (limit 65535), its row blocks (%lld) dimension x (limit 2^31 - 1)",
                 (long long)batch, (long long)heads, n, (long long)row_blocks(p));
        return why;
    }
    return NULL;
}

/* The first stage's params: the forward's, the split count, the partials, and a
 * contiguous cache's per-sequence lengths and rows. */
static fmha_status_t split_params(const cuda_launch_t *l, fmha_fwd_params_t *a, int *n)
{
    const fmha_problem_t *p = l->problem;
    fmha_status_t st = fmha__cuda_fwd_params(l, a);
    if (st) return st;
    *n = fmha__cuda_num_splits(&l->kernel->key, p, NULL, 0);
    const fmha_tensor_desc_t *k = fmha__t(p, FMHA_TENSOR_K);
    a->num_splits = *n;
    a->splits_div = fmha_divisor_of((uint32_t)*n);
    a->part_rows = part_rows(p);
    a->part_o = (uint64_t)(uintptr_t)l->workspace;
    a->part_lse = a->part_o + part_o_bytes(p, *n);
    a->split_counters = 0;
    if (fmha__i(p, FMHA_PARAM_MODE) != FMHA_MODE_GROUP && fmha__i(p, FMHA_PARAM_PAGE_SIZE) == 0) {
        /* a cache: lengths and rows per sequence; never past its sequence dim */
        a->seqlens_k = (uint64_t)(uintptr_t)l->data[FMHA_TENSOR_SEQLENS_KV];
        a->cache_batch_idx = (uint64_t)(uintptr_t)l->data[FMHA_TENSOR_CACHE_BATCH_IDX];
        a->cache_rows = (int32_t)(k->dims[0] < INT32_MAX ? k->dims[0] : INT32_MAX);
        if (a->seqlen_k > k->dims[1]) a->seqlen_k = (int32_t)k->dims[1];
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status_t fmha__cuda_splitkv_launch(const cuda_launch_t *l)
{
    fmha_fwd_params_t a;
    int n;
    fmha_status_t st = split_params(l, &a, &n);
    if (st) return st;
    a.pack_rows = (int32_t)pack_rows(l->problem);
    void *args[1] = {&a};
    return fmha__cuda_launch(l, (unsigned)row_blocks(l->problem), (unsigned)a.batch, (unsigned)(a.heads_kv * n), args);
}

/* Does the first stage write O itself, so that the combine has nothing to do? The decode
 * kernel does: directly with one split, else its last split per KV head reduces them. */
static int decode_writes_o(const cuda_kernel_t *stage0)
{
    return stage0 && stage0->family->accepts == fmha__cuda_decode_accepts;
}

/* ------------------------------------------------------------------ arrival tags */

/* Each decode launch's tag for its arrival counters (common.cuh arrive_tagged): 48 bits,
 * consecutive from a start drawn once a process, so no two launches of the process share
 * one (before 2^48 of them) and a workspace's old words, ours or anyone's, match the tag
 * of a new launch only by a 2^-48 chance. The counters thus need no zeroing launch ahead
 * of the decode one (perf-notes run 124). */
#define TAG_BITS 48
static uint64_t next_tag;
static pthread_once_t tag_once = PTHREAD_ONCE_INIT;

static uint64_t mix64(uint64_t x) /* a bijection that spreads every input bit (splitmix64's finaliser) */
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void seed_tags(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    next_tag = mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ mix64((uint64_t)getpid()) ^
               mix64((uint64_t)(uintptr_t)&ts);
}

static uint64_t arrival_tag(void)
{
    pthread_once(&tag_once, seed_tags);
    return __atomic_fetch_add(&next_tag, 1, __ATOMIC_RELAXED) & ((1ull << TAG_BITS) - 1);
}

fmha_status_t fmha__cuda_decode_launch(const cuda_launch_t *l)
{
    fmha_fwd_params_t a;
    int n;
    fmha_status_t st = split_params(l, &a, &n);
    if (st) return st;
    if (n == 1) {
        a.part_o = a.part_lse = 0; /* O and LSE directly */
    } else {
        /* tagged: whatever the workspace holds there, no zeroing first (arrive_tagged) */
        a.split_counters = (uint64_t)a.part_lse + part_lse_bytes(l->problem, n);
        a.split_tag = arrival_tag();
    }
    void *args[1] = {&a};
    return fmha__cuda_launch(l, (unsigned)n, (unsigned)a.heads_kv, (unsigned)a.batch, args);
}

/* ------------------------------------------------------------------ stage 1: combine */

#define COMBINE_WARPS 4

int fmha__cuda_combine_accepts(const fmha_key_t *k)
{
    return k->family == KF_COMBINE && k->pipeline == KPIPE_MMASYNC && k->warps == COMBINE_WARPS;
}

int fmha__cuda_combine_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN])
{
    int n = 0;
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_BF16=%d", k->dtype == KD_BF16);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_V=%d", k->hdim_v);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_HDIM_QK=%d", k->hdim_v);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_WARPS=%d", k->warps);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_LSE=%d", k->lse);
    snprintf(defs[n++], FMHA_DEFINE_LEN, "FMHA_GROUP=%d", k->mode == KM_GROUP);
    return n;
}

const char *fmha__cuda_combine_can_implement(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t,
                                             char *why, size_t len)
{
    (void)k, (void)t;
    const fmha_tensor_desc_t *o = fmha__t(p, FMHA_TENSOR_O);
    for (int d = 0; d < o->rank; d++)
        if (o->dims[d] > 1 && (d == o->rank - 1 ? o->strides[d] != 1 : o->strides[d] % 2)) {
            snprintf(why, len, "[rule cuda.layout] o: stride %lld of dim %d; the combine writes pairs of columns",
                     (long long)o->strides[d], d);
            return why;
        }
    if ((fmha__i(p, FMHA_PARAM_SEQLEN_Q) * fmha__i(p, FMHA_PARAM_NUM_HEADS_Q) + COMBINE_WARPS - 1) / COMBINE_WARPS >
        0x7fffffff) {
        snprintf(why, len, "[rule cuda.grid] seqlen_q x heads / %d warps exceeds grid dimension x (2^31 - 1)",
                 COMBINE_WARPS);
        return why;
    }
    if (fmha__i(p, FMHA_PARAM_BATCH) > 65535) {
        snprintf(why, len, "[rule cuda.grid] batch (%lld) is grid dimension y of the combine; the limit is 65535",
                 (long long)fmha__i(p, FMHA_PARAM_BATCH));
        return why;
    }
    return NULL;
}

fmha_status_t fmha__cuda_combine_launch(const cuda_launch_t *l)
{
    if (decode_writes_o(l->stage0)) return FMHA_STATUS_SUCCESS;
    const fmha_problem_t *p = l->problem;
    const int group = fmha__i(p, FMHA_PARAM_MODE) == FMHA_MODE_GROUP;
    const fmha_tensor_desc_t *o = fmha__t(p, FMHA_TENSOR_O), *lse = fmha__t(p, FMHA_TENSOR_LSE),
                             *sink = fmha__t(p, FMHA_TENSOR_SINK), *q = fmha__t(p, FMHA_TENSOR_Q);
    fmha_combine_params_t a;
    memset(&a, 0, sizeof a);
    const int n = fmha__cuda_num_splits(&l->stage0->key, p, NULL, 0);
    a.num_splits = n;
    a.part_rows = part_rows(p);
    a.part_o = (uint64_t)(uintptr_t)l->workspace0;
    a.part_lse = a.part_o + part_o_bytes(p, n);
    a.o = (uint64_t)(uintptr_t)l->data[FMHA_TENSOR_O];
    a.lse = (uint64_t)(uintptr_t)l->data[FMHA_TENSOR_LSE];
    a.sink = (uint64_t)(uintptr_t)l->data[FMHA_TENSOR_SINK];
    a.cu_seqlens_q = (uint64_t)(uintptr_t)l->data[FMHA_TENSOR_CU_SEQLENS_Q];
    const int tok = group ? 0 : 1;
    a.o_batch = group ? 0 : o->strides[0], a.o_row = o->strides[tok], a.o_head = o->strides[tok + 1];
    if (lse) {
        if (group) a.lse_head = lse->strides[0], a.lse_row = lse->strides[1];
        else a.lse_batch = lse->strides[0], a.lse_head = lse->strides[1], a.lse_row = lse->strides[2];
    }
    a.sink_head = sink ? sink->strides[0] : 0;
    a.batch = (int32_t)fmha__i(p, FMHA_PARAM_BATCH);
    a.heads_q = (int32_t)fmha__i(p, FMHA_PARAM_NUM_HEADS_Q);
    a.seqlen_q = (int32_t)fmha__i(p, FMHA_PARAM_SEQLEN_Q);
    a.total_q = (int32_t)(q->dims[0] < INT32_MAX ? q->dims[0] : INT32_MAX);
    const int64_t items = (int64_t)a.seqlen_q * a.heads_q;
    void *args[1] = {&a};
    return fmha__cuda_launch(l, (unsigned)((items + COMBINE_WARPS - 1) / COMBINE_WARPS), (unsigned)a.batch, 1, args);
}
