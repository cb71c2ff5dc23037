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

typedef unsigned long long u64;
typedef unsigned u32;

#define ITERS 2048

__device__ __forceinline__ void ss_bf16_n128(float *d, u64 da, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void rs_bf16_n128(float *d, const u32 *a, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void ss_bf16_n256(float *d, u64 da, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void rs_bf16_n256(float *d, const u32 *a, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void ss_e4m3_n128(float *d, u64 da, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void rs_e4m3_n128(float *d, const u32 *a, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void ss_e4m3_n256(float *d, u64 da, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void rs_e4m3_n256(float *d, const u32 *a, u64 db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }
/* K-major, 128-byte swizzle, 1024 bytes between groups of 8 rows (sm90.cuh desc_sw128) */
__device__ __forceinline__ u64 desc_sw128(const void *p)
{
    return (u64)((smem_addr(p) & 0x3FFFF) >> 4) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}

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
