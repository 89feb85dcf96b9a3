/* A rule's DFA built directly from its encoded IR, without Thompson's NFA and subset
 * construction (issue 12, the cold path; components.c tries it first for a component of one
 * member that is not right-linear).
 *
 * Built from the end: db_build(node, K) makes a state whose language is node's followed by
 * state K's, K already built.  A literal is a chain of new states into K; a byte class one
 * state; a sequence folds from its last item; an alternative is the union of its branches'
 * states (a new state with every branch's edges); x{m,n} is n copies of x chained from K, the
 * positions from m on united with K; x{m,} a loop state filled once its body is built; a
 * copied DFA (an inlined callee) is copied with each accepting state united with K -- and an
 * accepting state with no edges (a prefix-free item: a JSON string character, an escape, a
 * digit) is K itself, so a counted chain of them is n copies of the item's other states.
 * A union is deterministic only when its parts' edges do not overlap (or lead to the same
 * state): where they would, or anything else is met that this does not build (a literal set,
 * an entry of a right-linear component, an unbounded loop whose body is nullable, a bad
 * node), the build gives up (DB_NO) and the caller takes Thompson's path.
 *
 * The result is a DFA of the rule's language, renumbered breadth first (byte edges by their
 * first byte, then labels by value: the order in which subset construction discovers its
 * states), and handed to cm_fsm_minimize like subset construction's: the minimal DFA is
 * unique and minimization numbers its classes by first appearance, so the output is the
 * same DFA, state for state, as Thompson's path gives (the classes of equal columns merged
 * the same way: they depend on the minimal DFA's rows only).
 *
 * max_states (subset construction's limit, CM_ERR_LIMIT past it) counts the states of the
 * DFA before minimization, which this build does not make: it gives up (the caller's path then
 * decides, limit error or not) once it has made max_states / DB_MARGIN states, so it never
 * succeeds where subset construction, whose DFA is at most a small factor larger on the
 * shapes built here (a copy's accepting states, merged into K here, stay distinct sets there),
 * would fail.  Memory counts against the budget; time is checked every 1,024 states. */
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

#define DB_NO CM_DIRECT_NO
#define DB_MAX_DEPTH 10000
#define DB_MARGIN 4
#define PENDING 2u /* acc[] of a state made before its edges (a loop's, a copied DFA's) */

typedef struct {
    const cm_ir_input *in;
    cm_budget *bud;
    size_t max_made;
    cm_vec32 acc, e0, e1, l0, l1; /* per state: accepting (0, 1, PENDING), its byte and label edges */
    cm_vec32 rng, to;             /* byte edges: lo | hi << 8, target; a state's ascending, disjoint */
    cm_vec32 lab, lto;            /* label edges: a state's ascending by label */
    cm_vec32 pairs, ids, map;     /* scratch: (label, target) pairs, union operands, a copy's states */
    const cm_dfa_out *frag;       /* the copied DFA whose runs are below (the last one copied) */
    cm_vec32 run_off, run_rng, run_to;
    int32_t paint[256];
} dbuilder;

static cm_vec32 *db_vec(dbuilder *b, size_t i) {
    cm_vec32 *v[] = {&b->acc,  &b->e0,  &b->e1,  &b->l0,      &b->l1,      &b->rng,    &b->to,
                     &b->lab,  &b->lto, &b->pairs, &b->ids,  &b->map,     &b->run_off, &b->run_rng,
                     &b->run_to};
    return i < sizeof v / sizeof *v ? v[i] : NULL;
}

