/* cfgmask C core: exact next-token bitmasks for byte-level grammars.
 *
 * Opaque handles, caller-provided buffers, int status codes (CM_OK = 0,
 * negative = error).  Nothing here prints, aborts, or reads the environment.
 * See docs/design.md for the algorithm.
 */
#ifndef CFGMASK_H
#define CFGMASK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cm_status {
    CM_OK = 0,
    CM_ERR_NOMEM = -1,      /* allocation failed */
    CM_ERR_ARG = -2,        /* bad argument: id out of range, bad buffer, bad table */
    CM_ERR_LIMIT = -3,      /* a configured limit was hit (see cm_limits) */
    CM_ERR_STATE = -4,      /* matcher in its sticky error state */
    CM_ERR_TIMEOUT = -5,    /* a compile-time step ran past its time budget */
    CM_ERR_LIMIT_SET = -6,  /* cm_limits.max_items_per_set was hit (CM_ERR_LIMIT from a
                             * matcher: max_chart_items) */
    CM_ERR_LIMIT_MEM = -7,  /* a compile-time build exceeded its memory budget (cm_budget) */
};

typedef struct cm_vocab cm_vocab;
typedef struct cm_grammar cm_grammar;
typedef struct cm_matcher cm_matcher;

/* ---- vocabulary: the token trie ---------------------------------------- */

/* Token t has bytes data[offsets[t] .. offsets[t+1]).  in_trie[t] != 0 marks
 * ordinary text tokens (non-empty, not special, not stop); only those can be
 * allowed by a grammar's text.  The vocabulary copies what it needs. */
int cm_vocab_new(const uint8_t *data, const uint64_t *offsets, const uint8_t *in_trie,
                 size_t n_tokens, cm_vocab **out);
void cm_vocab_free(cm_vocab *v);
size_t cm_vocab_size(const cm_vocab *v);
size_t cm_vocab_trie_size(const cm_vocab *v);
/* Drop the loop walks the vocabulary keeps for the grammars compiled for it
 * (benchmarks that measure a cold start; grammars keep their own copies), all but
 * the pinned ones. */
void cm_vocab_clear_walks(cm_vocab *v);
/* Pin every loop walk kept so far: it becomes part of the vocabulary, like its
 * trie (the walks of the loops every JSON grammar has, built with the vocabulary). */
void cm_vocab_pin_walks(cm_vocab *v);

/* ---- compiled grammar -------------------------------------------------- */

/* The automaton tables the Python compiler emits (see cfgmask/automata.py).
 * States of all rules share one numbering.  trans[s * n_classes + byte_class[b]]
 * is the next state on byte b, or -1.  Ref edges of state s are
 * ref_rule/ref_target[ref_off[s] .. ref_off[s+1]).  rule_follow[r * 8 ..] is a
 * 256-bit set of bytes that may come right after a completed rule r in some
 * derivation (FOLLOW); an over-approximation is correct, a smaller set is faster. */
typedef struct cm_tables {
    uint32_t n_states, n_rules, n_classes, start_rule;
    const uint8_t *byte_class;     /* [256] */
    const int32_t *trans;          /* [n_states * n_classes] */
    const uint32_t *state_rule;    /* [n_states] */
    const uint8_t *accepting;      /* [n_states] */
    const uint32_t *ref_off;       /* [n_states + 1] */
    const uint32_t *ref_rule;      /* [ref_off[n_states]] */
    const uint32_t *ref_target;    /* [ref_off[n_states]] */
    const uint32_t *rule_start;    /* [n_rules] */
    const uint8_t *rule_nullable;  /* [n_rules] */
    const uint32_t *rule_follow;   /* [n_rules * 8] */
    /* token terminals: state s consumes one whole token of set tok_set[e] and goes
     * to tok_target[e], e in tok_off[s] .. tok_off[s+1]; set k holds the ids
     * set_ids[set_off[k] .. set_off[k+1]), or every token but those if set_negated[k]
     * (stop tokens excepted: they only end the text); a set is empty only if negated */
    uint32_t n_token_sets;
    const uint32_t *tok_off;       /* [n_states + 1] */
    const uint32_t *tok_set;       /* [tok_off[n_states]] */
    const uint32_t *tok_target;    /* [tok_off[n_states]] */
    const uint32_t *set_off;       /* [n_token_sets + 1] */
    const uint32_t *set_ids;       /* [set_off[n_token_sets]] */
    const uint8_t *set_negated;    /* [n_token_sets] */
    /* lookahead markers: a call edge to a rule r with rule_la[r] = c != 0 does not call r;
     * it goes on at once, owing debt c on the next bytes: after byte b the debt is
     * la_next[c * 256 + b] (0: paid; 255: b is forbidden here).  la_union[a * n_la + b]
     * owes a and b (255: never needed).  Debt 0 owes nothing; n_la <= 255, and
     * n_states < 2^24 (an item packs its debt with its state). */
    uint32_t n_la;
    const uint8_t *rule_la;        /* [n_rules] */
    const uint8_t *la_next;        /* [n_la * 256] */
    const uint8_t *la_union;       /* [n_la * n_la] */
} cm_tables;

