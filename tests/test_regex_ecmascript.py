"""The ECMAScript flavour of the regex front end (``flavor="ecmascript"``, JSON Schema's dialect)
against an ECMA-262 engine: the ``regress`` package (tests/ecma.py), never Python's ``re``.

Two languages are checked: the whole-string one of ``Grammar.from_regex(p, flavor="ecmascript")``
(``/^(?:p)$/u``) and the search one of JSON Schema's ``pattern`` (``/p/u.test(s)``), over strings
with ASCII and non-ASCII digits, letters, white space and line terminators, and astral
characters.  Syntax errors are checked too: a pattern is refused as invalid iff ``regress``
refuses it.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
import regress
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cfgmask import Grammar, ir
from cfgmask.errors import GrammarError
from cfgmask.frontends import ecmascript
from cfgmask.frontends.regex import ecmascript_search, parse_regex

from . import ecma
from .reference import ReferenceMatcher


def whole(pattern: str) -> ReferenceMatcher:
    return ReferenceMatcher(parse_regex(pattern, flavor="ecmascript"))


def searcher(pattern: str) -> ReferenceMatcher:
    return ReferenceMatcher(ir.Grammar({"root": ir.alt(*ecmascript_search(pattern))}, "root"))


def assert_agrees(pattern: str, strings: list[str]) -> None:
    full, find = whole(pattern), searcher(pattern)
    wrong = [
        (s, ecma.fullmatch(pattern, s), ecma.search(pattern, s))
        for s in strings
        if full.accepts(s.encode()) != ecma.fullmatch(pattern, s)
        or find.accepts(s.encode()) != ecma.search(pattern, s)
    ]
    assert not wrong, f"{pattern!r}: (string, ECMAScript fullmatch, search) {wrong} differ"


# --------------------------------------------------------------------------- tables

DIGITS = ["0", "9", "٣", "١٢٣", "߀", "🯸", "𝟘", "²", "a"]
TABLE: list[tuple[str, list[str]]] = [
    # the issue's cases: \d is [0-9] only
    (r"^\d{3}$", ["123", "١٢٣", "🯸🯸🯸", "12", "1234", "123\n"]),
    (r"\d", DIGITS),
    (r"\D", DIGITS),
    (r"\w", ["a", "Z", "_", "0", "é", "ß", "٣", "-", "\u0300", "K"]),
    (r"\W", ["a", "é", "-", " "]),
    (r"\s", list(" \t\v\f\n\r\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\x1c\x85\u200ba")),
    (r"\S", [" ", "\ufeff", "\x85", "a"]),
    (".", ["a", "\n", "\r", "\u2028", "\u2029", "\x85", "😀", "é"]),
    ("[^]", ["\n", "a", "😀"]),
    ("[]", ["", "a"]),
    (r"\p{Letter}+", ["abc", "éλЖ漢", "ab1", "", "ǅ"]),
    (r"\p{L}\P{L}", ["a1", "1a", "é "]),
    (r"\p{Lu}\p{Ll}\p{Lt}", ["Aaǅ", "aAǅ"]),
    (r"\p{gc=Nd}+", DIGITS),
    (r"\p{General_Category=Decimal_Number}", DIGITS),
    (r"\p{digit}\p{punct}", ["1!", "٣،", "a!"]),
    (r"\p{Any}\p{ASCII}\P{ASCII}", ["aaé", "aéa", "\n\x7f\x80"]),
    (r"\p{Zs}", [" ", "\u3000", "\t"]),
    (r"\p{Cc}\p{Cf}", ["\x00\u200b", "\x00\u00ad", "a\u200b"]),
    (r"[\p{L}\d]+", ["a1", "é٣", "éé9"]),
    (r"[^\p{L}\d]", ["a", "1", "-", "٣"]),
    (r"[\P{L}]", ["a", "1"]),
    (r"[^\W]", ["a", "é", "-"]),
    (r"\cJ\cj\x41\u00e9\u{1F600}\uD83D\uDE00\0", ["\n\nAé😀😀\x00", "\n\nAé😀\x00"]),
    (r"[\uD83D\uDE00-\uD83D\uDE02]", ["😀", "😁", "😂", "😃"]),
    (r"\uD83D", ["\U0001f600", "a"]),  # a lone surrogate: nothing valid matches
    (r"\f\n\r\t\v", ["\f\n\r\t\v"]),
    (r"[\b]", ["\b", "b"]),
    (r"\^\$\\\.\*\+\?\(\)\[\]\{\}\|\/", ["^$\\.*+?()[]{}|/"]),
    (r"[\-a]", ["-", "a", "b"]),
    (r"[a-]", ["-", "a"]),
    (r"[\w-]", ["-", "a"]),
    ("(?<year>[0-9]{4})-(?<m>[0-9]{2})", ["2024-01", "2024-1"]),
    ("(?:ab)+?c??", ["ab", "ababc"]),
    ("a{2}b{1,}c{0,2}", ["aabcc", "aab", "abc", "aabccc"]),
    ("^abc$", ["abc", "xabc", "abc\n"]),
    ("abc", ["abc", "xabcx", "ab"]),
    ("^a|b$", ["a", "xa", "ab", "b", "bx"]),
    ("a$|^$", ["", "a", "ba", "ab"]),
    ("^", ["", "a"]),
    ("$", ["", "a"]),
    ("^(a|b)", ["ax", "xa"]),
    (r"\bcat\b", ["cat", "a cat!", "concat", "cats", "cat_", "é cat é"]),
    (r"\Bcat", ["concat", "cat", " cat"]),
    (r"^\b", ["", "a", " "]),
    (r"\B$", ["", "a", " "]),
    (r"a\b\b-", ["a-", "aa-"]),
    (r"a\Bb|c\b", ["ab", "c", "c-", "cc"]),
    (r"[a-z]+\b(?:\.[a-z]+)*", ["ab.cd", "ab.", "ab.c1"]),
    ("a(?=b)b", ["ab", "a", "abb"]),
    ("a(?!b)[a-z]", ["aa", "ab"]),
    ("(?<=a)b", ["ab", "b", "cb"]),
    ("(?<!a)b", ["ab", "b", "cb"]),
    ("a(?!b)", ["a", "ab", "ac", "xab", "aab"]),
    ("a(?=b)c?", ["ab", "a", "abc"]),
    ("(^$)|(^[0-9]+$)", ["", "12", "x12", "12\n"]),
    ("(?:(?:^a)|b$)", ["ax", "xb", "xa", "bx"]),
    ("^([^,]|$)", ["", "a", ",", "a,", "ab"]),
    ("(^|-)x(y|$)", ["x", "-x", "ax", "xy", "xz", "-xz"]),
]


@pytest.mark.parametrize(("pattern", "strings"), TABLE)
def test_table(pattern: str, strings: list[str]) -> None:
    assert_agrees(pattern, strings)


def test_issue_digits_and_letters() -> None:
    g = Grammar.from_regex(r"\d{3}-\d{4}", flavor="ecmascript")
    assert g.ir is not None
    m = whole(r"\d{3}-\d{4}")
    assert m.accepts(b"123-4567")
    assert not m.accepts("🯸🯸🯸-🯸🯸🯸🯸".encode())
    py = ReferenceMatcher(parse_regex(r"\d{3}-\d{4}"))  # Python re stays the default
    assert py.accepts("🯸🯸🯸-🯸🯸🯸🯸".encode())


def test_script_properties() -> None:
    """Script and Script_Extensions (tables from the ``regex`` package) and binary properties,
    on characters whose script every Unicode version agrees on."""
    pytest.importorskip("regex")
    cases = {
        r"\p{Script=Greek}": "αΩa",
        r"\p{sc=Grek}": "αΩa",
        r"\p{Script=Latin}": "aéα",
        r"\p{scx=Hira}": "あア\u30fc",
        r"\p{Script_Extensions=Katakana}": "あア\u30fc",
        r"\p{sc=Han}": "漢あ",
        r"\p{Script=Cyrillic}": "Жa",
        r"\p{Alphabetic}": "aé1\u0345",
        r"\p{White_Space}": " \u0085\u200bx",
        r"\p{Emoji_Presentation}": "😀a",
        r"\p{Uppercase}": "AaⅠ",
        r"\p{Hex}": "fFg\uff10",
        r"\p{ID_Start}": "a_1",
    }
    for pattern, chars in cases.items():
        assert_agrees(pattern, list(chars))


REFUSED = [
    (r"(a)\1", "backreference", 4),
    (r"(?<n>a)\k<n>", "backreference", 8),
    (r"a(?=bc)", "lookahead of more than one character", 2),
    (r"(?<=ab)c", "lookbehind of more than one character", 1),
    (r"x(?:y|\ba)", "word boundary that may look before", 7),
    (r"(?:a\b|b)c", "word boundary that may look past", 5),
    (r"a?(^b)", "anchor ^", 4),
    (r"c(?:x?(?<!a))b", "lookbehind that may look before", 7),
]


@pytest.mark.parametrize(("pattern", "words", "column"), REFUSED)
def test_refused_with_position(pattern: str, words: str, column: int) -> None:
    assert ecma.is_valid(pattern)
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern, flavor="ecmascript")
    assert not isinstance(info.value, ecmascript.RegexSyntaxError)
    assert words in info.value.message
    assert (info.value.line, info.value.column) == (1, column)


SYNTAX_ERRORS = [
    (r"\a", "invalid escape", 1),
    (r"\e", "invalid escape", 1),
    (r"[\z]", "invalid escape", 2),
    ("{", "lone '{'", 1),
    ("a{", "lone '{'", 2),
    ("a{1", "incomplete quantifier", 2),
    (r"[\d-z]", "class escape cannot bound a range", 2),
    ("[z-a]", "out of order", 2),
    ("a{2,1}", "out of order", 2),
    ("*a", "nothing to repeat", 1),
    ("(?=a)*", "nothing to repeat", 6),
    ("(?i)a", "invalid group", 1),
    ("(?<1a>x)", "invalid group name", 4),
    ("(?<a>x)(?<a>y)", "duplicate group name", 11),
    ("(?<a>x)(?:(?<a>y)|z)", "duplicate group name", 14),
    (r"\k<a>", "names no group", 1),
    (r"\2(a)", "a group the pattern does not have", 1),
    (r"\c1", r"\c must be followed", 1),
    (r"\x4", r"\x must be followed", 1),
    (r"\u12", r"\u must be followed", 1),
    (r"\u{110000}", r"invalid \u{...}", 1),
    (r"\p{Letters}", "unknown property", 1),
    (r"\p{letter}", "unknown property", 1),
    (r"\p{Script=greek}", "unknown script", 1),
    (r"\p{Block=Basic_Latin}", "unknown property", 1),
    (r"\00", "invalid decimal escape", 1),
    ("(a", "missing ')'", 1),
    ("a)", "unmatched ')'", 2),
    ("[a", "missing ']'", 1),
]


@pytest.mark.parametrize(("pattern", "words", "column"), SYNTAX_ERRORS)
def test_syntax_errors(pattern: str, words: str, column: int) -> None:
    assert not ecma.is_valid(pattern)
    with pytest.raises(ecmascript.RegexSyntaxError) as info:
        parse_regex(pattern, flavor="ecmascript")
    assert words in info.value.message
    assert (info.value.line, info.value.column) == (1, column)


def test_unknown_flavor_and_flags() -> None:
    with pytest.raises(GrammarError, match="unknown regex flavor"):
        parse_regex("a", flavor="pcre")
    with pytest.raises(GrammarError, match="flag 'i'"):
        ecmascript.parse("a", "i")


# --------------------------------------------------------------------------- hypothesis

# ASCII, non-ASCII digits and letters, every kind of ECMAScript white space and line
# terminator, a combining mark, astral characters (emoji, a math digit, a CJK extension).
ALPHABET = list("aAbz_09-. \t\n\r") + [
    "é", "ß", "λ", "Ж", "ǅ", "٣", "߀", "🯸", "𝟘", "²", "\u00a0", "\ufeff", "\u2028", "\u3000",
    "\u0301", "\x85", "\u200b", "😀", "漢", "\U00020000",
]  # fmt: skip


def _lit(ch: str) -> str:
    if ch in ecmascript.SYNTAX_CHARS or ch == "/":
        return "\\" + ch
    return {"\n": r"\n", "\r": r"\r", "\t": r"\t"}.get(ch, ch)


ESCAPES = [r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", r"\p{L}", r"\P{L}", r"\p{Nd}", r"\p{Lu}", r"\p{Zs}",
           r"\p{ASCII}", r"\u00e9", r"\u{1FBF8}", r"\uD83D\uDE00", r"\x41", r"\cJ", r"\0"]  # fmt: skip


@st.composite
def atoms(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["lit"] * 4 + ["esc"] * 3 + ["class"] * 2 + ["dot", "assert", "look"]))
    if kind == "lit":
        return _lit(draw(st.sampled_from(ALPHABET)))
    if kind == "esc":
        return draw(st.sampled_from(ESCAPES))
    if kind == "class":
        items = draw(
            st.lists(
                st.one_of(
                    st.sampled_from(ALPHABET).map(_lit),
                    st.sampled_from(["a-z", "0-9", "\u00e0-\u00ff", "\u0660-\u0669", *ESCAPES]),
                ),
                min_size=0,
                max_size=3,
            )
        )
        return "[" + ("^" if draw(st.booleans()) else "") + "".join(items) + "]"
    if kind == "dot":
        return "."
    if kind == "assert":
        return draw(st.sampled_from(["^", "$", r"\b", r"\B"]))
    one = draw(st.sampled_from(["a", r"\d", r"\w", "[ab]", "."]))
    return draw(st.sampled_from(["(?=", "(?!", "(?<=", "(?<!"])) + one + ")"


QUANTIFIERS = ["*", "+", "?", "{2}", "{1,2}", "{2,}", "*?", "+?", "??", "{0,3}?"]


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join).map(lambda x: f"(?:{x})"),
        st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
        inner.map(lambda x: f"({x})"),
        inner.map(lambda x: f"(?<g>{x})"),
    )


def patterns() -> st.SearchStrategy[str]:
    body = st.recursive(atoms(), _extend, max_leaves=6)
    return st.tuples(st.sampled_from(["", "", "^"]), body, st.sampled_from(["", "", "$"])).map("".join)


def _same_category(ch: str) -> bool:
    """Whether ``regress`` puts ``ch`` in the General_Category Python's ``unicodedata`` does
    (the two may be on different Unicode versions: a character assigned since is left out)."""
    return ecma.search(rf"^\p{{gc={unicodedata.category(ch)}}}$", ch)


ANY_CHAR = st.characters(blacklist_categories=("Cs", "Cn")).filter(_same_category)
TEXT = st.text(st.one_of(st.sampled_from(ALPHABET), ANY_CHAR), max_size=6)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(pattern=patterns(), strings=st.lists(TEXT, min_size=1, max_size=6))
def test_random_patterns_agree_with_an_ecmascript_engine(pattern: str, strings: list[str]) -> None:
    assume(ecma.is_valid(pattern) and ecmascript.syntax_error(pattern) is None)  # see below
    try:
        full, find = whole(pattern), searcher(pattern)
    except ecmascript.RegexSyntaxError:
        raise AssertionError(f"{pattern!r} is valid ECMAScript") from None
    except GrammarError as e:  # refused: only the constructs this front end says it refuses
        assert any(w in e.message for w in ("anchor", "look", "word boundary")), e.message
        assume(False)
        return
    for s in strings:
        assert full.accepts(s.encode()) == ecma.fullmatch(pattern, s), (pattern, s, "fullmatch")
        assert find.accepts(s.encode()) == ecma.search(pattern, s), (pattern, s, "search")


QUANTIFIER_BRACES = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


def annex_b(pattern: str) -> str:
    """``pattern`` with each identity escape of ASCII punctuation that the ``u`` grammar lacks
    (``\\'``, ``\\:``, ``\\-`` outside a class...) and each ``]`` or ``}`` that closes
    nothing spelled ``\\xHH``: the same character, in the ``u`` grammar."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        ch, nxt = pattern[i], pattern[i + 1 : i + 2]
        if ch == "\\" and nxt in "pPu" and pattern[i + 2 : i + 3] == "{" and "}" in pattern[i:]:
            end = pattern.index("}", i) + 1  # \p{...}, \u{...}: its braces are its own
            out.append(pattern[i:end])
            i = end
            continue
        if not in_class and ch == "{" and (q := QUANTIFIER_BRACES.match(pattern, i)):
            out.append(q.group())
            i = q.end()
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        elif ch in "]}" and not in_class:
            out.append(f"\\x{ord(ch):02x}")
            i += 1
            continue
        if (
            ch == "\\"
            and nxt.isascii()
            and nxt.isprintable()
            and not nxt.isalnum()
            and nxt not in "^$\\.*+?()[]{}|/"
        ):
            out.append(f"\\x{ord(nxt):02x}")
            i += 2
            continue
        out.append(pattern[i : i + 2] if ch == "\\" else ch)
        i += 2 if ch == "\\" else 1
    return "".join(out)


def test_annex_b_identity_escapes() -> None:
    """ASCII punctuation after a backslash is that character (the one leniency)."""
    for pattern, strings in [
        (r"^mailto:[\w\_\~\!\$\&\'\(\)\*\+\,\;\=\:\.\-]+@", ["mailto:a_b~'!@x", "mailto:a b@x"]),
        (r"\'\"\:\-\#\%\@\<\>\`\ ", ["'\":-#%@<>` ", "x"]),
        (r"[\:-\@]", [":", ";", "@", "A"]),
    ]:
        assert not ecma.is_valid(pattern)
        full, find = whole(pattern), searcher(pattern)
        for s in strings:
            assert full.accepts(s.encode()) == ecma.fullmatch(annex_b(pattern), s), (pattern, s)
            assert find.accepts(s.encode()) == ecma.search(annex_b(pattern), s), (pattern, s)


SYNTAX_ALPHABET = list("ab()[]{}|^$\\*+?.-,0129dwsbBpPLuxck<>=!:/'_~") + [
    "\\p{L}",
    "\\u{41}",
    "(?<n>",
    "\\k<n>",
]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(SYNTAX_ALPHABET), max_size=8).map("".join))
def test_syntax_errors_are_ecmascripts(pattern: str) -> None:
    try:
        ecmascript.parse(pattern)
        ours, message = True, ""
    except ecmascript.RegexSyntaxError as e:
        ours, message = False, e.message
    if ours and not ecma.is_valid(pattern):  # the leniencies: ASCII punctuation escaped, lone ] }
        assert ecma.is_valid(annex_b(pattern)), pattern
        return
    if not ours and ecma.is_valid(pattern):
        # regress accepts a quantified \b, \B, ^ or $; ECMA-262's u-mode grammar has no
        # production for it (Term :: Assertion | Atom Quantifier), and V8 refuses /\b+/u.
        assert "an assertion cannot be quantified" in message, (pattern, message)
        return
    assert ours == ecma.is_valid(pattern), (pattern, message)


