/* Walks shared by equal loops.
 *
 * Most of a trie walk is spent inside a loop of plain states (the inside of a
 * string, a name, whitespace): not accepting, calling nothing, so the private
 * chart is one item.  Copies of one terminal inlined in many rules have equal
 * loops (same transitions inside, different states where they leave), and
 * every token that stays inside has the same fate.  So the walk of a state in
 * such a loop (its strongly connected component of plain states) is split:
 *   - shared, keyed by the loop's canonical form (states numbered breadth
 *     first from the entry state, each transition inside / out / dead): a DFA
 *     walk of the trie recording tokens that end inside (accepted) and each
 *     trie subtree whose prefix leaves the loop (loop state, byte, depth);
 *   - per state: each recorded exit continued with the private chart from the
 *     state the byte leads to, over that subtree only.
 * Same classification as a whole walk: inside the loop nothing can complete,
 * so no exit flag is raised before the first byte out of it.  The walks live
 * in the cache (g->cache->loops) and, by their byte-level form, in the
 * vocabulary (loopstore.c). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "chains.h"
#include "compose.h"
#include "flat.h"
#include "loops.h"
#include "tokclass.h"
#include "vocab.h"

/* The loop of a state: the plain states that lie on a cycle through it of at
 * most CM_LOOP_REACH transitions each way (the inside of a string with its
 * escapes; not the cycle of a whole object, which would make every loop
 * unique).  cache->loop_lab (all UINT32_MAX between uses) maps states to
 * labels meanwhile. */
#define CM_LOOP_REACH 3
#define CM_LOOP_MARK (UINT32_MAX - 2)   /* on such a cycle, not numbered yet */

static inline bool plain_state(const cm_grammar *g, int32_t s) { return s >= 0 && g->plain[s]; }

/* Forward: the plain states within CM_LOOP_REACH transitions of `state` into
 * fw[0..*nf) (label: the index in fw); false past CM_LOOP_MAX * 4 of them.
 * *back: some row it read (those of the states before the last depth) leads
 * back to `state`. */
static bool loop_reach(const cm_grammar *g, uint32_t state, uint32_t *fw, uint8_t *fd, uint32_t *nf, bool *back) {
    const cm_tables *t = &g->t;
    uint32_t *lab = g->cache->loop_lab, nc = t->n_classes;
    *nf = 0;
    fw[*nf] = state;
    fd[*nf] = 0;
    lab[state] = (*nf)++;
    for (uint32_t i = 0; i < *nf; i++) {
        if (fd[i] == CM_LOOP_REACH) continue;
        const int32_t *row = t->trans + (size_t)fw[i] * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t to = row[c];
            *back |= to == (int32_t)state;
            if (!plain_state(g, to) || lab[to] != UINT32_MAX) continue;
            if (*nf == CM_LOOP_MAX * 4) return false;
            fw[*nf] = (uint32_t)to;
            fd[*nf] = (uint8_t)(fd[i] + 1);
            lab[to] = (*nf)++;
        }
    }
    return true;
}

/* Whether a row of the states at the last depth of fw[0..nf) (those loop_reach
 * did not read) leads back to `state`. */
static bool reach_back_last(const cm_grammar *g, uint32_t state, const uint32_t *fw, const uint8_t *fd, uint32_t nf) {
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes;
    for (uint32_t i = 0; i < nf; i++) {
        if (fd[i] != CM_LOOP_REACH) continue;
        const int32_t *row = t->trans + (size_t)fw[i] * nc;
        bool back = false;
        for (uint32_t c = 0; c < nc; c++) back |= row[c] == (int32_t)state;
        if (back) return true;
    }
    return false;
}

/* A plain state that no state within reach leads back to is in no loop:
 * loop_mark would mark it alone and it has no transition to itself (a row
 * loop_reach read).  So find_loop answers so without loop_mark's successor
 * lists and rounds: a transition into `state` looked for in every row of fw
 * (loop_reach's, then the last depth's), the answer the same.  Most plain
 * states a loop entry asks of (1,894 of 2,143 in the first documents of
 * `--limit 10`) are in no loop.  On by default; how many were answered so. */
static atomic_int g_no_back = 1;
static atomic_size_t g_no_back_taken;
void cm_loop_no_back_enable(int on) { atomic_store(&g_no_back, on ? 1 : 0); }
size_t cm_loop_no_back_taken(void) { return atomic_load(&g_no_back_taken); }

/* Backward within fw: the states `state` is reached again from in at most
 * CM_LOOP_REACH transitions are labelled CM_LOOP_MARK, the others unlabelled;
 * how many are marked into *n_marked.  Each state's successors in fw are listed
 * once (its row read once, not once a round): a round reads only those lists.
 * The scratch lives on the stack (~11 KB; the lists go to the heap past 2,048
 * successors): a loop entry asks this of every plain state it builds, most of
 * them in no loop (find_loop). */
#define LOOP_ADJ_STACK 2048
static bool loop_mark(const cm_grammar *g, uint32_t state, const uint32_t *fw, uint32_t nf, uint32_t *n_marked) {
    const cm_tables *t = &g->t;
    uint32_t *lab = g->cache->loop_lab, nc = t->n_classes;
    _Static_assert(CM_LOOP_MAX * 4 <= UINT16_MAX, "an index of fw fits uint16");
    size_t cap = LOOP_ADJ_STACK, n = 0;
    uint8_t bd[CM_LOOP_MAX * 4];  /* bd[i]: transitions from fw[i] back to state */
    uint16_t seen[CM_LOOP_MAX * 4], adj0[LOOP_ADJ_STACK], *adj = adj0;
    uint32_t aoff[CM_LOOP_MAX * 4 + 1];
    bool ok = true;
    for (uint32_t i = 0; ok && i < nf; i++) seen[i] = UINT16_MAX;
    for (uint32_t i = 0; ok && i < nf; i++) {
        aoff[i] = (uint32_t)n;
        const int32_t *row = t->trans + (size_t)fw[i] * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t to = row[c];
            if (to < 0 || lab[to] == UINT32_MAX || seen[lab[to]] == i) continue;
            seen[lab[to]] = (uint16_t)i;
            if (n == cap) {
                uint16_t *q = adj == adj0 ? malloc(cap * 2 * sizeof *q) : realloc(adj, cap * 2 * sizeof *q);
                if (!q) {
                    ok = false;
                    break;
                }
                if (adj == adj0) memcpy(q, adj0, sizeof adj0);
                adj = q;
                cap *= 2;
            }
            adj[n++] = (uint16_t)lab[to];
        }
    }
    if (ok) {
        aoff[nf] = (uint32_t)n;
        for (uint32_t i = 0; i < nf; i++) bd[i] = fw[i] == state ? 0 : 0xff;
        for (uint32_t h = 1; h <= CM_LOOP_REACH; h++)
            for (uint32_t i = 0; i < nf; i++) {
                if (bd[i] != 0xff) continue;
                for (uint32_t j = aoff[i]; j < aoff[i + 1]; j++)
                    if (bd[adj[j]] < h) {
                        bd[i] = (uint8_t)h;
                        break;
                    }
            }
        *n_marked = 0;
        for (uint32_t i = 0; i < nf; i++) {
            lab[fw[i]] = bd[i] != 0xff ? CM_LOOP_MARK : UINT32_MAX;
            *n_marked += bd[i] != 0xff;
        }
    }
    if (adj != adj0) free(adj);
    return ok;
}

/* The marked states numbered breadth first by class from `state` into
 * ls[0..*n) (label: the number), each transition's code into sig; false past
 * CM_LOOP_MAX states.  *looped: some transition stays inside. */
static bool loop_number(const cm_grammar *g, uint32_t state, uint32_t *ls, uint32_t *n, uint32_t *sig,
                        bool *looped) {
    const cm_tables *t = &g->t;
    uint32_t *lab = g->cache->loop_lab, nc = t->n_classes;
    *n = 0;
    ls[*n] = state;
    lab[state] = (*n)++;
    for (uint32_t i = 0; i < *n; i++) {
        const int32_t *row = t->trans + (size_t)ls[i] * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t to = row[c];
            uint32_t code;
            if (to < 0) {
                code = CM_LOOP_DEAD;
            } else if (lab[to] == CM_LOOP_MARK) {
                if (*n == CM_LOOP_MAX) return false;
                ls[*n] = (uint32_t)to;
                lab[to] = code = (*n)++;
            } else {
                code = lab[to] < CM_LOOP_MAX ? lab[to] : CM_LOOP_OUT;
            }
            *looped |= code < CM_LOOP_MAX;
            sig[(size_t)i * nc + c] = code;
        }
    }
    return true;
}

/* A loop entered from state ls[0] whose transitions from there stay inside on
 * at most this many bytes (the blanks before an operator) is narrow.  A name's
 * 63 bytes ([0-9A-Z_a-z]) pay in sql.gbnf (its cold pass -3.4 % instructions
 * against -1.2 %) but cost arithmetic +0.3 % and every schema's first document
 * +0.13 % (their names' dead exits, dropped at every entry), where 8 costs
 * nothing measurable. */
#define CM_LOOP_NARROW 8

bool cm_loop_dead_out(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop) {
    const cm_tables *t = &g->t;
    const int32_t *row = t->trans + (size_t)ls[0] * t->n_classes;
    const uint32_t *lab = g->cache->loop_lab;
    uint32_t inside = 0;
    for (int b = 0; b < 256 && inside <= CM_LOOP_NARROW; b++) {
        int32_t to = row[t->byte_class[b]];
        inside += to >= 0 && lab[to] < n_loop;
    }
    return inside <= CM_LOOP_NARROW;
}

static void reset_labels(const cm_grammar *g, const uint32_t *ls, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) g->cache->loop_lab[ls[i]] = UINT32_MAX;
}

/* The loop of `state`: its states in canonical order into ls (their number
 * returned, 0 = none or too big) with their labels left set for the caller to
 * reset (reset_labels), its signature into *sig and *hash (*sig NULL: no
 * transition stays inside, nothing to share), and into *dies a hash of where
 * it dies.  In a narrow loop (cm_loop_dead_out) a transition that dies is
 * coded as one that leaves: the walk records its subtrees as exits too, and
 * each state's entry drops those its own row kills (cm_loop_entry), so narrow
 * loops that differ only in where they leave and where they die share one
 * walk: the blanks after an operand at each level of an expression chain, each
 * level leaving on its own operators (c.gbnf's mask after `printf` made twelve
 * such walks, now two).  Inside the loop nothing completes, so no flag is
 * raised before an exit's first byte, dead or not.  A wide loop (a JSON
 * string's inside) keeps its dead subtrees skipped: recorded, the tokens a
 * control character ends would be thousands of exits to drop at every string. */
