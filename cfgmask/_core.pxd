# Mirrors csrc/cfgmask.h, declaration for declaration.
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "cfgmask.h" nogil:
    enum cm_status:
        CM_OK
        CM_ERR_NOMEM
        CM_ERR_ARG
        CM_ERR_LIMIT
        CM_ERR_STATE
        CM_ERR_TIMEOUT
        CM_ERR_LIMIT_SET
        CM_ERR_LIMIT_MEM

    ctypedef struct cm_vocab:
        pass
    ctypedef struct cm_grammar:
        pass
    ctypedef struct cm_matcher:
        pass

    int cm_vocab_new(const uint8_t *data, const uint64_t *offsets, const uint8_t *in_trie,
                     size_t n_tokens, cm_vocab **out)
    void cm_vocab_free(cm_vocab *v)
    size_t cm_vocab_size(const cm_vocab *v)
    size_t cm_vocab_trie_size(const cm_vocab *v)
    void cm_vocab_clear_walks(cm_vocab *v)
    void cm_vocab_pin_walks(cm_vocab *v)

    ctypedef struct cm_tables:
        uint32_t n_states, n_rules, n_classes, start_rule
        const uint8_t *byte_class
        const int32_t *trans
        const uint32_t *state_rule
        const uint8_t *accepting
        const uint32_t *ref_off
        const uint32_t *ref_rule
        const uint32_t *ref_target
        const uint32_t *rule_start
        const uint8_t *rule_nullable
        const uint32_t *rule_follow
        uint32_t n_token_sets
        const uint32_t *tok_off
        const uint32_t *tok_set
        const uint32_t *tok_target
        const uint32_t *set_off
        const uint32_t *set_ids
        const uint8_t *set_negated
        uint32_t n_la
        const uint8_t *rule_la
        const uint8_t *la_next
        const uint8_t *la_union

    ctypedef struct cm_limits:
        size_t max_items_per_set
        size_t max_chart_items
        size_t max_cache_bytes
        size_t direct_walk_states
        size_t index_min_items
        size_t mask_memo_min_items
        size_t mask_memo_min_candidates
        size_t share_loop_walks
        size_t filter_uncertain
        size_t compose_entries
        size_t flat_walks
        size_t flat_calls
        size_t plain_skip
        size_t name_skip
        size_t wrap_repeats
        size_t count_chains
        size_t tail_parts
        size_t share_edges
        size_t closing_verdicts
        size_t run_walks
        size_t name_stops
        size_t filter_runs
        size_t run_stops
        size_t run_ahead
        size_t run_ahead_steps
        size_t filter_pairs
        size_t stack_verdicts
        size_t flat_plain_steps
        size_t listed_reads
        size_t lazy_follow

    void cm_limits_default(cm_limits *out)
    int cm_grammar_new(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids,
                       size_t n_stop, const cm_limits *limits, cm_grammar **out)
    int cm_grammar_new_borrowed(const cm_tables *t, const cm_vocab *v, const uint32_t *stop_ids,
                                size_t n_stop, const cm_limits *limits, cm_grammar **out)
    int cm_grammar_new_facts(const cm_tables *t, const uint8_t *facts, const cm_vocab *v,
                             const uint32_t *stop_ids, size_t n_stop, const cm_limits *limits, cm_grammar **out)
    void cm_grammar_free(cm_grammar *g)
    int cm_grammar_warm(const cm_grammar *g, double deadline)
    size_t cm_grammar_cache_bytes(const cm_grammar *g)
    int cm_grammar_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc)
    int cm_grammar_state_bytes(const cm_grammar *g, uint32_t state, uint32_t *out)
    int cm_grammar_rule_block(const cm_grammar *g, uint32_t rule)
    int cm_grammar_state_flags(const cm_grammar *g, uint32_t state, uint64_t *calls)
    int cm_grammar_rule_returns(const cm_grammar *g, uint32_t rule, const uint32_t **states)
    size_t cm_grammar_cache_entries(const cm_grammar *g)
    void cm_grammar_build_stats(const cm_grammar *g, size_t *composed, size_t *donated, size_t *flat_configs,
                                size_t *vocab_loops)
    void cm_grammar_chain_stats(const cm_grammar *g, size_t *walks, size_t *entries, size_t *from_vocab)
    void cm_grammar_tail_stats(const cm_grammar *g, size_t *walks, size_t *uses)
    void cm_grammar_run_stats(const cm_grammar *g, size_t *walked, size_t *from_vocab)

    int cm_matcher_new(const cm_grammar *g, cm_matcher **out)
    void cm_matcher_free(cm_matcher *m)
    int cm_matcher_fork(const cm_matcher *m, cm_matcher **out)
    void cm_matcher_reset(cm_matcher *m)
    int cm_matcher_accept_token(cm_matcher *m, uint32_t token)
    int cm_matcher_accept_bytes(cm_matcher *m, const uint8_t *data, size_t n)
    int cm_matcher_can_accept_bytes(cm_matcher *m, const uint8_t *data, size_t n)
    int cm_matcher_fill_mask(cm_matcher *m, uint32_t *words, size_t n_words)
    int cm_matcher_is_accepting(const cm_matcher *m)
    int cm_matcher_is_terminated(const cm_matcher *m)
    int cm_matcher_error(const cm_matcher *m)
    size_t cm_matcher_num_tokens(const cm_matcher *m)
    int cm_matcher_rollback(cm_matcher *m, size_t k)
    long cm_matcher_jump_forward(cm_matcher *m, uint8_t *buf, size_t cap)
    size_t cm_matcher_chart_items(const cm_matcher *m)

    ctypedef struct cm_mask_stats:
        size_t n_states, n_candidates, n_checked, n_items, memo_hit
        size_t n_steps, n_verdicts
        size_t copied
    void cm_matcher_mask_stats(const cm_matcher *m, cm_mask_stats *out)
    void cm_mask_split_late_enable(int mode)
    size_t cm_mask_split_late_hits()
    void cm_mask_split_resume_enable(int on)
    size_t cm_mask_split_resumed()

    ctypedef struct cm_budget:
        size_t max_bytes
        size_t used, peak
        double deadline

    ctypedef struct cm_nfa_view:
        uint32_t n_states
        const uint32_t *byte_off
        const uint8_t *byte_lo
        const uint8_t *byte_hi
        const uint32_t *byte_to
        const uint32_t *label_off
        const uint32_t *label
        const uint32_t *label_to
        const uint32_t *eps_off
        const uint32_t *eps_to

    ctypedef struct cm_dfa_out:
        uint32_t n_states, n_classes
        uint16_t class_lo[257]
        int32_t *trans
        uint8_t *accepting
        uint32_t *lab_off
        uint32_t *lab
        uint32_t *lab_to
        uint8_t live
        void *runs

    int cm_fsm_build(const cm_nfa_view *nfa, uint32_t start, uint32_t final, size_t max_states,
                     cm_budget *budget, cm_dfa_out **out)
    void cm_dfa_out_free(cm_dfa_out *d)
    int cm_dfa_product(const uint32_t *rows, size_t n_rows, const uint32_t *sizes, uint32_t k, uint32_t n_atoms,
                       uint32_t max_states, uint32_t *n_out, uint32_t **trans_out, uint32_t **states_out)
    int cm_dfa_trim_labels(const int32_t *trans, uint32_t n, uint32_t m, const uint8_t *accept,
                           uint32_t *lab_off, uint32_t *lab, uint32_t *lab_to, uint32_t *eps_off,
                           uint32_t *eps_to)

    enum:
        CM_IR_LIT
        CM_IR_BYTES
        CM_IR_UTF8
        CM_IR_SEQ
        CM_IR_ALT
        CM_IR_REPEAT
        CM_IR_REF
        CM_IR_BADTOKEN
        CM_IR_WORDS
        CM_WORDS_JSON
        CM_IR_REF_CALL
        CM_IR_REF_ENTRY
        CM_IR_REF_EMBED
        CM_IR_REF_EXPAND

    ctypedef struct cm_ir_ref:
        uint32_t name, kind, arg

    ctypedef struct cm_ir_frag:
        const cm_dfa_out *dfa
        const uint32_t *labels

    ctypedef struct cm_ir_input:
        const uint32_t *code
        size_t code_len
        const uint32_t *label
        uint32_t n_names
        const cm_ir_ref *refs
        uint32_t n_refs
        const cm_ir_frag *frags
        uint32_t n_frags

    int cm_fsm_build_ir(const cm_ir_input *inp, const uint32_t *roots, uint32_t n_roots, int shared,
                        size_t max_states, cm_budget *budget, cm_dfa_out **out)
    int cm_dfa_compact_labels(cm_dfa_out *d, uint32_t *used, uint32_t *n_used)
    int cm_dfa_can_accept(const cm_dfa_out *d, const uint8_t *label_ok, int *result)
    int cm_dfa_trim(const cm_dfa_out *d, const uint8_t *label_ok, cm_dfa_out **out)

    ctypedef struct cm_comp_member:
        uint32_t name, root, inline_cap

    ctypedef struct cm_component:
        const cm_comp_member *members
        uint32_t n_members
        const uint32_t *callees
        uint32_t n_callees
        int right_linear
        const cm_ir_frag *cached
        int expand

    ctypedef struct cm_comp_dfa:
        cm_dfa_out *dfa
        uint32_t *labels
        uint32_t n_labels

    int cm_compile_components(const cm_ir_input *inp, const cm_component *comps, uint32_t n_comps,
                              size_t max_states, size_t inline_max_states, cm_budget *budget,
                              cm_comp_dfa *out, uint32_t *failed)
    void cm_comp_dfa_free(cm_comp_dfa *d)

    ctypedef struct cm_flat_rules:
        uint32_t n_rules
        uint32_t n_states
        uint32_t *rule_name
        uint32_t *rule_state
        uint32_t *rule_trans
        uint8_t *byte_class
        int32_t *trans
        uint8_t *accepting
        uint32_t *lab_off
        uint32_t *lab_name
        uint32_t *lab_to

    int cm_compile_finish(const cm_ir_input *inp, const cm_ir_frag *rules, const uint8_t *is_token,
                          uint32_t start, cm_budget *budget, cm_flat_rules **out)
    void cm_flat_rules_free(cm_flat_rules *f)

    ctypedef struct cm_flat_derived:
        uint32_t n_classes
        uint8_t byte_class[256]
        uint8_t *nullable
        uint32_t *follow
        uint32_t *ref_off
        uint32_t *tok_off
        uint32_t *ref_rule
        uint32_t *ref_target
        uint32_t *tok_set
        uint32_t *tok_target
        uint32_t n_sets
        uint32_t *set_name
        uint32_t *run_off
        uint16_t *run_end
        uint64_t *run_bits
        uint64_t *edges
        uint32_t *state_bytes
        uint8_t *rule_block
        uint8_t *facts

    size_t cm_facts_size(uint32_t n_states, uint32_t n_rules)
    int cm_flat_derive(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names,
                       const int64_t *weights, size_t n_weights, cm_flat_derived **out)
    int cm_flat_derive_facts(const cm_flat_rules *f, const uint8_t *is_token, uint32_t n_names,
                             const int64_t *weights, size_t n_weights, uint8_t *facts, cm_flat_derived **out)
    void cm_flat_derived_free(cm_flat_derived *d)
    int cm_flat_derive_trans(const cm_flat_rules *f, const cm_flat_derived *d, int32_t *out)

    enum:
        CM_PH_THOMPSON
        CM_PH_SUBSETS
        CM_PH_MINIMIZE
        CM_PH_WORDS
        CM_PH_PRODUCTIVE
        CM_PH_TRIM
        CM_PH_FLATTEN
        CM_PH_DERIVE
        CM_PH_GRAMMAR
        CM_PH_DIRECT
        CM_PHASES

    ctypedef struct cm_compile_stats:
        uint64_t ns[10]
        uint64_t n_builds
        uint64_t nfa_states, dfa_states, min_states
        uint64_t hopcroft_states

    ctypedef struct cm_build_rec:
        uint32_t name, nfa_states, dfa_states, min_states
        uint64_t ns_subsets, ns_minimize

    void cm_compile_stats_enable(int on)
    void cm_direct_build_enable(int on)
    void cm_fsm_lean_enable(int on)
    size_t cm_fsm_lean_builds()
    void cm_direct_loops_enable(int on)
    void cm_direct_fresh_copy_enable(int on)
    size_t cm_direct_fresh_copies()
    void cm_dfa_runs_enable(int on)
    void cm_derive_row_bits_enable(int on)
    void cm_derive_class_spans_enable(int on)
    void cm_derive_trans_gather_enable(int on)
    size_t cm_derive_trans_gather_rows()
    void cm_dfa_walk_starts_enable(int on)
    size_t cm_dfa_walk_starts_rows()
    size_t cm_dfa_runs_reused()
    int cm_dfa_keep_runs(const cm_dfa_out *d)
    size_t cm_compile_stats_take(cm_compile_stats *out, cm_build_rec *recs, size_t max_recs)

    ctypedef struct cm_logits_view:
        uint8_t *base
        size_t n_rows
        size_t width
        ptrdiff_t row_stride
        ptrdiff_t col_stride
        size_t elem_size
        uint64_t neg

    ctypedef struct cm_mask_view:
        const uint8_t *base
        size_t n_rows
        size_t n_words
        ptrdiff_t row_stride
        ptrdiff_t col_stride

    int cm_apply_mask(const cm_logits_view *l, const cm_mask_view *m, const int64_t *rows, size_t n_rows,
                      int max_simd)

    enum cm_simd:
        CM_SIMD_BASE
        CM_SIMD_AVX2
        CM_SIMD_AVX512
    int cm_apply_mask_simd()


