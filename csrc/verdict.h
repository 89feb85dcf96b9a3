/* Closing verdicts (verdict.c): a matcher's memo of what the real chart does
 * with the rest of a token after an item of the current set completed its rule
 * inside the token (the bytes after a string's closing quote), keyed by the
 * Earley set that completion makes and those bytes, kept across masks. */
#ifndef CFGMASK_VERDICT_H
#define CFGMASK_VERDICT_H

#include "chart.h"

#define CM_VERDICT_STACKS 64        /* distinct completion sets held at once */
#define CM_VERDICT_SLOTS 4096       /* verdict slots (open addressing, at most half full) */
#define CM_VERDICT_POOL 65536       /* bytes of items and rests held at once */
#define CM_VERDICT_RUNS 512         /* run slots (open addressing, at most half full) */

/* A completion set: its items, an origin equal to the set's own index stored as
 * CM_MEMO_HERE; valid while the set of its newest other origin (vset) keeps
 * the version it had. */
typedef struct cm_vstack {
    uint64_t hash;
    uint64_t version;
    uint32_t vset;
    uint32_t off, n;            /* items[off .. off + n) */
} cm_vstack;

typedef struct cm_vslot {
    uint64_t hash;              /* of (stack, rest) */
    uint32_t gen;               /* the memo's generation when written; else empty */
    uint32_t stack;
    uint32_t rest_off, rest_len;
    uint8_t allowed;
} cm_vslot;

/* What the chart does with a run of one byte after a completion set: it reads
 * lo of them, and dies at the hi-th (0: not known).  Reading is prefix-closed, so
 * every run of at most lo is allowed and every run of at least hi is not. */
typedef struct cm_vrun {
    uint32_t gen;               /* the memo's generation when written; else empty */
    uint32_t stack;
    uint32_t lo, hi;
    uint8_t byte;
} cm_vrun;

typedef struct cm_verdicts {
    cm_vstack stack[CM_VERDICT_STACKS];  /* the sets, "stacks": what they read is below the string */
    uint32_t n_stack;
    uint32_t last;              /* the stack found last (tried first) */
    cm_item *items;             /* [CM_VERDICT_POOL / sizeof(cm_item)] */
    uint32_t n_items;
    uint8_t *rest;              /* [CM_VERDICT_POOL] */
    uint32_t n_rest;
    cm_vslot *slots;            /* [CM_VERDICT_SLOTS] */
    uint32_t n_used, gen;
    cm_vrun *runs;              /* [CM_VERDICT_RUNS] */
    uint32_t n_runs;
} cm_verdicts;

/* Forget every verdict (keeps the buffers). */
void cm_verdicts_clear(cm_verdicts *v);
void cm_verdicts_free(cm_verdicts *v);
/* The id of set `set` of c as a completion set (added if new; a full memo, or
 * the same items over rebuilt sets, start it over), or -1 when it cannot be one
 * (an origin past `base`, too many items, out of memory). */
int cm_verdict_stack(cm_verdicts *v, const cm_chart *c, size_t set, size_t base);
/* The verdict of `rest` read after completion set `stack`: 1 allowed, 0 not, -1 unknown. */
int cm_verdict_get(const cm_verdicts *v, int stack, const uint8_t *rest, uint32_t len);
void cm_verdict_put(cm_verdicts *v, int stack, const uint8_t *rest, uint32_t len, bool allowed);
/* The verdict of `len` bytes `byte` read after completion set `stack`: 1 allowed, 0 not,
 * -1 unknown; *lo: how many of them it is known to read. */
int cm_verdict_run_get(const cm_verdicts *v, int stack, uint8_t byte, uint32_t len, uint32_t *lo);
/* Completion set `stack` reads lo bytes `byte` (and dies at the hi-th, hi > lo; 0 not known). */
void cm_verdict_run_put(cm_verdicts *v, int stack, uint8_t byte, uint32_t lo, uint32_t hi);

#endif
