/* Compiled grammar: validated copies of the automaton tables, and the lazily
 * filled, thread-safe mask cache (one entry per automaton state that scans). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void cm_limits_default(cm_limits *out) {
    out->max_items_per_set = 200000;
    out->max_chart_items = 50000000;
    out->max_cache_bytes = (size_t)2 << 30;
    out->direct_walk_states = 33;
    out->index_min_items = 32;
    out->mask_memo_min_items = 64;
    out->mask_memo_min_candidates = 1024;
    out->share_loop_walks = 1;
    out->filter_uncertain = 1;
    out->compose_entries = 1;
    out->flat_walks = 1;
    out->wrap_repeats = 256;
}

static int validate_tokens(const cm_tables *t) {
    if (!t->tok_off || !t->set_off || t->tok_off[0] != 0 || t->set_off[0] != 0) return CM_ERR_ARG;
    for (uint32_t s = 0; s < t->n_states; s++)
        if (t->tok_off[s + 1] < t->tok_off[s]) return CM_ERR_ARG;
    uint32_t n_edges = t->tok_off[t->n_states];
    if (n_edges && (!t->tok_set || !t->tok_target)) return CM_ERR_ARG;
    for (uint32_t s = 0; s < t->n_states; s++) {
        for (uint32_t e = t->tok_off[s]; e < t->tok_off[s + 1]; e++) {
            if (t->tok_set[e] >= t->n_token_sets || t->tok_target[e] >= t->n_states) return CM_ERR_ARG;
            if (t->state_rule[t->tok_target[e]] != t->state_rule[s]) return CM_ERR_ARG;
        }
    }
    for (uint32_t k = 0; k < t->n_token_sets; k++)
        if (t->set_off[k + 1] <= t->set_off[k]) return CM_ERR_ARG;
    if (t->n_token_sets && (!t->set_ids || !t->set_negated)) return CM_ERR_ARG;
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
        if (t->state_rule[s] >= t->n_rules || t->ref_off[s + 1] < t->ref_off[s]) return CM_ERR_ARG;
        for (uint32_t c = 0; c < t->n_classes; c++) {
            int32_t n = t->trans[(size_t)s * t->n_classes + c];
            if (n < -1 || n >= (int64_t)t->n_states) return CM_ERR_ARG;
            if (n >= 0 && t->state_rule[n] != t->state_rule[s]) return CM_ERR_ARG;
        }
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

/* Per rule, the distinct states its callers go on in after it completes. */
static int derive_returns(cm_grammar *g) {
    const cm_tables *t = &g->t;
    size_t ne = t->ref_off[t->n_states];
    g->ret_off = calloc((size_t)t->n_rules + 1, sizeof *g->ret_off);
    g->ret_state = malloc((ne ? ne : 1) * sizeof *g->ret_state);
    uint32_t *fill = calloc(t->n_rules ? t->n_rules : 1, sizeof *fill);
    if (!g->ret_off || !g->ret_state || !fill) {
        free(fill);
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
        uint32_t lo = g->ret_off[r], n = fill[r] ? (uint32_t)cm_sort_unique_u32(g->ret_state + lo, fill[r]) : 0;
        memmove(g->ret_state + w, g->ret_state + lo, n * sizeof *g->ret_state);
        g->ret_off[r] = w;
        w += n;
    }
    g->ret_off[t->n_rules] = w;
    free(fill);
    return CM_OK;
}

