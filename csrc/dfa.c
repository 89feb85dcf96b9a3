/* Operations on finished DFAs (cm_dfa_out): allocation, label compaction, and the
 * trimming of dead and unreachable states (automata._trim_all). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fsm.h"
#include "internal.h"

static size_t dfa_size(uint32_t n_states, uint32_t n_classes, size_t n_lab) {
    return sizeof(cm_dfa_out) + (size_t)n_states * n_classes * sizeof(int32_t) + n_states
           + ((size_t)n_states + 1) * sizeof(uint32_t) + 2 * n_lab * sizeof(uint32_t);
}

size_t cm_dfa_bytes(const cm_dfa_out *d) { return dfa_size(d->n_states, d->n_classes, d->lab_off[d->n_states]); }

void cm_dfa_out_free(cm_dfa_out *d) {
    if (!d) return;
    free(d->trans);
    free(d->accepting);
    free(d->lab);
    free(d->lab_to);
    free(d->lab_off);
    free(d->runs);
    free(d);
}

cm_dfa_runs *cm_dfa_runs_alloc(uint32_t n_states, size_t n_runs) {
    size_t head = sizeof(cm_dfa_runs), offs = ((size_t)n_states + 1) * sizeof(uint32_t);
    cm_dfa_runs *r = malloc(head + offs + n_runs * (sizeof(uint32_t) + sizeof(uint16_t)) + 1);
    if (!r) return NULL;
    r->off = (uint32_t *)(void *)(r + 1);
    r->to = r->off + n_states + 1;
    r->rng = (uint16_t *)(void *)(r->to + n_runs);
    return r;
}

static atomic_size_t g_runs_reused;

size_t cm_dfa_runs_reused(void) { return atomic_load_explicit(&g_runs_reused, memory_order_relaxed); }

const cm_dfa_runs *cm_dfa_runs_of(const cm_dfa_out *d) {
    cm_dfa_runs *r = atomic_load_explicit((_Atomic(cm_dfa_runs *) *)&((cm_dfa_out *)d)->runs, memory_order_acquire);
    if (r) atomic_fetch_add_explicit(&g_runs_reused, 1, memory_order_relaxed);
    return r;
}

/* Append the runs of row (nc classes) to (rng, to) from *k on (room for nc more), no run for
 * "no edge": from its run starts (cm_run_starts, one pass) where nc <= 64, else cm_run_end. */
static void row_runs(const cm_dfa_out *d, const int32_t *row, uint32_t nc, uint16_t *rng, uint32_t *to, size_t *k) {
    if (nc && nc <= 64) {
        uint64_t st = cm_run_starts(row, nc);
        while (st) {
            uint32_t c = (uint32_t)__builtin_ctzll(st);
            st &= st - 1;
            uint32_t c1 = st ? (uint32_t)__builtin_ctzll(st) : nc;
            if (row[c] < 0) continue;
            rng[*k] = (uint16_t)(d->class_lo[c] | (d->class_lo[c1] - 1u) << 8), to[(*k)++] = (uint32_t)row[c];
        }
        return;
    }
    for (uint32_t c = 0, c1; c < nc; c = c1) {
        c1 = cm_run_end(row, c, nc);
        if (row[c] < 0) continue;
        rng[*k] = (uint16_t)(d->class_lo[c] | (d->class_lo[c1] - 1u) << 8), to[(*k)++] = (uint32_t)row[c];
    }
}

/* d's runs, made from its rows (NULL: out of memory): one pass into scratch that grows (a row
 * has at most nc runs), then copied into one allocation of their size, where counting them
 * first walked every row twice. */
static cm_dfa_runs *make_runs(const cm_dfa_out *d) {
    uint32_t n = d->n_states, nc = d->n_classes;
    size_t cap = 2 * (size_t)n + nc + 1, k = 0;
    uint32_t *off = malloc(((size_t)n + 1) * sizeof *off), *to = malloc(cap * sizeof *to);
    uint16_t *rng = malloc(cap * sizeof *rng);
    bool ok = off && to && rng;
    for (uint32_t s = 0; ok && s < n; s++) {
        if (k + nc > cap) { /* room for this row's runs */
            cap = 2 * cap + nc;
            uint32_t *t2 = realloc(to, cap * sizeof *to);
            if (t2) to = t2;
            uint16_t *r2 = t2 ? realloc(rng, cap * sizeof *rng) : NULL;
            if (r2) rng = r2;
            ok = t2 && r2;
            if (!ok) break;
        }
        off[s] = (uint32_t)k;
        row_runs(d, d->trans + (size_t)s * nc, nc, rng, to, &k);
    }
    cm_dfa_runs *r = ok ? cm_dfa_runs_alloc(n, k) : NULL;
    if (r) {
        memcpy(r->off, off, (size_t)n * sizeof *off);
        r->off[n] = (uint32_t)k;
        if (k) memcpy(r->to, to, k * sizeof *to), memcpy(r->rng, rng, k * sizeof *rng);
    }
    free(off), free(to), free(rng);
    return r;
}

