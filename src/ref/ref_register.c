/* ref_register.c: the CPU backend's kernels, registered as generic descriptors: each
 * runs every signature of its family that validation admits. */
#include <string.h>

#include "../core/registry.h"
#include "ref.h"

int fmha__ref_register(struct registry *r)
{
    kdesc_t d;
    memset(&d, 0, sizeof d);
    fmha__key_default(&d.key);
    d.key.family = KF_FWD;
    d.key.dtype = KD_FP32;
    d.key.arch = KA_CPU;
    d.key.pipeline = KPIPE_CPUREF;
    d.key.tile_m = 64, d.key.tile_n = 0, d.key.warps = 0, d.key.stages = 0;
    d.name = (char *)"cpu_ref_fwd";
    d.generic = 1;
    d.run = fmha__ref_fwd;
    d.workspace = fmha__ref_fwd_workspace;
    return fmha__registry_add(r, &d) < 0 ? -1 : 0;
}
