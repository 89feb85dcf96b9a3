/* The vocabulary and its token trie (vocab.c). */
#ifndef CFGMASK_VOCAB_H
#define CFGMASK_VOCAB_H

#include "cfgmask.h"

/* The loop walks the vocabulary keeps for every grammar compiled for it
 * (loopstore.c): mutable, shared, behind a pointer of its own. */
typedef struct cm_walk_store cm_walk_store;
/* Which bytes each trie entry holds (tokclass.c), made on first use. */
typedef struct cm_tokclass cm_tokclass;
/* A byte class's X-only entries by length (flat.c, class_table), made on first use. */
struct cm_flat_cls;
#define CM_VOCAB_CLASSES 8

struct cm_vocab {
    size_t n_tokens;
    uint8_t *data;          /* all token bytes, concatenated */
    uint64_t *offsets;      /* [n_tokens + 1] */
    uint8_t *in_trie;       /* [n_tokens] */
    size_t n_trie;
    uint32_t *trie_ids;     /* text tokens sorted by bytes: the trie in DFS order */
    uint32_t *trie_lcp;     /* common prefix length with the previous trie entry */
    uint8_t *trie_data;     /* token bytes again, in trie order: walks stream memory */
    uint64_t *trie_off;     /* [n_trie + 1] */
    /* skip[trie_off[k] + d - 1]: the first entry after k whose common prefix
     * with its predecessor is shorter than d, i.e. the end of the subtree of
     * k's first d bytes (the trie's "next sibling" links, one per node on k's path) */
    uint32_t *skip;
    uint32_t first_off[257];    /* the trie entries starting with byte b: [first_off[b], first_off[b+1]) */
    uint32_t max_len;
    /* The plain entries: tokens of JSON string bytes only (0x20-0x7E but `"` and `\`), at most
     * CM_PLAIN_MAX_LEN long, which
     * a flat walk accepts in bulk where every configuration they reach is live (flat.c).
     * NULL when memory was short (no bulk skip).  plain_next[k]: the first entry >= k that
     * is not plain ([n_trie + 1], plain_next[n_trie] = n_trie); plain_lcp[k]: for an entry
     * that is not plain, its common prefix with the previous one that is not; plain_bits:
     * the plain entries' tokens, [ceil(n_tokens / 32)], n_plain of them. */
    uint32_t *plain_next, *plain_lcp, *plain_bits;
    uint32_t n_plain;
    /* The text entries: plain bytes and whole well-formed UTF-8 characters of 2-4 bytes
     * (no surrogates, no overlong forms: cm_utf8_step), at most CM_PLAIN_MAX_LEN bytes
     * long (` é`, `ção`); the plain entries are text entries.  A whole flat walk whose
     * start stays live on them accepts them in bulk (flat.c).  The same tables as the
     * plain ones: text_next, text_lcp, text_bits (n_text of them).  NULL when memory
     * was short. */
    uint32_t *text_next, *text_lcp, *text_bits;
    uint32_t n_text;
    /* The beginnings of the characters of 2-4 bytes that the text entries hold, as bit sets
     * (cm_text_used): a lead byte [256 bits], a lead and a second byte [256 x 256], a lead
     * E0-F4 and two more bytes [21 x 64 x 64].  A flat text proof may leave a character's
     * step dead where no text entry holds it (flat.c, flat_text_live: a pattern's `.` that
     * excludes U+2028).  NULL when memory was short or there are no text tables. */
    uint32_t *text_used;
    /* The name entries: a first byte, then a name ([A-Za-z_][A-Za-z0-9_]*), at most
     * CM_PLAIN_MAX_LEN long (` foo`, `foo`), which a whole flat walk accepts in bulk
     * under a first byte whose configuration stays live on every such name (flat.c:
     * Lark's keywords and names, inline in each rule after its blanks).  The same
     * tables as the plain ones: name_next, name_lcp; name_ids: the name entries'
     * tokens in trie order, those of first byte b at name_off[b] .. name_off[b + 1).
     * NULL when memory was short. */
    uint32_t *name_next, *name_lcp, *name_ids;
    uint32_t name_off[257];
    /* name_bits[b]: first byte b's name tokens as a bit set, [ceil(n_tokens / 32)], for the
     * first bytes with at least an eighth that many (Llama-3: 28 of them, ' ' 42,839 down to
     * 'm' 526; vocab.c, CM_NAME_SETS_DIV), where one OR of the words costs less than setting
     * the ids one by one; NULL elsewhere (cm_vocab_names). */
    uint32_t *name_bits[256];
    /* name_all: the name entries of every name byte ([0-9A-Z_a-z], cm_name_byte) as one bit
     * set, [ceil(n_tokens / 32)] (Llama-3: 32,910 tokens), which a whole-trie run walk of a
     * name takes in one OR (loopstore.c, run_named_bits); NULL when memory was short. */
    uint32_t *name_all;
    cm_walk_store *walks;
    struct cm_segcut_store *segcuts;  /* segcut.c: segment walk tables by unit form */
    _Atomic(cm_tokclass *) tokclass;
    /* flat.c's class tables: they depend on the vocabulary and the class's bytes only, so the
       grammars of the vocabulary share them; a slot set once (compare and swap), never changed */
    _Atomic(struct cm_flat_cls *) classes[CM_VOCAB_CLASSES];
};

