/* Subset construction for the compiler (cfgmask/fsm.py, thompson.c), then
 * minimization (minimize.c).  Compile-time only: the automaton build of a grammar,
 * not the per-token path.
 *
 * NFA edges carry a byte range or a label (a rule call or a token terminal);
 * the DFA is deterministic over byte classes (the NFA's range boundaries) and
 * labels.  DFA state 0 is the start state.  Every array is counted against the
 * caller's cm_budget: the sets of NFA states that name the DFA states are what
 * explodes on hostile input. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

typedef struct {
    const cm_nfa_view *nfa;
    cm_budget *bud;
    uint32_t final;
    size_t max_states;
    uint8_t cls[256];
    uint16_t class_lo[257];               /* the first byte of each class (init_classes) */
    uint32_t n_classes;
    uint32_t *stamp, gen;                 /* per NFA state */
    cm_vec32 pool, off;                   /* DFA state k = pool[off[k] .. off[k+1]) (sorted NFA states) */
    uint32_t *htab;                       /* open addressing: DFA id + 1, 0 = empty (sets of 2 or more) */
    uint32_t *single;                     /* per NFA state s: the DFA id + 1 of the set {s} (0: none) */
    uint32_t *closed;                     /* per NFA state s: the DFA id + 1 of s's closure (0: not yet) */
    size_t hcap;
    cm_vec32 stack, pairs, tmp, prev;     /* scratch */
    cm_vec32 *keys, *targets;             /* where the moves of the state being expanded go (expand) */
    cm_vec32 lab, lab_to, lab_off;        /* the DFA being built (cm_dfa_out's arrays; its rows: minimize.c) */
    cm_sparse_edges sp;                   /* its byte edges as lists, for minimization */
    struct watch_sets {                   /* per cm_watch entry (NULL without one: most builds): */
        cm_vec32 pool, off;               /* the distinct sets of its states (as pool, off) */
        uint32_t *tab;                    /* open addressing: their ids + 1 */
        size_t cap;
        uint32_t entry;                   /* id + 1 of the set holding its entry (0: none yet) */
    } *ws;
    uint32_t n_ws;
} builder;

_Thread_local cm_expand_watch cm_watch;

static cm_vec32 *builder_vec(builder *b, size_t i) {
    cm_vec32 *v[] = {&b->pool, &b->off,    &b->stack,   &b->pairs,  &b->tmp,    &b->prev,
                     &b->lab,  &b->lab_to, &b->lab_off, &b->sp.off, &b->sp.cls, &b->sp.to};
    return i < sizeof v / sizeof *v ? v[i] : NULL;
}