static uint32_t find_loop(const cm_grammar *g, uint32_t state, uint32_t *ls, uint32_t **sig, uint64_t *hash,
                          uint64_t *dies) {
    uint32_t nc = g->t.n_classes, nf = 0, n = 0, n_marked = 0;
    *sig = NULL;
    if (!plain_state(g, (int32_t)state)) return 0;
    uint32_t fw[CM_LOOP_MAX * 4], *s = NULL;
    uint8_t fd[CM_LOOP_MAX * 4];
    bool looped = false, back = false, ok = loop_reach(g, state, fw, fd, &nf, &back);
    if (ok && atomic_load_explicit(&g_no_back, memory_order_relaxed) && !back &&
        !reach_back_last(g, state, fw, fd, nf)) {
        for (uint32_t i = 1; i < nf; i++) g->cache->loop_lab[fw[i]] = UINT32_MAX;
        ls[0] = state;
        g->cache->loop_lab[state] = 0;
        atomic_fetch_add_explicit(&g_no_back_taken, 1, memory_order_relaxed);
        return 1;
    }
    ok = ok && loop_mark(g, state, fw, nf, &n_marked);
    if (ok && n_marked == 1) {  /* no cycle back through another state: a loop only if it loops to itself */
        const int32_t *row = g->t.trans + (size_t)state * nc;
        uint32_t c = 0;
        while (c < nc && row[c] != (int32_t)state) c++;
        if (c == nc) {  /* in no loop (most plain states a loop entry asks of): loop_number's one state */
            ls[0] = state;
            g->cache->loop_lab[state] = 0;
            return 1;
        }
    }
    size_t rows = n_marked < CM_LOOP_MAX ? n_marked : CM_LOOP_MAX;  /* loop_number numbers marked states only */
    ok = ok && (s = malloc(rows * nc * sizeof *s)) && loop_number(g, state, ls, &n, s, &looped);
    for (uint32_t i = 0; i < nf; i++)  /* marked, never numbered; or all of them */
        if (!ok || g->cache->loop_lab[fw[i]] == CM_LOOP_MARK) g->cache->loop_lab[fw[i]] = UINT32_MAX;
    if (!ok) reset_labels(g, ls, n);
    if (!ok || !looped) {
        free(s);
        return ok ? n : 0;  /* no loop, no sharing */
    }
    *dies = 0;
    if (cm_loop_dead_out(g, ls, n))
        for (size_t i = 0; i < (size_t)n * nc; i++)
            if (s[i] == CM_LOOP_DEAD) {
                s[i] = CM_LOOP_OUT;
                *dies = (*dies ^ i) * 0xbf58476d1ce4e5b9ULL;
            }
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < (size_t)n * nc; i++) h = (h ^ s[i]) * 0xbf58476d1ce4e5b9ULL;
    *hash = h ^ (h >> 29);
    *sig = s;
    return n;
}

static int push_exit(cm_loop_walk *lw, size_t *cap, cm_loop_exit x) {
    if (lw->n_exits == *cap) {
        size_t n = *cap ? *cap * 2 : 64;
        cm_loop_exit *p = realloc(lw->exits, n * sizeof *p);
        if (!p) return CM_ERR_NOMEM;
        lw->exits = p;
        *cap = n;
    }
    lw->exits[lw->n_exits++] = x;
    return CM_OK;
}

/* A loop as a byte-indexed table (small: stays in L1): a transition inside is
 * the row of the state it reaches (label * 256, so a node costs one add), one
 * out of the loop LT_OUT, a dead one LT_DEAD (LT_OUT in a narrow loop:
 * find_loop).  A run is a loop of one state, whose row is 0: a byte stays
 * inside iff its cell is 0. */
#define LT_OUT 0xFFFEu
#define LT_DEAD 0xFFFFu
_Static_assert((CM_LOOP_MAX - 1) * 256 + 255 < LT_OUT, "a loop's rows fit uint16 beside LT_OUT and LT_DEAD");

static uint16_t *loop_table(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop) {
    const cm_tables *t = &g->t;
    const uint32_t *lab = g->cache->loop_lab;
    uint16_t *tab = malloc((size_t)n_loop * 256 * sizeof *tab), code[256];
    if (!tab) return NULL;
    uint16_t dead = cm_loop_dead_out(g, ls, n_loop) ? LT_OUT : LT_DEAD;
    for (uint32_t i = 0; i < n_loop; i++) {
        const int32_t *row = t->trans + (size_t)ls[i] * t->n_classes;
        for (uint32_t c = 0; c < t->n_classes; c++)
            code[c] = row[c] < 0 ? dead : lab[row[c]] < n_loop ? (uint16_t)(lab[row[c]] << 8) : LT_OUT;
        for (int b = 0; b < 256; b++) tab[(size_t)i * 256 + b] = code[t->byte_class[b]];
    }
    return tab;
}

/* An entry's bytes from q on through the loop's table (a run's: row 0, no
 * stack), each row pushed on *sp: q where it stops (q_end: read to its end
 * inside), the code met there (LT_OUT, LT_DEAD). */
static inline __attribute__((always_inline)) uint32_t loop_read(const uint16_t *tab, bool multi, const uint8_t **qp,
                                                                const uint8_t *q_end, uint32_t *sp_s,
                                                                uint16_t **spp) {
    const uint8_t *q = *qp;
    uint32_t to = 0;
    if (multi) {
        uint32_t s = *sp_s;
        uint16_t *sp = *spp;
        for (; q < q_end; q++) {
            to = tab[s + *q];
            if (to >= LT_OUT) break;
            s = to;
            *++sp = (uint16_t)s;
        }
        *sp_s = s;
        *spp = sp;
    } else {
        while (q < q_end && !(to = tab[*q])) q++;
    }
    *qp = q;
    return to;
}

/* The scan of a loop's walk from entry k at depth *dp (its bytes before *dp
 * read inside the loop, st[*dp] the row they reached; `multi`: else a run,
 * row 0, no stack): every entry read to its end inside the loop is accepted
 * (its bit set; its id appended at *idp if idp, else counted in *nacc) until
 * entry k leaves the loop at depth *dp (returned) or k_end.  Without idp (a
 * loop's walk: its range is the whole trie) an entry that dies at depth d is
 * skipped here with its subtree of d + 1 bytes (no exit to record); with idp
 * (a run walk, whose table has no dead byte) every stop is returned.  The
 * entries after the first of a scan share its first *dp bytes (a subtree), so
 * each resumes at its prefix length, where the one before left off.  No call
 * inside: with `multi`, `idp` constant, the loop keeps its pointers in
 * registers. */
static inline __attribute__((always_inline)) size_t loop_scan(const cm_vocab *v, const uint16_t *tab, bool multi,
                                                               size_t k, size_t k_end, uint32_t d0, uint32_t *dp,
                                                               uint16_t *st, uint32_t *bits, uint32_t **idp,
                                                               uint32_t *nacc) {
    const uint32_t *lcp = v->trie_lcp, *ids = v->trie_ids, *skip = v->skip;
    const uint64_t *off = v->trie_off;
    const uint8_t *data = v->trie_data;
    const uint8_t *q = data + off[k] + *dp, *q_end = data + off[k + 1];
    uint16_t *sp = multi ? st + *dp : NULL;
    uint32_t s = multi ? *sp : 0, *idv = idp ? *idp : NULL, na = 0;
    for (;;) {
        uint32_t to = loop_read(tab, multi, &q, q_end, &s, &sp);
        if (q < q_end) {
            if (idp || to == LT_OUT) goto stop;
            k = skip[q - data];  /* skip[off[k] + d]: the end of the dead subtree */
            if (k >= k_end) {
                k = k_end;
                break;
            }
            q = data + off[k];
        } else {
            uint32_t id = ids[k];
            cm_set_bit(bits, id);
            if (idp) *idv++ = id;
            else na++;
            if (++k == k_end) break;
            /* q: entry k's bytes begin where k - 1's end */
        }
        uint32_t l = lcp[k] < d0 ? d0 : lcp[k];
        q += l;
        q_end = data + off[k + 1];
        if (multi) {
            sp = st + l;
            s = *sp;
        }
    }
    if (idp) *idp = idv;
    else *nacc += na;
    return k;
stop:
    if (idp) *idp = idv;
    else *nacc += na;
    *dp = (uint32_t)(q - (data + off[k]));
    return k;
}

static __attribute__((noinline)) size_t loop_scan_multi(const cm_vocab *v, const uint16_t *tab, size_t k,
                                                        size_t k_end, uint32_t *dp, uint16_t *st, uint32_t *bits,
                                                        uint32_t *nacc) {
    return loop_scan(v, tab, true, k, k_end, 0, dp, st, bits, NULL, nacc);
}

static __attribute__((noinline)) size_t loop_scan_run(const cm_vocab *v, const uint16_t *tab, size_t k, size_t k_end,
                                                      uint32_t *dp, uint32_t *bits, uint32_t *nacc) {
    return loop_scan(v, tab, false, k, k_end, 0, dp, NULL, bits, NULL, nacc);
}

static __attribute__((noinline)) size_t loop_scan_ids(const cm_vocab *v, const uint16_t *tab, size_t k, size_t k_end,
                                                      uint32_t d0, uint32_t *dp, uint32_t *bits, uint32_t **idp) {
    return loop_scan(v, tab, false, k, k_end, d0, dp, NULL, bits, idp, NULL);
}

/* loop_scan over the entries that are not plain (vocab.h: plain_next, plain_lcp),
 * for a loop whose every plain token is accepted anyway (loop_plain_live): from
 * such an entry k at depth *dp, each entry read to its end inside is accepted,
 * a dead one's subtree skipped (it holds no plain entry: its path has a byte
 * that is not plain, or a plain byte from a row no plain bytes reach), until
 * entry k leaves the loop at depth *dp (returned) or the end.  With text, the
 * same over the entries that are not text (text_next, text_lcp), for a loop
 * that accepts every text token (loop_text_live). */
static inline __attribute__((always_inline)) size_t loop_scan_np(const cm_vocab *v, const uint16_t *tab, bool multi,
                                                                  bool text, size_t k, uint32_t *dp, uint16_t *st,
                                                                  uint32_t *bits, uint32_t *nacc) {
    const uint32_t *lcp = text ? v->text_lcp : v->plain_lcp, *nxt = text ? v->text_next : v->plain_next;
    const uint32_t *ids = v->trie_ids, *skip = v->skip;
    const uint64_t *off = v->trie_off;
    const uint8_t *data = v->trie_data;
    size_t n = v->n_trie;
    const uint8_t *q = data + off[k] + *dp, *q_end = data + off[k + 1];
    uint16_t *sp = multi ? st + *dp : NULL;
    uint32_t s = multi ? *sp : 0, na = 0;
    for (;;) {
        uint32_t to = loop_read(tab, multi, &q, q_end, &s, &sp);
        if (q < q_end) {
            if (to == LT_OUT) {
                *dp = (uint32_t)(q - (data + off[k]));
                *nacc += na;
                return k;
            }
            k = nxt[skip[q - data]];  /* the dead subtree, then the next entry not plain */
        } else {
            cm_set_bit(bits, ids[k]);
            na++;
            k = nxt[k + 1];
        }
        if (k >= n) break;
        /* its prefix with the entry not plain before it, whose path st holds that far */
        uint32_t l = lcp[k];
        q = data + off[k] + l;
        q_end = data + off[k + 1];
        if (multi) {
            sp = st + l;
            s = *sp;
        }
    }
    *nacc += na;
    return n;
}

static __attribute__((noinline)) size_t loop_scan_np_multi(const cm_vocab *v, const uint16_t *tab, bool text,
                                                           size_t k, uint32_t *dp, uint16_t *st, uint32_t *bits,
                                                           uint32_t *nacc) {
    return loop_scan_np(v, tab, true, text, k, dp, st, bits, nacc);
}

static __attribute__((noinline)) size_t loop_scan_np_run(const cm_vocab *v, const uint16_t *tab, bool text, size_t k,
                                                         uint32_t *dp, uint32_t *bits, uint32_t *nacc) {
    return loop_scan_np(v, tab, false, text, k, dp, NULL, bits, nacc);
}

/* ---- walks that take the entries inside a loop's byte set at once ----
 *
 * X, the bytes on which the loop stays inside from its first state and from
 * every state those bytes lead to (inside_bytes), and whether every
 * well-formed multi-byte UTF-8 character does the same: an entry made of such
 * bytes and characters ends inside, accepted, with no exit; one with another
 * byte is read as loop_scan reads it.  The vocabulary's byte features
 * (tokclass.c) give the entries holding a feature not wholly inside
 * (`outside`, by trie entry) and the tokens holding none (by id: one OR of bit
 * sets).  An exit's or a dead byte's subtree holds only entries with that
 * byte, none of them taken so: the same tokens, exits (in the same order) and
 * count as loop_scan's walk.  Not for run walks (run_scan): their ids are
 * listed one by one, and a name's run is a cheap read already (GBNF grammars'
 * cold masks +4.6 % instructions with it, the ORs costing more than the reads
 * they saved). */

