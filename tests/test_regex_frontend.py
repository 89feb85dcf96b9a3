"""The regex front end: its language must equal ``re.fullmatch`` on str, encoded as UTF-8."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.errors import GrammarError
from cfgmask.frontends import regex
from cfgmask.frontends.regex import parse_regex, regex_to_expr, scan_class

from .reference import ReferenceMatcher


def recognizer(grammar: ir.Grammar) -> ReferenceMatcher:
    """The one place that decides acceptance (switch to the C matcher here)."""
    return ReferenceMatcher(grammar)


def assert_agrees(pattern: str, strings: list[str], grammar: ir.Grammar | None = None) -> None:
    m = recognizer(grammar or parse_regex(pattern))
    wrong = [
        (s, ok)
        for s in strings
        if (ok := re.fullmatch(pattern, s) is not None) != m.accepts(s.encode("utf-8", "surrogatepass"))
    ]
    assert not wrong, f"{pattern!r}: re.fullmatch verdicts {wrong} differ"


# --------------------------------------------------------------------------- tables

TABLE: list[tuple[str, list[str]]] = [
    ("abc", ["abc", "ab", "abcd", ""]),
    ("a|b*", ["a", "", "bbb", "ab"]),
    ("(?:ab)+c?", ["ab", "ababc", "abc", "c", "aba"]),
    ("(?P<x>a|bc){2,3}", ["aa", "abc", "bcbcbc", "a", "aaaa"]),
    ("a{3}", ["aaa", "aa", "aaaa"]),
    ("a{2,}", ["a", "aa", "aaaaa"]),
    ("a{,2}", ["", "a", "aa", "aaa"]),
    ("a*?b+?c??", ["b", "aabbc", "c"]),
    (r"\n\t\\\.\x41\u00e9\U0001F600", ["\n\t\\.Aé😀", "\n\t\\xAé😀"]),
    (r"\N{GREEK SMALL LETTER ALPHA}", ["α", "a"]),
    (r"[a-c\]\-x]", ["a", "]", "-", "x", "d", "\\"]),
    (r"[^a-z\d]", ["A", "a", "5", "٣", "\n", "é"]),
    (r"\d", ["0", "٣", "߀", "a", "²"]),
    (r"\D", ["a", "0", "٣"]),
    (r"\w", ["a", "_", "é", "٣", "²", "-", " ", "\u0300"]),
    (r"\W", ["-", "a", "\u0300"]),
    (r"\s", [" ", "\t", "\x1c", "\x85", "\u3000", "a", "\u200b"]),
    (r"\S", [" ", "a"]),
    (r"(?a)\w\d\s", ["a1 ", "é1 ", "a٣ ", "a1\u3000"]),
    (".", ["a", "\n", "é", "\r"]),
    ("(?s).", ["\n"]),
    ("(?i)straße", ["STRASSE", "Straße", "STRAẞE", "straSSe"]),
    ("(?i)[a-z]", ["K", "\u212a", "\u0130", "\u0131", "\u017f", "1"]),
    ("(?i)[^k]", ["k", "K", "\u212a", "x"]),
    ("(?i)σ", ["Σ", "ς", "σ", "s"]),
    ("(?i:a)b", ["Ab", "AB", "ab"]),
    ("(?ia)k", ["K", "\u212a"]),
    ("(?i)(?-i:a)b", ["aB", "AB"]),
    ("(?x) a  b # comment\n c", ["abc", "a b c"]),
    ("^abc$", ["abc", "abc\n"]),
    (r"\Aab\Z", ["ab", "ab\n"]),
    ("(^a|b)c", ["ac", "bc"]),
    ("x(^a|b)c", ["xbc", "xac"]),
    ("(a$|b)", ["a", "b"]),
    (r"a\Zb", ["ab", "a"]),
    ("(?m)^a$", ["a", "a\n"]),
    ("(?:)", ["", "a"]),
    ("[\U00010000-\U0010ffff]", ["😀", "\U0010ffff", "a"]),
    # one-character lookaround, compiled into the neighbouring text
    (r"(?!a)\w+", ["b", "ab", "ba", "baa", ""]),
    (r"a(?!b)", ["a", "ab"]),
    (r"a(?=b)", ["a", "ab"]),
    (r"(?:x|ab?)(?<!b)y", ["xy", "ay", "aby"]),
    (r"(?:(?!a).)+", ["bcd", "bad", "\n"]),
    (r"(?<!a)b", ["b"]),
    (r"(?<=a)b", ["b"]),
    (r"x?(?<!a)b", ["b", "xb"]),
    # word boundaries (Unicode \w), compiled into both neighbours
    (r"a\bc", ["ac"]),
    (r"a\B", ["a"]),
    (r"\bé\w*\b", ["é", "éa", "é٣", ""]),
    (r"(?:\w|-)+\b-?", ["ab", "ab-", "a-b-", "-a-", "-"]),
    (r"\B-\B", ["-"]),
    (r'".*?(?<!\\)(\\\\)*?"', ['"a"', '"a\\"', '"a\\\\"', '"a"b"']),
]


@pytest.mark.parametrize(("pattern", "strings"), TABLE)
def test_table(pattern: str, strings: list[str]) -> None:
    assert_agrees(pattern, strings)


REJECTED = [
    (r"(a)\1", "backreference", 4),
    (r"(?P<n>a)(?P=n)", "backreference", 9),
    (r"a(?=bc)", "lookahead of more than one character", 2),
    (r"a(?!bc|d)", "lookahead of more than one character", 2),
    (r"(a(?!b))c", "lookahead that may be followed by nothing or by text", 3),
    (r"[(?=]a(?<!bc)c", "lookbehind of more than one character", 7),
    (r"c(x?(?<!a))b", "lookbehind that may look before", 5),
    (r"(a)?(?(1)a|b)", "conditional", 5),
    (r"y(?:x|\ba)", "word boundary that may look before", 7),
    (r"(?:a\b|b)c", "word boundary that may look past", 5),
    (r"a*+", "possessive", 2),
    (r"a{2}+", "possessive", 4),
    (r"(?>a)", "atomic group", 1),
    (r"a?^b", "anchor ^", 3),
    (r"^a|b?^c", "anchor ^", 6),
    (r"ab$c", "anchor $", 3),
    (r"a$\n", "anchor $", 2),
    (r"(?m)a^b", "anchor ^", 6),
    (r"[a", "unterminated character set", 1),
    (r"a{2,1}", "min repeat greater than max repeat", 3),
    (r"(?L)a", "invalid regular expression", 4),
]


@pytest.mark.parametrize(("pattern", "words", "column"), REJECTED)
def test_rejected(pattern: str, words: str, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern)
    assert words in info.value.message
    assert (info.value.line, info.value.column) == (1, column)


def test_constant_anchors() -> None:
    assert regex_to_expr(r"a^b") == ir.NOTHING
    assert regex_to_expr(r"^ab$") == ir.Literal(b"ab")
    assert regex_to_expr(r"a\Zb") == ir.NOTHING


def test_categories_match_re_exactly() -> None:
    for atom, probe in ((r"\d", "0٣߀²"), (r"\w", "a_é²-\u0300"), (r"\s", " \x1c\x85\u200b")):
        ranges = scan_class(atom)
        for ch in probe:
            inside = any(lo <= ord(ch) <= hi for lo, hi in ranges)
            assert inside == (re.fullmatch(atom, ch) is not None), (atom, ch)


SCANNED = [
    r"\w",
    r"\W",
    r"\s",
    r"(?i:[\U00000061])",
    r"(?i:k)",
    r"(?s:.)",
    r"[^a]",
    r"[\ud7fe-\ue001]",
    r"(?i:[\w])",
]


def test_scan_class_as_every_code_point() -> None:
    """scan_class reads the scalar values without the surrogates (made from a UTF-32 buffer):
    the same sets as reading every code point with its index as the code point."""
    every = "".join(map(chr, range(ir.MAX_CODE_POINT + 1)))
    lo, hi = ir.SURROGATES
    for atom in SCANNED:
        runs = [(m.start(), m.end() - 1) for m in re.finditer(f"(?:{atom})+", every)]
        want = []
        for a, b in ir.normalize_ranges(runs):
            want += [r for r in ((a, min(b, lo - 1)), (max(a, hi + 1), b)) if r[0] <= r[1]]
        assert scan_class(atom) == tuple(want), atom


# case-insensitive classes of literals and ranges, as char_set spells them: the ones whose case
# relations are unusual (the long s and the Kelvin sign, the sharp s and its capital, the dotted
# and dotless i, the three sigmas, a titlecase digraph, the micro sign), ranges, negations, ASCII
IGNORING_CASE = [
    *(
        f"(?i:[\\U{ord(c):08x}])"
        for c in "sSkKiIyY\u017f\u212a\u00df\u1e9e\u0130\u0131\u03c3\u03c2\u03a3\u01c5\u00b5\u1c80\u0398"
    ),
    r"(?i:[\U00000061-\U0000007a])",
    r"(?i:[\U000000c0-\U000000ff])",
    r"(?i:[\U00000400-\U0000045f\U00010400-\U0001044f])",
    r"(?i:[^\U0000006b])",
    r"(?i:[^\U00000061-\U0000007a\U000000df])",
    r"(?ia:[\U0000006b])",
    r"(?ia:[\U00000073\U0000017f])",
    r"(?i:[\U00000030-\U00000039\U0000005f])",
]


@pytest.mark.parametrize("atom", IGNORING_CASE)
def test_ignoring_case_as_a_scan_of_every_code_point(atom: str) -> None:
    """A case-insensitive class of literals and ranges asks re only about the code points whose
    case matters: the same set as asking it about every scalar value."""
    flags, cls = atom[2:].split(":", 1)
    direct = scan_class("(?" + flags.replace("i", "") + ":" + cls)  # the class, case respected
    assert regex._ignoring_case(atom, direct) == scan_class(atom)


def test_case_related_covers_what_re_lowercases() -> None:
    """Every code point re treats as cased, each one re lowercases to another and that other, and
    re's extra equivalences are among the code points _ignoring_case asks re about (the argument
    for its exactness: any other code point is its own lowercase and no other's)."""
    import _sre

    text, points, related = regex._case_related()
    assert text == "".join(map(chr, points)) and related == ir.normalize_ranges([(c, c) for c in points])
    member = np.zeros(ir.MAX_CODE_POINT + 1, dtype=bool)
    member[points] = True
    lower, cased = _sre.unicode_tolower, _sre.unicode_iscased
    lo, hi = ir.SURROGATES
    missing = [
        c
        for c in (*range(lo), *range(hi + 1, ir.MAX_CODE_POINT + 1))
        if (cased(c) or lower(c) != c) and not (member[c] and member[lower(c)])
    ]
    assert not missing, [hex(c) for c in missing[:10]]
    for low, others in regex._extra_cases().items():
        assert member[low] and all(member[o] for o in others)
    assert regex._extra_cases(), "re keeps its extra case equivalences elsewhere: check _extra_cases"


