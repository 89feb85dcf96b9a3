/* DFA minimization: the coarsest partition, the same as Moore's rounds (tests/reference_fsm.py
 * minimize, the reference), found by registration over strongly connected components
 * (register.c) when every cycle is small, else by Hopcroft's partition refinement (block
 * worklist, smaller half): initial blocks are (accepting, defined symbols), a missing
 * transition being one into a sink of its own, and blocks are split by the predecessors of
 * splitter blocks.  Symbols: byte classes 0 .. nc - 1, then the distinct labels.  Either way
 * the blocks are numbered by first appearance (the start state's is 0); the rows of one state per
 * block are then written from the sparse edges (subset construction writes no dense rows). */
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

typedef struct {
    const cm_dfa_out *d;
    const cm_sparse_edges *sp;
    cm_budget *bud;
    uint32_t n, nc;
    size_t n_sym, nw;                    /* symbols; 64-bit words of a byte-class set */
    uint32_t *lsym;                      /* [label edges] symbol of each label edge */
    uint64_t *defw;                      /* [n * nw] byte classes each state defines */
    uint32_t *in_off, *in_src, *in_sym;  /* in-edges by target: (source, symbol) */
    /* the partition: block b holds elems[bfirst[b] .. bend[b]), loc[s] is s's place
     * in elems; while b is split, elems[bfirst[b] .. bmid[b]) are its marked states */
    uint32_t *block, *elems, *loc, *bfirst, *bend, *bmid, n_blocks;
    uint8_t *inwl;                       /* [blocks] on the worklist */
    uint32_t *sym_cnt, *sym_off;         /* [n_sym] predecessors of a splitter by symbol */
    cm_vec32 wl, touched, syms, bucket;
} refiner;

static int minimize_hopcroft(const cm_dfa_out *d, const cm_sparse_edges *sp, uint32_t *block, uint32_t *n_blocks,
                             cm_budget *bud);

static void refiner_free(refiner *r) {
    void *scratch[] = {r->lsym, r->defw, r->in_off, r->in_src, r->in_sym, r->elems, r->loc,
                       r->bfirst, r->bend, r->bmid, r->inwl, r->sym_cnt, r->sym_off};
    for (size_t i = 0; i < sizeof scratch / sizeof *scratch; i++) cm_bfree(r->bud, scratch[i]);
    cm_vec_free(&r->wl), cm_vec_free(&r->touched), cm_vec_free(&r->syms), cm_vec_free(&r->bucket);
}

/* Label values -> symbols nc .. nc + n_labsym - 1. */
static int label_symbols(refiner *r) {
    const cm_dfa_out *d = r->d;
    size_t n_lab = d->lab_off[r->n], n_labsym = 0;
    int rc = CM_OK;
    uint32_t *labv = cm_balloc(r->bud, (n_lab + 1) * sizeof *labv, false, &rc);
    r->lsym = cm_balloc(r->bud, (n_lab + 1) * sizeof *r->lsym, false, &rc);
    if (!rc && n_lab) {
        memcpy(labv, d->lab, n_lab * sizeof *labv);
        n_labsym = cm_sort_unique_u32(labv, n_lab);
        for (size_t i = 0; i < n_lab; i++) r->lsym[i] = r->nc + cm_rank_u32(labv, n_labsym, d->lab[i]);
    }
    cm_bfree(r->bud, labv);
    r->n_sym = r->nc + n_labsym;
    r->nw = (r->nc + 63) / 64;
    return rc;
}

