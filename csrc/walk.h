/* Trie walks through private Earley charts (walk.c): what one cache entry is
 * built from, whichever way (cache.c picks the way). */
#ifndef CFGMASK_WALK_H
#define CFGMASK_WALK_H

#include "entry.h"

/* An item scan a walk made of uncertain trie entries [k, k_end) through the private chart of
 * the entry's own state (cm_walk_listed_noted): the bytes the chart survived (dead, fewer than
 * each entry's length) and its exit flags after 1 .. dead of them (the walk's note_ex from
 * ex_off).  The upward filter reads them for those entries instead of scanning them again. */
typedef struct cm_scan_note {
    uint32_t k, k_end, dead, ex_off;
} cm_scan_note;

/* An entry under construction, and the per-depth scratch of its walks. */
typedef struct cm_walk {
    uint32_t *bits;             /* accepted tokens, [n_words] */
    uint32_t n_accepted;
    uint32_t *unc;              /* uncertain trie entries */
    size_t n_unc, cap_unc;
    /* per trie depth, [max_len + 1]: */
    uint8_t *ex;                /* the private chart's set there completed the item's rule */
    uint8_t *fl;                /* an exit before, its next byte in FOLLOW: dying makes uncertain */
    uint32_t *st;               /* flat walks: the configuration there */
    bool filtered;              /* unc went through cm_walk_filter_uncertain already (chains.c) */
    bool bits_zero;             /* cm_walk_finish took the accepted ids out: bits is all zero again */
    bool count_later;           /* n_accepted not counted (cm_compose): cm_walk_finish counts */
    /* first bytes b whose name entries (vocab.h: name_off) bits holds: set where a walk sets
     * them (cm_walk_names, a run walk's names) or ORs in an entry that holds them (cm_compose) */
    uint32_t names[8];
    /* the scans kept for the filter, ascending by k (walk_note) */
    cm_scan_note *notes;
    size_t n_notes, cap_notes;
    uint8_t *note_ex;
    size_t n_note_ex, cap_note_ex;
    bool noting;                /* a whole flat walk of the entry's own state keeps its scans (flat.c) */
} cm_walk;

int cm_walk_init(cm_walk *w, const cm_grammar *g);
/* An entry keeps its accepted tokens as ids where they are fewer than this (cm_walk_finish). */
size_t cm_walk_ids_limit(const cm_grammar *g);
/* cm_walk_init with zero_bits (n_words, all zero) as its bitset if not NULL: an entry build
 * reuses the last sparse one's (cache.c), not a fresh 16 KB calloc and its free. */
int cm_walk_init_spare(cm_walk *w, const cm_grammar *g, uint32_t *zero_bits);
void cm_walk_free(cm_walk *w);
/* k onto w's uncertain entries: inline where there is room (a flat walk's ws start pushes some
 * 4,000 of them one at a time, a call each), else cm_walk_push_uncertain_grow. */
int cm_walk_push_uncertain_grow(cm_walk *w, uint32_t k);
static inline int cm_walk_push_uncertain(cm_walk *w, uint32_t k) {
    if (__builtin_expect(w->n_unc == w->cap_unc, 0)) return cm_walk_push_uncertain_grow(w, k);
    w->unc[w->n_unc++] = k;
    return CM_OK;
}
/* First byte b's name entries into w (cm_vocab_names) and into w->names: their number;
 * 0 (nothing set) where w->names holds b already and name sets are on (loops.h). */
uint32_t cm_walk_names(const cm_vocab *v, uint8_t b, cm_walk *w);

static inline void cm_walk_accept(cm_walk *w, uint32_t id) {
    cm_set_bit(w->bits, id);
    w->n_accepted++;
}

/* Trie entries [k, k_end), which share their first d0 bytes, through the
 * private chart of the given items (packed states, origin CM_OUTER) of `rule`;
 * f0 / ex0: the exit flags at depth d0 (ex0 < 0: the chart's own). */
int cm_walk_range(const cm_grammar *g, const uint32_t *states, uint32_t n_states, uint32_t rule, size_t k,
                  size_t k_end, uint32_t d0, uint8_t f0, int ex0, cm_walk *w);
/* cm_walk_range from a chart whose last set is the private chart's set at
 * depth d0 (it is left holding some of the walk's sets). */
typedef struct cm_chart cm_chart;
int cm_walk_chart(const cm_grammar *g, cm_chart *c, uint32_t rule, size_t k, size_t k_end, uint32_t d0, uint8_t f0,
                  int ex0, cm_walk *w);
