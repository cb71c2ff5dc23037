/* SPDX-License-Identifier: MIT */
/*
 * fp8_tensor_core.h: what an sm90 e4m3 wgmma keeps of a dot product, measured (perf-notes
 * run 165, bench/micro/fp8_accum.cu): the fp8 accuracy rule's naive reference sums q.k
 * this way (docs/semantics.md, "FP8").
 */
#ifndef FMHA_CHECK_FP8_TENSOR_CORE_H
#define FMHA_CHECK_FP8_TENSOR_CORE_H

/* One k32 step of an e4m3 wgmma on an fp32 accumulator: acc + sum_i a[i] b[i] over n <= 32
 * e4m3 values (as floats), as the tensor core computes it, bit for bit on an H200:
 *   - E is the largest of the products' exponents, each taken as the sum of its factors'
 *     exponent fields (a subnormal's is -6; the mantissas' product in [1, 4) is ignored),
 *     and of acc's exponent;
 *   - every product and acc is truncated toward zero to a multiple of 2^(E - 13), and
 *     those are added exactly;
 *   - the sum is truncated toward zero to 14 significant bits.
 * A NaN among the inputs or in acc gives NaN. */
float fp8_tensor_core_step(float acc, const float *a, const float *b, int n);

#endif /* FMHA_CHECK_FP8_TENSOR_CORE_H */