cdef extern from "stackmemo.h" nogil:
    size_t cm_stack_verdict_hits()
    size_t cm_stack_verdict_gate_closes()
    void cm_stack_verdict_gate_force(int mode)


cdef extern from "walk.h" nogil:
    size_t cm_walk_name_stop_hits()
    size_t cm_walk_filter_run_hits()
    size_t cm_walk_run_aheads_by_steps()
    void cm_walk_drop_dead_enable(int on)
    size_t cm_walk_dead_dropped()
    size_t cm_walk_filter_pair_hits()
    void cm_walk_filter_triples_enable(int on)
    size_t cm_walk_filter_triple_hits()
    void cm_walk_filter_pairs_early_enable(int on)
    size_t cm_walk_filter_pairs_early()
    void cm_walk_filter_skip_enable(int on)
    size_t cm_walk_filter_skipped()
    void cm_walk_filter_stop_skip_enable(int on)
    size_t cm_walk_filter_stop_skipped()
    void cm_walk_verdict_share_enable(int on)
    size_t cm_walk_verdict_shared()
    void cm_walk_kern_share_enable(int on)
    void cm_walk_kern_counts(size_t *shared, size_t *dead)
    void cm_walk_listed_reuse_enable(int on)
    size_t cm_walk_listed_reused()
    void cm_walk_item_keep_enable(int on)
    size_t cm_walk_item_kept()
    void cm_walk_filter_class_prefix_enable(int on)
    size_t cm_walk_filter_class_shared()
    size_t cm_walk_follow_lazy_held()
    size_t cm_walk_follow_lazy_inserts()
    size_t cm_walk_follow_hits()
    size_t cm_walk_listed_unread()
    void cm_walk_listed_last_viable_enable(int on)
    size_t cm_walk_listed_last_checked()
    void cm_scan_notes_enable(int on)
    size_t cm_scan_notes_used()
    void cm_walk_loop_stop_enable(int on)
    size_t cm_walk_loop_stops()
    size_t cm_walk_loop_reduced()


