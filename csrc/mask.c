/* fill_mask: the per-step hot path.
 *
 *   1. the distinct automaton states of the current Earley set that scan bytes;
 *   2. OR their cached accepted sets into the mask;
 *   3. collect their uncertain tokens (trie order), and decide each one not
 *      already allowed by running the real Earley chart over its bytes, reusing
 *      the sets of the common prefix with the previous candidate;
 *   4. stop tokens iff the set is accepting.
 */
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "maskmemo.h"
#include "matcher.h"
#include "verdict.h"

/* Trie entries lo .. hi (inclusive) may be marked: widen the span check_candidates reads. */
static inline void cand_span(cm_matcher *m, uint32_t lo, uint32_t hi) {
    if (lo >> 6 < m->cand_lo) m->cand_lo = lo >> 6;
    if ((hi >> 6) + 1 > m->cand_hi) m->cand_hi = (hi >> 6) + 1;
}

/* The sorted trie entries ks[0..n) as candidates. */
static void mark_sorted(cm_matcher *m, const uint32_t *ks, uint32_t n) {
    if (!n) return;
    cand_span(m, ks[0], ks[n - 1]);
    uint64_t *cand = m->cand;
    for (uint32_t i = 0; i < n; i++) cand[ks[i] >> 6] |= 1ull << (ks[i] & 63);
}

/* cm_or_accepted and mark_sorted for an item owing lookahead debt `la`: only the
 * tokens whose first bytes it allows. */
static void or_entry_owing(cm_matcher *m, uint32_t *words, const cm_entry *e, uint32_t la) {
    const cm_grammar *g = m->g;
    const uint32_t *allow = g->la_allow + (size_t)la * g->n_words;
    uint64_t *cand = m->cand;
    cm_or_accepted(g, words, e, allow);
    const uint32_t *ids = g->v->trie_ids;
    if (e->n_uncertain) cand_span(m, e->uncertain[0], e->uncertain[e->n_uncertain - 1]);
    for (uint32_t i = 0; i < e->n_uncertain; i++) {
        uint32_t k = e->uncertain[i];
        if (cm_bit(allow, ids[k])) cand[k >> 6] |= 1ull << (k & 63);
    }
    /* tokens ending inside a character that still owes the debt: the real chart decides */
    for (uint32_t i = g->la_pending_off[la]; i < g->la_pending_off[la + 1]; i++) {
        uint32_t k = g->la_pending[i];
        cand_span(m, k, k);
        cand[k >> 6] |= 1ull << (k & 63);
    }
}

/* Tokens that token-terminal edges of state s take whole. */
static void or_token_edges(const cm_grammar *g, uint32_t s, uint32_t *words) {
    const cm_tables *t = &g->t;
    for (uint32_t e = t->tok_off[s]; e < t->tok_off[s + 1]; e++) {
        uint32_t k = t->tok_set[e];
        if (t->set_negated[k]) {
            const uint32_t *bits = g->negated_bits + (size_t)k * g->n_words;
            for (size_t i = 0; i < g->n_words; i++) words[i] |= bits[i];
        } else {
            for (uint32_t i = t->set_off[k]; i < t->set_off[k + 1]; i++)
                words[t->set_ids[i] >> 5] |= 1u << (t->set_ids[i] & 31);
        }
    }
}

#define CM_GATHER_SEEN 64

/* Items predicted in the current set (origin: this set, past set 0) need no
 * cache entry of their own: the entry of the item that predicted them walked
 * the same prediction in its private chart, so it accepts every token they
 * accept, and decides the tokens that leave the predicted rule as far as the
 * predictor's rule goes (what leaves that too is uncertain there).  Only the
 * other items, the roots, are looked up: after "(SELECT " in sql.lark, 3 entries
 * instead of 36, and none of the expression rules' own uncertain tokens. */
static inline bool predicted_here(const cm_chart *c, cm_item it) {
    size_t cur = c->n_sets - 1;
    return cur > 0 && it.origin == cur;
}

/* Does this item's state get a cache entry looked up?  A root that reads bytes,
 * or that predicts (its entry covers what it predicts; see predicted_here). */
static inline bool looked_up(const cm_grammar *g, const cm_chart *c, cm_item it) {
    uint32_t s = cm_st(it.state);
    if (predicted_here(c, it)) return false;
    return g->has_bytes[s] || g->t.ref_off[s] < g->t.ref_off[s + 1];
}

/* Whether `rule`, begun at set `origin`, may start again right where it
 * completes (cm_chart_repeats), remembered for the rest of this mask. */
#define CM_REPEATS_SEEN 8

