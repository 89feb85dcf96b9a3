/* The mask cache: entries built on first use, interned, published.
 *
 * An entry is built under the cache lock, by the first of these that applies
 * (the build ladder; each claims the very entry of the whole walk, see
 * tests/test_entries.py):
 *   1. composed from its callees' entries (compose.c), for a state that calls;
 *   2. taken from a donor state's (donor.c), for a solo state like another;
 *   3. the shared walk of its loop (loops.c), for a plain state in a loop;
 *   4. a walk of the whole trie (flat.c, walk.c), the subtrees of first bytes
 *      that enter a name through its run walk (loops.c).
 * Then uncertain tokens no context can take are dropped (walk.c) and a block
 * state's are split (wrap.c).  States with equal entries share one; a slot is
 * published with a release store, and readers never lock. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "chart.h"
#include "compose.h"
#include "donor.h"
#include "flat.h"
#include "loops.h"
#include "promote.h"
#include "repeat.h"
#include "segcut.h"
#include "walk.h"
#include "wrap.h"

int cm_cache_new(const cm_grammar *g, cm_cache **out) {
    size_t ns = g->t.n_states ? g->t.n_states : 1;
    cm_cache *c = calloc(1, sizeof *c);
    if (!c) return CM_ERR_NOMEM;
    if (pthread_mutex_init(&c->lock, NULL)) {
        free(c);
        return CM_ERR_NOMEM;
    }
    if (cm_mask_memo_init(&c->memo)) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return CM_ERR_NOMEM;
    }
    if (cm_stack_store_init(&c->stacks, g->v->n_trie)) {
        cm_mask_memo_destroy(&c->memo);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return CM_ERR_NOMEM;
    }
    c->slots = calloc(ns, sizeof *c->slots);
    c->fill_slots = calloc(ns, sizeof *c->fill_slots);
    c->uses = calloc(ns, sizeof *c->uses);
    c->building = calloc(ns, 1);
    c->loop_lab = malloc(ns * sizeof *c->loop_lab);
    c->loops = calloc(CM_LOOP_BUCKETS, sizeof *c->loops);
    if (!c->slots || !c->fill_slots || !c->uses || !c->building || !c->loop_lab || !c->loops) {
        cm_cache_free(c);
        return CM_ERR_NOMEM;
    }
    memset(c->loop_lab, 0xff, ns * sizeof *c->loop_lab);
    *out = c;
    return CM_OK;
}

void cm_cache_free(cm_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->entries_cap; i++) cm_entry_free(c->entries[i]);  /* slots[] shares them */
    free(c->entries);
    free(c->seg_slots);
    for (uint32_t i = 0; c->segcuts && i < c->n_segcuts; i++) cm_segcut_free(c->segcuts[i]);
    free(c->segcuts);
    free(c->segcut_tried);
    free((void *)c->near_base);  /* the entries are the interned ones, or the sentinel */
    free(c->slots);
    free(c->fill_slots);
    free(c->uses);
    free(c->building);
    cm_flat_free(c->flat);
    cm_loop_walks_free(c->loops);
    cm_tails_free(c->tails, c->n_tails);
    free(c->tail_slots);
    cm_cands_free(c->cands_slots, c->cands_cap);
    free(c->exit_asker);
    cm_follow_memo_free(c->follow);
    cm_promote_free(c->promote);
    cm_repeat_free(c->repeat);
    for (uint32_t i = 0; i < c->n_spare; i++) free(c->spare_bits[i]);
    free(c->loop_lab);
    cm_mask_memo_destroy(&c->memo);
    cm_stack_store_destroy(&c->stacks);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The table of distinct entries, doubled when half full: 0 or CM_ERR_NOMEM. */
static int intern_grow(cm_cache *c) {
    if ((c->n_entries + 1) * 2 <= c->entries_cap) return CM_OK;
    size_t cap = c->entries_cap ? c->entries_cap * 2 : 256;
    cm_entry **t = calloc(cap, sizeof *t);
    if (!t) return CM_ERR_NOMEM;
    for (size_t i = 0; i < c->entries_cap; i++) {
        cm_entry *x = c->entries[i];
        if (!x) continue;
        size_t s = x->hash & (cap - 1);
        while (t[s]) s = (s + 1) & (cap - 1);
        t[s] = x;
    }
    free(c->entries);
    c->entries = t;
    c->entries_cap = cap;
    return CM_OK;
}

/* The cache's entry equal to e: an earlier one (e is freed) or e, now owned by
 * the table.  NULL (e untouched) when the table cannot grow.  Under the lock.
 * States in equal loops or equal contexts (the copies of a JSON Schema string,
 * the operand states of an expression grammar) get the same entry, and a mask
 * ORs it once (gather in mask.c). */
