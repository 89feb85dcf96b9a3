/* The matcher: one Earley chart per sequence, token history for rollback,
 * and the error state that sticks once a limit or allocation fails. */
#include <stdlib.h>
#include <string.h>

#include "matcher.h"

static int fail(cm_matcher *m, int rc) {
    if (rc < 0 && rc != CM_ERR_ARG) m->err = rc;
    return rc;
}

static int alloc_scratch(cm_matcher *m) {
    const cm_grammar *g = m->g;
    m->stamp = calloc(g->t.n_states, sizeof *m->stamp);
    m->cand = calloc((g->v->n_trie + 63) / 64 + 1, sizeof *m->cand);
    m->cand_lo = UINT32_MAX;
    m->cand_hi = 0;
    return (m->stamp && m->cand) ? CM_OK : CM_ERR_NOMEM;
}

int cm_matcher_new(const cm_grammar *g, cm_matcher **out) {
    if (!g || !out) return CM_ERR_ARG;
    *out = NULL;
    cm_matcher *m = calloc(1, sizeof *m);
    if (!m) return CM_ERR_NOMEM;
    m->g = g;
    int rc = alloc_scratch(m);
    if (!rc) rc = cm_chart_init(&m->c, g);
    if (rc) {
        cm_matcher_free(m);
        return rc;
    }
    *out = m;
    return CM_OK;
}

void cm_matcher_free(cm_matcher *m) {
    if (!m) return;
    cm_chart_free(&m->c);
    cm_verdicts_free(&m->verdicts);
    cm_stackmemo_free(&m->stacks);
    free(m->hist);
    free(m->stamp);
    free(m->cand);
    free(m->sig);
    free(m->sq);
    free(m->slabel);
    free(m->sgen);
    free(m);
}

int cm_matcher_fork(const cm_matcher *m, cm_matcher **out) {
    if (!m || !out) return CM_ERR_ARG;
    *out = NULL;
    cm_matcher *f = calloc(1, sizeof *f);
    if (!f) return CM_ERR_NOMEM;
    f->g = m->g;
    f->terminated = m->terminated;
    f->err = m->err;
    int rc = alloc_scratch(f);
    if (!rc) rc = cm_chart_copy(&f->c, &m->c);
    if (!rc && m->n_hist) {
        f->hist = malloc(m->n_hist * sizeof *f->hist);
        if (!f->hist) rc = CM_ERR_NOMEM;
        else memcpy(f->hist, m->hist, m->n_hist * sizeof *f->hist);
        f->n_hist = f->cap_hist = m->n_hist;
    }
    if (rc) {
        cm_matcher_free(f);
        return rc;
    }
    *out = f;
    return CM_OK;
}

void cm_matcher_reset(cm_matcher *m) {
    if (!m) return;
    cm_chart_truncate(&m->c, 1);
    m->n_hist = 0;
    m->terminated = false;
    m->err = CM_OK;
}

static int push_hist(cm_matcher *m, uint32_t n_sets) {
    if (m->n_hist == m->cap_hist) {
        size_t n = m->cap_hist ? m->cap_hist * 2 : 64;
        uint32_t *p = realloc(m->hist, n * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        m->hist = p;
        m->cap_hist = n;
    }
    m->hist[m->n_hist++] = n_sets;
    return CM_OK;
}

static bool is_stop(const cm_grammar *g, uint32_t token) {
    for (size_t i = 0; i < g->n_stop; i++)
        if (g->stop_ids[i] == token) return true;
    return false;
}

/* Scan bytes; on rejection or error restore the chart.  1 = all scanned. */
static int scan_all(cm_matcher *m, const uint8_t *p, size_t n) {
    size_t n_sets = m->c.n_sets;
    for (size_t i = 0; i < n; i++) {
        int r = cm_chart_scan(&m->c, m->g, p[i]);
        if (r <= 0) {
            cm_chart_truncate(&m->c, n_sets);
            return r;
        }
    }
    return 1;
}

/* One accepted step made of bytes: scanned, recorded for rollback, or undone. */
static int step_bytes(cm_matcher *m, const uint8_t *p, size_t n) {
    uint32_t before = (uint32_t)m->c.n_sets;
    int r = scan_all(m, p, n);
    if (r <= 0) return r < 0 ? fail(m, r) : 0;
    int rc = push_hist(m, before);
    if (rc) {
        cm_chart_truncate(&m->c, before);
        return fail(m, rc);
    }
    return 1;
}

static bool token_edge_matches(const cm_matcher *m, uint32_t token) {
    const cm_grammar *g = m->g;
    const cm_chart *c = &m->c;
    if (!g->t.n_token_sets) return false;
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        uint32_t s = cm_st(c->items[i].state);
        if (!g->has_tokens[s]) continue;
        for (uint32_t e = g->t.tok_off[s]; e < g->t.tok_off[s + 1]; e++)
            if (cm_token_in_set(g, g->t.tok_set[e], token)) return true;
    }
    return false;
}

/* A token some token terminal takes: its bytes (if any) through the byte
 * automata, and the whole token through the token edges, merged. */
static int accept_via_token_edge(cm_matcher *m, uint32_t token) {
    const cm_grammar *g = m->g;
    size_t before = m->c.n_sets;
    int r = 0;
    if (g->v->in_trie[token]) {
        uint32_t len;
        const uint8_t *p = cm_tok_bytes(g->v, token, &len);
        r = scan_all(m, p, len);
        if (r < 0) return fail(m, r);
    }
    int rc = cm_chart_token_scan(&m->c, g, token, before - 1, r == 1);
    if (rc >= 0 && rc != 1) rc = CM_ERR_STATE;  /* matched above, so it must advance */
    if (rc < 0) {
        cm_chart_truncate(&m->c, before);
        return fail(m, rc);
    }
    if ((rc = push_hist(m, (uint32_t)before))) {
        cm_chart_truncate(&m->c, before);
        return fail(m, rc);
    }
    return 1;
}

