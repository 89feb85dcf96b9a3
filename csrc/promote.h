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
/* Under the cache lock: asks the next piece of state's uncertain tokens unc[0..n) (its plain
 * entry's list, trie order) -- its k-th piece stops after a token once k times
 * cm_promote_piece's work is spent; 1 when every token is asked (then cm_promote_take), 0 while
 * some are left, < 0 on an allocation failure (nothing moves). */
int cm_promote_step(const cm_grammar *g, uint32_t state, const uint32_t *unc, size_t n);
/* Under the cache lock, once cm_promote_step gave 1: whether any token moves (none: the state's
 * record is dropped, no copy is made). */
bool cm_promote_any(const cm_grammar *g, uint32_t state);
/* Under the cache lock, once cm_promote_step gave 1: the tokens of w's uncertain list (the same
 * list) that every context reads on move to its accepted set; how many moved. */
size_t cm_promote_take(const cm_grammar *g, uint32_t state, cm_walk *w);
/* A mask's gather begins: its pieces together may do PROM_FILL first pieces' work. */
void cm_promote_fill_begin(void);
/* Sets a first piece's work (0: a state's tokens all asked at once); returns the one before. */
unsigned long long cm_promote_piece(unsigned long long work);
void cm_promote_free(cm_promote *x);

#endif
