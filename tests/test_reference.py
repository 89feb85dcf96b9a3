"""The reference matcher against independent verdicts.

Hand-written tables, Python's UTF-8 codec, Python's ``re``, a denotational
recognizer (``oracle.derives``) and brute-force search over short strings each
judge the reference; the hypothesis strategies are self-tested here too.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cfgmask import ir

from .helpers import alt, byte_class, chars, check, grammar, json_grammar, lit, opt, ref, rep, seq
from .oracle import derives
from .reference import ReferenceMatcher
from .strategies import (
    SMALL,
    SMALL_BYTES,
    Regex,
    grammar_alphabet,
    grammars,
    regexes,
    token_walks,
    vocabularies,
)

ALL_BYTES = [bytes((b,)) for b in range(256)]

# --------------------------------------------------------------------------- tables


def test_literals_sequences_alternatives() -> None:
    check(
        grammar(root=seq(lit("ab"), alt(lit("c"), lit("dé")))),
        accepts=["abc", "abdé"],
        rejects=["", "ab", "abd", "abcé", "abé"],
    )
    check(grammar(root=lit("")), accepts=[""], rejects=["a"])
    check(grammar(root=ir.EPSILON), accepts=[""], rejects=["a", b"\x00"])
    check(grammar(root=ir.NOTHING), rejects=["", "a"])


def test_repeat_bounds() -> None:
    ab = chars("ab")
    check(grammar(root=rep(ab, 4, 4)), accepts=["aaaa", "abab"], rejects=["aaa", "aaaaa", ""])
    check(grammar(root=rep(ab, 4)), accepts=["aaaa", "ababab"], rejects=["aaa", ""])
    check(grammar(root=rep(ab, 0, 4)), accepts=["", "a", "abab"], rejects=["aaaaa", "c"])
    check(grammar(root=rep(ab, 3, 2)), rejects=["", "aa", "aaa"])  # lo > hi: nothing
    check(grammar(root=rep(lit(""), 2, 5)), accepts=[""], rejects=["a"])
    hex_bytes = grammar(root=rep(seq(lit("0x"), rep(chars("AF", "09"), 2, 2), opt(lit(" "))), 3, 5))
    check(
        hex_bytes,
        accepts=["0xFF 0x12 0xF0", "0xF0 0xFF 0x12 0xF0 0x12 "],
        rejects=["0xFF 0x12", "0x1 0x12 0xF0"],
    )


def test_large_bounded_repeat_is_fast() -> None:
    """Bounded repeats are unrolled naively; one {0,50} per word must stay cheap.

    (Nested ambiguous bounds like ``(x{0,5}){0,50}`` are Earley's worst case: seconds.)
    """
    m = ReferenceMatcher(grammar(root=rep(seq(rep(chars("az"), 0, 50), lit(" ")), 0, 4)))
    t = time.perf_counter()
    assert m.accepts(b"a" * 50 + b" " + b"b" * 49 + b" ") and not m.accepts(b"a" * 51 + b" ")
    assert m.is_prefix(b"a" * 50) and not m.is_prefix(b"a" * 51)
    assert time.perf_counter() - t < 1.0


def test_recursion() -> None:
    check(
        grammar(root=alt(seq(ref("root"), lit("x")), lit("y"))),
        accepts=["y", "yxxx"],
        rejects=["", "x", "yy"],
    )
    check(
        grammar(root=alt(seq(lit("("), ref("root"), lit(")")), ir.EPSILON)),
        accepts=["", "(())"],
        rejects=["(()", ")("],
    )
    mutual = grammar(
        root=alt(lit("a"), seq(lit("("), ref("b"), lit(")"))),
        b=seq(ref("root"), rep(seq(lit(","), ref("root")))),
    )
    check(mutual, accepts=["a", "(a,(a))"], rejects=["()", "(a,)"])
    ambiguous = grammar(root=alt(seq(ref("root"), ref("root")), lit("a"), ir.EPSILON))
    check(ambiguous, accepts=["", "a", "aaaa"], rejects=["b"])


def test_nested_nullable_repetition() -> None:
    check(grammar(root=rep(rep(chars("x")))), accepts=["", "x", "xxxx"], rejects=["y", "xy"])
    check(
        grammar(root=rep(alt(ir.EPSILON, rep(lit("ab"), 0, 2)), 1, 3)),
        accepts=["", "ab", "ababab"],
        rejects=["a", "aba"],
    )
    check(grammar(root=rep(ref("n")), n=rep(ref("n"), 0, 1)), accepts=[""], rejects=["a"])


def test_unproductive_rules_are_dead_ends() -> None:
    g = grammar(root=alt(seq(lit("a"), ref("x")), lit("c")), x=seq(ref("x"), lit("b")))
    check(g, accepts=["c"], rejects=["a", "ab", "abbb"])
    m = ReferenceMatcher(g)
    assert not m.is_prefix(b"a") and not m.is_prefix(b"ab") and m.is_prefix(b"")
    empty = ReferenceMatcher(grammar(root=ref("x"), x=seq(lit("a"), ref("x"))))
    assert not empty.is_prefix(b"") and not empty.is_prefix(b"a")
    dead_class = ReferenceMatcher(grammar(root=alt(seq(lit("a"), chars((0xD800, 0xDFFF))), lit("b"))))
    assert not dead_class.is_prefix(b"a") and not dead_class.is_prefix(b"a\xed")


def test_byte_class_matches_raw_bytes() -> None:
    g = grammar(root=rep(byte_class((0x80, 0xFF))))
    check(g, accepts=[b"", b"\xff\xfe", b"\xc3\xa9", b"\xc0\x80"], rejects=[b"a"])
    check(grammar(root=seq(byte_class((0xC3, 0xC3)), chars("é"))), rejects=["é"], accepts=[b"\xc3\xc3\xa9"])


def test_errors() -> None:
    with pytest.raises(ValueError, match="undefined"):
        ReferenceMatcher(grammar(root=ref("nope")))
    with pytest.raises(ValueError, match="start"):
        ReferenceMatcher(ir.Grammar({"a": lit("a")}, "root"))


JSON_OK = ['{"a": [1, -2.5e+3, true, null, "x\\n\\u00e9"], "b": {}}', "[]", ' "é😀" ', "0", "-0.0e0"]
JSON_BAD = ["{", "[1,]", '{"a" 1}', "01", '"\\x"', '"\x01"', "tru", "", "1 2"]


def test_json_grammar() -> None:
    check(json_grammar(), accepts=JSON_OK, rejects=JSON_BAD)
    for doc in JSON_OK + JSON_BAD:
        json_ok = _json_valid(doc)
        assert ReferenceMatcher(json_grammar()).accepts(doc.encode()) == json_ok, doc


def _json_valid(doc: str) -> bool:
    try:
        json.loads(doc)
    except ValueError:
        return False
    return True


def test_json_document_is_fast() -> None:
    doc = json.dumps(
        {"name": "Zoë €😀", "v": [1, 2.5, -3e10, True, None, {"a": "b\n"}], "k": "lorem ipsum " * 8}, indent=1
    )
    m = ReferenceMatcher(json_grammar())
    t = time.perf_counter()
    assert len(doc.encode()) >= 200 and m.accepts(doc.encode())
    assert time.perf_counter() - t < 1.0


def test_mask_roles() -> None:
    m = ReferenceMatcher(grammar(root=rep(lit("ab"), 1)))
    tokens: list[bytes | None] = [b"a", b"b", b"ab", b"aba", b"", None, b"ab", b"</s>", b"abab"]
    stops, specials = (5, 7), (6, 8)  # a special token is blocked even when its text fits
    allowed = {b"": [0, 2, 3], b"a": [1], b"ab": [0, 2, 3, 5, 7], b"b": []}
    for prefix, ids in allowed.items():
        assert m.mask(prefix, tokens, stops, specials) == [t in ids for t in range(len(tokens))], prefix


# --------------------------------------------------------------------------- UTF-8


def test_utf8_partial_sequences_are_viable() -> None:
    m = ReferenceMatcher(grammar(root=rep(chars((0, 0x10FFFF)))))
    for text in ["é", "€", "😀", "\U0010ffff", "\ud7ff", "\ue000"]:
        enc = text.encode()
        assert all(m.is_prefix(enc[:i]) for i in range(len(enc) + 1)), text
        assert m.accepts(enc) and not (len(enc) > 1 and m.accepts(enc[:-1]))


@pytest.mark.parametrize(
    "bad",
    [
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xe0\x9f\xbf",
        b"\xf0\x80\x80\x80",
        b"\xf0\x8f\xbf\xbf",  # overlong
        b"\xed\xa0\x80",
        b"\xed\xbf\xbf",  # surrogates
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xf7\xbf\xbf\xbf",  # above U+10FFFF
        b"\x80",
        b"\xbf",
        b"\xff",
        b"\xfe",
        b"\xc3a",
    ],
)
def test_utf8_invalid_sequences_are_dead(bad: bytes) -> None:
    m = ReferenceMatcher(grammar(root=rep(chars((0, 0x10FFFF)))))
    assert not m.is_prefix(bad) and not m.accepts(bad)
    with pytest.raises(UnicodeDecodeError):  # Python agrees
        bad.decode("utf-8")


@cache
def _encodings(ranges: tuple[tuple[int, int], ...]) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """Every member's encoding, and every prefix of one, by brute force over all code points."""
    full = {chr(c).encode() for lo, hi in ranges for c in range(lo, hi + 1) if not 0xD800 <= c <= 0xDFFF}
    return frozenset(full), frozenset(e[:i] for e in full for i in range(len(e) + 1))


BOUNDARY_CLASSES = [
    ((0x70, 0xA0),),
    ((0x7F0, 0x810),),
    ((0xD7F0, 0xE010),),
    ((0xFFF0, 0x10010),),
    ((0x10FFF0, 0x10FFFF),),
    ((0x41, 0x41), (0x7FF, 0x800), (0xFFFF, 0x10000)),
]


@pytest.mark.parametrize("ranges", BOUNDARY_CLASSES)
def test_char_class_prefixes_match_brute_force(ranges: tuple[tuple[int, int], ...]) -> None:
    full, prefixes = _encodings(ranges)
    m = ReferenceMatcher(grammar(root=ir.CharClass(ranges)))
    starts = sorted(
        {p[:1] for p in prefixes if p} | {b"\x00", b"\x80", b"\xc0", b"\xed", b"\xf4", b"\xf5", b"\xff"}
    )
    longer = sorted(p for p in prefixes if len(p) in (2, 3))
    for p in [b""] + starts + longer:
        got = m.mask(p, ALL_BYTES)
        want = [p + b in prefixes for b in ALL_BYTES]
        assert got == want, (ranges, p)
        assert m.accepts(p) == (p in full)
    assert all(m.accepts(e) for e in full)


# Table 3-7 of the Unicode Standard: the well-formed UTF-8 byte sequences, byte range by byte range.
WELL_FORMED_UTF8 = [
    [(0x00, 0x7F)],
    [(0xC2, 0xDF), (0x80, 0xBF)],
    [(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    [(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    [(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
]


def _table_prefix(data: bytes) -> bool:
    return any(
        len(data) <= len(row) and all(lo <= b <= hi for b, (lo, hi) in zip(data, row, strict=False))
        for row in WELL_FORMED_UTF8
    )


def test_any_char_class_matches_the_unicode_table() -> None:
    """Every 1-, 2- and (for the tricky lead bytes) 3-byte prefix of ``[\x00-\U0010ffff]``."""
    m = ReferenceMatcher(grammar(root=chars((0, 0x10FFFF))))
    tricky = [bytes((a, b)) for a in (0xE0, 0xED, 0xEF, 0xF0, 0xF4) for b in range(0x7F, 0xC1)]
    for p in [b""] + ALL_BYTES + tricky:
        assert m.mask(p, ALL_BYTES) == [_table_prefix(p + b) for b in ALL_BYTES], p


# --------------------------------------------------------------------------- regexes


REGEX_ALPHABET = "abz\x00\x7f\x80éÿ\u07ff\u0800€\ud7ff\ue000\uffff\U00010000😀\U0010ffff"


@given(regexes(), st.data())
def test_regex_equivalent_grammars_match_re(rx: Regex, data: st.DataObject) -> None:
    m = ReferenceMatcher(rx.grammar())
    members = st.from_regex(rx.pattern, fullmatch=True, alphabet=st.sampled_from(REGEX_ALPHABET))
    others = st.text(st.sampled_from(REGEX_ALPHABET), max_size=6)
    for s in data.draw(st.lists(members | others, min_size=1, max_size=8)):
        assert m.accepts(s.encode()) == (re.fullmatch(rx.pattern, s) is not None), s


# --------------------------------------------------------------------------- brute force


@cache
def _small_strings(n: int) -> tuple[bytes, ...]:
    return tuple(b"".join(w) for k in range(n + 1) for w in itertools.product(SMALL_BYTES, repeat=k))


@given(grammars(SMALL, max_rules=3))
def test_small_grammars_against_brute_force(g: ir.Grammar) -> None:
    """accepts = derives; is_prefix <= some completion exists (of up to 4 bytes)."""
    m = ReferenceMatcher(g)
    members = {s for s in _small_strings(4) if derives(g, s)}
    for s in _small_strings(4):
        assert m.accepts(s) == (s in members), s
        if any(w.startswith(s) for w in members):
            assert m.is_prefix(s), s


@given(grammars(SMALL, max_rules=3), st.data())
def test_viable_prefixes_have_completions(g: ir.Grammar, data: st.DataObject) -> None:
    """is_prefix => a completion exists: found by search, confirmed by the oracle."""
    m = ReferenceMatcher(g)
    viable = [s for s in _small_strings(3) if m.is_prefix(s)]
    for s in data.draw(st.lists(st.sampled_from(viable), max_size=4)) if viable else ():
        found = _complete(m, s, SMALL_BYTES)
        if found is None:
            event("completion longer than the search bound")
            continue
        assert derives(g, found), (s, found)


def _complete(
    m: ReferenceMatcher, prefix: bytes, alphabet: tuple[bytes, ...], depth: int = 12
) -> bytes | None:
    """Breadth-first search for an accepted extension of viable ``prefix``, following the mask."""
    level = [prefix]
    for _ in range(depth):
        for s in level:
            if m.accepts(s):
                return s
        nxt = [s + b for s in level for b, ok in zip(alphabet, m.mask(s, list(alphabet)), strict=True) if ok]
        assert nxt, f"viable prefixes {level!r} have no viable extension"
        level = nxt[:32]
    return None


# --------------------------------------------------------------------------- strategies, self-tested


@given(grammars(), st.data())
def test_generated_grammars_mask_by_definition(g: ir.Grammar, data: st.DataObject) -> None:
    m = ReferenceMatcher(g)
    vocab = data.draw(vocabularies(grammar_alphabet(g)))
    walk = data.draw(token_walks(m, vocab))
    assert m.is_prefix(walk.prefix) or not m.is_prefix(b"")
    event(f"walk of {len(walk.token_ids)} tokens")
    got = m.mask(walk.prefix, vocab.tokens, vocab.stop_ids, vocab.special_ids)
    done = m.accepts(walk.prefix)
    for t, text in enumerate(vocab.tokens):
        if t in vocab.stop_ids:
            assert got[t] == done
        elif t in vocab.special_ids or not text:
            assert not got[t]
        else:
            assert got[t] == m.is_prefix(walk.prefix + text), t


@given(grammars(), st.data())
def test_generated_grammars_have_no_dead_ends(g: ir.Grammar, data: st.DataObject) -> None:
    """Every viable prefix is accepted or has a viable next byte; accepted strings are members."""
    m = ReferenceMatcher(g)
    s = b""
    if not m.is_prefix(s):
        return
    for _ in range(data.draw(st.integers(0, 8))):
        if m.accepts(s):
            assert derives(g, s), s
        nxt = [b for b, ok in zip(ALL_BYTES, m.mask(s, ALL_BYTES), strict=True) if ok]
        if not nxt:
            assert m.accepts(s), s
            return
        s += data.draw(st.sampled_from(nxt))
        assert m.is_prefix(s) and all(m.is_prefix(s[:i]) for i in range(len(s)))


# --------------------------------------------------------------------------- llama.cpp vectors

VECTORS = Path(__file__).parent / "corpora" / "llama.cpp" / "vectors" / "grammar_integration.json"


def _gbnf_records() -> list[dict[str, Any]]:
    """The plain-GBNF records.  Excluded: json_schema records (they need llama.cpp's schema
    converter) and ``requires_token_ids`` records (``<[N]>`` segments are not bytes)."""
    records = json.loads(VECTORS.read_text(encoding="utf-8"))
    return [r for r in records if r["kind"] == "gbnf" and not r.get("requires_token_ids")]


@pytest.mark.parametrize("record", _gbnf_records(), ids=lambda r: r["name"])
def test_llama_cpp_integration_vectors(record: dict[str, Any]) -> None:
    gbnf = pytest.importorskip("cfgmask.frontends.gbnf")
    check(gbnf.parse_gbnf(record["grammar"]), accepts=record["pass"], rejects=record["fail"])
