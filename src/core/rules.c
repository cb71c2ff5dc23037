/* SPDX-License-Identifier: MIT */
/*
 * rules.c: validity rules of kernel keys, the NVIDIA analogues of CK's validate_config
 * and tile constraints (../shared/research/ck_fmha_inventory.md section 4), plus the
 * feature/family combinations our kernels define. One function per rule.
 */
#include "rules.h"

#include <stdio.h>

#include "specs.h"

#define FAIL(...) return snprintf(why, len, __VA_ARGS__), 0
#define FAM(x) (1 << (x))

static const char *fam(const fmha_key_t *k) { return fmha__family_names[k->family]; }
static int is_bwd(const fmha_key_t *k)
{
    return k->family == KF_BWD_DOT_DO_O || k->family == KF_BWD_DQ_DK_DV || k->family == KF_BWD_CONVERT_DQ;
}
/* Families whose kernels compute attention scores. */
static int has_scores(const fmha_key_t *k)
{
    return (FAM(k->family) & (FAM(KF_FWD) | FAM(KF_SPLITKV) | FAM(KF_PAGEDKV) | FAM(KF_PREFILL) | FAM(KF_BWD_DQ_DK_DV))) != 0;
}

static int r_arch_known(const fmha_key_t *k, char *why, size_t len)
{
    if (k->arch < 0 || k->arch >= KA_COUNT_) FAIL("arch %d is not in the arch specs", k->arch);
    return 1;
}

static int r_family_known(const fmha_key_t *k, char *why, size_t len)
{
    if (k->family < 0 || k->family >= KF_COUNT_) FAIL("family %d is not a kernel family", k->family);
    return 1;
}

static int r_dtype_arch(const fmha_key_t *k, char *why, size_t len)
{
    if (k->dtype < 0 || k->dtype >= KD_COUNT_) FAIL("dtype %d is unknown", k->dtype);
    if (!(fmha__arch_spec((karch_t)k->arch)->dtypes & (1u << k->dtype)))
        FAIL("dtype %s is not supported on %s", fmha__dtype_names[k->dtype], fmha__arch_names[k->arch]);
    return 1;
}

static int r_dtype_bwd(const fmha_key_t *k, char *why, size_t len)
{
    if (is_bwd(k) && k->dtype == KD_FP8) FAIL("backward family %s accepts fp16, bf16 or fp32, not fp8", fam(k));
    return 1;
}

static int r_dtype_fp8_features(const fmha_key_t *k, char *why, size_t len)
{
    if (k->dtype != KD_FP8) return 1;
    if (k->family != KF_FWD) FAIL("fp8 e4m3 inputs are computed by the fwd family only, not %s", fam(k));
    if (k->bias || k->dropout)
        FAIL("fp8 kernels take no bias and no dropout (found bias %d, dropout %d)", k->bias, k->dropout);
    if (k->arch != KA_CPU && k->pipeline != KPIPE_WGMMAWS)
        FAIL("fp8 needs the wgmmaws pipeline on a GPU, found %s", fmha__pipe_names[k->pipeline]);
    return 1;
}

static int r_pipeline_arch(const fmha_key_t *k, char *why, size_t len)
{
    if (k->pipeline < 0 || k->pipeline >= KPIPE_COUNT_) FAIL("pipeline %d is unknown", k->pipeline);
    if (!(fmha__arch_spec((karch_t)k->arch)->pipelines & (1u << k->pipeline)))
        FAIL("pipeline %s does not run on %s", fmha__pipe_names[k->pipeline], fmha__arch_names[k->arch]);
    return 1;
}

static int r_hdim_shape(const fmha_key_t *k, char *why, size_t len)
{
    if (k->hdim_qk <= 0 || k->hdim_v <= 0 || k->hdim_qk % 8 || k->hdim_v % 8 || k->hdim_qk > 256 || k->hdim_v > 256)
        FAIL("head dims %d/%d must be multiples of 8 in 8..256", k->hdim_qk, k->hdim_v);
    return 1;
}

static int r_hdim_pair(const fmha_key_t *k, char *why, size_t len)
{
    if (k->pipeline == KPIPE_CPUREF) return 1;
    for (int i = 0; i < fmha__num_hdim_pairs; i++)
        if (fmha__hdim_pairs[i].qk == k->hdim_qk && fmha__hdim_pairs[i].v == k->hdim_v) return 1;
    FAIL("head dim pair %d/%d has no GPU instance; pairs are 32, 64, 96, 128, 192/128, 192, 256", k->hdim_qk, k->hdim_v);
}

