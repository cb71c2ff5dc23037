/* SPDX-License-Identifier: MIT */
/*
 * cmd_kernels.c: `fmha enumerate`, `fmha kernels` and `fmha explain`: the registry and
 * the selector seen from the command line (public API only).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "fmha/fmha.h"
#include "fwd_case.h"
#include "textfile.h"

static const flag_spec_t ENUM_FLAGS[] = {
    {"arch", "sm90", "sm80 | sm86 | sm89 | sm90"},
    {"receipt", "default", "default | flash | pytorch | serving | training | fp8 | all"},
    {"filter", "", "expression over key fields, e.g. 'hdim_qk==128 && dtype==bf16'"},
    {"config", "", "a JSON kernel-set config file (replaces -receipt)"},
    {"list", "0", "1: print the kernel names"},
};
static const char *const ENUM_SWITCHES[] = {"list", NULL};

int cmd_enumerate(int argc, char **argv)
{
    char **nv;
    int nc;
    args_t a;
    fmha_kernel_set_t *set = NULL;
    char why[1024];
    int rc = args_parse_command("enumerate", ENUM_FLAGS, (int)(sizeof ENUM_FLAGS / sizeof ENUM_FLAGS[0]), ENUM_SWITCHES,
                           "usage: fmha enumerate [--arch=sm90] [--receipt=all] [--filter 'expr'] [--config=file.json] [--list]\n"
                           "Enumerates valid kernel instances and prints counts per family.",
                           argc, argv, &a, &nv, &nc);
    if (rc >= 0) goto done;
    rc = EXIT_OK;
    const char *arch = args_str(&a, "arch"), *filter = args_str(&a, "filter"), *config = args_str(&a, "config");
    fmha_status_t st;
    if (config[0]) {
        char *text;
        if (!(text = textfile_read(config))) {
            fprintf(stderr, "fmha enumerate: cannot read -config=%s\n", config);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        st = fmha_kernel_set_from_json(arch, text, &set, why, sizeof why);
        free(text);
    } else {
        st = fmha_kernel_set_enumerate(arch, args_str(&a, "receipt"), filter[0] ? filter : NULL, &set, why, sizeof why);
    }
    if (st) {
        fprintf(stderr, "fmha enumerate: %s: %s\n", fmha_status_name(st), why);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    const char *families[] = {"fwd", "splitkv", "combine", "pagedkv", "appendkv", "prefill", "bwddotdoo", "bwddqdkdv", "bwdconvertdq"};
    size_t n = fmha_kernel_set_count(set);
    if (strcmp(args_str(&a, "list"), "1") == 0)
        for (size_t i = 0; i < n; i++) printf("%s\n", fmha_kernel_set_name(set, i));
    printf("arch %s, %s %s: %zu kernels\n", arch, config[0] ? "config" : "receipt", config[0] ? config : args_str(&a, "receipt"), n);
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        size_t c = 0;
        for (size_t i = 0; i < n; i++) c += strcmp(fmha_kernel_set_family(set, i), families[f]) == 0;
        printf("  %-13s %zu\n", families[f], c);
    }
done:
    fmha_kernel_set_destroy(set);
    if (nv) args_free_argv(nv, nc > 0 ? nc : 0);
    return rc;
}

static const flag_spec_t KERNELS_FLAGS[] = {
    {"json", "0", "1: print the registry as JSON (metadata, statistics, kernels)"},
    {"arch", "", "a GPU arch: show the registry of a virtual context for it"},
};

int cmd_kernels(int argc, char **argv)
{
    char **nv = calloc((size_t)argc + 1, sizeof *nv);
    int nc = 0;
    for (int i = 0; nv && i < argc; i++) nv[nc++] = strdup(strcmp(argv[i], "--json") == 0 ? "-json=1" : argv[i]);
    args_t a;
    int rc = EXIT_OK;
    fmha_context_t *ctx = NULL;
    if (!nv || args_parse(&a, KERNELS_FLAGS, 2, nc, nv, 2)) {
        fprintf(stderr, "fmha kernels: %s\n", nv ? a.err : "out of memory");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    if (a.help) {
        args_print_help(&a, "usage: fmha kernels [--json] [--arch=sm90]\nLists the kernels registered in a context.");
        goto done;
    }
    const char *arch = args_str(&a, "arch");
    fmha_status_t st = arch[0] ? fmha_context_create_virtual(&ctx, arch, 0) : fmha_context_create(&ctx, FMHA_BACKEND_AUTO, 0);
    if (st) {
        fprintf(stderr, "fmha kernels: cannot create a context%s%s: %s\n", arch[0] ? " for " : "", arch, fmha_status_name(st));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    char *json = fmha_context_kernels_json(ctx, 1);
    if (!json) {
        rc = EXIT_RUN_FAILED;
        goto done;
    }
    if (strcmp(args_str(&a, "json"), "1") == 0) {
        printf("%s\n", json);
    } else {
        /* one name per line: the "name" fields of the JSON */
        for (const char *p = strstr(json, "\"name\": \""); p; p = strstr(p + 1, "\"name\": \"")) {
            const char *s = p + 9, *e = strchr(s, '"');
            printf("%.*s\n", (int)(e - s), s);
        }
    }
    fmha_free(json);
