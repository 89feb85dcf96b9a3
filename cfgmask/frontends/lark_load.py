"""A parser of the ``.lark`` grammar language, in place of Lark's own meta-parser.

``lark.load_grammar`` reads grammar text with an LALR parser of Lark's fixed meta-grammar
(``lark/load_grammar.py``: ``TERMINALS``, ``RULES``), then turns ``terminal``/``nonterminal``
subtrees into symbols (``PrepareGrammar``); the rest of the loader (imports, templates,
``%ignore``, ``%override``/``%extend``) and ``Grammar.compile`` work on that tree.  On sql.lark
the meta-parse was about 6 of cfgmask's 33 ms of front end.  :func:`parse_tree` builds the
same tree by recursive descent (one ``re`` match a token, Lark's own token patterns in Lark's
order, tokens with Lark's positions), and :func:`load` runs Lark's ``GrammarBuilder`` with it,
for the grammar and for every grammar it imports.  Exactness: the tree is the tree Lark
builds, so everything after it is Lark's own code (``tests/test_lark_load.py`` compares both
trees and both compiled grammars on every Lark grammar of the repository).  Text this parser
does not accept (a syntax error, or anything it does not expect) goes through Lark's parser,
which then raises its error or, if it accepts the text after all, loads it: never a
different result, only a slower one.  A Lark whose loader is not of the expected shape is
used as it is.
"""

from __future__ import annotations

import re
import threading
import types
from typing import Any

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


class _Reject(Exception):
    """The text is not what this parser accepts: Lark's parser decides."""


def _setup() -> dict[str, Any] | None:
    """Lark's pieces, looked up once: ``None`` if this Lark version is not the expected shape."""
    if _STATE:
        return _STATE if _STATE.get("ok") else None
    with _LOCK:
        if _STATE:
            return _STATE if _STATE.get("ok") else None
        try:
            from lark import load_grammar as lg
            from lark.grammar import NonTerminal, Terminal
            from lark.lexer import PatternRE, Token, _regexp_has_newline
            from lark.tree import Tree

            names = list(lg.TERMINALS)
            patterns = [PatternRE(lg.TERMINALS[n]) for n in names]
            # Lark's BasicLexer tries its terminals in this order (first match wins).
            order = sorted(
                zip(names, patterns, strict=True), key=lambda x: (-x[1].max_width, -len(x[1].value), x[0])
            )
            scanner = re.compile("|".join(f"(?P<{n}>{p.value})" for n, p in order))
            newline = frozenset(n for n, p in order if _regexp_has_newline(p.value))
            # Lark's GrammarBuilder with two of its methods' globals changed: load_grammar's
            # meta-parse is ours, and do_import loads imported files with this builder too.
            base = lg.GrammarBuilder
            space = {**vars(lg), "_parse_grammar": _parse_grammar}
            methods = {}
            for name in ("load_grammar", "do_import"):
                f = getattr(base, name)
                if f.__code__.co_freevars:  # a closure (super()): not the expected shape
                    raise TypeError(name)
                methods[name] = types.FunctionType(f.__code__, space, name, f.__defaults__)
            space["GrammarBuilder"] = builder = type("GrammarBuilder", (base,), methods)
            # Grammar.compile copies every tree first so that a Grammar can be compiled more
            # than once; compile_once skips the copies for a Grammar compiled once.
            f = lg.Grammar.compile
            if f.__code__.co_freevars:
                raise TypeError("compile")
            once = {**vars(lg), "nr_deepcopy_tree": _same_tree, **_quick_dispatch(lg)}
            compile_once = types.FunctionType(f.__code__, once, "compile", f.__defaults__)
            plain = {**once, "ApplyTemplates": _NoTemplates}
            compile_plain = types.FunctionType(f.__code__, plain, "compile", f.__defaults__)
            _STATE.update(
                ok=True, lg=lg, Tree=Tree, Token=Token, Terminal=Terminal, NonTerminal=NonTerminal,
                scanner=scanner, newline=newline, builder=builder, compile_once=compile_once,
                compile_plain=compile_plain,
            )  # fmt: skip
        except Exception:  # noqa: BLE001 - another Lark version: its own loader runs
            _STATE["ok"] = False
            return None
    return _STATE


