/* Applying a token bitmask to logits: every blocked token's logit becomes -inf.
 *
 * Layout (cfgmask.h): bit t % 32 of int32 word t / 32 of a row allows token t.  A logit is
 * an IEEE float of 2, 4 or 8 bytes; the kernel never reads it as a number: a blocked one
 * is overwritten with the dtype's -inf bit pattern (the caller's `neg`), an allowed one
 * keeps its bits (NaN and -0.0 included).
 *
 * Per row, with n = min(width, 32 * n_words) columns covered by the mask:
 *
 *     for each full word w < n / 32:  m = word w
 *         m == ~0: skip (32 allowed tokens: the common case inside a string)
 *         else:    lane j of the 32 logits = bit j of m ? itself : neg
 *     the last partial word: lane by lane; columns n .. width: neg
 *
 * The select loop is written so that the compiler vectorizes it, and it is compiled once
 * per x86-64 instruction set (baseline, AVX2, AVX-512; the CPU's best is picked at run
 * time): with AVX-512 each word is one or two masked stores.  Rows whose logits are not
 * adjacent (col_stride != elem_size) take a plain loop of the same logic.  Logits are
 * accessed through pointers of their own width after cm_apply_mask checked the alignment,
 * the mask words through memcpy (a bitmask view may be unaligned).
 */
#include <string.h>

#include "cfgmask.h"

static inline uint32_t mask_word(const cm_mask_view *m, const uint8_t *row, size_t w) {
    uint32_t x;
    memcpy(&x, row + (ptrdiff_t)w * m->col_stride, sizeof x);
    return x;
}

/* ---- the full words of a contiguous row ----------------------------------------------- */

/* Bit j of a word, as a table: `m & bit_j[j]` vectorizes (a variable shift would not). */
static const uint32_t bit_j[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31,
};

/* Words 0 .. n_full of a row whose logits are adjacent.  The 64-bit select is written
 * branch-free: without 64-bit vector compares (baseline x86-64) the compiler would branch
 * on every bit.  Inlined into one function per instruction set below. */
static inline __attribute__((always_inline)) void words_body(void *x, size_t elem, const cm_mask_view *m,
                                                             const uint8_t *mrow, size_t n_full,
                                                             uint64_t neg) {
    for (size_t w = 0; w < n_full; w++) {
        uint32_t bits = mask_word(m, mrow, w);
        if (bits == UINT32_MAX) continue;
        if (elem == 2) {
            uint16_t *p = (uint16_t *)x + 32 * w, v = (uint16_t)neg;
            for (unsigned j = 0; j < 32; j++) p[j] = (bits & bit_j[j]) ? p[j] : v;
        } else if (elem == 4) {
            uint32_t *p = (uint32_t *)x + 32 * w, v = (uint32_t)neg;
            for (unsigned j = 0; j < 32; j++) p[j] = (bits & bit_j[j]) ? p[j] : v;
        } else {
            uint64_t *p = (uint64_t *)x + 32 * w;
            for (unsigned j = 0; j < 32; j++) {
                uint64_t keep = 0u - (uint64_t)((bits >> j) & 1u);
                p[j] = (p[j] & keep) | (neg & ~keep);
            }
        }
    }
}

typedef void (*words_fn)(void *, size_t, const cm_mask_view *, const uint8_t *, size_t, uint64_t);

