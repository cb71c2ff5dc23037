// SPDX-License-Identifier: MIT
/*
 * fp8_accum.cu: what an e4m3 wgmma keeps of its sums (perf-notes runs 165, 167). The fp8
 * accuracy rule (docs/semantics.md, "FP8") models the tensor core's accumulator from
 * reports: e4m3 products exact, the sum held in about 13 bits aligned to its largest
 * terms, truncated toward zero. This probe measures it instead: one warpgroup a case runs
 * D = C + A B^T through m64n128k32 e4m3 wgmmas (A 64 x K, B 128 x K, both K-major in the
 * 128-byte swizzle the forward uses; C loaded into the accumulator first), and writes the
 * inputs and D to files that scripts/dev_fp8_accum_fit.py fits models to, bit for bit.
 *
 * Sets (one file each, $OUT/<name>.bin: int32 magic 'P8F8', cases, K, 0; then A's bytes,
 * B's bytes, C's and D's floats, case after case, rows of A and B K long, C and D 64 x 128):
 *   exact      small integers, every sum exact: checks the layouts (printed here)
 *   step_zero  one k32 step, random e4m3 codes (every exponent), C = 0
 *   step_c     one k32 step, random codes, C of random sign and exponent (2^-12..2^20)
 *   step_real  one k32 step, the failing probe's values (q = e4m3(300 u), k = e4m3(u),
 *              u uniform in [-1, 1)) and C of the size such sums reach
 *   qk256      eight steps: hd256's S = Q K^T on the failing probe's values, C = 0
 *   pv128      four steps: a P V of near-one-hot rows (P = e4m3(256 * 2^-24u), V = e4m3(u))
 *              onto a running O in C
 *
 * MODE rs takes A from registers (the forward's P V reads P so) and names the files
 * <name>_rs.bin.
 *
 * Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a bench/micro/fp8_accum.cu -o fp8_accum
 * Run:   ./fp8_accum OUTDIR [ss | rs]
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "micro_check.h"
#include "micro_wgmma.cuh"

/* Byte offset of element (r, k) of a K-major operand of `rows` rows in 128-byte-swizzled
 * panels: each panel holds 128 bytes of K for every row, 1024 bytes a group of 8 rows, the
 * 16-byte chunk c of row r stored at chunk c ^ (r % 8). */
__device__ __forceinline__ int swizzled(int r, int k, int rows)
{
    return (k / 128) * rows * 128 + (r / 8) * 1024 + (r % 8) * 128 + ((((k % 128) / 16) ^ (r % 8)) * 16) + k % 16;
}

/* The accumulator of m64nNk32 with f32 output: register i of thread t holds row
 * 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (t % 4) + i % 2. */
__device__ __forceinline__ int acc_row(int t, int i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int acc_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

/* A's k32 slice at k0 in registers, as an RS wgmma reads it: register r of thread t holds
 * row 16 (t / 32) + (t % 32) / 4 + 8 (r % 2), bytes 4 (t % 4) + 16 (r / 2) + 0..3 of the slice. */
__device__ __forceinline__ void a_fragment(const unsigned char *a, int K, int k0, int t, u32 *frag)
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const unsigned char *src = a + (16 * (t / 32) + (t % 32) / 4 + 8 * (r % 2)) * K + k0 + 4 * (t % 4) + 16 * (r / 2);
        frag[r] = src[0] | (u32)src[1] << 8 | (u32)src[2] << 16 | (u32)src[3] << 24;
    }
}

/* One case a block of 128 threads: D = C + A B^T over K / 32 wgmmas, A from shared memory
 * (SS) or from registers (RS). */
__global__ void __launch_bounds__(128) probe(const unsigned char *a, const unsigned char *b, const float *c, float *d,
                                             int K, int rs)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    const int Kp = (K + 127) / 128 * 128, t = threadIdx.x, cs = blockIdx.x;
    unsigned char *sa = base, *sb = base + 64 * Kp;
    a += (size_t)cs * 64 * K, b += (size_t)cs * 128 * K, c += (size_t)cs * 64 * 128, d += (size_t)cs * 64 * 128;
    for (int i = t; i < 64 * Kp; i += 128) sa[swizzled(i / Kp, i % Kp, 64)] = i % Kp < K ? a[i / Kp * K + i % Kp] : 0;
    for (int i = t; i < 128 * Kp; i += 128) sb[swizzled(i / Kp, i % Kp, 128)] = i % Kp < K ? b[i / Kp * K + i % Kp] : 0;
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = c[acc_row(t, i) * 128 + acc_col(t, i)];
    for (int k0 = 0; k0 < K; k0 += 32) { /* a k32 step is +32 bytes inside a panel's row */
        u32 frag[4];
        if (rs) a_fragment(a, K, k0, t, frag);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        if (rs)
            rs_e4m3_n128(acc, frag, desc_sw128(sb + (k0 / 128) * 128 * 128 + k0 % 128));
        else
            ss_e4m3_n128(acc, desc_sw128(sa + (k0 / 128) * 64 * 128 + k0 % 128),
                         desc_sw128(sb + (k0 / 128) * 128 * 128 + k0 % 128));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
#pragma unroll
    for (int i = 0; i < 64; i++) d[acc_row(t, i) * 128 + acc_col(t, i)] = acc[i];
}

/* ---- host: e4m3 codes, the sets, the files ---- */

static double e4m3_value(unsigned char x)
{
    const int s = x >> 7, e = (x >> 3) & 15, m = x & 7;
    const double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}
