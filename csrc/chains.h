/* Entries of counted chains (chains.c): the unrolled positions of x{m,n}. */
#ifndef CFGMASK_CHAINS_H
#define CFGMASK_CHAINS_H

#include "loops.h"

/* The entry walk of a solo state that is a position of a counted chain, from
 * the chain's one shared walk: 1 done, 0 the state is in no chain (w
 * untouched), < 0 error.  Under the cache lock. */
int cm_chain_entry(const cm_grammar *g, uint32_t state, cm_walk *w);
/* The byte edges' part of a composed entry (compose.c) of a state that calls
 * rules and reads on into a chain, from the chain's shared walk, as if the
 * state were the chain's first position without its calls: 1 done, 0 no chain
 * (w untouched), < 0 error.  Under the cache lock, on a fresh walk. */
int cm_chain_bytes(const cm_grammar *g, uint32_t state, cm_walk *w);
/* Is `state` a position of a chain that is a plain block (its wraps from the chain)? */
bool cm_chain_wraps(const cm_grammar *g, uint32_t state);
/* cm_wrap_split from the chain of `state` where it is a plain block: 1 done,
 * 0 not such a chain (e untouched), < 0 error.  Under the cache lock. */
int cm_chain_wrap(const cm_grammar *g, uint32_t state, cm_entry *e);

/* Chains' analyses kept by their rows and taken from the vocabulary's memos
 * (on, the default) or every chain analysed (off: the reference the tests
 * compare against).  Process-wide. */
void cm_chain_memo_enable(int on);
/* A memo's rows checked against a chain's by each row's shape, one pair a target and
 * the others compared in our row (on, the default), or pair by pair (off: the reference
 * the tests compare against).  Process-wide. */
void cm_chain_shapes_enable(int on);
/* How many rows were checked by their shape so far (process-wide). */
size_t cm_chain_shaped_rows(void);
/* A shaped row's other classes compared with AVX2 gathers, 8 at a time, where the CPU
 * has them (on, the default), or one by one (off: the reference the tests compare
 * against).  Process-wide. */
void cm_chain_row_gather_enable(int on);
/* How many rows had their other classes gathered so far (process-wide). */
size_t cm_chain_gathered_rows(void);
/* A shaped row of at most 8 slots compared class by class with AVX2 permutes (each class's
 * slot picks the slot's target; our row read as it lies), where the CPU has them and each
 * class of ours is in one class pair (on, the default), or its other classes one by one
 * (off: the reference the tests compare against).  Process-wide. */
void cm_chain_row_permute_enable(int on);
void cm_chain_row_permute16_enable(int on);
/* How many rows were compared with permutes so far (process-wide). */
size_t cm_chain_permuted_rows(void);
/* A whole chain's check of a memo (memo_match) reading its permuted rows in one loop (on, the
 * default), or through row_check a row at a time (off: the reference the tests compare
 * against).  Process-wide. */
void cm_chain_rows_fused_enable(int on);
/* A whole chain's check of a memo refusing it at the first out state whose flags differ (on,
 * the default), or only after every row (off: the reference the tests compare against).
 * Process-wide. */
void cm_chain_memo_out_early_enable(int on);
/* The locals (and out states) whole-chain memo checks named so far, summed (process-wide). */
size_t cm_chain_memo_named(void);
/* A chain position's acc points not filtered yet filtered in one call (on, the
 * default), or each in a call of its own (off: the reference the tests compare
 * against).  Process-wide. */
void cm_chain_kept_batch_enable(int on);
/* How many acc points were filtered in a batch so far (process-wide). */
size_t cm_chain_kept_batched(void);
/* A state with one candidate for its chain's next position takes it without counting the
 * bytes that lead to it (on, the default), or counts them always (off: the reference the
 * tests compare against).  Process-wide. */
void cm_chain_next_one_enable(int on);
/* How many candidates were taken so (process-wide). */
size_t cm_chain_next_one_taken(void);
/* A chain position's exits replayed from their walks kept by (rule, exit, target), with the
 * tokens the filter kept of them (on, the default), or each walked and filtered at every
 * position (off: the reference the tests compare against).  Process-wide. */