static cm_entry *entry_intern(const cm_grammar *g, cm_entry *e) {
    cm_cache *c = g->cache;
    e->hash = cm_entry_hash(g, e);
    if (intern_grow(c)) return NULL;
    size_t s = e->hash & (c->entries_cap - 1);
    for (; c->entries[s]; s = (s + 1) & (c->entries_cap - 1)) {
        if (cm_entry_equal(g, c->entries[s], e)) {
            cm_entry_free(e);
            return c->entries[s];
        }
    }
    c->entries[s] = e;
    c->n_entries++;
    return e;
}

static const cm_entry *entry_locked(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status);

/* A walk not yet written lends its zero bitset to the builds of its parts, as
 * a spare (build_entry): a chain of nested callees (an object's optional
 * properties in order, each a rule that calls the next) otherwise holds one
 * bitset a level, each a 16 KB calloc (sp_339's first mask of its chain: 37). */
static void lend_bits(cm_cache *c, cm_walk *w) {
    if (w->bits && c->n_spare < CM_SPARE_BITS) {
        c->spare_bits[c->n_spare++] = w->bits;
        w->bits = NULL;
    }
}

/* ... and takes one back (any spare: all are zero) once they are built. */
static int take_bits(const cm_grammar *g, cm_walk *w) {
    cm_cache *c = g->cache;
    if (w->bits) return CM_OK;
    w->bits = c->n_spare ? c->spare_bits[--c->n_spare] : calloc(g->n_words ? g->n_words : 1, sizeof *w->bits);
    return w->bits ? CM_OK : CM_ERR_NOMEM;
}

/* Rung 1: the entry of a state that calls, from its parts' entries (built
 * first, recursively): 1 done, 0 declined (w untouched), < 0 error. */
static int try_compose(const cm_grammar *g, uint32_t state, cm_walk *w) {
    if (!cm_compose_can(g, state)) return 0;
    cm_cache *c = g->cache;
    uint32_t lo = g->t.ref_off[state], hi = g->t.ref_off[state + 1], n_parts = 0;
    cm_part *parts = calloc(2 * (hi - lo), sizeof *parts);  /* a nullable callee's return state too */
    if (!parts) return CM_ERR_NOMEM;
    int rc = CM_OK, done = 1;
    size_t n_cand = 0;
    c->building[state] = 1;
    c->compose_depth++;
    lend_bits(c, w);
    for (uint32_t e = lo; e < hi && !rc && done; e++) {
        if (cm_compose_self_ref(g, state, e)) continue;  /* no part: its walk is the state's own */
        cm_part *pt = &parts[n_parts];
        pt->state = cm_compose_part_state(g, e, &pt->la);
        pt->e = entry_locked(g, pt->state, &pt->owned, &rc);
        if (rc) break;
        if (!pt->la) pt->ret1 = g->t.ref_target[e] + 1;
        n_parts++;
        n_cand += cm_compose_part_candidates(g, pt);
        uint32_t after;
        if (cm_compose_null_part(g, e, &after) && n_cand <= CM_COMPOSE_MAX_CANDIDATES) {
            pt = &parts[n_parts];
            pt->state = after;
            pt->e = entry_locked(g, after, &pt->owned, &rc);
            if (rc) break;
            n_parts++;
            n_cand += cm_compose_part_candidates(g, pt);
        }
        if (n_cand > CM_COMPOSE_MAX_CANDIDATES) done = 0;
    }
    c->compose_depth--;
    c->building[state] = 0;
    int taken = take_bits(g, w);
    if (!rc) rc = taken;
    if (!rc && done) {
        atomic_fetch_add(&c->composed, 1);
        rc = cm_compose(g, state, parts, n_parts, n_cand, w);
    }
    for (uint32_t i = 0; i < n_parts; i++) cm_entry_free(parts[i].owned);
    free(parts);
    return rc ? rc : done;
}

/* Rung 2: the entry of a solo state from its donor's (built first): 1 done,
 * 0 declined (w untouched), < 0 error. */
static int try_donor(const cm_grammar *g, uint32_t state, cm_walk *w) {
    bool part[256];
    int32_t donor = cm_donor_of(g, state, part);
    if (donor < 0) return 0;
    cm_cache *c = g->cache;
    cm_entry *owned = NULL;
    int rc = CM_OK;
    c->building[state] = 1;
    c->compose_depth++;
    lend_bits(c, w);
    const cm_entry *de = entry_locked(g, (uint32_t)donor, &owned, &rc);
    c->compose_depth--;
    c->building[state] = 0;
    int taken = take_bits(g, w);
    if (!rc) rc = taken;
    if (rc) {
        cm_entry_free(owned);
        return rc;
    }
    rc = cm_donor_build(g, state, (uint32_t)donor, de, part, w);
    cm_entry_free(owned);
    if (rc) return rc;
    atomic_fetch_add(&c->donated, 1);
    return 1;
}

