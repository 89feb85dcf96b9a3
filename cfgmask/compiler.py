"""``compile(grammar, vocabulary)`` -> ``CompiledGrammar``."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from . import deadline, ir
from .automata import CompileLimits, Tables, build_tables, prepare, tables_key
from .deadline import Deadline
from .errors import GrammarError
from .grammar import Grammar
from .vocab import Vocabulary


@dataclass(frozen=True)
class MatcherLimits:
    """Run-time limits of the C core; 0 means the core's default."""

    max_items_per_set: int = 0
    max_chart_items: int = 0
    max_cache_bytes: int = 0
    direct_walk_states: int = 0  # sets with this many uncached scanning states skip the cache
    index_min_items: int = 0  # closed Earley sets this big get a waiter index (1: every set)
    # current sets this big look the whole mask up in the grammar's mask memo (2**63: never)
    mask_memo_min_items: int = 0
    # ... and so do masks that leave this many uncertain candidates to check (2**63: never)
    mask_memo_min_candidates: int = 0
    # cache entries of states in equal loops (copies of one terminal) share their walk inside the
    # loop (False: every entry walks the whole trie; the masks are the same)
    share_loop_walks: bool = True
    # cache entries drop the uncertain tokens that no context can take, read past the rule's end
    # through every caller (False: keep every token whose next byte may follow; the masks are the same)
    filter_uncertain: bool = True
    # cache entries built from other entries: a state that calls rules from its callees' (checking only
    # the tokens they leave uncertain), a state that goes where a string loop goes on most bytes from
    # the loop's (False: every entry walks the trie; the masks are the same)
    compose_entries: bool = True
    # trie walks through charts whose live items all wait on the unknown caller (names, strings,
    # keywords) follow a lazily built DFA over those charts (False: an Earley step a byte; same masks)
    flat_walks: bool = True
    # a block of a counted repetition (x{0,1000} is cut into blocks) with at least this many uncertain
    # tokens keeps those that cross its end into the next block: a mask takes them at once where the
    # chart lets the block start again (0: each is checked against the chart; the masks are the same)
    wrap_repeats: int = 256


class CompiledGrammar:
    """A grammar bound to a vocabulary.  Immutable, thread-safe and picklable:
    share one between all matchers (and threads) that use the same grammar."""

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        tables: Tables,
        matcher_limits: MatcherLimits,
    ) -> None:
        from ._core import GrammarHandle

        self.grammar = grammar
        self.vocab = vocab
        self.tables = tables
        self.matcher_limits = matcher_limits
        self._handle = GrammarHandle(
            tables,
            vocab._handle(),
            list(vocab.stop_ids),
            matcher_limits.max_items_per_set,
            matcher_limits.max_chart_items,
            matcher_limits.max_cache_bytes,
            matcher_limits.direct_walk_states,
            matcher_limits.index_min_items,
            matcher_limits.mask_memo_min_items,
            matcher_limits.mask_memo_min_candidates,
            matcher_limits.share_loop_walks,
            matcher_limits.filter_uncertain,
            matcher_limits.compose_entries,
            matcher_limits.flat_walks,
            matcher_limits.wrap_repeats,
        )

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    @property
    def stats(self) -> dict[str, int]:
        """Automaton sizes and the current mask-cache use."""
        out = dict(self.tables.stats)
        out["cache_entries"] = self._handle.cache_entries
        out["cache_bytes"] = self._handle.cache_bytes
        out.update(self._handle.build_stats)
        return out

    def warm(self) -> CompiledGrammar:
        """Precompute the mask-cache entry of every state now instead of on first use.

        Under a compile deadline (``compile(warm=True)`` warms under its own) it raises
        :class:`~cfgmask.errors.LimitError` with ``limit="deadline_ms"`` once that passes;
        the entries built so far are kept.
        """
        left = deadline.remaining()
        self._handle.warm(time.monotonic() + left if math.isfinite(left) else 0.0)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.grammar, self.vocab, self.tables, self.matcher_limits))

    def __repr__(self) -> str:
        s = self.tables.stats
        return f"CompiledGrammar(rules={s['parser_rules']}, states={s['states']}, vocab={self.vocab.size})"


def _rebuild(grammar: Grammar, vocab: Vocabulary, tables: Tables, limits: MatcherLimits) -> CompiledGrammar:
    return CompiledGrammar(grammar, vocab, tables, limits)


_TABLE_CACHE: dict[str, Tables] = {}
_TABLE_LOCK = threading.Lock()
_TABLE_CACHE_MAX = 256


def _tables_key(g: ir.Grammar, limits: CompileLimits) -> str:
    return tables_key(prepare(g, limits), g, limits)


def compile(  # noqa: A001 - the natural name, as in xgrammar
    grammar: Grammar | ir.Grammar,
    vocab: Vocabulary,
    *,
    limits: CompileLimits | None = None,
    matcher_limits: MatcherLimits | None = None,
    warm: bool = False,
) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.

    Automaton tables are cached by grammar content, so compiling the same
    grammar for a second vocabulary (or again) skips the automaton build.
    ``warm=True`` fills the whole mask cache now (slower compile, flat latency), within
    ``limits.deadline_ms`` like the rest of the compile.
    """
    if isinstance(grammar, ir.Grammar):
        grammar = Grammar(grammar)
    if not isinstance(vocab, Vocabulary):
        raise TypeError(f"vocab must be a cfgmask.Vocabulary, not {type(vocab).__name__}")
    limits = limits or CompileLimits()
    with Deadline(limits.deadline_ms, "compile"):
        session = prepare(grammar.ir, limits)  # check_ir, and the IR's node ids
        key = tables_key(session, grammar.ir, limits)
        with _TABLE_LOCK:
            tables = _TABLE_CACHE.get(key)
        if tables is None:
            tables = build_tables(grammar.ir, limits, session)
            with _TABLE_LOCK:
                if len(_TABLE_CACHE) >= _TABLE_CACHE_MAX:
                    _TABLE_CACHE.pop(next(iter(_TABLE_CACHE)))
                _TABLE_CACHE[key] = tables
        if tables.max_token_id >= vocab.size:
            raise GrammarError(
                f"token terminal <[{tables.max_token_id}]> is out of range "
                f"for a vocabulary of {vocab.size} tokens"
            )
        compiled = CompiledGrammar(grammar, vocab, tables, matcher_limits or MatcherLimits())
        if warm:
            compiled.warm()  # within the deadline too
    return compiled
