/* Counted repetitions as segments in C (docs/design.md §7, "The segment form in C", session 33):
 * the segment form's tables, validated and copied (cm_segtab), and a private byte-level Earley
 * chart that keeps a count beside each item (cm_segchart), for the tests against
 * tests/segment_model.py until the engine's chart (earley.c) counts.
 *
 * The count rules (the model's): a scan from a segment state reads its edge's flags: INTO needs
 * k < hi, EXIT needs k >= lo; BACK gives k + 1; any other edge inside the segment keeps k; every
 * other arrival on a segment state (an EXIT, an edge from outside, a call's target, a predicted
 * rule's start) is on a head (validated) and enters with k = 0.  A head accepts only at k >= lo.
 * Segment states have no calls, so prediction and completion never read a count. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "segcut.h"

struct cm_segtab {
    uint32_t n_states, n_rules, n_classes, start_rule, n_segments;
    bool bytes_only;  /* no token edges, no lookahead markers: the private chart can run it */
    uint8_t byte_class[256];
    int32_t *trans;       /* [n_states * n_classes] */
    uint8_t *flags;       /* [n_states * n_classes] */
    uint32_t *state_rule; /* [n_states] */
    uint8_t *accepting;   /* [n_states] */
    uint32_t *state_seg;  /* [n_states] */
    uint32_t *ref_off;    /* [n_states + 1] */
    uint32_t *ref_rule;   /* [ref_off[n_states]] */
    uint32_t *ref_target; /* [ref_off[n_states]] */
    uint32_t *rule_start; /* [n_rules] */
    uint32_t *seg_lo, *seg_hi, *seg_head; /* [n_segments] */
};

static atomic_size_t g_counted_scans;

size_t cm_counted_scans(void) { return atomic_load(&g_counted_scans); }

void cm_counted_scans_add(size_t n) { atomic_fetch_add(&g_counted_scans, n); }

/* Is s an interior state (in a segment, not its head)? */
static inline bool interior(const cm_seg_tables *in, uint32_t s) {
    uint32_t sid = in->state_seg[s];
    return sid != CM_SEG_NONE && in->seg_head[sid] != s;
}

static inline bool is_head(const cm_seg_tables *in, uint32_t s) {
    uint32_t sid = in->state_seg[s];
    return sid != CM_SEG_NONE && in->seg_head[sid] == s;
}

/* One byte cell's edge s -> u with flags f: the rules of cfgmask/compile/segments.py's tags. */
static int check_edge(const cm_seg_tables *in, uint32_t s, uint32_t u, uint8_t f) {
    uint32_t sid = in->state_seg[s];
    if (f & ~(CM_SEG_INTO | CM_SEG_BACK | CM_SEG_EXIT)) return CM_ERR_ARG;
    if (sid == CM_SEG_NONE) /* outside: no flags, and onto a segment only at its head */
        return f == 0 && !interior(in, u) ? CM_OK : CM_ERR_ARG;
    uint32_t head = in->seg_head[sid];
    if (f & CM_SEG_EXIT) /* the head's alone; lands outside or on a head, afresh */
        return f == CM_SEG_EXIT && s == head && !interior(in, u) ? CM_OK : CM_ERR_ARG;
    if (s == head && !(f & CM_SEG_INTO)) return CM_ERR_ARG; /* a head's edges are INTO or EXIT */
    if (s != head && (f & CM_SEG_INTO)) return CM_ERR_ARG;
    if (f & CM_SEG_BACK) return u == head ? CM_OK : CM_ERR_ARG;
    return in->state_seg[u] == sid && u != head ? CM_OK : CM_ERR_ARG; /* on inside the unit */
}

