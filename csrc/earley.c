/* The Earley steps over a chart (chart.h).  Rules are byte automata whose
 * states may also call other rules ("ref edges"); an item is (automaton state,
 * origin set).  Scanning a byte advances every item with a transition on it;
 * the new set is then closed under prediction (calls) and completion
 * (accepting states), with Aycock-Horspool's nullable shortcut so completions
 * of empty rules inside the same set are never missed. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"

#define CM_ALWAYS_INLINE inline __attribute__((always_inline))

/* A segment grammar's item (state, origin) met again while the open set is built: the design's
 * claim (docs/design.md §7, counters: k is a function of state, origin and set) says it has the
 * same count; another count is CM_ERR_STATE, always checked.  Outside segments every count is
 * CM_SEG_NONE.  A linear look for the item: segment grammars only (tests, step (b)(2)). */
static int same_count(const cm_chart *c, const cm_grammar *g, size_t start, uint32_t state, uint32_t origin,
                      uint32_t k) {
    if (g->state_seg[cm_st(state)] == CM_SEG_NONE) return CM_OK;
    ((cm_chart *)c)->seg_touched = true;
    for (size_t i = start; i < c->n_items; i++)
        if (c->items[i].state == state && c->items[i].origin == origin) return c->counts[i] == k ? CM_OK : CM_ERR_STATE;
    return CM_ERR_STATE; /* the dedup table holds only the open set's items */
}

/* Add an item to the set under construction unless it is there already; `counted` (a segment
 * grammar's chart) keeps its count k beside it. */
static CM_ALWAYS_INLINE int add_item_k(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin,
                                        bool counted, uint32_t k) {
    size_t start = c->set_start[c->n_sets];
    uint64_t key = cm_item_key(state, origin);
    size_t mask = c->hcap - 1, s = cm_hslot(key, mask);
    while (c->hgen[s] == c->gen) {
        if (c->hkeys[s] == key) return counted ? same_count(c, g, start, state, origin, k) : CM_OK;
        s = (s + 1) & mask;
    }
    size_t n_set = c->n_items - start + 1;
    if (n_set > g->lim.max_items_per_set) return CM_ERR_LIMIT_SET;
    if (c->n_items + 1 > g->lim.max_chart_items) return CM_ERR_LIMIT;
    int rc = cm_grow((void **)&c->items, &c->cap_items, c->n_items + 1, sizeof *c->items);
    if (rc) return rc;
    if (counted) {
        if ((rc = cm_grow((void **)&c->counts, &c->cap_counts, c->n_items + 1, sizeof *c->counts))) return rc;
        c->counts[c->n_items] = k;
    }
    c->items[c->n_items++] = (cm_item){state, origin};
    if (n_set * 2 > c->hcap) return cm_chart_rehash(c, start);
    c->hgen[s] = c->gen;
    c->hkeys[s] = key;
    return CM_OK;
}

/* add_item_k's two specialisations, each one function: a plain grammar's add is main's add_item
 * exactly (no count, no flag test; the callers with a constant flag pick one at compile time). */
static int add_plain(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin) {
    return add_item_k(c, g, state, origin, false, 0);
}

static int add_counted(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin, uint32_t k) {
    return add_item_k(c, g, state, origin, true, k);
}

/* An item arriving from outside any segment's unit (every add but a scan's): on a segment
 * grammar its count is cm_seg_enter's. */
static CM_ALWAYS_INLINE int add_entered(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin,
                                        bool counted) {
    return counted ? add_counted(c, g, state, origin, cm_seg_enter(g, cm_st(state)))
                   : add_item_k(c, g, state, origin, false, 0);
}

/* add_entered, the grammar deciding (the entry points: a test per item they add). */
static int add_item(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin) {
    return g->has_segments ? add_entered(c, g, state, origin, true) : add_plain(c, g, state, origin);
}

/* Advance waiter `it` over its calls of `rule`, which completed in set `cur`
 * owing debt `la` after starting in set `origin`.  A waiter that owes a debt
 * itself let the callee start only with bytes that pay it: the callee's span
 * is read until the debt is paid or found forbidden; a callee that matched
 * nothing passes the waiter's debt on to what follows. */
static int advance_waiter(cm_chart *c, const cm_grammar *g, cm_item it, uint32_t rule, uint32_t la,
                          uint32_t origin, uint32_t cur, bool counted) {
    const cm_tables *t = &g->t;
    uint32_t st = cm_st(it.state), owed = cm_la(it.state);
    for (uint32_t j = origin + 1; owed && j <= cur; j++) {
        if (j > c->read_hi) c->read_hi = j;  /* what the closure depends on (close_memoized) */
        if (c->set_byte[j] > 255) {  /* a set a whole token made: no bytes to check */
            owed = 0;
            break;
        }
        owed = cm_la_next(g, owed, c->set_byte[j]);
        if (owed == CM_LA_DEAD) return CM_OK;
    }
    if (owed) la = cm_la_union(g, la, owed);
    for (uint32_t e = t->ref_off[st]; e < t->ref_off[st + 1]; e++) {
        if (t->ref_rule[e] != rule) continue;
        int rc = add_entered(c, g, cm_pack(t->ref_target[e], la), it.origin, counted);
        if (rc) return rc;
    }
    return CM_OK;
}

/* Rule `rule` completed in the open set `cur`, owing class `la`, for an item that
 * started at `origin`: advance every item of set `origin` waiting on it. */
static int complete_k(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin, uint32_t cur,
                      uint32_t la, bool counted) {
    if (origin != cur && c->set_start[origin + 1] - c->set_start[origin] >= g->lim.index_min_items) {
        const uint32_t *waiting = NULL;
        uint32_t n = 0;
        int indexed = cm_waiters(c, g, origin, rule, &waiting, &n);
        if (indexed < 0) return indexed;
        for (uint32_t k = 0; indexed && k < n; k++) {
            int rc = advance_waiter(c, g, c->items[waiting[k]], rule, la, origin, cur, counted);
            if (rc) return rc;
        }
        if (indexed) return CM_OK;
    }
    uint64_t bit = 1ull << (rule & 63);
    const uint64_t *calls = g->calls;
    if (origin != cur) {  /* a closed set: its bounds stay, the item array may move as items are added */
        const cm_item *items = c->items;
        for (size_t i = c->set_start[origin], end = c->set_start[origin + 1]; i < end; i++) {
            if (!(calls[cm_st(items[i].state)] & bit)) continue;
            int rc = advance_waiter(c, g, items[i], rule, la, origin, cur, counted);
            if (rc) return rc;
            items = c->items;
        }
        return CM_OK;
    }
    for (size_t i = c->set_start[origin]; i < c->n_items; i++) {
        cm_item it = c->items[i];
        if (!(calls[cm_st(it.state)] & bit)) continue;
        int rc = advance_waiter(c, g, it, rule, la, origin, cur, counted);
        if (rc) return rc;
    }
    return CM_OK;
}

