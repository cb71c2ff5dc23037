// SPDX-License-Identifier: MIT
/*
 * kv_read.cu: how fast can a decode-shaped kernel read a KV cache on this GPU, by copy
 * engine? No attention math: each CTA streams the K and V rows of one (sequence, KV head)
 * of a [B, S, Hk, D] bf16 cache into shared memory in 64-row tiles, STAGES deep, and
 * touches each tile once, with the decode kernel's grid (KV heads fastest, then the
 * batch), block (128 threads) and shared memory per CTA (so two CTAs per SM). Copy engines:
 *   cp.async     16-byte cp.async.cg per thread, rows walked as decode_mma.cuh does; with
 *                .L2::256B (the decode kernel's copy), and with each of the decode's other
 *                habits in turn: the zero-fill operand, rows padded to 272 bytes in shared
 *                memory, the K tile's copies before the V tile's
 *   tma          one thread issues a 3-d TMA box (128 x 1 x 64) for K and one for V per
 *                tile, completion on an mbarrier per stage; 3 stages, or 4 at one CTA an SM
 * plus a plain coalesced read of the whole cache (16-byte loads, grid-stride) as the
 * ceiling of any read. GB/s = bytes of K and V / time (REFERENCE.md's decode convention),
 * each launch timed as bench/gpu_timing.py times (10 in a CUDA graph, median replay).
 * It found the decode's 4% (perf-notes run 99): every engine reads at 3100-3150 GB/s on
 * an H100 but cp.async into padded rows, at 2990-3020, so the decode kernel swizzles.
 *
 * Its few PTX wrappers (cp.async, mbarrier, TMA) are its own, as in device/sm90.cuh, so
 * that it builds with nvcc alone against no header of the library.
 *
 * Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/micro/kv_read.cu -lcuda -o kv_read
 * Run:   ./kv_read [B S]   (default: batches 16, 64, 128 at S 8192; Hk 8, D 128)
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro_check.h"

#define D 128
#define TN 64
#define THREADS 128
#define ROW_BYTES (D * 2)
#define TILE_BYTES (TN * ROW_BYTES)

static cudaStream_t g_stream = 0; /* where the launches go (time_ms captures them) */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <bool HINT, bool ZFILL>
__device__ __forceinline__ void cp16(void *dst, const void *src, int src_bytes)
{
    if (ZFILL && HINT)
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                     "r"(src_bytes));
    else if (ZFILL)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
    else if (HINT)
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* A tile's worth of work on shared memory: one 16-byte read per thread, folded in. */
__device__ __forceinline__ uint32_t touch(const unsigned char *tile, int tid)
{
    const uint4 x = *(const uint4 *)(tile + tid * 16);
    return x.x ^ x.y ^ x.z ^ x.w;
}

/* cp.async: each thread one 16-byte column, rows THREADS / 16 = 8 apart (decode_mma's walk).
 * The decode kernel's differences, one flag each: ZFILL (the src-size operand, from a
 * per-row bound), PAD (rows 272 bytes apart in shared memory), KV (the K tile's copies,
 * then the V tile's, not interleaved). */
