/* SPDX-License-Identifier: MIT */
/* fuzz_tune_json.c: the tuning database (fmha_context_load_tune_db) read from a memory
 * file, then a plan and an explain that consult it. */
#define _GNU_SOURCE /* memfd_create */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fmha/fmha.h"
#include "fuzz_common.h"

static fmha_context_t *ctx;
static fmha_problem_t *prob;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (fmha_context_create_virtual(&ctx, "sm90", 0) || fmha_problem_create(&prob)) abort();
    const int64_t dims[4] = {2, 128, 8, 128};
    fmha_problem_set_i64(prob, FMHA_PARAM_BATCH, 2);
    fmha_problem_set_i64(prob, FMHA_PARAM_NUM_HEADS_Q, 8);
    fmha_problem_set_i64(prob, FMHA_PARAM_NUM_HEADS_KV, 8);
    fmha_problem_set_i64(prob, FMHA_PARAM_SEQLEN_Q, 128);
    fmha_problem_set_i64(prob, FMHA_PARAM_SEQLEN_KV, 128);
    fmha_problem_set_i64(prob, FMHA_PARAM_HEAD_DIM_QK, 128);
    fmha_problem_set_i64(prob, FMHA_PARAM_HEAD_DIM_V, 128);
    const fmha_tensor_role_t roles[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (int r = 0; r < 4; r++) fmha_problem_set_tensor(prob, roles[r], FMHA_DTYPE_BF16, 4, dims, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const int fd = memfd_create("tune", 0);
    if (fd < 0) abort();
    if (n && write(fd, data, n) != (ssize_t)n) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (fmha_context_load_tune_db(ctx, path) == FMHA_STATUS_SUCCESS) {
        fmha_plan_t *plan = NULL;
        if (fmha_plan_create(ctx, prob, NULL, &plan) == FMHA_STATUS_SUCCESS) fmha_plan_destroy(plan);
        char *text = NULL;
        (void)fmha_explain(ctx, prob, NULL, &text);
        fmha_free(text);
    } else if (!fmha_context_last_error(ctx)[0]) {
        abort();
    }
    close(fd);
    return 0;
}
