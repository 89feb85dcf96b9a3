"""Counted repetitions as *segments*: the compile side of counters in the parser (step (a) of
docs/design.md §7, "Counters in the parser for counted repetition", and "Segments on the compile
side", session 33).

With ``CompileLimits.counters`` on, a bounded repetition ``x{lo,hi}`` that qualifies is not
unrolled: the rule that holds it keeps x's loop ``x*`` once, its states tagged, and an Earley
item in a tagged state carries a count ``k`` (the units read since it entered the loop).  Until
the C chart counts (step (b)), nothing here reaches C: :func:`segment_form` builds this form
beside the C tables (``Tables.segments``), which stay today's unrolled ones.

**Qualifying** (:func:`qualifies` on the IR, then :func:`_splice` on the automata; the reason a
count stays unrolled is kept in :attr:`SegmentForm.refused`):

* ``hi`` bounded, ``lo <= hi`` and ``hi >= MIN_HI`` (a small count is cheaper unrolled);
* x reads bytes only (literals, byte and character classes, sequences, alternatives and
  repetitions of them, and references to non-recursive rules of those, which are inlined): no
  call, token terminal, lookahead marker or literal set;
* the repetition is the outermost qualifying one (a count inside x stays unrolled in x);
* x's trimmed minimal DFA is a *prefix code*: its start is not accepting and has no in-edge, and
  it has one accepting state, with no out-edge (no word of x a proper prefix of another);
* deterministic entry: in the rule's automaton built with the count as an opaque label
  ``<segment N>`` (edge A -> B), A has that label as its only edge and is not accepting, so A
  can *be* the loop's head;
* deterministic exit: B has byte edges only (no call after the count in the same position), and
  none of them reads a first byte of x;
* after a call in its rule, a call test (``call_test``): ``k`` must be a function of (state,
  origin, set), which is false in general (``P x{0,10}`` with ``P = x* | "(" P ")"``: the call
  ends at several positions and one item would need several counts, tests/test_segments.py).
  Two counts for one item need two entries into the loop at different positions; the default
  ``"follow"`` takes a place if no item can enter while another is inside
  (:func:`_late_entry_impossible`, by the bytes that may precede the entry and the unit's edges:
  every JSON string passes) or if the calls before it complete at one position per path
  (:class:`_Follow`).  Without a call before it, the bytes from an item's origin follow one path.

A key (x, lo, hi) refused at any of its places is unrolled at all of them.

**Tags**, per rule automaton (:class:`SegmentRule`): ``seg[s]`` the segment id of state s or -1;
per segment (:class:`Segment`) ``lo``, ``hi`` and its ``head``; per byte edge a flags word:

* ``INTO``: an edge of the head into x (x's first bytes); needs ``k < hi``;
* ``BACK``: an edge that completes a unit and lands on the head: ``k + 1`` (a one-byte unit's
  edge is INTO and BACK at once, head -> head);
* ``EXIT``: an edge of the head out of the segment (B's edges); needs ``k >= lo``, and the count
  is dropped (an exit that lands on a head again enters it afresh, ``k = 0``).

Any other edge into a head (or a prediction of a rule whose start is a head) enters with
``k = 0``.  The head is accepting iff B was, and then only at ``k >= lo``.  Interior states
(x's states but its start and its accepting state) only read on inside x or BACK to their head.

**Minimisation** never merges a segment's state with a state outside it or with another
segment's: the rule's automaton is minimised with the count as an opaque label (nothing of x in
it), x's automaton alone, and the splice creates states but merges none; each place of a count
gets its own copy of x's states (tests/test_segments.py minimises the result with the tags as
the first partition's colours and checks that nothing merges).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .. import ir
from .automaton import DFA
from .cache import AutomatonCache
from .limits import CompileLimits

MIN_HI = 8  # counts with a smaller hi stay unrolled
INTO, BACK, EXIT = 1, 2, 4
PLACEHOLDER = "<segment {}>"
# a rule automaton as lists: per state its byte edges (lo, hi, target), its calls (name, target),
# whether it accepts
_Auto = tuple[list[list[tuple[int, int, int]]], list[list[tuple[str, int]]], list[bool]]


@dataclass(frozen=True)
class Segment:
    """One place of a counted repetition: ``key`` names the count (its unit and bounds), shared
    by every place of the same count; ``rule`` and ``head`` where this place is."""

    key: str
    lo: int
    hi: int
    rule: str
    head: int


@dataclass
class SegmentRule:
    """One runtime rule's automaton in segment form.  State 0 is the start."""

    edges: list[list[tuple[int, int, int, int]]]  # per state: (byte lo, byte hi, target, flags)
    calls: list[list[tuple[str, int]]]  # per state: (callee or token label, target)
    accepting: list[bool]  # for a head: accepting only at k >= lo
    seg: list[int]  # per state: segment id (index in SegmentForm.segments) or -1

    def __len__(self) -> int:
        return len(self.accepting)


