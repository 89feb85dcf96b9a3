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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "chart.h"
#include "loops.h"
#include "walk.h"

int cm_walk_init(cm_walk *w, const cm_grammar *g) { return cm_walk_init_spare(w, g, NULL); }

int cm_walk_init_spare(cm_walk *w, const cm_grammar *g, uint32_t *zero_bits) {
    size_t depths = (size_t)g->v->max_len + 1;
    memset(w, 0, sizeof *w);
    w->bits = zero_bits ? zero_bits : calloc(g->n_words ? g->n_words : 1, sizeof *w->bits);
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
    free(w->notes);
    free(w->note_ex);
    memset(w, 0, sizeof *w);
}

static atomic_int g_notes_on = 1;
static atomic_size_t g_notes_used;
void cm_scan_notes_enable(int on) { atomic_store(&g_notes_on, on ? 1 : 0); }
size_t cm_scan_notes_used(void) { return atomic_load(&g_notes_used); }

bool cm_scan_notes_on(void) { return atomic_load_explicit(&g_notes_on, memory_order_relaxed) != 0; }

/* Notes are optional: out of memory, or out of order, the walk keeps none (the filter scans
 * those tokens). */
uint8_t *cm_walk_note_ex(cm_walk *w, uint32_t k, uint32_t k_end, uint32_t dead) {
    if (w->n_notes && w->notes[w->n_notes - 1].k_end > k) {
        w->n_notes = w->n_note_ex = 0;
        return NULL;
    }
    if (cm_grow((void **)&w->notes, &w->cap_notes, w->n_notes + 1, sizeof *w->notes) ||
        cm_grow((void **)&w->note_ex, &w->cap_note_ex, w->n_note_ex + dead + 1, 1)) {
        w->n_notes = w->n_note_ex = 0;
        return NULL;
    }
    w->notes[w->n_notes++] = (cm_scan_note){k, k_end, dead, (uint32_t)w->n_note_ex};
    w->n_note_ex += (size_t)dead + 1;
    return w->note_ex + w->n_note_ex - dead - 1;
}

/* Keep the scan of entries [k, k_end): ex[1 .. dead] the exit flags after dead bytes. */
static void walk_note(cm_walk *w, uint32_t k, uint32_t k_end, uint32_t dead, const uint8_t *ex) {
    uint8_t *x = cm_walk_note_ex(w, k, k_end, dead);
    if (x) memcpy(x, ex, (size_t)dead + 1);
}

uint32_t cm_walk_names(const cm_vocab *v, uint8_t b, cm_walk *w) {
    if (((w->names[b >> 5] >> (b & 31)) & 1u) && cm_name_sets_on()) {
        cm_name_sets_count();
        return 0;
    }
    w->names[b >> 5] |= 1u << (b & 31);
    return cm_vocab_names(v, b, w->bits);
}

int cm_walk_push_uncertain_grow(cm_walk *w, uint32_t k) {
    size_t n = w->cap_unc ? w->cap_unc * 2 : 64;
    uint32_t *p = realloc(w->unc, n * sizeof *p);
    if (!p) return CM_ERR_NOMEM;
    w->unc = p;
    w->cap_unc = n;
    w->unc[w->n_unc++] = k;
    return CM_OK;
}

/* Loop stops.  Along a run of one byte a chart can grow by an item or more a byte (sql.lark
 * after `SELECT`: each dash of ` --------` may start a negation or a `--` comment, one item per
 * origin), so a walk down such a subtree costs the square of its depth.  Where a growing set
 * holds a loop item -- one owing no debt whose state goes to itself on the next byte (the
 * comment's body) -- the subtree below it is settled entry by entry from that item alone:
 *   - an entry whose bytes past the set all keep the item's state is accepted: every later
 *     scan keeps the item (scan_kernel: same state, same origin, no debt), so the chart
 *     lives to the entry's end, as the scans would have found;
 *   - an entry that leaves the loop at byte x is scanned from a reduced chart: the sets up to
 *     the loop's set as they are, empty sets for the bytes the loop read (each with its byte,
 *     for the debts that read spans), then the closure of the loop item alone at depth x.
 *     Every set of it is a subset of the real chart's (the loop item is in the real set at
 *     x, which is closed, and scans and closures only add items from items), so if the
 *     reduced chart lives to the entry's end, so does the real one: accepted;
 *   - every other entry (the reduced chart died, or the loop was left within LOOP_MIN_RUN
 *     bytes) is scanned as before from the loop's set, its exits and FOLLOW checks as
 *     cm_walk_chart's, after the others (entries in trie order, sharing their prefixes).
 * The entries are the same; only which scans decide them changes. */
#define LOOP_MIN_ITEMS 16
#define LOOP_MIN_RUN 4

static atomic_int g_loop_stop = 1;
static atomic_size_t g_loop_stops, g_loop_reduced;

void cm_walk_loop_stop_enable(int on) { atomic_store(&g_loop_stop, on ? 1 : 0); }

size_t cm_walk_loop_stops(void) { return atomic_load(&g_loop_stops); }

size_t cm_walk_loop_reduced(void) { return atomic_load(&g_loop_reduced); }

/* A loop item of the chart's last set, if it has grown to LOOP_MIN_ITEMS items and more than
 * the set before it: an item owing no debt whose state goes to itself on byte `next`. */
static bool loop_item(const cm_grammar *g, const cm_chart *c, uint8_t next, cm_item *out) {
    const cm_tables *t = &g->t;
    size_t last = c->n_sets - 1, lo = c->set_start[last], hi = c->set_start[last + 1];
    if (hi - lo < LOOP_MIN_ITEMS || (last && hi - lo <= lo - c->set_start[last - 1])) return false;
    const int32_t *trans = t->trans;
    const uint32_t nc = t->n_classes, cls = t->byte_class[next];
    for (size_t i = lo; i < hi; i++) {
        uint32_t packed = c->items[i].state, st = cm_st(packed);
        if (!cm_la(packed) && trans[(size_t)st * nc + cls] == (int32_t)st) {
            *out = c->items[i];
            return true;
        }
    }
    return false;
}

/* Defer entry k to the loop stop's scans from the loop's set (its list: the uncertain
 * list's tail). */
static int loop_defer(cm_walk *w, uint32_t k) { return cm_walk_push_uncertain(w, k); }

/* The entries [k, end), which share their first D bytes (the path to the chart's last set,
 * at depth D), settled from the loop item `it` of that set (see above). */
static int loop_subtree(const cm_grammar *g, cm_chart *c, uint32_t rule, cm_item it, size_t k, size_t end, uint32_t D,
                        cm_walk *w) {
    const cm_vocab *v = g->v;
    const cm_tables *t = &g->t;
    const int32_t *row = t->trans + (size_t)cm_st(it.state) * t->n_classes;
    const uint8_t *bc = t->byte_class;
    const int32_t self = (int32_t)cm_st(it.state);
    uint8_t *ex = w->ex, *fl = w->fl;
    size_t iD = c->n_sets - 1, unc0 = w->n_unc;
    int rc = CM_OK;
    /* the reduced chart above set D: built along rp for depths up to r_have, rooted at r_x */
    const uint8_t *rp = NULL;
    uint32_t r_have = 0, r_x = 0, x_prev = 0;
    for (size_t j = k; j < end && !rc; j++) {
        uint32_t len, x;
        const uint8_t *p = cm_trie_bytes(v, j, &len);
        if (j > k && x_prev < v->trie_lcp[j]) {
            x = x_prev;  /* the byte that leaves the loop is shared */
        } else {
            x = j > k ? v->trie_lcp[j] : D;
            while (x < len && row[bc[p[x]]] == self) x++;
        }
        x_prev = x;
        if (x == len) {
            cm_walk_accept(w, v->trie_ids[j]);
            continue;
        }
        if (x - D < LOOP_MIN_RUN) {
            rc = loop_defer(w, (uint32_t)j);
            continue;
        }
        uint32_t d = rp && r_x == x ? cm_common_prefix(rp, r_have, p, len) : 0;
        if (d < x) {  /* a new root: empty sets for the loop's bytes, then the item's closure */
            rp = NULL;
            cm_chart_truncate(c, iD + 1);
            int r = CM_OK;
            for (uint32_t e = D; e + 1 < x && !r; e++) r = cm_chart_push_empty(c, p[e]);
            if (!r) r = cm_chart_push_items(c, g, &it, 1, p[x - 1]);
            if (r) {  /* memory or limits: the real chart decides */
                rc = loop_defer(w, (uint32_t)j);
                continue;
            }
            d = x;
            r_x = x;
        }
        cm_chart_truncate(c, iD + 1 + (d - D));
        int r = 1;
        for (; d < len && (r = cm_chart_scan(c, g, p[d])) > 0; d++) {
        }
        rp = p;
        r_have = d;
        if (r > 0) {
            cm_walk_accept(w, v->trie_ids[j]);
            atomic_fetch_add_explicit(&g_loop_reduced, 1, memory_order_relaxed);
        } else {
            rc = loop_defer(w, (uint32_t)j);
        }
    }
    atomic_fetch_add_explicit(&g_loop_stops, 1, memory_order_relaxed);
    /* The deferred entries, scanned from set D as cm_walk_chart scans them, in trie order,
     * each sharing the sets of its common prefix with the one before.  They lie on the
     * uncertain list from unc0 on; the list is compacted in place (the entry at i is read
     * before the i-th or an earlier slot is written), keeping the uncertain ones. */
    size_t n_def = w->n_unc - unc0;
    const uint8_t *prev = NULL;
    uint32_t have = D;
    cm_chart_truncate(c, iD + 1);
    w->n_unc = unc0;
    for (size_t i = 0; i < n_def && !rc; i++) {
        uint32_t j = w->unc[unc0 + i], len;
        const uint8_t *p = cm_trie_bytes(v, j, &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, p, len) : D;
        if (d < D) d = D;
        bool dead = false;
        uint8_t f = 0;
        cm_chart_truncate(c, iD + 1 + (d - D));
        for (; d < len; d++) {
            f = fl[d] | (ex[d] && cm_follows(g, rule, p[d]));
            int r = cm_chart_scan(c, g, p[d]);
            if (r <= 0) {
                rc = r;
                dead = true;
                break;
            }
            ex[d + 1] = c->exited;
            fl[d + 1] = f;
        }
        prev = p;
        have = d;
        if (rc) break;
        if (!dead) cm_walk_accept(w, v->trie_ids[j]);
        else if (f) w->unc[w->n_unc++] = j;
    }
    return rc;
}

