/* SPDX-License-Identifier: MIT */
/*
 * rules.h: the rules that decide whether a kernel key is a valid instance. Enumeration
 * filters by them; `fmha enumerate --check` and the tests name them. Each has an id and
 * writes a one-line message naming what it found.
 */
#ifndef FMHA_CORE_RULES_H
#define FMHA_CORE_RULES_H

#include <stddef.h>

#include "key.h"

typedef struct key_rule {
    const char *id;
    const char *summary;
    /* Returns 1 when k passes; otherwise writes a message to why and returns 0. */
    int (*check)(const fmha_key_t *k, char *why, size_t len);
} key_rule_t;

extern const key_rule_t fmha__key_rules[];
extern const int fmha__num_key_rules;

/* Apply every rule; returns NULL when k is valid, else the first rule that refuses it
 * (message in why). */
const key_rule_t *fmha__key_check(const fmha_key_t *k, char *why, size_t len);

#endif /* FMHA_CORE_RULES_H */
