/* SPDX-License-Identifier: MIT */
/*
 * key.h: the kernel key = signature (what a kernel computes) + algorithm (how). Every
 * field is declared once in FMHA_KEY_FIELDS; the struct, the procedural name and its
 * parser, equality, hashing and the JSON form are all generated from that list, so
 * they cannot drift apart.
 *
 * Name: "fmha" followed by one token per field in list order, joined by '_'. A field
 * at its default is left out when the field is optional (so names stay short); the
 * parser walks the fields in the same order, so the name is a bijection of the key.
 *   fmha_fwd_bf16_hq128_hv128_causal_lse_sm90_mmasync_m128_n64_w4_s2
 */
#ifndef FMHA_CORE_KEY_H
#define FMHA_CORE_KEY_H

#include <stddef.h>
#include <stdint.h>

/* Enumerations of key fields. The string tables in key.c follow the same order. */
typedef enum kfamily {
    KF_FWD, KF_SPLITKV, KF_COMBINE, KF_PAGEDKV, KF_APPENDKV, KF_PREFILL,
    KF_BWD_DOT_DO_O, KF_BWD_DQ_DK_DV, KF_BWD_CONVERT_DQ, KF_COUNT_
} kfamily_t;
typedef enum kdtype { KD_FP16, KD_BF16, KD_FP32, KD_FP8, KD_COUNT_ } kdtype_t;
typedef enum kmode { KM_BATCH, KM_GROUP, KM_COUNT_ } kmode_t;
typedef enum kmask { KMASK_NONE, KMASK_CAUSAL, KMASK_WINDOW, KMASK_COUNT_ } kmask_t;
typedef enum kbias { KB_NONE, KB_ELEMENTWISE, KB_ALIBI, KB_COUNT_ } kbias_t;
typedef enum kpaged { KP_NONE, KP_VLLM, KP_CSR, KP_COUNT_ } kpaged_t;
typedef enum krope { KR_NONE, KR_INTERLEAVED, KR_HALF, KR_COUNT_ } krope_t;
typedef enum karch { KA_CPU, KA_SM80, KA_SM86, KA_SM89, KA_SM90, KA_COUNT_ } karch_t;
typedef enum kpipe { KPIPE_CPUREF, KPIPE_MMASYNC, KPIPE_WGMMAWS, KPIPE_COUNT_ } kpipe_t;

/*
 * X(field, kind, table, prefix, default, optional)
 *   kind ENUM: token = prefix + table[value];  INT: token = prefix + decimal;
 *   BOOL: token = prefix when 1, nothing when 0.  optional: left out of the name at the
 *   default value.
 */
#define FMHA_KEY_SIGNATURE(X)                                      \
    X(family, ENUM, FAMILY, "", KF_FWD, 0)                         \
    X(dtype, ENUM, DTYPE, "", KD_FP16, 0)                          \
    X(hdim_qk, INT, NONE, "hq", 128, 0)                            \
    X(hdim_v, INT, NONE, "hv", 128, 0)                             \
    X(mode, ENUM, MODE, "", KM_BATCH, 1)                           \
    X(mask, ENUM, MASK, "", KMASK_NONE, 1)                         \
    X(bias, ENUM, BIAS, "", KB_NONE, 1)                            \
    X(lse, BOOL, NONE, "lse", 0, 1)                                \
    X(dropout, BOOL, NONE, "dropout", 0, 1)                        \
    X(softcap, BOOL, NONE, "softcap", 0, 1)                        \
    X(sink, BOOL, NONE, "sink", 0, 1)                              \
    X(paged, ENUM, PAGED, "page", KP_NONE, 1)                      \
    X(rope, ENUM, ROPE, "rope", KR_NONE, 1)                        \
    X(deterministic, BOOL, NONE, "det", 0, 1)                      \
    X(dbias, BOOL, NONE, "dbias", 0, 1)

#define FMHA_KEY_ALGORITHM(X)                                      \
    X(arch, ENUM, ARCH, "", KA_SM80, 0)                            \
    X(pipeline, ENUM, PIPE, "", KPIPE_MMASYNC, 0)                  \
    X(tile_m, INT, NONE, "m", 128, 0)                              \
    X(tile_n, INT, NONE, "n", 64, 0)                               \
    X(warps, INT, NONE, "w", 4, 0)                                 \
    X(stages, INT, NONE, "s", 2, 0)                                \
    X(even_k, BOOL, NONE, "evenk", 0, 1)                           \
    X(max_splits_log2, INT, NONE, "sp", 0, 1)

#define FMHA_KEY_FIELDS(X) FMHA_KEY_SIGNATURE(X) FMHA_KEY_ALGORITHM(X)

typedef struct fmha_key {
#define X(field, kind, table, prefix, def, opt) int32_t field;
    FMHA_KEY_FIELDS(X)
#undef X
} fmha_key_t;

/* Field ids, for generic access (filters, JSON configs, tests). */
typedef enum kfield {
#define X(field, kind, table, prefix, def, opt) KFIELD_##field,
    FMHA_KEY_FIELDS(X)
#undef X
    KFIELD_COUNT_
} kfield_t;

typedef enum kkind { KKIND_ENUM, KKIND_INT, KKIND_BOOL } kkind_t;

typedef struct kfield_info {
    const char *name;
    kkind_t kind;
    const char *const *table; /* ENUM value names, NULL otherwise */
    int table_len;
    int is_signature;
} kfield_info_t;

const kfield_info_t *fmha__kfield(kfield_t f);
int fmha__kfield_lookup(const char *name); /* -1 when unknown */
int32_t fmha__key_get(const fmha_key_t *k, kfield_t f);
void fmha__key_set(fmha_key_t *k, kfield_t f, int32_t v);

/* Value of a field from text: an enum name, an integer, or 0/1/true/false for BOOL.
 * Returns 0 or -1. */
int fmha__kfield_parse_value(kfield_t f, const char *text, int32_t *out);
/* Text of a field's value (enum name or decimal); buf holds at least 16 bytes. */
const char *fmha__kfield_value_text(kfield_t f, int32_t v, char *buf, size_t len);

void fmha__key_default(fmha_key_t *k);
int fmha__key_equal(const fmha_key_t *a, const fmha_key_t *b);
int fmha__key_signature_equal(const fmha_key_t *a, const fmha_key_t *b);
uint64_t fmha__key_hash(const fmha_key_t *k);
/* The procedural name (snprintf contract). */
int fmha__key_name(const fmha_key_t *k, char *buf, size_t len);
/* Parse a name; exact inverse of fmha__key_name. Returns 0, or -1 with why. */
int fmha__key_parse(const char *name, fmha_key_t *k, char *why, size_t why_len);
/* The JSON object text of a key, {"family":"fwd",...} (snprintf contract). */
int fmha__key_json(const fmha_key_t *k, char *buf, size_t len);

extern const char *const fmha__family_names[KF_COUNT_];
extern const char *const fmha__dtype_names[KD_COUNT_];
extern const char *const fmha__arch_names[KA_COUNT_];
extern const char *const fmha__pipe_names[KPIPE_COUNT_];

#endif /* FMHA_CORE_KEY_H */
