"""Deterministic automata over decoded characters (code points), for the string constraints
that need an automaton product: a pattern together with a length bound, a format or another
pattern; the keys of an object that match no ``patternProperties`` pattern (a complement);
keys that match some patterns and not others.

A :class:`CharDFA` is built from a character-level IR expression (what the regex front end and
:mod:`.formats` produce: ``CharClass``, ASCII ``ByteClass``, ``Literal``, ``Seq``, ``Alt``,
``Repeat``; no rule references), combined by :func:`product`, and written back to a
character-level expression by :meth:`CharDFA.to_expr` (states entered from several places
become rules, so the output is linear in the automaton), which :class:`.lexical.Encoder` then
maps to JSON spellings.  Transitions are over *atoms*, the classes of code points no automaton
involved tells apart (``\\w`` is hundreds of ranges but one atom), so products and
minimization cost what the pattern's structure costs, not what its character classes do.

Determinization and minimization are the C core's (``csrc/fsm.c``: subset construction, then
Hopcroft), as for every other automaton here; this module builds the NFA over atoms and the
products.  Atoms go to the C core as *labels*, not bytes: labels have no 256-symbol cap (many
distinct literal characters, or a product of several automata, exceed it), so one encoding
serves every automaton.  The C core minimizes partial DFAs without trimming them, so the NFA
(or DFA) it gets is trimmed to its live states first; then Hopcroft's classes are the minimal
automaton's states.  The former Python constructions are the tests' oracle
(``tests/reference_chardfa.py``).

Every construction is exact.  Sizes are bounded by ``MAX_STATES`` and the compile deadline;
past them :class:`~cfgmask.errors.GrammarError` says so (strict mode then rejects the keyword;
nothing is approximated).
"""

from __future__ import annotations

import itertools
import time
from array import array
from collections.abc import Callable, Iterable, Sequence

from ... import deadline, ir
from ...errors import GrammarError, LimitError
from . import _ir_util as U

MAX_STATES = 4000  # states of one automaton (DFA or product); NFAs get 4x
MAX_INLINE_DEPTH = 32  # states inlined into one expression before a rule is cut
TOP = ir.MAX_CODE_POINT
INF = float("inf")

Ranges = tuple[tuple[int, int], ...]


def _too_big(n: int) -> GrammarError:
    return GrammarError(f"a string constraint needs more than {n} automaton states")


def _refine(sets: Sequence[Ranges]) -> tuple[list[Ranges], list[list[int]]]:
    """The coarsest partition of all code points that every set in ``sets`` is a union of
    (the *atoms*), and for each set the atoms it contains."""
    events: dict[int, list[tuple[int, int]]] = {0: [], TOP + 1: []}
    for i, rs in enumerate(sets):
        for lo, hi in rs:
            events.setdefault(lo, []).append((1, i))
            events.setdefault(hi + 1, []).append((-1, i))
    points = sorted(events)
    count = [0] * len(sets)
    active: set[int] = set()
    by_sig: dict[frozenset[int], int] = {}
    atoms: list[list[tuple[int, int]]] = []
    members: list[list[int]] = [[] for _ in sets]
    for j, x in enumerate(points[:-1]):
        for sign, i in events[x]:
            count[i] += sign
            if count[i]:
                active.add(i)
            else:
                active.discard(i)
        lo, hi = x, points[j + 1] - 1
        if lo > TOP:
            break
        sig = frozenset(active)
        a = by_sig.get(sig)
        if a is None:
            a = by_sig[sig] = len(atoms)
            atoms.append([])
            for i in sig:
                members[i].append(a)
        if atoms[a] and atoms[a][-1][1] == lo - 1:
            atoms[a][-1] = (atoms[a][-1][0], hi)
        else:
            atoms[a].append((lo, hi))
    return [tuple(a) for a in atoms], members


def _pieces(atoms: Sequence[Ranges]) -> list[tuple[int, int, int]]:
    """Every range of every atom as ``(lo, hi, atom)``, in code-point order."""
    return sorted([(lo, hi, a) for a, rs in enumerate(atoms) for lo, hi in rs])


