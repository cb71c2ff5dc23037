/* SPDX-License-Identifier: MIT */
/* conformance.c: the driver every GPU conformance binary shares (conformance.h). */
#include "conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/key.h"
#include "../../src/core/specs.h"

/* The environment's say in which of the grid's cases run (conformance.h): CONF_FIRST=N
 * starts at case N (1-based), counting the cases before it as skipped, to resume a long
 * grid where a run stopped; CONF_SHARD=I/N runs only cases I + 1, I + 1 + N, ... (I from
 * 0), so that N processes share one grid: most of a long grid's time is the JIT
 * compiling its variants one after another (perf-notes run 170), which shards do side by
 * side. 0 when both are well formed, empty or unset. */
static int parse_case_env(conformance_t *t)
{
    const char *first = getenv("CONF_FIRST"), *shard = getenv("CONF_SHARD");
    char extra;
    t->first = 0, t->shard = 0, t->shards = 1;
    if (first && *first && (sscanf(first, "%ld%c", &t->first, &extra) != 1 || t->first < 0)) {
        fprintf(stderr, "CONF_FIRST=%s: expected a case number (1-based, or 0 for all)\n", first);
        return -1;
    }
    if (shard && *shard &&
        (sscanf(shard, "%ld/%ld%c", &t->shard, &t->shards, &extra) != 2 || t->shards < 1 || t->shard < 0 ||
         t->shard >= t->shards)) {
        fprintf(stderr, "CONF_SHARD=%s: expected I/N with 0 <= I < N\n", shard);
        return -1;
    }
    return 0;
}

int conformance_skip(conformance_t *t, int64_t d, int forced)
{
    if (t->passed + t->failed + t->listed >= t->max_cases || (t->only_hdim && d != t->only_hdim)) return 1;
    if (forced) {
        t->rerun++;
        return !t->case_runs;
    }
    t->seen++, t->rerun = 0;
    t->case_runs = t->seen >= t->first && (t->seen - 1) % t->shards == t->shard;
    return !t->case_runs;
}

/* "case N" or, for its R-th forced re-run, "case N.R" (conformance.h). */
static void print_case_number(const conformance_t *t)
{
    printf("case %ld", t->seen);
    if (t->rerun) printf(".%d", t->rerun);
}

void conformance_case_line(const conformance_t *t, int small_l2, const char *cli, const char *tail)
{
    print_case_number(t);
    printf(": %s%s%s\n", small_l2 ? "FMHA_L2_BYTES=1 " : "", cli, tail);
}

/* A note after a case that took 5 s or more (the JIT, mostly), so that a grid's log
 * shows where its time went; plan_ms < 0: not known. */
static void note_time(double started_ms, double plan_ms)
{
    const double s = (run_now_ms() - started_ms) / 1e3;
    if (s < 5) return;
    if (plan_ms >= 0)
        printf("  (%.1f s, of which the plan %.1f s)\n", s, plan_ms / 1e3);
    else
        printf("  (%.1f s)\n", s);
}

int conformance_listed(conformance_t *t, fmha_status_t st)
{
    if (st) {
        printf("not listed: ");
        print_case_number(t);
        printf(": %s: %s\n", fmha_status_name(st), fmha_context_last_error(t->ctx));
        t->failed++;
        return 0;
    }
    t->listed++;
    return 1;
}

static void count(conformance_t *t, int ok, int forced)
{
    ok ? t->passed++ : t->failed++;
    if (forced) ok ? t->forced_passed++ : t->forced_failed++;
}

int conformance_fwd(conformance_t *t, const fwd_config_t *c, const char *force, char *chosen, size_t chosen_len)
{
    if (chosen && chosen_len) chosen[0] = '\0';
    if (conformance_skip(t, c->d, force != NULL)) return 0;
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .force_kernel = force};
    if (t->list) return conformance_listed(t, fwd_run_list(c, t->ctx, &opt, stdout, chosen, chosen_len));
    const double started = run_now_ms();
    fwd_run_t r;
    /* the grid's position decides, not the process's count, so that shards and CONF_FIRST
     * run each case on the context a whole run gives it */
    const int small_l2 = t->ctx_small_l2 && (t->seen + t->rerun) % 2 == 0;
    fmha_status_t st = fwd_run_prepare(&r, c, small_l2 ? t->ctx_small_l2 : t->ctx, &opt);
    conformance_case_line(t, small_l2, r.cli, "");
    if (!st && chosen) snprintf(chosen, chosen_len, "%s", fmha_plan_kernel_name(r.plan, 0));
    if (!st && !fwd_run_execute(&r)) fwd_run_check(&r, NULL);
    if (!r.pass) {
        fwd_run_report(&r, stdout);
        if (small_l2) printf("  (the command reproduces it with FMHA_L2_BYTES=1 in its environment)\n");
    }
    count(t, r.pass, force != NULL);
    note_time(started, r.plan_ms);
    fwd_run_release(&r);
    return r.pass;
}

