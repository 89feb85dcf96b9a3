/* The cut of counted segments (segcut.c; docs/design.md §7, "The cut of counted segments"):
 * internal declarations shared with segments.c (the unit's tables) and vocab.c (the store). */
#ifndef CFGMASK_SEGCUT_H
#define CFGMASK_SEGCUT_H

#include "cfgmask.h"

/* A segment's tables as segcut.c reads them (borrowed pointers): the spliced automaton's byte
 * cells and their flags, each state's segment, each segment's head. */
typedef struct cm_seg_raw {
    uint32_t n_states, n_classes, n_segments;
    const uint8_t *byte_class;  /* [256] */
    const int32_t *trans;       /* [n_states * n_classes] */
    const uint8_t *flags;       /* [n_states * n_classes] */
    const uint32_t *state_seg;  /* [n_states] */
    const uint32_t *seg_head;   /* [n_segments] */
} cm_seg_raw;

/* segments.c: a validated cm_segtab's tables as a cm_seg_raw. */
void cm_segtab_raw(const cm_segtab *st, cm_seg_raw *r);
/* The cut of segment `seg` of r's tables for vocabulary v (the vocabulary's shared tables of
 * that unit's form, found or made): as cm_segcut_new. */
int cm_segcut_new_raw(const cm_seg_raw *r, uint32_t seg, const cm_vocab *v, cm_segcut **out);

/* xs[0 .. *n) less the tokens cut at (state, need, budget) (cm_segcut_apply's), in order, *n
 * their number after: each x the token ids[x] (ids NULL: x itself; the near entries' uncertain
 * trie entries with the vocabulary's trie_ids). */
int cm_segcut_keep(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, const uint32_t *ids, uint32_t *xs,
                   size_t *n);

/* The vocabulary's store of segment walk tables by unit form (vocab.c makes and frees it). */
typedef struct cm_segcut_store cm_segcut_store;
cm_segcut_store *cm_segcut_store_new(void);
void cm_segcut_store_free(cm_segcut_store *s);

#endif