def _union(pieces: list[tuple[int, int, int]], member: set[int]) -> Ranges:
    """The code points of the atoms in ``member`` as ``ir.normalize_ranges`` gives them (sorted,
    touching ranges merged), from :func:`_pieces` of atoms that partition the code points: their
    pieces taken in order, each merged into the last when it starts right after it."""
    out: list[tuple[int, int]] = []
    for lo, hi, a in pieces:
        if a in member:
            if out and out[-1][1] + 1 == lo:
                out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
    return tuple(out)


def _coreachable(succ: Sequence[Iterable[int]], seeds: Iterable[int]) -> list[bool]:
    """The states from which one of ``seeds`` can be reached (``succ``: state -> successors,
    ``-1`` ignored)."""
    rev: list[list[int]] = [[] for _ in succ]
    for s, ts in enumerate(succ):
        for t in ts:
            if t >= 0:
                rev[t].append(s)
    ok = [False] * len(succ)
    stack = list(seeds)
    for s in stack:
        ok[s] = True
    while stack:
        for p in rev[stack.pop()]:
            if not ok[p]:
                ok[p] = True
                stack.append(p)
    return ok


class CharDFA:
    """States ``0..n-1``, start ``0``; ``trans[s][a]`` the target on atom ``a`` (``-1``: dead);
    ``atoms`` partition all code points.  ``minimal``: known trimmed and minimal (what
    :meth:`minimize` returns), so :meth:`minimize` has nothing to do."""

    def __init__(
        self, atoms: list[Ranges], trans: list[list[int]], accept: list[bool], minimal: bool = False
    ) -> None:
        self.atoms = atoms
        self.trans = trans
        self.accept = accept
        self.minimal = minimal

    def __len__(self) -> int:
        return len(self.trans)

    # ------------------------------------------------------------------ queries

    def live(self) -> list[bool]:
        """States from which an accepting state can be reached."""
        return _coreachable([set(row) for row in self.trans], [s for s, a in enumerate(self.accept) if a])

    def is_empty(self) -> bool:
        if self.minimal:  # trimmed: every state is live, so only the empty automaton's start is not
            return not self.accept[0] and all(t < 0 for t in self.trans[0])
        return not self.live()[0]

    def matches(self, text: str) -> bool:
        s = 0
        for ch in text:
            cp = ord(ch)
            a = next(i for i, rs in enumerate(self.atoms) if any(lo <= cp <= hi for lo, hi in rs))
            s = self.trans[s][a]
            if s < 0:
                return False
        return self.accept[s]

    def lengths(self) -> tuple[int, int | None]:
        """Shortest and longest accepted string (``None``: unbounded); (-1, -1) if empty."""
        d = self.minimize()
        if not d.accept[0] and all(t < 0 for t in d.trans[0]):
            return -1, -1
        dist = {0: 0}
        frontier = [0]
        best = 0 if d.accept[0] else -1
        while frontier and best < 0:
            nxt = []
            for s in frontier:
                for t in d.trans[s]:
                    if t >= 0 and t not in dist:
                        dist[t] = dist[s] + 1
                        if d.accept[t] and best < 0:
                            best = dist[t]
                        nxt.append(t)
            frontier = nxt
        longest: dict[int, int] = {}
        on_stack: set[int] = set()

        def walk(s: int) -> int | None:  # iterative enough: minimal DFAs of patterns are small
            if s in longest:
                return longest[s]
            if s in on_stack:
                return None
            on_stack.add(s)
            v = 0 if d.accept[s] else -1
            for t in set(d.trans[s]):
                if t >= 0:
                    w = walk(t)
                    if w is None:
                        return None
                    if w >= 0:
                        v = max(v, w + 1)
            on_stack.discard(s)
            longest[s] = v
            return v

        if len(d) > 500:
            return best, None  # a cheap, safe answer for big automata
        top = walk(0)
        return best, top

    # ------------------------------------------------------------------ transformations

    def where(self, accept: list[bool]) -> CharDFA:
        """The same transitions with other accepting states, minimized."""
        return CharDFA(self.atoms, self.trans, accept).minimize()

    def minimize(self, limit: int = MAX_STATES) -> CharDFA:
        """Trimmed (only live states reachable from the start) and minimal: the live part,
        with one extra state that every accepting state has an epsilon edge to (the C core
        takes one final state), minimized by the C core (at most ``limit`` states)."""
        if self.minimal:
            return self
        from ..._core import dfa_trim

        n = len(self)
        flat = array("i", itertools.chain.from_iterable(self.trans))
        out = dfa_trim(flat, n, len(self.atoms), bytes(map(bool, self.accept)))  # C: live part's arrays
        if out is None:
            return _empty()
        lab_off, lab, lab_to, eps_off, eps_to = (memoryview(x).cast("I") for x in out)
        return _determinize(self.atoms, (lab_off, lab, lab_to), (eps_off, eps_to), 0, n, limit)

    def to_expr(self, rules: dict[str, ir.Expr], prefix: str) -> ir.Expr:
        """A character-level expression of this language.  States entered from more than one
        state (and a start state with incoming edges, and every ``MAX_INLINE_DEPTH``-th state of
        a chain) become rules in ``rules``; every cycle passes through one and calls to them are
        in tail position, so the rules are right-linear: the compiler keeps them regular."""
        d = self.minimize()
        if not d.accept[0] and all(t < 0 for t in d.trans[0]):
            return ir.NOTHING
        preds = [0] * len(d)  # how many states enter each state
        for row in d.trans:
            for t in set(row):
                if t >= 0:
                    preds[t] += 1
        cut = {s for s in range(len(d)) if preds[s] > 1 or (s == 0 and preds[s])}
        classes: dict[tuple[int, ...], ir.Expr] = {}  # atoms -> their class (states share groups)
        pieces: list[tuple[int, int, int]] = []  # the atoms' ranges in order, once a group needs them

        refs: dict[int, ir.Ref] = {}  # a state's rule's reference, one node for all its uses
        trans, accept, atoms = d.trans, d.accept, d.atoms
        seq, CharClass = ir.seq, ir.CharClass
        # a prefix that is its own stem: so is "prefix-qN" up to the stem's 60 characters
        own = U.stem_of(prefix) == prefix

        def ref(s: int) -> ir.Expr:
            r = refs.get(s)
            if r is None:
                deadline.check("string automaton")  # once a rule: every chain is cut into rules
                base = f"{prefix}-q{s}"
                name = U.fresh_stem(rules, base) if own and len(base) <= 60 else U.fresh(rules, base)
                r = refs[s] = ir.Ref(name)
                rules[name] = body(s, 0)
            return r

        def body(s: int, depth: int) -> ir.Expr:
            groups: dict[int, list[int]] = {}
            for a, t in enumerate(trans[s]):
                if t >= 0:
                    g = groups.get(t)
                    if g is None:
                        groups[t] = [a]
                    else:
                        g.append(a)
            alts: list[ir.Expr] = [ir.EPSILON] if accept[s] else []
            depth += 1  # the targets' depth (nxt, inline)
            for t, group in groups.items():
                key = tuple(group)
                cls = classes.get(key)
                if cls is None:
                    if len(group) == 1:
                        ranges = ir.normalize_ranges(atoms[group[0]])
                    else:  # (a complement's group holds most atoms: no sort of all their ranges)
                        if not pieces:
                            pieces.extend(_pieces(atoms))
                        ranges = _union(pieces, set(group))
                    cls = classes[key] = CharClass(ranges)
                alts.append(seq(cls, ref(t) if t in cut or depth >= MAX_INLINE_DEPTH else body(t, depth)))
            return ir.alt(*alts) if alts else ir.NOTHING

        return ref(0) if 0 in cut else body(0, 0)


