/* SPDX-License-Identifier: MIT */
/* bench_result.c: see bench_result.h. One table of columns drives the CSV writer, the
 * CSV reader and both JSON directions. */
#include "bench_result.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmha/fmha.h"
#include "textfile.h"

const char *const BENCH_KEY_NAMES[BENCH_KEY_FIELDS] = {
    "family", "dtype", "hdim_qk", "hdim_v", "mode", "mask", "bias", "lse", "dropout", "softcap", "sink", "paged",
    "rope", "deterministic", "dbias", "arch", "pipeline", "tile_m", "tile_n", "warps", "stages", "even_k",
    "max_splits_log2"};

typedef enum { COL_STR, COL_INT, COL_I64, COL_F64, COL_KEY } col_type_t;

typedef struct column {
    const char *name;
    col_type_t type;
    size_t offset, size; /* COL_STR: the array's size; COL_KEY: the key field's index */
} column_t;

#define STR(f) {#f, COL_STR, offsetof(bench_row_t, f), sizeof(((bench_row_t *)0)->f)}
#define INT(f) {#f, COL_INT, offsetof(bench_row_t, f), 0}
#define I64(f) {#f, COL_I64, offsetof(bench_row_t, f), 0}
#define F64(f) {#f, COL_F64, offsetof(bench_row_t, f), 0}
#define KEY(i) {NULL, COL_KEY, 0, i}

static const column_t COLUMNS[] = {
    STR(library), STR(device), STR(tier), STR(category), STR(command), STR(flags), STR(family), STR(dtype),
    I64(batch), I64(heads_q), I64(heads_kv), I64(seqlen_q), I64(seqlen_kv), I64(hdim_qk), I64(hdim_v), STR(mask),
    STR(problem_class), STR(requested), STR(kernel), STR(plan_kernels), STR(how), INT(selector_choice),
    INT(samples), INT(inner), F64(min_ms), F64(median_ms), F64(max_ms), F64(tflops), F64(gbps), F64(gflop),
    F64(mbytes), STR(verify), F64(max_err), F64(tol), STR(status), STR(error),
    KEY(0), KEY(1), KEY(2), KEY(3), KEY(4), KEY(5), KEY(6), KEY(7), KEY(8), KEY(9), KEY(10), KEY(11), KEY(12),
    KEY(13), KEY(14), KEY(15), KEY(16), KEY(17), KEY(18), KEY(19), KEY(20), KEY(21), KEY(22)};
#define N_COLUMNS ((int)(sizeof COLUMNS / sizeof COLUMNS[0]))

static const char *column_name(const column_t *c, char *buf, size_t len)
{
    if (c->type != COL_KEY) return c->name;
    snprintf(buf, len, "key_%s", BENCH_KEY_NAMES[c->size]);
    return buf;
}

/* The column's value as text (numbers with enough digits to read back the same). */
static void column_text(const column_t *c, const bench_row_t *r, char *buf, size_t len)
{
    const char *base = (const char *)r;
    switch (c->type) {
    case COL_STR: snprintf(buf, len, "%s", base + c->offset); break;
    case COL_INT: snprintf(buf, len, "%d", *(const int *)(const void *)(base + c->offset)); break;
    case COL_I64: snprintf(buf, len, "%lld", (long long)*(const int64_t *)(const void *)(base + c->offset)); break;
    case COL_F64: snprintf(buf, len, "%.17g", *(const double *)(const void *)(base + c->offset)); break;
    case COL_KEY: snprintf(buf, len, "%s", r->key[c->size]); break;
    }
}

static void column_set(const column_t *c, bench_row_t *r, const char *text)
{
    char *base = (char *)r;
    switch (c->type) {
    case COL_STR: snprintf(base + c->offset, c->size, "%s", text); break;
    case COL_INT: *(int *)(void *)(base + c->offset) = atoi(text); break;
    case COL_I64: *(int64_t *)(void *)(base + c->offset) = strtoll(text, NULL, 10); break;
    case COL_F64: *(double *)(void *)(base + c->offset) = strtod(text, NULL); break;
    case COL_KEY: snprintf(r->key[c->size], sizeof r->key[c->size], "%s", text); break;
    }
}

