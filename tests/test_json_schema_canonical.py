"""Canonical JSON Schema output (the default) against the schema's whole language.

``canonical=True`` generates one canonical form per instance: properties in the order
``properties`` lists them (optional ones skipped, never moved), no key the schema does not
list unless it says so, no key twice, literal keys and strings, bounded number digits.  It is
a sound subset: whatever it accepts, ``canonical=False`` accepts and ``jsonschema`` calls
valid; and it keeps the canonical serialization of every valid instance.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask.errors import GrammarError
from cfgmask.frontends.json_schema import schema_to_grammar

from .engine import EngineRecognizer
from .helpers import check

COT = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "answer": {"type": "integer"}},
    "required": ["reasoning", "answer"],
}


def canon(schema: Any, **kw: Any) -> EngineRecognizer:
    return EngineRecognizer(cfgmask.Grammar.from_json_schema(schema, **kw))


def test_chain_of_thought_keeps_reasoning_first() -> None:
    check(
        schema_to_grammar(COT)[0],
        accepts=['{"reasoning":"because","answer":42}', '{"reasoning": "b", "answer": 1}'],
        rejects=['{"answer":42,"reasoning":"because"}', '{"answer":42}'],
    )
    check(
        schema_to_grammar(COT, canonical=False)[0],
        accepts=['{"answer":42,"reasoning":"because"}', '{"reasoning":"because","answer":42}'],
        rejects=['{"answer":42}'],
    )


def test_canonical_is_reported_as_narrowed_once_per_object() -> None:
    _, report = schema_to_grammar(COT)
    narrowed = report.narrowed
    assert [(e.path, e.keyword) for e in narrowed] == [("/properties", "properties")]
    assert "order" in narrowed[0].reason and "not generated" in narrowed[0].reason
    assert report.sound and not report.exact
    _, full = schema_to_grammar(COT, canonical=False)
    assert full.exact


def test_optional_keys_may_be_skipped_never_moved() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "required": ["b"],
    }
    check(
        schema_to_grammar(schema)[0],
        accepts=['{"b":1}', '{"a":1,"b":2}', '{"b":2,"c":3}', '{"a":1,"b":2,"c":3}'],
        rejects=['{"b":1,"a":1}', '{"c":1,"b":1}', "{}", '{"a":1}', '{"a":1,"b":1,"a":2}', '{"b":1,"b":1}'],
    )


def test_unlisted_keys_and_items_only_where_the_schema_says_so() -> None:
    listed = {"type": "object", "properties": {"a": {"type": "integer"}}}
    check(schema_to_grammar(listed)[0], accepts=["{}", '{"a":1}'], rejects=['{"z":1}', '{"a":1,"z":1}'])
    check(schema_to_grammar(listed, canonical=False)[0], accepts=['{"z":1}', '{"a":1,"z":1,"z":2}'])
    explicit = dict(listed, additionalProperties={"type": "boolean"})
    check(
        schema_to_grammar(explicit)[0],
        accepts=['{"a":1,"z":true}', '{"z":true}', '{"a":1,"x":true,"y":false}'],
        rejects=['{"z":true,"a":1}', '{"z":1}', '{"a":1,"a":2}'],
    )
    # no `properties`: nothing is listed, so nothing is closed
    check(schema_to_grammar({"type": "object"})[0], accepts=['{"z":[1,{"y":null}]}', "{}"])
    # closing would leave no valid document: the object stays open
    check(
        schema_to_grammar({"type": "object", "properties": {"a": {}}, "required": ["a"], "minProperties": 2})[
            0
        ],
        accepts=['{"a":1,"b":2}', '{"a":1,"b":2,"c":3}'],
        rejects=['{"a":1}', '{"b":2,"a":1}', '{"b":2,"c":3}'],
    )
    tuple_ = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}
    check(schema_to_grammar(tuple_)[0], accepts=["[]", "[1]", '[1,"x"]'], rejects=['[1,"x",2]', '["x"]'])
    check(schema_to_grammar(tuple_, canonical=False)[0], accepts=['[1,"x",2]'])
    check(schema_to_grammar(dict(tuple_, items={"type": "null"}))[0], accepts=['[1,"x",null,null]'])


def test_keys_and_strings_are_spelled_literally() -> None:
    schema = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
    check(
        schema_to_grammar(schema)[0],
        accepts=['{"tag":"a/b é \\" \\\\ \\n \\u0001"}'],
        rejects=['{"t\\u0061g":"x"}', '{"tag":"\\u0061"}', '{"tag":"a\\/b"}', '{"tag":"\\u00e9"}'],
    )
    check(schema_to_grammar(schema, canonical=False)[0], accepts=['{"t\\u0061g":"\\u0061\\/"}'])


def test_numbers_have_no_runaway_digits() -> None:
    g = schema_to_grammar({"type": "object", "properties": {"w": {"type": "integer", "minimum": 0}}})[0]
    check(g, accepts=['{"w":9007199254740993}', '{"w":0}'], rejects=['{"w":' + "1" * 40 + "}"])
    check(
        schema_to_grammar({"type": "number"})[0],
        accepts=["0.30000000000000004", "1.7976931348623157e+308", "5e-324", "-0.0"],
        rejects=["1" * 40, "0." + "1" * 40],
    )
    check(schema_to_grammar({"type": "number"}, canonical=False)[0], accepts=["1" * 40])


@pytest.mark.parametrize("n", [1024, 10_000])
def test_wide_objects_compile_and_check_every_key(n: int) -> None:
    names = [f"field_{i}" for i in range(n)]
    types = [{"type": "integer"}, {"type": "string"}, {"type": "boolean"}]
    schema = {
        "type": "object",
        "properties": {k: types[i % 3] for i, k in enumerate(names)},
        "required": names,
        "additionalProperties": False,
    }
    values = [7, "x", True]
    doc = {k: values[i % 3] for i, k in enumerate(names)}
    r = canon(schema)
    assert r.accepts(json.dumps(doc).encode())
    assert r.accepts(json.dumps(doc, separators=(",", ":")).encode())
    missing = dict(doc)
    del missing[names[n // 2]]
    assert not r.accepts(json.dumps(missing).encode())
    extra = dict(doc, extra=1)
    assert not r.accepts(json.dumps(extra).encode())
    assert not r.accepts(json.dumps(dict(reversed(doc.items()))).encode())


def test_wide_objects_in_the_full_language_keep_the_required_keys_in_order() -> None:
    names = [f"k{i}" for i in range(12)]
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in names}, "required": names}
    with pytest.raises(GrammarError, match="required"):
        schema_to_grammar(schema, canonical=False)
    g, report = schema_to_grammar(schema, canonical=False, strict=False)
    assert [e.status for e in report if e.keyword == "required"] == ["narrowed"]
    doc = {k: 1 for k in names}
    check(
        g,
        accepts=[json.dumps(doc), json.dumps(dict(doc, extra=[1]))],
        rejects=[json.dumps(dict(reversed(doc.items())))],
    )


def test_tool_choice_of_64_tools_rejects_crossed_arguments() -> None:
    tools = []
    for i in range(64):
        args = {"type": "object", "properties": {f"arg{i}": {"type": "integer"}}, "required": [f"arg{i}"]}
        tools.append(
            {
                "type": "object",
                "properties": {"name": {"const": f"tool_{i}"}, "arguments": args},
                "required": ["name", "arguments"],
            }
        )
    schema = {"anyOf": tools}
    r = canon(schema)  # strict mode
    assert r.accepts(b'{"name": "tool_5", "arguments": {"arg5": 3}}')
    assert r.accepts(b'{"name":"tool_63","arguments":{"arg63":-1}}')
    assert not r.accepts(b'{"name": "tool_5", "arguments": {"arg6": 3}}')
    assert not r.accepts(b'{"arguments": {"arg5": 3}, "name": "tool_5"}')
    assert not r.accepts(b'{"name": "tool_64", "arguments": {"arg64": 3}}')


# --------------------------------------------------------------------------- random schemas

NAMES = ["a", "b", "ab", "é", 'q"', "s p", "k\\"]


def _leaf_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.just({"type": "integer"}),
        st.builds(lambda lo: {"type": "integer", "minimum": lo}, st.integers(-5, 5)),
        st.just({"type": "number"}),
        st.just({"type": "boolean"}),
        st.just({"type": "null"}),
        st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 3)),
        st.just({"type": "string"}),
        st.builds(lambda vs: {"enum": vs}, st.lists(st.sampled_from(["x", "y", 1, None, "é"]), min_size=1)),
    )


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
        s: dict[str, Any] = {"type": "object", "properties": {n: draw(children) for n in names}}
        s["required"] = [n for n in names if draw(st.booleans())]
        extra = draw(st.sampled_from(["absent", "false", "true", "schema"]))
        if extra != "absent":
            s["additionalProperties"] = {"false": False, "true": True, "schema": {"type": "integer"}}[extra]
        if draw(st.booleans()):
            s["maxProperties"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            s["minProperties"] = draw(st.integers(0, 3))
        return s

    return build()


def _array(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "array"}
        if draw(st.booleans()):
            s["prefixItems"] = draw(st.lists(children, max_size=2))
        if draw(st.booleans()):
            s["items"] = draw(children)
        if draw(st.booleans()):
            s["maxItems"] = draw(st.integers(0, 3))
        return s

    return build()


schemas = st.recursive(_leaf_schemas(), lambda ch: st.one_of(_object(ch), _array(ch)), max_leaves=6)

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-10, 10**20),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(
            st.sampled_from(list(string.ascii_letters[:3]) + ["é", '"', "\\", "\n", "/", "\x01"]), max_size=4
        ),
    ),
    lambda ch: st.one_of(
        st.lists(ch, max_size=3), st.dictionaries(st.sampled_from(NAMES + ["z"]), ch, max_size=4)
    ),
    max_leaves=8,
)


def _ordered(value: Any, schema: Any) -> Any:
    """``value`` with each object's keys in the order its schema lists them, others after."""
    if isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        addl = schema.get("additionalProperties", True) if isinstance(schema, dict) else True
        return {k: _ordered(value[k], props.get(k, addl)) for k in keys}
    if isinstance(value, list):
        prefix = schema.get("prefixItems", []) if isinstance(schema, dict) else []
        rest = schema.get("items", True) if isinstance(schema, dict) else True
        return [_ordered(x, prefix[i] if i < len(prefix) else rest) for i, x in enumerate(value)]
    return value


