/* SPDX-License-Identifier: MIT */
/*
 * specs.h: what each target architecture offers (shared memory, registers, SMs, dtypes,
 * pipelines) and the tile tables per (pipeline, family, head dim) that enumeration
 * draws from. The first tile of a row is the preferred one.
 */
#ifndef FMHA_CORE_SPECS_H
#define FMHA_CORE_SPECS_H

#include "key.h"

typedef struct arch_spec {
    karch_t arch;
    const char *name;
    int sm;                    /* compute capability x10; 0 for the CPU */
    int smem_per_block;        /* bytes a block may opt in to */
    int smem_per_sm;           /* bytes per SM */
    int regs_per_sm;           /* 32-bit registers per SM */
    int default_sm_count;      /* used when no device is queried */
    unsigned dtypes;           /* bit per kdtype_t */
    unsigned pipelines;        /* bit per kpipe_t */
} arch_spec_t;

const arch_spec_t *fmha__arch_spec(karch_t a);
struct fmha_target;
/* A target from the arch's table row (sm_count 0: the arch's default count). */
void fmha__target_of_arch(struct fmha_target *t, karch_t arch, int sm_count, int is_virtual);
int fmha__arch_lookup(const char *name); /* -1 when unknown */

/* One tile choice. `layout` narrows it to the keys of one K/V layout: TILE_PAGED only
 * paged caches (key field paged != KP_NONE), TILE_CONTIGUOUS only the others. A tile's
 * rank (the receipts' "preferred tile") counts within each layout. */
enum { TILE_ANY_LAYOUT = 0, TILE_PAGED = 1, TILE_CONTIGUOUS = 2 };
typedef struct tile {
    int m, n, warps, stages;
    int layout;
} tile_t;

#define MAX_TILES 8

/* Tiles for a (pipeline, family, hdim_qk, hdim_v) on an arch; returns the count (0 when
 * the table has no row: the pair is not supported by that pipeline). Layout-specific
 * tiles come first, then the ones for both. */
int fmha__tiles(karch_t arch, kpipe_t pipe, kfamily_t fam, kdtype_t dtype, int hdim_qk, int hdim_v, tile_t *out);

/* Head-dim pairs GPU pipelines instantiate, in table order. */
typedef struct hdim_pair {
    int qk, v;
} hdim_pair_t;
extern const hdim_pair_t fmha__hdim_pairs[];
extern const int fmha__num_hdim_pairs;

/* Is k laid out for the split-KV decode kernel (kernels/splitkv/decode_mma.cuh)? An
 * mma.sync split key whose row block is smaller than its warps' 16-row slabs: the warps
 * split the key tile instead. */
int fmha__decode_layout(const fmha_key_t *k);

/* Shared memory a kernel instance needs (bytes), by its pipeline's layout. */
int fmha__smem_bytes(const fmha_key_t *k);
/* The sm90 forward's O through shared memory and TMA stores (specs.c says where). */
int fmha__staged_epilogue(const fmha_key_t *k);
/* Accumulator registers per thread the instance needs at least (fp32 S and O tiles). */
int fmha__acc_regs(const fmha_key_t *k);

#endif /* FMHA_CORE_SPECS_H */
