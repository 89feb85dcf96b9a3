"""A minimal DFA built by the C core (``csrc/fsm.c``), as the compiler holds it.

Edges carry a byte range or a *label*: a rule call or a token terminal, named by
``names[label]``.  The automaton itself lives in C (``_core.DfaHandle``); its states are
materialized in Python only for inspection (:attr:`DFA.states`).  Never mutated after
construction.  The slow Python constructions the tests compare C with live in
``tests/reference_fsm.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DState:
    """One state, for inspection: sorted disjoint byte ranges, calls by name, acceptance."""

    bytes: list[tuple[int, int, int]] = field(default_factory=list)
    refs: list[tuple[str, int]] = field(default_factory=list)
    accepting: bool = False


class DFA:
    """State 0 is the start state; label ``l`` of ``handle`` is ``names[l]``."""

    __slots__ = ("_states", "handle", "names")

    def __init__(self, handle: Any, names: list[str]) -> None:
        self.handle = handle
        self.names = names
        self._states: list[DState] | None = None

    @property
    def states(self) -> list[DState]:
        if self._states is None:
            names = self.names
            self._states = [
                DState(edges, [(names[lab], t) for lab, t in labels], acc)
                for edges, labels, acc in self.handle.states()
            ]
        return self._states

    def __len__(self) -> int:
        return int(self.handle.n_states)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DFA) and self.states == other.states

    def __repr__(self) -> str:
        return f"DFA({self.states!r})"
