/* Block wraps of counted repetitions (wrap.c). */
#ifndef CFGMASK_WRAP_H
#define CFGMASK_WRAP_H

#include "entry.h"

/* Does the entry of `state`, with n_uncertain uncertain tokens, get split? */
bool cm_wrap_applies(const cm_grammar *g, uint32_t state, size_t n_uncertain);
/* Split the uncertain tokens of e, the entry of `state`, into e->wrap_bits and
 * e->rest; nothing when no token wraps. */
int cm_wrap_split(const cm_grammar *g, uint32_t state, cm_entry *e);

#endif
