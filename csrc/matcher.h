/* The matcher (matcher.c): one Earley chart per sequence, its token history,
 * and the scratch its masks are filled with (mask.c, maskmemo.c). */
#ifndef CFGMASK_MATCHER_H
#define CFGMASK_MATCHER_H

#include "chart.h"
#include "stackmemo.h"
#include "verdict.h"

struct cm_matcher {
    const cm_grammar *g;
    cm_chart c;
    uint32_t *hist;             /* per accepted token: number of sets before it */
    size_t n_hist, cap_hist;
    /* A fill (mask.c) never writes terminated, hist or n_hist: cfgmask/matcher.py reads
     * them while a prefetch worker fills. */
    bool terminated;
    int err;
    /* scratch for fill_mask */
    uint32_t *stamp;            /* [n_states] */
    uint32_t stamp_gen;
    uint64_t *cand;             /* [ceil(n_trie / 64)] */
    uint32_t cand_lo, cand_hi;  /* the words of cand that may be nonzero: [lo, hi) (empty: lo >= hi) */
    cm_mask_stats stats;        /* of the last fill_mask */
    uint32_t rep_rule[8], rep_origin[8];  /* mask.c repeats(): answers during one mask */
    int8_t rep_ans[8];
    size_t n_rep;
    /* scratch for the mask memo's signature */
    uint64_t *sig;
    size_t sig_cap;
    uint32_t *sq, *slabel, *sgen;   /* [scap] BFS queue, labels, visit stamps per set */
    size_t scap;
    uint32_t sgen_cur;
    cm_verdicts verdicts;       /* closing verdicts kept across masks (verdict.c) */
    cm_stackmemo stacks;        /* stack verdicts kept across masks (stackmemo.c) */
};

#endif