static int derive(cm_grammar *g) {
    const cm_tables *t = &g->t;
    g->has_bytes = calloc(t->n_states, 1);
    g->simple = calloc(t->n_states, 1);
    g->has_tokens = calloc(t->n_states, 1);
    g->calls = calloc(t->n_states, sizeof *g->calls);
    g->next_bytes = calloc((size_t)t->n_states * 8, sizeof *g->next_bytes);
    g->cache = calloc(t->n_states, sizeof *g->cache);
    g->plain = calloc(t->n_states ? t->n_states : 1, 1);
    g->solo = calloc(t->n_states ? t->n_states : 1, 1);
    if (!g->solo) return CM_ERR_NOMEM;
    g->building = calloc(t->n_states ? t->n_states : 1, 1);
    g->rule_block = malloc(t->n_rules ? t->n_rules : 1);
    if (!g->plain || !g->building || !g->rule_block) return CM_ERR_NOMEM;
    memset(g->rule_block, 1, t->n_rules ? t->n_rules : 1);
    g->loop_lab = malloc((t->n_states ? t->n_states : 1) * sizeof *g->loop_lab);
    g->loops = calloc(CM_LOOP_BUCKETS, sizeof *g->loops);
    if (!g->loop_lab || !g->loops) return CM_ERR_NOMEM;
    memset(g->loop_lab, 0xff, (t->n_states ? t->n_states : 1) * sizeof *g->loop_lab);
    if (!g->has_bytes || !g->simple || !g->has_tokens || !g->calls || !g->next_bytes || !g->cache) return CM_ERR_NOMEM;
    uint32_t class_bytes[256 * 8] = {0};  /* the bytes of each class */
    for (int b = 0; b < 256; b++) class_bytes[t->byte_class[b] * 8 + (b >> 5)] |= 1u << (b & 31);
    for (uint32_t s = 0; s < t->n_states; s++) {
        g->simple[s] = !t->accepting[s] && t->ref_off[s] == t->ref_off[s + 1];
        g->plain[s] = g->simple[s] && t->tok_off[s] == t->tok_off[s + 1];
        g->solo[s] = t->ref_off[s] == t->ref_off[s + 1] && t->tok_off[s] == t->tok_off[s + 1];
        g->has_tokens[s] = t->tok_off[s] < t->tok_off[s + 1];
        for (uint32_t e = t->ref_off[s]; e < t->ref_off[s + 1]; e++) g->calls[s] |= 1ull << (t->ref_rule[e] & 63);
        for (uint32_t c = 0; c < t->n_classes; c++) {
            if (t->trans[(size_t)s * t->n_classes + c] < 0) continue;
            g->has_bytes[s] = 1;
            for (int w = 0; w < 8; w++) g->next_bytes[(size_t)s * 8 + w] |= class_bytes[c * 8 + w];
        }
    }
    for (uint32_t s = 0; s < t->n_states; s++)  /* see wrap_split */
        if (!g->solo[s] || (t->accepting[s] && g->has_bytes[s])) g->rule_block[t->state_rule[s]] = 0;
    return derive_returns(g);
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

bool cm_token_in_set(const cm_grammar *g, uint32_t k, uint32_t token) {
    const cm_tables *t = &g->t;
    if (t->set_negated[k]) return cm_bit(g->negated_bits + (size_t)k * g->n_words, token);
    for (uint32_t i = t->set_off[k]; i < t->set_off[k + 1]; i++)
        if (t->set_ids[i] == token) return true;
    return false;
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
        for (size_t k = 0; k < v->n_trie; k++) {
            uint32_t id = v->trie_ids[k], len, d = la;
            const uint8_t *p = cm_trie_bytes(v, k, &len);
            for (uint32_t i = 0; i < len && d && d != CM_LA_DEAD; i++) d = cm_la_next(g, d, p[i]);
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
    g->la_pending_off[g->t.n_la] = (uint32_t)n;
    return CM_OK;
}

int cm_grammar_new(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids, size_t n_stop,
                   const cm_limits *limits, cm_grammar **out) {
    if (!t || !v || !out || (n_stop && !stop_ids)) return CM_ERR_ARG;
    *out = NULL;
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
    if (!g->stop_ids || pthread_mutex_init(&g->lock, NULL)) {
        free(g->stop_ids);
        free(g);
        return CM_ERR_NOMEM;
    }
    if (pthread_mutex_init(&g->mlock, NULL)) {
        pthread_mutex_destroy(&g->lock);
        free(g->stop_ids);
        free(g);
        return CM_ERR_NOMEM;
    }
    if (n_stop) memcpy(g->stop_ids, stop_ids, n_stop * sizeof *stop_ids);
    g->n_stop = n_stop;
    rc = copy_tables(g, t);
    if (!rc) rc = derive(g);
    if (!rc) rc = derive_token_sets(g);
    if (!rc) rc = derive_la_allow(g);
    if (rc) {
        cm_grammar_free(g);
        return rc;
    }
    *out = g;
    return CM_OK;
}

void cm_entry_free(cm_entry *e) {
    if (!e) return;
    free(e->accepted_ids);
    free(e->accepted_bits);
    free(e->uncertain);
    free(e->wrap_bits);
    free(e->rest);
    free(e);
}

static void free_loops(cm_grammar *g);
static void flat_free(cm_flat *f);

void cm_grammar_free(cm_grammar *g) {
    if (!g) return;
    for (size_t i = 0; i < g->entries_cap; i++) cm_entry_free(g->entries[i]);  /* cache[] shares them */
    free(g->entries);
    free(g->cache);
    free(g->has_bytes);
    free(g->simple);
    free(g->has_tokens);
    free(g->negated_bits);
    free(g->calls);
    free(g->next_bytes);
    free_loops(g);
    free(g->loop_lab);
    free(g->plain);
    free(g->solo);
    flat_free(g->flat);
    free(g->building);
    free(g->rule_block);
    free(g->la_allow);
    free(g->la_pending_off);
    free(g->la_pending);
    free(g->ret_off);
    free(g->ret_state);
    free(g->stop_ids);
    free(g->blob);
    if (g->mslots)
        for (size_t i = 0; i < CM_MEMO_MASKS; i++) {
            free(g->mslots[i].sig);
            free(g->mslots[i].words);
        }
    free(g->mslots);
    pthread_mutex_destroy(&g->lock);
    pthread_mutex_destroy(&g->mlock);
    free(g);
}

/* ---- building one cache entry: a walk of the token trie ------------------ */

typedef struct walk {
    uint32_t *bits;             /* accepted tokens, [n_words] */
    uint32_t n_accepted;
    uint32_t *unc;
    size_t n_unc, cap_unc;
} walk;

static int push_uncertain(walk *w, uint32_t k) {
    if (w->n_unc == w->cap_unc) {
        size_t n = w->cap_unc ? w->cap_unc * 2 : 64;
        uint32_t *p = realloc(w->unc, n * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        w->unc = p;
        w->cap_unc = n;
    }
    w->unc[w->n_unc++] = k;
    return CM_OK;
}

static inline bool follows(const cm_tables *t, uint32_t rule, uint8_t b) {
    return (t->rule_follow[(size_t)rule * 8 + (b >> 5)] >> (b & 31)) & 1u;
}

/* Walk the trie from an item at `state` whose caller is unknown (origin
 * CM_OUTER), with a private Earley chart: calls made along the way are known,
 * so only completing the item's own rule depends on the context.
 *   - all of a token's bytes scanned, chart alive   -> accepted, whatever the stack;
 *   - dies after the rule could complete at depth >= 1 with the next byte in
 *     FOLLOW(rule)                                     -> uncertain (checked at run time);
 *   - otherwise                                        -> rejected.
 * Completing at depth 0 needs no check: that continuation is another item of
 * the same Earley set.  Entries sharing a dead prefix share its fate. */
static int walk_range(const cm_grammar *g, const uint32_t *states, uint32_t n_states, uint32_t rule, size_t k,
                      size_t k_end, uint32_t d0, uint8_t f0, int ex0, walk *w, uint8_t *ex, uint8_t *fl) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    cm_chart c;
    int rc = cm_chart_init_items(&c, g, states, n_states);
    /* an exit at depth 0 is another item of the same set; deeper, it is an exit
     * (ex0 >= 0: the exit of the set the items were taken from) */
    ex[d0] = d0 ? (ex0 >= 0 ? (uint8_t)ex0 : c.exited) : 0;
    fl[d0] = f0;  /* an exit before d0 (walk_from's) */
    while (k < k_end && !rc) {
        uint32_t len, d = v->trie_lcp[k] > d0 ? v->trie_lcp[k] : d0, dead_at = 0;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint8_t f = 0;
        cm_chart_truncate(&c, (size_t)(d - d0) + 1);
        for (; d < len; d++) {
            f = fl[d] | (ex[d] && follows(t, rule, p[d]));
            int r = cm_chart_scan(&c, g, p[d]);
            if (r <= 0) {
                rc = r;
                dead_at = d + 1;
                break;
            }
            ex[d + 1] = c.exited;
            fl[d + 1] = f;
        }
        if (rc) break;
        if (!dead_at) {
            uint32_t id = v->trie_ids[k++];
            w->bits[id >> 5] |= 1u << (id & 31);
            w->n_accepted++;
            continue;
        }
        /* every entry sharing the dead prefix shares its fate */
        size_t end = v->skip[v->trie_off[k] + dead_at - 1];
        for (; f && k < end && !rc; k++) rc = push_uncertain(w, (uint32_t)k);
        k = end;
    }
    cm_chart_free(&c);
    return rc;
}

static inline bool plain_state(const cm_grammar *g, int32_t s) {
    return s >= 0 && g->plain[s];
}

/* ---- the DFA of flat private charts -----------------------------------------
 * Inside a name, a string or a keyword, the private chart of a walk holds only
 * items waiting on the unknown caller (origin CM_OUTER), plus lookahead
 * markers predicted and completed in the same set, which never scan.  Such a
 * set is *flat*: what it does with the next byte depends only on its items
 * that read bytes (packed states, debts included) and on whether it exited.
 * Interned as a configuration, the next byte's set is computed once with a
 * real chart and then looked up: a walk through names costs a table lookup a
 * trie node instead of an Earley step.  A set that predicts a real rule (or
 * reads token edges) is not flat; the walk then runs the chart from the
 * configuration's items for that subtree.  Built under the grammar's lock. */
#define CM_FLAT_MAX 16384       /* configurations; past it, charts take over */
#define CM_FLAT_UNKNOWN (-2)
#define CM_FLAT_DEAD (-1)
#define CM_FLAT_CHART (-3)      /* not flat: a chart from here */

struct cm_flat {
    uint32_t n, cap;
    uint32_t *off;              /* [cap + 1] items of configuration i: items[off[i] .. off[i+1]) */
    uint32_t *items;
    size_t n_items, cap_items;
    uint8_t *exited;            /* [cap] */
    int32_t *next;              /* [cap * width], by column */
    uint32_t width;
    uint8_t col[256];           /* byte -> column: bytes of one class that every lookahead
                                   debt also treats alike (debts read bytes, not classes) */
    uint32_t *slots;            /* open addressing, id + 1, [hcap] */
    uint64_t *hashes;           /* [cap] */
    size_t hcap;
    cm_chart chart;             /* scratch for computing a transition */
    bool chart_ok;
    uint32_t *tmp;
    size_t cap_tmp;
};

static void flat_free(cm_flat *f) {
    if (!f) return;
    free(f->off);
    free(f->items);
    free(f->exited);
    free(f->next);
    free(f->slots);
    free(f->hashes);
    free(f->tmp);
    if (f->chart_ok) cm_chart_free(&f->chart);
    free(f);
}

static uint64_t flat_hash(const uint32_t *it, size_t n, bool exited) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n ^ ((uint64_t)exited << 40);
    for (size_t i = 0; i < n; i++) h = (h ^ it[i]) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    return h;
}

/* The id of the configuration (sorted items, exited), added if new;
 * CM_FLAT_CHART when the table is full, < CM_FLAT_CHART on error. */
static int32_t flat_intern(cm_grammar *g, cm_flat *f, const uint32_t *it, size_t n, bool exited) {
    uint64_t h = flat_hash(it, n, exited);
    size_t mask = f->hcap - 1, s = h & mask;
    for (; f->slots[s]; s = (s + 1) & mask) {
        uint32_t id = f->slots[s] - 1;
        if (f->hashes[id] == h && f->exited[id] == exited && f->off[id + 1] - f->off[id] == n &&
            (!n || !memcmp(f->items + f->off[id], it, n * sizeof *it)))
            return (int32_t)id;
    }
    if (f->n == CM_FLAT_MAX) return CM_FLAT_CHART;
    if (f->n == f->cap) {
        uint32_t cap = f->cap * 2;
        uint32_t *off = realloc(f->off, ((size_t)cap + 1) * sizeof *off);
        if (off) f->off = off;
        uint8_t *ex = realloc(f->exited, cap);
        if (ex) f->exited = ex;
        int32_t *nx = realloc(f->next, (size_t)cap * f->width * sizeof *nx);
        if (nx) f->next = nx;
        uint64_t *hs = realloc(f->hashes, (size_t)cap * sizeof *hs);
        if (hs) f->hashes = hs;
        if (!off || !ex || !nx || !hs) return CM_ERR_NOMEM - 8;
        f->cap = cap;
    }
    if (f->n_items + n > f->cap_items) {
        size_t cap = (f->n_items + n) * 2;
        uint32_t *p = realloc(f->items, cap * sizeof *p);
        if (!p) return CM_ERR_NOMEM - 8;
        f->items = p;
        f->cap_items = cap;
    }
    if ((size_t)(f->n + 1) * 2 > f->hcap) {
        size_t hcap = f->hcap * 2;
        uint32_t *sl = calloc(hcap, sizeof *sl);
        if (!sl) return CM_ERR_NOMEM - 8;
        for (uint32_t i = 0; i < f->n; i++) {
            size_t j = f->hashes[i] & (hcap - 1);
            while (sl[j]) j = (j + 1) & (hcap - 1);
            sl[j] = i + 1;
        }
        free(f->slots);
        f->slots = sl;
        f->hcap = hcap;
        mask = hcap - 1;
        for (s = h & mask; f->slots[s]; s = (s + 1) & mask) {
        }
    }
    uint32_t id = f->n++;
    if (n) memcpy(f->items + f->n_items, it, n * sizeof *it);
    f->off[id] = (uint32_t)f->n_items;
    f->n_items += n;
    f->off[id + 1] = (uint32_t)f->n_items;
    f->exited[id] = exited;
    f->hashes[id] = h;
    for (uint32_t b = 0; b < f->width; b++) f->next[(size_t)id * f->width + b] = CM_FLAT_UNKNOWN;
    f->slots[s] = id + 1;
    atomic_fetch_add(&g->cache_bytes, f->width * 4 + n * 4 + 16);
    return (int32_t)id;
}

/* The configuration of the chart's last set: its id, CM_FLAT_CHART if the
 * set is not flat, < CM_FLAT_CHART on error. */
static int32_t flat_of_set(cm_grammar *g, cm_flat *f, const cm_chart *c) {
    size_t last = c->n_sets - 1, n = 0;
    size_t lo = c->set_start[last], hi = c->set_start[last + 1];
    if (hi - lo > f->cap_tmp) {
        uint32_t *p = realloc(f->tmp, (hi - lo) * sizeof *p);
        if (!p) return CM_ERR_NOMEM - 8;
        f->tmp = p;
        f->cap_tmp = hi - lo;
    }
    for (size_t i = lo; i < hi; i++) {
        cm_item it = c->items[i];
        uint32_t st = cm_st(it.state);
        if (g->has_tokens[st]) return CM_FLAT_CHART;
        if (it.origin == CM_OUTER) {
            if (g->has_bytes[st]) f->tmp[n++] = it.state;
        } else if (it.origin != last || g->has_bytes[st] || g->t.ref_off[st] < g->t.ref_off[st + 1]) {
            return CM_FLAT_CHART;  /* a predicted rule that may still read: not flat */
        }
    }
    n = n ? cm_sort_unique_u32(f->tmp, n) : 0;
    return flat_intern(g, f, f->tmp, n, c->exited);
}

/* The columns of the flat DFA: bytes that share their class and, for every
 * lookahead debt, what the debt becomes after them (a scan depends on nothing
 * else of the byte: later sets of a flat walk read no byte of this one). */
static void flat_columns(const cm_grammar *g, cm_flat *f) {
    const cm_tables *t = &g->t;
    int16_t first[256];  /* the first byte of each column */
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t c = 0;
        for (; c < n; c++) {
            int a = first[c];
            if (t->byte_class[a] != t->byte_class[b]) continue;
            uint32_t la = 1;
            while (la < t->n_la && t->la_next[(size_t)la * 256 + a] == t->la_next[(size_t)la * 256 + b]) la++;
            if (la == t->n_la) break;
        }
        if (c == n) first[n++] = (int16_t)b;
        f->col[b] = (uint8_t)c;
    }
    f->width = n;
}