/* The same key on sm90's other pipeline: wgmma for a mma.sync choice (head dims 64 / 128 /
 * 256 with tiles m192_n128_w16, m128_n128_w12, m128_n64_w12; no dropout), and, when
 * both_ways, mma.sync with specs.c's first large-shared-memory tile for a wgmma one.
 * 0 when there is none. */
static int other_pipeline(const char *chosen, const fwd_config_t *c, int both_ways, char *out, size_t len)
{
    const char *arch = strstr(chosen, "_sm90_");
    if (!arch || strncmp(chosen, "fmha_fwd_", 9) != 0) return 0;
    const int prefix = (int)(arch - chosen);
    if (strstr(chosen, "_wgmmaws_")) {
        if (!both_ways) return 0;
        const char *tile = c->d == 64 ? "m128_n64_w4_s2" : c->d == 128 ? "m128_n32_w4_s2" : "m128_n64_w8_s2";
        snprintf(out, len, "%.*s_sm90_mmasync_%s", prefix, chosen, tile);
        return 1;
    }
    if (c->p_drop > 0 || c->d != c->d_v || (c->d != 64 && c->d != 128 && c->d != 256)) return 0;
    const char *tile = c->d == 64 ? "m192_n128_w16_s2" : c->d == 128 ? "m128_n128_w12_s2" : "m128_n64_w12_s2";
    snprintf(out, len, "%.*s_sm90_wgmmaws_%s", prefix, chosen, tile);
    return 1;
}

/* The wgmma forward's other key tile at head dim 256, 80 for 64 and 64 for 80: the
 * selector takes 80 for unmasked and long masked problems, 64 for short masked ones
 * (heuristics.c), so that both tiles see every case whichever it chose. 0 for any other
 * kernel. */
static int other_wgmma_tile(const char *kernel, char *out, size_t len)
{
    static const char n64[] = "_sm90_wgmmaws_m128_n64_", n80[] = "_sm90_wgmmaws_m128_n80_";
    _Static_assert(sizeof n64 == sizeof n80, "the two fragments swap in place");
    if (strncmp(kernel, "fmha_fwd_", 9) != 0 || !strstr(kernel, "_hq256_hv256_")) return 0;
    const char *at = strstr(kernel, n64), *to = n80;
    if (!at) at = strstr(kernel, n80), to = n64;
    if (!at) return 0;
    snprintf(out, len, "%.*s%s%s", (int)(at - kernel), kernel, to, at + sizeof n64 - 1);
    return 1;
}

/* A decode-shaped fwd or fwd_pagedkv problem that the library planned as split-KV
 * (src/core/plan.c, decode_route): the family's own mma.sync kernel of the same features,
 * with the first tile specs.c lists for it, which a forced name still reaches. 0 when the
 * chosen kernel is not split-KV or the family is neither. */
static int own_kernel_of_routed(const char *chosen, const fwd_config_t *c, char *out, size_t len)
{
    fmha_key_t k;
    char why[256];
    tile_t tiles[MAX_TILES];
    const kfamily_t fam = c->family == FMHA_FAMILY_FWD           ? KF_FWD
                          : c->family == FMHA_FAMILY_FWD_PAGEDKV ? KF_PAGEDKV
                                                                 : KF_SPLITKV;
    if (fam == KF_SPLITKV || strncmp(chosen, "fmha_splitkv_", 13) != 0 || fmha__key_parse(chosen, &k, why, sizeof why))
        return 0;
    if (fmha__tiles((karch_t)k.arch, KPIPE_MMASYNC, fam, (kdtype_t)k.dtype, k.hdim_qk, k.hdim_v, tiles) < 1) return 0;
    k.family = fam, k.pipeline = KPIPE_MMASYNC, k.max_splits_log2 = 0;
    k.lse = c->lse != 0, k.sink = c->sink != 0; /* split-KV keys leave the LSE to the combine */
    k.tile_m = tiles[0].m, k.tile_n = tiles[0].n, k.warps = tiles[0].warps, k.stages = tiles[0].stages;
    const int written = fmha__key_name(&k, out, len);
    return written > 0 && (size_t)written < len;
}

