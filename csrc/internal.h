/* Internal structures shared by the C core's translation units. */
#ifndef CFGMASK_INTERNAL_H
#define CFGMASK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cfgmask.h"

#define CM_NO_STATE (-1)
/* Origin of the one item a mask-cache walk starts from: its rule's caller is
 * unknown, so completing it "exits" to the context instead of completing. */
#define CM_OUTER UINT32_MAX

struct cm_vocab {
    size_t n_tokens;
    uint8_t *data;          /* all token bytes, concatenated */
    uint64_t *offsets;      /* [n_tokens + 1] */
    uint8_t *in_trie;       /* [n_tokens] */
    size_t n_trie;
    uint32_t *trie_ids;     /* text tokens sorted by bytes: the trie in DFS order */
    uint32_t *trie_lcp;     /* common prefix length with the previous trie entry */
    uint8_t *trie_data;     /* token bytes again, in trie order: walks stream memory */
    uint64_t *trie_off;     /* [n_trie + 1] */
    /* skip[trie_off[k] + d - 1]: the first entry after k whose common prefix
     * with its predecessor is shorter than d, i.e. the end of the subtree of
     * k's first d bytes (the trie's "next sibling" links, one per node on k's path) */
    uint32_t *skip;
    uint32_t first_off[257];    /* the trie entries starting with byte b: [first_off[b], first_off[b+1]) */
    uint32_t max_len;
    /* Loop walks shared by every grammar compiled for this vocabulary (grammar.c,
     * shared_walk), keyed by the loop's byte-level form: the inside of a JSON
     * string is walked once per process, not once per schema.  Under lw_lock. */
    pthread_mutex_t lw_lock;
    bool lw_lock_ok;
    struct cm_loop_walk **lw_cache;  /* [CM_LOOP_BUCKETS], allocated on first use */
    size_t lw_bytes;
};

static inline const uint8_t *cm_trie_bytes(const cm_vocab *v, size_t k, uint32_t *len) {
    *len = (uint32_t)(v->trie_off[k + 1] - v->trie_off[k]);
    return v->trie_data + v->trie_off[k];
}

static inline const uint8_t *cm_tok_bytes(const cm_vocab *v, uint32_t t, uint32_t *len) {
    *len = (uint32_t)(v->offsets[t + 1] - v->offsets[t]);
    return v->data + v->offsets[t];
}

/* Context-independent part of the mask for one automaton state (XGrammar's
 * adaptive token mask): tokens whose bytes stay inside the state's rule
 * automaton (accepted), and tokens that leave it mid-token (uncertain: decided
 * against the real Earley state at run time).  Everything else is rejected. */
typedef struct cm_entry {
    uint32_t n_accepted;
    uint32_t *accepted_ids;     /* sorted token ids, or NULL when bits is used */
    uint32_t *accepted_bits;    /* [n_words], or NULL */
    uint32_t n_uncertain;
    uint32_t *uncertain;        /* trie indices, ascending */
    /* A state of a repeated block (its rule may follow itself; see wrap_repeats in
     * grammar.c): the uncertain tokens accepted when the block may start again
     * right after it ends, as a bitset, and the others (trie indices, ascending).
     * NULL / 0 when not computed. */
    uint32_t *wrap_bits;        /* [n_words] or NULL */
    uint32_t *rest;
    uint32_t n_rest;
    size_t bytes;
    uint64_t hash;              /* of the content: states with equal entries share one */
} cm_entry;

/* One slot of the whole-mask memo: the signature of a chart (its current set
 * and every set reachable through origins, origins renumbered) and its mask. */
typedef struct cm_mslot {
    uint64_t hash;
    size_t n_sig;
    uint64_t *sig;
    uint32_t *words;            /* [n_words], stop tokens included */
    uint64_t stamp;             /* when written (replacement picks the older way) */
} cm_mslot;
typedef struct cm_loop_walk cm_loop_walk;  /* grammar.c: a trie walk shared by equal loops */
typedef struct cm_flat cm_flat;            /* grammar.c: the DFA of flat private charts */
#define CM_LOOP_BUCKETS 256
#define CM_MEMO_MASKS 2048      /* slots of the whole-mask memo (two-way sets) */
#define CM_MEMO_MAX_SIG 65536   /* charts with bigger signatures are not memoized */

