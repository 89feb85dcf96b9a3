"""A property's scalar value in one step (issue 12, session 41): the same IR and report as the
general path.

``Containers._listed`` takes a property value ``{"type": T}`` (T a scalar type, annotations and
``x-`` keys beside it) whose member value the schema has built once -- ``SchemaCompiler.scalar``'s
expression for T, through ``shared`` -- without ``member_value``: the annotations' rows, then the
type's, as ``member_value`` adds them.  ``containers.ONE_STEP`` off sends every value to
``member_value``; each schema is compared in both modes, strict and lenient, with it on and off.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask.frontends.json_schema import containers, walk

from .test_json_schema_members import _VALUES as _MEMBER_VALUES
from .test_json_schema_members import _output  # IR and report of a cold run, or the error


def _both(schema: Any, canonical: bool, strict: bool) -> tuple[str, str]:
    """:func:`_output` with the one step on, then off."""
    on = _output(schema, canonical, strict)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(containers, "ONE_STEP", False)
        off = _output(schema, canonical, strict)
    return on, off


_S = {"type": "string"}
# test_json_schema_members' values (scalar leaves with annotations, and what is not one), and
# an annotation alone, a type name of no type, an object with no keyword beside its type
_VALUES: list[Any] = [*_MEMBER_VALUES, {"title": "t"}, {"type": "String"}, {"type": "object"}]
_KEYS = ["a", "b", "c", "a/b", "c~d", "é", "x" * 60, "", "a b", "z"]


def _object(values: list[Any], required: list[str], **more: Any) -> dict[str, Any]:
    props = {k: values[i % len(values)] for i, k in enumerate(_KEYS)}
    out = {"$defs": {"s": _S}, "type": "object", "properties": props, "required": required}
    return {**out, **more}


_FIXED: list[Any] = [
    _object(_VALUES, []),
    _object(_VALUES[3:] + _VALUES[:3], ["a", "c~d"]),
    _object(_VALUES[10:] + _VALUES[:10], ["b"]),
    _object(_VALUES[16:] + _VALUES[:16], []),
    _object([_S, _S, {"type": "string", "title": "t"}], ["z"]),
    _object([{"type": "integer"}, {"type": "integer", "description": "n"}], [], additionalProperties=_S),
    _object([_S], [], minProperties=2),  # the general object path (_members)
    _object([_S, {"type": "null"}], ["a"], patternProperties={"^x": _S}),
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {
        "a": _S, "b": _S, "c": {"type": "object", "properties": {"d": _S, "e": _S}}}},
    {"type": "array", "items": {"type": "object", "properties": {"a": _S, "b": _S}, "required": ["b"]}},
    {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}, "b": _S, "c": _S}},
]  # fmt: skip


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("i", range(len(_FIXED)))
def test_scalar_members_in_one_step_equal_member_value(i: int, canonical: bool, strict: bool) -> None:
    on, off = _both(_FIXED[i], canonical, strict)
    assert on == off


def test_the_one_step_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equalities above compare the one step, not member_value with itself: an object of
    five string members calls member_value once with it on, five times off."""
    calls: list[str] = []
    raw = walk.SchemaCompiler.member_value
    monkeypatch.setattr(
        walk.SchemaCompiler,
        "member_value",
        lambda self, s, path, base: (calls.append(path), raw(self, s, path, base))[1],
    )
    schema = {"type": "object", "properties": {k: {"type": "string", "title": k} for k in "abcde"}}
    _output(schema, True, True)
    assert calls == ["/properties/a"]
    calls.clear()
    monkeypatch.setattr(containers, "ONE_STEP", False)
    _output(schema, True, True)
    assert len(calls) == 5


def test_too_deep_a_member_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the nesting limit member_value sends a scalar to schema, which refuses it: the one
    step does the same."""
    monkeypatch.setattr(walk, "MAX_DEPTH", 3)
    deep: Any = {"type": "object", "properties": {"a": _S, "b": _S}}
    for _ in range(2):
        deep = {"type": "object", "properties": {"a": _S, "n": deep}}
    for strict in (True, False):
        on, off = _both(deep, True, strict)
        assert on == off and "deeper than 3" in on


_LEAVES = st.sampled_from(_VALUES)
_NAMES = st.sampled_from(["a", "b", "c", "a/b", "é", "x-y"])


@st.composite
def _objects(draw: Any, depth: int = 2) -> Any:
    keys = draw(st.lists(_NAMES, max_size=6, unique=True))
    values = _LEAVES if depth == 0 else st.one_of(_LEAVES, _LEAVES, _objects(depth - 1))
    s: dict[str, Any] = {"$defs": {"s": _S}, "type": "object", "properties": {k: draw(values) for k in keys}}
    if draw(st.booleans()):
        s["required"] = draw(st.lists(_NAMES, max_size=3))
    more = draw(st.sampled_from([None, ("additionalProperties", False), ("additionalProperties", _S),
                                 ("minProperties", 1), ("patternProperties", {"^q": _S})]))  # fmt: skip
    if more is not None:
        s[more[0]] = more[1]
    return s


@settings(max_examples=150, deadline=None)
@given(_objects(), st.booleans(), st.booleans())
def test_drawn_objects_in_one_step_equal_member_value(schema: Any, canonical: bool, strict: bool) -> None:
    on, off = _both(schema, canonical, strict)
    assert on == off, json.dumps(schema)
