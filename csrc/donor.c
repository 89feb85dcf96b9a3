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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "donor.h"
#include "flat.h"
#include "loops.h"

#define CM_DONOR_MAX_REDO 4   /* walk at most 1/4 of the trie again */

/* mode_target by s's own bytes where it has few (below): on, or every state by its classes. */
static atomic_int g_mode_bytes = 1;
static atomic_size_t g_mode_bytes_hits;  /* states counted by their bytes (the tests read it) */

void cm_donor_mode_bytes_enable(int on) { atomic_store(&g_mode_bytes, on); }
size_t cm_donor_mode_bytes_hits(void) { return atomic_load(&g_mode_bytes_hits); }

#define CM_MODE_BYTES 32  /* bytes with a transition counted one by one, at most */

/* The state most bytes of s lead to (-1: none); of those most led to, the one whose lowest
 * class is lowest (the class scan's order, below).  Asked of every solo state whose entry is
 * built, and of its candidate donor (~870 times over the first documents of the 20 median
 * schemas): by classes that is n_classes^2 compares and a count of the 256 bytes' classes
 * (~2.3 K instructions), where most such states (a key's or a format's position) have a few
 * bytes: those are counted from next_bytes, each byte's target looked up among the few seen. */
static int32_t mode_target(const cm_grammar *g, uint32_t s) {
    const cm_tables *t = &g->t;
    const uint32_t *nb = g->next_bytes + (size_t)s * 8;
    int n_live = 0;
    for (int j = 0; j < 8; j++) n_live += __builtin_popcount(nb[j]);
    if (n_live <= CM_MODE_BYTES && atomic_load_explicit(&g_mode_bytes, memory_order_relaxed)) {
        const int32_t *row = t->trans + (size_t)s * t->n_classes;
        int32_t tg[CM_MODE_BYTES];
        uint32_t cnt[CM_MODE_BYTES], low[CM_MODE_BYTES];
        int n_tg = 0;
        for (int j = 0; j < 8; j++)
            for (uint32_t x = nb[j]; x; x &= x - 1) {
                uint32_t c = t->byte_class[j * 32 + __builtin_ctz(x)];
                int32_t r = row[c];
                if (r < 0) continue;
                int i = 0;
                while (i < n_tg && tg[i] != r) i++;
                if (i == n_tg) tg[n_tg] = r, cnt[n_tg] = 0, low[n_tg++] = c;
                cnt[i]++;
                if (c < low[i]) low[i] = c;
            }
        int best = -1;
        for (int i = 0; i < n_tg; i++)
            if (best < 0 || cnt[i] > cnt[best] || (cnt[i] == cnt[best] && low[i] < low[best])) best = i;
        atomic_fetch_add_explicit(&g_mode_bytes_hits, 1, memory_order_relaxed);
        return best < 0 ? -1 : tg[best];
    }
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

/* Alike states (alike_subtree): both solo, in one rule, accepting alike and alive on the
 * same classes, so a token's next byte does the same in both (dies, with an exit flag alike,
 * or goes on). */
static bool alike(const cm_grammar *g, uint32_t x, uint32_t y) {
    const cm_tables *t = &g->t;
    if (!g->solo[x] || !g->solo[y] || t->accepting[x] != t->accepting[y] || t->state_rule[x] != t->state_rule[y])
        return false;
    const int32_t *rx = t->trans + (size_t)x * t->n_classes, *ry = t->trans + (size_t)y * t->n_classes;
    for (uint32_t c = 0; c < t->n_classes; c++)
        if ((rx[c] < 0) != (ry[c] < 0)) return false;
    return true;
}

static atomic_int g_alike = 1;
static atomic_size_t g_alike_hits;  /* first bytes' subtrees taken from the donor so (the tests read it) */

void cm_donor_alike_enable(int on) { atomic_store(&g_alike, on); }
size_t cm_donor_alike_hits(void) { return atomic_load(&g_alike_hits); }

/* Does every token of first byte b have the same fate from `state` as from the donor d (in the
 * same rule)?  Each trie entry is read from both in step: where the two reach one state (or
 * both die) the rest of its subtree is the same in both; while they differ they must be alike
 * (same rule, accepting, live classes: the walk's exits and deaths are the same) -- so a
 * token's fate from either is the other's.  A counted class with resets (an unanchored
 * `[0-9a-f]{32}`: a byte outside the class goes back to the first position) has positions far
 * from the end alike to the first: the pairs differ only along the class's runs, shorter in any
 * token than the distance to the end.  The walk reads only the entries where the two differ
 * (tens of nodes a run), and stops at the first pair not alike. */
static bool alike_subtree(const cm_grammar *g, uint32_t state, uint32_t d, unsigned b, uint32_t *xs) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t *ys = xs + v->max_len + 1;
    memset(xs, 0xff, 2 * ((size_t)v->max_len + 1) * sizeof *xs);  /* no pair kept (alike: never dead) */
    xs[0] = state;
    ys[0] = d;
    for (size_t k = v->first_off[b], end = v->first_off[b + 1]; k < end;) {
        uint32_t len, i = k == v->first_off[b] ? 0 : v->trie_lcp[k];  /* the pairs up to i hold */
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        size_t next = k + 1;
        for (; i < len; i++) {
            size_t cb = t->byte_class[p[i]];
            int32_t x = t->trans[(size_t)xs[i] * t->n_classes + cb], y = t->trans[(size_t)ys[i] * t->n_classes + cb];
            if (x == y) {  /* one state, or both dead: the subtree of the first i + 1 bytes settled */
                next = v->skip[v->trie_off[k] + i];
                break;
            }
            /* a pair kept at this depth was found alike already (most are: the same pair a depth) */
            bool kept = xs[i + 1] == (uint32_t)x && ys[i + 1] == (uint32_t)y;
            if (x < 0 || y < 0 || (!kept && !alike(g, (uint32_t)x, (uint32_t)y))) return false;
            xs[i + 1] = (uint32_t)x;
            ys[i + 1] = (uint32_t)y;
        }
        k = next;
    }
    return true;
}

