/* DFA minimization by registration over strongly connected components (compile time).
 *
 * Hopcroft's refinement (minimize.c) costs O(m log n) with a large constant; most DFAs a
 * compile builds have no cycles, or only small ones (a string's character loop, a number's
 * digits).  Here the classes of the coarsest partition (the one Hopcroft refines to: states
 * agree on acceptance and defined symbols, and their successors are equivalent) are found
 * component by component, successors first (Tarjan's order):
 *
 *   - a state on no cycle has successors whose classes are final: it joins the class whose
 *     representative has the same signature (accepting, byte classes and labels, successor
 *     classes), found by hashing, or starts one (Revuz's registration of acyclic automata);
 *   - a cycle (an SCC of at most SCC_MAX states) is first minimized on its own by Moore's
 *     rounds, the classes of the states it leaves to being fixed; then its quotient is matched
 *     against the classes registered so far: a state of it equivalent to a registered class
 *     makes every state of it equivalent to one (each is reachable from it), so one
 *     breadth-first match from one state, against each class with its skeleton, decides.
 *
 * A larger SCC, or a match that costs too much, leaves the DFA to Hopcroft.  The result is
 * the same partition either way (it is unique), numbered by minimize.c. */
#include <stdlib.h>
#include <string.h>

#include "fsm.h"

#define SCC_MAX 64
#define CHAIN_MIN 12    /* members of an SCC from which its blocks are found by filter (local_blocks) */
#define CHAIN_END 0xFFu
#define NONE UINT32_MAX

typedef struct {
    const cm_dfa_out *d;
    const uint32_t *spo, *spc, *spt; /* sparse byte edges: classes ascending */
    const uint32_t *eo, *et;         /* every edge's target: byte edges, then labels (CSR) */
    cm_budget *bud;
    uint32_t n, n_cls;
    uint32_t *cls;                   /* [n] final class of each state, NONE before */
    uint32_t *rep;                   /* [n] a state of each class */
    uint32_t *sig_tab, *skel_head;   /* [cap] class + 1: by full signature, by skeleton */
    uint32_t *skel_next;             /* [n] class + 1 next in its skeleton chain */
    size_t cap;
    uint32_t *pos;                   /* [n] index in the current SCC, NONE outside it */
    uint32_t *memb, *blk, *nblk, *brep, *map, *queue; /* [n] SCC scratch */
    size_t work, max_work;
    uint8_t *live;                   /* [n] the state reaches an accepting one (set on the walk) */
    bool all_live;
} reg;

static uint32_t n_edges(const reg *r, uint32_t s) { return r->eo[s + 1] - r->eo[s]; }

/* The target of edge i of s (byte edges by class, then labels by value). */
static uint32_t target(const reg *r, uint32_t s, uint32_t i) { return r->et[r->eo[s] + i]; }

/* eo/et: s's byte edges' targets, then its labels', in one array (the sparse edges' own
 * arrays when the DFA has no labels: most rules that call nothing). */
static void edge_targets(reg *r, uint32_t *eo, uint32_t *et) {
    const cm_dfa_out *d = r->d;
    if (!d->lab_off[r->n]) {
        r->eo = r->spo, r->et = r->spt;
        return;
    }
    uint32_t m = 0;
    for (uint32_t s = 0; s < r->n; s++) {
        eo[s] = m;
        for (uint32_t e = r->spo[s]; e < r->spo[s + 1]; e++) et[m++] = r->spt[e];
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) et[m++] = d->lab_to[e];
    }
    eo[r->n] = m;
    r->eo = eo, r->et = et;
}

#define MIX(h, x) (((h) ^ (uint64_t)(x)) * 1099511628211ULL)

/* Acceptance, byte classes and labels of s (no targets). */
static uint64_t skeleton_hash(const reg *r, uint32_t s) {
    const cm_dfa_out *d = r->d;
    uint64_t h = MIX(1469598103934665603ULL, d->accepting[s]);
    for (uint32_t e = r->spo[s]; e < r->spo[s + 1]; e++) h = MIX(h, r->spc[e]);
    for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) h = MIX(h, d->lab[e] | 1ULL << 40);
    return h ^ (h >> 29);
}

static bool skeleton_same(const reg *r, uint32_t s, uint32_t t) {
    const cm_dfa_out *d = r->d;
    uint32_t nb = r->spo[s + 1] - r->spo[s], nl = d->lab_off[s + 1] - d->lab_off[s];
    if (d->accepting[s] != d->accepting[t] || nb != r->spo[t + 1] - r->spo[t]
        || nl != d->lab_off[t + 1] - d->lab_off[t])
        return false;
    return (!nb || !memcmp(r->spc + r->spo[s], r->spc + r->spo[t], nb * sizeof *r->spc)) /* spc NULL: no edges */
           && (!nl || !memcmp(d->lab + d->lab_off[s], d->lab + d->lab_off[t], nl * sizeof *d->lab));
}

