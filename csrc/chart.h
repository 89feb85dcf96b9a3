/* The Earley chart over bytes: its storage (chart.c), the waiter index of its
 * closed sets (waiters.c) and the Earley steps over it (earley.c). */
#ifndef CFGMASK_CHART_H
#define CFGMASK_CHART_H

#include "grammar.h"

typedef struct cm_item {
    uint32_t state;             /* packed: automaton state and the debt owed (cm_pack) */
    uint32_t origin;
} cm_item;

/* A memoized closure: the items a set's kernel (the items a byte scan produced)
 * closes to.  It depends only on the kernel and the sets up to the kernel's
 * newest origin, so it stays valid while that set's version is unchanged.  A
 * kernel of more than CM_MEMO_KERNEL items (memoized only in a chart with
 * memo_big) is the closure's first n_kernel items: a kernel's origins are
 * earlier sets, never CM_MEMO_HERE. */
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
    uint32_t note;              /* the chart's user's, about this closure; 0 when stored
                                   (flat.c: the configuration it makes + 4) */
    uint32_t seg_bits;          /* a segment grammar's kernel: bit i set if kernel item i is in a
                                   segment with k >= lo (the only count a closure reads) */
    uint64_t stamp;             /* the chart's clock when stored (one store a tick: the set the
                                   closure makes ends next); a kept scan's check that the entry
                                   still holds the closure it kept */
} cm_memo;

/* A scan of a big set kept (earley.c, cm_chart_scan_kept in a memo_big chart of a grammar without
 * lookahead debts): the set's version and the byte's class decide the kernel, so the same scan
 * again takes the closure from the memo entry it made or hit (mm, while its stamp holds), or
 * dies at once (mm NULL). */
#define CM_SCAN_SLOTS 128
#define CM_SCAN_MIN 32          /* sets of fewer items are scanned as before */
typedef struct cm_scan_slot {
    uint64_t version;           /* the scanned set's version; 0: empty */
    cm_memo *mm;
    uint64_t stamp;
    uint32_t set;
    uint32_t cls;
} cm_scan_slot;

typedef struct cm_wslot {
    uint64_t key;               /* set << 32 | rule; 0 = empty (set 0 rule 0 is stored as key ~0) */
    uint64_t version;
    uint32_t off, n;
} cm_wslot;

/* An Earley chart over bytes: set i holds items[set_start[i] .. set_start[i+1]). */
typedef struct cm_chart {
    cm_item *items;
    size_t n_items, cap_items;
    uint32_t *counts;           /* [cap_counts] a segment grammar's count per item, parallel to
                                   items (CM_SEG_NONE outside segments); NULL without segments */
    size_t cap_counts;
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
    bool seg_touched;           /* a segment grammar's closure met a segment item again (earley.c:
                                   such a closure is not memoized, its count check must run) */
    bool upward;                /* a completed CM_OUTER item returns to every caller of its
                                   rule (g->ret_*), each as a new CM_OUTER item */
    bool memo_big;              /* memoize closures of kernels over CM_MEMO_KERNEL items too
                                   (walk.c's upward chart: its sets of hundreds of items recur) */
    uint64_t *version;          /* [cap_sets] when each set was last built */
    uint64_t clock;
    cm_memo **memo;             /* [CM_MEMO_SLOTS], allocated on first use, and each slot
                                   when first stored (a private chart of a few bytes stores few) */
    cm_memo *memo_used;         /* the entry the last scan's closure hit or stored; NULL: none */
    cm_scan_slot *scans;        /* [CM_SCAN_SLOTS] memo_big charts' kept scans, on first use */
    /* Waiter index of closed sets (built on demand for big sets): the items of
     * set o that call rule r are wpool[slot.off .. slot.off + slot.n) for the
     * slot keyed (o, r) whose version is o's current one. */
    cm_wslot *wslots;           /* open addressing, [wcap] */
    size_t wcap, wused;
    uint32_t *wpool;
    size_t wpool_n, wpool_cap;
    uint64_t *wbuilt;           /* [cap_sets] version whose index is built, 0 none */
    uint64_t *wseen;            /* [cap_sets] version of the last completion into the set */
    uint64_t *wtmp;             /* scratch: (rule << 32 | item) pairs of the set being indexed */
    size_t wtmp_cap;
} cm_chart;

/* ---- chart.c: storage ---- */

static inline uint64_t cm_item_key(uint32_t state, uint32_t origin) { return ((uint64_t)state << 32) | origin; }

static inline size_t cm_hslot(uint64_t key, size_t mask) {
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return (size_t)key & mask;
}

/* An empty chart with its first set begun (no byte made it). */
int cm_chart_open(cm_chart *c, bool upward);
void cm_chart_free(cm_chart *c);
int cm_chart_copy(cm_chart *dst, const cm_chart *src);
/* Room for need sets (the per-set arrays). */
int cm_chart_grow_sets(cm_chart *c, size_t need);
/* The dedup table, doubled, holding the items from `start` on. */
int cm_chart_rehash(cm_chart *c, size_t start);
/* The dedup table's stamps cleared (its generation counter wrapped). */
void cm_chart_clear_stamps(cm_chart *c);
/* Reopen the last (closed) set for more items: index its items for dedup. */
int cm_chart_reopen_last(cm_chart *c);

