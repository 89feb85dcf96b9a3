"""A slow, obviously correct reference matcher over the IR: the executable spec.

The C engine's masks must equal this module's bit for bit.  Nothing here is
shared with the engine's compiler; the method is the textbook one:

1. The IR becomes plain BNF productions (``_to_bnf``).  ``Alt`` and ``Repeat``
   get fresh nonterminals; a bounded ``Repeat(x, lo, hi)`` becomes ``lo``
   copies of ``x`` followed by a chain of ``hi - lo`` nested optionals.
   Terminals are single bytes (``Bytes``, for literals and byte classes) and
   whole characters (``Chars``, one UTF-8 encoded scalar value).
2. Productions that cannot derive any finite string are dropped
   (``_productive``), so every Earley item that survives can be completed.
3. An Earley recognizer steps one byte at a time.  A ``Chars`` terminal may
   be entered part-way: the item keeps the bytes of the character read so far.
   Nullable nonterminals are handled as Aycock and Horspool do: predicting a
   nullable ``B`` also moves the dot over ``B``.

A byte string is a viable prefix iff the Earley set after its last byte is
non-empty; it is in the language iff that set holds the finished start item.

Lookaheads (``ir.Lookahead``) become ``Ahead`` symbols, decided from
the text itself: a set is closed knowing the character that follows it.  At
the end of the text a marker passes (nothing follows); a text that ends inside
the character after a marker passes it too (the reference does not look for a
continuation of that character that avoids the forbidden ones).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cfgmask import ir

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


# --------------------------------------------------------------------------- UTF-8


def _utf8_length(lead: int) -> int:
    """How many bytes a sequence starting with ``lead`` claims (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC0 <= lead < 0xE0:
        return 2
    if 0xE0 <= lead < 0xF0:
        return 3
    if 0xF0 <= lead < 0xF8:
        return 4
    return 0


# The code points each encoding length is allowed to carry (shortest form only).
_LENGTH_RANGE = {1: (0, 0x7F), 2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, MAX_CODE_POINT)}
_LEAD_PAYLOAD_MASK = {1: 0x7F, 2: 0x1F, 3: 0x0F, 4: 0x07}


def _candidates(prefix: bytes) -> tuple[int, int] | None:
    """The interval of code points whose UTF-8 encoding starts with ``prefix``.

    The encodings of one length with a common prefix are exactly the payloads
    between "fill the rest with 0x80" and "fill the rest with 0xBF"; intersecting
    that with the range the length may carry removes overlong forms and
    everything above U+10FFFF.  Surrogates are removed by the caller.
    """
    n = _utf8_length(prefix[0])
    if n == 0 or len(prefix) > n or any(b & 0xC0 != 0x80 for b in prefix[1:]):
        return None
    low = high = prefix[0] & _LEAD_PAYLOAD_MASK[n]
    for i in range(1, n):
        if i < len(prefix):
            low = (low << 6) | (prefix[i] & 0x3F)
            high = (high << 6) | (prefix[i] & 0x3F)
        else:
            low, high = low << 6, (high << 6) | 0x3F
    lo, hi = _LENGTH_RANGE[n]
    low, high = max(low, lo), min(high, hi)
    return (low, high) if low <= high else None


def _overlaps(ranges: Iterable[tuple[int, int]], low: int, high: int) -> bool:
    """Whether some non-surrogate code point in ``[low, high]`` lies in ``ranges``."""
    for a, b in ranges:
        x, y = max(a, low), min(b, high)
        if x <= y and not (SURROGATES[0] <= x and y <= SURROGATES[1]):
            return True
    return False


# --------------------------------------------------------------------------- BNF


@dataclass(frozen=True, slots=True)
class Bytes:
    """Terminal: one byte from ``values``."""

    values: frozenset[int]


@dataclass(frozen=True, slots=True)
class Chars:
    """Terminal: one Unicode scalar value in ``ranges``, as its shortest UTF-8 encoding."""

    ranges: tuple[tuple[int, int], ...]

    def status(self, partial: bytes) -> str:
        """'done' if ``partial`` encodes a member, 'more' if it can still become one, else 'dead'."""
        span = _candidates(partial)
        if span is None or not _overlaps(self.ranges, *span):
            return "dead"
        return "done" if len(partial) == _utf8_length(partial[0]) else "more"