/* A segment grammar's walk: the whole trie through a private counted chart of (state, OUTER),
 * at count k where state is in a segment.  No other rung: they read the automata without
 * counts. */
static int plain_walk(const cm_grammar *g, uint32_t state, uint32_t k, cm_walk *w) {
    cm_chart c;
    int rc = g->state_seg[state] == CM_SEG_NONE ? cm_chart_init_item(&c, g, state, CM_OUTER)
                                                 : cm_chart_init_item_k(&c, g, state, CM_OUTER, k);
    if (!rc) rc = cm_walk_chart(g, &c, g->t.state_rule[state], 0, g->v->n_trie, 0, 0, -1, w);
    cm_chart_free(&c);
    return rc;
}

static atomic_int g_seg_far = 1;
static atomic_size_t g_seg_far_builds;

void cm_seg_far_enable(int on) { atomic_store(&g_seg_far, on); }
size_t cm_seg_far_builds(void) { return atomic_load(&g_seg_far_builds); }

static void seg_key(const cm_grammar *g, uint32_t state, uint32_t k, uint32_t *need, uint32_t *budget);

static atomic_int g_seg_near = 1;
static atomic_size_t g_seg_near_builds;

void cm_seg_near_enable(int on) { atomic_store(&g_seg_near, on); }
size_t cm_seg_near_builds(void) { return atomic_load(&g_seg_near_builds); }

/* The cut of segment sid (segcut.c) from the grammar's own tables, made on first use; NULL
 * where the unit's form is refused (too many states: the near entries stay plain walks).
 * Under the cache lock. */
static int seg_cut(const cm_grammar *g, uint32_t sid, cm_segcut **out) {
    cm_cache *c = g->cache;
    *out = NULL;
    if (!c->segcuts) {
        c->segcuts = calloc(g->n_segments, sizeof *c->segcuts);
        c->segcut_tried = calloc(g->n_segments, 1);
        c->near_base = calloc(2 * (size_t)g->t.n_states, sizeof *c->near_base);
        if (!c->segcuts || !c->segcut_tried || !c->near_base) {
            free(c->segcuts);
            free(c->segcut_tried);
            free((void *)c->near_base);
            c->segcuts = NULL;
            c->segcut_tried = NULL;
            c->near_base = NULL;
            return CM_ERR_NOMEM;
        }
        c->n_segcuts = g->n_segments;
    }
    if (!c->segcut_tried[sid]) {
        const cm_seg_raw r = {g->t.n_states, g->t.n_classes, g->n_segments, g->t.byte_class,
                              g->t.trans,    g->edge_flags,  g->state_seg,  g->seg_head};
        int rc = cm_segcut_new_raw(&r, sid, g->v, &c->segcuts[sid]);
        if (rc == CM_ERR_NOMEM) return rc;
        c->segcut_tried[sid] = 1;
    }
    *out = c->segcuts[sid];
    return CM_OK;
}

/* A base the near entries of a state cannot take (cm_seg_near_base declined). */
static const cm_entry g_near_declined;

/* The near entries' base of `state`: cm_seg_near_base's walk with its EXITs open or dead, built
 * once and interned (it reads no count); &g_near_declined where that declines.
 * An entry past the cache's memory limit comes back in *owned.  Under the cache lock. */
static const cm_entry *near_base(const cm_grammar *g, uint32_t state, bool exits_open, cm_entry **owned, int *rc) {
    cm_cache *c = g->cache;
    const cm_entry **slot = &c->near_base[2 * (size_t)state + !exits_open];
    *owned = NULL;
    if (*slot) return *slot;
    cm_walk bw;
    cm_entry *e = calloc(1, sizeof *e), *shared;
    *rc = cm_walk_init(&bw, g);
    if (!*rc && !e) *rc = CM_ERR_NOMEM;
    int done = *rc ? 0 : cm_seg_near_base(g, state, exits_open, &bw);
    if (done < 0) *rc = done;
    if (!*rc && done) *rc = cm_walk_finish(g, &bw, e);
    cm_walk_free(&bw);
    if (*rc || !done) {
        cm_entry_free(e);
        if (!*rc) *slot = &g_near_declined;
        return *rc ? NULL : *slot;
    }
    if (atomic_load(&c->bytes) + e->bytes > g->lim.max_cache_bytes || !(shared = entry_intern(g, e))) {
        *owned = e;
        return e;
    }
    if (shared == e) atomic_fetch_add(&c->bytes, e->bytes);
    return *slot = shared;
}

/* A near pair's walk (need < L or budget < L) at count k: the base entry less the cut of (need,
 * budget), segcut.c's per-token unit counts: a token that stays must read at most budget units
 * (a partial one counting one), one that leaves between need and budget before its EXIT byte
 * (the rest of it after the EXIT was walked afresh by the base, as a real chart enters its
 * target).  With need = L no token reaches an EXIT's guard open: the base with its EXITs dead.
 * Then the subtrees the base leaves out, those that go on from its loop into the unit's other
 * states, through counted charts at the counts they reach there (cm_seg_near_inner: exact, the
 * cut would take none of them).  Only EXIT edges leave the segment and only the guards read
 * counts: declined (0) where the head accepts (the rule's completion reads k + j >= lo) and
 * inside a unit at budget 0 (count hi: no item gets there, and the plain walk reads no guard
 * for the unit begun). */