# --------------------------------------------------------------------------- construction


class _NFA:
    def __init__(self) -> None:
        self.edges: list[list[tuple[int, int]]] = []  # (range-set id, target)
        self.eps: list[list[int]] = []
        self.sets: list[Ranges] = []
        self.set_id: dict[Ranges, int] = {}

    def state(self) -> int:
        if len(self.eps) >= 4 * MAX_STATES:
            raise _too_big(4 * MAX_STATES)
        self.edges.append([])
        self.eps.append([])
        return len(self.eps) - 1

    def edge(self, a: int, ranges: Ranges, b: int) -> None:
        i = self.set_id.get(ranges)
        if i is None:
            i = self.set_id[ranges] = len(self.sets)
            self.sets.append(ranges)
        self.edges[a].append((i, b))


def _build(nfa: _NFA, e: ir.Expr, a: int, b: int) -> None:
    if isinstance(e, ir.CharClass):
        nfa.edge(a, e.ranges, b)
    elif isinstance(e, ir.ByteClass):
        if any(hi >= 0x80 for _, hi in e.ranges):
            raise GrammarError("a pattern matches raw bytes, not characters")
        nfa.edge(a, e.ranges, b)
    elif isinstance(e, ir.Literal):
        try:
            text = e.data.decode("utf-8")
        except UnicodeDecodeError:
            raise GrammarError("a pattern literal is not valid UTF-8") from None
        cur = a
        for i, ch in enumerate(text):
            nxt = b if i == len(text) - 1 else nfa.state()
            nfa.edge(cur, ((ord(ch), ord(ch)),), nxt)
            cur = nxt
        if not text:
            nfa.eps[a].append(b)
    elif isinstance(e, ir.Seq):
        cur = a
        for i, x in enumerate(e.items):
            nxt = b if i == len(e.items) - 1 else nfa.state()
            _build(nfa, x, cur, nxt)
            cur = nxt
        if not e.items:
            nfa.eps[a].append(b)
    elif isinstance(e, ir.Alt):
        for x in e.items:
            s = nfa.state()
            nfa.eps[a].append(s)
            _build(nfa, x, s, b)
    elif isinstance(e, ir.Repeat):
        cur = a
        for _ in range(e.lo):
            nxt = nfa.state()
            _build(nfa, e.item, cur, nxt)
            cur = nxt
        if e.hi is None:
            loop = nfa.state()
            nfa.eps[cur].append(loop)
            body = nfa.state()
            nfa.eps[loop].append(body)
            _build(nfa, e.item, body, loop)
            nfa.eps[loop].append(b)
        else:
            for _ in range(e.hi - e.lo):
                nxt = nfa.state()
                nfa.eps[cur].append(b)
                _build(nfa, e.item, cur, nxt)
                cur = nxt
            nfa.eps[cur].append(b)
    else:
        raise GrammarError(f"cannot build a character automaton from {type(e).__name__}")


