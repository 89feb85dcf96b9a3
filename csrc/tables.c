/* The tables of cm_tables that follow from the flat rules (compile time, after
 * cm_compile_finish): call and token edges as CSR, nullable rules, FOLLOW bytes and the
 * global byte classes.  The same results as cfgmask/compile/follow.py and tables.py
 * (byte_classes) compute from a Flat, which stay the reference (tests/test_compile_passes.py). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cfgmask.h"
#include "cstats.h"
#include "fsm.h"

typedef struct { uint64_t w[4]; } bits256;

#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
/* the two halves of a bits256, two words a step (where the word loops went one at a time) */
#define B_LD(p, i) _mm_loadu_si128((const __m128i *)(const void *)((p)->w + (i)))
#define B_ST(p, i, v) _mm_storeu_si128((__m128i *)(void *)((p)->w + (i)), v)
static void bits_or(bits256 *a, const bits256 *b) {
    B_ST(a, 0, _mm_or_si128(B_LD(a, 0), B_LD(b, 0)));
    B_ST(a, 2, _mm_or_si128(B_LD(a, 2), B_LD(b, 2)));
}

static void bits_xor(bits256 *a, const bits256 *b) {
    B_ST(a, 0, _mm_xor_si128(B_LD(a, 0), B_LD(b, 0)));
    B_ST(a, 2, _mm_xor_si128(B_LD(a, 2), B_LD(b, 2)));
}

/* a |= the bytes of classes [c, c1) (pre: the prefix unions of next_bytes) */
static void bits_or_span(bits256 *a, const bits256 *pre, uint32_t c, uint32_t c1) {
    B_ST(a, 0, _mm_or_si128(B_LD(a, 0), _mm_xor_si128(B_LD(&pre[c1], 0), B_LD(&pre[c], 0))));
    B_ST(a, 2, _mm_or_si128(B_LD(a, 2), _mm_xor_si128(B_LD(&pre[c1], 2), B_LD(&pre[c], 2))));
}
#undef B_LD
#undef B_ST
#else
static void bits_or(bits256 *a, const bits256 *b) {
    for (int i = 0; i < 4; i++) a->w[i] |= b->w[i];
}

static void bits_xor(bits256 *a, const bits256 *b) {
    for (int i = 0; i < 4; i++) a->w[i] ^= b->w[i];
}

/* a |= the bytes of classes [c, c1) (pre: the prefix unions of next_bytes) */
static void bits_or_span(bits256 *a, const bits256 *pre, uint32_t c, uint32_t c1) {
    for (int i = 0; i < 4; i++) a->w[i] |= pre[c1].w[i] ^ pre[c].w[i];
}
#endif

static bool bits_eq(const bits256 *a, const bits256 *b) { return !memcmp(a, b, sizeof *a); }

/* a as 8 32-bit words, byte b at bit b % 32 of word b / 32 (the grammar's next_bytes): on a
 * little-endian machine the words as they lie, a copy (where the word loop split each) */
static void bits_words(const bits256 *a, uint32_t out[8]) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(out, a, sizeof *a);
#else
    for (int w = 0; w < 4; w++) out[2 * w] = (uint32_t)a->w[w], out[2 * w + 1] = (uint32_t)(a->w[w] >> 32);
#endif
}

void cm_flat_derived_free(cm_flat_derived *d) {
    if (!d) return;
    free(d->nullable), free(d->follow), free(d->ref_off), free(d->ref_rule);
    free(d->ref_target), free(d->tok_off), free(d->tok_set), free(d->tok_target), free(d->set_name);
    free(d->run_off), free(d->run_end), free(d->run_bits), free(d->edges);
    if (!d->facts) free(d->state_bytes), free(d->rule_block); /* else the caller's buffer */
    free(d);
}

/* The edges of f split into calls (callee as rule index) and token terminals (set
 * numbers in order of first use), each as CSR over the states.  rule_of_name: [n_names].
 * calls[0 .. *n_calls): the states with calls, ascending (the same walk, not one more). */
static int edges(const cm_flat_rules *f, const uint8_t *is_token, const uint32_t *rule_of_name,
                 uint32_t *set_of_name, cm_flat_derived *d, uint32_t *calls, uint32_t *n_calls) {
    uint32_t ns = f->n_states, nl = f->lab_off[ns], nr = 0, nt = 0, nk = 0;
    d->ref_off = calloc((size_t)ns + 1, sizeof *d->ref_off);
    d->tok_off = calloc((size_t)ns + 1, sizeof *d->tok_off);
    d->ref_rule = malloc(((size_t)nl + 1) * sizeof *d->ref_rule);
    d->ref_target = malloc(((size_t)nl + 1) * sizeof *d->ref_target);
    d->tok_set = malloc(((size_t)nl + 1) * sizeof *d->tok_set);
    d->tok_target = malloc(((size_t)nl + 1) * sizeof *d->tok_target);
    d->set_name = malloc(((size_t)nl + 1) * sizeof *d->set_name);
    if (!d->ref_off || !d->tok_off || !d->ref_rule || !d->ref_target || !d->tok_set || !d->tok_target
        || !d->set_name)
        return CM_ERR_NOMEM;
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t nr0 = nr;
        for (uint32_t e = f->lab_off[s]; e < f->lab_off[s + 1]; e++) {
            uint32_t name = f->lab_name[e];
            if (is_token[name]) {
                if (set_of_name[name] == UINT32_MAX) set_of_name[name] = d->n_sets, d->set_name[d->n_sets++] = name;
                d->tok_set[nt] = set_of_name[name], d->tok_target[nt++] = f->lab_to[e];
            } else {
                if (rule_of_name[name] == UINT32_MAX) return CM_ERR_ARG; /* a callee that is not a runtime rule */
                d->ref_rule[nr] = rule_of_name[name], d->ref_target[nr++] = f->lab_to[e];
            }
        }
        if (nr > nr0) calls[nk++] = s;
        d->ref_off[s + 1] = nr, d->tok_off[s + 1] = nt;
    }
    *n_calls = nk;
    return CM_OK;
}

/* can_end[s]: s may complete its rule through nullable callees only; nullable[r]: can_end
 * of r's start state.  One least fixpoint of both (follow.py computes nullable first, then
 * can_end: the same least solution). */
static void nullable_rules(const cm_flat_rules *f, const cm_flat_derived *d, const uint32_t *calls, uint32_t n_calls,
                           uint8_t *can_end) {
    memcpy(can_end, f->accepting, f->n_states);
    for (uint32_t r = 0; r < f->n_rules; r++) d->nullable[r] = can_end[f->rule_state[r]];
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = n_calls; k-- > 0;) { /* only a state with calls can change */
            uint32_t s = calls[k];
            if (can_end[s]) continue;
            for (uint32_t e = d->ref_off[s]; e < d->ref_off[s + 1]; e++)
                if (d->nullable[d->ref_rule[e]] && can_end[d->ref_target[e]]) {
                    can_end[s] = 1, changed = true;
                    break;
                }
        }
        for (uint32_t r = 0; r < f->n_rules; r++)
            if (!d->nullable[r] && can_end[f->rule_state[r]]) d->nullable[r] = 1, changed = true;
    }
}

