"""String schemas: length, pattern (search semantics), format, excluded values.

Constraints are first written over *decoded* characters, then mapped to every
JSON spelling by :class:`lexical.Encoder` (see the lexical module's doc).

``pattern`` is an ECMA-262 regular expression with the ``u`` flag, as JSON Schema says
(draft 2020-12, 6.4): ``\\d`` is ``[0-9]``, ``\\w`` ``[A-Za-z0-9_]``, ``\\p{Letter}`` a
Unicode property (:mod:`..ecmascript`), and the pattern may match anywhere (a search).  Each
top-level alternative ``b`` of the pattern becomes ``[^]* b [^]*`` with the wrapping dropped on
the side of a leading ``^`` or a trailing ``$`` (:func:`..regex.ecmascript_search`); it is
matched over the decoded characters, whatever escapes spell them in the JSON text.  Lengths
count code points (``len()`` of the decoded string).

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

import functools
from typing import TYPE_CHECKING, Any

from ... import ir
from ...errors import GrammarError
from . import _ir_util as U
from . import chardfa
from .formats import FORMAT_READINGS, FORMATS
from .lexical import ALL_CHARS, Encoder, encode_class
from .report import pointer
from .wellformed import pattern_tree

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as _c  # type: ignore[no-redef]

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


def search_language(p: str) -> list[ir.Expr]:
    """Character-level alternatives whose union is ``{s : /p/u.test(s)}`` (ECMA-262 search)."""
    return list(_search_language(p))


@functools.lru_cache(maxsize=1024)  # IR is immutable; schemas repeat their patterns
def _search_language(p: str) -> tuple[ir.Expr, ...]:
    from ..regex import ecmascript_search

    return tuple(ecmascript_search(p, pattern_tree(p)))


@functools.cache  # one expression per format name (FORMATS is fixed)
def format_language(fmt: str) -> ir.Expr:
    return FORMATS[fmt]()


# The automata below are pure functions of their keys, never changed once made (a CharDFA is
# read, not written), and kept across compiles until ``cfgmask.clear_caches()`` (which drops the
# patterns' and products', ``clear_memos``; the named formats' stay): a pattern or format met
# again costs a lookup, not a subset construction.  Failures (a GrammarError past MAX_STATES,
# the deadline's LimitError) are not kept.
@functools.lru_cache(maxsize=256)
def pattern_dfa(p: str) -> chardfa.CharDFA:
    if everywhere(p):  # ".*": every string; the general path spends ~280 us to say so
        return _every_dfa()
    return chardfa.from_expr(ir.alt(*search_language(p)))


def everywhere(p: str) -> bool:
    """Whether the search language of ``p`` is surely every string, by its shape: a sequence
    of unbounded ``*`` / ``*?`` repeats of one character or class each (``.*``, ``[a-z]*``,
    ``\\w*x*``, maybe in groups), or nothing.  That matches the empty string with no assertion,
    so ``/p/u`` finds a match in any string, and the general path (``search_language``, then
    ``chardfa.from_expr``) cannot fail on it.  Only a text ending in ``*``, ``*?`` or ``)`` (or
    empty) is parsed; False on anything else (the general path decides)."""
    if p and not p.endswith(("*", "*?", ")")):
        return False
    parsed = pattern_tree(p)  # the parse the well-formedness check made
    if parsed is None:
        return False  # the general path raises the error, with its message
    return _nullable_plain(parsed.nodes)


def _nullable_plain(nodes: list[Any]) -> bool:
    c = _c
    for op, av in nodes:
        if op is c.SUBPATTERN:
            if not _nullable_plain(list(av[-1])):
                return False
        elif op is c.MAX_REPEAT or op is c.MIN_REPEAT:
            lo, hi, item = av
            if lo != 0 or hi != c.MAXREPEAT or len(item) != 1 or not _one_char(item[0]):
                return False
        else:
            return False
    return True


def _one_char(node: Any) -> bool:
    """A literal or class of code points outside the surrogates (what ``.``, ``[^]``, ``\\d``
    and ``[a-z]`` parse to), nothing else."""
    c = _c
    op, av = node
    if op is c.LITERAL:
        return not 0xD800 <= av <= 0xDFFF
    if op is not c.IN:
        return False
    for kind, x in av:
        if kind is c.LITERAL:
            if 0xD800 <= x <= 0xDFFF:
                return False
        elif kind is c.RANGE:
            if x[0] <= 0xDFFF and x[1] >= 0xD800:
                return False
        else:
            return False
    return True


@functools.cache  # depends on no schema: kept by clear_caches, as the formats' automata are
def _every_dfa() -> chardfa.CharDFA:
    """The automaton of every string (of code points JSON text can spell): what
    ``chardfa.from_expr`` makes of ``.*``'s search language (tests/test_pattern_everywhere.py)."""
    from ..ecmascript import everything

    return chardfa.from_expr(ir.Repeat(ir.CharClass(everything()), 0, None))


