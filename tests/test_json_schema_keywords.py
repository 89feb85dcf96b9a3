"""JSON Schema keywords of issue 13 (item 2) and ``$ref`` beyond the document (item 3), table by
table against the ``jsonschema`` package (formats asserted): each instance goes through the C
matcher byte by byte, compact, with ``json.dumps`` defaults and with ``ensure_ascii=False``; the
full language (``canonical=False``) must accept exactly the valid ones, and the canonical
language only valid ones.  What cannot be enforced is refused in strict mode with the keyword's
JSON pointer, and reported as rejected in lenient mode.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import pytest

import cfgmask
from cfgmask.errors import GrammarError, NotEnforceable
from cfgmask.frontends.json_schema import schema_to_grammar

from .engine import EngineRecognizer


@functools.lru_cache(maxsize=64)
def _compiled(text: str, resources: str, canonical: bool) -> EngineRecognizer:
    g, report = schema_to_grammar(json.loads(text), canonical=canonical, resources=json.loads(resources))
    assert report.exact or canonical
    return EngineRecognizer(g)


def _validator(schema: Any, resources: dict[str, Any]) -> Any:
    import referencing
    from referencing.jsonschema import DRAFT202012

    registry = referencing.Registry().with_resources(
        (
            uri,
            referencing.Resource.from_contents(doc, default_specification=DRAFT202012),
        )
        for uri, doc in resources.items()
    )
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


def agree(schema: Any, instances: list[Any], resources: dict[str, Any] | None = None) -> None:
    """Full language: accepts each spelling iff valid; canonical: accepts only valid ones."""
    res = resources or {}
    validator = _validator(schema, res)
    full = _compiled(json.dumps(schema, sort_keys=True), json.dumps(res, sort_keys=True), False)
    canon = _compiled(json.dumps(schema, sort_keys=True), json.dumps(res, sort_keys=True), True)
    for data in instances:
        valid = validator.is_valid(data)
        for text in {
            json.dumps(data),
            json.dumps(data, separators=(",", ":")),
            json.dumps(data, ensure_ascii=False, indent=1),
        }:
            assert full.accepts(text.encode()) == valid, (schema, text, valid)
            assert not canon.accepts(text.encode()) or valid, ("canonical", schema, text)


def refused(schema: Any, pointer: str, keyword: str, **kw: Any) -> None:
    """Strict mode names the keyword and its pointer; lenient mode reports it rejected."""
    with pytest.raises(NotEnforceable) as e:
        schema_to_grammar(schema, canonical=False, **kw)
    assert e.value.pointer == pointer, str(e.value)
    _, report = schema_to_grammar(schema, canonical=False, strict=False, **kw)
    assert any(x.status == "rejected" and x.keyword == keyword and x.path == pointer for x in report), [
        (x.path, x.keyword, x.status) for x in report
    ]


# --------------------------------------------------------------------------- $ref beyond the document

ADDRESS = {
    "$id": "https://example.com/address.json",
    "type": "object",
    "properties": {"city": {"$ref": "#/$defs/name"}, "zip": {"$ref": "zip.json"}},
    "required": ["city"],
    "$defs": {"name": {"type": "string", "minLength": 2}},
}
ZIP = {"type": "string", "pattern": "^[0-9]{5}$"}
RESOURCES = {"https://example.com/address.json": ADDRESS, "https://example.com/zip.json": ZIP}


def test_resources_by_uri_relative_refs_inside_them() -> None:
    schema = {"type": "object", "properties": {"home": {"$ref": "https://example.com/address.json"}}}
    zip_code = {"allOf": [{"$ref": "https://example.com/address.json#/properties/zip"}]}  # inlined
    agree(zip_code, ["01234", "0123", "x01234", 1234], RESOURCES)
    instances: list[Any] = [
        {"home": {"city": "Oslo", "zip": "01234"}},
        {"home": {"city": "Oslo", "zip": "1234"}},
        {"home": {"city": "O"}},
        {"home": {"zip": "01234"}},
        {"home": "Oslo"},
        {},
        [],
    ]
    agree(schema, instances, RESOURCES)


def test_unknown_remote_is_refused_with_its_pointer() -> None:
    schema = {"properties": {"a": {"$ref": "https://example.com/nowhere.json"}}}
    with pytest.raises(NotEnforceable, match="resources=") as e:
        schema_to_grammar(schema, resources=RESOURCES)
    assert e.value.pointer == "/properties/a/$ref"
    _, report = schema_to_grammar(schema, strict=False)
    assert any(x.status == "rejected" and x.path == "/properties/a/$ref" for x in report)


def test_resource_of_another_draft_and_malformed_resources() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    with pytest.raises(GrammarError, match="another draft"):
        schema_to_grammar(
            {"$ref": "https://example.com/old.json"}, resources={"https://example.com/old.json": draft4}
        )
    with pytest.raises(GrammarError, match="resources"):
        schema_to_grammar({"$ref": "https://example.com/x.json"}, resources={"https://example.com/x.json": 5})
    with pytest.raises(GrammarError, match="type"):  # a resource is checked as the schema is
        schema_to_grammar(
            {"$ref": "https://example.com/x.json"}, resources={"https://example.com/x.json": {"type": 5}}
        )


def test_meta_schemas_resolve_by_uri_without_resources() -> None:
    deprecated = {"$ref": "https://json-schema.org/draft/2020-12/meta/meta-data#/properties/deprecated"}
    agree(deprecated, [True, False, None, "true"])
    # the draft-07 meta-schema's non-negative integer and its type names
    d7 = "http://json-schema.org/draft-07/schema#"
    agree({"$schema": d7, "$ref": d7 + "/definitions/nonNegativeInteger"}, [0, 3, -1, 1.5, "1"])
    agree(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$ref": "http://json-schema.org/draft-07/schema#/definitions/simpleTypes",
        },
        ["array", "integer", "int", 1],
    )


def test_grammar_from_json_schema_takes_resources() -> None:
    g = cfgmask.Grammar.from_json_schema(
        {"$ref": "https://example.com/zip.json"}, canonical=False, resources=RESOURCES
    )
    rec = EngineRecognizer(g)
    assert rec.accepts(b'"01234"') and not rec.accepts(b'"0123"')


# --------------------------------------------------------------------------- $dynamicRef

LIST = {
    "$id": "https://example.com/list",
    "type": "array",
    "items": {"$dynamicRef": "#item"},
    "$defs": {"item": {"$dynamicAnchor": "item"}},  # the bookend: any item by default
}
DYNAMIC = [
    # the outermost resource of the dynamic scope defines the item
    {
        "$id": "https://example.com/ints",
        "$ref": "list",
        "$defs": {"item": {"$dynamicAnchor": "item", "type": "integer"}},
    },
    # the list alone: its own bookend
    {"$ref": "https://example.com/list"},
    # two paths to the same list, each in its own scope (rules memoized per scope)
    {
        "$id": "https://example.com/two",
        "type": "object",
        "properties": {"s": {"$ref": "strs"}, "n": {"$ref": "nums"}},
        "$defs": {
            "strs": {
                "$id": "strs",
                "$ref": "list",
                "$defs": {"i": {"$dynamicAnchor": "item", "type": "string"}},
            },
            "nums": {
                "$id": "nums",
                "$ref": "list",
                "$defs": {"i": {"$dynamicAnchor": "item", "type": "number"}},
            },
        },
    },
    # inlined through allOf into another resource, then a $ref further in: the scope travels
    {
        "$id": "https://example.com/root",
        "allOf": [{"$ref": "A"}],
        "$defs": {
            "A": {
                "$id": "A",
                "$defs": {"x": {"$dynamicAnchor": "X", "type": "integer"}},
                "properties": {"p": {"$ref": "B"}},
            },
            "B": {"$id": "B", "$dynamicRef": "#X", "$defs": {"x": {"$dynamicAnchor": "X"}}},
        },
    },
    # a $dynamicRef without a matching $dynamicAnchor is a plain $ref
    {"$id": "https://example.com/plain", "$dynamicRef": "#/$defs/n", "$defs": {"n": {"type": "null"}}},
    # recursion through the dynamic anchor: a tree of integers
    {
        "$id": "https://example.com/tree",
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$dynamicRef": "#node"}},
        },
    },
]
DYNAMIC_DATA: list[Any] = [
    [], [1, 2], [1, "a"], ["a"], [None, 1.5], {"s": ["a"], "n": [1, 2.5]}, {"s": [1]}, {"n": ["a"]},
    {"p": 1}, {"p": "x"}, None, 0, {"v": 1, "kids": [{"v": 2, "kids": []}]}, {"v": 1, "kids": [{"v": "2"}]},
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(DYNAMIC)))
def test_dynamic_ref(i: int) -> None:
    agree(DYNAMIC[i], DYNAMIC_DATA, {"https://example.com/list": LIST})
