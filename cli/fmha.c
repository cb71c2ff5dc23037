/* SPDX-License-Identifier: MIT */
/* fmha.c: the `fmha` command-line tool. Uses the public API only. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "fmha/fmha.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fmha <command> [-name=value ...]\n"
            "\n"
            "commands:\n"
            "  run       run a forward attention problem (fwd, split-KV, paged KV, batch prefill,\n"
            "            appendkv with RoPE), time it, and check it with -v=1\n"
            "  bwd       run the backward (dq, dk, dv, dbias, dsink), time it, and check it with -v=1\n"
            "  bench     measure a shape matrix's cases (the selector's kernel or every candidate) into CSV/JSON\n"
            "  tune      measure every candidate per problem class and write the selector's tuning database\n"
            "  explain   show which kernel each stage would use and why the others were rejected\n"
            "  enumerate count (or --list) the valid kernel instances of an arch and receipt\n"
            "  kernels   list the kernels registered in a context (--json for the registry export)\n"
            "  build     precompile kernels into the on-disk cache with NVRTC (-j N, no GPU needed)\n"
            "  version   print the version and build information\n"
            "  help      this text\n"
            "\n"
            "`fmha <command> -help` lists a command's flags; docs/bench.md describes bench and tune.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return cmd_run(argc, argv);
    if (strcmp(cmd, "bwd") == 0) return cmd_bwd(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
    if (strcmp(cmd, "tune") == 0) return cmd_tune(argc, argv);
    if (strcmp(cmd, "explain") == 0) return cmd_explain(argc, argv);
    if (strcmp(cmd, "enumerate") == 0) return cmd_enumerate(argc, argv);
    if (strcmp(cmd, "kernels") == 0) return cmd_kernels(argc, argv);
    if (strcmp(cmd, "build") == 0) return cmd_build(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("fmha %s\n%s\n", fmha_version_string(), fmha_build_info());
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "-help") == 0 || strcmp(cmd, "--help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "fmha: unknown command '%s'; expected run, bwd, bench, tune, explain, enumerate, kernels, build, version or help\n", cmd);
    return EXIT_BAD_INPUT;
}
