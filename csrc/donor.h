/* Entries taken from a like state's (donor.c). */
#ifndef CFGMASK_DONOR_H
#define CFGMASK_DONOR_H

#include "walk.h"

/* The donor of `state` (-1: none, or too much to walk again), and the first
 * bytes on which the two part (part[256]).  Under the cache lock. */
int32_t cm_donor_of(const cm_grammar *g, uint32_t state, bool *part);
/* The entry of `state` (w empty) from its donor's entry de. */
int cm_donor_build(const cm_grammar *g, uint32_t state, const cm_entry *de, const bool *part, cm_walk *w);

#endif