/* A new state (its edges: those pushed until db_close), accepting acc. */
static int db_new(dbuilder *b, uint32_t acc, uint32_t *s) {
    if (b->acc.n >= b->max_made) return DB_NO;
    if ((b->acc.n & 0x3FF) == 0x3FF && cm_budget_time(b->bud)) return CM_ERR_TIMEOUT;
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

static int db_edge(dbuilder *b, uint32_t lo, uint32_t hi, uint32_t to) {
    int rc = cm_vec_push(&b->rng, lo | hi << 8);
    return rc ? rc : cm_vec_push(&b->to, to);
}

/* A new state with one edge lo..hi to `to`. */
static int db_edge_state(dbuilder *b, uint32_t lo, uint32_t hi, uint32_t to, uint32_t *s) {
    if (lo > hi || hi > 255) return DB_NO;
    int rc = db_new(b, 0, s);
    if (!rc) rc = db_edge(b, lo, hi, to);
    if (!rc) db_close(b, *s);
    return rc;
}

/* Push the (label, target) pairs in b->pairs, sorted, as the current state's label edges;
 * DB_NO when one label would lead to two states. */
static int db_push_labels(dbuilder *b) {
    uint32_t *p = b->pairs.data;
    size_t n = b->pairs.n / 2;
    for (size_t i = 1; i < n; i++) { /* by insertion: a few */
        uint32_t x = p[2 * i], y = p[2 * i + 1];
        size_t j = i;
        for (; j && (p[2 * j - 2] > x || (p[2 * j - 2] == x && p[2 * j - 1] > y)); j--)
            p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
        p[2 * j] = x, p[2 * j + 1] = y;
    }
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        if (i && p[2 * i] == p[2 * i - 2]) {
            if (p[2 * i + 1] != p[2 * i - 1]) return DB_NO;
            continue;
        }
        if (!(rc = cm_vec_push(&b->lab, p[2 * i]))) rc = cm_vec_push(&b->lto, p[2 * i + 1]);
    }
    return rc;
}

/* Paint state s's byte edges (targets through map[] when map is not NULL) into b->paint and
 * its labels into b->pairs; DB_NO where a byte is painted with another target already. */
static int db_paint(dbuilder *b, uint32_t s, const uint32_t *map) {
    for (uint32_t e = b->e0.data[s]; e < b->e1.data[s]; e++) {
        uint32_t r = b->rng.data[e], t = map ? map[b->to.data[e]] : b->to.data[e];
        for (uint32_t x = r & 0xFF; x <= r >> 8; x++) {
            if (b->paint[x] >= 0 && (uint32_t)b->paint[x] != t) return DB_NO;
            b->paint[x] = (int32_t)t;
        }
    }
    int rc = CM_OK;
    for (uint32_t e = b->l0.data[s]; !rc && e < b->l1.data[s]; e++)
        rc = cm_vec_push2(&b->pairs, b->lab.data[e], map ? map[b->lto.data[e]] : b->lto.data[e]);
    return rc;
}

/* The painted bytes as the current state's edges (runs of one target), b->paint cleared. */
static int db_push_paint(dbuilder *b) {
    int rc = CM_OK;
    for (uint32_t x = 0; !rc && x < 256;) {
        int32_t t = b->paint[x];
        uint32_t y = x + 1;
        while (y < 256 && b->paint[y] == t) y++;
        if (t >= 0) rc = db_edge(b, x, y - 1, (uint32_t)t);
        x = y;
    }
    for (uint32_t x = 0; x < 256; x++) b->paint[x] = -1;
    return rc;
}

/* The union of states ids[0..n) (none pending): ids[0] itself when n is 1, else a new state
 * (into == UINT32_MAX) or pending state `into`, filled; DB_NO where their edges overlap. */
static int db_union(dbuilder *b, const uint32_t *ids, uint32_t n, uint32_t into, uint32_t *out) {
    if (n == 1 && into == UINT32_MAX) {
        *out = ids[0];
        return CM_OK;
    }
    uint32_t acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (b->acc.data[ids[i]] == PENDING) return DB_NO;
        acc |= b->acc.data[ids[i]];
    }
    b->pairs.n = 0;
    int rc = CM_OK;
    for (uint32_t i = 0; !rc && i < n; i++) rc = db_paint(b, ids[i], NULL);
    if (rc) {
        for (uint32_t x = 0; x < 256; x++) b->paint[x] = -1;
        return rc;
    }
    if (into == UINT32_MAX) rc = db_new(b, acc, &into);
    if (rc) {
        for (uint32_t x = 0; x < 256; x++) b->paint[x] = -1;
        return rc;
    }
    b->acc.data[into] = acc;
    db_open(b, into);
    rc = db_push_paint(b);
    if (!rc) rc = db_push_labels(b);
    if (!rc) db_close(b, into);
    *out = into;
    return rc;
}