static cm_flat *flat_get(cm_grammar *g) {
    if (g->flat) return g->flat;
    cm_flat *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->cap = 64;
    f->hcap = 256;
    flat_columns(g, f);
    f->off = malloc((f->cap + 1) * sizeof *f->off);
    f->exited = malloc(f->cap);
    f->next = malloc((size_t)f->cap * f->width * sizeof *f->next);
    f->hashes = malloc(f->cap * sizeof *f->hashes);
    f->slots = calloc(f->hcap, sizeof *f->slots);
    if (!f->off || !f->exited || !f->next || !f->hashes || !f->slots) {
        flat_free(f);
        return NULL;
    }
    f->off[0] = 0;
    g->flat = f;
    return f;
}

/* The configuration of the closure of (state, OUTER), or CM_FLAT_CHART. */
static int32_t flat_start(cm_grammar *g, cm_flat *f, uint32_t state) {
    int rc;
    if (!f->chart_ok) {
        rc = cm_chart_init_items(&f->chart, g, &state, 1);
        f->chart_ok = rc == CM_OK;
    } else {
        rc = cm_chart_reset_items(&f->chart, g, &state, 1);
    }
    if (rc) return rc - 8;
    return flat_of_set(g, f, &f->chart);
}

/* The transition of configuration id on byte b, computed with the scratch chart. */
static int32_t flat_step(cm_grammar *g, cm_flat *f, uint32_t id, uint8_t b) {
    int rc = cm_chart_reset_items(&f->chart, g, f->items + f->off[id], f->off[id + 1] - f->off[id]);
    if (rc) return rc - 8;
    int r = cm_chart_scan(&f->chart, g, b);
    if (r < 0) return r - 8;
    int32_t to = r == 0 ? CM_FLAT_DEAD : flat_of_set(g, f, &f->chart);
    if (to >= CM_FLAT_CHART) f->next[(size_t)id * f->width + f->col[b]] = to;
    return to;
}

/* walk_range, but through flat charts with their DFA, and a chart only from
 * the first set that is not flat, for that subtree (see above). */
static int walk_from(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end,
                     uint32_t d0, walk *w, uint8_t *ex, uint8_t *fl, uint32_t *st) {
    cm_grammar *mg = (cm_grammar *)g;
    cm_flat *f = g->lim.flat_walks ? flat_get(mg) : NULL;
    int32_t c0 = f ? flat_start(mg, f, state) : CM_FLAT_CHART;
    if (c0 < CM_FLAT_CHART) return c0 + 8;
    if (c0 == CM_FLAT_CHART) return walk_range(g, &state, 1, rule, k, k_end, d0, 0, -1, w, ex, fl);
    const cm_vocab *v = g->v;
    const cm_tables *t = &g->t;
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    const uint32_t *lcp = v->trie_lcp, *ids = v->trie_ids, *skip = v->skip;
    const uint8_t *col = f->col;
    const size_t width = f->width;
    /* the tables move only when flat_step adds a configuration */
    const int32_t *next = f->next;
    const uint8_t *exited = f->exited;
    uint32_t *bits = w->bits, n_acc = 0;
    int rc = CM_OK;
    st[d0] = (uint32_t)c0;
    ex[d0] = d0 ? exited[c0] : 0;  /* an exit at depth 0 is another item of the same set */
    fl[d0] = 0;
    while (k < k_end && !rc) {
        uint32_t d = lcp[k] > d0 ? lcp[k] : d0, len = (uint32_t)(off[k + 1] - off[k]);
        const uint8_t *p = data + off[k];
        for (; d < len; d++) {
            uint8_t fd = fl[d] | (ex[d] && follows(t, rule, p[d]));
            int32_t to = next[(size_t)st[d] * width + col[p[d]]];
            if (to == CM_FLAT_UNKNOWN) {
                to = flat_step(mg, f, st[d], p[d]);
                next = f->next;
                exited = f->exited;
            }
            if (to >= 0) {
                st[d + 1] = (uint32_t)to;
                ex[d + 1] = exited[to];
                fl[d + 1] = fd;
                continue;
            }
            if (to < CM_FLAT_CHART) {
                rc = to + 8;
                break;
            }
            size_t end = skip[off[k] + d];
            if (to == CM_FLAT_CHART) {
                uint32_t a = f->off[st[d]], n = f->off[st[d] + 1] - a;
                rc = walk_range(g, f->items + a, n, rule, k, end, d, fl[d], ex[d], w, ex, fl);
            }
            for (; to == CM_FLAT_DEAD && fd && k < end && !rc; k++) rc = push_uncertain(w, (uint32_t)k);
            k = end;
            break;
        }
        if (!rc && d == len) {
            uint32_t id = ids[k++];
            bits[id >> 5] |= 1u << (id & 31);
            n_acc++;
        }
    }
    w->n_accepted += n_acc;
    return rc;
}

/* ---- walks shared by equal loops ----------------------------------------
 * Most of a trie walk is spent inside a loop of plain states (the inside of a
 * string, a name, whitespace): not accepting, calling nothing, so the private
 * chart is one item.  Copies of one terminal inlined in many rules have equal
 * loops (same transitions inside, different states where they leave), and
 * every token that stays inside has the same fate.  So the walk of a state in
 * such a loop (its strongly connected component of plain states) is split:
 *   - shared, keyed by the loop's canonical form (states numbered breadth
 *     first from the entry state, each transition inside / out / dead): a DFA
 *     walk of the trie recording tokens that end inside (accepted) and each
 *     trie subtree whose prefix leaves the loop (loop state, byte, depth);
 *   - per state: each recorded exit continued with the private chart from the
 *     state the byte leads to, over that subtree only.
 * Same classification as walk_trie: inside the loop nothing can complete, so
 * no exit flag is raised before the first byte out of it. */
#define CM_LOOP_MAX 254 /* labels fit a byte beside two codes */

typedef struct cm_loop_exit {
    uint32_t k, k_end, depth, label;
    uint8_t byte;
} cm_loop_exit;

struct cm_loop_walk {
    uint64_t hash;
    uint32_t n_sig;
    uint32_t *sig;
    uint32_t *bits;             /* tokens that end inside the loop */
    uint32_t n_accepted;
    cm_loop_exit *exits;
    size_t n_exits;
    struct cm_loop_walk *next;
};

#define LOOP_DEAD UINT32_MAX
#define LOOP_OUT (UINT32_MAX - 1)

/* The loop of `state`: the plain states that lie on a cycle through it of at
 * most CM_LOOP_REACH transitions each way (the inside of a string with its
 * escapes; not the cycle of a whole object, which would make every loop
 * unique).  Its states in canonical order into ls (n returned, 0 = none or too
 * big), its signature into *sig.  g->loop_lab (all UINT32_MAX between calls)
 * maps states to labels meanwhile; the caller resets it with reset_labels. */
