"""The JSON Schema front end's cold path (issue 12, session 38): each cut checked against what it
replaced.  A pattern is parsed once per cold compile and its shared tree is never changed by its
readers; any JSON value's rules, made once per (whitespace, canonical), equal a fresh build;
``fresh_stem`` is ``fresh`` for the fixed names its callers pass; the loops that replaced
early-stopped generators answer as the generators did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import Grammar, ir
from cfgmask.errors import GrammarError
from cfgmask.frontends import ecmascript, regex
from cfgmask.frontends.json_schema import _ir_util as U
from cfgmask.frontends.json_schema import merge, numbers, strings, walk, wellformed

CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench"

PATTERNS = [
    "^[a-z]+x$",
    "a.*",
    "(^a$)|(^b$)",
    "^a(b|$)",
    "\\bcat\\b",
    "(?<=x)y+",
    "^(?:[0-9]{3}-)?[0-9]{4}$",
    "[^\\s]+@[^\\s]+",
    "(a|bc)*d?",
    "^\\p{L}+$",
]


def _parses(schema: dict[str, Any]) -> int:
    """How many times a cold compile of ``schema`` parses an ECMAScript pattern."""
    cfgmask.clear_caches()
    real = ecmascript.parse
    with mock.patch.object(ecmascript, "parse", side_effect=real) as spy:
        Grammar.from_json_schema(schema)
    return spy.call_count


@pytest.mark.parametrize("p", ["^[a-z]+x$", "(a|bc)*d?"])
def test_a_pattern_is_parsed_once(p: str) -> None:
    # checked (wellformed), then its search language: one parse, not two
    assert _parses({"type": "string", "pattern": p}) == 1
    # a key pattern: checked, tested for "every string" (strings.everywhere), searched: one parse
    schema = {"type": "object", "patternProperties": {p: {"type": "integer"}}}
    assert _parses(schema) == 1
    assert _parses({"type": "object", "patternProperties": {"x.*": {"type": "integer"}}}) == 1


@pytest.mark.parametrize("p", PATTERNS)
def test_the_shared_tree_is_read_only(p: str) -> None:
    cfgmask.clear_caches()
    tree = wellformed.pattern_tree(p)
    before = repr(tree.nodes)
    strings.everywhere(p)
    fresh = regex.ecmascript_search(p)
    shared = strings.search_language(p)
    assert wellformed.pattern_tree(p) is tree
    assert repr(tree.nodes) == before  # no reader changed it
    assert shared == fresh  # the search language from the shared tree is the one a parse gives


@pytest.mark.parametrize("p", ["(a", "a{2,1}", "[b-a]", "(?<n>a)(?<n>b)", "a**"])
def test_a_malformed_pattern_says_what_it_said(p: str) -> None:
    cfgmask.clear_caches()
    e = ecmascript.syntax_error(p)
    assert e is not None and wellformed.pattern_tree(p) is None
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema({"type": "string", "pattern": p})
    assert e.message in str(info.value)


def test_a_valid_pattern_cfgmask_cannot_compile_is_not_malformed() -> None:
    cfgmask.clear_caches()
    assert wellformed._regex_text("(a)\\1") is None  # a backreference: rejected by the walk, not malformed
    g = Grammar.from_json_schema({"type": "string", "pattern": "(a)\\1"}, strict=False)
    assert any(e.keyword == "pattern" and e.status == "rejected" for e in g.schema_report.entries)


@pytest.mark.parametrize("ws", [ir.EPSILON, ir.Ref("ws"), ir.Literal(b" ")])
@pytest.mark.parametrize("canonical", [True, False])
def test_any_value_rules_equal_a_fresh_build(ws: ir.Expr, canonical: bool) -> None:
    walk._BUILTIN.clear()
    for _ in range(2):  # made, then taken from the memo
        rules: dict[str, ir.Expr] = {"x": ir.NOTHING}
        walk.add_builtin(rules, ws, canonical)
        expect: dict[str, ir.Expr] = {"x": ir.NOTHING}
        expect["json-char"] = lexical_char(canonical)
        expect.update(walk._builtin_rules(ws, canonical))
        assert list(rules) == list(expect) and rules == expect
    other = ir.EPSILON if ws != ir.EPSILON else ir.Ref("ws")
    rules2: dict[str, ir.Expr] = {}
    walk.add_builtin(rules2, other, canonical)  # another whitespace: not the memo's entry above
    assert rules2["json-object"] == walk._builtin_rules(other, canonical)["json-object"]
    assert rules2["json-object"] != rules["json-object"]


def lexical_char(canonical: bool) -> ir.Expr:
    from cfgmask.frontends.json_schema.lexical import CANONICAL_CHAR, JSON_CHAR

    return CANONICAL_CHAR if canonical else JSON_CHAR


def test_fresh_stem_gets_only_names_that_are_their_own_stems() -> None:
    """Every base the front end hands ``fresh_stem`` (a sample of the corpus, both modes) is its
    own stem, so the name is the one ``fresh`` would give."""
    real = U.fresh_stem
    seen: set[str] = set()

    def checked(rules: dict[str, ir.Expr], stem: str) -> str:
        seen.add(stem)
        assert U.stem_of(stem) == stem, stem
        return real(rules, stem)

    texts = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        texts += [json.loads(line)["schema"] for line in path.read_text().split("\n")[:12] if line.strip()]
    with mock.patch.object(U, "fresh_stem", side_effect=checked):
        for s in texts:
            for canonical in (True, False):
                try:
                    Grammar.from_json_schema(s, canonical=canonical, strict=False)
                except GrammarError:
                    pass
    assert {"value", "obj-0"} <= seen


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["value", "obj-1", "items", "mult3", "x"])), max_size=30
    )
)
def test_fresh_stem_names_as_fresh_does(calls: list[tuple[bool, str]]) -> None:
    a: dict[str, ir.Expr] = {}
    b: dict[str, ir.Expr] = {}
    for via_stem, name in calls:
        got = U.fresh_stem(a, name) if via_stem else U.fresh(a, name)
        assert got == U.fresh(b, name)
    assert list(a) == list(b)
    U.release()


def test_loops_answer_as_the_generators_did() -> None:
    n = ir.NOTHING
    d = ir.Literal(b"1")
    for e in (ir.seq(d, n), ir.Seq((d, d)), ir.alt(d, ir.Literal(b"2")), d):
        assert numbers._dead(e) == (isinstance(e, ir.Seq) and any(x == n for x in e.items))
    for s in ({"title": "a"}, {"x-a": 1, "type": "string"}, {}, {"description": "d", "minimum": 1}):
        assert walk.constraining(s) == any(not merge.is_annotation(k) for k in s)
    for p in ("a", "^$", "(?=a)", "x*", "\\b"):
        nodes = ecmascript.parse(p).nodes
        assert regex._can_consume(nodes) == any(regex._node_consumes(x) for x in nodes)


def test_cap_digits_keeps_what_it_does_not_change() -> None:
    fixed = ir.seq(ir.Literal(b"1"), ir.Literal(b"2"))
    assert numbers._cap_digits(fixed) is fixed
    digits = ir.ByteClass(ir.normalize_ranges([(0x30, 0x39)], 0xFF))
    grows = ir.seq(ir.Literal(b"1"), ir.Repeat(digits, 0, None))
    capped = numbers._cap_digits(grows)
    assert capped is not grows
    assert capped == ir.seq(ir.Literal(b"1"), ir.Repeat(digits, 0, numbers.CANONICAL_EXTRA_DIGITS))
    # a part of the node's own type: the constructor would flatten it, so the node is rebuilt
    nested = ir.Seq((ir.Seq((ir.Literal(b"1"), ir.Literal(b"2"))), ir.Literal(b"3")))
    flat = numbers._cap_digits(nested)
    assert flat is not nested and flat == ir.seq(ir.Literal(b"1"), ir.Literal(b"2"), ir.Literal(b"3"))


def _draft_as_before(schema: Any) -> int:
    uri = schema.get("$schema", "") if isinstance(schema, dict) else ""
    for n in (4, 6, 7):
        if f"draft-0{n}" in str(uri):
            return n
    return 2019 if "2019-09" in str(uri) else 2020


_URI_PARTS = st.sampled_from(
    ["draft-04", "draft-06", "draft-07", "2019-09", "draft/2020-12", "http://", "#", "x"]
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.lists(_URI_PARTS, max_size=4).map("".join),
        st.sampled_from([None, 0, 0.0, False, True, 4, 7.5, [], {}, ["draft-04"], {"a": "draft-07"}]),
    ),
    st.booleans(),
)
def test_detect_draft_as_before(uri: Any, present: bool) -> None:
    schema: Any = {"$schema": uri} if present else {"type": "string"}
    assert walk.detect_draft(schema) == _draft_as_before(schema)
    assert walk.detect_draft(True) == _draft_as_before(True) == 2020
