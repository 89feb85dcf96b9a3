"""String schemas: length, pattern (search semantics), format, excluded values.

Constraints are first written over *decoded* characters, then mapped to every
JSON spelling by :class:`lexical.Encoder` (see the lexical module's doc).

``pattern`` follows jsonschema, i.e. Python's ``re.search``: the pattern may
match anywhere.  Each top-level alternative ``b`` of the pattern becomes
``.* b .*`` with the wrapping dropped on the side of a leading ``^``/``\\A``
or a trailing ``$``/``\\Z``; a trailing ``$`` also admits one final ``"\\n"``
(Python's ``$`` matches before a final newline).  Anchors anywhere else are
rejected.  Lengths count code points (``len()`` of the decoded string).

Two constraints on the same string are intersected only where that is exact
without an automaton product: a length bound implied by the pattern/format,
or a pattern of the shape ``fixed... X{m,n} fixed...`` whose one variable
part repeats a single character.  Other combinations are rejected.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .. import ir
from ..errors import GrammarError
from . import _ir_util as U
from .formats import FORMAT_READINGS, FORMATS
from .lexical import ALL_CHARS, Encoder, encode_class
from .report import pointer

if TYPE_CHECKING:
    from .compiler import Compiler

ANY_CHAR = ir.CharClass(ALL_CHARS)
_GLOBAL_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


def split_top_level(p: str) -> list[str]:
    """Split a pattern at its top-level ``|`` (outside groups and classes)."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < len(p) and p[i] == "^":
                i += 1
            if i < len(p) and p[i] == "]":
                i += 1
            while i < len(p) and p[i] != "]":
                i += 2 if p[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(p[start:i])
            start = i + 1
        i += 1
    out.append(p[start:])
    return out


def _has_anchor(body: str, flags: str) -> bool:
    try:
        from re import _parser as sre  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover
        import sre_parse as sre  # type: ignore[no-redef]
    try:
        tree = sre.parse(f"(?{flags})" + body if flags else body)
    except re.error:
        return False  # the regex front end reports the syntax error

    def walk(x: Any) -> bool:
        if isinstance(x, sre.SubPattern):
            return any(op is sre.AT or walk(av) for op, av in x.data)
        if isinstance(x, (list, tuple)):
            return any(walk(y) for y in x)
        return False

    return walk(tree)


def search_language(p: str) -> list[ir.Expr]:
    """Character-level alternatives whose union is ``{s : re.search(p, s)}``."""
    from ..regex_frontend import regex_to_expr

    m = _GLOBAL_FLAGS.match(p)
    flags = m.group(1) if m else ""
    rest = p[m.end() :] if m else p
    if "m" in flags or "x" in flags:
        if "^" in rest or "$" in rest or "\\A" in rest or "\\Z" in rest or "|" in rest:
            raise GrammarError("patterns with the MULTILINE or VERBOSE flag and anchors are not supported")
    out: list[ir.Expr] = []
    anything = ir.Repeat(ANY_CHAR, 0, None)
    for branch in split_top_level(rest):
        start = branch.startswith("^") or branch.startswith("\\A")
        body = branch[1 if branch.startswith("^") else 2 :] if start else branch
        end_kind = ""
        if body.endswith("\\Z") and not _escaped(body, len(body) - 2):
            end_kind, body = "Z", body[:-2]
        elif body.endswith("$") and not _escaped(body, len(body) - 1):
            end_kind, body = "$", body[:-1]
        if _has_anchor(body, flags):
            raise GrammarError(f"anchor inside pattern {p!r}: only a leading ^ and trailing $ are supported")
        expr = regex_to_expr(f"(?{flags})(?:{body})" if flags else f"(?:{body})")
        head = [] if start else [anything]
        tails: list[list[ir.Expr]] = [[anything]] if not end_kind else [[]]
        if end_kind == "$":
            tails.append([U.lit("\n")])
        for tail in tails:
            out.append(ir.seq(*head, expr, *tail) if head or tail else expr)
    return out


def _escaped(s: str, i: int) -> bool:
    n = 0
    while i - 1 - n >= 0 and s[i - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def restrict_length(e: ir.Expr, lo: int, hi: int | None, rules: dict[str, ir.Expr]) -> ir.Expr | None:
    """``e`` ∩ (strings of lo..hi characters), when ``e`` is fixed parts around one repetition
    of a single character; ``None`` when that shape does not apply."""
    a, b = U.char_lengths(e, rules)
    if a >= lo and (hi is None or (b is not None and b <= hi)):
        return e
    if isinstance(e, ir.Alt):
        parts = [restrict_length(x, lo, hi, rules) for x in e.items]
        return None if any(p is None for p in parts) else ir.alt(*parts)  # type: ignore[arg-type]
    items = list(e.items) if isinstance(e, ir.Seq) else [e]
    var = [i for i, x in enumerate(items) if U.char_lengths(x, rules)[0] != U.char_lengths(x, rules)[1]]
    if len(var) != 1:
        return None
    x = items[var[0]]
    if not isinstance(x, ir.Repeat) or U.char_lengths(x.item, rules) != (1, 1):
        return None
    fixed = sum(U.char_lengths(y, rules)[0] for i, y in enumerate(items) if i != var[0])
    nlo = max(x.lo, lo - fixed)
    nhi = None if hi is None else hi - fixed
    if x.hi is not None:
        nhi = x.hi if nhi is None else min(nhi, x.hi)
    if nhi is not None and nhi < nlo:
        return ir.NOTHING
    items[var[0]] = ir.Repeat(x.item, nlo, nhi)
    return ir.seq(*items)


class Strings:
    def __init__(self, c: Compiler) -> None:
        self.c = c

    def string(self, s: dict[str, Any], path: str, excluded: list[str]) -> ir.Expr:
        body = self.body(s, path, excluded)
        return ir.NOTHING if body == ir.NOTHING else ir.seq(U.lit('"'), body, U.lit('"'))

    def body(self, s: dict[str, Any], path: str, excluded: list[str] | None = None) -> ir.Expr:
        c = self.c
        lo = s.get("minLength", 0)
        hi = s.get("maxLength")
        for k in ("minLength", "maxLength"):
            if k in s and (not isinstance(s[k], int) or isinstance(s[k], bool) or s[k] < 0):
                raise GrammarError(f"{pointer(path, k)} must be a nonnegative integer")
        lang: list[ir.Expr] | None = None
        if "pattern" in s:
            where = pointer(path, "pattern")
            try:
                lang = search_language(s["pattern"])
                c.rep.enforced(where, "pattern", "re.search semantics")
            except GrammarError as e:
                c.rep.rejected(where, "pattern", e.message)
        if "format" in s:
            where = pointer(path, "format")
            fmt = s["format"]
            if fmt not in FORMATS:
                c.rep.rejected(where, "format", f"unknown format {fmt!r}")
            elif lang is not None:
                c.rep.rejected(where, "format", "format together with pattern is not supported")
            else:
                lang = [FORMATS[fmt]()]
                c.rep.enforced(where, "format", FORMAT_READINGS[fmt])
        if excluded:
            if lang is not None or lo or hi is not None:
                c.rep.rejected(pointer(path, "not"), "not", "excluding values from a constrained string")
            else:
                c.rep.enforced(pointer(path, "not"), "not")
                return not_in(excluded)
        if lang is None:
            for k in ("minLength", "maxLength"):
                if k in s:
                    c.rep.enforced(pointer(path, k), k, "code points")
            if lo == 0 and hi is None:
                return ir.Repeat(c.char_generic(), 0, None)
            return ir.Repeat(c.char_wf(), lo, hi)
        if lo or hi is not None:
            restricted = [restrict_length(x, lo, hi, c.rules) for x in lang]
            if any(r is None for r in restricted):
                for k in ("minLength", "maxLength"):
                    if k in s:
                        c.rep.rejected(pointer(path, k), k, "length bound together with a pattern/format")
            else:
                lang = [r for r in restricted if r is not None]
                for k in ("minLength", "maxLength"):
                    if k in s:
                        c.rep.enforced(pointer(path, k), k, "code points")
        enc = Encoder(c.rules, "str")
        return ir.alt(*[enc.encode(x) for x in lang])


def not_in(names: list[str]) -> ir.Expr:
    """JSON spellings (no quotes) of every well-formed string not in ``names``."""
    trie: dict[str, Any] = {}
    for n in names:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[""] = {}
    anything = ir.Repeat(encode_class(ALL_CHARS), 0, None)

    def build(node: dict[str, Any]) -> ir.Expr:
        alts: list[ir.Expr] = [] if "" in node else [ir.EPSILON]
        chars = sorted(ord(k) for k in node if k)
        for cp in chars:
            alts.append(ir.seq(encode_class(((cp, cp),)), build(node[chr(cp)])))
        others = ir.complement_ranges(ir.normalize_ranges([(cp, cp) for cp in chars]))
        if others:
            alts.append(ir.seq(encode_class(others), anything))
        return ir.alt(*alts)

    return build(trie)
