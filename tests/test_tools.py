"""cfgmask.tools: structural tags from OpenAI-style tools, by tool_choice, parallel calls and syntax."""

from __future__ import annotations

import json

import pytest

from cfgmask import GrammarError
from cfgmask.tools import parse_tool_calls, tool_call_grammar

from .engine import EngineRecognizer
from .helpers import check

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "ping"}},
]


def hermes(name: str, args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


W = hermes("get_weather", {"city": "Oslo"})
P = hermes("ping", {})


def test_hermes_auto() -> None:
    g = tool_call_grammar(TOOLS)
    check(
        g.ir,
        ["", "Just text.", f"Let me check. {W}", f"{W}\n{P}", f"{W} and {P} done"],
        using=EngineRecognizer,
    )
    check(
        g.ir,
        [],
        [hermes("get_weather", {"town": "Oslo"}), hermes("nope", {}), W[:-3]],
        using=EngineRecognizer,
    )


def test_hermes_auto_single_call() -> None:
    g = tool_call_grammar(TOOLS, parallel_tool_calls=False)
    check(g.ir, ["text", f"text {W}"], [f"{W}\n{P}", f"{W} more text"], using=EngineRecognizer)


def test_required_is_calls_only() -> None:
    g = tool_call_grammar(TOOLS, "required")
    check(g.ir, [W, f"{W}\n{P}"], ["", "text", f"x{W}"], using=EngineRecognizer)
    one = tool_call_grammar(TOOLS, "required", parallel_tool_calls=False)
    check(one.ir, [W, P], [f"{W}\n{P}"], using=EngineRecognizer)


def test_named_choice() -> None:
    for choice in ({"type": "function", "function": {"name": "ping"}}, "ping"):
        g = tool_call_grammar(TOOLS, choice, parallel_tool_calls=False)
        check(g.ir, [P], [W, "", "text"], using=EngineRecognizer)


def test_none_is_plain_text() -> None:
    check(tool_call_grammar(TOOLS, "none").ir, ["", "anything <tool_call>"], [], using=EngineRecognizer)


def test_llama3_syntax() -> None:
    call = '{"name": "get_weather", "parameters": {"city": "Oslo"}}'
    g = tool_call_grammar(TOOLS, "required", syntax="llama3")
    check(
        g.ir, [call, f'{call}; {{"name": "ping", "parameters": {{}}}}'], [f"{call};"], using=EngineRecognizer
    )
    auto = tool_call_grammar(TOOLS, syntax="llama3")
    check(auto.ir, ["text", f"text {call}"], ['text {"name": "x"}'], using=EngineRecognizer)


def test_mistral_syntax() -> None:
    calls = (
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}, '
        '{"name": "ping", "arguments": {}}]'
    )
    g = tool_call_grammar(TOOLS, syntax="mistral")
    check(
        g.ir, ["text", calls, f"text {calls}"], [f"{calls}{calls}", "[TOOL_CALLS][]"], using=EngineRecognizer
    )
    one = tool_call_grammar(TOOLS, "required", syntax="mistral", parallel_tool_calls=False)
    check(one.ir, [calls.split(", {")[0] + "]"], [calls, "text"], using=EngineRecognizer)


@pytest.mark.parametrize("syntax", ["hermes", "llama3", "mistral"])
def test_parse_tool_calls(syntax: str) -> None:
    key = "parameters" if syntax == "llama3" else "arguments"
    body = {"name": "get_weather", key: {"city": "Oslo"}}
    text = {
        "hermes": f"Sure. <tool_call>\n{json.dumps(body)}\n</tool_call>",
        "llama3": f"Sure. {json.dumps(body)}",
        "mistral": f"Sure. [TOOL_CALLS][{json.dumps(body)}]",
    }[syntax]
    free, calls = parse_tool_calls(text, syntax)
    assert free.strip() == "Sure."
    assert calls == [{"name": "get_weather", "arguments": {"city": "Oslo"}}]


@pytest.mark.parametrize(
    ("tools", "choice", "message"),
    [
        ("x", "auto", "must be a list"),
        ([{"type": "function"}], "auto", "tools/0"),
        ([{"type": "function", "function": {"name": ""}}], "auto", "non-empty string"),
        (TOOLS + TOOLS[:1], "auto", "given twice"),
        (TOOLS, "get_news", "not among the tools"),
        ([], "required", "no tools"),
    ],
)
def test_bad_tools(tools: object, choice: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        tool_call_grammar(tools, choice)  # type: ignore[arg-type]


def test_unknown_syntax() -> None:
    with pytest.raises(GrammarError, match="unknown tool call syntax"):
        tool_call_grammar(TOOLS, syntax="gpt")
