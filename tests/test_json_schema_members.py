"""A property's member made in one step (issue 12, session 39): the same IR and report as the
general path.

``Containers._listed`` compiles a property's scalar value (``{"type": "string"}``, annotations
beside it) with ``SchemaCompiler.member_value`` instead of ``schema``, and names a key of name
characters ``prop-`` and the key, spelled canonically as the key in quotes, without ``fresh``'s
stem or ``key``'s encoding; a bounded integer's scientific spellings are known dead without
building them (``numbers.sci_positive``); JSON's punctuation literals stay through
``clear_memos``.  Each is checked against the path it short-cuts.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import Grammar, ir
from cfgmask.errors import CfgmaskError
from cfgmask.frontends import json_schema
from cfgmask.frontends.json_schema import _ir_util, containers, empty, numbers, report, walk


def _output(schema: Any, canonical: bool, strict: bool = False) -> str:
    """The IR (rule names in order, bodies, start, meta) and report of a cold front end run."""
    json_schema.clear_memos()
    try:
        g, report = json_schema.schema_to_grammar(schema, strict=strict, canonical=canonical)
    except CfgmaskError as e:
        return f"{type(e).__name__}: {e}"
    return repr((g.start, g.meta, list(g.rules.items()), list(report)))


# values a property may have: scalar leaves (with annotations, an "x-" key, a "/" or "~" in an
# annotation's name), and what is not one (a type list, a keyword beside the type, a $ref, an
# unknown keyword, an object, booleans)
_VALUES: list[Any] = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"description": "d", "type": "string", "title": "t"},
    {"type": "integer", "x-order": 3, "default": 1},
    {"examples": ["a"], "type": "number", "$comment": "c"},
    {"type": "string", "x-a/b": 1, "x-c~d": 2},
    {"type": ["string", "null"]},
    {"type": "string", "maxLength": 3},
    {"type": "integer", "minimum": 1, "maximum": 200},
    {"type": "string", "unknown": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {"$ref": "#/$defs/s"},
    {"$id": "http://example.com/s", "type": "string"},
    True,
    False,
    {},
]

# keys: plain ones (the one-step name and spelling), and each thing that makes a key not plain
_KEYS = [
    "id", "a_b", "a-b", "A9", "x" * 55, "x" * 56, "b-", "-a", "_", "-", "", "a b", "é", "a\"b",
    "a\\b", "a/b", "a~b", "\U0001f600", "prop", "x" * 54 + "-",
]  # fmt: skip


def _schema(values: list[Any], keys: list[str], required: list[str]) -> dict[str, Any]:
    props = {k: values[i % len(values)] for i, k in enumerate(keys)}
    return {"$defs": {"s": {"type": "string"}}, "type": "object", "properties": props, "required": required}


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every property through the general path: no key plain, every value walked by schema."""
    monkeypatch.setattr(containers, "_KEY_CHARS", "")  # strip leaves every key as it is
    monkeypatch.setattr(walk.SchemaCompiler, "member_value", walk.SchemaCompiler.schema)


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("shift", [0, 1, 7])
def test_members_in_one_step_equal_the_general_path(
    canonical: bool, shift: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = _VALUES[shift:] + _VALUES[:shift]
    schemas = [
        _schema(values, _KEYS, []),
        _schema(values, _KEYS, ["id", "a-b"]),
        {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "string"}}}}},
        {"type": "object", "properties": {"x-y": {"type": "string"}}, "required": ["x-y"]},
        {"type": "object", "properties": {"a": False, "b": {"type": "null"}}, "required": ["a"]},
    ]
    got = [_output(s, canonical) for s in schemas]
    assert not any(g.startswith("GrammarError") for g in got[:4])  # grammars, compared rule by rule
    _general(monkeypatch)
    assert got == [_output(s, canonical) for s in schemas]


def test_plain_keys_are_their_own_stems() -> None:
    """The one-step name is ``fresh``'s: ``"prop-" + key`` is its own stem exactly for the keys
    the pattern calls plain, and their canonical spelling is the key in quotes."""
    for n in _KEYS:
        if containers.plain_key(n):
            assert _ir_util.stem_of("prop-" + n) == "prop-" + n, n
            assert json.dumps(n) == '"' + n + '"', n
    assert containers.plain_key("x" * 55) and not containers.plain_key("x" * 56)
    assert not containers.plain_key("b-") and not containers.plain_key("")


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{0,54}[A-Za-z0-9_]").fullmatch  # the pattern plain_key replaced


