/* SPDX-License-Identifier: MIT */
/*
 * test_jit_cache.c: the JIT's disk cache heals itself (src/cuda/cache_entry.h). Entries
 * corrupted, truncated, swapped with another entry, replaced by random bytes or given
 * trailing bytes are each detected, reported under FMHA_DEBUG naming the file, and
 * rebuilt; with FMHA_JIT=off they are refused with a message naming the file and the
 * defect. An unwritable cache folder falls back to compiling in memory. Several processes
 * compiling, replacing and reading the same entries at once never see a torn file and
 * leave no temporary file behind.
 *
 * Needs NVRTC (no GPU): tiny kernels are compiled through fmha__jit_cubin. Without NVRTC
 * it exits 77, which ctest reports as skipped.
 */
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/cuda/cache_entry.h"
#include "../../src/cuda/jit.h"
#include "testing.h"

static char dir[] = "/tmp/fmha_cache_test_XXXXXX";

/* Tiny kernels, one per define value: quick to compile, each its own entry. */
static const char *SOURCE = "extern \"C\" __global__ void k(int *p) { p[threadIdx.x] = VALUE * threadIdx.x; }\n";

typedef struct {
    char define[32];
    const char *defs[1];
    char path[1024];
} kernel_t;

static void kernel_init(kernel_t *k, int value)
{
    snprintf(k->define, sizeof k->define, "VALUE=%d", value);
    k->defs[0] = k->define;
    fmha__jit_cache_path(SOURCE, k->defs, 1, 80, k->path, sizeof k->path);
}

/* fmha__jit_cubin on k: the status, whether it came from the cache, and what it wrote to
 * stderr (captured through a temporary file). */
