/* The compiled grammar: validated copies of the automaton tables and what is
 * derived from them once.  Its mask cache is cache.c's. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cstats.h"
#include "fsm.h"

void cm_limits_default(cm_limits *out) {
    out->max_items_per_set = 200000;
    out->max_chart_items = 50000000;
    out->max_cache_bytes = (size_t)2 << 30;
    out->direct_walk_states = 64;
    out->index_min_items = 32;
    out->mask_memo_min_items = 64;
    out->mask_memo_min_candidates = 1024;
    out->share_loop_walks = 1;
    out->filter_uncertain = 1;
    out->compose_entries = 1;
    out->flat_walks = 1;
    out->flat_calls = 1;
    out->plain_skip = 1;
    out->name_skip = 1;
    out->wrap_repeats = 256;
    out->count_chains = 1;
    out->tail_parts = 256;
    out->share_edges = 256;
    out->closing_verdicts = 64;
    out->run_walks = 64;
    out->name_stops = 128;
    out->filter_runs = 3;
    out->run_stops = 8;
    out->run_ahead = 16;
    out->filter_pairs = 1024;
    out->stack_verdicts = 4096;
    out->flat_plain_steps = 1;
    out->listed_reads = 1;
    out->lazy_follow = 1;
}

static int validate_tokens(const cm_tables *t) {
    if (!t->tok_off || !t->set_off || t->tok_off[0] != 0 || t->set_off[0] != 0) return CM_ERR_ARG;
    uint32_t n_edges = t->tok_off[t->n_states];
    if (n_edges && (!t->tok_set || !t->tok_target)) return CM_ERR_ARG;
    /* one walk: offsets that never fall nor pass the last are those that rise to it */
    for (uint32_t s = 0; s < t->n_states; s++) {
        if (t->tok_off[s + 1] < t->tok_off[s] || t->tok_off[s + 1] > n_edges) return CM_ERR_ARG;
        for (uint32_t e = t->tok_off[s]; e < t->tok_off[s + 1]; e++) {
            if (t->tok_set[e] >= t->n_token_sets || t->tok_target[e] >= t->n_states) return CM_ERR_ARG;
            if (t->state_rule[t->tok_target[e]] != t->state_rule[s]) return CM_ERR_ARG;
        }
    }
    if (t->n_token_sets && (!t->set_negated || (t->set_off[t->n_token_sets] && !t->set_ids))) return CM_ERR_ARG;
    for (uint32_t k = 0; k < t->n_token_sets; k++)  /* empty only negated: every token */
        if (t->set_off[k + 1] < t->set_off[k] || (t->set_off[k + 1] == t->set_off[k] && !t->set_negated[k]))
            return CM_ERR_ARG;
    return CM_OK;
}

static int validate_lookahead(const cm_tables *t) {
    if (!t->n_la) return CM_OK;  /* none: copy_tables supplies class 0 */
    if (t->n_la > CM_LA_DEAD || !t->rule_la || !t->la_next || !t->la_union) return CM_ERR_ARG;
    for (uint32_t r = 0; r < t->n_rules; r++)
        if (t->rule_la[r] >= t->n_la || (t->rule_la[r] && r == t->start_rule)) return CM_ERR_ARG;
    for (int b = 0; b < 256; b++)
        if (t->la_next[b]) return CM_ERR_ARG;  /* debt 0 owes nothing */
    for (size_t i = 0; i < (size_t)t->n_la * 256; i++)
        if (t->la_next[i] >= t->n_la && t->la_next[i] != CM_LA_DEAD) return CM_ERR_ARG;
    for (size_t i = 0; i < (size_t)t->n_la * t->n_la; i++)
        if (t->la_union[i] >= t->n_la && t->la_union[i] != CM_LA_DEAD) return CM_ERR_ARG;
    bool used[256] = {false};  /* markers' debts meet: their unions must be in the table */
    for (uint32_t r = 0; r < t->n_rules; r++) used[t->rule_la[r]] = true;
    for (uint32_t a = 1; a < t->n_la; a++)
        for (uint32_t b = 1; b < t->n_la; b++)
            if (used[a] && used[b] && t->la_union[(size_t)a * t->n_la + b] == CM_LA_DEAD) return CM_ERR_ARG;
    return CM_OK;
}