#define CM_LOOP_REACH 3

static uint32_t find_loop(const cm_grammar *g, uint32_t state, uint32_t *ls, uint32_t **sig, uint64_t *hash) {
    const cm_tables *t = &g->t;
    uint32_t *lab = ((cm_grammar *)g)->loop_lab;
    uint32_t nc = t->n_classes, n = 0;
    *sig = NULL;
    if (!plain_state(g, (int32_t)state)) return 0;
    /* forward: plain states within CM_LOOP_REACH transitions (lab = index in fw) */
    uint32_t *fw = malloc(CM_LOOP_MAX * 4 * sizeof *fw);
    uint8_t *fd = malloc(CM_LOOP_MAX * 4), *bd = NULL;
    if (!fw || !fd) {
        free(fw);
        free(fd);
        return 0;
    }
    uint32_t nf = 0;
    fw[nf] = state;
    fd[nf] = 0;
    lab[state] = nf++;
    for (uint32_t i = 0; i < nf; i++) {
        if (fd[i] == CM_LOOP_REACH) continue;
        const int32_t *row = t->trans + (size_t)fw[i] * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t to = row[c];
            if (!plain_state(g, to) || lab[to] != UINT32_MAX) continue;
            if (nf == CM_LOOP_MAX * 4) goto give_up;
            fw[nf] = (uint32_t)to;
            fd[nf] = (uint8_t)(fd[i] + 1);
            lab[to] = nf++;
        }
    }
    /* backward within that set: bd[i] = transitions from fw[i] back to state */
    bd = malloc(nf);
    if (!bd) goto give_up;
    for (uint32_t i = 0; i < nf; i++) bd[i] = fw[i] == state ? 0 : 0xff;
    for (uint32_t h = 1; h <= CM_LOOP_REACH; h++)
        for (uint32_t i = 0; i < nf; i++) {
            if (bd[i] != 0xff) continue;
            const int32_t *row = t->trans + (size_t)fw[i] * nc;
            for (uint32_t c = 0; c < nc && bd[i] == 0xff; c++) {
                int32_t to = row[c];
                if (to < 0 || lab[to] == UINT32_MAX) continue;
                if (bd[lab[to]] < h) bd[i] = (uint8_t)h;
            }
        }
    for (uint32_t i = 0; i < nf; i++) lab[fw[i]] = bd[i] != 0xff ? UINT32_MAX - 2 : UINT32_MAX;
    free(bd);
    free(fd);
    fd = NULL;
    /* canonical numbering, breadth first by class */
    ls[n] = state;
    lab[state] = n++;
    bool looped = false;
    uint32_t *s = malloc((size_t)CM_LOOP_MAX * nc * sizeof *s);
    if (!s) goto give_up;
    for (uint32_t i = 0; i < n; i++) {
        const int32_t *row = t->trans + (size_t)ls[i] * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t to = row[c];
            uint32_t code;
            if (to < 0) {
                code = LOOP_DEAD;
            } else if (lab[to] == UINT32_MAX - 2) {
                if (n == CM_LOOP_MAX) {
                    free(s);
                    goto give_up;
                }
                ls[n] = (uint32_t)to;
                lab[to] = code = n++;
            } else if (lab[to] < CM_LOOP_MAX) {
                code = lab[to];
            } else {
                code = LOOP_OUT;
            }
            looped |= code < CM_LOOP_MAX;
            s[(size_t)i * nc + c] = code;
        }
    }
    for (uint32_t i = 0; i < nf; i++)
        if (lab[fw[i]] == UINT32_MAX - 2) lab[fw[i]] = UINT32_MAX;
    free(fw);
    if (!looped) {
        free(s);
        return n;  /* caller resets labels; no loop, no sharing */
    }
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < (size_t)n * nc; i++) h = (h ^ s[i]) * 0xbf58476d1ce4e5b9ULL;
    *hash = h ^ (h >> 29);
    *sig = s;
    return n;
give_up:
    for (uint32_t i = 0; i < nf; i++) lab[fw[i]] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) lab[ls[i]] = UINT32_MAX;
    free(fw);
    free(fd);
    return 0;
}

static void reset_labels(const cm_grammar *g, const uint32_t *ls, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) g->loop_lab[ls[i]] = UINT32_MAX;
}

static int push_exit(cm_loop_walk *lw, size_t *cap, cm_loop_exit x) {
    if (lw->n_exits == *cap) {
        size_t n = *cap ? *cap * 2 : 64;
        cm_loop_exit *p = realloc(lw->exits, n * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        lw->exits = p;
        *cap = n;
    }
    lw->exits[lw->n_exits++] = x;
    return CM_OK;
}

/* The shared DFA walk of a loop (labels of g->loop_lab are set for ls). */
static int loop_walk(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, cm_loop_walk *lw) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    const uint32_t *lab = g->loop_lab;
    /* the loop as a byte-indexed table of labels (small: stays in L1) */
    enum { OUT = 254, DEAD = 255 };
    uint8_t *tab = malloc((size_t)n_loop * 256);
    uint8_t *st = malloc((size_t)v->max_len + 1);
    lw->bits = calloc(g->n_words ? g->n_words : 1, sizeof *lw->bits);
    if (!tab || !st || !lw->bits) {
        free(tab);
        free(st);
        return CM_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < n_loop; i++)
        for (int b = 0; b < 256; b++) {
            int32_t to = t->trans[(size_t)ls[i] * t->n_classes + t->byte_class[b]];
            tab[(size_t)i * 256 + b] = to < 0 ? DEAD : lab[to] < n_loop ? (uint8_t)lab[to] : OUT;
        }
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    const uint32_t *lcp = v->trie_lcp, *ids = v->trie_ids, *skip = v->skip;
    uint32_t *bits = lw->bits, n_acc = 0;
    size_t cap = 0, k = 0;
    int rc = CM_OK;
    st[0] = 0;
    while (k < v->n_trie && !rc) {
        uint32_t d = lcp[k], len = (uint32_t)(off[k + 1] - off[k]);
        const uint8_t *p = data + off[k];
        for (; d < len; d++) {
            uint8_t to = tab[(size_t)st[d] * 256 + p[d]];
            if (to < OUT) {
                st[d + 1] = to;
                continue;
            }
            size_t end = skip[off[k] + d];
            if (to == OUT) rc = push_exit(lw, &cap, (cm_loop_exit){(uint32_t)k, (uint32_t)end, d, st[d], p[d]});
            k = end;
            break;
        }
        if (d == len) {
            uint32_t id = ids[k++];
            bits[id >> 5] |= 1u << (id & 31);
            n_acc++;
        }
    }
    lw->n_accepted = n_acc;
    free(tab);
    free(st);
    return rc;
}

static void loop_walk_free(cm_loop_walk *lw) {
    if (!lw) return;
    free(lw->sig);
    free(lw->bits);
    free(lw->exits);
    free(lw);
}

void cm_loop_walks_free(cm_loop_walk **buckets) {
    if (!buckets) return;
    for (size_t b = 0; b < CM_LOOP_BUCKETS; b++)
        for (cm_loop_walk *lw = buckets[b], *nx; lw; lw = nx) {
            nx = lw->next;
            loop_walk_free(lw);
        }
    free(buckets);
}

static void free_loops(cm_grammar *g) {
    cm_loop_walks_free(g->loops);
    g->loops = NULL;
}

/* ---- loop walks shared by grammars ------------------------------------------
 * A loop walk depends only on the vocabulary and on where each byte leads from
 * each loop state (inside, out, dead): its byte-level form, unlike the
 * grammar-level key, which is by the grammar's own byte classes.  The
 * vocabulary keeps walks by that form for every grammar compiled for it, up to
 * CM_VOCAB_LOOP_BYTES, so a JSON string's inside is walked once per process. */
#define CM_VOCAB_LOOP_BYTES ((size_t)64 << 20)

/* The loop's byte-level form: its states numbered breadth first from the entry
 * by byte (not by the grammar's classes, whose numbering differs between
 * grammars), each byte's code inside / out / dead.  canon[label] is a state's
 * number there. */
static uint32_t *byte_form(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, uint32_t *canon, uint64_t *hash) {
    const cm_tables *t = &g->t;
    uint32_t *form = malloc((size_t)n_loop * 256 * sizeof *form);
    uint32_t *order = malloc((size_t)n_loop * sizeof *order);
    if (!form || !order) {
        free(form);
        free(order);
        return NULL;
    }
    for (uint32_t i = 0; i < n_loop; i++) canon[i] = UINT32_MAX;
    uint32_t n = 0;
    canon[0] = n;
    order[n++] = 0;
    for (uint32_t q = 0; q < n; q++)
        for (int b = 0; b < 256; b++) {
            int32_t to = t->trans[(size_t)ls[order[q]] * t->n_classes + t->byte_class[b]];
            if (to < 0 || g->loop_lab[to] >= n_loop || canon[g->loop_lab[to]] != UINT32_MAX) continue;
            canon[g->loop_lab[to]] = n;
            order[n++] = g->loop_lab[to];
        }
    if (n < n_loop) {  /* not every state reached by bytes from the entry: no form */
        free(form);
        free(order);
        return NULL;
    }
    uint64_t h = 0x51AB1E5ULL ^ n_loop;
    for (uint32_t q = 0; q < n_loop; q++)
        for (int b = 0; b < 256; b++) {
            int32_t to = t->trans[(size_t)ls[order[q]] * t->n_classes + t->byte_class[b]];
            uint32_t code = to < 0 ? LOOP_DEAD : g->loop_lab[to] < n_loop ? canon[g->loop_lab[to]] : LOOP_OUT;
            form[(size_t)q * 256 + (size_t)b] = code;
            h = (h ^ code) * 0xbf58476d1ce4e5b9ULL;
        }
    free(order);
    *hash = h ^ (h >> 29);
    return form;
}