def _empty() -> CharDFA:
    return CharDFA([((0, TOP),)], [[-1]], [False], minimal=True)


def from_expr(e: ir.Expr) -> CharDFA:
    """The minimal DFA of a character-level expression: its NFA over atoms, trimmed to the
    states that reach the final one, determinized and minimized by the C core."""
    nfa = _NFA()
    start, final = nfa.state(), nfa.state()
    _build(nfa, e, start, final)
    atoms, members = _refine(nfa.sets)
    edges = [[(a, t) for rs, t in es for a in members[rs]] for es in nfa.edges]
    live = _coreachable([[t for _, t in es] + eps for es, eps in zip(edges, nfa.eps, strict=True)], [final])
    if not live[start]:
        return _empty()
    lab_off, lab, lab_to = [0], [], []
    eps_off, eps_to = [0], []
    for s, es in enumerate(edges):
        if live[s]:
            for a, t in es:
                if live[t]:
                    lab.append(a)
                    lab_to.append(t)
            eps_to += [t for t in nfa.eps[s] if live[t]]
        lab_off.append(len(lab))
        eps_off.append(len(eps_to))
    return _determinize(atoms, (lab_off, lab, lab_to), (eps_off, eps_to), start, final)


def _determinize(
    atoms: list[Ranges],
    labels: tuple[Sequence[int], Sequence[int], Sequence[int]],
    eps: tuple[Sequence[int], Sequence[int]],
    start: int,
    final: int,
    limit: int = MAX_STATES,
) -> CharDFA:
    """The minimal DFA of an NFA over ``atoms`` from the C core, atoms no state tells apart
    merged: ``labels`` its atom edges (offsets per state, atoms, targets), ``eps`` its epsilon
    edges (offsets, targets); every state live."""
    from ..._core import fsm_build

    n = len(labels[0]) - 1
    arrays = (
        array("I", bytes(4 * (n + 1))),  # no byte edges
        array("B"),
        array("B"),
        array("I"),
        _u32(labels[0]),
        _u32(labels[1]),
        _u32(labels[2]),
        _u32(eps[0]),
        _u32(eps[1]),
    )
    deadline.check("string automaton")
    left = deadline.remaining()  # first: C's deadline is then never before check()'s
    try:
        out = fsm_build(*arrays, start, final, limit, 0, time.monotonic() + left if left != INF else 0.0)
    except LimitError as err:
        if err.limit == "deadline_ms":
            deadline.check("string automaton")  # the same error, naming the setting
        if err.limit != "max_dfa_states":
            raise
        raise _too_big(limit) from None
    _, _, acc, lab_off, lab, lab_to = out
    off = memoryview(lab_off).cast("I").tolist()
    labs = memoryview(lab).cast("I").tolist()
    tos = memoryview(lab_to).cast("I").tolist()
    trans = []
    blank = [-1] * len(atoms)
    for s in range(len(acc)):
        row = blank.copy()
        for j in range(off[s], off[s + 1]):
            row[labs[j]] = tos[j]
        trans.append(row)
    return _merge_atoms(atoms, trans, [bool(x) for x in acc])