@dataclass
class SegmentForm:
    """The runtime rules in segment form, and what became of each qualifying count."""

    start: str
    rules: dict[str, SegmentRule]
    segments: list[Segment]
    units: dict[str, tuple[ir.Expr, int, int]] = field(default_factory=dict)  # key -> (x, lo, hi)
    refused: list[tuple[ir.Expr, int, int, str]] = field(default_factory=list)  # (x, lo, hi, why unrolled)
    tokens: frozenset[str] = frozenset()  # labels that are token terminals
    markers: frozenset[str] = frozenset()  # labels that are lookahead markers

    @property
    def n_states(self) -> int:
        return sum(len(r) for r in self.rules.values())


def bytes_only(e: ir.Expr, rules: dict[str, ir.Expr], memo: dict[str, bool] | None = None) -> bool:
    """Does ``e`` read bytes only: literals, byte and character classes, sequences, alternatives
    and repetitions of them, and references to rules that read bytes only and do not recurse
    (they are inlined into the unit's automaton; :func:`_unit_shape` checks that they were)?
    No token terminal, lookahead marker or literal set."""
    memo = {} if memo is None else memo
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, (ir.Seq, ir.Alt)):
            stack.extend(x.items)
        elif isinstance(x, ir.Repeat):
            stack.append(x.item)
        elif isinstance(x, ir.Ref):
            got = memo.get(x.name)
            if got is None:
                memo[x.name] = False  # a cycle through it reads as "no"
                body = rules.get(x.name)
                got = memo[x.name] = body is not None and bytes_only(body, rules, memo)
            if not got:
                return False
        elif not isinstance(x, (ir.Literal, ir.ByteClass, ir.CharClass)):
            return False
    return True


def qualifies(e: ir.Expr, rules: dict[str, ir.Expr], memo: dict[str, bool] | None = None) -> bool:
    """The IR tests of a count (the automaton tests come after the build)."""
    return (
        isinstance(e, ir.Repeat)
        and e.hi is not None
        and 0 <= e.lo <= e.hi
        and e.hi >= MIN_HI
        and bytes_only(e.item, rules, memo)
    )


def _placeholders(
    rules: dict[str, ir.Expr],
    refused: set[tuple[ir.Expr, int, int]],
    plain: dict[str, bool] | None = None,
    same: set[int] | None = None,
) -> tuple[dict[str, ir.Expr], dict[str, tuple[ir.Expr, int, int]]]:
    """The rules with each qualifying count (outermost first, not in ``refused``) replaced by a
    call of its placeholder, the placeholder rules' bodies (x) added; and the units by key.
    Across the rounds of one form (``refused`` only grows): ``plain``, bytes_only's memo by rule;
    ``same``, the ids of ``rules``' nodes that came out unchanged (every count in them refused,
    so they stay unchanged), gathered here and skipped."""
    names: dict[tuple[ir.Expr, int, int], str] = {}
    units: dict[str, tuple[ir.Expr, int, int]] = {}
    memo: dict[int, ir.Expr] = {}
    plain = {} if plain is None else plain
    same = set() if same is None else same
    k = 0

    def name_of(x: ir.Expr, lo: int, hi: int) -> str:
        nonlocal k
        got = names.get((x, lo, hi))
        if got is None:
            while PLACEHOLDER.format(k) in rules:
                k += 1
            got = names[(x, lo, hi)] = PLACEHOLDER.format(k)
            units[got] = (x, lo, hi)
            k += 1
        return got

    def rewrite(e: ir.Expr) -> ir.Expr:
        if id(e) in same:
            return e
        got = memo.get(id(e))
        if got is not None:
            return got
        new: ir.Expr = e
        if isinstance(e, ir.Repeat):
            if qualifies(e, rules, plain) and (e.item, e.lo, e.hi) not in refused:
                new = ir.Ref(name_of(e.item, e.lo, e.hi))  # type: ignore[arg-type]
            else:
                item = rewrite(e.item)
                new = e if item is e.item else ir.Repeat(item, e.lo, e.hi)
        elif isinstance(e, (ir.Seq, ir.Alt)):
            items = tuple(rewrite(x) for x in e.items)
            if any(a is not b for a, b in zip(items, e.items, strict=True)):
                new = type(e)(items)
        memo[id(e)] = new
        if new is e:
            same.add(id(e))
        return new

    out = {n: rewrite(b) for n, b in rules.items()}
    for name, (x, _, _) in units.items():
        out[name] = x
    return out, units


def _states(d: DFA) -> _Auto:
    # straight from the C handle (what DFA.states holds, without its DState objects)
    return d.handle.named_states(d.names)  # type: ignore[no-any-return]