/* Frees the class tables (flat.c). */
void cm_flat_classes_free(cm_vocab *v);

/* A plain entry is at most this long: a walk whose start dies on plain bytes only
 * past this depth (a counted key, a maxLength string) still skips them. */
#define CM_PLAIN_MAX_LEN 16

static inline bool cm_plain_byte(uint8_t b) { return b >= 0x20 && b <= 0x7E && b != '"' && b != '\\'; }

/* The UTF-8 automaton of text entries (Unicode's table 3-7): from state u (0: at a
 * character's start; 1-3: that many continuation bytes 0x80-0xBF left; 4: after 0xE0,
 * 5: after 0xED, 6: after 0xF0, 7: after 0xF4, whose next byte has a narrower range,
 * then 1, 1, 2, 2 left) on byte b: the next state, -1 if b cannot come there. */
#define CM_UTF8_STATES 8
static inline int cm_utf8_step(int u, uint8_t b) {
    if (u == 0) {
        if (cm_plain_byte(b)) return 0;
        if (b >= 0xC2 && b <= 0xDF) return 1;
        if (b == 0xE0) return 4;
        if (b == 0xED) return 5;
        if (b >= 0xE1 && b <= 0xEF) return 2;
        if (b == 0xF0) return 6;
        if (b >= 0xF1 && b <= 0xF3) return 3;
        return b == 0xF4 ? 7 : -1;
    }
    if (b < 0x80 || b > 0xBF) return -1;
    if (u <= 3) return u - 1;
    if (u == 4) return b >= 0xA0 ? 1 : -1;
    if (u == 5) return b <= 0x9F ? 1 : -1;
    if (u == 6) return b >= 0x90 ? 2 : -1;
    return b <= 0x8F ? 2 : -1;
}

/* text_used's words: the lead bytes, then the (lead, second byte) pairs, then the (lead
 * E0-F4, second, third byte) triples */
#define CM_TEXT_USED1 0u
#define CM_TEXT_USED2 8u
#define CM_TEXT_USED3 (8u + 2048u)
#define CM_TEXT_USED_WORDS (8u + 2048u + 21u * 128u)

/* A name's first byte ([A-Za-z_]) and its other bytes ([A-Za-z0-9_]). */
static inline bool cm_name_first(uint8_t b) { return (unsigned)((b | 0x20) - 'a') < 26u || b == '_'; }
static inline bool cm_name_byte(uint8_t b) { return cm_name_first(b) || (unsigned)(b - '0') < 10u; }

/* First byte b's name entries' tokens set in bits ([ceil(n_tokens / 32)]): their count. */
uint32_t cm_vocab_names(const cm_vocab *v, uint8_t b, uint32_t *bits);
/* The divisor of the name sets' threshold (vocab.c), for vocabularies built from now on
 * (process-wide; 0: the default CM_NAME_SETS_DIV), and how many first bytes of v have a set. */
#define CM_NAME_SETS_DIV 8
void cm_vocab_name_sets_div(unsigned div);
unsigned cm_vocab_name_sets(const cm_vocab *v);

static inline const uint8_t *cm_trie_bytes(const cm_vocab *v, size_t k, uint32_t *len) {
    *len = (uint32_t)(v->trie_off[k + 1] - v->trie_off[k]);
    return v->trie_data + v->trie_off[k];
}

static inline const uint8_t *cm_tok_bytes(const cm_vocab *v, uint32_t t, uint32_t *len) {
    *len = (uint32_t)(v->offsets[t + 1] - v->offsets[t]);
    return v->data + v->offsets[t];
}

#endif
