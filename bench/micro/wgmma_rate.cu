// SPDX-License-Identifier: MIT
/*
 * wgmma_rate.cu: what the tensor pipe does with wgmma, in three parts (perf-notes run 131).
 * The question for the forward: runs 126-127 saw one consumer warpgroup's GEMMs, alone
 * in the pipe, take about twice their peak-rate time, which is what defeats
 * FlashAttention-3's ping-pong in this kernel.
 *
 * 1. Rate (wgmma_loop): a warpgroup repeats G wgmmas into one accumulator (S's k-loop: G =
 *    4 for e4m3 at head dim 128, 8 for bf16), commit, then waits for all (DEPTH 1) or for
 *    all but the group just committed (DEPTH 2, two accumulators alternating); A from
 *    shared memory (SS) or registers (RS); N = 128 or 256; bf16 (k16) and e4m3 (k32).
 *    Every CTA (one an SM, 256 threads) has two warpgroups; one or both issue. Rate = the
 *    work at the peak (N / 2 clocks a wgmma an SM, both types) over the slowest active
 *    warpgroup's clocks, median over CTAs.
 * 2. Beside an ALU stream (wgmma_vs_alu): warpgroup 0 issues at DEPTH 2 while warpgroup 1
 *    runs FFMA, MUFU.EX2, FMNMX or a softmax-like mix on the same sub-partitions: does the
 *    other warpgroup's softmax slow the GEMMs?
 * 3. Issue (wgmma_issue): how long issuing a group of G takes, one warpgroup or two
 *    together: when the pipe's queue is full, the issue itself waits.
 *
 * Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a bench/micro/wgmma_rate.cu -o wgmma_rate
 * Run:   ./wgmma_rate
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro_wgmma.cuh"

#define ITERS 2048

template <bool E4M3, int N, bool RS>
__device__ __forceinline__ void one(float *d, const u32 *a, u64 da, u64 db)
{
    if (E4M3) {
        if (RS) { if (N == 128) rs_e4m3_n128(d, a, db); else rs_e4m3_n256(d, a, db); }
        else { if (N == 128) ss_e4m3_n128(d, da, db); else ss_e4m3_n256(d, da, db); }
    } else {
        if (RS) { if (N == 128) rs_bf16_n128(d, a, db); else rs_bf16_n256(d, a, db); }
        else { if (N == 128) ss_bf16_n128(d, da, db); else ss_bf16_n256(d, da, db); }
    }
}

template <bool E4M3, int N, bool RS, int G, int DEPTH>
__global__ void __launch_bounds__(256, 1) wgmma_loop(int active, long long *cycles, float *sink)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    /* A: 8 KiB a warpgroup (64 rows x 128 bytes); B: N rows x 128 bytes, shared */
    for (int i = threadIdx.x; i < (16384 + N * 128) / 4; i += blockDim.x) ((u32 *)base)[i] = 0x20202020u;
    __syncthreads();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg >= active) return;
    const u64 da0 = desc_sw128(base + wg * 8192), db0 = desc_sw128(base + 16384);
    const u32 a[4] = {0x20202020u, 0x20202020u, 0x20202020u, 0x20202020u};
    float d[DEPTH][N / 2];
#pragma unroll
    for (int s = 0; s < DEPTH; s++)
#pragma unroll
        for (int i = 0; i < N / 2; i++) d[s][i] = 0.f;
    const long long t0 = clock64();
