/* Private to the compile-time automaton build: budget.c (memory and time accounting),
 * thompson.c (encoded IR -> NFA), fsm.c (subset construction), minimize.c (Hopcroft),
 * dfa.c (operations on finished DFAs), components.c and flatten.c (a whole compile
 * stage per call).  Not on the per-token path. */
#ifndef CFGMASK_FSM_H
#define CFGMASK_FSM_H

#include <stdbool.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

#include "cfgmask.h"

/* A loop over a whole table (a compile's rows, written once) in a static function cloned for
 * AVX2 (8 lanes, where the x86-64 baseline's SSE2 has 4), picked at load time where the CPU has
 * it (glibc's ifunc; bits.c's clones, static for the same reason); elsewhere the one build. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define CM_TABLE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CM_TABLE_CLONES
#endif

/* ---- budget (cm_budget in cfgmask.h; b == NULL: no budget) ------------------ */

/* CLOCK_MONOTONIC seconds: the clock of Python's time.monotonic(). */
double cm_now_seconds(void);
/* Count `bytes` against b: CM_ERR_LIMIT_MEM (nothing counted) past b->max_bytes. */
int cm_budget_charge(cm_budget *b, size_t bytes);
void cm_budget_release(cm_budget *b, size_t bytes);
/* CM_ERR_TIMEOUT once b's deadline has passed. */
int cm_budget_time(const cm_budget *b);

/* Scratch memory: malloc (calloc if zero) of `bytes` counted against b until cm_bfree.
 * Returns NULL with *rc set when over budget or out of memory; does nothing and
 * returns NULL when *rc is already set, so a run of allocations is checked once. */
void *cm_balloc(cm_budget *b, size_t bytes, bool zero, int *rc);
void cm_bfree(cm_budget *b, void *p);

/* ---- growable uint32 arrays, their capacity counted against bud -------------- */

typedef struct {
    uint32_t *data;
    size_t n, cap;
    cm_budget *bud;
} cm_vec32;

/* Room for n entries in v (the growth itself is cm_vec_grow's, out of line). */
int cm_vec_grow(cm_vec32 *v, size_t n);
static inline int cm_vec_reserve(cm_vec32 *v, size_t n) { return v->cap >= n ? CM_OK : cm_vec_grow(v, n); }
void cm_vec_free(cm_vec32 *v);
/* v's array (shrunk to v->n entries, at least one) for an owner outside the budget's
 * scratch (a cm_dfa_out); v is left empty and its charge released. */
uint32_t *cm_vec_take(cm_vec32 *v);

static inline int cm_vec_push(cm_vec32 *v, uint32_t x) {
    if (v->n == v->cap) {
        int rc = cm_vec_grow(v, v->n + 1);
        if (rc) return rc;
    }
    v->data[v->n++] = x;
    return CM_OK;
}

static inline int cm_vec_push2(cm_vec32 *v, uint32_t x, uint32_t y) {
    int rc = cm_vec_push(v, x);
    return rc ? rc : cm_vec_push(v, y);
}

/* ---- DFAs ----------------------------------------------------------------- */

/* The index of x in the sorted v[0..n) (where it would go, if absent). */
static inline uint32_t cm_rank_u32(const uint32_t *v, size_t n, uint32_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return (uint32_t)lo;
}

/* The end of the run of equal entries of a dense row (row[0..n), c < n) that starts at c:
 * the first c1 > c with row[c1] != row[c], or n.  Four entries a step: a DFA's rows are
 * mostly long runs of -1 (no edge) and of one target (a character class).  With SSE2 (every
 * x86-64) one compare tests four entries and the mask of the first step that fails gives the
 * end at once, where the portable loop scanned that step again an entry at a time. */
static inline uint32_t cm_run_end(const int32_t *row, uint32_t c, uint32_t n) {
    uint32_t c1 = c + 1;
    if (c1 >= n || row[c1] != row[c]) return c1; /* a run of one: no setup */
#if defined(__SSE2__) && defined(__GNUC__)
    __m128i pat = _mm_set1_epi32(row[c]);
    for (; c1 + 4 <= n; c1 += 4) {
        __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + c1)), pat);
        unsigned m = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq));
        if (m != 0xF) return c1 + (uint32_t)__builtin_ctz(~m);
    }