int cm_walk_chart(const cm_grammar *g, cm_chart *c, uint32_t rule, size_t k, size_t k_end, uint32_t d0, uint8_t f0,
                  int ex0, cm_walk *w) {
    const cm_vocab *v = g->v;
    uint8_t *ex = w->ex, *fl = w->fl;
    size_t base = c->n_sets;  /* sets at depth d0 and before */
    int rc = CM_OK;
    /* a loop stop settles a subtree from an automaton's self edge: no counts (segment grammars) */
    bool loops = atomic_load_explicit(&g_loop_stop, memory_order_relaxed) && !g->has_segments;
    /* an exit at depth 0 is another item of the same set; deeper, it is an exit
     * (ex0 >= 0: the exit of the set the items were taken from) */
    ex[d0] = d0 ? (ex0 >= 0 ? (uint8_t)ex0 : c->exited) : 0;
    fl[d0] = f0;  /* an exit before d0 (a flat walk's) */
    if (loops && k < k_end) {  /* the set the walk starts from (later ones: when they are made) */
        uint32_t len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        cm_item it;
        if (len > d0 && (k_end - k > 1 || len - d0 >= LOOP_MIN_RUN) && loop_item(g, c, p[d0], &it)) {
            rc = loop_subtree(g, c, rule, it, k, k_end, d0, w);
            k = k_end;
        }
    }
    while (k < k_end && !rc) {
        uint32_t len, d = v->trie_lcp[k] > d0 ? v->trie_lcp[k] : d0, dead_at = 0;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        uint8_t f = 0;
        bool stopped = false;
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
            if (loops) {
                size_t end = v->skip[v->trie_off[k] + d];
                cm_item it;
                if (end > k_end) end = k_end;
                if ((end - k > 1 || len - (d + 1) >= LOOP_MIN_RUN) &&
                    loop_item(g, c, d + 1 < len ? p[d + 1] : p[d], &it)) {
                    rc = loop_subtree(g, c, rule, it, k, end, d + 1, w);
                    k = end;
                    stopped = true;
                    break;
                }
            }
        }
        if (rc) break;
        if (stopped) continue;
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
/* The bytes some item of a listed walk's set reads, made when a second
 * candidate resumes from that set (set_reads of flat.c): a candidate whose next
 * byte no item reads dies there without a scan (cm_chart_scan advances nothing
 * on it, and returns 0).  A composed entry's candidates mostly share a first
 * byte and die on the next one (after a value's `ws`: ` {`, ` [`, ` "`), and
 * where the state's chart predicts a chain of nested rules (an object's
 * optional properties in order, each a rule that calls the next) each such
 * scan looped over an item per rule of the chain. */
typedef struct listed_reads {
    uint32_t *words;            /* [n_sets * 8] */
    uint64_t *version;          /* [n_sets] the version of the set read (0: none) */
    uint8_t *resumed;           /* [n_sets] candidates that resumed from that version */
    size_t n_sets;
} listed_reads;

/* How many candidates of listed walks died on a byte no item of their set reads, in this
 * process: for the tests. */
static atomic_size_t g_listed_unread;

size_t cm_walk_listed_unread(void) { return atomic_load(&g_listed_unread); }

/* A listed walk's last byte of a text only checked (cm_chart_viable), its set not built, as
 * scan_rest does: the default; off, every byte scanned (the tests' reference).  A later text that
 * reads on from the whole of this one scans that byte again.  Process-wide. */
static atomic_int g_listed_last_viable = 1;
static atomic_size_t g_listed_last_checked;

void cm_walk_listed_last_viable_enable(int on) { atomic_store(&g_listed_last_viable, on); }
size_t cm_walk_listed_last_checked(void) { return atomic_load(&g_listed_last_checked); }

/* Whether set k of c (its last) reads byte b, as far as its row tells; true
 * while it has no row (the first candidate to resume from it scans). */
static bool listed_reads_byte(listed_reads *lr, const cm_grammar *g, const cm_chart *c, size_t k, uint8_t b) {
    if (k >= lr->n_sets) return true;
    if (lr->version[k] != c->version[k]) {
        lr->version[k] = c->version[k];
        lr->resumed[k] = 0;
    }
    if (lr->resumed[k] < 2 && ++lr->resumed[k] < 2) return true;
    uint32_t *reads = lr->words + k * 8;
    if (lr->resumed[k] == 2) {
        lr->resumed[k] = 3;
        memset(reads, 0, 8 * sizeof *reads);
        for (size_t i = c->set_start[k]; i < c->set_start[k + 1]; i++) {
            const uint32_t *nb = g->next_bytes + (size_t)cm_st(c->items[i].state) * 8;
            for (int j = 0; j < 8; j++) reads[j] |= nb[j];
        }
    }
    return cm_bit(reads, b);
}

static cm_chart *listed_chart(const cm_grammar *g, uint32_t state);

static int walk_listed(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, uint32_t d0, bool note,
                       bool reuse, cm_walk *w) {
    const cm_vocab *v = g->v;
    uint8_t *ex = w->ex, *fl = w->fl;
    uint32_t rule = g->t.state_rule[state];
    cm_chart own, *cp = reuse ? listed_chart(g, state) : NULL;
    int rc = cp ? CM_OK : cm_chart_init_item(&own, g, state, CM_OUTER);
    if (!cp) cp = &own;
    const uint8_t *prev = NULL;
    uint32_t have = d0;  /* sets are built for prev[d0..have) */
    listed_reads lr = {0};
    if (n > 2 && g->lim.listed_reads) {  /* else no set is resumed twice */
        lr.n_sets = (size_t)v->max_len + 1;
        lr.words = malloc(lr.n_sets * 8 * sizeof *lr.words);
        lr.version = calloc(lr.n_sets, sizeof *lr.version);
        lr.resumed = malloc(lr.n_sets);
        if (!lr.words || !lr.version || !lr.resumed) lr.n_sets = 0;
    }
    ex[d0] = fl[d0] = 0;
    bool last_viable = atomic_load_explicit(&g_listed_last_viable, memory_order_relaxed);
    size_t checked = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t len, id = v->trie_ids[ks[i]];
        if (cm_bit(w->bits, id)) continue;
        const uint8_t *p = cm_trie_bytes(v, ks[i], &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, p, len) : d0;
        if (d < d0) d = d0;  /* the first d0 bytes are shared, and not read */
        bool dead = false;
        uint8_t f = 0;
        cm_chart_truncate(cp, (size_t)(d - d0) + 1);
        if (prev && d < len && lr.n_sets && !listed_reads_byte(&lr, g, cp, d - d0, p[d])) {
            f = fl[d] | (ex[d] && cm_follows(g, rule, p[d]));
            atomic_fetch_add_explicit(&g_listed_unread, 1, memory_order_relaxed);
            dead = true;
        }
        for (; d < len && !dead; d++) {
            f = fl[d] | (ex[d] && cm_follows(g, rule, p[d]));
            if (last_viable && d + 1 == len) {
                /* the last byte: its verdict only (d stays: its set is not built, have = len - 1) */
                checked++;
                dead = !cm_chart_viable(cp, g, p[d]);
                break;
            }
            int r = cm_chart_scan(cp, g, p[d]);
            if (r < 0) rc = r;
            if (r <= 0) {
                dead = true;
                break;
            }
            ex[d + 1] = cp->exited;
            fl[d + 1] = f;
        }
        prev = p;
        have = d;
        if (rc) break;
        if (!dead) {
            cm_set_bit(w->bits, id);
        } else if (f) {
            rc = cm_walk_push_uncertain(w, ks[i]);
            /* the chart died on p[d]: its exits after p[0 .. d) are ex[1 .. d] */
            if (note) walk_note(w, ks[i], ks[i] + 1, d, ex);
        }
    }
    if (checked) atomic_fetch_add_explicit(&g_listed_last_checked, checked, memory_order_relaxed);
    free(lr.words);
    free(lr.version);
    free(lr.resumed);
    if (cp == &own) cm_chart_free(&own);
    return rc;
}

int cm_walk_listed_at(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, uint32_t d0, cm_walk *w) {
    return walk_listed(g, state, ks, n, d0, false, false, w);
}

int cm_walk_listed(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, cm_walk *w) {
    return walk_listed(g, state, ks, n, 0, false, false, w);
}

int cm_walk_listed_noted(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, cm_walk *w) {
    return walk_listed(g, state, ks, n, 0, cm_scan_notes_on(), true, w);
}

/* Scan p[d..len) into c, whose sets for p[0..d) are built: the number of bytes
 * of p the chart survives (len: all), or < 0 on error; *built the bytes whose
 * sets c then holds.  The last byte is only checked (cm_chart_viable), its
 * set not built (*built is len - 1): nothing reads on after a text's end, and
 * the filter's verdicts are mostly decided there (a `ws` start's rests after
 * the quote, ` "abc`, end a byte after the prefix they share), while the set
 * cost a closure through every caller.  A later text that reads on from the
 * whole of p scans that byte again. */
static long scan_rest(cm_chart *c, const cm_grammar *g, const uint8_t *p, uint32_t d, uint32_t len,
                      uint8_t *ex, uint32_t *built) {
    cm_chart_truncate(c, (size_t)d + 1);
    for (; d < len; d++) {
        if (d + 1 == len) {
            *built = d;
            return cm_chart_viable(c, g, p[d]) ? len : d;
        }
        int r = cm_chart_scan_up(c, g, p[d]);
        if (r < 0) return r;
        if (r == 0) {
            *built = d;
            return d;
        }
        if (ex) ex[d + 1] = c->exited;
    }
    *built = len;
    return len;
}

/* The upward filter's verdicts, kept by the cache: does the upward chart of
 * `rule` survive all of p[0..len) (the bytes of a token after an exit)?  Rules
 * called from everywhere (a Lark NAME) have a big upward chart, ~200 ns a byte,
 * and every state of the rule asks about the same few thousand suffixes: a
 * later state of the rule reads them here.  The bytes are the vocabulary's
 * trie, which outlives the cache.  Under the cache lock. */
typedef struct {
    uint32_t off;        /* the bytes: the trie's data from here */
    uint32_t rule;
    uint32_t hash;       /* follow_hash's low 32 bits */
    uint16_t len;
    uint16_t verdict;    /* 0: an empty slot; 1: the chart dies; 2: it survives */
} follow_slot;

/* What the upward chart of a rule can read after a name (follow_answer's
 * shortcut): T is every state reachable from the rule's return states through
 * name bytes ([A-Za-z0-9_]), calls, markers and returns, where a completed
 * rule returns to every state any call of it returns to.  The items of the
 * upward chart after any run of name bytes are at states of T (the chart adds
 * nothing else: a completion returns to a subset of those states, a lookahead
 * debt only drops items), so a byte no state of T reads kills it there;
 * likewise a second byte after a non-ASCII first one x that no state reached
 * from T on x (and closed) reads.  After a name, the lead byte of a non-ASCII
 * letter (`Nguy\xe1\xbb\x85n`) is such a byte in most grammars: the rests of a
 * name token that the item's rule leaves inside it, one a position, die there
 * without a chart step. */
typedef struct {
    uint32_t first[8];         /* the bytes some state of T reads */
    uint32_t second[128][8];   /* by x - 0x80, for the non-ASCII x in first: the bytes after x */
} name_stops;

/* A run of one byte after an exit (`=====`, `/////`, 40 spaces: Llama-3's long
 * punctuation tokens crossing a block's end, their rests a byte or a few longer
 * at each later position of the string, each a new rest for the memo above).
 * A chart that survives k bytes of a run survives fewer, so how many of the
 * byte the rule's upward chart is known to read (lo) and the length it is known
 * to die at (hi, 0: not known) decide every rest that is a run of the byte, and
 * kill every rest whose leading run reaches hi.  Learnt from the rests the
 * filter reads anyway: the upward chart is the same one for every filter of
 * the rule. */
typedef struct {
    uint32_t rule;
    uint32_t lo, hi;
    uint32_t met;    /* rests read that died on the byte ending their leading run of the byte */
    uint32_t misses; /* runs of the byte the filter scanned and read whole */
    uint32_t *stops; /* [8], the bytes read after any run of the byte (walk.c, run_stops_of); NULL: not made */
    uint16_t byte;   /* + 1; 0: an empty slot */
} follow_run;

/* The bytes the upward chart of a rule reads second, after each first byte
 * (the pair stops): a rest whose second byte is not among them dies there.
 * After a `ws` rule (a JSON value's blanks) some 4,000 blank-led tokens each
 * leave it with a rest (` the` -> `the`), three in four dying on that second
 * byte, each of them hashed, looked up, sorted and asked one at a time before
 * these.  Made from the chart itself, one step from its first set a first
 * byte, when a rest led by that byte is first met (a string's rule reads
 * most bytes first, and its filters meet a few of them), so a rest it kills
 * is one the chart dies on. */
typedef struct {
    uint32_t made[8];         /* the first bytes whose row of second is made */
    uint32_t second[256][8];  /* by the first byte: the bytes some item of the set after it reads */
    /* the triple stops (pair_third): by the first byte x, its row in tri + 1; 0 not made yet,
     * TRI_WIDE none (x's second bytes are too many to keep a third of each) */
    uint8_t tri_of[256];
    struct triple_row *tri;
    size_t n_tri, cap_tri;
} pair_stops;

/* The third stops after a first byte x whose second bytes are few (a keyword's: `f` `a` of
 * `false`, `n` `u`, `t` `r` after a JSON value's `ws`): per second byte y, the bytes the set
 * after x y reads.  A rest of one of those pairs whose third byte is not among them dies there
 * (` fabrication` -> `fabrication` dies on `b`), without being asked, and its token's prefix
 * drops the rest of its trie subtree (the filter's subtree skip). */
#define CM_TRIPLE_MAX_SECOND 4
#define TRI_WIDE 255
typedef struct triple_row {
    uint8_t n;                              /* second bytes made */
    uint8_t y[CM_TRIPLE_MAX_SECOND];
    uint32_t third[CM_TRIPLE_MAX_SECOND][8];
} triple_row;

/* A block rule's region for the rests its wrapping positions drop (cm_walk_drop_dead). */
typedef struct wrap_region {
    uint32_t bytes[8];  /* the bytes T is reached through */
    uint64_t *in;       /* T's states, a bit each */
    uint32_t reads[8];  /* the bytes some state of T reads */
    struct wrap_region *next;
} wrap_region;

struct cm_follow_memo {
    follow_slot *slots;  /* open addressing, [cap] */
    size_t cap, n;
    follow_run *runs;    /* open addressing, [runs_cap] */
    size_t runs_cap, n_runs;
    name_stops **stops;  /* [n_rules], made on first use; NULL: not yet */
    uint32_t n_rules;
    pair_stops **pairs;  /* [n_pair_rules], made once a rule's filters met lim.filter_pairs rests; NULL: not yet */
    uint32_t up_rule;    /* + 1: the rule whose return states' closure is up's first set; 0: none */
    uint32_t *pair_met;  /* [n_pair_rules]: the rests met by the rule's filters while it has none */
    uint32_t n_pair_rules;
    /* the filter's charts, reused from call to call (the positions of a long
     * string's chain filter a few tokens each, 100-200 times in one mask) */
    cm_chart item, up;
    bool item_ok, up_ok;
    /* the item chart's first set is the closure of (item_of - 1, CM_OUTER), unchanged since it
     * was made, and item_exited / item_read_hi the chart's flags then (item_keep); 0: not known */
    uint32_t item_of, item_read_hi;
    bool item_exited;
    /* the lazy memo (lim.lazy_follow): per rule, 0 no verdict of it yet, 1 its first asking
     * filter's verdicts held unhashed in held[rule], 2 hashed into slots (every filter of
     * the rule asks the memo from then on); NULL: not made */
    uint8_t *lazy;           /* [n_lazy_rules] */
    struct follow_held **held; /* [n_lazy_rules] */
    uint32_t n_lazy_rules;
    struct wrap_region **regions; /* [n_region_rules], a block rule's (cm_walk_drop_dead); NULL: not yet */
    uint32_t n_region_rules;
    /* per rule + 1, the rule whose upward verdicts it shares (verdict_rule); 0: not known yet */
    uint32_t *vrule;     /* [n_vrule_rules]; NULL: not made */
    uint32_t n_vrule_rules;
    struct up_class *classes; /* the upward charts' first sets met so far, one a class */
    /* per rule, its upward first set's byte readers (kern_rule_of); NULL: not made / not yet */
    struct kern_rule **kern;  /* [n_kern_rules] */
    uint32_t n_kern_rules;
    struct kern_class **kbucket; /* [CM_KERN_BUCKETS], the kernels met so far (kern_key_make) */
    struct kern_class **kby_id;  /* [n_kclasses], by number */
    uint32_t n_kclasses;
    size_t cap_kclasses;
};

/* One verdict of a rule's first asking filter, kept as the ask had it (the
 * bytes: the trie's data from off), hashed into the memo only when a second
 * filter of the rule comes: a `ws` rule's start entry asks ~4,000 rests and
 * a compact document never filters another of its states. */
typedef struct {
    uint32_t off;
    uint16_t len;
    uint16_t alive;
} follow_verdict;