static int r_tile_m(const fmha_key_t *k, char *why, size_t len)
{
    if (k->tile_m <= 0) FAIL("tile_m %d must be positive", k->tile_m);
    if (k->pipeline != KPIPE_CPUREF && k->warps <= 0) FAIL("warps %d must be positive", k->warps);
    /* Forward-like mma.sync kernels give each warp 16-row slabs of the Q tile (FA2);
     * the backward spreads warps over the key tile instead, so each warp needs at least
     * one 16x16 block of the M x N tile. */
    if (k->pipeline == KPIPE_MMASYNC && k->family == KF_BWD_DQ_DK_DV &&
        (k->tile_m % 16 || k->tile_m * k->tile_n < 256 * k->warps))
        FAIL("mma.sync backward: tile %dx%d must hold a 16x16 block per warp (%d warps)", k->tile_m, k->tile_n, k->warps);
    /* The split-KV decode kernel (row blocks of 16 or 32) spreads its warps over the key
     * tile too: 16 keys or more per warp. */
    const int decode = fmha__decode_layout(k);
    if (decode && ((k->tile_m != 16 && k->tile_m != 32) || k->tile_n % (16 * k->warps)))
        FAIL("mma.sync decode: tile %dx%d must have 16 or 32 rows and 16 keys per warp (%d warps)", k->tile_m,
             k->tile_n, k->warps);
    if (k->pipeline == KPIPE_MMASYNC && k->tile_n && k->family != KF_BWD_DQ_DK_DV && !decode &&
        k->tile_m % (16 * k->warps))
        FAIL("mma.sync: tile_m %d must be a multiple of 16 rows x %d warps", k->tile_m, k->warps);
    const int wgs = k->warps / 4 - 1; /* wgmma: consumer warpgroups beside the producer's */
    if (k->pipeline == KPIPE_WGMMAWS && k->family == KF_BWD_DQ_DK_DV) {
        /* the backward's consumer warpgroups split the key tile; m-blocks stream past */
        if (k->warps % 4 || wgs < 1 || k->tile_n != 64 * wgs || (k->tile_m != 64 && k->tile_m != 128))
            FAIL("wgmma backward: tile_n %d must be 64 keys per consumer warpgroup (warps %d = 4 x (1 + consumers)) "
                 "and tile_m 64 or 128, found tile_m %d",
                 k->tile_n, k->warps, k->tile_m);
    } else if (k->pipeline == KPIPE_WGMMAWS) {
        if (k->warps % 4 || wgs < 1 || wgs > 3 || k->tile_m != 64 * wgs)
            FAIL("wgmma: tile_m %d must be 64 rows per consumer warpgroup with 1..3 of them (warps %d = 4 x (1 + consumers))",
                 k->tile_m, k->warps);
    }
    return 1;
}

static int r_tile_n(const fmha_key_t *k, char *why, size_t len)
{
    if (k->pipeline == KPIPE_CPUREF) return 1;
    if (!has_scores(k)) {
        if (k->tile_n != 0) FAIL("element-wise family %s has no key tile: tile_n must be 0, found %d", fam(k), k->tile_n);
        return 1;
    }
    if (k->tile_n <= 0 || k->tile_n % 16)
        FAIL("tile_n %d must be a positive multiple of 16 (the k of m16n8k16 and of wgmma)", k->tile_n);
    return 1;
}

static int r_warps(const fmha_key_t *k, char *why, size_t len)
{
    if (k->pipeline == KPIPE_CPUREF) {
        if (k->warps || k->stages || k->tile_n || k->tile_m != 64)
            FAIL("cpuref instances have tile m64 n0 w0 s0, found m%d n%d w%d s%d", k->tile_m, k->tile_n, k->warps, k->stages);
        return 1;
    }
    if (k->warps < 1 || k->warps > 16) FAIL("warps %d must be 1..16 (512 threads)", k->warps);
    if (k->stages < 1 || k->stages > 4) FAIL("stages %d must be 1..4", k->stages);
    return 1;
}

