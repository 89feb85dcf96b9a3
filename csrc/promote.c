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
 * a promoted copy beside the plain entry), under the cache lock, in pieces (cm_promote_step): a
 * state's k-th piece asks its next tokens until k x PROM_PIECE work is spent, a mask's pieces
 * together PROM_FILL x PROM_PIECE, so no one mask pays a whole entry's questions. */
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
#define PROM_PIECE 2000   /* work (PROM_COUNT) of a state's first piece; its k-th may do k times that */
#define PROM_FILL 4       /* a mask's pieces together: that many first pieces' work */

typedef struct prom_prog prom_prog;

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

/* What a promotion keeps of each rule, in blocks of PROM_BLK rules made on first use (a JSON
 * Schema grammar of thousands of rules asks of few: tables by rule or state, zeroed whole at the
 * first promotion, were most of `sp_333:29`'s 2 M). */
#define PROM_BLK 64
typedef struct prom_rules {
    uint32_t pf[PROM_BLK][8];       /* the bytes a rest that the rule's question answers true for
                                       can start with (prom_pf) */
    uint32_t fail_first[PROM_BLK];  /* + 1, the return state (its index) that last answered false */
    uint8_t known[PROM_BLK];        /* pf: 0 not made, 1 made, 2 being made */
} prom_rules;

struct cm_promote {
    cm_chart item;
    prom_chart pool[PROM_CHARTS];
    uint64_t clock;
    prom_first **firsts;  /* [n_states / PROM_BLK + 1]: blocks of PROM_BLK states, made on first use */
    prom_rules **rules;   /* [n_rules / PROM_BLK + 1]: blocks, made on first use */
    uint32_t *pf_todo;    /* [n_rules]: prom_pf's scratch */
    bool item_ok, rest_ok;
    uint32_t item_of;     /* + 1: the state whose closure is item's first set */
    uint8_t *ex;          /* [max_len + 1]: item's exit flags by depth */
    prom_slot *slots;
    size_t cap, n;
    uint32_t open_rule[PROM_DEPTH], open_len[PROM_DEPTH];
    uint32_t n_open;
    uint32_t budget;
    prom_prog ***prog;    /* [n_states / PROM_BLK + 1]: blocks of the promotions under way
                             (cm_promote_step), made on first use */
    size_t n_states, n_rules;
    uint64_t work;        /* the items of the sets made since the piece began */
};

/* A piece's work: the items of each set a chart made (a scan's or a reset's closure), + 1. */
#define PROM_COUNT(x, c) ((x)->work += (c)->set_start[(c)->n_sets] - (c)->set_start[(c)->n_sets - 1] + 1)