def _u32(x: Sequence[int]) -> memoryview | array[int]:
    """``x`` as a buffer of uint32 (the C core's trim gives memoryviews already)."""
    return x if isinstance(x, memoryview) else array("I", x)


def _merge_atoms(atoms: list[Ranges], trans: list[list[int]], accept: list[bool]) -> CharDFA:
    """The minimal DFA ``trans`` with the atoms no state tells apart merged into one."""
    cols: dict[tuple[int, ...], list[int]] = {}
    for a, col in enumerate(zip(*trans, strict=True)):  # each atom's column
        cols.setdefault(col, []).append(a)
    if len(cols) < len(atoms):
        pieces = _pieces(atoms)
        atoms = [
            ir.normalize_ranges(atoms[group[0]]) if len(group) == 1 else _union(pieces, set(group))
            for group in cols.values()
        ]
        trans = [[row[group[0]] for group in cols.values()] for row in trans]
    return CharDFA(atoms, trans, accept, minimal=True)


def words(names: Sequence[str]) -> CharDFA:
    """The finite language ``names`` (a trie)."""
    chars = sorted({ord(ch) for n in names for ch in n})
    atoms, _ = _refine([((cp, cp),) for cp in chars])
    atom_of = {cp: next(i for i, rs in enumerate(atoms) if rs == ((cp, cp),)) for cp in chars}
    trans: list[list[int]] = [[-1] * len(atoms)]
    accept = [False]
    for n in names:
        s = 0
        for ch in n:
            a = atom_of[ord(ch)]
            if trans[s][a] < 0:
                trans.append([-1] * len(atoms))
                accept.append(False)
                trans[s][a] = len(trans) - 1
            s = trans[s][a]
        accept[s] = True
    return CharDFA(atoms, trans, accept)


