/* SPDX-License-Identifier: MIT */
/*
 * fwd_params.h: the forward family's parameters, one struct shared by host C (src/cuda/fwd.c)
 * and device code (passed by value as the kernels' first argument). Each GPU family has
 * one such header beside its kernels; the device helpers (kernels/device) read any
 * family's params by these field names. Pointers travel as uint64 so
 * the layout is identical in both compilers; strides are element strides, int64.
 *
 * Batch mode: Q[b, i, h, d] = q + b*q_batch + i*q_row + h*q_head + d (last dim contiguous).
 * Group mode: the batch stride is unused; token t of sequence b is cu_seqlens_q[b] + i.
 */
#ifndef FMHA_CUDA_FWD_PARAMS_H
#define FMHA_CUDA_FWD_PARAMS_H

#ifdef __CUDACC_RTC__
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef unsigned int uint32_t;
#else
#include <stdint.h>
#endif
#include "divisor.h"
#include "grid_order.h"

/* num_splits' bound (Split-KV below): the keys' max_splits_log2 = 7 */
#define FMHA_MAX_SPLITS 128

typedef struct fmha_fwd_params {
    uint64_t q, k, v, o, lse, bias, alibi, sink;   /* device pointers; 0 when absent */
    uint64_t cu_seqlens_q, cu_seqlens_k, seqused_k; /* group mode, int32 */
    int64_t q_batch, q_row, q_head;
    int64_t k_batch, k_row, k_head;
    int64_t v_batch, v_row, v_head;
    int64_t o_batch, o_row, o_head;
    int64_t lse_batch, lse_head, lse_row;           /* group mode: lse_batch unused, rows global */
    int64_t bias_batch, bias_head, bias_row, bias_col; /* 0 for broadcast dims */
    int64_t alibi_batch, alibi_head;                /* alibi_batch 0 for [Hq] slopes */
    int64_t sink_head;
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k; /* seqlens: the max in group mode */
    int32_t window_left, window_right, sink_tokens, bottom_right; /* -1: unbounded; clamped to max(sq, sk) */
    float scale_log2;   /* scale * log2(e): softmax runs in exp2 */
    float scale;        /* scale: bias and ALiBi's scores, the backward's dQ and dK */
    float softcap;      /* 0: off */
    float softcap_in;   /* 2 log2(e) scale / softcap: a raw score times it is the exponent
                           of soft-cap's tanh (common.cuh softcap_tanh); 0 when off */
    float softcap_log2; /* softcap * log2(e): the logit in the exp2 domain is it times tanh */
    float softcap_lin;  /* softcap / 2 and -softcap / (24 log2(e)^2): softcap_log2 times the */
    float softcap_cub;  /* coefficients of softcap_tanh's series in its exponent a */
    int32_t l2_pairs;      /* masked grids (grid_order.h): (batch, head) pairs per L2 group, >= 1 */
    int32_t l2_head_pairs; /* masked grids: the first group's pairs, the remainder (pairs %
                              l2_pairs, 0: none); the groups after it have l2_pairs */
    int32_t l2_tail_pair;  /* masked grids: the first pair of the last group, which may take
                              in several whole groups (fmha_masked_layout) */
    int32_t sched_slot; /* the sm90 kernel launched persistent (fewer CTAs than items): its
                           item counter, fmha_fwd_sched[sched_slot] (wgmma_items.cuh); -1: one
                           CTA per item, or persistent on a static walk (fwd.c) */
    int32_t top_partial; /* 1 (the sm90 kernel's masked grids, fwd.c): a sequence's m-blocks
                            shifted up by whole warpgroups, (TILE_M - sq % TILE_M) % TILE_M
                            rounded down to 64 rows, so that its partial block is the top
                            one, whose rows see the fewest keys under a right bound; rows
                            above 0 read as zeros and are not stored (fwd_wgmma.cuh) */
    int32_t total_q, total_k; /* group mode: token rows of q/o and k/v (at most 2^31 - 1), the
                                 bounds of every cu_seqlens offset (sequence.cuh) */

    /* Split-KV (FMHA_SPLIT, the splitkv family's stage 0 on this kernel; src/cuda/splitkv.c).
     * Split s of a sequence of sk keys covers key tiles [s * per, (s + 1) * per), per =
     * ceil(ceil(sk / TILE_N) / num_splits) tiles; it writes O normalised within the split
     * and its LSE (natural log, -inf when it sees no key) for every query row, in fp32:
     * part_o[(s * part_rows + row) * hdim_v + d], part_lse[s * part_rows + row], row =
     * token * heads_q + h (token: b * seqlen_q + i in batch mode, the packed index in group
     * mode). The combine stage (kernels/splitkv/combine.cuh) reduces them. */
    uint64_t part_o, part_lse;
    uint64_t seqlens_k;       /* batch mode, int32 [batch], optional: keys of each sequence */
    uint64_t cache_batch_idx; /* batch mode, int32 [batch], optional: K/V row of each sequence */
    int32_t num_splits, cache_rows; /* cache_rows: K/V's batch extent (bounds cache_batch_idx) */
    fmha_divisor_t splits_div;      /* num_splits' (divisor.h) */
    int32_t group;                  /* heads_q / heads_kv: query heads per KV head */
    int32_t pack_rows; /* GQA packing: packed rows per query head (fwd_mma.cuh), a multiple of 16 */

    /* Paged K/V (FMHA_PAGED 1: block table + seqlens_k, 2: CSR lists; kernels/device/paged.cuh).
     * Key j of a sequence is slot j % page_size of page P = its (j / page_size)-th page:
     * K + P * k_page + slot * k_row + hk * k_head (k_row/k_head from NHD or HND). */
    uint64_t block_table, kv_indptr, kv_indices, kv_last_page_len;
    int64_t k_page, v_page;
    int64_t table_row, table_col, indptr_stride, indices_stride, last_stride;
    int32_t page_size, num_pages, table_width, num_indices;
    fmha_divisor_t page_div; /* page_size's (divisor.h) */
    int64_t part_rows;
    /* The decode kernel with several splits (kernels/splitkv/decode_mma.cuh): uint64 [batch x
     * heads_kv] arrival counters, each the launch's split_tag (< 2^48) and a count
     * (device/common.cuh arrive_tagged), so their contents before the launch do not matter;
     * the last split of a KV head to finish reduces the partials of all of them into O and
     * LSE (no combine launch). */
    uint64_t split_counters, split_tag;

    /* Dropout (FMHA_DROPOUT; kernels/device/dropout.cuh): REFERENCE.md's Philox stream, an
     * element kept iff its word >= drop_threshold; kept probabilities are scaled by
     * rp_keep = 1 / (1 - p). dropout_mask: the optional uint8 keep mask [B, Hq, Sq, Sk]. */
    uint64_t dropout_mask;
    int64_t mask_batch, mask_head, mask_row, mask_col;
    uint32_t drop_threshold, drop_seed[2], drop_offset[2];
    float rp_keep;

    /* fp8 e4m3 inputs (FMHA_FP8): the fp32 descales of q, k and v ([0], [1], [2]); 0 when
     * absent (1). Element (b, hk) at descale[i] + b * descale_batch[i] + hk * descale_head[i]
     * (both strides 0 for a [1] tensor). */
    uint64_t descale[3];
    int64_t descale_batch[3], descale_head[3];
} fmha_fwd_params_t;