def _trim(dfas: dict[str, DFA], start: str, units: Iterable[str], tokens: frozenset[str]) -> dict[str, _Auto]:
    """The runtime rules reachable from ``start``, productive ones only, each without dead or
    unreachable states (calls of a placeholder count as reading its unit).  In C on the rules'
    handles (csrc/dfa.c: ``cm_dfa_can_accept``, ``cm_dfa_trim``, the compile's own trim): only
    the kept rules' states become lists (tests/test_segment_fixpoints.py has the Python loops)."""
    unit_set = set(units)
    productive: set[str] = set(tokens) | unit_set
    callers: dict[str, set[str]] = {}
    for n, d in dfas.items():
        for c in d.names:  # every label's name: a spare caller only rechecks a rule
            callers.setdefault(c, set()).add(n)
    pending = list(dfas)  # a rule is rechecked when a rule it calls turns productive
    queued = set(pending)
    while pending:
        n = pending.pop()
        queued.discard(n)
        if n in productive:
            continue
        d = dfas[n]
        if d.handle.can_accept(bytes([c in productive for c in d.names]) or b"\0"):
            productive.add(n)
            for c in callers.get(n, ()):
                if c not in productive and c not in queued:
                    queued.add(c)
                    pending.append(c)
    if start not in productive:
        raise ValueError(f"rule {start!r} derives no finite string")
    out: dict[str, _Auto] = {}
    order = [start]
    seen = {start}
    while order:
        n = order.pop()
        d = dfas[n]
        ok = [c in productive for c in d.names]
        if d.handle.live and all(ok):  # minimization's mark: every state kept, every label
            out[n] = _states(d)
        else:
            got = d.handle.trim(bytes(ok) or b"\0")
            assert got is not None  # n is productive: its start is live
            h, old = got
            out[n] = h.named_states([d.names[i] for i in old])
        for cs in out[n][1]:
            for c, _ in cs:
                if c not in seen and c not in tokens and c not in unit_set:
                    seen.add(c)
                    order.append(c)
    return out


def _after_call(
    calls: list[list[tuple[str, int]]], edges: list[list[tuple[int, int, int]]], units: set[str]
) -> list[bool]:
    """Per state: is it reachable from the target of a call edge (a placeholder is no call)?"""
    n = len(calls)
    seen = [False] * n
    todo = [t for cs in calls for c, t in cs if c not in units]
    for t in todo:
        seen[t] = True
    while todo:
        s = todo.pop()
        for _, _, t in edges[s]:
            if not seen[t]:
                seen[t] = True
                todo.append(t)
        for _, t in calls[s]:
            if not seen[t]:
                seen[t] = True
                todo.append(t)
    return seen


def _unit_shape(
    unit: _Auto,
) -> str | None:
    """Why x's trimmed DFA is not a prefix code with a clean start, or None if it is."""
    edges, calls, acc = unit
    if any(calls):
        return "the unit calls a rule"
    if acc[0]:
        return "the unit matches the empty string"
    if any(t == 0 for es in edges for _, _, t in es):
        return "the unit's start is re-entered"
    finals = [s for s in range(len(acc)) if acc[s]]
    if len(finals) != 1 or edges[finals[0]]:
        return "the unit is not a prefix code"
    return None


_ALL = (1 << 257) - 1  # a token terminal or a lookahead marker: meets every set


def _bits(lo: int, hi: int) -> int:
    return ((1 << (hi - lo + 1)) - 1) << lo


