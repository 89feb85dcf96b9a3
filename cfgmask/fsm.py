"""Byte automata with rule calls: the NFA builder, subset construction and
minimization used by the compiler.

Edges are labelled with a byte range ``(lo, hi)`` or with a rule name (a call:
the called rule's whole language is consumed there).  A DFA is deterministic
over both kinds of labels.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import deadline
from .errors import LimitError


class NFA:
    """Thompson-style NFA: states are ints; edges are kept per state."""

    def __init__(self) -> None:
        self.bytes: list[list[tuple[int, int, int]]] = []
        self.refs: list[list[tuple[str, int]]] = []
        self.eps: list[list[int]] = []
        self._arrays: tuple[tuple[np.ndarray, ...], list[str]] | None = None

    def state(self) -> int:
        self._arrays = None
        self.bytes.append([])
        self.refs.append([])
        self.eps.append([])
        return len(self.eps) - 1

    def __len__(self) -> int:
        return len(self.eps)

    def arrays(self) -> tuple[tuple[np.ndarray, ...], list[str]]:
        """CSR arrays for the C builder (cached until a state is added; all edges of a
        component are in place before its automata are built) and the label names."""
        if self._arrays is None:
            names: list[str] = sorted({n for es in self.refs for n, _ in es})
            index = {n: i for i, n in enumerate(names)}
            b = np.asarray([e for es in self.bytes for e in es], dtype=np.uint32).reshape(-1, 3)
            r = np.asarray([(index[n], t) for es in self.refs for n, t in es], dtype=np.uint32).reshape(-1, 2)
            arrays = (
                _offsets(self.bytes),
                np.ascontiguousarray(b[:, 0], dtype=np.uint8),
                np.ascontiguousarray(b[:, 1], dtype=np.uint8),
                np.ascontiguousarray(b[:, 2]),
                _offsets(self.refs),
                np.ascontiguousarray(r[:, 0]),
                np.ascontiguousarray(r[:, 1]),
                _offsets(self.eps),
                np.asarray([t for es in self.eps for t in es], dtype=np.uint32),
            )
            self._arrays = (arrays, names)
        return self._arrays

    def embed(self, dfa: DFA, start: int, end: int) -> None:
        """Copy ``dfa`` between ``start`` and ``end``."""
        base = len(self.eps)
        for _ in range(len(dfa.states)):
            self.state()
        for i, st in enumerate(dfa.states):
            self.bytes[base + i] = [(lo, hi, base + t) for lo, hi, t in st.bytes]
            self.refs[base + i] = [(name, base + t) for name, t in st.refs]
            if st.accepting:
                self.eps[base + i].append(end)
        self.eps[start].append(base)


def _offsets(lists: list[list[Any]]) -> np.ndarray:
    out = np.zeros(len(lists) + 1, dtype=np.uint32)
    np.cumsum([len(x) for x in lists], out=out[1:])
    return out


@dataclass
class DState:
    bytes: list[tuple[int, int, int]] = field(default_factory=list)  # sorted, disjoint
    refs: list[tuple[str, int]] = field(default_factory=list)
    accepting: bool = False


class DFA:
    """State 0 is the start state.  Either a list of states or a handle on a DFA built
    in C (``_core.DfaHandle``; its label l is ``names[l]``) whose states are
    materialized on first use: a DFA that is only ever copied into other automata
    never is.  Never mutated after construction."""

    __slots__ = ("_states", "handle", "names")

    def __init__(
        self, states: list[DState] | None = None, handle: Any = None, names: list[str] | None = None
    ) -> None:
        if (states is None) == (handle is None):
            raise ValueError("a DFA has either states or a handle")
        self._states = states
        self.handle = handle
        self.names = names

    def _label_mask(self, productive: set[str]) -> bytes:
        return bytes(n in productive for n in self.names or ())

    @property
    def states(self) -> list[DState]:
        if self._states is None:
            names = self.names
            assert names is not None
            self._states = [
                DState(edges, [(names[lab], t) for lab, t in labels], acc)
                for edges, labels, acc in self.handle.states()
            ]
        return self._states

    def __len__(self) -> int:
        return self.handle.n_states if self._states is None else len(self._states)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DFA) and self.states == other.states

    def __repr__(self) -> str:
        return f"DFA({self.states!r})"


def epsilon_closure(eps: Sequence[Sequence[int]], seeds: Iterable[int]) -> frozenset[int]:
    """The states reachable from ``seeds`` through ``eps`` (state -> epsilon successors)."""
    out = set(seeds)
    stack = list(seeds)
    while stack:
        s = stack.pop()
        for t in eps[s]:
            if t not in out:
                out.add(t)
                stack.append(t)
    return frozenset(out)


def _byte_moves(nfa: NFA, members: frozenset[int]) -> list[tuple[int, int, frozenset[int]]]:
    """Disjoint byte ranges and the NFA states they lead to (a sweep over range ends)."""
    events: dict[int, list[tuple[int, int]]] = {}
    for s in members:
        for lo, hi, t in nfa.bytes[s]:
            events.setdefault(lo, []).append((t, 1))
            events.setdefault(hi + 1, []).append((t, -1))
    if not events:
        return []
    active: dict[int, int] = {}
    moves: list[tuple[int, int, frozenset[int]]] = []
    cuts = sorted(events)
    for a, b in zip(cuts, cuts[1:], strict=False):
        for t, d in events[a]:
            n = active.get(t, 0) + d
            if n:
                active[t] = n
            else:
                del active[t]
        if not active:
            continue
        targets = frozenset(active)
        if moves and moves[-1][1] == a - 1 and moves[-1][2] == targets:
            moves[-1] = (moves[-1][0], b - 1, targets)
        else:
            moves.append((a, b - 1, targets))
    return moves


def build_dfa(nfa: NFA, start: int, final: int, max_states: int, max_bytes: int = 0) -> DFA:
    """The minimal DFA of ``nfa`` from ``start`` (subset construction and
    minimization in C); raises LimitError past ``max_states``, ``max_bytes`` of
    memory (0: none) or the thread's deadline."""
    from ._core import fsm_build_handle

    arrays, names = nfa.arrays()
    deadline.check("automaton build")
    left = deadline.remaining()  # first: C's deadline is then never before check()'s
    try:
        h, used = fsm_build_handle(
            *arrays,
            start,
            final,
            max_states,
            max_bytes,
            0.0 if left == float("inf") else time.monotonic() + left,
        )
    except LimitError as e:
        if e.limit == "deadline_ms":
            deadline.check("automaton build")  # the same error, naming the setting
        raise
    return DFA(handle=h, names=[names[i] for i in used])