cdef extern from "cache.h" nogil:
    size_t cm_entry_spare_takes()
    int cm_grammar_fill_entry_copy(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *unc, size_t *n_unc)
    unsigned cm_promote_uses(unsigned n)


cdef extern from "chains.h" nogil:
    void cm_chain_memo_enable(int on)
    void cm_chain_shapes_enable(int on)
    size_t cm_chain_shaped_rows()
    void cm_chain_row_gather_enable(int on)
    size_t cm_chain_gathered_rows()
    void cm_chain_row_permute_enable(int on)
    void cm_chain_row_permute16_enable(int on)
    size_t cm_chain_permuted_rows()
    void cm_chain_rows_fused_enable(int on)
    void cm_chain_memo_out_early_enable(int on)
    size_t cm_chain_memo_named()
    void cm_chain_kept_batch_enable(int on)
    size_t cm_chain_kept_batched()
    void cm_chain_next_one_enable(int on)
    size_t cm_chain_next_one_taken()
    void cm_chain_exit_memo_enable(int on)
    size_t cm_chain_exit_memo_hits()
    void cm_chain_past_memo_enable(int on)
    size_t cm_chain_past_hits()
    void cm_chain_bytes_memo_enable(int on)
    size_t cm_chain_bytes_memo_hits()
    void cm_chain_key_hash_memo_enable(int on)
    size_t cm_chain_key_hash_hits()
    size_t cm_chain_key_hash_misses()
    void cm_chain_wrap_direct_enable(int on)
    size_t cm_chain_wrap_direct_hits()
    void cm_chain_wrap_deep_enable(int on)
    size_t cm_chain_wrap_deep_hits()
    void cm_chain_split_dead_enable(int on)
    size_t cm_chain_split_dead_dropped()
    void cm_chain_wrap_ranges_mode(int mode)
    size_t cm_chain_wrap_ranges_hits()
    size_t cm_chain_memo_hits()
    size_t cm_chain_prefix_hits()
    size_t cm_chain_bulk_takes()
    void cm_chain_bulk_by_len_enable(int on)
    size_t cm_chain_bulk_listed()
    void cm_chain_class_ids_enable(int on)
    size_t cm_chain_class_ids_taken()