template <bool HINT, int STAGES, bool ZFILL = false, bool PAD = false, bool KV = false>
__global__ void __launch_bounds__(THREADS) read_cp_async(const __nv_bfloat16 *k, const __nv_bfloat16 *v, int S, int Hk,
                                                          uint32_t *sink)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    constexpr int SROW = PAD ? ROW_BYTES + 16 : ROW_BYTES, STILE = TN * SROW;
    const int hk = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
    const long long row = (long long)Hk * D; /* elements between key rows */
    const __nv_bfloat16 *K = k + ((long long)b * S * Hk + hk) * D, *V = v + ((long long)b * S * Hk + hk) * D;
    const int r0 = tid / 16, c = (tid % 16) * 8;
    const int tiles = S / TN;
    auto load = [&](int t, int s) {
        unsigned char *dk = smem + s * 2 * STILE, *dv = dk + STILE;
        const __nv_bfloat16 *gk = K + ((long long)t * TN + r0) * row + c, *gv = V + ((long long)t * TN + r0) * row + c;
        const int valid = S - t * TN;
        if (KV) {
#pragma unroll
            for (int i = 0; i < TN / 8; i++) {
                const bool ok = r0 + 8 * i < valid;
                cp16<HINT, ZFILL>(dk + (r0 + 8 * i) * SROW + c * 2, ok ? gk + 8 * i * row : K + c, ok ? 16 : 0);
            }
#pragma unroll
            for (int i = 0; i < TN / 8; i++) {
                const bool ok = r0 + 8 * i < valid;
                cp16<HINT, ZFILL>(dv + (r0 + 8 * i) * SROW + c * 2, ok ? gv + 8 * i * row : V + c, ok ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int i = 0; i < TN / 8; i++) {
                const bool ok = !ZFILL || r0 + 8 * i < valid;
                cp16<HINT, ZFILL>(dk + (r0 + 8 * i) * SROW + c * 2, ok ? gk + 8 * i * row : K + c, ok ? 16 : 0);
                cp16<HINT, ZFILL>(dv + (r0 + 8 * i) * SROW + c * 2, ok ? gv + 8 * i * row : V + c, ok ? 16 : 0);
            }
        }
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles) load(s, s);
        cp_commit();
    }
    uint32_t acc = 0;
    for (int t = 0; t < tiles; t++) {
        cp_wait<STAGES - 2>();
        __syncthreads();
        if (t + STAGES - 1 < tiles) load(t + STAGES - 1, (t + STAGES - 1) % STAGES);
        cp_commit();
        const unsigned char *tile = smem + (t % STAGES) * 2 * STILE;
        acc ^= touch(tile, tid) ^ touch(tile + STILE, tid);
    }
    if (acc == 0x12345678u) *sink = acc; /* keeps the reads */
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.b32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(bar)), "r"(parity)
                     : "memory");
}
__device__ __forceinline__ void tma3(void *dst, const CUtensorMap *map, int c0, int c1, int c2, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
                 "%4}], [%5];\n" ::"r"(smem_u32(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
                 : "memory");
}

/* TMA: maps over [B * S tokens, Hk, D] (innermost first: D, Hk, token), box 128 x 1 x 64. */
template <int STAGES>
__global__ void __launch_bounds__(THREADS) read_tma(const __grid_constant__ CUtensorMap mk,
                                                     const __grid_constant__ CUtensorMap mv, int S, uint32_t *sink)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    uint64_t *bars = (uint64_t *)(smem + STAGES * 2 * TILE_BYTES);
    const int hk = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
    const int tiles = S / TN, t0 = b * S;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) mbar_init(&bars[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    auto load = [&](int t, int s) {
        unsigned char *dk = smem + s * 2 * TILE_BYTES, *dv = dk + TILE_BYTES;
        mbar_expect(&bars[s], 2 * TILE_BYTES);
        tma3(dk, &mk, 0, hk, t0 + t * TN, &bars[s]);
        tma3(dv, &mv, 0, hk, t0 + t * TN, &bars[s]);
    };
    if (tid == 0)
        for (int s = 0; s < STAGES - 1 && s < tiles; s++) load(s, s);
    uint32_t acc = 0;
    for (int t = 0; t < tiles; t++) {
        const int s = t % STAGES;
        mbar_wait(&bars[s], (t / STAGES) & 1);
        const unsigned char *tile = smem + s * 2 * TILE_BYTES;
        acc ^= touch(tile, tid) ^ touch(tile + TILE_BYTES, tid);
        __syncthreads(); /* every thread is done with tile t - 1's buffer ... */
        if (tid == 0 && t + STAGES - 1 < tiles) load(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    }
    if (acc == 0x12345678u) *sink = acc;
}

/* The ceiling: every byte of K and V by 16-byte loads, grid-stride. */
__global__ void read_plain(const uint4 *a, const uint4 *b, long long n, uint32_t *sink)
{
    uint32_t acc = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const uint4 x = __ldcs(a + i), y = __ldcs(b + i);
        acc ^= x.x ^ x.y ^ x.z ^ x.w ^ y.x ^ y.y ^ y.z ^ y.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

static CUtensorMap make_map(void *base, int B, int S, int Hk)
{
    CUtensorMap m;
    const cuuint64_t dims[3] = {D, (cuuint64_t)Hk, (cuuint64_t)B * S};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)Hk * D * 2};
    const cuuint32_t box[3] = {D, 1, TN}, elem[3] = {1, 1, 1};
    const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides, box, elem,
                                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
        exit(1);
    }
    return m;
}

/* Time per launch as bench/gpu_timing.py's gpu_ms: 10 launches captured in a CUDA graph,
 * the median of 30 replays / 10. */
