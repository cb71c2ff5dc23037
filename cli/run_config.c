/* SPDX-License-Identifier: MIT */
/* run_config.c: see run_config.h. */
#include "run_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Flags of the problem (run, explain, bwd) and of running it. */
const flag_spec_t RUN_FLAGS[] = {
    {"v", "0", "check against the naive reference: 0 no, 1 yes (prints pass/fail)"},
    {"mode", "0", "0 batch, 1 group (varlen)"},
    {"b", "2", "batch size"},
    {"h", "8", "query heads"},
    {"h_k", "-1", "key/value heads; -1 means = h (fewer: GQA/MQA)"},
    {"s", "1024", "seqlen_q; group mode: mean length, or a comma list per sequence"},
    {"s_k", "-1", "seqlen_k; -1 means = s; group mode: a comma list per sequence"},
    {"d", "128", "head dim of q and k"},
    {"d_v", "-1", "head dim of v; -1 means = d"},
    {"scale", "0", "score scale; 0 means 1/sqrt(d)"},
    {"mask", "0", "0 | 1,t | 2,b | t:l,r[,sink] | b:l,r[,sink] | xt:w | xb:w"},
    {"bias", "n", "n none | e (1,1,s,s) | e:1 (1,h,s,s) | e:2 (b,h,s,s) | a (ALiBi [h]) | a:1 (ALiBi [b,h])"},
    {"lse", "0", "1: also compute the log-sum-exp"},
    {"p_drop", "0", "dropout probability in [0, 1)"},
    {"drop_seed", "1", "dropout Philox seed"},
    {"drop_offset", "0", "dropout Philox offset"},
    {"prec", "fp16", "fp16 | bf16 | fp32 | fp8bf16 (q, k, v in fp8 e4m3, o in bf16; fwd only)"},
    {"descale", "2", "fp8bf16: q/k/v descales 0 none, 1 one per tensor [1], 2 one per (batch, KV head) [b, h_k]"},
    {"iperm", "1", "q/k/v memory order: 1 b,h,s,d; 0 b,s,h,d"},
    {"operm", "1", "o memory order: 1 b,h,s,d; 0 b,s,h,d"},
    {"softcap", "0", "logit soft-cap; 0 disables"},
    {"init_sink", "0", "1: random per-head sink logits"},
    {"bias_fp32", "0", "1: the elementwise bias in fp32 instead of the input dtype"},
    {"pad", "0", "extra elements after each head-dim row of q/k/v/o (strided views)"},
    {"seed", "11939", "seed of the random inputs"},
    {"warmup", "0", "untimed executions before timing"},
    {"repeat", "1", "timed executions"},
    {"kname", "0", "1: print the kernel name"},
    {"json", "0", "1: print one JSON object instead of text (the problem, kernels, min/median/max ms, TFLOPS, GB/s, check): a bench row"},
    {"backend", "auto", "auto | cpu | cuda"},
    {"arch", "", "plan for a virtual GPU arch (sm80, sm86, sm89, sm90) instead of this machine"},
    {"force_kernel", "", "use this kernel instead of the selector's choice"},
    {"tune_db", "", "a tuning database (JSON) the selector consults"},
    {"threads", "0", "CPU backend threads; 0 means the OpenMP default"},
    {"check_index", "0", "1: check device index data (cu_seqlens, page tables) on the host before each run"},
    {"family", "auto", "auto | fwd | fwd_splitkv | fwd_pagedkv | batch_prefill (auto: from the flags below)"},
    {"num_splits", "0", "KV splits; > 0 picks fwd_splitkv (0 there: the library chooses)"},
    {"page_block_size", "0", "tokens per page of a paged KV cache; > 0 picks fwd_pagedkv (batch_prefill with -mode=1)"},
    {"kv_layout", "0", "paged page layout: 0 NHD [pages, page, h_k, d], 1 HND [pages, h_k, page, d]"},
    {"kv_lookup", "0", "paged lookup: 0 block table + seqlens, 1 CSR pages (kv_indptr, kv_indices, last_page_len)"},
    {"cache_batch_idx", "0", "1: sequences live in shuffled rows of a larger contiguous cache"},
    {"s_knew", "0", "> 0: appendkv writes the last s_knew keys of each sequence into the cache first"},
    {"rotary_dim", "0", "appendkv: RoPE over the first rotary_dim dims of the new keys and of q"},
    {"rotary_interleaved", "0", "appendkv RoPE pairs: 1 (2i, 2i+1) GPT-J, 0 (i, i + rot/2) GPT-NeoX"},
    {"q_scale", "1", "q drawn from [-q_scale, q_scale] (huge logits: 1e4)"},
    {"poison", "n", "one non-finite input element: n | nan_q | nan_k | nan_v | inf_v (checked against the oracle's pattern)"},
    {"poison_token", "0", "> 0: the poisoned element is dim 3 of head 0 at this token of sequence 0 (else the buffer's fourth)"},
};
const int RUN_FLAG_COUNT = (int)(sizeof RUN_FLAGS / sizeof RUN_FLAGS[0]);