static int validate(const cm_tables *t) {
    if (!t->n_states || !t->n_rules || !t->n_classes || t->n_classes > 256 || t->start_rule >= t->n_rules)
        return CM_ERR_ARG;
    if (t->n_states > CM_STATE_MASK) return CM_ERR_ARG;
    if (!t->byte_class || !t->trans || !t->state_rule || !t->accepting || !t->ref_off || !t->rule_start ||
        !t->rule_nullable || !t->rule_follow)
        return CM_ERR_ARG;
    for (int b = 0; b < 256; b++)
        if (t->byte_class[b] >= t->n_classes) return CM_ERR_ARG;
    if (t->ref_off[0] != 0) return CM_ERR_ARG;
    for (uint32_t s = 0; s < t->n_states; s++) {
        /* the byte transitions' targets: checked by derive, in its one walk of the rows */
        if (t->state_rule[s] >= t->n_rules || t->ref_off[s + 1] < t->ref_off[s]) return CM_ERR_ARG;
    }
    uint32_t n_refs = t->ref_off[t->n_states];
    if (n_refs && (!t->ref_rule || !t->ref_target)) return CM_ERR_ARG;
    for (uint32_t e = 0; e < n_refs; e++)
        if (t->ref_rule[e] >= t->n_rules || t->ref_target[e] >= t->n_states) return CM_ERR_ARG;
    for (uint32_t r = 0; r < t->n_rules; r++)
        if (t->rule_start[r] >= t->n_states || t->state_rule[t->rule_start[r]] != r) return CM_ERR_ARG;
    int rc = validate_lookahead(t);
    return rc ? rc : validate_tokens(t);
}

/* The tables without markers' own (debt 0 alone: zeros) in a small allocation of the grammar;
 * the others the caller's, which it keeps (cm_grammar_new_borrowed). */
static int borrow_tables(cm_grammar *g, const cm_tables *t) {
    g->t = *t;
    if (t->n_la) return CM_OK;
    size_t nr8 = ((size_t)t->n_rules + 7) & ~(size_t)7;
    uint8_t *p = calloc(nr8 + 256 + 8, 1);
    if (!p) return CM_ERR_NOMEM;
    g->blob = p;
    g->t.rule_la = p;
    g->t.la_next = p + nr8;
    g->t.la_union = p + nr8 + 256;
    g->t.n_la = 1;
    return CM_OK;
}

/* Copy every table into one allocation owned by the grammar. */
static int copy_tables(cm_grammar *g, const cm_tables *t) {
    size_t ns = t->n_states, nr = t->n_rules, ne = t->ref_off[ns];
    size_t nt = t->tok_off[ns], nk = t->n_token_sets, ni = t->set_off[nk];
    size_t nl = t->n_la ? t->n_la : 1;
    size_t sz = 256 + ns * t->n_classes * 4 + ns * 4 + ns + (ns + 1) * 4 + 2 * ne * 4 + nr * 4 + nr + nr * 32 +
                (ns + 1) * 4 + 2 * nt * 4 + (nk + 1) * 4 + ni * 4 + nk + 256 + nr + nl * 256 + nl * nl + 32;
    uint8_t *p = malloc(sz);
    if (!p) return CM_ERR_NOMEM;
    g->blob = p;
    g->t = *t;
#define TAKE(field, count, type)                          \
    do {                                                  \
        size_t n_ = (size_t)(count) * sizeof(type);       \
        if (n_) memcpy(p, t->field, n_);                  \
        g->t.field = (const type *)(void *)p;             \
        p += (n_ + 7) & ~(size_t)7;                       \
    } while (0)
    TAKE(trans, ns * t->n_classes, int32_t);
    TAKE(state_rule, ns, uint32_t);
    TAKE(ref_off, ns + 1, uint32_t);
    TAKE(ref_rule, ne, uint32_t);
    TAKE(ref_target, ne, uint32_t);
    TAKE(rule_start, nr, uint32_t);
    TAKE(rule_follow, nr * 8, uint32_t);
    TAKE(byte_class, 256, uint8_t);
    TAKE(accepting, ns, uint8_t);
    TAKE(rule_nullable, nr, uint8_t);
    TAKE(tok_off, ns + 1, uint32_t);
    TAKE(tok_set, nt, uint32_t);
    TAKE(tok_target, nt, uint32_t);
    TAKE(set_off, nk + 1, uint32_t);
    TAKE(set_ids, ni, uint32_t);
    TAKE(set_negated, nk, uint8_t);
    if (t->n_la) {
        TAKE(rule_la, nr, uint8_t);
        TAKE(la_next, nl * 256, uint8_t);
        TAKE(la_union, nl * nl, uint8_t);
    } else {  /* no markers: debt 0 alone */
        memset(p, 0, ((nr + 7) & ~(size_t)7) + 256 + 8);
        g->t.rule_la = p;
        p += (nr + 7) & ~(size_t)7;
        g->t.la_next = p;
        p += 256;
        g->t.la_union = p;
        g->t.n_la = 1;
    }
#undef TAKE
    return CM_OK;
}

