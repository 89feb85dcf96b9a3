"""The llguidance extensions of a Lark grammar as terminals of the token-level grammar.

:func:`opaque_terminals` turns each placeholder terminal of :mod:`.lark_ext` (``%json``,
``%regex``, special tokens, lazy and ``&``/``~`` terminals) into one variant for
:func:`.lark_follow.to_ir`: an expression over helper rules of its own (named
``<placeholder>/<rule>``), the characters it may start with, and the token names it uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .. import ir
from ..errors import GrammarError
from .lark_ext import Preprocessed


@dataclass
class Opaque:
    """The placeholder and lazy terminals a grammar uses, ready for :func:`.lark_follow.to_ir`:
    each as one variant without follow restriction, the characters it may start with, the
    helper rules it refers to (named ``<placeholder>/<rule>``), and the token texts used."""

    variants: dict[str, list[tuple[ir.Expr, tuple[tuple[int, int], ...]]]] = field(default_factory=dict)
    first: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    rules: dict[str, ir.Expr] = field(default_factory=dict)
    token_texts: set[bytes] = field(default_factory=set)


def opaque_terminals(
    pre: Preprocessed | None, used: list[str], terminals: dict[str, Any], text: str
) -> Opaque:
    out = Opaque()
    if pre is None:
        return out
    for name in used:
        if name in pre.embedded:
            emb = pre.embedded[name]
            expr, rules = emb.expr, emb.rules
        elif name in pre.lazy:
            expr, rules = _lazy(name, terminals[name], pre, text)
        elif name in pre.combined:
            expr, rules = _boolean(name, pre.combined[name], terminals, text)
        else:
            continue
        renamed = {r: f"{name}/{r}" for r in rules}
        expr = map_refs(expr, renamed)
        helper = {renamed[r]: map_refs(body, renamed) for r, body in rules.items()}
        out.rules.update(helper)
        out.variants[name] = [(expr, ())]
        out.first[name] = first_chars(expr, helper)
        out.token_texts |= _token_texts(expr, helper)
    return out


def _lazy(name: str, term: Any, pre: Preprocessed, text: str) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """The lazy form of terminal ``name``: its strings with no proper prefix in its language."""
    from .json_schema import chardfa
    from .lark import terminal_regexp
    from .regex import regex_to_expr

    rule = pre.lazy[name].rule
    try:
        dfa = chardfa.from_expr(regex_to_expr(terminal_regexp(term.pattern), anchors=False)).minimize()
    except GrammarError as e:
        at = re.search(rf"^[ \t]*[?!]?{re.escape(rule)}\b", text, re.MULTILINE)
        raise GrammarError.at(f"lazy rule {rule}: {e.message}", text, at.start() if at else 0) from None
    trans = [[-1] * len(row) if acc else row for row, acc in zip(dfa.trans, dfa.accept, strict=True)]
    rules: dict[str, ir.Expr] = {}
    expr = chardfa.CharDFA(dfa.atoms, trans, list(dfa.accept)).to_expr(rules, "lazy")
    return expr, rules


def _boolean(
    name: str, ops: list[tuple[str, bool]], terminals: dict[str, Any], text: str
) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """Terminal ``name`` = the intersection of its operands (complemented where negated)."""
    from .json_schema import chardfa
    from .lark import terminal_regexp
    from .regex import regex_to_expr

    try:
        dfas = [
            chardfa.from_expr(regex_to_expr(terminal_regexp(terminals[h].pattern), anchors=False))
            for h, _ in ops
        ]
        dfa = chardfa.product(dfas, lambda v: all(a != neg for a, (_, neg) in zip(v, ops, strict=True)))
    except GrammarError as e:
        at = re.search(rf"^[ \t]*{re.escape(name)}\b", text, re.MULTILINE)
        raise GrammarError.at(f"terminal {name}: {e.message}", text, at.start() if at else 0) from None
    rules: dict[str, ir.Expr] = {}
    return dfa.to_expr(rules, "and"), rules


def map_refs(e: ir.Expr, names: dict[str, str]) -> ir.Expr:
    """``e`` with references renamed by ``names``."""
    memo: dict[int, ir.Expr] = {}

    def walk(x: ir.Expr) -> ir.Expr:
        got = memo.get(id(x))
        if got is not None:
            return got
        if isinstance(x, ir.Ref):
            out: ir.Expr = ir.Ref(names.get(x.name, x.name))
        elif isinstance(x, ir.Seq):
            out = ir.Seq(tuple(walk(i) for i in x.items))
        elif isinstance(x, ir.Alt):
            out = ir.Alt(tuple(walk(i) for i in x.items))
        elif isinstance(x, ir.Repeat):
            out = ir.Repeat(walk(x.item), x.lo, x.hi)
        else:
            out = x
        memo[id(x)] = out
        return out

    return walk(e)


def _children(e: ir.Expr) -> tuple[ir.Expr, ...]:
    if isinstance(e, (ir.Seq, ir.Alt)):
        return e.items
    if isinstance(e, ir.Repeat):
        return (e.item,) if e.hi != 0 else ()
    return ()


def _token_texts(expr: ir.Expr, rules: dict[str, ir.Expr]) -> set[bytes]:
    out: set[bytes] = set()
    stack = [expr, *rules.values()]
    while stack:
        e = stack.pop()
        if isinstance(e, ir.TokenText):
            out.add(e.text)
        stack.extend(_children(e))
    return out


_NON_ASCII = ((0x80, ir.MAX_CODE_POINT),)


def first_chars(expr: ir.Expr, rules: dict[str, ir.Expr]) -> tuple[tuple[int, int], ...]:
    """The characters a string of ``expr`` (over ``rules``) may start with: an
    over-approximation where raw bytes are involved (a byte of 0x80 or more stands for every
    non-ASCII character), which is all the follow-restriction pass needs (a character that
    cannot come next is never wrongly forbidden).  Token terminals start with no character."""
    nullable: dict[str, bool] = {r: False for r in rules}
    changed = True
    while changed:
        changed = False
        for r, body in rules.items():
            if not nullable[r] and _nullable(body, nullable):
                nullable[r] = changed = True
    seen: set[str] = set()
    out: list[tuple[int, int]] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Literal):
            if e.data:
                out += _first_of_bytes(e.data)
        elif isinstance(e, ir.CharClass):
            out += e.ranges
        elif isinstance(e, ir.ByteClass):
            out += [(lo, min(hi, 0x7F)) for lo, hi in e.ranges if lo < 0x80]
            out += list(_NON_ASCII) if any(hi >= 0x80 for _, hi in e.ranges) else []
        elif isinstance(e, ir.LiteralSet):
            out += [(0x22, 0x22)] if e.json else [r for w in e.words if w for r in _first_of_bytes(w)]
        elif isinstance(e, ir.Ref):
            if e.name not in seen and e.name in rules:
                seen.add(e.name)
                stack.append(rules[e.name])
        elif isinstance(e, ir.Seq):
            for item in e.items:
                stack.append(item)
                if not _nullable(item, nullable):
                    break
        else:
            stack.extend(_children(e))
    return ir.normalize_ranges(out)


def _first_of_bytes(data: bytes) -> list[tuple[int, int]]:
    return [(data[0], data[0])] if data[0] < 0x80 else list(_NON_ASCII)


def _nullable(e: ir.Expr, rules: dict[str, bool]) -> bool:
    if isinstance(e, (ir.Literal, ir.LiteralSet)):
        return isinstance(e, ir.Literal) and not e.data
    if isinstance(e, ir.Ref):
        return rules.get(e.name, False)
    if isinstance(e, ir.Seq):
        return all(_nullable(x, rules) for x in e.items)
    if isinstance(e, ir.Alt):
        return any(_nullable(x, rules) for x in e.items)
    if isinstance(e, ir.Repeat):
        return e.lo == 0 or _nullable(e.item, rules)
    return isinstance(e, ir.Lookahead)
