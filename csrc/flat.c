/* The DFA of flat private charts.
 *
 * Inside a name, a string or a keyword, the private chart of a walk holds only
 * items waiting on the unknown caller (origin CM_OUTER), plus lookahead
 * markers predicted and completed in the same set, which never scan.  Such a
 * set is *flat*: what it does with the next byte depends only on its items
 * that read bytes (packed states, debts included) and on whether it exited.
 * Interned as a configuration, the next byte's set is computed once with a
 * real chart and then looked up: a walk through names costs a table lookup a
 * trie node instead of an Earley step.
 *
 * Calls inside the token (lim.flat_calls).  A set whose items called a rule
 * that reads (a length-bounded string's helper rules, a callee of a name) is
 * not flat, but what the chart does next still depends on little: the last
 * set's items that read bytes or call, and, for the completions to come, the
 * items that call in the sets their origins name, recursively (completion
 * reads nothing else of an earlier set, and nothing of the sets between,
 * unless a waiter owes a lookahead debt: such a set is not interned).  That
 * chart suffix, its sets numbered oldest first, is the configuration; its
 * transition is computed on the suffix reloaded into a chart.  So a configuration
 * is [n_sets, then per set its item count and (packed state, origin) pairs],
 * origins CM_OUTER or a set's position, items sorted: a flat set is one set of
 * CM_OUTER items.  A set with token edges, or too big a suffix, is not interned;
 * the walk then runs the chart from the configuration's suffix for that subtree.
 *
 * A new transition costs a load, a scan and an encoding; they reuse what earlier
 * ones left.  The scratch chart keeps the configuration it holds (a trie node's
 * children step the same one), its sets carry versions by content (flat_versions),
 * so the chart's closure memo holds across configurations that share their first
 * sets, and a memo entry notes the configuration its closure made (flat_step).
 * Built under the cache lock. */
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "flat.h"
#include "tokclass.h"

#define CM_FLAT_MAX 16384       /* configurations; past it, charts take over */
#define CM_FLAT_MAX_ITEMS 128   /* items of one configuration's chart suffix */
#define CM_FLAT_SETS_CAP 16     /* sets of one configuration's chart suffix (cm_flat_sets_cap) */
#define CM_FLAT_UNKNOWN (-1)     /* all bits set: a new row is one memset */
#define CM_FLAT_DEAD (-2)
#define CM_FLAT_CHART (-3)      /* not flat: a chart from here */
/* A known live transition's cell holds the row of the configuration it reaches
 * (id * width, below 2^22), as the walk uses it, and FLAT_ANY if it exited; the
 * walk's stack holds the row and FLAT_ANY if some set on the path exited (at a
 * depth above 0): with none, a dead subtree holds nothing uncertain. */
#define FLAT_ANY (1u << 30)
#define FLAT_ROW (FLAT_ANY - 1)
/* Whether a text entry holds a character beginning with the m (1-3) bytes p: a lead byte,
 * then continuation bytes (vocab.h, text_used). */
static inline bool cm_text_used(const uint32_t *used, const uint8_t *p, unsigned m) {
    if (m == 1) return cm_bit(used + CM_TEXT_USED1, p[0]);
    if (m == 2) return cm_bit(used + CM_TEXT_USED2, (unsigned)p[0] << 8 | p[1]);
    if (p[0] < 0xE0) return false;  /* a 2-byte character has no third byte */
    return cm_bit(used + CM_TEXT_USED3, (unsigned)(p[0] - 0xE0) << 12 | (unsigned)(p[1] & 0x3F) << 6 | (p[2] & 0x3Fu));
}

/* errors come back as (status - 8), below CM_FLAT_CHART */
#define FLAT_ERR(rc) ((rc) - 8)

/* A class X's tables for the walks that take its X-only entries by length (class_table): over
 * the entries of X's first bytes, the next entry not made of X only (nxt) and the prefix such an
 * entry shares with the one before it (lcp), as the name tables are for names; and the X-only
 * entries' token ids by length (ids[0 .. len_at[L]): those of length <= L).  They depend on the
 * vocabulary and X only: the vocabulary keeps them (cm_vocab.classes), read by every thread,
 * written once; upto's slots are set once each the same way (compare and swap). */
typedef struct cm_flat_cls {
    uint32_t x[8];
    uint32_t xe[8];  /* the bytes of x that open entries (what the tables read) */
    uint32_t *nxt, *lcp, *ids, *len_at;
    uint32_t top;  /* the longest X-only entry (the arrays may have room for more) */
    uint32_t n_upto;  /* upto's slots: the longest entry of X's first bytes, + 1 */
    _Atomic(uint32_t *) *upto;  /* upto[L] the ids of length <= L as a bitset, made on first use */
} flat_cls;

/* Sets 0..j of a loaded chart: the prefix of sets 0..j-1 (UINT32_MAX: none)
 * and set j as a configuration encodes it (items[off]: its count, then pairs). */
typedef struct flat_prefix {
    uint64_t hash;
    uint32_t parent, off;
} flat_prefix;

struct cm_flat {
    uint32_t n, cap;
    uint32_t *off;              /* [cap + 1] items of configuration i: items[off[i] .. off[i+1]) */
    uint32_t *items;            /* chart suffixes, encoded as above */
    size_t n_items, cap_items;
    uint8_t *exited;            /* [cap] */
    uint32_t *reads;            /* [cap * 8] the bytes some item of the last set has a transition
                                   on: a superset of the live columns, the others dead unscanned */
    int32_t *next;              /* [cap * width], by column: a special (< 0) or a live cell (flat_cell) */
    uint32_t width;
    uint64_t recip;             /* 2^32 / width + 1: a row times it, over 2^32, is its configuration */
    uint8_t col[256];           /* byte -> column: bytes of one class that every lookahead
                                   debt also treats alike (debts read bytes, not classes) */
    uint32_t *slots;            /* open addressing, id + 1, [hcap] */
    uint64_t *hashes;           /* [cap] */
    size_t hcap;
    cm_chart chart;             /* scratch for computing a transition */
    bool chart_ok;
    uint32_t loaded;            /* the configuration whose sets begin the scratch chart, as
                                   cm_chart_load left them; UINT32_MAX: none */
    uint32_t met[4][8];         /* classes met once, their table not made (class_bulk) */
    uint32_t n_met;
    flat_prefix *pfx;           /* the loaded sets' contents, interned (flat_versions) */
    uint32_t n_pfx, cap_pfx;
    uint32_t *pslots;           /* open addressing, prefix id + 1, [pcap] */
    size_t pcap;
    cm_chart walk;              /* scratch for walking a subtree that leaves the DFA */
    bool walk_ok;
    uint64_t *tmp;              /* one set's items (state << 32 | origin's position) */
    uint8_t *keep;              /* per chart item, whether the configuration keeps it */
    uint32_t *enc;              /* the configuration being encoded */
    uint32_t *pos;              /* chart set -> position in the suffix (UINT32_MAX: not in it) */
    int32_t *start_of;          /* [n_states] the configuration of (state, OUTER) + 4; 0: not known
                                   (NULL when memory was short) */
    uint32_t *plain_ok;         /* [cap] flat_plain_live's answer: 0 not known, 1 yes, 2 no; flat_text_live's
                                   from UTF-8 state u in the two bits 2u + 2 on, the same way */
    /* flat_text_live's bytes: from each UTF-8 state, one byte a (column, next state) pair and
       that state; made on first use (text_n_rep[0] 0: not yet) */
    uint8_t text_rep[CM_UTF8_STATES][256], text_rep_u[CM_UTF8_STATES][256];
    uint16_t text_n_rep[CM_UTF8_STATES];
    uint64_t *text_slot;        /* flat_text_unused_live's pairs queued, [FLAT_TEXT_SLOTS]: its call's stamp << 44
                                   | the pair + 1 (made on first use; stamps instead of a clear a call) */
    uint32_t text_stamp;
    size_t cap_tmp, cap_pos;
};

void cm_flat_free(cm_flat *f) {
    if (!f) return;
    free(f->off);
    free(f->items);
    free(f->exited);
    free(f->reads);
    free(f->next);
    free(f->slots);
    free(f->hashes);
    free(f->tmp);
    free(f->keep);
    free(f->pfx);
    free(f->pslots);
    free(f->enc);
    free(f->pos);
    free(f->start_of);
    free(f->plain_ok);
    free(f->text_slot);
    if (f->chart_ok) cm_chart_free(&f->chart);
    if (f->walk_ok) cm_chart_free(&f->walk);
    free(f);
}

size_t cm_flat_configs(const cm_flat *f) { return f ? f->n : 0; }

static uint64_t flat_hash(const uint32_t *it, size_t n, bool exited) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n ^ ((uint64_t)exited << 40);
    size_t i = 0;
    for (; i + 1 < n; i += 2) h = (h ^ it[i] ^ (uint64_t)it[i + 1] << 32) * 0xbf58476d1ce4e5b9ULL;
    if (i < n) h = (h ^ it[i]) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    return h;
}

