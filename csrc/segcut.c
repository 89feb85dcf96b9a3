/* The cut of counted segments (docs/design.md §7, "Counters in the parser" (2) Entries, and
 * "The cut of counted segments", session 34).
 *
 * An entry of a configuration whose top item is in a segment at count k is the unbounded
 * unit's entry minus the tokens the bounds forbid: a token that leaves the segment must read
 * between need = lo - k and budget = hi - k units before its EXIT byte, one that stays at most
 * budget (a trailing partial unit counting one).  Those counts depend on the token and the
 * segment state it starts from only, so they are computed once per (unit state, vocabulary) by
 * one walk of the trie from that state (a prefix shared by tokens walked once, a subtree that
 * dies or leaves skipped whole) and kept by the vocabulary under the unit's byte form: the JSON
 * string character is one form in every schema.
 *
 * The unit's form: its states numbered breadth first by byte from the head (0), and per state
 * and byte a code: DEAD, EXIT (the head's edges out), BACK (a unit completed: onto the head,
 * count + 1) or the interior state read on to.  Units are prefix codes with deterministic entry
 * and exit (cfgmask/compile/segments.py), so each (state, token) has one walk. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "segcut.h"
#include "vocab.h"

#define MAX_STATES 250              /* of a unit: codes fit a byte beside the three below */
#define C_DEAD 255
#define C_EXIT 254
#define C_BACK 253
#define CNT_OVER 255                /* a stored count of 255: the exact one is in the overflow list */
#define STORE_BYTES ((size_t)64 << 20)  /* a vocabulary keeps units' tables up to this */
#define T CM_SEGCUT_SMALL

typedef struct cut_state {
    uint8_t *kind, *cnt;             /* [n_tokens]; cnt saturates at CNT_OVER */
    uint32_t *over_tok, *over_cnt;   /* the counts of CNT_OVER or more, by token */
    uint32_t n_over;
    uint32_t *exit_tok, *exit_off;   /* the leavers' EXIT byte offsets, by token */
    uint32_t n_exit;
    uint32_t *gt;                    /* [T * n_words]: set b holds the live tokens counting more than b;
                                        NULL where the live tokens are fewer than a set's words */
    uint32_t *long_tok, *long_cnt;   /* the live tokens counting list_min or more, by count descending */
    uint32_t list_min;               /* T with the sets, else 1 (the list answers every budget) */
    uint32_t n_long;
    uint32_t *leave_tok, *leave_cnt; /* the leavers by count ascending */
    uint32_t *leave_off;             /* and their EXIT bytes' offsets */
    uint32_t n_leave;
    size_t bytes;
} cut_state;

typedef struct cut_tab {
    struct cut_tab *next;            /* in the store */
    atomic_size_t refs;
    uint64_t hash;
    uint32_t n;                      /* the unit's states */
    uint8_t *form;                   /* [n * 256] */
    const cm_vocab *v;
    size_t n_words;
    pthread_mutex_t lock;            /* makes states' tables */
    _Atomic(cut_state *) *states;    /* [n], made on first use */
    atomic_size_t bytes;
} cut_tab;

struct cm_segcut_store {
    pthread_mutex_t lock;
    cut_tab *tabs;
    size_t bytes;                    /* of the tabs filed, at their full size */
};

struct cm_segcut {
    cut_tab *tab;
    uint32_t n, n_table_states;
    uint32_t states[MAX_STATES];     /* the unit's state number -> the tables' state */
    int32_t exit_target[256];        /* the head's EXIT edge on each byte: its target, or -1 */
};

static atomic_size_t g_hits, g_builds;

size_t cm_segcut_store_hits(void) { return atomic_load(&g_hits); }
size_t cm_segcut_state_builds(void) { return atomic_load(&g_builds); }

static void state_free(cut_state *cs) {
    if (!cs) return;
    free(cs->kind);
    free(cs->cnt);
    free(cs->over_tok);
    free(cs->over_cnt);
    free(cs->exit_tok);
    free(cs->exit_off);
    free(cs->gt);
    free(cs->long_tok);
    free(cs->long_cnt);
    free(cs->leave_tok);
    free(cs->leave_cnt);
    free(cs->leave_off);
    free(cs);
}

