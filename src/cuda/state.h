/* SPDX-License-Identifier: MIT */
/* state.h: a CUDA context's backend state (backend.c makes it, loader.c fills its
 * kernel list). */
#ifndef FMHA_CUDA_STATE_H
#define FMHA_CUDA_STATE_H

#include <pthread.h>

#include "family.h"

typedef struct cuda_state {
    const cuda_api_t *cu;
    CUdevice dev;
    CUcontext primary; /* retained for the context's life */
    cuda_device_info_t info;
    pthread_mutex_t lock; /* guards the kernel list */
    cuda_kernel_t **kernels; /* every kernel loaded for a plan; unloaded at release */
    size_t nkernels, cap;
} cuda_state_t;

/* Register the table's kernels for the context's arch: every instance of the receipt
 * that a row accepts, runnable when `runnable` (a device), else descriptors only with
 * their plan-time checks (a virtual context; then the whole receipt, with or without a
 * row, as the arch's catalogue). Returns 0 or -1 (out of memory). */
int fmha__cuda_register(fmha_context_t *ctx, int arch, int receipt, int runnable);

/* Unload every kernel the state loaded. */
void fmha__cuda_unload_all(cuda_state_t *s);

#endif /* FMHA_CUDA_STATE_H */
