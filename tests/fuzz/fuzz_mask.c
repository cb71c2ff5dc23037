/* SPDX-License-Identifier: MIT */
/* fuzz_mask.c: the mask grammar (fmha_mask_parse, fmha_problem_set_mask) and, for a mask
 * that parses, the visibility functions at extreme sizes. */
#include "fmha/fmha.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = fuzz_string(data, n);
    fmha_mask_t m;
    char why[512];
    if (fmha_mask_parse(text, &m, why, sizeof why) == FMHA_STATUS_SUCCESS) {
        const int64_t sizes[4] = {1, 7, 4096, (int64_t)1 << 40};
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                (void)fmha_mask_visible_pairs(&m, sizes[a], sizes[b]);
                (void)fmha_mask_visible(&m, sizes[a], sizes[b], sizes[a] - 1, 0);
            }
    } else if (!why[0]) {
        abort(); /* a refusal must say why */
    }
    fmha_problem_t *p = NULL;
    if (fmha_problem_create(&p) == FMHA_STATUS_SUCCESS) {
        (void)fmha_problem_set_mask(p, text);
        fmha_problem_destroy(p);
    }
    free(text);
    return 0;
}
