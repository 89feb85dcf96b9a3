"""Language operations on IR expressions that contain no rule references.

The regex and Lark front ends use them to compile one-character lookaround and
follow restrictions away: keep only the strings of an expression whose first
(or last) character lies in a set.  ``NOTHING`` is folded as it appears, so a
restriction that removes everything yields ``ir.NOTHING`` itself.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ir

Ranges = tuple[tuple[int, int], ...]


def nullable(e: ir.Expr) -> bool:
    """Whether ``e`` matches the empty string."""
    if isinstance(e, ir.Literal):
        return not e.data
    if isinstance(e, ir.Seq):
        return all(nullable(x) for x in e.items)
    if isinstance(e, ir.Alt):
        return any(nullable(x) for x in e.items)
    if isinstance(e, ir.Repeat):
        return e.lo == 0 or nullable(e.item)
    return False


def intersect(a: Ranges, b: Ranges) -> Ranges:
    """Intersection of two normalized range lists (a linear merge)."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def concat(items: list[ir.Expr]) -> ir.Expr:
    """Concatenation merging adjacent literals; any ``NOTHING`` makes it ``NOTHING``."""
    out: list[ir.Expr] = []
    for it in items:
        if it == ir.NOTHING:
            return ir.NOTHING
        for p in it.items if isinstance(it, ir.Seq) else (it,):
            if isinstance(p, ir.Literal) and out and isinstance(out[-1], ir.Literal):
                out[-1] = ir.Literal(out[-1].data + p.data)
            else:
                out.append(p)
    return out[0] if len(out) == 1 else ir.Seq(tuple(out))


def union(options: list[ir.Expr]) -> ir.Expr:
    kept = [o for o in options if o != ir.NOTHING]
    return ir.alt(*kept) if kept else ir.NOTHING


def first_chars(e: ir.Expr) -> Ranges:
    """The characters that can start a string of ``e``."""
    if isinstance(e, ir.Literal):
        return ((ord(e.data.decode("utf-8", "surrogatepass")[0]),) * 2,) if e.data else ()
    if isinstance(e, ir.CharClass):
        return e.ranges
    if isinstance(e, ir.Seq):
        out: list[tuple[int, int]] = []
        for item in e.items:
            out += first_chars(item)
            if not nullable(item):
                break
        return ir.normalize_ranges(out)
    if isinstance(e, ir.Alt):
        return ir.normalize_ranges([r for x in e.items for r in first_chars(x)])
    if isinstance(e, ir.Repeat):
        return first_chars(e.item) if e.hi != 0 else ()
    raise TypeError(f"no first characters for {e!r}")


def restrict_first(e: ir.Expr, allowed: Ranges) -> ir.Expr:
    """The non-empty strings of ``e`` whose first character is in ``allowed``."""
    return _restrict(e, allowed, first=True)


def restrict_last(e: ir.Expr, allowed: Ranges) -> ir.Expr:
    """The non-empty strings of ``e`` whose last character is in ``allowed``."""
    return _restrict(e, allowed, first=False)


def _restrict(e: ir.Expr, allowed: Ranges, first: bool) -> ir.Expr:
    if isinstance(e, ir.Literal):
        if not e.data:
            return ir.NOTHING
        text = e.data.decode("utf-8", "surrogatepass")
        cp = ord(text[0] if first else text[-1])
        return e if intersect(((cp, cp),), allowed) else ir.NOTHING
    if isinstance(e, ir.CharClass):
        kept = intersect(e.ranges, allowed)
        return ir.CharClass(kept) if kept else ir.NOTHING
    if isinstance(e, ir.Seq):
        return _restrict_seq(list(e.items), allowed, first)
    if isinstance(e, ir.Alt):
        return union([_restrict(x, allowed, first) for x in e.items])
    if isinstance(e, ir.Repeat):
        if e.hi == 0:
            return ir.NOTHING
        lo = 0 if nullable(e.item) else max(e.lo - 1, 0)
        rest: ir.Expr = ir.Repeat(e.item, lo, None if e.hi is None else e.hi - 1)
        if rest == ir.Repeat(e.item, 0, 0):
            rest = ir.EPSILON
        one = _restrict(e.item, allowed, first)
        return concat([one, rest] if first else [rest, one])
    raise TypeError(f"cannot restrict {e!r}")


def _restrict_seq(items: list[ir.Expr], allowed: Ranges, first: bool) -> ir.Expr:
    """The restricted item is the first (last) one that is not empty in the string."""
    order = range(len(items)) if first else range(len(items) - 1, -1, -1)
    options = []
    for i in order:
        restricted = _restrict(items[i], allowed, first)
        options.append(concat([restricted, *items[i + 1 :]] if first else [*items[:i], restricted]))
        if not nullable(items[i]):
            break
    return union(options)


# --------------------------------------------------------------------------- markers


def map_leaves(e: ir.Expr, leaf: Callable[[ir.Expr], ir.Expr]) -> ir.Expr:
    """``e`` rebuilt with ``leaf`` applied to every expression that is not a sequence,
    alternation or repetition; a part that becomes ``NOTHING`` prunes what needs it."""
    if isinstance(e, ir.Seq):
        return concat([map_leaves(x, leaf) for x in e.items])
    if isinstance(e, ir.Alt):
        return union([map_leaves(x, leaf) for x in e.items])
    if isinstance(e, ir.Repeat):
        item = map_leaves(e.item, leaf)
        if item == ir.NOTHING:
            return ir.EPSILON if e.lo == 0 else ir.NOTHING
        return ir.Repeat(item, e.lo, e.hi)
    return leaf(e)