class _Follow:
    """FIRST, CONT and determinism of the runtime rules, for the call test ``"follow"``.

    ``first(P, s)``: the bytes a path from state s of rule P may read next (through nullable
    calls).  ``cont(P)``: the bytes that may extend a complete word of P to a longer one, sound
    where ``det(P)``: every state of P (and of the rules it reaches) with calls has pairwise
    disjoint FIRST sets on its edges, and each call ``s -Q-> t`` has CONT(Q) disjoint from
    first(P, t).  Then a text has at most one path through P, and two completions of a call
    cannot both go on.  A placeholder counts as a call of ``x{lo,hi}``: nullable iff lo = 0, its
    FIRST x's first bytes, its CONT the same (conservative); token terminals and markers meet
    every set."""

    def __init__(
        self, rules: dict[str, _Auto], shapes: dict[str, _Auto], units: dict[str, tuple[ir.Expr, int, int]]
    ) -> None:
        self.rules = rules
        self.fixed: dict[str, tuple[bool, int]] = {}  # label -> (nullable, FIRST = CONT)
        self.fixed_last: dict[str, int] = {}  # label -> LAST
        for u, (xe, _, xacc) in shapes.items():
            f = last = 0
            for q in range(len(xe)):
                for a, b, t in xe[q]:
                    if q == 0:
                        f |= _bits(a, b)
                    if xacc[t]:
                        last |= _bits(a, b)
            self.fixed[u] = (units[u][1] == 0, f)
            self.fixed_last[u] = last
        self.null_acc: dict[str, list[bool]] = {n: list(acc) for n, (_, _, acc) in rules.items()}
        self.firsts: dict[str, list[int]] = {n: [0] * len(acc) for n, (_, _, acc) in rules.items()}
        self.conts: dict[str, int] = dict.fromkeys(rules, 0)
        # per rule: per state the bytes of its own edges (out) and of the edges into it (into)
        self.out_bits: dict[str, list[int]] = {}
        self.into_bits: dict[str, list[int]] = {}
        self.callers: dict[str, set[str]] = {}  # rule -> the rules that call it
        for n, (edges, calls, _) in rules.items():
            out = []
            into = [0] * len(edges)
            for es in edges:
                o = 0
                for a, b, t in es:
                    bits = ((2 << (b - a)) - 1) << a  # _bits(a, b), inlined: the form's hottest loop
                    o |= bits
                    into[t] |= bits
                out.append(o)
            self.out_bits[n] = out
            self.firsts[n] = list(out)  # FIRST starts at a state's own bytes (below every fixpoint)
            self.into_bits[n] = into
            for cs in calls:
                for c, _ in cs:
                    if c in rules:
                        self.callers.setdefault(c, set()).add(n)
        self._inb: dict[str, list[int]] = {}  # inb(n) with start _ALL, once the fixpoints are done
        self._done = False
        self._fix()
        self.lasts: dict[str, int] = dict.fromkeys(rules, 0)
        self._det: dict[str, bool] = {}
        # LAST of every rule (the last bytes of its non-empty words), a least fixpoint: a rule is
        # recomputed when the LAST of a rule it calls grows
        todo = list(rules)
        queued = set(todo)
        while todo:
            n = todo.pop()
            queued.discard(n)
            inb = self.inb(n, 0)
            last = 0
            for st, ok in enumerate(self.null_acc[n]):
                if ok:
                    last |= inb[st]
            if last != self.lasts[n]:
                self.lasts[n] = last
                for c in self.callers.get(n, ()):
                    if c not in queued:
                        queued.add(c)
                        todo.append(c)
        self._done = True

    def last_of(self, c: str) -> int:
        if c in self.rules:
            return self.lasts[c]
        return self.fixed_last.get(c, _ALL)

    def inb(self, n: str, start: int = _ALL) -> list[int]:
        """Per state of rule ``n``: the bytes that may be the last one read before an item is
        there (``start``: before the rule's own first byte, where the caller's context is).
        The list is shared: read it, do not change it."""
        done = self._done
        if done and start == _ALL:
            memo = self._inb.get(n)
            if memo is not None:
                return memo
        _, calls, _ = self.rules[n]
        inb = list(self.into_bits[n])
        inb[0] |= start
        fwd: list[list[int]] = [[] for _ in calls]  # the nullable calls st -> t: inb[st] flows on
        for st, cs in enumerate(calls):
            for c, t in cs:
                inb[t] |= self.last_of(c)
                if self.nullable(c):
                    fwd[st].append(t)
        todo = [st for st, f in enumerate(fwd) if f]
        while todo:
            st = todo.pop()
            v = inb[st]
            for t in fwd[st]:
                got = inb[t] | v
                if got != inb[t]:
                    inb[t] = got
                    if fwd[t]:
                        todo.append(t)
        if done and start == _ALL:
            self._inb[n] = inb
        return inb

    def nullable(self, c: str) -> bool:
        if c in self.rules:
            return self.null_acc[c][0]
        return self.fixed.get(c, (True, _ALL))[0]

    def first_of(self, c: str) -> int:
        if c in self.rules:
            return self.firsts[c][0]
        return self.fixed.get(c, (True, _ALL))[1]

    def cont_of(self, c: str) -> int:
        if c in self.rules:
            return self.conts[c]
        return self.fixed.get(c, (True, _ALL))[1]

    def _fix(self) -> None:
        """NULL_ACC, FIRST and CONT, least fixpoints, all three together: a rule is swept until
        it settles, and its callers again when what they read of it (its start's nullability
        and FIRST, its CONT) grew."""
        rules, firsts, null_acc, conts, fixed = self.rules, self.firsts, self.null_acc, self.conts, self.fixed
        # per rule: its states with calls, last first (a sweep's order), and what the others give
        # CONT, which never changes (their FIRST is their own bytes, set at the start)
        swept: dict[str, tuple[list[int], int]] = {}
        for n, (_, calls, _) in rules.items():
            na, fs = null_acc[n], firsts[n]
            base = 0
            for st in range(len(calls)):
                if not calls[st] and na[st]:
                    base |= fs[st]
            swept[n] = ([st for st in reversed(range(len(calls))) if calls[st]], base)
        todo = list(rules)
        queued = set(todo)
        while todo:
            n = todo.pop()
            queued.discard(n)
            calls = rules[n][1]
            na, fs = null_acc[n], firsts[n]
            states, base = swept[n]
            before = (na[0], fs[0], conts[n])
            changed = True
            while changed:
                changed = False
                cont = conts[n] | base
                for s in states:
                    f = fs[s]
                    for c, t in calls[s]:
                        if c in rules:
                            fc, nc, cc = firsts[c][0], null_acc[c][0], conts[c]
                        else:
                            nc, fc = fixed.get(c, (True, _ALL))
                            cc = fc
                        f |= fc
                        if nc:
                            f |= fs[t]
                            if na[t] and not na[s]:
                                na[s] = changed = True
                        if na[t]:
                            cont |= cc
                    if na[s]:
                        cont |= f
                    if f != fs[s]:
                        fs[s] = f
                        changed = True
                if cont != conts[n]:
                    conts[n] = cont
                    changed = True
            if (na[0], fs[0], conts[n]) != before:
                for c in self.callers.get(n, ()):
                    if c not in queued:
                        queued.add(c)
                        todo.append(c)

    def local(self, n: str, states: Iterable[int]) -> bool:
        """The conditions at ``states`` of rule ``n`` (calls only: byte edges are deterministic)."""
        _, calls, _ = self.rules[n]
        fs = self.firsts[n]
        for s in states:
            real = [(c, t) for c, t in calls[s] if c not in self.fixed]
            if not real:
                continue
            seen = self.out_bits[n][s]
            for c, t in calls[s]:
                f = self.first_of(c) | (fs[t] if self.nullable(c) else 0)
                if f & seen:
                    return False
                seen |= f
            for c, t in real:
                if self.cont_of(c) & fs[t] or not self.det(c):
                    return False
        return True

    def det(self, c: str) -> bool:
        """Has every rule ``c`` reaches (``c`` included) the local conditions at every state?"""
        if c not in self.rules:
            return True  # a token terminal or marker: one step, CONT _ALL does the rest
        got = self._det.get(c)
        if got is None:
            self._det[c] = True  # a cycle: assumed, checked by the rules on it
            got = self._det[c] = self.local(c, range(len(self.rules[c][0])))
            if not got:
                for k in [k for k, v in self._det.items() if v and k != c]:
                    del self._det[k]  # they may have leaned on the assumption
        return got


