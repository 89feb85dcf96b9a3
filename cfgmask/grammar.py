"""``Grammar``: the user-facing handle on a parsed grammar, whatever its front end."""

from __future__ import annotations

from typing import Any

from . import ir


class Grammar:
    """A parsed grammar: IR rules plus a start rule.  Build one with a ``from_*`` constructor."""

    def __init__(self, ir_grammar: ir.Grammar, *, source: str = "", schema_report: Any = None) -> None:
        self.ir = ir_grammar
        self.source = source
        self.schema_report = schema_report

    @property
    def start(self) -> str:
        return self.ir.start

    @property
    def rules(self) -> dict[str, ir.Expr]:
        return self.ir.rules

    @classmethod
    def from_gbnf(cls, text: str, start: str = "root") -> Grammar:
        """A llama.cpp GBNF grammar; ``start`` names the start rule."""
        from .gbnf import parse_gbnf

        return cls(parse_gbnf(text, start=start), source=text)

    @classmethod
    def from_lark(cls, text: str, start: str = "start") -> Grammar:
        """A Lark grammar; strings are in the language iff Lark's Earley parser accepts them."""
        from .lark_frontend import parse_lark

        return cls(parse_lark(text, start=start), source=text)

    @classmethod
    def from_regex(cls, pattern: str) -> Grammar:
        """A Python ``re`` pattern with ``re.fullmatch`` semantics."""
        from .regex_frontend import parse_regex

        return cls(parse_regex(pattern), source=pattern)

    @classmethod
    def from_json_schema(
        cls, schema: str | dict[str, Any] | bool, *, strict: bool = True, whitespace: str = "default"
    ) -> Grammar:
        """A JSON Schema (dict or JSON text).  ``strict`` raises on any keyword not enforced
        exactly; otherwise ``schema_report`` lists each keyword's status."""
        from .json_schema import schema_to_grammar

        ir_grammar, report = schema_to_grammar(schema, strict=strict, whitespace=whitespace)
        source = schema if isinstance(schema, str) else ""
        return cls(ir_grammar, source=source, schema_report=report)

    @classmethod
    def json(cls) -> Grammar:
        """Generic JSON (any value) with bounded whitespace."""
        from .json_schema import builtin_json

        return cls(builtin_json())

    def __repr__(self) -> str:
        return f"Grammar(start={self.start!r}, rules={len(self.rules)})"
