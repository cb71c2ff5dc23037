/* SPDX-License-Identifier: MIT */
/*
 * conf_bwd.c: the backward family's GPU conformance grid (conformance.h): dtypes x head
 * dims x masks x awkward shapes (one row, odd lengths, Sq != Sk both ways), with GQA,
 * ALiBi, elementwise bias (with dbias on every third), soft-cap, sink logits (dsink),
 * dropout and the deterministic mode rotating through the cases; GQA ratios; varlen with
 * empty sequences and seqused_k; dbias of every bias shape (full and broadcast); then
 * deterministic cases run 10 times, bitwise equal.
 * On sm90 each case whose shape both dq_dk_dv kernels have runs on both (wgmma and
 * mma.sync, conformance_bwd_pipelines), the bitwise repeats too.
 * Gradients are checked against the naive backward (REFERENCE.md's gradient rule),
 * poisoned before each run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

const char *const conformance_family = "bwd";

/* A deterministic case executed 10 times (with `force`, or the selector's kernel): every
 * gradient bitwise equal to the first run's (and that run correct). `chosen` (may be
 * NULL) gets the dq_dk_dv stage's kernel. */
static void deterministic_repeats(conformance_t *t, const bwd_config_t *c, const char *force, char *chosen, size_t len)
{
    if (chosen && len) chosen[0] = '\0';
    if (conformance_skip(t, c->fwd.d, force != NULL)) return;
    fmha_plan_options_t opt = {.struct_size = sizeof opt, .force_kernel = force};
    if (t->list) {
        conformance_listed(t, bwd_run_list(c, t->ctx, &opt, stdout, chosen, len));
        return;
    }
    bwd_run_t r;
    fmha_status_t st = bwd_run_prepare(&r, c, t->ctx, &opt);
    char tail[300];
    snprintf(tail, sizeof tail, "%s%s (10 runs, bitwise)", force ? " -force_kernel=" : "", force ? force : "");
    conformance_case_line(t, 0, r.cli, tail);
    if (!st && chosen) snprintf(chosen, len, "%s", fmha_plan_kernel_name(r.plan, 1));
    int ok = !st && !bwd_run_execute(&r) && bwd_run_check(&r, NULL);
    if (!ok) bwd_run_report(&r, stdout);
    for (int run = 1; ok && run < 10; run++) {
        int identical = 0;
        if (bwd_case_rerun_identical(r.bc, r.plan, &identical) || !identical) {
            printf("FAIL deterministic: run %d differs from run %d -- %s\n", run + 1, run, r.cli);
            ok = 0;
        }
    }
    ok ? t->passed++ : t->failed++;
    bwd_run_release(&r);
}