typedef struct cm_limits {
    size_t max_items_per_set;      /* Earley items in one set */
    size_t max_chart_items;        /* Earley items held by one matcher */
    size_t max_cache_bytes;        /* mask cache of one compiled grammar */
    /* walk the trie once with the real chart when at least this many scanning
     * states of the current set have no cache entry yet (wide, ambiguous sets),
     * then build a few of those entries; 1 = always walk directly, never fill */
    size_t direct_walk_states;
    /* a closed Earley set of at least this many items that receives a second
     * completion gets a waiter index (rule -> items calling it) */
    size_t index_min_items;
    /* a current Earley set of at least this many items looks its whole mask up
     * in the grammar's mask memo, keyed by the chart's reachable structure
     * (SIZE_MAX: never) */
    size_t mask_memo_min_items;
    /* ... and so does a mask whose scanning states left at least this many
     * uncertain candidates to check (SIZE_MAX: never) */
    size_t mask_memo_min_candidates;
    /* 1: states in equal loops of plain states (copies of one terminal) share
     * the part of their cache-entry walk that stays inside the loop; 0: not */
    size_t share_loop_walks;
    /* 1: a cache entry drops the uncertain tokens that no caller of the state's
     * rule, in any context, can go on reading (the rule's upward chart dies on
     * them); 0: every token leaving the rule with its next byte in FOLLOW stays
     * uncertain.  The masks are the same. */
    size_t filter_uncertain;
    /* 1: entries are built from other entries where they can be: a state
     * that calls rules from its callees' (checking only the tokens they leave
     * uncertain), a state that goes where a string loop goes on most bytes
     * from the loop's (walking only the other first bytes again); 0: every
     * entry walks the trie.  The entries are the same. */
    size_t compose_entries;
    /* 1: trie walks through private charts whose live items all wait on the
     * unknown caller (a name, a string, a keyword and their lookahead markers)
     * follow a lazily built DFA over those charts, a table lookup a byte;
     * 0: an Earley step a byte.  The entries are the same. */
    size_t flat_walks;
    /* 1: those configurations may also hold the items of rules called inside
     * the token, with the sets they return to (a chart suffix: a string's
     * helper rules, a callee of a name), when no lookahead debt waits in them;
     * 0: a set that predicts a rule that reads ends the flat part.  The entries
     * are the same. */
    size_t flat_calls;
    /* 1: a whole-trie flat walk whose start reaches only live configurations on
     * plain JSON string bytes (a proof: their closure) accepts the plain tokens
     * in bulk and walks the others (vocab.h); 0: every token.  The entries are
     * the same. */
    size_t plain_skip;
    /* 1: a flat walk of a first byte's subtree (the whole trie's, a byte edge's)
     * whose configuration after that byte reaches only live ones on a name
     * ([A-Za-z_][A-Za-z0-9_]*) accepts the name entries in bulk (vocab.h); 0:
     * every token.  The entries are the same. */
    size_t name_skip;
    /* n > 0: a state of a block of a counted repetition (x{0,1000} is cut
     * into blocks counted by helper rules) with at least n uncertain tokens
     * keeps, of the tokens that cross the end of its block, those that go on
     * inside the next one; a mask takes them at once when the real chart lets
     * the block start again.  0: each is checked against the chart.  The
     * masks are the same. */
    size_t wrap_repeats;
    /* 1: the positions of a counted repetition unrolled into a chain (a
     * maxLength string, each block of a bigger one) take their entries from
     * one shared walk of the chain's loop, by how far each is from the end;
     * 0: each position walks the trie.  The entries are the same. */
    size_t count_chains;
    /* n > 0: a composed entry's byte edge s -b-> y whose y calls rules, when
     * b's subtree holds at least n trie entries, takes the tokens b.T that go
     * through a callee R from one walk of b's subtree from (start(R), OUTER),
     * kept per (start(R), b) and shared by every position that calls R after
     * b (the whitespace positions of an expression grammar); 0: each edge
     * walks b's subtree from y.  The entries are the same. */
    size_t tail_parts;
    /* n > 0: a composed entry's byte edge s -b-> y whose subtree has at least n
     * trie entries takes the walk of b's subtree from (y, OUTER), kept per
     * (y, b) with the tail parts and shared by every state with an edge b into
     * y, where y is a blank run before a lookahead marker (compose.c,
     * edge_shared); 0: each state walks its edges.  The entries are the same. */
    size_t share_edges;
    /* n > 0: a mask with at least n uncertain candidates whose current set is
     * a few items that read bytes and call nothing (inside a string) decides
     * them by those items' automata, and the rest of a token after one of
     * them completes (a string's closing quote) by a verdict the matcher keeps
     * per (the set that completion makes, those bytes) while the sets below
     * stay; 0: each candidate is run through the chart.  The masks are the
     * same. */
    size_t closing_verdicts;
    /* n > 0: a walk of at least n trie entries that enters a name -- a state
     * that calls nothing and loops to itself on a set of bytes, its run --
     * takes the tokens that end inside the run, and the subtrees that leave
     * it, from one walk per (run bytes, trie range) that the vocabulary keeps
     * for every grammar (up to 16 MB, beside max_cache_bytes), and walks only
     * those subtrees on; 0: every state walks its names.  The entries are the
     * same. */
    size_t run_walks;
    /* n > 0: the upward filter answers the rests of tokens after their exits
     * whose first byte after a run of name bytes no state the rule's callers
     * reach through name bytes reads (walk.c, name_stops), by tables made per
     * rule once a filter has met n rests that stop on a non-ASCII byte after
     * a name, and kept; 0: every rest is scanned.  The entries are the same. */
    size_t name_stops;
    /* n > 0: the upward filter keeps, per (rule, byte), how many of the
     * byte its upward chart reads and where it dies, learnt from the rests it
     * reads, and answers from that the rests that are runs of the byte (or die
     * inside their leading run): at once before asking, and among the asks
     * when that saves at least n steps (walk.c, follow_run); 0: every rest is
     * scanned.  The entries are the same. */
    size_t filter_runs;
    /* n > 0 (and filter_runs): a rest whose leading run of a byte ends in a
     * byte that no state reachable from the rule's return states through the
     * run's byte, calls and returns reads dies without a chart step, by a
     * table made per (rule, byte) once its filters have read n rests die on
     * the byte after their run (walk.c, run_stops_of); 0: never.  The
     * entries are the same. */
    size_t run_stops;
    /* n > 0 (and filter_runs): once the filter has read n runs of a byte
     * whole past the length known to survive, it reads the next one on to
     * twice its length (walk.c, run_ahead); 0: never.  The entries are the
     * same. */
    size_t run_ahead;
    /* n > 0 (and run_ahead): such a run that alone took n chart steps or
     * more is read on at once, without waiting for run_ahead of them
     * (walk.c, run_ahead_now); 0: only by the count.  The entries are the
     * same. */
    size_t run_ahead_steps;
    /* n > 0: once the upward filter has met n rests of a rule's tokens, the
     * bytes its upward chart reads second after each first byte are made
     * (one chart step a first byte it reads) and a rest whose second byte is
     * not among them dies without being asked (walk.c, pair_stops; not in
     * grammars with lookahead debts); 0: never.  The entries are the same. */
    size_t filter_pairs;
    /* n > 0: once the grammar's candidate checks have run n - 1 chart steps,
     * an uncertain token's verdict from the chart is kept per (token, the
     * enclosing stack its check read: the sets reachable from the current one
     * down to the lowest a completion read, origins relabelled), and taken at
     * a later mask over the same stack (stackmemo.c; a grammar whose checks
     * stay few, most JSON Schemas, never pays for the store); 0: every
     * candidate is run through the chart.  The masks are the same. */
    size_t stack_verdicts;
    /* 1: a flat walk's transition from a configuration of one set of items
     * waiting on the unknown caller into states that neither call nor
     * complete (a name's, a string's, a key's bytes) is made from the
     * automaton's transitions, without a chart (flat.c, flat_step_plain); 0:
     * every transition is computed with the scratch chart.  The entries are
     * the same. */
    size_t flat_plain_steps;
    /* 1: a composed entry's check of the tokens its parts leave uncertain
     * (one chart run along them in trie order) keeps, for each set a second
     * token resumes from, the bytes its items read, and a token whose next
     * byte none reads dies there without a scan (walk.c, cm_walk_listed_at);
     * 0: every byte is scanned.  The entries are the same. */
    size_t listed_reads;
    /* 1: the upward filter's verdicts of a rule's first filter that asks are
     * held as the asks had them (no hash, lookup or growth of the memo) and
     * hashed into the memo only when a second filter of the rule comes
     * (walk.c, follow_lazy_state); 0: every verdict is hashed at once.  The
     * entries are the same. */
    size_t lazy_follow;
} cm_limits;

