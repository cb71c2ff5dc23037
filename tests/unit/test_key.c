/* SPDX-License-Identifier: MIT */
/*
 * test_key.c: the kernel key. Names round-trip exactly for every enumerated instance of
 * every arch; names are unique; keys differing in any one field get different names;
 * malformed names are refused with a message; the JSON form parses back field by field.
 */
#include <jansson.h>
#include <stdlib.h>

#include "../../src/core/key.h"
#include "../../src/core/kset.h"
#include "testing.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_round_trip_and_unique_every_instance(void)
{
    const karch_t archs[] = {KA_SM80, KA_SM86, KA_SM89, KA_SM90};
    size_t total = 0;
    for (int a = 0; a < 4; a++) {
        kset_t s;
        fmha__kset_init(&s);
        char why[256];
        CHECK(fmha__enumerate(archs[a], RECEIPT_ALL, NULL, &s, why, sizeof why) == 0);
        int bad = 0;
        for (size_t i = 0; i < s.count; i++) {
            fmha_key_t k;
            char name[512];
            fmha__key_name(&s.keys[i], name, sizeof name);
            if (strcmp(name, s.names[i]) != 0) bad++;
            if (fmha__key_parse(name, &k, why, sizeof why) || !fmha__key_equal(&k, &s.keys[i])) {
                if (bad++ < 3) printf("  round trip failed for %s: %s\n", name, why);
            }
        }
        CHECK(bad == 0);
        char **names = malloc(s.count * sizeof *names);
        memcpy(names, s.names, s.count * sizeof *names);
        qsort(names, s.count, sizeof *names, cmp_str);
        int dup = 0;
        for (size_t i = 1; i < s.count; i++) dup += strcmp(names[i - 1], names[i]) == 0;
        CHECK(dup == 0);
        free(names);
        total += s.count;
        fmha__kset_free(&s);
    }
    CHECK(total > 50000);
}

/* Change one field at a time: every change must change the name and survive a round trip. */
static void test_single_field_changes_name(void)
{
    fmha_key_t base;
    fmha__key_default(&base);
    char base_name[512];
    fmha__key_name(&base, base_name, sizeof base_name);
    for (int f = 0; f < KFIELD_COUNT_; f++) {
        fmha_key_t k = base;
        int32_t v = fmha__key_get(&k, (kfield_t)f);
        const kfield_info_t *fi = fmha__kfield((kfield_t)f);
        int32_t nv = fi->kind == KKIND_BOOL ? !v : fi->kind == KKIND_ENUM ? (v + 1) % fi->table_len : v + 8;
        fmha__key_set(&k, (kfield_t)f, nv);
        char name[512], why[256];
        fmha__key_name(&k, name, sizeof name);
        if (strcmp(name, base_name) == 0) printf("  field %s does not show in the name\n", fi->name);
        CHECK(strcmp(name, base_name) != 0);
        fmha_key_t back;
        CHECK(fmha__key_parse(name, &back, why, sizeof why) == 0 && fmha__key_equal(&back, &k));
        CHECK(fmha__key_hash(&k) != fmha__key_hash(&base));
    }
}

static void test_parse_rejects(void)
{
    const char *bad[] = {"", "fwd_fp16", "fmha_", "fmha_fwd", "fmha_fwd_fp16_hq128_hv128_sm80_mmasync_m128_n64_w4",
                         "fmha_fwd_fp16_hq128_hv128_sm80_mmasync_m128_n64_w4_s2_extra",
                         "fmha_fwd_fp16_hq128_hv128_batch_sm80_mmasync_m128_n64_w4_s2", /* default spelled out */
                         "fmha_fwd_fp17_hq128_hv128_sm80_mmasync_m128_n64_w4_s2",
                         "fmha_fwd_fp16_hqx_hv128_sm80_mmasync_m128_n64_w4_s2",
                         "fmha_fwd_fp16_hq128_hv128_lse_causal_sm80_mmasync_m128_n64_w4_s2" /* out of order */};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fmha_key_t k;
        char why[256] = "";
        int rc = fmha__key_parse(bad[i], &k, why, sizeof why);
        if (rc == 0) printf("  accepted '%s'\n", bad[i]);
        CHECK(rc != 0);
        CHECK(why[0] != '\0');
    }
    fmha_key_t k;
    char why[256];
    CHECK(fmha__key_parse("fmha_fwd_bf16_hq128_hv128_causal_lse_sm90_wgmmaws_m128_n128_w12_s2", &k, why, sizeof why) == 0);
    CHECK(k.family == KF_FWD && k.dtype == KD_BF16 && k.mask == KMASK_CAUSAL && k.lse == 1 && k.arch == KA_SM90 &&
          k.pipeline == KPIPE_WGMMAWS && k.tile_m == 128 && k.tile_n == 128 && k.warps == 12 && k.stages == 2);
    /* the public parser agrees */
    char json[1024];
    CHECK_STATUS(fmha_kernel_name_parse("fmha_fwd_bf16_hq128_hv128_causal_lse_sm90_wgmmaws_m128_n128_w12_s2", json, sizeof json, why, sizeof why),
                 FMHA_STATUS_SUCCESS);
    CHECK_CONTAINS(json, "\"mask\":\"causal\"");
    CHECK_STATUS(fmha_kernel_name_parse("fmha_nope", json, sizeof json, why, sizeof why), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(why, "fmha_nope");
}

static void test_json_parses_back(void)
{
    fmha_key_t k;
    fmha__key_default(&k);
    k.family = KF_SPLITKV, k.paged = KP_CSR, k.max_splits_log2 = 7, k.softcap = 1, k.arch = KA_SM90;
    char text[2048];
    fmha__key_json(&k, text, sizeof text);
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    CHECK(o != NULL);
    for (int f = 0; o && f < KFIELD_COUNT_; f++) {
        const kfield_info_t *fi = fmha__kfield((kfield_t)f);
        json_t *v = json_object_get(o, fi->name);
        CHECK(v != NULL);
        int32_t got = -1;
        if (json_is_string(v)) fmha__kfield_parse_value((kfield_t)f, json_string_value(v), &got);
        else if (json_is_boolean(v)) got = json_is_true(v);
        else got = (int32_t)json_integer_value(v);
        CHECK(got == fmha__key_get(&k, (kfield_t)f));
    }
    json_decref(o);
}

int main(void)
{
    RUN(test_round_trip_and_unique_every_instance);
    RUN(test_single_field_changes_name);
    RUN(test_parse_rejects);
    RUN(test_json_parses_back);
    TEST_MAIN_END();
}