cdef extern from "flat.h" nogil:
    size_t cm_flat_plain_steps()
    size_t cm_flat_plain_proofs()
    void cm_flat_plain_sets_enable(int on)
    size_t cm_flat_plain_sets_steps()
    void cm_flat_run_reads_enable(int on)
    size_t cm_flat_run_reads_dead()
    void cm_flat_sets_cap(unsigned n)
    size_t cm_flat_sets_capped()
    void cm_flat_names_memo_enable(int on)
    size_t cm_flat_names_memo_hits()
    void cm_flat_class_bulk_enable(int mode)
    size_t cm_flat_class_bulk_walks()
    size_t cm_flat_class_tables()
    void cm_flat_lcp_jump_enable(int mode)
    void cm_flat_text_unused_enable(int on)
    size_t cm_flat_text_unused_proofs()


cdef extern from "promote.h" nogil:
    void cm_promote_enable(int on)
    size_t cm_promoted()
    unsigned long long cm_promote_piece(unsigned long long work)


cdef extern from "compose.h" nogil:
    void cm_tail_alias_enable(int on)
    size_t cm_tail_aliases()
    void cm_name_edges_direct_enable(int on)
    size_t cm_name_edges_direct()
    void cm_tail_names_enable(int on)
    size_t cm_tail_names_taken()
    void cm_exit_tails_enable(int on)
    size_t cm_exit_tails()
    void cm_tail_index_enable(int on)
    void cm_tail_sparse_enable(int on)
    size_t cm_tail_sparse_parts()
    void cm_compose_self_enable(int on)
    size_t cm_compose_self_built()
    void cm_compose_count_later_enable(int on)
    size_t cm_compose_counted_later()
    void cm_compose_unread_enable(int on)
    size_t cm_compose_unread_skipped()
    void cm_compose_cands_memo_enable(int on)
    size_t cm_compose_cands_memo_hits()
    void cm_compose_unread_exits_enable(int on)
    size_t cm_compose_unread_exit_lists()
    void cm_compose_pass_enable(int on)
    size_t cm_compose_pass_taken()