def load(text: str, source: str, import_paths: list[str]) -> Any:
    """``lark.load_grammar.load_grammar(text, source, import_paths, False)[0]``, the
    meta-parse of ``text`` and of every grammar it imports done here."""
    state = _setup()
    if state is None:
        from lark.load_grammar import load_grammar

        return load_grammar(text, source, import_paths, False)[0]
    builder = state["builder"](False, import_paths)
    builder.load_grammar(text, source)
    return builder.build()


def compile_once(grammar: Any, start: list[str], keep: set[str]) -> Any:
    """``grammar.compile(start, keep)`` for a Grammar from :func:`load` that is compiled only
    this once (its trees are changed in place instead of copied first)."""
    state = _setup()
    if state is None:
        return grammar.compile(start, keep)
    if any(params for _name, params, _tree, _options in grammar.rule_defs):
        return state["compile_once"](grammar, start, keep)
    return state["compile_plain"](grammar, start, keep)


def _same_tree(tree: Any) -> Any:
    return tree


class _NoTemplates:
    """``ApplyTemplates`` for a Grammar from :func:`load` in which no rule has template
    parameters.  ``GrammarBuilder.validate`` (run by ``build``) has then refused every
    ``template_usage`` (its name must be a definition taking as many arguments as it passes,
    at least one), so Lark's pass would find nothing to apply and only copy every node of a
    tree that the passes before it have just copied (nothing else refers to it)."""

    def __init__(self, rule_defs: Any) -> None:
        pass

    def transform(self, tree: Any) -> Any:
        return tree


_COMPILE_CLASSES = (
    "PrepareLiterals",
    "TerminalTreeToPattern",
    "ValidateSymbols",
    "PrepareAnonTerminals",
    "ApplyTemplates",
    "EBNF_to_BNF",
    "SimplifyRule_Visitor",
    "RuleTreeToText",
)


def _quick_literals(lg: Any, cls: type) -> dict[str, Any]:
    """``PrepareLiterals.literal`` whose ``_literal_to_pattern`` unescapes a literal without
    backslashes made of printable characters as itself: Lark's ``eval_escaping`` then only
    puts a backslash before each ``'`` and reads ``u'''...'''`` with ``ast.literal_eval``
    (a compile of Python source, most of the time of reading sql.lark's ~130 literals), which
    gives the text back.  Other literals go to Lark's ``eval_escaping``."""
    wrapped: Any = cls.__dict__.get("literal")
    base = getattr(wrapped, "base_func", None)
    to_pattern = getattr(lg, "_literal_to_pattern", None)
    escaping = getattr(lg, "eval_escaping", None)
    if not isinstance(base, types.FunctionType) or not hasattr(wrapped, "visit_wrapper"):
        return {}
    if not isinstance(to_pattern, types.FunctionType) or escaping is None:
        return {}
    if base.__code__.co_freevars or to_pattern.__code__.co_freevars:
        return {}

    def eval_escaping(s: str) -> str:
        if "\\" not in s and s.isprintable():
            return s
        return escaping(s)  # type: ignore[no-any-return]

    space = {**vars(lg), "eval_escaping": eval_escaping}
    quick = types.FunctionType(to_pattern.__code__, space, to_pattern.__name__, to_pattern.__defaults__)
    space = {**vars(lg), "_literal_to_pattern": quick}
    literal = types.FunctionType(base.__code__, space, base.__name__, base.__defaults__)
    return {"literal": type(wrapped)(literal, wrapped.visit_wrapper)}