struct cm_grammar {
    cm_tables t;                /* pointers into owned copies below */
    void *blob;                 /* one allocation holding all table copies */
    const cm_vocab *v;
    uint32_t *stop_ids;
    size_t n_stop;
    cm_limits lim;
    size_t n_words;             /* ceil(V / 32) */
    uint8_t *has_bytes;         /* [n_states] state has a byte transition */
    uint8_t *simple;            /* [n_states] neither accepting nor calling */
    uint64_t *calls;            /* [n_states] bit r % 64 set if the state calls rule r */
    uint8_t *has_tokens;        /* [n_states] state has token-terminal edges */
    uint8_t *plain;             /* [n_states] simple and no token edges: a walk needs no chart */
    uint8_t *solo;              /* [n_states] calling nothing, no token edges (may accept) */
    uint32_t *negated_bits;     /* [n_token_sets * n_words]: members of negated token sets */
    uint32_t *next_bytes;       /* [n_states * 8] bytes with a transition */
    _Atomic(cm_entry *) *cache; /* [n_states] */
    pthread_mutex_t lock;
    atomic_size_t cache_bytes;
    atomic_size_t cache_entries;
    cm_mslot *mslots;           /* [CM_MEMO_MASKS], allocated on first use, under mlock */
    cm_loop_walk **loops;       /* [CM_LOOP_BUCKETS] shared loop walks, under lock */
    uint32_t *loop_lab;         /* [n_states] scratch of find_loop, all UINT32_MAX between uses */
    uint64_t mstamp;
    pthread_mutex_t mlock;
    cm_entry **entries;         /* distinct cached entries, open addressing [entries_cap], */
    size_t entries_cap, n_entries;  /* under lock; they own the memory cache[] points to */
    uint32_t *la_allow;         /* [n_la * n_words] per lookahead debt, the tokens that pay it
                                   (debt 0: unused) */
    uint32_t *la_pending_off;   /* [n_la + 1] per debt, the trie entries that end inside a */
    uint32_t *la_pending;       /*   character still owing it: la_pending[off[d] .. off[d+1]) */
    uint32_t *ret_off;          /* [n_rules + 1] return states of rule r: */
    uint32_t *ret_state;        /*   ret_state[ret_off[r] .. ret_off[r+1]), distinct */
    uint8_t *building;          /* [n_states] entries being composed (under lock) */
    uint8_t *rule_block;        /* [n_rules] every state solo, accepting states read no more */
    cm_flat *flat;              /* built lazily by walks, under lock */
    atomic_size_t composed;     /* entries built by compose() */
    atomic_size_t donated;      /* entries built by from_donor() */
    atomic_size_t loops_from_vocab;  /* loop walks the vocabulary had already */
    uint32_t compose_depth;     /* nesting of compose() (under lock) */
};

/* An item's `state` packs the automaton state (low CM_STATE_BITS bits) with the
 * lookahead class the item owes its next byte (high bits; 0: none).  Items that
 * differ only in the class they owe are distinct items. */
typedef struct cm_item {
    uint32_t state;
    uint32_t origin;
} cm_item;

#define CM_STATE_BITS 24
#define CM_STATE_MASK ((1u << CM_STATE_BITS) - 1)
static inline uint32_t cm_st(uint32_t packed) { return packed & CM_STATE_MASK; }
static inline uint32_t cm_la(uint32_t packed) { return packed >> CM_STATE_BITS; }
static inline uint32_t cm_pack(uint32_t st, uint32_t la) { return st | (la << CM_STATE_BITS); }

/* A memoized closure: the items a set's kernel (the items a byte scan produced)
 * closes to.  It depends only on the kernel and the sets up to the kernel's
 * newest origin, so it stays valid while that set's version is unchanged. */
#define CM_MEMO_SLOTS 256
#define CM_MEMO_KERNEL 32
#define CM_MEMO_HERE UINT32_MAX - 1    /* origin = the set being built */
#define CM_MEMO_ANY_BYTE 0xFFFFu
typedef struct cm_memo {
    uint32_t n_kernel, max_origin;
    cm_item kernel[CM_MEMO_KERNEL];
    uint64_t version;
    cm_item *closure;
    uint32_t n_closure, cap_closure;
    uint32_t vset;              /* the set whose version is checked (max_origin, or later) */
    uint16_t byte;              /* the set's own byte, if the closure read it; else ANY */
    bool exited;
} cm_memo;

