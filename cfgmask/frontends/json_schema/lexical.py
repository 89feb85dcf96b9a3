"""JSON's lexical layer as IR: whitespace policies, numbers, and the string encoding map.

The one idea here is :func:`encode`: a JSON Schema constrains the *decoded*
string, while the grammar sees the JSON text, where one character has several
spellings (``é``, ``\\u00e9``, ``\\u00E9``; ``/`` and ``\\/``; astral characters
as a surrogate pair).  ``encode`` maps a character-level expression (from the
regex front end, a format, a key name) to the expression of *all* JSON
spellings of its strings, character by character.  Because every spelling
decodes to exactly one character and the spellings of different characters
are disjoint (unpaired surrogate escapes are never produced), the image of a
language L is exactly ``{json text t : decode(t) in L}``.

Canonical mode (``canonical=True``, the default of ``Grammar.from_json_schema``) maps each
character to its one canonical spelling instead (:func:`canonical_class`): literal where
JSON allows it, else its short escape (``\\"``, ``\\\\``, ``\\n``, ...), else
``\\u00xx`` in lowercase hex (the other control characters), which is what
``json.dumps(..., ensure_ascii=False)`` writes.  No ``\\/``, no ``\\u`` escape of a
printable character: the escape hatches where a weak model wanders off are gone, and every
string keeps exactly one spelling.

Generic, unconstrained strings (``{"type": "string"}``) use ``JSON_CHAR``,
which also admits unpaired ``\\uD800``-style escapes, as RFC 8259 and Python's
``json`` do.  Wherever a string is counted or compared (lengths, patterns,
formats, enum values, property names) only well-formed spellings are used, so
``\\uD83D\\uDE00`` can only be read as one character.
"""

from __future__ import annotations

import functools
import hashlib
import re

from ... import ir
from ...errors import GrammarError
from . import _ir_util as U
from .canonical import canonical_string, unspellable

DIGIT = ir.ByteClass(((0x30, 0x39),))
NONZERO = ir.ByteClass(((0x31, 0x39),))
HEX = ir.ByteClass(((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)))

# Decoded character -> the letter after the backslash of its short escape.
SHORT_ESCAPES = {
    0x22: b'"',
    0x5C: b"\\",
    0x2F: b"/",
    0x08: b"b",
    0x0C: b"f",
    0x0A: b"n",
    0x0D: b"r",
    0x09: b"t",
}
RAW_OK = ((0x20, 0x21), (0x23, 0x5B), (0x5D, ir.MAX_CODE_POINT))  # no '"', '\\', controls
ALL_CHARS = ((0, ir.MAX_CODE_POINT),)

# Bounded whitespace ("default"): at most one newline per slot, then bounded indentation.
MAX_INDENT = 128
WHITESPACE_POLICIES = ("default", "compact", "any")


def whitespace(policy: str) -> ir.Expr:
    """The whitespace of one slot under ``policy`` (made once per policy: IR is immutable)."""
    ws = _WHITESPACE.get(policy) if isinstance(policy, str) else None
    return ws if ws is not None else _whitespace_of(policy)


def _whitespace_of(policy: str) -> ir.Expr:
    if policy == "compact":
        return ir.EPSILON
    if policy == "default":
        indent = ir.Repeat(ir.ByteClass(((0x09, 0x09), (0x20, 0x20))), 0, MAX_INDENT)
        newline = ir.seq(ir.Repeat(ir.Literal(b"\r"), 0, 1), ir.Literal(b"\n"), indent)
        return ir.Alt((ir.EPSILON, ir.Literal(b" "), newline))
    if policy == "any":
        return ir.Repeat(ir.ByteClass(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))), 0, None)
    raise GrammarError(f"unknown whitespace policy {policy!r}; use one of {', '.join(WHITESPACE_POLICIES)}")


_WHITESPACE = {p: _whitespace_of(p) for p in WHITESPACE_POLICIES}


# --------------------------------------------------------------------------- numbers

