/* SPDX-License-Identifier: MIT */
/*
 * fwd_wgmma.cuh: the sm90a forward kernel: warp-specialised, wgmma on tensor cores.
 *
 * A CTA owns TILE_M = 64 * CONSUMERS query rows of one (batch, head) and has
 * CONSUMERS + 1 warpgroups. The last warpgroup is the producer: it copies Q once and
 * then the K and V tiles (TILE_N keys) into a ring of FMHA_STAGES stages (the key's) in
 * shared memory -- by TMA from one thread when the host could encode the tensor maps
 * (batch mode), else by cp.async from all 128 -- handing K and V of a stage over
 * separately with mbarriers ("full_k", "full_v"); consumers give K back as soon as S is
 * computed and V after P V ("empty_k", "empty_v"), so the next K copy overlaps the
 * softmax. Each consumer warpgroup owns 64 rows: S = Q K^T with
 * wgmma (both operands in shared memory), then the mask, bias and online softmax in
 * registers (the m64nN accumulator holds, per warp, the m16n8 fragments the sm80 kernel
 * uses, so that code carries over), then O += P V with P straight from registers as
 * wgmma's A operand and V read transposed from shared memory. At head dim 256, O is two
 * m64n128 accumulators (128 registers per thread), so that key tiles are 64 or 80 wide
 * there (80: S is m64n80, 40 registers).
 *
 * Shared memory holds every operand in wgmma's 128-byte-swizzle layout (load_sw128): Q
 * and K as K-major, V as MN-major for the transposed B of P V; all three are stored the
 * same way, rows of 64 head-dim elements with their 16-byte chunks permuted by row.
 *
 * FP8 (FMHA_FP8): Q, K, V are e4m3 bytes, so a 128-byte swizzled row holds 128 head-dim
 * elements, S = Q K^T runs k32 steps, and scores take the descales of q and k. wgmma has
 * no transposed fp8 operand, so V goes through a K-major copy: producer warps 1-3
 * transpose each V stage into "Vt" (transpose_v) while warp 0 issues the boxes; they
 * free the V stage as soon as it is read and hand Vt over on its own barriers. P goes to
 * e4m3 in registers in the order that makes the accumulator's columns wgmma's A layout
 * (pack_p), and the transpose writes V's keys in that same order. At head dim 64 a row of
 * Q, K or V is 64 bytes, so those tiles take the 64-byte swizzle (SW_BYTES, desc_sw64);
 * Vt's rows are TN keys long and keep the 128-byte one. At head dim 128 without LSE, Vt
 * has eight more rows, one of them all ones, so that P V also sums P's rows (ROWSUM_MMA;
 * the sums move into fp32 a key tile at a time, ROWSUM_PROMOTE);
 * that kernel's softmax bases its exponentials on the row's max of the tiles before and
 * corrects a row only when its max rises (STALE_MAX), so it gives K back after the
 * softmax rather than after S. Batch mode, TMA only.
 *
 * Variants: variant.cuh's, plus FMHA_WARPS = 4 * (CONSUMERS + 1). Compiles under NVRTC
 * with the embedded headers of src/cuda/kernels (fwd/, fwd/wgmma/, device/); sm_90a only.
 *
 * This file holds the configuration (tiles, the register split, where O is staged) and
 * the kernel; its pieces, included in this order after the configuration they read, are
 * in fwd/wgmma/: wgmma_smem.cuh (the swizzled operands), wgmma_gemms.cuh (the ring, S and
 * P V), wgmma_items.cuh (work items, the scheduler), wgmma_producer.cuh (Q, K, V in; fp8's
 * transpose), wgmma_softmax.cuh (a tile's softmax), wgmma_loops.cuh (the consumers' tile
 * loops) and wgmma_epilogue.cuh (O out).
 */
#include "fwd_params.h"
#include "tail_trim.h"

#ifndef FMHA_TILE_M
#define FMHA_TILE_M 128
#endif
#ifndef FMHA_TILE_N
#define FMHA_TILE_N 128
#endif
#ifndef FMHA_WARPS
#define FMHA_WARPS 12
#endif
/* The overlapped loop's switch (INTRA_WG_OVERLAP, wgmma_loops.cuh), read first by
 * wgmma_gemms.cuh's ROWSUM_MMA. */
#ifndef FMHA_WG_OVERLAP
#define FMHA_WG_OVERLAP 1
#endif
/* The stale-max softmax (STALE_MAX, wgmma_softmax.cuh) keeps P at 2^6 of its row's max, not 2^8, so
 * that a max 2.75 above the old one still fits e4m3 (variant.cuh's P_LOG2_SCALE). */
#ifndef FMHA_STALE_MAX
#define FMHA_STALE_MAX 1
#endif
#if FMHA_STALE_MAX && defined(FMHA_FP8) && FMHA_FP8 && FMHA_HDIM_V == 128 && !(defined(FMHA_LSE) && FMHA_LSE) && \
    !defined(FMHA_P_LOG2_SCALE)
#define FMHA_P_LOG2_SCALE 6
#endif
#include "variant.cuh"

#define CONSUMERS (TM / 64)
#define NTHREADS (128 * (CONSUMERS + 1))

