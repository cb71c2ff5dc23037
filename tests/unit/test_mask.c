/* SPDX-License-Identifier: MIT */
/* test_mask.c: the mask grammar and the visibility rule. */
#include "testing.h"
#include "../../src/core/internal.h"

static void expect_mask(const char *s, int64_t l, int64_t r, fmha_mask_align_t a, int64_t n)
{
    fmha_mask_t m;
    char why[256];
    fmha_status_t st = fmha_mask_parse(s, &m, why, sizeof why);
    CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
    if (st) {
        printf("  mask '%s': %s\n", s, why);
        return;
    }
    if (m.left != l || m.right != r || m.align != a || m.sink_tokens != n) {
        printf("  mask '%s' parsed to (%lld, %lld, %d, %lld)\n", s, (long long)m.left,
               (long long)m.right, (int)m.align, (long long)m.sink_tokens);
        CHECK(0);
    }
}

static void test_grammar_accepts(void)
{
    const fmha_mask_align_t T = FMHA_MASK_ALIGN_TOP_LEFT, B = FMHA_MASK_ALIGN_BOTTOM_RIGHT;
    expect_mask("0", -1, -1, T, 0);
    expect_mask("1", -1, 0, T, 0);
    expect_mask("t", -1, 0, T, 0);
    expect_mask("2", -1, 0, B, 0);
    expect_mask("b", -1, 0, B, 0);
    expect_mask("t:16,4", 16, 4, T, 0);
    expect_mask("b:16,4", 16, 4, B, 0);
    expect_mask("b:-1,0,4", -1, 0, B, 4);
    expect_mask("t:3,-1,2", 3, -1, T, 2);
    expect_mask("xt:9", 4, 4, T, 0);  /* left = w/2, right = w-1-left */
    expect_mask("xb:10", 5, 4, B, 0);
    expect_mask("xb:0", -1, 0, B, 0); /* w <= 0 means causal */
    expect_mask("xt:-3", -1, 0, T, 0);
}

static void test_grammar_rejects(void)
{
    const char *bad[] = {"",       "3",     "c",     "t:",     "t:1",    "b:1,2,3,4", "t:a,b",
                         "b:1,,2", "t:-2,0", "x:4",  "xt:",    "xt:1,2", " b",        "b ",
                         "t: 1,2", "t:+1,2", "B",    "b:1,2,-1", "t:99999999999,0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fmha_mask_t m;
        char why[512];
        fmha_status_t st = fmha_mask_parse(bad[i], &m, why, sizeof why);
        if (st != FMHA_STATUS_INVALID_ARGUMENT) printf("  mask '%s' was accepted\n", bad[i]);
        CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(why, "[rule mask.grammar]") || strstr(why, "[rule mask.window]"));
    }
    fmha_mask_t m;
    char why[512];
    fmha_mask_parse("zz", &m, why, sizeof why);
    CHECK_CONTAINS(why, "xt:w"); /* the message names the grammar */
    CHECK_STATUS(fmha_mask_parse(NULL, &m, NULL, 0), FMHA_STATUS_INVALID_ARGUMENT);
}

/* The rule, spot-checked by hand: causal bottom-right with Sq > Sk leaves early rows empty. */
static void test_visible_by_hand(void)
{
    fmha_mask_t br = {-1, 0, FMHA_MASK_ALIGN_BOTTOM_RIGHT, 0};
    /* Sq = 5, Sk = 3: d = -2; row i sees j <= i - 2 */
    CHECK(!fmha_mask_visible(&br, 5, 3, 0, 0));
    CHECK(!fmha_mask_visible(&br, 5, 3, 1, 0));
    CHECK(fmha_mask_visible(&br, 5, 3, 2, 0));
    CHECK(!fmha_mask_visible(&br, 5, 3, 2, 1));
    CHECK(fmha_mask_visible(&br, 5, 3, 4, 2));
    CHECK(fmha_mask_visible_pairs(&br, 5, 3) == 1 + 2 + 3);
    fmha_mask_t tl = {-1, 0, FMHA_MASK_ALIGN_TOP_LEFT, 0};
    CHECK(fmha_mask_visible_pairs(&tl, 4, 4) == 10); /* Sq(Sq+1)/2 */
    CHECK(fmha_mask_visible_pairs(&tl, 5, 3) == 1 + 2 + 3 + 3 + 3);
    fmha_mask_t win = {1, 1, FMHA_MASK_ALIGN_TOP_LEFT, 2};
    /* row 4 of 6x6: window {3, 4, 5}, sinks {0, 1} */
    CHECK(fmha_mask_visible(&win, 6, 6, 4, 0) && fmha_mask_visible(&win, 6, 6, 4, 1));
    CHECK(!fmha_mask_visible(&win, 6, 6, 4, 2));
    CHECK(fmha_mask_visible(&win, 6, 6, 4, 5));
    /* sinks obey the right bound: row 0 of a causal window sees only key 0 */
    fmha_mask_t cs = {0, 0, FMHA_MASK_ALIGN_TOP_LEFT, 3};
    CHECK(fmha_mask_visible(&cs, 4, 4, 0, 0) && !fmha_mask_visible(&cs, 4, 4, 0, 1));
    CHECK(!fmha_mask_visible(&cs, 4, 4, 0, 4)); /* out of range */
}