static int validate(const cm_seg_tables *in) {
    const cm_tables *t = &in->t;
    int rc = cm_tables_validate(t);
    if (rc) return rc;
    uint32_t ns = t->n_states, nc = t->n_classes, nseg = in->n_segments;
    if (!in->state_seg || !in->edge_flags) return CM_ERR_ARG;
    if (nseg && (!in->seg_lo || !in->seg_hi || !in->seg_rule || !in->seg_head)) return CM_ERR_ARG;
    if (nseg >= CM_SEG_NONE) return CM_ERR_ARG;
    for (uint32_t i = 0; i < nseg; i++) {
        if (in->seg_lo[i] > in->seg_hi[i] || in->seg_hi[i] >= CM_SEG_NONE) return CM_ERR_ARG;
        if (in->seg_rule[i] >= t->n_rules || in->seg_head[i] >= ns) return CM_ERR_ARG;
        if (t->state_rule[in->seg_head[i]] != in->seg_rule[i] || in->state_seg[in->seg_head[i]] != i)
            return CM_ERR_ARG;
    }
    for (uint32_t s = 0; s < ns; s++) { /* every id first: check_edge reads the targets' */
        uint32_t sid = in->state_seg[s];
        if (sid == CM_SEG_NONE) continue;
        if (sid >= nseg || t->state_rule[s] != in->seg_rule[sid]) return CM_ERR_ARG;
    }
    for (uint32_t s = 0; s < ns; s++) {
        bool inside = in->state_seg[s] != CM_SEG_NONE;
        if (inside && t->ref_off[s + 1] != t->ref_off[s]) return CM_ERR_ARG; /* no calls inside */
        if (inside && t->tok_off[s + 1] != t->tok_off[s]) return CM_ERR_ARG; /* no tokens inside */
        if (interior(in, s) && t->accepting[s]) return CM_ERR_ARG;
        for (uint32_t c = 0; c < nc; c++) {
            size_t cell = (size_t)s * nc + c;
            int32_t u = t->trans[cell];
            uint8_t f = in->edge_flags[cell];
            if (u < 0) {
                if (u != -1 || f) return CM_ERR_ARG; /* flags only on edges */
                continue;
            }
            if ((uint32_t)u >= ns || t->state_rule[u] != t->state_rule[s]) return CM_ERR_ARG;
            rc = check_edge(in, s, (uint32_t)u, f);
            if (rc) return rc;
        }
        for (uint32_t e = t->ref_off[s]; e < t->ref_off[s + 1]; e++)
            if (interior(in, t->ref_target[e])) return CM_ERR_ARG;
        for (uint32_t e = t->tok_off[s]; e < t->tok_off[s + 1]; e++)
            if (interior(in, t->tok_target[e])) return CM_ERR_ARG;
    }
    for (uint32_t r = 0; r < t->n_rules; r++)
        if (interior(in, t->rule_start[r])) return CM_ERR_ARG;
    return CM_OK;
}

void cm_segtab_free(cm_segtab *st) {
    if (!st) return;
    free(st->trans);
    free(st->flags);
    free(st->state_rule);
    free(st->accepting);
    free(st->state_seg);
    free(st->ref_off);
    free(st->ref_rule);
    free(st->ref_target);
    free(st->rule_start);
    free(st->seg_lo);
    free(st->seg_hi);
    free(st->seg_head);
    free(st);
}

static void *dup(const void *p, size_t n, size_t size) {
    void *q = malloc(n ? n * size : 1);
    if (q && n) memcpy(q, p, n * size);
    return q;
}

int cm_segtab_new(const cm_seg_tables *in, cm_segtab **out) {
    if (!in || !out) return CM_ERR_ARG;
    *out = NULL;
    int rc = validate(in);
    if (rc) return rc;
    const cm_tables *t = &in->t;
    cm_segtab *st = calloc(1, sizeof *st);
    if (!st) return CM_ERR_NOMEM;
    size_t ns = t->n_states, cells = ns * t->n_classes, nref = t->ref_off[ns], nseg = in->n_segments;
    st->n_states = t->n_states;
    st->n_rules = t->n_rules;
    st->n_classes = t->n_classes;
    st->start_rule = t->start_rule;
    st->n_segments = in->n_segments;
    st->bytes_only = t->tok_off[ns] == 0 && t->n_la == 0;
    memcpy(st->byte_class, t->byte_class, 256);
    st->trans = dup(t->trans, cells, sizeof *t->trans);
    st->flags = dup(in->edge_flags, cells, 1);
    st->state_rule = dup(t->state_rule, ns, sizeof(uint32_t));
    st->accepting = dup(t->accepting, ns, 1);
    st->state_seg = dup(in->state_seg, ns, sizeof(uint32_t));
    st->ref_off = dup(t->ref_off, ns + 1, sizeof(uint32_t));
    st->ref_rule = dup(t->ref_rule, nref, sizeof(uint32_t));
    st->ref_target = dup(t->ref_target, nref, sizeof(uint32_t));
    st->rule_start = dup(t->rule_start, t->n_rules, sizeof(uint32_t));
    st->seg_lo = dup(in->seg_lo, nseg, sizeof(uint32_t));
    st->seg_hi = dup(in->seg_hi, nseg, sizeof(uint32_t));
    st->seg_head = dup(in->seg_head, nseg, sizeof(uint32_t));
    if (!st->trans || !st->flags || !st->state_rule || !st->accepting || !st->state_seg || !st->ref_off ||
        !st->ref_rule || !st->ref_target || !st->rule_start || !st->seg_lo || !st->seg_hi || !st->seg_head) {
        cm_segtab_free(st);
        return CM_ERR_NOMEM;
    }
    *out = st;
    return CM_OK;
}