void cm_limits_default(cm_limits *out);

/* The grammar borrows v (keep it alive longer) and copies the tables. */
int cm_grammar_new(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids,
                   size_t n_stop, const cm_limits *limits, cm_grammar **out);
/* The same, borrowing the tables too: they stay unchanged and alive until cm_grammar_free
 * (GrammarHandle keeps the compiler's bytes; no copy of the transition matrix). */
int cm_grammar_new_borrowed(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids,
                            size_t n_stop, const cm_limits *limits, cm_grammar **out);
/* The same, borrowing the tables, with what the grammar derives of each state and rule given:
 * the facts cm_flat_derive_facts wrote (cm_facts_size bytes, 8-byte aligned) for the tables
 * cm_flat_derive_trans wrote (which checked the rows' targets, so the rows are not walked
 * again).  Borrowed too: unchanged and alive until cm_grammar_free. */
int cm_grammar_new_facts(const cm_tables *t, const uint8_t *facts, const cm_vocab *v, const uint32_t *stop_ids,
                         size_t n_stop, const cm_limits *limits, cm_grammar **out);
void cm_grammar_free(cm_grammar *g);
/* Precompute the mask-cache entry of every state that scans bytes.  deadline:
 * seconds on CLOCK_MONOTONIC (Python's time.monotonic()), <= 0 for none; past
 * it, checked between entries, CM_ERR_TIMEOUT (the entries built so far stay). */
int cm_grammar_warm(const cm_grammar *g, double deadline);
size_t cm_grammar_cache_bytes(const cm_grammar *g);
/* The mask-cache entry of one automaton state (built if need be), for tests and
 * inspection: its accepted tokens as a bitmask (words: ceil(V / 32) int32),
 * its uncertain tokens' ids into unc (room for V) and their number into *n_unc. */
int cm_grammar_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc);
/* What cm_grammar_new derived of a state's byte row (tests): the bytes it has a transition on,
 * 256 bits as 8 words (byte b at bit b % 32 of word b / 32); returns whether it has one (-1: no
 * such state). */
int cm_grammar_state_bytes(const cm_grammar *g, uint32_t state, uint32_t out[8]);
/* Whether cm_grammar_new found every state of a rule without calls or token edges, its
 * accepting states reading no byte (wrap.c's rule_block; tests): 1 or 0 (-1: no such rule). */
int cm_grammar_rule_block(const cm_grammar *g, uint32_t rule);
/* A state's flags as the grammar keeps them (tests): bit 0 has_bytes, 1 simple, 2 has_tokens,
 * 3 plain, 4 solo; *calls its calls' bits (rule r % 64).  -1: no such state. */
int cm_grammar_state_flags(const cm_grammar *g, uint32_t state, uint64_t *calls);
/* The distinct states a rule's callers go on in after it completes, ascending (tests): *states
 * points at them in the grammar; their count, -1: no such rule. */
int cm_grammar_rule_returns(const cm_grammar *g, uint32_t rule, const uint32_t **states);
size_t cm_grammar_cache_entries(const cm_grammar *g);
/* How entries were built so far: composed from callees', taken from a donor state's,
 * the configurations of the flat-walk DFA, and loop walks found in the vocabulary's
 * cache (walked for an earlier grammar). */
void cm_grammar_build_stats(const cm_grammar *g, size_t *composed, size_t *donated, size_t *flat_configs,
                            size_t *vocab_loops);
/* The shared walks of counted chains so far, the entries taken from them, and how many of
 * the walks were found in the vocabulary's store (walked for an earlier grammar; chains.c). */
void cm_grammar_chain_stats(const cm_grammar *g, size_t *walks, size_t *entries, size_t *from_vocab);
/* Tail parts (compose.c) walked, and taken by composed entries' byte edges. */
void cm_grammar_tail_stats(const cm_grammar *g, size_t *walks, size_t *uses);
/* Run walks (loops.c) used by this grammar's entries: walked for it, and found in the
 * vocabulary's store (walked earlier, for it or another grammar). */
void cm_grammar_run_stats(const cm_grammar *g, size_t *walked, size_t *from_vocab);

/* ---- matcher: one per sequence ----------------------------------------- */

int cm_matcher_new(const cm_grammar *g, cm_matcher **out);
void cm_matcher_free(cm_matcher *m);
int cm_matcher_fork(const cm_matcher *m, cm_matcher **out);
void cm_matcher_reset(cm_matcher *m);

/* 1 = accepted, 0 = rejected (state unchanged), < 0 = error. */
int cm_matcher_accept_token(cm_matcher *m, uint32_t token);
int cm_matcher_accept_bytes(cm_matcher *m, const uint8_t *data, size_t n);
/* Bytes-only check: would these bytes be accepted?  Leaves the state unchanged. */
int cm_matcher_can_accept_bytes(cm_matcher *m, const uint8_t *data, size_t n);

/* words has n_words >= ceil(V/32) int32 slots; bit t%32 of word t/32 = token t allowed. */
int cm_matcher_fill_mask(cm_matcher *m, uint32_t *words, size_t n_words);

int cm_matcher_is_accepting(const cm_matcher *m);
int cm_matcher_is_terminated(const cm_matcher *m);
int cm_matcher_error(const cm_matcher *m);       /* sticky status, CM_OK if none */
size_t cm_matcher_num_tokens(const cm_matcher *m);
int cm_matcher_rollback(cm_matcher *m, size_t k);
/* Bytes every continuation must start with (stops at cap); returns the count or < 0. */
long cm_matcher_jump_forward(cm_matcher *m, uint8_t *buf, size_t cap);
size_t cm_matcher_chart_items(const cm_matcher *m);