#else
    uint64_t x = (uint32_t)row[c], pat = x << 32 | x;
    for (; c1 + 4 <= n; c1 += 4) {
        uint64_t a, b;
        memcpy(&a, row + c1, sizeof a);
        memcpy(&b, row + c1 + 2, sizeof b);
        if ((a ^ pat) | (b ^ pat)) break;
    }
#endif
    while (c1 < n && row[c1] == row[c]) c1++;
    return c1;
}

/* The starts of a row's runs (row[0..n), 1 <= n <= 64) as bits: bit c set where c == 0 or
 * row[c] != row[c - 1], so the run at c ends at the next set bit (or n): the runs cm_run_end
 * walks, from one pass over the row (four entries a compare, sixteen a movemask with SSE2)
 * instead of a scan set up at every run.  Bits at n and above are 0. */
static inline uint64_t cm_run_starts(const int32_t *row, uint32_t n) {
    uint64_t m = 1;
    uint32_t c = 1;
#if defined(__SSE2__) && defined(__GNUC__)
#define CM_RS_EQ(i)                                                                   \
    _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + c + (i))), \
                    _mm_loadu_si128((const __m128i *)(const void *)(row + c + (i)-1)))
    for (; c + 16 <= n; c += 16) { /* int32 -> int16 -> int8 saturating keeps -1 and 0 */
        __m128i lo = _mm_packs_epi32(CM_RS_EQ(0), CM_RS_EQ(4)), hi = _mm_packs_epi32(CM_RS_EQ(8), CM_RS_EQ(12));
        m |= (uint64_t)(~(unsigned)_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) & 0xFFFFu) << c;
    }
    for (; c + 4 <= n; c += 4)
        m |= (uint64_t)(~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(CM_RS_EQ(0))) & 0xFu) << c;
    if (c < n && n >= 5) { /* the last 1-3 entries: the row's last four compares, made again in part */
        c = n - 4;
        m |= (uint64_t)(~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(CM_RS_EQ(0))) & 0xFu) << c;
        c = n;
    }
#undef CM_RS_EQ
#endif
    for (; c < n; c++) m |= (uint64_t)(row[c] != row[c - 1]) << c;
    return m;
}

/* Bit c: row[c] != -1, for a row of nc <= 64 classes (grammar.c's derive, tables.c's ROW_BITS;
 * one compare a 4 classes, where a walk of the row as runs set up a scan at every run: most rows
 * are a few edges among ~45 classes).
 * Sixteen classes' compares are packed into one byte mask (int32 -> int16 -> int8, saturating:
 * -1 stays -1, 0 stays 0, in class order), one movemask for them, then four at a time. */
static inline uint64_t cm_row_edges(const int32_t *row, uint32_t nc) {
    uint64_t m = 0;
    uint32_t c = 0;
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i none = _mm_set1_epi32(-1);
#define ROW_EQ(i) _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + c + (i))), none)
    for (; c + 16 <= nc; c += 16) {
        __m128i lo = _mm_packs_epi32(ROW_EQ(0), ROW_EQ(4)), hi = _mm_packs_epi32(ROW_EQ(8), ROW_EQ(12));
        m |= (uint64_t)(~(unsigned)_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) & 0xFFFFu) << c;
    }
#undef ROW_EQ
    for (; c + 4 <= nc; c += 4) {
        __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + c)), none);
        m |= (uint64_t)(~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq)) & 0xFu) << c;
    }
    if (c < nc && nc >= 4) { /* the last 1-3 classes: the row's last four, read again in part */
        __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + nc - 4)), none);
        m |= (uint64_t)(~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq)) & 0xFu) << (nc - 4);
        c = nc;
    }
#endif
    for (; c < nc; c++) m |= (uint64_t)(row[c] != -1) << c;
    return m;
}

/* A DFA's byte rows as runs (cm_dfa_out.runs): state s's are off[s] .. off[s + 1], each the
 * bytes rng & 0xFF .. rng >> 8 of one class span to state to[] (no run for "no edge"), in class
 * order: what a walk of the row with cm_run_end yields.  One allocation (free(runs)). */
typedef struct cm_dfa_runs {
    uint32_t *off;                 /* [n_states + 1] */
    uint16_t *rng;                 /* [off[n_states]] lo | hi << 8 */
    uint32_t *to;                  /* [off[n_states]] */
} cm_dfa_runs;