void cm_promote_free(cm_promote *x) {
    if (!x) return;
    if (x->item_ok) cm_chart_free(&x->item);
    for (int i = 0; i < PROM_CHARTS; i++) {
        if (x->pool[i].ok) cm_chart_free(&x->pool[i].c);
        free(x->pool[i].ex);
    }
    free(x->ex);
    for (size_t b = 0; x->firsts && b <= x->n_states / PROM_BLK; b++) free(x->firsts[b]);
    free(x->firsts);
    for (size_t b = 0; x->rules && b <= x->n_rules / PROM_BLK; b++) free(x->rules[b]);
    free(x->rules);
    free(x->pf_todo);
    free(x->slots);
    for (size_t b = 0; x->prog && b <= x->n_states / PROM_BLK; b++) {
        for (size_t i = 0; x->prog[b] && i < PROM_BLK; i++) free(x->prog[b][i]);
        free(x->prog[b]);
    }
    free(x->prog);
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

/* A block's slot, its block made (zeroed) on first use; NULL: out of memory. */
static void *prom_block(const cm_grammar *g, void **dir, size_t i, size_t size) {
    void **b = &dir[i / PROM_BLK];
    if (!*b) {
        if (!(*b = calloc(1, size))) return NULL;
        atomic_fetch_add(&g->cache->bytes, size);
    }
    return *b;
}

static prom_first *prom_firsts(const cm_grammar *g, cm_promote *x, uint32_t r) {
    prom_first *b = prom_block(g, (void **)x->firsts, r, PROM_BLK * sizeof *b);
    return b ? &b[r % PROM_BLK] : NULL;
}

static prom_rules *prom_rules_of(const cm_grammar *g, cm_promote *x, uint32_t rule) {
    return prom_block(g, (void **)x->rules, rule, sizeof(prom_rules));
}

/* The rule's PF (made: prom_pf ran for a rule below it). */
static const uint32_t *prom_pf_of(const cm_promote *x, uint32_t rule) {
    return x->rules[rule / PROM_BLK]->pf[rule % PROM_BLK];
}

/* Does every derivation of return state r read p[0..len), or leave r's rule where the rest is
 * read on below (prom_rule)?  1, 0, < 0 error.  *low: the lowest open question leant on. */
static int prom_state(const cm_grammar *g, cm_promote *x, uint32_t r, const uint8_t *p, uint32_t len,
                      uint32_t *low) {
    if (!x->budget) return 0;
    x->budget--;
    uint32_t st = cm_pack(r, 0), exits[PROM_EXITS], n_ex = 0, rule = g->t.state_rule[r];
    prom_first *f = prom_firsts(g, x, r);
    if (!f) return CM_ERR_NOMEM;
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
        PROM_COUNT(x, &pc->c);
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
            PROM_COUNT(x, &pc->c);
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
    if (!cm_bit(prom_pf_of(x, rule), p[0])) return 0;  /* the start rule's and a rule's without returns: none */
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
    uint32_t *fail_first = &x->rules[rule / PROM_BLK]->fail_first[rule % PROM_BLK];
    uint32_t lo = g->ret_off[rule], n = g->ret_off[rule + 1] - lo, first = *fail_first;
    int ok = 1;
    for (uint32_t j = 0; j < n && ok > 0; j++) {
        uint32_t k = first ? (first - 1 + j) % n : j;
        if ((ok = prom_state(g, x, g->ret_state[lo + k], p, len, &mine)) == 0) *fail_first = k + 1;
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

/* The closure of (r, CM_OUTER) in chart c: its first bytes and exit into r's prom_first. */
static int prom_first_of(const cm_grammar *g, cm_promote *x, cm_chart *c, uint32_t r) {
    prom_first *f = prom_firsts(g, x, r);
    if (!f) return CM_ERR_NOMEM;
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
 * (the ladder's rests after `)`, `;`, `,`: some caller reads none of them).  Made for `rule` and
 * the rules above it (those its return states are in, up to the ones of more than
 * PROM_MAX_RETURNS return states, whose PF is none), from the return states' first sets (a chart
 * reset each): the equations of a set of rules closed upward read only rules in it, so its
 * greatest solution is the whole grammar's there, whichever rules were made before. */
static int prom_pf(const cm_grammar *g, cm_promote *x, cm_chart *c, uint32_t rule) {
    prom_rules *b = prom_rules_of(g, x, rule);
    if (!b) return CM_ERR_NOMEM;
    if (b->known[rule % PROM_BLK]) return CM_OK;
    uint32_t *todo = x->pf_todo, n_todo = 0;
    int rc = CM_OK;
    b->known[rule % PROM_BLK] = 2;
    todo[n_todo++] = rule;
    for (uint32_t i = 0; i < n_todo && !rc; i++) {
        uint32_t r = todo[i], n_ret = g->ret_off[r + 1] - g->ret_off[r];
        if (r == g->t.start_rule || !n_ret || n_ret > PROM_MAX_RETURNS) continue;  /* none: zero */
        uint32_t *to = x->rules[r / PROM_BLK]->pf[r % PROM_BLK];
        for (int j = 0; j < 8; j++) to[j] = UINT32_MAX;
        for (uint32_t k = g->ret_off[r]; k < g->ret_off[r + 1] && !rc; k++) {
            if ((rc = prom_first_of(g, x, c, g->ret_state[k]))) break;
            uint32_t up = g->t.state_rule[g->ret_state[k]];
            prom_rules *ub = prom_rules_of(g, x, up);
            if (!ub) rc = CM_ERR_NOMEM;
            else if (!ub->known[up % PROM_BLK]) {
                ub->known[up % PROM_BLK] = 2;
                todo[n_todo++] = up;
            }
        }
    }
    for (bool changed = !rc; changed;) {
        changed = false;
        for (uint32_t i = 0; i < n_todo; i++) {
            uint32_t r = todo[i], n_ret = g->ret_off[r + 1] - g->ret_off[r];
            if (r == g->t.start_rule || !n_ret || n_ret > PROM_MAX_RETURNS) continue;
            uint32_t *to = x->rules[r / PROM_BLK]->pf[r % PROM_BLK];
            for (uint32_t k = g->ret_off[r]; k < g->ret_off[r + 1]; k++) {
                const prom_first *f = prom_firsts(g, x, g->ret_state[k]);  /* made above */
                const uint32_t *up = prom_pf_of(x, g->t.state_rule[g->ret_state[k]]);
                for (int j = 0; j < 8; j++) {
                    uint32_t w = to[j] & (f->first[j] | (f->exits0 ? up[j] : 0));
                    changed |= w != to[j];
                    to[j] = w;
                }
            }
        }
    }
    for (uint32_t i = 0; i < n_todo; i++) {
        uint32_t r = todo[i];
        prom_rules *rb = x->rules[r / PROM_BLK];
        rb->known[r % PROM_BLK] = rc ? 0 : 1;
        if (rc) memset(rb->pf[r % PROM_BLK], 0, sizeof rb->pf[0]);
    }
    return rc;
}

bool cm_promote_applies(const cm_grammar *g) { return cm_promote_on() && g->t.n_la <= 1 && !g->has_segments; }

/* The cache's promotion state, made on first use; NULL where an allocation failed. */
static cm_promote *prom_setup(const cm_grammar *g) {
    cm_cache *cache = g->cache;
    if (!cache->promote) {
        cache->promote = calloc(1, sizeof *cache->promote);
        if (!cache->promote) return NULL;
        atomic_fetch_add(&cache->bytes, sizeof *cache->promote);
    }
    cm_promote *x = cache->promote;
    if (!x->ex && !(x->ex = calloc((size_t)g->v->max_len + 1, 1))) return NULL;
    if (!x->firsts) {
        size_t ns = g->t.n_states / PROM_BLK + 1, nr = g->t.n_rules / PROM_BLK + 1;
        x->n_states = g->t.n_states;
        x->n_rules = g->t.n_rules;
        x->firsts = calloc(ns, sizeof *x->firsts);
        x->prog = calloc(ns, sizeof *x->prog);
        x->rules = calloc(nr, sizeof *x->rules);
        x->pf_todo = malloc((g->t.n_rules + 1) * sizeof *x->pf_todo);
        atomic_fetch_add(&cache->bytes, ns * (sizeof *x->firsts + sizeof *x->prog) + nr * sizeof *x->rules +
                                            (g->t.n_rules + 1) * sizeof *x->pf_todo);
    }
    if (!x->firsts || !x->prog || !x->rules || !x->pf_todo) return NULL;
    if (open_chart(&x->item, &x->item_ok)) return NULL;
    return x;
}

/* Asks state's uncertain tokens unc[from..n) (trie order) in turn, setting the bit of each that
 * moves in `moved`, until `budget` work is spent after a token (0: no limit); the position it
 * stopped at, or < 0 on error (the token there and those after it stay uncertain). */
static long prom_ask(const cm_grammar *g, cm_promote *x, uint32_t state, const uint32_t *unc, size_t from,
                     size_t n, uint64_t budget, uint8_t *moved) {
    const cm_vocab *v = g->v;
    uint32_t st = cm_pack(state, 0), rule = g->t.state_rule[state];
    int rc = prom_pf(g, x, &x->item, rule);
    if (rc) return rc;
    const uint32_t *pf = prom_pf_of(x, rule);
    if ((rc = cm_chart_reset_items(&x->item, g, &st, 1))) return rc;
    x->work = 0;
    const uint8_t *prev = NULL;
    uint32_t plen = 0, have = 0;  /* item holds the sets of prev[0..have) */
    size_t i = from;
    for (; i < n && !(budget && x->work >= budget); i++) {
        uint32_t k = unc[i], len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        /* a rest can be taken only where its first byte is in the rule's PF: none, no scan */
        uint32_t j = 1;
        while (j < len && !cm_bit(pf, p[j])) j++;
        if (j >= len || len > PROM_MAX_LEN) continue;
        uint32_t d = prev ? cm_common_prefix(prev, plen, p, len) : 0;
        if (d > have) d = have;
        cm_chart_truncate(&x->item, (size_t)d + 1);
        uint32_t dead = d;
        for (; dead < len; dead++) {
            int s = cm_chart_scan(&x->item, g, p[dead]);
            PROM_COUNT(x, &x->item);
            if (s <= 0) {
                if (s < 0) return s;
                break;
            }
            x->ex[dead + 1] = x->item.exited;
        }
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
            if (ok < 0) return ok;
        }
        if (ok) moved[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    return (long)i;
}

/* A state's promotion under way (cm_promote_step): its uncertain tokens asked so far, the pieces
 * that asked them, and the positions (in its plain entry's list) of those that moved. */
struct prom_prog {
    size_t next, n;
    uint32_t pieces;
    bool done;
    uint8_t moved[];  /* [(n + 7) / 8] */
};

static atomic_ullong g_piece = PROM_PIECE;

unsigned long long cm_promote_piece(unsigned long long work) { return atomic_exchange(&g_piece, work); }

/* The work the pieces of this thread's mask may still do (a mask's gather reads many states;
 * their pieces together do at most PROM_FILL first pieces' work). */
static _Thread_local unsigned long long t_left;

void cm_promote_fill_begin(void) {
    unsigned long long piece = atomic_load_explicit(&g_piece, memory_order_relaxed);
    t_left = piece ? PROM_FILL * piece : ~0ull;
}

int cm_promote_step(const cm_grammar *g, uint32_t state, const uint32_t *unc, size_t n) {
    cm_promote *x = prom_setup(g);
    if (!x) return CM_ERR_NOMEM;
    prom_prog **at_r = prom_block(g, (void **)x->prog, state, PROM_BLK * sizeof *at_r);
    if (!at_r) return CM_ERR_NOMEM;
    at_r += state % PROM_BLK;
    prom_prog *r = *at_r;
    if (!r) {
        size_t bytes = sizeof *r + (n + 7) / 8;
        if (!(r = calloc(1, bytes))) return CM_ERR_NOMEM;
        r->n = n;
        *at_r = r;
        atomic_fetch_add(&g->cache->bytes, bytes);
    }
    if (r->done) return 1;
    unsigned long long piece = atomic_load_explicit(&g_piece, memory_order_relaxed), budget = 0;
    if (piece) {
        if (!t_left) return 0;  /* this mask's pieces are done: the next mask asks on */
        budget = piece * (r->pieces + 1);
        if (budget > t_left) budget = t_left;
    }
    r->pieces++;
    long at = prom_ask(g, x, state, unc, r->next, r->n, budget, r->moved);
    t_left = x->work < t_left ? t_left - x->work : 0;
    if (at < 0) {
        r->done = true;  /* the rest stay uncertain: what moved before the error moves */
        return 1;
    }
    r->next = (size_t)at;
    r->done = r->next == r->n;
    return r->done;
}

/* The record of a promotion under way; NULL: none. */
static prom_prog *prom_prog_of(const cm_grammar *g, uint32_t state) {
    cm_promote *x = g->cache->promote;
    return x && x->prog && x->prog[state / PROM_BLK] ? x->prog[state / PROM_BLK][state % PROM_BLK] : NULL;
}

static void prom_drop(const cm_grammar *g, cm_promote *x, uint32_t state) {
    prom_prog *r = x->prog[state / PROM_BLK][state % PROM_BLK];
    x->prog[state / PROM_BLK][state % PROM_BLK] = NULL;
    atomic_fetch_sub(&g->cache->bytes, sizeof *r + (r->n + 7) / 8);
    free(r);
}

bool cm_promote_any(const cm_grammar *g, uint32_t state) {
    cm_promote *x = g->cache->promote;
    prom_prog *r = prom_prog_of(g, state);
    if (!r || !r->done) return false;
    for (size_t i = 0; i < (r->n + 7) / 8; i++)
        if (r->moved[i]) return true;
    prom_drop(g, x, state);
    return false;
}

size_t cm_promote_take(const cm_grammar *g, uint32_t state, cm_walk *w) {
    cm_promote *x = g->cache->promote;
    prom_prog *r = prom_prog_of(g, state);
    if (!r || !r->done || r->n != w->n_unc) return 0;
    size_t kept = 0, promoted = 0;
    for (size_t i = 0; i < w->n_unc; i++) {
        uint32_t k = w->unc[i];
        if (r->moved[i >> 3] >> (i & 7) & 1) {
            uint32_t id = g->v->trie_ids[k];
            if (!cm_bit(w->bits, id)) cm_walk_accept(w, id);
            promoted++;
        } else {
            w->unc[kept++] = k;
        }
    }
    w->n_unc = kept;
    prom_drop(g, x, state);
    if (promoted) atomic_fetch_add(&g_promoted, promoted);
    return promoted;
}