/* key[x] += the hash of byte x's column in rule r's rows (byte_classes), from part[c] = sum_i
 * weights[lo + i] * (tr[i][c] + 2) over the rule's rows (the terms added at each run's start and
 * taken back at its end, next_bytes: a prefix sum spreads them, exact mod 2^64).  CM_ERR_ARG for
 * a rule without states or with a byte of no class. */
static int key_add(const uint8_t *cls, uint32_t n, uint32_t nc, uint64_t *part, uint64_t key[256]) {
    if (!n || nc > 256) return CM_ERR_ARG;
    for (uint32_t c = 1; c < nc; c++) part[c] += part[c - 1];
    for (int x = 0; x < 256; x++) {
        if (cls[x] >= nc) return CM_ERR_ARG;
        key[x] += part[cls[x]];
    }
    return CM_OK;
}

/* The bits [c, c1) of a word (c < c1 <= 64). */
static inline uint64_t span_bits(uint32_t c, uint32_t c1) {
    return (c1 < 64 ? (uint64_t)1 << c1 : 0) - ((uint64_t)1 << (c & 63));
}

/* CLASS_SPANS: a rule's byte classes as spans.  A rule's classes from a DFA (cm_compile_finish
 * writes byte_class from its class_lo) are contiguous: byte 0 in class 0 and each byte in the
 * class of the byte before or the next one.  Then starts (bit x: class cls[x] starts at byte x,
 * x > 0) is all there is to them: next_bytes' prefix unions pre[c] (the bytes of classes below
 * c: [0, the start of c)) are a word mask each, and key_add's adds go a span of bytes at a time
 * with no class looked up and none to check, where both read cls a byte at a time (the two
 * 256-byte loops of every rule).  found by compares of 16 bytes (SSE2) or a byte loop; a rule
 * whose classes are not contiguous (or above nc) takes the byte loops, the reference (switch
 * off: always).  columns_differ's union of each byte's class with its key's first byte's goes by
 * the runs of bytes alike in both (any rule's classes), where it went a byte at a time. */
static int g_class_spans = 1;

void cm_derive_class_spans_enable(int on) { g_class_spans = on; }

/* Are cls's classes contiguous, from class 0 at byte 0 up by one at each start, the last below
 * nc?  starts: the bytes where a class starts (byte 0 not set). */
static bool class_spans(const uint8_t *cls, uint32_t nc, uint64_t starts[4]) {
    if (cls[0] != 0 || cls[255] >= nc) return false;
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i one = _mm_set1_epi8(1), high = _mm_set1_epi8((char)0xFE), zero = _mm_setzero_si128();
    uint32_t bad = 0;
    for (int j = 0; j < 4; j++) {
        uint64_t w = 0;
        for (int q = 0; q < 4; q++) {
            int x = 64 * j + 16 * q;
            __m128i cur = _mm_loadu_si128((const __m128i *)(const void *)(cls + x));
            __m128i prev = x ? _mm_loadu_si128((const __m128i *)(const void *)(cls + x - 1)) : _mm_slli_si128(cur, 1);
            __m128i d = _mm_sub_epi8(cur, prev); /* 0 or 1 where contiguous */
            bad |= (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(d, high), zero)) ^ 0xFFFFu;
            w |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(d, one)) << (16 * q);
        }
        starts[j] = w;
    }
    return !bad;
#else
    memset(starts, 0, 4 * sizeof *starts);
    for (int x = 1; x < 256; x++) {
        int d = (int)cls[x] - (int)cls[x - 1];
        if (d != 0 && d != 1) return false;
        if (d) starts[x >> 6] |= (uint64_t)1 << (x & 63);
    }
    return true;
#endif
}

/* pre[0 .. m]: pre[c] the bytes of classes below c, from the starts of contiguous classes (as
 * next_bytes' byte loop and prefix XOR make them: every byte past the last class's start for a
 * class without bytes). */
static void pre_from_starts(bits256 *pre, const uint64_t starts[4], uint32_t m) {
    memset(&pre[0], 0, sizeof pre[0]);
    uint32_t c = 1;
    for (int j = 0; j < 4; j++)
        for (uint64_t w = starts[j]; w; w &= w - 1, c++) { /* pre[c]: [0, the start of class c) */
            uint64_t below = ((uint64_t)1 << __builtin_ctzll(w)) - 1;
            for (int q = 0; q < 4; q++) pre[c].w[q] = q < j ? ~(uint64_t)0 : q > j ? 0 : below;
        }
    for (; c <= m; c++) memset(&pre[c], 0xFF, sizeof pre[c]);
}

/* key_add for contiguous classes (class_spans: each below nc): the same sums, a span at a time. */
static int key_add_spans(const uint64_t starts[4], uint32_t n, uint32_t nc, uint64_t *part, uint64_t key[256]) {
    if (!n || nc > 256) return CM_ERR_ARG;
    for (uint32_t c = 1; c < nc; c++) part[c] += part[c - 1];
    uint32_t x = 0, c = 0;
    for (int j = 0; j < 4; j++)
        for (uint64_t w = starts[j]; w; w &= w - 1, c++) {
            uint32_t end = 64 * (uint32_t)j + (uint32_t)__builtin_ctzll(w);
            for (uint64_t v = part[c]; x < end; x++) key[x] += v;
        }
    for (uint64_t v = part[c]; x < 256; x++) key[x] += v;
    return CM_OK;
}

/* A walk of a row's runs: a row of up to 64 classes has its runs' starts found at once
 * (cm_run_starts), each run's end then the next start, where cm_run_end set up a scan at every
 * run; a wider one is walked with cm_run_end. */
typedef struct { const int32_t *row; uint32_t n; uint64_t st; } run_walk;

static inline void runs_begin(run_walk *it, const int32_t *row, uint32_t n) {
    it->row = row, it->n = n;
    it->st = n && n <= 64 ? cm_run_starts(row, n) & ~(uint64_t)1 : 0;
}

/* The end of the run that starts at c (the next start, or n), that start taken off. */
static inline uint32_t runs_next(run_walk *it, uint32_t c) {
    if (it->n > 64) return cm_run_end(it->row, c, it->n);
    uint32_t c1 = it->st ? (uint32_t)__builtin_ctzll(it->st) : it->n;
    it->st &= it->st - 1;
    return c1;
}

