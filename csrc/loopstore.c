/* Loop walks shared by grammars.
 *
 * A loop walk depends only on the vocabulary and on where each byte leads from
 * each loop state (inside, out, dead): its byte-level form, unlike the
 * grammar-level key, which is by the grammar's own byte classes.  The
 * vocabulary keeps walks by that form for every grammar compiled for it, up to
 * CM_VOCAB_LOOP_BYTES, so a JSON string's inside is walked once per process. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "loops.h"

#define CM_VOCAB_LOOP_BYTES ((size_t)64 << 20)
/* Of which run walks (loops.c, cm_run_walk): one per (run bytes, trie range) a
 * grammar's names were entered at, ~0.3 MB for grammars/c.gbnf at Llama-3's
 * vocabulary.  They are kept whatever a grammar's max_cache_bytes, so they
 * have a bound of their own. */
#define CM_VOCAB_RUN_BYTES ((size_t)16 << 20)
/* Chain analyses kept by their rows (chains.c's memos): apart from the walks, a
 * maxLength-255 string's ~0.3 MB (its 3,700 states' rows by class), so ~50 of
 * them.  Filed while the budget lasts, like the walks (no eviction). */
#define CM_VOCAB_MEMO_BYTES ((size_t)16 << 20)
#define CM_MEMO_BUCKETS 64
#define CM_MEMO_SEEN 4096  /* hints of analyses met once (a memo is kept on the second): a table, overwritten */

struct cm_walk_store {
    pthread_mutex_t lock;
    cm_loop_walk **buckets;     /* [CM_LOOP_BUCKETS], allocated on first use */
    size_t bytes;
    size_t run_bytes;           /* of bytes, held by run walks */
    cm_memo_link *memos[CM_MEMO_BUCKETS];
    size_t memo_bytes;
    uint64_t memo_seen[CM_MEMO_SEEN];
    bool primed;                /* pinned once: the vocabulary's priming is over */
};

static bool is_run(const cm_loop_walk *x) { return !x->chain && x->n_sig == CM_RUN_KEY && x->sig[0] == CM_RUN_MARK; }

void cm_loop_walk_free(cm_loop_walk *lw) {
    if (!lw) return;
    free(lw->sig);
    free(lw->bits);
    free(lw->exits);
    cm_chain_data_free(lw->chain);
    free(lw);
}

void cm_loop_walks_free(cm_loop_walk **buckets) {
    if (!buckets) return;
    for (size_t b = 0; b < CM_LOOP_BUCKETS; b++)
        for (cm_loop_walk *lw = buckets[b], *nx; lw; lw = nx) {
            nx = lw->next;
            cm_loop_walk_free(lw);
        }
    free(buckets);
}

cm_walk_store *cm_walk_store_new(void) {
    cm_walk_store *s = calloc(1, sizeof *s);
    if (s && pthread_mutex_init(&s->lock, NULL)) {
        free(s);
        return NULL;
    }
    return s;
}

