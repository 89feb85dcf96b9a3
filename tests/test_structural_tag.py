"""Structural tags (XGrammar's ``response_format`` of type ``structural_tag``).

Each format type with strings accepted and rejected as XGrammar's documentation says
(docs/structural_tag/structural_tag.md; the examples are ours), checked three ways: the
pure-Python reference matcher over the IR, the C engine, and an independent string-level
reading of the spec (``structural_oracle``).  Malformed specs name their JSON pointer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import cfgmask
from cfgmask import GrammarError

from .engine import EngineRecognizer
from .helpers import check
from .structural_oracle import accepts as oracle_accepts


def _grammar(fmt: dict[str, Any]) -> cfgmask.Grammar:
    return cfgmask.Grammar.structural_tag({"type": "structural_tag", "format": fmt})


def _check(fmt: dict[str, Any], accepts: list[str], rejects: list[str], oracle: bool = True) -> None:
    g = _grammar(fmt)
    check(g.ir, accepts, rejects)
    check(g.ir, accepts, rejects, using=EngineRecognizer)
    if not oracle:
        return
    wrong = [s for s in accepts if not oracle_accepts(fmt, s)] + [
        s for s in rejects if oracle_accepts(fmt, s)
    ]
    assert not wrong, f"the oracle disagrees with the table on {wrong!r}"


WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}},
    "required": ["city"],
    "additionalProperties": False,
}


def _call(name: str, schema: dict[str, Any] = WEATHER) -> dict[str, Any]:
    return {
        "type": "tag",
        "begin": f"<function={name}>",
        "content": {"type": "json_schema", "json_schema": schema},
        "end": "</function>",
    }


# --------------------------------------------------------------------------- primitive formats


def test_const_string() -> None:
    _check({"type": "const_string", "value": "Let's go."}, ["Let's go."], ["", "Let's go", "Let's go.."])
    _check({"type": "const_string", "value": ""}, [""], ["a"])


def test_json_schema() -> None:
    fmt = {"type": "json_schema", "json_schema": WEATHER}
    _check(fmt, ['{"city": "Paris"}', '{"city":"Paris"}'], ['{"town": "Paris"}', '{"city": 3}', "", "{}"])


def test_grammar_is_ebnf_with_root() -> None:
    _check(
        {"type": "grammar", "grammar": 'root ::= ("yes" | "no") "!"?'},
        ["yes", "no!"],
        ["maybe", "yes!!", ""],
        oracle=False,
    )


def test_grammar_in_lark_syntax() -> None:
    g = _grammar({"type": "grammar", "grammar": 'start: "x" NUM\nNUM: /[0-9]+/', "syntax": "lark"})
    check(g.ir, ["x1", "x42"], ["x", "1"], using=EngineRecognizer)


def test_regex() -> None:
    _check(
        {"type": "regex", "pattern": "[A-Z]{3}-[0-9]{4}"}, ["ABC-1234"], ["AB-1234", "ABC-123", "abc-1234"]
    )


def test_any_text() -> None:
    _check({"type": "any_text"}, ["", "anything at all, é😀", "</think>"], [])
    _check(
        {"type": "any_text", "excludes": ["<function=", "STOP"]},
        ["", "plain text", "<function", "STO", "ST0P", "<functionSTO"],
        ["<function=", "a<function=b", "xSTOPx", "STOP"],
    )


def test_any_text_max_chars() -> None:
    _check({"type": "any_text", "max_chars": 3}, ["", "abc", "é😀x"], ["abcd"])


def test_free_text_is_valid_utf8() -> None:
    g = _grammar({"type": "any_text", "excludes": ["x"]})
    check(g.ir, ["é"], [b"\xff", b"\xc3", b"\xed\xa0\x80"], using=EngineRecognizer)


# --------------------------------------------------------------------------- composition


def test_sequence() -> None:
    fmt = {
        "type": "sequence",
        "elements": [{"type": "const_string", "value": "Answer: "}, {"type": "regex", "pattern": "[0-9]+"}],
    }
    _check(fmt, ["Answer: 42"], ["Answer: ", "42", "Answer:42"])


def test_or() -> None:
    fmt = {
        "type": "or",
        "elements": [{"type": "const_string", "value": "yes"}, {"type": "const_string", "value": "no"}],
    }
    _check(fmt, ["yes", "no"], ["", "yesno", "maybe"])


def test_optional_plus_star_repeat() -> None:
    item = {"type": "const_string", "value": "ab"}
    _check({"type": "optional", "content": item}, ["", "ab"], ["abab"])
    _check({"type": "plus", "content": item}, ["ab", "ababab"], ["", "aba"])
    _check({"type": "star", "content": item}, ["", "abab"], ["a"])
    _check({"type": "repeat", "min": 1, "max": 3, "content": item}, ["ab", "ababab"], ["", "abababab"])
    _check({"type": "repeat", "min": 2, "max": -1, "content": item}, ["abab", "ababababab"], ["ab"])


def test_any_text_in_a_sequence_without_tag_is_not_stopped() -> None:
    """No enclosing tag, so nothing is excluded: the text may contain what follows it."""
    fmt = {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "END"}]}
    _check(fmt, ["END", "xEND", "ENDEND"], ["", "ENDx"])


# --------------------------------------------------------------------------- tags


def test_tag_stops_free_text_at_its_end() -> None:
    fmt = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}
    _check(
        fmt,
        ["<think></think>", "<think>step 1 </thin </think>", "<think><think></think>"],
        ["<think>a</think>b</think>", "<think>a", "a</think>", "<think></think>x"],
    )


def test_tag_with_several_ends() -> None:
    fmt = {
        "type": "tag",
        "begin": "<response>",
        "content": {"type": "any_text"},
        "end": ["</response>", "</answer>"],
    }
    _check(
        fmt,
        ["<response>ok</response>", "<response>ok</answer>"],
        ["<response>a</answer>b</response>", "<response>ok</other>"],
    )


def test_nearest_enclosing_tag_end_only() -> None:
    inner = {"type": "tag", "begin": "<b>", "content": {"type": "any_text"}, "end": "</b>"}
    outer = {"type": "tag", "begin": "<a>", "content": inner, "end": "</a>"}
    # the inner text excludes only </b>: </a> may appear inside it
    _check(outer, ["<a><b>x</a>y</b></a>"], ["<a><b>x</b>y</b></a>"])


# --------------------------------------------------------------------------- triggered tags

TRIGGERED = {
    "type": "triggered_tags",
    "triggers": ["<function="],
    "tags": [_call("get_weather"), _call("get_time")],
}
W = '<function=get_weather>{"city": "Paris"}</function>'
T = '<function=get_time>{"city": "Oslo"}</function>'


def test_triggered_tags() -> None:
    _check(
        TRIGGERED,
        ["", "no call at all", f"I will call a tool. {W}", f"{W}{T}", f"a{W}b{T}c", "ends inside <function"],
        [
            "<function=",
            "text <function=get_news>{}</function>",
            '<function=get_weather>{"town": "Paris"}</function>',
            f"{W[:-1]}",
        ],
    )


def test_triggered_tags_at_least_one() -> None:
    fmt = {**TRIGGERED, "at_least_one": True}
    _check(fmt, [W, f"{W} then text {T}", f"{W}tail"], ["", "text first " + W, "no call"])


def test_triggered_tags_stop_after_first() -> None:
    fmt = {**TRIGGERED, "stop_after_first": True}
    _check(fmt, ["", "just text", f"text {W}"], [f"{W}{T}", f"{W} tail"])


def test_triggered_tags_exactly_one() -> None:
    fmt = {**TRIGGERED, "at_least_one": True, "stop_after_first": True}
    _check(fmt, [W, T], ["", f"x{W}", f"{W}{T}", f"{W}x"])


def test_triggered_tags_excludes() -> None:
    fmt = {**TRIGGERED, "excludes": ["<|end|>"]}
    _check(fmt, ["text", f"a{W}"], ["a<|end|>", f"{W}<|end|>"])


def test_triggered_tags_inside_a_tag_stop_at_its_end() -> None:
    fmt = {"type": "tag", "begin": "<answer>", "content": TRIGGERED, "end": "</answer>"}
    _check(
        fmt,
        ["<answer>text</answer>", f"<answer>{W} ok</answer>"],
        ["<answer>a</answer>b</answer>", f"<answer>{W}"],
    )


def test_first_complete_trigger_dispatches() -> None:
    """Documented: when a complete trigger appears, matching dispatches.  With triggers "bc" and
    "abcd", the text "abc" has completed "bc" (XGrammar's automaton misses it: see the
    differential test)."""
    tag_bc = {"type": "tag", "begin": "bcX", "content": {"type": "const_string", "value": ""}, "end": "Y"}
    tag_abcd = {"type": "tag", "begin": "abcdZ", "content": {"type": "const_string", "value": ""}, "end": "W"}
    fmt = {"type": "triggered_tags", "triggers": ["bc", "abcd"], "tags": [tag_bc, tag_abcd]}
    _check(fmt, ["abcXY", "ab", "abcdZW"[:2]], ["abc", "abcdZW"])


def test_trigger_without_tags_stops_the_text() -> None:
    """A complete trigger dispatches even when no tag begins with it: nothing can follow."""
    tag = {"type": "tag", "begin": "<", "content": {"type": "const_string", "value": ""}, "end": ">"}
    fmt = {"type": "triggered_tags", "triggers": ["<", "a"], "tags": [tag]}
    _check(fmt, ["", "b<>", "<><>"], ["a", "ba", "<>a"])


# --------------------------------------------------------------------------- tags with separator

ITEM = {"type": "tag", "begin": "<i>", "content": {"type": "regex", "pattern": "[0-9]"}, "end": "</i>"}


def test_tags_with_separator() -> None:
    fmt = {"type": "tags_with_separator", "tags": [ITEM], "separator": ","}
    _check(fmt, ["", "<i>1</i>", "<i>1</i>,<i>2</i>,<i>3</i>"], ["<i>1</i>,", ",<i>1</i>", "x<i>1</i>"])
    _check({**fmt, "at_least_one": True}, ["<i>1</i>", "<i>1</i>,<i>2</i>"], [""])
    _check({**fmt, "stop_after_first": True}, ["", "<i>1</i>"], ["<i>1</i>,<i>2</i>"])


def test_dispatch() -> None:
    fmt = {
        "type": "dispatch",
        "rules": [["<n>", {"type": "regex", "pattern": "[0-9]+;"}]],
        "excludes": ["</end>"],
    }
    g = _grammar(fmt)
    check(g.ir, ["", "a<n>12; b<n>3;"], ["<n>x;", "a</end>"], using=EngineRecognizer)
    once = _grammar({**fmt, "loop": False})
    check(once.ir, ["a<n>1;"], ["a<n>1;b"], using=EngineRecognizer)


# --------------------------------------------------------------------------- spec forms


def test_legacy_structures_and_triggers() -> None:
    spec = {
        "type": "structural_tag",
        "structures": [{"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"}],
        "triggers": ["<function="],
    }
    g = cfgmask.Grammar.structural_tag(spec)
    check(g.ir, ["", f"x {W} y"], [T], using=EngineRecognizer)


def test_json_text_and_bare_format() -> None:
    fmt = {"type": "const_string", "value": "hi"}
    for spec in (json.dumps({"type": "structural_tag", "format": fmt}), fmt):
        check(cfgmask.Grammar.structural_tag(spec).ir, ["hi"], ["h"], using=EngineRecognizer)


# --------------------------------------------------------------------------- errors

ERRORS: list[tuple[Any, str, str]] = [
    ([1], "/", "must be a JSON object"),
    ({"type": "structural_tag"}, "/", "needs a 'format'"),
    ({"format": {"type": "nope"}, "type": "structural_tag"}, "/format/type", "unknown format type 'nope'"),
    ({"type": "const_string"}, "/", "missing 'value'"),
    ({"type": "const_string", "value": 3}, "/value", "must be a string"),
    ({"type": "sequence", "elements": []}, "/elements", "must not be empty"),
    (
        {"type": "or", "elements": [{"type": "regex", "pattern": "("}]},
        "/elements/0/pattern",
        "structural tag",
    ),
    ({"type": "tag", "begin": "a", "content": {"type": "any_text"}}, "/", "missing 'end'"),
    ({"type": "tag", "begin": "a", "content": {"type": "any_text"}, "end": []}, "/end", "non-empty array"),
    (
        {"type": "tag", "begin": {"type": "token", "token": 5}, "content": {"type": "any_text"}, "end": "b"},
        "/begin",
        "token",
    ),
    ({"type": "triggered_tags", "triggers": [], "tags": [ITEM]}, "/triggers", "must not be empty"),
    ({"type": "triggered_tags", "triggers": [""], "tags": [ITEM]}, "/triggers/0", "non-empty strings"),
    ({"type": "triggered_tags", "triggers": ["<x"], "tags": [ITEM]}, "/tags/0/begin", "no trigger"),
    (
        {"type": "triggered_tags", "triggers": ["<", "<i"], "tags": [ITEM]},
        "/tags/0/begin",
        "several triggers",
    ),
    (
        {"type": "triggered_tags", "triggers": ["<i"], "tags": [ITEM], "at_least_one": 1},
        "/at_least_one",
        "boolean",
    ),
    ({"type": "tags_with_separator", "tags": [ITEM]}, "/", "missing 'separator'"),
    ({"type": "any_text", "max_tokens": 5}, "/max_tokens", "not supported"),
    ({"type": "any_tokens"}, "/", "token-level"),
    ({"type": "json_schema", "json_schema": WEATHER, "style": "qwen_xml"}, "/style", "not supported"),
    ({"type": "json_schema", "json_schema": {"type": "strin"}}, "/json_schema", "structural tag"),
    ({"type": "grammar", "grammar": "root ::= x"}, "/grammar", "structural tag"),
    ({"type": "repeat", "min": 3, "max": 1, "content": ITEM}, "/max", "at least min"),
]


@pytest.mark.parametrize(("fmt", "pointer", "message"), ERRORS)
def test_malformed_specs_name_their_json_pointer(fmt: Any, pointer: str, message: str) -> None:
    spec = (
        fmt
        if not isinstance(fmt, dict) or fmt.get("type") == "structural_tag"
        else {"type": "structural_tag", "format": fmt}
    )
    if isinstance(fmt, dict) and fmt.get("type") != "structural_tag" and pointer.startswith("/"):
        pointer = "/format" + (pointer if pointer != "/" else "")
    with pytest.raises(GrammarError) as info:
        cfgmask.Grammar.structural_tag(spec)
    assert info.value.pointer is not None and info.value.pointer.startswith(pointer), (
        info.value.pointer,
        pointer,
    )
    assert message in str(info.value)


def test_invalid_json_text_has_a_caret() -> None:
    with pytest.raises(GrammarError) as info:
        cfgmask.Grammar.structural_tag('{"type": "structural_tag", "format": }')
    assert info.value.line == 1 and "^" in str(info.value)
