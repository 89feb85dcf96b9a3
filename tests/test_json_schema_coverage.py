"""JSON Schema constructions that need automata or key-set conditions, against the ``jsonschema``
package: a pattern with a length bound, a format or excluded values (automaton products);
``patternProperties`` beside any ``additionalProperties`` and overlapping patterns (the keys split
by the patterns they match); ``anyOf``/``oneOf``/``not`` of ``required`` (a condition on the
present keys); ``oneOf`` branches told apart through ``patternProperties``; ``if``/``then``/``else``;
unknown formats and keywords (annotations); and the JSONSchemaBench schemas these made compile.

Every verdict is the ``jsonschema`` validator's (formats asserted; ``pattern`` and
``patternProperties`` with ECMA-262 semantics, through ``regress``) on the decoded instance; every
instance goes through the C matcher byte by byte, serialized compactly, with ``json.dumps``
defaults and with ``ensure_ascii=False`` (so keys and strings come both escaped and raw).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.errors import GrammarError
from cfgmask.frontends.json_schema import chardfa, schema_to_grammar
from cfgmask.frontends.json_schema.strings import search_language

from . import ecma
from .ecma import ecma_validator
from .engine import EngineRecognizer
from .helpers import json_spellings

BENCH = Path(__file__).parent / "corpora" / "jsonschemabench"


@functools.lru_cache(maxsize=64)
def _compiled(text: str) -> tuple[EngineRecognizer, Any]:
    schema = json.loads(text)
    g, report = schema_to_grammar(schema, canonical=False)
    assert report.exact
    return EngineRecognizer(g), ecma_validator(schema)


def agree(schema: Any, data: Any) -> None:
    """The matcher accepts each spelling of ``data`` iff jsonschema says it is valid (its pattern
    keywords with ECMA-262 semantics, tests/ecma.py)."""
    rec, validator = _compiled(json.dumps(schema, sort_keys=True))
    valid = validator.is_valid(data)
    for text in json_spellings(data):
        assert rec.accepts(text.encode()) == valid, (schema, text, valid)


# --------------------------------------------------------------------------- character automata

PATTERNS = [r"^(\d+\.\d+\.\d+.*)$", r"[0-9a-f]{4}", r"^\w$", r"_meta", r"ab|cd$", r"^x(y|é)*w", r"[^a]b+"]
TEXT = st.text(alphabet="0123456789.abcdefxyw_é\n -", max_size=10)


@given(st.sampled_from(PATTERNS), TEXT, st.integers(0, 4), st.integers(2, 8))
def test_char_automata_are_exact(pattern: str, text: str, lo: int, hi: int) -> None:
    d = chardfa.from_expr(ir.alt(*search_language(pattern)))
    hit = ecma.search(pattern, text)
    assert d.matches(text) == hit
    assert chardfa.product([d], lambda f: not f[0]).matches(text) == (not hit)
    bounded = chardfa.intersection([d, chardfa.length(lo, hi)])
    assert bounded.matches(text) == (hit and lo <= len(text) <= hi)
    names = ["ab", "abc", "_meta", "1.2.3"]
    minus = chardfa.product([d, chardfa.words(names)], lambda f: f[0] and not f[1])
    assert minus.matches(text) == (hit and text not in names)


def test_char_automaton_size_is_bounded() -> None:
    with pytest.raises(GrammarError, match="automaton states"):
        chardfa.from_expr(ir.alt(*search_language("(a|b)*a(a|b){14}")))  # 2^15 states


# --------------------------------------------------------------------------- strings

STRING_SCHEMAS = [
    {"type": "string", "pattern": r"^(\d+\.\d+\.\d+.*)$", "maxLength": 8},
    {"type": "string", "pattern": "[a-c]-[0-9]", "minLength": 4, "maxLength": 6},
    {"type": "string", "pattern": r"^([\w/-]|[\w-][\w/-]*[\w-])$", "maxLength": 5},
    {"type": "string", "format": "date", "pattern": "-0[1-3]-"},
    {"type": "string", "maxLength": 3, "not": {"enum": ["ab", "abc", "é"]}},
]
STRINGS = st.one_of(
    st.text(alphabet="0123456789.abc-éx/_\n", max_size=10),
    st.from_regex(r"\A\d{1,3}\.\d\.\d{1,2}[a-z]{0,2}\Z"),
    st.from_regex(r"\A20[0-9]{2}-0[0-9]-[0-3][0-9]\Z"),
)


@given(st.sampled_from(range(len(STRING_SCHEMAS))), STRINGS)
def test_string_constraints_intersected(i: int, text: str) -> None:
    agree(STRING_SCHEMAS[i], text)


def test_length_with_pattern_spellings() -> None:
    schema = STRING_SCHEMAS[0]
    rec, _ = _compiled(json.dumps(schema, sort_keys=True))
    assert rec.accepts(b'"1.2.3\\u00e9xy"')  # 8 characters, one escaped
    assert not rec.accepts(b'"1.2.3\\u00e9xyz"')
    assert rec.accepts('"1.2.3éé"'.encode())
    assert not rec.accepts(b'"1.2.3"x')


# --------------------------------------------------------------------------- objects

OBJECT_SCHEMAS = [
    # patterns beside additionalProperties; "ab" matches both patterns and is listed
    {
        "type": "object",
        "properties": {"ab": {"type": "integer"}, "b": {"type": "string"}},
        "patternProperties": {
            "^a": {"type": "string"},
            "b$": {"type": ["string", "integer"], "minLength": 2},
        },
        "additionalProperties": {"type": "boolean"},
    },
    # a pattern with a counter, a required key, additional values constrained
    {
        "type": "object",
        "patternProperties": {"[0-9]{2}": {"type": "null"}},
        "required": ["k"],
        "additionalProperties": {"type": "integer"},
    },
    # every key matches: listed properties get both schemas
    {
        "type": "object",
        "properties": {"a": {"maxLength": 1}},
        "patternProperties": {".*": {"type": "string"}},
    },
    # exactly one of two key sets, beside a required key and a property schema
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["z"],
        "oneOf": [{"required": ["a"]}, {"required": ["b", "c"]}],
    },
    # some key set, not both a and c
    {
        "type": "object",
        "anyOf": [{"required": ["a", "b"]}, {"required": ["c"]}],
        "not": {"required": ["a", "c"]},
    },
    # oneOf branches apart through patternProperties (as Github_trivial/o88605)
    {
        "oneOf": [
            {"type": "object", "required": ["a"], "patternProperties": {"^(b|c)$": {"type": "null"}}},
            {"type": "object", "required": ["b"], "properties": {"b": {"type": "integer"}}},
        ]
    },
]
# the keys each schema tells apart, and a few others
OBJECT_KEYS = [
    ["ab", "b", "a", "aab", "bb", "x", "é", "aé"],
    ["k", "12", "x12y", "1", "k1", "é99"],
    ["a", "b", "", "é"],
    ["a", "b", "c", "z", "d"],
    ["a", "b", "c", "d"],
    ["a", "b", "c", "d"],
]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(alphabet="ab", max_size=3))


@st.composite
def schema_and_object(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    i = draw(st.sampled_from(range(len(OBJECT_SCHEMAS))))
    return i, draw(st.dictionaries(st.sampled_from(OBJECT_KEYS[i]), VALUES, max_size=4))


@given(schema_and_object())
def test_objects_with_patterns_and_key_conditions(case: tuple[int, dict[str, Any]]) -> None:
    agree(OBJECT_SCHEMAS[case[0]], case[1])


@pytest.mark.parametrize("i", range(len(OBJECT_SCHEMAS)))
def test_objects_every_key_subset(i: int) -> None:
    """Every subset of the schema's keys, each value drawn from a few that matter."""
    keys = OBJECT_KEYS[i]
    for mask in range(1 << len(keys)):
        present = [k for j, k in enumerate(keys) if mask >> j & 1]
        for value in (None, 1, "ab", "a"):
            agree(OBJECT_SCHEMAS[i], dict.fromkeys(present, value))


