/* SPDX-License-Identifier: MIT */
/* args.c: see args.h. */
#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int find(const args_t *a, const char *name, size_t len)
{
    for (int i = 0; i < a->n_specs; i++)
        if (strlen(a->specs[i].name) == len && strncmp(a->specs[i].name, name, len) == 0) return i;
    return -1;
}

int args_parse(args_t *a, const flag_spec_t *specs, int n_specs, int argc, char **argv, int first)
{
    memset(a, 0, sizeof *a);
    a->specs = specs;
    a->n_specs = n_specs < ARGS_MAX ? n_specs : ARGS_MAX;
    for (int i = 0; i < a->n_specs; i++) a->value[i] = specs[i].def;
    for (int k = first; k < argc; k++) {
        const char *arg = argv[k];
        if (strcmp(arg, "-help") == 0 || strcmp(arg, "--help") == 0 || strcmp(arg, "-h=help") == 0) {
            a->help = 1;
            continue;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            snprintf(a->err, sizeof a->err, "argument '%s' is not a flag; expected -name=value", arg);
            return -1;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int idx = find(a, name, len);
        if (idx < 0) {
            snprintf(a->err, sizeof a->err, "unknown flag -%.*s; see -help for the flags", (int)len,
                     name);
            return -1;
        }
        if (!eq) {
            snprintf(a->err, sizeof a->err, "flag -%s needs a value; expected -%s=VALUE",
                     specs[idx].name, specs[idx].name);
            return -1;
        }
        a->value[idx] = eq + 1;
        a->given[idx] = 1;
    }
    return 0;
}

void args_print_help(const args_t *a, const char *usage)
{
    printf("%s\n\nflags (-name=value):\n", usage);
    for (int i = 0; i < a->n_specs; i++)
        printf("  -%-18s %-10s %s\n", a->specs[i].name, a->specs[i].def, a->specs[i].help);
}

static int index_of(const args_t *a, const char *name) { return find(a, name, strlen(name)); }

const char *args_str(const args_t *a, const char *name)
{
    int i = index_of(a, name);
    return i < 0 ? "" : a->value[i];
}

int args_given(const args_t *a, const char *name)
{
    int i = index_of(a, name);
    return i >= 0 && a->given[i];
}

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

int args_i64(args_t *a, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = args_str(a, name);
    if (parse_i64(s, out) || *out < lo || *out > hi) {
        snprintf(a->err, sizeof a->err, "flag -%s=%s: expected an integer in %" PRId64 "..%" PRId64,
                 name, s, lo, hi);
        return -1;
    }
    return 0;
}

int args_u64(args_t *a, const char *name, uint64_t *out)
{
    const char *s = args_str(a, name);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || s[0] == '-') {
        snprintf(a->err, sizeof a->err, "flag -%s=%s: expected an unsigned 64-bit integer", name, s);
        return -1;
    }
    *out = v;
    return 0;
}

int args_f64(args_t *a, const char *name, double lo, double hi, const char *range, double *out)
{
    const char *s = args_str(a, name);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
        snprintf(a->err, sizeof a->err, "flag -%s=%s: expected a number in %s", name, s, range);
        return -1;
    }
    *out = v;
    return 0;
}

int args_i64_list(args_t *a, const char *name, int64_t lo, int64_t hi, int64_t *out, int max,
                  int *n_out)
{
    const char *s = args_str(a, name);
    char item[64];
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == max || len == 0 || len >= sizeof item) goto bad;
        memcpy(item, p, len);
        item[len] = '\0';
        if (parse_i64(item, &out[n]) || out[n] < lo || out[n] > hi) goto bad;
        n++;
        if (!comma) break;
        p = comma + 1;
    }
    *n_out = n;
    return 0;
bad:
    snprintf(a->err, sizeof a->err,
             "flag -%s=%s: expected an integer or a comma list of at most %d integers, each in "
             "%" PRId64 "..%" PRId64,
             name, s, max, lo, hi);
    return -1;
}