static int parse_bias(const char *s, bias_kind_t *out)
{
    static const struct {
        const char *name;
        bias_kind_t kind;
    } table[] = {{"n", BIAS_NONE},      {"0", BIAS_NONE},      {"e", BIAS_ELEM_11},
                 {"1", BIAS_ELEM_11},   {"e:0", BIAS_ELEM_11}, {"e:1", BIAS_ELEM_1H},
                 {"e:2", BIAS_ELEM_BH}, {"a", BIAS_ALIBI_H},   {"2", BIAS_ALIBI_H},
                 {"a:0", BIAS_ALIBI_H}, {"a:1", BIAS_ALIBI_BH}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(s, table[i].name) == 0) {
            *out = table[i].kind;
            return 0;
        }
    return -1;
}

/* A deterministic small generator for group-mode lengths (independent of the data seed
 * stream so that changing -s does not change the data of other tensors' shapes). */
static uint64_t lcg(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return *st >> 33;
}

int run_configure(args_t *a, run_opts_t *o)
{
    fwd_config_t *c = &o->cfg;
    fwd_config_default(c);
    int64_t v, mode, b, h, hk, d, dv, iperm, operm, lse, sink, kname, json, warm, rep, thr, pad, bias32, chk;
    if (args_i64(a, "v", 0, 1, &v) || args_i64(a, "mode", 0, 1, &mode) ||
        args_i64(a, "b", 1, FWD_CASE_MAX_BATCH, &b) || args_i64(a, "h", 1, 65536, &h) ||
        args_i64(a, "h_k", -1, 65536, &hk) || args_i64(a, "d", 1, 65536, &d) ||
        args_i64(a, "d_v", -1, 65536, &dv) || args_i64(a, "iperm", 0, 1, &iperm) ||
        args_i64(a, "operm", 0, 1, &operm) || args_i64(a, "lse", 0, 1, &lse) ||
        args_i64(a, "init_sink", 0, 1, &sink) || args_i64(a, "kname", 0, 1, &kname) ||
        args_i64(a, "json", 0, 1, &json) ||
        args_i64(a, "bias_fp32", 0, 1, &bias32) ||
        args_i64(a, "warmup", 0, 1000000, &warm) || args_i64(a, "repeat", 1, 1000000, &rep) ||
        args_i64(a, "threads", 0, 4096, &thr) || args_i64(a, "pad", 0, 4096, &pad) ||
        args_i64(a, "check_index", 0, 1, &chk) ||
        args_f64(a, "scale", -1e30, 1e30, "[-1e30, 1e30] (0 means 1/sqrt(d))", &c->scale) ||
        args_f64(a, "softcap", 0, 1e30, "[0, 1e30] (0 disables)", &c->softcap) ||
        args_f64(a, "p_drop", 0, 0x1.fffffffffffffp-1, "[0, 1)", &c->p_drop) ||
        args_u64(a, "drop_seed", &c->drop_seed) || args_u64(a, "drop_offset", &c->drop_offset) ||
        args_u64(a, "seed", &c->seed))
        return -1;
    int64_t nsplit, page, layout, lookup, cidx, knew, rot, rint;
    if (args_i64(a, "num_splits", 0, 256, &nsplit) || args_i64(a, "page_block_size", 0, 1 << 30, &page) ||
        args_i64(a, "kv_layout", 0, 1, &layout) || args_i64(a, "kv_lookup", 0, 1, &lookup) ||
        args_i64(a, "cache_batch_idx", 0, 1, &cidx) || args_i64(a, "s_knew", 0, 1 << 30, &knew) ||
        args_i64(a, "rotary_dim", 0, 256, &rot) || args_i64(a, "rotary_interleaved", 0, 1, &rint))
        return -1;
    c->num_splits = nsplit, c->page_size = page, c->kv_layout = (int)layout, c->kv_lookup = (int)lookup;
    c->cache_batch_idx = (int)cidx, c->s_knew = knew, c->rotary_dim = rot, c->rotary_interleaved = (int)rint;
    if (args_f64(a, "q_scale", 1e-30, 1e30, "[1e-30, 1e30]", &c->q_scale)) return -1;
    const char *poison = args_str(a, "poison");
    int pz = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(poison, FWD_POISON_NAMES[i]) == 0) pz = i;
    if (pz < 0) {
        snprintf(a->err, sizeof a->err, "flag -poison=%s: expected n, nan_q, nan_k, nan_v or inf_v", poison);
        return -1;
    }
    c->poison = (fwd_poison_t)pz;
    if (args_i64(a, "poison_token", 0, INT32_MAX, &c->poison_token)) return -1;
    const char *fam = args_str(a, "family");
    if (strcmp(fam, "auto") == 0) {
        /* the family a user of these flags means: splits, then pages, then a cache */
        c->family = nsplit > 0                 ? FMHA_FAMILY_FWD_SPLITKV
                    : page > 0                  ? (mode ? FMHA_FAMILY_BATCH_PREFILL : FMHA_FAMILY_FWD_PAGEDKV)
                    : cidx || knew > 0           ? FMHA_FAMILY_FWD_SPLITKV
                                                 : FMHA_FAMILY_FWD;
    } else if (fmha_family_parse(fam, &c->family) || c->family == FMHA_FAMILY_APPENDKV || c->family == FMHA_FAMILY_BWD) {
        snprintf(a->err, sizeof a->err,
                 "flag -family=%s: expected auto, fwd, fwd_splitkv, fwd_pagedkv or batch_prefill (appendkv runs "
                 "with -s_knew; the backward is `fmha bwd`)", fam);
        return -1;
    }
    if (hk == 0 || dv == 0) {
        snprintf(a->err, sizeof a->err, "flag -%s=0: expected -1 or a positive integer",
                 hk == 0 ? "h_k" : "d_v");
        return -1;
    }
    o->verify = (int)v, o->kname = (int)kname, o->json = (int)json, o->warmup = (int)warm, o->repeat = (int)rep;
    o->threads = (int)thr, o->check_index = (int)chk;
    c->mode = mode ? FMHA_MODE_GROUP : FMHA_MODE_BATCH;
    c->b = b, c->h = h, c->h_k = hk < 0 ? h : hk, c->d = d, c->d_v = dv < 0 ? d : dv;
    c->iperm = (int)iperm, c->operm = (int)operm, c->lse = (int)lse, c->sink = (int)sink, c->bias_fp32 = (int)bias32;
    c->pad = pad;
    c->mask = args_str(a, "mask");

    const char *prec = args_str(a, "prec");
    if (strcmp(prec, "fp8bf16") == 0)
        c->dtype = FMHA_DTYPE_FP8_E4M3; /* o is bf16: the fp8 forward's only output type */
    else if (fmha_dtype_parse(prec, &c->dtype) ||
             (c->dtype != FMHA_DTYPE_FP16 && c->dtype != FMHA_DTYPE_BF16 && c->dtype != FMHA_DTYPE_FP32)) {
        snprintf(a->err, sizeof a->err, "flag -prec=%s: expected fp16, bf16, fp32 or fp8bf16", prec);
        return -1;
    }
    int64_t descale = 0;
    if (args_i64(a, "descale", 0, 2, &descale)) return -1;
    c->descale = (int)descale;
    if (parse_bias(args_str(a, "bias"), &c->bias)) {
        snprintf(a->err, sizeof a->err, "flag -bias=%s: expected n, e, e:1, e:2, a or a:1",
                 args_str(a, "bias"));
        return -1;
    }
    const char *be = args_str(a, "backend");
    if (strcmp(be, "auto") == 0) o->backend = FMHA_BACKEND_AUTO;
    else if (strcmp(be, "cpu") == 0) o->backend = FMHA_BACKEND_CPU;
    else if (strcmp(be, "cuda") == 0) o->backend = FMHA_BACKEND_CUDA;
    else {
        snprintf(a->err, sizeof a->err, "flag -backend=%s: expected auto, cpu or cuda", be);
        return -1;
    }
    o->arch = args_str(a, "arch");
    o->force_kernel = args_str(a, "force_kernel");
    o->tune_db = args_str(a, "tune_db");
    /* With -v=1 and dropout, also ask for the keep mask: it is checked bit for bit. */
    c->dropout_mask = o->verify && c->p_drop > 0;

    /* Sequence lengths. */
    int64_t sq[FWD_CASE_MAX_BATCH], sk[FWD_CASE_MAX_BATCH];
    int nq = 0, nk = 0;
    const int list_max = mode ? (int)b : 1;
    if (args_i64_list(a, "s", mode ? 0 : 1, 1 << 30, sq, list_max, &nq)) return -1;
    int sk_given = strcmp(args_str(a, "s_k"), "-1") != 0;
    if (sk_given && args_i64_list(a, "s_k", 0, 1 << 30, sk, (int)b, &nk)) return -1;
    if (!mode) {
        c->s = sq[0];
        c->s_k = sk_given ? sk[0] : sq[0];
        if (sk_given && nk > 1) { /* keys per sequence of a cache */
            if (c->family == FMHA_FAMILY_FWD || nk != b) {
                snprintf(a->err, sizeof a->err,
                         "flag -s_k: a list in batch mode gives the keys of each of the -b=%lld sequences of a KV "
                         "cache (not family fwd); got %d values", (long long)b, nk);
                return -1;
            }
            if (!(o->lens_k = malloc(sizeof(int32_t) * (size_t)b))) return -1;
            c->s_k = 1;
            for (int64_t i = 0; i < b; i++) {
                o->lens_k[i] = (int32_t)sk[i];
                if (sk[i] > c->s_k) c->s_k = sk[i];
            }
            c->seqlens_k = o->lens_k;
        }
        return 0;
    }
    if (nq != 1 && nq != b) {
        snprintf(a->err, sizeof a->err, "flag -s: %d lengths for -b=%lld sequences; expected 1 or %lld",
                 nq, (long long)b, (long long)b);
        return -1;
    }
    if (sk_given && nk != nq) {
        snprintf(a->err, sizeof a->err, "flag -s_k: %d lengths; expected %d, as many as -s", nk, nq);
        return -1;
    }
    o->lens_q = malloc(sizeof(int32_t) * (size_t)b);
    o->lens_k = malloc(sizeof(int32_t) * (size_t)b);
    if (!o->lens_q || !o->lens_k) {
        snprintf(a->err, sizeof a->err, "out of memory");
        return -1;
    }
    /* One value means "mean length": draw each length uniformly in [1, 2s - 1]. */
    uint64_t st = c->seed;
    int64_t max_q = 0, max_k = 0;
    for (int64_t i = 0; i < b; i++) {
        int64_t lq = nq == b ? sq[i] : (sq[0] <= 1 ? sq[0] : 1 + (int64_t)(lcg(&st) % (uint64_t)(2 * sq[0] - 1)));
        int64_t lk = sk_given ? (nk == b ? sk[i] : sk[0] + (lq - sq[0])) : lq;
        if (lk < 0) lk = 0;
        o->lens_q[i] = (int32_t)lq;
        o->lens_k[i] = (int32_t)lk;
        if (lq > max_q) max_q = lq;
        if (lk > max_k) max_k = lk;
    }
    c->seqlens_q = o->lens_q;
    c->seqlens_k = o->lens_k;
    c->s = max_q > 0 ? max_q : 1;
    c->s_k = max_k > 0 ? max_k : 1;
    return 0;
}

