/* SPDX-License-Identifier: MIT */
/* key.c: see key.h. Everything here is generated from FMHA_KEY_FIELDS. */
#include "key.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const fmha__family_names[KF_COUNT_] = {
    "fwd", "splitkv", "combine", "pagedkv", "appendkv", "prefill", "bwddotdoo", "bwddqdkdv", "bwdconvertdq"};
const char *const fmha__dtype_names[KD_COUNT_] = {"fp16", "bf16", "fp32", "fp8e4m3"};
static const char *const MODE_NAMES[KM_COUNT_] = {"batch", "group"};
static const char *const MASK_NAMES[KMASK_COUNT_] = {"nomask", "causal", "window"};
static const char *const BIAS_NAMES[KB_COUNT_] = {"nobias", "bias", "alibi"};
static const char *const PAGED_NAMES[KP_COUNT_] = {"none", "vllm", "csr"};
static const char *const ROPE_NAMES[KR_COUNT_] = {"none", "inter", "half"};
const char *const fmha__arch_names[KA_COUNT_] = {"cpu", "sm80", "sm86", "sm89", "sm90"};
const char *const fmha__pipe_names[KPIPE_COUNT_] = {"cpuref", "mmasync", "wgmmaws"};

#define TABLE_FAMILY fmha__family_names, KF_COUNT_
#define TABLE_DTYPE fmha__dtype_names, KD_COUNT_
#define TABLE_MODE MODE_NAMES, KM_COUNT_
#define TABLE_MASK MASK_NAMES, KMASK_COUNT_
#define TABLE_BIAS BIAS_NAMES, KB_COUNT_
#define TABLE_PAGED PAGED_NAMES, KP_COUNT_
#define TABLE_ROPE ROPE_NAMES, KR_COUNT_
#define TABLE_ARCH fmha__arch_names, KA_COUNT_
#define TABLE_PIPE fmha__pipe_names, KPIPE_COUNT_
#define TABLE_NONE NULL, 0
#define ROW(t) TABLE_##t

typedef struct field_row {
    kfield_info_t info;
    const char *prefix;
    int32_t def;
    int optional;
} field_row_t;

