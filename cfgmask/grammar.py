"""``Grammar``: the user-facing handle on a parsed grammar, whatever its front end."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from . import ir
from .deadline import Deadline
from .deep import retry_deep
from .errors import GrammarError, LimitError

if TYPE_CHECKING:
    from .compile.limits import CompileLimits


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
    def from_gbnf(cls, text: str, start: str = "root", *, limits: CompileLimits | None = None) -> Grammar:
        """A llama.cpp GBNF grammar; ``start`` names the start rule."""
        from .frontends.gbnf import parse_gbnf

        return cls(
            _front_end("GBNF grammar", text, limits, lambda: parse_gbnf(text, start=start)), source=text
        )

    @classmethod
    def from_ebnf(cls, text: str, root: str = "root", *, limits: CompileLimits | None = None) -> Grammar:
        """XGrammar's EBNF dialect (``xgrammar.Grammar.from_ebnf``): GBNF plus its macros
        (``Regex``, ``Substring``, ``TagDispatch``, ``Token``, ...), rule attributes, lookahead
        assertions, escapes and ``{m,-1}``; ``root`` names the start rule.  See docs/ebnf.md."""
        from .frontends.ebnf import parse_ebnf

        return cls(_front_end("EBNF grammar", text, limits, lambda: parse_ebnf(text, root=root)), source=text)

    @classmethod
    def from_lark(cls, text: str, start: str = "start", *, limits: CompileLimits | None = None) -> Grammar:
        """A Lark grammar; strings are in the language iff Lark's Earley parser accepts them."""
        from .frontends.lark import parse_lark

        return cls(
            _front_end("Lark grammar", text, limits, lambda: parse_lark(text, start=start)), source=text
        )

    @classmethod
    def from_regex(
        cls, pattern: str, *, flavor: str = "python", limits: CompileLimits | None = None
    ) -> Grammar:
        """A regular expression matched whole: by default a Python ``re`` pattern with
        ``re.fullmatch`` semantics; ``flavor="ecmascript"`` reads ECMA-262 with the ``u``
        flag (JSON Schema's ``pattern`` dialect: ``\\d`` is ``[0-9]``, ``\\w`` is
        ``[A-Za-z0-9_]``, ``\\p{…}`` property escapes), matched as ``/^(?:pattern)$/u``."""
        from .frontends.regex import parse_regex

        return cls(
            _front_end("regular expression", pattern, limits, lambda: parse_regex(pattern, flavor=flavor)),
            source=pattern,
        )

    @classmethod
    def from_json_schema(
        cls,
        schema: str | dict[str, Any] | bool,
        *,
        canonical: bool = True,
        strict: bool = True,
        whitespace: str = "default",
        limits: CompileLimits | None = None,
        resources: Mapping[str, Any] | None = None,
    ) -> Grammar:
        """A JSON Schema (dict or JSON text).

        ``canonical=True`` (the default) generates one canonical form of each instance, as
        XGrammar, llguidance and OpenAI's Structured Outputs do: properties in the order
        ``properties`` lists them (optional ones may be skipped, never moved), no property or
        item the schema does not list unless it says so (``additionalProperties``,
        ``patternProperties``, ``unevaluatedProperties``, ``items``), no key twice, keys and
        strings without needless escapes, numbers without runaway digits.  Every document it
        allows is valid (the report says ``narrowed``).  ``canonical=False`` is the schema's
        whole language: every key order and every JSON spelling.

        ``strict`` raises on any keyword not enforced soundly (``relaxed`` or ``rejected``; with
        ``canonical=False`` also ``narrowed``); otherwise ``schema_report`` lists each keyword's
        verdict.

        ``resources`` maps URIs to schemas (dicts) that a ``$ref`` may name beyond the
        document: ``{"https://example.com/address.json": {...}}``; nothing is ever fetched.
        The draft meta-schemas are known by their URIs without it.  See docs/json_schema.md."""
        convert = _schema_to_grammar or _import_schema_to_grammar()
        text = schema if isinstance(schema, str) else None

        def run() -> Any:
            return convert(
                schema, strict=strict, whitespace=whitespace, canonical=canonical, resources=resources
            )

        def parse() -> Any:  # call_deep(run) with its first try inline: two frames fewer, cold
            try:
                return convert(
                    schema, strict=strict, whitespace=whitespace, canonical=canonical, resources=resources
                )
            except RecursionError:
                pass
            return retry_deep(run, "parsing the JSON Schema")

        ir_grammar, report = _front_end("JSON Schema", text, limits, parse)
        return cls(ir_grammar, source=text or "", schema_report=report)

    @classmethod
    def structural_tag(
        cls,
        spec: str | dict[str, Any],
        *,
        canonical: bool = True,
        whitespace: str = "default",
        strict: bool = True,
        limits: CompileLimits | None = None,
    ) -> Grammar:
        """An XGrammar structural tag (``{"type": "structural_tag", "format": {...}}``, a bare
        format, or the older ``{"structures", "triggers"}`` form; dict or JSON text).  JSON Schema
        parts take ``canonical``, ``whitespace`` and ``strict`` as ``from_json_schema`` does.
        See :mod:`cfgmask.frontends.structural_tag`."""
        from .frontends.structural_tag import parse_structural_tag

        text = spec if isinstance(spec, str) else None
        ir_grammar = _front_end(
            "structural tag",
            text,
            limits,
            lambda: parse_structural_tag(spec, canonical=canonical, whitespace=whitespace, strict=strict),
        )
        return cls(ir_grammar, source=text or "")

    @classmethod
    def json(cls) -> Grammar:
        """Generic JSON (any value) with bounded whitespace."""
        from .frontends.json_schema import builtin_json

        return cls(builtin_json())

    def __repr__(self) -> str:
        return f"Grammar(start={self.start!r}, rules={len(self.rules)})"


# Imported on first use, then kept here: an import statement run per call (relative, inside the
# function) goes through importlib's Python each time, which a schema never seen before pays cold.
_schema_to_grammar: Callable[..., Any] | None = None
_default_limits: CompileLimits | None = None


def _import_schema_to_grammar() -> Callable[..., Any]:
    global _schema_to_grammar
    from .frontends.json_schema import schema_to_grammar

    _schema_to_grammar = schema_to_grammar
    return schema_to_grammar


def _import_default_limits() -> CompileLimits:
    global _default_limits
    from .compile.limits import DEFAULT_LIMITS

    _default_limits = DEFAULT_LIMITS
    return DEFAULT_LIMITS


def _front_end(what: str, text: str | None, limits: CompileLimits | None, parse: Callable[[], Any]) -> Any:
    """Run a front end under the source-size limit and the compile deadline.  Nesting
    deeper than Python's recursion allows becomes a GrammarError, never a RecursionError."""
    limits = limits or _default_limits or _import_default_limits()
    if text is not None and len(text) > limits.max_grammar_bytes // 4:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limits.max_grammar_bytes:
            raise LimitError(
                f"{what} source is {size} bytes, over max_grammar_bytes={limits.max_grammar_bytes}",
                limit="max_grammar_bytes",
                value=limits.max_grammar_bytes,
            )
    with Deadline(limits.deadline_ms, f"parsing the {what}"):
        try:
            return parse()
        except RecursionError:
            raise GrammarError(f"{what} is nested too deeply to parse") from None
