/* A rule's DFA built directly from its encoded IR, without Thompson's NFA and subset
 * construction (issue 12, the cold path).  components.c tries it first for a component of one
 * member that is not right-linear; it is taken for a body with a bounded count of two or more
 * items, or a copy of a callee's DFA, and no loop (db_worth) -- or, the loops switch on, a body
 * with a count and unbounded repetitions (minimized after, given up past 1.5x its NFA's states) --
 * and gives up (DB_NO: Thompson's path then) on anything else.
 *
 * Built from the end: db_build(node, K) makes a state whose language is node's followed by
 * state K's, K already built.  A literal is a chain of states into K; a byte class one state;
 * a sequence folds from its last item; an alternative is the union of its branches' states.  A
 * union (db_union) is a new state with every operand's edges; where two operands' edges overlap
 * the targets there are united in turn (subset construction on demand, memoized by the set: a
 * prefix two branches share).  x{m,n} is a chain of positions from the end (db_counted): the
 * item is built once into a placeholder, united with what may end there (K from m on), and
 * copied for each position in one pass (its states are made targets first); alternatives whose
 * branches count the same item (a big count's blocks, x{0,B-1} | x{B} x{0,r}) share one chain.
 * A copied DFA (an inlined callee) is copied with its accepting states united with K, and one
 * with no edges (a prefix-free item: a JSON string character, an escape unit, a digit) is K
 * itself.  Every state made is kept by content (db_finish: one with the same acceptance and
 * edges is reused), so the acyclic DFAs built here are minimal as built.
 *
 * The result is renumbered breadth first (byte edges by their first byte, then labels by
 * value: the order in which subset construction discovers its states) and handed to
 * cm_fsm_minimize like subset construction's DFA: the minimal DFA is unique and minimization
 * numbers its classes by first appearance, so the output is the same DFA, state for state, as
 * Thompson's path gives (the classes of equal columns merged the same way: they depend on the
 * minimal DFA's rows only).
 *
 * max_states (subset construction's limit, CM_ERR_LIMIT past it) counts the states of the
 * DFA before minimization, which this build does not make: it gives up (the caller's path then
 * decides, limit error or not) once it keeps max_states / DB_MARGIN states (or has made
 * max_states, found ones included), so on the shapes built here it does not succeed where
 * subset construction would fail (tests/test_direct_build.py, test_limits).  Memory counts
 * against the budget (CM_ERR_LIMIT_MEM: the caller takes Thompson's path, which decides); time
 * is checked every 1,024 states. */
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

#define DB_NO CM_DIRECT_NO
#define DB_MAX_DEPTH 10000
#define DB_MARGIN 4
#define DB_EMBED_MIN 512 /* copied states from which a body without a count is built here (db_worth_it) */
#define PENDING 2u /* acc[] of a state made before its edges (a loop's, a copied DFA's) */

typedef struct {
    const cm_ir_input *in;
    cm_budget *bud;
    size_t made, max_made;        /* states made (those found made already included) and the cap on those kept */
    size_t loop_made;             /* a body with a loop: the states it may make (DB_NO past it: Thompson's path) */
    size_t fills;                 /* pending states filled so far */
    uint32_t fresh;               /* the start of the last position copied, while no state refers to it (db_item) */
    size_t fresh_fills;           /* fills when fresh was set */
    cm_vec32 acc, e0, e1, l0, l1; /* per state: accepting (0, 1, PENDING), its byte and label edges */
    cm_vec32 rng, to;             /* byte edges: lo | hi << 8, target; a state's ascending, disjoint, maximal */
    cm_vec32 lab, lto;            /* label edges: a state's ascending by label */
    cm_vec32 stk;                 /* scratch, a stack: each call pops what it pushed */
    uint32_t *hc;                 /* made states by content (id + 1, 0 free): open addressing */
    uint32_t *hh;                 /* [hc_cap] the low 32 bits of the hash of the state in each slot of hc */
    size_t hc_n, hc_cap;
    const cm_dfa_out *frag;       /* the copied DFA whose runs and order are below (the last one copied) */
    const cm_dfa_runs *runs;      /* frag's byte rows as runs (kept on it: cm_dfa_runs_for_copy) */
    cm_dfa_runs *own_runs;        /* those runs where they are this build's alone (the runs off) */
    cm_vec32 topo, map, tmap;
    cm_vec32 upool;               /* unions made: [n, state * n, result] each (UINT32_MAX: in progress) */
    uint32_t *um;                 /* their offsets in upool + 1 (0 free), by the set: open addressing */
    size_t um_n, um_cap;
    bool frag_acyclic;
} dbuilder;

static cm_vec32 *db_vec(dbuilder *b, size_t i) {
    cm_vec32 *v[] = {&b->acc, &b->e0,  &b->e1,      &b->l0,      &b->l1,     &b->rng,  &b->to,  &b->lab,
                     &b->lto, &b->stk, &b->topo, &b->map, &b->tmap, &b->upool};
    return i < sizeof v / sizeof *v ? v[i] : NULL;
}

/* A new state (its edges: those pushed until db_close or db_finish), accepting acc. */
static int db_new(dbuilder *b, uint32_t acc, uint32_t *s) {
    if (b->acc.n >= b->max_made || b->made >= DB_MARGIN * b->max_made || b->made >= b->loop_made) return DB_NO;
    if ((++b->made & 0x3FF) == 0 && cm_budget_time(b->bud)) return CM_ERR_TIMEOUT;
    *s = (uint32_t)b->acc.n;
    uint32_t ne = (uint32_t)b->rng.n, nl = (uint32_t)b->lab.n;
    int rc = cm_vec_push(&b->acc, acc);
    if (!rc) rc = cm_vec_push(&b->e0, ne);
    if (!rc) rc = cm_vec_push(&b->e1, ne);
    if (!rc) rc = cm_vec_push(&b->l0, nl);
    return rc ? rc : cm_vec_push(&b->l1, nl);
}

/* State s's edges: from where they were opened (db_new, db_open) to those pushed since. */
static void db_open(dbuilder *b, uint32_t s) {
    b->e0.data[s] = (uint32_t)b->rng.n;
    b->l0.data[s] = (uint32_t)b->lab.n;
}

static void db_close(dbuilder *b, uint32_t s) {
    b->e1.data[s] = (uint32_t)b->rng.n;
    b->l1.data[s] = (uint32_t)b->lab.n;
}

/* A byte edge of the state being made, joined to the one before when it continues it. */
static int db_edge(dbuilder *b, uint32_t lo, uint32_t hi, uint32_t to, uint32_t s) {
    size_t n = b->rng.n;
    if (n > b->e0.data[s] && b->to.data[n - 1] == to && (b->rng.data[n - 1] >> 8) + 1 == lo) {
        b->rng.data[n - 1] = (b->rng.data[n - 1] & 0xFF) | hi << 8;
        return CM_OK;
    }
    int rc = cm_vec_push(&b->rng, lo | hi << 8);
    return rc ? rc : cm_vec_push(&b->to, to);
}

/* (not inlined: inlined into db_finish it cost ~8 instructions more a state) */
static __attribute__((noinline)) uint64_t db_hash(const dbuilder *b, uint32_t s) {
    uint64_t h = 1469598103934665603ULL ^ b->acc.data[s];
    for (uint32_t e = b->e0.data[s]; e < b->e1.data[s]; e++)
        h = (((h ^ b->rng.data[e]) * 1099511628211ULL) ^ b->to.data[e]) * 1099511628211ULL;
    h = (h ^ 0x5bd1e995u) * 1099511628211ULL;
    for (uint32_t e = b->l0.data[s]; e < b->l1.data[s]; e++)
        h = (((h ^ b->lab.data[e]) * 1099511628211ULL) ^ b->lto.data[e]) * 1099511628211ULL;
    return h ^ h >> 29;
}

static bool db_same(const dbuilder *b, uint32_t s, uint32_t t) {
    uint32_t ne = b->e1.data[s] - b->e0.data[s], nl = b->l1.data[s] - b->l0.data[s];
    if (b->acc.data[s] != b->acc.data[t] || ne != b->e1.data[t] - b->e0.data[t] || nl != b->l1.data[t] - b->l0.data[t])
        return false;
    const uint32_t *r = b->rng.data, *o = b->to.data, *l = b->lab.data, *lt = b->lto.data;
    uint32_t es = b->e0.data[s], et = b->e0.data[t], ls = b->l0.data[s], ltt = b->l0.data[t];
    return (!ne || (!memcmp(r + es, r + et, ne * sizeof *r) && !memcmp(o + es, o + et, ne * sizeof *o)))
           && (!nl || (!memcmp(l + ls, l + ltt, nl * sizeof *l) && !memcmp(lt + ls, lt + ltt, nl * sizeof *lt)));
}

/* Close s, the last state made (its edges the last pushed), and keep it by content: *out is
 * a state made before with the same acceptance and edges (s dropped), or s.  (Shared tails:
 * an acyclic part is minimal this way; a cycle is left to minimization.)  Each slot keeps its
 * state's hash beside it (hh: the low 32 bits, which give the slot while the table has at most
 * 2^32), so a table that grows is rehashed without hashing a state again, and a state whose
 * hash differs is passed over without comparing edges. */