void cm_chain_exit_memo_enable(int on);
/* How many exits were replayed from those walks so far (process-wide). */
size_t cm_chain_exit_memo_hits(void);
/* The entry walk of a chain position past every need copied from an earlier one's of the same
 * walk, rule and accepting labels (on, the default), or assembled at each (off: the reference
 * the tests compare against).  Process-wide. */
void cm_chain_past_memo_enable(int on);
/* A block boundary's byte walk (cm_chain_bytes) assembled from a kept string start's chain
 * instance where the boundary reads its bytes into the start's states (on, the default), or its
 * chain analysed again (off: the reference the tests compare against).  Process-wide. */
void cm_chain_bytes_memo_enable(int on);
/* How many walks were assembled so far from a kept start's instance (process-wide). */
size_t cm_chain_bytes_memo_hits(void);
/* A chain's shared walk looked up by its memo's kept key hash where a memo served the form (on,
 * the default), or by the key hashed at each lookup (off: the reference the tests compare
 * against).  Process-wide. */
void cm_chain_key_hash_memo_enable(int on);
/* How many lookups took a memo's kept hash so far (process-wide). */
size_t cm_chain_key_hash_hits(void);
/* Off: how many lookups so far found a form's kept hash unequal to its key's (process-wide; the
 * tests require none). */
size_t cm_chain_key_hash_misses(void);
/* How many positions took a copied walk so far (process-wide). */
size_t cm_chain_past_hits(void);
/* A wrapping block position's wrap split made with its entry, from its chain's
 * bitsets (on, the default), or by cm_chain_wrap a token at a time (off: the
 * reference the tests compare against).  Process-wide. */
void cm_chain_wrap_direct_enable(int on);
/* How many entries were split so far (process-wide). */
size_t cm_chain_wrap_direct_hits(void);
/* A wrapping block position's rests that stay inside as many blocks after the next as the
 * rule's upward chart reads in a row kept without a question to the filter (on, the
 * default), or asked (off: the reference the tests compare against).  Process-wide. */
void cm_chain_wrap_deep_enable(int on);
/* How many rests were kept so far (process-wide). */
size_t cm_chain_wrap_deep_hits(void);
/* A wrapping block position too wide for the filter: the rests that cm_walk_drop_dead proves
 * dead taken out of its split's rest (on, the default; its uncertain list unchanged), or kept
 * (off: the reference the tests compare against).  Process-wide. */
void cm_chain_split_dead_enable(int on);
/* How many rests were taken out so far (process-wide). */
size_t cm_chain_split_dead_dropped(void);
/* A ranged block position's wrap split from its walk's lists: 0 off (token at a time: the
 * reference the tests compare against), 1 where it pays (the default), 2 wherever it
 * applies, 3 as 2 and checked against the token-at-a-time split (a difference is
 * CM_ERR_STATE).  Process-wide. */
void cm_chain_wrap_ranges_mode(int mode);
/* How many positions were split from the lists so far (process-wide). */
size_t cm_chain_wrap_ranges_hits(void);
/* How many analyses were taken from memos so far (process-wide). */
size_t cm_chain_memo_hits(void);
/* How many chains' first positions were taken from prefix memos (a kept chain of another
 * bound whose first rows theirs are) so far (process-wide); off with the memos. */
size_t cm_chain_prefix_hits(void);
/* How many chain walks took the entries of label 0's loop bytes at once, from the
 * vocabulary's byte features, so far (process-wide; off with cm_tokclass_enable(0)). */
size_t cm_chain_bulk_takes(void);
/* Whether such a walk lists the entries it takes by need from the vocabulary's entries by
 * length (default on; 0: copies them in trie order for the sort, the tests' reference), and
 * how many walks did so far (process-wide). */
void cm_chain_bulk_by_len_enable(int on);
size_t cm_chain_bulk_listed(void);
/* The listing copied from the vocabulary's class table where it holds X's (on by default), and how
 * many listings did so in this process (for the tests). */
void cm_chain_class_ids_enable(int on);
size_t cm_chain_class_ids_taken(void);

#endif
