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

/* Is name[0..len) a switch? '-' and '_' read the same (--dry-run is dry_run). */
static int is_switch(const char *name, size_t len, const char *const *switches)
{
    for (int i = 0; switches && switches[i]; i++) {
        size_t k = 0;
        while (k < len && switches[i][k] &&
               (switches[i][k] == name[k] || (switches[i][k] == '_' && name[k] == '-')))
            k++;
        if (k == len && switches[i][k] == '\0') return 1;
    }
    return 0;
}

/* One argument in the -name=value form: a "--" name's dashes become underscores
 * (--dry-run is -dry_run); a switch alone becomes -name=1; "-name value" is joined when
 * value does not start with '-'. Returns the count of argv entries used, 0 when out of
 * memory. */
static int normalise_one(int argc, char **argv, int i, const char *const *switches, char **out)
{
    const char *a = argv[i];
    const int dashes = a[0] == '-' ? (a[1] == '-' ? 2 : 1) : 0;
    const char *eq = strchr(a, '=');
    const size_t nlen = eq ? (size_t)(eq - a - dashes) : strlen(a) - (size_t)dashes;
    const int help = strcmp(a, "-help") == 0 || strcmp(a, "--help") == 0;
    const int join = dashes && !eq && !help && !is_switch(a + dashes, nlen, switches) && i + 1 < argc &&
                     argv[i + 1][0] != '-';
    const char *value = eq ? eq + 1 : join ? argv[i + 1] : dashes && !help && is_switch(a + dashes, nlen, switches) ? "1" : NULL;
    size_t len = strlen(a) + (value ? strlen(value) : 0) + 4;
    char *s = malloc(len);
    if (!s) return 0;
    if (!dashes || help) {
        snprintf(s, len, "%s", a);
    } else {
        snprintf(s, len, "-%.*s", (int)nlen, a + dashes);
        for (char *c = s + 1; dashes == 2 && *c; c++)
            if (*c == '-') *c = '_';
        if (value) snprintf(s + strlen(s), len - strlen(s), "=%s", value);
    }
    *out = s;
    return join ? 2 : 1;
}

int args_parse_command(const char *cmd, const flag_spec_t *specs, int n_specs, const char *const *switches,
                       const char *usage, int argc, char **argv, args_t *a, char ***nv, int *nc)
{
    *nc = 0;
    *nv = calloc((size_t)argc + 1, sizeof **nv);
    int oom = !*nv;
    for (int i = 0; !oom && i < argc;) {
        int used = normalise_one(argc, argv, i, i >= 2 ? switches : NULL, &(*nv)[*nc]);
        if (i < 2 && used) { /* the program and the command stay as they are */
            free((*nv)[*nc]);
            (*nv)[*nc] = strdup(argv[i]);
            used = (*nv)[*nc] ? 1 : 0;
        }
        if (!used) oom = 1;
        else (*nc)++, i += used;
    }
    if (oom || args_parse(a, specs, n_specs, *nc, *nv, 2)) {
        fprintf(stderr, "fmha %s: %s\n", cmd, oom ? "out of memory" : a->err);
        return 2;
    }
    if (a->help) {
        args_print_help(a, usage);
        return 0;
    }
    return -1;
}

void args_free_argv(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}
