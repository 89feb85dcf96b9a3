/* Mask-cache entries: reading, comparing and freeing them. */
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

uint64_t cm_entry_hash(const cm_grammar *g, const cm_entry *e) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ e->n_accepted ^ ((uint64_t)e->n_uncertain << 32);
    if (e->accepted_bits)
        for (size_t i = 0; i < g->n_words; i++) h = (h ^ e->accepted_bits[i]) * 0x100000001b3ULL;
    else
        for (uint32_t i = 0; i < e->n_accepted; i++) h = (h ^ e->accepted_ids[i]) * 0x100000001b3ULL;
    for (uint32_t i = 0; i < e->n_uncertain; i++) h = (h ^ e->uncertain[i]) * 0x100000001b3ULL;
    h = (h ^ e->n_rest) * 0x100000001b3ULL;
    for (uint32_t i = 0; i < e->n_rest; i++) h = (h ^ e->rest[i]) * 0x100000001b3ULL;
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