@given(st.text(alphabet=st.sampled_from('aZ09_-é ~/\\"\x00'), max_size=60) | st.sampled_from(_KEYS))
def test_plain_key_is_the_pattern(n: str) -> None:
    """plain_key's strip test (and _listed's inline copy of it, which _general turns off) holds
    exactly for the keys the pattern it replaced matches."""
    assert containers.plain_key(n) == (_PLAIN_KEY(n) is not None), n


def test_member_value_leaves_the_walk_as_schema_does() -> None:
    """A leaf compiled by member_value leaves the compiler's depth, scope and empty reason as
    schema leaves them."""
    for v in _VALUES:
        outs = []
        for f in (walk.SchemaCompiler.member_value, walk.SchemaCompiler.schema):
            c = walk.SchemaCompiler({"$defs": {"s": {"type": "string"}}}, False, "default")
            c.depth = 1
            c.empty_why = "before"
            out = f(c, v, "/properties/p", walk.ROOT_BASE)
            outs.append((out, c.depth, c.scope, c.empty_why, list(c.rules), c.rep.report))
        assert outs[0] == outs[1], v


_BOUNDS = [None, "0", "1", "7", "0.5", "200", "1e15", "9999999999999999", "1e16", "10000000000000001"]


@pytest.mark.parametrize("integer", [True, False])
def test_dead_scientific_spellings_are_what_the_parts_give(integer: bool) -> None:
    """``sci_positive``'s bounded-integer cut gives what building the parts gives, on each side
    of the least exponent an integer's scientific spelling has (1e16)."""
    for lo in _BOUNDS:
        for hi in _BOUNDS:
            if lo is None or (hi is not None and Decimal(hi) < Decimal(lo)):
                continue
            for li in (True, False):
                for hi_incl in (True, False):
                    a, b = Decimal(lo), None if hi is None else Decimal(hi)
                    got = numbers.sci_positive(a, li, b, hi_incl, integer)
                    assert got == numbers._sci_positive(a, li, b, hi_incl, integer), (lo, hi, li, hi_incl)


def test_punctuation_is_kept_and_spelled() -> None:
    json_schema.clear_memos()
    assert _ir_util._LITERALS == _ir_util._PUNCTUATION
    for s, lit in _ir_util._PUNCTUATION.items():
        assert lit == ir.Literal(s.encode()) and _ir_util.lit(s) is lit


# scalar leaves with their own keywords (SchemaCompiler.leaf), each twice or more so that the
# kept expression and rows are replayed; values that look alike to a coarse key (1 / 1.0 / True,
# 0.0 / -0.0), normalized ones (draft-04 exclusives, a float count, const), empty languages,
# errors, rules made afresh each time (multipleOf), known and unknown formats, a pattern
_LEAVES: list[Any] = [
    {"type": "integer", "minimum": 1, "maximum": 200},
    {"type": "integer", "minimum": 0},
    {"type": "number", "minimum": 0, "exclusiveMaximum": 1.5, "description": "d"},
    {"type": "number", "maximum": 1, "exclusiveMaximum": True},
    {"type": "integer", "minimum": 1, "exclusiveMinimum": True, "x-k": 1},
    {"type": "integer", "minimum": 5, "maximum": 1},
    {"type": "integer", "multipleOf": 3, "maximum": 30},
    {"type": "number", "multipleOf": 0.5},
    {"type": "string", "maxLength": 100},
    {"type": "string", "maxLength": 3.0, "title": "t"},
    {"type": "string", "minLength": 4, "maxLength": 2},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "no-such-format"},
    {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
    {"type": "string", "enum": ["alpha", "beta", 3]},
    {"type": "string", "enum": ["a"], "maxLength": 0},
    {"type": "string", "const": "k"},
    {"type": "integer", "enum": [1, 2]},
    {"type": "integer", "enum": [1.0, 2]},
    {"type": "number", "enum": [0.0]},
    {"type": "number", "enum": [-0.0]},
    {"type": "boolean", "enum": [True]},
    {"type": "boolean", "const": False, "examples": [False]},
    {"type": "null", "enum": [None]},
    {"description": "a/b", "type": "string", "x-a~b": 0, "minLength": 1},
    {"type": "integer", "maxLength": 3},
    {"type": "string", "minimum": 3},
]
_BAD_LEAVES: list[Any] = [
    {"type": "integer", "minimum": "3"},
    {"type": "string", "maxLength": -1},
    {"type": "string", "enum": "a"},
    {"type": "integer", "minimum": True},
    {"type": "string", "format": 3},
    {"type": "string", "pattern": "("},
]