typedef struct follow_held {
    size_t n;
    follow_verdict v[];
} follow_held;

#define CM_FOLLOW_MEMO_MAX ((size_t)1 << 15)  /* verdicts kept at most: 1 MB of slots */

/* The first set of some rule's upward chart, cut to the items that can act after it
 * (verdict_rule): (packed state << 32 | origin), in the chart's order until compared. */
typedef struct up_class {
    struct up_class *next;
    uint64_t hash;
    uint32_t rule, n;
    uint64_t items[];
} up_class;

static void kern_free(cm_follow_memo *m);

void cm_follow_memo_free(cm_follow_memo *m) {
    if (!m) return;
    if (m->item_ok) cm_chart_free(&m->item);
    if (m->up_ok) cm_chart_free(&m->up);
    if (m->stops)
        for (uint32_t r = 0; r < m->n_rules; r++) free(m->stops[r]);
    free(m->stops);
    if (m->pairs)
        for (uint32_t r = 0; r < m->n_pair_rules; r++) {
            if (m->pairs[r]) free(m->pairs[r]->tri);
            free(m->pairs[r]);
        }
    free(m->pairs);
    free(m->pair_met);
    if (m->held)
        for (uint32_t r = 0; r < m->n_lazy_rules; r++) free(m->held[r]);
    free(m->held);
    free(m->lazy);
    free(m->slots);
    for (size_t i = 0; i < m->runs_cap; i++) free(m->runs[i].stops);
    free(m->runs);
    if (m->regions)
        for (uint32_t r = 0; r < m->n_region_rules; r++)
            for (wrap_region *x = m->regions[r], *nx; x; x = nx) {
                nx = x->next;
                free(x->in);
                free(x);
            }
    free(m->regions);
    free(m->vrule);
    for (struct up_class *x = m->classes, *nx; x; x = nx) {
        nx = x->next;
        free(x);
    }
    kern_free(m);
    free(m);
}

/* The cache's memo, created empty on first use; NULL when memory is short. */
static cm_follow_memo *follow_memo(const cm_grammar *g) {
    cm_cache *c = g->cache;
    if (!c->follow) c->follow = calloc(1, sizeof *c->follow);
    return c->follow;
}

/* A scratch chart of the memo made the closure of the given items (origin
 * CM_OUTER), upward or not; opened on first use.  0 or an error. */
static int follow_chart(const cm_grammar *g, cm_chart *c, bool *ok, bool upward, const uint32_t *states, size_t n) {
    if (!*ok) {
        int rc = cm_chart_open(c, upward);
        if (rc) {
            cm_chart_free(c);
            return rc;
        }
        c->memo_big = upward;  /* (the upward chart's closures of hundreds of items recur) */
        *ok = true;
    }
    return cm_chart_reset_items(c, g, states, n);
}

/* cm_compose's listed walk (cm_walk_listed_noted) starts from the closure of its state's item,
 * as the filter's item chart does: it takes that chart of the memo, reset, instead of a chart
 * of its own, opened and freed each time.  A composed entry of a long chain of optional
 * properties (Snowplow's sp_339 after a value: ~160 entries built in one mask) paid ~1.9 K
 * instructions a walk for the opening and ~0.8 K for the freeing, and each chart rebuilt its
 * closure memo and waiter index from nothing; kept, a walk's closures of the same kernels
 * (after `,"` in every property's rest) are found in the memo.  The sets are the same: the
 * chart is truncated to nothing and its first set made again (cm_chart_reset_items); the memo
 * and the waiter index are checked against the sets' versions.  Under the cache lock, as the
 * filter, which resets the chart again before it reads it.  Off: a chart of its own each walk,
 * the reference the tests compare against. */
static atomic_int g_listed_reuse = 1;
static atomic_size_t g_listed_reused;

void cm_walk_listed_reuse_enable(int on) { atomic_store(&g_listed_reuse, on); }
size_t cm_walk_listed_reused(void) { return atomic_load(&g_listed_reused); }

/* The filter of a composed entry's uncertain tokens (cm_walk_filter_uncertain) starts from the
 * same closure as its listed walk just did, in the same chart: it reset the chart again, the
 * closure of a state that predicts a chain of optional properties made anew (~5 K instructions
 * in sp_339's chain, once a level).  Every scan of either appends sets after the first and
 * truncates back to it, and nothing else takes the chart between them (both under the cache
 * lock, the listed walk last in cm_compose, the filter right after in build_entry_k), so while
 * the chart is known to hold (state, CM_OUTER)'s closure as its first set, the filter
 * truncates it to that set and restores the flags the closure left, instead of making it
 * again: the sets it then scans are the ones a reset chart makes (versions, closure memo and
 * waiter index are checked against the sets' versions, and the first set's is unchanged).
 * Off: every use resets, the reference the tests compare against. */
static atomic_int g_item_keep = 1;
static atomic_size_t g_item_kept;

void cm_walk_item_keep_enable(int on) { atomic_store(&g_item_keep, on); }
size_t cm_walk_item_kept(void) { return atomic_load(&g_item_kept); }

/* The memo's item chart holding the closure of (state, CM_OUTER) as its only set: kept
 * (item_keep) or reset.  0 or an error (the chart then not known). */
static int item_chart(const cm_grammar *g, cm_follow_memo *m, uint32_t state) {
    cm_chart *c = &m->item;
    if (m->item_ok && m->item_of == state + 1 && c->n_sets >= 1 &&
        atomic_load_explicit(&g_item_keep, memory_order_relaxed)) {
        cm_chart_truncate(c, 1);
        c->exited = m->item_exited;
        c->read_hi = m->item_read_hi;
        atomic_fetch_add_explicit(&g_item_kept, 1, memory_order_relaxed);
        return CM_OK;
    }
    m->item_of = 0;
    int rc = follow_chart(g, c, &m->item_ok, false, &state, 1);
    if (rc) return rc;
    m->item_of = state + 1;
    m->item_exited = c->exited;
    m->item_read_hi = c->read_hi;
    return CM_OK;
}

/* The memo's item chart reset to the closure of (state, CM_OUTER); NULL: off, or memory or a
 * limit ran out (the walk then makes its own, and meets the same limit). */
static cm_chart *listed_chart(const cm_grammar *g, uint32_t state) {
    if (!atomic_load_explicit(&g_listed_reuse, memory_order_relaxed)) return NULL;
    cm_follow_memo *m = follow_memo(g);
    if (!m) return NULL;
    m->item_of = 0;  /* the walk's own reset: made anew, as before */
    if (item_chart(g, m, state)) return NULL;
    atomic_fetch_add_explicit(&g_listed_reused, 1, memory_order_relaxed);
    return &m->item;
}

static uint32_t follow_hash(uint32_t rule, const uint8_t *p, uint32_t len) {
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)rule << 8) ^ len;
    for (uint32_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 29));
}

/* Can the memo name these bytes (a slot holds 32-bit offsets and 16-bit lengths)? */
static bool follow_fits(const cm_vocab *v, const uint8_t *p, uint32_t len) {
    return len <= UINT16_MAX && (size_t)(p - v->trie_data) <= UINT32_MAX;
}

static follow_slot *follow_find(const cm_vocab *v, const cm_follow_memo *m, uint32_t h, uint32_t rule,
                                const uint8_t *p, uint32_t len) {
    size_t s = h & (m->cap - 1);
    for (;; s = (s + 1) & (m->cap - 1)) {
        follow_slot *x = &m->slots[s];
        if (!x->verdict || (x->hash == h && x->len == len && x->rule == rule &&
                            (v->trie_data + x->off == p || !memcmp(v->trie_data + x->off, p, len))))
            return x;
    }
}

/* 1 the upward chart survives the bytes (hashed to h), 0 it dies, -1 not known. */
static int follow_get(const cm_grammar *g, uint32_t h, uint32_t rule, const uint8_t *p, uint32_t len) {
    const cm_follow_memo *m = g->cache->follow;
    if (!m || !m->n || !follow_fits(g->v, p, len)) return -1;
    const follow_slot *x = follow_find(g->v, m, h, rule, p, len);
    return x->verdict ? x->verdict - 1 : -1;
}

/* Room in the memo for `more` verdicts (up to its bound), in one growth: a
 * memo grown by doubling while thousands of verdicts went in (a `ws` rule's
 * first state) cleared and rehashed every table on the way.  A failure leaves
 * it as it was. */
static void follow_reserve(const cm_grammar *g, size_t more) {
    cm_cache *c = g->cache;
    cm_follow_memo *m = follow_memo(g);
    if (!m) return;
    size_t want = m->n + more < CM_FOLLOW_MEMO_MAX ? m->n + more : CM_FOLLOW_MEMO_MAX, cap = m->cap ? m->cap : 1024;
    while (want * 2 > cap) cap *= 2;
    if (cap == m->cap) return;
    follow_slot *t = calloc(cap, sizeof *t);
    if (!t) return;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].verdict) continue;
        size_t s = m->slots[i].hash & (cap - 1);
        while (t[s].verdict) s = (s + 1) & (cap - 1);
        t[s] = m->slots[i];
    }
    free(m->slots);
    atomic_fetch_add(&c->bytes, (cap - m->cap) * sizeof *t);
    m->slots = t;
    m->cap = cap;
}

/* Keep a verdict, if the memo can hold it (a full or unallocated memo drops it). */
static void follow_put(const cm_grammar *g, uint32_t h, uint32_t rule, const uint8_t *p, uint32_t len, bool alive) {
    cm_follow_memo *m = g->cache->follow;
    if (!follow_fits(g->v, p, len)) return;
    if (!m || (m->n + 1) * 2 > m->cap) {
        if (m && m->n >= CM_FOLLOW_MEMO_MAX) return;
        follow_reserve(g, 1);
        if (!(m = g->cache->follow) || (m->n + 1) * 2 > m->cap) return;
    }
    follow_slot *x = follow_find(g->v, m, h, rule, p, len);
    if (x->verdict) return;
    *x = (follow_slot){(uint32_t)(p - g->v->trie_data), rule, h, (uint16_t)len, (uint16_t)(alive + 1)};
    m->n++;
}

/* How many times p[0] opens p[0..len). */
static uint32_t run_length(const uint8_t *p, uint32_t len) {
    uint32_t j = 1;
    while (j < len && p[j] == p[0]) j++;
    return j;
}

static follow_run *run_find(const cm_follow_memo *m, uint32_t rule, uint8_t byte) {
    size_t s = (size_t)(((uint64_t)rule << 8 | byte) * 0x9E3779B97F4A7C15ULL >> 40) & (m->runs_cap - 1);
    while (m->runs[s].byte && (m->runs[s].rule != rule || m->runs[s].byte != byte + 1u))
        s = (s + 1) & (m->runs_cap - 1);
    return &m->runs[s];
}

/* The bytes after one exit of uncertain token i (hashed to h), its verdict not known yet. */
typedef struct {
    const uint8_t *p;
    uint32_t len;
    uint32_t i;
    uint32_t h;
} follow_ask;

/* The asks in nearly sorted order, by a radix sort of their first 4 bytes
 * (qsort's compare calls cost more than the scans they save): those sharing a
 * prefix of up to 4 bytes end up together, which is all follow_answer needs
 * (any order gives the same verdicts).  0, or CM_ERR_NOMEM (asks unchanged). */
static uint32_t follow_key(const follow_ask *a) {
    uint32_t k = 0;
    for (uint32_t j = 0; j < 4; j++) k = k << 8 | (j < a->len ? a->p[j] : 0);
    return k;
}

#define FOLLOW_SORT_SMALL 64

static int follow_sort(follow_ask *ask, size_t n) {
    /* trie order often is sorted (the exits of one depth, one after another):
     * then nothing is allocated (a `ws` start's 4,302 asks) */
    size_t run = 1;
    for (uint32_t a = n ? follow_key(ask) : 0, b; run < n && a <= (b = follow_key(ask + run)); run++) a = b;
    if (run >= n) return CM_OK;
    if (n <= FOLLOW_SORT_SMALL) {
        /* a stable insertion sort by the same key: the radix sort's order (it is stable too),
         * without its four passes over 257 counts and two mallocs (a filter of a few dozen asks
         * paid ~3 K instructions for those: ~0.2 M of sp_339:36's first-use fill) */
        uint32_t key[FOLLOW_SORT_SMALL];
        for (size_t i = 0; i < n; i++) key[i] = follow_key(ask + i);
        for (size_t i = run; i < n; i++) {
            follow_ask a = ask[i];
            uint32_t k = key[i];
            size_t j = i;
            for (; j > 0 && key[j - 1] > k; j--) {
                key[j] = key[j - 1];
                ask[j] = ask[j - 1];
            }
            key[j] = k;
            ask[j] = a;
        }
        return CM_OK;
    }
    uint32_t *key = malloc(2 * n * sizeof *key);
    uint32_t *ix = malloc(2 * n * sizeof *ix);
    follow_ask *out = malloc(n * sizeof *out);
    int rc = key && ix && out ? CM_OK : CM_ERR_NOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        key[i] = follow_key(ask + i);
        ix[i] = (uint32_t)i;
    }
    uint32_t *k0 = key, *k1 = key + n;
    uint32_t *i0 = ix, *i1 = ix + n;
    for (unsigned shift = 0; !rc && shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[(k0[i] >> shift & 255) + 1]++;
        if (count[(k0[0] >> shift & 255) + 1] == n) continue;  /* one digit: the order stands */
        for (unsigned b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) {
            size_t to = count[k0[i] >> shift & 255]++;
            k1[to] = k0[i];
            i1[to] = i0[i];
        }
        uint32_t *kt = k0;
        k0 = k1;
        k1 = kt;
        uint32_t *it = i0;
        i0 = i1;
        i1 = it;
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++) out[i] = ask[i0[i]];
        memcpy(ask, out, n * sizeof *ask);
    }
    free(key);
    free(ix);
    free(out);
    return rc;
}