@dataclass(frozen=True, slots=True)
class Ahead:
    """Zero-width: the next character of the text is not in ``ranges`` (or there is none)."""

    ranges: tuple[tuple[int, int], ...]

    def passes(self, ahead: bytes) -> bool:
        if not ahead:
            return True
        n = _utf8_length(ahead[0])
        if n == 0 or len(ahead) < n:
            return True  # not a character, or cut short: see the module docstring
        try:
            c = ord(ahead[:n].decode("utf-8"))
        except UnicodeDecodeError:
            return True
        return not _overlaps(self.ranges, c, c)


@dataclass(frozen=True, slots=True)
class Tok:
    """Terminal: one whole LLM token whose id is in ``ids`` (not in it, when ``negated``).
    Bytes never match it; :mod:`tests.reference_tokens` steps over whole tokens."""

    ids: frozenset[int]
    negated: bool

    def matches(self, token: int) -> bool:
        return (token in self.ids) != self.negated


Symbol = int | Bytes | Chars | Ahead | Tok  # an int is a nonterminal


@dataclass(frozen=True, slots=True)
class Production:
    lhs: int
    rhs: tuple[Symbol, ...]


_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


def _hex_spelling(unit: int) -> ir.Expr:
    """``\\u`` and the four hex digits of ``unit``, each in either case."""
    digits = [ir.Alt((ir.Literal(d.encode()), ir.Literal(d.upper().encode()))) for d in f"{unit:04x}"]
    return ir.Seq((ir.Literal(b"\\u"), *digits))


def json_char_spellings(c: str) -> ir.Expr:
    """Every JSON spelling of the character ``c`` inside a string (RFC 8259, section 7)."""
    out: list[ir.Expr] = []
    if ord(c) >= 0x20 and c not in '"\\':
        out.append(ir.Literal(c.encode()))
    if c in _SHORT_ESCAPES:
        out.append(ir.Literal(b"\\" + _SHORT_ESCAPES[c].encode()))
    if ord(c) < 0x10000:
        out.append(_hex_spelling(ord(c)))
    else:
        v = ord(c) - 0x10000
        out.append(ir.Seq((_hex_spelling(0xD800 + (v >> 10)), _hex_spelling(0xDC00 + (v & 0x3FF)))))
    return ir.Alt(tuple(out))


def literal_set_alternatives(e: ir.LiteralSet) -> ir.Alt:
    """A literal set as an alternation of its words (JSON mode: each word's string in quotes,
    every character in every spelling): the definition the C builder is checked against."""
    if not e.json:
        return ir.Alt(tuple(ir.Literal(w) for w in sorted(set(e.words))))
    quote = ir.Literal(b'"')
    return ir.Alt(
        tuple(
            ir.Seq((quote, *[json_char_spellings(c) for c in w.decode()], quote))
            for w in sorted(set(e.words))
        )
    )


