/* Entries equal to a sibling's by the tokens' horizon (issue 12, the median schemas' repeated
 * builds).
 *
 * A solo state's private chart is its one item (state, OUTER): after each byte it is the
 * automaton's next state, as long as that state is solo too (a call or token edge would start
 * a chart).  Before the upward filter a token is then accepted when the automaton reads all of
 * it, uncertain when it dies after an exit (an accepting state at depth >= 1 whose next byte
 * is in FOLLOW of the rule), rejected otherwise (walk.c, cm_walk_chart's ex / fl).  Two solo
 * states whose automata differ only past the ends of the vocabulary's tokens -- a number's
 * start in the root rule and in a property's rule, the `,` of an object at two positions with
 * different keys left (Llama-3's tokens there are 1-3 digits, `,"`) -- have the same outcome on
 * every token; where neither leaves a token uncertain the filter has nothing to read (it reads
 * only the uncertain tokens and the rule's callers, which differ between siblings), and the
 * entries are the same accepted set: the later state takes the earlier one's interned entry
 * instead of a build (the rungs' analyses, the walk, a 16 KB bitset, the hash and compare of
 * its interning).
 *
 * The proof is a joint walk of the trie through both automata: a subtree where both die is
 * skipped (rejected in both, or declined where either dies after an exit), one where one side
 * dies goes on with the other alone (every token must die there without an exit), and a token
 * both read to its end is accepted by both.  Anything else (a token one accepts and the other
 * does not, an uncertain token, a state that is not solo, more than REPEAT_BUDGET trie entries)
 * declines: the state is built as before.  Candidates: the last two solo states whose entries
 * have no uncertain tokens, by a hash of their own next bytes and acceptance (a state with more
 * than REPEAT_MAX_BYTES next bytes -- a string's inside, cheap by its loop walk -- is neither).
 *
 * Failed proofs are the cost (session 46): before a walk, a state whose first two bytes (a
 * token's) reach a state that is not solo or die after an exit takes no part (deep_ok, once a
 * state: JSON's `"`, C's whitespace before ` )`), and a pair that a token of at most two bytes
 * tells apart is not walked (short_differ); neither changes a verdict.  A grammar stops asking
 * once its failed proofs have read REPEAT_WASTE0 trie entries plus REPEAT_WASTE_HIT a hit, and
 * a bucket (one family of siblings: C's comments, a hex pattern's positions) once two of its
 * proofs ran past the budget. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "repeat.h"

#define REPEAT_BUCKETS 64
#define REPEAT_WAYS 2
#define REPEAT_BUDGET 512      /* bytes one proof's token walks may read */
#define REPEAT_MAX_BYTES 32    /* next bytes of a candidate */
#define REPEAT_SUM_ENTRIES 2048 /* a first byte's subtree summed up (summary) */
#define REPEAT_SUM_BYTES 16
#define REPEAT_SUM_DEPTH 8
#define REPEAT_PAIRS 64        /* pairs of states one subtree's strings may reach */
/* A grammar stops asking once its failed proofs have read more than REPEAT_WASTE0 trie
 * entries plus REPEAT_WASTE_HIT a proof that held (a hit saves a build, ~25 K instructions
 * and up: ~600 entries of the walk); a pair explored counts REPEAT_PAIR_COST entries, a pair
 * the checks rule out REPEAT_CHECK_COST. */
#define REPEAT_WASTE0 1024
#define REPEAT_WASTE_HIT 1024
#define REPEAT_PAIR_COST 4
#define REPEAT_BUDGET_FAILS 2  /* proofs past the budget that close a bucket (one family of states) */
#define REPEAT_CHECK_COST 8

enum { SUM_NONE, SUM_SMALL, SUM_BIG };

typedef struct cm_repeat_sum {
    uint8_t kind, n_bytes, depth;
    uint8_t bytes[REPEAT_SUM_BYTES];
} cm_repeat_sum;

/* First byte b0's tokens at their second byte (kids_of): what the checks before a proof read. */
typedef struct cm_repeat_kids {
    uint8_t one;        /* the one-byte token b0 is in the trie */
    uint32_t kids[8];   /* second bytes of its tokens */
    uint32_t two[8];    /* last bytes of its two-byte tokens */
} cm_repeat_kids;