static bool full_same(const reg *r, uint32_t s, uint32_t t) {
    if (!skeleton_same(r, s, t)) return false;
    for (uint32_t i = 0, m = n_edges(r, s); i < m; i++)
        if (r->cls[target(r, s, i)] != r->cls[target(r, t, i)]) return false;
    return true;
}

/* A new class with representative s (its successors' classes final), its full hash h and
 * skeleton hash sk: in both tables. */
static uint32_t new_class(reg *r, uint32_t s, uint64_t h, uint64_t sk) {
    uint32_t c = r->n_cls++;
    r->rep[c] = s;
    size_t i = h & (r->cap - 1);
    while (r->sig_tab[i]) i = (i + 1) & (r->cap - 1);
    r->sig_tab[i] = c + 1;
    size_t k = sk & (r->cap - 1);
    r->skel_next[c] = r->skel_head[k];
    r->skel_head[k] = c + 1;
    return c;
}

/* skeleton_hash(r, s) into *sk and, in the same pass over s's edges, a hash of what full_same
 * compares (each edge's symbol with its target's final class): the signature table's hash of s
 * (register_trivial and new classes alike take it from here, so states full_same finds the same
 * hash the same). */
static uint64_t signature_hash(const reg *r, uint32_t s, uint64_t *sk) {
    const cm_dfa_out *d = r->d;
    uint64_t k = MIX(1469598103934665603ULL, d->accepting[s]), h = k;
    for (uint32_t e = r->spo[s]; e < r->spo[s + 1]; e++) {
        k = MIX(k, r->spc[e]);
        h = MIX(MIX(h, r->spc[e]), r->cls[r->spt[e]]);
    }
    for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) {
        k = MIX(k, d->lab[e] | 1ULL << 40);
        h = MIX(MIX(h, d->lab[e] | 1ULL << 40), r->cls[d->lab_to[e]]);
    }
    *sk = k ^ (k >> 29);
    return h ^ (h >> 31);
}

/* A state on no cycle. */
static void register_trivial(reg *r, uint32_t s) {
    uint64_t sk, h = signature_hash(r, s, &sk);
    for (size_t i = h & (r->cap - 1); r->sig_tab[i]; i = (i + 1) & (r->cap - 1))
        if (full_same(r, s, r->rep[r->sig_tab[i] - 1])) {
            r->cls[s] = r->sig_tab[i] - 1;
            return;
        }
    r->cls[s] = new_class(r, s, h, sk);
}

/* Do members x and y of the SCC (k states) agree in round 0 (blk == NULL: skeleton, and the
 * final class of every target outside the SCC) or in a later round (blk: their blocks, and
 * the blocks of their targets inside it)? */
static bool local_same(reg *r, uint32_t x, uint32_t y, const uint32_t *blk) {
    if (blk ? blk[r->pos[x]] != blk[r->pos[y]] : !skeleton_same(r, x, y)) return false;
    uint32_t m = n_edges(r, x);
    r->work += m;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t a = target(r, x, i), b = target(r, y, i);
        bool ia = r->pos[a] != NONE, ib = r->pos[b] != NONE;
        if (ia != ib) return false;
        if (ia ? blk && blk[r->pos[a]] != blk[r->pos[b]] : r->cls[a] != r->cls[b]) return false;
    }
    return true;
}

/* What local_same compares in round 0, hashed: states it finds the same hash the same (its
 * skeleton, each edge's target inside the SCC or its final class outside). */