int cm_dfa_keep_runs(const cm_dfa_out *d) {
    if (!d) return CM_ERR_ARG;
    if (atomic_load_explicit((_Atomic(cm_dfa_runs *) *)&((cm_dfa_out *)d)->runs, memory_order_acquire)) return CM_OK;
    cm_dfa_runs *r = make_runs(d);
    if (!r) return CM_ERR_NOMEM;
    cm_dfa_runs_keep(d, r);
    return CM_OK;
}

static int g_dfa_runs = 1;

void cm_dfa_runs_enable(int on) { g_dfa_runs = on; }

bool cm_dfa_runs_on(void) { return g_dfa_runs; }

const cm_dfa_runs *cm_dfa_runs_for_copy(const cm_dfa_out *d, cm_dfa_runs **own) {
    *own = NULL;
    if (!g_dfa_runs) return *own = make_runs(d);
    const cm_dfa_runs *r = cm_dfa_runs_of(d);
    if (r || cm_dfa_keep_runs(d)) return r;
    return atomic_load_explicit((_Atomic(cm_dfa_runs *) *)&((cm_dfa_out *)d)->runs, memory_order_acquire);
}

/* As tokclass.c's cm_tokclass_of: a DFA shared between compiles (a cached component's) may be
 * copied by several threads at once; the first runs published are kept. */
void cm_dfa_runs_keep(const cm_dfa_out *d, cm_dfa_runs *made) {
    _Atomic(cm_dfa_runs *) *slot = (_Atomic(cm_dfa_runs *) *)&((cm_dfa_out *)d)->runs;
    cm_dfa_runs *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(slot, &none, made, memory_order_acq_rel, memory_order_acquire))
        free(made); /* another thread kept its own first */
}

int cm_dfa_alloc(cm_budget *b, uint32_t n_states, uint32_t n_classes, size_t n_lab, cm_dfa_out **out) {
    *out = NULL;
    int rc = cm_budget_charge(b, dfa_size(n_states, n_classes, n_lab));
    if (rc) return rc;
    cm_dfa_out *d = calloc(1, sizeof *d);
    if (d) {
        d->n_states = n_states;
        d->n_classes = n_classes;
        d->trans = malloc(((size_t)n_states * n_classes + 1) * sizeof *d->trans);
        d->accepting = malloc((size_t)n_states + 1);
        d->lab_off = malloc(((size_t)n_states + 1) * sizeof *d->lab_off);
        d->lab = malloc((n_lab + 1) * sizeof *d->lab);
        d->lab_to = malloc((n_lab + 1) * sizeof *d->lab_to);
    }
    if (!d || !d->trans || !d->accepting || !d->lab_off || !d->lab || !d->lab_to) {
        cm_dfa_out_free(d);
        cm_budget_release(b, dfa_size(n_states, n_classes, n_lab));
        return CM_ERR_NOMEM;
    }
    *out = d;
    return CM_OK;
}

void cm_dfa_release(cm_budget *b, cm_dfa_out *d) {
    if (!d) return;
    cm_budget_release(b, cm_dfa_bytes(d));
    cm_dfa_out_free(d);
}

/* Renumber d's labels to 0..n-1 in increasing order of their values; used[] (room for
 * d->lab_off[n_states] entries) receives the distinct old values, ascending. */
int cm_dfa_compact_labels(cm_dfa_out *d, uint32_t *used, uint32_t *n_used) {
    size_t m = d->lab_off[d->n_states];
    *n_used = 0;
    if (!m) return CM_OK;
    memcpy(used, d->lab, m * sizeof *used);
    size_t k = cm_sort_unique_u32(used, m);
    for (size_t i = 0; i < m; i++) d->lab[i] = cm_rank_u32(used, k, d->lab[i]);
    *n_used = (uint32_t)k;
    return CM_OK;
}