int conformance_fwd_pipelines(conformance_t *t, const fwd_config_t *c, int both_ways)
{
    char chosen[256], alt[256], tile[256];
    int ok = conformance_fwd(t, c, NULL, chosen, sizeof chosen);
    const int other = other_pipeline(chosen, c, both_ways, alt, sizeof alt);
    if (other) ok &= conformance_fwd(t, c, alt, NULL, 0);
    /* whichever ran the wgmma kernel at head dim 256, the other key tile too */
    if (other_wgmma_tile(chosen, tile, sizeof tile) || (other && other_wgmma_tile(alt, tile, sizeof tile)))
        ok &= conformance_fwd(t, c, tile, NULL, 0);
    /* routed to split-KV: the forward's own kernels, forced, on both pipelines */
    char fwd[256];
    if (own_kernel_of_routed(chosen, c, fwd, sizeof fwd)) {
        ok &= conformance_fwd(t, c, fwd, NULL, 0);
        if (other_pipeline(fwd, c, 0, alt, sizeof alt)) ok &= conformance_fwd(t, c, alt, NULL, 0);
    }
    return ok;
}

/* The split-KV stage's 64-row kernel (FMHA_SPLIT on the forward's mma.sync kernel) for
 * a case the selector gave the decode kernel (rows m16/m32): the same key with the
 * 64-row tile of specs.c's large-shared-memory rows. 0 when the chosen one is not the
 * decode kernel. */
static int split_alternate(const char *chosen, int64_t d, char *out, size_t len)
{
    const char *at = strstr(chosen, "_mmasync_m16_");
    if (!at) at = strstr(chosen, "_mmasync_m32_");
    const char *tail = at ? strstr(at, "_sp") : NULL;
    if (!tail) return 0;
    snprintf(out, len, "%.*s_mmasync_%s%s", (int)(at - chosen), chosen, d <= 128 ? "m64_n128_w4_s2" : "m64_n64_w4_s2",
             tail);
    return 1;
}

int conformance_fwd_split(conformance_t *t, const fwd_config_t *c)
{
    char chosen[256], alt[256];
    int ok = conformance_fwd(t, c, NULL, chosen, sizeof chosen);
    /* a fwd_pagedkv case routed to split-KV: the problem the library planned, for the
     * forced split kernel below (a forced name is not routed); the pagedkv kernel too */
    fwd_config_t routed = *c;
    if (own_kernel_of_routed(chosen, c, alt, sizeof alt)) {
        ok &= conformance_fwd(t, c, alt, NULL, 0);
        routed.family = FMHA_FAMILY_FWD_SPLITKV, routed.num_splits = 0;
    }
    if (split_alternate(chosen, c->d, alt, sizeof alt)) ok &= conformance_fwd(t, &routed, alt, NULL, 0);
    return ok;
}

int conformance_bwd(conformance_t *t, const bwd_config_t *c, const char *force, char *chosen, size_t chosen_len)
{
    if (chosen && chosen_len) chosen[0] = '\0';
    if (conformance_skip(t, c->fwd.d, force != NULL)) return 0;
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .force_kernel = force};
    if (t->list) return conformance_listed(t, bwd_run_list(c, t->ctx, &opt, stdout, chosen, chosen_len));
    const double started = run_now_ms();
    bwd_run_t r;
    fmha_status_t st = bwd_run_prepare(&r, c, t->ctx, &opt);
    conformance_case_line(t, 0, r.cli, "");
    if (!st && chosen) snprintf(chosen, chosen_len, "%s", fmha_plan_kernel_name(r.plan, 1)); /* dq_dk_dv */
    if (!st && !bwd_run_execute(&r)) bwd_run_check(&r, NULL);
    if (!r.pass) bwd_run_report(&r, stdout);
    count(t, r.pass, force != NULL);
    bwd_run_release(&r);
    note_time(started, -1);
    return r.pass;
}

