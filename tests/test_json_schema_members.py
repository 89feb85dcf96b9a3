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
from decimal import Decimal
from typing import Any

import pytest

from cfgmask import ir
from cfgmask.errors import CfgmaskError
from cfgmask.frontends import json_schema
from cfgmask.frontends.json_schema import _ir_util, containers, numbers, walk


def _output(schema: Any, canonical: bool) -> str:
    """The IR (rule names in order, bodies, start, meta) and report of a cold front end run."""
    json_schema.clear_memos()
    try:
        g, report = json_schema.schema_to_grammar(schema, strict=False, canonical=canonical)
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
    monkeypatch.setattr(containers, "_PLAIN_KEY", lambda n: None)
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
        if containers._PLAIN_KEY(n) is not None:
            assert _ir_util.stem_of("prop-" + n) == "prop-" + n, n
            assert json.dumps(n) == '"' + n + '"', n
    assert containers._PLAIN_KEY("x" * 55) is not None and containers._PLAIN_KEY("x" * 56) is None
    assert containers._PLAIN_KEY("b-") is None and containers._PLAIN_KEY("") is None


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
