/* Entries composed from their callees'.
 *
 * A state where an operand starts (after SELECT, WHERE, "=", "(" in an
 * expression grammar) predicts the whole expression chain, and a trie walk
 * through that private chart costs 10-20 ms at V = 128k, once per such state.
 * Its entry follows from smaller ones instead.  The items of a private chart
 * each descend from one item of its first set, so the chart of (s, OUTER) is
 * the union of the charts of its parts, and a token survives it iff it
 * survives some part:
 *   - a byte edge s -b-> y: the trie subtree of b, walked from (y, OUTER) at
 *     depth 1 (usually the start of a keyword: a small walk);
 *   - a call s -R-> s', R not nullable: R's derivation is the private chart of
 *     (start(R), OUTER), its exits advancing s to s'.  A token survives it if
 *     start(R) accepts it, or if R completes at a depth d >= 1 and s' goes on
 *     through the rest; the next byte then follows R, so the token is accepted
 *     or uncertain in start(R)'s entry (whose upward filter drops only tokens
 *     that no caller of R, s' among them, can go on reading);
 *   - a lookahead marker s -M-> s' (nullable, zero width): s' owing M's debt
 *     at depth 0.  It accepts what s' accepts among the tokens that pay the
 *     debt; s''s uncertain tokens and the tokens that end still owing it are
 *     left to check.
 * s's own rule completes inside a token only through one of the parts, so
 * its uncertain tokens are among theirs.  The tokens left to check are decided
 * by s's real private chart (cm_walk_listed): the same entry as a whole walk,
 * for a few hundred checks.  A nullable callee R (a string's body that may be
 * empty) adds a part more: s advanced over R at once, (s', OUTER) in the first
 * set, whose tokens have the fate its own entry gives them (its uncertain ones
 * end s's rule too, and are checked).  A callee whose entry is being built
 * (recursion through start states; s' == s), token edges, or too many tokens
 * to check send s back to the walk (cache.c fetches the parts). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "chains.h"
#include "compose.h"
#include "flat.h"
#include "loops.h"

static inline bool marker_rule(const cm_grammar *g, uint32_t r) { return g->t.rule_la[r] != 0; }

static atomic_int g_self_on = 1;
static atomic_size_t g_self_built;
void cm_compose_self_enable(int on) { atomic_store(&g_self_on, on ? 1 : 0); }
size_t cm_compose_self_built(void) { return atomic_load(&g_self_built); }

static atomic_int g_count_later_on = 1;
static atomic_size_t g_counted_later;
void cm_compose_count_later_enable(int on) { atomic_store(&g_count_later_on, on ? 1 : 0); }
size_t cm_compose_counted_later(void) { return atomic_load(&g_counted_later); }

/* May cm_walk_finish count the composed entry as it takes its ids out?  Only where its ids
 * surely fit under the ids' limit: the walks' own count (the bits they set that were not set)
 * plus every part's count bounds the union.  Past it the take may meet more ids than the limit,
 * set back the ones it took and count the words anyway (sql.lark's composed identifiers, some
 * hundred entries a mask: +1.1 % of its fills when the parts were not summed). */
static bool count_later(const cm_grammar *g, const cm_part *parts, uint32_t n_parts, const cm_walk *w) {
    size_t lim = cm_walk_ids_limit(g), bound = w->n_accepted;
    if (!atomic_load_explicit(&g_count_later_on, memory_order_relaxed)) return false;
    for (uint32_t i = 0; i < n_parts && bound < lim; i++)
        bound += parts[i].e->accepted_bits ? lim : parts[i].e->n_accepted;
    return bound < lim;
}

bool cm_compose_self_ref(const cm_grammar *g, uint32_t state, uint32_t e) {
    const cm_tables *t = &g->t;
    uint32_t r = t->ref_rule[e];
    return r == t->state_rule[state] && t->rule_start[r] == state && !t->rule_nullable[r] && !marker_rule(g, r) &&
           atomic_load_explicit(&g_self_on, memory_order_relaxed);
}

bool cm_compose_can(const cm_grammar *g, uint32_t state) {
    const cm_tables *t = &g->t;
    if (!g->lim.compose_entries || g->has_tokens[state] || g->cache->compose_depth >= CM_COMPOSE_MAX_DEPTH ||
        t->ref_off[state] == t->ref_off[state + 1])
        return false;
    for (uint32_t e = t->ref_off[state]; e < t->ref_off[state + 1]; e++) {
        uint32_t r = t->ref_rule[e], after;
        uint32_t part = marker_rule(g, r) ? t->ref_target[e] : t->rule_start[r];
        if (part == state && cm_compose_self_ref(g, state, e)) continue;
        if (part == state || g->cache->building[part]) return false;
        if (!t->rule_nullable[r] || marker_rule(g, r)) continue;
        /* an empty R may owe a lookahead debt when the grammar has any: not composed */
        if (!cm_compose_null_part(g, e, &after) || after == state || g->cache->building[after]) return false;
    }
    return true;
}

bool cm_compose_null_part(const cm_grammar *g, uint32_t e, uint32_t *after) {
    const cm_tables *t = &g->t;
    uint32_t r = t->ref_rule[e];
    *after = t->ref_target[e];
    return t->rule_nullable[r] && !marker_rule(g, r) && t->n_la <= 1;
}

uint32_t cm_compose_part_state(const cm_grammar *g, uint32_t e, uint32_t *la) {
    const cm_tables *t = &g->t;
    uint32_t r = t->ref_rule[e];
    *la = marker_rule(g, r) ? t->rule_la[r] : 0;
    return *la ? t->ref_target[e] : t->rule_start[r];
}

size_t cm_compose_part_candidates(const cm_grammar *g, const cm_part *p) {
    size_t n = p->e->n_uncertain;
    if (p->la) n += g->la_pending_off[p->la + 1] - g->la_pending_off[p->la];
    return n;
}

/* ---- tail parts ----
 *
 * A byte edge s -b-> y contributes the tokens b.T that survive the private
 * chart of (y, OUTER) from depth 1.  Where y is a position before an operand
 * (the whitespace of an expression grammar, `ws [-+] ws term` with ws inlined
 * as [ \t]{0,8}), that walk is b's whole subtree (' ' leads 47 % of Llama-3's
 * trie), once per position, and the positions differ (each has its own
 * count of spaces left) while they call the same few rules.  When y neither
 * completes its rule, nor calls a nullable rule or a lookahead marker, nor
 * reads tokens, its chart is the union of its parts one level down:
 *   - a byte edge y -c-> z: the entries starting with b.c, walked from
 *     (z, OUTER) at depth 2 (a few thousand entries for "  ");
 *   - a call y -R-> y': the entries starting with b, walked from
 *     (start(R), OUTER) at depth 1: the tail part of (start(R), b), walked
 *     once per grammar and kept.  Its accepted tokens survive R's derivation,
 *     so s's chart; its uncertain ones (R completes inside the token, the next
 *     byte in FOLLOW(R)) may go on through y', and are left, with the call
 *     parts' candidates, to s's real chart (cm_walk_listed); its rejected ones
 *     die in R's derivation without leaving it.
 * This is the composition of cm_compose applied to y, with the parts walked
 * over b's subtree at depth 1 instead of over the trie at depth 0. */

struct cm_tail {
    uint32_t state, byte;       /* a callee's start state, the first byte */
    uint32_t *bits;             /* the accepted tokens, [n_words]; NULL where ids holds them */
    uint32_t *ids;              /* a sparse part's accepted tokens, in trie order (tail_sparse) */
    size_t n_ids;
    uint32_t *unc;              /* the uncertain trie entries, ascending */
    size_t n_unc;
    const cm_tail *alias;       /* a level that passes through: bits and unc are this one's */
};

static void tail_free(cm_tail *t) {
    if (!t) return;
    if (!t->alias) {
        free(t->bits);
        free(t->ids);
        free(t->unc);
    }
    free(t);
}

/* Pass-through levels (tail_through) and names in bulk after a position's own
 * bytes (own_names): on by default; how many were taken, in this process. */
static atomic_int g_alias_on = 1, g_names_on = 1;
static atomic_size_t g_tail_aliases, g_own_names;
/* own_names only where b leads at least this many names (the proof costs a few steps) */
#define CM_TAIL_NAMES_MIN 64

void cm_tail_alias_enable(int on) { atomic_store(&g_alias_on, on ? 1 : 0); }
size_t cm_tail_aliases(void) { return atomic_load(&g_tail_aliases); }
void cm_tail_names_enable(int on) { atomic_store(&g_names_on, on ? 1 : 0); }
size_t cm_tail_names_taken(void) { return atomic_load(&g_own_names); }

void cm_tails_free(cm_tail **t, size_t n) {
    for (size_t i = 0; i < n; i++) tail_free(t[i]);
    free(t);
}

/* May the byte edge into y take y's parts? */
static bool tail_target(const cm_grammar *g, uint32_t y) {
    const cm_tables *t = &g->t;
    if (!g->lim.tail_parts || g->has_tokens[y] || t->accepting[y] || t->ref_off[y] == t->ref_off[y + 1]) return false;
    for (uint32_t e = t->ref_off[y]; e < t->ref_off[y + 1]; e++) {
        uint32_t r = t->ref_rule[e];
        if (marker_rule(g, r) || t->rule_nullable[r]) return false;
    }
    return true;
}

/* Candidates for s's real chart, gathered from tail parts. */
typedef struct cands {
    uint32_t *k;
    size_t n, cap;
} cands;