enum { DEEP_UNKNOWN, DEEP_OK, DEEP_NOT };

struct cm_repeat {
    uint32_t cand[REPEAT_BUCKETS][REPEAT_WAYS];  /* states, UINT32_MAX empty; [0] the newest */
    int32_t *st;                                 /* [2 * (max_len + 1)]: both automata per depth */
    uint8_t *fl;                                 /* [2 * (max_len + 1)]: an exit before, per side */
    uint8_t *deep;                               /* [n_states] deep_ok(), DEEP_UNKNOWN until asked */
    cm_repeat_sum sum[256];                      /* per first byte, summary() */
    cm_repeat_kids *kids;                        /* [256] per first byte, kids_of(); NULL until then */
    uint32_t kids_done[8];                       /* the first bytes kids_of() summed up */
    size_t waste, hits;                          /* entries failed proofs read; proofs that held */
    uint8_t over[REPEAT_BUCKETS];                /* proofs of the bucket that ran past the budget */
};

static atomic_int g_repeat = 1;
static atomic_int g_repeat_checks = 1;
static atomic_int g_repeat_pair_hash = 1;
static atomic_size_t g_repeat_hits, g_repeat_tries;

void cm_repeat_enable(int on) { atomic_store(&g_repeat, on); }
void cm_repeat_checks_enable(int on) { atomic_store(&g_repeat_checks, on); }
void cm_repeat_pair_hash_enable(int on) { atomic_store(&g_repeat_pair_hash, on); }
void cm_repeat_counts(size_t *tries, size_t *hits) {
    *tries = atomic_load(&g_repeat_tries);
    *hits = atomic_load(&g_repeat_hits);
}

void cm_repeat_free(cm_repeat *r) {
    if (!r) return;
    free(r->st);
    free(r->fl);
    free(r->deep);
    free(r->kids);
    free(r);
}

/* The bytes of a 256-bit set, by bit counts per byte (the build has no popcnt instruction:
 * __builtin_popcount is a libgcc call, ~21 instructions a word, 16 a bucket_of). */
