/* Flat walks (flat.c): trie walks that follow a lazily built DFA over the
 * private charts of names, strings and keywords instead of an Earley step a
 * byte.  Under the cache lock. */
#ifndef CFGMASK_FLAT_H
#define CFGMASK_FLAT_H

#include "cache.h"
#include "walk.h"

/* cm_walk_range from the single item (state, OUTER), through the flat DFA
 * where the chart is flat (when lim.flat_walks), a chart elsewhere. */
int cm_flat_walk(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0,
                 cm_walk *w);
/* Whether every plain entry (vocab.h) read from (state, OUTER), from any depth,
 * ends live: flat_plain_live's proof for its configuration, kept a
 * configuration.  False when lim.plain_skip or lim.flat_walks is off. */
bool cm_flat_plain_live(const cm_grammar *g, uint32_t state);
/* Whether every rest of a text entry (vocab.h) read from (state, OUTER) at
 * UTF-8 state u (cm_utf8_step; 0: at a character's start), from any depth,
 * ends live: flat_text_live's proof for its configuration (kept for u = 0).
 * False when lim.plain_skip or lim.flat_walks is off. */
bool cm_flat_text_live(const cm_grammar *g, uint32_t state, uint8_t u);
/* cm_flat_walk of the entries of [k, k_end) that are not plain (text: not
 * text), for a state cm_flat_plain_live (cm_flat_text_live at the UTF-8 state
 * of the subtree's first d0 bytes) said yes to (those entries are accepted by
 * the caller, in bulk); [k, k_end) is a subtree of its first d0 bytes. */
int cm_flat_walk_np(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0,
                    bool text, cm_walk *w);
/* Whether from each (z[i], OUTER) -- the states a position's own bytes reach
 * on the first byte of a name, after a first byte b (compose.c) -- every name
 * byte steps to a flat live configuration, and so on to a name entry's
 * greatest length: then every name entry of b whose second byte leads to one
 * of them is accepted (flat_names_live's proof, one byte later).  False when
 * the vocabulary has no name tables or lim.name_skip or lim.flat_walks is off. */
bool cm_flat_names_after(const cm_grammar *g, const uint32_t *z, unsigned n_z);
/* cm_flat_walk of the entries of [k, k_end) that are not names, from (state,
 * OUTER) at depth d0 >= 1, for a state cm_flat_names_after proved (the names
 * are accepted by the caller, in bulk); [k, k_end) is a subtree of its first
 * d0 bytes and d0 is at least the prefix that its first entry that is not a
 * name shares with the one before it (b.c... at depth 2: at most b). */
int cm_flat_walk_names_skipped(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end,
                               uint32_t d0, cm_walk *w);
size_t cm_flat_configs(const cm_flat *f);
/* How many transitions flat_step_plain made, and closures plain_closure_live
 * proved or refuted, in this process (for the tests). */
size_t cm_flat_plain_steps(void);
size_t cm_flat_plain_proofs(void);
/* flat_step_plain's step taken also by configurations of several sets, their last set's items
 * older than it (flat.c, flat_step_plain_sets: an object's key string, a ws loop; on by
 * default, 0 the chart's step), and how many transitions it made, in this process (for the tests). */
void cm_flat_plain_sets_enable(int on);
size_t cm_flat_plain_sets_steps(void);
/* A flat walk's run taking a cell not computed as dead where no item of the configuration's last
 * set reads its byte (flat.c, flat_run_g: no stop for flat_step; on by default, 0 the stop), and
 * how many cells it marked so, in this process (for the tests). */
void cm_flat_run_reads_enable(int on);
size_t cm_flat_run_reads_dead(void);
/* flat_names_live answered once a configuration (on by default), and how often
 * the answer was read back, in this process (for the tests). */
/* The most sets of a flat configuration's chart suffix (0: no cap but CM_FLAT_MAX_ITEMS);
 * process-wide, clear the caches after a change.  How many suffixes it refused. */
void cm_flat_sets_cap(unsigned n);
size_t cm_flat_sets_capped(void);
void cm_flat_names_memo_enable(int on);
size_t cm_flat_names_memo_hits(void);
/* A whole walk from a count of a class near its end takes the class-only entries by length
 * (flat.c, class_bulk): 1 where it pays (the default), 2 wherever it applies, 0 never; and how
 * many walks took them, in this process (for the tests). */
void cm_flat_class_bulk_enable(int mode);
size_t cm_flat_class_bulk_walks(void);
/* How many class tables were made in this process (kept by the vocabulary, shared by its grammars). */
size_t cm_flat_class_tables(void);
/* X's class-only ids by length where the vocabulary holds X's table (flat.c, for chains.c; x the
 * class's bytes that open entries). */
bool cm_flat_class_ids(const cm_vocab *v, const uint32_t *x, const uint32_t **ids, const uint32_t **len_at,
                       uint32_t *top);
/* A flat walk's exit flags known to the common prefix of two stops' entries, their bytes
 * compared (flat.c, flat_known_upto): 1 where more than a few entries lie between (the
 * default), 2 at every stop, 0 never (a scan of every entry between); process-wide, clear
 * the caches after a change. */
void cm_flat_lcp_jump_enable(int mode);
/* A whole walk's text proof passes over the dead steps inside characters that no text entry
 * holds (flat.c, flat_text_unused_live): on by default, 0 the proof that stops at them; and
 * how many of its proofs held past such a step, in this process (for the tests). */
void cm_flat_text_unused_enable(int on);
size_t cm_flat_text_unused_proofs(void);
void cm_flat_free(cm_flat *f);

#endif