/* Room for one more configuration of n items: 0 or CM_ERR_NOMEM. */
static int flat_reserve(cm_flat *f, size_t n) {
    if (f->n == f->cap) {
        uint32_t cap = f->cap * 2;
        uint32_t *off = realloc(f->off, ((size_t)cap + 1) * sizeof *off);
        if (off) f->off = off;
        uint8_t *ex = realloc(f->exited, cap);
        if (ex) f->exited = ex;
        uint32_t *rd = realloc(f->reads, (size_t)cap * 8 * sizeof *rd);
        if (rd) f->reads = rd;
        int32_t *nx = realloc(f->next, (size_t)cap * f->width * sizeof *nx);
        if (nx) f->next = nx;
        uint64_t *hs = realloc(f->hashes, (size_t)cap * sizeof *hs);
        if (hs) f->hashes = hs;
        uint32_t *po = realloc(f->plain_ok, (size_t)cap * sizeof *po);
        if (po) f->plain_ok = po;
        if (!off || !ex || !rd || !nx || !hs || !po) return CM_ERR_NOMEM;
        f->cap = cap;
    }
    if (f->n_items + n > f->cap_items) {
        size_t cap = (f->n_items + n) * 2;
        uint32_t *p = realloc(f->items, cap * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        f->items = p;
        f->cap_items = cap;
    }
    return CM_OK;
}

/* The hash table doubled once it is half full: 0 or CM_ERR_NOMEM. */
static int flat_rehash(cm_flat *f) {
    if ((size_t)(f->n + 1) * 2 <= f->hcap) return CM_OK;
    size_t hcap = f->hcap * 2;
    uint32_t *sl = calloc(hcap, sizeof *sl);
    if (!sl) return CM_ERR_NOMEM;
    for (uint32_t i = 0; i < f->n; i++) {
        size_t j = f->hashes[i] & (hcap - 1);
        while (sl[j]) j = (j + 1) & (hcap - 1);
        sl[j] = i + 1;
    }
    free(f->slots);
    f->slots = sl;
    f->hcap = hcap;
    return CM_OK;
}

/* The bytes some item of an encoded configuration's last set has a transition
 * on: a scan of any other byte advances nothing, so the configuration dies on it. */
static void last_set_reads(const cm_grammar *g, const uint32_t *it, size_t n, uint32_t *reads) {
    memset(reads, 0, 8 * sizeof *reads);
    size_t at = 1;
    for (uint32_t j = 1; n && j < it[0] && at < n; j++) at += 1 + 2 * (size_t)it[at];  /* to the last set */
    if (!n || at >= n) {
        memset(reads, 0xff, 8 * sizeof *reads);  /* not expected: every byte computed */
        return;
    }
    for (size_t i = 0; i < it[at] && at + 2 + 2 * i < n; i++) {
        const uint32_t *nb = g->next_bytes + (size_t)cm_st(it[at + 1 + 2 * i]) * 8;
        for (int j = 0; j < 8; j++) reads[j] |= nb[j];
    }
}

/* The id of the configuration (sorted items, exited), added if new;
 * CM_FLAT_CHART when the table is full, < CM_FLAT_CHART on error. */
static int32_t flat_intern(const cm_grammar *g, cm_flat *f, const uint32_t *it, size_t n, bool exited) {
    uint64_t h = flat_hash(it, n, exited);
    size_t s = h & (f->hcap - 1);
    for (; f->slots[s]; s = (s + 1) & (f->hcap - 1)) {
        uint32_t id = f->slots[s] - 1;
        if (f->hashes[id] == h && f->exited[id] == exited && f->off[id + 1] - f->off[id] == n &&
            (!n || !memcmp(f->items + f->off[id], it, n * sizeof *it)))
            return (int32_t)id;
    }
    if (f->n == CM_FLAT_MAX) return CM_FLAT_CHART;
    size_t hcap = f->hcap;
    if (flat_reserve(f, n) || flat_rehash(f)) return FLAT_ERR(CM_ERR_NOMEM);
    if (f->hcap != hcap)
        for (s = h & (f->hcap - 1); f->slots[s]; s = (s + 1) & (f->hcap - 1)) {
        }
    uint32_t id = f->n++;
    if (n) memcpy(f->items + f->n_items, it, n * sizeof *it);
    f->off[id] = (uint32_t)f->n_items;
    f->n_items += n;
    f->off[id + 1] = (uint32_t)f->n_items;
    f->exited[id] = exited;
    f->plain_ok[id] = 0;
    f->hashes[id] = h;
    last_set_reads(g, it, n, f->reads + (size_t)id * 8);
    memset(f->next + (size_t)id * f->width, 0xff, f->width * sizeof *f->next);  /* CM_FLAT_UNKNOWN */
    f->slots[s] = id + 1;
    atomic_fetch_add(&g->cache->bytes, f->width * 4 + n * 4 + 48);
    return (int32_t)id;
}

/* Does the item at set `set` of a suffix ending at `last` matter to what comes
 * next: 1 yes, 0 no, -1 the set cannot be interned?  The last set's items that
 * read or call, and the callers of earlier sets (completions advance them). */
static inline int flat_keeps(const cm_grammar *g, cm_item it, size_t set, size_t last) {
    uint32_t st = cm_st(it.state);
    bool calls = g->calls[st] != 0;
    if (g->has_tokens[st]) return -1;
    if (!g->lim.flat_calls) {  /* flat sets only */
        if (it.origin == CM_OUTER) return g->has_bytes[st];
        return it.origin != last || g->has_bytes[st] || calls ? -1 : 0;
    }
    if (set == last) return g->has_bytes[st] || calls;
    if (calls && cm_la(it.state)) return -1;  /* a waiter owing a debt reads the bytes between */
    return calls;
}

/* Ascending, in place: Shell sort (Ciura's gaps, then insertion), no call per
 * comparison.  A set keeps at most CM_FLAT_MAX_ITEMS items, and libc's qsort
 * (a merge sort through a comparison function) was 11 % of a c.gbnf statement
 * start's first mask, which builds hundreds of configurations of 20-40 items. */
static void sort_u64(uint64_t *v, size_t n) {
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

/* Room for the scratch of encoding a chart of n_sets sets and n items:
 * 0 or CM_ERR_NOMEM. */
static int flat_scratch(cm_flat *f, size_t n_sets, size_t n) {
    if (n_sets > f->cap_pos) {
        uint32_t *p = realloc(f->pos, n_sets * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        f->pos = p;
        f->cap_pos = n_sets;
    }
    if (n > f->cap_tmp) {
        uint64_t *t = realloc(f->tmp, n * sizeof *t);
        if (!t) return CM_ERR_NOMEM;
        f->tmp = t;
        uint8_t *k = realloc(f->keep, n);
        if (!k) return CM_ERR_NOMEM;
        f->keep = k;
        f->cap_tmp = n;
    }
    if (!f->enc && !(f->enc = malloc((1 + 3 * CM_FLAT_MAX_ITEMS + 2) * sizeof *f->enc))) return CM_ERR_NOMEM;
    return CM_OK;
}

/* The sets of the suffix (pos[] set for those in it, keep[] for their items)
 * and their number; 0 when it cannot be interned.  The first `kept` sets are a
 * configuration's sets before its last, as loaded: flat_keeps kept each of
 * their items, and keeps it again (neither is the last set). */
/* A configuration whose chart suffix holds more sets than this is not interned: the
 * walk goes on with a chart (flat_leave), as past CM_FLAT_MAX_ITEMS.  A right-recursive
 * rule read again and again nests one set deeper at each step (arithmetic's unary
 * minus: Llama-3's runs of up to 96 dashes), so each step was a new configuration,
 * its whole suffix encoded, sorted and hashed for a transition met once.  0: no cap;
 * how many suffixes the cap refused, in this process (for the tests). */
static atomic_uint g_sets_cap = CM_FLAT_SETS_CAP;
static atomic_size_t g_sets_capped;
void cm_flat_sets_cap(unsigned n) { atomic_store(&g_sets_cap, n); }
size_t cm_flat_sets_capped(void) { return atomic_load(&g_sets_capped); }

static uint32_t flat_suffix(const cm_grammar *g, cm_flat *f, const cm_chart *c, size_t kept) {
    size_t last = c->n_sets - 1, n_items = 0;
    uint32_t n_sets = 0;
    for (size_t j = 0; j <= last; j++) f->pos[j] = UINT32_MAX;
    f->pos[last] = 0;
    for (size_t j = last + 1; j-- > 0;) {  /* origins point back: one pass down marks them all */
        if (f->pos[j] == UINT32_MAX) continue;
        if (++n_sets > CM_FLAT_MAX_ITEMS + 1) return 0;  /* enc has room for that many */
        unsigned cap = atomic_load_explicit(&g_sets_cap, memory_order_relaxed);
        if (cap && n_sets > cap) {
            atomic_fetch_add_explicit(&g_sets_capped, 1, memory_order_relaxed);
            return 0;
        }
        for (size_t i = c->set_start[j]; i < c->set_start[j + 1]; i++) {
            int keep = j < kept ? 1 : flat_keeps(g, c->items[i], j, last);
            if (keep < 0 || (keep && ++n_items > CM_FLAT_MAX_ITEMS)) return 0;
            if (keep && c->items[i].origin != CM_OUTER) f->pos[c->items[i].origin] = 0;
            f->keep[i] = (uint8_t)keep;
        }
    }
    uint32_t p = 0;
    for (size_t j = 0; j <= last; j++)
        if (f->pos[j] != UINT32_MAX) f->pos[j] = p++;
    return n_sets;
}

/* The configuration of the chart's last set: its id, CM_FLAT_CHART if it
 * cannot be interned, < CM_FLAT_CHART on error.  `kept`: see flat_suffix. */
static int32_t flat_of_set(const cm_grammar *g, cm_flat *f, const cm_chart *c, size_t kept) {
    size_t last = c->n_sets - 1;
    if (flat_scratch(f, last + 1, c->n_items)) return FLAT_ERR(CM_ERR_NOMEM);
    uint32_t n_sets = flat_suffix(g, f, c, kept), *enc = f->enc, n_enc = 1;
    if (!n_sets) return CM_FLAT_CHART;
    enc[0] = n_sets;
    for (size_t j = 0; j <= last; j++) {
        if (f->pos[j] == UINT32_MAX) continue;
        /* the pairs in place, sorted after if they were not in order (a loaded set's
         * kept items are: positions keep the order of the sets they number) */
        uint32_t *out = enc + n_enc + 1, n = 0;
        uint64_t prev = 0;
        bool sorted = true;
        for (size_t i = c->set_start[j]; i < c->set_start[j + 1]; i++) {
            cm_item it = c->items[i];
            if (!f->keep[i]) continue;
            uint32_t o = it.origin == CM_OUTER ? CM_OUTER : f->pos[it.origin];
            uint64_t key = (uint64_t)it.state << 32 | o;
            sorted &= !n || prev < key;
            prev = key;
            out[2 * n] = it.state;
            out[2 * n + 1] = o;
            n++;
        }
        if (!sorted) {
            for (uint32_t i = 0; i < n; i++) f->tmp[i] = (uint64_t)out[2 * i] << 32 | out[2 * i + 1];
            sort_u64(f->tmp, n);
            for (uint32_t i = 0; i < n; i++) {
                out[2 * i] = (uint32_t)(f->tmp[i] >> 32);
                out[2 * i + 1] = (uint32_t)f->tmp[i];
            }
        }
        enc[n_enc] = n;
        n_enc += 1 + 2 * n;
    }
    return flat_intern(g, f, enc, n_enc, c->exited);
}

/* The columns of the flat DFA: bytes that share their class and, for every
 * lookahead debt, what the debt becomes after them (a scan depends on nothing
 * else of the byte: later sets of a flat walk read no byte of this one). */
static void flat_columns(const cm_grammar *g, cm_flat *f) {
    const cm_tables *t = &g->t;
    int16_t first[256];  /* the first byte of each column */
    int16_t last[256];   /* per class, its newest column (-1: none yet) */
    int16_t prev[256];   /* per column, the one before it of the same class */
    memset(last, 0xff, sizeof last);
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t cls = t->byte_class[b];
        int c = last[cls];
        for (; c >= 0; c = prev[c]) {  /* only the columns of b's class */
            int a = first[c];
            uint32_t la = 1;
            while (la < t->n_la && t->la_next[(size_t)la * 256 + a] == t->la_next[(size_t)la * 256 + b]) la++;
            if (la >= t->n_la) break;
        }
        if (c < 0) {
            c = (int)n++;
            first[c] = (int16_t)b;
            prev[c] = last[cls];
            last[cls] = (int16_t)c;
        }
        f->col[b] = (uint8_t)c;
    }
    f->width = n;
    f->recip = (1ull << 32) / n + 1;
}

/* The grammar's DFA, created empty (flat_get: on first use); NULL when memory is short. */
static __attribute__((noinline)) cm_flat *flat_new(const cm_grammar *g) {
    cm_flat *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->cap = 64;
    f->hcap = 256;
    f->loaded = UINT32_MAX;
    flat_columns(g, f);
    f->off = malloc((f->cap + 1) * sizeof *f->off);
    f->exited = malloc(f->cap);
    f->reads = malloc((size_t)f->cap * 8 * sizeof *f->reads);
    f->next = malloc((size_t)f->cap * f->width * sizeof *f->next);
    f->hashes = malloc(f->cap * sizeof *f->hashes);
    f->slots = calloc(f->hcap, sizeof *f->slots);
    f->plain_ok = malloc(f->cap * sizeof *f->plain_ok);
    if (!f->off || !f->exited || !f->reads || !f->next || !f->hashes || !f->slots || !f->plain_ok) {
        cm_flat_free(f);
        return NULL;
    }
    f->off[0] = 0;
    f->start_of = calloc(g->t.n_states ? g->t.n_states : 1, sizeof *f->start_of);  /* optional */
    g->cache->flat = f;
    return f;
}

static inline cm_flat *flat_get(const cm_grammar *g) { return g->cache->flat ? g->cache->flat : flat_new(g); }

/* The configuration of the closure of (state, OUTER), or CM_FLAT_CHART.  With
 * `in_chart` the closure is left in the scratch chart (a whole walk reads its
 * bytes); otherwise a state's configuration is computed once: the exits of a
 * shared loop walk start hundreds of walks from the same few states. */
static __attribute__((noinline)) int32_t flat_start_new(const cm_grammar *g, cm_flat *f, uint32_t state) {
    int rc;
    f->loaded = UINT32_MAX;  /* the scratch chart is reset */
    if (!f->chart_ok) {
        rc = cm_chart_init_items(&f->chart, g, &state, 1);
        f->chart_ok = rc == CM_OK;
    } else {
        rc = cm_chart_reset_items(&f->chart, g, &state, 1);
    }
    if (rc) return FLAT_ERR(rc);
    int32_t c0 = flat_of_set(g, f, &f->chart, 0);
    if (c0 >= CM_FLAT_CHART && f->start_of) f->start_of[state] = c0 + 4;
    return c0;
}

static inline int32_t flat_start(const cm_grammar *g, cm_flat *f, uint32_t state, bool in_chart) {
    if (!in_chart && f->start_of && f->start_of[state]) return f->start_of[state] - 4;  /* known */
    return flat_start_new(g, f, state);
}

/* Give the sets of configuration id, just loaded into the scratch chart, the
 * versions of their contents: set j's is its prefix's id (sets 0..j as they
 * are), above any clock's, so that two configurations with the same first sets
 * load them with the same versions and the chart's closure memo (and waiter
 * index), valid while a set's version is unchanged, holds across loads.  Out of
 * memory, the clock's versions stay (fresh: no memo entry matches them). */
static void flat_versions(const cm_grammar *g, cm_flat *f, uint32_t id) {
    uint32_t at = f->off[id], n_sets = f->items[at++], parent = UINT32_MAX;
    for (uint32_t j = 0; j < n_sets; j++) {
        uint32_t n = 1 + 2 * f->items[at];
        uint64_t h = flat_hash(f->items + at, n, false) ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ULL);
        if ((size_t)(f->n_pfx + 1) * 2 > f->pcap) {  /* grow the table first */
            size_t pcap = f->pcap ? f->pcap * 2 : 1024;
            uint32_t *sl = calloc(pcap, sizeof *sl);
            if (!sl) return;
            for (uint32_t i = 0; i < f->n_pfx; i++) {
                size_t k = f->pfx[i].hash & (pcap - 1);
                while (sl[k]) k = (k + 1) & (pcap - 1);
                sl[k] = i + 1;
            }
            free(f->pslots);
            f->pslots = sl;
            f->pcap = pcap;
        }
        size_t k = h & (f->pcap - 1);
        for (; f->pslots[k]; k = (k + 1) & (f->pcap - 1)) {
            const flat_prefix *p = &f->pfx[f->pslots[k] - 1];
            if (p->hash == h && p->parent == parent && f->items[p->off] == f->items[at] &&
                !memcmp(f->items + p->off, f->items + at, n * sizeof *f->items))
                break;
        }
        if (!f->pslots[k]) {
            if (f->n_pfx == f->cap_pfx) {
                uint32_t cap = f->cap_pfx ? f->cap_pfx * 2 : 256;
                flat_prefix *p = realloc(f->pfx, cap * sizeof *p);
                if (!p) return;
                f->pfx = p;
                f->cap_pfx = cap;
            }
            f->pfx[f->n_pfx] = (flat_prefix){h, parent, at};
            f->pslots[k] = ++f->n_pfx;
            atomic_fetch_add(&g->cache->bytes, sizeof(flat_prefix) + 2 * sizeof(uint32_t));
        }
        parent = f->pslots[k] - 1;
        f->chart.version[j] = (1ull << 63) | parent;
        at += n;
    }
}

/* The cell of a transition to `to` (a special stays as it is). */
static inline int32_t flat_cell(const cm_flat *f, int32_t to) {
    return to < 0 ? to : (int32_t)((uint32_t)to * f->width | (f->exited[to] ? FLAT_ANY : 0));
}

/* The configuration of a row (exact: rows are below 2^22, multiples of width). */
static inline uint32_t flat_id(const cm_flat *f, uint32_t row) { return (uint32_t)((row * f->recip) >> 32); }

/* How many transitions flat_step_plain made, and proofs plain_closure_live
 * settled, in this process: for the tests. */
static atomic_size_t g_plain_steps, g_plain_proofs;

size_t cm_flat_plain_steps(void) { return atomic_load(&g_plain_steps); }
size_t cm_flat_plain_proofs(void) { return atomic_load(&g_plain_proofs); }

/* The configuration of (st, OUTER) for a plain state st with bytes: its
 * chart's set is that item alone (no call, no completion), not exited, which
 * flat_of_set encodes as [1 set, 1 item, st, OUTER]; interned if new (as
 * flat_start_new would), the state's start_of noted.  CM_FLAT_CHART when the
 * table is full, < CM_FLAT_CHART on error. */
static int32_t plain_config(const cm_grammar *g, cm_flat *f, uint32_t st) {
    if (f->start_of && f->start_of[st]) return f->start_of[st] - 4;
    uint32_t enc[4] = {1, 1, st, CM_OUTER};
    int32_t c = flat_intern(g, f, enc, 4, false);
    if (c >= CM_FLAT_CHART && f->start_of) f->start_of[st] = c + 4;
    return c;
}

/* The transition of a configuration of one set of CM_OUTER items owing no debt
 * on a byte that takes each item that reads it to a plain state with bytes (no
 * call, no completion, no token edge, not accepting): the chart's new set is
 * those targets and closes to itself, not exited, and flat_of_set would encode
 * it as they are, sorted and distinct.  So it is interned as that, with no
 * chart, into the same table in the same order (the DFA grows as the chart's
 * way grows it): inside a name, a string or a key most transitions are such
 * (an object's key that may be any string but the schema's keys walks the DFA
 * of the keys' prefixes; the chart's load, scan and encoding were ~3 K
 * instructions a transition).  CM_FLAT_UNKNOWN: not such a step. */
static int32_t flat_step_plain(const cm_grammar *g, cm_flat *f, const uint32_t *sig, uint8_t b) {
    const cm_tables *t = &g->t;
    if (sig[0] != 1 || sig[1] > CM_FLAT_MAX_ITEMS) return CM_FLAT_UNKNOWN;
    uint32_t enc[2 + 2 * CM_FLAT_MAX_ITEMS], *to = enc + 2, n = 0, cls = t->byte_class[b];
    for (uint32_t i = 0; i < sig[1]; i++) {
        uint32_t packed = sig[2 + 2 * i], st = cm_st(packed);
        if (sig[3 + 2 * i] != CM_OUTER || cm_la(packed)) return CM_FLAT_UNKNOWN;
        int32_t next = g->has_bytes[st] ? t->trans[(size_t)st * t->n_classes + cls] : -1;
        if (next < 0) continue;
        if (!g->plain[next] || !g->has_bytes[next]) return CM_FLAT_UNKNOWN;
        /* (state, CM_OUTER) pairs, ascending and distinct, as the chart's dedup and the encoding's sort make them */
        uint32_t j = n;
        while (j && to[2 * j - 2] > (uint32_t)next) j--;
        if (j && to[2 * j - 2] == (uint32_t)next) continue;
        memmove(to + 2 * j + 2, to + 2 * j, 2 * (n - j) * sizeof *to);
        to[2 * j] = (uint32_t)next;
        to[2 * j + 1] = CM_OUTER;
        n++;
    }
    if (!n) return CM_FLAT_UNKNOWN;  /* not expected: the reads row said some item reads b */
    atomic_fetch_add_explicit(&g_plain_steps, 1, memory_order_relaxed);
    if (n == 1) return plain_config(g, f, to[0]);
    enc[0] = 1;
    enc[1] = n;
    return flat_intern(g, f, enc, 2 + 2 * n, false);
}

/* The same step for a configuration of several sets (a rule called inside the token: an
 * object's key string, a ws loop), its last set's items all older than that set (none
 * predicted in it) and owing no debt, where the new set's closure predicts nothing: each item
 * that reads b goes to a state with no call and no token edge, and an accepting one completes
 * its rule into an older set, whose waiters (owing no debt) advance the same way, recursively.
 * That closure is the chart's (close_set_k: completion reads only the origin's set, which the
 * configuration holds whole, as the loaded chart does), and flat_of_set keeps of it the items
 * with bytes, of the loaded sets before the last (kept) every item of those the new set's
 * origins reach, recursively, and of the old last set nothing (no new item names it, and older
 * sets name only older ones): so the configuration is the reached sets, renumbered in order
 * (their items' order holds: the numbering keeps the order), and the new set's kept items,
 * sorted, exited if a CM_OUTER item accepted.  Interned as that, as flat_of_set would, with no
 * chart.  Where the chart could refuse it (the sets' or items' cap), on segments (no chart
 * loads them), or not such a step: CM_FLAT_UNKNOWN. */
static atomic_int g_plain_sets = 1;
static atomic_size_t g_plain_sets_steps;
void cm_flat_plain_sets_enable(int on) { atomic_store(&g_plain_sets, on ? 1 : 0); }
size_t cm_flat_plain_sets_steps(void) { return atomic_load(&g_plain_sets_steps); }

#define PLAIN_SETS_ITEMS (2 * CM_FLAT_MAX_ITEMS)  /* the new set's closure, kept or not */

/* Add (st, o) to the new set's items unless there: false when full. */
static inline bool sets_add(uint32_t *it, uint32_t *n, uint32_t st, uint32_t o) {
    for (uint32_t i = 0; i < *n; i++)
        if (it[2 * i] == st && it[2 * i + 1] == o) return true;
    if (*n == PLAIN_SETS_ITEMS) return false;
    it[2 * *n] = st;
    it[2 * *n + 1] = o;
    ++*n;
    return true;
}

static int32_t flat_step_plain_sets(const cm_grammar *g, cm_flat *f, const uint32_t *sig, uint8_t b) {
    const cm_tables *t = &g->t;
    uint32_t n_sets = sig[0], at[CM_FLAT_SETS_CAP], reach[CM_FLAT_SETS_CAP];
    if (!n_sets || n_sets > CM_FLAT_SETS_CAP || g->has_segments) return CM_FLAT_UNKNOWN;
    uint32_t a = 1;
    for (uint32_t j = 0; j < n_sets; j++) {
        at[j] = a;
        reach[j] = 0;
        a += 1 + 2 * sig[a];
    }
    const uint32_t last = n_sets - 1, *ls = sig + at[last];
    uint32_t it[2 * PLAIN_SETS_ITEMS], n = 0, cls = t->byte_class[b];
    for (uint32_t i = 0; i < ls[0]; i++) {
        uint32_t packed = ls[1 + 2 * i], st = cm_st(packed), o = ls[2 + 2 * i];
        if (o == last || cm_la(packed)) return CM_FLAT_UNKNOWN;
        int32_t next = g->has_bytes[st] ? t->trans[(size_t)st * t->n_classes + cls] : -1;
        if (next >= 0 && !sets_add(it, &n, (uint32_t)next, o)) return CM_FLAT_UNKNOWN;
    }
    if (!n) return CM_FLAT_UNKNOWN;  /* not expected: the reads row said some item reads b */
    bool exited = false;
    for (uint32_t i = 0; i < n; i++) {  /* the closure: completions only */
        uint32_t st = it[2 * i], o = it[2 * i + 1];
        if (t->ref_off[st] != t->ref_off[st + 1] || g->has_tokens[st]) return CM_FLAT_UNKNOWN;
        if (!t->accepting[st]) continue;
        if (o == CM_OUTER) {
            exited = true;
            continue;
        }
        uint32_t rule = t->state_rule[st];
        const uint32_t *ws = sig + at[o];
        for (uint32_t w = 0; w < ws[0]; w++) {
            uint32_t wp = ws[1 + 2 * w], wst = cm_st(wp);
            if (!(g->calls[wst] & 1ull << (rule & 63))) continue;
            if (cm_la(wp)) return CM_FLAT_UNKNOWN;
            for (uint32_t e = t->ref_off[wst]; e < t->ref_off[wst + 1]; e++)
                if (t->ref_rule[e] == rule && !sets_add(it, &n, t->ref_target[e], ws[2 + 2 * w]))
                    return CM_FLAT_UNKNOWN;
        }
    }
    /* the kept items (flat_keeps: bytes; none calls), ascending (origins renumbered below, in order) */
    uint32_t to[2 * CM_FLAT_MAX_ITEMS], m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t st = it[2 * i], o = it[2 * i + 1];
        if (!g->has_bytes[st]) continue;
        if (m == CM_FLAT_MAX_ITEMS) return CM_FLAT_UNKNOWN;
        uint64_t key = (uint64_t)st << 32 | o;
        uint32_t j = m;
        while (j && ((uint64_t)to[2 * j - 2] << 32 | to[2 * j - 1]) > key) j--;
        memmove(to + 2 * j + 2, to + 2 * j, 2 * (m - j) * sizeof *to);
        to[2 * j] = st;
        to[2 * j + 1] = o;
        if (o != CM_OUTER) reach[o] = 1;
        m++;
    }
    /* the sets the new one's origins reach, down (origins point back); a set's new position */
    uint32_t n_new = 1, n_items = m;
    for (uint32_t j = last; j-- > 0;) {
        if (!reach[j]) continue;
        n_new++;
        n_items += sig[at[j]];
        for (uint32_t i = 0; i < sig[at[j]]; i++) {
            uint32_t o = sig[at[j] + 2 + 2 * i];
            if (o != CM_OUTER) reach[o] = 1;
        }
    }
    unsigned cap = atomic_load_explicit(&g_sets_cap, memory_order_relaxed);
    if ((cap && n_new > cap) || n_items > CM_FLAT_MAX_ITEMS) return CM_FLAT_UNKNOWN;
    uint32_t *enc = f->enc, p = 0;
    if (!enc && !(enc = f->enc = malloc((1 + 3 * CM_FLAT_MAX_ITEMS + 2) * sizeof *f->enc)))
        return FLAT_ERR(CM_ERR_NOMEM);
    for (uint32_t j = 0; j < last; j++)
        if (reach[j]) reach[j] = ++p;  /* position + 1 */
    uint32_t k = 1;
    enc[0] = n_new;
    for (uint32_t j = 0; j < last; j++) {
        if (!reach[j]) continue;
        const uint32_t *ss = sig + at[j];
        enc[k++] = ss[0];
        for (uint32_t i = 0; i < ss[0]; i++) {
            enc[k++] = ss[1 + 2 * i];
            enc[k++] = ss[2 + 2 * i] == CM_OUTER ? CM_OUTER : reach[ss[2 + 2 * i]] - 1;
        }
    }
    enc[k++] = m;
    for (uint32_t i = 0; i < m; i++) {
        enc[k++] = to[2 * i];
        enc[k++] = to[2 * i + 1] == CM_OUTER ? CM_OUTER : reach[to[2 * i + 1]] - 1;
    }
    atomic_fetch_add_explicit(&g_plain_sets_steps, 1, memory_order_relaxed);
    return flat_intern(g, f, enc, k, exited);
}

