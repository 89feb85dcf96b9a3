# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Handles on the C core: buffer checks, GIL release, status -> exception.

No algorithm lives here; see csrc/ for those.
"""
from cpython.array cimport array
from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release, PyObject_CheckBuffer,
    PyObject_GetBuffer,
)
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from cfgmask.errors import LimitError, MatcherError, VocabularyError

# ---- status -> exception: one table ---------------------------------------------------
#
# What a status means depends on the side of the core that returned it: CM_ERR_LIMIT from a
# matcher is MatcherLimits.max_chart_items, from an automaton build CompileLimits.max_dfa_states.
# Each row: exception class, message ({...} filled from the call's settings), the limit named.

_RUN_TIME = {
    CM_ERR_NOMEM: (MemoryError, "out of memory", None),
    CM_ERR_LIMIT_SET: (LimitError, "an Earley set exceeds MatcherLimits.max_items_per_set",
                       "max_items_per_set"),
    CM_ERR_LIMIT: (LimitError, "the Earley chart exceeds MatcherLimits.max_chart_items", "max_chart_items"),
    CM_ERR_STATE: (MatcherError, "the matcher is in its error state (a limit was hit earlier); "
                   "roll back or reset it", None),
    CM_ERR_TIMEOUT: (LimitError, "the mask cache was not filled by the compile deadline; raise "
                     "CompileLimits.deadline_ms or compile without warm=True", "deadline_ms"),
    CM_ERR_ARG: (MatcherError, "invalid argument", None),
}

_COMPILE_TIME = {
    CM_ERR_NOMEM: (MemoryError, "out of memory", None),
    CM_ERR_LIMIT: (LimitError, "automaton exceeds max_dfa_states={max_states}", "max_dfa_states"),
    CM_ERR_LIMIT_MEM: (LimitError, "automata exceed max_compile_mb={max_compile_mb}", "max_compile_mb"),
    CM_ERR_TIMEOUT: (LimitError, "ran past its deadline (CompileLimits.deadline_ms)", "deadline_ms"),
    CM_ERR_ARG: (ValueError, "malformed input", None),
}


cdef object _error(int rc, str what, dict table, dict settings=None):
    """The exception for status rc of the call `what`, from `table`."""
    kind, message, limit = table.get(rc, (RuntimeError, f"unexpected status {rc}", None))
    settings = settings or {}
    text = f"{what}: {message.format(**settings)}"
    if limit is None:
        return kind(text)
    return LimitError(text, limit=limit, value=settings.get(limit))


cdef object _raise(int rc, str what):
    raise _error(rc, what, _RUN_TIME)


_SEG_MASKS = ("warm and entry copies are not made yet for a grammar with counted segments (its "
              "entries of segment states are keyed by counts: docs/design.md §7, counters)")


cdef object _raise_fill(int rc, GrammarHandle grammar, str what):
    """_raise, saying why where a mask was asked of a grammar with segments."""
    if rc == CM_ERR_ARG and grammar.segments:
        raise MatcherError(f"{what}: {_SEG_MASKS}")
    _raise(rc, what)


cdef int _check_build(int rc, str what, size_t max_states, size_t max_bytes) except -1:
    """Raise the exception of an automaton build's status (none for CM_OK)."""
    if rc:
        raise _error(rc, what, _COMPILE_TIME,
                     {"max_states": max_states, "max_dfa_states": max_states,
                      "max_compile_mb": max_bytes >> 20})
    return 0


cdef class VocabHandle:
    """The C token trie of one vocabulary."""
    cdef cm_vocab *ptr
    cdef readonly size_t size
    cdef object __weakref__  # so that cfgmask.clear_caches() can find every live trie

    def __cinit__(self, const uint8_t[::1] data, const uint64_t[::1] offsets, const uint8_t[::1] in_trie):
        cdef size_t n = in_trie.shape[0]
        cdef int rc
        if n == 0 or offsets.shape[0] != n + 1:
            raise VocabularyError("vocabulary arrays disagree in length")
        cdef const uint8_t *dp = &data[0] if data.shape[0] else NULL
        if offsets[n] != <uint64_t>data.shape[0]:
            raise VocabularyError("token offsets do not cover the token bytes")
        with nogil:
            rc = cm_vocab_new(dp, &offsets[0], &in_trie[0], n, &self.ptr)
        if rc:
            if rc == CM_ERR_NOMEM:
                raise MemoryError("vocabulary: out of memory")
            raise VocabularyError("vocabulary rejected by the C core (bad offsets or sizes)")
        self.size = n

    def __dealloc__(self):
        cm_vocab_free(self.ptr)

    @property
    def trie_size(self):
        return cm_vocab_trie_size(self.ptr)

    def name_sets(self):
        """How many first bytes hold their name tokens as a bit set (name_sets_div)."""
        return cm_vocab_name_sets(self.ptr)

    def clear_walks(self):
        """Drop the loop walks kept for the grammars compiled for this vocabulary (all but
        the pinned ones)."""
        with nogil:
            cm_vocab_clear_walks(self.ptr)

    def pin_walks(self):
        """Make every loop walk kept so far part of the vocabulary: clear_walks keeps it."""
        with nogil:
            cm_vocab_pin_walks(self.ptr)


cdef void _fill_limits(cm_limits *lim, object s) except *:
    """cm_limits from the attributes of s: sizes (0: the default) and switches."""
    cm_limits_default(lim)
    lim.max_items_per_set = s.max_items_per_set or lim.max_items_per_set
    lim.max_chart_items = s.max_chart_items or lim.max_chart_items
    lim.max_cache_bytes = s.max_cache_bytes or lim.max_cache_bytes
    lim.direct_walk_states = s.direct_walk_states or lim.direct_walk_states
    lim.index_min_items = s.index_min_items or lim.index_min_items
    lim.mask_memo_min_items = s.mask_memo_min_items or lim.mask_memo_min_items
    lim.mask_memo_min_candidates = s.mask_memo_min_candidates or lim.mask_memo_min_candidates
    lim.share_loop_walks = 1 if s.share_loop_walks else 0
    lim.filter_uncertain = 1 if s.filter_uncertain else 0
    lim.compose_entries = 1 if s.compose_entries else 0
    lim.flat_walks = 1 if s.flat_walks else 0
    lim.flat_calls = 1 if s.flat_calls else 0
    lim.plain_skip = 1 if s.plain_skip else 0
    lim.name_skip = 1 if s.name_skip else 0
    lim.wrap_repeats = s.wrap_repeats
    lim.count_chains = 1 if s.count_chains else 0
    lim.tail_parts = s.tail_parts
    lim.share_edges = s.share_edges
    lim.closing_verdicts = s.closing_verdicts
    lim.run_walks = s.run_walks
    lim.name_stops = s.name_stops
    lim.filter_runs = s.filter_runs
    lim.run_stops = s.run_stops
    lim.run_ahead = s.run_ahead
    lim.run_ahead_steps = s.run_ahead_steps
    lim.filter_pairs = s.filter_pairs
    lim.stack_verdicts = s.stack_verdicts
    lim.flat_plain_steps = 1 if s.flat_plain_steps else 0
    lim.listed_reads = 1 if s.listed_reads else 0
    lim.lazy_follow = 1 if s.lazy_follow else 0


cdef uint32_t _NO_SETS[1]
_NO_SETS[0] = 0


cdef void _tables_from_arrays(tables, cm_tables *out) except *:
    """``out`` pointing into the numpy arrays of a Tables (or any object with its fields: the
    tests' edited copies, unpickled tables, the disk cache's), checked for shape and dtype.  The
    pointers stay valid while ``tables`` holds the arrays (cm_grammar_new copies them)."""
    cdef const uint8_t[::1] byte_class = tables.byte_class
    cdef const int32_t[:, ::1] trans = tables.trans
    cdef const uint32_t[::1] state_rule = tables.state_rule
    cdef const uint8_t[::1] accepting = tables.accepting
    cdef const uint32_t[::1] ref_off = tables.ref_off
    cdef const uint32_t[::1] ref_rule = tables.ref_rule
    cdef const uint32_t[::1] ref_target = tables.ref_target
    cdef const uint32_t[::1] rule_start = tables.rule_start
    cdef const uint8_t[::1] rule_nullable = tables.rule_nullable
    cdef const uint32_t[::1] rule_follow = tables.rule_follow
    cdef const uint32_t[::1] tok_off = tables.tok_off
    cdef const uint32_t[::1] tok_set = tables.tok_set
    cdef const uint32_t[::1] tok_target = tables.tok_target
    cdef const uint32_t[::1] set_off = tables.set_off
    cdef const uint32_t[::1] set_ids = tables.set_ids
    cdef const uint8_t[::1] set_negated = tables.set_negated
    cdef const uint8_t[::1] rule_la = tables.rule_la
    cdef const uint8_t[::1] la_next = tables.la_next
    cdef const uint8_t[::1] la_union = tables.la_union
    cdef size_t n_la = la_next.shape[0] // 256
    cdef size_t n_states = state_rule.shape[0]
    if (byte_class.shape[0] != 256 or trans.shape[0] != n_states or accepting.shape[0] != n_states
            or ref_off.shape[0] != n_states + 1 or rule_follow.shape[0] != 8 * rule_start.shape[0]
            or rule_nullable.shape[0] != rule_start.shape[0]
            or ref_rule.shape[0] != ref_target.shape[0] or ref_rule.shape[0] != ref_off[n_states]):
        raise ValueError("inconsistent automaton tables")
    if (tok_off.shape[0] != n_states + 1 or tok_set.shape[0] != tok_target.shape[0]
            or tok_set.shape[0] != tok_off[n_states] or set_off.shape[0] != set_negated.shape[0] + 1
            or set_ids.shape[0] != set_off[set_negated.shape[0]]):
        raise ValueError("inconsistent token-terminal tables")
    if rule_la.shape[0] and (rule_la.shape[0] != rule_start.shape[0] or la_next.shape[0] != 256 * n_la
                             or la_union.shape[0] != n_la * n_la):
        raise ValueError("inconsistent lookahead tables")
    out.n_states = <uint32_t>n_states
    out.n_rules = <uint32_t>rule_start.shape[0]
    out.n_classes = <uint32_t>trans.shape[1]
    out.byte_class = &byte_class[0]
    out.trans = &trans[0, 0]
    out.state_rule = &state_rule[0]
    out.accepting = &accepting[0]
    out.ref_off = &ref_off[0]
    out.ref_rule = &ref_rule[0] if ref_rule.shape[0] else NULL
    out.ref_target = &ref_target[0] if ref_target.shape[0] else NULL
    out.rule_start = &rule_start[0]
    out.rule_nullable = &rule_nullable[0]
    out.rule_follow = &rule_follow[0]
    out.n_token_sets = <uint32_t>set_negated.shape[0]
    out.tok_off = &tok_off[0]
    out.tok_set = &tok_set[0] if tok_set.shape[0] else NULL
    out.tok_target = &tok_target[0] if tok_target.shape[0] else NULL
    out.set_off = &set_off[0]
    out.set_ids = &set_ids[0] if set_ids.shape[0] else NULL
    out.set_negated = &set_negated[0] if set_negated.shape[0] else NULL
    out.n_la = <uint32_t>n_la if rule_la.shape[0] else 0
    out.rule_la = &rule_la[0] if rule_la.shape[0] else NULL
    out.la_next = &la_next[0] if la_next.shape[0] else NULL
    out.la_union = &la_union[0] if la_union.shape[0] else NULL


cdef inline const char *_raw_buf(object b, size_t size) except NULL:
    """The bytes ``b`` of exactly ``size`` bytes, in place."""
    if type(b) is not bytes or <size_t>PyBytes_GET_SIZE(b) != size:
        raise ValueError("inconsistent automaton tables")
    return PyBytes_AS_STRING(b)


cdef void _tables_from_raw(tuple raw, cm_tables *out, const uint8_t **facts) except *:
    """``out`` pointing into the bytes of ``Tables._raw`` (see there: the door's buffers as
    compile_finish returned them), each checked for its length; sets and lookahead None when
    the grammar has none (no token sets; the core's own tables of no debt).  ``*facts``: the
    door's facts (csrc/tables.c ``cm_facts_size``: the state bytes and flags, the rule blocks, for
    cm_grammar_new_facts, which borrows them), NULL where ``_raw`` has None."""
    cdef size_t ns, nr, k, ne, nt, nk, n_la
    cdef const uint32_t *ref_off
    cdef const uint32_t *tok_off
    cdef const uint32_t *set_off
    (n_states, n_rules, n_classes, byte_class, trans, state_rule, accepting, ref_off_b, ref_rule, ref_target,
     rule_state, nullable, follow, tok_off_b, tok_set, tok_target, sets, la, given) = raw
    ns, nr, k = n_states, n_rules, n_classes
    facts[0] = NULL if given is None else <const uint8_t *>_raw_buf(given, cm_facts_size(<uint32_t>ns, <uint32_t>nr))
    if not 0 < k <= 256:
        raise ValueError("inconsistent automaton tables")
    ref_off = <const uint32_t *>_raw_buf(ref_off_b, 4 * (ns + 1))
    tok_off = <const uint32_t *>_raw_buf(tok_off_b, 4 * (ns + 1))
    ne, nt = ref_off[ns], tok_off[ns]
    out.n_states = <uint32_t>ns
    out.n_rules = <uint32_t>nr
    out.n_classes = <uint32_t>k
    out.byte_class = <const uint8_t *>_raw_buf(byte_class, 256)
    out.trans = <const int32_t *>_raw_buf(trans, 4 * ns * k)
    out.state_rule = <const uint32_t *>_raw_buf(state_rule, 4 * ns)
    out.accepting = <const uint8_t *>_raw_buf(accepting, ns)
    out.ref_off = ref_off
    out.ref_rule = <const uint32_t *>_raw_buf(ref_rule, 4 * ne)
    out.ref_target = <const uint32_t *>_raw_buf(ref_target, 4 * ne)
    out.rule_start = <const uint32_t *>_raw_buf(rule_state, 4 * (nr + 1))  # its first nr
    out.rule_nullable = <const uint8_t *>_raw_buf(nullable, nr)
    out.rule_follow = <const uint32_t *>_raw_buf(follow, 32 * nr)
    out.tok_off = tok_off
    out.tok_set = <const uint32_t *>_raw_buf(tok_set, 4 * nt)
    out.tok_target = <const uint32_t *>_raw_buf(tok_target, 4 * nt)
    if sets is None:
        out.n_token_sets = 0
        out.set_off = _NO_SETS
        out.set_ids = NULL
        out.set_negated = NULL
    else:
        set_off_b, set_ids, set_negated = sets
        nk = len(set_negated)
        set_off = <const uint32_t *>_raw_buf(set_off_b, 4 * (nk + 1))
        out.n_token_sets = <uint32_t>nk
        out.set_off = set_off
        out.set_ids = <const uint32_t *>_raw_buf(set_ids, 4 * set_off[nk])
        out.set_negated = <const uint8_t *>_raw_buf(set_negated, nk)
    if la is None:  # cm_grammar_new supplies debt 0 alone
        out.n_la = 0
        out.rule_la = NULL
        out.la_next = NULL
        out.la_union = NULL
    else:
        rule_la, la_next, la_union = la
        n_la = len(la_next) // 256
        out.n_la = <uint32_t>n_la
        out.rule_la = <const uint8_t *>_raw_buf(rule_la, nr)
        out.la_next = <const uint8_t *>_raw_buf(la_next, 256 * n_la)
        out.la_union = <const uint8_t *>_raw_buf(la_union, n_la * n_la)


