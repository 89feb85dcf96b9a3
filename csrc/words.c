/* Literal sets (CM_IR_WORDS): the minimal DFA of a finite set of byte strings, built
 * straight from the words: no NFA, no subset construction, no Hopcroft.
 *
 * The words are sorted, then added one at a time (Daciuk, Mihov, Watson & Watson 2000,
 * "Incremental construction of minimal acyclic finite-state automata", the algorithm for
 * sorted data): the states of the last word's path stay open; when the next word leaves
 * that path at depth p, the open states below p are final, and each is frozen bottom-up
 * into the register, a hash table of states by (accepting, edges).  A frozen state equal
 * to a registered one is that one, so every state of the result has its own right
 * language: the DFA is minimal, built in O(total bytes) register look-ups (plus the sort).
 *
 * JSON mode (CM_WORDS_JSON): each word is the UTF-8 text of a JSON string's value (no
 * surrogates), and the DFA reads that string with its quotes in every spelling JSON
 * allows.  The path is then over characters; freezing a state u with character edges
 * c -> v writes out every spelling of each c as a chain of byte states from u to v:
 * its UTF-8 bytes (unless JSON forbids it raw: '"', '\\', controls), its short escape
 * (\" \\ \/ \b \f \n \r \t), \uXXXX in either case (a surrogate pair above U+FFFF).
 * The spellings of c converge on v, and the chains go through the register too, so the
 * escapes of the whole set cost a few states per trie edge, and the DFA stays minimal
 * (an acyclic DFA whose states are hash-consed bottom-up is).  Cost per state, in both
 * modes: one hash of its edges. */
#include <stdlib.h>
#include <string.h>

#include "fsm.h"
#include "internal.h"

#define HEX 256u /* symbol HEX + d: the hex digit d, either case */

typedef struct {
    const uint8_t *p;
    uint32_t len;
} word;

/* Frozen states: state k is accepting if acc[k]; its edges are sym/to[off[k] .. off[k+1])
 * by increasing byte.  table: open addressing, state id + 1 (0: empty). */
typedef struct {
    cm_budget *bud;
    cm_vec32 acc, off, sym, to;
    uint32_t *table;
    size_t cap;
} reg;

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer: every bit reaches every bit */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t reg_hash(uint32_t acc, const uint32_t *sym, const uint32_t *to, size_t n) {
    uint64_t h = mix64(acc + 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < n; i++) h = mix64(h ^ (sym[i] | (uint64_t)to[i] << 9));
    return h;
}

static bool reg_equal(const reg *r, uint32_t k, uint32_t acc, const uint32_t *sym, const uint32_t *to, size_t n) {
    uint32_t a = r->off.data[k], b = r->off.data[k + 1];
    if (r->acc.data[k] != acc || b - a != n) return false;
    return !n || (!memcmp(r->sym.data + a, sym, n * sizeof *sym) && !memcmp(r->to.data + a, to, n * sizeof *to));
}

static int reg_grow(reg *r) {
    size_t cap = r->cap ? 2 * r->cap : 1024;
    int rc = CM_OK;
    uint32_t *t = cm_balloc(r->bud, cap * sizeof *t, true, &rc);
    if (rc) return rc;
    for (uint32_t k = 0; k + 1 < r->off.n; k++) {
        uint32_t a = r->off.data[k], n = r->off.data[k + 1] - a;
        size_t i = reg_hash(r->acc.data[k], r->sym.data + a, r->to.data + a, n) & (cap - 1);
        while (t[i]) i = (i + 1) & (cap - 1);
        t[i] = k + 1;
    }
    cm_bfree(r->bud, r->table);
    r->table = t;
    r->cap = cap;
    return CM_OK;
}

/* The id of the state (acc, edges sym/to[0..n)), registered if new.  The edges may lie in
 * r->sym/r->to themselves only past their end (a caller's scratch is elsewhere). */