/* An Earley chart over bytes: set i holds items[set_start[i] .. set_start[i+1]). */
typedef struct cm_chart {
    cm_item *items;
    size_t n_items, cap_items;
    uint32_t *set_start;        /* [n_sets + 1] */
    uint16_t *set_byte;         /* [cap_sets] the byte whose scan made each set; 256: none
                                   (set 0, a whole-token scan) */
    size_t n_sets, cap_sets;
    /* dedup of the set under construction: open addressing, generation stamped */
    uint64_t *hkeys;
    uint32_t *hgen;
    size_t hcap;
    uint32_t gen;
    bool exited;                /* the last set completed a CM_OUTER item */
    uint32_t read_hi;           /* the last set a lookahead debt read the byte of (close_memoized) */
    bool upward;                /* a completed CM_OUTER item returns to every caller of its
                                   rule (g->ret_*), each as a new CM_OUTER item */
    uint64_t *version;          /* [cap_sets] when each set was last built */
    uint64_t clock;
    cm_memo *memo;              /* [CM_MEMO_SLOTS], allocated on first use */
    /* Waiter index of closed sets (built on demand for big sets): the items of
     * set o that call rule r are wpool[slot.off .. slot.off + slot.n) for the
     * slot keyed (o, r) whose version is o's current one. */
    struct cm_wslot *wslots;    /* open addressing, [wcap] */
    size_t wcap, wused;
    uint32_t *wpool;
    size_t wpool_n, wpool_cap;
    uint64_t *wbuilt;           /* [cap_sets] version whose index is built, 0 none */
    uint64_t *wseen;            /* [cap_sets] version of the last completion into the set */
    uint64_t *wtmp;             /* scratch: (rule << 32 | item) pairs of the set being indexed */
    size_t wtmp_cap;
} cm_chart;

typedef struct cm_wslot {
    uint64_t key;               /* set << 32 | rule; 0 = empty (set 0 rule 0 is stored as key ~0) */
    uint64_t version;
    uint32_t off, n;
} cm_wslot;

struct cm_matcher {
    const cm_grammar *g;
    cm_chart c;
    uint32_t *hist;             /* per accepted token: number of sets before it */
    size_t n_hist, cap_hist;
    bool terminated;
    int err;
    /* scratch for fill_mask */
    uint32_t *stamp;            /* [n_states] */
    uint32_t stamp_gen;
    uint64_t *cand;             /* [ceil(n_trie / 64)] */
    cm_mask_stats stats;        /* of the last fill_mask */
    uint32_t rep_rule[8], rep_origin[8];  /* mask.c repeats(): answers during one mask */
    int8_t rep_ans[8];
    size_t n_rep;
    /* scratch for the mask memo's signature */
    uint64_t *sig;
    size_t sig_cap;
    uint32_t *sq, *slabel, *sgen;   /* [scap] BFS queue, labels, visit stamps per set */
    size_t scap;
    uint32_t sgen_cur;
};

/* earley.c */
int cm_chart_init(cm_chart *c, const cm_grammar *g);
int cm_chart_init_item(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin);
int cm_chart_init_returns(cm_chart *c, const cm_grammar *g, uint32_t rule);
int cm_chart_init_items(cm_chart *c, const cm_grammar *g, const uint32_t *states, size_t n);
int cm_chart_reset_items(cm_chart *c, const cm_grammar *g, const uint32_t *states, size_t n);
int cm_chart_repeats(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin);
void cm_chart_free(cm_chart *c);
int cm_chart_copy(cm_chart *dst, const cm_chart *src);
int cm_chart_scan(cm_chart *c, const cm_grammar *g, uint8_t byte);
bool cm_chart_accepting(const cm_chart *c, const cm_grammar *g);
int cm_chart_token_scan(cm_chart *c, const cm_grammar *g, uint32_t token, size_t from, bool merge);
static inline void cm_chart_truncate(cm_chart *c, size_t n_sets) {
    c->n_sets = n_sets;
    c->n_items = c->set_start[n_sets];
}

/* fsm.c */
size_t cm_sort_unique_u32(uint32_t *v, size_t n);

/* mask.c */
void cm_or_accepted(const cm_grammar *g, uint32_t *words, const cm_entry *e, const uint32_t *allow);
size_t cm_count_bits(const uint32_t *words, size_t n);

/* grammar.c */
void cm_loop_walks_free(struct cm_loop_walk **buckets);
const cm_entry *cm_grammar_entry(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status);
void cm_entry_free(cm_entry *e);
bool cm_token_in_set(const cm_grammar *g, uint32_t set, uint32_t token);

static inline bool cm_bit(const uint32_t *set, unsigned i) { return (set[i >> 5] >> (i & 31)) & 1u; }

/* Length of the common prefix of a[0..la) and b[0..lb). */
static inline uint32_t cm_common_prefix(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb) {
    uint32_t n = la < lb ? la : lb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

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
 * table is complete; validate() checks what it can). */
static inline uint32_t cm_la_union(const cm_grammar *g, uint32_t a, uint32_t b) {
    if (!b || a == b) return a;
    if (!a) return b;
    uint32_t u = g->t.la_union[(size_t)a * g->t.n_la + b];
    return u == CM_LA_DEAD ? a : u;
}

#endif
