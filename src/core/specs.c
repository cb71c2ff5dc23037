/* SPDX-License-Identifier: MIT */
/*
 * specs.c: architecture specs and tile tables.
 *
 * Tile choices start from the published ones (../shared/research/perf_api_anchors.md
 * section 2): FA2's mma.sync forward tiles (hd32/64: 128x128 w4; hd96/128: 128x64 w4;
 * hd192/256: 128x64 w8, with 64-row tiles where shared memory is short),
 * FA2's backward tiles,
 * FA2's split-KV tiles (m 64, n 256/128/64), and FA3's sm90 warp-specialised tiles
 * (hd64 192x128, hd128 128x128 causal / 128x176, hd192 128x128, hd256 128x80).
 */
#include "specs.h"

#include <string.h>

#include "internal.h"

#define DT(x) (1u << (x))
#define PIPE(x) (1u << (x))

/* Shared memory: the opt-in maximum per block and per SM, from the CUDA programming
 * guide's compute-capability table (A100 163 KiB / 164 KiB, GA10x and AD10x 99 / 100 KiB,
 * H100 227 / 228 KiB). SM counts are those of A100, RTX A6000, L40S and H100 SXM. */
static const arch_spec_t ARCHS[KA_COUNT_] = {
    {KA_CPU, "cpu", 0, 1 << 30, 1 << 30, 0, 1, DT(KD_FP16) | DT(KD_BF16) | DT(KD_FP32) | DT(KD_FP8), PIPE(KPIPE_CPUREF)},
    {KA_SM80, "sm80", 80, 166912, 167936, 65536, 108, DT(KD_FP16) | DT(KD_BF16), PIPE(KPIPE_MMASYNC)},
    {KA_SM86, "sm86", 86, 101376, 102400, 65536, 84, DT(KD_FP16) | DT(KD_BF16), PIPE(KPIPE_MMASYNC)},
    {KA_SM89, "sm89", 89, 101376, 102400, 65536, 142, DT(KD_FP16) | DT(KD_BF16) | DT(KD_FP8), PIPE(KPIPE_MMASYNC)},
    {KA_SM90, "sm90", 90, 232448, 233472, 65536, 132, DT(KD_FP16) | DT(KD_BF16) | DT(KD_FP8),
     PIPE(KPIPE_MMASYNC) | PIPE(KPIPE_WGMMAWS)},
};

const arch_spec_t *fmha__arch_spec(karch_t a) { return a >= 0 && a < KA_COUNT_ ? &ARCHS[a] : NULL; }

void fmha__target_of_arch(fmha_target_t *t, karch_t arch, int sm_count, int is_virtual)
{
    const arch_spec_t *a = fmha__arch_spec(arch);
    t->arch = arch;
    t->is_virtual = is_virtual;
    t->sm_count = sm_count > 0 ? sm_count : a->default_sm_count;
    t->smem_per_block = a->smem_per_block;
    t->smem_per_sm = a->smem_per_sm;
    t->regs_per_sm = a->regs_per_sm;
}

int fmha__arch_lookup(const char *name)
{
    for (int a = 0; a < KA_COUNT_; a++)
        if (strcmp(ARCHS[a].name, name) == 0) return a;
    return -1;
}

const hdim_pair_t fmha__hdim_pairs[] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};
const int fmha__num_hdim_pairs = (int)(sizeof fmha__hdim_pairs / sizeof fmha__hdim_pairs[0]);

#define ROW_TILES 4
typedef struct tile_shape {
    int m, n, warps, stages;
} tile_shape_t;
typedef struct tile_row {
    kpipe_t pipe;
    int family_mask; /* bit per kfamily_t */
    int hdim;        /* hdim_qk; 0 = any */
    int big_smem;    /* 1: only where smem_per_block >= 160 KiB; 0: any; -1: only below */
    tile_shape_t tiles[ROW_TILES];
    int dtypes;      /* bit per kdtype_t; 0 = any */
    int layout;      /* TILE_ANY_LAYOUT, or a row of tiles for one layout ahead of the general row */
} tile_row_t;

