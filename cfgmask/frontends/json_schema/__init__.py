"""JSON Schema → IR.

``schema_to_grammar(schema, strict=True, whitespace="default", canonical=True, resources=None)``
returns the grammar and a :class:`SchemaReport` listing every keyword as enforced,
narrowed, relaxed or rejected; in strict mode anything that may allow an invalid
document raises a :class:`~cfgmask.errors.GrammarError` naming the keyword and its
JSON pointer (with ``canonical=False``, so does anything narrowed).

``canonical=True`` generates one canonical form per instance (key order of
``properties``, no unlisted keys or items unless the schema asks for them, no
repeated key, literal keys and strings, bounded number digits); ``canonical=False``
is the whole language of the schema.  See docs/json_schema.md.

The reference semantics is the ``jsonschema`` package validating the
document that ``json.loads`` makes of the text, with ``format`` asserted
(readings in :mod:`cfgmask.frontends.json_schema.formats`).  Drafts 2020-12 (default),
2019-09, draft-07/06/04 (by ``$schema``).

Whitespace policies: ``default`` (per slot: nothing, one space, or one
newline with up to 128 spaces/tabs of indentation: compact JSON, ``json.dumps``
defaults and ``indent=N`` output all pass, runaway whitespace cannot),
``compact`` (none), ``any`` (unbounded RFC 8259 whitespace, also around the
value: lets a weak model emit newlines forever).

Implementation map: :mod:`.walk` (walk, applicators, scalars),
:mod:`.containers` (objects, arrays), :mod:`.strings`
(length, pattern, format), :mod:`.numbers` (numeric ranges),
:mod:`.lexical` (JSON spellings), :mod:`.formats`,
:mod:`.refs`, :mod:`.merge`, :mod:`.disjoint`,
:mod:`.chardfa` (character automata: pattern with length/format, key regions).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ... import ir
from ...errors import GrammarError
from . import _ir_util
from .lexical import whitespace as _whitespace
from .refs import plain_text
from .report import ReportEntry, SchemaReport
from .walk import SchemaCompiler, add_builtin, detect_draft

__all__ = ["ReportEntry", "SchemaReport", "builtin_json", "clear_memos", "schema_to_grammar"]


def clear_memos() -> None:
    """Forget what the front end keeps from schemas it has read: the IR and automata of
    patterns, their products with formats and lengths, number ranges and divisors, keys,
    literals and rule-name stems (``cfgmask.clear_caches()`` calls it, so that a cold compile
    reuses nothing an earlier schema taught).  What depends on no schema stays: the
    metaschemas, the named formats' languages, the JSON spellings of classes, the automaton of
    every string (``strings.everywhere``'s), the rules of any JSON value (``walk.add_builtin``'s)."""
    from . import canonical, containers, lexical, numbers, strings, wellformed

    for memo in (
        strings.pattern_dfa,
        strings._product,
        strings._search_language,
        wellformed._regex_text,
        wellformed.pattern_tree,
        numbers.number_range,
        numbers.multiples_within,
        canonical.canonical_string,
        lexical._encode_pure,
    ):
        memo.cache_clear()
    containers._KEYS.clear()
    _ir_util._STEMS.clear()
    _ir_util.clear_literals()  # JSON's punctuation kept
    _ir_util.release()


def schema_to_grammar(
    schema: dict[str, Any] | bool | str,
    *,
    strict: bool = True,
    whitespace: str = "default",
    canonical: bool = True,
    resources: Mapping[str, Any] | None = None,
) -> tuple[ir.Grammar, SchemaReport]:
    """The IR grammar of the JSON texts valid under ``schema``, and the keyword report.

    ``resources`` maps URIs to schemas that a ``$ref`` may name beyond the document (the
    draft meta-schemas are known without it)."""
    plain = False  # the document surely holds no $id or anchor (refs.plain_text)
    if isinstance(schema, str):
        text = schema
        try:
            schema = _loads(text)
        except json.JSONDecodeError as e:
            raise GrammarError.at(f"schema is not valid JSON: {e.msg}", e.doc, e.pos) from None
        draft = detect_draft(schema)
        plain = plain_text(text, draft)
    elif isinstance(schema, dict):
        _check_json_data(schema)  # a text is JSON by construction; a Python value may not be
        draft = detect_draft(schema)
    else:
        draft = 2020  # detect_draft's answer for a boolean schema
    if not isinstance(schema, (dict, bool)):
        raise GrammarError("a JSON Schema must be an object or a boolean")
    ws = _whitespace(whitespace)  # validates the policy name
    c = SchemaCompiler(schema, strict, whitespace, canonical, resources, plain, draft, ws)
    try:
        return c.compile(), c.rep.report
    finally:
        # its helpers point back at it: without the cycle, the walk's state (a few hundred IR
        # nodes, tuples and dicts a schema) is freed here, not left to the collector, whose
        # passes during the compile that follows it would walk and then clear it
        c.strings = c.containers = None  # type: ignore[assignment]
        _ir_util.release()  # fresh's hint holds this schema's rules: freed with the walk


# json.loads without its three Python frames (loads, decode, raw_decode) and two regex matches:
# the C scanner json.loads calls, on its own decoder with json.loads's defaults
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_SPACE = " \t\n\r"


def _loads(text: str) -> Any:
    """``json.loads(text)``: the same value or the same error."""
    if text and text[-1] not in _SPACE and text[0] not in _SPACE:  # json.dumps output, the common text
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            pass  # not a value: json.loads says where
        else:
            if end == len(text):
                return value
    return json.loads(text)


def builtin_json(whitespace: str = "default") -> ir.Grammar:
    """Any JSON value, with the given (by default bounded) whitespace policy."""
    ws = _whitespace(whitespace)
    rules: dict[str, ir.Expr] = {}
    if ws != ir.EPSILON:
        rules["ws"] = ws
        ws = ir.Ref("ws")
    add_builtin(rules, ws)
    rules["root"] = ir.seq(ws, ir.Ref("json-value"), ws) if whitespace == "any" else ir.Ref("json-value")
    return ir.Grammar(rules, "root", meta={"json": True})


_JSON_SCALARS = (str, int, float, bool, type(None))


def _check_json_data(root: dict[Any, Any]) -> None:
    """Raise a GrammarError naming the first place (a JSON pointer) where ``root`` is not JSON
    data: a key that is not a string, or a value that is not a dict, list, string, number,
    boolean or None (tuples pass as lists).  The front end reads keys as strings throughout."""
    stack: list[tuple[Any, str]] = [(root, "")]
    seen: set[int] = set()
    while stack:
        v, at = stack.pop()
        if isinstance(v, dict):
            if id(v) in seen:
                continue
            seen.add(id(v))
            for k, x in v.items():
                if not isinstance(k, str):
                    raise GrammarError(
                        f"invalid JSON Schema: key {k!r} at {at or '/'} is of type {type(k).__name__}, "
                        "not a string (JSON object keys are strings)"
                    )
                stack.append((x, f"{at}/{k.replace('~', '~0').replace('/', '~1')}"))
        elif isinstance(v, (list, tuple)):
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.extend((x, f"{at}/{i}") for i, x in enumerate(v))
        elif not isinstance(v, _JSON_SCALARS):
            raise GrammarError(
                f"invalid JSON Schema: the value at {at or '/'} is of type {type(v).__name__}, "
                "not JSON data (dict, list, str, int, float, bool or None)"
            )