LONE_BRACKETS = ["a}", "]", "a]b", "x{2}}", "[a]]", "}+", "(a])", "a|}", r"\d}", "]]", "}{2}", "a{1}]"]


@pytest.mark.parametrize("pattern", LONE_BRACKETS)
def test_lone_closing_brackets_are_characters(pattern: str) -> None:
    """Annex B: a ``]`` or ``}`` that closes nothing is that character.  ``regress`` refuses these
    with the ``u`` flag (the ``u`` grammar has no such atom) and reads them so without it, which
    is the oracle here (the patterns use nothing else that the two modes read differently)."""
    assert not ecma.is_valid(pattern)
    oracle = regress.Regex(pattern, "")
    anchored = regress.Regex(f"^(?:{pattern})$", "")
    full, find = whole(pattern), searcher(pattern)
    for s in ["", "a", "a}", "]", "a]b", "xx}", "x}", "[a]]", "a]", "}", "}}", "]]", "5}", "b", "a|"]:
        assert full.accepts(s.encode()) == (anchored.find(s) is not None), (pattern, s, "fullmatch")
        assert find.accepts(s.encode()) == (oracle.find(s) is not None), (pattern, s, "search")


def test_quantified_assertion_is_a_syntax_error() -> None:
    """The one place this front end and ``regress`` part: ECMA-262 forbids it in u mode."""
    for pattern in (r"\b+", r"a^*", r"$?", r"\B{2}"):
        with pytest.raises(ecmascript.RegexSyntaxError, match="nothing to repeat"):
            ecmascript.parse(pattern)


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    deep = "(" * 10_000 + "a" + ")" * 10_000
    with pytest.raises(GrammarError, match="nests groups more than"):
        parse_regex(deep, flavor="ecmascript")
    assert ecmascript.syntax_error(deep) is None  # valid ECMAScript: a limit, not malformed
    assert whole("(?:" * 90 + "a" + ")" * 90).accepts(b"a")
