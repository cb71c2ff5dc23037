/*
 * fwd_wgmma.cuh: the sm90a forward kernel: warp-specialised, wgmma on tensor cores.
 *
 * A CTA owns TILE_M = 64 * CONSUMERS query rows of one (batch, head) and has
 * CONSUMERS + 1 warpgroups. The last warpgroup is the producer: it copies Q once and
 * then the K and V tiles (TILE_N keys) into a two-stage ring in shared memory -- by TMA
 * from one thread when the host could encode the tensor maps (batch mode), else by
 * cp.async from all 128 -- handing K and V of a stage over separately with
 * mbarriers ("full_k", "full_v"); consumers give K back as soon as S is computed and V
 * after P V ("empty_k", "empty_v"), so the next K copy overlaps the softmax. Each
 * consumer warpgroup owns 64 rows: S = Q K^T with
 * wgmma (both operands in shared memory), then the mask, bias and online softmax in
 * registers (the m64nN accumulator holds, per warp, the m16n8 fragments the sm80 kernel
 * uses, so that code carries over), then O += P V with P straight from registers as
 * wgmma's A operand and V read transposed from shared memory. At head dim 256, O is two
 * m64n128 accumulators (128 registers per thread), so that key tiles are 64 wide there.
 *
 * Shared memory holds every operand in wgmma's 128-byte-swizzle layout (load_sw128): Q
 * and K as K-major, V as MN-major for the transposed B of P V; all three are stored the
 * same way, rows of 64 head-dim elements with their 16-byte chunks permuted by row.
 *
 * Variants (preprocessor, from the kernel key), as fwd_mma.cuh, plus FMHA_WARPS =
 * 4 * (CONSUMERS + 1). Compiles under NVRTC with no include but params.h; sm_90a only.
 */
#include "params.h"

#ifndef FMHA_BF16
#define FMHA_BF16 0
#endif
#ifndef FMHA_HDIM_QK
#define FMHA_HDIM_QK 128
#endif
#ifndef FMHA_HDIM_V
#define FMHA_HDIM_V FMHA_HDIM_QK
#endif
#ifndef FMHA_TILE_M
#define FMHA_TILE_M 128
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 128
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 12
#endif
#ifndef FMHA_MASK
#define FMHA_MASK 0
#endif
#ifndef FMHA_BIAS
#define FMHA_BIAS 0
#endif
#ifndef FMHA_LSE
#define FMHA_LSE 0
#endif
#ifndef FMHA_SOFTCAP
#define FMHA_SOFTCAP 0
#endif
#ifndef FMHA_SINK
#define FMHA_SINK 0
#endif
#ifndef FMHA_GROUP
#define FMHA_GROUP 0
#endif

#define DQK FMHA_HDIM_QK
#define DV FMHA_HDIM_V
#define TM FMHA_TILE_M
#define TN FMHA_TILE_N
#define CONSUMERS (TM / 64)
#define NTHREADS (128 * (CONSUMERS + 1))
#if FMHA_BF16
#define WG_T "bf16"
#else
#define WG_T "f16"
#endif

static_assert(FMHA_WARPS == 4 * (CONSUMERS + 1), "wgmma: warps = 4 x (1 producer + consumers)");
static_assert(TM % 64 == 0 && CONSUMERS >= 1 && CONSUMERS <= 3, "wgmma: 64 rows per consumer warpgroup, 1..3 of them");
static_assert(DQK % 16 == 0 && DV % 16 == 0 && TN % 16 == 0, "wgmma: dims multiples of 16");
static_assert(TN == 64 || TN == 128, "this kernel has wgmma shapes for tile_n 64 and 128");
static_assert(DV == 64 || DV == 128 || DV == 256, "this kernel has wgmma shapes for head_dim_v 64, 128 and 256");

#include "common.cuh"
typedef unsigned long long u64;

/* ------------------------------------------------------------------ helpers */

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