static uint32_t lcg(uint32_t *st) { return *st = *st * 1664525u + 1013904223u; }

/* A mask drawn from r: windows -1 to 10 on each side, either corner, and 0 to 4 sink
 * tokens where sinks is set (none otherwise). */
static fmha_mask_t small_mask(uint32_t r, int sinks)
{
    fmha_mask_t m = {(int64_t)(r >> 8) % 12 - 1, (int64_t)(r >> 16) % 12 - 1,
                     (r >> 4) & 1 ? FMHA_MASK_ALIGN_BOTTOM_RIGHT : FMHA_MASK_ALIGN_TOP_LEFT,
                     sinks ? (int64_t)(r >> 24) % 5 : 0};
    return m;
}

/* visible_pairs equals the brute-force count of visible() over random masks. */
static void test_pairs_match_brute_force(void)
{
    uint32_t st = 12345;
    for (int t = 0; t < 3000; t++) {
        const fmha_mask_t m = small_mask(lcg(&st), 1);
        lcg(&st);
        int64_t sq = (st >> 8) % 17 + 1, sk = (st >> 16) % 17 + 1;
        int64_t n = 0;
        for (int64_t i = 0; i < sq; i++)
            for (int64_t j = 0; j < sk; j++) n += fmha_mask_visible(&m, sq, sk, i, j);
        if (n != fmha_mask_visible_pairs(&m, sq, sk)) {
            printf("  mask (%lld,%lld,%d,%lld) sq %lld sk %lld: brute %lld, pairs %lld\n",
                   (long long)m.left, (long long)m.right, m.align, (long long)m.sink_tokens,
                   (long long)sq, (long long)sk, (long long)n, (long long)fmha_mask_visible_pairs(&m, sq, sk));
            CHECK(0);
            return;
        }
    }
}

/* The per-row count, row by row: the reference for the closed form at sizes where a
 * brute force over pairs is too slow. */
static int64_t pairs_row_by_row(const fmha_mask_t *m, int64_t sq, int64_t sk)
{
    int64_t total = 0, d = m->align == FMHA_MASK_ALIGN_BOTTOM_RIGHT ? sk - sq : 0;
    for (int64_t i = 0; i < sq; i++) {
        int64_t c = i + d, n = 0;
        int64_t hi = m->right < 0 ? sk - 1 : (c + m->right < sk - 1 ? c + m->right : sk - 1);
        int64_t lo = m->left < 0 ? 0 : (c - m->left > 0 ? c - m->left : 0);
        for (int64_t j = 0; j < sk && j <= hi; j++) n += j >= lo || j < m->sink_tokens;
        total += n;
    }
    return total;
}

/* The closed form at long sequences, large windows and sinks; and at 2^40 rows it
 * returns at once (it used to walk every row: a hang under fuzzing, and plan time). */
static void test_pairs_closed_form_at_scale(void)
{
    uint32_t st = 777;
    for (int t = 0; t < 200; t++) {
        st = st * 1664525u + 1013904223u;
        const int64_t sq = (st >> 8) % 3000 + 1;
        st = st * 1664525u + 1013904223u;
        const int64_t sk = (st >> 8) % 3000 + 1;
        st = st * 1664525u + 1013904223u;
        fmha_mask_t m = {(int64_t)(st >> 8) % 700 - 1, (int64_t)(st >> 20) % 700 - 1,
                         (st >> 4) & 1 ? FMHA_MASK_ALIGN_BOTTOM_RIGHT : FMHA_MASK_ALIGN_TOP_LEFT,
                         (int64_t)(st >> 12) % 64};
        if (pairs_row_by_row(&m, sq, sk) != fmha_mask_visible_pairs(&m, sq, sk)) {
            printf("  mask (%lld,%lld,%d,%lld) sq %lld sk %lld: rows %lld, closed form %lld\n", (long long)m.left,
                   (long long)m.right, m.align, (long long)m.sink_tokens, (long long)sq, (long long)sk,
                   (long long)pairs_row_by_row(&m, sq, sk), (long long)fmha_mask_visible_pairs(&m, sq, sk));
            CHECK(0);
            return;
        }
    }
    const int64_t big = (int64_t)1 << 40;
    fmha_mask_t causal = {-1, 0, FMHA_MASK_ALIGN_TOP_LEFT, 0}, none = {-1, -1, FMHA_MASK_ALIGN_TOP_LEFT, 0};
    fmha_mask_t window = {INT64_MAX, INT64_MAX, FMHA_MASK_ALIGN_BOTTOM_RIGHT, INT64_MAX};
    CHECK(fmha_mask_visible_pairs(&causal, big, big) == INT64_MAX); /* 2^79 pairs: saturated */
    CHECK(fmha_mask_visible_pairs(&causal, 1 << 20, 1 << 20) == ((int64_t)1 << 20) * ((1 << 20) + 1) / 2);
    CHECK(fmha_mask_visible_pairs(&none, 3, big) == 3 * big);
    CHECK(fmha_mask_visible_pairs(&window, 5, 7) == 35);
}