static int cands_add(cands *x, const uint32_t *ks, size_t n) {
    if (x->n + n > x->cap) {
        size_t cap = x->cap ? x->cap : 256;
        while (cap < x->n + n) cap *= 2;
        uint32_t *p = realloc(x->k, cap * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        x->k = p;
        x->cap = cap;
    }
    if (n) memcpy(x->k + x->n, ks, n * sizeof *ks);
    x->n += n;
    return CM_OK;
}

static int walk_tails(const cm_grammar *g, uint32_t rule, uint32_t y, unsigned b, size_t k, size_t k_end,
                      cm_walk *w, cands *x);
static size_t second_byte_from(const cm_vocab *v, size_t k, size_t k_end, unsigned c);

/* The pairs (start, b) whose tail parts are being built, innermost last. */
#define CM_TAIL_MAX_DEPTH 32
static _Thread_local uint32_t tail_stack[CM_TAIL_MAX_DEPTH];
static _Thread_local uint32_t tail_depth;

/* The tail part of (start, b) into tw: from start's own parts where tail_target
 * allows (a callee's tail part is a part of its caller's: an operand's chain
 * expr -> term -> power -> unary -> primary walks b's subtree once, at the
 * bottom), else walked. */
static int tail_build(const cm_grammar *g, uint32_t start, unsigned b, cm_walk *tw) {
    const cm_vocab *v = g->v;
    uint32_t rule = g->t.state_rule[start], key = start * 256u + b;
    size_t k = v->first_off[b], k_end = v->first_off[b + 1];
    bool nested = k_end - k >= g->lim.tail_parts && tail_target(g, start) && tail_depth < CM_TAIL_MAX_DEPTH;
    for (uint32_t i = 0; nested && i < tail_depth; i++) nested = tail_stack[i] != key;  /* recursion */
    int done = 0, rc = CM_OK;
    if (nested) {
        cands x = {0};
        tail_stack[tail_depth++] = key;
        done = walk_tails(g, rule, start, b, k, k_end, tw, &x);
        tail_depth--;
        if (done == 1) {
            size_t n = x.n ? cm_sort_unique_u32(x.k, x.n) : 0;
            rc = cm_walk_listed_at(g, start, x.k, n, 1, tw);
        }
        free(x.k);
        if (done < 0) rc = done;
    }
    if (!rc && done != 1) rc = cm_flat_walk(g, start, rule, k, k_end, 1, tw);
    if (!rc) {  /* uncertain once: those accepted by another part go */
        size_t n = tw->n_unc ? cm_sort_unique_u32(tw->unc, tw->n_unc) : 0, kept = 0;
        for (size_t i = 0; i < n; i++)
            if (!cm_bit(tw->bits, v->trie_ids[tw->unc[i]])) tw->unc[kept++] = tw->unc[i];
        tw->n_unc = kept;
    }
    return rc;
}

static int tail_get(const cm_grammar *g, uint32_t start, unsigned b, cm_tail **out, cm_tail **owned);

/* The callee whose start state a level passes b's subtree through to, or
 * UINT32_MAX.  A start state that tail_target allows, with one call R and no
 * byte of its own that any entry b.c... reads on (y -R-> y' and nothing
 * else), is a level of an expression chain (expr -> assign -> cond -> log-or
 * -> ... -> unary: c.gbnf has seventeen).  What survives its chart from depth
 * 1 survives R's: R's accepted tokens are its accepted ones, and R's uncertain
 * ones (R ends inside the token) are the only others that may survive.  So
 * its tail part is R's, kept undecided: the tokens R leaves uncertain are
 * candidates that the caller's real chart decides (walk_tails: the first
 * level above that is no such level, from depth 1, or the composed state's
 * chart), and a chart of a level above holds every level below, so it gives
 * each candidate the fate a check at this level and then at the caller's
 * would.  No bitset, no check a level: c.gbnf's operands after a blank walked
 * ~72 candidates through the chart of each of seventeen levels. */
static uint32_t tail_through(const cm_grammar *g, uint32_t start, unsigned b) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    if (!atomic_load_explicit(&g_alias_on, memory_order_relaxed) || t->ref_off[start + 1] - t->ref_off[start] != 1)
        return UINT32_MAX;
    size_t k = v->first_off[b], k_end = v->first_off[b + 1];
    if (k_end - k < g->lim.tail_parts || !tail_target(g, start)) return UINT32_MAX;
    while (k < k_end && v->trie_off[k + 1] - v->trie_off[k] == 1) k++;  /* b alone: the callee's */
    for (unsigned c = 0; c < 256 && k < k_end; c++) {
        if (t->trans[(size_t)start * t->n_classes + t->byte_class[c]] < 0) continue;
        size_t lo = second_byte_from(v, k, k_end, c);
        if (lo < k_end && v->trie_data[v->trie_off[lo] + 1] == c) return UINT32_MAX;
    }
    return t->rule_start[t->ref_rule[t->ref_off[start]]];
}

/* The tails' index: open addressing by (start, byte), each slot a position in c->tails plus
 * one.  A mask of sql.lark built ~130 tail parts and asked for them ~700 times, and the cache
 * holds every tail part its grammar built so far: a scan of them all per ask was ~0.2 M
 * instructions of `sql.lark:0:2` and grew along the documents. */
static atomic_int g_tail_index_on = 1;
void cm_tail_index_enable(int on) { atomic_store(&g_tail_index_on, on ? 1 : 0); }

static size_t tail_slot(uint32_t start, unsigned b, size_t mask) {
    uint64_t h = ((uint64_t)start << 8 | b) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & mask;
}

/* c->tails[i] into the index (a free slot exists: at most half are used). */
static void tail_slot_put(cm_cache *c, size_t i) {
    size_t mask = c->tail_slots_cap - 1, h = tail_slot(c->tails[i]->state, c->tails[i]->byte, mask);
    while (c->tail_slots[h]) h = (h + 1) & mask;
    c->tail_slots[h] = (uint32_t)i + 1;
}

/* After c->tails[n_tails - 1] was added: index it, the index rebuilt twice as large when over
 * half full (or made when there was none); out of memory, or off, no index (tail_find scans). */
static void tail_index_add(cm_cache *c) {
    if (!atomic_load_explicit(&g_tail_index_on, memory_order_relaxed) || c->n_tails >= UINT32_MAX) {
        free(c->tail_slots);
        c->tail_slots = NULL;
        c->tail_slots_cap = 0;
        return;
    }
    if (c->tail_slots && 2 * c->n_tails <= c->tail_slots_cap) {
        tail_slot_put(c, c->n_tails - 1);
        return;
    }
    size_t cap = c->tail_slots_cap ? c->tail_slots_cap : 64;
    while (2 * c->n_tails > cap) cap *= 2;
    free(c->tail_slots);
    c->tail_slots_cap = 0;
    if (!(c->tail_slots = calloc(cap, sizeof *c->tail_slots))) return;
    c->tail_slots_cap = cap;
    for (size_t i = 0; i < c->n_tails; i++) tail_slot_put(c, i);
}

/* The cache's tail part of (start, b), the first added, or NULL. */
static cm_tail *tail_find(const cm_cache *c, uint32_t start, unsigned b) {
    if (!c->tail_slots) {
        for (size_t i = 0; i < c->n_tails; i++)
            if (c->tails[i]->state == start && c->tails[i]->byte == b) return c->tails[i];
        return NULL;
    }
    size_t mask = c->tail_slots_cap - 1;
    for (size_t h = tail_slot(start, b, mask); c->tail_slots[h]; h = (h + 1) & mask) {
        cm_tail *t = c->tails[c->tail_slots[h] - 1];
        if (t->state == start && t->byte == b) return t;
    }
    return NULL;
}

/* Sparse tail parts.  A tail part's walk wrote a bitset of [n_words] (16 KB for Llama-3),
 * each zeroed before its walk (calloc: ~16 K instructions, a byte an instruction), though
 * most parts walk a small subtree: `sql.lark:0:2` built 126 parts (2.34 M of zeroing), most
 * a letter's (Llama-3: 26 to 2,478 entries, ~600 on average).  A walk of b's subtree sets
 * bits of that subtree's tokens only (its flat walks, the names after b, its callees' parts
 * of b, its candidates), so where the subtree holds at most CM_TAIL_SPARSE_ENTRIES entries
 * the walk writes into a zero spare of the cache (lend_bits' pool), its accepted ids are read
 * off the subtree (~6 instructions an entry) and kept (OR-ed in at ~5 instructions an id),
 * their words cleared and the bitset given back; else the part keeps a bitset, as before.
 * (Taking the ids by a scan of the bitset's words costs more than the zeroing: a few hundred
 * ids leave few 16-word blocks zero, 4.0 M over the 126 parts; keeping only the parts of at
 * most 256 ids wasted the reading of the others: +0.8 M over sql.lark's fills; subtrees of up
 * to 2,048 entries, a few letters more, read more than they saved: +0.13 M.)  Off: every
 * part a calloc'd bitset of its own. */
#define CM_TAIL_SPARSE_ENTRIES 1024
static atomic_int g_sparse_on = 1;
static atomic_size_t g_sparse_parts;
void cm_tail_sparse_enable(int on) { atomic_store(&g_sparse_on, on ? 1 : 0); }
size_t cm_tail_sparse_parts(void) { return atomic_load(&g_sparse_parts); }

/* May (start, b)'s part be kept as ids: its walk written into a spare? */
static bool tail_sparse_can(const cm_grammar *g, unsigned b) {
    const cm_vocab *v = g->v;
    return atomic_load_explicit(&g_sparse_on, memory_order_relaxed) && g->n_words &&
           v->first_off[b + 1] - v->first_off[b] <= CM_TAIL_SPARSE_ENTRIES;
}

