/* Entries of counted chains: the unrolled positions of x{m,n}.
 *
 * A counted repetition below the unroll budget (a maxLength-64 JSON string,
 * [a-z]{0,40}), and each block of a bigger one, is a chain of positions in the
 * automaton: P_0 -x-> P_1 -x-> ... -x-> P_n, each position its own states (the
 * middle of a multi-byte character, of an escape), so each is its own cache
 * entry, and its walk of the trie (~1.5 ms at V = 128k) would be paid once per
 * position.  But P_i and P_{i+1} differ only in how far they are from the end.
 *
 * The shift.  sigma maps each state of position j to its copy in position
 * j+1; it is found by walking the pairs (s, t) in step, t one of the few
 * states most bytes lead to from s, and pairing the states both sides reach
 * on each byte.  The
 * states no pair maps to are the *representatives* (s among them), the states
 * sigma^j(u) their *orbits*.  Folding every orbit into its representative
 * gives an automaton U (the loop x* of the chain) whose transitions carry a
 * shift o (0 inside a position, 1 onto the next).
 *
 * The model, checked on every state of every orbit before it is used: for a
 * representative u and a byte class c, the transition of sigma^j(u) on c is
 * alive exactly for lo(u, c) <= j < lim(u, c), and then leads to
 * sigma^(j+o)(u') where U leads to (u', o), or to the very state U leads out
 * to (lo > 0 only there: the closing quote of a string below its minLength);
 * every state of the chain is plain, but an orbit may end in an accepting
 * state that reads no more (the end of a block).  So a token read from s = sigma^0(s) through U,
 * k shifts into it, is alive in the real automaton while every byte's
 * transition has k < lim; with B = the length of s's orbit - 1 (how far s is
 * from the end) and delta = lim - B, a token lives iff
 *     need(t) = max over its bytes of (k - delta) < B.
 * Positions far from the end (B > every need) share their accepted tokens.
 *
 * One walk of the trie through U (shared by every position whose U, deltas and
 * ends are equal: keyed by U's form by byte with them, so the vocabulary keeps
 * it for every grammar, loopstore.c) records each token
 * that ends inside with its need, each subtree that leaves U (as loops.c
 * does) with the need of its prefix, and, where an orbit ends in an accepting
 * state, each trie node standing at a representative with such an end (the
 * budget at which that node is the end, the subtree of its next byte).  The
 * entry of a position is then: the tokens of need < B (accepted), each exit of
 * need < B (and shift - (lo - B) >= B, the position's lo) continued from the
 * state U leaves to (as loops.c does), and the
 * subtrees standing at the end of the chain whose next byte may follow the
 * rule (uncertain: the plain walk's exit flag is raised there, and the end
 * reads no more).  The same classification as a plain walk, token for token:
 * tests/test_repeats.py and tests/test_entries.py compare them.
 *
 * Positions where the rule may end.  A count in a rule of its own (a long
 * string's body shared by several values: Snowplow's maxLength-256 strings)
 * has every position accepting, or every one from the minimum on.  The
 * model takes such orbits too -- accepting from an index acc_from on, alike
 * for every representative -- when each byte that may follow the rule is dead
 * from every representative that may end it.  A plain walk raises the exit
 * flag at an accepting state only before a byte that follows the rule, so then
 * the token dies at that very byte and no flag outlives it: the walk records
 * each trie node at such a representative before a dead byte (accs: its need
 * and shift), and a position's entry takes the subtrees of those whose byte
 * follows the rule, where the node is alive (need < B) and accepting (shift
 * past acc_from for this position).
 *
 * The analysis itself (the pair walk, the last positions, the orbits, the
 * model on every state, the form) depends only on the chain's rows: the
 * vocabulary keeps it by them (memos, below), so a chain met again in any
 * grammar compiled for it costs one pass over its rows. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "chains.h"
#include "flat.h"
#include "tokclass.h"

#define CM_CHAIN_MAX 65536      /* states of a chain followed, at most */
#define CM_CHAIN_LABELS 254     /* representatives of U */
#define NONE UINT32_MAX
#define END_NONE INT32_MIN      /* a representative's orbit does not end accepting */
#define NO_LAM INT32_MIN        /* a transition alive from the start of its orbit */
enum { ACC_NEVER = 0, ACC_ALWAYS = 1, ACC_FROM = 2 };  /* where a representative's orbit may end the rule */

enum { CODE_DEAD = 0xffff, CODE_OUT = 0xfffe };

/* ---- finding the chain ---- */

/* A grammar's chain walks are few (one per form): they are all filed in one
 * bucket of cache->loops, so that a position looks for its chain there only. */
#define CM_CHAIN_BUCKET 0

#define CM_SCAN_INLINE 32     /* locals a scan holds without allocating (most searches fail sooner) */
enum { SCAN_ARRAYS = 6 };

typedef struct chain_scan {
    const cm_grammar *g;
    uint32_t *st, *sig, *inv, *rep, *off;  /* per local index: SCAN_ARRAYS arrays of cap in one block, */
    uint32_t n, cap;
    uint32_t *block;            /*   `inline` while cap is CM_SCAN_INLINE, else allocated */
    uint32_t n_rep;             /* representatives (orbits) */
    uint32_t *queue;            /* left sides of pairs, in the order they were paired */
    uint32_t n_queue;
    uint32_t *outs;             /* states both sides of a pair lead to (labelled OUT_MARK) */
    uint32_t n_outs, cap_outs;
    uint32_t open;              /* a first position whose calls are left out (cm_chain_bytes), else NONE */
    uint32_t inline_block[SCAN_ARRAYS * CM_SCAN_INLINE];
} chain_scan;

#define OUT_MARK (UINT32_MAX - 1)

/* The local index of state q, if it has one. */
static inline uint32_t local_of(const chain_scan *cs, int32_t q) {
    uint32_t x = q < 0 ? NONE : cs->g->cache->loop_lab[q];
    return x < CM_CHAIN_MAX ? x : NONE;
}

static void scan_free(chain_scan *cs) {
    uint32_t *lab = cs->g->cache->loop_lab;
    for (uint32_t i = 0; i < cs->n; i++) lab[cs->st[i]] = UINT32_MAX;
    for (uint32_t i = 0; i < cs->n_outs; i++) lab[cs->outs[i]] = UINT32_MAX;
    free(cs->outs);
    if (cs->block != cs->inline_block) free(cs->block);
}

/* The per-local arrays with room for cap locals (the first cs->n kept): false when out of memory. */
static bool scan_reserve(chain_scan *cs, uint32_t cap) {
    uint32_t *block = cap == CM_SCAN_INLINE ? cs->inline_block : malloc((size_t)SCAN_ARRAYS * cap * sizeof *block);
    if (!block) return false;
    uint32_t **arrs[SCAN_ARRAYS] = {&cs->st, &cs->sig, &cs->inv, &cs->rep, &cs->off, &cs->queue};
    for (int i = 0; i < SCAN_ARRAYS; i++) {
        uint32_t n = i == SCAN_ARRAYS - 1 ? cs->n_queue : cs->n;
        if (n) memcpy(block + (size_t)i * cap, *arrs[i], n * sizeof *block);
        *arrs[i] = block + (size_t)i * cap;
    }
    if (cs->block && cs->block != cs->inline_block) free(cs->block);
    cs->block = block;
    cs->cap = cap;
    return true;
}

/* The local index of state q, given one if new; NONE when past CM_CHAIN_MAX
 * or out of memory. */
static uint32_t local(chain_scan *cs, uint32_t q) {
    uint32_t *lab = cs->g->cache->loop_lab;
    if (lab[q] != UINT32_MAX) return lab[q] < CM_CHAIN_MAX ? lab[q] : NONE;
    if (cs->n == cs->cap) {
        if (cs->cap >= CM_CHAIN_MAX || !scan_reserve(cs, cs->cap ? cs->cap * 2 : CM_SCAN_INLINE)) return NONE;
    }
    uint32_t i = cs->n++;
    cs->st[i] = q;
    cs->sig[i] = cs->inv[i] = cs->rep[i] = NONE;
    cs->off[i] = 0;
    lab[q] = i;
    return i;
}

static bool chain_end(const cm_grammar *g, uint32_t q) {
    return g->t.accepting[q] && g->solo[q] && !g->has_bytes[q];
}

#define CM_CHAIN_TRIES 3  /* candidates for sigma(s) tried */
/* A chain of fewer positions is left to plain walks: an x? (a number's "-?",
 * whitespace's "\r?") is a chain of two positions, and its walk through U
 * costs what the first position's own walk does, so sharing it gains at
 * most the second position's walk, which is seldom needed, while its
 * levels, exits and filtered acc points are paid for at once (on 30 Glaive
 * schemas' first documents, 124 of 159 chains, adding ~80 us to a number
 * value's first mask). */
#define CM_CHAIN_MIN_BUDGET 2

/* One candidate for sigma(s) taken without counting its bytes (on, the default): the order
 * of several is by their bytes, which the 256 bytes' classes give (~1.3 K instructions a call,
 * 0.29 M of the mid set's fills in 228 calls), but one candidate is first whatever its count.
 * Off: the bytes counted always, the reference the tests compare against. */
static atomic_int g_next_one = 1;
static atomic_size_t g_next_one_taken;

void cm_chain_next_one_enable(int on) { atomic_store(&g_next_one, on); }

size_t cm_chain_next_one_taken(void) { return atomic_load(&g_next_one_taken); }

/* Candidates for sigma(s): the plain states (or ends) s leads to on a byte,
 * not s itself, most bytes first (ties: the lower class first); how many. */
static uint32_t next_positions(const cm_grammar *g, uint32_t s, uint32_t *out) {
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes, bytes[256], n_out = 0, got[CM_CHAIN_TRIES] = {0}, c0 = 0;
    const int32_t *row = t->trans + (size_t)s * nc;
    bool any = false;  /* often none: every byte leads back, or to a state that calls (whitespace) */
    for (uint32_t c = 0; c < nc && !any; c++)
        if ((any = row[c] >= 0 && (uint32_t)row[c] != s && g->solo[row[c]])) c0 = c;
    if (!any) return 0;
    if (atomic_load_explicit(&g_next_one, memory_order_relaxed)) {
        int32_t to0 = row[c0];
        bool other = false;  /* a second candidate after the first class's */
        for (uint32_t c = c0 + 1; c < nc && !other; c++)
            other = row[c] >= 0 && row[c] != to0 && (uint32_t)row[c] != s && g->solo[row[c]];
        if (!other) {
            atomic_fetch_add_explicit(&g_next_one_taken, 1, memory_order_relaxed);
            out[0] = (uint32_t)to0;
            return 1;
        }
    }
    memset(bytes, 0, nc * sizeof *bytes);
    for (int b = 0; b < 256; b++) bytes[t->byte_class[b]]++;
    for (uint32_t c = 0; c < nc; c++) {
        int32_t to = row[c];
        if (to < 0 || (uint32_t)to == s || !g->solo[to]) continue;
        bool seen = false;
        for (uint32_t c2 = 0; c2 < c && !seen; c2++) seen = row[c2] == to;
        if (seen) continue;
        uint32_t n = 0;  /* bytes of every class leading to `to` */
        for (uint32_t c2 = c; c2 < nc; c2++)
            if (row[c2] == to) n += bytes[c2];
        if (n_out == CM_CHAIN_TRIES && got[n_out - 1] >= n) continue;  /* keep the best few */
        uint32_t i = n_out == CM_CHAIN_TRIES ? n_out - 1 : n_out++;
        for (; i > 0 && got[i - 1] < n; i--) {
            out[i] = out[i - 1];
            got[i] = got[i - 1];
        }
        out[i] = (uint32_t)to;
        got[i] = n;
    }
    return n_out;
}

static bool mark_out(chain_scan *cs, uint32_t q) {
    size_t cap = cs->cap_outs;
    if (cs->n_outs == cap && cm_grow_to((void **)&cs->outs, &cap, cap + 1, sizeof *cs->outs)) return false;
    cs->cap_outs = (uint32_t)cap;
    cs->outs[cs->n_outs++] = q;
    cs->g->cache->loop_lab[q] = OUT_MARK;
    return true;
}

/* The states the chain reaches where its copy one position on is dead (the
 * middle of a character begun in the last position), and on from them:
 * plain states not yet in the chain and not where it leaves to, each the
 * whole orbit of its own. */
static bool last_positions(chain_scan *cs) {
    const cm_grammar *g = cs->g;
    const cm_tables *t = &g->t;
    uint32_t n0 = cs->n;
    cs->n_queue = 0;
    for (uint32_t i = 0; i < cs->n; i++) {
        const int32_t *row = t->trans + (size_t)cs->st[i] * t->n_classes;
        const int32_t *row2 = i < n0 && cs->sig[i] != NONE ? t->trans + (size_t)cs->st[cs->sig[i]] * t->n_classes : NULL;
        for (uint32_t c = 0; c < t->n_classes; c++) {
            int32_t r = row[c];
            if (r < 0 || (row2 && row2[c] >= 0) || g->cache->loop_lab[r] != UINT32_MAX || !g->plain[r]) continue;
            if (local(cs, (uint32_t)r) == NONE) return false;
        }
    }
    return true;
}

/* sigma from the pair (s, t) walked in step: false when it is not a function
 * that one-to-one pairs plain states (or past the limits). */
static bool pair_walk(chain_scan *cs, uint32_t s, uint32_t t0) {
    const cm_grammar *g = cs->g;
    const cm_tables *t = &g->t;
    uint32_t a = local(cs, s), b = local(cs, t0);
    if (a == NONE || b == NONE) return false;
    cs->sig[a] = b;
    cs->inv[b] = a;
    cs->queue[cs->n_queue++] = a;
    for (uint32_t qi = 0; qi < cs->n_queue; qi++) {  /* at most one entry a local: fits */
        uint32_t i = cs->queue[qi], q = cs->st[i], q2 = cs->st[cs->sig[i]];
        if ((!g->solo[q] && q != cs->open) || !g->solo[q2]) return false;
        const int32_t *row = t->trans + (size_t)q * t->n_classes, *row2 = t->trans + (size_t)q2 * t->n_classes;
        for (uint32_t c = 0; c < t->n_classes; c++) {
            int32_t r = row[c], r2 = row2[c];
            if (r < 0) continue;  /* dead here; one that appears further on is checked by check_orbit */
            if (c && r == row[c - 1] && r2 == row2[c - 1]) continue;  /* the pair just read: nothing new */
            if (r == r2) {  /* leaves the chain (checked later) */
                if (g->cache->loop_lab[r] == UINT32_MAX && !mark_out(cs, (uint32_t)r)) return false;
                continue;
            }
            if (r2 < 0) continue;  /* dies further on */
            uint32_t x = local(cs, (uint32_t)r), y = local(cs, (uint32_t)r2);
            if (x == NONE || y == NONE) return false;
            if (cs->sig[x] == y) continue;
            if (cs->sig[x] != NONE || cs->inv[y] != NONE || x == y) return false;
            cs->sig[x] = y;
            cs->inv[y] = x;
            cs->queue[cs->n_queue++] = x;
        }
    }
    return true;
}

/* rep and off of every local (its orbit's first state, its place there):
 * false when sigma has a cycle. */
static bool orbits(chain_scan *cs) {
    cs->n_rep = 0;
    for (uint32_t i = 0; i < cs->n; i++) {
        if (cs->inv[i] != NONE) continue;
        uint32_t j = 0;
        cs->n_rep++;
        for (uint32_t x = i; x != NONE; x = cs->sig[x]) {
            cs->rep[x] = i;
            cs->off[x] = j++;
        }
    }
    for (uint32_t i = 0; i < cs->n; i++)
        if (cs->rep[i] == NONE) return false;
    return true;
}

/* B of local 0: how far it is from the end of its orbit. */
static uint32_t head_budget(const chain_scan *cs) {
    uint32_t b = 0;
    for (uint32_t x = cs->sig[0]; x != NONE; x = cs->sig[x]) b++;
    return b;
}

/* U from s: its representatives numbered breadth first by byte (ls, labels
 * in lbl), each transition's code (label | shift << 8, CODE_OUT, CODE_DEAD),
 * lo and lim; each label's orbit length and whether it ends accepting.  Every
 * state of every orbit checked against the model (see the top).  The key:
 * [mark, n_lab, per label: end - B, per byte: code, lim - B, lo > 0]. */
typedef struct chain_form {
    uint32_t n_lab, ls[CM_CHAIN_LABELS];
    uint32_t *head;             /* s's orbit: s, sigma(s), ... [budget + 1] */
    int32_t *lam;               /* [n_lab * 256] by byte: lo - B of a transition alive from lo > 0, else NO_LAM */
    int32_t *to;                /* [n_lab * 256] by byte: where a transition out of the chain goes, else -1 */
    int32_t *aam;               /* [n_lab]: acc_from - B of an orbit accepting from acc_from > 0 on, else NO_LAM */
    uint32_t *key;
    size_t n_key;
    uint32_t budget;            /* B: how far s is from the end of its orbit */
    uint64_t key_hash;          /* key_hash_of(key), where hashed (taken from a kept memo's) */
    bool hashed;
} chain_form;

/* The model of representative u, checked on every state of its orbit: per
 * class its code, the orbit indices [lo, lim) where it is alive (lo > 0 only
 * for a transition out of the chain: the exit of a string below its
 * minLength), its target there, the orbit's length and whether it ends
 * accepting. */
static bool check_orbit(chain_scan *cs, uint32_t u, const uint32_t *lbl, uint32_t *code, uint32_t *lo,
                        uint32_t *lim, int32_t *first, uint32_t *len, bool *ends, uint32_t *acc_from) {
    const cm_grammar *g = cs->g;
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes;  /* first[c]: the target where it is first alive */
    for (uint32_t c = 0; c < nc; c++) {
        code[c] = CODE_DEAD;
        lo[c] = lim[c] = UINT32_MAX;
    }
    uint32_t j = 0, last = u;
    bool ok = true;
    *acc_from = NONE;  /* accepting from this orbit index on (the rule may end there), or never */
    for (uint32_t x = u; ok && x != NONE; x = cs->sig[x], j++) {
        uint32_t q = cs->st[x];
        last = x;
        if (!g->solo[q] && q != cs->open) ok = false;
        else if (t->accepting[q] && *acc_from == NONE) *acc_from = j;
        else if (!t->accepting[q] && *acc_from != NONE) ok = false;  /* accepting again only after */
        for (uint32_t c = 0; ok && c < nc; c++) {
            int32_t r = t->trans[(size_t)q * nc + c];
            if (r < 0) {
                if (lo[c] != UINT32_MAX && lim[c] == UINT32_MAX) lim[c] = j;
                continue;
            }
            if ((uint32_t)r == cs->open) ok = false;  /* back into the first position, calls and all */
            if (lim[c] != UINT32_MAX) ok = false;  /* alive again after dying */
            else if (lo[c] == UINT32_MAX) {        /* alive from here: its code */
                uint32_t y = local_of(cs, r);
                lo[c] = j;
                first[c] = r;
                if (y == NONE) code[c] = CODE_OUT;
                else if (j || cs->off[y] > 255 || lbl[cs->rep[y]] == NONE) ok = false;
                else code[c] = lbl[cs->rep[y]] | cs->off[y] << 8;
            } else if (code[c] == CODE_OUT) {
                ok = r == first[c];
            } else {
                uint32_t y = local_of(cs, r), y0 = local_of(cs, first[c]);
                ok = y != NONE && cs->rep[y] == cs->rep[y0] && cs->off[y] == j + cs->off[y0];
            }
        }
    }
    for (uint32_t c = 0; c < nc; c++) {
        if (lo[c] == UINT32_MAX) lo[c] = lim[c] = 0;  /* dead all along */
        else if (lim[c] == UINT32_MAX) lim[c] = j;
    }
    *len = j;
    *ends = chain_end(g, cs->st[last]);
    if (*ends && *acc_from == j - 1) *acc_from = NONE;  /* only its end: a block's, nodes (below) */
    return ok;
}

static void form_free(chain_form *f) {
    free(f->key);
    free(f->head);
    free(f->lam);
    free(f->to);
    free(f->aam);
    f->key = f->head = NULL;
    f->lam = f->to = f->aam = NULL;
    f->hashed = false;
}

static bool chain_form_of(chain_scan *cs, uint32_t s_local, chain_form *f) {
    const cm_grammar *g = cs->g;
    uint32_t nc = g->t.n_classes;
    /* labels go to representatives only: the tables are as big as the chain, not the limit */
    uint32_t cap = cs->n_rep < CM_CHAIN_LABELS ? cs->n_rep : CM_CHAIN_LABELS;
    uint32_t *lbl = malloc((size_t)cs->n * sizeof *lbl);
    uint32_t *code = malloc((size_t)cap * nc * sizeof *code);
    uint32_t *lim = malloc((size_t)cap * nc * sizeof *lim);
    uint32_t *lo = malloc((size_t)cap * nc * sizeof *lo);
    int32_t *first = malloc((size_t)cap * nc * sizeof *first);
    uint32_t len[CM_CHAIN_LABELS], acc_from[CM_CHAIN_LABELS];
    bool ends[CM_CHAIN_LABELS], ok = lbl && code && lim && lo && first;
    f->key = NULL;
    f->hashed = false;
    f->n_lab = 0;
    if (ok) {
        for (uint32_t i = 0; i < cs->n; i++) lbl[i] = NONE;
        lbl[s_local] = 0;
        f->ls[f->n_lab++] = s_local;
    }
    for (uint32_t l = 0; ok && l < f->n_lab; l++) {  /* breadth first by byte: labels as met */
        uint32_t u = f->ls[l], ur = cs->st[u];
        for (int b = 0; b < 256 && ok; b++) {
            uint32_t x = local_of(cs, g->t.trans[(size_t)ur * nc + g->t.byte_class[b]]);
            if (x == NONE || lbl[cs->rep[x]] != NONE) continue;
            if (f->n_lab == cap) ok = false;
            else {
                lbl[cs->rep[x]] = f->n_lab;
                f->ls[f->n_lab++] = cs->rep[x];
            }
        }
        size_t at = (size_t)l * nc;
        ok = ok && check_orbit(cs, u, lbl, code + at, lo + at, lim + at, first + at, &len[l], &ends[l], &acc_from[l]);
        /* where the rule may end, a byte that may follow it must end the token there (then
         * no exit flag outlives the byte it was raised at: see acc_points below) */
        uint32_t rule = g->t.state_rule[cs->st[s_local]];
        for (int b = 0; ok && acc_from[l] != NONE && b < 256; b++)
            ok = !cm_follows(g, rule, (uint8_t)b) || code[at + g->t.byte_class[b]] == CODE_DEAD;
    }
    if (ok) {
        f->budget = len[0] - 1;
        f->n_key = 2 + (size_t)f->n_lab * (2 + 3 * 256);
        f->key = malloc(f->n_key * sizeof *f->key);
        f->lam = malloc((size_t)f->n_lab * 256 * sizeof *f->lam);
        f->to = malloc((size_t)f->n_lab * 256 * sizeof *f->to);
        f->aam = malloc((size_t)f->n_lab * sizeof *f->aam);
        ok = f->key && f->lam && f->to && f->aam;
    }
    if (ok) {
        uint32_t *k = f->key, B = f->budget;
        *k++ = CM_CHAIN_MARK;
        *k++ = f->n_lab;
        for (uint32_t l = 0; l < f->n_lab; l++) {
            *k++ = ends[l] ? len[l] - 1 - B : (uint32_t)END_NONE;
            *k++ = acc_from[l] == NONE ? ACC_NEVER : acc_from[l] == 0 ? ACC_ALWAYS : ACC_FROM;
            f->aam[l] = acc_from[l] == NONE || acc_from[l] == 0 ? NO_LAM : (int32_t)((int64_t)acc_from[l] - B);
            for (int b = 0; b < 256; b++) {  /* by byte: the key is the vocabulary's too (loopstore.c) */
                size_t c = (size_t)l * nc + g->t.byte_class[b];
                *k++ = code[c];
                *k++ = code[c] == CODE_DEAD ? 0 : lim[c] - B;  /* delta */
                *k++ = lo[c] > 0;  /* lo itself is the position's (f->lam), not the walk's */
                f->lam[(size_t)l * 256 + b] = lo[c] > 0 ? (int32_t)((int64_t)lo[c] - B) : NO_LAM;
                f->to[(size_t)l * 256 + b] = code[c] == CODE_OUT ? first[c] : -1;
            }
        }
        f->head = malloc(((size_t)B + 1) * sizeof *f->head);
        ok = f->head != NULL;
        uint32_t j = 0;
        for (uint32_t x = f->ls[0]; ok && x != NONE; x = cs->sig[x]) f->head[j++] = cs->st[x];
        for (uint32_t l = 0; l < f->n_lab; l++) f->ls[l] = cs->st[f->ls[l]];  /* labels -> states */
    }
    free(lbl);
    free(code);
    free(lim);
    free(lo);
    free(first);
    if (!ok) form_free(f);
    return ok;
}

/* ---- the shared walk ---- */

typedef struct chain_exit {
    uint32_t k, k_end, depth, label;
    int32_t need;
    uint32_t shift;             /* the shift it leaves at (its lo, if any, is the position's) */
    uint8_t byte;
} chain_exit;

typedef struct chain_node {    /* a trie node standing at a representative whose orbit ends accepting */
    int32_t budget, need;       /* the budget at which it is the end; the need of its prefix */
    uint32_t k, k_end;          /* the subtree of its next byte */
    uint8_t byte;
} chain_node;