JSON_INT = ir.Alt((ir.Literal(b"0"), ir.seq(NONZERO, ir.Repeat(DIGIT, 0, None))))
JSON_NUMBER = ir.seq(
    ir.Repeat(ir.Literal(b"-"), 0, 1),
    JSON_INT,
    ir.Repeat(ir.seq(ir.Literal(b"."), ir.Repeat(DIGIT, 1, None)), 0, 1),
    ir.Repeat(
        ir.seq(
            ir.ByteClass(((0x45, 0x45), (0x65, 0x65))),
            ir.Repeat(ir.ByteClass(((0x2B, 0x2B), (0x2D, 0x2D))), 0, 1),
            ir.Repeat(DIGIT, 1, None),
        ),
        0,
        1,
    ),
)

# --------------------------------------------------------------------------- strings

_HIGH = ((0xD800, 0xDBFF),)
_LOW = ((0xDC00, 0xDFFF),)


def _hex_digit_class(values: list[int]) -> ir.Expr:
    ranges: list[tuple[int, int]] = []
    for v in values:
        if v < 10:
            ranges.append((0x30 + v, 0x30 + v))
        else:
            ranges.append((0x61 + v - 10, 0x61 + v - 10))
            ranges.append((0x41 + v - 10, 0x41 + v - 10))
    return ir.ByteClass(ir.normalize_ranges(ranges, 0xFF))


