"""The IR's interning and encoding the slow way, for the tests: the Python recursive walks
that ``cfgmask/compile/_dag.pyx`` compiles.

:class:`ReferenceSession` is a :class:`~cfgmask.compile.encode.Session` whose ``cid`` and
``emit`` run these walks, and whose interner (:class:`ReferenceInterner`) registers every new
node's facts in Python, instead of the compiled ones (``_dag.Facts.add``); everything else (the
iterative walks past the recursion cap, the rare node kinds, names) is the package's.  Both
must give the same ids in the same order, the same facts per id and the same encoded IR.
:func:`utf8_code` is a character class's code from the Python ``utf8.byte_sequences``.
:func:`plan` and :func:`collect` are the Python loops of ``components.call_graph``, ``_plan``
and ``rule_dfas`` that ``_dag.plan`` and ``_dag.collect`` compile (Tarjan by ``graph.sccs``,
tail position by ``graph.tail_only_dag``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from cfgmask import deadline, ir
from cfgmask.compile.automaton import DFA
from cfgmask.compile.encode import (
    _ALT,
    _BYTES,
    _LIT,
    _LOOKAHEAD,
    _REF,
    _REPEAT,
    _SEQ,
    _UTF8,
    _WORDS,
    Interner,
    Session,
    TooBig,
    _Deep,
    marker_name,
)
from cfgmask.compile.graph import sccs, tail_only_dag, use_counts_dag
from cfgmask.compile.limits import CompileLimits
from cfgmask.utf8 import byte_sequences


def utf8_code(ranges: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """``encode._utf8_code`` from ``utf8.byte_sequences``."""
    out = [_UTF8, len(ranges)]
    for lo, hi in ranges:
        out += (lo, hi)
    seqs = byte_sequences(ranges)
    out.append(len(seqs))
    for seq in seqs:
        out.append(len(seq))
        for lo, hi in seq:
            out += (lo, hi)
    return tuple(out)


_NO_USES: dict[str, int] = {}
_NO_REFS: frozenset[str] = frozenset()


def _leaf_key(e: ir.Expr) -> tuple[Any, ...] | None:
    """The interned key of a literal, class or reference (the leaves a walk keys directly);
    None for any other node."""
    t = type(e)
    if t is ir.Literal:
        return (_LIT, e.data)  # type: ignore[attr-defined]
    if t is ir.CharClass:
        return (_UTF8, e.ranges)  # type: ignore[attr-defined]
    if t is ir.Ref:
        return (_REF, e.name)  # type: ignore[attr-defined]
    if t is ir.ByteClass:
        return (_BYTES, e.ranges)  # type: ignore[attr-defined]
    return None


class ReferenceInterner(Interner):
    """An interner whose ``add`` is the Python that ``_dag.Facts.add`` compiles: the same ids,
    the same facts per id (its rule sets and uses made as each node is registered, where the
    compiled interner makes them when first read: ``_dag.Facts.uses_of``)."""

    def __init__(self, gen: int) -> None:
        super().__init__(gen)
        self.refs: list[frozenset[str]] = self._refs  # type: ignore[assignment]
        self.uses: list[dict[str, int]] = self._uses  # type: ignore[assignment]
        # the facts as Python lists, appended here (the compiled interner keeps them in C)
        self.count: list[int] = []  # type: ignore[assignment]
        self.height: list[int] = []  # type: ignore[assignment]
        self.maxlit: list[int] = []  # type: ignore[assignment]
        self.maxprod: list[int] = []  # type: ignore[assignment]
        self.plain: list[bool] = []  # type: ignore[assignment]
        self.facts.use_lists(self.count, self.height, self.maxlit, self.maxprod, self.plain)

    def add(self, key: tuple) -> int:  # type: ignore[type-arg]
        kind = key[0]
        count, height, maxlit, refs, uses, maxprod, plain = 1, 1, 0, _NO_REFS, _NO_USES, 1, True
        if kind == _SEQ or kind == _ALT:
            kids = key[1]
            if kids:
                count = 1 + sum(map(self.count.__getitem__, kids))
                height = 1 + max(map(self.height.__getitem__, kids))
                maxlit = max(map(self.maxlit.__getitem__, kids))
                maxprod = max(map(self.maxprod.__getitem__, kids))
                plain = all(map(self.plain.__getitem__, kids))
                rs = [r for r in map(self.refs.__getitem__, kids) if r]
                if rs:
                    refs = rs[0] if len(rs) == 1 else frozenset().union(*rs)
                    us = [u for u in map(self.uses.__getitem__, kids) if u]
                    if len(us) == 1:
                        uses = us[0]
                    else:
                        uses = {}
                        for u in us:
                            for n, v in u.items():
                                uses[n] = min(2, uses.get(n, 0) + v)
        elif kind == _REPEAT:
            k = key[1]
            count, height, maxlit = 1 + self.count[k], 1 + self.height[k], self.maxlit[k]
            refs, uses = self.refs[k], self.uses[k]
            maxprod = max(key[2], key[3] or 0, 1) * self.maxprod[k]
            plain = False
        elif kind == _LIT:
            maxlit = len(key[1])
        elif kind == _REF:
            refs, uses = frozenset((key[1],)), {key[1]: 1}
        elif kind == _LOOKAHEAD:
            name = marker_name(key[1])
            refs, uses = frozenset((name,)), {name: 1}
        with self.lock:
            got = self.ids.get(key)
            if got is not None:
                return got
            i = len(self.keys)
            self.count.append(count)
            self.height.append(height)
            self.maxlit.append(maxlit)
            self.refs.append(refs)
            self.uses.append(uses)
            self.maxprod.append(maxprod)
            self.plain.append(plain)
            self.keys.append(key)
            self.ids[key] = i
            return i


class ReferenceSession(Session):
    """A session of the Python walks and a :class:`ReferenceInterner` of its own."""

    def __init__(self) -> None:
        super().__init__(ReferenceInterner(-1))

    def cid(self, root: ir.Expr, max_nodes: int | None = None) -> int:
        memo = self.memo
        got = memo.get(id(root))
        if got is not None:
            return got
        self.max_nodes = max_nodes
        try:
            return self._cid_rec(root, 0)
        except _Deep:
            return self._cid_iter(root, max_nodes)

    def cids(self, rules: dict[str, ir.Expr], max_nodes: int | None = None) -> dict[str, int]:
        return {name: self.cid(body, max_nodes) for name, body in rules.items()}

    def emitter(self) -> Callable[[int], int]:
        return self.emit

    def emit(self, root: int) -> int:
        got = self.offsets.get(root)
        if got is not None:
            return got
        try:
            return self._emit_rec(root, 0)
        except _Deep:
            return self._emit_iter(root)

    def _cid_rec(self, e: ir.Expr, depth: int) -> int:
        memo = self.memo
        t = type(e)
        key: tuple  # type: ignore[type-arg]
        if t is ir.Seq or t is ir.Alt:
            if depth > 200:
                raise _Deep
            kids = []
            ids = self.interner.ids
            for x in e.items:  # type: ignore[attr-defined]
                leaf = _leaf_key(x)  # leaves here by their keys (not memoized)
                if leaf is None:
                    g = memo.get(id(x))
                    kids.append(self._cid_rec(x, depth + 1) if g is None else g)
                    continue
                g = ids.get(leaf)
                if g is None:
                    g = self.interner.add(leaf)
                kids.append(g)
            key = (_SEQ if t is ir.Seq else _ALT, tuple(kids))
        elif (leaf := _leaf_key(e)) is not None:
            key = leaf
        elif t is ir.Repeat:
            if depth > 200:
                raise _Deep
            x = e.item  # type: ignore[attr-defined]
            g = memo.get(id(x))
            k = self._cid_rec(x, depth + 1) if g is None else g
            key = (_REPEAT, k, e.lo, e.hi)  # type: ignore[attr-defined]
        else:
            return self._cid_iter(e, self.max_nodes)
        i = self.interner.ids.get(key)
        if i is None:
            i = self.interner.add(key)
        memo[id(e)] = i
        self.keep.append(e)
        if len(self.keep) >= self._next_check:
            self._next_check = len(self.keep) + 1024
            if self.max_nodes is not None and len(self.keep) > self.max_nodes:
                raise TooBig
            deadline.check("IR walk")
        return i

    def _emit_rec(self, cid: int, depth: int) -> int:
        key = self.interner.keys[cid]
        kind = key[0]
        offsets = self.offsets
        body: Any
        if kind == _SEQ or kind == _ALT:
            if depth > 200:
                raise _Deep
            offs = []
            for k in key[1]:
                o = offsets.get(k)
                offs.append(self._emit_rec(k, depth + 1) if o is None else o)
            body = (kind, len(offs), *offs)
        elif kind == _REPEAT:
            if depth > 200:
                raise _Deep
            o = offsets.get(key[1])
            body = self._repeat_code(key, self._emit_rec(key[1], depth + 1) if o is None else o)
        else:
            body = self._leaf_code(key)
        off = offsets[cid] = len(self.code)
        self.code.extend(body)
        return off


def call_graph(
    rules: dict[str, ir.Expr], sess: Session
) -> tuple[dict[str, int], dict[str, frozenset[str]], dict[str, int]]:
    """``components.call_graph`` in Python: each rule's DAG id, the rules it calls, how often
    each rule is used (capped at 2); names and token terminals numbered once, in order."""
    cids = sess.cids(rules)
    graph = {name: sess.interner.refs[c] for name, c in cids.items()}
    uses = use_counts_dag(sess, cids)
    for name in sorted(rules):
        sess.name(name)
    for ids, negated in sorted(sess.tokens):
        if ids:
            sess.token_name(ids, negated)
    return cids, graph, uses


def plan(
    rules: dict[str, ir.Expr], start: str, outlined: set[str], limits: CompileLimits, sess: Session
) -> list[tuple[list[str], int, tuple[Any, ...]]]:
    """``components._plan`` in Python: the components reachable from ``start``, callees
    first, each with its cache key and what ``compile_components`` takes for it (a rule
    used once, not recursive, regular and not a literal set expands in its caller, unless
    that caller is cached and does not call it)."""
    cache = sess.cache
    cids, graph, uses = call_graph(rules, sess)
    lim = cache.key_id(limits) if cache is not None else limits
    key_of: dict[str, int] = {}
    cap_of: dict[str, int] = {}
    out: list[tuple[list[str], int, tuple[Any, ...]]] = []
    once: dict[str, int] = {}  # rule used once -> its component's index
    nest: dict[str, int] = {}  # such a rule -> the expansions nested in it, itself included
    emit = sess.emitter()
    for comp in sccs(graph, start):
        members = set(comp)
        recursive = len(comp) > 1 or comp[0] in graph[comp[0]]
        regular = not recursive or all(tail_only_dag(sess, cids[m], members) for m in comp)
        callees = sorted({c for m in comp for c in graph[m]} - members)
        deadline.check("rule loop")
        mine = []
        for m in comp:
            cap = limits.inline_max_states if uses.get(m, 0) <= 1 else limits.inline_shared_states
            cap = cap_of[m] = cap if regular and m not in outlined else 0
            mine.append((m, cids[m], cap))
        # flat: the generation, the limits, right-linear, the number of members, each member's
        # (name, id, cap), then each callee's (name, key, cap); the member's name is None for a
        # rule that is neither recursive nor the start (its automaton does not depend on it)
        content = (
            sess.gen,
            lim,
            recursive and regular,
            len(mine),
            *[x for m, cid, cap in mine for x in (m if recursive or m == start else None, cid, cap)],
            *[x for c in callees for x in (c, key_of[c], cap_of[c])],
        )
        key = cache.key_id(content) if cache is not None else len(out)
        for m in comp:
            key_of[m] = key
        cached = cache.get(key) if cache is not None else None
        spec = (
            [(sess.name_idx[m], 0 if cached is not None else emit(cid), cap) for m, cid, cap in mine],
            [sess.name_idx[c] for c in callees],
            recursive and regular,
            cached,
            False,
        )
        depth = 0
        for c in callees:
            if c in once and (cached is None or all(c not in d.names for d in cached)):
                k = once.pop(c)
                out[k] = (out[k][0], out[k][1], (*out[k][2][:4], True))
                depth = max(depth, nest[c])
        m = comp[0]
        body = sess.interner.keys[cids[m]]
        if (
            depth < 256  # _dag.pyx MAX_NEST
            and not recursive
            and cached is None
            and uses.get(m, 0) == 1
            and cap_of[m] > 0
            and m != start
            and body[0] != _WORDS
        ):
            once[m] = len(out)
            nest[m] = depth + 1
        out.append((comp, key, spec))
    return out


def collect(
    planned: list[tuple[list[str], int, tuple[Any, ...]]],
    args: list[tuple[Any, ...]],
    built: list[Any],
    ordered: list[str],
    cache: Any,
) -> dict[str, tuple[DFA, array[int]]]:
    """The end of ``components.rule_dfas`` in Python: each member's DFA and label values."""
    out: dict[str, tuple[DFA, array[int]]] = {}
    for (members, key, spec), arg, got in zip(planned, args, built, strict=True):
        if got is None and spec[3] is None:  # expanded in its caller
            continue
        if got is None:
            for m, dfa, (_, labels) in zip(members, spec[3], arg[3], strict=True):
                out[m] = (dfa, labels)
            continue
        dfas = []
        for m, (handle, values) in zip(members, got, strict=True):
            dfa = DFA(handle, [ordered[v] for v in values])
            out[m] = (dfa, array("I", values))
            dfas.append(dfa)
        if cache is not None:
            cache.put(key, dfas)
    return out