/* A chain analysed from its position `head[0]`: position head[i] has the same
 * model with budget - i (every check covered its states too: they are the
 * orbits' later states), so its entry needs no analysis of its own.  The
 * representatives' out targets are the same all along their orbits. */
typedef struct chain_inst {
    uint32_t budget;
    int32_t *lam, *to;          /* [n_lab * 256] chain_form's */
    int32_t *aam;               /* [n_lab] chain_form's */
    uint32_t *head;             /* [n_head]: budget + 1, or fewer for a chain's prefix (prefix_first) */
    uint32_t n_head;
    int64_t past;               /* past_threshold's answer, once past_known */
    bool past_known;
    uint32_t n_lab;             /* chain_form's: lam and to hold n_lab * 256, aam n_lab */
} chain_inst;

/* What one walk of the trie through U found: immutable once built, and shared
 * (counted references) by the vocabulary's store and every grammar that uses
 * it, so a chain whose walk the vocabulary keeps costs no copy (its nodes are
 * most of the trie's, megabytes). */
typedef struct chain_walk {
    atomic_size_t refs;
    uint32_t *ids;              /* tokens that end inside U, by need ascending */
    int32_t *need;
    uint32_t n_ids;
    /* level j < n_levels - 1: the tokens of need <= min_need + j (those of budget
     * min_need + j + 1); the last level: every token; [n_levels * n_words], and
     * how many each.  Once the levels are built, ids / need keep only the
     * n_suffix tokens the levels before the last lack (the greatest needs). */
    uint32_t *levels, *level_count, n_levels, n_suffix;
    int32_t min_need;
    chain_exit *exits;
    size_t n_exits, cap_exits;
    chain_node *nodes;          /* by budget ascending, then trie order */
    size_t n_nodes, cap_nodes;
    /* trie nodes at depth >= 1 standing at a representative whose orbit may end the rule,
     * their next byte dead there (trie order): where that byte follows the rule, the
     * subtree is uncertain at the positions where the node is alive and accepting */
    chain_exit *accs;
    size_t n_accs, cap_accs;
    /* the greatest need of a token, exit, acc point or end node's budget that some budget
     * below CM_CHAIN_MAX sees (-1: none): every budget above it has the same entry */
    int32_t max_need;
    /* A plain block's walk (ranged_key) keeps what its wrapping positions' splits read
     * (gather_ranges): the subtrees that die in U after at least one whole unit
     * (trie order), the trie entry of each suffix token (ks[i] of ids[i]), and the bytes
     * alive at label 0.  NULL / 0 / false for other forms. */
    struct chain_die *dies;
    size_t n_dies, cap_dies;
    /* and its end nodes by budget: those whose byte is alive at label 0 (every grammar's
     * position takes them: ranges_apply) as their tokens, all[all_off[B] .. all_off[B + 1]) in
     * trie order for budget B <= max_budget; the others (the byte dies there: taken where it
     * follows the rule) as edges, by budget then trie order */
    uint32_t *all, *all_off;
    int32_t max_budget;
    struct chain_run *edges;
    size_t n_edges;
    uint32_t *ks;
    uint32_t first_bytes[8];
    bool ranged;
} chain_walk;

typedef struct chain_run {
    int32_t budget;
    uint32_t k, k_end;
    uint8_t byte;
} chain_run;

/* A subtree of the trie that dies in a plain block's U at a byte read after `units` >= 1
 * whole units (the boundaries 1 .. units all stand before it); `at_end`: the byte is read
 * at a boundary itself (label 0), so the end node of budget `units` has it as its byte. */
typedef struct chain_die {
    uint32_t k, k_end;
    int32_t units;
    uint8_t byte, at_end;
} chain_die;

/* The uncertain tokens of an end node or an acc point (a trie subtree) that the
 * filter keeps, by rule: the same at every position where the node is alive
 * (see kept_of), so each is filtered once, not once a position. */
typedef struct kept_slot {
    uint64_t key;               /* 0: empty */
    uint32_t off, n;            /* in pool */
} kept_slot;

/* What chain_assemble gives every position of a rule past every need (assemble_past), by the
 * labels whose orbits accept from their start (aam NO_LAM): the uncertain list and whether it
 * was filtered (the bits are the last level's, taken again by accepted_at). */
typedef struct past_entry {
    uint32_t rule, n_lab;
    uint32_t open[(CM_CHAIN_LABELS + 31) / 32];
    uint32_t *unc;
    size_t n_unc;
    bool filtered;
} past_entry;

#define EXIT_NEW (-1)  /* exit_slot.to: not walked yet */
#define EXIT_NONE (-2) /* not kept: walked each time */

/* A chain position's exit walked and kept for its rule (push_exits). */
typedef struct exit_slot {
    int32_t to;                 /* the target it was walked from, or EXIT_NEW / EXIT_NONE */
    uint32_t n_acc;             /* the walk's accepted tokens: their ids at xpool[ids_off] */
    uint32_t ids_off, unc_off, n_unc, kept_off, n_kept;
    bool has_kept;              /* kept_off / n_kept: what the filter keeps of the n_unc */
} exit_slot;

typedef struct exit_group {    /* one rule's exits of the walk, by the walk's exit index */
    uint32_t rule;
    exit_slot *slot;            /* [n_exits]; NULL until the rule's second position */
} exit_group;

struct cm_chain_data {
    chain_walk *w;              /* shared */
    size_t n_entries;           /* entries taken from it (under the cache lock) */
    bool from_vocab;            /* taken from the vocabulary's store */
    chain_inst *insts;          /* the chains analysed with this form (this grammar's) */
    size_t n_insts, cap_insts;
    kept_slot *kept;            /* open addressing, [cap_kept] (a power of two) */
    size_t n_kept, cap_kept;
    uint32_t *pool;
    size_t n_pool, cap_pool;
    uint8_t plain;              /* plain_block's answer: 0 not asked yet, 1 yes, 2 no */
    struct past_entry *past;    /* the assembled lists of positions past every need (assemble_past) */
    size_t n_past, cap_past;
    /* the wrap split of the entry push_wrapping built last, for cm_chain_wrap to take over
     * (split_bits NULL: no token wraps); has_split false once taken */
    bool has_split;
    uint32_t split_state;
    int64_t split_B, split_b2;
    size_t split_n_unc;
    uint32_t *split_bits, *split_rest;
    uint32_t n_split_rest;
    struct bytes_memo *bmemo;   /* string starts analysed with this chain (bytes_recall) */
    size_t n_bmemo;
    /* the exits' walks and the tokens the filter keeps of them, by rule and exit, their lists
     * in xpool (push_exits) */
    struct exit_group *xg;
    size_t n_xg, cap_xg;
    uint32_t *xpool;
    size_t n_xpool, cap_xpool;
};

/* A string start whose byte walk (cm_chain_bytes) chain_first analysed: the state and its
 * instance in the chain's insts, for a state that reads alike to take (bytes_recall). */
typedef struct bytes_memo {
    uint32_t state, inst;
} bytes_memo;

#define CM_BYTES_MEMOS 16 /* kept a chain (a schema's string bounds and their copies: a few) */

static void split_drop(cm_chain_data *cd) {
    free(cd->split_bits);
    free(cd->split_rest);
    cd->split_bits = cd->split_rest = NULL;
    cd->has_split = false;
}

static void chain_walk_release(chain_walk *cw) {
    if (!cw || atomic_fetch_sub(&cw->refs, 1) != 1) return;
    free(cw->ids);
    free(cw->need);
    free(cw->levels);
    free(cw->level_count);
    free(cw->exits);
    free(cw->nodes);
    free(cw->accs);
    free(cw->dies);
    free(cw->all);
    free(cw->all_off);
    free(cw->edges);
    free(cw->ks);
    free(cw);
}

void cm_chain_data_free(cm_chain_data *cd) {
    if (!cd) return;
    chain_walk_release(cd->w);
    for (size_t i = 0; i < cd->n_insts; i++) {
        free(cd->insts[i].head);
        free(cd->insts[i].lam);
        free(cd->insts[i].to);
        free(cd->insts[i].aam);
    }
    free(cd->insts);
    for (size_t i = 0; i < cd->n_past; i++) free(cd->past[i].unc);
    free(cd->past);
    free(cd->kept);
    free(cd->pool);
    split_drop(cd);
    free(cd->bmemo);
    for (size_t i = 0; i < cd->n_xg; i++) free(cd->xg[i].slot);
    free(cd->xg);
    free(cd->xpool);
    free(cd);
}

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return CM_OK;
    return cm_grow_to(p, cap, n + 1, elem);
}

typedef struct walk_tabs {
    uint16_t *code;             /* [n_lab * 256] by byte */
    int32_t *delta;             /* [n_lab * 256] */
    int32_t *end;               /* [n_lab] end - B, or END_NONE */
    uint8_t *acc;               /* [n_lab] ACC_* */
} walk_tabs;

static int walk_tables(const chain_form *f, walk_tabs *wt) {
    wt->code = malloc((size_t)f->n_lab * 256 * sizeof *wt->code);
    wt->delta = malloc((size_t)f->n_lab * 256 * sizeof *wt->delta);
    wt->end = malloc((size_t)f->n_lab * sizeof *wt->end);
    wt->acc = malloc(f->n_lab);
    if (!wt->code || !wt->delta || !wt->end || !wt->acc) return CM_ERR_NOMEM;
    const uint32_t *k = f->key + 2;
    for (uint32_t l = 0; l < f->n_lab; l++) {
        wt->end[l] = (int32_t)*k++;
        wt->acc[l] = (uint8_t)*k++;
        for (int b = 0; b < 256; b++, k += 3) {
            wt->code[(size_t)l * 256 + b] = (uint16_t)k[0];
            wt->delta[(size_t)l * 256 + b] = (int32_t)k[1];
        }
    }
    return CM_OK;
}

static int32_t max32(int32_t a, int32_t b) { return a > b ? a : b; }

/* A form (its key) of one accepting end, at the end of label 0's own orbit, no exits, and
 * every transition alive to the end of its orbit (delta 0): a block of x^b (plain_block). */
static bool plain_key(const uint32_t *key) {
    const uint32_t *k = key + 2;
    for (uint32_t l = 0; l < key[1]; l++) {
        if (*k++ != (l == 0 ? 0u : (uint32_t)END_NONE) || *k++ != ACC_NEVER) return false;
        for (int b = 0; b < 256; b++, k += 3)
            if (k[0] == CODE_OUT || (k[0] != CODE_DEAD && (k[1] != 0 || k[2] != 0))) return false;
    }
    return true;
}

/* A plain block whose units are whole trips from label 0 back to it: every transition into
 * label 0 shifts by one and every other shifts by none.  Then after d bytes read alive from
 * label 0, the shift k counts the boundaries passed, a token stands at label 0 exactly at
 * them, and its prefix's need is k - 1 there: each boundary d >= 1 before its last byte is an
 * end node of budget k.  So a position of budget B holds uncertain (the end nodes of budget
 * B) the tokens that end inside U with need >= B and those that die in U after reading at
 * least B units, and takes the latter from the walk's list of such subtrees
 * (gather_ranges).  Where it holds, the walk keeps that list (ranged). */
static bool ranged_key(const uint32_t *key, uint32_t *first_bytes) {
    if (!plain_key(key)) return false;
    const uint32_t *k = key + 2;
    memset(first_bytes, 0, 8 * sizeof *first_bytes);
    for (uint32_t l = 0; l < key[1]; l++) {
        k += 2;
        for (int b = 0; b < 256; b++, k += 3) {
            if (k[0] == CODE_DEAD) continue;
            uint32_t to = k[0] & 0xff, shift = k[0] >> 8;
            if (shift > 1 || (shift == 1) != (to == 0)) return false;
            if (l == 0) first_bytes[b >> 5] |= 1u << (b & 31);
        }
    }
    return true;
}

/* A need as recorded: every budget is in [0, CM_CHAIN_MAX), so needs below 0 all
 * mean "alive at any budget" and needs from CM_CHAIN_MAX on "at none" (this
 * keeps the sorts' key ranges small). */
static int32_t clamp_need(int64_t n) { return n < -1 ? -1 : n > CM_CHAIN_MAX ? CM_CHAIN_MAX : (int32_t)n; }

/* The bulk take.  A chain's walk reads every trie entry its first bytes open
 * (o6193's `^[0-9a-zA-Z_-]{1,255}$`: ~36 k tokens of Llama-3, ~3.5 M
 * instructions), though most are made only of bytes X on which label 0 loops
 * back to itself with one shift s and one delta D: such an entry stays at label
 * 0 all along, k = i * s before its byte i, so it ends inside with
 *     need = max over its bytes of clamp(i * s - D) = clamp((len - 1) * s - D),
 * no exit, no acc point (those are at dead bytes) and no end node where label 0's
 * orbit does not end (or ends accepting: acc points then).  The vocabulary's byte
 * features (tokclass.c) give the entries holding a feature not wholly in X
 * (`outside`); the others are taken by their length in trie order, the rest
 * walked as before from the prefix they share with the entry walked before
 * them (the least common prefix of the entries between).  An exit's, a dead
 * byte's or an end node's subtree holds a byte outside X in every entry, so the
 * same ids, needs, exits, nodes and acc points come, in the same order. */

/* A chain whose bytes X open fewer entries walks them all (the features' OR
 * costs ~50-150 k instructions at Llama-3; a narrow X's walk skips most
 * subtrees at their first byte): as loops.c's CM_TC_MIN_ENTRIES.  So does one
 * whose entries made of X only are fewer than that or than a quarter of those
 * X opens (arithmetic.gbnf's `ws ::= [ \t]{0,8}`: the ' ' subtree is nearly all
 * walked either way, and the take cost its masks +9 % at p99). */
#define CM_CHAIN_TC_MIN_ENTRIES 2048

static atomic_size_t g_bulk_takes;

size_t cm_chain_bulk_takes(void) { return atomic_load(&g_bulk_takes); }

typedef struct bulk_take {
    uint32_t *outside;          /* by trie entry: read through U; NULL: every entry is */
    int64_t s, d;               /* label 0's shift and delta on X */
    size_t n_in;                /* entries not outside: taken in bulk */
} bulk_take;

/* The first entry of [lo, hi) (trie entries starting with one byte, sorted by
 * their bytes) whose second byte is c or more (the one-byte entry sorts first). */