static void builder_free(builder *b) {
    for (size_t i = 0; builder_vec(b, i); i++) cm_vec_free(builder_vec(b, i));
    cm_bfree(b->bud, b->stamp);
    cm_bfree(b->bud, b->htab);
    cm_bfree(b->bud, b->single);
    cm_bfree(b->bud, b->closed);
    for (size_t i = 0; b->ws && i < b->n_ws; i++) {
        cm_vec_free(&b->ws[i].pool), cm_vec_free(&b->ws[i].off);
        cm_bfree(b->bud, b->ws[i].tab);
    }
    cm_bfree(b->bud, b->ws);
    b->ws = NULL;
    b->stamp = b->htab = b->single = b->closed = NULL;
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

/* A list this long or longer is sorted by radix_sort_u32 (the switch on), a shorter one by qsort. */
#define CM_RADIX_MIN 64

static atomic_int g_radix_on = 1;
static atomic_size_t g_radix_sorts;

void cm_radix_sort_enable(int on) { atomic_store(&g_radix_on, on ? 1 : 0); }
size_t cm_radix_sorts(void) { return atomic_load(&g_radix_sorts); }

/* v[0..n) sorted ascending by an LSD radix sort, 8 bits a pass, a pass for each byte in which
 * the values differ (trie entries < 2^17: at most three), through a scratch copy (on the stack
 * up to CM_RADIX_STACK values); false (v untouched) out of memory.  The composed entries'
 * candidate lists (a few hundred trie entries each, ~40 a mask in sql.lark's largest) went
 * through qsort's comparator per pair, ~15-20 instructions a comparison, n log n of them. */
#define CM_RADIX_STACK 1024
static bool radix_sort_u32(uint32_t *v, size_t n) {
    uint32_t diff = 0, stack[CM_RADIX_STACK];
    for (size_t i = 1; i < n; i++) diff |= v[i] ^ v[0];
    uint32_t *tmp = n <= CM_RADIX_STACK ? stack : malloc(n * sizeof *tmp);
    if (!tmp) return false;
    uint32_t *a = v, *b = tmp;
    for (unsigned sh = 0; sh < 32; sh += 8) {
        if (!((diff >> sh) & 255)) continue;  /* every value has this byte: the order stands */
        uint32_t cnt[256] = {0}, sum = 0;
        for (size_t i = 0; i < n; i++) cnt[(a[i] >> sh) & 255]++;
        for (unsigned c = 0; c < 256; c++) {
            uint32_t x = cnt[c];
            cnt[c] = sum;
            sum += x;
        }
        for (size_t i = 0; i < n; i++) b[cnt[(a[i] >> sh) & 255]++] = a[i];
        uint32_t *t = a;
        a = b;
        b = t;
    }
    if (a != v) memcpy(v, a, n * sizeof *v);
    if (tmp != stack) free(tmp);
    atomic_fetch_add_explicit(&g_radix_sorts, 1, memory_order_relaxed);
    return true;
}

/* Sort v[0..n) and drop repeats; returns the number kept (n > 0: v is not NULL). */
size_t cm_sort_unique_u32(uint32_t *v, size_t n) {
    size_t i = 1;
    while (i < n && v[i - 1] <= v[i]) i++;
    /* else sorted already (a composed entry's uncertain tokens) */
    if (i < n && !(n >= CM_RADIX_MIN && n <= UINT32_MAX && atomic_load_explicit(&g_radix_on, memory_order_relaxed) &&
                   radix_sort_u32(v, n)))
        qsort(v, n, sizeof *v, cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || v[k - 1] != v[i]) v[k++] = v[i];
    return k;
}

/* A fresh mark for stamp[] (all marks cleared when the counter wraps). */
static uint32_t next_gen(builder *b) {
    if (++b->gen == 0) {
        memset(b->stamp, 0, b->nfa->n_states * sizeof *b->stamp);
        b->gen = 1;
    }
    return b->gen;
}

/* Sort v[0..n) ascending by insertion (the short sets most closures are). */
static void insertion_sort(uint32_t *v, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint32_t x = v[i];
        size_t j = i;
        for (; j && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Sort v, distinct NFA states in lo .. hi all marked with the current stamp: insertion for
 * a few states, a scan of the stamps when the range is dense (big sets of unrolled
 * repetitions), else qsort. */
static void sort_marked(const builder *b, cm_vec32 *v, uint32_t lo, uint32_t hi) {
    if (v->n <= 24) {
        insertion_sort(v->data, v->n);
        return;
    }
    if (v->n < 64 || (size_t)(hi - lo) >= 8 * v->n) {
        qsort(v->data, v->n, sizeof *v->data, cmp_u32);
        return;
    }
    size_t k = 0;
    for (uint32_t s = lo; s <= hi; s++)
        if (b->stamp[s] == b->gen) v->data[k++] = s;
}

/* eps-closure of b->tmp (in place, sorted, unique). */
static int closure(builder *b) {
    uint32_t gen = next_gen(b), lo = UINT32_MAX, hi = 0;
    b->stack.n = 0;
    size_t n0 = b->tmp.n;
    b->tmp.n = 0;
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < n0; i++) {
        uint32_t s = b->tmp.data[i];
        if (b->stamp[s] == gen) continue;
        b->stamp[s] = gen;
        rc = cm_vec_push(&b->stack, s);
    }
    while (!rc && b->stack.n) {
        uint32_t s = b->stack.data[--b->stack.n];
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
        rc = cm_vec_push(&b->tmp, s);
        for (uint32_t e = b->nfa->eps_off[s]; !rc && e < b->nfa->eps_off[s + 1]; e++) {
            uint32_t t = b->nfa->eps_to[e];
            if (b->stamp[t] == gen) continue;
            b->stamp[t] = gen;
            rc = cm_vec_push(&b->stack, t);
        }
    }
    if (!rc) sort_marked(b, &b->tmp, lo, hi);
    return rc;
}

static atomic_int g_lean_on = 1;
static atomic_size_t g_lean_builds;

void cm_fsm_lean_enable(int on) { atomic_store(&g_lean_on, on ? 1 : 0); }
size_t cm_fsm_lean_builds(void) { return atomic_load(&g_lean_builds); }

/* The set table's first size with the lean switch on: room for 3/4 as many sets as the NFA has
 * states, where it grew from 64 a doubling (and a rehash of every set) at a time; most DFAs have
 * about that many states.  At most FIRST_CAP_MAX slots (a shared NFA's roots each build a part
 * of it: each would clear a table for the whole). */
#define RESERVE_STATES 4096
#define FIRST_CAP_MAX 1024
static size_t first_cap(const builder *b) {
    size_t cap = 64, n = b->nfa->n_states;
    if (atomic_load_explicit(&g_lean_on, memory_order_relaxed))
        while (cap < FIRST_CAP_MAX && cap < n + n / 2) cap *= 2;
    return cap;
}

static int grow_table(builder *b) {
    size_t n_states = b->off.n - 1, cap = b->hcap ? b->hcap * 2 : first_cap(b);
    int rc = CM_OK;
    uint32_t *t = cm_balloc(b->bud, cap * sizeof *t, true, &rc);
    if (rc) return rc;
    for (size_t k = 0; k < n_states; k++) {
        const uint32_t *p = b->pool.data + b->off.data[k];
        if (b->off.data[k + 1] - b->off.data[k] == 1) continue; /* in single[] */
        size_t i = hash_set(p, b->off.data[k + 1] - b->off.data[k]) & (cap - 1);
        while (t[i]) i = (i + 1) & (cap - 1);
        t[i] = (uint32_t)k + 1;
    }
    cm_bfree(b->bud, b->htab);
    b->htab = t;
    b->hcap = cap;
    return CM_OK;
}

/* cm_watch's note of the new DFA state b->tmp (sorted): watch k's states in it, counted if new
 * (CM_ERR_LIMIT, cm_watch.over = k + 1, past its cap or where its entry's set is not the first). */
static int watch_note1(builder *b, uint32_t k) {
    const uint32_t *v = b->tmp.data;
    uint32_t lo = cm_watch.w[k].lo, hi = cm_watch.w[k].hi;
    size_t n = b->tmp.n, i0 = 0, i1 = n;
    while (i0 < i1) { /* i0: the first >= lo */
        size_t mid = i0 + (i1 - i0) / 2;
        if (v[mid] < lo) i0 = mid + 1;
        else i1 = mid;
    }
    for (i1 = i0; i1 < n && v[i1] < hi; i1++) {}
    if (i1 == i0) return CM_OK;
    bool entry = v[i0] == lo;
    cm_vec32 *pool = &b->ws[k].pool, *off = &b->ws[k].off;
    size_t len = i1 - i0, count = off->n ? off->n - 1 : 0;
    int rc = CM_OK;
    if (!off->n && (rc = cm_vec_push(off, 0))) return rc;
    if ((count + 1) * 2 > b->ws[k].cap) { /* grow (rehash) */
        size_t cap = b->ws[k].cap ? 2 * b->ws[k].cap : 64;
        uint32_t *t = cm_balloc(b->bud, cap * sizeof *t, true, &rc);
        if (rc) return rc;
        for (size_t x = 0; x < count; x++) {
            size_t j = hash_set(pool->data + off->data[x], off->data[x + 1] - off->data[x]) & (cap - 1);
            while (t[j]) j = (j + 1) & (cap - 1);
            t[j] = (uint32_t)x + 1;
        }
        cm_bfree(b->bud, b->ws[k].tab);
        b->ws[k].tab = t, b->ws[k].cap = cap;
    }
    uint32_t *tab = b->ws[k].tab;
    size_t j = hash_set(v + i0, len) & (b->ws[k].cap - 1);
    for (; tab[j]; j = (j + 1) & (b->ws[k].cap - 1)) {
        uint32_t x = tab[j] - 1;
        if (off->data[x + 1] - off->data[x] == len && !memcmp(pool->data + off->data[x], v + i0, len * 4)) {
            if (!entry || b->ws[k].entry == x + 1) return CM_OK;
            cm_watch.over = k + 1;
            return CM_ERR_LIMIT;
        }
    }
    if ((entry && b->ws[k].entry) || count + 1 > cm_watch.w[k].cap) {
        cm_watch.over = k + 1;
        return CM_ERR_LIMIT;
    }
    if ((rc = cm_vec_reserve(pool, pool->n + len))) return rc;
    memcpy(pool->data + pool->n, v + i0, len * sizeof *v);
    pool->n += len;
    if ((rc = cm_vec_push(off, (uint32_t)pool->n))) return rc;
    tab[j] = (uint32_t)count + 1;
    if (entry) b->ws[k].entry = (uint32_t)count + 1;
    return CM_OK;
}

static int watch_note(builder *b) {
    int rc = CM_OK;
    for (uint32_t k = 0; !rc && k < b->n_ws; k++)
        if (cm_watch.w[k].lo < cm_watch.w[k].hi) rc = watch_note1(b, k);
    return rc;
}

/* The DFA state for the closed, non-empty set in b->tmp, created if new (or < 0: a status). */
static int64_t intern(builder *b) {
    if (!b->tmp.n) return CM_ERR_ARG;
    size_t n_states = b->off.n - 1;
    if (b->tmp.n == 1) { /* most sets: looked up by their state, not hashed */
        uint32_t x = b->tmp.data[0];
        if (b->single[x]) return b->single[x] - 1;
        if (n_states >= b->max_states) return CM_ERR_LIMIT;
        int rc = b->ws ? watch_note(b) : CM_OK;
        if (!rc) rc = cm_vec_push(&b->pool, x);
        if (!rc) rc = cm_vec_push(&b->off, (uint32_t)b->pool.n);
        if (rc) return rc;
        b->single[x] = (uint32_t)n_states + 1;
        return (int64_t)n_states;
    }
    int rc = (n_states + 1) * 2 > b->hcap ? grow_table(b) : CM_OK;
    if (rc) return rc;
    size_t i = hash_set(b->tmp.data, b->tmp.n) & (b->hcap - 1);
    for (; b->htab[i]; i = (i + 1) & (b->hcap - 1)) {
        uint32_t k = b->htab[i] - 1;
        size_t len = b->off.data[k + 1] - b->off.data[k];
        if (len == b->tmp.n && !memcmp(b->pool.data + b->off.data[k], b->tmp.data, len * 4)) return k;
    }
    if (n_states >= b->max_states) return CM_ERR_LIMIT;
    if (b->ws && (rc = watch_note(b))) return rc;
    if ((rc = cm_vec_reserve(&b->pool, b->pool.n + b->tmp.n))) return rc;
    memcpy(b->pool.data + b->pool.n, b->tmp.data, b->tmp.n * sizeof *b->tmp.data);
    b->pool.n += b->tmp.n;
    if ((rc = cm_vec_push(&b->off, (uint32_t)b->pool.n))) return rc;
    b->htab[i] = (uint32_t)n_states + 1;
    return (int64_t)n_states;
}

/* Sort b->tmp and drop repeats. */
static void sort_unique(builder *b) {
    cm_vec32 *v = &b->tmp;
    if (v->n <= 16) {
        insertion_sort(v->data, v->n);
        size_t k = 0;
        for (size_t i = 0; i < v->n; i++)
            if (!k || v->data[k - 1] != v->data[i]) v->data[k++] = v->data[i];
        v->n = k;
        return;
    }
    uint32_t gen = next_gen(b), lo = UINT32_MAX, hi = 0;
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++) {
        uint32_t s = v->data[i];
        if (b->stamp[s] == gen) continue;
        b->stamp[s] = gen;
        v->data[k++] = s;
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    v->n = k;
    sort_marked(b, v, lo, hi);
}

/* The NFA targets of DFA state k's byte edges by class (a counting sort): class c's are
 * pairs[at[c] - cnt[c] .. at[c]), for the classes c set in used[] (the others have none);
 * *total: their number.  Only the classes used are summed and walked, not all n_classes. */
static int byte_targets(builder *b, size_t k, uint32_t cnt[256], uint32_t at[256], uint64_t used[4], size_t *total) {
    const cm_nfa_view *nfa = b->nfa;
    memset(cnt, 0, (size_t)b->n_classes * sizeof *cnt);
    memset(used, 0, 4 * sizeof *used);
    size_t n = 0;
    /* the arrays and bounds in locals (here and below): the counts' and pairs' stores may alias
     * them (b->cls, the NFA's pointers), so the compiler read them again at every class */
    const uint8_t *cls = b->cls, *blo = nfa->byte_lo, *bhi = nfa->byte_hi;
    const uint32_t *boff = nfa->byte_off, *bto = nfa->byte_to, *pool = b->pool.data;
    uint32_t i0 = b->off.data[k], i1 = b->off.data[k + 1];
    for (uint32_t i = i0; i < i1; i++) {
        uint32_t s = pool[i];
        for (uint32_t e = boff[s], e1 = boff[s + 1]; e < e1; e++) {
            uint32_t c0 = cls[blo[e]], c1 = cls[bhi[e]];
            if (c0 <= c1) n += c1 - c0 + 1;
            for (uint32_t c = c0; c <= c1; c++) cnt[c]++, used[c >> 6] |= 1ull << (c & 63);
        }
    }
    *total = n;
    if (!n) return CM_OK;
    uint32_t acc = 0;
    for (uint32_t w = 0; w < 4; w++)
        for (uint64_t m = used[w]; m; m &= m - 1) {
            uint32_t c = w * 64 + (uint32_t)__builtin_ctzll(m);
            at[c] = acc;
            acc += cnt[c];
        }
    b->pairs.n = 0;
    int rc = cm_vec_reserve(&b->pairs, n);
    if (rc) return rc;
    uint32_t *pairs = b->pairs.data;
    for (uint32_t i = i0; i < i1; i++) {
        uint32_t s = pool[i];
        for (uint32_t e = boff[s], e1 = boff[s + 1]; e < e1; e++) {
            uint32_t c1 = cls[bhi[e]], to = bto[e];
            for (uint32_t c = cls[blo[e]]; c <= c1; c++) pairs[at[c]++] = to;
        }
    }
    return CM_OK;
}

/* Is b->tmp the seed set kept in b->prev? */
static bool same_as_prev(const builder *b) {
    if (b->prev.n != b->tmp.n) return false;
    for (size_t i = 0; i < b->tmp.n; i++)
        if (b->prev.data[i] != b->tmp.data[i]) return false;
    return true;
}

/* The DFA state of the closure of NFA state t alone (or < 0: a status), made and remembered per t
 * (target_of looks it up first).
 * Most states of a Thompson NFA (inside literals, character classes and copied DFAs) have
 * no epsilon edges: their closure is themselves. */
static __attribute__((noinline)) int64_t target_of_new(builder *b, uint32_t t) {
    const cm_nfa_view *nfa = b->nfa;
    b->tmp.n = 0;
    int rc = cm_vec_push(&b->tmp, t);
    if (!rc && nfa->eps_off[t] != nfa->eps_off[t + 1]) rc = closure(b);
    int64_t k = rc ? rc : intern(b);
    if (k >= 0) b->closed[t] = (uint32_t)k + 1;
    return k;
}

/* (the lookup inlined where it is called, ~8,600 times a median schema's compile: most hit) */
static inline int64_t target_of(builder *b, uint32_t t) {
    return b->closed[t] ? (int64_t)b->closed[t] - 1 : target_of_new(b, t);
}

/* The DFA state of the seed set in b->tmp (its closure, interned); a CM_ERR_* (< 0) on failure. */
static int64_t set_target(builder *b) {
    if (b->tmp.n == 1) return target_of(b, b->tmp.data[0]);
    int rc = closure(b);
    return rc ? rc : intern(b);
}

/* byte_moves of a DFA state that is one NFA state x whose byte edges are ascending and
 * disjoint (a copied DFA's, a literal's): class c goes to the closure of the one edge that
 * covers it, without the counting sort.  The same moves, in the same order, as the general
 * case; *done is false (nothing done) when x's edges overlap. */
static int single_byte_moves(builder *b, uint32_t x, bool *done) {
    const cm_nfa_view *nfa = b->nfa;
    uint32_t e0 = nfa->byte_off[x], e1 = nfa->byte_off[x + 1];
    *done = false;
    for (uint32_t e = e0 + 1; e < e1; e++)
        if (nfa->byte_lo[e] <= nfa->byte_hi[e - 1]) return CM_OK;
    *done = true;
    cm_vec32 *keys = b->keys, *targets = b->targets;
    int rc = cm_vec_reserve(keys, keys->n + b->n_classes);
    if (!rc) rc = cm_vec_reserve(targets, targets->n + b->n_classes);
    for (uint32_t e = e0; !rc && e < e1; e++) {
        int64_t t = target_of(b, nfa->byte_to[e]);
        if (t < 0) return (int)t;
        uint32_t c1 = b->cls[nfa->byte_hi[e]], *kd = keys->data, *td = targets->data;
        size_t mk = keys->n, mt = targets->n; /* (in locals: the stores may alias them) */
        for (uint32_t c = b->cls[nfa->byte_lo[e]]; c <= c1; c++) /* disjoint: <= n_classes */
            kd[mk++] = c, td[mt++] = (uint32_t)t;
        keys->n = mk, targets->n = mt;
    }
    return rc;
}

/* Byte moves of DFA state k into keys/targets (class, DFA state); consecutive classes
 * with the same seed set share one closure, and a class whose targets are listed as the
 * previous one's (the same NFA edges cover both: a wide character class cut by literals
 * elsewhere) takes its DFA state without sorting its seed set again. */
static int byte_moves(builder *b, size_t k) {
    if (b->off.data[k + 1] - b->off.data[k] == 1) {
        bool done;
        int rc = single_byte_moves(b, b->pool.data[b->off.data[k]], &done);
        if (rc || done) return rc;
    }
    uint32_t cnt[256], at[256];
    uint64_t used[4];
    size_t total;
    int rc = byte_targets(b, k, cnt, at, used, &total);
    int64_t prev_t = -1;
    uint32_t plo = 0, phi = 0; /* the previous class's targets as listed (pairs[plo .. phi)) */
    for (uint32_t w = 0; !rc && total && w < 4; w++)
        for (uint64_t bits = used[w]; !rc && bits; bits &= bits - 1) {
            uint32_t c = w * 64 + (uint32_t)__builtin_ctzll(bits), lo = at[c] - cnt[c], hi = at[c];
            bool same = prev_t >= 0 && hi - lo == phi - plo; /* the same edges: the same seed set */
            for (uint32_t i = 0; same && i < hi - lo; i++) same = b->pairs.data[lo + i] == b->pairs.data[plo + i];
            plo = lo, phi = hi;
            if (!same) {
                if ((rc = cm_vec_reserve(&b->tmp, hi - lo))) break;
                for (uint32_t i = lo; i < hi; i++) b->tmp.data[i - lo] = b->pairs.data[i]; /* short: no memcpy */
                b->tmp.n = hi - lo;
                sort_unique(b);
            }
            if (!same && (prev_t < 0 || !same_as_prev(b))) {
                if ((rc = cm_vec_reserve(&b->prev, b->tmp.n))) break;
                for (size_t i = 0; i < b->tmp.n; i++) b->prev.data[i] = b->tmp.data[i];
                b->prev.n = b->tmp.n;
                prev_t = set_target(b);
                if (prev_t < 0) return (int)prev_t;
            }
            if (!(rc = cm_vec_push(b->keys, c))) rc = cm_vec_push(b->targets, (uint32_t)prev_t);
        }
    return rc;
}

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Sort the n (label, target) pairs at p by insertion (cmp_pair's order). */
static void sort_pairs(uint32_t *p, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint32_t x = p[2 * i], y = p[2 * i + 1];
        size_t j = i;
        for (; j && (p[2 * j - 2] > x || (p[2 * j - 2] == x && p[2 * j - 1] > y)); j--)
            p[2 * j] = p[2 * j - 2], p[2 * j + 1] = p[2 * j - 1];
        p[2 * j] = x, p[2 * j + 1] = y;
    }
}

/* Label moves of DFA state k into keys/targets (label, DFA state), by label. */
static int label_moves(builder *b, size_t k) {
    const cm_nfa_view *nfa = b->nfa;
    int rc = CM_OK;
    b->pairs.n = 0;
    for (uint32_t i = b->off.data[k]; !rc && i < b->off.data[k + 1]; i++) {
        uint32_t s = b->pool.data[i];
        for (uint32_t e = nfa->label_off[s]; !rc && e < nfa->label_off[s + 1]; e++)
            rc = cm_vec_push2(&b->pairs, nfa->label[e], nfa->label_to[e]);
    }
    if (rc) return rc;
    if (b->pairs.n > 16) qsort(b->pairs.data, b->pairs.n / 2, 2 * sizeof(uint32_t), cmp_pair);
    else sort_pairs(b->pairs.data, b->pairs.n / 2); /* a few: by insertion (data may be NULL) */
    for (size_t i = 0; !rc && i < b->pairs.n;) {
        uint32_t key = b->pairs.data[i];
        b->tmp.n = 0;
        for (; !rc && i < b->pairs.n && b->pairs.data[i] == key; i += 2)
            rc = cm_vec_push(&b->tmp, b->pairs.data[i + 1]);
        if (rc) break;
        int64_t t = set_target(b);
        if (t < 0) return (int)t;
        if (!(rc = cm_vec_push(b->keys, key))) rc = cm_vec_push(b->targets, (uint32_t)t);
    }
    return rc;
}

/* DFA state k's sparse byte edges and its label edges (the dense rows are written after
 * minimization, for the states that are kept: minimize.c).  The byte moves are appended to
 * the sparse edges where they lie, the label moves to the label edges: keys and targets point
 * at those arrays in turn (where swapping the vectors in and out copied eight structs a state). */
static int expand(builder *b, size_t k) {
    b->keys = &b->sp.cls, b->targets = &b->sp.to;
    int rc = byte_moves(b, k);
    if (!rc) rc = cm_vec_push(&b->sp.off, (uint32_t)b->sp.cls.n);
    b->keys = &b->lab, b->targets = &b->lab_to; /* the same for the labels */
    if (!rc) rc = label_moves(b, k);
    return rc ? rc : cm_vec_push(&b->lab_off, (uint32_t)b->lab.n);
}

static int subset_construction(builder *b, uint32_t start) {
    int rc = cm_vec_push(&b->off, 0);
    if (!rc) rc = cm_vec_push(&b->sp.off, 0);
    if (!rc) rc = cm_vec_push(&b->lab_off, 0);
    b->tmp.n = 0;
    if (!rc) rc = cm_vec_push(&b->tmp, start);
    if (!rc) rc = closure(b);
    if (!rc) {
        int64_t first = intern(b);
        rc = first < 0 ? (int)first : CM_OK;
    }
    for (size_t k = 0; !rc && k < b->off.n - 1; k++) {
        if ((k & 63) == 0 && (rc = cm_budget_time(b->bud))) break;
        rc = expand(b, k);
    }
    return rc;
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
        if (cut[x]) b->class_lo[++c] = (uint16_t)x;
        b->cls[x] = (uint8_t)c;
    }
    b->n_classes = (uint32_t)c + 1;
    b->class_lo[b->n_classes] = 256;
}

/* The DFA that subset construction left in b's arrays (handed over to it). */
static int take_dfa(builder *b, cm_dfa_out **out) {
    cm_dfa_out *d = calloc(1, sizeof *d);
    if (!d) return CM_ERR_NOMEM;
    d->n_states = (uint32_t)(b->off.n - 1);
    d->n_classes = b->n_classes;
    memcpy(d->class_lo, b->class_lo, ((size_t)b->n_classes + 1) * sizeof *d->class_lo);
    d->trans = NULL; /* written by cm_fsm_minimize from the sparse edges (charged below all the same) */
    d->lab = cm_vec_take(&b->lab);
    d->lab_to = cm_vec_take(&b->lab_to);
    d->lab_off = cm_vec_take(&b->lab_off);
    d->accepting = calloc(d->n_states ? d->n_states : 1, 1);
    int rc = (d->lab && d->lab_to && d->lab_off && d->accepting) ? CM_OK : CM_ERR_NOMEM;
    if (!rc) rc = cm_budget_charge(b->bud, cm_dfa_bytes(d));
    if (rc) {
        cm_dfa_out_free(d);
        return rc;
    }
    const uint32_t *pool = b->pool.data, *off = b->off.data;
    if (atomic_load_explicit(&g_lean_on, memory_order_relaxed))
        for (uint32_t k = 0; k < d->n_states; k++) { /* a set is sorted: the final state found by bisection */
            uint32_t lo = off[k], hi = off[k + 1];
            while (lo < hi && pool[lo] < b->final) { /* (none for final 0, Thompson's NFAs': its first) */
                uint32_t mid = lo + (hi - lo) / 2;
                if (pool[mid] < b->final) lo = mid + 1;
                else hi = mid;
            }
            d->accepting[k] = lo < off[k + 1] && pool[lo] == b->final;
        }
    else
        for (uint32_t k = 0; k < d->n_states; k++)
            for (uint32_t i = off[k]; i < off[k + 1]; i++)
                if (pool[i] == b->final) d->accepting[k] = 1;
    *out = d;
    return CM_OK;
}

/* Room for as many DFA states as the NFA has states (up to RESERVE_STATES; most DFAs are
 * about that size), so the arrays are not grown a doubling at a time. */
static int reserve_guess(builder *b) {
    size_t n = b->nfa->n_states < RESERVE_STATES ? b->nfa->n_states : RESERVE_STATES;
    int rc = cm_vec_reserve(&b->pool, n + 1);
    if (!rc) rc = cm_vec_reserve(&b->off, n + 1);
    if (!rc) rc = cm_vec_reserve(&b->sp.off, n + 1);
    if (!rc) rc = cm_vec_reserve(&b->lab_off, n + 1);
    if (!rc) rc = cm_vec_reserve(&b->sp.cls, 2 * n);
    if (!rc) rc = cm_vec_reserve(&b->sp.to, 2 * n);
    return rc;
}

int cm_fsm_build_ex(const cm_nfa_view *nfa, uint32_t start, uint32_t final, size_t max_states, bool merge,
                    cm_budget *budget, cm_dfa_out **out) {
    if (!nfa || !out || start >= nfa->n_states || final >= nfa->n_states) return CM_ERR_ARG;
    *out = NULL;
    builder b;
    memset(&b, 0, sizeof b);
    for (size_t i = 0; builder_vec(&b, i); i++) builder_vec(&b, i)->bud = budget;
    b.nfa = nfa;
    b.bud = budget;
    b.final = final;
    b.max_states = max_states;
    int rc = CM_OK;
    if (atomic_load_explicit(&g_lean_on, memory_order_relaxed))
        atomic_fetch_add_explicit(&g_lean_builds, 1, memory_order_relaxed);
    if (cm_watch.n) {
        b.ws = cm_balloc(budget, cm_watch.n * sizeof *b.ws, true, &rc);
        if (rc) return rc;
        b.n_ws = cm_watch.n;
        for (size_t i = 0; i < b.n_ws; i++) b.ws[i].pool.bud = b.ws[i].off.bud = budget;
    }
    uint64_t t0 = cm_stats_now(), t1;
    b.stamp = cm_balloc(budget, nfa->n_states * sizeof *b.stamp, true, &rc);
    b.single = cm_balloc(budget, nfa->n_states * sizeof *b.single, true, &rc);
    b.closed = cm_balloc(budget, nfa->n_states * sizeof *b.closed, true, &rc);
    init_classes(&b);
    if (!rc) rc = reserve_guess(&b);
    if (!rc) rc = subset_construction(&b, start);
    cm_dfa_out *d = NULL;
    if (!rc) rc = take_dfa(&b, &d);
    cm_sparse_edges sp = b.sp;
    memset(&b.sp, 0, sizeof b.sp);
    builder_free(&b);
    uint32_t n_dfa = d ? d->n_states : 0;
    cm_stats_add(CM_PH_SUBSETS, t0);
    t1 = cm_stats_now();
    if (!rc) rc = cm_fsm_minimize(d, &sp, merge, budget);
    cm_stats_add(CM_PH_MINIMIZE, t1);
    if (cm_stats_on() && !rc) cm_stats_build(nfa->n_states, n_dfa, d->n_states, t1 - t0, cm_stats_now() - t1);
    cm_vec_free(&sp.off), cm_vec_free(&sp.cls), cm_vec_free(&sp.to);
    if (rc) {
        cm_dfa_release(budget, d);
        return rc;
    }
    *out = d;
    return CM_OK;
}

int cm_fsm_build(const cm_nfa_view *nfa, uint32_t start, uint32_t final, size_t max_states, cm_budget *budget,
                 cm_dfa_out **out) {
    return cm_fsm_build_ex(nfa, start, final, max_states, false, budget, out);
}