static int complete(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin, uint32_t cur, uint32_t la) {
    return g->has_segments ? complete_k(c, g, rule, origin, cur, la, true)
                           : complete_k(c, g, rule, origin, cur, la, false);
}

/* Close the open set under prediction and completion.  An item owing a
 * lookahead class passes it to the rules it predicts (their first byte is its
 * next byte) and, through a nullable callee, to its own next state; a marker
 * edge adds its class to the debt; a completion passes the completed item's
 * debt to its callers. */
static CM_ALWAYS_INLINE int close_set_k(cm_chart *c, const cm_grammar *g, bool counted) {
    const cm_tables *t = &g->t;
    uint32_t cur = (uint32_t)c->n_sets;
    for (size_t i = c->set_start[cur]; i < c->n_items; i++) {
        cm_item it = c->items[i];
        uint32_t st = cm_st(it.state), la = cm_la(it.state);
        int rc;
        if (counted ? cm_seg_accepts(g, st, c->counts[i]) : t->accepting[st]) {
            if (it.origin == CM_OUTER) {
                c->exited = true;
                if (c->upward) {
                    uint32_t r = t->state_rule[st];
                    for (uint32_t k = g->ret_off[r]; k < g->ret_off[r + 1]; k++)
                        if ((rc = add_entered(c, g, cm_pack(g->ret_state[k], la), CM_OUTER, counted))) return rc;
                }
            } else if ((rc = complete_k(c, g, t->state_rule[st], it.origin, cur, la, counted))) {
                return rc;
            }
        }
        for (uint32_t e = t->ref_off[st]; e < t->ref_off[st + 1]; e++) {
            uint32_t callee = t->ref_rule[e];
            if (t->rule_la[callee]) {
                rc = add_entered(c, g, cm_pack(t->ref_target[e], cm_la_union(g, la, t->rule_la[callee])), it.origin,
                                 counted);
            } else {
                rc = add_entered(c, g, cm_pack(t->rule_start[callee], la), cur, counted);
                if (!rc && t->rule_nullable[callee])
                    rc = add_entered(c, g, cm_pack(t->ref_target[e], la), it.origin, counted);
            }
            if (rc) return rc;
        }
    }
    return CM_OK;
}

/* One flag test a set: a segment grammar's closure keeps counts. */
static int close_set(cm_chart *c, const cm_grammar *g) {
    return g->has_segments ? close_set_k(c, g, true) : close_set_k(c, g, false);
}

static cm_memo **memo_slot(cm_chart *c, size_t k0, uint32_t n_kernel, uint32_t *max_origin) {
    uint64_t h = n_kernel;
    *max_origin = 0;
    for (uint32_t i = 0; i < n_kernel; i++) {
        cm_item it = c->items[k0 + i];
        h = (h ^ cm_item_key(it.state, it.origin)) * 0x9E3779B97F4A7C15ULL;
        if (it.origin != CM_OUTER && it.origin > *max_origin) *max_origin = it.origin;
    }
    return &c->memo[(h >> 40) % CM_MEMO_SLOTS];
}

/* A memo entry's version when its closure read no older set (close_memoized_k): it holds in any
 * chart state (no set's version is 0: the clock starts at 1, flat.c's have the top bit). */
#define MEMO_NO_SET 0

/* The sets an entry's closure read are as they were (its kernel aside). */
static inline bool memo_sets_hold(const cm_chart *c, const cm_memo *mm, uint32_t cur) {
    return mm->vset < cur && (mm->version == c->version[mm->vset] || mm->version == MEMO_NO_SET);
}

static CM_ALWAYS_INLINE bool memo_hit(const cm_chart *c, const cm_memo *mm, size_t k0, uint32_t n_kernel,
                                       uint32_t cur, bool counted, uint32_t seg_bits, bool big) {
    if (mm->n_kernel != n_kernel || !memo_sets_hold(c, mm, cur) ||
        (mm->byte != CM_MEMO_ANY_BYTE && mm->byte != c->set_byte[cur]) || (counted && mm->seg_bits != seg_bits))
        return false;
    return memcmp(big ? mm->closure : mm->kernel, c->items + k0, n_kernel * sizeof(cm_item)) == 0;
}

/* Put the open set's items, which the dedup table does not hold (a kernel scan_kernel
 * added without it), in the table: what add_item would have made of them. */
static int index_open_set(cm_chart *c) {
    size_t start = c->set_start[c->n_sets];
    if ((c->n_items - start) * 2 > c->hcap) {
        while ((c->n_items - start) * 2 > c->hcap) {  /* cm_chart_rehash indexes them too */
            int rc = cm_chart_rehash(c, start);
            if (rc) return rc;
        }
        return CM_OK;
    }
    size_t mask = c->hcap - 1;
    for (size_t i = start; i < c->n_items; i++) {
        uint64_t key = cm_item_key(c->items[i].state, c->items[i].origin);
        size_t s = cm_hslot(key, mask);
        while (c->hgen[s] == c->gen) s = (s + 1) & mask;
        c->hgen[s] = c->gen;
        c->hkeys[s] = key;
    }
    return CM_OK;
}

/* close_set over a kernel the dedup table holds (indexed) or not yet. */
static int close_kernel(cm_chart *c, const cm_grammar *g, bool indexed, bool counted) {
    int rc = indexed ? CM_OK : index_open_set(c);
    return rc ? rc : counted ? close_set_k(c, g, true) : close_set_k(c, g, false);
}

static atomic_size_t g_seg_memo_hits;

