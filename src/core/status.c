/* status.c: names and messages of status codes, generated from FMHA_STATUS_MAP. */
#include <stdio.h>
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

void fmha__copy_msg(char *dst, size_t len, const char *src)
{
    if (!dst || len == 0) return;
    size_t n = strlen(src);
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}
