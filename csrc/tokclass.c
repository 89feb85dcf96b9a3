/* Which bytes each trie entry holds, by byte feature.
 *
 * A loop's walk (loops.c) reads every trie entry through the loop's table,
 * ~30-40 instructions an entry over Llama-3's 128k, though most entries of a
 * JSON string's pattern loop just stay inside: an entry whose bytes all lie in
 * the set X of bytes on which the loop's states stay inside (and whose
 * multi-byte characters keep them inside) ends inside whatever their order,
 * accepted, with no exit.  So the vocabulary keeps, once, for each byte
 * feature (each printable ASCII byte, the control bytes, whole UTF-8
 * characters, other high bytes) the set of entries holding one, by trie entry
 * and by token id, and a walk ORs the sets of the features not wholly in X:
 * the tokens outside that union are accepted at once, the entries in it walked
 * as before.  Exact for any X: a feature only partly in X sends more entries to
 * the plain walk.  Made on first use (~3 MB at Llama-3's 128k). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "tokclass.h"

#define CM_TC_NOMEM 1

static atomic_int g_enabled = 1;
static atomic_size_t g_walks;

void cm_tokclass_count_walk(void) { atomic_fetch_add(&g_walks, 1); }
size_t cm_tokclass_walks(void) { return atomic_load(&g_walks); }

void cm_tokclass_enable(int mode) { atomic_store(&g_enabled, mode < 0 || mode > 2 ? 1 : mode); }
int cm_tokclass_mode(void) { return atomic_load(&g_enabled); }

int cm_utf8_len(const uint8_t *p, size_t n) {
    uint8_t b = p[0], lo = 0x80, hi = 0xBF;
    int len;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (n < (size_t)len || p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return len;
}

static inline int ascii_feature(uint8_t b) { return b < 0x20 || b == 0x7f ? 0 : b - 0x1f; }

static void mark(uint32_t *has, size_t n_words, int f, size_t i) {
    has[(size_t)f * n_words + (i >> 5)] |= 1u << (i & 31);
}

/* tc's by_len, len_at and len_base: each first byte's entries by length (a counting sort). */
static int by_length(const cm_vocab *v, cm_tokclass *tc) {
    size_t n_at = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t top = 0;
        for (uint32_t k = v->first_off[b]; k < v->first_off[b + 1]; k++) {
            uint32_t len = (uint32_t)(v->trie_off[k + 1] - v->trie_off[k]);
            if (len > top) top = len;
        }
        tc->len_base[b] = (uint32_t)n_at;
        n_at += top ? top + 1 : 0;
    }
    tc->len_base[256] = (uint32_t)n_at;
    tc->by_len = malloc((v->n_trie ? v->n_trie : 1) * sizeof *tc->by_len);
    tc->len_at = calloc(n_at ? n_at : 1, sizeof *tc->len_at);
    if (!tc->by_len || !tc->len_at) return CM_TC_NOMEM;
    for (int b = 0; b < 256; b++) {
        uint32_t *at = tc->len_at + tc->len_base[b], n_len = tc->len_base[b + 1] - tc->len_base[b];
        if (!n_len) continue;
        for (uint32_t k = v->first_off[b]; k < v->first_off[b + 1]; k++)
            at[v->trie_off[k + 1] - v->trie_off[k]]++;  /* at[L]: how many of length L (>= 1) */
        uint32_t sum = v->first_off[b];
        for (uint32_t L = 0; L < n_len; L++) {  /* at[L - 1] := where length L starts */
            uint32_t c = L + 1 < n_len ? at[L + 1] : 0;
            at[L] = sum;
            sum += c;
        }
        for (uint32_t k = v->first_off[b]; k < v->first_off[b + 1]; k++)
            tc->by_len[at[v->trie_off[k + 1] - v->trie_off[k] - 1]++] = k;
        for (uint32_t L = n_len - 1; L > 0; L--) at[L] = at[L - 1];  /* back to the starts */
        at[0] = v->first_off[b];
    }
    return 0;
}

static cm_tokclass *build(const cm_vocab *v) {
    cm_tokclass *tc = calloc(1, sizeof *tc);
    if (!tc) return NULL;
    tc->n_words = (v->n_trie + 31) / 32;
    tc->n_id_words = (v->n_tokens + 31) / 32;
    tc->has = calloc((size_t)CM_TC_FEATURES * (tc->n_words ? tc->n_words : 1), sizeof *tc->has);
    tc->has_id = calloc((size_t)CM_TC_FEATURES * (tc->n_id_words ? tc->n_id_words : 1), sizeof *tc->has_id);
    tc->trie_ids = calloc(tc->n_id_words ? tc->n_id_words : 1, sizeof *tc->trie_ids);
    if (!tc->has || !tc->has_id || !tc->trie_ids) {
        cm_tokclass_free(tc);
        return NULL;
    }
    for (size_t k = 0; k < v->n_trie; k++) {
        uint32_t len, id = v->trie_ids[k];
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        cm_set_bit(tc->trie_ids, id);
        for (uint32_t i = 0; i < len;) {
            int f = CM_TC_HIGH, n = 1;
            if (p[i] < 0x80) f = ascii_feature(p[i]);
            else if ((n = cm_utf8_len(p + i, len - i)) > 0) f = CM_TC_UTF8;
            else n = 1;
            mark(tc->has, tc->n_words, f, k);
            mark(tc->has_id, tc->n_id_words, f, id);
            i += (uint32_t)n;
        }
    }
    if (by_length(v, tc)) {
        cm_tokclass_free(tc);
        return NULL;
    }
    return tc;
}

const cm_tokclass *cm_tokclass_of(const cm_vocab *v) {
    _Atomic(cm_tokclass *) *slot = &((cm_vocab *)v)->tokclass;  /* the one field made after the vocabulary */
    cm_tokclass *tc = atomic_load_explicit(slot, memory_order_acquire);
    if (tc) return tc;
    cm_tokclass *made = build(v), *none = NULL;
    if (!made) return NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &none, made, memory_order_acq_rel, memory_order_acquire))
        return made;
    cm_tokclass_free(made);  /* another thread made it first */
    return none;
}

void cm_tokclass_free(cm_tokclass *tc) {
    if (!tc) return;
    free(tc->has);
    free(tc->has_id);
    free(tc->trie_ids);
    free(tc->by_len);
    free(tc->len_at);
    free(tc);
}

bool cm_tokclass_inside(const uint32_t *x, bool utf8, bool *in) {
    bool any = false, high = true;
    for (int f = 0; f < CM_TC_FEATURES; f++) in[f] = true;
    for (int b = 0; b < 256; b++) {
        if ((x[b >> 5] >> (b & 31)) & 1u) continue;
        if (b < 0x80) in[ascii_feature((uint8_t)b)] = false;
        else high = false;
    }
    in[CM_TC_UTF8] = utf8 || high;
    in[CM_TC_HIGH] = high;
    for (int f = 0; f < CM_TC_FEATURES; f++) any |= in[f];
    return any;
}

void cm_tokclass_union(const cm_tokclass *tc, const bool *in, bool by_id, size_t w0, size_t w1, uint32_t *out) {
    size_t n = by_id ? tc->n_id_words : tc->n_words;
    const uint32_t *has = by_id ? tc->has_id : tc->has;
    memset(out + w0, 0, (w1 - w0) * sizeof *out);
    for (int f = 0; f < CM_TC_FEATURES; f++)
        if (!in[f]) cm_or_words(out + w0, has + (size_t)f * n + w0, w1 - w0);
}
