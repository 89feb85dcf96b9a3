/* Subset construction and minimization (Hopcroft) for the compiler (cfgmask/fsm.py).
 * Compile-time only: the automaton build of a grammar, not the per-token path.
 *
 * NFA edges carry a byte range or a label (a rule call or a token terminal);
 * the DFA is deterministic over byte classes (the NFA's range boundaries) and
 * labels.  DFA state 0 is the start state. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

typedef struct {
    uint32_t *data;
    size_t n, cap;
} vec32;

static int vreserve(vec32 *v, size_t n) {
    if (v->cap >= n) return CM_OK;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < n) cap *= 2;
    uint32_t *p = realloc(v->data, cap * sizeof *p);
    if (!p) return CM_ERR_NOMEM;
    v->data = p;
    v->cap = cap;
    return CM_OK;
}

static int vpush(vec32 *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        uint32_t *p = realloc(v->data, cap * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        v->data = p;
        v->cap = cap;
    }
    v->data[v->n++] = x;
    return CM_OK;
}

typedef struct {
    const cm_nfa_view *nfa;
    uint32_t final;
    uint8_t cls[256];
    uint32_t n_classes;
    uint32_t *stamp, gen;       /* per NFA state */
    vec32 pool, off;            /* DFA state k = pool[off[k] .. off[k+1]) (sorted NFA states) */
    uint32_t *htab;             /* open addressing: DFA id + 1, 0 = empty */
    size_t hcap;
    vec32 stack, pairs, tmp, prev;
    size_t max_states;
    double deadline;            /* CLOCK_MONOTONIC seconds, 0 = none */
} builder;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t hash_set(const uint32_t *p, size_t n) {
    uint64_t h = 1469598103934665603ULL ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h ^ (h >> 31);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort v[0..n) and drop repeats; returns the number kept (n > 0: v is not NULL). */
size_t cm_sort_unique_u32(uint32_t *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || v[k - 1] != v[i]) v[k++] = v[i];
    return k;
}

/* The index of x in the sorted v[0..n) (where it would go, if absent). */
static uint32_t rank_of(const uint32_t *v, size_t n, uint32_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return (uint32_t)lo;
}

/* eps-closure of b->tmp (in place, sorted, unique). */
static int closure(builder *b) {
    if (++b->gen == 0) {
        memset(b->stamp, 0, b->nfa->n_states * sizeof *b->stamp);
        b->gen = 1;
    }
    b->stack.n = 0;
    size_t n0 = b->tmp.n;
    b->tmp.n = 0;
    for (size_t i = 0; i < n0; i++) {
        uint32_t s = b->tmp.data[i];
        if (b->stamp[s] == b->gen) continue;
        b->stamp[s] = b->gen;
        if (vpush(&b->stack, s)) return CM_ERR_NOMEM;
    }
    while (b->stack.n) {
        uint32_t s = b->stack.data[--b->stack.n];
        if (vpush(&b->tmp, s)) return CM_ERR_NOMEM;
        for (uint32_t e = b->nfa->eps_off[s]; e < b->nfa->eps_off[s + 1]; e++) {
            uint32_t t = b->nfa->eps_to[e];
            if (b->stamp[t] == b->gen) continue;
            b->stamp[t] = b->gen;
            if (vpush(&b->stack, t)) return CM_ERR_NOMEM;
        }
    }
    qsort(b->tmp.data, b->tmp.n, sizeof *b->tmp.data, cmp_u32);
    return CM_OK;
}

static int grow_table(builder *b) {
    size_t n_states = b->off.n - 1, cap = b->hcap ? b->hcap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return CM_ERR_NOMEM;
    for (size_t k = 0; k < n_states; k++) {
        const uint32_t *p = b->pool.data + b->off.data[k];
        size_t i = hash_set(p, b->off.data[k + 1] - b->off.data[k]) & (cap - 1);
        while (t[i]) i = (i + 1) & (cap - 1);
        t[i] = (uint32_t)k + 1;
    }
    free(b->htab);
    b->htab = t;
    b->hcap = cap;
    return CM_OK;
}

/* The DFA state for the closed set in b->tmp, created if new; -1 for the empty set. */
static int64_t intern(builder *b) {
    if (!b->tmp.n) return -1;
    size_t n_states = b->off.n - 1;
    if ((n_states + 1) * 2 > b->hcap && grow_table(b)) return CM_ERR_NOMEM;
    size_t i = hash_set(b->tmp.data, b->tmp.n) & (b->hcap - 1);
    for (; b->htab[i]; i = (i + 1) & (b->hcap - 1)) {
        uint32_t k = b->htab[i] - 1;
        size_t len = b->off.data[k + 1] - b->off.data[k];
        if (len == b->tmp.n && !memcmp(b->pool.data + b->off.data[k], b->tmp.data, len * 4)) return k;
    }
    if (n_states >= b->max_states) return CM_ERR_LIMIT;
    for (size_t j = 0; j < b->tmp.n; j++)
        if (vpush(&b->pool, b->tmp.data[j])) return CM_ERR_NOMEM;
    if (vpush(&b->off, (uint32_t)b->pool.n)) return CM_ERR_NOMEM;
    b->htab[i] = (uint32_t)n_states + 1;
    return (int64_t)n_states;
}

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Moves of DFA state k: (key, target-set) pairs grouped by key, each group
 * closed and interned.  `labels` selects label edges instead of byte classes. */
static void sort_unique(vec32 *v) {
    if (v->n <= 16) {
        for (size_t i = 1; i < v->n; i++) {
            uint32_t x = v->data[i];
            size_t j = i;
            for (; j && v->data[j - 1] > x; j--) v->data[j] = v->data[j - 1];
            v->data[j] = x;
        }
    } else {
        qsort(v->data, v->n, sizeof *v->data, cmp_u32);
    }
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++)
        if (!k || v->data[k - 1] != v->data[i]) v->data[k++] = v->data[i];
    v->n = k;
}

/* Byte moves of DFA state k by class (a counting sort); consecutive classes with the
 * same seed set share one closure. */
