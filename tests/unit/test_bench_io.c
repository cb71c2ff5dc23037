/* SPDX-License-Identifier: MIT */
/*
 * test_bench_io.c: the bench engine's files and arithmetic without a GPU: the shape
 * matrix (tiers, {a|b} expansion and its order, every malformed line refused by number),
 * the CSV and JSON writers and readers (a row read back is the row written, quoting,
 * NaN, columns found by name, malformed records named by line), one real measurement on
 * the CPU into a row, and the choice statistics `fmha tune` reports (best per case,
 * geometric-mean slowdown).
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_matrix.h"
#include "bench_measure.h"
#include "bench_result.h"
#include "bench_stats.h"
#include "testing.h"

static void test_matrix_expands_in_order_and_filters_tiers(void)
{
    const char *text = "# a comment\n"
                       "\n"
                       "smoke a/b run -b={1|2} -h={3|4|5} -mask=t:8,0   # trailing comment\n"
                       "full  c   bwd -s=100,0,7\n"
                       "nightly d run -d={64|128}\r\n";
    bench_matrix_t m;
    char why[512];
    CHECK(bench_matrix_parse(text, "t", TIER_SMOKE, &m, why, sizeof why) == 0);
    CHECK(m.n == 6);
    const char *want[] = {"-b=1 -h=3 -mask=t:8,0", "-b=1 -h=4 -mask=t:8,0", "-b=1 -h=5 -mask=t:8,0",
                          "-b=2 -h=3 -mask=t:8,0", "-b=2 -h=4 -mask=t:8,0", "-b=2 -h=5 -mask=t:8,0"};
    for (size_t i = 0; i < m.n && i < 6; i++) {
        CHECK(strcmp(m.cases[i].flags, want[i]) == 0);
        CHECK(m.cases[i].line == 3 && m.cases[i].tier == TIER_SMOKE);
        CHECK(strcmp(m.cases[i].category, "a/b") == 0 && strcmp(m.cases[i].command, "run") == 0);
    }
    bench_matrix_free(&m);
    CHECK(bench_matrix_parse(text, "t", TIER_FULL, &m, why, sizeof why) == 0);
    CHECK(m.n == 7 && strcmp(m.cases[6].flags, "-s=100,0,7") == 0 && strcmp(m.cases[6].command, "bwd") == 0);
    bench_matrix_free(&m);
    CHECK(bench_matrix_parse(text, "t", TIER_NIGHTLY, &m, why, sizeof why) == 0);
    CHECK(m.n == 9 && strcmp(m.cases[8].flags, "-d=128") == 0); /* the \r is not part of the flags */
    bench_matrix_free(&m);
    CHECK(bench_tier_parse("full") == TIER_FULL && bench_tier_parse("weekly") == -1);
}

