/* Walks shared by equal loops (loops.c) and the store of them that the
 * vocabulary keeps for every grammar compiled for it (loopstore.c). */
#ifndef CFGMASK_LOOPS_H
#define CFGMASK_LOOPS_H

#include "cache.h"
#include "walk.h"

#define CM_LOOP_BUCKETS 256
#define CM_LOOP_MAX 254         /* states of a loop: labels fit a byte, rows (label * 256) a uint16, beside two codes */
#define CM_LOOP_DEAD UINT32_MAX /* a transition's code in a loop's form: dead, */
#define CM_LOOP_OUT (UINT32_MAX - 1)  /* out of the loop, else the state's number */

/* A trie subtree whose prefix leaves the loop: entries [k, k_end), whose byte
 * `byte` at `depth` leaves loop state `label`. */
typedef struct cm_loop_exit {
    uint32_t k, k_end, depth, label;
    uint8_t byte;
} cm_loop_exit;

typedef struct cm_chain_data cm_chain_data;  /* chains.c */

struct cm_loop_walk {
    uint64_t hash;
    uint32_t n_sig;
    uint32_t *sig;              /* the loop's form: the key */
    uint64_t dies;              /* where the narrow loop that made it dies (left out of the key) */
    uint32_t *bits;             /* tokens that end inside the loop (a run walk's, sig[0]
                                   CM_RUN_MARK: their ids, n_accepted of them) */
    uint32_t n_accepted;
    uint32_t n_named;           /* a run walk's: of its n_accepted tokens, the name entries of its
                                   run's first bytes (its key's range), left out of bits and set
                                   from the vocabulary's per-byte name sets (cm_vocab_names) */
    cm_loop_exit *exits;
    size_t n_exits;
    struct cm_loop_walk *next;  /* in its bucket */
    size_t bytes;               /* what it counts against CM_VOCAB_LOOP_BYTES */
    bool pinned;                /* part of the vocabulary: cm_walk_store_clear keeps it */
    uint8_t np;                 /* a loop's walk of every entry (0), of the entries that are not plain
                                   (1) or not text (2) only (vocab.h) */
    cm_chain_data *chain;       /* a counted chain's walk (chains.c; sig[0] CM_CHAIN_MARK), else NULL */
};

#define CM_CHAIN_MARK (UINT32_MAX - 7)  /* first word of a chain walk's key: never a loop's */
#define CM_RUN_MARK (UINT32_MAX - 8)    /* first word of a run walk's key */
#define CM_FORM_RUNS (UINT32_MAX - 9)   /* first word of a loop's form kept as runs (loopstore.c) */
/* A run walk's key: the mark, the run's bytes (256 bits), k, k_end, d0. */
#define CM_RUN_KEY 12

/* ---- loops.c ---- */

/* The entry walk of a solo state through the shared walk of its loop (a plain
 * state) or of its counted chain (chains.c): 1 done, 0 in neither (w
 * untouched), < 0 error.  Under the cache lock. */
int cm_loop_entry(const cm_grammar *g, uint32_t state, cm_walk *w);
/* The far entry of a segment grammar's state in a counted segment at count k, where no token
 * reaches a bound: the clipped pair (need, budget) = (L, L) (exits_open false: every EXIT
 * dead, every INTO open) or (0, L) (exits_open true: every guard open).  Inside its loop the
 * segment is then `unit*` without or with its exits: the loop's shared walk of every entry
 * (the vocabulary's store) gives the tokens that end inside, and each exit's subtree is walked
 * on through a counted chart from the edge's target (an EXIT's afresh, so a later segment is
 * counted from 0).  1 done, 0 declined (w untouched: the state is in no loop, or its loop
 * leaves the segment), < 0 error.  Exactness: tests/test_far_entries.py. */
int cm_seg_far_entry(const cm_grammar *g, uint32_t state, uint32_t k, bool exits_open, cm_walk *w);
/* The near entries' base and the rest of them (cache.c, seg_near): cm_seg_far_entry's walk
 * without the exits of the loop walk that stay in the segment (an edge into a state of the unit
 * outside the loop: a JSON string's `\u` escape, longer than CM_LOOP_REACH), which reads no count
 * at all: `unit*` with its EXITs dead (exits_open false) or open, each EXIT's subtree walked on
 * afresh; declined (0) as cm_seg_far_entry, or where an EXIT edge lands back in the loop.  And
 * those exits alone (cm_seg_near_inner), each walked on through a counted chart at the count it
 * is reached at from count k (an INTO refused on the way: skipped), ORed into w. */