static size_t second_byte_from(const cm_vocab *v, size_t lo, size_t hi, int c) {
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t o = v->trie_off[mid];
        if (v->trie_off[mid + 1] - o < 2 || v->trie_data[o + 1] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* At least as many entries as are made only of the bytes X (n of them, at most
 * CM_CHAIN_X_SMALL): their first two bytes are in X, or they are one byte long.
 * Before the features' OR, which costs more than a small X's walk saves. */
#define CM_CHAIN_X_SMALL 16
static size_t x_only_bound(const cm_vocab *v, const uint32_t *x) {
    size_t n = 0;
    for (int b = 0; b < 256; b++) {
        if (!(x[b >> 5] >> (b & 31) & 1)) continue;
        size_t lo = v->first_off[b], hi = v->first_off[b + 1];
        n += lo < hi && v->trie_off[lo + 1] - v->trie_off[lo] == 1;  /* the entry b itself */
        for (int c = 0; c < 256; c++)
            if (x[c >> 5] >> (c & 31) & 1)
                n += second_byte_from(v, lo, hi, c + 1) - second_byte_from(v, lo, hi, c);
    }
    return n;
}

static bool self_loop(uint16_t code) { return code != CODE_DEAD && code != CODE_OUT && (code & 0xff) == 0; }

/* X of label 0 (the self-loop bytes of its most common shift and delta) and the
 * entries outside it, when a bulk take applies and pays (mode 2: wherever it
 * applies); else outside NULL. */
static bulk_take chain_bulk(const cm_vocab *v, const walk_tabs *wt) {
    bulk_take bt = {NULL, 0, 0, 0};
    int mode = cm_tokclass_mode();
    if (!mode || (wt->end[0] != END_NONE && !wt->acc[0])) return bt;  /* end nodes at label 0 */
    uint32_t best = 0, n_self = 0, x[8] = {0};
    uint16_t pick = 0;
    for (int b = 0; b < 256; b++) n_self += self_loop(wt->code[b]);
    for (int b = 0; b < 256 && best * 2 <= n_self; b++) {  /* the (shift, delta) of the most self-loop bytes */
        uint16_t c = wt->code[b];
        if (!self_loop(c)) continue;
        uint32_t n = 0;
        for (int b2 = b; b2 < 256; b2++) n += wt->code[b2] == c && wt->delta[b2] == wt->delta[b];
        if (n > best) best = n, pick = (uint16_t)b;
    }
    if (!best) return bt;
    uint32_t opened = 0;
    for (int b = 0; b < 256; b++)
        if (wt->code[b] == wt->code[pick] && wt->delta[b] == wt->delta[pick]) {
            x[b >> 5] |= 1u << (b & 31);
            opened += v->first_off[b + 1] - v->first_off[b];
        }
    bool in[CM_TC_FEATURES];
    if ((mode == 1 && opened < CM_CHAIN_TC_MIN_ENTRIES) || !cm_tokclass_inside(x, false, in)) return bt;
    if (mode == 1 && best <= CM_CHAIN_X_SMALL && x_only_bound(v, x) < CM_CHAIN_TC_MIN_ENTRIES) return bt;
    const cm_tokclass *tc = cm_tokclass_of(v);
    if (!tc || !(bt.outside = malloc((tc->n_words ? tc->n_words : 1) * sizeof *bt.outside))) return bt;
    cm_tokclass_union(tc, in, false, 0, tc->n_words, bt.outside);
    bt.n_in = v->n_trie - cm_count_bits(bt.outside, (v->n_trie + 31) / 32);
    if (mode == 1 && (bt.n_in < CM_CHAIN_TC_MIN_ENTRIES || bt.n_in * 4 < opened)) {
        free(bt.outside);  /* X's own entries are few (`ws ::= [ \t]{0,8}`): walked, not taken */
        bt.outside = NULL;
        return bt;
    }
    bt.s = wt->code[pick] >> 8;
    bt.d = wt->delta[pick];
    atomic_fetch_add(&g_bulk_takes, 1);
    return bt;
}

/* How many entries from k on are not in `outside` (of n). */
static size_t inside_run(const uint32_t *outside, size_t k, size_t n) {
    size_t i = k;
    while (i < n) {
        uint32_t w = outside[i >> 5] >> (i & 31);
        if (w) return (i + (size_t)__builtin_ctz(w) < n ? i + (size_t)__builtin_ctz(w) : n) - k;
        i = (i | 31) + 1;
    }
    return n - k;
}

/* The entries taken in bulk listed by need (issue 12, session 37, helper `patstart`): an entry
 * taken in bulk is made of X only, so its first byte is in X and its need, clamp((len - 1) * s
 * - D), grows with its length (s >= 0).  So instead of copying each run of them in trie order,
 * each with its need, for chain_sort's counting sort of every id (with the needs' range, ~25
 * instructions an id, ~1 M at o6193's `^[0-9a-zA-Z_-]{1,255}$`), the walk skips the runs and
 * then lists them by length from the vocabulary's entries of each first byte by length
 * (tokclass.c's by_len), X's first bytes only: already by need, after the walked ids, which
 * chain_sort sorts alone and merges with them.  Within one need the order differs from trie
 * order, which nothing reads (the levels are sets; accepted_at clears the suffix's ids of need
 * >= B whatever their order).  Off: cm_chain_bulk_by_len_enable(0). */
static atomic_int g_bulk_by_len = 1;
static atomic_size_t g_bulk_listed;

void cm_chain_bulk_by_len_enable(int on) { atomic_store(&g_bulk_by_len, on); }

/* Where the vocabulary holds X's class table (flat.c, made by a flat walk's count of X: o61627's
 * UUID), its X-only ids by length are this listing, in the same order (by length, then first
 * byte, then by_len), so bulk_by_len copies each length's run instead of filtering X's entries
 * one by one through `outside` (~20 instructions an entry, ~0.2 M a chain of [0-9A-Za-z] at
 * Llama-3).  Off: cm_chain_class_ids_enable(0), the filter. */
static atomic_int g_class_ids = 1;
static atomic_size_t g_class_ids_taken;

void cm_chain_class_ids_enable(int on) { atomic_store(&g_class_ids, on); }
size_t cm_chain_class_ids_taken(void) { return atomic_load(&g_class_ids_taken); }

size_t cm_chain_bulk_listed(void) { return atomic_load(&g_bulk_listed); }

/* bulk_by_len from the vocabulary's class table of X (x: X's first bytes that open entries), where
 * it holds one: each length's run copied; false (nothing written) where not. */
static __attribute__((noinline)) bool class_ids_by_len(const cm_vocab *v, const bulk_take *bt, const uint32_t *x,
                                                       uint32_t *ids, int32_t *need, size_t n_w) {
    uint32_t c_top;
    const uint32_t *c_ids, *c_at;
    if (!cm_flat_class_ids(v, x, &c_ids, &c_at, &c_top) || c_at[c_top] != bt->n_in) return false;
    size_t o = 0, i = bt->n_in, w_end = bt->n_in + n_w;
    for (uint32_t L = 1; L <= c_top; L++) {
        int32_t nd = clamp_need((int64_t)(L - 1) * bt->s - bt->d);
        for (; i < w_end && need[i] < nd; i++, o++) ids[o] = ids[i], need[o] = need[i];
        uint32_t n_run = c_at[L] - c_at[L - 1];  /* written before the walked ids still to read */
        memcpy(ids + o, c_ids + c_at[L - 1], n_run * sizeof *ids);
        for (uint32_t j = 0; j < n_run; j++) need[o + j] = nd;
        o += n_run;
    }
    for (; i < w_end; i++, o++) ids[o] = ids[i], need[o] = need[i];
    atomic_fetch_add_explicit(&g_class_ids_taken, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_bulk_listed, 1, memory_order_relaxed);
    return true;
}

/* ids[0..n_in + n_w) := the entries not `outside` whose first byte is in X (label 0's bytes of
 * shift s and delta d), by length (each length's need), merged by need with the walked ids
 * ids[n_in..n_in + n_w) (sorted by need): one list by need, written from the front (never past
 * what is still to read: at most n_in entries are listed). */
static int bulk_by_len(const cm_vocab *v, const cm_tokclass *tc, const walk_tabs *wt, const bulk_take *bt,
                       uint32_t *ids, int32_t *need, size_t n_w) {
    if (atomic_load_explicit(&g_class_ids, memory_order_relaxed)) {
        uint32_t x[8] = {0};
        for (int b = 0; b < 256; b++)
            if (self_loop(wt->code[b]) && (wt->code[b] >> 8) == bt->s && wt->delta[b] == bt->d &&
                tc->len_base[b + 1] != tc->len_base[b])
                x[b >> 5] |= 1u << (b & 31);
        if (class_ids_by_len(v, bt, x, ids, need, n_w)) return CM_OK;
    }
    uint8_t xs[256];
    uint32_t n_x = 0, top = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t n_len = tc->len_base[b + 1] - tc->len_base[b];
        if (!self_loop(wt->code[b]) || (wt->code[b] >> 8) != bt->s || wt->delta[b] != bt->d || !n_len) continue;
        xs[n_x++] = (uint8_t)b;
        if (n_len - 1 > top) top = n_len - 1;
    }
    const uint32_t *outside = bt->outside, *by_len = tc->by_len, *tids = v->trie_ids;
    size_t o = 0, i = bt->n_in, w_end = bt->n_in + n_w, listed = 0, n_in = bt->n_in;
    for (uint32_t L = 1; L <= top; L++) {
        int32_t nd = clamp_need((int64_t)(L - 1) * bt->s - bt->d);
        for (; i < w_end && need[i] < nd; i++, o++) ids[o] = ids[i], need[o] = need[i];
        for (uint32_t x = 0; x < n_x; x++) {
            uint32_t base = tc->len_base[xs[x]], n_len = tc->len_base[xs[x] + 1] - base;
            if (L >= n_len) continue;
            for (uint32_t j = tc->len_at[base + L - 1], e = tc->len_at[base + L]; j < e; j++) {
                uint32_t k = by_len[j];
                if (outside[k >> 5] >> (k & 31) & 1) continue;
                if (listed++ == n_in) return CM_ERR_ARG;  /* cannot happen: n_in counts them */
                ids[o] = tids[k];
                need[o++] = nd;
            }
        }
    }
    for (; i < w_end; i++, o++) ids[o] = ids[i], need[o] = need[i];
    if (listed != n_in) return CM_ERR_ARG;  /* cannot happen: X's entries are all of them */
    atomic_fetch_add(&g_bulk_listed, 1);
    return CM_OK;
}

/* The trie through U from label 0: tokens inside with their need, exits, end nodes.  Where the
 * entries taken in bulk are to be listed by need (bulk_by_len), they are left out of the ids and
 * *keep is their take (its outside the caller's to free), else keep->outside is NULL. */
static int walk_trie(const cm_grammar *g, const walk_tabs *wt, chain_walk *cd, bulk_take *keep) {
    const cm_vocab *v = g->v;
    size_t depths = (size_t)v->max_len + 1, cap_ids = 0;
    uint32_t *st = malloc(depths * sizeof *st), *kk = malloc(depths * sizeof *kk);
    int32_t *nd = malloc(depths * sizeof *nd);
    int rc = st && kk && nd ? CM_OK : CM_ERR_NOMEM;
    const uint8_t *data = v->trie_data;
    const uint64_t *toff = v->trie_off;
    const uint32_t *lcp = v->trie_lcp, *skip = v->skip;
    bulk_take bt = rc || cd->ranged ? (bulk_take){NULL, 0, 0, 0} : chain_bulk(v, wt);
    const uint32_t *outside = bt.outside;
    const cm_tokclass *tc = outside && atomic_load(&g_bulk_by_len) ? cm_tokclass_of(v) : NULL;
    size_t k = 0, prev = SIZE_MAX;  /* the entry walked last, to depth pv */
    uint32_t pv = 0;
    if (outside && !rc) {  /* room for the entries taken and as many again walked, at once */
        size_t n_in = tc ? 0 : bt.n_in;
        size_t c1 = 0, c2 = 0;
        rc = cm_grow_to((void **)&cd->ids, &c1, 2 * n_in + 64, sizeof *cd->ids);
        if (!rc) rc = cm_grow_to((void **)&cd->need, &c2, 2 * n_in + 64, sizeof *cd->need);
        cap_ids = c1 < c2 ? c1 : c2;
    }
    if (!rc) {
        st[0] = 0;
        kk[0] = 0;
        nd[0] = -1;
    }
    while (k < v->n_trie && !rc) {
        size_t run = outside ? inside_run(outside, k, v->n_trie) : 0;  /* entries of X only from k */
        if (cd->n_ids + run + 1 > cap_ids) {
            size_t c1 = cap_ids, c2 = cap_ids, c3 = cap_ids;
            rc = cm_grow_to((void **)&cd->ids, &c1, cd->n_ids + run + 1, sizeof *cd->ids);
            if (!rc) rc = cm_grow_to((void **)&cd->need, &c2, cd->n_ids + run + 1, sizeof *cd->need);
            if (!rc && cd->ranged) rc = cm_grow_to((void **)&cd->ks, &c3, cd->n_ids + run + 1, sizeof *cd->ks);
            if (rc) break;
            cap_ids = c1 < c2 ? c1 : c2;
            if (cd->ranged && c3 < cap_ids) cap_ids = c3;
        }
        if (run && tc) {  /* listed by need after the walk */
            k += run;
            if (k >= v->n_trie) break;
        } else if (run) {  /* accepted, each its need by its length */
            uint32_t *ids = cd->ids + cd->n_ids;
            int32_t *need = cd->need + cd->n_ids;
            memcpy(ids, v->trie_ids + k, run * sizeof *ids);
            for (size_t i = 0; cd->ranged && i < run; i++) cd->ks[cd->n_ids + i] = (uint32_t)(k + i);
            for (size_t i = 0; i < run; i++) {  /* (a trie entry is not empty) */
                need[i] = clamp_need((int64_t)(toff[k + i + 1] - toff[k + i] - 1) * bt.s - bt.d);
            }
            cd->n_ids += (uint32_t)run;
            k += run;
            if (k >= v->n_trie) break;
        }
        uint32_t d = lcp[k], len = (uint32_t)(toff[k + 1] - toff[k]);
        const uint8_t *p = data + toff[k];
        if (run) {  /* the prefix shared with the entry walked before (to depth pv), if any */
            uint32_t m = prev == SIZE_MAX ? 0 : d < pv ? d : pv;
            const uint8_t *q = prev == SIZE_MAX ? p : data + toff[prev];
            for (d = 0; d < m && p[d] == q[d];) d++;
        }
        prev = k;
        for (; d < len && !rc; d++) {
            uint32_t l = st[d];
            size_t at = (size_t)l * 256 + p[d];
            int64_t budget = (int64_t)kk[d] - wt->end[l];
            if (wt->end[l] != END_NONE && !wt->acc[l] && d >= 1 && budget >= 0 && budget < CM_CHAIN_MAX &&
                nd[d] < budget) {
                rc = grow((void **)&cd->nodes, &cd->cap_nodes, cd->n_nodes, sizeof *cd->nodes);
                if (rc) break;
                cd->nodes[cd->n_nodes++] = (chain_node){(int32_t)budget, nd[d], (uint32_t)k,
                                                        skip[toff[k] + d], p[d]};
            }
            uint16_t code = wt->code[at];
            if (code == CODE_DEAD || code == CODE_OUT) {
                size_t end = skip[toff[k] + d];
                if (code == CODE_DEAD && cd->ranged && d >= 1 && kk[d] >= 1 && kk[d] < CM_CHAIN_MAX) {
                    rc = grow((void **)&cd->dies, &cd->cap_dies, cd->n_dies, sizeof *cd->dies);
                    if (rc) break;
                    cd->dies[cd->n_dies++] =
                        (chain_die){(uint32_t)k, (uint32_t)end, (int32_t)kk[d], p[d], (uint8_t)(l == 0)};
                }
                if (code == CODE_DEAD && wt->acc[l] && d >= 1 && nd[d] < CM_CHAIN_MAX) {
                    rc = grow((void **)&cd->accs, &cd->cap_accs, cd->n_accs, sizeof *cd->accs);
                    if (!rc) cd->accs[cd->n_accs++] = (chain_exit){(uint32_t)k, (uint32_t)end, d, l, nd[d], kk[d], p[d]};
                }
                if (code == CODE_OUT) {
                    rc = grow((void **)&cd->exits, &cd->cap_exits, cd->n_exits, sizeof *cd->exits);
                    if (!rc)
                        cd->exits[cd->n_exits++] = (chain_exit){
                            (uint32_t)k, (uint32_t)end, d, l, max32(nd[d], clamp_need((int64_t)kk[d] - wt->delta[at])),
                            kk[d], p[d]};
                }
                k = end;
                break;
            }
            st[d + 1] = code & 0xff;
            kk[d + 1] = kk[d] + (code >> 8);
            nd[d + 1] = max32(nd[d], clamp_need((int64_t)kk[d] - wt->delta[at]));
        }
        pv = d;
        if (rc || d < len) continue;
        if (cd->ranged) cd->ks[cd->n_ids] = (uint32_t)k;
        cd->ids[cd->n_ids] = v->trie_ids[k++];
        cd->need[cd->n_ids++] = nd[len];
    }
    *keep = (bulk_take){NULL, 0, 0, 0};
    if (tc) *keep = bt;
    else free(bt.outside);
    free(st);
    free(kk);
    free(nd);
    return rc;
}

#define CM_CHAIN_SUFFIX 4096  /* past the levels, at most this many tokens of a greater need */

/* The accepted tokens of each budget as bitsets (levels), for the budgets
 * up to the first one where no more than CM_CHAIN_SUFFIX tokens are missing
 * from the last level, which holds every token: a greater budget takes the
 * last level less those few (the ids are by need). */
static int chain_levels(const cm_grammar *g, chain_walk *cd) {
    if (!cd->n_ids) return CM_OK;
    cd->min_need = cd->need[0];
    uint32_t n = cd->n_ids, cut = n > CM_CHAIN_SUFFIX ? n - CM_CHAIN_SUFFIX : 0;  /* ids[cut..n): the suffix */
    while (cut > 0 && cut < n && cd->need[cut - 1] == cd->need[cut]) cut--;  /* a level's start */
    /* budgets need[0] + 1 + j for j < J have a level of their own, ids[0..cut) */
    size_t n_lev = (size_t)((int64_t)cd->need[cut] - cd->need[0]) + 1, nw = g->n_words;
    cd->levels = malloc(n_lev * nw * sizeof *cd->levels);
    cd->level_count = malloc(n_lev * sizeof *cd->level_count);
    if (!cd->levels || !cd->level_count) return CM_ERR_NOMEM;
    uint32_t *cur = cd->levels, i = 0;
    memset(cur, 0, nw * sizeof *cur);
    for (size_t j = 0; j + 1 < n_lev; j++) {
        if (j) memcpy(cur + nw, cur, nw * sizeof *cur), cur += nw;
        for (; i < cut && cd->need[i] <= cd->need[0] + (int32_t)j; i++) cm_set_bit(cur, cd->ids[i]);
        cd->level_count[j] = i;
    }
    if (n_lev > 1) memcpy(cur + nw, cur, nw * sizeof *cur), cur += nw;
    for (; i < n; i++) cm_set_bit(cur, cd->ids[i]);
    cd->level_count[n_lev - 1] = n;
    cd->n_levels = (uint32_t)n_lev;
    cd->n_suffix = n - cut;  /* only the suffix is read from now on */
    memmove(cd->ids, cd->ids + cut, (size_t)(n - cut) * sizeof *cd->ids);
    memmove(cd->need, cd->need + cut, (size_t)(n - cut) * sizeof *cd->need);
    if (cd->ks) memmove(cd->ks, cd->ks + cut, (size_t)(n - cut) * sizeof *cd->ks);
    return CM_OK;
}

/* A stable counting sort of n keys in [lo, lo + span): order[] the positions
 * by key.  False when out of memory. */
static bool counting_order(const int32_t *key, size_t stride, size_t n, int32_t lo, size_t span, uint32_t *order) {
    uint32_t *at = calloc(span + 1, sizeof *at);
    if (!at) return false;
    for (size_t i = 0; i < n; i++) at[*(const int32_t *)((const char *)key + i * stride) - lo + 1]++;
    for (size_t j = 1; j <= span; j++) at[j] += at[j - 1];
    for (size_t i = 0; i < n; i++) order[at[*(const int32_t *)((const char *)key + i * stride) - lo]++] = (uint32_t)i;
    free(at);
    return true;
}

static void key_range(const int32_t *key, size_t stride, size_t n, int32_t *lo, int32_t *hi) {
    *lo = INT32_MAX;
    *hi = INT32_MIN;
    for (size_t i = 0; i < n; i++) {
        int32_t k = *(const int32_t *)((const char *)key + i * stride);
        if (k < *lo) *lo = k;
        if (k > *hi) *hi = k;
    }
}

/* cd->max_need (ids by need, nodes by budget). */
static void walk_max_need(chain_walk *cd) {
    int32_t m = -1;
    for (uint32_t i = cd->n_ids; i > 0 && m < 0; i--)
        if (cd->need[i - 1] < CM_CHAIN_MAX) m = cd->need[i - 1];
    for (size_t i = cd->n_nodes; i > 0; i--)
        if (cd->nodes[i - 1].budget < CM_CHAIN_MAX) {
            m = max32(m, cd->nodes[i - 1].budget);
            break;
        }
    for (size_t i = 0; i < cd->n_exits; i++)
        if (cd->exits[i].need < CM_CHAIN_MAX) m = max32(m, cd->exits[i].need);
    for (size_t i = 0; i < cd->n_accs; i++)
        if (cd->accs[i].need < CM_CHAIN_MAX) m = max32(m, cd->accs[i].need);
    cd->max_need = m;
}

/* A ranged walk's end nodes as gather_ranges reads them (nodes by budget, then trie order;
 * a node whose prefix's need reaches its budget is never taken: gather_nodes reads a node at
 * its own budget only). */
static int ranged_nodes(chain_walk *cd) {
    int32_t top = cd->nodes[cd->n_nodes - 1].budget;
    size_t n_all = 0, n_edges = 0;
    for (size_t i = 0; i < cd->n_nodes; i++) {
        const chain_node *x = &cd->nodes[i];
        if (x->need >= x->budget || x->budget < 0) continue;
        if (cd->first_bytes[x->byte >> 5] >> (x->byte & 31) & 1) n_all += x->k_end - x->k;
        else n_edges++;
    }
    if (top < 0 || n_all >= UINT32_MAX) {  /* (cannot happen: budgets are >= 0, tokens < 2^32) */
        cd->ranged = false;
        return CM_OK;
    }
    cd->all_off = calloc((size_t)top + 2, sizeof *cd->all_off);
    cd->all = malloc((n_all ? n_all : 1) * sizeof *cd->all);
    cd->edges = malloc((n_edges ? n_edges : 1) * sizeof *cd->edges);
    if (!cd->all_off || !cd->all || !cd->edges) return CM_ERR_NOMEM;
    cd->max_budget = top;
    size_t a = 0;
    for (size_t i = 0; i < cd->n_nodes; i++) {
        const chain_node *x = &cd->nodes[i];
        if (x->need >= x->budget || x->budget < 0) continue;
        if (cd->first_bytes[x->byte >> 5] >> (x->byte & 31) & 1)
            for (uint32_t k = x->k; k < x->k_end; k++) cd->all[a++] = k;
        else
            cd->edges[cd->n_edges++] = (chain_run){x->budget, x->k, x->k_end, x->byte};
        cd->all_off[x->budget + 1] = (uint32_t)a;
    }
    for (int32_t b = 1; b <= top + 1; b++)  /* budgets without nodes: empty */
        if (cd->all_off[b] < cd->all_off[b - 1]) cd->all_off[b] = cd->all_off[b - 1];
    return CM_OK;
}

/* ids by need, nodes by budget (both stable), and the accepted tokens of each
 * budget up to the greatest need as bitsets (levels). */
static int chain_sort(const cm_grammar *g, chain_walk *cd, const walk_tabs *wt, const bulk_take *bt) {
    int32_t lo, hi;
    const cm_tokclass *tc = bt->outside ? cm_tokclass_of(g->v) : NULL;
    size_t n_in = tc ? bt->n_in : 0, n_all = n_in + cd->n_ids;  /* the walked ids sorted after the listed */
    if (n_all >= UINT32_MAX) return CM_ERR_LIMIT;
    uint32_t *order = malloc((cd->n_nodes ? cd->n_nodes : 1) * sizeof *order);
    uint32_t *ids = malloc((n_all ? n_all : 1) * sizeof *ids);
    int32_t *need = malloc((n_all ? n_all : 1) * sizeof *need);
    chain_node *nodes = malloc((cd->n_nodes ? cd->n_nodes : 1) * sizeof *nodes);
    uint32_t *ks = cd->ranged ? malloc((cd->n_ids ? cd->n_ids : 1) * sizeof *ks) : NULL;
    int rc = order && ids && need && nodes && (ks || !cd->ranged) ? CM_OK : CM_ERR_NOMEM;
    key_range(cd->need, sizeof *cd->need, cd->n_ids, &lo, &hi);
    if (!rc && cd->n_ids) {  /* a stable counting sort of the ids by need, the needs filled by bucket */
        size_t span = (size_t)(hi - lo) + 1;
        uint32_t *at = calloc(span + 1, sizeof *at), n = cd->n_ids;
        const uint32_t *from = cd->ids;
        const int32_t *key = cd->need;
        if (at) {
            for (uint32_t i = 0; i < n; i++) at[key[i] - lo + 1]++;
            for (size_t j = 1; j <= span; j++) {
                for (uint32_t i = at[j - 1]; i < at[j - 1] + at[j]; i++) need[n_in + i] = lo + (int32_t)(j - 1);
                at[j] += at[j - 1];
            }
            for (uint32_t i = 0; i < n; i++) {
                uint32_t to = at[key[i] - lo]++;
                ids[n_in + to] = from[i];
                if (ks) ks[to] = cd->ks[i];
            }
        }
        rc = at ? CM_OK : CM_ERR_NOMEM;
        free(at);
    }
    if (!rc && tc) rc = bulk_by_len(g->v, tc, wt, bt, ids, need, cd->n_ids);
    if (!rc) cd->n_ids = (uint32_t)n_all;
    if (cd->n_nodes) key_range(&cd->nodes[0].budget, sizeof *cd->nodes, cd->n_nodes, &lo, &hi);
    if (!rc && cd->n_nodes &&
        !counting_order(&cd->nodes[0].budget, sizeof *cd->nodes, cd->n_nodes, lo, (size_t)(hi - lo) + 1, order))
        rc = CM_ERR_NOMEM;
    for (size_t i = 0; !rc && i < cd->n_nodes; i++) nodes[i] = cd->nodes[order[i]];
    free(order);
    if (rc) {
        free(ids);
        free(need);
        free(nodes);
        free(ks);
        return rc;
    }
    free(cd->ids);
    free(cd->need);
    free(cd->nodes);
    free(cd->ks);
    cd->ks = ks;
    cd->ids = ids;
    cd->need = need;
    cd->nodes = nodes;
    cd->cap_nodes = cd->n_nodes;
    if (cd->ranged && cd->n_nodes && (rc = ranged_nodes(cd))) return rc;
    walk_max_need(cd);
    return chain_levels(g, cd);
}

static size_t chain_data_bytes(const cm_grammar *g, const chain_walk *cd) {
    return sizeof *cd + (size_t)cd->n_suffix * (cd->ks ? 12 : 8) + cd->n_dies * sizeof *cd->dies +
           (cd->all_off ? ((size_t)cd->max_budget + 2 + cd->all_off[cd->max_budget + 1]) * 4 : 0) +
           cd->n_edges * sizeof *cd->edges +
           cd->n_exits * sizeof *cd->exits +
           cd->n_nodes * sizeof *cd->nodes + cd->n_accs * sizeof *cd->accs + (size_t)cd->n_levels * (g->n_words + 1) * 4;
}

cm_chain_data *cm_chain_data_copy(const cm_grammar *g, const cm_chain_data *src) {
    (void)g;
    cm_chain_data *cd = calloc(1, sizeof *cd);
    if (!cd) return NULL;
    cd->w = src->w;
    atomic_fetch_add(&cd->w->refs, 1);
    return cd;
}

/* The walk of form f, taken from the vocabulary's store or walked (and put there). */
static int chain_data_of(const cm_grammar *g, const chain_form *f, uint64_t h, cm_chain_data **out) {
    int rc = cm_walk_store_get_chain(g, f->key, f->n_key, h, out);
    if (rc > 0) (*out)->from_vocab = true;
    if (rc) return rc < 0 ? rc : CM_OK;
    cm_chain_data *cd = calloc(1, sizeof *cd);
    chain_walk *cw = calloc(1, sizeof *cw);
    walk_tabs wt = {0};
    rc = cd && cw ? walk_tables(f, &wt) : CM_ERR_NOMEM;
    if (cd && cw) {
        atomic_init(&cw->refs, 1);
        cd->w = cw;
    } else {
        free(cw);
    }
    if (!rc) cd->w->ranged = ranged_key(f->key, cd->w->first_bytes);
    bulk_take bt = {NULL, 0, 0, 0};
    if (!rc) rc = walk_trie(g, &wt, cd->w, &bt);
    if (!rc) rc = chain_sort(g, cd->w, &wt, &bt);
    free(bt.outside);
    free(wt.code);
    free(wt.delta);
    free(wt.end);
    free(wt.acc);
    if (rc) {
        cm_chain_data_free(cd);
        return rc;
    }
    cm_walk_store_put_chain(g, f->key, f->n_key, h, cd, chain_data_bytes(g, cd->w) + f->n_key * 4);
    *out = cd;
    return CM_OK;
}

/* ---- a form's key hash kept with its memo (issue 12, session 44) ----
 *
 * A chain's shared walk is looked up (in the grammar's cache, then the vocabulary's store) by a
 * hash of its form's key: 2 + 770 words a label, ~11.5 K words for a JSON string's tail or a
 * Llama-3 block, which one multiply chain a word read in ~32 K instructions (and ~4 cycles a
 * word of latency) at each chain start, after a memo had already served the form.  The key
 * hashed two words at a time in two independent lanes, then mixed; and a memo keeps its key's
 * hash (computed where the memo is made, from the form that made it), which a form renamed from
 * it (memo_match, prefix_match, suffix_match) carries to chain_shared.  A hash only picks where
 * to look: both lookups compare the whole key.  Off: cm_chain_key_hash_memo_enable(0), every
 * lookup hashes its key (the reference the tests compare against). */
static atomic_int g_key_hash_memo = 1;
static atomic_size_t g_key_hash_hits;    /* lookups by a memo's kept hash (the tests read it) */
static atomic_size_t g_key_hash_misses;  /* off: kept hashes found unequal to their key's */

void cm_chain_key_hash_memo_enable(int on) { atomic_store(&g_key_hash_memo, on); }

size_t cm_chain_key_hash_hits(void) { return atomic_load(&g_key_hash_hits); }

size_t cm_chain_key_hash_misses(void) { return atomic_load(&g_key_hash_misses); }

static uint64_t key_hash_of(const uint32_t *key, size_t n) {
    uint64_t a = 0x9E3779B97F4A7C15ULL ^ n, b = 0xC2B2AE3D27D4EB4FULL;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {  /* two lanes of two words each */
        uint64_t x, y;
        memcpy(&x, key + i, sizeof x);
        memcpy(&y, key + i + 2, sizeof y);
        a = (a ^ x) * 0xbf58476d1ce4e5b9ULL;
        b = (b ^ y) * 0x94d049bb133111ebULL;
    }
    for (; i < n; i++) a = (a ^ key[i]) * 0xbf58476d1ce4e5b9ULL;
    uint64_t h = a ^ ((b << 32) | (b >> 32));  /* splitmix64's finish: every bit on every bit */
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

/* The shared walk of form f: found in the cache, else walked and kept there.
 * NULL with *status set on failure (f->key is taken over either way). */
static const cm_loop_walk *chain_shared(const cm_grammar *g, chain_form *f, int *status) {
    cm_cache *cache = g->cache;
    bool kept = f->hashed && atomic_load(&g_key_hash_memo);
    uint64_t h = kept ? f->key_hash : key_hash_of(f->key, f->n_key);
    if (kept) atomic_fetch_add_explicit(&g_key_hash_hits, 1, memory_order_relaxed);
    if (!kept && f->hashed && f->key_hash != h)  /* off, the reference: a kept hash checked */
        atomic_fetch_add_explicit(&g_key_hash_misses, 1, memory_order_relaxed);
    size_t b = CM_CHAIN_BUCKET;
    for (cm_loop_walk *lw = cache->loops[b]; lw; lw = lw->next)
        if (lw->chain && lw->hash == h && lw->n_sig == f->n_key &&
            !memcmp(lw->sig, f->key, f->n_key * sizeof *f->key)) {
            free(f->key);
            f->key = NULL;
            return lw;
        }
    cm_loop_walk *lw = calloc(1, sizeof *lw);
    cm_chain_data *cd = NULL;
    int rc = lw ? chain_data_of(g, f, h, &cd) : CM_ERR_NOMEM;
    if (lw) {
        lw->hash = h;
        lw->n_sig = (uint32_t)f->n_key;
        lw->sig = f->key;
        lw->chain = cd;
        f->key = NULL;
    } else {
        cm_chain_data_free(cd);
        free(f->key);
        f->key = NULL;
    }
    if (rc) {
        cm_loop_walk_free(lw);
        *status = rc;
        return NULL;
    }
    lw->bytes = sizeof *lw + lw->n_sig * 4 + chain_data_bytes(g, cd->w);
    lw->next = cache->loops[b];
    cache->loops[b] = lw;
    atomic_fetch_add(&cache->bytes, lw->bytes);
    return lw;
}

/* ---- one position's entry ---- */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* bits := the tokens that end inside U with need < B (bits zeroed before); how many. */
static uint32_t accepted_at(const cm_grammar *g, const chain_walk *cd, int64_t B, uint32_t *bits) {
    if (!cd->n_ids || B <= cd->min_need) return 0;
    int64_t j = B - 1 - cd->min_need;
    bool last = j >= (int64_t)cd->n_levels - 1;  /* every token but those of need >= B */
    if (last) j = cd->n_levels - 1;
    memcpy(bits, cd->levels + (size_t)j * g->n_words, g->n_words * sizeof *bits);
    uint32_t n = cd->level_count[j];
    for (uint32_t i = cd->n_suffix; last && i > 0 && cd->need[i - 1] >= B; i--, n--)
        bits[cd->ids[i - 1] >> 5] &= ~(1u << (cd->ids[i - 1] & 31));
    return n;
}

/* accepted_at read in place: the level holding the tokens that end inside U with need < B
 * (NULL: none), less the suffix's ids[*from .. n_suffix) (need >= B; none but on the last
 * level, which holds every token).  No copy of the level (n_words words, 16 KB with Llama-3)
 * where a caller asks of a few tokens. */
static const uint32_t *level_below(const cm_grammar *g, const chain_walk *cd, int64_t B, uint32_t *from) {
    *from = cd->n_suffix;
    if (!cd->n_ids || B <= cd->min_need) return NULL;
    int64_t j = B - 1 - cd->min_need;
    if (j >= (int64_t)cd->n_levels - 1) {
        j = cd->n_levels - 1;
        while (*from > 0 && cd->need[*from - 1] >= B) --*from;
    }
    return cd->levels + (size_t)j * g->n_words;
}

/* The trie subtrees a position's entry holds uncertain: the end nodes of budget B
 * and the acc points alive there (an orbit accepting from acc_from on: from shift
 * aam + B on), each where its byte follows the rule (a dead byte: see
 * chain_form_of).  Their index (acc points after the nodes) into *out. */
static int uncertain_items(const cm_grammar *g, uint32_t rule, int32_t B, const int32_t *aam, const chain_walk *cd,
                           uint32_t **out, size_t *n_out) {
    size_t lo = 0, hi = cd->n_nodes, n = 0, cap = 0;  /* the first node of budget B */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cd->nodes[mid].budget < B) lo = mid + 1;
        else hi = mid;
    }
    *out = NULL;
    for (size_t i = lo; i < cd->n_nodes && cd->nodes[i].budget == B; i++) {
        const chain_node *x = &cd->nodes[i];
        if (x->need >= B || !cm_follows(g, rule, x->byte)) continue;
        if (grow((void **)out, &cap, n, sizeof **out)) return CM_ERR_NOMEM;
        (*out)[n++] = (uint32_t)i;
    }
    for (size_t i = 0; i < cd->n_accs; i++) {
        const chain_exit *x = &cd->accs[i];
        int32_t a = aam[x->label];
        if (x->need >= B || (a != NO_LAM && (int64_t)x->shift - a < B) || !cm_follows(g, rule, x->byte)) continue;
        if (grow((void **)out, &cap, n, sizeof **out)) return CM_ERR_NOMEM;
        (*out)[n++] = (uint32_t)(cd->n_nodes + i);
    }
    *n_out = n;
    return CM_OK;
}

