/* SPDX-License-Identifier: MIT */
/* bench_matrix.c: see bench_matrix.h. */
#include "bench_matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textfile.h"

#define MAX_EXPANSION 4096
#define MAX_GROUPS 16

static const char *const TIERS[] = {"smoke", "full", "nightly"};

int bench_tier_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, TIERS[i]) == 0) return i;
    return -1;
}

const char *bench_tier_name(bench_tier_t t) { return t >= 0 && t < 3 ? TIERS[t] : "?"; }

static int push(bench_matrix_t *m, size_t *cap, const bench_case_t *c)
{
    if (m->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        bench_case_t *p = realloc(m->cases, nc * sizeof *p);
        if (!p) return -1;
        m->cases = p;
        *cap = nc;
    }
    m->cases[m->n++] = *c;
    return 0;
}

/* The brace groups of flags: where each starts and ends, and how many items it has. */
typedef struct group {
    const char *open, *close;
    int items;
} group_t;

/* col0: the column of flags[0] in its line, for messages */
static int find_groups(const char *flags, int col0, group_t *g, int *ng, char *why, size_t len)
{
    *ng = 0;
    for (const char *p = flags; (p = strchr(p, '{'));) {
        const char *q = strchr(p, '}'), *nested = strchr(p + 1, '{');
        if (!q || (nested && nested < q)) {
            snprintf(why, len, "a '{' at column %d is not closed by '}' before the next '{'", (int)(p - flags) + col0);
            return -1;
        }
        if (*ng == MAX_GROUPS) {
            snprintf(why, len, "more than %d {...} groups", MAX_GROUPS);
            return -1;
        }
        group_t *x = &g[(*ng)++];
        x->open = p, x->close = q, x->items = 1;
        for (const char *c = p + 1; c < q; c++) x->items += *c == '|';
        /* no empty items: "{}", "{a|}", "{|a}", "{a||b}" */
        for (const char *c = p; c < q; c++)
            if ((*c == '{' || *c == '|') && (c[1] == '|' || c[1] == '}')) {
                snprintf(why, len, "an empty item in the group at column %d", (int)(p - flags) + col0);
                return -1;
            }
        p = q + 1;
    }
    int closes = 0;
    for (const char *c = flags; *c; c++) closes += *c == '}';
    if (closes != *ng) {
        snprintf(why, len, "a '}' without its '{'");
        return -1;
    }
    return 0;
}

/* Write expansion `index` (mixed radix over the groups, the last fastest) into out. */
static int expand_one(const char *flags, const group_t *g, int ng, long index, char *out, size_t len)
{
    int pick[MAX_GROUPS];
    for (int i = ng - 1; i >= 0; i--) {
        pick[i] = (int)(index % g[i].items);
        index /= g[i].items;
    }
    size_t n = 0;
    const char *p = flags;
    for (int i = 0; i <= ng; i++) {
        const char *end = i < ng ? g[i].open : flags + strlen(flags);
        size_t chunk = (size_t)(end - p);
        if (n + chunk >= len) return -1;
        memcpy(out + n, p, chunk), n += chunk;
        if (i == ng) break;
        const char *item = g[i].open + 1;
        for (int k = 0; k < pick[i]; k++) item = strchr(item, '|') + 1;
        const char *stop = item;
        while (*stop != '|' && *stop != '}') stop++;
        if (n + (size_t)(stop - item) >= len) return -1;
        memcpy(out + n, item, (size_t)(stop - item)), n += (size_t)(stop - item);
        p = g[i].close + 1;
    }
    out[n] = '\0';
    return 0;
}

int bench_matrix_parse(const char *text, const char *name, bench_tier_t max_tier, bench_matrix_t *m, char *why,
                       size_t why_len)
{
    memset(m, 0, sizeof *m);
    size_t cap = 0;
    int lineno = 0;
    char err[256];
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        lineno++;
        char line[2048];
        if (n >= sizeof line) {
            snprintf(why, why_len, "%s:%d: the line is longer than %zu characters", name, lineno, sizeof line - 1);
            goto fail;
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p = eol ? eol + 1 : p + n;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char tier[32], category[64], command[16];
        int used = 0;
        if (sscanf(line, " %31s %63s %15s %n", tier, category, command, &used) < 3) {
            if (sscanf(line, " %31s", tier) == 1) {
                snprintf(why, why_len, "%s:%d: expected '<tier> <category> <command> <flags...>'", name, lineno);
                goto fail;
            }
            continue; /* blank or comment */
        }
        const int t = bench_tier_parse(tier);
        if (t < 0) {
            snprintf(why, why_len, "%s:%d: tier '%s': expected smoke, full or nightly", name, lineno, tier);
            goto fail;
        }
        if (strcmp(command, "run") && strcmp(command, "bwd")) {
            snprintf(why, why_len, "%s:%d: command '%s': expected run or bwd", name, lineno, command);
            goto fail;
        }
        if (strlen(category) >= sizeof m->cases[0].category) {
            snprintf(why, why_len, "%s:%d: the category is longer than %zu characters", name, lineno,
                     sizeof m->cases[0].category - 1);
            goto fail;
        }
        char *flags = line + used;
        for (char *e = flags + strlen(flags); e > flags && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r');) *--e = '\0';
        group_t g[MAX_GROUPS];
        int ng;
        if (find_groups(flags, (int)(flags - line) + 1, g, &ng, err, sizeof err)) {
            snprintf(why, why_len, "%s:%d: %s", name, lineno, err);
            goto fail;
        }
        long total = 1;
        for (int i = 0; i < ng; i++)
            if ((total *= g[i].items) > MAX_EXPANSION) {
                snprintf(why, why_len, "%s:%d: the line expands to more than %d cases", name, lineno, MAX_EXPANSION);
                goto fail;
            }
        if (t > (int)max_tier) continue;
        bench_case_t c;
        memset(&c, 0, sizeof c);
        c.tier = (bench_tier_t)t, c.line = lineno;
        memcpy(c.category, category, strlen(category) + 1); /* its length was checked above */
        snprintf(c.command, sizeof c.command, "%.7s", command); /* run or bwd */
        for (long i = 0; i < total; i++) {
            if (expand_one(flags, g, ng, i, c.flags, sizeof c.flags)) {
                snprintf(why, why_len, "%s:%d: an expanded case is longer than %zu characters", name, lineno,
                         sizeof c.flags - 1);
                goto fail;
            }
            if (push(m, &cap, &c)) {
                snprintf(why, why_len, "out of memory");
                goto fail;
            }
        }
    }
    return 0;
fail:
    bench_matrix_free(m);
    return -1;
}

int bench_matrix_load(const char *path, bench_tier_t max_tier, bench_matrix_t *m, char *why, size_t why_len)
{
    memset(m, 0, sizeof *m);
    char *text = textfile_read(path);
    if (!text) {
        snprintf(why, why_len, "cannot read the matrix '%s'", path);
        return -1;
    }
    int rc = bench_matrix_parse(text, path, max_tier, m, why, why_len);
    free(text);
    return rc;
}

void bench_matrix_free(bench_matrix_t *m)
{
    free(m->cases);
    m->cases = NULL;
    m->n = 0;
}