static int byte_moves(builder *b, size_t k, vec32 *keys, vec32 *targets) {
    const cm_nfa_view *nfa = b->nfa;
    uint32_t nc = b->n_classes, end[257];
    memset(end, 0, sizeof end);
    size_t total = 0;
    for (uint32_t i = b->off.data[k]; i < b->off.data[k + 1]; i++) {
        uint32_t s = b->pool.data[i];
        for (uint32_t e = nfa->byte_off[s]; e < nfa->byte_off[s + 1]; e++)
            for (uint32_t c = b->cls[nfa->byte_lo[e]]; c <= b->cls[nfa->byte_hi[e]]; c++) end[c + 1]++, total++;
    }
    if (!total) return CM_OK;
    for (uint32_t c = 0; c < nc; c++) end[c + 1] += end[c];
    b->pairs.n = 0;
    if (vreserve(&b->pairs, total)) return CM_ERR_NOMEM;
    for (uint32_t i = b->off.data[k]; i < b->off.data[k + 1]; i++) {
        uint32_t s = b->pool.data[i];
        for (uint32_t e = nfa->byte_off[s]; e < nfa->byte_off[s + 1]; e++)
            for (uint32_t c = b->cls[nfa->byte_lo[e]]; c <= b->cls[nfa->byte_hi[e]]; c++)
                b->pairs.data[end[c]++] = nfa->byte_to[e];
    }
    /* now end[c] is the end of class c's targets and end[c - 1] its start */
    int64_t prev_t = -1;
    for (uint32_t c = 0; c < nc; c++) {
        uint32_t lo = c ? end[c - 1] : 0, hi = end[c];
        if (lo == hi) continue;
        if (vreserve(&b->tmp, hi - lo)) return CM_ERR_NOMEM;
        for (uint32_t i = lo; i < hi; i++) b->tmp.data[i - lo] = b->pairs.data[i]; /* short: no memcpy */
        b->tmp.n = hi - lo;
        sort_unique(&b->tmp);
        int64_t t;
        bool same = prev_t >= 0 && b->prev.n == b->tmp.n;
        for (size_t i = 0; same && i < b->tmp.n; i++) same = b->prev.data[i] == b->tmp.data[i];
        if (same) {
            t = prev_t;
        } else {
            if (vreserve(&b->prev, b->tmp.n)) return CM_ERR_NOMEM;
            for (size_t i = 0; i < b->tmp.n; i++) b->prev.data[i] = b->tmp.data[i];
            b->prev.n = b->tmp.n;
            int rc = closure(b);
            if (rc) return rc;
            t = intern(b);
            if (t < 0) return (int)t;
            prev_t = t;
        }
        if (vpush(keys, c) || vpush(targets, (uint32_t)t)) return CM_ERR_NOMEM;
    }
    return CM_OK;
}

static int moves(builder *b, size_t k, bool labels, vec32 *keys, vec32 *targets) {
    const cm_nfa_view *nfa = b->nfa;
    if (!labels) return byte_moves(b, k, keys, targets);
    b->pairs.n = 0;
    for (uint32_t i = b->off.data[k]; i < b->off.data[k + 1]; i++) {
        uint32_t s = b->pool.data[i];
        if (labels) {
            for (uint32_t e = nfa->label_off[s]; e < nfa->label_off[s + 1]; e++)
                if (vpush(&b->pairs, nfa->label[e]) || vpush(&b->pairs, nfa->label_to[e])) return CM_ERR_NOMEM;
            continue;
        }
        for (uint32_t e = nfa->byte_off[s]; e < nfa->byte_off[s + 1]; e++)
            for (uint32_t c = b->cls[nfa->byte_lo[e]]; c <= b->cls[nfa->byte_hi[e]]; c++)
                if (vpush(&b->pairs, c) || vpush(&b->pairs, nfa->byte_to[e])) return CM_ERR_NOMEM;
    }
    if (b->pairs.n) qsort(b->pairs.data, b->pairs.n / 2, 2 * sizeof(uint32_t), cmp_pair); /* data may be NULL */
    for (size_t i = 0; i < b->pairs.n;) {
        uint32_t key = b->pairs.data[i];
        b->tmp.n = 0;
        for (; i < b->pairs.n && b->pairs.data[i] == key; i += 2)
            if (vpush(&b->tmp, b->pairs.data[i + 1])) return CM_ERR_NOMEM;
        int rc = closure(b);
        if (rc) return rc;
        int64_t t = intern(b);
        if (t < 0) return (int)t;
        if (vpush(keys, key) || vpush(targets, (uint32_t)t)) return CM_ERR_NOMEM;
    }
    return CM_OK;
}

static void init_classes(builder *b) {
    uint8_t cut[257] = {0};
    cut[0] = 1;
    for (uint32_t e = 0; e < b->nfa->byte_off[b->nfa->n_states]; e++) {
        cut[b->nfa->byte_lo[e]] = 1;
        cut[b->nfa->byte_hi[e] + 1] = 1;
    }
    int c = -1;
    for (int x = 0; x < 256; x++) {
        c += cut[x];
        b->cls[x] = (uint8_t)c;
    }
    b->n_classes = (uint32_t)c + 1;
}

/* The byte transitions of a DFA as lists (state k: class cls[i] -> to[i] for i in
 * off[k] .. off[k+1]), beside the dense table: minimization walks these. */
typedef struct {
    vec32 off, cls, to;
} sparse_edges;