static int r_smem_fit(const fmha_key_t *k, char *why, size_t len)
{
    int need = fmha__smem_bytes(k), have = fmha__arch_spec((karch_t)k->arch)->smem_per_block;
    if (need > have) FAIL("needs %d bytes of shared memory; %s allows %d per block", need, fmha__arch_names[k->arch], have);
    return 1;
}

/* 200 of the 255 registers a thread may use go to accumulators at most: beyond that FA2
 * measured spills (the 256x64 hd64 tile ran 85% slower, perf_api_anchors.md 2.3). */
static int r_regs_fit(const fmha_key_t *k, char *why, size_t len)
{
    int regs = fmha__acc_regs(k);
    if (regs > 200) FAIL("needs %d accumulator registers per thread; at most 200 fit without spills", regs);
    return 1;
}

static int r_dbias(const fmha_key_t *k, char *why, size_t len)
{
    if (k->dbias && (k->family != KF_BWD_DQ_DK_DV || k->bias != KB_ELEMENTWISE))
        FAIL("dbias needs the bwd dq_dk_dv family with an elementwise bias (found %s, bias %d)", fam(k), k->bias);
    return 1;
}

static int r_deterministic(const fmha_key_t *k, char *why, size_t len)
{
    if (k->deterministic && k->family != KF_BWD_DQ_DK_DV && k->family != KF_BWD_CONVERT_DQ)
        FAIL("deterministic applies to the dq_dk_dv and convert_dq backward stages, not %s", fam(k));
    return 1;
}

static int r_paged_family(const fmha_key_t *k, char *why, size_t len)
{
    if (k->paged < 0 || k->paged >= KP_COUNT_) FAIL("paged %d is unknown", k->paged);
    int may = FAM(KF_PAGEDKV) | FAM(KF_SPLITKV) | FAM(KF_PREFILL) | FAM(KF_APPENDKV);
    if (k->paged && !(FAM(k->family) & may)) FAIL("a page table applies to pagedkv, splitkv, prefill and appendkv, not %s", fam(k));
    if (!k->paged && (k->family == KF_PAGEDKV || k->family == KF_PREFILL))
        FAIL("family %s reads K/V through a page table; paged must be vllm or csr", fam(k));
    return 1;
}

static int r_rope(const fmha_key_t *k, char *why, size_t len)
{
    if (k->rope < 0 || k->rope >= KR_COUNT_) FAIL("rope %d is unknown", k->rope);
    if (k->rope && k->family != KF_APPENDKV) FAIL("rope applies to appendkv only, not %s", fam(k));
    return 1;
}

static int r_prefill_group(const fmha_key_t *k, char *why, size_t len)
{
    if (k->family == KF_PREFILL && k->mode != KM_GROUP) FAIL("prefill takes ragged queries: mode must be group");
    return 1;
}

/* Stages without scores (appendkv, combine, the element-wise backward stages) carry
 * none of the score features. */
static int r_scoreless_features(const fmha_key_t *k, char *why, size_t len)
{
    if (has_scores(k)) return 1;
    if (k->mask || k->bias || k->softcap || k->sink || k->dropout)
        FAIL("family %s computes no scores: mask, bias, softcap, sink and dropout must be off", fam(k));
    if (k->lse && k->family != KF_COMBINE) FAIL("family %s has no lse output", fam(k));
    return 1;
}

static int r_appendkv_batch(const fmha_key_t *k, char *why, size_t len)
{
    if (k->family == KF_APPENDKV && k->mode != KM_BATCH) FAIL("appendkv writes per-sequence caches: mode must be batch");
    return 1;
}

static int r_splitkv_dropout(const fmha_key_t *k, char *why, size_t len)
{
    if ((k->family == KF_SPLITKV || k->family == KF_PAGEDKV || k->family == KF_PREFILL) && k->dropout)
        FAIL("inference family %s takes no dropout", fam(k));
    return 1;
}

static int r_splits(const fmha_key_t *k, char *why, size_t len)
{
    if (k->family == KF_SPLITKV || k->family == KF_COMBINE) {
        if (k->max_splits_log2 < 1 || k->max_splits_log2 > 7)
            FAIL("max_splits_log2 %d of %s must be 1..7 (2..128 splits)", k->max_splits_log2, fam(k));
    } else if (k->max_splits_log2) {
        FAIL("max_splits_log2 applies to splitkv and combine only, not %s", fam(k));
    }
    return 1;
}

