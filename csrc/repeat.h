/* Entries equal to a sibling's by the tokens' horizon (repeat.c). */
#ifndef CFGMASK_REPEAT_H
#define CFGMASK_REPEAT_H

#include "entry.h"

typedef struct cm_repeat cm_repeat;

/* An earlier solo state's interned entry that `state`'s build would equal, proved by a joint
 * trie walk of both automata (repeat.c); NULL where none is (the state is built).  Under the
 * cache lock. */
const cm_entry *cm_repeat_take(const cm_grammar *g, uint32_t state);
/* Offer `state`'s interned entry e to later states (a solo state's, no uncertain tokens). */
void cm_repeat_note(const cm_grammar *g, uint32_t state, const cm_entry *e);
void cm_repeat_free(cm_repeat *r);
/* The sharing: on (the default) or off (every state built: the reference the tests compare
 * against).  Process-wide; the proofs tried and those that held so far in this process. */
void cm_repeat_enable(int on);
void cm_repeat_counts(size_t *tries, size_t *hits);
/* The check before a proof (deep_ok: a state whose first two bytes reach a state that is not
 * solo takes no part): on (the default) or off (every candidate pair walked).  Process-wide;
 * it only skips proofs that would fail. */
void cm_repeat_checks_enable(int on);
/* The pair table of a proof's exploration: pairs hashed to their home slots (the default), or,
 * off, every pair in one home slot, so that each lookup probes every pair seen (rep45's linear
 * check: what the tests compare the hashed lookup against).  Process-wide; same verdicts. */
void cm_repeat_pair_hash_enable(int on);

#endif
