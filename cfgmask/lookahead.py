"""Lookahead debts: what an Earley item owes its next bytes after a lookahead marker.

A marker (:class:`cfgmask.ir.Lookahead`) forbids some characters right after a point of the
text; since tokens are bytes, the parser tracks a *debt*: the byte sequences that, read next,
would spell a forbidden character.  :func:`lookahead_classes` enumerates the debts a grammar's
markers can produce and how bytes pay them (``docs/design.md``, "Lookahead debts").  Shared by
the Lark front end (which checks its markers fit) and the compiler (which emits the tables).
"""

from __future__ import annotations

import functools

from . import deadline
from .utf8 import byte_sequences

_Debt = frozenset[tuple[tuple[int, int], ...]]  # byte-range sequences a forbidden character may still spell


@functools.lru_cache(maxsize=32)
def lookahead_classes(
    markers: tuple[tuple[tuple[int, int], ...], ...],
) -> tuple[tuple[_Debt, ...], tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """The *debts* an Earley item may owe its next bytes, given the markers' forbidden
    characters: a debt is the set of byte sequences that, read next, would spell a forbidden
    character (class 0: none).  Returns the classes (the markers' own first, in order), the
    transition ``next[c][b]`` (0: paid, 255: ``b`` completes a forbidden character, else the
    debt left for the byte after; a character may be told from a forbidden one only by its
    second or third byte: ``K`` KELVIN SIGN against the spaces U+2000..) and ``union[a][b]``
    (255 inside a character, where debts never meet).  Raises ValueError past 254 classes.
    Kept per ``markers`` (the Lark front end checks that its markers fit, then the compiler
    makes their tables: one enumeration, 5-10 ms on sql.lark's Unicode word class)."""
    classes: list[_Debt] = [frozenset()]
    ids: dict[_Debt, int] = {frozenset(): 0}

    def cid(d: _Debt) -> int:
        if d not in ids:
            if len(classes) >= 255:
                raise ValueError("over 254 lookahead debts")
            ids[d] = len(classes)
            classes.append(d)
        return ids[d]

    for chars in markers:
        cid(frozenset(byte_sequences(chars)))
    # Debts meet (a marker after a completion, a completion of an empty callee) only between
    # characters: the debts owed there are the markers' and their unions ...
    i = 1
    while i < len(classes):
        for j in range(1, i):
            cid(classes[i] | classes[j])
        i += 1
    boundary = len(classes)
    # ... and inside a character, what they leave after its first bytes
    nxt: list[list[int]] = []
    i = 0
    while i < len(classes):
        deadline.check("lookahead classes")
        row = []
        for b in range(256):
            rest = frozenset(seq[1:] for seq in classes[i] if seq[0][0] <= b <= seq[0][1])
            row.append(255 if () in rest else cid(rest))
        nxt.append(row)
        i += 1
    union = [
        [ids[a | b] if i < boundary and j < boundary else 255 for j, b in enumerate(classes)]
        for i, a in enumerate(classes)
    ]
    return tuple(classes), tuple(map(tuple, nxt)), tuple(map(tuple, union))
