"""``compile(grammar, vocabulary)`` -> ``CompiledGrammar``: the passes of this package in order,
their tables cached by grammar content, bound to a vocabulary in the C core."""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from .. import _core, deadline, ir
from ..deadline import Deadline
from ..errors import GrammarError
from ..grammar import Grammar
from ..vocab import Vocabulary
from .cache import CACHE
from .limits import DEFAULT_LIMITS, CompileLimits
from .prepare import prepare, tables_key
from .strategy import DEFAULT, Strategy
from .tables import Tables, _build_tables_in
from .token_texts import META_KEY as TOKEN_TEXTS
from .token_texts import resolve_token_texts


@dataclass(frozen=True)
class MatcherLimits:
    """Run-time limits of the C core; 0 means the core's default.  Hitting one puts the
    matcher in its sticky error state (``LimitError`` once, then ``MatcherError``)."""

    max_items_per_set: int = 0  # Earley items in one set
    max_chart_items: int = 0  # Earley items held by one matcher
    max_cache_bytes: int = 0  # mask cache of one compiled grammar (past it entries are temporary)


class CompiledGrammar:
    """A grammar bound to a vocabulary.  Immutable, thread-safe and picklable:
    share one between all matchers (and threads) that use the same grammar."""

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        tables: Tables,
        matcher_limits: MatcherLimits,
        strategy: Strategy = DEFAULT,
    ) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.tables = tables
        self.matcher_limits = matcher_limits
        self._strategy = strategy
        self._handle = _core.GrammarHandle(
            tables, vocab._handle(), list(vocab.stop_ids), _settings(matcher_limits, strategy)
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
        return (_rebuild, (self.grammar, self.vocab, self.tables, self.matcher_limits, self._strategy))

    def __repr__(self) -> str:
        s = self.tables.stats
        return f"CompiledGrammar(rules={s['parser_rules']}, states={s['states']}, vocab={self.vocab.size})"


_NO_MATCHER_LIMITS = MatcherLimits()


def _settings(limits: MatcherLimits, strategy: Strategy) -> SimpleNamespace:
    """What GrammarHandle reads: a field per setting (``dataclasses.asdict`` costs 40 µs; the
    defaults' without hashing both dataclasses)."""
    if limits is _NO_MATCHER_LIMITS and strategy is DEFAULT:
        return _default_settings()
    return _settings_of(limits, strategy)


@functools.cache
def _default_settings() -> SimpleNamespace:
    return _settings_of(_NO_MATCHER_LIMITS, DEFAULT)


@functools.lru_cache(maxsize=64)
def _settings_of(limits: MatcherLimits, strategy: Strategy) -> SimpleNamespace:
    return SimpleNamespace(**dataclasses.asdict(limits), **dataclasses.asdict(strategy))


def _rebuild(
    grammar: Grammar, vocab: Vocabulary, tables: Tables, limits: MatcherLimits, strategy: Strategy
) -> CompiledGrammar:
    return CompiledGrammar(grammar, vocab, tables, limits, strategy)


_TABLE_CACHE: dict[Hashable, Tables] = {}
_TABLE_LOCK = threading.Lock()
_TABLE_CACHE_MAX = 256


def clear_caches() -> None:
    """Forget everything the process keeps from earlier compiles: tables, automaton fragments,
    every live vocabulary's loop walks, and what the JSON Schema front end keeps of the schemas
    it has read (patterns' automata, keys, number ranges).  The next compile and its first
    masks are cold, as for a grammar never seen before (benchmarks of cold starts, tests of the
    caches).  Compiled grammars and matchers already made keep working.  What a vocabulary
    builds with its trie (the walks of a JSON string's inside, for vocabularies of 10,000 tokens
    or more) is part of the vocabulary and stays, and so does the prelude it pins (the automata
    of any JSON value, :mod:`cfgmask.compile.prelude`): what the engine is made of, not what an
    earlier grammar taught."""
    import sys

    from ..vocab import clear_walks

    with _TABLE_LOCK:
        _TABLE_CACHE.clear()
    CACHE.clear()
    clear_walks()
    front = sys.modules.get("cfgmask.frontends.json_schema")  # not imported: nothing kept
    if front is not None:
        front.clear_memos()


def compile(  # noqa: A001 - the natural name, as in xgrammar
    grammar: Grammar | ir.Grammar,
    vocab: Vocabulary,
    *,
    limits: CompileLimits | None = None,
    matcher_limits: MatcherLimits | None = None,
    warm: bool = False,
    _strategy: Strategy | None = None,
) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.

    Automaton tables are cached by grammar content, so compiling the same
    grammar for a second vocabulary (or again) skips the automaton build.
    ``warm=True`` fills the whole mask cache now (slower compile, flat latency), within
    ``limits.deadline_ms`` like the rest of the compile.
    ``_strategy`` is private: how the core builds masks (same masks; for tests).
    """
    if isinstance(grammar, ir.Grammar):
        grammar = Grammar(grammar)
    if not isinstance(vocab, Vocabulary):
        raise TypeError(f"vocab must be a cfgmask.Vocabulary, not {type(vocab).__name__}")
    limits = limits or DEFAULT_LIMITS
    if grammar.ir.meta.get(TOKEN_TEXTS):  # <|im_end|>-style terminals: ids from this vocabulary
        resolved = resolve_token_texts(grammar.ir, vocab, grammar.source)
        grammar = Grammar(resolved, source=grammar.source, schema_report=grammar.schema_report)
    with Deadline(limits.deadline_ms, "compile"):
        session = prepare(grammar.ir, limits, CACHE.session())  # check_ir, and the IR's node ids
        key = tables_key(session, grammar.ir, limits)
        with _TABLE_LOCK:
            tables = _TABLE_CACHE.get(key)
        if tables is None:
            tables = _build_tables_in(grammar.ir, limits, session)  # build_tables, in this deadline
            with _TABLE_LOCK:
                if len(_TABLE_CACHE) >= _TABLE_CACHE_MAX:
                    _TABLE_CACHE.pop(next(iter(_TABLE_CACHE)))
                _TABLE_CACHE[key] = tables
        if tables.max_token_id >= vocab.size:
            raise GrammarError(
                f"token terminal <[{tables.max_token_id}]> is out of range "
                f"for a vocabulary of {vocab.size} tokens"
            )
        compiled = CompiledGrammar(
            grammar, vocab, tables, matcher_limits or _NO_MATCHER_LIMITS, _strategy or DEFAULT
        )
        if warm:
            compiled.warm()  # within the deadline too
    return compiled
