"""The same structural tags and texts through XGrammar (the ``bench`` extra): agreements counted,
each disagreement listed with its explanation.

Findings (XGrammar 0.2.9):

* **A trigger completed inside a longer pattern's branch is missed.**  XGrammar's free-text
  automaton (``TagDispatch``: a trie of triggers and excludes with failure links) gives a trie
  state no output link, so with triggers ``bc`` and ``abcd`` the text ``abc`` has completed
  ``bc`` but XGrammar stays in the ``abcd`` branch: it accepts ``abc`` as free text and
  ``abcdZW`` as a dispatch on ``abcd``.  Its documentation says matching dispatches when a
  complete trigger appears, so cfgmask dispatches on ``bc`` at ``abc``.  The same holds for an
  exclude completed inside a trigger's branch.
* **A trigger that no tag begins with** makes XGrammar fail an internal check (an empty choice)
  instead of a clear error; cfgmask lets the trigger end the free text with nothing to follow.
* Free text with excludes is over raw bytes in XGrammar (invalid UTF-8 passes); cfgmask's free
  text is valid UTF-8.  Texts here are Python strings, so this one does not show.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import cfgmask

from .engine import EngineRecognizer

xgrammar = pytest.importorskip("xgrammar")
testing = pytest.importorskip("xgrammar.testing")

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _tag(begin: str, content: dict[str, Any], end: str | list[str]) -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


EMPTY = {"type": "const_string", "value": ""}
CALL = _tag("<function=f>", {"type": "json_schema", "json_schema": SCHEMA}, "</function>")
F = '<function=f>{"city": "Paris"}</function>'

CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"type": "const_string", "value": "abc"}, ["abc", "ab", "abcd"]),
    (
        {"type": "json_schema", "json_schema": SCHEMA},
        ['{"city": "x"}', '{"city":"x"}', '{"town": "x"}', "{}"],
    ),
    ({"type": "regex", "pattern": "[A-Z]{3}-[0-9]{4}"}, ["ABC-1234", "AB-1234"]),
    ({"type": "grammar", "grammar": 'root ::= "yes" | "no"'}, ["yes", "no", "maybe"]),
    ({"type": "any_text"}, ["", "free text é"]),
    ({"type": "any_text", "excludes": ["ab"]}, ["aab", "aa", "ba", "b"]),
    (
        {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "END"}]},
        ["xEND", "ENDEND", "END", "EN"],
    ),
    (
        {
            "type": "or",
            "elements": [{"type": "const_string", "value": "a"}, {"type": "regex", "pattern": "b+"}],
        },
        ["a", "bbb", "ab", ""],
    ),
    (
        _tag("<think>", {"type": "any_text"}, "</think>"),
        ["<think>abc</think>", "<think>a</think>b</think>", "<think></think>", "<think>a</thin</think>"],
    ),
    (_tag("[", {"type": "any_text"}, "aa"), ["[aaa", "[aa", "[baa", "[aaaa"]),
    (_tag("<r>", {"type": "any_text"}, ["</r>", "</a>"]), ["<r>x</r>", "<r>x</a>", "<r>x</a></r>"]),
    (
        {"type": "triggered_tags", "triggers": ["<function="], "tags": [CALL]},
        ["", "text", f"a {F} b {F}", "<function=g>", f"{F[:-2]}"],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<function="], "tags": [CALL], "at_least_one": True},
        [F, f"x{F}", f"{F}x", ""],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<function="], "tags": [CALL], "stop_after_first": True},
        ["", "x", f"x{F}", f"{F}{F}", f"{F}x"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [CALL],
            "at_least_one": True,
            "stop_after_first": True,
        },
        [F, f"{F}{F}", ""],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<function="], "tags": [CALL], "excludes": ["<stop>"]},
        ["a<stop>", f"{F}b"],
    ),
    (
        _tag("<a>", {"type": "triggered_tags", "triggers": ["<function="], "tags": [CALL]}, "</a>"),
        [f"<a>{F}</a>", "<a>x</a>", "<a>x</a>y</a>"],
    ),
    (
        {
            "type": "tags_with_separator",
            "tags": [_tag("<i>", {"type": "const_string", "value": "1"}, "</i>")],
            "separator": ",",
        },
        ["", "<i>1</i>", "<i>1</i>,<i>1</i>", "<i>1</i>,"],
    ),
    (
        {
            "type": "tags_with_separator",
            "tags": [_tag("<i>", EMPTY, "</i>")],
            "separator": ";",
            "at_least_one": True,
            "stop_after_first": True,
        },
        ["<i></i>", "", "<i></i>;<i></i>"],
    ),
    ({"type": "optional", "content": {"type": "const_string", "value": "x"}}, ["", "x", "xx"]),
    ({"type": "star", "content": {"type": "const_string", "value": "x"}}, ["", "xxx", "y"]),
    ({"type": "plus", "content": {"type": "const_string", "value": "x"}}, ["", "xxx"]),
    (
        {"type": "repeat", "min": 2, "max": 3, "content": {"type": "const_string", "value": "x"}},
        ["x", "xx", "xxx", "xxxx"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["bc", "abcd"],
            "tags": [_tag("bcX", EMPTY, "Y"), _tag("abcdZ", EMPTY, "W")],
        },
        ["abcXY", "xbcXY", "abc", "abcdZW", "ab"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["bc"],
            "tags": [_tag("bcX", EMPTY, "Y")],
            "excludes": ["abcd"],
        },
        ["abcXY", "abc", "bc", "ab"],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<", "a"], "tags": [_tag("<", EMPTY, ">")]},
        ["", "b<>", "a", "ba", "<>a"],
    ),
]

# (format index, text): why XGrammar's answer differs from cfgmask's.
KNOWN = {
    (23, "abc"): "XGrammar misses the trigger bc completed inside the abcd branch (no output link)",
    (23, "abcdZW"): "the same: cfgmask dispatches on bc at 'abc', as documented, so 'dZW' cannot follow",
    (24, "abc"): "the same: XGrammar takes 'abc' as free text although it has completed the trigger bc",
}


# format index: why XGrammar refuses a spec cfgmask compiles.
REFUSED = {
    25: "a trigger that no tag begins with: XGrammar fails an internal check (an empty choice); "
    "its documentation only asks that each tag match exactly one trigger",
}


def test_structural_tags_agree_with_xgrammar() -> None:
    agree, differ, refused = 0, {}, set()
    for i, (fmt, texts) in enumerate(CASES):
        spec = {"type": "structural_tag", "format": fmt}
        ours = EngineRecognizer(cfgmask.Grammar.structural_tag(spec))
        try:
            theirs = xgrammar.Grammar.from_structural_tag(json.dumps(spec))
        except RuntimeError:
            refused.add(i)
            continue
        for text in texts:
            a = ours.accepts(text.encode())
            b = testing._is_grammar_accept_string(theirs, text)
            if a == b:
                agree += 1
            else:
                differ[i, text] = (a, b)
    print(f"structural tags vs XGrammar: {agree} agree, {len(differ)} differ, {len(refused)} specs refused")
    assert refused == set(REFUSED)
    assert set(differ) == set(KNOWN), {k: differ.get(k) for k in set(differ) ^ set(KNOWN)}
    assert agree >= 70
