"""Small IR helpers shared by the JSON Schema front end."""

from __future__ import annotations

import json
import re

from ... import ir

_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_STEMS: dict[str, str] = {}  # base -> its rule-name stem; a few thousand distinct bases at most
_LITERALS: dict[str, ir.Literal] = {}  # text -> its literal: IR is immutable, so one node serves
# the JSON punctuation and literal names every schema asks for: no schema's content, so
# :func:`clear_literals` keeps them (each cost a cold schema a miss, ~1 k instructions)
_PUNCTUATION = {
    s: ir.Literal(s.encode()) for s in ('"', ",", ":", "{", "}", "[", "]", "null", "true", "false")
}
_MEMO_MAX = 8192
# json.dumps(x, default=str) and json.dumps(x, sort_keys=True, default=str) (memo keys of subschemas)
# without a JSONEncoder made per call: the same encoder settings, made once (it keeps no state
# between calls)
dumps_key = json.JSONEncoder(default=str).encode
dumps_sorted_key = json.JSONEncoder(default=str, sort_keys=True).encode


# (the rules dict fresh last served, stem -> the first suffix not known taken there): the
# names ``stem-2`` .. ``stem-(n-1)`` were all in that dict when fresh last named one,
# and the front end's rule dicts only grow, so they still are and the search starts at ``n``.
# Without it the k-th rule of one stem probed k names (``obj-3`` in every object of a schema,
# ``key-not-in`` 80 times in Snowplow sp_0): quadratic.  One dict at a time (a tuple, swapped
# whole: a thread that meets another's dict starts over, which is always right); the dict is
# held until fresh serves another one or :func:`release` runs.
_HINT: tuple[dict[str, ir.Expr] | None, dict[str, int]] = (None, {})


def fresh(rules: dict[str, ir.Expr], base: str) -> str:
    """A rule name derived from ``base`` not yet used in ``rules`` (reserved on return): the
    stem itself, else ``stem-2``, ``stem-3`` .. the first free."""
    stem = _STEMS.get(base)
    if stem is None:
        stem = stem_of(base)
        if len(_STEMS) < _MEMO_MAX:
            _STEMS[base] = stem
    return fresh_stem(rules, stem)


def stem_of(base: str) -> str:
    """The rule-name stem of ``base``: its runs of other than name characters as ``-``, no
    ``-`` at either end, at most 60 characters (``r`` when nothing is left)."""
    # a base of name characters only (most: "prop-" and a key) is kept as it is, no regex run
    plain = base.isascii() and base.replace("-", "").replace("_", "").isalnum()
    return (base if plain else _NOT_NAME.sub("-", base)).strip("-")[:60] or "r"


def fresh_stem(rules: dict[str, ir.Expr], stem: str) -> str:
    """:func:`fresh` for a base that is its own stem (``stem_of(stem) == stem``: the front end's
    fixed names, ``value``, ``obj-3``, ``items``): the same name, without the stem's memo, whose
    miss (~3 k instructions: five string methods) every cold schema paid for each of them."""
    global _HINT
    if stem not in rules:  # the stem itself (most names): no hint read or kept
        rules[stem] = ir.NOTHING  # reserved; the caller sets the body
        return stem
    hint = _HINT
    if hint[0] is not rules:
        hint = _HINT = (rules, {})
    n = hint[1].get(stem, 2)
    name = f"{stem}-{n}"
    while name in rules:
        n += 1
        name = f"{stem}-{n}"
    hint[1][stem] = n + 1
    rules[name] = ir.NOTHING  # reserved; the caller sets the body
    return name


def release() -> None:
    """Drop :func:`fresh`'s hint and the dict it holds (a front end run's end)."""
    global _HINT
    _HINT = (None, {})


def spent(i: int) -> ir.Expr:
    """What a finished walk by position (a recursive closure) is rebound to: its cycle (the
    closure, its own cell) broken, what it holds is freed when its maker returns, not by the
    collector."""
    raise AssertionError("a walk called after it finished")


def clear_literals() -> None:
    """Forget the literals schemas asked for, but JSON's punctuation (``clear_memos``)."""
    _LITERALS.clear()
    _LITERALS.update(_PUNCTUATION)


def opt(e: ir.Expr) -> ir.Expr:
    return ir.Repeat(e, 0, 1)


def lit(s: str) -> ir.Literal:
    out = _LITERALS.get(s)
    if out is None:
        out = ir.Literal(s.encode("utf-8"))
        if len(_LITERALS) < _MEMO_MAX:
            _LITERALS[s] = out
    return out


_LITERALS.update(_PUNCTUATION)


def char_lengths(
    e: ir.Expr, rules: dict[str, ir.Expr], seen: frozenset[str] = frozenset()
) -> tuple[int, int | None]:
    """The least and greatest number of characters of a character-level expression
    (``None``: unbounded).  Recursion counts as unbounded."""
    if isinstance(e, (ir.CharClass, ir.ByteClass)):
        return 1, 1
    if isinstance(e, ir.Literal):
        n = len(e.data.decode("utf-8", "replace"))
        return n, n
    if isinstance(e, ir.Seq):
        lo: int = 0
        hi: int | None = 0
        for x in e.items:
            a, b = char_lengths(x, rules, seen)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(e, ir.Alt):
        if not e.items:
            return 0, 0
        parts = [char_lengths(x, rules, seen) for x in e.items]
        his = [b for _, b in parts]
        return min(a for a, _ in parts), None if None in his else max(h for h in his if h is not None)
    if isinstance(e, ir.Repeat):
        a, b = char_lengths(e.item, rules, seen)
        return a * e.lo, None if e.hi is None or b is None else b * e.hi
    if isinstance(e, ir.Ref):
        if e.name in seen:
            return 0, None
        return char_lengths(rules[e.name], rules, seen | {e.name})
    return 0, None