def _has_unlisted(value: Any, schema: Any) -> bool:
    """Whether the instance uses a key or an item that canonical mode does not generate."""
    if not isinstance(schema, dict):
        return False
    if isinstance(value, dict):
        props = schema.get("properties", {})
        addl = schema.get("additionalProperties")
        if props and addl is None and any(k not in props for k in value):
            return True
        return any(
            _has_unlisted(v, props.get(k, addl if addl is not None else True)) for k, v in value.items()
        )
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        if prefix and "items" not in schema and len(value) > len(prefix):
            return True
        rest = schema.get("items", True)
        return any(_has_unlisted(x, prefix[i] if i < len(prefix) else rest) for i, x in enumerate(value))
    return False


def _texts(value: Any) -> list[bytes]:
    return [
        json.dumps(value, ensure_ascii=False).encode(),
        json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(),
        json.dumps(value).encode(),  # \u escapes: not canonical for non-ASCII
    ]


@settings(max_examples=60, deadline=None)
@given(schemas, st.lists(json_values, min_size=1, max_size=4))
def test_canonical_is_a_sound_subset_that_keeps_canonical_instances(schema: Any, values: list[Any]) -> None:
    try:
        canonical = canon(schema)
    except GrammarError:
        return  # refused in strict mode (reported); nothing to compare
    full = canon(schema, canonical=False, strict=False)
    validator = jsonschema.Draft202012Validator(schema)
    for value in values:
        valid = validator.is_valid(value)
        ordered = _ordered(value, schema)
        for text in _texts(value) + _texts(ordered):
            if canonical.accepts(text):
                assert full.accepts(text), text
                assert validator.is_valid(json.loads(text)), text
        digits_ok = not re.search(r"\d{18}", json.dumps(value))
        # an integral float (json.dumps writes 0.0): canonical integers are spelled 0, not 0.0
        spelled = not re.search(r"(?<![\d.eE])-?\d+\.0(?![\d])", json.dumps(value))
        if valid and digits_ok and spelled and not _has_unlisted(value, schema):
            assert canonical.accepts(json.dumps(ordered, ensure_ascii=False).encode()), (schema, ordered)