/* t's bitset, just walked over b's subtree (tail_sparse_can), as ids (the bitset, zero
 * again, back to the cache's spares, or freed). */
static int tail_sparse(const cm_grammar *g, cm_tail *t) {
    const cm_vocab *v = g->v;
    uint32_t ids[CM_TAIL_SPARSE_ENTRIES], *bits = t->bits;
    size_t n = 0;
    for (size_t k = v->first_off[t->byte]; k < v->first_off[t->byte + 1]; k++) {
        uint32_t id = v->trie_ids[k];
        if (!cm_bit(bits, id)) continue;
        ids[n++] = id;
    }
    if (!(t->ids = malloc((n ? n : 1) * sizeof *t->ids))) return CM_ERR_NOMEM;
    if (n) memcpy(t->ids, ids, n * sizeof *ids);
    t->n_ids = n;
    for (size_t i = 0; i < n; i++) bits[ids[i] >> 5] = 0;
#ifndef NDEBUG
    for (size_t i = 0; i < g->n_words; i++) assert(!bits[i]);  /* no bit outside b's subtree */
#endif
    cm_cache *c = g->cache;
    if (c->n_spare < CM_SPARE_BITS) c->spare_bits[c->n_spare++] = bits;
    else free(bits);
    t->bits = NULL;
    atomic_fetch_add_explicit(&g_sparse_parts, 1, memory_order_relaxed);
    return CM_OK;
}

/* dst |= tp's accepted tokens. */
static void tail_or(const cm_grammar *g, uint32_t *dst, const cm_tail *tp) {
    if (tp->bits) cm_or_words(dst, tp->bits, g->n_words);
    else cm_set_bits(dst, tp->ids, tp->n_ids);
}

/* The tail part of (start, b) as its callee's (tail_through), kept by the
 * cache: 1 done, 0 not such a level (or the callee's part is not kept, or
 * the levels recur), < 0 error. */
static int tail_alias(const cm_grammar *g, uint32_t start, unsigned b, cm_tail **out, cm_tail **owned) {
    uint32_t callee = tail_through(g, start, b), key = start * 256u + b;
    if (callee == UINT32_MAX || tail_depth >= CM_TAIL_MAX_DEPTH) return 0;
    for (uint32_t i = 0; i < tail_depth; i++)
        if (tail_stack[i] == key) return 0;  /* recursion: walked, as tail_build does */
    cm_tail *sub, *sub_owned;
    tail_stack[tail_depth++] = key;
    int rc = tail_get(g, callee, b, &sub, &sub_owned);
    tail_depth--;
    if (rc) return rc;
    if (sub_owned) {  /* past the cache limit: this level walks as before */
        tail_free(sub_owned);
        return 0;
    }
    const cm_tail *root = sub->alias ? sub->alias : sub;
    cm_tail *t = calloc(1, sizeof *t);
    if (!t) return CM_ERR_NOMEM;
    *t = (cm_tail){start, b, root->bits, root->ids, root->n_ids, root->unc, root->n_unc, root};
    atomic_fetch_add_explicit(&g_tail_aliases, 1, memory_order_relaxed);
    *out = t;
    *owned = NULL;
    cm_cache *c = g->cache;
    if (atomic_load(&c->bytes) + sizeof *t > g->lim.max_cache_bytes) {
        *owned = t;
        return 1;
    }
    if (c->n_tails == c->cap_tails) {
        size_t cap = c->cap_tails ? c->cap_tails * 2 : 16;
        cm_tail **p = realloc(c->tails, cap * sizeof *p);
        if (!p) {
            *owned = t;
            return 1;
        }
        c->tails = p;
        c->cap_tails = cap;
    }
    c->tails[c->n_tails++] = t;
    tail_index_add(c);
    atomic_fetch_add(&c->bytes, sizeof *t);
    return 1;
}

/* The tail part of (start, b): the cache's, or walked now (kept by the cache
 * if it has room, else *owned for the caller to free).  Under the cache lock. */
static int tail_get(const cm_grammar *g, uint32_t start, unsigned b, cm_tail **out, cm_tail **owned) {
    cm_cache *c = g->cache;
    *owned = NULL;
    cm_tail *have = tail_find(c, start, b);
    if (have) {
        *out = have;
        return CM_OK;
    }
    int rc = tail_alias(g, start, b, out, owned);
    if (rc) return rc < 0 ? rc : CM_OK;
    cm_walk tw;
    bool sparse = tail_sparse_can(g, b);
    rc = cm_walk_init_spare(&tw, g, sparse && c->n_spare ? c->spare_bits[--c->n_spare] : NULL);
    cm_tail *t = calloc(1, sizeof *t);
    if (!rc && !t) rc = CM_ERR_NOMEM;
    if (!rc) rc = tail_build(g, start, b, &tw);
    if (rc) {
        cm_walk_free(&tw);
        free(t);
        return rc;
    }
    t->state = start;
    t->byte = b;
    t->bits = tw.bits;
    t->n_unc = tw.n_unc;
    t->unc = tw.unc;
    tw.bits = tw.unc = NULL;
    cm_walk_free(&tw);
    if (sparse && (rc = tail_sparse(g, t)) != CM_OK) {
        tail_free(t);
        return rc;
    }
    atomic_fetch_add(&c->tail_walks, 1);
    *out = t;
    size_t bytes = sizeof *t + ((t->bits ? g->n_words : t->n_ids) + t->n_unc) * sizeof(uint32_t);
    if (atomic_load(&c->bytes) + bytes > g->lim.max_cache_bytes) {
        *owned = t;
        return CM_OK;
    }
    if (c->n_tails == c->cap_tails) {
        size_t cap = c->cap_tails ? c->cap_tails * 2 : 16;
        cm_tail **p = realloc(c->tails, cap * sizeof *p);
        if (!p) {
            *owned = t;
            return CM_OK;
        }
        c->tails = p;
        c->cap_tails = cap;
    }
    c->tails[c->n_tails++] = t;
    tail_index_add(c);
    atomic_fetch_add(&c->bytes, bytes);
    return CM_OK;
}

/* The first entry in [k, k_end) (entries sharing their first byte, those of
 * length 1 excluded, so sorted by their second byte) whose second byte is >= c. */
static size_t second_byte_from(const cm_vocab *v, size_t k, size_t k_end, unsigned c) {
    while (k < k_end) {
        size_t mid = k + (k_end - k) / 2;
        if (v->trie_data[v->trie_off[mid] + 1] < c) k = mid + 1;
        else k_end = mid;
    }
    return k;
}

/* Do y's own bytes take b's name entries (b, then a name: ` foo`) at once?
 * Where y reads every name's first byte into states from which every name
 * goes on live (a name that starts inline: a label's in c.gbnf's `item`, a
 * column's in sql.gbnf's `primary`), each name entry b.c... walked from
 * (z, OUTER) at depth 2 is accepted (cm_flat_names_after), and the walks of
 * y's own bytes need only the others: Llama-3 has 42,839 names after ' ', of
 * the 57,875 entries there, and the flat walk read each at ~57 instructions. */
static bool own_names(const cm_grammar *g, uint32_t y, unsigned b) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    if (!v->name_ids || !g->lim.name_skip || !atomic_load_explicit(&g_names_on, memory_order_relaxed) ||
        v->name_off[b + 1] - v->name_off[b] < CM_TAIL_NAMES_MIN)
        return false;
    uint32_t z[64];
    unsigned n = 0;
    for (unsigned c = 0; c < 256; c++) {
        if (!cm_name_first((uint8_t)c)) continue;
        int32_t to = t->trans[(size_t)y * t->n_classes + t->byte_class[c]];
        if (to < 0) return false;
        unsigned i = 0;
        while (i < n && z[i] != (uint32_t)to) i++;
        if (i == n) {
            if (n == 64) return false;
            z[n++] = (uint32_t)to;
        }
    }
    if (!cm_flat_names_after(g, z, n)) return false;
    atomic_fetch_add_explicit(&g_own_names, 1, memory_order_relaxed);
    return true;
}

/* The byte edge s -b-> y (tail_target(y)) from y's parts over b's subtree
 * [k, k_end): 1 done, 0 declined (a callee leaves too many tokens to check;
 * what was added is sound, and the caller walks the edge), < 0 error. */
