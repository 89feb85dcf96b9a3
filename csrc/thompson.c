/* Thompson construction from encoded IR, then subset construction (fsm.c).
 *
 * The compiler (cfgmask/automata.py, _Session) serializes a grammar's IR as a DAG
 * of nodes in one uint32 array; a node refers to its children by offset.  This
 * builds a Thompson NFA of it, equal tails shared (below), and hands it to
 * cm_fsm_build.  Unrolled repetitions make this NFA as large as the grammar text
 * times its bounds: its arrays are counted against the caller's cm_budget. */
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

typedef struct {
    cm_vec32 bsrc, brange, bdst;  /* byte edges: source, lo | hi << 8, target */
    cm_vec32 lsrc, lab, ldst;     /* label edges */
    cm_vec32 esrc, edst;          /* epsilon edges */
    uint32_t n;                   /* states */
    uint32_t n_entries;           /* right-linear component: member i starts at state 1 + i */
    const cm_ir_input *in;
    cm_budget *bud;
    /* Shared tails (tb_to, tb_edge_state): open addressing, keys MEMO_EMPTY when free.  A
     * node's key is MEMO_NODE | pc << 32 | end, a one-edge state's (lo | hi << 8) << 32 | dst. */
    uint64_t *memo_key;
    uint32_t *memo_val;
    size_t memo_n, memo_cap;      /* memo_cap: a power of two (0 until the first entry) */
} tbuilder;

#define MEMO_EMPTY UINT64_MAX
#define MEMO_NODE (1ull << 63)

#define TB_MAX_STATES (UINT32_MAX / 4)
#define TB_MAX_DEPTH 10000

static cm_vec32 *tb_vec(tbuilder *t, size_t i) {
    cm_vec32 *v[] = {&t->bsrc, &t->brange, &t->bdst, &t->lsrc, &t->lab, &t->ldst, &t->esrc, &t->edst};
    return i < sizeof v / sizeof *v ? v[i] : NULL;
}

static int tb_state(tbuilder *t, uint32_t *s) {
    if (t->n >= TB_MAX_STATES) return CM_ERR_NOMEM;
    if ((t->n & 0xFFFF) == 0xFFFF && cm_budget_time(t->bud)) return CM_ERR_TIMEOUT;
    *s = t->n++;
    return CM_OK;
}

static int tb_byte(tbuilder *t, uint32_t s, uint32_t lo, uint32_t hi, uint32_t d) {
    if (lo > 255 || hi > 255 || lo > hi) return CM_ERR_ARG;
    int rc = cm_vec_push(&t->bsrc, s);
    if (!rc) rc = cm_vec_push(&t->brange, lo | hi << 8);
    return rc ? rc : cm_vec_push(&t->bdst, d);
}

static int tb_eps(tbuilder *t, uint32_t s, uint32_t d) {
    int rc = cm_vec_push(&t->esrc, s);
    return rc ? rc : cm_vec_push(&t->edst, d);
}

static int tb_label(tbuilder *t, uint32_t s, uint32_t label, uint32_t d) {
    int rc = cm_vec_push(&t->lsrc, s);
    if (!rc) rc = cm_vec_push(&t->lab, label);
    return rc ? rc : cm_vec_push(&t->ldst, d);
}

/* d's byte edges from its runs kept on it (cm_dfa_runs_of), states base on: the edges, in the
 * order the walk of its rows pushes them (tb_embed). */
static int tb_embed_runs(tbuilder *t, const cm_dfa_runs *r, uint32_t n_states, uint32_t base) {
    size_t m = r->off[n_states], n = t->bsrc.n;
    int rc = cm_vec_reserve(&t->bsrc, n + m);
    if (!rc) rc = cm_vec_reserve(&t->brange, n + m);
    if (!rc) rc = cm_vec_reserve(&t->bdst, n + m);
    if (rc) return rc;
    uint32_t *src = t->bsrc.data + n, *range = t->brange.data + n, *dst = t->bdst.data + n;
    for (uint32_t s = 0; s < n_states; s++)
        for (uint32_t e = r->off[s]; e < r->off[s + 1]; e++) src[e] = base + s;
    for (size_t e = 0; e < m; e++) range[e] = r->rng[e], dst[e] = base + r->to[e];
    t->bsrc.n = t->brange.n = t->bdst.n = n + m;
    return CM_OK;
}