/* The listed trie entries (ascending) through the private chart of (state, OUTER);
 * entries already accepted are skipped. */
int cm_walk_listed(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, cm_walk *w);
/* The same from depth d0: the listed entries share their first d0 bytes, which
 * the chart of (state, OUTER) does not read (the tail parts of compose.c). */
int cm_walk_listed_at(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, uint32_t d0, cm_walk *w);
/* cm_walk_listed, keeping the item scan of each token it leaves uncertain (cm_scan_note) for
 * the filter of state's entry: the same chart, so the filter need not scan them again. */
int cm_walk_listed_noted(const cm_grammar *g, uint32_t state, const uint32_t *ks, size_t n, cm_walk *w);
/* The scan notes (on by default): off, the filter scans every token (the reference the tests
 * compare against).  Process-wide; cm_scan_notes_used: the tokens the filter took from a note
 * so far in this process (for the tests). */
void cm_scan_notes_enable(int on);
bool cm_scan_notes_on(void);
/* A note of entries [k, k_end) that died after dead bytes: where their exit flags after 0 ..
 * dead bytes go (the caller writes them), NULL where none is kept (the filter scans them). */
uint8_t *cm_walk_note_ex(cm_walk *w, uint32_t k, uint32_t k_end, uint32_t dead);
size_t cm_scan_notes_used(void);
/* Drop the uncertain tokens that no context can take (failures keep them).
 * Entries with more uncertain tokens than CM_FILTER_MAX_UNCERTAIN skip the filter:
 * the tokens that cross a block boundary of a counted repetition (a JSON Schema
 * maxLength string: 100,000 of them) can all go on in some context, and reading
 * each through the upward chart cost a third of Snowplow's compile(warm=True). */
#define CM_FILTER_MAX_UNCERTAIN 16384
void cm_walk_filter_uncertain(const cm_grammar *g, uint32_t state, cm_walk *w);
/* How many of the filter's questions the name stops answered so far in this
 * process (for the tests). */
size_t cm_walk_name_stop_hits(void);
/* How many of the filter's questions the runs of one byte answered so far in
 * this process (for the tests). */
size_t cm_walk_filter_run_hits(void);
size_t cm_walk_run_aheads_by_steps(void); /* read-aheads run_ahead_steps started (the tests read it) */
/* Drops from ks[0 .. n) (trie entries, a wrapping block position's rests) those the filter of
 * `state` is sure to drop: no state of the block's region reads the first byte of theirs that
 * the block does not (walk.c, region_of); how many are left, in order.  Under the cache lock. */
size_t cm_walk_drop_dead(const cm_grammar *g, uint32_t state, uint32_t *ks, size_t n);
void cm_walk_drop_dead_enable(int on);
size_t cm_walk_dead_dropped(void); /* rests dropped so (the tests read it) */
/* How many of the filter's questions the pair stops answered so far in this
 * process (for the tests). */
size_t cm_walk_filter_pair_hits(void);
/* The triple stops (on by default): after a first byte the upward chart reads few second bytes
 * after (a keyword's), the bytes it reads third after each such pair; a rest whose third byte is
 * not among them dies unasked, and its token's prefix skips its subtree.  Off, such rests are
 * asked (the reference the tests compare against).  Process-wide; cm_walk_filter_triple_hits:
 * the rests they answered so far in this process (for the tests). */
void cm_walk_filter_triples_enable(int on);
size_t cm_walk_filter_triple_hits(void);
/* The early pair stops (on by default): a filter of at least lim.filter_pairs uncertain tokens
 * makes its rule's pair stops at its first rest, not once the rule's filters have met that many
 * rests (the first 256 of a JSON `ws` start's 4,300 were each asked).  Off, as before (the
 * reference the tests compare against).  Process-wide; cm_walk_filter_pairs_early: the filters
 * that made them so far in this process (for the tests). */
void cm_walk_filter_pairs_early_enable(int on);
size_t cm_walk_filter_pairs_early(void);
/* The filter's subtree skip (on by default): a token dropped for bytes of its prefix
 * alone drops the later uncertain tokens of that prefix's trie subtree unread.  Off,
 * each token is read on its own (the reference the tests compare against).  Process-wide;
 * cm_walk_filter_skipped: the tokens skipped so far in this process (for the tests). */
