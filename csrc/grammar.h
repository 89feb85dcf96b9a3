/* The compiled grammar (grammar.c): validated copies of the automaton tables,
 * what is derived from them once, and the limits.  All of it is immutable after
 * cm_grammar_new; what later fills in -- the mask cache, the whole-mask memo,
 * the structures entries are built with -- is behind `cache` (cache.h), so a
 * `const cm_grammar *` is const in earnest. */
#ifndef CFGMASK_GRAMMAR_H
#define CFGMASK_GRAMMAR_H

#include <stdbool.h>

#include "bits.h"
#include "cfgmask.h"
#include "vocab.h"

typedef struct cm_cache cm_cache;

struct cm_grammar {
    /* the tables and the vocabulary */
    cm_tables t;                /* pointers into blob, or the caller's (cm_grammar_new_borrowed) */
    void *blob;                 /* one allocation holding all table copies (borrowed: the no-marker ones) */
    const cm_vocab *v;          /* borrowed */
    uint32_t *stop_ids;
    size_t n_stop;
    size_t n_words;             /* ceil(V / 32) */
    /* derived from the tables (grammar.c, derive_*) */
    uint8_t *has_bytes;         /* [n_states] state has a byte transition */
    uint8_t *simple;            /* [n_states] neither accepting nor calling */
    uint8_t *has_tokens;        /* [n_states] state has token-terminal edges */
    uint8_t *plain;             /* [n_states] simple and no token edges: a walk needs no chart */
    uint8_t *solo;              /* [n_states] calling nothing, no token edges (may accept) */
    uint64_t *calls;            /* [n_states] bit r % 64 set if the state calls rule r */
    uint32_t *next_bytes;       /* [n_states * 8] bytes with a transition */
    uint32_t *ret_off;          /* [n_rules + 1] return states of rule r: */
    uint32_t *ret_state;        /*   ret_state[ret_off[r] .. ret_off[r+1]), distinct */
    uint8_t *rule_block;        /* [n_rules] every state solo, accepting states read no more */
    bool facts_borrowed;        /* has_bytes .. next_bytes and rule_block point into the compiler's
                                   facts (cm_grammar_new_facts): not freed here */
    uint32_t *negated_bits;     /* [n_token_sets * n_words]: members of negated token sets */
    uint32_t *la_allow;         /* [n_la * n_words] per lookahead debt, the tokens that pay it
                                   (debt 0: unused) */
    uint32_t *la_pending_off;   /* [n_la + 1] per debt, the trie entries that end inside a */
    uint32_t *la_pending;       /*   character still owing it: la_pending[off[d] .. off[d+1]) */
    /* counted repetitions (segments.c, cm_grammar_new_segments; NULL / 0 without): per state its
       segment (CM_SEG_NONE: none), per byte cell its edge's flags, per segment lo, hi, head.  The
       matcher's chart keeps a count per item only when has_segments (earley.c). */
    bool has_segments;
    uint32_t n_segments;
    uint32_t *state_seg;
    uint8_t *edge_flags;
    uint32_t *seg_lo, *seg_hi, *seg_head;
    /* the limits it was compiled with */
    cm_limits lim;
    /* everything filled in later, by whichever thread needs it first */
    cm_cache *cache;
};

/* Origin of the one item a mask-cache walk starts from: its rule's caller is
 * unknown, so completing it "exits" to the context instead of completing. */
#define CM_OUTER UINT32_MAX

/* An item's `state` packs the automaton state (low CM_STATE_BITS bits) with the
 * lookahead debt the item owes its next byte (high bits; 0: none).  Items that
 * differ only in the debt they owe are distinct items. */
#define CM_STATE_BITS 24
#define CM_STATE_MASK ((1u << CM_STATE_BITS) - 1)
static inline uint32_t cm_st(uint32_t packed) { return packed & CM_STATE_MASK; }
static inline uint32_t cm_la(uint32_t packed) { return packed >> CM_STATE_BITS; }
static inline uint32_t cm_pack(uint32_t st, uint32_t la) { return st | (la << CM_STATE_BITS); }

/* Lookahead debts (cm_tables.rule_la): what debt `la` leaves after byte b
 * (0 paid, CM_LA_DEAD: b is forbidden). */
#define CM_LA_DEAD 255u
static inline uint32_t cm_la_next(const cm_grammar *g, uint32_t la, unsigned b) {
    return la ? g->t.la_next[(size_t)la * 256 + b] : 0;
}

static inline bool cm_la_forbids(const cm_grammar *g, uint32_t la, unsigned b) {
    return cm_la_next(g, la, b) == CM_LA_DEAD;
}

/* The debt owing both a and b (debts only meet between characters, where the
 * table is complete; validate_lookahead checks what it can). */
static inline uint32_t cm_la_union(const cm_grammar *g, uint32_t a, uint32_t b) {
    if (!b || a == b) return a;
    if (!a) return b;
    uint32_t u = g->t.la_union[(size_t)a * g->t.n_la + b];
    return u == CM_LA_DEAD ? a : u;
}

/* May byte b come right after a completed `rule` (FOLLOW)? */
static inline bool cm_follows(const cm_grammar *g, uint32_t rule, uint8_t b) {
    return (g->t.rule_follow[(size_t)rule * 8 + (b >> 5)] >> (b & 31)) & 1u;
}

/* Is `token` in token set k (negated sets: every token but the listed and the stop tokens)? */
static inline bool cm_token_in_set(const cm_grammar *g, uint32_t k, uint32_t token) {
    const cm_tables *t = &g->t;
    if (t->set_negated[k]) return cm_bit(g->negated_bits + (size_t)k * g->n_words, token);
    for (uint32_t i = t->set_off[k]; i < t->set_off[k + 1]; i++)
        if (t->set_ids[i] == token) return true;
    return false;
}

/* A segment grammar's count on arriving at `st` from outside its segment (a prediction, a
 * completion's target, an EXIT, an edge from outside): 0 on a head, CM_SEG_NONE elsewhere. */
static inline uint32_t cm_seg_enter(const cm_grammar *g, uint32_t st) {
    return g->state_seg[st] == CM_SEG_NONE ? CM_SEG_NONE : 0;
}

/* Does `st` accept with count k (a head only at k >= lo)? */
static inline bool cm_seg_accepts(const cm_grammar *g, uint32_t st, uint32_t k) {
    if (!g->t.accepting[st]) return false;
    uint32_t sid = g->state_seg[st];
    return sid == CM_SEG_NONE || k >= g->seg_lo[sid];
}

/* Count scans of items in segment states (segments.c's counter, `_core.counted_scans()`). */
void cm_counted_scans_add(size_t n);

/* The checks cm_grammar_new makes of its tables but the byte cells' (grammar.c). */
int cm_tables_validate(const cm_tables *t);

#endif