static int r_bwd_lse(const fmha_key_t *k, char *why, size_t len)
{
    if (is_bwd(k) && k->lse) FAIL("backward kernels always read the forward's lse; the lse flag is for forward outputs");
    return 1;
}

static int r_even_k(const fmha_key_t *k, char *why, size_t len)
{
    if (k->even_k && (k->mode == KM_GROUP || k->paged || !has_scores(k) || k->pipeline == KPIPE_CPUREF))
        FAIL("even_k (no key-tail handling) needs batch mode, no page table and a GPU score kernel");
    return 1;
}

static int r_enum_ranges(const fmha_key_t *k, char *why, size_t len)
{
    if (k->mode < 0 || k->mode >= KM_COUNT_ || k->mask < 0 || k->mask >= KMASK_COUNT_ || k->bias < 0 ||
        k->bias >= KB_COUNT_)
        FAIL("mode %d, mask %d or bias %d out of range", k->mode, k->mask, k->bias);
    return 1;
}

const key_rule_t fmha__key_rules[] = {
    {"arch.known", "arch must be in the arch specs", r_arch_known},
    {"family.known", "family must be one of the nine kernel families", r_family_known},
    {"enum.range", "enumerated fields must hold known values", r_enum_ranges},
    {"pipeline.arch", "the pipeline must run on the arch (wgmmaws: sm90 only)", r_pipeline_arch},
    {"dtype.arch", "the dtype must be supported on the arch (fp8: sm89, sm90)", r_dtype_arch},
    {"dtype.bwd", "backward families take fp16, bf16, fp32", r_dtype_bwd},
    {"dtype.fp8_features", "fp8 is the forward's, needs wgmmaws on a GPU, and takes no bias or dropout", r_dtype_fp8_features},
    {"hdim.shape", "head dims are multiples of 8 up to 256", r_hdim_shape},
    {"hdim.pair", "GPU head-dim pairs are 32, 64, 96, 128, 192/128, 192, 256", r_hdim_pair},
    {"tile.warps", "warps 1..16 and stages 1..4 (cpuref: m64 n0 w0 s0)", r_warps},
    {"tile.m", "tile_m fits the warps (16-row slabs per mma.sync warp, a 16x16 block per backward warp, 16 keys per decode warp, 64 rows per wgmma warpgroup)", r_tile_m},
    {"tile.n", "tile_n is a positive multiple of 16 for score kernels, 0 for element-wise stages", r_tile_n},
    {"smem.fit", "Q tile + staged K/V tiles fit the arch's shared memory per block", r_smem_fit},
    {"regs.fit", "accumulators fit in 200 registers per thread", r_regs_fit},
    {"dbias.bias", "dbias needs dq_dk_dv with an elementwise bias", r_dbias},
    {"det.bwd", "deterministic applies to dq_dk_dv and convert_dq", r_deterministic},
    {"paged.family", "page tables belong to pagedkv/splitkv/prefill/appendkv (required by pagedkv, prefill)", r_paged_family},
    {"rope.appendkv", "rope applies to appendkv only", r_rope},
    {"prefill.group", "prefill is group mode", r_prefill_group},
    {"scoreless.features", "stages without scores carry no score features", r_scoreless_features},
    {"appendkv.batch", "appendkv is batch mode", r_appendkv_batch},
    {"inference.dropout", "splitkv, pagedkv and prefill take no dropout", r_splitkv_dropout},
    {"splits.range", "splitkv/combine have 2..128 splits; others none", r_splits},
    {"bwd.lse", "backward kernels read lse; their lse flag stays off", r_bwd_lse},
    {"even_k.batch", "the even-K fast path needs batch mode, no paging, a GPU score kernel", r_even_k},
};
const int fmha__num_key_rules = (int)(sizeof fmha__key_rules / sizeof fmha__key_rules[0]);

const key_rule_t *fmha__key_check(const fmha_key_t *k, char *why, size_t len)
{
    for (int i = 0; i < fmha__num_key_rules; i++)
        if (!fmha__key_rules[i].check(k, why, len)) return &fmha__key_rules[i];
    if (len) why[0] = '\0';
    return NULL;
}