/* v[0 .. n) (states < the bits' count) sorted with repeats dropped, in place; returns the number
 * kept.  A short list by insertion into the kept prefix; a longer one (a rule called from many
 * states: JSON's value) as a set of bits, read back in order and cleared (bits: all zero before
 * and after).  Where cm_sort_unique_u32's qsort called its comparator per pair (~18 K
 * instructions a list of a few hundred). */
static uint32_t sort_unique_states(uint32_t *v, uint32_t n, uint64_t *bits) {
    uint32_t k = 0;
    if (n <= 16) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t x = v[i], j = k; /* v[i] read before any store: the prefix ends at k <= i */
            while (j && v[j - 1] > x) j--;
            if (j && v[j - 1] == x) continue;
            for (uint32_t m = k; m > j; m--) v[m] = v[m - 1];
            v[j] = x, k++;
        }
        return k;
    }
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = v[i];
        bits[x >> 6] |= 1ull << (x & 63);
        lo = x < lo ? x : lo, hi = x > hi ? x : hi;
    }
    for (uint32_t w = lo >> 6; w <= hi >> 6; w++) { /* every v[i] read above: k <= n */
        for (uint64_t m = bits[w]; m; m &= m - 1) v[k++] = w * 64 + (uint32_t)__builtin_ctzll(m);
        bits[w] = 0;
    }
    return k;
}

/* Per rule, the distinct states its callers go on in after it completes. */
static int derive_returns(cm_grammar *g) {
    const cm_tables *t = &g->t;
    size_t ne = t->ref_off[t->n_states];
    g->ret_off = calloc((size_t)t->n_rules + 1, sizeof *g->ret_off);
    g->ret_state = malloc((ne ? ne : 1) * sizeof *g->ret_state);
    uint32_t *fill = calloc(t->n_rules ? t->n_rules : 1, sizeof *fill);
    uint64_t *bits = calloc(((size_t)t->n_states + 63) / 64, sizeof *bits); /* sort_unique_states' */
    if (!g->ret_off || !g->ret_state || !fill || !bits) {
        free(fill), free(bits);
        return CM_ERR_NOMEM;
    }
    for (size_t e = 0; e < ne; e++) g->ret_off[t->ref_rule[e] + 1]++;
    for (uint32_t r = 0; r < t->n_rules; r++) g->ret_off[r + 1] += g->ret_off[r];
    for (size_t e = 0; e < ne; e++) {
        uint32_t r = t->ref_rule[e];
        g->ret_state[g->ret_off[r] + fill[r]++] = t->ref_target[e];
    }
    /* distinct targets, compacted in place */
    uint32_t w = 0;
    for (uint32_t r = 0; r < t->n_rules; r++) {
        uint32_t lo = g->ret_off[r], n = sort_unique_states(g->ret_state + lo, fill[r], bits);
        memmove(g->ret_state + w, g->ret_state + lo, n * sizeof *g->ret_state);
        g->ret_off[r] = w;
        w += n;
    }
    g->ret_off[t->n_rules] = w;
    free(fill), free(bits);
    return CM_OK;
}