static fmha_status_t jit(const kernel_t *k, int *from_cache, char *err, size_t err_len, char *stderr_text, size_t len)
{
    char log[64];
    snprintf(log, sizeof log, "%s/stderr.txt", dir);
    fflush(stderr);
    const int saved = dup(2), fd = open(log, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 2);
    close(fd);
    void *cubin = NULL;
    size_t size = 0;
    err[0] = '\0';
    fmha_status_t st = fmha__jit_cubin(SOURCE, k->defs, 1, 80, &cubin, &size, from_cache, err, err_len);
    if (st == FMHA_STATUS_SUCCESS && size == 0) st = FMHA_STATUS_INTERNAL;
    free(cubin);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    stderr_text[0] = '\0';
    FILE *f = fopen(log, "r");
    if (f) {
        const size_t n = fread(stderr_text, 1, len - 1, f);
        stderr_text[n] = '\0';
        fclose(f);
    }
    return st;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int read_file(const char *path, unsigned char **data, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    const long size = file_size(path);
    *data = malloc(size > 0 ? (size_t)size : 1);
    *n = fread(*data, 1, (size_t)(size > 0 ? size : 0), f);
    fclose(f);
    return 0;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* The entry's file is intact: the next lookup comes from the cache with nothing said. */
static void check_intact(const kernel_t *k)
{
    int cached = -1;
    char err[1024], said[2048];
    CHECK_STATUS(jit(k, &cached, err, sizeof err, said, sizeof said), FMHA_STATUS_SUCCESS);
    CHECK(cached == 1);
    CHECK(said[0] == '\0');
}

/* Damage k's entry with `damage`, then: FMHA_JIT=off refuses it naming the file and
 * `defect`, leaving the file as it is; a normal lookup reports it once (FMHA_DEBUG) and
 * compiles again; the entry is intact afterwards. */
static void check_detected_and_repaired(const kernel_t *k, void (*damage)(const kernel_t *), const char *defect)
{
    damage(k);
    const long damaged_size = file_size(k->path);
    int cached = -1;
    char err[2048], said[2048];
    setenv("FMHA_JIT", "off", 1);
    CHECK_STATUS(jit(k, &cached, err, sizeof err, said, sizeof said), FMHA_STATUS_NOT_COMPILED);
    CHECK_CONTAINS(err, k->path);
    CHECK_CONTAINS(err, "unusable");
    CHECK_CONTAINS(err, defect);
    CHECK(file_size(k->path) == damaged_size);
    unsetenv("FMHA_JIT");
    CHECK_STATUS(jit(k, &cached, err, sizeof err, said, sizeof said), FMHA_STATUS_SUCCESS);
    CHECK(cached == 0);
    CHECK_CONTAINS(said, k->path);
    CHECK_CONTAINS(said, defect);
    CHECK_CONTAINS(said, "compiling the kernel again");
    check_intact(k);
}

static kernel_t A, B;

static void flip_a_cubin_byte(const kernel_t *k)
{
    unsigned char *d;
    size_t n;
    if (read_file(k->path, &d, &n)) return;
    d[n / 2 + FMHA_CACHE_HEADER_BYTES / 2] ^= 0x40;
    write_file(k->path, d, n);
    free(d);
}
static void truncate_to_half(const kernel_t *k) { CHECK(truncate(k->path, file_size(k->path) / 2) == 0); }
static void truncate_inside_header(const kernel_t *k) { CHECK(truncate(k->path, 17) == 0); }
static void empty_file(const kernel_t *k) { CHECK(truncate(k->path, 0) == 0); }
static void append_bytes(const kernel_t *k)
{
    FILE *f = fopen(k->path, "ab");
    if (!f) return;
    fputs("trailing", f);
    fclose(f);
}
static void random_100_bytes(const kernel_t *k)
{
    unsigned char d[100];
    uint32_t x = 12345;
    for (int i = 0; i < 100; i++) d[i] = (unsigned char)((x = x * 1664525u + 1013904223u) >> 24);
    write_file(k->path, d, sizeof d);
}
static void swap_with_b(const kernel_t *k) /* B's intact entry under A's name */
{
    unsigned char *d;
    size_t n;
    if (read_file(B.path, &d, &n)) return;
    write_file(k->path, d, n);
    free(d);
}
static void other_format(const kernel_t *k)
{
    unsigned char *d;
    size_t n;
    if (read_file(k->path, &d, &n)) return;
    d[8] = 7; /* the format number follows the 8-byte magic */
    write_file(k->path, d, n);
    free(d);
}
static void header_announces_more(const kernel_t *k) /* a length field past the file's end */
{
    unsigned char *d;
    size_t n;
    if (read_file(k->path, &d, &n)) return;
    d[24 + 7] = 0x10; /* the length field's top byte: 2^60 more bytes than there are */
    write_file(k->path, d, n);
    free(d);
}

static void test_first_compile_then_cached(void)
{
    int cached = -1;
    char err[1024], said[1024];
    CHECK_STATUS(jit(&A, &cached, err, sizeof err, said, sizeof said), FMHA_STATUS_SUCCESS);
    CHECK(cached == 0);
    CHECK(file_size(A.path) > FMHA_CACHE_HEADER_BYTES);
    check_intact(&A);
    CHECK_STATUS(jit(&B, &cached, err, sizeof err, said, sizeof said), FMHA_STATUS_SUCCESS);
    CHECK(cached == 0);
    check_intact(&B);
}

static void test_damage_is_detected_and_repaired(void)
{
    check_detected_and_repaired(&A, flip_a_cubin_byte, "checksum");
    check_detected_and_repaired(&A, truncate_to_half, "truncated");
    check_detected_and_repaired(&A, truncate_inside_header, "shorter than the 64-byte header");
    check_detected_and_repaired(&A, empty_file, "truncated: 0 bytes");
    check_detected_and_repaired(&A, append_bytes, "trailing bytes");
    check_detected_and_repaired(&A, random_100_bytes, "not an fmha cache entry");
    check_detected_and_repaired(&A, swap_with_b, "another entry copied or renamed over it");
    check_detected_and_repaired(&A, other_format, "entry format 7");
    check_detected_and_repaired(&A, header_announces_more, "truncated: the header announces");
    check_intact(&B); /* B's entry was only read */
}

/* A folder in the way of the cache: compile in memory, every time, and succeed. */
static void test_unwritable_cache_compiles_in_memory(void)
{
    char blocker[128], cache[160];
    snprintf(blocker, sizeof blocker, "%s/a_file", dir);
    write_file(blocker, "x", 1);
    snprintf(cache, sizeof cache, "%s/sub", blocker); /* below a regular file: mkdir fails */
    setenv("FMHA_CACHE_DIR", cache, 1);
    kernel_t k;
    kernel_init(&k, 7);
    for (int i = 0; i < 2; i++) {
        int cached = -1;
        char err[1024], said[1024];
        CHECK_STATUS(jit(&k, &cached, err, sizeof err, said, sizeof said), FMHA_STATUS_SUCCESS);
        CHECK(cached == 0);
        CHECK(said[0] == '\0');
    }
    CHECK(file_size(k.path) < 0);
    setenv("FMHA_CACHE_DIR", dir, 1);
}

/* Processes that publish the same entries over and over (two through fmha__jit_cubin
 * after removing the entry, two with the cubin in hand, as fast as they can) while two
 * others read them: every read finds no file or an intact entry, every compile succeeds,
 * and no temporary file is left. */
enum { WRITERS = 4, READERS = 2, KERNELS = 3, PUBLISHES = 400, READS = 3000 };

static uint64_t key_of(const kernel_t *k) { return strtoull(strrchr(k->path, '/') + 1, NULL, 16); }

static int writer(int id, const kernel_t *ks, void *const *cubins, const size_t *sizes)
{
    int bad = 0;
    for (int r = 0; r < PUBLISHES; r++)
        for (int i = 0; i < KERNELS; i++) {
            const kernel_t *k = &ks[(i + id) % KERNELS];
            if (id < 2 && r % 100 == 0) { /* the real path: a miss, a compile, a publication */
                unlink(k->path);
                void *cubin = NULL;
                size_t size = 0;
                int cached;
                char err[1024];
                if (fmha__jit_cubin(SOURCE, k->defs, 1, 80, &cubin, &size, &cached, err, sizeof err) || !size) bad++;
                free(cubin);
            } else if (fmha__cache_entry_write(k->path, key_of(k), 80, cubins[(i + id) % KERNELS],
                                               sizes[(i + id) % KERNELS])) {
                bad++;
            }
        }
    return bad;
}

static int reader(int id, const kernel_t *ks)
{
    int bad = 0, intact = 0;
    for (int r = 0; r < READS; r++) {
        const kernel_t *k = &ks[r % KERNELS];
        void *cubin = NULL;
        size_t size = 0;
        char why[512];
        const fmha_cache_entry_status_t st = fmha__cache_entry_read(k->path, key_of(k), 80, &cubin, &size, why, sizeof why);
        if (st == FMHA_CACHE_ENTRY_BAD && bad++ < 3) printf("  reader %d: %s: %s\n", id, k->path, why);
        intact += st == FMHA_CACHE_ENTRY_OK;
        free(cubin);
    }
    if (!intact) printf("  reader %d never found an intact entry\n", id);
    return bad || !intact;
}

static void test_processes_share_one_cache(void)
{
    kernel_t ks[KERNELS];
    void *cubins[KERNELS];
    size_t sizes[KERNELS];
    for (int i = 0; i < KERNELS; i++) {
        kernel_init(&ks[i], 100 + i);
        int cached;
        char err[1024];
        cubins[i] = NULL;
        CHECK_STATUS(fmha__jit_cubin(SOURCE, ks[i].defs, 1, 80, &cubins[i], &sizes[i], &cached, err, sizeof err),
                     FMHA_STATUS_SUCCESS);
    }
    int start[2];
    CHECK(pipe(start) == 0);
    fflush(stdout);
    pid_t pids[WRITERS + READERS];
    for (int i = 0; i < WRITERS + READERS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(start[1]);
            char c;
            if (read(start[0], &c, 1) != 1) _exit(2); /* all start together */
            const int rc = i < WRITERS ? writer(i, ks, cubins, sizes) != 0 : reader(i - WRITERS, ks);
            fflush(stdout);
            _exit(rc);
        }
    }
    close(start[0]);
    char go[WRITERS + READERS];
    memset(go, 'g', sizeof go);
    CHECK(write(start[1], go, sizeof go) == (ssize_t)sizeof go);
    close(start[1]);
    for (int i = 0; i < WRITERS + READERS; i++) {
        int status = 0;
        CHECK(pids[i] > 0 && waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int i = 0; i < KERNELS; i++) {
        check_intact(&ks[i]);
        free(cubins[i]);
    }
    char pattern[128];
    snprintf(pattern, sizeof pattern, "%s/*.tmp.*", dir);
    glob_t g;
    const int rc = glob(pattern, 0, NULL, &g);
    CHECK(rc == GLOB_NOMATCH);
    if (rc == 0) {
        printf("  left behind: %s (and %zu more)\n", g.gl_pathv[0], g.gl_pathc - 1);
        globfree(&g);
    }
}

static void test_checksum_sees_every_byte(void)
{
    unsigned char d[67];
    for (int i = 0; i < 67; i++) d[i] = (unsigned char)i;
    const uint64_t h = fmha__cache_checksum(d, sizeof d);
    for (int i = 0; i < 67; i++)
        for (int bit = 0; bit < 8; bit++) {
            d[i] ^= (unsigned char)(1 << bit);
            CHECK(fmha__cache_checksum(d, sizeof d) != h);
            d[i] ^= (unsigned char)(1 << bit);
        }
    CHECK(fmha__cache_checksum(d, 66) != h);
}

int main(void)
{
    const char *why;
    if (!fmha__nvrtc_available(&why)) {
        printf("SKIP (exit 77): %s\n", why);
        return 77;
    }
    if (!mkdtemp(dir)) return 1;
    setenv("FMHA_CACHE_DIR", dir, 1);
    setenv("FMHA_DEBUG", "1", 1);
    unsetenv("FMHA_JIT");
    kernel_init(&A, 1);
    kernel_init(&B, 2);
    RUN(test_checksum_sees_every_byte);
    RUN(test_first_compile_then_cached);
    RUN(test_damage_is_detected_and_repaired);
    RUN(test_unwritable_cache_compiles_in_memory);
    RUN(test_processes_share_one_cache);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("  could not remove %s\n", dir);
    TEST_MAIN_END();
}