/* Start a new set at the end of the chart (once a byte: inline). */
static inline int cm_chart_begin_set(cm_chart *c) {
    if (c->n_sets + 2 > c->cap_sets) {
        int rc = cm_chart_grow_sets(c, c->n_sets + 2);
        if (rc) return rc;
    }
    c->set_start[c->n_sets] = (uint32_t)c->n_items;
    if (++c->gen == 0) cm_chart_clear_stamps(c);
    return CM_OK;
}

static inline void cm_chart_end_set(cm_chart *c) {
    c->version[c->n_sets] = ++c->clock;
    c->n_sets++;
    c->set_start[c->n_sets] = (uint32_t)c->n_items;
}

static inline void cm_chart_truncate(cm_chart *c, size_t n_sets) {
    c->n_sets = n_sets;
    c->n_items = c->set_start[n_sets];
}

/* ---- waiters.c: the waiter index ---- */

/* The items of closed set `origin` that call `rule`, for a completion into it:
 * 1 with *items / *n set when the set is indexed (n may be 0: nobody waits),
 * 0 when it is not (scan the set), < 0 on error. */
int cm_waiters(cm_chart *c, const cm_grammar *g, uint32_t origin, uint32_t rule, const uint32_t **items,
               uint32_t *n);

/* ---- earley.c: the Earley steps ---- */

int cm_chart_init(cm_chart *c, const cm_grammar *g);
int cm_chart_init_item(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin);
int cm_chart_init_item_k(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin, uint32_t k);
int cm_chart_init_returns(cm_chart *c, const cm_grammar *g, uint32_t rule);
int cm_chart_init_items(cm_chart *c, const cm_grammar *g, const uint32_t *states, size_t n);
int cm_chart_reset_items(cm_chart *c, const cm_grammar *g, const uint32_t *states, size_t n);
int cm_chart_load(cm_chart *c, const cm_grammar *g, const uint32_t *sig);
int cm_chart_repeats(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin);
int cm_chart_push_completion(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin);
/* Append a set made by `byte` (256: by none): the closure of the given items, each with its
 * origin (an earlier set or CM_OUTER).  Left as it was on error. */
int cm_chart_push_items(cm_chart *c, const cm_grammar *g, const cm_item *items, size_t n, uint16_t byte);
/* Append an empty set made by `byte` (no item may name it as origin). */
static inline int cm_chart_push_empty(cm_chart *c, uint16_t byte) {
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    c->set_byte[c->n_sets] = byte;
    cm_chart_end_set(c);
    return CM_OK;
}
int cm_chart_scan(cm_chart *c, const cm_grammar *g, uint8_t byte);
bool cm_chart_viable(const cm_chart *c, const cm_grammar *g, uint8_t byte);
bool cm_chart_accepting(const cm_chart *c, const cm_grammar *g);
int cm_chart_token_scan(cm_chart *c, const cm_grammar *g, uint32_t token, size_t from, bool merge);
/* How many closures of segment grammars' sets came from the closure memo (tests). */
size_t cm_chart_seg_memo_hits(void);
/* How many scans' kernels went past the small-kernel comparison into the dedup table (tests). */
size_t cm_chart_scans_hashed(void);
/* The closure memo of big kernels (on by default) in the charts that ask for it (memo_big: the
 * upward filter's chart, walk.c), whose sets of hundreds of items recur at other positions and
 * after other bytes of its rests.  Off: kernels up to CM_MEMO_KERNEL items only (the tests'
 * reference).  Process-wide; cm_chart_memo_big_hits: the closures of big kernels so taken from
 * the memo in this process (for the tests). */
void cm_chart_memo_big_enable(int on);
size_t cm_chart_memo_big_hits(void);
/* A closure memoized by the sets it read (earley.c, the default); off: by its kernel's newest
 * origin (the tests' reference).  Process-wide; cm_chart_memo_reads_hits: the closures taken from
 * the memo that the old rule missed, in this process. */
void cm_chart_memo_reads_enable(int on);
size_t cm_chart_memo_reads_hits(void);
/* The scans of big sets kept in memo_big charts (cm_scan_slot), the default; off: every scan
 * reads its set (the tests' reference).  Process-wide; cm_chart_scan_memo_hits: the scans so
 * answered, in this process. */
void cm_chart_scan_memo_enable(int on);
int cm_chart_scan_kept(cm_chart *c, const cm_grammar *g, uint8_t byte);
/* walk.c's upward chart: a set of CM_SCAN_MIN items or more scanned through cm_chart_scan_kept. */
static inline int cm_chart_scan_up(cm_chart *c, const cm_grammar *g, uint8_t byte) {
    size_t last = c->n_sets - 1;
    return c->set_start[last + 1] - c->set_start[last] >= CM_SCAN_MIN ? cm_chart_scan_kept(c, g, byte)
                                                                       : cm_chart_scan(c, g, byte);
}
size_t cm_chart_scan_memo_hits(void);

#endif
