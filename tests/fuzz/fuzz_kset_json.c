/* SPDX-License-Identifier: MIT */
/* fuzz_kset_json.c: declarative kernel-set JSON (fmha_kernel_set_from_json) and kernel
 * names (fmha_kernel_name_parse), then registration of what parsed on a context. */
#include "fmha/fmha.h"
#include "fuzz_common.h"

static fmha_context_t *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return fmha_context_create_virtual(&ctx, "sm90", 0) == FMHA_STATUS_SUCCESS ? 0 : (abort(), 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = fuzz_string(data, n);
    char why[512] = "";
    fmha_kernel_set_t *set = NULL;
    const char *arch = n && data[0] & 1 ? "sm80" : "sm90";
    if (fmha_kernel_set_from_json(arch, text, &set, why, sizeof why) == FMHA_STATUS_SUCCESS) {
        for (size_t i = 0; i < fmha_kernel_set_count(set) && i < 8; i++) {
            char key[2048];
            (void)fmha_kernel_name_parse(fmha_kernel_set_name(set, i), key, sizeof key, why, sizeof why);
        }
        (void)fmha_context_register(ctx, set, 1);
        fmha_kernel_set_destroy(set);
    } else if (!why[0]) {
        abort();
    }
    char key[2048];
    (void)fmha_kernel_name_parse(text, key, sizeof key, why, sizeof why);
    free(text);
    return 0;
}
