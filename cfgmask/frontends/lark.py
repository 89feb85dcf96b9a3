"""Lark grammars → IR.

The reference (DESIGN.md): a string is in the language iff
``lark.Lark(text, parser="earley", lexer="dynamic").parse(s)`` succeeds.  The
``lark`` package itself loads the grammar (:mod:`cfgmask.frontends.lark_load` only
replaces its meta-parser, building the very tree Lark's would), so ``%import common.*``,
relative imports, templates, ``~ m..n``, ``?``/``_``/``!`` modifiers, aliases
and priorities mean exactly what they mean to Lark; this module translates the
compiled rules and terminals.

The translation
---------------
* Every rule of Lark's compiled grammar that is reachable from ``start``
  becomes an IR rule with one alternative per expansion.  Aliases, tree
  shaping and rule and terminal priorities only choose among parse trees in
  Lark's Earley parser; they do not change which strings parse.
* Every terminal becomes an IR rule named after it: an unflagged string as its
  UTF-8 bytes, anything else through :func:`cfgmask.frontends.regex.terminal_variants`.
* ``%ignore`` terminals may occur any number of times at the start, at the end
  and between any two terminals (Lark's scanner carries every pending item over
  an ignored match): each terminal ``T`` in an expansion becomes ``<ignore> T``,
  the top is ``start <ignore>``, and ``<ignore> = (I1 | I2 | ...)*``.  Ignored
  text goes *before* a terminal, in the rule that reads that terminal, not
  after the previous one: a token such as `` FROM`` (a space, then a keyword)
  is then read inside one rule, where the mask cache decides it without the
  parser's stack.  Written after terminals, the space would end the innermost
  rule (``NAME <ignore>``) and every space-led token would be checked against
  the stack at run time (on sql.lark, 48,000 of them after each name).

How a terminal ends
-------------------
Lark's dynamic lexer matches a terminal at position ``i`` with
``pattern.match(text, i)`` (lark/parsers/xearley.py): each terminal gets *one*
length there, the one Python's backtracking engine picks, and that choice can
depend on the text after the match.  A grammar of terminals alone cannot say
that, so three things keep cfgmask's language equal to Lark's:

1. *Longest match.*  For a terminal with only greedy quantifiers, no empty
   branch before the last, and a deterministic pattern, ``re.match`` returns the
   longest match, so a match may not be followed by a character that would
   extend it (``NAME`` may not be followed by a word character, ``WS`` by
   whitespace).  See :func:`cfgmask.ir_ops.longest_match_follow`.
2. *Trailing one-character lookahead* ``(?!C)`` keeps its meaning: the branch
   ending in it may not be followed by ``C``.  Other one-character lookarounds
   are compiled into the terminal itself.
3. *Known lazy terminals* (``ESCAPED_STRING``, ``C_COMMENT``, Python's string
   terminals, ...) are replaced by patterns that ``re.match`` identically and
   need neither laziness nor lookbehind (``_EQUIVALENT``).

A follow restriction becomes part of the grammar (:mod:`cfgmask.frontends.lark_follow`).
On the corpora (tests/test_lark_frontend.py) the two languages agree on every
vector; the restrictions make the IR larger (SynCode's SQL grammar: 151 rules
plain, about 1,750 with restrictions).

Differences from Lark
---------------------
Every string Lark accepts is accepted here.  cfgmask accepts more than Lark
where a terminal's single ``re.match`` length cannot be expressed:

1. Greedy terminals that are not deterministic or whose extension needs more
   than one character: ``common.NUMBER`` (``FLOAT | INT``) followed directly by
   something it could absorb (``start: NUMBER+`` accepts ``"1.1."`` as ``1.``
   ``1.``; Lark reads ``1.1`` and fails), ``/a|ab/`` (Lark only ever
   matches ``a``), ``\\d{1,3}`` followed by a digit.
2. Lazy terminals other than the rewritten ones: Lark ends ``/<.*?>/`` at the
   first ``>``; cfgmask lets it run over later ones when the rest still parses.
3. Terminals with a trailing lookahead get no longest-match restriction.
4. Ignored terminals are subject to 1-3 like any other.
5. Lark raises ``KeyError`` (not a parse error) when a parse reaches a
   ``%declare``'d terminal; cfgmask rejects such grammars outright (below).

llguidance's extensions of the syntax (``%json``, ``%regex``, special tokens, ``{m,n}``,
rule attributes, ``%llguidance``) are rewritten into plain Lark first, by
:mod:`cfgmask.frontends.lark_ext`; docs/lark.md lists what each means here.

Rejected with a :class:`GrammarError` naming the construct and its position:
terminals using what the regex front end rejects (lookaround of more than one
character, or a lookahead that is neither trailing nor followed by a character
of the terminal, backreferences, anchors: ``^``/``$`` refer to the whole text
under ``re.match(text, pos)``), a ``%declare``'d terminal reachable from
``start`` (it needs a postlexer), and whatever Lark itself refuses (its message
and position: zero-width terminals, undefined rules, missing imports).
"""

