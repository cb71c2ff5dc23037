/* backend.h: the CUDA backend as the core sees it. */
#ifndef FMHA_CUDA_BACKEND_H
#define FMHA_CUDA_BACKEND_H

#include "../core/internal.h"

/* Open device `device` on ctx (primary context, properties, target) and register the
 * kernels this build can run there. NOT_COMPILED with the reason when there is no usable
 * CUDA driver or device. */
fmha_status_t fmha__cuda_context_init(fmha_context_t *ctx, int device);
void fmha__cuda_context_release(fmha_context_t *ctx);
struct fmha_key;
/* The -D defines of a forward key for the kernel source (NAME=VALUE); returns the count. */
int fmha__cuda_key_defines(const struct fmha_key *k, char defs[][48]);

/* The kernel source and entry point this build has for a key (NULL when it has none):
 * the mma.sync forward for sm80-path keys (two stages, no dropout), the wgmma forward for
 * sm90 wgmmaws keys it has shapes for (fp16/bf16, head dims 64, 128 or 256, tile_n 64 or 128,
 * no dropout). smem gets the kernel's dynamic shared memory in bytes. */
const char *fmha__cuda_kernel_source(const struct fmha_key *k, const char **entry, int *smem);

/* The retained primary context of a CUDA context (a CUcontext). */
struct CUctx_st *fmha__cuda_primary(fmha_context_t *ctx);
/* Why CUDA is unavailable here ("ok" when it is). */
const char *fmha__cuda_status(void);

#endif /* FMHA_CUDA_BACKEND_H */