cdef class GrammarHandle:
    """A compiled grammar in the C core; keeps its vocabulary alive."""
    cdef cm_grammar *ptr
    cdef readonly VocabHandle vocab
    cdef object _borrowed  # Tables._raw: the bytes the core reads in place (freed after it)
    cdef readonly bint segments  # made from the segment form's tables, with segments: no warm/entry

    def __cinit__(self, tables, VocabHandle vocab, stop_ids, settings):
        """settings: an object with an attribute per field of cm_limits (MatcherLimits and the
        private Strategy of cfgmask.compile); 0 in a size keeps the core's default.  Tables
        straight from the compiler carry ``_raw``, the door's bytes (cfgmask/compile/tables.py
        ``Tables._raw``): read in place, no numpy array or buffer view made for them, and
        borrowed by the core (not copied) while this handle holds them."""
        cdef cm_tables t
        cdef cm_seg_tables st
        cdef cm_limits lim
        cdef int rc
        cdef const uint8_t *facts = NULL
        raw = getattr(tables, "_raw", None)
        cdef bint borrow = raw is not None
        # the segment form's tables (segments.c_tables): a grammar whose matchers count.  Tables
        # with ``_raw`` are the compiler's, never the segment form's: not asked (Tables'
        # ``__getattr__`` answers an absent field by raising, ~4 us a compile)
        cdef bint seg = not borrow and getattr(tables, "state_seg", None) is not None
        if seg:
            raw = None
            borrow = False
            _seg_tables(tables, &st)
            t = st.t
        elif raw is None:
            _tables_from_arrays(tables, &t)
        else:
            _tables_from_raw(raw, &t, &facts)
        t.start_rule = <uint32_t>tables.start_rule
        _fill_limits(&lim, settings)
        cdef size_t n_stop = len(stop_ids)
        cdef uint32_t *sp = <uint32_t *>malloc(max(1, n_stop) * sizeof(uint32_t))
        if sp == NULL:
            raise MemoryError()
        for i, s in enumerate(stop_ids):
            sp[i] = <uint32_t>s
        with nogil:
            if seg:
                rc = cm_grammar_new_segments(&st, vocab.ptr, sp, n_stop, &lim, &self.ptr)
            elif not borrow:
                rc = cm_grammar_new(&t, vocab.ptr, sp, n_stop, &lim, &self.ptr)
            elif facts == NULL:  # bytes are immutable: the core borrows them while this handle holds them
                rc = cm_grammar_new_borrowed(&t, vocab.ptr, sp, n_stop, &lim, &self.ptr)
            else:  # and what the compiler's walk of the rows found of them (borrowed too), not found again
                rc = cm_grammar_new_facts(&t, facts, vocab.ptr, sp, n_stop, &lim, &self.ptr)
        free(sp)
        if rc:
            _raise(rc, "compile")
        self._borrowed = raw
        self.vocab = vocab
        self.segments = seg and len(tables.seg_lo) > 0

    def __dealloc__(self):
        cm_grammar_free(self.ptr)

    def warm(self, double deadline=0):
        """Build every mask-cache entry; ``deadline``: ``time.monotonic()`` seconds (<= 0: none)."""
        cdef int rc
        with nogil:
            rc = cm_grammar_warm(self.ptr, deadline)
        if rc:
            _raise_fill(rc, self, "warm")

    def entry(self, uint32_t state):
        """The mask-cache entry of one automaton state: (accepted token bitmask as int32
        words, uncertain token ids).  For tests and inspection."""
        return self._entry(state, 0, False)

    def seg_entry(self, uint32_t state, uint32_t k):
        """A segment grammar's mask-cache entry of one state at count k (keyed by the clipped
        pair, csrc/cache.c; a state outside segments: its entry by state), as `entry` gives
        it.  For tests."""
        return self._entry(state, k, True)

    def fill_entry(self, uint32_t state):
        """The entry a mask's gather reads for one state (csrc/cache.c, cm_grammar_fill_entry),
        as `entry` gives it, counting a use: its promoted copy once the uses reach
        `promote_uses`' number.  For tests."""
        return self._entry(state, 0, False, True)

    def _entry(self, uint32_t state, uint32_t k, bint seg, bint fill=False):
        import numpy as np
        n_words = (self.vocab.size + 31) // 32
        words = np.zeros(max(1, n_words), dtype=np.uint32)
        unc = np.zeros(max(1, self.vocab.size), dtype=np.uint32)
        cdef uint32_t[::1] wv = words
        cdef uint32_t[::1] uv = unc
        cdef size_t n_unc = 0
        cdef int rc
        with nogil:
            if seg:
                rc = cm_grammar_seg_entry_copy(self.ptr, state, k, &wv[0], &uv[0], &n_unc)
            elif fill:
                rc = cm_grammar_fill_entry_copy(self.ptr, state, &wv[0], &uv[0], &n_unc)
            else:
                rc = cm_grammar_entry_copy(self.ptr, state, &wv[0], &uv[0], &n_unc)
        if rc and seg:
            _raise(rc, "seg_entry")
        if rc:
            _raise_fill(rc, self, "entry")
        return words[:n_words].view(np.int32), unc[:n_unc].copy()

    def entry_wrap(self, uint32_t state):
        """The wrap split of one state's mask-cache entry (csrc/wrap.c): (the tokens taken whole
        where the block may start again, as int32 words; the rest's token ids), or None when the
        entry is not split.  For tests."""
        import numpy as np
        n_words = (self.vocab.size + 31) // 32
        words = np.zeros(max(1, n_words), dtype=np.uint32)
        rest = np.zeros(max(1, self.vocab.size), dtype=np.uint32)
        cdef uint32_t[::1] wv = words
        cdef uint32_t[::1] rv = rest
        cdef size_t n_rest = 0
        cdef int rc
        with nogil:
            rc = cm_grammar_entry_wrap(self.ptr, state, &wv[0], &rv[0], &n_rest)
        if rc < 0:
            _raise_fill(rc, self, "entry_wrap")
        if rc == 0:
            return None
        return words[:n_words].view(np.int32), rest[:n_rest].copy()

    def state_bytes(self, uint32_t state):
        """What the core derived of one state's byte row (for tests): (whether it has a
        transition, the bytes it has one on as 8 uint32 words, byte b at bit b % 32 of word b // 32)."""
        cdef uint32_t out[8]
        cdef int rc = cm_grammar_state_bytes(self.ptr, state, out)
        if rc < 0:
            raise IndexError(state)
        return bool(rc), [out[i] for i in range(8)]

    def state_flags(self, uint32_t state):
        """The flags the core keeps of one state (for tests): (bits: 1 has_bytes, 2 simple, 4
        has_tokens, 8 plain, 16 solo; its calls' bits, rule r at bit r % 64)."""
        cdef uint64_t calls = 0
        cdef int rc = cm_grammar_state_flags(self.ptr, state, &calls)
        if rc < 0:
            raise IndexError(state)
        return rc, calls

    def rule_returns(self, uint32_t rule):
        """The distinct states ``rule``'s callers go on in after it completes, ascending, as
        the core derived them (for tests)."""
        cdef const uint32_t *states = NULL
        cdef int n = cm_grammar_rule_returns(self.ptr, rule, &states)
        if n < 0:
            raise IndexError(rule)
        return [states[i] for i in range(n)]

    def rule_block(self, uint32_t rule):
        """Whether the core found ``rule`` a block (for tests): every state without calls or
        token edges, its accepting states reading no byte (csrc/wrap.c)."""
        cdef int rc = cm_grammar_rule_block(self.ptr, rule)
        if rc < 0:
            raise IndexError(rule)
        return bool(rc)

    @property
    def cache_bytes(self):
        return cm_grammar_cache_bytes(self.ptr)

    @property
    def cache_entries(self):
        return cm_grammar_cache_entries(self.ptr)

    @property
    def build_stats(self):
        cdef size_t composed = 0, donated = 0, flat = 0, vocab_loops = 0
        cdef size_t chain_walks = 0, chain_entries = 0, vocab_chains = 0, tail_walks = 0, tail_uses = 0
        cdef size_t run_walks = 0, vocab_runs = 0
        cm_grammar_build_stats(self.ptr, &composed, &donated, &flat, &vocab_loops)
        cm_grammar_chain_stats(self.ptr, &chain_walks, &chain_entries, &vocab_chains)
        cm_grammar_tail_stats(self.ptr, &tail_walks, &tail_uses)
        cm_grammar_run_stats(self.ptr, &run_walks, &vocab_runs)
        return {"composed_entries": composed, "donor_entries": donated, "flat_configs": flat,
                "vocab_loop_walks": vocab_loops, "chain_walks": chain_walks, "chain_entries": chain_entries,
                "vocab_chain_walks": vocab_chains, "tail_walks": tail_walks, "tail_uses": tail_uses,
                "run_walks": run_walks, "vocab_run_walks": vocab_runs}


cdef inline bint _int32_format(const char *f) noexcept:
    """A buffer format of signed 32-bit ints in native order, as numpy's int32 gives it
    (what a typed ``int32_t`` memoryview accepts of it)."""
    if f == NULL:
        return False  # unsigned bytes
    if f[0] == b'@' or f[0] == b'=':
        f += 1
    return f[0] == b'i' and f[1] == 0


# ---- a numpy row without the buffer protocol -------------------------------------------
#
# ``fill_row``'s common argument is the same 2-D int32 numpy array at every step.  A buffer
# request on it costs numpy ~640 instructions a call (its buffer info rebuilt, a format string
# made and compared): a fifth of a warm fill's wrapper.  An exact ``numpy.ndarray``'s fields
# are read in place instead, through numpy's public object layout (PyArrayObject_fields, fixed
# since numpy 1.7), which is checked against a real array before it is first trusted; anything
# else, or an array whose fields do not qualify, takes the buffer request as before.

cdef extern from *:
    """
    typedef struct {
        PyObject_HEAD
        char *data;
        int nd;
        Py_ssize_t *dimensions;
        Py_ssize_t *strides;
        PyObject *base;
        PyObject *descr;
        int flags;
    } cm_np_fields;
    """
    ctypedef struct cm_np_fields:
        char *data
        int nd
        Py_ssize_t *dimensions
        Py_ssize_t *strides
        void *descr
        int flags

# numpy's NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE, and WARN_ON_WRITE
# (a buffer request for writing warns or fails on such arrays: they take that way)
cdef int _NP_NEED = 0x0001 | 0x0100 | 0x0400
cdef unsigned int _NP_WARN = 0x80000000u
cdef int _np_state = 0           # 0 not checked yet, 1 fields trusted, -1 not trusted
cdef object _np_ndarray = None   # numpy.ndarray (exact type only)
cdef void *_np_int32 = NULL      # numpy's native int32 descriptor (the one np.zeros(dtype=np.int32) uses)
cdef object _np_int32_ref = None  # ... kept alive
cdef size_t _np_fast_fills = 0   # fills that read the fields in place (for the tests)


def fill_row_fast_fills():
    """How many ``fill_row`` calls read their array's fields in place, in this process."""
    return _np_fast_fills


def fill_row_fields(bint on):
    """Tests: read arrays' fields in place (after the layout check) or never (the buffer request)."""
    global _np_state
    _np_check()  # numpy.ndarray known either way
    if not on:
        _np_state = -1
    return _np_state > 0


cdef int _np_check() except -1:
    """Check numpy's object layout on an array whose fields are known (once)."""
    global _np_state, _np_ndarray, _np_int32, _np_int32_ref
    _np_state = -1
    import numpy as np
    _np_ndarray = np.ndarray
    a = np.zeros((3, 5), dtype=np.int32)
    dt = np.dtype(np.int32)
    adt = a.dtype
    cdef cm_np_fields *f = <cm_np_fields *><void *>a
    if (type(a) is not np.ndarray or f.nd != 2 or f.dimensions[0] != 3 or f.dimensions[1] != 5
            or f.strides[0] != 20 or f.strides[1] != 4
            or <size_t>f.data != <size_t>a.__array_interface__["data"][0]
            or f.descr != <void *>adt or f.descr != <void *>dt
            or (f.flags & _NP_NEED) != _NP_NEED or f.flags != a.flags.num):
        return 0
    r = a[:, 1:]  # not C-contiguous
    a.flags.writeable = False  # r stays writeable: its own flag
    if (f.flags & 0x0400) or (<cm_np_fields *><void *>r).flags & 0x0001:
        return 0
    _np_int32_ref = dt
    _np_int32 = <void *>_np_int32_ref
    _np_state = 1
    return 0


cdef class MatcherHandle:
    cdef cm_matcher *ptr
    cdef readonly GrammarHandle grammar

    def __cinit__(self, GrammarHandle grammar, bint _empty=False):
        self.grammar = grammar
        if _empty:
            return
        cdef int rc
        with nogil:
            rc = cm_matcher_new(grammar.ptr, &self.ptr)
        if rc:
            _raise(rc, "matcher")

    def __dealloc__(self):
        cm_matcher_free(self.ptr)

    def fork(self):
        cdef MatcherHandle f = MatcherHandle(self.grammar, True)
        cdef int rc
        with nogil:
            rc = cm_matcher_fork(self.ptr, &f.ptr)
        if rc:
            _raise(rc, "fork")
        return f

    def reset(self):
        cm_matcher_reset(self.ptr)

    def accept_token(self, long long token):
        cdef int rc
        if token < 0 or token >= <long long>self.grammar.vocab.size:
            raise MatcherError(f"token id {token} is out of range for a vocabulary of "
                               f"{self.grammar.vocab.size} tokens")
        with nogil:
            rc = cm_matcher_accept_token(self.ptr, <uint32_t>token)
        if rc < 0:
            _raise(rc, "accept_token")
        return rc == 1

    def accept_bytes(self, const uint8_t[::1] data, bint dry_run=False):
        cdef int rc
        cdef size_t n = data.shape[0]
        cdef const uint8_t *p = &data[0] if n else NULL
        with nogil:
            if dry_run:
                rc = cm_matcher_can_accept_bytes(self.ptr, p, n)
            else:
                rc = cm_matcher_accept_bytes(self.ptr, p, n)
        if rc < 0:
            _raise(rc, "accept_bytes")
        return rc == 1

    def fill_mask(self, int32_t[::1] row):
        cdef int rc
        with nogil:
            rc = cm_matcher_fill_mask(self.ptr, <uint32_t *>&row[0], row.shape[0])
        if rc:
            _raise_fill(rc, self.grammar, "fill_bitmask")

    def fill_row(self, object bitmask, object row):
        """``fill_mask`` into ``bitmask[row]`` of a 2-D, C-contiguous, writable int32 numpy
        array (exactly ``numpy.ndarray``) at least a vocabulary wide, ``row`` an int; False
        (nothing done) for anything else, which the caller converts or rejects the slow way.
        No row view and no typed memoryview (whose object and format parse cost as much as a
        small mask's ORs); an array that qualifies by its own fields not even a buffer
        request: the per-mask path of ``Matcher.fill_bitmask``."""
        cdef Py_buffer buf
        cdef int rc
        cdef Py_ssize_t r
        cdef uint32_t *words
        cdef size_t n_words
        cdef cm_np_fields *f
        global _np_fast_fills
        if _np_state == 0:
            _np_check()
        if type(row) is not int or type(bitmask) is not _np_ndarray:
            return False
        if _np_state > 0:
            f = <cm_np_fields *><void *>bitmask
            if (f.nd == 2 and f.descr == _np_int32 and (f.flags & _NP_NEED) == _NP_NEED
                    and not (<unsigned int>f.flags & _NP_WARN) and 0 <= row < f.dimensions[0]
                    and f.dimensions[1] * 32 >= <Py_ssize_t>self.grammar.vocab.size):
                r = row
                n_words = <size_t>f.dimensions[1]
                words = <uint32_t *>(f.data + r * f.dimensions[1] * 4)
                _np_fast_fills += 1
                with nogil:
                    rc = cm_matcher_fill_mask(self.ptr, words, n_words)
                if rc:
                    _raise_fill(rc, self.grammar, "fill_bitmask")
                return True
        try:
            PyObject_GetBuffer(bitmask, &buf, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT)
        except (ValueError, TypeError, BufferError):
            return False
        try:
            if (buf.ndim != 2 or buf.itemsize != 4 or not _int32_format(buf.format)
                    or not 0 <= row < buf.shape[0] or buf.shape[1] * 32 < <Py_ssize_t>self.grammar.vocab.size):
                return False
            r = row
            n_words = <size_t>buf.shape[1]
            words = <uint32_t *>(<char *>buf.buf + r * n_words * 4)
            with nogil:
                rc = cm_matcher_fill_mask(self.ptr, words, n_words)
        finally:
            PyBuffer_Release(&buf)
        if rc:
            _raise_fill(rc, self.grammar, "fill_bitmask")
        return True

    def fill_mask_timed(self, int32_t[::1] row):
        """``fill_mask`` that also returns when the C fill started and ended (seconds of
        CLOCK_MONOTONIC, ``time.monotonic``'s clock), read without the GIL: what a prefetch
        worker really computed, apart from its wait for the GIL."""
        cdef int rc
        cdef timespec t0, t1
        with nogil:
            clock_gettime(CLOCK_MONOTONIC, &t0)
            rc = cm_matcher_fill_mask(self.ptr, <uint32_t *>&row[0], row.shape[0])
            clock_gettime(CLOCK_MONOTONIC, &t1)
        if rc:
            _raise_fill(rc, self.grammar, "fill_bitmask")
        return (t0.tv_sec + 1e-9 * t0.tv_nsec, t1.tv_sec + 1e-9 * t1.tv_nsec)

    def is_accepting(self):
        return cm_matcher_is_accepting(self.ptr) == 1

    def is_terminated(self):
        return cm_matcher_is_terminated(self.ptr) == 1

    def error(self):
        return cm_matcher_error(self.ptr)

    def num_tokens(self):
        return cm_matcher_num_tokens(self.ptr)

    def chart_items(self):
        return cm_matcher_chart_items(self.ptr)

    def seg_items(self):
        """The last chart set's items: a list of (state, origin, k), k None outside segments
        (and on a grammar without segments).  For the tests (tests/test_segments_chart.py)."""
        cdef size_t n = cm_matcher_seg_items(self.ptr, NULL, NULL, NULL, 0)
        cdef uint32_t *s = <uint32_t *>malloc(max(n, 1) * 12)
        if s == NULL:
            raise MemoryError()
        cdef uint32_t *o = s + n
        cdef uint32_t *k = s + 2 * n
        cm_matcher_seg_items(self.ptr, s, o, k, n)
        out = [(s[i], o[i], None if k[i] == 0xFFFFFFFF else k[i]) for i in range(n)]
        free(s)
        return out

    def mask_stats(self):
        cdef cm_mask_stats st
        cm_matcher_mask_stats(self.ptr, &st)
        return {"states": st.n_states, "candidates": st.n_candidates, "checked": st.n_checked,
                "items": st.n_items, "memo_hit": bool(st.memo_hit), "steps": st.n_steps,
                "verdicts": st.n_verdicts, "copied": bool(st.copied)}

    def rollback(self, size_t k):
        if cm_matcher_rollback(self.ptr, k):
            raise MatcherError(f"cannot roll back {k} tokens: only {self.num_tokens()} accepted")

    def jump_forward(self, size_t cap):
        cdef bytearray buf = bytearray(max(cap, 1))
        cdef uint8_t *p = <uint8_t *>(<char *>buf)
        cdef long n
        with nogil:
            n = cm_matcher_jump_forward(self.ptr, p, cap)
        if n < 0:
            _raise(<int>n, "jump_forward_bytes")
        return bytes(buf[:n])