def _quick_dispatch(lg: Any) -> dict[str, type]:
    """Subclasses of the transformers and the visitor ``Grammar.compile`` uses, for its copy
    (``compile_once``): the same methods called in the same order with the same arguments,
    each instance looking a tree's method up once instead of at every node.  Lark's
    ``_call_userfunc`` runs ``getattr(self, tree.data)`` a node, and on an ``@inline_args``
    class (``PrepareLiterals``, ``EBNF_to_BNF``) that builds a new ``_VArgsWrapper`` with
    ``functools.update_wrapper`` each time; an in-place transform also walks each node's
    children through a generator.  A class of another shape is left as it is."""
    from lark import visitors as v
    from lark.exceptions import GrammarError, VisitError

    Tree, Token, Discard = v.Tree, v.Token, v.Discard
    default = object()  # no method of that name: __default__

    def methods(self: Any) -> dict[Any, Any]:
        table = self.__dict__.get("_cfgmask_methods")
        if table is None:
            table = self.__dict__["_cfgmask_methods"] = {}
        return table

    def lookup(self: Any, data: Any) -> Any:  # the first time this instance meets ``data``
        try:
            f = getattr(self, data)
        except AttributeError:
            found = (default, None)
        else:
            found = (f, getattr(f, "visit_wrapper", None))
        if data not in self.__dict__:  # a method of the class: the same object each time
            methods(self)[data] = found
        return found

    def call_userfunc(self: Any, tree: Any, new_children: Any = None) -> Any:  # Transformer's
        children = new_children if new_children is not None else tree.children
        try:
            f, wrapper = self._cfgmask_methods[tree.data]
        except (AttributeError, KeyError):
            f, wrapper = lookup(self, tree.data)
        if f is default:
            return self.__default__(tree.data, children, tree.meta)
        try:
            if wrapper is not None:
                return f.visit_wrapper(f, tree.data, children, tree.meta)
            return f(children)
        except GrammarError:
            raise
        except Exception as e:  # noqa: BLE001 - as Lark wraps it (no "from": Lark has none)
            raise VisitError(tree.data, tree, e)  # noqa: B904

    def transform_in_place(self: Any, tree: Any) -> Any:  # Transformer_InPlace's
        call = self._call_userfunc
        tokens = self.__visit_tokens__
        for subtree in tree.iter_subtrees():
            children = []
            for c in subtree.children:
                if isinstance(c, Tree):
                    res = call(c)
                elif tokens and isinstance(c, Token):
                    res = self._call_userfunc_token(c)
                else:
                    res = c
                if res is not Discard:
                    children.append(res)
            subtree.children = children
        return call(tree)

    def visitor_call(self: Any, tree: Any) -> Any:  # VisitorBase's
        try:
            f = self._cfgmask_methods[tree.data]
        except (AttributeError, KeyError):
            f = getattr(self, tree.data, self.__default__)
            if tree.data not in self.__dict__:
                methods(self)[tree.data] = f
        return f(tree)

    out: dict[str, type] = {}
    for name in _COMPILE_CLASSES:
        cls = getattr(lg, name)
        body: dict[str, Any] = {}
        if name == "PrepareLiterals":
            body.update(_quick_literals(lg, cls))
        if issubclass(cls, v.Transformer) and cls._call_userfunc is v.Transformer._call_userfunc:
            body["_call_userfunc"] = call_userfunc
            if issubclass(cls, v.Transformer_InPlace) and (
                cls.transform is v.Transformer_InPlace.transform
                and cls._transform_tree is v.Transformer_InPlace._transform_tree
                and cls._transform_children is v.Transformer._transform_children
            ):
                body["transform"] = transform_in_place
        elif issubclass(cls, v.Visitor) and cls._call_userfunc is v.VisitorBase._call_userfunc:
            body["_call_userfunc"] = visitor_call
        if body:
            body.update(__module__=cls.__module__, __qualname__=cls.__qualname__)
            out[name] = type(name, (cls,), body)
    return out


def _parse_grammar(text: str, name: str, start: str = "start") -> Any:
    tree = parse_tree(text) if start == "start" else None
    if tree is not None:
        return tree
    state = _setup()
    assert state is not None
    return state["lg"]._parse_grammar(text, name, start)


