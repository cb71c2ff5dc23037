/* SPDX-License-Identifier: MIT */
/*
 * fwd_case.h: one forward test case, end to end, through the public API: random inputs
 * for a configuration, the problem, poisoned outputs, execution on a context, and the
 * check against the naive references with the accuracy rule. The CLI (`fmha run`) and
 * the tests share it, so what the tests cover is what users run.
 */
#ifndef FMHA_CHECK_FWD_CASE_H
#define FMHA_CHECK_FWD_CASE_H

#include <stdint.h>

#include "accuracy.h"
#include "fmha/fmha.h"
#include "reference_memo.h"

#define FWD_CASE_MAX_BATCH 4096

typedef enum bias_kind {
    BIAS_NONE = 0,
    BIAS_ELEM_11 = 1, /* [1, 1, Sq, Sk] */
    BIAS_ELEM_1H = 2, /* [1, Hq, Sq, Sk] */
    BIAS_ELEM_BH = 3, /* [B, Hq, Sq, Sk] */
    BIAS_ALIBI_H = 4, /* slopes [Hq] */
    BIAS_ALIBI_BH = 5 /* slopes [B, Hq] */
} bias_kind_t;

typedef enum fwd_poison {
    POISON_NONE = 0,
    POISON_NAN_Q, /* a NaN in q */
    POISON_NAN_K, /* a NaN in k */
    POISON_NAN_V, /* a NaN in v */
    POISON_INF_V  /* +Inf in v */
} fwd_poison_t;

/* The -poison flag's spelling of each fwd_poison_t: "n", "nan_q", "nan_k", "nan_v", "inf_v". */
extern const char *const FWD_POISON_NAMES[5];

typedef struct fwd_config {
    fmha_mode_t mode;
    int64_t b, h, h_k, d, d_v;
    int64_t s, s_k;            /* batch mode lengths; group mode max lengths */
    const int32_t *seqlens_q;  /* group mode: per-sequence lengths [b], copied at create */
    const int32_t *seqlens_k;  /* group mode: allocated K lengths [b] */
    const int32_t *seqused_k;  /* group mode, optional: used K lengths [b] */
    fmha_dtype_t dtype;        /* of q, k, v (and o, except fp8e4m3 inputs: o is bf16) */
    int descale;               /* fp8e4m3: descales 0 none, 1 [1] per tensor, 2 [B, Hk] */
    const char *mask;          /* CK grammar; NULL means "0" */
    bias_kind_t bias;
    int bias_fp32;             /* elementwise bias in fp32 (else the input dtype) */
    int lse;                   /* ask for LSE */
    int sink;                  /* per-head sink logits */
    double scale, softcap, p_drop;
    uint64_t drop_seed, drop_offset;
    int dropout_mask;          /* ask for the keep mask */
    int iperm, operm;          /* 1: BHSD memory order, 0: BSHD */
    int64_t pad;               /* extra elements after each head-dim row (strided views) */
    uint64_t seed;             /* input data */
    int describe_only;         /* build the problem but allocate no tensors (explain) */

    /* KV-cache families (fwd_case_kv.c). In batch mode their key lengths are seqlens_k
     * when given (each <= s_k), else s_k for every sequence. */
    fmha_family_t family;      /* fwd, fwd_splitkv, fwd_pagedkv or batch_prefill */
    int64_t num_splits;        /* fwd_splitkv: 0 lets the library choose */
    int64_t page_size;         /* > 0: a paged cache of pages in shuffled order */
    int kv_layout, kv_lookup;  /* fmha_kv_layout_t, fmha_kv_lookup_t */
    int cache_batch_idx;       /* contiguous cache: sequences live in shuffled rows of a larger cache */
    int64_t s_knew;            /* > 0: appendkv writes the last s_knew keys of each sequence first */
    int64_t rotary_dim;        /* appendkv: RoPE on the new keys and on q */
    int rotary_interleaved;
    /* Numerics under stress (tests/gpu/conf_numerics.c): q drawn from [-q_scale, q_scale]
     * (0: 1), and one non-finite input element (the fourth of the tensor's buffer, or its
     * last when shorter; with poison_token > 0, dim 3 of head 0 at that token of sequence
     * 0): the outputs then follow the oracle's non-finite pattern (acc_compare_nonfinite)
     * and must show some non-finite element. */
    double q_scale;
    fwd_poison_t poison;
    int64_t poison_token;
} fwd_config_t;