/* A loop whose first bytes inside open fewer entries walks as before (the
 * features' OR costs ~100 k instructions at Llama-3 when X is narrow, and a
 * narrow X's plain walk skips most subtrees at their first byte). */
#define CM_TC_MIN_ENTRIES 2048
/* A loop of one state with more features outside than this walks as before:
 * each costs an OR of two sets (~4 k instructions at Llama-3), and such a loop
 * (whitespace, a name: 1 to 35 of 98 features inside) keeps few entries inside
 * or reads them cheaply (GBNF grammars' cold masks +3.9 % instructions without
 * this bound).  A loop of several states reads its entries dearly: it tries
 * whenever a sample of the sets says at most 3/4 of the entries are outside. */
#define CM_TC_MAX_OFF 32
#define CM_TC_SAMPLES 256  /* words of the sample (every 64th: 2,000 entries at Llama-3) */
/* A loop that takes every plain token (loop_plain_live) walks the entries that
 * are not plain (~35 k at Llama-3) unless the features' walk reads fewer than
 * half as many: o12620's mask 3, 7 k outside, 2.13 -> 1.42 M instructions so;
 * o48748's mask 7, 17 k outside, is 2.76 M that way against 2.29 M, but its
 * thread time 0.56-0.60 ms against 0.61-0.73 ms (the plain links' cold lines). */
#define CM_TC_NP_RATIO 2

static inline bool in_x(const uint32_t *x, uint32_t b) { return (x[b >> 5] >> (b & 31)) & 1u; }

/* Does row code t stay inside on every byte of x? */
static bool row_keeps(const uint16_t *tab, uint32_t t, const uint32_t *x) {
    for (uint32_t c = 0; c < 256; c++)
        if (in_x(x, c) && tab[t + c] >= LT_OUT) return false;
    return true;
}

/* The rows that a well-formed multi-byte character read from row code r
 * reaches, marked in fin[]; false when one leaves or dies on the way.  seen:
 * 15 * n_rows bytes, queue: 15 * n_rows, both scratch. */
static bool utf8_rows(const uint16_t *tab, uint32_t n_rows, uint32_t r, uint8_t *fin, uint8_t *seen,
                      uint32_t *queue) {
    static const uint8_t lo[5] = {0x80, 0xA0, 0x80, 0x90, 0x80}, hi[5] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    uint32_t nq = 0;
    memset(seen, 0, (size_t)15 * n_rows);
    memset(fin, 0, n_rows);
    for (uint32_t b = 0xC2; b <= 0xF4; b++) {
        uint32_t t = tab[r + b], need = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
        uint32_t kind = b == 0xE0 ? 1 : b == 0xED ? 2 : b == 0xF0 ? 3 : b == 0xF4 ? 4 : 0;
        if (t >= LT_OUT) return false;
        uint32_t node = ((need - 1) * 5 + kind) * n_rows + (t >> 8);
        if (!seen[node]) seen[node] = 1, queue[nq++] = node;
    }
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t node = queue[i], row = node % n_rows, need = node / n_rows / 5 + 1, kind = node / n_rows % 5;
        for (uint32_t c = lo[kind]; c <= hi[kind]; c++) {
            uint32_t t = tab[(size_t)row * 256 + c];
            if (t >= LT_OUT) return false;
            if (need == 1) {
                fin[t >> 8] = 1;
                continue;
            }
            uint32_t next = (need - 2) * 5 * n_rows + (t >> 8);
            if (!seen[next]) seen[next] = 1, queue[nq++] = next;
        }
    }
    return true;
}

/* X of a loop's table of n_rows rows into x[8], and *utf8: the bytes (and
 * whether the characters) on which row 0 and every row they lead to (S) stay
 * inside.  Grown from row 0: a row first reached on byte b (on a character)
 * that would leave or die on a byte of X (the middle of a character, an
 * escape, the last step of a pattern's match) drops b (the characters) from X
 * instead; until nothing changes, so that every row of S stays in S on every
 * byte and character of X.  False when out of memory. */
static bool inside_bytes(const uint16_t *tab, uint32_t n_rows, uint32_t *x, bool *utf8) {
    uint8_t *in_s = calloc(n_rows, 1), *fin = malloc(n_rows), *seen = malloc((size_t)15 * n_rows);
    uint32_t *rows = malloc(n_rows * sizeof *rows), *queue = malloc((size_t)15 * n_rows * sizeof *queue), n_s = 1;
    bool ok = in_s && fin && seen && rows && queue;
    memset(x, 0, 8 * sizeof *x);
    for (uint32_t b = 0; b < 256; b++)
        if (tab[b] < LT_OUT) x[b >> 5] |= 1u << (b & 31);
    *utf8 = true;
    if (ok) rows[0] = 0, in_s[0] = 1;
    for (bool changed = ok; changed;) {
        changed = false;
        for (uint32_t i = 0; i < n_s; i++) {
            uint32_t r = rows[i] << 8;
            for (uint32_t b = 0; b < 256; b++) {
                if (!in_x(x, b)) continue;
                uint32_t t = tab[r + b];
                if (t < LT_OUT && in_s[t >> 8]) continue;
                if (t < LT_OUT && row_keeps(tab, t, x)) {
                    in_s[t >> 8] = 1;
                    rows[n_s++] = t >> 8;
                } else {  /* b leaves S (or leads to a row that would) */
                    x[b >> 5] &= ~(1u << (b & 31));
                }
                changed = true;
            }
            if (!*utf8) continue;
            bool keep = utf8_rows(tab, n_rows, r, fin, seen, queue);
            for (uint32_t t = 0; keep && t < n_rows; t++) {
                if (!fin[t] || in_s[t]) continue;
                if (!(keep = row_keeps(tab, t << 8, x))) break;
                in_s[t] = 1;
                rows[n_s++] = t;
                changed = true;
            }
            if (!keep) *utf8 = false, changed = true;
        }
    }
    free(in_s);
    free(fin);
    free(seen);
    free(rows);
    free(queue);
    return ok;
}

/* The walk of the whole trie through tab (st[0] = 0): the entries in
 * `outside` read as loop_scan reads them, the others left to the caller (taken
 * by id).  Into lw: the tokens accepted here (added to those taken: n_acc of
 * them) and the exits. */
static int tokclass_walk(const cm_vocab *v, const uint16_t *tab, bool multi, const uint32_t *outside, uint16_t *st,
                         uint32_t n_acc, cm_loop_walk *lw) {
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    const uint32_t *lcp = v->trie_lcp, *ids = v->trie_ids, *skip = v->skip;
    size_t k = 0, n = v->n_trie, prev = SIZE_MAX, cap = 0;
    uint32_t pv = 0, *bits = lw->bits;  /* st holds prev's rows up to depth pv */
    int rc = CM_OK;
    while (k < n && !rc) {
        size_t w = k >> 5, base = w << 5;
        uint32_t walk = outside[w] & (~0u << (k & 31)) & (n - base >= 32 ? ~0u : (1u << (n - base)) - 1);
        if (!walk) {
            k = base + 32;
            continue;
        }
        k = base + __builtin_ctz(walk);
        uint32_t len = (uint32_t)(off[k + 1] - off[k]), l = 0;
        const uint8_t *p = data + off[k];
        if (prev != SIZE_MAX) {  /* the prefix shared with the entry read before */
            uint32_t m = lcp[k] < pv ? lcp[k] : pv;
            if (prev + 1 == k) l = m;
            else
                for (const uint8_t *q = data + off[prev]; l < m && p[l] == q[l];) l++;
        }
        uint32_t s = multi ? st[l] : 0, d = l, to = 0;
        if (multi) {
            for (; d < len; d++) {
                to = tab[s + p[d]];
                if (to >= LT_OUT) break;
                s = to;
                st[d + 1] = (uint16_t)s;
            }
        } else {
            while (d < len && !(to = tab[p[d]])) d++;
        }
        prev = k;
        pv = d;
        if (d == len) {
            cm_set_bit(bits, ids[k++]);
            n_acc++;
            continue;
        }
        size_t end = skip[off[k] + d];  /* the subtree that leaves or dies with this byte */
        if (to == LT_OUT) rc = push_exit(lw, &cap, (cm_loop_exit){(uint32_t)k, (uint32_t)end, d, s >> 8, p[d]});
        k = end;
    }
    lw->n_accepted = n_acc;
    return rc;
}

/* The trie entries holding a feature not inside x (utf8: the characters are)
 * into a new set (the caller frees it), `in` the features inside, when a bulk
 * walk pays (mode 1): a feature is inside and, for a loop of one state, at most
 * CM_TC_MAX_OFF are not and at least one entry in 16 is inside (an entry
 * outside stops at its first byte out); for a loop of several states (`multi`),
 * at most half the entries are outside (theirs are long reads: o78129's key
 * loop, 61 % outside, walked 5.4 -> 8.8 M instructions so; o82704's, 38 %, 3.5
 * -> 0.4 M), a sample saying so before the whole OR.  Else NULL. */
static uint32_t *tc_outside(const cm_vocab *v, const uint32_t *x, bool utf8, bool multi, bool *in, size_t *n_outp) {
    int mode = cm_tokclass_mode(), n_off = 0;
    if (!mode || !cm_tokclass_inside(x, utf8, in)) return NULL;
    for (int f = 0; f < CM_TC_FEATURES; f++) n_off += !in[f];
    if (mode == 1 && !multi && n_off > CM_TC_MAX_OFF) return NULL;
    const cm_tokclass *tc = cm_tokclass_of(v);
    if (!tc) return NULL;
    if (mode == 1 && multi) {  /* estimated first from every 64th word (the trie's order mixes little) */
        uint32_t u[CM_TC_SAMPLES] = {0};
        size_t n_est = 0, n_words = (tc->n_words + 63) / 64;
        if (n_words > CM_TC_SAMPLES) n_words = CM_TC_SAMPLES;
        for (int f = 0; f < CM_TC_FEATURES; f++)
            for (size_t i = 0; !in[f] && i < n_words; i++) u[i] |= tc->has[(size_t)f * tc->n_words + i * 64];
        for (size_t i = 0; i < n_words; i++) n_est += (size_t)__builtin_popcount(u[i]);
        if (n_est * 4 > n_words * 32 * 3) return NULL;  /* over 3/4 outside */
    }
    uint32_t *out = malloc((tc->n_words ? tc->n_words : 1) * sizeof *out);
    if (!out) return NULL;
    cm_tokclass_union(tc, in, false, 0, tc->n_words, out);
    size_t n_out = cm_count_bits(out, tc->n_words), n = v->n_trie;
    *n_outp = n_out;
    if (mode == 1 && (multi ? n_out > n / 2 : n_out + n / 16 > n)) {
        free(out);
        return NULL;
    }
    cm_tokclass_count_walk();
    return out;
}

/* The shared walk of a loop, its table tab, over the entries that are not
 * plain (lw->np 1) or not text (2) only: its exits' subtrees begin at their
 * first such entry. */