/* The runs of d (n states) from its byte edges that a walk of its rows just wrote at `from` on
 * (states base on), kept on d for its next copies: a copy of what the walk found, not a walk
 * more.  Out of memory: nothing kept (the next copy walks). */
static void tb_keep_runs(const tbuilder *t, const cm_dfa_out *d, size_t from, uint32_t base) {
    uint32_t n = d->n_states;
    size_t m = t->bsrc.n - from;
    cm_dfa_runs *r = cm_dfa_runs_alloc(n, m);
    if (!r) return;
    memset(r->off, 0, ((size_t)n + 1) * sizeof *r->off);
    const uint32_t *src = t->bsrc.data + from, *range = t->brange.data + from, *dst = t->bdst.data + from;
    for (size_t e = 0; e < m; e++) r->off[src[e] - base + 1]++, r->rng[e] = (uint16_t)range[e], r->to[e] = dst[e] - base;
    for (uint32_t s = 0; s < n; s++) r->off[s + 1] += r->off[s];
    cm_dfa_runs_keep(d, r);
}

/* Copy a DFA between start and end (automata: NFA.embed).  Its byte edges come from its runs
 * (kept on it at its first copy, from what that copy's walk of its rows wrote: an inlined callee
 * is copied into each of its callers, the JSON number five times into one schema's object),
 * else from a walk of its rows. */
static int tb_embed(tbuilder *t, const cm_ir_frag *f, uint32_t start, uint32_t end) {
    const cm_dfa_out *d = f->dfa;
    if ((uint64_t)t->n + d->n_states >= TB_MAX_STATES) return CM_ERR_NOMEM;
    int rc = cm_budget_time(t->bud);
    uint32_t base = t->n;
    t->n += d->n_states;
    const cm_dfa_runs *runs = cm_dfa_runs_on() && !rc ? cm_dfa_runs_of(d) : NULL;
    if (runs) { /* the byte edges at once (each kind of edge has its own arrays: the same NFA) */
        rc = tb_embed_runs(t, runs, d->n_states, base);
        for (uint32_t s = 0; !rc && s < d->n_states; s++) {
            for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
                rc = tb_label(t, base + s, f->labels[d->lab[e]], base + d->lab_to[e]);
            if (!rc && d->accepting[s]) rc = tb_eps(t, base + s, end);
        }
        return rc ? rc : tb_eps(t, start, base);
    }
    size_t from = t->bsrc.n;
    bool walk_starts = cm_dfa_walk_starts_on();
    for (uint32_t s = 0; !rc && s < d->n_states; s++) {
        const int32_t *row = d->trans + (size_t)s * d->n_classes;
        size_t n = t->bsrc.n, k = 0; /* room for a row's runs, then one store each (ranges valid: classes) */
        if ((rc = cm_vec_reserve(&t->bsrc, n + d->n_classes)) || (rc = cm_vec_reserve(&t->brange, n + d->n_classes))
            || (rc = cm_vec_reserve(&t->bdst, n + d->n_classes)))
            break;
        uint32_t *src = t->bsrc.data + n, *range = t->brange.data + n, *dst = t->bdst.data + n;
        uint32_t nc = d->n_classes;
        if (walk_starts && nc && nc <= 64) /* (WALK_STARTS, dfa.c: the runs from their starts) */
            for (uint64_t st = cm_run_starts(row, nc); st;) {
                uint32_t c = (uint32_t)__builtin_ctzll(st);
                st &= st - 1;
                uint32_t c1 = st ? (uint32_t)__builtin_ctzll(st) : nc;
                int32_t to = row[c];
                if (to < 0) continue;
                src[k] = base + s, range[k] = d->class_lo[c] | (d->class_lo[c1] - 1u) << 8, dst[k++] = base + (uint32_t)to;
            }
        else
            for (uint32_t c = 0, c1; c < d->n_classes; c = c1) {
                int32_t to = row[c];
                c1 = cm_run_end(row, c, d->n_classes);
                if (to < 0) continue;
                src[k] = base + s, range[k] = d->class_lo[c] | (d->class_lo[c1] - 1u) << 8, dst[k++] = base + (uint32_t)to;
            }
        t->bsrc.n = t->brange.n = t->bdst.n = n + k;
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            rc = tb_label(t, base + s, f->labels[d->lab[e]], base + d->lab_to[e]);
        if (!rc && d->accepting[s]) rc = tb_eps(t, base + s, end);
    }
    if (!rc && cm_dfa_runs_on()) tb_keep_runs(t, d, from, base);
    return rc ? rc : tb_eps(t, start, base);
}