static int reg_freeze(reg *r, uint32_t acc, const uint32_t *sym, const uint32_t *to, size_t n, uint32_t *id) {
    int rc = CM_OK;
    if (2 * (r->off.n + 1) > r->cap && (rc = reg_grow(r))) return rc;
    size_t i = reg_hash(acc, sym, to, n) & (r->cap - 1);
    for (; r->table[i]; i = (i + 1) & (r->cap - 1)) {
        if (reg_equal(r, r->table[i] - 1, acc, sym, to, n)) {
            *id = r->table[i] - 1;
            return CM_OK;
        }
    }
    if (r->off.n - 1 >= INT32_MAX) return CM_ERR_NOMEM;
    uint32_t k = (uint32_t)r->off.n - 1;
    if ((rc = cm_vec_reserve(&r->sym, r->sym.n + n)) || (rc = cm_vec_reserve(&r->to, r->to.n + n))) return rc;
    if (n) memcpy(r->sym.data + r->sym.n, sym, n * sizeof *sym), memcpy(r->to.data + r->to.n, to, n * sizeof *to);
    r->sym.n += n, r->to.n += n;
    if ((rc = cm_vec_push(&r->acc, acc)) || (rc = cm_vec_push(&r->off, (uint32_t)r->sym.n))) return rc;
    r->table[i] = k + 1;
    *id = k;
    return CM_OK;
}

/* ---- JSON spellings ------------------------------------------------------------ */

/* One spelling of a character: symbols (bytes, or HEX + digit) leading to state `to`. */
typedef struct {
    uint16_t sym[12];
    uint32_t len, to;
} spelling;

