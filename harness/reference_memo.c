/* SPDX-License-Identifier: MIT */
/* reference_memo.c: see reference_memo.h. */
#include "reference_memo.h"

#include <stdlib.h>
#include <string.h>

typedef enum held { HELD_NONE, HELD_FWD, HELD_BWD } held_t;

struct reference_memo {
    char *key; /* of what is held */
    held_t held;
    naive_out_t ref, low;
    naive_grads_t gref, glow;
    long computed, reused;
};

reference_memo_t *reference_memo_create(void) { return calloc(1, sizeof(reference_memo_t)); }

static void forget(reference_memo_t *m)
{
    if (m->held == HELD_FWD) naive_out_free(&m->ref), naive_out_free(&m->low);
    if (m->held == HELD_BWD) naive_grads_free(&m->gref), naive_grads_free(&m->glow);
    free(m->key);
    m->key = NULL;
    m->held = HELD_NONE;
}

void reference_memo_destroy(reference_memo_t *m)
{
    if (!m) return;
    forget(m);
    free(m);
}

void reference_memo_counts(const reference_memo_t *m, long *computed, long *reused)
{
    *computed = m->computed;
    *reused = m->reused;
}

/* Does the memo hold what of key? Otherwise it is emptied and takes the key. */
static int holds(reference_memo_t *m, held_t what, const char *key, int *failed)
{
    *failed = 0;
    if (m->held == what && m->key && strcmp(m->key, key) == 0) {
        m->reused++;
        return 1;
    }
    forget(m);
    if (!(m->key = strdup(key))) *failed = 1;
    return 0;
}

/* The two references of each kind, computed into the memo; 0 or -1 (out of memory). */
static int compute_fwd(reference_memo_t *m, const fmha_problem_t *p, void *const *data)
{
    if (naive_fwd(p, data, NAIVE_F64, &m->ref)) return -1;
    if (naive_fwd(p, data, NAIVE_LOWP, &m->low)) return naive_out_free(&m->ref), -1;
    return 0;
}

static int compute_bwd(reference_memo_t *m, const fmha_problem_t *p, void *const *data)
{
    if (naive_bwd(p, data, NAIVE_F64, &m->gref)) return -1;
    if (naive_bwd(p, data, NAIVE_LOWP, &m->glow)) return naive_grads_free(&m->gref), -1;
    return 0;
}

/* Make the memo hold `what` of key, computing it unless it is already there. */
static int hold(reference_memo_t *m, held_t what, const char *key, const fmha_problem_t *p, void *const *data,
                int (*compute)(reference_memo_t *, const fmha_problem_t *, void *const *))
{
    int failed;
    if (holds(m, what, key, &failed)) return 0;
    if (failed || compute(m, p, data)) return forget(m), -1;
    m->held = what;
    m->computed++;
    return 0;
}

int reference_memo_fwd(reference_memo_t *m, const char *key, const fmha_problem_t *p, void *const *data,
                       const naive_out_t **ref, const naive_out_t **low)
{
    if (hold(m, HELD_FWD, key, p, data, compute_fwd)) return -1;
    *ref = &m->ref, *low = &m->low;
    return 0;
}

int reference_memo_bwd(reference_memo_t *m, const char *key, const fmha_problem_t *p, void *const *data,
                       const naive_grads_t **ref, const naive_grads_t **low)
{
    if (hold(m, HELD_BWD, key, p, data, compute_bwd)) return -1;
    *ref = &m->gref, *low = &m->glow;
    return 0;
}
