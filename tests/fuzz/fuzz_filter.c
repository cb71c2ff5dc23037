/* SPDX-License-Identifier: MIT */
/* fuzz_filter.c: the kernel filter language (fmha__filter_compile), evaluated on keys of
 * every family of the sm90 catalogue. */
#include "../../src/core/kset.h"
#include "fuzz_common.h"

static kset_t keys;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char why[256];
    fmha__kset_init(&keys);
    if (fmha__enumerate(KA_SM90, (receipt_t)fmha__receipt_lookup("all"), NULL, &keys, why, sizeof why)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = fuzz_string(data, n);
    char why[512] = "";
    kfilter_t *f = fmha__filter_compile(text, why, sizeof why);
    if (f) {
        for (size_t i = 0; i < keys.count; i += 1 + keys.count / 97) (void)fmha__filter_eval(f, &keys.keys[i]);
        fmha__filter_free(f);
    } else if (!why[0]) {
        abort(); /* a refusal must say why */
    }
    free(text);
    return 0;
}
