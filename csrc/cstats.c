/* Where a compile's C time goes (issue 12): clock_gettime counters per phase and one record
 * per subset construction, kept per thread while a process-wide switch is on (off: each
 * probe is one load and a branch).  Python turns them on (CFGMASK_COMPILE_STATS, or
 * _core.compile_stats_enable) and takes them after a compile (_core.compile_stats). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstats.h"

static int g_on;
static _Thread_local cm_compile_stats t_stats;
static _Thread_local cm_build_rec *t_recs;
static _Thread_local size_t t_n_recs, t_cap_recs;
_Thread_local uint32_t cm_stats_name = UINT32_MAX;

void cm_compile_stats_enable(int on) { g_on = on; }

int cm_stats_on(void) { return g_on; }

uint64_t cm_stats_now(void) {
    if (!g_on) return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cm_stats_add(int phase, uint64_t t0) {
    if (!g_on || phase < 0 || phase >= CM_PHASES) return;
    t_stats.ns[phase] += cm_stats_now() - t0;
}

void cm_stats_build(uint32_t nfa_states, uint32_t dfa_states, uint32_t min_states, uint64_t ns_subsets,
                    uint64_t ns_minimize) {
    if (!g_on) return;
    t_stats.n_builds++;
    t_stats.nfa_states += nfa_states;
    t_stats.dfa_states += dfa_states;
    t_stats.min_states += min_states;
    if (t_n_recs == t_cap_recs) {
        size_t cap = t_cap_recs ? 2 * t_cap_recs : 256;
        if (cap > CM_STATS_MAX_RECS) return;
        cm_build_rec *p = realloc(t_recs, cap * sizeof *p);
        if (!p) return;
        t_recs = p;
        t_cap_recs = cap;
    }
    t_recs[t_n_recs++] = (cm_build_rec){cm_stats_name, nfa_states, dfa_states, min_states, ns_subsets, ns_minimize};
}

void cm_stats_hopcroft(uint32_t n_states) {
    if (g_on) t_stats.hopcroft_states += n_states;
}

size_t cm_compile_stats_take(cm_compile_stats *out, cm_build_rec *recs, size_t max_recs) {
    size_t n = t_n_recs < max_recs ? t_n_recs : max_recs;
    if (out) *out = t_stats;
    if (recs && n) memcpy(recs, t_recs, n * sizeof *recs);
    memset(&t_stats, 0, sizeof t_stats);
    t_n_recs = 0;
    free(t_recs);
    t_recs = NULL;
    t_cap_recs = 0;
    return n;
}