/* What the last fill_mask did: scanning states in the Earley set, uncertain
 * candidates collected, candidates checked against the parser, Earley items
 * in the current set, whether the mask came from the mask memo, Earley steps
 * the checks ran, checks decided by a closing verdict kept from before. */
typedef struct cm_mask_stats {
    size_t n_states, n_candidates, n_checked, n_items, memo_hit;
    size_t n_steps, n_verdicts;
    size_t copied;  /* the first entry's bitset was copied over the row, not ORed into zeros */
} cm_mask_stats;
void cm_matcher_mask_stats(const cm_matcher *m, cm_mask_stats *out);
/* A mask with few but long candidates makes the closing-verdict split once its checks have run
 * a few dozen Earley steps (mask.c, mode 1, the default; 0 off: the chart decides them all,
 * the reference; 2 at a mask's first check, for the tests), and how many masks did so in this process (for the tests).  Process-wide. */
void cm_mask_split_late_enable(int mode);
size_t cm_mask_split_late_hits(void);
/* The split's candidates read from where the one before left its automata (mask.c, check_split:
 * on by default; 0 each from the split's states, the reference), and how many bytes' transitions
 * the resumes skipped in this process (for the tests).  Process-wide. */
void cm_mask_split_resume_enable(int on);
size_t cm_mask_split_resumed(void);

/* ---- compile-time automaton build (used by cfgmask/fsm.py) ---------------- */

/* What one compile-time build may spend, shared by the calls it is passed to.  Every
 * array a build holds (NFA, subset-construction sets and hash table, DFAs, scratch) is
 * counted in `used` while it lives; past max_bytes the build stops with
 * CM_ERR_LIMIT_MEM, past the deadline with CM_ERR_TIMEOUT.  A NULL budget: no limits. */
typedef struct cm_budget {
    size_t max_bytes;              /* 0: no limit */
    size_t used, peak;             /* bytes counted now, and at most (start both at 0) */
    double deadline;               /* CLOCK_MONOTONIC seconds (Python's time.monotonic()); <= 0: none */
} cm_budget;

/* An NFA over byte ranges, labels (rule calls, token terminals) and epsilon. */
typedef struct cm_nfa_view {
    uint32_t n_states;
    const uint32_t *byte_off;      /* [n_states + 1] */
    const uint8_t *byte_lo, *byte_hi;
    const uint32_t *byte_to;
    const uint32_t *label_off;     /* [n_states + 1] */
    const uint32_t *label, *label_to;
    const uint32_t *eps_off;       /* [n_states + 1] */
    const uint32_t *eps_to;
} cm_nfa_view;

/* A minimal DFA: class c covers bytes class_lo[c] .. class_lo[c+1]-1; state 0 starts. */
typedef struct cm_dfa_out {
    uint32_t n_states, n_classes;
    uint16_t class_lo[257];
    int32_t *trans;                /* [n_states * n_classes], -1 = none */
    uint8_t *accepting;            /* [n_states] */
    uint32_t *lab_off;             /* [n_states + 1] */
    uint32_t *lab, *lab_to;
    /* 1: every state is reached from the start and reaches an accepting state when every label
     * edge is followed (set by minimization, where it is known at little cost); trimming such a
     * DFA with every label productive keeps it whole, its rows unread.  0: not known. */
    uint8_t live;
    /* Its byte rows as runs of classes with one target (fsm.h, cm_dfa_runs_of): kept at its
     * first copy into a caller's NFA (what that copy's walk of the rows found; the first thread's
     * where several copy it at once), so an automaton inlined several times (a JSON number) is
     * walked once; NULL until then, freed with it.  Zero where a cm_dfa_out is made. */
    struct cm_dfa_runs *runs;
} cm_dfa_out;

/* Subset construction from `start` (accepting: sets holding `final`) and
 * minimization; CM_ERR_LIMIT past max_states, CM_ERR_LIMIT_MEM / CM_ERR_TIMEOUT
 * past the budget.  The DFA stays counted in budget->used. */
int cm_fsm_build(const cm_nfa_view *nfa, uint32_t start, uint32_t final, size_t max_states,
                 cm_budget *budget, cm_dfa_out **out);
void cm_dfa_out_free(cm_dfa_out *d);

/* The product of k DFAs over common atoms (the JSON Schema front end's string and key
 * automata): rows holds each component's table in turn, sizes[i] states of n_atoms targets
 * each (a component's dead state included, as a state of its own), start state 0 in every
 * component.  The tuples reachable from (0, ..., 0), numbered breadth first with successors
 * in atom order: *n_out of them, *trans_out their targets ([n][n_atoms]), *states_out the
 * tuples ([n][k]), both malloc'd for the caller to free.  CM_ERR_LIMIT past max_states,
 * CM_ERR_ARG for a target out of range or sizes not covering rows. */
int cm_dfa_product(const uint32_t *rows, size_t n_rows, const uint32_t *sizes, uint32_t k, uint32_t n_atoms,
                   uint32_t max_states, uint32_t *n_out, uint32_t **trans_out, uint32_t **states_out);
/* The NFA that a character DFA's minimization hands cm_fsm_build: the DFA (n states, m atoms,
 * trans[s * m + a] a state or -1, accept[s]) cut to its live states (those reaching an accepting
 * one), its atoms as labels, plus a final state n that each live accepting state has an epsilon
 * edge to.  Caller's buffers: lab_off and eps_off [n + 2], lab and lab_to [n * m], eps_to [n].
 * 1 written, 0 (nothing written) if the start state 0 is not live, CM_ERR_ARG for a target out
 * of range, CM_ERR_NOMEM. */
int cm_dfa_trim_labels(const int32_t *trans, uint32_t n, uint32_t m, const uint8_t *accept, uint32_t *lab_off,
                       uint32_t *lab, uint32_t *lab_to, uint32_t *eps_off, uint32_t *eps_to);

/* ---- Thompson construction from encoded IR (cfgmask/automata.py, _Encoder) ---------- */

/* Node ops of the encoded IR: a DAG of nodes in one uint32 array, children by offset.
 *   LIT    [op, n, byte * n]
 *   BYTES  [op, n, (lo, hi) * n]                 one byte in the ranges
 *   UTF8   [op, n, (lo, hi) * n, n_seqs, (len, (lo, hi) * len) * n_seqs]
 *          a character class: code-point ranges (skipped), then its UTF-8 byte sequences
 *   SEQ    [op, n, child * n]     ALT [op, n, child * n]
 *   REPEAT [op, lo, hi (CM_IR_INF: unbounded), child]
 *   REF    [op, name]                            a rule or token terminal (by name index)
 *   BADTOKEN [op, 0]                             a token terminal without ids (CM_ERR_ARG)
 *   WORDS  [op, flags, n_words, n_bytes, len * n_words, bytes packed 4 a uint32 (memory order)]
 *          one of the words (any order, repeats allowed); flags CM_WORDS_JSON: each word is
 *          the UTF-8 value of a JSON string (no surrogates), matched in quotes in every JSON
 *          spelling.  Built straight into a minimal DFA (words.c); a member whose whole body
 *          is one is not subject to max_states. */