static atomic_size_t g_name_stop_hits;

size_t cm_walk_name_stop_hits(void) { return atomic_load(&g_name_stop_hits); }

/* State s into T (in: its bits, list: its states in order) unless there. */
static inline void stops_push(uint64_t *in, uint32_t *list, uint32_t *n, uint32_t s) {
    if (in[s >> 6] >> (s & 63) & 1) return;
    in[s >> 6] |= 1ull << (s & 63);
    list[(*n)++] = s;
}

/* The states a chart's closure adds for an item at s, over-approximated as
 * above: its calls' starts, the targets of its markers and nullable calls, and
 * if it accepts, every return state of its rule. */
static void stops_closure_of(const cm_grammar *g, uint32_t s, uint64_t *in, uint32_t *list, uint32_t *n) {
    const cm_tables *t = &g->t;
    if (t->accepting[s]) {
        uint32_t r = t->state_rule[s];
        for (uint32_t k = g->ret_off[r]; k < g->ret_off[r + 1]; k++) stops_push(in, list, n, g->ret_state[k]);
    }
    for (uint32_t e = t->ref_off[s]; e < t->ref_off[s + 1]; e++) {
        uint32_t callee = t->ref_rule[e];
        if (!t->rule_la[callee]) stops_push(in, list, n, t->rule_start[callee]);
        if (t->rule_la[callee] || t->rule_nullable[callee]) stops_push(in, list, n, t->ref_target[e]);
    }
}

static void stops_reads(const cm_grammar *g, const uint32_t *list, uint32_t from, uint32_t n, uint32_t *reads) {
    for (uint32_t i = from; i < n; i++)
        for (int j = 0; j < 8; j++) reads[j] |= g->next_bytes[(size_t)list[i] * 8 + j];
}

/* T, into in and list (its size returned): every state reachable from the
 * rule's return states through bytes of the given classes, calls, markers and
 * returns, where a completed rule returns to every state any call of it
 * returns to. */
static uint32_t stops_reach(const cm_grammar *g, uint32_t rule, const uint32_t *cls, uint32_t n_cls, uint64_t *in,
                            uint32_t *list) {
    const cm_tables *t = &g->t;
    uint32_t n = 0;
    for (uint32_t k = g->ret_off[rule]; k < g->ret_off[rule + 1]; k++) stops_push(in, list, &n, g->ret_state[k]);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = list[i];
        stops_closure_of(g, s, in, list, &n);
        if (!g->has_bytes[s]) continue;
        const int32_t *row = t->trans + (size_t)s * t->n_classes;
        for (uint32_t j = 0; j < n_cls; j++)
            if (row[cls[j]] >= 0) stops_push(in, list, &n, (uint32_t)row[cls[j]]);
    }
    return n;
}

/* The name stops of `rule`, made on first use; NULL when memory is short. */
static const name_stops *name_stops_of(const cm_grammar *g, cm_follow_memo *m, uint32_t rule) {
    const cm_tables *t = &g->t;
    if (!m->stops) {
        if (!(m->stops = calloc(t->n_rules, sizeof *m->stops))) return NULL;
        m->n_rules = t->n_rules;
        atomic_fetch_add(&g->cache->bytes, t->n_rules * sizeof *m->stops);
    }
    if (m->stops[rule]) return m->stops[rule];
    size_t nw = ((size_t)t->n_states + 63) / 64;
    uint64_t *in = calloc(2 * nw, sizeof *in), *in2 = in + nw;
    uint32_t *list = malloc(2 * (size_t)t->n_states * sizeof *list), *list2 = list + t->n_states;
    name_stops *ns = calloc(1, sizeof *ns);
    if (!in || !list || !ns) {
        free(in);
        free(list);
        free(ns);
        return NULL;
    }
    uint32_t cls[256], n_cls = 0;  /* one class a name byte's */
    bool seen[256] = {false};
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = t->byte_class[b];
        if (cm_name_byte((uint8_t)b) && !seen[c]) {
            seen[c] = true;
            cls[n_cls++] = c;
        }
    }
    uint32_t n = stops_reach(g, rule, cls, n_cls, in, list);
    stops_reads(g, list, 0, n, ns->first);
    for (unsigned x = 0x80; x < 256; x++) {
        if (!cm_bit(ns->first, x)) continue;
        uint32_t n2 = 0;
        memset(in2, 0, nw * sizeof *in2);
        for (uint32_t i = 0; i < n; i++) {
            int32_t to = g->has_bytes[list[i]] ? t->trans[(size_t)list[i] * t->n_classes + t->byte_class[x]] : -1;
            if (to >= 0) stops_push(in2, list2, &n2, (uint32_t)to);
        }
        for (uint32_t i = 0; i < n2; i++) stops_closure_of(g, list2[i], in2, list2, &n2);
        stops_reads(g, list2, 0, n2, ns->second[x - 0x80]);
    }
    free(in);
    free(list);
    atomic_fetch_add(&g->cache->bytes, sizeof *ns);
    return m->stops[rule] = ns;
}

/* Whether the name stops prove that the upward chart dies on p[0..len): its
 * first byte after a run of name bytes is one no state of T reads, or a
 * non-ASCII one followed by a byte nothing reads after it. */
static uint32_t name_run(const uint8_t *p, uint32_t len) {
    uint32_t j = 0;
    while (j < len && cm_name_byte(p[j])) j++;
    return j;
}

static bool name_stops_dead(const name_stops *ns, const uint8_t *p, uint32_t len, uint32_t *read) {
    uint32_t j = name_run(p, len);
    if (j == len) return false;
    uint8_t x = p[j];
    *read = j + 1;
    if (!cm_bit(ns->first, x)) return true;
    *read = j + 2;
    return x >= 0x80 && j + 1 < len && !cm_bit(ns->second[x - 0x80], p[j + 1]);
}

static atomic_size_t g_pair_hits;
static atomic_size_t g_lazy_held, g_lazy_inserts, g_follow_hits;

size_t cm_walk_follow_lazy_held(void) { return atomic_load(&g_lazy_held); }
size_t cm_walk_follow_lazy_inserts(void) { return atomic_load(&g_lazy_inserts); }
size_t cm_walk_follow_hits(void) { return atomic_load(&g_follow_hits); }

size_t cm_walk_filter_pair_hits(void) { return atomic_load(&g_pair_hits); }

/* A token the filter drops for bytes of its prefix alone drops every token of
 * that prefix's trie subtree (cm_walk_filter_uncertain): those are skipped, not
 * scanned.  Off, each is read on its own: the reference the tests compare against. */
static atomic_int g_subtree_skip = 1;
static atomic_size_t g_subtree_skipped;

void cm_walk_filter_skip_enable(int on) { atomic_store(&g_subtree_skip, on); }
size_t cm_walk_filter_skipped(void) { return atomic_load(&g_subtree_skipped); }

/* A name stop decides its exit by the name run after it and the byte (or two) that ends the run
 * (name_stops_dead), bytes of the token's prefix like the pair stops': an exit the name stops
 * drop leaves the token's drop to that prefix too, so a token whose every exit no pair stop
 * takes is a name stop's drops its prefix's subtree as above.  sql.lark's `qualified_name`
 * start: 2,827 uncertain names that run into a non-ASCII letter (` Am\xc3\xa9rica`), each
 * dropped by the stops.  Off (cm_walk_filter_stop_skip_enable(0)), a name stop ends the skip:
 * the reference the tests compare against. */
static atomic_int g_stop_skip = 1;
static atomic_size_t g_stop_skipped;

void cm_walk_filter_stop_skip_enable(int on) { atomic_store(&g_stop_skip, on); }
size_t cm_walk_filter_stop_skipped(void) { return atomic_load(&g_stop_skipped); }

/* A chart scan reads a byte only through its class (t->byte_class) where no lookahead debt
 * reads the byte itself (n_la <= 1) and no count is kept (has_segments: scan_counted), so two
 * byte strings of the same classes leave the same sets and exits.  The filter's charts then
 * keep the sets of the token before for the common prefix of classes, not only of bytes: at a
 * long string's block end the uncertain tokens are runs of `#`, `*`, `/`, `=`, `|` ... (one
 * class inside a JSON string), each read from its first byte before.  Off: bytes only. */
static atomic_int g_class_prefix = 1;
static atomic_size_t g_class_shared;

void cm_walk_filter_class_prefix_enable(int on) { atomic_store(&g_class_prefix, on); }
size_t cm_walk_filter_class_shared(void) { return atomic_load(&g_class_shared); }

/* The byte classes of the grammar where its charts read bytes through them alone, else NULL. */
static const uint8_t *scan_classes(const cm_grammar *g) {
    if (!atomic_load_explicit(&g_class_prefix, memory_order_relaxed) || g->t.n_la > 1 || g->has_segments) return NULL;
    return g->t.byte_class;
}

/* The common prefix of a and b by class, from d (a common prefix of them) on, but not past
 * `have` (the sets kept); the bytes it adds to d counted into *shared. */
static uint32_t class_prefix(const uint8_t *bc, const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb,
                             uint32_t d, uint32_t have, size_t *shared) {
    uint32_t m = la < lb ? la : lb, from = d;
    if (m > have) m = have;
    while (d < m && bc[a[d]] == bc[b[d]]) d++;
    *shared += d > from ? d - from : 0;
    return d;
}

/* The bytes some item of up's last set reads (next_bytes: a byte no item reads
 * is one cm_chart_scan appends no set for), into reads. */
static void set_reads(const cm_grammar *g, const cm_chart *up, uint32_t *reads) {
    size_t last = up->n_sets - 1;
    for (size_t i = up->set_start[last]; i < up->set_start[last + 1]; i++) {
        const uint32_t *nb = g->next_bytes + (size_t)cm_st(up->items[i].state) * 8;
        for (int j = 0; j < 8; j++) reads[j] |= nb[j];
    }
}

/* The pair stops of `rule` once its filters have met lim.filter_pairs rests
 * without them (counted here: `more` this call), their rows made when asked
 * (pair_second); NULL: not yet, or memory is short. */
static pair_stops *pair_stops_of(const cm_grammar *g, cm_follow_memo *m, uint32_t rule, size_t more) {
    const cm_tables *t = &g->t;
    if (!m->pairs) {
        m->pairs = calloc(t->n_rules, sizeof *m->pairs);
        m->pair_met = calloc(t->n_rules, sizeof *m->pair_met);
        if (!m->pairs || !m->pair_met) {
            free(m->pairs);
            free(m->pair_met);
            m->pairs = NULL;
            m->pair_met = NULL;
            return NULL;
        }
        m->n_pair_rules = t->n_rules;
        atomic_fetch_add(&g->cache->bytes, t->n_rules * (sizeof *m->pairs + sizeof *m->pair_met));
    }
    if (m->pairs[rule]) return m->pairs[rule];
    size_t met = m->pair_met[rule] + more;
    m->pair_met[rule] = met < UINT32_MAX ? (uint32_t)met : UINT32_MAX;
    if (met < g->lim.filter_pairs || !(m->pairs[rule] = calloc(1, sizeof *m->pairs[rule]))) return NULL;
    atomic_fetch_add(&g->cache->bytes, sizeof *m->pairs[rule]);
    return m->pairs[rule];
}

/* The memo's upward chart holding `rule`'s first set alone (made unless it is there); NULL: a
 * chart limit or memory ran out. */
static cm_chart *up_first(const cm_grammar *g, cm_follow_memo *m, uint32_t rule) {
    cm_chart *up = &m->up;
    if (m->up_rule != rule + 1) {
        m->up_rule = 0;
        if (follow_chart(g, up, &m->up_ok, true, g->ret_state + g->ret_off[rule],
                         g->ret_off[rule + 1] - g->ret_off[rule]))
            return NULL;
        m->up_rule = rule + 1;
    }
    cm_chart_truncate(up, 1);
    return up;
}

/* The bytes the upward chart of `rule` reads after the first byte x: made
 * now (one step of up, the memo's upward chart, from its first set) unless
 * made before; NULL: a chart limit or memory ran out (asked, then). */
static const uint32_t *pair_second(const cm_grammar *g, cm_follow_memo *m, pair_stops *ps, uint32_t rule,
                                   uint8_t x) {
    if (cm_bit(ps->made, x)) return ps->second[x];
    cm_chart *up = up_first(g, m, rule);
    if (!up) return NULL;
    int sc = cm_chart_scan_up(up, g, x);  /* 0: no item reads x, and every rest led by x dies on it */
    if (sc < 0) return NULL;
    if (sc > 0) set_reads(g, up, ps->second[x]);
    cm_set_bit(ps->made, x);
    return ps->second[x];
}

static atomic_int g_triples = 1;
static atomic_size_t g_triple_hits;

void cm_walk_filter_triples_enable(int on) { atomic_store(&g_triples, on); }
size_t cm_walk_filter_triple_hits(void) { return atomic_load(&g_triple_hits); }

/* A filter that meets lim.filter_pairs rests by itself needs no count of them before making its
 * rule's pair stops: one of a JSON `ws` start's 4,300 uncertain tokens (every one a rest) asked
 * its first 256 rests, ~60 of them a blank-led dash run (` -------`) that the row of `-` drops on
 * its second byte, and the rests of ` "` before the row of `"` and its triples.  Made at the
 * filter's first rest when it has lim.filter_pairs uncertain tokens or more: --limit 10's fills
 * -0.42 %; from 64 tokens on -0.55 %, but c's and sql's cold fills +0.17 %, where 256 leaves them. */
static atomic_int g_pairs_early = 1;
static atomic_size_t g_pairs_early_made;

void cm_walk_filter_pairs_early_enable(int on) { atomic_store(&g_pairs_early, on); }
size_t cm_walk_filter_pairs_early(void) { return atomic_load(&g_pairs_early_made); }

