/* SPDX-License-Identifier: MIT */
/*
 * bwd_params.h: the backward family's parameters (its three stages: dot_do_o, dq_dk_dv,
 * convert_dq), one struct shared by host C (src/cuda/bwd.c) and device code, and the
 * sm90 kernel's TMA maps. The
 * forward's fields (q, k, v, o, lse, bias, alibi, sink, sequences, mask, scale,
 * dropout) are a fmha_fwd_params_t, so the device helpers read them unchanged; the
 * gradients and the workspace follow.
 *
 * Rows: row = token * heads_q + h, token = b * seqlen_q + i in batch mode, the packed
 * index cu_seqlens_q[b] + i in group mode.
 * Workspace of stage 0 (dot_do_o): dsum fp32 [rows] (D = rowsum(dO * O)), then dq_acc
 * fp32, rows x hdim_qk in the layout of device/dq_acc.cuh (head-major, swizzled rows;
 * the sum over key tiles of dS K, zeroed by dot_do_o; convert_dq scales it into dq), then a broadcast dbias's fp32 accumulator. Workspace of dq_dk_dv in deterministic mode: dq_sem int32
 * [batch][heads_q][m-blocks], zeroed before the launch: the key tiles of an m-block add
 * their dS K in a fixed order (key-tile order; the wgmma kernel's by cohort, see cohort),
 * each waiting for the count of its predecessors.
 */
#ifndef FMHA_CUDA_BWD_PARAMS_H
#define FMHA_CUDA_BWD_PARAMS_H

#ifdef __CUDACC_RTC__
#include "fwd_params.h" /* NVRTC: the embedded headers by file name */
#else
#include "../fwd/fwd_params.h"
#endif

typedef struct fmha_bwd_params {
    fmha_fwd_params_t f;
    uint64_t dout, dq, dk, dv, dbias, dsink; /* device pointers; dbias, dsink 0 when absent */
    int64_t do_batch, do_row, do_head;
    int64_t dq_batch, dq_row, dq_head;
    int64_t dk_batch, dk_row, dk_head;
    int64_t dv_batch, dv_row, dv_head;
    int64_t dbias_batch, dbias_head, dbias_row, dbias_col;
    int64_t dsink_head;
    uint64_t dsum, dq_acc, dq_sem;
    /* dbias broadcast over batch or heads: the key tiles add dS into dbias_acc (fp32, in
     * stage 0's workspace after dq_acc, dbias's shape, zeroed by dot_do_o's launch; 0
     * for a full dbias, written in place) with element strides dbias_acc_batch/_head (0
     * for a broadcast dim) and row seqlen_k; convert_dq writes it into dbias (dense). */
    uint64_t dbias_acc;
    int64_t dbias_acc_batch, dbias_acc_head, dbias_elems;
    int32_t tokens;     /* batch * seqlen_q, or total_q in group mode */
    int32_t hdim_qk;    /* dq_acc's row length (the element-wise stages' keys carry one head dim) */
    int32_t row_ctas;   /* convert_dq: CTAs over the rows; then (grid row 0) heads_q CTAs
                           reducing dsink when asked, then dbias_ctas converting dbias_acc */
    int32_t sink_ctas, dbias_ctas;
    /* dq_dk_dv's grid (bwd_common.cuh's bwd_cta): cohorts of this many consecutive key
     * tiles of a head, each cohort over every (sequence, KV head). The key tiles of a
     * cohort add dQ in the order they reach an m-block (bwd_wgmma.cuh's deterministic
     * walk), after every tile of the cohorts before; so a cohort must fit on the device
     * at once (bwd.c bounds it by the SM count). */
    int32_t cohort;
} fmha_bwd_params_t;

/* TMA descriptors of the sm90 dq_dk_dv kernel (bwd_wgmma.cuh, its second argument):
 * batch mode, each over (head dim, seqlen, heads, batch) like the forward's
 * (fmha_tma_maps_t), boxes of 64 x tile_m rows (q, dout) or 64 x tile_n (k, v), 128-byte
 * swizzle, rows past the sequence read as zeros. The host launches the kernel only with
 * all four encoded (bwd.c). */
typedef struct fmha_bwd_tma_maps {
    FMHA_ALIGN128 uint64_t q[16];
    FMHA_ALIGN128 uint64_t k[16];
    FMHA_ALIGN128 uint64_t v[16];
    FMHA_ALIGN128 uint64_t dout[16];
} fmha_bwd_tma_maps_t;

#endif /* FMHA_CUDA_BWD_PARAMS_H */
