/* Blocks of counted repetitions.
 *
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
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "chains.h"
#include "wrap.h"

bool cm_wrap_applies(const cm_grammar *g, uint32_t state, size_t n_uncertain) {
    if (!g->lim.wrap_repeats || g->t.n_la > 1 || !n_uncertain || !g->rule_block[g->t.state_rule[state]]) return false;
    /* from a chain the split is a bit test a token, and a mask then ORs one bitset where it
     * would check each token: worth it for a few */
    return n_uncertain >= g->lim.wrap_repeats || cm_chain_wraps(g, state);
}

/* Run p[d..len) through the block automaton from st[d] / wr[d] (wrapped
 * already), wrapping once from an accepting state into the block's start:
 * how far it got (len: all of p). */
static uint32_t run_block(const cm_tables *t, uint32_t start, const uint8_t *p, uint32_t d, uint32_t len,
                          uint32_t *st, uint8_t *wr) {
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
    return d;
}

int cm_wrap_split(const cm_grammar *g, uint32_t state, cm_entry *e) {
    int done = cm_chain_wrap(g, state, e);  /* a position of a chain: one bit test a token */
    if (done) return done < 0 ? done : CM_OK;
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t start = t->rule_start[t->state_rule[state]];
    uint32_t *bits = calloc(g->n_words ? g->n_words : 1, sizeof *bits);
    uint32_t *rest = malloc(e->n_uncertain * sizeof *rest);
    uint32_t *st = malloc(((size_t)v->max_len + 1) * sizeof *st);
    uint8_t *wr = malloc((size_t)v->max_len + 1);
    int rc = bits && rest && st && wr ? CM_OK : CM_ERR_NOMEM;
    const uint8_t *prev = NULL;
    uint32_t have = 0, n_rest = 0, n_wrap = 0;
    if (!rc) {
        st[0] = state;
        wr[0] = 0;
    }
    for (size_t i = 0; !rc && i < e->n_uncertain; i++) {
        uint32_t k = e->uncertain[i], len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint32_t d = run_block(t, start, p, prev ? cm_common_prefix(prev, have, p, len) : 0, len, st, wr);
        prev = p;
        have = d;
        if (d == len && wr[len]) {
            cm_set_bit(bits, v->trie_ids[k]);
            n_wrap++;
        } else {
            rest[n_rest++] = k;
        }
    }
    free(st);
    free(wr);
    if (rc || !n_wrap) {
        free(bits);
        free(rest);
        return rc;
    }
    e->wrap_bits = bits;
    e->rest = rest;
    e->n_rest = n_rest;
    e->bytes += g->n_words * 4 + (size_t)n_rest * 4;
    return CM_OK;
}

int cm_grammar_entry_wrap(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *rest, size_t *n_rest) {
    if (!g || !words || !rest || !n_rest || state >= g->t.n_states || g->has_segments) return CM_ERR_ARG;
    cm_entry *owned;
    int rc;
    const cm_entry *e = cm_grammar_entry(g, state, &owned, &rc);
    if (rc) return rc;
    int split = e->wrap_bits != NULL;
    if (split) {
        memcpy(words, e->wrap_bits, g->n_words * sizeof *words);
        for (uint32_t i = 0; i < e->n_rest; i++) rest[i] = g->v->trie_ids[e->rest[i]];
        *n_rest = e->n_rest;
    }
    cm_entry_free(owned);
    return split;
}