static int db_grow(dbuilder *b) {
    size_t old = b->hc_cap, cap = old ? 2 * old : 1024;
    int rc = CM_OK;
    uint32_t *t = cm_balloc(b->bud, cap * sizeof *t, true, &rc), *prev = b->hc;
    uint32_t *th = cm_balloc(b->bud, cap * sizeof *th, false, &rc); /* (written with its slot) */
    if (rc) {
        cm_bfree(b->bud, t);
        return rc;
    }
    for (size_t i = 0; i < old; i++)
        if (prev[i]) {
            size_t j = b->hh[i] & (cap - 1);
            while (t[j]) j = (j + 1) & (cap - 1);
            t[j] = prev[i], th[j] = b->hh[i];
        }
    cm_bfree(b->bud, prev);
    cm_bfree(b->bud, b->hh);
    b->hc = t, b->hh = th, b->hc_cap = cap;
    return CM_OK;
}

static int db_finish(dbuilder *b, uint32_t s, uint32_t *out) {
    db_close(b, s);
    int rc = 2 * (b->hc_n + 1) > b->hc_cap ? db_grow(b) : CM_OK;
    if (rc) return rc;
    uint32_t h = (uint32_t)db_hash(b, s);
    size_t i = h & (b->hc_cap - 1);
    for (; b->hc[i]; i = (i + 1) & (b->hc_cap - 1)) {
        uint32_t t = b->hc[i] - 1;
        if (b->hh[i] == h && t != s && db_same(b, s, t)) { /* drop s: the last state, its edges the last */
            b->rng.n = b->to.n = b->e0.data[s];
            b->lab.n = b->lto.n = b->l0.data[s];
            b->acc.n--, b->e0.n--, b->e1.n--, b->l0.n--, b->l1.n--;
            *out = t;
            return CM_OK;
        }
    }
    b->hc[i] = s + 1;
    b->hh[i] = h;
    b->hc_n++;
    *out = s;
    return CM_OK;
}

/* A state with one edge lo..hi to `to`. */
static int db_edge_state(dbuilder *b, uint32_t lo, uint32_t hi, uint32_t to, uint32_t *s) {
    if (lo > hi || hi > 255) return DB_NO;
    uint32_t x;
    int rc = db_new(b, 0, &x);
    if (!rc) rc = db_edge(b, lo, hi, to, x);
    return rc ? rc : db_finish(b, x, s);
}

/* Sort v[0..n) (insertion: a few) and drop repeats; the number kept. */
static uint32_t db_sort_unique(uint32_t *v, uint32_t n) {
    for (uint32_t i = 1; i < n; i++) {
        uint32_t x = v[i], j = i;
        for (; j && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!k || v[k - 1] != v[i]) v[k++] = v[i];
    return k;
}

#define DB_MAX_UNION 1024
#define DB_SWEEP 16

/* A piece of a union's edges on the stack (joined to the one before when it continues it). */
static int db_edge_piece(dbuilder *b, uint32_t lo, uint32_t hi, uint32_t t, size_t res, uint32_t *n) {
    size_t last = res + 2 * (size_t)*n;
    if (*n && b->stk.data[last - 1] == t && (b->stk.data[last - 2] >> 8) + 1 == lo) {
        b->stk.data[last - 2] = (b->stk.data[last - 2] & 0xFF) | hi << 8;
        return CM_OK;
    }
    (*n)++;
    return cm_vec_push2(&b->stk, lo | hi << 8, t);
}

static int db_union_made(dbuilder *b, size_t at, uint32_t n, uint32_t acc, uint32_t *io, int depth);

static uint64_t db_set_hash(const uint32_t *v, uint32_t n) {
    uint64_t h = 1469598103934665603ULL ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ v[i]) * 1099511628211ULL;
    return h ^ h >> 31;
}

/* The memo slot of set v[0..n): its entry or the free slot where it goes. */
static size_t db_memo_slot(const dbuilder *b, const uint32_t *v, uint32_t n) {
    size_t i = db_set_hash(v, n) & (b->um_cap - 1);
    for (; b->um[i]; i = (i + 1) & (b->um_cap - 1)) {
        const uint32_t *e = b->upool.data + b->um[i] - 1;
        if (e[0] == n && !memcmp(e + 1, v, n * sizeof *v)) break;
    }
    return i;
}

/* The result slot (in upool) of the union of v[0..n): found (*found), or a new entry in progress. */
static int db_memo(dbuilder *b, size_t v_at, uint32_t n, size_t *res, bool *found) {
    if (2 * (b->um_n + 1) > b->um_cap) {
        size_t old = b->um_cap, cap = old ? 2 * old : 256;
        int rc = CM_OK;
        uint32_t *t = cm_balloc(b->bud, cap * sizeof *t, true, &rc), *prev = b->um;
        if (rc) return rc;
        b->um = t, b->um_cap = cap;
        for (size_t i = 0; i < old; i++)
            if (prev[i]) {
                const uint32_t *e = b->upool.data + prev[i] - 1;
                b->um[db_memo_slot(b, e + 1, e[0])] = prev[i];
            }
        cm_bfree(b->bud, prev);
    }
    size_t i = db_memo_slot(b, b->stk.data + v_at, n);
    if (b->um[i]) {
        *found = true;
        *res = b->um[i] - 1 + 1 + n;
        return CM_OK;
    }
    *found = false;
    size_t at = b->upool.n;
    int rc = cm_vec_reserve(&b->upool, at + n + 2);
    if (rc) return rc;
    b->upool.data[at] = n;
    memcpy(b->upool.data + at + 1, b->stk.data + v_at, n * sizeof *b->upool.data);
    b->upool.data[at + 1 + n] = UINT32_MAX;
    b->upool.n = at + n + 2;
    b->um[i] = (uint32_t)at + 1;
    b->um_n++;
    *res = at + 1 + n;
    return CM_OK;
}

/* The union of the states b->stk[at .. at + n) (popped): the one state when they are one,
 * else a new state (into == UINT32_MAX) or pending state `into`, filled: accepting when one
 * is, on each byte and label the union of their targets there (made the same way: subset
 * construction on demand, for a literal's prefix that two branches share).  DB_NO on a
 * pending operand or past DB_MAX_UNION levels (a union that loops). */
static int db_union(dbuilder *b, size_t at, uint32_t into, uint32_t *out, int depth) {
    uint32_t n = db_sort_unique(b->stk.data + at, (uint32_t)(b->stk.n - at)), acc = 0;
    b->stk.n = at + n;
    int rc = CM_OK;
    if (!n || depth > DB_MAX_UNION) rc = DB_NO;
    if (!rc && n == 1 && into == UINT32_MAX) *out = b->stk.data[at];
    for (uint32_t i = 0; !rc && i < n; i++) {
        uint32_t s = b->stk.data[at + i];
        if (b->acc.data[s] == PENDING) rc = DB_NO;
        acc |= b->acc.data[s];
    }
    if (rc || (n == 1 && into == UINT32_MAX)) {
        b->stk.n = at;
        return rc;
    }
    size_t memo = 0;
    if (into == UINT32_MAX) { /* made before (or in progress: a union that loops) */
        bool found;
        if ((rc = db_memo(b, at, n, &memo, &found))) {
            b->stk.n = at;
            return rc;
        }
        if (found) {
            b->stk.n = at;
            if (b->upool.data[memo] == UINT32_MAX) return DB_NO;
            *out = b->upool.data[memo];
            return CM_OK;
        }
        *out = UINT32_MAX; /* a new state */
        rc = db_union_made(b, at, n, acc, out, depth);
        if (!rc) b->upool.data[memo] = *out;
        return rc;
    }
    rc = db_union_made(b, at, n, acc, &into, depth);
    if (!rc) *out = into;
    return rc;
}

/* State *io (a new one when UINT32_MAX) given acceptance acc, the n_bytes (range, target) pairs at
 * stk[bytes] as its byte edges and the n_lab (label, target) pairs at stk[labs] as its label edges;
 * the stack cut back to at, also on an error (rc in: an earlier one, which skips the fill). */
static int db_fill(dbuilder *b, int rc, uint32_t acc, size_t bytes, uint32_t n_bytes, size_t labs, uint32_t n_lab,
                   size_t at, uint32_t *io) {
    uint32_t into = *io;
    bool fresh = into == UINT32_MAX;
    if (!rc && fresh) rc = db_new(b, acc, &into);
    if (!rc) {
        b->acc.data[into] = acc;
        db_open(b, into);
    }
    for (uint32_t i = 0; !rc && i < n_bytes; i++) {
        uint32_t r = b->stk.data[bytes + 2 * i];
        rc = db_edge(b, r & 0xFF, r >> 8, b->stk.data[bytes + 2 * i + 1], into);
    }
    for (uint32_t i = 0; !rc && i < n_lab; i++)
        if (!(rc = cm_vec_push(&b->lab, b->stk.data[labs + 2 * i]))) rc = cm_vec_push(&b->lto, b->stk.data[labs + 2 * i + 1]);
    b->stk.n = at;
    if (rc) return rc;
    if (fresh) return db_finish(b, into, io);
    db_close(b, into);
    b->fills++;
    *io = into;
    return CM_OK;
}

