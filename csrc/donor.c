/* Entries taken from a like state's.
 *
 * A solo state (calling nothing, no token edges) that goes where another solo
 * state goes on most bytes has that state's fate on every token whose first
 * byte leads both to the same state: after that byte the two private charts
 * are the same one item.  The states inside a JSON key that may be any string
 * but the schema's own keys are such states: after `{"bil` (a prefix of
 * "billing_address") every byte but 'l' leads where any key goes.  So the
 * entry is the donor's -- the state most of its bytes lead to -- with the
 * subtrees of the few first bytes where the two part walked again: a key
 * position costs tens of microseconds instead of a walk of the whole trie. */
#include "cache.h"
#include "donor.h"
#include "flat.h"
#include "loops.h"

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

/* The solo state most of s's bytes lead to, if that state mostly loops to
 * itself (the inside of a string: its own entry is one walk, shared by equal
 * loops) or has its entry already -- not a chain of donors. */
static int32_t donor_state(const cm_grammar *g, uint32_t s) {
    int32_t d = mode_target(g, s);
    if (d < 0 || (uint32_t)d == s || !g->solo[d] || g->cache->building[d]) return -1;
    if (cm_cache_peek(g, (uint32_t)d)) return d;
    return mode_target(g, (uint32_t)d) == d ? d : -1;
}

int32_t cm_donor_of(const cm_grammar *g, uint32_t state, bool *part) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    if (!g->lim.compose_entries || !g->solo[state] || g->cache->compose_depth >= CM_COMPOSE_MAX_DEPTH) return -1;
    int32_t donor = donor_state(g, state);
    if (donor < 0) return -1;
    /* a segment grammar: both outside segments (their entries by state; after a shared first
     * byte both charts are the one item, a segment's head entered at count 0 in each) */
    if (g->has_segments && (g->state_seg[state] != CM_SEG_NONE || g->state_seg[donor] != CM_SEG_NONE)) return -1;
    size_t redo = 0;
    for (unsigned b = 0; b < 256; b++) {
        size_t cb = t->byte_class[b];
        part[b] = t->trans[(size_t)state * t->n_classes + cb] != t->trans[(size_t)donor * t->n_classes + cb];
        if (part[b]) redo += v->first_off[b + 1] - v->first_off[b];
    }
    return redo * CM_DONOR_MAX_REDO > v->n_trie ? -1 : donor;
}

int cm_donor_build(const cm_grammar *g, uint32_t state, const cm_entry *de, const bool *part, cm_walk *w) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    const uint32_t *lo = v->first_off;
    int rc = CM_OK;
    cm_or_accepted(g, w->bits, de, NULL);  /* w->bits is empty */
    /* the donor's name sets but those of the first bytes walked again (cleared below) */
    if (cm_name_sets_on())
        for (unsigned b = 0; b < 256; b++)
            if (!part[b] && ((de->names[b >> 5] >> (b & 31)) & 1u)) w->names[b >> 5] |= 1u << (b & 31);
    for (uint32_t i = 0; !rc && i < de->n_uncertain; i++)
        if (!part[v->trie_data[v->trie_off[de->uncertain[i]]]]) rc = cm_walk_push_uncertain(w, de->uncertain[i]);
    uint32_t rule = t->state_rule[state];
    for (unsigned b = 0; !rc && b < 256; b++) {
        if (!part[b]) continue;
        for (size_t k = lo[b]; k < lo[b + 1]; k++) w->bits[v->trie_ids[k] >> 5] &= ~(1u << (v->trie_ids[k] & 31));
        int32_t y = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
        if (y < 0 || lo[b] == lo[b + 1]) continue;
        uint32_t from = (uint32_t)y;  /* a segment grammar's through the counted chart: flat walks read no count */
        rc = g->has_segments ? cm_walk_range(g, &from, 1, rule, lo[b], lo[b + 1], 1, 0, -1, w)
                             : cm_flat_walk(g, from, rule, lo[b], lo[b + 1], 1, w);
    }
    if (rc) return rc;
    w->n_unc = w->n_unc ? cm_sort_unique_u32(w->unc, w->n_unc) : 0;
    w->n_accepted = (uint32_t)cm_count_bits(w->bits, g->n_words);
    return CM_OK;
}