static int seg_near(const cm_grammar *g, uint32_t state, uint32_t k, uint32_t need, uint32_t budget, cm_walk *w) {
    uint32_t sid = g->state_seg[state], head = g->seg_head[sid], L = g->v->max_len;
    if (g->t.accepting[head] || (state != head && !budget)) return 0;
    cm_segcut *cut;
    int rc = seg_cut(g, sid, &cut);
    if (rc || !cut) return rc;
    cm_entry *owned;
    const cm_entry *base = near_base(g, state, need < L, &owned, &rc);
    if (rc || base == &g_near_declined) return rc;
    size_t nw = (g->v->n_tokens + 31) / 32;
    cm_or_accepted(g, w->bits, base, NULL);
    rc = cm_segcut_apply(cut, state, need, budget, w->bits, nw);
    w->n_accepted = (uint32_t)cm_count_bits(w->bits, nw);
    if (!rc && base->n_uncertain) {
        size_t n = base->n_uncertain;
        uint32_t *unc = malloc(n * sizeof *unc);
        if (!unc) rc = CM_ERR_NOMEM;
        if (!rc) memcpy(unc, base->uncertain, n * sizeof *unc);
        if (!rc) rc = cm_segcut_keep(cut, state, need, budget, g->v->trie_ids, unc, &n);
        for (size_t i = 0; !rc && i < n; i++) rc = cm_walk_push_uncertain(w, unc[i]);
        free(unc);
    }
    cm_entry_free(owned);
    if (!rc) {  /* the base's exits into the unit's states outside its loop, at their counts */
        int done = cm_seg_near_inner(g, state, k, w);
        rc = done < 0 ? done : done ? CM_OK : CM_ERR_STATE;  /* the base's loop, found again */
    }
    if (!rc) atomic_fetch_add_explicit(&g_seg_near_builds, 1, memory_order_relaxed);
    return rc ? rc : 1;
}

/* A segment grammar's walk of `state` at count k: a far pair's (no token reaches a bound) from
 * the loop's shared walk (loops.c, cm_seg_far_entry), a near pair's from the far one less the
 * bounds' cut (seg_near), else the plain walk. */
static int seg_walk(const cm_grammar *g, uint32_t state, uint32_t k, cm_walk *w) {
    uint32_t sid = g->state_seg[state];
    if (sid != CM_SEG_NONE && atomic_load_explicit(&g_seg_far, memory_order_relaxed)) {
        uint32_t lo = g->seg_lo[sid], hi = g->seg_hi[sid], L = g->v->max_len;
        bool budget_far = hi >= k && hi - k >= L, need_far = lo >= k && lo - k >= L;
        int done = 0;
        if (budget_far && (need_far || k >= lo)) {
            done = cm_seg_far_entry(g, state, k, !need_far, w);
            if (done > 0) atomic_fetch_add_explicit(&g_seg_far_builds, 1, memory_order_relaxed);
        } else if (atomic_load_explicit(&g_seg_near, memory_order_relaxed)) {
            uint32_t need, budget;
            seg_key(g, state, k, &need, &budget);
            done = seg_near(g, state, k, need, budget, w);
        }
        if (done) return done < 0 ? done : CM_OK;
    }
    return plain_walk(g, state, k, w);
}

static atomic_int g_seg_ladder = 1;
static atomic_size_t g_seg_ladder_builds[2];

void cm_seg_ladder_enable(int on) { atomic_store(&g_seg_ladder, on); }
void cm_seg_ladder_builds(size_t *donated, size_t *looped) {
    *donated = atomic_load(&g_seg_ladder_builds[0]);
    *looped = atomic_load(&g_seg_ladder_builds[1]);
}

static atomic_int g_seg_chain = 1;
static atomic_size_t g_seg_chain_builds;

void cm_seg_chain_enable(int on) { atomic_store(&g_seg_chain, on); }
size_t cm_seg_chain_builds(void) { return atomic_load(&g_seg_chain_builds); }

/* A segment grammar's walk of a state outside segments: the rungs that read no count (a donor
 * outside segments, its parts walked through the counted chart; the shared walk of a loop
 * outside segments, its exits through the counted chart; the DFA walk of the plain states
 * outside segments a state in no such loop leads through, its exits the same), else the plain
 * walk. */
