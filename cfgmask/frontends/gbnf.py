"""The GBNF front end: llama.cpp grammar text → :class:`ir.Grammar`.

The syntax is llama.cpp's (``src/llama-grammar.cpp``)::

    rule     := name '::=' alts            (a rule runs until the next `name ::=`
    alts     := seq ('|' seq)*              that starts a line, or the end of text)
    seq      := (atom repeat*)*             an empty seq is the empty string
    atom     := '"' char* '"' | '[' '^'? (char ('-' char)?)+ ']' | '.'
              | name | '(' alts ')' | '!'? '<[' int ']>' | '!'? '<' text '>'
    repeat   := '*' | '+' | '?' | '{' int '}' | '{' int ',' '}' | '{' int ',' int '}'
    char     := any character | '\\' ( x HH | u HHHH | U HHHHHHHH | t r n \\ " [ ] - )

Spaces, tabs, newlines and ``#`` comments separate items anywhere.  Where the
semantics had to be decided, llama.cpp's behaviour is kept:

* a rule defined twice keeps its last definition (llama.cpp overwrites);
* any undefined rule name is an error, even one referenced only from an
  unused rule;
* ``.`` is any code point; ``\\xHH`` is the code point U+00HH, not a byte;
* ``""`` is the empty string, and a repetition operator after it is an error;
* ``a ::= `` and empty alternatives (``"x" |``) are the empty string.

Departures, each stricter or strictly more permissive than llama.cpp:

* rule bodies may continue on the next line (llama.cpp ends a rule at a
  newline outside parentheses); a rule definition must still start a line;
* rule names may contain ``_``;
* ``{m,n}`` keeps its bounds exactly (llama.cpp turns ``n > 2000`` into
  unbounded and rejects ``m > 2000``; size limits belong to the compiler);
* ``[]`` and ``[^]`` are errors (llama.cpp reads them as the empty string);
* literal code points must be Unicode scalar values (no surrogates, none
  above U+10FFFF); class ranges are clipped to those instead;
* ``<text>`` tokens (``<|im_end|>``) are looked up when the grammar is compiled, not
  when it is parsed: a text that is not exactly one token of the vocabulary is an error
  of ``compile`` (at the token's line and column), not of ``parse_gbnf``.
"""

from __future__ import annotations

import functools
import re

from .. import deadline, ir
from ..errors import GrammarError

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_SIMPLE_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_MAX_DEPTH = 100
_MAX_TOKEN_ID = 0xFFFFFFFF
_ANY = ir.char_class([(0, ir.MAX_CODE_POINT)])


# The scanner's runs, matched by ``re`` in C instead of a character at a time in Python (a
# rule's every reference asked whether it starts a rule: sql.gbnf's parse 6 -> 2 ms).
_GAP = re.compile(r"(?:[ \t\r\n]+|#[^\r\n]*)*")  # blanks and comments (a comment stops before its newline)
_DEFINES = re.compile(r"[ \t]*::=")  # what follows a rule's name where a rule starts
# a run of characters of a literal that stand for themselves (no escape, no closing quote, no
# surrogate, which ``scalar`` refuses one at a time)
_PLAIN = re.compile('[^"\\\\\ud800-\udfff]+')


@functools.lru_cache(maxsize=8)
def _name_run(chars: frozenset[str]) -> re.Pattern[str]:
    """The pattern of a run of name characters (each parser class has its set)."""
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]*")


def _is_digit(c: str) -> bool:
    return c != "" and c in "0123456789"


def parse_gbnf(text: str, start: str = "root") -> ir.Grammar:
    """Parse GBNF ``text``; ``start`` names the start rule.  Raises :class:`GrammarError`."""
    return _Parser(text).parse(start)