done:
    fmha_context_destroy(ctx);
    if (nv) args_free_argv(nv, nc);
    return rc;
}


static const flag_spec_t BUILD_FLAGS[] = {
    {"arch", "sm90", "sm80 | sm86 | sm89 | sm90"},
    {"family", "fwd", "kernel family to build (fwd, splitkv, combine, pagedkv, bwddotdoo, bwddqdkdv, bwdconvertdq), or all"},
    {"receipt", "default", "default | flash | pytorch | serving | training | fp8 | all"},
    {"filter", "", "expression over key fields, e.g. 'hdim_qk==128 && dtype==bf16'"},
    {"j", "0", "parallel compiles; 0 means one per CPU"},
    {"names", "", "a file of kernel names, one per line: build exactly these (no --family, --receipt or --filter)"},
};

static void progress_bar(size_t done, size_t total, const char *kernel, int from_cache, void *user)
{
    (void)user;
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu %s %-70.70s", fill, "##############################", width - fill, "", done, total,
            from_cache ? "cached  " : "compiled", kernel);
    if (done == total) fputc('\n', stderr);
}

int cmd_build(int argc, char **argv)
{
    char *names = NULL; /* --names: the file's text */
    char **nv;
    int nc;
    args_t a;
    int rc = args_parse_command("build", BUILD_FLAGS, (int)(sizeof BUILD_FLAGS / sizeof BUILD_FLAGS[0]), NULL,
                           "usage: fmha build [--arch=sm90] [--family=fwd] [--receipt=default] [--filter 'expr'] [--names=FILE] [-j N]\n"
                           "Precompiles kernels into the on-disk cache with NVRTC (no GPU needed).",
                           argc, argv, &a, &nv, &nc);
    if (rc >= 0) goto done;
    rc = EXIT_OK;
    int64_t j;
    if (args_i64(&a, "j", 0, 256, &j)) {
        fprintf(stderr, "fmha build: %s\n", a.err);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    if (args_given(&a, "names")) {
        if (args_given(&a, "family") || args_given(&a, "receipt") || args_given(&a, "filter")) {
            fprintf(stderr, "fmha build: --names is the whole set; it takes no --family, --receipt or --filter\n");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        if (!(names = textfile_read(args_str(&a, "names")))) {
            fprintf(stderr, "fmha build: cannot read --names=%s: %s\n", args_str(&a, "names"), strerror(errno));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    char filter[1024];
    const char *user = args_str(&a, "filter");
    const char *family = args_str(&a, "family");
    if (strcmp(family, "all") == 0) snprintf(filter, sizeof filter, "%s", user);
    else snprintf(filter, sizeof filter, "family==%s%s%s%s", family, user[0] ? " && (" : "", user, user[0] ? ")" : "");
    /* a name says its arch: --arch then only checks it */
    const char *arch = !names || args_given(&a, "arch") ? args_str(&a, "arch") : NULL;
    fmha_build_options_t opt = {sizeof opt, arch, names ? NULL : args_str(&a, "receipt"),
                                names ? NULL : filter, (int)j, progress_bar, NULL, names};
    fmha_build_result_t res;
    char why[2048];
    fmha_status_t st = fmha_build(&opt, &res, why, sizeof why);
    printf("built %zu, already cached %zu, failed %zu, skipped %zu (no kernel source in this version)\n", res.compiled,
           res.cached, res.failed, res.skipped);
    if (st) {
        fprintf(stderr, "fmha build: %s: %s\n", fmha_status_name(st), why);
        rc = st == FMHA_STATUS_INVALID_ARGUMENT ? EXIT_BAD_INPUT : EXIT_RUN_FAILED;
    }
done:
    free(names);
    if (nv) args_free_argv(nv, nc > 0 ? nc : 0);
    return rc;
}