static int db_union2(dbuilder *b, uint32_t x, uint32_t y, uint32_t *out) {
    uint32_t ids[2] = {x, y};
    return db_union(b, ids, 2, UINT32_MAX, out);
}

/* f's DFA as runs of classes with one target (rows read once per DFA copied in a row). */
static int db_runs(dbuilder *b, const cm_dfa_out *d) {
    if (b->frag == d) return CM_OK;
    b->frag = NULL;
    b->run_off.n = b->run_rng.n = b->run_to.n = 0;
    int rc = cm_vec_push(&b->run_off, 0);
    for (uint32_t s = 0; !rc && s < d->n_states; s++) {
        const int32_t *row = d->trans + (size_t)s * d->n_classes;
        for (uint32_t c = 0, c1; !rc && c < d->n_classes; c = c1) {
            c1 = cm_run_end(row, c, d->n_classes);
            if (row[c] < 0) continue;
            if ((uint32_t)row[c] >= d->n_states || d->class_lo[c1] == 0 || d->class_lo[c1] > 256) return DB_NO;
            rc = cm_vec_push(&b->run_rng, d->class_lo[c] | (d->class_lo[c1] - 1u) << 8);
            if (!rc) rc = cm_vec_push(&b->run_to, (uint32_t)row[c]);
        }
        if (!rc) rc = cm_vec_push(&b->run_off, (uint32_t)b->run_rng.n);
    }
    if (!rc) b->frag = d;
    return rc;
}

/* A copy of f's DFA into K: its accepting states united with K, those without edges K itself. */
static int db_embed(dbuilder *b, const cm_ir_frag *f, uint32_t K, uint32_t *out) {
    const cm_dfa_out *d = f->dfa;
    uint32_t n = d->n_states;
    if (!n || d->lab_off[0] != 0) return DB_NO;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++)
            if (d->lab_to[e] >= n) return DB_NO;
    int rc = db_runs(b, d);
    if (!rc) rc = cm_vec_reserve(&b->map, n);
    if (rc) return rc;
    uint32_t *map = b->map.data, *ro = b->run_off.data;
    for (uint32_t s = 0; !rc && s < n; s++) {
        if (d->accepting[s] && ro[s] == ro[s + 1] && d->lab_off[s] == d->lab_off[s + 1]) map[s] = K;
        else rc = db_new(b, PENDING, &map[s]);
    }
    for (uint32_t s = 0; !rc && s < n; s++) {
        uint32_t q = map[s];
        if (q == K) continue;
        b->pairs.n = 0;
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            rc = cm_vec_push2(&b->pairs, f->labels[d->lab[e]], map[d->lab_to[e]]);
        if (rc) break;
        db_open(b, q);
        if (d->accepting[s]) { /* united with K: painted */
            if (b->acc.data[K] == PENDING) return DB_NO;
            for (uint32_t e = ro[s]; e < ro[s + 1]; e++) {
                uint32_t r = b->run_rng.data[e], t = map[b->run_to.data[e]];
                for (uint32_t x = r & 0xFF; x <= r >> 8; x++) b->paint[x] = (int32_t)t;
            }
            if ((rc = db_paint(b, K, NULL)) || (rc = db_push_paint(b))) {
                for (uint32_t x = 0; x < 256; x++) b->paint[x] = -1;
                return rc;
            }
            b->acc.data[q] = b->acc.data[K];
        } else {
            for (uint32_t e = ro[s]; !rc && e < ro[s + 1]; e++) rc = db_edge(b, b->run_rng.data[e] & 0xFF,
                                                                              b->run_rng.data[e] >> 8,
                                                                              map[b->run_to.data[e]]);
            b->acc.data[q] = 0;
        }
        if (!rc) rc = db_push_labels(b);
        if (!rc) db_close(b, q);
    }
    if (!rc) *out = map[0];
    return rc;
}