/* dst's result (bits, accepted count, exits) copied from src, each exit's loop
 * state renumbered through map; 0 or CM_ERR_NOMEM. */
static int copy_walk(const cm_grammar *g, cm_loop_walk *dst, const cm_loop_walk *src, const uint32_t *map) {
    dst->bits = malloc(g->n_words * sizeof *dst->bits);
    dst->exits = malloc((src->n_exits ? src->n_exits : 1) * sizeof *dst->exits);
    if (!dst->bits || !dst->exits) return CM_ERR_NOMEM;
    memcpy(dst->bits, src->bits, g->n_words * sizeof *dst->bits);
    for (size_t i = 0; i < src->n_exits; i++) {
        dst->exits[i] = src->exits[i];
        dst->exits[i].label = map[src->exits[i].label];
    }
    dst->n_exits = src->n_exits;
    dst->n_accepted = src->n_accepted;
    return CM_OK;
}

/* The vocabulary's walk for this loop copied into lw: 1 found, 0 not, < 0 error. */
static int vocab_walk_get(const cm_grammar *g, const uint32_t *form, size_t n_form, uint64_t hash, const uint32_t *from_canon,
                          cm_loop_walk *lw) {
    cm_vocab *v = (cm_vocab *)g->v;
    int found = 0;
    pthread_mutex_lock(&v->lw_lock);
    if (v->lw_cache)
        for (const cm_loop_walk *x = v->lw_cache[hash % CM_LOOP_BUCKETS]; x && !found; x = x->next)
            if (x->hash == hash && x->n_sig == n_form && !memcmp(x->sig, form, n_form * sizeof *form))
                found = copy_walk(g, lw, x, from_canon) ? CM_ERR_NOMEM : 1;
    pthread_mutex_unlock(&v->lw_lock);
    return found;
}

/* A copy of the grammar's new walk kept by the vocabulary (form is taken over);
 * nothing when the vocabulary's budget is spent or memory is short. */
static void vocab_walk_put(const cm_grammar *g, uint32_t *form, size_t n_form, uint64_t hash, const uint32_t *canon,
                           const cm_loop_walk *lw) {
    cm_vocab *v = (cm_vocab *)g->v;
    size_t bytes = sizeof *lw + n_form * 4 + g->n_words * 4 + lw->n_exits * sizeof *lw->exits;
    cm_loop_walk *x = calloc(1, sizeof *x);
    if (!x || copy_walk(g, x, lw, canon)) {
        if (x) loop_walk_free(x);
        free(form);
        return;
    }
    x->hash = hash;
    x->n_sig = (uint32_t)n_form;
    x->sig = form;
    pthread_mutex_lock(&v->lw_lock);
    if (!v->lw_cache) v->lw_cache = calloc(CM_LOOP_BUCKETS, sizeof *v->lw_cache);
    if (v->lw_cache && v->lw_bytes + bytes <= CM_VOCAB_LOOP_BYTES) {
        size_t b = hash % CM_LOOP_BUCKETS;
        x->next = v->lw_cache[b];
        v->lw_cache[b] = x;
        v->lw_bytes += bytes;
        x = NULL;
    }
    pthread_mutex_unlock(&v->lw_lock);
    loop_walk_free(x);
}

/* The shared walk for the loop of `state` (built under the grammar's lock),
 * its states in ls; NULL when the state is in no loop (or on failure). */
static const cm_loop_walk *shared_walk(const cm_grammar *g, uint32_t state, uint32_t *ls, int *status) {
    cm_grammar *mg = (cm_grammar *)g;
    uint32_t *sig;
    uint64_t hash = 0;
    uint32_t n = find_loop(g, state, ls, &sig, &hash);
    if (!sig) {
        reset_labels(g, ls, n);
        return NULL;
    }
    size_t nsig = (size_t)n * g->t.n_classes, b = hash % CM_LOOP_BUCKETS;
    for (cm_loop_walk *lw = mg->loops[b]; lw; lw = lw->next)
        if (lw->hash == hash && lw->n_sig == nsig && !memcmp(lw->sig, sig, nsig * sizeof *sig)) {
            free(sig);
            return lw;  /* labels stay set for the caller */
        }
    cm_loop_walk *lw = calloc(1, sizeof *lw);
    if (!lw) {
        free(sig);
        reset_labels(g, ls, n);
        *status = CM_ERR_NOMEM;
        return NULL;
    }
    lw->hash = hash;
    lw->n_sig = (uint32_t)nsig;
    lw->sig = sig;
    uint64_t fhash = 0;
    uint32_t canon[CM_LOOP_MAX], from_canon[CM_LOOP_MAX];
    uint32_t *form = byte_form(g, ls, n, canon, &fhash);
    size_t n_form = (size_t)n * 256;
    for (uint32_t i = 0; form && i < n; i++) from_canon[canon[i]] = i;
    int rc = form ? vocab_walk_get(g, form, n_form, fhash, from_canon, lw) : 0;
    if (rc == 0) {
        rc = loop_walk(g, ls, n, lw);
        if (!rc && form) {
            vocab_walk_put(g, form, n_form, fhash, canon, lw);
            form = NULL;
        }
    } else if (rc == 1) {
        rc = CM_OK;
        atomic_fetch_add(&mg->loops_from_vocab, 1);
    }
    free(form);
    if (rc) {
        loop_walk_free(lw);
        reset_labels(g, ls, n);
        *status = rc;
        return NULL;
    }
    lw->next = mg->loops[b];
    mg->loops[b] = lw;
    atomic_fetch_add(&mg->cache_bytes, sizeof *lw + nsig * 4 + g->n_words * 4 + lw->n_exits * sizeof *lw->exits);
    return lw;
}

/* Store accepted tokens as a sorted id list when that is smaller than a bitset. */
static int finish_entry(const cm_grammar *g, walk *w, cm_entry *e) {
    e->n_accepted = w->n_accepted;
    e->n_uncertain = (uint32_t)w->n_unc;
    e->uncertain = w->unc;
    w->unc = NULL;
    e->bytes = sizeof *e + w->n_unc * 4;
    if ((size_t)w->n_accepted < g->n_words) {
        e->accepted_ids = malloc((w->n_accepted ? w->n_accepted : 1) * sizeof *e->accepted_ids);
        if (!e->accepted_ids) return CM_ERR_NOMEM;
        uint32_t j = 0;
        for (size_t i = 0; i < g->n_words; i++) {
            for (uint32_t word = w->bits[i]; word; word &= word - 1)
                e->accepted_ids[j++] = (uint32_t)(i * 32 + (unsigned)__builtin_ctz(word));
        }
        e->bytes += w->n_accepted * 4;
    } else {
        e->accepted_bits = w->bits;
        w->bits = NULL;
        e->bytes += g->n_words * 4;
    }
    return CM_OK;
}

/* Scan p[d..len) into c, whose sets for p[0..d) are built: the number of bytes
 * of p the chart survives (len: all), or < 0 on error. */
static long scan_rest(cm_chart *c, const cm_grammar *g, const uint8_t *p, uint32_t d, uint32_t len,
                      uint8_t *ex) {
    cm_chart_truncate(c, (size_t)d + 1);
    for (; d < len; d++) {
        int r = cm_chart_scan(c, g, p[d]);
        if (r < 0) return r;
        if (r == 0) return d;
        if (ex) ex[d + 1] = c->exited;
    }
    return len;
}

/* Drop the uncertain tokens that no context can take.  A token is uncertain
 * because the item's rule may complete inside it, at some depth d >= 1 with
 * the next byte in FOLLOW; from there on only the rule's callers read it.  The
 * rule's upward chart (every return state, each returning again when its own
 * rule completes: cm_chart_init_returns) over-approximates every real
 * continuation, so if it dies on the token's rest after every such d, the
 * real chart dies too.  FOLLOW only looks at the next byte; this reads them
 * all (after a Lark NAME, " B\xe1\xba\xa1n" leaves the name, starts a Unicode
 * space, and cannot go on).  Any failure here keeps the tokens: the filter
 * only saves run-time checks. */
