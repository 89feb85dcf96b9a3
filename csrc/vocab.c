/* The vocabulary and its token trie, stored flat: text tokens sorted by their
 * bytes (a DFS order of the trie) with each entry's common prefix length with
 * its predecessor.  Walking the sorted list while keeping one automaton state
 * per depth visits every trie node exactly once (llguidance's toktrie idea). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "loops.h"
#include "segcut.h"
#include "tokclass.h"

typedef struct {
    const cm_vocab *v;
} sort_ctx;

static int cmp_tokens(const cm_vocab *v, uint32_t a, uint32_t b) {
    uint32_t la, lb;
    const uint8_t *pa = cm_tok_bytes(v, a, &la);
    const uint8_t *pb = cm_tok_bytes(v, b, &lb);
    uint32_t n = la < lb ? la : lb;
    int r = n ? memcmp(pa, pb, n) : 0;
    if (r) return r;
    if (la != lb) return la < lb ? -1 : 1;
    return a < b ? -1 : (a > b);
}

/* Bottom-up merge sort of token ids by bytes (stable, no global context). */
static int sort_ids(const cm_vocab *v, uint32_t *ids, size_t n) {
    uint32_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) return CM_ERR_NOMEM;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp_tokens(v, ids[i], ids[j]) <= 0 ? ids[i++] : ids[j++];
            while (i < mid) tmp[k++] = ids[i++];
            while (j < hi) tmp[k++] = ids[j++];
        }
        memcpy(ids, tmp, n * sizeof *ids);
    }
    free(tmp);
    return CM_OK;
}

static uint32_t common_prefix(const cm_vocab *v, uint32_t a, uint32_t b) {
    uint32_t la, lb;
    const uint8_t *pa = cm_tok_bytes(v, a, &la);
    const uint8_t *pb = cm_tok_bytes(v, b, &lb);
    uint32_t n = la < lb ? la : lb, i = 0;
    while (i < n && pa[i] == pb[i]) i++;
    return i;
}

/* The skip links' prefix lengths (vocab.h: plain_lcp, name_lcp): for each entry k
 * that is no member (next[k] == k), the least trie_lcp since the last non-member entry
 * before it (0 for the first), which a walk skipping the members in between holds. */
static void skip_lcp(const cm_vocab *v, const uint32_t *next, uint32_t *lcp) {
    uint32_t run = UINT32_MAX;
    bool seen = false;
    for (size_t k = 0; k < v->n_trie; k++) {
        if (k && v->trie_lcp[k] < run) run = v->trie_lcp[k];
        if (next[k] != k) continue;
        lcp[k] = run == UINT32_MAX || !seen ? 0 : run;
        run = UINT32_MAX;
        seen = true;
    }
}

/* Whether trie entry k is plain (text: false) or text (true) (vocab.h); inlined
 * with text a constant (a pass over every entry's bytes at the vocabulary's build). */
static inline __attribute__((always_inline)) bool entry_bulk(const cm_vocab *v, size_t k, bool text) {
    uint32_t len;
    const uint8_t *p = cm_trie_bytes(v, k, &len);
    if (len == 0 || len > CM_PLAIN_MAX_LEN) return false;
    int u = 0;
    for (uint32_t i = 0; i < len && u >= 0; i++) u = text ? cm_utf8_step(u, p[i]) : cm_plain_byte(p[i]) ? 0 : -1;
    return u == 0;
}

/* The plain (text: the text) entries' tables (vocab.h); left NULL when memory is short. */
static inline __attribute__((always_inline)) void build_bulk(cm_vocab *v, bool text, uint32_t **next_out,
                                                             uint32_t **lcp_out, uint32_t **bits_out,
                                                             uint32_t *n_out) {
    uint32_t *nx = malloc((v->n_trie + 1) * sizeof *nx);
    uint32_t *lcp = malloc((v->n_trie ? v->n_trie : 1) * sizeof *lcp);
    uint32_t *bits = calloc((v->n_tokens + 31) / 32, sizeof *bits);
    if (!nx || !lcp || !bits) {
        free(nx);
        free(lcp);
        free(bits);
        return;
    }
    uint32_t n = 0;
    uint32_t next = (uint32_t)v->n_trie;
    nx[v->n_trie] = next;
    for (size_t k = v->n_trie; k-- > 0;) {
        /* a plain entry is a text one (the plain tables are made first) */
        bool plain = text && v->plain_bits && cm_bit(v->plain_bits, v->trie_ids[k]);
        if (plain || entry_bulk(v, k, text)) {
            cm_set_bit(bits, v->trie_ids[k]);
            n++;
        } else {
            next = (uint32_t)k;
        }
        nx[k] = next;
    }
    skip_lcp(v, nx, lcp);
    *next_out = nx;
    *lcp_out = lcp;
    *bits_out = bits;
    *n_out = n;
}