/* derive with every per-state flag, next_bytes and rule_block given (cm_grammar_new_facts):
 * borrowed from what the compiler's one walk of the rows and states found (csrc/tables.c,
 * state_facts; read only from here on), the rows not read. */
static int derive_facts(cm_grammar *g, const uint8_t *facts) {
    cm_facts_parts p = cm_facts_at((uint8_t *)(uintptr_t)facts, g->t.n_states);
    g->facts_borrowed = true;
    g->next_bytes = p.state_bytes, g->calls = p.calls, g->has_bytes = p.has_bytes, g->simple = p.simple;
    g->has_tokens = p.has_tokens, g->plain = p.plain, g->solo = p.solo, g->rule_block = p.rule_block;
    return derive_returns(g);
}

/* Per state, what the mask and the parser ask of it often; also the last of validate (the byte
 * transitions' targets), so that the rows are walked once (CM_ERR_ARG: the grammar is freed).
 * A row of up to 64 classes is read as a bit per class (cm_row_edges), its spans of edges taken
 * from the bits; a wider one as runs of one target.  With facts (cm_grammar_new_facts) all of
 * it is given (derive_facts) and the rows are not read. */
static int derive(cm_grammar *g, const uint8_t *facts) {
    if (facts) return derive_facts(g, facts);
    const cm_tables *t = &g->t;
    g->has_bytes = calloc(t->n_states, 1);
    g->simple = calloc(t->n_states, 1);
    g->has_tokens = calloc(t->n_states, 1);
    g->calls = malloc((size_t)t->n_states * sizeof *g->calls);  /* every state's written below */
    g->next_bytes = malloc((size_t)t->n_states * 8 * sizeof *g->next_bytes);
    g->plain = calloc(t->n_states, 1);
    g->solo = calloc(t->n_states, 1);
    g->rule_block = malloc(t->n_rules);
    if (!g->has_bytes || !g->simple || !g->has_tokens || !g->calls || !g->next_bytes || !g->plain || !g->solo ||
        !g->rule_block)
        return CM_ERR_NOMEM;
    memset(g->rule_block, 1, t->n_rules);
    /* the tables' fields in locals: the byte flags' stores may alias them (uint8_t) */
    const uint32_t ns = t->n_states, nc = t->n_classes, *ref_off = t->ref_off, *tok_off = t->tok_off;
    const uint32_t *state_rule = t->state_rule, *ref_rule = t->ref_rule;
    const uint8_t *accepting = t->accepting;
    const int32_t *trans = t->trans;
    uint8_t *simple = g->simple, *plain = g->plain, *solo = g->solo, *has_tokens = g->has_tokens;
    uint8_t *has_bytes = g->has_bytes;
    for (uint32_t s = 0; s < ns; s++) { /* the flags the rows do not decide */
        uint32_t r0 = ref_off[s], r1 = ref_off[s + 1];
        bool no_refs = r0 == r1, no_toks = tok_off[s] == tok_off[s + 1];
        simple[s] = !accepting[s] && no_refs;
        plain[s] = !accepting[s] && no_refs && no_toks;
        solo[s] = no_refs && no_toks;
        has_tokens[s] = !no_toks;
        uint64_t calls = 0;
        for (uint32_t e = r0; e < r1; e++) calls |= 1ull << (ref_rule[e] & 63);
        g->calls[s] = calls;
    }
    /* the bytes of classes [0, c) at pre[c * 4]: classes are disjoint, so XOR is their union and
     * pre[c1] ^ pre[c] the bytes of a span [c, c1) of a row (4 words a span instead of 4 a class) */
    uint64_t pre[257 * 4];  /* [0, n_classes] used */
    memset(pre, 0, ((size_t)t->n_classes + 1) * 4 * sizeof *pre);
    for (int b = 0; b < 256; b++) pre[(t->byte_class[b] + 1) * 4 + (b >> 6)] |= (uint64_t)1 << (b & 63);
    for (uint32_t c = 0; c < t->n_classes; c++)
        for (int w = 0; w < 4; w++) pre[(c + 1) * 4 + w] ^= pre[c * 4 + w];
    uint8_t *rule_block_out = g->rule_block;
    for (uint32_t s = 0; s < ns; s++) {
        const int32_t *row = trans + (size_t)s * nc;
        uint64_t next[4] = {0};
        uint32_t *nb = g->next_bytes + (size_t)s * 8;
        if (nc <= 64) { /* the spans of edges from a bit per class */
            uint32_t r = state_rule[s];
            uint64_t m = cm_row_edges(row, nc);
            has_bytes[s] = m != 0;
            if (!solo[s] || (accepting[s] && m)) rule_block_out[r] = 0; /* see wrap.c */
#if defined(__SSE2__) && defined(__GNUC__)
            __m128i lo = _mm_setzero_si128(), hi = lo; /* next's words 0-1 and 2-3 */
#define PRE_AT(i) _mm_loadu_si128((const __m128i *)(const void *)(pre + (i)))
#endif
            while (m) {
                uint32_t c = (uint32_t)__builtin_ctzll(m), c1 = c;
                for (int32_t prev = -1; c1 < nc && (m >> c1 & 1); c1++) {
                    int32_t n = row[c1];  /* validate's part: a target in range and in the same rule */
                    if (n == prev) continue;
                    if (n < 0 || (uint32_t)n >= ns || state_rule[n] != r) return CM_ERR_ARG;
                    prev = n;
                }
#if defined(__SSE2__) && defined(__GNUC__)
                lo = _mm_or_si128(lo, _mm_xor_si128(PRE_AT(c1 * 4), PRE_AT(c * 4)));
                hi = _mm_or_si128(hi, _mm_xor_si128(PRE_AT(c1 * 4 + 2), PRE_AT(c * 4 + 2)));
#else
                for (int w = 0; w < 4; w++) next[w] |= pre[c1 * 4 + w] ^ pre[c * 4 + w];
#endif
                m = c1 < 64 ? m >> c1 << c1 : 0;
            }
#if defined(__SSE2__) && defined(__GNUC__)
#undef PRE_AT
            /* x86 is little-endian: word w's low and high halves are nb[2w] and nb[2w + 1] as they lie */
            _mm_storeu_si128((__m128i *)(void *)nb, lo);
            _mm_storeu_si128((__m128i *)(void *)(nb + 4), hi);
#else
            for (int w = 0; w < 4; w++)
                nb[2 * w] = (uint32_t)next[w], nb[2 * w + 1] = (uint32_t)(next[w] >> 32);
#endif
            continue;
        }
        uint32_t live = UINT32_MAX;  /* the start of the span of runs with targets that c ends, if any */
        for (uint32_t c = 0, c1; c < t->n_classes; c = c1) {  /* a run: one target */
            c1 = cm_run_end(row, c, t->n_classes);
            int32_t n = row[c];
            if (n < 0) {
                if (n < -1) return CM_ERR_ARG;
                if (live != UINT32_MAX)  /* one OR a span of targets, however many runs it has */
                    for (int w = 0; w < 4; w++) next[w] |= pre[c * 4 + w] ^ pre[live * 4 + w];
                live = UINT32_MAX;
                continue;
            }
            /* validate's part: a target in range and in the same rule */
            if (n >= (int64_t)t->n_states || t->state_rule[n] != t->state_rule[s]) return CM_ERR_ARG;
            g->has_bytes[s] = 1;
            if (live == UINT32_MAX) live = c;
        }
        if (live != UINT32_MAX)
            for (int w = 0; w < 4; w++) next[w] |= pre[t->n_classes * 4 + w] ^ pre[live * 4 + w];
        for (int w = 0; w < 4; w++)  /* to the table's 32-bit words, whatever the byte order */
            nb[2 * w] = (uint32_t)next[w], nb[2 * w + 1] = (uint32_t)(next[w] >> 32);
        if (!solo[s] || (accepting[s] && has_bytes[s])) rule_block_out[state_rule[s]] = 0; /* see wrap.c */
    }
    return derive_returns(g);
}

