"""XGrammar's EBNF dialect → :class:`ir.Grammar`: GBNF plus XGrammar's extensions.

The reference is XGrammar's documentation (``docs/defining_structures/ebnf_grammar.md`` of
mlc-ai/xgrammar); where it is silent, its parser (``cpp/grammar_parser.cc``).  Every GBNF
grammar is accepted (``<[N]>`` and ``<text>`` tokens included) and means what it means to
llama.cpp, except where the two dialects disagree and XGrammar's rule is kept:

* a rule defined twice is an error (GBNF: the last definition wins);
* a reversed class range ``[z-a]`` is an error (GBNF: it matches nothing);
* ``[^]`` is any character (GBNF: an error);
* one quantifier per element: ``"a"++`` is an error (group it: ``("a"+)+``).

Extensions::

    rule     := name attrs? '::=' alts lookahead?
    attrs    := '[' attr (',' attr)* ']'        capture, capture="n", temperature=0.7, ...
    lookahead:= '(=' seq ')'                    after the body only
    atom     := ... | '(' ')' | Macro '(' args ')'
    repeat   := ... | '{' int ',' '-1' '}'      {n, -1} is {n,}
    escapes  := \\/ \\' \\? \\a \\b \\f \\v \\0 \\e and \\xH... (any number of hex digits);
                in classes also \\^ \\$ \\. \\* \\+ \\? \\( \\) \\{ \\} \\| \\/ \\-
    names    may contain '.'

Macros (:mod:`cfgmask.frontends.ebnf_macros` gives their languages):

* ``Regex("pattern", json_string=false, flags="")``: the pattern under Python ``re``
  fullmatch with ASCII classes (``\\d`` is ``[0-9]``); without ``flags`` ``.`` matches every
  character (DOTALL), with ``flags`` it does so only under ``s``, and ``i`` is ASCII
  case-insensitive.  XGrammar's ``\\s`` also matches U+00A0; Python's ASCII ``\\s`` does not.
* ``Substring("c0", "c1", ...)``, ``TagDispatch(("tag", rule), ..., loop_after_dispatch=true,
  excludes=("s", ...))``, ``Token(id, ...)``, ``ExcludeToken(id, ...)``,
  ``TokenTagDispatch((id, rule), ..., loop_after_dispatch=true, excludes=(id, ...))``.

Rule attributes are kept in ``meta["rule_attributes"]``.  ``lazy`` changes the language:
each occurrence commits to its shortest match (:mod:`cfgmask.frontends.ebnf_lazy`).  Those
that do not are otherwise ignored: ``capture``, ``capture="name"``, ``temperature``,
``stop_capture`` and the ``capture_hidden_*`` round-trip attributes.  Two that change it are
refused with a ``GrammarError``: ``max_tokens`` (a budget of model tokens per occurrence) and
``max_chars`` (an end forced at the first end past a number of characters).

A lookahead assertion ``(= ...)`` is parsed and checked (a sequence, not empty, no macros) and
dropped: XGrammar documented it as a hint that "does not change which strings the grammar
accepts" (its EBNF guide until July 2026); it only sharpened XGrammar's token-mask cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .. import deadline, ir
from ..errors import GrammarError
from . import ebnf_macros
from .ebnf_lazy import NotTerminalLike, shortest_matches
from .gbnf import _ANY, _MAX_DEPTH, _is_digit, _Parser

_EBNF_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_ESCAPES = {
    "t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "'": "'", "?": "?", "/": "/",
    "a": "\a", "b": "\b", "f": "\f", "v": "\v", "0": "\0", "e": "\x1b",
    "[": "[", "]": "]", "-": "-",  # GBNF's; XGrammar allows these in classes only
}  # fmt: skip
_CLASS_ESCAPES = frozenset("^$.*+?(){}|/")  # besides _ESCAPES, inside [...] only
_SHORTHANDS = frozenset("dDsSwW")
_IGNORED_ATTRIBUTES = {
    "lazy": "flag",  # not ignored: see _EbnfParser.commit_lazy_rules
    "capture": "str?",
    "stop_capture": "str",
    "temperature": "float",
    "capture_hidden_suffix_bytes": "int",
    "capture_hidden_stop_bytes": "int",
    "capture_hidden_body_rule_id": "int",
    "capture_hidden_marker_rule_id": "int",
}
_REFUSED_ATTRIBUTES = {
    "max_tokens": "bounds each occurrence by a number of model tokens",
    "max_chars": "ends each occurrence at its first end past a number of characters",
}
_MAX_INT = 10**15  # XGrammar's largest integer in a grammar


def parse_ebnf(text: str, root: str = "root") -> ir.Grammar:
    """Parse XGrammar EBNF ``text``; ``root`` names the start rule.  Raises :class:`GrammarError`."""
    return _EbnfParser(text).parse(root)


@dataclass(frozen=True)
class _Value:
    """One macro argument: kind is ``str``, ``int``, ``bool``, ``name`` or ``tuple``."""

    kind: str
    value: Any
    offset: int


class _EbnfParser(_Parser):
    name_chars = _EBNF_NAME_CHARS

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.attributes: dict[str, dict[str, object]] = {}
        self.lookaheads: dict[str, int] = {}
        self.helpers = 0  # helper rules made for macros so far
        self.current = ""  # the rule being parsed
        self.in_lookahead = False
        self.lazy: dict[str, int] = {}  # lazy rules: where their attribute is written

    def parse(self, start: str) -> ir.Grammar:
        grammar = super().parse(start)
        self.commit_lazy_rules(grammar)
        grammar.meta["frontend"] = "ebnf"
        if self.attributes:
            grammar.meta["rule_attributes"] = self.attributes
        if self.lookaheads:
            grammar.meta["lookaheads"] = self.lookaheads
        return grammar

    def commit_lazy_rules(self, grammar: ir.Grammar) -> None:
        """Each ``name[lazy]`` rule keeps only its shortest matches (:mod:`.ebnf_lazy`)."""
        original = dict(grammar.rules)
        for name, at in self.lazy.items():
            if name not in original:
                continue  # a later definition replaced it (an error already raised)
            try:
                body, helpers = shortest_matches(original[name], original, f"{name}<lazy>")
            except NotTerminalLike as e:
                raise self.error(f"a lazy rule must be terminal-like: {e}", at) from None
            except ValueError as e:
                raise self.error(f"lazy rule {name!r} is too large: {e}", at) from None
            grammar.rules[name] = body
            grammar.rules.update(helpers)

    # -- rules -------------------------------------------------------------------------

    def at_rule_start(self) -> bool:
        i = self.name_end(self.pos)
        if i == self.pos:
            return False
        if i < len(self.text) and self.text[i] == "[":
            close = self._attributes_end(i)
            if close is None:
                return False
            i = close
        while i < len(self.text) and self.text[i] in " \t":
            i += 1
        return self.text.startswith("::=", i)

    def _attributes_end(self, i: int) -> int | None:
        """The offset after the ``]`` closing the attribute list at ``i`` (quotes skipped)."""
        j = i + 1
        while j < len(self.text) and self.text[j] not in "]\n\r":
            if self.text[j] == '"':
                j = self.text.find('"', j + 1)
                if j < 0:
                    return None
            j += 1
        return j + 1 if j < len(self.text) and self.text[j] == "]" else None

    def parse_rule(self) -> None:
        name_start = self.pos
        end = self.name_end(name_start)
        if end == name_start:
            raise self.error(f"expected a rule name, found {self.describe()}")
        name = self.text[name_start:end]
        self.pos = end
        self.current = name
        if self.peek() == "[":
            self.parse_attributes(name)
        while self.peek() in (" ", "\t"):
            self.pos += 1
        if not self.text.startswith("::=", self.pos):
            raise self.error(f"expected '::=' after rule name {name!r}")
        if name in self.rules:
            raise self.error(f"rule {name!r} is defined twice", name_start)
        self.pos += 3
        self.skip_ws()
        body = self.parse_alternates(0)
        if self.text.startswith("(=", self.pos):
            self.parse_lookahead(name)
        self.expect_rule_end()
        self.rules[name] = body
        self.rule_offsets[name] = name_start

    def parse_attributes(self, rule: str) -> None:
        """``[key, key=value, ...]`` after a rule name."""
        self.pos += 1
        found: dict[str, object] = {}
        while True:
            while self.peek() in (" ", "\t"):
                self.pos += 1
            at = self.pos
            end = self.name_end(at)
            key = self.text[at:end]
            if not key:
                raise self.error(f"expected a rule attribute, found {self.describe()}")
            if key in found:
                raise self.error(f"rule attribute {key!r} given twice", at)
            self.pos = end
            while self.peek() in (" ", "\t"):
                self.pos += 1
            value: object = True
            if self.peek() == "=":
                self.pos += 1
                while self.peek() in (" ", "\t"):
                    self.pos += 1
                value = self.parse_attribute_value(key)
            self.check_attribute(key, value, at)
            found[key] = value
            if key == "lazy":
                self.lazy[rule] = at
            while self.peek() in (" ", "\t"):
                self.pos += 1
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() != "]":
                raise self.error("expected ',' or ']' in rule attributes")
            self.pos += 1
            break
        self.attributes[rule] = found

    def parse_attribute_value(self, key: str) -> object:
        if self.peek() == '"':
            close = self.text.find('"', self.pos + 1)
            if close < 0 or any(c in self.text[self.pos + 1 : close] for c in "\\\n\r"):
                raise self.error("an attribute string is plain text in double quotes")
            value = self.text[self.pos + 1 : close]
            self.pos = close + 1
            return value
        m = re.compile(r"[0-9.eE+-]+").match(self.text, self.pos)
        if not m:
            raise self.error(f"expected a value for rule attribute {key!r}")
        self.pos = m.end()
        try:
            number = float(m.group()) if key == "temperature" else int(m.group())
        except ValueError:
            raise self.error(f"bad value {m.group()!r} for rule attribute {key!r}", m.start()) from None
        return number

    def check_attribute(self, key: str, value: object, at: int) -> None:
        if key in _REFUSED_ATTRIBUTES:
            raise self.error(
                f"rule attribute {key!r} {_REFUSED_ATTRIBUTES[key]}: that changes the language, "
                "and cfgmask does not support it",
                at,
            )
        kind = _IGNORED_ATTRIBUTES.get(key)
        if kind is None:
            raise self.error(f"unknown rule attribute {key!r}", at)
        ok = {
            "str?": value is True or (isinstance(value, str) and value != ""),
            "str": isinstance(value, str) and value != "",
            "int": isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 2**31 - 1,
            "float": isinstance(value, float) and 0 <= value < float("inf"),
            "flag": value is True,
        }[kind]
        if not ok:
            raise self.error(f"bad value {value!r} for rule attribute {key!r}", at)

    def parse_lookahead(self, rule: str) -> None:
        """``(= seq)`` after a rule body: checked, recorded, and dropped (see the module doc)."""
        open_pos = self.pos
        self.pos += 2
        self.skip_ws()
        self.in_lookahead = True
        body = self.parse_sequence(1)
        self.in_lookahead = False
        if self.peek() == "|":
            raise self.error("a lookahead assertion is a sequence: no '|'")
        if self.peek() != ")":
            raise self.error(f"unexpected {self.describe()} (expected ')' to close the lookahead)")
        if body == ir.EPSILON:
            raise self.error("empty lookahead assertion", open_pos)
        if _has_alternatives(body):
            raise self.error("a lookahead assertion is a sequence: no '|' inside it either", open_pos)
        self.pos += 1
        self.skip_ws()
        self.lookaheads[rule] = open_pos

    # -- expressions -------------------------------------------------------------------

    def parse_sequence(self, depth: int) -> ir.Expr:
        items: list[ir.Expr] = []
        quantified = True  # XGrammar: one quantifier per element, and none before the first
        while True:
            c = self.peek()
            if c in ("*", "+", "?", "{"):
                if quantified:
                    what = "nothing to repeat" if not items else "a second quantifier needs parentheses"
                    raise self.error(f"{what} before {c!r}")
                items[-1] = self.parse_repetition(items[-1])
                quantified = True
            elif c and c in self.name_chars and self.at_rule_start():
                if not self.newline_seen:
                    raise self.error("a rule definition must start on a new line")
                break
            else:
                item = self.parse_atom(depth)
                if item is None:
                    break
                items.append(item)
                quantified = False
            self.skip_ws()
        return ir.seq(*items)

    def parse_atom(self, depth: int) -> ir.Expr | None:
        c = self.peek()
        if c == "(" and self.peek(1) == "=":
            return None  # a lookahead ends the rule body
        if c and c in self.name_chars:
            end = self.name_end(self.pos)
            name = self.text[self.pos : end]
            if name in _MACROS:
                return self.parse_macro(name, depth)
        return super().parse_atom(depth)

    def parse_group(self, depth: int) -> ir.Expr:
        open_pos = self.pos
        if depth >= _MAX_DEPTH:
            raise self.error(f"parentheses nested deeper than {_MAX_DEPTH}")
        self.pos += 1
        self.skip_ws()
        inner = self.parse_alternates(depth + 1)
        if self.peek() != ")":
            if self.pos >= len(self.text) or self.at_rule_start():
                raise self.error("unclosed '('", open_pos)
            raise self.error(f"unexpected {self.describe()} (expected ')')")
        self.pos += 1
        return inner

    def parse_repetition(self, item: ir.Expr) -> ir.Expr:
        if item == ir.EPSILON:  # XGrammar repeats "" (still ""); GBNF refuses it
            self.pos += 1
            if self.text[self.pos - 1] == "{":
                self.parse_bounds(self.pos - 1)
            return ir.EPSILON
        return super().parse_repetition(item)

    def parse_bounds(self, brace: int) -> tuple[int, int | None]:
        """``{m}``, ``{m,}``, ``{m,n}`` and XGrammar's ``{m,-1}`` (unbounded)."""
        self.skip_ws()
        lo = self.parse_int("expected an integer after '{'")
        self.skip_ws()
        hi: int | None = lo
        if self.peek() == ",":
            self.pos += 1
            self.skip_ws()
            if self.text.startswith("-1", self.pos) and not _is_digit(self.peek(2)):
                self.pos += 2
                hi = None
            else:
                hi = self.parse_int("") if _is_digit(self.peek()) else None
            self.skip_ws()
            if self.peek() != "}":
                raise self.error("expected '}' to close repetition bounds")
        elif self.peek() != "}":
            raise self.error("expected ',' or '}' in repetition bounds")
        self.pos += 1
        if hi is not None and hi < lo:
            raise self.error(f"bad repetition bounds {{{lo},{hi}}}: maximum below minimum", brace)
        if max(lo, hi or 0) > _MAX_INT:
            raise self.error(f"repetition bound above {_MAX_INT}", brace)
        return lo, hi

    # -- terminals ---------------------------------------------------------------------

    def parse_string(self) -> ir.Expr:
        text = self.parse_string_text()
        return ir.literal(text) if text else ir.EPSILON

    def parse_string_text(self) -> str:
        open_pos = self.pos
        self.pos += 1
        out: list[str] = []
        while self.peek() != '"':
            if not self.peek():
                raise self.error("unterminated string literal", open_pos)
            if self.peek() in "\r\n":
                raise self.error("a string literal cannot hold a raw newline: write \\n")
            out.append(self.checked_char(False))
        self.pos += 1
        return "".join(out)

    def checked_char(self, in_class: bool) -> str:
        at = self.pos
        cp = self.parse_class_char() if in_class else self.parse_char()
        if cp > ir.MAX_CODE_POINT or ir.SURROGATES[0] <= cp <= ir.SURROGATES[1]:
            raise self.error(f"U+{cp:04X} is not a Unicode scalar value", at)
        return chr(cp)

    def parse_char(self) -> int:
        c = self.peek()
        if c != "\\":
            self.pos += 1
            return ord(c)
        esc = self.peek(1)
        if esc in _ESCAPES and esc:
            self.pos += 2
            return ord(_ESCAPES[esc])
        if esc == "x":
            m = re.compile(r"[0-9a-fA-F]+").match(self.text, self.pos + 2)
            if not m:
                raise self.error("escape '\\x' needs at least one hex digit")
            self.pos = m.end()
            return int(m.group(), 16) if len(m.group()) <= 8 else ir.MAX_CODE_POINT + 1
        return super().parse_char()

    def parse_class_char(self) -> int:
        if self.peek() == "\\" and self.peek(1) in _CLASS_ESCAPES and self.peek(1):
            self.pos += 2
            return ord(self.text[self.pos - 1])
        if self.peek() == "\\" and self.peek(1) in _SHORTHANDS and self.peek(1):
            raise self.error(f"'\\{self.peek(1)}' is not supported in a character class: write the ranges")
        if self.peek() in "\r\n":
            raise self.error("a character class cannot hold a raw newline: write \\n")
        return self.parse_char()

    def parse_class(self) -> ir.Expr:
        open_pos = self.pos
        self.pos += 1
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character class", open_pos)
            at = self.pos
            lo = ord(self.checked_char(True))
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi = ord(self.checked_char(True))
                if hi < lo:
                    raise self.error("bad character range: the lower bound is above the upper", at)
            ranges.append((lo, hi))
        self.pos += 1
        if not ranges:
            if negate:
                return _ANY  # [^]: nothing excluded
            raise self.error("empty character class", open_pos)
        return ir.char_class(ranges, negate=negate)

    # -- macros ------------------------------------------------------------------------

    def parse_macro(self, name: str, depth: int) -> ir.Expr:
        at = self.pos
        if self.in_lookahead:
            raise self.error(f"{name}(...) cannot be used in a lookahead assertion")
        self.pos = self.name_end(self.pos)
        self.skip_ws()
        if self.peek() != "(":
            raise self.error(f"expected '(' after macro {name}")
        positional, named = self.parse_arguments(depth)
        deadline.check("EBNF macros")
        return _MACROS[name](self, at, positional, named)

    def parse_arguments(self, depth: int) -> tuple[list[_Value], dict[str, _Value]]:
        self.pos += 1
        self.skip_ws()
        positional: list[_Value] = []
        named: dict[str, _Value] = {}
        if self.peek() == ")":
            self.pos += 1
            return positional, named
        while True:
            end = self.name_end(self.pos)
            after = end
            while after < len(self.text) and self.text[after] in " \t\r\n":
                after += 1
            key = self.text[self.pos : end]
            if key and not key[0].isdigit() and self.text.startswith("=", after):
                if key in named:
                    raise self.error(f"argument {key!r} given twice")
                self.pos = after + 1
                self.skip_ws()
                named[key] = self.parse_value(depth)
            else:
                if named:
                    raise self.error("a positional argument after a named one")
                positional.append(self.parse_value(depth))
            self.skip_ws()
            if self.peek() == ",":
                self.pos += 1
                self.skip_ws()
                continue
            if self.peek() != ")":
                raise self.error(f"expected ',' or ')' in macro arguments, found {self.describe()}")
            self.pos += 1
            return positional, named

    def parse_value(self, depth: int) -> _Value:
        at = self.pos
        c = self.peek()
        if c == '"':
            return _Value("str", self.parse_string_text(), at)
        if c == "(":
            if depth >= _MAX_DEPTH:
                raise self.error(f"parentheses nested deeper than {_MAX_DEPTH}")
            self.pos += 1
            self.skip_ws()
            items: list[_Value] = []
            while self.peek() != ")":
                items.append(self.parse_value(depth + 1))
                self.skip_ws()
                if self.peek() == ",":
                    self.pos += 1
                    self.skip_ws()
                elif self.peek() != ")":
                    raise self.error(f"expected ',' or ')' in a tuple, found {self.describe()}")
            self.pos += 1
            return _Value("tuple", items, at)
        m = re.compile(r"[+-]?[0-9]+").match(self.text, self.pos)
        if m and (m.end() >= len(self.text) or self.text[m.end()] not in self.name_chars):
            self.pos = m.end()
            number = int(m.group())
            if abs(number) > _MAX_INT:
                raise self.error(f"integer above {_MAX_INT}", at)
            return _Value("int", number, at)
        end = self.name_end(self.pos)
        if end > self.pos:
            word = self.text[self.pos : end]
            self.pos = end
            if word in ("true", "false"):
                return _Value("bool", word == "true", at)
            return _Value("name", word, at)
        raise self.error(f"expected a macro argument, found {self.describe()}")

    # -- macro helpers -----------------------------------------------------------------

    def helper_base(self, macro: str) -> str:
        self.helpers += 1
        return f"{self.current}<{macro}#{self.helpers}>"

    def add_helpers(self, rules: dict[str, ir.Expr]) -> None:
        self.rules.update(rules)

    def rule_ref(self, v: _Value, macro: str) -> ir.Expr:
        if v.kind != "name":
            raise self.error(f"{macro}: expected a rule name", v.offset)
        self.ref_offsets.setdefault(v.value, v.offset)
        return ir.Ref(v.value)

    def no_named(self, macro: str, named: dict[str, _Value]) -> None:
        if named:
            key, v = next(iter(named.items()))
            raise self.error(f"{macro}() takes no named argument ({key!r})", v.offset)

    def only_named(self, macro: str, named: dict[str, _Value], allowed: tuple[str, ...]) -> None:
        for key, v in named.items():
            if key not in allowed:
                raise self.error(f"{macro}() has no argument {key!r}", v.offset)

    def boolean(self, macro: str, named: dict[str, _Value], key: str, default: bool) -> bool:
        v = named.get(key)
        if v is None:
            return default
        if v.kind != "bool":
            raise self.error(f"{macro}: {key} must be true or false", v.offset)
        return bool(v.value)

    def token_ids(self, macro: str, values: list[_Value]) -> list[int]:
        out = []
        for v in values:
            if v.kind != "int" or v.value < 0 or v.value > 0xFFFFFFFF:
                raise self.error(f"{macro}: a token id is a non-negative integer", v.offset)
            out.append(v.value)
        return out

    def pairs(self, macro: str, positional: list[_Value], first: str) -> list[tuple[_Value, ir.Expr]]:
        out = []
        for v in positional:
            if v.kind != "tuple" or len(v.value) != 2:
                raise self.error(f"{macro}: each positional argument is a pair ({first}, rule)", v.offset)
            out.append((v.value[0], self.rule_ref(v.value[1], macro)))
        return out


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


