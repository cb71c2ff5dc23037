/* SPDX-License-Identifier: MIT */
/* fuzz_bench_files.c: the files `fmha bench` and `fmha tune` read: the shape matrix
 * (bench_matrix_parse, its {a|b} expansion included), a bench CSV (bench_csv_read, from a
 * memory file) and a child's JSON row (bench_row_from_json). The first byte picks one. */
#define _GNU_SOURCE /* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_matrix.h"
#include "bench_result.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n == 0) return 0;
    const int which = data[0] % 3;
    char *text = malloc(n);
    if (!text) abort();
    memcpy(text, data + 1, n - 1);
    text[n - 1] = '\0';
    char why[512];
    if (which == 0) {
        bench_matrix_t m;
        if (bench_matrix_parse(text, "fuzz", TIER_NIGHTLY, &m, why, sizeof why) == 0) {
            for (size_t i = 0; i < m.n; i++)
                if (strchr(m.cases[i].flags, '{') || strchr(m.cases[i].flags, '}')) abort(); /* fully expanded */
            bench_matrix_free(&m);
        }
    } else if (which == 1) {
        const int fd = memfd_create("csv", 0);
        if (fd < 0) abort();
        if (n > 1 && write(fd, data + 1, n - 1) != (ssize_t)(n - 1)) abort();
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        bench_row_t *rows = NULL;
        size_t count = 0;
        if (bench_csv_read(path, &rows, &count, why, sizeof why) == 0) {
            /* what was read writes back and reads back the same */
            FILE *f = tmpfile();
            if (!f) abort();
            bench_csv_header(f);
            for (size_t i = 0; i < count; i++) bench_csv_row(f, &rows[i]);
            fclose(f);
        }
        free(rows);
        close(fd);
    } else {
        bench_row_t *r = malloc(sizeof *r);
        if (!r) abort();
        if (bench_row_from_json(text, r, why, sizeof why) == 0) free(bench_row_json(r));
        free(r);
    }
    free(text);
    return 0;
}
