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
#include "promote.h"
#include "matcher.h"
#include "stackmemo.h"
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

/* The row is zeroed lazily: `*fresh` while nothing has been written to words[0..n_words)
 * (stale contents), so that the first entry a mask ORs, when it is a bitset (a string's
 * inside, a value's start: most steps), is copied over the row in one pass instead of
 * zeroing 16 KB and ORing into it. */
static inline void zero_if_fresh(const cm_grammar *g, uint32_t *words, bool *fresh) {
    if (!*fresh) return;
    memset(words, 0, g->n_words * sizeof *words);
    *fresh = false;
}

static void or_accepted_first(cm_matcher *m, uint32_t *words, const cm_entry *e, bool *fresh) {
    const cm_grammar *g = m->g;
    if (*fresh && e->accepted_bits) {
        memcpy(words, e->accepted_bits, g->n_words * sizeof *words);
        *fresh = false;
        m->stats.copied = 1;
        return;
    }
    zero_if_fresh(g, words, fresh);
    cm_or_accepted(g, words, e, NULL);
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

/* A stamp no state holds yet (every state's cleared when the generation wraps). */
static inline void new_stamp(cm_matcher *m) {
    if (++m->stamp_gen == 0) {
        memset(m->stamp, 0, m->g->t.n_states * sizeof *m->stamp);
        m->stamp_gen = 1;
    }
}

/* The (entry, debt) pairs a gather has ORed in (the first CM_GATHER_SEEN of them). */
typedef struct gather_seen {
    const cm_entry *e[CM_GATHER_SEEN];
    uint32_t la[CM_GATHER_SEEN];
    size_t n;
} gather_seen;

/* Whether (e, la) was ORed in already; if not, it is noted (while there is room). */
static inline bool seen_before(gather_seen *seen, const cm_entry *e, uint32_t la) {
    size_t j = 0;
    while (j < seen->n && (seen->e[j] != e || seen->la[j] != la)) j++;
    if (j < seen->n) return true;
    if (seen->n < CM_GATHER_SEEN) {
        seen->e[seen->n] = e;
        seen->la[seen->n++] = la;
    }
    return false;
}

/* Steps 1-3 for the states of the last set; fills `words` (zeroed or copied over first
 * while *fresh) and `cand`. */
static int gather(cm_matcher *m, uint32_t *words, bool *fresh) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    new_stamp(m);
    m->n_rep = 0;
    gather_seen seen;  /* (entry, debt) ORed already: states may share one (arrays unset) */
    seen.n = 0;
    cm_promote_fill_begin();
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state), la = cm_la(c->items[i].state);
        if (g->has_tokens[s] && m->stamp[s] != m->stamp_gen) {
            zero_if_fresh(g, words, fresh);
            or_token_edges(g, s, words);
        }
        if (m->stamp[s] == m->stamp_gen || !looked_up(g, c, c->items[i])) continue;
        if (!la) m->stamp[s] = m->stamp_gen;  /* owing a debt: a subset of the state's entry */
        m->stats.n_states++;
        cm_entry *owned;
        int rc;
        const cm_entry *e = cm_grammar_fill_entry(g, s, &owned, &rc);
        if (rc) return rc;
        if (!owned && seen_before(&seen, e, la)) continue;
        int wrap = 0;
        if (!la && e->wrap_bits && g->lim.wrap_repeats) {
            wrap = repeats(m, g->t.state_rule[s], c->items[i].origin);
            if (wrap < 0) {
                cm_entry_free(owned);
                return wrap;
            }
        }
        if (la) {
            zero_if_fresh(g, words, fresh);
            or_entry_owing(m, words, e, la);
        } else if (wrap) {
            /* the block may start again after this one: what goes on into it is in */
            or_accepted_first(m, words, e, fresh);
            cm_or_words(words, e->wrap_bits, g->n_words);
            mark_sorted(m, e->rest, e->n_rest);
        } else {
            or_accepted_first(m, words, e, fresh);
            mark_sorted(m, e->uncertain, e->n_uncertain);
        }
        m->stats.n_candidates += wrap ? e->n_rest : e->n_uncertain;
        cm_entry_free(owned);
    }
    return CM_OK;
}

/* gather on a segment grammar: an item in a segment state looks up the entry of its state at its
 * count (cm_grammar_seg_entry: keyed by the clipped pair, so two items of one state with
 * different counts may need two entries: no stamp for them, the entries' list deduplicates);
 * the others their state's, built by the plain counted walk.  No wrap split is made. */