def build_dfa_states(nfa: NFA, start: int, final: int, max_states: int) -> DFA:
    """``build_dfa`` converted to a list of states in Python (the former conversion,
    kept as a reference for the tests)."""
    from ._core import fsm_build

    arrays, names = nfa.arrays()
    class_lo, trans, acc, lab_off, lab, lab_to = fsm_build(*arrays, start, final, max_states)
    los = np.frombuffer(class_lo, dtype=np.uint16).tolist()
    n_classes = len(los) - 1
    table = np.frombuffer(trans, dtype=np.int32).reshape(-1, n_classes).tolist()
    accepting = list(acc)
    loff = np.frombuffer(lab_off, dtype=np.uint32).tolist()
    labs = np.frombuffer(lab, dtype=np.uint32).tolist()
    ltos = np.frombuffer(lab_to, dtype=np.uint32).tolist()
    states = []
    for k, row in enumerate(table):
        edges: list[tuple[int, int, int]] = []
        for c, t in enumerate(row):
            if t < 0:
                continue
            if edges and edges[-1][2] == t and edges[-1][1] == los[c] - 1:
                edges[-1] = (edges[-1][0], los[c + 1] - 1, t)
            else:
                edges.append((los[c], los[c + 1] - 1, t))
        refs = [(names[labs[e]], ltos[e]) for e in range(loff[k], loff[k + 1])]
        refs.sort()
        states.append(DState(edges, refs, bool(accepting[k])))
    return DFA(states)


def determinize(nfa: NFA, start: int, final: int, max_states: int) -> DFA:
    """Subset construction; raises LimitError past ``max_states``."""
    first = epsilon_closure(nfa.eps, (start,))
    index: dict[frozenset[int], int] = {first: 0}
    order = [first]
    states: list[DState] = []
    closures: dict[frozenset[int], frozenset[int]] = {}

    def target(seeds: frozenset[int]) -> int:
        cl = closures.get(seeds)
        if cl is None:
            cl = closures[seeds] = epsilon_closure(nfa.eps, seeds)
        i = index.get(cl)
        if i is None:
            if len(order) >= max_states:
                raise LimitError(
                    f"automaton exceeds max_dfa_states={max_states}", limit="max_dfa_states", value=max_states
                )
            i = index[cl] = len(order)
            order.append(cl)
        return i

    k = 0
    while k < len(order):
        deadline.check("subset construction")
        members = order[k]
        st = DState(accepting=final in members)
        st.bytes = [(lo, hi, target(ts)) for lo, hi, ts in _byte_moves(nfa, members)]
        calls: dict[str, set[int]] = {}
        for s in members:
            for name, t in nfa.refs[s]:
                calls.setdefault(name, set()).add(t)
        st.refs = [(name, target(frozenset(ts))) for name, ts in sorted(calls.items())]
        states.append(st)
        k += 1
    return DFA(states)


