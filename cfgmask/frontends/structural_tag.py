"""XGrammar's structural tags (the ``response_format`` of type ``structural_tag``) -> IR.

A structural tag is a JSON tree of formats, each matching a chunk of text:

* ``const_string`` (``value``), ``json_schema`` (``json_schema``, style ``json`` only),
  ``grammar`` (``grammar``: GBNF/EBNF text, or Lark with ``"syntax": "lark"``), ``regex``
  (``pattern``, Python ``re`` syntax), ``any_text`` (``excludes``, ``max_chars``);
* ``sequence`` and ``or`` (``elements``, at least one), ``optional``/``plus``/``star``
  (``content``), ``repeat`` (``min``, ``max``; ``-1`` is unbounded);
* ``tag``: ``begin`` + ``content`` + ``end`` (a string or a non-empty list of strings);
* ``triggered_tags``: free text; when a trigger is complete, one of the tags whose ``begin``
  starts with it (each tag's ``begin`` starts with exactly one trigger), then free text again.
  ``at_least_one``: the output starts with a tag; ``stop_after_first``: nothing follows the
  first tag; both: exactly one tag.  ``excludes``: strings the free text may not contain;
* ``tags_with_separator``: ``tag (separator tag)*``, empty too unless ``at_least_one``, one tag
  at most with ``stop_after_first``;
* ``dispatch``: free text where ``rules`` ``[pattern, format]`` dispatch like triggers (``loop``,
  ``excludes``).

Free text (``any_text``, and the text of ``triggered_tags``) never contains the ``end`` strings
of the nearest enclosing ``tag``: that is how ``tag("<think>", any_text, "</think>")`` stops at
``</think>`` (XGrammar's automatic end detection).  See :mod:`.free_text` for the automaton.

Accepted as the whole spec: ``{"type": "structural_tag", "format": {...}}``, a bare format, or
the older ``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers"}``
(``triggered_tags`` over ``json_schema`` tags, as vLLM sent it).  JSON text or a dict.

Not supported, with a GrammarError naming the JSON pointer: token-level formats (``token``,
``exclude_token``, ``any_tokens``, ``token_triggered_tags``, ``token_dispatch``), a token
``begin``/``end``, ``any_text.max_tokens`` (a count of tokens is not a property of text),
``max_chars`` together with excluded strings, JSON ``style`` other than ``json`` and ``any_order``.

JSON Schema content uses the JSON Schema front end's options (canonical form, bounded whitespace,
strict: see ``Grammar.from_json_schema``); XGrammar allows any whitespace there.
"""

from __future__ import annotations

import json
from typing import Any

from .. import ir
from ..errors import GrammarError
from .free_text import free_text

__all__ = ["parse_structural_tag"]

_TOKEN_LEVEL = ("token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch")