/* text_used (vocab.h): the beginnings of the characters of 2-4 bytes in the text entries
 * (those that are not plain: the others hold none); left NULL when memory is short. */
static void build_text_used(cm_vocab *v) {
    if (!v->text_bits) return;
    uint32_t *used = calloc(CM_TEXT_USED_WORDS, sizeof *used);
    if (!used) return;
    for (size_t k = 0; k < v->n_trie; k++) {
        uint32_t id = v->trie_ids[k], len;
        if (!cm_bit(v->text_bits, id) || (v->plain_bits && cm_bit(v->plain_bits, id))) continue;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        for (uint32_t i = 0; i < len;) {
            uint8_t b = p[i];
            uint32_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;  /* a text entry's characters are whole */
            if (n > 1) {
                cm_set_bit(used + CM_TEXT_USED1, b);
                cm_set_bit(used + CM_TEXT_USED2, (unsigned)b << 8 | p[i + 1]);
                if (n > 2)
                    cm_set_bit(used + CM_TEXT_USED3,
                               (unsigned)(b - 0xE0) << 12 | (unsigned)(p[i + 1] & 0x3F) << 6 | (p[i + 2] & 0x3Fu));
            }
            i += n;
        }
    }
    v->text_used = used;
}

/* A first byte's name tokens get a bit set (vocab.h: name_bits) when there are at least
 * n_words / div of them: an id set one by one costs ~7 instructions, an OR of the words ~0.6 a
 * word (two AVX2 lanes), so the set pays from ~n_words / 11 ids on.  The divisor was 1 (three
 * sets at Llama-3: ' ', '.', '_'); 8 gives 28 (each 16 KB, built with the vocabulary), and a
 * name walk under 'a', 'i', '(', '-', 'e', 'p', ... takes its 500-2,400 ids in one OR: c's
 * and sql's cold masks call cm_vocab_names 130-290 times each.  Read when a vocabulary is
 * built (process-wide; cm_vocab_name_sets_div(1): the old rule, for the tests). */
static atomic_size_t g_name_sets_div = CM_NAME_SETS_DIV;

void cm_vocab_name_sets_div(unsigned div) { atomic_store(&g_name_sets_div, div ? div : CM_NAME_SETS_DIV); }

/* The name entries' tables (vocab.h), in the plain ones' shape; left NULL
 * when memory is short. */