static int subset_construction(builder *b, uint32_t start, cm_dfa_out *d, sparse_edges *sp) {
    vec32 keys = {0}, targets = {0}, lab = {0}, lab_to = {0}, lab_off = {0}, trans = {0};
    int rc = vpush(&b->off, 0);
    if (!rc) rc = vpush(&sp->off, 0);
    b->tmp.n = 0;
    if (!rc) rc = vpush(&b->tmp, start);
    if (!rc) rc = closure(b);
    if (!rc) {
        int64_t first = intern(b);
        rc = first < 0 ? (int)first : CM_OK;
    }
    if (!rc) rc = vpush(&lab_off, 0);
    for (size_t k = 0; !rc && k < b->off.n - 1; k++) {
        if (b->deadline > 0 && (k & 63) == 0 && now_seconds() > b->deadline) {
            rc = CM_ERR_TIMEOUT;
            break;
        }
        keys.n = targets.n = 0;
        rc = moves(b, k, false, &keys, &targets);
        if (!rc && !(rc = vreserve(&trans, trans.n + b->n_classes))) {
            memset(trans.data + trans.n, 0xFF, b->n_classes * sizeof *trans.data);
            trans.n += b->n_classes;
        }
        for (size_t i = 0; !rc && i < keys.n; i++) {
            trans.data[k * b->n_classes + keys.data[i]] = targets.data[i];
            rc = (vpush(&sp->cls, keys.data[i]) || vpush(&sp->to, targets.data[i])) ? CM_ERR_NOMEM : CM_OK;
        }
        if (!rc) rc = vpush(&sp->off, (uint32_t)sp->cls.n);
        keys.n = targets.n = 0;
        if (!rc) rc = moves(b, k, true, &keys, &targets);
        for (size_t i = 0; !rc && i < keys.n; i++)
            rc = (vpush(&lab, keys.data[i]) || vpush(&lab_to, targets.data[i])) ? CM_ERR_NOMEM : CM_OK;
        if (!rc) rc = vpush(&lab_off, (uint32_t)lab.n);
    }
    free(keys.data);
    free(targets.data);
    d->n_states = (uint32_t)(b->off.n - 1);
    d->trans = (int32_t *)trans.data;
    d->lab = lab.data;
    d->lab_to = lab_to.data;
    d->lab_off = lab_off.data;
    if (!rc) {
        d->accepting = calloc(d->n_states ? d->n_states : 1, 1);
        if (!d->accepting) return CM_ERR_NOMEM;
        for (uint32_t k = 0; k < d->n_states; k++)
            for (uint32_t i = b->off.data[k]; i < b->off.data[k + 1]; i++)
                if (b->pool.data[i] == b->final) d->accepting[k] = 1;
    }
    return rc;
}

/* ---- minimization --------------------------------------------------------- */

/* Rebuild d with one state per block (block ids are in first-appearance order,
 * so the start state stays 0). */
static int collapse(cm_dfa_out *d, const uint32_t *block, uint32_t n_blocks) {
    int32_t *trans = malloc((size_t)n_blocks * d->n_classes * sizeof *trans + 4);
    uint8_t *acc = calloc(n_blocks + 1, 1);
    uint8_t *done = calloc(n_blocks + 1, 1);
    vec32 lab = {0}, lab_to = {0}, lab_off = {0};
    int rc = (trans && acc && done) ? vpush(&lab_off, 0) : CM_ERR_NOMEM;
    uint32_t next_block = 0;
    for (uint32_t s = 0; !rc && s < d->n_states; s++) {
        uint32_t k = block[s];
        if (done[k]) continue;
        if (k != next_block++) rc = CM_ERR_ARG; /* ids must be in first-appearance order */
        done[k] = 1;
        acc[k] = d->accepting[s];
        for (uint32_t c = 0; c < d->n_classes; c++) {
            int32_t t = d->trans[(size_t)s * d->n_classes + c];
            trans[(size_t)k * d->n_classes + c] = t < 0 ? -1 : (int32_t)block[t];
        }
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            rc = (vpush(&lab, d->lab[e]) || vpush(&lab_to, block[d->lab_to[e]])) ? CM_ERR_NOMEM : CM_OK;
        if (!rc) rc = vpush(&lab_off, (uint32_t)lab.n);
    }
    free(done);
    if (rc) {
        free(trans);
        free(acc);
        free(lab.data);
        free(lab_to.data);
        free(lab_off.data);
        return rc;
    }
    free(d->trans);
    free(d->accepting);
    free(d->lab);
    free(d->lab_to);
    free(d->lab_off);
    d->trans = trans;
    d->accepting = acc;
    d->lab = lab.data;
    d->lab_to = lab_to.data;
    d->lab_off = lab_off.data;
    d->n_states = n_blocks;
    return CM_OK;
}

/* Hopcroft's partition refinement (block worklist, smaller half), the same coarsest
 * partition as Moore's rounds: initial blocks are (accepting, defined symbols), a
 * missing transition being one into a sink of its own, and blocks are split by the
 * predecessors of splitter blocks.  Symbols: byte classes, then distinct labels. */