cdef extern from "bits.h" nogil:
    void cm_radix_sort_enable(int on)
    size_t cm_radix_sorts()
    size_t cm_sort_unique_u32(uint32_t *v, size_t n)


cdef extern from "donor.h" nogil:
    void cm_donor_alike_enable(int on)
    size_t cm_donor_alike_hits()
    void cm_donor_mode_bytes_enable(int on)
    size_t cm_donor_mode_bytes_hits()


cdef extern from "repeat.h" nogil:
    void cm_repeat_enable(int on)
    void cm_repeat_counts(size_t *tries, size_t *hits)
    void cm_repeat_checks_enable(int on)
    void cm_repeat_pair_hash_enable(int on)


cdef extern from "vocab.h" nogil:
    void cm_vocab_name_sets_div(unsigned div)
    unsigned cm_vocab_name_sets(const cm_vocab *v)


cdef extern from "tokclass.h" nogil:
    void cm_tokclass_enable(int mode)
    size_t cm_tokclass_walks()


cdef extern from "wrap.h" nogil:
    int cm_grammar_entry_wrap(const cm_grammar *g, uint32_t state, uint32_t *words, uint32_t *rest, size_t *n_rest)

cdef extern from "loops.h" nogil:
    size_t cm_plain_loop_walks()
    size_t cm_text_loop_walks()
    size_t cm_loop_walks_past_dead()
    void cm_loop_exit_ends_enable(int on)
    size_t cm_loop_exit_ends_taken()
    void cm_loop_form_runs_enable(int on)
    size_t cm_loop_form_runs_taken()
    void cm_loop_no_back_enable(int on)
    size_t cm_loop_no_back_taken()
    size_t cm_run_name_scans()
    void cm_name_runs_enable(int on)
    size_t cm_name_run_hits()
    size_t cm_run_gaps_skipped()
    void cm_run_parts_enable(int on)
    size_t cm_run_parts_hits()
    void cm_name_sets_enable(int on)
    size_t cm_name_unions_taken()
    size_t cm_name_sets_skipped()

