"""A plain object or array in one step (issue 12, session 40): the same IR and report as the
general path.

``SchemaCompiler._schema`` reads each keyword's bits in ``walk.PLAIN_KW`` and sends an object of
``type`` / ``properties`` / ``required`` / ``additionalProperties`` (annotations and keywords of no
vocabulary aside) to ``Containers.listed_object`` in canonical mode (``Containers.object`` in the
whole language), and an array of ``items`` / ``minItems`` / ``maxItems`` to ``Containers.array``,
without ``normalize`` and ``simple``; ``Containers._ordered_constant`` lays out an object of
optional members only and no free one with ``_optional_walk``, without its stack of bodies.  Each
is checked against the path it short-cuts: ``PLAIN_KW`` emptied (every schema takes ``simple``)
and the walk made by ``ordered``'s search.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.frontends.json_schema import containers, walk

from .test_json_schema_members import _output  # IR and report of a cold run, or the error


def _searched(
    self: containers.Containers,
    order: list[str],
    member: dict[str, ir.Expr],
    required: set[str],
    free: ir.Expr,
    free_everywhere: bool,
    final: Any,
) -> ir.Expr | None:
    """``_ordered_constant`` as ``ordered``'s search makes it (the steps ``_walk`` gives it when
    nothing is remembered or counted)."""
    has_free = free != ir.NOTHING

    def steps(i: int, x: Any) -> list[tuple[ir.Expr | None, int, Any]]:
        out: list[tuple[ir.Expr | None, int, Any]] = []
        if i < len(order):
            out.append((member[order[i]], i + 1, x))
            if order[i] not in required:
                out.append((None, i + 1, x))
        if has_free and (free_everywhere or i == len(order)):
            out.append((free, i, x))
        return out

    return self.ordered("obj", len(order), (frozenset(), 0), steps, final, "}")


def _general(schema: Any, canonical: bool, strict: bool) -> str:
    """:func:`_output` on the general path: no plain container, the ordered walk searched."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(walk, "PLAIN_KW", {})
        mp.setattr(containers.Containers, "_ordered_constant", _searched)
        return _output(schema, canonical, strict)


_S = {"type": "string"}
_I = {"type": "integer", "minimum": 0}
_PLAIN: list[Any] = [
    {"type": "object"},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"a": _S}},
    {"type": "object", "properties": {"a": _S, "b": _I, "c": {"type": "boolean"}}},
    {"type": "object", "properties": {"a": _S, "b": _I}, "required": ["b"]},
    {"type": "object", "properties": {"a": _S, "b": _I}, "required": ["a", "b", "a"]},
    {"type": "object", "properties": {"a": _S}, "required": ["z"]},
    {"type": "object", "required": ["z", "y"]},
    {"type": "object", "properties": {"a": _S, "b": _S}, "additionalProperties": False},
    {"type": "object", "properties": {"a": _S}, "additionalProperties": True},
    {"type": "object", "properties": {"a": _S}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": _S}, "required": ["a", "q"], "additionalProperties": _I},
    {"type": "object", "additionalProperties": False},
    {"type": "object", "additionalProperties": {}},
    {"type": "object", "properties": {"a": False}, "required": ["a"]},
    {"type": "object", "properties": {"a": False, "b": _S}},
    {"type": "object", "properties": {"a": {"type": "string", "enum": []}}, "required": ["a"]},
    {"type": "object", "properties": {"a": True, "b": {}, "c": {"title": "t"}}, "required": ["c"]},
    {"type": "object", "properties": {f"k{i}": _S for i in range(40)}, "required": ["k3", "k39"]},
    {
        "type": "object",
        "properties": {f"k{i}": _S for i in range(40)},
        "required": [f"k{i}" for i in range(40)],
    },
    {
        "type": "object",
        "properties": {f"k{i}": _S for i in range(32)},
        "required": [f"k{i}" for i in range(32)],
    },
    {
        "type": "object",
        "properties": {f"k{i}": _S for i in range(33)},
        "required": [f"k{i}" for i in range(33)],
    },
    {"type": "object", "properties": {"a/b": _S, "c~d": _I, "": _S, "é": _S}, "required": ["a/b"]},
    {"title": "t", "type": "object", "description": "d", "x-y": 1, "properties": {"a": _S}},
    {"self": {"vendor": "v"}, "type": "object", "properties": {"a": _S}, "required": ["a"]},
    {"type": "object", "javaName": "J", "x-z": 0, "self": 1, "properties": {"a": _S}},
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "id": "x",
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": _I}, "required": ["b"]}},
    },
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object"}}}}},
    {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": _S}}}},
    },
    {"type": "array"},
    {"type": "array", "items": _S},
    {"type": "array", "items": True},
    {"type": "array", "items": False},
    {"type": "array", "items": False, "minItems": 1},
    {"type": "array", "items": _S, "minItems": 2, "maxItems": 3},
    {"type": "array", "items": _S, "minItems": 3, "maxItems": 2},
    {"type": "array", "items": _S, "maxItems": 0},
    {"type": "array", "items": {"type": "array", "items": _I}, "self": 1, "title": "t"},
    # beside the plain keywords: each takes the general path, and must give its own language
    {"type": "object", "properties": {"a": _S}, "minProperties": 1},
    {"type": "object", "properties": {"a": _S}, "maxProperties": 1},
    {"type": "object", "properties": {"a": _S}, "patternProperties": {"^x": _I}},
    {"type": "object", "properties": {"a": _S}, "propertyNames": {"maxLength": 3}},
    {"type": "object", "properties": {"a": _S, "b": _S}, "dependentRequired": {"a": ["b"]}},
    {"type": "object", "properties": {"a": _S, "b": _S}, "dependencies": {"a": ["b"]}},
    {"type": "object", "properties": {"a": _S}, "items": _S},
    {"type": "object", "properties": {"a": _S}, "if": {"required": ["a"]}, "then": {}},
    {"type": "object", "properties": {"a": _S}, "then": {}},
    {"type": "object", "properties": {"a": _S}, "$dynamicRef": "#x"},
    {"type": ["object"], "properties": {"a": _S}},
    {"type": ["object", "null"], "properties": {"a": _S}},
    {"type": "array", "items": [_S, _I]},
    {"type": "array", "items": _S, "minItems": 1.0},
    {"type": "array", "items": _S, "maxItems": -1},
    {"type": "array", "items": _S, "minItems": True},
    {"type": "array", "items": _S, "additionalItems": False},
    {"type": "array", "items": _S, "uniqueItems": True},
    {"type": "array", "items": _S, "properties": {"a": _S}},
    {"type": "array", "items": _S, "maxLength": 1},
    {"type": "object", "items": _S, "minItems": 1},  # the array's keywords alone beside "object"
    {"type": "array", "required": ["a"], "additionalProperties": False},  # and the object's
]


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("i", range(len(_PLAIN)))
def test_plain_containers_as_the_general_path(i: int, canonical: bool, strict: bool) -> None:
    schema = _PLAIN[i]
    assert _output(schema, canonical, strict) == _general(schema, canonical, strict)