def _has_alternatives(e: ir.Expr) -> bool:
    if isinstance(e, ir.Alt):
        return True
    if isinstance(e, ir.Seq):
        return any(_has_alternatives(x) for x in e.items)
    return isinstance(e, ir.Repeat) and _has_alternatives(e.item)


def _regex(p: _EbnfParser, at: int, positional: list[_Value], named: dict[str, _Value]) -> ir.Expr:
    from .regex import regex_to_expr

    p.only_named("Regex", named, ("json_string", "flags"))
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
    if p.boolean("Regex", named, "json_string", False):
        expr = ebnf_macros.json_string_only(expr)
    return expr


def _substring(p: _EbnfParser, at: int, positional: list[_Value], named: dict[str, _Value]) -> ir.Expr:
    p.no_named("Substring", named)
    for v in positional:
        if v.kind != "str":
            raise p.error("Substring: every argument is a string", v.offset)
    expr, rules = ebnf_macros.substring([v.value for v in positional], p.helper_base("Substring"))
    p.add_helpers(rules)
    return expr


def _tag_dispatch(p: _EbnfParser, at: int, positional: list[_Value], named: dict[str, _Value]) -> ir.Expr:
    p.only_named("TagDispatch", named, ("loop_after_dispatch", "excludes"))
    pairs = []
    for tag, body in p.pairs("TagDispatch", positional, "tag"):
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
    loop = p.boolean("TagDispatch", named, "loop_after_dispatch", True)
    try:
        expr, rules = ebnf_macros.tag_dispatch(
            pairs, p.helper_base("TagDispatch"), loop=loop, excludes=excludes
        )
    except ValueError as e:
        raise p.error(f"TagDispatch is too large: {e}", at) from None
    p.add_helpers(rules)
    return expr