static int seg_outside_walk(const cm_grammar *g, uint32_t state, cm_walk *w) {
    if (atomic_load_explicit(&g_seg_ladder, memory_order_relaxed)) {
        int done = try_donor(g, state, w), rung = 0;
        if (!done && g->solo[state]) done = cm_seg_loop_entry(g, state, w), rung = 1;
        if (done > 0) atomic_fetch_add_explicit(&g_seg_ladder_builds[rung], 1, memory_order_relaxed);
        if (!done && g->solo[state] && atomic_load_explicit(&g_seg_chain, memory_order_relaxed)) {
            done = cm_seg_chain_entry(g, state, w);
            if (done > 0) atomic_fetch_add_explicit(&g_seg_chain_builds, 1, memory_order_relaxed);
        }
        if (done) return done < 0 ? done : CM_OK;
    }
    return plain_walk(g, state, CM_SEG_NONE, w);
}

/* The walk of `state`'s entry, by the first rung that applies. */
static int build_walk(const cm_grammar *g, uint32_t state, cm_walk *w) {
    if (g->has_segments) return plain_walk(g, state, CM_SEG_NONE, w);
    int done = try_compose(g, state, w);
    if (!done) done = try_donor(g, state, w);
    /* a name whose whole run walk another state made already (before a loop entry walks it again) */
    if (!done) done = cm_run_entry_stored(g, state, w);
    if (!done && g->lim.share_loop_walks && g->solo[state]) done = cm_loop_entry(g, state, w);
    if (!done) done = cm_compose_edges(g, state, w);
    if (!done) done = cm_run_entry(g, state, w);
    if (!done && g->lim.flat_walks) done = cm_literal_entry(g, state, w);
    if (done) return done < 0 ? done : CM_OK;
    /* the whole walk of (state, OUTER): its scans of the tokens it leaves uncertain are the
     * filter's (build_entry_k) */
    w->noting = cm_scan_notes_on();
    int rc = cm_flat_walk(g, state, g->t.state_rule[state], 0, g->v->n_trie, 0, w);
    w->noting = false;
    return rc;
}

/* How many entry builds took a spare bitset (zeroed by the last sparse build), in this
 * process: for the tests. */
static atomic_size_t g_spare_takes;

size_t cm_entry_spare_takes(void) { return atomic_load(&g_spare_takes); }

/* Under the cache lock.  Most entries accept fewer tokens than the bitset has words and are
 * kept as ids: their walk's bitset, zeroed again as the ids are taken out, serves the next
 * build instead of a 16 KB calloc and free per entry (a JSON Schema's first document builds
 * ~35 entries). */
static cm_entry *build_entry_k(const cm_grammar *g, uint32_t state, uint32_t k, int *status) {
    cm_cache *c = g->cache;
    cm_walk w;
    uint32_t *spare = c->n_spare ? c->spare_bits[--c->n_spare] : NULL;
    if (spare) atomic_fetch_add_explicit(&g_spare_takes, 1, memory_order_relaxed);
    int rc = cm_walk_init_spare(&w, g, spare);
    cm_entry *e = calloc(1, sizeof *e);
    if (!rc && !e) rc = CM_ERR_NOMEM;
    /* a segment grammar: the plain walk, kept as it is (the filter's upward charts and the
     * wrap split read no counts) */
    bool seg = g->has_segments;
    if (!rc && seg) rc = g->state_seg[state] == CM_SEG_NONE ? seg_outside_walk(g, state, &w) : seg_walk(g, state, k, &w);
    else if (!rc) rc = build_walk(g, state, &w);
    if (!rc && !seg && !w.filtered && w.n_unc && w.n_unc <= CM_FILTER_MAX_UNCERTAIN && g->lim.filter_uncertain)
        cm_walk_filter_uncertain(g, state, &w);
    if (!rc) rc = cm_walk_finish(g, &w, e);
    if (!rc && !seg && cm_wrap_applies(g, state, e->n_uncertain)) rc = cm_wrap_split(g, state, e);
    if (w.bits && w.bits_zero && c->n_spare < CM_SPARE_BITS) {
        c->spare_bits[c->n_spare++] = w.bits;
        w.bits = NULL;
    }
    cm_walk_free(&w);
    if (rc) {
        *status = rc;
        cm_entry_free(e);
        return NULL;
    }
    return e;
}

static cm_entry *build_entry(const cm_grammar *g, uint32_t state, int *status) {
    return build_entry_k(g, state, CM_SEG_NONE, status);
}