#pragma unroll 1
    for (int it = 0; it < ITERS; it += DEPTH) {
#pragma unroll
        for (int s = 0; s < DEPTH; s++) {
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int g = 0; g < G; g++) /* k steps: +32 bytes inside the 128-byte row */
                one<E4M3, N, RS>(d[s], a, da0 + 2 * (g % 4), db0 + 2 * (g % 4));
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            if (DEPTH == 1) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            else asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const long long t1 = clock64();
    float acc = 0.f;
#pragma unroll
    for (int s = 0; s < DEPTH; s++)
#pragma unroll
        for (int i = 0; i < N / 2; i++) acc += d[s][i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}

static int cmp_ll(const void *a, const void *b)
{
    const long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

template <bool E4M3, int N, bool RS, int G, int DEPTH>
static void run(int sms, long long *cycles, float *sink)
{
    const int smem = 16384 + N * 128 + 1024 + 100 * 1024; /* > half an SM's: one CTA an SM */
    cudaFuncSetAttribute(wgmma_loop<E4M3, N, RS, G, DEPTH>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    double rate[2];
    long long med[2];
    for (int active = 1; active <= 2; active++) {
        for (int rep = 0; rep < 2; rep++) { /* the first is a warm-up */
            cudaMemset(cycles, 0, sms * 2 * sizeof(long long));
            wgmma_loop<E4M3, N, RS, G, DEPTH><<<sms, 256, smem>>>(active, cycles, sink);
        }
        long long host[2048], worst[1024];
        cudaMemcpy(host, cycles, sms * 2 * sizeof(long long), cudaMemcpyDeviceToHost);
        for (int c = 0; c < sms; c++) worst[c] = active == 2 && host[2 * c + 1] > host[2 * c] ? host[2 * c + 1] : host[2 * c];
        qsort(worst, sms, sizeof(long long), cmp_ll);
        med[active - 1] = worst[sms / 2];
        rate[active - 1] = (double)active * ITERS * G * (N / 2) / (double)med[active - 1];
    }
    printf("%-5s %-2s N=%-3d G=%d depth %d | one warpgroup %5.1f%% of peak (%4.0f clocks a group) | two %5.1f%% (%4.0f)\n",
           E4M3 ? "e4m3" : "bf16", RS ? "RS" : "SS", N, G, DEPTH, 100 * rate[0], (double)med[0] / ITERS, 100 * rate[1],
           (double)med[1] / ITERS);
}


/* Warpgroup 0 issues e4m3 m64nNk32 groups of G = 4 at depth 2 (the full rate alone) while
 * warpgroup 1 runs an ALU stream on the same sub-partitions until warpgroup 0 is done:
 * does the other warpgroup's softmax slow the GEMMs down (perf-notes run 127)? MIX: 0
 * nothing, 1 FFMA, 2 MUFU.EX2, 3 FMNMX, 4 a softmax-like mix a value (FMNMX, FFMA,
 * MUFU.EX2, FADD), 5 the mix with the pack to e4m3 (cvt.rn.satfinite.e4m3x2.f32). */
template <int N, int MIX>
__global__ void __launch_bounds__(256, 1) wgmma_vs_alu(long long *cycles, float *sink)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    volatile int *done = (volatile int *)(base + 16384 + N * 128);
    for (int i = threadIdx.x; i < (16384 + N * 128) / 4; i += blockDim.x) ((u32 *)base)[i] = 0x20202020u;
    if (threadIdx.x == 0) *done = 0;
    __syncthreads();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (threadIdx.x >= 128) {
        if (MIX == 0) return;
        float v[8], m[8], acc[8];
        u32 pk = 0;
#pragma unroll
        for (int c = 0; c < 8; c++) v[c] = 0.3f + 0.01f * (c + threadIdx.x % 7), m[c] = -1.f, acc[c] = 0.f;
        long long ops = 0;
        while (!*done) {
#pragma unroll
            for (int r = 0; r < 8; r++)
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    if (MIX == 1) v[c] = fmaf(v[c], 0.999f, 0.0001f);
                    if (MIX == 2) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(v[c]));
                    if (MIX == 3) v[c] = fmaxf(v[c], m[c]), m[c] = fminf(m[c], v[c]);
                    if (MIX >= 4) {
                        m[c] = fmaxf(m[c], v[c]);
                        float y = fmaf(v[c], 1.4427f, -m[c]);
                        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(y));
                        acc[c] += y;
                        v[c] = y * 0.5f + 0.1f;
                        if (MIX == 5 && (c & 1)) {
                            u32 h;
                            asm volatile("{.reg .b16 t;\ncvt.rn.satfinite.e4m3x2.f32 t, %1, %2;\ncvt.u32.u16 %0, t;}" : "=r"(h) : "f"(v[c]), "f"(v[c - 1]));
                            pk ^= h;
                        }
                    }
                }
            ops += 64;
        }
        float s = 0.f;
#pragma unroll
        for (int c = 0; c < 8; c++) s += v[c] + m[c] + acc[c];
        sink[blockIdx.x * blockDim.x + threadIdx.x] = s + (float)pk;
        if (threadIdx.x == 128) cycles[gridDim.x * 2 + blockIdx.x] = ops;
        return;
    }
    const u64 da0 = desc_sw128(base), db0 = desc_sw128(base + 16384);
    const u32 a[4] = {0x20202020u, 0x20202020u, 0x20202020u, 0x20202020u};
    float d[2][N / 2];
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
        for (int i = 0; i < N / 2; i++) d[s][i] = 0.f;
    const long long t0 = clock64();
