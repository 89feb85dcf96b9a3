"""Reference automaton algorithms, in Python, for the tests to compare the C core with.

The package builds every automaton in C (``csrc/fsm.c``: Thompson construction from the
encoded IR, subset construction, Hopcroft minimization, trimming).  This module keeps the
slow constructions those replaced: a Python NFA with Thompson construction from the IR
(:class:`Builder`), subset construction (:func:`determinize`), Moore minimization
(:func:`minimize`) and trimming on lists of states (:func:`trim_states`).

Edges are labelled with a byte range ``(lo, hi)`` or with a rule name (a call:
the called rule's whole language is consumed there).  A DFA is deterministic
over both kinds of labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from cfgmask import ir
from cfgmask.compile import automaton
from cfgmask.compile.automaton import DState
from cfgmask.compile.encode import token_label
from cfgmask.compile.limits import CompileLimits
from cfgmask.errors import LimitError
from cfgmask.utf8 import byte_sequences

from . import reference_pipeline


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

    def embed(self, dfa: AnyDFA, start: int, end: int) -> None:
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


class DFA:
    """A DFA as a list of states; state 0 is the start state."""

    __slots__ = ("states",)

    def __init__(self, states: list[DState]) -> None:
        self.states = states

    def __len__(self) -> int:
        return len(self.states)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (DFA, automaton.DFA)) and self.states == other.states

    def __repr__(self) -> str:
        return f"DFA({self.states!r})"


AnyDFA = DFA | automaton.DFA


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


def build_dfa(nfa: NFA, start: int, final: int, max_states: int) -> automaton.DFA:
    """The minimal DFA of ``nfa`` from ``start`` (subset construction and
    minimization in C); raises LimitError past ``max_states``."""
    from cfgmask._core import fsm_build_handle

    arrays, names = nfa.arrays()
    h, used = fsm_build_handle(*arrays, start, final, max_states)
    return automaton.DFA(h, [names[i] for i in used])


def build_dfa_states(nfa: NFA, start: int, final: int, max_states: int) -> DFA:
    """``build_dfa`` converted to a list of states in Python (the former conversion,
    kept as a reference for the tests)."""
    from cfgmask._core import fsm_build

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


def trim(dfa: AnyDFA, productive: set[str]) -> AnyDFA | None:
    """Drop calls to unproductive rules and states that cannot reach acceptance
    or cannot be reached; None when the start state itself is dead."""
    if isinstance(dfa, automaton.DFA):
        return reference_pipeline.trim(dfa, productive)
    return trim_states(dfa, productive)


def trim_states(dfa: AnyDFA, productive: set[str]) -> DFA | None:
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


def can_accept(dfa: AnyDFA, productive: set[str]) -> bool:
    """Does the DFA accept some string when calls to ``productive`` rules count as steps?"""
    if isinstance(dfa, automaton.DFA):
        return reference_pipeline.can_accept(dfa, productive)
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


# ---- Thompson construction from the IR (csrc/fsm.c cm_fsm_build_ir is the fast path)


class Builder:
    """Thompson construction of one rule (or one right-linear component)."""

    def __init__(
        self, nfa: NFA, fragments: dict[str, automaton.DFA], inline: set[str], entries: dict[str, int]
    ) -> None:
        self.nfa = nfa
        self.fragments = fragments
        self.inline = inline
        self.entries = entries  # members of the right-linear component being built

    def build(self, e: ir.Expr, start: int, end: int, tail: bool) -> None:
        nfa = self.nfa
        if isinstance(e, ir.Literal):
            cur = start
            for i, b in enumerate(e.data):
                nxt = end if i == len(e.data) - 1 else nfa.state()
                nfa.bytes[cur].append((b, b, nxt))
                cur = nxt
            if not e.data:
                nfa.eps[start].append(end)
        elif isinstance(e, ir.ByteClass):
            nfa.bytes[start].extend((lo, hi, end) for lo, hi in e.ranges)
        elif isinstance(e, ir.CharClass):
            for seq in byte_sequences(e.ranges):
                cur = start
                for i, (lo, hi) in enumerate(seq):
                    nxt = end if i == len(seq) - 1 else nfa.state()
                    nfa.bytes[cur].append((lo, hi, nxt))
                    cur = nxt
        elif isinstance(e, ir.Seq):
            cur = start
            for i, x in enumerate(e.items):
                last = i == len(e.items) - 1
                nxt = end if last else nfa.state()
                self.build(x, cur, nxt, tail and last)
                cur = nxt
            if not e.items:
                nfa.eps[start].append(end)
        elif isinstance(e, ir.Alt):
            for x in e.items:
                s = nfa.state()
                nfa.eps[start].append(s)
                self.build(x, s, end, tail)
        elif isinstance(e, ir.Repeat):
            self.repeat(e, start, end)
        elif isinstance(e, ir.Ref):
            self.ref(e.name, start, end, tail)
        elif isinstance(e, ir.Token):
            nfa.refs[start].append((token_label(e), end))
        else:
            raise TypeError(f"not an IR expression: {e!r}")

    def repeat(self, e: ir.Repeat, start: int, end: int) -> None:
        nfa = self.nfa
        cur = start
        for _ in range(e.lo):
            nxt = nfa.state()
            self.build(e.item, cur, nxt, False)
            cur = nxt
        if e.hi is None:
            loop = nfa.state()
            nfa.eps[cur].append(loop)
            body = nfa.state()
            nfa.eps[loop].append(body)
            self.build(e.item, body, loop, False)
            nfa.eps[loop].append(end)
            return
        for _ in range(e.hi - e.lo):
            nxt = nfa.state()
            nfa.eps[cur].append(end)
            self.build(e.item, cur, nxt, False)
            cur = nxt
        nfa.eps[cur].append(end)

    def ref(self, name: str, start: int, end: int, tail: bool) -> None:
        if name in self.entries:
            assert tail, "right-linear components only have tail calls"
            self.nfa.eps[start].append(self.entries[name])
        elif name in self.inline:
            self.nfa.embed(self.fragments[name], start, end)
        else:
            self.nfa.refs[start].append((name, end))


def build_component(
    sess: object,
    rules: dict[str, ir.Expr],
    comp: list[str],
    right_linear: bool,
    usable_names: list[str],
    fragments: dict[str, automaton.DFA],
    limits: CompileLimits,
) -> dict[str, automaton.DFA]:
    """``components._build_in_c`` with the Python Thompson construction (and C determinization)."""
    usable = set(usable_names)
    nfa = NFA()
    final = nfa.state()
    out: dict[str, automaton.DFA] = {}
    if right_linear:
        entries = {m: nfa.state() for m in comp}
        b = Builder(nfa, fragments, usable, entries)
        for m in comp:
            b.build(rules[m], entries[m], final, True)
        for m in comp:
            out[m] = build_dfa(nfa, entries[m], final, limits.max_dfa_states)
        return out
    for m in comp:  # members only call each other: one small NFA each
        nfa = NFA()
        final = nfa.state()
        s = nfa.state()
        Builder(nfa, fragments, usable, {}).build(rules[m], s, final, True)
        out[m] = build_dfa(nfa, s, final, limits.max_dfa_states)
    return out