static_assert(FMHA_WARPS == 4 * (CONSUMERS + 1), "wgmma: warps = 4 x (1 producer + consumers)");
static_assert(TM % 64 == 0 && CONSUMERS >= 1 && CONSUMERS <= 3, "wgmma: 64 rows per consumer warpgroup, 1..3 of them");
static_assert(DQK % 16 == 0 && DV % 16 == 0 && TN % 16 == 0, "wgmma: dims multiples of 16");
static_assert(TN == 64 || TN == 128 || (TN == 80 && DV == 256 && !FMHA_FP8 && !FMHA_PAGED),
              "this kernel has wgmma shapes for tile_n 64 and 128, and 80 at 16-bit head dim 256 without pages");
static_assert(DV == 64 || DV == 128 || DV == 256, "this kernel has wgmma shapes for head_dim_v 64, 128 and 256");
static_assert(!FMHA_FP8 || ((DQK == 64 || DQK == 128 || DQK == 256) && DV == DQK && TN == 128 &&
                            TM == (DQK == 64 ? 192 : 128) && FMHA_BF16 && !FMHA_GROUP && !FMHA_PAGED &&
                            !FMHA_BIAS && !FMHA_DROPOUT),
              "fp8: hd64 on 192 x 128 tiles, hd128 or hd256 on 128 x 128, bf16 out, batch mode without pages, "
              "bias or dropout");

/* The fp8 kernel's softmax: several max and sum chains a row (softmax.cuh; how many per
 * head dim and mask: below), since with the GEMMs at fp8 rate the softmax's latency is
 * the tile's critical path; and O rescaled only when a row's max moved (RESCALE_SKIP: the
 * overlapped loop's start_pv; the serial loop always skips), in fp8 and in the masked
 * 16-bit kernels. Measured (perf-notes run 76,
 * hd128): fp8 +5-12% unmasked, +3% causal at 16k; 16-bit causal +3-5% from 4k with the
 * skip alone; 16-bit unmasked lost 3-9% with either (the GEMMs there already cover the
 * softmax's latency), so it keeps the single chains and the unconditional rescale --
 * except on hd256's 80-key tile, where a rescale is 128 multiplies a thread against 40
 * scores: the skip took it +1% at 1k, +3% at 4k, +11% at 16k (run 85). fp8 hd64 (128-key
 * rows, as at hd128, but half the GEMM a score) measured two chains against four at +0-2%
 * unmasked and +3-5% causal at 512 and 1k, one chain at -7 to -16% (run 149, on its former
 * 128-row tile and the overlapped loop). On the serial loops (fp8 hd64's 192-row tile,
 * hd256) the best count follows the mask, in opposite directions (run 152, 4k and 16k):
 * hd64 unmasked +3% with four, masked -5% with four; hd256 unmasked +3.5-4.3% with two,
 * masked level. hd128 measured level with two. */
#ifndef FMHA_SOFTMAX_CHAINS
#define FMHA_SOFTMAX_CHAINS (!FMHA_FP8 ? 1 : DV == 64 ? (FMHA_MASK ? 2 : 4) : DV == 256 && !FMHA_MASK ? 2 : 4)
#endif
#ifndef FMHA_RESCALE_SKIP
#define FMHA_RESCALE_SKIP (FMHA_FP8 || FMHA_MASK || TN == 80)
#endif
/* Every 8th block of an unmasked tile's exponentials by softmax.cuh's cubic on the FMA
 * pipe (FMHA_POLY_EXP) in fp8 hd256 with a mask: +2.6% at causal 4k, +3-4% from 8k
 * (perf-notes run 149). Elsewhere MUFU alone: fp8 hd128 and hd64's overlapped loop lost
 * 10-17% with any share (runs 123, 149), unmasked hd256 0.6-1.8% (run 149; why a mask
 * changes the sign is not measured). */
#ifndef FMHA_POLY_EXP
#define FMHA_POLY_EXP (FMHA_FP8 && DV > 128 && FMHA_MASK ? 8 : 0)
#endif
#define SOFTMAX_CHAINS FMHA_SOFTMAX_CHAINS
/* Causal kernels test a score against its row's right bound alone (softmax.cuh): level to
 * +7.6% on bf16 and fp8 causal cells of 512-4k, but -2.9% and -3.7% at fp8 hd256 4k and
 * 8k, which keeps the window-general test (perf-notes run 169). */
#ifndef FMHA_CAUSAL_BOUND_ONLY
#define FMHA_CAUSAL_BOUND_ONLY (FMHA_MASK == 1 && !(FMHA_FP8 && DV > 128))
#endif
#define CAUSAL_BOUND_ONLY FMHA_CAUSAL_BOUND_ONLY
/* The scheduler's counter read into a uniform register (wgmma_items.cuh fetch_next_item),
 * so that the producer's TMA boxes take uniform operands: causal bf16 hd128 +1.3-2.2%, hd64
 * +0.6-1.2%, fp8 level to +1.1% (perf-notes run 205). Not in unmasked hd256, whose kernels
 * lost 1.6-3% at 2k-8k with the uniform producer, by this or by a static walk compiled in
 * (runs 199, 202, 205), while fp8 hd256 ran level. Those 16-bit kernels walk statically
 * (fwd.c walks_statically), but their select between the walks keeps the counter's vector
 * form, and with it the producer that measured faster there. */