/* The bytes the upward chart of `rule` reads third after x y (y one of pair_second's bytes
 * after x): made now (two steps of up from its first set) unless made before; NULL where x's
 * second bytes are more than CM_TRIPLE_MAX_SECOND, or a chart limit or memory ran out (asked). */
static const uint32_t *pair_third(const cm_grammar *g, cm_follow_memo *m, pair_stops *ps, uint32_t rule, uint8_t x,
                                  uint8_t y) {
    uint32_t r = ps->tri_of[x];
    if (r == TRI_WIDE) return NULL;
    if (!r) {
        uint32_t pop = 0;
        for (int j = 0; j < 8; j++) pop += (uint32_t)__builtin_popcount(ps->second[x][j]);
        if (pop > CM_TRIPLE_MAX_SECOND || ps->n_tri + 1 >= TRI_WIDE ||
            (ps->n_tri == ps->cap_tri && cm_grow_to((void **)&ps->tri, &ps->cap_tri, ps->n_tri + 1, sizeof *ps->tri))) {
            ps->tri_of[x] = TRI_WIDE;
            return NULL;
        }
        memset(&ps->tri[ps->n_tri], 0, sizeof *ps->tri);
        atomic_fetch_add(&g->cache->bytes, sizeof *ps->tri);
        r = ps->tri_of[x] = (uint8_t)++ps->n_tri;
    }
    triple_row *row = &ps->tri[r - 1];
    for (uint32_t i = 0; i < row->n; i++)
        if (row->y[i] == y) return row->third[i];
    if (row->n == CM_TRIPLE_MAX_SECOND) return NULL;
    cm_chart *up = up_first(g, m, rule);
    if (!up) return NULL;
    int sc = cm_chart_scan_up(up, g, x);
    if (sc > 0) sc = cm_chart_scan_up(up, g, y);
    if (sc < 0) return NULL;
    uint32_t *third = row->third[row->n];
    memset(third, 0, sizeof row->third[0]);
    if (sc > 0) set_reads(g, up, third);  /* (0: the chart dies on x y, and every third byte with it) */
    row->y[row->n++] = y;
    return third;
}

static atomic_size_t g_run_hits;

size_t cm_walk_filter_run_hits(void) { return atomic_load(&g_run_hits); }

/* The slot of (rule, byte), made if `make` and the table has room (else NULL when absent). */
static follow_run *run_slot(const cm_grammar *g, cm_follow_memo *m, uint32_t rule, uint8_t byte, bool make) {
    if (m->n_runs) {
        follow_run *r = run_find(m, rule, byte);
        if (r->byte || !make) return r->byte ? r : NULL;
    }
    if (!make) return NULL;
    if ((m->n_runs + 1) * 2 > m->runs_cap) {
        if (m->n_runs >= CM_FOLLOW_MEMO_MAX) return NULL;
        size_t cap = m->runs_cap ? m->runs_cap * 2 : 64, old_cap = m->runs_cap;
        follow_run *t = calloc(cap, sizeof *t), *old = m->runs;
        if (!t) return NULL;
        m->runs = t;
        m->runs_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].byte) *run_find(m, old[i].rule, (uint8_t)(old[i].byte - 1)) = old[i];
        free(old);
        atomic_fetch_add(&g->cache->bytes, (cap - old_cap) * sizeof *t);
    }
    follow_run *r = run_find(m, rule, byte);
    *r = (follow_run){.rule = rule, .byte = (uint16_t)(byte + 1u)};
    m->n_runs++;
    return r;
}

/* What the run known decides about p[0..len), whose leading run of r's byte
 * is j bytes long (j >= 2): 1 the upward chart survives it, 0 it dies (inside
 * the run, or on the byte after it, which nothing reads after any run of the
 * byte), -1 not known. */
static int run_known(const follow_run *r, const uint8_t *p, uint32_t len, uint32_t j) {
    if (r->hi && j >= r->hi) return 0;
    if (j < len) return r->stops && !cm_bit(r->stops, p[j]) ? 0 : -1;
    return j <= r->lo ? 1 : -1;
}

/* Keep what reading p[0..len) (a leading run of j >= 2 bytes) through the
 * upward chart showed: it read `alive` bytes of it (len: all). */
static void run_learn(follow_run *r, uint32_t j, uint32_t len, long alive) {
    if (alive >= (long)j) {
        if (j > r->lo) r->lo = j;
        r->met += alive == (long)j && j < len;  /* what the stops would have answered */
    } else if (!r->hi || (uint32_t)alive + 1 < r->hi) {
        r->hi = (uint32_t)alive + 1;  /* the (alive + 1)-th byte of the run killed it */
    }
}

/* A run of len bytes of r's byte that up survives (its sets built for the
 * first `built`: len - 1 or len, as scan_rest left them) read on to twice that
 * (at most the longest token), kept in r: at each later position of a string
 * the rests are a few bytes longer, each a new scan from the first byte that
 * the known lo does not cover.  The bytes of the run with sets in up. */
static uint32_t run_ahead(const cm_grammar *g, cm_chart *up, follow_run *r, uint32_t len, uint32_t built) {
    uint32_t read = built, max = g->v->max_len, target = 2 * len < max ? 2 * len : max;
    int sr = 1;
    while (read < target && (sr = cm_chart_scan(up, g, (uint8_t)(r->byte - 1))) > 0) read++;
    if (sr >= 0) {  /* a failed scan (a limit) leaves up as it was, and r */
        if (read > r->lo) r->lo = read;
        if (!sr && (!r->hi || read + 1 < r->hi)) r->hi = read + 1;
    }
    return read < len ? read : len;
}

static atomic_size_t g_run_aheads_by_steps;

size_t cm_walk_run_aheads_by_steps(void) { return atomic_load(&g_run_aheads_by_steps); }

/* Whether a run the filter just read whole past r->lo (`steps` chart steps of it scanned now)
 * is read on (run_ahead): after lim.run_ahead such runs of the (rule, byte), or at once when
 * this one alone took lim.run_ahead_steps steps or more.  A long string's positions each rescan
 * a run one byte longer than the last from its first byte (Llama-3's 70-128-byte runs of spaces,
 * `-`, `#`, `=` after a block's end, a few K instructions a step through a shared block's upward
 * chart), so the 16 misses the count waits for cost more than reading on to twice the length,
 * which costs at most as many steps as this one did and then answers the longer ones. */
static bool run_ahead_now(const cm_grammar *g, follow_run *r, uint32_t steps) {
    bool counted = ++r->misses >= g->lim.run_ahead;
    if (counted || !g->lim.run_ahead_steps || steps < g->lim.run_ahead_steps) return counted;
    atomic_fetch_add(&g_run_aheads_by_steps, 1);
    return true;
}

/* The bytes that some state of T reads, where T is every state reachable
 * from the rule's return states through r's byte, calls, markers and returns
 * (stops_reach): after any run of the byte, the upward chart's items are at
 * states of T, as after a name for the name stops.  A JSON string's block
 * rule: the string's characters and its quote, not the newline that ends
 * Llama-3's `#####...#\n`.  Kept in r; false when memory is short. */
static bool run_stops_of(const cm_grammar *g, uint32_t rule, follow_run *r) {
    const cm_tables *t = &g->t;
    size_t nw = ((size_t)t->n_states + 63) / 64;
    uint64_t *in = calloc(nw, sizeof *in);
    uint32_t *list = malloc((size_t)t->n_states * sizeof *list);
    uint32_t *stops = calloc(8, sizeof *stops);
    uint32_t cls = t->byte_class[r->byte - 1];
    if (!in || !list || !stops) {
        free(in);
        free(list);
        free(stops);
        return false;
    }
    uint32_t n = stops_reach(g, rule, &cls, 1, in, list);
    stops_reads(g, list, 0, n, stops);
    free(in);
    free(list);
    atomic_fetch_add(&g->cache->bytes, 8 * sizeof *stops);
    r->stops = stops;
    return true;
}

/* The rests a wrapping block position's filter is sure to drop (issue 12, session 41, helper
 * `rest41`).  A string start's rests that the blocks in a row do not keep (wrap_sure) are
 * Llama-3's long runs that end on a raw newline (spaces, `-`, `/`, `*`, 49-128 bytes): each
 * was read through the item chart to the block's end and then through the upward chart of
 * every string property's count states until it died on the newline.  A rest's lead: its
 * bytes before the first one the block's start does not read (a unit's first bytes), and
 * X, the bytes of some leads.  The region of (rule, X): T, every state reachable from the
 * rule's return states through bytes of X's classes, calls, markers and returns (stops_reach,
 * as the run stops), and the bytes some state of T reads; one made for the leads of a
 * position's rests that no kept region holds (X: their union), kept in the memo.
 * Where `state` is in T, the filter's item chart (from `state`) and its upward charts (from
 * the return states, after any exit inside the lead) stand at states of T while they read the
 * lead: the byte after it, read by no state of T, kills every one of them, and the filter
 * would drop the rest.  Off: cm_walk_drop_dead_enable(0), every rest asked (the reference
 * the tests compare). */
static atomic_int g_drop_dead = 1;
static atomic_size_t g_dead_dropped;

void cm_walk_drop_dead_enable(int on) { atomic_store(&g_drop_dead, on); }

size_t cm_walk_dead_dropped(void) { return atomic_load(&g_dead_dropped); }

#define CM_REGIONS_MAX 16 /* regions kept a rule, at most */

/* The first region of `rule` whose bytes hold all of `bytes` (NULL: none). */
static const wrap_region *region_over(const cm_follow_memo *m, uint32_t rule, const uint32_t *bytes) {
    if (!m->regions || rule >= m->n_region_rules) return NULL;
    for (const wrap_region *x = m->regions[rule]; x; x = x->next) {
        int w = 0;
        while (w < 8 && !(bytes[w] & ~x->bytes[w])) w++;
        if (w == 8) return x;
    }
    return NULL;
}

/* The region of (rule, bytes) made and kept (CM_REGIONS_MAX a rule at most); false when it
 * is not (memory, or the rule has as many). */
static bool region_make(const cm_grammar *g, cm_follow_memo *m, uint32_t rule, const uint32_t *bytes) {
    const cm_tables *t = &g->t;
    if (!m->regions) {
        if (!(m->regions = calloc(t->n_rules ? t->n_rules : 1, sizeof *m->regions))) return false;
        m->n_region_rules = t->n_rules;
        atomic_fetch_add(&g->cache->bytes, t->n_rules * sizeof *m->regions);
    }
    if (rule >= m->n_region_rules) return false;
    uint32_t n_kept = 0;
    for (const wrap_region *x = m->regions[rule]; x; x = x->next) n_kept++;
    if (n_kept >= CM_REGIONS_MAX) return false;
    size_t nw = ((size_t)t->n_states + 63) / 64;
    wrap_region *r = calloc(1, sizeof *r);
    uint64_t *in = calloc(nw ? nw : 1, sizeof *in);
    uint32_t *list = malloc((t->n_states ? t->n_states : 1) * sizeof *list), cls[256], n_cls = 0;
    if (!r || !in || !list) {
        free(r);
        free(in);
        free(list);
        return false;
    }
    bool seen[256] = {false};
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = t->byte_class[b];
        if (cm_bit(bytes, b) && !seen[c]) seen[c] = true, cls[n_cls++] = c;
    }
    memcpy(r->bytes, bytes, sizeof r->bytes);
    stops_reads(g, list, 0, stops_reach(g, rule, cls, n_cls, in, list), r->reads);
    free(list);
    r->in = in;
    r->next = m->regions[rule];
    m->regions[rule] = r;
    atomic_fetch_add(&g->cache->bytes, sizeof *r + nw * sizeof *in);
    return true;
}

/* Rest p[0 .. len)'s lead (the bytes before the first that `first` lacks) into lead; its length.
 * (A byte equal to the one before is in already: Llama-3's rests are mostly runs.) */
static uint32_t rest_lead(const uint32_t *first, const uint8_t *p, uint32_t len, uint32_t *lead) {
    uint32_t j = 0;
    int prev = -1;
    memset(lead, 0, 8 * sizeof *lead);
    for (; j < len; j++) {
        if (p[j] == prev) continue;
        if (!cm_bit(first, p[j])) break;
        cm_set_bit(lead, p[j]);
        prev = p[j];
    }
    return j;
}

size_t cm_walk_drop_dead(const cm_grammar *g, uint32_t state, uint32_t *ks, size_t n) {
    const cm_tables *t = &g->t;
    uint32_t rule = t->state_rule[state], start = t->rule_start[rule];
    if (!n || t->n_la > 1 || !g->has_bytes[start] || !atomic_load_explicit(&g_drop_dead, memory_order_relaxed))
        return n;
    cm_follow_memo *m = follow_memo(g);
    if (!m) return n;
    /* each rest's lead read once (its end in at[i], UINT32_MAX: the whole rest), and a region
     * looked up once for a run of rests of one lead (trie order: neighbours share theirs) */
    uint32_t *at = malloc(n * sizeof *at), (*leads)[8] = malloc(n * sizeof *leads);
    if (!at || !leads) {
        free(at);
        free(leads);
        return n;  /* (none dropped: the filter asks them) */
    }
    const uint32_t *first = g->next_bytes + (size_t)start * 8, *prev = NULL;
    uint32_t all[8] = {0}, len;
    bool any = false, held = false;
    for (size_t i = 0; i < n; i++) {  /* the leads no region holds: one region for all of them */
        const uint8_t *p = cm_trie_bytes(g->v, ks[i], &len);
        uint32_t j = rest_lead(first, p, len, leads[i]);
        at[i] = j < len ? j : UINT32_MAX;
        if (j == len) continue;
        if (!prev || memcmp(prev, leads[i], sizeof leads[i])) held = region_over(m, rule, leads[i]) != NULL;
        prev = leads[i];
        if (held) continue;
        for (int w = 0; w < 8; w++) all[w] |= leads[i][w];
        any = true;
    }
    if (any) region_make(g, m, rule, all);
    size_t o = 0;
    const wrap_region *r = NULL;
    prev = NULL;
    for (size_t i = 0; i < n; i++) {
        if (at[i] != UINT32_MAX) {
            if (!prev || memcmp(prev, leads[i], sizeof leads[i])) r = region_over(m, rule, leads[i]);
            prev = leads[i];
            const uint8_t *p = cm_trie_bytes(g->v, ks[i], &len);
            if (r && r->in[state >> 6] >> (state & 63) & 1 && !cm_bit(r->reads, p[at[i]])) continue;
        }
        ks[o++] = ks[i];
    }
    free(at);
    free(leads);
    if (o < n) atomic_fetch_add(&g_dead_dropped, n - o);
    return o;
}

