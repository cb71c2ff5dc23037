/* SPDX-License-Identifier: MIT */
/* commands.h: the subcommands of the fmha tool. Each returns the process exit code:
 * 0 ok, 1 check failed, 2 bad arguments or invalid problem, 3 execution failed. */
#ifndef FMHA_CLI_COMMANDS_H
#define FMHA_CLI_COMMANDS_H

enum { EXIT_OK = 0, EXIT_CHECK_FAILED = 1, EXIT_BAD_INPUT = 2, EXIT_RUN_FAILED = 3 };

int cmd_run(int argc, char **argv);
int cmd_enumerate(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_explain(int argc, char **argv); /* in cmd_run.c: it shares run's flags */
int cmd_build(int argc, char **argv);
int cmd_bwd(int argc, char **argv);
int cmd_bench(int argc, char **argv); /* cmd_bench.c */
int cmd_tune(int argc, char **argv);  /* cmd_bench.c */


#endif /* FMHA_CLI_COMMANDS_H */
