"""JSON Schema → grammar: exactness against the JSON-Schema-Test-Suite and JSONSchemaBench.

The property: for a schema that compiles in strict mode, an instance serialized
compactly and with ``json.dumps`` defaults is accepted iff it is valid.
Acceptance goes through :func:`accepts_fn` (the pure-Python reference today;
switch it to the C matcher in one place).  The reference is slow, so
instances over ``MAX_INSTANCE_BYTES`` are skipped (counted) and the CI profile
samples fewer JSONSchemaBench schemas.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from cfgmask import ir
from cfgmask.errors import GrammarError
from cfgmask.frontends.json_schema import schema_to_grammar

from .helpers import check
from .reference import ReferenceMatcher

CORPORA = Path(__file__).parent / "corpora"
SUITE = CORPORA / "json-schema-test-suite" / "tests"
BENCH = CORPORA / "jsonschemabench"
MAX_INSTANCE_BYTES = 2048
BENCH_SCHEMAS_PER_SPLIT = 10 if os.environ.get("CI") else 40
# format.json: the suite's default is format as annotation; we assert formats (see formats.py).
SUITE_SKIP_FILES = {"format.json"}


def accepts_fn(grammar: ir.Grammar) -> Callable[[bytes], bool]:
    """The one place that decides acceptance (reference matcher for now)."""
    return ReferenceMatcher(grammar).accepts


def serializations(data: object) -> set[str]:
    return {json.dumps(data), json.dumps(data, separators=(",", ":"))}


def grammar(schema: object, **kw: object) -> ir.Grammar:
    kw.setdefault("canonical", False)  # the verdict suites check the schema's whole language
    return schema_to_grammar(schema, **kw)[0]  # type: ignore[arg-type]


# --------------------------------------------------------------------------- spec tables


def test_integer_range_and_spellings() -> None:
    check(
        grammar({"type": "integer", "minimum": -5, "exclusiveMaximum": 120}),
        accepts=["-5", "0", "-0", "119", "7.0", "-3.00"],
        rejects=["-6", "120", "1.5", "01", "1e2", "", "+1"],
    )


def test_number_range_decimal_and_scientific() -> None:
    check(
        grammar({"type": "number", "exclusiveMinimum": 0.5, "maximum": 1e20}),
        accepts=["0.51", "1", "1e+20", "1.0e20", "99999999999999999999.0", "0.6"],
        rejects=["0.5", "0.50", "1.0000001e20", "5e-1", "-1", "1e21"],
    )


def test_unbounded_number_is_rfc8259() -> None:
    check(grammar({"type": "number"}), accepts=["1E+400", "-0.0e-0", "12"], rejects=["1.", ".5", "01", "NaN"])


def test_string_escapes_and_lengths() -> None:
    g = grammar({"type": "string", "minLength": 2, "maxLength": 3})
    check(
        g,
        accepts=['"ab"', '"\\u00e9\\u00E9"', '"\\ud83d\\ude00x"', '"a\\/"', '"é😀"', '"\\"\\\\\\n"'],
        rejects=['"a"', '"abcd"', '"\\ud83d\\ude00"', '"a\x01"', '"\\x41b"', '"ab'],
    )


def test_big_length_bound_is_a_repeat_not_unrolled() -> None:
    g = grammar({"type": "string", "maxLength": 5000})
    parts = [x for e in g.rules.values() for x in (e.items if isinstance(e, ir.Seq) else (e,))]
    assert any(isinstance(r, ir.Repeat) and r.hi == 5000 for r in parts)


def test_pattern_is_a_search_on_the_decoded_string() -> None:
    check(
        grammar({"type": "string", "pattern": "b[0-9]"}),
        accepts=['"b1"', '"xxb2yy"', '"\\u0062\\u0033"', '"a\\nb4"'],
        rejects=['"b"', '"1b"', '""'],
    )
    check(
        grammar({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}),
        accepts=['"abc"', '"a"'],
        rejects=['"abcd"', '"ab1"', '""', '"abc\\n"', '"ab\\n"'],  # ECMAScript's $ is the end
    )


def test_enum_and_const_accept_every_spelling() -> None:
    check(
        grammar({"enum": ["é", 1, None, {"a": [1, 2]}]}, canonical=False),
        accepts=['"é"', '"\\u00e9"', "1", "1.0", "1e0", "null", '{"a":[1,2]}', '{"a": [1.0, 2]}'],
        rejects=['"e"', "2", "true", '{"a":[2,1]}', '{"a":[1,2],"b":1}'],
    )


def test_enum_and_const_canonical_spell_each_value_once() -> None:
    check(
        grammar({"enum": ["é", 1, 2.0, None, {"a": [1, 2]}]}, canonical=True),
        accepts=['"é"', "1", "2.0", "null", '{"a":[1,2]}', '{"a": [1, 2]}'],
        rejects=['"\\u00e9"', "1.0", "1e0", "2", '{"a": [1.0, 2]}', '"e"', "true"],
    )


def test_properties_in_any_order_required_and_additional() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }
    check(
        grammar(schema),
        accepts=['{"a":1,"b":"x"}', '{"b": "x", "a": 1}', '{"b":"x","c":[],"a":1}'],
        rejects=['{"a":1}', '{"a":"1","b":"x"}', '{"a":1,"b":"x","a":2}', "{}"],
    )
    check(
        grammar({**schema, "additionalProperties": False}),
        accepts=['{"b":"x","a":1}'],
        rejects=['{"a":1,"b":"x","c":1}'],
    )


def test_recursive_ref_and_arrays() -> None:
    kids = {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
    node = {"type": "object", "properties": {"kids": kids}, "additionalProperties": False}
    schema = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    check(
        grammar(schema),
        accepts=["{}", '{"kids":[]}', '{"kids":[{},{"kids":[{}]}]}'],
        rejects=['{"kids":[{},{},{}]}', '{"kids":[1]}', '{"x":1}'],
    )


def test_whitespace_policies() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array"}}}
    doc = {"a": [1, 2]}
    texts = [json.dumps(doc), json.dumps(doc, indent=2), json.dumps(doc, separators=(",", ":"))]
    check(grammar(schema), accepts=texts, rejects=['{"a":\n\n[1]}', ' {"a":[]}'])
    check(grammar(schema, whitespace="compact"), accepts=texts[2:], rejects=texts[:2])
    check(grammar(schema, whitespace="any"), accepts=[*texts, ' {\n\n"a" :[ ]}\n'])
    with pytest.raises(GrammarError):
        grammar(schema, whitespace="lots")


def test_strict_mode_names_keyword_and_path() -> None:
    schema = {"properties": {"a": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(GrammarError, match=r"uniqueItems.*/properties/a/uniqueItems"):
        schema_to_grammar(schema, canonical=False)
    _, report = schema_to_grammar(schema, strict=False, canonical=False)
    assert [(e.path, e.keyword) for e in report.rejected] == [("/properties/a/uniqueItems", "uniqueItems")]
    assert not report.exact


def test_annotations_are_trivially_enforced() -> None:
    _, report = schema_to_grammar(
        {"title": "t", "description": "d", "default": 1, "type": "null"}, canonical=False
    )
    assert report.exact and {e.keyword for e in report} == {"title", "description", "default", "type"}


# --------------------------------------------------------------------------- JSON-Schema-Test-Suite


def _suite_groups(draft: str) -> list[tuple[str, dict]]:
    out = []
    for path in sorted((SUITE / draft).glob("*.json")):
        if path.name in SUITE_SKIP_FILES:
            continue
        for group in json.loads(path.read_text()):
            out.append((path.name, group))
    return out


def _remotes() -> dict[str, object]:
    """The suite's remote documents, by the URIs its tests name them (it serves them there)."""
    root = SUITE.parent / "remotes"
    return {
        f"http://localhost:1234/{p.relative_to(root)}": json.loads(p.read_text())
        for p in root.rglob("*.json")
    }