#ifndef FMHA_UNIFORM_FETCH
#define FMHA_UNIFORM_FETCH (FMHA_MASK || DV != 256)
#endif

#include "common.cuh"
#include "epilogue.cuh"
#include "mask.cuh"
#include "phase_clock.cuh"
#include "sequence.cuh"
#include "sm90.cuh"
#include "softmax.cuh"
#include "wgmma_smem.cuh"
#include "wgmma_gemms.cuh"

/* The register split (REG_SPLIT): the CTA's pool is what the launch gave it, 168 per
 * thread for 384 threads, 128 for 512 (ptxas allocates the launch-bounds maximum when the
 * kernel uses setmaxnreg). The consumers' setmaxnreg.inc blocks until the producer's dec
 * has returned enough, so producer + consumers must fit the pool exactly or the CTA
 * hangs: 24 + 2 x 240 = 72 + 2 x 216 = 3 x 168; 32 + 3 x 160 = 4 x 128. A TMA producer
 * is one thread issuing boxes: it needs little. A cp.async producer (group mode, pages)
 * computes the addresses of 128 rows a pass: with two consumers, at 24 registers it
 * spilled (72 bytes contiguous, 248 paged, hd128), at 56 it did not until the paged
 * producer also got its TMA path (88-96 bytes); at 72 it spills 16 and the consumers none
 * at 216 (ptxas, hd128); with the TMA walk in a loop of its own, 12. Measured (perf-notes
 * run 51): 72 / 216 runs group mode 9-11% faster than 56 / 224, and pages of 16 and 64
 * tokens 1-2% faster than before the TMA path (run 51e). With three consumers (hd64),
 * consumers below 160 spill hundreds of bytes, so the producer keeps 32 (some 50 bytes
 * paged) and the paged TMA path is left out there (PAGED_TMA). */
#if TM == 64 /* one consumer: 168 registers each, no split */
#define SETMAXNREG(op, n)
#else
#if (FMHA_GROUP || FMHA_PAGED) && TM == 128
#define PRODUCER_REGS 72
#define CONSUMER_REGS 216
#elif TM == 128 && FMHA_FP8 /* warps 1-3 of the producer transpose V (transpose_v) */
#define PRODUCER_REGS 56
#define CONSUMER_REGS 224
#elif TM == 192 && FMHA_FP8 /* the transposer warps, as above, beside three consumers (no spills
                              * but with soft-capping and a mask: 44-48 bytes) */
#define PRODUCER_REGS 56
#define CONSUMER_REGS 152
#elif TM == 128
#define PRODUCER_REGS 24
#define CONSUMER_REGS 240
#else
#define PRODUCER_REGS 32
#define CONSUMER_REGS 160
#endif
static_assert(PRODUCER_REGS + CONSUMERS * CONSUMER_REGS == (CONSUMERS + 1) * (CONSUMERS == 2 ? 168 : 128),
              "the register split must fill the CTA's pool exactly");
#define SETMAXNREG(op, n) SM90_SETMAXNREG(op, n)
#endif

/* The staged epilogue: a consumer warpgroup writes its 64 rows of O, normalised and in 16
 * bits, into a staging tile in shared memory, and one of its threads stores the tile with
 * TMA (the O map, fwd_params.h), so that the warpgroup goes on to its next item while the
 * copy engine writes; from registers, O was 32 four-byte stores a thread and about 17% of
 * the consumers' stall samples at 512 tokens (perf-notes run 89). Batch mode without
 * pages only (a tile's rows past the sequence are past the tensor, which the store drops;
 * group mode packs the next sequence there), head dims whose rows are whole 64-column
 * boxes. Up to hd128 the tile sits beside the others; hd256 has no room for it (230,656
 * of 232,448 bytes), so there a warpgroup stages O in its own 64 rows of Q, which no
 * other warpgroup reads (STAGED_IN_Q: 16-bit, Q's rows as wide as O's), and Q is
 * released for the next item only once the stores have read them. fmha__staged_epilogue
 * (specs.c) is the host's copy of these conditions: it sizes the launch's shared memory
 * and encodes the map. Where the map could not be encoded (tma.o_tma == 0) the kernel
 * writes O from registers as before.
 * Staged in Q, the next item's Q load waits for the stores and its latency is exposed at
 * every item start. STAGED_IN_RING (FMHA_O_IN_RING) stages O in the item's last K/V ring
 * stage instead, whose K and V are dead once both warpgroups have run their last S and
 * P V: O's first DV / 128 blocks in the K stage, the rest in the V stage. Q is then freed
 * at the last S, as below hd256, and the stage at the stores' end (the last tile's ring
 * releases are held until then); the two warpgroups meet before writing, as each
 * overwrites keys the other reads. An item without key tiles has no stage: it writes O
 * from registers. */
