/* SPDX-License-Identifier: MIT */
/*
 * families.c: the CUDA backend's kernel-family table (family.h): one row per kernel
 * family and pipeline this build has a kernel for. Registration, `fmha build`, the NVRTC
 * test and the selector's plan-time checks all read it.
 */
#include "appendkv.h"
#include "bwd.h"
#include "family.h"
#include "fwd.h"
#include "jit.h"
#include "splitkv.h"

const cuda_family_t fmha__cuda_families[] = {
    /* name        family  pipeline       source              entry ... launch, dependent_launch */
    {"fwd_mma", KF_FWD, KPIPE_MMASYNC, fmha_src_fwd_mma, "fmha_fwd_mma", fmha__cuda_fwd_accepts_mma,
     fmha__cuda_fwd_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_fwd_can_implement, fmha__cuda_fwd_launch_mma, 0},
    {"fwd_wgmma", KF_FWD, KPIPE_WGMMAWS, fmha_src_fwd_wgmma, "fmha_fwd_wgmma", fmha__cuda_fwd_accepts_wgmma,
     fmha__cuda_fwd_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_fwd_can_implement,
     fmha__cuda_fwd_launch_wgmma, 0},
    /* paged-KV attention (fwd_pagedkv) and ragged prefill over pages (batch_prefill): the
     * forward's kernels reading K/V by block table or CSR lists */
    {"pagedkv_mma", KF_PAGEDKV, KPIPE_MMASYNC, fmha_src_fwd_mma, "fmha_fwd_mma", fmha__cuda_paged_accepts_mma,
     fmha__cuda_fwd_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_fwd_can_implement, fmha__cuda_fwd_launch_mma, 0},
    {"pagedkv_wgmma", KF_PAGEDKV, KPIPE_WGMMAWS, fmha_src_fwd_wgmma, "fmha_fwd_wgmma", fmha__cuda_paged_accepts_wgmma,
     fmha__cuda_fwd_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_fwd_can_implement,
     fmha__cuda_fwd_launch_wgmma, 0},
    {"prefill_mma", KF_PREFILL, KPIPE_MMASYNC, fmha_src_fwd_mma, "fmha_fwd_mma", fmha__cuda_paged_accepts_mma,
     fmha__cuda_fwd_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_fwd_can_implement, fmha__cuda_fwd_launch_mma, 0},
    {"prefill_wgmma", KF_PREFILL, KPIPE_WGMMAWS, fmha_src_fwd_wgmma, "fmha_fwd_wgmma", fmha__cuda_paged_accepts_wgmma,
     fmha__cuda_fwd_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_fwd_can_implement,
     fmha__cuda_fwd_launch_wgmma, 0},
    /* split-KV decode: the decode kernel where a GQA group fits its row block, else the mma
     * forward with FMHA_SPLIT; then the combine (splitkv.c) */
    {"decode_mma", KF_SPLITKV, KPIPE_MMASYNC, fmha_src_decode_mma, "fmha_decode_mma", fmha__cuda_decode_accepts,
     fmha__cuda_splitkv_defines, fmha__cuda_fwd_threads, fmha__cuda_splitkv_workspace,
     fmha__cuda_splitkv_can_implement, fmha__cuda_decode_launch, 1},
    {"splitkv_mma", KF_SPLITKV, KPIPE_MMASYNC, fmha_src_fwd_mma, "fmha_fwd_mma", fmha__cuda_splitkv_accepts,
     fmha__cuda_splitkv_defines, fmha__cuda_fwd_threads, fmha__cuda_splitkv_workspace,
     fmha__cuda_splitkv_can_implement, fmha__cuda_splitkv_launch, 0},
    {"combine", KF_COMBINE, KPIPE_MMASYNC, fmha_src_combine, "fmha_combine", fmha__cuda_combine_accepts,
     fmha__cuda_combine_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_combine_can_implement,
     fmha__cuda_combine_launch, 1},
    /* appendkv: new keys (RoPE) and values into a contiguous or paged cache, q into q_rot */
    {"appendkv", KF_APPENDKV, KPIPE_MMASYNC, fmha_src_appendkv, "fmha_appendkv", fmha__cuda_appendkv_accepts,
     fmha__cuda_appendkv_defines, fmha__cuda_fwd_threads, NULL, fmha__cuda_appendkv_can_implement,
     fmha__cuda_appendkv_launch, 1},
    /* the backward's three stages (bwd.c): D and the dq accumulator's reset, the key-tile
     * kernel (dK, dV in registers, dQ added to the accumulator), dq and dsink */
    {"bwd_dot", KF_BWD_DOT_DO_O, KPIPE_MMASYNC, fmha_src_bwd_dot, "fmha_bwd_dot", fmha__cuda_bwd_dot_accepts,
     fmha__cuda_bwd_elementwise_defines, fmha__cuda_fwd_threads, fmha__cuda_bwd_dot_workspace,
     fmha__cuda_bwd_can_implement, fmha__cuda_bwd_dot_launch, 0},
    {"bwd_mma", KF_BWD_DQ_DK_DV, KPIPE_MMASYNC, fmha_src_bwd_mma, "fmha_bwd_mma", fmha__cuda_bwd_accepts_mma,
     fmha__cuda_bwd_defines, fmha__cuda_fwd_threads, fmha__cuda_bwd_workspace, fmha__cuda_bwd_can_implement,
     fmha__cuda_bwd_launch_mma, 0},
    {"bwd_wgmma", KF_BWD_DQ_DK_DV, KPIPE_WGMMAWS, fmha_src_bwd_wgmma, "fmha_bwd_wgmma", fmha__cuda_bwd_accepts_wgmma,
     fmha__cuda_bwd_defines, fmha__cuda_fwd_threads, fmha__cuda_bwd_workspace, fmha__cuda_bwd_can_implement,
     fmha__cuda_bwd_launch_wgmma, 0},
    {"bwd_convert", KF_BWD_CONVERT_DQ, KPIPE_MMASYNC, fmha_src_bwd_convert, "fmha_bwd_convert",
     fmha__cuda_bwd_convert_accepts, fmha__cuda_bwd_elementwise_defines, fmha__cuda_fwd_threads, NULL,
     fmha__cuda_bwd_can_implement, fmha__cuda_bwd_convert_launch, 0},
};
const int fmha__cuda_family_count = (int)(sizeof fmha__cuda_families / sizeof fmha__cuda_families[0]);

const cuda_family_t *fmha__cuda_family_of(const fmha_key_t *k)
{
    for (int i = 0; i < fmha__cuda_family_count; i++) {
        const cuda_family_t *f = &fmha__cuda_families[i];
        if ((int)f->family == k->family && (int)f->pipeline == k->pipeline && f->accepts(k)) return f;
    }
    return NULL;
}

int fmha__cuda_key_defines(const fmha_key_t *k, char defs[][FMHA_DEFINE_LEN], const char **ptrs)
{
    const cuda_family_t *f = fmha__cuda_family_of(k);
    if (!f) return -1;
    int n = f->defines(k, defs);
    for (int i = 0; i < n; i++) ptrs[i] = defs[i];
    return n;
}

int fmha__cuda_sm_of(karch_t arch)
{
    static const int sm_of[KA_COUNT_] = {0, 80, 86, 89, 90};
    return arch >= 0 && arch < KA_COUNT_ ? sm_of[arch] : 0;
}