/* The code point at p[0..n) and its length, 0 if not UTF-8 or a surrogate. */
static uint32_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp) {
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t b = p[0], len = b < 0x80 ? 1 : b < 0xC0 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 0;
    if (!len || len > n) return 0;
    uint32_t c = len == 1 ? b : b & (0x7Fu >> len);
    for (uint32_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3F);
    }
    if (c < min_of[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

static void put_hex4(spelling *s, uint32_t v) {
    s->sym[s->len++] = '\\';
    s->sym[s->len++] = 'u';
    for (int sh = 12; sh >= 0; sh -= 4) s->sym[s->len++] = (uint16_t)(HEX + ((v >> sh) & 15));
}

/* The spellings of character c leading to state v, appended at out (at most 3). */
static size_t spellings(uint32_t c, uint32_t v, spelling *out) {
    static const char shorts[] = "\"\"\\\\//\bb\ff\nn\rr\tt";
    size_t n = 0;
    if (c >= 0x20 && c != '"' && c != '\\') {
        uint8_t buf[4];
        uint32_t len = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        buf[0] = (uint8_t)(len == 1 ? c : (0xF00u >> len & 0xF0) | c >> (6 * (len - 1)));
        for (uint32_t i = 1; i < len; i++) buf[i] = (uint8_t)(0x80 | ((c >> (6 * (len - 1 - i))) & 0x3F));
        out[n] = (spelling){.len = len, .to = v};
        for (uint32_t i = 0; i < len; i++) out[n].sym[i] = buf[i];
        n++;
    }
    for (size_t i = 0; i + 1 < sizeof shorts; i += 2) {
        if ((uint8_t)shorts[i] == c) out[n++] = (spelling){.sym = {'\\', (uint8_t)shorts[i + 1]}, .len = 2, .to = v};
    }
    out[n] = (spelling){.len = 0, .to = v};
    if (c < 0x10000) {
        put_hex4(&out[n], c);
    } else {
        put_hex4(&out[n], 0xD800 + ((c - 0x10000) >> 10));
        put_hex4(&out[n], 0xDC00 + ((c - 0x10000) & 0x3FF));
    }
    return n + 1;
}

static int cmp_spelling(const void *a, const void *b) {
    const spelling *x = a, *y = b;
    for (uint32_t i = 0; i < x->len && i < y->len; i++)
        if (x->sym[i] != y->sym[i]) return x->sym[i] < y->sym[i] ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Append the edge(s) of symbol s to child: a byte, or a hex digit's one or two bytes. */
static void add_edges(uint32_t s, uint32_t child, uint32_t *sym, uint32_t *to, size_t *n) {
    if (s < HEX) {
        sym[*n] = s, to[(*n)++] = child;
        return;
    }
    uint32_t d = s - HEX;
    sym[*n] = d < 10 ? '0' + d : 'a' + d - 10, to[(*n)++] = child;
    if (d >= 10) sym[*n] = 'A' + d - 10, to[(*n)++] = child;
}

static void sort_edges(uint32_t *sym, uint32_t *to, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint32_t s = sym[i], t = to[i];
        size_t j = i;
        for (; j && sym[j - 1] > s; j--) sym[j] = sym[j - 1], to[j] = to[j - 1];
        sym[j] = s, to[j] = t;
    }
}

/* The state after the common first `depth` symbols of sp[0..n) (sorted): one edge per
 * next symbol, to a spelling's end or to the state after that symbol, registered. */
static int build_spellings(reg *r, uint32_t acc, const spelling *sp, size_t n, uint32_t depth, uint32_t *id) {
    uint32_t sym[256], to[256];
    size_t m = 0;
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < n;) {
        uint32_t s = sp[i].sym[depth], child;
        size_t j = i + 1;
        while (j < n && sp[j].sym[depth] == s) j++;
        if (sp[i].len == depth + 1) {
            if (j != i + 1 || m + 2 > 256) return CM_ERR_ARG; /* one spelling a prefix of another */
            child = sp[i].to;
        } else if (sp[i].len > depth + 1) {
            rc = build_spellings(r, 0, sp + i, j - i, depth + 1, &child);
        } else {
            return CM_ERR_ARG;
        }
        if (!rc && m + 2 > 256) return CM_ERR_ARG;
        if (!rc) add_edges(s, child, sym, to, &m);
        i = j;
    }
    if (rc) return rc;
    sort_edges(sym, to, m);
    return reg_freeze(r, acc, sym, to, m, id);
}

/* ---- the incremental construction ------------------------------------------------ */

/* The open path: the states of the last word's prefixes, depth 0 (the root) to `depth`.
 * Depth d's edges to frozen children are esym/eto[start[d] ..) below depth d + 1's; pos[d]
 * is the byte offset in `prev` of the symbol that leaves depth d (pos[depth]: its length). */
typedef struct {
    reg r;
    bool json;
    cm_vec32 esym, eto, start, acc, pos;
    spelling *sp;
    size_t sp_cap;
    uint32_t final; /* JSON mode: the state after the closing quote */
    word prev;
} builder;

static uint32_t symbol_at(const builder *b, const word *w, uint32_t at) {
    uint32_t c = w->p[at];
    if (b->json) utf8_next(w->p + at, w->len - at, &c);
    return c;
}

/* JSON mode: the state with character edges csym/cto[0..n) as byte states. */
static int freeze_json(builder *b, uint32_t acc, const uint32_t *csym, const uint32_t *cto, size_t n, uint32_t *id) {
    int rc = CM_OK;
    if (3 * n + 2 > b->sp_cap) {
        size_t cap = 2 * (3 * n + 2);
        cm_bfree(b->r.bud, b->sp);
        b->sp = cm_balloc(b->r.bud, cap * sizeof *b->sp, false, &rc);
        b->sp_cap = rc ? 0 : cap;
        if (rc) return rc;
    }
    size_t m = 0;
    if (acc) b->sp[m++] = (spelling){.sym = {'"'}, .len = 1, .to = b->final};
    for (size_t i = 0; i < n; i++) m += spellings(csym[i], cto[i], b->sp + m);
    qsort(b->sp, m, sizeof *b->sp, cmp_spelling);
    return build_spellings(&b->r, 0, b->sp, m, 0, id);
}

/* Freeze the open states deeper than `keep`, each into an edge of its parent. */
static int unwind(builder *b, uint32_t keep) {
    int rc = CM_OK;
    for (uint32_t d = (uint32_t)b->start.n - 1; !rc && d > keep; d--) {
        uint32_t at = b->start.data[d], id;
        size_t n = b->esym.n - at;
        if (b->json) rc = freeze_json(b, b->acc.data[d], b->esym.data + at, b->eto.data + at, n, &id);
        else rc = reg_freeze(&b->r, b->acc.data[d], b->esym.data + at, b->eto.data + at, n, &id);
        if (rc) return rc;
        b->esym.n = b->eto.n = at;
        b->start.n = b->acc.n = b->pos.n = d;
        rc = cm_vec_push(&b->esym, symbol_at(b, &b->prev, b->pos.data[d - 1]));
        if (!rc) rc = cm_vec_push(&b->eto, id);
    }
    return rc;
}

/* The depth of the shared prefix of the path and w: their common bytes, cut back to a
 * character boundary in JSON mode, as a depth of the path (pos is increasing). */
static uint32_t shared_depth(const builder *b, const word *w) {
    uint32_t p = 0, n = w->len < b->prev.len ? w->len : b->prev.len;
    while (p < n && w->p[p] == b->prev.p[p]) p++;
    while (b->json && p > 0 && p < w->len && (w->p[p] & 0xC0) == 0x80) p--;
    uint32_t k = cm_rank_u32(b->pos.data, b->pos.n, p);
    return k < b->pos.n && b->pos.data[k] == p ? k : k - 1; /* pos[0] = 0 <= p */
}

/* Add word w (not less than the last one): the path below the shared prefix is frozen,
 * w's own suffix opened. */
static int add_word(builder *b, const word *w) {
    uint32_t k = shared_depth(b, w);
    int rc = unwind(b, k);
    uint32_t at = b->pos.data[k];
    b->prev = *w;
    while (!rc && at < w->len) {
        uint32_t c, len = 1;
        if (b->json && !(len = utf8_next(w->p + at, w->len - at, &c))) return CM_ERR_ARG;
        at += len;
        rc = cm_vec_push(&b->start, (uint32_t)b->esym.n);
        if (!rc) rc = cm_vec_push(&b->acc, 0);
        if (!rc) rc = cm_vec_push(&b->pos, at);
    }
    if (!rc) b->acc.data[b->acc.n - 1] = 1;
    return rc;
}

/* ---- the node, the builder, the DFA ---------------------------------------------- */

static int cmp_word(const void *a, const void *b) {
    const word *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* WORDS [op, flags, n_words, n_bytes, len * n_words, bytes packed 4 a uint32]: the words. */
static int read_words(const cm_ir_input *in, uint32_t pc, cm_budget *bud, word **out, uint32_t *n_out) {
    const uint32_t *code = in->code;
    if ((size_t)pc + 4 > in->code_len) return CM_ERR_ARG;
    uint32_t n = code[pc + 2], n_bytes = code[pc + 3];
    size_t lens = (size_t)pc + 4, data = lens + n, end = data + ((size_t)n_bytes + 3) / 4;
    if (code[pc + 1] & ~(uint32_t)CM_WORDS_JSON || end > in->code_len || data > in->code_len) return CM_ERR_ARG;
    int rc = CM_OK;
    word *w = cm_balloc(bud, ((size_t)n + 1) * sizeof *w, false, &rc);
    if (rc) return rc;
    const uint8_t *bytes = (const uint8_t *)(code + data);
    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (code[lens + i] > n_bytes - at) {
            cm_bfree(bud, w);
            return CM_ERR_ARG;
        }
        w[i] = (word){bytes + at, code[lens + i]};
        at += code[lens + i];
    }
    if (at != n_bytes) {
        cm_bfree(bud, w);
        return CM_ERR_ARG;
    }
    uint32_t sorted = 1;
    while (sorted < n && cmp_word(&w[sorted - 1], &w[sorted]) <= 0) sorted++;
    if (sorted < n) qsort(w, n, sizeof *w, cmp_word); /* enums are often listed in order */
    *out = w;
    *n_out = n;
    return CM_OK;
}

static void builder_free(builder *b) {
    cm_vec32 *v[] = {&b->r.acc, &b->r.off, &b->r.sym, &b->r.to, &b->esym, &b->eto, &b->start, &b->acc, &b->pos};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) cm_vec_free(v[i]);
    cm_bfree(b->r.bud, b->r.table);
    cm_bfree(b->r.bud, b->sp);
}