static int walk_tails(const cm_grammar *g, uint32_t rule, uint32_t y, unsigned b, size_t k, size_t k_end,
                      cm_walk *w, cands *x) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    int rc = CM_OK;
    /* y's own bytes: the entries b.c... (those of length 1 are the callees') */
    size_t k1 = k, lo[256], hi[256], own = 0;
    while (k1 < k_end && v->trie_off[k1 + 1] - v->trie_off[k1] == 1) k1++;
    for (unsigned c = 0; c < 256; c++) {
        lo[c] = hi[c] = k1;
        if (k1 == k_end || t->trans[(size_t)y * t->n_classes + t->byte_class[c]] < 0) continue;
        lo[c] = second_byte_from(v, k1, k_end, c);
        hi[c] = second_byte_from(v, lo[c], k_end, c + 1);
        own += hi[c] - lo[c];
    }
    /* b's name entries, each b.c... with c a byte y reads, at once.  Parts
     * walk apart what one walk of y's chart walks once: where y's own bytes
     * hold a name that starts inline and a callee reads names too (c.gbnf's
     * `item`: a label's, a type's, an expression's), each part read them
     * again, ~57 instructions an entry, so such a y walked b's subtree whole
     * instead (when its own bytes held more than 1/8 of it); but that walk
     * makes the configurations of y's chart, which predicts every callee
     * (item's ' ' and '\t' tail parts: ~300 new ones, 9.7 M instructions of
     * c.gbnf's mask after `{\n`).  With the names taken at once here, and
     * the callees' taken the same way or by their own walks' bulk
     * (cm_flat_walk at depth 1), every such y takes its parts. */
    bool names = own > v->name_off[b + 1] - v->name_off[b] && own_names(g, y, b);
    for (uint32_t e = t->ref_off[y]; e < t->ref_off[y + 1] && !rc; e++) {
        cm_tail *tp, *owned;
        rc = tail_get(g, t->rule_start[t->ref_rule[e]], b, &tp, &owned);
        if (rc) return rc;
        if (x->n + tp->n_unc > CM_COMPOSE_MAX_CANDIDATES) {
            tail_free(owned);
            return 0;
        }
        tail_or(g, w->bits, tp);
        rc = cands_add(x, tp->unc, tp->n_unc);
        tail_free(owned);
    }
    /* y's own bytes from (z, OUTER) at depth 2 */
    if (names && !rc) w->n_accepted += cm_walk_names(v, (uint8_t)b, w);
    for (unsigned c = 0; c < 256 && !rc; c++)
        if (lo[c] < hi[c]) {
            int32_t z = t->trans[(size_t)y * t->n_classes + t->byte_class[c]];
            rc = names && cm_name_first((uint8_t)c) ? cm_flat_walk_names_skipped(g, (uint32_t)z, rule, lo[c], hi[c], 2, w)
                                                    : cm_flat_walk(g, (uint32_t)z, rule, lo[c], hi[c], 2, w);
        }
    if (!rc) atomic_fetch_add(&g->cache->tail_uses, 1);
    return rc ? rc : 1;
}

/* A name run's letters walked where they are met (issue 12, session 46, helper `lark46`).  A
 * Lark name inlined (sql.lark's NAME: a letter, then letters and digits) is a run y that loops on
 * its bytes and calls the lookahead marker that ends it, so edge_shared took its letters too:
 * each letter b of a rule's start into y kept the walk of b's subtree from y as a tail part of
 * its own, ~20 a run (`select_item`'s, `qualified_name`'s), each a 16 KB bitset made (~16.5 K
 * instructions counted) and read back into ids (tail_sparse, ~10-15 K) around a walk of ~4-11 K
 * (most of b's subtree is names, taken in bulk): 0.81 M of `sql.lark:0:1`, 1.84 M of `0:2`, and
 * the kept walks found few later users.  Now a name-first byte's edge is walked into the entry
 * where it is met (the same walk: the kept one only cached it); the blanks, which a run reads
 * whole at every position, are kept as before.  Off: every such edge kept, the reference the
 * tests compare against. */
static atomic_int g_name_edges_direct = 1;
static atomic_size_t g_name_edges_walked;
void cm_name_edges_direct_enable(int on) { atomic_store(&g_name_edges_direct, on ? 1 : 0); }
size_t cm_name_edges_direct(void) { return atomic_load(&g_name_edges_walked); }

/* Is the walk of (y, b) met again?  Kept, it costs a bitset, and c.gbnf's
 * blank runs' walks are not met again in a cold pass (keeping every edge into
 * a state that loops on its byte, and composing the states before them: +12 %
 * thread time), so only where y is a blank run before a lookahead marker
 * (Lark's %ignore): y loops on b and calls the marker, whose return state has
 * y's edges, so the rule's start, y and that state each walk (y, b). */
static bool edge_shared(const cm_grammar *g, uint32_t y, unsigned b) {
    const cm_tables *t = &g->t;
    if (t->trans[(size_t)y * t->n_classes + t->byte_class[b]] != (int32_t)y) return false;
    bool marker = false;
    for (uint32_t e = t->ref_off[y]; e < t->ref_off[y + 1] && !marker; e++) marker = marker_rule(g, t->ref_rule[e]);
    if (marker && cm_name_first((uint8_t)b) && atomic_load_explicit(&g_name_edges_direct, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&g_name_edges_walked, 1, memory_order_relaxed);
        return false;  /* a name run's letter: walked where it is met */
    }
    return marker;
}

/* The bytes `state` has an edge on (next_bytes: those whose class has a transition), ascending,
 * into out: how many.  Most states these walks meet read a few (a key's next letter, `,` or
 * `}`), and a loop over all 256 bytes, each looked up in the transition table, was ~2.5 K
 * instructions a state: ~0.25 M of sp_339:36's 5.0 M (cm_compose_edges' and the composed
 * states' own loops). */
static unsigned edge_bytes(const cm_grammar *g, uint32_t state, uint8_t *out) {
    const uint32_t *nb = g->next_bytes + (size_t)state * 8;
    unsigned n = 0;
    for (unsigned j = 0; j < 8; j++)
        for (uint32_t m = nb[j]; m; m &= m - 1) out[n++] = (uint8_t)(j * 32 + (unsigned)__builtin_ctz(m));
    return n;
}

/* Byte edges: each first byte's subtree walked from the state it leads to (or
 * from that state's parts, walk_tails).  The walk of a big subtree, b's from
 * (y, OUTER) at depth 1, depends on y and b only: it is the tail part of
 * (y, b), kept by the cache, its candidates decided on y's chart.  States that
 * share an edge target share its walk: a Lark rule's blank run y is entered
 * from the rule's start, from y itself and from the state after the blank's
 * lookahead marker, and sql.lark's ' ' subtree from such a y costs 0.4-0.6 ms
 * (its runs of '-' nest negations and comments). */
static int walk_byte_edges(const cm_grammar *g, uint32_t state, cm_walk *w, cands *x) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t rule = t->state_rule[state];
    int rc = cm_chain_bytes(g, state, w);  /* a long string's start: its chain's walk */
    if (rc) return rc < 0 ? rc : CM_OK;
    uint8_t bytes[256];
    unsigned n_bytes = edge_bytes(g, state, bytes);
    for (unsigned i = 0; i < n_bytes && !rc; i++) {
        unsigned b = bytes[i];
        int32_t y = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
        if (y < 0) continue;
        size_t k = v->first_off[b], k_end = v->first_off[b + 1];
        if (k == k_end) continue;
        if (g->lim.share_edges && k_end - k >= g->lim.share_edges && edge_shared(g, (uint32_t)y, b)) {
            cm_tail *tp, *owned;
            rc = tail_get(g, (uint32_t)y, b, &tp, &owned);
            if (rc) break;
            tail_or(g, w->bits, tp);
            for (size_t i = 0; i < tp->n_unc && !rc; i++) rc = cm_walk_push_uncertain(w, tp->unc[i]);
            tail_free(owned);
            atomic_fetch_add(&g->cache->tail_uses, 1);
            continue;
        }
        bool tails = k_end - k >= g->lim.tail_parts && tail_target(g, (uint32_t)y);
        int done = tails ? walk_tails(g, rule, (uint32_t)y, b, k, k_end, w, x) : 0;
        if (done < 0) rc = done;
        else if (!done) rc = cm_flat_walk(g, (uint32_t)y, rule, k, k_end, 1, w);
    }
    return rc;
}

/* A state that calls nothing but reads into one that calls (`SELECT` and the
 * blanks before the select list, `WHERE` before its condition: sql.gbnf has
 * some thirty) is no composition of callees, and its whole walk read the
 * blank's subtree (47 % of Llama-3's trie) through the operand's chart, about
 * 1 ms a state.  Its chart after the first byte b is (y, OUTER) for its edge
 * s -b-> y, so a whole walk is the union of its byte edges' walks at depth 1,
 * which walk_byte_edges takes from y's parts (the tail parts shared by every
 * position before that operand) where tail_target(y) allows.  Decline (w
 * untouched) unless some edge may. */
int cm_compose_edges(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    if (!g->lim.compose_entries || g->has_tokens[state] || t->ref_off[state] < t->ref_off[state + 1]) return 0;
    uint8_t bytes[256];
    unsigned n_bytes = edge_bytes(g, state, bytes);
    bool tails = false;
    for (unsigned i = 0; i < n_bytes && !tails; i++) {
        unsigned b = bytes[i];
        int32_t y = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
        tails = y >= 0 && v->first_off[b + 1] - v->first_off[b] >= g->lim.tail_parts && tail_target(g, (uint32_t)y);
    }
    if (!tails) return 0;
    atomic_fetch_add(&g->cache->composed, 1);
    int rc = cm_compose(g, state, NULL, 0, 0, w);
    return rc ? rc : 1;
}

static bool ascending(const uint32_t *v, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (v[i - 1] >= v[i]) return false;
    return true;
}

/* A call part's uncertain tokens are those in which its callee R completes, at some position j
 * inside the token, followed by a byte of FOLLOW(R).  In the composed state's chart the call's
 * path then goes on at the state y it returns to, from byte j.  Where y is no final state,
 * calls nothing and reads no tokens, that path reads on only through y's byte edges, and it
 * exits nowhere: a token none of whose bytes after the first y reads dies there on this path
 * (j >= 1: R's empty derivation is the nullable part after it, a part of its own; and R does
 * not complete at the token's end, or the part would have accepted it).  So the token is
 * that part's candidate for nothing: the walk through the state's real chart classifies it as
 * if the part had not listed it, and it is left out unless another part (or a tail part)
 * lists it.  After a value in an object of optional properties, each property's rest calls
 * `ws` before its comma (y reads `,` alone) and the next rest: `ws`'s ~200 uncertain tokens
 * (blanks followed by a byte of its wide FOLLOW) were walked again at every level of the
 * chain (Snowplow's sp_339 after `"br_cookies":true`: 37 levels, ~7,900 candidates), to be
 * kept by none. */