const flag_spec_t BWD_ONLY_FLAGS[] = {
    {"dbias", "0", "1: also compute the gradient of the elementwise bias (needs -bias=e, e:1 or e:2)"},
    {"deterministic", "0", "1: bitwise-reproducible gradients; with -v=1 a second run is compared bit for bit"},
    {"explain", "0", "1: only show each stage's kernel and why the others were rejected (no data; -arch for a GPU)"},
};
const int BWD_ONLY_FLAG_COUNT = (int)(sizeof BWD_ONLY_FLAGS / sizeof BWD_ONLY_FLAGS[0]);

int bwd_flag_table(flag_spec_t *flags)
{
    int n = 0;
    for (int i = 0; i < RUN_FLAG_COUNT && n < ARGS_MAX - BWD_ONLY_FLAG_COUNT; i++) flags[n++] = RUN_FLAGS[i];
    for (int i = 0; i < BWD_ONLY_FLAG_COUNT; i++) flags[n++] = BWD_ONLY_FLAGS[i];
    return n;
}

int bwd_configure(args_t *a, run_opts_t *o, bwd_config_t *c, int *explain)
{
    memset(c, 0, sizeof *c);
    int64_t dbias, det, ex;
    if (run_configure(a, o) || args_i64(a, "dbias", 0, 1, &dbias) || args_i64(a, "deterministic", 0, 1, &det) ||
        args_i64(a, "explain", 0, 1, &ex))
        return -1;
    if (o->cfg.family != FMHA_FAMILY_FWD) {
        snprintf(a->err, sizeof a->err,
                 "the KV-cache flags (-family, -num_splits, -page_block_size, -cache_batch_idx, -s_knew) describe "
                 "inference problems; the backward takes contiguous q, k, v");
        return -1;
    }
    c->fwd = o->cfg, c->dbias = (int)dbias, c->deterministic = (int)det;
    c->library_outputs = !o->verify; /* unchecked (timing) runs skip the naive forward in double */
    if (explain) *explain = (int)ex;
    return 0;
}