class _BnfBuilder:
    """Turns IR rules into productions over fresh integer nonterminals."""

    def __init__(self, grammar: ir.Grammar) -> None:
        self.rules = grammar.rules
        self.ids = {name: i for i, name in enumerate(grammar.rules)}
        self.counter = itertools.count(len(self.ids))
        self.productions: list[Production] = []

    def build(self) -> list[Production]:
        for name, body in self.rules.items():
            self._define(self.ids[name], body)
        return self.productions

    def _fresh(self, body: ir.Expr | None = None) -> int:
        nt = next(self.counter)
        if body is not None:
            self._define(nt, body)
        return nt

    def _define(self, nt: int, body: ir.Expr) -> None:
        alternatives = body.items if isinstance(body, ir.Alt) else (body,)
        for item in alternatives:
            self.productions.append(Production(nt, self._symbols(item)))

    def _symbols(self, e: ir.Expr) -> tuple[Symbol, ...]:
        if isinstance(e, ir.Literal):
            return tuple(Bytes(frozenset((b,))) for b in e.data)
        if isinstance(e, ir.ByteClass):
            return (Bytes(frozenset(b for lo, hi in e.ranges for b in range(max(lo, 0), min(hi, 255) + 1))),)
        if isinstance(e, ir.CharClass):
            return (Chars(tuple(e.ranges)),)
        if isinstance(e, ir.Lookahead):
            return (Ahead(e.forbidden),)
        if isinstance(e, ir.Ref):
            if e.name not in self.ids:
                raise ValueError(f"undefined rule {e.name!r}")
            return (self.ids[e.name],)
        if isinstance(e, ir.Seq):
            return tuple(s for item in e.items for s in self._symbols(item))
        if isinstance(e, ir.Alt):
            return (self._fresh(e),)
        if isinstance(e, ir.Repeat):
            return self._repeat(e)
        if isinstance(e, ir.LiteralSet):
            return (self._fresh(literal_set_alternatives(e)),)
        if isinstance(e, ir.Token):
            return (Tok(frozenset(e.ids), e.negated),)
        raise TypeError(f"not an IR expression: {e!r}")

    def _repeat(self, e: ir.Repeat) -> tuple[Symbol, ...]:
        if e.hi is not None and e.hi < e.lo:
            return (self._fresh(),)  # no productions: derives nothing
        x = self._fresh(e.item)
        if e.hi is None:
            star = self._fresh()  # star ::= "" | star x
            self.productions += [Production(star, ()), Production(star, (star, x))]
            return (x,) * e.lo + (star,)
        opt = self._fresh()  # opt_0 ::= "" ; opt_k ::= "" | x opt_{k-1}
        self.productions.append(Production(opt, ()))
        for _ in range(e.hi - e.lo):
            outer = self._fresh()
            self.productions += [Production(outer, ()), Production(outer, (x, opt))]
            opt = outer
        return (x,) * e.lo + (opt,)


def _terminal_productive(s: Bytes | Chars | Ahead | Tok) -> bool:
    if isinstance(s, (Ahead, Tok)):
        return True
    if isinstance(s, Bytes):
        return bool(s.values)
    return _overlaps(s.ranges, 0, MAX_CODE_POINT)


def _productive(productions: list[Production]) -> set[int]:
    """Nonterminals that derive at least one finite byte string (least fixpoint)."""
    good: set[int] = set()
    changed = True
    while changed:
        changed = False
        for p in productions:
            if p.lhs not in good and all(
                s in good if isinstance(s, int) else _terminal_productive(s) for s in p.rhs
            ):
                good.add(p.lhs)
                changed = True
    return good


def _nullable(productions: list[Production]) -> set[int]:
    """Nonterminals that derive the empty string (least fixpoint)."""
    null: set[int] = set()
    changed = True
    while changed:
        changed = False
        for p in productions:
            if p.lhs not in null and all(isinstance(s, int) and s in null for s in p.rhs):
                null.add(p.lhs)
                changed = True
    return null


# --------------------------------------------------------------------------- Earley

# An item: (production index, dot position, origin set, bytes of a half-read character).
Item = tuple[int, int, int, bytes]


class _Set:
    """One Earley set: its items, and who waits for which nonterminal."""

    __slots__ = ("items", "scanning", "waiting")

    def __init__(self) -> None:
        self.items: set[Item] = set()
        self.waiting: dict[int, list[Item]] = {}
        self.scanning: list[Item] = []