def parse_structural_tag(
    spec: str | dict[str, Any],
    *,
    canonical: bool = True,
    whitespace: str = "default",
    strict: bool = True,
) -> ir.Grammar:
    """The IR grammar of a structural tag (dict or JSON text); raises GrammarError."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise GrammarError.at(f"structural tag is not valid JSON: {e.msg}", e.doc, e.pos) from None
    b = _Builder(canonical=canonical, whitespace=whitespace, strict=strict)
    top = b.top_format(spec)
    b.rules["root"] = b.format(top.value, top.path, ())
    return ir.Grammar(b.rules, "root")


class _At:
    """A JSON value and its JSON pointer."""

    __slots__ = ("path", "value")

    def __init__(self, value: Any, path: str) -> None:
        self.value = value
        self.path = path


def _fail(path: str, message: str) -> GrammarError:
    return GrammarError(f"structural tag {path or '/'}: {message}", pointer=path or "/")


def _escape(key: str | int) -> str:
    return "/" + str(key).replace("~", "~0").replace("/", "~1")


class _Builder:
    def __init__(self, *, canonical: bool, whitespace: str, strict: bool) -> None:
        self.rules: dict[str, ir.Expr] = {}
        self.count = 0
        self.schema_opts: dict[str, Any] = {
            "canonical": canonical,
            "whitespace": whitespace,
            "strict": strict,
        }
        self.embedded: dict[tuple[str, str], ir.Ref] = {}

    # -- rule names --------------------------------------------------------------------------

    def reserve(self, hint: str) -> str:
        self.count += 1
        return f"st{self.count}-{hint}"

    def define(self, name: str, body: ir.Expr) -> ir.Ref:
        self.rules[name] = body
        return ir.Ref(name)

    def new_rule(self, hint: str, body: ir.Expr) -> ir.Ref:
        return self.define(self.reserve(hint), body)

    # -- the JSON shape ----------------------------------------------------------------------

    def top_format(self, spec: Any) -> _At:
        if not isinstance(spec, dict):
            raise _fail("", "a structural tag must be a JSON object")
        if spec.get("type") == "structural_tag" or "structures" in spec:
            if "format" in spec:
                return _At(spec["format"], "/format")
            if "structures" in spec:
                return _At(self.legacy(spec), "")
            raise _fail("", "a structural tag needs a 'format' (or the older 'structures' and 'triggers')")
        return _At(spec, "")

    def legacy(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The older form as the ``triggered_tags`` format it stands for."""
        structures = self.field(spec, "", "structures", list)
        triggers = self.field(spec, "", "triggers", list)
        tags = []
        for i, s in enumerate(structures):
            where = f"/structures/{i}"
            if not isinstance(s, dict):
                raise _fail(where, "a structure must be an object with 'begin', 'schema' and 'end'")
            schema = s.get("schema", s.get("parameters"))
            if schema is None:
                raise _fail(where, "a structure needs a 'schema'")
            tags.append(
                {
                    "type": "tag",
                    "begin": self.field(s, where, "begin", str),
                    "content": {"type": "json_schema", "json_schema": schema},
                    "end": self.field(s, where, "end", str),
                }
            )
        return {"type": "triggered_tags", "triggers": triggers, "tags": tags}

    def field(
        self, obj: dict[str, Any], path: str, key: str, kind: type | tuple[type, ...], default: Any = ...
    ) -> Any:
        if key not in obj:
            if default is ...:
                raise _fail(path, f"missing '{key}'")
            return default
        value = obj[key]
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, (int, type(None))))
        if not ok:
            names = {
                str: "a string",
                list: "an array",
                bool: "a boolean",
                int: "an integer",
                dict: "an object",
            }
            want = names.get(kind, "an integer or null") if isinstance(kind, type) else "an integer or null"
            raise _fail(path + _escape(key), f"'{key}' must be {want}")
        return value

    def strings(self, obj: dict[str, Any], path: str, key: str, *, non_empty_items: bool) -> list[str]:
        items = self.field(obj, path, key, list, [])
        for i, s in enumerate(items):
            if not isinstance(s, str) or (non_empty_items and not s):
                raise _fail(f"{path}/{key}/{i}", f"'{key}' must hold non-empty strings")
        return list(items)

    # -- formats -----------------------------------------------------------------------------

    def format(self, node: Any, path: str, ends: tuple[str, ...]) -> ir.Expr:
        """``ends``: the end strings of the nearest enclosing tag (free text may not contain them)."""
        if not isinstance(node, dict):
            raise _fail(path, "a format must be a JSON object")
        kind = node.get("type")
        if not isinstance(kind, str):
            raise _fail(path + "/type", "a format needs a 'type' string")
        method = getattr(self, "f_" + kind, None)
        if method is None:
            if kind in _TOKEN_LEVEL:
                raise _fail(path, f"the token-level format '{kind}' is not supported (text formats only)")
            raise _fail(path + "/type", f"unknown format type '{kind}'")
        return method(node, path, ends)  # type: ignore[no-any-return]

    def f_const_string(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        return ir.literal(self.field(node, path, "value", str))

    def f_json_schema(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        schema = self.field(node, path, "json_schema", (dict, bool))
        style = self.field(node, path, "style", str, "json")
        if style != "json":
            raise _fail(path + "/style", f"style '{style}' is not supported (only 'json')")
        if self.field(node, path, "any_order", bool, False):
            raise _fail(
                path + "/any_order", "any_order is not supported (properties follow the schema's order)"
            )
        self.field(node, path, "max_whitespace_cnt", (int, type(None)), None)
        from .json_schema import schema_to_grammar

        return self.embed(
            "json",
            json.dumps(schema, sort_keys=True),
            path + "/json_schema",
            lambda: schema_to_grammar(schema, **self.schema_opts)[0],
        )

    def f_grammar(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        text = self.field(node, path, "grammar", str)
        syntax = self.field(node, path, "syntax", str, "ebnf")
        if not text:
            raise _fail(path + "/grammar", "'grammar' must not be empty")
        if syntax == "lark":
            from .lark import parse_lark

            return self.embed("lark", text, path + "/grammar", lambda: parse_lark(text))
        if syntax != "ebnf":
            raise _fail(path + "/syntax", f"syntax must be 'ebnf' or 'lark', not '{syntax}'")
        from .ebnf import parse_ebnf  # XGrammar's EBNF dialect (a GBNF superset; root starts it)

        return self.embed("ebnf", text, path + "/grammar", lambda: parse_ebnf(text))

    def f_regex(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        pattern = self.field(node, path, "pattern", str)
        if not pattern:
            raise _fail(path + "/pattern", "'pattern' must not be empty")
        from .regex import parse_regex

        return self.embed("regex", pattern, path + "/pattern", lambda: parse_regex(pattern))

    def f_any_text(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        excludes = self.strings(node, path, "excludes", non_empty_items=True)
        if self.field(node, path, "max_tokens", (int, type(None)), None) is not None:
            raise _fail(
                path + "/max_tokens", "max_tokens is not supported (a token count is not a property of text)"
            )
        max_chars = self.field(node, path, "max_chars", (int, type(None)), None)
        stops = sorted(set(excludes) | {e for e in ends if e})
        if max_chars is not None:
            if max_chars < 0:
                raise _fail(path + "/max_chars", "max_chars must be 0 or more")
            if stops:
                raise _fail(path + "/max_chars", "max_chars together with excluded strings is not supported")
            return ir.Repeat(ir.char_class([(0, ir.MAX_CODE_POINT)]), 0, max_chars)
        if not stops:
            return ir.Repeat(ir.char_class([(0, ir.MAX_CODE_POINT)]), 0, None)
        return free_text({}, stops, False, self.define, self.reserve)

    def elements(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> list[ir.Expr]:
        items = self.field(node, path, "elements", list)
        if not items:
            raise _fail(path + "/elements", "'elements' must not be empty")
        return [self.format(x, f"{path}/elements/{i}", ends) for i, x in enumerate(items)]

    def f_sequence(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        return ir.seq(*self.elements(node, path, ends))

    def f_or(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        return self.new_rule("or", ir.alt(*self.elements(node, path, ends)))

    def content(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        if "content" not in node:
            raise _fail(path, "missing 'content'")
        return self.format(node["content"], path + "/content", ends)

    def f_optional(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        return ir.Repeat(self.content(node, path, ends), 0, 1)

    def f_star(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        return ir.Repeat(self.content(node, path, ends), 0, None)

    def f_plus(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        return ir.Repeat(self.content(node, path, ends), 1, None)

    def f_repeat(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        lo = self.field(node, path, "min", int)
        hi = self.field(node, path, "max", int)
        if lo < 0:
            raise _fail(path + "/min", "min must be 0 or more")
        if hi < -1 or (hi >= 0 and hi < lo):
            raise _fail(path + "/max", "max must be -1 (unbounded) or at least min")
        return ir.Repeat(self.content(node, path, ends), lo, None if hi == -1 else hi)

    # -- tags --------------------------------------------------------------------------------

    def tag_parts(self, node: Any, path: str) -> tuple[str, ir.Expr, ir.Expr]:
        """(begin, content, end) of a ``tag`` (its ``type`` may be left out inside tag lists)."""
        if not isinstance(node, dict):
            raise _fail(path, "a tag must be a JSON object")
        if node.get("type", "tag") != "tag":
            raise _fail(path + "/type", "expected a format of type 'tag'")
        begin = node.get("begin")
        if isinstance(begin, dict):
            raise _fail(path + "/begin", "a token begin is not supported (text formats only)")
        begin = self.field(node, path, "begin", str)
        end = node.get("end")
        if isinstance(end, str):
            end_strings = [end]
        elif isinstance(end, list) and end and all(isinstance(e, str) for e in end):
            end_strings = list(end)
        elif isinstance(end, dict):
            raise _fail(path + "/end", "a token end is not supported (text formats only)")
        elif end is None:
            raise _fail(path, "missing 'end'")
        else:
            raise _fail(path + "/end", "'end' must be a string or a non-empty array of strings")
        content = self.content(node, path, tuple(end_strings))
        return begin, content, ir.alt(*(ir.literal(e) for e in end_strings))

    def f_tag(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        begin, content, end = self.tag_parts(node, path)
        return self.new_rule("tag", ir.seq(ir.literal(begin), content, end))

    def tag_list(self, node: dict[str, Any], path: str) -> list[tuple[str, ir.Expr, ir.Expr]]:
        tags = self.field(node, path, "tags", list)
        if not tags:
            raise _fail(path + "/tags", "'tags' must not be empty")
        return [self.tag_parts(t, f"{path}/tags/{i}") for i, t in enumerate(tags)]

    def f_triggered_tags(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        triggers = self.strings(node, path, "triggers", non_empty_items=True)
        if not triggers:
            raise _fail(path + "/triggers", "'triggers' must not be empty")
        tags = self.tag_list(node, path)
        excludes = self.strings(node, path, "excludes", non_empty_items=True)
        at_least_one = self.field(node, path, "at_least_one", bool, False)
        stop_after_first = self.field(node, path, "stop_after_first", bool, False)
        groups: dict[str, list[ir.Expr]] = {t: [] for t in triggers}
        for i, (begin, content, end) in enumerate(tags):
            owners = [t for t in triggers if begin.startswith(t)]
            if len(owners) != 1:
                how = "no trigger" if not owners else f"several triggers ({', '.join(map(repr, owners))})"
                raise _fail(
                    f"{path}/tags/{i}/begin",
                    f"the tag's begin {begin!r} starts with {how}; it must start with exactly one",
                )
            groups[owners[0]].append(ir.seq(ir.literal(begin[len(owners[0]) :]), content, end))
        whole = [ir.seq(ir.literal(b), c, e) for b, c, e in tags]
        if at_least_one and stop_after_first:
            return self.new_rule("triggered-tags", ir.alt(*whole))
        stops = sorted(set(excludes) | {e for e in ends if e})
        # a trigger no tag begins with still stops the free text, and nothing can follow it
        conts = {
            t: self.new_rule("trigger-group", ir.alt(*g)) if g else ir.NOTHING for t, g in groups.items()
        }
        body: ir.Expr = free_text(conts, stops, not stop_after_first, self.define, self.reserve)
        if at_least_one:
            body = ir.seq(self.new_rule("first-tag", ir.alt(*whole)), body)
        return body

    def f_tags_with_separator(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        tags = self.tag_list(node, path)
        separator = self.field(node, path, "separator", str)
        at_least_one = self.field(node, path, "at_least_one", bool, False)
        stop_after_first = self.field(node, path, "stop_after_first", bool, False)
        one = self.new_rule("tags", ir.alt(*(ir.seq(ir.literal(b), c, e) for b, c, e in tags)))
        body: ir.Expr = (
            one if stop_after_first else ir.seq(one, ir.Repeat(ir.seq(ir.literal(separator), one), 0, None))
        )
        return body if at_least_one else ir.Repeat(body, 0, 1)

    def f_dispatch(self, node: dict[str, Any], path: str, ends: tuple[str, ...]) -> ir.Expr:
        rules = self.field(node, path, "rules", list)
        if not rules:
            raise _fail(path + "/rules", "'rules' must not be empty")
        conts: dict[str, list[ir.Expr]] = {}
        for i, pair in enumerate(rules):
            where = f"{path}/rules/{i}"
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[0]):
                raise _fail(where, "a rule must be a [pattern, format] pair with a non-empty pattern")
            conts.setdefault(pair[0], []).append(self.format(pair[1], where + "/1", ends))
        excludes = self.strings(node, path, "excludes", non_empty_items=True)
        loop = self.field(node, path, "loop", bool, True)
        groups = {t: self.new_rule("dispatch-group", ir.alt(*c)) for t, c in conts.items()}
        return free_text(groups, sorted(set(excludes)), loop, self.define, self.reserve)

    # -- sub-grammars ------------------------------------------------------------------------

    def embed(self, kind: str, key: str, path: str, parse: Any) -> ir.Ref:
        """Another front end's grammar, its rules renamed apart; one copy per distinct source."""
        if (kind, key) in self.embedded:
            return self.embedded[kind, key]
        try:
            g: ir.Grammar = parse()
        except GrammarError as e:
            pointer = path + (e.pointer if e.pointer and e.pointer != "/" else "")
            raise GrammarError(f"structural tag {path}: {e}", pointer=pointer) from None
        prefix = self.reserve(kind) + ":"
        for name, body in g.rules.items():
            self.rules[prefix + name] = _rename(body, prefix)
        ref = ir.Ref(prefix + g.start)
        self.embedded[kind, key] = ref
        return ref


def _rename(e: ir.Expr, prefix: str) -> ir.Expr:
    """``e`` with every rule reference prefixed (iterative over the shared DAG, memoized)."""
    memo: dict[int, ir.Expr] = {}
    stack: list[tuple[ir.Expr, bool]] = [(e, False)]
    while stack:
        x, ready = stack.pop()
        if id(x) in memo:
            continue
        if isinstance(x, ir.Ref):
            memo[id(x)] = ir.Ref(prefix + x.name)
        elif isinstance(x, (ir.Seq, ir.Alt)):
            if ready:
                memo[id(x)] = type(x)(tuple(memo[id(i)] for i in x.items))
            else:
                stack.append((x, True))
                stack.extend((i, False) for i in x.items)
        elif isinstance(x, ir.Repeat):
            if ready:
                memo[id(x)] = ir.Repeat(memo[id(x.item)], x.lo, x.hi)
            else:
                stack.append((x, True))
                stack.append((x.item, False))
        else:
            memo[id(x)] = x
    return memo[id(e)]