static inline uint32_t count_bytes(const uint32_t *set) {
    uint64_t sum = 0;
    for (int i = 0; i < 8; i += 2) {
        uint64_t x = set[i] | (uint64_t)set[i + 1] << 32;
        x -= (x >> 1) & 0x5555555555555555ull;
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        sum += (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;  /* a byte's count at most 8, 32 summed */
    }
    sum = (sum & 0x00ff00ff00ff00ffull) + ((sum >> 8) & 0x00ff00ff00ff00ffull);  /* 16-bit lanes: 256 fits */
    return (uint32_t)((sum * 0x0001000100010001ull) >> 48);
}

/* The bucket of a solo state with at most REPEAT_MAX_BYTES next bytes, else -1. */
static int bucket_of(const cm_grammar *g, uint32_t s) {
    if (!g->solo[s]) return -1;
    const uint32_t *nb = g->next_bytes + (size_t)s * 8;
    uint32_t n = count_bytes(nb);
    uint64_t h = g->t.accepting[s] ? 0x9e3779b97f4a7c15ull : 0;
    for (int i = 0; i < 8; i++) h = (h ^ nb[i]) * 0x100000001b3ull;
    if (!n || n > REPEAT_MAX_BYTES) return -1;
    return (int)((h ^ (h >> 29)) & (REPEAT_BUCKETS - 1));
}

static int repeat_get(const cm_grammar *g, cm_repeat **out) {
    cm_cache *c = g->cache;
    if (!c->repeat) {
        cm_repeat *r = calloc(1, sizeof *r);
        size_t n = 2 * ((size_t)g->v->max_len + 1);
        if (r) {
            r->st = malloc(n * sizeof *r->st);
            r->fl = malloc(n);
            r->deep = calloc(g->t.n_states ? g->t.n_states : 1, 1);
        }
        if (!r || !r->st || !r->fl || !r->deep) {
            cm_repeat_free(r);
            return CM_ERR_NOMEM;
        }
        memset(r->cand, 0xff, sizeof r->cand);
        c->repeat = r;
    }
    *out = c->repeat;
    return CM_OK;
}

/* One side's step on byte b from depth d (state st[d], -1 dead): the next state (-1 dead,
 * -2 not solo: decline), and *unc when it dies here after an exit (uncertain: decline). */
static inline int32_t side_step(const cm_grammar *g, uint32_t rule, const int32_t *st, const uint8_t *fl,
                                uint32_t d, uint8_t b, uint8_t *f, bool *unc) {
    int32_t s = st[d];
    if (s < 0) return -1;
    *f = fl[d] | (d && g->t.accepting[s] && cm_follows(g, rule, b));
    int32_t to = g->t.trans[(size_t)s * g->t.n_classes + g->t.byte_class[b]];
    if (to < 0) {
        if (*f) *unc = true;
        return -1;
    }
    return g->solo[to] ? to : -2;
}

/* The token walk of trie entries [k, k_end) (a first byte's subtree) through both automata:
 * 1 every token's outcome the same and none uncertain, 0 not (or past the budget), -1 a state
 * not solo. */
static int walk_range(const cm_grammar *g, cm_repeat *r, uint32_t a, uint32_t b, size_t k, size_t k_end,
                      size_t *visits) {
    const cm_vocab *v = g->v;
    size_t stride = (size_t)v->max_len + 1;
    int32_t *sa = r->st, *sb = r->st + stride;
    uint8_t *fa = r->fl, *fb = r->fl + stride;
    uint32_t ra = g->t.state_rule[a], rb = g->t.state_rule[b];
    sa[0] = (int32_t)a, sb[0] = (int32_t)b, fa[0] = fb[0] = 0;
    while (k < k_end) {
        uint32_t len, d = v->trie_lcp[k];
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        bool both_dead = false;
        for (; d < len; d++) {
            if (++*visits > REPEAT_BUDGET) return 0;
            uint8_t b8 = p[d], f1 = 0, f2 = 0;
            bool unc = false;
            int32_t n1 = side_step(g, ra, sa, fa, d, b8, &f1, &unc);
            int32_t n2 = side_step(g, rb, sb, fb, d, b8, &f2, &unc);
            if (n1 == -2 || n2 == -2) return -1;
            if (unc) return 0;
            if (n1 < 0 && n2 < 0) {
                both_dead = true;
                break;
            }
            sa[d + 1] = n1, sb[d + 1] = n2, fa[d + 1] = f1, fb[d + 1] = f2;
        }
        if (both_dead) {  /* the subtree of the first d + 1 bytes: rejected by both */
            k = v->skip[v->trie_off[k] + d];
            continue;
        }
        if ((sa[len] >= 0) != (sb[len] >= 0)) return 0;
        k++;
    }
    return 1;
}

/* First byte b0's subtree summed up (once per grammar): the bytes its tokens hold past the
 * first and its longest token, where it has at most REPEAT_SUM_ENTRIES tokens, at most
 * REPEAT_SUM_BYTES such bytes and REPEAT_SUM_DEPTH bytes a token (Llama-3's digits: ten bytes,
 * three deep); else big. */
static const cm_repeat_sum *summary(const cm_grammar *g, cm_repeat *r, uint8_t b0) {
    cm_repeat_sum *sm = &r->sum[b0];
    if (sm->kind) return sm;
    const cm_vocab *v = g->v;
    size_t k0 = v->first_off[b0], k1 = v->first_off[b0 + 1];
    sm->kind = SUM_BIG;
    if (k1 - k0 > REPEAT_SUM_ENTRIES) return sm;
    uint64_t seen[4] = {0};
    uint32_t depth = 0, n = 0;
    for (size_t k = k0; k < k1; k++) {  /* stops at the first token too long or byte too many */
        uint32_t len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        if (len > REPEAT_SUM_DEPTH) return sm;
        if (len > depth) depth = len;
        for (uint32_t d = v->trie_lcp[k] > 1 ? v->trie_lcp[k] : 1; d < len; d++) {
            uint64_t bit = 1ull << (p[d] & 63);
            if (seen[p[d] >> 6] & bit) continue;
            if (n == REPEAT_SUM_BYTES) return sm;
            seen[p[d] >> 6] |= bit;
            n++;
        }
    }
    n = 0;
    for (int c = 0; c < 256; c++)
        if ((seen[c >> 6] >> (c & 63)) & 1) sm->bytes[n++] = (uint8_t)c;
    sm->n_bytes = (uint8_t)n, sm->depth = (uint8_t)depth, sm->kind = SUM_SMALL;
    return sm;
}

typedef struct pair_node {
    int32_t x, y;
    uint8_t fx, fy, d;
} pair_node;

/* A pair's home slot in pairs_agree's table (2 * REPEAT_PAIRS, a power of two); slot 0 for
 * every pair with the hash off (the probe then reads every pair seen). */
static inline size_t pair_slot(int32_t x, int32_t y, uint8_t fx, uint8_t fy, bool hashed) {
    if (!hashed) return 0;
    uint64_t h = ((uint64_t)(uint32_t)x << 32 | (uint32_t)y) * 0x9e3779b97f4a7c15ull;
    return (size_t)((h >> 57) ^ (uint64_t)(fx << 1 | fy)) & (2 * REPEAT_PAIRS - 1);
}

/* First byte b0's subtree, both automata at x, y after it, over every string of the summary's
 * bytes up to its depth (every token of the subtree is one): 1 every such string's outcome the
 * same, none uncertain; 0 undecided (one side dies alone, or too many pairs: the token walk
 * decides); -1 a state not solo.  Breadth first, so a pair (with its exit flags) is explored
 * from its least depth, which covers its later visits. */
static int pairs_agree(const cm_grammar *g, const cm_repeat_sum *sm, uint32_t ra, uint32_t rb, int32_t x, int32_t y,
                       size_t *work) {
    pair_node q[REPEAT_PAIRS];
    uint8_t at[2 * REPEAT_PAIRS] = {0};  /* open addressing: 1 + the pair's index in q, 0 free */
    size_t n = 1, head = 0;
    bool hashed = atomic_load_explicit(&g_repeat_pair_hash, memory_order_relaxed);
    q[0] = (pair_node){x, y, 0, 0, 1};
    at[pair_slot(x, y, 0, 0, hashed)] = 1;
    const int32_t *trans = g->t.trans;
    const uint8_t *cls = g->t.byte_class, *acc = g->t.accepting;
    size_t nc = g->t.n_classes;
    while (head < n) {
        pair_node t = q[head++];
        *work += REPEAT_PAIR_COST;
        if (t.d >= sm->depth) continue;
        for (uint32_t i = 0; i < sm->n_bytes; i++) {
            uint8_t c = sm->bytes[i];
            uint8_t fx = t.fx | (acc[t.x] && cm_follows(g, ra, c)), fy = t.fy | (acc[t.y] && cm_follows(g, rb, c));
            int32_t nx = trans[(size_t)t.x * nc + cls[c]], ny = trans[(size_t)t.y * nc + cls[c]];
            if (nx < 0 && ny < 0) {
                if (fx || fy) return 0;
                continue;
            }
            if ((nx < 0) != (ny < 0)) return 0;
            if (!g->solo[nx] || !g->solo[ny]) return -1;
            size_t h = pair_slot(nx, ny, fx, fy, hashed);
            bool seen = false;
            for (; at[h]; h = (h + 1) & (2 * REPEAT_PAIRS - 1)) {
                const pair_node *o = &q[at[h] - 1];
                if ((seen = o->x == nx && o->y == ny && o->fx == fx && o->fy == fy)) break;
            }
            if (seen) continue;
            if (n == REPEAT_PAIRS) return 0;
            at[h] = (uint8_t)(n + 1);
            q[n++] = (pair_node){nx, ny, fx, fy, (uint8_t)(t.d + 1)};
        }
    }
    return 1;
}

/* First byte b0's tokens at their second byte, summed up once per grammar: a walk over its
 * children in the trie (Llama-3: at most 122, the space's). */
static const cm_repeat_kids *kids_of(const cm_grammar *g, cm_repeat *r, uint8_t b0) {
    if (!r->kids && !(r->kids = malloc(256 * sizeof *r->kids))) return NULL;
    cm_repeat_kids *kd = &r->kids[b0];
    if ((r->kids_done[b0 >> 5] >> (b0 & 31)) & 1) return kd;
    memset(kd, 0, sizeof *kd);
    const cm_vocab *v = g->v;
    size_t k = v->first_off[b0], k1 = v->first_off[b0 + 1];
    while (k < k1) {
        uint32_t len;
        const uint8_t *p = cm_trie_bytes(v, k, &len);
        if (len == 1) {
            kd->one = 1;
            k++;
            continue;
        }
        kd->kids[p[1] >> 5] |= 1u << (p[1] & 31);
        if (len == 2) kd->two[p[1] >> 5] |= 1u << (p[1] & 31);  /* DFS order: first of its subtree */
        k = v->skip[v->trie_off[k] + 1];
    }
    r->kids_done[b0 >> 5] |= 1u << (b0 & 31);
    return kd;
}

/* Can solo state s take part in a proof at all?  Not where a token's first two bytes lead it
 * to a state that is not solo, or kill it after an exit at the second byte (an uncertain
 * token): the walk declines there whatever the other state does, as it visits every token
 * prefix one side still reads.  Once a state, by its next bytes and their tokens' second
 * bytes.  (C's whitespace: ` )` calls; JSON's `"` starts a string's rule.) */
static bool deep_ok(const cm_grammar *g, cm_repeat *r, uint32_t s) {
    if (r->deep[s]) return r->deep[s] == DEEP_OK;
    const cm_vocab *v = g->v;
    const uint32_t *ns = g->next_bytes + (size_t)s * 8, *fol = g->t.rule_follow + (size_t)g->t.state_rule[s] * 8;
    const int32_t *trans = g->t.trans;
    size_t nc = g->t.n_classes;
    bool ok = true;
    for (int w = 0; w < 8 && ok; w++) {
        for (uint32_t m = ns[w]; m && ok; m &= m - 1) {
            uint8_t b0 = (uint8_t)(w * 32 + __builtin_ctz(m));
            if (v->first_off[b0] == v->first_off[b0 + 1]) continue;
            int32_t x = trans[(size_t)s * nc + g->t.byte_class[b0]];
            if (!g->solo[x]) {
                ok = false;
                break;
            }
            const cm_repeat_kids *kd = kids_of(g, r, b0);
            if (!kd) continue;
            const uint32_t *nx = g->next_bytes + (size_t)x * 8;
            for (int u = 0; u < 8 && ok; u++) {
                if (g->t.accepting[x] && (kd->kids[u] & fol[u] & ~nx[u])) ok = false;
                for (uint32_t m1 = kd->kids[u] & nx[u]; m1 && ok; m1 &= m1 - 1) {
                    uint8_t b1 = (uint8_t)(u * 32 + __builtin_ctz(m1));
                    ok = g->solo[trans[(size_t)x * nc + g->t.byte_class[b1]]];
                }
            }
        }
    }
    r->deep[s] = ok ? DEEP_OK : DEEP_NOT;
    return ok;
}

/* A token of at most two bytes that one of a, b reads to its end and the other does not (both
 * deep_ok): the proof would fail on it, so it is not tried. */
static bool short_differ(const cm_grammar *g, cm_repeat *r, uint32_t a, uint32_t b) {
    const cm_vocab *v = g->v;
    const uint32_t *na = g->next_bytes + (size_t)a * 8, *nb = g->next_bytes + (size_t)b * 8;
    const int32_t *trans = g->t.trans;
    size_t nc = g->t.n_classes;
    for (int w = 0; w < 8; w++) {
        for (uint32_t m = na[w] | nb[w]; m; m &= m - 1) {
            uint8_t b0 = (uint8_t)(w * 32 + __builtin_ctz(m));
            if (v->first_off[b0] == v->first_off[b0 + 1]) continue;
            int32_t x = trans[(size_t)a * nc + g->t.byte_class[b0]], y = trans[(size_t)b * nc + g->t.byte_class[b0]];
            const cm_repeat_kids *kd = kids_of(g, r, b0);
            if (!kd) return false;
            if ((x < 0) != (y < 0)) {  /* one side reads b0: its token, or a two-byte one it reads */
                if (kd->one) return true;
                const uint32_t *nz = g->next_bytes + (size_t)(x < 0 ? y : x) * 8;
                for (int u = 0; u < 8; u++)
                    if (kd->two[u] & nz[u]) return true;
                continue;
            }
            const uint32_t *nx = g->next_bytes + (size_t)x * 8, *ny = g->next_bytes + (size_t)y * 8;
            for (int u = 0; u < 8; u++)
                if (kd->two[u] & (nx[u] ^ ny[u])) return true;
        }
    }
    return false;
}

/* Do solo states a and b have the same outcome on every token and no uncertain one?  First
 * byte by first byte, those either reads (the others die at depth 0 in both, where no exit
 * counts): a subtree of few bytes by the pairs of states its strings reach, else (or where
 * that is undecided) by its tokens. */
static bool same_horizon(const cm_grammar *g, cm_repeat *r, uint32_t a, uint32_t b, size_t *work, bool *over) {
    const cm_vocab *v = g->v;
    const uint32_t *na = g->next_bytes + (size_t)a * 8, *nb = g->next_bytes + (size_t)b * 8;
    const int32_t *trans = g->t.trans;
    size_t nc = g->t.n_classes, visits = 0;
    uint32_t ra = g->t.state_rule[a], rb = g->t.state_rule[b];
    *work = 1;
    for (int w = 0; w < 8; w++) {
        for (uint32_t m = na[w] | nb[w]; m; m &= m - 1) {
            uint8_t b0 = (uint8_t)(w * 32 + __builtin_ctz(m));
            size_t k0 = v->first_off[b0], k1 = v->first_off[b0 + 1];
            if (k0 == k1) continue;
            int32_t x = trans[(size_t)a * nc + g->t.byte_class[b0]], y = trans[(size_t)b * nc + g->t.byte_class[b0]];
            int ok = 0;
            if (x < 0 && y < 0) continue;  /* rejected by both: no exit counts at depth 0 */
            if (x >= 0 && y >= 0 && g->solo[x] && g->solo[y]) {
                const cm_repeat_sum *sm = summary(g, r, b0);
                if (sm->kind == SUM_SMALL) ok = pairs_agree(g, sm, ra, rb, x, y, work);
            }
            if (!ok) ok = walk_range(g, r, a, b, k0, k1, &visits);
            if (ok <= 0) {
                *work += visits;
                *over = visits > REPEAT_BUDGET;
                return false;
            }
        }
    }
    return true;
}

const cm_entry *cm_repeat_take(const cm_grammar *g, uint32_t state) {
    if (!atomic_load_explicit(&g_repeat, memory_order_relaxed) || g->has_segments) return NULL;
    int bk = bucket_of(g, state);
    cm_repeat *r;
    if (bk < 0 || repeat_get(g, &r)) return NULL;
    cm_cache *c = g->cache;
    if (r->waste > REPEAT_WASTE0 + REPEAT_WASTE_HIT * r->hits) return NULL;  /* its siblings differ within tokens */
    if (r->over[bk] >= REPEAT_BUDGET_FAILS) return NULL;  /* its states' subtrees are too wide */
    if (g_repeat_checks && !deep_ok(g, r, state)) return NULL;  /* no proof could hold */
    for (int i = 0; i < REPEAT_WAYS; i++) {
        uint32_t s = r->cand[bk][i];
        if (s == UINT32_MAX) break;
        cm_entry *e = atomic_load_explicit(&c->slots[s], memory_order_relaxed);
        if (!e || e->n_uncertain) continue;
        if (g_repeat_checks && short_differ(g, r, s, state)) {  /* no walk */
            r->waste += REPEAT_CHECK_COST;
            continue;
        }
        size_t work;
        bool over = false;
        atomic_fetch_add_explicit(&g_repeat_tries, 1, memory_order_relaxed);
        if (same_horizon(g, r, s, state, &work, &over)) {
            atomic_fetch_add_explicit(&g_repeat_hits, 1, memory_order_relaxed);
            r->hits++;
            return e;
        }
        r->waste += work;
        r->over[bk] += over;
        if (over) break;  /* the other candidate's subtrees are as wide */
    }
    return NULL;
}

void cm_repeat_note(const cm_grammar *g, uint32_t state, const cm_entry *e) {
    if (!atomic_load_explicit(&g_repeat, memory_order_relaxed) || g->has_segments || e->n_uncertain) return;
    int bk = bucket_of(g, state);
    cm_repeat *r;
    if (bk < 0 || repeat_get(g, &r)) return;
    if (g_repeat_checks && !deep_ok(g, r, state)) return;
    for (int i = REPEAT_WAYS - 1; i > 0; i--) r->cand[bk][i] = r->cand[bk][i - 1];
    r->cand[bk][0] = state;
}