/* The entry of `state`, built if need be; under the cache lock. */
static const cm_entry *entry_locked(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status) {
    cm_cache *c = g->cache;
    *owned = NULL;
    cm_entry *e = atomic_load_explicit(&c->slots[state], memory_order_acquire);
    if (e) return e;
    const cm_entry *same = g->solo[state] ? cm_repeat_take(g, state) : NULL;  /* repeat.c */
    if (same) {
        atomic_fetch_add(&c->n_cached, 1);
        atomic_store_explicit(&c->slots[state], (cm_entry *)same, memory_order_release);
        return same;
    }
    e = build_entry(g, state, status);
    cm_entry *shared;
    if (!e) return NULL;
    if (atomic_load(&c->bytes) + e->bytes > g->lim.max_cache_bytes || !(shared = entry_intern(g, e))) {
        *owned = e;
        return e;
    }
    if (shared == e) atomic_fetch_add(&c->bytes, e->bytes);
    atomic_fetch_add(&c->n_cached, 1);
    atomic_store_explicit(&c->slots[state], shared, memory_order_release);
    if (g->solo[state]) cm_repeat_note(g, state, shared);
    return shared;
}

const cm_entry *cm_grammar_entry(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status) {
    cm_cache *c = g->cache;
    *owned = NULL;
    *status = CM_OK;
    cm_entry *e = atomic_load_explicit(&c->slots[state], memory_order_acquire);
    if (e) return e;
    pthread_mutex_lock(&c->lock);
    const cm_entry *r = entry_locked(g, state, owned, status);
    pthread_mutex_unlock(&c->lock);
    return r;
}

/* ---- the entries a mask's gather reads: promoted at their fourth use (promote.c) ---- */

/* Under the cache lock: `plain`'s tokens every caller reads on moved to its accepted set, a new
 * interned entry (the plain one is shared and stays as it is: compose's parts, other matchers and
 * the tests read it); `plain` itself where nothing moved or anything failed.  Built from the plain
 * entry, not from a walk: its uncertain list is the filter's output in trie order, what the
 * promotion reads, and its answers are memo-free where they lean on open questions, so the copy
 * does not depend on which entries were built or promoted before. */
static const cm_entry *promote_entry(const cm_grammar *g, uint32_t state, const cm_entry *plain) {
    cm_cache *c = g->cache;
    cm_walk w;
    uint32_t *spare = c->n_spare ? c->spare_bits[--c->n_spare] : NULL;
    int rc = cm_walk_init_spare(&w, g, spare);
    size_t n = plain->n_uncertain;
    cm_entry *e = NULL;
    if (!rc && !(w.unc = malloc(n * sizeof *w.unc))) rc = CM_ERR_NOMEM;
    if (!rc) {
        cm_or_accepted(g, w.bits, plain, NULL);
        w.n_accepted = plain->n_accepted;
        memcpy(w.names, plain->names, sizeof w.names);
        memcpy(w.unc, plain->uncertain, n * sizeof *w.unc);
        w.n_unc = w.cap_unc = n;
        if (!cm_promote_take(g, state, &w)) rc = 1; /* nothing moved */
    }
    if (!rc && !(e = calloc(1, sizeof *e))) rc = CM_ERR_NOMEM;
    if (!rc) rc = cm_walk_finish(g, &w, e);
    if (!rc && cm_wrap_applies(g, state, e->n_uncertain)) rc = cm_wrap_split(g, state, e);
    if (!w.bits_zero && w.bits) memset(w.bits, 0, g->n_words * sizeof *w.bits), w.bits_zero = true;
    if (w.bits && c->n_spare < CM_SPARE_BITS) {
        c->spare_bits[c->n_spare++] = w.bits;
        w.bits = NULL;
    }
    cm_walk_free(&w);
    cm_entry *shared;
    if (rc || atomic_load(&c->bytes) + e->bytes > g->lim.max_cache_bytes || !(shared = entry_intern(g, e))) {
        cm_entry_free(e);
        return plain;
    }
    if (shared == e) atomic_fetch_add(&c->bytes, e->bytes);
    return shared;
}

static atomic_uint g_promote_uses = 4;

unsigned cm_promote_uses(unsigned n) { return atomic_exchange(&g_promote_uses, n < 1 ? 1 : n > 255 ? 255 : n); }

/* The entry of `state` as a mask's gather reads it: the plain one until its uses reach
 * g_promote_uses (4), then its promoted copy (the first builds, where JSON Schema's block rules ask
 * deep questions once, pay nothing; c's statement starts, read dozens of times, pay once).  At 2,
 * sp_4's block entries are read twice and pay 11 M; at 4 nothing of the JSON Schema first
 * documents rises in sum (-0.3 %) and c.gbnf keeps -14 % of c44's -19 %; at 8 c keeps -11 %.
 * From that use on, each use asks a piece of the state's tokens (cm_promote_step: a mask's
 * pieces together bounded), reading the plain entry until the last piece, which publishes the
 * copy (whole: the same copy however the work was cut); a copy that would move nothing is not
 * made. */