def _into(
    edges: list[list[tuple[int, int, int]]], calls: list[list[tuple[str, int]]]
) -> tuple[list[list[tuple[int, int]]], set[int]]:
    """A rule's edges by target: per state the (source, bytes) of its byte edges in, in order;
    and the targets of its calls."""
    into: list[list[tuple[int, int]]] = [[] for _ in edges]
    for s, es in enumerate(edges):
        for a, b, t in es:
            into[t].append((s, ((2 << (b - a)) - 1) << a))
    return into, {t for cs in calls for _, t in cs}


def _late_entry_impossible(
    into: tuple[list[list[tuple[int, int]]], set[int]],
    head: int,
    unit: _Auto,
    inb: list[int],
) -> bool:
    """Can no item enter this place's loop (from outside) while another item of the same rule and
    origin is already inside it on the same bytes?  Such a pair is what gives one item two counts.
    At the later entry, the entering item is at an outside state z reading byte b into the head,
    the other at a unit state p reading b inside the loop; both got there by the byte before
    (``inb``, :meth:`_Follow.inb`: a call's last bytes, and before a nullable call what came
    before it; a prediction: any byte).  So it is impossible when, for every entry edge
    z -b-> head and every unit edge p -c-> with b and c meeting, the bytes that lead into z and
    into p are disjoint (a JSON string: entered by '"' after ':', ',', '[' or whitespace; inside,
    '"' is read only after a backslash).  An entry by a call's end refuses."""
    if head in into[1]:
        return False
    entries = into[0][head]  # (z, the bytes z -> head)
    xe, _, xacc = unit
    final = xacc.index(True)
    xin = [0] * len(xacc)
    for q in range(len(xacc)):
        for a, b, t in xe[q]:
            xin[t] |= _bits(a, b)
    xin[0] = xin[final] | inb[head]  # the head: after a unit, or as the rule's edges enter it
    for z, zb in entries:
        for q in range(len(xacc)):
            for a, b, _ in xe[q]:
                if _bits(a, b) & zb and inb[z] & xin[q]:
                    return False
    return True


def _ancestors(
    edges: list[list[tuple[int, int, int]]], calls: list[list[tuple[str, int]]], target: int
) -> list[int]:
    """The states from which ``target`` is reachable (itself excluded unless on a cycle)."""
    back: list[list[int]] = [[] for _ in edges]
    for s in range(len(edges)):
        for _, _, t in edges[s]:
            back[t].append(s)
        for _, t in calls[s]:
            back[t].append(s)
    seen = [False] * len(edges)
    todo = [target]
    while todo:
        t = todo.pop()
        for s in back[t]:
            if not seen[s]:
                seen[s] = True
                todo.append(s)
    return [s for s in range(len(edges)) if seen[s]]


CALL_TESTS = ("follow", "strict", "none")


def _round_cache() -> AutomatonCache | None:
    """The automaton cache of one form's rounds: private (nothing of the form reaches the
    process's cache), shared by its rounds, so that a round after a refusal builds only the
    components the refused keys changed (a component's key is its members' IR, its callees'
    keys and the limits: a placeholder renamed in the next round is another key).  None:
    each round from scratch (tests/test_segment_fixpoints.py compares the two)."""
    return AutomatonCache()