static int repeats(cm_matcher *m, uint32_t rule, uint32_t origin) {
    for (size_t i = 0; i < m->n_rep; i++)
        if (m->rep_rule[i] == rule && m->rep_origin[i] == origin) return m->rep_ans[i];
    int r = cm_chart_repeats(&m->c, m->g, rule, origin);
    if (r >= 0 && m->n_rep < CM_REPEATS_SEEN) {
        m->rep_rule[m->n_rep] = rule;
        m->rep_origin[m->n_rep] = origin;
        m->rep_ans[m->n_rep++] = (int8_t)r;
    }
    return r;
}

/* Steps 1-3 for the states of the last set; fills `words` and `cand`. */
static int gather(cm_matcher *m, uint32_t *words) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    if (++m->stamp_gen == 0) {
        memset(m->stamp, 0, g->t.n_states * sizeof *m->stamp);
        m->stamp_gen = 1;
    }
    m->n_rep = 0;
    const cm_entry *done[CM_GATHER_SEEN];  /* (entry, debt) ORed already: states may share one */
    uint32_t done_la[CM_GATHER_SEEN];
    size_t n_done = 0;
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state), la = cm_la(c->items[i].state);
        if (g->has_tokens[s] && m->stamp[s] != m->stamp_gen) or_token_edges(g, s, words);
        if (m->stamp[s] == m->stamp_gen || !looked_up(g, c, c->items[i])) continue;
        if (!la) m->stamp[s] = m->stamp_gen;  /* owing a debt: a subset of the state's entry */
        m->stats.n_states++;
        cm_entry *owned;
        int rc;
        const cm_entry *e = cm_grammar_entry(g, s, &owned, &rc);
        if (rc) return rc;
        if (!owned) {
            size_t j = 0;
            while (j < n_done && (done[j] != e || done_la[j] != la)) j++;
            if (j < n_done) continue;
            if (n_done < CM_GATHER_SEEN) {
                done[n_done] = e;
                done_la[n_done++] = la;
            }
        }
        int wrap = 0;
        if (!la && e->wrap_bits && g->lim.wrap_repeats) {
            wrap = repeats(m, g->t.state_rule[s], c->items[i].origin);
            if (wrap < 0) {
                cm_entry_free(owned);
                return wrap;
            }
        }
        if (la) {
            or_entry_owing(m, words, e, la);
        } else if (wrap) {
            /* the block may start again after this one: what goes on into it is in */
            cm_or_accepted(g, words, e, NULL);
            cm_or_words(words, e->wrap_bits, g->n_words);
            mark_sorted(m, e->rest, e->n_rest);
        } else {
            cm_or_accepted(g, words, e, NULL);
            mark_sorted(m, e->uncertain, e->n_uncertain);
        }
        m->stats.n_candidates += wrap ? e->n_rest : e->n_uncertain;
        cm_entry_free(owned);
    }
    return CM_OK;
}

typedef struct check_state {
    size_t base;                /* index of the current (real) set */
    const uint8_t *prev;
    uint32_t prev_len;
    uint32_t dead_at;           /* the previous candidate's prefix of this length is dead */
    uint32_t built;             /* ... and the sets of its prefix of this length are in the chart */
    /* closing verdicts (verdict.c): the newest origin of the current set's items, other
     * than the set itself (0: none, no verdicts); the depth of the first exit set of the
     * sets in the chart (UINT32_MAX: none) and its id there (-1: not one) */
    uint32_t inner, exit_at;
    int stack;
} check_state;

/* Has the set just scanned left the innermost rule of the current set: no item
 * of it has an origin as new as that rule's, but those predicted in it? */
static bool exit_set(const cm_chart *c, const check_state *cs) {
    size_t set = c->n_sets - 1;
    for (size_t i = c->set_start[set]; i < c->set_start[set + 1]; i++)
        if (c->items[i].origin >= cs->inner && c->items[i].origin != set) return false;
    return true;
}

/* The rest of the token after its exit set, decided earlier?  1 allowed, 0 not, -1 unknown. */
static int known_rest(cm_matcher *m, const check_state *cs, const uint8_t *p, uint32_t len) {
    if (cs->stack < 0 || cs->exit_at >= len) return -1;
    int r = cm_verdict_get(&m->verdicts, cs->stack, p + cs->exit_at, len - cs->exit_at);
    if (r >= 0) m->stats.n_verdicts++;
    return r;
}