def test_surrogates_never_match() -> None:
    expr = regex_to_expr(r"[\ud000-\ue000]")
    assert isinstance(expr, ir.CharClass)
    assert all(not (lo <= 0xD800 <= hi) for lo, hi in expr.ranges)


# --------------------------------------------------------------------------- hypothesis

ALPHABET = [
    "a",
    "b",
    "A",
    "k",
    "K",
    "\u212a",
    "ß",
    "ẞ",
    "s",
    "S",
    "\n",
    "é",
    "É",
    "1",
    "٣",
    " ",
    "_",
    "-",
    "σ",
    "ς",
]


def _escape(ch: str) -> str:
    return re.escape(ch) if ch != "\n" else r"\n"


def _class(draw: st.DrawFn) -> str:
    items = draw(
        st.lists(
            st.one_of(
                st.sampled_from(ALPHABET).map(_escape),
                st.sampled_from(["a-c", "A-Z", "0-9", r"\d", r"\w", r"\s", r"\W", "ß-ẞ"]),
            ),
            min_size=1,
            max_size=3,
        )
    )
    return "[" + ("^" if draw(st.booleans()) else "") + "".join(items) + "]"


@st.composite
def atoms(draw: st.DrawFn) -> str:
    kind = draw(
        st.sampled_from(["lit", "lit", "class", "dot", "cat", "lit", "lit", "class", "dot", "cat", "anchor"])
    )
    if kind == "anchor":  # accepted only where the front end can prove what it means
        return draw(st.sampled_from(["^", "$", r"\A", r"\Z", r"\b", r"\B"]))
    if kind == "lit":
        return _escape(draw(st.sampled_from(ALPHABET)))
    if kind == "class":
        return _class(draw)
    if kind == "dot":
        return "."
    return draw(st.sampled_from([r"\d", r"\D", r"\w", r"\W", r"\s", r"\S"]))


