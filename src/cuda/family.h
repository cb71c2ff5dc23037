/* SPDX-License-Identifier: MIT */
/*
 * family.h: the CUDA backend's kernel-family table. One row per kernel family and
 * pipeline says everything the backend, `fmha build`, the NVRTC test and the selector
 * need to know of it: which keys it has variants for, its source and entry point, the
 * preprocessor defines of a key, its workspace, its plan-time limits and its launch.
 * Shared memory comes from the one formula in src/core/specs.c (fmha__smem_bytes); the
 * sm90 forward's kernels state their layout's size too (fmha_smem_layout_bytes), which
 * test_nvrtc checks against it.
 *
 * Adding a GPU family: its kernel file(s) and params header under src/cuda/kernels/<name>/,
 * a C file with its row's functions (as src/cuda/fwd.c), one row in src/cuda/families.c,
 * and its tests (CONTRIBUTING.md).
 */
#ifndef FMHA_CUDA_FAMILY_H
#define FMHA_CUDA_FAMILY_H

#include "../core/internal.h"
#include "../core/key.h"
#include "driver.h"

#define FMHA_MAX_DEFINES 24
#define FMHA_DEFINE_LEN 48

struct cuda_family;

/* What a device offers a launch beyond the target's numbers. */
typedef struct cuda_device_info {
    int l2_bytes, sm_count;
    /* programmatic dependent launch: sm90 or later, a driver with cuLaunchKernelEx, and
     * FMHA_PDL not 0 (backend.c) */
    int dependent_launch;
} cuda_device_info_t;

/* A compiled and loaded kernel: what a plan's stage holds (stage_data); the context
 * that loaded it owns it. */
typedef struct cuda_kernel {
    char name[FMHA_KERNEL_NAME_LEN];
    const struct cuda_family *family;
    fmha_key_t key;
    CUcontext primary; /* made current around launches */
    CUmodule module;
    CUfunction fn;
    CUfunction phase_print; /* a diagnostic build's report printer (phase_clock.cuh), or NULL */
    int smem, threads;
    cuda_device_info_t device;
} cuda_kernel_t;

/* One launch: the stage's kernel, the plan's problem, the data pointers by role, the
 * stage's workspace, the stream; errors go to err. The primary context is current. */
typedef struct cuda_launch {
    const cuda_kernel_t *kernel;
    const fmha_problem_t *problem;
    void *const *data;
    void *workspace;
    void *workspace0;              /* stage 0's workspace: what a later stage reads (split partials) */
    const cuda_kernel_t *stage0;   /* stage 0's kernel: which first stage a later one follows */
    CUstream stream;
    char *err;
    size_t err_len;
} cuda_launch_t;

typedef struct cuda_family {
    const char *name;  /* "fwd_mma": the row, in messages and FMHA_DEBUG notes */
    kfamily_t family;  /* the kernel family and pipeline of the keys it serves */
    kpipe_t pipeline;
    const char *source; /* the embedded kernel source (fmha_src_<file>, kernel_sources.h) */
    const char *entry;  /* its extern "C" __global__ function */
    /* Does the source have a variant for key k (tiles, head dims, features)? */
    int (*accepts)(const fmha_key_t *k);
    /* The -D defines (NAME=VALUE) of key k; returns how many (at most FMHA_MAX_DEFINES). */
    int (*defines)(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN]);
    /* Threads per CTA of key k. */
    int (*threads)(const fmha_key_t *k);
    /* Workspace bytes for problem p; NULL: none. */
    size_t (*workspace)(const fmha_key_t *k, const fmha_problem_t *p);
    /* NULL when the kernel can run p on target t, else why (written to why). */
    const char *(*can_implement)(const fmha_key_t *k, const fmha_problem_t *p, const fmha_target_t *t, char *why,
                                 size_t len);
    /* Fill the params, pick the grid, launch. */
    fmha_status_t (*launch)(const cuda_launch_t *l);
    /* 1: the kernel calls wait_prior_grids() (kernels/device/common.cuh) before it touches
     * global memory, so on sm90 it is launched as a programmatic dependent: its CTAs may
     * start while the stream's prior kernel finishes, hiding the launch (perf-notes run
     * 69). Rows that leave it out are launched plainly. */
    int dependent_launch;
} cuda_family_t;

extern const cuda_family_t fmha__cuda_families[];
extern const int fmha__cuda_family_count;

/* The row that has a variant for key k (its family, pipeline and accepts), or NULL. */
const cuda_family_t *fmha__cuda_family_of(const fmha_key_t *k);

/* The defines of a key through its row, as pointers for the JIT; returns how many, or
 * -1 when no row accepts the key. */
int fmha__cuda_key_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN], const char **ptrs);

/* nvcc's sm number of an arch (80, 86, 89, 90; 0 for the CPU). */
int fmha__cuda_sm_of(karch_t arch);

#endif /* FMHA_CUDA_FAMILY_H */