size_t cm_chart_seg_memo_hits(void) { return atomic_load_explicit(&g_seg_memo_hits, memory_order_relaxed); }

/* A segment grammar's kernel (n <= CM_MEMO_KERNEL items from k0): bit i for item i in a segment
 * with k >= lo.  A closure reads no other count (only a head accepts, at k >= lo; prediction and
 * completion give every item they add cm_seg_enter's count), so a kernel and these bits decide
 * it, and the closure's items past the kernel get their counts back from their states. */
static uint32_t kernel_seg_bits(const cm_chart *c, const cm_grammar *g, size_t k0, uint32_t n) {
    uint32_t bits = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t sid = g->state_seg[cm_st(c->items[k0 + i].state)];
        if (sid != CM_SEG_NONE && c->counts[k0 + i] >= g->seg_lo[sid]) bits |= 1u << i;
    }
    return bits;
}

/* Closures of big kernels memoized where a chart asks for it (memo_big), the default; off:
 * kernels up to CM_MEMO_KERNEL items only (the tests' reference).  Process-wide. */
static atomic_int g_memo_big = 1;
static atomic_size_t g_memo_big_hits;

void cm_chart_memo_big_enable(int on) { atomic_store(&g_memo_big, on); }
size_t cm_chart_memo_big_hits(void) { return atomic_load_explicit(&g_memo_big_hits, memory_order_relaxed); }

static int close_memo_big(cm_chart *c, const cm_grammar *g, bool indexed);

/* A closure memoized by the sets it read (the default): a closure reads an older set only where
 * one of its items completes there (complete_k), or a lookahead debt reads a set's byte (read_hi),
 * so it holds while the newest set so read is unchanged, though a newer set its items name (the
 * kernel's newest origin) was rebuilt since: the kernel's items, compared whole, name the same
 * sets, and no item reads them.  Off: it holds while the kernel's newest origin is unchanged (the
 * tests' reference).  A trie walk rebuilds the set a terminal's item began in for every token
 * that reaches it, and most closures of the items inside the terminal complete nothing there.
 * Process-wide; cm_chart_memo_reads_hits: the closures so taken that the old rule missed. */
static atomic_int g_memo_reads = 1;
static atomic_size_t g_memo_reads_hits;

void cm_chart_memo_reads_enable(int on) { atomic_store(&g_memo_reads, on); }
size_t cm_chart_memo_reads_hits(void) { return atomic_load_explicit(&g_memo_reads_hits, memory_order_relaxed); }

/* The newest older set the open set's closure (of `n` items from k0) read: the newest origin
 * (below cur) of an accepting item, which complete_k read, or what a debt read (read_hi);
 * UINT32_MAX if none. */
static uint32_t closure_read_set(const cm_chart *c, const cm_grammar *g, size_t k0, uint32_t n, uint32_t cur) {
    uint32_t r = c->read_hi ? (c->read_hi < cur ? c->read_hi : cur - 1) : UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        cm_item it = c->items[k0 + i];
        if (it.origin != CM_OUTER && it.origin < cur && (r == UINT32_MAX || it.origin > r) &&
            g->t.accepting[cm_st(it.state)])
            r = it.origin;
    }
    return r;
}

/* An entry kept by the sets it read (mm->vset below its kernel's newest origin) keeps that
 * origin's version too, for the chart's user: flat.c's note on an entry (the configuration the
 * closure makes, which names the kernel's origins' sets) holds only while it is unchanged.  The
 * version goes in the kernel's last slot, free (close_memoized_k takes such an entry only from a
 * kernel of fewer than CM_MEMO_KERNEL items, or a big one, which keeps its kernel in the
 * closure). */
static inline void put_origin_version(cm_memo *mm, uint64_t v) {
    mm->kernel[CM_MEMO_KERNEL - 1] = (cm_item){(uint32_t)v, (uint32_t)(v >> 32)};
}

static inline bool loose_entry(const cm_memo *mm) { return mm->vset < mm->max_origin || mm->version == MEMO_NO_SET; }

static inline bool origin_unchanged(const cm_chart *c, const cm_memo *mm) {
    if (!loose_entry(mm)) return true;
    cm_item v = mm->kernel[CM_MEMO_KERNEL - 1];
    return ((uint64_t)v.origin << 32 | v.state) == c->version[mm->max_origin];
}

/* close_set, reusing the closure of an identical kernel over an unchanged chart;
 * `indexed`: the kernel is in the dedup table (a hit never needs it).  `big`: the kernel has
 * more than CM_MEMO_KERNEL items (close_memo_big), so it is compared with the closure's head. */