static const cm_ir_ref *db_find_ref(const cm_ir_input *in, uint32_t name) {
    size_t lo = 0, hi = in->n_refs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (in->refs[mid].name < name) lo = mid + 1;
        else hi = mid;
    }
    return (lo < in->n_refs && in->refs[lo].name == name) ? &in->refs[lo] : NULL;
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

/* A new state with b->ids' states (operands) united; the operands pushed by the caller from
 * `base` on (the list is shared by nested calls: each pops its own). */
static int db_union_ids(dbuilder *b, size_t base, uint32_t *out) {
    uint32_t n = (uint32_t)(b->ids.n - base);
    int rc = n ? db_union(b, b->ids.data + base, n, UINT32_MAX, out) : DB_NO;
    b->ids.n = base;
    return rc;
}

static int db_utf8(dbuilder *b, uint32_t pc, uint32_t K, uint32_t *out) {
    const uint32_t *code = b->in->code;
    size_t len_code = b->in->code_len, p = (size_t)pc + 2 + 2 * (size_t)code[pc + 1], base = b->ids.n;
    if (p >= len_code) return DB_NO;
    uint32_t n_seqs = code[p++];
    int rc = CM_OK;
    for (uint32_t k = 0; !rc && k < n_seqs; k++) {
        uint32_t len = p < len_code ? code[p++] : 0, s;
        if (!len || p + 2 * (size_t)len > len_code) rc = DB_NO;
        if (!rc) rc = db_chain(b, code + p, len, 2, K, &s);
        if (!rc) rc = cm_vec_push(&b->ids, s);
        p += 2 * (size_t)len;
    }
    if (rc) {
        b->ids.n = base;
        return rc;
    }
    return db_union_ids(b, base, out);
}

static int db_bytes(dbuilder *b, uint32_t pc, uint32_t K, uint32_t *out) {
    const uint32_t *code = b->in->code;
    uint32_t n = code[pc + 1];
    if (!n) return DB_NO;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = code[pc + 2 + 2 * i], hi = code[pc + 3 + 2 * i];
        if (lo > hi || hi > 255) {
            for (uint32_t x = 0; x < 256; x++) b->paint[x] = -1;
            return DB_NO;
        }
        for (uint32_t x = lo; x <= hi; x++) b->paint[x] = (int32_t)K;
    }
    int rc = db_new(b, 0, out);
    if (!rc) rc = db_push_paint(b);
    if (!rc) db_close(b, *out);
    else for (uint32_t x = 0; x < 256; x++) b->paint[x] = -1;
    return rc;
}

/* REPEAT [op, lo, hi, item]: from the end, position j is item then position j + 1, united
 * with K from lo on; unbounded: a loop state (item back into it, or K), after lo items. */
static int db_repeat(dbuilder *b, uint32_t pc, uint32_t K, int depth, uint32_t *out) {
    const uint32_t *code = b->in->code;
    uint32_t lo = code[pc + 1], hi = code[pc + 2], item = code[pc + 3], cur = K, q;
    int rc = CM_OK;
    if (hi == CM_IR_INF) {
        uint32_t loop;
        if ((rc = db_new(b, PENDING, &loop)) || (rc = db_build(b, item, loop, depth + 1, &q))) return rc;
        if (q == loop) return DB_NO;
        uint32_t ids[2] = {q, K};
        if ((rc = db_union(b, ids, 2, loop, &cur))) return rc;
        hi = lo;
    } else if (hi < lo) {
        return DB_NO;
    }
    for (uint32_t j = hi; !rc && j > 0; j--) {
        if ((rc = db_build(b, item, cur, depth + 1, &q))) break;
        if (q == cur) return DB_NO; /* an empty item */
        if (j - 1 >= lo) rc = db_union2(b, q, K, &cur);
        else cur = q;
    }
    *out = cur;
    return rc;
}