static int db_union_made(dbuilder *b, size_t at, uint32_t n, uint32_t acc, uint32_t *io, int depth) {
    int rc = CM_OK;
    size_t g = b->stk.n;
    bool clash = false;
    for (uint32_t i = 0; !rc && i < n; i++) { /* every edge: when none overlap, the union is their list */
        uint32_t s = b->stk.data[at + i];
        for (uint32_t e = b->e0.data[s]; !rc && e < b->e1.data[s]; e++) rc = cm_vec_push2(&b->stk, b->rng.data[e], b->to.data[e]);
    }
    size_t gl = b->stk.n;
    for (uint32_t i = 0; !rc && i < n; i++) {
        uint32_t s = b->stk.data[at + i];
        for (uint32_t e = b->l0.data[s]; !rc && e < b->l1.data[s]; e++) rc = cm_vec_push2(&b->stk, b->lab.data[e], b->lto.data[e]);
    }
    if (rc) {
        b->stk.n = at;
        return rc;
    }
    uint32_t ne = (uint32_t)(gl - g) / 2, nl = (uint32_t)(b->stk.n - gl) / 2;
    for (int k = 0; k < 2; k++) { /* bytes by first byte, labels by value (insertion: a few) */
        uint32_t *p = b->stk.data + (k ? gl : g), m = k ? nl : ne;
        for (uint32_t i = 1; i < m; i++) {
            uint32_t x = p[2 * i], y = p[2 * i + 1], j = i;
            for (; j && (p[2 * j - 2] & (k ? UINT32_MAX : 0xFF)) > (x & (k ? UINT32_MAX : 0xFF)); j--)
                p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
            p[2 * j] = x, p[2 * j + 1] = y;
        }
        for (uint32_t i = 1; i < m; i++)
            clash |= k ? p[2 * i] == p[2 * i - 2] : (p[2 * i - 2] >> 8) >= (p[2 * i] & 0xFF);
    }
    if (!clash) return db_fill(b, CM_OK, acc, g, ne, gl, nl, at, io);
    b->stk.n = g;
    size_t res = b->stk.n; /* (lo | hi << 8, target) for each piece, then (label, target) */
    uint32_t n_bytes = 0, cur[DB_SWEEP];
    bool sweep = n <= DB_SWEEP;
    uint8_t cut[257] = {0};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = b->stk.data[at + i];
        if (sweep) cur[i] = b->e0.data[s];
        else
            for (uint32_t e = b->e0.data[s]; e < b->e1.data[s]; e++)
                cut[b->rng.data[e] & 0xFF] = 1, cut[(b->rng.data[e] >> 8) + 1] = 1;
    }
    for (uint32_t x = 0; !rc && x < 256;) { /* the pieces x .. y - 1 where the same edges cover */
        uint32_t y = 256;
        size_t tmp = b->stk.n;
        for (uint32_t i = 0; !rc && i < n; i++) { /* each operand's edge over x .. y - 1 */
            uint32_t s = b->stk.data[at + i], e1 = b->e1.data[s];
            if (!sweep) {
                for (uint32_t e = b->e0.data[s]; !rc && e < e1; e++)
                    if ((b->rng.data[e] & 0xFF) <= x && x <= b->rng.data[e] >> 8) rc = cm_vec_push(&b->stk, b->to.data[e]);
                continue;
            }
            while (cur[i] < e1 && (b->rng.data[cur[i]] >> 8) < x) cur[i]++; /* (edges ascending, disjoint) */
            if (cur[i] == e1) continue;
            uint32_t lo = b->rng.data[cur[i]] & 0xFF, hi = b->rng.data[cur[i]] >> 8;
            if (lo <= x) {
                rc = cm_vec_push(&b->stk, b->to.data[cur[i]]);
                y = hi + 1 < y ? hi + 1 : y;
            } else {
                y = lo < y ? lo : y;
            }
        }
        if (!sweep)
            for (y = x + 1; y < 256 && !cut[y];) y++;
        uint32_t t = UINT32_MAX;
        if (!rc && b->stk.n > tmp) rc = db_union(b, tmp, UINT32_MAX, &t, depth + 1);
        b->stk.n = tmp;
        if (!rc && t != UINT32_MAX) rc = db_edge_piece(b, x, y - 1, t, res, &n_bytes);
        x = y;
    }
    size_t pairs = b->stk.n;
    for (uint32_t i = 0; !rc && i < n; i++) {
        uint32_t s = b->stk.data[at + i];
        for (uint32_t e = b->l0.data[s]; !rc && e < b->l1.data[s]; e++) rc = cm_vec_push2(&b->stk, b->lab.data[e], b->lto.data[e]);
    }
    size_t end = b->stk.n;
    for (size_t i = pairs; !rc && i < end; i += 2) { /* each label not seen before: its targets united */
        uint32_t l = b->stk.data[i], seen = 0;
        for (size_t j = pairs; j < i; j += 2) seen |= b->stk.data[j] == l;
        if (seen) continue;
        size_t tmp = b->stk.n;
        for (size_t j = i; !rc && j < end; j += 2)
            if (b->stk.data[j] == l) rc = cm_vec_push(&b->stk, b->stk.data[j + 1]);
        uint32_t t = UINT32_MAX;
        if (!rc) rc = db_union(b, tmp, UINT32_MAX, &t, depth + 1);
        b->stk.n = tmp;
        if (!rc) rc = cm_vec_push2(&b->stk, l, t);
    }
    size_t lab_at = end;
    uint32_t n_lab = (uint32_t)(b->stk.n - end) / 2;
    if (!rc) { /* the labels by value (insertion: a few) */
        uint32_t *p = b->stk.data + lab_at;
        for (uint32_t i = 1; i < n_lab; i++) {
            uint32_t x = p[2 * i], y = p[2 * i + 1], j = i;
            for (; j && p[2 * j - 2] > x; j--) p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
            p[2 * j] = x, p[2 * j + 1] = y;
        }
    }
    return db_fill(b, rc, acc, res, n_bytes, lab_at, n_lab, at, io);
}

static int db_union2(dbuilder *b, uint32_t x, uint32_t y, uint32_t into, uint32_t *out) {
    size_t at = b->stk.n;
    int rc = cm_vec_push2(&b->stk, x, y);
    return rc ? rc : db_union(b, at, into, out, 0);
}

/* Are d's runs (cm_dfa_runs_for_copy) and label edges within its states, each run a byte range? */
static bool db_runs_valid(const cm_dfa_out *d, const cm_dfa_runs *r) {
    uint32_t n = d->n_states;
    for (uint32_t k = 0; k < r->off[n]; k++)
        if (r->to[k] >= n || (r->rng[k] & 0xFF) > (r->rng[k] >> 8)) return false;
    for (uint32_t e = 0; e < d->lab_off[n]; e++)
        if (d->lab_to[e] >= n) return false;
    return true;
}

/* d's rows as runs of classes with one target (the runs kept on d: a callee copied into several
 * callers is walked once), and (acyclic) its states targets first. */
static int db_runs(dbuilder *b, const cm_dfa_out *d) {
    if (b->frag == d) return CM_OK;
    b->frag = NULL;
    b->topo.n = 0;
    uint32_t n = d->n_states;
    free(b->own_runs);
    const cm_dfa_runs *runs = cm_dfa_runs_for_copy(d, &b->own_runs);
    if (!runs) return CM_ERR_NOMEM;
    if (!db_runs_valid(d, runs)) return DB_NO;
    b->runs = runs;
    /* postorder by an iterative DFS (map: 0 new, 1 on the stack, 2 done); a back edge: cyclic */
    int rc = cm_vec_reserve(&b->map, n);
    size_t base = b->stk.n;
    b->frag_acyclic = true;
    for (uint32_t s = 0; !rc && s < n; s++) b->map.data[s] = 0;
    for (uint32_t r = 0; !rc && r < n && b->frag_acyclic; r++) {
        if (b->map.data[r]) continue;
        b->map.data[r] = 1;
        if ((rc = cm_vec_push2(&b->stk, r, 0))) break;
        while (!rc && b->stk.n > base && b->frag_acyclic) {
            uint32_t s = b->stk.data[b->stk.n - 2], i = b->stk.data[b->stk.n - 1]++;
            uint32_t nr = runs->off[s + 1] - runs->off[s], t;
            if (i < nr) t = runs->to[runs->off[s] + i];
            else if (i < nr + d->lab_off[s + 1] - d->lab_off[s]) t = d->lab_to[d->lab_off[s] + i - nr];
            else {
                b->map.data[s] = 2;
                b->stk.n -= 2;
                rc = cm_vec_push(&b->topo, s);
                continue;
            }
            if (b->map.data[t] == 1) b->frag_acyclic = false;
            else if (!b->map.data[t]) b->map.data[t] = 1, rc = cm_vec_push2(&b->stk, t, 0);
        }
    }
    b->stk.n = base;
    if (!rc) b->frag = d;
    return rc;
}