static CM_ALWAYS_INLINE int close_memoized_k(cm_chart *c, const cm_grammar *g, bool indexed, bool counted, bool big) {
    uint32_t cur = (uint32_t)c->n_sets;
    size_t k0 = c->set_start[cur];
    uint32_t n_kernel = (uint32_t)(c->n_items - k0), max_origin;
    if (!big && n_kernel > CM_MEMO_KERNEL)
        return !counted && c->memo_big && atomic_load_explicit(&g_memo_big, memory_order_relaxed)
                   ? close_memo_big(c, g, indexed)
                   : close_kernel(c, g, indexed, counted);
    if (!c->memo && !(c->memo = calloc(CM_MEMO_SLOTS, sizeof *c->memo))) return close_kernel(c, g, indexed, counted);
    cm_memo **slot = memo_slot(c, k0, n_kernel, &max_origin), *mm = *slot;
    if (max_origin >= cur) return close_kernel(c, g, indexed, counted);
    uint32_t seg_bits = counted ? kernel_seg_bits(c, g, k0, n_kernel) : 0;
    if (mm && memo_hit(c, mm, k0, n_kernel, cur, counted, seg_bits, big)) {
        c->memo_used = mm;
        if (!counted && !origin_unchanged(c, mm)) {
            atomic_fetch_add_explicit(&g_memo_reads_hits, 1, memory_order_relaxed);
            if (!c->memo_big) c->memo_used = NULL; /* its note, if any, is of another configuration */
        }
        if (mm->n_closure > g->lim.max_items_per_set) return CM_ERR_LIMIT_SET;
        if (k0 + mm->n_closure > g->lim.max_chart_items) return CM_ERR_LIMIT;
        int rc = cm_grow((void **)&c->items, &c->cap_items, k0 + mm->n_closure, sizeof *c->items);
        if (rc) return rc;
        for (uint32_t i = n_kernel; i < mm->n_closure; i++) {
            cm_item it = mm->closure[i];
            c->items[k0 + i] = (cm_item){it.state, it.origin == CM_MEMO_HERE ? cur : it.origin};
        }
        if (counted) {
            if ((rc = cm_grow((void **)&c->counts, &c->cap_counts, k0 + mm->n_closure, sizeof *c->counts)))
                return rc;
            for (uint32_t i = n_kernel; i < mm->n_closure; i++)
                c->counts[k0 + i] = cm_seg_enter(g, cm_st(mm->closure[i].state));
            atomic_fetch_add_explicit(&g_seg_memo_hits, 1, memory_order_relaxed);
        }
        c->n_items = k0 + mm->n_closure;
        c->exited = mm->exited;
        if (big) atomic_fetch_add_explicit(&g_memo_big_hits, 1, memory_order_relaxed);
        return CM_OK;
    }
    c->read_hi = 0;
    if (counted) c->seg_touched = false;
    int rc = close_kernel(c, g, indexed, counted);
    if (rc) return rc;
    if (counted && c->seg_touched) return CM_OK; /* its count check must run again: not memoized */
    /* The closure depends on the sets up to max_origin, and, where a waiter's lookahead
     * debt read the first bytes of a completed span (advance_waiter), on the sets those
     * bytes made, this one's included. */
    uint32_t vset = c->read_hi > max_origin ? (c->read_hi < cur ? c->read_hi : cur - 1) : max_origin;
    uint16_t byte = c->read_hi >= cur ? c->set_byte[cur] : CM_MEMO_ANY_BYTE;
    uint32_t n = (uint32_t)(c->n_items - k0);
    /* (below max_origin only where no debt read past it: then vset is max_origin) */
    bool none_read = false;
    if (!counted && (big || n_kernel < CM_MEMO_KERNEL) && atomic_load_explicit(&g_memo_reads, memory_order_relaxed)) {
        uint32_t r = closure_read_set(c, g, k0, n, cur);
        none_read = r == UINT32_MAX;
        vset = none_read ? 0 : r;
    }
    if (!mm && !(mm = *slot = calloc(1, sizeof *mm))) return CM_OK;  /* memo is an optimisation only */
    if (n > mm->cap_closure) {
        cm_item *p = realloc(mm->closure, n * sizeof *p);
        if (!p) return CM_OK;  /* memo is an optimisation only */
        mm->closure = p;
        mm->cap_closure = n;
    }
    for (uint32_t i = 0; i < n; i++) {
        cm_item it = c->items[k0 + i];
        mm->closure[i] = (cm_item){it.state, it.origin == cur ? CM_MEMO_HERE : it.origin};
    }
    if (!big) memcpy(mm->kernel, c->items + k0, n_kernel * sizeof(cm_item));
    mm->n_kernel = n_kernel;
    mm->n_closure = n;
    mm->max_origin = max_origin;
    mm->vset = vset;
    mm->byte = byte;
    mm->version = none_read ? MEMO_NO_SET : c->version[vset];
    mm->exited = c->exited;
    mm->note = 0;
    mm->seg_bits = seg_bits;
    if (loose_entry(mm)) put_origin_version(mm, c->version[max_origin]);
    mm->stamp = c->clock; /* the set this closure makes ends next: one store a clock tick */
    c->memo_used = mm;
    return CM_OK;
}

static CM_ALWAYS_INLINE int close_memoized(cm_chart *c, const cm_grammar *g, bool indexed, bool counted) {
    return close_memoized_k(c, g, indexed, counted, false);
}

/* A big kernel's closure through the memo (a chart with memo_big, no counts): out of line, so
 * that the scans of every other chart run the code they ran before. */
static __attribute__((noinline)) int close_memo_big(cm_chart *c, const cm_grammar *g, bool indexed) {
    return close_memoized_k(c, g, indexed, false, true);
}

int cm_chart_init_item(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin) {
    int rc = cm_chart_open(c, false);
    if (!rc) rc = add_item(c, g, state, origin);
    if (!rc) rc = close_set(c, g);
    if (!rc) cm_chart_end_set(c);
    return rc;
}

/* cm_chart_init_item for a segment grammar's item in a segment state at count k (an entry
 * keyed by its clipped pair is built from it: mask.c, cache.c). */
int cm_chart_init_item_k(cm_chart *c, const cm_grammar *g, uint32_t state, uint32_t origin, uint32_t k) {
    if (!g->has_segments) return CM_ERR_ARG;
    int rc = cm_chart_open(c, false);
    if (!rc) rc = add_item_k(c, g, state, origin, true, k);
    if (!rc) rc = close_set(c, g);
    if (!rc) cm_chart_end_set(c);
    return rc;
}

/* Would `rule`, begun at set `origin`, be followed by itself if it completed
 * after the last set?  Completes it in a scratch set and looks for its start
 * state predicted there; the chart is left as it was.  1 yes, 0 no, < 0 error. */
int cm_chart_repeats(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin) {
    size_t n_items = c->n_items;
    bool exited = c->exited;
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    uint32_t cur = (uint32_t)c->n_sets, start = g->t.rule_start[rule];
    c->set_byte[cur] = 256;
    rc = complete(c, g, rule, origin, cur, 0);
    if (!rc) rc = close_set(c, g);
    int found = 0;
    for (size_t i = c->set_start[cur]; !rc && i < c->n_items; i++)
        if (c->items[i].origin == cur && c->items[i].state == start) found = 1;
    c->n_items = n_items;
    c->exited = exited;
    return rc ? rc : found;
}

/* The end of a pushed set: closed and ended, or (rc, or the closure failing) the chart's
 * items cut back to `n_items` and the set left open, as it was before the push. */
static int close_pushed_set(cm_chart *c, const cm_grammar *g, int rc, size_t n_items) {
    if (!rc) rc = close_set(c, g);
    if (rc) {
        c->n_items = n_items;
        return rc;
    }
    cm_chart_end_set(c);
    return CM_OK;
}

