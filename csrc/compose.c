/* Entries composed from their callees'.
 *
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
 * by s's real private chart (cm_walk_listed): the same entry as a whole walk,
 * for a few hundred checks.  A nullable callee R (a string's body that may be
 * empty) adds a part more: s advanced over R at once, (s', OUTER) in the first
 * set, whose tokens have the fate its own entry gives them (its uncertain ones
 * end s's rule too, and are checked).  A callee whose entry is being built
 * (recursion through start states; s' == s), token edges, or too many tokens
 * to check send s back to the walk (cache.c fetches the parts). */
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "chains.h"
#include "compose.h"
#include "flat.h"

static inline bool marker_rule(const cm_grammar *g, uint32_t r) { return g->t.rule_la[r] != 0; }

bool cm_compose_can(const cm_grammar *g, uint32_t state) {
    const cm_tables *t = &g->t;
    if (!g->lim.compose_entries || g->has_tokens[state] || g->cache->compose_depth >= CM_COMPOSE_MAX_DEPTH ||
        t->ref_off[state] == t->ref_off[state + 1])
        return false;
    for (uint32_t e = t->ref_off[state]; e < t->ref_off[state + 1]; e++) {
        uint32_t r = t->ref_rule[e], after;
        uint32_t part = marker_rule(g, r) ? t->ref_target[e] : t->rule_start[r];
        if (part == state || g->cache->building[part]) return false;
        if (!t->rule_nullable[r] || marker_rule(g, r)) continue;
        /* an empty R may owe a lookahead debt when the grammar has any: not composed */
        if (!cm_compose_null_part(g, e, &after) || after == state || g->cache->building[after]) return false;
    }
    return true;
}

bool cm_compose_null_part(const cm_grammar *g, uint32_t e, uint32_t *after) {
    const cm_tables *t = &g->t;
    uint32_t r = t->ref_rule[e];
    *after = t->ref_target[e];
    return t->rule_nullable[r] && !marker_rule(g, r) && t->n_la <= 1;
}

uint32_t cm_compose_part_state(const cm_grammar *g, uint32_t e, uint32_t *la) {
    const cm_tables *t = &g->t;
    uint32_t r = t->ref_rule[e];
    *la = marker_rule(g, r) ? t->rule_la[r] : 0;
    return *la ? t->ref_target[e] : t->rule_start[r];
}

size_t cm_compose_part_candidates(const cm_grammar *g, const cm_part *p) {
    size_t n = p->e->n_uncertain;
    if (p->la) n += g->la_pending_off[p->la + 1] - g->la_pending_off[p->la];
    return n;
}

/* Byte edges: each first byte's subtree walked from the state it leads to. */
static int walk_byte_edges(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    int rc = cm_chain_bytes(g, state, w);  /* a long string's start: its chain's walk */
    if (rc) return rc < 0 ? rc : CM_OK;
    for (unsigned b = 0; b < 256 && !rc; b++) {
        int32_t y = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
        if (y < 0) continue;
        size_t k = v->first_off[b], k_end = v->first_off[b + 1];
        if (k < k_end) rc = cm_flat_walk(g, (uint32_t)y, t->state_rule[state], k, k_end, 1, w);
    }
    return rc;
}

/* The parts' accepted tokens into w, their candidates into cand (sorted, distinct): their number. */
static size_t gather_parts(const cm_grammar *g, const cm_part *parts, uint32_t n_parts, cm_walk *w, uint32_t *cand) {
    size_t n_cand = 0;
    for (uint32_t i = 0; i < n_parts; i++) {
        const cm_entry *ce = parts[i].e;
        uint32_t la = parts[i].la;
        cm_or_accepted(g, w->bits, ce, la ? g->la_allow + (size_t)la * g->n_words : NULL);
        if (ce->n_uncertain) memcpy(cand + n_cand, ce->uncertain, ce->n_uncertain * sizeof *cand);
        n_cand += ce->n_uncertain;
        if (la) {
            uint32_t a = g->la_pending_off[la], z = g->la_pending_off[la + 1];
            if (z > a) memcpy(cand + n_cand, g->la_pending + a, (z - a) * sizeof *cand);
            n_cand += z - a;
        }
    }
    return n_cand ? cm_sort_unique_u32(cand, n_cand) : 0;
}

int cm_compose(const cm_grammar *g, uint32_t state, const cm_part *parts, uint32_t n_parts, size_t n_cand,
               cm_walk *w) {
    const cm_vocab *v = g->v;
    uint32_t *cand = malloc((n_cand ? n_cand : 1) * sizeof *cand);
    if (!cand) return CM_ERR_NOMEM;
    int rc = walk_byte_edges(g, state, w);
    if (!rc) n_cand = gather_parts(g, parts, n_parts, w, cand);
    if (!rc) rc = cm_walk_listed(g, state, cand, n_cand, w);
    if (!rc) {
        /* the byte walks' uncertain tokens that a call accepts, and repeats, go */
        size_t n_unc = w->n_unc ? cm_sort_unique_u32(w->unc, w->n_unc) : 0, kept = 0;
        for (size_t i = 0; i < n_unc; i++)
            if (!cm_bit(w->bits, v->trie_ids[w->unc[i]])) w->unc[kept++] = w->unc[i];
        w->n_unc = kept;
        w->n_accepted = (uint32_t)cm_count_bits(w->bits, g->n_words);
    }
    free(cand);
    return rc;
}