/* The transition of configuration id on byte b, computed with the scratch chart
 * unless no item reads b (most of a trie node's children die so). */
static int32_t flat_step(const cm_grammar *g, cm_flat *f, uint32_t id, uint8_t b) {
    if (!cm_bit(f->reads + (size_t)id * 8, b)) {
        f->next[(size_t)id * f->width + f->col[b]] = CM_FLAT_DEAD;
        return CM_FLAT_DEAD;
    }
    const uint32_t *sig = f->items + f->off[id];
    if (g->lim.flat_plain_steps) {
        int32_t to = flat_step_plain(g, f, sig, b);
        /* not where the chart holds this configuration already (a trie node's earlier child
         * loaded it): a truncate and a scan there cost less than the plain step's ~1.35 K
         * (c.gbnf's cold fills 255.54 -> 254.48 M, the 20 median schemas' -0.22 %) */
        if (to == CM_FLAT_UNKNOWN && atomic_load_explicit(&g_plain_sets, memory_order_relaxed) && f->loaded != id)
            to = flat_step_plain_sets(g, f, sig, b);
        if (to != CM_FLAT_UNKNOWN) {
            if (to >= CM_FLAT_CHART) f->next[(size_t)id * f->width + f->col[b]] = flat_cell(f, to);
            return to;
        }
    }
    if (f->loaded == id) {  /* a trie node's children step the same configuration: its sets are there */
        cm_chart_truncate(&f->chart, sig[0]);
    } else {
        f->loaded = UINT32_MAX;
        int rc = cm_chart_load(&f->chart, g, sig);
        if (rc) return FLAT_ERR(rc);
        flat_versions(g, f, id);
        f->loaded = id;
    }
    int r = cm_chart_scan(&f->chart, g, b);
    if (r < 0) {
        f->loaded = UINT32_MAX;
        return FLAT_ERR(r);
    }
    int32_t to;
    /* A closure the chart's memo gave or stored: the configuration it made before,
     * if noted.  The memo holds while the kernel and the sets up to its origins are
     * unchanged, and they are all the new set's suffix reads (its items' origins are
     * the kernel's, the new set's, or those of waiters in the sets they name). */
    cm_memo *mm = r ? f->chart.memo_used : NULL;
    if (mm && mm->note) {
        to = (int32_t)mm->note - 4;
    } else {
        /* with flat calls, the loaded sets before the configuration's last keep all their items */
        size_t kept = g->lim.flat_calls && sig[0] ? sig[0] - 1 : 0;
        to = r == 0 ? CM_FLAT_DEAD : flat_of_set(g, f, &f->chart, kept);
        if (mm && to >= CM_FLAT_CHART) mm->note = (uint32_t)(to + 4);
    }
    if (to >= CM_FLAT_CHART) f->next[(size_t)id * f->width + f->col[b]] = flat_cell(f, to);
    return to;
}

/* The scratch chart of walks that leave the DFA, opened on first use. */
static int flat_walk_chart(cm_flat *f) {
    if (f->walk_ok) return CM_OK;
    int rc = cm_chart_open(&f->walk, false);
    f->walk_ok = !rc;
    if (rc) cm_chart_free(&f->walk);
    return rc;
}

/* Where configuration id (its exit: ex), at depth d, ends trie entry k (dead,
 * or not flat): the subtree of k's first d + 1 bytes settled -- uncertain if
 * the walk had exited before (fd), walked with a chart if not flat (fl: an
 * exit before depth d).  Returns its end. */
static size_t flat_leave(const cm_grammar *g, cm_flat *f, int32_t to, uint32_t id, uint32_t rule, size_t k,
                         uint32_t d, uint8_t fl, uint8_t ex, uint8_t fd, cm_walk *w, int *rc) {
    const cm_vocab *v = g->v;
    size_t end = v->skip[v->trie_off[k] + d];
    /* the entry's own whole walk (build_walk): the subtree's scan, its exits along the path,
     * kept for the filter */
    bool note = to == CM_FLAT_DEAD && fd && w->noting && k < end;
    uint8_t *nx = note ? cm_walk_note_ex(w, (uint32_t)k, (uint32_t)end, d) : NULL;
    if (nx) {
        nx[0] = 0;
        for (uint32_t e = 1; e <= d; e++) nx[e] = f->exited[flat_id(f, w->st[e] & FLAT_ROW)];
    }
    if (to == CM_FLAT_CHART) {
        *rc = flat_walk_chart(f);
        if (!*rc) *rc = cm_chart_load(&f->walk, g, f->items + f->off[id]);
        if (!*rc) *rc = cm_walk_chart(g, &f->walk, rule, k, end, d, fl, ex, w);
    }
    for (; to == CM_FLAT_DEAD && fd && k < end && !*rc; k++) *rc = cm_walk_push_uncertain(w, (uint32_t)k);
    return end;
}

