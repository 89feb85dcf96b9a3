/* Which bytes each trie entry holds, by byte feature (tokclass.c): lets a
 * loop's or run's walk take every entry whose bytes all stay inside it at once. */
#ifndef CFGMASK_TOKCLASS_H
#define CFGMASK_TOKCLASS_H

#include <stdbool.h>
#include <stdint.h>

#include "vocab.h"

/* The features of a byte of a token: 0 a control byte (0x00-0x1F, 0x7F), 1-95
 * a printable ASCII byte (0x20-0x7E, each its own), CM_TC_UTF8 a byte of a
 * well-formed multi-byte UTF-8 character wholly inside the token, CM_TC_HIGH
 * any other byte from 0x80 on (a character cut by the token's ends, or not
 * UTF-8). */
#define CM_TC_UTF8 96
#define CM_TC_HIGH 97
#define CM_TC_FEATURES 98

struct cm_tokclass {
    size_t n_words;             /* words a set over trie entries: (n_trie + 31) / 32 */
    size_t n_id_words;          /* words a set over token ids: (n_tokens + 31) / 32 */
    uint32_t *has;              /* [CM_TC_FEATURES * n_words]: bit k of set f, trie entry k holds a byte of f */
    uint32_t *has_id;           /* [CM_TC_FEATURES * n_id_words]: the same sets by token id */
    uint32_t *trie_ids;         /* [n_id_words]: the ids of the trie's tokens */
    /* The trie entries of each first byte b ([first_off[b], first_off[b+1])) by length, stably:
     * by_len[len_at[len_base[b] + L - 1] .. len_at[len_base[b] + L]) those of length L, for
     * L in 1..len_base[b+1] - len_base[b] - 1 (a chain's walk lists the entries it takes in
     * bulk by need, which grows with the length: chains.c) */
    uint32_t *by_len;           /* [n_trie] */
    uint32_t *len_at;           /* [len_base[256]] */
    uint32_t len_base[257];
};

/* The vocabulary's summary, made on first use (thread-safe); NULL when out of memory. */
const cm_tokclass *cm_tokclass_of(const cm_vocab *v);
void cm_tokclass_free(cm_tokclass *tc);

/* The length of the well-formed UTF-8 character of 2-4 bytes at p[0..n)
 * (Unicode's table 3-7), else 0. */
int cm_utf8_len(const uint8_t *p, size_t n);

/* in[CM_TC_FEATURES] := which features lie wholly in x (bit b of x[b >> 5]:
 * byte b), CM_TC_UTF8 also when `utf8` (every well-formed character stays
 * inside); false when none does. */
bool cm_tokclass_inside(const uint32_t *x, bool utf8, bool *in);
/* out[w0..w1) := the words w0..w1 of the union of the sets of the features
 * not `in` (by trie entry, or with by_id by token id). */
void cm_tokclass_union(const cm_tokclass *tc, const bool *in, bool by_id, size_t w0, size_t w1, uint32_t *out);

/* 0 turns the bulk walks off process-wide (the tests' reference), 1 on where
 * they pay (the default), 2 on wherever they apply (the tests' small vocabularies). */
void cm_tokclass_enable(int mode);
int cm_tokclass_mode(void);
/* The walks that took entries so (loops.c counts them; the tests read it). */
void cm_tokclass_count_walk(void);
size_t cm_tokclass_walks(void);

#endif
