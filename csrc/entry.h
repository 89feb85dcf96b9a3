/* One mask-cache entry (entry.c): the context-independent part of the mask of
 * one automaton state (XGrammar's adaptive token mask). */
#ifndef CFGMASK_ENTRY_H
#define CFGMASK_ENTRY_H

#include "grammar.h"

/* Tokens whose bytes stay inside the state's rule automaton (accepted), and
 * tokens that leave it mid-token (uncertain: decided against the real Earley
 * state at run time).  Everything else is rejected. */
typedef struct cm_entry {
    uint32_t n_accepted;
    uint32_t *accepted_ids;     /* sorted token ids, or NULL when bits is used */
    uint32_t *accepted_bits;    /* [n_words], or NULL */
    uint32_t n_uncertain;
    uint32_t *uncertain;        /* trie indices, ascending */
    /* A state of a repeated block (its rule may follow itself; see wrap.c): the
     * uncertain tokens accepted when the block may start again right after it
     * ends, as a bitset, and the others (trie indices, ascending).  NULL / 0
     * when not computed. */
    uint32_t *wrap_bits;        /* [n_words] or NULL */
    uint32_t *rest;
    uint32_t n_rest;
    size_t bytes;
    uint64_t hash;              /* of the content (cm_entry_hash): states with equal entries share one */
    /* first bytes b whose every name entry the accepted tokens hold (its walk's cm_walk.names;
     * zero where not known): a composed entry ORing this one in need not set them again */
    uint32_t names[8];
} cm_entry;

void cm_entry_free(cm_entry *e);
/* words |= the entry's accepted tokens (those `allow` has, unless NULL). */
void cm_or_accepted(const cm_grammar *g, uint32_t *words, const cm_entry *e, const uint32_t *allow);
uint64_t cm_entry_hash(const cm_grammar *g, const cm_entry *e);
/* A bitset entry's hash over a quarter of its words (on, the default) or all of them (off: the
 * reference the tests compare against).  Process-wide: clear the caches after a change. */
void cm_entry_hash_sampled_enable(int on);
bool cm_entry_equal(const cm_grammar *g, const cm_entry *a, const cm_entry *b);

#endif
