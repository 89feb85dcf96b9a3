/* Uncertain tokens that every caller reads on, taken as accepted (issue 12, session 44).
 *
 * A token is uncertain when the item's rule R completes inside it, at depth e >= 1, with its next
 * byte in FOLLOW(R): the rest p[e..) is read by whoever called R, which the entry does not know.
 * But an item of R with origin o exists only because a caller at set o predicted R (R is not the
 * start rule), and every call of R returns to one of R's return states (g->ret_state).  So if the
 * rest survives the private chart of (r, CM_OUTER) for EVERY return state r, whichever caller the
 * real stack holds reads it on, and the token is allowed in every context: accepted.  Where the
 * chart of r dies but r's own rule completes before (at depth e' >= 0, the next byte following it),
 * the same question is asked of that rule and the rest after e' (one level further down the real
 * stack).  A question met again while it is being answered (statement -> while -> statement) is
 * taken as true: every real stack is finite, so by induction on its depth the answer holds for
 * every stack where the proof's other branches hold (the start rule, completed with bytes left,
 * answers false: its stack is empty).  An answer that leant on a question still open further up
 * is not memoized, so the memo holds only what a question asked alone answers.  Lookahead debts (Lark's) are
 * left out: there a completion reads the bytes between and the charts are not monotone in items.
 *
 * c.gbnf after a name at a statement's start (`for`, `return`, `s`): `item`'s label tokens
 * (` :\n`, 252) and `statement`'s ` ;\n` (89) were checked by the real chart at every such mask,
 * ~3.5 K instructions a token.  Off: the entries as before, the reference the tests compare against.
 * Asked at an entry's fourth use by a mask, not its first build (cache.c, cm_grammar_fill_entry:
 * a promoted copy beside the plain entry), under the cache lock. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "chart.h"
#include "promote.h"

static atomic_int g_promote = 1;
static atomic_size_t g_promoted;

void cm_promote_enable(int on) { atomic_store(&g_promote, on ? 1 : 0); }
size_t cm_promoted(void) { return atomic_load(&g_promoted); }
bool cm_promote_on(void) { return atomic_load_explicit(&g_promote, memory_order_relaxed) != 0; }

#define PROM_DEPTH 128    /* questions open at once (c's expression ladder is 17 levels) */
#define PROM_EXITS 16     /* exits of one return state's chart followed (more: not followed) */
#define PROM_MAX_RETURNS 16  /* a rule returning to more states is not asked (PF none): a JSON
                                Schema's value rule returns into every property, each a chart a rest */
#define PROM_MAX_LEN 16   /* longer tokens (a string's text) are left uncertain: not scanned */
#define PROM_BUDGET 4096  /* return-state charts one token may run (a safety valve: c's most are ~40) */

/* A question's answer: (rule, rest bytes) -> verdict. */
typedef struct prom_slot {
    const uint8_t *p;     /* the vocabulary's trie data: outlives the cache */
    uint32_t rule, len, hash;
    uint8_t verdict;      /* 0: empty; 1: false; 2: true */
} prom_slot;

/* What the chart of (r, CM_OUTER) does before any byte, made once a state: the bytes its first
 * set reads and whether that set completed r's rule already.  A rest whose first byte r does not
 * read needs no chart: dead at once, or read on below with the same bytes. */
typedef struct prom_first {
    uint32_t first[8];
    uint8_t known, exits0;
} prom_first;

/* A return state's chart, kept with the sets of the rest it read last: the rests of tokens next in
 * trie order share most of their bytes (`;\n`, `;\n\n`, `;\n    `), so the next rest from the
 * same state scans only past the common prefix, as the filter's item chart does. */
#define PROM_CHARTS 16
typedef struct prom_chart {
    cm_chart c;
    bool ok;
    bool died;            /* the rest read last died on its byte `have` */
    uint32_t of;          /* + 1: the state whose closure is the first set; 0: none */
    const uint8_t *p;     /* the rest read last */
    uint32_t len, have;   /* ... its sets for bytes 0 .. have are in c */
    uint8_t *ex;          /* [max_len + 1]: the exit flag of each set */
    uint64_t used;
} prom_chart;