/* ---- shared tails ----------------------------------------------------------
 * A state whose only out-edges are those of one fragment has the language of that fragment
 * followed by its end's; two such states with the same fragment and end are equivalent, so
 * one serves both.  Every node built toward a state of its own (tb_to: a sequence's items
 * but its first, an alternative's branches) is kept by (node, end), and every inner state of
 * a byte chain (literals, UTF-8 sequences) by its one edge: a tail met again is an epsilon
 * edge, not a copy.  (not_in's trie of names ends each node with the same `.*` and the same
 * UTF-8 and escape sequences: built per node, subset construction passed through ~20x the
 * minimal states.)  The language is the same, and so the minimal DFA. */

static size_t memo_slot(const tbuilder *t, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ h >> 29) & (t->memo_cap - 1);
}

static bool memo_get(const tbuilder *t, uint64_t key, uint32_t *val) {
    if (!t->memo_cap) return false;
    for (size_t i = memo_slot(t, key);; i = (i + 1) & (t->memo_cap - 1)) {
        if (t->memo_key[i] == key) {
            *val = t->memo_val[i];
            return true;
        }
        if (t->memo_key[i] == MEMO_EMPTY) return false;
    }
}

static void memo_place(tbuilder *t, uint64_t key, uint32_t val) {
    size_t i = memo_slot(t, key);
    while (t->memo_key[i] != MEMO_EMPTY) i = (i + 1) & (t->memo_cap - 1);
    t->memo_key[i] = key;
    t->memo_val[i] = val;
}

static int memo_put(tbuilder *t, uint64_t key, uint32_t val) {
    if (2 * (t->memo_n + 1) > t->memo_cap) {
        size_t cap = t->memo_cap ? 2 * t->memo_cap : 256, old_cap = t->memo_cap;
        uint64_t *old_key = t->memo_key;
        uint32_t *old_val = t->memo_val;
        int rc = CM_OK;
        uint64_t *keys = cm_balloc(t->bud, cap * sizeof *keys, false, &rc);
        uint32_t *vals = cm_balloc(t->bud, cap * sizeof *vals, false, &rc);
        if (rc) {
            cm_bfree(t->bud, keys);
            return rc;
        }
        memset(keys, 0xFF, cap * sizeof *keys); /* MEMO_EMPTY */
        t->memo_key = keys, t->memo_val = vals, t->memo_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old_key[i] != MEMO_EMPTY) memo_place(t, old_key[i], old_val[i]);
        cm_bfree(t->bud, old_key);
        cm_bfree(t->bud, old_val);
    }
    memo_place(t, key, val);
    t->memo_n++;
    return CM_OK;
}

/* *s: a state whose one out-edge is lo..hi to dst (made once per (lo, hi, dst)). */
static int tb_edge_state(tbuilder *t, uint32_t lo, uint32_t hi, uint32_t dst, uint32_t *s) {
    if (lo > 255 || hi > 255) return CM_ERR_ARG;
    uint64_t key = (uint64_t)(lo | hi << 8) << 32 | dst;
    if (memo_get(t, key, s)) return CM_OK;
    int rc = tb_state(t, s);
    if (!rc) rc = tb_byte(t, *s, lo, hi, dst);
    return rc ? rc : memo_put(t, key, *s);
}

/* A chain of len byte ranges from start to end; range i is p[i * stride] ..
 * p[i * stride + stride - 1] (stride 1: a literal's bytes; 2: (lo, hi) pairs).  Built from
 * its end: its inner states are shared tails. */
