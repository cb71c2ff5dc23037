/*
 * test_nvrtc.c: NVRTC (no GPU needed) compiles every forward variant of the default
 * receipt that the CUDA backend runs (the mma.sync path) for sm_80 and sm_90a, into a
 * fresh cache directory; then a second lookup hits the cache, and FMHA_JIT=off turns a
 * miss into NOT_COMPILED. Skips (and says so) when NVRTC is absent.
 * Usage: test_nvrtc [max_variants_per_arch]
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../src/core/kset.h"
#include "../../src/cuda/backend.h"
#include "../../src/cuda/jit.h"
#include "testing.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int max_variants = 1 << 30;

static void compile_receipt(karch_t arch, int sm)
{
    char why[512];
    kfilter_t *f = fmha__filter_compile("family==fwd && pipeline==mmasync", why, sizeof why);
    kset_t s;
    fmha__kset_init(&s);
    CHECK(fmha__enumerate(arch, RECEIPT_DEFAULT, f, &s, why, sizeof why) == 0);
    CHECK(s.count == 72);
    double worst = 0, total = 0;
    int n = 0;
    for (size_t i = 0; i < s.count && n < max_variants; i++, n++) {
        char defs[16][48];
        const char *dp[16];
        int nd = fmha__cuda_key_defines(&s.keys[i], defs);
        for (int d = 0; d < nd; d++) dp[d] = defs[d];
        void *cubin = NULL;
        size_t size = 0;
        int cached = 1;
        char err[4096];
        double t0 = now();
        fmha_status_t st = fmha__jit_cubin(fmha_src_fwd_mma, dp, nd, sm, &cubin, &size, &cached, err, sizeof err);
        double dt = now() - t0;
        total += dt;
        if (dt > worst) worst = dt;
        if (st) printf("  %s: %s\n", s.names[i], err);
        CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
        CHECK(!cached && size > 1000);
        free(cubin);
        /* the second lookup is a cache hit with the same bytes count */
        void *again = NULL;
        size_t size2 = 0;
        CHECK_STATUS(fmha__jit_cubin(fmha_src_fwd_mma, dp, nd, sm, &again, &size2, &cached, err, sizeof err), FMHA_STATUS_SUCCESS);
        CHECK(cached && size2 == size);
        free(again);
    }
    printf("  sm_%d%s: %d variants compiled, mean %.2f s, worst %.2f s\n", sm, sm == 90 ? "a" : "", n, total / (n ? n : 1), worst);
    fmha__kset_free(&s);
    fmha__filter_free(f);
}

static void test_compile_sm80(void) { compile_receipt(KA_SM80, 80); }
static void test_compile_sm90a(void) { compile_receipt(KA_SM90, 90); }

/* The wgmma forward: every default-receipt sm90 wgmmaws instance this build has a source
 * for (fp16/bf16 x hd64/hd128 x masks x lse x mode: 48) compiles for sm_90a. */
static void test_compile_wgmma(void)
{
    char why[512];
    kfilter_t *f = fmha__filter_compile("family==fwd && pipeline==wgmmaws", why, sizeof why);
    kset_t s;
    fmha__kset_init(&s);
    CHECK(fmha__enumerate(KA_SM90, RECEIPT_DEFAULT, f, &s, why, sizeof why) == 0);
    int n = 0, with_source = 0;
    for (size_t i = 0; i < s.count && n < max_variants; i++) {
        const char *entry, *source;
        int smem;
        if (!(source = fmha__cuda_kernel_source(&s.keys[i], &entry, &smem))) continue;
        with_source++;
        CHECK(strcmp(entry, "fmha_fwd_wgmma") == 0 && smem <= 232448);
        char defs[16][48], err[4096];
        const char *dp[16];
        int nd = fmha__cuda_key_defines(&s.keys[i], defs);
        for (int d = 0; d < nd; d++) dp[d] = defs[d];
        void *cubin = NULL;
        size_t size = 0;
        int cached = 1;
        fmha_status_t st = fmha__jit_cubin(source, dp, nd, 90, &cubin, &size, &cached, err, sizeof err);
        if (st) printf("  %s: %s\n", s.names[i], err);
        CHECK_STATUS(st, FMHA_STATUS_SUCCESS);
        CHECK(size > 1000);
        free(cubin);
        n++;
    }
    CHECK(max_variants < 48 || with_source == 48);
    printf("  sm_90a wgmma: %d variants compiled\n", n);
    fmha__kset_free(&s);
    fmha__filter_free(f);
}

static void test_jit_off_and_errors(void)
{
    const char *defs[1] = {"FMHA_HDIM_QK=64"};
    void *cubin = NULL;
    size_t size;
    int cached;
    char err[4096];
    setenv("FMHA_JIT", "off", 1);
    const char *odd[1] = {"FMHA_TILE_N=48"}; /* never compiled above: a miss */
    CHECK_STATUS(fmha__jit_cubin(fmha_src_fwd_mma, odd, 1, 80, &cubin, &size, &cached, err, sizeof err), FMHA_STATUS_NOT_COMPILED);
    CHECK_CONTAINS(err, "FMHA_JIT=off");
    unsetenv("FMHA_JIT");
    /* a compile error comes back with the NVRTC log */
    const char *bad[1] = {"FMHA_HDIM_QK=40"};
    CHECK_STATUS(fmha__jit_cubin(fmha_src_fwd_mma, bad, 1, 80, &cubin, &size, &cached, err, sizeof err), FMHA_STATUS_COMPILE_FAILED);
    CHECK_CONTAINS(err, "head dims must be multiples of 16");
    (void)defs;
}

int main(int argc, char **argv)
{
    const char *why;
    if (!fmha__nvrtc_available(&why)) {
        printf("SKIP: %s\n", why);
        printf("0 passed, 0 failed\n");
        return 0;
    }
    if (argc > 1) max_variants = atoi(argv[1]);
    char dir[] = "/tmp/fmha_nvrtc_test_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("FMHA_CACHE_DIR", dir, 1);
    RUN(test_compile_sm80);
    RUN(test_compile_sm90a);
    RUN(test_compile_wgmma);
    RUN(test_jit_off_and_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("  could not remove %s\n", dir);
    TEST_MAIN_END();
}