const cm_entry *cm_grammar_fill_entry(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status) {
    cm_cache *c = g->cache;
    const cm_entry *p = atomic_load_explicit(&c->fill_slots[state], memory_order_acquire);
    if (p) {
        *owned = NULL;
        *status = CM_OK;
        return p;
    }
    const cm_entry *e = cm_grammar_entry(g, state, owned, status);
    if (!e || *owned || !e->n_uncertain || e->n_uncertain > CM_FILTER_MAX_UNCERTAIN || !cm_promote_applies(g))
        return e;
    unsigned need = atomic_load_explicit(&g_promote_uses, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&c->uses[state], 1, memory_order_relaxed) + 1u < need) return e;
    pthread_mutex_lock(&c->lock);
    p = atomic_load_explicit(&c->fill_slots[state], memory_order_acquire);
    if (!p) {
        int done = cm_promote_step(g, state, e->uncertain, e->n_uncertain);
        if (done) {
            p = done > 0 && cm_promote_any(g, state) ? promote_entry(g, state, e) : e;
            atomic_store_explicit(&c->fill_slots[state], p, memory_order_release);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return p ? p : e;
}

/* ---- a segment grammar's entries of segment states, keyed by the clipped pair ---- */

typedef struct cm_seg_slot {
    uint32_t state, need, budget; /* state UINT32_MAX: empty */
    cm_entry *e;                  /* the interned entry (the cache's entries own it) */
} cm_seg_slot;

static atomic_size_t g_seg_builds, g_seg_hits;

size_t cm_seg_entry_builds(void) { return atomic_load(&g_seg_builds); }
size_t cm_seg_entry_hits(void) { return atomic_load(&g_seg_hits); }

static void seg_key(const cm_grammar *g, uint32_t state, uint32_t k, uint32_t *need, uint32_t *budget) {
    uint32_t sid = g->state_seg[state], lo = g->seg_lo[sid], hi = g->seg_hi[sid], L = g->v->max_len;
    *need = lo > k ? (lo - k < L ? lo - k : L) : 0;
    *budget = hi > k ? (hi - k < L ? hi - k : L) : 0;  /* k <= hi: INTO guards every BACK */
}

static size_t seg_hash(uint32_t state, uint32_t need, uint32_t budget, size_t mask) {
    uint64_t h = ((uint64_t)state << 32) ^ ((uint64_t)need << 16) ^ budget;
    return cm_hslot(h, mask);
}

/* The slot of the key, or the empty slot where it goes; under lock, seg_cap > 0. */
static cm_seg_slot *seg_find(const cm_cache *c, uint32_t state, uint32_t need, uint32_t budget) {
    size_t mask = c->seg_cap - 1, s = seg_hash(state, need, budget, mask);
    while (c->seg_slots[s].state != UINT32_MAX &&
           (c->seg_slots[s].state != state || c->seg_slots[s].need != need || c->seg_slots[s].budget != budget))
        s = (s + 1) & mask;
    return &c->seg_slots[s];
}

/* Room for one more key: 0 or CM_ERR_NOMEM; under lock. */
static int seg_grow(cm_cache *c) {
    if (c->seg_cap && (c->seg_used + 1) * 2 <= c->seg_cap) return CM_OK;
    size_t cap = c->seg_cap ? c->seg_cap * 2 : 64;
    cm_seg_slot *old = c->seg_slots, *t = malloc(cap * sizeof *t);
    if (!t) return CM_ERR_NOMEM;
    for (size_t i = 0; i < cap; i++) t[i].state = UINT32_MAX;
    size_t old_cap = c->seg_cap;
    c->seg_slots = t;
    c->seg_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].state != UINT32_MAX) *seg_find(c, old[i].state, old[i].need, old[i].budget) = old[i];
    free(old);
    return CM_OK;
}

