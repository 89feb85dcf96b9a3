"""The grammar IR every front end produces and the compiler consumes.

A grammar is a set of named rules and a start rule.  A rule's body is an
expression tree over bytes:

* ``Literal(b"...")``      exact bytes (text literals are UTF-8 encoded)
* ``CharClass(ranges)``    one Unicode scalar value in the inclusive code-point
                           ranges; surrogates (D800-DFFF) never match.  Front
                           ends resolve negation with :func:`char_class`.
* ``ByteClass(ranges)``    one raw byte in the inclusive byte ranges
* ``Ref(name)``            another rule
* ``Seq(items)``           concatenation; ``Seq(())`` is the empty string
* ``Alt(items)``           alternation; ``Alt(())`` matches nothing
* ``Token(ids, negated)``  one whole LLM token with one of these ids (or, when
                           ``negated``, any token but these): llama.cpp's
                           ``<[N]>`` / ``!<[N]>`` syntax.  ``Token((), True)``
                           is any token (llguidance's ``<[*]>``).
* ``TokenText(text, negated)`` one whole LLM token named by its text (llama.cpp's
                           ``<|im_end|>``): resolved to a ``Token`` when the grammar
                           is compiled for a vocabulary (:mod:`cfgmask.compile.token_texts`).
                           A front end that writes one records it in
                           ``Grammar.meta[TOKEN_TEXTS]`` (text → source offset), so
                           compiling resolves it and reports a missing token there.
* ``Lookahead(forbidden)`` the empty string, where the next character of the
                           text (if any) is not in the code-point ranges
                           ``forbidden``: a zero-width assertion (make one with
                           :func:`lookahead`).
* ``Repeat(item, lo, hi)`` ``item`` between ``lo`` and ``hi`` times (``hi=None``:
                           unbounded).  Large bounds are fine: the compiler
                           never unrolls them naively.
* ``LiteralSet(words, json)`` one of the byte strings ``words`` (any order, repeats
                           allowed: the set is what counts).  With ``json``, each
                           word is the UTF-8 value of a JSON string (no
                           surrogates) and the node matches that string in
                           quotes, in every spelling JSON allows.  Any size: the
                           compiler builds its minimal automaton straight from
                           the words (a JSON Schema ``enum`` of 100,000 values).

The Lark front end writes a ``Lookahead`` after each terminal that may not be
followed by certain characters (a keyword's ``(?!\\w)``, a greedy terminal's
longest match); the parser checks it on the next bytes at run time.

The language of a grammar is the set of byte strings derivable from its start
rule.  Character classes match exactly the UTF-8 encodings of their code
points (no overlong forms, no surrogates), so every accepted string made only
of literals and character classes is valid UTF-8.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# The node types are extension types (cfgmask/_ir.pyx): built, hashed and compared in C, and only
# the composite ones tracked by the collector, for the compile of a grammar never seen before
# (docs/design.md §7).  They behave as the frozen dataclasses they replaced.  ("X as X": re-exported)
from ._ir import Alt as Alt
from ._ir import ByteClass as ByteClass
from ._ir import CharClass as CharClass
from ._ir import Expr as Expr
from ._ir import Literal as Literal
from ._ir import LiteralSet as LiteralSet
from ._ir import Lookahead as Lookahead
from ._ir import Ref as Ref
from ._ir import Repeat as Repeat
from ._ir import Seq as Seq
from ._ir import Token as Token
from ._ir import TokenText as TokenText

# In C as well, for the front ends' hundred calls a schema: normalize_ranges(ranges, top=MAX_CODE_POINT)
# sorts and merges inclusive ranges clipped to [0, top], empty ones dropped; seq(*items) and
# alt(*items) concatenate and alternate, flattening nested Seq / Alt, a single item as is.
from ._ir import alt as alt
from ._ir import normalize_ranges as normalize_ranges
from ._ir import seq as seq

MAX_CODE_POINT = 0x10FFFF
TOKEN_TEXTS = "token_texts"  # Grammar.meta key: the TokenText texts a front end wrote -> source offsets
SURROGATES = (0xD800, 0xDFFF)


EPSILON = Seq(())
NOTHING = Alt(())


def complement_ranges(
    ranges: tuple[tuple[int, int], ...], top: int = MAX_CODE_POINT
) -> tuple[tuple[int, int], ...]:
    """The ranges of ``[0, top]`` not covered by normalized ``ranges``."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= top:
        out.append((nxt, top))
    return tuple(out)


def without_surrogates(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Normalized ``ranges`` less the surrogate code points D800-DFFF.  Only the ranges that
    meet the surrogates are cut (found by bisection): a Unicode class's complement has
    hundreds of ranges, and the front ends ask for it per lookahead."""
    lo, hi = SURROGATES
    i = bisect.bisect_left(ranges, lo, key=_range_end)  # the first range reaching lo
    j = bisect.bisect_right(ranges, hi, key=_range_start)  # the first range past hi
    if i == j:
        return tuple(ranges)
    cut = [(a, b) for a, b in ((ranges[i][0], lo - 1), (hi + 1, ranges[j - 1][1])) if a <= b]
    return (*ranges[:i], *cut, *ranges[j:])


def _range_start(r: tuple[int, int]) -> int:
    return r[0]


def _range_end(r: tuple[int, int]) -> int:
    return r[1]


def char_class(
    ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...], negate: bool = False
) -> CharClass:
    """A normalized character class; ``negate`` complements over all code points."""
    norm = normalize_ranges(ranges)
    if negate:
        norm = complement_ranges(norm)
    return CharClass(norm)


def lookahead(forbidden: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> Lookahead:
    """The assertion "the next character is not in ``forbidden``" (code-point ranges,
    normalized; the end of the text is allowed)."""
    ranges = normalize_ranges(forbidden)
    if not ranges:
        raise ValueError("a lookahead forbids a non-empty set of characters")
    return Lookahead(ranges)


def literal(text: str) -> Literal:
    return Literal(text.encode("utf-8", "surrogatepass"))


@dataclass
class Grammar:
    """Rules by name and the start rule.  ``rules[start]`` must exist."""

    rules: dict[str, Expr]
    start: str
    meta: dict[str, object] = field(default_factory=dict)

    def references(self, expr: Expr) -> set[str]:
        """Names of the rules ``expr`` refers to directly."""
        out: set[str] = set()
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, Ref):
                out.add(e.name)
            elif isinstance(e, (Seq, Alt)):
                stack.extend(e.items)
            elif isinstance(e, Repeat):
                stack.append(e.item)
        return out