static int hopcroft(const cm_dfa_out *d, const sparse_edges *sp, uint32_t *block, uint32_t *n_blocks_out) {
    const uint32_t *spo = sp->off.data, *spc = sp->cls.data, *spt = sp->to.data;
    uint32_t n = d->n_states, nc = d->n_classes;
    size_t n_lab = d->lab_off[n];
    int rc = CM_OK;
    /* label values -> symbols nc .. nc + n_labsym - 1 */
    uint32_t *labv = malloc((n_lab + 1) * sizeof *labv);
    uint32_t *lsym = malloc((n_lab + 1) * sizeof *lsym);
    size_t m = n_lab, n_labsym = 0;
    if (!labv || !lsym) rc = CM_ERR_NOMEM;
    if (!rc && n_lab) {
        memcpy(labv, d->lab, n_lab * sizeof *labv);
        n_labsym = cm_sort_unique_u32(labv, n_lab);
        for (size_t i = 0; i < n_lab; i++) {
            lsym[i] = nc + rank_of(labv, n_labsym, d->lab[i]);
        }
    }
    size_t n_sym = nc + n_labsym, nw = (nc + 63) / 64;
    /* in-edges CSR by target: (source, symbol); the defined byte classes of each state */
    uint32_t *in_off = calloc((size_t)n + 2, sizeof *in_off);
    uint64_t *defw = calloc((size_t)n * nw + 1, sizeof *defw);
    if (!defw) rc = CM_ERR_NOMEM;
    for (uint32_t s = 0; !rc && in_off && s < n; s++) {
        uint64_t *w = defw + (size_t)s * nw;
        for (uint32_t e = spo[s]; e < spo[s + 1]; e++) {
            in_off[spt[e] + 2]++;
            w[spc[e] >> 6] |= 1ULL << (spc[e] & 63);
            m++;
        }
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) in_off[d->lab_to[e] + 2]++;
    }
    uint32_t *in_src = malloc((m + 1) * sizeof *in_src);
    uint32_t *in_sym = malloc((m + 1) * sizeof *in_sym);
    uint32_t *elems = malloc(((size_t)n + 1) * sizeof *elems);
    uint32_t *loc = malloc(((size_t)n + 1) * sizeof *loc);
    uint32_t *bfirst = malloc(((size_t)n + 1) * sizeof *bfirst);
    uint32_t *bend = malloc(((size_t)n + 1) * sizeof *bend);
    uint32_t *bmid = malloc(((size_t)n + 1) * sizeof *bmid);
    uint8_t *inwl = calloc((size_t)n + 1, 1);
    uint32_t *sym_cnt = calloc(n_sym + 1, sizeof *sym_cnt);
    uint32_t *sym_off = malloc((n_sym + 2) * sizeof *sym_off);
    vec32 wl = {0}, touched = {0}, syms = {0}, bucket = {0};
    uint32_t *tab = NULL, *order = NULL;
    if (!in_off || !in_src || !in_sym || !elems || !loc || !bfirst || !bend || !bmid || !inwl || !sym_cnt
        || !sym_off)
        rc = CM_ERR_NOMEM;
    if (!rc) {
        for (uint32_t t = 0; t < n; t++) in_off[t + 2] += in_off[t + 1];
        for (uint32_t s = 0; s < n; s++) {
            for (uint32_t e = spo[s]; e < spo[s + 1]; e++) {
                uint32_t k = in_off[spt[e] + 1]++;
                in_src[k] = s;
                in_sym[k] = spc[e];
            }
            for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) {
                uint32_t k = in_off[d->lab_to[e] + 1]++;
                in_src[k] = s;
                in_sym[k] = lsym[e];
            }
        }
    }
    /* initial partition: states with equal (accepting, defined symbols) */
    uint32_t n_blocks = 0;
    if (!rc) {
        size_t cap = 16;
        while (cap < (size_t)n * 2) cap *= 2;
        tab = calloc(cap, sizeof *tab);
        order = malloc(((size_t)n + 1) * sizeof *order);
        if (!tab || !order) rc = CM_ERR_NOMEM;
        for (uint32_t s = 0; !rc && s < n; s++) {
            const uint64_t *w = defw + (size_t)s * nw;
            uint64_t h = 1469598103934665603ULL ^ d->accepting[s];
            for (size_t k = 0; k < nw; k++) h = (h ^ w[k]) * 1099511628211ULL;
            for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) h = (h ^ lsym[e]) * 1099511628211ULL;
            size_t i = (h ^ (h >> 31)) & (cap - 1);
            for (;; i = (i + 1) & (cap - 1)) {
                if (!tab[i]) {
                    tab[i] = s + 1;
                    block[s] = n_blocks++;
                    break;
                }
                uint32_t r = tab[i] - 1;
                bool same = d->accepting[r] == d->accepting[s]
                            && d->lab_off[r + 1] - d->lab_off[r] == d->lab_off[s + 1] - d->lab_off[s]
                            && !memcmp(w, defw + (size_t)r * nw, nw * sizeof *w);
                for (uint32_t k = 0; same && k < d->lab_off[s + 1] - d->lab_off[s]; k++)
                    same = lsym[d->lab_off[s] + k] == lsym[d->lab_off[r] + k];
                if (same) {
                    block[s] = block[r];
                    break;
                }
            }
        }
    }
    if (!rc) {
        /* blocks as contiguous ranges of elems */
        memset(bend, 0, ((size_t)n + 1) * sizeof *bend);
        for (uint32_t s = 0; s < n; s++) bend[block[s]]++;
        uint32_t acc = 0;
        for (uint32_t b = 0; b < n_blocks; b++) {
            bfirst[b] = acc;
            acc += bend[b];
            bend[b] = bfirst[b];
        }
        for (uint32_t s = 0; s < n; s++) {
            loc[s] = bend[block[s]]++;
            elems[loc[s]] = s;
        }
        /* every initial block but the largest splits (a missing transition is one into a
         * sink block, which the initial blocks already respect): the largest's predecessors
         * are what the others' leave */
        uint32_t largest = 0;
        for (uint32_t b = 0; b < n_blocks; b++) {
            bmid[b] = bfirst[b];
            if (bend[b] - bfirst[b] > bend[largest] - bfirst[largest]) largest = b;
        }
        for (uint32_t b = 0; !rc && b < n_blocks; b++)
            if (b != largest) {
                inwl[b] = 1;
                rc = vpush(&wl, b);
            }
    }
    while (!rc && wl.n) {
        uint32_t B = wl.data[--wl.n];
        inwl[B] = 0;
        /* predecessors of B, grouped by symbol (counting sort) */
        syms.n = 0;
        size_t total = 0;
        for (uint32_t i = bfirst[B]; i < bend[B]; i++) {
            uint32_t t = elems[i];
            for (uint32_t k = in_off[t]; !rc && k < in_off[t + 1]; k++) {
                if (!sym_cnt[in_sym[k]]++) rc = vpush(&syms, in_sym[k]);
                total++;
            }
        }
        if (rc || !total) {
            for (size_t j = 0; j < syms.n; j++) sym_cnt[syms.data[j]] = 0;
            continue;
        }
        size_t acc = 0;
        for (size_t j = 0; j < syms.n; j++) {
            uint32_t a = syms.data[j];
            sym_off[a] = (uint32_t)acc;
            acc += sym_cnt[a];
            sym_cnt[a] = sym_off[a];
        }
        if ((rc = vreserve(&bucket, total))) break;
        for (uint32_t i = bfirst[B]; i < bend[B]; i++) {
            uint32_t t = elems[i];
            for (uint32_t k = in_off[t]; k < in_off[t + 1]; k++) bucket.data[sym_cnt[in_sym[k]]++] = in_src[k];
        }
        for (size_t j = 0; !rc && j < syms.n; j++) {
            uint32_t a = syms.data[j];
            uint32_t lo = sym_off[a], hi = sym_cnt[a];
            sym_cnt[a] = 0;
            touched.n = 0;
            for (uint32_t k = lo; !rc && k < hi; k++) {
                uint32_t s = bucket.data[k], b = block[s];
                if (loc[s] < bmid[b]) continue; /* already marked */
                if (bmid[b] == bfirst[b]) rc = vpush(&touched, b);
                uint32_t p = bmid[b]++, o = elems[p];
                elems[loc[s]] = o;
                loc[o] = loc[s];
                elems[p] = s;
                loc[s] = p;
            }
            for (size_t q = 0; !rc && q < touched.n; q++) {
                uint32_t b = touched.data[q];
                if (bmid[b] == bend[b]) {
                    bmid[b] = bfirst[b];
                    continue;
                }
                uint32_t nb = n_blocks++;
                bfirst[nb] = bfirst[b];
                bend[nb] = bmid[b];
                bmid[nb] = bfirst[nb];
                bfirst[b] = bmid[b];
                bmid[b] = bfirst[b];
                for (uint32_t i = bfirst[nb]; i < bend[nb]; i++) block[elems[i]] = nb;
                if (inwl[b]) {
                    inwl[nb] = 1;
                    rc = vpush(&wl, nb);
                } else {
                    uint32_t small = (bend[nb] - bfirst[nb]) <= (bend[b] - bfirst[b]) ? nb : b;
                    inwl[small] = 1;
                    rc = vpush(&wl, small);
                }
            }
        }
        for (size_t j = 0; j < syms.n; j++) sym_cnt[syms.data[j]] = 0;
    }
    if (!rc) {
        /* renumber blocks in order of first appearance */
        for (uint32_t b = 0; b < n_blocks; b++) order[b] = UINT32_MAX;
        uint32_t next = 0;
        for (uint32_t s = 0; s < n; s++) {
            if (order[block[s]] == UINT32_MAX) order[block[s]] = next++;
            block[s] = order[block[s]];
        }
        *n_blocks_out = next;
    }
    free(labv), free(lsym), free(in_off), free(in_src), free(in_sym), free(elems), free(loc);
    free(bfirst), free(bend), free(bmid), free(inwl), free(sym_cnt), free(sym_off), free(tab), free(order);
    free(defw);
    free(wl.data), free(touched.data), free(syms.data), free(bucket.data);
    return rc;
}