class _Parser:
    """Recursive descent over ``text``; ``pos`` is the next character to read."""

    # What the XGrammar EBNF parser (a subclass) changes; GBNF keeps llama.cpp's.
    name_chars = _NAME_CHARS
    simple_escapes = _SIMPLE_ESCAPES
    repeat_twice = True  # may a repeated item be repeated again ("a"++)?
    plain_run = _PLAIN  # a run of a literal's characters that stand for themselves
    max_bound: int | None = None  # largest repetition bound, None: no limit

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.name_run = _name_run(self.name_chars)
        self.newline_seen = True  # did the last skipped gap contain a newline?
        self.rules: dict[str, ir.Expr] = {}
        self.rule_offsets: dict[str, int] = {}  # where each kept definition starts
        self.duplicates: list[str] = []
        self.ref_offsets: dict[str, int] = {}  # first reference of each name
        self.token_texts: dict[bytes, int] = {}  # <text> tokens: first offset of each

    # -- errors and low-level scanning -------------------------------------------------

    def error(self, message: str, offset: int | None = None) -> GrammarError:
        return GrammarError.at(message, self.text, self.pos if offset is None else offset)

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else ""

    def skip_ws(self) -> None:
        """Skip spaces, tabs, newlines and comments; note whether a newline was crossed (a
        newline in the gap is never inside a comment: a comment stops before it)."""
        text, i = self.text, self.pos
        if i >= len(text) or text[i] not in " \t\r\n#":  # no gap: the common case after an item
            self.newline_seen = False
            return
        end = _GAP.match(text, i).end()  # type: ignore[union-attr]  # matches the empty gap too
        self.pos = end
        self.newline_seen = end > i and (text.find("\n", i, end) >= 0 or text.find("\r", i, end) >= 0)

    def name_end(self, i: int) -> int:
        return self.name_run.match(self.text, i).end()  # type: ignore[union-attr]  # a run may be empty

    def at_rule_start(self) -> bool:
        """Is ``pos`` at ``name ::=`` (blanks allowed before ``::=``, no newline)?"""
        i = self.name_end(self.pos)
        return i != self.pos and _DEFINES.match(self.text, i) is not None

    # -- grammar and rules -------------------------------------------------------------

    def parse(self, start: str) -> ir.Grammar:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise GrammarError("empty grammar: no rules defined")
        while self.pos < len(self.text):
            deadline.check("GBNF rules")
            self.parse_rule()
        self.check_references()
        if start not in self.rules:
            defined = ", ".join(sorted(self.rules))
            raise GrammarError(f"start rule {start!r} is not defined (rules: {defined})")
        meta: dict[str, object] = {"frontend": "gbnf", "rule_offsets": self.rule_offsets}
        if self.duplicates:
            meta["redefined_rules"] = self.duplicates
        if self.token_texts:
            meta[ir.TOKEN_TEXTS] = self.token_texts  # resolved by compile() against its vocabulary
        return ir.Grammar(self.rules, start, meta)

    def parse_rule(self) -> None:
        name_start = self.pos
        end = self.name_end(name_start)
        if end == name_start:
            raise self.error(f"expected a rule name, found {self.describe()}")
        name = self.text[name_start:end]
        self.pos = end
        self.after_rule_name(name)
        while self.peek() in (" ", "\t"):
            self.pos += 1
        if not self.text.startswith("::=", self.pos):
            raise self.error(f"expected '::=' after rule name {name!r}")
        self.check_redefinition(name, name_start)
        self.pos += 3
        self.skip_ws()
        body = self.parse_alternates(0)
        self.after_rule_body(name)
        self.expect_rule_end()
        if name in self.rules:
            self.duplicates.append(name)  # llama.cpp: the last definition wins
        self.rules[name] = body
        self.rule_offsets[name] = name_start

    def after_rule_name(self, name: str) -> None:
        """Hook: what may stand between a rule's name and its ``::=`` (GBNF: nothing)."""

    def check_redefinition(self, name: str, offset: int) -> None:
        """Hook: refuse a second definition of ``name`` (GBNF: the last one wins)."""

    def after_rule_body(self, name: str) -> None:
        """Hook: what may follow a rule's body (GBNF: nothing)."""

    def expect_rule_end(self) -> None:
        if self.pos >= len(self.text) or self.at_rule_start():
            return
        if self.peek() == ")":
            raise self.error("unmatched ')'")
        raise self.error(f"unexpected {self.describe()}")

    def check_references(self) -> None:
        undefined = [(off, name) for name, off in self.ref_offsets.items() if name not in self.rules]
        if undefined:
            offset, name = min(undefined)
            raise self.error(f"undefined rule {name!r}", offset)

    def describe(self) -> str:
        c = self.peek()
        return "end of input" if not c else f"character {c!r}"

    # -- expressions -------------------------------------------------------------------

    def parse_alternates(self, depth: int) -> ir.Expr:
        alts = [self.parse_sequence(depth)]
        while self.peek() == "|":
            self.pos += 1
            self.skip_ws()
            alts.append(self.parse_sequence(depth))
        return ir.alt(*alts)

    def parse_sequence(self, depth: int) -> ir.Expr:
        items: list[ir.Expr] = []
        repeatable = False  # llama.cpp: a repetition needs a non-empty preceding item
        text = self.text
        while True:
            c = text[self.pos] if self.pos < len(text) else ""
            if c in ("*", "+", "?", "{"):
                if not repeatable:
                    raise self.error(f"{self.cannot_repeat(items)} before {c!r}")
                items[-1] = self.parse_repetition(items[-1])
                repeatable = self.repeat_twice
            elif c and c in self.name_chars and self.at_rule_start():
                if not self.newline_seen:
                    raise self.error("a rule definition must start on a new line")
                break
            else:
                item = self.parse_atom(depth)
                if item is None:
                    break
                items.append(item)
                repeatable = self.repeatable(item, c)
            self.skip_ws()
        return ir.seq(*items)

    def repeatable(self, item: ir.Expr, first: str) -> bool:
        """May ``item`` (which starts with ``first``) take a repetition operator?"""
        return item != ir.EPSILON or first == "("

    def cannot_repeat(self, items: list[ir.Expr]) -> str:
        """Why a repetition operator after ``items`` is refused."""
        return "nothing to repeat"

    def parse_atom(self, depth: int) -> ir.Expr | None:
        """One item, or None (nothing consumed) at a character that cannot start one."""
        c = self.peek()
        if c == '"':
            return self.parse_string()
        if c == "[":
            return self.parse_class()
        if c == "(":
            return self.parse_group(depth)
        if c == ".":
            self.pos += 1
            return _ANY
        if c in ("<", "!"):
            return self.parse_token()
        if c and c in self.name_chars:
            return self.parse_ref()
        return None

    def parse_ref(self) -> ir.Expr:
        end = self.name_end(self.pos)
        name = self.text[self.pos : end]
        self.ref_offsets.setdefault(name, self.pos)
        self.pos = end
        return ir.Ref(name)

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
        c = self.peek()
        self.pos += 1
        if c == "*":
            return ir.Repeat(item, 0, None)
        if c == "+":
            return ir.Repeat(item, 1, None)
        if c == "?":
            return ir.Repeat(item, 0, 1)
        lo, hi = self.parse_bounds(self.pos - 1)
        return ir.Repeat(item, lo, hi)

    def parse_bounds(self, brace: int) -> tuple[int, int | None]:
        """``{m}``, ``{m,}`` or ``{m,n}`` after the ``{`` at ``brace``."""
        self.skip_ws()
        lo = self.parse_int("expected an integer after '{'")
        self.skip_ws()
        hi: int | None = lo
        if self.peek() == ",":
            self.pos += 1
            self.skip_ws()
            hi = self.parse_upper_bound()
            self.skip_ws()
            if self.peek() != "}":
                raise self.error("expected '}' to close repetition bounds")
        elif self.peek() != "}":
            raise self.error("expected ',' or '}' in repetition bounds")
        self.pos += 1
        if hi is not None and hi < lo:
            raise self.error(f"bad repetition bounds {{{lo},{hi}}}: maximum below minimum", brace)
        if self.max_bound is not None and max(lo, hi or 0) > self.max_bound:
            raise self.error(f"repetition bound above {self.max_bound}", brace)
        return lo, hi

    def parse_upper_bound(self) -> int | None:
        """The ``n`` of ``{m,n}``, or None (unbounded) for ``{m,}``."""
        return self.parse_int("") if _is_digit(self.peek()) else None

    def parse_int(self, message: str) -> int:
        start = self.pos
        while _is_digit(self.peek()):
            self.pos += 1
        if self.pos == start:
            raise self.error(message)
        return int(self.text[start : self.pos])

    # -- terminals ---------------------------------------------------------------------

    def parse_string(self) -> ir.Expr:
        text = self.parse_string_text()
        return ir.literal(text) if text else ir.EPSILON

    def parse_string_text(self) -> str:
        """A ``"..."`` literal at ``pos``, escapes decoded."""
        open_pos = self.pos
        self.pos += 1
        out: list[str] = []
        text = self.text
        while self.peek() != '"':
            if not self.peek():
                raise self.error("unterminated string literal", open_pos)
            plain = self.plain_run.match(text, self.pos)
            if plain is not None:
                out.append(plain.group())
                self.pos = plain.end()
            else:
                out.append(self.string_char())
        self.pos += 1
        return "".join(out)

    def string_char(self) -> str:
        """One character of a literal: a Unicode scalar value."""
        at = self.pos
        return self.scalar(self.parse_char(), at)

    def scalar(self, cp: int, at: int) -> str:
        if cp > ir.MAX_CODE_POINT or ir.SURROGATES[0] <= cp <= ir.SURROGATES[1]:
            raise self.error(f"U+{cp:04X} is not a Unicode scalar value", at)
        return chr(cp)

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
            lo = self.class_char()
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi = self.class_char()
                self.check_range(lo, hi, at)
            ranges.append((lo, hi))
        self.pos += 1
        if not ranges:
            return self.empty_class(negate, open_pos)
        return ir.char_class(ranges, negate=negate)

    def class_char(self) -> int:
        """One character of a class, as a code point (GBNF: ranges are clipped, not checked)."""
        return self.parse_char()

    def check_range(self, lo: int, hi: int, at: int) -> None:
        """Hook: refuse a class range ``lo-hi`` (GBNF: a reversed one matches nothing)."""

    def empty_class(self, negate: bool, open_pos: int) -> ir.Expr:
        """``[]`` or ``[^]`` (GBNF: an error)."""
        raise self.error("empty character class", open_pos)

    def parse_char(self) -> int:
        """One character of a literal or class, escapes decoded, as a code point."""
        c = self.peek()
        if c != "\\":
            self.pos += 1
            return ord(c)
        esc = self.peek(1)
        if esc and esc in self.simple_escapes:
            self.pos += 2
            return ord(self.simple_escapes[esc])
        if esc and esc in _HEX_ESCAPES:
            return self.parse_hex_escape(esc)
        if not esc:
            raise self.error("unfinished escape at end of input")
        raise self.error(f"unknown escape '\\{esc}'")

    def parse_hex_escape(self, esc: str) -> int:
        """``\\xHH``, ``\\uHHHH`` or ``\\UHHHHHHHH`` at ``pos`` (``esc``: its letter)."""
        size = _HEX_ESCAPES[esc]
        digits = self.text[self.pos + 2 : self.pos + 2 + size]
        if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
            kind = self.text[self.pos : self.pos + 2]
            raise self.error(f"escape '{kind}' needs exactly {size} hex digits")
        self.pos += 2 + size
        return int(digits, 16)

    def parse_token(self) -> ir.Expr:
        """``<[N]>`` / ``!<[N]>``: one whole LLM token by id; ``<text>`` / ``!<text>``: the one
        token whose text is ``<text>`` (brackets included, as llama.cpp tokenizes it), looked up
        when the grammar is compiled for a vocabulary."""
        start = self.pos
        negated = self.peek() == "!"
        if negated:
            self.pos += 1
            if self.peek() != "<":
                raise self.error("expected '<' after '!'")
        if self.peek(1) != "[":
            return self.parse_token_text(start, negated)
        self.pos += 2
        token_id = self.parse_int("expected a token id after '<['")
        if not self.text.startswith("]>", self.pos):
            raise self.error("expected ']>' to close the token id")
        if token_id > _MAX_TOKEN_ID:
            raise self.error(f"token id {token_id} does not fit in 32 bits", start)
        self.pos += 2
        return ir.Token((token_id,), negated)

    def parse_token_text(self, start: int, negated: bool) -> ir.Expr:
        """``<text>`` at ``pos`` (after any ``!``): the text runs to the first ``>``."""
        close = self.text.find(">", self.pos)
        newline = min(
            (i for i in (self.text.find("\n", self.pos), self.text.find("\r", self.pos)) if i >= 0),
            default=-1,
        )
        if close < 0 or 0 <= newline < close:
            raise self.error("unterminated token '<...>': expected '>'", start)
        text = self.text[self.pos : close + 1].encode("utf-8", "surrogatepass")
        self.token_texts.setdefault(text, self.pos)
        self.pos = close + 1
        return ir.TokenText(text, negated)