/* A cell not computed whose byte no item of the configuration's last set reads (its reads
 * row) is dead, as flat_step would find it first thing: the walk's run marks it so and goes
 * on past the subtree (where no exit lies on the path) instead of stopping for flat_step (a
 * return, flat_walk_from's stop and a call, ~170 instructions: 9,562 of the mid set's 12,595
 * steps).  On by default; off, the stop (the reference). */
static atomic_int g_run_reads = 1;
static atomic_size_t g_run_reads_dead;
void cm_flat_run_reads_enable(int on) { atomic_store(&g_run_reads, on ? 1 : 0); }
size_t cm_flat_run_reads_dead(void) { return atomic_load(&g_run_reads_dead); }

/* Where a flat walk is: entry k at depth d in the cell s (st[d] on the path),
 * n_acc tokens accepted; where it stopped, the special cell `to` it met there. */
typedef struct flat_pos {
    size_t k;
    uint32_t d, s, n_acc;
    int32_t to;
    uint32_t n_dead;         /* cells the run found dead by the set's reads (flat_run_reads) */
    cm_flat *f;              /* the table (its arrays move as it grows); NULL: flat_run_reads off */
} flat_pos;

/* The walk from `at` on through known live cells, entry after entry, accepting
 * each entry it reads to its end and skipping the dead subtrees with no exit
 * on their path, until one meets another special cell (at.to: dead after an
 * exit, not flat, not computed) or k_end.  No call inside: the loop keeps
 * most of its pointers in registers. */
static inline __attribute__((always_inline)) void flat_run_body(const uint32_t *ids, const uint32_t *skip,
                                                                const uint64_t *off, const uint8_t *data,
                                                                const uint8_t *col, const int32_t *next,
                                                                size_t k_end, uint32_t *st, uint32_t *bits,
                                                                flat_pos *at, const uint32_t *lcp,
                                                                const uint32_t *nxt) {
    size_t k = at->k, k0 = k;  /* each entry from k0 on is accepted but those of dead subtrees */
    uint32_t n = 0;             /* with nxt (only the entries nxt names): the entries accepted */
    size_t s = at->s;
    const uint8_t *q = data + off[k] + at->d, *q_end = data + off[k + 1];
    uint32_t *sp = st + at->d;
    for (;;) {
        while (q < q_end) {
            int32_t to = next[(s & FLAT_ROW) + col[*q]];
            if (to >= 0) {
                s = (uint32_t)to | (s & FLAT_ANY);
                *++sp = (uint32_t)s;
                q++;
                continue;
            }
            if (to != CM_FLAT_DEAD || (s & FLAT_ANY)) {
                uint32_t acc = nxt ? at->n_acc + n : at->n_acc + (uint32_t)(k - k0);
                at->k = k;
                at->d = (uint32_t)(sp - st);
                at->s = (uint32_t)s;
                at->n_acc = acc;
                at->to = to;
                return;
            }
            size_t end = skip[off[k] + (size_t)(sp - st)];  /* the dead subtree of the next byte */
            if (nxt) {
                end = nxt[end];
            } else {
                at->n_acc -= (uint32_t)((end < k_end ? end : k_end) - k);
            }
            k = end;
            if (k >= k_end) {
                at->k = k_end;
                at->n_acc += nxt ? n : (uint32_t)(k_end - k0);
                return;
            }
            sp = st + lcp[k];
            s = *sp;
            q = data + off[k] + lcp[k];
            q_end = data + off[k + 1];
        }
        cm_set_bit(bits, ids[k]);
        if (nxt) {
            n++;
            k = nxt[k + 1];
            if (k >= k_end) {
                k = k_end;
                break;
            }
            q = data + off[k] + lcp[k];
        } else {
            if (++k == k_end) break;
            q += lcp[k];  /* entry k's bytes begin where k - 1's end */
        }
        sp = st + lcp[k];  /* at least the walk's first depth: the entries after the first share its bytes */
        s = *sp;
        q_end = data + off[k + 1];
    }
    at->k = k;
    at->n_acc += nxt ? n : (uint32_t)(k - k0);
}

/* flat_run_body, and on past a cell not computed whose byte no item of the set reads
 * (flat_run_reads): marked dead, its subtree skipped where no exit lies on the path, as
 * the body skips a dead cell's (here, not in the body: its registers are all taken). */
static inline __attribute__((always_inline)) void flat_run_g(const cm_vocab *v, const uint8_t *col,
                                                             const int32_t *next, size_t k_end, uint32_t *st,
                                                             uint32_t *bits, flat_pos *at, const uint32_t *lcp,
                                                             const uint32_t *nxt) {
    const uint32_t *ids = v->trie_ids, *skip = v->skip;
    const uint64_t *off = v->trie_off;
    const uint8_t *data = v->trie_data;
    for (;;) {
        flat_run_body(ids, skip, off, data, col, next, k_end, st, bits, at, lcp, nxt);
        if (at->k == k_end || at->to != CM_FLAT_UNKNOWN || !at->f || (at->s & FLAT_ANY)) return;
        cm_flat *f = at->f;
        uint32_t row = at->s & FLAT_ROW;
        uint8_t b = data[off[at->k] + at->d];
        if (cm_bit(f->reads + (size_t)flat_id(f, row) * 8, b)) return;
        f->next[row + col[b]] = CM_FLAT_DEAD;
        at->n_dead++;
        size_t end = skip[off[at->k] + at->d];
        if (nxt && end < k_end) end = nxt[end];
        if (end >= k_end) {
            at->k = k_end;
            return;
        }
        at->k = end;
        at->d = lcp[end];
        at->s = st[at->d];
    }
}

static __attribute__((noinline)) void flat_run(const cm_vocab *v, const uint8_t *col, const int32_t *next,
                                               size_t k_end, uint32_t *st, uint32_t *bits, flat_pos *at) {
    flat_run_g(v, col, next, k_end, st, bits, at, v->trie_lcp, NULL);
}

/* flat_run over the entries that are not plain only (at->k one of them): the
 * plain ones are accepted in bulk (flat_walk_whole).  Likewise the entries that
 * are no names (lcp, nxt: the name tables). */
static __attribute__((noinline)) void flat_run_np(const cm_vocab *v, const uint8_t *col, const int32_t *next,
                                                  size_t k_end, uint32_t *st, uint32_t *bits, flat_pos *at,
                                                  const uint32_t *lcp, const uint32_t *nxt) {
    flat_run_g(v, col, next, k_end, st, bits, at, lcp, nxt);
}

/* The bulk tables a walk skips by: the plain entries', the text entries', the name entries', none. */
typedef enum { FLAT_BULK_NONE, FLAT_BULK_PLAIN, FLAT_BULK_TEXT, FLAT_BULK_NAMES, FLAT_BULK_CLASS } flat_bulk;

/* How far the exit flags of a flat walk are known at its next stop (flat_walk_from): fl[0 ..
 * fl_ok] were made along entry a's path, and hold on entry b's path up to the bytes the two
 * share.  The trie is sorted, so the least common prefix of consecutive entries from a to b
 * (what the walk took, entry after entry: each entry of every dead subtree skipped, ~3
 * instructions an entry, 57,875 of them under ` `) is a's common prefix with b: their bytes,
 * compared up to fl_ok.  Mode 1 (the default) where more than CM_FLAT_LCP_SCAN entries lie
 * between, 2 at every stop (for the tests), 0 never: the scan of every entry between (the
 * reference). */
static atomic_int g_flat_lcp_jump = 1;
/* up to this many entries between, the scan (~3 instructions an entry) costs less */
#define CM_FLAT_LCP_SCAN 4
void cm_flat_lcp_jump_enable(int mode) { atomic_store(&g_flat_lcp_jump, mode < 0 ? 0 : mode > 2 ? 2 : mode); }

static inline uint32_t flat_known_upto(const cm_vocab *v, size_t a, size_t b, uint32_t fl_ok) {
    const uint8_t *x = v->trie_data + v->trie_off[a], *y = v->trie_data + v->trie_off[b];
    uint64_t la = v->trie_off[a + 1] - v->trie_off[a], lb = v->trie_off[b + 1] - v->trie_off[b];
    uint32_t n = fl_ok, m = 0;
    if (la < n) n = (uint32_t)la;
    if (lb < n) n = (uint32_t)lb;
    for (uint64_t p, q; m + 8 <= n; m += 8) {  /* eight bytes a step: deep in a string, fl_ok is large */
        memcpy(&p, x + m, 8);
        memcpy(&q, y + m, 8);
        if (p != q) break;
    }
    while (m < n && x[m] == y[m]) m++;
    return m;
}

/* The flat walk of entries [k, k_end) from configuration c0 at depth d0.
 *
 * A trie node costs a byte, its column and a cell: st[d] holds the cell that
 * led there (the configuration's row).  The flags of an exit before (fl) are
 * computed only where a subtree ends dead or leaves the DFA, along the path
 * from the depth up to which they are known (fl_ok, at most the prefix length
 * of each entry read since: k_fl the last one counted; or, jumping, the common
 * prefix of k_fl, the entry they were made on, with the stop's: flat_known_upto). */
static int flat_walk_from(const cm_grammar *g, cm_flat *f, int32_t c0, uint32_t rule, size_t k, size_t k_end,
                          uint32_t d0, cm_walk *w, flat_bulk bulk, const flat_cls *xc) {
    const cm_vocab *v = g->v;
    bool np = bulk != FLAT_BULK_NONE;
    const uint32_t *fol = g->t.rule_follow + (size_t)rule * 8;
    const uint32_t *lcp = bulk == FLAT_BULK_PLAIN  ? v->plain_lcp
                          : bulk == FLAT_BULK_TEXT ? v->text_lcp
                          : bulk == FLAT_BULK_NAMES ? v->name_lcp
                          : bulk == FLAT_BULK_CLASS ? xc->lcp
                                                    : v->trie_lcp;
    const uint32_t *nxt = bulk == FLAT_BULK_NAMES   ? v->name_next
                          : bulk == FLAT_BULK_TEXT  ? v->text_next
                          : bulk == FLAT_BULK_CLASS ? xc->nxt
                                                    : v->plain_next;
    uint8_t *fl = w->fl;
    uint32_t *st = w->st, fl_ok = d0;
    int rc = CM_OK;
    st[d0] = (uint32_t)c0 * f->width | (d0 && f->exited[c0] ? FLAT_ANY : 0);  /* an exit at depth 0 is
                                                                             another item of the same set */
    fl[d0] = 0;
    if (k >= k_end) return rc;
    uint32_t d = lcp[k] > d0 ? lcp[k] : d0;
    size_t k_fl = k, k_ref = k;  /* k_ref: the entry the flags were last made on */
    int jump_mode = atomic_load_explicit(&g_flat_lcp_jump, memory_order_relaxed);
    size_t jump_over = jump_mode == 2 ? 0 : jump_mode ? CM_FLAT_LCP_SCAN : SIZE_MAX;
    bool rd = atomic_load_explicit(&g_run_reads, memory_order_relaxed);
    flat_pos at = {k, d, st[d], 0, 0, 0, rd ? f : NULL};
    for (;;) {
        if (np)
            flat_run_np(v, f->col, f->next, k_end, st, w->bits, &at, lcp, nxt);
        else
            flat_run(v, f->col, f->next, k_end, st, w->bits, &at);
        if (at.k == k_end) break;
        const uint8_t *p = v->trie_data + v->trie_off[at.k];
        uint32_t s = at.s;
        d = at.d;
        int32_t to = at.to;
        if (to == CM_FLAT_UNKNOWN) {
            to = flat_cell(f, flat_step(g, f, flat_id(f, s & FLAT_ROW), p[d]));
            if (to >= 0) {  /* on from the next depth */
                st[d + 1] = at.s = (uint32_t)to | (s & FLAT_ANY);
                at.d = d + 1;
                continue;
            }
        }
        if (to < CM_FLAT_CHART) {
            rc = to + 8;
            break;
        }
        if (at.k - k_fl > jump_over) {
            fl_ok = flat_known_upto(v, k_ref, at.k, fl_ok);
            if (fl_ok > d) fl_ok = d;  /* as the scan's (at.k's own prefix length is at most d) */
            k_fl = at.k;
        } else {
            for (size_t kn; k_fl < at.k; k_fl = kn) {
                kn = np ? nxt[k_fl + 1] : k_fl + 1;
                if (fl_ok > lcp[kn]) fl_ok = lcp[kn];
            }
        }
        /* the flags along the path, from where they are known; an exit at depth 0 is
         * another item of the same set */
        const uint8_t *exited = f->exited;
        for (; fl_ok < d; fl_ok++)
            fl[fl_ok + 1] = fl[fl_ok] | (fl_ok && exited[flat_id(f, st[fl_ok] & FLAT_ROW)] && cm_bit(fol, p[fl_ok]));
        k_ref = at.k;
        uint32_t id = flat_id(f, s & FLAT_ROW);
        uint8_t ex = d && exited[id];
        k = flat_leave(g, f, to, id, rule, at.k, d, fl[d], ex, fl[d] | (ex && cm_bit(fol, p[d])), w, &rc);
        if (np && k < k_end) k = nxt[k];  /* a subtree left so holds no plain entry (flat_plain_live),
                                             no text entry (flat_text_live), no name (flat_names_live),
                                             no X-only entry (class_chain) */
        if (rc || k >= k_end) break;
        k_fl = k - 1;  /* the entries skipped share k's first d + 1 bytes: k's prefix length is next */
        at.k = k;
        at.d = lcp[k];  /* at least d0, at most d */
        at.s = st[at.d];
    }
    w->n_accepted += at.n_acc;
    if (at.n_dead) atomic_fetch_add_explicit(&g_run_reads_dead, at.n_dead, memory_order_relaxed);
    return rc;
}

#define FLAT_PLAIN_MAX 64
/* flat_text_live's cap: (configuration, UTF-8 state) pairs */
#define FLAT_TEXT_MAX 128
/* a first byte's name entries are taken in bulk from this many on (the proof costs
 * a few transitions) */