/* ROW_BITS: next_bytes' walk of the rows of a keyed rule of 1 <= nc <= 64 classes as bit masks,
 * where every output is kept (run_off, run_bits, edges, state_bytes): per row, e, the classes
 * with an edge (cm_row_edges); st, the starts of its runs (cm_run_starts' bits), from where e
 * changes and, inside a stretch of e, a compare of each class with the one before (a run of -1,
 * most of a row, needs none), kept as run_bits[s] (one store a row, where every run's end was
 * stored: cm_flat_derive_trans takes each run's end from the next start); then the hash terms
 * w * (target + 1) of the runs with an edge only (ROW_TERMS: the w of every row summed into
 * part[0] once a rule), and the bytes of each span of classes with a target (own: nxt before the
 * fixpoint, or every byte with a token edge, and the row's state_bytes), each found from the bits
 * where the walk went run by run (a step of cm_run_starts' bits, a compare, a span's bits and a
 * store each), the bounds and outputs in locals once a rule (where the walk tested them again at
 * every row).  edges[s] is e: the union of the runs with an edge.  run_off[s] is n_runs: no ends
 * in run_end. */
static int g_row_bits = 1;

void cm_derive_row_bits_enable(int on) { g_row_bits = on; }

static void keyed_rows(const int32_t *tr, uint32_t lo, uint32_t n, uint32_t nc, const uint32_t *tok_off,
                       const int64_t *weights, uint64_t *part, const bits256 *pre, bits256 *nxt, uint32_t *run_off,
                       uint32_t n_runs, uint64_t *run_bits, uint64_t *edges, uint32_t *state_bytes) {
    uint64_t full = nc < 64 ? ((uint64_t)1 << nc) - 1 : ~(uint64_t)0, w_sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        const int32_t *row = tr + (size_t)i * nc;
        uint32_t s = lo + i;
        uint64_t w = (uint64_t)weights[s];
        w_sum += w;
        run_off[s] = n_runs; /* (no run ends: the starts' bits, run_bits) */
        uint64_t e = cm_row_edges(row, nc), st = ((e ^ (e << 1)) & full) | 1, bad = 0;
        uint64_t x = e & (e << 1), y = x & (x - 1); /* the edge classes after an edge class */
        y &= y - 1, y &= y - 1, y &= y - 1;
        if (y) st = cm_run_starts(row, nc); /* more than four (a string's characters): one pass */
        else
            for (; x; x &= x - 1) {
                uint32_t c = (uint32_t)__builtin_ctzll(x);
                if (row[c] != row[c - 1]) st |= (uint64_t)1 << c;
            }
        run_bits[s] = st; /* each run ends at the next start, the last at nc */
        int32_t neg = 0; /* the OR of the runs' targets: negative where one is below -1 */
        for (uint64_t x = st & e; x; x &= x - 1) { /* the runs with an edge */
            uint32_t c = (uint32_t)__builtin_ctzll(x);
            uint64_t after = st & ((~(uint64_t)0 << c) << 1);
            uint32_t c1 = after ? (uint32_t)__builtin_ctzll(after) : nc;
            uint64_t v = w * (uint64_t)((int64_t)row[c] + 1);
            part[c] += v, part[c1] -= v;
            neg |= row[c];
        }
        if (neg < 0) /* a target below -1 (no state): its run has no bytes, as the walk */
            for (uint64_t x = st & e; x; x &= x - 1) {
                uint32_t c = (uint32_t)__builtin_ctzll(x);
                uint64_t after = st & ((~(uint64_t)0 << c) << 1);
                if (row[c] < 0) bad |= span_bits(c, after ? (uint32_t)__builtin_ctzll(after) : nc);
            }
        bits256 own = {{0}};
        for (uint64_t g = e & ~bad; g;) { /* each span of classes with a target: one OR */
            uint32_t c = (uint32_t)__builtin_ctzll(g);
            uint64_t t = g + (g & (0 - g)); /* the span carried away: its end's bit, or 0 at bit 64 */
            bits_or_span(&own, pre, c, t ? (uint32_t)__builtin_ctzll(t) : 64);
            g &= t;
        }
        if (tok_off[s + 1] > tok_off[s]) memset(&nxt[s], 0xff, sizeof nxt[s]);
        else nxt[s] = own;
        edges[s] = e;
        bits_words(&own, state_bytes + (size_t)s * 8);
    }
    part[0] += w_sum; /* (ROW_TERMS) */
}

/* nxt[s]: the bytes s consumes (every byte after a token terminal), then the least
 * fixpoint with what its calls may start with (first[c] = nxt of c's start state, and
 * nxt of the target after a nullable callee).  Only states with calls change in the
 * fixpoint: its passes walk those (calls[0 .. n_calls), ascending), in the order a pass
 * over every state would.  With weights (one per state), the same walk of the rows as runs
 * also sums the column hashes of the global byte classes into key (byte_classes: one walk of
 * the rows, not two); *key_rc: CM_ERR_ARG for a rule without states or with a byte of no class.
 * ROW_TERMS: a row's term w * (target + 2) of each column is w + w * (target + 1) (mod 2^64):
 * the w of every column is added once a row (part[0]: key_add's prefix sum spreads it over
 * every class), the rest over the runs with an edge only (a run of -1, most of a row's runs,
 * adds nothing), where each run added both. */