static atomic_int g_unread_on = 1;
static atomic_size_t g_unread_skipped;
void cm_compose_unread_enable(int on) { atomic_store(&g_unread_on, on ? 1 : 0); }
size_t cm_compose_unread_skipped(void) { return atomic_load(&g_unread_skipped); }

/* The bytes the state part p returns to reads, where only they can take its candidates on
 * (above); NULL where every candidate stays. */
static const uint32_t *unread_row(const cm_grammar *g, const cm_part *p) {
    const cm_tables *t = &g->t;
    if (!p->ret1 || p->la || !atomic_load_explicit(&g_unread_on, memory_order_relaxed)) return NULL;
    uint32_t y = p->ret1 - 1;
    if (t->accepting[y] || g->has_tokens[y] || t->ref_off[y] != t->ref_off[y + 1]) return NULL;
    return g->next_bytes + (size_t)y * 8;
}

/* p's uncertain tokens, less those no byte of which after the first `reads` holds, into buf
 * (room for them all): how many. */
static size_t unread_filter(const cm_grammar *g, const cm_entry *ce, const uint32_t *reads, uint32_t *buf) {
    size_t kept = 0;
    for (size_t i = 0; i < ce->n_uncertain; i++) {
        uint32_t len;
        const uint8_t *b = cm_trie_bytes(g->v, ce->uncertain[i], &len);
        bool on = false;
        for (uint32_t j = 1; j < len && !on; j++) on = cm_bit(reads, b[j]);
        if (on) buf[kept++] = ce->uncertain[i];
    }
    return kept;
}

/* The exit check (unread_exits, the default): the byte check above asks whether the return state
 * y reads some byte of the token after its first, where the call's path goes on at y only from a
 * position j at which R completes: R completes from set 0 after j bytes where those bytes are a
 * text of R, whoever called it, and so does the chart of (start(R), OUTER), whose exits
 * (c->exited after j bytes) are those j (no lookahead debts, no counts).  Where an item of that
 * chart's first set calls R (left recursion) the check declines all the same, a margin the
 * argument does not need.  A token is kept
 * where y reads the byte after one of its exits (j from 1: R's empty derivation is the part
 * after it; j = len: the part would have accepted it); every other one dies on this path at y,
 * which exits nowhere, as the byte check argues.  After a value in sp_339's chain of optional
 * properties, `ws`'s tokens such as ` "",` (a blank, then a quote: `ws` ends after the blank,
 * and y reads `,` alone) have a comma later and passed the byte check: 35 of the 36 candidates
 * `ws` gave each of the 37 levels of sp_339's mask after `"br_cookies":true` now go.  A chart
 * over the byte check's survivors (a few: CM_EXIT_CHECK_MAX) in trie order, each resuming from
 * the sets of its common prefix with the one before, once per (entry, return row, state) kept
 * beside the byte check's list.  Off: the byte check alone (the tests' reference).
 * Process-wide. */
/* only over a byte check's list of at most this many (ws's after sp_339's values: 36), taken
 * again: over a string body's list of thousands a first mask paid ~0.26 M, and over every list
 * at its first use 88 of the first-docs row's fills rose by 5 K or more */
#define CM_EXIT_CHECK_MAX 64
static atomic_int g_exits_on = 1;
static atomic_size_t g_exit_lists;
void cm_compose_unread_exits_enable(int on) { atomic_store(&g_exits_on, on ? 1 : 0); }
size_t cm_compose_unread_exit_lists(void) { return atomic_load(&g_exit_lists); }

/* May p's candidates be chosen by its exits? */
static bool exits_can(const cm_grammar *g, const cm_part *p) {
    return atomic_load_explicit(&g_exits_on, memory_order_relaxed) && !g->has_segments && g->t.n_la <= 1 &&
           p->ret1 && !p->la;
}

/* unread_filter by p's exits (above) over list[0 .. n), the byte check's survivors: how many kept
 * into buf; SIZE_MAX where it declines (an item of the first set calls R, a limit or memory ran
 * out). */
static size_t unread_exits(const cm_grammar *g, uint32_t start, const uint32_t *list, size_t n,
                           const uint32_t *reads, uint32_t *buf) {
    const cm_tables *t = &g->t;
    uint32_t rule = t->state_rule[start];
    cm_chart c;
    if (cm_chart_init_item(&c, g, start, CM_OUTER)) return SIZE_MAX;
    size_t kept = 0;
    for (size_t i = c.set_start[0]; i < c.set_start[1]; i++) {
        uint32_t st = cm_st(c.items[i].state);
        for (uint32_t e = t->ref_off[st]; e < t->ref_off[st + 1]; e++)
            if (t->ref_rule[e] == rule) kept = SIZE_MAX;
    }
    const uint8_t *prev = NULL;
    uint32_t have = 0;  /* sets are built for prev[0 .. have) */
    uint8_t ex[256];    /* ex[j]: the chart exited after j bytes (j <= have) */
    ex[0] = 0;
    for (size_t i = 0; i < n && kept != SIZE_MAX; i++) {
        uint32_t len;
        const uint8_t *b = cm_trie_bytes(g->v, list[i], &len);
        uint32_t d = prev ? cm_common_prefix(prev, have, b, len) : 0;
        bool on = false;
        for (uint32_t j = 1; j <= d && j < len && !on; j++) on = ex[j] && cm_bit(reads, b[j]);
        cm_chart_truncate(&c, (size_t)d + 1);
        for (; !on && d + 1 < len && d + 1 < sizeof ex; d++) {
            int r = cm_chart_scan(&c, g, b[d]);
            if (r < 0) kept = SIZE_MAX;
            if (r <= 0) break;
            ex[d + 1] = c.exited;
            on = c.exited && cm_bit(reads, b[d + 1]);
        }
        if (d + 1 >= sizeof ex && !on) kept = SIZE_MAX;  /* past ex's room: not decided here */
        prev = b;
        have = d;
        if (on && kept != SIZE_MAX) buf[kept++] = list[i];
    }
    cm_chart_free(&c);
    return kept;
}

/* The filtered lists kept (cands_memo): sp_339's chain of ~37 optional properties filters the
 * same part (`ws`'s start entry, ~200 uncertain tokens) against the same return row (a state
 * that reads `,` alone) at every level of the chain, in every mask that composes it: ~7,900
 * candidates read byte by byte in one mask.  The list depends on the part's entry and the
 * row's bytes alone, so it is kept by the cache, keyed by the entry (interned: equal entries
 * are one, freed with the cache; a part the cache could not keep, p->owned, is filtered and
 * not kept) and the row's eight words.  Under the cache lock (cm_compose's), as the tail
 * parts; its bytes count against the cache's limit, past which lists are filtered each time. */
struct cm_cands_slot {
    const cm_entry *e;          /* NULL: an empty slot */
    uint32_t row[8];
    uint32_t state;             /* the part's state where its exits chose the list (unread_exits);
                                 * UINT32_MAX where the byte check alone did */
    uint32_t *cands;            /* the kept tokens; NULL: all of e's (none left out) */
    size_t n;
    bool ascending;             /* the list is ascending and distinct (checked when kept) */
};

static atomic_int g_cands_memo_on = 1;
static atomic_size_t g_cands_memo_hits;
void cm_compose_cands_memo_enable(int on) { atomic_store(&g_cands_memo_on, on ? 1 : 0); }
size_t cm_compose_cands_memo_hits(void) { return atomic_load(&g_cands_memo_hits); }

void cm_cands_free(cm_cands_slot *s, size_t cap) {
    for (size_t i = 0; s && i < cap; i++) free(s[i].cands);
    free(s);
}

static size_t cands_hash(const cm_entry *e, const uint32_t *row, uint32_t state) {
    uint64_t h = (uint64_t)(uintptr_t)e * 0x9E3779B97F4A7C15ULL ^ state;
    for (int i = 0; i < 8; i++) h = (h ^ row[i]) * 0x100000001B3ULL;
    return (size_t)(h ^ (h >> 31));
}

/* The slot of (e, row, state), or the empty one where it goes; cap > 0. */
static cm_cands_slot *cands_find(cm_cands_slot *t, size_t cap, const cm_entry *e, const uint32_t *row,
                                 uint32_t state) {
    size_t s = cands_hash(e, row, state) & (cap - 1);
    while (t[s].e && (t[s].e != e || t[s].state != state || memcmp(t[s].row, row, sizeof t[s].row)))
        s = (s + 1) & (cap - 1);
    return &t[s];
}

/* Room for one more list: false where memory or the cache's limit is short. */
static bool cands_grow(const cm_grammar *g) {
    cm_cache *c = g->cache;
    if ((c->cands_used + 1) * 2 <= c->cands_cap) return true;
    size_t cap = c->cands_cap ? c->cands_cap * 2 : 64;
    if (atomic_load(&c->bytes) + (cap - c->cands_cap) * sizeof(cm_cands_slot) > g->lim.max_cache_bytes) return false;
    cm_cands_slot *t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < c->cands_cap; i++)
        if (c->cands_slots[i].e)
            *cands_find(t, cap, c->cands_slots[i].e, c->cands_slots[i].row, c->cands_slots[i].state) =
                c->cands_slots[i];
    free(c->cands_slots);
    atomic_fetch_add(&c->bytes, (cap - c->cands_cap) * sizeof *t);
    c->cands_slots = t;
    c->cands_cap = cap;
    return true;
}

