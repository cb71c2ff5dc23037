/* SPDX-License-Identifier: MIT */
/*
 * driver.c: dlopen of libcuda. Searched in FMHA_CUDA_PATH, then the loader path
 * (libcuda.so.1 is installed by the driver, not the toolkit, and lives on the loader
 * path), then the toolkit's stubs are deliberately not used: a stub has no driver.
 */
#include "driver.h"

#include <stdarg.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static cuda_api_t api;
static const char *load_why = "not loaded";
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *open_lib(void)
{
    const char *dir = getenv("FMHA_CUDA_PATH");
    if (dir && *dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/libcuda.so.1", dir);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h ? h : dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
}

#define SYM(field, name)                                                   \
    do {                                                                   \
        *(void **)&api.field = dlsym(api.lib, name);                       \
        if (!api.field) {                                                  \
            load_why = "libcuda lacks " name;                              \
            return;                                                        \
        }                                                                  \
    } while (0)

static void load(void)
{
    api.lib = open_lib();
    if (!api.lib) {
        load_why = "no CUDA driver (libcuda.so.1 not found; set FMHA_CUDA_PATH)";
        return;
    }
    SYM(cuInit, "cuInit");
    SYM(cuDeviceGetCount, "cuDeviceGetCount");
    SYM(cuDeviceGet, "cuDeviceGet");
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(cuDeviceGetName, "cuDeviceGetName");
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    SYM(cuCtxSynchronize, "cuCtxSynchronize");
    SYM(cuModuleLoadData, "cuModuleLoadData");
    SYM(cuModuleUnload, "cuModuleUnload");
    SYM(cuModuleGetFunction, "cuModuleGetFunction");
    SYM(cuFuncSetAttribute, "cuFuncSetAttribute");
    SYM(cuLaunchKernel, "cuLaunchKernel");
    SYM(cuMemAlloc, "cuMemAlloc_v2");
    SYM(cuMemFree, "cuMemFree_v2");
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SYM(cuMemsetD32Async, "cuMemsetD32Async");
    SYM(cuMemsetD8Async, "cuMemsetD8Async");
    SYM(cuStreamSynchronize, "cuStreamSynchronize");
    SYM(cuStreamIsCapturing, "cuStreamIsCapturing");
    SYM(cuGetErrorName, "cuGetErrorName");
    SYM(cuGetErrorString, "cuGetErrorString");
    *(void **)&api.cuTensorMapEncodeTiled = dlsym(api.lib, "cuTensorMapEncodeTiled"); /* optional */
    *(void **)&api.cuLaunchKernelEx = dlsym(api.lib, "cuLaunchKernelEx");             /* optional */
    int n = 0;
    if (api.cuInit(0) != 0) {
        load_why = "cuInit failed (driver present, no usable GPU)";
        return;
    }
    if (api.cuDeviceGetCount(&n) != 0 || n == 0) {
        load_why = "no CUDA device";
        return;
    }
    loaded = 1;
    load_why = "ok";
}

const cuda_api_t *fmha__cuda(const char **why)
{
    pthread_once(&once, load);
    if (why) *why = load_why;
    return loaded ? &api : NULL;
}

fmha_status_t fmha__cuda_fail(char *err, fmha_status_t status, CUresult r, const char *what, ...)
{
    char head[512], tail[256];
    va_list ap;
    va_start(ap, what);
    vsnprintf(head, sizeof head, what, ap);
    va_end(ap);
    return fmha__fail(err, status, "%s: %s", head, fmha__cuda_error(r, tail, sizeof tail));
}

const char *fmha__cuda_error(CUresult r, char *buf, size_t len)
{
    const char *name = "CUDA_ERROR_?", *msg = "";
    if (loaded) {
        api.cuGetErrorName(r, &name);
        api.cuGetErrorString(r, &msg);
    }
    snprintf(buf, len, "%s (%d): %s", name ? name : "?", r, msg ? msg : "");
    return buf;
}