static void next_bytes(const cm_flat_rules *f, const cm_flat_derived *d, const uint32_t *calls, uint32_t n_calls,
                       bits256 *nxt, const int64_t *weights, uint64_t key[256], int *key_rc, uint32_t *run_off,
                       uint16_t *run_end, uint64_t *run_bits, uint64_t *edges, uint32_t *state_bytes) {
    uint32_t n_runs = 0; /* (run_off: the runs' ends kept where every row is keyed, the only case they are read) */
    for (uint32_t r = 0; r < f->n_rules; r++) {
        uint32_t lo = f->rule_state[r], n = f->rule_state[r + 1] - lo;
        uint32_t nc = n ? (f->rule_trans[r + 1] - f->rule_trans[r]) / n : 0, m = nc < 256 ? nc : 256;
        const uint8_t *cls = f->byte_class + (size_t)r * 256;
        const int32_t *tr = f->trans + f->rule_trans[r];
        bool keyed = weights && !*key_rc && n && nc <= 256; /* (else key_add says why not) */
        uint64_t part[257];
        if (keyed) memset(part, 0, (nc + 1) * sizeof *part);
        /* pre[c]: the bytes of r's classes [0, c).  Classes are disjoint, so XOR is their union
         * and pre[c1] ^ pre[c] the bytes of a span [c, c1) of a row: one OR a span of edges
         * (a row read as runs), where one OR a class scanned every class of every row */
        bits256 pre[257];
        uint64_t starts[4];
        bool spans = g_class_spans && n && m == nc && class_spans(cls, nc, starts); /* (CLASS_SPANS) */
        if (spans) pre_from_starts(pre, starts, m);
        else {
            memset(pre, 0, (m + 1) * sizeof *pre);
            for (int x = 0; x < 256; x++)
                if (cls[x] < m) pre[cls[x] + 1].w[x >> 6] |= (uint64_t)1 << (x & 63);
            for (uint32_t c = 0; c < m; c++) bits_xor(&pre[c + 1], &pre[c]);
        }
        if (keyed && nc && nc <= 64 && run_bits) { /* (ROW_BITS: run_bits only with run_off, edges, state_bytes) */
            keyed_rows(tr, lo, n, nc, d->tok_off, weights, part, pre, nxt, run_off, n_runs, run_bits, edges, state_bytes);
            *key_rc = spans ? key_add_spans(starts, n, nc, part, key) : key_add(cls, n, nc, part, key);
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            bits256 *b = &nxt[lo + i];
            const int32_t *row = tr + (size_t)i * nc;
            if (keyed && run_off) run_off[lo + i] = n_runs;
            uint64_t em = 0; /* where keyed and edges: the row's classes with an edge, as bits */
            bool tok = d->tok_off[lo + i + 1] > d->tok_off[lo + i];
            run_walk it; /* (m == nc where keyed) */
            if (keyed || !tok) runs_begin(&it, row, m);
            if (tok) {
                memset(b, 0xff, sizeof *b);
                bits256 own = {{0}}; /* its byte edges alone, for state_bytes */
                uint32_t live = UINT32_MAX;
                if (keyed) { /* its row still counts in the columns */
                    uint64_t w = (uint64_t)weights[lo + i];
                    part[0] += w; /* (ROW_TERMS) */
                    for (uint32_t c = 0, c1; c < nc; c = c1) {
                        c1 = runs_next(&it, c);
                        if (run_off) run_end[n_runs++] = (uint16_t)c1;
                        if (row[c] != -1) {
                            uint64_t v = w * (uint64_t)((int64_t)row[c] + 1);
                            part[c] += v, part[c1] -= v;
                            em |= span_bits(c, c1);
                        }
                        if (row[c] >= 0) {
                            if (live == UINT32_MAX) live = c;
                        } else if (live != UINT32_MAX) {
                            bits_or_span(&own, pre, live, c);
                            live = UINT32_MAX;
                        }
                    }
                }
                if (live != UINT32_MAX) bits_or_span(&own, pre, live, nc);
                if (keyed && edges) edges[lo + i] = nc <= 64 ? em : ~(uint64_t)0;
                if (keyed && state_bytes) bits_words(&own, state_bytes + (size_t)(lo + i) * 8);
                continue;
            }
            memset(b, 0, sizeof *b);
            uint64_t w = keyed ? (uint64_t)weights[lo + i] : 0;
            uint32_t live = UINT32_MAX; /* the start of the span of edges that c ends, if any */
            if (keyed) part[0] += w; /* (ROW_TERMS) */
            for (uint32_t c = 0, c1; c < m; c = c1) {
                c1 = runs_next(&it, c);
                if (keyed) {
                    if (run_off) run_end[n_runs++] = (uint16_t)c1;
                    if (row[c] != -1) {
                        uint64_t v = w * (uint64_t)((int64_t)row[c] + 1);
                        part[c] += v, part[c1] -= v;
                        em |= span_bits(c, c1);
                    }
                }
                if (row[c] >= 0) {
                    if (live == UINT32_MAX) live = c;
                } else if (live != UINT32_MAX) {
                    bits_or_span(b, pre, live, c);
                    live = UINT32_MAX;
                }
            }
            if (live != UINT32_MAX) bits_or_span(b, pre, live, m);
            if (keyed && edges) edges[lo + i] = nc <= 64 ? em : ~(uint64_t)0;
            if (keyed && state_bytes) bits_words(b, state_bytes + (size_t)(lo + i) * 8); /* before the fixpoint */
        }
        if (weights && !*key_rc)
            *key_rc = !keyed ? CM_ERR_ARG : spans ? key_add_spans(starts, n, nc, part, key) : key_add(cls, n, nc, part, key);
    }
    if (run_off) run_off[f->n_states] = n_runs;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = n_calls; k-- > 0;) {
            uint32_t s = calls[k];
            bits256 v = nxt[s];
            for (uint32_t e = d->ref_off[s]; e < d->ref_off[s + 1]; e++) {
                uint32_t c = d->ref_rule[e];
                bits_or(&v, &nxt[f->rule_state[c]]);
                if (d->nullable[c]) bits_or(&v, &nxt[d->ref_target[e]]);
            }
            if (!bits_eq(&v, &nxt[s])) nxt[s] = v, changed = true;
        }
    }
}

/* follow[c]: the least fixpoint of nxt of every return state after a call of c, and the
 * caller's FOLLOW where that state may complete the caller (states with calls only:
 * calls[0 .. n_calls)). */
static void follow_bytes(const cm_flat_rules *f, const cm_flat_derived *d, const uint32_t *calls, uint32_t n_calls,
                         const uint8_t *can_end, const bits256 *nxt, const uint32_t *rule_of_state, bits256 *follow) {
    memset(follow, 0, (size_t)f->n_rules * sizeof *follow);
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = 0; k < n_calls; k++) {
            uint32_t s = calls[k];
            for (uint32_t e = d->ref_off[s]; e < d->ref_off[s + 1]; e++) {
                uint32_t c = d->ref_rule[e], t = d->ref_target[e];
                bits256 v = follow[c];
                bits_or(&v, &nxt[t]);
                if (can_end[t]) bits_or(&v, &follow[rule_of_state[s]]);
                if (!bits_eq(&v, &follow[c])) follow[c] = v, changed = true;
            }
        }
    }
    for (uint32_t r = 0; r < f->n_rules; r++)
        for (int w = 0; w < 8; w++) d->follow[r * 8 + w] = (uint32_t)(follow[r].w[w >> 1] >> (32 * (w & 1)));
}

typedef struct { int64_t key; uint32_t byte; } keyed;

/* Are the columns of each pair (a[k], b[k]) of rule classes equal in every row of the rule's
 * table (n states, nc classes)?  One pass over the rows, read as they lie (a column compare
 * would read one line per row for each pair). */
static bool rule_pairs_equal(const int32_t *tr, uint32_t n, uint32_t nc, const uint8_t *a, const uint8_t *b,
                             uint32_t n_pairs, const uint64_t *edges, uint64_t classes) {
    bool same = true;
    for (uint32_t i = 0; same && n_pairs && i < n; i++) {
        if (edges && !(edges[i] & classes)) continue; /* no edge in the pairs' classes: all -1 */
        const int32_t *row = tr + (size_t)i * nc;
        for (uint32_t k = 0; k < n_pairs; k++) same &= row[a[k]] == row[b[k]];
    }
    return same;
}

/* The root of c in a union-find forest of a rule's classes (up: the parent of each, halved
 * on the way). */
static inline uint8_t class_root(uint8_t *up, uint8_t c) {
    while (up[c] != c) {
        uint8_t p = up[up[c]];
        up[c] = p, c = p;
    }
    return c;
}