def test_objects_nested_512_deep_compile() -> None:
    """Deeper than Python's default recursion allows: the walk retries on a big stack."""
    s: dict[str, Any] = {"type": "integer"}
    for _ in range(512):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
    r = canon(s)
    assert r.accepts(('{"a":' * 512 + "1" + "}" * 512).encode())
    assert not r.accepts(('{"a":' * 511 + "1" + "}" * 511).encode())
    with pytest.raises(GrammarError, match="nesting deeper than"):
        deeper: Any = True
        for _ in range(2_001):
            deeper = {"items": deeper}
        cfgmask.Grammar.from_json_schema(deeper)


def test_canonical_objects_check_dependencies_and_conditions_along_the_order() -> None:
    props = {k: {"type": "integer"} for k in "abc"}
    later = {"type": "object", "properties": props, "dependentRequired": {"a": ["c"]}}
    check(
        schema_to_grammar(later)[0],
        accepts=["{}", '{"c":1}', '{"a":1,"c":1}', '{"a":1,"b":1,"c":1}'],
        rejects=['{"a":1}', '{"a":1,"b":2}', '{"c":1,"a":1}'],
    )
    earlier = {"type": "object", "properties": props, "dependentRequired": {"c": ["a"]}}
    check(
        schema_to_grammar(earlier)[0],
        accepts=['{"a":1,"c":1}', '{"b":1}'],
        rejects=['{"c":1}', '{"b":1,"c":1}'],
    )
    either = {"type": "object", "properties": props, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    check(
        schema_to_grammar(either)[0],
        accepts=['{"a":1}', '{"b":1}', '{"a":1,"b":1,"c":1}'],
        rejects=["{}", '{"c":1}', '{"b":1,"a":1}'],
    )
    one = {"type": "object", "properties": props, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    check(
        schema_to_grammar(one)[0], accepts=['{"a":1,"c":1}', '{"b":1}'], rejects=['{"a":1,"b":1}', '{"c":1}']
    )
    counted = {"type": "object", "properties": props, "minProperties": 2, "maxProperties": 2}
    check(
        schema_to_grammar(counted)[0],
        accepts=['{"a":1,"b":1}', '{"a":1,"c":1}', '{"b":1,"c":1}'],
        rejects=['{"a":1}', '{"a":1,"b":1,"c":1}', "{}"],
    )


def test_integer_spellings_by_draft_and_mode() -> None:
    """Draft 4 counts only plain integers (jsonschema: ``12345.0`` is a float, not an integer);
    drafts 6+ count ``3.0`` as an integer, and canonical mode spells it ``3``."""
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    for canonical in (True, False):
        check(
            schema_to_grammar(d4, canonical=canonical)[0],
            accepts=["12345", "-7"],
            rejects=["12345.0", "1e20"],
        )
    check(schema_to_grammar({"type": "integer"}, canonical=False)[0], accepts=["3", "3.0", "1e20"])
    check(schema_to_grammar({"type": "integer"})[0], accepts=["3", "1e20"], rejects=["3.0"])
    for s in ({"type": "integer", "multipleOf": 2}, {"type": "integer", "minimum": 1}):
        check(schema_to_grammar({**d4, **s}, canonical=False)[0], accepts=["4"], rejects=["4.0"])
    check(schema_to_grammar({"type": "number", "multipleOf": 2}, canonical=False)[0], accepts=["4", "4.0"])
    validator = jsonschema.Draft4Validator(d4)
    assert not validator.is_valid(json.loads("12345.0")) and validator.is_valid(json.loads("12345"))


_VALUES = st.sampled_from(
    ({"type": "string"}, {"type": "integer"}, False, {"enum": ["a", 1]}, {"type": "string", "maxLength": 2})
)


@st.composite
def _objects(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from("abcdef"), unique=True, max_size=5))
    schema: dict[str, Any] = {"type": "object", "properties": {k: draw(_VALUES) for k in keys}}
    schema["required"] = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    extra = draw(st.sampled_from((None, False, True, {"type": "integer"})))
    if extra is not None:
        schema["additionalProperties"] = extra
    for k in ("minProperties", "maxProperties"):
        if draw(st.integers(0, 3)) == 0:
            schema[k] = draw(st.integers(0, 4))
    if keys and draw(st.integers(0, 3)) == 0:
        schema["dependentRequired"] = {keys[0]: keys[-1:]}
    if draw(st.booleans()):  # nested: the walk of an inner object as a member
        schema = {"type": "object", "properties": {"x": schema, "y": {"type": "integer"}}}
    return schema


@settings(max_examples=80, deadline=None)
@given(_objects())
def test_objects_with_nothing_to_remember_are_laid_out_as_the_search_lays_them(schema: Any) -> None:
    """An object whose walk keeps no state (no key watched, nothing counted) is laid out
    without the search of ``ordered``; the search gives the same rules, in the same order,
    and the same report."""
    from cfgmask.frontends.json_schema import containers

    def outcome() -> Any:
        try:
            g, report = schema_to_grammar(schema)
        except GrammarError as e:
            return str(e)
        return g.start, [(n, repr(b)) for n, b in g.rules.items()], [repr(e) for e in report.entries]

    fast = outcome()
    searched = containers.Containers.ordered
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            containers.Containers,
            "ordered",
            lambda self, *a, constant=False, **k: searched(self, *a, **k),
        )
        assert outcome() == fast
