"""Malformed JSON Schemas: each is a GrammarError naming the JSON pointer of the offending keyword
and what was expected, in strict and lenient mode, canonical or not (lenient mode is about
keywords that cannot be enforced, not about invalid schemas).  Then the ``$ref``s that do not
resolve (strict refuses, lenient reports), the schemas whose language is empty (the compiler's
error names the keyword), and random values at random keyword positions (only GrammarError or
LimitError, never a crash)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask.compile.limits import CompileLimits
from cfgmask.errors import GrammarError, LimitError, NotEnforceable
from cfgmask.frontends.json_schema.merge import VOCABULARY
from cfgmask.grammar import Grammar

MODES = [(c, s) for c in (True, False) for s in (True, False)]
MODE_IDS = [f"canonical={c}-strict={s}" for c, s in MODES]
TYPES = "a string naming a JSON type"
D7 = "http://json-schema.org/draft-07/schema#"

# (schema, a fragment of the message, the JSON pointer it names)
MALFORMED: list[tuple[Any, str, str]] = [
    # wrong JSON type for a keyword, at the root
    ({"type": 5}, f"must be {TYPES}", "/type"),
    ({"type": None}, "got null", "/type"),
    ({"type": []}, "a non-empty array of them; got []", "/type"),
    ({"enum": 3}, "must be an array; got 3", "/enum"),
    ({"enum": {"a": 1}}, 'got {"a": 1}', "/enum"),
    ({"minLength": -1}, "must be a non-negative integer; got -1", "/minLength"),
    ({"maxItems": 1.5}, "must be a non-negative integer; got 1.5", "/maxItems"),
    ({"minProperties": True}, "must be a non-negative integer; got true", "/minProperties"),
    ({"maximum": "10"}, 'must be a number; got "10"', "/maximum"),
    ({"exclusiveMinimum": "0"}, "a number (a boolean in draft-04)", "/exclusiveMinimum"),
    ({"multipleOf": 0}, "must be a number > 0; got 0", "/multipleOf"),
    ({"multipleOf": -2.5}, "must be a number > 0; got -2.5", "/multipleOf"),
    ({"required": "a"}, 'must be an array of unique strings; got "a"', "/required"),
    ({"required": ["a", "a"]}, "(a repeated element)", "/required/1"),
    ({"uniqueItems": "yes"}, "must be a boolean", "/uniqueItems"),
    ({"format": 7}, "must be a string; got 7", "/format"),
    ({"properties": []}, "must be an object of schemas; got []", "/properties"),
    ({"properties": {"a": 1}}, "must be an object of schemas; got 1", "/properties/a"),
    (
        {"additionalProperties": "no"},
        'must be a schema (object or boolean); got "no"',
        "/additionalProperties",
    ),
    ({"allOf": []}, "must be a non-empty array of schemas; got []", "/allOf"),
    ({"anyOf": {"type": "string"}}, "a non-empty array of schemas", "/anyOf"),
    ({"oneOf": [{}, 3]}, "a non-empty array of schemas; got 3", "/oneOf/1"),
    ({"not": []}, "must be a schema (object or boolean)", "/not"),
    ({"items": 4}, "or (before 2020-12) an array of schemas; got 4", "/items"),
    ({"dependentRequired": {"a": "b"}}, "an object of arrays of unique strings", "/dependentRequired/a"),
    ({"dependencies": {"a": 1}}, "an object of schemas or arrays of unique strings", "/dependencies/a"),
    ({"$ref": 5}, "must be a string (a URI reference); got 5", "/$ref"),
    # nested
    ({"properties": {"a": {"minLength": "3"}}}, "must be a non-negative integer", "/properties/a/minLength"),
    ({"items": {"type": "strin"}}, "did you mean 'string'?", "/items/type"),
    ({"items": [{}, {"type": 1}]}, f"must be {TYPES}", "/items/1/type"),
    ({"$defs": {"x": {"enum": "red"}}}, 'must be an array; got "red"', "/$defs/x/enum"),
    ({"definitions": {"x": {"maximum": []}}}, "must be a number", "/definitions/x/maximum"),
    ({"allOf": [{"minimum": 1}, {"minimum": "2"}]}, "must be a number", "/allOf/1/minimum"),
    ({"anyOf": [{"required": [1]}]}, "an array of unique strings; got 1", "/anyOf/0/required/0"),
    ({"not": {"type": "nul"}}, "did you mean 'null'?", "/not/type"),
    ({"$schema": D7, "if": {"type": "sting"}, "then": {}}, "did you mean 'string'?", "/if/type"),
    (
        {"patternProperties": {"^a": {"maxLength": -3}}},
        "non-negative integer",
        "/patternProperties/^a/maxLength",
    ),
    ({"properties": {"a/b": {"type": 2}}}, f"must be {TYPES}", "/properties/a~1b/type"),
    ({"prefixItems": [{"uniqueItems": 1}]}, "must be a boolean; got 1", "/prefixItems/0/uniqueItems"),
    # unknown type names, with a suggestion
    ({"type": "objec"}, "got \"objec\" (did you mean 'object'?)", "/type"),
    ({"type": "Integer"}, "(did you mean 'integer'?)", "/type"),
    ({"type": ["string", "numbr"]}, "(did you mean 'number'?)", "/type/1"),
    ({"type": ["string", "string"]}, "(a repeated element)", "/type/1"),
    ({"type": "date"}, 'got "date"', "/type"),
    # bad regular expressions
    (
        {"pattern": "[a-"},
        "a regular expression; got \"[a-\" (invalid ECMAScript regular expression: missing ']' at position 0",
        "/pattern",
    ),  # fmt: skip
    (
        {"properties": {"a": {"pattern": "(ab"}}},
        "missing ')' at position 0",
        "/properties/a/pattern",
    ),  # fmt: skip
    ({"pattern": 12}, "must be a regular expression; got 12", "/pattern"),
    (
        {"patternProperties": {"a)": {}}},
        "expressions; got \"a)\" (invalid ECMAScript regular expression: unmatched ')' at position 1",
        "/patternProperties/a)",
    ),  # fmt: skip
    ({"patternProperties": {"*x": True}}, "nothing to repeat at position 0", "/patternProperties/*x"),
    # ECMA-262 syntax, not Python's: \a is no escape with the u flag, (?P<n>) no group
    ({"pattern": "\\a"}, "invalid escape \\a", "/pattern"),
    ({"pattern": "(?P<n>a)"}, "invalid group", "/pattern"),
    ({"pattern": "\\p{Letters}"}, "unknown property 'Letters'", "/pattern"),
]

# $refs that do not resolve: (schema, a fragment of the reason, the $ref's pointer)
BAD_REFS: list[tuple[Any, str, str]] = [
    ({"$ref": "#/$defs/missing"}, "'/$defs/missing' leads nowhere: / has no '$defs'", "/$ref"),
    ({"$defs": {"a": {}}, "properties": {"x": {"$ref": "#/$defs/a/b"}}}, "/$defs/a has no 'b'",
     "/properties/x/$ref"),
    ({"items": {"$ref": "https://example.com/other.json"}}, "points outside this schema", "/items/$ref"),
    ({"$ref": "#nope"}, "no anchor 'nope' in this schema", "/$ref"),
    ({"allOf": [{"$ref": "#/nowhere"}, {"type": "string"}]}, "has no 'nowhere'", "/allOf/0/$ref"),
]  # fmt: skip

# schemas of the empty language: (schema, a fragment of the compiler's error)
EMPTY: list[tuple[Any, str]] = [
    ({"enum": []}, "/enum is an empty array"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "/minLength (5) is above /maxLength (2)"),
    ({"type": "integer", "minimum": 5, "maximum": 1}, "/minimum (5) is above /maximum (1)"),
    ({"type": "array", "minItems": 3, "maxItems": 1}, "/minItems (3) is above /maxItems (1)"),
    ({"type": "string", "enum": [1, 2]}, "no value of /enum satisfies the keywords beside it"),
    (
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        "/required names 'a', whose schema /properties/a is false",
    ),  # fmt: skip
    (
        {"type": "object", "properties": {"a": {"enum": []}}, "required": ["a"]},
        "/required names 'a', and /properties/a/enum is an empty array",
    ),  # fmt: skip
    ({"$defs": {"x": {"const": 1, "type": "null"}}, "$ref": "#/$defs/x"}, "no value of /$defs/x/const"),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"enum": []}, "minItems": 1}},
            "required": ["a"],
        },
        "/properties/a/items/enum is an empty array",
    ),  # fmt: skip
    (False, "the schema at / is false"),
]


def _compile(schema: Any, canonical: bool, strict: bool) -> None:
    g = Grammar.from_json_schema(schema, canonical=canonical, strict=strict)
    cfgmask.compile(g, cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)]))


def test_the_table_is_big_enough() -> None:
    assert len(MALFORMED) + len(BAD_REFS) + len(EMPTY) >= 30


@pytest.mark.parametrize(("canonical", "strict"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize(("schema", "fragment", "where"), MALFORMED, ids=[r[2] for r in MALFORMED])
def test_malformed(schema: Any, fragment: str, where: str, canonical: bool, strict: bool) -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema(schema, canonical=canonical, strict=strict)
    err = info.value
    assert not isinstance(err, NotEnforceable)
    assert err.pointer == where
    assert f" at {where} must be " in err.message and fragment in err.message, err.message


@pytest.mark.parametrize(("canonical", "strict"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize(("schema", "fragment", "where"), BAD_REFS, ids=[r[2] for r in BAD_REFS])
def test_unresolved_ref(schema: Any, fragment: str, where: str, canonical: bool, strict: bool) -> None:
    if strict:
        with pytest.raises(NotEnforceable) as info:
            Grammar.from_json_schema(schema, canonical=canonical, strict=strict)
        assert info.value.pointer == where
        assert where in info.value.message and fragment in info.value.message, info.value.message
        return
    report = Grammar.from_json_schema(schema, canonical=canonical, strict=strict).schema_report
    assert any(e.path == where and fragment in e.reason for e in report.rejected), str(report)


@pytest.mark.parametrize(("canonical", "strict"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize(("schema", "fragment"), EMPTY, ids=[r[1][:40] for r in EMPTY])
def test_empty_language_names_the_keyword(schema: Any, fragment: str, canonical: bool, strict: bool) -> None:
    with pytest.raises(GrammarError, match="language is empty") as info:
        _compile(schema, canonical, strict)
    assert fragment in info.value.message, info.value.message


def test_valid_forms_of_older_drafts_are_accepted() -> None:
    """Forms the walk reads in every draft: array ``items``, ``dependencies``, boolean exclusives."""
    for schema in (
        {"items": [{"type": "string"}], "additionalItems": False},
        {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
        {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        {"if": 5},  # before draft-07 'if' is an annotation, whatever it holds
        {"x-anything": {"type": 5}, "title": 3},  # annotations and unknown keywords are never checked
        {"enum": [{"type": 5}], "const": {"minLength": -1}},  # values, not schemas
    ):
        if "if" in schema:
            schema = {"$schema": "http://json-schema.org/draft-06/schema#", **schema}
        Grammar.from_json_schema(schema, strict=False)


# --------------------------------------------------------------------------- random values

BASE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "minLength": 1, "pattern": "^a"},
        "b": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3},
    },
    "required": ["a"],
    "$defs": {"n": {"type": "integer", "minimum": 0}},
    "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
}
PLACES = [
    (),
    ("properties", "a"),
    ("properties", "b"),
    ("properties", "b", "items"),
    ("$defs", "n"),
    ("anyOf", 1),
]
KEYWORDS = sorted(VOCABULARY | {"$defs", "definitions", "title", "x-extra"})
SCALARS = (
    st.none() | st.booleans() | st.integers(-5, 10**20) | st.floats(allow_nan=False) | st.text(max_size=6)
)
JSON = st.recursive(
    SCALARS,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from([*KEYWORDS, "a"]), kids, max_size=3)
    ),
    max_leaves=8,
)


@given(
    st.lists(st.tuples(st.sampled_from(PLACES), st.sampled_from(KEYWORDS), JSON), min_size=1, max_size=2),
    st.booleans(),
    st.booleans(),
)
def test_random_values_at_keyword_positions(
    edits: list[tuple[Any, str, Any]], canonical: bool, strict: bool
) -> None:
    schema = copy.deepcopy(BASE)
    for place, keyword, value in edits:
        node: Any = schema
        for token in place:
            if isinstance(node, dict):
                node = node.get(token)
            else:
                node = node[token] if isinstance(node, list) and token < len(node) else None
        if isinstance(node, dict):
            node[keyword] = value
    try:
        Grammar.from_json_schema(
            schema, canonical=canonical, strict=strict, limits=CompileLimits(deadline_ms=5_000)
        )
    except (GrammarError, LimitError):
        pass


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "string", "pattern": "^(a)\\1$"}, "/pattern"),
        (
            {"type": "object", "patternProperties": {"(?<x>a)\\k<x>": {}}, "additionalProperties": False},
            "/patternProperties",
        ),
    ],
)
def test_valid_regex_beyond_automata_is_not_enforced(schema: Any, where: str) -> None:
    """A valid ECMA-262 pattern that is not regular (a backreference): a valid schema,
    refused in strict mode only."""
    with pytest.raises(NotEnforceable, match=where):
        Grammar.from_json_schema(schema)
    report = Grammar.from_json_schema(schema, strict=False).schema_report
    assert [e.path for e in report.rejected] == [where]


def test_not_required_beside_pattern_properties_is_reported_not_leaked() -> None:
    """An internal Unmergeable escaped here (three JSONSchemaBench schemas, lenient mode)."""
    schema = {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "not": {"required": ["a"]}}
    with pytest.raises(NotEnforceable, match="/not"):
        Grammar.from_json_schema(schema)
    report = Grammar.from_json_schema(schema, strict=False).schema_report
    assert [e.path for e in report.rejected] == ["/not"]


@pytest.mark.parametrize(
    "schema, where",
    [
        ({1: "x"}, "key 1 at /"),
        ({"properties": {2: {}}}, "key 2 at /properties"),
        ({"properties": {"a/b": {"enum": [object()]}}}, "value at /properties/a~1b/enum/0"),
        ({"items": {"const": {1.5}}}, "value at /items/const"),
    ],
)
def test_python_values_that_are_not_json_data(schema: Any, where: str) -> None:
    """A schema given as a Python dict is checked to be JSON data first: a key that is not a
    string, or a value JSON has no form for, is a GrammarError naming where (not a crash of
    whichever pass met it first)."""
    with pytest.raises(GrammarError, match="invalid JSON Schema") as info:
        Grammar.from_json_schema(schema)
    assert where in str(info.value)