fmha_status_t run_make_context(const run_opts_t *o, fmha_context_t **ctx)
{
    fmha_status_t st = o->arch[0] ? fmha_context_create_virtual(ctx, o->arch, 0)
                                   : fmha_context_create(ctx, o->backend, 0);
    if (st) {
        fprintf(stderr, "fmha: cannot create a context for %s: %s (%s)\n", o->arch[0] ? o->arch : "this machine",
                fmha_status_name(st), fmha_build_info());
        return st;
    }
    if (o->tune_db[0] && (st = fmha_context_load_tune_db(*ctx, o->tune_db)))
        fprintf(stderr, "fmha: %s\n", fmha_context_last_error(*ctx));
    return st;
}


void run_print_plan(const fmha_plan_t *plan)
{
    size_t need = fmha_plan_describe(plan, NULL, 0);
    char *desc = malloc(need + 1);
    if (desc) {
        fmha_plan_describe(plan, desc, need + 1);
        printf("plan:\n%s", desc);
        free(desc);
    }
}

fmha_plan_options_t run_plan_options(const run_opts_t *o, int with_force)
{
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .num_threads = o->threads,
                               .check_index_data = o->check_index};
    if (with_force && o->force_kernel[0]) opt.force_kernel = o->force_kernel;
    return opt;
}