static int minimize(cm_dfa_out *d, const sparse_edges *sp) {
    uint32_t *block = malloc(((size_t)d->n_states + 1) * sizeof *block);
    uint32_t n_blocks = 0;
    int rc = block ? hopcroft(d, sp, block, &n_blocks) : CM_ERR_NOMEM;
    if (!rc && n_blocks < d->n_states) rc = collapse(d, block, n_blocks);
    free(block);
    return rc;
}

void cm_dfa_out_free(cm_dfa_out *d) {
    if (!d) return;
    free(d->trans);
    free(d->accepting);
    free(d->lab);
    free(d->lab_to);
    free(d->lab_off);
    free(d);
}

int cm_fsm_build(const cm_nfa_view *nfa, uint32_t start, uint32_t final, size_t max_states,
                 double max_seconds, cm_dfa_out **out) {
    if (!nfa || !out || start >= nfa->n_states || final >= nfa->n_states) return CM_ERR_ARG;
    *out = NULL;
    builder b;
    sparse_edges sp;
    memset(&b, 0, sizeof b);
    memset(&sp, 0, sizeof sp);
    b.nfa = nfa;
    b.final = final;
    b.max_states = max_states;
    b.deadline = max_seconds > 0 ? now_seconds() + max_seconds : 0;
    b.stamp = calloc(nfa->n_states, sizeof *b.stamp);
    cm_dfa_out *d = calloc(1, sizeof *d);
    int rc = (b.stamp && d) ? CM_OK : CM_ERR_NOMEM;
    if (!rc) {
        init_classes(&b);
        d->n_classes = b.n_classes;
        for (int x = 0, c = -1; x < 256; x++)
            if (b.cls[x] != c) d->class_lo[++c] = (uint16_t)x;
        d->class_lo[b.n_classes] = 256;
        rc = subset_construction(&b, start, d, &sp);
    }
    if (!rc) rc = minimize(d, &sp);
    free(sp.off.data), free(sp.cls.data), free(sp.to.data);
    free(b.stamp);
    free(b.pool.data);
    free(b.off.data);
    free(b.htab);
    free(b.stack.data);
    free(b.pairs.data);
    free(b.tmp.data);
    free(b.prev.data);
    if (rc) {
        cm_dfa_out_free(d);
        return rc;
    }
    *out = d;
    return CM_OK;
}

/* ---- Thompson construction from encoded IR ---------------------------------
 * The compiler (cfgmask/automata.py, _Encoder) serializes a grammar's IR as a
 * DAG of nodes in one uint32 array; a node refers to its children by offset.
 * This builds the same NFA as automata._Builder (state for state) and hands it
 * to cm_fsm_build. */

typedef struct {
    vec32 bsrc, blo, bhi, bdst;   /* byte edges */
    vec32 lsrc, lab, ldst;        /* label edges */
    vec32 esrc, edst;             /* epsilon edges */
    uint32_t n;                   /* states */
    const cm_ir_input *in;
    const uint32_t *entries;      /* right-linear component: entry state of each member */
    double deadline;
} tbuilder;

#define TB_MAX_STATES (UINT32_MAX / 4)

static int tb_state(tbuilder *t, uint32_t *s) {
    if (t->n >= TB_MAX_STATES) return CM_ERR_NOMEM;
    if (t->deadline > 0 && (t->n & 0xFFFF) == 0xFFFF && now_seconds() > t->deadline) return CM_ERR_TIMEOUT;
    *s = t->n++;
    return CM_OK;
}

static int tb_byte(tbuilder *t, uint32_t s, uint32_t lo, uint32_t hi, uint32_t d) {
    if (lo > 255 || hi > 255 || lo > hi) return CM_ERR_ARG;
    return (vpush(&t->bsrc, s) || vpush(&t->blo, lo) || vpush(&t->bhi, hi) || vpush(&t->bdst, d)) ? CM_ERR_NOMEM
                                                                                                 : CM_OK;
}

