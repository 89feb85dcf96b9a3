/* Trie walks through private Earley charts.
 *
 * Walk the trie from an item at `state` whose caller is unknown (origin
 * CM_OUTER), with a private Earley chart: calls made along the way are known,
 * so only completing the item's own rule depends on the context.
 *   - all of a token's bytes scanned, chart alive   -> accepted, whatever the stack;
 *   - dies after the rule could complete at depth >= 1 with the next byte in
 *     FOLLOW(rule)                                     -> uncertain (checked at run time);
 *   - otherwise                                        -> rejected.
 * Completing at depth 0 needs no check: that continuation is another item of
 * the same Earley set.  Entries sharing a dead prefix share its fate. */
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "walk.h"

int cm_walk_init(cm_walk *w, const cm_grammar *g) {
    size_t depths = (size_t)g->v->max_len + 1;
    memset(w, 0, sizeof *w);
    w->bits = calloc(g->n_words ? g->n_words : 1, sizeof *w->bits);
    w->ex = malloc(depths);
    w->fl = malloc(depths);
    w->st = malloc(depths * sizeof *w->st);
    return w->bits && w->ex && w->fl && w->st ? CM_OK : CM_ERR_NOMEM;
}

void cm_walk_free(cm_walk *w) {
    free(w->bits);
    free(w->unc);
    free(w->ex);
    free(w->fl);
    free(w->st);
    memset(w, 0, sizeof *w);
}

int cm_walk_push_uncertain(cm_walk *w, uint32_t k) {
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

int cm_walk_chart(const cm_grammar *g, cm_chart *c, uint32_t rule, size_t k, size_t k_end, uint32_t d0, uint8_t f0,
                  int ex0, cm_walk *w) {
    const cm_vocab *v = g->v;
    uint8_t *ex = w->ex, *fl = w->fl;
    size_t base = c->n_sets;  /* sets at depth d0 and before */
    int rc = CM_OK;
    /* an exit at depth 0 is another item of the same set; deeper, it is an exit
     * (ex0 >= 0: the exit of the set the items were taken from) */
    ex[d0] = d0 ? (ex0 >= 0 ? (uint8_t)ex0 : c->exited) : 0;
    fl[d0] = f0;  /* an exit before d0 (a flat walk's) */
    while (k < k_end && !rc) {
        uint32_t len, d = v->trie_lcp[k] > d0 ? v->trie_lcp[k] : d0, dead_at = 0;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint8_t f = 0;
        cm_chart_truncate(c, base + (d - d0));
        for (; d < len; d++) {
            f = fl[d] | (ex[d] && cm_follows(g, rule, p[d]));
            int r = cm_chart_scan(c, g, p[d]);
            if (r <= 0) {
                rc = r;
                dead_at = d + 1;
                break;
            }
            ex[d + 1] = c->exited;
            fl[d + 1] = f;
        }
        if (rc) break;
        if (!dead_at) {
            cm_walk_accept(w, v->trie_ids[k++]);
            continue;
        }
        /* every entry sharing the dead prefix shares its fate */
        size_t end = v->skip[v->trie_off[k] + dead_at - 1];
        for (; f && k < end && !rc; k++) rc = cm_walk_push_uncertain(w, (uint32_t)k);
        k = end;
    }
    return rc;
}

int cm_walk_range(const cm_grammar *g, const uint32_t *states, uint32_t n_states, uint32_t rule, size_t k,
                  size_t k_end, uint32_t d0, uint8_t f0, int ex0, cm_walk *w) {
    cm_chart c;
    int rc = cm_chart_init_items(&c, g, states, n_states);
    if (!rc) rc = cm_walk_chart(g, &c, rule, k, k_end, d0, f0, ex0, w);
    cm_chart_free(&c);
    return rc;
}

/* Classified as cm_walk_range does; consecutive entries share the sets of
 * their common prefix. */
int cm_walk_listed_at(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, uint32_t d0, cm_walk *w) {
    const cm_vocab *v = g->v;
    uint8_t *ex = w->ex, *fl = w->fl;
    uint32_t rule = g->t.state_rule[state];
    cm_chart c;
    int rc = cm_chart_init_item(&c, g, state, CM_OUTER);
    const uint8_t *prev = NULL;
    uint32_t have = d0;  /* sets are built for prev[d0..have) */
    ex[d0] = fl[d0] = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t len, id = v->trie_ids[ks[i]];
        if (cm_bit(w->bits, id)) continue;
        const uint8_t *p = cm_trie_bytes(v, ks[i], &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, p, len) : d0;
        if (d < d0) d = d0;  /* the first d0 bytes are shared, and not read */
        bool dead = false;
        uint8_t f = 0;
        cm_chart_truncate(&c, (size_t)(d - d0) + 1);
        for (; d < len; d++) {
            f = fl[d] | (ex[d] && cm_follows(g, rule, p[d]));
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
        if (!dead) cm_set_bit(w->bits, id);
        else if (f) rc = cm_walk_push_uncertain(w, ks[i]);
    }
    cm_chart_free(&c);
    return rc;
}

int cm_walk_listed(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, cm_walk *w) {
    return cm_walk_listed_at(g, state, ks, n, 0, w);
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

/* A token is uncertain because the item's rule may complete inside it, at some
 * depth d >= 1 with the next byte in FOLLOW; from there on only the rule's
 * callers read it.  The rule's upward chart (every return state, each
 * returning again when its own rule completes: cm_chart_init_returns)
 * over-approximates every real continuation, so if it dies on the token's rest
 * after every such d, the real chart dies too.  FOLLOW only looks at the next
 * byte; this reads them all (after a Lark NAME, " B\xe1\xba\xa1n" leaves the
 * name, starts a Unicode space, and cannot go on).  Any failure here keeps the
 * tokens: the filter only saves run-time checks. */
void cm_walk_filter_uncertain(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_vocab *v = g->v;
    uint8_t *ex = w->ex;
    uint32_t rule = g->t.state_rule[state];
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
            if (!ex[e] || !cm_follows(g, rule, p[e])) continue;
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

int cm_walk_finish(const cm_grammar *g, cm_walk *w, cm_entry *e) {
    e->n_accepted = w->n_accepted;
    e->n_uncertain = (uint32_t)w->n_unc;
    e->uncertain = w->unc;
    w->unc = NULL;
    e->bytes = sizeof *e + w->n_unc * 4;
    if ((size_t)w->n_accepted < g->n_words) {
        e->accepted_ids = malloc((w->n_accepted ? w->n_accepted : 1) * sizeof *e->accepted_ids);
        if (!e->accepted_ids) return CM_ERR_NOMEM;
        /* few ids in a mostly empty bitset: skip zeros four words at a time, stop at the last id */
        uint32_t j = 0, n = w->n_accepted;
        const uint32_t *bits = w->bits;
        for (size_t i = 0; i < g->n_words && j < n; i++) {
            if (!(i & 3) && i + 4 <= g->n_words && !(bits[i] | bits[i + 1] | bits[i + 2] | bits[i + 3])) {
                i += 3;
                continue;
            }
            for (uint32_t word = bits[i]; word; word &= word - 1)
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
