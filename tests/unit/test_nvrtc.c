/* SPDX-License-Identifier: MIT */
/*
 * test_nvrtc.c: NVRTC (no GPU needed) compiles every default-receipt variant of every row
 * of the CUDA family table (src/cuda/families.c) for each arch the row serves (sm_80 and
 * sm_90a for the sm80-path kernels, sm_90a for the wgmma ones), into a fresh cache
 * directory; then a second lookup hits the cache, and FMHA_JIT=off turns a miss into
 * NOT_COMPILED. Skips (and says so) when NVRTC is absent.
 * A row's variants compile on as many threads as CPUs are online (at most 8): the JIT
 * compiles concurrently, as `fmha build -j` does, and this test was the suite's longest.
 * A kernel may also say how much shared memory its layout takes (`extern "C" __constant__
 * int fmha_smem_layout_bytes`, read from the cubin's ELF here; the sm90 forward must): it
 * must be exactly the host's fmha__smem_bytes for the key, which sizes every launch.
 * Usage: test_nvrtc [max_variants_per_row_and_arch]; without the argument,
 * FMHA_TEST_NVRTC_VARIANTS sets it (the sanitizer build's ctest samples 4 a row and arch).
 */
#include <elf.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../src/core/kset.h"
#include "../../src/core/specs.h"
#include "../../src/cuda/family.h"
#include "../../src/cuda/jit.h"
#include "testing.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int max_variants = 1 << 30;

/* Section i's header of an ELF64 image of `size` bytes, bounds-checked; 0 if outside. */
static int elf_section(const unsigned char *elf, size_t size, const Elf64_Ehdr *eh, unsigned i, Elf64_Shdr *sh)
{
    if (i >= eh->e_shnum || eh->e_shoff > size || (size - eh->e_shoff) / sizeof *sh <= i) return 0;
    memcpy(sh, elf + eh->e_shoff + (size_t)i * sizeof *sh, sizeof *sh);
    return sh->sh_offset <= size && sh->sh_size <= size - sh->sh_offset;
}

/* The int that a cubin defines as `extern "C" __constant__ int NAME = value`, from its
 * symbol table and the initialised section the symbol lies in: 1 (and *value) if found,
 * 0 if the cubin has no such symbol, -1 if the image is not what the lookup expects. */
static int cubin_int_symbol(const unsigned char *elf, size_t size, const char *name, int *value)
{
    Elf64_Ehdr eh;
    if (size < sizeof eh || memcmp(elf, ELFMAG, SELFMAG) != 0 || elf[EI_CLASS] != ELFCLASS64) return -1;
    memcpy(&eh, elf, sizeof eh);
    if (eh.e_shentsize != sizeof(Elf64_Shdr)) return -1;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr tab, str;
        if (!elf_section(elf, size, &eh, i, &tab)) return -1;
        if (tab.sh_type != SHT_SYMTAB) continue;
        if (!elf_section(elf, size, &eh, tab.sh_link, &str)) return -1;
        for (size_t k = 0; k < tab.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, elf + tab.sh_offset + k * sizeof sym, sizeof sym);
            if (sym.st_name >= str.sh_size) return -1;
            const char *nm = (const char *)elf + str.sh_offset + sym.st_name;
            if (strnlen(nm, str.sh_size - sym.st_name) == str.sh_size - sym.st_name || strcmp(nm, name) != 0) continue;
            Elf64_Shdr sec;
            if (sym.st_size != sizeof(int) || !elf_section(elf, size, &eh, sym.st_shndx, &sec) ||
                sec.sh_type != SHT_PROGBITS || sym.st_value > sec.sh_size - sizeof(int))
                return -1;
            memcpy(value, elf + sec.sh_offset + sym.st_value, sizeof(int));
            return 1;
        }
    }
    return 0;
}

/* One variant to compile: its define list, and what the compile and a second lookup
 * (a cache hit with the same byte count) gave. */
typedef struct variant {
    const char *name;
    char defs[FMHA_MAX_DEFINES][FMHA_DEFINE_LEN];
    const char *dp[FMHA_MAX_DEFINES];
    int nd;
    fmha_status_t st, st_again;
    size_t size, size_again;
    int cached, cached_again;
    int smem_host;            /* fmha__smem_bytes of the key */
    int layout, layout_found; /* fmha_smem_layout_bytes in the cubin (cubin_int_symbol) */
    double seconds;
    char err[4096];
} variant_t;

