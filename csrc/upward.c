/* The upward filter's chart as a DFA (walk.c, cm_walk_filter_uncertain).
 *
 * The filter reads the rest of each uncertain token after an exit through the
 * upward chart of the item's rule: set 0 every return state of the rule, and
 * completing an item that waits on the unknown caller returns to every caller
 * of its rule.  A rule called from everywhere (JSON Schema's `ws`: every value,
 * key and separator of the schema comes after it) has sets of a hundred items
 * or more after the first byte (every string of the schema that may start
 * there), and each new set costs 1-3 us; the rests of ` "...` tokens ask
 * hundreds of them, mostly the same sets reached by different bytes ("ab and
 * "xy inside every unconstrained string of the schema).
 *
 * So the sets are interned as configurations, as the flat walks do (flat.c):
 * what the chart does next depends on the last set's items that read bytes or
 * call, and, for the completions to come, on the items that call in the sets
 * their origins name, recursively; set 0 is the same for every rest, so it is
 * kept as it is and an origin there stays 0.  That chart suffix, its sets
 * numbered from 1 oldest first, is the configuration: [n_sets, then per set
 * its item count and (packed state, origin) pairs, sorted], origins CM_OUTER,
 * 0 or a set's number.  A configuration's transition on a byte is computed
 * once, with the chart (reloaded from the suffix when it holds another
 * configuration), and then looked up.  A waiter owing a lookahead debt in a
 * set before the last (it reads the bytes between), token edges, or too big a
 * suffix leave the DFA: the rest is read by the chart from that configuration.
 * A waiter owing a debt in set 0 turns the DFA off for the rule.
 *
 * The DFA lives for one filter call (one rule); its verdicts are the chart's,
 * so the entries are the same with it or without (Strategy.upward_dfa). */
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "flat.h"
#include "walk.h"

#define UP_MAX_CONFIGS 8192
#define UP_MAX_ITEMS 2048  /* items of one configuration's suffix */
#define UP_UNKNOWN (-2)
#define UP_DEAD (-1)
#define UP_CHART (-3)  /* not interned: the chart reads on */
#define UP_ERR(rc) ((rc) - 8)  /* errors come back below UP_CHART */

typedef struct {
    const cm_grammar *g;
    cm_chart u;                 /* set 0: the rule's returns; then the sets of configuration `at` */
    int32_t at;                 /* the configuration u's last set is; -1: none */
    uint32_t n, cap;            /* configurations; 0 is set 0 alone */
    uint32_t *off;              /* [cap + 1] configuration i: enc[off[i] .. off[i + 1]) */
    uint32_t *enc;
    size_t n_enc, cap_enc;
    uint64_t *hashes;           /* [cap] */
    int32_t *next;              /* [cap * width] */
    uint32_t *slots;            /* open addressing, id + 1, [hcap] */
    size_t hcap;
    uint32_t width;
    uint8_t col[256];
    uint64_t *tmp;              /* one set's kept items (state << 32 | origin's number) */
    uint32_t *pos;              /* chart set -> its number in the suffix (UINT32_MAX: not in it) */
    uint32_t *cur;              /* the configuration being encoded */
    size_t cap_tmp, cap_pos, cap_cur;
} up_dfa;

static void up_free(up_dfa *d) {
    cm_chart_free(&d->u);
    free(d->off);
    free(d->enc);
    free(d->hashes);
    free(d->next);
    free(d->slots);
    free(d->tmp);
    free(d->pos);
    free(d->cur);
}

static uint64_t up_hash(const uint32_t *e, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ e[i]) * 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

/* Room for one more configuration of n words: 0 or CM_ERR_NOMEM. */
static int up_reserve(up_dfa *d, size_t n) {
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        uint32_t *off = realloc(d->off, ((size_t)cap + 1) * sizeof *off);
        if (off) d->off = off;
        uint64_t *hs = realloc(d->hashes, (size_t)cap * sizeof *hs);
        if (hs) d->hashes = hs;
        int32_t *nx = realloc(d->next, (size_t)cap * d->width * sizeof *nx);
        if (nx) d->next = nx;
        if (!off || !hs || !nx) return CM_ERR_NOMEM;
        d->cap = cap;
    }
    if ((d->n + 1) * 2 > d->hcap) {
        size_t hcap = d->hcap ? d->hcap * 2 : 256;
        uint32_t *sl = calloc(hcap, sizeof *sl);
        if (!sl) return CM_ERR_NOMEM;
        for (uint32_t i = 0; i < d->n; i++) {
            size_t s = d->hashes[i] & (hcap - 1);
            while (sl[s]) s = (s + 1) & (hcap - 1);
            sl[s] = i + 1;
        }
        free(d->slots);
        d->slots = sl;
        d->hcap = hcap;
    }
    return cm_grow((void **)&d->enc, &d->cap_enc, d->n_enc + n, sizeof *d->enc);
}

