/* SPDX-License-Identifier: MIT */
/* cache_entry.c: see cache_entry.h. */
#include "cache_entry.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmha/fmha.h"

static const char MAGIC[8] = {'f', 'm', 'h', 'a', 'c', 'u', 'b', 0};
enum { FORMAT = 1 };

/* The header, FMHA_CACHE_HEADER_BYTES long. version is the library's, for people who look
 * at a cache folder; the key already depends on it. */
typedef struct {
    char magic[8];
    uint32_t format, sm;
    uint64_t key, length, checksum;
    char version[24];
} header_t;
_Static_assert(sizeof(header_t) == FMHA_CACHE_HEADER_BYTES, "the header is 64 bytes");

static uint64_t rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }

/* Eight bytes per step (a cubin is read at every cached plan creation, so speed matters
 * more than hash quality), the tail a byte at a time, the length folded in last. */
uint64_t fmha__cache_checksum(const void *data, size_t n)
{
    const unsigned char *p = data;
    const uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xc2b2ae3d27d4eb4full;
    uint64_t h = 0x27d4eb2f165667c5ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = rotl(h ^ (w * k1), 31) * k2;
    }
    for (; i < n; i++) h = rotl(h ^ (p[i] * k1), 23) * k2;
    h ^= (uint64_t)n;
    h ^= h >> 33;
    h *= k1;
    h ^= h >> 29;
    return h;
}

fmha_cache_entry_status_t fmha__cache_entry_parse(const void *bytes, size_t n, uint64_t key, int sm,
                                                  const void **cubin, size_t *size, char *why, size_t why_len)
{
    header_t h;
    if (n < sizeof h) {
        snprintf(why, why_len, "truncated: %zu bytes, shorter than the %d-byte header", n, FMHA_CACHE_HEADER_BYTES);
        return FMHA_CACHE_ENTRY_BAD;
    }
    memcpy(&h, bytes, sizeof h);
    if (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0) {
        snprintf(why, why_len, "not an fmha cache entry (its first bytes are not the magic \"fmhacub\")");
        return FMHA_CACHE_ENTRY_BAD;
    }
    if (h.format != FORMAT) {
        snprintf(why, why_len, "entry format %u; this library reads format %d", h.format, FORMAT);
        return FMHA_CACHE_ENTRY_BAD;
    }
    if (h.key != key || h.sm != (uint32_t)sm) {
        snprintf(why, why_len,
                 "holds the kernel of key %016llx for sm%u, not of key %016llx for sm%d (another entry copied or renamed "
                 "over it)",
                 (unsigned long long)h.key, h.sm, (unsigned long long)key, sm);
        return FMHA_CACHE_ENTRY_BAD;
    }
    const size_t body = n - sizeof h;
    if (h.length != body) {
        snprintf(why, why_len, "%s: the header announces %llu bytes of cubin, the file holds %zu",
                 h.length > body ? "truncated" : "trailing bytes", (unsigned long long)h.length, body);
        return FMHA_CACHE_ENTRY_BAD;
    }
    const unsigned char *payload = (const unsigned char *)bytes + sizeof h;
    const uint64_t sum = fmha__cache_checksum(payload, body);
    if (sum != h.checksum) {
        snprintf(why, why_len, "the cubin's checksum is %016llx, the header says %016llx (changed after it was written)",
                 (unsigned long long)sum, (unsigned long long)h.checksum);
        return FMHA_CACHE_ENTRY_BAD;
    }
    *cubin = payload;
    *size = body;
    return FMHA_CACHE_ENTRY_OK;
}

fmha_cache_entry_status_t fmha__cache_entry_read(const char *path, uint64_t key, int sm, void **cubin, size_t *size,
                                                 char *why, size_t why_len)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        return FMHA_CACHE_ENTRY_MISSING;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, why_len, "not a regular file");
        return FMHA_CACHE_ENTRY_BAD;
    }
    if ((uint64_t)st.st_size > (uint64_t)FMHA_CACHE_HEADER_BYTES + FMHA_CACHE_MAX_CUBIN) {
        close(fd);
        snprintf(why, why_len, "%lld bytes, more than any kernel (limit %u MiB)", (long long)st.st_size,
                 FMHA_CACHE_MAX_CUBIN >> 20);
        return FMHA_CACHE_ENTRY_BAD;
    }
    const size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        snprintf(why, why_len, "out of memory reading %zu bytes", n);
        return FMHA_CACHE_ENTRY_BAD;
    }
    size_t got = 0;
    while (got < n) {
        const ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    const void *payload;
    size_t body;
    fmha_cache_entry_status_t st_entry = fmha__cache_entry_parse(buf, got, key, sm, &payload, &body, why, why_len);
    if (st_entry != FMHA_CACHE_ENTRY_OK) {
        free(buf);
        return st_entry;
    }
    memmove(buf, payload, body); /* the caller gets the cubin alone, in the buffer it frees */
    *cubin = buf;
    *size = body;
    return FMHA_CACHE_ENTRY_OK;
}

static int mkdirs(const char *path)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

static int write_all(int fd, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

int fmha__cache_write_file(const char *path, const void *head, size_t head_size, const void *body, size_t body_size)
{
    char dir[1024], tmp[1100];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return -1;
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (slash && mkdirs(dir)) return -1;
    /* a name of its own: threads and processes writing the same entry never share a file */
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) return -1;
    const int fd = mkstemp(tmp);
    if (fd < 0) return -1;
    int ok = fchmod(fd, 0644) == 0;
    ok = ok && (!head_size || write_all(fd, head, head_size) == 0);
    ok = ok && (!body_size || write_all(fd, body, body_size) == 0);
    ok &= close(fd) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int fmha__cache_entry_write(const char *path, uint64_t key, int sm, const void *cubin, size_t size)
{
    header_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    h.format = FORMAT;
    h.sm = (uint32_t)sm;
    h.key = key;
    h.length = size;
    h.checksum = fmha__cache_checksum(cubin, size);
    snprintf(h.version, sizeof h.version, "%s", fmha_version_string());
    return fmha__cache_write_file(path, &h, sizeof h, cubin, size);
}