/* Keep list[0 .. kept) (NULL: all of ce's uncertain tokens) under (ce, reads, key), where the
 * cache's limit allows. */
static void cands_keep(const cm_grammar *g, const cm_entry *ce, const uint32_t *reads, uint32_t key,
                       const uint32_t *list, size_t kept) {
    cm_cache *c = g->cache;
    size_t bytes = list ? kept * sizeof *list : 0;
    if (atomic_load(&c->bytes) + bytes > g->lim.max_cache_bytes || !cands_grow(g)) return;
    uint32_t *keep = list ? malloc(bytes ? bytes : 1) : NULL;
    if (list && !keep) return;
    if (bytes) memcpy(keep, list, bytes);
    cm_cands_slot *x = cands_find(c->cands_slots, c->cands_cap, ce, reads, key);
    x->e = ce;
    x->state = key;
    memcpy(x->row, reads, sizeof x->row);
    x->cands = keep;
    x->n = kept;
    x->ascending = ascending(keep ? keep : ce->uncertain, kept);
    c->cands_used++;
    atomic_fetch_add(&c->bytes, bytes);
}

/* p's candidates: its uncertain tokens, less those no byte of which after the first `reads`
 * holds (the cache's list, or into buf, room for them all, where some are left out).
 * *ascending: the list is known ascending and distinct (a kept list, checked when it was kept);
 * false where the caller must check it. */
static const uint32_t *part_cands(const cm_grammar *g, const cm_part *p, uint32_t *buf, size_t *n,
                                  bool *ascending_known) {
    cm_cache *c = g->cache;
    const cm_entry *ce = p->e;
    const uint32_t *reads = unread_row(g, p);
    *n = ce->n_uncertain;
    *ascending_known = false;
    if (!reads || !*n) return ce->uncertain;
    bool memo = !p->owned && atomic_load_explicit(&g_cands_memo_on, memory_order_relaxed);
    const uint32_t *list = NULL;
    bool again = false;  /* the byte check's list found kept: a list taken more than once */
    cm_cands_slot *x = memo && c->cands_cap ? cands_find(c->cands_slots, c->cands_cap, ce, reads, UINT32_MAX) : NULL;
    if (x && x->e) {
        again = true;
        atomic_fetch_add_explicit(&g_cands_memo_hits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_unread_skipped, *n - x->n, memory_order_relaxed);
        *n = x->n;
        *ascending_known = x->ascending;
        list = x->cands ? x->cands : ce->uncertain;
    } else {
        size_t kept = unread_filter(g, ce, reads, buf);
        atomic_fetch_add_explicit(&g_unread_skipped, *n - kept, memory_order_relaxed);
        if (memo) cands_keep(g, ce, reads, UINT32_MAX, kept < *n ? buf : NULL, kept);
        list = kept < *n ? buf : ce->uncertain;
        *n = kept;
    }
    if (!again || !*n || *n > CM_EXIT_CHECK_MAX || !exits_can(g, p)) return list;
    /* the exit check over the byte check's few survivors, kept under the part's state, from the
     * list's second use on (a chain's `ws` at every level; a list taken once pays no chart) */
    x = memo && c->cands_cap ? cands_find(c->cands_slots, c->cands_cap, ce, reads, p->state) : NULL;
    if (x && x->e) {
        atomic_fetch_add_explicit(&g_cands_memo_hits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_unread_skipped, *n - x->n, memory_order_relaxed);
        *n = x->n;
        *ascending_known = x->ascending;
        return x->cands;
    }
    uint32_t out[CM_EXIT_CHECK_MAX];
    size_t kept = unread_exits(g, p->state, list, *n, reads, out);
    if (kept == SIZE_MAX) return list;  /* declined: the byte check's list */
    atomic_fetch_add_explicit(&g_exit_lists, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_unread_skipped, *n - kept, memory_order_relaxed);
    if (kept) memcpy(buf, out, kept * sizeof *buf);
    if (memo) cands_keep(g, ce, reads, p->state, buf, kept);
    *n = kept;
    *ascending_known = false;
    return buf;
}

/* cand[0 .. n) (ascending, distinct) merged with v[0 .. m) (the same) in
 * place, cand having room for n + m, through tmp (as much room): the number. */
static size_t merge_into(uint32_t *cand, size_t n, const uint32_t *v, size_t m, uint32_t *tmp) {
    size_t i = 0, j = 0, k = 0;
    while (i < n && j < m) {
        uint32_t a = cand[i], b = v[j];
        tmp[k++] = a < b ? a : b;
        i += a <= b;
        j += b <= a;
    }
    while (i < n) tmp[k++] = cand[i++];
    while (j < m) tmp[k++] = v[j++];
    memcpy(cand, tmp, k * sizeof *cand);
    return k;
}

/* The parts' candidate lists, each ascending and distinct (an entry's
 * uncertain trie entries are), merged into cand: their number; SIZE_MAX (cand
 * then undefined: gather_parts writes it again) if some list is not, or out of
 * memory.  A qsort through a comparison function of a few hundred candidates
 * was 43 K instructions a composed entry: sp_339's chain of 37 optional
 * properties composes each.  The lists checked are the ones merged (a part's
 * kept list: checked once, when it was kept), not the entries' whole lists:
 * `ws`'s ~200 uncertain tokens checked at every level of that chain were
 * ~1.5 K instructions a level for a list of ~36 candidates. */
static size_t merge_parts(const cm_grammar *g, const cm_part *parts, uint32_t n_parts, size_t n_max, uint32_t *cand) {
    for (uint32_t i = 0; i < n_parts; i++) {
        uint32_t la = parts[i].la;
        if (la && !ascending(g->la_pending + g->la_pending_off[la], g->la_pending_off[la + 1] - g->la_pending_off[la]))
            return SIZE_MAX;
    }
    uint32_t *tmp = malloc(2 * (n_max ? n_max : 1) * sizeof *tmp), *buf = tmp + (n_max ? n_max : 1);
    if (!tmp) return SIZE_MAX;
    size_t n = 0;
    for (uint32_t i = 0; i < n_parts; i++) {
        uint32_t la = parts[i].la;
        size_t m;
        bool known;
        const uint32_t *pc = part_cands(g, &parts[i], buf, &m, &known);
        if (!known && !ascending(pc, m)) {
            free(tmp);
            return SIZE_MAX;
        }
        n = merge_into(cand, n, pc, m, tmp);
        if (la) n = merge_into(cand, n, g->la_pending + g->la_pending_off[la],
                               g->la_pending_off[la + 1] - g->la_pending_off[la], tmp);
    }
    free(tmp);
    return n;
}

/* The parts' accepted tokens into w (those their debts allow). */
static void or_parts(const cm_grammar *g, const cm_part *parts, uint32_t n_parts, cm_walk *w) {
    for (uint32_t i = 0; i < n_parts; i++) {
        uint32_t la = parts[i].la;
        cm_or_accepted(g, w->bits, parts[i].e, la ? g->la_allow + (size_t)la * g->n_words : NULL);
    }
}

/* The first bytes whose names a part without a debt holds (cm_entry.names) into w->names:
 * or_parts sets them in w's bits. */
static void parts_names(const cm_part *parts, uint32_t n_parts, cm_walk *w) {
    for (uint32_t i = 0; i < n_parts; i++)
        if (!parts[i].la)
            for (int j = 0; j < 8; j++) w->names[j] |= parts[i].e->names[j];
}

/* The parts' candidates into cand (sorted, distinct): their number. */
static size_t gather_parts(const cm_grammar *g, const cm_part *parts, uint32_t n_parts, size_t n_max, uint32_t *cand) {
    size_t n_cand = merge_parts(g, parts, n_parts, n_max, cand);
    if (n_cand != SIZE_MAX) return n_cand;
    n_cand = 0;
    for (uint32_t i = 0; i < n_parts; i++) {
        uint32_t la = parts[i].la;
        size_t m;
        bool known;
        const uint32_t *pc = part_cands(g, &parts[i], cand + n_cand, &m, &known);
        if (m && pc != cand + n_cand) memcpy(cand + n_cand, pc, m * sizeof *cand);
        n_cand += m;
        if (la) {
            uint32_t a = g->la_pending_off[la], z = g->la_pending_off[la + 1];
            if (z > a) memcpy(cand + n_cand, g->la_pending + a, (z - a) * sizeof *cand);
            n_cand += z - a;
        }
    }
    return n_cand ? cm_sort_unique_u32(cand, n_cand) : 0;
}

/* A level that only passes its callee on (issue 12, session 47, helper `lark47`).  A state s
 * that calls one rule R and does nothing else (no byte, no token, not final), whose call returns
 * to a final state that does nothing either, is R under another name: `?expr: or_expr` in
 * sql.lark (state 894 of rule 10 calls rule 22 and ends).  The chart of (s, OUTER) is R's chart
 * with s's item advanced to the return wherever R completes, where s's rule completes too, so a
 * token is accepted, exits and dies in it exactly where it does in R's, and where R's FOLLOW is
 * s's rule's, the walk's uncertain tokens are R's.  Where R returns to that one state alone,
 * every context R completes in is s's rule completing, so the upward filter asks the same
 * question of each uncertain token for both and answers alike: the entry of s is R's entry, taken
 * whole (its accepted tokens, its filtered uncertain list).  A walk would list R's ~117
 * uncertain tokens through s's chart and filter them again: 0.23 M of `sql.lark:0:1` (the
 * listed walk 137 K, the filter 96 K).  Off: the listed walk and the filter, the reference. */
