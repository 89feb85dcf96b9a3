/* Mask-cache entries: reading, comparing and freeing them. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"

void cm_entry_free(cm_entry *e) {
    if (!e) return;
    free(e->accepted_ids);
    free(e->accepted_bits);
    free(e->uncertain);
    free(e->wrap_bits);
    free(e->rest);
    free(e);
}

void cm_or_accepted(const cm_grammar *g, uint32_t *words, const cm_entry *e, const uint32_t *allow) {
    if (e->accepted_bits) {
        if (allow) cm_or_words_and(words, e->accepted_bits, allow, g->n_words);
        else cm_or_words(words, e->accepted_bits, g->n_words);
        return;
    }
    /* locals: `words` may alias *e as far as the compiler knows */
    const uint32_t *ids = e->accepted_ids, n = e->n_accepted;
    for (uint32_t i = 0; i < n; i++)
        if (!allow || cm_bit(allow, ids[i])) words[ids[i] >> 5] |= 1u << (ids[i] & 31);
}

#define CM_HASH_MUL 0x100000001b3ULL

/* h folded with n words, four independent lanes: one serial multiply chain
 * waits its latency per word (~4 cycles: 16 K cycles for a dense entry's 4,008
 * words, where four lanes cost a quarter). */
static uint64_t hash_u32(uint64_t h, const uint32_t *p, size_t n) {
    uint64_t a = h, b = h ^ 0x632BE59BD9B4E019ULL, c = h ^ 0x8CB92BA72F3D8DD7ULL, d = h ^ 0xD6E8FEB86659FD93ULL;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a = (a ^ p[i]) * CM_HASH_MUL;
        b = (b ^ p[i + 1]) * CM_HASH_MUL;
        c = (c ^ p[i + 2]) * CM_HASH_MUL;
        d = (d ^ p[i + 3]) * CM_HASH_MUL;
    }
    for (; i < n; i++) a = (a ^ p[i]) * CM_HASH_MUL;
    return (a ^ (b << 16 | b >> 48) ^ (c << 32 | c >> 32) ^ (d << 48 | d >> 16)) * CM_HASH_MUL;
}

/* hash_u32 over a bitset read as 64-bit words: half the multiplies (a bitset entry is 4,008
 * words at Llama-3's size, and every entry built is hashed to be interned).  With `step` 32, one
 * 64-bit word of every four (the first of each 32 bytes), the rest whole: the hash only picks the
 * slot where cm_entry_equal compares the whole content, so equal entries still meet and a
 * collision costs one compare.  At the median schemas' first documents every number, string or
 * value start is a bitset entry, a sibling's equal entry hashed again, and a quarter tells them
 * apart: they differ in their counts (hashed too) or in runs of ids far wider than 32 bytes. */
static inline uint64_t hash_bits(uint64_t h, const uint32_t *p, size_t n, size_t step) {
    uint64_t a = h, b = h ^ 0x632BE59BD9B4E019ULL, c = h ^ 0x8CB92BA72F3D8DD7ULL, d = h ^ 0xD6E8FEB86659FD93ULL;
    size_t i = 0, lane = step / 4;
    for (; i + step <= n; i += step) {
        uint64_t q[4];
        for (size_t k = 0; k < 4; k++) memcpy(&q[k], p + i + k * lane, sizeof q[k]);
        a = (a ^ q[0]) * CM_HASH_MUL;
        b = (b ^ q[1]) * CM_HASH_MUL;
        c = (c ^ q[2]) * CM_HASH_MUL;
        d = (d ^ q[3]) * CM_HASH_MUL;
    }
    for (; i < n; i++) a = (a ^ p[i]) * CM_HASH_MUL;
    return (a ^ (b << 16 | b >> 48) ^ (c << 32 | c >> 32) ^ (d << 48 | d >> 16)) * CM_HASH_MUL;
}

static atomic_int g_hash_sampled = 1;

void cm_entry_hash_sampled_enable(int on) { atomic_store(&g_hash_sampled, on); }

uint64_t cm_entry_hash(const cm_grammar *g, const cm_entry *e) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ e->n_accepted ^ ((uint64_t)e->n_uncertain << 32);
    size_t step = atomic_load_explicit(&g_hash_sampled, memory_order_relaxed) ? 32 : 8;
    if (e->accepted_bits) h = hash_bits(h, e->accepted_bits, g->n_words, step);
    else h = hash_u32(h, e->accepted_ids, e->n_accepted);
    /* a split entry's uncertain tokens are its wrap bits' and its rest: near a block's end
     * 10^5 of them, where the bits are n_words (equal entries are split alike) */
    if (e->wrap_bits && e->n_uncertain > g->n_words) h = hash_bits(h ^ 1, e->wrap_bits, g->n_words, 8);
    else h = hash_u32(h, e->uncertain, e->n_uncertain);
    h = hash_u32(h ^ e->n_rest, e->rest, e->n_rest);
    h ^= h >> 29;
    return h ? h : 1;
}

/* Equal content; a and b carry their hashes. */
bool cm_entry_equal(const cm_grammar *g, const cm_entry *a, const cm_entry *b) {
    if (a->hash != b->hash || a->n_accepted != b->n_accepted || a->n_uncertain != b->n_uncertain ||
        !a->accepted_bits != !b->accepted_bits)
        return false;
    if (a->accepted_bits ? memcmp(a->accepted_bits, b->accepted_bits, g->n_words * sizeof(uint32_t))
                         : memcmp(a->accepted_ids, b->accepted_ids, a->n_accepted * sizeof(uint32_t)))
        return false;
    if (a->n_uncertain && memcmp(a->uncertain, b->uncertain, a->n_uncertain * sizeof(uint32_t))) return false;
    if (!a->wrap_bits != !b->wrap_bits || a->n_rest != b->n_rest) return false;
    if (!a->wrap_bits) return true;
    return !memcmp(a->wrap_bits, b->wrap_bits, g->n_words * sizeof(uint32_t)) &&
           (!a->n_rest || !memcmp(a->rest, b->rest, a->n_rest * sizeof(uint32_t)));
}