/* In-edges CSR by target and the defined byte classes of each state. */
static int in_edges(refiner *r) {
    const cm_dfa_out *d = r->d;
    const uint32_t *spo = r->sp->off.data, *spc = r->sp->cls.data, *spt = r->sp->to.data;
    uint32_t n = r->n;
    size_t m = d->lab_off[n] + spo[n];
    int rc = CM_OK;
    r->in_off = cm_balloc(r->bud, ((size_t)n + 2) * sizeof *r->in_off, true, &rc);
    r->defw = cm_balloc(r->bud, ((size_t)n * r->nw + 1) * sizeof *r->defw, true, &rc);
    r->in_src = cm_balloc(r->bud, (m + 1) * sizeof *r->in_src, false, &rc);
    r->in_sym = cm_balloc(r->bud, (m + 1) * sizeof *r->in_sym, false, &rc);
    if (rc) return rc;
    for (uint32_t s = 0; s < n; s++) {
        uint64_t *w = r->defw + (size_t)s * r->nw;
        for (uint32_t e = spo[s]; e < spo[s + 1]; e++) {
            r->in_off[spt[e] + 2]++;
            w[spc[e] >> 6] |= 1ULL << (spc[e] & 63);
        }
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) r->in_off[d->lab_to[e] + 2]++;
    }
    for (uint32_t t = 0; t < n; t++) r->in_off[t + 2] += r->in_off[t + 1];
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t e = spo[s]; e < spo[s + 1]; e++) {
            uint32_t k = r->in_off[spt[e] + 1]++;
            r->in_src[k] = s;
            r->in_sym[k] = spc[e];
        }
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) {
            uint32_t k = r->in_off[d->lab_to[e] + 1]++;
            r->in_src[k] = s;
            r->in_sym[k] = r->lsym[e];
        }
    }
    return CM_OK;
}

/* Do states s and t have equal (accepting, defined symbols)? */
static bool same_signature(const refiner *r, uint32_t s, uint32_t t) {
    const cm_dfa_out *d = r->d;
    uint32_t ns = d->lab_off[s + 1] - d->lab_off[s];
    if (d->accepting[s] != d->accepting[t] || ns != d->lab_off[t + 1] - d->lab_off[t]
        || memcmp(r->defw + (size_t)s * r->nw, r->defw + (size_t)t * r->nw, r->nw * sizeof *r->defw))
        return false;
    for (uint32_t k = 0; k < ns; k++)
        if (r->lsym[d->lab_off[s] + k] != r->lsym[d->lab_off[t] + k]) return false;
    return true;
}

static uint64_t signature_hash(const refiner *r, uint32_t s) {
    const cm_dfa_out *d = r->d;
    const uint64_t *w = r->defw + (size_t)s * r->nw;
    uint64_t h = 1469598103934665603ULL ^ d->accepting[s];
    for (size_t k = 0; k < r->nw; k++) h = (h ^ w[k]) * 1099511628211ULL;
    for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) h = (h ^ r->lsym[e]) * 1099511628211ULL;
    return h ^ (h >> 31);
}

/* The initial partition: one block per signature, numbered in order of first state. */
static int initial_blocks(refiner *r) {
    size_t cap = 16;
    while (cap < (size_t)r->n * 2) cap *= 2;
    int rc = CM_OK;
    uint32_t *tab = cm_balloc(r->bud, cap * sizeof *tab, true, &rc);
    r->n_blocks = 0;
    for (uint32_t s = 0; !rc && s < r->n; s++) {
        for (size_t i = signature_hash(r, s) & (cap - 1);; i = (i + 1) & (cap - 1)) {
            if (!tab[i]) {
                tab[i] = s + 1;
                r->block[s] = r->n_blocks++;
                break;
            }
            if (same_signature(r, s, tab[i] - 1)) {
                r->block[s] = r->block[tab[i] - 1];
                break;
            }
        }
    }
    cm_bfree(r->bud, tab);
    return rc;
}

/* Blocks as contiguous ranges of elems, and the first worklist: every initial block
 * but the largest splits (a missing transition is one into a sink block, which the
 * initial blocks already respect): the largest's predecessors are what the others' leave. */
