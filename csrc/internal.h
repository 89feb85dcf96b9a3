/* The array helpers the compile-time automaton build (fsm.c) shares with the
 * rest of the C core.  Each subsystem has its own private header (bits.h,
 * vocab.h, grammar.h, chart.h, cache.h, ...); this one stays for fsm.c. */
#ifndef CFGMASK_INTERNAL_H
#define CFGMASK_INTERNAL_H

#include "bits.h"
#include "cfgmask.h"

#endif
