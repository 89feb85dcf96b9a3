"""Automata kept across compiles.

Grammars from one front end share most rules (a JSON string, number and whitespace in every
schema), so a process compiling many grammars builds each shared part once.  The cache keys a
rule component by its IR, as ids of the hash-consed DAG (:class:`~.encode.Interner`), by its
callees' keys and by the limits; it owns the interner those ids come from, and a compile opens
a :class:`~.encode.Session` on it.  Values are ``(serial, automata)``: a caller's key names a
callee by its serial.  Automata are never mutated after construction.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from .automaton import DFA
from .encode import Interner, Session, _utf8_code

_Key = tuple[Any, ...]


class AutomatonCache:
    MAX_COMPONENTS = 4096  # then the oldest component goes

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gens = itertools.count()
        self._serials = itertools.count()
        self._interner = Interner(next(self._gens))
        self._components: dict[_Key, tuple[int, dict[str, DFA]]] = {}

    def session(self) -> Session:
        """A session for one compile, sharing this cache's node ids and automata."""
        with self._lock:
            if len(self._interner.keys) > Interner.MAX_NODES:
                self._renew()  # the ids are kept alive; past this many a new generation starts
            return Session(self._interner, self)

    def get(self, key: _Key) -> tuple[int, dict[str, DFA]] | None:
        return self._components.get(key)

    def put(self, key: _Key, dfas: dict[str, DFA]) -> tuple[int, dict[str, DFA]]:
        got = (next(self._serials), dfas)
        with self._lock:
            if len(self._components) >= self.MAX_COMPONENTS:
                self._components.pop(next(iter(self._components)), None)
            self._components[key] = got
        return got

    def clear(self) -> None:
        """Forget every automaton and node id: the next compile is cold."""
        with self._lock:
            self._renew()
        _utf8_code.cache_clear()

    def _renew(self) -> None:
        self._interner = Interner(next(self._gens))  # keys hold the generation: old ones never match
        self._components.clear()


CACHE = AutomatonCache()
