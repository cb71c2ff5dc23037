/* SPDX-License-Identifier: MIT */
/*
 * mask.c: the CLI mask grammar (CK's) and the visibility rule of REFERENCE.md.
 *
 * Key j is visible to query i iff
 *   (left < 0 || j >= i + d - left) && (right < 0 || j <= i + d + right),
 * with d = Sk - Sq (bottom-right) or 0 (top-left); sink tokens j < n are visible too,
 * still subject to the right bound.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GRAMMAR                                                                    \
    "expected one of: 0 (none), 1|t (causal top-left), 2|b (causal bottom-right), " \
    "t:l,r | b:l,r (window), t:l,r,n | b:l,r,n (window with n sink tokens), "      \
    "xt:w | xb:w (xformers window)"

/* Parse a decimal integer list "a,b[,c]" strictly; returns the count or -1. */
static int parse_ints(const char *s, int64_t *out, int max)
{
    int n = 0;
    for (;;) {
        /* strtoll would skip blanks and take '+': the grammar allows neither. */
        if (n == max || !(isdigit((unsigned char)*s) || *s == '-')) return -1;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno == ERANGE || (*end != ',' && *end != '\0')) return -1;
        out[n++] = v;
        if (*end == '\0') return n;
        s = end + 1;
    }
}

fmha_status_t fmha_mask_parse(const char *s, fmha_mask_t *out, char *why, size_t why_len)
{
    char msg[512];
    if (!s || !out) {
        fmha__copy_msg(why, why_len, "mask string or output is NULL");
        return FMHA_STATUS_INVALID_ARGUMENT;
    }
    fmha_mask_t m = {-1, -1, FMHA_MASK_ALIGN_TOP_LEFT, 0};
    int64_t v[3];
    if (strcmp(s, "0") == 0) {
        /* no mask */
    } else if (strcmp(s, "1") == 0 || strcmp(s, "t") == 0) {
        m.right = 0;
    } else if (strcmp(s, "2") == 0 || strcmp(s, "b") == 0) {
        m.right = 0;
        m.align = FMHA_MASK_ALIGN_BOTTOM_RIGHT;
    } else if ((s[0] == 't' || s[0] == 'b') && s[1] == ':') {
        int n = parse_ints(s + 2, v, 3);
        if (n < 2) goto bad;
        if (v[0] < -1 || v[1] < -1 || v[0] > INT32_MAX || v[1] > INT32_MAX) {
            snprintf(msg, sizeof msg,
                     "[rule mask.window] mask '%s': window sizes must be -1 (unbounded) or "
                     "0..2147483647",
                     s);
            goto fail;
        }
        m.left = v[0];
        m.right = v[1];
        if (n == 3) {
            if (v[2] < 0 || v[2] > INT32_MAX) {
                snprintf(msg, sizeof msg,
                         "[rule mask.window] mask '%s': sink token count %lld must be >= 0", s,
                         (long long)v[2]);
                goto fail;
            }
            m.sink_tokens = v[2];
        }
        m.align = s[0] == 'b' ? FMHA_MASK_ALIGN_BOTTOM_RIGHT : FMHA_MASK_ALIGN_TOP_LEFT;
    } else if (s[0] == 'x' && (s[1] == 't' || s[1] == 'b') && s[2] == ':') {
        if (parse_ints(s + 3, v, 1) != 1 || v[0] > INT32_MAX) goto bad;
        if (v[0] <= 0) {
            m.right = 0; /* xformers: a non-positive window means causal */
        } else {
            m.left = v[0] / 2;
            m.right = v[0] - 1 - m.left;
        }
        m.align = s[1] == 'b' ? FMHA_MASK_ALIGN_BOTTOM_RIGHT : FMHA_MASK_ALIGN_TOP_LEFT;
    } else {
        goto bad;
    }
    *out = m;
    return FMHA_STATUS_SUCCESS;
bad:
    snprintf(msg, sizeof msg, "[rule mask.grammar] mask '%s' is not understood; " GRAMMAR, s);
fail:
    fmha__copy_msg(why, why_len, msg);
    return FMHA_STATUS_INVALID_ARGUMENT;
}

static int64_t diag_offset(const fmha_mask_t *m, int64_t sq, int64_t sk)
{
    return m->align == FMHA_MASK_ALIGN_BOTTOM_RIGHT ? sk - sq : 0;
}

