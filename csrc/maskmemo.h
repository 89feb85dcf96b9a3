/* The whole-mask memo (maskmemo.c): finished masks of wide charts, keyed by the
 * chart's reachable structure, shared by every matcher of a grammar. */
#ifndef CFGMASK_MASKMEMO_H
#define CFGMASK_MASKMEMO_H

#include <pthread.h>

#include "grammar.h"

#define CM_MEMO_MASKS 2048      /* slots of the whole-mask memo (two-way sets) */
#define CM_MEMO_MAX_SIG 65536   /* charts with bigger signatures are not memoized */

/* One slot: the signature of a chart (its current set and every set reachable
 * through origins, origins renumbered) and its mask. */
typedef struct cm_mslot {
    uint64_t hash;
    size_t n_sig;
    uint64_t *sig;
    uint32_t *words;            /* [n_words], stop tokens included */
    uint64_t stamp;             /* when written (replacement picks the older way) */
} cm_mslot;

typedef struct cm_mask_memo {
    pthread_mutex_t lock;
    cm_mslot *slots;            /* [CM_MEMO_MASKS], allocated on first use, under lock */
    uint64_t stamp;
} cm_mask_memo;

int cm_mask_memo_init(cm_mask_memo *mm);
void cm_mask_memo_destroy(cm_mask_memo *mm);
/* The signature of m's chart into m->sig: its length, 0 = none (too big or out
 * of memory). */
size_t cm_mask_signature(cm_matcher *m, uint64_t *hash);
/* The memoized mask of the signature in m->sig into words: found or not. */
bool cm_mask_memo_lookup(const cm_matcher *m, uint64_t hash, size_t n_sig, uint32_t *words);
void cm_mask_memo_store(const cm_matcher *m, uint64_t hash, size_t n_sig, const uint32_t *words);

#endif
