"""Byte automata with rule calls: the NFA builder, subset construction and
minimization used by the compiler.

Edges are labelled with a byte range ``(lo, hi)`` or with a rule name (a call:
the called rule's whole language is consumed there).  A DFA is deterministic
over both kinds of labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import LimitError


class NFA:
    """Thompson-style NFA: states are ints; edges are kept per state."""

    def __init__(self) -> None:
        self.bytes: list[list[tuple[int, int, int]]] = []
        self.refs: list[list[tuple[str, int]]] = []
        self.eps: list[list[int]] = []

    def state(self) -> int:
        self.bytes.append([])
        self.refs.append([])
        self.eps.append([])
        return len(self.eps) - 1

    def __len__(self) -> int:
        return len(self.eps)

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


@dataclass
class DState:
    bytes: list[tuple[int, int, int]] = field(default_factory=list)  # sorted, disjoint
    refs: list[tuple[str, int]] = field(default_factory=list)
    accepting: bool = False


@dataclass
class DFA:
    """State 0 is the start state."""

    states: list[DState]

    def __len__(self) -> int:
        return len(self.states)


def _closure(nfa: NFA, seeds: frozenset[int] | set[int]) -> frozenset[int]:
    out = set(seeds)
    stack = list(seeds)
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in out:
                out.add(t)
                stack.append(t)
    return frozenset(out)


def _byte_moves(nfa: NFA, members: frozenset[int]) -> list[tuple[int, int, frozenset[int]]]:
    edges = [e for s in members for e in nfa.bytes[s]]
    if not edges:
        return []
    cuts = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
    moves: list[tuple[int, int, frozenset[int]]] = []
    for a, b in zip(cuts, cuts[1:]):
        targets = frozenset(t for lo, hi, t in edges if lo <= a and b - 1 <= hi)
        if not targets:
            continue
        if moves and moves[-1][1] == a - 1 and moves[-1][2] == targets:
            moves[-1] = (moves[-1][0], b - 1, targets)
        else:
            moves.append((a, b - 1, targets))
    return moves


def determinize(nfa: NFA, start: int, final: int, max_states: int) -> DFA:
    """Subset construction; raises LimitError past ``max_states``."""
    first = _closure(nfa, {start})
    index: dict[frozenset[int], int] = {first: 0}
    order = [first]
    states: list[DState] = []
    closures: dict[frozenset[int], frozenset[int]] = {}

    def target(seeds: frozenset[int]) -> int:
        cl = closures.get(seeds)
        if cl is None:
            cl = closures[seeds] = _closure(nfa, seeds)
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


def minimize(dfa: DFA) -> DFA:
    """Moore partition refinement over byte ranges and call labels."""
    n = len(dfa.states)
    block = [1 if st.accepting else 0 for st in dfa.states]
    while True:
        sigs: dict[tuple[object, ...], int] = {}
        new = []
        for st, b in zip(dfa.states, block):
            sig = (
                b,
                tuple(_merge_ranges([(lo, hi, block[t]) for lo, hi, t in st.bytes])),
                tuple((name, block[t]) for name, t in st.refs),
            )
            new.append(sigs.setdefault(sig, len(sigs)))
        if len(sigs) == len(set(block)):
            break
        block = new
    # renumber so the start state's block is 0, in first-seen order
    order: dict[int, int] = {}
    for s in range(n):
        order.setdefault(block[s], len(order))
    out: list[DState | None] = [None] * len(order)
    for s, st in enumerate(dfa.states):
        b = order[block[s]]
        if out[b] is None:
            merged = _merge_ranges([(lo, hi, order[block[t]]) for lo, hi, t in st.bytes])
            out[b] = DState(merged, [(name, order[block[t]]) for name, t in st.refs], st.accepting)
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
