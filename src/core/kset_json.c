/* SPDX-License-Identifier: MIT */
/*
 * kset_json.c: declarative kernel sets in CK's allow-list form, parsed with jansson:
 *   {"variant": "fwd", "arch": "sm90",
 *    "trait_config": {"dtype": {"values": ["fp16", "bf16"]}, "hdim_qk": {"values": [128]},
 *                     "mask": {"values": ["*"]}}}
 * A config, a list of configs or {"configs": [...]} expands, over every valid instance
 * of the arch (receipt all), to the keys whose fields are all allowed. "*" allows any
 * value. Sets from several configs merge.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kset.h"

typedef struct allow {
    kfield_t field;
    int any;
    int n;
    int32_t values[64];
} allow_t;

static int parse_value(kfield_t f, json_t *v, int32_t *out)
{
    char buf[64];
    if (json_is_string(v)) return fmha__kfield_parse_value(f, json_string_value(v), out);
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return fmha__kfield_parse_value(f, buf, out);
    }
    if (json_is_boolean(v)) return *out = json_is_true(v), 0;
    return -1;
}

/* Every valid instance of each arch (the catalogue a config filters), enumerated once per
 * process on first use and read-only after: a JSON set used to enumerate 70k keys per
 * call (200 ms; the fuzz harness of this parser ran at 60 inputs a second). */
static pthread_mutex_t catalogue_lock = PTHREAD_MUTEX_INITIALIZER;
static kset_t catalogue[KA_COUNT_];
static int catalogue_ready[KA_COUNT_];

static const kset_t *all_of(karch_t arch, char *why, size_t len)
{
    pthread_mutex_lock(&catalogue_lock);
    if (!catalogue_ready[arch]) {
        fmha__kset_init(&catalogue[arch]);
        if (fmha__enumerate(arch, RECEIPT_ALL, NULL, &catalogue[arch], why, len)) fmha__kset_free(&catalogue[arch]);
        else catalogue_ready[arch] = 1;
    }
    const int ready = catalogue_ready[arch];
    pthread_mutex_unlock(&catalogue_lock);
    return ready ? &catalogue[arch] : NULL;
}

static int expand_one(karch_t arch, json_t *cfg, kset_t *out, char *why, size_t len, int index)
{
    if (!json_is_object(cfg)) {
        snprintf(why, len, "config %d: expected an object with \"variant\" and \"trait_config\"", index);
        return -1;
    }
    json_t *variant = json_object_get(cfg, "variant");
    int32_t fam;
    if (!json_is_string(variant) || fmha__kfield_parse_value(KFIELD_family, json_string_value(variant), &fam)) {
        snprintf(why, len, "config %d: \"variant\" must be a kernel family (fwd, splitkv, combine, pagedkv, appendkv, prefill, bwddotdoo, bwddqdkdv, bwdconvertdq)", index);
        return -1;
    }
    json_t *a = json_object_get(cfg, "arch");
    if (a) {
        int32_t av;
        if (!json_is_string(a) || fmha__kfield_parse_value(KFIELD_arch, json_string_value(a), &av)) {
            snprintf(why, len, "config %d: \"arch\" must be sm80, sm86, sm89 or sm90", index);
            return -1;
        }
        arch = (karch_t)av;
    }
    allow_t allows[KFIELD_COUNT_];
    int na = 0;
    json_t *traits = json_object_get(cfg, "trait_config");
    if (traits && !json_is_object(traits)) {
        snprintf(why, len, "config %d: \"trait_config\" must be an object of {field: {\"values\": [...]}}", index);
        return -1;
    }
    const char *fname;
    json_t *spec;
    json_object_foreach(traits, fname, spec) {
        int f = fmha__kfield_lookup(fname);
        if (f < 0) {
            snprintf(why, len, "config %d: unknown trait '%s' (traits are the kernel-key fields, e.g. dtype, hdim_qk, mask)", index, fname);
            return -1;
        }
        json_t *values = json_object_get(spec, "values");
        if (!json_is_array(values) || json_array_size(values) == 0 || json_array_size(values) > 64) {
            snprintf(why, len, "config %d: trait '%s' needs {\"values\": [1..64 values]}", index, fname);
            return -1;
        }
        allow_t *al = &allows[na++];
        memset(al, 0, sizeof *al);
        al->field = (kfield_t)f;
        size_t i;
        json_t *v;
        json_array_foreach(values, i, v) {
            if (json_is_string(v) && strcmp(json_string_value(v), "*") == 0) {
                al->any = 1;
                continue;
            }
            if (parse_value(al->field, v, &al->values[al->n])) {
                char *txt = json_dumps(v, JSON_ENCODE_ANY);
                snprintf(why, len, "config %d: %s is not a value of trait '%s'", index, txt ? txt : "?", fname);
                free(txt);
                return -1;
            }
            al->n++;
        }
    }
    char ewhy[256];
    const kset_t *all = all_of(arch, ewhy, sizeof ewhy);
    if (!all) {
        snprintf(why, len, "config %d: %s", index, ewhy);
        return -1;
    }
    for (size_t i = 0; i < all->count; i++) {
        const fmha_key_t *k = &all->keys[i];
        if (k->family != fam) continue;
        int ok = 1;
        for (int j = 0; j < na && ok; j++) {
            if (allows[j].any) continue;
            int32_t v = fmha__key_get(k, allows[j].field);
            int hit = 0;
            for (int t = 0; t < allows[j].n; t++) hit |= allows[j].values[t] == v;
            ok = hit;
        }
        if (ok && fmha__kset_add(out, k) < 0) {
            snprintf(why, len, "out of memory");
            return -1;
        }
    }
    return 0;
}

int fmha__kset_from_json(karch_t arch, const char *json_text, kset_t *out, char *why, size_t len)
{
    json_error_t err;
    json_t *root = json_loads(json_text, 0, &err);
    if (!root) {
        snprintf(why, len, "kernel-set JSON: %s at line %d, column %d", err.text, err.line, err.column);
        return -1;
    }
    json_t *list = root;
    if (json_is_object(root) && json_object_get(root, "configs")) list = json_object_get(root, "configs");
    int rc = 0;
    if (json_is_array(list)) {
        size_t i;
        json_t *cfg;
        json_array_foreach(list, i, cfg) {
            if ((rc = expand_one(arch, cfg, out, why, len, (int)i))) break;
        }
    } else {
        rc = expand_one(arch, list, out, why, len, 0);
    }
    json_decref(root);
    return rc;
}
