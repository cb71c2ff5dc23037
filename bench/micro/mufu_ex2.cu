// SPDX-License-Identifier: MIT
/*
 * mufu_ex2.cu: how many exponentials an SM computes a clock through each form of PTX's
 * ex2.approx: fp32 (one value an instruction) and f16x2 / bf16x2 (two). The question for
 * the fp8 forward, whose softmax issues one MUFU.EX2 a score: a 128 x 128 tile's 16,384
 * exponentials at 16 a clock an SM take as long as its two GEMMs at the fp8 rate
 * (perf-notes run 82), so a packed form at the same instruction rate would halve that.
 *
 * Each thread runs CHAINS independent chains x <- ex2(-x) (kept in (0, 1]), so the SM's
 * special-function units, not a chain's latency, set the pace; clock64 around the loop,
 * the slowest warp of a CTA counts. One CTA of 1024 threads an SM, a wave of them.
 *
 * Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a bench/micro/mufu_ex2.cu -o mufu_ex2
 * Run:   ./mufu_ex2   (then cuobjdump -sass mufu_ex2 | grep MUFU: what each form compiled to)
 */
#include <cuda_runtime.h>
#include <stdio.h>

#define CHAINS 8
#define ITERS 4096

enum { FORM_F32, FORM_F16X2, FORM_BF16X2 };

template <int FORM>
__global__ void __launch_bounds__(1024) ex2_loop(unsigned *sink, long long *cycles)
{
    unsigned v[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; c++) v[c] = FORM == FORM_F32 ? __float_as_uint(0.5f + 0.01f * c) : 0x38003800u + c;
    __syncthreads();
    const long long t0 = clock64();
#pragma unroll 1
    for (int i = 0; i < ITERS; i++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) {
            if (FORM == FORM_F32)
                asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=r"(v[c]) : "r"(v[c] ^ 0x80000000u));
            else if (FORM == FORM_F16X2)
                asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(v[c]) : "r"(v[c] ^ 0x80008000u));
            else
                asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(v[c]) : "r"(v[c] ^ 0x80008000u));
        }
    const long long t1 = clock64();
    __syncthreads();
    unsigned acc = 0;
#pragma unroll
    for (int c = 0; c < CHAINS; c++) acc ^= v[c];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x % 32 == 0) atomicMax((unsigned long long *)&cycles[blockIdx.x], (unsigned long long)(t1 - t0));
}

template <int FORM>
static void run(const char *name, int values_per_op, int sms, unsigned *sink, long long *cycles)
{
    cudaMemset(cycles, 0, sms * sizeof(long long));
    ex2_loop<FORM><<<sms, 1024>>>(sink, cycles); /* warm-up */
    cudaMemset(cycles, 0, sms * sizeof(long long));
    ex2_loop<FORM><<<sms, 1024>>>(sink, cycles);
    long long host[1024];
    cudaMemcpy(host, cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost);
    long long worst = 0;
    for (int i = 0; i < sms; i++) worst = host[i] > worst ? host[i] : worst;
    const double ops = 1024.0 * ITERS * CHAINS;
    printf("%-8s %6.2f instructions a clock an SM, %6.2f exponentials a clock an SM (%lld cycles)\n", name,
           ops / worst, ops * values_per_op / worst, worst);
}

int main(void)
{
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms > 1024) {
        fprintf(stderr, "mufu_ex2: no CUDA device\n");
        return 1;
    }
    unsigned *sink;
    long long *cycles;
    cudaMalloc(&sink, (size_t)sms * 1024 * sizeof(unsigned));
    cudaMalloc(&cycles, sms * sizeof(long long));
    run<FORM_F32>("f32", 1, sms, sink, cycles);
    run<FORM_F16X2>("f16x2", 2, sms, sink, cycles);
    run<FORM_BF16X2>("bf16x2", 2, sms, sink, cycles);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "mufu_ex2: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