static int tb_chain(tbuilder *t, const uint32_t *p, uint32_t len, uint32_t stride, uint32_t start, uint32_t end) {
    if (!len) return tb_eps(t, start, end);
    uint32_t cur = end;
    int rc = CM_OK;
    for (uint32_t i = len - 1; !rc && i > 0; i--)
        rc = tb_edge_state(t, p[(size_t)i * stride], p[(size_t)i * stride + stride - 1], cur, &cur);
    return rc ? rc : tb_byte(t, start, p[0], p[stride - 1], cur);
}

static int tb_build(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end, int depth);

/* *s: a state of its own from which node pc's NFA leads to end (made once per (pc, end)). */
static int tb_to(tbuilder *t, uint32_t pc, uint32_t end, int depth, uint32_t *s) {
    uint64_t key = MEMO_NODE | (uint64_t)pc << 32 | end;
    if (pc < (1u << 31) && memo_get(t, key, s)) return CM_OK;
    int rc = tb_state(t, s);
    if (!rc) rc = tb_build(t, pc, *s, end, depth);
    return rc || pc >= (1u << 31) ? rc : memo_put(t, key, *s);
}

/* UTF8 [op, n_ranges, ranges..., n_seqs, (len, (lo, hi) * len) * n_seqs]: one chain a sequence. */
static int tb_utf8(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end) {
    const uint32_t *code = t->in->code;
    size_t len_code = t->in->code_len, p = (size_t)pc + 2 + 2 * (size_t)code[pc + 1];
    if (p >= len_code) return CM_ERR_ARG;
    uint32_t n_seqs = code[p++];
    int rc = CM_OK;
    for (uint32_t k = 0; !rc && k < n_seqs; k++) {
        if (p >= len_code) return CM_ERR_ARG;
        uint32_t len = code[p++];
        if (!len || p + 2 * (size_t)len > len_code) return CM_ERR_ARG;
        rc = tb_chain(t, code + p, len, 2, start, end);
        p += 2 * (size_t)len;
    }
    return rc;
}

/* SEQ [op, n, child * n]: the children chained, built from the last (each but the first
 * toward a state of its own); ALT: each from its own state after start. */
static int tb_seq_alt(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end, int depth) {
    const uint32_t *code = t->in->code, *kids = code + pc + 2;
    uint32_t n = code[pc + 1], cur = end;
    int rc = CM_OK;
    if (code[pc] == CM_IR_ALT) {
        for (uint32_t i = 0; !rc && i < n; i++) {
            uint32_t s;
            if (!(rc = tb_to(t, kids[i], end, depth + 1, &s))) rc = tb_eps(t, start, s);
        }
        return rc;
    }
    if (!n) return tb_eps(t, start, end);
    for (uint32_t i = n - 1; !rc && i > 0; i--) rc = tb_to(t, kids[i], cur, depth + 1, &cur);
    return rc ? rc : tb_build(t, kids[0], start, cur, depth + 1);
}

/* REPEAT [op, lo, hi (CM_IR_INF: none), item]: lo copies, then a loop or hi - lo optional copies. */
static int tb_repeat(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end, int depth) {
    const uint32_t *code = t->in->code;
    uint32_t lo = code[pc + 1], hi = code[pc + 2], item = code[pc + 3], cur = start, nxt;
    int rc = CM_OK;
    if (hi != CM_IR_INF && hi < lo) return CM_ERR_ARG;
    for (uint32_t i = 0; !rc && i < lo; i++) {
        if ((rc = tb_state(t, &nxt))) break;
        rc = tb_build(t, item, cur, nxt, depth + 1);
        cur = nxt;
    }
    if (rc) return rc;
    if (hi == CM_IR_INF) {
        uint32_t loop, body;
        if ((rc = tb_state(t, &loop)) || (rc = tb_eps(t, cur, loop)) || (rc = tb_state(t, &body))
            || (rc = tb_eps(t, loop, body)) || (rc = tb_build(t, item, body, loop, depth + 1)))
            return rc;
        return tb_eps(t, loop, end);
    }
    for (uint32_t i = 0; !rc && i < hi - lo; i++) {
        if ((rc = tb_state(t, &nxt)) || (rc = tb_eps(t, cur, end))) break;
        rc = tb_build(t, item, cur, nxt, depth + 1);
        cur = nxt;
    }
    return rc ? rc : tb_eps(t, cur, end);
}

