"""XGrammar's ``name[lazy] ::= body``: each occurrence commits to its shortest match.

XGrammar's documentation: "as soon as the body can end, all alternatives in which the same
occurrence continues are discarded"; the body must be terminal-like (literals, classes,
``Regex``, repetitions and alternatives of those, non-recursive rules inlined); a body that can
match the empty string always matches the empty string.  The choice does not depend on what
follows the occurrence, so the rule's language is the prefix-minimal part of the body's:
``{w in L : no proper prefix of w is in L}``.

:func:`shortest_matches` builds it: the body's DFA by Brzozowski derivatives over the
intervals of code points that no class of the body splits, then every accepting state loses
its outgoing edges, and the states are written back as right-linear helper rules.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import deadline, ir

_MAX_STATES = 4096

# A small regex algebra, hash-consed by value: ("none",) ("eps",) ("chars", ranges)
# ("seq", a, b) ("alt", frozenset) ("rep", r, lo, hi)
Term = tuple  # type: ignore[type-arg]
NONE: Term = ("none",)
EPS: Term = ("eps",)


class NotTerminalLike(ValueError):
    """The body uses something a lazy rule cannot hold (recursion, tokens, lookaheads)."""


def _seq(a: Term, b: Term) -> Term:
    if a == NONE or b == NONE:
        return NONE
    if a == EPS:
        return b
    if b == EPS:
        return a
    if a[0] == "seq":  # right-nested, so equal languages tend to equal terms
        return _seq(a[1], _seq(a[2], b))
    return ("seq", a, b)


def _alt(*terms: Term) -> Term:
    flat: set[Term] = set()
    for t in terms:
        if t[0] == "alt":
            flat |= t[1]
        elif t != NONE:
            flat.add(t)
    if not flat:
        return NONE
    if len(flat) == 1:
        return next(iter(flat))
    return ("alt", frozenset(flat))


def _rep(r: Term, lo: int, hi: int | None) -> Term:
    if hi == 0 or r == EPS:
        return EPS
    if r == NONE:
        return EPS if lo == 0 else NONE
    return ("rep", r, lo, hi)


def _nullable(t: Term) -> bool:
    kind = t[0]
    if kind == "eps":
        return True
    if kind in ("none", "chars"):
        return False
    if kind == "seq":
        return _nullable(t[1]) and _nullable(t[2])
    if kind == "alt":
        return any(_nullable(x) for x in t[1])
    return t[2] == 0 or _nullable(t[1])


def _derive(t: Term, c: int) -> Term:
    kind = t[0]
    if kind in ("none", "eps"):
        return NONE
    if kind == "chars":
        return EPS if any(lo <= c <= hi for lo, hi in t[1]) else NONE
    if kind == "seq":
        head = _seq(_derive(t[1], c), t[2])
        return _alt(head, _derive(t[2], c)) if _nullable(t[1]) else head
    if kind == "alt":
        return _alt(*(_derive(x, c) for x in t[1]))
    r, lo, hi = t[1], t[2], t[3]
    rest = _rep(r, max(lo - 1, 0), None if hi is None else hi - 1)
    return _seq(_derive(r, c), rest)


def _term(e: ir.Expr, rules: dict[str, ir.Expr], active: tuple[str, ...], cuts: set[int]) -> Term:
    """``e`` as a term, rule references inlined; every class boundary goes into ``cuts``."""
    if isinstance(e, ir.Literal):
        out = EPS
        for ch in reversed(e.data.decode("utf-8")):
            cuts.update((ord(ch), ord(ch) + 1))
            out = _seq(("chars", ((ord(ch), ord(ch)),)), out)
        return out
    if isinstance(e, ir.CharClass):
        for lo, hi in e.ranges:
            cuts.update((lo, hi + 1))
        return ("chars", e.ranges) if e.ranges else NONE
    if isinstance(e, ir.Seq):
        out = EPS
        for x in reversed(e.items):
            out = _seq(_term(x, rules, active, cuts), out)
        return out
    if isinstance(e, ir.Alt):
        return _alt(*(_term(x, rules, active, cuts) for x in e.items))
    if isinstance(e, ir.Repeat):
        return _rep(_term(e.item, rules, active, cuts), e.lo, e.hi)
    if isinstance(e, ir.Ref):
        if e.name in active:
            raise NotTerminalLike(f"rule {e.name!r} is recursive")
        if e.name not in rules:
            raise NotTerminalLike(f"rule {e.name!r} is not defined")
        return _term(rules[e.name], rules, (*active, e.name), cuts)
    raise NotTerminalLike(f"a {type(e).__name__} terminal cannot be part of a lazy rule")


def shortest_matches(
    body: ir.Expr, rules: dict[str, ir.Expr], base: str, check: Callable[[str], None] = deadline.check
) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """The prefix-minimal part of ``body``'s language (``rules`` resolves its references) as
    an expression and helper rules named after ``base``.  Raises NotTerminalLike, or
    ValueError past 4,096 automaton states."""
    cuts: set[int] = {0, ir.MAX_CODE_POINT + 1}
    start = _term(body, rules, (), cuts)
    bounds = sorted(cuts)
    atoms = [(lo, hi - 1) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    ids: dict[Term, int] = {start: 0}
    order = [start]
    edges: list[dict[int, list[tuple[int, int]]]] = []
    i = 0
    while i < len(order):
        check("lazy rule automaton")
        t = order[i]
        out: dict[int, list[tuple[int, int]]] = {}
        if not _nullable(t):  # an accepting state commits: no edge leaves it
            for lo, hi in atoms:
                d = _derive(t, lo)
                if d == NONE:
                    continue
                if d not in ids:
                    if len(order) >= _MAX_STATES:
                        raise ValueError(f"its automaton has more than {_MAX_STATES} states")
                    ids[d] = len(order)
                    order.append(d)
                out.setdefault(ids[d], []).append((lo, hi))
        edges.append(out)
        i += 1
    live = {s for s, t in enumerate(order) if _nullable(t)}
    grew = True
    while grew:
        grew = False
        for s, out in enumerate(edges):
            if s not in live and any(d in live for d in out):
                live.add(s)
                grew = True
    if 0 not in live:
        return ir.NOTHING, {}
    if _nullable(start):
        return ir.EPSILON, {}
    names = {s: f"{base}.{s}" for s in live}
    helpers: dict[str, ir.Expr] = {}
    for s in sorted(live):
        if _nullable(order[s]):
            helpers[names[s]] = ir.EPSILON
            continue
        options = [ir.seq(ir.char_class(r), ir.Ref(names[d])) for d, r in edges[s].items() if d in live]
        helpers[names[s]] = ir.alt(*options)
    return ir.Ref(names[0]), helpers