#define FAM(x) (1 << (x))
#define FWD_LIKE (FAM(KF_FWD) | FAM(KF_PAGEDKV) | FAM(KF_PREFILL))

static const tile_row_t TILES[] = {
    /* mma.sync forward (FA2). On small-smem parts the wide tiles give way to 64-row ones. */
    {KPIPE_MMASYNC, FWD_LIKE, 32, 0, {{128, 128, 4, 2}, {64, 64, 4, 2}}, 0, 0},
    /* Order: measured best first for our kernel (docs/perf-notes.md, tile sweep on H100):
     * FA2's 128x128 (hd64) and 128x64 (hd128) spill here; 8-warp one-slab tiles lose. */
    {KPIPE_MMASYNC, FWD_LIKE, 64, 0, {{128, 64, 4, 2}, {64, 64, 4, 2}, {128, 128, 4, 2}, {128, 128, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 96, 0, {{64, 64, 4, 2}, {128, 64, 4, 2}, {128, 64, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 128, 1, {{128, 32, 4, 2}, {64, 64, 4, 2}, {128, 64, 4, 2}, {128, 64, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 128, -1, {{128, 32, 4, 2}, {64, 64, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 192, 1, {{128, 64, 8, 2}, {64, 64, 4, 2}, {64, 32, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 192, -1, {{64, 32, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 256, 1, {{128, 64, 8, 2}, {64, 64, 4, 2}, {64, 32, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FWD_LIKE, 256, -1, {{64, 32, 4, 2}}, 0, 0},
    /* split-KV (flash-decoding). First the decode kernel (kernels/splitkv/decode_mma.cuh:
     * a 16- or 32-row block holds a whole GQA group, the warps split each key tile, deep
     * K/V pipelines); then the forward's kernel with 64 packed rows for larger groups x
     * query rows. Narrower ones where shared memory is short (sm86/sm89: 99 KiB). */
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 32, 1, {{16, 128, 4, 4}, {32, 128, 4, 3}, {64, 128, 4, 2}}, 0, 0},
    /* hd64: n256 spills in fwd_mma */
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 64, 1, {{16, 64, 4, 4}, {32, 64, 4, 4}, {64, 128, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 96, 1, {{16, 64, 4, 3}, {32, 64, 4, 3}, {64, 128, 4, 2}}, 0, 0},
    /* hd128 paged: 128 keys a tile (perf-notes run 77: page 16 at 0.91-0.99 of the
     * contiguous kernel, against 0.81-0.97 with the 64-key tile), over 4 warps, or over 8
     * where a GQA group outnumbers 4 warps and splits are reduced (the selector's decode
     * term, heuristics.c; perf-notes runs 111, 115); on contiguous caches the 8-warp tile
     * by the same term */
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 128, 1, {{16, 128, 4, 3}, {16, 128, 8, 3}}, 0, TILE_PAGED},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 128, 1, {{16, 64, 4, 3}, {32, 64, 4, 3}, {64, 128, 4, 2}, {16, 128, 8, 3}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 192, 1, {{16, 64, 4, 3}, {64, 64, 4, 2}}, 0, 0}, /* m32: O of 192+ regs */
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 256, 1, {{16, 64, 4, 3}, {64, 64, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 32, -1, {{16, 64, 4, 4}, {32, 64, 4, 3}, {64, 128, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 64, -1, {{16, 64, 4, 3}, {32, 64, 4, 2}, {64, 128, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 96, -1, {{16, 64, 4, 2}, {32, 64, 4, 2}, {64, 64, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 128, -1, {{16, 64, 4, 2}, {32, 64, 4, 2}, {64, 64, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 192, -1, {{16, 32, 2, 2}, {64, 32, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_SPLITKV), 256, -1, {{16, 32, 2, 2}, {64, 32, 4, 2}}, 0, 0},
    /* element-wise stages: combine, appendkv, dot(dO, O), convert dQ (no MMA) */
    {KPIPE_MMASYNC, FAM(KF_COMBINE) | FAM(KF_APPENDKV) | FAM(KF_BWD_DOT_DO_O) | FAM(KF_BWD_CONVERT_DQ), 0, 0,
     {{32, 0, 4, 1}}, 0, 0},
    /* backward dq_dk_dv (FA2) */
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 32, 1, {{128, 128, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 64, 1, {{128, 128, 8, 2}, {64, 128, 8, 2}, {64, 64, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 64, -1, {{64, 128, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 96, 0, {{64, 128, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 128, 1, {{64, 128, 8, 2}, {64, 64, 4, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 128, -1, {{64, 64, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 192, 0, {{64, 64, 8, 2}}, 0, 0},
    {KPIPE_MMASYNC, FAM(KF_BWD_DQ_DK_DV), 256, 0, {{64, 64, 8, 2}}, 0, 0},
    /* sm90 warp-specialised wgmma forward (FA3): warps = 4 per consumer warpgroup + 4
     * for the producer warpgroup */
    /* fp8 e4m3 (FMHA_FP8): 128-key tiles, since P V's k32 steps read V transposed in rows
     * of 128 key bytes (one 128-byte swizzle row); hd64 (Q and K in the 64-byte swizzle),
     * hd128 and hd256 only (hd96 and hd192 rows would need the 32-byte one), so the last row
     * lists none. hd64 on 192 rows (three consumers, the serial loop, as 16-bit hd64): +1 to
     * +17% on every cell against 128 rows on the overlapped loop, +12-25% with soft-capping,
     * -5-8% only on a short window (perf-notes run 150); hd128 on 192 rows spills 860 bytes */
    {KPIPE_WGMMAWS, FAM(KF_FWD), 64, 1, {{192, 128, 16, 2}}, 1 << KD_FP8, 0},
    {KPIPE_WGMMAWS, FAM(KF_FWD), 128, 1, {{128, 128, 12, 2}}, 1 << KD_FP8, 0},
    {KPIPE_WGMMAWS, FAM(KF_FWD), 256, 1, {{128, 128, 12, 2}}, 1 << KD_FP8, 0},
    {KPIPE_WGMMAWS, FAM(KF_FWD), 0, 0, {{0, 0, 0, 0}}, 1 << KD_FP8, 0},
    {KPIPE_WGMMAWS, FWD_LIKE | FAM(KF_SPLITKV), 64, 1, {{192, 128, 16, 2}, {192, 192, 16, 2}}, 0, 0},
    {KPIPE_WGMMAWS, FWD_LIKE | FAM(KF_SPLITKV), 96, 1, {{192, 128, 16, 2}, {192, 144, 16, 2}}, 0, 0},
    /* hd128 lists 128 x 128 alone: 176 keys (perf-notes run 74, not kept, and no wgmma
     * shape in the kernel) no longer fit beside the staged epilogue's O tile */
    {KPIPE_WGMMAWS, FWD_LIKE | FAM(KF_SPLITKV), 128, 1, {{128, 128, 12, 2}}, 0, 0},
    {KPIPE_WGMMAWS, FWD_LIKE | FAM(KF_SPLITKV), 192, 1, {{128, 128, 12, 2}, {128, 96, 12, 2}}, 0, 0},
    {KPIPE_WGMMAWS, FWD_LIKE | FAM(KF_SPLITKV), 256, 1, {{128, 80, 12, 2}, {128, 64, 12, 2}}, 0, 0},
    /* sm90 backward (kernels/bwd/bwd_wgmma.cuh): two consumer warpgroups of 64 keys each,
     * m-blocks of tile_m query rows streamed past them */
    {KPIPE_WGMMAWS, FAM(KF_BWD_DQ_DK_DV), 64, 1, {{128, 128, 12, 2}}, 0, 0},
    {KPIPE_WGMMAWS, FAM(KF_BWD_DQ_DK_DV), 128, 1, {{64, 128, 12, 2}}, 0, 0},
};

int fmha__tiles(karch_t arch, kpipe_t pipe, kfamily_t fam, kdtype_t dtype, int hdim_qk, int hdim_v, tile_t *out)
{
    const arch_spec_t *a = fmha__arch_spec(arch);
    if (!a) return 0;
    if (pipe == KPIPE_CPUREF) { /* the CPU backend: 64-row blocks, no warps */
        out[0] = (tile_t){64, 0, 0, 0, TILE_ANY_LAYOUT};
        return 1;
    }
    int big = a->smem_per_block >= 160 * 1024;
    (void)hdim_v;
    int n = 0;
    for (size_t r = 0; r < sizeof TILES / sizeof TILES[0]; r++) {
        const tile_row_t *row = &TILES[r];
        if (row->pipe != pipe || !(row->family_mask & FAM(fam))) continue;
        if (row->hdim && row->hdim != hdim_qk) continue;
        if (row->dtypes && !(row->dtypes & (1 << dtype))) continue;
        if ((row->big_smem == 1 && !big) || (row->big_smem == -1 && big)) continue;
        for (const tile_shape_t *s = row->tiles; s < row->tiles + ROW_TILES && s->m && n < MAX_TILES; s++)
            out[n++] = (tile_t){s->m, s->n, s->warps, s->stages, row->layout};
        if (row->layout == TILE_ANY_LAYOUT) return n; /* a layout's own row goes on to the general one */
    }
    return n;
}

static int elem_bytes(int dtype) { return dtype == KD_FP32 ? 4 : dtype == KD_FP8 ? 1 : 2; }

/* The split-KV decode kernel (its warps split each key tile) rather than the forward's. */
int fmha__decode_layout(const fmha_key_t *k)
{
    return k->pipeline == KPIPE_MMASYNC && k->family == KF_SPLITKV && k->tile_m < 16 * k->warps;
}

/* Past hd128 the sm90 forward has no room for O's staging tile and stages it in the
 * item's last K/V ring stage, or in Q's rows (fwd_wgmma.cuh's STAGED_IN_RING and
 * STAGED_IN_Q: 16-bit, Q's rows as wide as O's); no shared memory beside the tiles. */
static int staged_in_q(const fmha_key_t *k)
{
    return k->hdim_v > 128 && k->hdim_qk == k->hdim_v && k->dtype != KD_FP8;
}

/* The sm90 forward writes O through shared memory and TMA stores (fwd_wgmma.cuh's
 * STAGED_EPILOGUE, the same condition): batch mode without pages, where a tile's rows
 * past the sequence are past the tensor's extent too (the store drops them), head dims
 * whose O rows are whole 128-byte boxes, and room beside the tiles or in Q's. */
int fmha__staged_epilogue(const fmha_key_t *k)
{
    return k->pipeline == KPIPE_WGMMAWS && k->mode == KM_BATCH && k->paged == KP_NONE && k->hdim_v % 64 == 0 &&
           ((k->hdim_v <= 128 && k->hdim_qk <= 128) || staged_in_q(k));
}

/* The sm90 forward's Q tiles: two at 16-bit hd64, the next item's Q loading while one
 * runs (fwd_wgmma.cuh's Q_BUFS, the same condition), else one. */
static int wgmma_q_tiles(const fmha_key_t *k)
{
    return k->dtype != KD_FP8 && k->hdim_v == 64 ? 2 : 1;
}

/* Shared memory: the Q tile stays resident; K and V tiles are multi-buffered (stages).
 * The mma.sync kernel pads each row by 8 elements (bank-conflict-free ldmatrix), so for
 * it this is exactly what the kernel asks for at launch, as it is for the wgmma forward
 * (unpadded 128-byte-swizzled rows, plus its barriers and alignment slack). This is the
 * one formula: the CUDA backend launches with it. Element-wise stages use none. */
int fmha__smem_bytes(const fmha_key_t *k)
{
    if (k->pipeline == KPIPE_CPUREF || k->tile_n == 0) return 0;
    int e = elem_bytes(k->dtype);
    int pad = k->pipeline == KPIPE_MMASYNC ? 8 : 0;
    int q = k->tile_m * (k->hdim_qk + pad) * e;
    /* the mma.sync split-KV kernels keep K and V rows whole and swizzled up to hd128: the
     * decode kernel always, the 64-row one on contiguous caches (decode_mma.cuh and
     * fwd_mma.cuh, SWZ_KV) */
    int pad_kv = pad;
    if (k->pipeline == KPIPE_MMASYNC && k->family == KF_SPLITKV && k->hdim_qk % 64 == 0 && k->hdim_v % 64 == 0 &&
        k->hdim_qk <= 128 && k->hdim_v <= 128 && (fmha__decode_layout(k) || k->paged == KP_NONE))
        pad_kv = 0;
    int kv = k->stages * k->tile_n * (k->hdim_qk + pad_kv + k->hdim_v + pad_kv) * e;
    if (k->family == KF_BWD_DQ_DK_DV) {
        /* K, V resident; Q, dO (and their rows' LSE and D, fp32) streamed through `stages`
         * buffers; one dS tile */
        int bytes = k->tile_n * (k->hdim_qk + pad + k->hdim_v + pad) * e +
                    k->stages * k->tile_m * (k->hdim_qk + pad + k->hdim_v + pad) * e + k->tile_n * (k->tile_m + pad) * e +
                    k->stages * k->tile_m * 2 * 4;
        if (k->pipeline == KPIPE_WGMMAWS) /* a second dS^T buffer, the dQ writer's fp32 rows, barriers
                                             and 1 KiB of alignment slack (bwd_wgmma.cuh) */
            bytes += k->tile_n * k->tile_m * e + k->tile_m * k->hdim_qk * 4 + 128 + 1024;
        return bytes;
    }
    if (fmha__decode_layout(k)) {
        /* the decode kernel: its K/V buffers (and a paged cache's row addresses per stage,
         * two int64 a key) become the merge area of the warps' fp32 O rows, maxima and
         * sums at the end (O rows hdim_v + 8 floats apart: decode_mma.cuh's SO_PAD) */
        int pages = k->paged ? k->stages * k->tile_n * 16 : 0;
        int merge = k->warps * k->tile_m * (k->hdim_v + 8 + 2) * 4;
        return q + (kv + pages > merge ? kv + pages : merge);
    }
    if (k->pipeline == KPIPE_WGMMAWS) {
        /* the mbarriers and ints (256 bytes, enough for four stages: fwd_wgmma.cuh), 1 KiB
         * of slack to start the swizzled tiles 1024-byte aligned; fp8 adds a transposed copy
         * of each V stage; the staged epilogue O's 16-bit tile (fwd_wgmma.cuh) */
        /* (fp8 hd128's Vt stages have room for eight more rows: fwd_wgmma.cuh's ROWSUM_MMA) */
        const int vt_rows = k->hdim_v + (k->hdim_v == 128 ? 8 : 0);
        const int vt = k->dtype == KD_FP8 ? k->stages * k->tile_n * vt_rows * e : 0;
        const int staged_o = fmha__staged_epilogue(k) && !staged_in_q(k) ? k->tile_m * k->hdim_v * 2 : 0;
        return q * wgmma_q_tiles(k) + kv + vt + staged_o + 256 + 1024;
    }
    return q + kv;
}

/* Registers: each thread holds its share of the fp32 S tile (tile_m x tile_n) and of the
 * O accumulator (tile_m x hdim_v). For the wgmma pipeline only consumer warps hold them. */
int fmha__acc_regs(const fmha_key_t *k)
{
    if (k->pipeline == KPIPE_CPUREF || k->tile_n == 0 || k->warps == 0) return 0;
    int threads = 32 * (k->pipeline == KPIPE_WGMMAWS ? k->warps - 4 : k->warps);
    if (threads <= 0) return 1 << 20;
    return (k->tile_m * (k->tile_n + k->hdim_v)) / threads;
}