# Groups compiled in strict mode, per test file: floors (a regression fails; raise them as they
# grow).  Files not named compile every group.
SUITE_FLOORS = {
    "draft2020-12": {
        "defs": 0, "dependentSchemas": 3, "multipleOf": 4, "not": 7, "oneOf": 9, "pattern": 2,
        "patternProperties": 5, "ref": 35, "unevaluatedItems": 19, "unevaluatedProperties": 37,
        "uniqueItems": 3, "vocabulary": 0,
    },
    "draft7": {
        "definitions": 0, "dependencies": 6, "multipleOf": 4, "not": 7, "oneOf": 9, "ref": 34,
        "uniqueItems": 3,
    },
}  # fmt: skip
# the groups of format.json aside (formats are asserted here, the suite's file says annotation)
SUITE_TOTAL_FLOORS = {"draft2020-12": 334, "draft7": 230}


@pytest.mark.parametrize("draft", ["draft2020-12", "draft7"])
def test_json_schema_test_suite(draft: str) -> None:
    counts: Counter[str] = Counter()
    per_file: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    wrong: list[str] = []
    remotes = _remotes()
    for name, group in _suite_groups(draft):
        schema = group["schema"]
        groups[name[:-5]] += 1
        if draft == "draft7" and isinstance(schema, dict) and "$schema" not in schema:
            schema = {**schema, "$schema": "http://json-schema.org/draft-07/schema#"}
        try:
            g, _ = schema_to_grammar(schema, canonical=False, resources=remotes)  # every valid spelling
        except GrammarError:
            counts["rejected schemas"] += 1
            continue
        counts["compiled schemas"] += 1
        per_file[name[:-5]] += 1
        accepts = accepts_fn(g)
        for test in group["tests"]:
            for text in serializations(test["data"]):
                if accepts(text.encode()) == test["valid"]:
                    counts["agree"] += 1
                else:
                    wrong.append(f"{name} | {group['description']} | {test['description']}: {text[:80]}")
    print(f"\n{draft}: {dict(counts)}")
    assert not wrong, "\n".join(wrong)
    floors = SUITE_FLOORS[draft]
    below = {f: (per_file[f], floors.get(f, n)) for f, n in groups.items() if per_file[f] < floors.get(f, n)}
    assert not below, f"groups compiled (now, floor): {below}"
    assert counts["compiled schemas"] >= SUITE_TOTAL_FLOORS[draft]