enum { CM_IR_LIT = 1, CM_IR_BYTES = 2, CM_IR_UTF8 = 3, CM_IR_SEQ = 4, CM_IR_ALT = 5,
       CM_IR_REPEAT = 6, CM_IR_REF = 7, CM_IR_BADTOKEN = 8, CM_IR_WORDS = 9 };
enum { CM_WORDS_JSON = 1 };
#define CM_IR_INF UINT32_MAX
enum { CM_IR_REF_CALL = 0, CM_IR_REF_ENTRY = 1, CM_IR_REF_EMBED = 2, CM_IR_REF_EXPAND = 3 };

/* How a name is built: a label edge (the default for names without an entry), an
 * epsilon edge to the entry of member `arg` of a right-linear component, a copy
 * of fragment `arg`, or the NFA of the body at code offset `arg` (a rule expanded in place:
 * it must not refer to itself, directly or through other expanded rules). */
typedef struct cm_ir_ref {
    uint32_t name, kind, arg;
} cm_ir_ref;

/* A DFA to copy; labels[l] is the label value of its label l. */
typedef struct cm_ir_frag {
    const cm_dfa_out *dfa;
    const uint32_t *labels;
} cm_ir_frag;

typedef struct cm_ir_input {
    const uint32_t *code;
    size_t code_len;
    const uint32_t *label;         /* [n_names] label value of each name (its rank in name order) */
    uint32_t n_names;
    const cm_ir_ref *refs;         /* sorted by name */
    uint32_t n_refs;
    const cm_ir_frag *frags;
    uint32_t n_frags;
} cm_ir_input;

/* The minimal DFAs of the n_roots bodies at code offsets roots[]: one NFA each, or
 * (shared) one NFA for all, body i built from entry state i + 1 (a right-linear
 * component).  out[n_roots] receives the DFAs (labels are label values). */
int cm_fsm_build_ir(const cm_ir_input *in, const uint32_t *roots, uint32_t n_roots, int shared,
                    size_t max_states, cm_budget *budget, cm_dfa_out **out);
/* Renumber d's labels 0..n-1 by increasing value; used[] (room for lab_off[n_states]
 * entries) receives the old values. */
int cm_dfa_compact_labels(cm_dfa_out *d, uint32_t *used, uint32_t *n_used);

/* Does d accept some string when only labels l with label_ok[l] count as steps? */
int cm_dfa_can_accept(const cm_dfa_out *d, const uint8_t *label_ok, int *result);
/* d without label edges l where !label_ok[l] and without the states that cannot reach
 * acceptance or be reached (kept states keep their order); *out = NULL when the start
 * state is dead. */
int cm_dfa_trim(const cm_dfa_out *d, const uint8_t *label_ok, cm_dfa_out **out);

/* ---- one call per compile stage (cfgmask/automata.py) ------------------------ */

/* A rule of a component of the rule graph. */
typedef struct cm_comp_member {
    uint32_t name;                 /* name index */
    uint32_t root;                 /* code offset of its body */
    uint32_t inline_cap;           /* its DFA is copied into callers when it has at most this
                                    * many states (0: never: not regular, or outlined) */
} cm_comp_member;

typedef struct cm_component {
    const cm_comp_member *members;
    uint32_t n_members;
    const uint32_t *callees;       /* name indices of the rules outside it that it calls */
    uint32_t n_callees;
    int right_linear;              /* recursive and regular: one NFA, members ENTRY each other */
    const cm_ir_frag *cached;      /* [n_members] its DFAs, given (NULL: build them) */
    int expand;                    /* one member, not recursive, regular, one caller (a later
                                    * component): not built on its own, its body is expanded
                                    * in its caller's NFA; built on its own (and copied as
                                    * usual) only if that caller's build fails a limit so */
} cm_component;

/* A built member: its minimal DFA, labels renumbered 0..n_labels-1 by increasing value. */
typedef struct cm_comp_dfa {
    cm_dfa_out *dfa;               /* NULL for a member of a cached component */
    uint32_t *labels;              /* [n_labels] the label value of each label */
    uint32_t n_labels;
} cm_comp_dfa;

/* The DFAs of every component not cached, in order (callees first), from the encoded
 * IR of `in` (its refs and frags are ignored: each component's are derived).  A callee
 * is copied into a caller if it was inlined (n_states <= its inline_cap) and has at
 * most `budget` states, for budget in (inline_max_states, 64, 0): the next budget is
 * tried on CM_ERR_LIMIT (max_states), not on time or memory.  A component marked expand is
 * first expanded in its caller's NFA (with the callees it would copy); if that build fails
 * a limit (states or memory), the expanded components are built on their own and the
 * caller's ladder runs as above.  out[] gets one entry per member of every component, in
 * order (free with cm_comp_dfa_free; dfa NULL for a component expanded in its caller); on
 * error it is empty and *failed is the index of the component that failed.  Built DFAs stay
 * counted in budget->used. */
int cm_compile_components(const cm_ir_input *in, const cm_component *comps, uint32_t n_comps,
                          size_t max_states, size_t inline_max_states, cm_budget *budget,
                          cm_comp_dfa *out, uint32_t *failed);
void cm_comp_dfa_free(cm_comp_dfa *d);   /* its arrays; d itself is the caller's */

/* Every runtime rule's automaton in one numbering (automata._Flat). */
typedef struct cm_flat_rules {
    uint32_t n_rules;              /* 0: the start rule derives no finite string */
    uint32_t n_states;
    uint32_t *rule_name;           /* [n_rules] name index, in first-use order from the start */
    uint32_t *rule_state;          /* [n_rules + 1] first state of each rule (last: n_states) */
    uint32_t *rule_trans;          /* [n_rules + 1] where each rule's rows start in trans */
    uint8_t *byte_class;           /* [n_rules * 256] each rule's class of each byte */
    int32_t *trans;                /* rule r: [its states * its classes] from rule_trans[r];
                                    * targets in the one numbering, -1 = none */
    uint8_t *accepting;            /* [n_states] */
    uint32_t *lab_off;             /* [n_states + 1] */
    uint32_t *lab_name, *lab_to;   /* [lab_off[n_states]] callee or token name index, target */
} cm_flat_rules;