@functools.lru_cache(maxsize=64)
def _format_dfa(fmt: str) -> chardfa.CharDFA:
    return chardfa.from_expr(ir.alt(format_language(fmt)))


@functools.lru_cache(maxsize=64)
def format_spelling(fmt: str, canonical: bool) -> ir.Expr:
    """What ``Strings.body`` makes of a ``format`` with no length, pattern or excluded value:
    the JSON spelling (quotes aside) of the format's language, which adds no rule (a format
    refers to none).  A pure function of the format's name, so it is kept across compiles and
    ``cfgmask.clear_caches()``, as the formats' automata are: a date-time costs ~75 us to
    encode, each compile, where every schema gets the same expression."""
    enc = Encoder({}, "str", canonical=canonical)
    return ir.alt(enc.encode(format_language(fmt)))


def _language_dfa(keyword: str, value: str) -> chardfa.CharDFA:
    """The automaton of a ``pattern`` or ``format`` value (``Strings.body``'s languages)."""
    return pattern_dfa(value) if keyword == "pattern" else _format_dfa(value)


# (the pattern and format, lengths, excluded values) -> the character-level expression of their
# product and its rules (CharDFA.to_expr): what Strings.body's general case builds before the
# encoder names the rules in the grammar
_Product = tuple[ir.Expr, dict[str, ir.Expr]]


@functools.lru_cache(maxsize=256)
def _product(
    langs: tuple[tuple[str, str], ...], lo: int, hi: int | None, bounded: bool, excluded: tuple[str, ...]
) -> _Product:
    parts = [_language_dfa(k, v) for k, v in langs]
    if bounded:
        parts.append(chardfa.length(lo, hi))
    if excluded:
        out = chardfa.product([*parts, chardfa.words(excluded)], lambda f: all(f[:-1]) and not f[-1])
    else:
        out = chardfa.intersection(parts)
    rules: dict[str, ir.Expr] = {}
    return out.to_expr(rules, "str"), rules