def segment_form(grammar: ir.Grammar, limits: CompileLimits, *, call_test: str = "follow") -> SegmentForm:
    """``grammar``'s runtime rules with every qualifying count as a segment (a private session:
    nothing of it reaches the automaton cache or the C tables).  ``call_test``: what a place
    after a call in its rule must satisfy -- ``"follow"``: no second entry while an item is inside
    (:func:`_late_entry_impossible`) or the calls before it complete at one position per path
    (:class:`_Follow`); ``"strict"``: no call before it; ``"none"``: the design's tests alone
    (unsound: tests/test_segments.py shows a grammar where an item gets two counts)."""
    if call_test not in CALL_TESTS:
        raise ValueError(f"call_test must be one of {CALL_TESTS}")
    from .components import outline_sets, rule_dfas
    from .prepare import prepare, validate
    from .repeats import RepeatRewriter

    refused_keys: set[tuple[ir.Expr, int, int]] = set()
    refused: list[tuple[ir.Expr, int, int, str]] = []
    plain: dict[str, bool] = {}  # _placeholders' memos, kept across the rounds
    same: set[int] = set()
    cache = _round_cache()
    while True:
        sess = prepare(grammar, limits, cache.session() if cache is not None else None)
        validate(grammar, sess)
        rules, units = _placeholders(grammar.rules, refused_keys, plain, same)
        if sess.literal_sets:
            rules = outline_sets(rules, sess)
        rw = RepeatRewriter(rules, limits, sess)
        rules = rw.run()
        for name in sess.markers:
            rules[name] = ir.EPSILON
        built = rule_dfas(rules, grammar.start, rw.outlined | set(sess.markers) | set(units), limits, sess)
        dfas = {n: d for n, (d, _) in built.items()}
        tokens = frozenset(sess.token_sets)
        trimmed = _trim({n: d for n, d in dfas.items() if n not in units}, grammar.start, units, tokens)
        # a count in a rule the start never reaches was not built: it has no place
        shapes = {u: _trim({u: dfas[u]}, u, (), frozenset())[u] for u in units if u in dfas}
        form, why = _splice(grammar.start, trimmed, shapes, units, call_test)
        if not why:
            form.refused = refused
            form.tokens = tokens
            form.markers = frozenset(sess.markers)
            return form
        for u, reason in why.items():
            x, lo, hi = units[u]
            refused_keys.add((x, lo, hi))
            refused.append((x, lo, hi, reason))


def _splice(
    start: str,
    trimmed: dict[str, _Auto],
    shapes: dict[str, _Auto],
    units: dict[str, tuple[ir.Expr, int, int]],
    call_test: str,
) -> tuple[SegmentForm, dict[str, str]]:
    """Each placeholder edge A -> B replaced by x's loop with A as its head; or the keys that
    failed a test, with why."""
    why: dict[str, str] = {}
    for u, shape in shapes.items():
        bad = _unit_shape(shape)
        if bad:
            why[u] = bad
    unit_set = set(units)
    ok_shapes = {u: sh for u, sh in shapes.items() if u not in why}
    follow: _Follow | None = None  # built at the first place that needs it
    places: dict[str, list[tuple[int, str, int]]] = {}  # per rule: the places that passed (s, u, b)
    for name, (edges, calls, acc) in trimmed.items():
        after: list[bool] | None = None  # _after_call, computed at the rule's first place
        into: tuple[list[list[tuple[int, int]]], set[int]] | None = None  # _into, at its first use
        passed = places[name] = []
        for s, cs in enumerate(calls):
            if not cs:
                continue
            placed = [(c, t) for c, t in cs if c in unit_set]
            if not placed:
                continue
            u, b = placed[0]
            if u in why:
                continue
            if len(calls[s]) != 1 or edges[s] or acc[s]:
                why[u] = "the entry is not deterministic"
                continue
            if calls[b]:
                why[u] = "a call or another count follows it"
                continue
            if after is None:
                after = _after_call(calls, edges, unit_set) if call_test != "none" else [False] * len(acc)
            if after[s] and call_test != "strict" and follow is None:
                follow = _Follow(trimmed, ok_shapes, units)
            if after[s] and follow is not None and into is None:
                into = _into(edges, calls)
            if after[s] and (
                follow is None
                or into is None  # (never: made above)
                or not (
                    _late_entry_impossible(into, s, shapes[u], follow.inb(name))
                    or follow.local(name, _ancestors(edges, calls, s))
                )
            ):
                why[u] = "a call comes before it in its rule"
                continue
            first = [(a, c) for a, c, _ in shapes[u][0][0]]
            if any(a <= d and c >= e for a, c in first for e, d, _ in edges[b]):
                why[u] = "the exit is not deterministic"
                continue
            passed.append((s, u, b))
    if why:  # the round is retried with these keys unrolled: nothing to splice
        return SegmentForm(start, {}, []), why
    segments: list[Segment] = []
    out: dict[str, SegmentRule] = {}
    for name, (edges, calls, acc) in trimmed.items():
        if places[name]:
            out[name] = _spliced(name, edges, calls, acc, places[name], shapes, units, unit_set, segments)
        else:  # trimmed: every state is reached, and nothing changes but the flags
            flagged = [[(a, b, t, 0) for a, b, t in es] for es in edges]
            out[name] = SegmentRule(flagged, calls, acc, [-1] * len(acc))
    return SegmentForm(start, out, segments, dict(units)), why