/* changes: bit x (x > 0) where v[x] != v[x - 1]: the starts of v's runs but byte 0. */
static void byte_changes(const uint8_t v[256], uint64_t changes[4]) {
#if defined(__SSE2__) && defined(__GNUC__)
    for (int j = 0; j < 4; j++) {
        uint64_t w = 0;
        for (int q = 0; q < 4; q++) {
            int x = 64 * j + 16 * q;
            __m128i cur = _mm_loadu_si128((const __m128i *)(const void *)(v + x));
            __m128i prev = x ? _mm_loadu_si128((const __m128i *)(const void *)(v + x - 1)) : _mm_slli_si128(cur, 1);
            w |= (uint64_t)((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(cur, prev)) ^ 0xFFFFu) << (16 * q);
        }
        changes[j] = w;
    }
    changes[0] &= ~(uint64_t)1;
#else
    memset(changes, 0, 4 * sizeof *changes);
    for (int x = 1; x < 256; x++)
        if (v[x] != v[x - 1]) changes[x >> 6] |= (uint64_t)1 << (x & 63);
#endif
}

/* Does some byte x's column of the [states, 256] matrix differ from byte rep[x]'s?  Rule by
 * rule, only the pairs of the rule's classes that the bytes grouped by key put together (class
 * of x, class of rep[x], where they differ) are compared: the columns of bytes with equal keys
 * are equal unless two hashes collide, and a rule's classes that other rules tell apart are
 * never compared (a JSON string's character classes, split around '"' and '\', against the
 * literals of the keys).  Equality is transitive, so a pair whose classes earlier pairs join
 * already (a union-find of the rule's classes) is not compared: at most a pair a class, where
 * a class met with several partners was compared once a byte.  CLASS_SPANS: only the first byte
 * of each run of bytes alike in the rule's class and in rep (the others join the same two classes
 * again, nothing): the same pairs in the same order, at ~60 runs a rule where the byte loop made
 * 256 steps (~3.5 K instructions a rule of the mid set). */
static bool columns_differ(const cm_flat_rules *f, const uint8_t rep[256], const uint64_t *edges) {
    uint64_t rep_runs[4]; /* (CLASS_SPANS) the bytes where rep changes, and byte 0 */
    if (g_class_spans) byte_changes(rep, rep_runs), rep_runs[0] |= 1;
    for (uint32_t r = 0; r < f->n_rules; r++) {
        uint32_t lo = f->rule_state[r], n = f->rule_state[r + 1] - lo;
        uint32_t nc = (f->rule_trans[r + 1] - f->rule_trans[r]) / n; /* n > 0, nc <= 256: key_add */
        const uint8_t *cls = f->byte_class + (size_t)r * 256;
        uint8_t up[256], a[256], b[256];
        uint32_t n_pairs = 0;
        uint64_t classes = nc <= 64 ? 0 : ~(uint64_t)0; /* the pairs' classes, as bits where they fit */
        for (uint32_t c = 0; c < nc; c++) up[c] = (uint8_t)c;
#define JOIN(x)                                                                                   \
    do {                                                                                          \
        uint8_t c = cls[x], c0 = cls[rep[x]];                                                     \
        if (c == c0) break; /* (most bytes: their key's first byte is in their class) */          \
        c = class_root(up, c), c0 = class_root(up, c0);                                           \
        if (c == c0) break;                                                                       \
        up[c] = c0;                                                                               \
        a[n_pairs] = c, b[n_pairs++] = c0; /* fewer than nc pairs: each joins two trees */        \
        if (nc <= 64) classes |= (uint64_t)1 << c | (uint64_t)1 << c0;                            \
    } while (0)
        if (g_class_spans) { /* (CLASS_SPANS) the bytes where the class or rep changes */
            uint64_t runs[4];
            byte_changes(cls, runs);
            for (int w = 0; w < 4; w++)
                for (uint64_t m = runs[w] | rep_runs[w]; m; m &= m - 1) JOIN(64 * w + __builtin_ctzll(m));
        } else
            for (int x = 0; x < 256; x++) JOIN(x);
#undef JOIN
        if (!rule_pairs_equal(f->trans + f->rule_trans[r], n, nc, a, b, n_pairs, edges ? edges + lo : NULL, classes))
            return true;
    }
    return false;
}

static int number_classes(const cm_flat_rules *f, const uint64_t key[256], const uint64_t *edges, cm_flat_derived *d);

/* The distinct keys (as int64), each with its first byte, sorted: uniq[0 .. return).  Bytes
 * are grouped by key through a hash of the keys, then the few groups sorted by insertion.
 * slot_of[x]: the index in uniq of x's key, before sorting; order[j]: the sorted place of
 * group j. */
static int distinct_keys(const uint64_t key[256], keyed uniq[256], uint8_t slot_of[256], uint8_t order[256]) {
    int16_t tab[512];
    memset(tab, 0xFF, sizeof tab);
    int n = 0;
    for (int x = 0; x < 256; x++) {
        uint64_t h = key[x] * 0x9E3779B97F4A7C15ULL;
        size_t i = h >> 55;
        while (tab[i] >= 0 && uniq[tab[i]].key != (int64_t)key[x]) i = (i + 1) & 511;
        if (tab[i] < 0) tab[i] = (int16_t)n, uniq[n++] = (keyed){(int64_t)key[x], (uint32_t)x};
        slot_of[x] = (uint8_t)tab[i];
    }
    /* by key (keys are distinct): the (key, group) pairs placed by their top 6 bits (a counting
     * sort, signed order: the sign bit flipped), then an insertion sort that moves a pair only
     * past the few of its bucket -- the keys are hashes, spread over the buckets -- where an
     * insertion sort of all moved ~n * n / 4 (~5 K instructions a grammar of ~45 classes) */
    keyed by[256];
    uint16_t at[65] = {0};
    for (int j = 0; j < n; j++) at[((uint64_t)uniq[j].key >> 58 ^ 32) + 1]++;
    for (int b = 0; b < 64; b++) at[b + 1] += at[b];
    for (int j = 0; j < n; j++) by[at[(uint64_t)uniq[j].key >> 58 ^ 32]++] = (keyed){uniq[j].key, (uint32_t)j};
    for (int j = 1; j < n; j++) {
        keyed v = by[j];
        int i = j;
        for (; i && by[i - 1].key > v.key; i--) by[i] = by[i - 1];
        by[i] = v;
    }
    keyed sorted[256];
    for (int j = 0; j < n; j++) sorted[j] = uniq[by[j].byte], order[by[j].byte] = (uint8_t)j;
    memcpy(uniq, sorted, (size_t)n * sizeof *uniq);
    return n;
}

/* Global byte classes: bytes with equal columns share one, numbered in the order of the
 * column's hash sum_i weights[i] * (target + 2) (key[x], mod 2^64, as int64: next_bytes sums it
 * over the rules), as tables.byte_classes numbers them; n_classes 0 (the caller's Python path
 * decides) on a hash collision.  The table by class is cm_flat_derive_trans's, written where
 * the caller keeps it. */