#define CM_FLAT_NAMES_MIN 64

/* The configuration of cell `to` (from f->next) or of c's step on b: < 0 if
 * not a live flat one. */
static int32_t flat_live_step(const cm_grammar *g, cm_flat *f, uint32_t c, uint8_t b) {
    int32_t to = f->next[(size_t)c * f->width + f->col[b]];
    if (to == CM_FLAT_UNKNOWN) return flat_step(g, f, c, b);
    return to < 0 ? to : (int32_t)flat_id(f, (uint32_t)to & FLAT_ROW);
}

/* Configuration c into the breadth-first queue at depth d unless there: false
 * past FLAT_PLAIN_MAX configurations. */
static bool flat_enqueue(uint32_t *q, uint8_t *depth, unsigned *n, uint32_t c, unsigned d) {
    for (unsigned m = 0; m < *n; m++)
        if (q[m] == c) return true;
    if (*n == FLAT_PLAIN_MAX) return false;
    depth[*n] = (uint8_t)d;
    q[(*n)++] = c;
    return true;
}

/* The state of a configuration of one item (state, OUTER) owing no debt, if
 * that state is plain with bytes; else -1. */
static int64_t flat_plain_item(const cm_grammar *g, const cm_flat *f, uint32_t c) {
    const uint32_t *sig = f->items + f->off[c];
    if (sig[0] != 1 || sig[1] != 1 || sig[3] != CM_OUTER || cm_la(sig[2])) return -1;
    uint32_t st = sig[2];
    return g->plain[st] && g->has_bytes[st] ? (int64_t)st : -1;
}

/* flat_closure_live where q[0 .. n) and every configuration they reach are of
 * one plain item each (flat_plain_item): the configuration of (s, OUTER) reads
 * next_bytes[s] and steps on b to that of the state s goes to (plain_config),
 * so the same breadth-first walk runs over the automaton's states, making the
 * configurations and cells the chart's way makes, in its order, without a
 * chart (a key that may be any string but the schema's keys proves its names
 * live over the DFA of the keys' prefixes: ~14 K transitions at ~400
 * instructions each for a schema with 150 keys).  The same verdict, and the
 * same table after: a walk that a proof lets skip entries relies on the cells
 * it proved (with the table full, a cell not made would be a chart's).  1
 * live, 0 not, -1 some configuration reached is not such (flat_closure_live
 * goes on from the cells made), < -1 an error (as flat_live_step gives it). */
static int plain_closure_live(const cm_grammar *g, cm_flat *f, uint32_t *q, uint8_t *depth, unsigned *n_q,
                              const uint8_t *rep, unsigned n_rep, unsigned *at_i, unsigned *at_j) {
    unsigned n = *n_q;
    const cm_tables *t = &g->t;
    uint32_t sq[FLAT_PLAIN_MAX], cq[FLAT_PLAIN_MAX];
    uint8_t sd[FLAT_PLAIN_MAX];
    for (unsigned i = 0; i < n; i++) {
        int64_t s = flat_plain_item(g, f, q[i]);
        if (s < 0) return -1;
        sq[i] = (uint32_t)s;
        cq[i] = q[i];
        sd[i] = depth[i];
    }
    unsigned i, j;
    for (i = 0; i < n; i++) {
        if (sd[i] >= CM_PLAIN_MAX_LEN) continue;
        const uint32_t *nb = g->next_bytes + (size_t)sq[i] * 8;
        for (j = 0; j < n_rep; j++)
            if (!cm_bit(nb, rep[j])) return 0;
        const int32_t *row = t->trans + (size_t)sq[i] * t->n_classes;
        int32_t *cells = f->next + (size_t)cq[i] * f->width;
        for (j = 0; j < n_rep; j++) {
            int32_t cell = cells[f->col[rep[j]]], c;
            uint32_t to = (uint32_t)row[t->byte_class[rep[j]]];  /* >= 0: s reads rep[j] */
            if (cell != CM_FLAT_UNKNOWN) {  /* made before, as flat_live_step reads it */
                if (cell < 0) return cell < CM_FLAT_CHART ? cell : 0;
                c = (int32_t)flat_id(f, (uint32_t)cell & FLAT_ROW);
            } else {
                if (!g->plain[to] || !g->has_bytes[to]) goto resume;
                c = plain_config(g, f, to);
                if (c < CM_FLAT_CHART) return c;
                cells = f->next + (size_t)cq[i] * f->width;  /* interning may move the table */
                cells[f->col[rep[j]]] = flat_cell(f, c);  /* a full table's CM_FLAT_CHART too, as flat_step */
                atomic_fetch_add_explicit(&g_plain_steps, 1, memory_order_relaxed);
                if (c < 0) return 0;
            }
            int64_t s = flat_plain_item(g, f, (uint32_t)c);
            if (s < 0) goto resume;
            unsigned before = n;
            if (!flat_enqueue(cq, sd, &n, (uint32_t)c, sd[i] + 1u)) return 0;
            if (n > before) sq[n - 1] = (uint32_t)s;
        }
    }
    return 1;
resume:  /* flat_closure_live goes on from here: the queue as it is, the cells made read back */
    for (unsigned k = *n_q; k < n; k++) q[k] = cq[k], depth[k] = sd[k];
    *n_q = n;
    *at_i = i;
    *at_j = j;
    return -1;
}

/* Whether each of q[0 .. n) (at its depth) and every configuration it reaches
 * on the bytes rep (one a column) before depth CM_PLAIN_MAX_LEN is flat, live
 * and steps to a flat live one on each of them. */
static bool flat_closure_live(const cm_grammar *g, cm_flat *f, uint32_t *q, uint8_t *depth, unsigned n,
                              const uint8_t *rep, unsigned n_rep) {
    unsigned i0 = 0, j0 = 0;  /* where plain_closure_live stopped: the reads of q[i0] checked, j0 steps taken */
    int plain = g->lim.flat_plain_steps ? plain_closure_live(g, f, q, depth, &n, rep, n_rep, &i0, &j0) : -1;
    if (plain < -1) return false;  /* an error: flat_live_step's make the proof fail too */
    if (plain >= 0) {
        atomic_fetch_add_explicit(&g_plain_proofs, 1, memory_order_relaxed);
        return plain;
    }
    for (unsigned i = i0; i < n; i++) {
        if (depth[i] >= CM_PLAIN_MAX_LEN) continue;  /* reached by whole entries only */
        /* a byte no item reads is dead: no transition to compute (most fail so) */
        const uint32_t *rd = f->reads + (size_t)q[i] * 8;
        for (unsigned j = 0; j < n_rep; j++)
            if (!cm_bit(rd, rep[j])) return false;
        for (unsigned j = i == i0 ? j0 : 0; j < n_rep; j++) {
            int32_t to = flat_live_step(g, f, q[i], rep[j]);
            if (to < 0 || !flat_enqueue(q, depth, &n, (uint32_t)to, depth[i] + 1u)) return false;
        }
    }
    return true;
}

/* Whether every configuration c0 reaches on fewer than CM_PLAIN_MAX_LEN plain
 * bytes (vocab.h) steps to a flat live one on every plain byte: then every plain
 * entry is accepted (and none is uncertain: none dies), and a subtree a walk
 * from c0 leaves dead or through a chart holds none (its path has a byte that is
 * not plain, or is longer).  A proof: the closure of c0 under the plain bytes'
 * columns, breadth first to that depth, each transition computed; past
 * FLAT_PLAIN_MAX configurations, or on any failure, no. */
static bool flat_plain_live(const cm_grammar *g, cm_flat *f, uint32_t c0) {
    uint8_t rep[256];  /* one plain byte a column */
    unsigned n_rep = 0;
    bool seen_col[256] = {false};
    for (unsigned b = 0x20; b < 0x7F; b++) {
        if (!cm_plain_byte((uint8_t)b) || seen_col[f->col[b]]) continue;
        seen_col[f->col[b]] = true;
        rep[n_rep++] = (uint8_t)b;
    }
    uint32_t q[FLAT_PLAIN_MAX] = {c0};
    uint8_t depth[FLAT_PLAIN_MAX] = {0};  /* breadth first: the least */
    return flat_closure_live(g, f, q, depth, 1, rep, n_rep);
}

/* The text proofs' bytes: from each UTF-8 state, one byte a (column, next state) pair. */
static void text_reps(cm_flat *f) {
    if (f->text_n_rep[0]) return;
    for (int u = 0; u < CM_UTF8_STATES; u++) {
        uint8_t seen[256] = {0};  /* per column: the next states seen, a bit each */
        for (unsigned b = u ? 0x80 : 0x20; b < (u ? 0xC0u : 0xF5u); b++) {
            int u2 = cm_utf8_step(u, (uint8_t)b);
            if (u2 < 0 || (seen[f->col[b]] >> u2 & 1)) continue;
            seen[f->col[b]] |= (uint8_t)(1u << u2);
            f->text_rep_u[u][f->text_n_rep[u]] = (uint8_t)u2;
            f->text_rep[u][f->text_n_rep[u]++] = (uint8_t)b;
        }
    }
}

/* ---- text proofs past characters no text entry holds (issue 12, session 44) ----
 *
 * flat_text_live fails at the first (configuration, byte) step that dies, yet a pattern's `.`
 * (ECMAScript: no U+2028, U+2029) dies inside characters that no text entry of the vocabulary
 * holds (Llama-3 has none): such a step holds no entry, so the proof may go on past it.  The
 * proof's pairs carry the beginnings of the characters they are in (pf: the rep bytes since
 * the character's lead, the first in the low byte); a dead step is passed over where no text
 * entry holds a character that begins with a byte of each of those reps' columns (taking the
 * same UTF-8 states) and then one of the dead byte's (vocab.h, text_used).  A semver pattern
 * under a maxLength (`^(\d+\.\d+\.\d+.*)$`, 32) counts its characters: its pairs (count, UTF-8
 * state) pass FLAT_TEXT_MAX, hence the larger cap here.  It runs only where flat_text_live
 * failed so (its -1: a step dead on a byte of 0x80 or more, or the cap), at ~2x its cost a
 * step (the beginnings kept).  Off (cm_flat_text_unused_enable(0)): flat_text_live alone, the
 * reference. */
static atomic_int g_text_unused = 1;
static atomic_size_t g_text_unused_proofs;
void cm_flat_text_unused_enable(int on) { atomic_store(&g_text_unused, on); }
size_t cm_flat_text_unused_proofs(void) { return atomic_load(&g_text_unused_proofs); }  /* that passed a step over */

#define FLAT_TEXT_UNUSED_MAX 512   /* pairs */
#define FLAT_TEXT_SLOTS 2048       /* a power of two, at least twice the pairs */
#define FLAT_TEXT_PFS 4            /* the beginnings a pair keeps; past them, not known */
#define FLAT_PF_UNKNOWN 0xFF000000u  /* before the start's character began (u0 > 0) or too many */
#define FLAT_TEXT_PRODUCT_MAX 4096 /* the character beginnings a dead step looks up */

/* The bytes of UTF-8 state u's text steps in the column of rep (0x80 and up) that take u where
 * rep takes it, into out; their count. */
static unsigned text_alike(const cm_flat *f, unsigned u, uint8_t rep, uint8_t *out) {
    int u2 = cm_utf8_step((int)u, rep);
    unsigned n = 0;
    for (unsigned b = 0x80; b < 0xF5; b++)
        if (f->col[b] == f->col[rep] && cm_utf8_step((int)u, (uint8_t)b) == u2) out[n++] = (uint8_t)b;
    return n;
}

/* Whether no text entry holds a character beginning with a byte alike (text_alike) to each rep
 * of pf, then one alike to b: a dead step on b from a pair of beginning pf passes over no entry. */
static bool text_step_unused(const cm_vocab *v, const cm_flat *f, uint32_t pf, uint8_t b) {
    if (pf == FLAT_PF_UNKNOWN || b < 0x80) return false;
    uint8_t reps[3];
    unsigned m = 0;
    for (; m < 3 && (pf >> 8 * m & 0xFF); m++) reps[m] = (uint8_t)(pf >> 8 * m);
    if (m == 3) return false;  /* a 4-byte character's last byte: not kept */
    reps[m++] = b;
    uint8_t alike[3][128];
    unsigned n[3], u = 0;
    size_t product = 1;
    for (unsigned i = 0; i < m; i++) {
        n[i] = text_alike(f, u, reps[i], alike[i]);
        product *= n[i];
        int u2 = cm_utf8_step((int)u, reps[i]);
        if (u2 < 0 || product > FLAT_TEXT_PRODUCT_MAX) return false;
        u = (unsigned)u2;
    }
    uint8_t p[3];
    for (unsigned a = 0; a < n[0]; a++) {
        p[0] = alike[0][a];
        if (m == 1) {
            if (cm_text_used(v->text_used, p, 1)) return false;
            continue;
        }
        for (unsigned c = 0; c < n[1]; c++) {
            p[1] = alike[1][c];
            if (m == 2) {
                if (cm_text_used(v->text_used, p, 2)) return false;
                continue;
            }
            for (unsigned e = 0; e < n[2]; e++) {
                p[2] = alike[2][e];
                if (cm_text_used(v->text_used, p, 3)) return false;
            }
        }
    }
    return true;
}

/* flat_text_live's proof, a dead step passed over where it holds no text entry
 * (text_step_unused).  A pair (configuration, UTF-8 state) keeps the beginnings of the paths
 * that reach it (those of a character's start: none); one that reaches it after it was
 * expanded sends it back to the queue, to check its dead steps and pass the beginning on (the
 * steps are known then: no new pair).  The pairs are first expanded in the order they are met,
 * breadth first, so each has its least depth.  No past FLAT_TEXT_UNUSED_MAX pairs, or on a step
 * that dies and is not passed over. */