from __future__ import annotations

import functools
import re
import threading
import types
from collections.abc import Sequence
from types import SimpleNamespace

from .. import ir
from ..errors import GrammarError
from . import lark_load
from .lark_ext import Preprocessed, preprocess
from .lark_follow import Ranges, Symbol, to_ir
from .lark_opaque import opaque_terminals
from .regex import _sre_parse, terminal_variants

IGNORE = "<ignore>"
TOP = "<top>"  # <ignore> start
START = "<start>"

# Lark terminal patterns (``pattern.value`` and flags, character for character)
# that use lazy quantifiers and lookaround, and lookaround-free patterns whose
# ``re.match`` is the same at every position of every text under the same flags
# (tests/test_lark_frontend.py checks this on random texts).  The replacements
# are prefix-free apart from trailing one-character lookaheads, so the
# translation is exact for these terminals.
_COMMENT = r"/\*(?:[^*]|\*+[^*/])*\*+/"  # up to the first "*/"
_PY_PREFIXES = ("([ubf]?r?|r[ubf])", "[ubf]?r?")  # python.lark, examples/advanced/python2.lark
_PY_STRING = r"""("(?!"").*?(?<!\\)(\\\\)*?"|'(?!'').*?(?<!\\)(\\\\)*?')"""
_PY_STRING_EXACT = r"""("(?:[^"\\\n]|\\[^\n])+"|""(?!")|'(?:[^'\\\n]|\\[^\n])+'|''(?!'))"""
_PY_LONG = r'(""".*?(?<!\\)(\\\\)*?"""|' + r"'''.*?(?<!\\)(\\\\)*?''')"
_PY_LONG_EXACT = (
    r'("""(?:[^"\\]|\\.|"{1,2}(?:[^"\\]|\\.))*"""|' + r"'''(?:[^'\\]|\\.|'{1,2}(?:[^'\\]|\\.))*''')"
)
_EQUIVALENT: dict[tuple[str, str], str] = {
    # common.ESCAPED_STRING, and lark.lark's STRING: up to the first unescaped quote.
    (r'".*?(?<!\\)(\\\\)*?"', ""): r'"(?:[^"\\\n]|\\[^\n])*"',
    (r'".*?(?<!\\)(\\\\)*?"(?:i)?', ""): r'"(?:[^"\\\n]|\\[^\n])*"(?:i|(?!i))',
    ("/\\*(.|\n)*?\\*/", ""): _COMMENT,  # common.C_COMMENT
    (r"\/\*(\*(?!\/)|[^*])*\*\/", ""): _COMMENT,  # verilog.lark's MULTILINE_COMMENT
    # SynCode's python STRING: no escapes, "." matches newlines.
    (r"""[ubf]?r?("(?!"").*?"|'(?!'').*?')""", "is"): r"""[ubf]?r?("[^"]+"|""(?!")|'[^']+'|''(?!'))""",
}
for _prefix in _PY_PREFIXES:
    _EQUIVALENT[(_prefix + _PY_STRING, "i")] = _prefix + _PY_STRING_EXACT
    _EQUIVALENT[(_prefix + _PY_LONG, "is")] = _prefix + _PY_LONG_EXACT


def terminal_regexp(pattern: object) -> str:
    """A Lark pattern as a regex: its known exact equivalent if it has one, flags applied
    in a fixed order (Lark nests them in set order, which varies between runs)."""
    flags = "".join(sorted(pattern.flags))  # type: ignore[attr-defined]
    value: str = pattern.value  # type: ignore[attr-defined]
    regexp = re.escape(value) if type(pattern).__name__ == "PatternStr" else value
    regexp = _EQUIVALENT.get((regexp, flags), regexp)
    for flag in flags:
        regexp = f"(?{flag}:{regexp})"
    return regexp


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
    pre = preprocess(text)  # llguidance's extensions, see lark_ext
    parser = _load(text, start, source_path, list(import_paths), pre)
    return _Builder(text, parser, start, pre).build()