static int loop_walk_np(const cm_vocab *v, const uint16_t *tab, uint32_t n_loop, uint16_t *st, cm_loop_walk *lw) {
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    bool text = lw->np == 2;
    const uint32_t *skip = v->skip, *nxt = text ? v->text_next : v->plain_next;
    const uint32_t *lcp = text ? v->text_lcp : v->plain_lcp;
    size_t cap = 0, n = v->n_trie, k = nxt[0];
    uint32_t n_acc = 0, d = 0;  /* the first entry not plain has no prefix with one before */
    int rc = CM_OK;
    while (k < n && !rc) {
        k = n_loop > 1 ? loop_scan_np_multi(v, tab, text, k, &d, st, lw->bits, &n_acc)
                       : loop_scan_np_run(v, tab, text, k, &d, lw->bits, &n_acc);
        if (k >= n) break;
        /* entry k leaves the loop at depth d: so does its subtree of d + 1 bytes */
        uint8_t b = data[off[k] + d];
        uint32_t s = n_loop > 1 ? st[d] : 0;
        size_t end = skip[off[k] + d];
        rc = push_exit(lw, &cap, (cm_loop_exit){(uint32_t)k, (uint32_t)end, d, s >> 8, b});
        if ((k = nxt[end]) < n) d = lcp[k];
    }
    lw->n_accepted = n_acc;
    return rc;
}

/* The shared DFA walk of a loop (labels of cache->loop_lab are set for ls). */
static int loop_walk(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, cm_loop_walk *lw) {
    const cm_vocab *v = g->v;
    uint16_t *tab = loop_table(g, ls, n_loop);
    uint16_t *st = malloc(((size_t)v->max_len + 1) * sizeof *st);
    lw->bits = calloc(g->n_words ? g->n_words : 1, sizeof *lw->bits);
    if (!tab || !st || !lw->bits) {
        free(tab);
        free(st);
        return CM_ERR_NOMEM;
    }
    st[0] = 0;
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    const uint32_t *lcp = v->trie_lcp, *skip = v->skip;
    size_t cap = 0, k = 0, n = v->n_trie;
    uint32_t n_acc = 0, d = 0, x[8], opened = 0;
    int rc = CM_OK;
    for (int b = 0; b < 256; b++)  /* the subtrees a plain walk enters at all */
        if (tab[b] < LT_OUT) opened += v->first_off[b + 1] - v->first_off[b];
    bool utf8, in[CM_TC_FEATURES];
    bool wide = opened >= CM_TC_MIN_ENTRIES || cm_tokclass_mode() == 2;
    size_t n_out = 0;
    uint32_t *outside = wide && inside_bytes(tab, n_loop, x, &utf8) ? tc_outside(v, x, utf8, n_loop > 1, in, &n_out) : NULL;
    /* where both apply, the cheaper by the entries each reads: the features' walk
     * those outside, the plain (text) tokens' the entries not plain (not text) */
    if (lw->np && (!outside || n_out * CM_TC_NP_RATIO >= (size_t)(v->n_trie - (lw->np == 2 ? v->n_text : v->n_plain)))) {
        free(outside);
        rc = loop_walk_np(v, tab, n_loop, st, lw);
        free(tab);
        free(st);
        return rc;
    }
    lw->np = 0;  /* a walk of every entry (which serves such a loop too) */
    if (outside) {  /* the tokens of no feature outside, by id; the other entries walked */
        const cm_tokclass *tc = cm_tokclass_of(v);
        size_t nw = tc->n_id_words < g->n_words ? tc->n_id_words : g->n_words;
        cm_tokclass_union(tc, in, true, 0, nw, lw->bits);
        for (size_t i = 0; i < nw; i++) lw->bits[i] = tc->trie_ids[i] & ~lw->bits[i];
        rc = tokclass_walk(v, tab, n_loop > 1, outside, st, (uint32_t)cm_count_bits(lw->bits, nw), lw);
        free(outside);
        free(tab);
        free(st);
        return rc;
    }
    while (k < n && !rc) {
        k = n_loop > 1 ? loop_scan_multi(v, tab, k, n, &d, st, lw->bits, &n_acc)
                       : loop_scan_run(v, tab, k, n, &d, lw->bits, &n_acc);
        if (k == n) break;
        /* entry k leaves the loop at depth d: so does its subtree of d + 1 bytes */
        uint8_t b = data[off[k] + d];
        uint32_t s = n_loop > 1 ? st[d] : 0;
        size_t end = skip[off[k] + d];
        if (tab[s + b] == LT_OUT) rc = push_exit(lw, &cap, (cm_loop_exit){(uint32_t)k, (uint32_t)end, d, s >> 8, b});
        if ((k = end) < n) d = lcp[k];
    }
    lw->n_accepted = n_acc;
    free(tab);
    free(st);
    return rc;
}

/* Whether entry k's first d bytes are plain ones, at most CM_PLAIN_MAX_LEN: its
 * subtree of d bytes may hold plain entries. */
static bool plain_prefix(const cm_vocab *v, size_t k, uint32_t d) {
    const uint8_t *p = v->trie_data + v->trie_off[k];
    if (d > CM_PLAIN_MAX_LEN) return false;
    for (uint32_t i = 0; i < d; i++)
        if (!cm_plain_byte(p[i])) return false;
    return true;
}

/* Whether every plain token is accepted from the loop ls[0..n_loop) (labels
 * set) at its first state, and some leaves it on plain bytes (else there is
 * nothing to skip): from each row that plain bytes reach, no plain byte dies,
 * and each that leaves leads to a state whose plain closure is proven live
 * (cm_flat_plain_live: its walk, from any depth, accepts every plain entry).
 * A plain token then ends inside (in the loop's walk) or is accepted after its
 * exit, so the exits' walks need only read the other entries. */
static bool loop_plain_live(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop) {
    const cm_tables *t = &g->t;
    const uint32_t *lab = g->cache->loop_lab;
    if (!g->v->plain_bits || !g->lim.plain_skip || !g->lim.flat_walks) return false;
    uint8_t seen[CM_LOOP_MAX] = {0};
    uint32_t queue[CM_LOOP_MAX], nq = 0;
    int32_t last_out = -1;  /* the out targets of neighbouring bytes are mostly one */
    bool any_out = false;
    seen[0] = 1;
    queue[nq++] = 0;
    for (uint32_t i = 0; i < nq; i++) {
        const int32_t *row = t->trans + (size_t)ls[queue[i]] * t->n_classes;
        for (unsigned b = 0x20; b < 0x7F; b++) {
            if (!cm_plain_byte((uint8_t)b)) continue;
            int32_t to = row[t->byte_class[b]];
            if (to < 0) return false;
            uint32_t l = lab[to];
            if (l < n_loop) {
                if (!seen[l]) seen[l] = 1, queue[nq++] = l;
                continue;
            }
            if (to != last_out && !cm_flat_plain_live(g, (uint32_t)to)) return false;
            last_out = to;
            any_out = true;
        }
    }
    return any_out;
}

/* Whether entry k's first d bytes are a text entry's prefix (vocab.h: plain
 * bytes, whole characters, then perhaps a character's first bytes), at most
 * CM_PLAIN_MAX_LEN: its subtree of d bytes may hold text entries; the UTF-8
 * state after them into *u. */
static bool text_prefix(const cm_vocab *v, size_t k, uint32_t d, uint8_t *u) {
    const uint8_t *p = v->trie_data + v->trie_off[k];
    if (d > CM_PLAIN_MAX_LEN) return false;
    int s = 0;
    for (uint32_t i = 0; i < d && s >= 0; i++) s = cm_utf8_step(s, p[i]);
    *u = (uint8_t)s;
    return s >= 0;
}

/* The (state, UTF-8 state) pairs outside a loop that loop_text_live proved,
 * most of them one or two (the bytes of a class leave for one target). */
#define LOOP_TEXT_OUTS 64

/* Whether every text token (vocab.h) is accepted from the loop ls[0..n_loop)
 * (labels set) at its first state, where loop_plain_live holds (its plain bytes
 * are these from UTF-8 state 0; a loop no plain byte leaves proved nothing in
 * JSONSchemaBench's first documents: 784 proofs, +14.3 M instructions, no
 * walk shorter): its proof over
 * (row, UTF-8 state) pairs (cm_utf8_step), from (0, 0): from each pair reached,
 * no byte that goes on as text dies, and each that leaves leads to a state
 * whose closure from the UTF-8 state after the byte is proven live
 * (cm_flat_text_live: its walk accepts every rest of a text entry from there).
 * A text token then ends inside (in the loop's walk) or is accepted after its
 * exit, so the exits' walks need only read the entries that are not text. */
static bool loop_text_live(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop) {
    const cm_tables *t = &g->t;
    const uint32_t *lab = g->cache->loop_lab;
    if (!g->v->text_bits) return false;
    uint8_t seen[CM_LOOP_MAX] = {0};  /* per label: the UTF-8 states reached, a bit each */
    uint16_t queue[CM_LOOP_MAX * CM_UTF8_STATES];  /* label << 3 | UTF-8 state */
    int32_t outs[LOOP_TEXT_OUTS];
    uint8_t out_u[LOOP_TEXT_OUTS];
    uint32_t nq = 0, n_outs = 0;
    seen[0] = 1;
    queue[nq++] = 0;
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t l = queue[i] >> 3;
        int u = queue[i] & 7;
        const int32_t *row = t->trans + (size_t)ls[l] * t->n_classes;
        for (unsigned b = u ? 0x80 : 0x20; b < (u ? 0xC0u : 0xF5u); b++) {
            int u2 = cm_utf8_step(u, (uint8_t)b);
            if (u2 < 0) continue;
            int32_t to = row[t->byte_class[b]];
            if (to < 0) return false;
            uint32_t l2 = lab[to];
            if (l2 < n_loop) {
                if (!(seen[l2] >> u2 & 1)) {
                    seen[l2] |= (uint8_t)(1u << u2);
                    queue[nq++] = (uint16_t)(l2 << 3 | (uint32_t)u2);
                }
                continue;
            }
            uint32_t m = 0;
            while (m < n_outs && (outs[m] != to || out_u[m] != u2)) m++;
            if (m < n_outs) continue;
            if (n_outs == LOOP_TEXT_OUTS || !cm_flat_text_live(g, (uint32_t)to, (uint8_t)u2)) return false;
            outs[n_outs] = to;
            out_u[n_outs++] = (uint8_t)u2;
        }
    }
    return n_outs > 0;
}

/* A new walk for the loop ls[0..n) (signature sig, taken over), of the
 * entries that are not plain (np 1: a loop_plain_live loop) or not text (np 2:
 * a loop_text_live one) only, which may also take a whole walk (np 0) from the
 * vocabulary's store: from the store, else walked and kept there too.  NULL
 * with *status set on failure. */
static cm_loop_walk *new_walk(const cm_grammar *g, const uint32_t *ls, uint32_t n, uint32_t *sig, uint64_t hash,
                              uint8_t np, int *status) {
    cm_loop_walk *lw = calloc(1, sizeof *lw);
    if (!lw) {
        free(sig);
        *status = CM_ERR_NOMEM;
        return NULL;
    }
    lw->hash = hash;
    lw->n_sig = n * g->t.n_classes;
    lw->sig = sig;
    lw->np = np;
    cm_loop_form lf;
    cm_loop_form_of(g, ls, n, &lf);
    int rc = lf.form ? cm_walk_store_get(g, &lf, lw) : 0;
    if (rc == 0 && np && lf.form) {
        lw->np = 0;
        if ((rc = cm_walk_store_get(g, &lf, lw)) == 0) lw->np = np;
    }
    if (rc == 0) {
        rc = loop_walk(g, ls, n, lw);
        if (!rc && lf.form) cm_walk_store_put(g, &lf, lw);  /* takes the form */
    } else if (rc == 1) {
        rc = CM_OK;
        atomic_fetch_add(&g->cache->loops_from_vocab, 1);
    }
    free(lf.form);
    if (rc) {
        cm_loop_walk_free(lw);
        *status = rc;
        return NULL;
    }
    return lw;
}

static atomic_size_t g_dead_shared;
size_t cm_loop_walks_past_dead(void) { return atomic_load(&g_dead_shared); }