def _dense(dfa: DFA) -> tuple[np.ndarray, list[tuple[int, int]], list[str]]:
    """The DFA as a dense [states, labels] target table (-1 = none) over its own
    byte intervals followed by its call labels."""
    edges = [(s, lo, hi, t) for s, st in enumerate(dfa.states) for lo, hi, t in st.bytes]
    cuts = sorted({0, 256} | {x for _, lo, hi, _ in edges for x in (lo, hi + 1)})
    starts = np.asarray(cuts[:-1], dtype=np.int64)
    names = sorted({name for st in dfa.states for name, _ in st.refs})
    col = {name: len(starts) + i for i, name in enumerate(names)}
    table = np.full((len(dfa.states), len(starts) + len(names)), -1, dtype=np.int64)
    if edges:
        e = np.asarray(edges, dtype=np.int64)
        i0 = np.searchsorted(starts, e[:, 1])
        i1 = np.searchsorted(starts, e[:, 2] + 1)
        counts = i1 - i0
        rows = np.repeat(e[:, 0], counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        table[rows, np.repeat(i0, counts) + offsets] = np.repeat(e[:, 3], counts)
    for s, st in enumerate(dfa.states):
        for name, t in st.refs:
            table[s, col[name]] = t
    intervals = [(lo, hi - 1) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    return table, intervals, names


def minimize(dfa: DFA) -> DFA:
    """Moore partition refinement, vectorized over a dense transition table."""
    n = len(dfa.states)
    if n <= 1:
        return dfa
    table, intervals, names = _dense(dfa)
    block = np.asarray([1 if st.accepting else 0 for st in dfa.states], dtype=np.int64)
    n_blocks = len(np.unique(block))
    weights = np.random.default_rng(0x5EED).integers(1, 2**62, size=table.shape[1] + 1, dtype=np.int64) | 1
    while True:
        deadline.check("minimization")
        targets = np.where(table >= 0, block[np.maximum(table, 0)], -1)
        sig = np.concatenate([block[:, None], targets], axis=1)
        with np.errstate(over="ignore"):
            key = (sig + 2) @ weights  # wraps modulo 2**64: a hash of the row
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if not np.array_equal(sig, sig[first[inverse]]):  # a hash collision: stay exact
            _, first, inverse = np.unique(sig, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        if len(first) == n_blocks:
            break
        block, n_blocks = inverse, len(first)
    # renumber blocks in order of first appearance, so the start state's block is 0
    order: dict[int, int] = {}
    for b in block.tolist():
        order.setdefault(b, len(order))
    new_id = np.asarray([order[b] for b in block.tolist()], dtype=np.int64)
    out: list[DState | None] = [None] * len(order)
    n_iv = len(intervals)
    for s in range(n):
        b = int(new_id[s])
        if out[b] is not None:
            continue
        row = np.where(table[s] >= 0, new_id[np.maximum(table[s], 0)], -1).tolist()
        edges = [(lo, hi, row[i]) for i, (lo, hi) in enumerate(intervals) if row[i] >= 0]
        refs = [(name, row[n_iv + j]) for j, name in enumerate(names) if row[n_iv + j] >= 0]
        out[b] = DState(_merge_ranges(edges), refs, dfa.states[s].accepting)
    return DFA([st for st in out if st is not None])


def _merge_ranges(edges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for lo, hi, t in edges:
        if out and out[-1][1] == lo - 1 and out[-1][2] == t:
            out[-1] = (out[-1][0], hi, t)
        else:
            out.append((lo, hi, t))
    return out


def trim(dfa: DFA, productive: set[str]) -> DFA | None:
    """Drop calls to unproductive rules and states that cannot reach acceptance
    or cannot be reached; None when the start state itself is dead."""
    if dfa.handle is not None:
        got = dfa.handle.trim(dfa._label_mask(productive))
        if got is None:
            return None
        h, used = got
        names = dfa.names or []
        return DFA(handle=h, names=[names[i] for i in used])
    return trim_states(dfa, productive)


def trim_states(dfa: DFA, productive: set[str]) -> DFA | None:
    """``trim`` in Python, on the list of states."""
    n = len(dfa.states)
    preds: list[set[int]] = [set() for _ in range(n)]
    for s, st in enumerate(dfa.states):
        for _, _, t in st.bytes:
            preds[t].add(s)
        for name, t in st.refs:
            if name in productive:
                preds[t].add(s)
    live = {s for s, st in enumerate(dfa.states) if st.accepting}
    stack = list(live)
    while stack:
        for p in preds[stack.pop()]:
            if p not in live:
                live.add(p)
                stack.append(p)
    if 0 not in live:
        return None
    reach = {0}
    stack = [0]
    while stack:
        st = dfa.states[stack.pop()]
        nxt = [t for _, _, t in st.bytes] + [t for name, t in st.refs if name in productive]
        for t in nxt:
            if t in live and t not in reach:
                reach.add(t)
                stack.append(t)
    keep = sorted(reach)
    new_id = {s: i for i, s in enumerate(keep)}
    states = []
    for s in keep:
        st = dfa.states[s]
        states.append(
            DState(
                _merge_ranges([(lo, hi, new_id[t]) for lo, hi, t in st.bytes if t in new_id]),
                [(name, new_id[t]) for name, t in st.refs if name in productive and t in new_id],
                st.accepting,
            )
        )
    return DFA(states)


def can_accept(dfa: DFA, productive: set[str]) -> bool:
    """Does the DFA accept some string when calls to ``productive`` rules count as steps?"""
    if dfa.handle is not None:
        return bool(dfa.handle.can_accept(dfa._label_mask(productive)))
    seen = {0}
    stack = [0]
    while stack:
        st = dfa.states[stack.pop()]
        if st.accepting:
            return True
        for t in [t for _, _, t in st.bytes] + [t for name, t in st.refs if name in productive]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return False