def without_refs(e: ir.Expr) -> ir.Expr:
    """``e`` without the paths that go through a rule reference (references as nothing)."""
    return map_leaves(e, lambda x: ir.NOTHING if isinstance(x, ir.Ref) else x)


def through_ref(e: ir.Expr, marker: str) -> ir.Expr:
    """The strings of the paths of ``e`` through reference ``marker`` (matching it as the
    empty string) and through no other reference."""
    if isinstance(e, ir.Ref):
        return ir.EPSILON if e.name == marker else ir.NOTHING
    if isinstance(e, ir.Seq):
        plain = [without_refs(x) for x in e.items]  # once an item, not once a pair
        return union(
            [concat([*plain[:k], through_ref(x, marker), *plain[k + 1 :]]) for k, x in enumerate(e.items)]
        )
    if isinstance(e, ir.Alt):
        return union([through_ref(x, marker) for x in e.items])
    if isinstance(e, ir.Repeat) and e.hi != 0:
        rest = ir.Repeat(without_refs(e.item), max(e.lo - 1, 0), None if e.hi is None else e.hi - 1)
        return concat([rest if rest.hi != 0 else ir.EPSILON, through_ref(e.item, marker)])
    return ir.NOTHING


# --------------------------------------------------------------------------- longest match


class _TooBig(Exception):
    pass


class _Glushkov:
    """Positions (one per character leaf), and which positions may follow which."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.classes: list[Ranges] = []
        self.follow: list[set[int]] = []

    def position(self, ranges: Ranges) -> int:
        if len(self.classes) >= self.limit:
            raise _TooBig
        self.classes.append(ranges)
        self.follow.append(set())
        return len(self.classes) - 1

    def build(self, e: ir.Expr) -> tuple[bool, set[int], set[int]]:
        """(nullable, first positions, last positions) of ``e``."""
        if isinstance(e, ir.Literal):
            return self.seq(
                [ir.CharClass(((ord(c), ord(c)),)) for c in e.data.decode("utf-8", "surrogatepass")]
            )
        if isinstance(e, ir.CharClass):
            p = self.position(e.ranges)
            return False, {p}, {p}
        if isinstance(e, ir.Seq):
            return self.seq(list(e.items))
        if isinstance(e, ir.Alt):
            parts = [self.build(x) for x in e.items]
            return (
                any(n for n, _, _ in parts),
                set().union(*(f for _, f, _ in parts)),
                set().union(*(la for _, _, la in parts)),
            )
        if isinstance(e, ir.Repeat):
            return self.repeat(e)
        raise _TooBig  # rule references, byte classes: not analysed

    def seq(self, items: list[ir.Expr]) -> tuple[bool, set[int], set[int]]:
        nullable_, first, last = True, set[int](), set[int]()
        for item in items:
            n, f, la = self.build(item)
            for p in last:
                self.follow[p] |= f
            first = first | f if nullable_ else first
            last = last | la if n else la
            nullable_ = nullable_ and n
        return nullable_, first, last

    def repeat(self, e: ir.Repeat) -> tuple[bool, set[int], set[int]]:
        """``x{lo,hi}`` as ``lo`` copies, then ``x*`` or nested optional copies ``(x(x...)?)?``."""
        if e.lo == 0 and e.hi in (1, None):
            _, first, last = self.build(e.item)
            if e.hi is None:
                for p in last:
                    self.follow[p] |= first
            return True, first, last
        tail: ir.Expr = ir.Repeat(e.item, 0, None) if e.hi is None else ir.EPSILON
        for _ in range(0 if e.hi is None else e.hi - e.lo):
            tail = ir.Repeat(ir.seq(e.item, tail), 0, 1)
        return self.seq([e.item] * e.lo + [tail])


def longest_match_follow(e: ir.Expr, limit: int = 512) -> list[tuple[ir.Expr, Ranges]]:
    """``e`` split into its top-level alternatives, each with the characters that may not
    follow a longest match ending in it (``()`` when nothing is known).

    ``e`` must be deterministic: from the start and after each character, the
    characters that can come next pick at most one position.  Then a string that
    ends at a position ``p`` and is followed by a character ``c`` that moves to
    another final position is not a longest match.  Each alternative gets the
    characters ``c`` common to all its final positions.  Nothing is known when
    ``e`` is not deterministic or too big to analyse.
    """
    branches = list(e.items) if isinstance(e, ir.Alt) else [e]
    g = _Glushkov(limit)
    try:
        parts = [g.build(b) for b in branches]
    except _TooBig:
        return [(e, ())]
    first = set().union(*(f for _, f, _ in parts))
    if not all(_disjoint([g.classes[p] for p in group]) for group in [first, *g.follow]):
        return [(e, ())]
    last_all = set().union(*(la for _, _, la in parts))
    out = []
    for branch, (_, _, last) in zip(branches, parts, strict=True):
        common: Ranges | None = None
        for p in last:
            here = ir.normalize_ranges([r for q in g.follow[p] if q in last_all for r in g.classes[q]])
            common = here if common is None else intersect(common, here)
        out.append((branch, common or ()))
    return out


def _disjoint(classes: list[Ranges]) -> bool:
    spans = sorted(r for c in classes for r in c)
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