def fill_masks(list handles, int32_t[:, ::1] mask, list rows):
    """Fill several rows, GIL released for each; used by the thread pool."""
    cdef MatcherHandle h
    cdef int rc
    cdef Py_ssize_t r
    for h, r in zip(handles, rows):
        with nogil:
            rc = cm_matcher_fill_mask(h.ptr, <uint32_t *>&mask[r, 0], mask.shape[1])
        if rc:
            _raise_fill(rc, h.grammar, "fill_bitmask")


# ---- applying a bitmask to logits --------------------------------------------------------


cdef struct _view:
    uint8_t *base
    size_t n_rows, n_cols, itemsize
    ptrdiff_t row_stride, col_stride  # bytes


cdef int _view_of(object a, str what, bint writable, Py_buffer *buf, _view *v) except -1:
    """A 1-D or 2-D array as base, shape and byte strides: through the buffer protocol
    (numpy; returns 1: buf is filled and must be released), or a CPU torch tensor's own metadata (its
    data_ptr, shape and strides describe memory inside its storage)."""
    if PyObject_CheckBuffer(a):
        PyObject_GetBuffer(a, buf, PyBUF_STRIDES | (PyBUF_WRITABLE if writable else 0))
        if buf.ndim < 1 or buf.ndim > 2:
            PyBuffer_Release(buf)
            raise ValueError(f"{what} must be 1-D or 2-D, got {buf.ndim}-D")
        v.base = <uint8_t *>buf.buf
        v.itemsize = buf.itemsize
        v.n_rows = buf.shape[0] if buf.ndim == 2 else 1
        v.n_cols = buf.shape[buf.ndim - 1]
        v.row_stride = buf.strides[0] if buf.ndim == 2 else 0
        v.col_stride = buf.strides[buf.ndim - 1]
        return 1
    if not hasattr(a, "data_ptr") or not a.is_cpu:
        raise TypeError(f"{what} must be a numpy array or a CPU torch tensor, not {type(a).__name__}")
    cdef tuple shape = tuple(a.shape), strides = tuple(a.stride())
    cdef Py_ssize_t nd = len(shape)
    if nd < 1 or nd > 2:
        raise ValueError(f"{what} must be 1-D or 2-D, got {nd}-D")
    v.itemsize = a.element_size()
    v.base = <uint8_t *><size_t>a.data_ptr()
    v.n_rows = shape[0] if nd == 2 else 1
    v.n_cols = shape[nd - 1]
    v.row_stride = strides[0] * <ptrdiff_t>v.itemsize if nd == 2 else 0
    v.col_stride = strides[nd - 1] * <ptrdiff_t>v.itemsize
    return 0


def apply_mask(object logits, object bitmask, uint64_t neg, const int64_t[::1] rows=None, int max_simd=0):
    """cm_apply_mask on a logits array (elements of 2, 4 or 8 bytes, -inf pattern `neg`)
    and an int32 bitmask, each a numpy array or a CPU torch tensor, 1-D (one row) or 2-D;
    rows: None (every row) or the rows to mask, indexing both.  max_simd: 0 (the CPU's best
    instruction set) or a cap, 1 = baseline, 2 = AVX2 (tests compare every path).  The GIL is
    released."""
    cdef Py_buffer lb, mb
    cdef _view lv, mv
    cdef cm_logits_view l
    cdef cm_mask_view m
    cdef const int64_t *rp = NULL
    cdef size_t n_rp = 0
    cdef int64_t no_row = 0
    cdef int rc
    cdef bint have_lb = False, have_mb = False
    try:
        have_lb = _view_of(logits, "logits", True, &lb, &lv)
        have_mb = _view_of(bitmask, "bitmask", False, &mb, &mv)
        if lv.itemsize not in (2, 4, 8) or mv.itemsize != 4:
            raise TypeError(f"logits of {lv.itemsize}-byte elements or a bitmask of {mv.itemsize}-byte "
                            "words: need 2, 4 or 8 and 4")
        if lv.n_rows and lv.n_cols and ((lv.n_rows > 1 and lv.row_stride == 0)
                                         or (lv.n_cols > 1 and lv.col_stride == 0)):
            raise ValueError("logits elements overlap (a zero stride, as in a broadcast view): "
                             "mask an array that owns one element per logit")
        l = cm_logits_view(base=lv.base, n_rows=lv.n_rows, width=lv.n_cols, row_stride=lv.row_stride,
                           col_stride=lv.col_stride, elem_size=lv.itemsize, neg=neg)
        m = cm_mask_view(base=mv.base, n_rows=mv.n_rows, n_words=mv.n_cols, row_stride=mv.row_stride,
                         col_stride=mv.col_stride)
        if rows is None and lv.n_rows != mv.n_rows:
            raise ValueError(f"bitmask has {mv.n_rows} rows but logits have {lv.n_rows}: rows correspond "
                             "one to one (use indices= to mask some rows only)")
        if rows is not None:
            _check_rows(rows, lv.n_rows, mv.n_rows)
            n_rp = rows.shape[0]
            rp = &rows[0] if n_rp else &no_row  # not NULL (every row): none
        with nogil:
            rc = cm_apply_mask(&l, &m, rp, n_rp, max_simd)
        if rc:
            raise ValueError("apply_bitmask_inplace: the C core rejected the logits/bitmask views "
                             "(misaligned logits, or a row out of range)")
    finally:
        if have_lb:
            PyBuffer_Release(&lb)
        if have_mb:
            PyBuffer_Release(&mb)


def check_rows(const int64_t[::1] rows, size_t n_logits, size_t n_mask):
    """IndexError unless every row is in 0 .. min(n_logits, n_mask) - 1."""
    _check_rows(rows, n_logits, n_mask)


cdef int _check_rows(const int64_t[::1] rows, size_t n_logits, size_t n_mask) except -1:
    cdef Py_ssize_t k
    cdef size_t limit = min(n_logits, n_mask)
    for k in range(rows.shape[0]):
        if rows[k] < 0 or <uint64_t>rows[k] >= limit:
            raise IndexError(f"row index {rows[k]} is out of range for logits of {n_logits} rows and a "
                             f"bitmask of {n_mask} rows (indices name a row of both; no negative indices)")
    return 0


def apply_mask_simd():
    """The instruction set cm_apply_mask uses on this CPU: 1 baseline, 2 AVX2, 3 AVX-512."""
    return cm_apply_mask_simd()


cdef const uint32_t *_u32(const uint32_t[::1] a):
    return &a[0] if a.shape[0] else NULL


# compile_components' and compile_finish's arrays, read in place.  A typed memoryview argument
# costs its call ~5 K instructions (Cython makes a memoryview object for it, and numpy a format
# string), five of them a compile: the compiler's own types are read directly, anything else
# goes through the typed memoryview as before (its checks, its errors), which the caller holds
# (returned) while it reads the pointer.

cdef object _in_u32(object a, const uint32_t **p, Py_ssize_t *n):
    """``a`` as ``const uint32_t[::1]``: an ``array('I')`` read in place (the caller holds it)."""
    cdef const uint32_t[::1] mv
    if type(a) is array and (<array>a).ob_descr.typecode == c'I' and (<array>a).ob_descr.itemsize == 4:
        n[0] = len(<array>a)
        p[0] = <const uint32_t *>(<array>a).data.as_uints if n[0] else NULL
        return None
    mv = a
    n[0] = mv.shape[0]
    p[0] = &mv[0] if n[0] else NULL
    return mv


cdef object _in_u8(object a, const uint8_t **p, Py_ssize_t *n):
    """``a`` as ``const uint8_t[::1]``: a ``bytearray`` or ``bytes`` read in place."""
    cdef const uint8_t[::1] mv
    if type(a) is bytearray:
        n[0] = PyByteArray_GET_SIZE(a)
        p[0] = <const uint8_t *>PyByteArray_AS_STRING(a) if n[0] else NULL
        return None
    if type(a) is bytes:
        n[0] = PyBytes_GET_SIZE(a)
        p[0] = <const uint8_t *>PyBytes_AS_STRING(a) if n[0] else NULL
        return None
    mv = a
    n[0] = mv.shape[0]
    p[0] = &mv[0] if n[0] else NULL
    return mv