const cm_entry *cm_grammar_seg_entry(const cm_grammar *g, uint32_t state, uint32_t k, cm_entry **owned, int *status) {
    if (g->state_seg[state] == CM_SEG_NONE) return cm_grammar_entry(g, state, owned, status);
    cm_cache *c = g->cache;
    uint32_t need, budget;
    seg_key(g, state, k, &need, &budget);
    *owned = NULL;
    *status = CM_OK;
    pthread_mutex_lock(&c->lock);
    if (c->seg_cap) {
        cm_seg_slot *sl = seg_find(c, state, need, budget);
        if (sl->state != UINT32_MAX) {
            cm_entry *e = sl->e;
            pthread_mutex_unlock(&c->lock);
            atomic_fetch_add_explicit(&g_seg_hits, 1, memory_order_relaxed);
            return e;
        }
    }
    cm_entry *e = build_entry_k(g, state, k, status), *shared = NULL;
    if (e) {
        atomic_fetch_add_explicit(&g_seg_builds, 1, memory_order_relaxed);
        if (atomic_load(&c->bytes) + e->bytes > g->lim.max_cache_bytes || seg_grow(c) || !(shared = entry_intern(g, e))) {
            *owned = e;
        } else {
            if (shared == e) atomic_fetch_add(&c->bytes, e->bytes);
            cm_seg_slot *sl = seg_find(c, state, need, budget);
            *sl = (cm_seg_slot){state, need, budget, shared};
            c->seg_used++;
            e = shared;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

bool cm_grammar_seg_peek(const cm_grammar *g, uint32_t state, uint32_t k) {
    if (g->state_seg[state] == CM_SEG_NONE) return cm_cache_peek(g, state) != NULL;
    cm_cache *c = g->cache;
    uint32_t need, budget;
    seg_key(g, state, k, &need, &budget);
    pthread_mutex_lock(&c->lock);
    bool found = c->seg_cap && seg_find(c, state, need, budget)->state != UINT32_MAX;
    pthread_mutex_unlock(&c->lock);
    return found;
}

/* ---- the public face ---- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cm_grammar_warm(const cm_grammar *g, double deadline) {
    if (!g || g->has_segments) return CM_ERR_ARG; /* entries read no counts yet (step (c)) */
    for (uint32_t s = 0; s < g->t.n_states; s++) {
        if (!g->has_bytes[s] && g->t.ref_off[s] == g->t.ref_off[s + 1]) continue;  /* see mask.c, looked_up */
        if (deadline > 0 && now_seconds() > deadline) return CM_ERR_TIMEOUT;
        cm_entry *owned;
        int rc;
        cm_grammar_entry(g, s, &owned, &rc);
        if (owned) cm_entry_free(owned);
        if (rc) return rc;
    }
    return CM_OK;
}

size_t cm_grammar_cache_bytes(const cm_grammar *g) { return g ? atomic_load(&g->cache->bytes) : 0; }
size_t cm_grammar_cache_entries(const cm_grammar *g) { return g ? atomic_load(&g->cache->n_cached) : 0; }

void cm_grammar_build_stats(const cm_grammar *g, size_t *composed, size_t *donated, size_t *flat_configs,
                            size_t *vocab_loops) {
    cm_cache *c = g->cache;
    pthread_mutex_lock(&c->lock);
    *vocab_loops = atomic_load(&c->loops_from_vocab);
    *composed = atomic_load(&c->composed);
    *donated = atomic_load(&c->donated);
    *flat_configs = cm_flat_configs(c->flat);
    pthread_mutex_unlock(&c->lock);
}

void cm_grammar_tail_stats(const cm_grammar *g, size_t *walks, size_t *uses) {
    *walks = atomic_load(&g->cache->tail_walks);
    *uses = atomic_load(&g->cache->tail_uses);
}

void cm_grammar_run_stats(const cm_grammar *g, size_t *walked, size_t *from_vocab) {
    *walked = atomic_load(&g->cache->run_walks);
    *from_vocab = atomic_load(&g->cache->runs_from_vocab);
}

/* An entry copied out (words zeroed first, then its accepted tokens; its uncertain ids). */
static int copy_out(const cm_grammar *g, const cm_entry *e, cm_entry *owned, int rc, uint32_t *words, uint32_t *unc,
                    size_t *n_unc) {
    if (rc) return rc;
    memset(words, 0, g->n_words * sizeof *words);
    cm_or_accepted(g, words, e, NULL);
    for (uint32_t i = 0; i < e->n_uncertain; i++) unc[i] = g->v->trie_ids[e->uncertain[i]];
    *n_unc = e->n_uncertain;
    cm_entry_free(owned);
    return CM_OK;
}

/* The plain entry (cm_grammar_entry) or the one a mask's gather reads (cm_grammar_fill_entry). */
static int entry_copy(const cm_grammar *g, uint32_t state, bool fill, uint32_t *words, uint32_t *unc, size_t *n_unc) {
    if (!g || !words || !unc || !n_unc || state >= g->t.n_states || g->has_segments) return CM_ERR_ARG;
    cm_entry *owned;
    int rc;
    const cm_entry *e = (fill ? cm_grammar_fill_entry : cm_grammar_entry)(g, state, &owned, &rc);
    return copy_out(g, e, owned, rc, words, unc, n_unc);
}

int cm_grammar_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc) {
    return entry_copy(g, state, false, words, unc, n_unc);
}

int cm_grammar_fill_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc) {
    cm_promote_fill_begin();  /* a use as one mask's */
    return entry_copy(g, state, true, words, unc, n_unc);
}

int cm_grammar_seg_entry_copy(const cm_grammar *g, uint32_t state, uint32_t k, uint32_t *words, uint32_t *unc,
                              size_t *n_unc) {
    if (!g || !words || !unc || !n_unc || state >= g->t.n_states || !g->has_segments) return CM_ERR_ARG;
    uint32_t sid = g->state_seg[state];
    if (sid != CM_SEG_NONE && k > g->seg_hi[sid]) return CM_ERR_ARG;
    cm_entry *owned;
    int rc;
    const cm_entry *e = cm_grammar_seg_entry(g, state, k, &owned, &rc);
    return copy_out(g, e, owned, rc, words, unc, n_unc);
}
