/* Stack verdicts: an uncertain token's verdict keyed by the enclosing stack its check read.
 *
 * check_token runs the real chart over a candidate's bytes from the current set.  What
 * that run does depends on the current set (scanning reads it) and on the sets that its
 * completions read: completing an item begun at set o advances the items of o that wait
 * on its rule, nothing else (prediction only adds items of the new set; a grammar with
 * lookahead debts, whose completions also read the bytes between, is left out).  Those
 * sets are reachable from the current set through origins, and origins only point down,
 * so if the lowest set a check's completions read is L, the run is a function of the
 * reachable sets at or above L: its "frames", f of them, newest first.  After an operand
 * of an expression grammar (c.gbnf: ` ())`, ` ++)`, ` -->`) the same few hundred tokens
 * close the operand, a call and a parenthesis at every operand; their run reads the sets
 * up to the enclosing parenthesis, which recur item for item though at other positions.
 *
 * The key of f frames is their items in that order, each set's size first, each item as
 * (state, label of its origin): the origin's rank among the frames, or BELOW for a set
 * under the lowest frame.  Equal keys give the same run: the new sets' items, as
 * (state, label), are equal at every byte (scanning reads the state; completion into a
 * frame reads the same items), and no run completes an item labelled BELOW, since the
 * run the verdict was stored from completed none (L is its lowest read).  So the verdict
 * is stored under the key of exactly the frames its check read.
 * The keys name no position, so they hold across masks, rollbacks, documents and matchers:
 * the store is the grammar's (a mutex; a full store starts over), each token noting the
 * depths it has verdicts at, which a later mask looks up over its own chart.  Only the
 * verdicts of checks that scanned a byte are stored (the rest cost nothing to redo). */
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "stackmemo.h"

#define BELOW UINT32_MAX

static atomic_size_t g_hits, g_gate_closes;
static atomic_int g_gate_force;

size_t cm_stack_verdict_gate_closes(void) { return atomic_load(&g_gate_closes); }

void cm_stack_verdict_gate_force(int mode) { atomic_store(&g_gate_force, mode); }

size_t cm_stack_verdict_hits(void) { return atomic_load(&g_hits); }

void cm_stackmemo_note_hits(size_t n) {
    if (n) atomic_fetch_add(&g_hits, n);
}

/* ---- the grammar's store ---- */

int cm_stack_store_init(cm_stack_store *st, size_t n_trie) {
    memset(st, 0, sizeof *st);
    st->n_trie = n_trie;
    return pthread_mutex_init(&st->lock, NULL) ? CM_ERR_NOMEM : CM_OK;
}

/* The arrays alloc_store makes, freed and forgotten (the store as before its first verdict). */
static void free_arrays(cm_stack_store *st) {
    free(st->stack);
    free(st->index);
    free(st->pool);
    free((void *)st->depths);
    free((void *)st->kept);
    free(st->slots);
    st->stack = NULL;
    st->index = NULL;
    st->pool = NULL;
    st->depths = NULL;
    st->kept = NULL;
    st->slots = NULL;
}

void cm_stack_store_destroy(cm_stack_store *st) {
    free_arrays(st);
    pthread_mutex_destroy(&st->lock);
}

/* Forget every stack and verdict (under lock). */
static void clear(cm_stack_store *st) {
    st->n_stack = 0;
    st->n_pool = 0;
    st->n_used = 0;
    memset(st->index, 0xff, CM_SM_INDEX * sizeof *st->index);
    for (size_t k = 0; k < st->n_trie; k++) atomic_store_explicit(&st->depths[k], 0, memory_order_relaxed);
    for (size_t w = 0; w < (st->n_trie + 63) / 64; w++) atomic_store_explicit(&st->kept[w], 0, memory_order_relaxed);
    if (++st->gen == 0) {
        memset(st->slots, 0, st->n_slots * sizeof *st->slots);
        st->gen = 1;
    }
}