typedef struct compile_job {
    const char *source;
    int sm;
    variant_t *v;
    int n, next; /* next: the variant a worker takes (atomic) */
} compile_job_t;

static void compile_one(const compile_job_t *job, variant_t *v)
{
    void *cubin = NULL, *again = NULL;
    const double t0 = now();
    v->st = fmha__jit_cubin(job->source, v->dp, v->nd, job->sm, &cubin, &v->size, &v->cached, v->err, sizeof v->err);
    v->seconds = now() - t0;
    if (!v->st) v->layout_found = cubin_int_symbol(cubin, v->size, "fmha_smem_layout_bytes", &v->layout);
    free(cubin);
    char err2[512];
    v->st_again = fmha__jit_cubin(job->source, v->dp, v->nd, job->sm, &again, &v->size_again, &v->cached_again, err2,
                                  sizeof err2);
    free(again);
}

static void *compile_worker(void *arg)
{
    compile_job_t *job = arg;
    for (int i; (i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->n;) compile_one(job, &job->v[i]);
    return NULL;
}

#define MAX_THREADS 8
static int n_threads = 1; /* compiles at a time (main: the CPUs online, at most MAX_THREADS) */

/* Compile the keys of a receipt that row f accepts on arch (and `also`, a filter
 * expression, unless NULL), at most `limit`, on n_threads threads (the JIT compiles
 * concurrently, as `fmha build -j` does); returns how many. */
static int compile_row(const cuda_family_t *f, karch_t arch, receipt_t receipt, int limit, const char *also)
{
    char why[512], filter[256];
    snprintf(filter, sizeof filter, "family==%s && pipeline==%s%s%s", fmha__family_names[f->family],
             fmha__pipe_names[f->pipeline], also ? " && " : "", also ? also : "");
    kfilter_t *flt = fmha__filter_compile(filter, why, sizeof why);
    kset_t s;
    fmha__kset_init(&s);
    CHECK(flt && fmha__enumerate(arch, receipt, flt, &s, why, sizeof why) == 0);
    const size_t slots = s.count < (size_t)limit ? s.count : (size_t)limit;
    variant_t *v = calloc(slots + 1, sizeof *v); /* a duplicate reuses the slot it was read into */
    CHECK(v != NULL);
    int n = 0;
    for (size_t i = 0; v && i < s.count && n < limit; i++) {
        if (fmha__cuda_family_of(&s.keys[i]) != f) continue;
        variant_t *x = &v[n];
        x->nd = fmha__cuda_key_defines(&s.keys[i], x->defs, x->dp);
        x->smem_host = fmha__smem_bytes(&s.keys[i]);
        CHECK(x->nd > 0 && x->smem_host <= fmha__arch_spec(arch)->smem_per_block);
        /* keys that differ only in what the row's defines leave out (the split stage drops
         * lse, which belongs to the combine) are one variant: compile it once */
        int dup = 0;
        for (int j = 0; j < n && !dup; j++) {
            dup = v[j].nd == x->nd;
            for (int d = 0; dup && d < x->nd; d++) dup = strcmp(v[j].dp[d], x->dp[d]) == 0;
        }
        if (dup) continue;
        x->name = s.names[i];
        n++;
    }
    compile_job_t job = {f->source, fmha__cuda_sm_of(arch), v, n, 0};
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (; started < n_threads - 1 && started < n - 1; started++)
        if (pthread_create(&tid[started], NULL, compile_worker, &job)) break;
    compile_worker(&job);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    double worst = 0, total = 0;
    for (int i = 0; i < n; i++) {
        const variant_t *x = &v[i];
        total += x->seconds;
        if (x->seconds > worst) worst = x->seconds;
        if (x->st) printf("  %s: %s\n", x->name, x->err);
        CHECK_STATUS(x->st, FMHA_STATUS_SUCCESS);
        CHECK(!x->cached && x->size > 1000);
        CHECK_STATUS(x->st_again, FMHA_STATUS_SUCCESS);
        CHECK(x->cached_again && x->size_again == x->size);
        /* the layout a kernel says it takes, as the host sizes it: every kernel that states
         * it, and the sm90 forward must */
        if (x->layout_found || f->source == fmha_src_fwd_wgmma) {
            if (x->layout_found != 1 || x->layout != x->smem_host)
                printf("  %s: the kernel's layout takes %d bytes of shared memory (symbol %s), the host "
                       "sizes %d (src/core/specs.c fmha__smem_bytes)\n",
                       x->name, x->layout,
                       x->layout_found == 1 ? "found"
                       : x->layout_found    ? "unreadable"
                                            : "missing",
                       x->smem_host);
            CHECK(x->layout_found == 1 && x->layout == x->smem_host);
        }
    }
    printf("  %s on sm_%d%s: %d variants compiled, mean %.2f s, worst %.2f s\n", f->name, job.sm,
           job.sm == 90 ? "a" : "", n, total / (n ? n : 1), worst);
    free(v);
    fmha__kset_free(&s);
    fmha__filter_free(flt);
    return n;
}

/* Every row on every arch its pipeline exists on (sm80 and sm90 stand for their paths). */
static void test_compile_every_row(void)
{
    int total = 0;
    for (int r = 0; r < fmha__cuda_family_count; r++) {
        const cuda_family_t *f = &fmha__cuda_families[r];
        const karch_t archs[2] = {KA_SM80, KA_SM90};
        for (int a = 0; a < 2; a++) {
            if (!(fmha__arch_spec(archs[a])->pipelines & (1u << f->pipeline))) continue;
            int n = compile_row(f, archs[a], RECEIPT_DEFAULT, max_variants, NULL);
            /* a row whose tiles all rank below the preferred one (the split-KV stage's
             * 64-row kernel behind the decode kernel): a sample of receipt "all" */
            if (n == 0) n = compile_row(f, archs[a], RECEIPT_ALL, max_variants < 6 ? max_variants : 6, NULL);
            /* the default receipt: 72 sm80-path forward variants per arch, and 72 wgmma
             * ones (fp16/bf16 x hd64/hd128/hd256 x masks x lse x mode; hd256 since its
             * preferred tile, 128 x 80, has a kernel) */
            if (max_variants >= 72 && strcmp(f->name, "fwd_mma") == 0) CHECK(n == 72);
            if (max_variants >= 72 && strcmp(f->name, "fwd_wgmma") == 0) CHECK(n == 72);
            CHECK(n > 0);
            total += n;
        }
    }
    printf("  %d variants over %d table rows\n", total, fmha__cuda_family_count);
}

/* The sm90 forward's layouts the default receipt leaves out: fp8 at each head dim (V
 * transposed, one Q tile) and 16-bit hd256 on its 64-key tile (O staged in the ring): one
 * kernel each, its shared memory checked against the host's as every row's is above. */
static void test_other_wgmma_layouts(void)
{
    const cuda_family_t *f = NULL;
    for (int r = 0; r < fmha__cuda_family_count; r++)
        if (strcmp(fmha__cuda_families[r].name, "fwd_wgmma") == 0) f = &fmha__cuda_families[r];
    CHECK(f != NULL);
    const char *which[] = {"dtype==fp8e4m3 && hdim_qk==64", "dtype==fp8e4m3 && hdim_qk==128",
                           "dtype==fp8e4m3 && hdim_qk==256", "dtype==bf16 && hdim_qk==256 && tile_n==64"};
    for (int i = 0; f && i < 4; i++) CHECK(compile_row(f, KA_SM90, RECEIPT_ALL, 1, which[i]) == 1);
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
        printf("SKIP (exit 77): %s\n", why);
        return 77;
    }
    const char *sample = getenv("FMHA_TEST_NVRTC_VARIANTS");
    if (argc > 1) max_variants = atoi(argv[1]);
    else if (sample && *sample) max_variants = atoi(sample);
    if (max_variants < 1) {
        printf("max variants per row and arch must be a positive integer (argument or FMHA_TEST_NVRTC_VARIANTS)\n");
        return 2;
    }
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
    char dir[] = "/tmp/fmha_nvrtc_test_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("FMHA_CACHE_DIR", dir, 1);
    RUN(test_compile_every_row);
    RUN(test_other_wgmma_layouts);
    RUN(test_jit_off_and_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("  could not remove %s\n", dir);
    TEST_MAIN_END();
}