int cm_matcher_accept_token(cm_matcher *m, uint32_t token) {
    if (!m) return CM_ERR_ARG;
    const cm_grammar *g = m->g;
    if (token >= g->v->n_tokens) return CM_ERR_ARG;
    if (m->err) return CM_ERR_STATE;
    if (m->terminated) return 0;
    uint32_t before = (uint32_t)m->c.n_sets;
    if (token_edge_matches(m, token)) return accept_via_token_edge(m, token);
    if (is_stop(g, token)) {
        if (!cm_chart_accepting(&m->c, g)) return 0;
        int rc = push_hist(m, before);
        if (rc) return fail(m, rc);
        m->terminated = true;
        return 1;
    }
    if (!g->v->in_trie[token]) return 0;
    uint32_t len;
    const uint8_t *p = cm_tok_bytes(g->v, token, &len);
    return step_bytes(m, p, len);
}

int cm_matcher_accept_bytes(cm_matcher *m, const uint8_t *data, size_t n) {
    if (!m || (n && !data)) return CM_ERR_ARG;
    if (m->err) return CM_ERR_STATE;
    if (m->terminated) return n == 0;
    return step_bytes(m, data, n);
}

int cm_matcher_can_accept_bytes(cm_matcher *m, const uint8_t *data, size_t n) {
    if (!m || (n && !data)) return CM_ERR_ARG;
    if (m->err) return CM_ERR_STATE;
    if (m->terminated) return n == 0;
    size_t n_sets = m->c.n_sets;
    int r = scan_all(m, data, n);
    if (r > 0) cm_chart_truncate(&m->c, n_sets);
    return r < 0 ? fail(m, r) : r;
}

int cm_matcher_is_accepting(const cm_matcher *m) {
    return m && !m->err && (m->terminated || cm_chart_accepting(&m->c, m->g));
}

int cm_matcher_is_terminated(const cm_matcher *m) { return m && m->terminated; }
int cm_matcher_error(const cm_matcher *m) { return m ? m->err : CM_ERR_ARG; }
size_t cm_matcher_num_tokens(const cm_matcher *m) { return m ? m->n_hist : 0; }
size_t cm_matcher_chart_items(const cm_matcher *m) { return m ? m->c.n_items : 0; }

int cm_matcher_rollback(cm_matcher *m, size_t k) {
    if (!m || k > m->n_hist) return CM_ERR_ARG;
    m->err = CM_OK; /* the chart itself is intact: an error only ever aborts a step */
    if (k == 0) return CM_OK;
    m->n_hist -= k;
    cm_chart_truncate(&m->c, m->hist[m->n_hist]);
    m->terminated = false;
    return CM_OK;
}

long cm_matcher_jump_forward(cm_matcher *m, uint8_t *buf, size_t cap) {
    if (!m || (cap && !buf)) return CM_ERR_ARG;
    if (m->err) return CM_ERR_STATE;
    if (m->terminated) return 0;
    const cm_grammar *g = m->g;
    size_t n_sets = m->c.n_sets, n = 0;
    while (n < cap && !cm_chart_accepting(&m->c, g)) {
        uint32_t next[8] = {0};
        const cm_chart *c = &m->c;
        bool tokens = false;
        for (size_t i = c->set_start[c->n_sets - 1]; i < c->n_items; i++) {
            uint32_t s = cm_st(c->items[i].state), la = cm_la(c->items[i].state);
            tokens |= g->has_tokens[s];
            for (int b = 0; b < 256 && !g->has_segments; b++)
                if (cm_bit(g->next_bytes + (size_t)s * 8, (unsigned)b) && !cm_la_forbids(g, la, (unsigned)b))
                    next[b >> 5] |= 1u << (b & 31);
        }
        if (tokens) break;  /* a whole token may come next */
        for (int b = 0; b < 256 && g->has_segments; b++)  /* a head's next bytes depend on its count */
            if (cm_chart_viable(c, g, (uint8_t)b)) next[b >> 5] |= 1u << (b & 31);
        int only = -1, count = 0;
        for (int b = 0; b < 256 && count < 2; b++)
            if ((next[b >> 5] >> (b & 31)) & 1u) only = b, count++;
        if (count != 1) break;
        int r = cm_chart_scan(&m->c, g, (uint8_t)only);
        if (r < 0) {
            cm_chart_truncate(&m->c, n_sets);
            return fail(m, r);
        }
        if (r == 0) break;
        buf[n++] = (uint8_t)only;
    }
    cm_chart_truncate(&m->c, n_sets);
    return (long)n;
}

size_t cm_matcher_seg_items(const cm_matcher *m, uint32_t *state, uint32_t *origin, uint32_t *k, size_t cap) {
    if (!m) return 0;
    const cm_chart *c = &m->c;
    size_t lo = c->set_start[c->n_sets - 1], n = c->set_start[c->n_sets] - lo;
    for (size_t i = 0; i < n && i < cap; i++) {
        if (state) state[i] = cm_st(c->items[lo + i].state);
        if (origin) origin[i] = c->items[lo + i].origin;
        if (k) k[i] = m->g->has_segments ? c->counts[lo + i] : CM_SEG_NONE;
    }
    return n;
}
