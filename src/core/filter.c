/* SPDX-License-Identifier: MIT */
/*
 * filter.c: a small expression language over kernel-key fields, for --filter and the
 * registry:  hdim_qk==128 && dtype==bf16 && (mask==causal || !lse)
 * Grammar:  or := and ('||' and)* ; and := unary ('&&' unary)* ;
 *           unary := '!' unary | '(' or ')' | field [op value] ;  op := == != < <= > >=
 * A bare field is true when non-zero. Values are integers, enum names, true or false.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kset.h"

typedef enum { N_OR, N_AND, N_NOT, N_CMP } node_kind_t;
typedef enum { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_TRUE } op_t;

typedef struct node {
    node_kind_t kind;
    struct node *a, *b;
    kfield_t field;
    op_t op;
    int32_t value;
} node_t;

struct kfilter {
    node_t *root;
};

typedef struct parser {
    const char *src, *p;
    char *why;
    size_t len;
    int failed;
} parser_t;

static void skip(parser_t *ps)
{
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

static node_t *fail(parser_t *ps, const char *msg, const char *tok, size_t toklen)
{
    if (!ps->failed)
        snprintf(ps->why, ps->len, "filter '%s': %s '%.*s' at column %d", ps->src, msg, (int)toklen, tok,
                 (int)(ps->p - ps->src) + 1);
    ps->failed = 1;
    return NULL;
}

static node_t *mk(node_kind_t k, node_t *a, node_t *b)
{
    node_t *n = calloc(1, sizeof *n);
    if (n) n->kind = k, n->a = a, n->b = b;
    return n;
}

static void free_node(node_t *n)
{
    if (!n) return;
    free_node(n->a);
    free_node(n->b);
    free(n);
}

static int word(parser_t *ps, char *out, size_t cap)
{
    skip(ps);
    size_t n = 0;
    while ((isalnum((unsigned char)ps->p[n]) || ps->p[n] == '_' || (n == 0 && ps->p[n] == '-')) && n + 1 < cap) n++;
    memcpy(out, ps->p, n);
    out[n] = '\0';
    ps->p += n;
    return (int)n;
}

static node_t *parse_or(parser_t *ps);

static node_t *parse_unary(parser_t *ps)
{
    skip(ps);
    if (*ps->p == '!') {
        ps->p++;
        node_t *a = parse_unary(ps);
        return a ? mk(N_NOT, a, NULL) : NULL;
    }
    if (*ps->p == '(') {
        ps->p++;
        node_t *a = parse_or(ps);
        skip(ps);
        if (!a) return NULL;
        if (*ps->p != ')') {
            free_node(a);
            return fail(ps, "expected ')' but found", ps->p, 1);
        }
        ps->p++;
        return a;
    }
    char name[64];
    const char *start = ps->p + (isspace((unsigned char)*ps->p) ? 1 : 0);
    if (!word(ps, name, sizeof name)) return fail(ps, "expected a field name, found", start, *start ? 1 : 0);
    int f = fmha__kfield_lookup(name);
    if (f < 0) return fail(ps, "unknown field", name, strlen(name));
    node_t *n = mk(N_CMP, NULL, NULL);
    if (!n) return NULL;
    n->field = (kfield_t)f;
    skip(ps);
    static const struct {
        const char *s;
        op_t op;
    } ops[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE}, {"<", OP_LT}, {">", OP_GT}};
    n->op = OP_TRUE;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strncmp(ps->p, ops[i].s, strlen(ops[i].s)) == 0) {
            n->op = ops[i].op;
            ps->p += strlen(ops[i].s);
            break;
        }
    if (n->op == OP_TRUE) return n;
    char val[64];
    if (!word(ps, val, sizeof val) || fmha__kfield_parse_value(n->field, val, &n->value)) {
        free(n);
        return fail(ps, "not a value of that field:", val, strlen(val));
    }
    return n;
}

static node_t *parse_and(parser_t *ps)
{
    node_t *a = parse_unary(ps);
    for (;;) {
        skip(ps);
        if (!a || strncmp(ps->p, "&&", 2) != 0) return a;
        ps->p += 2;
        node_t *b = parse_unary(ps);
        if (!b) {
            free_node(a);
            return NULL;
        }
        a = mk(N_AND, a, b);
    }
}

static node_t *parse_or(parser_t *ps)
{
    node_t *a = parse_and(ps);
    for (;;) {
        skip(ps);
        if (!a || strncmp(ps->p, "||", 2) != 0) return a;
        ps->p += 2;
        node_t *b = parse_and(ps);
        if (!b) {
            free_node(a);
            return NULL;
        }
        a = mk(N_OR, a, b);
    }
}

kfilter_t *fmha__filter_compile(const char *expr, char *why, size_t len)
{
    parser_t ps = {expr, expr, why, len, 0};
    node_t *root = parse_or(&ps);
    skip(&ps);
    if (root && *ps.p) {
        fail(&ps, "unexpected", ps.p, strlen(ps.p));
        free_node(root);
        root = NULL;
    }
    if (!root) {
        if (!ps.failed) snprintf(why, len, "filter '%s': out of memory", expr);
        return NULL;
    }
    kfilter_t *f = malloc(sizeof *f);
    if (!f) {
        free_node(root);
        return NULL;
    }
    f->root = root;
    return f;
}

static int eval(const node_t *n, const fmha_key_t *k)
{
    switch (n->kind) {
    case N_OR: return eval(n->a, k) || eval(n->b, k);
    case N_AND: return eval(n->a, k) && eval(n->b, k);
    case N_NOT: return !eval(n->a, k);
    case N_CMP: {
        int32_t v = fmha__key_get(k, n->field);
        switch (n->op) {
        case OP_EQ: return v == n->value;
        case OP_NE: return v != n->value;
        case OP_LT: return v < n->value;
        case OP_LE: return v <= n->value;
        case OP_GT: return v > n->value;
        case OP_GE: return v >= n->value;
        case OP_TRUE: return v != 0;
        }
    }
    }
    return 0;
}

int fmha__filter_eval(const kfilter_t *f, const fmha_key_t *k) { return eval(f->root, k); }

void fmha__filter_free(kfilter_t *f)
{
    if (!f) return;
    free_node(f->root);
    free(f);
}
