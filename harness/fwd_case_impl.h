/* SPDX-License-Identifier: MIT */
/*
 * fwd_case_impl.h: the state of a forward case, shared by fwd_case.c (buffers, device
 * copies, execution, the check) and fwd_case_kv.c (caches, pages, appendkv).
 */
#ifndef FMHA_CHECK_FWD_CASE_IMPL_H
#define FMHA_CHECK_FWD_CASE_IMPL_H

#include "fwd_case.h"

#define NROLES ((int)FMHA_TENSOR_ROLE_END_)
#define MAX_DEVICE_BUFFERS 64

typedef struct buffer {
    void *data;
    size_t elems;      /* allocated elements */
    fmha_dtype_t dt;
    unsigned char *logical; /* outputs: 1 where an element is part of the tensor, 0 for padding */
} buffer_t;

/* The appendkv half of a case (s_knew > 0). */
typedef struct append_part {
    fmha_problem_t *p;
    buffer_t k_new, v_new, cos, sin, q_in, lens_old;
    void *data[NROLES];        /* host pointers of p's roles */
    void *cache_init[2];       /* the K/V caches before the append, new slots included */
    int64_t *slot[2];          /* cache offset of (b, t, h, dim 0) of each new K and V row [B][s_knew][Hk] */
    double *k_ref, *k_low;     /* rotated new keys [B][s_knew][Hk][Dqk]: double, and fp32 rounded to the type */
    double *q_ref, *q_low;     /* rotated q [B][Sq][Hq][Dqk] (with rotary_dim) */
} append_part_t;

struct fwd_case {
    fwd_config_t cfg;
    char *key;       /* fwd_case_key: the identity of the inputs, for reference memos */
    fmha_problem_t *p;
    buffer_t buf[NROLES];
    int32_t *cu_q, *cu_k, *used_k;
    void *workspace; /* grown to the largest plan executed */
    size_t workspace_bytes;
    fmha_context_t *dev; /* set by fwd_case_bind for a CUDA context */
    struct {
        const void *host;
        void *dev;
        size_t bytes;
    } dmap[MAX_DEVICE_BUFFERS]; /* device copy of each host buffer a problem uses */
    int ndmap;
    int64_t total_q, total_k;

    /* KV-cache configurations: p reads a cache built from the logical K/V, and the
     * naive references run ref_p, a forward over the logical tensors. */
    int cached;
    int32_t *lens;           /* keys of each sequence (after any append) */
    buffer_t lk, lv, lq;     /* logical K, V and (rotated) Q for ref_p */
    fmha_problem_t *ref_p;
    void *ref_data[NROLES];
    append_part_t app;
};

/* Bytes of q + o + (each sequence's used) k + v, and of an fp32 lse (fwd_case_bytes). */
void fwd_case_traffic(const fwd_case_t *fc, double *qkvo, double *lse);
void *fwd_case_role_data(const fwd_case_t *fc, int r);
size_t fwd_case_role_bytes(const fwd_case_t *fc, int r);
int fwd_case_alloc_buffer(buffer_t *b, fmha_dtype_t dt, size_t elems, int is_output);
void fwd_case_free_buffer(buffer_t *b);
void fwd_case_poison(buffer_t *b);
/* Flag the elements of a (rank, dims, strides) view of b in b->logical. */
void fwd_case_mark_logical(buffer_t *b, int rank, const int64_t *dims, const int64_t *str);
/* Elements of b that were left poisoned (logical) or written though not logical. */
int64_t fwd_case_bad_writes(const buffer_t *b);
uint64_t fwd_case_next_u64(uint64_t *st);
/* b's elements drawn uniformly from [lo, hi) by the stream st (fwd_case_next_u64), which
 * ends as the serial draws would leave it; large buffers fill in parallel. */
void fwd_case_fill_random(buffer_t *b, uint64_t *st, double lo, double hi);
double fwd_case_uniform(uint64_t *st, double lo, double hi);

/* Device copies (CUDA contexts, after fwd_case_bind): the copy of a host buffer (NULL
 * when none), a new one uploaded from host, and a copy in either direction (a no-op for
 * an unbound buffer). */
void *fwd_case_dev_of(const fwd_case_t *fc, const void *host);
fmha_status_t fwd_case_dev_register(fwd_case_t *fc, const void *host, size_t bytes, const char *what, char *why,
                                    size_t why_len);
fmha_status_t fwd_case_dev_sync(fwd_case_t *fc, void *host, int to_device);

/* fwd_case_kv.c: build the cache, pages and appendkv of a KV-cache configuration, after
 * the logical tensors exist. */
fmha_status_t fwd_case_kv_setup(fwd_case_t *fc, char *why, size_t why_len);
void fwd_case_kv_destroy(fwd_case_t *fc);
/* Check the append half into r (k_new, q_rot, v_new_mismatches, k_plain_mismatches, cache_clobbered). */
int fwd_case_kv_check(const fwd_case_t *fc, fwd_check_t *r);

#endif /* FMHA_CHECK_FWD_CASE_IMPL_H */