/* Node pc from start to end in states of its own (cm_watch.w[k]): entered by an epsilon edge into
 * the first, left by one from another, its shared tails its own (a memo of its own). */
static int tb_watched(tbuilder *t, uint32_t k, uint32_t pc, uint32_t start, uint32_t end, int depth) {
    uint64_t *keys = t->memo_key;
    uint32_t *vals = t->memo_val, in_at, out_at;
    size_t n = t->memo_n, cap = t->memo_cap;
    t->memo_key = NULL, t->memo_val = NULL, t->memo_n = t->memo_cap = 0;
    int rc = tb_state(t, &in_at);
    if (!rc) rc = tb_state(t, &out_at);
    if (!rc) rc = tb_eps(t, start, in_at);
    if (!rc) rc = tb_build(t, pc, in_at, out_at, depth);
    if (!rc) rc = tb_eps(t, out_at, end);
    cm_bfree(t->bud, t->memo_key);
    cm_bfree(t->bud, t->memo_val);
    t->memo_key = keys, t->memo_val = vals, t->memo_n = n, t->memo_cap = cap;
    if (!rc) cm_watch.w[k].lo = in_at, cm_watch.w[k].hi = t->n;
    /* its own NFA over its cap: refused now, before the rest and the subset construction (sp_333:
     * an NFA of ~2,300 states, its count of subset states past the cap of 2,000 late in the caller's) */
    if (!rc && t->n - in_at > cm_watch.w[k].cap) cm_watch.over = k + 1, rc = CM_ERR_LIMIT;
    return rc;
}

/* REF [op, name]: a label edge, an epsilon edge to a member's entry, a copied fragment, or
 * the referenced body built in place. */
static int tb_ref(tbuilder *t, uint32_t name, uint32_t start, uint32_t end, int depth) {
    const cm_ir_input *in = t->in;
    if (name >= in->n_names) return CM_ERR_ARG;
    const cm_ir_ref *r = cm_ir_find_ref(in, name);
    if (r && r->kind == CM_IR_REF_ENTRY) {
        if (r->arg >= t->n_entries) return CM_ERR_ARG;
        return tb_eps(t, start, 1 + r->arg);
    }
    if (r && r->kind == CM_IR_REF_EMBED) {
        if (r->arg >= in->n_frags) return CM_ERR_ARG;
        return tb_embed(t, &in->frags[r->arg], start, end);
    }
    if (r && r->kind == CM_IR_REF_EXPAND) {
        for (uint32_t k = 0; k < cm_watch.n; k++)
            if (name == cm_watch.w[k].name && cm_watch.w[k].lo == cm_watch.w[k].hi)
                return tb_watched(t, k, r->arg, start, end, depth + 1);
        return tb_build(t, r->arg, start, end, depth + 1);
    }
    return tb_label(t, start, in->label[name], end);
}

/* WORDS inside an expression: its minimal DFA (words.c), copied.  (A rule whose whole body
 * is a literal set never gets here: components.c builds it directly.) */
static int tb_words(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end) {
    cm_dfa_out *d = NULL;
    int rc = cm_words_build(t->in, pc, t->bud, &d);
    cm_ir_frag f = {d, NULL};
    if (!rc) rc = tb_embed(t, &f, start, end);
    cm_dfa_release(t->bud, d);
    return rc;
}

