"""XGrammar's EBNF macro calls: each one's arguments checked, then its IR.

``MACROS`` maps a macro's name to its handler; the EBNF parser (:mod:`.ebnf`) reads the
arguments into :class:`Value` s and calls the handler with itself, for errors at the right
place and for the helper rules a macro adds.  The languages are :mod:`.ebnf_macros`'.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import ir
from ..errors import GrammarError
from . import ebnf_macros

if TYPE_CHECKING:
    from .ebnf import _EbnfParser


@dataclass(frozen=True)
class Value:
    """One macro argument: kind is ``str``, ``int``, ``bool``, ``name`` or ``tuple``."""

    kind: str
    value: Any
    offset: int


def ecmascript_to_python(pattern: str) -> str:
    """The ECMAScript spellings XGrammar's regexes share with JSON Schema, in Python ``re``
    syntax: ``\\u{1F600}``, ``\\cA``, ``(?<name>...)`` and ``[^]`` (any character).  Everything
    else is passed through; Python then reads it (and rejects what it cannot)."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            m = re.compile(r"u\{([0-9a-fA-F]{1,8})\}").match(pattern, i + 1)
            if m:
                out.append(f"\\U{int(m.group(1), 16):08x}")
                i = m.end()
                continue
            if pattern[i + 1] == "c" and i + 2 < n and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
                out.append(f"\\x{ord(pattern[i + 2]) % 32:02x}")
                i += 3
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            if pattern.startswith("[^]", i):
                out.append(r"[\s\S]")
                i += 3
                continue
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            continue
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def rule_ref(p: _EbnfParser, v: Value, macro: str) -> ir.Expr:
    if v.kind != "name":
        raise p.error(f"{macro}: expected a rule name", v.offset)
    p.ref_offsets.setdefault(v.value, v.offset)
    return ir.Ref(v.value)


def no_named(p: _EbnfParser, macro: str, named: dict[str, Value]) -> None:
    if named:
        key, v = next(iter(named.items()))
        raise p.error(f"{macro}() takes no named argument ({key!r})", v.offset)


def only_named(p: _EbnfParser, macro: str, named: dict[str, Value], allowed: tuple[str, ...]) -> None:
    for key, v in named.items():
        if key not in allowed:
            raise p.error(f"{macro}() has no argument {key!r}", v.offset)


def boolean(p: _EbnfParser, macro: str, named: dict[str, Value], key: str, default: bool) -> bool:
    v = named.get(key)
    if v is None:
        return default
    if v.kind != "bool":
        raise p.error(f"{macro}: {key} must be true or false", v.offset)
    return bool(v.value)


def token_ids(p: _EbnfParser, macro: str, values: list[Value]) -> list[int]:
    out = []
    for v in values:
        if v.kind != "int" or v.value < 0 or v.value > 0xFFFFFFFF:
            raise p.error(f"{macro}: a token id is a non-negative integer", v.offset)
        out.append(v.value)
    return out


def rule_pairs(
    p: _EbnfParser, macro: str, positional: list[Value], first: str
) -> list[tuple[Value, ir.Expr]]:
    out = []
    for v in positional:
        if v.kind != "tuple" or len(v.value) != 2:
            raise p.error(f"{macro}: each positional argument is a pair ({first}, rule)", v.offset)
        out.append((v.value[0], rule_ref(p, v.value[1], macro)))
    return out


def _regex(p: _EbnfParser, at: int, positional: list[Value], named: dict[str, Value]) -> ir.Expr:
    from .regex import regex_to_expr

    only_named(p, "Regex", named, ("json_string", "flags"))
    if len(positional) != 1 or positional[0].kind != "str":
        raise p.error("Regex() takes exactly one pattern string", at)
    flags = re.ASCII | re.DOTALL
    given = named.get("flags")
    if given is not None:
        if given.kind != "str":
            raise p.error("Regex: flags must be a string", given.offset)
        flags = re.ASCII
        for f in given.value:
            if f not in "isu":
                raise p.error(f"Regex: flag {f!r} is not supported (only i, s, u)", given.offset)
            flags |= {"i": re.IGNORECASE, "s": re.DOTALL, "u": 0}[f]
    try:
        expr = regex_to_expr(ecmascript_to_python(positional[0].value), flags)
    except GrammarError as e:
        raise p.error(f"Regex: {e.message}", positional[0].offset) from None
    if boolean(p, "Regex", named, "json_string", False):
        expr = ebnf_macros.json_string_only(expr)
    return expr


