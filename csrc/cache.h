/* The mask cache of a compiled grammar (cache.c): one entry per automaton
 * state that scans, built on first use by whichever thread needs it, shared by
 * every matcher.  Everything a grammar fills in after compile lives here,
 * behind g->cache: the entries, the locks, what entries are built with (the
 * flat-walk DFA, loop walks), the whole-mask memo and the counters. */
#ifndef CFGMASK_CACHE_H
#define CFGMASK_CACHE_H

#include <pthread.h>
#include <stdatomic.h>

#include "entry.h"
#include "maskmemo.h"
#include "stackmemo.h"

#define CM_COMPOSE_MAX_DEPTH 64   /* entries built from entries built from ... */
#define CM_SPARE_BITS 4           /* builds nest (composed entries, donors): a few bitsets kept */

typedef struct cm_flat cm_flat;            /* flat.c: the DFA of flat private charts */
typedef struct cm_loop_walk cm_loop_walk;  /* loops.c: a trie walk shared by equal loops */
typedef struct cm_tail cm_tail;            /* compose.c: a callee's walk of one first byte's subtree */
typedef struct cm_follow_memo cm_follow_memo;  /* walk.c: the upward filter's verdicts */
typedef struct cm_promote cm_promote;          /* promote.c: uncertain tokens every caller reads on */
typedef struct cm_cands_slot cm_cands_slot;    /* compose.c: a call part's candidates by return row */
typedef struct cm_repeat cm_repeat;            /* repeat.c: solo states offering their entries */

struct cm_cache {
    /* the entries: slots are published with release stores and read without the lock */
    _Atomic(cm_entry *) *slots;     /* [n_states] */
    _Atomic(const cm_entry *) *fill_slots;  /* [n_states]: what a mask's gather reads once the
                                       state's uses reached the promotion's (promote.c): its
                                       promoted copy, or slots[]'s entry; NULL before */
    _Atomic uint8_t *uses;          /* [n_states]: gathers that read the state, up to that */
    pthread_mutex_t lock;           /* builds entries; guards what follows but the atomics */
    cm_entry **entries;             /* distinct entries, open addressing [entries_cap]; */
    size_t entries_cap, n_entries;  /*   they own the memory slots[] points to */
    atomic_size_t bytes;            /* held by entries, the flat DFA and loop walks */
    atomic_size_t n_cached;         /* states with an entry */
    /* what entries are built with, under lock */
    uint8_t *building;              /* [n_states] entries being composed or taken from a donor */
    uint32_t compose_depth;         /* nesting of those, up to CM_COMPOSE_MAX_DEPTH */
    cm_flat *flat;                  /* built lazily by walks */
    cm_loop_walk **loops;           /* [CM_LOOP_BUCKETS] shared loop walks */
    uint32_t *loop_lab;             /* [n_states] scratch of the loop finder, all UINT32_MAX between uses */
    cm_tail **tails;                /* compose.c: tail parts by (callee start, byte), [n_tails] */
    size_t n_tails, cap_tails;
    uint32_t *tail_slots;           /* compose.c: tails' index by (start, byte), open addressing
                                       [tail_slots_cap]: i + 1, 0 empty; NULL: none (scanned) */
    size_t tail_slots_cap;
    uint32_t *exit_asker;           /* compose.c: [n_states] per start, the position + 1 whose exit split first
                                       stood on it (exit_split); NULL until one did */
    cm_follow_memo *follow;         /* walk.c: by (rule, bytes after an exit), built lazily */
    cm_promote *promote;            /* promote.c: its charts and verdicts, built lazily */
    cm_cands_slot *cands_slots;     /* compose.c: part_cands' lists by (part entry, return row),
                                       open addressing [cands_cap], NULL until the first */
    size_t cands_cap, cands_used;
    uint32_t *spare_bits[CM_SPARE_BITS];  /* zeroed [n_words] bitsets for the next builds' walks */
    uint32_t n_spare;
    cm_repeat *repeat;              /* repeat.c, NULL until the first */
    /* how entries were built (cm_grammar_build_stats) */
    atomic_size_t composed, donated, loops_from_vocab;
    atomic_size_t tail_walks, tail_uses;  /* tail parts walked, and taken by byte edges */
    atomic_size_t run_walks, runs_from_vocab;  /* run walks walked, and found in the vocabulary */
    /* a segment grammar's entries of segment states, keyed by (state, clipped pair): see
       cm_grammar_seg_entry; under lock, open addressing [seg_cap], NULL until the first */
    struct cm_seg_slot *seg_slots;
    size_t seg_cap, seg_used;
    /* the near entries (cache.c, seg_near), under lock, NULL until the first: per segment its
       cut (segcut.c; NULL where its unit's form is refused) and whether it was made; per state
       the base entries they cut (cm_seg_near_base, interned; EXITs open at 2 s, dead at 2 s + 1) */
    struct cm_segcut **segcuts;
    uint8_t *segcut_tried;
    uint32_t n_segcuts;
    const cm_entry **near_base;
    /* finished masks, under memo.lock */
    cm_mask_memo memo;
    /* uncertain tokens' verdicts by enclosing stack, under stacks.lock */
    cm_stack_store stacks;
};