static void item_range(const chain_walk *cd, uint32_t item, uint32_t *k, uint32_t *k_end) {
    if (item < cd->n_nodes) *k = cd->nodes[item].k, *k_end = cd->nodes[item].k_end;
    else *k = cd->accs[item - cd->n_nodes].k, *k_end = cd->accs[item - cd->n_nodes].k_end;
}

static kept_slot *kept_find(cm_chain_data *cdata, uint64_t key) {
    size_t mask = cdata->cap_kept - 1, h = (size_t)(key * 0x9E3779B97F4A7C15ULL >> 20) & mask;
    while (cdata->kept[h].key && cdata->kept[h].key != key) h = (h + 1) & mask;
    return &cdata->kept[h];
}

static int kept_grow(cm_chain_data *cdata) {
    if (cdata->n_kept * 2 < cdata->cap_kept) return CM_OK;
    kept_slot *old = cdata->kept;
    size_t n_old = cdata->cap_kept, cap = n_old ? n_old * 2 : 64;
    cdata->kept = calloc(cap, sizeof *cdata->kept);
    if (!cdata->kept) {
        cdata->kept = old;
        return CM_ERR_NOMEM;
    }
    cdata->cap_kept = cap;
    for (size_t i = 0; i < n_old; i++)
        if (old[i].key) *kept_find(cdata, old[i].key) = old[i];
    free(old);
    return CM_OK;
}

/* What the filter keeps of an item's subtree, for `rule`: from its cache, or
 * filtered now through a scratch walk from `state`.  The same at every position
 * where the item is alive: a token of the subtree dies at the item's byte (it is
 * dead there), and no exit flag is raised before it (an earlier byte that follows
 * the rule where it may end is dead there too; a block's positions but its end
 * read on), so the filter reads the rest of the token after that one exit, which
 * does not depend on the position. */
static int kept_of(const cm_grammar *g, uint32_t state, cm_chain_data *cdata, uint32_t item, cm_walk *tmp,
                   const uint32_t **ks, uint32_t *n) {
    uint64_t key = ((uint64_t)g->t.state_rule[state] << 32 | item) + 1;
    int rc = kept_grow(cdata);
    if (rc) return rc;
    kept_slot *slot = kept_find(cdata, key);
    if (!slot->key) {
        uint32_t k, k_end;
        item_range(cdata->w, item, &k, &k_end);
        if (!tmp->ex) {  /* the scratch walk, on the first miss (the filter needs its depths) */
            free(tmp->unc);
            rc = cm_walk_init(tmp, g);
        }
        tmp->n_unc = 0;
        for (; !rc && k < k_end; k++) rc = cm_walk_push_uncertain(tmp, k);
        if (!rc) cm_walk_filter_uncertain(g, state, tmp);
        size_t cap = cdata->cap_pool;
        if (!rc && cdata->n_pool + tmp->n_unc > cap)
            rc = cm_grow_to((void **)&cdata->pool, &cap, cdata->n_pool + tmp->n_unc, sizeof *cdata->pool);
        if (rc) return rc;
        cdata->cap_pool = cap;
        if (tmp->n_unc) memcpy(cdata->pool + cdata->n_pool, tmp->unc, tmp->n_unc * sizeof *tmp->unc);
        *slot = (kept_slot){key, (uint32_t)cdata->n_pool, (uint32_t)tmp->n_unc};
        cdata->n_pool += tmp->n_unc;
        cdata->n_kept++;
    }
    *ks = cdata->pool + slot->off;
    *n = slot->n;
    return CM_OK;
}

/* kept_of for every acc point of items[0..n) not cached yet, filtered in one call: a chain's
 * first position meets ~100 acc points of a few tokens each, and each filter call's own
 * cost (its scratch arrays, the item's chart, the memo's set-up: ~3 K instructions) was most
 * of it.  The filter's verdict is the token's (the sets a token shares with the one before
 * only save its scan), so each point keeps what a call of its own would keep: the kept
 * tokens come back in order, a subsequence of the pushed ones, and each point takes those of
 * its own range.  Off (cm_chain_kept_batch_enable), or with fewer than two points to filter,
 * kept_of filters each on its own as before. */
static atomic_int g_kept_batch = 1;
static atomic_size_t g_kept_batched;  /* acc points filtered in a batch (the tests read it) */

void cm_chain_kept_batch_enable(int on) { atomic_store(&g_kept_batch, on); }

size_t cm_chain_kept_batched(void) { return atomic_load(&g_kept_batched); }

static int kept_batch(const cm_grammar *g, uint32_t state, cm_chain_data *cdata, const uint32_t *items, size_t n,
                      cm_walk *tmp) {
    if (!atomic_load(&g_kept_batch) || n < 2) return CM_OK;
    uint64_t rule_key = (uint64_t)g->t.state_rule[state] << 32;
    uint32_t *miss = malloc(n * sizeof *miss), *pushed = NULL;
    size_t n_miss = 0, n_pushed = 0;
    if (!miss) return CM_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!cdata->cap_kept || !kept_find(cdata, (rule_key | items[i]) + 1)->key) miss[n_miss++] = items[i];
    }
    int rc = CM_OK;
    if (n_miss >= 2) {
        size_t total = 0;
        for (size_t i = 0; i < n_miss; i++) {
            uint32_t k, k_end;
            item_range(cdata->w, miss[i], &k, &k_end);
            total += k_end - k;
        }
        if (!tmp->ex) {  /* the scratch walk (the filter needs its depths) */
            free(tmp->unc);
            rc = cm_walk_init(tmp, g);
        }
        tmp->n_unc = 0;
        if (!rc && !(pushed = malloc((total ? total : 1) * sizeof *pushed))) rc = CM_ERR_NOMEM;
        for (size_t i = 0; !rc && i < n_miss; i++) {
            uint32_t k, k_end;
            item_range(cdata->w, miss[i], &k, &k_end);
            for (; !rc && k < k_end; k++) {
                pushed[n_pushed++] = k;
                rc = cm_walk_push_uncertain(tmp, k);
            }
        }
        if (!rc) cm_walk_filter_uncertain(g, state, tmp);
        size_t cap = cdata->cap_pool;
        if (!rc && cdata->n_pool + tmp->n_unc > cap)
            rc = cm_grow_to((void **)&cdata->pool, &cap, cdata->n_pool + tmp->n_unc, sizeof *cdata->pool);
        if (!rc) cdata->cap_pool = cap;
        /* each point's share: the kept tokens, in order, matched against the pushed ones */
        size_t j = 0, at = 0;
        for (size_t i = 0; !rc && i < n_miss; i++) {
            uint32_t k, k_end, off = (uint32_t)cdata->n_pool;
            item_range(cdata->w, miss[i], &k, &k_end);
            for (size_t end = at + (k_end - k); at < end; at++)
                if (j < tmp->n_unc && tmp->unc[j] == pushed[at]) cdata->pool[cdata->n_pool++] = tmp->unc[j++];
            if ((rc = kept_grow(cdata))) break;
            *kept_find(cdata, (rule_key | miss[i]) + 1) =
                (kept_slot){(rule_key | miss[i]) + 1, off, (uint32_t)(cdata->n_pool - off)};
            cdata->n_kept++;
        }
        if (!rc && j != tmp->n_unc) rc = CM_ERR_STATE;  /* not a subsequence: cannot happen */
        if (!rc) atomic_fetch_add(&g_kept_batched, n_miss);
    }
    free(pushed);
    free(miss);
    return rc;
}

/* The items' tokens into w, filtered (each acc point's from its cache) when the
 * entry's uncertain tokens would be: build_entry (cache.c) filters an entry of
 * at most CM_FILTER_MAX_UNCERTAIN.  w holds the exits'.  Not when the walk is
 * only part of an entry (prefilter false: cm_chain_bytes). */
/* The end nodes' tokens into w; with b2 >= 0 those that go on inside the next
 * block (budget b2 there: need < B + b2) into *wraps instead, the filter being
 * sure to keep them (wrap_budget). */
static int push_nodes(const cm_grammar *g, const chain_walk *cd, const uint32_t *items, size_t n, int32_t B, int64_t b2,
                      cm_walk *w, cm_walk *wraps) {
    uint32_t *acc = NULL;
    if (b2 >= 0 && !(acc = calloc(g->n_words ? g->n_words : 1, sizeof *acc))) return CM_ERR_NOMEM;
    if (acc) accepted_at(g, cd, B + b2, acc);
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        uint32_t k, k_end;
        item_range(cd, items[i], &k, &k_end);
        for (; !rc && k < k_end; k++)
            rc = cm_walk_push_uncertain(acc && cm_bit(acc, g->v->trie_ids[k]) ? wraps : w, k);
    }
    free(acc);
    return rc;
}

static atomic_int g_wrap_direct = 1;
static atomic_size_t g_wrap_direct_hits;  /* entries split by push_wrapping (the tests read it) */

void cm_chain_wrap_direct_enable(int on) { atomic_store(&g_wrap_direct, on); }

size_t cm_chain_wrap_direct_hits(void) { return atomic_load(&g_wrap_direct_hits); }

/* The first end node of budget B (nodes are by budget). */
static size_t first_node(const chain_walk *cd, int32_t B) {
    size_t lo = 0, hi = cd->n_nodes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cd->nodes[mid].budget < B) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The entries of the nodes [x, x_end) kept at budget B (need below it, byte in follows) into
 * all, in order, each at once into bits (its id in acc: it goes on inside the next block) or,
 * in order, appended to rest[*n_rest]; the nodes kept counted into *n_items.  The number of
 * entries, at most the nodes' span (x_end[-1].k_end - x->k, checked: SIZE_MAX where they are
 * not ascending and disjoint inside it, which cannot happen).  Near a block's end ~40 K nodes
 * of one or two tokens each, at its last positions a few of 10^4: one plain loop, a token's
 * split branch-free (a vectorized store of a node's one or two entries cost more than they). */
#if defined(__GNUC__) && !defined(__clang__)
#define CM_PLAIN_LOOPS __attribute__((noinline, optimize("no-tree-vectorize", "no-tree-loop-distribution")))
#else
#define CM_PLAIN_LOOPS __attribute__((noinline))
#endif

CM_PLAIN_LOOPS static size_t gather_nodes(
    const chain_node *x, const chain_node *x_end, int32_t B, const uint8_t *follows, const uint32_t *restrict trie_ids,
    const uint32_t *restrict acc, uint32_t *restrict all, uint32_t *restrict bits, uint32_t *restrict rest,
    size_t *n_rest, size_t *n_items) {
    uint32_t end = x->k, last = x_end[-1].k_end;
    size_t n = 0, kept = 0, r = 0;
    for (; x < x_end; x++) {
        if (x->need >= B || !follows[x->byte]) continue;
        uint32_t k = x->k, k_end = x->k_end;
        if (k < end || k_end < k || k_end > last) return SIZE_MAX;
        end = k_end;
        kept++;
        for (; k < k_end; k++) {
            uint32_t id = trie_ids[k], word = id >> 5, on = acc[word] & (1u << (id & 31));
            all[n++] = k;
            bits[word] |= on;
            rest[r] = k;  /* (kept only where the token does not wrap) */
            r += !on;
        }
    }
    *n_items += kept;
    *n_rest = r;
    return n;
}

/* The split of a ranged block's position (ranged_key) from its walk's lists instead of a
 * token at a time.  Its uncertain tokens are still its end nodes' (the node ranges written
 * out: no token read); of those, the ones that go on inside the next block are the tokens
 * ending inside U with need in [B, B + b2), so the wrap bits are accepted_at(B + b2) less
 * accepted_at(B) (the bytes alive at label 0 all follow the rule: checked); the rest are the
 * subtrees that die after at least B units (at exactly B, where the dying byte is the node's,
 * only if it follows the rule) and the tokens ending inside U with need >= B + b2 (the
 * walk's suffix of greatest needs holds them all: checked).  Near a block's end 10^4-10^5
 * tokens stand at the end nodes and a few thousand of them die: what gather_nodes read token
 * by token (its id, a bit test, two stores) is then the few thousand and two bitset passes.
 * Its fixed cost (three bitset passes, the long tokens sorted) is ~70-90 K instructions,
 * against gather_nodes' ~45 a token (sp_4:102, 8.6 K tokens: 408 K), so mode 1 (the
 * default) takes it where the nodes hold 4 K tokens or more (a block's last ten positions
 * with Llama-3; 16 K before session 42); 0: off; 2: wherever it applies; 3: as 2, and
 * each split compared with gather_nodes' (a difference is CM_ERR_STATE: for the tests). */
static atomic_int g_wrap_ranges = 1;
static atomic_size_t g_wrap_ranges_hits;  /* positions split from the lists (the tests read it) */

void cm_chain_wrap_ranges_mode(int mode) { atomic_store(&g_wrap_ranges, mode); }

size_t cm_chain_wrap_ranges_hits(void) { return atomic_load(&g_wrap_ranges_hits); }

/* Does the split from the lists apply to budget B (and pay, in mode 1)? */
static bool ranges_apply(const cm_grammar *g, const chain_walk *cd, uint32_t rule, int32_t B, int64_t b2) {
    int mode = atomic_load(&g_wrap_ranges);
    if (!mode || !cd->ranged || (cd->n_nodes && !cd->all_off) || B < 1 || b2 < 0) return false;
    /* gather_nodes costs less where the nodes hold fewer tokens (their span is no measure) */
    if (mode == 1 && (B > cd->max_budget || cd->all_off[B + 1] - cd->all_off[B] < 4096)) return false;
    const uint32_t *row = g->t.rule_follow + (size_t)rule * 8;
    for (int j = 0; j < 8; j++)
        if (cd->first_bytes[j] & ~row[j]) return false;
    int64_t T = (int64_t)B + b2;  /* the suffix must hold every token of need >= T */
    return !cd->n_ids || cd->n_suffix == cd->n_ids || (cd->n_suffix && T >= cd->need[0]);
}

/* gather_nodes' outputs from the lists (ranges_apply): the number of entries, or SIZE_MAX
 * where the nodes are not in trie order, or the rest would not fit `cap` or does not
 * complete the wrap bits to the nodes' tokens (none of which can happen). */
static size_t gather_ranges(const cm_grammar *g, const chain_walk *cd, int32_t B, int64_t b2, const uint8_t *follows,
                            const uint32_t *acc, uint32_t *restrict all, uint32_t *restrict bits,
                            uint32_t *restrict rest, size_t cap, size_t *n_rest, size_t *n_items) {
    size_t n = 0, kept = 0, r = 0, nw = g->n_words, a = 0, b = cd->n_edges;
    if (B <= cd->max_budget && cd->all_off) {
        /* the alive nodes' tokens, and the edges of budget B that follow the rule merged in */
        const uint32_t *seg = cd->all + cd->all_off[B];
        size_t m = cd->all_off[B + 1] - cd->all_off[B], at = 0;
        if (m > cap) return SIZE_MAX;
        kept += m > 0;
        while (a < b) {  /* the first edge of budget B */
            size_t mid = (a + b) / 2;
            if (cd->edges[mid].budget < B) a = mid + 1;
            else b = mid;
        }
        uint32_t end = 0;
        for (const chain_run *x = cd->edges + a; x < cd->edges + cd->n_edges && x->budget == B; x++) {
            if (!follows[x->byte]) continue;
            if (x->k < end) return SIZE_MAX;
            end = x->k_end;
            size_t lo = at, hi = m;  /* the alive tokens before it */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (seg[mid] < x->k) lo = mid + 1;
                else hi = mid;
            }
            if (n + (lo - at) + (x->k_end - x->k) > cap || x->k_end < x->k || (lo < m && seg[lo] < x->k_end))
                return SIZE_MAX;
            memcpy(all + n, seg + at, (lo - at) * sizeof *all);
            n += lo - at;
            at = lo;
            for (uint32_t k = x->k; k < x->k_end; k++) all[n++] = k;
            kept++;
        }
        if (n + (m - at) > cap) return SIZE_MAX;
        memcpy(all + n, seg + at, (m - at) * sizeof *all);
        n += m - at;
    }
    uint32_t *lo = malloc((nw ? nw : 1) * sizeof *lo), *longs = NULL;
    if (!lo) return SIZE_MAX;
    if (!accepted_at(g, cd, B, lo)) memset(lo, 0, nw * sizeof *lo);
    for (size_t i = 0; i < nw; i++) bits[i] = acc[i] & ~lo[i];
    free(lo);
    /* the tokens ending inside U with need >= B + b2, by trie entry */
    int64_t T = (int64_t)B + b2;
    size_t j0 = cd->n_suffix, m = 0;
    while (j0 > 0 && cd->need[j0 - 1] >= T) j0--;  /* (the suffix is by need, ascending) */
    if (j0 < cd->n_suffix) {
        m = cd->n_suffix - j0;
        if (!(longs = malloc(m * sizeof *longs))) return SIZE_MAX;
        memcpy(longs, cd->ks + j0, m * sizeof *longs);
        qsort(longs, m, sizeof *longs, cmp_u32);
    }
    size_t li = 0;
    for (size_t i = 0; i < cd->n_dies && r != SIZE_MAX; i++) {
        const chain_die *d = &cd->dies[i];
        if (d->units < B || (d->units == B && d->at_end && !follows[d->byte])) continue;
        for (; li < m && longs[li] < d->k && r < cap; li++) rest[r++] = longs[li];
        if (r + (d->k_end - d->k) > cap) r = SIZE_MAX;
        else
            for (uint32_t k = d->k; k < d->k_end; k++) rest[r++] = k;
    }
    for (; r != SIZE_MAX && li < m && r < cap; li++) rest[r++] = longs[li];
    free(longs);
    if (r == SIZE_MAX || li < m || cm_count_bits(bits, nw) + r != n) return SIZE_MAX;
    *n_items += kept;
    *n_rest = r;
    return n;
}

/* Mode 3: the split from the lists against gather_nodes' (CM_OK, or CM_ERR_STATE where they
 * differ; CM_ERR_NOMEM). */
static int ranges_check(const cm_grammar *g, const chain_walk *cd, size_t lo, size_t hi, int32_t B,
                        const uint8_t *follows, const uint32_t *acc, const uint32_t *all, const uint32_t *bits,
                        const uint32_t *rest, size_t n, size_t n_rest) {
    size_t bound = lo < hi ? cd->nodes[hi - 1].k_end - cd->nodes[lo].k : 0, nw = g->n_words ? g->n_words : 1;
    size_t n_rest2 = 0, n_items2 = 0;
    uint32_t *all2 = malloc((bound ? bound : 1) * sizeof *all2), *rest2 = malloc((bound ? bound : 1) * sizeof *rest2);
    uint32_t *bits2 = calloc(nw, sizeof *bits2);
    int rc = all2 && rest2 && bits2 ? CM_OK : CM_ERR_NOMEM;
    if (!rc) {
        size_t n2 = lo < hi ? gather_nodes(cd->nodes + lo, cd->nodes + hi, B, follows, g->v->trie_ids, acc, all2, bits2,
                                           rest2, &n_rest2, &n_items2)
                            : 0;
        /* (no memcmp of an empty list: its pointer may be NULL, which memcmp may not be given) */
        if (n2 != n || n_rest2 != n_rest || (n && memcmp(all2, all, n * sizeof *all)) ||
            (n_rest && memcmp(rest2, rest, n_rest * sizeof *rest)) ||
            (g->n_words && memcmp(bits2, bits, g->n_words * sizeof *bits)))
            rc = CM_ERR_STATE;
    }
    free(all2);
    free(rest2);
    free(bits2);
    return rc;
}

/* The rests a wrapping block position's filter is sure to keep (issue 12, session 40).  The
 * filter reads a rest's first B units through `state`'s item chart to the block's end, then
 * the rest through the rule's upward chart, seeded with every return state of the rule.
 * wrap_budget found one that calls the block again, so every token that stays inside the
 * next block (b2 units, need < B + b2) is kept: the wrap bits.  Where the upward chart can
 * start d blocks in a row (blocks_follow: from a return state, by calls, completions and
 * outer returns, no byte between; a string's blocks nest, `#rep1.p1` calls `.p0` twice), it
 * reads d whole blocks after the first's end in one context: every token of need < B + d *
 * b2 is kept too, and is not asked.  A string start's rests are the long runs
 * (Llama-3: 96-128 spaces, dashes, slashes) that a maxLength of 1024 holds in its third
 * block; each read through an upward chart of every string property's count states.
 * Off: cm_chain_wrap_deep_enable(0), every rest asked (the reference the tests compare). */
static atomic_int g_wrap_deep = 1;
static atomic_size_t g_wrap_deep_hits;  /* rests kept without a question (the tests read it) */

void cm_chain_wrap_deep_enable(int on) { atomic_store(&g_wrap_deep, on); }

size_t cm_chain_wrap_deep_hits(void) { return atomic_load(&g_wrap_deep_hits); }

/* Can `d` more blocks of `rule` follow at once (no byte between) where the upward chart
 * stands at state x, with the return states stack[0 .. n) above it (the rest outer: a
 * completion there goes to every return state of its rule, as the chart's outer items do)?
 * A path of calls (the block itself, or a rule whose start calls on), completions and
 * outer returns; calls of nullable or lookahead rules are not taken (fewer blocks found is
 * still exact), and the search gives up (false) after *steps reaches 0. */
#define CM_WRAP_STACK 8
static bool blocks_follow(const cm_grammar *g, uint32_t rule, uint32_t x, uint32_t *stack, uint32_t n, uint32_t d,
                          uint32_t *steps) {
    const cm_tables *t = &g->t;
    if (!d) return true;
    if (!*steps) return false;
    --*steps;
    for (uint32_t e = t->ref_off[x]; e < t->ref_off[x + 1]; e++) {
        uint32_t r = t->ref_rule[e];
        if (t->n_la > 1 && t->rule_la[r]) continue;
        if (r == rule) {
            if (blocks_follow(g, rule, t->ref_target[e], stack, n, d - 1, steps)) return true;
        } else if (n < CM_WRAP_STACK) {
            stack[n] = t->ref_target[e];
            if (blocks_follow(g, rule, t->rule_start[r], stack, n + 1, d, steps)) return true;
        }
    }
    if (!t->accepting[x]) return false;
    if (n) return blocks_follow(g, rule, stack[n - 1], stack, n - 1, d, steps);
    uint32_t q = t->state_rule[x];
    for (uint32_t k = g->ret_off[q]; k < g->ret_off[q + 1]; k++)
        if (blocks_follow(g, rule, g->ret_state[k], stack, 0, d, steps)) return true;
    return false;
}

#define CM_WRAP_DEEP_MAX 8 /* blocks after the first's end (Llama-3's longest token: 3 of 46) */

/* Takes the rests of need < B + d * b2 (d >= 2 blocks the upward chart reads in a row, as
 * many as some rest needs) out of rest[0 .. *n_rest) into *sure (both in order); how many
 * (0: none, *sure NULL), or SIZE_MAX (no memory). */
static size_t wrap_sure(const cm_grammar *g, const chain_walk *cd, uint32_t rule, int32_t B, int64_t b2,
                        uint32_t *rest, size_t *n_rest, uint32_t **sure) {
    *sure = NULL;
    int64_t d = 1;
    for (int64_t want = 2; want <= CM_WRAP_DEEP_MAX && B + (want - 1) * b2 <= cd->max_need; want++) {
        bool found = false;
        uint32_t stack[CM_WRAP_STACK], steps = 256;
        for (uint32_t k = g->ret_off[rule]; k < g->ret_off[rule + 1] && !found && steps; k++)
            found = blocks_follow(g, rule, g->ret_state[k], stack, 0, (uint32_t)want, &steps);
        if (!found) break;
        d = want;
    }
    if (d < 2) return 0;
    size_t n = *n_rest, s = 0, r = 0;
    uint32_t from, *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) return SIZE_MAX;
    const uint32_t *acc = level_below(g, cd, B + d * b2, &from), *trie_ids = g->v->trie_ids;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = rest[i], id = trie_ids[k];
        bool in = acc && cm_bit(acc, id);
        for (uint32_t j = from; in && j < cd->n_suffix; j++) in = cd->ids[j] != id;  /* (need >= B + d * b2) */
        if (in) out[s++] = k;
        else rest[r++] = k;
    }
    if (!s) {
        free(out);
        return 0;
    }
    *n_rest = r;
    *sure = out;
    atomic_fetch_add(&g_wrap_deep_hits, s);
    return s;
}

/* A wrapping position whose tokens are too many for the filter (n > CM_FILTER_MAX_UNCERTAIN:
 * a block's last positions with Llama-3, 10^4-10^5 tokens at its end nodes) keeps every one of
 * them uncertain, so its split's rest held the runs that end on a raw newline or tab, and each
 * was stepped through check_split at the mask (both items, then its rest's verdict) and found
 * dead there, at every such position.  cm_walk_drop_dead proves a rest dead in every context
 * (the filter would drop it: no state of the block's region reads the byte after its lead), so
 * it is taken out of the split's rest only; the entry's uncertain list stays whole (a mask
 * whose block cannot start again still reads it) and the wrap bits are unchanged.  Off:
 * cm_chain_split_dead_enable(0), the rest is every token that does not wrap (the tests). */
