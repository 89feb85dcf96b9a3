/* Word loops over token bit sets, and array growth. */
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "cfgmask.h"

/* restrict: the compiler may not otherwise assume the mask and an entry are
 * apart, and would not vectorize; on x86-64 glibc (ifunc) an AVX2 clone is
 * picked at load time where the CPU has it.  The clones stay static (resolved
 * by IRELATIVE relocations after the others, as ThreadSanitizer needs: an
 * exported ifunc is resolved while the library's own calls are unrelocated)
 * behind plain entry points. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define CM_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CM_VECTOR_CLONES
#endif

CM_VECTOR_CLONES static void or_words(uint32_t *restrict dst, const uint32_t *restrict src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] |= src[i];
}

CM_VECTOR_CLONES static void or_words_and(uint32_t *restrict dst, const uint32_t *restrict a,
                                          const uint32_t *restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] |= a[i] & b[i];
}

void cm_or_words(uint32_t *restrict dst, const uint32_t *restrict src, size_t n) { or_words(dst, src, n); }

void cm_or_words_and(uint32_t *restrict dst, const uint32_t *restrict a, const uint32_t *restrict b, size_t n) {
    or_words_and(dst, a, b, n);
}

void cm_set_bits(uint32_t *restrict set, const uint32_t *restrict ids, size_t n) {
    for (size_t i = 0; i < n; i++) set[ids[i] >> 5] |= 1u << (ids[i] & 31);
}

/* the clone has the popcnt instruction (the baseline calls libgcc per word) */
CM_VECTOR_CLONES static size_t count_bits(const uint32_t *words, size_t n) {
    /* two words a popcnt: an entry's 4,008 words (Llama-3) counted in ~2,000 steps
     * where a word a step took ~24 K instructions, once or twice per entry built */
    size_t c = 0, i = 0;
    for (; i + 2 <= n; i += 2) {
        uint64_t x;
        memcpy(&x, words + i, sizeof x);
        c += (size_t)__builtin_popcountll(x);
    }
    if (i < n) c += (size_t)__builtin_popcount(words[i]);
    return c;
}

size_t cm_count_bits(const uint32_t *words, size_t n) { return count_bits(words, n); }

/* A walk's accepted tokens are mostly a few dozen ids spread over 4,008 words: a block of 16
 * words is tested as 8 64-bit ORs (where a word at a time cost ~9 instructions a word), and
 * once `cap` ids are out the rest only has to be found zero (a reduction, vectorized). */
#define CM_TAKE_BLOCK 16

static inline size_t take_word(uint32_t *restrict words, size_t t, uint32_t *restrict out, size_t cap, size_t j) {
    for (uint32_t w = words[t]; w; w &= w - 1, j++)
        if (j < cap) out[j] = (uint32_t)(t * 32 + (unsigned)__builtin_ctz(w));
    words[t] = 0;
    return j;
}

/* Does the block of CM_TAKE_BLOCK words at w hold a bit? */
static inline bool block_any(const uint32_t *w) {
    uint64_t any = 0;
    for (size_t t = 0; t < CM_TAKE_BLOCK; t += 2) {
        uint64_t two;
        memcpy(&two, w + t, sizeof two);
        any |= two;
    }
    return any != 0;
}

CM_VECTOR_CLONES static size_t bits_take(uint32_t *restrict words, size_t n, uint32_t *restrict out, size_t cap) {
    size_t j = 0, i = 0;
    for (; i + CM_TAKE_BLOCK <= n && j < cap; i += CM_TAKE_BLOCK) {
        if (!block_any(words + i)) continue;
        for (size_t t = i; t < i + CM_TAKE_BLOCK; t++)
            if (words[t]) j = take_word(words, t, out, cap, j);
    }
    for (; i < n && j < cap; i++) j = take_word(words, i, out, cap, j);
    uint32_t rest = 0;
    for (size_t t = i; t < n; t++) rest |= words[t];
    return rest ? cap + 1 : j;  /* more bits than cap: those past it are left set */
}

size_t cm_bits_take(uint32_t *restrict words, size_t n, uint32_t *restrict out, size_t cap) {
    return bits_take(words, n, out, cap);
}

/* bits_take for a set whose count is not known: a word is taken only if all its bits fit in
 * cap, so where the set holds more than cap the ids taken so far are set again and the set is
 * left as it was (SIZE_MAX).  cm_compose's entries (a chain of optional properties composes
 * one per property) no longer count their 4,008 words before the ids are taken out. */
CM_VECTOR_CLONES static size_t bits_take_max(uint32_t *restrict words, size_t n, uint32_t *restrict out, size_t cap) {
    size_t j = 0, i = 0;
    for (; i < n; i += CM_TAKE_BLOCK) {
        size_t end = i + CM_TAKE_BLOCK <= n ? i + CM_TAKE_BLOCK : n;
        if (end == i + CM_TAKE_BLOCK && !block_any(words + i)) continue;
        for (size_t t = i; t < end; t++) {
            uint32_t w = words[t];
            if (!w) continue;
            if (j + (size_t)__builtin_popcount(w) > cap) {
                for (size_t q = 0; q < j; q++) words[out[q] >> 5] |= 1u << (out[q] & 31);
                return SIZE_MAX;
            }
            for (; w; w &= w - 1) out[j++] = (uint32_t)(t * 32 + (unsigned)__builtin_ctz(w));
            words[t] = 0;
        }
    }
    return j;
}

size_t cm_bits_take_max(uint32_t *restrict words, size_t n, uint32_t *restrict out, size_t cap) {
    return bits_take_max(words, n, out, cap);
}

int cm_grow_to(void **p, size_t *cap, size_t need, size_t elem) {
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return CM_ERR_NOMEM;
    *p = q;
    *cap = n;
    return CM_OK;
}