static const cm_loop_walk *intern_walk(const cm_grammar *g, const uint32_t *ls, uint32_t n, uint32_t *sig,
                                       uint64_t hash, uint64_t dies, uint8_t np, int *status);

/* The shared walk for the loop of `state` (built under the cache lock), its
 * states in ls with their labels set, and *np whether the loop takes every
 * plain token (1: loop_plain_live) or every text token (2: loop_text_live; the
 * walk then may leave them out: lw->np); NULL when the state is in no loop (or
 * on failure, *status set), labels reset.  all: a walk of every entry (np 0;
 * the far entries of a segment, whose exits may be dead). */
static const cm_loop_walk *shared_walk(const cm_grammar *g, uint32_t state, uint32_t *ls, uint8_t *np,
                                       bool all, int *status) {
    uint32_t *sig;
    uint64_t hash = 0, dies = 0;
    uint32_t n = find_loop(g, state, ls, &sig, &hash, &dies);
    if (!sig) {
        reset_labels(g, ls, n);
        return NULL;
    }
    *np = !all && loop_plain_live(g, ls, n) ? 1 + loop_text_live(g, ls, n) : 0;
    return intern_walk(g, ls, n, sig, hash, dies, *np, status);
}

/* The cache's walk of signature sig (taken) with np as shared_walk asks for it, made and kept
 * where there is none; NULL on failure (*status set), labels reset. */
static const cm_loop_walk *intern_walk(const cm_grammar *g, const uint32_t *ls, uint32_t n, uint32_t *sig,
                                       uint64_t hash, uint64_t dies, uint8_t np, int *status) {
    cm_cache *cache = g->cache;
    size_t nsig = (size_t)n * g->t.n_classes, b = hash % CM_LOOP_BUCKETS;
    /* a walk of more entries (np less) serves a loop that takes the plain or text ones too */
    const cm_loop_walk *whole = NULL;
    for (cm_loop_walk *lw = cache->loops[b]; lw; lw = lw->next)
        if (lw->hash == hash && lw->n_sig == nsig && !memcmp(lw->sig, sig, nsig * sizeof *sig)) {
            if (lw->np == np) {
                whole = lw;
                break;
            }
            if (lw->np < np && (!whole || whole->np < lw->np)) whole = lw;
        }
    if (whole) {  /* labels stay set for the caller */
        if (whole->dies != dies) atomic_fetch_add(&g_dead_shared, 1);
        free(sig);
        return whole;
    }
    cm_loop_walk *lw = new_walk(g, ls, n, sig, hash, np, status);
    if (!lw) {
        reset_labels(g, ls, n);
        return NULL;
    }
    lw->dies = dies;
    lw->next = cache->loops[b];
    cache->loops[b] = lw;
    atomic_fetch_add(&cache->bytes, sizeof *lw + nsig * 4 + g->n_words * 4 + lw->n_exits * sizeof *lw->exits);
    return lw;
}

static atomic_size_t g_plain_loops, g_text_loops;
size_t cm_plain_loop_walks(void) { return atomic_load(&g_plain_loops); }
size_t cm_text_loop_walks(void) { return atomic_load(&g_text_loops); }

/* An exit whose every entry ends with its byte (a token `s"` that closes a string, about half
 * of a JSON string's ~180 exits at Llama-3) is accepted at once: the byte leads inside the rule
 * to a live state and nothing completed before it, so each such token ends alive, as its walk
 * (~500 instructions of set-up a call) would find.  On by default; the exits taken so. */
static atomic_int g_exit_ends = 1;
static atomic_size_t g_exit_ends_taken;
void cm_loop_exit_ends_enable(int on) { atomic_store(&g_exit_ends, on ? 1 : 0); }
size_t cm_loop_exit_ends_taken(void) { return atomic_load(&g_exit_ends_taken); }

/* Whether entries [k, k_end) all end at depth d (the same bytes: several ids). */
static inline bool exit_ends(const cm_vocab *v, size_t k, size_t k_end, uint32_t d) {
    for (; k < k_end; k++)
        if (v->trie_off[k + 1] - v->trie_off[k] != d) return false;
    return true;
}

int cm_loop_entry(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_tables *t = &g->t;
    /* a state where the rule may end is in no loop, but may be a position of a chain */
    if (!g->plain[state]) return g->lim.count_chains ? cm_chain_entry(g, state, w) : 0;
    uint32_t ls[CM_LOOP_MAX];
    int rc = CM_OK;
    uint8_t np = 0;
    const cm_loop_walk *lw = shared_walk(g, state, ls, &np, false, &rc);
    if (!lw) return rc || !g->lim.count_chains ? rc : cm_chain_entry(g, state, w);  /* chains.c */
    memcpy(w->bits, lw->bits, g->n_words * sizeof *w->bits);
    w->n_accepted = lw->n_accepted;
    uint32_t rule = t->state_rule[state];
    const cm_vocab *v = g->v;
    if (np) {  /* every plain (text) token accepted: those inside are in lw->bits already */
        size_t nw = (v->n_tokens + 31) / 32 < g->n_words ? (v->n_tokens + 31) / 32 : g->n_words;
        size_t before = cm_count_bits(w->bits, nw);
        cm_or_words(w->bits, np == 2 ? v->text_bits : v->plain_bits, nw);
        w->n_accepted += (uint32_t)(cm_count_bits(w->bits, nw) - before);
        atomic_fetch_add(&g_plain_loops, 1);
        if (np == 2) atomic_fetch_add(&g_text_loops, 1);
    }
    bool ends = atomic_load_explicit(&g_exit_ends, memory_order_relaxed);
    size_t n_ends = 0;
    for (size_t i = 0; !rc && i < lw->n_exits; i++) {
        const cm_loop_exit *x = &lw->exits[i];
        int32_t to = t->trans[(size_t)ls[x->label] * t->n_classes + t->byte_class[x->byte]];
        if (to < 0) continue;  /* dies here, in a narrow loop (find_loop): every token of it rejected */
        /* its plain (text) entries taken: walk the others (with lw->np, x->k is the first
         * of them, or of the entries not plain, which holds them) */
        uint8_t u;
        if (np == 2 && text_prefix(v, x->k, x->depth + 1, &u)) {
            if (v->text_next[x->k] < x->k_end)
                rc = cm_flat_walk_np(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, true, w);
            continue;
        }
        if (np == 1 && plain_prefix(v, x->k, x->depth + 1)) {
            if (v->plain_next[x->k] < x->k_end)
                rc = cm_flat_walk_np(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, false, w);
            continue;
        }
        if (ends && exit_ends(v, x->k, x->k_end, x->depth + 1)) {
            for (size_t k = x->k; k < x->k_end; k++) cm_walk_accept(w, v->trie_ids[k]);
            n_ends++;
            continue;
        }
        /* a position before an operand: its byte edges and its calls' parts (compose.c) */
        int done = cm_compose_exit(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, w);
        if (done < 0) rc = done;
        else if (!done) rc = cm_run_walk(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, w);
    }
    if (n_ends) atomic_fetch_add_explicit(&g_exit_ends_taken, n_ends, memory_order_relaxed);
    reset_labels(g, ls, lw->n_sig / t->n_classes);
    return rc ? rc : 1;
}

/* What seg_far walks: the far entry at count k; the near entries' base (no count read: the
 * exits inside the segment left out); or only those exits, at the counts they are reached at. */
enum { SEG_FAR, SEG_BASE, SEG_INNER };

/* The count an exit of the loop walk inside the segment is reached at from `state` at count k
 * (k plus the BACK edges of its prefix and edge), or UINT32_MAX where an INTO guard on the way
 * refuses: the subtree is dead. */
static uint32_t inner_count(const cm_grammar *g, uint32_t state, uint32_t k, const cm_loop_exit *x) {
    const cm_tables *t = &g->t;
    const uint8_t *p = g->v->trie_data + g->v->trie_off[x->k];
    uint32_t hi = g->seg_hi[g->state_seg[state]], q = state;
    for (uint32_t d = 0; d <= x->depth; d++) {
        size_t cell = (size_t)q * t->n_classes + t->byte_class[d < x->depth ? p[d] : x->byte];
        uint8_t f = g->edge_flags[cell];
        if ((f & CM_SEG_INTO) && k >= hi) return UINT32_MAX;
        k += (f & CM_SEG_BACK) != 0;
        q = (uint32_t)t->trans[cell];
    }
    return k;
}

/* The shared walk of every entry (np 0) of the loop of `state`, its states in *ls (allocated;
 * labels set, for the caller to reset and free): a segment grammar's far entries and loops
 * outside segments.  NULL (nothing left allocated; *status set on failure) when in no loop. */
static const cm_loop_walk *walk_of_all(const cm_grammar *g, uint32_t state, uint32_t **ls, int *status) {
    uint8_t np = 0;
    const cm_loop_walk *lw = NULL;
    *ls = malloc(CM_LOOP_MAX * sizeof **ls);
    if (!*ls) *status = CM_ERR_NOMEM;
    else if (!(lw = shared_walk(g, state, *ls, &np, true, status))) free(*ls);
    return lw;
}

/* cm_seg_far_entry (SEG_FAR), cm_seg_near_base (SEG_BASE), cm_seg_near_inner (SEG_INNER). */
static int seg_far(const cm_grammar *g, uint32_t state, uint32_t k, bool exits_open, int mode, cm_walk *w) {
    const cm_tables *t = &g->t;
    uint32_t sid = g->state_seg[state];
    if (sid == CM_SEG_NONE || !g->plain[state]) return 0;
    uint32_t *ls;
    int rc = CM_OK;
    const cm_loop_walk *lw = walk_of_all(g, state, &ls, &rc);
    if (!lw) return rc;
    uint32_t n = lw->n_sig / t->n_classes;
    bool inside = true;  /* the loop's DFA walk reads no guard: every state of it in this segment */
    for (uint32_t i = 0; i < n && inside; i++) inside = g->state_seg[ls[i]] == sid;
    /* the base's tokens that end inside the loop are cut by their units (segcut.c): none may
     * have left by an EXIT edge back into the loop */
    for (uint32_t i = 0; mode == SEG_BASE && i < n && inside; i++)
        for (uint32_t c = 0; c < t->n_classes && inside; c++) {
            size_t cell = (size_t)ls[i] * t->n_classes + c;
            inside = t->trans[cell] < 0 || !(g->edge_flags[cell] & CM_SEG_EXIT) ||
                     g->cache->loop_lab[t->trans[cell]] >= n;
        }
    if (inside && mode != SEG_INNER) {
        memcpy(w->bits, lw->bits, g->n_words * sizeof *w->bits);
        w->n_accepted = lw->n_accepted;
    }
    uint32_t rule = t->state_rule[state];
    for (size_t i = 0; inside && !rc && i < lw->n_exits; i++) {
        const cm_loop_exit *x = &lw->exits[i];
        size_t cell = (size_t)ls[x->label] * t->n_classes + t->byte_class[x->byte];
        int32_t to = t->trans[cell];
        if (to < 0) continue;
        bool exit = g->edge_flags[cell] & CM_SEG_EXIT;
        if (exit && !exits_open) continue;  /* lo - k >= L: no token reaches an EXIT's guard */
        if (exit ? mode == SEG_INNER : mode == SEG_BASE) continue;
        /* on from the edge's target: an EXIT's afresh; an edge inside the segment at count k far
         * from the bounds (the real count is k plus the units read so far, but both are as far
         * from the bounds as the rest of the token can see), at the real count near them */
        uint32_t kx = mode == SEG_INNER ? inner_count(g, state, k, x) : k;
        if (kx == UINT32_MAX) continue;
        cm_chart c;
        rc = exit ? cm_chart_init_item(&c, g, (uint32_t)to, CM_OUTER)
                  : cm_chart_init_item_k(&c, g, (uint32_t)to, CM_OUTER, kx);
        if (!rc) rc = cm_walk_chart(g, &c, rule, x->k, x->k_end, x->depth + 1, 0, -1, w);
        cm_chart_free(&c);
    }
    reset_labels(g, ls, n);
    free(ls);
    return rc ? rc : inside;
}