/* The store's arrays, on its first verdict (under lock). */
static int alloc_store(cm_stack_store *st) {
    if (st->slots) return CM_OK;
    st->stack = malloc(CM_SM_STACKS * sizeof *st->stack);
    st->index = malloc(CM_SM_INDEX * sizeof *st->index);
    st->pool = malloc(CM_SM_POOL * sizeof *st->pool);
    st->depths = calloc(st->n_trie ? st->n_trie : 1, sizeof *st->depths);
    st->kept = calloc((st->n_trie + 63) / 64 + 1, sizeof *st->kept);
    st->slots = calloc(CM_SM_SLOTS_MIN, sizeof *st->slots);
    st->n_slots = CM_SM_SLOTS_MIN;
    if (!st->stack || !st->index || !st->pool || !st->depths || !st->kept || !st->slots) {
        free_arrays(st);
        return CM_ERR_NOMEM;
    }
    memset(st->index, 0xff, CM_SM_INDEX * sizeof *st->index);
    st->gen = 1;
    return CM_OK;
}

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0xbf58476d1ce4e5b9ULL; }

/* The index slot of a stack with this key: its own, or the empty one it would take. */
static size_t index_slot(const cm_stack_store *st, uint64_t h, const uint64_t *key, uint32_t n) {
    size_t i = (size_t)(h >> 33) % CM_SM_INDEX;
    for (; st->index[i] >= 0; i = (i + 1) % CM_SM_INDEX) {
        const cm_smstack *s = &st->stack[st->index[i]];
        if (s->hash == h && s->n == n && !memcmp(st->pool + s->off, key, n * sizeof *key)) break;
    }
    return i;
}

static size_t slot_of(const cm_stack_store *st, uint32_t stack, uint32_t k) {
    uint64_t h = mix(mix(0x9E3779B97F4A7C15ULL, stack), k);
    size_t mask = st->n_slots - 1, i = (size_t)(h >> 40) & mask;
    while (st->slots[i].gen == st->gen && (st->slots[i].stack != stack || st->slots[i].token >> 1 != k))
        i = (i + 1) & mask;
    return i;
}

/* The verdict slots doubled, up to CM_SM_SLOTS (under lock): 0, or < 0 when they cannot grow. */
static int grow_slots(cm_stack_store *st) {
    if (st->n_slots >= CM_SM_SLOTS) return CM_ERR_LIMIT;
    cm_smslot *old = st->slots;
    size_t n_old = st->n_slots;
    cm_smslot *p = calloc(n_old * 2, sizeof *p);
    if (!p) return CM_ERR_NOMEM;
    st->slots = p;
    st->n_slots = n_old * 2;
    for (size_t i = 0; i < n_old; i++)
        if (old[i].gen == st->gen) st->slots[slot_of(st, old[i].stack, old[i].token >> 1)] = old[i];
    free(old);
    return CM_OK;
}

/* ---- the hit-rate gate ----
 * A verdict stored costs its check's lowest-read pass, its key and a slot; it pays only when a
 * later mask asks it again over the same stack.  Where stacks do not recur (few hits for the
 * verdicts stored), the store is a cost on every mask that checks: so after each window of
 * verdicts stored the gate looks at the hits it got, and closes for a number of masks (the
 * masks then run as with the store off, the verdicts kept) that doubles each time it closes
 * again; when it opens, a new window measures again, so a grammar whose stacks start to recur
 * gets its store back. */

bool cm_stack_store_open(cm_stack_store *st) {
    if (atomic_load_explicit(&g_gate_force, memory_order_relaxed) == 1) return false;
    size_t left = atomic_load_explicit(&st->shut, memory_order_relaxed);
    while (left && !atomic_compare_exchange_weak_explicit(&st->shut, &left, left - 1, memory_order_relaxed,
                                                          memory_order_relaxed)) {
    }
    return !left;
}