void conformance_cases(conformance_t *t)
{
    const fmha_dtype_t dts[] = {FMHA_DTYPE_FP16, FMHA_DTYPE_BF16};
    const int64_t hd[][2] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}};
    const char *masks[] = {"0", "t", "b", "b:16,4", "t:7,0,3", "xb:31"};
    const int64_t shapes[][2] = {{1, 1}, {17, 17}, {77, 301}, {301, 77}, {256, 256}, {1, 300}, {513, 129}};
    int n = 0;
    for (size_t a = 0; a < 2; a++)
        for (size_t h = 0; h < sizeof hd / sizeof hd[0]; h++)
            for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                    if ((s + m + h) % 2) continue; /* half the product keeps the oracle's time in check */
                    bwd_config_t c;
                    memset(&c, 0, sizeof c);
                    fwd_config_default(&c.fwd);
                    c.fwd.dtype = dts[a], c.fwd.d = hd[h][0], c.fwd.d_v = hd[h][1], c.fwd.mask = masks[m];
                    c.fwd.s = shapes[s][0], c.fwd.s_k = shapes[s][1];
                    c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = (n % 4 == 0) ? 4 : (n % 4 == 1) ? 2 : 1;
                    c.fwd.seed = (uint64_t)n + 101;
                    c.fwd.bias = (bias_kind_t)(n % 7 == 3   ? BIAS_ELEM_BH
                                               : n % 7 == 5 ? BIAS_ALIBI_H
                                               : n % 11 == 4 ? BIAS_ALIBI_BH
                                               : n % 13 == 6 ? BIAS_ELEM_1H
                                                             : BIAS_NONE);
                    c.dbias = c.fwd.bias == BIAS_ELEM_BH && n % 3 == 0;
                    c.fwd.softcap = n % 5 == 2 ? 4.0 : 0.0;
                    c.fwd.sink = n % 6 == 1;
                    c.fwd.p_drop = n % 8 == 5 ? 0.17 : 0.0;
                    c.fwd.drop_seed = 0x1234567890abcdefull + (uint64_t)n, c.fwd.drop_offset = (uint64_t)n * 977;
                    c.deterministic = n % 4 == 3;
                    c.fwd.iperm = n % 3 == 0, c.fwd.operm = n % 4 == 0;
                    c.fwd.pad = n % 9 == 4 ? 8 : 0;
                    conformance_bwd_pipelines(t, &c);
                    n++;
                }
    /* GQA ratios */
    const int64_t ratios[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        bwd_config_t c;
        memset(&c, 0, sizeof c);
        fwd_config_default(&c.fwd);
        c.fwd.h = 8, c.fwd.h_k = 8 / ratios[i], c.fwd.s = 333, c.fwd.s_k = 555, c.fwd.mask = "b";
        c.fwd.d = c.fwd.d_v = i < 2 ? 128 : 64;
        c.fwd.dtype = i % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.deterministic = i == 3;
        conformance_bwd_pipelines(t, &c);
    }
    /* many m-blocks and key tiles per head (the wgmma kernel's ring of Q/dO stages and
     * dS^T buffers wraps several times), every mask kind, head dims 64 and 128 */
    const char *long_masks[] = {"0", "b", "t:100,50", "t"};
    for (int i = 0; i < 8; i++) {
        bwd_config_t c;
        memset(&c, 0, sizeof c);
        fwd_config_default(&c.fwd);
        c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = i % 3 == 0 ? 1 : 4, c.fwd.s = i % 2 ? 1000 : 777, c.fwd.s_k = i % 2 ? 1000 : 1333;
        c.fwd.d = c.fwd.d_v = i < 4 ? 64 : 128, c.fwd.dtype = i % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.fwd.mask = long_masks[i % 4], c.fwd.p_drop = i == 5 ? 0.1 : 0.0, c.fwd.softcap = i == 6 ? 7.0 : 0.0;
        c.fwd.bias = i == 2 ? BIAS_ALIBI_H : BIAS_NONE, c.fwd.seed = 700 + (uint64_t)i;
        c.deterministic = i % 2 == 1;
        conformance_bwd_pipelines(t, &c);
    }
    /* varlen with empty sequences (queries and keys) and seqused_k */
    const int32_t lq[] = {0, 1, 17, 300, 0, 129}, lk[] = {5, 0, 17, 400, 0, 1025}, used[] = {5, 0, 9, 300, 0, 1000};
    for (int v = 0; v < 8; v++) {
        bwd_config_t c;
        memset(&c, 0, sizeof c);
        fwd_config_default(&c.fwd);
        c.fwd.mode = FMHA_MODE_GROUP, c.fwd.b = 6, c.fwd.h = 4, c.fwd.h_k = v % 2 ? 2 : 4, c.fwd.s = 300, c.fwd.s_k = 1025;
        c.fwd.seqlens_q = lq, c.fwd.seqlens_k = lk, c.fwd.seqused_k = v % 2 ? used : NULL;
        c.fwd.d = c.fwd.d_v = v < 4 ? 64 : 128, c.fwd.dtype = v % 4 < 2 ? FMHA_DTYPE_FP16 : FMHA_DTYPE_BF16;
        c.fwd.mask = v % 3 == 0 ? "b" : v % 3 == 1 ? "t:64,0,4" : "0";
        c.fwd.sink = v == 5, c.fwd.p_drop = v == 6 ? 0.1 : 0.0, c.deterministic = v == 7;
        c.fwd.seed = 900 + (uint64_t)v;
        conformance_bwd_pipelines(t, &c);
    }
    /* dbias of every bias shape: full (in place, also deterministic) and broadcast over
     * batch and heads (summed in fp32) */
    const bias_kind_t kinds[] = {BIAS_ELEM_BH, BIAS_ELEM_1H, BIAS_ELEM_11, BIAS_ELEM_BH};
    for (int i = 0; i < 8; i++) {
        bwd_config_t c;
        memset(&c, 0, sizeof c);
        fwd_config_default(&c.fwd);
        c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = i % 2 ? 2 : 4, c.fwd.s = i % 2 ? 77 : 200, c.fwd.s_k = i % 2 ? 300 : 129;
        c.fwd.d = c.fwd.d_v = i < 4 ? 64 : 128, c.fwd.dtype = i % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.fwd.mask = i % 3 == 0 ? "b" : i % 3 == 1 ? "t:16,3" : "0";
        c.fwd.bias = kinds[i % 4], c.dbias = 1, c.deterministic = i % 4 == 3;
        c.fwd.softcap = i == 5 ? 5.0 : 0.0, c.fwd.seed = 800 + (uint64_t)i;
        conformance_bwd_pipelines(t, &c);
    }
    /* soft-cap across its range, scores spread by scale 1 (conf_fwd's caps): saturated,
     * Gemma 2's 50, near the identity (tanh's series, and dcap = 1 - tanh^2 near 1) */
    const double caps[] = {0.5, 50.0, 50000.0};
    for (int i = 0; i < 3; i++) {
        bwd_config_t c;
        memset(&c, 0, sizeof c);
        fwd_config_default(&c.fwd);
        c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = 2, c.fwd.s = 200, c.fwd.s_k = 333, c.fwd.mask = i == 1 ? "b" : "0";
        c.fwd.d = c.fwd.d_v = i == 2 ? 128 : 64, c.fwd.dtype = i % 2 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.fwd.softcap = caps[i], c.fwd.scale = 1.0, c.fwd.seed = 850 + (uint64_t)i;
        conformance_bwd_pipelines(t, &c);
    }
    /* deterministic mode: bitwise equal over 10 runs (long enough for several key tiles
     * per m-block, so that the order of their adds matters); the last three have more key
     * tiles than one of the wgmma kernel's cohorts (16 tiles, bwd.c), whose tiles add in
     * the order they reach an m-block, after every tile of the cohorts before */
    for (int i = 0; i < 6; i++) {
        bwd_config_t c;
        memset(&c, 0, sizeof c);
        fwd_config_default(&c.fwd);
        c.fwd.b = 2, c.fwd.h = 4, c.fwd.h_k = i % 3 == 2 ? 1 : 4, c.fwd.s = i < 3 ? 1024 : 411;
        c.fwd.s_k = i < 3 ? 1024 : 2300 + 77 * i;
        c.fwd.d = c.fwd.d_v = i % 3 == 1 ? 64 : 128, c.fwd.dtype = i < 3 ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
        c.fwd.mask = i == 0 ? "0" : i == 4 ? "t:300,200" : "b", c.fwd.p_drop = i == 2 ? 0.1 : 0.0;
        c.fwd.seed = 500 + (uint64_t)i;
        c.deterministic = 1;
        char chosen[256], alt[256];
        deterministic_repeats(t, &c, NULL, chosen, sizeof chosen);
        if (conformance_other_bwd_kernel(chosen, &c, alt, sizeof alt)) deterministic_repeats(t, &c, alt, NULL, 0);
    }
}