/* The sm90 forward's persistent launches take items from a counter pair in the kernel's
 * module (fwd_wgmma.cuh, "the item scheduler"); the host hands the slots out in turn. */
#define FMHA_SCHED_SLOTS 1024

/* TMA descriptors (the driver's CUtensorMap: 128 opaque bytes, 128-byte aligned) of Q, K
 * and V for the sm90 kernel's second argument, batch mode: dims (head_dim, seqlen,
 * heads, batch), box (64, tile_m or tile_n, 1, 1), 128-byte swizzle, rows past the
 * sequence read as zeros. use_tma is 0 when they could not be encoded (a stride that is
 * not a multiple of 16 bytes, say, or group mode): the kernel then copies with cp.async. */
#ifdef __cplusplus
#define FMHA_ALIGN128 alignas(128)
#else
#define FMHA_ALIGN128 _Alignas(128)
#endif
typedef struct fmha_tma_maps {
    FMHA_ALIGN128 uint64_t q[16];
    FMHA_ALIGN128 uint64_t k[16];
    FMHA_ALIGN128 uint64_t v[16];
    /* O's map for the staged epilogue (fwd_wgmma.cuh STAGED_EPILOGUE): dims as Q's, box
     * (64, 64, 1, 1), written by TMA stores; o_tma is 0 when it could not be encoded (the
     * kernel then writes O from registers) */
    FMHA_ALIGN128 uint64_t o[16];
    int32_t use_tma, o_tma;
} fmha_tma_maps_t;

#endif /* FMHA_CUDA_FWD_PARAMS_H */