__device__ __forceinline__ void mbar_init(u64 *bar, u32 count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64 *bar)
{
    u64 state;
    asm volatile("mbarrier.arrive.shared.b64 %0, [%1];\n" : "=l"(state) : "r"(smem_addr(bar)) : "memory");
    (void)state;
}
__device__ __forceinline__ void mbar_wait(u64 *bar, u32 parity)
{
    u32 done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.b32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
}
/* One arrival that also announces `bytes` of TMA transactions the phase waits for. */
__device__ __forceinline__ void mbar_expect_tx(u64 *bar, u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
/* TMA: one box of a 4-d tensor map (coordinates innermost first) into shared memory,
 * completing `bytes` on the mbarrier; out-of-bounds rows land as zeros. */
__device__ __forceinline__ void tma_load_4d(void *dst, const void *map, int c0, int c1, int c2, int c3, u64 *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_addr(dst)),
                 "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
                 : "memory");
}
/* cp.async wrote through the generic proxy; wgmma reads through the async proxy */
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }

/* Shared-memory matrix descriptor for the 128-byte-swizzle layout of load_sw128: start
 * address, SBO = 1024 bytes between groups of 8 rows, LBO = bytes between 64-element
 * blocks along MN (used by the MN-major V; K-major operands never cross a block within
 * one k16 step, so theirs is unused), layout type 1 (128B swizzle) in bits 62-63. The
 * swizzle is applied to address bits, so a k16 step inside a 128-byte row is just +32
 * bytes on the start address, given 1024-byte-aligned blocks. */
__device__ __forceinline__ u64 desc_sw128(const void *p, u32 lbo)
{
    return (u64)((smem_addr(p) & 0x3FFFF) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)(1024 >> 4) << 32) |
           (1ull << 62);
}

