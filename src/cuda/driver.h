/* SPDX-License-Identifier: MIT */
/*
 * driver.h: the CUDA driver API, loaded with dlopen so the library loads and runs (on
 * the CPU backend) on machines without a driver. Only the types and entry points fmha
 * uses are declared; no CUDA header is needed to build.
 */
#ifndef FMHA_CUDA_DRIVER_H
#define FMHA_CUDA_DRIVER_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

/* cuLaunchKernelEx's config and attribute (cuda.h's layout: the value a 64-byte union
 * 8 bytes into the attribute). fmha sets one attribute: programmatic stream
 * serialization (id 6), which lets a kernel launch while the prior one still runs; the
 * kernel waits for it with griddepcontrol.wait (kernels/device/common.cuh). */
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct cu_launch_attribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int programmatic_stream_serialization_allowed;
    } value;
} cu_launch_attribute_t;
typedef struct cu_launch_config {
    unsigned grid[3], block[3], smem;
    CUstream stream;
    cu_launch_attribute_t *attrs;
    unsigned num_attrs;
} cu_launch_config_t;

enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};

typedef struct cuda_api {
    void *lib;
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext *);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamIsCapturing)(CUstream, int *status); /* 0: not capturing */
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    /* CUDA 12+; NULL on an older driver (launches then go through cuLaunchKernel) */
    CUresult (*cuLaunchKernelEx)(const cu_launch_config_t *config, CUfunction, void **args, void **extra);
    /* CUDA 12+; NULL on an older driver (the sm90 kernel then copies with cp.async) */
    CUresult (*cuTensorMapEncodeTiled)(void *map, int dtype, unsigned rank, void *addr, const unsigned long long *dims,
                                       const unsigned long long *strides, const unsigned *box,
                                       const unsigned *element_strides, int interleave, int swizzle, int l2_promotion,
                                       int oob_fill);
} cuda_api_t;

/* The CUtensorMap enum values fmha uses (cuda.h) */
enum {
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0, /* fp8 e4m3 */
    CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1,
    CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
    CU_TENSOR_MAP_SWIZZLE_64B = 2, /* fp8 at hd64: rows of 64 bytes */
    CU_TENSOR_MAP_SWIZZLE_128B = 3,
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0 /* out-of-bounds elements read as zeros */
};

/* The process-wide driver API, loaded once (thread-safe). NULL when no driver could be
 * loaded or initialised; *why (static) says why. */
const cuda_api_t *fmha__cuda(const char **why);
/* "CUDA_ERROR_X: message" for a result. */
const char *fmha__cuda_error(CUresult r, char *buf, size_t len);

/* Record "<what>: CUDA_ERROR_X (n): message" in a handle's error buffer (FMHA_ERR_LEN
 * bytes, as fmha__fail) and return status; `what` is printf-style. */
#include "fmha/fmha.h"
fmha_status_t fmha__cuda_fail(char *err, fmha_status_t status, CUresult r, const char *what, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif /* FMHA_CUDA_DRIVER_H */