/* From every rule's DFA (rules[name].dfa, NULL: not a rule; labels: label values) the
 * runtime rules (breadth first from `start`, each DFA's callees in order of first use),
 * the productive ones (token terminals, is_token[name], always are), each trimmed
 * (cm_dfa_trim), the runtime rules again, flattened in that order.  in->label gives
 * each name's label value; refs and frags are ignored. */
int cm_compile_finish(const cm_ir_input *in, const cm_ir_frag *rules, const uint8_t *is_token,
                      uint32_t start, cm_budget *budget, cm_flat_rules **out);
void cm_flat_rules_free(cm_flat_rules *f);

/* What cm_tables takes that follows from flat rules (tables.c): call edges (callee as rule
 * index) and token edges (token set in order of first use) as CSR over the states, nullable
 * rules, FOLLOW bytes and the global byte classes (numbered by a hash of each byte's column,
 * sum_i weights[i] * (target + 2) as int64, as cfgmask/compile/tables.py does). */
typedef struct cm_flat_derived {
    uint32_t n_classes;            /* 0: no byte classes (weights too short, or a hash collision) */
    uint8_t byte_class[256];
    uint8_t *nullable;             /* [n_rules] */
    uint32_t *follow;              /* [n_rules * 8] 256-bit sets, byte b at bit b % 32 of word b / 32 */
    uint32_t *ref_off, *tok_off;   /* [n_states + 1] */
    uint32_t *ref_rule, *ref_target; /* [ref_off[n_states]] */
    uint32_t *tok_set, *tok_target;  /* [tok_off[n_states]] */
    uint32_t n_sets;
    uint32_t *set_name;            /* [n_sets] name index of each token set */
    /* The runs of one target that the FOLLOW pass found in each state's row, for
     * cm_flat_derive_trans (one walk of the rows, not two): state s's rule-class runs end at
     * run_end[run_off[s] .. run_off[s + 1]), in order.  NULL when not found (no byte classes). */
    uint32_t *run_off;             /* [n_states + 1] */
    uint16_t *run_end;
    /* Where ROW_BITS walked the rows (a rule of 1-64 classes) its runs are bits instead, its
     * range of run_end empty: run_bits[s], the starts of s's runs (bit c: c == 0 or a class of
     * another target than c - 1's), and edges[s], its classes with an edge (target != -1).
     * NULL (run_end for every row) with ROW_BITS off or without byte classes. */
    uint64_t *run_bits, *edges;    /* [n_states] each */
    /* What the grammar derives of each state's row and each rule (grammar.c), found by the
     * same walk of the rows, for cm_grammar_new_derived: the bytes each state has a byte
     * transition on (8 words, byte b at bit b % 32 of word b / 32; a state with token edges
     * too) and whether each rule is a block (wrap.c).  NULL without byte classes. */
    uint32_t *state_bytes;         /* [n_states * 8] */
    uint8_t *rule_block;           /* [n_rules] */
    /* Where cm_flat_derive_facts wrote them, with the per-state flags (the caller's buffer, not
     * freed here), or NULL: state_bytes and rule_block are this struct's own. */
    uint8_t *facts;
} cm_flat_derived;

/* The facts of cm_flat_derive_facts for n_states states and n_rules rules: the bytes of one
 * buffer, laid out as state_bytes uint32 [n_states * 8], calls uint64 [n_states] (bit r % 64: the
 * state calls rule r), has_bytes, simple, has_tokens, plain, solo uint8 [n_states] each (the
 * grammar's flags, grammar.h) and rule_block uint8 [n_rules]. */
size_t cm_facts_size(uint32_t n_states, uint32_t n_rules);

/* From f (n_rules > 0) and is_token[n_names]; byte classes only if n_weights >= n_states. */
int cm_flat_derive(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names, const int64_t *weights,
                   size_t n_weights, cm_flat_derived **out);
/* The same, with what the grammar derives of the states and rules (cm_grammar_new_facts)
 * written into facts (cm_facts_size(f->n_states, f->n_rules) bytes, 8-byte aligned: the
 * caller's, a Python bytes object) instead of state_bytes and rule_block of their own; facts
 * NULL: as cm_flat_derive.  (*out)->facts is facts when they were written (byte classes
 * numbered), else NULL. */
int cm_flat_derive_facts(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names, const int64_t *weights,
                         size_t n_weights, uint8_t *facts, cm_flat_derived **out);
void cm_flat_derived_free(cm_flat_derived *d);
/* The transition table by global byte class, int32 [n_states * d->n_classes] (d from f, with
 * byte classes: n_classes > 0), into out: written where the caller keeps it (a Python bytes
 * object), not made and copied. */
int cm_flat_derive_trans(const cm_flat_rules *f, const cm_flat_derived *d, int32_t *out);
/* cm_flat_derive's walk of a keyed row of up to 64 classes as bit masks of its edges and run
 * starts (tables.c, ROW_BITS; on by default), kept for cm_flat_derive_trans (run_bits, edges):
 * off, run by run, the runs' ends kept in run_end (the reference the tests compare against).
 * The derived tables are the same. */
void cm_derive_row_bits_enable(int on);
void cm_derive_class_spans_enable(int on);
/* cm_flat_derive_trans's rows as AVX2 gathers, 8 global classes a gather, where the CPU has them
 * and every class of the rule is some global class's (tables.c, TRANS_GATHER; on by default): off,
 * a -1 fill and each run's classes stored (the reference the tests compare against).  The table
 * and the errors are the same.  _rows: how many rows were made that way so far (a test's count;
 * not atomic). */
void cm_derive_trans_gather_enable(int on);
size_t cm_derive_trans_gather_rows(void);
/* The walks of a finished DFA's rows that push each run's target (dfa.c: cm_dfa_can_accept's,
 * the trim's reach) find a row of at most 64 classes' runs from its run starts in one pass
 * (WALK_STARTS; on by default): off, a scan at every run (the reference the tests compare
 * against; the same runs in the same order). */
void cm_dfa_walk_starts_enable(int on);
/* How many rows were walked that way so far in this process (a test's count; not atomic). */
size_t cm_dfa_walk_starts_rows(void);

/* ---- where a compile's C time goes (cstats.c; debugging and benchmarks) ---------- */

