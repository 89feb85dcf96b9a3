/* Block wraps of counted repetitions (wrap.c). */
#ifndef CFGMASK_WRAP_H
#define CFGMASK_WRAP_H

#include "entry.h"

/* Does the entry of `state`, with n_uncertain uncertain tokens, get split? */
bool cm_wrap_applies(const cm_grammar *g, uint32_t state, size_t n_uncertain);
/* Split the uncertain tokens of e, the entry of `state`, into e->wrap_bits and
 * e->rest; nothing when no token wraps. */
int cm_wrap_split(const cm_grammar *g, uint32_t state, cm_entry *e);

/* The wrap split of `state`'s entry (built if need be), for tests: the wrap bits
 * into words (ceil(V / 32)) and the rest's token ids into rest (room for V), their
 * number into *n_rest; 1 when the entry is split, 0 when not (nothing written),
 * < 0 error. */
int cm_grammar_entry_wrap(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *rest, size_t *n_rest);

#endif