/* d's runs if they were kept (cm_dfa_runs_keep; counted in cm_dfa_runs_reused), else NULL.  A
 * finished DFA does not change, so runs kept once stay true. */
const cm_dfa_runs *cm_dfa_runs_of(const cm_dfa_out *d);
/* Are copies to take a DFA's kept runs (cm_dfa_runs_enable: off, every copy walks its rows)? */
bool cm_dfa_runs_on(void);
/* Are rows of at most 64 classes walked from their run starts (cm_dfa_walk_starts_enable: off,
 * cm_run_end at every run)? */
bool cm_dfa_walk_starts_on(void);
/* d's runs for a copy (direct.c): those kept on d (counted in cm_dfa_runs_reused), else made
 * from its rows and kept; with the runs off, made for this copy alone (*own: the caller frees
 * them).  NULL: out of memory. */
const cm_dfa_runs *cm_dfa_runs_for_copy(const cm_dfa_out *d, cm_dfa_runs **own);
/* Room for the runs of a DFA of n_states states with n_runs runs in all (NULL: out of memory). */
cm_dfa_runs *cm_dfa_runs_alloc(uint32_t n_states, size_t n_runs);
/* Keep `made` (cm_dfa_runs_alloc, filled) as d's runs unless some are kept already (another
 * thread's: made is freed).  Safe from several threads.  Its memory is not counted against a
 * budget: at most 1.5x d's table, and only for a DFA copied into a caller. */
void cm_dfa_runs_keep(const cm_dfa_out *d, cm_dfa_runs *made);

/* Bytes held by d's arrays (what a budget counts for a built DFA). */
size_t cm_dfa_bytes(const cm_dfa_out *d);
/* A DFA of n_states states, n_classes classes and n_lab label edges, its arrays
 * allocated (not filled) and counted against b. */
int cm_dfa_alloc(cm_budget *b, uint32_t n_states, uint32_t n_classes, size_t n_lab, cm_dfa_out **out);
/* Free d and release what it counted against b. */
void cm_dfa_release(cm_budget *b, cm_dfa_out *d);

/* cm_dfa_trim without the copy where nothing is trimmed: *out = d itself then (still
 * the caller's d, not to be freed as a result), else a new DFA the caller owns, or NULL
 * when the start state is dead. */
int cm_dfa_trim_shared(const cm_dfa_out *d, const uint8_t *label_ok, const cm_dfa_out **out);

/* The byte transitions of a DFA as lists (state k: class cls[i] -> to[i] for i in
 * off[k] .. off[k+1]), beside the dense table: minimization walks these. */
typedef struct {
    cm_vec32 off, cls, to;
} cm_sparse_edges;

/* The minimal DFA of the WORDS node at in->code[pc] (words.c), counted against b. */
int cm_words_build(const cm_ir_input *in, uint32_t pc, cm_budget *b, cm_dfa_out **out);

/* The coarsest partition of d's states into block[] (classes 0 .. *n_blocks - 1, in no set
 * order) by registration over its strongly connected components (register.c); *done false
 * (block[] unspecified) when a component is too large for it.  *live (with *done): every state
 * reaches an accepting state when every label edge is followed (each component is live when
 * one of its states accepts or has an edge to a live finished component). */
int cm_fsm_register(const cm_dfa_out *d, const cm_sparse_edges *sp, cm_budget *bud, uint32_t *block,
                    uint32_t *n_blocks, bool *done, bool *live);

/* Minimize d in place (registration, or Hopcroft; the start state stays 0) and write its
 * dense rows (d->trans is NULL on entry: subset construction leaves only the sparse edges sp)
 * for the states kept; with `merge`, adjacent byte classes whose columns are equal in every
 * row are one class: a minimal DFA's classes then follow from its language alone, not from
 * where its NFA's byte ranges were cut. */
int cm_fsm_minimize(cm_dfa_out *d, const cm_sparse_edges *sp, bool merge, cm_budget *b);
/* cm_fsm_minimize of a DFA known to be minimal and live (every state reached and reaching
 * acceptance): its rows written, its classes merged with `merge`, no partition computed. */