int cm_seg_near_base(const cm_grammar *g, uint32_t state, bool exits_open, cm_walk *w);
int cm_seg_near_inner(const cm_grammar *g, uint32_t state, uint32_t k, cm_walk *w);

/* A segment grammar's entry of a plain state outside segments whose loop stays outside them:
 * the loop's shared walk of every entry, each exit's subtree on through a counted chart from
 * the edge's target (cm_walk_range).  1 done, 0 declined (w untouched: in a segment, no
 * loop, or a loop through a segment), < 0 error.  Exactness: tests/test_seg_ladder.py. */
int cm_seg_loop_entry(const cm_grammar *g, uint32_t state, cm_walk *w);
/* A segment grammar's plain state outside segments in no loop: the DFA walk of the plain states
 * outside segments it leads through (shared by signature), each subtree that leaves them through
 * the counted chart; 1 done, 0 declined (that state alone, or too many), < 0 an error. */
int cm_seg_chain_entry(const cm_grammar *g, uint32_t state, cm_walk *w);
/* The loop entries that took every plain token at once (their exits walking
 * only the other entries, lim.plain_skip) so far in this process (for the tests). */
size_t cm_plain_loop_walks(void);
/* Those of them that took every text token (vocab.h) at once too (loop_text_live). */
size_t cm_text_loop_walks(void);
/* Loop exits whose every entry ends with the exit's byte, accepted without a walk
 * (cm_loop_entry): on by default; how many were taken so, in this process (for the tests). */
void cm_loop_exit_ends_enable(int on);
size_t cm_loop_exit_ends_taken(void);
/* A plain state that no state within reach leads back to answered in no loop
 * without find_loop's backward marking: on by default; how many so far. */
void cm_loop_no_back_enable(int on);
size_t cm_loop_no_back_taken(void);
/* Whether the loop ls[0..n_loop) (labels set) is narrow: its dead transitions
 * coded as exits (loops.c, find_loop). */
bool cm_loop_dead_out(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop);
/* The loop entries that took the walk of a narrow loop that dies where theirs
 * leaves or leaves where theirs dies, so far in this process (for the tests). */
size_t cm_loop_walks_past_dead(void);
/* The run walks of a first byte's subtree that took its name entries from the
 * vocabulary's list (run_scan_names), so far in this process (for the tests). */
size_t cm_run_name_scans(void);
/* cm_flat_walk of entries [k, k_end) (sharing their first d0 bytes) from
 * (state, OUTER), where `state` may begin a name: with lim.run_walks, a state
 * that calls nothing and loops to itself on a set of bytes (its run) takes the
 * tokens that end inside the run and the subtrees that leave it from the
 * vocabulary's run walk of (run bytes, k, k_end, d0), and walks only those
 * subtrees on.  Under the cache lock. */
int cm_run_walk(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0,
                cm_walk *w);
/* The whole walk of a solo state whose byte edges enter names, each such first
 * byte's subtree through cm_run_walk: 1 done, 0 declined (w untouched), < 0
 * error.  Under the cache lock. */
int cm_run_entry(const cm_grammar *g, uint32_t state, cm_walk *w);
/* Does the vocabulary hold the run walk that cm_run_walk(state, rule, k, k_end, d0)
 * would take (state has a run, the range is one a run walk takes)?  Then that
 * call finds it instead of walking, and a caller that would otherwise walk the
 * range another way (a loop entry, a composed state's byte edge) takes it: the
 * same tokens either way.  Counted (cm_name_run_hits) when it does; false when
 * switched off (cm_name_runs_enable). */
bool cm_run_stored(const cm_grammar *g, uint32_t state, uint32_t rule, size_t k, size_t k_end, uint32_t d0);
/* The entry of `state` as its whole run walk where the vocabulary holds it
 * (arithmetic's `call` name after `primary`'s variable, the same run over the
 * whole trie): 1 done, 0 declined (w untouched), < 0 error. */
