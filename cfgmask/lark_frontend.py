"""Lark grammars → IR.

The reference (DESIGN.md): a string is in the language iff
``lark.Lark(text, parser="earley", lexer="dynamic").parse(s)`` succeeds.  The
``lark`` package itself reads the grammar text, so ``%import common.*``,
relative imports, templates, ``~ m..n``, ``?``/``_``/``!`` modifiers, aliases
and priorities mean exactly what they mean to Lark; this module translates the
compiled rules and terminals.

The translation
---------------
* Every rule of Lark's compiled grammar that is reachable from ``start``
  becomes an IR rule with one alternative per expansion.  Aliases, tree
  shaping and rule priorities only choose among parse trees; they do not
  change which strings parse, so they are dropped.
* Every terminal becomes an IR rule named after it: a plain string literal as
  its UTF-8 bytes, anything else (``"..."i`` and ``/.../flags``) through
  :func:`cfgmask.regex_frontend.regex_to_expr` on ``pattern.to_regexp()``.  A
  few well-known terminals whose Lark patterns need lookbehind are replaced by
  lookaround-free patterns that ``re.match`` identically (``_EQUIVALENT``;
  tests check the equivalence).
* ``%ignore`` terminals may occur any number of times at the start, at the end
  and between any two terminals: each terminal reference ``T`` becomes
  ``T <ignore>`` and the start rule ``<start>`` is ``<ignore> start``, with
  ``<ignore> = (I1 | I2 | ...)*``.

Differences from Lark
---------------------
Lark's dynamic lexer matches a terminal at position ``i`` with
``pattern.match(text, i)`` (lark/parsers/xearley.py): each terminal gets *one*
length at each position, the one Python's backtracking engine picks (longest
for greedy patterns such as ``NAME``, shortest for lazy ones such as
``C_COMMENT``), and that choice looks at the whole rest of the input.  The IR
lets a terminal stand for any string of its pattern's ``re.fullmatch``
language.  Every string Lark accepts is therefore accepted here, and the
languages are equal whenever each terminal's language is prefix-free (no
string of it is a proper prefix of another: string literals, quoted strings
with escapes, ``"/*" ... "*/"`` comments rewritten as below) or the grammar never puts
something a terminal could absorb right after it.  Where neither holds,
cfgmask accepts more than Lark:

1. Greedy terminals followed by something they could absorb: with
   ``start: NAME NAME`` (no ``%ignore``), Lark rejects ``"ab"`` because
   ``NAME`` at 0 matches all of ``"ab"``; cfgmask accepts ``"a" "b"``.
   Likewise a number terminal followed by a digit-initial token, or ``%ignore
   WS`` with a terminal that starts with whitespace.
2. Lazy terminals: Lark ends ``/a.*?b/`` at the first ``b``; cfgmask lets it
   run over later ones when the rest still parses.  (The common ``C_COMMENT``
   and ``ESCAPED_STRING`` terminals are rewritten exactly.)
3. Alternations where Python picks an earlier, shorter branch (``/a|ab/``
   only ever matches ``a`` in Lark).
4. ``%ignore`` matches are greedy too: an ignored token is as long as
   ``re.match`` makes it, which only matters when a following terminal can
   start with what it would absorb.
5. ``%declare``'d terminals have no pattern; the dynamic lexer cannot produce
   them (Lark raises KeyError if a parse reaches one).  cfgmask rejects a
   grammar where one is reachable from ``start``.

Rejected with a :class:`GrammarError`: terminals whose patterns use
constructs the regex front end rejects (lookaround other than the rewritten
terminals, backreferences, anchors — ``^``/``$`` mean start/end of the *whole
text* in Lark's ``re.match(text, pos)``, so they are refused in terminals),
``%declare`` reachable from ``start``, and anything Lark itself refuses (with
Lark's message; e.g. zero-width terminals, undefined rules, missing imports).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import ir
from .errors import GrammarError
from .lark_follow import Ranges, Symbol, to_ir
from .regex_frontend import terminal_variants

IGNORE = "<ignore>"
TOP = "<top>"  # <ignore> start
START = "<start>"

# Lark terminal patterns (``to_regexp()``, character for character) that use lazy
# quantifiers and lookaround, and lookaround-free patterns whose ``re.match`` is
# the same at every position of every text (tests/test_lark_frontend.py checks
# this on random texts).  The replacements are prefix-free apart from trailing
# one-character lookaheads, so the translation is exact for these terminals.
_COMMENT = r"/\*(?:[^*]|\*+[^*/])*\*+/"  # up to the first "*/"
_PY_PREFIXES = ("([ubf]?r?|r[ubf])", "[ubf]?r?")  # python.lark, examples/advanced/python2.lark
_PY_STRING = r"""("(?!"").*?(?<!\\)(\\\\)*?"|'(?!'').*?(?<!\\)(\\\\)*?'))"""
_PY_STRING_EXACT = r"""("(?:[^"\\\n]|\\[^\n])+"|""(?!")|'(?:[^'\\\n]|\\[^\n])+'|''(?!')))"""
_PY_LONG = r'(""".*?(?<!\\)(\\\\)*?"""|' + r"'''.*?(?<!\\)(\\\\)*?''')))"
_PY_LONG_EXACT = (
    r'("""(?:[^"\\]|\\.|"{1,2}(?:[^"\\]|\\.))*"""|' + r"'''(?:[^'\\]|\\.|'{1,2}(?:[^'\\]|\\.))*''')))"
)
_EQUIVALENT = {
    # common.ESCAPED_STRING, and lark.lark's STRING: up to the first unescaped quote.
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    r'".*?(?<!\\)(\\\\)*?"(?:i)?': r'"(?:[^"\\\n]|\\[^\n])*"(?:i|(?!i))',
    "/\\*(.|\n)*?\\*/": _COMMENT,  # common.C_COMMENT
    r"\/\*(\*(?!\/)|[^*])*\*\/": _COMMENT,  # verilog.lark's MULTILINE_COMMENT
    # SynCode's python STRING: no escapes, "." matches newlines.
    r"""(?s:(?i:[ubf]?r?("(?!"").*?"|'(?!'').*?')))""": (
        r"""(?s:(?i:[ubf]?r?("[^"]+"|""(?!")|'[^']+'|''(?!'))))"""
    ),
}
for _prefix in _PY_PREFIXES:
    _EQUIVALENT["(?i:" + _prefix + _PY_STRING] = "(?i:" + _prefix + _PY_STRING_EXACT
    _EQUIVALENT["(?s:(?i:" + _prefix + _PY_LONG] = "(?s:(?i:" + _prefix + _PY_LONG_EXACT


def parse_lark(
    text: str,
    start: str = "start",
    *,
    source_path: str | None = None,
    import_paths: Sequence[str] = (),
) -> ir.Grammar:
    """The IR for Lark grammar ``text`` with start rule ``start``.

    ``source_path`` (the grammar file's path) and ``import_paths`` resolve
    relative and extra ``%import`` statements as Lark does.
    """
    parser = _load(text, start, source_path, list(import_paths))
    return _Builder(text, parser, start).build()


def _load(text: str, start: str, source_path: str | None, import_paths: list[str]) -> object:
    import lark  # imported lazily: only Lark users need it

    try:
        return lark.Lark(
            text,
            parser="earley",
            lexer="dynamic",
            start=start,
            source_path=source_path,
            import_paths=import_paths,
        )
    except lark.exceptions.LarkError as e:
        raise _lark_error(str(e), text) from None
    except (OSError, re.error) as e:
        raise _lark_error(f"cannot load grammar: {e}", text, _first(text, r"%import")) from None
    except Exception as e:  # noqa: BLE001 - the `regex` module's errors, raised while Lark checks terminals
        raise _lark_error(f"cannot load grammar: {type(e).__name__}: {e}", text) from None


def _lark_error(message: str, text: str, offset: int | None = None) -> GrammarError:
    """A GrammarError at Lark's reported position, or at the first name the message quotes."""
    message = message.strip().split("\n\n")[0]
    found = re.search(r"line (\d+),? col(?:umn)? (\d+)", message)
    if found:
        line, column = int(found.group(1)), int(found.group(2))
        lines = text.split("\n")
        context = lines[line - 1] if 0 < line <= len(lines) else None
        return GrammarError(message, line=line, column=column, context=context)
    if offset is None:
        names = re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", message)
        found_at = (_first(text, rf"\b{re.escape(n)}\b") for n in names)
        offset = next((o for o in found_at if o is not None), None)
    if offset is None:
        return GrammarError(message)
    return GrammarError.at(message, text, offset)


def _first(text: str, pattern: str) -> int | None:
    m = re.search(pattern, text, re.MULTILINE)
    return m.start() if m else None


class _Builder:
    """Reads a compiled ``lark.Lark`` object into a token-level grammar, then writes IR."""

    def __init__(self, text: str, parser: object, start: str) -> None:
        self.text = text
        self.start = start
        self.terminals = {t.name: t for t in parser.terminals}  # type: ignore[attr-defined]
        self.ignore = list(parser.ignore_tokens)  # type: ignore[attr-defined]
        self.expansions: dict[str, list[list[object]]] = {}
        for rule in parser.rules:  # type: ignore[attr-defined]
            self.expansions.setdefault(str(rule.origin.name), []).append(list(rule.expansion))

    def build(self) -> ir.Grammar:
        rules: dict[str, list[list[Symbol]]] = {}
        for name in self._reachable_rules():
            rules[name] = [self._expansion(e) for e in self.expansions[name]]
        top = [Symbol(self.start, False)]
        if self.ignore:
            rules[IGNORE] = [[]] + [[Symbol(t, True), Symbol(IGNORE, False)] for t in self.ignore]
            top.insert(0, Symbol(IGNORE, False))
        rules[TOP] = [top]
        used = sorted({s.name for body in rules.values() for e in body for s in e if s.terminal})
        variants = {name: self._terminal(name) for name in used}
        meta = {"lark_start": self.start, "ignore": tuple(self.ignore)}
        return ir.Grammar(to_ir(rules, variants, TOP, START), START, meta=meta)

    def _reachable_rules(self) -> list[str]:
        if self.start not in self.expansions:
            raise GrammarError.at(f"start rule {self.start!r} is not defined", self.text, 0)
        seen, todo = [self.start], [self.start]
        while todo:
            for expansion in self.expansions[todo.pop()]:
                for sym in expansion:
                    name = str(sym.name)  # type: ignore[attr-defined]
                    if not sym.is_term and name not in seen:  # type: ignore[attr-defined]
                        seen.append(name)
                        todo.append(name)
        return seen

    def _expansion(self, expansion: list[object]) -> list[Symbol]:
        out: list[Symbol] = []
        for sym in expansion:
            terminal = bool(sym.is_term)  # type: ignore[attr-defined]
            out.append(Symbol(str(sym.name), terminal))  # type: ignore[attr-defined]
            if terminal and self.ignore:
                out.append(Symbol(IGNORE, False))
        return out

    def _terminal(self, name: str) -> list[tuple[ir.Expr, Ranges]]:
        term = self.terminals.get(name)
        if term is None:
            offset = _first(self.text, rf"%declare\b[^\n]*\b{re.escape(name)}\b") or _first(
                self.text, "%import"
            )
            raise GrammarError.at(
                f"terminal {name} is %declare'd without a pattern (it needs a postlexer); not supported",
                self.text,
                offset or 0,
            )
        pattern = term.pattern
        if type(pattern).__name__ == "PatternStr" and not pattern.flags:
            return [(ir.literal(pattern.value), ())]
        regexp = pattern.to_regexp()
        try:
            return terminal_variants(_EQUIVALENT.get(regexp, regexp))
        except GrammarError as e:
            where = self._locate(name, pattern)
            raise GrammarError.at(f"terminal {name}: {e.message}", self.text, where) from None

    def _locate(self, name: str, pattern: object) -> int:
        """Where terminal ``name`` is written: its regex literal, its definition, or its import."""
        raw = getattr(pattern, "raw", None)
        word = re.escape(name)
        candidates = [f"(?P<at>{re.escape(raw)})"] if raw else []
        candidates += [
            rf"^[ \t]*(?P<at>{word})[ \t]*(\.[ \t]*-?\d+[ \t]*)?:",
            rf"%import\b[^\n]*\b(?P<at>{word})\b",
        ]
        for candidate in candidates:
            m = re.search(candidate, self.text, re.MULTILINE)
            if m:
                return m.start("at")
        return 0
