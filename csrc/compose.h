/* Entries composed from their callees' (compose.c). */
#ifndef CFGMASK_COMPOSE_H
#define CFGMASK_COMPOSE_H

#include "walk.h"

#define CM_COMPOSE_MAX_CANDIDATES 4096

/* A part of a composed entry: the entry of a callee's start state, or of the
 * state after a lookahead marker, owing its debt la (0 for calls). */
typedef struct cm_part {
    const cm_entry *e;
    cm_entry *owned;            /* e when the cache could not keep it */
    uint32_t la;
    uint32_t ret1;              /* a call's return state + 1; 0 for the state after a nullable
                                 * callee or a marker (cm_compose_unread) */
    uint32_t state;             /* the state whose entry e is (part_cands' exit check) */
} cm_part;

/* Is ref edge e of `state` its rule's call of itself from its start (left
 * recursion: a star compiled `R: R tail | tail`), not nullable and no marker,
 * with the switch on?  Such a call is no part: its derivation until R completes
 * is the state's own (its byte edges), and what follows is decided by the real
 * chart (cm_compose checks the byte walks' uncertain tokens there). */
bool cm_compose_self_ref(const cm_grammar *g, uint32_t state, uint32_t e);
/* That composition on (the default) or off, process-wide; how many entries were so
 * composed in this process (for the tests). */
/* The tail parts found by an index (on by default) or by a scan of them all, the reference
 * the tests compare against. */
void cm_tail_index_enable(int on);
/* A tail part of a small first byte's subtree kept as its accepted ids, its walk's bitset a zero spare given
 * back (on by default), or, off, a bitset of its own: the reference; how many parts were kept
 * as ids in this process (for the tests). */
void cm_tail_sparse_enable(int on);
size_t cm_tail_sparse_parts(void);
void cm_compose_self_enable(int on);
size_t cm_compose_self_built(void);
/* A composed entry's count left to cm_walk_finish (cm_walk.count_later: found as its ids are
 * taken out) on (the default) or off (counted at once, the reference); how many composed
 * entries left it so in this process (for the tests). */
void cm_compose_count_later_enable(int on);
size_t cm_compose_counted_later(void);
/* A call part's uncertain tokens that its return state cannot read on (cm_compose_unread)
 * left out of the composed state's listed walk: on (the default) or off (all walked, the
 * reference); how many were left out in this process (for the tests). */
void cm_compose_unread_enable(int on);
size_t cm_compose_unread_skipped(void);
/* Those candidate lists kept by the cache, keyed by (part entry, return state's row), and found
 * again rather than filtered anew (compose.c, cands_memo): on (the default) or off (filtered each
 * time, the reference); how many were found so in this process (for the tests). */
void cm_compose_cands_memo_enable(int on);
size_t cm_compose_cands_memo_hits(void);
/* A call part's candidates chosen by the positions where its callee completes, in the chart of
 * its start (part_cands' exit check): on by default; off, the byte check alone (the tests'
 * reference).  cm_compose_unread_exit_lists: the lists so chosen in this process. */
void cm_compose_unread_exits_enable(int on);
size_t cm_compose_unread_exit_lists(void);
/* A state that calls one rule and returns to a final state doing nothing else takes that rule's
 * entry whole (compose.c, pass_through): on (the default) or off (the listed walk and the filter,
 * the reference); how many entries were taken so in this process (for the tests). */
void cm_compose_pass_enable(int on);
size_t cm_compose_pass_taken(void);
/* May the entry of `state` be composed (under the cache lock)? */
bool cm_compose_can(const cm_grammar *g, uint32_t state);
/* Does ref edge e call a nullable rule (no lookahead marker)?  Then the state
 * it returns to, *after, is a part too, at depth 0. */
bool cm_compose_null_part(const cm_grammar *g, uint32_t e, uint32_t *after);
/* The state whose entry ref edge e contributes; *la the debt it owes. */
uint32_t cm_compose_part_state(const cm_grammar *g, uint32_t e, uint32_t *la);
/* The tokens a part leaves for the composed state's chart to decide. */
size_t cm_compose_part_candidates(const cm_grammar *g, const cm_part *p);
/* The entry of `state` (w empty) from the parts of its ref edges, in order;
 * n_cand: their candidates in all.  Under the cache lock. */
int cm_compose(const cm_grammar *g, uint32_t state, const cm_part *parts, uint32_t n_parts, size_t n_cand,
               cm_walk *w);

/* The entry of a state that calls nothing from its byte edges, where some edge
 * leads to a position that calls (its tail parts): 1 done, 0 declined (w
 * untouched), < 0 error.  Under the cache lock. */
int cm_compose_edges(const cm_grammar *g, uint32_t state, cm_walk *w);

/* Tail parts of the levels that pass a subtree through to their one callee
 * taken as the callee's (compose.c, tail_through): on (the default) or off,
 * process-wide; and how many were, in this process (for the tests). */
void cm_tail_alias_enable(int on);
size_t cm_tail_aliases(void);
/* A name run's letter edges walked into the entry rather than kept per (run, letter)
 * (compose.c, edge_shared): on (the default) or off, process-wide; and how many edges were, in
 * this process (for the tests). */
void cm_name_edges_direct_enable(int on);
size_t cm_name_edges_direct(void);
/* A tail part's name entries taken at once after a position's own bytes
 * (compose.c, own_names): on (the default) or off, process-wide; and how
 * many times they were, in this process (for the tests). */
void cm_tail_names_enable(int on);
size_t cm_tail_names_taken(void);

/* A loop's or a run's exit subtree [k, k_end) (entries sharing their first d
 * bytes) from (z, OUTER) at depth d, z a position before an operand, split
 * into z's byte edges and the walks of the starts its calls stand for, their
 * uncertain tokens decided by z's chart (compose.c, exit_split): 1 done, 0
 * declined (w untouched), < 0 error.  Under the cache lock.  On (the default)
 * or off, process-wide; and how many were split, in this process (for the
 * tests). */
int cm_compose_exit(const cm_grammar *g, uint32_t z, uint32_t rule, size_t k, size_t k_end, uint32_t d, cm_walk *w);
void cm_exit_tails_enable(int on);
size_t cm_exit_tails(void);

/* Free the cache's tail parts. */
typedef struct cm_tail cm_tail;
void cm_tails_free(cm_tail **t, size_t n);
/* The cache's memo of call parts' candidates (cm_cache.cands_slots), [cap] slots. */
void cm_cands_free(cm_cands_slot *s, size_t cap);

#endif
