/* Stack verdicts (stackmemo.c): uncertain tokens' verdicts keyed by the part of
 * the chart their check read, the enclosing stack; shared by every matcher of a
 * grammar (the store, behind g->cache), each matcher keeping its scratch. */
#ifndef CFGMASK_STACKMEMO_H
#define CFGMASK_STACKMEMO_H

#include <pthread.h>
#include <stdatomic.h>

#include "chart.h"

#define CM_SM_STACKS 1024           /* distinct enclosing stacks held at once */
#define CM_SM_INDEX 2048            /* their hash index (open addressing) */
#define CM_SM_POOL (1u << 18)       /* their key words held at once */
#define CM_SM_KEY_MAX 4096          /* key words of one stack at most (bigger: not memoized) */
#define CM_SM_SLOTS_MIN 16384       /* verdict slots at first (open addressing, at most half full) */
#define CM_SM_SLOTS (1u << 17)      /* ... doubled up to these (1 MB) */
#define CM_SM_FRAMES 8              /* deepest stack memoized, in reachable sets */
#define CM_SM_GATE_PUTS 4096        /* verdicts stored a window: then the gate looks at its hits */
#define CM_SM_GATE_RATIO 8          /* fewer hits than a window's verdicts / this: the gate closes */
#define CM_SM_GATE_SHUT 256         /* masks it stays closed for the first time (then twice as many) */
#define CM_SM_GATE_SHUT_MAX (1u << 20) /* ... up to this: a long-lived matcher's grammar still gets measured again */

typedef struct cm_smstack {
    uint64_t hash;
    uint32_t off, n;                /* pool[off .. off + n) */
} cm_smstack;

typedef struct cm_smslot {
    uint16_t gen;                   /* the store's generation when written; else empty */
    uint16_t stack;
    uint32_t token;                 /* a trie index << 1 | allowed */
} cm_smslot;

/* The grammar's verdicts, under lock; the keys are the chart's contents, not its
 * positions, so they hold for every matcher, mask and document.  Full: starts over. */
typedef struct cm_stack_store {
    pthread_mutex_t lock;
    cm_smstack *stack;              /* [CM_SM_STACKS], allocated on first use (as below) */
    uint32_t n_stack;
    int32_t *index;                 /* [CM_SM_INDEX] stack ids by hash; -1 empty (valid while gen holds) */
    uint64_t *pool;                 /* [CM_SM_POOL] */
    uint32_t n_pool;
    cm_smslot *slots;               /* [n_slots], allocated on first use */
    size_t n_slots;
    uint32_t n_used;
    uint16_t gen;
    _Atomic uint8_t *depths;        /* [n_trie] bit f - 1: a verdict of the token is stored over f frames */
    _Atomic uint64_t *kept;         /* [n_trie / 64 + 1] bit k: depths[k] is not 0 (a candidate word at once) */
    atomic_bool ready;              /* depths allocated (read without the lock) */
    atomic_size_t steps;            /* chart steps of the grammar's checks, until the store is used */
    size_t win_puts, win_hits;      /* this window's verdicts stored and taken (under lock) */
    bool judged;                    /* a window has passed (under lock) */
    size_t shut_for;                /* how long the gate closes next, in masks (under lock) */
    atomic_size_t shut;             /* masks left before the gate opens again; 0 open */
    size_t n_trie;
} cm_stack_store;

/* A matcher's scratch: the sets reachable from the current one through origins,
 * newest first, and each depth's key, made once a mask. */
typedef struct cm_stackmemo {
    uint32_t *order, *rank, *mark;  /* [cap_sets] */
    size_t cap_sets;
    uint32_t mark_gen, n_order;
    int64_t cursor;                 /* the next set to look at (going down); -1 done */
    uint32_t *reach;                /* [max_len + 1] check_token: the lowest set read, by depth */
    uint64_t *key;                  /* the keys of this mask's depths, [cap_key] */
    size_t n_key, cap_key;
    uint8_t made[CM_SM_FRAMES + 1]; /* 0 not made, 1 made, 2 none (too big, too few sets) */
    uint32_t key_off[CM_SM_FRAMES + 1], key_len[CM_SM_FRAMES + 1];
    uint64_t key_hash[CM_SM_FRAMES + 1];
    uint32_t id_gen[CM_SM_FRAMES + 1];   /* the store's generation key_id was found in */
    int32_t key_id[CM_SM_FRAMES + 1];    /* the key's stack in the store; -1 not there */
    uint32_t *put;                  /* verdicts to store at the mask's end: k << 6 | f << 1 | allowed */
    size_t n_put, cap_put;
    uint32_t *ask;                  /* the candidates asked about (cm_stackmemo_ask) */
    size_t n_ask, cap_ask;
    uint32_t need;                  /* ... the depths they have verdicts at */
} cm_stackmemo;

int cm_stack_store_init(cm_stack_store *st, size_t n_trie);
void cm_stack_store_destroy(cm_stack_store *st);

/* The tokens with verdicts kept, 64 trie entries a word (read without the lock), or NULL
 * before the first verdict: a mask's candidates without any skip the store in one AND. */
static inline const _Atomic uint64_t *cm_stack_store_kept(const cm_stack_store *st) {
    return atomic_load_explicit(&st->ready, memory_order_acquire) ? st->kept : NULL;
}

void cm_stackmemo_free(cm_stackmemo *sm);
/* Begin a mask whose current set is the chart's set `base`: 0, or < 0 out of memory. */
int cm_stackmemo_begin(cm_stackmemo *sm, size_t base, uint32_t max_len);
/* How many reachable sets, newest first, reach down to set `lo` (lo reachable from
 * the current set): 0 when that is deeper than CM_SM_FRAMES. */
uint32_t cm_stackmemo_frames(cm_stackmemo *sm, const cm_chart *c, uint32_t lo);
/* Should candidate k (a trie index) be asked about (it has verdicts stored at some
 * depth)?  Then it is noted for cm_stackmemo_take: true. */
bool cm_stackmemo_ask(cm_stackmemo *sm, const cm_stack_store *st, uint32_t k);
/* The stored verdicts of the candidates asked about over frames equal to this mask's
 * (one lock): an allowed one set in words; those without one are left in
 * sm->ask[0 .. n_ask), in the order asked.  How many it decided. */
size_t cm_stackmemo_take(cm_stackmemo *sm, cm_stack_store *st, const cm_chart *c, const uint32_t *trie_ids,
                         uint32_t *words);
/* Trie entry k's check read f frames (cm_stackmemo_frames) and gave `allowed`: noted, for
 * cm_stackmemo_flush to store at the mask's end (one lock a mask). */
void cm_stackmemo_put(cm_stackmemo *sm, uint32_t k, uint32_t f, bool allowed);
void cm_stackmemo_flush(cm_stackmemo *sm, cm_stack_store *st, const cm_chart *c);
void cm_stackmemo_note_hits(size_t n);
/* The hit-rate gate: may this mask use the store (not closed; a closed gate counts the mask
 * down towards opening again, its verdicts kept)? */
bool cm_stack_store_open(cm_stack_store *st);
/* How many times a gate closed so far in this process (for the tests). */
size_t cm_stack_verdict_gate_closes(void);
/* The tests' gate: 0 as measured, 1 always closed, 2 closing on any window of 64 verdicts
 * with fewer hits than verdicts, for 4 masks at first (small vocabularies' few verdicts). */
void cm_stack_verdict_gate_force(int mode);
/* Verdicts taken from the stores so far in this process (for the tests). */
size_t cm_stack_verdict_hits(void);

#endif