static int layout_blocks(refiner *r) {
    uint32_t n = r->n, acc = 0, largest = 0;
    int rc = CM_OK;
    memset(r->bend, 0, ((size_t)n + 1) * sizeof *r->bend);
    for (uint32_t s = 0; s < n; s++) r->bend[r->block[s]]++;
    for (uint32_t b = 0; b < r->n_blocks; b++) {
        r->bfirst[b] = acc;
        acc += r->bend[b];
        r->bend[b] = r->bfirst[b];
    }
    for (uint32_t s = 0; s < n; s++) {
        r->loc[s] = r->bend[r->block[s]]++;
        r->elems[r->loc[s]] = s;
    }
    for (uint32_t b = 0; b < r->n_blocks; b++) {
        r->bmid[b] = r->bfirst[b];
        if (r->bend[b] - r->bfirst[b] > r->bend[largest] - r->bfirst[largest]) largest = b;
    }
    for (uint32_t b = 0; !rc && b < r->n_blocks; b++)
        if (b != largest) {
            r->inwl[b] = 1;
            rc = cm_vec_push(&r->wl, b);
        }
    return rc;
}

/* Mark state s (move it into its block's marked prefix); touched gets the block on
 * its first mark. */
static int mark(refiner *r, uint32_t s) {
    uint32_t b = r->block[s];
    if (r->loc[s] < r->bmid[b]) return CM_OK; /* already marked */
    int rc = r->bmid[b] == r->bfirst[b] ? cm_vec_push(&r->touched, b) : CM_OK;
    uint32_t p = r->bmid[b]++, o = r->elems[p];
    r->elems[r->loc[s]] = o;
    r->loc[o] = r->loc[s];
    r->elems[p] = s;
    r->loc[s] = p;
    return rc;
}

/* Split each touched block into its marked and unmarked states; the worklist gets
 * the new block if the old one is on it, else the smaller half. */
static int split_touched(refiner *r) {
    int rc = CM_OK;
    for (size_t q = 0; !rc && q < r->touched.n; q++) {
        uint32_t b = r->touched.data[q];
        if (r->bmid[b] == r->bend[b]) {
            r->bmid[b] = r->bfirst[b];
            continue;
        }
        uint32_t nb = r->n_blocks++;
        r->bfirst[nb] = r->bfirst[b];
        r->bend[nb] = r->bmid[b];
        r->bmid[nb] = r->bfirst[nb];
        r->bfirst[b] = r->bmid[b];
        r->bmid[b] = r->bfirst[b];
        for (uint32_t i = r->bfirst[nb]; i < r->bend[nb]; i++) r->block[r->elems[i]] = nb;
        uint32_t pick = nb;
        if (!r->inwl[b]) pick = (r->bend[nb] - r->bfirst[nb]) <= (r->bend[b] - r->bfirst[b]) ? nb : b;
        r->inwl[pick] = 1;
        rc = cm_vec_push(&r->wl, pick);
    }
    return rc;
}

/* The predecessors of splitter block B grouped by symbol (a counting sort into bucket:
 * symbol a's are bucket[sym_off[a] .. sym_cnt[a]), symbols in syms); *total: their number. */
static int predecessors_by_symbol(refiner *r, uint32_t B, size_t *total) {
    int rc = CM_OK;
    r->syms.n = 0;
    *total = 0;
    for (uint32_t i = r->bfirst[B]; i < r->bend[B]; i++) {
        uint32_t t = r->elems[i];
        for (uint32_t k = r->in_off[t]; !rc && k < r->in_off[t + 1]; k++) {
            if (!r->sym_cnt[r->in_sym[k]]++) rc = cm_vec_push(&r->syms, r->in_sym[k]);
            ++*total;
        }
    }
    if (rc || !*total) return rc;
    size_t acc = 0;
    for (size_t j = 0; j < r->syms.n; j++) {
        uint32_t a = r->syms.data[j];
        r->sym_off[a] = (uint32_t)acc;
        acc += r->sym_cnt[a];
        r->sym_cnt[a] = r->sym_off[a];
    }
    if ((rc = cm_vec_reserve(&r->bucket, *total))) return rc;
    for (uint32_t i = r->bfirst[B]; i < r->bend[B]; i++) {
        uint32_t t = r->elems[i];
        for (uint32_t k = r->in_off[t]; k < r->in_off[t + 1]; k++)
            r->bucket.data[r->sym_cnt[r->in_sym[k]]++] = r->in_src[k];
    }
    return CM_OK;
}