static void tab_release(cut_tab *tab) {
    if (!tab || atomic_fetch_sub(&tab->refs, 1) != 1) return;
    for (uint32_t q = 0; tab->states && q < tab->n; q++) state_free(atomic_load(&tab->states[q]));
    free((void *)tab->states);
    free(tab->form);
    pthread_mutex_destroy(&tab->lock);
    free(tab);
}

cm_segcut_store *cm_segcut_store_new(void) {
    cm_segcut_store *s = calloc(1, sizeof *s);
    if (s && pthread_mutex_init(&s->lock, NULL)) {
        free(s);
        return NULL;
    }
    return s;
}

void cm_segcut_store_free(cm_segcut_store *s) {
    if (!s) return;
    for (cut_tab *x = s->tabs, *nx; x; x = nx) {
        nx = x->next;
        tab_release(x);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The unit of segment seg as its byte form (form: [MAX_STATES * 256]), its states in c. */
static int unit_form(const cm_seg_raw *r, uint32_t seg, uint8_t *form, cm_segcut *c) {
    if (seg >= r->n_segments) return CM_ERR_ARG;
    uint32_t head = r->seg_head[seg], nc = r->n_classes;
    if (head >= r->n_states || r->state_seg[head] != seg) return CM_ERR_ARG;
    uint32_t n = 0;
    c->states[n++] = head;
    for (int b = 0; b < 256; b++) c->exit_target[b] = -1;
    for (uint32_t q = 0; q < n; q++) {
        uint32_t s = c->states[q];
        for (int b = 0; b < 256; b++) {
            size_t cell = (size_t)s * nc + r->byte_class[b];
            int32_t u = r->trans[cell];
            uint8_t f = r->flags[cell], code;
            if (u < 0) {
                code = C_DEAD;
            } else if ((uint32_t)u >= r->n_states) {
                return CM_ERR_ARG;
            } else if (f & CM_SEG_EXIT) {
                if (q) return CM_ERR_ARG; /* the head's alone */
                code = C_EXIT;
                c->exit_target[b] = u;
            } else if (f & CM_SEG_BACK) {
                if ((uint32_t)u != head) return CM_ERR_ARG;
                code = C_BACK;
            } else {
                if (r->state_seg[u] != seg || (uint32_t)u == head) return CM_ERR_ARG; /* on inside */
                uint32_t w = 0;
                while (w < n && c->states[w] != (uint32_t)u) w++;
                if (w == n) {
                    if (n == MAX_STATES) return CM_ERR_LIMIT;
                    c->states[n++] = (uint32_t)u;
                }
                code = (uint8_t)w;
            }
            form[(size_t)q * 256 + (size_t)b] = code;
        }
    }
    c->n = n;
    return CM_OK;
}

static uint64_t form_hash(const uint8_t *form, uint32_t n) {
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    for (size_t i = 0; i < (size_t)n * 256; i++) h = (h ^ form[i]) * 0x100000001b3ULL;
    return h ^ (h >> 31);
}

static size_t full_bytes(const cm_vocab *v, uint32_t n) {
    size_t nw = (v->n_tokens + 31) / 32;
    return (size_t)n * (2 * v->n_tokens + T * nw * 4);
}

int cm_segcut_new_raw(const cm_seg_raw *r, uint32_t seg, const cm_vocab *v, cm_segcut **out) {
    if (!r || !v || !out || !v->segcuts) return CM_ERR_ARG;
    *out = NULL;
    cm_segcut *c = calloc(1, sizeof *c);
    uint8_t *form = malloc((size_t)MAX_STATES * 256);
    if (!c || !form) {
        free(c);
        free(form);
        return CM_ERR_NOMEM;
    }
    int rc = unit_form(r, seg, form, c);
    if (rc) {
        free(c);
        free(form);
        return rc;
    }
    c->n_table_states = r->n_states;
    uint64_t h = form_hash(form, c->n);
    cm_segcut_store *s = v->segcuts;
    pthread_mutex_lock(&s->lock);
    cut_tab *tab = s->tabs;
    while (tab && !(tab->hash == h && tab->n == c->n && !memcmp(tab->form, form, (size_t)c->n * 256)))
        tab = tab->next;
    if (tab) {
        atomic_fetch_add(&tab->refs, 1);
        atomic_fetch_add(&g_hits, 1);
        free(form);
    } else {
        tab = calloc(1, sizeof *tab);
        uint8_t *f2 = tab ? realloc(form, (size_t)c->n * 256) : NULL;
        if (f2) form = f2;
        if (tab) tab->states = calloc(c->n, sizeof *tab->states);
        if (!tab || !f2 || !tab->states || pthread_mutex_init(&tab->lock, NULL)) {
            pthread_mutex_unlock(&s->lock);
            if (tab) free((void *)tab->states);
            free(tab);
            free(form);
            free(c);
            return CM_ERR_NOMEM;
        }
        tab->form = form;
        tab->hash = h;
        tab->n = c->n;
        tab->v = v;
        tab->n_words = (v->n_tokens + 31) / 32;
        atomic_init(&tab->refs, 1);
        size_t est = full_bytes(v, c->n);
        if (s->bytes + est <= STORE_BYTES) { /* filed: the vocabulary holds a reference */
            atomic_fetch_add(&tab->refs, 1);
            tab->next = s->tabs;
            s->tabs = tab;
            s->bytes += est;
        }
    }
    pthread_mutex_unlock(&s->lock);
    c->tab = tab;
    *out = c;
    return CM_OK;
}

int cm_segcut_new(const cm_segtab *st, uint32_t seg, const cm_vocab *v, cm_segcut **out) {
    if (!st || !out) return CM_ERR_ARG;
    cm_seg_raw r;
    cm_segtab_raw(st, &r);
    return cm_segcut_new_raw(&r, seg, v, out);
}

void cm_segcut_free(cm_segcut *c) {
    if (!c) return;
    tab_release(c->tab);
    free(c);
}

uint32_t cm_segcut_states(const cm_segcut *c, uint32_t *states, uint32_t cap) {
    for (uint32_t q = 0; q < c->n && q < cap; q++) states[q] = c->states[q];
    return c->n;
}

/* ---- one state's tables: the trie walk, then the cut's sets and lists ---- */

static int by_id(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int by_count_then_id(const void *a, const void *b) {
    const uint32_t *x = a, *y = b; /* (token, offset, count) triples */
    if (x[2] != y[2]) return x[2] < y[2] ? -1 : 1;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static int by_count_desc(const void *a, const void *b) {
    const uint32_t *x = a, *y = b; /* (count, token) pairs */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* pairs[0 .. 2n) (count, token), sorted by cmp, split into tok and cnt (NULL on no memory). */
static int split_pairs(uint32_t *pairs, uint32_t n, int (*cmp)(const void *, const void *), uint32_t **tok,
                       uint32_t **cnt) {
    if (n) qsort(pairs, n, 2 * sizeof *pairs, cmp);
    *tok = malloc((n ? n : 1) * sizeof **tok);
    *cnt = malloc((n ? n : 1) * sizeof **cnt);
    if (!*tok || !*cnt) return CM_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        (*cnt)[i] = pairs[2 * i];
        (*tok)[i] = pairs[2 * i + 1];
    }
    return CM_OK;
}

static cut_state *build_state(const cut_tab *tab, uint32_t q0) {
    const cm_vocab *v = tab->v;
    size_t nt = v->n_tokens, nw = tab->n_words;
    cut_state *cs = calloc(1, sizeof *cs);
    uint32_t *count = malloc(nt * sizeof *count), *off = malloc(nt * sizeof *off);
    uint32_t *qs = malloc(((size_t)v->max_len + 1) * sizeof *qs);
    uint32_t *ks = malloc(((size_t)v->max_len + 1) * sizeof *ks);
    uint32_t *pairs = malloc(2 * nt * sizeof *pairs), *live = malloc(nt * sizeof *live), n_live = 0;
    uint32_t *exits = malloc(3 * nt * sizeof *exits), *over = malloc(2 * nt * sizeof *over);
    if (cs) {
        cs->kind = calloc(nt, 1);
        cs->cnt = calloc(nt, 1);
    }
    if (!cs || !count || !off || !qs || !ks || !pairs || !live || !exits || !over || !cs->kind || !cs->cnt) goto fail;
    /* the walk: qs[d], ks[d] the state and units completed after d bytes of the entry walked;
     * count[k], off[k] by trie entry (a walk's writes stay in the pages of its subtrees), live[]
     * the live entries in trie order */
    qs[0] = q0;
    ks[0] = 0;
    for (size_t k = 0; k < v->n_trie;) {
        uint32_t len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint32_t d = k ? v->trie_lcp[k] : 0;
        if (d > len) d = len;
        bool stopped = false;
        for (; d < len; d++) {
            uint8_t code = tab->form[(size_t)qs[d] * 256 + p[d]];
            if (code == C_DEAD || code == C_EXIT) { /* every entry of this (d + 1)-byte prefix's subtree */
                size_t end = v->skip[v->trie_off[k] + d];
                if (end <= k || end > v->n_trie) end = k + 1;
                if (code == C_EXIT)
                    for (size_t j = k; j < end; j++) {
                        cs->kind[v->trie_ids[j]] = CM_SEGCUT_EXIT;
                        count[j] = ks[d];
                        off[j] = d;
                        live[n_live++] = (uint32_t)j;
                    }
                k = end;
                stopped = true;
                break;
            }
            if (code == C_BACK) {
                qs[d + 1] = 0;
                ks[d + 1] = ks[d] + 1;
            } else {
                qs[d + 1] = code;
                ks[d + 1] = ks[d];
            }
        }
        if (!stopped) {
            cs->kind[v->trie_ids[k]] = qs[len] ? CM_SEGCUT_MID : CM_SEGCUT_STAY;
            count[k] = ks[len] + (qs[len] ? 1 : 0);
            live[n_live++] = (uint32_t)k;
            k++;
        }
    }
    /* the sets where a list of the live tokens would be longer than a set's words */
    cs->list_min = n_live > nw ? T : 1;
    if (n_live > nw && !(cs->gt = calloc((size_t)T * nw, sizeof *cs->gt))) goto fail;
    /* the stored counts and the bit sets in trie order; the leavers and the counts past a byte
     * gathered as (token, offset or count, count) and ordered after */
    uint32_t nl = 0, ne = 0, no = 0;
    for (uint32_t i = 0; i < n_live; i++) {
        uint32_t k = live[i], t = v->trie_ids[k], c = count[k];
        cs->cnt[t] = (uint8_t)(c < CNT_OVER ? c : CNT_OVER);
        if (c >= CNT_OVER) {
            over[2 * no] = t;
            over[2 * no + 1] = c;
            no++;
        }
        if (cs->kind[t] == CM_SEGCUT_EXIT) {
            exits[3 * ne] = t;
            exits[3 * ne + 1] = off[k];
            exits[3 * ne + 2] = c;
            ne++;
        }
        if (cs->gt && c) /* in set min(c, T) - 1 alone here; the sets below take it in the OR after */
            cm_set_bit(cs->gt + (size_t)(c < T ? c - 1 : T - 1) * nw, (unsigned)t);
        if (c >= cs->list_min) {
            pairs[2 * nl] = c;
            pairs[2 * nl + 1] = t;
            nl++;
        }
    }
    for (uint32_t b = T - 1; cs->gt && b-- > 0;) { /* set b: counts over b, i.e. exactly b + 1 or over b + 1 */
        uint32_t *lo = cs->gt + (size_t)b * nw;
        const uint32_t *up = lo + nw;
        for (size_t w = 0; w < nw; w++) lo[w] |= up[w];
    }
    if (split_pairs(pairs, nl, by_count_desc, &cs->long_tok, &cs->long_cnt)) goto fail;
    cs->n_long = nl;
    if (no) qsort(over, no, 2 * sizeof *over, by_id); /* (token, count) by token */
    cs->over_tok = malloc((no ? no : 1) * sizeof *cs->over_tok);
    cs->over_cnt = malloc((no ? no : 1) * sizeof *cs->over_cnt);
    cs->exit_tok = malloc((ne ? ne : 1) * sizeof *cs->exit_tok);
    cs->exit_off = malloc((ne ? ne : 1) * sizeof *cs->exit_off);
    cs->leave_tok = malloc((ne ? ne : 1) * sizeof *cs->leave_tok);
    cs->leave_cnt = malloc((ne ? ne : 1) * sizeof *cs->leave_cnt);
    cs->leave_off = malloc((ne ? ne : 1) * sizeof *cs->leave_off);
    if (!cs->over_tok || !cs->over_cnt || !cs->exit_tok || !cs->exit_off || !cs->leave_tok || !cs->leave_cnt ||
        !cs->leave_off)
        goto fail;
    for (uint32_t i = 0; i < no; i++) {
        cs->over_tok[i] = over[2 * i];
        cs->over_cnt[i] = over[2 * i + 1];
    }
    cs->n_over = no;
    if (ne) qsort(exits, ne, 3 * sizeof *exits, by_id); /* by token */
    for (uint32_t i = 0; i < ne; i++) {
        cs->exit_tok[i] = exits[3 * i];
        cs->exit_off[i] = exits[3 * i + 1];
    }
    cs->n_exit = ne;
    if (ne) qsort(exits, ne, 3 * sizeof *exits, by_count_then_id); /* by count, then token */
    for (uint32_t i = 0; i < ne; i++) {
        cs->leave_tok[i] = exits[3 * i];
        cs->leave_off[i] = exits[3 * i + 1];
        cs->leave_cnt[i] = exits[3 * i + 2];
    }
    cs->n_leave = ne;
    cs->bytes = sizeof *cs + 2 * nt + (cs->gt ? (size_t)T * nw * 4 : 0) + 8 * ((size_t)no + ne + nl) + 12 * (size_t)ne;
    goto done;
fail:
    state_free(cs);
    cs = NULL;
done:
    free(count);
    free(off);
    free(qs);
    free(ks);
    free(pairs);
    free(live);
    free(exits);
    free(over);
    return cs;
}

/* The tables of the tables' state `state` (made on first use). */
static int state_of(cm_segcut *c, uint32_t state, uint32_t *q_out, cut_state **out) {
    if (!c) return CM_ERR_ARG;
    uint32_t q = 0;
    while (q < c->n && c->states[q] != state) q++;
    if (q == c->n) return CM_ERR_ARG;
    cut_tab *tab = c->tab;
    cut_state *cs = atomic_load(&tab->states[q]);
    if (!cs) {
        pthread_mutex_lock(&tab->lock);
        cs = atomic_load(&tab->states[q]);
        if (!cs && (cs = build_state(tab, q))) {
            atomic_store(&tab->states[q], cs);
            atomic_fetch_add(&tab->bytes, cs->bytes);
            atomic_fetch_add(&g_builds, 1);
        }
        pthread_mutex_unlock(&tab->lock);
        if (!cs) return CM_ERR_NOMEM;
    }
    if (q_out) *q_out = q;
    *out = cs;
    return CM_OK;
}

int cm_segcut_build_all(cm_segcut *c) {
    if (!c) return CM_ERR_ARG;
    cut_state *cs;
    for (uint32_t q = 0; q < c->n; q++) {
        int rc = state_of(c, c->states[q], NULL, &cs);
        if (rc) return rc;
    }
    return CM_OK;
}

size_t cm_segcut_bytes(const cm_segcut *c) { return c ? atomic_load(&c->tab->bytes) : 0; }

static uint32_t count_of(const cut_state *cs, uint32_t t) {
    if (cs->cnt[t] < CNT_OVER) return cs->cnt[t];
    uint32_t lo = 0, hi = cs->n_over; /* by token */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cs->over_tok[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo < cs->n_over && cs->over_tok[lo] == t ? cs->over_cnt[lo] : CNT_OVER;
}

int cm_segcut_answer(cm_segcut *c, uint32_t state, uint32_t token, uint32_t *kind, uint32_t *count,
                     uint32_t *offset, uint32_t *target) {
    cut_state *cs;
    int rc = state_of(c, state, NULL, &cs);
    if (rc) return rc;
    const cm_vocab *v = c->tab->v;
    if (token >= v->n_tokens || !kind || !count || !offset || !target) return CM_ERR_ARG;
    *kind = cs->kind[token];
    *count = *kind == CM_SEGCUT_DEAD ? 0 : count_of(cs, token);
    *offset = *target = UINT32_MAX;
    if (*kind == CM_SEGCUT_EXIT) {
        uint32_t lo = 0, hi = cs->n_exit;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cs->exit_tok[mid] < token) lo = mid + 1;
            else hi = mid;
        }
        if (lo == cs->n_exit || cs->exit_tok[lo] != token) return CM_ERR_STATE;
        uint32_t len;
        const uint8_t *p = cm_tok_bytes(v, token, &len);
        if (cs->exit_off[lo] >= len) return CM_ERR_STATE;
        *offset = cs->exit_off[lo];
        int32_t u = c->exit_target[p[*offset]];
        if (u < 0) return CM_ERR_STATE;
        *target = (uint32_t)u;
    }
    return CM_OK;
}

int cm_segcut_answers(cm_segcut *c, uint32_t state, uint8_t *kind, uint32_t *count) {
    cut_state *cs;
    int rc = state_of(c, state, NULL, &cs);
    if (rc) return rc;
    if (!kind || !count) return CM_ERR_ARG;
    size_t nt = c->tab->v->n_tokens;
    memcpy(kind, cs->kind, nt);
    for (size_t t = 0; t < nt; t++) count[t] = cs->kind[t] == CM_SEGCUT_DEAD ? 0 : count_of(cs, (uint32_t)t);
    return CM_OK;
}

int cm_segcut_apply(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *row,
                    size_t n_words) {
    cut_state *cs;
    int rc = state_of(c, state, NULL, &cs);
    if (rc) return rc;
    size_t nw = c->tab->n_words;
    if (!row || n_words != nw) return CM_ERR_ARG;
    if (cs->gt && budget < T) {
        const uint32_t *g = cs->gt + (size_t)budget * nw;
        for (size_t w = 0; w < nw; w++) row[w] &= ~g[w];
    } else {
        for (uint32_t i = 0; i < cs->n_long && cs->long_cnt[i] > budget; i++)
            row[cs->long_tok[i] >> 5] &= ~(1u << (cs->long_tok[i] & 31));
    }
    for (uint32_t i = 0; i < cs->n_leave && cs->leave_cnt[i] < need; i++)
        row[cs->leave_tok[i] >> 5] &= ~(1u << (cs->leave_tok[i] & 31));
    return CM_OK;
}

int cm_segcut_kill(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *out, size_t cap,
                   size_t *n_out) {
    cut_state *cs;
    int rc = state_of(c, state, NULL, &cs);
    if (rc) return rc;
    if (!n_out || (cap && !out)) return CM_ERR_ARG;
    size_t n = 0, nw = c->tab->n_words, nt = c->tab->v->n_tokens;
    if (cs->gt && budget < T) {
        const uint32_t *g = cs->gt + (size_t)budget * nw;
        for (size_t w = 0; w < nw; w++)
            for (uint32_t x = g[w]; x; x &= x - 1) {
                size_t t = w * 32 + (size_t)__builtin_ctz(x);
                if (t >= nt) break;
                if (n < cap) out[n] = (uint32_t)t;
                n++;
            }
    } else {
        for (uint32_t i = 0; i < cs->n_long && cs->long_cnt[i] > budget; i++, n++)
            if (n < cap) out[n] = cs->long_tok[i];
    }
    /* the leavers short of the need, but those counted above (more than budget) */
    for (uint32_t i = 0; i < cs->n_leave && cs->leave_cnt[i] < need && cs->leave_cnt[i] <= budget; i++, n++)
        if (n < cap) out[n] = cs->leave_tok[i];
    *n_out = n;
    return CM_OK;
}

int cm_segcut_leavers(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *tok, uint32_t *off,
                      size_t cap, size_t *n_out) {
    cut_state *cs;
    int rc = state_of(c, state, NULL, &cs);
    if (rc) return rc;
    if (!n_out || (cap && (!tok || !off))) return CM_ERR_ARG;
    uint32_t lo = 0, hi = cs->n_leave; /* the first leaver counting need or more */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cs->leave_cnt[mid] < need) lo = mid + 1;
        else hi = mid;
    }
    size_t n = 0;
    for (uint32_t i = lo; i < cs->n_leave && cs->leave_cnt[i] <= budget; i++, n++)
        if (n < cap) {
            tok[n] = cs->leave_tok[i];
            off[n] = cs->leave_off[i];
        }
    *n_out = n;
    return CM_OK;
}

int cm_segcut_keep(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, const uint32_t *ids, uint32_t *xs,
                   size_t *n) {
    cut_state *cs;
    int rc = state_of(c, state, NULL, &cs);
    if (rc) return rc;
    size_t m = 0, nt = c->tab->v->n_tokens;
    for (size_t i = 0; i < *n; i++) {
        uint32_t t = ids ? ids[xs[i]] : xs[i];
        if (t >= nt) return CM_ERR_ARG;
        uint8_t kind = cs->kind[t];
        uint32_t cnt = kind == CM_SEGCUT_DEAD ? 0 : count_of(cs, t);
        bool cut = kind != CM_SEGCUT_DEAD && (cnt > budget || (kind == CM_SEGCUT_EXIT && cnt < need));
        if (!cut) xs[m++] = xs[i];
    }
    *n = m;
    return CM_OK;
}