int cm_run_entry_stored(const cm_grammar *g, uint32_t state, cm_walk *w);
/* The whole-trie walk of a run that holds every name byte takes each first
 * byte's subtree from the vocabulary's stored walk of it where there is one
 * (arithmetic's variable inside `(a` after `call`'s per-letter walks of the
 * first mask): on by default; the subtrees taken so, in this process. */
void cm_run_parts_enable(int on);
size_t cm_run_parts_hits(void);
void cm_name_runs_enable(int on);
size_t cm_name_run_hits(void);
/* Name sets set once: a whole-trie run walk taken from the store (a name state's own
 * entry) ORs the vocabulary's set of every name byte's name entries (vocab.h: name_all)
 * instead of setting each byte's ids one by one; a walk that holds a first byte's name
 * entries already (cm_walk.names: set by its own walks, or by the parts a composed entry
 * ORed in, cm_entry.names) does not set them again (arithmetic's `primary`: its
 * variable's letters after `call`'s); a run entry finds its letters' run once.  On by
 * default (cm_name_sets_enable); the unions taken and the sets skipped, in this process.
 * The entries are the same. */
void cm_name_sets_enable(int on);
bool cm_name_sets_on(void);
size_t cm_name_unions_taken(void);
size_t cm_name_sets_skipped(void);
void cm_name_unions_count(void);
void cm_name_sets_count(void);
/* Ranges of first bytes that cm_run_entry left unwalked, the state reading none of
 * them (so far in this process, for the tests). */
size_t cm_run_gaps_skipped(void);
/* The whole walk of a solo state that reads a few bytes (CM_LITERAL_BYTES), into
 * states that call nothing, cannot complete and do the same (the rest of a JSON
 * key, a choice of keys, a keyword): the ranges of tokens that read on found by
 * binary search in the trie, byte by byte, and only the subtrees that leave such
 * states walked on (cm_flat_walk), from where they leave: 1 done, 0 declined
 * (w untouched), < 0 error.  Under the cache lock. */
int cm_literal_entry(const cm_grammar *g, uint32_t state, cm_walk *w);

/* ---- loopstore.c ---- */

/* A loop's byte-level form: its states numbered breadth first from the entry
 * by byte, each byte's code.  canon[label] is a state's number in it,
 * from_canon the inverse. */
typedef struct cm_loop_form {
    uint32_t *form;             /* [n_loop * 256] or runs (CM_FORM_RUNS: [n_form]), NULL: none */
    size_t n_form;
    uint64_t hash;
    uint32_t canon[CM_LOOP_MAX], from_canon[CM_LOOP_MAX];
} cm_loop_form;

/* The form of the loop ls[0..n_loop) (labels of cache->loop_lab set); lf->form
 * NULL when there is none (a state not reached by bytes from the entry) or
 * memory is short. */
void cm_loop_form_of(const cm_grammar *g, const uint32_t *ls, uint32_t n_loop, cm_loop_form *lf);
/* The form read by runs of one byte class and kept as its runs of one code
 * (first word CM_FORM_RUNS; loopstore.c, form_by_runs): on by default; off, the
 * table of 256 codes a state.  How many forms were made so, in this process. */
void cm_loop_form_runs_enable(int on);
size_t cm_loop_form_runs_taken(void);
/* The vocabulary's walk of that form (of the entries not plain only as lw->np)
 * copied into lw: 1 found, 0 not, < 0 error. */
int cm_walk_store_get(const cm_grammar *g, const cm_loop_form *lf, cm_loop_walk *lw);
/* A copy of lw kept by the vocabulary (lf->form is taken over); nothing when its
 * budget is spent or memory is short. */
void cm_walk_store_put(const cm_grammar *g, cm_loop_form *lf, const cm_loop_walk *lw);

void cm_loop_walk_free(cm_loop_walk *lw);
void cm_chain_data_free(cm_chain_data *cd);  /* chains.c */
/* A copy of a chain walk's result (not the chains it was used for); NULL when memory is short. */
cm_chain_data *cm_chain_data_copy(const cm_grammar *g, const cm_chain_data *src);
/* The vocabulary's chain walk of key[0..n_key) copied into *out: 1 found, 0 not, < 0 error. */
int cm_walk_store_get_chain(const cm_grammar *g, const uint32_t *key, size_t n_key, uint64_t hash,
                            cm_chain_data **out);
