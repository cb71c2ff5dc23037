/* SPDX-License-Identifier: MIT */
/* fuzz_cache_entry.c: the kernel cache's entry check (fmha__cache_entry_parse). The key
 * and sm are taken from the input's own header half of the time, so the length and
 * checksum checks behind the identity check are reached. */
#include "../../src/cuda/cache_entry.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    uint64_t key = 0x0123456789abcdefull;
    uint32_t sm = 90;
    if (n >= FMHA_CACHE_HEADER_BYTES && data[n - 1] & 1) {
        memcpy(&sm, data + 12, 4);
        memcpy(&key, data + 16, 8);
    }
    const void *cubin;
    size_t size;
    char why[512] = "";
    if (fmha__cache_entry_parse(data, n, key, (int)sm, &cubin, &size, why, sizeof why) == FMHA_CACHE_ENTRY_OK) {
        if ((const uint8_t *)cubin + size != data + n) abort(); /* the cubin is the rest of the entry */
    } else if (!why[0]) {
        abort();
    }
    return 0;
}