def test_objects_non_object_instances() -> None:
    for schema in OBJECT_SCHEMAS:
        for data in (None, 1, "a", [], True):
            agree(schema, data)
    agree({"not": {"required": ["a", "b"]}}, 5)  # a non-object has every required key
    agree({"not": {"required": ["a", "b"]}}, {"a": 1})
    agree({"not": {"required": ["a", "b"]}}, {"b": 1, "a": 2})


def test_many_names_beside_additional_properties_compile_fast() -> None:
    names = [f"{w}_{i:02d}_name" for i in range(30) for w in ("alpha", "beta", "gamma")]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "additionalProperties": {"type": "string"},
    }
    t0 = time.perf_counter()
    rec, _ = _compiled(json.dumps(schema, sort_keys=True))
    assert time.perf_counter() - t0 < 20
    for data in (
        {"alpha_00_name": 1, "other": "x"},
        {"beta_29_name": "x"},
        {"beta_29_nam": "x"},
        {"gamma_1": 2},
    ):
        agree(schema, data)


# --------------------------------------------------------------------------- if / then / else

CONDITIONALS = [
    {
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
        "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
        "then": {"required": ["x"]},
        "else": {"properties": {"x": {"type": "string"}}},
    },
    {"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"type": "integer"}},
    {"if": {"properties": {"n": {"type": "integer", "enum": [1, 2, "1"]}}}, "then": {"required": ["m"]}},
    {
        "if": {"type": "object", "required": ["a", "b"]},
        "else": {"type": ["object", "null"], "maxProperties": 1},
    },
]
COND_VALUES = st.sampled_from([None, 1, 2, "1", "a", "b", "abc", True])


@given(
    st.sampled_from(range(len(CONDITIONALS))),
    st.one_of(
        COND_VALUES,
        st.dictionaries(st.sampled_from(["kind", "x", "n", "m", "a", "b"]), COND_VALUES, max_size=3),
    ),
)
def test_if_then_else(i: int, data: Any) -> None:
    agree(CONDITIONALS[i], data)


def test_if_then_else_refusals_and_old_drafts() -> None:
    with pytest.raises(GrammarError, match="'if'"):  # the complement of a pattern is not written
        schema_to_grammar({"if": {"pattern": "a"}, "then": {"type": "string"}}, canonical=False)
    old = {"$schema": "http://json-schema.org/draft-06/schema#", "if": {"type": "string"}, "then": False}
    _, report = schema_to_grammar(old, canonical=False)  # draft-06 has no if: an annotation
    assert report.exact
    agree(old, "abc")


# --------------------------------------------------------------------------- annotations, refusals


def test_unknown_format_is_an_annotation_and_unsupported_ones_are_refused() -> None:
    for data in ("", "abc", "x y"):
        agree({"type": "string", "format": "evenlength"}, data)
    _, report = schema_to_grammar({"type": "string", "format": "topic"}, canonical=False)
    assert report.exact
    with pytest.raises(GrammarError, match="format"):
        schema_to_grammar({"type": "string", "format": "idn-hostname"}, canonical=False)


def test_enum_beside_an_unknown_keyword() -> None:
    schema = {"type": "string", "enum": ["ON", "OFF", 3], "readonly": True}
    for data in ("ON", "OFF", "on", 3):
        agree(schema, data)


def test_one_of_beyond_key_sets() -> None:
    """Overlapping branches are each taken without the others when their complements can be
    written (here: a missing key, or a value of another type); a pattern's cannot."""
    schema = {
        "type": "object",
        "oneOf": [{"required": ["a"], "properties": {"a": {"type": "string"}}}, {"required": ["b"]}],
    }
    for data in ({"a": "x"}, {"a": 1}, {"b": 1}, {"a": "x", "b": 1}, {"a": 1, "b": 1}, {}):
        agree(schema, data)
    schema["oneOf"][0]["properties"]["a"] = {"pattern": "^x"}
    with pytest.raises(GrammarError, match="oneOf"):
        schema_to_grammar(schema, canonical=False)


# --------------------------------------------------------------------------- JSONSchemaBench

NOW_COMPILED = [
    "Github_trivial/o26958", "Github_trivial/o88605", "Github_trivial/o91408", "Github_trivial/o78129",
    "Github_easy/o20462", "Github_easy/o91396",
    "Github_medium/o32011", "Github_medium/o82570", "Github_medium/o30568", "Github_medium/o90425",
    "Github_medium/o11975", "Github_medium/o90391", "Github_medium/o9360",
    "Glaiveai2K/calculate_area_4bbe47e7",
    "Snowplow/sp_333_Normalized", "Snowplow/sp_356_Normalized", "Snowplow/sp_0_Normalized",
    "WashingtonPost/wp_93_Normalized", "WashingtonPost/wp_116_Normalized", "WashingtonPost/wp_81_Normalized",
    "WashingtonPost/wp_55_Normalized",
]  # fmt: skip


def _records() -> dict[str, dict[str, Any]]:
    out = {}
    for split in {i.split("/")[0] for i in NOW_COMPILED}:
        for line in (BENCH / f"{split}.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["id"] in NOW_COMPILED:
                out[rec["id"]] = rec
    return out


@pytest.mark.parametrize("rid", NOW_COMPILED)
def test_previously_refused_bench_schemas(rid: str) -> None:
    rec = _records()[rid]
    g, report = schema_to_grammar(rec["schema"], canonical=False)
    assert report.exact
    m = EngineRecognizer(g)
    for test in rec["tests"]:
        for sep in ((", ", ": "), (",", ":")):
            text = json.dumps(test["data"], separators=sep)
            assert m.accepts(text.encode()) == test["valid"], (rid, text[:200])