def test_a_keyword_beside_the_plain_ones_is_not_lost() -> None:
    """A schema that differs from a plain one in one keyword gives another grammar (the plain
    path does not take it and drop the keyword)."""
    outs = [_output(s, True, False) for s in _PLAIN]
    base = _output({"type": "object", "properties": {"a": _S}}, True, False)
    for s, out in zip(_PLAIN, outs, strict=True):
        extra = set(s) - {"type", "properties", "title", "description"}
        if s.get("type") == "object" and s.get("properties") == {"a": _S} and extra:
            assert out != base, s
    arr = _output({"type": "array", "items": _S}, True, False)
    assert _output({"type": "array", "items": _S, "minItems": 1}, True, False) != arr
    assert _output({"type": "array", "items": _S, "maxItems": 1}, True, False) != arr
    assert _output({"type": "array", "items": _S, "uniqueItems": True, "maxItems": 3}, True, False) != arr


def test_the_plain_paths_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equalities above compare the short cuts, not the general path with itself."""
    seen: list[str] = []
    for name in ("listed_object", "_optional_walk", "array"):
        raw = getattr(containers.Containers, name)
        monkeypatch.setattr(
            containers.Containers,
            name,
            lambda self, *a, _n=name, _f=raw, **k: (seen.append(_n), _f(self, *a, **k))[1],
        )

    def no_simple(*a: Any, **k: Any) -> Any:
        raise AssertionError("simple called for a plain container")

    monkeypatch.setattr(walk.SchemaCompiler, "simple", no_simple)
    schema = {
        "type": "object",
        "self": 1,
        "properties": {"a": _S, "b": {"type": "array", "items": _S, "minItems": 1}},
    }
    _output(schema, True, True)
    assert seen == ["listed_object", "array", "_optional_walk"]


_KEYS = st.sampled_from(["a", "b", "c", "d", "e/f", "é"])
_LEAVES = st.sampled_from([_S, _I, True, False, {}, {"type": "boolean", "title": "t"}])


@st.composite
def _objects(draw: Any, depth: int = 2) -> Any:
    keys = draw(st.lists(_KEYS, max_size=5, unique=True))
    values = _LEAVES if depth == 0 else st.one_of(_LEAVES, _objects(depth - 1), _arrays(depth - 1))
    s: dict[str, Any] = {"type": "object"}
    if keys or draw(st.booleans()):
        s["properties"] = {k: draw(values) for k in keys}
    req = draw(st.lists(st.sampled_from(["a", "b", "c", "z"]), max_size=4))
    if req or draw(st.booleans()):
        s["required"] = req
    addl = draw(st.sampled_from(["absent", True, False, {}, _I]))
    if addl != "absent":
        s["additionalProperties"] = addl
    if draw(st.booleans()):
        s["self"] = {"name": "n"}
    if draw(st.booleans()):
        s["description"] = "d"
    return dict(sorted(s.items(), key=lambda kv: draw(st.integers(0, 3))))


@st.composite
def _arrays(draw: Any, depth: int = 1) -> Any:
    items = _LEAVES if depth == 0 else st.one_of(_LEAVES, _objects(depth - 1))
    s: dict[str, Any] = {"type": "array", "items": draw(items)}
    for k in ("minItems", "maxItems"):
        if draw(st.booleans()):
            s[k] = draw(st.integers(0, 3))
    return s


@settings(max_examples=120, deadline=None)
@given(_objects(), st.booleans(), st.booleans())
def test_drawn_plain_objects_as_the_general_path(schema: Any, canonical: bool, strict: bool) -> None:
    assert _output(schema, canonical, strict) == _general(schema, canonical, strict), json.dumps(schema)


@pytest.mark.parametrize("strict", [True, False])
def test_unknown_keywords_rejected_as_the_general_path(monkeypatch: pytest.MonkeyPatch, strict: bool) -> None:
    """With ``UNKNOWN_KEYWORDS = "reject"`` a plain container's keyword of no vocabulary is
    refused as ``simple`` refuses it."""
    monkeypatch.setattr(walk, "UNKNOWN_KEYWORDS", "reject")
    for schema in _PLAIN:
        if "self" in schema or "javaName" in schema or "self" in json.dumps(schema):
            assert _output(schema, True, strict) == _general(schema, True, strict), schema