/* The first bytes to walk again: part's, less those whose subtrees are alike (alike_subtree). */
static int redo_bytes(const cm_grammar *g, uint32_t state, uint32_t donor, const bool *part, bool *redo) {
    memcpy(redo, part, 256 * sizeof *redo);
    if (!atomic_load_explicit(&g_alike, memory_order_relaxed) || g->has_segments ||
        g->t.state_rule[state] != g->t.state_rule[donor] || !alike(g, state, donor))
        return CM_OK;
    uint32_t *xs = NULL;
    for (unsigned b = 0; b < 256; b++) {
        if (!part[b] || g->v->first_off[b] == g->v->first_off[b + 1]) continue;
        if (!xs && !(xs = malloc(2 * ((size_t)g->v->max_len + 1) * sizeof *xs))) return CM_ERR_NOMEM;
        if (alike_subtree(g, state, donor, b, xs)) {
            redo[b] = false;
            atomic_fetch_add_explicit(&g_alike_hits, 1, memory_order_relaxed);
        }
    }
    free(xs);
    return CM_OK;
}

int cm_donor_build(const cm_grammar *g, uint32_t state, uint32_t donor, const cm_entry *de, const bool *part_in,
                   cm_walk *w) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    const uint32_t *lo = v->first_off;
    bool part[256];
    int rc = redo_bytes(g, state, donor, part_in, part);
    if (rc) return rc;
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
    /* every part byte's subtree alike: the donor's uncertain tokens, as its filter left them (the
     * filter reads a token's exits, the same in both, and the rule's upward chart: one rule) */
    bool all = memcmp(part, part_in, sizeof part) != 0;
    for (unsigned b = 0; all && b < 256; b++) all = !part[b];
    if (all) w->filtered = true;
    w->n_accepted = (uint32_t)cm_count_bits(w->bits, g->n_words);
    return CM_OK;
}
