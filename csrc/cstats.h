/* Private probes of the compile-time counters (cstats.c; the public half is in cfgmask.h). */
#ifndef CFGMASK_CSTATS_H
#define CFGMASK_CSTATS_H

#include "cfgmask.h"

#define CM_STATS_MAX_RECS ((size_t)1 << 16) /* per thread between takes; later builds are counted, not listed */

/* The first member's name index of the component being built (UINT32_MAX: none). */
extern _Thread_local uint32_t cm_stats_name;

int cm_stats_on(void);
/* CLOCK_MONOTONIC ns while the counters are on, else 0. */
uint64_t cm_stats_now(void);
/* Add the time since t0 (a cm_stats_now()) to phase. */
void cm_stats_add(int phase, uint64_t t0);
/* A DFA of n_states states left to Hopcroft. */
void cm_stats_hopcroft(uint32_t n_states);
/* One subset construction and minimization. */
void cm_stats_build(uint32_t nfa_states, uint32_t dfa_states, uint32_t min_states, uint64_t ns_subsets,
                    uint64_t ns_minimize);

#endif
