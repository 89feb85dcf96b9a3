/* Subset construction and Moore minimization for the compiler (cfgmask/fsm.py).
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
    vec32 stack, pairs, tmp;
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
static int moves(builder *b, size_t k, bool labels, vec32 *keys, vec32 *targets) {
    const cm_nfa_view *nfa = b->nfa;
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

static int subset_construction(builder *b, uint32_t start, cm_dfa_out *d) {
    vec32 keys = {0}, targets = {0}, lab = {0}, lab_to = {0}, lab_off = {0}, trans = {0};
    int rc = vpush(&b->off, 0);
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
        for (uint32_t c = 0; !rc && c < b->n_classes; c++) rc = vpush(&trans, UINT32_MAX);
        for (size_t i = 0; !rc && i < keys.n; i++) trans.data[k * b->n_classes + keys.data[i]] = targets.data[i];
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

/* ---- Moore minimization -------------------------------------------------- */

static int signature(const cm_dfa_out *d, const uint32_t *block, uint32_t s, vec32 *out) {
    out->n = 0;
    if (vpush(out, block[s])) return CM_ERR_NOMEM;
    for (uint32_t c = 0; c < d->n_classes; c++) {
        int32_t t = d->trans[(size_t)s * d->n_classes + c];
        if (vpush(out, t < 0 ? UINT32_MAX : block[t])) return CM_ERR_NOMEM;
    }
    for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++)
        if (vpush(out, d->lab[e]) || vpush(out, block[d->lab_to[e]])) return CM_ERR_NOMEM;
    return CM_OK;
}

/* One refinement round: states with equal signatures share a block. */
static int refine(const cm_dfa_out *d, const uint32_t *block, uint32_t *next, uint32_t *n_blocks) {
    size_t cap = 16;
    while (cap < (size_t)d->n_states * 2) cap *= 2;
    uint32_t *tab = calloc(cap, sizeof *tab);   /* representative state + 1 */
    uint32_t *id = malloc((size_t)d->n_states * sizeof *id);
    vec32 a = {0}, b = {0};
    int rc = (tab && id) ? CM_OK : CM_ERR_NOMEM;
    uint32_t count = 0;
    for (uint32_t s = 0; !rc && s < d->n_states; s++) {
        if ((rc = signature(d, block, s, &a))) break;
        size_t i = hash_set(a.data, a.n) & (cap - 1);
        for (;; i = (i + 1) & (cap - 1)) {
            if (!tab[i]) {
                tab[i] = s + 1;
                id[s] = count++;
                break;
            }
            uint32_t r = tab[i] - 1;
            if ((rc = signature(d, block, r, &b))) break;
            if (a.n == b.n && !memcmp(a.data, b.data, a.n * 4)) {
                id[s] = id[r];
                break;
            }
        }
    }
    if (!rc) {
        memcpy(next, id, (size_t)d->n_states * sizeof *id);
        *n_blocks = count;
    }
    free(tab);
    free(id);
    free(a.data);
    free(b.data);
    return rc;
}

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

static int minimize(cm_dfa_out *d) {
    uint32_t *block = malloc(((size_t)d->n_states + 1) * sizeof *block);
    uint32_t *next = malloc(((size_t)d->n_states + 1) * sizeof *next);
    int rc = (block && next) ? CM_OK : CM_ERR_NOMEM;
    uint32_t n_blocks = 0;
    if (!rc) {
        /* start from accepting / not, renumbered in first-appearance order */
        for (uint32_t s = 0; s < d->n_states; s++) block[s] = d->accepting[s] != d->accepting[0];
        n_blocks = 1;
        for (uint32_t s = 0; s < d->n_states; s++) n_blocks = block[s] ? 2 : n_blocks;
    }
    while (!rc) {
        uint32_t n_new;
        if ((rc = refine(d, block, next, &n_new))) break;
        memcpy(block, next, (size_t)d->n_states * sizeof *block);
        if (n_new == n_blocks) break;
        n_blocks = n_new;
    }
    if (!rc) rc = collapse(d, block, n_blocks);
    free(block);
    free(next);
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
    memset(&b, 0, sizeof b);
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
        rc = subset_construction(&b, start, d);
    }
    if (!rc) rc = minimize(d);
    free(b.stamp);
    free(b.pool.data);
    free(b.off.data);
    free(b.htab);
    free(b.stack.data);
    free(b.pairs.data);
    free(b.tmp.data);
    if (rc) {
        cm_dfa_out_free(d);
        return rc;
    }
    *out = d;
    return CM_OK;
}