/* A window's verdicts stored and hits taken (under lock): the gate closes when they are too few. */
static void gate_count(cm_stack_store *st, size_t puts, size_t hits) {
    st->win_puts += puts;
    st->win_hits += hits;
    bool strict = atomic_load_explicit(&g_gate_force, memory_order_relaxed) == 2;
    if (st->win_puts < (strict ? 64 : CM_SM_GATE_PUTS)) return;
    /* a store's first window stores what later ones take: it is not judged */
    if (st->judged && (strict ? st->win_hits < st->win_puts : st->win_hits * CM_SM_GATE_RATIO < st->win_puts)) {
        st->shut_for = !st->shut_for                    ? (strict ? 4 : CM_SM_GATE_SHUT)
                       : st->shut_for < CM_SM_GATE_SHUT_MAX ? st->shut_for * 2
                                                            : CM_SM_GATE_SHUT_MAX;
        atomic_store_explicit(&st->shut, st->shut_for, memory_order_relaxed);
        atomic_fetch_add(&g_gate_closes, 1);
    }
    st->judged = true;
    st->win_puts = st->win_hits = 0;
}

/* ---- a matcher's scratch ---- */

void cm_stackmemo_free(cm_stackmemo *sm) {
    free(sm->order);
    free(sm->rank);
    free(sm->mark);
    free(sm->reach);
    free(sm->key);
    free(sm->put);
    free(sm->ask);
    memset(sm, 0, sizeof *sm);
}

int cm_stackmemo_begin(cm_stackmemo *sm, size_t base, uint32_t max_len) {
    if (!sm->reach && !(sm->reach = malloc(((size_t)max_len + 2) * sizeof *sm->reach))) return CM_ERR_NOMEM;
    if (base + 1 > sm->cap_sets) {
        size_t cap = sm->cap_sets ? sm->cap_sets : 256;
        while (cap < base + 1) cap *= 2;
        uint32_t *o = realloc(sm->order, cap * sizeof *o);
        if (o) sm->order = o;
        uint32_t *r = realloc(sm->rank, cap * sizeof *r);
        if (r) sm->rank = r;
        uint32_t *mk = realloc(sm->mark, cap * sizeof *mk);
        if (mk) {
            memset(mk + sm->cap_sets, 0, (cap - sm->cap_sets) * sizeof *mk);
            sm->mark = mk;
        }
        if (!o || !r || !mk) return CM_ERR_NOMEM;
        sm->cap_sets = cap;
    }
    if (++sm->mark_gen == 0) {
        memset(sm->mark, 0, sm->cap_sets * sizeof *sm->mark);
        sm->mark_gen = 1;
    }
    sm->mark[base] = sm->mark_gen;
    sm->n_order = 0;
    sm->cursor = (int64_t)base;
    sm->n_key = 0;
    sm->n_ask = 0;
    sm->need = 0;
    memset(sm->made, 0, sizeof sm->made);
    sm->reach[0] = (uint32_t)base;
    return CM_OK;
}

/* Enumerate reachable sets, going down, until `want` of them or set `lo` is passed. */
static void enumerate(cm_stackmemo *sm, const cm_chart *c, uint32_t want, int64_t lo) {
    while (sm->n_order < want && sm->cursor >= lo && sm->cursor >= 0) {
        uint32_t s = (uint32_t)sm->cursor--;
        if (sm->mark[s] != sm->mark_gen) continue;
        sm->rank[s] = sm->n_order;
        sm->order[sm->n_order++] = s;
        for (size_t i = c->set_start[s]; i < c->set_start[s + 1]; i++) {
            uint32_t o = c->items[i].origin;
            if (o < s) sm->mark[o] = sm->mark_gen;
        }
    }
}

uint32_t cm_stackmemo_frames(cm_stackmemo *sm, const cm_chart *c, uint32_t lo) {
    enumerate(sm, c, CM_SM_FRAMES, lo);
    if (sm->mark[lo] != sm->mark_gen || sm->cursor >= (int64_t)lo) return 0;  /* too deep */
    return sm->rank[lo] + 1;
}