/* Decide one uncertain token exactly: 1 allowed, 0 not, < 0 error. */
static int check_token(cm_matcher *m, check_state *cs, size_t k) {
    const cm_grammar *g = m->g;
    uint32_t len;
    const uint8_t *p = cm_trie_bytes(g->v, k, &len);
    uint32_t d = cs->prev ? cm_common_prefix(cs->prev, cs->prev_len, p, len) : 0;
    cs->prev = p;
    cs->prev_len = len;
    if (cs->dead_at <= d) return 0;
    if (d > cs->built) d = cs->built;
    /* sets for depths 0..d of this prefix are in the chart already */
    cm_chart_truncate(&m->c, cs->base + d + 1);
    cs->dead_at = UINT32_MAX;
    cs->built = len;
    if (cs->exit_at > d) cs->exit_at = UINT32_MAX, cs->stack = -1;
    int known = known_rest(m, cs, p, len);
    if (known >= 0) {
        cs->built = d;
        return known;
    }
    for (; d < len; d++) {
        m->stats.n_steps++;
        int r = cm_chart_scan(&m->c, g, p[d]);
        if (r < 0) return r;
        if (r == 0) {
            cs->dead_at = d + 1;
            break;
        }
        if (cs->inner && cs->exit_at == UINT32_MAX && exit_set(&m->c, cs)) {
            cs->exit_at = d + 1;
            cs->stack = cm_verdict_stack(&m->verdicts, &m->c, m->c.n_sets - 1, cs->base);
            if ((known = known_rest(m, cs, p, len)) >= 0) {
                cs->built = d + 1;
                return known;
            }
        }
    }
    bool allowed = cs->dead_at == UINT32_MAX;
    if (cs->stack >= 0 && cs->exit_at < len) cm_verdict_put(&m->verdicts, cs->stack, p + cs->exit_at, len - cs->exit_at, allowed);
    return allowed;
}

/* The newest origin of the current set's items but the set itself, if closing
 * verdicts apply (not with lookahead debts: their completions read bytes). */
static uint32_t inner_origin(const cm_matcher *m, size_t cur) {
    const cm_chart *c = &m->c;
    uint32_t inner = 0;
    if (!m->g->lim.closing_verdicts || m->g->t.n_la > 1) return 0;
    for (size_t i = c->set_start[cur]; i < c->set_start[cur + 1]; i++)
        if (c->items[i].origin != cur && c->items[i].origin > inner) inner = c->items[i].origin;
    return inner;
}

static int check_candidates(cm_matcher *m, uint32_t *words) {
    const cm_vocab *v = m->g->v;
    size_t n_sets = m->c.n_sets, lo = m->cand_lo, hi = m->cand_hi;
    check_state cs = {n_sets - 1, NULL, 0, UINT32_MAX, 0, inner_origin(m, n_sets - 1), UINT32_MAX, -1};
    int rc = CM_OK;
    m->cand_lo = UINT32_MAX;
    m->cand_hi = 0;
    for (size_t w = lo; w < hi; w++) {
        uint64_t bits = m->cand[w];
        m->cand[w] = 0;
        for (; bits && rc >= 0; bits &= bits - 1) {
            size_t k = w * 64 + (unsigned)__builtin_ctzll(bits);
            uint32_t id = v->trie_ids[k];
            if (cm_bit(words, id)) continue;
            m->stats.n_checked++;
            rc = check_token(m, &cs, k);
            if (rc > 0) words[id >> 5] |= 1u << (id & 31);
        }
    }
    cm_chart_truncate(&m->c, n_sets);
    return rc < 0 ? rc : CM_OK;
}

/* A set with many scanning states not in the cache yet (wide, ambiguous grammars
 * such as Lark's longest-match products) would pay one trie walk per state:
 * then walk the trie once with the real chart instead (exact by definition:
 * a token is allowed iff the chart survives its bytes), and leave the cache
 * for sets that recur. */
static size_t uncached_states(cm_matcher *m) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    size_t n = 0;
    if (++m->stamp_gen == 0) {
        memset(m->stamp, 0, g->t.n_states * sizeof *m->stamp);
        m->stamp_gen = 1;
    }
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state);
        if (m->stamp[s] == m->stamp_gen || !looked_up(g, c, c->items[i])) continue;
        m->stamp[s] = m->stamp_gen;
        n += cm_cache_peek(g, s) == NULL;
    }
    return n;
}

static int direct_walk(cm_matcher *m, uint32_t *words) {
    const cm_grammar *g = m->g;
    const cm_vocab *v = g->v;
    const cm_chart *c = &m->c;
    size_t base = c->n_sets - 1;
    int rc = CM_OK;
    uint32_t reads[8] = {0};  /* the first bytes some item reads: the other subtrees are dead */
    for (size_t i = c->set_start[base]; i < c->set_start[base + 1]; i++) {
        uint32_t s = cm_st(c->items[i].state);
        if (g->has_tokens[s]) or_token_edges(g, s, words);
        for (int j = 0; j < 8; j++) reads[j] |= g->next_bytes[(size_t)s * 8 + j];
    }
    for (unsigned b = 0; b < 256 && !rc; b++) {
        if (!cm_bit(reads, b)) continue;
        size_t k = v->first_off[b], k_end = v->first_off[b + 1];
        while (k < k_end) {
            uint32_t len, d = v->trie_lcp[k], dead_at = 0;
            const uint8_t *p = cm_trie_bytes(v, k, &len);
            cm_chart_truncate(&m->c, base + d + 1);
            for (; d < len; d++) {
                int r = cm_chart_scan(&m->c, g, p[d]);
                if (r <= 0) {
                    rc = r;
                    dead_at = d + 1;
                    break;
                }
            }
            if (rc) break;
            if (!dead_at) {
                uint32_t id = v->trie_ids[k++];
                words[id >> 5] |= 1u << (id & 31);
                m->stats.n_checked++;
                continue;
            }
            k = v->skip[v->trie_off[k] + dead_at - 1];
        }
    }
    cm_chart_truncate(&m->c, base + 1);
    return rc;
}