/* Split every block by the predecessors of splitter B, symbol by symbol. */
static int refine_by(refiner *r, uint32_t B) {
    size_t total;
    int rc = predecessors_by_symbol(r, B, &total);
    for (size_t j = 0; !rc && total && j < r->syms.n; j++) {
        uint32_t a = r->syms.data[j];
        uint32_t lo = r->sym_off[a], hi = r->sym_cnt[a];
        r->sym_cnt[a] = 0;
        r->touched.n = 0;
        for (uint32_t k = lo; !rc && k < hi; k++) rc = mark(r, r->bucket.data[k]);
        if (!rc) rc = split_touched(r);
    }
    for (size_t j = 0; j < r->syms.n; j++) r->sym_cnt[r->syms.data[j]] = 0;
    return rc;
}

/* Renumber blocks in order of first appearance (the start state's block is 0). */
static int renumber_blocks(refiner *r) {
    int rc = CM_OK;
    uint32_t *order = cm_balloc(r->bud, ((size_t)r->n_blocks + 1) * sizeof *order, false, &rc), next = 0;
    if (rc) return rc;
    for (uint32_t b = 0; b < r->n_blocks; b++) order[b] = UINT32_MAX;
    for (uint32_t s = 0; s < r->n; s++) {
        if (order[r->block[s]] == UINT32_MAX) order[r->block[s]] = next++;
        r->block[s] = order[r->block[s]];
    }
    r->n_blocks = next;
    cm_bfree(r->bud, order);
    return CM_OK;
}

/* block[s]: the class of state s in the coarsest partition (ids in first-appearance order). */
static int hopcroft(refiner *r) {
    size_t n1 = (size_t)r->n + 1;
    int rc = label_symbols(r);
    if (!rc) rc = in_edges(r);
    r->elems = cm_balloc(r->bud, n1 * sizeof *r->elems, false, &rc);
    r->loc = cm_balloc(r->bud, n1 * sizeof *r->loc, false, &rc);
    r->bfirst = cm_balloc(r->bud, n1 * sizeof *r->bfirst, false, &rc);
    r->bend = cm_balloc(r->bud, n1 * sizeof *r->bend, false, &rc);
    r->bmid = cm_balloc(r->bud, n1 * sizeof *r->bmid, false, &rc);
    r->inwl = cm_balloc(r->bud, n1, true, &rc);
    r->sym_cnt = cm_balloc(r->bud, (r->n_sym + 1) * sizeof *r->sym_cnt, true, &rc);
    r->sym_off = cm_balloc(r->bud, (r->n_sym + 2) * sizeof *r->sym_off, false, &rc);
    if (!rc) rc = initial_blocks(r);
    if (!rc) rc = layout_blocks(r);
    while (!rc && r->wl.n) {
        uint32_t B = r->wl.data[--r->wl.n];
        r->inwl[B] = 0;
        rc = refine_by(r, B);
    }
    return rc ? rc : renumber_blocks(r);
}

/* Which byte classes stay (keep[c]: c starts a class of the merged DFA) when adjacent classes
 * whose columns are equal in every row of the minimal DFA are merged: column c differs from
 * c - 1 in some row where an edge on c has none on c - 1 or another target, or an edge on
 * c - 1 has none on c.  Read from the kept states' sparse edges (classes ascending), targets
 * by block: O(edges), where the pass this replaces read every row of the table, O(states x
 * classes). */