class ReferenceMatcher:
    """Recognizes the language of an IR grammar, its viable prefixes, and token masks."""

    def __init__(self, grammar: ir.Grammar) -> None:
        if grammar.start not in grammar.rules:
            raise ValueError(f"start rule {grammar.start!r} is not defined")
        builder = _BnfBuilder(grammar)
        productions = builder.build()
        self._start = next(builder.counter)  # augmented start: S' ::= start
        productions.append(Production(self._start, (builder.ids[grammar.start],)))
        good = _productive(productions)
        self._prods = [
            p
            for p in productions
            if all(s in good if isinstance(s, int) else _terminal_productive(s) for s in p.rhs)
        ]
        self._by_lhs: dict[int, list[int]] = {}
        for i, p in enumerate(self._prods):
            self._by_lhs.setdefault(p.lhs, []).append(i)
        self._nullable = _nullable(self._prods)
        self._lookahead = any(isinstance(s, Ahead) for p in self._prods for s in p.rhs)
        self._seeds: list[Item] = [(i, 0, 0, b"") for i in self._by_lhs.get(self._start, [])]
        self._initial = self._close([], self._seeds)

    # ----------------------------------------------------------------- public API

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a complete string of the language."""
        return self._is_final(self._parse(data))

    def is_prefix(self, data: bytes) -> bool:
        """Whether ``data`` can be extended (possibly by nothing) to a string of the language."""
        return bool(self._parse(data)[-1].items)

    def mask(
        self,
        prefix: bytes,
        tokens: Sequence[bytes | None],
        stop_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
    ) -> list[bool]:
        """Which tokens may follow ``prefix``: stop tokens iff ``prefix`` is complete,
        other non-special, non-empty tokens iff ``prefix + token`` is viable."""
        stops, specials = set(stop_ids), set(special_ids)
        chart = self._parse(prefix)
        done = self._is_final(chart)
        out = []
        for t, text in enumerate(tokens):
            if t in stops:
                out.append(done)
            elif t in specials or not text:
                out.append(False)
            elif self._lookahead:  # the last set depends on what follows it
                out.append(self.is_prefix(prefix + text))
            else:
                out.append(self._viable_after(chart, text))
        return out

    # ----------------------------------------------------------------- Earley core

    def _parse(self, data: bytes) -> list[_Set]:
        if not self._lookahead:
            chart = [self._initial]
            for b in data:
                chart.append(self._step(chart, b))
                if not chart[-1].items:
                    break
            return chart
        chart = [self._close([], self._seeds, data[:4])]
        for i, b in enumerate(data):
            chart.append(self._step(chart, b, data[i + 1 : i + 5]))
            if not chart[-1].items:
                break
        return chart

    def _viable_after(self, chart: list[_Set], text: bytes) -> bool:
        """Extend ``chart`` by ``text``, answer, and restore it."""
        n = len(chart)
        try:
            for b in text:
                chart.append(self._step(chart, b))
                if not chart[-1].items:
                    return False
            return True
        finally:
            del chart[n:]

    def _is_final(self, chart: list[_Set]) -> bool:
        return any(
            self._prods[p].lhs == self._start and d == len(self._prods[p].rhs) and o == 0
            for p, d, o, _ in chart[-1].items
        )

    def _step(self, chart: list[_Set], b: int, ahead: bytes = b"") -> _Set:
        """The Earley set after reading byte ``b``: scan, then close (``ahead``: the bytes
        after ``b``, for lookahead markers)."""
        return self._close(chart, self._scan(chart, b), ahead)

    def _scan(self, chart: list[_Set], b: int) -> list[Item]:
        """The items of the last set that byte ``b`` advances."""
        seeds: list[Item] = []
        for p, d, o, partial in chart[-1].scanning:
            term = self._prods[p].rhs[d]
            if isinstance(term, Tok):
                continue
            if isinstance(term, Bytes):
                if b in term.values:
                    seeds.append((p, d + 1, o, b""))
                continue
            assert isinstance(term, Chars)
            status = term.status(partial + bytes((b,)))
            if status == "done":
                seeds.append((p, d + 1, o, b""))
            elif status == "more":
                seeds.append((p, d, o, partial + bytes((b,))))
        return seeds

    def _close(self, chart: list[_Set], seeds: list[Item], ahead: bytes = b"") -> _Set:
        """Predict and complete from ``seeds`` until nothing new appears.

        ``chart`` holds the finished sets before this one (index ``len(chart)``).
        """
        k = len(chart)
        new = _Set()
        work = list(seeds)
        while work:
            item = work.pop()
            if item in new.items:
                continue
            new.items.add(item)
            p, d, o, _ = item
            rhs = self._prods[p].rhs
            if d == len(rhs):
                # Complete.  An empty span (o == k) means a nullable lhs, whose
                # waiters were already advanced at prediction (Aycock-Horspool).
                if o < k:
                    lhs = self._prods[p].lhs
                    work.extend((q, e + 1, oo, b"") for q, e, oo, _ in chart[o].waiting.get(lhs, ()))
                continue
            sym = rhs[d]
            if isinstance(sym, Ahead):
                if sym.passes(ahead):
                    work.append((p, d + 1, o, b""))
                continue
            if not isinstance(sym, int):
                new.scanning.append(item)
                continue
            new.waiting.setdefault(sym, []).append(item)
            work.extend((q, 0, k, b"") for q in self._by_lhs.get(sym, ()))
            if sym in self._nullable:
                work.append((p, d + 1, o, b""))
        return new
