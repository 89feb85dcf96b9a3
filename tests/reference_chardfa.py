"""Reference constructions for :mod:`cfgmask.frontends.json_schema.chardfa`, in Python, for the
tests to compare the C core with.

The package determinizes and minimizes its character automata in C (``csrc/fsm.c``: subset
construction over atoms as labels, Hopcroft minimization).  This module keeps the slow
constructions that replaced: subset construction over atoms (:func:`from_expr`, with
:func:`epsilon_closure`) and trimming with Moore minimization (:func:`minimize`), on the
package's own NFA (``chardfa._NFA``, ``chardfa._build``) and atoms (``chardfa._refine``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cfgmask import ir
from cfgmask.frontends.json_schema import chardfa
from cfgmask.frontends.json_schema.chardfa import _NFA, MAX_STATES, TOP, CharDFA, _build, _refine, _too_big


def epsilon_closure(eps: Sequence[Sequence[int]], seeds: Iterable[int]) -> frozenset[int]:
    """The states reachable from ``seeds`` through ``eps`` (state -> epsilon successors)."""
    out = set(seeds)
    stack = list(seeds)
    while stack:
        for t in eps[stack.pop()]:
            if t not in out:
                out.add(t)
                stack.append(t)
    return frozenset(out)


def from_expr(e: ir.Expr) -> CharDFA:
    """The minimal DFA of a character-level expression (subset construction over atoms)."""
    nfa = _NFA()
    start, final = nfa.state(), nfa.state()
    _build(nfa, e, start, final)
    atoms, members = _refine(nfa.sets)
    first = epsilon_closure(nfa.eps, [start])
    index = {first: 0}
    order = [first]
    trans: list[list[int]] = []
    accept: list[bool] = []
    k = 0
    while k < len(order):
        moves: dict[int, set[int]] = {}
        for s in order[k]:
            for rs, t in nfa.edges[s]:
                for a in members[rs]:
                    moves.setdefault(a, set()).add(t)
        row = [-1] * len(atoms)
        for a, ts in moves.items():
            tgt = epsilon_closure(nfa.eps, sorted(ts))
            i = index.get(tgt)
            if i is None:
                if len(order) >= MAX_STATES:
                    raise _too_big(MAX_STATES)
                i = index[tgt] = len(order)
                order.append(tgt)
            row[a] = i
        trans.append(row)
        accept.append(final in order[k])
        k += 1
    return minimize(CharDFA(atoms, trans, accept))


def minimize(d: CharDFA) -> CharDFA:
    """Trimmed (only live states reachable from the start) and minimal (Moore), with the atoms
    that no state tells apart merged."""
    live = d.live()
    if not live[0]:
        return CharDFA([((0, TOP),)], [[-1]], [False])
    reach, stack = {0}, [0]
    while stack:
        s = stack.pop()
        for t in d.trans[s]:
            if t >= 0 and live[t] and t not in reach:
                reach.add(t)
                stack.append(t)
    states = sorted(reach)
    rows = {s: [t if t >= 0 and live[t] else -1 for t in d.trans[s]] for s in states}
    cls = {s: int(d.accept[s]) for s in states}
    n_cls = len(set(cls.values()))
    while True:
        sigs: dict[tuple[int, ...], int] = {}
        new = {s: sigs.setdefault((cls[s], *(cls[t] if t >= 0 else -1 for t in rows[s])), len(sigs))
               for s in states}  # fmt: skip
        if len(sigs) == n_cls:
            break
        cls, n_cls = new, len(sigs)
    index: dict[int, int] = {cls[0]: 0}
    for s in states:
        index.setdefault(cls[s], len(index))
    trans: list[list[int]] = [[] for _ in index]
    accept = [False] * len(index)
    for s in states:
        k = index[cls[s]]
        if not trans[k]:
            trans[k] = [index[cls[t]] if t >= 0 else -1 for t in rows[s]]
            accept[k] = d.accept[s]
    cols: dict[tuple[int, ...], list[int]] = {}
    for a in range(len(d.atoms)):
        cols.setdefault(tuple(row[a] for row in trans), []).append(a)
    if len(cols) < len(d.atoms):
        atoms = [ir.normalize_ranges([r for a in group for r in d.atoms[a]]) for group in cols.values()]
        trans = [[row[group[0]] for group in cols.values()] for row in trans]
        return CharDFA(atoms, trans, accept)
    return CharDFA(d.atoms, trans, accept)


def regions(dfas: Sequence[CharDFA]) -> tuple[CharDFA, list[tuple[bool, ...]]]:
    """``chardfa.regions`` as the Python loop it replaced (the C core's ``cm_dfa_product`` now):
    product states numbered breadth first, successors in atom order, ``-1`` a dead component."""
    atoms, members = _refine([rs for d in dfas for rs in d.atoms])
    comp_atom = [[-1] * len(dfas) for _ in atoms]
    k = 0
    for i, d in enumerate(dfas):
        for a in range(len(d.atoms)):
            for b in members[k]:
                comp_atom[b][i] = a
            k += 1
    start = tuple(0 for _ in dfas)
    index = {start: 0}
    order = [start]
    trans: list[list[int]] = []
    flags: list[tuple[bool, ...]] = []
    k = 0
    while k < len(order):
        st = order[k]
        row = []
        for b in range(len(atoms)):
            nxt = tuple(dfas[i].trans[s][comp_atom[b][i]] if s >= 0 else -1 for i, s in enumerate(st))
            j = index.get(nxt)
            if j is None:
                if len(order) >= MAX_STATES:
                    raise _too_big(MAX_STATES)
                j = index[nxt] = len(order)
                order.append(nxt)
            row.append(j)
        trans.append(row)
        flags.append(tuple(s >= 0 and dfas[i].accept[s] for i, s in enumerate(st)))
        k += 1
    return CharDFA(atoms, trans, [False] * len(trans)), flags


def product(dfas: Sequence[CharDFA], accept: Callable[[tuple[bool, ...]], bool]) -> CharDFA:
    """``chardfa.product`` with the reference minimization."""
    raw, flags = chardfa.regions(dfas)
    return minimize(CharDFA(raw.atoms, raw.trans, [accept(f) for f in flags]))


def isomorphic(x: CharDFA, y: CharDFA) -> bool:
    """Same atoms, and a renumbering of states (start to start) that maps one onto the other."""
    if x.atoms != y.atoms or len(x) != len(y):
        return False
    to = {0: 0}
    stack = [0]
    while stack:
        s = stack.pop()
        t = to[s]
        if x.accept[s] != y.accept[t]:
            return False
        for a, u in zip(x.trans[s], y.trans[t], strict=True):
            if (a < 0) != (u < 0):
                return False
            if a >= 0:
                if a not in to:
                    to[a] = u
                    stack.append(a)
                elif to[a] != u:
                    return False
    return len(set(to.values())) == len(to) == len(x)