/* The register as a cm_dfa_out, `start` renumbered 0; a class per byte that has an
 * edge, one per run of bytes without. */
static int to_dfa(const reg *r, uint32_t start, cm_budget *bud, cm_dfa_out **out) {
    uint32_t n = (uint32_t)r->acc.n, nc = 0;
    uint8_t used[257] = {0}, cls[256];
    for (size_t e = 0; e < r->sym.n; e++) used[r->sym.data[e]] = 1;
    uint16_t lo[257];
    for (uint32_t x = 0; x < 256; x++) {
        if (!x || used[x] || used[x - 1]) lo[nc++] = (uint16_t)x;
        cls[x] = (uint8_t)(nc - 1);
    }
    int rc = cm_dfa_alloc(bud, n, nc, 0, out);
    if (rc) return rc;
    cm_dfa_out *d = *out;
    memcpy(d->class_lo, lo, nc * sizeof *lo);
    d->class_lo[nc] = 256;
    memset(d->trans, 0xFF, (size_t)n * nc * sizeof *d->trans);
    memset(d->lab_off, 0, ((size_t)n + 1) * sizeof *d->lab_off);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t s = k == start ? 0 : k < start ? k + 1 : k;
        d->accepting[s] = (uint8_t)r->acc.data[k];
        for (uint32_t e = r->off.data[k]; e < r->off.data[k + 1]; e++) {
            uint32_t t = r->to.data[e];
            d->trans[(size_t)s * nc + cls[r->sym.data[e]]] = (int32_t)(t == start ? 0 : t < start ? t + 1 : t);
        }
    }
    return CM_OK;
}