__device__ __forceinline__ void wgmma_ss_n64(float *d, unsigned long long da, unsigned long long db, int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." WG_T "." WG_T " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_rs_n64(float *d, const unsigned *a, unsigned long long db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." WG_T "." WG_T " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ void wgmma_ss_n128(float *d, unsigned long long da, unsigned long long db, int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." WG_T "." WG_T " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_rs_n128(float *d, const unsigned *a, unsigned long long db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." WG_T "." WG_T " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

#define WGMMA_SS2(n) wgmma_ss_n##n
#define WGMMA_SS(n) WGMMA_SS2(n)
#define WGMMA_RS2(n) wgmma_rs_n##n
#define WGMMA_RS(n) WGMMA_RS2(n)


/* Copy rows [0, ROWS) of a [ROWS, D] tile (zeros for rows >= valid) into wgmma's
 * 128-byte-swizzle layout: the head dim is cut into blocks of 64 elements; a block is
 * ROWS rows of 128 bytes, and the 16-byte chunk c of row r is stored at chunk c ^ (r % 8).
 * Eight consecutive threads copy the eight chunks of one 128-byte row: their global reads
 * are one contiguous line and their shared-memory writes hit eight distinct bank groups,
 * so the fill is conflict-free (an unswizzled core-matrix layout puts those eight chunks
 * 128 bytes apart: an 8-way bank conflict on every copy). The same layout serves as
 * K-major (Q, K: rows are M/N, the block's 64 elements are K) and as MN-major (V: rows
 * are the keys, i.e. P V's K, the 64 elements are its N). */
template <int ROWS, int D>
__device__ __forceinline__ void load_sw128(elem_t *dst, const elem_t *src, long long row_stride, int valid, int ptid)
{
    const int chunks = D / 8;
    char *base = (char *)dst;
#pragma unroll 4
    for (int i = ptid; i < ROWS * chunks; i += 128) {
        const int r = i / chunks, c = i % chunks;
        const elem_t *g = src + (long long)(r < valid ? r : 0) * row_stride + c * 8;
        cp_async16(base + (c / 8) * (ROWS * 128) + r * 128 + (((c % 8) ^ (r % 8)) * 16), g, r < valid ? 16 : 0);
    }
}


/* Pin registers at a wgmma wait: the compiler sees wgmma as an ordinary asm that
 * finished when issued, so without this it could move a read of an accumulator above
 * the wait that makes it valid. */
template <int N>
__device__ __forceinline__ void fence_regs(float *r)
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(u32 *r)
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}

/* S = Q K^T for one key tile: both operands from the swizzled shared memory; the first
 * k16 step overwrites the accumulator. */
__device__ __forceinline__ void issue_s(float *s, const char *sQw, const elem_t *sK)
{
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < DQK / 16; kk++)
        WGMMA_SS(TN)(s, desc_sw128(sQw + (kk / 4) * (TM * 128) + (kk % 4) * 32, 16),
                     desc_sw128((const char *)sK + (kk / 4) * (TN * 128) + (kk % 4) * 32, 16), kk);
}

/* P (fp32, accumulator layout) packed to 16-bit pairs: the accumulator layout is
 * wgmma's register A layout. */
__device__ __forceinline__ void pack_p(u32 *pa, const float *s)
{
#pragma unroll
    for (int i = 0; i < TN / 4; i++) pa[i] = pack2(s[2 * i], s[2 * i + 1]);
}

/* O += P V for one key tile: P (packed, wgmma's A layout) from registers, V from the
 * swizzled stage as the transposed B. */
__device__ __forceinline__ void issue_pv(float *o, const u32 *pa, const elem_t *sV)
{
#pragma unroll
    for (int kk = 0; kk < TN / 16; kk++) {
#if DV <= 128
        WGMMA_RS(DV)(o, pa + 4 * kk, desc_sw128((const char *)sV + kk * 2048, TN * 128));
#else
        /* head dim 256 as two n128 halves: each spans two 64-element blocks of V */
#pragma unroll
        for (int hv = 0; hv < DV / 128; hv++)
            wgmma_rs_n128(o + 64 * hv, pa + 4 * kk, desc_sw128((const char *)sV + hv * 2 * (TN * 128) + kk * 2048, TN * 128));
#endif
    }
}

/* Does any element of tile n0 need the mask test? Only tiles crossing the sequence end
 * or a window edge do; the rest skip it (a uniform branch). */
__device__ __forceinline__ bool tile_needs_mask(const fmha_fwd_params_t &p, int n0, int m0, int sk, int diag)
{
    bool need = n0 + TN > sk;
#if FMHA_MASK
    if (p.window_right >= 0 && n0 + TN - 1 > m0 + diag + p.window_right) need = true;
    if (p.window_left >= 0 && n0 < m0 + TM - 1 + diag - p.window_left) need = true;
#else
    (void)p, (void)m0, (void)diag;
#endif
    return need;
}

/* Is key tile n0 invisible to every row in [r_first, r_last] (one warpgroup's rows)? The
 * warpgroup then skips its S, softmax and P V -- the mask would zero them all -- but still
 * takes part in the ring's handshakes. Causal with tile_m >= 2 tile_n (hd256: 128 x 64)
 * has one such tile per item: the first warpgroup's rows end before the last key tile
 * starts. Only compiled in there: at hd64 (192 x 128, such a tile in one item of three)
 * the check cost more than it saved (perf-notes run 22). */
#define SKIP_INVISIBLE (FMHA_MASK && TM >= 2 * TN)
__device__ __forceinline__ bool tile_invisible(const fmha_fwd_params_t &p, int n0, int r_first, int r_last, int diag)
{
#if FMHA_MASK
    if (p.window_right >= 0 && (long long)n0 > (long long)r_last + diag + p.window_right) return true;
    if (p.window_left >= 0 && n0 >= p.sink_tokens && (long long)n0 + TN - 1 < (long long)r_first + diag - p.window_left)
        return true;
#else
    (void)p, (void)n0, (void)r_first, (void)r_last, (void)diag;
#endif
    return false;
}

/* Where a thread's scores sit: rows i0 and i0 + 8 of the sequence, columns n0 + 8 jj +
 * 2 t + e of the key tile (the m64nN accumulator's per-warp m16n8 fragments). */
typedef struct {
    int i0, sq, sk, diag, t;
} tile_rows_t;

/* Scale, soft-cap, bias and mask one tile of scores, then the online-softmax update:
 * s becomes P (unnormalised, exp2 domain), the row max and sum move on, and alpha[half]
 * is the factor the caller must apply to O's rows. MASKED is a template argument, not a
 * flag: a runtime test inside the element loop cuts it into one basic block per element
 * and ptxas cannot interleave the chains across them (run 17). */
template <bool MASKED>
__device__ __forceinline__ void online_softmax(float *s, float *row_max, float *row_sum, float *alpha,
                                               const fmha_fwd_params_t &p, const tile_rows_t &w, int n0,
                                               float slope, const elem_t *bias)
{
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int i = w.i0 + 8 * half;
        /* the row's visible columns: [lo, hi] plus the sink tokens (REFERENCE.md's mask),
         * bounds in 64 bits so that huge windows cannot overflow, clamped to [-1, sk - 1] */
        int hi = w.sk - 1, lo = -1;
#if FMHA_MASK
        if (MASKED) {
            const long long c = (long long)i + w.diag;
            if (p.window_right >= 0 && c + p.window_right < hi) hi = (int)(c + p.window_right < -1 ? -1 : c + p.window_right);
            if (p.window_left >= 0 && c - p.window_left > lo) lo = (int)(c - p.window_left > w.sk ? w.sk : c - p.window_left);
        }
#endif
        float mx = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < TN / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = n0 + jj * 8 + 2 * w.t + e;
                float x = score_log2(s[jj * 4 + 2 * half + e], p, i, col, w.sq, w.sk, slope, bias);
                if (MASKED) {
#if FMHA_MASK
                    const bool visible = col <= hi && (col >= lo || col < p.sink_tokens);
#else
                    const bool visible = col <= hi;
#endif
                    x = visible ? x : -INFINITY;
                }
                s[jj * 4 + 2 * half + e] = x;
                mx = fmaxf(mx, x);
            }
        mx = quad_max(mx);
        const float m_new = fmaxf(row_max[half], mx);
        const float base = m_new == -INFINITY ? 0.f : m_new;
        alpha[half] = fast_exp2(row_max[half] - base);
        row_max[half] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int jj = 0; jj < TN / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float pe = fast_exp2(s[jj * 4 + 2 * half + e] - base);
                s[jj * 4 + 2 * half + e] = pe;
                sum += pe;
            }
        row_sum[half] = row_sum[half] * alpha[half] + sum;
    }
}