def _load(
    text: str, start: str, source_path: str | None, import_paths: list[str], pre: Preprocessed | None = None
) -> object:
    import lark  # imported lazily: only Lark users need it

    try:
        if pre is not None:  # llguidance's dialect: terminals may match the empty string
            return _compile_only(pre.text, start, source_path, import_paths, pre.helpers)
        loaded = _compile_only(text, start, source_path, import_paths, set())
        if _earley_accepts(loaded, start):
            return loaded
        return lark.Lark(  # raises the error building its parser meets (or, if none, is used as is)
            text,
            parser="earley",
            lexer="dynamic",
            start=start,
            source_path=source_path,
            import_paths=import_paths,
        )
    except lark.exceptions.LarkError as e:
        raise _lark_error(str(e), text, pre=pre) from None
    except (OSError, re.error) as e:
        raise _lark_error(f"cannot load grammar: {e}", text, _first(text, r"%import")) from None
    except Exception as e:  # noqa: BLE001 - the `regex` module's errors, raised while Lark checks terminals
        raise _lark_error(f"cannot load grammar: {type(e).__name__}: {e}", text) from None


def _compile_only(
    text: str, start: str, source_path: str | None, import_paths: list[str], keep: set[str]
) -> SimpleNamespace:
    """Lark's rules and terminals for ``text`` without building its parser, whose dynamic
    lexer refuses terminals that can match the empty string (llguidance allows them:
    ``TEXT: /(.|\\n)*/``)."""
    _meta_parser()  # Lark's meta-parser reads what lark_load leaves to it (syntax errors)
    grammar = lark_load.load(text, source_path or "<string>", import_paths)
    terminals, rules, ignore = lark_load.compile_once(grammar, [start], keep)
    return SimpleNamespace(terminals=terminals, rules=rules, ignore_tokens=ignore)


_META_LOCK = threading.Lock()


def _meta_parser() -> None:
    """Build Lark's own parser of ``.lark`` text once a process, its lexer's checks skipped.

    ``lark.load_grammar`` builds that parser (an LALR parser of Lark's fixed meta-grammar) the
    first time any grammar is loaded, and its lexer then checks the meta-grammar's own ~30
    terminals: each compiles, none is empty and, where ``interegular`` is installed (vLLM
    installs it), no two overlap -- 435 pair intersections, 0.3-0.6 s a process, which never
    find anything in Lark's grammar and only log when they do.  Lark skips the same checks
    when it loads a parser from its cache (``skip_validation``).  Here its own builder runs
    once with a ``LexerConf`` that skips them, in a copy of the function whose globals differ
    only in that name (nothing of Lark's is changed for other threads); it stores the parser
    where Lark keeps it, so Lark's later calls use it.  Any surprise (another Lark version)
    leaves the build to Lark.  ``tests/test_lark_frontend.py`` loads grammars with and without."""
    try:
        from lark import load_grammar as lg
    except ImportError:  # pragma: no cover - lark is a dependency
        return
    build = getattr(lg, "_get_parser", None)
    if build is None or hasattr(build, "cache"):
        return
    with _META_LOCK:
        if hasattr(build, "cache"):
            return
        try:
            conf = lg.LexerConf
            unchecked = functools.partial(conf, skip_validation=True)
            types.FunctionType(build.__code__, {**vars(lg), "LexerConf": unchecked})()
        except Exception:  # noqa: BLE001 - Lark builds it its own way on its next call
            return


def _earley_accepts(loaded: SimpleNamespace, start: str) -> bool:
    """Whether ``lark.Lark(..., parser="earley", lexer="dynamic")`` would build its parser over
    these rules and terminals without an error: the checks that construction makes after
    ``Grammar.compile`` (lark 1.2: every terminal's regexp has a width, not zero, and compiles
    (``EarleyRegexpMatcher``); no rule twice (``ParseTreeBuilder``, ``GrammarAnalyzer``); every
    rule used and the start rule defined (``GrammarAnalyzer``)).  Building the parser itself
    (its FIRST/FOLLOW sets and predictions, which cfgmask never uses) is half of loading a
    grammar such as sql.lark.  False sends the grammar through ``lark.Lark``, for its error."""
    parsed: dict[str, object] = {}
    for t in loaded.terminals:
        regexp = t.pattern.to_regexp()
        try:
            if _min_width(regexp, parsed) == 0:
                return False
            re.compile(regexp)
        except Exception:  # noqa: BLE001 - any failure is Lark's to report
            return False
    loaded.parsed = parsed  # for terminal_variants, where its pattern is the same text
    rules = loaded.rules
    defined = {r.origin for r in rules}
    return (
        len(set(rules)) == len(rules)
        and any(o.name == start for o in defined)
        and all(s.is_term or s in defined for r in rules for s in r.expansion)
    )