/* Append a set: the closure of `rule` completing, owing nothing, for an item begun
 * at set `origin` (what the callers do next, as cm_chart_repeats sees it).  Left
 * as it was on error. */
int cm_chart_push_completion(cm_chart *c, const cm_grammar *g, uint32_t rule, uint32_t origin) {
    size_t n_items = c->n_items;
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    c->set_byte[c->n_sets] = 256;
    rc = complete(c, g, rule, origin, (uint32_t)c->n_sets, 0);
    return close_pushed_set(c, g, rc, n_items);
}

/* Append a set made by `byte` (256: by none): the closure of the given items (packed
 * states and origins, each an earlier set or CM_OUTER).  Left as it was on error. */
int cm_chart_push_items(cm_chart *c, const cm_grammar *g, const cm_item *items, size_t n, uint16_t byte) {
    size_t n_items = c->n_items;
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    c->set_byte[c->n_sets] = byte;
    c->exited = false;
    c->memo_used = NULL;
    for (size_t i = 0; !rc && i < n; i++) rc = add_item(c, g, items[i].state, items[i].origin);
    return close_pushed_set(c, g, rc, n_items);
}

/* A chart whose first set is the closure of the given items (packed states),
 * each with origin CM_OUTER. */
int cm_chart_init_items(cm_chart *c, const cm_grammar *g, const uint32_t *states, size_t n) {
    int rc = cm_chart_open(c, false);
    for (size_t i = 0; !rc && i < n; i++) rc = add_item(c, g, states[i], CM_OUTER);
    if (!rc) rc = close_set(c, g);
    if (!rc) cm_chart_end_set(c);
    return rc;
}

/* Make c (initialized) a chart of one set again: the closure of the given items,
 * each with origin CM_OUTER.  Its buffers are reused. */
int cm_chart_reset_items(cm_chart *c, const cm_grammar *g, const uint32_t *states, size_t n) {
    cm_chart_truncate(c, 0);
    c->exited = false;
    int rc = cm_chart_begin_set(c);
    if (!rc) c->set_byte[0] = 256;
    for (size_t i = 0; !rc && i < n; i++) rc = add_item(c, g, states[i], CM_OUTER);
    if (!rc) rc = close_set(c, g);
    if (rc) {
        cm_chart_truncate(c, 0);
        return rc;
    }
    cm_chart_end_set(c);
    return CM_OK;
}

/* Make c (initialized) hold the sets of a chart suffix as they are, with no
 * closure (they were closed when they were made): sig = [n_sets, then for each
 * set, oldest first, its item count and its items as (packed state, origin)
 * pairs], an origin being CM_OUTER or the position of a set in sig.  No set
 * records a byte (256), so no lookahead debt may read one. */
int cm_chart_load(cm_chart *c, const cm_grammar *g, const uint32_t *sig) {
    if (g->has_segments) return CM_ERR_ARG; /* signatures carry no counts yet (step (c)) */
    uint32_t n_sets = *sig++;
    int rc = CM_OK;
    cm_chart_truncate(c, 0);
    /* A set's items are distinct (they were one chart set's), so they are
     * copied without the dedup table, whose stamps the next set's begin_set
     * makes stale; the limits trip where add_item's would. */
    for (uint32_t j = 0; j < n_sets && !rc; j++) {
        uint32_t n = *sig++;
        rc = cm_chart_begin_set(c);
        if (rc) break;
        c->set_byte[j] = 256;
        size_t room = g->lim.max_chart_items > c->n_items ? g->lim.max_chart_items - c->n_items : 0;
        if (n > g->lim.max_items_per_set && g->lim.max_items_per_set <= room) rc = CM_ERR_LIMIT_SET;
        else if (n > room) rc = CM_ERR_LIMIT;
        else rc = cm_grow((void **)&c->items, &c->cap_items, c->n_items + n, sizeof *c->items);
        if (rc) break;
        for (uint32_t i = 0; i < n; i++, sig += 2) c->items[c->n_items + i] = (cm_item){sig[0], sig[1]};
        c->n_items += n;
        cm_chart_end_set(c);
    }
    if (rc) cm_chart_truncate(c, 0);
    c->exited = false;
    return rc;
}

/* A chart for what may follow a completed `rule` in any context: its first set
 * holds every return state of the rule (an over-approximation of the real
 * continuation, whatever the stack), and the chart is upward: completing one of
 * those items returns to every caller of its rule in turn.  If this chart dies
 * on some bytes, no real chart can read them right after `rule` completes. */
int cm_chart_init_returns(cm_chart *c, const cm_grammar *g, uint32_t rule) {
    int rc = cm_chart_open(c, true);
    for (uint32_t k = g->ret_off[rule]; !rc && k < g->ret_off[rule + 1]; k++)
        rc = add_item(c, g, g->ret_state[k], CM_OUTER);
    if (!rc) rc = close_set(c, g);
    if (!rc) cm_chart_end_set(c);
    return rc;
}

int cm_chart_init(cm_chart *c, const cm_grammar *g) {
    return cm_chart_init_item(c, g, g->t.rule_start[g->t.start_rule], 0);
}

/* Inside a character that might still spell a forbidden one (debt `la` left
 * after its first bytes): can the automaton go on from `s` with bytes that pay
 * it?  An item that cannot is a dead end, and is dropped.  A state that
 * completes or calls is between characters (markers follow whole characters),
 * where the debt passes on; taken as payable. */
static bool debt_payable(const cm_grammar *g, uint32_t s, uint32_t la, int depth) {
    const cm_tables *t = &g->t;
    if (t->accepting[s] || t->ref_off[s] < t->ref_off[s + 1] || g->has_tokens[s] || depth > 4) return true;
    if (!g->has_bytes[s]) return false;
    const uint32_t *reads = g->next_bytes + (size_t)s * 8;  /* only the bytes s has a transition on */
    for (unsigned w = 0; w < 8; w++) {
        for (uint32_t m = reads[w]; m; m &= m - 1) {
            unsigned b = w * 32 + (unsigned)__builtin_ctz(m);
            uint32_t d = cm_la_next(g, la, b);
            if (d == CM_LA_DEAD) continue;
            int32_t n = t->trans[(size_t)s * t->n_classes + t->byte_class[b]];
            if (n >= 0 && (!d || debt_payable(g, (uint32_t)n, d, depth + 1))) return true;
        }
    }
    return false;
}