#pragma unroll 1
    for (int it = 0; it < ITERS; it += 2) {
#pragma unroll
        for (int s = 0; s < 2; s++) {
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int g = 0; g < 4; g++) one<true, N, false>(d[s], a, da0 + 2 * g, db0 + 2 * g);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const long long t1 = clock64();
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
    if (threadIdx.x == 0) *done = 1;
    float acc = 0.f;
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
        for (int i = 0; i < N / 2; i++) acc += d[s][i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int N, int MIX>
static void run_vs_alu(const char *name, int sms, long long *cycles, float *sink)
{
    const int smem = 16384 + N * 128 + 1024 + 100 * 1024;
    cudaFuncSetAttribute(wgmma_vs_alu<N, MIX>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    for (int rep = 0; rep < 2; rep++) {
        cudaMemset(cycles, 0, sms * 3 * sizeof(long long));
        wgmma_vs_alu<N, MIX><<<sms, 256, smem>>>(cycles, sink);
    }
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "wgmma_rate: %s\n", cudaGetErrorString(cudaGetLastError()));
        exit(1);
    }
    long long host[3072], t[1024];
    cudaMemcpy(host, cycles, sms * 3 * sizeof(long long), cudaMemcpyDeviceToHost);
    for (int c = 0; c < sms; c++) t[c] = host[c];
    qsort(t, sms, sizeof(long long), cmp_ll);
    const long long med = t[sms / 2];
    const double ops = (double)host[2 * sms + sms / 2] * 32 * 4; /* CTA sms/2's ALU values, 4 warps */
    printf("e4m3 SS N=%-3d depth 2, other warpgroup %-9s | GEMMs %5.1f%% of peak | other: %5.2f values a clock an SM\n",
           N, name, 100.0 * ITERS * 4 * (N / 2) / med, ops / med);
}


/* How long issuing a group takes: warpgroup 0 (and 1 when ACTIVE is 2) issues G e4m3
 * m64n128k32 wgmmas, commits, notes the clock, waits for all. Issue cycles against the
 * group's work show whether wgmma issue blocks while the tensor pipe is busy, and after
 * how many instructions in flight (perf-notes run 126: a consumer warpgroup sat in its P V
 * issue for ~690 clocks). */
template <int G>
__global__ void __launch_bounds__(256, 1) wgmma_issue(int active, long long *cycles, float *sink)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    for (int i = threadIdx.x; i < (16384 + 128 * 128) / 4; i += blockDim.x) ((u32 *)base)[i] = 0x20202020u;
    __syncthreads();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg >= active) return;
    const u64 da0 = desc_sw128(base + wg * 8192), db0 = desc_sw128(base + 16384);
    const u32 a[4] = {0x20202020u, 0x20202020u, 0x20202020u, 0x20202020u};
    float d[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.f;
    long long issue = 0, total = 0;
#pragma unroll 1
    for (int it = 0; it < 256; it++) {
        const long long t0 = clock64();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int g = 0; g < G; g++) one<true, 128, false>(d, a, da0 + 2 * (g % 4), db0 + 2 * (g % 4));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        const long long t1 = clock64();
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        const long long t2 = clock64();
        issue += t1 - t0, total += t2 - t0;
    }
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 64; i++) acc += d[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = issue, cycles[2 * gridDim.x + blockIdx.x * 2 + wg] = total;
}