/* A copy of f's DFA into K: its accepting states united with K (K itself where they have no
 * edges: a prefix-free item), made targets first and kept by content when f's DFA is acyclic. */
static int db_embed(dbuilder *b, const cm_ir_frag *f, uint32_t K, uint32_t *out) {
    const cm_dfa_out *d = f->dfa;
    uint32_t n = d->n_states;
    if (!n || d->lab_off[0] != 0) return DB_NO;
    int rc = db_runs(b, d);
    if (!rc) rc = cm_vec_reserve(&b->map, n);
    if (rc) return rc;
    const uint32_t *ro = b->runs->off, *rt = b->runs->to;
    const uint16_t *rr = b->runs->rng;
    if (b->frag_acyclic) {
        for (size_t i = 0; !rc && i < b->topo.n; i++) {
            uint32_t s = b->topo.data[i], x, *map = b->map.data;
            if (d->accepting[s] && ro[s] == ro[s + 1] && d->lab_off[s] == d->lab_off[s + 1]) {
                map[s] = K;
                continue;
            }
            if ((rc = db_new(b, 0, &x))) break;
            for (uint32_t e = ro[s]; !rc && e < ro[s + 1]; e++)
                rc = db_edge(b, rr[e] & 0xFFu, rr[e] >> 8, map[rt[e]], x);
            size_t at = b->stk.n; /* labels by value */
            for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
                rc = cm_vec_push2(&b->stk, f->labels[d->lab[e]], map[d->lab_to[e]]);
            uint32_t nl = (uint32_t)(b->stk.n - at) / 2, *p = b->stk.data + at;
            for (uint32_t i2 = 1; !rc && i2 < nl; i2++) {
                uint32_t lx = p[2 * i2], ly = p[2 * i2 + 1], j = i2;
                for (; j && p[2 * j - 2] > lx; j--) p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
                p[2 * j] = lx, p[2 * j + 1] = ly;
            }
            for (uint32_t i2 = 0; !rc && i2 < nl; i2++)
                if (i2 && p[2 * i2] == p[2 * i2 - 2]) rc = DB_NO; /* (a DFA: one target a label) */
                else if (!(rc = cm_vec_push(&b->lab, p[2 * i2]))) rc = cm_vec_push(&b->lto, p[2 * i2 + 1]);
            b->stk.n = at;
            if (!rc) rc = db_finish(b, x, &x);
            if (!rc && d->accepting[s]) rc = db_union2(b, x, K, UINT32_MAX, &x);
            map[s] = x;
        }
        if (!rc) *out = b->map.data[0];
        return rc;
    }
    /* cyclic: every state made first (pending), then filled; its accepting states' edges and K's
     * must not overlap */
    if (b->acc.data[K] == PENDING) return DB_NO;
    uint32_t *map = b->map.data;
    for (uint32_t s = 0; !rc && s < n; s++) {
        if (d->accepting[s] && ro[s] == ro[s + 1] && d->lab_off[s] == d->lab_off[s + 1]) map[s] = K;
        else rc = db_new(b, PENDING, &map[s]);
    }
    for (uint32_t s = 0; !rc && s < n; s++) {
        uint32_t q = map[s];
        if (q == K) continue;
        size_t at = b->stk.n;
        rc = cm_vec_push(&b->stk, q);
        for (uint32_t e = ro[s]; !rc && e < ro[s + 1]; e++) /* f's edges first, then K's: ascending */
            rc = cm_vec_push2(&b->stk, rr[e], map[rt[e]]);
        if (rc) break;
        db_open(b, q);
        uint32_t ke = d->accepting[s] ? b->e0.data[K] : 0, ke1 = d->accepting[s] ? b->e1.data[K] : 0;
        size_t i = at + 1;
        while (!rc && (i < b->stk.n || ke < ke1)) { /* merge the two ascending lists */
            bool mine = ke >= ke1 || (i < b->stk.n && (b->stk.data[i] & 0xFF) < (b->rng.data[ke] & 0xFF));
            uint32_t r = mine ? b->stk.data[i] : b->rng.data[ke], t = mine ? b->stk.data[i + 1] : b->to.data[ke];
            size_t last = b->rng.n;
            if (last > b->e0.data[q] && (b->rng.data[last - 1] >> 8) >= (r & 0xFF)) rc = DB_NO; /* overlap */
            else rc = db_edge(b, r & 0xFF, r >> 8, t, q);
            if (mine) i += 2;
            else ke++;
        }
        b->stk.n = at;
        size_t lat = b->stk.n;
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            rc = cm_vec_push2(&b->stk, f->labels[d->lab[e]], map[d->lab_to[e]]);
        for (uint32_t e = b->l0.data[K]; !rc && d->accepting[s] && e < b->l1.data[K]; e++)
            rc = cm_vec_push2(&b->stk, b->lab.data[e], b->lto.data[e]);
        uint32_t nl = (uint32_t)(b->stk.n - lat) / 2, *p = b->stk.data + lat;
        for (uint32_t i2 = 1; !rc && i2 < nl; i2++) {
            uint32_t lx = p[2 * i2], ly = p[2 * i2 + 1], j = i2;
            for (; j && p[2 * j - 2] > lx; j--) p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
            p[2 * j] = lx, p[2 * j + 1] = ly;
        }
        for (uint32_t i2 = 0; !rc && i2 < nl; i2++)
            if (i2 && p[2 * i2] == p[2 * i2 - 2]) rc = DB_NO;
            else if (!(rc = cm_vec_push(&b->lab, p[2 * i2]))) rc = cm_vec_push(&b->lto, p[2 * i2 + 1]);
        b->stk.n = lat;
        if (rc) break;
        b->acc.data[q] = d->accepting[s] ? b->acc.data[K] : 0;
        db_close(b, q);
        b->fills++;
    }
    if (!rc) *out = map[0];
    return rc;
}

static int db_build(dbuilder *b, uint32_t pc, uint32_t K, int depth, uint32_t *out);

/* A chain of len byte ranges into K, range i p[i * stride] .. p[i * stride + stride - 1]. */
static int db_chain(dbuilder *b, const uint32_t *p, uint32_t len, uint32_t stride, uint32_t K, uint32_t *out) {
    uint32_t cur = K;
    int rc = CM_OK;
    for (uint32_t i = len; !rc && i > 0; i--)
        rc = db_edge_state(b, p[(size_t)(i - 1) * stride], p[(size_t)(i - 1) * stride + stride - 1], cur, &cur);
    *out = cur;
    return rc;
}

/* The union of the states the caller pushed on b->stk from `base` on (popped). */
static int db_union_from(dbuilder *b, size_t base, uint32_t *out) {
    if (b->stk.n == base) return DB_NO;
    return db_union(b, base, UINT32_MAX, out, 0);
}

static int db_utf8(dbuilder *b, uint32_t pc, uint32_t K, uint32_t *out) {
    const uint32_t *code = b->in->code;
    size_t len_code = b->in->code_len, p = (size_t)pc + 2 + 2 * (size_t)code[pc + 1], base = b->stk.n;
    if (p >= len_code) return DB_NO;
    uint32_t n_seqs = code[p++];
    int rc = CM_OK;
    for (uint32_t k = 0; !rc && k < n_seqs; k++) {
        uint32_t len = p < len_code ? code[p++] : 0, s;
        if (!len || p + 2 * (size_t)len > len_code) rc = DB_NO;
        if (!rc) rc = db_chain(b, code + p, len, 2, K, &s);
        if (!rc) rc = cm_vec_push(&b->stk, s);
        p += 2 * (size_t)len;
    }
    if (rc) {
        b->stk.n = base;
        return rc;
    }
    return db_union_from(b, base, out);
}

/* BYTES [op, n, (lo, hi) * n]: one state, its ranges (sorted, joined) into K. */
static int db_bytes(dbuilder *b, uint32_t pc, uint32_t K, uint32_t *out) {
    const uint32_t *code = b->in->code + pc + 2;
    uint32_t n = b->in->code[pc + 1], x;
    if (!n) return DB_NO;
    size_t at = b->stk.n;
    int rc = CM_OK;
    for (uint32_t i = 0; !rc && i < n; i++) { /* (lo, hi) pairs by lo (insertion: a few) */
        uint32_t lo = code[2 * i], hi = code[2 * i + 1];
        if (lo > hi || hi > 255) rc = DB_NO;
        else rc = cm_vec_push2(&b->stk, lo, hi);
    }
    uint32_t *p = b->stk.data + at;
    for (uint32_t i = 1; !rc && i < n; i++) {
        uint32_t lo = p[2 * i], hi = p[2 * i + 1], j = i;
        for (; j && p[2 * j - 2] > lo; j--) p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
        p[2 * j] = lo, p[2 * j + 1] = hi;
    }
    if (!rc) rc = db_new(b, 0, &x);
    for (uint32_t i = 0; !rc && i < n;) { /* overlapping or adjacent ranges joined */
        uint32_t lo = p[2 * i], hi = p[2 * i + 1];
        for (i++; i < n && p[2 * i] <= hi + 1; i++) hi = p[2 * i + 1] > hi ? p[2 * i + 1] : hi;
        rc = db_edge(b, lo, hi, K, x);
    }
    b->stk.n = at;
    return rc ? rc : db_finish(b, x, out);
}