/* ---- trimming (automata._trim_all) --------------------------------------- */

/* WALK_STARTS: push_successors finds a row of at most 64 classes' runs from its run starts
 * (cm_run_starts: one pass, 16 classes a movemask) where it set up a cm_run_end scan at every
 * run (a string's row: ~40 runs; cm_dfa_can_accept's full walks of a rule not yet productive
 * read every reachable row, ~8,000 instructions a walk).  The same runs in the same order, so
 * the same pushes (switch off: cm_run_end, the reference the tests compare against). */
static int g_walk_starts = 1;
static size_t g_walk_starts_rows;

void cm_dfa_walk_starts_enable(int on) { g_walk_starts = on; }
size_t cm_dfa_walk_starts_rows(void) { return g_walk_starts_rows; }
bool cm_dfa_walk_starts_on(void) { return g_walk_starts; }

/* Push the unmarked successors of s (byte edges, label edges with label_ok) that
 * `allowed` admits (NULL: all) onto stack, marking them in seen. */
static int push_successors(const cm_dfa_out *d, const uint8_t *label_ok, uint32_t s, const uint8_t *allowed,
                           uint8_t *seen, cm_vec32 *stack) {
    uint32_t nc = d->n_classes;
    const int32_t *row = d->trans + (size_t)s * nc;
    int rc = CM_OK;
    if (g_walk_starts && nc && nc <= 64) { /* (WALK_STARTS) */
        g_walk_starts_rows++;
        for (uint64_t st = cm_run_starts(row, nc); !rc && st; st &= st - 1) {
            int32_t t = row[__builtin_ctzll(st)];
            if (t >= 0 && (!allowed || allowed[t]) && !seen[t]) {
                seen[t] = 1;
                rc = cm_vec_push(stack, (uint32_t)t);
            }
        }
    } else
        for (uint32_t c = 0; !rc && c < nc; c = cm_run_end(row, c, nc)) { /* a run: one target */
            int32_t t = row[c];
            if (t >= 0 && (!allowed || allowed[t]) && !seen[t]) {
                seen[t] = 1;
                rc = cm_vec_push(stack, (uint32_t)t);
            }
        }
    for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++) {
        uint32_t t = d->lab_to[e];
        if (label_ok[d->lab[e]] && (!allowed || allowed[t]) && !seen[t]) {
            seen[t] = 1;
            rc = cm_vec_push(stack, t);
        }
    }
    return rc;
}

/* Does a path of edges to higher-numbered states (byte edges, label edges with label_ok) lead
 * from the start to an accepting state, taking the first such edge at each state?  Subset
 * construction numbers states as it finds them, so most DFAs accept this way: no allocation
 * and a few rows read, where the depth-first walk marked and stacked its way there. */
static bool accepts_upward(const cm_dfa_out *d, const uint8_t *label_ok) {
    uint32_t n = d->n_states, nc = d->n_classes, s = 0;
    while (s < n) {
        if (d->accepting[s]) return true;
        const int32_t *row = d->trans + (size_t)s * nc;
        uint32_t next = s;
        for (uint32_t c = 0; next == s && c < nc; c = cm_run_end(row, c, nc))
            if (row[c] > (int32_t)s && row[c] < (int32_t)n) next = (uint32_t)row[c];
        for (uint32_t e = d->lab_off[s]; next == s && e < d->lab_off[s + 1]; e++)
            if (label_ok[d->lab[e]] && d->lab_to[e] > s && d->lab_to[e] < n) next = d->lab_to[e];
        if (next == s) return false;
        s = next;
    }
    return false;
}

/* Is every label edge of d productive (label_ok)?  Reads the labels only, not the rows. */
static bool all_labels_ok(const cm_dfa_out *d, const uint8_t *label_ok) {
    for (uint32_t e = 0; e < d->lab_off[d->n_states]; e++)
        if (!label_ok[d->lab[e]]) return false;
    return true;
}

int cm_dfa_can_accept(const cm_dfa_out *d, const uint8_t *label_ok, int *result) {
    if ((d->live && d->n_states && all_labels_ok(d, label_ok)) || accepts_upward(d, label_ok)) {
        *result = 1;
        return CM_OK;
    }
    uint8_t *seen = calloc((size_t)d->n_states + 1, 1);
    cm_vec32 stack = {0};
    int rc = seen ? cm_vec_push(&stack, 0) : CM_ERR_NOMEM;
    *result = 0;
    if (!rc) seen[0] = 1;
    while (!rc && stack.n) {
        uint32_t s = stack.data[--stack.n];
        if (d->accepting[s]) {
            *result = 1;
            break;
        }
        rc = push_successors(d, label_ok, s, NULL, seen, &stack);
    }
    free(seen);
    cm_vec_free(&stack);
    return rc;
}

