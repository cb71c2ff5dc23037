/* SPDX-License-Identifier: MIT */
/*
 * variant.cuh: the preprocessor variables a kernel key sets (the JIT passes each as -D,
 * src/cuda/fwd.c), with defaults for a standalone nvcc compile, and their short names.
 * A kernel defines its own tile defaults (FMHA_TILE_M, FMHA_TILE_N, FMHA_WARPS) first.
 *   FMHA_BF16      0 fp16, 1 bf16          FMHA_HDIM_QK, FMHA_HDIM_V  multiples of 16
 *   FMHA_MASK      0 none, 1 causal, 2 window (+ sink tokens)
 *   FMHA_BIAS      0 none, 1 elementwise, 2 ALiBi
 *   FMHA_LSE, FMHA_SOFTCAP, FMHA_SINK, FMHA_GROUP   0/1 (GROUP: varlen, cu_seqlens)
 *   FMHA_SPLIT     0/1: a split-KV first stage (fwd_mma: partials out, sink and LSE in the
 *                  combine; decode_mma: cache rows and lengths per sequence)
 *   FMHA_PAGED     0 contiguous K/V, 1 pages by block table, 2 pages by CSR lists
 *   FMHA_DROPOUT   0/1: Philox dropout (dropout.cuh); forward mma.sync and backward
 *   FMHA_DBIAS, FMHA_DETERMINISTIC  0/1, backward: write dbias; add dQ in a fixed order
 *   FMHA_FP8       0/1: q, k, v in fp8 e4m3 with descales, o in bf16 (FMHA_BF16 1); the
 *                  softmax numerator carries a factor 2^P_LOG2_SCALE into its e4m3 P
 */
#ifndef FMHA_KERNEL_VARIANT_CUH
#define FMHA_KERNEL_VARIANT_CUH

#ifndef FMHA_BF16
#define FMHA_BF16 0
#endif
#ifndef FMHA_HDIM_QK
#define FMHA_HDIM_QK 128
#endif
#ifndef FMHA_HDIM_V
#define FMHA_HDIM_V FMHA_HDIM_QK
#endif
#ifndef FMHA_MASK
#define FMHA_MASK 0
#endif
#ifndef FMHA_BIAS
#define FMHA_BIAS 0
#endif
#ifndef FMHA_LSE
#define FMHA_LSE 0
#endif
#ifndef FMHA_SOFTCAP
#define FMHA_SOFTCAP 0
#endif
#ifndef FMHA_SINK
#define FMHA_SINK 0
#endif
#ifndef FMHA_GROUP
#define FMHA_GROUP 0
#endif
#ifndef FMHA_SPLIT
#define FMHA_SPLIT 0
#endif
#ifndef FMHA_PAGED
#define FMHA_PAGED 0
#endif
#ifndef FMHA_DROPOUT
#define FMHA_DROPOUT 0
#endif
#ifndef FMHA_DBIAS
#define FMHA_DBIAS 0
#endif
#ifndef FMHA_DETERMINISTIC
#define FMHA_DETERMINISTIC 0
#endif
#ifndef FMHA_FP8
#define FMHA_FP8 0
#endif

/* fp8: P = exp2(s - m) is quantised to e4m3 as 2^8 P (docs/semantics.md, "FP8"): values
 * down to 2^-17 stay out of e4m3's subnormals. The factor rides in the row sum too and
 * cancels in O = (P V) / l; the LSE and the sink term take it out again. A kernel may set
 * FMHA_P_LOG2_SCALE to another exponent first: the sm90 hd128 kernel's stale-max softmax
 * takes 6, for e4m3 headroom above P's usual top (fwd_wgmma.cuh's STALE_MAX). */
#ifndef FMHA_P_LOG2_SCALE
#define FMHA_P_LOG2_SCALE 8
#endif
#if FMHA_FP8
#define P_LOG2_SCALE ((float)FMHA_P_LOG2_SCALE)
#else
#define P_LOG2_SCALE 0.f
#endif

#define DQK FMHA_HDIM_QK
#define DV FMHA_HDIM_V
#define TM FMHA_TILE_M
#define TN FMHA_TILE_N

#endif /* FMHA_KERNEL_VARIANT_CUH */