int cm_grammar_rule_block(const cm_grammar *g, uint32_t rule) {
    if (!g || rule >= g->t.n_rules) return -1;
    return g->rule_block[rule];
}

int cm_grammar_state_flags(const cm_grammar *g, uint32_t state, uint64_t *calls) {
    if (!g || !calls || state >= g->t.n_states) return -1;
    *calls = g->calls[state];
    return (g->has_bytes[state] != 0) | (g->simple[state] != 0) << 1 | (g->has_tokens[state] != 0) << 2 |
           (g->plain[state] != 0) << 3 | (g->solo[state] != 0) << 4;
}

int cm_grammar_rule_returns(const cm_grammar *g, uint32_t rule, const uint32_t **states) {
    if (!g || !states || rule >= g->t.n_rules) return -1;
    *states = g->ret_state + g->ret_off[rule];
    return (int)(g->ret_off[rule + 1] - g->ret_off[rule]);
}

int cm_grammar_state_bytes(const cm_grammar *g, uint32_t state, uint32_t out[8]) {
    if (!g || !out || state >= g->t.n_states) return -1;
    memcpy(out, g->next_bytes + (size_t)state * 8, 8 * sizeof *out);
    return g->has_bytes[state];
}

/* Token sets: ids in range; negated sets precomputed as bitsets (all tokens but
 * the listed ones and the stop tokens). */