void cm_walk_store_free(cm_walk_store *s) {
    if (!s) return;
    cm_loop_walks_free(s->buckets);
    for (size_t b = 0; b < CM_MEMO_BUCKETS; b++)
        for (cm_memo_link *m = s->memos[b], *nx; m; m = nx) {
            nx = m->next;
            cm_chain_memo_release(m);
        }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void cm_walk_store_clear(cm_walk_store *s) {
    pthread_mutex_lock(&s->lock);
    s->bytes = s->run_bytes = 0;
    for (size_t b = 0; s->buckets && b < CM_LOOP_BUCKETS; b++)
        for (cm_loop_walk **link = &s->buckets[b]; *link;) {
            cm_loop_walk *x = *link;
            if (x->pinned) {
                s->bytes += x->bytes;
                if (is_run(x)) s->run_bytes += x->bytes;
                link = &x->next;
            } else {
                *link = x->next;
                cm_loop_walk_free(x);
            }
        }
    s->memo_bytes = 0;
    memset(s->memo_seen, 0, sizeof s->memo_seen);
    for (size_t b = 0; b < CM_MEMO_BUCKETS; b++)
        for (cm_memo_link **link = &s->memos[b]; *link;) {
            cm_memo_link *m = *link;
            if (m->pinned) {
                s->memo_bytes += m->bytes;
                link = &m->next;
            } else {
                *link = m->next;
                cm_chain_memo_release(m);  /* a reader holding it keeps it alive */
            }
        }
    pthread_mutex_unlock(&s->lock);
}

void cm_walk_store_pin(cm_walk_store *s) {
    pthread_mutex_lock(&s->lock);
    s->primed = true;
    for (size_t b = 0; s->buckets && b < CM_LOOP_BUCKETS; b++)
        for (cm_loop_walk *x = s->buckets[b]; x; x = x->next) x->pinned = true;
    for (size_t b = 0; b < CM_MEMO_BUCKETS; b++)
        for (cm_memo_link *m = s->memos[b]; m; m = m->next) m->pinned = true;
    pthread_mutex_unlock(&s->lock);
}

/* The loop's states in breadth-first order by byte from the entry (labels),
 * numbering canon[]: all n_loop of them reached, or false. */
static bool byte_order(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, uint32_t *order,
                       uint32_t *canon) {
    const cm_tables *t = &g->t;
    const uint32_t *lab = g->cache->loop_lab;
    for (uint32_t i = 0; i < n_loop; i++) canon[i] = UINT32_MAX;
    uint32_t n = 0;
    canon[0] = n;
    order[n++] = 0;
    for (uint32_t q = 0; q < n; q++)
        for (int b = 0; b < 256; b++) {
            int32_t to = t->trans[(size_t)ls[order[q]] * t->n_classes + t->byte_class[b]];
            if (to < 0 || lab[to] >= n_loop || canon[lab[to]] != UINT32_MAX) continue;
            canon[lab[to]] = n;
            order[n++] = lab[to];
        }
    return n == n_loop;
}

/* The form by runs (loop_form_runs): the bytes' runs of one class (a JSON
 * grammar's ~40, not 256) read once a state, and the form kept as its runs:
 * CM_FORM_RUNS, n_loop, then each state's maximal runs of one code in byte
 * order as (code, last byte) pairs, the last one's byte 255.  Adjacent class
 * runs with the same code are merged, so two grammars whose classes split the
 * bytes differently give one key for one byte-level form, as the table of
 * 256 codes a state did; numbering and reach check in the same pass (a
 * state's number is given where a byte first reaches it, in the same order
 * as byte_order's).  ~8 K for a JSON string's loop against ~59 K. */
static atomic_int g_form_runs = 1;
static atomic_size_t g_form_runs_taken;
void cm_loop_form_runs_enable(int on) { atomic_store(&g_form_runs, on ? 1 : 0); }
size_t cm_loop_form_runs_taken(void) { return atomic_load(&g_form_runs_taken); }

static void form_by_runs(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, cm_loop_form *lf) {
    const cm_tables *t = &g->t;
    const uint32_t *lab = g->cache->loop_lab;
    const uint8_t *bc = t->byte_class;
    uint8_t last[256], cls[256];  /* the class runs: the last byte and the class of each */
    uint32_t n_runs = 0, order[CM_LOOP_MAX], n = 0;
    for (int b = 0; b < 256; b++) {
        if (b == 255 || bc[b + 1] != bc[b]) {
            last[n_runs] = (uint8_t)b;
            cls[n_runs++] = bc[b];
        }
    }
    size_t cap = 2 + (size_t)n_loop * n_runs * 2, w = 0;
    uint32_t *form = malloc(cap * sizeof *form);
    lf->form = NULL;
    if (!form) return;
    for (uint32_t i = 0; i < n_loop; i++) lf->canon[i] = UINT32_MAX;
    lf->canon[0] = n;
    order[n++] = 0;
    uint32_t dead = cm_loop_dead_out(g, ls, n_loop) ? CM_LOOP_OUT : CM_LOOP_DEAD;
    form[w++] = CM_FORM_RUNS;
    form[w++] = n_loop;
    for (uint32_t q = 0; q < n; q++) {
        const int32_t *row = t->trans + (size_t)ls[order[q]] * t->n_classes;
        uint32_t prev = UINT32_MAX - 16;  /* no code */
        for (uint32_t r = 0; r < n_runs; r++) {
            int32_t to = row[cls[r]];
            uint32_t code;
            if (to < 0) {
                code = dead;
            } else if (lab[to] >= n_loop) {
                code = CM_LOOP_OUT;
            } else {
                if (lf->canon[lab[to]] == UINT32_MAX) {
                    lf->canon[lab[to]] = n;
                    order[n++] = lab[to];
                }
                code = lf->canon[lab[to]];
            }
            if (code == prev) {
                form[w - 1] = last[r];
            } else {
                form[w++] = code;
                form[w++] = last[r];
                prev = code;
            }
        }
    }
    if (n != n_loop) {
        free(form);
        return;
    }
    uint64_t h = 0x51AB1E5ULL ^ n_loop;
    for (size_t i = 0; i < w; i++) h = (h ^ form[i]) * 0xbf58476d1ce4e5b9ULL;
    for (uint32_t i = 0; i < n_loop; i++) lf->from_canon[lf->canon[i]] = i;
    lf->hash = h ^ (h >> 29);
    lf->n_form = w;
    lf->form = form;
    atomic_fetch_add_explicit(&g_form_runs_taken, 1, memory_order_relaxed);
}

void cm_loop_form_of(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, cm_loop_form *lf) {
    if (atomic_load_explicit(&g_form_runs, memory_order_relaxed)) {
        form_by_runs(g, ls, n_loop, lf);
        return;
    }
    const cm_tables *t = &g->t;
    const uint32_t *lab = g->cache->loop_lab;
    uint32_t *form = malloc((size_t)n_loop * 256 * sizeof *form);
    uint32_t *order = malloc((size_t)n_loop * sizeof *order);
    lf->form = NULL;
    lf->n_form = (size_t)n_loop * 256;
    if (!form || !order || !byte_order(g, ls, n_loop, order, lf->canon)) {
        free(form);
        free(order);
        return;
    }
    uint64_t h = 0x51AB1E5ULL ^ n_loop;
    uint32_t dead = cm_loop_dead_out(g, ls, n_loop) ? CM_LOOP_OUT : CM_LOOP_DEAD;  /* loops.c, find_loop */
    for (uint32_t q = 0; q < n_loop; q++)
        for (int b = 0; b < 256; b++) {
            int32_t to = t->trans[(size_t)ls[order[q]] * t->n_classes + t->byte_class[b]];
            uint32_t code = to < 0 ? dead : lab[to] < n_loop ? lf->canon[lab[to]] : CM_LOOP_OUT;
            form[(size_t)q * 256 + (size_t)b] = code;
            h = (h ^ code) * 0xbf58476d1ce4e5b9ULL;
        }
    free(order);
    for (uint32_t i = 0; i < n_loop; i++) lf->from_canon[lf->canon[i]] = i;
    lf->hash = h ^ (h >> 29);
    lf->form = form;
}

/* dst's result (bits, accepted count, exits) copied from src, each exit's loop
 * state renumbered through map; 0 or CM_ERR_NOMEM. */
static int copy_walk(const cm_grammar *g, cm_loop_walk *dst, const cm_loop_walk *src, const uint32_t *map) {
    dst->bits = malloc(g->n_words * sizeof *dst->bits);
    dst->exits = malloc((src->n_exits ? src->n_exits : 1) * sizeof *dst->exits);
    if (!dst->bits || !dst->exits) return CM_ERR_NOMEM;
    memcpy(dst->bits, src->bits, g->n_words * sizeof *dst->bits);
    for (size_t i = 0; i < src->n_exits; i++) {
        dst->exits[i] = src->exits[i];
        dst->exits[i].label = map[src->exits[i].label];
    }
    dst->n_exits = src->n_exits;
    dst->n_accepted = src->n_accepted;
    return CM_OK;
}

/* Files x (its hash and bytes set) under the store's lock while the store stays within its
 * budget; otherwise (or without memory for the buckets) frees it. */
static void store_insert(cm_walk_store *s, cm_loop_walk *x) {
    pthread_mutex_lock(&s->lock);
    if (!s->buckets) s->buckets = calloc(CM_LOOP_BUCKETS, sizeof *s->buckets);
    if (s->buckets && s->bytes + x->bytes <= CM_VOCAB_LOOP_BYTES) {
        size_t b = x->hash % CM_LOOP_BUCKETS;
        x->next = s->buckets[b];
        s->buckets[b] = x;
        s->bytes += x->bytes;
        x = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    cm_loop_walk_free(x);
}

int cm_walk_store_get(const cm_grammar *g, const cm_loop_form *lf, cm_loop_walk *lw) {
    cm_walk_store *s = g->v->walks;
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (s->buckets)
        for (const cm_loop_walk *x = s->buckets[lf->hash % CM_LOOP_BUCKETS]; x && !found; x = x->next)
            if (!x->chain && !is_run(x) && x->np == lw->np && x->hash == lf->hash && x->n_sig == lf->n_form &&
                !memcmp(x->sig, lf->form, lf->n_form * sizeof *lf->form))
                found = copy_walk(g, lw, x, lf->from_canon) ? CM_ERR_NOMEM : 1;
    pthread_mutex_unlock(&s->lock);
    return found;
}

void cm_walk_store_put(const cm_grammar *g, cm_loop_form *lf, const cm_loop_walk *lw) {
    cm_walk_store *s = g->v->walks;
    size_t bytes = sizeof *lw + lf->n_form * 4 + g->n_words * 4 + lw->n_exits * sizeof *lw->exits;
    cm_loop_walk *x = calloc(1, sizeof *x);
    uint32_t *form = lf->form, *fit;
    lf->form = NULL;
    if (form && form[0] == CM_FORM_RUNS && (fit = realloc(form, lf->n_form * sizeof *form)))
        form = fit;  /* its runs only (form_by_runs allocated for every class run) */
    if (!x || copy_walk(g, x, lw, lf->canon)) {
        cm_loop_walk_free(x);
        free(form);
        return;
    }
    x->hash = lf->hash;
    x->np = lw->np;
    x->bytes = bytes;
    x->n_sig = (uint32_t)lf->n_form;
    x->sig = form;
    store_insert(s, x);
}

int cm_walk_store_get_chain(const cm_grammar *g, const uint32_t *key, size_t n_key, uint64_t hash,
                            cm_chain_data **out) {
    cm_walk_store *s = g->v->walks;
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (s->buckets)
        for (const cm_loop_walk *x = s->buckets[hash % CM_LOOP_BUCKETS]; x && !found; x = x->next)
            if (x->chain && x->hash == hash && x->n_sig == n_key && !memcmp(x->sig, key, n_key * sizeof *key))
                found = (*out = cm_chain_data_copy(g, x->chain)) ? 1 : CM_ERR_NOMEM;
    pthread_mutex_unlock(&s->lock);
    return found;
}

void cm_walk_store_put_chain(const cm_grammar *g, const uint32_t *key, size_t n_key, uint64_t hash,
                             const cm_chain_data *cd, size_t bytes) {
    cm_walk_store *s = g->v->walks;
    cm_loop_walk *x = calloc(1, sizeof *x);
    if (!x || !(x->sig = malloc(n_key * sizeof *key)) || !(x->chain = cm_chain_data_copy(g, cd))) {
        cm_loop_walk_free(x);
        return;
    }
    memcpy(x->sig, key, n_key * sizeof *key);
    x->hash = hash;
    x->bytes = bytes;
    x->n_sig = (uint32_t)n_key;
    store_insert(s, x);
}

/* ---- run walks: key, the accepted token ids in `bits` (n_accepted of them), exits ---- */

static const cm_loop_walk *find_run(const cm_walk_store *s, const uint32_t *key, uint64_t hash) {
    if (!s->buckets) return NULL;
    for (const cm_loop_walk *x = s->buckets[hash % CM_LOOP_BUCKETS]; x; x = x->next)
        if (x->hash == hash && is_run(x) && !memcmp(x->sig, key, CM_RUN_KEY * sizeof *key)) return x;
    return NULL;
}

/* The name entries a run walk of key left out of its ids (n_named of them): those of
 * its range's first byte (a subtree's walk, from depth 1), or of every byte of the
 * run (the whole trie's, from depth 0), set in bits from the vocabulary's lists. */
static void run_named_bits(const cm_vocab *v, const uint32_t *key, uint32_t *bits) {
    const uint32_t *r = key + 1, *fo = v->first_off;
    if (key[11] == 1) {
        cm_vocab_names(v, v->trie_data[v->trie_off[key[9]]], bits);
        return;
    }
    /* a name's run (it holds every name byte, or it would have no name entries counted:
     * run_holds_names): name_all is the union of its name bytes' sets, the others one by one */
    bool all = v->name_all && cm_name_sets_on();
    for (unsigned b = '0'; b <= 'z' && all; b++) all = !cm_name_byte((uint8_t)b) || ((r[b >> 5] >> (b & 31)) & 1u);
    if (all) {
        cm_or_words(bits, v->name_all, (v->n_tokens + 31) / 32);
        cm_name_unions_count();
    }
    for (unsigned b = 0; b < 256; b++)
        if (((r[b >> 5] >> (b & 31)) & 1u) && fo[b] < fo[b + 1] && !(all && cm_name_byte((uint8_t)b)))
            cm_vocab_names(v, (uint8_t)b, bits);
}

void cm_run_key_names(const cm_vocab *v, const uint32_t *key, uint32_t *names) {
    const uint32_t *r = key + 1, *fo = v->first_off;
    if (key[11] == 1) {
        uint8_t b = v->trie_data[v->trie_off[key[9]]];
        names[b >> 5] |= 1u << (b & 31);
        return;
    }
    for (unsigned b = 0; b < 256; b++)
        if (((r[b >> 5] >> (b & 31)) & 1u) && fo[b] < fo[b + 1]) names[b >> 5] |= 1u << (b & 31);
}

int cm_walk_store_get_run(const cm_grammar *g, const uint32_t *key, uint64_t hash, cm_walk *w,
                          cm_loop_exit **exits, size_t *n_exits) {
    cm_walk_store *s = g->v->walks;
    int found = 0;
    *exits = NULL;
    *n_exits = 0;
    pthread_mutex_lock(&s->lock);
    const cm_loop_walk *x = find_run(s, key, hash);
    if (x) {
        /* the exits are copied out: walking them on reads the store again */
        *exits = malloc((x->n_exits ? x->n_exits : 1) * sizeof **exits);
        found = *exits ? 1 : CM_ERR_NOMEM;
    }
    if (found == 1) {
        memcpy(*exits, x->exits, x->n_exits * sizeof **exits);
        *n_exits = x->n_exits;
        cm_set_bits(w->bits, x->bits, x->n_accepted - x->n_named);
        if (x->n_named) {
            run_named_bits(g->v, key, w->bits);
            cm_run_key_names(g->v, key, w->names);
        }
        w->n_accepted += x->n_accepted;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

int cm_walk_store_append_run(const cm_grammar *g, const uint32_t *key, uint64_t hash, uint32_t *bits,
                             uint32_t **idp, size_t max_ids, uint32_t *named, cm_loop_exit **exits, size_t *n_exits,
                             size_t *cap, bool set_names) {
    cm_walk_store *s = g->v->walks;
    int found = 0;
    pthread_mutex_lock(&s->lock);
    const cm_loop_walk *x = find_run(s, key, hash);
    if (x && x->n_accepted - x->n_named <= max_ids) {
        found = 1;
        if (*n_exits + x->n_exits > *cap) {
            size_t c = *cap ? *cap : 64;
            while (c < *n_exits + x->n_exits) c *= 2;
            cm_loop_exit *q = realloc(*exits, c * sizeof *q);
            if (q) {
                *exits = q;
                *cap = c;
            } else {
                found = CM_ERR_NOMEM;
            }
        }
    }
    if (found == 1) {
        if (x->n_exits) memcpy(*exits + *n_exits, x->exits, x->n_exits * sizeof **exits);
        *n_exits += x->n_exits;
        uint32_t n_ids = x->n_accepted - x->n_named;
        if (n_ids) memcpy(*idp, x->bits, n_ids * sizeof **idp);
        *idp += n_ids;
        cm_set_bits(bits, x->bits, n_ids);
        if (x->n_named && set_names) run_named_bits(g->v, key, bits);
        *named += x->n_named;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

bool cm_walk_store_has_run(const cm_grammar *g, const uint32_t *key, uint64_t hash) {
    cm_walk_store *s = g->v->walks;
    pthread_mutex_lock(&s->lock);
    bool found = find_run(s, key, hash) != NULL;
    pthread_mutex_unlock(&s->lock);
    return found;
}

void cm_walk_store_put_run(const cm_grammar *g, const uint32_t *key, uint64_t hash, const uint32_t *ids,
                           uint32_t n_ids, uint32_t n_named, const cm_loop_exit *exits, size_t n_exits) {
    cm_walk_store *s = g->v->walks;
    cm_loop_walk *x = calloc(1, sizeof *x);
    if (!x || !(x->sig = malloc(CM_RUN_KEY * sizeof *key)) ||
        !(x->bits = malloc((n_ids ? n_ids : 1) * sizeof *ids)) ||
        !(x->exits = malloc((n_exits ? n_exits : 1) * sizeof *exits))) {
        cm_loop_walk_free(x);
        return;
    }
    memcpy(x->sig, key, CM_RUN_KEY * sizeof *key);
    /* a run walk may keep no token or leave through no subtree: its array is then NULL */
    if (n_ids) memcpy(x->bits, ids, n_ids * sizeof *ids);
    if (n_exits) memcpy(x->exits, exits, n_exits * sizeof *exits);
    x->hash = hash;
    x->n_sig = CM_RUN_KEY;
    x->n_accepted = n_ids + n_named;
    x->n_named = n_named;
    x->n_exits = n_exits;
    x->bytes = sizeof *x + CM_RUN_KEY * 4 + (size_t)n_ids * 4 + n_exits * sizeof *exits;
    pthread_mutex_lock(&s->lock);
    if (!s->buckets) s->buckets = calloc(CM_LOOP_BUCKETS, sizeof *s->buckets);
    /* another grammar (or thread) may have put it since the miss: keep one */
    if (s->buckets && s->bytes + x->bytes <= CM_VOCAB_LOOP_BYTES && s->run_bytes + x->bytes <= CM_VOCAB_RUN_BYTES &&
        !find_run(s, key, hash)) {
        size_t b = hash % CM_LOOP_BUCKETS;
        x->next = s->buckets[b];
        s->buckets[b] = x;
        s->bytes += x->bytes;
        s->run_bytes += x->bytes;
        x = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    cm_loop_walk_free(x);
}

/* ---- chain analyses (chains.c): immutable once filed, read by the holders of a reference ---- */

size_t cm_walk_store_get_memos(const cm_grammar *g, uint64_t hash, cm_memo_link **out, size_t max) {
    cm_walk_store *s = g->v->walks;
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (cm_memo_link *m = s->memos[hash % CM_MEMO_BUCKETS]; m && n < max; m = m->next)
        if (m->hash == hash) {
            cm_chain_memo_hold(m);
            out[n++] = m;
        }
    pthread_mutex_unlock(&s->lock);
    return n;
}

bool cm_walk_store_memo_wanted(const cm_grammar *g, uint64_t hash) {
    cm_walk_store *s = g->v->walks;
    uint64_t h = hash | 1;  /* 0: an empty slot */
    pthread_mutex_lock(&s->lock);
    uint64_t *slot = &s->memo_seen[(hash >> 20) % CM_MEMO_SEEN];
    bool wanted = !s->primed || *slot == h;
    *slot = h;
    pthread_mutex_unlock(&s->lock);
    return wanted;
}

bool cm_walk_store_priming(const cm_grammar *g) {
    cm_walk_store *s = g->v->walks;
    pthread_mutex_lock(&s->lock);
    bool priming = !s->primed;
    pthread_mutex_unlock(&s->lock);
    return priming;
}

void cm_walk_store_put_memo(const cm_grammar *g, cm_memo_link *m) {
    cm_walk_store *s = g->v->walks;
    pthread_mutex_lock(&s->lock);
    if (s->memo_bytes + m->bytes <= CM_VOCAB_MEMO_BYTES) {
        size_t b = m->hash % CM_MEMO_BUCKETS;
        m->next = s->memos[b];
        s->memos[b] = m;
        s->memo_bytes += m->bytes;
        m = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (m) cm_chain_memo_release(m);
}