static int db_ref(dbuilder *b, uint32_t name, uint32_t K, int depth, uint32_t *out) {
    const cm_ir_input *in = b->in;
    if (name >= in->n_names) return DB_NO;
    const cm_ir_ref *r = db_find_ref(in, name);
    if (r && r->kind == CM_IR_REF_ENTRY) return DB_NO;
    if (r && r->kind == CM_IR_REF_EMBED)
        return r->arg < in->n_frags ? db_embed(b, &in->frags[r->arg], K, out) : DB_NO;
    if (r && r->kind == CM_IR_REF_EXPAND) return db_build(b, r->arg, K, depth + 1, out);
    b->pairs.n = 0;
    int rc = db_new(b, 0, out);
    if (!rc) rc = cm_vec_push2(&b->pairs, in->label[name], K);
    if (!rc) rc = db_push_labels(b);
    if (!rc) db_close(b, *out);
    return rc;
}

/* *out: a state whose language is node pc's followed by K's. */
static int db_build(dbuilder *b, uint32_t pc, uint32_t K, int depth, uint32_t *out) {
    const cm_ir_input *in = b->in;
    if (depth > DB_MAX_DEPTH || (size_t)pc + 2 > in->code_len) return DB_NO;
    uint32_t op = in->code[pc], n = in->code[pc + 1];
    size_t need = op == CM_IR_BYTES ? 2 + 2 * (size_t)n : op == CM_IR_REPEAT ? 4 : 2 + (size_t)n;
    if (op == CM_IR_UTF8 || op == CM_IR_REF || op == CM_IR_WORDS) need = 2;
    if ((size_t)pc + need > in->code_len) return DB_NO;
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
        size_t base = b->ids.n;
        for (uint32_t i = 0; !rc && i < n; i++) {
            uint32_t s;
            if (!(rc = db_build(b, in->code[pc + 2 + i], K, depth + 1, &s))) rc = cm_vec_push(&b->ids, s);
        }
        if (rc) {
            b->ids.n = base;
            return rc;
        }
        return db_union_ids(b, base, out);
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
static int db_take(dbuilder *b, uint32_t start, cm_dfa_out **out, cm_sparse_edges *sp) {
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
        for (uint32_t e = b->e0.data[s]; !rc && e < b->e1.data[s]; e++) {
            uint32_t r = b->rng.data[e], t = id[b->to.data[e]];
            for (uint32_t c = cls[r & 0xFF]; !rc && c <= cls[r >> 8]; c++)
                if (!(rc = cm_vec_push(&sp->cls, c))) rc = cm_vec_push(&sp->to, t);
        }
        if (!rc) rc = cm_vec_push(&sp->off, (uint32_t)sp->cls.n);
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

static int g_direct = 1;

void cm_direct_build_enable(int on) { g_direct = on; }

int cm_direct_build(const cm_ir_input *in, uint32_t root, size_t max_states, cm_budget *bud, cm_dfa_out **out) {
    if (!in || !out) return CM_ERR_ARG;
    *out = NULL;
    if (!g_direct) return DB_NO;
    dbuilder b;
    memset(&b, 0, sizeof b);
    for (size_t i = 0; db_vec(&b, i); i++) db_vec(&b, i)->bud = bud;
    for (uint32_t x = 0; x < 256; x++) b.paint[x] = -1;
    b.in = in;
    b.bud = bud;
    b.max_made = max_states / DB_MARGIN;
    uint64_t t0 = cm_stats_now();
    uint32_t final = 0, start = 0;
    int rc = db_new(&b, 1, &final);
    if (!rc) rc = db_build(&b, root, final, 0, &start);
    cm_sparse_edges sp = {.off = {.bud = bud}, .cls = {.bud = bud}, .to = {.bud = bud}};
    cm_dfa_out *d = NULL;
    if (!rc) rc = db_take(&b, start, &d, &sp);
    size_t n_made = b.acc.n;
    for (size_t i = 0; db_vec(&b, i); i++) cm_vec_free(db_vec(&b, i));
    uint32_t n_dfa = d ? d->n_states : 0;
    cm_stats_add(CM_PH_DIRECT, t0);
    uint64_t t1 = cm_stats_now();
    if (!rc) rc = cm_fsm_minimize(d, &sp, true, bud);
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