static void filter_uncertain(const cm_grammar *g, uint32_t state, walk *w, uint8_t *ex) {
    const cm_vocab *v = g->v;
    const cm_tables *t = &g->t;
    uint32_t rule = t->state_rule[state];
    cm_chart c, u;
    int rc = cm_chart_init_item(&c, g, state, CM_OUTER);
    int ru = cm_chart_init_returns(&u, g, rule);
    const uint8_t *prev = NULL, *uprev = NULL;
    uint32_t have = 0, uhave = 0;  /* bytes of prev / uprev with sets in c / u */
    size_t kept = 0, i = 0;
    for (; !rc && !ru && i < w->n_unc; i++) {
        uint32_t k = w->unc[i], len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, p, len) : 0;
        long dead = scan_rest(&c, g, p, d, len, ex);
        if (dead < 0) {
            rc = (int)dead;
            break;
        }
        prev = p;
        have = (uint32_t)dead;
        bool keep = dead == len;  /* not an uncertain token after all: keep it */
        for (uint32_t e = 1; !keep && e <= (uint32_t)dead; e++) {
            if (!ex[e] || !((t->rule_follow[(size_t)rule * 8 + (p[e] >> 5)] >> (p[e] & 31)) & 1u)) continue;
            uint32_t ud = uprev ? cm_common_prefix(uprev, uhave, p + e, len - e) : 0;
            long alive = scan_rest(&u, g, p + e, ud, len - e, NULL);
            if (alive < 0) {
                ru = (int)alive;
                keep = true;
                break;
            }
            uprev = p + e;
            uhave = (uint32_t)alive;
            keep = alive == len - e;
        }
        if (keep) w->unc[kept++] = k;
    }
    /* on a failure, everything not yet decided stays */
    for (; i < w->n_unc; i++) w->unc[kept++] = w->unc[i];
    w->n_unc = kept;
    cm_chart_free(&c);
    cm_chart_free(&u);
}

/* ---- blocks of counted repetitions --------------------------------------------
 * x{0,1000} is cut into blocks B = x^b counted by helper rules (automata.py), so
 * inside a long bounded string the tokens that cross the end of a block depend
 * on the count: near the end of a block, on Snowplow's strings, 100,000 of them,
 * each checked against the real chart at every such mask.  But where the count
 * lets another block start right after this one, a token that crosses into it
 * and stays inside is accepted, whatever else the stack holds.  So the entry of
 * a block state splits its uncertain tokens: those that a run of the block
 * automaton accepts when its end is followed once by its start (wrap_bits), and
 * the rest.  A mask asks the real chart once whether the block may start again
 * there (cm_chart_repeats) and then takes wrap_bits whole.  For a rule whose
 * states all run alone (solo: the private chart is one item) and whose accepting
 * states read no more (rule_block): the run is deterministic, and its end is
 * only ever the rule's completion. */
static int wrap_split(const cm_grammar *g, uint32_t state, walk *w, cm_entry *e) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t rule = t->state_rule[state], start = t->rule_start[rule];
    uint32_t *bits = calloc(g->n_words ? g->n_words : 1, sizeof *bits);
    uint32_t *rest = malloc(w->n_unc * sizeof *rest);
    uint32_t *st = malloc(((size_t)v->max_len + 1) * sizeof *st);
    uint8_t *wr = malloc((size_t)v->max_len + 1);
    if (!bits || !rest || !st || !wr) {
        free(bits);
        free(rest);
        free(st);
        free(wr);
        return CM_ERR_NOMEM;
    }
    const uint8_t *prev = NULL;
    uint32_t have = 0, n_rest = 0, n_wrap = 0;
    st[0] = state;
    wr[0] = 0;
    for (size_t i = 0; i < w->n_unc; i++) {
        uint32_t k = w->unc[i], len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, p, len) : 0;
        for (; d < len; d++) {
            size_t cls = t->byte_class[p[d]];
            int32_t to = t->trans[(size_t)st[d] * t->n_classes + cls];
            uint8_t wd = wr[d];
            if (to < 0 && !wd && t->accepting[st[d]]) {  /* the block ends: the next one starts */
                to = t->trans[(size_t)start * t->n_classes + cls];
                wd = 1;
            }
            if (to < 0) break;
            st[d + 1] = (uint32_t)to;
            wr[d + 1] = wd;
        }
        prev = p;
        have = d;
        if (d == len && wr[len]) {
            uint32_t id = v->trie_ids[k];
            bits[id >> 5] |= 1u << (id & 31);
            n_wrap++;
        } else {
            rest[n_rest++] = k;
        }
    }
    free(st);
    free(wr);
    if (!n_wrap) {
        free(bits);
        free(rest);
        return CM_OK;
    }
    e->wrap_bits = bits;
    e->rest = rest;
    e->n_rest = n_rest;
    e->bytes += g->n_words * 4 + (size_t)n_rest * 4;
    return CM_OK;
}

/* Entries with more uncertain tokens than this skip filter_uncertain: the tokens that
 * cross a block boundary of a counted repetition (a JSON Schema maxLength string:
 * 100,000 of them) can all go on in some context, and reading each through the
 * upward chart cost a third of Snowplow's compile(warm=True). */
#define CM_FILTER_MAX_UNCERTAIN 16384

/* ---- entries composed from their callees' ----------------------------------
 * A state where an operand starts (after SELECT, WHERE, "=", "(" in an
 * expression grammar) predicts the whole expression chain, and a trie walk
 * through that private chart costs 10-20 ms at V = 128k, once per such state.
 * Its entry follows from smaller ones instead.  The items of a private chart
 * each descend from one item of its first set, so the chart of (s, OUTER) is
 * the union of the charts of its parts, and a token survives it iff it
 * survives some part:
 *   - a byte edge s -b-> y: the trie subtree of b, walked from (y, OUTER) at
 *     depth 1 (usually the start of a keyword: a small walk);
 *   - a call s -R-> s', R not nullable: R's derivation is the private chart of
 *     (start(R), OUTER), its exits advancing s to s'.  A token survives it if
 *     start(R) accepts it, or if R completes at a depth d >= 1 and s' goes on
 *     through the rest; the next byte then follows R, so the token is accepted
 *     or uncertain in start(R)'s entry (whose upward filter drops only tokens
 *     that no caller of R, s' among them, can go on reading);
 *   - a lookahead marker s -M-> s' (nullable, zero width): s' owing M's debt
 *     at depth 0.  It accepts what s' accepts among the tokens that pay the
 *     debt; s''s uncertain tokens and the tokens that end still owing it are
 *     left to check.
 * s's own rule completes inside a token only through one of the parts, so
 * its uncertain tokens are among theirs.  The tokens left to check are decided
 * by s's real private chart (walk_listed): the same entry as a whole walk, for
 * a few hundred checks.  Any other nullable callee, a callee whose entry is
 * being built (recursion through start states), token edges, or too many
 * tokens to check send s back to the walk. */
#define CM_COMPOSE_MAX_CANDIDATES 4096
#define CM_COMPOSE_MAX_DEPTH 64

static const cm_entry *entry_locked(cm_grammar *g, uint32_t state, cm_entry **owned, int *status);

static inline bool marker_rule(const cm_grammar *g, uint32_t r) {
    return g->t.rule_la[r] != 0;
}

static bool composable(const cm_grammar *g, uint32_t state) {
    const cm_tables *t = &g->t;
    if (!g->lim.compose_entries || g->has_tokens[state] || g->compose_depth >= CM_COMPOSE_MAX_DEPTH ||
        t->ref_off[state] == t->ref_off[state + 1])
        return false;
    for (uint32_t e = t->ref_off[state]; e < t->ref_off[state + 1]; e++) {
        uint32_t r = t->ref_rule[e];
        uint32_t part = marker_rule(g, r) ? t->ref_target[e] : t->rule_start[r];
        if ((t->rule_nullable[r] && !marker_rule(g, r)) || part == state || g->building[part]) return false;
    }
    return true;
}

/* Decide the listed trie entries (ascending) with the private chart of
 * (state, OUTER), classified as walk_range does; consecutive entries share the
 * sets of their common prefix.  Entries already accepted are skipped. */
static int walk_listed(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, walk *w, uint8_t *ex,
                       uint8_t *fl) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t rule = t->state_rule[state];
    cm_chart c;
    int rc = cm_chart_init_item(&c, g, state, CM_OUTER);
    const uint8_t *prev = NULL;
    uint32_t have = 0;  /* sets are built for prev[0..have) */
    ex[0] = fl[0] = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t len, id = v->trie_ids[ks[i]];
        if (cm_bit(w->bits, id)) continue;
        const uint8_t *p = cm_trie_bytes(v, ks[i], &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, p, len) : 0;
        bool dead = false;
        uint8_t f = 0;
        cm_chart_truncate(&c, (size_t)d + 1);
        for (; d < len; d++) {
            f = fl[d] | (ex[d] && follows(t, rule, p[d]));
            int r = cm_chart_scan(&c, g, p[d]);
            if (r < 0) rc = r;
            if (r <= 0) {
                dead = true;
                break;
            }
            ex[d + 1] = c.exited;
            fl[d + 1] = f;
        }
        prev = p;
        have = d;
        if (rc) break;
        if (!dead) {
            w->bits[id >> 5] |= 1u << (id & 31);
        } else if (f) {
            rc = push_uncertain(w, ks[i]);
        }
    }
    cm_chart_free(&c);
    return rc;
}

typedef struct part {
    const cm_entry *e;
    cm_entry *owned;
    uint32_t la;                /* the debt s' owes (marker parts), 0 for calls */
} part;