/* After a direct walk, build a few of the missing entries, so that a wide set
 * that recurs reaches the cache path after a few visits. */
#define CM_FILL_PER_WALK 4

static int fill_some(cm_matcher *m, size_t n) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    for (size_t i = c->set_start[c->n_sets - 1]; n && i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state);
        if (!looked_up(g, c, c->items[i]) || cm_cache_peek(g, s)) continue;
        cm_entry *owned;
        int rc;
        cm_grammar_entry(g, s, &owned, &rc);
        cm_entry_free(owned);
        if (rc) return rc;
        n--;
    }
    return CM_OK;
}

/* The chart's signature for the whole-mask memo, taken at most once a mask. */
typedef struct memo_key {
    uint64_t hash;
    size_t n_sig;               /* 0: none (then the mask is not stored) */
    bool tried;
} memo_key;

/* Has the memo this chart's mask?  Then it is in words. */
static bool memo_hit(cm_matcher *m, memo_key *key, uint32_t *words) {
    key->tried = true;
    key->n_sig = cm_mask_signature(m, &key->hash);
    if (!key->n_sig || !cm_mask_memo_lookup(m, key->hash, key->n_sig, words)) return false;
    m->stats.memo_hit = 1;
    return true;
}

static void clear_candidates(cm_matcher *m) {
    if (m->cand_lo < m->cand_hi) memset(m->cand + m->cand_lo, 0, (m->cand_hi - m->cand_lo) * sizeof *m->cand);
    m->cand_lo = UINT32_MAX;
    m->cand_hi = 0;
}

/* Steps 1-3, by a direct walk or from the cache, asking the memo first where
 * that turns out to be expensive: 0, 1 the memo had the mask, < 0 error. */
static int compute(cm_matcher *m, uint32_t *words, memo_key *key) {
    const cm_grammar *g = m->g;
    int rc;
    if (uncached_states(m) >= g->lim.direct_walk_states) {
        /* a direct walk is always expensive: worth a signature */
        if (!key->tried && memo_hit(m, key, words)) return 1;
        rc = direct_walk(m, words);
        if (!rc && g->lim.direct_walk_states > 1) rc = fill_some(m, CM_FILL_PER_WALK);
        return rc;
    }
    rc = gather(m, words);
    /* many candidates to check: worth a signature */
    if (!rc && !key->tried && m->stats.n_candidates >= g->lim.mask_memo_min_candidates && memo_hit(m, key, words)) {
        clear_candidates(m);
        return 1;
    }
    return rc ? rc : check_candidates(m, words);
}

int cm_matcher_fill_mask(cm_matcher *m, uint32_t *words, size_t n_words) {
    if (!m || !words) return CM_ERR_ARG;
    const cm_grammar *g = m->g;
    if (n_words < g->n_words) return CM_ERR_ARG;
    memset(words, 0, n_words * sizeof *words); /* an error never leaves a stale (permissive) row */
    if (m->err) return CM_ERR_STATE;
    memset(&m->stats, 0, sizeof m->stats);
    m->stats.n_items = m->c.set_start[m->c.n_sets] - m->c.set_start[m->c.n_sets - 1];
    memo_key key = {0, 0, false};
    if (!m->terminated && m->stats.n_items >= g->lim.mask_memo_min_items && memo_hit(m, &key, words)) return CM_OK;
    if (!m->terminated) {
        int rc = compute(m, words, &key);
        if (rc > 0) return CM_OK;
        if (rc) {
            clear_candidates(m);
            memset(words, 0, n_words * sizeof *words);
            m->err = rc;
            return rc;
        }
    }
    if (m->terminated || cm_chart_accepting(&m->c, g))
        for (size_t i = 0; i < g->n_stop; i++) words[g->stop_ids[i] >> 5] |= 1u << (g->stop_ids[i] & 31);
    if (key.n_sig) cm_mask_memo_store(m, key.hash, key.n_sig, words);
    return CM_OK;
}

void cm_matcher_mask_stats(const cm_matcher *m, cm_mask_stats *out) {
    if (m && out) *out = m->stats;
}