#define IS_SIG_SIGNATURE 1
#define IS_SIG_ALGORITHM 0
static const field_row_t FIELDS[KFIELD_COUNT_] = {
#define X(field, kind, table, prefix, def, opt) \
    {{#field, KKIND_##kind, ROW(table), 1}, prefix, def, opt},
    FMHA_KEY_SIGNATURE(X)
#undef X
#define X(field, kind, table, prefix, def, opt) \
    {{#field, KKIND_##kind, ROW(table), 0}, prefix, def, opt},
    FMHA_KEY_ALGORITHM(X)
#undef X
};

const kfield_info_t *fmha__kfield(kfield_t f)
{
    return f >= 0 && f < KFIELD_COUNT_ ? &FIELDS[f].info : NULL;
}

int fmha__kfield_lookup(const char *name)
{
    for (int f = 0; f < KFIELD_COUNT_; f++)
        if (strcmp(FIELDS[f].info.name, name) == 0) return f;
    return -1;
}

int32_t fmha__key_get(const fmha_key_t *k, kfield_t f)
{
    switch (f) {
#define X(field, kind, table, prefix, def, opt) \
    case KFIELD_##field: return k->field;
        FMHA_KEY_FIELDS(X)
#undef X
    default: return 0;
    }
}

void fmha__key_set(fmha_key_t *k, kfield_t f, int32_t v)
{
    switch (f) {
#define X(field, kind, table, prefix, def, opt) \
    case KFIELD_##field: k->field = v; break;
        FMHA_KEY_FIELDS(X)
#undef X
    default: break;
    }
}

void fmha__key_default(fmha_key_t *k)
{
    memset(k, 0, sizeof *k);
    for (int f = 0; f < KFIELD_COUNT_; f++) fmha__key_set(k, (kfield_t)f, FIELDS[f].def);
}

int fmha__key_equal(const fmha_key_t *a, const fmha_key_t *b)
{
    for (int f = 0; f < KFIELD_COUNT_; f++)
        if (fmha__key_get(a, (kfield_t)f) != fmha__key_get(b, (kfield_t)f)) return 0;
    return 1;
}

int fmha__key_signature_equal(const fmha_key_t *a, const fmha_key_t *b)
{
    for (int f = 0; f < KFIELD_COUNT_; f++)
        if (FIELDS[f].info.is_signature && fmha__key_get(a, (kfield_t)f) != fmha__key_get(b, (kfield_t)f))
            return 0;
    return 1;
}

uint64_t fmha__key_hash(const fmha_key_t *k)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the field values */
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        uint32_t v = (uint32_t)fmha__key_get(k, (kfield_t)f);
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

const char *fmha__kfield_value_text(kfield_t f, int32_t v, char *buf, size_t len)
{
    const kfield_info_t *fi = &FIELDS[f].info;
    if (fi->kind == KKIND_ENUM && v >= 0 && v < fi->table_len) return fi->table[v];
    snprintf(buf, len, "%d", (int)v);
    return buf;
}

int fmha__kfield_parse_value(kfield_t f, const char *text, int32_t *out)
{
    const kfield_info_t *fi = fmha__kfield(f);
    if (!fi || !text) return -1;
    if (fi->kind == KKIND_ENUM) {
        for (int i = 0; i < fi->table_len; i++)
            if (strcmp(fi->table[i], text) == 0) {
                *out = i;
                return 0;
            }
        return -1;
    }
    if (fi->kind == KKIND_BOOL) {
        if (!strcmp(text, "1") || !strcmp(text, "true")) return *out = 1, 0;
        if (!strcmp(text, "0") || !strcmp(text, "false")) return *out = 0, 0;
        return -1;
    }
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < INT32_MIN || v > INT32_MAX) return -1;
    *out = (int32_t)v;
    return 0;
}

/* Append text to buf at *n, snprintf-style: *n counts every byte, buf holds what fits. */
static void put(char *buf, size_t len, size_t *n, const char *text, size_t tn)
{
    if (*n < len) memcpy(buf + *n, text, *n + tn < len ? tn : len - 1 - *n);
    *n += tn;
}

/* Without snprintf: naming is most of what enumerating a large set costs (a whole
 * arch's 70k kernels). Same bytes as field_token joined by '_'. */
int fmha__key_name(const fmha_key_t *k, char *buf, size_t len)
{
    size_t n = 0;
    put(buf, len, &n, "fmha", 4);
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        const field_row_t *r = &FIELDS[f];
        const int32_t v = fmha__key_get(k, (kfield_t)f);
        if (r->optional && v == r->def) continue;
        if (r->info.kind == KKIND_BOOL && !v) continue;
        put(buf, len, &n, "_", 1);
        put(buf, len, &n, r->prefix, strlen(r->prefix));
        if (r->info.kind == KKIND_ENUM) {
            const char *t = v >= 0 && v < r->info.table_len ? r->info.table[v] : "?";
            put(buf, len, &n, t, strlen(t));
        } else if (r->info.kind == KKIND_INT) {
            char digits[12];
            int nd = 0;
            uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
            do digits[sizeof digits - 1 - nd++] = (char)('0' + u % 10); while ((u /= 10) && nd < 11);
            if (v < 0) digits[sizeof digits - 1 - nd++] = '-';
            put(buf, len, &n, digits + sizeof digits - nd, (size_t)nd);
        }
    }
    if (len) buf[n < len ? n : len - 1] = '\0';
    return (int)n;
}

/* Does token t encode field f? Sets *v. */
static int token_matches(int f, const char *t, int32_t *v)
{
    const field_row_t *r = &FIELDS[f];
    size_t pl = strlen(r->prefix);
    if (strncmp(t, r->prefix, pl) != 0) return 0;
    const char *rest = t + pl;
    switch (r->info.kind) {
    case KKIND_ENUM:
        for (int i = 0; i < r->info.table_len; i++)
            if (strcmp(rest, r->info.table[i]) == 0) return *v = i, 1;
        return 0;
    case KKIND_INT: {
        if (*rest < '0' || *rest > '9') return 0;
        for (const char *c = rest; *c; c++)
            if (*c < '0' || *c > '9') return 0;
        long x = strtol(rest, NULL, 10);
        if (x > INT32_MAX) return 0;
        return *v = (int32_t)x, 1;
    }
    case KKIND_BOOL: return *rest == '\0' ? (*v = 1, 1) : 0;
    }
    return 0;
}

int fmha__key_parse(const char *name, fmha_key_t *k, char *why, size_t why_len)
{
    char buf[512];
    if (!name || strlen(name) >= sizeof buf || strncmp(name, "fmha_", 5) != 0) {
        snprintf(why, why_len, "kernel name '%s' does not start with 'fmha_'", name ? name : "(null)");
        return -1;
    }
    strcpy(buf, name + 5);
    char *tokens[64];
    int nt = 0;
    for (char *s = strtok(buf, "_"); s && nt < 64; s = strtok(NULL, "_")) tokens[nt++] = s;
    fmha_key_t out;
    fmha__key_default(&out);
    int t = 0;
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        int32_t v;
        if (t < nt && token_matches(f, tokens[t], &v)) {
            /* an optional field spelled at its default would make two names for one key */
            if (FIELDS[f].optional && v == FIELDS[f].def) {
                snprintf(why, why_len, "kernel name '%s': token '%s' spells the default of %s; leave it out",
                         name, tokens[t], FIELDS[f].info.name);
                return -1;
            }
            fmha__key_set(&out, (kfield_t)f, v);
            t++;
        } else if (!FIELDS[f].optional) {
            snprintf(why, why_len, "kernel name '%s': expected field %s at token '%s'", name,
                     FIELDS[f].info.name, t < nt ? tokens[t] : "(end)");
            return -1;
        }
    }
    if (t != nt) {
        snprintf(why, why_len, "kernel name '%s': unexpected token '%s'", name, tokens[t]);
        return -1;
    }
    *k = out;
    return 0;
}

int fmha__key_json(const fmha_key_t *k, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "{");
    char tmp[32];
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        int32_t v = fmha__key_get(k, (kfield_t)f);
        const kfield_info_t *fi = &FIELDS[f].info;
        char *dst = n < len ? buf + n : NULL;
        size_t room = n < len ? len - n : 0;
        const char *sep = f ? "," : "";
        if (fi->kind == KKIND_ENUM)
            n += (size_t)snprintf(dst, room, "%s\"%s\":\"%s\"", sep, fi->name, fmha__kfield_value_text((kfield_t)f, v, tmp, sizeof tmp));
        else if (fi->kind == KKIND_BOOL)
            n += (size_t)snprintf(dst, room, "%s\"%s\":%s", sep, fi->name, v ? "true" : "false");
        else
            n += (size_t)snprintf(dst, room, "%s\"%s\":%d", sep, fi->name, (int)v);
    }
    n += (size_t)snprintf(n < len ? buf + n : NULL, n < len ? len - n : 0, "}");
    return (int)n;
}