cdef bint _c_buffer(object a, Py_buffer *b):
    """``a``'s buffer, C-contiguous with its format, into ``b`` (True), or False (b not filled:
    not contiguous, say; the typed memoryview then raises its own error)."""
    try:
        PyObject_GetBuffer(a, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except BufferError:
        return False
    return True


cdef object _in_i64(object a, const int64_t **p, Py_ssize_t *n):
    """``a`` as ``const int64_t[::1]`` (None stays None, n 0): a one-dimensional C-contiguous
    buffer of 8-byte signed ints (numpy's int64: format ``l`` or ``q``) read through the
    buffer protocol, released before return (the caller holds ``a``: a numpy array's data does
    not move while it is referenced)."""
    cdef const int64_t[::1] mv
    cdef Py_buffer b
    cdef const char *f
    cdef bint ok = False
    if a is None:
        n[0] = 0
        p[0] = NULL
        return None
    if type(a) is not array and PyObject_CheckBuffer(a) and _c_buffer(a, &b):
        f = b.format
        if f != NULL and (f[0] == c'@' or f[0] == c'=' or f[0] == c'<'):
            f += 1
        ok = b.ndim == 1 and b.itemsize == 8 and f != NULL and (f[0] == c'l' or f[0] == c'q') and f[1] == 0
        if ok:
            n[0] = b.shape[0]
            p[0] = <const int64_t *>b.buf if n[0] else NULL
        PyBuffer_Release(&b)
        if ok:
            return a
    mv = a
    n[0] = mv.shape[0]
    p[0] = &mv[0] if n[0] else NULL
    return mv


cdef const uint8_t *_u8(const uint8_t[::1] a):
    return &a[0] if a.shape[0] else NULL


cdef cm_dfa_out *_fsm_build(const uint32_t[::1] byte_off, const uint8_t[::1] byte_lo,
                            const uint8_t[::1] byte_hi, const uint32_t[::1] byte_to,
                            const uint32_t[::1] label_off, const uint32_t[::1] label,
                            const uint32_t[::1] label_to, const uint32_t[::1] eps_off,
                            const uint32_t[::1] eps_to, uint32_t start, uint32_t final,
                            size_t max_states, size_t max_bytes, double deadline) except NULL:
    """cm_fsm_build over checked NFA arrays; the caller owns the result."""
    cdef cm_nfa_view v
    cdef cm_budget budget = cm_budget(max_bytes=max_bytes, used=0, peak=0, deadline=deadline)
    cdef cm_dfa_out *d = NULL
    cdef int rc
    cdef size_t n = byte_off.shape[0] - 1
    if (n < 1 or label_off.shape[0] != n + 1 or eps_off.shape[0] != n + 1
            or byte_lo.shape[0] != byte_hi.shape[0] or byte_lo.shape[0] != byte_to.shape[0]
            or byte_off[n] != byte_to.shape[0] or label_off[n] != label.shape[0]
            or label.shape[0] != label_to.shape[0] or eps_off[n] != eps_to.shape[0]):
        raise ValueError("inconsistent NFA arrays")
    v.n_states = <uint32_t>n
    v.byte_off = &byte_off[0]
    v.byte_lo = _u8(byte_lo)
    v.byte_hi = _u8(byte_hi)
    v.byte_to = _u32(byte_to)
    v.label_off = &label_off[0]
    v.label = _u32(label)
    v.label_to = _u32(label_to)
    v.eps_off = &eps_off[0]
    v.eps_to = _u32(eps_to)
    with nogil:
        rc = cm_fsm_build(&v, start, final, max_states, &budget, &d)
    _check_build(rc, "automaton build", max_states, max_bytes)
    return d


def fsm_build(const uint32_t[::1] byte_off, const uint8_t[::1] byte_lo, const uint8_t[::1] byte_hi,
              const uint32_t[::1] byte_to, const uint32_t[::1] label_off, const uint32_t[::1] label,
              const uint32_t[::1] label_to, const uint32_t[::1] eps_off, const uint32_t[::1] eps_to,
              uint32_t start, uint32_t final, size_t max_states, size_t max_bytes=0, double deadline=0):
    """Subset construction + minimization (csrc/fsm.c).  Returns (class_lo, trans, accepting,
    lab_off, lab, lab_to) as bytes (little-endian uint16/int32/uint8/uint32 arrays).
    max_bytes: memory budget (0: none); deadline: time.monotonic() value (<= 0: none)."""
    cdef cm_dfa_out *d = _fsm_build(byte_off, byte_lo, byte_hi, byte_to, label_off, label, label_to,
                                    eps_off, eps_to, start, final, max_states, max_bytes, deadline)
    try:
        ns, nc = d.n_states, d.n_classes
        return (
            bytes((<char *>d.class_lo)[:2 * (nc + 1)]),
            bytes((<char *>d.trans)[:4 * ns * nc]),
            bytes((<char *>d.accepting)[:ns]),
            bytes((<char *>d.lab_off)[:4 * (ns + 1)]),
            bytes((<char *>d.lab)[:4 * d.lab_off[ns]]) if d.lab_off[ns] else b"",
            bytes((<char *>d.lab_to)[:4 * d.lab_off[ns]]) if d.lab_off[ns] else b"",
        )
    finally:
        cm_dfa_out_free(d)


def dfa_product(const uint32_t[::1] rows, const uint32_t[::1] sizes, uint32_t n_atoms, uint32_t max_states):
    """cm_dfa_product (csrc/product.c): (targets, tuples) as bytes of uint32, [n][n_atoms] and
    [n][k]; LimitError (max_dfa_states) past max_states."""
    cdef uint32_t n = 0
    cdef uint32_t *tr = NULL
    cdef uint32_t *st = NULL
    cdef int rc
    cdef uint32_t k = <uint32_t>sizes.shape[0]
    cdef const uint32_t *rp = _u32(rows)
    cdef const uint32_t *sp = _u32(sizes)
    cdef size_t n_rows = rows.shape[0]
    with nogil:
        rc = cm_dfa_product(rp, n_rows, sp, k, n_atoms, max_states, &n, &tr, &st)
    try:
        _check_build(rc, "automaton product", max_states, 0)
        return (PyBytes_FromStringAndSize(<char *>tr, 4 * <Py_ssize_t>n * n_atoms),
                PyBytes_FromStringAndSize(<char *>st, 4 * <Py_ssize_t>n * k))
    finally:
        free(tr)
        free(st)


def dfa_trim(const int32_t[::1] trans, uint32_t n, uint32_t m, const uint8_t[::1] accept):
    """cm_dfa_trim_labels (csrc/product.c): (lab_off, lab, lab_to, eps_off, eps_to) as bytes of
    uint32, fsm_build's label and epsilon arrays; None when the start state is not live."""
    if n == 0 or m == 0 or <size_t>trans.shape[0] != <size_t>n * m or <size_t>accept.shape[0] != n:
        raise ValueError("inconsistent DFA arrays")
    cdef size_t nm = <size_t>n * m
    cdef const int32_t *tp = &trans[0]
    cdef const uint8_t *ap = &accept[0]
    cdef uint32_t *lab_off = <uint32_t *>malloc((n + 2) * sizeof(uint32_t))
    cdef uint32_t *eps_off = <uint32_t *>malloc((n + 2) * sizeof(uint32_t))
    cdef uint32_t *lab = <uint32_t *>malloc(nm * sizeof(uint32_t))
    cdef uint32_t *lab_to = <uint32_t *>malloc(nm * sizeof(uint32_t))
    cdef uint32_t *eps_to = <uint32_t *>malloc(n * sizeof(uint32_t))
    cdef int rc = CM_ERR_NOMEM
    try:
        if lab_off and eps_off and lab and lab_to and eps_to:
            with nogil:
                rc = cm_dfa_trim_labels(tp, n, m, ap, lab_off, lab, lab_to, eps_off, eps_to)
        if rc < 0:
            _check_build(rc, "automaton trim", 0, 0)
        if rc == 0:
            return None
        return (PyBytes_FromStringAndSize(<char *>lab_off, 4 * (<Py_ssize_t>n + 2)),
                PyBytes_FromStringAndSize(<char *>lab, 4 * <Py_ssize_t>lab_off[n + 1]),
                PyBytes_FromStringAndSize(<char *>lab_to, 4 * <Py_ssize_t>lab_off[n + 1]),
                PyBytes_FromStringAndSize(<char *>eps_off, 4 * (<Py_ssize_t>n + 2)),
                PyBytes_FromStringAndSize(<char *>eps_to, 4 * <Py_ssize_t>eps_off[n + 1]))
    finally:
        free(lab_off)
        free(eps_off)
        free(lab)
        free(lab_to)
        free(eps_to)


cdef list _row_edges(const cm_dfa_out *d, uint32_t s):
    """State s's byte edges [(lo, hi, target)], adjacent classes with one target merged."""
    cdef uint32_t c = 0, c1, nc = d.n_classes
    cdef int32_t to
    cdef const int32_t *row = d.trans + <size_t>s * nc
    edges = []
    while c < nc:
        to = row[c]
        c1 = c + 1
        while c1 < nc and row[c1] == to:
            c1 += 1
        if to >= 0:
            edges.append((d.class_lo[c], d.class_lo[c1] - 1, to))
        c = c1
    return edges


cdef class DfaHandle:
    """A minimal DFA built by csrc/fsm.c (owned).  Labels are numbered 0..n-1."""
    cdef cm_dfa_out *ptr
    cdef readonly uint32_t n_states

    def __dealloc__(self):
        cm_dfa_out_free(self.ptr)
        self.ptr = NULL

    def __len__(self):
        return self.n_states

    @property
    def runs_kept(self):
        """Whether its rows are kept as runs (cm_dfa_out.runs: at a copy into a caller, or pinned)."""
        return self.ptr.runs != NULL

    def keep_runs(self):
        """Keep its rows as runs now, for its copies into callers (cm_dfa_keep_runs): the prelude's
        automata get theirs when pinned (cfgmask/compile/cache.py, AutomatonCache.pin)."""
        cdef int rc = cm_dfa_keep_runs(self.ptr)
        if rc != CM_OK:
            _raise(rc, "keep_runs")

    @property
    def live(self):
        """Minimization's mark (cm_dfa_out.live): every state is reached from the start and
        reaches an accepting state when every label edge is followed; False: not known."""
        return self.ptr.live != 0

    def states(self):
        """Per state: (byte edges [(lo, hi, target)], adjacent ranges merged; label edges
        [(label, target)], by label; accepting)."""
        cdef cm_dfa_out *d = self.ptr
        cdef uint32_t s, e
        out = []
        for s in range(d.n_states):
            labels = [(d.lab[e], d.lab_to[e]) for e in range(d.lab_off[s], d.lab_off[s + 1])]
            out.append((_row_edges(d, s), labels, d.accepting[s] != 0))
        return out

    def named_states(self, names):
        """``states()`` as three lists, each label edge named (``names[label]``): per state its byte
        edges [(lo, hi, target)] (runs merged), its label edges [(name, target)], whether it
        accepts -- the rule automata of the segment form (cfgmask/compile/segments.py)."""
        cdef cm_dfa_out *d = self.ptr
        cdef uint32_t s, e
        all_edges = []
        all_calls = []
        acc = []
        for s in range(d.n_states):
            all_edges.append(_row_edges(d, s))
            all_calls.append([(names[d.lab[e]], d.lab_to[e]) for e in range(d.lab_off[s], d.lab_off[s + 1])])
            acc.append(d.accepting[s] != 0)
        return all_edges, all_calls, acc

    def flat(self, int32_t base):
        """For the compiler's tables: (class of each byte as bytes [256], transitions as
        int32 bytes [n_states * n_classes] with base added to every target (-1 stays),
        accepting bytes, label edges [(state, label, target + base)])."""
        cdef cm_dfa_out *d = self.ptr
        cdef size_t i, nt = <size_t>d.n_states * d.n_classes
        cdef uint32_t s, e, c, x
        cdef bytearray cls = bytearray(256)
        cdef bytearray tr = bytearray(4 * nt)
        cdef int32_t *t = <int32_t *><char *>tr
        cdef unsigned char *cp = <unsigned char *><char *>cls
        for c in range(d.n_classes):
            for x in range(d.class_lo[c], d.class_lo[c + 1]):
                cp[x] = <unsigned char>c
        for i in range(nt):
            t[i] = d.trans[i] + base if d.trans[i] >= 0 else -1
        labels = [(s, d.lab[e], d.lab_to[e] + base)
                  for s in range(d.n_states) for e in range(d.lab_off[s], d.lab_off[s + 1])]
        return bytes(cls), bytes(tr), bytes((<char *>d.accepting)[:d.n_states]) if d.n_states else b"", labels

    def label_order(self):
        """The labels in order of first use (states in order, each state's by number)."""
        cdef cm_dfa_out *d = self.ptr
        cdef size_t e, m = d.lab_off[d.n_states]
        seen = set()
        out = []
        for e in range(m):
            if d.lab[e] not in seen:
                seen.add(d.lab[e])
                out.append(d.lab[e])
        return out

    def can_accept(self, const uint8_t[::1] label_ok):
        """Does the DFA accept some string when only labels l with label_ok[l] count?"""
        cdef int result = 0, rc
        self._check_labels(label_ok)
        rc = cm_dfa_can_accept(self.ptr, _u8(label_ok), &result)
        if rc:
            raise MemoryError("can_accept: out of memory")
        return result != 0

    def trim(self, const uint8_t[::1] label_ok):
        """The DFA without label edges l where not label_ok[l] and without dead or unreachable
        states: (DfaHandle, the kept labels' old numbers), or None when the start state is dead."""
        cdef cm_dfa_out *o = NULL
        cdef int rc
        self._check_labels(label_ok)
        rc = cm_dfa_trim(self.ptr, _u8(label_ok), &o)
        if rc:
            raise MemoryError("trim: out of memory")
        if o == NULL:
            return None
        return _wrap_compact(o)

    cdef _check_labels(self, const uint8_t[::1] label_ok):
        cdef size_t e
        for e in range(self.ptr.lab_off[self.ptr.n_states]):
            if self.ptr.lab[e] >= <uint32_t>label_ok.shape[0]:
                raise ValueError("label mask too short")


cdef object _wrap_compact(cm_dfa_out *d):
    """A handle owning d, its labels renumbered 0..n-1: (handle, their old numbers)."""
    cdef DfaHandle h = DfaHandle.__new__(DfaHandle)
    cdef uint32_t n_used = 0, k
    h.ptr = d
    h.n_states = d.n_states
    cdef uint32_t *used = <uint32_t *>malloc((d.lab_off[d.n_states] + 1) * sizeof(uint32_t))
    if used == NULL:
        raise MemoryError("out of memory")
    cm_dfa_compact_labels(d, used, &n_used)
    try:
        return h, [used[k] for k in range(n_used)]
    finally:
        free(used)


def fsm_build_handle(const uint32_t[::1] byte_off, const uint8_t[::1] byte_lo, const uint8_t[::1] byte_hi,
                     const uint32_t[::1] byte_to, const uint32_t[::1] label_off, const uint32_t[::1] label,
                     const uint32_t[::1] label_to, const uint32_t[::1] eps_off, const uint32_t[::1] eps_to,
                     uint32_t start, uint32_t final, size_t max_states, size_t max_bytes=0,
                     double deadline=0):
    """fsm_build's DFA as (DfaHandle, the NFA label numbers of its labels 0..n-1)."""
    cdef cm_dfa_out *d = _fsm_build(byte_off, byte_lo, byte_hi, byte_to, label_off, label, label_to,
                                    eps_off, eps_to, start, final, max_states, max_bytes, deadline)
    return _wrap_compact(d)


def fsm_build_ir(const uint32_t[::1] code, const uint32_t[::1] label, const uint32_t[::1] refs,
                 list frags, const uint32_t[::1] roots, bint shared, size_t max_states,
                 size_t max_bytes=0, double deadline=0):
    """Thompson construction of encoded IR, subset construction and minimization
    (csrc/fsm.c cm_fsm_build_ir).  refs: (name, kind, arg) triples sorted by name; frags:
    (DfaHandle, label values of its labels) pairs.  Returns [(DfaHandle, label values
    of its labels 0..n-1)] per root.  max_bytes: memory budget of the call (0: none);
    deadline: time.monotonic() value (<= 0: none)."""
    cdef cm_ir_input inp
    cdef cm_budget budget = cm_budget(max_bytes=max_bytes, used=0, peak=0, deadline=deadline)
    cdef uint32_t n_roots = <uint32_t>roots.shape[0]
    cdef uint32_t n_frags = <uint32_t>len(frags)
    cdef cm_ir_frag *fr = NULL
    cdef cm_dfa_out **out = NULL
    cdef const uint32_t[::1] labs
    cdef DfaHandle h
    cdef cm_dfa_out *d
    cdef int rc = 0
    cdef uint32_t i, k, n_used
    if n_roots == 0 or refs.shape[0] % 3:
        raise ValueError("fsm_build_ir: bad arguments")
    keep = []
    fr = <cm_ir_frag *>malloc((n_frags + 1) * sizeof(cm_ir_frag))
    out = <cm_dfa_out **>malloc(n_roots * sizeof(cm_dfa_out *))
    try:
        if fr == NULL or out == NULL:
            raise MemoryError("fsm_build_ir: out of memory")
        for i in range(n_roots):
            out[i] = NULL
        for i in range(n_frags):
            h, labs = frags[i]
            if h.ptr == NULL:
                raise ValueError("fsm_build_ir: empty DFA handle")
            keep.append(labs)
            n_used = h.ptr.lab_off[h.ptr.n_states]
            for k in range(n_used):
                if h.ptr.lab[k] >= <uint32_t>labs.shape[0]:
                    raise ValueError("fsm_build_ir: fragment label out of range")
            fr[i].dfa = h.ptr
            fr[i].labels = _u32(labs)
        inp.code = _u32(code)
        inp.code_len = code.shape[0]
        inp.label = _u32(label)
        inp.n_names = <uint32_t>label.shape[0]
        inp.refs = <const cm_ir_ref *>_u32(refs)
        inp.n_refs = <uint32_t>(refs.shape[0] // 3)
        inp.frags = fr
        inp.n_frags = n_frags
        for i in range(inp.n_refs):
            if refs[3 * i + 1] == CM_IR_REF_ENTRY and (not shared or refs[3 * i + 2] >= n_roots):
                raise ValueError("fsm_build_ir: bad entry")
        with nogil:
            rc = cm_fsm_build_ir(&inp, &roots[0], n_roots, shared, max_states, &budget, out)
        _check_build(rc, "automaton build", max_states, max_bytes)
        result = []
        for i in range(n_roots):
            d = out[i]
            out[i] = NULL
            result.append(_wrap_compact(d))
        return result
    finally:
        if out != NULL:
            if fr != NULL:
                for i in range(n_roots):
                    cm_dfa_out_free(out[i])
        free(out)
        free(fr)


cdef object _dfa_handle(cm_dfa_out *d):
    """A handle owning d (labels already numbered 0..n-1)."""
    cdef DfaHandle h = DfaHandle.__new__(DfaHandle)
    h.ptr = d
    h.n_states = d.n_states
    return h


cdef int _frag(object pair, cm_ir_frag *f, uint32_t n_names, list keep) except -1:
    """(DfaHandle, label values of its labels) -> f, checked; keep holds the buffer.  The
    values as the compiler makes them, an ``array('I')`` (never resized after it is made),
    are read in place: a typed memoryview a rule costs ~1-3 us with the caches cold."""
    cdef DfaHandle h
    cdef const uint32_t[::1] view
    cdef const uint32_t *labs
    cdef size_t e, n
    h, got = pair
    if h is None or h.ptr == NULL:
        raise ValueError("empty DFA handle")
    if type(got) is array and (<array>got).ob_descr.typecode == c'I' and (<array>got).ob_descr.itemsize == 4:
        n = len(got)
        labs = (<array>got).data.as_uints if n else NULL
        keep.append(got)
    else:
        view = got
        n = view.shape[0]
        labs = _u32(view)
        keep.append(view)
    for e in range(h.ptr.lab_off[h.ptr.n_states]):
        if h.ptr.lab[e] >= n:
            raise ValueError("DFA label out of range")
    for e in range(n):
        if labs[e] >= n_names:
            raise ValueError("label value out of range")
    keep.append(h)
    f.dfa = h.ptr
    f.labels = labs
    return 0


cdef cm_ir_input _ir_input_at(const uint32_t *code, Py_ssize_t code_len, const uint32_t *label,
                              Py_ssize_t n_label) noexcept:
    cdef cm_ir_input inp
    inp.code = code
    inp.code_len = code_len
    inp.label = label
    inp.n_names = <uint32_t>n_label
    inp.refs = NULL
    inp.n_refs = 0
    inp.frags = NULL
    inp.n_frags = 0
    return inp


def compile_components(code, label, list comps, size_t max_states,
                       size_t inline_max_states, size_t max_bytes=0, double deadline=0):
    """The automata of every component in one call (csrc/components.c).  comps, callees
    first: (members [(name, root, inline_cap)], callees [name], right_linear, cached: per
    member (DfaHandle, label values of its labels), or None to build[, expand: built in its
    caller's NFA, csrc/components.c]).  Returns per component None (cached, or expanded in
    its caller) or per member (DfaHandle, label values of its labels 0..n-1).
    An error carries .component: the index of the component that failed.  ``code`` and
    ``label``: uint32 buffers (``const uint32_t[::1]``; an ``array('I')`` read in place)."""
    cdef const uint32_t *code_p
    cdef const uint32_t *label_p
    cdef Py_ssize_t code_len, n_label
    code_held = _in_u32(code, &code_p, &code_len)
    label_held = _in_u32(label, &label_p, &n_label)
    cdef cm_ir_input inp = _ir_input_at(code_p, code_len, label_p, n_label)
    cdef cm_budget budget = cm_budget(max_bytes=max_bytes, used=0, peak=0, deadline=deadline)
    cdef uint32_t n_comps = <uint32_t>len(comps), failed = 0
    cdef size_t n_members = 0, n_callees = 0
    cdef size_t i, k, at = 0, j = 0
    for c in comps:
        n_members += len(c[0])
        n_callees += len(c[1])
    cdef cm_component *cs = <cm_component *>malloc((n_comps + 1) * sizeof(cm_component))
    cdef cm_comp_member *ms = <cm_comp_member *>malloc((n_members + 1) * sizeof(cm_comp_member))
    cdef uint32_t *cl = <uint32_t *>malloc((n_callees + 1) * sizeof(uint32_t))
    cdef cm_ir_frag *given = <cm_ir_frag *>malloc((n_members + 1) * sizeof(cm_ir_frag))
    cdef cm_comp_dfa *out = <cm_comp_dfa *>calloc(n_members + 1, sizeof(cm_comp_dfa))
    cdef int rc
    keep = []
    try:
        if cs == NULL or ms == NULL or cl == NULL or given == NULL or out == NULL:
            raise MemoryError("compile_components: out of memory")
        for k in range(n_comps):
            spec = comps[k]  # indexed, not sliced and unpacked: no tuple made a component
            members, callees, right_linear, cached = spec[0], spec[1], spec[2], spec[3]
            cs[k].members = ms + at
            cs[k].n_members = <uint32_t>len(members)
            cs[k].callees = cl + j
            cs[k].n_callees = <uint32_t>len(callees)
            cs[k].right_linear = 1 if right_linear else 0
            cs[k].cached = NULL
            cs[k].expand = 1 if len(spec) > 4 and spec[4] else 0
            for i in range(cs[k].n_members):
                name, root, cap = members[i]
                ms[at + i].name, ms[at + i].root, ms[at + i].inline_cap = name, root, cap
            for i in range(cs[k].n_callees):
                cl[j + i] = callees[i]
            if cached is not None:
                if len(cached) != len(members):
                    raise ValueError("compile_components: one cached DFA per member")
                for i, pair in enumerate(cached):
                    _frag(pair, &given[at + i], inp.n_names, keep)
                cs[k].cached = given + at
            at += len(members)
            j += len(callees)
        with nogil:
            rc = cm_compile_components(&inp, cs, n_comps, max_states, inline_max_states, &budget, out, &failed)
        if rc:
            err = _error(rc, "automaton build", _COMPILE_TIME,
                         {"max_states": max_states, "max_dfa_states": max_states,
                          "max_compile_mb": max_bytes >> 20})
            err.component = failed
            raise err
        result = []
        at = 0
        for k in range(n_comps):
            built = None
            if cs[k].cached == NULL and (cs[k].expand == 0 or out[at].dfa != NULL):
                built = []
                for i in range(at, at + cs[k].n_members):
                    built.append((_dfa_handle(out[i].dfa), [out[i].labels[j] for j in range(out[i].n_labels)]))
                    out[i].dfa = NULL
            result.append(built)
            at += cs[k].n_members
        return result
    finally:
        if out != NULL:
            for i in range(n_members):
                cm_comp_dfa_free(&out[i])
        free(cs)
        free(ms)
        free(cl)
        free(given)
        free(out)


cdef class FlatDoor:
    """What ``compile_finish`` returns with ``weights``: its ten items as a read-only sequence
    (index, slice, iterate, ``len``), the flat rules' own tables (items 2, 3, 4, 6, 7 and 8:
    rule_trans, byte_class, trans, lab_off, lab_name, lab_to) made when first read.  The
    compiler reads only items 0, 1, 5 and 9 (``tables._tables_raw``); the others serve a
    ``Flat`` opened by the tests or the Python fallback, and copied every compile they cost
    as much as the tables kept (tens of kB a JSON schema, half a MB past p90, each a fresh
    allocation).  Holds the C flat rules until it goes."""
    cdef cm_flat_rules *f
    cdef list items

    def __cinit__(self):
        self.f = NULL

    def __dealloc__(self):
        cm_flat_rules_free(self.f)

    def __len__(self):
        return 0 if self.items is None else len(self.items)

    def __getitem__(self, key):
        cdef Py_ssize_t n = len(self), i
        if isinstance(key, slice):
            return tuple([self[j] for j in range(*key.indices(n))])
        i = key
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("tuple index out of range")
        x = self.items[i]
        if x is None:
            x = self.items[i] = self._make(i)
        return x

    def __iter__(self):
        return iter(self[:])

    cdef object _make(self, Py_ssize_t i):
        cdef cm_flat_rules *f = self.f
        if f == NULL:
            raise ValueError("FlatDoor: made by compile_finish only")
        cdef uint32_t n = f.n_rules, ns = f.n_states
        cdef size_t nl = f.lab_off[ns]
        if i == 2:
            return (<char *>f.rule_trans)[:4 * (n + 1)]
        if i == 3:
            return (<char *>f.byte_class)[:256 * n]
        if i == 4:
            return (<char *>f.trans)[:4 * f.rule_trans[n]] if f.rule_trans[n] else b""
        if i == 6:
            return (<char *>f.lab_off)[:4 * (ns + 1)]
        if i == 7:
            return (<char *>f.lab_name)[:4 * nl] if nl else b""
        if i == 8:
            return (<char *>f.lab_to)[:4 * nl] if nl else b""
        raise AssertionError("FlatDoor: an item made at once is missing")


def compile_finish(label, list rules, is_token, uint32_t start,
                   size_t max_bytes=0, double deadline=0, weights=None):
    """Runtime rules, productive rules, trimming and the flat tables in one call
    (csrc/flatten.c).  rules[name index]: (DfaHandle, label values of its labels) or None.
    Returns None when the start rule derives no finite string, else (rule names as name
    indices, then as bytes: rule_state uint32 [n_rules + 1], rule_trans uint32 [n_rules + 1],
    byte_class uint8 [n_rules * 256], trans int32, accepting uint8 [n_states], lab_off
    uint32 [n_states + 1], lab_name uint32, lab_to uint32).  With ``weights`` (the byte-class
    hash weights, int64) a tenth item, the tables that follow from those (csrc/tables.c):
    (n_classes, byte_class [256], trans int32 [n_states * n_classes], nullable uint8 [n_rules],
    follow uint32 [n_rules * 8], ref_off, ref_rule, ref_target, tok_off, tok_set, tok_target
    (uint32), token sets' name indices, then the grammar's facts of the rows: state bytes uint32
    [n_states * 8] and rule blocks uint8 [n_rules] in one bytes object, or None (csrc/tables.c,
    for cm_grammar_new_derived)); n_classes 0: no byte classes, the caller makes them.
    ``label``, ``is_token``, ``weights``: ``const uint32_t[::1]``, ``const uint8_t[::1]`` and
    ``const int64_t[::1]`` buffers (the compiler's ``array('I')``, ``bytearray`` and numpy
    array read in place)."""
    cdef const uint32_t *label_p
    cdef const uint8_t *tok_p
    cdef const int64_t *w_p
    cdef Py_ssize_t n_label, n_tok, n_w
    label_held = _in_u32(label, &label_p, &n_label)
    tok_held = _in_u8(is_token, &tok_p, &n_tok)
    w_held = _in_i64(weights, &w_p, &n_w)
    cdef cm_ir_input inp = _ir_input_at(NULL, 0, label_p, n_label)
    cdef cm_flat_derived *d = NULL
    cdef uint8_t *facts_p
    cdef int32_t *out
    cdef size_t k, nr, nt
    cdef cm_budget budget = cm_budget(max_bytes=max_bytes, used=0, peak=0, deadline=deadline)
    cdef uint32_t n_names = <uint32_t>n_label, i, n, ns
    cdef cm_ir_frag *fr = NULL
    cdef cm_flat_rules *f = NULL
    cdef FlatDoor door
    cdef int rc
    if len(rules) != n_names or <uint32_t>n_tok != n_names or start >= n_names:
        raise ValueError("compile_finish: bad arguments")
    keep = []
    fr = <cm_ir_frag *>calloc(n_names + 1, sizeof(cm_ir_frag))
    try:
        if fr == NULL:
            raise MemoryError("compile_finish: out of memory")
        for i in range(n_names):
            if rules[i] is not None:
                _frag(rules[i], &fr[i], n_names, keep)
        with nogil:
            rc = cm_compile_finish(&inp, fr, tok_p, start, &budget, &f)
        _check_build(rc, "compile_finish", 0, max_bytes)
        if f.n_rules == 0:
            return None
        n, ns = f.n_rules, f.n_states
        nl = f.lab_off[ns]
        if weights is None:
            return (
                [f.rule_name[i] for i in range(n)],
                bytes((<char *>f.rule_state)[:4 * (n + 1)]),
                bytes((<char *>f.rule_trans)[:4 * (n + 1)]),
                bytes((<char *>f.byte_class)[:256 * n]),
                bytes((<char *>f.trans)[:4 * f.rule_trans[n]]) if f.rule_trans[n] else b"",
                bytes((<char *>f.accepting)[:ns]) if ns else b"",
                bytes((<char *>f.lab_off)[:4 * (ns + 1)]),
                bytes((<char *>f.lab_name)[:4 * nl]) if nl else b"",
                bytes((<char *>f.lab_to)[:4 * nl]) if nl else b"",
            )
        # the facts for the grammar (cm_facts_size), written in place in their bytes object
        given = PyBytes_FromStringAndSize(NULL, cm_facts_size(ns, n))
        facts_p = <uint8_t *>PyBytes_AS_STRING(given)
        with nogil:
            rc = cm_flat_derive_facts(f, tok_p, n_names, w_p, <size_t>n_w, facts_p, &d)
        _check_build(rc, "compile_finish", 0, max_bytes)
        k = d.n_classes
        nr, nt = d.ref_off[ns], d.tok_off[ns]
        if not k or d.facts == NULL:  # not written: the grammar walks the rows
            given = None
        trans = b""
        if k:  # written in place in its bytes object (csrc/tables.c), not made and copied
            trans = PyBytes_FromStringAndSize(NULL, 4 * ns * k)
            out = <int32_t *>PyBytes_AS_STRING(trans)
            with nogil:
                rc = cm_flat_derive_trans(f, d, out)
            _check_build(rc, "compile_finish", 0, max_bytes)
        door = FlatDoor()
        door.items = [
            [f.rule_name[i] for i in range(n)],
            bytes((<char *>f.rule_state)[:4 * (n + 1)]),
            None,
            None,
            None,
            bytes((<char *>f.accepting)[:ns]) if ns else b"",
            None,
            None,
            None,
            (
            k,
            bytes((<char *>d.byte_class)[:256]),
            trans,
            bytes((<char *>d.nullable)[:n]),
            bytes((<char *>d.follow)[:32 * n]),
            bytes((<char *>d.ref_off)[:4 * (ns + 1)]),
            bytes((<char *>d.ref_rule)[:4 * nr]) if nr else b"",
            bytes((<char *>d.ref_target)[:4 * nr]) if nr else b"",
            bytes((<char *>d.tok_off)[:4 * (ns + 1)]),
            bytes((<char *>d.tok_set)[:4 * nt]) if nt else b"",
            bytes((<char *>d.tok_target)[:4 * nt]) if nt else b"",
            [d.set_name[i] for i in range(d.n_sets)],
            given,
            ),
        ]
        door.f = f  # the door frees it
        f = NULL
        return door
    finally:
        cm_flat_derived_free(d)
        cm_flat_rules_free(f)
        free(fr)


_PHASES = ("thompson", "subsets", "minimize", "words", "productive", "trim", "flatten", "derive", "grammar", "direct")


def compile_stats_enable(bint on):
    """Turn the C core's compile-time counters on or off for the process (csrc/cstats.c;
    also on when the environment has CFGMASK_COMPILE_STATS=1 at import)."""
    cm_compile_stats_enable(1 if on else 0)


def direct_build_enable(bint on):
    """Build rules straight to their DFA where they can be (csrc/direct.c, the default) or, off,
    every rule through Thompson's NFA and subset construction: the reference the tests compare
    against.  Process-wide; clear the caches after a change (cached automata were built either way)."""
    cm_direct_build_enable(1 if on else 0)


def fsm_lean_enable(bint on):
    """Subset construction's lean bookkeeping (csrc/fsm.c, the default): a DFA state's acceptance
    found by bisecting its sorted set of NFA states, its set table sized from the NFA at the start;
    or, off, every set scanned and the table grown from 64: the reference the tests compare against.
    Process-wide; clear the caches after a change."""
    cm_fsm_lean_enable(1 if on else 0)


def fsm_lean_builds():
    """Subset constructions run with the lean switch on so far in this process (for the tests)."""
    return cm_fsm_lean_builds()


def direct_loops_enable(bint on):
    """Let the direct build (csrc/direct.c) take bodies with a count and unbounded repetitions too
    (no cyclic copied DFA), minimized after, while it makes at most 1.5x their NFA's states (the
    default), or, off, leave them to Thompson's path: the reference the tests compare against.
    Process-wide; clear the caches after a change."""
    cm_direct_loops_enable(1 if on else 0)


def direct_fresh_copy_enable(bint on):
    """Copy a bounded count's positions in the direct build (csrc/direct.c) without looking up each
    copied state where the position after it is a state no other refers to (each copy is new by
    construction: the default), or, off, look up every copy: the reference the tests compare
    against.  Process-wide; clear the caches after a change."""
    cm_direct_fresh_copy_enable(1 if on else 0)


def direct_fresh_copies():
    """How many count positions the direct build copied without lookups so far in this process."""
    return cm_direct_fresh_copies()


def dfa_runs_enable(bint on):
    """Copy an inlined callee's DFA into its callers' NFAs from its rows kept as runs on it at its
    first copy (csrc/thompson.c, tb_embed; the default), or, off, from a walk of its rows at each
    copy: the reference the tests compare against.  Process-wide; the NFAs are the same."""
    cm_dfa_runs_enable(1 if on else 0)


def derive_row_bits_enable(bint on):
    """Walk each keyed row of up to 64 classes in ``compile_finish``'s derived tables as bit masks
    of its edges and run starts (csrc/tables.c, ROW_BITS; the default; the table by class then
    walks the same bits) or, off, run by run: the reference the tests compare against.
    Process-wide; the tables are the same."""
    cm_derive_row_bits_enable(1 if on else 0)


def derive_class_spans_enable(bint on):
    """Read a rule's byte classes as spans where they are contiguous (every rule built from a DFA)
    in ``compile_finish``'s derived tables: the prefix unions of its classes' bytes and the column
    hash sums a span at a time, and the hash collision check's joins of classes a run of bytes at
    a time (csrc/tables.c, CLASS_SPANS; the default) or, off, a byte at a time: the reference the
    tests compare against.  Process-wide; the tables are the same."""
    cm_derive_class_spans_enable(1 if on else 0)


def derive_trans_gather_enable(bint on):
    """Make ``compile_finish``'s table by global class a rule's rows at a time as AVX2 gathers, 8
    classes a gather, where the CPU has them and every class of the rule has bytes (csrc/tables.c,
    TRANS_GATHER) or, off (the default: fewer instructions, but slower on a CPU whose gathers are
    microcoded, as this AMD EPYC's), a -1 fill of each row and each run's classes stored: the
    reference the tests compare against.  Process-wide; the table and the errors are the same."""
    cm_derive_trans_gather_enable(1 if on else 0)


def derive_trans_gather_rows():
    """How many rows ``compile_finish``'s table by class made by gathers so far in this process
    (a test's count; not atomic)."""
    return cm_derive_trans_gather_rows()


def dfa_walk_starts_enable(bint on):
    """Walk a finished DFA's rows of at most 64 classes from their run starts (one pass a row)
    where a walk pushes each run's target -- ``cm_dfa_can_accept``'s full walks, the copies of a
    DFA into a caller's NFA (csrc/dfa.c, thompson.c; WALK_STARTS, the default) -- or, off, with
    a scan at every run: the reference the tests compare against.  Process-wide; the same runs in
    the same order."""
    cm_dfa_walk_starts_enable(1 if on else 0)


def dfa_walk_starts_rows():
    """How many rows ``cm_dfa_can_accept``'s walks read from their run starts so far in this
    process (for the tests)."""
    return cm_dfa_walk_starts_rows()


def dfa_runs_reused():
    """How many copies of a DFA into a caller's NFA took its runs made for an earlier copy, so far
    in this process (for the tests)."""
    return cm_dfa_runs_reused()


def chain_memo_enable(bint on):
    """Take a counted chain's analysis from the vocabulary's memo of a chain with the same rows
    (csrc/chains.c, the default) or, off, analyse every chain: the reference the tests compare
    against.  Process-wide."""
    cm_chain_memo_enable(1 if on else 0)


def chain_shapes_enable(bint on):
    """Check a chain's rows against a memo's by each memo row's shape (csrc/chains.c, the default)
    or, off, pair by pair: the reference the tests compare against.  Process-wide."""
    cm_chain_shapes_enable(1 if on else 0)


def chain_shaped_rows():
    """How many rows of chains were checked against memos by their shape so far in this process
    (for the tests)."""
    return cm_chain_shaped_rows()


def chain_row_gather_enable(bint on):
    """Compare a shaped row's other classes with their slots' first pairs' 8 at a time by AVX2
    gathers where the CPU has them (csrc/chains.c) or, off (the default: on the AMD EPYC we
    measure on, a gather is microcoded and the chain starts ran 9-10 % slower in wall time
    although their instructions fell), one by one.  Process-wide."""
    cm_chain_row_gather_enable(1 if on else 0)


def chain_gathered_rows():
    """How many shaped rows had their other classes gathered so far in this process (for the
    tests; 0 on a CPU without AVX2)."""
    return cm_chain_gathered_rows()


def chain_row_permute_enable(bint on):
    """Compare a shaped row of at most 8 slots class by class with AVX2 permutes, each class's
    slot picking the slot's target out of the first pairs' (csrc/chains.c, on: the default), or
    its other classes one by one (off: the reference the tests compare against).  Taken where
    the CPU has AVX2, each class of ours is in one class pair and the gathers are off.
    Process-wide."""
    cm_chain_row_permute_enable(1 if on else 0)


def chain_row_permute16_enable(bint on):
    """Permute a shaped row of 9 to 16 slots too, each class's slot picking its target out of
    the first 8 first pairs' or the next 8 (csrc/chains.c, on: the default), or compare its other
    classes one by one (off: such rows as before, the reference the tests compare against).
    Only where chain_row_permute_enable's permutes are taken.  Process-wide."""
    cm_chain_row_permute16_enable(1 if on else 0)


def chain_permuted_rows():
    """How many shaped rows were compared with permutes so far in this process (for the tests; 0
    on a CPU without AVX2)."""
    return cm_chain_permuted_rows()


def chain_rows_fused_enable(bint on):
    """Read a whole chain's permuted rows against a memo in one loop (csrc/chains.c,
    ``memo_rows_permuted``: on, the default) or through the row check a row at a time (off: the
    reference the tests compare against).  Process-wide."""
    cm_chain_rows_fused_enable(1 if on else 0)


def chain_memo_out_early_enable(bint on):
    """Refuse a memo at the first out state whose flags differ (csrc/chains.c ``memo_match``: on,
    the default), or only after every row (off: the reference the tests compare against).
    Process-wide."""
    cm_chain_memo_out_early_enable(1 if on else 0)


def chain_memo_named():
    """The locals and out states whole-chain memo checks named so far in this process, summed
    (for the tests: how far the checks read)."""
    return cm_chain_memo_named()


def chain_kept_batch_enable(bint on):
    """Filter a chain position's acc points not filtered yet in one call (csrc/chains.c, the
    default) or, off, each in a call of its own: the reference the tests compare against.
    Process-wide."""
    cm_chain_kept_batch_enable(1 if on else 0)


def chain_kept_batched():
    """How many acc points of chains were filtered in a batch so far in this process (for the
    tests)."""
    return cm_chain_kept_batched()


def chain_next_one_enable(bint on):
    """Take a chain's only candidate for its next position without counting the bytes that
    lead to it (csrc/chains.c, the default) or, off, count them always: the reference the
    tests compare against.  Process-wide."""
    cm_chain_next_one_enable(1 if on else 0)


def chain_next_one_taken():
    """How many chains' next positions were taken without counting their bytes so far in this
    process (for the tests)."""
    return cm_chain_next_one_taken()


def chain_exit_memo_enable(bint on):
    """Replay a chain position's exits from their walks kept by (rule, exit, target), with the
    tokens the filter kept of them (csrc/chains.c, the default), or, off, walk and filter each
    exit at every position: the reference the tests compare against.  Process-wide."""
    cm_chain_exit_memo_enable(1 if on else 0)


def chain_exit_memo_hits():
    """How many chain exits were replayed from their kept walks so far in this process (for the
    tests)."""
    return cm_chain_exit_memo_hits()


def chain_past_memo_enable(bint on):
    """Copy the entry walk of a chain position past every need from an earlier position's of the
    same walk, rule and accepting labels (csrc/chains.c, the default) or, off, assemble it at
    each position: the reference the tests compare against.  Process-wide."""
    cm_chain_past_memo_enable(1 if on else 0)


def chain_past_hits():
    """How many chain positions took a copied walk so far in this process (for the tests)."""
    return cm_chain_past_hits()


def chain_bytes_memo_enable(bint on):
    """Assemble a block boundary's byte walk from a kept string start's chain instance where
    the boundary reads its bytes into the start's states (csrc/chains.c, the default) or, off,
    analyse its chain again: the reference the tests compare against.  Process-wide."""
    cm_chain_bytes_memo_enable(1 if on else 0)


def chain_bytes_memo_hits():
    """How many byte walks were assembled from a kept start's instance so far in this process
    (for the tests)."""
    return cm_chain_bytes_memo_hits()


def chain_key_hash_memo_enable(bint on):
    """Look a chain's shared walk up by the key hash its memo kept, where a memo served the form
    (csrc/chains.c, the default) or, off, hash the key at each lookup: the reference the tests
    compare against.  Process-wide."""
    cm_chain_key_hash_memo_enable(1 if on else 0)


def chain_key_hash_hits():
    """How many shared-walk lookups took a memo's kept key hash so far in this process (for the
    tests)."""
    return cm_chain_key_hash_hits()


def chain_key_hash_misses():
    """With the kept hashes off: how many lookups so far found a form's kept key hash unequal to
    its key's own in this process (for the tests, which require none)."""
    return cm_chain_key_hash_misses()


def chain_wrap_direct_enable(bint on):
    """Split a wrapping block position's uncertain tokens as its entry is assembled from the
    chain's bitsets (csrc/chains.c, the default) or, off, afterwards a token at a time: the
    reference the tests compare against.  Process-wide; clear the caches after a change."""
    cm_chain_wrap_direct_enable(1 if on else 0)


def chain_wrap_direct_hits():
    """How many block positions' entries were split as they were assembled so far in this
    process (for the tests)."""
    return cm_chain_wrap_direct_hits()


def chain_wrap_deep_enable(bint on):
    """Keep a wrapping block position's rests that stay inside as many blocks after the next
    as the rule's upward chart reads in a row without asking the filter (csrc/chains.c,
    wrap_sure; the default) or, off, ask about each: the reference the tests compare against.
    Process-wide; clear the caches after a change."""
    cm_chain_wrap_deep_enable(1 if on else 0)


def chain_wrap_deep_hits():
    """How many rests were kept without a question so far in this process (for the tests)."""
    return cm_chain_wrap_deep_hits()


def chain_split_dead_enable(bint on):
    """Take the rests that no state of the block's region reads on out of the split of a
    wrapping block position too wide for the filter (csrc/chains.c, g_split_dead; the default),
    its uncertain tokens unchanged, or, off, keep them for the mask to check: the reference the
    tests compare against.  Process-wide; clear the caches after a change."""
    cm_chain_split_dead_enable(1 if on else 0)


def chain_split_dead_dropped():
    """How many rests were taken out of such splits so far in this process (for the tests)."""
    return cm_chain_split_dead_dropped()


def chain_wrap_ranges_mode(int mode):
    """How a ranged block position's wrap split is made (csrc/chains.c, gather_ranges): 0 a
    token at a time (the reference the tests compare against), 1 from the walk's lists where
    that pays (the default), 2 from the lists wherever they apply, 3 as 2 and each split
    compared with the token-at-a-time one (a difference is an error).  Process-wide; clear the
    caches after a change."""
    if mode < 0 or mode > 3:
        raise ValueError("mode must be 0-3")
    cm_chain_wrap_ranges_mode(mode)


def chain_wrap_ranges_hits():
    """How many block positions' splits were made from the walk's lists so far in this process
    (for the tests)."""
    return cm_chain_wrap_ranges_hits()


def chain_memo_hits():
    """How many chain analyses were taken from memos so far in this process (for the tests)."""
    return cm_chain_memo_hits()


def name_stop_hits():
    """How many of the upward filter's questions the name stops answered so far in this
    process (for the tests)."""
    return cm_walk_name_stop_hits()


def filter_run_hits():
    """How many of the upward filter's questions the runs of one byte it kept answered so far
    in this process (for the tests)."""
    return cm_walk_filter_run_hits()


def run_aheads_by_steps():
    """How many runs of one byte the upward filter read on to twice their length because one
    scan of the run took Strategy.run_ahead_steps chart steps, so far in this process (for the
    tests)."""
    return cm_walk_run_aheads_by_steps()


def walk_drop_dead_enable(bint on):
    """Drop a wrapping block position's rests that no state of the block's region reads on
    (the first byte the block does not read) before its filter asks them (on by default; off
    only for tests)."""
    cm_walk_drop_dead_enable(1 if on else 0)


def walk_dead_dropped():
    """How many wrapping block rests were dropped so without a question, so far in this process
    (for the tests)."""
    return cm_walk_dead_dropped()


def filter_pair_hits():
    """How many of the upward filter's questions its pair stops (the bytes a rule's upward chart
    reads second after each first byte) answered so far in this process (for the tests)."""
    return cm_walk_filter_pair_hits()


def filter_triples_enable(bint on):
    """Keep, after a first byte whose second bytes are few (a keyword's), the bytes a rule's upward
    chart reads third after each such pair, and drop a rest whose third byte is not among them
    without asking it (csrc/walk.c, ``pair_third``; the default) or, off, ask it: the reference the
    tests compare against.  Process-wide."""
    cm_walk_filter_triples_enable(1 if on else 0)


def filter_triple_hits():
    """How many of the upward filter's questions its triple stops answered so far in this process
    (for the tests)."""
    return cm_walk_filter_triple_hits()


def filter_pairs_early_enable(bint on):
    """Make a rule's pair stops at the first rest of a filter of at least ``filter_pairs`` uncertain
    tokens (csrc/walk.c; the default) or, off, only once the rule's filters have met
    ``filter_pairs`` rests: the reference the tests compare against.  Process-wide."""
    cm_walk_filter_pairs_early_enable(1 if on else 0)


def filter_pairs_early():
    """How many filters made their rule's pair stops early so far in this process (for the
    tests)."""
    return cm_walk_filter_pairs_early()


def filter_skip_enable(bint on):
    """Skip, unread, the later uncertain tokens of a trie subtree whose first token the upward
    filter dropped for bytes of that subtree's prefix alone (csrc/walk.c, the default) or, off,
    read each token on its own: the reference the tests compare against.  Process-wide."""
    cm_walk_filter_skip_enable(1 if on else 0)


def filter_skipped():
    """How many uncertain tokens the upward filter skipped with their subtree so far in this
    process (for the tests)."""
    return cm_walk_filter_skipped()


def filter_stop_skip_enable(bint on):
    """Let a token whose exits the name stops drop (decided by the name run and the byte or two
    that end it) skip its prefix's subtree as ``filter_skip_enable``'s do (csrc/walk.c, the
    default) or, off, end the skip at a name stop: the reference the tests compare against.
    Process-wide."""
    cm_walk_filter_stop_skip_enable(1 if on else 0)


def filter_stop_skipped():
    """How many uncertain tokens the upward filter skipped after a name stop so far in this
    process (for the tests)."""
    return cm_walk_filter_stop_skipped()


def verdict_share_enable(bint on):
    """Let a rule whose upward chart's first set holds the same items that read bytes, tokens
    or call as an earlier rule's read and keep that rule's upward verdicts (csrc/walk.c,
    ``verdict_rule``; the default) or, off, each rule its own: the reference the tests compare
    against.  Process-wide."""
    cm_walk_verdict_share_enable(1 if on else 0)


def verdict_shared():
    """How many rules the upward filter found alike an earlier rule so far in this process (for
    the tests)."""
    return cm_walk_verdict_shared()


def kern_share_enable(bint on):
    """Key the upward filter's verdict on a rest by the kernel its first byte makes from the
    rule's upward first set, where only items of origin CM_OUTER read that byte, so rules whose
    kernels agree share verdicts and an empty kernel drops the rest (csrc/walk.c, ``kern_key``;
    the default) or, off, by the rule: the reference the tests compare against.  Process-wide."""
    cm_walk_kern_share_enable(1 if on else 0)


def kern_counts():
    """(rests answered from a kernel's verdicts, rests dropped by an empty kernel) so far in this
    process (for the tests)."""
    cdef size_t shared = 0, dead = 0
    cm_walk_kern_counts(&shared, &dead)
    return shared, dead


def listed_reuse_enable(bint on):
    """Let a composed entry's listed walk take the upward filter's item chart, reset to the
    walk's first set (csrc/walk.c, the default) or, off, open a chart of its own each walk: the
    reference the tests compare against.  Process-wide."""
    cm_walk_listed_reuse_enable(1 if on else 0)


def listed_reused():
    """How many listed walks took the filter's item chart so far in this process (for the
    tests)."""
    return cm_walk_listed_reused()


def item_keep_enable(bint on):
    """Let the upward filter of a composed entry's uncertain tokens take the item chart as the
    entry's listed walk left it, truncated to their shared first set (csrc/walk.c ``item_chart``;
    the default), or, off, make that set again: the reference the tests compare against.
    Process-wide; clear the caches after a change.  The entries are the same."""
    cm_walk_item_keep_enable(1 if on else 0)


def item_kept():
    """How many filters took the item chart so in this process (for the tests)."""
    return cm_walk_item_kept()


def filter_class_prefix_enable(bint on):
    """Let the upward filter's charts keep the sets of the token before for the common prefix of
    byte classes (csrc/walk.c, the default; only where a chart reads bytes through their class
    alone) or, off, of bytes only: the reference the tests compare against.  Process-wide."""
    cm_walk_filter_class_prefix_enable(1 if on else 0)


def filter_class_shared():
    """How many bytes the upward filter's charts took from the token before by class, past the
    common prefix of bytes, so far in this process (for the tests)."""
    return cm_walk_filter_class_shared()


def follow_memo_counts():
    """The upward filter's lazy verdict memo so far in this process (for the tests): (verdicts
    held unhashed by a rule's first filter, those hashed into the memo when a second filter of
    the rule came, questions the memo answered)."""
    return (cm_walk_follow_lazy_held(), cm_walk_follow_lazy_inserts(), cm_walk_follow_hits())


def listed_unread():
    """How many tokens a composed entry's check let die on a byte no item of their chart set
    reads, without a scan, so far in this process (csrc/walk.c, cm_walk_listed_at; for the
    tests)."""
    return cm_walk_listed_unread()


def listed_last_viable_enable(bint on):
    """Let a listed walk only check the last byte of each text (cm_chart_viable) instead of
    building its set (csrc/walk.c, the default; a longer text scans it again) or, off, scan every
    byte: the reference the tests compare against.  Process-wide."""
    cm_walk_listed_last_viable_enable(1 if on else 0)


def listed_last_checked():
    """How many last bytes listed walks only checked so far in this process (for the tests)."""
    return cm_walk_listed_last_checked()


def walk_loop_stop_enable(bint on):
    """Loop stops of chart walks on (the default) or off: the trie subtree below a growing chart
    set that holds an item, owing no debt, whose state goes to itself on the next byte is
    settled from that item (csrc/walk.c); off, every byte is scanned.  The entries are the
    same; clear the caches around a switch (for the tests)."""
    cm_walk_loop_stop_enable(1 if on else 0)


def walk_loop_stops():
    """How many trie subtrees chart walks settled by a loop stop so far in this process
    (csrc/walk.c, cm_walk_chart; for the tests)."""
    return cm_walk_loop_stops()


def walk_loop_reduced():
    """How many entries of loop stops' subtrees a reduced chart (the loop item's closure alone,
    past the byte that leaves the loop) accepted so far in this process (for the tests)."""
    return cm_walk_loop_reduced()


def mask_split_late_enable(int mode):
    """1 (the default): a mask with few but long uncertain candidates decides the rest of them by
    the closing-verdict split once the chart has run a few dozen steps on them (csrc/mask.c);
    0: every such candidate through the chart, the reference the tests compare against; 2: the
    split made at every such mask's first check (for the tests).  True/False read as 1/0.
    Process-wide."""
    cm_mask_split_late_enable(mode)


def mask_split_late_hits():
    """How many masks took the closing-verdict split late so far in this process (for the
    tests)."""
    return cm_mask_split_late_hits()


def mask_split_resume_enable(bint on):
    """On (the default): the closing-verdict split reads each uncertain candidate from where the
    candidate before it (trie order) left its automata, asking only the rest verdicts of the
    shared bytes again (csrc/mask.c, check_split); off: each from the split's states, the
    reference the tests compare against.  Process-wide."""
    cm_mask_split_resume_enable(on)


def mask_split_resumed():
    """How many bytes' transitions the split's resumes skipped so far in this process (for the
    tests)."""
    return cm_mask_split_resumed()


def stack_verdict_hits():
    """How many uncertain tokens' verdicts masks took from their grammar's stack verdicts
    (csrc/stackmemo.c) so far in this process (for the tests)."""
    return cm_stack_verdict_hits()


def entry_spare_takes():
    """How many entry builds took the bitset an earlier build left zero, not a fresh one,
    so far in this process (for the tests)."""
    return cm_entry_spare_takes()


def stack_verdict_gate_closes():
    """How many times a grammar's stack verdicts closed their hit-rate gate (too few hits for the
    verdicts stored; csrc/stackmemo.c) so far in this process (for the tests)."""
    return cm_stack_verdict_gate_closes()


def stack_verdict_gate_force(int mode):
    """For the tests: 0 the gate as measured, 1 always closed, 2 closing on any window of 64
    verdicts stored with fewer hits than verdicts, for 4 masks at first (csrc/stackmemo.c)."""
    cm_stack_verdict_gate_force(mode)


def chain_bulk_takes():
    """How many counted chains' walks took their loop bytes' entries at once from the
    vocabulary's byte features so far in this process (for the tests)."""
    return cm_chain_bulk_takes()


def chain_bulk_by_len_enable(bint on):
    """Whether a counted chain's walk lists the entries it takes at once by need, from the
    vocabulary's entries of each first byte by length (default on), or copies them in trie
    order for its sort of every id (off: the tests' reference).  Process-wide."""
    cm_chain_bulk_by_len_enable(1 if on else 0)


def chain_bulk_listed():
    """How many counted chains' walks listed their bulk entries by length so far (for the tests)."""
    return cm_chain_bulk_listed()


def chain_class_ids_enable(bint on):
    """Whether a counted chain's listing by length copies its runs from the vocabulary's class
    table where the vocabulary holds one for the chain's bytes (default on), or filters the
    first bytes' entries one by one (off: the tests' reference).  Process-wide."""
    cm_chain_class_ids_enable(1 if on else 0)


def chain_class_ids_taken():
    """How many counted chains' listings copied the vocabulary's class table so far (for the tests)."""
    return cm_chain_class_ids_taken()


def flat_plain_steps():
    """How many flat walks' transitions were made from the automaton's transitions, without a
    chart, so far in this process (csrc/flat.c, flat_step_plain; for the tests)."""
    return cm_flat_plain_steps()


def flat_plain_proofs():
    """How many flat walks' liveness proofs (a name's, a plain string's) ran over the automaton's
    states, without a transition made, so far in this process (csrc/flat.c, plain_closure_live;
    for the tests)."""
    return cm_flat_plain_proofs()


def flat_plain_sets_enable(bint on):
    """Make a flat walk's transition from the automaton's transitions, without a chart, also for
    a configuration of several sets whose last set's items are all older than it (an object's key
    string, a ws loop: csrc/flat.c, flat_step_plain_sets; on by default; off, the chart's step).
    Process-wide; the entries are the same either way."""
    cm_flat_plain_sets_enable(1 if on else 0)


def flat_plain_sets_steps():
    """How many transitions that step made so far in this process (for the tests)."""
    return cm_flat_plain_sets_steps()


def flat_run_reads_enable(bint on):
    """Let a flat walk's run mark a transition not yet computed dead where no item of the
    configuration's last set reads the byte, and go on past its subtree, instead of stopping
    for the step (csrc/flat.c, flat_run_g; on by default; off, the stop).  Process-wide; the
    entries are the same either way."""
    cm_flat_run_reads_enable(1 if on else 0)


def flat_run_reads_dead():
    """How many transitions the run marked dead so far in this process (for the tests)."""
    return cm_flat_run_reads_dead()


def flat_sets_cap(unsigned int n):
    """The most sets of a flat configuration's chart suffix (csrc/flat.c, flat_suffix; 16 by
    default, 0: none but the items' cap): a deeper configuration is walked on with a chart instead
    of interned, as one past the items' cap is.  Process-wide; clear the caches after a change.
    The entries are the same."""
    cm_flat_sets_cap(n)


def flat_sets_capped():
    """How many configurations that cap left to a chart so far in this process (for the tests)."""
    return cm_flat_sets_capped()


def flat_names_memo_enable(bint on):
    """Keep each flat configuration's name proof (whether every name entry after a first byte
    is accepted from it) instead of proving it again at each walk that meets it (csrc/flat.c,
    flat_names_ok; on by default; the entries are the same either way)."""
    cm_flat_names_memo_enable(1 if on else 0)


def flat_names_memo_hits():
    """How many name proofs were read back from that memo so far in this process (for the tests)."""
    return cm_flat_names_memo_hits()


def flat_class_bulk_enable(int mode):
    """A whole walk from a count of a class near its end (an anchored ``[0-9A-Za-z]{8}``'s
    positions) takes the tokens made of the class only from a table of them by length, made
    once a class and vocabulary (its grammars share it), and walks the others (csrc/flat.c, class_bulk): 1 where the
    class's first bytes open enough entries (the default), 2 wherever it applies (small
    vocabularies), 0 never (every entry walked: the reference).  Process-wide."""
    cm_flat_class_bulk_enable(mode)


def flat_class_bulk_walks():
    """How many whole walks took a class's tokens by length so far in this process (for the tests)."""
    return cm_flat_class_bulk_walks()


def flat_class_tables():
    """How many class tables (flat_class_bulk_enable's) were made so far in this process: one a
    class and vocabulary, whatever the grammars (for the tests)."""
    return cm_flat_class_tables()


def promote_enable(bint on):
    """Take an uncertain token as accepted where every return state of the item's rule reads its
    rest on (or leaves its own rule where the rest is read on below, recursively; csrc/promote.c;
    the default), or, off, leave it to the run-time check: the reference the tests compare
    against.  Process-wide; clear the caches after a change.  The masks are the same."""
    cm_promote_enable(1 if on else 0)


def promoted():
    """Uncertain tokens taken as accepted that way, in this process (for the tests)."""
    return cm_promoted()


def promote_uses(unsigned n):
    """The use of a state's entry by a mask's gather that promotes it (1-255, default 4: an entry
    read a few times, as most of a JSON Schema's first document's are, is not asked); returns the
    number before.  Process-wide; clear the caches after a change."""
    return cm_promote_uses(n)


def promote_piece(unsigned long long work):
    """The work (the items of the sets its charts make) of a state's first piece of promotion:
    from its `promote_uses`-th use, each use asks the next of its uncertain tokens until k times
    this much is spent at its k-th piece, and the copy is read once every token is asked (0: all
    at once, at that use).  Returns the number before.  Process-wide; clear the caches after a
    change.  The masks and the copy are the same whatever it is."""
    return cm_promote_piece(work)


def tail_alias_enable(bint on):
    """Take the tail part of an expression level that passes a blank's subtree through to its one
    callee as that callee's, its uncertain tokens left to the caller's chart (csrc/compose.c,
    tail_through; the default), or, off, check them at every level: the reference the tests
    compare against.  Process-wide; clear the caches after a change.  The entries are the same."""
    cm_tail_alias_enable(1 if on else 0)


def tail_aliases():
    """How many tail parts were taken as their one callee's so far in this process (for the tests)."""
    return cm_tail_aliases()


def name_edges_direct_enable(bint on):
    """Walk a Lark name run's letter edges into the entry where they are met (csrc/compose.c,
    edge_shared; the default), or, off, keep each letter's walk from the run per (run, letter) as
    the blanks' are: the reference the tests compare against.  Process-wide; clear the caches
    after a change.  The entries are the same."""
    cm_name_edges_direct_enable(1 if on else 0)


def name_edges_direct():
    """How many name-first byte edges were walked directly so far in this process (for the tests)."""
    return cm_name_edges_direct()


def tail_names_enable(bint on):
    """Accept a tail part's name entries (a blank, then a name) at once where the position reads
    every name's first byte into states that stay live on names (csrc/compose.c, own_names; the
    default), or, off, walk them: the reference the tests compare against.  Process-wide; clear
    the caches after a change.  The entries are the same."""
    cm_tail_names_enable(1 if on else 0)


def tail_names_taken():
    """How many times a tail part's name entries were accepted at once so far in this process
    (for the tests)."""
    return cm_tail_names_taken()


def exit_tails_enable(bint on):
    """Walk a loop's or a run's exit into a position before an operand (after an operator and
    its blanks) as that position's byte edges and the walks of the starts its calls stand for,
    their uncertain tokens decided by the position's chart (csrc/compose.c, exit_split; the
    default), or, off, through the position's whole chart: the reference the tests compare
    against.  Process-wide; clear the caches after a change.  The entries are the same."""
    cm_exit_tails_enable(1 if on else 0)


def exit_tails():
    """How many loop or run exits were split so far in this process (for the tests)."""
    return cm_exit_tails()


def compose_self_enable(bint on):
    """Compose the entry of a left-recursive start (a star compiled `R: R tail | tail`, whose
    start calls R itself) from its byte edges, the walks' uncertain tokens decided by its
    chart (csrc/compose.c, cm_compose_self_ref; the default), or, off, walk it whole: the
    reference the tests compare against.  Process-wide; clear the caches after a change.  The
    entries are the same."""
    cm_compose_self_enable(1 if on else 0)


def compose_self_built():
    """How many entries were composed so in this process (for the tests)."""
    return cm_compose_self_built()


def compose_count_later_enable(bint on):
    """Leave a composed entry's count of accepted tokens to the end of its build, found as its
    ids are taken out of the bitset (csrc/compose.c, cm_walk.count_later; the default), or, off,
    count its bitset at once: the reference the tests compare against.  Process-wide; clear the
    caches after a change.  The entries are the same."""
    cm_compose_count_later_enable(1 if on else 0)


def compose_counted_later():
    """How many composed entries left their count so in this process (for the tests)."""
    return cm_compose_counted_later()


def tail_index_enable(bint on):
    """Find a kept tail part by its index, by (callee start, byte) (csrc/compose.c,
    tail_find; the default), or, off, by a scan of them all: the reference the tests compare
    against.  Process-wide; clear the caches after a change.  The parts are the same."""
    cm_tail_index_enable(1 if on else 0)



def flat_lcp_jump_enable(int mode):
    """Know a flat walk's exit flags at its next stop to the common prefix of the two stops'
    entries, their bytes compared (csrc/flat.c, flat_known_upto): 1 (or True, the default)
    where more than a few trie entries lie between the stops, 2 at every stop (for the tests),
    0 (or False) never: a scan of every entry between, the reference the tests compare
    against.  Process-wide; clear the caches after a change.  The masks are the same."""
    cm_flat_lcp_jump_enable(mode)


def flat_text_unused_enable(bint on):
    """Let a whole walk's text proof pass over a step that dies inside a character no text entry
    of the vocabulary holds (a pattern's ``.`` without U+2028 and U+2029), up to 512 pairs
    (csrc/flat.c, flat_text_unused_live; on by default), or, off, stop at it (flat_text_live,
    up to 128 pairs): the reference the tests compare against.  Process-wide; clear the caches
    after a change.  The masks are the same."""
    cm_flat_text_unused_enable(1 if on else 0)


def flat_text_unused_proofs():
    """How many text proofs held past a dead step so far in this process (for the tests)."""
    return cm_flat_text_unused_proofs()


def tail_sparse_enable(bint on):
    """Keep a tail part of a small first byte's subtree (1,024 trie entries at most) as its
    accepted ids, its walk written into a zero spare bitset that goes back to the cache
    (csrc/compose.c, tail_sparse; the default), or, off, each part a zeroed bitset of its own:
    the reference the tests compare against.  Process-wide; clear the caches after a change.
    The masks are the same."""
    cm_tail_sparse_enable(1 if on else 0)


def tail_sparse_parts():
    """How many tail parts were kept as ids in this process (for the tests)."""
    return cm_tail_sparse_parts()


def radix_sort_enable(bint on):
    """Sort a list of 64 or more trie entries or states by an LSD radix sort (csrc/fsm.c,
    cm_sort_unique_u32; the default), or, off, by qsort: the reference the tests compare
    against.  Process-wide; clear the caches after a change.  The lists, so the entries, are
    the same."""
    cm_radix_sort_enable(1 if on else 0)


def radix_sorts():
    """How many lists were sorted by radix in this process (for the tests)."""
    return cm_radix_sorts()


def sort_unique_u32(uint32_t[::1] values):
    """``values`` sorted in place with repeats dropped, by the core's own sort
    (cm_sort_unique_u32, as the switch stands): how many are kept (for the tests)."""
    if values.shape[0] == 0:
        return 0
    return cm_sort_unique_u32(&values[0], values.shape[0])


def compose_unread_enable(bint on):
    """Leave out of a composed entry's listed walk the uncertain tokens of a call part that the
    call's return state cannot read on (no byte after the first is one of its byte edges': it is
    no final state and calls nothing; csrc/compose.c ``part_cands``; the default), or, off, walk
    every candidate: the reference the tests compare against.  Process-wide; clear the caches
    after a change.  The entries are the same."""
    cm_compose_unread_enable(1 if on else 0)


def compose_unread_skipped():
    """How many candidates were left out so in this process (for the tests)."""
    return cm_compose_unread_skipped()


def compose_pass_enable(bint on):
    """A state that calls one rule R, does nothing else and returns to a final state that does
    nothing either, R returning there alone with s's FOLLOW, takes R's entry whole (csrc/compose.c
    ``pass_through``; the default), or, off, lists R's uncertain tokens through its own chart and
    filters them again: the reference the tests compare against.  Process-wide; clear the caches
    after a change.  The entries are the same."""
    cm_compose_pass_enable(1 if on else 0)


def compose_pass_taken():
    """How many entries were taken so in this process (for the tests)."""
    return cm_compose_pass_taken()


def compose_cands_memo_enable(bint on):
    """Keep a call part's candidates after that cut (``compose_unread_enable``) in the cache,
    keyed by (the part's entry, the bytes its return state reads), and take them from there when
    the pair comes again (csrc/compose.c ``part_cands``; the default), or, off, filter them each
    time: the reference the tests compare against.  Process-wide; clear the caches after a
    change.  The entries are the same."""
    cm_compose_cands_memo_enable(1 if on else 0)


def compose_cands_memo_hits():
    """How many candidate lists were found so in this process (for the tests)."""
    return cm_compose_cands_memo_hits()


def compose_unread_exits_enable(bint on):
    """Choose a call part's candidates by the positions where its callee completes (the chart of
    the part's start, once per (part entry, return row, state) kept): a token is kept where the
    return state reads the byte after one of those positions (csrc/compose.c ``unread_exits``;
    the default), or, off, where it reads some byte after the first (``compose_unread_enable``'s
    check alone): the reference the tests compare against.  Process-wide; clear the caches after
    a change.  The entries are the same."""
    cm_compose_unread_exits_enable(1 if on else 0)


def compose_unread_exit_lists():
    """How many candidate lists were chosen so in this process (for the tests)."""
    return cm_compose_unread_exit_lists()


def donor_alike_enable(bint on):
    """Take a donor entry's subtree of a first byte on which the state and its donor part where
    every token of it reads alike from both (the two reach one state, or differ only between
    states alike in rule, acceptance and live bytes; csrc/donor.c ``alike_subtree``: the
    positions of an unanchored counted class far from its end; the default), or, off, walk it
    again: the reference the tests compare against.  Process-wide; clear the caches after a
    change.  The entries are the same."""
    cm_donor_alike_enable(1 if on else 0)


def donor_alike_hits():
    """How many first bytes' subtrees were taken so in this process (for the tests)."""
    return cm_donor_alike_hits()


def donor_mode_bytes_enable(bint on):
    """Find the state most of a state's bytes lead to (the donor's pick, csrc/donor.c
    ``mode_target``) by counting its own bytes where it has at most 32 (the default), or, off, by
    its classes: the reference the tests compare against.  Process-wide; the entries are the
    same."""
    cm_donor_mode_bytes_enable(1 if on else 0)


def repeat_enable(bint on):
    """Let a solo state take an earlier solo state's entry where a joint walk of the trie through
    both automata proves every token's outcome the same and none uncertain (csrc/repeat.c; the
    default), or, off, build every entry: the reference the tests compare against.  Process-wide;
    the entries are the same."""
    cm_repeat_enable(1 if on else 0)


def repeat_counts():
    """(proofs tried, proofs that held) of repeat.c so far in this process (for the tests)."""
    cdef size_t tries = 0, hits = 0
    cm_repeat_counts(&tries, &hits)
    return tries, hits


def repeat_checks_enable(bint on):
    """Before repeat.c's joint walk, rule out a state whose first two bytes reach a state that is
    not solo (the default), or, off, walk every candidate pair: the reference the tests compare
    against.  Only proofs that would fail are skipped (and their cost towards a grammar's stop),
    so the proofs that hold can only grow; the entries are the same."""
    cm_repeat_checks_enable(1 if on else 0)


def repeat_pair_hash_enable(bint on):
    """Hash the pairs of states a proof of repeat.c explores to their home slots (the default),
    or, off, put every pair in one home slot, so that each lookup reads every pair seen: the
    reference the tests compare the hashed lookup against.  The same verdicts either way."""
    cm_repeat_pair_hash_enable(1 if on else 0)


def entry_hash_sampled_enable(bint on):
    """Hash a bitset entry to intern it over one 64-bit word of every four (the default), or, off,
    over all of them: the reference the tests compare against.  The hash only picks the slot where
    the whole content is compared.  Process-wide; clear the caches after a change."""
    cm_entry_hash_sampled_enable(1 if on else 0)


def donor_mode_bytes_hits():
    """How many states' mode targets were counted by their bytes in this process (for the tests)."""
    return cm_donor_mode_bytes_hits()


def scan_notes_enable(bint on):
    """Keep a composed entry's chart scans of the tokens it leaves uncertain for its upward
    filter, which then does not scan them again (csrc/walk.c, cm_walk_listed_noted; the
    default), or, off, scan them in the filter: the reference the tests compare against.
    Process-wide; clear the caches after a change.  The entries are the same."""
    cm_scan_notes_enable(1 if on else 0)


def scan_notes_used():
    """How many tokens the filter took from a kept scan in this process (for the tests)."""
    return cm_scan_notes_used()


def tokclass_enable(int mode):
    """Take a loop's or run's walk's entries whose bytes all stay inside it at once, from the
    vocabulary's byte features (csrc/tokclass.c): 1 where it pays (the default), 2 wherever it
    applies (small vocabularies), 0 never (every entry read: the reference the tests compare
    against).  Process-wide."""
    cm_tokclass_enable(mode)


def name_sets_div(unsigned div):
    """The vocabulary's per-first-byte name sets (csrc/vocab.c): a first byte gets one when it
    opens at least n_words / div name tokens, for vocabularies built from now on (0: the
    default, 8; 1: the rule before session 35, three sets at Llama-3).  Process-wide."""
    cm_vocab_name_sets_div(div)


def tokclass_walks():
    """How many loop and run walks took entries from the byte features so far in this process
    (for the tests)."""
    return cm_tokclass_walks()


def plain_loop_walks():
    """How many loop entries took every plain JSON string token at once, their exits walking only
    the other entries (csrc/loops.c, lim.plain_skip), so far in this process (for the tests)."""
    return cm_plain_loop_walks()


def text_loop_walks():
    """How many of them took every text token (plain bytes and whole UTF-8 characters) at once too,
    their exits walking only the entries that are not text (csrc/loops.c, loop_text_live)."""
    return cm_text_loop_walks()


def loop_walks_past_dead():
    """How many loop entries took the shared walk of a loop that dies where theirs leaves, or
    leaves where theirs dies (csrc/loops.c, find_loop: dead transitions walked as exits), so far
    in this process (for the tests)."""
    return cm_loop_walks_past_dead()


def loop_exit_ends_enable(bint on):
    """Accept a loop exit whose every token ends with the exit's byte (`s"` closing a string)
    without walking it on from the byte's target (csrc/loops.c, cm_loop_entry; the default).
    Off: every exit walked, the reference the tests compare against.  Process-wide; clear the
    caches after a change.  The entries are the same."""
    cm_loop_exit_ends_enable(1 if on else 0)


def loop_exit_ends_taken():
    """How many loop exits were accepted that way so far in this process (for the tests)."""
    return cm_loop_exit_ends_taken()


def loop_form_runs_enable(bint on):
    """Make a loop's byte-level form (its key in the vocabulary's store of loop walks) by runs of
    one byte class and keep it as its runs of one code (csrc/loopstore.c, form_by_runs; the
    default).  Off: 256 codes a state, the reference the tests compare against.  Process-wide;
    clear the caches after a change (a walk stored under one form is not found under the other).
    The entries are the same."""
    cm_loop_form_runs_enable(1 if on else 0)


def loop_form_runs_taken():
    """How many loop forms were made by runs so far in this process (for the tests)."""
    return cm_loop_form_runs_taken()


def loop_no_back_enable(bint on):
    """Answer a plain state that no state within a loop's reach leads back to as in no loop
    without the backward marking (csrc/loops.c, find_loop; the default).  Off: every state
    marked, the reference the tests compare against.  Process-wide; the entries are the same."""
    cm_loop_no_back_enable(1 if on else 0)


def loop_no_back_taken():
    """How many states were answered so so far in this process (for the tests)."""
    return cm_loop_no_back_taken()


def run_name_scans():
    """How many run walks of a first byte's subtree took its name tokens from the vocabulary's
    list and read only the other entries (csrc/loops.c, run_scan_names) so far in this process
    (for the tests)."""
    return cm_run_name_scans()


def name_runs_enable(bint on):
    """Take a run walk the vocabulary holds already (an identifier's, made by another state with
    the same run over the same range) where a state's entry would walk that range another way: a
    loop entry over the whole trie, a composed state's byte edge into the name (arithmetic's
    `primary` variable beside `call`'s name); and skip a run entry's ranges of first bytes that
    its state does not read (csrc/loops.c, cm_run_stored, gap_dead; the default).  Off: those
    walks as before, the reference the tests compare against.  Process-wide; clear the caches
    after a change.  The entries are the same."""
    cm_name_runs_enable(1 if on else 0)


def name_run_hits():
    """How many stored run walks were taken that way so far in this process (for the tests)."""
    return cm_name_run_hits()


def run_gaps_skipped():
    """How many ranges of first bytes a run entry left unwalked, its state reading none of them,
    so far in this process (for the tests)."""
    return cm_run_gaps_skipped()


def run_parts_enable(bint on):
    """Build the whole-trie walk of a name's run (an identifier state's own walk) from the
    vocabulary's stored walks of its first bytes' subtrees, made by a name start's run entry of
    the same run (arithmetic's variable after `call`'s letters), where they are stored; the others
    scanned as before (csrc/loops.c, run_part_stored; the default).  Off: every subtree scanned,
    the reference the tests compare against.  Process-wide; clear the caches after a change.  The
    entries are the same."""
    cm_run_parts_enable(1 if on else 0)


def run_parts_hits():
    """How many first bytes' subtrees a whole-trie run walk took from the store so far in this
    process (for the tests)."""
    return cm_run_parts_hits()


def name_sets_enable(bint on):
    """Set each name set once (csrc/loops.h; the default): a name state's whole run walk taken
    from the vocabulary's store ORs the set of every name byte's name tokens in one pass instead
    of setting each letter's ids; a walk that holds a first byte's name tokens already -- its own,
    or a part's that a composed entry ORed in first (arithmetic's `primary`: its variable's
    letters after `call`'s) -- does not set them again; a run entry finds its letters' run once.
    Off: every set set where it was, the reference the tests compare against.  Process-wide;
    clear the caches after a change.  The entries are the same."""
    cm_name_sets_enable(1 if on else 0)


def name_sets_hits():
    """(whole-trie unions taken, name sets skipped as held already) so far in this process (for
    the tests)."""
    return cm_name_unions_taken(), cm_name_sets_skipped()


def chart_scans_hashed():
    """How many Earley scans' kernels grew past the few items kept distinct by comparison and
    went on in the set's dedup table (csrc/earley.c, scan_kernel) so far in this process (for the
    tests)."""
    return cm_chart_scans_hashed()


def chart_memo_big_enable(bint on):
    """Let the upward filter's chart keep the closures of big kernels (over 32 items) in its
    closure memo too (csrc/earley.c, the default) or, off, only those of small kernels: the
    reference the tests compare against.  Process-wide."""
    cm_chart_memo_big_enable(1 if on else 0)


def chart_memo_big_hits():
    """How many closures of big kernels were taken from a chart's closure memo so far in this
    process (for the tests)."""
    return cm_chart_memo_big_hits()


def chart_memo_reads_enable(bint on):
    """Keep a chart's memoized closure while the sets it read are unchanged (the newest set one of
    its items completes in), though a newer set its kernel names was rebuilt (csrc/earley.c, the
    default), or, off, only while its kernel's newest origin is unchanged: the reference the tests
    compare against.  Process-wide."""
    cm_chart_memo_reads_enable(1 if on else 0)


def chart_memo_reads_hits():
    """How many closures were taken from a chart's memo that the old rule (the kernel's newest
    origin unchanged) missed, so far in this process (for the tests)."""
    return cm_chart_memo_reads_hits()


def chart_scan_memo_enable(bint on):
    """Let the upward filter's chart keep its scans of big sets (32 items or more) by the set's
    version and the byte's class, answering the same scan again from the closure memo entry it
    made (csrc/earley.c, the default) or, off, scan every time: the reference the tests compare
    against.  Process-wide."""
    cm_chart_scan_memo_enable(1 if on else 0)


def chart_scan_memo_hits():
    """How many scans of big sets were answered by a kept scan so far in this process (for the
    tests)."""
    return cm_chart_scan_memo_hits()


def chain_prefix_hits():
    """How many chains' first positions were taken from the first rows of a kept chain of another
    bound (csrc/chains.c, prefix memos) so far in this process (for the tests)."""
    return cm_chain_prefix_hits()


def compile_stats(size_t max_recs=65536):
    """This thread's compile-time counters since the last call, reset: {"ns": {phase: ns},
    "builds", "nfa_states", "dfa_states", "min_states", "hopcroft_states", "records": [(name index, NFA states,
    DFA states, minimal states, subset ns, minimize ns)] per subset construction}."""
    cdef cm_compile_stats st
    cdef cm_build_rec *recs = <cm_build_rec *>malloc((max_recs + 1) * sizeof(cm_build_rec))
    cdef size_t n, i
    if recs == NULL:
        raise MemoryError()
    try:
        n = cm_compile_stats_take(&st, recs, max_recs)
        return {
            "ns": {name: st.ns[k] for k, name in enumerate(_PHASES)},
            "builds": st.n_builds, "nfa_states": st.nfa_states, "dfa_states": st.dfa_states,
            "min_states": st.min_states, "hopcroft_states": st.hopcroft_states,
            "records": [(recs[i].name, recs[i].nfa_states, recs[i].dfa_states, recs[i].min_states,
                         recs[i].ns_subsets, recs[i].ns_minimize) for i in range(n)],
        }
    finally:
        free(recs)


import os as _os
if _os.environ.get("CFGMASK_COMPILE_STATS") == "1":
    cm_compile_stats_enable(1)


# ---- counted repetitions as segments (csrc/segments.c; private, for the tests) -----------


cdef _seg_tables(tables, cm_seg_tables *st):
    """Fill st from the segment form's tables (pointers into its arrays, which tables holds)."""
    _tables_from_arrays(tables, &st.t)
    st.t.start_rule = <uint32_t>tables.start_rule
    cdef const uint32_t[::1] state_seg = tables.state_seg
    cdef const uint8_t[:, ::1] edge_flags = tables.edge_flags
    cdef const uint32_t[::1] seg_lo = tables.seg_lo
    cdef const uint32_t[::1] seg_hi = tables.seg_hi
    cdef const uint32_t[::1] seg_rule = tables.seg_rule
    cdef const uint32_t[::1] seg_head = tables.seg_head
    cdef size_t nseg = seg_lo.shape[0]
    if (state_seg.shape[0] != st.t.n_states or edge_flags.shape[0] != st.t.n_states
            or edge_flags.shape[1] != st.t.n_classes or seg_hi.shape[0] != nseg
            or seg_rule.shape[0] != nseg or seg_head.shape[0] != nseg):
        raise ValueError("inconsistent segment tables")
    st.n_segments = <uint32_t>nseg
    st.state_seg = &state_seg[0]
    st.edge_flags = &edge_flags[0, 0]
    st.seg_lo = &seg_lo[0] if nseg else NULL
    st.seg_hi = &seg_hi[0] if nseg else NULL
    st.seg_rule = &seg_rule[0] if nseg else NULL
    st.seg_head = &seg_head[0] if nseg else NULL


cdef class SegTablesHandle:
    """The segment form's tables (cfgmask/compile/segments.py ``c_tables``), validated and copied
    by the core: an object with a Tables' fields and ``state_seg``, ``edge_flags`` (shaped as
    ``trans``), ``seg_lo``, ``seg_hi``, ``seg_rule``, ``seg_head``.  Private: step (b) of the
    counters plan (docs/design.md §7); matchers do not use it."""
    cdef cm_segtab *ptr

    def __cinit__(self, tables):
        cdef cm_seg_tables st
        cdef int rc
        _seg_tables(tables, &st)
        with nogil:
            rc = cm_segtab_new(&st, &self.ptr)
        if rc:
            _raise(rc, "compile")

    def __dealloc__(self):
        cm_segtab_free(self.ptr)

    def chart(self, size_t max_items=0):
        """A private byte-level chart with counts over these tables (no tokens or markers)."""
        return SegChart._new(self, max_items)


cdef class SegChart:
    """The private byte-level Earley chart with a count beside each item (csrc/segments.c)."""
    cdef cm_segchart *ptr
    cdef SegTablesHandle tables

    @staticmethod
    cdef SegChart _new(SegTablesHandle tables, size_t max_items):
        cdef SegChart c = SegChart.__new__(SegChart)
        cdef int rc = cm_segchart_new(tables.ptr, max_items, &c.ptr)
        if rc:
            _raise(rc, "run")
        c.tables = tables
        return c

    def __dealloc__(self):
        cm_segchart_free(self.ptr)

    def step(self, int b):
        """Read byte ``b``: True, or False (nothing read) if no item survives."""
        if not 0 <= b <= 255:
            raise ValueError("a byte is 0..255")
        cdef int rc = cm_segchart_step(self.ptr, <uint8_t>b)
        if rc == CM_ERR_STATE:
            raise MatcherError("an item was met again with another count (segment tables)")
        if rc < 0:
            _raise(rc, "run")
        return rc == 1

    def feed(self, bytes data):
        for b in data:
            if not self.step(b):
                return False
        return True

    def accepting(self):
        return cm_segchart_accepting(self.ptr) == 1

    def viable(self):
        """The bytes that may come next, as a set."""
        cdef uint32_t out[8]
        cdef int rc = cm_segchart_viable(self.ptr, out)
        if rc == CM_ERR_STATE:
            raise MatcherError("an item was met again with another count (segment tables)")
        if rc:
            _raise(rc, "run")
        return {b for b in range(256) if out[b >> 5] >> (b & 31) & 1}

    def __len__(self):
        return cm_segchart_len(self.ptr)

    def rollback(self, size_t n):
        cdef int rc = cm_segchart_rollback(self.ptr, n)
        if rc:
            _raise(rc, "run")

    def fork(self):
        cdef SegChart c = SegChart.__new__(SegChart)
        cdef int rc = cm_segchart_fork(self.ptr, &c.ptr)
        if rc:
            _raise(rc, "run")
        c.tables = self.tables
        return c

    def items(self):
        """The last set's items: a list of (state, origin, k), k None outside segments."""
        cdef size_t n = cm_segchart_items(self.ptr, NULL, NULL, NULL, 0)
        cdef uint32_t *s = <uint32_t *>malloc(max(n, 1) * 12)
        if s == NULL:
            raise MemoryError()
        cdef uint32_t *o = s + n
        cdef uint32_t *k = s + 2 * n
        cm_segchart_items(self.ptr, s, o, k, n)
        out = [(s[i], o[i], None if k[i] == 0xFFFFFFFF else k[i]) for i in range(n)]
        free(s)
        return out


def seg_memo_hits():
    """How many closures of a segment grammar's chart sets came from the closure memo (keyed by
    the kernel and its items' k >= lo bits; csrc/earley.c) so far in this process (tests)."""
    return cm_chart_seg_memo_hits()


def seg_entry_stats():
    """(built, found again): a segment grammar's entries of segment states keyed by their clipped
    pair (csrc/cache.c, cm_grammar_seg_entry) so far in this process (for the tests)."""
    return cm_seg_entry_builds(), cm_seg_entry_hits()


def seg_far_enable(bint on):
    """Build a segment state's far entries (clipped pair (L, L) or (0, L): no token reaches a
    bound) from its loop's shared walk (csrc/loops.c, cm_seg_far_entry; on by default); off,
    every keyed entry is the plain counted walk (the tests' reference)."""
    cm_seg_far_enable(1 if on else 0)


def seg_far_builds():
    """How many keyed entries were built as far entries from the loop's shared walk so far in
    this process (for the tests)."""
    return cm_seg_far_builds()


def seg_near_enable(bint on):
    """Build a segment state's near entries (clipped pair with need < L or budget < L) as its
    far entry less the cut of the bounds (csrc/cache.c, seg_near; csrc/segcut.c; on by
    default); off, they are plain counted walks (the tests' reference)."""
    cm_seg_near_enable(1 if on else 0)


def seg_near_builds():
    """How many keyed entries were built as near entries from the far entry and the cut so far
    in this process (for the tests)."""
    return cm_seg_near_builds()


def seg_ladder_enable(bint on):
    """Build a segment grammar's entries of states outside segments by the rungs that read no
    count (csrc/cache.c, seg_outside_walk: a donor state's entry, a loop's shared walk; on by
    default); off, each is the plain counted walk of the whole trie (the tests' reference)."""
    cm_seg_ladder_enable(1 if on else 0)


def seg_ladder_builds():
    """(from a donor, from a loop's shared walk): entries of states outside segments built so
    far in this process (for the tests)."""
    cdef size_t donated = 0, looped = 0
    cm_seg_ladder_builds(&donated, &looped)
    return donated, looped


def seg_chain_enable(bint on):
    """Build a segment grammar's entries of states outside segments in no loop the ladder takes by
    the DFA walk of the plain states outside segments they lead through, each subtree that leaves
    through the counted chart (csrc/loops.c, cm_seg_chain_entry; on by default, under
    seg_ladder_enable); off, the plain counted walk."""
    cm_seg_chain_enable(1 if on else 0)


def seg_chain_builds():
    """How many entries of states outside segments cm_seg_chain_entry built so far in this
    process (for the tests)."""
    return cm_seg_chain_builds()


def counted_scans():
    """How many scans of items in segment states (their count guards read) the private
    segment chart made so far in this process (csrc/segments.c; for the tests)."""
    return cm_counted_scans()


# ---- the cut of counted segments (csrc/segcut.c) ------------------------------------------


cdef object _segcut_raise(int rc):
    """A segment cut's status as an exception: a bad segment, state, token or row is a
    ValueError."""
    if rc == CM_ERR_ARG:
        raise ValueError("segment cut: no such segment, state of the segment or token, or a row of another size")
    _raise(rc, "segment cut")


cdef list _segcut_list(cm_segcut *c, uint32_t state, uint32_t need, uint32_t budget, bint leavers):
    """The cut's tokens sorted (cm_segcut_kill) or, with ``leavers``, the leavers it keeps as
    (token, offset of its EXIT byte) by count (cm_segcut_leavers): counted by a first call, then
    written by a second into a buffer of that size."""
    cdef size_t n = 0
    cdef size_t m = 0
    cdef int rc
    if leavers:
        rc = cm_segcut_leavers(c, state, need, budget, NULL, NULL, 0, &n)
    else:
        rc = cm_segcut_kill(c, state, need, budget, NULL, 0, &n)
    if rc:
        _segcut_raise(rc)
    cdef uint32_t *buf = <uint32_t *>malloc(max(n, 1) * (8 if leavers else 4))
    if buf == NULL:
        raise MemoryError()
    if leavers:
        rc = cm_segcut_leavers(c, state, need, budget, buf, buf + n, n, &m)
    else:
        with nogil:
            rc = cm_segcut_kill(c, state, need, budget, buf, n, &m)
    if rc or m != n:
        free(buf)
        _segcut_raise(rc or CM_ERR_STATE)
    res = [(buf[i], buf[n + i]) for i in range(n)] if leavers else sorted(buf[i] for i in range(n))
    free(buf)
    return res


cdef class SegCutHandle:
    """The cut of segment ``seg`` of a SegTablesHandle for a vocabulary (csrc/segcut.c): every
    segment state's walk of every token (its kind -- ``DEAD``, ``STAY``, ``MID``, ``EXIT`` --
    and count), kept by the vocabulary under the unit's byte form, and the cut of an item at
    (need, budget) as a kill list or ANDed into a row.  Private: step (c) of the counters plan
    (docs/design.md §7)."""
    cdef cm_segcut *ptr
    cdef SegTablesHandle tables
    cdef VocabHandle vocab
    DEAD = CM_SEGCUT_DEAD
    STAY = CM_SEGCUT_STAY
    MID = CM_SEGCUT_MID
    EXIT = CM_SEGCUT_EXIT
    SMALL = CM_SEGCUT_SMALL

    def __cinit__(self, SegTablesHandle tables, uint32_t seg, VocabHandle vocab):
        cdef int rc = cm_segcut_new(tables.ptr, seg, vocab.ptr, &self.ptr)
        if rc:
            _segcut_raise(rc)
        self.tables = tables
        self.vocab = vocab

    def __dealloc__(self):
        cm_segcut_free(self.ptr)

    def states(self):
        """The segment's states (the tables' numbers), the head first."""
        cdef uint32_t n = cm_segcut_states(self.ptr, NULL, 0)
        cdef uint32_t *s = <uint32_t *>malloc(max(n, 1) * 4)
        if s == NULL:
            raise MemoryError()
        cm_segcut_states(self.ptr, s, n)
        out = [s[i] for i in range(n)]
        free(s)
        return out

    def build_all(self):
        """Make every state's tables now (otherwise each on first use)."""
        cdef int rc
        with nogil:
            rc = cm_segcut_build_all(self.ptr)
        if rc:
            _segcut_raise(rc)

    @property
    def bytes(self):
        """The bytes of the tables made so far for this unit (shared by its cuts)."""
        return cm_segcut_bytes(self.ptr)

    def answer(self, uint32_t state, uint32_t token):
        """(kind, count, offset, target) of ``token``'s walk from ``state``; offset and target
        (the EXIT byte's place in the token and the state it lands on) None but for EXIT."""
        cdef uint32_t kind, count, offset, target
        cdef int rc = cm_segcut_answer(self.ptr, state, token, &kind, &count, &offset, &target)
        if rc:
            _segcut_raise(rc)
        if kind != CM_SEGCUT_EXIT:
            return kind, count, None, None
        return kind, count, offset, target

    def answers(self, uint32_t state):
        """Every token's (kind, count) from ``state``: two numpy arrays (uint8, uint32)."""
        import numpy as np
        kind = np.zeros(self.vocab.size, dtype=np.uint8)
        count = np.zeros(self.vocab.size, dtype=np.uint32)
        cdef uint8_t[::1] kv = kind
        cdef uint32_t[::1] cv = count
        cdef int rc
        with nogil:
            rc = cm_segcut_answers(self.ptr, state, &kv[0], &cv[0])
        if rc:
            _segcut_raise(rc)
        return kind, count

    def apply(self, uint32_t state, uint32_t need, uint32_t budget, uint32_t[::1] row):
        """row &= ~cut(state, need, budget), in place (ceil(vocabulary size / 32) words)."""
        cdef int rc
        cdef uint32_t *p = &row[0] if row.shape[0] else NULL
        cdef size_t n = row.shape[0]
        with nogil:
            rc = cm_segcut_apply(self.ptr, state, need, budget, p, n)
        if rc:
            _segcut_raise(rc)

    def kill(self, uint32_t state, uint32_t need, uint32_t budget):
        """The cut's tokens, a sorted list."""
        return _segcut_list(self.ptr, state, need, budget, False)

    def leavers(self, uint32_t state, uint32_t need, uint32_t budget):
        """The leavers the cut keeps: a list of (token, offset of its EXIT byte), by count."""
        return _segcut_list(self.ptr, state, need, budget, True)


def segcut_store_hits():
    """How many segment cuts found their unit's tables in the vocabulary's store so far in
    this process (csrc/segcut.c; for the tests)."""
    return cm_segcut_store_hits()


def segcut_state_builds():
    """How many segment states' tables (one trie walk each) were made so far in this process."""
    return cm_segcut_state_builds()