static atomic_int g_pass_on = 1;
static atomic_size_t g_pass_taken;
void cm_compose_pass_enable(int on) { atomic_store(&g_pass_on, on ? 1 : 0); }
size_t cm_compose_pass_taken(void) { return atomic_load(&g_pass_taken); }

static bool no_bytes(const cm_grammar *g, uint32_t state) {
    const uint32_t *nb = g->next_bytes + (size_t)state * 8;
    for (int j = 0; j < 8; j++)
        if (nb[j]) return false;
    return true;
}

/* Is s's entry its one part's (above)? */
static bool pass_through(const cm_grammar *g, uint32_t state, const cm_part *parts, uint32_t n_parts) {
    const cm_tables *t = &g->t;
    if (!atomic_load_explicit(&g_pass_on, memory_order_relaxed) || n_parts != 1 || g->has_segments) return false;
    if (t->ref_off[state + 1] - t->ref_off[state] != 1) return false;
    uint32_t e = t->ref_off[state], r = t->ref_rule[e], ret = t->ref_target[e], rule = t->state_rule[state];
    if (r == rule || r == t->start_rule || marker_rule(g, r) || t->rule_nullable[r] || parts[0].la || parts[0].state != t->rule_start[r])
        return false;
    if (g->has_tokens[state] || t->accepting[state] || !no_bytes(g, state)) return false;
    if (!t->accepting[ret] || g->has_tokens[ret] || t->ref_off[ret] != t->ref_off[ret + 1] || !no_bytes(g, ret) ||
        t->state_rule[ret] != rule)
        return false;
    if (g->ret_off[r + 1] - g->ret_off[r] != 1 || g->ret_state[g->ret_off[r]] != ret) return false;
    const cm_entry *pe = parts[0].e;
    if (pe->wrap_bits || pe->n_rest) return false;
    return !memcmp(t->rule_follow + (size_t)r * 8, t->rule_follow + (size_t)rule * 8, 8 * sizeof *t->rule_follow);
}

/* s's entry as its part's: accepted, uncertain (filtered already), names. */
static int pass_take(const cm_grammar *g, const cm_part *part, cm_walk *w) {
    const cm_entry *pe = part->e;
    parts_names(part, 1, w);
    or_parts(g, part, 1, w);
    int rc = CM_OK;
    for (uint32_t i = 0; i < pe->n_uncertain && !rc; i++) rc = cm_walk_push_uncertain(w, pe->uncertain[i]);
    if (rc) return rc;
    w->n_accepted = pe->n_accepted;
    w->count_later = false;
    w->filtered = true;
    atomic_fetch_add_explicit(&g_pass_taken, 1, memory_order_relaxed);
    return CM_OK;
}

int cm_compose(const cm_grammar *g, uint32_t state, const cm_part *parts, uint32_t n_parts, size_t n_cand,
               cm_walk *w) {
    const cm_vocab *v = g->v;
    cands x = {0};
    uint32_t *cand = NULL;
    if (pass_through(g, state, parts, n_parts)) return pass_take(g, parts, w);
    /* The first bytes whose names a part holds (name sets on): the byte edges' walks do not
     * set those names (cm_walk_names), the parts' tokens ORed in after them bring them.  The
     * parts' bits themselves after the edges, as always: a chain's walk of the edges
     * (cm_chain_bytes) writes the bits whole. */
    if (cm_name_sets_on()) parts_names(parts, n_parts, w);
    int rc = walk_byte_edges(g, state, w, &x);
    /* a left-recursive start (its rule calls itself first): the byte walks' uncertain tokens,
     * those that end the rule, may go on after the call in the real chart: checked too */
    bool self = false;
    for (uint32_t e = g->t.ref_off[state]; e < g->t.ref_off[state + 1] && !self; e++)
        self = cm_compose_self_ref(g, state, e);
    if (!rc && self && w->n_unc) rc = cands_add(&x, w->unc, w->n_unc);
    if (!rc) {
        cand = malloc((n_cand + x.n ? n_cand + x.n : 1) * sizeof *cand);
        if (!cand) rc = CM_ERR_NOMEM;
    }
    if (!rc) {
        or_parts(g, parts, n_parts, w);
        n_cand = gather_parts(g, parts, n_parts, n_cand, cand);
        if (x.n) {
            memcpy(cand + n_cand, x.k, x.n * sizeof *cand);
            n_cand = cm_sort_unique_u32(cand, n_cand + x.n);
        }
        /* its scans of the tokens it leaves uncertain are the filter's (cache.c): kept */
        rc = cm_walk_listed_noted(g, state, cand, n_cand, w);
        if (!rc && self) atomic_fetch_add_explicit(&g_self_built, 1, memory_order_relaxed);
    }
    if (!rc) {
        /* the byte walks' uncertain tokens that a call accepts, and repeats, go */
        size_t n_unc = w->n_unc ? cm_sort_unique_u32(w->unc, w->n_unc) : 0, kept = 0;
        for (size_t i = 0; i < n_unc; i++)
            if (!cm_bit(w->bits, v->trie_ids[w->unc[i]])) w->unc[kept++] = w->unc[i];
        w->n_unc = kept;
        /* the count: from the 4,008 words (Llama-3) at once, or as cm_walk_finish takes the
         * ids out (sp_339's chain of optional properties composes 164 entries in one mask,
         * each counted at ~2.7 K instructions before its ids were taken in another pass) */
        w->count_later = count_later(g, parts, n_parts, w);
        if (w->count_later) atomic_fetch_add_explicit(&g_counted_later, 1, memory_order_relaxed);
        else w->n_accepted = (uint32_t)cm_count_bits(w->bits, g->n_words);
    }
    free(x.k);
    free(cand);
    return rc;
}

/* ---- loop exits into an operand (loops.c) ----
 *
 * A loop's or a run's exit on byte x leaves its subtree [k, k_end) (entries
 * sharing their first D bytes, x the last of them) to the chart (z, OUTER) at
 * depth D, z the state x leads to.  Where z is a position before an operand
 * (`ws unary` after `*` in c.gbnf's multiplicative: a blank run, a comment,
 * then the operand), its chart predicts the operand's whole chain, and a walk
 * from it makes configurations of that chart which no other level's exits
 * meet (each level's z predicts the chain from its own operand down), ~10-16 K
 * instructions an entry past the operator.  When tail_target(z) allows, the
 * chart of (z, OUTER) is the union of its parts, as in walk_tails, only over
 * [k, k_end) from depth D instead of a first byte's subtree from depth 1:
 *   - a byte edge z -c-> z': the entries with c at depth D, from (z', OUTER)
 *     at depth D + 1 (a blank: z again, or the next blank's position), through
 *     the same split where z' allows, else its run walk;
 *   - a call z -R-> z'': R's derivation from (start(R), OUTER) at depth D.
 *     A start that reads no byte of its own, does not accept, and calls only
 *     non-nullable rules without lookahead markers (the chain's levels: each
 *     start only calls the next, assign's calls unary and cond) is the union
 *     of its callees' derivations and its own items, which read nothing until
 *     a callee completes; so its callees stand for it, and the walks are made
 *     from the starts where that stops (c.gbnf's expression chain: unary's
 *     alone, whichever level's operator was read), whose configurations every
 *     level's exits share.  A token such a walk accepts is alive in z's chart;
 *     one it rejects with no completion of its rule followed by a byte of its
 *     FOLLOW dies in that part; the others (its uncertain ones) are decided by
 *     z's real chart from depth D (cm_walk_listed_at), which holds every part.
 * Entries exactly as the walk from z: the parts' accepted tokens are z's, the
 * uncertain ones of the byte parts that another part accepts go. */

static atomic_int g_exit_on = 1;
static atomic_size_t g_exit_tails;
void cm_exit_tails_enable(int on) { atomic_store(&g_exit_on, on ? 1 : 0); }
size_t cm_exit_tails(void) { return atomic_load(&g_exit_tails); }

/* the fewest entries an exit's subtree needs to be split */
#define CM_EXIT_MIN 8
/* the most starts the parts of one z may stand for */
#define CM_EXIT_STARTS 16

/* Does start state s stand for its callees (no byte of its own, no accept, no
 * token edge, only calls of non-nullable rules without lookahead markers)? */
static bool exit_passes(const cm_grammar *g, uint32_t s) {
    const cm_tables *t = &g->t;
    if (!tail_target(g, s)) return false;
    const int32_t *row = t->trans + (size_t)s * t->n_classes;
    for (uint32_t c = 0; c < t->n_classes; c++)
        if (row[c] >= 0) return false;
    return true;
}

/* The starts z's calls stand for, into out[CM_EXIT_STARTS]: their number, 0
 * if more (or a level recurs without a start of its own: the walk then). */
static uint32_t exit_starts(const cm_grammar *g, uint32_t z, uint32_t *out) {
    const cm_tables *t = &g->t;
    uint32_t q[CM_EXIT_STARTS * 2], n_q = 0, n = 0;
    for (uint32_t e = t->ref_off[z]; e < t->ref_off[z + 1]; e++) {
        uint32_t s = t->rule_start[t->ref_rule[e]], i = 0;
        while (i < n_q && q[i] != s) i++;
        if (i < n_q) continue;
        if (n_q == CM_EXIT_STARTS * 2) return 0;
        q[n_q++] = s;
    }
    for (uint32_t h = 0; h < n_q; h++) {  /* breadth first, each start once */
        uint32_t s = q[h];
        if (!exit_passes(g, s)) {
            if (n == CM_EXIT_STARTS) return 0;
            out[n++] = s;
            continue;
        }
        for (uint32_t e = t->ref_off[s]; e < t->ref_off[s + 1]; e++) {
            uint32_t r = t->rule_start[t->ref_rule[e]], i = 0;
            while (i < n_q && q[i] != r) i++;
            if (i < n_q) continue;
            if (n_q == CM_EXIT_STARTS * 2) return 0;
            q[n_q++] = r;
        }
    }
    return n;
}