/* The entry of a composable state from its parts (above): 1 done, 0 declined
 * (w untouched: walk instead), < 0 error.  Under the lock. */
static int compose(cm_grammar *g, uint32_t state, walk *w, uint8_t *ex, uint8_t *fl, uint32_t *st) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t n_parts = 0, lo = t->ref_off[state], hi = t->ref_off[state + 1];
    part *parts = calloc(hi - lo, sizeof *parts);
    if (!parts) return CM_ERR_NOMEM;
    int rc = CM_OK, done = 1;
    size_t n_cand = 0;
    g->building[state] = 1;
    g->compose_depth++;
    for (uint32_t e = lo; e < hi && !rc && done; e++) {
        uint32_t r = t->ref_rule[e];
        part *pt = &parts[n_parts];
        pt->la = marker_rule(g, r) ? t->rule_la[r] : 0;
        pt->e = entry_locked(g, pt->la ? t->ref_target[e] : t->rule_start[r], &pt->owned, &rc);
        if (rc) break;
        n_parts++;
        n_cand += pt->e->n_uncertain;
        if (pt->la) n_cand += g->la_pending_off[pt->la + 1] - g->la_pending_off[pt->la];
        if (n_cand > CM_COMPOSE_MAX_CANDIDATES) done = 0;
    }
    g->compose_depth--;
    g->building[state] = 0;
    uint32_t *cand = NULL;
    if (!rc && done) {
        cand = malloc((n_cand ? n_cand : 1) * sizeof *cand);
        if (!cand) rc = CM_ERR_NOMEM;
    }
    if (!rc && done) {
        atomic_fetch_add(&g->composed, 1);
        /* byte edges: each first byte's subtree from the state it leads to */
        for (unsigned b = 0; b < 256 && !rc; b++) {
            int32_t y = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
            if (y < 0) continue;
            size_t k = v->first_off[b], k_end = v->first_off[b + 1];
            if (k < k_end) rc = walk_from(g, (uint32_t)y, t->state_rule[state], k, k_end, 1, w, ex, fl, st);
        }
        n_cand = 0;
        for (uint32_t i = 0; i < n_parts && !rc; i++) {
            const cm_entry *ce = parts[i].e;
            const uint32_t *allow = parts[i].la ? g->la_allow + (size_t)parts[i].la * g->n_words : NULL;
            cm_or_accepted(g, w->bits, ce, allow);
            if (ce->n_uncertain) memcpy(cand + n_cand, ce->uncertain, ce->n_uncertain * sizeof *cand);
            n_cand += ce->n_uncertain;
            if (parts[i].la) {
                uint32_t a = g->la_pending_off[parts[i].la], z = g->la_pending_off[parts[i].la + 1];
                if (z > a) memcpy(cand + n_cand, g->la_pending + a, (z - a) * sizeof *cand);
                n_cand += z - a;
            }
        }
        n_cand = n_cand ? cm_sort_unique_u32(cand, n_cand) : 0;
        if (!rc) rc = walk_listed(g, state, cand, n_cand, w, ex, fl);
        if (!rc) {
            /* the byte walks' uncertain tokens that a call accepts, and repeats, go */
            size_t n_unc = w->n_unc ? cm_sort_unique_u32(w->unc, w->n_unc) : 0, kept = 0;
            for (size_t i = 0; i < n_unc; i++)
                if (!cm_bit(w->bits, v->trie_ids[w->unc[i]])) w->unc[kept++] = w->unc[i];
            w->n_unc = kept;
            w->n_accepted = (uint32_t)cm_count_bits(w->bits, g->n_words);
        }
    }
    for (uint32_t i = 0; i < n_parts; i++) cm_entry_free(parts[i].owned);
    free(parts);
    free(cand);
    return rc ? rc : done;
}

/* ---- entries from a like state's -------------------------------------------
 * A solo state (calling nothing, no token edges) that goes where another solo
 * state goes on most bytes has that state's fate on every token whose first
 * byte leads both to the same state: after that byte the two private charts
 * are the same one item.  The states inside a JSON key that may be any string
 * but the schema's own keys are such states: after `{"bil` (a prefix of
 * "billing_address") every byte but 'l' leads where any key goes.  So the
 * entry is the donor's -- the state most of its bytes lead to -- with the
 * subtrees of the few first bytes where the two part walked again: a key
 * position costs tens of microseconds instead of a walk of the whole trie. */
#define CM_DONOR_MAX_REDO 4   /* walk at most 1/4 of the trie again */

/* The state most bytes of s lead to (-1: none). */
static int32_t mode_target(const cm_grammar *g, uint32_t s) {
    const cm_tables *t = &g->t;
    uint32_t size[256] = {0};  /* bytes a class has */
    for (int b = 0; b < 256; b++) size[t->byte_class[b]]++;
    const int32_t *row = t->trans + (size_t)s * t->n_classes;
    int32_t best = -1;
    uint32_t best_n = 0;
    for (uint32_t c = 0; c < t->n_classes; c++) {
        if (row[c] < 0 || row[c] == best) continue;
        uint32_t n = 0;
        for (uint32_t d = 0; d < t->n_classes; d++) n += row[d] == row[c] ? size[d] : 0;
        if (n > best_n) {
            best = row[c];
            best_n = n;
        }
    }
    return best;
}

/* The donor of s: the solo state most of its bytes lead to, if that state
 * mostly loops to itself (the inside of a string: its own entry is one walk,
 * shared by equal loops) or has its entry already -- not a chain of donors. */
static int32_t donor_of(const cm_grammar *g, uint32_t s) {
    int32_t d = mode_target(g, s);
    if (d < 0 || (uint32_t)d == s || !g->solo[d] || g->building[d]) return -1;
    if (atomic_load_explicit(&g->cache[d], memory_order_acquire)) return d;
    return mode_target(g, (uint32_t)d) == d ? d : -1;
}

/* The entry of a solo state from its donor's: 1 done, 0 declined (w untouched),
 * < 0 error.  Under the lock. */
static int from_donor(cm_grammar *g, uint32_t state, walk *w, uint8_t *ex, uint8_t *fl, uint32_t *st) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    if (!g->lim.compose_entries || !g->solo[state] || g->compose_depth >= CM_COMPOSE_MAX_DEPTH) return 0;
    int32_t donor = donor_of(g, state);
    if (donor < 0) return 0;
    bool part[256];
    const uint32_t *lo = v->first_off;
    size_t redo = 0;
    for (unsigned b = 0; b < 256; b++) {
        size_t cb = t->byte_class[b];
        part[b] = t->trans[(size_t)state * t->n_classes + cb] != t->trans[(size_t)donor * t->n_classes + cb];
        if (part[b]) redo += lo[b + 1] - lo[b];
    }
    if (redo * CM_DONOR_MAX_REDO > v->n_trie) return 0;
    cm_entry *owned = NULL;
    int rc = CM_OK;
    g->building[state] = 1;
    g->compose_depth++;
    const cm_entry *de = entry_locked(g, (uint32_t)donor, &owned, &rc);
    g->compose_depth--;
    g->building[state] = 0;
    if (rc) return rc;
    cm_or_accepted(g, w->bits, de, NULL);  /* w->bits is empty */
    for (uint32_t i = 0; !rc && i < de->n_uncertain; i++)
        if (!part[v->trie_data[v->trie_off[de->uncertain[i]]]]) rc = push_uncertain(w, de->uncertain[i]);
    uint32_t rule = t->state_rule[state];
    for (unsigned b = 0; !rc && b < 256; b++) {
        if (!part[b]) continue;
        for (size_t k = lo[b]; k < lo[b + 1]; k++) w->bits[v->trie_ids[k] >> 5] &= ~(1u << (v->trie_ids[k] & 31));
        int32_t y = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
        if (y >= 0 && lo[b] < lo[b + 1]) rc = walk_from(g, (uint32_t)y, rule, lo[b], lo[b + 1], 1, w, ex, fl, st);
    }
    cm_entry_free(owned);
    if (rc) return rc;
    w->n_unc = w->n_unc ? cm_sort_unique_u32(w->unc, w->n_unc) : 0;
    w->n_accepted = (uint32_t)cm_count_bits(w->bits, g->n_words);
    atomic_fetch_add(&g->donated, 1);
    return 1;
}