/* The id of configuration e[0..n), added if new; UP_CHART when the DFA is full. */
static int32_t up_intern(up_dfa *d, const uint32_t *e, size_t n) {
    uint64_t h = up_hash(e, n);
    if (d->hcap)
        for (size_t s = h & (d->hcap - 1); d->slots[s]; s = (s + 1) & (d->hcap - 1)) {
            uint32_t id = d->slots[s] - 1;
            if (d->hashes[id] == h && d->off[id + 1] - d->off[id] == n && !memcmp(d->enc + d->off[id], e, n * 4))
                return (int32_t)id;
        }
    if (d->n == UP_MAX_CONFIGS) return UP_CHART;
    if (up_reserve(d, n)) return UP_ERR(CM_ERR_NOMEM);
    size_t s = h & (d->hcap - 1);
    while (d->slots[s]) s = (s + 1) & (d->hcap - 1);
    uint32_t id = d->n++;
    memcpy(d->enc + d->n_enc, e, n * sizeof *e);
    d->off[id] = (uint32_t)d->n_enc;
    d->n_enc += n;
    d->off[id + 1] = (uint32_t)d->n_enc;
    d->hashes[id] = h;
    for (uint32_t b = 0; b < d->width; b++) d->next[(size_t)id * d->width + b] = UP_UNKNOWN;
    d->slots[s] = id + 1;
    return (int32_t)id;
}

/* Does the item at set `set` of a suffix ending at `last` matter to what comes
 * next: 1 yes, 0 no, -1 the set cannot be interned?  (flat.c's flat_keeps.) */
static int up_keeps(const cm_grammar *g, cm_item it, size_t set, size_t last) {
    uint32_t st = cm_st(it.state);
    bool calls = g->t.ref_off[st] < g->t.ref_off[st + 1];
    if (g->has_tokens[st]) return -1;
    if (set == last) return g->has_bytes[st] || calls;
    if (calls && cm_la(it.state)) return -1;  /* a waiter owing a debt reads the bytes between */
    return calls;
}

/* Ascending, in place (flat.c's sort_u64: no call per comparison). */
static void up_sort(uint64_t *v, size_t n) {
    static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t gi = 0; gi < sizeof gaps / sizeof *gaps; gi++) {
        size_t h = gaps[gi];
        for (size_t a = h; a < n; a++) {
            uint64_t x = v[a];
            size_t b = a;
            for (; b >= h && v[b - h] > x; b -= h) v[b] = v[b - h];
            v[b] = x;
        }
    }
}

/* The configuration of u's last set (past set 0): its id, UP_CHART, or an error. */
static int32_t up_of_set(up_dfa *d) {
    const cm_grammar *g = d->g;
    const cm_chart *c = &d->u;
    size_t last = c->n_sets - 1, big = 0, n_items = 0;
    uint32_t n_sets = 0;
    if (cm_grow((void **)&d->pos, &d->cap_pos, last + 1, sizeof *d->pos)) return UP_ERR(CM_ERR_NOMEM);
    for (size_t j = 1; j <= last; j++) d->pos[j] = UINT32_MAX;
    d->pos[last] = 0;
    for (size_t j = last; j >= 1; j--) {  /* origins point back: one pass down marks them all */
        if (d->pos[j] == UINT32_MAX) continue;
        n_sets++;
        size_t n = 0;
        for (size_t i = c->set_start[j]; i < c->set_start[j + 1]; i++) {
            cm_item it = c->items[i];
            int keep = up_keeps(g, it, j, last);
            if (keep < 0) return UP_CHART;
            if (!keep) continue;
            n++;
            if (it.origin != CM_OUTER && it.origin) d->pos[it.origin] = 0;
        }
        if ((n_items += n) > UP_MAX_ITEMS) return UP_CHART;
        if (n > big) big = n;
    }
    if (cm_grow((void **)&d->tmp, &d->cap_tmp, big ? big : 1, sizeof *d->tmp) ||
        cm_grow((void **)&d->cur, &d->cap_cur, 1 + n_sets + 2 * n_items, sizeof *d->cur))
        return UP_ERR(CM_ERR_NOMEM);
    uint32_t p = 1, *e = d->cur;
    size_t n_e = 1;
    for (size_t j = 1; j <= last; j++)
        if (d->pos[j] != UINT32_MAX) d->pos[j] = p++;
    e[0] = n_sets;
    for (size_t j = 1; j <= last; j++) {
        if (d->pos[j] == UINT32_MAX) continue;
        size_t n = 0;
        for (size_t i = c->set_start[j]; i < c->set_start[j + 1]; i++) {
            cm_item it = c->items[i];
            if (!up_keeps(g, it, j, last)) continue;
            uint32_t o = it.origin == CM_OUTER || !it.origin ? it.origin : d->pos[it.origin];
            d->tmp[n++] = (uint64_t)it.state << 32 | o;
        }
        up_sort(d->tmp, n);
        e[n_e++] = (uint32_t)n;
        for (size_t i = 0; i < n; i++) {
            e[n_e++] = (uint32_t)(d->tmp[i] >> 32);
            e[n_e++] = (uint32_t)d->tmp[i];
        }
    }
    return up_intern(d, e, n_e);
}