static int number_classes(const cm_flat_rules *f, const uint64_t key[256], const uint64_t *edges, cm_flat_derived *d) {
    keyed uniq[256];
    uint8_t slot_of[256], order[256], rep_of[256];
    int rep[256], n_classes = distinct_keys(key, uniq, slot_of, order);
    for (int c = 0; c < n_classes; c++) rep[c] = (int)uniq[c].byte; /* the first byte of each key */
    for (int x = 0; x < 256; x++) rep_of[x] = (uint8_t)rep[order[slot_of[x]]];
    if (columns_differ(f, rep_of, edges)) return CM_OK; /* a collision */
    for (int x = 0; x < 256; x++) d->byte_class[x] = order[slot_of[x]];
    d->n_classes = (uint32_t)n_classes;
    return CM_OK;
}

/* TRANS_GATHER: cm_flat_derive_trans's rows of a rule as AVX2 gathers where the CPU has them:
 * global class c's entry is the row's entry of proj[c], the rule's class of c's first byte, 8
 * classes a gather and a store (a row of ~45 global classes: 6 of each), each target checked 8
 * lanes at a time (-1, or a state of the rule), where each row was a -1 fill (a memset) and a
 * store a global class of each run with an edge (~146 instructions a row in the mid set).  Only
 * where every class of the rule is some global class's (so every entry of a row is read and
 * checked, as the run walk checks every run's target); else, and off, the run walk (the
 * reference the tests compare against).  The table and the errors are the same.  Off by default:
 * callgrind counts a gather as one instruction (0.48 M fewer in the mid set's compiles), but on
 * this AMD EPYC (Zen 4) a gather is microcoded, and perf's samples of the p90 set's compiles put
 * the gathered rows at 2.13 % against the run walk's 1.00 % (design.md §7, session 50), as
 * chains.c's row gathers measured before. */
static int g_trans_gather = 0;
static size_t g_trans_gather_rows;

void cm_derive_trans_gather_enable(int on) { g_trans_gather = on; }

size_t cm_derive_trans_gather_rows(void) { return g_trans_gather_rows; }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CM_TRANS_GATHER 1
static bool trans_gather_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* Rows [0, n) of a rule's table (nc classes, first state lo) by global class into o (k a row):
 * o[c] = row[proj[c]] (proj padded with 0 to a multiple of 8: a padding lane reads the row's
 * class 0, an entry of the row checked as any).  CM_ERR_ARG where an entry read is neither -1 nor
 * a state of [lo, lo + n): three bounds kept over every lane, not a test of each -- the signed
 * least (-1 or more), the signed most (below lo + n) and the unsigned least (-1 the largest, so
 * the least of the others: lo or more). */
__attribute__((target("avx2"))) static int gather_rows(const int32_t *tr, uint32_t n, uint32_t nc, const int32_t *proj,
                                                       uint32_t k, uint32_t lo, int32_t *o) {
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(k & 7)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i smin = _mm256_set1_epi32(-1), smax = smin, umin = smin;
    uint32_t k8 = k & ~7u;
    for (uint32_t i = 0; i < n; i++, o += k) {
        const int *row = (const int *)(tr + (size_t)i * nc);
        uint32_t c = 0;
        for (; c < k8; c += 8) {
            __m256i v = _mm256_i32gather_epi32(row, _mm256_loadu_si256((const __m256i *)(const void *)(proj + c)), 4);
            _mm256_storeu_si256((__m256i *)(void *)(o + c), v);
            smin = _mm256_min_epi32(smin, v), smax = _mm256_max_epi32(smax, v), umin = _mm256_min_epu32(umin, v);
        }
        if (c < k) { /* the last k % 8 stored under a mask */
            __m256i v = _mm256_i32gather_epi32(row, _mm256_loadu_si256((const __m256i *)(const void *)(proj + c)), 4);
            _mm256_maskstore_epi32(o + c, tail, v);
            smin = _mm256_min_epi32(smin, v), smax = _mm256_max_epi32(smax, v), umin = _mm256_min_epu32(umin, v);
        }
    }
    int32_t a[8], b[8];
    uint32_t u[8];
    _mm256_storeu_si256((__m256i *)(void *)a, smin), _mm256_storeu_si256((__m256i *)(void *)b, smax);
    _mm256_storeu_si256((__m256i *)(void *)u, umin);
    for (int j = 0; j < 8; j++)
        if (a[j] < -1 || (int64_t)b[j] >= (int64_t)lo + n || u[j] < lo) return CM_ERR_ARG;
    return CM_OK;
}
#endif

/* cm_flat_derive_trans's table (cloned for AVX2: its -1 fill of each row, k classes, is most of
 * its stores).  gather: TRANS_GATHER's rows where a rule's classes allow them. */
