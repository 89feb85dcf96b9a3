"""Literal sets (``ir.LiteralSet``): JSON Schema ``enum``/``const`` compiled straight into a
minimal automaton (csrc/words.c), checked against their definition and the reference."""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.frontends.json_schema.canonical import canonical_string, canonical_strings

from .engine import EngineRecognizer
from .reference import ReferenceMatcher
from .strategies import Vocab, vocabularies
from .test_engine_differential import _replay_against_reference, _setup

# --------------------------------------------------------------------------- the IR node


def test_words_prefixes_and_repeats() -> None:
    g = ir.Grammar({"root": ir.LiteralSet((b"abc", b"ab", b"b", b"abd", b"ab", b""))}, "root")
    r = EngineRecognizer(g)
    for s in (b"abc", b"ab", b"b", b"abd", b""):
        assert r.accepts(s), s
    for s in (b"a", b"abcd", b"bb", b"c"):
        assert not r.accepts(s), s


def test_empty_set_is_an_empty_language() -> None:
    g = ir.Grammar({"root": ir.Seq((ir.Literal(b"x"), ir.LiteralSet(())))}, "root")
    with pytest.raises(cfgmask.GrammarError, match="language is empty"):
        cfgmask.compile(g, cfgmask.Vocabulary.from_token_bytes([b"x"]))


def test_set_inside_an_expression_and_shared() -> None:
    s = ir.LiteralSet((b"ab", b"abc", "é".encode()))
    g = ir.Grammar({"root": ir.Seq((s, ir.Literal(b"-"), ir.Repeat(s, 0, 2), ir.Ref("r"))), "r": s}, "root")
    r = EngineRecognizer(g)
    assert r.accepts("é-ababcé".encode()) and r.accepts(b"ab-ab")
    assert not r.accepts(b"ab-") and not r.accepts(b"ab-abababab")


@given(st.lists(st.binary(max_size=4), min_size=1, max_size=8), st.lists(st.binary(max_size=5), max_size=8))
def test_words_match_their_definition(words: list[bytes], others: list[bytes]) -> None:
    g = ir.Grammar(
        {"root": ir.Seq((ir.Literal(b"<"), ir.LiteralSet(tuple(words)), ir.Literal(b">")))}, "root"
    )
    r = EngineRecognizer(g)
    for w in words + others + [w[:-1] for w in words]:
        assert r.accepts(b"<" + w + b">") == (w in words), w


json_chars = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(['"', "\\", "/", "\n", "\x00", "\x1f", "\x7f", "a", "é", "€", "😀", "\u2028"]),
)
json_values = st.text(json_chars, max_size=4)


@given(st.lists(json_values, min_size=1, max_size=5), st.data())
def test_json_words_masks_equal_reference(values: list[str], data: st.DataObject) -> None:
    g = ir.Grammar({"root": ir.LiteralSet(tuple(v.encode() for v in values), json=True)}, "root")
    pieces = sorted({b for v in values for b in (canonical_string(v), v.encode())} | {b"\\u", b"00", b"\\"})
    v: Vocab = data.draw(vocabularies(pieces[:8]))
    ref, _, compiled = _setup(g, v)
    walk_ids = data.draw(st.lists(st.integers(0, len(v.tokens) - 1), max_size=4))
    assert compiled is not None
    m = cfgmask.Matcher(compiled)
    taken = [t for t in walk_ids if v.tokens[t] and t not in v.stop_ids and m.accept_token(t)]

    class Walk:
        token_ids = taken

    _replay_against_reference(compiled, ref, v, Walk)


# --------------------------------------------------------------------------- JSON Schema enums


def _spelling(rnd: random.Random, s: str) -> str:
    """A random JSON spelling of the string ``s`` (no lone surrogates)."""
    out = ['"']
    for c in s:
        options = []
        if ord(c) >= 0x20 and c not in '"\\':
            options.append(c)
        short = {
            '"': '\\"',
            "\\": "\\\\",
            "/": "\\/",
            "\b": "\\b",
            "\f": "\\f",
            "\n": "\\n",
            "\r": "\\r",
            "\t": "\\t",
        }
        if c in short:
            options.append(short[c])
        units = (
            [ord(c)] if ord(c) < 0x10000 else [0xD800 + ((ord(c) - 0x10000) >> 10), 0xDC00 + (ord(c) & 0x3FF)]
        )
        hexes = "".join(f"\\u{u:04x}" for u in units)
        options.append(
            "".join(ch.upper() if rnd.random() < 0.5 else ch for ch in hexes).replace("\\U", "\\u")
        )
        out.append(rnd.choice(options))
    return "".join(out) + '"'