/* A counted item's template: the item built once into placeholder P (pending), its start T, its
 * states [first, last) (made targets first); tm: those reached from T (0 or 1), the rest
 * UINT32_MAX.  n_t states reached from T, with n_e byte and n_l label edges; fresh: every one of
 * them reaches P and no two adjacent byte edges of one share a target (db_copy_fresh). */
typedef struct {
    uint32_t item, P, T, first, last;
    uint32_t n_t, n_e, n_l;
    bool fresh;
} db_tpl;

static int g_fresh_copy = 1;
static size_t g_fresh_copies;

void cm_direct_fresh_copy_enable(int on) { g_fresh_copy = on; }
size_t cm_direct_fresh_copies(void) { return g_fresh_copies; }

static int db_template(dbuilder *b, uint32_t item, int depth, const uint32_t *with, uint32_t n_with, db_tpl *t) {
    *t = (db_tpl){item, UINT32_MAX, 0, 0, 0, 0, 0, 0, false};
    size_t fills = b->fills;
    uint32_t P, T;
    int rc = db_new(b, PENDING, &P);
    if (!rc) rc = db_build(b, item, P, depth + 1, &T);
    if (!rc && n_with && T != P) { /* united with the states `with` (the rests ending there) */
        size_t at = b->stk.n;
        rc = cm_vec_push(&b->stk, T);
        for (uint32_t i = 0; !rc && i < n_with; i++) rc = cm_vec_push(&b->stk, with[i]);
        if (!rc) rc = db_union_from(b, at, &T);
        b->stk.n = at;
        if (rc == DB_NO) return CM_OK; /* (P met in the union) no template */
    }
    if (rc) return rc;
    uint32_t first = P + 1, last = (uint32_t)b->acc.n;
    if (b->fills != fills || T < first || T >= last) return CM_OK; /* built again for each position */
    if ((rc = cm_vec_reserve(&b->tmap, (size_t)(last - first) + 1))) return rc;
    uint32_t *tm = b->tmap.data;
    for (uint32_t s = first; s < last; s++) tm[s - first] = UINT32_MAX;
    size_t base = b->stk.n;
    tm[T - first] = 0;
    rc = cm_vec_push(&b->stk, T);
    while (!rc && b->stk.n > base) {
        uint32_t s = b->stk.data[--b->stk.n];
        for (uint32_t e = b->e0.data[s]; !rc && e < b->e1.data[s]; e++) {
            uint32_t x = b->to.data[e];
            if (x >= first && x < last && tm[x - first] == UINT32_MAX) tm[x - first] = 0, rc = cm_vec_push(&b->stk, x);
        }
        for (uint32_t e = b->l0.data[s]; !rc && e < b->l1.data[s]; e++) {
            uint32_t x = b->lto.data[e];
            if (x >= first && x < last && tm[x - first] == UINT32_MAX) tm[x - first] = 0, rc = cm_vec_push(&b->stk, x);
        }
    }
    b->stk.n = base;
    if (rc) return rc;
    /* which reached states reach P (targets first: one pass up), their edges counted */
    uint32_t n_t = 0, n_e = 0, n_l = 0;
    bool fresh = true;
    for (uint32_t s = first; s < last; s++) {
        if (tm[s - first] == UINT32_MAX) continue;
        bool rp = false;
        uint32_t e0 = b->e0.data[s], e1 = b->e1.data[s];
        for (uint32_t e = e0; e < e1; e++) {
            uint32_t x = b->to.data[e];
            rp |= x == P || (x >= first && x < last && tm[x - first] == 1);
            if (e > e0 && x == b->to.data[e - 1] && (b->rng.data[e - 1] >> 8) + 1 == (b->rng.data[e] & 0xFF))
                fresh = false; /* (not as db_edge joins: copied edge by edge) */
        }
        for (uint32_t e = b->l0.data[s]; e < b->l1.data[s]; e++) {
            uint32_t x = b->lto.data[e];
            rp |= x == P || (x >= first && x < last && tm[x - first] == 1);
        }
        tm[s - first] = rp;
        fresh &= rp;
        n_t++, n_e += e1 - e0, n_l += b->l1.data[s] - b->l0.data[s];
    }
    *t = (db_tpl){item, P, T, first, last, n_t, n_e, n_l, fresh && g_fresh_copy};
    return rc;
}

/* db_item's copy where `cur` is a state no other refers to (the start of the position copied
 * last, made last) and every state of the template reaches P: each copy then has an edge to cur
 * or to a copy made before it in this pass, which no state made before this copy has, and two
 * copies that were equal would be two template states that are equal (P to cur, each template
 * state to its own new copy: one to one) -- so every copy is a new state, kept without looking
 * for its equal (db_new's checks once, db_edge's joins none, db_finish's compares none: the same
 * states, edges, ids and table slots as db_item's general loop).  CM_OK with *done false: the
 * caps would stop the copy part way (db_item's loop then gives the same result as before). */
static int db_copy_fresh(dbuilder *b, const db_tpl *t, uint32_t cur, bool *done, uint32_t *out) {
    *done = false;
    uint32_t *tm = b->tmap.data, P = t->P, first = t->first, span = t->last - t->first, n_t = t->n_t;
    size_t n0 = b->acc.n, made = b->made;
    if (n0 + n_t > b->max_made || made + n_t > DB_MARGIN * b->max_made || made + n_t > b->loop_made) return CM_OK;
    if ((made + n_t) >> 10 != made >> 10 && cm_budget_time(b->bud)) return CM_ERR_TIMEOUT;
    int rc = CM_OK;
    cm_vec32 *pv[] = {&b->acc, &b->e0, &b->e1, &b->l0, &b->l1};
    for (size_t i = 0; !rc && i < sizeof pv / sizeof *pv; i++) rc = cm_vec_reserve(pv[i], n0 + n_t);
    if (!rc) rc = cm_vec_reserve(&b->rng, b->rng.n + t->n_e);
    if (!rc) rc = cm_vec_reserve(&b->to, b->to.n + t->n_e);
    if (!rc) rc = cm_vec_reserve(&b->lab, b->lab.n + t->n_l);
    if (!rc) rc = cm_vec_reserve(&b->lto, b->lto.n + t->n_l);
    if (rc) return rc;
    uint32_t *acc = b->acc.data, *e0 = b->e0.data, *e1 = b->e1.data, *l0 = b->l0.data, *l1 = b->l1.data;
    uint32_t *rng = b->rng.data, *to = b->to.data, *lab = b->lab.data, *lto = b->lto.data;
    uint32_t x = (uint32_t)n0, ne = (uint32_t)b->rng.n, nl = (uint32_t)b->lab.n;
    for (uint32_t s = first; s < first + span; s++) {
        if (tm[s - first] == UINT32_MAX) continue;
        acc[x] = acc[s], e0[x] = ne, l0[x] = nl;
        for (uint32_t e = e0[s], end = e1[s]; e < end; e++) {
            uint32_t v = to[e];
            rng[ne] = rng[e], to[ne++] = v == P ? cur : v - first < span ? tm[v - first] : v;
        }
        for (uint32_t e = l0[s], end = l1[s]; e < end; e++) {
            uint32_t v = lto[e];
            lab[nl] = lab[e], lto[nl++] = v == P ? cur : v - first < span ? tm[v - first] : v;
        }
        e1[x] = ne, l1[x] = nl;
        b->acc.n = b->e0.n = b->e1.n = b->l0.n = b->l1.n = x + 1;
        b->rng.n = b->to.n = ne, b->lab.n = b->lto.n = nl;
        if (2 * (b->hc_n + 1) > b->hc_cap && (rc = db_grow(b))) return rc;
        uint32_t h = (uint32_t)db_hash(b, x);
        size_t i = h & (b->hc_cap - 1);
        while (b->hc[i]) i = (i + 1) & (b->hc_cap - 1);
        b->hc[i] = x + 1, b->hh[i] = h, b->hc_n++;
        tm[s - first] = x++;
    }
    b->made = made + n_t;
    g_fresh_copies++;
    *out = tm[t->T - first];
    *done = true;
    return CM_OK;
}

/* item into `cur`: a copy of the template with P replaced by cur, or (no template) item built
 * again.  (b->tmap is the template's until the caller is done: nothing builds in between.) */