CM_TABLE_CLONES static int derive_trans(const cm_flat_rules *f, const cm_flat_derived *d, int32_t *out, uint32_t k,
                                        bool gather) {
    int rep[256];
    for (uint32_t c = 0; c < k; c++) rep[c] = -1;
    for (int x = 255; x >= 0; x--) rep[d->byte_class[x]] = x; /* the first byte of each class */
    for (uint32_t c = 0; c < k; c++)
        if (rep[c] < 0) return CM_ERR_ARG;
    for (uint32_t r = 0; r < f->n_rules; r++) {
        uint32_t lo = f->rule_state[r], n = f->rule_state[r + 1] - lo;
        if (!n) continue;
        uint32_t nc = (f->rule_trans[r + 1] - f->rule_trans[r]) / n;
        const uint8_t *cls = f->byte_class + (size_t)r * 256;
        const int32_t *tr = f->trans + f->rule_trans[r];
        int32_t *o = out + (size_t)lo * k;
        if (nc > 256) return CM_ERR_ARG;
#ifdef CM_TRANS_GATHER
        if (gather) { /* (TRANS_GATHER) */
            int32_t proj[264] = {0};
            uint64_t cov[4] = {0}, all = 0;
            for (uint32_t c = 0; c < k; c++) {
                uint8_t j = cls[rep[c]];
                if (j >= nc) return CM_ERR_ARG;
                proj[c] = j;
            }
            uint64_t starts[4]; /* (contiguous classes, CLASS_SPANS: each of 0 .. cls[255] has bytes) */
            if (class_spans(cls, nc, starts) && cls[255] == nc - 1) cov[0] = cov[1] = cov[2] = cov[3] = ~(uint64_t)0;
            else
                for (int x = 0; x < 256; x++) cov[cls[x] >> 6] |= (uint64_t)1 << (cls[x] & 63);
            for (uint32_t w = 0; w < 4; w++) { /* every class j < nc some byte's */
                uint32_t lo_w = 64 * w;
                uint64_t want = nc <= lo_w ? 0 : nc - lo_w >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << (nc - lo_w)) - 1;
                all |= want & ~cov[w];
            }
            if (!all) {
                if (gather_rows(tr, n, nc, proj, k, lo, o)) return CM_ERR_ARG;
                g_trans_gather_rows += n;
                continue;
            }
        }
#else
        (void)gather;
#endif
        /* the global classes of each class of the rule, grouped by it: inv[inv_off[j] ..
         * inv_off[j + 1]) (a counting sort of the rule's class of each global class) */
        uint16_t inv_off[258] = {0};
        uint8_t inv[256];
        for (uint32_t c = 0; c < k; c++) {
            uint8_t j = cls[rep[c]];
            if (j >= nc) return CM_ERR_ARG;
            inv_off[j + 2]++;
        }
        for (uint32_t j = 0; j < nc; j++) inv_off[j + 2] += inv_off[j + 1];
        for (uint32_t c = 0; c < k; c++) inv[inv_off[cls[rep[c]] + 1]++] = (uint8_t)c;
#define TARGET_OK(v) ((v) == -1 || ((v) >= 0 && (uint32_t)(v) - lo < n))
        if (d->run_bits && nc <= 64) { /* (ROW_BITS: the runs as bits, walked as keyed_rows found them) */
            const uint64_t *starts = d->run_bits + lo, *edge = d->edges + lo;
            for (uint32_t i = 0; i < n; i++, o += k) {
                const int32_t *row = tr + (size_t)i * nc;
                uint64_t st = starts[i];
                if (st == 1) { /* one target (most often none: calls only): a fill */
                    int32_t v = row[0];
                    if (!TARGET_OK(v)) return CM_ERR_ARG;
                    for (uint32_t c = 0; c < k; c++) o[c] = v;
                    continue;
                }
                /* a fill of -1, then each run with an edge (its start in st & edge: the runs of
                 * -1, half a row's, are not visited) written to its global classes; a run at j
                 * ends after the first of the runs' last classes (last) from j on, its target
                 * not -1 (an edge) */
                for (uint32_t c = 0; c < k; c++) o[c] = -1;
                uint64_t last = st >> 1 | (uint64_t)1 << (nc - 1);
                for (uint64_t x = st & edge[i]; x; x &= x - 1) {
                    uint32_t j = (uint32_t)__builtin_ctzll(x);
                    uint32_t j1 = (uint32_t)__builtin_ctzll(last & (~(uint64_t)0 << j)) + 1;
                    int32_t v = row[j];
                    if (v < 0 || (uint32_t)v - lo >= n) return CM_ERR_ARG; /* (TARGET_OK) */
                    for (uint32_t y = inv_off[j]; y < inv_off[j1]; y++) o[inv[y]] = v;
                }
            }
            continue;
        }
        for (uint32_t i = 0; i < n; i++, o += k) {
            const int32_t *row = tr + (size_t)i * nc;
            /* the row's runs as the FOLLOW pass found them (d->run_end), else walked again */
            const uint16_t *ends = d->run_off ? d->run_end + d->run_off[lo + i] : NULL;
            int32_t v = row[0];
            uint32_t j1 = ends ? ends[0] : cm_run_end(row, 0, nc);
            /* each run's target in range and in the rule (states [lo, lo + n)): the check the
             * grammar's walk of the rows makes, which cm_grammar_new_derived skips */
            if (!TARGET_OK(v)) return CM_ERR_ARG;
            if (j1 == nc) { /* one target (most often none: calls only): a fill */
                for (uint32_t c = 0; c < k; c++) o[c] = v;
                continue;
            }
            /* rows are mostly no edge: a fill of -1, then each run of the rule's row with
             * another value written to its global classes (a store a global class with an
             * edge, where a gather read every global class's rule class) */
            for (uint32_t c = 0; c < k; c++) o[c] = -1;
            for (uint32_t j = 0; j < nc; j = j1, j1 = j < nc ? (ends ? *++ends : cm_run_end(row, j, nc)) : nc) {
                if ((v = row[j]) == -1) continue;
                if (!TARGET_OK(v)) return CM_ERR_ARG;
                for (uint32_t x = inv_off[j]; x < inv_off[j1]; x++) o[inv[x]] = v;
            }
        }
    }
#undef TARGET_OK
    return CM_OK;
}

int cm_flat_derive_trans(const cm_flat_rules *f, const cm_flat_derived *d, int32_t *out) {
    uint32_t k = d ? d->n_classes : 0;
    if (!f || !out || !k || k > 256) return CM_ERR_ARG;
    uint64_t t0 = cm_stats_now();
    bool gather = false;
#ifdef CM_TRANS_GATHER
    gather = g_trans_gather && trans_gather_supported();
#endif
    int rc = derive_trans(f, d, out, k, gather);
    cm_stats_add(CM_PH_DERIVE, t0);
    return rc;
}

size_t cm_facts_size(uint32_t n_states, uint32_t n_rules) { return (size_t)n_states * 45 + n_rules; }

/* With a facts buffer (d->facts), rule_blocks' walk of the states writes the grammar's
 * per-state flags too (grammar.c's derive reads them instead of deriving them again): one
 * pass over every state, its ref_off, tok_off and state_bytes read once. */
static void state_facts(const cm_flat_rules *f, const cm_flat_derived *d) {
    cm_facts_parts p = cm_facts_at(d->facts, f->n_states);
    const uint32_t *ref_off = d->ref_off, *tok_off = d->tok_off, *ref_rule = d->ref_rule, *rule_state = f->rule_state;
    const uint8_t *accepting = f->accepting;
    /* every bound and offset in a local, each state's ends carried to the next state as its
     * starts: the flags' byte stores may alias any array read here, so the compiler read the
     * rule's bound and both starts again after them (~10 of a state's ~70 instructions) */
    uint32_t n_rules = f->n_rules, s = rule_state[0], r1 = ref_off[s], t1 = tok_off[s];
    for (uint32_t r = 0; r < n_rules; r++) {
        uint8_t block = 1;
        for (uint32_t end = rule_state[r + 1]; s < end; s++) {
            uint32_t r0 = r1, t0 = t1;
            r1 = ref_off[s + 1], t1 = tok_off[s + 1];
            bool no_refs = r0 == r1, no_toks = t0 == t1, acc = accepting[s] != 0;
            uint64_t nb[4]; /* (its 8 words as 4: 4 loads and ORs, not 8) */
            memcpy(nb, p.state_bytes + (size_t)s * 8, sizeof nb);
            bool bytes = (nb[0] | nb[1] | nb[2] | nb[3]) != 0;
            uint64_t calls = 0;
            for (uint32_t e = r0; e < r1; e++) calls |= 1ull << (ref_rule[e] & 63);
            p.calls[s] = calls;
            p.has_bytes[s] = bytes;
            p.simple[s] = !acc && no_refs;
            p.has_tokens[s] = !no_toks;
            p.plain[s] = !acc && no_refs && no_toks;
            p.solo[s] = no_refs && no_toks;
            if (!(no_refs && no_toks) || (acc && bytes)) block = 0; /* as rule_blocks */
        }
        p.rule_block[r] = block;
    }
}

/* rule_block[r] (wrap.c; grammar.c derives the same from the rows): every state of r without
 * calls and token edges, and no accepting state of r with a byte edge. */