void fwd_config_default(fwd_config_t *c);

typedef struct fwd_case fwd_case_t;

/* Build inputs and the problem. On failure returns the status and writes why. */
fmha_status_t fwd_case_create(const fwd_config_t *c, fwd_case_t **out, char *why, size_t why_len);
void fwd_case_destroy(fwd_case_t *fc);
const fmha_problem_t *fwd_case_problem(const fwd_case_t *fc);

/* Run on ctx's device: for a CUDA context, device copies of every tensor are made and
 * the inputs uploaded once. Without a bind (or on the CPU) host buffers are used. */
fmha_status_t fwd_case_bind(fwd_case_t *fc, fmha_context_t *ctx, char *why, size_t why_len);

/* The appendkv problem that must run before the attention (s_knew > 0), else NULL. */
const fmha_problem_t *fwd_case_append_problem(const fwd_case_t *fc);

/* Reset the cache to its state before the append (new slots poisoned), poison q_rot,
 * and execute the appendkv plan once. */
fmha_status_t fwd_case_execute_append(fwd_case_t *fc, const fmha_plan_t *append_plan);

/* Poison the outputs, execute the plan once, and bring the outputs back to the host. */
fmha_status_t fwd_case_execute(fwd_case_t *fc, const fmha_plan_t *plan);

/* Execute warmup + repeat times without poisoning or copies and return the mean time per
 * execution in milliseconds (device synchronised before and after). */
fmha_status_t fwd_case_time(fwd_case_t *fc, const fmha_plan_t *plan, int warmup, int repeat, double *ms);
/* The same, and the host time of one fmha_plan_execute call in microseconds (the calls
 * before the final synchronise: on a GPU, the launch cost). */
fmha_status_t fwd_case_time_calls(fwd_case_t *fc, const fmha_plan_t *plan, int warmup, int repeat, double *ms,
                                  double *host_us);

/* The appendkv plan's time the same way (it rewrites the same slots each time), and the
 * bytes it must move (k_new and v_new read, their cache slots written; q read and q_rot
 * written when it rotates q; the rotary tables not counted). */
fmha_status_t fwd_case_time_append(fwd_case_t *fc, const fmha_plan_t *append_plan, int warmup, int repeat, double *ms);
double fwd_case_append_bytes(const fwd_case_t *fc);

typedef struct fwd_check {
    acc_result_t o, lse;
    int64_t mask_mismatches; /* dropout keep bits differing from the naive ones */
    int64_t unwritten;       /* output elements still holding the poison */
    /* appendkv: the rotated new keys and q against REFERENCE.md's RoPE, the new values
     * and the keys' unrotated dims bit for bit, and cache slots outside the appended ones
     * unchanged */
    acc_result_t k_new, q_rot;
    int64_t v_new_mismatches, k_plain_mismatches, cache_clobbered;
    int poison_unseen; /* a poisoned case whose reference outputs are all finite */
    int pass;
} fwd_check_t;

/* Compare the last execution with the naive references. Returns 0, or -1 when out of
 * memory. */
int fwd_case_check(const fwd_case_t *fc, fwd_check_t *r);
/* The same, with the references taken from memo when it holds this case's (computed and
 * kept there otherwise; NULL: computed and freed). */
int fwd_case_check_memo(const fwd_case_t *fc, reference_memo_t *memo, fwd_check_t *r);
/* What fixes the case's inputs: its command line and a hash of its per-sequence lengths
 * (the command line shortens long length lists). */
const char *fwd_case_key(const fwd_case_t *fc);

/* The host buffer of o after the last execution (elements in o's dtype and layout). */
const void *fwd_case_output(const fwd_case_t *fc, size_t *elems);

/* The `fmha run` command line that reproduces this configuration (snprintf contract). */
int fwd_config_cli(const fwd_config_t *c, char *buf, size_t len);

/* FLOPs of the case by REFERENCE.md's rule: 2 * Hq * (Dqk + Dv) * visible pairs. */
double fwd_case_flops(const fwd_case_t *fc);
/* The least bytes the case must move (for GB/s): q read and o written (lse too when
 * asked), each sequence's used keys and values read once per KV head. Page tables and
 * sequence lengths are not counted. */
double fwd_case_bytes(const fwd_case_t *fc);

#endif /* FMHA_CHECK_FWD_CASE_H */
