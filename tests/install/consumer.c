/* SPDX-License-Identifier: MIT */
/*
 * consumer.c: a program outside the tree that uses an installed fmha (tests/install):
 * one attention on the CPU backend whose answer is known exactly (every value row is
 * the same, so every output row is that row).
 */
#include <stdio.h>

#include <fmha/fmha.h>

int main(void)
{
    enum { S = 5, D = 8 };
    float q[S * D], k[S * D], v[S * D], o[S * D];
    for (int i = 0; i < S * D; i++) q[i] = (float)((i * 7) % 11) / 11.0f, k[i] = (float)((i * 5) % 13) / 13.0f;
    for (int i = 0; i < S * D; i++) v[i] = (float)(i % D) - 2.5f, o[i] = 0.0f;
    fmha_context_t *ctx = NULL;
    fmha_problem_t *p = NULL;
    fmha_plan_t *plan = NULL;
    const int64_t dims[4] = {1, S, 1, D};
    int ok = fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0) == FMHA_STATUS_SUCCESS &&
             fmha_problem_create(&p) == FMHA_STATUS_SUCCESS;
    const struct {
        fmha_param_t k;
        int64_t v;
    } params[] = {{FMHA_PARAM_BATCH, 1},     {FMHA_PARAM_NUM_HEADS_Q, 1}, {FMHA_PARAM_NUM_HEADS_KV, 1},
                  {FMHA_PARAM_SEQLEN_Q, S},  {FMHA_PARAM_SEQLEN_KV, S},   {FMHA_PARAM_HEAD_DIM_QK, D},
                  {FMHA_PARAM_HEAD_DIM_V, D}};
    for (size_t i = 0; ok && i < sizeof params / sizeof params[0]; i++)
        ok = fmha_problem_set_i64(p, params[i].k, params[i].v) == FMHA_STATUS_SUCCESS;
    const fmha_tensor_role_t roles[4] = {FMHA_TENSOR_Q, FMHA_TENSOR_K, FMHA_TENSOR_V, FMHA_TENSOR_O};
    for (int r = 0; ok && r < 4; r++) ok = fmha_problem_set_tensor(p, roles[r], FMHA_DTYPE_FP32, 4, dims, NULL) == 0;
    ok = ok && fmha_plan_create(ctx, p, NULL, &plan) == FMHA_STATUS_SUCCESS;
    size_t ws_bytes = 0;
    ok = ok && fmha_plan_workspace_size(plan, &ws_bytes) == FMHA_STATUS_SUCCESS;
    static unsigned char ws[1 << 20];
    const fmha_tensor_ptr_t ptrs[4] = {{FMHA_TENSOR_Q, q}, {FMHA_TENSOR_K, k}, {FMHA_TENSOR_V, v}, {FMHA_TENSOR_O, o}};
    ok = ok && ws_bytes <= sizeof ws && fmha_plan_execute(plan, ptrs, 4, ws, ws_bytes, NULL) == FMHA_STATUS_SUCCESS;
    double worst = 0;
    for (int i = 0; ok && i < S * D; i++) {
        const double e = o[i] - v[i];
        worst = e > worst ? e : -e > worst ? -e : worst;
    }
    printf("fmha %s, %s: %s (max error %.3g)\n", fmha_version_string(), ctx ? fmha_context_arch(ctx) : "?",
           ok && worst < 1e-6 ? "ok" : "FAILED", worst);
    if (!ok) fprintf(stderr, "%s\n", ctx ? fmha_context_last_error(ctx) : "no context");
    fmha_plan_destroy(plan);
    fmha_problem_destroy(p);
    fmha_context_destroy(ctx);
    return ok && worst < 1e-6 ? 0 : 1;
}