static void build_names(cm_vocab *v) {
    v->name_next = malloc((v->n_trie + 1) * sizeof *v->name_next);
    v->name_lcp = malloc((v->n_trie ? v->n_trie : 1) * sizeof *v->name_lcp);
    v->name_ids = malloc((v->n_trie ? v->n_trie : 1) * sizeof *v->name_ids);
    if (!v->name_next || !v->name_lcp || !v->name_ids) {
        free(v->name_next);
        free(v->name_lcp);
        free(v->name_ids);
        v->name_next = v->name_lcp = v->name_ids = NULL;
        return;
    }
    uint32_t next = (uint32_t)v->n_trie, n = 0;
    v->name_next[v->n_trie] = next;
    for (size_t k = v->n_trie; k-- > 0;) {
        uint32_t len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        bool name = len >= 2 && len <= CM_PLAIN_MAX_LEN && cm_name_first(p[1]);
        for (uint32_t i = 2; i < len && name; i++) name = cm_name_byte(p[i]);
        if (!name) next = (uint32_t)k;
        v->name_next[k] = next;
    }
    skip_lcp(v, v->name_next, v->name_lcp);
    memset(v->name_off, 0, sizeof v->name_off);
    for (size_t k = 0; k < v->n_trie; k++)
        if (v->name_next[k] != k) {
            v->name_ids[n++] = v->trie_ids[k];
            v->name_off[v->trie_data[v->trie_off[k]] + 1] = n;
        }
    for (unsigned b = 0; b < 256; b++)
        if (v->name_off[b + 1] < v->name_off[b]) v->name_off[b + 1] = v->name_off[b];
    size_t n_words = (v->n_tokens + 31) / 32, div = atomic_load(&g_name_sets_div);
    for (unsigned b = 0; b < 256; b++) {
        uint32_t n0 = v->name_off[b], n_b = v->name_off[b + 1] - n0;
        /* no set (memory short): the ids one by one */
        if (n_b && n_b * div >= n_words && (v->name_bits[b] = calloc(n_words, sizeof(uint32_t))))
            cm_set_bits(v->name_bits[b], v->name_ids + n0, n_b);
    }
    if ((v->name_all = calloc(n_words ? n_words : 1, sizeof(uint32_t))))
        for (unsigned b = '0'; b <= 'z'; b++)
            if (cm_name_byte((uint8_t)b)) cm_vocab_names(v, (uint8_t)b, v->name_all);
}

unsigned cm_vocab_name_sets(const cm_vocab *v) {
    unsigned n = 0;
    for (unsigned b = 0; b < 256; b++) n += v->name_bits[b] != NULL;
    return n;
}

uint32_t cm_vocab_names(const cm_vocab *v, uint8_t b, uint32_t *bits) {
    uint32_t n0 = v->name_off[b], n_b = v->name_off[b + 1] - n0;
    if (v->name_bits[b]) cm_or_words(bits, v->name_bits[b], (v->n_tokens + 31) / 32);
    else cm_set_bits(bits, v->name_ids + n0, n_b);
    return n_b;
}

static int build_trie_data(cm_vocab *v) {
    size_t total = 0;
    v->trie_off = malloc((v->n_trie + 1) * sizeof *v->trie_off);
    if (!v->trie_off) return CM_ERR_NOMEM;
    for (size_t k = 0; k < v->n_trie; k++) {
        uint32_t len;
        cm_tok_bytes(v, v->trie_ids[k], &len);
        v->trie_off[k] = total;
        total += len;
    }
    v->trie_off[v->n_trie] = total;
    v->trie_data = malloc(total ? total : 1);
    v->skip = malloc((total ? total : 1) * sizeof *v->skip);
    uint32_t *best = malloc(((size_t)v->max_len + 2) * sizeof *best);
    if (!v->trie_data || !v->skip || !best) {
        free(best);
        return CM_ERR_NOMEM;
    }
    /* right to left: best[d] = first later entry whose lcp is < d.  Stored lazily:
     * best[d] == last for every d > top, so each step writes O(its lcp) slots and
     * the whole pass is O(total bytes), not O(n_trie * max_len) */
    uint32_t top = 0, last = (uint32_t)v->n_trie;
    for (size_t k = v->n_trie; k-- > 0;) {
        uint32_t len = (uint32_t)(v->trie_off[k + 1] - v->trie_off[k]), lcp = v->trie_lcp[k];
        for (uint32_t d = 1; d <= len; d++) v->skip[v->trie_off[k] + d - 1] = d > top ? last : best[d];
        for (uint32_t d = top + 1; d <= lcp; d++) best[d] = last;
        top = lcp;
        last = (uint32_t)k;
    }
    free(best);
    for (size_t k = 0; k < v->n_trie; k++) {
        uint32_t len;
        const uint8_t *p = cm_tok_bytes(v, v->trie_ids[k], &len);
        memcpy(v->trie_data + v->trie_off[k], p, len);
    }
    /* sorted by bytes: the entries starting with one byte are contiguous */
    uint32_t count[256] = {0};
    for (size_t k = 0; k < v->n_trie; k++) count[v->trie_data[v->trie_off[k]]]++;
    v->first_off[0] = 0;
    for (int b = 0; b < 256; b++) v->first_off[b + 1] = v->first_off[b] + count[b];
    build_bulk(v, false, &v->plain_next, &v->plain_lcp, &v->plain_bits, &v->n_plain);
    build_bulk(v, true, &v->text_next, &v->text_lcp, &v->text_bits, &v->n_text);
    build_text_used(v);
    build_names(v);
    return CM_OK;
}