# --------------------------------------------------------------------------- JSONSchemaBench


SPLITS = sorted(p.stem for p in BENCH.glob("*.jsonl"))


@pytest.mark.parametrize("split", SPLITS)
def test_jsonschemabench(split: str) -> None:
    lines = (BENCH / f"{split}.jsonl").read_text().splitlines()[:BENCH_SCHEMAS_PER_SPLIT]
    counts: Counter[str] = Counter()
    invalid_accepted: list[str] = []
    for line in lines:
        rec = json.loads(line)
        try:
            g, _ = schema_to_grammar(rec["schema"], canonical=False)
        except GrammarError:
            counts["rejected"] += 1
            continue
        counts["compiled"] += 1
        accepts = accepts_fn(g)
        for test in rec["tests"]:
            for text in serializations(test["data"]):
                if len(text) > MAX_INSTANCE_BYTES:
                    counts["skipped (size)"] += 1
                    continue
                ok = accepts(text.encode())
                counts[f"{'valid' if test['valid'] else 'invalid'} {'accepted' if ok else 'rejected'}"] += 1
                if ok and not test["valid"]:
                    invalid_accepted.append(f"{rec['id']}: {text[:120]}")
    print(f"\n{split}: {dict(counts)}")
    assert not invalid_accepted, "\n".join(invalid_accepted)
    assert counts["compiled"] >= len(lines) // 2