void bench_row_set_key(bench_row_t *r, const char *kernel)
{
    memset(r->key, 0, sizeof r->key);
    char text[2048], why[256];
    if (!kernel || fmha_kernel_name_parse(kernel, text, sizeof text, why, sizeof why)) return;
    json_t *o = json_loads(text, 0, NULL);
    for (int i = 0; o && i < BENCH_KEY_FIELDS; i++) {
        json_t *v = json_object_get(o, BENCH_KEY_NAMES[i]);
        if (json_is_string(v)) snprintf(r->key[i], sizeof r->key[i], "%s", json_string_value(v));
        else if (json_is_integer(v)) snprintf(r->key[i], sizeof r->key[i], "%lld", (long long)json_integer_value(v));
        else if (json_is_boolean(v)) snprintf(r->key[i], sizeof r->key[i], "%d", json_is_true(v));
    }
    json_decref(o);
}

/* ------------------------------------------------------------------- CSV */

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void bench_csv_header(FILE *f)
{
    char buf[64];
    for (int i = 0; i < N_COLUMNS; i++) {
        if (i) fputc(',', f);
        csv_field(f, column_name(&COLUMNS[i], buf, sizeof buf));
    }
    fputc('\n', f);
}

void bench_csv_row(FILE *f, const bench_row_t *r)
{
    char buf[4096];
    for (int i = 0; i < N_COLUMNS; i++) {
        if (i) fputc(',', f);
        column_text(&COLUMNS[i], r, buf, sizeof buf);
        csv_field(f, buf);
    }
    fputc('\n', f);
}

/* One record from *p (quoted fields may hold commas, quotes and newlines): the fields
 * into out[] (at most max; each cut at field_len), *p past the record. Returns the
 * field count, or -1 for a quote left open. */
static int csv_record(const char **p, char (*out)[4096], int max)
{
    const char *s = *p;
    int n = 0;
    for (;;) {
        char field[4096];
        size_t len = 0;
        if (*s == '"') {
            for (s++;; s++) {
                if (!*s) return -1;
                if (*s == '"') {
                    if (s[1] != '"') break;
                    s++;
                }
                if (len + 1 < sizeof field) field[len++] = *s;
            }
            s++; /* the closing quote */
        }
        while (*s && *s != ',' && *s != '\n' && *s != '\r') {
            if (len + 1 < sizeof field) field[len++] = *s;
            s++;
        }
        field[len] = '\0';
        if (n < max) memcpy(out[n], field, len + 1);
        n++;
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '\r') s++;
        if (*s == '\n') s++;
        *p = s;
        return n;
    }
}

int bench_csv_read(const char *path, bench_row_t **rows, size_t *n, char *why, size_t why_len)
{
    *rows = NULL;
    *n = 0;
    char *text = textfile_read(path);
    if (!text) {
        snprintf(why, why_len, "cannot read '%s'", path);
        return -1;
    }
    char(*fields)[4096] = malloc(sizeof *fields * N_COLUMNS * 2);
    int map[N_COLUMNS * 2]; /* file column -> COLUMNS index, -1 unknown */
    if (!fields) {
        snprintf(why, why_len, "out of memory reading '%s'", path);
        free(text);
        return -1;
    }
    const char *p = text;
    int nf = csv_record(&p, fields, N_COLUMNS * 2);
    if (nf <= 0 || nf > N_COLUMNS * 2) {
        snprintf(why, why_len, "'%s': line 1 is not a bench CSV header", path);
        free(fields);
        free(text);
        return -1;
    }
    int has_kernel = 0;
    for (int i = 0; i < nf; i++) {
        map[i] = -1;
        for (int c = 0; c < N_COLUMNS; c++) {
            char buf[64];
            if (strcmp(fields[i], column_name(&COLUMNS[c], buf, sizeof buf)) == 0) map[i] = c;
        }
        has_kernel |= map[i] >= 0 && strcmp(fields[i], "requested") == 0;
    }
    if (!has_kernel) {
        snprintf(why, why_len, "'%s': the header has no 'requested' column: not a bench CSV", path);
        free(fields);
        free(text);
        return -1;
    }
    size_t cap = 0;
    int line = 1;
    while (*p) {
        line++;
        if (*p == '\n' || *p == '\r') { /* a blank line */
            p += *p == '\r' && p[1] == '\n' ? 2 : 1;
            continue;
        }
        int got = csv_record(&p, fields, N_COLUMNS * 2);
        if (got != nf) {
            snprintf(why, why_len, "'%s': record at line %d has %d fields; the header has %d%s", path, line, got, nf,
                     got < 0 ? " (a quote is left open)" : "");
            free(*rows);
            *rows = NULL;
            *n = 0;
            free(fields);
            free(text);
            return -1;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            bench_row_t *nr = realloc(*rows, cap * sizeof *nr);
            if (!nr) {
                snprintf(why, why_len, "out of memory reading '%s'", path);
                free(*rows);
                *rows = NULL;
                *n = 0;
                free(fields);
                free(text);
                return -1;
            }
            *rows = nr;
        }
        bench_row_t *r = &(*rows)[(*n)++];
        memset(r, 0, sizeof *r);
        for (int i = 0; i < nf; i++)
            if (map[i] >= 0) column_set(&COLUMNS[map[i]], r, fields[i]);
    }
    free(fields);
    free(text);
    return 0;
}