/* Every word added, the path frozen to the root; JSON mode: the opening quote before it. */
static int build_all(builder *b, const word *w, uint32_t n, uint32_t *start) {
    int rc = cm_vec_push(&b->r.off, 0);
    if (!rc && b->json) rc = reg_freeze(&b->r, 1, NULL, NULL, 0, &b->final);
    if (!rc) rc = cm_vec_push(&b->start, 0);
    if (!rc) rc = cm_vec_push(&b->acc, 0);
    if (!rc) rc = cm_vec_push(&b->pos, 0);
    for (uint32_t i = 0; !rc && i < n; i++) {
        if (!(i & 0xFFFF) && (rc = cm_budget_time(b->r.bud))) break;
        rc = add_word(b, &w[i]);
    }
    if (!rc) rc = unwind(b, 0);
    size_t m = b->esym.n;
    if (!rc && b->json) rc = freeze_json(b, b->acc.data[0], b->esym.data, b->eto.data, m, start);
    else if (!rc) rc = reg_freeze(&b->r, b->acc.data[0], b->esym.data, b->eto.data, m, start);
    uint32_t quote = '"';
    if (!rc && b->json) rc = reg_freeze(&b->r, 0, &quote, start, 1, start);
    return rc;
}

int cm_words_build(const cm_ir_input *in, uint32_t pc, cm_budget *budget, cm_dfa_out **out) {
    if (!in || !out || (size_t)pc + 2 > in->code_len || in->code[pc] != CM_IR_WORDS) return CM_ERR_ARG;
    *out = NULL;
    word *w = NULL;
    uint32_t n = 0, start = 0;
    int rc = read_words(in, pc, budget, &w, &n);
    if (rc) return rc;
    builder b;
    memset(&b, 0, sizeof b);
    b.r.bud = budget;
    cm_vec32 *v[] = {&b.r.acc, &b.r.off, &b.r.sym, &b.r.to, &b.esym, &b.eto, &b.start, &b.acc, &b.pos};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) v[i]->bud = budget;
    b.json = in->code[pc + 1] & CM_WORDS_JSON;
    rc = build_all(&b, w, n, &start);
    cm_bfree(budget, w);
    if (!rc) rc = to_dfa(&b.r, start, budget, out);
    builder_free(&b);
    return rc;
}