int cm_seg_far_entry(const cm_grammar *g, uint32_t state, uint32_t k, bool exits_open, cm_walk *w) {
    return seg_far(g, state, k, exits_open, SEG_FAR, w);
}

int cm_seg_near_base(const cm_grammar *g, uint32_t state, bool exits_open, cm_walk *w) {
    return seg_far(g, state, 0, exits_open, SEG_BASE, w);
}

int cm_seg_near_inner(const cm_grammar *g, uint32_t state, uint32_t k, cm_walk *w) {
    return seg_far(g, state, k, false, SEG_INNER, w);
}

/* Each exit of lw's walk (the states ls) on from the edge's target through the counted chart,
 * which enters a segment's head at count 0 (cm_seg_enter) as the real chart does. */
static int seg_exits(const cm_grammar *g, uint32_t state, const uint32_t *ls, const cm_loop_walk *lw, cm_walk *w) {
    const cm_tables *t = &g->t;
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < lw->n_exits; i++) {
        const cm_loop_exit *x = &lw->exits[i];
        int32_t to = t->trans[(size_t)ls[x->label] * t->n_classes + t->byte_class[x->byte]];
        uint32_t from = (uint32_t)to;
        if (to >= 0) rc = cm_walk_range(g, &from, 1, t->state_rule[state], x->k, x->k_end, x->depth + 1, 0, -1, w);
    }
    return rc;
}

/* A segment grammar's loop outside its segments (an unbounded string beside bounded ones): the
 * chart of a plain state in it reads no guard until a token leaves the loop, so the loop's
 * shared walk of every entry (np 0) gives the tokens that end inside, as on a grammar without
 * segments; each exit's subtree goes on through a counted chart from the edge's target, which
 * enters a segment's head at count 0 (cm_seg_enter) as the real chart does. */
int cm_seg_loop_entry(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_tables *t = &g->t;
    if (g->state_seg[state] != CM_SEG_NONE || !g->plain[state] || !g->lim.share_loop_walks) return 0;
    uint32_t *ls;
    int rc = CM_OK;
    const cm_loop_walk *lw = walk_of_all(g, state, &ls, &rc);
    if (!lw) return rc;
    uint32_t n_ls = lw->n_sig / t->n_classes, m = 0;
    while (m < n_ls && g->state_seg[ls[m]] == CM_SEG_NONE) m++;
    bool unguarded = m == n_ls;  /* no state of the loop in a segment: its DFA walk reads no count */
    if (unguarded) {
        memcpy(w->bits, lw->bits, g->n_words * sizeof *w->bits);
        w->n_accepted = lw->n_accepted;
    }
    if (unguarded) rc = seg_exits(g, state, ls, lw, w);
    reset_labels(g, ls, n_ls);
    free(ls);
    return rc ? rc : unguarded;
}

/* The plain states outside segments reached from `state` (itself one) through plain states
 * outside segments, numbered breadth first by class as loop_number does, into ls (labels set),
 * each transition's code into sig: inside, CM_LOOP_OUT (a state that accepts, calls or reads a
 * token, or a segment's), CM_LOOP_DEAD; 0 past CM_LOOP_MAX states (labels reset). */
static uint32_t chain_number(const cm_grammar *g, uint32_t state, uint32_t *ls, uint32_t *sig) {
    const cm_tables *t = &g->t;
    uint32_t *lab = g->cache->loop_lab, nc = t->n_classes, n = 0;
    ls[n] = state;
    lab[state] = n++;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t c = 0; c < nc; c++) {
            int32_t to = t->trans[(size_t)ls[i] * nc + c];
            uint32_t code = to < 0 ? CM_LOOP_DEAD : CM_LOOP_OUT;
            if (to >= 0 && g->plain[to] && g->state_seg[to] == CM_SEG_NONE) {
                if (lab[to] == UINT32_MAX) {
                    if (n == CM_LOOP_MAX) {
                        reset_labels(g, ls, n);
                        return 0;
                    }
                    ls[n] = (uint32_t)to;
                    lab[to] = n++;
                }
                code = lab[to];
            }
            sig[(size_t)i * nc + c] = code;
        }
    return n;
}

/* A segment grammar's plain state outside segments in no loop (a short bounded string unrolled,
 * an ISO code's `maxLength: 3`, and its `\u` escapes): its chart is the one item (q, OUTER) for
 * as long as the token's bytes lead through plain states outside segments (no call, no
 * completion, no guard), so the walk of the DFA over those states (a loop walk of a set with no
 * cycle, kept by signature beside the loops') gives the tokens that end there, and each subtree
 * that leaves goes on through the counted chart from the edge's target, as cm_seg_loop_entry's
 * exits do (the set wide from `state`: not narrow as cm_loop_dead_out tells it, so the form's
 * dead transitions stay dead).  0 (declined) where narrow, that state alone or too big. */
int cm_seg_chain_entry(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_tables *t = &g->t;
    if (g->state_seg[state] != CM_SEG_NONE || !g->plain[state] || !g->lim.share_loop_walks) return 0;
    /* wide (a string's first unit): a narrow one (a key's prefix) has a short plain walk, shorter
     * than a set's numbering and form (~1 M instructions where the set is the keys' trie) */
    const int32_t *row = t->trans + (size_t)state * t->n_classes;
    uint32_t stays = 0;
    for (int b = 0; b < 256 && stays <= CM_LOOP_NARROW; b++) {
        int32_t to = row[t->byte_class[b]];
        stays += to >= 0 && g->plain[to] && g->state_seg[to] == CM_SEG_NONE;
    }
    if (stays <= CM_LOOP_NARROW) return 0;
    uint32_t *ls = malloc(CM_LOOP_MAX * sizeof *ls), *sig = malloc((size_t)CM_LOOP_MAX * t->n_classes * sizeof *sig);
    uint32_t n = ls && sig ? chain_number(g, state, ls, sig) : 0;
    int rc = ls && sig ? CM_OK : CM_ERR_NOMEM;
    if (n < 2) {  /* one state: every first byte leaves, nothing to share */
        reset_labels(g, ls, n);
        free(ls);
        free(sig);
        return rc;
    }
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < (size_t)n * t->n_classes; i++) h = (h ^ sig[i]) * 0xbf58476d1ce4e5b9ULL;
    const cm_loop_walk *lw = intern_walk(g, ls, n, sig, h ^ (h >> 29), 0, 0, &rc);
    if (lw) {
        memcpy(w->bits, lw->bits, g->n_words * sizeof *w->bits);
        w->n_accepted = lw->n_accepted;
        rc = seg_exits(g, state, ls, lw, w);
        reset_labels(g, ls, n);
    }
    free(ls);
    return rc ? rc : lw != NULL;
}

/* ---- run walks ----
 *
 * A name (an identifier, a number, a blank run) is a state y that calls
 * nothing and loops to itself on a set of bytes R, its run.  The private chart
 * of (y, OUTER) stays that one item on every byte of R, so a walk of trie
 * entries [k, k_end) from y at depth d0 does the same in every state with that
 * run: tokens whose bytes from d0 on are all in R end alive (accepted), and
 * each subtree whose byte at depth d is the first one out of R goes on from y
 * at depth d.  That split is exact as long as no exit flag is raised inside
 * the run: y does not accept, or no byte of R may follow its rule.  The part
 * that depends only on (R, k, k_end, d0) -- which tokens stay, which subtrees
 * leave -- is walked once and kept by the vocabulary (loopstore.c); each state
 * walks on only the subtrees that leave, and one that leads into another name
 * (an identifier after blanks) goes on through that name's run walk. */

/* The most bytes a run may have.  A name's run is narrow (an identifier's
 * [0-9A-Z_a-z] is 63 bytes, digits 10, blanks 2-4); a run over most of
 * printable ASCII (a JSON string's inside, free text after a pattern's
 * prefix) keeps nearly every token of its range and leaves it through
 * thousands of subtrees, so its shared walk costs more than the whole walk it
 * stands for (JSONSchemaBench o78129's key `[0-9a-f]{32}`, unanchored: its
 * first mask 4.3 -> 6.6 ms with such runs shared) and is seldom met again. */
#define CM_RUN_MAX_BYTES 64

/* The run of `state` (as the item's rule `rule` sees it) into r[8]: false when
 * it calls, has no run, its run is wider than CM_RUN_MAX_BYTES, or it may
 * raise an exit flag. */
static bool run_bytes(const cm_grammar *g, uint32_t state, uint32_t rule, uint32_t *r) {
    const cm_tables *t = &g->t;
    if (state >= t->n_states || !g->solo[state]) return false;
    const int32_t *row = t->trans + (size_t)state * t->n_classes;
    uint32_t c = 0;
    while (c < t->n_classes && row[c] != (int32_t)state) c++;
    if (c == t->n_classes) return false;  /* no byte loops: no run (most states; one pass over the classes) */
    bool acc = t->accepting[state];
    int n = 0;
    memset(r, 0, 8 * sizeof *r);
    for (int b = 0; b < 256; b++) {
        if (row[t->byte_class[b]] != (int32_t)state) continue;
        if (++n > CM_RUN_MAX_BYTES || (acc && cm_follows(g, rule, (uint8_t)b))) return false;
        r[b >> 5] |= 1u << (b & 31);
    }
    return n > 0;
}

/* Does run r hold every byte of a name ([0-9A-Z_a-z], cm_name_byte)? */
static bool run_holds_names(const uint32_t *r) {
    for (unsigned b = '0'; b <= 'z'; b++)
        if (cm_name_byte((uint8_t)b) && !((r[b >> 5] >> (b & 31)) & 1u)) return false;
    return true;
}

/* How many run walks took their names from the vocabulary's list, in this process (for the tests). */
static atomic_size_t g_run_name_scans;
size_t cm_run_name_scans(void) { return atomic_load(&g_run_name_scans); }

/* loop_scan_ids over the entries of a first byte's subtree [k, k_end) (depth
 * 1) that are not names (vocab.h: name_next, name_lcp), for a run that holds
 * every name byte, so that reads each name entry to its end inside (the
 * caller takes them from name_ids): from entry k at depth *dp, each entry
 * read to its end inside is accepted, until entry k leaves the run at depth
 * *dp (returned) or k_end.  An exit's subtree holds no name entry (its byte
 * at depth >= 1 is no name byte), so the exits are the same, in the same
 * order; the entry after one resumes at its prefix with the entry not a name
 * before it, which is in the exit's subtree or before, as loop_scan resumes. */
static __attribute__((noinline)) size_t run_scan_names(const cm_vocab *v, const uint16_t *tab, size_t k,
                                                       size_t k_end, uint32_t *dp, uint32_t *bits, uint32_t **idp) {
    const uint32_t *lcp = v->name_lcp, *nxt = v->name_next, *ids = v->trie_ids;
    const uint64_t *off = v->trie_off;
    const uint8_t *data = v->trie_data;
    const uint8_t *q = data + off[k] + *dp, *q_end = data + off[k + 1];
    uint32_t *idv = *idp;
    for (;;) {
        while (q < q_end && !tab[*q]) q++;
        if (q < q_end) {
            *dp = (uint32_t)(q - (data + off[k]));
            break;
        }
        cm_set_bit(bits, ids[k]);
        *idv++ = ids[k];
        if ((k = nxt[k + 1]) >= k_end) {
            k = k_end;
            break;
        }
        q = data + off[k] + (lcp[k] < 1 ? 1 : lcp[k]);
        q_end = data + off[k + 1];
    }
    *idp = idv;
    return k;
}