struct cm_promote {
    cm_chart item;
    prom_chart pool[PROM_CHARTS];
    uint64_t clock;
    prom_first *firsts;   /* [n_states], made on first use */
    uint32_t *fail_first; /* [n_rules]: + 1, the return state (its index) that last answered false */
    uint32_t *pf;         /* [n_rules * 8]: the bytes a rest that rule's question answers true for
                             can start with (prom_pf); NULL: not made */
    bool item_ok, rest_ok;
    uint32_t item_of;     /* + 1: the state whose closure is item's first set */
    uint8_t *ex;          /* [max_len + 1]: item's exit flags by depth */
    prom_slot *slots;
    size_t cap, n;
    uint32_t open_rule[PROM_DEPTH], open_len[PROM_DEPTH];
    uint32_t n_open;
    uint32_t budget;
};

void cm_promote_free(cm_promote *x) {
    if (!x) return;
    if (x->item_ok) cm_chart_free(&x->item);
    for (int i = 0; i < PROM_CHARTS; i++) {
        if (x->pool[i].ok) cm_chart_free(&x->pool[i].c);
        free(x->pool[i].ex);
    }
    free(x->ex);
    free(x->firsts);
    free(x->fail_first);
    free(x->pf);
    free(x->slots);
    free(x);
}

static uint32_t prom_hash(uint32_t rule, const uint8_t *p, uint32_t len) {
    uint32_t h = 2166136261u ^ rule;
    for (uint32_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
    return h ? h : 1;
}

static prom_slot *prom_find(cm_promote *x, uint32_t h, uint32_t rule, const uint8_t *p, uint32_t len) {
    if (!x->cap) return NULL;
    for (size_t i = h & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
        prom_slot *s = &x->slots[i];
        if (!s->verdict) return s;
        if (s->hash == h && s->rule == rule && s->len == len && !memcmp(s->p, p, len)) return s;
    }
}

static void prom_put(const cm_grammar *g, cm_promote *x, uint32_t rule, const uint8_t *p, uint32_t len, bool ok) {
    if (2 * (x->n + 1) > x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 256;
        prom_slot *old = x->slots, *s = calloc(cap, sizeof *s);
        if (!s) return;  /* not kept: asked again */
        size_t old_cap = x->cap;
        x->slots = s;
        x->cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].verdict) *prom_find(x, old[i].hash, old[i].rule, old[i].p, old[i].len) = old[i];
        free(old);
        atomic_fetch_add(&g->cache->bytes, (cap - old_cap) * sizeof *s);
    }
    uint32_t h = prom_hash(rule, p, len);
    prom_slot *s = prom_find(x, h, rule, p, len);
    if (s->verdict) return;
    *s = (prom_slot){p, rule, len, h, (uint8_t)(ok ? 2 : 1)};
    x->n++;
}

static int prom_rule(const cm_grammar *g, cm_promote *x, uint32_t rule, const uint8_t *p, uint32_t len,
                     uint32_t *low);

/* Does every derivation of return state r read p[0..len), or leave r's rule where the rest is
 * read on below (prom_rule)?  1, 0, < 0 error.  *low: the lowest open question leant on. */
