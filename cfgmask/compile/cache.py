"""Automata kept across compiles.

Grammars from one front end share most rules (a JSON string, number and whitespace in every
schema), so a process compiling many grammars builds each shared part once.  The cache keys a
rule component by its IR, as ids of the hash-consed DAG (:class:`~.encode.Interner`), by its
callees' keys and what they may inline, and by the limits; it owns the interner those ids come
from, and a compile opens a :class:`~.encode.Session` on it.  A key is known before anything
is built (a caller's key holds its callees' key ids), so a compile looks up every component
first and hands C only the rest.  Automata are never mutated after construction.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable

from .automaton import DFA
from .encode import Interner, Session, _utf8_code


class AutomatonCache:
    MAX_COMPONENTS = 4096  # then the oldest component goes
    MAX_KEYS = 1 << 16  # key ids handed out; then a new generation starts

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gens = itertools.count()
        self._interner = Interner(next(self._gens))
        self._key_ids: dict[Hashable, int] = {}
        self._components: dict[int, list[DFA]] = {}

    def session(self) -> Session:
        """A session for one compile, sharing this cache's node ids and automata."""
        with self._lock:
            if len(self._interner.keys) > Interner.MAX_NODES or len(self._key_ids) > self.MAX_KEYS:
                self._renew()  # the ids are kept alive; past this many a new generation starts
            return Session(self._interner, self)

    def key_id(self, content: Hashable) -> int:
        """A small id for a component's key (its members' IR ids, its callees' key ids, the
        limits' id) or for the limits: equal content, equal id, for as long as the generation
        lasts.  (``_dag.plan`` does the same inline, under the same lock, a component at a time.)"""
        got = self._key_ids.get(content)
        if got is None:
            with self._lock:
                got = self._key_ids.setdefault(content, len(self._key_ids))
        return got

    def get(self, key: int) -> list[DFA] | None:
        """The automata of the component with key id ``key`` (one per member), if kept."""
        return self._components.get(key)

    def put(self, key: int, dfas: list[DFA]) -> None:
        self.put_all([(key, dfas)])

    def put_all(self, built: list[tuple[int, list[DFA]]]) -> None:
        """``put`` of each (key, automata) of ``built``, in order, under one lock."""
        with self._lock:
            comps = self._components
            for key, dfas in built:
                if len(comps) >= self.MAX_COMPONENTS:
                    comps.pop(next(iter(comps)), None)
                comps[key] = dfas

    def clear(self) -> None:
        """Forget every automaton and node id: the next compile is cold."""
        with self._lock:
            self._renew()
        _utf8_code.cache_clear()

    def _renew(self) -> None:
        self._interner = Interner(next(self._gens))  # keys hold the generation: old ones never match
        self._key_ids = {}
        self._components.clear()


CACHE = AutomatonCache()