static int tb_eps(tbuilder *t, uint32_t s, uint32_t d) {
    return (vpush(&t->esrc, s) || vpush(&t->edst, d)) ? CM_ERR_NOMEM : CM_OK;
}

static int tb_label(tbuilder *t, uint32_t s, uint32_t label, uint32_t d) {
    return (vpush(&t->lsrc, s) || vpush(&t->lab, label) || vpush(&t->ldst, d)) ? CM_ERR_NOMEM : CM_OK;
}

/* Copy a DFA between start and end (automata: NFA.embed). */
static int tb_embed(tbuilder *t, const cm_ir_frag *f, uint32_t start, uint32_t end) {
    const cm_dfa_out *d = f->dfa;
    if ((uint64_t)t->n + d->n_states >= TB_MAX_STATES) return CM_ERR_NOMEM;
    if (t->deadline > 0 && now_seconds() > t->deadline) return CM_ERR_TIMEOUT;
    uint32_t base = t->n;
    t->n += d->n_states;
    int rc = CM_OK;
    for (uint32_t s = 0; !rc && s < d->n_states; s++) {
        const int32_t *row = d->trans + (size_t)s * d->n_classes;
        for (uint32_t c = 0; !rc && c < d->n_classes;) {
            int32_t to = row[c];
            uint32_t c1 = c + 1;
            while (c1 < d->n_classes && row[c1] == to) c1++;
            if (to >= 0) rc = tb_byte(t, base + s, d->class_lo[c], d->class_lo[c1] - 1u, base + (uint32_t)to);
            c = c1;
        }
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            rc = tb_label(t, base + s, f->labels[d->lab[e]], base + d->lab_to[e]);
        if (!rc && d->accepting[s]) rc = tb_eps(t, base + s, end);
    }
    return rc ? rc : tb_eps(t, start, base);
}

static const cm_ir_ref *tb_find_ref(const cm_ir_input *in, uint32_t name) {
    size_t lo = 0, hi = in->n_refs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (in->refs[mid].name < name) lo = mid + 1;
        else hi = mid;
    }
    return (lo < in->n_refs && in->refs[lo].name == name) ? &in->refs[lo] : NULL;
}

#define TB_NEED(k) do { if ((size_t)pc + (k) > in->code_len) return CM_ERR_ARG; } while (0)

static int tb_build(tbuilder *t, uint32_t pc, uint32_t start, uint32_t end, int depth) {
    const cm_ir_input *in = t->in;
    const uint32_t *code = in->code;
    int rc = CM_OK;
    if (depth > 10000) return CM_ERR_ARG;
    TB_NEED(2);
    uint32_t op = code[pc], n = code[pc + 1];
    switch (op) {
    case CM_IR_LIT: {
        TB_NEED(2 + (size_t)n);
        if (!n) return tb_eps(t, start, end);
        uint32_t cur = start;
        for (uint32_t i = 0; !rc && i < n; i++) {
            uint32_t nxt = end;
            if (i != n - 1 && (rc = tb_state(t, &nxt))) break;
            rc = tb_byte(t, cur, code[pc + 2 + i], code[pc + 2 + i], nxt);
            cur = nxt;
        }
        return rc;
    }
    case CM_IR_BYTES:
        TB_NEED(2 + 2 * (size_t)n);
        for (uint32_t i = 0; !rc && i < n; i++) rc = tb_byte(t, start, code[pc + 2 + 2 * i], code[pc + 3 + 2 * i], end);
        return rc;
    case CM_IR_UTF8: { /* [op, n_ranges, ranges..., n_seqs, (len, (lo, hi) * len) * n_seqs] */
        size_t p = (size_t)pc + 2 + 2 * (size_t)n;
        if (p >= in->code_len) return CM_ERR_ARG;
        uint32_t n_seqs = code[p++];
        for (uint32_t k = 0; !rc && k < n_seqs; k++) {
            if (p >= in->code_len) return CM_ERR_ARG;
            uint32_t len = code[p++];
            if (!len || p + 2 * (size_t)len > in->code_len) return CM_ERR_ARG;
            uint32_t cur = start;
            for (uint32_t i = 0; !rc && i < len; i++, p += 2) {
                uint32_t nxt = end;
                if (i != len - 1 && (rc = tb_state(t, &nxt))) break;
                rc = tb_byte(t, cur, code[p], code[p + 1], nxt);
                cur = nxt;
            }
        }
        return rc;
    }
    case CM_IR_SEQ: {
        TB_NEED(2 + (size_t)n);
        if (!n) return tb_eps(t, start, end);
        uint32_t cur = start;
        for (uint32_t i = 0; !rc && i < n; i++) {
            uint32_t nxt = end;
            if (i != n - 1 && (rc = tb_state(t, &nxt))) break;
            rc = tb_build(t, code[pc + 2 + i], cur, nxt, depth + 1);
            cur = nxt;
        }
        return rc;
    }
    case CM_IR_ALT:
        TB_NEED(2 + (size_t)n);
        for (uint32_t i = 0; !rc && i < n; i++) {
            uint32_t s;
            if ((rc = tb_state(t, &s)) || (rc = tb_eps(t, start, s))) break;
            rc = tb_build(t, code[pc + 2 + i], s, end, depth + 1);
        }
        return rc;
    case CM_IR_REPEAT: { /* [op, lo, hi (CM_IR_INF: none), item] */
        TB_NEED(4);
        uint32_t lo = n, hi = code[pc + 2], item = code[pc + 3], cur = start, nxt;
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
    case CM_IR_REF: {
        if (n >= in->n_names) return CM_ERR_ARG;
        const cm_ir_ref *r = tb_find_ref(in, n);
        if (r && r->kind == CM_IR_REF_ENTRY) {
            if (!t->entries) return CM_ERR_ARG;
            return tb_eps(t, start, t->entries[r->arg]);
        }
        if (r && r->kind == CM_IR_REF_EMBED) {
            if (r->arg >= in->n_frags) return CM_ERR_ARG;
            return tb_embed(t, &in->frags[r->arg], start, end);
        }
        return tb_label(t, start, in->label[n], end);
    }
    default:
        return CM_ERR_ARG; /* CM_IR_BADTOKEN (a token terminal without ids) or a bad op */
    }
}

/* CSR arrays of src-keyed edge lists (counting sort, stable). */
static int tb_csr(uint32_t n, const vec32 *src, uint32_t **off_out, uint32_t **perm_out) {
    uint32_t *off = calloc((size_t)n + 1, sizeof *off);
    uint32_t *perm = malloc((src->n ? src->n : 1) * sizeof *perm);
    if (!off || !perm) {
        free(off);
        free(perm);
        return CM_ERR_NOMEM;
    }
    for (size_t i = 0; i < src->n; i++) off[src->data[i] + 1]++;
    for (uint32_t s = 0; s < n; s++) off[s + 1] += off[s];
    uint32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!fill) {
        free(off);
        free(perm);
        return CM_ERR_NOMEM;
    }
    memcpy(fill, off, ((size_t)n + 1) * sizeof *fill);
    for (size_t i = 0; i < src->n; i++) perm[fill[src->data[i]]++] = (uint32_t)i;
    free(fill);
    *off_out = off;
    *perm_out = perm;
    return CM_OK;
}

