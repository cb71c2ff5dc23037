/* SPDX-License-Identifier: MIT */
/*
 * fuzz_common.h: helpers for the libFuzzer harnesses (tests/fuzz/fuzz_*.c). Each harness
 * defines LLVMFuzzerTestOneInput over one parser or API surface; tests/fuzz/corpus/<name>
 * holds its seeds. A crash, a sanitizer report, a leak or a timeout is a finding.
 */
#ifndef FMHA_FUZZ_COMMON_H
#define FMHA_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The input as a NUL-terminated string (a copy; the caller frees it). */
static inline char *fuzz_string(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

/* Consume bytes from the input as small integers, for API call sequences. */
typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_stream_t;

static inline int fuzz_left(const fuzz_stream_t *s) { return s->n > 0; }
static inline uint8_t fuzz_u8(fuzz_stream_t *s)
{
    if (!s->n) return 0;
    s->n--;
    return *s->p++;
}
static inline int64_t fuzz_i64(fuzz_stream_t *s) /* mostly small, sometimes extreme */
{
    const uint8_t kind = fuzz_u8(s);
    if (kind < 200) return (int64_t)fuzz_u8(s) - 8;
    int64_t v = 0;
    for (int i = 0; i < 8; i++) v = (int64_t)((uint64_t)v << 8 | fuzz_u8(s));
    return v;
}

#endif /* FMHA_FUZZ_COMMON_H */