def pattern_matches(p: str, s: str) -> bool | None:
    """Whether ECMAScript's ``/p/u`` finds a match in ``s`` (what a validator's ``pattern``
    checks), by the automaton this module builds; None where the pattern is not supported."""
    try:
        return pattern_dfa(p).matches(s)
    except GrammarError:
        return None


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
    spans = [U.char_lengths(x, rules) for x in items]  # each item's once
    var = [i for i, (a, b) in enumerate(spans) if a != b]
    if len(var) != 1:
        return None
    x = items[var[0]]
    if not isinstance(x, ir.Repeat) or U.char_lengths(x.item, rules) != (1, 1):
        return None
    fixed = sum(a for i, (a, _) in enumerate(spans) if i != var[0])
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
        self._any: ir.Expr | None = None  # any string's body, once made

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
        # the character-level languages to intersect, with the keyword each comes from, and
        # each one's key (the keyword and its value) for the automata's caches
        langs: list[tuple[str, list[ir.Expr]]] = []
        keys: list[tuple[str, str]] = []
        if "pattern" in s:
            where = path + "/pattern"
            try:
                langs.append(("pattern", search_language(s["pattern"])))
                keys.append(("pattern", s["pattern"]))
                c.rep.enforced(where, "pattern", "ECMA-262 (u flag) search semantics")
            except GrammarError as e:
                c.rep.rejected(where, "pattern", e.message)
        if "format" in s:
            where = path + "/format"
            fmt = s["format"]
            if not isinstance(fmt, str):
                c.rep.rejected(where, "format", "format is not a string")
            elif fmt not in FORMATS and fmt not in ASSERTED_ELSEWHERE:
                c.rep.enforced(where, "format", UNKNOWN_FORMAT)
            elif fmt not in FORMATS:
                c.rep.rejected(where, "format", f"unsupported format {fmt!r}")
            else:
                langs.append(("format", [format_language(fmt)]))
                keys.append(("format", fmt))
                c.rep.enforced(where, "format", FORMAT_READINGS[fmt])
        bounded = bool(lo) or hi is not None
        if not langs and not excluded:
            for k in ("minLength", "maxLength"):
                if k in s:
                    c.rep.enforced(pointer(path, k), k, "code points")
            if not bounded:
                if self._any is None:  # the most common string of all: made once per schema
                    self._any = ir.Repeat(c.char_generic(), 0, None)
                return self._any
            # One shared rule per bound: the compiler then builds (and counts) each bounded
            # repetition once, not once per property that uses it.
            return c._rule(f"chars-{lo}-{hi}", lambda: ir.Repeat(c.char_wf(), lo, hi))
        if not langs and not bounded:
            c.rep.enforced(path + "/not", "not")
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
                if not bounded and keys[0][0] == "format":  # the format's spelling, made once
                    return format_spelling(keys[0][1], c.canonical)
                enc = Encoder(c.rules, "str", canonical=c.canonical)
                return ir.alt(*[enc.encode(x) for x in lang]) if lang else ir.NOTHING
        # the general case: a product of character automata
        kws = [k for k, _ in langs] + [k for k in ("minLength", "maxLength") if k in s]
        kws += ["not"] if excluded else []
        try:
            expr, rules = _product(tuple(keys), lo, hi, bounded, tuple(excluded or ()))
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
            nxt = node.get(ch)
            if nxt is None:
                nxt = node[ch] = {}
            node = nxt
        node[""] = {}
    anything = ir.Repeat(encode_class(ALL_CHARS, canonical), 0, None)

    sizes: dict[int, int] = {}  # id(node) -> its subtree's size: each counted once, not per ancestor

    def size(node: dict[str, Any]) -> int:
        n = sizes.get(id(node))
        if n is None:
            n = 1
            for k, v in node.items():
                if k:
                    n += size(v)
            sizes[id(node)] = n
        return n

    # the end of a name with nothing after it (most of the trie's leaves): any non-empty tail
    leaf = ir.seq(encode_class(ALL_CHARS, canonical), anything)
    # per call: a character's spelling, and the tail after the characters a node does not
    # continue with (most nodes have one child, and the same few characters recur)
    spelled: dict[int, ir.Expr] = {}
    rest: dict[tuple[tuple[int, int], ...], ir.Expr | None] = {}
    seq, alt, eps = ir.seq, ir.alt, ir.EPSILON

    def build(node: dict[str, Any], top: bool, small: bool) -> ir.Expr:
        """``small``: the subtree is below ``NOT_IN_RULE_SIZE`` (so is every subtree in it), or
        no rules are made: nothing under it is cut out."""
        if len(node) == 1 and "" in node:
            return leaf
        if not small and not top:
            if size(node) >= NOT_IN_RULE_SIZE:
                name = U.fresh_stem(rules, "key-not-in")  # type: ignore[arg-type]
                rules[name] = build(node, True, False)  # type: ignore[index]
                return ir.Ref(name)
            small = True
        alts: list[ir.Expr] = [] if "" in node else [eps]
        chars = sorted([ord(k) for k in node if k])
        taken: list[tuple[int, int]] = []  # ``chars`` as merged ranges (sorted, distinct)
        for cp in chars:
            cls = spelled.get(cp)
            if cls is None:
                cls = spelled[cp] = encode_class(((cp, cp),), canonical)
            alts.append(seq(cls, build(node[chr(cp)], False, small)))
            if taken and taken[-1][1] + 1 == cp:
                taken[-1] = (taken[-1][0], cp)
            else:
                taken.append((cp, cp))
        key = tuple(taken)
        if key in rest:
            tail = rest[key]
        else:
            others = ir.complement_ranges(key)
            tail = rest[key] = seq(encode_class(others, canonical), anything) if others else None
        if tail is not None:
            alts.append(tail)
        return alt(*alts)

    return build(trie, True, rules is None)