static bool flat_text_unused_live(const cm_grammar *g, cm_flat *f, uint32_t c0, uint8_t u0) {
    const cm_vocab *v = g->v;
    text_reps(f);
    if (!f->text_slot) {
        f->text_slot = calloc(FLAT_TEXT_SLOTS, sizeof *f->text_slot);
        if (!f->text_slot) return false;
    }
    if (++f->text_stamp == 1u << 20) {  /* the stamps wrap: a clear */
        memset(f->text_slot, 0, FLAT_TEXT_SLOTS * sizeof *f->text_slot);
        f->text_stamp = 1;
    }
    uint64_t stamp = (uint64_t)f->text_stamp << 44, *slot = f->text_slot;
    uint32_t q[FLAT_TEXT_UNUSED_MAX], pf[FLAT_TEXT_UNUSED_MAX][FLAT_TEXT_PFS];
    uint16_t work[2 * FLAT_TEXT_UNUSED_MAX];  /* a ring: each pair at most once in it */
    uint8_t depth[FLAT_TEXT_UNUSED_MAX], us[FLAT_TEXT_UNUSED_MAX], n_pf[FLAT_TEXT_UNUSED_MAX];
    uint8_t done_pf[FLAT_TEXT_UNUSED_MAX], queued[FLAT_TEXT_UNUSED_MAX];  /* beginnings passed on so far */
    q[0] = c0;
    depth[0] = 0;
    us[0] = u0;
    n_pf[0] = 1;
    done_pf[0] = 0;
    queued[0] = 1;
    pf[0][0] = u0 ? FLAT_PF_UNKNOWN : 0;
    uint64_t key0 = (uint64_t)c0 << 3 | u0;
    slot[(size_t)((key0 * 0x9E3779B97F4A7C15ull) >> 53)] = stamp | (key0 + 1) << 12;  /* the pair + 1, its index (0) */
    unsigned n = 1, w_lo = 0, w_hi = 1;
    work[0] = 0;
    bool passed = false;
    while (w_lo != w_hi) {
        unsigned i = work[w_lo];
        w_lo = (w_lo + 1) % (2 * FLAT_TEXT_UNUSED_MAX);
        queued[i] = 0;
        unsigned a0 = done_pf[i], a1 = n_pf[i];
        done_pf[i] = (uint8_t)a1;
        if (depth[i] >= CM_PLAIN_MAX_LEN) continue;  /* reached by whole entries only */
        const uint8_t *r = f->text_rep[us[i]], *ru = f->text_rep_u[us[i]];
        unsigned n_rep = f->text_n_rep[us[i]];
        for (unsigned j = 0; j < n_rep; j++) {
            /* reads read again each step: a step that interns a configuration may move it */
            int32_t to = cm_bit(f->reads + (size_t)q[i] * 8, r[j]) ? flat_live_step(g, f, q[i], r[j]) : CM_FLAT_DEAD;
            if (to == CM_FLAT_DEAD) {
                for (unsigned a = a0; a < a1; a++)
                    if (!text_step_unused(v, f, pf[i][a], r[j])) return false;
                passed = true;
                continue;
            }
            if (to < 0) return false;
            uint64_t key = (uint64_t)(uint32_t)to << 3 | ru[j];
            size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 53);
            unsigned at = UINT32_MAX;
            while ((slot[h] & ~((1ull << 44) - 1)) == stamp) {
                if ((slot[h] >> 12 & 0xFFFFFFFFull) == key + 1) {
                    at = (unsigned)(slot[h] & 0xFFF);
                    break;
                }
                h = (h + 1) & (FLAT_TEXT_SLOTS - 1);
            }
            if (at == UINT32_MAX) {
                if (n == FLAT_TEXT_UNUSED_MAX) return false;
                slot[h] = stamp | (key + 1) << 12 | n;
                at = n++;
                q[at] = (uint32_t)to;
                us[at] = ru[j];
                depth[at] = (uint8_t)(depth[i] + 1u);
                n_pf[at] = done_pf[at] = queued[at] = 0;
            }
            /* the beginnings it is reached with: none at a character's start */
            bool added = false;
            for (unsigned a = a0; a < a1; a++) {
                uint32_t p = pf[i][a], m = 0;
                if (ru[j] == 0) {
                    p = 0;
                } else if (p != FLAT_PF_UNKNOWN) {
                    while (m < 3 && (p >> 8 * m & 0xFF)) m++;
                    p = m == 3 ? FLAT_PF_UNKNOWN : p | (uint32_t)r[j] << 8 * m;
                }
                unsigned e = 0;
                while (e < n_pf[at] && pf[at][e] != p) e++;
                if (e < n_pf[at]) continue;
                if (n_pf[at] == FLAT_TEXT_PFS) {  /* too many: not known, from a new slot */
                    p = FLAT_PF_UNKNOWN;
                    for (e = 0; e < n_pf[at] && pf[at][e] != p; e++) {}
                    if (e < n_pf[at]) continue;
                    if (done_pf[at] == FLAT_TEXT_PFS) done_pf[at]--;  /* its last slot checked again */
                    pf[at][FLAT_TEXT_PFS - 1] = p;
                } else {
                    pf[at][n_pf[at]++] = p;
                }
                added = true;
            }
            if (added && !queued[at]) {
                queued[at] = 1;
                work[w_hi] = (uint16_t)at;
                w_hi = (w_hi + 1) % (2 * FLAT_TEXT_UNUSED_MAX);
            }
        }
    }
    if (passed) atomic_fetch_add_explicit(&g_text_unused_proofs, 1, memory_order_relaxed);
    return true;
}

/* Whether every configuration c0 reaches on a prefix of a text entry (vocab.h)
 * steps to a flat live one on each byte that continues it as text: then every
 * text entry is accepted, and a subtree a walk from c0 leaves dead or through a
 * chart holds none (flat_plain_live's argument, with partial characters).  A
 * proof: the closure of (c0, UTF-8 state u0: 0 at a character's start) under one
 * byte a (column, next UTF-8 state) pair (cm_utf8_step), breadth first to depth
 * CM_PLAIN_MAX_LEN in bytes; past FLAT_TEXT_MAX pairs, or on any failure, no.  1 yes, 0 no,
 * -1 no past the cap or at a step that dies on a byte of 0x80 or more (flat_text_unused_live
 * may say yes then).
 * From u0 > 0 (a loop's exit inside a character, loops.c) the entries read on
 * from there are the text entries' rest. */
static int flat_text_live(const cm_grammar *g, cm_flat *f, uint32_t c0, uint8_t u0) {
    text_reps(f);
    uint32_t q[FLAT_TEXT_MAX] = {c0};
    uint8_t depth[FLAT_TEXT_MAX] = {0}, us[FLAT_TEXT_MAX] = {u0};  /* breadth first: the least depth */
    uint32_t slot[4 * FLAT_TEXT_MAX];  /* the pairs queued, open addressing: (c << 3 | u) + 1 */
    memset(slot, 0, sizeof slot);
    slot[((uint32_t)c0 << 3 | u0) * 0x9E3779B1u >> 23] = ((uint32_t)c0 << 3 | u0) + 1;
    unsigned n = 1;
    for (unsigned i = 0; i < n; i++) {
        if (depth[i] >= CM_PLAIN_MAX_LEN) continue;  /* reached by whole entries only */
        const uint32_t *rd = f->reads + (size_t)q[i] * 8;
        const uint8_t *r = f->text_rep[us[i]], *ru = f->text_rep_u[us[i]];
        unsigned n_rep = f->text_n_rep[us[i]];
        for (unsigned j = 0; j < n_rep; j++)
            if (!cm_bit(rd, r[j])) return r[j] < 0x80 ? 0 : -1;
        for (unsigned j = 0; j < n_rep; j++) {
            int32_t to = flat_live_step(g, f, q[i], r[j]);
            if (to < 0) return to == CM_FLAT_DEAD && r[j] >= 0x80 ? -1 : 0;
            uint32_t key = (uint32_t)to << 3 | ru[j], h = key * 0x9E3779B1u >> 23;
            while (slot[h] && slot[h] != key + 1) h = (h + 1) & (4 * FLAT_TEXT_MAX - 1);
            if (slot[h]) continue;
            if (n == FLAT_TEXT_MAX) return -1;
            slot[h] = key + 1;
            q[n] = (uint32_t)to;
            us[n] = ru[j];
            depth[n++] = (uint8_t)(depth[i] + 1u);
        }
    }
    return true;
}

/* Whether every name entry of first byte b (vocab.h) is accepted from c, the
 * configuration after b: the configurations c reaches on a name's first byte,
 * then on its other bytes to the name entries' greatest length, are all flat
 * and live (as flat_plain_live proves it of the plain bytes).  Then a subtree
 * a walk from c leaves dead or through a chart holds no name entry. */
static bool flat_names_live(const cm_grammar *g, cm_flat *f, uint32_t c) {
    uint8_t rep1[256], rep[256];  /* one name byte a column: first bytes, all bytes */
    unsigned n_rep1 = 0, n_rep = 0;
    bool seen1[256] = {false}, seen[256] = {false};
    for (unsigned b = '0'; b <= 'z'; b++) {
        if (!cm_name_byte((uint8_t)b)) continue;
        if (cm_name_first((uint8_t)b) && !seen1[f->col[b]]) {
            seen1[f->col[b]] = true;
            rep1[n_rep1++] = (uint8_t)b;
        }
        if (!seen[f->col[b]]) {
            seen[f->col[b]] = true;
            rep[n_rep++] = (uint8_t)b;
        }
    }
    uint32_t q[FLAT_PLAIN_MAX];
    uint8_t depth[FLAT_PLAIN_MAX];  /* the entries' depth there, breadth first: the least */
    unsigned n = 0;
    const uint32_t *rd = f->reads + (size_t)c * 8;
    for (unsigned j = 0; j < n_rep1; j++)
        if (!cm_bit(rd, rep1[j])) return false;
    for (unsigned j = 0; j < n_rep1; j++) {
        int32_t to = flat_live_step(g, f, c, rep1[j]);
        if (to < 0 || !flat_enqueue(q, depth, &n, (uint32_t)to, 2)) return false;
    }
    return flat_closure_live(g, f, q, depth, n, rep, n_rep);
}

/* flat_names_live's answer, once a configuration: like flat_plain_live's it
 * depends on the DFA and the name bytes only, but every walk that meets c
 * after a first byte with names asked it again (sql.lark's mask after
 * `SELECT`: 179 proofs, ~2.8 M instructions, of a few configurations: the
 * blank after a keyword reached by each blank byte and tail part).  Two bits
 * of plain_ok above flat_text_live's, the same way (1 yes, 2 no; a failure
 * out of memory or past FLAT_PLAIN_MAX stays a no, as the walk without the
 * memo would have found it again).  `Strategy`-free switch and counter for
 * the tests: cm_flat_names_memo_enable, cm_flat_names_memo_hits. */
#define FLAT_NAMES_SH (2u * CM_UTF8_STATES + 2u)
_Static_assert(FLAT_NAMES_SH + 2u <= 32u, "plain_ok holds the names' two bits");
static atomic_int g_names_memo = 1;
static atomic_size_t g_names_memo_hits;

void cm_flat_names_memo_enable(int on) { atomic_store(&g_names_memo, on ? 1 : 0); }
size_t cm_flat_names_memo_hits(void) { return atomic_load(&g_names_memo_hits); }

static bool flat_names_ok(const cm_grammar *g, cm_flat *f, uint32_t c) {
    if (!atomic_load_explicit(&g_names_memo, memory_order_relaxed)) return flat_names_live(g, f, c);
    uint32_t known = f->plain_ok[c] >> FLAT_NAMES_SH & 3;
    if (known) {
        atomic_fetch_add_explicit(&g_names_memo_hits, 1, memory_order_relaxed);
        return known == 1;
    }
    bool ok = flat_names_live(g, f, c);  /* may add configurations: plain_ok moves */
    f->plain_ok[c] |= (ok ? 1u : 2u) << FLAT_NAMES_SH;
    return ok;
}

/* First byte b's name entries into w if flat_names_live(c) proves them
 * accepted (c: the configuration after b): whether it did. */
static bool flat_names_bulk(const cm_grammar *g, cm_flat *f, uint32_t c, uint8_t b, cm_walk *w) {
    const cm_vocab *v = g->v;
    if (!v->name_ids || !g->lim.name_skip) return false;
    uint32_t n0 = v->name_off[b], n1 = v->name_off[b + 1];
    if (n1 - n0 < CM_FLAT_NAMES_MIN || !flat_names_ok(g, f, c)) return false;
    w->n_accepted += cm_walk_names(v, b, w);
    return true;
}

/* flat_plain_live, once a configuration (its answer depends on the DFA only;
 * a failure out of memory or past CM_FLAT_MAX stays a no). */
static bool flat_plain_ok(const cm_grammar *g, cm_flat *f, uint32_t c0) {
    if (!(f->plain_ok[c0] & 3)) {
        bool ok = flat_plain_live(g, f, c0);  /* may add configurations: plain_ok moves */
        f->plain_ok[c0] |= ok ? 1 : 2;
    }
    return (f->plain_ok[c0] & 3) == 1;
}

/* flat_text_live from UTF-8 state u, once a (configuration, u) pair; from u = 0
 * where flat_plain_ok holds (it implies it). */
static bool flat_text_ok(const cm_grammar *g, cm_flat *f, uint32_t c0, uint8_t u) {
    unsigned sh = 2u * u + 2u;
    if (!(f->plain_ok[c0] >> sh & 3)) {
        int live = flat_text_live(g, f, c0, u);  /* may add configurations: plain_ok moves */
        if (live < 0 && g->v->text_used && atomic_load_explicit(&g_text_unused, memory_order_relaxed))
            live = flat_text_unused_live(g, f, c0, u);
        bool ok = live > 0;
        f->plain_ok[c0] |= (ok ? 1u : 2u) << sh;
    }
    return (f->plain_ok[c0] >> sh & 3) == 1;
}

/* ---- a counted class near its end, its X-only entries listed by length (issue 12, session 42) ----
 *
 * A count position of an anchored class (`^[0-9A-Za-z]{8}-...$`, o61627's UUID) is a
 * configuration c0 from which every byte of a class X leads to one configuration c1, from it
 * to one c2, and so on, until at some depth r every byte of X dies: the class's bytes left to
 * count.  A token made of X only then lives iff its length is <= r, with no exit on its way (the
 * chain's configurations checked), so nothing of it is uncertain; yet the whole walk read each
 * of them (~29 k at Llama-3's [0-9A-Za-z], ~1 M instructions a position).  So the walk lists
 * the X-only entries of length <= r from a table of them by length, made once a class and
 * grammar, and walks over X's first bytes only the other entries (nxt, lcp, as the name tables
 * do for names).  Off: cm_flat_class_bulk_enable(0); 2 takes it wherever it applies (the tests'
 * small vocabularies), 1 where X's first bytes open CM_FLAT_CLASS_MIN entries. */
