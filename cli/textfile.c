/* SPDX-License-Identifier: MIT */
/* textfile.c: see textfile.h. */
#include "textfile.h"

#include <stdio.h>
#include <stdlib.h>

char *textfile_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    const int failed = ferror(f);
    fclose(f);
    if (buf && failed) {
        free(buf);
        return NULL;
    }
    if (buf) buf[n] = '\0';
    return buf;
}