static int db_item(dbuilder *b, const db_tpl *t, uint32_t cur, int depth, uint32_t *out) {
    if (t->P == UINT32_MAX) return db_build(b, t->item, cur, depth + 1, out);
    uint32_t *tm = b->tmap.data, P = t->P, first = t->first, last = t->last, n0 = (uint32_t)b->acc.n;
    int rc = CM_OK;
    bool done = false;
    if (t->fresh && cur == b->fresh && cur + 1 == n0 && b->fills == b->fresh_fills)
        rc = db_copy_fresh(b, t, cur, &done, out);
    if (rc || done) goto fresh;
    for (uint32_t s = first; !rc && s < last; s++) {
        if (tm[s - first] == UINT32_MAX) continue;
        uint32_t x;
        if ((rc = db_new(b, b->acc.data[s], &x))) break;
        for (uint32_t e = b->e0.data[s]; !rc && e < b->e1.data[s]; e++) {
            uint32_t v = b->to.data[e];
            v = v == P ? cur : v >= first && v < last ? tm[v - first] : v;
            rc = db_edge(b, b->rng.data[e] & 0xFF, b->rng.data[e] >> 8, v, x);
        }
        for (uint32_t e = b->l0.data[s]; !rc && e < b->l1.data[s]; e++) {
            uint32_t v = b->lto.data[e];
            v = v == P ? cur : v >= first && v < last ? tm[v - first] : v;
            if (!(rc = cm_vec_push(&b->lab, b->lab.data[e]))) rc = cm_vec_push(&b->lto, v);
        }
        if (!rc) rc = db_finish(b, x, &tm[s - first]);
    }
    if (!rc) *out = tm[t->T - first];
fresh: /* the copy's start, made new and last: no state refers to it (until one is made or filled) */
    b->fresh = !rc && *out >= n0 && *out + 1 == b->acc.n ? *out : UINT32_MAX;
    b->fresh_fills = b->fills;
    return rc;
}

/* A branch x{lo,hi} rest: rest's states (into K) start at `start`. */
typedef struct {
    uint32_t lo, hi, start;
} db_branch;

/* The union of branches x{lo_i,hi_i} rest_i (rests built), one chain of item positions from
 * the end: position j is the rests whose counts allow j, united with x then position j + 1
 * (x{m,n} K is one branch).  Branches of one alternative that count the same item (a big
 * count's blocks: x{0,B-1} | x{B} x{0,r}) share their positions instead of being united
 * position by position. */
static int db_counted(dbuilder *b, uint32_t item, const db_branch *br, uint32_t nb, int depth, uint32_t *out) {
    uint32_t hmax = 0, cur = UINT32_MAX, q, with[DB_SWEEP];
    for (uint32_t i = 0; i < nb; i++) hmax = br[i].hi > hmax ? br[i].hi : hmax;
    db_tpl t = {item, UINT32_MAX, 0, 0, 0, 0, 0, 0, false};
    uint64_t key = UINT64_MAX; /* the branches ending at the positions the template is for */
    int rc = CM_OK;
    for (uint32_t j = hmax + 1; !rc && j > 0; j--) {
        size_t at = b->stk.n;
        uint32_t n_with = 0;
        uint64_t k = 0;
        for (uint32_t i = 0; !rc && i < nb; i++)
            if (br[i].lo <= j - 1 && j - 1 <= br[i].hi) {
                rc = cm_vec_push(&b->stk, br[i].start);
                if (n_with < DB_SWEEP) with[n_with] = br[i].start;
                n_with++;
                k |= i < 63 ? 1ull << i : 1ull << 63;
            }
        if (!rc && cur != UINT32_MAX) {
            /* the position: a template copy (the item into a placeholder, united with these
             * rests, built once for each run of positions where the same branches end) */
            if (k != key && nb <= 63 && n_with <= DB_SWEEP && hmax >= 2) {
                rc = db_template(b, item, depth, with, n_with, &t);
                key = k;
                uint32_t n_t = 0; /* the copies would pass the cap: give up now, not a cap later */
                for (uint32_t x = t.first; !rc && t.P != UINT32_MAX && x < t.last; x++)
                    n_t += b->tmap.data[x - t.first] != UINT32_MAX;
                if (!rc && b->acc.n + (size_t)(j - 1) * n_t >= b->max_made) rc = DB_NO;
            }
            if (!rc && t.P != UINT32_MAX && key == k) {
                b->stk.n = at;
                rc = db_item(b, &t, cur, depth, &cur);
                continue;
            }
            if (!rc) rc = db_build(b, item, cur, depth + 1, &q);
            if (!rc && q == cur) rc = DB_NO; /* an empty item */
            if (!rc) rc = cm_vec_push(&b->stk, q);
        }
        if (!rc) rc = db_union_from(b, at, &cur);
        b->stk.n = at;
    }
    *out = cur;
    return rc;
}

/* REPEAT [op, lo, hi, item]: x{lo,hi} into K (db_counted); unbounded: lo items into a loop
 * state (item back into it, or K).  The item is built once into a placeholder and copied for
 * each position (its states are made targets first, so a copy is one pass), unless it fills
 * a pending state (a loop inside). */
static int db_repeat(dbuilder *b, uint32_t pc, uint32_t K, int depth, uint32_t *out) {
    const uint32_t *code = b->in->code;
    uint32_t lo = code[pc + 1], hi = code[pc + 2], item = code[pc + 3], cur = K, q;
    if (hi != CM_IR_INF) {
        db_branch one = {lo, hi, K};
        return hi < lo ? DB_NO : db_counted(b, item, &one, 1, depth, out);
    }
    db_tpl t = {item, UINT32_MAX, 0, 0, 0, 0, 0, 0, false};
    uint32_t loop;
    int rc = lo >= 1 ? db_template(b, item, depth, NULL, 0, &t) : CM_OK;
    if (rc || (rc = db_new(b, PENDING, &loop)) || (rc = db_item(b, &t, loop, depth, &q))) return rc;
    if (q == loop) return DB_NO;
    if ((rc = db_union2(b, q, K, loop, &cur))) return rc;
    for (uint32_t j = lo; !rc && j > 0; j--) {
        if ((rc = db_item(b, &t, cur, depth, &q))) break;
        if (q == cur) return DB_NO; /* an empty item */
        cur = q;
    }
    *out = cur;
    return rc;
}

/* pc with expanded names followed to their bodies. */
static uint32_t db_resolve(const cm_ir_input *in, uint32_t pc) {
    for (int k = 0; k < 64 && (size_t)pc + 2 <= in->code_len && in->code[pc] == CM_IR_REF; k++) {
        const cm_ir_ref *r = cm_ir_find_ref(in, in->code[pc + 1]);
        if (!r || r->kind != CM_IR_REF_EXPAND) break;
        pc = r->arg;
    }
    return pc;
}

/* Does branch pc start with a bounded count (x{lo,hi}, alone or first in a sequence whose
 * other items are the rest: seq's children from 1 on)? */
static bool db_lead(const cm_ir_input *in, uint32_t pc, uint32_t *item, uint32_t *lo, uint32_t *hi, uint32_t *seq) {
    const uint32_t *code = in->code;
    pc = db_resolve(in, pc);
    *seq = UINT32_MAX;
    if ((size_t)pc + 2 > in->code_len) return false;
    if (code[pc] == CM_IR_SEQ && code[pc + 1] >= 1 && (size_t)pc + 2 + code[pc + 1] <= in->code_len) {
        *seq = pc;
        pc = db_resolve(in, code[pc + 2]);
    }
    if ((size_t)pc + 4 > in->code_len || code[pc] != CM_IR_REPEAT || code[pc + 2] == CM_IR_INF
        || code[pc + 2] < code[pc + 1])
        return false;
    *item = code[pc + 3], *lo = code[pc + 1], *hi = code[pc + 2];
    return true;
}

/* ALT [op, n, child * n] where two or more branches start with a bounded count of one item:
 * their rests built, then db_counted; *done false (nothing built) otherwise. */
static int db_alt_counted(dbuilder *b, uint32_t pc, uint32_t K, int depth, bool *done, uint32_t *out) {
    const cm_ir_input *in = b->in;
    const uint32_t *kids = in->code + pc + 2;
    uint32_t n = in->code[pc + 1], item = UINT32_MAX, x, lo, hi, seq, same = 0;
    *done = false;
    for (uint32_t i = 0; i < n; i++)
        if (db_lead(in, kids[i], &x, &lo, &hi, &seq) && (item == UINT32_MAX || x == item)) item = x, same++;
    if (same < 2) return CM_OK;
    *done = true;
    int rc = CM_OK;
    db_branch *br = cm_balloc(b->bud, ((size_t)n + 1) * sizeof *br, false, &rc);
    for (uint32_t i = 0; !rc && i < n; i++) {
        uint32_t cur = K;
        if (db_lead(in, kids[i], &x, &lo, &hi, &seq) && x == item) {
            for (uint32_t k = seq == UINT32_MAX ? 0 : in->code[seq + 1]; !rc && k > 1; k--)
                rc = db_build(b, in->code[seq + 2 + k - 1], cur, depth + 1, &cur);
            br[i] = (db_branch){lo, hi, cur};
        } else {
            rc = db_build(b, kids[i], K, depth + 1, &cur);
            br[i] = (db_branch){0, 0, cur};
        }
    }
    if (!rc) rc = db_counted(b, item, br, n, depth, out);
    cm_bfree(b->bud, br);
    return rc;
}