/* A kernel up to this many items is kept distinct by comparing with the items
 * added so far; a larger one by the dedup table. */
#define SCAN_LINEAR 8

/* How many scans' kernels grew past SCAN_LINEAR items and went on in the dedup table, in
 * this process: for the tests. */
static atomic_size_t g_scan_hashed;

size_t cm_chart_scans_hashed(void) { return atomic_load_explicit(&g_scan_hashed, memory_order_relaxed); }

/* The kernel of a scan of `byte` (class cls) from items [lo, hi) of the last set,
 * appended to the open set as add_item appends them (the same items in the same
 * order), with room for hi - lo items made and no limit reachable.  A small kernel
 * is kept distinct without the dedup table (*indexed false: close_memoized puts it
 * there when a closure is computed; a memo hit never needs it). */
static CM_ALWAYS_INLINE int scan_kernel(cm_chart *c, const cm_grammar *g, uint32_t cls, uint8_t byte, size_t lo, size_t hi,
                       bool *indexed) {
    const cm_tables *t = &g->t;
    const int32_t *trans = t->trans;
    const uint32_t nc = t->n_classes;
    cm_item *items = c->items;
    size_t k0 = c->n_items, n = k0;
    bool hashed = false;
    int rc = CM_OK;
    for (size_t i = lo; i < hi; i++) {
        cm_item it = items[i];
        uint32_t st = cm_st(it.state), la = cm_la(it.state);
        int32_t next = trans[(size_t)st * nc + cls];  /* -1 in every class of a state without bytes */
        if (next < 0) continue;
        if (la) {
            la = cm_la_next(g, la, byte);
            if (la == CM_LA_DEAD || (la && !debt_payable(g, (uint32_t)next, la, 0))) continue;
        }
        uint32_t packed = cm_pack((uint32_t)next, la);
        if (!hashed) {
            size_t j = k0;
            while (j < n && (items[j].state != packed || items[j].origin != it.origin)) j++;
            if (j < n) continue;
            if (n - k0 < SCAN_LINEAR) {
                items[n++] = (cm_item){packed, it.origin};
                continue;
            }
            c->n_items = n;
            if ((rc = index_open_set(c))) return rc;
            hashed = true;
            atomic_fetch_add_explicit(&g_scan_hashed, 1, memory_order_relaxed);
        }
        uint64_t key = cm_item_key(packed, it.origin);
        size_t mask = c->hcap - 1, s = cm_hslot(key, mask);
        while (c->hgen[s] == c->gen && c->hkeys[s] != key) s = (s + 1) & mask;
        if (c->hgen[s] == c->gen) continue;
        items[n++] = (cm_item){packed, it.origin};
        if ((n - k0) * 2 > c->hcap) {
            c->n_items = n;
            if ((rc = cm_chart_rehash(c, k0))) return rc;
        } else {
            c->hgen[s] = c->gen;
            c->hkeys[s] = key;
        }
    }
    c->n_items = n;
    *indexed = hashed;
    return CM_OK;
}

/* The guards of a segment grammar's scan: item i of the chart reading the edge at `cell` from
 * state st.  INTO needs k < hi, EXIT k >= lo; BACK gives k + 1 (k < hi: validated tables reach
 * BACK only through an INTO), any other edge inside the segment keeps k, an EXIT or an edge from
 * outside enters its target afresh.  false: the guard refuses. */
static inline bool seg_step(const cm_grammar *g, uint32_t st, size_t cell, uint32_t k, uint32_t next, uint32_t *nk) {
    uint32_t sid = g->state_seg[st];
    uint8_t f = g->edge_flags[cell];
    if (sid != CM_SEG_NONE) {
        if ((f & CM_SEG_INTO) && k >= g->seg_hi[sid]) return false;
        if ((f & CM_SEG_EXIT) && k < g->seg_lo[sid]) return false;
    }
    if (f & CM_SEG_BACK) *nk = k + 1;
    else if (sid != CM_SEG_NONE && !(f & CM_SEG_EXIT)) *nk = k;
    else *nk = cm_seg_enter(g, next);
    return true;
}

/* cm_chart_scan on a segment grammar: every item through add_item_k with its count (no
 * single-item shortcut, no small-kernel path); the closure memoized by kernel and the kernel's
 * acceptance bits (kernel_seg_bits), except where the closure met a segment item again. */
static int scan_counted(cm_chart *c, const cm_grammar *g, uint8_t byte) {
    const cm_tables *t = &g->t;
    uint32_t cls = t->byte_class[byte], prev = (uint32_t)c->n_sets - 1;
    c->exited = false;
    c->memo_used = NULL;
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    c->set_byte[c->n_sets] = byte;
    size_t lo = c->set_start[prev], hi = c->set_start[prev + 1], guarded = 0;
    for (size_t i = lo; i < hi; i++) {
        cm_item it = c->items[i];
        uint32_t st = cm_st(it.state), la = cm_la_next(g, cm_la(it.state), byte), nk;
        if (!g->has_bytes[st] || la == CM_LA_DEAD) continue;
        size_t cell = (size_t)st * t->n_classes + cls;
        int32_t next = t->trans[cell];
        if (next < 0 || (la && !debt_payable(g, (uint32_t)next, la, 0))) continue;
        guarded += g->state_seg[st] != CM_SEG_NONE;
        if (!seg_step(g, st, cell, c->counts[i], (uint32_t)next, &nk)) continue;
        if ((rc = add_counted(c, g, cm_pack((uint32_t)next, la), it.origin, nk))) goto fail;
    }
    if (guarded) cm_counted_scans_add(guarded);
    if (c->n_items == c->set_start[c->n_sets]) return 0;
    if ((rc = close_memoized(c, g, true, true))) goto fail;
    cm_chart_end_set(c);
    return 1;
fail:
    c->n_items = c->set_start[c->n_sets];
    return rc;
}

static atomic_int g_scan_memo = 1;
static atomic_size_t g_scan_memo_hits;

void cm_chart_scan_memo_enable(int on) { atomic_store(&g_scan_memo, on); }
size_t cm_chart_scan_memo_hits(void) { return atomic_load_explicit(&g_scan_memo_hits, memory_order_relaxed); }

