"""Tool calling: a structural tag from an OpenAI-style ``tools`` list and ``tool_choice``.

    spec = tool_call_structural_tag(tools, tool_choice="auto", syntax="hermes")
    grammar = tool_call_grammar(tools, tool_choice="auto", syntax="hermes", parallel_tool_calls=False)
    calls = parse_tool_calls(text, syntax="hermes")

``tools`` is what the OpenAI chat API takes: ``[{"type": "function", "function": {"name": ...,
"description": ..., "parameters": <JSON Schema>}}]`` (a tool without ``parameters`` takes an empty
object).  ``tool_choice``:

* ``"auto"``: free text, in which the model may call tools (``triggered_tags``: the call syntax's
  opening string starts a call, whose name must be a tool's and whose arguments must satisfy its
  schema);
* ``"required"``: only tool calls, at least one (``tags_with_separator``);
* ``"none"``: plain text (``any_text``);
* ``{"type": "function", "function": {"name": NAME}}``: only calls of that tool.

``parallel_tool_calls=False`` allows one call at most (``stop_after_first``: no text after it).

Call syntaxes (``syntax``), each as the model family writes it:

* ``hermes`` (Hermes, Qwen 2.5/3): ``<tool_call>\\n{"name": NAME, "arguments": ARGS}\\n</tool_call>``,
  several separated by a newline;
* ``llama3`` (Llama 3.1+ JSON tool calling): ``{"name": NAME, "parameters": ARGS}``, several
  separated by ``; ``;
* ``mistral``: ``[TOOL_CALLS][{"name": NAME, "arguments": ARGS}, ...]``: one list per answer.
  ``[TOOL_CALLS]`` is written as text here; a Mistral vocabulary has it as a special token,
  which a text grammar never allows, so with a real Mistral model this syntax needs the token
  spelled out by the prompt side.

The arguments follow the JSON Schema front end's canonical form (the ``properties`` order,
bounded whitespace), as XGrammar's strict mode and OpenAI's structured outputs do.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import GrammarError
from .grammar import Grammar

__all__ = [
    "SYNTAXES",
    "parse_tool_calls",
    "tool_call_grammar",
    "tool_call_structural_tag",
    "tools_system_prompt",
]

SYNTAXES = ("hermes", "llama3", "mistral")

# syntax -> (trigger, begin before the name, between name and arguments, end, separator)
_FORMS = {
    "hermes": ("<tool_call>", '<tool_call>\n{"name": ', ', "arguments": ', "}\n</tool_call>", "\n"),
    "llama3": ('{"name": ', '{"name": ', ', "parameters": ', "}", "; "),
    "mistral": ('{"name": ', '{"name": ', ', "arguments": ', "}", ", "),
}


def tool_call_structural_tag(
    tools: list[dict[str, Any]],
    tool_choice: str | dict[str, Any] = "auto",
    syntax: str = "hermes",
    parallel_tool_calls: bool = True,
) -> dict[str, Any]:
    """The structural tag (``{"type": "structural_tag", "format": ...}``) for these tools."""
    if syntax not in _FORMS:
        raise GrammarError(f"unknown tool call syntax {syntax!r} (one of {', '.join(SYNTAXES)})")
    functions = _functions(tools)
    if tool_choice == "none" or not functions:
        if tool_choice in ("required",) or isinstance(tool_choice, dict):
            raise GrammarError("tool_choice asks for a tool call but no tools are given")
        return {"type": "structural_tag", "format": {"type": "any_text"}}
    chosen = _choose(functions, tool_choice)
    trigger, head, middle, end, separator = _FORMS[syntax]
    tags = [
        {
            "type": "tag",
            "begin": f"{head}{json.dumps(name)}{middle}",
            "content": {"type": "json_schema", "json_schema": schema},
            "end": end,
        }
        for name, schema in chosen
    ]
    single = not parallel_tool_calls
    calls = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": separator,
        "at_least_one": True,
        "stop_after_first": single,
    }
    if syntax == "mistral":
        block = {"type": "tag", "begin": "[TOOL_CALLS][", "content": calls, "end": "]"}
        if tool_choice != "auto":
            return {"type": "structural_tag", "format": block}
        return {
            "type": "structural_tag",
            "format": {
                "type": "triggered_tags",
                "triggers": ["[TOOL_CALLS]"],
                "tags": [block],
                "stop_after_first": True,
            },
        }
    if tool_choice != "auto":
        return {"type": "structural_tag", "format": calls}
    fmt = {"type": "triggered_tags", "triggers": [trigger], "tags": tags, "stop_after_first": single}
    return {"type": "structural_tag", "format": fmt}


def tool_call_grammar(
    tools: list[dict[str, Any]],
    tool_choice: str | dict[str, Any] = "auto",
    syntax: str = "hermes",
    parallel_tool_calls: bool = True,
    **schema_options: Any,
) -> Grammar:
    """``Grammar.structural_tag`` of :func:`tool_call_structural_tag`; ``schema_options``
    (``canonical``, ``whitespace``, ``strict``) go to the JSON Schema front end."""
    spec = tool_call_structural_tag(tools, tool_choice, syntax, parallel_tool_calls)
    return Grammar.structural_tag(spec, **schema_options)


def parse_tool_calls(text: str, syntax: str = "hermes") -> tuple[str, list[dict[str, Any]]]:
    """``(free text, calls)`` of a text written under :func:`tool_call_grammar`; each call is
    ``{"name": ..., "arguments": {...}}``.  What does not parse as a call stays in the text."""
    if syntax not in _FORMS:
        raise ValueError(f"unknown tool call syntax {syntax!r}")
    opener, skip, closer = {
        "hermes": ("<tool_call>", len("<tool_call>"), "</tool_call>"),
        "llama3": ('{"name": ', 0, ""),
        "mistral": ("[TOOL_CALLS]", len("[TOOL_CALLS]"), ""),
    }[syntax]
    key = "parameters" if syntax == "llama3" else "arguments"
    decoder = json.JSONDecoder()
    free: list[str] = []
    calls: list[dict[str, Any]] = []
    i = 0
    while (j := text.find(opener, i)) >= 0:
        start = j + skip
        start += len(text[start:]) - len(text[start:].lstrip())
        try:
            value, stop = decoder.raw_decode(text, start)
        except ValueError:
            free.append(text[i : j + len(opener)])
            i = j + len(opener)
            continue
        if closer:
            after = text[stop:].lstrip()
            if after.startswith(closer):
                stop = len(text) - len(after) + len(closer)
        free.append(text[i:j])
        items = value if isinstance(value, list) else [value]
        calls += [{"name": c.get("name"), "arguments": c.get(key)} for c in items if isinstance(c, dict)]
        i = stop
    free.append(text[i:])
    return "".join(free), calls


def tools_system_prompt(tools: list[dict[str, Any]], syntax: str = "hermes") -> str:
    """A system message that lists the tools and shows the call syntax, for chat templates
    that do not render ``tools`` themselves."""
    listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    _, head, middle, end, _ = _FORMS[syntax]
    example = f'{head}"NAME"{middle}{{ARGUMENTS}}{end}'
    if syntax == "mistral":
        example = f"[TOOL_CALLS][{example}]"
    return (
        "You are a helpful assistant with access to these tools:\n"
        f"{listed}\n"
        "To call a tool, write exactly:\n"
        f"{example}\n"
        "with the tool's name and a JSON object of its arguments. Answer in plain text when no tool fits."
    )


def _functions(tools: Any) -> list[tuple[str, Any]]:
    if not isinstance(tools, list):
        raise GrammarError("tools must be a list of tool objects", pointer="/")
    out: list[tuple[str, Any]] = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type", "function") != "function" or not isinstance(fn, dict):
            raise GrammarError(
                f"tools/{i}: expected {{'type': 'function', 'function': {{...}}}}", pointer=f"/{i}"
            )
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise GrammarError(
                f"tools/{i}/function/name must be a non-empty string", pointer=f"/{i}/function/name"
            )
        if any(name == n for n, _ in out):
            raise GrammarError(
                f"tools/{i}: the tool name {name!r} is given twice", pointer=f"/{i}/function/name"
            )
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, (dict, bool)):
            raise GrammarError(
                f"tools/{i}/function/parameters must be a JSON Schema", pointer=f"/{i}/function/parameters"
            )
        out.append((name, params))
    return out


def _choose(functions: list[tuple[str, Any]], tool_choice: Any) -> list[tuple[str, Any]]:
    if tool_choice in ("auto", "required"):
        return functions
    if isinstance(tool_choice, str):
        tool_choice = {"type": "function", "function": {"name": tool_choice}}
    fn = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise GrammarError(
            "tool_choice must be 'auto', 'required', 'none', a tool's name or "
            "{'type': 'function', 'function': {'name': ...}}"
        )
    chosen = [(n, s) for n, s in functions if n == name]
    if not chosen:
        raise GrammarError(f"tool_choice names {name!r}, which is not among the tools")
    return chosen