int cm_fsm_emit_minimal(cm_dfa_out *d, const cm_sparse_edges *sp, bool merge, cm_budget *b);

/* A member's minimal DFA built straight from its body at code offset root (direct.c), as
 * cm_fsm_build_ir would build it, state for state; CM_DIRECT_NO (nothing built) where the body
 * is not built that way (Thompson's path then). */
enum { CM_DIRECT_NO = 1 };
int cm_direct_build(const cm_ir_input *in, uint32_t root, size_t max_states, cm_budget *budget, cm_dfa_out **out);

/* A callee expanded in its caller's NFA on trial (components.c, issue 12 helper `altbound`):
 * thompson.c builds the REF_EXPAND of `name` (its first expansion) into NFA states of its own,
 * [lo, hi), entered at lo alone and left through one epsilon edge, sharing no tail with the
 * rest; subset construction (fsm.c) counts the distinct non-empty sets of those states among
 * its DFA states and fails (CM_ERR_LIMIT, `over` set) once they pass `cap` or a set holding lo
 * differs from the first such set (the callee entered again while still running).  Otherwise
 * each such set is one of the callee's own subset-construction states, all of them occur, and
 * so its minimal DFA has at most `cap` states.  Several at once, nested or not, each on its own. */
#define CM_WATCH_MAX 32
typedef struct {
    uint32_t n, over;              /* watches; over: the one that failed + 1 (0: none) */
    struct {
        uint32_t name, lo, hi;
        size_t cap;
    } w[CM_WATCH_MAX];
} cm_expand_watch;
extern _Thread_local cm_expand_watch cm_watch;

/* cm_fsm_build, with `merge`: the DFA's classes merged (cm_fsm_minimize). */
int cm_fsm_build_ex(const cm_nfa_view *nfa, uint32_t start, uint32_t final, size_t max_states, bool merge,
                    cm_budget *budget, cm_dfa_out **out);

/* Node pc of an encoded IR lies whole inside its code: its op and count, then its operands (a
 * BYTES node's ranges, a REPEAT's bounds and item, a list's children; UTF8, REF and WORDS carry
 * none inline).  The Thompson and the direct builders check it before reading a node. */
static inline bool cm_ir_node_fits(const cm_ir_input *in, uint32_t pc) {
    if ((size_t)pc + 2 > in->code_len) return false;
    uint32_t op = in->code[pc], n = in->code[pc + 1];
    size_t need = op == CM_IR_BYTES ? 2 + 2 * (size_t)n : op == CM_IR_REPEAT ? 4 : 2 + (size_t)n;
    if (op == CM_IR_UTF8 || op == CM_IR_REF || op == CM_IR_WORDS) need = 2;
    return (size_t)pc + need <= in->code_len;
}

/* The entry of name in an encoded IR's refs (sorted by name), or NULL. */
static inline const cm_ir_ref *cm_ir_find_ref(const cm_ir_input *in, uint32_t name) {
    size_t lo = 0, hi = in->n_refs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (in->refs[mid].name < name) lo = mid + 1;
        else hi = mid;
    }
    return (lo < in->n_refs && in->refs[lo].name == name) ? &in->refs[lo] : NULL;
}

/* ---- the facts a compile hands the grammar (cm_facts_size; tables.c writes, grammar.c borrows) -- */

typedef struct cm_facts_parts {
    uint32_t *state_bytes;   /* [n_states * 8] */
    uint64_t *calls;         /* [n_states] */
    uint8_t *has_bytes, *simple, *has_tokens, *plain, *solo; /* [n_states] each */
    uint8_t *rule_block;     /* [n_rules] */
} cm_facts_parts;

/* The parts of a facts buffer of n_states states (laid out as cm_facts_size says). */
static inline cm_facts_parts cm_facts_at(uint8_t *facts, uint32_t n_states) {
    size_t ns = n_states;
    cm_facts_parts p;
    p.state_bytes = (uint32_t *)(void *)facts;
    p.calls = (uint64_t *)(void *)(facts + 32 * ns);
    p.has_bytes = facts + 40 * ns;
    p.simple = p.has_bytes + ns;
    p.has_tokens = p.simple + ns;
    p.plain = p.has_tokens + ns;
    p.solo = p.plain + ns;
    p.rule_block = p.solo + ns;
    return p;
}

#endif