/* The slot of a scan of set `prev` by class `cls` (made on first use; NULL when memory is
 * short).  A set's version names its items and every earlier set's (a set is only ever rebuilt
 * after the chart is cut back to or before it, and each build takes a new version from the
 * chart's clock), and without lookahead debts a scan reads a byte only through its class: the
 * kernel, and so its closure, is the same while the version is. */
static cm_scan_slot *scan_slot(cm_chart *c, uint32_t prev, uint32_t cls) {
    if (!c->scans && !(c->scans = calloc(CM_SCAN_SLOTS, sizeof *c->scans))) return NULL;
    uint64_t h = (c->version[prev] * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)cls * 0xbf58476d1ce4e5b9ULL);
    return &c->scans[(h >> 40) % CM_SCAN_SLOTS];
}

/* A kept scan's answer: 0 it died, 1 its closure appended as the memo entry holds it, -1 not
 * kept (scan it).  The closure memo's own checks are made again (they hold while the version
 * does); a closure past the limits is left to the scan, which fails as before. */
static int scan_kept(cm_chart *c, const cm_grammar *g, const cm_scan_slot *ss, uint32_t prev, uint32_t cls,
                     uint8_t byte) {
    if (ss->version != c->version[prev] || ss->set != prev || ss->cls != cls) return -1;
    const cm_memo *mm = ss->mm;
    uint32_t cur = prev + 1;
    if (!mm) return 0;
    if (mm->stamp != ss->stamp || !memo_sets_hold(c, mm, cur) ||
        (mm->byte != CM_MEMO_ANY_BYTE && mm->byte != byte) || mm->n_closure > g->lim.max_items_per_set ||
        c->n_items + mm->n_closure > g->lim.max_chart_items)
        return -1;
    if (cm_chart_begin_set(c) ||
        cm_grow((void **)&c->items, &c->cap_items, c->n_items + mm->n_closure, sizeof *c->items))
        return -1;
    c->set_byte[c->n_sets] = byte;
    cm_item *out = c->items + c->n_items;
    for (uint32_t i = 0; i < mm->n_closure; i++) {
        cm_item it = mm->closure[i];
        out[i] = (cm_item){it.state, it.origin == CM_MEMO_HERE ? cur : it.origin};
    }
    c->n_items += mm->n_closure;
    c->exited = mm->exited;
    c->memo_used = (cm_memo *)mm;
    cm_chart_end_set(c);
    return 1;
}

/* cm_chart_scan's scan of a set of many items, in a memo_big chart of a grammar without
 * lookahead debts (cm_chart_scan_kept): a kept scan is looked for first, and this one kept.  Out
 * of line, so that every other chart's scans run the code they ran before. */
static __attribute__((noinline)) int scan_set_kept(cm_chart *c, const cm_grammar *g, uint8_t byte) {
    const cm_tables *t = &g->t;
    uint32_t cls = t->byte_class[byte], prev = (uint32_t)c->n_sets - 1;
    cm_scan_slot *ss = NULL;
    if ((ss = scan_slot(c, prev, cls))) {
        int kept = scan_kept(c, g, ss, prev, cls, byte);
        if (kept >= 0) {
            atomic_fetch_add_explicit(&g_scan_memo_hits, 1, memory_order_relaxed);
            return kept;
        }
    }
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    c->set_byte[c->n_sets] = byte;
    size_t lo = c->set_start[prev], hi = c->set_start[prev + 1];
    bool indexed = true;
    if (hi - lo <= g->lim.max_items_per_set && c->n_items + (hi - lo) <= g->lim.max_chart_items) {
        /* no add can trip a limit: the kernel is added without add_item's checks */
        if ((rc = cm_grow((void **)&c->items, &c->cap_items, c->n_items + (hi - lo), sizeof *c->items)))
            goto fail;
        if ((rc = scan_kernel(c, g, cls, byte, lo, hi, &indexed))) goto fail;
    } else {
        for (size_t i = lo; i < hi; i++) {
            cm_item it = c->items[i];
            uint32_t st = cm_st(it.state), la = cm_la_next(g, cm_la(it.state), byte);
            if (!g->has_bytes[st] || la == CM_LA_DEAD) continue;
            int32_t next = t->trans[(size_t)st * t->n_classes + cls];
            if (next < 0 || (la && !debt_payable(g, (uint32_t)next, la, 0))) continue;
            if ((rc = add_item(c, g, cm_pack((uint32_t)next, la), it.origin))) goto fail;
        }
    }
    if (c->n_items == c->set_start[c->n_sets]) {
        if (ss) *ss = (cm_scan_slot){c->version[prev], NULL, 0, prev, cls};
        return 0;
    }
    if ((rc = close_memoized(c, g, indexed, false))) goto fail;
    if (ss && c->memo_used) *ss = (cm_scan_slot){c->version[prev], c->memo_used, c->memo_used->stamp, prev, cls};
    cm_chart_end_set(c);
    return 1;
fail:
    c->n_items = c->set_start[c->n_sets];
    return rc;
}

/* Scan one byte from the last set: 1 = a non-empty set was appended,
 * 0 = the byte is not viable here (chart unchanged), < 0 = error. */