static int db_ref(dbuilder *b, uint32_t name, uint32_t K, int depth, uint32_t *out) {
    const cm_ir_input *in = b->in;
    if (name >= in->n_names) return DB_NO;
    const cm_ir_ref *r = cm_ir_find_ref(in, name);
    if (r && r->kind == CM_IR_REF_ENTRY) return DB_NO;
    if (r && r->kind == CM_IR_REF_EMBED)
        return r->arg < in->n_frags ? db_embed(b, &in->frags[r->arg], K, out) : DB_NO;
    if (r && r->kind == CM_IR_REF_EXPAND) return db_build(b, r->arg, K, depth + 1, out);
    uint32_t x;
    int rc = db_new(b, 0, &x);
    if (!rc) rc = cm_vec_push(&b->lab, in->label[name]);
    if (!rc) rc = cm_vec_push(&b->lto, K);
    return rc ? rc : db_finish(b, x, out);
}

/* *out: a state whose language is node pc's followed by K's. */
static int db_build(dbuilder *b, uint32_t pc, uint32_t K, int depth, uint32_t *out) {
    const cm_ir_input *in = b->in;
    if (depth > DB_MAX_DEPTH || !cm_ir_node_fits(in, pc)) return DB_NO;
    uint32_t op = in->code[pc], n = in->code[pc + 1];
    int rc = CM_OK;
    switch (op) {
    case CM_IR_LIT:
        for (uint32_t i = 0; i < n; i++)
            if (in->code[pc + 2 + i] > 255) return DB_NO;
        return db_chain(b, in->code + pc + 2, n, 1, K, out);
    case CM_IR_BYTES:
        return db_bytes(b, pc, K, out);
    case CM_IR_UTF8:
        return db_utf8(b, pc, K, out);
    case CM_IR_SEQ: {
        uint32_t cur = K;
        for (uint32_t i = n; !rc && i > 0; i--) rc = db_build(b, in->code[pc + 2 + i - 1], cur, depth + 1, &cur);
        *out = cur;
        return rc;
    }
    case CM_IR_ALT: {
        bool done;
        if ((rc = db_alt_counted(b, pc, K, depth, &done, out)) || done) return rc;
        size_t base = b->stk.n;
        for (uint32_t i = 0; !rc && i < n; i++) {
            uint32_t s;
            if (!(rc = db_build(b, in->code[pc + 2 + i], K, depth + 1, &s))) rc = cm_vec_push(&b->stk, s);
        }
        if (rc) {
            b->stk.n = base;
            return rc;
        }
        return db_union_from(b, base, out);
    }
    case CM_IR_REPEAT:
        return db_repeat(b, pc, K, depth, out);
    case CM_IR_REF:
        return db_ref(b, n, K, depth, out);
    default:
        return DB_NO; /* WORDS (words.c), BADTOKEN, a bad op: Thompson's path */
    }
}

/* The states reached from `start`, breadth first (byte edges ascending, then labels by
 * value), as a DFA with its sparse edges for cm_fsm_minimize. */
static int db_take(dbuilder *b, uint32_t start, cm_dfa_out **out, cm_sparse_edges *sp, bool *dead_end) {
    size_t n_made = b->acc.n;
    int rc = CM_OK;
    uint32_t *id = cm_balloc(b->bud, (n_made + 1) * sizeof *id, false, &rc);
    uint32_t *order = cm_balloc(b->bud, (n_made + 1) * sizeof *order, false, &rc);
    cm_dfa_out *d = NULL;
    if (rc) goto out;
    for (size_t s = 0; s < n_made; s++) id[s] = UINT32_MAX;
    uint32_t n = 0;
    id[start] = n, order[n++] = start;
    size_t n_lab = 0;
    uint8_t cut[257] = {0};
    cut[0] = 1;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t s = order[k];
        if (b->acc.data[s] == PENDING) {
            rc = DB_NO;
            goto out;
        }
        for (uint32_t e = b->e0.data[s]; e < b->e1.data[s]; e++) {
            uint32_t t = b->to.data[e], r = b->rng.data[e];
            cut[r & 0xFF] = 1, cut[(r >> 8) + 1] = 1;
            if (id[t] == UINT32_MAX) id[t] = n, order[n++] = t;
        }
        for (uint32_t e = b->l0.data[s]; e < b->l1.data[s]; e++) {
            uint32_t t = b->lto.data[e];
            if (id[t] == UINT32_MAX) id[t] = n, order[n++] = t;
        }
        n_lab += b->l1.data[s] - b->l0.data[s];
        if (!b->acc.data[s] && b->e0.data[s] == b->e1.data[s] && b->l0.data[s] == b->l1.data[s]) *dead_end = true;
    }
    uint8_t cls[256];
    uint32_t nc = 0;
    d = calloc(1, sizeof *d);
    if (!d) {
        rc = CM_ERR_NOMEM;
        goto out;
    }
    for (uint32_t x = 0; x < 256; x++) {
        if (cut[x]) d->class_lo[nc++] = (uint16_t)x;
        cls[x] = (uint8_t)(nc - 1);
    }
    d->class_lo[nc] = 256;
    d->n_states = n;
    d->n_classes = nc;
    d->accepting = calloc(n, 1);
    d->lab_off = malloc(((size_t)n + 1) * sizeof *d->lab_off);
    d->lab = malloc((n_lab + 1) * sizeof *d->lab);
    d->lab_to = malloc((n_lab + 1) * sizeof *d->lab_to);
    if (!d->accepting || !d->lab_off || !d->lab || !d->lab_to) {
        cm_dfa_out_free(d);
        d = NULL;
        rc = CM_ERR_NOMEM;
        goto out;
    }
    d->lab_off[0] = 0;
    if ((rc = cm_vec_push(&sp->off, 0))) goto out;
    for (uint32_t k = 0, nl = 0; !rc && k < n; k++) {
        uint32_t s = order[k];
        d->accepting[k] = (uint8_t)b->acc.data[s];
        /* a state's ranges are disjoint: at most nc classes (room once, not a check a class) */
        if ((rc = cm_vec_reserve(&sp->cls, sp->cls.n + nc)) || (rc = cm_vec_reserve(&sp->to, sp->to.n + nc))) break;
        uint32_t *sc = sp->cls.data, *st = sp->to.data, m = (uint32_t)sp->cls.n;
        for (uint32_t e = b->e0.data[s]; e < b->e1.data[s]; e++) {
            uint32_t r = b->rng.data[e], t = id[b->to.data[e]];
            for (uint32_t c = cls[r & 0xFF]; c <= cls[r >> 8]; c++) sc[m] = c, st[m++] = t;
        }
        sp->cls.n = sp->to.n = m;
        if (!rc) rc = cm_vec_push(&sp->off, m);
        for (uint32_t e = b->l0.data[s]; e < b->l1.data[s]; e++) d->lab[nl] = b->lab.data[e], d->lab_to[nl++] = id[b->lto.data[e]];
        d->lab_off[k + 1] = nl;
    }
    if (!rc) rc = cm_budget_charge(b->bud, cm_dfa_bytes(d));
    if (rc) {
        cm_dfa_out_free(d);
        d = NULL;
    }
out:
    cm_bfree(b->bud, id);
    cm_bfree(b->bud, order);
    *out = d;
    return rc;
}

/* Is d's graph (byte and label edges) cyclic?  An iterative DFS over its runs (kept on d for the
 * copy that follows, cm_dfa_runs_for_copy), where reading its rows entry by entry cost more than
 * the copy; scratch from bud. */
static int db_dfa_cyclic(const cm_dfa_out *d, cm_budget *bud, bool *cyclic) {
    uint32_t n = d->n_states;
    int rc = CM_OK;
    cm_dfa_runs *own = NULL;
    const cm_dfa_runs *runs = cm_dfa_runs_for_copy(d, &own);
    uint8_t *color = cm_balloc(bud, (size_t)n + 1, true, &rc);
    uint32_t *st = cm_balloc(bud, 2 * ((size_t)n + 1) * sizeof *st, false, &rc);
    if (!rc && !runs) rc = CM_ERR_NOMEM;
    *cyclic = false;
    for (uint32_t r = 0; !rc && r < n && !*cyclic; r++) {
        if (color[r]) continue;
        size_t sp = 0;
        color[r] = 1, st[sp++] = r, st[sp++] = 0;
        while (sp && !*cyclic) {
            uint32_t s = st[sp - 2], i = st[sp - 1]++, nr = runs->off[s + 1] - runs->off[s], t;
            if (i < nr) t = runs->to[runs->off[s] + i];
            else if (i - nr < d->lab_off[s + 1] - d->lab_off[s]) t = d->lab_to[d->lab_off[s] + i - nr];
            else {
                color[s] = 2, sp -= 2;
                continue;
            }
            if (t >= n) continue;
            if (color[t] == 1) *cyclic = true;
            else if (!color[t]) color[t] = 1, st[sp++] = t, st[sp++] = 0;
        }
    }
    cm_bfree(bud, color);
    cm_bfree(bud, st);
    free(own);
    return rc;
}

static int g_direct_loops = 1;

void cm_direct_loops_enable(int on) { g_direct_loops = on; }

#define DB_EST_MAX ((size_t)1 << 40)

/* The states of node pc's NFA on Thompson's path, about (as components.c's count_states: a
 * literal's bytes, a count's copies of its item, a copied DFA's states), at most DB_EST_MAX. */