/* ------------------------------------------------------------------ JSON */

static json_t *row_object(const bench_row_t *r)
{
    json_t *o = json_object();
    char name[64], text[4096];
    const char *base = (const char *)r;
    for (int i = 0; o && i < N_COLUMNS; i++) {
        const column_t *c = &COLUMNS[i];
        json_t *v;
        switch (c->type) {
        case COL_INT: v = json_integer(*(const int *)(const void *)(base + c->offset)); break;
        case COL_I64: v = json_integer(*(const int64_t *)(const void *)(base + c->offset)); break;
        case COL_F64: { /* JSON has no NaN or infinity: null stands for them */
            const double x = *(const double *)(const void *)(base + c->offset);
            v = isfinite(x) ? json_real(x) : json_null();
            break;
        }
        default: column_text(c, r, text, sizeof text); v = json_string(text); break;
        }
        if (!v || json_object_set_new(o, column_name(c, name, sizeof name), v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

char *bench_row_json(const bench_row_t *r)
{
    json_t *o = row_object(r);
    char *s = o ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

int bench_json_write(FILE *f, const char *metadata, const bench_row_t *rows, size_t n)
{
    json_t *root = json_object(), *arr = json_array();
    json_t *meta = metadata ? json_loads(metadata, 0, NULL) : json_object();
    int rc = !root || !arr || !meta || json_object_set_new(root, "metadata", meta) ||
             json_object_set_new(root, "rows", arr);
    if (rc) {
        json_decref(meta);
        json_decref(arr);
    }
    for (size_t i = 0; !rc && i < n; i++) rc = json_array_append_new(arr, row_object(&rows[i]));
    if (!rc) rc = json_dumpf(root, f, JSON_PRESERVE_ORDER | JSON_INDENT(1)) || fputc('\n', f) == EOF;
    json_decref(root);
    return rc ? -1 : 0;
}

int bench_row_from_json(const char *text, bench_row_t *r, char *why, size_t why_len)
{
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    if (!json_is_object(o)) {
        snprintf(why, why_len, "not a bench row: %s", o ? "not a JSON object" : err.text);
        json_decref(o);
        return -1;
    }
    memset(r, 0, sizeof *r);
    char name[64], num[64];
    for (int i = 0; i < N_COLUMNS; i++) {
        const column_t *c = &COLUMNS[i];
        json_t *v = json_object_get(o, column_name(c, name, sizeof name));
        if (!v) continue;
        if (json_is_string(v)) {
            column_set(c, r, json_string_value(v));
        } else if (json_is_null(v) && c->type == COL_F64) {
            column_set(c, r, "nan");
        } else if (json_is_number(v)) {
            snprintf(num, sizeof num, json_is_integer(v) ? "%.0f" : "%.17g", json_number_value(v));
            column_set(c, r, num);
        }
    }
    json_decref(o);
    return 0;
}