/* A copy of cd kept by the vocabulary under that key (`bytes` counted); nothing when its budget
 * is spent or memory is short. */
void cm_walk_store_put_chain(const cm_grammar *g, const uint32_t *key, size_t n_key, uint64_t hash,
                             const cm_chain_data *cd, size_t bytes);
void cm_loop_walks_free(cm_loop_walk **buckets);
/* The vocabulary's run walk of key[0..CM_RUN_KEY): 1 found (its tokens set in w,
 * its exits copied into *exits, *n_exits), 0 not, < 0 error. */
int cm_walk_store_get_run(const cm_grammar *g, const uint32_t *key, uint64_t hash, cm_walk *w,
                          cm_loop_exit **exits, size_t *n_exits);
/* A copy of a run walk kept by the vocabulary under that key; nothing when the
 * run walks' budget (CM_VOCAB_RUN_BYTES) is spent, memory is short, or it is
 * there already. */
/* The vocabulary's run walk of key[0..CM_RUN_KEY) appended to a walk being
 * built: its tokens set in bits (its name entries only with set_names: else the
 * caller set them) and their ids copied to *idp (advanced; at most max_ids fit
 * there), its exits appended to *exits (*n_exits of them, *cap allocated, grown
 * as needed): 1 found, 0 not (nothing touched), < 0 error. */
int cm_walk_store_append_run(const cm_grammar *g, const uint32_t *key, uint64_t hash, uint32_t *bits,
                             uint32_t **idp, size_t max_ids, uint32_t *named, cm_loop_exit **exits, size_t *n_exits,
                             size_t *cap, bool set_names);
/* The first bytes whose name entries the run walk of key[0..CM_RUN_KEY) counts (its
 * range's first byte from depth 1, or each byte of its run over the whole trie), for a
 * walk that counted some (n_named > 0), into names[8]. */
void cm_run_key_names(const cm_vocab *v, const uint32_t *key, uint32_t *names);
/* Does the vocabulary hold the run walk of key[0..CM_RUN_KEY)? */
bool cm_walk_store_has_run(const cm_grammar *g, const uint32_t *key, uint64_t hash);
void cm_walk_store_put_run(const cm_grammar *g, const uint32_t *key, uint64_t hash, const uint32_t *ids,
                           uint32_t n_ids, uint32_t n_named, const cm_loop_exit *exits, size_t n_exits);

/* ---- chain analyses kept by their rows (chains.c's memos, loopstore.c's store) ---- */

/* The head of a memo the store files: chains.c's chain_memo begins with it. */
typedef struct cm_memo_link {
    struct cm_memo_link *next;  /* in its bucket */
    uint64_t hash;              /* chains.c's memo_key */
    size_t bytes;               /* what it counts against CM_VOCAB_MEMO_BYTES */
    bool pinned;                /* part of the vocabulary: cm_walk_store_clear keeps it */
} cm_memo_link;

/* A memo's counted references (chains.c): one the store's, one each reader's. */
void cm_chain_memo_hold(cm_memo_link *m);
void cm_chain_memo_release(cm_memo_link *m);
/* Up to max memos filed under hash, each held (the caller releases them): how many. */
size_t cm_walk_store_get_memos(const cm_grammar *g, uint64_t hash, cm_memo_link **out, size_t max);
/* Is a memo filed under hash worth keeping: while the vocabulary primes its pins
 * (it has none yet) every one is, after only one whose hint was met before
 * (marked now). */
bool cm_walk_store_memo_wanted(const cm_grammar *g, uint64_t hash);
/* Whether the vocabulary is still priming its pins (what is filed now is pinned). */
bool cm_walk_store_priming(const cm_grammar *g);
/* m filed by the vocabulary (its reference taken over): released when the memos'
 * budget is spent or memory is short. */
void cm_walk_store_put_memo(const cm_grammar *g, cm_memo_link *m);

cm_walk_store *cm_walk_store_new(void);
void cm_walk_store_free(cm_walk_store *s);
void cm_walk_store_clear(cm_walk_store *s);  /* drops all but the pinned walks */
void cm_walk_store_pin(cm_walk_store *s);    /* pins every walk stored so far */

#endif