def _clip(ranges: tuple[tuple[int, int], ...], lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    return tuple((max(a, lo), min(b, hi)) for a, b in ranges if b >= lo and a <= hi)


def hex_in(ranges: tuple[tuple[int, int], ...], width: int = 4) -> ir.Expr:
    """Strings of ``width`` hex digits (either case) whose value lies in ``ranges``."""
    ranges = ir.normalize_ranges(ranges, 16**width - 1)
    if not ranges:
        return ir.NOTHING
    if ranges == ((0, 16**width - 1),):
        return ir.Repeat(HEX, width, width) if width > 1 else HEX
    if width == 1:
        return _hex_digit_class([v for a, b in ranges for v in range(a, b + 1)])
    size = 16 ** (width - 1)
    # each first digit's ranges below it (what clipping ``ranges`` to the digit's block gives),
    # in one pass over the sorted ranges: a range's inner digits are whole blocks
    subs: list[list[tuple[int, int]]] = [[] for _ in range(16)]
    for a, b in ranges:
        da, db = a // size, b // size
        if da == db:
            subs[da].append((a - da * size, b - da * size))
            continue
        subs[da].append((a - da * size, size - 1))
        for d in range(da + 1, db):
            subs[d].append((0, size - 1))
        subs[db].append((0, b - db * size))
    groups: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for d in range(16):
        if subs[d]:
            groups.setdefault(tuple(subs[d]), []).append(d)
    alts = [ir.seq(_hex_digit_class(ds), hex_in(sub, width - 1)) for sub, ds in groups.items()]
    return ir.alt(*alts)


def _pairs(ranges: tuple[tuple[int, int], ...]) -> ir.Expr:
    """``\\uHHHH\\uLLLL`` surrogate pairs (after the first ``\\u``) for astral code points."""
    groups: dict[tuple[tuple[int, int], ...], list[tuple[int, int]]] = {}
    for a, b in _clip(ranges, 0x10000, ir.MAX_CODE_POINT):
        a, b = a - 0x10000, b - 0x10000
        ha, la, hb, lb = a >> 10, a & 0x3FF, b >> 10, b & 0x3FF
        if ha == hb:
            groups.setdefault(((la, lb),), []).append((ha, ha))
            continue
        groups.setdefault(((la, 0x3FF),), []).append((ha, ha))
        if hb > ha + 1:
            groups.setdefault(((0, 0x3FF),), []).append((ha + 1, hb - 1))
        groups.setdefault(((0, lb),), []).append((hb, hb))
    alts = []
    for lows, highs in groups.items():
        hi_set = tuple((0xD800 + x, 0xD800 + y) for x, y in highs)
        lo_set = tuple((0xDC00 + x, 0xDC00 + y) for x, y in lows)
        alts.append(ir.seq(hex_in(hi_set), ir.Literal(b"\\u"), hex_in(lo_set)))
    return ir.alt(*alts) if alts else ir.NOTHING


@functools.lru_cache(maxsize=4096)  # IR is immutable; long strings and big enums repeat characters
def encode_class(ranges: tuple[tuple[int, int], ...], canonical: bool = False) -> ir.Expr:
    """Every JSON spelling of one character in ``ranges`` (well-formed: no lone surrogates);
    with ``canonical``, only its canonical spelling."""
    if canonical:
        return canonical_class(ranges)
    if ranges == ALL_CHARS and _ENC_ANY:  # made once, at import (the keys of ``.*`` ask for it)
        return _ENC_ANY[0]
    ranges = ir.normalize_ranges(ranges)
    raw = ir.normalize_ranges([r for r in _intersect(ranges, RAW_OK)])
    short = sorted(letter[0] for cp, letter in SHORT_ESCAPES.items() if _contains(ranges, cp))
    bmp = _intersect(ranges, ((0, 0xD7FF), (0xE000, 0xFFFF)))
    astral = _intersect(ranges, ((0x10000, ir.MAX_CODE_POINT),))
    escaped: list[ir.Expr] = []
    if short:
        escaped.append(ir.ByteClass(ir.normalize_ranges([(c, c) for c in short], 0xFF)))
    u_alts = []
    if bmp:
        u_alts.append(hex_in(bmp))
    if astral:
        u_alts.append(_pairs(astral))
    if u_alts:
        escaped.append(ir.seq(ir.Literal(b"u"), ir.alt(*u_alts)))
    alts: list[ir.Expr] = []
    if raw:
        alts.append(ir.CharClass(raw))
    if escaped:
        alts.append(ir.seq(ir.Literal(b"\\"), ir.alt(*escaped)))
    return ir.alt(*alts) if alts else ir.NOTHING


CONTROL_SHORT = {cp: letter for cp, letter in SHORT_ESCAPES.items() if cp != 0x2F}  # no "\\/"


# the code points canonical spellings escape: control characters, ``"`` and ``\\``
_ESCAPED = ir.normalize_ranges([(0, 0x1F), *((cp, cp) for cp in CONTROL_SHORT)])
# per first hex digit (``\u000x``, ``\u001x``): the control characters without a short escape
_U00 = tuple(tuple(cp for cp in range(16 * f, 16 * f + 16) if cp not in CONTROL_SHORT) for f in (0, 1))


@functools.lru_cache(maxsize=4096)
def canonical_class(ranges: tuple[tuple[int, int], ...]) -> ir.Expr:
    """The canonical JSON spelling of each character in ``ranges`` (module doc); lone
    surrogates have none."""
    ranges = ir.normalize_ranges(ranges)
    plain = True  # none escaped: a control character, '"' (0x22) or '\\' (0x5C)
    every = 0  # which of the escaped ones ``ranges`` holds whole: controls 1, '"' 2, '\\' 4
    for a, b in ranges:  # (sorted)
        if a < 0x20:
            plain = False
            if a == 0 and b >= 0x1F:
                every |= 1
        if a <= 0x22 <= b:
            plain = False
            every |= 2
        if a <= 0x5C <= b:
            plain = False
            every |= 4
    if plain:  # every one spelled as itself (most classes of patterns and formats)
        return ir.CharClass(ranges) if ranges else ir.NOTHING
    raw = _intersect(ranges, RAW_OK)
    if every == 7 and _ALL_ESCAPED:  # every escaped character (a key not in the listed names'
        # "any character but one"): their spellings are the same for each such class
        return ir.alt(ir.CharClass(raw), _ALL_ESCAPED[0]) if raw else _ALL_ESCAPED[0]
    alts: list[ir.Expr] = [ir.CharClass(raw)] if raw else []
    escaped = _escapes({cp for a, b in _intersect(ranges, _ESCAPED) for cp in range(a, b + 1)})
    if escaped is not None:
        alts.append(escaped)
    return ir.alt(*alts) if alts else ir.NOTHING


def _escapes(esc: set[int]) -> ir.Expr | None:
    """The canonical escapes (backslash included) of the code points ``esc`` (escaped ones)."""
    escaped: list[ir.Expr] = []
    short = sorted(letter[0] for cp, letter in CONTROL_SHORT.items() if cp in esc)
    if short:
        escaped.append(ir.ByteClass(ir.normalize_ranges([(c, c) for c in short], 0xFF)))
    # the other control characters: u00 and two lowercase hex digits, grouped by the first
    u_alts = []
    for first in (0, 1):
        lows = [cp & 15 for cp in _U00[first] if cp in esc]
        if lows:
            digits = [(0x30 + d, 0x30 + d) if d < 10 else (0x57 + d, 0x57 + d) for d in lows]
            u_alts.append(ir.seq(ir.Literal(b"%d" % first), ir.ByteClass(ir.normalize_ranges(digits, 0xFF))))
    if u_alts:
        escaped.append(ir.seq(ir.Literal(b"u00"), ir.alt(*u_alts)))
    return ir.seq(ir.Literal(b"\\"), ir.alt(*escaped)) if escaped else None


# the escapes of every escaped code point (made once: what canonical_class reuses)
_ALL_ESCAPED: list[ir.Expr] = [
    x for x in [_escapes({cp for a, b in _ESCAPED for cp in range(a, b + 1)})] if x is not None
]


def _contains(ranges: tuple[tuple[int, int], ...], cp: int) -> bool:
    return any(a <= cp <= b for a, b in ranges)


def _intersect(x: tuple[tuple[int, int], ...], y: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out = [(max(a, c), min(b, d)) for a, b in x for c, d in y if max(a, c) <= min(b, d)]
    return ir.normalize_ranges(out)


# Any one character, every spelling; generic string characters (lone surrogate escapes too).
_ENC_ANY: list[ir.Expr] = []  # ENC_ANY once made: what encode_class returns for ALL_CHARS after
ENC_ANY = encode_class(ALL_CHARS)
_ENC_ANY.append(ENC_ANY)
JSON_CHAR = ir.Alt(
    (
        ir.CharClass(RAW_OK),
        ir.seq(
            ir.Literal(b"\\"),
            ir.alt(
                ir.ByteClass(ir.normalize_ranges([(c[0], c[0]) for c in SHORT_ESCAPES.values()], 0xFF)),
                ir.seq(ir.Literal(b"u"), ir.Repeat(HEX, 4, 4)),
            ),
        ),
    )
)


# Any one character, its canonical spelling (canonical mode's generic string character).
CANONICAL_CHAR = canonical_class(ALL_CHARS)


def encode_text(text: str, canonical: bool = False) -> ir.Expr:
    """Every JSON spelling (without quotes) of exactly the string ``text``; with
    ``canonical``, its one canonical spelling."""
    if canonical:
        if unspellable(text):  # a surrogate pair as two code points: no JSON text decodes to it
            return ir.NOTHING
        return ir.Literal(canonical_string(text)[1:-1]) if text else ir.EPSILON
    return ir.seq(*(encode_class(((ord(c), ord(c)),)) for c in text)) if text else ir.EPSILON


SHARED_CLASS_RANGES = 16
# a nonempty text of printable ASCII characters but '"' and '\\': JSON writes each as itself
_PLAIN_TEXT = re.compile(rb"[ !#-\[\]-~]+").fullmatch


class Encoder:
    """Maps character-level expressions (and the rules they use) to JSON-spelling expressions."""

    def __init__(
        self, rules: dict[str, ir.Expr], prefix: str, share_classes: bool = False, canonical: bool = False
    ) -> None:
        self.rules = rules
        self.canonical = canonical
        self.prefix = prefix
        self.done: dict[str, str] = {}
        # classes of many ranges (``\\w``: ~700) encode to thousands of IR nodes: with
        # ``share_classes`` each such class is one rule, used by reference
        self.share_classes = share_classes
        self._shared: dict[tuple[tuple[int, int], ...], str] = {}  # ranges -> their rule's name
        # leaf (class, literal) -> its encoding: an automaton's states repeat their classes, and
        # a leaf's encoding adds no rule but a shared class's, already in ``rules`` on a repeat
        self._leaves: dict[ir.Expr, ir.Expr] = {}
        self._refs: dict[str, ir.Ref] = {}  # a renamed rule's reference, one node for all uses

    def encode_all(self, e: ir.Expr, source: dict[str, ir.Expr]) -> ir.Expr:
        """``encode(e, source)`` with every rule of ``source`` named first, so that long chains
        of rules (an automaton's states) are encoded without deep recursion."""
        for name in source:
            if name not in self.done:
                self.done[name] = U.fresh(self.rules, f"{self.prefix}-{name}")
        for name in source:
            if self.rules[self.done[name]] == ir.NOTHING:
                self.rules[self.done[name]] = self._encode_linked(source[name], source)
        return self._encode_linked(e, source)

    def _shared_class(self, ranges: tuple[tuple[int, int], ...]) -> ir.Ref:
        """The rule of a class of many ranges, named by their digest (computed once per class
        and encoder: an automaton's states repeat their classes)."""
        name = self._shared.get(ranges)
        if name is None:
            digest = hashlib.sha1(repr(ranges).encode()).hexdigest()[:12]
            name = self._shared[ranges] = ("chars-canon-" if self.canonical else "chars-") + digest
        if name not in self.rules:
            self.rules[name] = encode_class(ranges, self.canonical)
        return ir.Ref(name)

    def _encode_linked(self, e: ir.Expr, source: dict[str, ir.Expr]) -> ir.Expr:
        """``encode(e, source)`` for expressions made of rule references (an automaton's states,
        :meth:`.chardfa.CharDFA.to_expr`): a sequence or alternative goes straight to its items,
        not first through :func:`_encode_pure` (which gives up at the first reference), and a
        named reference is renamed at once; the same expression and the same rules, in the
        same order, as :meth:`encode`."""
        t = e.__class__
        if t is ir.Seq or t is ir.Alt:
            items = e.items  # type: ignore[attr-defined]
            if not items:
                return ir.EPSILON if t is ir.Seq else ir.NOTHING
            # the items' references and leaves (most of an automaton's states) handled here,
            # without a call each
            done, leaves, refs = self.done, self._leaves, self._refs
            parts: list[ir.Expr] = []
            for x in items:
                tx = x.__class__
                if tx is ir.Ref:
                    name = done.get(x.name) if x.name in source else None  # type: ignore[attr-defined]
                    if name is None:
                        parts.append(self.encode(x, source))
                    else:
                        r = refs.get(name)
                        if r is None:
                            r = refs[name] = ir.Ref(name)
                        parts.append(r)
                elif tx is ir.CharClass or tx is ir.Literal:
                    y = leaves.get(x)
                    parts.append(self._leaf(x, source) if y is None else y)
                else:
                    parts.append(self._encode_linked(x, source))
            return ir.seq(*parts) if t is ir.Seq else ir.alt(*parts)
        if t is ir.Ref:
            name = self.done.get(e.name) if e.name in source else None  # type: ignore[attr-defined]
            if name is not None:
                return ir.Ref(name)
            return self.encode(e, source)
        if t is ir.CharClass or t is ir.Literal:
            out = self._leaves.get(e)
            return self._leaf(e, source) if out is None else out
        return self.encode(e, source)

    def _leaf(self, e: ir.Expr, source: dict[str, ir.Expr]) -> ir.Expr:
        """A class's or literal's encoding, remembered for this encoder."""
        if e.__class__ is ir.CharClass and self.share_classes and len(e.ranges) > SHARED_CLASS_RANGES:  # type: ignore[attr-defined]
            out: ir.Expr = self._shared_class(e.ranges)  # type: ignore[attr-defined]
        else:
            out = self.encode(e, source)
        self._leaves[e] = out
        return out

    def encode(self, e: ir.Expr, source: dict[str, ir.Expr] | None = None) -> ir.Expr:
        out = _encode_pure(e, self.canonical, self.share_classes)
        if out is not None:  # no rule met: the same as every encoder with these settings makes
            return out
        if isinstance(e, ir.CharClass):
            if self.share_classes and len(e.ranges) > SHARED_CLASS_RANGES:
                return self._shared_class(e.ranges)
            return encode_class(e.ranges, self.canonical)
        if isinstance(e, ir.Literal):
            try:
                return encode_text(e.data.decode("utf-8"), self.canonical)
            except UnicodeDecodeError:
                raise GrammarError("a pattern literal is not valid UTF-8") from None
        if isinstance(e, ir.ByteClass):
            if all(b < 0x80 for _, b in e.ranges):
                return encode_class(e.ranges, self.canonical)
            raise GrammarError("a pattern matches raw bytes, not characters")
        if isinstance(e, ir.Seq):
            return ir.seq(*(self.encode(x, source) for x in e.items)) if e.items else ir.EPSILON
        if isinstance(e, ir.Alt):
            return ir.alt(*(self.encode(x, source) for x in e.items)) if e.items else ir.NOTHING
        if isinstance(e, ir.Repeat):
            return ir.Repeat(self.encode(e.item, source), e.lo, e.hi)
        if isinstance(e, ir.Ref):
            if source is None or e.name not in source:
                raise GrammarError(f"pattern refers to unknown rule {e.name!r}")
            if e.name not in self.done:
                name = U.fresh(self.rules, f"{self.prefix}-{e.name}")
                self.done[e.name] = name
                self.rules[name] = self.encode(source[e.name], source)
            return ir.Ref(self.done[e.name])
        raise GrammarError(f"cannot use {type(e).__name__} inside a string pattern")


@functools.lru_cache(maxsize=4096)  # formats and patterns repeat within and across schemas
def _encode_pure(e: ir.Expr, canonical: bool, share_classes: bool) -> ir.Expr | None:
    """What :meth:`Encoder.encode` makes of ``e`` when that adds no rule (``e`` refers to none
    and, with ``share_classes``, holds no class of many ranges), else None; the same errors."""
    t = e.__class__
    if t is ir.Seq or t is ir.Alt:
        items = e.items  # type: ignore[attr-defined]
        if not items:
            return ir.EPSILON if t is ir.Seq else ir.NOTHING
        parts = []
        for x in items:
            y = _encode_pure(x, canonical, share_classes)
            if y is None:
                return None
            parts.append(y)
        return ir.seq(*parts) if t is ir.Seq else ir.alt(*parts)
    if t is ir.Repeat:
        y = _encode_pure(e.item, canonical, share_classes)  # type: ignore[attr-defined]
        return None if y is None else ir.Repeat(y, e.lo, e.hi)  # type: ignore[attr-defined]
    if t is ir.Ref:
        return None
    if t is ir.CharClass:
        if share_classes and len(e.ranges) > SHARED_CLASS_RANGES:  # type: ignore[attr-defined]
            return None
        return encode_class(e.ranges, canonical)  # type: ignore[attr-defined]
    if t is ir.Literal:
        if canonical and _PLAIN_TEXT(e.data):  # type: ignore[attr-defined]
            return e  # printable ASCII but '"' and '\\': its own canonical spelling
        try:
            return encode_text(e.data.decode("utf-8"), canonical)  # type: ignore[attr-defined]
        except UnicodeDecodeError:
            raise GrammarError("a pattern literal is not valid UTF-8") from None
    if t is ir.ByteClass:
        if all(b < 0x80 for _, b in e.ranges):  # type: ignore[attr-defined]
            return encode_class(e.ranges, canonical)  # type: ignore[attr-defined]
        raise GrammarError("a pattern matches raw bytes, not characters")
    raise GrammarError(f"cannot use {type(e).__name__} inside a string pattern")
