"""String schemas: length, pattern (search semantics), format, excluded values.

Constraints are first written over *decoded* characters, then mapped to every
JSON spelling by :class:`lexical.Encoder` (see the lexical module's doc).

``pattern`` follows jsonschema, i.e. Python's ``re.search``: the pattern may
match anywhere.  Each top-level alternative ``b`` of the pattern becomes
``.* b .*`` with the wrapping dropped on the side of a leading ``^``/``\\A``
or a trailing ``$``/``\\Z``; a trailing ``$`` also admits one final ``"\\n"``
(Python's ``$`` matches before a final newline).  Anchors anywhere else are
rejected.  Lengths count code points (``len()`` of the decoded string).

Several constraints on the same string (pattern, format, length bounds, values
excluded by ``not``) are intersected directly where that is cheap (a length
bound implied by the pattern/format, or a pattern ``fixed... X{m,n} fixed...``
whose one variable part repeats a single character), otherwise as a product of
character automata (:mod:`.chardfa`), exact up to its size bound.

``format`` names no JSON Schema draft defines (``"topic"``) are annotations, as
the specification and the jsonschema package treat them; formats some validator
asserts but this module has no reading of (``iri``, ``regex``...) are rejected.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ... import ir
from ...errors import GrammarError
from . import _ir_util as U
from . import chardfa
from .formats import FORMAT_READINGS, FORMATS
from .lexical import ALL_CHARS, Encoder, encode_class
from .report import pointer

if TYPE_CHECKING:
    from .walk import SchemaCompiler

ANY_CHAR = ir.CharClass(ALL_CHARS)
# Formats some validator asserts (the jsonschema package's checkers, drafts 3 to 2020-12) that
# this converter has no reading of: rejected.  Any other format name is defined by no vocabulary:
# an annotation, as JSON Schema says and the jsonschema package does (it passes every string).
ASSERTED_ELSEWHERE = {
    "idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "regex", "relative-json-pointer",
    "color", "host-name", "ip-address", "draft3 time",
}  # fmt: skip
UNKNOWN_FORMAT = "a format no JSON Schema draft defines: an annotation (jsonschema passes every string)"
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
    from ..regex import regex_to_expr

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
    def __init__(self, c: SchemaCompiler) -> None:
        self.c = c

    def string(self, s: dict[str, Any], path: str, excluded: list[str]) -> ir.Expr:
        body = self.body(s, path, excluded)
        return ir.NOTHING if body == ir.NOTHING else ir.seq(U.lit('"'), body, U.lit('"'))

    def body(self, s: dict[str, Any], path: str, excluded: list[str] | None = None) -> ir.Expr:
        c = self.c
        lo = s.get("minLength", 0)
        hi = s.get("maxLength")
        if hi is not None and lo > hi:  # no string (the walk names the two bounds)
            for k in ("minLength", "maxLength"):
                c.rep.enforced(pointer(path, k), k, "code points")
            return ir.NOTHING
        # the character-level languages to intersect, with the keyword each comes from
        langs: list[tuple[str, list[ir.Expr]]] = []
        if "pattern" in s:
            where = pointer(path, "pattern")
            try:
                langs.append(("pattern", search_language(s["pattern"])))
                c.rep.enforced(where, "pattern", "re.search semantics")
            except GrammarError as e:
                c.rep.rejected(where, "pattern", e.message)
        if "format" in s:
            where = pointer(path, "format")
            fmt = s["format"]
            if not isinstance(fmt, str):
                c.rep.rejected(where, "format", "format is not a string")
            elif fmt not in FORMATS and fmt not in ASSERTED_ELSEWHERE:
                c.rep.enforced(where, "format", UNKNOWN_FORMAT)
            elif fmt not in FORMATS:
                c.rep.rejected(where, "format", f"unsupported format {fmt!r}")
            else:
                langs.append(("format", [FORMATS[fmt]()]))
                c.rep.enforced(where, "format", FORMAT_READINGS[fmt])
        bounded = bool(lo) or hi is not None
        if not langs and not excluded:
            for k in ("minLength", "maxLength"):
                if k in s:
                    c.rep.enforced(pointer(path, k), k, "code points")
            if not bounded:
                return ir.Repeat(c.char_generic(), 0, None)
            # One shared rule per bound: the compiler then builds (and counts) each bounded
            # repetition once, not once per property that uses it.
            return c._rule(f"chars-{lo}-{hi}", lambda: ir.Repeat(c.char_wf(), lo, hi))
        if not langs and not bounded:
            c.rep.enforced(pointer(path, "not"), "not")
            return not_in(list(excluded or []), c.rules, c.canonical)
        if len(langs) == 1 and not excluded:
            lang = langs[0][1]
            if bounded:  # cheap when the bound is implied or one repetition absorbs it
                restricted = [restrict_length(x, lo, hi, c.rules) for x in lang]
                lang = [r for r in restricted if r is not None] if None not in restricted else []
            if lang or not bounded:
                for k in ("minLength", "maxLength"):
                    if k in s:
                        c.rep.enforced(pointer(path, k), k, "code points")
                enc = Encoder(c.rules, "str", canonical=c.canonical)
                return ir.alt(*[enc.encode(x) for x in lang]) if lang else ir.NOTHING
        # the general case: a product of character automata
        kws = [k for k, _ in langs] + [k for k in ("minLength", "maxLength") if k in s]
        kws += ["not"] if excluded else []
        try:
            parts = [chardfa.from_expr(ir.alt(*x)) for _, x in langs]
            if bounded:
                parts.append(chardfa.length(lo, hi))
            if excluded:
                out = chardfa.product([*parts, chardfa.words(excluded)], lambda f: all(f[:-1]) and not f[-1])
            else:
                out = chardfa.intersection(parts)
            rules: dict[str, ir.Expr] = {}
            expr = out.to_expr(rules, "str")
        except GrammarError as e:
            # non-strict mode gets a superset: the first language alone (still enforced), or any string
            for k in kws[1:] if langs else kws:
                c.rep.rejected(pointer(path, k), k, f"{' + '.join(kws)}: {e.message}")
            if not langs:
                return ir.Repeat(c.char_generic(), 0, None)
            return ir.alt(*[Encoder(c.rules, "str", canonical=c.canonical).encode(x) for x in langs[0][1]])
        for k in kws:
            c.rep.enforced(pointer(path, k), k, f"intersected ({' + '.join(kws)}) as automata")
        return Encoder(c.rules, "str", share_classes=True, canonical=c.canonical).encode_all(expr, rules)


NOT_IN_RULE_SIZE = 24  # trie nodes: bigger subtrees of ``not_in`` become rules of their own


def not_in(names: list[str], rules: dict[str, ir.Expr] | None = None, canonical: bool = False) -> ir.Expr:
    """JSON spellings (no quotes; with ``canonical`` the canonical one) of every well-formed
    string not in ``names``.

    With ``rules``, subtrees of the trie of names with at least ``NOT_IN_RULE_SIZE`` nodes
    become rules: the compiler minimizes each before embedding it, whereas one expression
    for 90 names makes its subset construction pass through ~20x the minimal states (one
    copy of the ``.*`` tail and of each escape's digits per trie node)."""
    trie: dict[str, Any] = {}
    for n in names:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[""] = {}
    anything = ir.Repeat(encode_class(ALL_CHARS, canonical), 0, None)

    def size(node: dict[str, Any]) -> int:
        return 1 + sum(size(v) for k, v in node.items() if k)

    def build(node: dict[str, Any], top: bool) -> ir.Expr:
        if rules is not None and not top and size(node) >= NOT_IN_RULE_SIZE:
            name = U.fresh(rules, "key-not-in")
            rules[name] = build(node, True)
            return ir.Ref(name)
        alts: list[ir.Expr] = [] if "" in node else [ir.EPSILON]
        chars = sorted(ord(k) for k in node if k)
        for cp in chars:
            alts.append(ir.seq(encode_class(((cp, cp),), canonical), build(node[chr(cp)], False)))
        others = ir.complement_ranges(ir.normalize_ranges([(cp, cp) for cp in chars]))
        if others:
            alts.append(ir.seq(encode_class(others, canonical), anything))
        return ir.alt(*alts)

    return build(trie, True)