int fmha_mask_visible(const fmha_mask_t *m, int64_t sq, int64_t sk, int64_t i, int64_t j)
{
    if (!m || i < 0 || i >= sq || j < 0 || j >= sk) return 0;
    int64_t c = i + diag_offset(m, sq, sk);
    int right_ok = m->right < 0 || j <= c + m->right;
    int left_ok = m->left < 0 || j >= c - m->left;
    return right_ok && (left_ok || j < m->sink_tokens);
}

/* Keys row i sees: its window [lo, hi] clamped to the keys, plus the sink tokens the
 * window does not already hold. */
/* 128-bit intermediates: windows, offsets and sinks near INT64_MAX must not overflow */
__extension__ typedef __int128 i128_t;

static int64_t row_pairs(const fmha_mask_t *m, int64_t sk, int64_t d, int64_t i)
{
    const i128_t c = (i128_t)i + d;
    const i128_t hi = m->right < 0 ? sk - 1 : (c + m->right < sk - 1 ? c + m->right : sk - 1);
    const i128_t lo = m->left < 0 ? 0 : (c - m->left > 0 ? c - m->left : 0);
    if (hi < 0) return 0;
    const i128_t window = hi >= lo ? hi - lo + 1 : 0;
    i128_t shi = (m->sink_tokens < sk ? m->sink_tokens : sk) - 1; /* sinks [0, shi] */
    if (shi > hi) shi = hi;
    const i128_t sinks = shi >= 0 ? shi + 1 : 0;
    const i128_t overlap = (window > 0 && shi >= lo) ? shi - lo + 1 : 0;
    return (int64_t)(window + sinks - overlap); /* at most sk */
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* row_pairs is piecewise linear in i: each clamp or comparison in it switches where a
 * linear expression of c = i + d crosses a constant. Between consecutive switch points
 * the rows form an arithmetic progression, summed in closed form, so the count costs
 * the same for 10 rows as for 2^40 (select.c calls it at every plan). Saturates at
 * INT64_MAX. */
int64_t fmha_mask_visible_pairs(const fmha_mask_t *m, int64_t sq, int64_t sk)
{
    if (!m || sq <= 0 || sk <= 0) return 0;
    const int64_t d = diag_offset(m, sq, sk);
    const i128_t R = m->right, L = m->left, shi = (m->sink_tokens < sk ? m->sink_tokens : sk) - 1;
    /* the values of c where a case of row_pairs changes, with their neighbours */
    i128_t c_at[8];
    int n_c = 0;
    if (R >= 0) c_at[n_c++] = sk - 1 - R, c_at[n_c++] = -R, c_at[n_c++] = shi - R;
    if (L >= 0) c_at[n_c++] = L, c_at[n_c++] = shi + L, c_at[n_c++] = sk - 1 + L;
    int64_t cut[2 + 8 * 3];
    int n = 0;
    cut[n++] = 0, cut[n++] = sq;
    for (int k = 0; k < n_c; k++)
        for (int64_t off = -1; off <= 1; off++) {
            const i128_t i = c_at[k] - d + off;
            if (i > 0 && i < sq) cut[n++] = (int64_t)i;
        }
    qsort(cut, (size_t)n, sizeof cut[0], cmp_i64);
    i128_t total = 0;
    for (int k = 0; k + 1 < n; k++) {
        const int64_t a = cut[k], b = cut[k + 1] - 1; /* rows [a, b] */
        if (b < a) continue;
        const i128_t rows = (i128_t)b - a + 1;
        total += rows * ((i128_t)row_pairs(m, sk, d, a) + row_pairs(m, sk, d, b)) / 2;
        if (total > INT64_MAX) return INT64_MAX;
    }
    return (int64_t)total;
}

/* Both bounds of row i's window grow with i, so the keys rows [i0, i1) see lie between
 * row i0's left bound and row i1 - 1's right bound; sink tokens reach back to key 0. */
void fmha__mask_key_span(const fmha_mask_t *m, int64_t sq, int64_t sk, int64_t i0, int64_t i1, int64_t *j0, int64_t *j1)
{
    *j0 = *j1 = 0;
    if (!m || sk <= 0 || i0 >= i1) return;
    const i128_t d = diag_offset(m, sq, sk);
    const i128_t hi = m->right < 0 ? sk - 1 : (i128_t)i1 - 1 + d + m->right; /* last key, inclusive */
    const i128_t lo = m->left < 0 || m->sink_tokens > 0 ? 0 : (i128_t)i0 + d - m->left;
    const i128_t end = hi + 1 < sk ? hi + 1 : sk, start = lo > 0 ? lo : 0;
    if (end <= start) return;
    *j0 = (int64_t)start, *j1 = (int64_t)end;
}