int cm_fsm_build_ir(const cm_ir_input *in, const uint32_t *roots, uint32_t n_roots, int shared,
                    size_t max_states, double max_seconds, cm_dfa_out **out) {
    if (!in || !roots || !out || !n_roots || (in->n_frags && !in->frags)) return CM_ERR_ARG;
    for (uint32_t i = 0; i < n_roots; i++) out[i] = NULL;
    double deadline = max_seconds > 0 ? now_seconds() + max_seconds : 0;
    uint32_t *entries = NULL;
    int rc = CM_OK;
    if (shared) {
        entries = malloc((size_t)n_roots * sizeof *entries);
        if (!entries) return CM_ERR_NOMEM;
    }
    uint32_t n_nfas = shared ? 1 : n_roots;
    for (uint32_t k = 0; !rc && k < n_nfas; k++) {
        tbuilder t;
        memset(&t, 0, sizeof t);
        t.in = in;
        t.deadline = deadline;
        uint32_t final = t.n++, first = 0;
        if (shared) {
            for (uint32_t i = 0; i < n_roots; i++) entries[i] = t.n++;
            t.entries = entries;
            for (uint32_t i = 0; !rc && i < n_roots; i++) rc = tb_build(&t, roots[i], entries[i], final, 0);
        } else {
            first = t.n++;
            rc = tb_build(&t, roots[k], first, final, 0);
        }
        uint32_t *boff = NULL, *bperm = NULL, *loff = NULL, *lperm = NULL, *eoff = NULL, *eperm = NULL;
        uint8_t *blo = NULL, *bhi = NULL;
        uint32_t *bto = NULL, *lab = NULL, *lto = NULL, *eto = NULL;
        if (!rc) rc = tb_csr(t.n, &t.bsrc, &boff, &bperm);
        if (!rc) rc = tb_csr(t.n, &t.lsrc, &loff, &lperm);
        if (!rc) rc = tb_csr(t.n, &t.esrc, &eoff, &eperm);
        if (!rc) {
            blo = malloc(t.bsrc.n + 1);
            bhi = malloc(t.bsrc.n + 1);
            bto = malloc((t.bsrc.n + 1) * sizeof *bto);
            lab = malloc((t.lsrc.n + 1) * sizeof *lab);
            lto = malloc((t.lsrc.n + 1) * sizeof *lto);
            eto = malloc((t.esrc.n + 1) * sizeof *eto);
            if (!blo || !bhi || !bto || !lab || !lto || !eto) rc = CM_ERR_NOMEM;
        }
        if (!rc) {
            for (size_t i = 0; i < t.bsrc.n; i++) {
                uint32_t j = bperm[i];
                blo[i] = (uint8_t)t.blo.data[j];
                bhi[i] = (uint8_t)t.bhi.data[j];
                bto[i] = t.bdst.data[j];
            }
            for (size_t i = 0; i < t.lsrc.n; i++) {
                lab[i] = t.lab.data[lperm[i]];
                lto[i] = t.ldst.data[lperm[i]];
            }
            for (size_t i = 0; i < t.esrc.n; i++) eto[i] = t.edst.data[eperm[i]];
            cm_nfa_view v = {t.n, boff, blo, bhi, bto, loff, lab, lto, eoff, eto};
            double left = 0;
            if (deadline > 0) {
                left = deadline - now_seconds();
                if (left <= 0) rc = CM_ERR_TIMEOUT;
            }
            if (shared) {
                for (uint32_t i = 0; !rc && i < n_roots; i++)
                    rc = cm_fsm_build(&v, entries[i], final, max_states, deadline > 0 ? left : 0, &out[i]);
            } else if (!rc) {
                rc = cm_fsm_build(&v, first, final, max_states, deadline > 0 ? left : 0, &out[k]);
            }
        }
        free(boff), free(bperm), free(loff), free(lperm), free(eoff), free(eperm);
        free(blo), free(bhi), free(bto), free(lab), free(lto), free(eto);
        free(t.bsrc.data), free(t.blo.data), free(t.bhi.data), free(t.bdst.data);
        free(t.lsrc.data), free(t.lab.data), free(t.ldst.data), free(t.esrc.data), free(t.edst.data);
    }
    free(entries);
    if (rc) {
        for (uint32_t i = 0; i < n_roots; i++) {
            cm_dfa_out_free(out[i]);
            out[i] = NULL;
        }
    }
    return rc;
}

/* Renumber d's labels to 0..n-1 in increasing order of their values; used[] (room for
 * d->lab_off[n_states] entries) receives the distinct old values, ascending. */
int cm_dfa_compact_labels(cm_dfa_out *d, uint32_t *used, uint32_t *n_used) {
    size_t m = d->lab_off[d->n_states];
    *n_used = 0;
    if (!m) return CM_OK;
    memcpy(used, d->lab, m * sizeof *used);
    size_t k = cm_sort_unique_u32(used, m);
    for (size_t i = 0; i < m; i++) {
        d->lab[i] = rank_of(used, k, d->lab[i]);
    }
    *n_used = (uint32_t)k;
    return CM_OK;
}