static int gather_counted(cm_matcher *m, uint32_t *words, bool *fresh) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    new_stamp(m);
    gather_seen seen;
    seen.n = 0;
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state), la = cm_la(c->items[i].state);
        bool in_seg = g->state_seg[s] != CM_SEG_NONE;
        if (g->has_tokens[s] && m->stamp[s] != m->stamp_gen) {
            zero_if_fresh(g, words, fresh);
            or_token_edges(g, s, words);
        }
        if ((!in_seg && m->stamp[s] == m->stamp_gen) || !looked_up(g, c, c->items[i])) continue;
        if (!la && !in_seg) m->stamp[s] = m->stamp_gen;
        m->stats.n_states++;
        cm_entry *owned;
        int rc;
        const cm_entry *e = cm_grammar_seg_entry(g, s, in_seg ? c->counts[i] : CM_SEG_NONE, &owned, &rc);
        if (rc) return rc;
        if (!owned && seen_before(&seen, e, la)) continue;
        if (la) {
            zero_if_fresh(g, words, fresh);
            or_entry_owing(m, words, e, la);
        } else {
            or_accepted_first(m, words, e, fresh);
            mark_sorted(m, e->uncertain, e->n_uncertain);
        }
        m->stats.n_candidates += e->n_uncertain;
        cm_entry_free(owned);
    }
    return CM_OK;
}

typedef struct check_state {
    size_t base;                /* index of the current (real) set */
    const uint8_t *prev;
    uint32_t prev_len;
    uint32_t dead_at;           /* the previous candidate's prefix of this length is dead */
    cm_stackmemo *sm;           /* stack verdicts (stackmemo.c): the matcher's scratch; NULL: off */
    cm_stack_store *store;      /* ... and the grammar's verdicts */
} check_state;

/* The lowest set the closure of chart set `set` read: its completed items' lowest origin. */
static uint32_t lowest_read(const cm_chart *c, const cm_grammar *g, size_t set, uint32_t lo) {
    for (size_t i = c->set_start[set]; i < c->set_start[set + 1]; i++)
        if (c->items[i].origin < lo && g->t.accepting[cm_st(c->items[i].state)]) lo = c->items[i].origin;
    return lo;
}

/* Decide one uncertain token exactly: 1 allowed, 0 not, < 0 error. */
static int check_token(cm_matcher *m, check_state *cs, size_t k) {
    const cm_grammar *g = m->g;
    uint32_t len;
    const uint8_t *p = cm_trie_bytes(g->v, k, &len);
    uint32_t d = cs->prev ? cm_common_prefix(cs->prev, cs->prev_len, p, len) : 0;
    if (cs->dead_at <= d) {
        cs->prev = p;
        cs->prev_len = len;
        return 0;
    }
    cs->prev = p;
    cs->prev_len = len;
    /* sets for depths 0..d of this prefix are in the chart already */
    cm_chart_truncate(&m->c, cs->base + d + 1);
    cs->dead_at = UINT32_MAX;
    uint32_t *reach = cs->sm ? cs->sm->reach : NULL, from = d;
    int r = 1;
    for (; d < len; d++) {
        m->stats.n_steps++;
        r = cm_chart_scan(&m->c, g, p[d]);
        if (r < 0) return r;
        if (r == 0) {
            cs->dead_at = d + 1;
            break;
        }
        if (reach) reach[d + 1] = lowest_read(&m->c, g, cs->base + d + 1, reach[d]);
    }
    if (reach && from < len) {
        /* the verdict read the closures of the sets before the last byte's (the last
         * byte's kernel is empty or not whatever its closure reads) */
        uint32_t used = r ? len - 1 : d;
        cm_stackmemo_put(cs->sm, (uint32_t)k, cm_stackmemo_frames(cs->sm, &m->c, reach[used]), r > 0);
    }
    return r;
}

/* ---- closing verdicts (verdict.c): the current set as plain items read by their automata ----
 *
 * Inside a string the current set is a few items that each read bytes with their rule's
 * automaton and call nothing: the string body's state, and where the body may end here the
 * caller's state waiting for the closing quote (or, for a maxLength string cut into blocks,
 * the current block's state and the value rule's own unrolled tail).  The chart survives a
 * token iff some item's derivation does, so a token is allowed iff one of these automata
 * reads all of it, or one reads a prefix of it into an accepting state and the set that
 * its rule's completion makes survives the rest.  That set reads only the sets up to the
 * item's origin, the same at every later position of the string: its verdict on a rest is
 * kept per (set, rest bytes) across masks (verdict.c).  So a closing token costs its bytes'
 * transitions, and each of its rests one chart run per string, not Earley steps at every
 * mask.  An automaton that reaches a state that calls a rule leaves the token to the chart. */