/* where O may be staged at all: batch mode without pages, rows of whole 64-column boxes */
#define STAGED_ROWS (!FMHA_GROUP && !FMHA_PAGED && DV % 64 == 0)
#define STAGED_IN_Q (STAGED_ROWS && DV > 128 && DQK == DV && !FMHA_FP8)
#define STAGED_EPILOGUE ((STAGED_ROWS && DV <= 128 && DQK <= 128) || STAGED_IN_Q)
#ifndef FMHA_O_IN_RING
#define FMHA_O_IN_RING 1
#endif
#define STAGED_IN_RING (STAGED_IN_Q && FMHA_O_IN_RING)
/* The distance between the staging tile's 64-column blocks: its own tile's 64 rows, or
 * Q's (or a ring stage's) TM rows, whose blocks hold all of the tile's rows */
#define O_BLOCK_BYTES (STAGED_IN_Q ? TM * 128 : 64 * 128)
/* O's blocks in a ring stage's K (STAGED_IN_RING); the rest go to its V */
#define O_LO_BLOCKS ((DV + 127) / 128)
#if STAGED_IN_RING
/* 4 more slots of the barrier block: o_full, o_free and the store's note (ring_o_storer) */
static_assert((6 * STAGES + 10) * 8 <= 256, "the kernel's barriers outgrow specs.c's 256 bytes");
static_assert(O_LO_BLOCKS * TM * 128 <= TN * DQK * (int)sizeof(in_t) &&
                  (DV / 64 - O_LO_BLOCKS) * TM * 128 <= TN * DV * (int)sizeof(in_t),
              "O's blocks must fit a ring stage's K and V");
#endif

#include "wgmma_items.cuh"
#include "wgmma_producer.cuh"
#include "wgmma_softmax.cuh"
#include "wgmma_loops.cuh"
#include "wgmma_epilogue.cuh"

/* ------------------------------------------------------------------ kernel */

/* The grid is 1-d over work items (item_at); a CTA runs item blockIdx.x, and, persistent
 * (fewer CTAs than items), the next ones from the item scheduler: the producer loads the
 * next item's Q as soon as the consumers have issued their last S of the current one,
 * and its K/V ring runs on across items, so one item's softmax, P V and epilogue overlap
 * the next one's loads. */
/* The CTA's dynamic shared memory from its 1024-aligned start: Q's tiles, the ring's K
 * stages, its V stages, (fp8) the stages of V transposed, the staged epilogue's O tile
 * (16-bit elements), the barrier block (256 bytes). The launch must give it
 * SMEM_LAYOUT_BYTES, the alignment's slack included: specs.c's fmha__smem_bytes is the
 * host's copy, and test_nvrtc reads fmha_smem_layout_bytes back from every compiled
 * kernel and checks that the two agree. */
