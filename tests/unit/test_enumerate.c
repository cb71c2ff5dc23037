/* SPDX-License-Identifier: MIT */
/*
 * test_enumerate.c: enumeration counts per arch, receipt and family (locked: a change to
 * the tile tables, rules or receipts shows up here as a reviewed diff), every enumerated
 * key passes every rule, the filter language, and declarative JSON kernel sets.
 */
#include <stdlib.h>

#include "../../src/core/kset.h"
#include "../../src/core/rules.h"
#include "../../src/core/specs.h"
#include "testing.h"

static const struct {
    const char *arch, *receipt;
    size_t per_family[KF_COUNT_]; /* fwd splitkv combine pagedkv appendkv prefill dotdoo dqdkdv convertdq */
} COUNTS[] = {
    {"sm80", "default", {72, 48, 24, 72, 36, 36, 12, 24, 12}},
    {"sm80", "flash", {3840, 1536, 48, 1920, 84, 0, 24, 1728, 48}},
    {"sm80", "pytorch", {1280, 0, 0, 0, 0, 0, 24, 864, 48}},
    {"sm80", "serving", {3840, 4608, 48, 7680, 126, 3840, 0, 0, 0}},
    {"sm80", "training", {5760, 0, 0, 0, 0, 0, 24, 3456, 48}},
    {"sm80", "fp8", {0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {"sm80", "all", {11520, 6912, 48, 11520, 126, 5760, 24, 6912, 48}},
    {"sm86", "default", {72, 72, 24, 72, 36, 36, 12, 12, 12}},
    {"sm86", "flash", {2688, 1728, 48, 1344, 84, 0, 24, 192, 48}},
    {"sm86", "pytorch", {896, 0, 0, 0, 0, 0, 24, 96, 48}},
    {"sm86", "serving", {2688, 5184, 48, 5376, 126, 2688, 0, 0, 0}},
    {"sm86", "training", {4032, 0, 0, 0, 0, 0, 24, 384, 48}},
    {"sm86", "fp8", {0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {"sm86", "all", {8064, 7776, 48, 8064, 126, 4032, 24, 768, 48}},
    {"sm89", "default", {72, 72, 24, 72, 36, 36, 12, 12, 12}},
    {"sm89", "flash", {2688, 1728, 48, 1344, 84, 0, 24, 192, 48}},
    {"sm89", "pytorch", {896, 0, 0, 0, 0, 0, 24, 96, 48}},
    {"sm89", "serving", {2688, 5184, 48, 5376, 126, 2688, 0, 0, 0}},
    {"sm89", "training", {4032, 0, 0, 0, 0, 0, 24, 384, 48}},
    {"sm89", "fp8", {0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {"sm89", "all", {8064, 7776, 48, 8064, 126, 4032, 24, 768, 48}},
    {"sm90", "default", {144, 144, 24, 144, 36, 72, 12, 60, 12}},
    {"sm90", "flash", {6144, 2832, 48, 3072, 84, 0, 24, 2304, 48}},
    {"sm90", "pytorch", {2048, 0, 0, 0, 0, 0, 24, 1152, 48}},
    {"sm90", "serving", {6288, 8544, 48, 12288, 126, 6144, 0, 0, 0}},
    {"sm90", "training", {9216, 0, 0, 0, 0, 0, 24, 4608, 48}},
    {"sm90", "fp8", {144, 0, 0, 0, 0, 0, 0, 0, 0}},
    {"sm90", "all", {18576, 12816, 48, 18432, 126, 9216, 24, 9216, 48}},
};

static void test_counts_per_receipt_and_family(void)
{
    for (size_t c = 0; c < sizeof COUNTS / sizeof COUNTS[0]; c++) {
        kset_t s;
        fmha__kset_init(&s);
        char why[256];
        CHECK(fmha__enumerate((karch_t)fmha__arch_lookup(COUNTS[c].arch), (receipt_t)fmha__receipt_lookup(COUNTS[c].receipt),
                              NULL, &s, why, sizeof why) == 0);
        size_t per[KF_COUNT_] = {0};
        for (size_t i = 0; i < s.count; i++) per[s.keys[i].family]++;
        for (int f = 0; f < KF_COUNT_; f++)
            if (per[f] != COUNTS[c].per_family[f]) {
                printf("  %s %s %s: %zu kernels, locked %zu\n", COUNTS[c].arch, COUNTS[c].receipt, fmha__family_names[f],
                       per[f], COUNTS[c].per_family[f]);
                CHECK(0);
            }
        fmha__kset_free(&s);
    }
}

/* Receipts are subsets of "all", and everything enumerated passes every rule. */
static void test_receipts_are_valid_subsets(void)
{
    kset_t all;
    fmha__kset_init(&all);
    char why[256];
    fmha__enumerate(KA_SM90, RECEIPT_ALL, NULL, &all, why, sizeof why);
    int invalid = 0;
    for (size_t i = 0; i < all.count; i++) invalid += fmha__key_check(&all.keys[i], why, sizeof why) != NULL;
    CHECK(invalid == 0);
    for (int r = 0; r < RECEIPT_ALL; r++) {
        kset_t s;
        fmha__kset_init(&s);
        fmha__enumerate(KA_SM90, (receipt_t)r, NULL, &s, why, sizeof why);
        int outside = 0;
        for (size_t i = 0; i < s.count; i++) outside += fmha__kset_find(&all, &s.keys[i]) < 0;
        CHECK(outside == 0);
        CHECK(s.count < all.count);
        fmha__kset_free(&s);
    }
    fmha__kset_free(&all);
    CHECK(fmha__enumerate(KA_CPU, RECEIPT_ALL, NULL, &all, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "GPU archs");
}

static size_t count_filtered(const char *expr)
{
    char why[256];
    kfilter_t *f = fmha__filter_compile(expr, why, sizeof why);
    CHECK(f != NULL);
    if (!f) {
        printf("  %s\n", why);
        return 0;
    }
    kset_t s;
    fmha__kset_init(&s);
    fmha__enumerate(KA_SM90, RECEIPT_DEFAULT, f, &s, why, sizeof why);
    size_t n = s.count;
    /* every kept key satisfies the filter, checked independently below by the callers */
    fmha__kset_free(&s);
    fmha__filter_free(f);
    return n;
}

static void test_filter_language(void)
{
    size_t fwd = count_filtered("family==fwd");
    CHECK(fwd == 144);
    CHECK(count_filtered("family==fwd && dtype==bf16") == 72);
    CHECK(count_filtered("family==fwd && dtype==bf16 && hdim_qk==128") == 24);
    CHECK(count_filtered("family == fwd && !lse") == 72);
    CHECK(count_filtered("family==fwd && (mask==causal || mask==window)") == 96);
    CHECK(count_filtered("family==fwd && hdim_qk>=128 && hdim_qk<256") == 48);
    CHECK(count_filtered("family==fwd && pipeline!=mmasync") == 72);
    CHECK(count_filtered("lse") + count_filtered("!lse") == count_filtered("tile_m>0"));
    const char *bad[] = {"hdim==128", "dtype==fp64", "family==fwd &&", "(family==fwd", "family==fwd)", "==3", "mask=causal"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[256] = "";
        kfilter_t *f = fmha__filter_compile(bad[i], why, sizeof why);
        if (f) printf("  filter '%s' was accepted\n", bad[i]);
        CHECK(f == NULL);
        CHECK_CONTAINS(why, "filter '");
        fmha__filter_free(f);
    }
    char why[256];
    fmha__filter_compile("hdim==128", why, sizeof why);
    CHECK_CONTAINS(why, "unknown field 'hdim'");
}

static void test_json_sets(void)
{
    kset_t s;
    char why[512];
    fmha__kset_init(&s);
    const char *one = "{\"variant\": \"fwd\", \"trait_config\": {\"dtype\": {\"values\": [\"bf16\"]},"
                      " \"hdim_qk\": {\"values\": [128]}, \"mask\": {\"values\": [\"causal\"]},"
                      " \"bias\": {\"values\": [\"nobias\"]}, \"softcap\": {\"values\": [false]}, \"sink\": {\"values\": [0]},"
                      " \"dropout\": {\"values\": [false]}, \"mode\": {\"values\": [\"*\"]}}}";
    CHECK(fmha__kset_from_json(KA_SM90, one, &s, why, sizeof why) == 0);
    /* 2 modes x 2 lse x tiles for hd128 on sm90 (mmasync: 4, wgmmaws: 1) */
    CHECK(s.count == 2 * 2 * 5);
    for (size_t i = 0; i < s.count; i++)
        CHECK(s.keys[i].family == KF_FWD && s.keys[i].dtype == KD_BF16 && s.keys[i].hdim_qk == 128 &&
              s.keys[i].mask == KMASK_CAUSAL && !s.keys[i].bias);
    size_t first = s.count;
    /* a list merges, duplicates once */
    char two[2048];
    snprintf(two, sizeof two, "{\"configs\": [%s, {\"variant\": \"combine\", \"trait_config\": {\"dtype\": {\"values\": [\"fp16\"]}}}]}", one);
    kset_t t;
    fmha__kset_init(&t);
    CHECK(fmha__kset_from_json(KA_SM90, two, &t, why, sizeof why) == 0);
    CHECK(t.count == first + 24); /* combine fp16: 6 distinct hdim_v x 2 modes x 2 lse */
    CHECK(fmha__kset_merge(&t, &s) == 0 && t.count == first + 24);
    fmha__kset_free(&t);
    fmha__kset_free(&s);
    const char *bad[][2] = {{"{", "kernel-set JSON"},
                            {"{\"variant\": \"nope\"}", "\"variant\" must be a kernel family"},
                            {"{\"variant\": \"fwd\", \"trait_config\": {\"colour\": {\"values\": [1]}}}", "unknown trait 'colour'"},
                            {"{\"variant\": \"fwd\", \"trait_config\": {\"mask\": {\"values\": [\"sideways\"]}}}", "is not a value of trait 'mask'"},
                            {"{\"variant\": \"fwd\", \"trait_config\": {\"mask\": [1]}}", "needs {\"values\""},
                            {"{\"variant\": \"fwd\", \"arch\": \"sm70\"}", "\"arch\" must be"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fmha__kset_init(&s);
        why[0] = '\0';
        CHECK(fmha__kset_from_json(KA_SM90, bad[i][0], &s, why, sizeof why) != 0);
        CHECK_CONTAINS(why, bad[i][1]);
        fmha__kset_free(&s);
    }
}

static void test_public_set_api(void)
{
    fmha_kernel_set_t *s = NULL;
    char why[256];
    CHECK_STATUS(fmha_kernel_set_enumerate("sm90", "all", "hdim_qk==128 && dtype==bf16", &s, why, sizeof why), FMHA_STATUS_SUCCESS);
    size_t n = fmha_kernel_set_count(s);
    CHECK(n > 100);
    for (size_t i = 0; i < n; i++) CHECK(strstr(fmha_kernel_set_name(s, i), "_bf16_hq128_") != NULL);
    CHECK(fmha_kernel_set_name(s, n) == NULL && fmha_kernel_set_family(s, n) == NULL);
    fmha_kernel_set_destroy(s);
    CHECK_STATUS(fmha_kernel_set_enumerate("sm70", "all", NULL, &s, why, sizeof why), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(why, "arch 'sm70'");
    CHECK_STATUS(fmha_kernel_set_enumerate("sm90", "everything", NULL, &s, why, sizeof why), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(why, "receipt 'everything'");
    CHECK_STATUS(fmha_kernel_set_enumerate("sm90", "all", "dtype==", &s, why, sizeof why), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(s == NULL);
}

int main(void)
{
    RUN(test_counts_per_receipt_and_family);
    RUN(test_receipts_are_valid_subsets);
    RUN(test_filter_language);
    RUN(test_json_sets);
    RUN(test_public_set_api);
    TEST_MAIN_END();
}
