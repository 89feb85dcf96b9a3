"""ECMAScript (ECMA-262, ``u`` flag) regular expressions → the parse tree of ``re``.

JSON Schema's ``pattern`` and ``patternProperties`` are ECMA-262 regular expressions
(draft 2020-12, section 6.4), and ``Grammar.from_regex(p, flavor="ecmascript")`` reads the
same syntax.  This module parses a pattern as ECMAScript does with the ``u`` flag (the
syntax errors are ECMAScript's: a lone ``{``, an unknown escape ``\\a``, a
range with a class escape ``[\\d-z]``, ``\\k<x>`` without group ``x``...) into the node
tuples of Python's ``re`` parser, with every character set already spelled as explicit
code-point ranges, so :mod:`.regex` translates it with no ``re`` semantics left in it:

* ``\\d`` = ``[0-9]``, ``\\w`` = ``[A-Za-z0-9_]``, ``\\s`` = ECMAScript's WhiteSpace and
  LineTerminator (TAB VT FF SP NBSP ZWNBSP, every ``Zs``, LF CR LS PS); ``.`` is any
  character but LF CR LS PS (with the ``s`` flag, any character); ``[^]`` is any character.
* ``\\p{…}``/``\\P{…}``: :mod:`.unicode_props` (names matched case-sensitively).
* ``\\cX``, ``\\xHH``, ``\\uXXXX``, ``\\u{…}``, a surrogate pair ``\\uD83D\\uDE00`` (one
  code point); a lone surrogate matches nothing (no UTF-8 text holds one).  ``\\0``, the
  control escapes ``\\f \\n \\r \\t \\v``, ``[\\b]`` (backspace), identity escapes of the
  syntax characters and ``/`` (and ``-`` in a class).
* Two leniencies, the only departures from the ``u`` grammar, both ECMAScript's reading
  without the ``u`` flag (Annex B), Python's ``re``'s and every peer's (XGrammar,
  llguidance): ``\\`` before other ASCII punctuation (``\\' \\: \\_ \\- \\~``...) is
  that character; and a ``]`` or ``}`` that closes nothing (``a}``, ``]``, ``x{2}}``) is
  that character.  Real schemas write both, and the character is the only meaning any engine
  gives them.  A letter or digit after ``\\`` keeps its ``u``-mode meaning or is an error
  (``\\a``, ``\\e``); a lone ``{`` stays an error (``a{1`` is a broken quantifier).
* ``^`` and ``$`` are the start and end of the input (no ``m`` flag): ``\\A`` and ``\\Z``
  of ``re``; ``\\b``/``\\B`` are word boundaries over ``[A-Za-z0-9_]``.
* ``(?<name>…)`` is a group; ``\\k<name>`` and ``\\1`` are backreferences (the translator
  refuses them: not regular); lookarounds go to the translator, which compiles those of
  one character where it can and refuses the others.

Flags: ``u`` is always on (``v`` is not supported); ``s`` is accepted; ``i`` and ``m`` are
refused (case folding and multiline anchors are not implemented).
"""

from __future__ import annotations

from typing import Any

from .. import ir
from ..errors import GrammarError
from .unicode_props import PropertyError, PropertyTableMissing, property_ranges

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as _c  # type: ignore[no-redef]

Ranges = tuple[tuple[int, int], ...]
Node = tuple[Any, Any]