void cm_walk_filter_skip_enable(int on);
size_t cm_walk_filter_skipped(void);
/* The subtree skip after name stops (on by default): a token whose exits the name stops drop
 * (by the name run and the byte or two that end it) drops its prefix's subtree as above.  Off,
 * a name stop ends the skip (the reference the tests compare against).  Process-wide;
 * cm_walk_filter_stop_skipped: the tokens skipped so far after a name stop (for the tests). */
void cm_walk_filter_stop_skip_enable(int on);
size_t cm_walk_filter_stop_skipped(void);
/* Upward verdicts shared between rules whose upward charts' first sets hold the same items that
 * read bytes, tokens or call (on by default: the same verdicts).  Off, each rule its own: the
 * reference the tests compare against.  Process-wide; cm_walk_verdict_shared: the rules found
 * alike an earlier one so far in this process (for the tests). */
void cm_walk_verdict_share_enable(int on);
size_t cm_walk_verdict_shared(void);
/* Upward verdicts shared by the rests' first byte (on by default: the same verdicts): a rest
 * whose first byte only items of origin CM_OUTER read in the rule's upward first set is keyed by
 * the kernel that byte makes, not by the rule, so rules whose kernels agree read each other's
 * verdicts (an expression chain's levels on `)`), and an empty kernel drops the rest at once.
 * Off, by the rule: the reference the tests compare against.  Process-wide;
 * cm_walk_kern_counts: the rests answered from a kernel's verdicts, and those dropped by an empty
 * kernel, so far in this process (for the tests). */
void cm_walk_kern_share_enable(int on);
void cm_walk_kern_counts(size_t *shared, size_t *dead);
/* cm_compose's listed walk takes the filter's item chart, reset, instead of a chart of its own
 * (on by default: the same sets; its closure memo and waiter index kept).  Off, a chart of its
 * own each walk: the reference the tests compare against.  Process-wide; cm_walk_listed_reused:
 * the walks that took it so far in this process. */
void cm_walk_listed_reuse_enable(int on);
size_t cm_walk_listed_reused(void);
/* The filter of a composed entry's uncertain tokens takes the item chart as its listed walk left
 * it, truncated to the first set they share, instead of making that set again (walk.c,
 * item_chart): on (the default) or off (reset each time, the reference); how many filters took
 * it so in this process (for the tests). */
void cm_walk_item_keep_enable(int on);
size_t cm_walk_item_kept(void);
/* The filter's class prefix (on by default): where the charts read bytes through their class
 * alone (no lookahead debts, no segments), a token takes the sets of the token before for their
 * common prefix of classes, not only of bytes.  Off: bytes only (the tests' reference).
 * Process-wide; cm_walk_filter_class_shared: the bytes so taken in this process (for the tests). */
void cm_walk_filter_class_prefix_enable(int on);
size_t cm_walk_filter_class_shared(void);
/* The lazy verdict memo (lim.lazy_follow), so far in this process (for the
 * tests): verdicts held unhashed by a rule's first filter, those hashed into
 * the memo when a second filter of the rule came, and the filter's questions
 * the memo answered. */
size_t cm_walk_follow_lazy_held(void);
size_t cm_walk_follow_lazy_inserts(void);
size_t cm_walk_follow_hits(void);
/* How many tokens of listed walks (cm_walk_listed_at) died on a byte no item of
 * their set reads, without a scan, so far in this process (for the tests). */
size_t cm_walk_listed_unread(void);
void cm_walk_listed_last_viable_enable(int on);
size_t cm_walk_listed_last_checked(void);
/* Loop stops of chart walks (cm_walk_chart): the subtree below a growing set that holds an
 * item, owing nothing, whose state goes to itself on the next byte is settled from that item
 * (walk.c).  On by default; off: every byte is scanned (the entries are the same). */
void cm_walk_loop_stop_enable(int on);
/* How many subtrees loop stops settled so far in this process (for the tests). */
size_t cm_walk_loop_stops(void);
/* How many of their entries a reduced chart (the loop item's closure alone) accepted. */
size_t cm_walk_loop_reduced(void);
/* The filter's memo of verdicts (a cache's, freed with it). */
typedef struct cm_follow_memo cm_follow_memo;
void cm_follow_memo_free(cm_follow_memo *m);
/* The walk as an entry: its accepted tokens as ids or bits, whichever is smaller
 * (the walk's buffers move into e; ids: the bitset is left zero, bits_zero set). */
int cm_walk_finish(const cm_grammar *g, cm_walk *w, cm_entry *e);

#endif