#define CM_SPLIT_ITEMS 8
#define CM_SPLIT_FALLBACK 2     /* check_split: ask the chart */
#define CM_SPLIT_ROWS 128       /* check_split's rows kept for the next candidate (split.rs) */

typedef struct split {
    uint32_t n, n_exit;
    uint32_t state[CM_SPLIT_ITEMS];
    uint32_t exit[CM_SPLIT_ITEMS];      /* each item's completion: an index below */
    uint32_t rule[CM_SPLIT_ITEMS], origin[CM_SPLIT_ITEMS];
    int stack[CM_SPLIT_ITEMS];          /* each completion's set as a verdict stack */
    uint32_t first[CM_SPLIT_ITEMS][8];  /* ... and the first bytes it can read */
    int at;                             /* the completion whose set is the chart's set base + 1; -1 none */
    const uint8_t *prev;                /* the rest read after it last: its sets follow in the chart */
    uint32_t prev_len, dead_at;         /* ... and its prefix of this length is dead */
    /* check_split's automata after each of the first bytes of the candidate it read last (rk):
     * rows 1 .. r_ok were read to their end (row 0: state, exit) */
    const uint8_t *rk;
    uint32_t rk_len, r_ok;
    uint8_t rn[CM_SPLIT_ROWS + 1];
    uint32_t rs[CM_SPLIT_ROWS + 1][CM_SPLIT_ITEMS], rx[CM_SPLIT_ROWS + 1][CM_SPLIT_ITEMS];
} split;

/* Make set base + 1 the set of completion x. */
static int push_exit(cm_matcher *m, split *sp, size_t base, uint32_t x) {
    cm_chart_truncate(&m->c, base + 1);
    sp->at = -1;
    int rc = cm_chart_push_completion(&m->c, m->g, sp->rule[x], sp->origin[x]);
    if (!rc) sp->at = (int)x;
    sp->prev = NULL;
    return rc;
}

/* The items' completions as verdict stacks, with their first bytes: 1, or 0 if one
 * cannot be a stack, < 0 error. */
static int exit_stacks(cm_matcher *m, split *sp, size_t base) {
    const cm_chart *c = &m->c;
    for (uint32_t x = 0; x < sp->n_exit; x++) {
        int rc = push_exit(m, sp, base, x);
        if (rc) return rc;
        if ((sp->stack[x] = cm_verdict_stack(&m->verdicts, c, base + 1, base)) < 0) return 0;
        uint32_t *f = sp->first[x];
        memset(f, 0, sizeof sp->first[x]);
        for (size_t i = c->set_start[base + 1]; i < c->set_start[base + 2]; i++)
            for (int j = 0; j < 8; j++) f[j] |= m->g->next_bytes[(size_t)cm_st(c->items[i].state) * 8 + j];
    }
    return 1;
}

/* Is the current set a few plain items (no lookahead debt, no call, older origin)?
 * Then sp describes them with their completions' stacks: 1; else 0 (an error
 * building those sets too: the chart decides then, as without them). */
static int split_current(cm_matcher *m, split *sp, size_t base) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    if (g->t.n_la > 1 || base == 0) return 0;
    if (c->set_start[base + 1] - c->set_start[base] > CM_SPLIT_ITEMS) return 0;
    sp->n = sp->n_exit = 0;
    sp->at = -1;
    sp->rk = NULL;  /* new automata: no row holds */
    for (size_t i = c->set_start[base]; i < c->set_start[base + 1]; i++) {
        uint32_t s = cm_st(c->items[i].state), o = c->items[i].origin, r = g->t.state_rule[s], x = 0;
        if (cm_la(c->items[i].state) || o == base || g->t.ref_off[s] != g->t.ref_off[s + 1]) return 0;
        while (x < sp->n_exit && (sp->rule[x] != r || sp->origin[x] != o)) x++;
        if (x == sp->n_exit) {
            sp->rule[x] = r;
            sp->origin[x] = o;
            sp->n_exit++;
        }
        sp->state[sp->n] = s;
        sp->exit[sp->n++] = x;
    }
    /* a new stack may start the memo over, dropping those found before it: then once more */
    uint32_t gen = m->verdicts.gen;
    int rc = exit_stacks(m, sp, base);
    if (rc > 0 && m->verdicts.gen != gen) {
        gen = m->verdicts.gen;
        rc = exit_stacks(m, sp, base);
        if (rc > 0 && m->verdicts.gen != gen) rc = 0;
    }
    return rc > 0;
}