DIGIT: Ranges = ((0x30, 0x39),)
WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
# WhiteSpace (TAB VT FF ZWNBSP and Unicode's Zs, which holds SP and NBSP) + LineTerminator
SPACE: Ranges = ir.normalize_ranges(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
     (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)  # fmt: skip
SYNTAX_CHARS = set("^$\\.*+?()[]{}|")
CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_CLASS_ESCAPES = {"d": DIGIT, "w": WORD, "s": SPACE}
FLAGS = "su"  # the flags this mode accepts (u is implied)
MAX_DEPTH = 100  # nested groups (and lookarounds): the parser and the translator recurse on them


class RegexSyntaxError(GrammarError):
    """The pattern is not an ECMAScript regular expression (a SyntaxError in JavaScript),
    as opposed to a valid one that cfgmask cannot compile (a plain :class:`GrammarError`)."""


def syntax_error(pattern: str) -> RegexSyntaxError | None:
    """The error that makes ``pattern`` invalid ECMAScript (``u`` flag), or None."""
    try:
        parse(pattern)
    except RegexSyntaxError as e:
        return e
    except GrammarError:
        pass
    return None


def everything() -> Ranges:
    return complement(())


def complement(r: Ranges) -> Ranges:
    return ir.without_surrogates(ir.complement_ranges(ir.normalize_ranges(list(r))))


def ranges_node(r: Ranges) -> Node:
    return (_c.IN, [(_c.RANGE, x) for x in r])


class Parsed:
    """A parsed pattern: ``nodes`` (the top-level sequence) and the group count."""

    def __init__(self, nodes: list[Node], groups: int) -> None:
        self.nodes = nodes
        self.groups = groups


def parse(pattern: str, flags: str = "") -> Parsed:
    """Parse ``pattern`` as ECMAScript with the ``u`` flag (and ``flags``); GrammarError on
    a syntax error, with the pattern and a caret at the offending place."""
    for f in flags:
        if f not in FLAGS:
            what = "unknown" if f not in "dgimvy" else "unsupported"
            raise GrammarError(f"{what} ECMAScript regex flag {f!r} (supported: {FLAGS})")
    p = _Parser(pattern, dot_all="s" in flags)
    nodes = p.parse()
    return Parsed(nodes, p.group_count)


class _Parser:
    def __init__(self, pattern: str, dot_all: bool) -> None:
        self.s = pattern
        self.i = 0
        self.dot_all = dot_all
        self.group_count = 0
        self.names: dict[str, int] = {}
        self.path_names: set[str] = set()  # the names defined on the path parsed so far
        self.depth = 0
        self.refs: list[tuple[str, int]] = []  # \k<name> and where, checked at the end
        self.numbered: list[tuple[int, int]] = []  # \N and where
        self.total_groups = _count_groups(pattern)

    def error(self, message: str, at: int | None = None) -> GrammarError:
        where = self.i if at is None else at
        return RegexSyntaxError.at(f"invalid ECMAScript regular expression: {message}", self.s, where)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def parse(self) -> list[Node]:
        nodes = self.disjunction()
        if self.i < len(self.s):
            raise self.error("unmatched ')'" if self.peek() == ")" else f"unexpected {self.peek()!r}")
        for name, at in self.refs:
            if name not in self.names:
                raise self.error(f"\\k<{name}> names no group", at)
        for n, at in self.numbered:
            if n > self.group_count:
                raise self.error(f"\\{n} refers to a group the pattern does not have", at)
        return nodes

    def disjunction(self) -> list[Node]:
        # a name may repeat in different alternatives (ES2025), not on one path
        outer, seen = set(self.path_names), set(self.path_names)
        branches = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            seen |= self.path_names
            self.path_names = set(outer)
            branches.append(self.alternative())
        self.path_names |= seen
        if len(branches) == 1:
            return branches[0]
        return [(_c.BRANCH, (None, branches))]

    def alternative(self) -> list[Node]:
        out: list[Node] = []
        while self.i < len(self.s) and self.peek() not in "|)":
            out.append(self.term())
        return out

    def term(self) -> Node:
        start = self.i
        ch = self.peek()
        if ch == "^" or ch == "$":
            self.i += 1
            return self.no_quantifier((_c.AT, _c.AT_BEGINNING_STRING if ch == "^" else _c.AT_END_STRING))
        if ch == "\\" and self.peek(1) in ("b", "B"):
            self.i += 2
            return self.no_quantifier(
                (_c.AT, _c.AT_BOUNDARY if self.s[start + 1] == "b" else _c.AT_NON_BOUNDARY)
            )
        if self.s.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.i):
            behind = self.peek(2) == "<"
            negative = self.s[self.i + (3 if behind else 2)] == "!"
            self.i += 4 if behind else 3
            body = self.group_body(start)
            op = _c.ASSERT_NOT if negative else _c.ASSERT
            return self.no_quantifier((op, (-1 if behind else 1, body)))
        atom = self.atom()
        return self.quantified(atom, start)

    def no_quantifier(self, node: Node) -> Node:
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self.quantifier_ahead()):
            raise self.error("nothing to repeat (an assertion cannot be quantified)")
        return node

    def quantifier_ahead(self) -> bool:
        j = self.i + 1
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        return j > self.i + 1

    def atom(self) -> Node:
        ch = self.peek()
        if ch == ".":
            self.i += 1
            return ranges_node(everything() if self.dot_all else complement(LINE_TERMINATORS))
        if ch == "(":
            return self.group()
        if ch == "[":
            return ranges_node(self.char_class())
        if ch == "\\":
            return self.atom_escape()
        if ch in ("*", "+", "?"):
            raise self.error("nothing to repeat")
        if ch == "{":
            raise self.error(
                "nothing to repeat" if self.quantifier_ahead() else "lone '{' (escape it as \\{)"
            )
        self.i += 1  # a lone ']' or '}' too: that character (Annex B; see the module doc)
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDBFF and 0xDC00 <= ord(self.peek() or "\0") <= 0xDFFF:  # a pair in the text
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.s[self.i]) - 0xDC00)
            self.i += 1
        return (_c.LITERAL, cp)

    def group(self) -> Node:
        start = self.i
        if self.s.startswith("(?:", self.i):
            self.i += 3
            return (_c.SUBPATTERN, (None, 0, 0, self.group_body(start)))
        name = None
        if self.s.startswith("(?<", self.i):
            self.i += 3
            end = self.s.find(">", self.i)
            name = self.s[self.i : end] if end >= 0 else ""
            if end < 0 or not _group_name(name):
                raise self.error("invalid group name")
            if name in self.path_names:
                raise self.error(f"duplicate group name {name!r}")
            self.i = end + 1
        elif self.peek(1) == "?":
            raise self.error("invalid group (ECMAScript has (?: (?= (?! (?<= (?<! and (?<name>)", start)
        else:
            self.i += 1
        self.group_count += 1
        number = self.group_count
        if name is not None:
            self.names[name] = number
            self.path_names.add(name)
        return (_c.SUBPATTERN, (number, 0, 0, self.group_body(start)))

    def group_body(self, start: int) -> list[Node]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise GrammarError.at(f"the pattern nests groups more than {MAX_DEPTH} deep", self.s, start)
        body = self.disjunction()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ')'", start)
        self.i += 1
        return body

    def quantified(self, atom: Node, start: int) -> Node:
        ch = self.peek()
        if ch == "*":
            lo, hi = 0, _c.MAXREPEAT
        elif ch == "+":
            lo, hi = 1, _c.MAXREPEAT
        elif ch == "?":
            lo, hi = 0, 1
        elif ch == "{":
            lo, hi = self.braces()
        else:
            return atom
        if ch != "{":
            self.i += 1
        lazy = self.peek() == "?"
        if lazy:
            self.i += 1
        return (_c.MIN_REPEAT if lazy else _c.MAX_REPEAT, (lo, hi, [atom]))

    def braces(self) -> tuple[int, int]:
        start = self.i
        self.i += 1
        lo = self.number()
        if lo is None:
            raise self.error("lone '{' (escape it as \\{)", start)
        hi: int | None = lo
        if self.peek() == ",":
            self.i += 1
            hi = self.number() if self.peek().isdigit() else None
        if self.peek() != "}":
            raise self.error("incomplete quantifier", start)
        self.i += 1
        if hi is not None and hi < lo:
            raise self.error("numbers out of order in {} quantifier", start)
        if max(lo, hi or 0) >= _c.MAXREPEAT:
            raise self.error("repetition bound too large", start)
        return lo, _c.MAXREPEAT if hi is None else hi

    def number(self) -> int | None:
        j = self.i
        while self.peek().isdigit() and self.peek() in "0123456789":
            self.i += 1
        return int(self.s[j : self.i]) if self.i > j else None

    # ------------------------------------------------------------------ escapes

    def atom_escape(self) -> Node:
        start = self.i
        self.i += 1
        ch = self.peek()
        if ch == "":
            raise self.error("\\ at end of pattern", start)
        if ch in "123456789":
            n = self.number() or 0
            if n > self.total_groups:
                raise self.error(f"\\{n} refers to a group the pattern does not have", start)
            self.numbered.append((n, start))
            return (_c.GROUPREF, n)
        if ch == "k":
            self.i += 1
            end = self.s.find(">", self.i)
            if self.peek() != "<" or end < 0 or not _group_name(self.s[self.i + 1 : end]):
                raise self.error("invalid named reference \\k (write \\k<name>)", start)
            name = self.s[self.i + 1 : end]
            self.refs.append((name, start))
            self.i = end + 1
            return (_c.GROUPREF, name)
        r = self.class_escape_ranges()
        if r is not None:
            return ranges_node(r)
        return (_c.LITERAL, self.character_escape(start, in_class=False))

    def class_escape_ranges(self) -> Ranges | None:
        """``\\d \\D \\w \\W \\s \\S \\p{…} \\P{…}`` (the backslash already read), else None."""
        ch = self.peek()
        if ch.lower() in _CLASS_ESCAPES:
            self.i += 1
            r = _CLASS_ESCAPES[ch.lower()]
            return complement(r) if ch.isupper() else r
        if ch in ("p", "P"):
            start = self.i - 1
            self.i += 1
            end = self.s.find("}", self.i)
            if self.peek() != "{" or end < 0:
                raise self.error("invalid property escape (write \\p{Name} or \\p{Name=Value})", start)
            body = self.s[self.i + 1 : end]
            try:
                r = property_ranges(body)
            except PropertyTableMissing as e:
                raise GrammarError.at(str(e), self.s, start) from None
            except PropertyError as e:
                raise self.error(str(e), start) from None
            self.i = end + 1
            return complement(r) if ch == "P" else r
        return None

    def character_escape(self, start: int, in_class: bool) -> int:
        """A CharacterEscape (the backslash already read): its code point."""
        ch = self.peek()
        self.i += 1
        if ch in CONTROL_ESCAPES:
            return CONTROL_ESCAPES[ch]
        if ch == "c":
            letter = self.peek()
            if not ("a" <= letter.lower() <= "z" and letter.isascii()):
                raise self.error("\\c must be followed by an ASCII letter", start)
            self.i += 1
            return ord(letter) % 32
        if ch == "0":
            if self.peek().isdigit() and self.peek() in "0123456789":
                raise self.error("invalid decimal escape (\\0 followed by a digit)", start)
            return 0
        if ch == "x":
            h = self.s[self.i : self.i + 2]
            if len(h) != 2 or not _hex(h):
                raise self.error("\\x must be followed by two hex digits", start)
            self.i += 2
            return int(h, 16)
        if ch == "u":
            return self.unicode_escape(start)
        if ch in SYNTAX_CHARS or ch == "/" or (in_class and ch == "-"):
            return ord(ch)
        if ch.isascii() and ch.isprintable() and not ch.isalnum():  # Annex B's identity escape
            return ord(ch)
        raise self.error(
            f"invalid escape \\{ch} (with the u flag only syntax characters may be escaped)", start
        )

    def unicode_escape(self, start: int) -> int:
        if self.peek() == "{":
            end = self.s.find("}", self.i)
            h = self.s[self.i + 1 : end] if end >= 0 else ""
            if not h or not _hex(h) or int(h, 16) > ir.MAX_CODE_POINT:
                raise self.error("invalid \\u{...} escape", start)
            self.i = end + 1
            return int(h, 16)
        h = self.s[self.i : self.i + 4]
        if len(h) != 4 or not _hex(h):
            raise self.error("\\u must be followed by four hex digits or {hex}", start)
        self.i += 4
        cp = int(h, 16)
        low = self.s[self.i + 2 : self.i + 6]
        if 0xD800 <= cp <= 0xDBFF and self.s.startswith("\\u", self.i) and len(low) == 4 and _hex(low):
            lcp = int(low, 16)
            if 0xDC00 <= lcp <= 0xDFFF:  # a surrogate pair: one code point
                self.i += 6
                return 0x10000 + ((cp - 0xD800) << 10) + (lcp - 0xDC00)
        return cp

    # ------------------------------------------------------------------ classes

    def char_class(self) -> Ranges:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        out: list[tuple[int, int]] = []
        while True:
            if self.i >= len(self.s):
                raise self.error("missing ']'", start)
            if self.peek() == "]":
                self.i += 1
                break
            a_at = self.i
            a = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                b_at = self.i
                b = self.class_atom()
                if isinstance(a, tuple) or isinstance(b, tuple):
                    raise self.error(
                        "a class escape cannot bound a range", a_at if isinstance(a, tuple) else b_at
                    )
                if a > b:
                    raise self.error("range out of order in character class", a_at)
                out.append((a, b))
            elif isinstance(a, tuple):
                out.extend(a)
            else:
                out.append((a, a))
        norm = ir.normalize_ranges(out)
        return complement(norm) if negate else complement(complement(norm))

    def class_atom(self) -> int | Ranges:
        """One class atom: a code point, or the ranges of a class escape."""
        ch = self.peek()
        if ch != "\\":
            self.i += 1
            cp = ord(ch)
            if 0xD800 <= cp <= 0xDBFF and 0xDC00 <= ord(self.peek() or "\0") <= 0xDFFF:
                cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.s[self.i]) - 0xDC00)
                self.i += 1
            return cp
        start = self.i
        self.i += 1
        if self.peek() == "b":
            self.i += 1
            return 0x08
        r = self.class_escape_ranges()
        if r is not None:
            return r
        if self.peek() == "":
            raise self.error("\\ at end of pattern", start)
        return self.character_escape(start, in_class=True)


def _hex(h: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in h)


def _group_name(name: str) -> bool:
    return bool(name) and name.replace("$", "_").isidentifier()


def _count_groups(pattern: str) -> int:
    """Capturing groups in ``pattern`` (``\\N`` may refer forward, so counted first)."""
    n, i, in_class = 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(" and (not pattern.startswith("(?", i) or pattern.startswith("(?<", i)):
            n += 0 if pattern.startswith(("(?<=", "(?<!"), i) else 1
        i += 1
    return n