static int prom_state(const cm_grammar *g, cm_promote *x, uint32_t r, const uint8_t *p, uint32_t len,
                      uint32_t *low) {
    if (!x->budget) return 0;
    x->budget--;
    uint32_t st = cm_pack(r, 0), exits[PROM_EXITS], n_ex = 0, rule = g->t.state_rule[r];
    prom_first *f = &x->firsts[r];
    if (f->known && !cm_bit(f->first, p[0]))
        return f->exits0 && cm_follows(g, rule, p[0]) ? prom_rule(g, x, rule, p, len, low) : 0;
    prom_chart *pc = NULL, *lru = &x->pool[0];
    for (int i = 0; i < PROM_CHARTS && !pc; i++) {
        if (x->pool[i].of == r + 1) pc = &x->pool[i];
        else if (x->pool[i].used < lru->used) lru = &x->pool[i];
    }
    int rc;
    if (!pc) {
        pc = lru;
        if (!pc->ex && !(pc->ex = calloc((size_t)g->v->max_len + 1, 1))) return CM_ERR_NOMEM;
        if (!pc->ok) {
            if ((rc = cm_chart_open(&pc->c, false))) {
                cm_chart_free(&pc->c);
                return rc;
            }
            pc->ok = true;
        }
        pc->of = 0;
        if ((rc = cm_chart_reset_items(&pc->c, g, &st, 1))) return rc;
        pc->of = r + 1;
        pc->p = NULL;
        pc->have = 0;
        pc->died = false;
        pc->ex[0] = pc->c.exited;
    }
    pc->used = ++x->clock;
    if (!f->known) {
        const cm_chart *c = &pc->c;
        for (size_t i = c->set_start[0]; i < c->set_start[1]; i++)
            for (int j = 0; j < 8; j++) f->first[j] |= g->next_bytes[(size_t)cm_st(c->items[i].state) * 8 + j];
        f->exits0 = pc->ex[0];
        f->known = 1;
    }
    /* the sets of the common prefix with the rest read last stand */
    uint32_t d = pc->p ? cm_common_prefix(pc->p, pc->len, p, len) : 0;
    if (pc->died && d > pc->have) {
        d = pc->have;  /* dies on the byte the last one died on */
    } else {
        if (d > pc->have) d = pc->have;
        cm_chart_truncate(&pc->c, (size_t)d + 1);
        pc->died = false;
        for (; d < len; d++) {
            int sc = cm_chart_scan(&pc->c, g, p[d]);
            if (sc < 0) {
                pc->of = 0;
                return sc;
            }
            if (!sc) {
                pc->died = true;
                break;
            }
            pc->ex[d + 1] = pc->c.exited;
        }
        pc->have = d;
    }
    pc->p = p;
    pc->len = len;
    for (uint32_t e = 0; e <= d && e < len && n_ex < PROM_EXITS; e++)
        if (pc->ex[e]) exits[n_ex++] = e;
    if (d == len) return 1;
    /* the exits are copied: each exit's question may take this chart for another state */
    for (uint32_t i = 0; i < n_ex; i++) {
        uint32_t e = exits[i];
        if (!cm_follows(g, rule, p[e])) continue;
        int ok = prom_rule(g, x, rule, p + e, len - e, low);
        if (ok) return ok;
    }
    return 0;
}

/* Is p[0..len) read on after `rule` completes, whatever called it?  1, 0, < 0 error. */
static int prom_rule(const cm_grammar *g, cm_promote *x, uint32_t rule, const uint8_t *p, uint32_t len,
                     uint32_t *low) {
    if (!cm_bit(x->pf + (size_t)rule * 8, p[0])) return 0;  /* the start rule's and a rule's without returns: none */
    /* open already (the rests are suffixes of one token: the length names the bytes) */
    for (uint32_t i = 0; i < x->n_open; i++)
        if (x->open_rule[i] == rule && x->open_len[i] == len) {
            if (i < *low) *low = i;
            return 1;
        }
    prom_slot *s = prom_find(x, prom_hash(rule, p, len), rule, p, len);
    if (s && s->verdict) return s->verdict == 2;
    if (x->n_open == PROM_DEPTH) return 0;
    uint32_t me = x->n_open++, mine = UINT32_MAX;
    x->open_rule[me] = rule;
    x->open_len[me] = len;
    /* every return state must answer true: the one that last answered false is asked first (the
     * answer does not depend on the order: what the memo holds is what a question alone answers) */
    uint32_t lo = g->ret_off[rule], n = g->ret_off[rule + 1] - lo, first = x->fail_first[rule];
    int ok = 1;
    for (uint32_t j = 0; j < n && ok > 0; j++) {
        uint32_t k = first ? (first - 1 + j) % n : j;
        if ((ok = prom_state(g, x, g->ret_state[lo + k], p, len, &mine)) == 0) x->fail_first[rule] = k + 1;
    }
    x->n_open = me;
    if (ok < 0) return ok;
    if (mine < me) {
        /* the answer leant on a question further up: true only while that holds, and a false
         * might be true under another stack; kept for neither, so that what the memo holds is
         * what the question asked alone would answer (the entries do not depend on the order
         * they are built in) */
        if (mine < *low) *low = mine;
        return ok;
    }
    if (x->budget) prom_put(g, x, rule, p, len, ok != 0);
    return ok;
}