/* The verdict of len bytes p[0] (a run: `----`, 64 spaces) read after the set of
 * completion x.  Reading is prefix-closed, so how many of them the chart reads decides
 * every run of that byte: it is kept per (completion set, byte), read on to twice what
 * was known (a block position's long runs cross the block's end a few bytes later at
 * each later position: their rests grow, and each new length was a chart run). */
static int run_verdict(cm_matcher *m, split *sp, size_t base, uint32_t x, uint8_t byte, uint32_t len) {
    uint32_t lo, max = m->g->v->max_len;
    int r = cm_verdict_run_get(&m->verdicts, sp->stack[x], byte, len, &lo);
    if (r >= 0) {
        m->stats.n_verdicts++;
        return r;
    }
    if (sp->at != (int)x && (r = push_exit(m, sp, base, x))) return r;
    uint32_t cap = 2 * lo > len ? 2 * lo : len, d = 0;
    if (cap > max && max >= len) cap = max;
    cm_chart_truncate(&m->c, base + 2);
    sp->prev = NULL;  /* the sets above the completion's are this run's */
    for (r = 1; d < cap && r > 0; d++) {
        m->stats.n_steps++;
        r = cm_chart_scan(&m->c, m->g, byte);
    }
    if (r < 0) return r;
    if (!r) d--;  /* the d-th byte died: d - 1 read */
    cm_verdict_run_put(&m->verdicts, sp->stack[x], byte, d, r ? 0 : d + 1);
    return len <= d;
}

/* The verdict of bytes p[0..len) read after the set of completion x. */
static inline __attribute__((always_inline)) int rest_verdict(cm_matcher *m, split *sp, size_t base, uint32_t x,
                                                              const uint8_t *p, uint32_t len) {
    if (!cm_bit(sp->first[x], p[0])) return 0;
    uint32_t i = 1;
    while (i < len && p[i] == p[0]) i++;
    if (len > 1 && i == len) return run_verdict(m, sp, base, x, p[0], len);
    int r = cm_verdict_get(&m->verdicts, sp->stack[x], p, len);
    if (r >= 0) {
        m->stats.n_verdicts++;
        return r;
    }
    if (sp->at != (int)x && (r = push_exit(m, sp, base, x))) return r;
    /* the sets of the common prefix with the rest read before are in the chart */
    uint32_t d = sp->prev ? cm_common_prefix(sp->prev, sp->prev_len, p, len) : 0;
    r = sp->prev && sp->dead_at <= d ? 0 : 1;
    if (r) {
        cm_chart_truncate(&m->c, base + 2 + d);
        sp->prev = p;
        sp->prev_len = len;
        sp->dead_at = UINT32_MAX;
        for (; d < len && r > 0; d++) {
            m->stats.n_steps++;
            r = cm_chart_scan(&m->c, m->g, p[d]);
        }
        if (!r) sp->dead_at = d;
    }
    if (r >= 0) cm_verdict_put(&m->verdicts, sp->stack[x], p, len, r > 0);
    return r;
}

/* check_split's automata resumed where the candidate before left them (on by default; 0: each
 * candidate read from the split's states, the reference the tests compare against). */
static atomic_int g_split_resume = 1;
static atomic_size_t g_split_resumed;  /* bytes whose transitions a resume skipped (the tests read it) */

void cm_mask_split_resume_enable(int on) { atomic_store(&g_split_resume, on ? 1 : 0); }

size_t cm_mask_split_resumed(void) { return atomic_load(&g_split_resumed); }

/* Decide one uncertain token through the split: 1 allowed, 0 not,
 * CM_SPLIT_FALLBACK (the chart must), < 0 error.
 *
 * The candidates come in trie order, so one shares its first bytes with the one before; the
 * automata after those bytes are that one's (rows kept in sp, the first CM_SPLIT_ROWS bytes),
 * where it read past them.  Only the rest verdicts at their accepting states are asked again,
 * in the same order (the rests differ): the transitions and call tests of the shared bytes are
 * skipped, and every verdict and chart run is the one the read from the start makes. */
