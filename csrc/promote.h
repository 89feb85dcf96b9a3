/* Uncertain tokens that every caller of the item's rule reads on, taken as accepted
 * (promote.c). */
#ifndef CFGMASK_PROMOTE_H
#define CFGMASK_PROMOTE_H

#include "walk.h"

typedef struct cm_promote cm_promote;

/* Process-wide switch (default on; off: the entries as before, the tests' reference) and the
 * tokens so moved in this process. */
void cm_promote_enable(int on);
size_t cm_promoted(void);
bool cm_promote_applies(const cm_grammar *g);
/* Under the cache lock: w's uncertain tokens (trie order) that every context reads on move to
 * its accepted set. */
void cm_promote_uncertain(const cm_grammar *g, uint32_t state, cm_walk *w);
void cm_promote_free(cm_promote *x);

#endif