/* Phases of the C half of a compile, timed while the counters are on. */
enum { CM_PH_THOMPSON = 0, CM_PH_SUBSETS = 1, CM_PH_MINIMIZE = 2, CM_PH_WORDS = 3, CM_PH_PRODUCTIVE = 4,
       CM_PH_TRIM = 5, CM_PH_FLATTEN = 6, CM_PH_DERIVE = 7, CM_PH_GRAMMAR = 8, CM_PH_DIRECT = 9,
       CM_PHASES = 10 };

typedef struct cm_compile_stats {
    uint64_t ns[CM_PHASES];        /* CLOCK_MONOTONIC nanoseconds spent in each phase */
    uint64_t n_builds;             /* subset constructions */
    uint64_t nfa_states, dfa_states, min_states; /* their sums: NFA, DFA, minimal DFA */
    uint64_t hopcroft_states;      /* DFA states minimized by Hopcroft (a cycle over 64 states) */
} cm_compile_stats;

/* One subset construction: the component's first member (name index) and its sizes. */
typedef struct cm_build_rec {
    uint32_t name, nfa_states, dfa_states, min_states;
    uint64_t ns_subsets, ns_minimize;
} cm_build_rec;

/* Counters on or off for the whole process (set it before compiling; off by default). */
void cm_compile_stats_enable(int on);
/* Rules built straight to their DFA where they can be (direct.c; on by default): off, every
 * rule takes Thompson's path (the reference the tests compare against). */
void cm_direct_build_enable(int on);
/* Subset construction's lean bookkeeping (fsm.c; on by default): a DFA state's acceptance found by
 * bisecting its sorted set, its set table sized from the NFA at the start.  Off: the scan of every
 * set and the table grown from 64 (the reference the tests compare against). */
void cm_fsm_lean_enable(int on);
/* Subset constructions run with it on so far in this process (a test's count). */
size_t cm_fsm_lean_builds(void);
/* The direct build also takes bodies with a count and unbounded repetitions (no cyclic copied
 * DFA), minimized after, while it makes at most 1.5x their NFA's states (direct.c; on by
 * default): off, those take Thompson's path (the reference the tests compare against). */
void cm_direct_loops_enable(int on);
/* A bounded count's positions copied in one pass where the position after is a state no other
 * refers to (each copy new by construction: kept without looking for its equal; direct.c; on by
 * default): off, each copied state is looked up (the reference the tests compare against). */
void cm_direct_fresh_copy_enable(int on);
/* How many count positions were copied that way so far in this process (a test's count; not atomic). */
size_t cm_direct_fresh_copies(void);
/* The copies of a DFA into callers' NFAs take its rows as runs kept on it (cm_dfa_out.runs; on by
 * default): off, each copy walks the rows (the reference the tests compare against). */
void cm_dfa_runs_enable(int on);
/* How many copies took a DFA's runs already made for an earlier copy, so far in this process. */
size_t cm_dfa_runs_reused(void);
/* Keep d's runs now (a walk of its rows) unless it has them: the prelude's automata, pinned for
 * every compile, get theirs when pinned, not from whichever compile first copies them (so a
 * compile after the caches are cleared finds what every other does). */
int cm_dfa_keep_runs(const cm_dfa_out *d);
/* This thread's counters since the last take, and up to max_recs of its build records
 * (returns how many); both are reset. */
size_t cm_compile_stats_take(cm_compile_stats *out, cm_build_rec *recs, size_t max_recs);

/* ---- applying a bitmask to logits (apply.c) ----------------------------------- */

/* Logits: logit i of row r at base + r * row_stride + i * col_stride (bytes; multiples of
 * elem_size, base aligned to it; any sign).  elem_size is 2, 4 or 8 (bf16/fp16, fp32,
 * fp64); neg is the dtype's -inf bit pattern as an integer (0xFF80 bf16, 0xFC00 fp16,
 * 0xFF800000 fp32, 0xFFF0000000000000 fp64). */
typedef struct cm_logits_view {
    uint8_t *base;
    size_t n_rows, width;
    ptrdiff_t row_stride, col_stride;
    size_t elem_size;
    uint64_t neg;
} cm_logits_view;

/* A bitmask: int32 word w of row r at base + r * row_stride + w * col_stride (bytes). */
typedef struct cm_mask_view {
    const uint8_t *base;
    size_t n_rows, n_words;
    ptrdiff_t row_stride, col_stride;
} cm_mask_view;

/* Blocked logits become neg; allowed ones keep their bits.  Token t of a row is allowed
 * iff t < 32 * n_words and bit t % 32 of word t / 32 is set (columns past the mask are
 * blocked; mask bits past width are ignored).  rows == NULL: every row, logits row r with
 * mask row r (l->n_rows == m->n_rows); else rows[0 .. n_rows), each indexing both (a row
 * listed twice is masked twice, with the same result).  CM_ERR_ARG, before writing
 * anything, for a bad view or a row out of range of either; the caller vouches that the
 * views describe memory it owns.  max_simd: 0 for the CPU's best instruction set, or
 * a cap (tests compare every path). */
int cm_apply_mask(const cm_logits_view *l, const cm_mask_view *m, const int64_t *rows, size_t n_rows,
                  int max_simd);

/* The instruction sets cm_apply_mask has a path for; cm_apply_mask_simd: this CPU's best. */
enum cm_simd { CM_SIMD_BASE = 1, CM_SIMD_AVX2 = 2, CM_SIMD_AVX512 = 3 };
int cm_apply_mask_simd(void);

/* Counted repetitions as segments (docs/design.md §7, "Segments on the compile side" and "The
 * segment form in C", session 33; csrc/segments.c).  A spliced automaton: the rules' tables as
 * cm_tables (byte edges and calls), and beside them per state its segment (CM_SEG_NONE: none),
 * per byte cell (state * n_classes + class) the flags of that edge, per segment its bounds, rule
 * and head.  INTO: a head's edge into the unit (needs k < hi); BACK: completes a unit onto the
 * head (k + 1); EXIT: a head's edge out of the segment (needs k >= lo; the count is dropped).
 * Any other edge onto a head, a call's target and a rule's start on a head enter with k = 0; a
 * head accepts only at k >= lo.  cm_segtab_new validates (CM_ERR_ARG for anything that breaks
 * these rules: ids out of range, lo > hi, flags on no edge or out of place, an interior state
 * entered from outside, calls or tokens or acceptance inside) and copies. */