def multiples(k: int, fraction: bool) -> CharDFA:
    """Plain decimal integers divisible by ``k`` (``-`` allowed, no leading zeros), and with
    ``fraction`` also their spellings with a ``.0+`` tail: a mod-k automaton."""
    if k + 6 > MAX_STATES:
        raise _too_big(MAX_STATES)
    chars = [ord(c) for c in "-.0123456789"]
    atoms, _ = _refine([((cp, cp),) for cp in chars])
    atom = {cp: next(i for i, rs in enumerate(atoms) if rs == ((cp, cp),)) for cp in chars}
    start, minus, zero, dot, zeros, mod0 = 0, 1, 2, 3, 4, 5  # then mod r is state mod0 + r
    trans = [[-1] * len(atoms) for _ in range(mod0 + k)]
    accept = [False] * (mod0 + k)
    for s in (start, minus):
        trans[s][atom[ord("0")]] = zero
        for d in range(1, 10):
            trans[s][atom[0x30 + d]] = mod0 + d % k
    trans[start][atom[ord("-")]] = minus
    for r in range(k):
        for d in range(10):
            trans[mod0 + r][atom[0x30 + d]] = mod0 + (10 * r + d) % k
    accept[zero] = accept[mod0] = True
    if fraction:
        trans[zero][atom[ord(".")]] = trans[mod0][atom[ord(".")]] = dot
        trans[dot][atom[ord("0")]] = trans[zeros][atom[ord("0")]] = zeros
        accept[zeros] = True
    return CharDFA(atoms, trans, accept)


def length(lo: int, hi: int | None) -> CharDFA:
    """Strings of ``lo`` to ``hi`` characters."""
    n = lo if hi is None else hi
    if n + 1 > MAX_STATES:
        raise GrammarError(f"a length bound of {n} is too large to combine with a pattern or format")
    trans = [[i + 1] for i in range(n)] + [[n] if hi is None else [-1]]
    return CharDFA([((0, TOP),)], trans, [i >= lo for i in range(n + 1)])


def regions(dfas: Sequence[CharDFA]) -> tuple[CharDFA, list[tuple[bool, ...]]]:
    """The product automaton on tuples of states (``-1``: that component is dead), not
    minimized and accepting nothing, and for each of its states the components' accepting
    flags: :meth:`CharDFA.where` then picks any Boolean combination of the components."""
    sets = [rs for d in dfas for rs in d.atoms]
    atoms, members = _refine(sets)
    # for each common atom, the atom of each component it lies in
    comp_atom = [[-1] * len(dfas) for _ in atoms]
    k = 0
    for i, d in enumerate(dfas):
        for a in range(len(d.atoms)):
            for b in members[k]:
                comp_atom[b][i] = a
            k += 1
    # each component's table over the common atoms, its dead state (-1) a state of its own
    # (the last, mapping every atom to itself); the C core walks the product breadth first
    n = len(atoms)
    rows: list[int] = []
    sizes = []
    for i, d in enumerate(dfas):
        cols = [c[i] for c in comp_atom]
        dead = len(d.trans)
        to = [*range(dead), dead]  # a target as the C core takes it: -1 (to[-1]) is ``dead``
        for row in d.trans:
            rows += [to[row[a]] for a in cols]
        rows += [dead] * n
        sizes.append(dead + 1)
    deadline.check("string automaton")
    from ..._core import dfa_product

    try:
        flat, tuples = dfa_product(array("I", rows), array("I", sizes), n, MAX_STATES)
    except LimitError as err:
        if err.limit != "max_dfa_states":
            raise
        raise _too_big(MAX_STATES) from None
    targets = memoryview(flat).cast("I").tolist()
    trans = [targets[j : j + n] for j in range(0, len(targets), n)]
    states = memoryview(tuples).cast("I").tolist()
    k = len(dfas)
    columns = [[*d.accept, False] for d in dfas]  # accepting flags, the dead state's False
    flags = list(zip(*[[acc[s] for s in states[i::k]] for i, acc in enumerate(columns)], strict=True))
    return CharDFA(atoms, trans, [False] * len(trans)), flags


def product(dfas: Sequence[CharDFA], accept: Callable[[tuple[bool, ...]], bool]) -> CharDFA:
    """The minimal automaton of the strings whose components' verdicts satisfy ``accept``:
    intersection (``all``), difference, complement (one component and ``not``), any Boolean
    combination."""
    raw, flags = regions(dfas)
    return raw.where([accept(f) for f in flags])


def intersection(dfas: Sequence[CharDFA]) -> CharDFA:
    return dfas[0] if len(dfas) == 1 else product(dfas, all)


__all__ = ["CharDFA", "MAX_STATES", "from_expr", "intersection", "length", "multiples", "product", "regions"]
__all__ += ["words"]
