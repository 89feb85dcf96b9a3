/* Entries of counted chains (chains.c): the unrolled positions of x{m,n}. */
#ifndef CFGMASK_CHAINS_H
#define CFGMASK_CHAINS_H

#include "loops.h"

/* The entry walk of a plain state that is a position of a counted chain, from
 * the chain's one shared walk: 1 done, 0 the state is in no chain (w
 * untouched), < 0 error.  Under the cache lock. */
int cm_chain_entry(const cm_grammar *g, uint32_t state, cm_walk *w);

#endif