/* The NFA of node pc between states start and end. */
static int tb_build(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end, int depth) {
    const cm_ir_input *in = t->in;
    if (depth > TB_MAX_DEPTH || !cm_ir_node_fits(in, pc)) return CM_ERR_ARG;
    uint32_t op = in->code[pc], n = in->code[pc + 1];
    int rc = CM_OK;
    switch (op) {
    case CM_IR_LIT:
        return tb_chain(t, in->code + pc + 2, n, 1, start, end);
    case CM_IR_BYTES:
        for (uint32_t i = 0; !rc && i < n; i++)
            rc = tb_byte(t, start, in->code[pc + 2 + 2 * i], in->code[pc + 3 + 2 * i], end);
        return rc;
    case CM_IR_UTF8:
        return tb_utf8(t, pc, start, end);
    case CM_IR_SEQ:
    case CM_IR_ALT:
        return tb_seq_alt(t, pc, start, end, depth);
    case CM_IR_REPEAT:
        return tb_repeat(t, pc, start, end, depth);
    case CM_IR_REF:
        return tb_ref(t, n, start, end, depth);
    case CM_IR_WORDS:
        return tb_words(t, pc, start, end);
    default:
        return CM_ERR_ARG; /* CM_IR_BADTOKEN (a token terminal without ids) or a bad op */
    }
}

/* ---- the NFA as CSR arrays (cm_nfa_view) ---------------------------------- */

typedef struct {
    cm_nfa_view v;
    uint32_t *byte_off, *byte_to, *label_off, *label, *label_to, *eps_off, *eps_to;
    uint8_t *byte_lo, *byte_hi;
} nfa_arrays;

static void nfa_free(cm_budget *bud, nfa_arrays *a) {
    void *p[] = {a->byte_off, a->byte_to, a->label_off, a->label, a->label_to, a->eps_off, a->eps_to,
                 a->byte_lo, a->byte_hi};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) cm_bfree(bud, p[i]);
    memset(a, 0, sizeof *a);
}

/* Offsets of the edges keyed by src (CSR: edges of s at off[s] .. off[s+1]) and a
 * copy of them, the cursor a stable counting sort fills from. */
static int csr_offsets(cm_budget *bud, uint32_t n, const cm_vec32 *src, uint32_t **off, uint32_t **fill) {
    int rc = CM_OK;
    *off = cm_balloc(bud, ((size_t)n + 1) * sizeof **off, true, &rc);
    *fill = cm_balloc(bud, ((size_t)n + 1) * sizeof **fill, false, &rc);
    if (rc) return rc;
    for (size_t i = 0; i < src->n; i++) (*off)[src->data[i] + 1]++;
    for (uint32_t s = 0; s < n; s++) (*off)[s + 1] += (*off)[s];
    memcpy(*fill, *off, ((size_t)n + 1) * sizeof **fill);
    return CM_OK;
}

/* The byte edges into CSR arrays; the builder's lists are freed as they are copied. */
static int csr_bytes(tbuilder *t, nfa_arrays *a) {
    uint32_t *fill = NULL;
    size_t m = t->bsrc.n;
    int rc = csr_offsets(t->bud, t->n, &t->bsrc, &a->byte_off, &fill);
    a->byte_lo = cm_balloc(t->bud, m + 1, false, &rc);
    a->byte_hi = cm_balloc(t->bud, m + 1, false, &rc);
    a->byte_to = cm_balloc(t->bud, (m + 1) * sizeof *a->byte_to, false, &rc);
    for (size_t i = 0; !rc && i < m; i++) {
        uint32_t k = fill[t->bsrc.data[i]]++;
        a->byte_lo[k] = (uint8_t)t->brange.data[i];
        a->byte_hi[k] = (uint8_t)(t->brange.data[i] >> 8);
        a->byte_to[k] = t->bdst.data[i];
    }
    cm_bfree(t->bud, fill);
    cm_vec_free(&t->bsrc), cm_vec_free(&t->brange), cm_vec_free(&t->bdst);
    return rc;
}

/* Label edges (lab != NULL) or epsilon edges into CSR arrays, the lists freed. */
static int csr_edges(tbuilder *t, cm_vec32 *src, cm_vec32 *lab, cm_vec32 *dst, uint32_t **off, uint32_t **lab_out,
                     uint32_t **dst_out) {
    uint32_t *fill = NULL;
    size_t m = src->n;
    int rc = csr_offsets(t->bud, t->n, src, off, &fill);
    if (lab) *lab_out = cm_balloc(t->bud, (m + 1) * sizeof **lab_out, false, &rc);
    *dst_out = cm_balloc(t->bud, (m + 1) * sizeof **dst_out, false, &rc);
    for (size_t i = 0; !rc && i < m; i++) {
        uint32_t k = fill[src->data[i]]++;
        if (lab) (*lab_out)[k] = lab->data[i];
        (*dst_out)[k] = dst->data[i];
    }
    cm_bfree(t->bud, fill);
    cm_vec_free(src), cm_vec_free(dst);
    if (lab) cm_vec_free(lab);
    return rc;
}