static atomic_int g_split_dead = 1;
static atomic_size_t g_split_dead_hits;  /* rests taken out of unfiltered splits (the tests read it) */

void cm_chain_split_dead_enable(int on) { atomic_store(&g_split_dead, on); }

size_t cm_chain_split_dead_dropped(void) { return atomic_load(&g_split_dead_hits); }

/* uncertain_items and push_items for a position of a plain block that wraps (b2 >= 0;
 * no exits, no acc points: its items are the end nodes of budget B, disjoint subtrees in
 * trie order), w empty: every node's token into w in trie order, and at once split by
 * whether it goes on inside the next block (need < B + b2: the wrap bits) or not (the
 * rest, filtered where push_items would filter it; the wraps the filter is sure to keep).
 * The split is kept for cm_chain_wrap, which would make the same one from the entry a
 * token at a time (near a block's end 10^5 tokens, each pushed, split and pushed again).
 * 1 done, 0 the nodes are not in trie order (cannot happen; w untouched), < 0 error. */
static int push_wrapping(const cm_grammar *g, uint32_t state, cm_chain_data *cdata, int32_t B, int64_t b2,
                         cm_walk *w) {
    const chain_walk *cd = cdata->w;
    const uint32_t *trie_ids = g->v->trie_ids;
    uint32_t rule = g->t.state_rule[state];
    size_t lo = first_node(cd, B), hi = first_node(cd, B + 1), n_items = 0;
    split_drop(cdata);
    /* the nodes' subtrees are disjoint and in trie order: the span of theirs bounds their tokens */
    size_t bound = lo < hi ? cd->nodes[hi - 1].k_end - cd->nodes[lo].k : 0;
    if (lo < hi && cd->nodes[hi - 1].k_end < cd->nodes[lo].k) return 0;
    size_t nw = g->n_words ? g->n_words : 1, cap = w->cap_unc, n = 0, n_rest = 0;
    uint32_t *acc = malloc(nw * sizeof *acc), *bits = calloc(nw, sizeof *bits);
    uint32_t *rest = malloc((bound ? bound : 1) * sizeof *rest);
    int rc = acc && bits && rest && !cm_grow((void **)&w->unc, &cap, bound, sizeof *w->unc) ? CM_OK : CM_ERR_NOMEM;
    if (!rc) {
        w->cap_unc = cap;
        if (!accepted_at(g, cd, B + b2, acc)) memset(acc, 0, nw * sizeof *acc);
        uint8_t follows[256];  /* (the rule's FOLLOW row, cm_follows, a byte a byte) */
        const uint32_t *row = g->t.rule_follow + (size_t)rule * 8;
        for (int c = 0; c < 256; c++) follows[c] = row[c >> 5] >> (c & 31) & 1u;
        size_t got = SIZE_MAX;
        bool ranged = ranges_apply(g, cd, rule, B, b2);
        if (ranged) {
            got = gather_ranges(g, cd, B, b2, follows, acc, w->unc, bits, rest, bound, &n_rest, &n_items);
            if (got != SIZE_MAX) atomic_fetch_add(&g_wrap_ranges_hits, 1);
            if (got != SIZE_MAX && atomic_load(&g_wrap_ranges) == 3) rc = ranges_check(g, cd, lo, hi, B, follows, acc,
                                                                                     w->unc, bits, rest, got, n_rest);
        }
        if (!rc && got == SIZE_MAX) {
            if (ranged) memset(bits, 0, nw * sizeof *bits);
            n_items = 0;
            got = lo < hi ? gather_nodes(cd->nodes + lo, cd->nodes + hi, B, follows, trie_ids, acc, w->unc, bits, rest,
                                         &n_rest, &n_items)
                          : 0;
        }
        if (!rc && got == SIZE_MAX) rc = 1;
        else if (!rc) n = got;
    }
    free(acc);
    bool filter = g->lim.filter_uncertain && n && n <= CM_FILTER_MAX_UNCERTAIN && n_items;
    if (!rc && !filter && n_rest && n > n_rest && atomic_load(&g_split_dead)) {
        /* too many tokens to filter (a block's last positions): the rest's dead ones out of
         * the split alone, the entry's uncertain list kept whole (see g_split_dead) */
        size_t live = cm_walk_drop_dead(g, state, rest, n_rest);
        if (live < n_rest) atomic_fetch_add(&g_split_dead_hits, n_rest - live);
        n_rest = live;
    }
    if (!rc && filter && n_rest) {  /* the rest through the filter (as w), then out of the whole */
        uint32_t *all = w->unc, *sure = NULL;
        size_t cap_all = w->cap_unc, n_kept, n_asked = n_rest, n_sure = 0;
        if (atomic_load(&g_wrap_deep) && (n_sure = wrap_sure(g, cd, rule, B, b2, rest, &n_asked, &sure)) == SIZE_MAX)
            rc = CM_ERR_NOMEM, n_sure = 0;
        if (!rc) n_asked = cm_walk_drop_dead(g, state, rest, n_asked);
        w->unc = rest;
        w->n_unc = n_asked;
        w->cap_unc = bound;
        if (n_asked && !rc) cm_walk_filter_uncertain(g, state, w);
        n_kept = w->n_unc;
        if (n_sure) {  /* the sure ones back among the kept, in order */
            uint32_t *kept = malloc((n_kept + n_sure) * sizeof *kept);
            if (kept) {
                size_t a = 0, b = 0, o = 0;
                while (a < n_kept || b < n_sure)
                    kept[o++] = b == n_sure || (a < n_kept && w->unc[a] < sure[b]) ? w->unc[a++] : sure[b++];
                free(w->unc);
                w->unc = kept;
                n_kept += n_sure;
            } else {
                rc = CM_ERR_NOMEM;
            }
            free(sure);
        }
        rest = w->unc;  /* (the filter may have moved it, the merge did) */
        if (n_kept < n_rest) {
            size_t o = 0, j = 0;
            for (size_t i = 0; i < n; i++) {
                uint32_t k = all[i], id = trie_ids[k];
                if (cm_bit(bits, id)) all[o++] = k;
                else if (j < n_kept && rest[j] == k) all[o++] = k, j++;
            }
            n = o;
        }
        n_rest = n_kept;
        w->unc = all;
        w->cap_unc = cap_all;
    }
    if (!rc) {
        w->n_unc = n;
        w->filtered = filter;
        /* the buffers were sized by the nodes' span: give back what the entry does not hold */
        uint32_t *p;
        if (w->cap_unc > 2 * n + 64 && (p = realloc(w->unc, (n ? n : 1) * sizeof *p))) {
            w->unc = p;
            w->cap_unc = n ? n : 1;
        }
        if (bound > 2 * n_rest + 64 && (p = realloc(rest, (n_rest ? n_rest : 1) * sizeof *p))) rest = p;
        cdata->has_split = true;
        cdata->split_state = state;
        cdata->split_B = B;
        cdata->split_b2 = b2;
        cdata->split_n_unc = n;
        cdata->split_rest = rest;
        cdata->n_split_rest = (uint32_t)n_rest;
        cdata->split_bits = n > n_rest ? bits : NULL;  /* none: no token wraps */
        if (n == n_rest) free(bits);
        atomic_fetch_add(&g_wrap_direct_hits, 1);
        return 1;
    }
    free(bits);
    free(rest);
    return rc < 0 ? rc : 0;
}

/* cm_walk_filter_uncertain of w's tokens from `done` on (those before it filtered already). */
static void filter_from(const cm_grammar *g, uint32_t state, cm_walk *w, size_t done) {
    if (w->n_unc <= done) return;
    uint32_t *unc = w->unc;
    size_t n = w->n_unc, cap = w->cap_unc;
    w->unc = unc + done;  /* (the filter keeps its tokens in place: no realloc) */
    w->n_unc = n - done;
    w->cap_unc = cap - done;
    cm_walk_filter_uncertain(g, state, w);
    n = done + w->n_unc;
    w->unc = unc;
    w->n_unc = n;
    w->cap_unc = cap;
}

/* (raw_pre: how many tokens w's first ones stand for before any filter; done: how many of
 * them went through it already, push_exits) */
static int push_items(const cm_grammar *g, uint32_t state, cm_chain_data *cdata, const uint32_t *items,
                      size_t n_items, int32_t B, int64_t b2, bool prefilter, size_t raw_pre, size_t done,
                      cm_walk *w) {
    const chain_walk *cd = cdata->w;
    size_t raw = raw_pre;
    for (size_t i = 0; i < n_items; i++) {
        uint32_t k, k_end;
        item_range(cd, items[i], &k, &k_end);
        raw += k_end - k;
    }
    int rc = CM_OK;
    if (!prefilter || !g->lim.filter_uncertain || !raw || raw > CM_FILTER_MAX_UNCERTAIN || !n_items) {
        for (size_t i = 0; !rc && i < n_items; i++) {
            uint32_t k, k_end;
            item_range(cd, items[i], &k, &k_end);
            for (; !rc && k < k_end; k++) rc = cm_walk_push_uncertain(w, k);
        }
        return rc;
    }
    /* the exits' tokens and the end nodes' (each node serves one budget: nothing
     * to share) filtered at once, but those sure to be kept; the acc points' from
     * their cache */
    size_t i = 0;
    while (i < n_items && items[i] < cd->n_nodes) i++;
    cm_walk tmp = {0};  /* the wraps' tokens; kept_of makes it a whole scratch walk if it must filter */
    rc = push_nodes(g, cd, items, i, B, b2, w, &tmp);
    if (!rc) filter_from(g, state, w, done);
    for (size_t j = 0; !rc && j < tmp.n_unc; j++) rc = cm_walk_push_uncertain(w, tmp.unc[j]);
    if (!rc && i < n_items) rc = kept_batch(g, state, cdata, items + i, n_items - i, &tmp);
    for (; !rc && i < n_items; i++) {
        const uint32_t *ks;
        uint32_t n;
        rc = kept_of(g, state, cdata, items[i], &tmp, &ks, &n);
        for (uint32_t j = 0; !rc && j < n; j++) rc = cm_walk_push_uncertain(w, ks[j]);
    }
    cm_walk_free(&tmp);
    w->filtered = !rc;
    return rc;
}

static bool plain_block(const cm_loop_walk *lw);

/* The budget the start of `state`'s block has in this chain (head[0..budget]),
 * where the tokens that reach the end of the block go on, when the filter is sure
 * to keep each of them that stays inside the next block: the rule is a plain
 * block (no exit flag before its end) and a state it returns to calls it again,
 * so its upward chart predicts the block's start right after its end; else -1. */
static int64_t wrap_budget(const cm_grammar *g, uint32_t state, const cm_loop_walk *lw, const uint32_t *head,
                           uint32_t budget, uint32_t n_head) {
    const cm_tables *t = &g->t;
    uint32_t rule = t->state_rule[state], start = t->rule_start[rule];
    if (!g->rule_block[rule] || t->n_la > 1 || !plain_block(lw)) return -1;
    bool again = false;
    for (uint32_t k = g->ret_off[rule]; k < g->ret_off[rule + 1] && !again; k++)
        for (uint32_t e = t->ref_off[g->ret_state[k]]; e < t->ref_off[g->ret_state[k] + 1] && !again; e++)
            again = t->ref_rule[e] == rule;
    for (uint32_t j = 0; again && j < n_head; j++)
        if (head[j] == start) return (int64_t)budget - j;
    return -1;
}

/* ---- the exits' walks kept by (rule, exit, target) (issue 12, session 46) ----
 *
 * Each position of a chain walks every exit alive there, the subtree [k, k_end) of the exit's
 * byte from the out state its (label, byte) leads to (a JSON string's tail at Llama-3: 189
 * exits, ~0.11 M instructions a position), and its entry then filters the exits' uncertain
 * tokens (~0.08 M more), again at every later position of the string.  The walk reads nothing
 * but (to, rule, k, k_end, depth): its accepted ids, the name sets it marks and its uncertain
 * tokens are the same at each position, so they are kept the first time by (rule, exit, to)
 * and replayed after.  The filter's verdict on a token is the token's (kept_batch), and an
 * exit's token reads the same bytes through the same model at every position where the exit
 * is alive (need < B: its bytes before the exit stay in the chain, whose rows and flags the
 * positions share, then leave into the same target), so the tokens the filter keeps of each
 * exit are kept as well, where the entry's exits go through the filter at all (prefilter, and
 * the entry's count within CM_FILTER_MAX_UNCERTAIN, as push_items and build_entry decide): the
 * exits lacking them filtered in one call and split, the entry given the kept ones (then the
 * end nodes' tokens alone go through push_items' filter; with none, w->filtered is set).
 * Off: cm_chain_exit_memo_enable(0), every exit walked and filtered at each position. */
static atomic_int g_exit_memo = 1;
static atomic_size_t g_exit_memo_hits;  /* exits replayed from the memo (the tests read it) */

void cm_chain_exit_memo_enable(int on) { atomic_store(&g_exit_memo, on); }

size_t cm_chain_exit_memo_hits(void) { return atomic_load(&g_exit_memo_hits); }

/* A larger subtree is walked each time: a walk that takes it in bulk (a name set, a class's
 * ids) costs less than reading its ids would. */
#define CM_EXIT_MEMO_SPAN 2048


/* The slots of `rule`'s exits: NULL at its first position (noted: most rules of a grammar meet
 * a chain once, where keeping the walks would only cost), made at its second, or NULL out of
 * memory. */
static exit_slot *exit_slots(cm_chain_data *cd, uint32_t rule) {
    exit_group *xg = NULL;
    for (size_t i = 0; i < cd->n_xg && !xg; i++)
        if (cd->xg[i].rule == rule) xg = &cd->xg[i];
    if (!xg) {
        size_t cap = cd->cap_xg;
        if (cd->n_xg == cap && cm_grow_to((void **)&cd->xg, &cap, cd->n_xg + 1, sizeof *cd->xg)) return NULL;
        cd->cap_xg = cap;
        cd->xg[cd->n_xg++] = (exit_group){rule, NULL};
        return NULL;
    }
    if (!xg->slot && (xg->slot = malloc(cd->w->n_exits * sizeof *xg->slot)))
        for (size_t i = 0; i < cd->w->n_exits; i++) xg->slot[i].to = EXIT_NEW;
    return xg->slot;
}

static int xpool_reserve(cm_chain_data *cd, size_t more) {
    size_t cap = cd->cap_xpool;
    if (cd->n_xpool + more > cap && cm_grow_to((void **)&cd->xpool, &cap, cd->n_xpool + more, sizeof *cd->xpool))
        return CM_ERR_NOMEM;
    cd->cap_xpool = cap;
    return CM_OK;
}

/* Exit i's walk from `to` into w, kept in s (a new slot) where it can be: its subtree within
 * CM_EXIT_MEMO_SPAN, no name set marked (cm_walk_names: what it adds depends on w's marks),
 * and its accepted tokens those of the subtree w holds now (none held before). */
static int exit_walk(const cm_grammar *g, cm_chain_data *cd, uint32_t i, int32_t to, uint32_t rule, exit_slot *s,
                     cm_walk *w) {
    const chain_exit *x = &cd->w->exits[i];
    size_t u0 = w->n_unc;
    uint32_t a0 = w->n_accepted, names0[8];
    if (s) memcpy(names0, w->names, sizeof names0);
    int rc = cm_flat_walk(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, w);
    if (rc || !s) return rc;
    s->to = EXIT_NONE;
    uint32_t n_acc = w->n_accepted - a0, n_unc = (uint32_t)(w->n_unc - u0), n = 0;
    if (x->k_end - x->k > CM_EXIT_MEMO_SPAN || memcmp(names0, w->names, sizeof names0) ||
        xpool_reserve(cd, (size_t)n_acc + n_unc))
        return CM_OK;  /* (only a shortcut is lost) */
    const uint32_t *trie_ids = g->v->trie_ids;
    uint32_t *ids = cd->xpool + cd->n_xpool;
    for (uint32_t k = x->k; k < x->k_end && n <= n_acc; k++)
        if (cm_bit(w->bits, trie_ids[k])) {
            if (n < n_acc) ids[n] = trie_ids[k];
            n++;
        }
    if (n != n_acc) return CM_OK;
    *s = (exit_slot){.to = to, .n_acc = n_acc, .ids_off = (uint32_t)cd->n_xpool, .n_unc = n_unc};
    s->unc_off = s->ids_off + n_acc;
    if (n_unc) memcpy(cd->xpool + s->unc_off, w->unc + u0, n_unc * sizeof *w->unc);
    cd->n_xpool += (size_t)n_acc + n_unc;
    return CM_OK;
}

/* Slot s's walk into w, as exit_walk made it. */
static int exit_replay(const cm_chain_data *cd, const exit_slot *s, cm_walk *w) {
    size_t cap = w->cap_unc;
    if (w->n_unc + s->n_unc > cap && cm_grow_to((void **)&w->unc, &cap, w->n_unc + s->n_unc, sizeof *w->unc))
        return CM_ERR_NOMEM;
    w->cap_unc = cap;
    const uint32_t *ids = cd->xpool + s->ids_off;
    for (uint32_t j = 0; j < s->n_acc; j++) cm_set_bit(w->bits, ids[j]);
    w->n_accepted += s->n_acc;
    if (s->n_unc) memcpy(w->unc + w->n_unc, cd->xpool + s->unc_off, s->n_unc * sizeof *w->unc);
    w->n_unc += s->n_unc;
    return CM_OK;
}

/* The exits alive at B into w (walked or replayed), in order; *raw: how many uncertain tokens
 * they hold.  Where `filter` (the entry's exits go through the filter from `state`: raw_items
 * more tokens join them there), w holds an empty list to begin with and every alive exit has
 * a slot, w is given the tokens the filter keeps instead (*filtered). */
static int push_exits(const cm_grammar *g, uint32_t state, uint32_t rule, int32_t B, const int32_t *lam,
                      const int32_t *out, cm_chain_data *cdata, bool filter, size_t raw_items, size_t *raw,
                      bool *filtered, cm_walk *w) {
    const chain_walk *cd = cdata->w;
    *filtered = false;
    exit_slot *slot = exit_slots(cdata, rule);
    uint32_t *alive = slot ? malloc((cd->n_exits ? cd->n_exits : 1) * sizeof *alive) : NULL;
    if (slot && !alive) return CM_ERR_NOMEM;
    size_t n_alive = 0, u0 = w->n_unc, hits = 0;
    bool all = slot != NULL;
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < cd->n_exits; i++) {
        const chain_exit *x = &cd->exits[i];
        int32_t l = lam[(size_t)x->label * 256 + x->byte];  /* alive from shift l + B on */
        if (x->need >= B || (l != NO_LAM && (int64_t)x->shift - l < B)) continue;
        int32_t to = out[(size_t)x->label * 256 + x->byte];
        if (to < 0) {
            rc = CM_ERR_ARG;  /* cannot happen: an exit's code is CODE_OUT */
            break;
        }
        exit_slot *s = slot ? &slot[i] : NULL;
        if (s && s->to == to) {
            rc = exit_replay(cdata, s, w);
            hits++;
        } else {
            rc = exit_walk(g, cdata, (uint32_t)i, to, rule, s && s->to == EXIT_NEW ? s : NULL, w);
        }
        if (alive) alive[n_alive++] = (uint32_t)i;
        all = all && s->to == to;
    }
    *raw = w->n_unc - u0;
    if (hits) atomic_fetch_add(&g_exit_memo_hits, hits);
    if (rc || !filter || !all || u0 || !*raw || *raw + raw_items > CM_FILTER_MAX_UNCERTAIN ||
        xpool_reserve(cdata, *raw)) {
        free(alive);
        return rc;
    }
    /* the raw tokens of the exits that lack kept ones (a subsequence of w's, in order) filtered */
    size_t n = 0, at = 0;
    for (size_t a = 0; a < n_alive; a++) {
        const exit_slot *s = &slot[alive[a]];
        if (!s->has_kept) {
            memmove(w->unc + n, w->unc + at, s->n_unc * sizeof *w->unc);
            n += s->n_unc;
        }
        at += s->n_unc;
    }
    if (n) {
        w->n_unc = n;
        cm_walk_filter_uncertain(g, state, w);
        size_t j = 0;
        for (size_t a = 0; a < n_alive; a++) {  /* each exit's share, matched against its raw ones */
            exit_slot *s = &slot[alive[a]];
            if (s->has_kept) continue;
            const uint32_t *r = cdata->xpool + s->unc_off;
            s->kept_off = (uint32_t)cdata->n_xpool;
            for (uint32_t e = 0; e < s->n_unc; e++)
                if (j < w->n_unc && w->unc[j] == r[e]) cdata->xpool[cdata->n_xpool++] = w->unc[j++];
            s->n_kept = (uint32_t)cdata->n_xpool - s->kept_off;
            s->has_kept = true;
        }
        if (j != w->n_unc) rc = CM_ERR_STATE;  /* not a subsequence: cannot happen */
    }
    size_t o = 0;  /* (kept <= raw: w->unc has room) */
    for (size_t a = 0; !rc && a < n_alive; a++) {
        const exit_slot *s = &slot[alive[a]];
        if (s->n_kept) memcpy(w->unc + o, cdata->xpool + s->kept_off, s->n_kept * sizeof *w->unc);
        o += s->n_kept;
    }
    w->n_unc = o;
    *filtered = !rc;
    free(alive);
    return rc;
}

static int chain_assemble(const cm_grammar *g, uint32_t state, int32_t B, const int32_t *lam, const int32_t *out,
                          const int32_t *aam, cm_chain_data *cdata, int64_t b2, bool prefilter, cm_walk *w) {
    const cm_tables *t = &g->t;
    const chain_walk *cd = cdata->w;
    uint32_t rule = t->state_rule[state];
    w->n_accepted = accepted_at(g, cd, B, w->bits);
    int rc = CM_OK;
    if (cd->n_exits && atomic_load(&g_exit_memo)) {  /* (then no wraps: push_wrapping takes no exits) */
        uint32_t *items = NULL;
        size_t n_items = 0, raw_items = 0, raw = 0;
        bool filtered = false;
        rc = uncertain_items(g, rule, B, aam, cd, &items, &n_items);
        for (size_t i = 0; !rc && i < n_items; i++) {
            uint32_t k, k_end;
            item_range(cd, items[i], &k, &k_end);
            raw_items += k_end - k;
        }
        if (!rc)
            rc = push_exits(g, state, rule, B, lam, out, cdata, prefilter && g->lim.filter_uncertain, raw_items, &raw,
                            &filtered, w);
        size_t done = filtered ? w->n_unc : 0;
        if (!rc) rc = push_items(g, state, cdata, items, n_items, B, b2, prefilter, filtered ? raw : w->n_unc, done, w);
        if (!rc && filtered && !n_items) w->filtered = true;  /* (the entry's filter would have read them all) */
        free(items);
        bool sorted = true;
        for (size_t i = 1; !rc && sorted && i < w->n_unc; i++) sorted = w->unc[i - 1] < w->unc[i];
        if (!rc && !sorted) qsort(w->unc, w->n_unc, sizeof *w->unc, cmp_u32);
        return rc;
    }
    for (size_t i = 0; !rc && i < cd->n_exits; i++) {
        const chain_exit *x = &cd->exits[i];
        int32_t l = lam[(size_t)x->label * 256 + x->byte];  /* alive from shift l + B on */
        if (x->need >= B || (l != NO_LAM && (int64_t)x->shift - l < B)) continue;
        int32_t to = out[(size_t)x->label * 256 + x->byte];
        if (to < 0) return CM_ERR_ARG;  /* cannot happen: an exit's code is CODE_OUT */
        rc = cm_flat_walk(g, (uint32_t)to, rule, x->k, x->k_end, x->depth + 1, w);
    }
    if (!rc && b2 >= 0 && prefilter && g->lim.wrap_repeats && !cd->n_exits && !cd->n_accs && !w->n_unc &&
        atomic_load(&g_wrap_direct)) {
        rc = push_wrapping(g, state, cdata, B, b2, w);
        if (rc) return rc < 0 ? rc : CM_OK;  /* in trie order */
    }
    uint32_t *items = NULL;
    size_t n_items = 0;
    if (!rc) rc = uncertain_items(g, rule, B, aam, cd, &items, &n_items);
    if (!rc) rc = push_items(g, state, cdata, items, n_items, B, b2, prefilter, w->n_unc, 0, w);
    free(items);
    /* the tokens come by source (exits, nodes, wraps, acc points), each in trie order */
    bool sorted = true;
    for (size_t i = 1; !rc && sorted && i < w->n_unc; i++) sorted = w->unc[i - 1] < w->unc[i];
    if (!rc && !sorted) qsort(w->unc, w->n_unc, sizeof *w->unc, cmp_u32);
    return rc;
}

/* ---- positions past every need (issue 12, session 33) ----
 *
 * chain_assemble reads its budget B in five places: accepted_at (the level, the suffix tokens of
 * need >= B), the exits (need >= B, shift - lam < B), the end nodes of budget B, the acc points
 * (need >= B, shift - aam < B) and the wraps (b2 >= 0).  Above past_threshold -- the walk's
 * max_need (every need, node budget and the levels' top), every exit's and acc point's
 * shift - lam / shift - aam -- with b2 < 0 and no exit alive from its orbit's start (such an
 * exit is walked at every budget and its tokens filtered from `state`), each of those reads
 * gives the same at every B: the last level with no suffix token taken out, no exit walked, no
 * end node, and the acc points of need < CM_CHAIN_MAX whose label's aam is NO_LAM and whose
 * byte follows the rule.  Nothing uncertain is pushed before the acc points, so the filter of
 * push_items is not called from `state`, and the acc points' kept tokens are kept by (rule,
 * item) (kept_of).  So two such positions of chains of one walk, one rule and one NO_LAM
 * pattern get the same walk w; the first keeps its uncertain list and filtered flag, the
 * others copy them (and the bits from accepted_at) instead of the acc points' loop and their
 * kept lookups.  Off: cm_chain_past_memo_enable(0). */