/* nearest e4m3 code (ties to the even mantissa), saturating at 448 */
static unsigned char e4m3_code(double v)
{
    unsigned char best = 0;
    double bd = INFINITY;
    for (int x = 0; x < 127; x++) {
        const double dd = fabs(fabs(v) - e4m3_value((unsigned char)x));
        if (dd < bd || (dd == bd && !(x & 1))) bd = dd, best = (unsigned char)x;
    }
    return (unsigned char)(best | (v < 0 ? 0x80 : 0));
}

static u64 rng_state = 0x9E3779B97F4A7C15ull;
static u64 next_u64(void)
{
    u64 z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform(void) { return (double)(next_u64() >> 11) / 9007199254740992.0 * 2 - 1; } /* [-1, 1) */
static unsigned char random_code(void) /* any finite e4m3 code */
{
    for (;;) {
        const unsigned char x = (unsigned char)next_u64();
        if ((x & 0x7F) != 0x7F) return x;
    }
}

typedef struct {
    const char *name;
    int cases, K;
} set_t;

static void fill(const set_t *s, unsigned char *a, unsigned char *b, float *c)
{
    const size_t na = (size_t)s->cases * 64 * s->K, nb = (size_t)s->cases * 128 * s->K, nc = (size_t)s->cases * 64 * 128;
    const int which = !strcmp(s->name, "exact") ? 0 : !strcmp(s->name, "step_zero") ? 1 : !strcmp(s->name, "step_c") ? 2
                    : !strcmp(s->name, "step_real") ? 3 : !strcmp(s->name, "qk256") ? 4 : 5;
    for (size_t i = 0; i < na; i++)
        a[i] = which == 0 ? e4m3_code((double)(int)(next_u64() % 9) - 4)
             : which <= 2 ? random_code()
             : which <= 4 ? e4m3_code(300 * uniform())
                          : e4m3_code(256 * exp2(-24 * fabs(uniform())));
    for (size_t i = 0; i < nb; i++)
        b[i] = which == 0 ? e4m3_code((double)(int)(next_u64() % 9) - 4) : which <= 2 ? random_code() : e4m3_code(uniform());
    for (size_t i = 0; i < nc; i++) {
        double v = 0;
        if (which == 0) v = (double)(int)(next_u64() % 17) - 8;
        if (which == 2) v = ldexp(1 + fabs(uniform()), (int)(next_u64() % 33) - 12) * (next_u64() & 1 ? -1 : 1);
        if (which == 3) v = ldexp(uniform(), (int)(next_u64() % 13));
        if (which == 5) v = 256 * uniform() * exp2(-4 * fabs(uniform()));
        c[i] = (float)v;
    }
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    const char *mode = argc > 2 ? argv[2] : "ss";
    if (strcmp(mode, "ss") && strcmp(mode, "rs")) {
        fprintf(stderr, "fp8_accum: the mode is ss (A from shared memory) or rs (A from registers), not %s\n", mode);
        return 2;
    }
    const int rs = !strcmp(mode, "rs");
    const set_t sets[] = {{"exact", 16, 64},     {"step_zero", 64, 32}, {"step_c", 64, 32},
                          {"step_real", 64, 32}, {"qk256", 32, 256},   {"pv128", 32, 128}};
    CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    for (size_t si = 0; si < sizeof sets / sizeof *sets; si++) {
        const set_t *s = &sets[si];
        const size_t na = (size_t)s->cases * 64 * s->K, nb = (size_t)s->cases * 128 * s->K,
                     nc = (size_t)s->cases * 64 * 128;
        unsigned char *a = (unsigned char *)malloc(na), *b = (unsigned char *)malloc(nb);
        float *c = (float *)malloc(nc * 4), *d = (float *)malloc(nc * 4);
        fill(s, a, b, c);
        unsigned char *da, *db;
        float *dc, *dd;
        CHECK(cudaMalloc(&da, na));
        CHECK(cudaMalloc(&db, nb));
        CHECK(cudaMalloc(&dc, nc * 4));
        CHECK(cudaMalloc(&dd, nc * 4));
        CHECK(cudaMemcpy(da, a, na, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(db, b, nb, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dc, c, nc * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(dd, 0xFF, nc * 4)); /* poisoned: NaN where nothing is written */
        const int Kp = (s->K + 127) / 128 * 128;
        probe<<<s->cases, 128, 192 * Kp + 1024>>>(da, db, dc, dd, s->K, rs);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(d, dd, nc * 4, cudaMemcpyDeviceToHost));
        if (si == 0) { /* the layouts: every sum exact, so D must equal C + A B^T */
            size_t bad = 0;
            for (int cs = 0; cs < s->cases; cs++)
                for (int m = 0; m < 64; m++)
                    for (int n = 0; n < 128; n++) {
                        double ref = c[(size_t)cs * 8192 + m * 128 + n];
                        for (int k = 0; k < s->K; k++)
                            ref += e4m3_value(a[((size_t)cs * 64 + m) * s->K + k]) *
                                   e4m3_value(b[((size_t)cs * 128 + n) * s->K + k]);
                        bad += d[(size_t)cs * 8192 + m * 128 + n] != ref;
                    }
            printf("exact (%s): %zu of %zu elements differ from C + A B^T (0: the layouts are right)\n", mode, bad, nc);
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s%s.bin", dir, s->name, rs ? "_rs" : "");
        FILE *f = fopen(path, "wb");
        if (!f) { perror(path); return 1; }
        const int32_t head[4] = {0x38463850, s->cases, s->K, 0};
        fwrite(head, sizeof head, 1, f);
        fwrite(a, 1, na, f), fwrite(b, 1, nb, f), fwrite(c, 4, nc, f), fwrite(d, 4, nc, f);
        fclose(f);
        printf("%s: %d cases, K %d -> %s\n", s->name, s->cases, s->K, path);
        free(a), free(b), free(c), free(d);
        cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dd);
    }
    return 0;
}