def _token(
    p: _EbnfParser, at: int, positional: list[_Value], named: dict[str, _Value], negated: bool
) -> ir.Expr:
    macro = "ExcludeToken" if negated else "Token"
    p.no_named(macro, named)
    if not positional:
        raise p.error(f"{macro}() needs at least one token id", at)
    return ir.Token(tuple(sorted(set(p.token_ids(macro, positional)))), negated)


def _token_tag_dispatch(
    p: _EbnfParser, at: int, positional: list[_Value], named: dict[str, _Value]
) -> ir.Expr:
    macro = "TokenTagDispatch"
    p.only_named(macro, named, ("loop_after_dispatch", "excludes"))
    pairs = [(p.token_ids(macro, [tid])[0], body) for tid, body in p.pairs(macro, positional, "token id")]
    excludes: list[int] = []
    if "excludes" in named:
        v = named["excludes"]
        if v.kind != "tuple":
            raise p.error(f"{macro}: excludes is a tuple of token ids", v.offset)
        excludes = p.token_ids(macro, v.value)
        if set(excludes) & {t for t, _ in pairs}:
            raise p.error(f"{macro}: a trigger token id is also excluded", v.offset)
    if not pairs and not excludes:
        raise p.error(f"{macro}() with no trigger and no excluded id (any token) is not supported", at)
    loop = p.boolean(macro, named, "loop_after_dispatch", True)
    expr, rules = ebnf_macros.token_tag_dispatch(pairs, p.helper_base(macro), loop=loop, excludes=excludes)
    p.add_helpers(rules)
    return expr


_MACROS = {
    "Regex": _regex,
    "Substring": _substring,
    "TagDispatch": _tag_dispatch,
    "Token": lambda p, at, a, n: _token(p, at, a, n, False),
    "ExcludeToken": lambda p, at, a, n: _token(p, at, a, n, True),
    "TokenTagDispatch": _token_tag_dispatch,
}
