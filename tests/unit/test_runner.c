/* SPDX-License-Identifier: MIT */
/*
 * test_runner.c: the runner's messages for a failed execution (harness/runner.h
 * run_execute_error). A kernel's fault surfaces at the synchronize after the launch,
 * which records on the context, not the plan: `fmha run` once printed
 * "execute: FMHA_STATUS_CUDA_ERROR: " with nothing after it (perf-notes run 143). The CPU
 * backend cannot fault, so the context's message here is a rejected plan's.
 */
#include "runner.h"
#include "testing.h"

static fmha_context_t *ctx;

static void small_case(fwd_config_t *c)
{
    fwd_config_default(c);
    c->b = 1, c->h = c->h_k = 2, c->s = 9, c->s_k = 13, c->d = c->d_v = 32;
}

/* A plan without an error of its own gives the context's message. */
static void test_falls_back_to_the_context(void)
{
    fwd_config_t c;
    small_case(&c);
    fwd_run_t r;
    CHECK_STATUS(fwd_run_prepare(&r, &c, ctx, NULL), FMHA_STATUS_SUCCESS);
    CHECK(r.ctx == ctx);
    fmha_plan_t *none = NULL;
    CHECK_STATUS(fmha_plan_create(ctx, NULL, NULL, &none), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(fmha_context_last_error(ctx)[0] != '\0');
    CHECK(fmha_plan_last_error(r.plan)[0] == '\0');
    CHECK(strcmp(run_execute_error(r.plan, ctx), fmha_context_last_error(ctx)) == 0);
    fwd_run_release(&r);
}

/* A plan's own message wins over the context's. */
static void test_the_plans_message_first(void)
{
    fwd_config_t c;
    small_case(&c);
    fwd_run_t r;
    CHECK_STATUS(fwd_run_prepare(&r, &c, ctx, NULL), FMHA_STATUS_SUCCESS);
    fmha_plan_t *none = NULL;
    CHECK_STATUS(fmha_plan_create(ctx, NULL, NULL, &none), FMHA_STATUS_INVALID_ARGUMENT);
    /* an execution without its tensors is refused on the plan */
    CHECK(fmha_plan_execute(r.plan, NULL, 0, NULL, 0, NULL) != FMHA_STATUS_SUCCESS);
    const char *plan_msg = fmha_plan_last_error(r.plan);
    CHECK(plan_msg[0] != '\0');
    CHECK(strcmp(run_execute_error(r.plan, ctx), plan_msg) == 0);
    CHECK(strcmp(run_execute_error(r.plan, ctx), fmha_context_last_error(ctx)) != 0);
    fwd_run_release(&r);
}

static void test_without_plan_or_context(void)
{
    CHECK(strcmp(run_execute_error(NULL, NULL), "") == 0);
    CHECK(strcmp(run_execute_error(NULL, ctx), fmha_context_last_error(ctx)) == 0);
}

int main(void)
{
    if (fmha_context_create(&ctx, FMHA_BACKEND_CPU, 0)) {
        printf("cannot create a CPU context: %s\n", fmha_context_create_error());
        return 1;
    }
    RUN(test_falls_back_to_the_context);
    RUN(test_the_plans_message_first);
    RUN(test_without_plan_or_context);
    fmha_context_destroy(ctx);
    TEST_MAIN_END();
}