static void test_matrix_errors_name_the_line(void)
{
    const struct {
        const char *text, *why;
    } bad[] = {
        {"smoke a run -b=1\nweekly a run -b=1\n", "t:2: tier 'weekly'"},
        {"smoke a fwd -b=1\n", "t:1: command 'fwd'"},
        {"smoke a run -b={1|2\n", "not closed"},
        {"smoke a run -b={1|{2}}\n", "not closed"},
        {"smoke a run -b={1||2}\n", "an empty item"},
        {"smoke a run -b={}\n", "an empty item"},
        {"smoke a run -b=1}\n", "without its '{'"},
        {"smoke a\n", "t:1: expected '<tier> <category> <command> <flags...>'"},
        {"smoke a run -a={1|2|3|4|5|6|7|8|9} -b={1|2|3|4|5|6|7|8} -c={1|2|3|4|5|6|7|8} -d={1|2|3|4|5|6|7|8}\n",
         "more than 4096 cases"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bench_matrix_t m;
        char why[512] = "";
        CHECK(bench_matrix_parse(bad[i].text, "t", TIER_NIGHTLY, &m, why, sizeof why) == -1);
        CHECK_CONTAINS(why, bad[i].why);
        CHECK(m.n == 0 && m.cases == NULL);
    }
    /* a tier left out is still checked: a typo anywhere fails every run */
    bench_matrix_t m;
    char why[512] = "";
    CHECK(bench_matrix_parse("smoke a run -b=1\nnightly b run -b={1|\n", "t", TIER_SMOKE, &m, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "t:2:");
}

static bench_row_t sample_row(void)
{
    bench_row_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.library, sizeof r.library, "fmha");
    snprintf(r.device, sizeof r.device, "sm90");
    snprintf(r.tier, sizeof r.tier, "smoke");
    snprintf(r.category, sizeof r.category, "fwd/window");
    snprintf(r.command, sizeof r.command, "run");
    snprintf(r.flags, sizeof r.flags, "-b=2 -mask=t:128,0 -s=100,0,7");
    snprintf(r.family, sizeof r.family, "fwd");
    snprintf(r.requested, sizeof r.requested, "fmha_fwd_bf16_hq128_hv128_causal_sm90_wgmmaws_m128_n128_w12_s2");
    snprintf(r.kernel, sizeof r.kernel, "%s", r.requested);
    snprintf(r.status, sizeof r.status, "ok");
    snprintf(r.verify, sizeof r.verify, "fail");
    snprintf(r.error, sizeof r.error, "check: \"o\" err 1, tol 0.5\nsecond line, with a comma");
    r.batch = 2, r.seqlen_kv = 1LL << 40, r.selector_choice = 1, r.samples = 10, r.inner = 7;
    r.min_ms = 0.1, r.median_ms = 1.0 / 3.0, r.max_ms = 1e-9, r.tflops = 612.25, r.max_err = NAN, r.tol = INFINITY;
    bench_row_set_key(&r, r.kernel);
    return r;
}

static int rows_equal(const bench_row_t *a, const bench_row_t *b)
{
    return strcmp(a->flags, b->flags) == 0 && strcmp(a->error, b->error) == 0 && strcmp(a->kernel, b->kernel) == 0 &&
           strcmp(a->category, b->category) == 0 && a->seqlen_kv == b->seqlen_kv && a->inner == b->inner &&
           a->median_ms == b->median_ms && a->max_ms == b->max_ms && a->tflops == b->tflops &&
           a->selector_choice == b->selector_choice && memcmp(a->key, b->key, sizeof a->key) == 0;
}

static void test_csv_round_trip(void)
{
    bench_row_t r = sample_row();
    CHECK(strcmp(r.key[16], "wgmmaws") == 0 && strcmp(r.key[17], "128") == 0 && strcmp(r.key[5], "causal") == 0);
    char path[] = "/tmp/fmha_bench_csv_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    bench_csv_header(f);
    bench_csv_row(f, &r);
    r.inner = 8;
    bench_csv_row(f, &r);
    fclose(f);
    bench_row_t *rows = NULL;
    size_t n = 0;
    char why[512];
    CHECK(bench_csv_read(path, &rows, &n, why, sizeof why) == 0);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(rows_equal(&rows[1], &r));
        CHECK(isnan(rows[0].max_err) && isinf(rows[0].tol));
        CHECK(rows[0].inner == 7);
    }
    free(rows);

    /* columns by name: another order, an unknown column, a missing one */
    f = fopen(path, "w");
    fprintf(f, "extra,requested,flags,median_ms\nx,selector,\"-b=1,2\",0.5\n\n");
    fclose(f);
    CHECK(bench_csv_read(path, &rows, &n, why, sizeof why) == 0);
    CHECK(n == 1 && strcmp(rows[0].flags, "-b=1,2") == 0 && rows[0].median_ms == 0.5 && rows[0].kernel[0] == 0);
    free(rows);

    /* malformed: a short record, an open quote, not a bench CSV */
    f = fopen(path, "w");
    fprintf(f, "requested,flags\nselector,a\nselector\n");
    fclose(f);
    CHECK(bench_csv_read(path, &rows, &n, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "line 3 has 1 fields; the header has 2");
    f = fopen(path, "w");
    fprintf(f, "requested,flags\nselector,\"open\n");
    fclose(f);
    CHECK(bench_csv_read(path, &rows, &n, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "a quote is left open");
    f = fopen(path, "w");
    fprintf(f, "a,b\n1,2\n");
    fclose(f);
    CHECK(bench_csv_read(path, &rows, &n, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "not a bench CSV");
    unlink(path);
    CHECK(bench_csv_read(path, &rows, &n, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "cannot read");
}

static void test_json_round_trip(void)
{
    bench_row_t r = sample_row(), back;
    char *text = bench_row_json(&r);
    CHECK(text != NULL);
    CHECK_CONTAINS(text, "\"max_err\":null"); /* JSON has no NaN */
    CHECK_CONTAINS(text, "\"seqlen_kv\":1099511627776");
    char why[256];
    CHECK(bench_row_from_json(text, &back, why, sizeof why) == 0);
    CHECK(rows_equal(&r, &back) && isnan(back.max_err));
    free(text);
    CHECK(bench_row_from_json("[1]", &back, why, sizeof why) == -1);
    CHECK(bench_row_from_json("{\"flags\": ", &back, why, sizeof why) == -1);

    char path[] = "/tmp/fmha_bench_json_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    bench_row_t rows[2] = {sample_row(), sample_row()};
    CHECK(bench_json_write(f, "{\"tool\": \"test\"}", rows, 2) == 0);
    fclose(f);
    f = fopen(path, "r");
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    CHECK_CONTAINS(buf, "\"metadata\": {");
    CHECK_CONTAINS(buf, "\"tool\": \"test\"");
    CHECK_CONTAINS(buf, "\"rows\": [");
    CHECK_CONTAINS(buf, "\"key_pipeline\": \"wgmmaws\"");
}

/* One real row on the CPU: the spec parses, the case plans, runs, checks and is timed. */
static void test_measure_on_the_cpu(void)
{
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    bench_spec_t s;
    char why[1024];
    CHECK(bench_spec_parse(&s, "run", "-prec=bf16 -b=2 -h=4 -h_k=2 -d=32 -s=37 -s_k=50 -mask=b", why, sizeof why) == 0);
    bench_settings_t set = {1, 3, 0.05, 1, 1.0, NULL};
    bench_row_t *r = calloc(1, sizeof *r);
    CHECK(bench_measure(&s, ctx, NULL, &set, r) == 0);
    CHECK(strcmp(r->status, "ok") == 0 && strcmp(r->verify, "pass") == 0);
    CHECK(strcmp(r->kernel, "cpu_ref_fwd") == 0 && strcmp(r->requested, "selector") == 0);
    CHECK(r->samples == 3 && r->min_ms > 0 && r->min_ms <= r->median_ms && r->median_ms <= r->max_ms);
    CHECK(r->max_err <= r->tol && r->tflops > 0 && r->gbps > 0);
    CHECK(strcmp(r->problem_class, "fwd_bf16_hq32_hv32_causal_batch_gqa_sq64_sk64") == 0);
    /* bytes: q, o (2*4*37*32) and k, v (2*2*50*32), bf16 */
    CHECK(fabs(r->mbytes - (2.0 * 4 * 37 * 32 * 2 + 2.0 * 2 * 50 * 32 * 2) * 2 / 1e6) < 1e-9);
    /* over the verify limit: measured, not checked */
    set.verify_max_gflop = 1e-6;
    CHECK(bench_measure(&s, ctx, NULL, &set, r) == 0);
    CHECK(strcmp(r->verify, "skipped") == 0);
    /* a kernel that cannot run it: a failed row naming why */
    CHECK(bench_measure(&s, ctx, "cpu_ref_bwd_dq_dk_dv", &set, r) == -1);
    CHECK(strcmp(r->status, "FMHA_STATUS_NOT_SUPPORTED") == 0);
    CHECK_CONTAINS(r->error, "cpu_ref_bwd_dq_dk_dv");
    bench_spec_release(&s);
    /* flags that say how to run belong to the bench */
    CHECK(bench_spec_parse(&s, "run", "-b=2 -repeat=5", why, sizeof why) == -1);
    CHECK_CONTAINS(why, "-repeat says how to run a case");
    CHECK(bench_spec_parse(&s, "bwd", "-b=2 -page_block_size=16", why, sizeof why) == -1);
    CHECK_CONTAINS(why, "the backward takes contiguous q, k, v");
    CHECK(bench_spec_parse(&s, "fwd", "-b=2", why, sizeof why) == -1);
    free(r);
    fmha_context_destroy(ctx);
}

/* A memo computes a case's naive references once: the next row of the same case checks
 * against them with the same result, and another case (here: other data) computes its own. */
static void test_reference_memo(void)
{
    fmha_context_t *ctx;
    CHECK_STATUS(fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0), FMHA_STATUS_SUCCESS);
    const char *flags[] = {"-prec=fp16 -b=2 -h=4 -h_k=2 -d=32 -s=37 -s_k=50 -mask=t:5,3 -lse=1",
                           "-prec=fp16 -b=2 -h=4 -h_k=2 -d=32 -s=37 -s_k=50 -mask=t:5,3 -lse=1 -seed=7",
                           "-prec=bf16 -mode=1 -b=3 -h=2 -d=16 -s=9,0,21 -s_k=12,5,30"};
    const char *cmds[] = {"run", "run", "bwd"};
    bench_settings_t plain = {0, 1, 0.01, 1, 1.0, NULL}, memo = plain;
    memo.refs = reference_memo_create();
    CHECK(memo.refs != NULL);
    bench_row_t *r = calloc(1, sizeof *r), *alone = calloc(1, sizeof *alone);
    long computed, reused;
    for (int c = 0; c < 3; c++) {
        bench_spec_t s;
        char why[1024];
        CHECK(bench_spec_parse(&s, cmds[c], flags[c], why, sizeof why) == 0);
        CHECK(bench_measure(&s, ctx, NULL, &plain, alone) == 0 && strcmp(alone->verify, "pass") == 0);
        for (int again = 0; again < 2; again++) {
            CHECK(bench_measure(&s, ctx, NULL, &memo, r) == 0 && strcmp(r->verify, "pass") == 0);
            CHECK(r->max_err == alone->max_err && r->tol == alone->tol);
        }
        reference_memo_counts(memo.refs, &computed, &reused);
        CHECK(computed == c + 1 && reused == c + 1);
        bench_spec_release(&s);
    }
    reference_memo_destroy(memo.refs);
    free(r);
    free(alone);
    fmha_context_destroy(ctx);
}

static bench_row_t timed(const char *flags, const char *kernel, double ms, int selector, const char *verify)
{
    bench_row_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.library, sizeof r.library, "fmha");
    snprintf(r.command, sizeof r.command, "run");
    snprintf(r.flags, sizeof r.flags, "%s", flags);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
    snprintf(r.status, sizeof r.status, "ok");
    snprintf(r.verify, sizeof r.verify, "%s", verify);
    r.median_ms = ms, r.selector_choice = selector;
    return r;
}

static void test_choice_statistics(void)
{
    bench_row_t rows[] = {
        timed("-s=1", "a", 1.0, 1, "pass"), timed("-s=1", "b", 2.0, 0, "pass"), /* selector best */
        timed("-s=2", "a", 4.0, 1, "pass"), timed("-s=2", "b", 1.0, 0, "pass"), /* selector 4x slower */
        timed("-s=3", "a", 1.0, 1, "fail"), timed("-s=3", "b", 2.0, 0, "pass"), /* a failed its check */
    };
    snprintf(rows[1].library, sizeof rows[1].library, "fmha");
    bench_row_t sdpa = timed("-s=1", "torch", 0.1, 0, "off");
    snprintf(sdpa.library, sizeof sdpa.library, "torch-sdpa-flash"); /* comparison rows are not candidates */
    bench_row_t all[7];
    memcpy(all, rows, sizeof rows);
    all[6] = sdpa;
    bench_cases_t cs;
    CHECK(bench_cases_group(all, 7, &cs) == 0);
    CHECK(cs.n == 3);
    CHECK(cs.cases[0].best == &all[0] && cs.cases[1].best == &all[3] && cs.cases[2].best == &all[5]);
    bench_choice_stats_t st;
    bench_choice_stats(&cs, bench_recorded_selector, NULL, &st);
    /* case 3: the selector's row failed its check, so its choice is unmeasured */
    CHECK(st.cases == 2 && st.hits == 1 && st.unmeasured == 1);
    CHECK(fabs(st.geomean - 2.0) < 1e-12 && fabs(st.worst - 4.0) < 1e-12 && st.worst_row == &all[2]);
    bench_cases_free(&cs);
}

int main(void)
{
    RUN(test_matrix_expands_in_order_and_filters_tiers);
    RUN(test_matrix_errors_name_the_line);
    RUN(test_csv_round_trip);
    RUN(test_json_round_trip);
    RUN(test_measure_on_the_cpu);
    RUN(test_reference_memo);
    RUN(test_choice_statistics);
    TEST_MAIN_END();
}
