"""A second, denotational recognizer used to test the reference matcher.

``derives(grammar, data)`` reads the IR directly: for every rule and start
position it computes the set of end positions the rule can reach, as a least
fixpoint (so left recursion and unproductive rules need no special care).
Characters are decoded with Python's strict UTF-8 codec, not with the
reference's own arithmetic.  It only answers membership; the price is
polynomial in ``len(data)``, fine for the short strings tests give it.
"""

from __future__ import annotations

from cfgmask import ir

Ends = dict[str, list[frozenset[int]]]


def _decode_one(data: bytes, i: int) -> tuple[int, int] | None:
    """The code point starting at ``data[i]`` and its encoded length, if valid UTF-8."""
    for n in range(1, 5):
        try:
            text = data[i : i + n].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return (ord(text), n) if len(text) == 1 else None
    return None


def _ends(e: ir.Expr, data: bytes, i: int, table: Ends) -> set[int]:
    """Positions ``j`` such that ``e`` derives ``data[i:j]``, given ``table`` for rules."""
    if isinstance(e, ir.Literal):
        return {i + len(e.data)} if data.startswith(e.data, i) else set()
    if isinstance(e, ir.ByteClass):
        return {i + 1} if i < len(data) and any(lo <= data[i] <= hi for lo, hi in e.ranges) else set()
    if isinstance(e, ir.CharClass):
        got = _decode_one(data, i) if i < len(data) else None
        return {i + got[1]} if got and any(lo <= got[0] <= hi for lo, hi in e.ranges) else set()
    if isinstance(e, ir.Ref):
        return set(table[e.name][i])
    if isinstance(e, ir.Alt):
        return set().union(*(_ends(x, data, i, table) for x in e.items))
    if isinstance(e, ir.Seq):
        here = {i}
        for x in e.items:
            here = set().union(*(_ends(x, data, p, table) for p in here))
        return here
    if isinstance(e, ir.Repeat):
        return _repeat_ends(e, data, i, table)
    raise NotImplementedError(f"oracle does not handle {e!r}")


def _repeat_ends(e: ir.Repeat, data: bytes, i: int, table: Ends) -> set[int]:
    out: set[int] = set()
    here, count = {i}, 0
    while True:
        if count >= e.lo:
            out |= here
        if e.hi is not None and count >= e.hi:
            return out
        nxt = set().union(*(_ends(e.item, data, p, table) for p in here))
        if count >= e.lo and nxt <= out:  # nothing new can appear any more
            return out
        here, count = nxt, count + 1


def derives(grammar: ir.Grammar, data: bytes) -> bool:
    """Whether the start rule derives exactly ``data``."""
    empty = frozenset[int]()
    table: Ends = {name: [empty] * (len(data) + 1) for name in grammar.rules}
    changed = True
    while changed:
        changed = False
        for name, body in grammar.rules.items():
            for i in range(len(data) + 1):
                new = frozenset(_ends(body, data, i, table)) | table[name][i]
                if new != table[name][i]:
                    table[name][i], changed = new, True
    return len(data) in table[grammar.start][0]