static int derive_token_sets(cm_grammar *g) {
    const cm_tables *t = &g->t;
    size_t n_neg = 0;
    for (uint32_t i = 0; i < t->set_off[t->n_token_sets]; i++)
        if (t->set_ids[i] >= g->v->n_tokens) return CM_ERR_ARG;
    for (uint32_t k = 0; k < t->n_token_sets; k++) n_neg += t->set_negated[k] != 0;
    if (!n_neg) return CM_OK;
    g->negated_bits = calloc(t->n_token_sets * g->n_words, sizeof *g->negated_bits);
    if (!g->negated_bits) return CM_ERR_NOMEM;
    for (uint32_t k = 0; k < t->n_token_sets; k++) {
        if (!t->set_negated[k]) continue;
        uint32_t *w = g->negated_bits + (size_t)k * g->n_words;
        for (size_t tok = 0; tok < g->v->n_tokens; tok++) w[tok >> 5] |= 1u << (tok & 31);
        for (uint32_t i = t->set_off[k]; i < t->set_off[k + 1]; i++) w[t->set_ids[i] >> 5] &= ~(1u << (t->set_ids[i] & 31));
        for (size_t i = 0; i < g->n_stop; i++) w[g->stop_ids[i] >> 5] &= ~(1u << (g->stop_ids[i] & 31));
    }
    return CM_OK;
}

/* Per lookahead debt, the text tokens that pay it (their first bytes spell an
 * allowed character), and the trie entries that end inside a character still
 * owing it: whether such a token leaves a way on depends on the automaton
 * (debt_payable in earley.c), so mask.c checks them with the real chart. */
static int derive_la_allow(cm_grammar *g) {
    const cm_vocab *v = g->v;
    if (g->t.n_la <= 1) return CM_OK;
    g->la_allow = calloc((size_t)g->t.n_la * g->n_words, sizeof *g->la_allow);
    g->la_pending_off = calloc((size_t)g->t.n_la + 1, sizeof *g->la_pending_off);
    if (!g->la_allow || !g->la_pending_off) return CM_ERR_NOMEM;
    size_t n = 0, cap = 0;
    for (uint32_t la = 1; la < g->t.n_la; la++) {
        uint32_t *w = g->la_allow + (size_t)la * g->n_words;
        g->la_pending_off[la] = (uint32_t)n;
        /* The entries are grouped by first byte (first_off), and the first byte alone settles
         * most debts: a group it pays is allowed whole, one it forbids skipped whole, and only
         * a group left owing (a multi-byte character's lead byte) reads its entries on. */
        for (int b = 0; b < 256; b++) {
            uint32_t d0 = cm_la_next(g, la, (uint8_t)b);
            size_t k = v->first_off[b], k_end = v->first_off[b + 1];
            if (d0 == CM_LA_DEAD) continue;
            if (!d0) {
                for (; k < k_end; k++) w[v->trie_ids[k] >> 5] |= 1u << (v->trie_ids[k] & 31);
                continue;
            }
            for (; k < k_end; k++) {
                uint32_t id = v->trie_ids[k], len, d = d0;
                const uint8_t *p = cm_trie_bytes(v, k, &len);
                for (uint32_t i = 1; i < len && d && d != CM_LA_DEAD; i++) d = cm_la_next(g, d, p[i]);
                if (!d) {
                    w[id >> 5] |= 1u << (id & 31);
                } else if (d != CM_LA_DEAD) {
                    if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        uint32_t *q = realloc(g->la_pending, cap * sizeof *q);
                        if (!q) return CM_ERR_NOMEM;
                        g->la_pending = q;
                    }
                    g->la_pending[n++] = (uint32_t)k;
                }
            }
        }
    }
    g->la_pending_off[g->t.n_la] = (uint32_t)n;
    return CM_OK;
}