static int open_chart(cm_chart *c, bool *ok) {
    if (*ok) return CM_OK;
    int rc = cm_chart_open(c, false);
    if (rc) {
        cm_chart_free(c);
        return rc;
    }
    *ok = true;
    return CM_OK;
}

/* The closure of (r, CM_OUTER) in chart c: its first bytes and exit into x->firsts[r]. */
static int prom_first_of(const cm_grammar *g, cm_promote *x, cm_chart *c, uint32_t r) {
    prom_first *f = &x->firsts[r];
    if (f->known) return CM_OK;
    uint32_t st = cm_pack(r, 0);
    int rc = cm_chart_reset_items(c, g, &st, 1);
    if (rc) return rc;
    for (size_t i = c->set_start[0]; i < c->set_start[1]; i++)
        for (int j = 0; j < 8; j++) f->first[j] |= g->next_bytes[(size_t)cm_st(c->items[i].state) * 8 + j];
    f->exits0 = c->exited;
    f->known = 1;
    return CM_OK;
}

/* The first bytes a true answer's rest can have, per rule: the greatest sets with, for every rule
 * R that is not the start rule and has return states, PF(R) = the bytes every return state r reads
 * first, or, where r's rule completes at once, that rule's PF (none for the others).  A true
 * answer's proof meets these equations on its rests' first bytes (a question open again included:
 * it is in the proof), so a rest whose first byte is outside PF(R) is answered false with no chart
 * (the ladder's rests after `)`, `;`, `,`: some caller reads none of them).  Made once, from the
 * return states' first sets (a chart reset each). */
static int prom_pf(const cm_grammar *g, cm_promote *x, cm_chart *c) {
    uint32_t n = g->t.n_rules;
    uint32_t *pf = calloc((size_t)(n ? n : 1) * 8, sizeof *pf);
    if (!pf) return CM_ERR_NOMEM;
    for (uint32_t r = 0; r < n; r++) {
        uint32_t n_ret = g->ret_off[r + 1] - g->ret_off[r];
        if (r == g->t.start_rule || !n_ret || n_ret > PROM_MAX_RETURNS) continue;
        for (int j = 0; j < 8; j++) pf[(size_t)r * 8 + j] = UINT32_MAX;
        for (uint32_t k = g->ret_off[r]; k < g->ret_off[r + 1]; k++) {
            int rc = prom_first_of(g, x, c, g->ret_state[k]);
            if (rc) {
                free(pf);
                return rc;
            }
        }
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < n; r++) {
            uint32_t *to = pf + (size_t)r * 8;
            if (g->ret_off[r + 1] - g->ret_off[r] > PROM_MAX_RETURNS) continue;  /* none already */
            for (uint32_t k = g->ret_off[r]; k < g->ret_off[r + 1]; k++) {
                const prom_first *f = &x->firsts[g->ret_state[k]];
                const uint32_t *up = pf + (size_t)g->t.state_rule[g->ret_state[k]] * 8;
                for (int j = 0; j < 8; j++) {
                    uint32_t w = to[j] & (f->first[j] | (f->exits0 ? up[j] : 0));
                    changed |= w != to[j];
                    to[j] = w;
                }
            }
        }
    }
    x->pf = pf;
    atomic_fetch_add(&g->cache->bytes, (size_t)n * 8 * sizeof *pf);
    return CM_OK;
}

