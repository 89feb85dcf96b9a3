/* Entries taken from a like state's (donor.c). */
#ifndef CFGMASK_DONOR_H
#define CFGMASK_DONOR_H

#include "walk.h"

/* The donor of `state` (-1: none, or too much to walk again), and the first
 * bytes on which the two part (part[256]).  Under the cache lock. */
int32_t cm_donor_of(const cm_grammar *g, uint32_t state, bool *part);
/* The entry of `state` (w empty) from its donor's entry de: the first bytes of part walked
 * again, but those whose subtrees read alike from both (donor.c, alike_subtree). */
int cm_donor_build(const cm_grammar *g, uint32_t state, uint32_t donor, const cm_entry *de, const bool *part,
                   cm_walk *w);
/* A part byte's subtree taken from the donor where every token reads alike from both (on, the
 * default), or walked again (off: the reference the tests compare against).  Process-wide. */
void cm_donor_alike_enable(int on);
/* How many first bytes' subtrees were taken so far (process-wide). */
size_t cm_donor_alike_hits(void);
/* A state's mode target (the donor's pick) counted by its own bytes where it has few: on (the
 * default), or by its classes (the reference the tests compare against); how many so far. */
void cm_donor_mode_bytes_enable(int on);
size_t cm_donor_mode_bytes_hits(void);

#endif