/* u's last set made configuration `id`: 0 or an error. */
static int up_load(up_dfa *d, int32_t id) {
    if (d->at == id) return CM_OK;
    int rc = cm_chart_load_after(&d->u, d->g, d->enc + d->off[id], 1);
    d->at = rc ? -1 : id;
    return rc;
}

/* The transition of configuration `from` on byte b, computed with the chart
 * (left holding the set b makes, if it lives). */
static int32_t up_step(up_dfa *d, int32_t from, uint8_t b) {
    int rc = up_load(d, from);
    if (rc) return UP_ERR(rc);
    int r = cm_chart_scan(&d->u, d->g, b);
    if (r < 0) return UP_ERR(r);
    int32_t to = r ? up_of_set(d) : UP_DEAD;
    if (to >= UP_CHART) d->next[(size_t)from * d->width + d->col[b]] = to;
    d->at = !r ? from : to >= 0 ? to : -1;  /* UP_CHART: the chart holds a set no configuration names */
    return to;
}

/* How many bytes of p[0..len) the chart survives reading from configuration
 * `from` at depth dd (len: all), or < 0 on error. */
static long up_chart_rest(up_dfa *d, int32_t from, const uint8_t *p, uint32_t dd, uint32_t len) {
    int rc = up_load(d, from);
    if (rc) return rc;
    for (; dd < len; dd++) {
        int r = cm_chart_scan(&d->u, d->g, p[dd]);
        if (r < 0) return r;
        if (r == 0) break;
        d->at = -1;
    }
    return dd;
}

/* 0, CM_ERR_NOMEM, or 1: no DFA for this rule (a waiter of set 0 owes a debt). */
static int up_init(up_dfa *d, const cm_grammar *g, uint32_t rule) {
    memset(d, 0, sizeof *d);
    d->g = g;
    d->width = cm_byte_columns(g, d->col);
    int rc = cm_chart_init_returns(&d->u, g, rule);
    if (rc) return rc;
    for (size_t i = d->u.set_start[0]; i < d->u.set_start[1]; i++) {
        uint32_t st = cm_st(d->u.items[i].state);
        if (g->has_tokens[st] || (cm_la(d->u.items[i].state) && g->t.ref_off[st] < g->t.ref_off[st + 1])) return 1;
    }
    static const uint32_t root = 0;  /* set 0 alone: no sets after it */
    int32_t id = up_intern(d, &root, 1);
    if (id < 0) return CM_ERR_NOMEM;
    d->at = 0;
    return CM_OK;
}

int cm_upward_answer(const cm_grammar *g, uint32_t rule, const cm_follow_ask *q, size_t n, uint8_t *keep,
                     uint8_t *verdict, uint32_t *st) {
    up_dfa d;
    int rc = up_init(&d, g, rule);
    const uint8_t *prev = NULL;
    uint32_t plen = 0, have = 0;  /* st[0..have] are prev's configurations */
    bool died = false;            /* prev died reading prev[have] */
    st[0] = 0;
    for (size_t j = 0; !rc && j < n; j++) {
        if (keep[q[j].i]) {
            verdict[j] = 2;
            continue;
        }
        const uint8_t *p = q[j].p;
        uint32_t len = q[j].len, c = prev ? cm_common_prefix(prev, plen, p, len) : 0;
        if (died && c > have) {  /* reads the byte prev died on */
            verdict[j] = 0;
            continue;
        }
        uint32_t dd = c < have ? c : have;
        long alive = len;
        bool chart = false;
        for (; dd < len; dd++) {
            int32_t to = d.next[(size_t)st[dd] * d.width + d.col[p[dd]]];
            if (to == UP_UNKNOWN) to = up_step(&d, (int32_t)st[dd], p[dd]);
            if (to >= 0) {
                st[dd + 1] = (uint32_t)to;
                continue;
            }
            if (to == UP_DEAD) {
                alive = dd;
            } else if (to == UP_CHART) {
                alive = up_chart_rest(&d, (int32_t)st[dd], p, dd, len);
                chart = true;
            } else {
                alive = to + 8;
            }
            break;
        }
        if (alive < 0) {
            rc = (int)alive;
            break;
        }
        prev = p;
        plen = len;
        have = dd;
        died = !chart && alive < len;
        verdict[j] = alive == len;
        if (alive == len) keep[q[j].i] = 1;
    }
    up_free(&d);
    return rc;
}