/* Make the key of f frames (once a mask): true, or false when it is not memoized. */
static bool make_key(cm_stackmemo *sm, const cm_chart *c, uint32_t f) {
    if (sm->made[f]) return sm->made[f] == 1;
    sm->made[f] = 2;
    enumerate(sm, c, f, 0);
    if (sm->n_order < f) return false;
    uint32_t low = sm->order[f - 1];
    size_t n = 0;
    for (uint32_t r = 0; r < f; r++) n += 1 + c->set_start[sm->order[r] + 1] - c->set_start[sm->order[r]];
    if (n > CM_SM_KEY_MAX) return false;
    if (cm_grow((void **)&sm->key, &sm->cap_key, sm->n_key + n, sizeof *sm->key)) return false;
    uint64_t *key = sm->key + sm->n_key, h = f;
    n = 0;
    for (uint32_t r = 0; r < f; r++) {
        uint32_t s = sm->order[r];
        /* the set's size (an item's packed state never has its top 16 bits all set) */
        key[n++] = (0xFFFFull << 48) | (c->set_start[s + 1] - c->set_start[s]);
        for (size_t i = c->set_start[s]; i < c->set_start[s + 1]; i++) {
            uint32_t o = c->items[i].origin;
            key[n++] = cm_item_key(c->items[i].state, o == s ? r : o >= low ? sm->rank[o] : BELOW);
        }
    }
    for (size_t i = 0; i < n; i++) h = mix(h, key[i]);
    sm->key_off[f] = (uint32_t)sm->n_key;
    sm->key_len[f] = (uint32_t)n;
    sm->key_hash[f] = h ^ (h >> 31);
    sm->id_gen[f] = 0;
    sm->n_key += n;
    sm->made[f] = 1;
    return true;
}

/* The stack id of the key of f frames in the store (under lock), added if `add`; -1 none. */
static int32_t stack_id(cm_stackmemo *sm, cm_stack_store *st, uint32_t f, bool add) {
    if (sm->id_gen[f] == st->gen && (sm->key_id[f] >= 0 || !add)) return sm->key_id[f];
    const uint64_t *key = sm->key + sm->key_off[f];
    uint32_t n = sm->key_len[f];
    uint64_t h = sm->key_hash[f];
    size_t i = index_slot(st, h, key, n);
    int32_t id = st->index[i];
    if (id < 0 && add) {
        if (st->n_stack == CM_SM_STACKS || st->n_pool + n > CM_SM_POOL) {
            clear(st);  /* full: start over */
            i = index_slot(st, h, key, n);
        }
        memcpy(st->pool + st->n_pool, key, n * sizeof *key);
        st->stack[st->n_stack] = (cm_smstack){h, st->n_pool, n};
        st->n_pool += n;
        st->index[i] = id = (int32_t)st->n_stack++;
    }
    sm->id_gen[f] = st->gen;
    sm->key_id[f] = id;
    return id;
}

bool cm_stackmemo_ask(cm_stackmemo *sm, const cm_stack_store *st, uint32_t k) {
    if (!atomic_load_explicit(&st->ready, memory_order_acquire)) return false;
    uint32_t at = atomic_load_explicit(&st->depths[k], memory_order_relaxed);
    if (!at) return false;
    if (cm_grow((void **)&sm->ask, &sm->cap_ask, sm->n_ask + 1, sizeof *sm->ask)) return false;  /* checked now */
    sm->ask[sm->n_ask++] = k;
    sm->need |= at;
    return true;
}