#define CM_SEG_NONE UINT32_MAX
enum cm_seg_flags { CM_SEG_INTO = 1, CM_SEG_BACK = 2, CM_SEG_EXIT = 4 };
typedef struct cm_seg_tables {
    cm_tables t;
    uint32_t n_segments;
    const uint32_t *state_seg;   /* [n_states] */
    const uint8_t *edge_flags;   /* [n_states * n_classes] */
    const uint32_t *seg_lo;      /* [n_segments] */
    const uint32_t *seg_hi;      /* [n_segments], lo <= hi < CM_SEG_NONE */
    const uint32_t *seg_rule;    /* [n_segments] */
    const uint32_t *seg_head;    /* [n_segments] */
} cm_seg_tables;
typedef struct cm_segtab cm_segtab;
typedef struct cm_segchart cm_segchart;
int cm_segtab_new(const cm_seg_tables *in, cm_segtab **out);
void cm_segtab_free(cm_segtab *st);
/* A private byte-level Earley chart with a count beside each item, over a cm_segtab with no
 * token edges and no lookahead markers (CM_ERR_ARG otherwise): the count rules in C, for the
 * tests against tests/segment_model.py, until the engine's chart counts (step (b)(2)).  The
 * chart borrows the tables: free it first.  step: 1 read, 0 rejected (nothing read), or an
 * error: CM_ERR_STATE when an item is added twice with two counts (the debug check of the
 * design's claim), CM_ERR_LIMIT past max_items. */
int cm_segchart_new(const cm_segtab *st, size_t max_items, cm_segchart **out);
int cm_segchart_fork(const cm_segchart *c, cm_segchart **out);
void cm_segchart_free(cm_segchart *c);
int cm_segchart_step(cm_segchart *c, uint8_t b);
int cm_segchart_accepting(const cm_segchart *c);
int cm_segchart_viable(const cm_segchart *c, uint32_t out[8]);
size_t cm_segchart_len(const cm_segchart *c);  /* bytes read */
int cm_segchart_rollback(cm_segchart *c, size_t n);
/* The last set's items (state, origin, count: CM_SEG_NONE outside segments), up to cap; the
 * number of items. */
size_t cm_segchart_items(const cm_segchart *c, uint32_t *state, uint32_t *origin, uint32_t *k, size_t cap);
/* Scans of items in segment states (their guards read), in this process: for the tests. */
size_t cm_counted_scans(void);
/* A grammar over the spliced automaton (step (b)(2)): cm_grammar_new on in->t, the segment tags
 * validated as cm_segtab_new does and kept.  Its matchers keep a count per chart item and accept
 * or reject by the counts, and its masks read them (step (c): a segment state's entry is keyed by
 * its count's clipped pair, cache.c); cm_grammar_warm, the entry copies and cm_chart_load answer
 * CM_ERR_ARG.  With no segments it is cm_grammar_new's grammar. */
int cm_grammar_new_segments(const cm_seg_tables *in, const cm_vocab *v, const uint32_t *stop_ids, size_t n_stop,
                            const cm_limits *limits, cm_grammar **out);
/* A matcher's last chart set: per item its automaton state, origin and count (CM_SEG_NONE
 * outside segments, and on a grammar without segments), up to cap; the number of items. */
size_t cm_matcher_seg_items(const cm_matcher *m, uint32_t *state, uint32_t *origin, uint32_t *k, size_t cap);

/* The cut of a counted segment (docs/design.md §7, "The cut of counted segments", session 34;
 * csrc/segcut.c).  For segment `seg` of a cm_segtab and a vocabulary: for every state s of the
 * segment (its head and interior states) and every token t, the walk of t's bytes from s, made
 * by one trie walk per s (on first use of s) and kept by the vocabulary, keyed by the unit's
 * byte form (a second grammar with the same unit shares them):
 *   CM_SEGCUT_DEAD  the bytes die inside the unit (also a token outside the trie);
 *   CM_SEGCUT_STAY  t ends on the head, `count` units completed (BACK edges read);
 *   CM_SEGCUT_MID   t ends inside a unit: `count` = units completed + 1 (the partial one);
 *   CM_SEGCUT_EXIT  t leaves by an EXIT edge of the head after `count` units: its byte is at
 *                   `offset` of t's bytes, and lands on `target` (a state of the tables).
 * The cut for an item at s with count k, need = max(lo - k, 0) and budget = hi - k: the tokens
 * that stay (STAY, MID) with count > budget, and the leavers (EXIT) with count outside
 * [need, budget]; never a DEAD token.  Budgets below CM_SEGCUT_SMALL read a precomputed bit set
 * per budget, larger ones the list of the tokens counting at least CM_SEGCUT_SMALL; the leavers
 * short of the need come from the leavers' list by count.  A state outside the segment, a token
 * out of range or a row of the wrong size is CM_ERR_ARG. */
enum cm_segcut_kind { CM_SEGCUT_DEAD = 0, CM_SEGCUT_STAY = 1, CM_SEGCUT_MID = 2, CM_SEGCUT_EXIT = 3 };
#define CM_SEGCUT_SMALL 16
typedef struct cm_segcut cm_segcut;
int cm_segcut_new(const cm_segtab *st, uint32_t seg, const cm_vocab *v, cm_segcut **out);
void cm_segcut_free(cm_segcut *c);
/* The segment's states, the head first (up to cap written); their number. */
uint32_t cm_segcut_states(const cm_segcut *c, uint32_t *states, uint32_t cap);
/* Make every state's tables now (otherwise each on first use). */
int cm_segcut_build_all(cm_segcut *c);
int cm_segcut_answer(cm_segcut *c, uint32_t state, uint32_t token, uint32_t *kind, uint32_t *count,
                     uint32_t *offset, uint32_t *target);
/* Every token's kind and count from `state` ([vocabulary size] each). */
int cm_segcut_answers(cm_segcut *c, uint32_t state, uint8_t *kind, uint32_t *count);
/* row &= ~cut(state, need, budget); n_words = ceil(vocabulary size / 32). */
int cm_segcut_apply(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *row,
                    size_t n_words);
/* The cut's tokens (each once, up to cap written) into *n_out: how many there are. */
int cm_segcut_kill(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *out, size_t cap,
                   size_t *n_out);
/* The leavers the cut keeps (counting need to budget), by count, with their EXIT bytes' offsets
 * (each token's walk goes on from there: cm_segcut_answer's target), up to cap written, into
 * *n_out: how many there are. */
int cm_segcut_leavers(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *tok, uint32_t *off,
                      size_t cap, size_t *n_out);
/* The bytes of the tables made so far for c's unit. */
size_t cm_segcut_bytes(const cm_segcut *c);
/* In this process: the cuts that found their unit's tables in the vocabulary's store, and the
 * states' tables made (one trie walk each).  For the tests. */
size_t cm_segcut_store_hits(void);
size_t cm_segcut_state_builds(void);

#ifdef __cplusplus
}
#endif
#endif