/* The first entry in [k, k_end) (entries sharing their first d bytes, each
 * longer than d, so sorted by their byte at d) whose byte at d is >= c. */
static size_t byte_at_from(const cm_vocab *v, size_t k, size_t k_end, uint32_t d, unsigned c) {
    while (k < k_end) {
        size_t mid = k + (k_end - k) / 2;
        if (v->trie_data[v->trie_off[mid] + d] < c) k = mid + 1;
        else k_end = mid;
    }
    return k;
}

static int exit_split(const cm_grammar *g, uint32_t z, uint32_t rule, size_t k, size_t k_end, uint32_t d,
                      cm_walk *w);

/* How many of the entries [k, k_end), or of the listed ones, are accepted in bits. */
static uint32_t accepted_in(const cm_vocab *v, const uint32_t *bits, size_t k, size_t k_end) {
    uint32_t n = 0;
    for (size_t i = k; i < k_end; i++) n += cm_bit(bits, v->trie_ids[i]);
    return n;
}

static uint32_t accepted_of(const cm_vocab *v, const uint32_t *bits, const uint32_t *ks, size_t n_k) {
    uint32_t n = 0;
    for (size_t i = 0; i < n_k; i++) n += cm_bit(bits, v->trie_ids[ks[i]]);
    return n;
}

/* The bytes that (s, OUTER) may read first, or'ed into f[8]: s's own and those of
 * the starts its calls predict (and of the states after nullable callees), every
 * byte where a token edge or a lookahead marker is met; seen[n_states] marks the
 * states visited.  The depth of the recursion is that of the calls: bounded by
 * the states, each visited once. */
static void first_bytes(const cm_grammar *g, uint32_t s, uint32_t *f, uint8_t *seen) {
    const cm_tables *t = &g->t;
    if (seen[s]) return;
    seen[s] = 1;
    if (g->has_tokens[s]) {
        memset(f, 0xff, 8 * sizeof *f);
        return;
    }
    for (int j = 0; j < 8; j++) f[j] |= g->next_bytes[(size_t)s * 8 + j];
    for (uint32_t e = t->ref_off[s]; e < t->ref_off[s + 1]; e++) {
        uint32_t r = t->ref_rule[e];
        if (marker_rule(g, r)) {
            memset(f, 0xff, 8 * sizeof *f);
            return;
        }
        first_bytes(g, t->rule_start[r], f, seen);
        if (t->rule_nullable[r]) first_bytes(g, t->ref_target[e], f, seen);
    }
}

/* The bytes the starts of a split may read first: each one's, their union, and
 * whether two share one; made on first need. */
typedef struct exit_firsts {
    uint32_t n_s;
    const uint32_t *starts;
    bool made, overlap;
    uint32_t any[8];
} exit_firsts;

static int firsts_make(const cm_grammar *g, exit_firsts *fs) {
    uint8_t *seen = calloc(g->t.n_states, 1);
    if (!seen) return CM_ERR_NOMEM;
    memset(fs->any, 0, sizeof fs->any);
    fs->overlap = false;
    for (uint32_t i = 0; i < fs->n_s; i++) {
        uint32_t f[8] = {0};
        if (i) memset(seen, 0, g->t.n_states);
        first_bytes(g, fs->starts[i], f, seen);
        for (int j = 0; j < 8; j++) {
            fs->overlap |= (fs->any[j] & f[j]) != 0;
            fs->any[j] |= f[j];
        }
    }
    free(seen);
    fs->made = true;
    return CM_OK;
}

/* Entries [k, k_end) from (z, OUTER) at depth d: split where z allows, else its run walk. */
static int exit_part(const cm_grammar *g, uint32_t z, uint32_t rule, size_t k, size_t k_end, uint32_t d,
                     cm_walk *w) {
    int rc = exit_split(g, z, rule, k, k_end, d, w);
    if (rc) return rc < 0 ? rc : CM_OK;
    return cm_run_walk(g, z, rule, k, k_end, d, w);
}

/* 1 done, 0 declined (w untouched), < 0 error. */
static int exit_split(const cm_grammar *g, uint32_t z, uint32_t rule, size_t k, size_t k_end, uint32_t d,
                      cm_walk *w) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint32_t starts[CM_EXIT_STARTS], n_s;
    if (!atomic_load_explicit(&g_exit_on, memory_order_relaxed) || k_end - k < CM_EXIT_MIN ||
        k_end > v->n_trie || d > v->max_len || !tail_target(g, z) || !(n_s = exit_starts(g, z, starts)))
        return 0;
    for (uint32_t i = 0; i < n_s; i++)
        if (starts[i] == z) return 0;
    /* only starts that another position stood on already: a position alone over its starts
     * (a JSON Schema's property, its own value rule below it) would make their configurations
     * for itself, where its walk finds its own */
    cm_cache *ca = g->cache;
    if (!ca->exit_asker && !(ca->exit_asker = calloc(t->n_states, sizeof *ca->exit_asker))) return 0;
    bool shared = false;
    for (uint32_t i = 0; i < n_s; i++) {
        uint32_t a = ca->exit_asker[starts[i]];
        if (!a) ca->exit_asker[starts[i]] = z + 1;
        else shared |= a != z + 1;
    }
    if (!shared) return 0;
    atomic_fetch_add_explicit(&g_exit_tails, 1, memory_order_relaxed);
    size_t k1 = k;
    while (k1 < k_end && v->trie_off[k1 + 1] - v->trie_off[k1] <= d) k1++;
    /* the bytes each start may read first (made when asked: exit_firsts) */
    exit_firsts fs = {.n_s = n_s, .starts = starts};
    int rc = n_s > 1 ? firsts_make(g, &fs) : CM_OK;
    if (rc) return rc;
    /* the calls' parts first (nothing of [k, k_end) is accepted yet: their counts hold), their
     * uncertain entries apart: the candidates */
    size_t unc0 = w->n_unc;
    uint32_t *unc = w->unc;
    size_t n_unc = w->n_unc, cap = w->cap_unc;
    w->unc = NULL;
    w->n_unc = w->cap_unc = 0;
    /* two starts may accept the same token (one of d bytes alone: every start): then their
     * count is the bits they added */
    size_t k_c = fs.overlap ? k_end : k1;
    uint32_t acc0 = w->n_accepted, before = n_s > 1 ? accepted_in(v, w->bits, k, k_c) : 0;
    for (uint32_t i = 0; i < n_s && !rc; i++) rc = cm_flat_walk(g, starts[i], t->state_rule[starts[i]], k, k_end, d, w);
    if (n_s > 1) w->n_accepted = acc0 + (accepted_in(v, w->bits, k, k_c) - before);
    uint32_t *cand = w->unc;
    size_t n_cand = w->n_unc;
    w->unc = unc;
    w->n_unc = n_unc;
    w->cap_unc = cap;
    /* z's own bytes: the entries longer than d, by their byte there; on a byte a start may
     * read first, a part may accept what a call's part did: its count is the bits it added */
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    for (size_t lo = k1, hi; lo < k_end && !rc; lo = hi) {  /* each byte at d present, once */
        uint8_t c = data[off[lo] + d];
        hi = v->skip[off[lo] + d];
        if (hi > k_end || hi <= lo || data[off[hi - 1] + d] != c) hi = byte_at_from(v, lo, k_end, d, c + 1u);
        int32_t to = t->trans[(size_t)z * t->n_classes + t->byte_class[c]];
        if (to < 0) continue;
        if (!fs.made && (rc = firsts_make(g, &fs))) break;
        if (!cm_bit(fs.any, c)) {  /* no start reads c: nothing of [lo, hi) accepted yet */
            rc = exit_part(g, (uint32_t)to, rule, lo, hi, d + 1, w);
            continue;
        }
        acc0 = w->n_accepted;
        before = accepted_in(v, w->bits, lo, hi);
        rc = exit_part(g, (uint32_t)to, rule, lo, hi, d + 1, w);
        w->n_accepted = acc0 + (accepted_in(v, w->bits, lo, hi) - before);
    }
    /* the candidates on z's chart (which counts nothing) */
    if (!rc && n_cand) {
        n_cand = cm_sort_unique_u32(cand, n_cand);
        before = accepted_of(v, w->bits, cand, n_cand);
        rc = cm_walk_listed_at(g, z, cand, n_cand, d, w);
        w->n_accepted += accepted_of(v, w->bits, cand, n_cand) - before;
    }
    free(cand);
    if (rc) return rc;
    /* this subtree's uncertain entries once, those accepted by another part gone */
    size_t n = w->n_unc - unc0, kept = unc0;
    if (n) n = cm_sort_unique_u32(w->unc + unc0, n);
    for (size_t i = unc0; i < unc0 + n; i++)
        if (!cm_bit(w->bits, v->trie_ids[w->unc[i]])) w->unc[kept++] = w->unc[i];
    w->n_unc = kept;
    return 1;
}

int cm_compose_exit(const cm_grammar *g, uint32_t z, uint32_t rule, size_t k, size_t k_end, uint32_t d, cm_walk *w) {
    return exit_split(g, z, rule, k, k_end, d, w);
}
