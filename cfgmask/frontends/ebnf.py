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

from .. import deadline, ir
from .ebnf_calls import MACROS, Value
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


class _EbnfParser(_Parser):
    name_chars = _EBNF_NAME_CHARS
    simple_escapes = _ESCAPES
    repeat_twice = False  # one quantifier per element
    plain_run = re.compile('[^"\\\\\r\n\ud800-\udfff]+')  # a raw newline is string_char's error
    max_bound = _MAX_INT

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

    def after_rule_name(self, name: str) -> None:
        self.current = name
        if self.peek() == "[":
            self.parse_attributes(name)

    def check_redefinition(self, name: str, offset: int) -> None:
        if name in self.rules:
            raise self.error(f"rule {name!r} is defined twice", offset)

    def after_rule_body(self, name: str) -> None:
        if self.text.startswith("(=", self.pos):
            self.parse_lookahead(name)

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

    def repeatable(self, item: ir.Expr, first: str) -> bool:
        return True  # XGrammar repeats "" (still ""): see parse_repetition

    def cannot_repeat(self, items: list[ir.Expr]) -> str:
        return "nothing to repeat" if not items else "a second quantifier needs parentheses"

    def parse_atom(self, depth: int) -> ir.Expr | None:
        c = self.peek()
        if c == "(" and self.peek(1) == "=":
            return None  # a lookahead ends the rule body
        if c and c in self.name_chars:
            end = self.name_end(self.pos)
            name = self.text[self.pos : end]
            if name in MACROS:
                return self.parse_macro(name, depth)
        return super().parse_atom(depth)

    def parse_repetition(self, item: ir.Expr) -> ir.Expr:
        if item == ir.EPSILON:  # XGrammar repeats "" (still ""); GBNF refuses it
            self.pos += 1
            if self.text[self.pos - 1] == "{":
                self.parse_bounds(self.pos - 1)
            return ir.EPSILON
        return super().parse_repetition(item)

    def parse_upper_bound(self) -> int | None:
        """XGrammar's ``{m,-1}`` is ``{m,}``."""
        if self.text.startswith("-1", self.pos) and not _is_digit(self.peek(2)):
            self.pos += 2
            return None
        return super().parse_upper_bound()

    # -- terminals ---------------------------------------------------------------------

    def string_char(self) -> str:
        if self.peek() in "\r\n":
            raise self.error("a string literal cannot hold a raw newline: write \\n")
        return super().string_char()

    def parse_hex_escape(self, esc: str) -> int:
        if esc != "x":
            return super().parse_hex_escape(esc)
        m = re.compile(r"[0-9a-fA-F]+").match(self.text, self.pos + 2)  # any number of digits
        if not m:
            raise self.error("escape '\\x' needs at least one hex digit")
        self.pos = m.end()
        return int(m.group(), 16) if len(m.group()) <= 8 else ir.MAX_CODE_POINT + 1

    def class_char(self) -> int:
        at = self.pos
        return ord(self.scalar(self.parse_class_char(), at))

    def parse_class_char(self) -> int:
        if self.peek() == "\\" and self.peek(1) in _CLASS_ESCAPES and self.peek(1):
            self.pos += 2
            return ord(self.text[self.pos - 1])
        if self.peek() == "\\" and self.peek(1) in _SHORTHANDS and self.peek(1):
            raise self.error(f"'\\{self.peek(1)}' is not supported in a character class: write the ranges")
        if self.peek() in "\r\n":
            raise self.error("a character class cannot hold a raw newline: write \\n")
        return self.parse_char()

    def check_range(self, lo: int, hi: int, at: int) -> None:
        if hi < lo:
            raise self.error("bad character range: the lower bound is above the upper", at)

    def empty_class(self, negate: bool, open_pos: int) -> ir.Expr:
        return _ANY if negate else super().empty_class(negate, open_pos)  # [^]: nothing excluded

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
        return MACROS[name](self, at, positional, named)

    def parse_arguments(self, depth: int) -> tuple[list[Value], dict[str, Value]]:
        self.pos += 1
        self.skip_ws()
        positional: list[Value] = []
        named: dict[str, Value] = {}
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

    def parse_value(self, depth: int) -> Value:
        at = self.pos
        c = self.peek()
        if c == '"':
            return Value("str", self.parse_string_text(), at)
        if c == "(":
            if depth >= _MAX_DEPTH:
                raise self.error(f"parentheses nested deeper than {_MAX_DEPTH}")
            self.pos += 1
            self.skip_ws()
            items: list[Value] = []
            while self.peek() != ")":
                items.append(self.parse_value(depth + 1))
                self.skip_ws()
                if self.peek() == ",":
                    self.pos += 1
                    self.skip_ws()
                elif self.peek() != ")":
                    raise self.error(f"expected ',' or ')' in a tuple, found {self.describe()}")
            self.pos += 1
            return Value("tuple", items, at)
        m = re.compile(r"[+-]?[0-9]+").match(self.text, self.pos)
        if m and (m.end() >= len(self.text) or self.text[m.end()] not in self.name_chars):
            self.pos = m.end()
            number = int(m.group())
            if abs(number) > _MAX_INT:
                raise self.error(f"integer above {_MAX_INT}", at)
            return Value("int", number, at)
        end = self.name_end(self.pos)
        if end > self.pos:
            word = self.text[self.pos : end]
            self.pos = end
            if word in ("true", "false"):
                return Value("bool", word == "true", at)
            return Value("name", word, at)
        raise self.error(f"expected a macro argument, found {self.describe()}")

    # -- macro helpers -----------------------------------------------------------------

    def helper_base(self, macro: str) -> str:
        self.helpers += 1
        return f"{self.current}<{macro}#{self.helpers}>"

    def add_helpers(self, rules: dict[str, ir.Expr]) -> None:
        self.rules.update(rules)


def _has_alternatives(e: ir.Expr) -> bool:
    if isinstance(e, ir.Alt):
        return True
    if isinstance(e, ir.Seq):
        return any(_has_alternatives(x) for x in e.items)
    return isinstance(e, ir.Repeat) and _has_alternatives(e.item)