# values whose type lists scalar types, with their keywords (SchemaCompiler.union_leaf), each
# twice or more so that the kept expression and rows are replayed: with annotations (their rows
# come first) and without, the types in either order, normalized keywords, rules made afresh
# (multipleOf), a half-empty and an empty language, and what takes schema()'s path (a base, an
# unknown keyword, a container type)
_UNIONS: list[Any] = [
    {"type": ["string", "null"]},
    {"type": ["string", "null"], "maxLength": 255},
    {"description": "d", "type": ["string", "null"], "maxLength": 255, "x-a/b": 1},
    {"type": ["null", "string"], "maxLength": 255},
    {"type": ["boolean", "null"], "title": "t"},
    {"type": ["integer", "null"], "minimum": 0, "maximum": 10},
    {"type": ["number", "string"], "minimum": 0, "maxLength": 3},
    {"type": ["string", "null"], "enum": ["a", None]},
    {"type": ["string", "null"], "const": None},
    {"type": ["integer", "string"], "multipleOf": 3},
    {"type": ["string", "null"], "pattern": "^[a-z]+$"},
    {"type": ["string", "null"], "format": "date-time"},
    {"type": ["string", "null"], "minLength": 4, "maxLength": 2},
    {"type": ["string", "integer"], "minLength": 4, "maxLength": 2, "minimum": 5, "maximum": 1},
    {"type": ["string", "null"], "maxLength": 3.0},
    {"type": ["number", "null"], "maximum": 1, "exclusiveMaximum": True},
    {"type": ["string", "null"], "$id": "http://example.com/u"},
    {"type": ["string", "null"], "unknown": 1},
    {"type": ["string", "object"], "maxLength": 2},
    {"type": ["string", "null"], "minItems": 1},
]
_BAD_UNIONS: list[Any] = [
    {"type": ["string", "string"]},
    {"type": []},
    {"type": ["string", "null"], "maxLength": -1},
    {"type": ["string", "null"], "pattern": "("},
]


