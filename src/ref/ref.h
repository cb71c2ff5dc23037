/* ref.h: entry points of the CPU backend (the oracle every GPU kernel is tested against). */
#ifndef FMHA_REF_REF_H
#define FMHA_REF_REF_H

#include "../core/internal.h"

/* Forward attention, batch and group mode, every feature of REFERENCE.md.
 * data[role] holds the host pointer of each role (NULL when the role is absent). */
fmha_status_t fmha__ref_fwd(const struct fmha_plan *plan, void *const *data, void *workspace,
                            char *err, size_t err_len);

#endif /* FMHA_REF_REF_H */
