/*
 * jit.h: kernel sources embedded at build time, compiled by NVRTC (loaded with dlopen)
 * for the device's arch, cached on disk as cubins.
 *
 * NVRTC is looked for in $FMHA_CUDA_PATH/lib64, $CUDA_HOME/lib64, /usr/local/cuda/lib64,
 * the loader path, then NVIDIA's Python wheels under $VIRTUAL_ENV, $CONDA_PREFIX,
 * /usr/local and /usr.
 *
 * Cache key: FNV-1a 64 of the kernel source, params.h, the defines, the target arch, the
 * NVRTC version and the library version. Directory: $FMHA_CACHE_DIR, else
 * $XDG_CACHE_HOME/fmha, else $HOME/.cache/fmha. Writes are atomic (temp file + rename).
 * FMHA_JIT=off makes a cache miss an error (NOT_COMPILED).
 */
#ifndef FMHA_CUDA_JIT_H
#define FMHA_CUDA_JIT_H

#include <stddef.h>

#include "fmha/fmha.h"

/* Is NVRTC loadable? *why says why not (static). */
int fmha__nvrtc_available(const char **why);

/* Get the cubin of `source` (with params.h available as "params.h") for sm (80, 86, 89,
 * 90 -> sm_90a), with the given -D defines ("NAME=VALUE", n of them). *cubin is malloc'd.
 * *from_cache tells whether the disk cache had it. COMPILE_FAILED carries the NVRTC log. */
fmha_status_t fmha__jit_cubin(const char *source, const char *const *defines, int n_defines, int sm, void **cubin,
                              size_t *size, int *from_cache, char *err, size_t err_len);

/* The cache file a compile would use (for tests and `fmha build`). */
int fmha__jit_cache_path(const char *source, const char *const *defines, int n_defines, int sm, char *buf, size_t len);

extern const char fmha_src_params_h[];
extern const char fmha_src_common_cuh[];
extern const char fmha_src_fwd_mma[];
extern const char fmha_src_fwd_wgmma[];

#endif /* FMHA_CUDA_JIT_H */
