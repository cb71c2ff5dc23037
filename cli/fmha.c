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
            "  run       run a forward attention problem, time it, and check it with -v=1\n"
            "  version   print the version and build information\n"
            "  help      this text\n"
            "\n"
            "`fmha run -help` lists the flags of run.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return cmd_run(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("fmha %s\n%s\n", fmha_version_string(), fmha_build_info());
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "-help") == 0 || strcmp(cmd, "--help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "fmha: unknown command '%s'; expected run, version or help\n", cmd);
    return EXIT_BAD_INPUT;
}