bool cm_promote_applies(const cm_grammar *g) { return cm_promote_on() && g->t.n_la <= 1 && !g->has_segments; }

/* Move w's uncertain tokens that every context reads on into its accepted set.  Any failure
 * leaves the rest uncertain (the checks stay exact). */
void cm_promote_uncertain(const cm_grammar *g, uint32_t state, cm_walk *w) {
    if (!w->n_unc || !cm_promote_applies(g)) return;
    cm_cache *cache = g->cache;
    if (!cache->promote) {
        cache->promote = calloc(1, sizeof *cache->promote);
        if (!cache->promote) return;
        atomic_fetch_add(&cache->bytes, sizeof *cache->promote);
    }
    cm_promote *x = cache->promote;
    const cm_vocab *v = g->v;
    if (!x->ex && !(x->ex = calloc((size_t)v->max_len + 1, 1))) return;
    if (!x->fail_first) {
        if (!(x->fail_first = calloc(g->t.n_rules ? g->t.n_rules : 1, sizeof *x->fail_first))) return;
        atomic_fetch_add(&cache->bytes, g->t.n_rules * sizeof *x->fail_first);
    }
    if (!x->firsts) {
        if (!(x->firsts = calloc(g->t.n_states ? g->t.n_states : 1, sizeof *x->firsts))) return;
        atomic_fetch_add(&cache->bytes, g->t.n_states * sizeof *x->firsts);
    }
    if (open_chart(&x->item, &x->item_ok)) return;
    if (!x->pf && prom_pf(g, x, &x->item)) return;
    uint32_t st = cm_pack(state, 0), rule = g->t.state_rule[state];
    const uint32_t *pf = x->pf + (size_t)rule * 8;
    if (cm_chart_reset_items(&x->item, g, &st, 1)) return;
    const uint8_t *prev = NULL;
    uint32_t plen = 0, have = 0;  /* item holds the sets of prev[0..have) */
    size_t kept = 0, promoted = 0;
    int rc = CM_OK;
    for (size_t i = 0; i < w->n_unc; i++) {
        uint32_t k = w->unc[i], len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        /* a rest can be taken only where its first byte is in the rule's PF: none, no scan */
        uint32_t j = 1;
        while (j < len && !cm_bit(pf, p[j])) j++;
        if (j >= len || len > PROM_MAX_LEN) {
            w->unc[kept++] = k;
            continue;
        }
        uint32_t d = prev ? cm_common_prefix(prev, plen, p, len) : 0;
        if (d > have) d = have;
        cm_chart_truncate(&x->item, (size_t)d + 1);
        uint32_t dead = d;
        for (; rc == CM_OK && dead < len; dead++) {
            int s = cm_chart_scan(&x->item, g, p[dead]);
            if (s <= 0) {
                if (s < 0) rc = s;
                break;
            }
            x->ex[dead + 1] = x->item.exited;
        }
        if (rc) break;
        prev = p;
        plen = len;
        have = dead;
        /* read on below an exit by every caller */
        int ok = 0;
        x->budget = PROM_BUDGET;
        for (uint32_t e = 1; !ok && e <= dead && e < len; e++) {
            if (!x->ex[e] || !cm_bit(pf, p[e])) continue;
            uint32_t low = UINT32_MAX;
            ok = prom_rule(g, x, rule, p + e, len - e, &low);
            if (ok < 0) {
                rc = ok;
                break;
            }
        }
        if (rc) break;
        if (ok) {
            uint32_t id = v->trie_ids[k];
            if (!cm_bit(w->bits, id)) cm_walk_accept(w, id);
            promoted++;
            continue;
        }
        w->unc[kept++] = k;
    }
    if (rc) {
        /* the loop stopped at some token: it and those after it stay uncertain, in order */
        size_t i = kept + promoted;
        memmove(w->unc + kept, w->unc + i, (w->n_unc - i) * sizeof *w->unc);
        kept += w->n_unc - i;
    }
    w->n_unc = kept;
    if (promoted) atomic_fetch_add(&g_promoted, promoted);
}