#define SMEM_K_AT (Q_BUFS * TM * DQK)               /* in_t elements from the start */
#define SMEM_V_AT (SMEM_K_AT + STAGES * TN * DQK)   /* in_t elements */
#define SMEM_VT_AT (SMEM_V_AT + STAGES * TN * DV)   /* in_t elements (fp8) */
#define SMEM_O_BYTES ((SMEM_VT_AT + (FMHA_FP8 ? STAGES * V_OPERAND_STAGE : 0)) * (int)sizeof(in_t))
#define SMEM_BARS_BYTES (SMEM_O_BYTES + (STAGED_EPILOGUE && !STAGED_IN_Q ? TM * DV * (int)sizeof(elem_t) : 0))
#define SMEM_LAYOUT_BYTES (1024 + SMEM_BARS_BYTES + 256)
extern "C" __constant__ int fmha_smem_layout_bytes = SMEM_LAYOUT_BYTES;

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
    fmha_fwd_wgmma(const fmha_fwd_params_t p, const __grid_constant__ fmha_tma_maps_t tma)
{
    /* phase sums of consumer thread 0, a diagnostic build's only (phase_clock.cuh): 1 the
     * waits for an item, 2 for its Q, 3 the tile loops, 4 the epilogues, 5 items, 7 the end */
    PHASE_START();
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    /* the swizzle pattern repeats every 1024 bytes, so every block starts 1024-aligned
     * (the launch asks for 1 KiB of slack) */
    in_t *sQ = (in_t *)(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
    in_t *sK0 = sQ + SMEM_K_AT; /* the ring's K stages */
    in_t *sV0 = sQ + SMEM_V_AT; /* its V stages */
#if FMHA_FP8
    in_t *sVt0 = sQ + SMEM_VT_AT; /* the stages of V transposed */
#endif
    elem_t *sO = (elem_t *)((unsigned char *)sQ + SMEM_O_BYTES);
    /* the staged epilogue's O tile, 64 rows x DV a warpgroup (1024-aligned: every tile
     * before it is a multiple of 8 KiB) */
    u64 *bars = (u64 *)((unsigned char *)sQ + SMEM_BARS_BYTES);
    /* K and V of a stage are handed over separately: K frees as soon as S is computed,
     * so the next K copy overlaps the softmax and P V. Q is freed ("q_empty") once the
     * consumers have issued an item's last S. */
    u64 *q_full = bars + SLOT_Q_FULL, *full_k = bars + 1, *full_v = full_k + STAGES, *empty_k = full_v + STAGES,
        *empty_v = empty_k + STAGES;
    u64 *q_empty = bars + SLOT_Q_EMPTY;
    /* the item the producer hands over (producer_item); in fp8, per stage, whether the
     * transposer's walk ends there (end_transposer) */
    u64 *item_full = bars + SLOT_ITEM;
    int *sched_idx = (int *)(bars + SLOT_IDX), *v_stop = (int *)(item_full + 2);
#if STAGED_IN_RING
    /* the O stores' hand-over (ring_o_storer), past v_stop's two slots */
    u64 *o_full = item_full + 4, *o_free = item_full + 5;
    volatile int *o_note = (volatile int *)(item_full + 6);
#endif
    /* Q tile 0's slots (q_slot gives tile 1's) */
    const q_slot_t qsl = {q_full, q_empty, item_full, sched_idx};
#if FMHA_FP8
    /* Vt of a stage: written by the transposer warps, read by the consumers' P V */
    u64 *vt_full = q_empty + 1, *vt_empty = vt_full + STAGES;
#define V_READY vt_full
#define V_DONE vt_empty
#define V_OPERAND sVt0
#else
#define V_READY full_v
#define V_DONE empty_v
#define V_OPERAND sV0
#endif

    const int tid = threadIdx.x, wg = tid / 128;
    const int items = (p.seqlen_q + TM - 1) / TM * p.batch * p.heads_q;

#if FMHA_GROUP || FMHA_PAGED
    const bool use_tma = false; /* Q (and contiguous group-mode K/V) by cp.async */
#elif FMHA_FP8
    const bool use_tma = true; /* the host launches fp8 only with its maps (fwd.c) */
#else
    const bool use_tma = tma.use_tma != 0;
#endif
#if PAGED_TMA
    /* K/V by TMA, a box per page (the host encodes maps over the page pool when the page
     * size is a multiple of TN, so every key tile lies in one page) */
    const bool kv_tma = tma.use_tma != 0;
#elif FMHA_PAGED
    const bool kv_tma = false;
#else
    const bool kv_tma = use_tma;
#endif
    if (tid == 0) {
        for (int i = 0; i < STAGES; i++) v_stop[i] = 0;
        for (int b = 0; b < Q_BUFS; b++) {
            mbar_init(q_slot(qsl, b).full, use_tma ? 1 : 128);
            mbar_init(q_slot(qsl, b).item, 1);
            mbar_init(q_slot(qsl, b).empty, 128 * CONSUMERS);
        }
        for (int i = 0; i < STAGES; i++) { /* TMA: one expect_tx arrival; cp.async: every producer thread */
            mbar_init(&full_k[i], kv_tma ? 1 : 128);
            mbar_init(&full_v[i], kv_tma ? 1 : 128);
            mbar_init(&empty_k[i], 128 * CONSUMERS);
#if FMHA_FP8
            mbar_init(&empty_v[i], 96); /* the transposer warps read V */
            mbar_init(&vt_full[i], 96);
            mbar_init(&vt_empty[i], 128 * CONSUMERS);
#else
            mbar_init(&empty_v[i], 128 * CONSUMERS);
#endif
        }
#if STAGED_IN_RING
        mbar_init(o_full, CONSUMERS);
        mbar_init(o_free, 1);
#endif
        /* the copy engine completes transactions on these barriers: make their
         * initialisation visible to it (the async proxy) before any TMA is issued */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    /* Both sides walk the same items and key tiles: `it` counts the items run (the Q
     * barriers' phase), `j` the key tiles over all of them (the ring's stage and phase). */
    if (wg == CONSUMERS) {
        /* ---------------- producer: each item's Q, then its key tiles into the ring */
        /* The CTA's register pool is what the launch gave it (REG_SPLIT) */
        SETMAXNREG(dec, PRODUCER_REGS);
        const int ptid = tid - 128 * CONSUMERS;
#if FMHA_FP8
        if (ptid >= 32) { /* warps 1-3 transpose V for P V */
            transposer(sV0, sVt0, full_v, empty_v, vt_full, vt_empty, v_stop, ptid);
            return;
        }
#endif
        int j = 0, it = 0;
        if (use_tma) { /* one thread issues every Q, K and V box, item after item */
#if STAGED_IN_RING
            if (ptid == 32 && tma.o_tma) { /* warp 1's first thread stores O */
                ring_o_storer(tma, sK0, o_full, o_free, o_note, empty_k, empty_v);
                return;
            }
#endif
            if (ptid != 0) return;
            for (int idx = blockIdx.x; idx < items;) {
                item_t w;
                const int it_q = it; /* the item's Q tile, if it is handed over */
                if (producer_item(p, idx, it, qsl, true, w)) {
                    /* Q and the first K tile are in flight together: a short item's fill
                     * is one load latency, not two */
                    u64 *q_full_it = q_slot(qsl, it_q % Q_BUFS).full;
                    in_t *sQ_it = sQ + it_q % Q_BUFS * TM * DQK;
                    mbar_expect_tx(q_full_it, TM * DQK * (int)sizeof(in_t));
                    for (int cb = 0; cb < DQK / ROW_ELEMS; cb++)
                        tma_load_4d(sQ_it + cb * TM * ROW_ELEMS, &tma.q, cb * ROW_ELEMS, w.m0, w.h, w.b, q_full_it);
                    for (int n = next_tile(-1, w.kt); n >= 0; n = next_tile(n, w.kt), j++)
                        issue_kv_boxes(tma, sK0, sV0, full_k, full_v, empty_k, empty_v, j, n, w.hk, w.b);
                }
                /* the next item claimed once this one's boxes are issued (the ring holds
                 * the consumers two tiles behind): late enough that a CTA holds no item
                 * it cannot start soon, early enough that the atomic's latency hides */
                idx = fetch_next_item(p, idx);
            }
            retire_sched_slot(p);
#if FMHA_FP8
            end_transposer(j, v_stop, full_v, empty_v);
#endif
            producer_end(it, qsl, true);
            return;
        }
#if PAGED_TMA
        if (kv_tma) { /* its own function: the cp.async producer below keeps its registers */
            paged_producer_by_tma(p, tma, sQ, sK0, sV0, qsl, full_k, full_v, empty_k, empty_v, ptid);
            return;
        }
#endif
        /* cp.async from all 128 threads: a CTA per item (fwd.c) */
        item_t w;
        if (producer_item(p, blockIdx.x, it, qsl, ptid == 0, w)) { /* item 0: Q tile 0 */
            const in_t *K = (const in_t *)p.k + w.s.k, *V = (const in_t *)p.v + w.s.v;
            load_q_by_cp_async(p, w, sQ, q_full, ptid);
            /* Commit groups go K0, V0, K1, V1, ...; after issuing K(j) and waiting for all
             * but the newest group, V(j-1) has landed; after issuing V(j), likewise K(j).
             * The item's last V is handed over at its end. */
            int jj = 0;
            for (int n = next_tile(-1, w.kt); n >= 0;
                 n = next_tile(n, w.kt), j++, jj++) {
                const int st = ring_stage(j);
#if FMHA_PAGED
                const tile_pages_t ps = paged_rows(p, w.s, n, ptid); /* before the wait: its latency hides there */
#endif
                ring_wait_free(empty_k, j);
                LOAD_K_TILE(sK0 + st * TN * DQK, n, ps);
                cp_async_commit();
                if (jj >= 1) {
                    cp_async_wait_1();
                    fence_async_shared();
                    mbar_arrive(&full_v[ring_stage(j - 1)]);
                }
                ring_wait_free(empty_v, j);
                LOAD_V_TILE(sV0 + st * TN * DV, n, ps);
                cp_async_commit();
                cp_async_wait_1();
                fence_async_shared();
                mbar_arrive(&full_k[st]);
            }
            if (jj >= 1) {
                cp_async_wait_all();
                fence_async_shared();
                mbar_arrive(&full_v[ring_stage(j - 1)]);
            }
        }
        producer_end(it, qsl, ptid == 0);
        return;
    }

    /* ---------------- consumers: 64 rows per warpgroup */
    SETMAXNREG(inc, CONSUMER_REGS);
    const int ctid = tid % 128, warp = ctid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int r0 = wg * 64 + warp * 16; /* this warp's first row in the tile */
    /* wg through a warp reduction: its result lives in a uniform register, and so do what
     * is derived from it (from tid / 128 ptxas cannot tell that a warp agrees: it then
     * rebuilt Q's address from threadIdx in every tile, and a loop bound taken from it
     * cost the loop its uniform wgmma descriptors, perf-notes run 91) */
    const int wg_u = (int)__reduce_max_sync(0xffffffffu, (unsigned)wg);
    /* this warpgroup's 64 rows of Q, in each 64-element block (of Q tile 0) */
    const char *sQw0 = (const char *)sQ + wg_u * 64 * SW_BYTES;

    int j = 0;
#if STAGED_IN_RING
    const bool o_storer = use_tma && tma.o_tma; /* the producer's warp 1 stores O (ring_o_storer) */
    u32 o_notes = 0;                            /* the stores noted so far */
#endif
#ifdef FMHA_PHASE_CLOCKS
    /* each item's index, start (globaltimer ns), tile-loop cycles, key tiles and start
     * (clock64: one item's start to the next is its whole cost in cycles), reported as
     * "PI" lines as the CTA leaves */
    unsigned long long item_ns[24];
    int item_idx[24], item_tiles[24];
    long long item_loop[24], item_clk[24];
#endif
    for (int it = 0;; it++) {
        /* the producer's next item (producer_item), or -1: the end */
        PHASE_T(1);
        /* the item's Q tile, through a warp reduction as wg_u: `it` is not uniform to
         * ptxas (the loop ends on a value read from shared memory), and Q's address must
         * be, for the loop's wgmma descriptors */
        const int qb = Q_BUFS == 1 ? 0 : (int)__reduce_max_sync(0xffffffffu, (unsigned)it % Q_BUFS);
        const q_slot_t qs = q_slot(qsl, qb);
        u64 *const q_empty_it = qs.empty; /* this item's Q tile's: released after its last S */
        mbar_wait(qs.item, q_phase(it));
        PHASE_ADD(1);
        const int idx = *(const volatile int *)qs.idx;
        if (idx < 0) break;
        const char *sQw = sQw0 + qb * TM * DQK * (int)sizeof(in_t);
        item_t w;
        item_at(p, idx, w);
        float o[O_COLS / 2];
#pragma unroll
        for (int i = 0; i < O_COLS / 2; i++) o[i] = 0.f;
        float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
        const float slope = alibi_slope(p, w.b, w.h);
        const elem_t *bias = bias_rows(p, w.b, w.h);
#if FMHA_FP8
#if DESCALE_SLOT /* the producer's product, beside the index (hand_over) */
        const fp8_softmax_params_t sp = fp8_softmax_params(p, ((const volatile float *)qs.idx)[1]);
#else
        const fp8_softmax_params_t sp = fp8_softmax_params(p, descale_of(p, 0, w.b, w.hk) * descale_of(p, 1, w.b, w.hk));
#endif
        const float v_descale = descale_of(p, 2, w.b, w.hk);
#else
        const fmha_fwd_params_t &sp = p;
#endif
        const tile_rows_t rows = {w.m0 + r0 + g, w.s.sq, w.s.sk, w.diag, t};

        float s[TN / 2];
        u32 pa[TN / 2 * (int)sizeof(in_t) / 4]; /* P in wgmma's A layout: 16-bit pairs or e4m3 quads */
        PHASE_T(2);
        mbar_wait(qs.full, q_phase(it));
        PHASE_ADD(2);
        PHASE_COUNT(5);
#ifdef FMHA_PHASE_CLOCKS
        if (it < 24) item_ns[it] = phase_globaltimer(), item_idx[it] = idx;
#endif
        PHASE_T(3);
#ifdef FMHA_PHASE_CLOCKS
        if (it < 24) item_clk[it] = PHASE_AT(3);
#endif
        bool q_held = true;
        const int j_item = j; /* the item's first ring tile: j > j_item after it when it had any */
#if SKIP_INVISIBLE
        /* this warpgroup's tiles: the item's, cut at its rows' visible end; how many lie
         * past the cut is counted first, so that the item's own end is not held through
         * the loop */
        const int vis_end = visible_keys_end(p, w.m0 + wg_u * 64, w.m0 + wg_u * 64 + 63, w.s.sq, w.diag);
        int cut_tiles = 0;
        for (int n = next_tile(-1, w.kt); n >= 0; n = next_tile(n, w.kt)) cut_tiles += n >= vis_end;
        if (w.kt.end > vis_end) w.kt.end = vis_end;
        const bool hold_last = STAGED_IN_RING && cut_tiles == 0; /* the item's last tile is among this warpgroup's */
#else
        const bool hold_last = STAGED_IN_RING;
#endif
#if INTRA_WG_OVERLAP
        consume_tiles_overlapped(p, sp, w, rows, slope, bias, sQw, sK0, V_OPERAND, full_k, empty_k, V_READY, V_DONE,
                                 q_empty_it, q_held, hold_last, o, s, pa, row_max, row_sum, j);
#else
        /* Each warpgroup runs S, softmax and P V of a tile in turn; the two or three
         * consumer warpgroups drift out of phase, so one's softmax overlaps another's
         * wgmmas. */
        for (int n0 = next_tile(-1, w.kt), n1; n0 >= 0; n0 = n1, j++) {
            n1 = next_tile(n0, w.kt);
            const int st = ring_stage(j);
            start_s(s, sQw, sK0, full_k, j);
            wgmma_wait_all();
            fence_regs<TN / 2>(s);
            release_k(empty_k, q_empty_it, q_held, j, n1 < 0, n1 < 0 && hold_last);

            float alpha[2];
            softmax_of_tile(p, sp, w, rows, n0, slope, bias, s, row_max, row_sum, alpha);
            /* skipped where no row of the warp moved its max: the serial loop's kernels
             * (hd64, hd256 on 64-key tiles, fp8 hd256) measured +0-3% with it, never
             * below noise (perf-notes runs 86-87); the result is the same bits */
            rescale_o_if_moved<DV>(o, alpha);
            /* P in wgmma's A layout, packed before any wgmma reads it: registers written
             * between two wgmmas of a group make ptxas insert a wait before each */
            pack_p(pa, s);

            ring_wait_full(V_READY, j);
            wgmma_fence();
            issue_pv(o, pa, V_OPERAND + st * V_OPERAND_STAGE);
            wgmma_commit();
            wgmma_wait_all();
            fence_regs<O_COLS / 2>(o);
            if (!(STAGED_IN_RING && n1 < 0 && hold_last)) mbar_arrive(&V_DONE[st]);
        }
#endif
#if SKIP_INVISIBLE
        /* the item's tiles past the cut: only the handshakes (Q went with the last
         * visible S, or goes below). Waiting for each stage keeps the arrivals in its
         * phase: the producer refilled it only after every consumer had released the
         * previous one. */
        for (; cut_tiles > 0; cut_tiles--) {
            const int st = ring_stage(j);
            const bool hold = STAGED_IN_RING && cut_tiles == 1; /* the item's last: O's stage */
            ring_wait_full(full_k, j);
            if (!hold) mbar_arrive(&empty_k[st]);
            ring_wait_full(V_READY, j);
            if (!hold) mbar_arrive(&V_DONE[st]);
            j++;
        }
#endif
#if !STAGED_IN_Q || STAGED_IN_RING
        if (q_held) mbar_arrive(q_empty_it); /* an item (or warpgroup) with no visible key tiles */
#endif
        PHASE_ADD(3);
#ifdef FMHA_PHASE_CLOCKS
        if (it < 24) item_loop[it] = clock64() - PHASE_AT(3), item_tiles[it] = j - j_item;
#endif
#if ROWSUM_MMA
        /* column DV + 2t of rows g and g + 8: the sums at t = 0, zeros elsewhere; the
         * last tile's, beside the others' in row_sum (ROWSUM_PROMOTE; else still 0) */
        row_sum[0] += o[DV / 2];
        row_sum[1] += o[DV / 2 + 2];
#endif
        PHASE_T(4);

        /* Epilogue: normalise, add the sink term, write O and LSE. */
#if FMHA_FP8
        const float out_scale = v_descale;
#else
        const float out_scale = 1.f;
#endif
#if STAGED_IN_RING
        if (o_storer && j > j_item) {
            /* the item's last ring stage, once both warpgroups are done with it: this
             * warpgroup's rows of its K (O's first blocks) and of its V (the rest); the
             * storer (ring_o_storer) stores them and releases the stage */
            const int st = ring_stage(j - 1);
            consumers_sync();
            wait_o_note_free(o_free, o_notes++, wg_u);
            write_o_tile(p, (elem_t *)((char *)(sK0 + st * TN * DQK) + wg_u * 64 * 128), w, o, row_max, row_sum, wg,
                         warp * 16 + g, t, out_scale);
            warpgroup_sync(wg); /* the rows written, and every warp past its wait */
            hand_o_to_storer(o_full, o_note, wg_u, ctid, st, w.m0, w.h, w.b);
            PHASE_ADD(4);
            continue;
        }
#elif STAGED_EPILOGUE
        if (tma.o_tma) {
#if STAGED_IN_Q
            /* this warpgroup's rows of Q, as the staging tile's (their last S is done) */
            staged_epilogue(p, tma, (elem_t *)((char *)sQ + wg_u * 64 * SW_BYTES), w, o, row_max, row_sum, wg,
                            warp * 16 + g, t, out_scale);
            /* Q is the next item's once the copy engine has read these rows */
            if (ctid == 0) bulk_wait_read();
            warpgroup_sync(wg);
            mbar_arrive(q_empty_it);
#else
            staged_epilogue(p, tma, sO + wg * 64 * DV, w, o, row_max, row_sum, wg, warp * 16 + g, t, out_scale);
#endif
            PHASE_ADD(4);
            continue;
        }
#endif
        store_o_lse<DV>(p, w.s, w.h, o, row_max, row_sum, w.m0 + r0 + g, t, out_scale);
#if STAGED_IN_RING
        if (j > j_item) { /* no map: the held stage goes back at once */
            mbar_arrive(&empty_k[ring_stage(j - 1)]);
            mbar_arrive(&V_DONE[ring_stage(j - 1)]);
        }
#elif STAGED_IN_Q
        mbar_arrive(q_empty_it);
#endif
        PHASE_ADD(4);
    }
#if STAGED_IN_RING
    if (o_storer) { /* the storer's walk ends, after every arrival of the last store's */
        consumers_sync();
        wait_o_note_free(o_free, o_notes, wg_u);
        warpgroup_sync(wg);
        hand_o_to_storer(o_full, o_note, wg_u, ctid, -1, 0, 0, 0);
    }
#elif STAGED_EPILOGUE
    /* the CTA's shared memory must outlive the stores that read it */
    if (tma.o_tma && ctid == 0) bulk_wait();
#endif
    PHASE_MARK(7);
#ifdef FMHA_PHASE_CLOCKS
    if (tid == PHASE_REPORTER) { /* report lines (phase_clock.cuh), which fmha_phase_print prints */
        const long long done_ns = (long long)phase_globaltimer();
        long long *l;
        for (int i = 0; i < 24 && i < (int)(phase_cycles_[5] - phase_cycles_[0]) && (l = phase_line('I')); i++)
            l[0] = blockIdx.x, l[1] = i, l[2] = item_idx[i], l[3] = (long long)item_ns[i], l[4] = item_loop[i],
            l[5] = phase_smid(), l[6] = done_ns, l[7] = item_tiles[i], l[8] = item_clk[i];
#ifdef FMHA_PHASE_TILES
        for (int wgi = 0; wgi < 2 && blockIdx.x < 160; wgi++)
            for (int t = 0; t < 16 && (l = phase_line('T')); t++) {
                const long long *c = fmha_phase_tiles[blockIdx.x][wgi][t];
                l[0] = blockIdx.x, l[1] = wgi, l[2] = PT_FIRST + t;
                for (int k = 0; k < 6; k++) l[3 + k] = c[k];
            }
#endif
    }
#endif
    PHASE_REPORT(0);
}
