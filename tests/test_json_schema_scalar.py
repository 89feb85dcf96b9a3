"""``SchemaCompiler.scalar``: a subschema whose one keyword is ``"type"`` naming a scalar type
(annotations aside) skips :meth:`SchemaCompiler.simple`'s generic checks.  Checked against the
generic walk (the shortcut turned off): the same rules, bodies, start and report, in every mode
and draft, with annotations and unknown keywords before and after ``type``, at the root and as
property values and items; and the documents the grammar accepts against ``jsonschema``."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask.frontends.json_schema import schema_to_grammar, walk

from .reference import ReferenceMatcher

SCALARS = sorted(walk.SCALAR_TYPES)
# annotations (description, x-...), keys the walk reports as unknown, and keywords beside the
# type that must leave the shortcut (minLength, enum, format, minimum, not)
EXTRA = st.sampled_from(
    [
        ("description", "d"), ("title", "t"), ("x-order", 1), ("$comment", "c"), ("nullable", True),
        ("default", 3), ("examples", ["a"]), ("unknownKeyword", 2), ("minLength", 1), ("enum", ["a", 1]),
        ("format", "date"), ("minimum", 0), ("not", {"type": "null"}), ("then", {}), ("const", None),
    ]
)  # fmt: skip
DRAFTS = ["", "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"]


def subschema(draw: Any) -> dict[str, Any]:
    before = draw(st.lists(EXTRA, max_size=3))
    after = draw(st.lists(EXTRA, max_size=2))
    return {**dict(before), "type": draw(st.sampled_from(SCALARS)), **dict(after)}


@st.composite
def schemas(draw: Any) -> dict[str, Any]:
    where = draw(st.sampled_from(["root", "property", "items"]))
    leaf = subschema(draw)
    if where == "root":
        out = leaf
    elif where == "property":
        out = {"type": "object", "properties": {"a": leaf, "b": subschema(draw)}, "required": ["a"]}
    else:
        out = {"type": "array", "items": leaf}
    meta = draw(st.sampled_from(DRAFTS))
    return {"$schema": meta, **out} if meta else out


def compile_both(schema: dict[str, Any], canonical: bool, strict: bool) -> tuple[str, str]:
    """The dump of the grammar and report with the shortcut and without it (or the error)."""

    def dump() -> str:
        try:
            g, rep = schema_to_grammar(schema, strict=strict, canonical=canonical)
        except Exception as e:  # noqa: BLE001 - the same error either way is the check
            return f"{type(e).__name__}: {e}"
        rules = [f"{k} = {v!r}" for k, v in g.rules.items()]
        return "\n".join([*rules, g.start, repr(g.meta), *map(repr, rep)])

    fast = dump()
    with mock.patch.object(walk, "SCALAR_TYPES", frozenset()):
        generic = dump()
    return fast, generic


@settings(max_examples=150, deadline=None)
@given(schema=schemas(), canonical=st.booleans(), strict=st.booleans())
def test_scalar_shortcut_is_the_generic_walk(schema: dict[str, Any], canonical: bool, strict: bool) -> None:
    fast, generic = compile_both(schema, canonical, strict)
    assert fast == generic


def test_every_scalar_type_takes_the_shortcut() -> None:
    for t in SCALARS:
        for canonical in (True, False):
            schema = {"description": "x", "type": t, "x-kind": 1}
            with mock.patch.object(walk.SchemaCompiler, "simple", side_effect=AssertionError("generic")):
                schema_to_grammar(schema, canonical=canonical)  # never reaches simple()
            fast, generic = compile_both(schema, canonical, True)
            assert fast == generic


DOCS = ["null", "true", "false", "0", "-1", "1.5", "1e3", "12", '""', '"a"', '"\\u00e9"', "[]", "{}"]


@settings(max_examples=40, deadline=None)
@given(t=st.sampled_from(SCALARS), canonical=st.booleans())
def test_scalar_documents_against_jsonschema(t: str, canonical: bool) -> None:
    schema = {"type": t, "description": "d"}
    g, _ = schema_to_grammar(schema, canonical=canonical)
    m = ReferenceMatcher(g)
    valid = jsonschema.Draft202012Validator(schema)
    accepted = [doc for doc in DOCS if m.accepts(doc.encode())]
    assert accepted  # each scalar type has a document here
    for doc in accepted:  # everything generated is valid
        assert valid.is_valid(json.loads(doc)), (t, doc)
    for doc in DOCS:  # and the plain spellings of a valid value are generated
        if valid.is_valid(json.loads(doc)) and doc in ("null", "true", "false", "0", "-1", "12", '""', '"a"'):
            assert doc in accepted, (t, doc)