def _min_width(regexp: str, parsed: dict[str, object]) -> int:
    """``lark.utils.get_regexp_width(regexp)[0]``, keeping ``re``'s parse of ``regexp`` in
    ``parsed``.  Without ``\\p`` in it Lark's substitution of ``\\p{...}`` changes nothing and
    Lark returns the parse's minimum width; a pattern ``re`` cannot parse goes to Lark's
    function (its ``regex`` fallback, or its error)."""
    from lark.utils import get_regexp_width

    if "\\p" not in regexp:
        try:
            tree = _sre_parse.parse(regexp)
        except re.error:
            pass
        else:
            parsed[regexp] = tree
            return int(tree.getwidth()[0])
    return int(get_regexp_width(regexp)[0])


def _lark_error(
    message: str, text: str, offset: int | None = None, pre: Preprocessed | None = None
) -> GrammarError:
    """A GrammarError at Lark's reported position, or at the first name the message quotes."""
    message = message.strip().split("\n\n")[0]
    found = re.search(r"line (\d+),? col(?:umn)? (\d+)", message)
    if found and pre is not None:  # a position in the rewritten text: map it back
        return GrammarError.at(message, text, pre.locate(int(found.group(1)), int(found.group(2))))
    if found:
        line, column = int(found.group(1)), int(found.group(2))
        lines = text.split("\n")
        context = lines[line - 1] if 0 < line <= len(lines) else None
        return GrammarError(message, line=line, column=column, context=context)
    if offset is None:
        names = re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", message)
        where = [rf"^[ \t]*[?!_]?{re.escape(n)}\b" for n in names] + [rf"\b{re.escape(n)}\b" for n in names]
        found_at = (_first(text, w) for w in where)  # a definition of a quoted name, else a use
        offset = next((o for o in found_at if o is not None), None)
    if offset is None:
        return GrammarError(message)
    return GrammarError.at(message, text, offset)


def _first(text: str, pattern: str) -> int | None:
    m = re.search(pattern, text, re.MULTILINE)
    return m.start() if m else None


class _Builder:
    """Reads a compiled ``lark.Lark`` object into a token-level grammar, then writes IR."""

    def __init__(self, text: str, parser: object, start: str, pre: Preprocessed | None = None) -> None:
        self.text = text
        self.start = start
        self.pre = pre
        self.terminals = {t.name: t for t in parser.terminals}  # type: ignore[attr-defined]
        self.parsed: dict[str, object] = getattr(parser, "parsed", {})  # re's parses, by pattern
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
            top.append(Symbol(IGNORE, False))
        if self.ignore and self.pre and self.pre.ignore_once:  # %llguidance {"ignore_once": true}
            rules[IGNORE] = [[]] + [[Symbol(t, True)] for t in self.ignore]
        rules[TOP] = [top]
        used = sorted({s.name for body in rules.values() for e in body for s in e if s.terminal})
        ext = opaque_terminals(self.pre, used, self.terminals, self.text)
        variants = {
            name: ext.variants[name] if name in ext.variants else self._terminal(name) for name in used
        }
        meta: dict[str, object] = {"lark_start": self.start, "ignore": tuple(self.ignore)}
        if ext.token_texts and self.pre is not None:  # compile resolves them (compile/token_texts.py)
            meta[ir.TOKEN_TEXTS] = {t: self.pre.token_texts[t] for t in sorted(ext.token_texts)}
        out = to_ir(rules, variants, TOP, START, tuple(self.ignore), ext.first)
        out.update(ext.rules)
        return ir.Grammar(out, START, meta=meta)

    def _reachable_rules(self) -> list[str]:
        if self.start not in self.expansions:
            raise GrammarError.at(f"start rule {self.start!r} is not defined", self.text, 0)
        seen, todo, known = [self.start], [self.start], {self.start}
        while todo:
            for expansion in self.expansions[todo.pop()]:
                for sym in expansion:
                    if sym.is_term:  # type: ignore[attr-defined]
                        continue
                    name = str(sym.name)  # type: ignore[attr-defined]
                    if name not in known:
                        seen.append(name)
                        todo.append(name)
                        known.add(name)
        return seen

    def _expansion(self, expansion: list[object]) -> list[Symbol]:
        out: list[Symbol] = []
        ignore, pre = bool(self.ignore), self.pre
        for sym in expansion:
            terminal = bool(sym.is_term)  # type: ignore[attr-defined]
            name = str(sym.name)  # type: ignore[attr-defined]
            if terminal and ignore and (pre is None or pre.ignore_before(name)):
                out.append(Symbol(IGNORE, False))
            out.append(Symbol(name, terminal))
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
        regexp = terminal_regexp(pattern)
        try:
            return terminal_variants(regexp, self.parsed.get(regexp))
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