size_t cm_stackmemo_take(cm_stackmemo *sm, cm_stack_store *st, const cm_chart *c, const uint32_t *trie_ids,
                         uint32_t *words) {
    /* the keys of the depths asked about, outside the lock */
    uint32_t ask = 0;
    for (uint32_t b = sm->need; b; b &= b - 1) {
        uint32_t f = (uint32_t)__builtin_ctz(b) + 1;
        if (make_key(sm, c, f)) ask |= 1u << (f - 1);
    }
    sm->need = 0;
    if (!ask) return 0;
    size_t hits = 0, n = 0;
    pthread_mutex_lock(&st->lock);
    int32_t ids[CM_SM_FRAMES + 1];
    for (uint32_t b = ask; b; b &= b - 1) {
        uint32_t f = (uint32_t)__builtin_ctz(b) + 1;
        if ((ids[f] = stack_id(sm, st, f, false)) < 0) ask &= ~(1u << (f - 1));
    }
    for (size_t i = 0; i < sm->n_ask; i++) {
        uint32_t k = sm->ask[i], at = atomic_load_explicit(&st->depths[k], memory_order_relaxed) & ask;
        int r = -1;
        for (; at && r < 0; at &= at - 1) {
            uint32_t f = (uint32_t)__builtin_ctz(at) + 1;
            const cm_smslot *sl = &st->slots[slot_of(st, (uint32_t)ids[f], k)];
            if (sl->gen == st->gen) r = (int)(sl->token & 1);
        }
        if (r < 0) {
            sm->ask[n++] = k;  /* left for the chart */
        } else {
            if (r) words[trie_ids[k] >> 5] |= 1u << (trie_ids[k] & 31);
            hits++;
        }
    }
    gate_count(st, 0, hits);
    pthread_mutex_unlock(&st->lock);
    sm->n_ask = n;
    return hits;
}

void cm_stackmemo_put(cm_stackmemo *sm, uint32_t k, uint32_t f, bool allowed) {
    if (!f || f > CM_SM_FRAMES) return;
    if (cm_grow((void **)&sm->put, &sm->cap_put, sm->n_put + 1, sizeof *sm->put)) return;  /* not kept: slower */
    sm->put[sm->n_put++] = k << 6 | f << 1 | allowed;
}

void cm_stackmemo_flush(cm_stackmemo *sm, cm_stack_store *st, const cm_chart *c) {
    uint32_t need = 0;
    for (size_t i = 0; i < sm->n_put; i++) need |= 1u << ((sm->put[i] >> 1 & 31) - 1);
    for (uint32_t b = need; b; b &= b - 1) make_key(sm, c, (uint32_t)__builtin_ctz(b) + 1);
    pthread_mutex_lock(&st->lock);
    if (!alloc_store(st)) {
        for (size_t i = 0; i < sm->n_put; i++) {
            uint32_t k = sm->put[i] >> 6, f = sm->put[i] >> 1 & 31;
            if (sm->made[f] != 1) continue;
            if (st->n_used * 2 >= st->n_slots && grow_slots(st)) clear(st);  /* full: start over */
            uint32_t id = (uint32_t)stack_id(sm, st, f, true);
            cm_smslot *sl = &st->slots[slot_of(st, id, k)];
            if (sl->gen != st->gen) st->n_used++;
            *sl = (cm_smslot){st->gen, (uint16_t)id, k << 1 | (sm->put[i] & 1)};
            /* mostly noted already: no locked write then */
            uint8_t bit = (uint8_t)(1u << (f - 1));
            if (!(atomic_load_explicit(&st->depths[k], memory_order_relaxed) & bit))
                atomic_fetch_or_explicit(&st->depths[k], bit, memory_order_relaxed);
            if (!(atomic_load_explicit(&st->kept[k >> 6], memory_order_relaxed) >> (k & 63) & 1))
                atomic_fetch_or_explicit(&st->kept[k >> 6], 1ull << (k & 63), memory_order_relaxed);
        }
        atomic_store_explicit(&st->ready, true, memory_order_release);
        gate_count(st, sm->n_put, 0);
    }
    pthread_mutex_unlock(&st->lock);
    sm->n_put = 0;
}