static cm_entry *build_entry(const cm_grammar *g, uint32_t state, int *status) {
    walk w = {0};
    cm_entry *e = calloc(1, sizeof *e);
    uint8_t *ex = malloc((size_t)g->v->max_len + 1);
    uint8_t *fl = malloc((size_t)g->v->max_len + 1);
    uint32_t *st = malloc(((size_t)g->v->max_len + 1) * sizeof *st);
    w.bits = calloc(g->n_words ? g->n_words : 1, sizeof *w.bits);
    int rc = (!e || !ex || !fl || !st || !w.bits) ? CM_ERR_NOMEM : CM_OK;
    const cm_loop_walk *lw = NULL;
    uint32_t *ls = NULL;
    int composed = 0;
    if (!rc && composable(g, state)) {
        composed = compose((cm_grammar *)g, state, &w, ex, fl, st);
        if (composed < 0) rc = composed;
    }
    if (!rc && !composed) {
        composed = from_donor((cm_grammar *)g, state, &w, ex, fl, st);
        if (composed < 0) rc = composed;
    }
    if (rc || composed) {
    } else if (g->lim.share_loop_walks && plain_state(g, (int32_t)state)) {
        ls = malloc(CM_LOOP_MAX * sizeof *ls);
        if (ls) lw = shared_walk(g, state, ls, &rc);
    }
    if (!rc && !composed && lw) {
        uint32_t n_loop = lw->n_sig / g->t.n_classes;
        memcpy(w.bits, lw->bits, g->n_words * sizeof *w.bits);
        w.n_accepted = lw->n_accepted;
        uint32_t rule = g->t.state_rule[state];
        for (size_t i = 0; !rc && i < lw->n_exits; i++) {
            const cm_loop_exit *x = &lw->exits[i];
            int32_t to = g->t.trans[(size_t)ls[x->label] * g->t.n_classes + g->t.byte_class[x->byte]];
            if (to < 0) continue;  /* cannot happen: equal loops, equal transitions */
            rc = walk_from(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, &w, ex, fl, st);
        }
        reset_labels(g, ls, n_loop);
    } else if (!rc && !composed) {
        rc = walk_from(g, state, g->t.state_rule[state], 0, g->v->n_trie, 0, &w, ex, fl, st);
    }
    free(ls);
    free(st);
    if (!rc && w.n_unc && w.n_unc <= CM_FILTER_MAX_UNCERTAIN && g->lim.filter_uncertain)
        filter_uncertain(g, state, &w, ex);
    if (!rc) rc = finish_entry(g, &w, e);
    if (!rc && g->lim.wrap_repeats && g->t.n_la <= 1 && e->n_uncertain >= g->lim.wrap_repeats &&
        g->rule_block[g->t.state_rule[state]]) {
        w.unc = e->uncertain;  /* borrowed back for the split */
        w.n_unc = e->n_uncertain;
        rc = wrap_split(g, state, &w, e);
        w.unc = NULL;
    }
    free(ex);
    free(fl);
    free(w.bits);
    free(w.unc);
    if (rc) {
        *status = rc;
        cm_entry_free(e);
        return NULL;
    }
    return e;
}

static uint64_t entry_hash(const cm_grammar *g, const cm_entry *e) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ e->n_accepted ^ ((uint64_t)e->n_uncertain << 32);
    if (e->accepted_bits)
        for (size_t i = 0; i < g->n_words; i++) h = (h ^ e->accepted_bits[i]) * 0x100000001b3ULL;
    else
        for (uint32_t i = 0; i < e->n_accepted; i++) h = (h ^ e->accepted_ids[i]) * 0x100000001b3ULL;
    for (uint32_t i = 0; i < e->n_uncertain; i++) h = (h ^ e->uncertain[i]) * 0x100000001b3ULL;
    h = (h ^ e->n_rest) * 0x100000001b3ULL;
    for (uint32_t i = 0; i < e->n_rest; i++) h = (h ^ e->rest[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    return h ? h : 1;
}

static bool entry_equal(const cm_grammar *g, const cm_entry *a, const cm_entry *b) {
    if (a->hash != b->hash || a->n_accepted != b->n_accepted || a->n_uncertain != b->n_uncertain ||
        !a->accepted_bits != !b->accepted_bits)
        return false;
    if (a->accepted_bits ? memcmp(a->accepted_bits, b->accepted_bits, g->n_words * sizeof(uint32_t))
                         : memcmp(a->accepted_ids, b->accepted_ids, a->n_accepted * sizeof(uint32_t)))
        return false;
    if (a->n_uncertain && memcmp(a->uncertain, b->uncertain, a->n_uncertain * sizeof(uint32_t))) return false;
    if (!a->wrap_bits != !b->wrap_bits || a->n_rest != b->n_rest) return false;
    if (!a->wrap_bits) return true;
    return !memcmp(a->wrap_bits, b->wrap_bits, g->n_words * sizeof(uint32_t)) &&
           (!a->n_rest || !memcmp(a->rest, b->rest, a->n_rest * sizeof(uint32_t)));
}

/* The grammar's entry equal to e: an earlier one (e is freed) or e, now owned by
 * the table.  NULL (e untouched) when the table cannot grow.  Under the lock.
 * States in equal loops or equal contexts (the copies of a JSON Schema string,
 * the operand states of an expression grammar) get the same entry, and a mask
 * ORs it once (gather in mask.c). */
static cm_entry *entry_intern(cm_grammar *g, cm_entry *e) {
    e->hash = entry_hash(g, e);
    if ((g->n_entries + 1) * 2 > g->entries_cap) {
        size_t cap = g->entries_cap ? g->entries_cap * 2 : 256;
        cm_entry **t = calloc(cap, sizeof *t);
        if (!t) return NULL;
        for (size_t i = 0; i < g->entries_cap; i++) {
            cm_entry *x = g->entries[i];
            if (!x) continue;
            size_t s = x->hash & (cap - 1);
            while (t[s]) s = (s + 1) & (cap - 1);
            t[s] = x;
        }
        free(g->entries);
        g->entries = t;
        g->entries_cap = cap;
    }
    size_t s = e->hash & (g->entries_cap - 1);
    for (; g->entries[s]; s = (s + 1) & (g->entries_cap - 1)) {
        if (entry_equal(g, g->entries[s], e)) {
            cm_entry_free(e);
            return g->entries[s];
        }
    }
    g->entries[s] = e;
    g->n_entries++;
    return e;
}

/* The entry of `state`, built if need be; under the grammar's lock.  Past the
 * cache-memory limit an entry is built for this call only and handed back in
 * *owned for the caller to free. */
static const cm_entry *entry_locked(cm_grammar *g, uint32_t state, cm_entry **owned, int *status) {
    *owned = NULL;
    cm_entry *e = atomic_load_explicit(&g->cache[state], memory_order_acquire);
    if (e) return e;
    e = build_entry(g, state, status);
    cm_entry *shared;
    if (!e) return NULL;
    if (atomic_load(&g->cache_bytes) + e->bytes > g->lim.max_cache_bytes || !(shared = entry_intern(g, e))) {
        *owned = e;
        return e;
    }
    if (shared == e) atomic_fetch_add(&g->cache_bytes, e->bytes);
    atomic_fetch_add(&g->cache_entries, 1);
    atomic_store_explicit(&g->cache[state], shared, memory_order_release);
    return shared;
}

/* The cache entry of `state`.  Built once under the grammar's lock; readers
 * never lock. */
const cm_entry *cm_grammar_entry(const cm_grammar *g, uint32_t state, cm_entry **owned, int *status) {
    cm_grammar *mg = (cm_grammar *)g;
    *owned = NULL;
    *status = CM_OK;
    cm_entry *e = atomic_load_explicit(&mg->cache[state], memory_order_acquire);
    if (e) return e;
    pthread_mutex_lock(&mg->lock);
    const cm_entry *r = entry_locked(mg, state, owned, status);
    pthread_mutex_unlock(&mg->lock);
    return r;
}

int cm_grammar_warm(cm_grammar *g) {
    if (!g) return CM_ERR_ARG;
    for (uint32_t s = 0; s < g->t.n_states; s++) {
        if (!g->has_bytes[s] && g->t.ref_off[s] == g->t.ref_off[s + 1]) continue;  /* see mask.c, looked_up */
        cm_entry *owned;
        int rc;
        cm_grammar_entry(g, s, &owned, &rc);
        if (owned) cm_entry_free(owned);
        if (rc) return rc;
    }
    return CM_OK;
}

size_t cm_grammar_cache_bytes(const cm_grammar *g) { return g ? atomic_load(&g->cache_bytes) : 0; }
size_t cm_grammar_cache_entries(const cm_grammar *g) { return g ? atomic_load(&g->cache_entries) : 0; }

void cm_grammar_build_stats(const cm_grammar *g, size_t *composed, size_t *donated, size_t *flat_configs,
                            size_t *vocab_loops) {
    cm_grammar *mg = (cm_grammar *)g;
    pthread_mutex_lock(&mg->lock);
    *vocab_loops = atomic_load(&g->loops_from_vocab);
    *composed = atomic_load(&g->composed);
    *donated = atomic_load(&g->donated);
    *flat_configs = g->flat ? g->flat->n : 0;
    pthread_mutex_unlock(&mg->lock);
}

int cm_grammar_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc) {
    if (!g || !words || !unc || !n_unc || state >= g->t.n_states) return CM_ERR_ARG;
    cm_entry *owned;
    int rc;
    const cm_entry *e = cm_grammar_entry(g, state, &owned, &rc);
    if (rc) return rc;
    memset(words, 0, g->n_words * sizeof *words);
    cm_or_accepted(g, words, e, NULL);
    for (uint32_t i = 0; i < e->n_uncertain; i++) unc[i] = g->v->trie_ids[e->uncertain[i]];
    *n_unc = e->n_uncertain;
    cm_entry_free(owned);
    return CM_OK;
}