def _substring(p: _EbnfParser, at: int, positional: list[Value], named: dict[str, Value]) -> ir.Expr:
    no_named(p, "Substring", named)
    for v in positional:
        if v.kind != "str":
            raise p.error("Substring: every argument is a string", v.offset)
    expr, rules = ebnf_macros.substring([v.value for v in positional], p.helper_base("Substring"))
    p.add_helpers(rules)
    return expr


def _tag_dispatch(p: _EbnfParser, at: int, positional: list[Value], named: dict[str, Value]) -> ir.Expr:
    only_named(p, "TagDispatch", named, ("loop_after_dispatch", "excludes"))
    pairs = []
    for tag, body in rule_pairs(p, "TagDispatch", positional, "tag"):
        if tag.kind != "str" or not tag.value:
            raise p.error("TagDispatch: a tag is a non-empty string", tag.offset)
        pairs.append((tag.value, body))
    excludes: list[str] = []
    if "excludes" in named:
        v = named["excludes"]
        if v.kind != "tuple" or any(x.kind != "str" or not x.value for x in v.value):
            raise p.error("TagDispatch: excludes is a tuple of non-empty strings", v.offset)
        excludes = [x.value for x in v.value]
        for x in excludes:
            for tag, _ in pairs:
                if tag.startswith(x):
                    raise p.error(f"TagDispatch: excluded {x!r} is a prefix of the tag {tag!r}", v.offset)
    loop = boolean(p, "TagDispatch", named, "loop_after_dispatch", True)
    try:
        expr, rules = ebnf_macros.tag_dispatch(
            pairs, p.helper_base("TagDispatch"), loop=loop, excludes=excludes
        )
    except ValueError as e:
        raise p.error(f"TagDispatch is too large: {e}", at) from None
    p.add_helpers(rules)
    return expr


def _token(
    p: _EbnfParser, at: int, positional: list[Value], named: dict[str, Value], negated: bool
) -> ir.Expr:
    macro = "ExcludeToken" if negated else "Token"
    no_named(p, macro, named)
    if not positional:
        raise p.error(f"{macro}() needs at least one token id", at)
    return ir.Token(tuple(sorted(set(token_ids(p, macro, positional)))), negated)


def _token_tag_dispatch(p: _EbnfParser, at: int, positional: list[Value], named: dict[str, Value]) -> ir.Expr:
    macro = "TokenTagDispatch"
    only_named(p, macro, named, ("loop_after_dispatch", "excludes"))
    pairs = [
        (token_ids(p, macro, [tid])[0], body) for tid, body in rule_pairs(p, macro, positional, "token id")
    ]
    excludes: list[int] = []
    if "excludes" in named:
        v = named["excludes"]
        if v.kind != "tuple":
            raise p.error(f"{macro}: excludes is a tuple of token ids", v.offset)
        excludes = token_ids(p, macro, v.value)
        if set(excludes) & {t for t, _ in pairs}:
            raise p.error(f"{macro}: a trigger token id is also excluded", v.offset)
    if not pairs and not excludes:
        raise p.error(f"{macro}() with no trigger and no excluded id (any token) is not supported", at)
    loop = boolean(p, macro, named, "loop_after_dispatch", True)
    expr, rules = ebnf_macros.token_tag_dispatch(pairs, p.helper_base(macro), loop=loop, excludes=excludes)
    p.add_helpers(rules)
    return expr


MACROS: dict[str, Callable[..., ir.Expr]] = {
    "Regex": _regex,
    "Substring": _substring,
    "TagDispatch": _tag_dispatch,
    "Token": lambda p, at, a, n: _token(p, at, a, n, False),
    "ExcludeToken": lambda p, at, a, n: _token(p, at, a, n, True),
    "TokenTagDispatch": _token_tag_dispatch,
}