static void rule_blocks(const cm_flat_rules *f, const cm_flat_derived *d) {
    if (d->facts) {
        state_facts(f, d);
        return;
    }
    for (uint32_t r = 0; r < f->n_rules; r++) {
        uint8_t block = 1;
        for (uint32_t s = f->rule_state[r]; block && s < f->rule_state[r + 1]; s++) {
            bool solo = d->ref_off[s + 1] == d->ref_off[s] && d->tok_off[s + 1] == d->tok_off[s];
            const uint32_t *nb = d->state_bytes + (size_t)s * 8;
            bool bytes = (nb[0] | nb[1] | nb[2] | nb[3] | nb[4] | nb[5] | nb[6] | nb[7]) != 0;
            if (!solo || (f->accepting[s] && bytes)) block = 0;
        }
        d->rule_block[r] = block;
    }
}

/* The parts that need scratch: rule of each state and of each name, can_end, nxt, FOLLOW. */
static int derive(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names, const int64_t *weights,
                  uint8_t *facts, cm_flat_derived *d) {
    uint32_t *rule_of_name = malloc(((size_t)n_names + 1) * sizeof *rule_of_name);
    uint32_t *set_of_name = malloc(((size_t)n_names + 1) * sizeof *set_of_name);
    uint32_t *rule_of_state = malloc(((size_t)f->n_states + 1) * sizeof *rule_of_state);
    uint8_t *can_end = malloc((size_t)f->n_states + 1);
    bits256 *nxt = malloc(((size_t)f->n_states + 1) * sizeof *nxt);
    bits256 *follow = malloc(((size_t)f->n_rules + 1) * sizeof *follow);
    uint32_t *calls = malloc(((size_t)f->n_states + 1) * sizeof *calls), n_calls = 0; /* states with calls */
    int rc = CM_ERR_NOMEM;
    if (rule_of_name && set_of_name && rule_of_state && can_end && nxt && follow && calls) {
        rc = CM_OK;
        memset(rule_of_name, 0xff, (size_t)n_names * sizeof *rule_of_name);
        memset(set_of_name, 0xff, (size_t)n_names * sizeof *set_of_name);
        for (uint32_t r = 0; r < f->n_rules && !rc; r++) {
            if (f->rule_name[r] >= n_names || f->rule_state[r + 1] < f->rule_state[r]) rc = CM_ERR_ARG;
            else rule_of_name[f->rule_name[r]] = r;
            for (uint32_t s = f->rule_state[r]; !rc && s < f->rule_state[r + 1]; s++) rule_of_state[s] = r;
        }
        for (uint32_t e = 0; !rc && e < f->lab_off[f->n_states]; e++)
            if (f->lab_name[e] >= n_names || f->lab_to[e] >= f->n_states) rc = CM_ERR_ARG;
        if (!rc) rc = edges(f, is_token, rule_of_name, set_of_name, d, calls, &n_calls);
    }
    if (!rc) {
        uint64_t key[256] = {0};
        int key_rc = CM_OK;
        nullable_rules(f, d, calls, n_calls, can_end);
        if (weights) { /* room for a run a class of every row: the table's size (a half of its bytes) */
            d->run_off = malloc(((size_t)f->n_states + 1) * sizeof *d->run_off);
            d->run_end = malloc(((size_t)f->rule_trans[f->n_rules] + 1) * sizeof *d->run_end);
            if (!d->run_off || !d->run_end) free(d->run_off), free(d->run_end), d->run_off = NULL, d->run_end = NULL;
        }
        /* the classes with an edge of each row (next_bytes' walk): the pairs of columns_differ
         * need not be read in a row with none in their classes (NULL: every row read) */
        uint64_t *edges = weights ? malloc(((size_t)f->n_states + 1) * sizeof *edges) : NULL;
        if (weights && facts) { /* written where the caller keeps them */
            cm_facts_parts p = cm_facts_at(facts, f->n_states);
            d->facts = facts, d->state_bytes = p.state_bytes, d->rule_block = p.rule_block;
        } else if (weights) { /* (out of memory: none, and the grammar walks the rows itself) */
            d->state_bytes = malloc(((size_t)f->n_states * 8 + 1) * sizeof *d->state_bytes);
            d->rule_block = malloc((size_t)f->n_rules + 1);
            if (!d->state_bytes || !d->rule_block)
                free(d->state_bytes), free(d->rule_block), d->state_bytes = NULL, d->rule_block = NULL;
        }
        if (g_row_bits && d->run_off && edges && d->state_bytes) /* (ROW_BITS) */
            d->run_bits = malloc(((size_t)f->n_states + 1) * sizeof *d->run_bits);
        next_bytes(f, d, calls, n_calls, nxt, weights, key, &key_rc, d->run_off, d->run_end, d->run_bits, edges,
                   d->state_bytes);
        if (key_rc) {
            free(d->run_off), free(d->run_end), free(d->run_bits);
            d->run_off = NULL, d->run_end = NULL, d->run_bits = NULL;
        }
        follow_bytes(f, d, calls, n_calls, can_end, nxt, rule_of_state, follow);
        if (weights) rc = key_rc ? key_rc : number_classes(f, key, edges, d);
        if (!rc && d->state_bytes && d->n_classes) rule_blocks(f, d);
        else {
            if (!d->facts) free(d->state_bytes), free(d->rule_block);
            d->state_bytes = NULL, d->rule_block = NULL, d->facts = NULL;
        }
        if (!rc && d->run_bits && d->n_classes) d->edges = edges; /* (cm_flat_derive_trans reads them) */
        else free(d->run_bits), free(edges), d->run_bits = NULL;
    }
    free(rule_of_name), free(set_of_name), free(rule_of_state), free(can_end), free(nxt), free(follow), free(calls);
    return rc;
}

int cm_flat_derive(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names, const int64_t *weights,
                   size_t n_weights, cm_flat_derived **out) {
    return cm_flat_derive_facts(f, is_token, n_names, weights, n_weights, NULL, out);
}

int cm_flat_derive_facts(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names, const int64_t *weights,
                         size_t n_weights, uint8_t *facts, cm_flat_derived **out) {
    if (!f || !is_token || !out || !f->n_rules || f->rule_state[0] != 0 || f->rule_state[f->n_rules] != f->n_states ||
        ((uintptr_t)facts & 7))
        return CM_ERR_ARG;
    *out = NULL;
    uint64_t t0 = cm_stats_now();
    cm_flat_derived *d = calloc(1, sizeof *d);
    if (!d) return CM_ERR_NOMEM;
    d->nullable = calloc((size_t)f->n_rules + 1, 1);
    d->follow = calloc((size_t)f->n_rules * 8 + 1, sizeof *d->follow);
    int rc = d->nullable && d->follow
                 ? derive(f, is_token, n_names, weights && n_weights >= f->n_states ? weights : NULL, facts, d)
                 : CM_ERR_NOMEM;
    if (rc) cm_flat_derived_free(d);
    else *out = d;
    cm_stats_add(CM_PH_DERIVE, t0);
    return rc;
}