static uint32_t round0_hash(const reg *r, uint32_t x) {
    uint64_t h = skeleton_hash(r, x);
    for (uint32_t i = 0, m = n_edges(r, x); i < m; i++) {
        uint32_t u = target(r, x, i);
        h = MIX(h, r->pos[u] != NONE ? NONE : r->cls[u]);
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* Moore's rounds on the k members: r->blk[i], blocks 0 .. *n_blk - 1, brep[b] a member.  A member
 * is compared with each block found so far, in order; one whose filter differs is passed over
 * without the compare (round 0: the hash of what it compares, kept per block in r->queue, which
 * match() uses only after this; later rounds: the member's block in the round before), so the
 * blocks and their order are local_same's alone. */
static void local_blocks(reg *r, uint32_t k, uint32_t *n_blk) {
    const uint32_t *prev = NULL;
    uint32_t nb = 0, nb_prev = 0, *bh = r->queue;
    /* From CHAIN_MIN members on, the blocks of each filter are chained in the order they were
     * made (head: by filter, open addressing; next: the chain), so a member meets only the
     * blocks its filter allows, in the order the scan of every block met them: the same
     * compares, where the scan passed over every block made so far (quadratic in the SCC). */
    uint8_t head[4 * SCC_MAX], next[SCC_MAX]; /* block + 1 (0: free); block (CHAIN_END: last) */
    uint32_t size = 0;
    if (k >= CHAIN_MIN)
        for (size = 16; size < 2 * k; size *= 2) {}
    for (;;) {
        uint32_t *out = prev == r->blk ? r->nblk : r->blk;
        nb = 0;
        if (size) memset(head, 0, size);
        for (uint32_t i = 0; i < k; i++) {
            uint32_t x = r->memb[i], b = 0;
            uint32_t f = prev ? prev[r->pos[x]] : round0_hash(r, x);
            if (!size) {
                while (b < nb && (f != bh[b] || !local_same(r, x, r->brep[b], prev))) b++;
                if (b == nb) r->brep[nb] = x, bh[nb++] = f;
                out[i] = b;
                continue;
            }
            uint32_t h = (f * 2654435761u) >> 7 & (size - 1), last = CHAIN_END;
            while (head[h] && bh[head[h] - 1] != f) h = (h + 1) & (size - 1);
            for (b = head[h] ? head[h] - 1u : CHAIN_END; b != CHAIN_END && !local_same(r, x, r->brep[b], prev);)
                last = b, b = next[b];
            if (b == CHAIN_END) {
                b = nb++;
                r->brep[b] = x, bh[b] = f, next[b] = CHAIN_END;
                if (last != CHAIN_END) next[last] = (uint8_t)b;
                else head[h] = (uint8_t)(b + 1);
            }
            out[i] = b;
        }
        if (prev && nb == nb_prev) break; /* stable: no block split */
        prev = out;
        nb_prev = nb;
    }
    if (prev != r->blk) memcpy(r->blk, prev, k * sizeof *r->blk);
    *n_blk = nb;
}

/* Is the SCC's block of member 0 equivalent to class c?  Fills map[block] on success. */
static bool match(reg *r, uint32_t n_blk, uint32_t c) {
    for (uint32_t b = 0; b < n_blk; b++) r->map[b] = NONE;
    uint32_t head = 0, tail = 0, b0 = r->blk[0];
    r->map[b0] = c;
    r->queue[tail++] = b0;
    while (head < tail) {
        uint32_t b = r->queue[head++], u = r->brep[b], v = r->rep[r->map[b]];
        if (!skeleton_same(r, u, v)) return false;
        uint32_t m = n_edges(r, u);
        r->work += m;
        for (uint32_t i = 0; i < m; i++) {
            uint32_t tu = target(r, u, i), cv = r->cls[target(r, v, i)];
            if (r->pos[tu] == NONE) {
                if (r->cls[tu] != cv) return false;
                continue;
            }
            uint32_t bb = r->blk[r->pos[tu]];
            if (r->map[bb] == NONE) r->map[bb] = cv, r->queue[tail++] = bb;
            else if (r->map[bb] != cv) return false;
        }
    }
    return true;
}

/* An SCC with a cycle, its k states in r->memb. */
static void register_cycle(reg *r, uint32_t k) {
    uint32_t n_blk;
    for (uint32_t i = 0; i < k; i++) r->pos[r->memb[i]] = i;
    local_blocks(r, k, &n_blk);
    for (uint32_t b = 0; b < n_blk; b++) /* brep[b]: the first member of each block */
        r->brep[b] = NONE;
    for (uint32_t i = k; i-- > 0;) r->brep[r->blk[i]] = r->memb[i];
    bool found = false;
    for (uint32_t c = r->skel_head[skeleton_hash(r, r->memb[0]) & (r->cap - 1)]; !found && c; c = r->skel_next[c - 1])
        found = match(r, n_blk, c - 1);
    if (found) {
        for (uint32_t i = 0; i < k; i++) r->cls[r->memb[i]] = r->map[r->blk[i]];
    } else {
        uint32_t first = r->n_cls;
        for (uint32_t i = 0; i < k; i++) r->cls[r->memb[i]] = first + r->blk[i];
        for (uint32_t b = 0; b < n_blk; b++) {
            uint64_t sk, h = signature_hash(r, r->brep[b], &sk); /* (its targets' classes are set now) */
            new_class(r, r->brep[b], h, sk);
        }
    }
    for (uint32_t i = 0; i < k; i++) r->pos[r->memb[i]] = NONE;
}

static bool self_loop(const reg *r, uint32_t s) {
    for (uint32_t i = 0, m = n_edges(r, s); i < m; i++)
        if (target(r, s, i) == s) return true;
    return false;
}

typedef struct {
    uint32_t *index, *low, *stack, *call, *next;
    uint8_t *on;
} tarjan;

/* Tarjan's SCCs, each registered as it completes (its successors' SCCs have); *done false
 * on an SCC over SCC_MAX states or past the work cap.  On the way, r->live: a state is live
 * when it accepts, has an edge to a live finished SCC or a tree child that is live (each a real
 * edge), and an SCC when one of its states is (its states reach each other); all_live false
 * when one is not. */
static void components(reg *r, tarjan *t, bool *done) {
    uint32_t n = r->n, idx = 0;
    size_t sp = 0, cp = 0;
    for (uint32_t s = 0; s < n; s++) t->index[s] = NONE;
    for (uint32_t root = 0; root < n; root++) {
        if (t->index[root] != NONE) continue;
        t->call[cp] = root, t->next[cp++] = r->eo[root];
        t->index[root] = t->low[root] = idx++, t->stack[sp++] = root, t->on[root] = 1;
        r->live[root] = r->d->accepting[root];
        while (cp) {
            uint32_t s = t->call[cp - 1], e = t->next[cp - 1], e1 = r->eo[s + 1]; /* next: s's next edge, in et */
            if (e < e1) {
                uint32_t u = r->et[e++];
                /* the edges after it to the same target (a run of byte classes) tell nothing
                 * new: u is numbered now, its low link or liveness taken once */
                while (e < e1 && r->et[e] == u) e++;
                t->next[cp - 1] = e;
                if (t->index[u] == NONE) {
                    t->call[cp] = u, t->next[cp++] = r->eo[u];
                    t->index[u] = t->low[u] = idx++, t->stack[sp++] = u, t->on[u] = 1;
                    r->live[u] = r->d->accepting[u];
                } else if (t->on[u]) {
                    if (t->index[u] < t->low[s]) t->low[s] = t->index[u];
                } else if (r->live[u]) { /* a finished SCC, live */
                    r->live[s] = 1;
                }
                continue;
            }
            uint32_t parent = --cp ? t->call[cp - 1] : NONE;
            if (parent != NONE && t->low[s] < t->low[parent]) t->low[parent] = t->low[s];
            if (t->low[s] == t->index[s]) {
                uint32_t k = 0, x;
                uint8_t lv = 0;
                do {
                    x = t->stack[--sp];
                    t->on[x] = 0;
                    lv |= r->live[x];
                    if (k < SCC_MAX) r->memb[k] = x;
                    k++;
                } while (x != s);
                if (k > SCC_MAX || r->work > r->max_work) {
                    *done = false;
                    return;
                }
                for (uint32_t i = 0; i < k; i++) r->live[r->memb[i]] = lv;
                if (!lv) r->all_live = false;
                if (k == 1 && !self_loop(r, s)) register_trivial(r, s);
                else register_cycle(r, k);
            }
            if (parent != NONE && r->live[s]) r->live[parent] = 1; /* the tree edge parent -> s */
        }
    }
    *done = r->work <= r->max_work;
}

int cm_fsm_register(const cm_dfa_out *d, const cm_sparse_edges *sp, cm_budget *bud, uint32_t *block,
                    uint32_t *n_blocks, bool *done, bool *live) {
    uint32_t n = d->n_states;
    reg r = {.d = d, .spo = sp->off.data, .spc = sp->cls.data, .spt = sp->to.data, .bud = bud, .n = n, .cap = 16,
             .all_live = true};
    tarjan t;
    while (r.cap < (size_t)n * 2) r.cap *= 2;
    r.max_work = 8 * ((size_t)n + sp->cls.n + d->lab_off[n]) + 4096;
    int rc = CM_OK;
    size_t n1 = (size_t)n + 1, m = sp->cls.n + d->lab_off[n];
    uint32_t *all = cm_balloc(bud, (17 * n1 + 2 * r.cap + m) * sizeof *all, false, &rc);
    if (rc) return rc;
    uint32_t *p = all, *eo;
    uint32_t **arrays[] = {&r.cls, &r.rep, &r.skel_next, &r.pos, &r.memb, &r.blk, &r.nblk, &r.brep, &r.map,
                           &r.queue, &eo, &t.index, &t.low, &t.stack, &t.call, &t.next};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++, p += n1) *arrays[i] = p;
    t.on = (uint8_t *)p, r.live = t.on + n1; /* n1 bytes each within the 17th array (4 * n1 bytes) */
    p += n1;
    r.sig_tab = p, r.skel_head = p + r.cap;
    memset(r.sig_tab, 0, 2 * r.cap * sizeof *r.sig_tab);
    edge_targets(&r, eo, p + 2 * r.cap);
    memset(t.on, 0, n1);
    for (uint32_t s = 0; s < n; s++) r.pos[s] = NONE;
    components(&r, &t, done);
    if (*done) {
        for (uint32_t s = 0; s < n; s++) block[s] = r.cls[s];
        *n_blocks = r.n_cls;
    }
    *live = *done && r.all_live;
    cm_bfree(bud, all);
    return CM_OK;
}
