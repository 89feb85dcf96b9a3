/* The waiter index of closed Earley sets.
 *
 * Completing rule r for an item that started in set o advances the items of o
 * that call r.  Scanning all of o for them costs O(|o|) per completion, and
 * expression grammars complete a cascade of rules into the same big sets at
 * every byte of an identifier; so a closed set that receives a second
 * completion (same version) gets an index: its (rule, item) pairs sorted by
 * rule, one hash slot per (set, rule).  Slots carry the set's version, so a set
 * rebuilt after a truncation is simply indexed again. */
#include <stdlib.h>
#include <string.h>

#include "chart.h"

#define CM_WPOOL_MAX ((size_t)1 << 22)  /* pool entries before everything is dropped */

static inline uint64_t wkey(uint32_t set, uint32_t rule) { return (((uint64_t)set << 32) | rule) + 1; }

/* slots_zero: the slots were just calloc'd (make_room), not zeroed again */
static void widx_clear(cm_chart *c, bool slots_zero) {
    if (c->wslots && !slots_zero) memset(c->wslots, 0, c->wcap * sizeof *c->wslots);
    memset(c->wbuilt, 0, c->cap_sets * sizeof *c->wbuilt);
    c->wused = 0;
    c->wpool_n = 0;
}

/* Stable sort of (rule << 32 | item) pairs by rule (the items come ascending):
 * LSD radix, 8 bits a pass, as many passes as the rule numbers need.  Returns
 * a or tmp, whichever holds the result. */
static uint64_t *sort_by_rule(uint64_t *a, uint64_t *tmp, size_t n, uint32_t n_rules) {
    for (unsigned shift = 32; shift < 64 && (n_rules - 1) >> (shift - 32); shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((a[i] >> shift) & 255) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) tmp[count[(a[i] >> shift) & 255]++] = a[i];
        uint64_t *x = a;
        a = tmp;
        tmp = x;
    }
    return a;
}

static cm_wslot *wslot_find(const cm_chart *c, uint64_t key) {
    size_t mask = c->wcap - 1, s = cm_hslot(key, mask);
    while (c->wslots[s].key && c->wslots[s].key != key) s = (s + 1) & mask;
    return &c->wslots[s];
}

/* The (rule << 32 | item) pairs of set o into c->wtmp, sorted by rule; their number. */
static int collect_pairs(cm_chart *c, const cm_grammar *g, uint32_t o, const uint64_t **out, size_t *n_out) {
    const cm_tables *t = &g->t;
    size_t n = 0;
    for (size_t i = c->set_start[o]; i < c->set_start[o + 1]; i++) {
        uint32_t st = cm_st(c->items[i].state);
        if (!g->calls[st]) continue;
        for (uint32_t e = t->ref_off[st]; e < t->ref_off[st + 1]; e++) {
            int rc = cm_grow((void **)&c->wtmp, &c->wtmp_cap, 2 * (n + 1), sizeof *c->wtmp);
            if (rc) return rc;
            c->wtmp[n++] = ((uint64_t)t->ref_rule[e] << 32) | (uint32_t)i;
        }
    }
    /* the second half of wtmp is the sort's scratch */
    *out = n > 1 ? sort_by_rule(c->wtmp, c->wtmp + c->wtmp_cap / 2, n, t->n_rules) : c->wtmp;
    *n_out = n;
    return CM_OK;
}

/* A slot of a set rebuilt since (its version changed) is dead: a lookup treats it as
 * no slot.  Its set is below cap_sets (which never shrinks).  A set truncated and
 * not rebuilt keeps its version, and its slots: the set may come back as it was. */
static inline bool slot_live(const cm_chart *c, const cm_wslot *sl) {
    return sl->key && sl->version == c->version[(sl->key - 1) >> 32];
}

/* Into a table of `cap` slots and a pool of their entries: the live slots of c's
 * table, the dead ones and their pool entries dropped. */