#define CM_FLAT_CLASS_MIN 4096
#define CM_FLAT_CLASS_BUILD 4
/* No table is made (mode 1) for a class whose first bytes open more entries than this: a string's
 * printable bytes open ~110 K at Llama-3, and their table (~3.8 M instructions) would be the
 * largest first mask of all (sp_0:222, r = 1, was 0.70 M walking); [0-9A-Za-z]'s ~30 K take
 * ~0.8 M.  Such a class's counts walk as before, asked before the chain's check (its new
 * configurations grew sp_0's flat table at those fills, +100 K each). */
#define CM_FLAT_CLASS_MAX 65536
static atomic_int g_class_bulk = 1;
static atomic_size_t g_class_bulk_walks;

void cm_flat_class_bulk_enable(int mode) { atomic_store(&g_class_bulk, mode < 0 || mode > 2 ? 1 : mode); }
size_t cm_flat_class_bulk_walks(void) { return atomic_load(&g_class_bulk_walks); }

static void class_free(flat_cls *c) {
    if (!c) return;
    free(c->nxt);
    free(c->lcp);
    free(c->ids);
    free(c->len_at);
    for (uint32_t L = 0; c->upto && L < c->n_upto; L++) free(atomic_load_explicit(&c->upto[L], memory_order_relaxed));
    free(c->upto);
    free(c);
}

void cm_flat_classes_free(cm_vocab *v) {
    for (unsigned i = 0; i < CM_VOCAB_CLASSES; i++) class_free(atomic_load(&v->classes[i]));
}

static atomic_size_t g_class_tables;
size_t cm_flat_class_tables(void) { return atomic_load(&g_class_tables); }

/* p[0 .. n) := val (a loop the compiler widens). */
static void fill_u32(uint32_t *restrict p, size_t n, uint32_t val) {
    for (size_t i = 0; i < n; i++) p[i] = val;
}

/* X's tables (flat_cls), made anew; NULL when out of memory or X opens no entry.  The entries not X-only are found a word of the byte features at a time
 * (~1 k words over [0-9A-Za-z]'s first bytes at Llama-3), each one's prefix shared with the one
 * before by comparing their bytes, the runs of X-only entries between two of them filled in
 * nxt at once; the X-only ones listed by length from the vocabulary's entries by length. */
static __attribute__((noinline)) flat_cls *class_make(const cm_vocab *v, const uint32_t *x, uint32_t want) {
    const cm_tokclass *tc = cm_tokclass_of(v);
    bool in[CM_TC_FEATURES];
    if (!tc || !cm_tokclass_inside(x, false, in)) return NULL;
    const uint32_t *lo = v->first_off;
    uint32_t b0 = 256, b1 = 0, top = 0;
    for (uint32_t b = 0; b < 256; b++) {
        if (!cm_bit(x, b) || lo[b] == lo[b + 1]) continue;
        if (b0 == 256) b0 = b;
        b1 = b;
        uint32_t n_len = tc->len_base[b + 1] - tc->len_base[b];
        if (n_len - 1 > top) top = n_len - 1;
    }
    if (b0 == 256) return NULL;
    size_t w0 = lo[b0] / 32, w1 = ((size_t)lo[b1 + 1] + 31) / 32;
    flat_cls *cp = calloc(1, sizeof *cp);
    if (!cp) return NULL;
    flat_cls c = {.top = top, .n_upto = top + 1};
    memcpy(c.x, x, sizeof c.x);
    uint32_t *outside = malloc((w1 - w0) * sizeof *outside);
    c.nxt = malloc(((size_t)v->n_trie + 1) * sizeof *c.nxt);
    c.lcp = malloc(((size_t)v->n_trie + 1) * sizeof *c.lcp);
    c.len_at = calloc((size_t)top + 1, sizeof *c.len_at);
    c.upto = calloc((size_t)top + 1, sizeof *c.upto);
    if (!outside || !c.nxt || !c.lcp || !c.len_at || !c.upto) goto fail;
    /* words w0..w1 of the entries holding a byte of a feature not wholly in X */
    memset(outside, 0, (w1 - w0) * sizeof *outside);
    for (int ft = 0; ft < CM_TC_FEATURES; ft++)
        if (!in[ft]) cm_or_words(outside, tc->has + (size_t)ft * tc->n_words + w0, w1 - w0);
    for (uint32_t b = b0; b <= b1; b++) {
        if (!cm_bit(x, b) || lo[b] == lo[b + 1]) continue;
        uint32_t k0 = lo[b], k1 = lo[b + 1], at = k0;  /* nxt[at..] still to fill */
        const uint8_t *pp = NULL;
        uint32_t plen = 0;
        for (size_t wi = k0 / 32 - w0; wi <= (k1 - 1) / 32 - w0; wi++) {
            uint32_t word = outside[wi];
            while (word) {
                uint32_t k = (uint32_t)((wi + w0) * 32) + (uint32_t)__builtin_ctz(word);
                word &= word - 1;
                if (k < k0) continue;
                if (k >= k1) break;
                fill_u32(c.nxt + at, k + 1 - at, k);
                at = k + 1;
                uint32_t len, m = 0;
                const uint8_t *p = cm_trie_bytes(v, k, &len);
                while (pp && m < len && m < plen && p[m] == pp[m]) m++;
                c.lcp[k] = m;  /* 0 for b's first: the walk starts there from depth 0 */
                pp = p, plen = len;
            }
        }
        fill_u32(c.nxt + at, k1 + 1 - at, k1);  /* X's next first byte, if any, sets nxt[k1] again */
    }
    size_t n_x = lo[b1 + 1] - lo[b0];
    c.ids = malloc((n_x ? n_x : 1) * sizeof *c.ids);
    if (!c.ids) goto fail;
    uint8_t xs[256];  /* X's first bytes that open entries */
    uint32_t n_xs = 0;
    for (uint32_t b = b0; b <= b1; b++)
        if (cm_bit(x, b) && lo[b] != lo[b + 1]) xs[n_xs++] = (uint8_t)b, cm_set_bit(c.xe, b);
    const uint32_t *by_len = tc->by_len, *tids = v->trie_ids, *outw = outside - w0;
    uint32_t *ids = c.ids, o = 0;
    size_t n_words = (v->n_tokens + 31) / 32;
    uint32_t *u = want ? calloc(n_words ? n_words : 1, sizeof *u) : NULL;  /* upto[want], set on the way */
    for (uint32_t L = 1; L <= top; L++) {
        for (uint32_t i = 0; i < n_xs; i++) {
            uint32_t base = tc->len_base[xs[i]], n_len = tc->len_base[xs[i] + 1] - base;
            if (L >= n_len) continue;
            uint32_t j = tc->len_at[base + L - 1], e = tc->len_at[base + L];
            if (u && L <= want) {
                for (; j < e; j++) {
                    uint32_t k = by_len[j], t = tids[k], in = !(outw[k >> 5] >> (k & 31) & 1u);
                    ids[o] = t;  /* written always, kept if X-only: no branch to mispredict */
                    o += in;
                    u[t >> 5] |= in << (t & 31);
                }
            } else {
                for (; j < e; j++) {
                    uint32_t k = by_len[j];
                    ids[o] = tids[k];
                    o += !(outw[k >> 5] >> (k & 31) & 1u);
                }
            }
        }
        c.len_at[L] = o;
    }
    while (c.top && c.len_at[c.top] == c.len_at[c.top - 1]) c.top--;  /* the longest X-only entry */
    if (u)  /* the X-only ids of length <= want (none is longer than top); published with the table */
        atomic_store_explicit(&c.upto[want < c.top ? want : c.top], u, memory_order_relaxed);
    free(outside);
    *cp = c;
    return cp;
fail:
    free(outside);
    *cp = c;
    class_free(cp);
    return NULL;
}

/* X's tables if the vocabulary has them, else NULL. */
static flat_cls *class_find(const cm_vocab *v, const uint32_t *x) {
    _Atomic(flat_cls *) *slot = ((cm_vocab *)v)->classes;
    for (unsigned i = 0; i < CM_VOCAB_CLASSES; i++) {
        flat_cls *c = atomic_load_explicit(&slot[i], memory_order_acquire);
        if (!c) break;
        if (!memcmp(c->x, x, sizeof c->x)) return c;
    }
    return NULL;
}

/* X's X-only ids by length if the vocabulary holds X's table (a flat walk made it), x given and
 * compared as the bytes that open entries (the table reads only those): ids[len_at[L - 1] .. len_at[L]) those
 * of length L for L <= *top, in class_make's order (by length, then first byte, then tokclass.c's
 * by_len); false if none is held (nothing is made here). */
bool cm_flat_class_ids(const cm_vocab *v, const uint32_t *x, const uint32_t **ids, const uint32_t **len_at,
                       uint32_t *top) {
    _Atomic(flat_cls *) *slot = ((cm_vocab *)v)->classes;
    for (unsigned i = 0; i < CM_VOCAB_CLASSES; i++) {
        const flat_cls *c = atomic_load_explicit(&slot[i], memory_order_acquire);
        if (!c) break;
        if (memcmp(c->xe, x, sizeof c->xe)) continue;
        *ids = c->ids, *len_at = c->len_at, *top = c->top;
        return true;
    }
    return false;
}

/* X's tables, the vocabulary's (made on first use, by the first thread to publish them); NULL
 * when out of memory or past CM_VOCAB_CLASSES classes. */