/* One exit more in *exits (*cap of them allocated). */
static int run_push_exit(cm_loop_exit **exits, size_t *n_exits, size_t *cap, cm_loop_exit x) {
    if (*n_exits == *cap) {
        cm_loop_exit *q = realloc(*exits, (*cap = *cap ? *cap * 2 : 64) * sizeof *q);
        if (!q) return CM_ERR_NOMEM;
        *exits = q;
    }
    (*exits)[(*n_exits)++] = x;
    return CM_OK;
}

/* run_scan over [k0, k_end) from d0, its ids appended at *idp and its exits
 * to *exits; with names (first byte b's whole subtree at depth 1, the run
 * holding every name byte) b's name entries from the vocabulary's list (set in
 * bits with set_names, else only counted: the caller set them). */
static int run_scan_part(const cm_vocab *v, const uint16_t *tab, size_t k0, size_t k_end, uint32_t d0, bool names,
                         bool set_names, uint32_t *bits, uint32_t **idp, uint32_t *named, cm_loop_exit **exits,
                         size_t *n_exits, size_t *cap_x) {
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    const uint32_t *lcp = v->trie_lcp, *skip = v->skip;
    uint32_t *idv = *idp, d = d0;
    size_t k = k0;
    int rc = CM_OK;
    if (names) {
        /* b's name entries counted, not listed: the store sets them from the list again */
        uint8_t b = data[off[k0]];
        *named += set_names ? cm_vocab_names(v, b, bits) : v->name_off[b + 1] - v->name_off[b];
        k = v->name_next[k0];
        atomic_fetch_add(&g_run_name_scans, 1);
    }
    while (k < k_end && !rc) {
        /* bytes [d0, d) were read in the run by the entry before (else its subtree was skipped) */
        k = names ? run_scan_names(v, tab, k, k_end, &d, bits, &idv) : loop_scan_ids(v, tab, k, k_end, d0, &d, bits, &idv);
        if (k == k_end) break;
        size_t end = skip[off[k] + d];
        if (end > k_end || end <= k) end = k_end;  /* a range that is not a subtree: stop at its end */
        rc = run_push_exit(exits, n_exits, cap_x, (cm_loop_exit){(uint32_t)k, (uint32_t)end, d, 0, data[off[k] + d]});
        if ((k = end) < k_end && names) k = v->name_next[k];
        if (k < k_end) {
            uint32_t l = names ? v->name_lcp[k] : lcp[k];
            d = l < d0 ? d0 : l;
        }
    }
    *idp = idv;
    return rc;
}

static uint64_t run_key(const uint32_t *r, size_t k, size_t k_end, uint32_t d0, uint32_t *key);

/* A whole-trie run walk built from the stored walks of its first bytes' subtrees
 * (the keys (run, fo[b], fo[b + 1], 1) that a name start's run entry stores):
 * on by default; how many subtrees were taken so, in this process. */
static atomic_int g_run_parts_on = 1;
static atomic_size_t g_run_parts_hits;
void cm_run_parts_enable(int on) { atomic_store(&g_run_parts_on, on ? 1 : 0); }
size_t cm_run_parts_hits(void) { return atomic_load(&g_run_parts_hits); }

/* First byte b's subtree [lo, hi) of the whole-trie walk of run r, from the
 * vocabulary's stored walk of that subtree (r, lo, hi, 1): the same scan
 * (run_scan_part of [lo, hi) from depth 1, names from the list), so the same
 * tokens and the same exits in the same order.  Its ids appended at *idp (the
 * buffer ids0 holds cap_ids), its exits to *exits: 1 taken, 0 not stored, < 0
 * error. */
static int run_part_stored(const cm_grammar *g, const uint32_t *r, size_t lo, size_t hi, uint32_t *bits,
                           const uint32_t *ids0, uint32_t **idp, size_t cap_ids, uint32_t *named,
                           cm_loop_exit **exits, size_t *n_exits, size_t *cap_x, bool set_names) {
    uint32_t key[CM_RUN_KEY];
    uint64_t h = run_key(r, lo, hi, 1, key);
    size_t used = (size_t)(*idp - ids0);
    int rc = cm_walk_store_append_run(g, key, h, bits, idp, cap_ids - used, named, exits, n_exits, cap_x, set_names);
    if (rc == 1) atomic_fetch_add_explicit(&g_run_parts_hits, 1, memory_order_relaxed);
    return rc;
}

/* The run walk of r over [k0, k_end) from d0: the tokens that end in the run
 * set in bits and their ids into *ids, the subtrees that leave it (label
 * unused) into *exits.  A first byte's subtree (d0 = 1) of a run holding every
 * name byte takes its name entries (33 k of Llama-3's 34.7 k entries under a
 * letter) from the vocabulary's list and reads only the others: arithmetic's
 * first mask, where `call`'s start walks every letter's subtree so, 5.70 ->
 * 5.20 M instructions (the walks are still kept: c's and sql's loop exits into
 * names find them later).  The whole trie from such a run (a name state's own
 * walk: arithmetic's identifier after `(a`) goes a first byte at a time: a
 * byte outside the run is one exit at depth 0, as the scan would find it, a
 * byte inside it that subtree from depth 1. */
/* The run r as a loop of one state (0 inside, LT_OUT outside) and whether it holds
 * every name byte (run_holds_names): made in own, or with name sets on (loops.h) kept
 * for the last run this thread asked, which a run entry asks for each of its letters
 * (256 stores: 0.14 M instructions of arithmetic's first mask, 51 letters).  Read
 * only inside run_scan, which walks nothing on while it reads it. */
static const uint16_t *run_tab(const uint32_t *r, uint16_t *own, bool *holds) {
    static _Thread_local uint32_t last[8];
    static _Thread_local uint16_t tab[256];
    static _Thread_local bool made, held;
    bool keep = cm_name_sets_on();
    if (keep && made && !memcmp(last, r, sizeof last)) {
        *holds = held;
        return tab;
    }
    uint16_t *t = keep ? tab : own;
    for (int b = 0; b < 256; b++) t[b] = (r[b >> 5] >> (b & 31)) & 1u ? 0 : LT_OUT;
    *holds = run_holds_names(r);
    if (keep) {
        memcpy(last, r, sizeof last);
        made = true;
        held = *holds;
    }
    return t;
}

static int run_scan(const cm_grammar *g, const uint32_t *r, size_t k0, size_t k_end, uint32_t d0, uint32_t *bits,
                    uint32_t **ids, uint32_t *n_ids, uint32_t *n_named, cm_loop_exit **exits, size_t *n_exits) {
    const cm_vocab *v = g->v;
    const uint64_t *off = v->trie_off;
    uint16_t own[256];
    bool holds;
    const uint16_t *tab = run_tab(r, own, &holds);
    size_t cap_x = 0;
    *exits = NULL;
    *n_ids = *n_named = 0;
    *n_exits = 0;
    /* at most one id an entry */
    uint32_t *idv = *ids = malloc((k_end > k0 ? k_end - k0 : 1) * sizeof *idv);
    if (!idv) return CM_ERR_NOMEM;
    const uint32_t *fo = v->first_off;
    bool names = k0 < k_end && v->name_ids && g->lim.name_skip && holds;
    uint8_t b0 = k0 < k_end ? v->trie_data[off[k0]] : 0;
    int rc = CM_OK;
    if (names && d0 == 0 && k0 == 0 && k_end == v->n_trie) {
        bool parts = atomic_load_explicit(&g_run_parts_on, memory_order_relaxed);
        /* the name bytes' name entries in one OR (the run holds every name byte), the
         * subtrees' walks counting them without setting them again */
        bool all = v->name_all && cm_name_sets_on();
        if (all) {
            cm_or_words(bits, v->name_all, (v->n_tokens + 31) / 32);
            cm_name_unions_count();
        }
        for (unsigned b = 0; b < 256 && !rc; b++) {
            size_t lo = fo[b], hi = fo[b + 1];
            if (lo == hi) continue;
            if ((r[b >> 5] >> (b & 31)) & 1u) {
                bool set = !(all && cm_name_byte((uint8_t)b));
                int got = parts ? run_part_stored(g, r, lo, hi, bits, *ids, &idv, k_end - k0, n_named, exits, n_exits,
                                                  &cap_x, set)
                                : 0;
                if (got < 0) rc = got;
                else if (!got) rc = run_scan_part(v, tab, lo, hi, 1, true, set, bits, &idv, n_named, exits, n_exits, &cap_x);
            } else {
                size_t end = v->skip[off[lo]];
                if (end > k_end || end <= lo) end = k_end;
                rc = run_push_exit(exits, n_exits, &cap_x, (cm_loop_exit){(uint32_t)lo, (uint32_t)end, 0, 0, (uint8_t)b});
            }
        }
    } else {
        names = names && d0 == 1 && k0 == fo[b0] && k_end == fo[b0 + 1];
        rc = run_scan_part(v, tab, k0, k_end, d0, names, true, bits, &idv, n_named, exits, n_exits, &cap_x);
    }
    *n_ids = (uint32_t)(idv - *ids);
    return rc;
}

/* The run walk of (r, k, k_end, d0): its tokens set in w, its exits into
 * *exits (the caller frees them); from the vocabulary's store, else walked
 * and put there. */
static uint64_t run_key(const uint32_t *r, size_t k, size_t k_end, uint32_t d0, uint32_t *key) {
    key[0] = CM_RUN_MARK;
    memcpy(key + 1, r, 8 * sizeof *r);
    key[9] = (uint32_t)k;
    key[10] = (uint32_t)k_end;
    key[11] = d0;
    uint64_t h = 0x52554E57ULL;
    for (int i = 0; i < CM_RUN_KEY; i++) h = (h ^ key[i]) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return h;
}

static int run_get(const cm_grammar *g, const uint32_t *r, size_t k, size_t k_end, uint32_t d0, cm_walk *w,
                   cm_loop_exit **exits, size_t *n_exits) {
    uint32_t key[CM_RUN_KEY];
    uint64_t h = run_key(r, k, k_end, d0, key);
    int rc = cm_walk_store_get_run(g, key, h, w, exits, n_exits);
    atomic_fetch_add(rc == 1 ? &g->cache->runs_from_vocab : &g->cache->run_walks, rc >= 0);
    if (rc) return rc < 0 ? rc : CM_OK;
    uint32_t *ids, n_ids, n_named;
    rc = run_scan(g, r, k, k_end, d0, w->bits, &ids, &n_ids, &n_named, exits, n_exits);
    if (!rc) {
        w->n_accepted += n_ids + n_named;
        if (n_named) cm_run_key_names(g->v, key, w->names);
        cm_walk_store_put_run(g, key, h, ids, n_ids, n_named, *exits, *n_exits);
    }
    free(ids);
    return rc;
}

/* The subtree x that leaves the run of `state` at depth x->depth, on from there. */
static int run_exit(const cm_grammar *g, uint32_t state, uint32_t rule, const cm_loop_exit *x, cm_walk *w) {
    const cm_tables *t = &g->t;
    int32_t z = t->trans[(size_t)state * t->n_classes + t->byte_class[x->byte]];
    /* the flag the byte raises: the chart completed the rule (the state accepts) and the byte may follow */
    bool f = t->accepting[state] && cm_follows(g, rule, x->byte);
    if (z < 0 && !f) return CM_OK;  /* dies there, no flag: every token of it rejected */
    uint32_t r[8];
    /* no flag: after the byte the chart is the one item (z, OUTER), as a walk from z starts */
    if (z >= 0 && !f && run_bytes(g, (uint32_t)z, rule, r))
        return cm_run_walk(g, (uint32_t)z, rule, x->k, x->k_end, x->depth + 1, w);
    if (z >= 0 && !f) {  /* a position before an operand (compose.c) */
        int done = cm_compose_exit(g, (uint32_t)z, rule, x->k, x->k_end, x->depth + 1, w);
        if (done) return done < 0 ? done : CM_OK;
    }
    return cm_flat_walk(g, state, rule, x->k, x->k_end, x->depth, w);
}