static atomic_int g_past_memo = 1;
static atomic_size_t g_past_hits;  /* positions that took a kept list (the tests read it) */

void cm_chain_past_memo_enable(int on) { atomic_store(&g_past_memo, on); }

size_t cm_chain_past_hits(void) { return atomic_load(&g_past_hits); }

/* The budget above which every position of the chain (lam, aam) has the same walk: INT64_MAX none. */
static int64_t past_threshold(const chain_walk *cd, const int32_t *lam, const int32_t *aam) {
    int64_t t = cd->max_need;
    if (cd->n_ids && (int64_t)cd->min_need + (int64_t)cd->n_levels - 1 > t)
        t = (int64_t)cd->min_need + (int64_t)cd->n_levels - 1;
    for (size_t i = 0; i < cd->n_exits; i++) {
        const chain_exit *x = &cd->exits[i];
        if (x->need >= CM_CHAIN_MAX) continue;  /* skipped at every budget */
        int32_t l = lam[(size_t)x->label * 256 + x->byte];
        if (l == NO_LAM) return INT64_MAX;
        if ((int64_t)x->shift - l > t) t = (int64_t)x->shift - l;
    }
    for (size_t i = 0; i < cd->n_accs; i++) {
        const chain_exit *x = &cd->accs[i];
        int32_t a = aam[x->label];
        if (x->need < CM_CHAIN_MAX && a != NO_LAM && (int64_t)x->shift - a > t) t = (int64_t)x->shift - a;
    }
    return t;
}

/* chain_assemble for a position of chain (lam, aam) of walk lw, through the kept lists where B is
 * past the threshold (*past, computed here if !*known). */
static int assemble_past(const cm_grammar *g, uint32_t state, int32_t B, const int32_t *lam, const int32_t *out,
                         const int32_t *aam, const cm_loop_walk *lw, int64_t b2, bool prefilter, int64_t *past,
                         bool *known, cm_walk *w) {
    cm_chain_data *cdata = lw->chain;
    const chain_walk *cd = cdata->w;
    uint32_t n_lab = lw->n_sig > 1 ? lw->sig[1] : UINT32_MAX;
    bool on = atomic_load(&g_past_memo) && prefilter && b2 < 0 && B >= 0 && B < CM_CHAIN_MAX && !w->n_unc &&
              !w->filtered && n_lab <= CM_CHAIN_LABELS;
    if (on && !*known) {
        *past = past_threshold(cd, lam, aam);
        *known = true;
    }
    if (!on || (int64_t)B <= *past) return chain_assemble(g, state, B, lam, out, aam, cdata, b2, prefilter, w);
    past_entry key = {.rule = g->t.state_rule[state], .n_lab = n_lab};
    for (uint32_t l = 0; l < n_lab; l++)
        if (aam[l] == NO_LAM) key.open[l >> 5] |= 1u << (l & 31);
    for (size_t i = 0; i < cdata->n_past; i++) {
        const past_entry *p = &cdata->past[i];
        if (p->rule != key.rule || p->n_lab != n_lab || memcmp(p->open, key.open, sizeof key.open)) continue;
        w->n_accepted = accepted_at(g, cd, B, w->bits);
        if (p->n_unc > w->cap_unc) {
            uint32_t *u = realloc(w->unc, p->n_unc * sizeof *u);
            if (!u) return CM_ERR_NOMEM;
            w->unc = u;
            w->cap_unc = p->n_unc;
        }
        if (p->n_unc) memcpy(w->unc, p->unc, p->n_unc * sizeof *w->unc);
        w->n_unc = p->n_unc;
        w->filtered = p->filtered;
        atomic_fetch_add(&g_past_hits, 1);
        return CM_OK;
    }
    int rc = chain_assemble(g, state, B, lam, out, aam, cdata, b2, prefilter, w);
    if (rc) return rc;
    size_t cap = cdata->cap_past;  /* (on failure only a shortcut is lost) */
    key.unc = malloc((w->n_unc ? w->n_unc : 1) * sizeof *key.unc);
    if (!key.unc ||
        (cdata->n_past == cap && cm_grow_to((void **)&cdata->past, &cap, cdata->n_past + 1, sizeof *cdata->past))) {
        free(key.unc);
        return CM_OK;
    }
    cdata->cap_past = cap;
    if (w->n_unc) memcpy(key.unc, w->unc, w->n_unc * sizeof *key.unc);
    key.n_unc = w->n_unc;
    key.filtered = w->filtered;
    cdata->past[cdata->n_past++] = key;
    return CM_OK;
}

/* The analysed chain `state` is a later position of: its walk, instance and place. */
static cm_loop_walk *find_position(const cm_grammar *g, uint32_t state, const chain_inst **inst, uint32_t *at) {
    for (cm_loop_walk *lw = g->cache->loops[CM_CHAIN_BUCKET]; lw; lw = lw->next) {
        if (!lw->chain) continue;
        for (size_t i = 0; i < lw->chain->n_insts; i++) {
            const chain_inst *x = &lw->chain->insts[i];
            for (uint32_t j = 0; j < x->n_head; j++)
                if (x->head[j] == state) {
                    *inst = x;
                    *at = j;
                    return lw;
                }
        }
    }
    return NULL;
}

/* Keep f's chain (its head orbit and exits' tables, taken over) with its walk. */
static void keep_instance(cm_chain_data *cd, chain_form *f, uint32_t n_head) {
    size_t cap = cd->cap_insts;
    if (cd->n_insts == cap && cm_grow_to((void **)&cd->insts, &cap, cap + 1, sizeof *cd->insts)) return;
    cd->cap_insts = cap;  /* (on failure only a shortcut is lost) */
    cd->insts[cd->n_insts++] = (chain_inst){f->budget, f->lam, f->to, f->aam, f->head, n_head, 0, false, f->n_lab};
    f->head = NULL;
    f->lam = f->to = f->aam = NULL;
}

/* ---- the analysis kept by the chain's rows (the vocabulary's memos) ---- */

/* The analysis of a chain depends only on its rows: the states it labels (its
 * locals), where each byte leads from each of them (dead, a local, a state out
 * of the chain), their flags and the out states' (solo, plain: what the pair
 * walk and the last positions read), and whether the first position's calls are
 * left out.  A memo keeps those rows numbered breadth first by byte from the
 * first position (locals, then out states, by first meeting), by the classes of
 * the grammar that made it, with the analysis' result (key, lam, aam; the head
 * orbit and the out targets by those numbers).  A chain whose rows are the same
 * up to that renaming -- checked in one pass over its locals, each row once by
 * the classes both grammars' byte classes cut it into -- has the same model
 * (every check of chain_form_of is a property of the rows), so it takes the
 * result renamed to its own states.  What is not the rows is checked again:
 * the bytes that follow the rule where an orbit may end it (chain_form_of).
 * Memos are filed by the vocabulary (loopstore.c), so a chain met in another
 * grammar compiled for it costs the check, not the analysis; they are found by
 * memo_key (how many steps the first position's main byte reads on), a hint
 * that only picks the few memos to check. */

#define CM_MEMO_MIN_STEPS 16    /* shorter chains' analyses cost about what the check does */
#define CM_MEMO_TRIES 4         /* memos of one hint checked, at most */
#define MEMO_DEAD 0xffffu

static atomic_int g_chain_memo = 1;
static atomic_size_t g_memo_hits;  /* analyses taken from memos (the tests read it) */
static atomic_int g_row_shapes = 1;
static atomic_size_t g_shaped_rows;  /* rows checked by their shape's plan (the tests read it) */

void cm_chain_memo_enable(int on) { atomic_store(&g_chain_memo, on); }

void cm_chain_shapes_enable(int on) { atomic_store(&g_row_shapes, on); }

size_t cm_chain_shaped_rows(void) { return atomic_load(&g_shaped_rows); }

size_t cm_chain_memo_hits(void) { return atomic_load(&g_memo_hits); }

typedef struct chain_memo {
    cm_memo_link link;          /* first: the store files it */
    atomic_size_t refs;
    uint8_t byte_class[256];    /* the classes of rows */
    uint32_t n_cls, n_loc, n_out;
    bool open;
    uint8_t *flags;             /* [n_loc + n_out] state_flags */
    uint16_t *rows;             /* [n_loc * n_cls]: MEMO_DEAD, a local, n_loc + an out state */
    /* each row's shape (row_shapes): which of its classes lead to the same state, as the
     * slot of each class's target among the row's distinct ones by first class; NULL: none */
    uint16_t *shape;            /* [n_loc]: the row's shape, MEMO_NO_SHAPE: one past the limit */
    uint8_t *slot;              /* [n_shapes * n_cls] */
    uint32_t n_shapes;
    uint32_t budget, n_lab;
    uint32_t *key;              /* chain_form's */
    size_t n_key;
    uint64_t key_hash;          /* key_hash_of(key) */
    int32_t *lam, *aam;         /* chain_form's */
    int32_t *to;                /* [n_lab * 256] chain_form's, by out number (-1: none) */
    uint32_t *head;             /* [budget + 1] by local number */
    /* a prefix memo (filed under memo_key's prefix hash, prefix_match): the memo `of`
     * (held), its locals within CM_PREFIX_DEPTH bytes of local 0 breadth first, and
     * each local's distance (UINT16_MAX: farther) */
    struct chain_memo *of;
    uint32_t *bfs, n_bfs;
    uint16_t *dist;
    uint32_t steps;             /* memo_key's steps of the kept chain (suffix_first finds a place by them) */
} chain_memo;

void cm_chain_memo_hold(cm_memo_link *m) { atomic_fetch_add(&((chain_memo *)m)->refs, 1); }

void cm_chain_memo_release(cm_memo_link *link) {
    chain_memo *m = (chain_memo *)link;
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    if (m->of) cm_chain_memo_release(&m->of->link);
    free(m->bfs);
    free(m->dist);
    free(m->flags);
    free(m->rows);
    free(m->shape);
    free(m->slot);
    free(m->key);
    free(m->lam);
    free(m->aam);
    free(m->to);
    free(m->head);
    free(m);
}

#define OUT_FLAGS 9  /* of an out state the analysis reads only solo (next_positions) and plain (last_positions) */

static uint8_t state_flags(const cm_grammar *g, uint32_t q) {
    return (uint8_t)((g->solo[q] != 0) | (g->t.accepting[q] != 0) << 1 | (g->has_bytes[q] != 0) << 2 |
                     (g->plain[q] != 0) << 3);
}

/* The hint memos are filed under: how many steps the first position's main
 * byte reads on from there, the same byte all along (a maxLength-64 string's
 * chain is not looked for among the 255 ones').  The main byte: of the plain
 * state most bytes lead to, not the position itself (ties: the greatest byte,
 * a character's lead byte before a closing quote or an escape's backslash),
 * its greatest -- by bytes, not by the grammar's classes, so that another
 * grammar's copy of the chain finds it.  False when under CM_MEMO_MIN_STEPS
 * (no memo: a chain of multi-byte characters alone, which its main byte does
 * not read on through, is analysed every time). */
#define CM_MEMO_HINT_STEPS 65536
static bool memo_key(const cm_grammar *g, uint32_t state, uint32_t t0, bool open, uint64_t *hash, uint64_t *prefix,
                     uint32_t *n_steps) {
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes, n_to = 0, best = NONE, steps = 0, c0 = 0;
    /* first a quick look along the first candidate's class: most states that may begin a chain
     * (every solo state whose entry is built) begin none this long */
    while (c0 < nc && t->trans[(size_t)state * nc + c0] != (int32_t)t0) c0++;
    for (int32_t q = (int32_t)t0, r; c0 < nc && steps < CM_MEMO_MIN_STEPS; q = r, steps++) {
        r = t->trans[(size_t)q * nc + c0];
        if (r < 0 || r == q) break;
    }
    if (steps < CM_MEMO_MIN_STEPS) return false;
    steps = 0;
    uint32_t n_bytes[256], max_byte[256], to[256], got[256], top[256];
    for (uint32_t c = 0; c < nc; c++) n_bytes[c] = 0;
    for (uint32_t b = 0; b < 256; b++) n_bytes[t->byte_class[b]]++, max_byte[t->byte_class[b]] = b;
    const int32_t *row = t->trans + (size_t)state * nc;
    for (uint32_t c = 0; c < nc; c++) {
        int32_t r = row[c];
        if (r < 0 || (uint32_t)r == state || !g->solo[r]) continue;
        uint32_t i = 0;
        while (i < n_to && to[i] != (uint32_t)r) i++;
        if (i == n_to) to[n_to] = (uint32_t)r, got[n_to] = 0, top[n_to++] = 0;
        got[i] += n_bytes[c];
        if (max_byte[c] > top[i]) top[i] = max_byte[c];
    }
    for (uint32_t i = 0; i < n_to; i++)
        if (best == NONE || got[i] > got[best] || (got[i] == got[best] && top[i] > top[best])) best = i;
    if (best == NONE) return false;
    uint32_t c = t->byte_class[top[best]];
    for (int32_t q = (int32_t)to[best], r; steps < CM_MEMO_HINT_STEPS; q = r, steps++) {
        r = t->trans[(size_t)q * nc + c];
        if (r < 0 || r == q) break;
    }
    *hash = ((uint64_t)steps << 9 | top[best] << 1 | open) * 0x9E3779B97F4A7C15ULL;
    *prefix = ((uint64_t)CM_MEMO_HINT_STEPS << 10 | top[best] << 1 | open) * 0x9E3779B97F4A7C15ULL;
    *n_steps = steps;
    return steps >= CM_MEMO_MIN_STEPS;
}

static chain_memo *memo_alloc(uint32_t n_cls, uint32_t n_loc, uint32_t n_out, const chain_form *f) {
    chain_memo *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    atomic_init(&m->refs, 1);
    m->flags = malloc((size_t)n_loc + n_out);
    m->key = malloc(f->n_key * sizeof *m->key);
    m->lam = malloc((size_t)f->n_lab * 256 * sizeof *m->lam);
    m->to = malloc((size_t)f->n_lab * 256 * sizeof *m->to);
    m->aam = malloc((size_t)f->n_lab * sizeof *m->aam);
    m->head = malloc(((size_t)f->budget + 1) * sizeof *m->head);
    if (!m->flags || !m->key || !m->lam || !m->to || !m->aam || !m->head) {
        cm_chain_memo_release(&m->link);
        return NULL;
    }
    m->n_cls = n_cls;
    m->n_loc = n_loc;
    m->n_out = n_out;
    m->budget = f->budget;
    m->n_lab = f->n_lab;
    m->n_key = f->n_key;
    memcpy(m->key, f->key, f->n_key * sizeof *m->key);
    m->key_hash = f->hashed ? f->key_hash : key_hash_of(f->key, f->n_key);
    memcpy(m->lam, f->lam, (size_t)f->n_lab * 256 * sizeof *m->lam);
    memcpy(m->aam, f->aam, (size_t)f->n_lab * sizeof *m->aam);
    m->link.bytes = sizeof *m + (size_t)n_loc + n_out + (size_t)n_loc * n_cls * 2 + f->n_key * 4 +
                    (size_t)f->n_lab * (256 * 8 + 4) + ((size_t)f->budget + 1) * 4;
    return m;
}

#define MEMO_OUT_BASE ((uint32_t)CM_CHAIN_MAX + 1)  /* out state j labelled MEMO_OUT_BASE + j while kept */

/* A chain's rows have few shapes: the rows of one role at each position (a string's
 * character, an escape's k-th hex digit) lead their classes to their own targets the
 * same way.  A row check names one pair a distinct target and compares the rest of our
 * row with that pair's (row_check), so the shapes are kept with the memo; rows past
 * MEMO_MAX_SHAPES shapes are checked pair by pair. */
#define MEMO_MAX_SHAPES 64
#define MEMO_NO_SHAPE 0xffffu

/* m's rows' shapes (m->shape, m->slot; left NULL when memory is short). */
static void row_shapes(chain_memo *m) {
    uint32_t mc = m->n_cls, n_shapes = 0;
    uint16_t *shape = malloc((size_t)m->n_loc * sizeof *shape);
    uint8_t *slot = malloc((size_t)MEMO_MAX_SHAPES * mc);
    if (!shape || !slot) {
        free(shape);
        free(slot);
        return;
    }
    uint8_t cur[256], table[2 * MEMO_MAX_SHAPES] = {0};  /* shapes by hash: shape + 1, 0 empty */
    uint16_t seen[256];  /* distinct targets of the row so far */
    for (uint32_t i = 0; i < m->n_loc; i++) {
        const uint16_t *row = m->rows + (size_t)i * mc;
        uint32_t n_seen = 0;
        uint64_t h = 0;
        for (uint32_t d = 0; d < mc; d++) {
            uint32_t k = 0;
            while (k < n_seen && seen[k] != row[d]) k++;
            if (k == n_seen) seen[n_seen++] = row[d];
            cur[d] = (uint8_t)k;
            h = (h ^ k) * 0x100000001B3ULL;
        }
        uint32_t at = (uint32_t)(h >> 32) % (2 * MEMO_MAX_SHAPES), x = MEMO_NO_SHAPE;
        for (; table[at]; at = (at + 1) % (2 * MEMO_MAX_SHAPES))
            if (!memcmp(slot + (size_t)(table[at] - 1) * mc, cur, mc)) {
                x = table[at] - 1u;
                break;
            }
        if (x == MEMO_NO_SHAPE && n_shapes < MEMO_MAX_SHAPES) {
            memcpy(slot + (size_t)n_shapes * mc, cur, mc);
            x = n_shapes++;
            table[at] = (uint8_t)(x + 1);
        }
        shape[i] = (uint16_t)x;
    }
    m->shape = shape;
    m->slot = slot;
    m->n_shapes = n_shapes;
}

/* The memo of the chain cs just analysed into f (its labels still set, f's
 * head and out targets by state); NULL when it has none (past the limits,
 * memory short).  Locals keep the scan's numbers: each but the first is met
 * from one of a lower number (the pair walk's and the last positions' order),
 * so memo_match names every local before it reads its row; out states are
 * numbered as met. */
static chain_memo *memo_keep(const chain_scan *cs, const chain_form *f, uint64_t hash) {
    const cm_grammar *g = cs->g;
    const cm_tables *t = &g->t;
    uint32_t *lab = g->cache->loop_lab, nc = t->n_classes, n = cs->n, n_out = 0;
    uint16_t *rows = malloc((size_t)n * nc * sizeof *rows);
    uint32_t *outs = NULL, *prev = NULL;
    size_t cap_outs = 0, cap_prev = 0;
    bool ok = rows && n + 1 < MEMO_DEAD;
    for (uint32_t i = 0; ok && i < n; i++) {
        const int32_t *row = t->trans + (size_t)cs->st[i] * nc;
        uint16_t *mrow = rows + (size_t)i * nc;
        for (uint32_t c = 0; ok && c < nc; c++) {
            int32_t r = row[c];
            uint32_t x = r < 0 ? NONE : lab[r];
            if (r < 0) {
                mrow[c] = MEMO_DEAD;
            } else if (x < CM_CHAIN_MAX) {
                mrow[c] = (uint16_t)x;
            } else if (x >= MEMO_OUT_BASE && x < MEMO_OUT_BASE + n_out) {
                mrow[c] = (uint16_t)(n + x - MEMO_OUT_BASE);
            } else if (n + n_out + 1 >= MEMO_DEAD ||
                       cm_grow_to((void **)&outs, &cap_outs, n_out + 1, sizeof *outs) ||
                       cm_grow_to((void **)&prev, &cap_prev, n_out + 1, sizeof *prev)) {
                ok = false;
            } else {
                outs[n_out] = (uint32_t)r;
                prev[n_out] = x;
                lab[r] = MEMO_OUT_BASE + n_out;
                mrow[c] = (uint16_t)(n + n_out++);
            }
        }
    }
    chain_memo *m = ok ? memo_alloc(nc, n, n_out, f) : NULL;
    for (uint32_t j = 0; m && j < (size_t)f->n_lab * 256; j++) {
        int32_t r = f->to[j];
        uint32_t x = r < 0 ? NONE : lab[r];
        if (r >= 0 && (x < MEMO_OUT_BASE || x >= MEMO_OUT_BASE + n_out)) {  /* cannot happen: an out target */
            cm_chain_memo_release(&m->link);
            m = NULL;
        } else {
            m->to[j] = r < 0 ? -1 : (int32_t)(x - MEMO_OUT_BASE);
        }
    }
    for (uint32_t j = 0; m && j <= f->budget; j++) m->head[j] = lab[f->head[j]];
    if (m) {
        memcpy(m->byte_class, t->byte_class, 256);
        free(m->rows);
        m->rows = rows;
        rows = NULL;
        row_shapes(m);
        for (uint32_t i = 0; i < n; i++) m->flags[i] = state_flags(g, cs->st[i]);
        for (uint32_t j = 0; j < n_out; j++) m->flags[n + j] = state_flags(g, outs[j]) & OUT_FLAGS;
        m->open = cs->open != NONE;
        m->link.hash = hash;
    }
    for (uint32_t j = 0; j < n_out; j++) lab[outs[j]] = prev[j];
    free(rows);
    free(outs);
    free(prev);
    return m;
}

/* f: memo m's form renamed by new_of (m's locals and outs to state numbers), its
 * head the n_head positions from m's position first on, its budget budget; false:
 * out of memory (f's arrays freed). */
static bool form_renamed(chain_form *f, const chain_memo *m, const uint32_t *new_of, uint32_t first,
                         uint32_t n_head, uint32_t budget) {
    f->n_key = m->n_key;
    f->n_lab = m->n_lab;
    f->budget = budget;
    f->key = malloc(m->n_key * sizeof *f->key);
    f->lam = malloc((size_t)m->n_lab * 256 * sizeof *f->lam);
    f->to = malloc((size_t)m->n_lab * 256 * sizeof *f->to);
    f->aam = malloc((size_t)m->n_lab * sizeof *f->aam);
    f->head = malloc((size_t)n_head * sizeof *f->head);
    if (!f->key || !f->lam || !f->to || !f->aam || !f->head) {
        form_free(f);
        return false;
    }
    memcpy(f->key, m->key, m->n_key * sizeof *f->key);
    f->key_hash = m->key_hash;
    f->hashed = true;
    memcpy(f->lam, m->lam, (size_t)m->n_lab * 256 * sizeof *f->lam);
    memcpy(f->aam, m->aam, (size_t)m->n_lab * sizeof *f->aam);
    for (size_t j = 0; j < (size_t)m->n_lab * 256; j++)
        f->to[j] = m->to[j] < 0 ? -1 : (int32_t)new_of[m->n_loc + (uint32_t)m->to[j]];
    for (uint32_t j = 0; j < n_head; j++) f->head[j] = new_of[m->head[first + j]];
    return true;
}

/* The classes both grammars cut the bytes into: one pair (ours in pc, memo m's in
 * pm) each, *n of them; false: out of memory. */
static bool class_pairs(const cm_tables *t, const chain_memo *m, uint16_t *pc, uint16_t *pm, uint32_t *n) {
    uint32_t mc = m->n_cls;
    uint8_t *seen = calloc((size_t)t->n_classes * mc, 1);
    if (!seen) return false;
    for (int b = 0; b < 256; b++) {
        uint32_t c = t->byte_class[b], d = m->byte_class[b];
        if (seen[(size_t)c * mc + d]) continue;
        seen[(size_t)c * mc + d] = 1;
        pc[*n] = (uint16_t)c;
        pm[(*n)++] = (uint16_t)d;
    }
    free(seen);
    return true;
}

/* Not the rows: does every byte that follows state's rule end memo m's orbits
 * dead where an orbit may end the rule? */
static bool follows_fit(const cm_grammar *g, const chain_memo *m, uint32_t state) {
    uint32_t rule = g->t.state_rule[state];
    const uint32_t *k = m->key + 2;
    for (uint32_t l = 0; l < m->n_lab; l++, k += 2 + 3 * 256)
        for (int b = 0; k[1] != ACC_NEVER && b < 256; b++)
            if (cm_follows(g, rule, (uint8_t)b) && k[2 + 3 * b] != CODE_DEAD) return false;
    return true;
}

/* One class pair of a row: the memo's target e against ours r.  -1: they differ
 * (out_flags: an out state's flags checked when met, as a late failure costs), 0:
 * consistent with the names so far, 1: e newly named r. */
static inline int pair_name(const cm_grammar *g, const chain_memo *m, uint32_t e, int32_t r, uint32_t *new_of,
                            uint32_t *lab, bool out_flags) {
    if (e == MEMO_DEAD || r < 0) return e == MEMO_DEAD && r < 0 ? 0 : -1;
    if (lab[r] != UINT32_MAX) return lab[r] == e ? 0 : -1;
    if (new_of[e] != NONE) return -1;
    if (out_flags && e >= m->n_loc && (state_flags(g, (uint32_t)r) & OUT_FLAGS) != m->flags[e]) return -1;
    new_of[e] = (uint32_t)r;
    lab[r] = e;
    return 1;
}