def parse_tree(text: str) -> Any:
    """The prepared tree Lark's ``_parse_grammar(text, ...)`` returns, or ``None`` where this
    parser leaves the text to Lark's."""
    state = _setup()
    if state is None:
        return None
    try:
        return _Parser(state, text + "\n").start()
    except _Reject:
        return None


_IGNORED = frozenset(("WS", "COMMENT", "BACKSLASH"))
_ATOM_START = frozenset(("_LPAR", "_LBRA", "TERMINAL", "RULE", "STRING", "REGEXP"))


class _Parser:
    def __init__(self, state: dict[str, Any], text: str) -> None:
        self.Tree = state["Tree"]
        self.Terminal = state["Terminal"]
        self.NonTerminal = state["NonTerminal"]
        self.toks = self._lex(state, text)
        self.i = 0

    @staticmethod
    def _lex(state: dict[str, Any], text: str) -> list[tuple[str, Any]]:
        Token = state["Token"]
        match = state["scanner"].match
        newline = state["newline"]
        out: list[tuple[str, Any]] = []
        pos, line, line_start, end = 0, 1, 0, len(text)
        while pos < end:
            m = match(text, pos)
            if m is None or m.end() == pos:
                raise _Reject
            kind = m.lastgroup
            assert kind is not None
            value = m.group()
            column = pos - line_start + 1
            start_line = line
            new_pos = m.end()
            if kind in newline:
                count = value.count("\n")
                if count:
                    line += count
                    line_start = pos + value.rindex("\n") + 1
            if kind not in _IGNORED:
                tok = Token(kind, value, pos, start_line, column, line, new_pos - line_start + 1, new_pos)
                out.append((kind, tok))
            pos = new_pos
        out.append(("$END", None))
        return out

    def peek(self) -> str:
        return self.toks[self.i][0]

    def take(self, kind: str) -> Any:
        k, tok = self.toks[self.i]
        if k != kind:
            raise _Reject
        self.i += 1
        return tok

    def start(self) -> Any:
        items = []
        while True:
            k = self.peek()
            if k == "$END":
                break
            if k == "_NL":
                self.i += 1
            elif k in ("RULE", "RULE_MODIFIERS"):
                items.append(self.rule())
            elif k == "TERMINAL":
                items.append(self.term())
            elif k in ("_OVERRIDE", "_EXTEND"):
                self.i += 1
                inner = self.term() if self.peek() == "TERMINAL" else self.rule()
                items.append(self.Tree("override" if k == "_OVERRIDE" else "extend", [inner]))
            elif k == "_IGNORE":
                self.i += 1
                items.append(self.Tree("ignore", [self.expansions()]))
                self.take("_NL")
            elif k == "_DECLARE":
                self.i += 1
                items.append(self.declare())
            elif k == "_IMPORT":
                self.i += 1
                items.append(self.import_())
            else:
                raise _Reject
        if not items and self.toks[0][0] == "$END":
            raise _Reject  # an empty grammar: Lark's parser reports it
        return self.Tree("start", items)

    def rule(self) -> Any:
        Tree = self.Tree
        mods = [self.take("RULE_MODIFIERS")] if self.peek() == "RULE_MODIFIERS" else []
        name = self.take("RULE")
        params = []
        if self.peek() == "_LBRACE":
            self.i += 1
            params.append(self.take("RULE"))
            while self.peek() == "_COMMA":
                self.i += 1
                params.append(self.take("RULE"))
            self.take("_RBRACE")
        priority = []
        if self.peek() == "_DOT":
            self.i += 1
            priority.append(self.take("NUMBER"))
        self.take("_COLON")
        body = self.expansions()
        self.take("_NL")
        return Tree(
            "rule",
            [
                Tree("rule_modifiers", mods),
                name,
                Tree("template_params", params),
                Tree("priority", priority),
                body,
            ],
        )

    def term(self) -> Any:
        children = [self.take("TERMINAL")]
        if self.peek() == "_DOT":
            self.i += 1
            children.append(self.take("NUMBER"))
        self.take("_COLON")
        children.append(self.expansions())
        self.take("_NL")
        return self.Tree("term", children)

    def declare(self) -> Any:
        symbols = []
        while self.peek() in ("TERMINAL", "RULE"):
            k, tok = self.toks[self.i]
            self.i += 1
            symbols.append(self._symbol(k, tok))
        if not symbols:
            raise _Reject
        self.take("_NL")
        return self.Tree("declare", symbols)

    def import_(self) -> Any:
        Tree = self.Tree
        relative = self.peek() == "_DOT"
        if relative:
            self.i += 1
        path = [self.name()]
        while self.peek() == "_DOT":
            self.i += 1
            path.append(self.name())
        children = [Tree("import_rel" if relative else "import_lib", path)]
        k = self.peek()
        if k == "_LPAR":
            self.i += 1
            names = [self.name()]
            while self.peek() == "_COMMA":
                self.i += 1
                names.append(self.name())
            self.take("_RPAR")
            children.append(Tree("name_list", names))
        elif k == "_TO":
            self.i += 1
            children.append(self.name())
        self.take("_NL")
        return Tree("import", children)

    def name(self) -> Any:
        k, tok = self.toks[self.i]
        if k not in ("RULE", "TERMINAL"):
            raise _Reject
        self.i += 1
        return tok

    def _symbol(self, kind: str, tok: Any) -> Any:
        if kind == "TERMINAL":
            return self.Terminal(str(tok), filter_out=tok.startswith("_"))
        return self.NonTerminal(tok.value)

    def expansions(self) -> Any:
        alts = [self.alias()]
        while self.peek() in ("_OR", "_NL_OR"):
            self.i += 1
            alts.append(self.alias())
        return self.Tree("expansions", alts)

    def alias(self) -> Any:
        exprs = []
        while self.peek() in _ATOM_START:
            exprs.append(self.expr())
        expansion = self.Tree("expansion", exprs)
        if self.peek() == "_TO":
            self.i += 1
            target = self.take("RULE")
            return self.Tree("alias", [expansion, self.NonTerminal(target.value)])
        return expansion

    def expr(self) -> Any:
        atom = self.atom()
        k = self.peek()
        if k == "OP":
            return self.Tree("expr", [atom, self.take("OP")])
        if k == "TILDE":
            children = [atom, self.take("TILDE"), self.take("NUMBER")]
            if self.peek() == "_DOTDOT":
                self.i += 1
                children.append(self.take("NUMBER"))
            return self.Tree("expr", children)
        return atom

    def atom(self) -> Any:
        k, tok = self.toks[self.i]
        if k == "_LPAR":
            self.i += 1
            inner = self.expansions()
            self.take("_RPAR")
            return inner
        if k == "_LBRA":
            self.i += 1
            inner = self.expansions()
            self.take("_RBRA")
            return self.Tree("maybe", [inner])
        return self.value()

    def value(self) -> Any:
        Tree = self.Tree
        k, tok = self.toks[self.i]
        self.i += 1
        if k == "TERMINAL":
            return Tree("value", [self._symbol(k, tok)])
        if k == "RULE":
            symbol = self._symbol(k, tok)
            if self.peek() != "_LBRACE":
                return Tree("value", [symbol])
            self.i += 1
            args = [symbol, self.value()]
            while self.peek() == "_COMMA":
                self.i += 1
                args.append(self.value())
            self.take("_RBRACE")
            return Tree("value", [Tree("template_usage", args)])
        if k == "STRING" and self.peek() == "_DOTDOT":
            self.i += 1
            return Tree("value", [Tree("range", [tok, self.take("STRING")])])
        if k in ("STRING", "REGEXP"):
            return Tree("value", [Tree("literal", [tok])])
        raise _Reject