static size_t db_est(const cm_ir_input *in, uint32_t pc, int depth) {
    if (depth > 64 || !cm_ir_node_fits(in, pc)) return DB_EST_MAX;
    const uint32_t *code = in->code;
    uint32_t op = code[pc], n = code[pc + 1];
    size_t got = 0;
    switch (op) {
    case CM_IR_LIT:
        return n;
    case CM_IR_SEQ:
    case CM_IR_ALT:
        got = n;
        for (uint32_t i = 0; i < n && got < DB_EST_MAX; i++) got += db_est(in, code[pc + 2 + i], depth + 1);
        return got < DB_EST_MAX ? got : DB_EST_MAX;
    case CM_IR_REPEAT: {
        size_t item = db_est(in, code[pc + 3], depth + 1) + 1;
        size_t times = code[pc + 2] == CM_IR_INF ? (size_t)code[pc + 1] + 1 : code[pc + 2];
        return item < DB_EST_MAX && times < DB_EST_MAX / item ? item * times + 1 : DB_EST_MAX;
    }
    case CM_IR_REF: {
        const cm_ir_ref *r = n < in->n_names ? cm_ir_find_ref(in, n) : NULL;
        if (r && r->kind == CM_IR_REF_EXPAND) return db_est(in, r->arg, depth + 1);
        if (r && r->kind == CM_IR_REF_EMBED && r->arg < in->n_frags) return in->frags[r->arg].dfa->n_states;
        return 1;
    }
    default:
        return 1; /* a byte class, a UTF-8 class (its sequences: a few states) */
    }
}

/* Is the body at pc one this build is for: a bounded count of two or more items (a chain of
 * positions, which Thompson's NFA makes with an epsilon edge each and subset construction
 * walks state by state), and no loop (an unbounded repetition -- allowed where `loop` is given:
 * *loop set -- or a copied DFA with a cycle,
 * whose states this build cannot share by content, so its DFA before minimization can be
 * far larger than subset construction's)?  The IR is scanned first (at most `*budget` nodes;
 * *bad: something this build does not make), the copied DFAs' cycles looked for only once it
 * has no repetition (over their runs, kept on them for the copy: db_dfa_cyclic); a copied
 * acyclic DFA makes the body worth it without a count (db_worth_it). */
static void db_worth(const cm_ir_input *in, uint32_t pc, int depth, size_t *budget, bool *count, bool *bad,
                     bool *loop, cm_vec32 *embeds) {
    if (*bad) return;
    if (!*budget || depth > 64 || (size_t)pc + 2 > in->code_len) {
        *bad = true;
        return;
    }
    --*budget;
    const uint32_t *code = in->code;
    uint32_t op = code[pc], n = code[pc + 1];
    switch (op) {
    case CM_IR_SEQ:
    case CM_IR_ALT:
        if ((size_t)pc + 2 + n > in->code_len) *bad = true;
        for (uint32_t i = 0; !*bad && i < n; i++)
            db_worth(in, code[pc + 2 + i], depth + 1, budget, count, bad, loop, embeds);
        return;
    case CM_IR_REPEAT:
        if ((size_t)pc + 4 > in->code_len || (code[pc + 2] == CM_IR_INF && !loop)) {
            *bad = true; /* (a loop, not allowed) */
            return;
        }
        if (code[pc + 2] == CM_IR_INF) *loop = true;
        else if (code[pc + 2] >= 2) *count = true;
        db_worth(in, code[pc + 3], depth + 1, budget, count, bad, loop, embeds);
        return;
    case CM_IR_REF: {
        const cm_ir_ref *r = n < in->n_names ? cm_ir_find_ref(in, n) : NULL;
        if (r && r->kind == CM_IR_REF_EXPAND) db_worth(in, r->arg, depth + 1, budget, count, bad, loop, embeds);
        else if (r && r->kind == CM_IR_REF_EMBED && r->arg < in->n_frags && cm_vec_push(embeds, r->arg)) *bad = true;
        else if (r && r->kind == CM_IR_REF_ENTRY) *bad = true;
        return;
    }
    case CM_IR_WORDS:
    case CM_IR_BADTOKEN:
        *bad = true;
        return;
    default:
        return;
    }
}

/* db_worth's answer: CM_OK to build, DB_NO (or an error) not.  A body without a count that
 * copies a callee's acyclic DFA is worth it too (a bounded JSON string's body copied into its
 * property, `"null" | "\"" chars-0-128 "\""`): Thompson's path copies each of its states into
 * the NFA, determinises what is deterministic already and minimizes what is minimal already,
 * where this build makes a state for each, kept by content (2.5% fewer instructions in
 * compile_components on sp_333, every threshold on the copied states tried costing more).
 * With the loops switch on (*loopy), a body with a count may also hold unbounded repetitions
 * (not a cyclic copied DFA): *est is then its NFA's states as Thompson's path counts them,
 * about (cm_direct_build caps the states this build may make by it). */
static int db_worth_it(const cm_ir_input *in, uint32_t root, cm_budget *bud, bool *loopy, size_t *est) {
    bool count = false, bad = false, loop = false;
    size_t look = 4096;
    cm_vec32 embeds = {.bud = bud};
    *loopy = false;
    db_worth(in, root, 0, &look, &count, &bad, g_direct_loops ? loopy : NULL, &embeds);
    int rc = CM_OK;
    size_t k = !bad && embeds.n ? cm_sort_unique_u32(embeds.data, embeds.n) : 0; /* (each callee's DFA once) */
    if (k) count = true;
    for (size_t i = 0; !rc && !loop && i < k; i++) rc = db_dfa_cyclic(in->frags[embeds.data[i]].dfa, bud, &loop);
    cm_vec_free(&embeds);
    if (!rc && count && !bad && !loop && *loopy) *est = db_est(in, root, 0);
    return rc ? rc : count && !bad && !loop ? CM_OK : DB_NO;
}

static int g_direct = 1;

void cm_direct_build_enable(int on) { g_direct = on; }

int cm_direct_build(const cm_ir_input *in, uint32_t root, size_t max_states, cm_budget *bud, cm_dfa_out **out) {
    if (!in || !out) return CM_ERR_ARG;
    *out = NULL;
    if (!g_direct) return DB_NO;
    bool loopy = false;
    size_t est = 0;
    int wrc = db_worth_it(in, root, bud, &loopy, &est);
    if (wrc) return wrc;
    dbuilder b;
    memset(&b, 0, sizeof b);
    for (size_t i = 0; db_vec(&b, i); i++) db_vec(&b, i)->bud = bud;
    b.in = in;
    b.bud = bud;
    b.max_made = max_states / DB_MARGIN;
    /* a loop's states are not kept by content (made before their edges): where a count holds a
     * loop that its positions copy, this build can make many times the states subset construction
     * does (sp_194: 2,825 made for an NFA of 123 states, 495 kept, 53 from subsets); past 1.5x the
     * NFA's states (+64) it gives up, Thompson's path then */
    b.loop_made = loopy ? est + est / 2 + 64 : SIZE_MAX;
    uint64_t t0 = cm_stats_now();
    uint32_t final = 0, start = 0;
    int rc = db_new(&b, 1, &final);
    if (!rc) rc = db_finish(&b, final, &final);
    if (!rc) rc = db_build(&b, root, final, 0, &start);
    cm_sparse_edges sp = {.off = {.bud = bud}, .cls = {.bud = bud}, .to = {.bud = bud}};
    cm_dfa_out *d = NULL;
    bool dead_end = false; /* a state that accepts nothing and has no edges (a copied dead state) */
    if (!rc) rc = db_take(&b, start, &d, &sp, &dead_end);
    size_t n_made = b.made;
    for (size_t i = 0; db_vec(&b, i); i++) cm_vec_free(db_vec(&b, i));
    cm_bfree(bud, b.hc);
    cm_bfree(bud, b.hh);
    cm_bfree(bud, b.um);
    free(b.own_runs);
    uint32_t n_dfa = d ? d->n_states : 0;
    cm_stats_add(CM_PH_DIRECT, t0);
    uint64_t t1 = cm_stats_now();
    /* without loops (db_worth; a body with them is minimized): acyclic, every state kept by content and leading to
     * the final state, so minimal as built (an acyclic trim DFA whose states differ in acceptance
     * or edges; equal right languages would give equal edges, by induction on the height), and
     * live when no path ends in a state that neither accepts nor goes on */
    if (!rc) rc = dead_end || loopy ? cm_fsm_minimize(d, &sp, true, bud) : cm_fsm_emit_minimal(d, &sp, true, bud);
    cm_stats_add(CM_PH_MINIMIZE, t1);
    if (cm_stats_on() && !rc) cm_stats_build((uint32_t)n_made, n_dfa, d->n_states, t1 - t0, cm_stats_now() - t1);
    cm_vec_free(&sp.off), cm_vec_free(&sp.cls), cm_vec_free(&sp.to);
    if (rc) {
        cm_dfa_release(bud, d);
        return rc;
    }
    *out = d;
    return CM_OK;
}