/* One row against the memo's: every class pair named consistently (pair_name).  A pair
 * whose targets are the previous pair's is skipped: pair_name would find them named so
 * already (0, nothing changed), so the answer is the same.  Newly named locals are
 * appended to queue (when given).  False: they differ. */
static bool row_fits(const cm_grammar *g, const chain_memo *m, const int32_t *row, const uint16_t *mrow,
                     const uint16_t *pc, const uint16_t *pm, uint32_t n_pairs, uint32_t *new_of, uint32_t *lab,
                     bool out_flags, uint32_t *queue, uint32_t *n_q) {
    uint32_t pe = NONE;
    int32_t pr = INT32_MIN;
    for (uint32_t p = 0; p < n_pairs; p++) {
        uint32_t e = mrow[pm[p]];
        int32_t r = row[pc[p]];
        if (e == pe && r == pr) continue;
        pe = e;
        pr = r;
        int named = pair_name(g, m, e, r, new_of, lab, out_flags);
        if (named < 0) return false;
        if (named > 0 && queue && e < m->n_loc) queue[(*n_q)++] = e;
    }
    return true;
}

/* How a check reads the rows of each of memo m's shapes against ours (row_check): per
 * shape, for each of its slots in the order pairs first meet them (names are made as
 * row_fits makes them), the first such pair, then the classes of the slot's other pairs
 * (our row must lead each to the first pair's state, as the memo's row leads its classes). */
typedef struct shape_plans {
    const chain_memo *m;
    const uint16_t *pc, *pm;
    uint32_t n_pairs;
    uint16_t *plans;    /* [n_shapes * 4 * n_pairs]: per shape (class, memo class) of each slot's
                         * first pair, where each slot's other classes end, those classes; NULL: none */
    uint16_t *n_first;  /* [n_shapes]: its slots, UINT16_MAX: not planned yet */
    uint16_t *gather;   /* [n_shapes * 2 * n_pad]: per shape each other class, then its slot's first
                         * pair's class, each run padded with class 0 to n_pad; NULL: the scalar loop */
    uint32_t n_pad;     /* n_pairs rounded up to a multiple of 8 */
    uint8_t *perm;      /* [n_shapes * perm_pad]: per shape each class of ours its slot (the order of
                         * the slot's first pair), padded with 0; 0xff first: the shape has more than 8
                         * slots; NULL: none (a class of ours in two pairs, no AVX2, the switch off, the
                         * gathers on) */
    uint32_t n_cls;     /* our classes */
    uint32_t perm_pad;  /* n_cls rounded up to a multiple of 8 */
    size_t n_rows;      /* rows checked by a plan */
    size_t n_gathered;  /* of them, rows whose other classes were compared 8 at a time */
    size_t n_permuted;  /* of them, rows whose classes were compared by permutes */
} shape_plans;

/* A row's other classes against their slots' first pairs' 8 lanes at a time: AVX2 gathers
 * where the CPU has them (a string position's row: ~40 other classes, ~200 instructions a
 * row one by one, of ~225), else the plan's scalar loop.  Same answer either way: whether any
 * other class's target differs, bit for bit, from its slot's first pair's. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CM_ROW_GATHER 1
__attribute__((target("avx2"))) static uint32_t others_differ_avx2(const int32_t *row, const uint16_t *oc,
                                                                 const uint16_t *fc, uint32_t n) {
    __m256i acc = _mm256_setzero_si256();
    for (uint32_t at = 0; at < n; at += 8) {
        __m256i io = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(oc + at)));
        __m256i jf = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(fc + at)));
        __m256i a = _mm256_i32gather_epi32((const int *)row, io, 4);
        __m256i b = _mm256_i32gather_epi32((const int *)row, jf, 4);
        acc = _mm256_or_si256(acc, _mm256_xor_si256(a, b));
    }
    return !_mm256_testz_si256(acc, acc);
}

static bool row_gather_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* Every class of our row against its slot's target, 8 lanes at a time without a gather:
 * our row loaded as it lies, each lane's slot (perm, one byte a class) picking the slot's
 * target out of the (at most 8) first pairs' targets with one permute.  The same answer as
 * the others compared one by one: whether any class's target differs, bit for bit, from its
 * slot's first pair's (a first pair's own lane compares its target with itself). */
__attribute__((target("avx2"))) static inline uint32_t slots_differ_avx2(const int32_t *row, const uint8_t *perm,
                                                                const int32_t *first, uint32_t n) {
    __m256i t = _mm256_loadu_si256((const __m256i *)(const void *)first), acc = _mm256_setzero_si256();
    uint32_t at = 0;
    for (; at + 8 <= n; at += 8) {
        __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(perm + at)));
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(row + at));
        acc = _mm256_or_si256(acc, _mm256_xor_si256(a, _mm256_permutevar8x32_epi32(t, idx)));
    }
    if (at < n) {  /* the last classes: their lanes loaded under a mask, the rest masked out (perm
                    * is padded to a multiple of 8) */
        __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - at)), lane);
        __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(perm + at)));
        __m256i a = _mm256_maskload_epi32(row + at, live);
        __m256i d = _mm256_xor_si256(a, _mm256_permutevar8x32_epi32(t, idx));
        acc = _mm256_or_si256(acc, _mm256_and_si256(d, live));
    }
    return !_mm256_testz_si256(acc, acc);
}

/* The same for a shape of 9 to 16 slots: each lane's slot picked out of the first 8 first
 * pairs' targets and out of the next 8 (a permute reads its index's low 3 bits), the second
 * taken where the slot is 8 or more.  The same answer as slots_differ_avx2 would give with
 * 16 lanes of targets (a string position's main state: ~10 slots, its ~30 other classes
 * compared one by one otherwise, ~300 instructions a row). */
__attribute__((target("avx2"))) static inline uint32_t slots16_differ_avx2(const int32_t *row, const uint8_t *perm,
                                                                  const int32_t *first, uint32_t n) {
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)first),
            hi = _mm256_loadu_si256((const __m256i *)(const void *)(first + 8)), acc = _mm256_setzero_si256(),
            seven = _mm256_set1_epi32(7);
    for (uint32_t at = 0; at < n; at += 8) {
        __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(perm + at)));
        __m256i t = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(lo, idx), _mm256_permutevar8x32_epi32(hi, idx),
                                       _mm256_cmpgt_epi32(idx, seven));
        __m256i a;
        if (at + 8 <= n) {
            a = _mm256_loadu_si256((const __m256i *)(const void *)(row + at));
        } else {  /* the last classes under a mask, the rest masked out (perm padded with 0) */
            __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - at)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            a = _mm256_and_si256(_mm256_maskload_epi32(row + at, live), live);
            t = _mm256_and_si256(t, live);
        }
        acc = _mm256_or_si256(acc, _mm256_xor_si256(a, t));
    }
    return !_mm256_testz_si256(acc, acc);
}

/* Every class of our row against its slot's target by permutes, a shape of at most 16 slots. */
__attribute__((target("avx2"))) static inline uint32_t row_differs(const int32_t *row, const uint8_t *perm,
                                                          const int32_t *first, uint32_t n_first, uint32_t n) {
    return n_first > 8 ? slots16_differ_avx2(row, perm, first, n) : slots_differ_avx2(row, perm, first, n);
}
#endif

static atomic_int g_row_gather = 0;  /* off: on this AMD EPYC a gather is microcoded, +9-10 % wall on the chain starts (design.md §7) */
static atomic_size_t g_gathered_rows;  /* rows whose other classes were gathered (the tests read it) */

void cm_chain_row_gather_enable(int on) { atomic_store(&g_row_gather, on); }

size_t cm_chain_gathered_rows(void) { return atomic_load(&g_gathered_rows); }

static atomic_int g_row_permute = 1;
static atomic_size_t g_permuted_rows;  /* rows compared class by class with permutes (the tests read it) */

void cm_chain_row_permute_enable(int on) { atomic_store(&g_row_permute, on); }

static atomic_int g_row_permute16 = 1;  /* shapes of 9 to 16 slots permuted too (slots16_differ_avx2) */

void cm_chain_row_permute16_enable(int on) { atomic_store(&g_row_permute16, on); }

static atomic_int g_rows_fused = 1;  /* a check's permuted rows in one loop (rows_permuted) */

void cm_chain_rows_fused_enable(int on) { atomic_store(&g_rows_fused, on); }

size_t cm_chain_permuted_rows(void) { return atomic_load(&g_permuted_rows); }

static void plans_init(shape_plans *sp, const chain_memo *m, const uint16_t *pc, const uint16_t *pm,
                       uint32_t n_pairs, uint32_t n_cls) {
    *sp = (shape_plans){m, pc, pm, n_pairs, NULL, NULL, NULL, 0, NULL, n_cls, (n_cls + 7) & ~7u, 0, 0, 0};
    if (!m->shape || !n_pairs || !atomic_load(&g_row_shapes)) return;
    sp->plans = malloc((size_t)m->n_shapes * 4 * n_pairs * sizeof *sp->plans);
    sp->n_first = malloc((size_t)m->n_shapes * sizeof *sp->n_first);
    if (!sp->plans || !sp->n_first) {
        free(sp->plans);
        free(sp->n_first);
        sp->plans = sp->n_first = NULL;
        return;
    }
#ifdef CM_ROW_GATHER
    if (atomic_load(&g_row_gather) && row_gather_supported()) {
        sp->n_pad = (n_pairs + 7) & ~7u;
        sp->gather = malloc((size_t)m->n_shapes * 2 * sp->n_pad * sizeof *sp->gather);  /* NULL: scalar */
    }
    /* the permutes read our row whole: each class of ours must be in exactly one pair (ours
     * refine the memo's classes: always on the pinned chains) */
    uint8_t once[256] = {0};
    bool each_once = n_pairs == n_cls;
    for (uint32_t p = 0; each_once && p < n_pairs; p++) each_once = pc[p] < n_cls && !once[pc[p]]++;
    if (!sp->gather && each_once && atomic_load(&g_row_permute) && row_gather_supported())
        sp->perm = malloc((size_t)m->n_shapes * sp->perm_pad);  /* NULL: the scalar loop */
#endif
    for (uint32_t x = 0; x < m->n_shapes; x++) sp->n_first[x] = UINT16_MAX;
}

static void plans_done(shape_plans *sp) {
    if (sp->n_rows) atomic_fetch_add(&g_shaped_rows, sp->n_rows);
    if (sp->n_gathered) atomic_fetch_add(&g_gathered_rows, sp->n_gathered);
    if (sp->n_permuted) atomic_fetch_add(&g_permuted_rows, sp->n_permuted);
    free(sp->perm);
    free(sp->plans);
    free(sp->n_first);
    free(sp->gather);
}

static void plan_shape(shape_plans *sp, uint32_t x) {
    uint32_t np = sp->n_pairs, n_first = 0, n_other[256] = {0};
    const uint8_t *slot = sp->m->slot + (size_t)x * sp->m->n_cls;
    uint16_t *pl = sp->plans + (size_t)x * 4 * np, *ends = pl + 2 * np, *others = pl + 3 * np, order[256];
    for (uint32_t k = 0; k < 256; k++) order[k] = UINT16_MAX;
    for (uint32_t p = 0; p < np; p++) {  /* each slot's first pair, in pair order */
        uint32_t k = slot[sp->pm[p]];
        if (order[k] == UINT16_MAX) {
            order[k] = (uint16_t)n_first;
            pl[2 * n_first] = sp->pc[p];
            pl[2 * n_first++ + 1] = sp->pm[p];
        } else {
            n_other[order[k]]++;
        }
    }
    for (uint32_t j = 0, at = 0; j < n_first; j++) ends[j] = (uint16_t)(at += n_other[j]);
    for (uint32_t p = np; p-- > 0;) {  /* the others, by slot (filled from each slot's end) */
        uint32_t j = order[slot[sp->pm[p]]];
        if (pl[2 * j] != sp->pc[p] || pl[2 * j + 1] != sp->pm[p]) others[ends[j] - n_other[j]--] = sp->pc[p];
    }
    if (sp->gather) {  /* the others again, each beside its slot's first pair's class, padded */
        uint16_t *oc = sp->gather + (size_t)x * 2 * sp->n_pad, *fc = oc + sp->n_pad;
        uint32_t at = 0;
        for (uint32_t j = 0; j < n_first; j++)
            for (; at < ends[j]; at++) {
                oc[at] = others[at];
                fc[at] = pl[2 * j];
            }
        for (; at < sp->n_pad; at++) oc[at] = fc[at] = 0;  /* row[0] ^ row[0]: no difference */
    }
    if (sp->perm) {  /* each class of ours (in one pair each) its slot's order; 0xff: past 8 slots (16
                      * with the second permute) */
        uint8_t *pr = sp->perm + (size_t)x * sp->perm_pad;
        memset(pr, 0, sp->perm_pad);
        if (n_first > (atomic_load(&g_row_permute16) ? 16u : 8u))
            pr[0] = 0xff;
        else
            for (uint32_t p = 0; p < np; p++) pr[sp->pc[p]] = (uint8_t)order[slot[sp->pm[p]]];
    }
    sp->n_first[x] = (uint16_t)n_first;
}

/* row_fits of our row against memo local x's, by x's shape's plan where it has one: the
 * same answer and the same names in the same order (a pair of a slot met before has the
 * slot's target; ours must then be the slot's first pair's, as pair_name would require). */
static bool row_check(shape_plans *sp, const cm_grammar *g, uint32_t x, const int32_t *row, uint32_t *new_of,
                      uint32_t *lab, bool out_flags, uint32_t *queue, uint32_t *n_q) {
    const chain_memo *m = sp->m;
    const uint16_t *mrow = m->rows + (size_t)x * m->n_cls;
    uint32_t s = sp->plans ? m->shape[x] : MEMO_NO_SHAPE;
    if (s == MEMO_NO_SHAPE)
        return row_fits(g, m, row, mrow, sp->pc, sp->pm, sp->n_pairs, new_of, lab, out_flags, queue, n_q);
    if (sp->n_first[s] == UINT16_MAX) plan_shape(sp, s);
    const uint16_t *pl = sp->plans + (size_t)s * 4 * sp->n_pairs, *ends = pl + 2 * sp->n_pairs,
                   *others = pl + 3 * sp->n_pairs;
    uint32_t n_first = sp->n_first[s], differ = 0;
    sp->n_rows++;
#ifdef CM_ROW_GATHER
    if (sp->gather) {  /* the names first, as below; then the others all at once */
        sp->n_gathered++;
        for (uint32_t k = 0; k < n_first; k++) {
            uint32_t e = mrow[pl[2 * k + 1]];
            int named = pair_name(g, m, e, row[pl[2 * k]], new_of, lab, out_flags);
            if (named < 0) return false;
            if (named > 0 && queue && e < m->n_loc) queue[(*n_q)++] = e;
        }
        uint32_t n_others = n_first ? ends[n_first - 1] : 0;
        const uint16_t *oc = sp->gather + (size_t)s * 2 * sp->n_pad;
        differ = n_others ? others_differ_avx2(row, oc, oc + sp->n_pad, n_others) : 0;
    } else if (sp->perm && sp->perm[(size_t)s * sp->perm_pad] != 0xff) {  /* the names, then every class */
        sp->n_permuted++;
        int32_t first[16] = {0};
        for (uint32_t k = 0; k < n_first; k++) {
            uint32_t e = mrow[pl[2 * k + 1]];
            int32_t r = row[pl[2 * k]];
            int named = pair_name(g, m, e, r, new_of, lab, out_flags);
            if (named < 0) return false;
            if (named > 0 && queue && e < m->n_loc) queue[(*n_q)++] = e;
            first[k] = r;
        }
        differ = row_differs(row, sp->perm + (size_t)s * sp->perm_pad, first, n_first, sp->n_cls);
    } else
#endif
    for (uint32_t k = 0, at = 0; k < n_first; k++) {
        uint32_t e = mrow[pl[2 * k + 1]];
        int32_t r = row[pl[2 * k]];
        int named = pair_name(g, m, e, r, new_of, lab, out_flags);
        if (named < 0) return false;
        if (named > 0 && queue && e < m->n_loc) queue[(*n_q)++] = e;
        for (; at < ends[k]; at++) differ |= (uint32_t)(row[others[at]] ^ r);
    }
    for (uint32_t k = 0, at = 0; differ && k < n_first; k++)  /* (dead: any negative target) */
        for (int32_t r = row[pl[2 * k]]; at < ends[k]; at++)
            if (row[others[at]] != r && (row[others[at]] >= 0 || r >= 0)) return false;
    return true;
}

#ifdef CM_ROW_GATHER
/* A check's rows where the plans permute (memo_match's, prefix_match's, suffix_match's loops):
 * the locals order[0 .. *n_order) in turn (order NULL: 0, 1, ...; *n_order read at each step, as
 * suffix_match's queue grows), each named by a row read before; for each its flags, then, unless
 * dist puts it at the depth or past, its row_check -- in one loop, the same verdict and the same
 * names in the same order as the callers' loops (a row of no shape, or of more than 8 slots, goes
 * to row_check itself; a row whose classes differ from their slots' targets somewhere, to the
 * plan's exact loop, which tells dead targets apart). */
__attribute__((target("avx2"))) static bool rows_permuted(shape_plans *sp, const cm_grammar *g, const uint32_t *order,
                                                          const uint32_t *n_order, const uint16_t *dist,
                                                          uint32_t depth, bool out_flags, uint32_t *new_of,
                                                          uint32_t *lab, uint32_t *queue, uint32_t *n_q) {
    const chain_memo *m = sp->m;
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes, np = sp->n_pairs;
    size_t n_rows = 0;
    bool ok = true;
    for (uint32_t j = 0; ok && j < *n_order; j++) {
        uint32_t i = order ? order[j] : j, q = new_of[i];
        if (q == NONE || state_flags(g, q) != m->flags[i]) {
            ok = false;
            break;
        }
        if (dist && dist[i] >= depth) continue;
        const int32_t *row = t->trans + (size_t)q * nc;
        uint32_t s = m->shape[i];
        if (s != MEMO_NO_SHAPE && sp->n_first[s] == UINT16_MAX) plan_shape(sp, s);
        if (s == MEMO_NO_SHAPE || sp->perm[(size_t)s * sp->perm_pad] == 0xff) {
            ok = row_check(sp, g, i, row, new_of, lab, out_flags, queue, n_q);
            continue;
        }
        const uint16_t *mrow = m->rows + (size_t)i * m->n_cls, *pl = sp->plans + (size_t)s * 4 * np;
        uint32_t n_first = sp->n_first[s];
        int32_t first[16] = {0};
        n_rows++;
        for (uint32_t k = 0; ok && k < n_first; k++) {
            uint32_t e = mrow[pl[2 * k + 1]];
            int32_t r = row[pl[2 * k]];
            int named = pair_name(g, m, e, r, new_of, lab, out_flags);
            ok = named >= 0;
            if (named > 0 && queue && e < m->n_loc) queue[(*n_q)++] = e;
            first[k] = r;
        }
        if (!ok || !row_differs(row, sp->perm + (size_t)s * sp->perm_pad, first, n_first, nc)) continue;
        const uint16_t *ends = pl + 2 * np, *others = pl + 3 * np;
        for (uint32_t k = 0, at = 0; ok && k < n_first; k++)  /* (dead: any negative target) */
            for (int32_t r = first[k]; ok && at < ends[k]; at++)
                ok = row[others[at]] == r || (row[others[at]] < 0 && r < 0);
    }
    sp->n_rows += n_rows;
    sp->n_permuted += n_rows;
    return ok;
}
#endif

/* A whole chain's check refuses a memo at the first out state whose flags differ, as the prefix
 * and suffix checks do (pair_name's out_flags): off, every row is read first.  Llama-3's pinned
 * string blocks (631 locals) are kept for three followers, and the first one tried has the rows
 * of a JSON Schema string's block and an out state of other flags: that check read every row for
 * nothing.  The same verdict either way (every out state's flags are still required after the
 * rows; follows_fit stays last: read first it cost the checks that fail at their first row more
 * than it saved); the states the checks named, summed, for the tests. */
static atomic_int g_memo_out_early = 1;
static atomic_size_t g_memo_named;

void cm_chain_memo_out_early_enable(int on) { atomic_store(&g_memo_out_early, on); }

size_t cm_chain_memo_named(void) { return atomic_load(&g_memo_named); }

/* Are state's rows memo m's, renamed?  Then f is its analysis, renamed to
 * state's chain (f's arrays allocated; false: none). */
static bool memo_match(const cm_grammar *g, const chain_memo *m, uint32_t state, bool open, chain_form *f) {
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes, n_pairs = 0, n_all = m->n_loc + m->n_out;
    if (m->open != open) return false;
    uint16_t pc[256], pm[256];
    uint32_t *new_of = malloc((size_t)n_all * sizeof *new_of), *lab = g->cache->loop_lab;
    bool ok = new_of && class_pairs(t, m, pc, pm, &n_pairs);
    shape_plans sp;
    plans_init(&sp, m, pc, pm, n_pairs, nc);
    for (uint32_t i = 0; ok && i < n_all; i++) new_of[i] = NONE;
    if (ok) {
        new_of[0] = state;
        lab[state] = 0;
    }
    bool early = atomic_load(&g_memo_out_early) != 0;
#ifdef CM_ROW_GATHER
    if (ok && sp.perm && atomic_load(&g_rows_fused))
        ok = rows_permuted(&sp, g, NULL, &m->n_loc, NULL, 0, early, new_of, lab, NULL, NULL);
    else
#endif
    for (uint32_t i = 0; ok && i < m->n_loc; i++) {
        uint32_t q = new_of[i];
        if (q == NONE || state_flags(g, q) != m->flags[i]) {
            ok = false;
            break;
        }
        ok = row_check(&sp, g, i, t->trans + (size_t)q * nc, new_of, lab, early, NULL, NULL);
    }
    plans_done(&sp);
    for (uint32_t j = m->n_loc; ok && j < n_all; j++)
        ok = new_of[j] != NONE && (state_flags(g, new_of[j]) & OUT_FLAGS) == m->flags[j];
    ok = ok && follows_fit(g, m, state);  /* not the rows */
    size_t named = 0;
    for (uint32_t i = 0; new_of && i < n_all; i++)
        if (new_of[i] != NONE) lab[new_of[i]] = UINT32_MAX, named++;
    atomic_fetch_add_explicit(&g_memo_named, named, memory_order_relaxed);
    ok = ok && form_renamed(f, m, new_of, 0, m->budget + 1, m->budget);
    free(new_of);
    return ok;
}

/* f from a memo of the vocabulary's filed under hash whose rows state's are. */
static bool memo_recall(const cm_grammar *g, uint32_t state, bool open, uint64_t hash, chain_form *f) {
    cm_memo_link *got[CM_MEMO_TRIES];
    size_t n = cm_walk_store_get_memos(g, hash, got, CM_MEMO_TRIES);
    bool ok = false;
    for (size_t i = 0; i < n; i++) {
        if (!ok) ok = memo_match(g, (const chain_memo *)got[i], state, open, f);
        cm_chain_memo_release(got[i]);
    }
    if (ok) atomic_fetch_add(&g_memo_hits, 1);
    return ok;
}

/* ---- a chain's first positions from a kept analysis of another bound ---- */

/* A chain's first position reads tokens of at most max_len bytes, so its entry
 * depends only on the states within max_len bytes of it (a plain walk reads no
 * others).  Where those states' rows are a kept chain's of the same form, and
 * both chains are long enough that no token read from there reaches an end (the
 * form's walk records every need: max_need), the entry is the kept chain's at
 * any budget above max_need, whatever the real bound: a maxLength-300 string
 * is then checked against the pinned long string's first rows, not analysed
 * whole.  A prefix memo is the kept memo with its locals within
 * CM_PREFIX_DEPTH = max_len + CM_PREFIX_EXTRA bytes of the first, breadth first;
 * the check reads the rows of those nearer than the depth, the flags of all of
 * them, and every out state (as memo_match does, on that region).  The chain's
 * positions whose own region lies inside the checked one (distance + max_len
 * within the depth) are kept as an instance of budgets above max_need, so the
 * next positions of a value find their place as they do in an analysed chain.
 * Only forms whose entry does not change with the budget past max_need: no
 * transition alive from a later index (lam, a minLength's exit) and no orbit
 * accepting from one (aam). */
#define CM_PREFIX_EXTRA 16      /* bytes checked past max_len: the positions after the first kept too */
/* Kept chains shorter than this have no prefix memo: the chains they could serve (suffix_first)
 * are as cheap to analyse as to check, and a long string's blocks (~45 positions, each kept
 * whole) would crowd the few memos a hint is looked up in. */
#define CM_SUFFIX_MIN_BUDGET 64

static atomic_size_t g_prefix_hits;  /* first positions taken from prefix memos (the tests read it) */

static atomic_size_t g_suffix_hits;  /* chains taken from a prefix memo's later positions (suffix_first) */

size_t cm_chain_prefix_hits(void) { return atomic_load(&g_prefix_hits) + atomic_load(&g_suffix_hits); }

static uint32_t prefix_depth(const cm_grammar *g) { return g->v->max_len + CM_PREFIX_EXTRA; }

