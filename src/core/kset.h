/* SPDX-License-Identifier: MIT */
/*
 * kset.h: kernel sets (de-duplicated lists of kernel keys), enumeration over the arch
 * specs with rules and receipts, declarative JSON sets, and the filter language.
 */
#ifndef FMHA_CORE_KSET_H
#define FMHA_CORE_KSET_H

#include <stddef.h>

#include "key.h"

typedef struct kset {
    fmha_key_t *keys;
    char **names;
    size_t count, cap;
    size_t *slots; /* open-addressing index into keys, by key hash; SIZE_MAX = empty */
    size_t nslots;
} kset_t;

void fmha__kset_init(kset_t *s);
void fmha__kset_free(kset_t *s);
/* Add a key unless an equal one is there. Returns 1 added, 0 present, -1 out of memory. */
int fmha__kset_add(kset_t *s, const fmha_key_t *k);
/* Index of a key, or -1. */
long fmha__kset_find(const kset_t *s, const fmha_key_t *k);
int fmha__kset_merge(kset_t *dst, const kset_t *src);

/* Receipts: named profiles that select a subset of the valid instances. */
typedef enum receipt {
    RECEIPT_DEFAULT, RECEIPT_FLASH, RECEIPT_PYTORCH, RECEIPT_SERVING, RECEIPT_TRAINING, RECEIPT_FP8,
    RECEIPT_ALL, RECEIPT_COUNT_
} receipt_t;
extern const char *const fmha__receipt_names[RECEIPT_COUNT_];
int fmha__receipt_lookup(const char *name); /* -1 when unknown */

/* Does a valid key belong to a receipt? tile_rank is its tile's position among the
 * table's tiles that are valid on the arch (0 = preferred). */
int fmha__receipt_accepts(receipt_t r, const fmha_key_t *k, int tile_rank);

/* A compiled filter expression over key fields. */
typedef struct kfilter kfilter_t;
kfilter_t *fmha__filter_compile(const char *expr, char *why, size_t len);
int fmha__filter_eval(const kfilter_t *f, const fmha_key_t *k);
void fmha__filter_free(kfilter_t *f);

/* Whether keys of family fam vary in field f (one of its enumeration axes); the
 * signature fields outside them keep their defaults in every key of the family. */
int fmha__family_has_axis(kfamily_t fam, kfield_t f);

/* Enumerate every valid instance for an arch, keep those of the receipt that pass the
 * filter (may be NULL). Returns 0, or -1 with why. */
int fmha__enumerate(karch_t arch, receipt_t r, const kfilter_t *filter, kset_t *out, char *why, size_t len);

/* Expand a declarative JSON config (CK's {"variant": ..., "trait_config": {field:
 * {"values": [...]}}} allow-list form; a list of them or {"configs": [...]}) over the
 * arch's valid instances. Returns 0, or -1 with why. */
int fmha__kset_from_json(karch_t arch, const char *json_text, kset_t *out, char *why, size_t len);

#endif /* FMHA_CORE_KSET_H */