def _candidates(values: list[str], rnd: random.Random) -> list[str]:
    """Texts to try: canonical and random spellings of each value, their proper prefixes,
    and spellings of near misses."""
    out = []
    for v in values:
        spelled = [canonical_string(v).decode(), _spelling(rnd, v), _spelling(rnd, v)]
        out += spelled + [t[:-1] for t in spelled] + [t[:-1] + 'x"' for t in spelled]
        out += [canonical_string(v[:-1]).decode(), canonical_string(v + v[:1]).decode()]
    return out


@given(st.lists(json_values, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_canonical_enum_accepts_exactly_the_canonical_texts(values: list[str], rnd: random.Random) -> None:
    g = cfgmask.Grammar.from_json_schema({"enum": values}, whitespace="compact")
    r = EngineRecognizer(g)
    texts = set(canonical_strings(values))
    for t in _candidates(values, rnd):
        assert r.accepts(t.encode()) == (t.encode() in texts), t


@given(st.lists(json_values, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_full_enum_accepts_every_spelling(values: list[str], rnd: random.Random) -> None:
    g = cfgmask.Grammar.from_json_schema({"enum": values}, canonical=False, whitespace="compact")
    r = EngineRecognizer(g)
    for t in _candidates(values, rnd):
        try:
            expected = json.loads(t) in values
        except json.JSONDecodeError:
            expected = False
        assert r.accepts(t.encode()) == expected, t


def test_surrogates() -> None:
    values = ["\ud800x", "\ud83d\ude00", "😀", "\udfff"]
    canon = EngineRecognizer(cfgmask.Grammar.from_json_schema({"enum": values}))
    assert canon.accepts(b'"\\ud800x"') and canon.accepts('"😀"'.encode()) and canon.accepts(b'"\\udfff"')
    assert not canon.accepts(b'"\\ud83d\\ude00"')  # that text is "😀": "\ud83d\ude00" has no spelling
    full = EngineRecognizer(cfgmask.Grammar.from_json_schema({"enum": values}, canonical=False))
    for t in ('"\\uD800x"', '"\\ud800\\u0078"', '"\\ud83d\\uDE00"', '"😀"', '"\\uDFFF"'):
        assert full.accepts(t.encode()), t
    assert not full.accepts(b'"\\ud800"') and not full.accepts(b'"\\ud83d"')


def test_mixed_enum() -> None:
    values = ["a", "", 1, 1.0, 2.5, 10**20, -0.0, None, True, [1, "a"], {"k": "v"}]
    canon = EngineRecognizer(cfgmask.Grammar.from_json_schema({"enum": values}, whitespace="compact"))
    for t in (
        '"a"',
        '""',
        "1",
        "2.5",
        "100000000000000000000",
        "null",
        "true",
        '[1,"a"]',
        '{"k":"v"}',
        "-0.0",
    ):
        assert canon.accepts(t.encode()), t
    for t in ('"\\u0061"', "1.0", "25e-1", "false", "-0", "[1]", "tru"):
        assert not canon.accepts(t.encode()), t  # 1.0 equals 1, which comes first
    full = EngineRecognizer(
        cfgmask.Grammar.from_json_schema({"enum": values}, canonical=False, whitespace="compact")
    )
    for t in ('"\\u0061"', "1.0", "1", "2.50", "-0", "null", '[1,"\\u0061"]'):
        assert full.accepts(t.encode()), t
    assert not full.accepts(b"3") and not full.accepts(b'"b"')


def test_integer_valued_float_is_kept() -> None:
    r = EngineRecognizer(cfgmask.Grammar.from_json_schema({"type": "integer", "enum": [1.0, "x", 2]}))
    assert r.accepts(b"1.0") and r.accepts(b"2") and not r.accepts(b'"x"')


def test_keywords_beside_enum_filter_values() -> None:
    g = cfgmask.Grammar.from_json_schema({"type": "string", "maxLength": 2, "enum": ["ab", "abc", 1]})
    r = EngineRecognizer(g)
    assert r.accepts(b'"ab"') and not r.accepts(b'"abc"') and not r.accepts(b"1")


def _identifiers(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rnd.choice(string.ascii_lowercase + "_") for _ in range(rnd.randint(5, 15))))
    return sorted(out)


def test_hundred_thousand_values_canonical() -> None:
    values = _identifiers(100_000)
    compiled = cfgmask.compile(cfgmask.Grammar.from_json_schema({"enum": values}), BYTES)
    for text, ok in (
        (values[0], True),
        (values[-1], True),
        (values[5000], True),
        ("zzzzzzzzzzzzzzzz", False),
    ):
        m = cfgmask.Matcher(compiled)
        assert (m.accept_bytes(json.dumps(text).encode()) and m.is_accepting()) == ok, text
    members = set(values)
    for v in values[:200]:
        m = cfgmask.Matcher(compiled)
        assert m.accept_bytes(json.dumps(v)[:-1].encode()) and not m.is_accepting()
        closed = cfgmask.Matcher(compiled)
        complete = closed.accept_bytes(json.dumps(v[:-1]).encode()) and closed.is_accepting()
        assert complete == (v[:-1] in members), v  # a member's proper prefix is a document only if listed


def test_ten_thousand_values_full_language() -> None:
    values = _identifiers(10_000, seed=8)
    g = cfgmask.Grammar.from_json_schema({"enum": values}, canonical=False)
    compiled = cfgmask.compile(g, BYTES)
    rnd = random.Random(3)
    for v in values[:50] + values[-50:]:
        m = cfgmask.Matcher(compiled)
        assert m.accept_bytes(_spelling(rnd, v).encode()) and m.is_accepting(), v
    m = cfgmask.Matcher(compiled)
    assert not (m.accept_bytes(b'"' + values[0][:-1].encode() + b'"') and m.is_accepting())


BYTES = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [None], stop_token_ids=[256])


def test_reference_agrees_on_a_small_schema() -> None:
    g = cfgmask.Grammar.from_json_schema({"enum": ["a/b", "é", 'q"'], "type": "string"}, canonical=False)
    ref = ReferenceMatcher(g.ir)
    for t in ('"a\\/b"', '"\\u00E9"', '"q\\""', '"q\\u0022"', '"a/"'):
        assert ref.accepts(t.encode()) == EngineRecognizer(g).accepts(t.encode()), t


# --------------------------------------------------------------------------- hostile encodings


@given(
    st.integers(0, 2),
    st.lists(st.integers(0, 6), max_size=4),
    st.binary(max_size=12),
    st.integers(-2, 2),
    st.booleans(),
)
def test_malformed_words_nodes_are_refused_not_crashed(
    flags: int, lens: list[int], data: bytes, skew: int, nested: bool
) -> None:
    """CM_IR_WORDS with lengths that do not add up, truncated code, bad flags, bytes that are
    not UTF-8 in JSON mode: built or refused with a ValueError, never read out of bounds."""
    from array import array

    from cfgmask import _core

    node = array("I", [9, flags, len(lens), max(0, len(data) + skew), *lens])
    node.frombytes(data + bytes(-len(data) % 4))
    code = array("I", [4, 1, 3]) + node if nested else node  # SEQ of one child: the Thompson path
    try:
        _core.compile_components(code, array("I", [0]), [([(0, 0, 0)], [], False, None)], 100, 10, 0, 0.0)
    except ValueError as e:
        assert "malformed" in str(e)


@pytest.mark.parametrize("canonical", [True, False])
def test_enums_inside_objects_and_counted_arrays(canonical: bool) -> None:
    items = {"enum": [f"a{i}" for i in range(3000)]}  # a big set: a rule of its own, counted
    schema = {
        "type": "object",
        "properties": {
            "c": {"enum": ["red", "green"]},
            "xs": {"type": "array", "items": items, "maxItems": 3},
        },
        "required": ["c"],
    }
    r = EngineRecognizer(cfgmask.Grammar.from_json_schema(schema, canonical=canonical))
    assert r.accepts(b'{"c": "red"}') and r.accepts(b'{"c": "red", "xs": ["a1", "a2999", "a0"]}')
    for t in ('{"c": "re"}', '{"c": "red", "xs": ["a1", "a1", "a1", "a1"]}', '{"c": "red", "xs": ["a3000"]}'):
        assert not r.accepts(t.encode()), t
    assert r.accepts(b'{"c": "\\u0072ed", "xs": ["a\\u0031"]}') == (not canonical)


def test_limits_of_a_literal_set() -> None:
    """Not max_dfa_states (subset construction's limit): a set's automaton is no bigger than
    its text.  max_total_states, max_compile_mb and deadline_ms still hold."""
    from cfgmask.compile.limits import CompileLimits

    g = cfgmask.Grammar.from_json_schema({"enum": _identifiers(1000)})
    cfgmask.compile(g, BYTES, limits=CompileLimits(max_dfa_states=100))
    big = cfgmask.Grammar.from_json_schema({"enum": _identifiers(20_000)})  # a 10 MB table
    for grammar, limits, name in (
        (g, CompileLimits(max_total_states=1000), "max_total_states"),
        (big, CompileLimits(max_compile_mb=1), "max_compile_mb"),
    ):
        cfgmask.clear_caches()
        with pytest.raises(cfgmask.LimitError) as info:
            cfgmask.compile(grammar, BYTES, limits=limits)
        assert info.value.limit == name


def test_json_words_must_be_utf8() -> None:
    for bad in (b"\xff", "\ud800".encode("utf-8", "surrogatepass"), b"\xc3"):
        g = ir.Grammar({"root": ir.LiteralSet((b"ok", bad), json=True)}, "root")
        with pytest.raises(cfgmask.GrammarError, match="not UTF-8"):
            cfgmask.compile(g, BYTES)