int cm_chart_scan(cm_chart *c, const cm_grammar *g, uint8_t byte) {
    const cm_tables *t = &g->t;
    if (g->has_segments) return scan_counted(c, g, byte);
    uint32_t cls = t->byte_class[byte], prev = (uint32_t)c->n_sets - 1;
    c->exited = false;
    c->memo_used = NULL;
    if (c->set_start[prev + 1] - c->set_start[prev] == 1) {
        /* one item, and its successor neither calls nor completes: the whole
         * closure is that single item (the common case inside a terminal) */
        cm_item it = c->items[c->set_start[prev]];
        uint32_t st = cm_st(it.state), la = cm_la_next(g, cm_la(it.state), byte);
        int32_t next = g->has_bytes[st] && la != CM_LA_DEAD ? t->trans[(size_t)st * t->n_classes + cls] : -1;
        if (next < 0 || (la && !debt_payable(g, (uint32_t)next, la, 0))) return 0;
        if (g->simple[next]) {
            int rc = c->n_sets + 2 > c->cap_sets ? cm_chart_grow_sets(c, c->n_sets + 2) : CM_OK;
            if (!rc) rc = cm_grow((void **)&c->items, &c->cap_items, c->n_items + 1, sizeof *c->items);
            if (rc) return rc;
            if (c->n_items + 1 > g->lim.max_chart_items) return CM_ERR_LIMIT;
            c->items[c->n_items++] = (cm_item){cm_pack((uint32_t)next, la), it.origin};
            c->set_byte[c->n_sets] = byte;
            cm_chart_end_set(c);
            return 1;
        }
    }
    int rc = cm_chart_begin_set(c);
    if (rc) return rc;
    c->set_byte[c->n_sets] = byte;
    size_t lo = c->set_start[prev], hi = c->set_start[prev + 1];
    bool indexed = true;
    if (hi - lo <= g->lim.max_items_per_set && c->n_items + (hi - lo) <= g->lim.max_chart_items) {
        /* no add can trip a limit: the kernel is added without add_item's checks */
        if ((rc = cm_grow((void **)&c->items, &c->cap_items, c->n_items + (hi - lo), sizeof *c->items)))
            goto fail;
        if ((rc = scan_kernel(c, g, cls, byte, lo, hi, &indexed))) goto fail;
    } else {
        for (size_t i = lo; i < hi; i++) {
            cm_item it = c->items[i];
            uint32_t st = cm_st(it.state), la = cm_la_next(g, cm_la(it.state), byte);
            if (!g->has_bytes[st] || la == CM_LA_DEAD) continue;
            int32_t next = t->trans[(size_t)st * t->n_classes + cls];
            if (next < 0 || (la && !debt_payable(g, (uint32_t)next, la, 0))) continue;
            if ((rc = add_item(c, g, cm_pack((uint32_t)next, la), it.origin))) goto fail;
        }
    }
    if (c->n_items == c->set_start[c->n_sets]) return 0;
    if ((rc = close_memoized(c, g, indexed, false))) goto fail;
    cm_chart_end_set(c);
    return 1;
fail:
    c->n_items = c->set_start[c->n_sets];
    return rc;
}

/* cm_chart_scan, a scan of a big set kept (scan_slot) where the chart asks for it (memo_big, a
 * grammar without lookahead debts): walk.c's upward filter reads its rests through this, so
 * every other chart's scans run the code they ran before. */
int cm_chart_scan_kept(cm_chart *c, const cm_grammar *g, uint8_t byte) {
    if (!c->memo_big || g->has_segments || g->t.n_la > 1 || !atomic_load_explicit(&g_scan_memo, memory_order_relaxed))
        return cm_chart_scan(c, g, byte);
    c->exited = false;
    c->memo_used = NULL;
    return scan_set_kept(c, g, byte);
}

/* Would cm_chart_scan of this byte append a set (barring errors)?  The set
 * is not built: an item of the last set reads the byte (its kernel is not
 * empty), which is all a scan's verdict on the last byte of a text needs. */
bool cm_chart_viable(const cm_chart *c, const cm_grammar *g, uint8_t byte) {
    const cm_tables *t = &g->t;
    uint32_t cls = t->byte_class[byte], prev = (uint32_t)c->n_sets - 1;
    bool seg = g->has_segments; /* counts guard the segment states' edges */
    for (size_t i = c->set_start[prev]; i < c->set_start[prev + 1]; i++) {
        cm_item it = c->items[i];
        uint32_t st = cm_st(it.state), la = cm_la_next(g, cm_la(it.state), byte);
        if (!g->has_bytes[st] || la == CM_LA_DEAD) continue;
        size_t cell = (size_t)st * t->n_classes + cls;
        int32_t next = t->trans[cell];
        uint32_t nk;
        if (next < 0 || (la && !debt_payable(g, (uint32_t)next, la, 0))) continue;
        if (!seg || seg_step(g, st, cell, c->counts[i], (uint32_t)next, &nk)) return true;
    }
    return false;
}

bool cm_chart_accepting(const cm_chart *c, const cm_grammar *g) {
    const cm_tables *t = &g->t;
    size_t last = c->n_sets - 1;
    if (g->has_segments) {
        for (size_t i = c->set_start[last]; i < c->set_start[last + 1]; i++) {
            uint32_t st = cm_st(c->items[i].state);
            if (c->items[i].origin == 0 && t->state_rule[st] == t->start_rule && cm_seg_accepts(g, st, c->counts[i]))
                return true;
        }
        return false;
    }
    for (size_t i = c->set_start[last]; i < c->set_start[last + 1]; i++) {
        cm_item it = c->items[i];
        uint32_t st = cm_st(it.state);  /* a lookahead owed is met by the end of the text */
        if (it.origin == 0 && t->accepting[st] && t->state_rule[st] == t->start_rule) return true;
    }
    return false;
}

/* Consume one whole token through token-terminal edges of the items of set
 * `from`.  With `merge`, the advanced items join the last set (the one the
 * token's bytes produced); otherwise they form a new set.  1 = some item
 * advanced, 0 = none (chart unchanged), < 0 = error. */
int cm_chart_token_scan(cm_chart *c, const cm_grammar *g, uint32_t token, size_t from, bool merge) {
    const cm_tables *t = &g->t;
    size_t n_sets = c->n_sets, n_items = c->n_items, added = 0;
    int rc = merge ? cm_chart_reopen_last(c) : cm_chart_begin_set(c);
    if (!rc && !merge) c->set_byte[c->n_sets] = 257;  /* made by no byte (see advance_waiter) */
    for (size_t i = c->set_start[from]; !rc && i < c->set_start[from + 1]; i++) {
        cm_item it = c->items[i];
        uint32_t st = cm_st(it.state);
        if (!g->has_tokens[st]) continue;
        for (uint32_t e = t->tok_off[st]; !rc && e < t->tok_off[st + 1]; e++) {
            if (!cm_token_in_set(g, t->tok_set[e], token)) continue;
            rc = add_item(c, g, t->tok_target[e], it.origin);
            added++;
        }
    }
    if (!rc && added) rc = close_set(c, g);
    if (rc || !added) {
        c->n_sets = n_sets;
        c->n_items = n_items;
        return rc;
    }
    cm_chart_end_set(c);
    return 1;
}
