/* SPDX-License-Identifier: MIT */
/*
 * tail_trim.h: which wgmma forward kernels run a warpgroup's last key tile on the columns
 * it has (fwd_wgmma.cuh's TAIL_TRIM), as one rule for the kernel, over its variant macros,
 * and for the selector's cost model (heuristics.c wgmma_computed_keys), over a kernel key:
 * where the two disagreed, the selector would price a tile's padding that the kernel does
 * not compute, or the other way round. hd256's 80-key tile, 128 rows, 16-bit, unmasked,
 * batch mode, without LSE, bias, soft-cap, sinks or pages: at hd256's 168 registers every
 * other kernel spilled more or had its wgmmas serialised (C7511) with the trimmed copies of
 * the last tile (perf-notes run 185). The LSE kernels were trimmed until NVRTC's own ptxas
 * was asked (FMHA_PTXAS_LOG, perf-notes run 198): it serialises their wgmmas with the trim
 * (nvcc's ptxas does not). Preprocessor only, since the kernel tests it in #if.
 */
#ifndef FMHA_KERNEL_TAIL_TRIM_H
#define FMHA_KERNEL_TAIL_TRIM_H

#define FMHA_TAIL_TRIMS(tile_m, tile_n, hdim_v, fp8, masked, lse, bias, softcap, sink, group, paged)           \
    ((tile_m) == 128 && (tile_n) == 80 && (hdim_v) == 256 && !(fp8) && !(masked) && !(lse) && !(bias) &&     \
     !(softcap) && !(sink) && !(group) && !(paged))

#endif /* FMHA_KERNEL_TAIL_TRIM_H */