int cm_grammar_new_segments(const cm_seg_tables *in, const cm_vocab *v, const uint32_t *stop_ids, size_t n_stop,
                            const cm_limits *limits, cm_grammar **out) {
    if (!in || !out) return CM_ERR_ARG;
    *out = NULL;
    int rc = validate(in);
    cm_grammar *g = NULL;
    if (!rc) rc = cm_grammar_new(&in->t, v, stop_ids, n_stop, limits, &g);
    if (rc || !in->n_segments) {
        *out = g;
        return rc;
    }
    size_t ns = in->t.n_states, nseg = in->n_segments;
    g->n_segments = in->n_segments;
    g->state_seg = dup(in->state_seg, ns, sizeof(uint32_t));
    g->edge_flags = dup(in->edge_flags, ns * in->t.n_classes, 1);
    g->seg_lo = dup(in->seg_lo, nseg, sizeof(uint32_t));
    g->seg_hi = dup(in->seg_hi, nseg, sizeof(uint32_t));
    g->seg_head = dup(in->seg_head, nseg, sizeof(uint32_t));
    if (!g->state_seg || !g->edge_flags || !g->seg_lo || !g->seg_hi || !g->seg_head) {
        cm_grammar_free(g);
        return CM_ERR_NOMEM;
    }
    g->has_segments = true;
    *out = g;
    return CM_OK;
}

/* -- the private chart */

typedef struct {
    uint32_t state, origin, k; /* k: CM_SEG_NONE outside segments */
} seg_item;

struct cm_segchart {
    const cm_segtab *g;
    size_t max_items;
    seg_item *items;
    size_t n_items, cap_items;
    size_t *set_start; /* [n_sets + 1]: set i is items[set_start[i] .. set_start[i + 1]) */
    size_t n_sets, cap_sets;
    uint8_t *done; /* [n_rules]: completed with origin at the set being closed */
};

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return CM_OK;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * size);
    if (!q) return CM_ERR_NOMEM;
    *p = q;
    *cap = n;
    return CM_OK;
}

static inline uint32_t enter(const cm_segtab *g, uint32_t s) {
    return g->state_seg[s] == CM_SEG_NONE ? CM_SEG_NONE : 0;
}

static inline bool accepts(const cm_segtab *g, uint32_t s, uint32_t k) {
    if (!g->accepting[s]) return false;
    uint32_t sid = g->state_seg[s];
    return sid == CM_SEG_NONE || k >= g->seg_lo[sid];
}

/* Add to the open set (which starts at `from`) unless there; the same item with another count
 * is the design's claim broken: CM_ERR_STATE. */
static int add(cm_segchart *c, size_t from, uint32_t state, uint32_t origin, uint32_t k) {
    for (size_t i = from; i < c->n_items; i++) {
        seg_item *it = &c->items[i];
        if (it->state == state && it->origin == origin) return it->k == k ? CM_OK : CM_ERR_STATE;
    }
    if (c->n_items - from >= c->max_items) return CM_ERR_LIMIT;
    int rc = grow((void **)&c->items, &c->cap_items, c->n_items + 1, sizeof *c->items);
    if (rc) return rc;
    c->items[c->n_items++] = (seg_item){state, origin, k};
    return CM_OK;
}