static flat_cls *class_table(const cm_vocab *v, const uint32_t *x, uint32_t want) {
    _Atomic(flat_cls *) *slot = ((cm_vocab *)v)->classes;  /* the one field made after the vocabulary */
    unsigned i = 0;
    for (; i < CM_VOCAB_CLASSES; i++) {
        flat_cls *c = atomic_load_explicit(&slot[i], memory_order_acquire);
        if (!c) break;
        if (!memcmp(c->x, x, sizeof c->x)) return c;
    }
    if (i == CM_VOCAB_CLASSES) return NULL;
    flat_cls *made = class_make(v, x, want);
    if (!made) return NULL;
    for (; i < CM_VOCAB_CLASSES; i++) {
        flat_cls *none = NULL;
        if (atomic_compare_exchange_strong_explicit(&slot[i], &none, made, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            atomic_fetch_add_explicit(&g_class_tables, 1, memory_order_relaxed);
            return made;
        }
        if (!memcmp(none->x, x, sizeof none->x)) break;  /* another thread made it first */
    }
    class_free(made);
    return i < CM_VOCAB_CLASSES ? atomic_load_explicit(&slot[i], memory_order_acquire) : NULL;
}



/* The bytes of `reads` that lead c0 to the configuration most of them lead to, into x; that
 * configuration (< 0: none). */
static int32_t class_first(const cm_grammar *g, cm_flat *f, uint32_t c0, const uint32_t *reads, uint32_t *x) {
    int32_t to[256];  /* by byte, of the bytes read */
    uint32_t cand[8], votes[8] = {0}, n_cand = 0;
    for (unsigned j = 0; j < 8; j++)
        for (uint32_t m = reads[j]; m; m &= m - 1) {
            unsigned b = j * 32 + (unsigned)__builtin_ctz(m);
            int32_t t = to[b] = flat_live_step(g, f, c0, (uint8_t)b);
            if (t < 0) continue;
            uint32_t i = 0;
            while (i < n_cand && cand[i] != (uint32_t)t) i++;
            if (i == n_cand && n_cand < 8) cand[n_cand++] = (uint32_t)t;
            if (i < n_cand) votes[i]++;
        }
    if (!n_cand) return CM_FLAT_DEAD;
    uint32_t best = 0;
    for (uint32_t i = 1; i < n_cand; i++)
        if (votes[i] > votes[best]) best = i;
    memset(x, 0, 8 * sizeof *x);
    for (unsigned j = 0; j < 8; j++)
        for (uint32_t m = reads[j]; m; m &= m - 1) {
            unsigned b = j * 32 + (unsigned)__builtin_ctz(m);
            if (to[b] == (int32_t)cand[best]) cm_set_bit(x, b);
        }
    return (int32_t)cand[best];
}

/* The deepest count class_chain reads, and the most configurations it may add on the way (the
 * walk makes those of a count near its end anyway; a long bounded string's are not asked). */
#define CM_FLAT_CLASS_DEPTH 40
#define CM_FLAT_CLASS_NEW 16

/* Whether the chain from c (X's step from c0) is one configuration a depth for every byte of X
 * (a column at a time) with no exit on the way, every byte of X dead at depth *r + 1 (<= top,
 * the longest entry of X's first bytes, and CM_FLAT_CLASS_DEPTH); false where not. */
static bool class_chain(const cm_grammar *g, cm_flat *f, uint32_t c, const uint32_t *x, uint32_t top, uint32_t *r) {
    uint8_t rep[256];  /* one byte of each column of X */
    uint32_t seen[8] = {0};
    unsigned n_rep = 0;
    for (unsigned j = 0; j < 8; j++)
        for (uint32_t m = x[j]; m; m &= m - 1) {
            unsigned b = j * 32 + (unsigned)__builtin_ctz(m);
            if (!cm_bit(seen, f->col[b])) cm_set_bit(seen, f->col[b]), rep[n_rep++] = (uint8_t)b;
        }
    uint32_t n0 = f->n;
    for (uint32_t d = 1; d <= top && d <= CM_FLAT_CLASS_DEPTH; d++) {  /* c: the configuration after d bytes */
        if (f->exited[c] || f->n - n0 > CM_FLAT_CLASS_NEW) return false;
        int32_t nx = CM_FLAT_UNKNOWN;
        for (unsigned i = 0; i < n_rep; i++) {
            int32_t t = flat_live_step(g, f, c, rep[i]);
            if (t < CM_FLAT_DEAD || (nx != CM_FLAT_UNKNOWN && t != nx)) return false;
            nx = t;
        }
        if (nx == CM_FLAT_DEAD) {
            *r = d;
            return true;
        }
        c = (uint32_t)nx;
    }
    return false;
}

/* Where c0 is a count of a class near its end (class_first, class_chain) and it pays: the
 * walk's X-only entries of length <= r set (*xc X's tables), else *xc NULL. */
static __attribute__((noinline)) void class_bulk(const cm_grammar *g, cm_flat *f, uint32_t c0,
                                                  const uint32_t *reads, cm_walk *w, const flat_cls **xc) {
    *xc = NULL;
    int mode = atomic_load_explicit(&g_class_bulk, memory_order_relaxed);
    uint32_t x[8], r;
    int32_t c1 = mode ? class_first(g, f, c0, reads, x) : CM_FLAT_DEAD;
    if (c1 < 0) return;
    const cm_vocab *v = g->v;
    size_t n_first = 0;
    for (unsigned j = 0; j < 8; j++)
        for (uint32_t m = x[j]; m; m &= m - 1) {
            unsigned b = j * 32 + (unsigned)__builtin_ctz(m);
            n_first += v->first_off[b + 1] - v->first_off[b];
        }
    if (mode == 1 && n_first < CM_FLAT_CLASS_MIN) return;
    flat_cls *c = class_find(v, x);
    if (!c && mode == 1 && n_first > CM_FLAT_CLASS_MAX) return;
    const cm_tokclass *tc = cm_tokclass_of(v);
    if (!tc) return;
    uint32_t top = 0;  /* the longest entry of X's first bytes */
    for (unsigned j = 0; j < 8; j++)
        for (uint32_t m = x[j]; m; m &= m - 1) {
            unsigned b = j * 32 + (unsigned)__builtin_ctz(m);
            uint32_t n_len = tc->len_base[b + 1] - tc->len_base[b];
            if (n_len && n_len - 1 > top) top = n_len - 1;
        }
    if (!class_chain(g, f, (uint32_t)c1, x, top, &r)) return;
    if (!c && mode == 1 && r < CM_FLAT_CLASS_BUILD) {  /* a table (~25 instructions an entry of X's
        first bytes, once a process) from the first count r >= CM_FLAT_CLASS_BUILD, else from a grammar's
        second count of the class on: a walk dying within 3 bytes reads few prefixes of X's entries */
        bool met = false;
        for (uint32_t i = 0; i < f->n_met && !met; i++) met = !memcmp(f->met[i], x, sizeof f->met[i]);
        if (!met) {
            if (f->n_met < 4) memcpy(f->met[f->n_met++], x, sizeof f->met[0]);
            return;
        }
    }
    if (!c) c = class_table(v, x, r);
    if (!c || !c->top) return;
    uint32_t L = r < c->top ? r : c->top, n = c->len_at[L];
    size_t n_words = (v->n_tokens + 31) / 32;
    uint32_t *u = atomic_load_explicit(&c->upto[L], memory_order_acquire);
    if (!u) {  /* from the nearest made: the longest below it, ids set, or the shortest above, ids cleared */
        uint32_t L0 = L, L1 = L;
        const uint32_t *u0 = NULL, *u1 = NULL;
        while (L0 && !(u0 = atomic_load_explicit(&c->upto[--L0], memory_order_acquire))) {}
        while (L1 < c->top && !(u1 = atomic_load_explicit(&c->upto[++L1], memory_order_acquire))) {}
        u = malloc(n_words * sizeof *u);
        if (!u) return;
        if (u1 && c->len_at[L1] - n < n - c->len_at[L0]) {  /* the ids are distinct tokens */
            memcpy(u, u1, n_words * sizeof *u);
            for (uint32_t i = n; i < c->len_at[L1]; i++) u[c->ids[i] >> 5] &= ~(1u << (c->ids[i] & 31));
        } else {
            if (u0) memcpy(u, u0, n_words * sizeof *u);
            else memset(u, 0, n_words * sizeof *u);
            for (uint32_t i = c->len_at[L0]; i < n; i++) cm_set_bit(u, c->ids[i]);
        }
        uint32_t *none = NULL;
        if (!atomic_compare_exchange_strong_explicit(&c->upto[L], &none, u, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            free(u);  /* another thread made it first, the same */
            u = none;
        }
    }
    cm_or_words(w->bits, u, g->n_words < n_words ? g->n_words : n_words);
    w->n_accepted += n;
    atomic_fetch_add_explicit(&g_class_bulk_walks, 1, memory_order_relaxed);
    *xc = c;
}

/* The whole trie from configuration c0, one first byte at a time: a first byte
 * c0 cannot read rejects its subtree (no exit at depth 0, so nothing is
 * uncertain) without reading it.  Through the skip links each dead subtree
 * would cost its first entry's prefix length, bytes and skip link: three
 * scattered reads, ~250 of each, cache misses after a compile (~120 us of a
 * schema's first mask, where only `{` lives).  `reads`: the bytes some item of
 * c0's set has a transition on (a superset of those it survives); the others
 * are dead without computing the transition. */
static int flat_walk_whole(const cm_grammar *g, cm_flat *f, int32_t c0, uint32_t rule, const uint32_t *reads,
                           cm_walk *w) {
    const cm_vocab *v = g->v;
    const uint32_t *lo = v->first_off;
    bool np = v->plain_bits && g->lim.plain_skip && flat_plain_ok(g, f, (uint32_t)c0);
    bool tx = np && v->text_bits && flat_text_ok(g, f, (uint32_t)c0, 0);
    if (np) {
        const uint32_t *bits = tx ? v->text_bits : v->plain_bits;
        for (size_t i = 0; i < g->n_words && i < (v->n_tokens + 31) / 32; i++) w->bits[i] |= bits[i];
        w->n_accepted += tx ? v->n_text : v->n_plain;
    }
    const flat_cls *xc = NULL;
    if (!np) class_bulk(g, f, (uint32_t)c0, reads, w, &xc);
    int rc = CM_OK;
    for (unsigned b = 0; b < 256 && !rc; b++) {
        if (lo[b] == lo[b + 1] || !cm_bit(reads, b)) continue;
        int32_t to = f->next[(size_t)c0 * f->width + f->col[b]];
        if (to == CM_FLAT_UNKNOWN) to = flat_step(g, f, (uint32_t)c0, (uint8_t)b);
        if (to == CM_FLAT_DEAD) continue;
        if (to < CM_FLAT_CHART) return to + 8;
        bool npb = np && (tx ? cm_utf8_step(0, (uint8_t)b) >= 0 : cm_plain_byte((uint8_t)b));
        flat_bulk bulk = !npb ? FLAT_BULK_NONE : tx ? FLAT_BULK_TEXT : FLAT_BULK_PLAIN;
        size_t k = !npb ? lo[b] : tx ? v->text_next[lo[b]] : v->plain_next[lo[b]];
        if (xc && cm_bit(xc->x, b)) {  /* its X-only entries listed (class_bulk) */
            bulk = FLAT_BULK_CLASS;
            k = xc->nxt[lo[b]];
        } else if (!npb && to >= 0) {
            int32_t c = flat_live_step(g, f, (uint32_t)c0, (uint8_t)b);
            if (c >= 0 && flat_names_bulk(g, f, (uint32_t)c, (uint8_t)b, w)) {
                bulk = FLAT_BULK_NAMES;
                k = v->name_next[lo[b]];
            }
        }
        if (k < lo[b + 1]) rc = flat_walk_from(g, f, c0, rule, k, lo[b + 1], 0, w, bulk, xc);
    }
    return rc;
}

/* The bytes the last set of c has a transition on. */
static void set_reads(const cm_grammar *g, const cm_chart *c, uint32_t *reads) {
    memset(reads, 0, 8 * sizeof *reads);
    for (size_t i = c->set_start[c->n_sets - 1]; i < c->set_start[c->n_sets]; i++) {
        const uint32_t *nb = g->next_bytes + (size_t)cm_st(c->items[i].state) * 8;
        for (int j = 0; j < 8; j++) reads[j] |= nb[j];
    }
}

/* The whole trie through the walk chart, holding (state, OUTER) (its set is no
 * configuration): only the subtrees of first bytes the set reads. */
static int chart_walk_whole(const cm_grammar *g, cm_flat *f, uint32_t rule, cm_walk *w) {
    const uint32_t *lo = g->v->first_off;
    uint32_t reads[8];
    set_reads(g, &f->walk, reads);
    int rc = CM_OK;
    for (unsigned b = 0; b < 256 && !rc; b++) {
        if (lo[b] == lo[b + 1] || !cm_bit(reads, b)) continue;
        cm_chart_truncate(&f->walk, 1);
        rc = cm_walk_chart(g, &f->walk, rule, lo[b], lo[b + 1], 0, 0, -1, w);
    }
    return rc;
}

int cm_flat_walk(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0,
                 cm_walk *w) {
    bool whole = d0 == 0 && k == 0 && k_end == g->v->n_trie;
    cm_flat *f = g->lim.flat_walks ? flat_get(g) : NULL;
    int32_t c0 = f ? flat_start(g, f, state, whole) : CM_FLAT_CHART;
    if (c0 < CM_FLAT_CHART) return c0 + 8;
    if (c0 == CM_FLAT_CHART && !f) return cm_walk_range(g, &state, 1, rule, k, k_end, d0, 0, -1, w);
    if (c0 == CM_FLAT_CHART) {  /* the scratch chart: no chart to allocate a call */
        int rc = flat_walk_chart(f);
        if (!rc) rc = cm_chart_reset_items(&f->walk, g, &state, 1);
        if (rc) return rc;
        return whole ? chart_walk_whole(g, f, rule, w) : cm_walk_chart(g, &f->walk, rule, k, k_end, d0, 0, -1, w);
    }
    if (whole) {
        uint32_t reads[8];  /* flat_start left c0's set in the scratch chart */
        set_reads(g, &f->chart, reads);
        return flat_walk_whole(g, f, c0, rule, reads, w);
    }
    flat_bulk bulk = FLAT_BULK_NONE;
    if (d0 == 1 && k < k_end) {  /* a first byte's subtree (a byte edge's, walk_byte_edges) */
        const cm_vocab *v = g->v;
        uint8_t b = v->trie_data[v->trie_off[k]];
        if (k == v->first_off[b] && k_end == v->first_off[b + 1] && flat_names_bulk(g, f, (uint32_t)c0, b, w)) {
            bulk = FLAT_BULK_NAMES;
            k = v->name_next[k];
            if (k >= k_end) return CM_OK;
        }
    }
    return flat_walk_from(g, f, c0, rule, k, k_end, d0, w, bulk, NULL);
}

bool cm_flat_plain_live(const cm_grammar *g, uint32_t state) {
    if (!g->v->plain_bits || !g->lim.plain_skip || !g->lim.flat_walks) return false;
    cm_flat *f = flat_get(g);
    int32_t c0 = f ? flat_start(g, f, state, false) : CM_FLAT_CHART;
    return c0 >= 0 && flat_plain_ok(g, f, (uint32_t)c0);
}

bool cm_flat_text_live(const cm_grammar *g, uint32_t state, uint8_t u) {
    if (!g->v->text_bits || !g->lim.plain_skip || !g->lim.flat_walks || u >= CM_UTF8_STATES) return false;
    cm_flat *f = flat_get(g);
    int32_t c0 = f ? flat_start(g, f, state, false) : CM_FLAT_CHART;
    if (c0 < 0) return false;
    return (u || flat_plain_ok(g, f, (uint32_t)c0)) && flat_text_ok(g, f, (uint32_t)c0, u);
}

int cm_flat_walk_np(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0,
                    bool text, cm_walk *w) {
    cm_flat *f = g->cache->flat;  /* cm_flat_plain_live made it and state's configuration */
    int32_t c0 = f ? flat_start(g, f, state, false) : CM_FLAT_CHART;
    if (c0 < CM_FLAT_CHART) return c0 + 8;
    if (c0 == CM_FLAT_CHART || k_end > g->v->n_trie) return CM_ERR_ARG;  /* not a proven start */
    k = (text ? g->v->text_next : g->v->plain_next)[k];
    return k < k_end ? flat_walk_from(g, f, c0, rule, k, k_end, d0, w, text ? FLAT_BULK_TEXT : FLAT_BULK_PLAIN, NULL)
                     : CM_OK;
}

/* ---- names after a position's own bytes (compose.c, walk_tails) ---- */

bool cm_flat_names_after(const cm_grammar *g, const uint32_t *z, unsigned n_z) {
    const cm_vocab *v = g->v;
    if (!v->name_ids || !g->lim.name_skip || !g->lim.flat_walks || !n_z || n_z > FLAT_PLAIN_MAX) return false;
    cm_flat *f = flat_get(g);
    if (!f) return false;
    uint8_t rep[256];  /* one name byte a column */
    unsigned n_rep = 0;
    bool seen[256] = {false};
    for (unsigned b = '0'; b <= 'z'; b++) {
        if (!cm_name_byte((uint8_t)b) || seen[f->col[b]]) continue;
        seen[f->col[b]] = true;
        rep[n_rep++] = (uint8_t)b;
    }
    uint32_t q[FLAT_PLAIN_MAX];
    uint8_t depth[FLAT_PLAIN_MAX];  /* after the first byte and a name's first: 2 */
    unsigned n = 0;
    for (unsigned i = 0; i < n_z; i++) {
        int32_t c = flat_start(g, f, z[i], false);
        if (c < 0 || !flat_enqueue(q, depth, &n, (uint32_t)c, 2)) return false;
    }
    return flat_closure_live(g, f, q, depth, n, rep, n_rep);
}

int cm_flat_walk_names_skipped(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end,
                               uint32_t d0, cm_walk *w) {
    cm_flat *f = g->cache->flat;  /* cm_flat_names_after made it and state's configuration */
    int32_t c0 = f ? flat_start(g, f, state, false) : CM_FLAT_CHART;
    if (c0 < CM_FLAT_CHART) return c0 + 8;
    if (c0 == CM_FLAT_CHART || !g->v->name_next || k_end > g->v->n_trie || d0 == 0) return CM_ERR_ARG;
    size_t kn = g->v->name_next[k];
    if (kn >= k_end) return CM_OK;
    if (g->v->name_lcp[kn] > d0) return flat_walk_from(g, f, c0, rule, k, k_end, d0, w, FLAT_BULK_NONE, NULL);  /* not expected */
    return flat_walk_from(g, f, c0, rule, kn, k_end, d0, w, FLAT_BULK_NAMES, NULL);
}