/* The next successor of s from *cur on (byte runs: cur < n_classes; then label edges with
 * label_ok: n_classes + e), *cur moved past it; -1 when none is left. */
static int64_t next_successor(const cm_dfa_out *d, const uint8_t *label_ok, uint32_t s, uint32_t *cur) {
    uint32_t nc = d->n_classes, c = *cur;
    const int32_t *row = d->trans + (size_t)s * nc;
    while (c < nc) {
        uint32_t c1 = cm_run_end(row, c, nc); /* a run of classes: one target */
        int32_t t = row[c];
        c = c1;
        if (t >= 0) {
            *cur = c;
            return t;
        }
    }
    for (uint32_t e = d->lab_off[s] + (c - nc); e < d->lab_off[s + 1]; e++)
        if (label_ok[d->lab[e]]) {
            *cur = nc + (e - d->lab_off[s]) + 1;
            return d->lab_to[e];
        }
    *cur = nc + (d->lab_off[s + 1] - d->lab_off[s]);
    return -1;
}

/* keep[s]: s is reachable from the start and live (can reach an accepting state).  A path
 * from the start to a live state passes through live states only, so these are the states
 * reachable through live states.  One depth-first walk from the start, each state's edges
 * read once (Tarjan's strongly connected components: a component is live when one of its
 * states accepts or has an edge to a live state of a finished component), where marking
 * the live states needed every edge listed, the predecessors sorted, a walk back from the
 * accepting states and a second walk forward. */
static int mark_kept(const cm_dfa_out *d, const uint8_t *label_ok, uint8_t *keep) {
    uint32_t n = d->n_states, next = 0;
    int rc = CM_OK;
    uint32_t *index = malloc(((size_t)n + 1) * sizeof *index), *low = malloc(((size_t)n + 1) * sizeof *low);
    uint8_t *on = calloc((size_t)n + 1, 1);
    cm_vec32 frames = {0}, comp = {0}; /* the walk's (state, cursor) pairs; the open components' states */
    if (!index || !low || !on) rc = CM_ERR_NOMEM;
    for (uint32_t s = 0; !rc && s < n; s++) index[s] = UINT32_MAX;
    if (!rc && n) { /* keep[] serves as the live marks while walking (calloc'd by the caller) */
        index[0] = low[0] = next++, on[0] = 1, keep[0] = d->accepting[0];
        rc = cm_vec_push2(&frames, 0, 0);
        if (!rc) rc = cm_vec_push(&comp, 0);
    }
    while (!rc && frames.n) {
        uint32_t s = frames.data[frames.n - 2], cur = frames.data[frames.n - 1];
        int64_t t = next_successor(d, label_ok, s, &cur);
        frames.data[frames.n - 1] = cur;
        if (t >= 0) {
            uint32_t u = (uint32_t)t;
            if (u >= n) {
                rc = CM_ERR_ARG;
            } else if (index[u] == UINT32_MAX) { /* a new state: walk it */
                index[u] = low[u] = next++, on[u] = 1, keep[u] = d->accepting[u];
                rc = cm_vec_push2(&frames, u, 0);
                if (!rc) rc = cm_vec_push(&comp, u);
            } else if (on[u]) { /* in s's component: its liveness joins at the component's end */
                if (index[u] < low[s]) low[s] = index[u];
            } else if (keep[u]) { /* a finished component, live */
                keep[s] = 1;
            }
            continue;
        }
        frames.n -= 2; /* s is done */
        if (low[s] == index[s]) { /* s opened a component: every state above it on comp */
            size_t k = comp.n;
            uint8_t live = 0;
            do live |= keep[comp.data[--k]];
            while (comp.data[k] != s);
            for (size_t j = k; j < comp.n; j++) on[comp.data[j]] = 0, keep[comp.data[j]] = live;
            comp.n = k;
        }
        if (frames.n) {
            uint32_t p = frames.data[frames.n - 2];
            if (low[s] < low[p]) low[p] = low[s];
            if (keep[s]) keep[p] = 1;
        }
    }
    free(index), free(low), free(on);
    cm_vec_free(&frames), cm_vec_free(&comp);
    return rc;
}

