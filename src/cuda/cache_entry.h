/* SPDX-License-Identifier: MIT */
/*
 * cache_entry.h: one entry of the JIT's disk cache, and atomic file publication.
 *
 * An entry is a 64-byte header followed by the cubin. The header carries the entry's
 * identity and integrity: a magic and a format number, the cache key (the 64-bit hash
 * that also names the file) and the sm, the cubin's length and a checksum of it. Every
 * load checks all of them, so a file that a crash, a full disk, a copy of another entry or
 * another program left under the entry's name is told apart from an intact one and never
 * reaches the CUDA loader. The cache is a per-machine folder, so the header is in the
 * machine's byte order.
 *
 * Writers publish through a temporary file of their own in the same folder (mkstemp)
 * and rename: readers, and other processes or threads writing the same entry, see no file
 * or a whole one.
 */
#ifndef FMHA_CUDA_CACHE_ENTRY_H
#define FMHA_CUDA_CACHE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#define FMHA_CACHE_HEADER_BYTES 64
#define FMHA_CACHE_MAX_CUBIN (256u << 20) /* larger than any kernel; bounds what a bad header makes us read */

typedef enum {
    FMHA_CACHE_ENTRY_OK = 0,
    FMHA_CACHE_ENTRY_MISSING, /* no file: a plain miss */
    FMHA_CACHE_ENTRY_BAD,     /* a file that is not this key's intact entry; why says what is wrong */
} fmha_cache_entry_status_t;

/* 64-bit checksum of n bytes (not cryptographic: it detects damage, not tampering). */
uint64_t fmha__cache_checksum(const void *data, size_t n);

/* Check an entry held in memory against (key, sm). OK: *cubin points into bytes. */
fmha_cache_entry_status_t fmha__cache_entry_parse(const void *bytes, size_t n, uint64_t key, int sm,
                                                  const void **cubin, size_t *size, char *why, size_t why_len);

/* Read and check the entry at path. OK: *cubin is malloc'd (the caller frees it). A file
 * that cannot be opened is MISSING; one that cannot be read whole is BAD. */
fmha_cache_entry_status_t fmha__cache_entry_read(const char *path, uint64_t key, int sm, void **cubin, size_t *size,
                                                 char *why, size_t why_len);

/* Publish the entry for (key, sm) at path. 0 on success; -1 when the folder cannot be
 * made or written (the caller keeps its in-memory cubin: an unwritable cache only costs
 * the next process a compile). */
int fmha__cache_entry_write(const char *path, uint64_t key, int sm, const void *cubin, size_t size);

/* Publish any file atomically (the same temporary file and rename; folders made as
 * needed). 0 on success, -1 on failure (nothing is left behind). */
int fmha__cache_write_file(const char *path, const void *head, size_t head_size, const void *body, size_t body_size);

#endif /* FMHA_CUDA_CACHE_ENTRY_H */