/* The questions (sorted) through the upward chart of `rule`: consecutive ones
 * share the sets of their common prefix, and one that holds the byte its
 * predecessor died on dies there too.  Each verdict goes to the memo (as
 * vrule's: verdict_rule), and a surviving one keeps its token.  0, or < 0 on error. */
static int follow_answer(const cm_grammar *g, uint32_t rule, uint32_t vrule, const follow_ask *q, size_t n,
                         uint8_t *keep, size_t *run_hits, follow_held *held) {
    cm_follow_memo *m = follow_memo(g);
    if (!m) return CM_ERR_NOMEM;
    cm_chart *up = &m->up;
    /* its first set is the rule's already when the last filter's asks (a chain's positions ask
     * about the same rule 100-200 times a mask) or pair_second left it so: not closed again */
    int rc = CM_OK;
    if (m->up_rule == rule + 1) cm_chart_truncate(up, 1);
    else rc = follow_chart(g, up, &m->up_ok, true, g->ret_state + g->ret_off[rule],
                           g->ret_off[rule + 1] - g->ret_off[rule]);
    m->up_rule = rc ? 0 : rule + 1;  /* (its first set: what pair_second reads) */
    bool runs_on = g->lim.filter_runs != 0;
    const uint8_t *prev = NULL, *bc = scan_classes(g);
    uint32_t plen = 0, have = 0;  /* prev[0..have) has sets in up */
    bool died = false;            /* prev died on prev[have] */
    size_t shared = 0;
    for (size_t j = 0; !rc && j < n; j++) {
        if (keep[q[j].i]) continue;
        const uint8_t *p = q[j].p;
        uint32_t len = q[j].len, d = prev ? cm_common_prefix(prev, plen, p, len) : 0, d_bytes = d;
        if (prev && bc) d = class_prefix(bc, prev, plen, p, len, d, died ? have + 1 : have, &shared);
        int ok;
        if (prev && died && d > have) {
            ok = 0;  /* reads the byte prev died on */
        } else {
            /* (a read-ahead is due by the bytes past the byte prefix: as without the classes) */
            uint32_t from = d < have ? d : have, from_bytes = d_bytes < have ? d_bytes : have, run = runs_on && len > 1 && p[1] == p[0] ? run_length(p, len) : 0;
            /* the runs known answer a run when that saves at least
             * lim.filter_runs steps: scanning one or two more bytes keeps the
             * sets the next ask (sorted, often the run one byte longer) shares */
            follow_run *r = run ? run_slot(g, m, rule, p[0], true) : NULL;
            ok = r && len - from >= g->lim.filter_runs ? run_known(r, p, len, run) : -1;
            if (ok >= 0) {
                (*run_hits)++;
            } else {
                long alive = scan_rest(up, g, p, from, len, NULL, &have);
                if (alive < 0) {
                    rc = (int)alive;
                    break;
                }
                prev = p;
                plen = len;
                died = alive < len;
                ok = alive == len;
                if (r) run_learn(r, run, len, alive);
                if (r && ok && run == len && g->lim.run_ahead && run_ahead_now(g, r, len - from_bytes))
                    have = run_ahead(g, up, r, len, have);
            }
        }
        if (!held) follow_put(g, q[j].h, vrule, p, len, ok);
        else if (follow_fits(g->v, p, len))
            held->v[held->n++] = (follow_verdict){(uint32_t)(p - g->v->trie_data), (uint16_t)len, (uint16_t)ok};
        if (ok) keep[q[j].i] = 1;
    }
    if (shared) atomic_fetch_add(&g_class_shared, shared);
    return rc;
}

/* The lazy memo's state of `rule`, its arrays made on first use: 2 (ask the
 * memo and put every verdict) when lim.lazy_follow is off or memory is short.
 * A rule's held verdicts are hashed into the memo here when a second filter of
 * the rule comes (1 -> 2). */
static uint8_t follow_lazy_state(const cm_grammar *g, cm_follow_memo *m, uint32_t rule) {
    if (!g->lim.lazy_follow) return 2;
    if (!m->lazy) {
        uint32_t n = g->t.n_rules;
        m->lazy = calloc(n ? n : 1, sizeof *m->lazy);
        m->held = calloc(n ? n : 1, sizeof *m->held);
        if (!m->lazy || !m->held) {
            free(m->lazy);
            free(m->held);
            m->lazy = NULL;
            m->held = NULL;
            return 2;
        }
        m->n_lazy_rules = n;
        atomic_fetch_add(&g->cache->bytes, n * (sizeof *m->lazy + sizeof *m->held));
    }
    if (rule >= m->n_lazy_rules) return 2;
    if (m->lazy[rule] == 1) {
        follow_held *h = m->held[rule];
        size_t n = h ? h->n : 0;
        if (n) follow_reserve(g, n);
        for (size_t i = 0; i < n; i++) {
            const uint8_t *p = g->v->trie_data + h->v[i].off;
            follow_put(g, follow_hash(rule, p, h->v[i].len), rule, p, h->v[i].len, h->v[i].alive != 0);
        }
        if (n) atomic_fetch_add(&g_lazy_inserts, n);
        if (h) atomic_fetch_sub(&g->cache->bytes, sizeof *h + h->n * sizeof *h->v);
        free(h);
        m->held[rule] = NULL;
        m->lazy[rule] = 2;
    }
    return m->lazy[rule];
}

/* Verdicts shared between rules whose upward charts read alike (issue 12, session 45, helper
 * `lark45`).  A rest's verdict is the upward chart's, and that chart's first set is the closure
 * of the rule's return states.  Of that set only two kinds of item act after it: one whose state
 * reads bytes (or tokens) makes the next set's kernel, and one whose state calls a rule is a
 * waiter that a callee begun in the set and completed later advances; an item of neither kind
 * (a state that only completes: `?unary: primary` after primary) did all it does while the set
 * was closed.  So two rules whose first sets hold the same items of those kinds make the same
 * later sets on every rest, and the same verdicts: the second rule's filters read and keep
 * the first one's (the memo, the lazy memo's held verdicts), by that rule's number.  sql.lark's
 * expression chain, where a level's rule only ends a rule of the level above (`?expr: or_expr`,
 * `?not_expr: ... | predicate`, `?unary: ... | primary`), asks 139-182 rests a level through
 * an upward chart of 55-69 such items; three of its nine levels are alike another.  The key is
 * made from the chart the rule's first ask or lookup makes anyway (its asks read that chart;
 * only the memo's entries change hands), hashed as a sum, compared whole when the hashes agree.
 * Off: each rule its own verdicts, the reference the tests compare against. */
static atomic_int g_verdict_share = 1;
static atomic_size_t g_verdict_shared;

void cm_walk_verdict_share_enable(int on) { atomic_store(&g_verdict_share, on); }
size_t cm_walk_verdict_shared(void) { return atomic_load(&g_verdict_shared); }

/* A first set of more items than this is not keyed: its rule keeps its own verdicts (a JSON
 * schema's `ws` rules' upward charts hold hundreds to thousands of items; keying every rule cost
 * the 56 first documents' fills +0.07 %, sp_333:16's `ws` filter +33 K). */
#define CM_SHARE_ITEMS_MAX 192

static int u64_order(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether a and b (n items each, no item twice in either) hold the same items: sorted, in place
 * (asked only when the two hashes agree, once a rule that shares). */
static bool same_items(uint64_t *a, uint64_t *b, uint32_t n) {
    qsort(a, n, sizeof *a, u64_order);
    qsort(b, n, sizeof *b, u64_order);
    return !memcmp(a, b, n * sizeof *a);
}

/* The rule whose verdicts `rule`'s filters read and keep: an earlier rule whose upward chart's
 * first set holds the same acting items, else `rule` (also when off, or memory or a limit ran
 * out: then the rule's own verdicts, as before).  Leaves m->up holding rule's first set. */
static uint32_t verdict_rule(const cm_grammar *g, cm_follow_memo *m, uint32_t rule) {
    const cm_tables *t = &g->t;
    if (!atomic_load_explicit(&g_verdict_share, memory_order_relaxed)) return rule;
    if (!m->vrule) {
        if (!(m->vrule = calloc(t->n_rules ? t->n_rules : 1, sizeof *m->vrule))) return rule;
        m->n_vrule_rules = t->n_rules;
        atomic_fetch_add(&g->cache->bytes, t->n_rules * sizeof *m->vrule);
    }
    if (rule >= m->n_vrule_rules) return rule;
    if (m->vrule[rule]) return m->vrule[rule] - 1;
    cm_chart *up = &m->up;
    if (m->up_rule != rule + 1) {
        m->up_rule = 0;
        if (follow_chart(g, up, &m->up_ok, true, g->ret_state + g->ret_off[rule], g->ret_off[rule + 1] - g->ret_off[rule]))
            return rule;  /* (not kept: a later filter tries again) */
        m->up_rule = rule + 1;
    }
    size_t lo = up->set_start[0], hi = up->set_start[1];
    if (hi - lo > CM_SHARE_ITEMS_MAX) {  /* (a `ws` rule's thousands: its own verdicts, unkeyed) */
        m->vrule[rule] = rule + 1;
        return rule;
    }
    up_class *x = malloc(sizeof *x + (hi > lo ? hi - lo : 1) * sizeof *x->items);
    if (!x) return rule;
    uint32_t n = 0;
    for (size_t i = lo; i < hi; i++) {
        cm_item it = up->items[i];
        uint32_t st = cm_st(it.state);
        if (!g->has_bytes[st] && !g->has_tokens[st] && t->ref_off[st] == t->ref_off[st + 1]) continue;
        x->items[n++] = (uint64_t)it.state << 32 | it.origin;
    }
    uint64_t h = n;  /* a sum: the items' order does not count */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t k = (x->items[i] ^ (x->items[i] >> 31)) * 0x9E3779B97F4A7C15ULL;
        h += k ^ (k >> 29);
    }
    for (up_class *y = m->classes; y; y = y->next) {
        if (y->hash != h || y->n != n || !same_items(y->items, x->items, n)) continue;
        free(x);
        m->vrule[rule] = y->rule + 1;
        atomic_fetch_add(&g_verdict_shared, 1);
        return y->rule;
    }
    *x = (up_class){.next = m->classes, .hash = h, .rule = rule, .n = n};
    m->classes = x;
    atomic_fetch_add(&g->cache->bytes, sizeof *x + (hi > lo ? hi - lo : 1) * sizeof *x->items);
    m->vrule[rule] = rule + 1;
    return rule;
}

/* The filter's vr (verdict_rule) and its lazy state (follow_lazy_state), out of the loop's line. */
static __attribute__((noinline)) uint8_t verdict_lazy(const cm_grammar *g, cm_follow_memo *m, uint32_t rule,
                                                      uint32_t *vr) {
    *vr = verdict_rule(g, m, rule);
    return follow_lazy_state(g, m, *vr);
}

/* The common prefix of trie entries a and b (bytes pa, pb): from the trie's
 * prefix lengths when b follows a closely (the uncertain tokens of a `ws`
 * start, ` "...`, are a run of the trie), else by comparing bytes. */
static uint32_t trie_prefix(const cm_vocab *v, uint32_t a, uint32_t b, const uint8_t *pa, uint32_t la,
                            const uint8_t *pb, uint32_t lb) {
    if (a >= b || b - a > 8) return cm_common_prefix(pa, la, pb, lb);
    uint32_t d = v->trie_lcp[b];
    for (uint32_t j = a + 1; j < b; j++)
        if (v->trie_lcp[j] < d) d = v->trie_lcp[j];
    return d;
}

/* Verdicts shared by the rests' first byte (issue 12, session 46, helper `gx46`).  A rest's
 * verdict is its run through the upward chart of the rule, whose first set S0 is the closure of
 * the rule's return states.  Scanning the rest's first byte b makes the next set's kernel: the
 * items of S0 that read b, advanced.  When every such item has origin CM_OUTER (none is a callee
 * predicted in S0, origin 0), nothing the chart does after S0 reads S0 again: a set's closure
 * reads S0 only to complete an item of origin 0 (its waiters there), and no item of origin 0
 * lives past S0 (it would descend from a kernel item of origin 0); an upward completion adds
 * return states whatever the set.  So the chart from the second set on, and the verdict, are a
 * function of the kernel (its states, all of origin CM_OUTER) and the rest's later bytes: two
 * rules whose kernels on b are the same share the verdict on every rest led by b.  An expression
 * chain's levels ask the same rests (`)`, `);\n`, `,`, `]`) at each level: a level's upward first
 * set is the one above's plus its own operator's items, which do not read `)`, so their kernels
 * on `)` are one kernel, and each level's filter reads the level below's verdicts.  An empty
 * kernel kills every rest led by b at once.  Keyed in the memo by the kernel's class number
 * (above the rules' numbers, so no rule's own verdicts meet them).  Not with lookahead debts (a
 * completion passes the debt: the kernel would need it) or counted segments.  Off: every rest
 * by its rule, the reference the tests compare against. */
static atomic_int g_kern_share = 1;
static atomic_size_t g_kern_shared, g_kern_dead;