static int check_split(cm_matcher *m, split *sp, size_t base, size_t k) {
    const cm_grammar *g = m->g;
    const cm_tables *t = &g->t;
    uint32_t len, s[CM_SPLIT_ITEMS], x[CM_SPLIT_ITEMS], n = sp->n, from = 0;
    const uint8_t *p = cm_trie_bytes(g->v, k, &len);
    bool keep = atomic_load_explicit(&g_split_resume, memory_order_relaxed);
    if (keep && sp->rk) {
        from = cm_common_prefix(sp->rk, sp->rk_len < sp->r_ok ? sp->rk_len : sp->r_ok, p, len);  /* at most r_ok */
    }
    /* rows 1 .. from - 1 hold for p: their accepting states' rests, as the read from the start asks them */
    for (uint32_t j = 1; j < from; j++)
        for (uint32_t i = 0; i < sp->rn[j]; i++)
            if (t->accepting[sp->rs[j][i]]) {
                int r = rest_verdict(m, sp, base, sp->rx[j][i], p + j, len - j);
                if (r) {
                    sp->rk = p;  /* rows 1 .. from hold for p too */
                    sp->rk_len = len;
                    sp->r_ok = from;
                    return r;
                }
            }
    /* the automata before byte j (cs, cx) and after it (ns, nx): rows kept where they fit,
     * else s, x in place */
    const uint32_t *cs = sp->state, *cx = sp->exit;
    if (from) {
        n = sp->rn[from];
        cs = sp->rs[from];
        cx = sp->rx[from];
        atomic_fetch_add_explicit(&g_split_resumed, from, memory_order_relaxed);
    }
    if (keep) {
        sp->rk = p;
        sp->rk_len = len;
        sp->r_ok = from;
    }
    for (uint32_t j = from; j < len; j++) {
        bool row = keep && j < CM_SPLIT_ROWS;
        uint32_t live = 0, *ns = row ? sp->rs[j + 1] : s, *nx = row ? sp->rx[j + 1] : x;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t q = cs[i];
            if (j && t->accepting[q]) {
                int r = rest_verdict(m, sp, base, cx[i], p + j, len - j);
                if (r) return r;
            }
            if (t->ref_off[q] != t->ref_off[q + 1]) return CM_SPLIT_FALLBACK;
            int32_t next = g->has_bytes[q] ? t->trans[(size_t)q * t->n_classes + t->byte_class[p[j]]] : -1;
            if (next < 0) continue;
            ns[live] = (uint32_t)next;
            nx[live++] = cx[i];
        }
        if (!(n = live)) return 0;
        if (row) {  /* row j + 1, read to its end */
            sp->rn[j + 1] = (uint8_t)n;
            sp->r_ok = j + 1;
        }
        cs = ns;
        cx = nx;
    }
    return 1;  /* an automaton read it all */
}

static void clear_candidates(cm_matcher *m) {
    if (m->cand_lo < m->cand_hi) memset(m->cand + m->cand_lo, 0, (m->cand_hi - m->cand_lo) * sizeof *m->cand);
    m->cand_lo = UINT32_MAX;
    m->cand_hi = 0;
}

/* ---- the split taken late (issue 12, session 47) ----
 *
 * A mask with fewer than lim.closing_verdicts candidates runs each through the chart
 * (check_token), the split's completion sets costing more than it saves -- unless the
 * candidates are long: a block string's position near the block's end has a few dozen
 * tokens that cross it (`   ...` runs of 30-128 spaces, ` ----...`, ` ####...`), each run
 * through the chart byte by byte (o9813:13, 44 candidates, 1,499 Earley steps, 0.74 M
 * instructions).  So such a mask starts with the chart and, once its checks have run
 * CM_SPLIT_LATE_STEPS Earley steps (CM_SPLIT_LATE_COLD while the matcher has no closing
 * verdict memo yet: its first use allocates and clears it), makes the split as the mask
 * with many candidates would, and decides the rest by it.  Both decide each token exactly
 * (the chart's verdict), so only the cost moves.  Off: cm_mask_split_late_enable(0); 2: at
 * the first check of every such mask (the tests). */
static atomic_int g_split_late = 1;  /* 0 off, 1 by the steps below, 2 at the first check (the tests) */
static atomic_size_t g_split_late_hits;  /* masks that took the split late (the tests read it) */