QUANTIFIERS = ["*", "+", "?", "{2}", "{1,2}", "{2,}", "{,2}", "*?", "+?", "??", "{0,3}?"]


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
        st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.tuples(st.sampled_from(["i", "s", "a", "-i", "x"]), inner).map(lambda t: f"(?{t[0]}:{t[1]})"),
        inner.map(lambda x: f"({x})"),
    )


def patterns() -> st.SearchStrategy[str]:
    body = st.recursive(atoms(), _extend, max_leaves=6)
    return st.tuples(
        st.sampled_from(["", "", "^", r"\A", "(?i)", "(?s)"]), body, st.sampled_from(["", "", "$", r"\Z"])
    ).map("".join)


@given(pattern=patterns(), data=st.data())
def test_random_patterns_agree_with_re(pattern: str, data: st.DataObject) -> None:
    re.compile(pattern)
    try:
        grammar = parse_regex(pattern)
    except GrammarError as e:
        assert "anchor" in e.message or "look" in e.message or "boundary" in e.message
        assume(False)
    strings = data.draw(st.lists(st.text(st.sampled_from(ALPHABET), max_size=5), max_size=4))
    if "(?a" not in pattern:  # hypothesis cannot generate from ASCII-mode classes
        strings += data.draw(st.lists(st.from_regex(pattern, fullmatch=True), max_size=3))
    assert_agrees(pattern, [s for s in strings if len(s) <= 12], grammar)