/* ------------------------------------------------------------------ work items */

/* One work item: TM query rows of one (batch, head), and where its operands live. */
typedef struct {
    int b, h, hk, m0, sq, sk, diag;
    int end, win_begin, sink_end; /* the key tiles it visits (next_tile) */
    long long q_off, k_off, v_off, o_off, tq0;
} item_t;

/* Item `idx` of the grid's list: masked, longest-first within L2 groups of heads
 * (masked_cta_coords); unmasked, the m-blocks of one (batch, head) next to each other so
 * that the CTAs running together share its K and V in L2. False when the item has no
 * rows (group mode: a sequence shorter than the longest). */
__device__ __forceinline__ bool item_at(const fmha_fwd_params_t &p, int idx, item_t &w)
{
    const int mblocks = (p.seqlen_q + TM - 1) / TM, pairs = p.batch * p.heads_q;
    int mblock;
#if FMHA_MASK
    masked_cta_coords(idx, mblocks, p.heads_q, pairs, p.l2_pairs, &mblock, &w.b, &w.h);
#else
    (void)pairs;
    mblock = idx % mblocks;
    w.b = idx / mblocks / p.heads_q;
    w.h = idx / mblocks % p.heads_q;
#endif
    w.m0 = mblock * TM;
    w.hk = w.h / (p.heads_q / p.heads_kv);
#if FMHA_GROUP
    const int *cu_q = (const int *)p.cu_seqlens_q, *cu_k = (const int *)p.cu_seqlens_k;
    const int tk0 = cu_k[w.b];
    w.tq0 = cu_q[w.b];
    w.sq = cu_q[w.b + 1] - (int)w.tq0;
    w.sk = p.seqused_k ? ((const int *)p.seqused_k)[w.b] : cu_k[w.b + 1] - tk0;
    w.q_off = w.tq0 * p.q_row;
    w.k_off = (long long)tk0 * p.k_row;
    w.v_off = (long long)tk0 * p.v_row;
    w.o_off = w.tq0 * p.o_row;
#else
    w.tq0 = 0;
    w.sq = p.seqlen_q, w.sk = p.seqlen_k;
    w.q_off = (long long)w.b * p.q_batch;
    w.k_off = (long long)w.b * p.k_batch;
    w.v_off = (long long)w.b * p.v_batch;
    w.o_off = (long long)w.b * p.o_batch;
#endif
    w.q_off += (long long)w.h * p.q_head;
    w.k_off += (long long)w.hk * p.k_head;
    w.v_off += (long long)w.hk * p.v_head;
    w.o_off += (long long)w.h * p.o_head;
    w.diag = p.bottom_right ? w.sk - w.sq : 0;
    w.end = w.sk, w.win_begin = 0, w.sink_end = 0;
#if FMHA_MASK
    if (p.window_right >= 0) {
        int last = w.m0 + TM - 1 + w.diag + p.window_right + 1;
        w.end = last < w.sk ? last : w.sk;
    }
    if (p.window_left >= 0) {
        int first = w.m0 + w.diag - p.window_left;
        w.win_begin = first > 0 ? first / TN * TN : 0;
    }
    w.sink_end = (p.sink_tokens + TN - 1) / TN * TN;
#endif
    return w.m0 < w.sq;
}