void cm_mask_split_late_enable(int mode) { atomic_store(&g_split_late, mode < 0 ? 0 : mode > 2 ? 2 : mode); }

size_t cm_mask_split_late_hits(void) { return atomic_load(&g_split_late_hits); }

#define CM_SPLIT_LATE_STEPS 64
#define CM_SPLIT_LATE_COLD 512

typedef struct late_split {
    bool open;      /* the split may still be made late */
    bool at_once;   /* ... at the first check (mode 2) */
    size_t from;    /* m->stats.n_steps when the checks began */
} late_split;

/* Decide candidate k (not yet allowed): 1 allowed, 0 not, < 0 error. */
static int decide(cm_matcher *m, check_state *cs, split *sp, bool *splits, late_split *late, size_t k) {
    m->stats.n_checked++;
    if (late->open && (late->at_once || m->stats.n_steps - late->from >=
                                            (m->verdicts.slots ? CM_SPLIT_LATE_STEPS : CM_SPLIT_LATE_COLD))) {
        late->open = false;
        *splits = split_current(m, sp, cs->base) > 0;  /* (its sets replace the last candidate's) */
        cs->prev = NULL;
        if (*splits) atomic_fetch_add_explicit(&g_split_late_hits, 1, memory_order_relaxed);
        else sp->at = -1;
    }
    int rc = *splits ? check_split(m, sp, cs->base, k) : CM_SPLIT_FALLBACK;
    if (rc == CM_SPLIT_FALLBACK) {
        if (sp->at >= 0) cs->prev = NULL;  /* the split's sets replaced the last candidate's */
        sp->at = -1;  /* and check_token replaces them */
        return check_token(m, cs, k);
    }
    cs->prev = NULL;  /* the split's sets replaced the last candidate's */
    return rc;
}

static int check_candidates(cm_matcher *m, uint32_t *words) {
    const cm_vocab *v = m->g->v;
    size_t n_sets = m->c.n_sets, lo = m->cand_lo, hi = m->cand_hi;
    check_state cs = {n_sets - 1, NULL, 0, UINT32_MAX, NULL, &m->g->cache->stacks};
    /* a grammar with lookahead debts: completions read the bytes between too; and a store
     * costs more than it saves until the grammar's checks have run a few thousand steps */
    /* a segment grammar: every candidate through the counted chart (the stack verdicts and the
     * closing verdicts read the automata and the stacks without counts) */
    bool seg = m->g->has_segments;
    size_t steps = m->stats.n_steps, want = seg ? 0 : m->g->lim.stack_verdicts;
    bool counting = want && m->g->t.n_la <= 1 && atomic_load_explicit(&cs.store->steps, memory_order_relaxed) + 1 < want;
    if (lo < hi && want && m->g->t.n_la <= 1 && !counting && cm_stack_store_open(cs.store) &&
        !cm_stackmemo_begin(&m->stacks, n_sets - 1, v->max_len))
        cs.sm = &m->stacks;
    split sp;
    sp.at = -1;
    sp.rk = NULL;
    size_t min = m->g->lim.closing_verdicts;  /* fewer candidates: the split's sets cost more than it saves */
    bool wide = min && !seg && m->stats.n_candidates >= min;
    int rc = wide ? split_current(m, &sp, n_sets - 1) : 0;
    bool splits = rc > 0;
    if (rc > 0) rc = CM_OK;
    int late_mode = atomic_load_explicit(&g_split_late, memory_order_relaxed);
    late_split late = {min && !seg && !wide && late_mode, late_mode == 2, m->stats.n_steps};
    m->cand_lo = UINT32_MAX;
    m->cand_hi = 0;
    /* the candidates with verdicts kept, 64 at once: the rest never touch the store */
    const _Atomic uint64_t *kept = cs.sm ? cm_stack_store_kept(cs.store) : NULL;
    for (size_t w = lo; w < hi; w++) {
        uint64_t bits = m->cand[w];
        if (!bits) continue;  /* most words of a wide range: nothing to load or clear */
        uint64_t with = kept ? atomic_load_explicit(&kept[w], memory_order_relaxed) : 0;
        m->cand[w] = 0;
        for (; bits && rc >= 0; bits &= bits - 1) {
            size_t k = w * 64 + (unsigned)__builtin_ctzll(bits);
            uint32_t id = v->trie_ids[k];
            if (cm_bit(words, id)) continue;
            /* a candidate with verdicts kept at some depth waits for them (one lock for all) */
            if (with >> (k & 63) & 1 && cm_stackmemo_ask(cs.sm, cs.store, (uint32_t)k)) continue;
            rc = decide(m, &cs, &sp, &splits, &late, k);
            if (rc > 0) words[id >> 5] |= 1u << (id & 31);
        }
    }
    if (cs.sm && cs.sm->n_ask && rc >= 0) {
        cm_chart_truncate(&m->c, n_sets);  /* the keys read the sets up to the current one */
        size_t hits = cm_stackmemo_take(cs.sm, cs.store, &m->c, v->trie_ids, words);
        m->stats.n_checked += hits;
        cm_stackmemo_note_hits(hits);
        /* the rest, in trie order still, through the chart */
        cs.prev = NULL;
        sp.at = -1;
        for (size_t i = 0; i < cs.sm->n_ask && rc >= 0; i++) {
            uint32_t k = cs.sm->ask[i], id = v->trie_ids[k];
            rc = decide(m, &cs, &sp, &splits, &late, k);
            if (rc > 0) words[id >> 5] |= 1u << (id & 31);
        }
    }
    cm_chart_truncate(&m->c, n_sets);
    if (cs.sm && cs.sm->n_put) cm_stackmemo_flush(cs.sm, cs.store, &m->c);
    if (counting) atomic_fetch_add_explicit(&cs.store->steps, m->stats.n_steps - steps, memory_order_relaxed);
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
    new_stamp(m);
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state);
        if (m->stamp[s] == m->stamp_gen || !looked_up(g, c, c->items[i])) continue;
        if (g->has_segments && g->state_seg[s] != CM_SEG_NONE) {  /* keyed by its count too */
            n += !cm_grammar_seg_peek(g, s, c->counts[i]);
            continue;
        }
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
        if (!looked_up(g, c, c->items[i])) continue;
        cm_entry *owned;
        int rc;
        if (g->has_segments) {
            uint32_t k = g->state_seg[s] != CM_SEG_NONE ? c->counts[i] : CM_SEG_NONE;
            if (cm_grammar_seg_peek(g, s, k)) continue;
            cm_grammar_seg_entry(g, s, k, &owned, &rc);
        } else {
            if (cm_cache_peek(g, s)) continue;
            cm_grammar_entry(g, s, &owned, &rc);
        }
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

