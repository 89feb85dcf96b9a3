/* The whole-mask memo.
 *
 * The allowed tokens are a function of the chart's current set and of every
 * set reachable from it through item origins (completion reads those, nothing
 * else): prediction adds items of the current set, scanning reads the current
 * set.  So two charts whose reachable sets are equal item for item, origins
 * renumbered in visiting order (set 0 keeps 0: start-rule acceptance needs
 * it), have the same mask.  Wide sets of expression grammars recur (each item
 * of a list, each operand), and their masks cost milliseconds; the memo is
 * shared by all matchers of a grammar. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "maskmemo.h"
#include "matcher.h"

int cm_mask_memo_init(cm_mask_memo *mm) {
    mm->slots = NULL;
    mm->stamp = 0;
    return pthread_mutex_init(&mm->lock, NULL) ? CM_ERR_NOMEM : CM_OK;
}

void cm_mask_memo_destroy(cm_mask_memo *mm) {
    if (mm->slots)
        for (size_t i = 0; i < CM_MEMO_MASKS; i++) {
            free(mm->slots[i].sig);
            free(mm->slots[i].words);
        }
    free(mm->slots);
    pthread_mutex_destroy(&mm->lock);
}

static int grow_scratch(cm_matcher *m, size_t n_sets) {
    if (n_sets <= m->scap) return CM_OK;
    size_t cap = m->scap ? m->scap : 64;
    while (cap < n_sets) cap *= 2;
    uint32_t *q = realloc(m->sq, cap * sizeof *q);
    if (!q) return CM_ERR_NOMEM;
    m->sq = q;
    uint32_t *l = realloc(m->slabel, cap * sizeof *l);
    if (!l) return CM_ERR_NOMEM;
    m->slabel = l;
    uint32_t *gn = realloc(m->sgen, cap * sizeof *gn);
    if (!gn) return CM_ERR_NOMEM;
    memset(gn + m->scap, 0, (cap - m->scap) * sizeof *gn);
    m->sgen = gn;
    m->scap = cap;
    return CM_OK;
}

static inline int sig_push(cm_matcher *m, size_t *n, uint64_t x) {
    if (*n == m->sig_cap) {
        size_t cap = m->sig_cap ? m->sig_cap * 2 : 1024;
        uint64_t *p = realloc(m->sig, cap * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        m->sig = p;
        m->sig_cap = cap;
    }
    m->sig[(*n)++] = x;
    return CM_OK;
}

size_t cm_mask_signature(cm_matcher *m, uint64_t *hash) {
    const cm_chart *c = &m->c;
    size_t cur = c->n_sets - 1, n = 0, qn = 0;
    if (grow_scratch(m, c->n_sets)) return 0;
    if (++m->sgen_cur == 0) {
        memset(m->sgen, 0, m->scap * sizeof *m->sgen);
        m->sgen_cur = 1;
    }
    uint32_t next = 1;
    m->sgen[cur] = m->sgen_cur;
    m->slabel[cur] = cur == 0 ? 0 : next++;
    m->sq[qn++] = (uint32_t)cur;
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (size_t qi = 0; qi < qn; qi++) {
        uint32_t s = m->sq[qi];
        /* the set's size (an item's packed state never has its top 16 bits all set) */
        uint64_t x = (0xFFFFull << 48) | (c->set_start[s + 1] - c->set_start[s]);
        if (sig_push(m, &n, x)) return 0;
        h = (h ^ x) * 0xbf58476d1ce4e5b9ULL;
        if (m->g->t.n_la > 1) {
            /* and the bytes read right after it: with lookahead markers a completion
             * of an item starting there reads up to a character (advance_waiter) */
            uint64_t after = 0;
            for (size_t j = s + 1; j <= s + 4; j++) after = (after << 9) | (j < c->n_sets ? c->set_byte[j] : 511u);
            x = (0xFFFEull << 48) | after;
            if (sig_push(m, &n, x)) return 0;
            h = (h ^ x) * 0xbf58476d1ce4e5b9ULL;
        }
        for (size_t i = c->set_start[s]; i < c->set_start[s + 1]; i++) {
            uint32_t o = c->items[i].origin;
            if (m->sgen[o] != m->sgen_cur) {
                m->sgen[o] = m->sgen_cur;
                m->slabel[o] = o == 0 ? 0 : next++;
                m->sq[qn++] = o;
            }
            x = ((uint64_t)c->items[i].state << 32) | m->slabel[o];
            if (sig_push(m, &n, x)) return 0;
            h = (h ^ x) * 0xbf58476d1ce4e5b9ULL;
        }
        if (n > CM_MEMO_MAX_SIG) return 0;
    }
    *hash = h ^ (h >> 31);
    return n;
}

bool cm_mask_memo_lookup(const cm_matcher *m, uint64_t hash, size_t n_sig, uint32_t *words) {
    cm_mask_memo *mm = &m->g->cache->memo;
    size_t n_words = m->g->n_words;
    bool hit = false;
    pthread_mutex_lock(&mm->lock);
    if (mm->slots) {
        for (size_t way = 0; way < 2 && !hit; way++) {
            const cm_mslot *sl = &mm->slots[((hash % CM_MEMO_MASKS) & ~(size_t)1) | way];
            if (sl->sig && sl->hash == hash && sl->n_sig == n_sig &&
                !memcmp(sl->sig, m->sig, n_sig * sizeof *m->sig)) {
                memcpy(words, sl->words, n_words * sizeof *words);
                hit = true;
            }
        }
    }
    pthread_mutex_unlock(&mm->lock);
    return hit;
}

void cm_mask_memo_store(const cm_matcher *m, uint64_t hash, size_t n_sig, const uint32_t *words) {
    cm_mask_memo *mm = &m->g->cache->memo;
    size_t n_words = m->g->n_words;
    pthread_mutex_lock(&mm->lock);
    if (!mm->slots) mm->slots = calloc(CM_MEMO_MASKS, sizeof *mm->slots);
    if (mm->slots) {
        /* two ways a set: the empty one, else the one not written last */
        size_t set = (hash % CM_MEMO_MASKS) & ~(size_t)1;
        cm_mslot *sl = &mm->slots[set];
        if (sl->sig && (!mm->slots[set | 1].sig || sl->stamp > mm->slots[set | 1].stamp)) sl = &mm->slots[set | 1];
        sl->stamp = ++mm->stamp;
        if (!sl->words) sl->words = malloc(n_words * sizeof *sl->words);
        uint64_t *sig = realloc(sl->sig, n_sig * sizeof *sig);
        if (sig) sl->sig = sig;
        if (sl->words && sig) {
            memcpy(sl->sig, m->sig, n_sig * sizeof *sig);
            memcpy(sl->words, words, n_words * sizeof *words);
            sl->n_sig = n_sig;
            sl->hash = hash;
        } else {
            sl->n_sig = 0;  /* unusable: memcmp never matches an empty signature of a real chart */
            sl->hash = 0;
        }
    }
    pthread_mutex_unlock(&mm->lock);
}
