/* SPDX-License-Identifier: MIT */
/* fuzz_problem.c: random sequences of problem-builder calls (parameters, tensors with
 * any dims and strides, masks, clears, resets), each ending in validation, explain and a
 * plan on a CPU context and on a virtual sm90 one. Nothing is executed: the harness looks
 * for crashes, overflows and leaks in building, validating and selecting. */
#include "fmha/fmha.h"
#include "fuzz_common.h"

static fmha_context_t *cpu, *sm90;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (fmha_context_create(&cpu, FMHA_BACKEND_CPU, 0) || fmha_context_create_virtual(&sm90, "sm90", 0)) abort();
    return 0;
}

static const char *MASKS[8] = {"0", "t", "b", "b:16,0", "t:3,5", "b:-1,0,4", "xb:8", "garbage"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    fuzz_stream_t s = {data, n};
    fmha_problem_t *p = NULL;
    if (fmha_problem_create(&p)) abort();
    for (int step = 0; step < 64 && fuzz_left(&s); step++) {
        const uint8_t op = fuzz_u8(&s) % 8;
        if (op <= 2) { /* an integer parameter */
            fmha_problem_set_i64(p, (fmha_param_t)(fuzz_u8(&s) % 48), fuzz_i64(&s));
        } else if (op == 3) {
            fmha_problem_set_f64(p, (fmha_param_t)(fuzz_u8(&s) % 48), (double)fuzz_i64(&s) / 8.0);
        } else if (op <= 5) { /* a tensor */
            const fmha_tensor_role_t role = (fmha_tensor_role_t)(fuzz_u8(&s) % 40);
            const fmha_dtype_t dt = (fmha_dtype_t)(fuzz_u8(&s) % 8);
            const int rank = fuzz_u8(&s) % (FMHA_MAX_RANK + 2);
            int64_t dims[FMHA_MAX_RANK + 1], strides[FMHA_MAX_RANK + 1];
            const int with_strides = fuzz_u8(&s) & 1;
            for (int d = 0; d < rank && d <= FMHA_MAX_RANK; d++) dims[d] = fuzz_i64(&s), strides[d] = fuzz_i64(&s);
            fmha_problem_set_tensor(p, role, dt, rank, dims, with_strides ? strides : NULL);
        } else if (op == 6) {
            const uint8_t k = fuzz_u8(&s);
            if (k & 0x80) fmha_problem_clear_tensor(p, (fmha_tensor_role_t)(k % 40));
            else fmha_problem_set_mask(p, MASKS[k % 8]);
        } else {
            if (fuzz_u8(&s) == 0xff) fmha_problem_reset(p);
        }
    }
    char why[1024];
    (void)fmha_problem_validate(p, why, sizeof why);
    fmha_context_t *ctxs[2] = {cpu, sm90};
    for (int c = 0; c < 2; c++) {
        char *text = NULL;
        (void)fmha_explain(ctxs[c], p, NULL, &text);
        fmha_free(text);
        fmha_plan_t *plan = NULL;
        if (fmha_plan_create(ctxs[c], p, NULL, &plan) == FMHA_STATUS_SUCCESS) {
            size_t ws;
            fmha_plan_workspace_size(plan, &ws);
            char desc[512];
            fmha_plan_describe(plan, desc, sizeof desc);
            fmha_plan_destroy(plan);
        }
    }
    fmha_problem_destroy(p);
    return 0;
}
