/* context.c: contexts, version and build information. */
#include <stdlib.h>

#include "internal.h"

#define STR_(x) #x
#define STR(x) STR_(x)

unsigned fmha_version_number(void) { return FMHA_VERSION_NUMBER; }

const char *fmha_version_string(void)
{
    return STR(FMHA_VERSION_MAJOR) "." STR(FMHA_VERSION_MINOR) "." STR(FMHA_VERSION_PATCH);
}

#ifdef _OPENMP
#define OPENMP_INFO "openmp=on"
#else
#define OPENMP_INFO "openmp=off"
#endif

const char *fmha_build_info(void)
{
    return "version=" STR(FMHA_VERSION_MAJOR) "." STR(FMHA_VERSION_MINOR) "." STR(
        FMHA_VERSION_PATCH) " backends=cpu " OPENMP_INFO
                            " cuda=off(the CUDA backend is not part of this version) nvrtc=off";
}

fmha_status_t fmha_context_create(fmha_context_t **out, fmha_backend_t backend, int device)
{
    if (!out) return FMHA_STATUS_INVALID_ARGUMENT;
    *out = NULL;
    if (backend != FMHA_BACKEND_AUTO && backend != FMHA_BACKEND_CPU && backend != FMHA_BACKEND_CUDA)
        return FMHA_STATUS_INVALID_ARGUMENT;
    if (backend == FMHA_BACKEND_CUDA) return FMHA_STATUS_NOT_COMPILED;
    fmha_context_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return FMHA_STATUS_ALLOC_FAILED;
    ctx->backend = FMHA_BACKEND_CPU; /* AUTO: no CUDA backend in this build */
    ctx->device = device;
    *out = ctx;
    return FMHA_STATUS_SUCCESS;
}

void fmha_context_destroy(fmha_context_t *ctx) { free(ctx); }

fmha_backend_t fmha_context_backend(const fmha_context_t *ctx)
{
    return ctx ? ctx->backend : FMHA_BACKEND_AUTO;
}

const char *fmha_context_last_error(const fmha_context_t *ctx) { return ctx ? ctx->err : ""; }
