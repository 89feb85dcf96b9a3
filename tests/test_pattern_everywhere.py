"""``strings.everywhere``: patterns whose search language is every string (``.*``) get the
universal automaton without the regex translation and subset construction.  Checked against the
general path (``search_language`` then ``chardfa.from_expr``), against Python's ``re`` on sample
strings, and end to end (the grammar of a schema is the same with the shortcut off)."""

from __future__ import annotations

import json
import re

import pytest

import cfgmask
from cfgmask import ir
from cfgmask.frontends.json_schema import chardfa, strings

EVERYWHERE = [
    "",
    ".*",
    ".*?",
    "(.*)",
    "(?:.*)",
    "[^]*",
    "[a-z]*",
    "x*",
    "a*b*",
    "\\d*",
    "\\w*",
    "(a*)(b*?)",
    "((.*))",
    "[\\s\\S]*",
    "\\p{L}*",
    "[^a]*",
    "[\\ud800-\\udfff]*",  # no code point JSON can spell: an empty class, repeated
]
# not by shape (some are every string all the same: the general path decides those)
OTHERS = [
    "^.*$",
    "^.*",
    ".+",
    "a",
    "x?",
    "a{0,3}",
    "(a|b)*",
    "\\w*|a",
    "(?=a)*",
    "\\b*",
    "(a)\\1*",
    "a+b*",
    "^[a-z]+$",
    "(.*",
    "*",
    "\\ud800*",
    ".*)",
]
SAMPLES = ["", "a", "key", "Hello world", "line\nbreak", "\r\n", "tab\tx", "é", "日本", "\U0001f600", "\x00"]


def _general(p: str) -> chardfa.CharDFA:
    return chardfa.from_expr(ir.alt(*strings.search_language(p)))


def _same(a: chardfa.CharDFA, b: chardfa.CharDFA) -> bool:
    return (a.atoms, a.trans, a.accept, a.minimal) == (b.atoms, b.trans, b.accept, b.minimal)


@pytest.mark.parametrize("p", EVERYWHERE)
def test_shortcut_taken_and_equal_to_general_path(p: str) -> None:
    cfgmask.clear_caches()
    assert strings.everywhere(p)
    got = strings.pattern_dfa(p)
    assert got is strings._every_dfa()  # the shortcut ran
    assert _same(got, _general(p))
    assert all(got.matches(s) for s in SAMPLES)


@pytest.mark.parametrize("p", [p for p in EVERYWHERE if "\\p" not in p])
def test_python_re_agrees(p: str) -> None:
    # in these simple forms ECMAScript and Python regexes agree: each finds a match anywhere
    py = p.replace("[^]", "[\\s\\S]")
    assert all(re.search(py, s) is not None for s in SAMPLES)


@pytest.mark.parametrize("p", OTHERS)
def test_others_take_the_general_path(p: str) -> None:
    cfgmask.clear_caches()
    assert not strings.everywhere(p)
    try:
        general = _general(p)
    except cfgmask.GrammarError as e:
        with pytest.raises(cfgmask.GrammarError) as got:
            strings.pattern_dfa(p)
        assert got.value.message == e.message
        return
    got = strings.pattern_dfa(p)
    assert got is not strings._every_dfa()
    assert _same(got, general)


def _grammar(schema: dict[str, object], canonical: bool, strict: bool) -> str:
    cfgmask.clear_caches()
    try:
        g = cfgmask.Grammar.from_json_schema(json.dumps(schema), canonical=canonical, strict=strict)
    except cfgmask.GrammarError as e:
        return f"error {type(e).__name__}: {e}"
    return repr(g.ir.rules) + repr(g.schema_report)


SCHEMAS = [
    {"type": "object", "patternProperties": {".*": {"type": "boolean"}}},
    {
        "type": "object",
        "patternProperties": {".*": {"type": "string"}},
        "properties": {"basic": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["basic"],
    },
    {"type": "object", "patternProperties": {"[a-z]*": {"type": "integer"}, "^x": {"type": "number"}}},
    {"type": "string", "pattern": ".*", "maxLength": 5},
    {"type": "string", "pattern": "(.*)", "format": "date"},
    {"type": "object", "propertyNames": {"pattern": ".*", "maxLength": 3}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("strict", [True, False])
def test_same_grammar_with_the_shortcut_off(
    schema: dict[str, object], canonical: bool, strict: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    on = _grammar(schema, canonical, strict)
    monkeypatch.setattr(strings, "everywhere", lambda p: False)
    off = _grammar(schema, canonical, strict)
    assert on == off
