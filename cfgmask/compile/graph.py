"""The rule graph: strongly connected components, tail position, use counts.

A rule is *regular* if it is not recursive or all recursion inside its component is in
tail position (right-linear); :mod:`.components` inlines regular rules into their callers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet

from .. import ir
from . import _dag
from .encode import _ALT, _REF, _REPEAT, _SEQ, Session, marker_name


def sccs(
    graph: Mapping[str, Collection[str]],
    root: str,
    index: dict[str, int] | None = None,
    low: dict[str, int] | None = None,
) -> list[list[str]]:
    """Tarjan's SCCs of the part reachable from root, callees before callers.  With
    ``index`` and ``low`` of earlier calls, the nodes they visited are skipped (their
    components are complete: nothing reachable from them is new)."""
    if index is None or low is None:
        index, low = {}, {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on.add(root)
    while work:
        node, it = work[-1]
        child = next(it, None)
        if child is not None:
            if child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on:
                low[node] = min(low[node], index[child])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
            comp = []
            while True:
                x = stack.pop()
                on.discard(x)
                comp.append(x)
                if x == node:
                    break
            out.append(comp)
    return out


def sccs_all(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """SCCs of the whole graph, callees before callers (compiled: ``_dag.sccs_all``)."""
    return _dag.sccs_all(dict(graph) if type(graph) is not dict else graph)


def sccs_all_py(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """:func:`sccs_all` in Python (the tests' reference)."""
    out: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    inside = {k: {c for c in v if c in graph} for k, v in graph.items()}
    for root in graph:
        if root not in index:
            out.extend(sccs(inside, root, index, low))
    return out


def tail_only(e: ir.Expr, members: set[str], tail: bool) -> bool:
    """Are all references to ``members`` inside ``e`` in tail position?"""
    if isinstance(e, ir.Ref):
        return tail or e.name not in members
    if isinstance(e, ir.Seq):
        n = len(e.items)
        return all(tail_only(x, members, tail and i == n - 1) for i, x in enumerate(e.items))
    if isinstance(e, ir.Alt):
        return all(tail_only(x, members, tail) for x in e.items)
    if isinstance(e, ir.Repeat):
        return tail_only(e.item, members, False)
    return True


def tail_only_dag(sess: Session, cid: int, members: set[str]) -> bool:
    """:func:`tail_only` (in tail position) of the interned subtree ``cid``: a subtree that
    refers to no member is skipped whole, and each shared subtree is visited once a position
    (tail or not), so the cost is the DAG's, not the tree's."""
    it = sess.interner
    refs, keys = it.refs, it.keys
    memo: dict[tuple[int, bool], bool] = {}

    def walk(c: int, tail: bool) -> bool:
        if refs[c].isdisjoint(members):
            return True
        got = memo.get((c, tail))
        if got is not None:
            return got
        key = keys[c]
        kind = key[0]
        if kind == _REF:  # a member (refs[c] meets members)
            got = tail
        elif kind == _SEQ:
            last = len(key[1]) - 1
            got = all(walk(k, tail and i == last) for i, k in enumerate(key[1]))
        elif kind == _ALT:
            got = all(walk(k, tail) for k in key[1])
        elif kind == _REPEAT:
            got = walk(key[1], False)
        else:  # a lookahead's marker: tail_only does not count it as a reference
            got = True
        memo[(c, tail)] = got
        return got

    return walk(cid, True)


def use_counts(rules: dict[str, ir.Expr]) -> dict[str, int]:
    """How many references to each rule appear in all rule bodies."""
    counts: dict[str, int] = {}
    stack = list(rules.values())
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Ref):
            counts[e.name] = counts.get(e.name, 0) + 1
        elif isinstance(e, ir.Lookahead):
            name = marker_name(e.forbidden)
            counts[name] = counts.get(name, 0) + 1
        elif isinstance(e, (ir.Seq, ir.Alt)):
            stack.extend(e.items)
        elif isinstance(e, ir.Repeat):
            stack.append(e.item)
    return counts


def use_counts_dag(sess: Session, cids: dict[str, int]) -> dict[str, int]:
    """``use_counts`` capped at 2 (all that inlining asks: one use or more)."""
    counts: dict[str, int] = {}
    uses = sess.interner.uses
    for c in cids.values():
        for n, v in uses[c].items():
            counts[n] = min(2, counts.get(n, 0) + v)
    return counts