template <typename F> static double time_ms(F launch)
{
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaStream_t prev = g_stream;
    g_stream = st;
    for (int i = 0; i < 3; i++) launch();
    CHECK(cudaStreamSynchronize(st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 10; i++) launch();
    CHECK(cudaStreamEndCapture(st, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    float t[30];
    for (int i = 0; i < 30; i++) {
        CHECK(cudaEventRecord(a, st));
        CHECK(cudaGraphLaunch(exec, st));
        CHECK(cudaEventRecord(b, st));
        CHECK(cudaEventSynchronize(b));
        CHECK(cudaEventElapsedTime(&t[i], a, b));
    }
    CHECK(cudaGetLastError());
    for (int i = 1; i < 30; i++) /* insertion sort: the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { const float x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaStreamDestroy(st));
    g_stream = prev;
    return t[15] / 10.0;
}

static void run(int B, int S, int Hk, uint32_t *sink, int sms)
{
    const size_t n = (size_t)B * S * Hk * D, bytes = 2 * n * 2;
    __nv_bfloat16 *k, *v;
    CHECK(cudaMalloc(&k, n * 2));
    CHECK(cudaMalloc(&v, n * 2));
    CHECK(cudaMemset(k, 1, n * 2));
    CHECK(cudaMemset(v, 2, n * 2));
    const CUtensorMap mk = make_map(k, B, S, Hk), mv = make_map(v, B, S, Hk);
    const dim3 grid(Hk, B);
    /* the decode kernel's shared memory (hd128, 3 stages, padded rows, Q): two CTAs per SM */
    const int smem_decode = 108800;
    printf("B %4d S %6d Hk %d D %d: %.2f GB |", B, S, Hk, D, bytes / 1e9);
#define GBS(ms) (bytes / ((ms) * 1e6))
    double ms;
    ms = time_ms([&] { read_plain<<<sms * 16, 256, 0, g_stream>>>((const uint4 *)k, (const uint4 *)v, (long long)(n / 8), sink); });
    printf(" plain %5.0f |", GBS(ms));
#define CP(label, ...)                                                                                 \
    ms = time_ms([&] { read_cp_async<__VA_ARGS__><<<grid, THREADS, smem_decode, g_stream>>>(k, v, S, Hk, sink); }); \
    printf(" %s %5.0f |", label, GBS(ms));
    CP("cp.async", false, 3)
    CP("256B", true, 3)
    CP("256B+zfill", true, 3, true)
    CP("256B+pad", true, 3, false, true)
    CP("256B+KV", true, 3, false, false, true)
    CP("decode's (256B zfill pad KV)", true, 3, true, true, true)
    ms = time_ms([&] { read_tma<3><<<grid, THREADS, smem_decode, g_stream>>>(mk, mv, S, sink); });
    printf(" tma s3 %5.0f |", GBS(ms));
    ms = time_ms([&] { read_tma<4><<<grid, THREADS, 4 * 2 * TILE_BYTES + 64, g_stream>>>(mk, mv, S, sink); });
    printf(" tma s4 (1 CTA/SM) %5.0f\n", GBS(ms));
    CHECK(cudaFree(k));
    CHECK(cudaFree(v));
}

int main(int argc, char **argv)
{
    CHECK(cudaFree(0));
    int dev, sms;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int big = 4 * TILE_BYTES * 2 + 64;
    CHECK(cudaFuncSetAttribute(read_cp_async<false, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_cp_async<true, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_cp_async<true, 3, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_cp_async<true, 3, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_cp_async<true, 3, false, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_cp_async<true, 3, true, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_tma<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_tma<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    uint32_t *sink;
    CHECK(cudaMalloc(&sink, 4));
    /* a device-to-device copy, as bench/gpu_timing.py's copy_bandwidth: read + written */
    {
        const size_t gb = (size_t)1 << 30;
        void *a, *b;
        CHECK(cudaMalloc(&a, gb));
        CHECK(cudaMalloc(&b, gb));
        const double ms = time_ms([&] { CHECK(cudaMemcpyAsync(b, a, gb, cudaMemcpyDeviceToDevice, g_stream)); });
        printf("copy bandwidth (1 GiB, read + write): %.0f GB/s\n", 2 * gb / (ms * 1e6));
        CHECK(cudaFree(a));
        CHECK(cudaFree(b));
    }
    if (argc == 3) {
        run(atoi(argv[1]), atoi(argv[2]), 8, sink, sms);
    } else {
        const int batches[] = {16, 64, 128};
        for (int b : batches) run(b, 8192, 8, sink, sms);
        run(64, 32768, 8, sink, sms);
    }
    return 0;
}
