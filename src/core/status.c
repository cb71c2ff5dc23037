/* SPDX-License-Identifier: MIT */
/* status.c: names and messages of status codes, generated from FMHA_STATUS_MAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *fmha_status_name(fmha_status_t s)
{
    switch (s) {
#define X(name, value, msg) \
    case FMHA_STATUS_##name: return "FMHA_STATUS_" #name;
        FMHA_STATUS_MAP(X)
#undef X
    }
    return "FMHA_STATUS_?";
}

const char *fmha_status_string(fmha_status_t s)
{
    switch (s) {
#define X(name, value, msg) \
    case FMHA_STATUS_##name: return msg;
        FMHA_STATUS_MAP(X)
#undef X
    }
    return "unknown status";
}

fmha_status_t fmha__vfail(char *err, fmha_status_t status, const char *fmt, va_list ap)
{
    if (err) vsnprintf(err, FMHA_ERR_LEN, fmt, ap);
    return status;
}

fmha_status_t fmha__fail(char *err, fmha_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fmha__vfail(err, status, fmt, ap);
    va_end(ap);
    return status;
}

int fmha__debug_enabled(void)
{
    const char *debug = getenv("FMHA_DEBUG");
    return debug && *debug && strcmp(debug, "0") != 0;
}

void fmha__copy_msg(char *dst, size_t len, const char *src)
{
    if (!dst || len == 0) return;
    size_t n = strlen(src);
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void fmha__sb_printf(strbuf_t *sb, const char *fmt, ...)
{
    if (sb->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = sb->cap - sb->len;
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < room) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < sb->len + (size_t)n + 1) cap *= 2;
        char *b = realloc(sb->buf, cap);
        if (!b) {
            sb->oom = 1;
            return;
        }
        sb->buf = b;
        sb->cap = cap;
    }
}