/* Steps 1-3, by a direct walk or from the cache, asking the memo first where
 * that turns out to be expensive: 0, 1 the memo had the mask, < 0 error.  While
 * *fresh, words[0..n_words) is still to be zeroed (a memo hit writes it whole). */
static int compute(cm_matcher *m, uint32_t *words, memo_key *key, bool *fresh) {
    const cm_grammar *g = m->g;
    int rc;
    if (uncached_states(m) >= g->lim.direct_walk_states) {
        /* a direct walk is always expensive: worth a signature */
        if (!key->tried && memo_hit(m, key, words)) return 1;
        zero_if_fresh(g, words, fresh);
        rc = direct_walk(m, words);
        if (!rc && g->lim.direct_walk_states > 1) rc = fill_some(m, CM_FILL_PER_WALK);
        return rc;
    }
    rc = g->has_segments ? gather_counted(m, words, fresh) : gather(m, words, fresh);
    zero_if_fresh(g, words, fresh);
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
    /* an error never leaves a stale (permissive) row; the vocabulary's words are zeroed
     * here unless a mask is computed (compute zeroes them, or copies an entry over them) */
    bool fresh = !m->err && !m->terminated;
    size_t from = fresh ? g->n_words : 0;
    if (n_words > from) memset(words + from, 0, (n_words - from) * sizeof *words);
    if (m->err) return CM_ERR_STATE;
    memset(&m->stats, 0, sizeof m->stats);
    m->stats.n_items = m->c.set_start[m->c.n_sets] - m->c.set_start[m->c.n_sets - 1];
    /* a segment grammar: no whole-mask memo (its signature carries no counts): tried already */
    memo_key key = {0, 0, g->has_segments};
    if (!m->terminated && !key.tried && m->stats.n_items >= g->lim.mask_memo_min_items && memo_hit(m, &key, words))
        return CM_OK;
    if (!m->terminated) {
        int rc = compute(m, words, &key, &fresh);
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