/* Close the open set (items from set_start[here]) under prediction and completion. */
static int close_set(cm_segchart *c, uint32_t here) {
    const cm_segtab *g = c->g;
    size_t from = c->set_start[here];
    memset(c->done, 0, g->n_rules);
    for (size_t i = from; i < c->n_items; i++) {
        seg_item it = c->items[i];
        uint32_t s = it.state;
        for (uint32_t e = g->ref_off[s]; e < g->ref_off[s + 1]; e++) {
            uint32_t r = g->ref_rule[e], st = g->rule_start[r], tg = g->ref_target[e];
            int rc = add(c, from, st, here, enter(g, st));
            if (!rc && c->done[r]) rc = add(c, from, tg, it.origin, enter(g, tg));
            if (rc) return rc;
        }
        if (!accepts(g, s, it.k)) continue;
        uint32_t rule = g->state_rule[s];
        if (it.origin == here) c->done[rule] = 1;
        /* the waiters: set origin's items; in the open set, those there now (later ones see done) */
        size_t lo = c->set_start[it.origin], hi = it.origin == here ? c->n_items : c->set_start[it.origin + 1];
        for (size_t j = lo; j < hi; j++) {
            seg_item p = c->items[j];
            for (uint32_t e = g->ref_off[p.state]; e < g->ref_off[p.state + 1]; e++) {
                if (g->ref_rule[e] != rule) continue;
                uint32_t tg = g->ref_target[e];
                int rc = add(c, from, tg, p.origin, enter(g, tg));
                if (rc) return rc;
            }
        }
    }
    return CM_OK;
}

/* Scan byte b from the last set into a new open set; its size (0: none survived). */
static int scan(cm_segchart *c, uint8_t b, size_t *n_new, bool count) {
    const cm_segtab *g = c->g;
    size_t lo = c->set_start[c->n_sets - 1], hi = c->set_start[c->n_sets], from = c->n_items;
    uint32_t cls = g->byte_class[b];
    for (size_t i = lo; i < hi; i++) {
        seg_item it = c->items[i];
        size_t cell = (size_t)it.state * g->n_classes + cls;
        int32_t u = g->trans[cell];
        if (u < 0) continue;
        uint8_t f = g->flags[cell];
        uint32_t sid = g->state_seg[it.state], nk;
        if (sid != CM_SEG_NONE) {
            if (count) atomic_fetch_add(&g_counted_scans, 1);
            if ((f & CM_SEG_INTO) && it.k >= g->seg_hi[sid]) continue;
            if ((f & CM_SEG_EXIT) && it.k < g->seg_lo[sid]) continue;
        }
        if (f & CM_SEG_BACK) nk = it.k + 1; /* k < hi < CM_SEG_NONE: INTO guarded it, or k came from BACKs */
        else if (sid != CM_SEG_NONE && !(f & CM_SEG_EXIT)) nk = it.k;
        else nk = enter(g, (uint32_t)u);
        int rc = add(c, from, (uint32_t)u, it.origin, nk);
        if (rc) return rc;
    }
    *n_new = c->n_items - from;
    return CM_OK;
}

void cm_segchart_free(cm_segchart *c) {
    if (!c) return;
    free(c->items);
    free(c->set_start);
    free(c->done);
    free(c);
}

static cm_segchart *chart_alloc(const cm_segtab *g, size_t max_items) {
    cm_segchart *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->g = g;
    c->max_items = max_items ? max_items : (size_t)1 << 20;
    c->done = malloc(g->n_rules);
    if (!c->done || grow((void **)&c->set_start, &c->cap_sets, 2, sizeof *c->set_start)) {
        cm_segchart_free(c);
        return NULL;
    }
    return c;
}

int cm_segchart_new(const cm_segtab *st, size_t max_items, cm_segchart **out) {
    if (!st || !out) return CM_ERR_ARG;
    *out = NULL;
    if (!st->bytes_only) return CM_ERR_ARG;
    cm_segchart *c = chart_alloc(st, max_items);
    if (!c) return CM_ERR_NOMEM;
    c->set_start[0] = 0;
    uint32_t s0 = st->rule_start[st->start_rule];
    int rc = add(c, 0, s0, 0, enter(st, s0));
    if (!rc) rc = close_set(c, 0);
    if (rc) {
        cm_segchart_free(c);
        return rc;
    }
    c->n_sets = 1;
    c->set_start[1] = c->n_items;
    *out = c;
    return CM_OK;
}