/* The prefix memo of m (held by it), or NULL when m's form is not one (or memory is short). */
static chain_memo *prefix_keep(const cm_grammar *g, chain_memo *m, const chain_form *f, uint64_t hash,
                               uint32_t steps) {
    uint32_t depth = prefix_depth(g);
    if (f->budget < CM_SUFFIX_MIN_BUDGET || depth >= UINT16_MAX) return NULL;
    for (size_t j = 0; j < (size_t)f->n_lab * 256; j++)
        if (f->lam[j] != NO_LAM) return NULL;
    for (uint32_t l = 0; l < f->n_lab; l++)
        if (f->aam[l] != NO_LAM) return NULL;
    chain_memo *a = calloc(1, sizeof *a);
    uint32_t *bfs = malloc((size_t)m->n_loc * sizeof *bfs);
    uint16_t *dist = malloc((size_t)m->n_loc * sizeof *dist);
    if (!a || !bfs || !dist) {
        free(a);
        free(bfs);
        free(dist);
        return NULL;
    }
    for (uint32_t i = 0; i < m->n_loc; i++) dist[i] = UINT16_MAX;
    uint32_t n = 0;
    bfs[n++] = 0;
    dist[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = bfs[i];
        if (dist[x] >= depth) continue;
        const uint16_t *row = m->rows + (size_t)x * m->n_cls;
        for (uint32_t c = 0; c < m->n_cls; c++) {
            uint32_t e = row[c];
            if (e < m->n_loc && dist[e] == UINT16_MAX) {
                dist[e] = (uint16_t)(dist[x] + 1);
                bfs[n++] = e;
            }
        }
    }
    atomic_init(&a->refs, 1);
    cm_chain_memo_hold(&m->link);
    a->of = m;
    a->steps = steps;
    a->bfs = bfs;
    a->n_bfs = n;
    a->dist = dist;
    a->link.hash = hash;
    a->link.bytes = sizeof *a + (size_t)m->n_loc * 6;
    return a;
}

/* Are the rows within the prefix depth of state prefix memo a's, renamed?  Then f is
 * its form (f's arrays allocated; head: the first *n_head positions, whose regions lie
 * inside the checked one) and *bm the kept chain's budget; false: none. */
static bool prefix_match(const cm_grammar *g, const chain_memo *a, uint32_t state, bool open, chain_form *f,
                         uint32_t *n_head, uint32_t *bm) {
    const chain_memo *m = a->of;
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes, n_pairs = 0, n_all = m->n_loc + m->n_out, depth = prefix_depth(g);
    if (m->open != open) return false;
    uint16_t pc[256], pm[256];
    uint32_t *new_of = malloc((size_t)n_all * sizeof *new_of), *lab = g->cache->loop_lab;
    bool ok = new_of && class_pairs(t, m, pc, pm, &n_pairs);
    shape_plans sp;
    plans_init(&sp, m, pc, pm, n_pairs, nc);
    for (uint32_t i = 0; ok && i < n_all; i++) new_of[i] = NONE;
    if (ok) {
        new_of[0] = state;
        lab[state] = 0;
    }
    ok = ok && follows_fit(g, m, state);  /* first what is not the rows (cheap) */
#ifdef CM_ROW_GATHER
    if (ok && sp.perm && atomic_load(&g_rows_fused))
        ok = rows_permuted(&sp, g, a->bfs, &a->n_bfs, a->dist, depth, true, new_of, lab, NULL, NULL);
    else
#endif
    for (uint32_t i = 0; ok && i < a->n_bfs; i++) {  /* nearest first: each named by a row read before */
        uint32_t x = a->bfs[i], q = new_of[x];
        if (q == NONE || state_flags(g, q) != m->flags[x]) {
            ok = false;
            break;
        }
        if (a->dist[x] >= depth) continue;  /* at the depth: a token's last byte may lead here, none reads on */
        ok = row_check(&sp, g, x, t->trans + (size_t)q * nc, new_of, lab, true, NULL, NULL);
    }
    plans_done(&sp);
    for (uint32_t j = m->n_loc; ok && j < n_all; j++)  /* every out state met, as the kept chain's */
        ok = new_of[j] != NONE && (state_flags(g, new_of[j]) & OUT_FLAGS) == m->flags[j];
    for (uint32_t i = 0; new_of && i < n_all; i++)
        if (new_of[i] != NONE) lab[new_of[i]] = UINT32_MAX;
    uint32_t h = 0;  /* positions whose region (max_len bytes on) was checked */
    while (ok && h <= m->budget && a->dist[m->head[h]] != UINT16_MAX &&
           (uint32_t)a->dist[m->head[h]] + g->v->max_len <= depth)
        h++;
    ok = ok && h > 0;
    ok = ok && form_renamed(f, m, new_of, 0, h, 0);  /* (budget: set by the caller from the walk) */
    if (ok) {
        *n_head = h;
        *bm = m->budget;
    }
    free(new_of);
    return ok;
}

/* The entry of `state` from a prefix memo filed under hash: 1 done, 0 none fits, < 0 error. */
static int prefix_first(const cm_grammar *g, uint32_t state, bool open, uint64_t hash, cm_walk *w) {
    cm_memo_link *got[CM_MEMO_TRIES];
    size_t n = cm_walk_store_get_memos(g, hash, got, CM_MEMO_TRIES);
    chain_form f = {0};
    uint32_t n_head = 0, bm = 0;
    bool ok = false;
    for (size_t i = 0; i < n; i++) {  /* (a kept chain no longer than the region serves shorter ones) */
        const chain_memo *a = (const chain_memo *)got[i];
        if (!ok && a->of->budget > prefix_depth(g)) ok = prefix_match(g, a, state, open, &f, &n_head, &bm);
        cm_chain_memo_release(got[i]);
    }
    if (!ok) return 0;
    int rc = CM_OK;
    const cm_loop_walk *lw = chain_shared(g, &f, &rc);  /* the kept chain's walk: the vocabulary's */
    int64_t be = lw ? (int64_t)lw->chain->w->max_need + 1 : 0, h = (int64_t)n_head - 1;
    if (be < 0) be = 0;
    if (lw && (int64_t)bm - be < h) h = (int64_t)bm - be;  /* the kept chain's budgets there above max_need */
    if (lw && h >= 0 && be + h < CM_CHAIN_MAX) {
        f.budget = (uint32_t)(be + h);
        rc = chain_assemble(g, state, (int32_t)f.budget, f.lam, f.to, f.aam, lw->chain, -1, !open, w);
        lw->chain->n_entries++;
        keep_instance(lw->chain, &f, (uint32_t)h + 1);
        atomic_fetch_add(&g_prefix_hits, 1);
    } else {
        lw = NULL;
    }
    form_free(&f);
    return rc ? rc : lw ? 1 : 0;
}

/* A chain shorter than a prefix memo's region: the kept chain's later positions.  Where the
 * states a position reaches (the rest of its chain, every one) have the rows of the kept
 * chain's position p, renamed -- p found by the main byte's steps, checked with every row --
 * its entries are the kept chain's there (the same model with budget B - p: every state a
 * walk from it reads was checked), so it takes the kept form with that budget and the kept
 * head orbit from p on, as an analysis of its own would give.  Each state is named from the
 * row that first leads to it (pairs breadth first), so no order is kept with the memo.
 * 1 done, 0 none fits, < 0 error. */
static bool suffix_match(const cm_grammar *g, const chain_memo *m, uint32_t p, uint32_t state, chain_form *f) {
    const cm_tables *t = &g->t;
    uint32_t nc = t->n_classes, n_pairs = 0, n_all = m->n_loc + m->n_out, n_q = 0;
    uint16_t pc[256], pm[256];
    uint32_t *new_of = malloc((size_t)n_all * sizeof *new_of), *lab = g->cache->loop_lab;
    uint32_t *queue = malloc((size_t)m->n_loc * sizeof *queue);
    bool ok = new_of && queue && !m->open && class_pairs(t, m, pc, pm, &n_pairs);
    shape_plans sp;
    plans_init(&sp, m, pc, pm, n_pairs, nc);
    ok = ok && follows_fit(g, m, state);  /* first what is not the rows (cheap) */
    for (uint32_t i = 0; new_of && i < n_all; i++) new_of[i] = NONE;
    if (ok) {
        new_of[m->head[p]] = state;
        lab[state] = m->head[p];
        queue[n_q++] = m->head[p];
    }
#ifdef CM_ROW_GATHER
    if (ok && sp.perm && atomic_load(&g_rows_fused))
        ok = rows_permuted(&sp, g, queue, &n_q, NULL, 0, true, new_of, lab, queue, &n_q);
    else
#endif
    for (uint32_t i = 0; ok && i < n_q; i++) {
        uint32_t x = queue[i], q = new_of[x];
        if (state_flags(g, q) != m->flags[x]) {
            ok = false;
            break;
        }
        ok = row_check(&sp, g, x, t->trans + (size_t)q * nc, new_of, lab, true, queue, &n_q);
    }
    plans_done(&sp);
    for (uint32_t j = m->n_loc; ok && j < n_all; j++)  /* every out state met, as the kept chain's */
        ok = new_of[j] != NONE && (state_flags(g, new_of[j]) & OUT_FLAGS) == m->flags[j];
    for (uint32_t i = 0; new_of && i < n_all; i++)
        if (new_of[i] != NONE) lab[new_of[i]] = UINT32_MAX;
    uint32_t n_head = m->budget - p + 1;
    ok = ok && form_renamed(f, m, new_of, p, n_head, m->budget - p);
    for (uint32_t j = 0; ok && j < n_head; j++) ok = f->head[j] != NONE;  /* (met: later on s's orbit) */
    if (!ok) form_free(f);
    free(new_of);
    free(queue);
    return ok;
}

static int suffix_first(const cm_grammar *g, uint32_t state, uint64_t hash, uint32_t steps, cm_walk *w) {
    cm_memo_link *got[CM_MEMO_TRIES];
    size_t n = cm_walk_store_get_memos(g, hash, got, CM_MEMO_TRIES);
    chain_form f = {0};
    bool ok = false;
    for (size_t i = 0; i < n; i++) {
        const chain_memo *a = (const chain_memo *)got[i];
        uint32_t p = a->steps - steps;
        if (!ok && a->steps > steps && p + CM_CHAIN_MIN_BUDGET <= a->of->budget)
            ok = suffix_match(g, a->of, p, state, &f);
        cm_chain_memo_release(got[i]);
    }
    if (!ok) return 0;
    int rc = CM_OK;
    const cm_loop_walk *lw = chain_shared(g, &f, &rc);
    if (lw) {
        rc = chain_assemble(g, state, (int32_t)f.budget, f.lam, f.to, f.aam, lw->chain,
                            wrap_budget(g, state, lw, f.head, f.budget, f.budget + 1), true, w);
        lw->chain->n_entries++;
        keep_instance(lw->chain, &f, f.budget + 1);
        atomic_fetch_add(&g_suffix_hits, 1);
    }
    form_free(&f);
    return rc ? rc : lw ? 1 : 0;
}

/* The entry walk of `state` as the first position of a chain (its calls, if
 * open, left out): 1 done, 0 no chain, < 0 error. */
static int chain_first(const cm_grammar *g, uint32_t state, bool open, cm_walk *w) {
    uint32_t cand[CM_CHAIN_TRIES], n_cand = next_positions(g, state, cand);
    chain_form f = {0};
    uint64_t hint = 0, prefix = 0;
    uint32_t steps = 0;
    bool memo = n_cand && atomic_load(&g_chain_memo) && memo_key(g, state, cand[0], open, &hint, &prefix, &steps);
    /* first the region a first position reads, then the whole chain; not where the main byte's
     * path ends inside the region (a prefix memo's goes on past it: its check would fail) */
    if (memo && steps + 1 >= prefix_depth(g)) {
        int got = prefix_first(g, state, open, prefix, w);
        if (got) return got;
    }
    bool ok = memo && memo_recall(g, state, open, hint, &f);
    if (!ok && memo && !open) {  /* a shorter chain: the later positions of a prefix memo's */
        int got = suffix_first(g, state, prefix, steps, w);
        if (got) return got;
    }
    chain_memo *kept = NULL, *pre = NULL;
    for (uint32_t i = 0; i < n_cand && !ok; i++) {
        chain_scan cs = {.g = g, .open = open ? state : NONE};
        ok = pair_walk(&cs, state, cand[i]) && cs.inv[0] == NONE && head_budget(&cs) >= CM_CHAIN_MIN_BUDGET &&
             last_positions(&cs) && orbits(&cs) && chain_form_of(&cs, 0, &f);
        if (ok && memo && cm_walk_store_memo_wanted(g, hint)) kept = memo_keep(&cs, &f, hint);
        scan_free(&cs);
    }
    if (kept) {  /* its key's hash, made with it, serves the lookup below */
        f.key_hash = kept->key_hash;
        f.hashed = true;
    }
    if (kept && cm_walk_store_priming(g)) pre = prefix_keep(g, kept, &f, prefix, steps);
    if (kept) cm_walk_store_put_memo(g, &kept->link);
    if (pre) cm_walk_store_put_memo(g, &pre->link);
    if (!ok) return 0;
    int rc = CM_OK;
    const cm_loop_walk *lw = chain_shared(g, &f, &rc);
    if (lw) {
        int64_t past = 0;
        bool known = false;
        size_t n_insts = lw->chain->n_insts;
        rc = assemble_past(g, state, (int32_t)f.budget, f.lam, f.to, f.aam, lw,
                           wrap_budget(g, state, lw, f.head, f.budget, f.budget + 1), !open, &past, &known, w);
        lw->chain->n_entries++;
        keep_instance(lw->chain, &f, f.budget + 1);
        if (lw->chain->n_insts > n_insts) {
            lw->chain->insts[n_insts].past = past;
            lw->chain->insts[n_insts].past_known = known;
        }
    }
    free(f.head);
    free(f.lam);
    free(f.to);
    free(f.aam);
    return rc ? rc : lw ? 1 : 0;
}

int cm_chain_entry(const cm_grammar *g, uint32_t state, cm_walk *w) {
    if (!g->solo[state]) return 0;
    const chain_inst *inst;
    uint32_t at;
    cm_loop_walk *found = find_position(g, state, &inst, &at);
    if (found) {
        chain_inst *x = (chain_inst *)inst;  /* (its threshold kept with it) */
        int rc = assemble_past(g, state, (int32_t)(inst->budget - at), inst->lam, inst->to, inst->aam, found,
                               wrap_budget(g, state, found, inst->head, inst->budget, inst->n_head), true, &x->past,
                               &x->past_known, w);
        found->chain->n_entries++;
        return rc ? rc : 1;
    }
    return chain_first(g, state, false, w);
}

/* ---- a block boundary's byte walk from its string start's analysis (issue 12, session 43) ----
 *
 * A long string's start is composed (cm_compose): its calls of the counting rules are parts,
 * and its byte edges -- the partial tail x{0,B-1} and the closing quote -- are the chain's walk
 * from the state with its calls left out (cm_chain_bytes: chain_first, ~0.59 M instructions at
 * Llama-3, of which ~0.45 M the analysis: the vocabulary memo's check of the tail's rows, their
 * renaming and the shared walk's lookup; the rest the assembly).  Inside one value rule every
 * block boundary's state (after `P_j`, whose rest is `(P_0|e) ... x{0,B-1} "`) reads its bytes
 * into the same states as the string's start, so its tail was analysed again at each boundary
 * (sp_4:121, after 92 characters of a maxLength-2000 string).  Such a state s and a kept start
 * s0 have the same rule, flags and row (every class leads to the same state); s0's chain does
 * not lead back to s0 (chain_first refuses a transition into the first position), and s is no
 * state of it, neither on its head orbit nor where it leaves (the instance's `to`; s, calling,
 * could not be a local: the pair walk takes solo ones only).  So chain_first from s finds s0's
 * locals, outs and form with s in place of s0, the same shared walk, and assembles from them:
 * s0's instance is kept again with s at its head and assembled as chain_first would (the
 * analysis and the lookup skipped).  Off: cm_chain_bytes_memo_enable(0), every such state
 * analysed (the reference the tests compare against). */
static atomic_int g_bytes_memo = 1;
static atomic_size_t g_bytes_memo_hits;  /* walks assembled from a kept start's (the tests read it) */

void cm_chain_bytes_memo_enable(int on) { atomic_store(&g_bytes_memo, on); }

size_t cm_chain_bytes_memo_hits(void) { return atomic_load(&g_bytes_memo_hits); }

/* Does state s read as the kept start m does (above)? */
static bool bytes_alike(const cm_grammar *g, const cm_chain_data *cd, const bytes_memo *m, uint32_t s) {
    const cm_tables *t = &g->t;
    uint32_t s0 = m->state, nc = t->n_classes;
    if (s0 == s || t->state_rule[s0] != t->state_rule[s] || state_flags(g, s0) != state_flags(g, s) ||
        memcmp(t->trans + (size_t)s0 * nc, t->trans + (size_t)s * nc, nc * sizeof *t->trans))
        return false;
    const chain_inst *in = &cd->insts[m->inst];
    size_t n_tab = (size_t)in->n_lab * 256;
    if (in->n_head != in->budget + 1 || in->head[0] != s0) return false;
    for (uint32_t j = 1; j < in->n_head; j++)
        if (in->head[j] == s || in->head[j] == s0) return false;
    for (size_t j = 0; j < n_tab; j++)
        if (in->to[j] == (int32_t)s || in->to[j] == (int32_t)s0) return false;
    return true;
}

/* cd's instance x kept again with s at its head (as chain_first keeps s's): its index, or
 * SIZE_MAX where memory is short. */
static size_t instance_again(cm_chain_data *cd, size_t x, uint32_t s) {
    const chain_inst *in = &cd->insts[x];
    size_t n_tab = (size_t)in->n_lab * 256;
    chain_inst o = *in;
    o.head = malloc((in->n_head ? in->n_head : 1) * sizeof *o.head);
    o.lam = malloc((n_tab ? n_tab : 1) * sizeof *o.lam);
    o.to = malloc((n_tab ? n_tab : 1) * sizeof *o.to);
    o.aam = malloc((in->n_lab ? in->n_lab : 1) * sizeof *o.aam);
    bool ok = o.head && o.lam && o.to && o.aam;
    if (ok) {
        memcpy(o.head, in->head, in->n_head * sizeof *o.head);
        o.head[0] = s;
        memcpy(o.lam, in->lam, n_tab * sizeof *o.lam);
        memcpy(o.to, in->to, n_tab * sizeof *o.to);
        memcpy(o.aam, in->aam, in->n_lab * sizeof *o.aam);
        size_t cap = cd->cap_insts;  /* (in is not read past here: the grow may move it) */
        ok = !(cd->n_insts == cap && cm_grow_to((void **)&cd->insts, &cap, cap + 1, sizeof *cd->insts));
        cd->cap_insts = cap;
    }
    if (!ok) {
        free(o.head);
        free(o.lam);
        free(o.to);
        free(o.aam);
        return SIZE_MAX;
    }
    cd->insts[cd->n_insts] = o;
    return cd->n_insts++;
}

/* state's byte walk assembled from a kept start's instance that reads alike: 1, 0 (none: w
 * untouched) or < 0 (an error). */
static int bytes_recall(const cm_grammar *g, uint32_t state, cm_walk *w) {
    for (cm_loop_walk *lw = g->cache->loops[CM_CHAIN_BUCKET]; lw; lw = lw->next) {
        cm_chain_data *cd = lw->chain;
        for (size_t i = 0; cd && i < cd->n_bmemo; i++) {
            if (!bytes_alike(g, cd, &cd->bmemo[i], state)) continue;
            size_t x = instance_again(cd, cd->bmemo[i].inst, state);
            if (x == SIZE_MAX) return 0;
            chain_inst *in = &cd->insts[x];
            int64_t past = 0;
            bool known = false;
            int rc = assemble_past(g, state, (int32_t)in->budget, in->lam, in->to, in->aam, lw,
                                   wrap_budget(g, state, lw, in->head, in->budget, in->budget + 1), false, &past,
                                   &known, w);
            cd->n_entries++;
            in->past = past;
            in->past_known = known;
            atomic_fetch_add(&g_bytes_memo_hits, 1);
            return rc ? rc : 1;
        }
    }
    return 0;
}

/* Keep the start `state` chain_first has just analysed, with the chain whose last instance it
 * heads. */
static void bytes_keep(const cm_grammar *g, uint32_t state) {
    for (cm_loop_walk *lw = g->cache->loops[CM_CHAIN_BUCKET]; lw; lw = lw->next) {
        cm_chain_data *cd = lw->chain;
        if (!cd) continue;
        size_t x = cd->n_insts;
        while (x > 0 && !(cd->insts[x - 1].n_head && cd->insts[x - 1].head[0] == state)) x--;
        if (!x) continue;
        bytes_memo *grown = cd->n_bmemo < CM_BYTES_MEMOS ? realloc(cd->bmemo, (cd->n_bmemo + 1) * sizeof *grown) : NULL;
        if (grown) {
            cd->bmemo = grown;
            cd->bmemo[cd->n_bmemo++] = (bytes_memo){state, (uint32_t)(x - 1)};
        }
        return;
    }
}

int cm_chain_bytes(const cm_grammar *g, uint32_t state, cm_walk *w) {
    if (!g->lim.count_chains || !g->lim.share_loop_walks || g->has_tokens[state] || g->solo[state]) return 0;
    bool memo = atomic_load(&g_bytes_memo);
    if (memo) {
        int got = bytes_recall(g, state, w);
        if (got) return got;
    }
    int rc = chain_first(g, state, true, w);
    if (rc > 0 && memo) bytes_keep(g, state);
    return rc;
}

void cm_grammar_chain_stats(const cm_grammar *g, size_t *walks, size_t *entries, size_t *from_vocab) {
    cm_cache *c = g->cache;
    *walks = *entries = *from_vocab = 0;
    pthread_mutex_lock(&c->lock);
    for (const cm_loop_walk *lw = c->loops[CM_CHAIN_BUCKET]; lw; lw = lw->next)
        if (lw->chain) {
            ++*walks;
            *entries += lw->chain->n_entries;
            *from_vocab += lw->chain->from_vocab;
        }
    pthread_mutex_unlock(&c->lock);
}

/* ---- block wraps (wrap.c) from the chain ---- */

/* A chain of one accepting end, at the end of s's own orbit, no exits, and
 * every transition alive to the end of its orbit (delta 0): a block of x^b. */
static bool plain_block(const cm_loop_walk *lw) {
    cm_chain_data *cd = lw->chain;  /* (its answer kept: asked for each entry, 3 * 256 words a label) */
    if (cd->plain) return cd->plain == 1;
    bool plain = plain_key(lw->sig);
    cd->plain = plain ? 1 : 2;
    return plain;
}

bool cm_chain_wraps(const cm_grammar *g, uint32_t state) {
    const chain_inst *inst;
    uint32_t at;
    if (!g->lim.count_chains || !g->lim.share_loop_walks) return false;
    const cm_loop_walk *lw = find_position(g, state, &inst, &at);
    return lw && plain_block(lw);
}

int cm_chain_wrap(const cm_grammar *g, uint32_t state, cm_entry *e) {
    if (!g->lim.count_chains || !g->lim.share_loop_walks) return 0;
    const chain_inst *inst;
    uint32_t at, sat = UINT32_MAX, start = g->t.rule_start[g->t.state_rule[state]];
    const cm_loop_walk *lw = find_position(g, state, &inst, &at);
    if (!lw || !plain_block(lw)) return 0;
    for (uint32_t j = 0; j <= inst->budget && sat == UINT32_MAX; j++)
        if (inst->head[j] == start) sat = j;
    if (sat == UINT32_MAX) return 0;
    /* Every uncertain token dies at the end after B characters and goes on
     * from the start, where it has budget b2 left: it stays inside the next
     * block iff it ends inside U with need - B < b2. */
    int64_t B = (int64_t)inst->budget - at, b2 = (int64_t)inst->budget - sat;
    cm_chain_data *cd = lw->chain;
    if (cd->has_split && cd->split_state == state && cd->split_B == B && cd->split_b2 == b2 &&
        cd->split_n_unc == e->n_uncertain) {  /* made with the entry (push_wrapping) */
        cd->has_split = false;
        if (!cd->split_bits) {
            split_drop(cd);
            return 1;
        }
        e->wrap_bits = cd->split_bits;
        e->rest = cd->split_rest;
        e->n_rest = cd->n_split_rest;
        e->bytes += g->n_words * 4 + (size_t)e->n_rest * 4;
        cd->split_bits = cd->split_rest = NULL;
        return 1;
    }
    uint32_t *acc = calloc(g->n_words ? g->n_words : 1, sizeof *acc);
    uint32_t *bits = calloc(g->n_words ? g->n_words : 1, sizeof *bits);
    uint32_t *rest = malloc((e->n_uncertain ? e->n_uncertain : 1) * sizeof *rest);
    if (!acc || !bits || !rest) {
        free(acc);
        free(bits);
        free(rest);
        return CM_ERR_NOMEM;
    }
    accepted_at(g, lw->chain->w, B + b2, acc);
    uint32_t n_rest = 0, n_wrap = 0;
    for (uint32_t i = 0; i < e->n_uncertain; i++) {
        uint32_t id = g->v->trie_ids[e->uncertain[i]];
        if (cm_bit(acc, id)) {
            cm_set_bit(bits, id);
            n_wrap++;
        } else {
            rest[n_rest++] = e->uncertain[i];
        }
    }
    free(acc);
    if (!n_wrap) {
        free(bits);
        free(rest);
        return 1;
    }
    e->wrap_bits = bits;
    e->rest = rest;
    e->n_rest = n_rest;
    e->bytes += g->n_words * 4 + (size_t)n_rest * 4;
    return 1;
}