int cm_vocab_new(const uint8_t *data, const uint64_t *offsets, const uint8_t *in_trie,
                 size_t n_tokens, cm_vocab **out) {
    if (!out || !offsets || !in_trie || n_tokens == 0 || n_tokens > UINT32_MAX - 1) return CM_ERR_ARG;
    *out = NULL;
    if (offsets[0] != 0) return CM_ERR_ARG;
    for (size_t i = 0; i < n_tokens; i++) {
        if (offsets[i + 1] < offsets[i] || offsets[i + 1] - offsets[i] > UINT32_MAX / 2) return CM_ERR_ARG;
    }
    size_t total = offsets[n_tokens];
    if (total && !data) return CM_ERR_ARG;
    cm_vocab *v = calloc(1, sizeof *v);
    if (!v) return CM_ERR_NOMEM;
    v->n_tokens = n_tokens;
    v->walks = cm_walk_store_new();
    v->segcuts = cm_segcut_store_new();
    v->data = malloc(total ? total : 1);
    v->offsets = malloc((n_tokens + 1) * sizeof *v->offsets);
    v->in_trie = malloc(n_tokens);
    v->trie_ids = malloc(n_tokens * sizeof *v->trie_ids);
    v->trie_lcp = malloc(n_tokens * sizeof *v->trie_lcp);
    if (!v->walks || !v->segcuts || !v->data || !v->offsets || !v->in_trie || !v->trie_ids || !v->trie_lcp) {
        cm_vocab_free(v);
        return CM_ERR_NOMEM;
    }
    if (total) memcpy(v->data, data, total);
    memcpy(v->offsets, offsets, (n_tokens + 1) * sizeof *offsets);
    for (size_t i = 0; i < n_tokens; i++) {
        uint32_t len = (uint32_t)(offsets[i + 1] - offsets[i]);
        v->in_trie[i] = in_trie[i] && len > 0;
        if (v->in_trie[i]) {
            v->trie_ids[v->n_trie++] = (uint32_t)i;
            if (len > v->max_len) v->max_len = len;
        }
    }
    if (sort_ids(v, v->trie_ids, v->n_trie) != CM_OK) {
        cm_vocab_free(v);
        return CM_ERR_NOMEM;
    }
    for (size_t k = 0; k < v->n_trie; k++)
        v->trie_lcp[k] = k ? common_prefix(v, v->trie_ids[k - 1], v->trie_ids[k]) : 0;
    if (build_trie_data(v) != CM_OK) {
        cm_vocab_free(v);
        return CM_ERR_NOMEM;
    }
    *out = v;
    return CM_OK;
}

void cm_vocab_free(cm_vocab *v) {
    if (!v) return;
    cm_walk_store_free(v->walks);
    cm_segcut_store_free(v->segcuts);
    free(v->data);
    free(v->offsets);
    free(v->in_trie);
    free(v->trie_ids);
    free(v->trie_lcp);
    free(v->trie_data);
    free(v->trie_off);
    free(v->skip);
    cm_tokclass_free(atomic_load(&v->tokclass));
    cm_flat_classes_free(v);
    free(v->plain_next);
    free(v->plain_lcp);
    free(v->plain_bits);
    free(v->text_next);
    free(v->text_lcp);
    free(v->text_bits);
    free(v->text_used);
    free(v->name_next);
    free(v->name_lcp);
    free(v->name_ids);
    for (unsigned b = 0; b < 256; b++) free(v->name_bits[b]);
    free(v->name_all);
    free(v);
}

size_t cm_vocab_size(const cm_vocab *v) { return v ? v->n_tokens : 0; }
size_t cm_vocab_trie_size(const cm_vocab *v) { return v ? v->n_trie : 0; }

void cm_vocab_clear_walks(cm_vocab *v) {
    if (v) cm_walk_store_clear(v->walks);
}

void cm_vocab_pin_walks(cm_vocab *v) {
    if (v) cm_walk_store_pin(v->walks);
}