/* The dq_dk_dv stage's other sm90 kernel for a case: mma.sync (specs.c's first
 * large-shared-memory tile) for a wgmma choice; wgmma for a mma.sync choice where
 * bwd_wgmma.cuh has the shape (batch mode, head dims 64 and 128).
 * 0 when there is none. */
int conformance_other_bwd_kernel(const char *chosen, const bwd_config_t *c, char *out, size_t len)
{
    const char *arch = strstr(chosen, "_sm90_");
    if (!arch) return 0;
    const int prefix = (int)(arch - chosen);
    const int64_t d = c->fwd.d;
    if (strstr(chosen, "_wgmmaws_")) {
        snprintf(out, len, "%.*s_sm90_mmasync_%s", prefix, chosen, d == 64 ? "m128_n128_w8_s2" : "m64_n128_w8_s2");
        return 1;
    }
    if (c->fwd.mode == FMHA_MODE_GROUP || d != c->fwd.d_v || (d != 64 && d != 128)) return 0;
    snprintf(out, len, "%.*s_sm90_wgmmaws_%s", prefix, chosen, d == 64 ? "m128_n128_w12_s2" : "m64_n128_w12_s2");
    return 1;
}

int conformance_bwd_pipelines(conformance_t *t, const bwd_config_t *c)
{
    char chosen[256], alt[256];
    int ok = conformance_bwd(t, c, NULL, chosen, sizeof chosen);
    if (conformance_other_bwd_kernel(chosen, c, alt, sizeof alt)) ok &= conformance_bwd(t, c, alt, NULL, 0);
    return ok;
}

int main(int argc, char **argv)
{
    conformance_t t;
    memset(&t, 0, sizeof t);
    t.max_cases = argc > 1 ? atoi(argv[1]) : 1 << 30;
    t.only_hdim = argc > 2 ? atoi(argv[2]) : 0;
    /* "cpu": the same grid on the CPU backend (the driver's own test, in ctest); "list
     * [ARCH]": the kernels the grid plans on a device of ARCH (sm90), on a virtual context */
    const int cpu = argc > 3 && strcmp(argv[3], "cpu") == 0;
    t.list = argc > 3 && strcmp(argv[3], "list") == 0;
    if (parse_case_env(&t)) return 2;
    fmha_status_t st = t.list ? fmha_context_create_virtual(&t.ctx, argc > 4 ? argv[4] : "sm90", 0)
                              : fmha_context_create(&t.ctx, cpu ? FMHA_BACKEND_CPU : FMHA_BACKEND_CUDA, 0);
    if (st) {
        printf("no %s context: %s: %s (%s)\n", t.list ? "virtual" : "CUDA", fmha_status_name(st),
               fmha_context_create_error(), fmha_build_info());
        return 2;
    }
    if (t.list) {
        conformance_cases(&t);
        printf("%d cases listed, %d failed\n", t.listed, t.failed);
        fmha_context_destroy(t.ctx);
        return t.failed ? 1 : 0;
    }
    if (!cpu) {
        /* the second context reads FMHA_L2_BYTES when it is created (docs/env.md) */
        setenv("FMHA_L2_BYTES", "1", 1);
        if (fmha_context_create(&t.ctx_small_l2, FMHA_BACKEND_CUDA, 0)) t.ctx_small_l2 = NULL;
        unsetenv("FMHA_L2_BYTES");
    }
    printf("%s conformance on %s; %s%s\n", conformance_family, fmha_context_arch(t.ctx), fmha_build_info(),
           t.ctx_small_l2 ? "; every other forward case with FMHA_L2_BYTES=1" : "");
    conformance_cases(&t);
    printf("(of which with a forced kernel: %d passed, %d failed)\n", t.forced_passed, t.forced_failed);
    printf("%d passed, %d failed\n", t.passed, t.failed);
    if (t.ctx_small_l2) fmha_context_destroy(t.ctx_small_l2);
    fmha_context_destroy(t.ctx);
    return t.failed ? 1 : 0;
}