def _spliced(
    name: str,
    edges: list[list[tuple[int, int, int]]],
    calls: list[list[tuple[str, int]]],
    acc: list[bool],
    places: list[tuple[int, str, int]],
    shapes: dict[str, _Auto],
    units: dict[str, tuple[ir.Expr, int, int]],
    unit_set: set[str],
    segments: list[Segment],
) -> SegmentRule:
    """Rule ``name`` with each place's placeholder edge s -> b replaced by x's loop with s as its
    head (its states appended after the rule's, a copy per place), numbered as the states that
    are still reached (a b only the count led to is dropped), in their order; the segments
    appended to ``segments``.  Reach first, then each kept state's row built once."""
    n = len(acc)
    head_of = {s: (u, b) for s, u, b in places}
    # reach: a head reads on as its b did (b has no calls: the splice's tests); x's states are
    # reached with their head
    reach = [False] * n
    reach[0] = True
    todo = [0]
    while todo:
        s = todo.pop()
        got = head_of.get(s)
        for _, _, t in edges[s] if got is None else edges[got[1]]:
            if not reach[t]:
                reach[t] = True
                todo.append(t)
        for c, t in calls[s]:
            if not reach[t] and c not in unit_set:
                reach[t] = True
                todo.append(t)
    new = [-1] * n
    k = 0
    for s in range(n):
        if reach[s]:
            new[s] = k
            k += 1
    # x's states but its start and its accepting state, per place in turn, after the rule's
    where: list[tuple[dict[int, int], int]] = []
    for s, u, _ in places:
        xacc = shapes[u][2]
        final = xacc.index(True)
        w = {0: new[s], final: new[s]}
        for q in range(1, len(xacc)):
            if q != final:
                w[q] = k
                k += 1
        where.append((w, final))
    e2: list[list[tuple[int, int, int, int]]] = []
    c2: list[list[tuple[str, int]]] = []
    acc2: list[bool] = []
    seg: list[int] = []
    sid0 = len(segments)
    heads: dict[int, int] = {}
    for i, (s, u, _) in enumerate(places):
        heads[s] = sid0 + i
        _, lo, hi = units[u]
        segments.append(Segment(u, lo, hi, name, new[s]))
    rows: dict[int, list[tuple[int, int, int, int]]] = {}  # a head's row: x's first edges, then b's
    for (s, u, b), (w, final) in zip(places, where, strict=True):
        xe = shapes[u][0]
        row = [(a, c, w[t], INTO | (BACK if t == final else 0)) for a, c, t in xe[0]]
        row += [(a, c, new[t], EXIT) for a, c, t in edges[b]]
        row.sort()
        rows[s] = row
    for s in range(n):
        if not reach[s]:
            continue
        if s in heads:
            e2.append(rows[s])
            c2.append([(c, new[t]) for c, t in calls[s] if c not in unit_set])
            acc2.append(acc[head_of[s][1]])
            seg.append(heads[s])
        else:
            e2.append([(a, b, new[t], 0) for a, b, t in edges[s]])
            c2.append([(c, new[t]) for c, t in calls[s]])
            acc2.append(acc[s])
            seg.append(-1)
    for i, ((_, u, _), (w, final)) in enumerate(zip(places, where, strict=True)):
        xe = shapes[u][0]
        for q in range(1, len(xe)):
            if q != final:
                e2.append([(a, c, w[t], BACK if t == final else 0) for a, c, t in xe[q]])
                c2.append([])
                acc2.append(False)
                seg.append(sid0 + i)
    return SegmentRule(e2, c2, acc2, seg)


@dataclass
class SegTables:
    """The segment form as C reads it (csrc/segments.c, ``cm_seg_tables``): a Tables' fields for
    the spliced automata (byte edges and calls; no token sets, no lookahead markers) and the
    tags beside them.  ``rules[i]`` names rule i; ``states[name][s]`` is the global id of state s
    of that rule."""

    rules: list[str]
    states: dict[str, list[int]]
    start_rule: int
    byte_class: np.ndarray
    trans: np.ndarray
    state_rule: np.ndarray
    accepting: np.ndarray
    ref_off: np.ndarray
    ref_rule: np.ndarray
    ref_target: np.ndarray
    rule_start: np.ndarray
    rule_nullable: np.ndarray
    rule_follow: np.ndarray
    state_seg: np.ndarray
    edge_flags: np.ndarray
    seg_lo: np.ndarray
    seg_hi: np.ndarray
    seg_rule: np.ndarray
    seg_head: np.ndarray
    tok_off: np.ndarray  # [n_states + 1]: no token edges
    tok_set: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    tok_target: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    set_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.uint32))
    set_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    set_negated: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    rule_la: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    la_next: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    la_union: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))


