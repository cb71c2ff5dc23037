/* SPDX-License-Identifier: MIT */
/* fuzz_cli_flags.c: the CLI's flag parser and `fmha run`'s configuration (cli/args.c,
 * cli/run_config.c) on argument lists split from the input at newlines, then the
 * described problem (no tensors allocated) validated and explained on a CPU context. */
#include "../../cli/run_config.h"
#include "fuzz_common.h"

static fmha_context_t *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0) == FMHA_STATUS_SUCCESS ? 0 : (abort(), 1);
}

/* Whether to build the described problem: the case builder sizes its page lists and
 * sequence tables by the token count even when describing (a 2^30-token paged cache
 * holds gigabytes of page numbers), so configurations past 2^22 tokens stop at the
 * flags; fuzz_problem takes the library's validation to any size. */
static int describable(const fwd_config_t *c)
{
    int64_t tokens = 0;
    for (int64_t b = 0; b < c->b; b++) {
        const int64_t q = c->mode == FMHA_MODE_GROUP && c->seqlens_q ? c->seqlens_q[b] : c->s;
        const int64_t k = c->seqlens_k ? c->seqlens_k[b] : c->s_k;
        tokens += q + k + c->s_knew;
        if (tokens > ((int64_t)1 << 22)) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = fuzz_string(data, n);
    char *argv[66] = {"fmha", "run"};
    int argc = 2;
    for (char *line = strtok(text, "\n"); line && argc < 66; line = strtok(NULL, "\n")) argv[argc++] = line;
    args_t a;
    if (args_parse(&a, RUN_FLAGS, RUN_FLAG_COUNT, argc, argv, 2) == 0) {
        run_opts_t o;
        memset(&o, 0, sizeof o);
        const int configured = run_configure(&a, &o) == 0;
        if (!configured && !a.err[0]) abort(); /* a refusal must say why */
        if (configured && describable(&o.cfg)) {
            o.cfg.describe_only = 1;
            fwd_case_t *fc = NULL;
            char why[1024];
            if (fwd_case_create(&o.cfg, &fc, why, sizeof why) == FMHA_STATUS_SUCCESS) {
                char *explain = NULL;
                (void)fmha_explain(ctx, fwd_case_problem(fc), NULL, &explain);
                fmha_free(explain);
                fwd_case_destroy(fc);
            }
        }
        free(o.lens_q);
        free(o.lens_k);
    } else if (!a.err[0]) {
        abort();
    }
    free(text);
    return 0;
}
