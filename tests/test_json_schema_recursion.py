"""Recursive schemas whose ``$ref`` a keyword inlines (``allOf``, ``anyOf``/``oneOf`` beside other
keywords, ``if``/``then``, ``dependencies``): the inlined copy of the target meets the same
subschema one level down, and the walk must make that a rule of the grammar
(``SchemaCompiler.walked``) rather than inline it again until ``MAX_DEPTH``.

Each shape is checked against the ``jsonschema`` package on hand-written instances, nested a few
levels (the full language accepts exactly the valid ones, in every spelling; the canonical one
only valid ones), with ``MAX_DEPTH`` lowered so that a walk that unrolls the recursion fails
here instead of taking seconds.  The JSONSchemaBench records that used to spend 5-25 s before
"schema nesting deeper than 2000" compile with the same low limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cfgmask.errors import GrammarError, NotEnforceable
from cfgmask.frontends.json_schema import schema_to_grammar
from cfgmask.frontends.json_schema import walk as walk_module

from .engine import EngineRecognizer
from .helpers import json_spellings
from .test_json_schema_keywords import _validator, agree

PICKED = Path(__file__).parent / "corpora" / "jsonschemabench" / "picked" / "records.jsonl"
SHALLOW = 64  # far deeper than any schema below is written; far shallower than an unrolled walk


@pytest.fixture(autouse=True)
def shallow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk_module, "MAX_DEPTH", SHALLOW)


# allOf: a node's children are nodes that must have an id
ALL_OF = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "kids": {
                    "type": "array",
                    "items": {"allOf": [{"$ref": "#/$defs/node"}, {"required": ["id"]}]},
                },
            },
        }
    },
    "$ref": "#/$defs/node",
}
ALL_OF_DATA = [
    {},
    {"kids": []},
    {"kids": [{"id": 1}]},
    {"kids": [{}]},
    {"kids": [{"id": 1, "kids": [{"id": 2, "kids": []}]}]},
    {"kids": [{"id": 1, "kids": [{"id": 2, "kids": [{"kids": []}]}]}]},
    {"kids": [{"id": "1"}]},
    {"id": 1.5},
    {"kids": [{"id": 1, "kids": [{"id": 2, "kids": [{"id": 3, "kids": [{"id": 4, "x": None}]}]}]}]},
]

# anyOf beside a keyword: each branch is intersected with minProperties, so the $ref is inlined
ANY_OF_BESIDE = {
    "type": "object",
    "properties": {
        "v": {"type": "string"},
        "more": {
            "type": "array",
            "items": {"minProperties": 1, "anyOf": [{"required": ["v"]}, {"$ref": "#"}]},
        },
    },
    "additionalProperties": False,
}
ANY_OF_DATA = [
    {},
    {"more": [{}]},
    {"more": [{"v": "a"}]},
    {"more": [{"more": []}]},
    {"more": [{"more": [{}]}]},
    {"more": [{"more": [{"more": [{"v": "b", "more": [{"v": 1}]}]}]}]},
    {"more": [{"w": 1}]},
    {"more": [{"more": [{"more": [{"v": "b", "more": [{"v": "c"}]}]}]}]},
]

# if/then: a list node's items are nodes that are inlined beside 'required'
IF_THEN = {
    "type": "object",
    "properties": {"kind": {"enum": ["leaf", "list"]}},
    "required": ["kind"],
    "if": {"properties": {"kind": {"const": "list"}}},
    "then": {
        "properties": {
            "items": {"type": "array", "items": {"allOf": [{"$ref": "#"}, {"required": ["name"]}]}}
        },
        "required": ["items"],
    },
}
IF_THEN_DATA = [
    {"kind": "leaf"},
    {"kind": "list"},
    {"kind": "list", "items": []},
    {"kind": "list", "items": [{"kind": "leaf"}]},
    {"kind": "list", "items": [{"kind": "leaf", "name": 1}]},
    {
        "kind": "list",
        "items": [{"kind": "list", "name": "x", "items": [{"kind": "list", "name": "y", "items": []}]}],
    },
    {"kind": "list", "items": [{"kind": "list", "name": "x", "items": [{"kind": "list", "name": "y"}]}]},
]

# dependencies with a schema beside a property that is the root (Github_medium/o39217's shape)
DEPENDENCIES = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"sub": {"$ref": "#"}, "n": {"type": "integer"}},
    "dependencies": {"sub": {"properties": {"sub": {"required": ["n"]}}}},
}
DEPENDENCIES_DATA = [
    {},
    {"sub": {}},
    {"sub": {"n": 1}},
    {"sub": {"n": 1, "sub": {}}},
    {"sub": {"n": 1, "sub": {"n": 2}}},
    {"sub": {"n": 1, "sub": {"n": 2, "sub": {"n": 3, "sub": {}}}}},
    {"sub": {"n": 1, "sub": {"n": 2, "sub": 4}}},
    {"sub": {"n": 1, "sub": {"n": 2, "sub": {"n": 3, "sub": {"n": 4}}}}},
]

# 2020-12 $ref beside unevaluatedProperties: the target is merged with its siblings
UNEVALUATED = {
    "$defs": {
        "node": {
            "properties": {
                "name": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/closed"}},
            }
        },
        "closed": {"$ref": "#/$defs/node", "type": "object", "unevaluatedProperties": False},
    },
    "$ref": "#/$defs/closed",
}
UNEVALUATED_DATA = [
    {},
    {"name": "a"},
    {"x": 1},
    {"kids": [{"name": "b"}]},
    {"kids": [{"name": "b", "y": 2}]},
    {"kids": [{"kids": [{"kids": [{"name": "c"}]}]}]},
    {"kids": [{"kids": [{"kids": [{"z": None}]}]}]},
]

SHAPES = {
    "allOf": (ALL_OF, ALL_OF_DATA),
    "anyOf beside minProperties": (ANY_OF_BESIDE, ANY_OF_DATA),
    "if/then": (IF_THEN, IF_THEN_DATA),
    "dependencies": (DEPENDENCIES, DEPENDENCIES_DATA),
    "unevaluatedProperties": (UNEVALUATED, UNEVALUATED_DATA),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_recursion_through_an_inlining_keyword_is_exact(shape: str) -> None:
    schema, data = SHAPES[shape]
    validator = _validator(schema, {})
    verdicts = [validator.is_valid(x) for x in data]
    assert True in verdicts and False in verdicts  # each table says both
    _, report = schema_to_grammar(schema, canonical=False)  # strict: nothing refused
    assert report.exact, [(x.path, x.keyword, x.status) for x in report if x.status != "enforced"]
    agree(schema, data)


def test_a_schema_met_again_is_one_rule() -> None:
    """The subschema reached again is the rule of its first walk: the grammar holds one such rule,
    and stays small (an unrolled walk would hold a copy per level)."""
    g, _ = schema_to_grammar(ALL_OF, canonical=False)
    walks = [n for n in g.rules if n.startswith("walk")]
    assert len(walks) == 1, sorted(g.rules)
    # the node, and the node with an id (the inlined copy): an unrolled walk makes one a level
    assert len([n for n in g.rules if n.startswith("prop-kids")]) == 2, sorted(g.rules)


@pytest.mark.parametrize(
    "schema",
    [
        {"anyOf": [{"$ref": "#"}]},  # the root, met again through its own $ref
        {
            "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a",
        },  # fmt: skip
    ],
)
def test_a_schema_that_is_itself_without_consuming_input(schema: dict[str, Any]) -> None:
    """A schema whose walk reaches itself before any input has no language: a clear error in
    either mode, not an empty (or a looping) rule."""
    for strict in (True, False):
        with pytest.raises(GrammarError, match="refers to itself without consuming input"):
            schema_to_grammar(schema, canonical=False, strict=strict)


def _record(rid: str) -> dict[str, Any]:
    (rec,) = [r for r in map(json.loads, PICKED.read_text().splitlines()) if r["id"] == rid]
    return rec


# JSONSchemaBench records that unrolled their recursion until "schema nesting deeper than 2000" (or
# the end of the stack), and what strict mode refuses in them (None: exact)
RECORDS = {
    "Github_medium/o3626": "/allOf/1",
    "Github_medium/o39217": "/dependentSchemas/_uniqueItems",
    "Github_medium/o81108": "/definitions/sequence/properties/items/oneOf",
    "Github_medium/o17127": None,
    "Github_medium/o13135": None,
    "Github_medium/o13136": None,
    "Github_easy/o17683": None,
}


@pytest.mark.parametrize("rid", RECORDS)
def test_recursive_jsonschemabench_records(rid: str) -> None:
    """Strict mode refuses at once with the keyword's pointer, or compiles exactly; lenient mode
    compiles (within ``SHALLOW`` levels) to a grammar that accepts every valid instance, and
    rejects the invalid ones unless a keyword was reported rejected (lenient relaxes it)."""
    rec = _record(rid)
    refused_at = RECORDS[rid]
    if refused_at is None:
        _, report = schema_to_grammar(rec["schema"], canonical=False)
        assert report.exact
    else:
        with pytest.raises(NotEnforceable) as e:
            schema_to_grammar(rec["schema"], canonical=False)
        assert e.value.pointer == refused_at, str(e.value)
    g, report = schema_to_grammar(rec["schema"], canonical=False, strict=False)
    relaxed = any(x.status == "rejected" for x in report)
    assert relaxed == (refused_at is not None)
    m = EngineRecognizer(g)
    validator = _validator(rec["schema"], {})
    for test in rec["tests"]:
        # the corpus's verdict; jsonschema differs only where it does not check a format
        valid = test["valid"] and validator.is_valid(test["data"])
        for text in json_spellings(test["data"]):
            got = m.accepts(text.encode())
            assert got == valid or (relaxed and got), (rid, valid, text[:200])
