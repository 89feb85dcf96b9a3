/* Bit sets over token ids (bit t % 32 of word t / 32) and small array helpers.
 * Depends on nothing but the C library: every other file may include it. */
#ifndef CFGMASK_BITS_H
#define CFGMASK_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool cm_bit(const uint32_t *set, unsigned i) { return (set[i >> 5] >> (i & 31)) & 1u; }
static inline void cm_set_bit(uint32_t *set, unsigned i) { set[i >> 5] |= 1u << (i & 31); }

/* dst |= src, and dst |= a & b, over n words (vectorized; see bits.c). */
void cm_or_words(uint32_t *restrict dst, const uint32_t *restrict src, size_t n);
void cm_or_words_and(uint32_t *restrict dst, const uint32_t *restrict a, const uint32_t *restrict b, size_t n);
size_t cm_count_bits(const uint32_t *words, size_t n);
/* Sets the bits ids[0..n) (a list kept apart from the set: with -fno-strict-aliasing a
 * loop of cm_set_bit through struct fields reloads them at every id, ~12 instructions an
 * id where this takes ~9; arithmetic's first mask sets Llama-3's 33 k letter names twice). */
void cm_set_bits(uint32_t *restrict set, const uint32_t *restrict ids, size_t n);
/* The set bits of words[0..n) as ascending indices into out, their words left zero: how many
 * (cap at most; more than cap: some bits past the first cap are left set). */
size_t cm_bits_take(uint32_t *restrict words, size_t n, uint32_t *restrict out, size_t cap);
/* cm_bits_take for a set of unknown count: all its bits (at most cap: how many, the words
 * left zero), or SIZE_MAX (more than cap: the set left as it was). */
size_t cm_bits_take_max(uint32_t *restrict words, size_t n, uint32_t *restrict out, size_t cap);

/* Sort v[0..n) and drop repeats; returns the number kept (fsm.c). */
size_t cm_sort_unique_u32(uint32_t *v, size_t n);
/* Lists of 64 or more sorted by radix (on by default) or by qsort, the reference the tests
 * compare against; how many were sorted by radix, in this process (fsm.c). */
void cm_radix_sort_enable(int on);
size_t cm_radix_sorts(void);

/* Length of the common prefix of a[0..la) and b[0..lb). */
static inline uint32_t cm_common_prefix(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb) {
    uint32_t n = la < lb ? la : lb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* *p (an array of *cap elements of elem bytes) grown to hold at least need:
 * 0, or CM_ERR_NOMEM (*p and *cap unchanged). */
int cm_grow_to(void **p, size_t *cap, size_t need, size_t elem);
static inline int cm_grow(void **p, size_t *cap, size_t need, size_t elem) {
    return need <= *cap ? 0 : cm_grow_to(p, cap, need, elem);
}

#endif