static void words_base(void *x, size_t elem, const cm_mask_view *m, const uint8_t *mrow, size_t n_full,
                       uint64_t neg) {
    words_body(x, elem, m, mrow, n_full, neg);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CM_X86_LEVELS 1
__attribute__((target("avx2"))) static void words_avx2(void *x, size_t elem, const cm_mask_view *m,
                                                       const uint8_t *mrow, size_t n_full, uint64_t neg) {
    words_body(x, elem, m, mrow, n_full, neg);
}

/* here each select becomes a masked store of a 16- or 32-lane vector */
__attribute__((target("avx512f,avx512bw"))) static void words_avx512(void *x, size_t elem,
                                                                     const cm_mask_view *m,
                                                                     const uint8_t *mrow, size_t n_full,
                                                                     uint64_t neg) {
    words_body(x, elem, m, mrow, n_full, neg);
}
#endif

/* Asked on every call (a few loads of libgcc's CPU model, no cached state to race on). */
int cm_apply_mask_simd(void) {
    int level = CM_SIMD_BASE;
#ifdef CM_X86_LEVELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) level = CM_SIMD_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) level = CM_SIMD_AVX512;
#endif
    return level;
}

static words_fn words_at(int level) {
#ifdef CM_X86_LEVELS
    if (level >= CM_SIMD_AVX512) return words_avx512;
    if (level >= CM_SIMD_AVX2) return words_avx2;
#endif
    (void)level;
    return words_base;
}

/* ---- one row -------------------------------------------------------------------------- */

static inline void put(uint8_t *p, size_t elem, uint64_t neg) {
    if (elem == 2) {
        uint16_t v = (uint16_t)neg;
        memcpy(p, &v, 2);
    } else if (elem == 4) {
        uint32_t v = (uint32_t)neg;
        memcpy(p, &v, 4);
    } else {
        memcpy(p, &neg, 8);
    }
}

/* Words w0 .. of the first n logits of a row, logit i at x + i * col_stride (any stride). */
static void words_strided(uint8_t *x, const cm_logits_view *l, const cm_mask_view *m, const uint8_t *mrow,
                          size_t n, size_t w0) {
    for (size_t w = w0; 32 * w < n; w++) {
        uint32_t bits = mask_word(m, mrow, w);
        if (bits == UINT32_MAX) continue;
        size_t end = n - 32 * w < 32 ? n - 32 * w : 32;
        for (size_t j = 0; j < end; j++)
            if (!((bits >> j) & 1u)) put(x + (ptrdiff_t)(32 * w + j) * l->col_stride, l->elem_size, l->neg);
    }
}

static void apply_row(const cm_logits_view *l, const cm_mask_view *m, size_t r, words_fn words) {
    uint8_t *x = l->base + (ptrdiff_t)r * l->row_stride;
    size_t n = l->width < 32 * m->n_words ? l->width : 32 * m->n_words;
    if (n) {
        const uint8_t *mrow = m->base + (ptrdiff_t)r * m->row_stride;
        size_t n_full = 0;
        if (l->col_stride == (ptrdiff_t)l->elem_size) {
            n_full = n / 32;
            words(x, l->elem_size, m, mrow, n_full, l->neg);
        }
        words_strided(x, l, m, mrow, n, n_full);
    }
    for (size_t i = n; i < l->width; i++) put(x + (ptrdiff_t)i * l->col_stride, l->elem_size, l->neg);
}

/* Elements of a supported size, aligned to it, and a base pointer wherever there is
 * something to read or write. */
static int views_ok(const cm_logits_view *l, const cm_mask_view *m) {
    size_t e = l->elem_size;
    if (e != 2 && e != 4 && e != 8) return 0;
    if (l->n_rows && l->width &&
        (!l->base || (uintptr_t)l->base % e || l->row_stride % (ptrdiff_t)e || l->col_stride % (ptrdiff_t)e))
        return 0;
    return !(m->n_rows && m->n_words && !m->base);
}

int cm_apply_mask(const cm_logits_view *l, const cm_mask_view *m, const int64_t *rows, size_t n_rows,
                  int max_simd) {
    if (!l || !m || !views_ok(l, m)) return CM_ERR_ARG;
    if (!rows && l->n_rows != m->n_rows) return CM_ERR_ARG;
    size_t count = rows ? n_rows : l->n_rows;
    for (size_t k = 0; rows && k < count; k++)
        if (rows[k] < 0 || (uint64_t)rows[k] >= l->n_rows || (uint64_t)rows[k] >= m->n_rows) return CM_ERR_ARG;
    if (!l->width) return CM_OK;
    int level = cm_apply_mask_simd();
    words_fn words = words_at(max_simd > 0 && max_simd < level ? max_simd : level);
    for (size_t k = 0; k < count; k++) {
        int64_t r = rows ? rows[k] : (int64_t)k;
        /* read once and checked again where used: rows another thread rewrote meanwhile
         * cannot lead outside the views */
        if (r >= 0 && (uint64_t)r < l->n_rows && (uint64_t)r < m->n_rows) apply_row(l, m, (size_t)r, words);
    }
    return CM_OK;
}