def c_tables(form: SegmentForm) -> SegTables:
    """``form`` flattened for C: rules numbered with the start first, each rule's states in a
    row, byte classes the coarsest partition of 0..255 that every edge's range respects, one
    cell per (state, class) holding its target and its edge's flags.  Byte-only forms: a call of
    a token terminal or a marker raises ValueError (the private chart reads bytes), as do two
    edges of one state meeting on a byte (the splice's tests rule that out)."""
    names = [form.start] + sorted(n for n in form.rules if n != form.start)
    rid = {n: i for i, n in enumerate(names)}
    base: dict[str, list[int]] = {}
    n = 0
    for name in names:
        base[name] = list(range(n, n + len(form.rules[name])))
        n += len(form.rules[name])
    cuts = {0, 256}
    for r in form.rules.values():
        for es in r.edges:
            cuts.update([a for a, _, _, _ in es])
            cuts.update([b + 1 for _, b, _, _ in es])
    bounds = sorted(cuts)
    byte_class = np.zeros(256, np.uint8)
    for c, (a, b) in enumerate(itertools.pairwise(bounds)):
        byte_class[a:b] = c
    nc = len(bounds) - 1
    cls = byte_class.tolist()
    # per state and per edge cell, gathered in arrays and written once (numpy's per-item writes,
    # and its conversion of Python lists, cost more than the cells)
    cells = array("q")  # the cells with an edge (g * nc + class), their targets and flags
    tgts = array("i")
    fls = array("B")
    state_rule: list[int] = []
    acc_list: list[bool] = []
    seg_list: list[int] = []
    ref_off = array("I", [0])
    ref_rule: list[int] = []
    ref_target: list[int] = []
    for name in names:
        r = form.rules[name]
        ids = base[name]
        state_rule.extend([rid[name]] * len(ids))
        acc_list.extend(r.accepting)
        seg_list.extend([x if x >= 0 else 0xFFFFFFFF for x in r.seg])
        for s, g in enumerate(ids):
            es = r.edges[s]
            if es:
                first = len(cells)
                row = g * nc
                for a, b, t, f in es:
                    tg = ids[t]
                    for c in range(cls[a], cls[b] + 1):
                        cells.append(row + c)
                        tgts.append(tg)
                        fls.append(f)
                if len(set(cells[first:])) != len(cells) - first:
                    raise ValueError(f"rule {name!r} state {s}: two edges on one byte")
            for c_name, t in r.calls[s]:
                if c_name not in rid:
                    raise ValueError(f"rule {name!r} calls {c_name!r}: not a byte-only rule")
                ref_rule.append(rid[c_name])
                ref_target.append(ids[t])
            ref_off.append(len(ref_rule))
    trans = np.full((n, nc), -1, np.int32)
    flags = np.zeros((n, nc), np.uint8)
    if cells:
        where = np.frombuffer(cells, np.int64)
        trans.reshape(-1)[where] = np.frombuffer(tgts, np.int32)
        flags.reshape(-1)[where] = np.frombuffer(fls, np.uint8)
    segs = form.segments
    return SegTables(
        rules=names,
        states=base,
        start_rule=0,
        byte_class=byte_class,
        trans=trans,
        state_rule=np.array(state_rule, np.uint32),
        accepting=np.array(acc_list, np.uint8),
        ref_off=np.frombuffer(ref_off, np.uint32).copy(),
        ref_rule=np.array(ref_rule, np.uint32),
        ref_target=np.array(ref_target, np.uint32),
        rule_start=np.array([base[nm][0] for nm in names], np.uint32),
        rule_nullable=_nullable(form, names),
        rule_follow=np.full(8 * len(names), 0xFFFFFFFF, np.uint32),  # every byte: an over-approximation
        state_seg=np.array(seg_list, np.uint32),
        edge_flags=flags,
        seg_lo=np.array([g.lo for g in segs], np.uint32),
        seg_hi=np.array([g.hi for g in segs], np.uint32),
        seg_rule=np.array([rid[g.rule] for g in segs], np.uint32),
        seg_head=np.array([base[g.rule][g.head] for g in segs], np.uint32),
        tok_off=np.zeros(n + 1, np.uint32),
    )


def _nullable(form: SegmentForm, names: list[str]) -> np.ndarray:
    """Per rule: does it match the empty string (a head entered at k = 0 accepts iff lo = 0)?"""
    null: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name in names:
            if name in null:
                continue
            r = form.rules[name]
            seen = {0}
            todo = [0]
            while todo:
                s = todo.pop()
                sid = r.seg[s]
                if r.accepting[s] and (sid < 0 or form.segments[sid].lo == 0):
                    null.add(name)
                    changed = True
                    break
                for c, t in r.calls[s]:
                    if c in null and t not in seen:
                        seen.add(t)
                        todo.append(t)
    return np.array([n in null for n in names], np.uint8)