void cm_walk_kern_share_enable(int on) { atomic_store(&g_kern_share, on); }
void cm_walk_kern_counts(size_t *shared, size_t *dead) {
    *shared = atomic_load(&g_kern_shared);
    *dead = atomic_load(&g_kern_dead);
}

#define CM_KERN_BUCKETS 64
/* A filter of more uncertain tokens than this keeps its rule's own (lazy) verdicts: a JSON `ws`
 * rule's first state asks thousands of rests, which the lazy memo holds unhashed.  And a filter
 * asks at most CM_KERN_MAX_ASKS rests by their kernels (each hashed and put in the memo at once,
 * where the rule's own are held unhashed until a second filter of the rule comes): the rest by
 * the rule.  A JSON string chain's position asks thousands of rests of a kernel no other rule
 * meets (sp_333:210: +0.2 M put, sorted and rehashed); c.gbnf's levels ask at most 179. */
#define CM_KERN_MAX_REST 1024
#define CM_KERN_MAX_ASKS 256
/* Only rules whose kernels other rules are likely to meet are keyed (session 47, cx47): a level of
 * an expression ladder is called from a few places (c.gbnf's: 1-10 return states) and its upward
 * first set reads every looser level's operators (10-31 CM_OUTER byte readers), while the first
 * documents' JSON rules keyed 112 rules for 10 shared kernels (of 1-5 states), their kernels and
 * per-rest keys costing the fills +0.24 %: a rule of more return states (a JSON value's 16-85) or
 * fewer CM_OUTER readers keeps its own verdicts. */
#define CM_KERN_MAX_RETURNS 10
#define CM_KERN_MIN_OUTER 10
#define CM_KERN_OWN 0u  /* the rule's own verdicts (an item of origin 0 reads the byte) */
#define CM_KERN_DEAD 1u /* no item of S0 reads the byte: every rest led by it dies there */

/* A rule's upward first set as the kernels read it: the states of its CM_OUTER items that read
 * bytes, and per byte class whether an item of another origin reads it (own) and the class key
 * found (0: not yet; else the key + 1). */
typedef struct kern_rule {
    uint32_t n;
    uint32_t *states;  /* [n] */
    uint8_t *near;     /* [n_classes]: read by an item of origin 0 */
    uint32_t *key;     /* [n_classes] */
} kern_rule;

typedef struct kern_class {
    struct kern_class *next;
    uint64_t hash;
    uint32_t id, n;
    uint32_t rule;     /* the first rule that met it */
    bool shared;       /* another rule met it too */
    uint32_t st[];     /* the kernel's states, sorted */
} kern_class;

/* a rule whose upward first set is too big to key (CM_SHARE_ITEMS_MAX): its own verdicts */
static kern_rule g_kern_none;

static void kern_free(cm_follow_memo *m) {
    if (m->kern)
        for (uint32_t r = 0; r < m->n_kern_rules; r++) {
            if (!m->kern[r] || m->kern[r] == &g_kern_none) continue;
            free(m->kern[r]->states);
            free(m->kern[r]->near);
            free(m->kern[r]->key);
            free(m->kern[r]);
        }
    free(m->kern);
    if (m->kbucket)
        for (uint32_t b = 0; b < CM_KERN_BUCKETS; b++)
            for (kern_class *x = m->kbucket[b], *nx; x; x = nx) {
                nx = x->next;
                free(x);
            }
    free(m->kbucket);
    free(m->kby_id);
}

/* Does the grammar allow kernel keys (no debts, no counts), and is it on? */
static bool kern_applies(const cm_grammar *g) {
    return atomic_load_explicit(&g_kern_share, memory_order_relaxed) && !g->has_segments && g->t.n_la <= 1;
}

/* rule's kern_rule, made from its upward first set (made in m->up if it is not there: the rule's
 * asks or verdict_rule would make it anyway); NULL: memory or a chart limit ran out. */
static __attribute__((noinline)) kern_rule *kern_rule_of(const cm_grammar *g, cm_follow_memo *m, uint32_t rule) {
    const cm_tables *t = &g->t;
    if (!m->kern) {
        if (!(m->kern = calloc(t->n_rules ? t->n_rules : 1, sizeof *m->kern))) return NULL;
        m->n_kern_rules = t->n_rules;
        atomic_fetch_add(&g->cache->bytes, t->n_rules * sizeof *m->kern);
    }
    if (rule >= m->n_kern_rules) return NULL;
    if (m->kern[rule]) return m->kern[rule] != &g_kern_none ? m->kern[rule] : NULL;
    cm_chart *up = &m->up;
    if (m->up_rule != rule + 1) {
        m->up_rule = 0;
        if (follow_chart(g, up, &m->up_ok, true, g->ret_state + g->ret_off[rule], g->ret_off[rule + 1] - g->ret_off[rule]))
            return NULL;
        m->up_rule = rule + 1;
    }
    size_t lo = up->set_start[0], hi = up->set_start[1];
    if (hi - lo > CM_SHARE_ITEMS_MAX || g->ret_off[rule + 1] - g->ret_off[rule] > CM_KERN_MAX_RETURNS) {
        m->kern[rule] = &g_kern_none;  /* (a JSON `ws` rule's hundreds: its own, held lazily) */
        return NULL;
    }
    uint32_t outer = 0;  /* (the rule's CM_OUTER byte readers: k->n below) */
    for (size_t i = lo; i < hi; i++) outer += up->items[i].origin == CM_OUTER && g->has_bytes[cm_st(up->items[i].state)];
    if (outer < CM_KERN_MIN_OUTER) {
        m->kern[rule] = &g_kern_none;
        return NULL;
    }
    kern_rule *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->states = malloc((hi > lo ? hi - lo : 1) * sizeof *k->states);
    k->near = calloc(t->n_classes ? t->n_classes : 1, 1);
    k->key = calloc(t->n_classes ? t->n_classes : 1, sizeof *k->key);
    if (!k->states || !k->near || !k->key) {
        free(k->states);
        free(k->near);
        free(k->key);
        free(k);
        return NULL;
    }
    for (size_t i = lo; i < hi; i++) {
        cm_item it = up->items[i];
        uint32_t st = cm_st(it.state);
        if (!g->has_bytes[st]) continue;
        if (it.origin == CM_OUTER) {
            k->states[k->n++] = st;
            continue;
        }
        const int32_t *row = t->trans + (size_t)st * t->n_classes;
        for (uint32_t c = 0; c < t->n_classes; c++)
            if (row[c] >= 0) k->near[c] = 1;
    }
    atomic_fetch_add(&g->cache->bytes, sizeof *k + k->n * sizeof *k->states + t->n_classes * (1 + sizeof *k->key));
    m->kern[rule] = k;
    return k;
}

static int u32_order(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The memo key of rule's rests led by byte b: CM_KERN_OWN (the rule's own verdicts), CM_KERN_DEAD,
 * or the class of their kernel (t->n_rules + 2 + its number). */
static __attribute__((noinline)) uint32_t kern_key_make(const cm_grammar *g, cm_follow_memo *m, kern_rule *k,
                                                        uint32_t rule, uint32_t cls) {
    const cm_tables *t = &g->t;
    if (k->near[cls]) return k->key[cls] = CM_KERN_OWN + 1, CM_KERN_OWN;
    uint32_t stack[256], *st = k->n <= 256 ? stack : malloc(k->n * sizeof *st), n = 0;
    if (!st) return CM_KERN_OWN;  /* (not kept: asked again) */
    for (uint32_t i = 0; i < k->n; i++) {
        int32_t nx = t->trans[(size_t)k->states[i] * t->n_classes + cls];
        if (nx >= 0) st[n++] = (uint32_t)nx;
    }
    uint32_t key = CM_KERN_OWN;
    if (!n) {
        key = CM_KERN_DEAD;
        goto done;
    }
    if (n <= 32) {  /* (a few states: qsort's calls cost more than an insertion sort) */
        for (uint32_t i = 1; i < n; i++) {
            uint32_t x = st[i], j = i;
            for (; j > 0 && st[j - 1] > x; j--) st[j] = st[j - 1];
            st[j] = x;
        }
    } else {
        qsort(st, n, sizeof *st, u32_order);
    }
    uint32_t u = 1;
    for (uint32_t i = 1; i < n; i++)
        if (st[i] != st[u - 1]) st[u++] = st[i];
    n = u;
    uint64_t h = 1469598103934665603ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ st[i]) * 1099511628211ull;
    if (!m->kbucket && !(m->kbucket = calloc(CM_KERN_BUCKETS, sizeof *m->kbucket))) goto done;
    kern_class **b = &m->kbucket[h % CM_KERN_BUCKETS];
    for (kern_class *x = *b; x; x = x->next)
        if (x->hash == h && x->n == n && !memcmp(x->st, st, n * sizeof *st)) {
            if (x->rule != rule) x->shared = true;
            key = t->n_rules + 2 + x->id;
            goto done;
        }
    if (m->n_kclasses == m->cap_kclasses &&
        cm_grow_to((void **)&m->kby_id, &m->cap_kclasses, m->n_kclasses + 1, sizeof *m->kby_id))
        goto done;
    kern_class *x = malloc(sizeof *x + n * sizeof *st);
    if (!x) goto done;
    *x = (kern_class){.next = *b, .hash = h, .id = m->n_kclasses, .n = n, .rule = rule};
    m->kby_id[m->n_kclasses++] = x;
    memcpy(x->st, st, n * sizeof *st);
    *b = x;
    atomic_fetch_add(&g->cache->bytes, sizeof *x + n * sizeof *st);
    key = t->n_rules + 2 + x->id;
done:
    if (st != stack) free(st);
    k->key[cls] = key + 1;
    return key;
}

static inline uint32_t kern_key(const cm_grammar *g, cm_follow_memo *m, kern_rule *k, uint32_t rule, uint8_t b) {
    uint32_t cls = g->t.byte_class[b], key = k->key[cls];
    return key ? key - 1 : kern_key_make(g, m, k, rule, cls);
}

/* Whether a kernel key is worth its memo puts: only once a second rule has met the kernel.  The
 * first rule's rests go by the rule (its verdicts held unhashed by the lazy memo, as without the
 * keys: a JSON string chain's positions meet kernels no other rule meets, and putting their
 * thousands of rests cost sp_333:210 +0.15 M); from the second on, by the kernel. */
static inline bool kern_shared(const cm_grammar *g, const cm_follow_memo *m, uint32_t key) {
    return m->kby_id[key - g->t.n_rules - 2]->shared;  /* (key: a class's, above CM_KERN_DEAD) */
}

/* The asks keyed by kernels (kern_key of their first byte), sorted, answered through rule's
 * upward chart a run of one key at a time, each verdict put under its key. */
static __attribute__((noinline)) int kern_answer(const cm_grammar *g, cm_follow_memo *m, uint32_t rule, kern_rule *k,
                                                 follow_ask *q, size_t n, uint8_t *keep, size_t *run_hits) {
    follow_reserve(g, n);
    int rc = follow_sort(q, n);
    for (size_t j = 0; !rc && j < n;) {
        uint32_t key = kern_key(g, m, k, rule, q[j].p[0]);
        size_t e = j + 1;
        while (e < n && kern_key(g, m, k, rule, q[e].p[0]) == key) e++;
        rc = follow_answer(g, rule, key, q + j, e - j, keep, run_hits, NULL);
        j = e;
    }
    return rc;
}

/* A token is uncertain because the item's rule may complete inside it, at some
 * depth d >= 1 with the next byte in FOLLOW; from there on only the rule's
 * callers read it.  The rule's upward chart (every return state, each
 * returning again when its own rule completes: cm_chart_init_returns)
 * over-approximates every real continuation, so if it dies on the token's rest
 * after every such d, the real chart dies too.  FOLLOW only looks at the next
 * byte; this reads them all (after a Lark NAME, " B\xe1\xba\xa1n" leaves the
 * name, starts a Unicode space, and cannot go on).  First every token through
 * the item's chart, asking the memo about the rest after each exit; then the
 * rests it does not know, sorted, through the upward chart (a sorted rest
 * shares most of its bytes with the one before).  Any failure keeps the
 * tokens: the filter only saves run-time checks. */
