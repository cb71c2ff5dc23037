/* ref_register.c: the CPU backend's kernels, registered as generic descriptors: each
 * runs every signature of its kernel family that validation admits. */
#include <string.h>

#include "../core/registry.h"
#include "ref.h"

static const struct {
    const char *name;
    kfamily_t family;
    fmha_stage_fn run;
    size_t (*workspace)(const fmha_problem_t *p, int threads);
} CPU_KERNELS[] = {
    {"cpu_ref_fwd", KF_FWD, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_splitkv", KF_SPLITKV, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_combine", KF_COMBINE, fmha__ref_combine, NULL},
    {"cpu_ref_pagedkv", KF_PAGEDKV, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_appendkv", KF_APPENDKV, fmha__ref_appendkv, fmha__ref_appendkv_workspace},
    {"cpu_ref_batch_prefill", KF_PREFILL, fmha__ref_attn, fmha__ref_attn_workspace},
    {"cpu_ref_bwd_dot_do_o", KF_BWD_DOT_DO_O, fmha__ref_bwd_dot, fmha__ref_bwd_dot_workspace},
    {"cpu_ref_bwd_dq_dk_dv", KF_BWD_DQ_DK_DV, fmha__ref_bwd_main, fmha__ref_bwd_main_workspace},
    {"cpu_ref_bwd_convert_dq", KF_BWD_CONVERT_DQ, fmha__ref_bwd_convert, NULL},
};

int fmha__ref_register(struct registry *r)
{
    for (size_t i = 0; i < sizeof CPU_KERNELS / sizeof CPU_KERNELS[0]; i++) {
        kdesc_t d;
        memset(&d, 0, sizeof d);
        fmha__key_default(&d.key);
        d.key.family = CPU_KERNELS[i].family;
        d.key.dtype = KD_FP32;
        d.key.arch = KA_CPU;
        d.key.pipeline = KPIPE_CPUREF;
        d.key.tile_m = 64, d.key.tile_n = 0, d.key.warps = 0, d.key.stages = 0;
        d.name = (char *)CPU_KERNELS[i].name;
        d.generic = 1;
        d.run = CPU_KERNELS[i].run;
        d.workspace = CPU_KERNELS[i].workspace;
        if (fmha__registry_add(r, &d) < 0) return -1;
    }
    return 0;
}