cdef extern from "chart.h" nogil:
    size_t cm_chart_scans_hashed()
    size_t cm_chart_seg_memo_hits()
    void cm_chart_memo_big_enable(int on)
    size_t cm_chart_memo_big_hits()
    void cm_chart_memo_reads_enable(int on)
    size_t cm_chart_memo_reads_hits()
    void cm_chart_scan_memo_enable(int on)
    size_t cm_chart_scan_memo_hits()

cdef extern from "cache.h" nogil:
    size_t cm_seg_entry_builds()
    size_t cm_seg_entry_hits()
    void cm_seg_far_enable(int on)
    size_t cm_seg_far_builds()
    void cm_seg_near_enable(int on)
    size_t cm_seg_near_builds()
    void cm_seg_ladder_enable(int on)
    void cm_seg_ladder_builds(size_t *donated, size_t *looped)
    void cm_seg_chain_enable(int on)
    size_t cm_seg_chain_builds()
    int cm_grammar_seg_entry_copy(const cm_grammar *g, uint32_t state, uint32_t k, uint32_t *words, uint32_t *unc,
                                  size_t *n_unc)


cdef extern from "cfgmask.h" nogil:
    # counted repetitions as segments (csrc/segments.c)
    enum cm_seg_flags:
        CM_SEG_INTO
        CM_SEG_BACK
        CM_SEG_EXIT
    ctypedef struct cm_seg_tables:
        cm_tables t
        uint32_t n_segments
        const uint32_t *state_seg
        const uint8_t *edge_flags
        const uint32_t *seg_lo
        const uint32_t *seg_hi
        const uint32_t *seg_rule
        const uint32_t *seg_head
    ctypedef struct cm_segtab:
        pass
    ctypedef struct cm_segchart:
        pass
    int cm_segtab_new(const cm_seg_tables *inp, cm_segtab **out)
    void cm_segtab_free(cm_segtab *st)
    int cm_segchart_new(const cm_segtab *st, size_t max_items, cm_segchart **out)
    int cm_segchart_fork(const cm_segchart *c, cm_segchart **out)
    void cm_segchart_free(cm_segchart *c)
    int cm_segchart_step(cm_segchart *c, uint8_t b)
    int cm_segchart_accepting(const cm_segchart *c)
    int cm_segchart_viable(const cm_segchart *c, uint32_t *out)
    size_t cm_segchart_len(const cm_segchart *c)
    int cm_segchart_rollback(cm_segchart *c, size_t n)
    size_t cm_segchart_items(const cm_segchart *c, uint32_t *state, uint32_t *origin, uint32_t *k, size_t cap)
    size_t cm_counted_scans()
    int cm_grammar_new_segments(const cm_seg_tables *inp, const cm_vocab *v, const uint32_t *stop_ids,
                                size_t n_stop, const cm_limits *limits, cm_grammar **out)
    size_t cm_matcher_seg_items(const cm_matcher *m, uint32_t *state, uint32_t *origin, uint32_t *k, size_t cap)
    # the cut of counted segments (csrc/segcut.c)
    enum cm_segcut_kind:
        CM_SEGCUT_DEAD
        CM_SEGCUT_STAY
        CM_SEGCUT_MID
        CM_SEGCUT_EXIT
    enum:
        CM_SEGCUT_SMALL
    ctypedef struct cm_segcut:
        pass
    int cm_segcut_new(const cm_segtab *st, uint32_t seg, const cm_vocab *v, cm_segcut **out)
    void cm_segcut_free(cm_segcut *c)
    uint32_t cm_segcut_states(const cm_segcut *c, uint32_t *states, uint32_t cap)
    int cm_segcut_build_all(cm_segcut *c)
    int cm_segcut_answer(cm_segcut *c, uint32_t state, uint32_t token, uint32_t *kind, uint32_t *count,
                         uint32_t *offset, uint32_t *target)
    int cm_segcut_answers(cm_segcut *c, uint32_t state, uint8_t *kind, uint32_t *count)
    int cm_segcut_apply(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *row,
                        size_t n_words)
    int cm_segcut_kill(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *out, size_t cap,
                       size_t *n_out)
    int cm_segcut_leavers(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, uint32_t *tok, uint32_t *off,
                          size_t cap, size_t *n_out)
    size_t cm_segcut_bytes(const cm_segcut *c)
    size_t cm_segcut_store_hits()
    size_t cm_segcut_state_builds()

cdef extern from "entry.h" nogil:
    void cm_entry_hash_sampled_enable(int on)