void cm_walk_filter_uncertain(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_vocab *v = g->v;
    uint8_t *ex = w->ex;
    uint32_t rule = g->t.state_rule[state];
    size_t n = w->n_unc, n_ask = 0, cap_ask = 0;
    uint8_t *keep = calloc(n ? n : 1, 1);
    follow_ask *ask = NULL;
    cm_follow_memo *m = follow_memo(g);
    /* most uncertain tokens ask about one rest: room for that many at once */
    if (!keep || !m || cm_grow_to((void **)&ask, &cap_ask, n ? n : 1, sizeof *ask)) {
        free(keep);
        free(ask);
        return;
    }
    cm_chart *c = &m->item;
    int rc = item_chart(g, m, state);
    /* The name stops answer a name's rests at once, made once a filter meets
     * enough rests that stop on a non-ASCII byte after a name (what they
     * decide best; making them costs a pass over the states, ~0.2 M
     * instructions in sql.lark), then kept for the rule's later filters. */
    bool stops_on = g->lim.name_stops != 0;
    const name_stops *ns = stops_on && m->stops ? m->stops[rule] : NULL;
    size_t stopped = 0, non_ascii = 0, run_hits = 0;
    bool runs_on = g->lim.filter_runs != 0;
    size_t stops_after = runs_on ? g->lim.run_stops : 0;
    /* the pair stops, once made for the rule; until then the rests they would have read are counted */
    pair_stops *ps = m->pairs ? m->pairs[rule] : NULL;
    /* no verdict of the rule in the memo yet (lazy 0): nothing to look up, and this filter's
     * verdicts are held unhashed until a second filter of the rule comes; both by vr, the rule
     * whose verdicts this one shares (verdict_rule), found at the first rest that needs them */
    uint8_t lazy = 0;
    uint32_t vr = rule;
    bool vr_known = false;
    size_t memo_hits = 0;
    /* the rests keyed by their first byte's kernel (kern_key): asked apart, after the others */
    bool kern_on = n <= CM_KERN_MAX_REST && kern_applies(g);
    kern_rule *kr = NULL;
    follow_ask *kask = NULL;
    size_t n_kask = 0, cap_kask = 0, kern_hits = 0, kern_dead = 0;
    bool triples_on = atomic_load_explicit(&g_triples, memory_order_relaxed) != 0;
    size_t tripled = 0;
    size_t pair_met = 0, paired = 0, pair_batch = g->lim.filter_pairs < 64 ? g->lim.filter_pairs : 64;
    /* (at least lim.filter_pairs tokens: the rule's pair stops at its first rest) */
    bool pairs_early = !ps && n >= g->lim.filter_pairs && atomic_load_explicit(&g_pairs_early, memory_order_relaxed);
    const uint8_t *prev = NULL;
    uint32_t prev_k = 0, plen = 0, have = 0;  /* bytes of prev with sets in c (and in ex) */
    bool died = false;                        /* prev died on prev[have] */
    bool skip_on = atomic_load_explicit(&g_subtree_skip, memory_order_relaxed) != 0;
    bool stop_skip = skip_on && atomic_load_explicit(&g_stop_skip, memory_order_relaxed) != 0;
    size_t skipped = 0, class_shared = 0, stop_skipped = 0;
    const uint8_t *bc = scan_classes(g);
    /* the walk's own scans of its tokens through the same chart (cm_walk_listed_noted), in
     * trie order as the tokens are */
    const cm_scan_note *note = w->n_notes && n ? w->notes : NULL, *note_end = note ? w->notes + w->n_notes : NULL;
    size_t noted = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        uint32_t k = w->unc[i], len;
        const uint8_t *p = cm_trie_bytes(v, k, &len), *exv = ex;
        while (note && note < note_end && note->k_end <= k) note++;
        long dead = have;
        if (note && note < note_end && note->k <= k && note->dead < len) {
            /* its scan is kept: the chart's sets for prev stay as they are */
            dead = note->dead;
            exv = w->note_ex + note->ex_off;
            noted++;
        } else {
            uint32_t d = prev ? trie_prefix(v, prev_k, k, prev, plen, p, len) : 0;
            if (prev && bc) d = class_prefix(bc, prev, plen, p, len, d, died ? have + 1 : have, &class_shared);
            if (!prev || !died || d <= have) {  /* else p dies on the byte prev died on */
                dead = scan_rest(c, g, p, d < have ? d : have, len, ex, &have);
                if (dead < 0) {
                    rc = (int)dead;
                    break;
                }
                died = dead < len;
            }
            prev = p;
            prev_k = k;
            plen = len;
        }
        keep[i] = dead == len;  /* not an uncertain token after all: keep it */
        /* the bytes the drop read: through the one the chart died on, and each pair stop's second */
        uint32_t read = (uint32_t)dead + 1, pairs_here = 0, stops_here = 0, triples_here = 0;
        bool by_prefix = !keep[i];
        for (uint32_t e = 1; !keep[i] && e <= (uint32_t)dead; e++) {
            if (!exv[e] || !cm_follows(g, rule, p[e])) continue;
            /* not with lookahead debts (Lark's): there the rules' upward charts read on after
             * most pairs, and the rows cost sql.lark's cold pass +0.27 % */
            if (e + 1 < len && g->lim.filter_pairs && g->t.n_la <= 1) {
                if (!ps && (++pair_met >= pair_batch || pairs_early)) {
                    ps = pair_stops_of(g, m, rule, pairs_early ? g->lim.filter_pairs : pair_met);
                    if (ps && pairs_early) atomic_fetch_add(&g_pairs_early_made, 1);
                    pair_met = 0;
                    pairs_early = false;
                }
                const uint32_t *second = ps ? pair_second(g, m, ps, rule, p[e]) : NULL;
                if (second && !cm_bit(second, p[e + 1])) {
                    paired++;
                    pairs_here++;
                    if (e + 2 > read) read = e + 2;
                    continue;
                }
                const uint32_t *third = second && triples_on && e + 2 < len ? pair_third(g, m, ps, rule, p[e], p[e + 1]) : NULL;
                if (third && !cm_bit(third, p[e + 2])) {
                    tripled++;
                    triples_here++;
                    if (e + 3 > read) read = e + 3;
                    continue;
                }
            }
            if (stops_on && !ns) {
                uint32_t j = name_run(p + e, len - e);
                if (j < len - e && p[e + j] >= 0x80 && ++non_ascii >= g->lim.name_stops)
                    stops_on = (ns = name_stops_of(g, m, rule)) != NULL;
            }
            uint32_t stop_read;
            if (ns && name_stops_dead(ns, p + e, len - e, &stop_read)) {
                stopped++;
                if (!stop_skip) {
                    by_prefix = false;
                } else {  /* decided by p[0 .. e + stop_read) */
                    stops_here++;
                    if (e + stop_read > read) read = e + stop_read;
                }
                continue;
            }
            by_prefix = false;  /* the exit reads past its pair: the rest decides */
            if (runs_on && e + 1 < len && p[e + 1] == p[e]) {
                /* the stops after a run are made once the rule's filters have
                 * read enough rests die on the byte that ends their run (making
                 * them is a pass over the states the run reaches: in sql.lark,
                 * where blanks and comments read on, ~0.3 M for nothing) */
                uint32_t j = run_length(p + e, len - e);
                follow_run *r = run_slot(g, m, rule, p[e], false);
                if (r && j < len - e && stops_after && !r->stops && r->met >= stops_after) run_stops_of(g, rule, r);
                int known = r ? run_known(r, p + e, len - e, j) : -1;
                if (known >= 0) {
                    run_hits++;
                    keep[i] = (uint8_t)known;
                    continue;
                }
            }
            if (__builtin_expect(!vr_known, 0)) {
                lazy = verdict_lazy(g, m, rule, &vr);
                vr_known = true;
            }
            uint32_t h = 0;
            if (lazy == 2) {
                h = follow_hash(vr, p + e, len - e);
                int known = follow_get(g, h, vr, p + e, len - e);
                if (known >= 0) {
                    memo_hits++;
                    keep[i] = (uint8_t)known;
                    continue;
                }
            }
            /* (after the rule's own memo, which a rule filtered before answers at once) */
            if (kern_on) {
                if (__builtin_expect(!kr, 0) && !(kr = kern_rule_of(g, m, rule))) kern_on = false;
                uint32_t key = kr ? kern_key(g, m, kr, rule, p[e]) : CM_KERN_OWN;
                if (key > CM_KERN_DEAD && !kern_shared(g, m, key)) key = CM_KERN_OWN;
                if (key == CM_KERN_DEAD) {
                    kern_dead++;
                    continue;
                }
                if (key != CM_KERN_OWN) {
                    uint32_t kh = follow_hash(key, p + e, len - e);
                    int known = follow_get(g, kh, key, p + e, len - e);
                    if (known >= 0) {
                        kern_hits++;
                        keep[i] = (uint8_t)known;
                        continue;
                    }
                    if (n_kask < CM_KERN_MAX_ASKS) {
                        if (n_kask == cap_kask && (rc = cm_grow_to((void **)&kask, &cap_kask, n_kask + 1, sizeof *kask)))
                            break;
                        kask[n_kask++] = (follow_ask){p + e, len - e, (uint32_t)i, kh};
                        continue;
                    }
                }
            }
            if (n_ask == cap_ask && (rc = cm_grow_to((void **)&ask, &cap_ask, n_ask + 1, sizeof *ask))) break;
            ask[n_ask++] = (follow_ask){p + e, len - e, (uint32_t)i, h};
        }
        /* Dropped by p[0..read) alone (the chart died on p[read - 1], and every exit
         * before was no exit, did not follow, or met a pair stop within those bytes):
         * every later token of that prefix's subtree is dropped alike, with as many pair
         * stops, and its scan would leave the sets and exits of p[0..have) as they are. */
        if (skip_on && by_prefix && !rc && read <= len && k + 1 < v->n_trie && v->trie_lcp[k + 1] >= read) {
            /* (trie_lcp[k + 1] < read: no later entry shares the prefix, nothing to skip) */
            uint32_t end = v->skip[v->trie_off[k] + read - 1];
            size_t j = i + 1;  /* (their keep[] stays 0, as calloc left it) */
            while (j < n && w->unc[j] > k && w->unc[j] < end) j++;
            size_t many = j - i - 1;
            i = j - 1;
            skipped += many;
            paired += many * pairs_here;
            tripled += many * triples_here;
            stopped += many * stops_here;
            stop_skipped += stops_here ? many : 0;
        }
    }
    if (!rc && n_ask) {
        follow_held *held = NULL;
        if (lazy == 2) follow_reserve(g, n_ask);
        else if (n_ask <= CM_FOLLOW_MEMO_MAX && (held = malloc(sizeof *held + n_ask * sizeof *held->v)))
            held->n = 0;
        rc = follow_sort(ask, n_ask);
        if (!rc) rc = follow_answer(g, rule, vr, ask, n_ask, keep, &run_hits, held);
        if (held && !rc) {
            /* the rule's first verdicts, hashed at its next filter */
            atomic_fetch_add(&g->cache->bytes, sizeof *held + held->n * sizeof *held->v);
            atomic_fetch_add(&g_lazy_held, held->n);
            m->held[vr] = held;
            m->lazy[vr] = 1;
        } else {
            free(held);
            /* too many to hold, or none made: the rule's later filters look up and put as before */
            if (lazy == 0) m->lazy[vr] = 2;
        }
    }
    if (!rc && n_kask) rc = kern_answer(g, m, rule, kr, kask, n_kask, keep, &run_hits);
    free(kask);
    if (kern_hits) atomic_fetch_add(&g_kern_shared, kern_hits);
    if (kern_dead) atomic_fetch_add(&g_kern_dead, kern_dead);
    if (memo_hits) atomic_fetch_add(&g_follow_hits, memo_hits);
    if (!ps && pair_met && g->lim.filter_pairs) pair_stops_of(g, m, rule, pair_met);
    if (stopped) atomic_fetch_add(&g_name_stop_hits, stopped);
    if (paired) atomic_fetch_add(&g_pair_hits, paired);
    if (tripled) atomic_fetch_add(&g_triple_hits, tripled);
    if (skipped) atomic_fetch_add(&g_subtree_skipped, skipped);
    if (stop_skipped) atomic_fetch_add(&g_stop_skipped, stop_skipped);
    if (class_shared) atomic_fetch_add(&g_class_shared, class_shared);
    if (run_hits) atomic_fetch_add(&g_run_hits, run_hits);
    if (noted) atomic_fetch_add(&g_notes_used, noted);
    w->n_notes = w->n_note_ex = 0;
    /* on a failure, every token stays */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (keep[i] || rc) w->unc[kept++] = w->unc[i];
    w->n_unc = kept;
    free(ask);
    free(keep);
}

/* An entry keeps its accepted tokens as ids below an eighth of the bitset's words: past that
 * the ids cost more than the 16 KB they save.  A mask ORs ids one scattered bit at a time (a
 * number's ~1,130 digit tokens: ~1.5 us, where a bitset is one vectorized pass or, first in
 * the mask, a copy), and taking them out of the walk's bitset visits each word that has one. */
#define CM_IDS_FRACTION 8

size_t cm_walk_ids_limit(const cm_grammar *g) { return g->n_words / CM_IDS_FRACTION; }

/* The ids of a walk not counted (count_later) into out, which has room for cap: all of them
 * taken out of the bitset where they fit (how many), else counted, the bitset as it was
 * (SIZE_MAX).  w->n_accepted is the count either way. */
#define CM_TAKE_STACK 1024
static size_t count_taking(const cm_grammar *g, cm_walk *w, uint32_t *out, size_t cap) {
    size_t lim = cm_walk_ids_limit(g), n = SIZE_MAX;
    w->count_later = false;
    if (lim && lim - 1 <= cap) n = cm_bits_take_max(w->bits, g->n_words, out, lim - 1);
    w->n_accepted = (uint32_t)(n != SIZE_MAX ? n : cm_count_bits(w->bits, g->n_words));
    return n;
}

int cm_walk_finish(const cm_grammar *g, cm_walk *w, cm_entry *e) {
    uint32_t taken[CM_TAKE_STACK];
    size_t n_taken = w->count_later ? count_taking(g, w, taken, CM_TAKE_STACK) : SIZE_MAX;
    e->n_accepted = w->n_accepted;
    memcpy(e->names, w->names, sizeof e->names);
    e->n_uncertain = (uint32_t)w->n_unc;
    e->uncertain = w->unc;
    w->unc = NULL;
    e->bytes = sizeof *e + w->n_unc * 4;
    if ((size_t)w->n_accepted < cm_walk_ids_limit(g)) {
        e->accepted_ids = malloc((w->n_accepted ? w->n_accepted : 1) * sizeof *e->accepted_ids);
        if (!e->accepted_ids) return CM_ERR_NOMEM;
        /* the ids taken out of the bitset, which is left zero for the next walk (cm_walk_init_spare) */
        size_t n = n_taken;
        if (n != SIZE_MAX) memcpy(e->accepted_ids, taken, n * sizeof *taken);
        else n = cm_bits_take(w->bits, g->n_words, e->accepted_ids, w->n_accepted);
        if (n != w->n_accepted) return CM_ERR_STATE;  /* the count and the bits disagree */
        w->bits_zero = true;
        e->bytes += w->n_accepted * 4;
    } else {
        e->accepted_bits = w->bits;
        w->bits = NULL;
        e->bytes += g->n_words * 4;
    }
    return CM_OK;
}