/* ---- trimming (automata._trim_all) --------------------------------------- */

int cm_dfa_can_accept(const cm_dfa_out *d, const uint8_t *label_ok, int *result) {
    uint32_t n = d->n_states, nc = d->n_classes;
    uint8_t *seen = calloc((size_t)n + 1, 1);
    vec32 stack = {0};
    int rc = seen ? vpush(&stack, 0) : CM_ERR_NOMEM;
    *result = 0;
    if (!rc) seen[0] = 1;
    while (!rc && stack.n) {
        uint32_t s = stack.data[--stack.n];
        if (d->accepting[s]) {
            *result = 1;
            break;
        }
        const int32_t *row = d->trans + (size_t)s * nc;
        for (uint32_t c = 0; !rc && c < nc; c++)
            if (row[c] >= 0 && !seen[row[c]]) {
                seen[row[c]] = 1;
                rc = vpush(&stack, (uint32_t)row[c]);
            }
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            if (label_ok[d->lab[e]] && !seen[d->lab_to[e]]) {
                seen[d->lab_to[e]] = 1;
                rc = vpush(&stack, d->lab_to[e]);
            }
    }
    free(seen);
    free(stack.data);
    return rc;
}

int cm_dfa_trim(const cm_dfa_out *d, const uint8_t *label_ok, cm_dfa_out **out) {
    uint32_t n = d->n_states, nc = d->n_classes;
    *out = NULL;
    uint32_t *pre_off = calloc((size_t)n + 2, sizeof *pre_off);
    uint8_t *live = calloc((size_t)n + 1, 1), *reach = calloc((size_t)n + 1, 1);
    uint32_t *new_id = malloc(((size_t)n + 1) * sizeof *new_id);
    uint32_t *pre = NULL;
    vec32 stack = {0};
    cm_dfa_out *o = NULL;
    int rc = (pre_off && live && reach && new_id) ? CM_OK : CM_ERR_NOMEM;
    size_t m = 0;
    for (int pass = 0; !rc && pass < 2; pass++) {
        for (uint32_t s = 0; s < n; s++) {
            const int32_t *row = d->trans + (size_t)s * nc;
            for (uint32_t c = 0; c < nc; c++)
                if (row[c] >= 0) {
                    if (pass) pre[pre_off[row[c] + 1]++] = s;
                    else pre_off[row[c] + 2]++, m++;
                }
            for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++)
                if (label_ok[d->lab[e]]) {
                    if (pass) pre[pre_off[d->lab_to[e] + 1]++] = s;
                    else pre_off[d->lab_to[e] + 2]++, m++;
                }
        }
        if (!pass) {
            for (uint32_t t = 0; t < n; t++) pre_off[t + 2] += pre_off[t + 1];
            pre = malloc((m + 1) * sizeof *pre);
            if (!pre) rc = CM_ERR_NOMEM;
        }
    }
    for (uint32_t s = 0; !rc && s < n; s++)
        if (d->accepting[s]) {
            live[s] = 1;
            rc = vpush(&stack, s);
        }
    while (!rc && stack.n) {
        uint32_t t = stack.data[--stack.n];
        for (uint32_t k = pre_off[t]; !rc && k < pre_off[t + 1]; k++)
            if (!live[pre[k]]) {
                live[pre[k]] = 1;
                rc = vpush(&stack, pre[k]);
            }
    }
    if (!rc && live[0]) {
        reach[0] = 1;
        rc = vpush(&stack, 0);
        while (!rc && stack.n) {
            uint32_t s = stack.data[--stack.n];
            const int32_t *row = d->trans + (size_t)s * nc;
            for (uint32_t c = 0; !rc && c < nc; c++) {
                int32_t t = row[c];
                if (t >= 0 && live[t] && !reach[t]) {
                    reach[t] = 1;
                    rc = vpush(&stack, (uint32_t)t);
                }
            }
            for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++) {
                uint32_t t = d->lab_to[e];
                if (label_ok[d->lab[e]] && live[t] && !reach[t]) {
                    reach[t] = 1;
                    rc = vpush(&stack, t);
                }
            }
        }
        uint32_t k = 0;
        for (uint32_t s = 0; s < n; s++) new_id[s] = reach[s] ? k++ : UINT32_MAX;
        o = calloc(1, sizeof *o);
        if (!rc && !o) rc = CM_ERR_NOMEM;
        if (!rc) {
            o->n_states = k;
            o->n_classes = nc;
            memcpy(o->class_lo, d->class_lo, sizeof o->class_lo);
            o->trans = malloc(((size_t)k * nc + 1) * sizeof *o->trans);
            o->accepting = malloc((size_t)k + 1);
            o->lab_off = malloc(((size_t)k + 1) * sizeof *o->lab_off);
            o->lab = malloc(((size_t)d->lab_off[n] + 1) * sizeof *o->lab);
            o->lab_to = malloc(((size_t)d->lab_off[n] + 1) * sizeof *o->lab_to);
            if (!o->trans || !o->accepting || !o->lab_off || !o->lab || !o->lab_to) rc = CM_ERR_NOMEM;
        }
        if (!rc) {
            uint32_t nl = 0;
            o->lab_off[0] = 0;
            for (uint32_t s = 0; s < n; s++) {
                if (!reach[s]) continue;
                uint32_t i = new_id[s];
                const int32_t *row = d->trans + (size_t)s * nc;
                int32_t *orow = o->trans + (size_t)i * nc;
                for (uint32_t c = 0; c < nc; c++) orow[c] = (row[c] >= 0 && reach[row[c]]) ? (int32_t)new_id[row[c]] : -1;
                o->accepting[i] = d->accepting[s];
                for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++)
                    if (label_ok[d->lab[e]] && reach[d->lab_to[e]]) {
                        o->lab[nl] = d->lab[e];
                        o->lab_to[nl++] = new_id[d->lab_to[e]];
                    }
                o->lab_off[i + 1] = nl;
            }
        }
    }
    free(pre_off), free(pre), free(live), free(reach), free(new_id), free(stack.data);
    if (rc) {
        cm_dfa_out_free(o);
        return rc;
    }
    *out = o;
    return CM_OK;
}