int cm_segchart_fork(const cm_segchart *c, cm_segchart **out) {
    if (!c || !out) return CM_ERR_ARG;
    *out = NULL;
    cm_segchart *d = chart_alloc(c->g, c->max_items);
    if (!d) return CM_ERR_NOMEM;
    if (grow((void **)&d->items, &d->cap_items, c->n_items ? c->n_items : 1, sizeof *d->items) ||
        grow((void **)&d->set_start, &d->cap_sets, c->n_sets + 1, sizeof *d->set_start)) {
        cm_segchart_free(d);
        return CM_ERR_NOMEM;
    }
    memcpy(d->items, c->items, c->n_items * sizeof *c->items);
    memcpy(d->set_start, c->set_start, (c->n_sets + 1) * sizeof *c->set_start);
    d->n_items = c->n_items;
    d->n_sets = c->n_sets;
    *out = d;
    return CM_OK;
}

int cm_segchart_step(cm_segchart *c, uint8_t b) {
    if (!c) return CM_ERR_ARG;
    if (c->n_sets >= UINT32_MAX) return CM_ERR_LIMIT;
    int rc = grow((void **)&c->set_start, &c->cap_sets, c->n_sets + 2, sizeof *c->set_start);
    size_t n_new = 0;
    if (!rc) rc = scan(c, b, &n_new, true);
    if (!rc && n_new) rc = close_set(c, (uint32_t)c->n_sets);
    if (rc || !n_new) {
        c->n_items = c->set_start[c->n_sets]; /* nothing read */
        return rc ? rc : 0;
    }
    c->n_sets++;
    c->set_start[c->n_sets] = c->n_items;
    return 1;
}

int cm_segchart_accepting(const cm_segchart *c) {
    if (!c) return CM_ERR_ARG;
    const cm_segtab *g = c->g;
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        seg_item it = c->items[i];
        if (it.origin == 0 && g->state_rule[it.state] == g->start_rule && accepts(g, it.state, it.k)) return 1;
    }
    return 0;
}

int cm_segchart_viable(const cm_segchart *c, uint32_t out[8]) {
    if (!c || !out) return CM_ERR_ARG;
    cm_segchart *w = (cm_segchart *)c; /* scans into the spare tail and takes it back */
    memset(out, 0, 8 * sizeof *out);
    for (int b = 0; b < 256; b++) {
        size_t n_new = 0;
        int rc = scan(w, (uint8_t)b, &n_new, false);
        w->n_items = w->set_start[w->n_sets];
        if (rc) return rc;
        if (n_new) out[b >> 5] |= 1u << (b & 31);
    }
    return CM_OK;
}

size_t cm_segchart_len(const cm_segchart *c) { return c ? c->n_sets - 1 : 0; }

int cm_segchart_rollback(cm_segchart *c, size_t n) {
    if (!c || n > c->n_sets - 1) return CM_ERR_ARG;
    c->n_sets -= n;
    c->n_items = c->set_start[c->n_sets];
    return CM_OK;
}

size_t cm_segchart_items(const cm_segchart *c, uint32_t *state, uint32_t *origin, uint32_t *k, size_t cap) {
    if (!c) return 0;
    size_t lo = c->set_start[c->n_sets - 1], n = c->set_start[c->n_sets] - lo;
    for (size_t i = 0; i < n && i < cap; i++) {
        seg_item it = c->items[lo + i];
        if (state) state[i] = it.state;
        if (origin) origin[i] = it.origin;
        if (k) k[i] = it.k;
    }
    return n;
}

/* -- for segcut.c */

void cm_segtab_raw(const cm_segtab *st, cm_seg_raw *r) {
    r->n_states = st->n_states;
    r->n_classes = st->n_classes;
    r->n_segments = st->n_segments;
    r->byte_class = st->byte_class;
    r->trans = st->trans;
    r->flags = st->flags;
    r->state_seg = st->state_seg;
    r->seg_head = st->seg_head;
}
