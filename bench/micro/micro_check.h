/* SPDX-License-Identifier: MIT */
/* micro_check.h: the micro-benchmarks' CUDA error check (each .cu here builds alone with
 * one nvcc line; this is the one piece they share). */
#ifndef FMHA_BENCH_MICRO_CHECK_H
#define FMHA_BENCH_MICRO_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

/* A failed CUDA call prints where and why, and ends the program. */
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif /* FMHA_BENCH_MICRO_CHECK_H */