static int tb_freeze(tbuilder *t, nfa_arrays *a) {
    int rc = csr_bytes(t, a);
    if (!rc) rc = csr_edges(t, &t->lsrc, &t->lab, &t->ldst, &a->label_off, &a->label, &a->label_to);
    if (!rc) rc = csr_edges(t, &t->esrc, NULL, &t->edst, &a->eps_off, NULL, &a->eps_to);
    if (rc) return rc;
    cm_nfa_view v = {t->n, a->byte_off, a->byte_lo, a->byte_hi, a->byte_to, a->label_off, a->label, a->label_to,
                     a->eps_off, a->eps_to};
    a->v = v;
    return CM_OK;
}

/* One NFA for roots[0..n): state 0 is the final state, 1 + i the start of root i
 * (entries: ENTRY refs of a right-linear component lead there). */
static int thompson(const cm_ir_input *in, const uint32_t *roots, uint32_t n, bool entries, cm_budget *bud,
                    nfa_arrays *a) {
    tbuilder t;
    memset(&t, 0, sizeof t);
    for (size_t i = 0; tb_vec(&t, i); i++) tb_vec(&t, i)->bud = bud;
    t.in = in;
    t.bud = bud;
    t.n = 1 + n;
    t.n_entries = entries ? n : 0;
    for (uint32_t k = 0; k < cm_watch.n; k++) cm_watch.w[k].lo = cm_watch.w[k].hi = 0; /* (a root's NFA of its own) */
    int rc = CM_OK;
    for (uint32_t i = 0; !rc && i < n; i++) rc = tb_build(&t, roots[i], 1 + i, 0, 0);
    cm_bfree(bud, t.memo_key);
    cm_bfree(bud, t.memo_val);
    if (!rc) rc = tb_freeze(&t, a);
    for (size_t i = 0; tb_vec(&t, i); i++) cm_vec_free(tb_vec(&t, i));
    return rc;
}

/* The DFAs of roots[0..n) from one NFA (shared) or (n = 1) from the root's own. */
static int build_roots(const cm_ir_input *in, const uint32_t *roots, uint32_t n, bool shared, size_t max_states,
                       cm_budget *bud, cm_dfa_out **out) {
    nfa_arrays a;
    memset(&a, 0, sizeof a);
    uint64_t t0 = cm_stats_now();
    int rc = thompson(in, roots, n, shared, bud, &a);
    cm_stats_add(CM_PH_THOMPSON, t0);
    if (!rc) rc = cm_budget_time(bud);
    /* classes merged (expanded callees cut finer) */
    for (uint32_t i = 0; !rc && i < n; i++) rc = cm_fsm_build_ex(&a.v, 1 + i, 0, max_states, true, bud, &out[i]);
    nfa_free(bud, &a);
    return rc;
}

int cm_fsm_build_ir(const cm_ir_input *in, const uint32_t *roots, uint32_t n_roots, int shared, size_t max_states,
                    cm_budget *budget, cm_dfa_out **out) {
    if (!in || !roots || !out || !n_roots || (in->n_frags && !in->frags)) return CM_ERR_ARG;
    for (uint32_t i = 0; i < n_roots; i++) out[i] = NULL;
    int rc = CM_OK;
    if (shared) rc = build_roots(in, roots, n_roots, true, max_states, budget, out);
    for (uint32_t k = 0; !shared && !rc && k < n_roots; k++)
        rc = build_roots(in, roots + k, 1, false, max_states, budget, out + k);
    if (rc) {
        for (uint32_t i = 0; i < n_roots; i++) {
            cm_dfa_release(budget, out[i]);
            out[i] = NULL;
        }
    }
    return rc;
}