static int rehash_live(cm_chart *c, size_t cap) {
    size_t n_pool = 0;
    for (size_t i = 0; i < c->wcap; i++)
        if (slot_live(c, &c->wslots[i])) n_pool += c->wslots[i].n;
    cm_wslot *p = calloc(cap, sizeof *p);
    uint32_t *pool = malloc((n_pool ? n_pool : 1) * sizeof *pool);
    if (!p || !pool) {
        free(p);
        free(pool);
        return CM_ERR_NOMEM;
    }
    size_t used = 0, at = 0;
    for (size_t i = 0; i < c->wcap; i++) {
        const cm_wslot *sl = &c->wslots[i];
        if (!slot_live(c, sl)) continue;
        size_t s = cm_hslot(sl->key, cap - 1);
        while (p[s].key) s = (s + 1) & (cap - 1);
        p[s] = *sl;
        p[s].off = (uint32_t)at;
        memcpy(pool + at, c->wpool + sl->off, sl->n * sizeof *pool);
        at += sl->n;
        used++;
    }
    free(c->wslots);
    free(c->wpool);
    c->wslots = p;
    c->wcap = cap;
    c->wused = used;
    c->wpool = pool;
    c->wpool_n = at;
    c->wpool_cap = n_pool ? n_pool : 1;
    return CM_OK;
}

#define CM_WSLOTS_MAX ((size_t)1 << 16)

/* Room for `groups` more slots and n more pool entries.  A full table first drops
 * the slots of sets rebuilt since (a matcher's chart keeps its big sets, the ones
 * worth an index, across masks, while the scratch sets above them come and go),
 * growing if the live ones still fill half; past its budget, or the pool's,
 * everything indexed so far is dropped. */
static int make_room(cm_chart *c, size_t groups, size_t n) {
    if (c->wslots && (c->wused + groups) * 2 > c->wcap) {
        size_t live = 0;
        for (size_t i = 0; i < c->wcap; i++) live += slot_live(c, &c->wslots[i]);
        size_t cap = c->wcap;
        while ((live + groups) * 2 > cap) cap *= 2;
        if (cap <= CM_WSLOTS_MAX) {
            int rc = rehash_live(c, cap);
            if (rc) return rc;
        }
    }
    if (!c->wslots || c->wpool_n + n > CM_WPOOL_MAX || (c->wused + groups) * 2 > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 256;
        bool first = !c->wslots;
        while (groups * 4 > cap) cap *= 2;
        bool fresh = cap != c->wcap; /* a new calloc'd table (always so for a chart's first) */
        if (fresh) {
            cm_wslot *p = calloc(cap, sizeof *p);
            if (!p) return CM_ERR_NOMEM;
            free(c->wslots);
            c->wslots = p;
            c->wcap = cap;
        }
        /* a chart's first index: no set was indexed yet, so wbuilt is zero as its growth left
         * it (cm_chart_grow_sets); a chart a cold mask opens is indexed once or twice */
        if (first) c->wused = c->wpool_n = 0;
        else widx_clear(c, fresh);
    }
    return cm_grow((void **)&c->wpool, &c->wpool_cap, c->wpool_n + n, sizeof *c->wpool);
}

static int widx_build(cm_chart *c, const cm_grammar *g, uint32_t o) {
    const uint64_t *w;
    size_t n, groups = 0;
    int rc = collect_pairs(c, g, o, &w, &n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) groups += !i || (w[i] >> 32) != (w[i - 1] >> 32);
    if ((rc = make_room(c, groups, n))) return rc;
    uint64_t v = c->version[o];
    for (size_t i = 0; i < n;) {
        uint32_t rule = (uint32_t)(w[i] >> 32);
        cm_wslot *sl = wslot_find(c, wkey(o, rule));
        if (!sl->key) c->wused++;
        sl->key = wkey(o, rule);
        sl->version = v;
        sl->off = (uint32_t)c->wpool_n;
        for (; i < n && (uint32_t)(w[i] >> 32) == rule; i++)
            if (c->wpool_n == sl->off || c->wpool[c->wpool_n - 1] != (uint32_t)w[i])
                c->wpool[c->wpool_n++] = (uint32_t)w[i];
        sl->n = (uint32_t)(c->wpool_n - sl->off);
    }
    c->wbuilt[o] = v;
    return CM_OK;
}

int cm_waiters(cm_chart *c, const cm_grammar *g, uint32_t origin, uint32_t rule, const uint32_t **items,
               uint32_t *n) {
    uint64_t v = c->version[origin];
    if (c->wbuilt[origin] != v && c->wseen[origin] == v) {
        int rc = widx_build(c, g, origin);
        if (rc) return rc;
    }
    c->wseen[origin] = v;
    if (c->wbuilt[origin] != v) return 0;
    const cm_wslot *sl = wslot_find(c, wkey(origin, rule));
    *n = 0;
    if (sl->key && sl->version == v) {
        *items = c->wpool + sl->off;
        *n = sl->n;
    }
    return 1;
}
