"""Automata kept across compiles.

Grammars from one front end share most rules (a JSON string, number and whitespace in every
schema), so a process compiling many grammars builds each shared part once.  The cache keys a
rule component by its IR, as ids of the hash-consed DAG (:class:`~.encode.Interner`), by its
callees' keys and what they may inline, and by the limits; it owns the interner those ids come
from, and a compile opens a :class:`~.encode.Session` on it.  A key is known before anything
is built (a caller's key holds its callees' key ids), so a compile looks up every component
first and hands C only the rest.  Automata are never mutated after construction.

The prelude (:mod:`.prelude`): the components every JSON Schema grammar may share whatever its
content (any JSON value, its strings, whitespace), built once a process in a cache of their
own and pinned here (:meth:`AutomatonCache.pin`).  Every generation starts with them, so a
``clear()`` forgets what earlier grammars taught but not what the engine is made of.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from . import _dag
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
        self._prelude: _Prelude | None = None

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

    def put(self, key: int, dfas: list[DFA], gen: int | None = None) -> None:
        self.put_all([(key, dfas)], gen)

    def put_all(self, built: list[tuple[int, list[DFA]]], gen: int | None = None) -> None:
        """``put`` of each (key, automata) of ``built``, in order, under one lock.  ``gen``: the
        generation whose key ids these are; a compile that began before a ``clear()`` keeps
        nothing (its key ids mean other components now)."""
        with self._lock:
            if gen is not None and gen != self._interner.gen:
                return
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

    def pin(
        self,
        other: AutomatonCache,
        keep: Callable[[list[str | None]], bool],
        seed: dict[int, int] | None = None,
        held: list[Any] | None = None,
    ) -> None:
        """Start every later generation of this cache with ``other``'s node ids, key ids and
        the components whose members ``keep`` takes (the prelude: :mod:`.prelude`).  ``other``
        is private to the caller and done with.  ``seed``: node ids of ``other``'s by object
        id, which every session of those generations starts its memo with; ``held``: the
        objects, kept alive here (so no id in ``seed`` is ever another object's).  The current
        generation gets them too if nothing was interned in it yet (a process that has
        compiled nothing); else it is left as it is."""
        with other._lock:
            keys = list(other._key_ids)
            kept = {k: d for k, d in other._components.items() if keep(_members(keys[k]))}
            for dfas in kept.values():  # their runs for every copy from now on (csrc/dfa.c)
                for dfa in dfas:
                    dfa.handle.keep_runs()
            it = other._interner
            prelude = _Prelude(
                it.gen,
                list(it.keys),
                keys,
                kept,
                seed or {},
                list(held or ()),
                {i: u for i, u in enumerate(it._uses) if u is not None},
                {i: r for i, r in enumerate(it._refs) if r is not None},
            )
        with self._lock:
            self._prelude = prelude
            if not self._interner.keys:
                self._renew()

    def pinned(self) -> frozenset[int]:
        """The key ids of the prelude's components, where they stand in this generation."""
        with self._lock:
            p = self._prelude
            return frozenset(k for k in p.components if k in self._components) if p else frozenset()

    def _renew(self) -> None:
        # keys hold the generation: old ones never match (a compile still running on the old
        # interner files its automata under keys of the old generation)
        self._interner = Interner(next(self._gens))
        self._key_ids = {}
        self._components = {}
        if self._prelude is not None:
            self._prelude.install(self)


_dag.set_put_all(AutomatonCache.put_all)  # _dag.collect does it inline for this class


def _members(key: Hashable) -> list[str | None]:
    """The member rules named in a component's key (``_dag.plan``: generation, limits,
    right-linear, member count, then each member's name, id and cap).  A rule that is neither
    recursive nor the start is keyed without its name (None here): its automaton is the same
    whatever it is called."""
    assert isinstance(key, tuple)
    return [key[4 + 3 * i] for i in range(key[3])]


@dataclass(frozen=True)
class _Prelude:
    """What every generation starts with: the nodes (their keys, in id order), the component
    keys (in id order) and the kept components of the cache the prelude was built in."""

    gen: int
    nodes: list[tuple]  # type: ignore[type-arg]
    keys: list[Hashable]
    components: dict[int, list[DFA]]
    seed: dict[int, int]  # node ids by object id (Interner.seed), of the objects in ``held``
    held: list[Any]
    # the nodes' references per rule and rule sets (Interner._uses, _refs) that the prelude's
    # builds made, by node id: facts of a node's subtree, the same in every generation (equal
    # ids, equal keys), and read only (the compiled walks share them between nodes too)
    uses: dict[int, dict[str, int]]
    refs: dict[int, frozenset[str]]

    def install(self, cache: AutomatonCache) -> None:
        """Into the fresh generation of ``cache`` (its lock held): the nodes added again in
        order get the same ids (a key names only earlier ids), and a component key's
        generation, its first item, becomes the new one's."""
        interner = cache._interner
        for i, node in enumerate(self.nodes):
            if interner.add(node) != i:  # cannot happen: ids are handed out in order
                raise AssertionError(f"prelude node {i} got another id")
        # what the prelude's builds worked out of its nodes, so that no compile makes it again
        # (a schema's compile asked the rule sets and uses of ~5 prelude rule bodies each time)
        uses, refs = interner._uses, interner._refs
        for i, u in self.uses.items():
            uses[i] = u
        for i, r in self.refs.items():
            refs[i] = r
        gen = interner.gen
        cache._key_ids = {
            (gen, *k[1:]) if isinstance(k, tuple) and k and k[0] == self.gen else k: i
            for i, k in enumerate(self.keys)
        }
        cache._components = dict(self.components)
        interner.seed = self.seed


CACHE = AutomatonCache()