int cm_cache_new(const cm_grammar *g, cm_cache **out);
void cm_cache_free(cm_cache *c);

/* The cache entry of `state`, built if need be.  Past the cache-memory limit an
 * entry is built for this call only and handed back in *owned for the caller
 * to free.  Readers never lock. */
const cm_entry *cm_grammar_entry(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status);
/* The entry a mask's gather reads: cm_grammar_entry's until the state's uses reach
 * cm_promote_uses' number (default 4), then its promoted copy (promote.c); the use that reaches it
 * builds the copy under the lock.  The copy of it (as cm_grammar_entry_copy), counting a use. */
const cm_entry *cm_grammar_fill_entry(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status);
int cm_grammar_fill_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc);
/* Sets the use that promotes (1-255; 1: the first); returns the number before. */
unsigned cm_promote_uses(unsigned n);

/* A segment grammar's entry of `state` for an item at count k (docs/design.md §7, "Masks on a
 * grammar with counted segments").  Outside segments it is cm_grammar_entry's (a state's walk
 * enters every segment afresh, at count 0).  In a segment it is keyed by (state, need, budget),
 * need = min(max(lo - k, 0), L), budget = min(hi - k, L), L the vocabulary's longest token in
 * bytes, and built by the plain trie walk of a private counted chart from (state, k).  Equal
 * keys have equal entries: a token of n <= L bytes completes j <= n units, and the guards read
 * k + j only before one of its bytes is read (INTO: k + j < hi, EXIT and a completion that
 * the token goes on after: k + j >= lo), so with j <= n - 1 <= L - 1 every k with the same
 * clipped pair gives every guard the same answer.  Locks the cache: not yet fast. */
const cm_entry *cm_grammar_seg_entry(const cm_grammar *g, uint32_t state, uint32_t k, cm_entry **owned, int *status);
/* Is that entry built (cm_cache_peek's)? */
bool cm_grammar_seg_peek(const cm_grammar *g, uint32_t state, uint32_t k);
/* The far pairs' entries from the loop's shared walk (loops.c, cm_seg_far_entry): on by
 * default; off, every keyed entry is the plain walk (the tests' reference).  And how many
 * entries were built so, in this process. */
void cm_seg_far_enable(int on);
size_t cm_seg_far_builds(void);
/* The near pairs' entries (need < L or budget < L) as the far pair's entry less the cut of
 * the segment's bounds (cache.c, seg_near; segcut.c): on by default (counters stay off by
 * default), off for the tests' reference; how many were built so far in this process. */
void cm_seg_near_enable(int on);
size_t cm_seg_near_builds(void);

/* A segment grammar's entries of states outside segments from the rungs that read no count
 * (cache.c, seg_outside_walk: a donor's, a loop's shared walk): on by default; off, each is the
 * plain counted walk (the tests' reference).  And how many were built by each, in this process. */
void cm_seg_ladder_enable(int on);
void cm_seg_ladder_builds(size_t *donated, size_t *looped);
/* A segment grammar's entries of states outside segments in no loop the ladder takes, by the DFA
 * walk of the plain states outside segments they lead through (cache.c, seg_outside_walk;
 * loops.c, cm_seg_chain_entry): on by default, under seg_ladder_enable; off, the plain counted
 * walk (the tests' reference).  And how many were built so, in this process. */
void cm_seg_chain_enable(int on);
size_t cm_seg_chain_builds(void);
/* A segment grammar's entry of `state` at count k (cm_grammar_seg_entry; a state outside
 * segments: its entry by state) copied out as cm_grammar_entry_copy does: for the tests. */
int cm_grammar_seg_entry_copy(const cm_grammar *g, uint32_t state, uint32_t k, uint32_t *words, uint32_t *unc,
                              size_t *n_unc);
/* Keyed entries built and found again, in this process (for the tests). */
size_t cm_seg_entry_builds(void);
size_t cm_seg_entry_hits(void);

/* How many entry builds took a spare bitset, zeroed by an earlier build, so far in this
 * process (for the tests). */
size_t cm_entry_spare_takes(void);

/* The entry of `state` if it is built, else NULL. */
static inline const cm_entry *cm_cache_peek(const cm_grammar *g, uint32_t state) {
    return atomic_load_explicit(&g->cache->slots[state], memory_order_acquire);
}

#endif
