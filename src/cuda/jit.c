/* SPDX-License-Identifier: MIT */
/* jit.c: see jit.h. */
#define _GNU_SOURCE /* dlinfo, realpath */
#include "jit.h"

#include "../core/internal.h"
#include "cache_entry.h"

#include <limits.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

static struct {
    void *lib;
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    int major, minor;
} nv;
static const char *nv_why = "not loaded";
static int nv_loaded;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void *try_open(const char *dir, const char *name)
{
    char path[4200];
    size_t nd = dir ? strlen(dir) : 0, nn = strlen(name);
    if (nd + nn + 2 > sizeof path) return NULL;
    if (dir) {
        memcpy(path, dir, nd);
        path[nd++] = '/';
    }
    memcpy(path + nd, name, nn + 1);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* NVIDIA's Python wheels (nvidia-cuda-nvrtc-cu12/13) put libnvrtc in
 * <prefix>/lib/python3.X/site-packages/nvidia/cuda_nvrtc/lib (cu13: nvidia/cu13/lib). */
static void *open_from_wheels(void)
{
    const char *prefixes[4] = {getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX"), "/usr/local", "/usr"};
    static const char *subdirs[] = {"nvidia/cuda_nvrtc/lib", "nvidia/cu13/lib"};
    for (int i = 0; i < 4; i++) {
        if (!prefixes[i] || !*prefixes[i] || strlen(prefixes[i]) > 1000) continue;
        for (size_t d = 0; d < sizeof subdirs / sizeof subdirs[0]; d++) {
            char pattern[1200];
            glob_t g;
            snprintf(pattern, sizeof pattern, "%s/lib/python3*/*-packages/%s/libnvrtc.so*", prefixes[i], subdirs[d]);
            if (glob(pattern, 0, NULL, &g) == 0) {
                for (size_t k = 0; k < g.gl_pathc; k++) {
                    void *h = dlopen(g.gl_pathv[k], RTLD_NOW | RTLD_LOCAL);
                    if (h) {
                        globfree(&g);
                        return h;
                    }
                }
            }
            globfree(&g);
        }
    }
    return NULL;
}

static const char *const NV_NAMES[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

/* The folders searched before the loader path, in order. Returns their number. */
static int nv_dirs(char dirs[4][2048])
{
    int nd = 0;
    const char *e;
    if ((e = getenv("FMHA_CUDA_PATH")) && *e && strlen(e) < 2000) snprintf(dirs[nd++], 2048, "%.2000s/lib64", e);
    if ((e = getenv("CUDA_HOME")) && *e && strlen(e) < 2000) snprintf(dirs[nd++], 2048, "%.2000s/lib64", e);
    snprintf(dirs[nd++], 2048, "/usr/local/cuda/lib64");
    return nd;
}

static void nv_load(void)
{
    static const char *const *names = NV_NAMES;
    char dirs[4][2048];
    const int nd = nv_dirs(dirs);
    for (int d = 0; d <= nd && !nv.lib; d++)
        for (size_t n = 0; n < sizeof NV_NAMES / sizeof NV_NAMES[0] && !nv.lib; n++)
            nv.lib = try_open(d < nd ? dirs[d] : NULL, names[n]); /* last round: the loader path */
    if (!nv.lib) nv.lib = open_from_wheels();
    if (!nv.lib) {
        nv_why = "NVRTC not found (libnvrtc.so in FMHA_CUDA_PATH, CUDA_HOME, /usr/local/cuda, the loader path or NVIDIA's Python wheels)";
        return;
    }
#define NSYM(f, s)                                 \
    if (!(*(void **)&nv.f = dlsym(nv.lib, s))) {   \
        nv_why = "libnvrtc lacks " s;              \
        return;                                    \
    }
    NSYM(version, "nvrtcVersion");
    NSYM(create, "nvrtcCreateProgram");
    NSYM(compile, "nvrtcCompileProgram");
    NSYM(log_size, "nvrtcGetProgramLogSize");
    NSYM(log, "nvrtcGetProgramLog");
    NSYM(cubin_size, "nvrtcGetCUBINSize");
    NSYM(cubin, "nvrtcGetCUBIN");
    NSYM(destroy, "nvrtcDestroyProgram");
    nv.version(&nv.major, &nv.minor);
    nv_loaded = 1;
    nv_why = "ok";
}

int fmha__nvrtc_available(const char **why)
{
    pthread_once(&nv_once, nv_load);
    if (why) *why = nv_why;
    return nv_loaded;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void cache_dir(char *buf, size_t len)
{
    const char *e;
    if ((e = getenv("FMHA_CACHE_DIR")) && *e) snprintf(buf, len, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) snprintf(buf, len, "%s/fmha", e);
    else snprintf(buf, len, "%s/.cache/fmha", (e = getenv("HOME")) && *e ? e : "/tmp");
}

/*
 * The NVRTC version for the cache key without loading NVRTC on a cache hit: dlopen of
 * libnvrtc costs about 10 ms, which was nearly all of a cached plan creation. The first
 * file the loader would open (found with stat, same order) identifies the installation;
 * after one real load its version is kept in a stamp file in the cache folder, named by
 * the file's path, size, inode and mtime. When no file can be located this way (NVRTC only
 * on the loader path or in a wheel), or there is no stamp yet, NVRTC is loaded.
 */
static int nv_locate(char *path, size_t len, struct stat *st)
{
    char dirs[4][2048];
    const int nd = nv_dirs(dirs);
    for (int d = 0; d < nd; d++)
        for (size_t n = 0; n < sizeof NV_NAMES / sizeof NV_NAMES[0]; n++) {
            snprintf(path, len, "%.2000s/%.40s", dirs[d], NV_NAMES[n]);
            if (stat(path, st) == 0) return 0;
        }
    return -1;
}

static void stamp_path(char *buf, size_t len, const char *lib, const struct stat *st)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, lib, strlen(lib));
    const long long id[4] = {(long long)st->st_size, (long long)st->st_ino, (long long)st->st_mtime, (long long)st->st_dev};
    h = fnv(h, id, sizeof id);
    char dir[900];
    cache_dir(dir, sizeof dir);
    snprintf(buf, len, "%s/nvrtc-%016llx.version", dir, (unsigned long long)h);
}

/* Is the loaded NVRTC the file at path? (the loader may have fallen back to another) */
static int loaded_from(const char *path)
{
    struct link_map *lm = NULL;
    if (!nv.lib || dlinfo(nv.lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return 0;
    char a[PATH_MAX], b[PATH_MAX];
    return realpath(lm->l_name, a) && realpath(path, b) && strcmp(a, b) == 0;
}

/* The result is kept for the process, like the loader's own once-only load: the first
 * plan pays a stat and a stamp read, later ones nothing. */
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;
static int key_known, key_major, key_minor;

static void find_key_version(int *major, int *minor);

static void key_version(int *major, int *minor)
{
    pthread_mutex_lock(&key_lock);
    if (!key_known) {
        find_key_version(&key_major, &key_minor);
        key_known = 1;
    }
    *major = key_major, *minor = key_minor;
    pthread_mutex_unlock(&key_lock);
}

static void find_key_version(int *major, int *minor)
{
    char lib[2200], stamp[1100];
    struct stat st;
    const int located = nv_locate(lib, sizeof lib, &st) == 0;
    if (!nv_loaded && located) {
        stamp_path(stamp, sizeof stamp, lib, &st);
        FILE *f = fopen(stamp, "r");
        if (f) { /* a damaged stamp is ignored (and rewritten below): NVRTC is loaded instead */
            char text[64], nl = 0;
            const size_t n = fread(text, 1, sizeof text - 1, f);
            fclose(f);
            text[n] = '\0';
            if (sscanf(text, "nvrtc-version %d %d%c", major, minor, &nl) == 3 && nl == '\n' && *major >= 9 &&
                *major < 100 && *minor >= 0 && *minor < 100)
                return;
        }
    }
    fmha__nvrtc_available(NULL);
    *major = nv.major, *minor = nv.minor;
    if (nv_loaded && located && loaded_from(lib)) {
        char text[32];
        int n = snprintf(text, sizeof text, "nvrtc-version %d %d\n", nv.major, nv.minor);
        stamp_path(stamp, sizeof stamp, lib, &st);
        fmha__cache_write_file(stamp, text, (size_t)n, NULL, 0);
    }
}

/* The headers every kernel source may include (src/cuda/kernels/device and each
 * family's params, embedded by cmake/embed.cmake): part of each cubin's cache key too. */

/* The cache key (see jit.h) of one compile; it names the entry's file and is checked
 * against the entry's header on every load. */
static uint64_t cache_key(const char *source, const char *const *defines, int n_defines, int sm)
{
    int major, minor;
    key_version(&major, &minor);
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, source, strlen(source) + 1);
    for (int i = 0; i < fmha_kernel_header_count; i++)
        h = fnv(h, fmha_kernel_headers[i], strlen(fmha_kernel_headers[i]) + 1);
    for (int i = 0; i < n_defines; i++) h = fnv(h, defines[i], strlen(defines[i]) + 1);
    int ver[3] = {sm, major, minor};
    h = fnv(h, ver, sizeof ver);
    h = fnv(h, fmha_version_string(), strlen(fmha_version_string()));
    return h;
}

static int entry_path(uint64_t key, int sm, char *buf, size_t len)
{
    char dir[900];
    cache_dir(dir, sizeof dir);
    return snprintf(buf, len, "%s/%016llx_sm%d.cubin", dir, (unsigned long long)key, sm);
}

int fmha__jit_cache_path(const char *source, const char *const *defines, int n_defines, int sm, char *buf, size_t len)
{
    return entry_path(cache_key(source, defines, n_defines, sm), sm, buf, len);
}

/* FMHA_DEBUG: say that a cache file was unusable and why, once per process for each
 * entry and defect (an unwritable cache keeps a bad file, which every plan would find). */
static void note_bad_entry(uint64_t key, const char *path, const char *why, int rebuilding)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t said[64];
    static int n_said;
    if (!fmha__debug_enabled()) return;
    key = fnv(fnv(key, why, strlen(why)), &rebuilding, sizeof rebuilding);
    pthread_mutex_lock(&lock);
    int seen = 0;
    for (int i = 0; i < n_said; i++) seen |= said[i] == key;
    if (!seen && n_said < 64) said[n_said++] = key;
    pthread_mutex_unlock(&lock);
    if (!seen)
        fprintf(stderr, "fmha: the kernel cache entry %s is unusable: %s; %s\n", path, why,
                rebuilding ? "compiling the kernel again and replacing it" : "FMHA_JIT=off: not rebuilt");
}

/* FMHA_PTXAS_LOG=1: ptxas's report of each kernel NVRTC compiles (registers, spills and
 * warnings such as C7511, wgmmas serialised for want of registers) on stderr, one block a
 * kernel named by its defines. It is NVRTC's own ptxas, the one that builds the library's
 * kernels: nvcc's ptxas on the same source and defines reported no C7511 for a kernel
 * whose NVRTC build serialised its wgmmas and ran 25% slower (perf-notes run 195). */
static int ptxas_log_wanted(void)
{
    const char *e = getenv("FMHA_PTXAS_LOG");
    return e && strcmp(e, "1") == 0;
}

static void print_ptxas_log(const char *target, const char *const *defines, int n_defines, const char *log)
{
    size_t len = strlen(target) + strlen(log) + 64;
    for (int i = 0; i < n_defines; i++) len += strlen(defines[i]) + 1;
    char *msg = malloc(len);
    if (!msg) return;
    int at = snprintf(msg, len, "fmha: ptxas (NVRTC %s) for", target);
    for (int i = 0; i < n_defines; i++) at += snprintf(msg + at, len - (size_t)at, " %s", defines[i]);
    snprintf(msg + at, len - (size_t)at, ":\n%s%s", log, *log && log[strlen(log) - 1] == '\n' ? "" : "\n");
    fputs(msg, stderr); /* one write a kernel: parallel builds do not interleave lines */
    free(msg);
}

/* The program's NVRTC log (malloc'd, NUL-terminated), or NULL when out of memory. */
static char *program_log(nvrtcProgram prog)
{
    size_t n = 0;
    nv.log_size(prog, &n);
    char *log = malloc(n + 1);
    if (log) {
        nv.log(prog, log);
        log[n] = '\0';
    }
    return log;
}

fmha_status_t fmha__jit_cubin(const char *source, const char *const *defines, int n_defines, int sm, void **cubin,
                              size_t *size, int *from_cache, char *err, size_t err_len)
{
    char path[1024], bad[512];
    const uint64_t key = cache_key(source, defines, n_defines, sm);
    entry_path(key, sm, path, sizeof path);
    *from_cache = 0;
    const fmha_cache_entry_status_t entry = fmha__cache_entry_read(path, key, sm, cubin, size, bad, sizeof bad);
    if (entry == FMHA_CACHE_ENTRY_OK) {
        *from_cache = 1;
        return FMHA_STATUS_SUCCESS;
    }
    const char *jit = getenv("FMHA_JIT");
    const int jit_off = jit && strcmp(jit, "off") == 0;
    if (entry == FMHA_CACHE_ENTRY_BAD) note_bad_entry(key, path, bad, !jit_off);
    if (jit_off) {
        if (entry == FMHA_CACHE_ENTRY_BAD)
            snprintf(err, err_len,
                     "FMHA_JIT=off and the cached kernel %s is unusable (%s); run `fmha build` without FMHA_JIT=off, "
                     "which replaces it, or delete the file",
                     path, bad);
        else
            snprintf(err, err_len, "FMHA_JIT=off and the kernel is not in the cache (%s); run `fmha build` first", path);
        return FMHA_STATUS_NOT_COMPILED;
    }
    const char *why;
    if (!fmha__nvrtc_available(&why)) {
        snprintf(err, err_len, "cannot compile kernels: %s", why);
        return FMHA_STATUS_NOT_COMPILED;
    }
    nvrtcProgram prog;
    if (nv.create(&prog, source, "fmha_kernel.cu", fmha_kernel_header_count, fmha_kernel_headers,
                  fmha_kernel_header_names)) {
        snprintf(err, err_len, "nvrtcCreateProgram failed");
        return FMHA_STATUS_COMPILE_FAILED;
    }
    char target[16], arch[64];
    snprintf(target, sizeof target, "sm_%d%s", sm, sm == 90 ? "a" : "");
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", target);
    const char *opts[48];
    char defs[40][96];
    int no = 0;
    opts[no++] = arch;
    opts[no++] = "-std=c++17";
    opts[no++] = "--device-as-default-execution-space";
    const int ptxas_log = ptxas_log_wanted();
    if (ptxas_log) opts[no++] = "--ptxas-options=-v";
    for (int i = 0; i < n_defines && i < 40; i++) {
        snprintf(defs[i], sizeof defs[i], "-D%s", defines[i]);
        opts[no++] = defs[i];
    }
    nvrtcResult rc = nv.compile(prog, no, opts);
    if (rc) {
        char *log = program_log(prog);
        snprintf(err, err_len, "NVRTC failed for %s: %s", arch, log ? log : "(no log)");
        free(log);
        nv.destroy(&prog);
        return FMHA_STATUS_COMPILE_FAILED;
    }
    if (ptxas_log) {
        char *log = program_log(prog);
        if (log) print_ptxas_log(target, defines, n_defines, log);
        free(log);
    }
    size_t n = 0;
    nv.cubin_size(prog, &n);
    *cubin = malloc(n);
    if (!*cubin) {
        nv.destroy(&prog);
        return FMHA_STATUS_ALLOC_FAILED;
    }
    nv.cubin(prog, *cubin);
    *size = n;
    nv.destroy(&prog);
    fmha__cache_entry_write(path, key, sm, *cubin, n); /* replaces a bad entry; unwritable: kept in memory only */
    return FMHA_STATUS_SUCCESS;
}