static uint32_t merged_classes(const cm_dfa_out *d, const cm_sparse_edges *sp, const uint32_t *block,
                               const uint32_t *rep, uint32_t n_blocks, uint8_t keep[256]) {
    uint32_t nc = d->n_classes, k = 1; /* k: the classes kept so far */
    memset(keep, 0, nc);
    keep[0] = 1;
    /* once every class is kept no row can merge any: the rows after are not read (the classes
     * of a DFA built from its own edges mostly all stay, found in its first rows) */
    /* the edges' arrays in locals: keep's byte stores may alias anything, so the compiler read
     * them again after each */
    const uint32_t *off = sp->off.data, *ecls = sp->cls.data, *eto = sp->to.data;
    for (uint32_t b = 0; b < n_blocks && k < nc; b++) {
        uint32_t s = rep[b], e0 = off[s], e1 = off[s + 1];
        for (uint32_t e = e0; e < e1; e++) {
            uint32_t c = ecls[e], u = eto[e];
            if (c && !keep[c] && !(e > e0 && ecls[e - 1] == c - 1 && (eto[e - 1] == u || block[eto[e - 1]] == block[u])))
                keep[c] = 1, k++;
            if (c + 1 < nc && !keep[c + 1] && !(e + 1 < e1 && ecls[e + 1] == c + 1)) keep[c + 1] = 1, k++;
        }
    }
    return k;
}

/* d with one state per block (block ids are in first-appearance order, so the start state
 * stays 0), its rows written from the sparse edges sp (d->trans is NULL: subset construction
 * wrote no rows) for the first state of each block, classes merged with `merge`.  Labels
 * and acceptance move in place: the first state s of block k moves to k <= s. */
static int emit(cm_dfa_out *d, const cm_sparse_edges *sp, const uint32_t *block, uint32_t n_blocks, bool merge,
                cm_budget *bud) {
    uint32_t nc = d->n_classes, n = d->n_states, next = 0;
    int rc = CM_OK;
    uint32_t *rep = cm_balloc(bud, ((size_t)n_blocks + 1) * sizeof *rep, false, &rc);
    if (rc) return rc;
    for (uint32_t s = 0; s < n; s++)
        if (block[s] == next) rep[next++] = s;
        else if (block[s] > next) rc = CM_ERR_ARG; /* ids must be in first-appearance order */
    if (!rc && next != n_blocks) rc = CM_ERR_ARG;
    uint8_t keep[256], cmap[256];
    uint32_t k = nc;
    if (!rc && merge && nc >= 2) k = merged_classes(d, sp, block, rep, n_blocks, keep);
    for (uint32_t c = 0, j = 0; !rc && c < nc; c++) cmap[c] = (uint8_t)(k == nc ? c : (j += keep[c]) - 1);
    int32_t *tr = rc ? NULL : malloc(((size_t)n_blocks * k + 1) * sizeof *tr);
    if (!rc && !tr) rc = CM_ERR_NOMEM;
    if (rc) {
        cm_bfree(bud, rep);
        return rc;
    }
    size_t before = cm_dfa_bytes(d);
    /* the edges' arrays and each row's bounds in locals: the row's stores may alias them, so the
     * compiler read the bound again after every store (2 of an edge's 11 instructions); with
     * no classes merged, no map (another) */
    const uint32_t *off = sp->off.data, *ecls = sp->cls.data, *eto = sp->to.data;
    for (uint32_t b = 0; b < n_blocks; b++) { /* row by row: short memsets */
        int32_t *out = tr + (size_t)b * k;
        memset(out, 0xFF, k * sizeof *out);
        uint32_t e0 = off[rep[b]], e1 = off[rep[b] + 1];
        if (k == nc)
            for (uint32_t e = e0; e < e1; e++) out[ecls[e]] = (int32_t)block[eto[e]];
        else
            for (uint32_t e = e0; e < e1; e++) out[cmap[ecls[e]]] = (int32_t)block[eto[e]];
    }
    if (n_blocks < n) { /* labels and acceptance of each block's first state, in place */
        uint32_t nl = 0, e0 = 0;
        for (uint32_t s = 0, b = 0; s < n; s++) {
            uint32_t e1 = d->lab_off[s + 1]; /* not yet overwritten: only lab_off[.. b] is */
            if (block[s] == b) {
                d->accepting[b] = d->accepting[s];
                for (uint32_t e = e0; e < e1; e++) {
                    d->lab[nl] = d->lab[e];
                    d->lab_to[nl++] = block[d->lab_to[e]];
                }
                d->lab_off[++b] = nl;
            }
            e0 = e1;
        }
    }
    if (k < nc) {
        for (uint32_t c = 0, j = 0; c < nc; c++)
            if (keep[c]) d->class_lo[j++] = d->class_lo[c];
        d->class_lo[k] = 256;
    }
    d->trans = tr;
    d->n_states = n_blocks;
    d->n_classes = k;
    cm_budget_release(bud, before - cm_dfa_bytes(d));
    cm_bfree(bud, rep);
    return CM_OK;
}