static int row_sees_a_key(const fmha_mask_t *m, int64_t sq, int64_t sk, int64_t i)
{
    for (int64_t j = 0; j < sk; j++)
        if (fmha_mask_visible(m, sq, sk, i, j)) return 1;
    return 0;
}

/* The key span of a block of rows (the CPU reference scans only it): every key a row of
 * the block sees lies inside it; and where the block's first and last rows each see a key
 * and there are no sink tokens, it is exactly the keys seen (no wider than the mask
 * needs). */
static void test_key_span_brute_force(void)
{
    uint32_t st = 4242;
    for (int t = 0; t < 4000; t++) {
        const uint32_t r = lcg(&st);
        const fmha_mask_t m = small_mask(r, (r >> 6) % 3 == 0); /* sinks in a third */
        lcg(&st);
        const int64_t sq = (st >> 8) % 17 + 1, sk = (st >> 16) % 17 + 1;
        const int64_t i0 = (st >> 24) % sq, i1 = i0 + 1 + (st >> 28) % (sq - i0);
        int64_t j0, j1, first = -1, last = -1;
        fmha__mask_key_span(&m, sq, sk, i0, i1, &j0, &j1);
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = 0; j < sk; j++)
                if (fmha_mask_visible(&m, sq, sk, i, j)) {
                    if (first < 0 || j < first) first = j;
                    if (j > last) last = j;
                }
        const int covers = first < 0 || (j0 <= first && last < j1);
        const int ends_see = row_sees_a_key(&m, sq, sk, i0) && row_sees_a_key(&m, sq, sk, i1 - 1);
        const int tight = m.sink_tokens > 0 || !ends_see || (j0 == first && j1 == last + 1);
        if (!covers || !tight || j0 > j1) {
            printf("  mask (%lld,%lld,%d,%lld) sq %lld sk %lld rows [%lld, %lld): span [%lld, %lld), seen [%lld, %lld]\n",
                   (long long)m.left, (long long)m.right, m.align, (long long)m.sink_tokens, (long long)sq,
                   (long long)sk, (long long)i0, (long long)i1, (long long)j0, (long long)j1, (long long)first,
                   (long long)last);
            CHECK(0);
            return;
        }
    }
    /* windows near INT64_MAX do not overflow */
    fmha_mask_t huge = {INT64_MAX, INT64_MAX, FMHA_MASK_ALIGN_BOTTOM_RIGHT, 0};
    int64_t j0, j1;
    fmha__mask_key_span(&huge, 5, 9, 1, 4, &j0, &j1);
    CHECK(j0 == 0 && j1 == 9);
}

static void test_problem_set_mask(void)
{
    fmha_problem_t *p;
    fmha_problem_create(&p);
    CHECK_STATUS(fmha_problem_set_mask(p, "b:16,4,2"), FMHA_STATUS_SUCCESS);
    int64_t l, r, a, n;
    fmha_problem_get_i64(p, FMHA_PARAM_WINDOW_LEFT, &l);
    fmha_problem_get_i64(p, FMHA_PARAM_WINDOW_RIGHT, &r);
    fmha_problem_get_i64(p, FMHA_PARAM_MASK_ALIGN, &a);
    fmha_problem_get_i64(p, FMHA_PARAM_SINK_TOKENS, &n);
    CHECK(l == 16 && r == 4 && a == FMHA_MASK_ALIGN_BOTTOM_RIGHT && n == 2);
    CHECK_STATUS(fmha_problem_set_mask(p, "q"), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(fmha_problem_last_error(p), "[rule mask.grammar]");
    fmha_problem_get_i64(p, FMHA_PARAM_WINDOW_LEFT, &l);
    CHECK(l == 16); /* a refused mask leaves the old one */
    fmha_problem_destroy(p);
}

int main(void)
{
    RUN(test_grammar_accepts);
    RUN(test_grammar_rejects);
    RUN(test_visible_by_hand);
    RUN(test_pairs_match_brute_force);
    RUN(test_pairs_closed_form_at_scale);
    RUN(test_key_span_brute_force);
    RUN(test_problem_set_mask);
    TEST_MAIN_END();
}