/* facts: what derive finds given (cm_grammar_new_facts), or NULL */
static int grammar_new(const cm_tables *t, const uint8_t *facts, const cm_vocab *v, const uint32_t *stop_ids,
                       size_t n_stop, const cm_limits *limits, bool borrow, cm_grammar **out) {
    if (!t || !v || !out || (n_stop && !stop_ids) || ((uintptr_t)facts & 7)) return CM_ERR_ARG;
    *out = NULL;
    uint64_t t0 = cm_stats_now();
    int rc = validate(t);
    if (rc) return rc;
    for (size_t i = 0; i < n_stop; i++)
        if (stop_ids[i] >= v->n_tokens) return CM_ERR_ARG;
    cm_grammar *g = calloc(1, sizeof *g);
    if (!g) return CM_ERR_NOMEM;
    g->v = v;
    g->n_words = (v->n_tokens + 31) / 32;
    if (limits) g->lim = *limits;
    else cm_limits_default(&g->lim);
    g->stop_ids = malloc((n_stop ? n_stop : 1) * sizeof *g->stop_ids);
    rc = g->stop_ids ? CM_OK : CM_ERR_NOMEM;
    if (n_stop && !rc) memcpy(g->stop_ids, stop_ids, n_stop * sizeof *stop_ids);
    g->n_stop = n_stop;
    if (!rc) rc = borrow ? borrow_tables(g, t) : copy_tables(g, t);
    if (!rc) rc = derive(g, facts);
    if (!rc) rc = derive_token_sets(g);
    if (!rc) rc = derive_la_allow(g);
    if (!rc) rc = cm_cache_new(g, &g->cache);
    cm_stats_add(CM_PH_GRAMMAR, t0);
    if (rc) {
        cm_grammar_free(g);
        return rc;
    }
    *out = g;
    return CM_OK;
}

int cm_grammar_new(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids, size_t n_stop,
                   const cm_limits *limits, cm_grammar **out) {
    return grammar_new(t, NULL, v, stop_ids, n_stop, limits, false, out);
}

int cm_grammar_new_borrowed(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids, size_t n_stop,
                            const cm_limits *limits, cm_grammar **out) {
    return grammar_new(t, NULL, v, stop_ids, n_stop, limits, true, out);
}

int cm_grammar_new_facts(const cm_tables *t, const uint8_t *facts, const cm_vocab *v, const uint32_t *stop_ids,
                         size_t n_stop, const cm_limits *limits, cm_grammar **out) {
    if (!facts) return CM_ERR_ARG;
    return grammar_new(t, facts, v, stop_ids, n_stop, limits, true, out);
}

void cm_grammar_free(cm_grammar *g) {
    if (!g) return;
    cm_cache_free(g->cache);
    if (!g->facts_borrowed) {
        free(g->has_bytes);
        free(g->simple);
        free(g->has_tokens);
        free(g->plain);
        free(g->solo);
        free(g->calls);
        free(g->next_bytes);
        free(g->rule_block);
    }
    free(g->ret_off);
    free(g->ret_state);
    free(g->negated_bits);
    free(g->la_allow);
    free(g->la_pending_off);
    free(g->la_pending);
    free(g->stop_ids);
    free(g->state_seg);
    free(g->edge_flags);
    free(g->seg_lo);
    free(g->seg_hi);
    free(g->seg_head);
    free(g->blob);
    free(g);
}

/* validate, for tables that are not a grammar's (segments.c). */
int cm_tables_validate(const cm_tables *t) { return t ? validate(t) : CM_ERR_ARG; }