/* Minimize d in place: by registration over its SCCs (register.c) when its cycles are small,
 * else Hopcroft.  The same partition either way, numbered in order of first appearance. */
int cm_fsm_minimize(cm_dfa_out *d, const cm_sparse_edges *sp, bool merge, cm_budget *bud) {
    if (!d->n_states) return CM_OK;
    int rc = CM_OK;
    uint32_t n_blocks = 0, *block = cm_balloc(bud, ((size_t)d->n_states + 1) * sizeof *block, false, &rc);
    bool done = false, live = false;
    if (!rc) rc = cm_fsm_register(d, sp, bud, block, &n_blocks, &done, &live);
    if (!rc && done) { /* renumber in order of first appearance (the start state's class is 0) */
        uint32_t *order = cm_balloc(bud, ((size_t)n_blocks + 1) * sizeof *order, false, &rc), next = 0;
        for (uint32_t b = 0; !rc && b < n_blocks; b++) order[b] = UINT32_MAX;
        for (uint32_t s = 0; !rc && s < d->n_states; s++) {
            if (order[block[s]] == UINT32_MAX) order[block[s]] = next++;
            block[s] = order[block[s]];
        }
        cm_bfree(bud, order);
    }
    if (!rc && !done) {
        cm_stats_hopcroft(d->n_states);
        rc = minimize_hopcroft(d, sp, block, &n_blocks, bud);
    }
    if (!rc) rc = emit(d, sp, block, n_blocks, merge, bud);
    /* subset construction reaches every state it makes, and so does the quotient; liveness is
     * the registration's (a class is live when its states are), unknown after Hopcroft */
    if (!rc) d->live = live;
    cm_bfree(bud, block);
    return rc;
}

/* d, already minimal and live (direct.c: an acyclic DFA whose states are kept by content), as
 * cm_fsm_minimize would leave it: each state its own class, its rows written, classes merged. */
int cm_fsm_emit_minimal(cm_dfa_out *d, const cm_sparse_edges *sp, bool merge, cm_budget *bud) {
    if (!d->n_states) return CM_OK;
    int rc = CM_OK;
    uint32_t *block = cm_balloc(bud, ((size_t)d->n_states + 1) * sizeof *block, false, &rc);
    if (rc) return rc;
    for (uint32_t s = 0; s < d->n_states; s++) block[s] = s;
    rc = emit(d, sp, block, d->n_states, merge, bud);
    if (!rc) d->live = 1;
    cm_bfree(bud, block);
    return rc;
}

/* block[s]: s's class in the coarsest partition (first-appearance order), *n_blocks of them. */
static int minimize_hopcroft(const cm_dfa_out *d, const cm_sparse_edges *sp, uint32_t *block, uint32_t *n_blocks,
                             cm_budget *bud) {
    refiner r;
    memset(&r, 0, sizeof r);
    r.d = d;
    r.sp = sp;
    r.bud = r.wl.bud = r.touched.bud = r.syms.bud = r.bucket.bud = bud;
    r.n = d->n_states;
    r.nc = d->n_classes;
    r.block = block;
    int rc = hopcroft(&r);
    refiner_free(&r);
    *n_blocks = r.n_blocks;
    return rc;
}