/* Does trimming d keep all of it: every state (reach[]) and every label edge? */
static bool keeps_all(const cm_dfa_out *d, const uint8_t *label_ok, const uint8_t *reach) {
    for (uint32_t s = 0; s < d->n_states; s++)
        if (!reach[s]) return false;
    return all_labels_ok(d, label_ok);
}

/* The DFA of d's states with reach[s], renumbered in order. */
static int copy_reachable(const cm_dfa_out *d, const uint8_t *label_ok, const uint8_t *reach, uint32_t *new_id,
                          cm_dfa_out **out) {
    uint32_t n = d->n_states, nc = d->n_classes, k = 0, nl = 0;
    size_t n_lab = 0;
    for (uint32_t s = 0; s < n; s++) {
        new_id[s] = reach[s] ? k++ : UINT32_MAX;
        for (uint32_t e = d->lab_off[s]; reach[s] && e < d->lab_off[s + 1]; e++)
            n_lab += label_ok[d->lab[e]] && reach[d->lab_to[e]];
    }
    cm_dfa_out *o;
    int rc = cm_dfa_alloc(NULL, k, nc, n_lab, &o);
    if (rc) return rc;
    memcpy(o->class_lo, d->class_lo, sizeof o->class_lo);
    o->lab_off[0] = 0;
    bool all = k == n; /* every state stays, numbered as it was: the table as it is */
    if (all) memcpy(o->trans, d->trans, (size_t)n * nc * sizeof *o->trans);
    for (uint32_t s = 0; s < n; s++) {
        if (!reach[s]) continue;
        uint32_t i = new_id[s];
        const int32_t *row = d->trans + (size_t)s * nc;
        int32_t *orow = o->trans + (size_t)i * nc;
        for (uint32_t c = 0, c1; !all && c < nc; c = c1) {
            c1 = cm_run_end(row, c, nc);
            int32_t to = (row[c] >= 0 && reach[row[c]]) ? (int32_t)new_id[row[c]] : -1;
            for (uint32_t i = c; i < c1; i++) orow[i] = to;
        }
        o->accepting[i] = d->accepting[s];
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++)
            if (label_ok[d->lab[e]] && reach[d->lab_to[e]]) {
                o->lab[nl] = d->lab[e];
                o->lab_to[nl++] = new_id[d->lab_to[e]];
            }
        o->lab_off[i + 1] = nl;
    }
    *out = o;
    return CM_OK;
}

/* The trim of d into *out (NULL when its start state is dead); with `share`, d itself where
 * nothing is dropped, else always a new DFA. */
static int trim(const cm_dfa_out *d, const uint8_t *label_ok, bool share, const cm_dfa_out **out) {
    uint32_t n = d->n_states;
    *out = NULL;
    /* live (minimization's mark) with every label productive: every state is kept, no row read */
    bool known = n && d->live && all_labels_ok(d, label_ok);
    if (known && share) {
        *out = d;
        return CM_OK;
    }
    uint8_t *keep = calloc((size_t)n + 1, 1);
    uint32_t *new_id = NULL;
    int rc = !keep ? CM_ERR_NOMEM : known ? (memset(keep, 1, n), CM_OK) : mark_kept(d, label_ok, keep);
    if (!rc && n && keep[0]) {
        if (share && keeps_all(d, label_ok, keep)) {
            *out = d; /* nothing to drop: no copy (most rules of a schema are already trim) */
        } else {
            cm_dfa_out *o = NULL;
            new_id = malloc(((size_t)n + 1) * sizeof *new_id);
            rc = new_id ? copy_reachable(d, label_ok, keep, new_id, &o) : CM_ERR_NOMEM;
            *out = o;
        }
    }
    free(keep), free(new_id);
    return rc;
}

int cm_dfa_trim_shared(const cm_dfa_out *d, const uint8_t *label_ok, const cm_dfa_out **out) {
    return trim(d, label_ok, true, out);
}

int cm_dfa_trim(const cm_dfa_out *d, const uint8_t *label_ok, cm_dfa_out **out) {
    const cm_dfa_out *t;
    int rc = trim(d, label_ok, false, &t); /* the caller owns what it gets: never d itself */
    *out = (cm_dfa_out *)t;
    return rc;
}