template <int G>
static void run_issue(int sms, long long *cycles, float *sink)
{
    const int smem = 32768 + 1024 + 100 * 1024;
    cudaFuncSetAttribute(wgmma_issue<G>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    for (int active = 1; active <= 2; active++) {
        for (int rep = 0; rep < 2; rep++) wgmma_issue<G><<<sms, 256, smem>>>(active, cycles, sink);
        if (cudaDeviceSynchronize() != cudaSuccess) {
            fprintf(stderr, "wgmma_rate: %s\n", cudaGetErrorString(cudaGetLastError()));
            exit(1);
        }
        long long host[4096], is[1024], to[1024];
        cudaMemcpy(host, cycles, sms * 4 * sizeof(long long), cudaMemcpyDeviceToHost);
        for (int c = 0; c < sms; c++) is[c] = host[2 * c], to[c] = host[2 * sms + 2 * c];
        qsort(is, sms, sizeof(long long), cmp_ll);
        qsort(to, sms, sizeof(long long), cmp_ll);
        printf("e4m3 SS N=128 G=%-2d, %d warpgroup%s issuing: issue + commit %5.0f clocks, to landed %5.0f (work %d alone)\n",
               G, active, active > 1 ? "s" : " ", is[sms / 2] / 256.0, to[sms / 2] / 256.0, G * 64);
    }
}

int main(void)
{
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms > 1024) {
        fprintf(stderr, "wgmma_rate: no CUDA device\n");
        return 1;
    }
    long long *cycles;
    float *sink;
    cudaMalloc(&cycles, sms * 4 * sizeof(long long));
    cudaMalloc(&sink, (size_t)sms * 256 * sizeof(float));
    printf("peak: a m64nNk16 bf16 or m64nNk32 e4m3 wgmma every N/2 clocks an SM\n");
    run<true, 128, false, 4, 1>(sms, cycles, sink);
    run<true, 128, true, 4, 1>(sms, cycles, sink);
    run<true, 128, false, 4, 2>(sms, cycles, sink);
    run<true, 128, true, 4, 2>(sms, cycles, sink);
    run<true, 256, false, 4, 1>(sms, cycles, sink);
    run<true, 256, true, 4, 1>(sms, cycles, sink);
    run<true, 128, false, 8, 1>(sms, cycles, sink);
    run<true, 128, false, 16, 1>(sms, cycles, sink);
    run<false, 128, false, 8, 1>(sms, cycles, sink);
    run<false, 128, true, 8, 1>(sms, cycles, sink);
    run<false, 128, false, 8, 2>(sms, cycles, sink);
    run<false, 256, false, 8, 1>(sms, cycles, sink);
    run<false, 256, true, 8, 1>(sms, cycles, sink);
    run_vs_alu<128, 0>("idle", sms, cycles, sink);
    run_vs_alu<128, 1>("FFMA", sms, cycles, sink);
    run_vs_alu<128, 2>("MUFU", sms, cycles, sink);
    run_vs_alu<128, 3>("FMNMX", sms, cycles, sink);
    run_vs_alu<128, 4>("softmax", sms, cycles, sink);
    run_vs_alu<128, 5>("sm+pack", sms, cycles, sink);
    run_issue<1>(sms, cycles, sink);
    run_issue<2>(sms, cycles, sink);
    run_issue<4>(sms, cycles, sink);
    run_issue<8>(sms, cycles, sink);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "wgmma_rate: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