/* cm_run_walk of a state whose run r is known (run_bytes) over a range it takes. */
static int run_walk_r(const cm_grammar *g, uint32_t state, uint32_t rule, const uint32_t *r, size_t k, size_t k_end,
                      uint32_t d0, cm_walk *w) {
    cm_loop_exit *xs;
    size_t n_xs;
    int rc = run_get(g, r, k, k_end, d0, w, &xs, &n_xs);
    for (size_t i = 0; !rc && i < n_xs; i++) rc = run_exit(g, state, rule, &xs[i], w);
    free(xs);
    return rc;
}

int cm_run_walk(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0,
                cm_walk *w) {
    uint32_t r[8];
    if (!g->lim.run_walks || !g->lim.share_loop_walks || k_end - k < g->lim.run_walks || k_end > g->v->n_trie || !run_bytes(g, state, rule, r))
        return cm_flat_walk(g, state, rule, k, k_end, d0, w);
    return run_walk_r(g, state, rule, r, k, k_end, d0, w);
}

/* Which subtrees of first byte b of `state` may go through a run walk, into
 * edge[256]: b's target's run, no flag raised by b, and enough entries.  One
 * run_bytes a target (bytes to one target are mostly adjacent: a memo of the
 * last).  Their number returned. */
static int run_edges(const cm_grammar *g, uint32_t state, uint32_t rule, bool *edge) {
    const cm_tables *t = &g->t;
    const uint32_t *fo = g->v->first_off;
    const int32_t *row = t->trans + (size_t)state * t->n_classes;
    int32_t last = -1;
    bool last_ok = false;
    int n = 0;
    uint32_t r[8];
    for (int b = 0; b < 256; b++) {
        int32_t z = row[t->byte_class[b]];
        edge[b] = false;
        if (z < 0 || fo[b + 1] - fo[b] < g->lim.run_walks || (t->accepting[state] && cm_follows(g, rule, (uint8_t)b)))
            continue;
        if (z != last) {
            last = z;
            last_ok = run_bytes(g, (uint32_t)z, rule, r);
        }
        n += edge[b] = last_ok;
    }
    return n;
}

/* Name sets (loops.h): on by default; the counters, in this process. */
static atomic_int g_name_sets_on = 1;
static atomic_size_t g_name_unions, g_name_sets_known;
void cm_name_sets_enable(int on) { atomic_store(&g_name_sets_on, on ? 1 : 0); }
bool cm_name_sets_on(void) { return atomic_load_explicit(&g_name_sets_on, memory_order_relaxed); }
size_t cm_name_unions_taken(void) { return atomic_load(&g_name_unions); }
size_t cm_name_sets_skipped(void) { return atomic_load(&g_name_sets_known); }
void cm_name_unions_count(void) { atomic_fetch_add_explicit(&g_name_unions, 1, memory_order_relaxed); }
void cm_name_sets_count(void) { atomic_fetch_add_explicit(&g_name_sets_known, 1, memory_order_relaxed); }

/* Stored run walks taken where another strategy would walk (cm_run_stored), and
 * run entries' first-byte gaps skipped (cm_run_entry): on by default; how many,
 * in this process. */
static atomic_int g_name_runs_on = 1;
static atomic_size_t g_name_run_hits, g_run_gaps_skipped;
void cm_name_runs_enable(int on) { atomic_store(&g_name_runs_on, on ? 1 : 0); }
size_t cm_name_run_hits(void) { return atomic_load(&g_name_run_hits); }
size_t cm_run_gaps_skipped(void) { return atomic_load(&g_run_gaps_skipped); }

bool cm_run_stored(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0) {
    uint32_t r[8], key[CM_RUN_KEY];
    if (!atomic_load_explicit(&g_name_runs_on, memory_order_relaxed) || !g->lim.run_walks ||
        !g->lim.share_loop_walks || k_end - k < g->lim.run_walks || k_end > g->v->n_trie || k >= k_end ||
        !run_bytes(g, state, rule, r))
        return false;
    uint64_t h = run_key(r, k, k_end, d0, key);
    if (!cm_walk_store_has_run(g, key, h)) return false;
    atomic_fetch_add_explicit(&g_name_run_hits, 1, memory_order_relaxed);
    return true;
}

int cm_run_entry_stored(const cm_grammar *g, uint32_t state, cm_walk *w) {
    uint32_t rule = g->t.state_rule[state];
    if (!g->solo[state] || !cm_run_stored(g, state, rule, 0, g->v->n_trie, 0)) return 0;
    int rc = cm_run_walk(g, state, rule, 0, g->v->n_trie, 0, w);
    return rc ? rc : 1;
}

/* Does `state` read none of the first bytes [b0, b1) and nothing else from (state,
 * OUTER)?  It calls nothing and reads no token, so every entry of those first bytes
 * dies at depth 0 (where an exit is another item of the same set): the walk of
 * their range finds nothing. */
static bool gap_dead(const cm_grammar *g, uint32_t state, unsigned b0, unsigned b1) {
    const cm_tables *t = &g->t;
    if (!atomic_load_explicit(&g_name_runs_on, memory_order_relaxed) || g->has_tokens[state] ||
        t->ref_off[state] != t->ref_off[state + 1])
        return false;
    const int32_t *row = t->trans + (size_t)state * t->n_classes;
    for (unsigned c = b0; c < b1; c++)
        if (row[t->byte_class[c]] >= 0) return false;
    atomic_fetch_add_explicit(&g_run_gaps_skipped, 1, memory_order_relaxed);
    return true;
}

int cm_run_entry(const cm_grammar *g, uint32_t state, cm_walk *w) {
    const cm_tables *t = &g->t;
    uint32_t rule = t->state_rule[state], r[8];
    size_t n = g->v->n_trie, lo = 0;
    if (!g->lim.run_walks || !g->lim.share_loop_walks || !g->solo[state]) return 0;
    if (run_bytes(g, state, rule, r)) {  /* a name from its first byte on */
        int rc = cm_run_walk(g, state, rule, 0, n, 0, w);
        return rc ? rc : 1;
    }
    bool edge[256];
    if (!run_edges(g, state, rule, edge)) return 0;
    const uint32_t *fo = g->v->first_off;
    int rc = CM_OK;
    unsigned lo_b = 0;  /* the first byte of entry lo (or past it) */
    int32_t last = -1;  /* the last target and its run: a name's letters all lead to one state */
    bool sets = cm_name_sets_on();
    for (int b = 0; b < 256 && !rc; b++) {
        if (!edge[b]) continue;
        /* the first bytes between, in one range walked as the whole walk would */
        if (lo < fo[b] && !gap_dead(g, state, lo_b, (unsigned)b)) rc = cm_flat_walk(g, state, rule, lo, fo[b], 0, w);
        int32_t z = t->trans[(size_t)state * t->n_classes + t->byte_class[b]];
        /* edge[b]: z has a run (run_bytes) and b's subtree is one a run walk takes (run_edges),
         * so the run found once for z serves each of its letters (run_bytes reads 256 bytes) */
        if (!rc && sets && z != last) last = run_bytes(g, (uint32_t)z, rule, r) ? z : -1;
        if (!rc) rc = sets && z == last ? run_walk_r(g, (uint32_t)z, rule, r, fo[b], fo[b + 1], 1, w)
                                        : cm_run_walk(g, (uint32_t)z, rule, fo[b], fo[b + 1], 1, w);
        lo = fo[b + 1];
        lo_b = (unsigned)b + 1;
    }
    if (!rc && lo < n && !gap_dead(g, state, lo_b, 256)) rc = cm_flat_walk(g, state, rule, lo, n, 0, w);
    return rc ? rc : 1;
}

/* ---- literals: states that read a few bytes each, into states that do the same ---- */

/* A literal state reads at most this many bytes (a key's next character, a few keys'). */
#define CM_LITERAL_BYTES 4

/* The bytes `state` has a transition on, ascending, if at most CM_LITERAL_BYTES: their
 * number; else -1. */
static int literal_bytes(const cm_grammar *g, uint32_t state, uint8_t *out) {
    const uint32_t *nb = g->next_bytes + (size_t)state * 8;
    int n = 0;
    for (int j = 0; j < 8; j++)
        for (uint32_t x = nb[j]; x; x &= x - 1) {
            if (n == CM_LITERAL_BYTES) return -1;
            out[n++] = (uint8_t)(j * 32 + __builtin_ctz(x));
        }
    return n;
}

/* Of the entries [*lo, *hi), which share their first j bytes and are all longer
 * than j, those whose byte j is b (a range: the trie is sorted by bytes). */
static void narrow(const cm_vocab *v, size_t *lo, size_t *hi, uint32_t j, uint8_t b) {
    const uint8_t *data = v->trie_data;
    const uint64_t *off = v->trie_off;
    size_t a = *lo, z = *hi;
    while (a < z) {
        size_t m = a + (z - a) / 2;
        if (data[off[m] + j] < b) a = m + 1;
        else z = m;
    }
    size_t e = a;
    z = *hi;
    while (e < z) {
        size_t m = e + (z - e) / 2;
        if (data[off[m] + j] <= b) e = m + 1;
        else z = m;
    }
    *lo = a;
    *hi = e;
}

/* Does the walk go on byte by byte from (z, OUTER)?  It calls nothing, cannot complete
 * (no exit flag raised) and reads few bytes. */
static bool literal_state(const cm_grammar *g, uint32_t z) {
    uint8_t bs[CM_LITERAL_BYTES];
    return g->solo[z] && !g->t.accepting[z] && literal_bytes(g, z, bs) >= 0;
}

/* Entries [lo, hi), which share their first j bytes and are all longer than j, from
 * (s, OUTER) at depth j, where no exit flag was raised before: byte by byte while the
 * states are literal_state; the rest by cm_flat_walk.  Bytes ascending: the uncertain
 * tokens come in trie order. */
static int literal_walk(const cm_grammar *g, uint32_t s, uint32_t rule, size_t lo, size_t hi, uint32_t j,
                        cm_walk *w) {
    const cm_tables *t = &g->t;
    const cm_vocab *v = g->v;
    uint8_t bs[CM_LITERAL_BYTES];
    int n = literal_bytes(g, s, bs), rc = CM_OK;
    for (int i = 0; i < n && !rc && lo < hi; i++) {
        size_t a = lo, e = hi;
        if (j) narrow(v, &a, &e, j, bs[i]);
        else a = v->first_off[bs[i]], e = v->first_off[bs[i] + 1];
        lo = e;
        uint32_t z = (uint32_t)t->trans[(size_t)s * t->n_classes + t->byte_class[bs[i]]];
        /* the tokens that end here (several ids may share their bytes) */
        while (a < e && v->trie_off[a + 1] - v->trie_off[a] == j + 1) cm_walk_accept(w, v->trie_ids[a++]);
        if (a == e) continue;
        /* at depth j + 1 the private chart is the one item (z, OUTER) and its closure */
        rc = literal_state(g, z) ? literal_walk(g, z, rule, a, e, j + 1, w) : cm_flat_walk(g, z, rule, a, e, j + 1, w);
    }
    return rc;
}

int cm_literal_entry(const cm_grammar *g, uint32_t state, cm_walk *w) {
    uint8_t bs[CM_LITERAL_BYTES];
    /* depth 0: an exit there is another item of the same set, so `state` may accept */
    if (!g->solo[state] || literal_bytes(g, state, bs) <= 0) return 0;
    int rc = literal_walk(g, state, g->t.state_rule[state], 0, g->v->n_trie, 0, w);
    return rc ? rc : 1;
}