/* The CTA's k-th item when gridDim.x CTAs share `items`: round k goes forward through
 * the CTAs, round k + 1 backward (a boustrophedon), so that with the list heaviest
 * first a CTA given a heavy item in one round gets a light one in the next. -1: past
 * the end. With one CTA per item (gridDim.x == items) this is blockIdx.x, once. */
__device__ __forceinline__ int item_of_round(int k, int items)
{
    const int g = (int)gridDim.x, c = (int)blockIdx.x;
    const long long idx = (long long)k * g + (k & 1 ? g - 1 - c : c);
    return idx < items ? (int)idx : -1;
}

/* ------------------------------------------------------------------ kernel */

/* The grid is 1-d over work items (item_at); a CTA runs items item_of_round(0), (1), ...
 * (persistent when the host launches fewer CTAs than items): the producer loads the
 * next item's Q as soon as the consumers have issued their last S of the current one,
 * and its K/V ring runs on across items, so one item's softmax, P V and epilogue overlap
 * the next one's loads. */
extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
    fmha_fwd_wgmma(const fmha_fwd_params_t p, const __grid_constant__ fmha_tma_maps_t tma)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    /* the swizzle pattern repeats every 1024 bytes, so every block starts 1024-aligned
     * (the launch asks for 1 KiB of slack) */
    elem_t *sQ = (elem_t *)(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
    elem_t *sK0 = sQ + TM * DQK;      /* two K stages */
    elem_t *sV0 = sK0 + 2 * TN * DQK; /* two V stages */
    u64 *bars = (u64 *)(sV0 + 2 * TN * DV);
    /* K and V of a stage are handed over separately: K frees as soon as S is computed,
     * so the next K copy overlaps the softmax and P V. Q is freed ("q_empty") once the
     * consumers have issued an item's last S. */
    u64 *q_full = bars, *full_k = bars + 1, *full_v = bars + 3, *empty_k = bars + 5, *empty_v = bars + 7;
    u64 *q_empty = bars + 9;

    const int tid = threadIdx.x, wg = tid / 128;
    const int items = (p.seqlen_q + TM - 1) / TM * p.batch * p.heads_q;

#if FMHA_GROUP
    const bool use_tma = false; /* the host never encodes maps for group mode */
#else
    const bool use_tma = tma.use_tma != 0;
#endif
    if (tid == 0) {
        mbar_init(q_full, use_tma ? 1 : 128);
        mbar_init(q_empty, 128 * CONSUMERS);
        for (int i = 0; i < 2; i++) { /* TMA: one expect_tx arrival; cp.async: every producer thread */
            mbar_init(&full_k[i], use_tma ? 1 : 128);
            mbar_init(&full_v[i], use_tma ? 1 : 128);
            mbar_init(&empty_k[i], 128 * CONSUMERS);
            mbar_init(&empty_v[i], 128 * CONSUMERS);
        }
        /* the copy engine completes transactions on these barriers: make their
         * initialisation visible to it (the async proxy) before any TMA is issued */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    /* Both sides walk the same items and key tiles: `it` counts the items run (the Q
     * barriers' phase), `j` the key tiles over all of them (the ring's stage and phase). */
    if (wg == CONSUMERS) {
        /* ---------------- producer: each item's Q, then its key tiles into the ring */
        /* The CTA's register pool is what the launch gave it: 168 per thread for 384
         * threads, 128 for 512 (ptxas allocates the launch-bounds maximum when the kernel
         * uses setmaxnreg). The consumers' setmaxnreg.inc blocks until the producer's dec
         * has returned enough, so producer + consumers must fit the pool exactly or the
         * CTA hangs: 24 + 2 x 240 = 3 x 168, 32 + 3 x 160 = 4 x 128. */
#if CONSUMERS == 2
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
#elif CONSUMERS == 3
        asm volatile("setmaxnreg.dec.sync.aligned.u32 32;\n");
#endif
        const int ptid = tid - 128 * CONSUMERS;
        if (use_tma && ptid != 0) return; /* one thread issues every Q, K and V box */
        int j = 0, it = 0;
        for (int k = 0; (long long)k * gridDim.x < items; k++) {
            const int idx = item_of_round(k, items);
            item_t w;
            if (idx < 0 || !item_at(p, idx, w)) continue;
            if (it > 0) mbar_wait(q_empty, (it - 1) & 1);
            it++;
            if (use_tma) {
                /* Q and the first K tile are in flight together: a short item's fill is
                 * one load latency, not two */
                mbar_expect_tx(q_full, TM * DQK * 2);
                for (int cb = 0; cb < DQK / 64; cb++)
                    tma_load_4d(sQ + cb * TM * 64, &tma.q, cb * 64, w.m0, w.h, w.b, q_full);
                for (int n = next_tile(-1, w.sink_end, w.win_begin, w.end); n >= 0;
                     n = next_tile(n, w.sink_end, w.win_begin, w.end), j++) {
                    const int st = j & 1;
                    if (j >= 2) mbar_wait(&empty_k[st], ((j - 2) >> 1) & 1);
                    mbar_expect_tx(&full_k[st], TN * DQK * 2);
                    for (int cb = 0; cb < DQK / 64; cb++)
                        tma_load_4d(sK0 + st * TN * DQK + cb * TN * 64, &tma.k, cb * 64, n, w.hk, w.b, &full_k[st]);
                    if (j >= 2) mbar_wait(&empty_v[st], ((j - 2) >> 1) & 1);
                    mbar_expect_tx(&full_v[st], TN * DV * 2);
                    for (int cb = 0; cb < DV / 64; cb++)
                        tma_load_4d(sV0 + st * TN * DV + cb * TN * 64, &tma.v, cb * 64, n, w.hk, w.b, &full_v[st]);
                }
                continue;
            }
            const elem_t *K = (const elem_t *)p.k + w.k_off, *V = (const elem_t *)p.v + w.v_off;
            load_sw128<TM, DQK>(sQ, (const elem_t *)p.q + w.q_off + (long long)w.m0 * p.q_row, p.q_row, w.sq - w.m0, ptid);
            cp_async_commit();
            cp_async_wait_all();
            fence_async_shared();
            mbar_arrive(q_full);
            /* Commit groups go K0, V0, K1, V1, ...; after issuing K(j) and waiting for all
             * but the newest group, V(j-1) has landed; after issuing V(j), likewise K(j).
             * The item's last V is handed over at its end, before the next item's Q. */
            int jj = 0;
            for (int n = next_tile(-1, w.sink_end, w.win_begin, w.end); n >= 0;
                 n = next_tile(n, w.sink_end, w.win_begin, w.end), j++, jj++) {
                const int st = j & 1;
                if (j >= 2) mbar_wait(&empty_k[st], ((j - 2) >> 1) & 1);
                load_sw128<TN, DQK>(sK0 + st * TN * DQK, K + (long long)n * p.k_row, p.k_row, w.sk - n, ptid);
                cp_async_commit();
                if (jj >= 1) {
                    cp_async_wait_1();
                    fence_async_shared();
                    mbar_arrive(&full_v[st ^ 1]);
                }
                if (j >= 2) mbar_wait(&empty_v[st], ((j - 2) >> 1) & 1);
                load_sw128<TN, DV>(sV0 + st * TN * DV, V + (long long)n * p.v_row, p.v_row, w.sk - n, ptid);
                cp_async_commit();
                cp_async_wait_1();
                fence_async_shared();
                mbar_arrive(&full_k[st]);
            }
            if (jj >= 1) {
                cp_async_wait_all();
                fence_async_shared();
                mbar_arrive(&full_v[(j - 1) & 1]);
            }
        }
        return;
    }

    /* ---------------- consumers: 64 rows per warpgroup */
#if CONSUMERS == 2
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
#elif CONSUMERS == 3
    asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n");
#endif
    const int ctid = tid % 128, warp = ctid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int r0 = wg * 64 + warp * 16; /* this warp's first row in the tile */
    /* this warpgroup's 64 rows of Q, in each 64-element block */
    const char *sQw = (const char *)sQ + wg * 64 * 128;

    int j = 0, it = 0;
    for (int k = 0; (long long)k * gridDim.x < items; k++) {
        const int idx = item_of_round(k, items);
        item_t w;
        if (idx < 0 || !item_at(p, idx, w)) continue;
        float o[DV / 2];
#pragma unroll
        for (int i = 0; i < DV / 2; i++) o[i] = 0.f;
        float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
#if FMHA_BIAS == 2
        const float slope = ((const float *)p.alibi)[w.b * p.alibi_batch + w.h * p.alibi_head];
#else
        const float slope = 0.f;
#endif
#if FMHA_BIAS == 1
        const elem_t *bias = (const elem_t *)p.bias + w.b * p.bias_batch + w.h * p.bias_head;
#else
        const elem_t *bias = 0;
#endif
        const tile_rows_t rows = {w.m0 + r0 + g, w.sq, w.sk, w.diag, t};

        /* Each warpgroup runs S, softmax and P V of a tile in turn; the two or three
         * consumer warpgroups drift out of phase, so one's softmax overlaps another's
         * wgmmas. (Issuing S(j+1) before the softmax of S(j) inside a warpgroup, as
         * FlashAttention-3 does, measured no faster here and spilled at hdim 64: perf-notes
         * run 14.) */
        float s[TN / 2];
        u32 pa[TN / 4];
        mbar_wait(q_full, it & 1);
        bool q_held = true;
        for (int n0 = next_tile(-1, w.sink_end, w.win_begin, w.end), n1; n0 >= 0; n0 = n1, j++) {
            n1 = next_tile(n0, w.sink_end, w.win_begin, w.end);
            const int st = j & 1;
            if (SKIP_INVISIBLE && tile_invisible(p, n0, w.m0 + wg * 64, w.m0 + wg * 64 + 63, w.diag)) {
                /* waiting for the stage keeps the arrivals in its phase: the producer
                 * refilled it only after every consumer had released the previous one */
                mbar_wait(&full_k[st], (j >> 1) & 1);
                mbar_arrive(&empty_k[st]);
                if (n1 < 0) {
                    mbar_arrive(q_empty);
                    q_held = false;
                }
                mbar_wait(&full_v[st], (j >> 1) & 1);
                mbar_arrive(&empty_v[st]);
                continue;
            }
            mbar_wait(&full_k[st], (j >> 1) & 1);
            issue_s(s, sQw, sK0 + st * TN * DQK);
            wgmma_commit();
            wgmma_wait_all();
            fence_regs<TN / 2>(s);
            mbar_arrive(&empty_k[st]); /* K of this stage is free for the producer */
            if (n1 < 0) {              /* and after the item's last S, Q too */
                mbar_arrive(q_empty);
                q_held = false;
            }

            float alpha[2];
            if (tile_needs_mask(p, n0, w.m0, w.sk, w.diag))
                online_softmax<true>(s, row_max, row_sum, alpha, p, rows, n0, slope, bias);
            else
                online_softmax<false>(s, row_max, row_sum, alpha, p, rows, n0, slope, bias);
#pragma unroll
            for (int d = 0; d < DV / 8; d++) {
                o[d * 4 + 0] *= alpha[0];
                o[d * 4 + 1] *= alpha[0];
                o[d * 4 + 2] *= alpha[1];
                o[d * 4 + 3] *= alpha[1];
            }
            /* P in wgmma's A layout, packed before any wgmma reads it: registers written
             * between two wgmmas of a group make ptxas insert a wait before each */
            pack_p(pa, s);

            mbar_wait(&full_v[st], (j >> 1) & 1);
            wgmma_fence();
            issue_pv(o, pa, sV0 + st * TN * DV);
            wgmma_commit();
            wgmma_wait_all();
            fence_regs<DV / 2>(o);
            mbar_arrive(&empty_v[st]);
        }
        if (q_held) mbar_arrive(q_empty); /* an item with no key tiles */
        it++;

        /* Epilogue: normalise, add the sink term, write O and LSE. */
        elem_t *O = (elem_t *)p.o + w.o_off;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int i = w.m0 + r0 + g + 8 * half;
            float l = quad_sum(row_sum[half]);
            float m = row_max[half];
#if FMHA_SINK
            const float sink = ((const float *)p.sink)[w.h * p.sink_head] * LOG2E;
            const float m_fin = fmaxf(m, sink);
            l = (m == -INFINITY ? 0.f : l * exp2f(m - m_fin)) + exp2f(sink - m_fin);
            const float rescale = m == -INFINITY ? 0.f : exp2f(m - m_fin);
            m = m_fin;
#else
            const float rescale = 1.f;
#endif
            const float inv = l > 0.f ? rescale / l : 0.f;
            if (i < w.sq) {
                elem_t *orow = O + (long long)i * p.o_row;
#pragma unroll
                for (int d = 0; d < DV / 8; d++)
                    *(u32 *)(orow + d * 8 + 2 * t) = pack2(o[d * 4 + 2 * half] * inv, o[d * 4 + 2 * half + 1] * inv);
#if FMHA_LSE
                if (t == 0) {
                    float lse = l > 0.f ? (m + log2f(l)) / LOG2E : -INFINITY;
#if FMHA_GROUP
                    ((float *)p.lse)[w.h * p.lse_head + (w.tq0 + i) * p.lse_row] = lse;
#else
                    ((float *)p.lse)[w.b * p.lse_batch + w.h * p.lse_head + (long long)i * p.lse_row] = lse;
#endif
                }
#endif
            }
        }
    }
}