def _leaf_schemas(values: list[Any], draft: str) -> list[Any]:
    props = {f"p{i}": v for i, v in enumerate(values * 3)}
    out = [
        {"$schema": draft, "type": "object", "properties": props},
        {"$schema": draft, "type": "object", "properties": props, "required": ["p0", "p5"]},
        {"type": "object", "properties": {"a": values[0], "b/c": values[0], "d~e": values[0]}},
    ]
    return out


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    "draft", ["http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2020-12/schema"]
)
@pytest.mark.parametrize("kind", ["leaves", "type lists"])
def test_leaves_with_keywords_equal_the_general_path(
    canonical: bool, strict: bool, draft: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scalar with its own keywords, or a type list of scalars with theirs (and each replay of
    one met before) gives the IR, report or error of the general path, in lenient and strict
    mode, draft-04 and 2020-12."""
    good, bad = (_LEAVES, _BAD_LEAVES) if kind == "leaves" else (_UNIONS, _BAD_UNIONS)
    schemas = _leaf_schemas(good, draft) + [s for b in bad for s in _leaf_schemas([b], draft)]
    for i in range(len(good)):  # each one alone too: an empty language is the schema's
        schemas += _leaf_schemas([good[i], good[i]], draft)
    got = [_output(s, canonical, strict) for s in schemas]
    if not strict:
        assert "NotEnforceable" not in "".join(got) and not got[0].startswith("GrammarError")
    _general(monkeypatch)
    assert got == [_output(s, canonical, strict) for s in schemas]


def test_leaves_leave_the_walk_as_schema_does() -> None:
    """A leaf with keywords or a type list, compiled or replayed, leaves depth, scope and empty
    reason (an empty language's own) as schema leaves them."""
    for v in _LEAVES + _UNIONS:
        outs = []
        for f in (walk.SchemaCompiler.member_value, walk.SchemaCompiler.schema):
            c = walk.SchemaCompiler({}, False, "default")
            c.depth = 1
            got = []
            for p in ("/properties/p", "/properties/q"):
                c.empty_why = "before"
                out = f(c, v, p, walk.ROOT_BASE)
                got.append((out, c.depth, c.scope, c.empty_why))
            outs.append((got, list(c.rules), c.rep.report))
        assert outs[0] == outs[1], v


def test_a_repeated_leaf_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept expression is what replays: four equal bounded integers build one range; a leaf
    whose compile makes rules afresh (multipleOf's automaton) is compiled each time."""
    calls: list[str] = []
    number = walk.SchemaCompiler.number

    def counted(self: Any, s: Any, path: str, integer: bool, excluded: list[Any]) -> ir.Expr:
        calls.append(path)
        return number(self, s, path, integer, excluded)

    monkeypatch.setattr(walk.SchemaCompiler, "number", counted)
    bounded, multiples = (
        {"type": "integer", "minimum": 1, "maximum": 200},
        {"type": "integer", "multipleOf": 7},
    )
    for v, n in ((bounded, 1), (multiples, 4)):
        calls.clear()
        json_schema.schema_to_grammar({"type": "object", "properties": {f"p{i}": v for i in range(4)}})
        assert len(calls) == n, v


def test_a_repeated_type_list_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept expression is what replays: four equal type lists with a bound walk simple once
    after the first (whose bound's rule is new); one whose compile makes rules afresh
    (multipleOf's automaton) is compiled each time."""
    calls: list[str] = []
    simple = walk.SchemaCompiler.simple

    def counted(self: Any, s: Any, path: str, base: str, presence: Any = None) -> ir.Expr:
        calls.append(path)
        return simple(self, s, path, base, presence)

    monkeypatch.setattr(walk.SchemaCompiler, "simple", counted)
    bounded, multiples = (
        {"type": ["string", "null"], "maxLength": 9, "description": "d"},
        {"type": ["integer", "null"], "multipleOf": 7},
    )
    for v, n in ((bounded, 2), (multiples, 4)):
        calls.clear()
        json_schema.schema_to_grammar({"type": "object", "properties": {f"p{i}": v for i in range(4)}})
        assert len(calls) == n, v


def _said(s: Any, path: str, inner: str | None, name: str | None) -> str:
    """What the walk wrote eagerly before Reason: because's text, or the required key's."""
    if name is None:
        return empty.because(s, path, inner)
    return f"{report.pointer(path, 'required')} names {name!r}, and {inner}"


@pytest.mark.parametrize("depth", [1, 3, 5000])
def test_reasons_said_when_read_equal_the_eager_text(depth: int) -> None:
    """A chain of Reasons (each link a schema or a required key, over a str, None or nothing)
    says what the eager texts said, without recursion for a deep chain, and once."""
    links: list[tuple[Any, str, str | None]] = [
        ({}, "/a", None), ({"enum": []}, "/b~1c", None), (None, "/o", "k"), (False, "/f", None),
        ({"minLength": 3, "maxLength": 1, "required": ["x"], "maxProperties": 0}, "", None),
        ({"type": "string"}, "/s", None), (None, "", "a/b"),
    ]  # fmt: skip
    for start in (None, "the innermost"):
        lazy: empty.Reason | str | None = start
        eager = start
        for i in range(depth):
            s, path, name = links[i % len(links)]
            lazy = empty.Reason(s, path, lazy, name)
            eager = _said(s, path, eager, name)
        assert str(lazy) == eager and str(lazy) == eager
        assert lazy == eager


def test_an_empty_schema_deep_down_is_said_from_its_innermost_reason() -> None:
    inner: Any = {"type": "integer", "minimum": 3, "maximum": 1}
    for _ in range(40):
        inner = {"type": "object", "properties": {"k": inner}, "required": ["k"]}
    said = str(Grammar.from_json_schema(inner).ir.meta["empty"])
    assert said.startswith("the JSON Schema allows no value: /required names 'k', and /properties/k/required")
    assert said.endswith("/minimum (3) is above " + "/properties/k" * 40 + "/maximum (1)")
