"""The JSON spellings of characters on the cold path (issue 12, session 46): each cut checked
against what it replaced.  ``hex_in`` splits its ranges by first digit in one pass (it clipped
every range once per digit); ``encode_class`` of every character is ``ENC_ANY``; a canonical
class holding every escaped character reuses their escapes, and one holding none is its own
spelling; a canonical literal of printable ASCII (but ``"`` and ``\\``) is its own spelling; a
time's two-digit tables are made once.  The references below are the replaced code."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.frontends.json_schema import formats, lexical
from cfgmask.frontends.json_schema.lexical import (
    ALL_CHARS,
    ENC_ANY,
    RAW_OK,
    _intersect,
    canonical_class,
    encode_class,
    encode_text,
    hex_in,
)

Ranges = tuple[tuple[int, int], ...]


def _clip(ranges: Ranges, lo: int, hi: int) -> Ranges:
    return tuple((max(a, lo), min(b, hi)) for a, b in ranges if b >= lo and a <= hi)


def hex_in_reference(ranges: Ranges, width: int = 4) -> ir.Expr:
    """``hex_in`` before session 46: every range clipped once per first digit."""
    ranges = ir.normalize_ranges(ranges, 16**width - 1)
    if not ranges:
        return ir.NOTHING
    if ranges == ((0, 16**width - 1),):
        return ir.Repeat(lexical.HEX, width, width) if width > 1 else lexical.HEX
    if width == 1:
        return lexical._hex_digit_class([v for a, b in ranges for v in range(a, b + 1)])
    size = 16 ** (width - 1)
    groups: dict[Ranges, list[int]] = {}
    for d in range(16):
        sub = tuple((a - d * size, b - d * size) for a, b in _clip(ranges, d * size, d * size + size - 1))
        if sub:
            groups.setdefault(sub, []).append(d)
    return ir.alt(
        *[
            ir.seq(lexical._hex_digit_class(ds), hex_in_reference(sub, width - 1))
            for sub, ds in groups.items()
        ]
    )


_ESCAPED = lexical._ESCAPED


def canonical_class_reference(ranges: Ranges) -> ir.Expr:
    """``canonical_class`` before session 46: every class's escapes made from its code points
    (by ``_escapes``, which the general path still calls)."""
    ranges = ir.normalize_ranges(ranges)
    raw = _intersect(ranges, RAW_OK)
    alts: list[ir.Expr] = [ir.CharClass(raw)] if raw else []
    escaped = lexical._escapes({cp for a, b in _intersect(ranges, _ESCAPED) for cp in range(a, b + 1)})
    if escaped is not None:
        alts.append(escaped)
    return ir.alt(*alts) if alts else ir.NOTHING


# code points where spellings change: controls, '"', '\\', DEL, the surrogates, the planes
EDGES = [0, 1, 0x08, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x2F, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0xFF]
EDGES += [0xD7FF, 0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]


def _code_point(top: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([e for e in EDGES if e <= top]), st.integers(0, top))


def _ranges(top: int) -> st.SearchStrategy[Ranges]:
    pair = st.tuples(_code_point(top), _code_point(top)).map(lambda p: (min(p), max(p)))
    return st.lists(pair, max_size=6).map(lambda rs: ir.normalize_ranges(rs, top))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_hex_in_as_before(data: st.DataObject) -> None:
    width = data.draw(st.integers(1, 4))
    ranges = data.draw(_ranges(16**width - 1))
    assert repr(hex_in(ranges, width)) == repr(hex_in_reference(ranges, width))


def test_hex_in_fixed() -> None:
    for ranges in [
        ((0, 0xD7FF), (0xE000, 0xFFFF)),
        ((0xD800, 0xDBFF),),
        ((0xDC00, 0xDFFF),),
        ((0x10, 0xFFEF),),
    ]:
        assert repr(hex_in(ranges)) == repr(hex_in_reference(ranges))


# every character but one (a key not in the listed names), every one, every one but the surrogates,
# none escaped, some escaped
CLASSES: list[Ranges] = [
    ALL_CHARS,
    ((0, 96), (98, 0x10FFFF)),
    ((0, 0x21), (0x23, 0x10FFFF)),
    ((0, 0x5B), (0x5D, 0x10FFFF)),
    ((1, 0x10FFFF),),
    ((0, 0x1E), (0x20, 0x10FFFF)),
    ((0, 0xD7FF), (0xE000, 0x10FFFF)),
    ((0x30, 0x39),),
    ((0x41, 0x5A), (0x61, 0x7A)),
    ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)),
    ((0x09, 0x0A),),
    ((0x22, 0x22), (0x5C, 0x5C)),
    (),
]


def test_canonical_class_fixed() -> None:
    for ranges in CLASSES:
        assert repr(canonical_class.__wrapped__(ranges)) == repr(canonical_class_reference(ranges)), ranges


@settings(max_examples=400, deadline=None)
@given(_ranges(ir.MAX_CODE_POINT), st.booleans())
def test_canonical_class_as_before(ranges: Ranges, every_escaped: bool) -> None:
    if every_escaped:  # the reuse: a class holding every escaped character
        ranges = ir.normalize_ranges([*ranges, *_ESCAPED])
    assert repr(canonical_class.__wrapped__(ranges)) == repr(canonical_class_reference(ranges))


def test_every_character_is_enc_any() -> None:
    lexical.encode_class.cache_clear()
    assert encode_class(ALL_CHARS) is ENC_ANY
    lexical._ENC_ANY.clear()  # without the kept one: built again, equal
    try:
        assert repr(lexical.encode_class.__wrapped__(ALL_CHARS, False)) == repr(ENC_ANY)
    finally:
        lexical._ENC_ANY.append(ENC_ANY)


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=8))
def test_plain_literal_spells_itself(text: str) -> None:
    lexical._encode_pure.cache_clear()
    e = ir.Literal(text.encode())
    assert repr(lexical._encode_pure(e, True, False)) == repr(encode_text(text, True))
    assert repr(lexical._encode_pure(e, False, False)) == repr(encode_text(text, False))


def test_two_digits_and_time_as_before() -> None:
    def two(lo: int, hi: int) -> ir.Expr:
        return ir.alt(*(formats.L(f"{v:02d}") for v in range(lo, hi + 1)))

    for lo, hi in [(0, 23), (0, 59), (1, 12), (5, 5)]:
        assert repr(formats._two(lo, hi)) == repr(two(lo, hi))
    frac = formats.opt(ir.seq(formats.L("."), formats.R(formats.DIGIT, 1, None)))
    offset = ir.alt(formats.C("Zz"), ir.seq(formats.C("+-"), two(0, 23), formats.L(":"), two(0, 59)))
    regular = ir.seq(two(0, 23), formats.L(":"), two(0, 59), formats.L(":"), two(0, 59), frac, offset)
    leap = ir.seq(
        formats.L("23:59:60"), frac, ir.alt(formats.C("Zz"), formats.L("+00:00"), formats.L("-00:00"))
    )
    assert repr(formats.time()) == repr(ir.alt(regular, leap))
