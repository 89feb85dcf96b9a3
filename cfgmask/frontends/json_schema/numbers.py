"""Exact regular languages of JSON numbers in an interval, digit by digit.

No enumeration: a bound with d digits yields an expression of size O(d).

Which spellings are accepted
----------------------------
* No bounds, not integer: every JSON number (RFC 8259 grammar).
* Otherwise two spellings, each exact for its values:

  - plain decimal ``-?(0|[1-9]\\d*)(\\.\\d+)?`` -- what ``json.dumps`` writes for
    every int and for floats with ``1e-4 <= |x| < 1e16``;
  - normalized scientific ``-?[1-9](\\.\\d+)?[eE][+-]?\\d+`` (one nonzero digit
    before the point; any exponent spelling, leading zeros too) -- what
    ``json.dumps`` (``repr``) writes for the other floats.

  Other spellings of the same value (``10e3``, ``0.5e1``) are not accepted
  under bounds.  For ``integer`` the plain form may end in ``.0+`` (Python
  writes integral floats as ``3.0``), and the scientific form is accepted for
  exponents >= 16 with at most 16 fraction digits -- exactly how Python writes
  an integral float of 1e16 and above.  Every accepted string denotes an
  integer; every ``json.dumps`` spelling of an integer value is accepted.

Bounds are compared as exact decimals: a float bound is read as its shortest
``repr`` (``0.1`` is ``Decimal("0.1")``), which orders the same way as the
floats ``json.loads`` produces for the ``repr`` of a float.
"""

from __future__ import annotations

import functools
import hashlib
from decimal import Decimal

from ... import deadline, ir
from ...errors import GrammarError
from . import chardfa
from ._ir_util import opt
from .lexical import DIGIT, JSON_NUMBER, NONZERO

ZERO_RUN = ir.Repeat(ir.Literal(b"0"), 1, None)
MAX_INT_SCI_FRACTION = 16
MIN_INT_SCI_EXPONENT = 16


def _digits(lo: int, hi: int) -> ir.Expr:
    return ir.ByteClass(((0x30 + lo, 0x30 + hi),)) if lo <= hi else ir.NOTHING


def _fixed(a: str, b: str) -> ir.Expr:
    """Digit strings of length ``len(a) == len(b)`` between ``a`` and ``b`` inclusive."""
    if a == b:
        return ir.Literal(a.encode()) if a else ir.EPSILON
    i = 0
    while a[i] == b[i]:
        i += 1
    head = ir.Literal(a[:i].encode()) if i else ir.EPSILON
    rest = len(a) - i - 1
    da, db = int(a[i]), int(b[i])
    tail_a, tail_b = a[i + 1 :], b[i + 1 :]
    lo_full = tail_a == "0" * rest
    hi_full = tail_b == "9" * rest
    free = ir.Repeat(DIGIT, rest, rest)
    alts: list[ir.Expr] = []
    mid_lo = da if lo_full else da + 1
    mid_hi = db if hi_full else db - 1
    if not lo_full:
        alts.append(ir.seq(_digits(da, da), _fixed(tail_a, "9" * rest)))
    if mid_lo <= mid_hi:
        alts.append(ir.seq(_digits(mid_lo, mid_hi), free) if rest else _digits(mid_lo, mid_hi))
    if not hi_full:
        alts.append(ir.seq(_digits(db, db), _fixed("0" * rest, tail_b)))
    return ir.seq(head, ir.alt(*alts))


def uint_range(lo: int, hi: int | None) -> ir.Expr:
    """Canonical decimal integers (no leading zeros) in ``[lo, hi]`` (``hi=None``: unbounded)."""
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return ir.NOTHING
    alts: list[ir.Expr] = []
    if lo == 0:
        alts.append(ir.Literal(b"0"))
        lo = 1
        if hi == 0:
            return alts[0]
    sa = str(lo)
    la = len(sa)
    if hi is None:
        alts.append(_fixed(sa, "9" * la))
        alts.append(ir.seq(NONZERO, ir.Repeat(DIGIT, la, None)))
        return ir.alt(*alts)
    sb = str(hi)
    lb = len(sb)
    if la == lb:
        alts.append(_fixed(sa, sb))
    else:
        alts.append(_fixed(sa, "9" * la))
        if lb - la >= 2:
            alts.append(ir.seq(NONZERO, ir.Repeat(DIGIT, la, lb - 2)))
        alts.append(_fixed("1" + "0" * (lb - 1), sb))
    return ir.alt(*alts)


def uint_lz(lo: int, hi: int | None) -> ir.Expr:
    """Digit strings, leading zeros allowed, whose value is in ``[lo, hi]``."""
    if hi is not None and hi < lo:
        return ir.NOTHING
    zeros = ir.Repeat(ir.Literal(b"0"), 0, None)
    alts: list[ir.Expr] = []
    if lo <= 0:
        alts.append(ZERO_RUN)
        lo = 1
    if hi is None or hi >= lo:
        alts.append(ir.seq(zeros, uint_range(lo, hi)))
    return ir.alt(*alts)


def exponent_range(lo: int | None, hi: int | None) -> ir.Expr:
    """Exponent text ``[+-]?\\d+`` whose value is in ``[lo, hi]`` (None: unbounded)."""
    alts: list[ir.Expr] = []
    nn_lo = 0 if lo is None else max(lo, 0)
    if hi is None or hi >= nn_lo:
        alts.append(ir.seq(opt(ir.Literal(b"+")), uint_lz(nn_lo, hi)))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        alts.append(ir.seq(ir.Literal(b"-"), ZERO_RUN))
    neg_hi = -1 if hi is None else min(hi, -1)
    if lo is None or lo <= neg_hi:
        alts.append(ir.seq(ir.Literal(b"-"), uint_lz(-neg_hi, None if lo is None else -lo)))
    return ir.alt(*alts) if alts else ir.NOTHING


def decimal_of(v: int | float) -> Decimal:
    """A JSON number's exact value: an int, or the float as ``repr`` spells it."""
    return Decimal(v) if isinstance(v, int) else Decimal(repr(float(v)))


def _frac_digits(x: Decimal) -> str:
    """The digits after the point of a nonnegative decimal, trailing zeros stripped."""
    text = format(x, "f")
    return text.partition(".")[2].rstrip("0")


def _frac(a: str | None, ai: bool, b: str | None, bi: bool, maxlen: int | None) -> tuple[bool, ir.Expr]:
    """Digit strings s with ``0.a <(=) 0.s <(=) 0.b``; ``a=None``: no lower bound,
    ``b=None``: no upper bound.  Returns (whether s may be empty, expression for nonempty s).
    ``a``/``b`` have no trailing zeros; at most ``maxlen`` digits."""
    return _frac_at(a, ai, b, bi, 0, a is not None, b is not None, maxlen)


def _free(n_min: int, maxlen: int | None, used: int) -> ir.Expr:
    hi = None if maxlen is None else maxlen - used
    if hi is not None and hi < n_min:
        return ir.NOTHING
    return ir.Repeat(DIGIT, n_min, hi)


def _frac_at(
    a: str | None, ai: bool, b: str | None, bi: bool, i: int, tl: bool, th: bool, maxlen: int | None
) -> tuple[bool, ir.Expr]:
    at_limit = maxlen is not None and i >= maxlen
    if not tl and not th:
        return True, (ir.NOTHING if at_limit else _free(1, maxlen, i))
    ar = a[i:] if tl and a is not None else ""
    br = b[i:] if th and b is not None else ""
    empty_ok = (not tl or (ar == "" and ai)) and (not th or br != "" or bi)
    if at_limit:
        return empty_ok, ir.NOTHING
    if tl and ar == "" and not th:  # equal to a so far, a exhausted
        if ai:
            return empty_ok, _free(1, maxlen, i)
        return empty_ok, _nonzero_somewhere(None if maxlen is None else maxlen - i)
    if th and br == "":  # equal to b so far, b exhausted: only zeros may follow
        ok = bi and (not tl or (ar == "" and ai))
        return ok, (
            ir.Repeat(ir.Literal(b"0"), 1, None if maxlen is None else maxlen - i) if ok else ir.NOTHING
        )
    lo_d = int(ar[0]) if tl and ar else 0
    hi_d = int(br[0]) if th and br else (0 if th else 9)
    alts: list[ir.Expr] = []
    for d in sorted({lo_d, hi_d}):
        if lo_d <= d <= hi_d:
            ntl = tl and d == lo_d
            nth = th and d == hi_d
            if not ntl and not nth:
                continue
            e_ok, nonempty = _frac_at(a, ai, b, bi, i + 1, ntl, nth, maxlen)
            rest = ir.alt(ir.EPSILON, nonempty) if e_ok else nonempty
            alts.append(ir.seq(_digits(d, d), rest))
    inner_lo, inner_hi = lo_d + (1 if tl else 0), hi_d - (1 if th else 0)
    if tl and not th:
        inner_hi = 9
    if th and not tl:
        inner_lo = 0
    if inner_lo <= inner_hi:
        alts.append(ir.seq(_digits(inner_lo, inner_hi), _free(0, maxlen, i + 1)))
    return empty_ok, ir.alt(*alts) if alts else ir.NOTHING


def _nonzero_somewhere(limit: int | None) -> ir.Expr:
    """Digit strings of length 1..limit with a nonzero digit."""
    if limit is None:
        return ir.seq(ir.Repeat(ir.Literal(b"0"), 0, None), NONZERO, ir.Repeat(DIGIT, 0, None))
    alts = [ir.seq(NONZERO, ir.Repeat(DIGIT, 0, limit - 1))]
    if limit >= 2:
        alts.append(ir.seq(ir.Literal(b"0"), _nonzero_somewhere(limit - 1)))
    return ir.alt(*alts)


def _with_frac(head: ir.Expr, frac: tuple[bool, ir.Expr]) -> ir.Expr:
    empty_ok, nonempty = frac
    tail = ir.seq(ir.Literal(b"."), nonempty) if nonempty != ir.NOTHING else ir.NOTHING
    if empty_ok:
        tail = ir.alt(ir.EPSILON, tail) if tail != ir.NOTHING else ir.EPSILON
    if tail == ir.NOTHING or head == ir.NOTHING:
        return ir.NOTHING
    return ir.seq(head, tail)


def _empty(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool) -> bool:
    return hi is not None and (hi < lo or (hi == lo and not (lo_incl and hi_incl)))


def plain_nonneg(
    lo: Decimal,
    lo_incl: bool,
    hi: Decimal | None,
    hi_incl: bool,
    integer: bool,
    maxlen: int | None = None,
    int_fraction: bool = True,
) -> ir.Expr:
    """Plain decimals ``I(.F)?`` (no sign) with value in the interval; ``lo >= 0``.  An integer
    may end in ``.0+`` only with ``int_fraction``."""
    if _empty(lo, lo_incl, hi, hi_incl):
        return ir.NOTHING
    if integer:
        a = int(lo.to_integral_value(rounding="ROUND_CEILING"))
        if not lo_incl and a == lo:
            a += 1
        b = None
        if hi is not None:
            b = int(hi.to_integral_value(rounding="ROUND_FLOOR"))
            if not hi_incl and b == hi:
                b -= 1
        body = uint_range(a, b)
        if body == ir.NOTHING or not int_fraction:
            return body
        return ir.seq(body, opt(ir.seq(ir.Literal(b"."), ZERO_RUN)))
    i_lo, f_lo = int(lo), _frac_digits(lo - int(lo))
    any_frac = _frac(None, True, None, True, maxlen)
    if hi is None:
        return ir.alt(
            _with_frac(uint_range(i_lo, i_lo), _frac(f_lo, lo_incl, None, True, maxlen)),
            _with_frac(uint_range(i_lo + 1, None), any_frac),
        )
    i_hi, f_hi = int(hi), _frac_digits(hi - int(hi))
    if i_lo == i_hi:
        return _with_frac(uint_range(i_lo, i_lo), _frac(f_lo, lo_incl, f_hi, hi_incl, maxlen))
    return _alt_live(
        _with_frac(uint_range(i_lo, i_lo), _frac(f_lo, lo_incl, None, True, maxlen)),
        _with_frac(uint_range(i_lo + 1, i_hi - 1), any_frac),
        _with_frac(uint_range(i_hi, i_hi), _frac("", True, f_hi, hi_incl, maxlen)),
    )


def _alt_live(*items: ir.Expr) -> ir.Expr:
    live = [x for x in items if x != ir.NOTHING]
    return ir.alt(*live) if live else ir.NOTHING


def _normalize(v: Decimal) -> tuple[Decimal, int]:
    e = v.adjusted()
    return v.scaleb(-e), e


def sci_positive(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool, integer: bool) -> ir.Expr:
    """Normalized scientific spellings of positive values in the interval (``lo >= 0``)."""
    if integer and hi is None and (lo == 0 or lo.adjusted() < MIN_INT_SCI_EXPONENT):
        # an integer's scientific spellings start at 1e16: below it, the lower bound cuts
        # nothing, and every such range (``minimum: 0``, ``1``, ...) has the same ones
        return _int_sci_unbounded()
    if integer and hi is not None and hi.adjusted() < MIN_INT_SCI_EXPONENT:
        # every part's exponent is at most hi's, below the least an integer's scientific
        # spelling has: each part is dead, so _sci_positive would build its mantissas (three
        # plain_nonneg, most of a bounded integer property's cold cost) to drop them all
        return ir.NOTHING
    return _sci_positive(lo, lo_incl, hi, hi_incl, integer)


@functools.cache
def _int_sci_unbounded() -> ir.Expr:
    """The scientific spellings of every integer from 1e16 up: a constant of the engine, kept
    by ``clear_memos`` (and its digits capped kept by identity in ``cap_digits``)."""
    e = _sci_positive(Decimal(0), True, None, True, True)
    cap_digits(e)  # filed in the memo, for the ranges that hold it
    return e


def _sci_positive(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool, integer: bool) -> ir.Expr:
    if _empty(lo, lo_incl, hi, hi_incl) or hi == 0:
        return ir.NOTHING
    maxlen = MAX_INT_SCI_FRACTION if integer else None
    e_floor = MIN_INT_SCI_EXPONENT if integer else None

    def mant(mlo: Decimal, mli: bool, mhi: Decimal, mhi_incl: bool) -> ir.Expr:
        return plain_nonneg(mlo, mli, mhi, mhi_incl, False, maxlen)

    def exp(a: int | None, b: int | None) -> ir.Expr:
        if e_floor is not None:
            a = e_floor if a is None else max(a, e_floor)
        if a is not None and b is not None and b < a:
            return ir.NOTHING
        return ir.seq(ir.ByteClass(((0x45, 0x45), (0x65, 0x65))), exponent_range(a, b))

    one, ten = Decimal(1), Decimal(10)
    lower = _normalize(lo) if lo > 0 else None
    upper = _normalize(hi) if hi is not None else None
    parts: list[ir.Expr] = []
    if lower and upper and lower[1] == upper[1]:
        parts.append(ir.seq(mant(lower[0], lo_incl, upper[0], hi_incl), exp(lower[1], lower[1])))
    else:
        e_a = lower[1] + 1 if lower else None
        e_b = upper[1] - 1 if upper else None
        parts.append(ir.seq(mant(one, True, ten, False), exp(e_a, e_b)))
        if lower:
            parts.append(ir.seq(mant(lower[0], lo_incl, ten, False), exp(lower[1], lower[1])))
        if upper:
            parts.append(ir.seq(mant(one, True, upper[0], hi_incl), exp(upper[1], upper[1])))
    return _alt_live(*[p for p in parts if not _dead(p)])


def _dead(e: ir.Expr) -> bool:
    return isinstance(e, ir.Seq) and ir.NOTHING in e.items  # each x == NOTHING, as any() asked


# How an integer may be spelled: "all" (``3``, ``3.0``, ``3e0`` past 1e16: every spelling whose
# value is an integer, drafts 6+), "no_fraction" (no ``.0+``: canonical mode, ``3`` keeps the
# value), "plain" (``-?(0|[1-9][0-9]*)`` only: draft 4, where a JSON number with a fraction or
# an exponent is not an integer, as jsonschema's draft-4 type checker says).
INT_FORMS = ("all", "no_fraction", "plain")


@functools.lru_cache(maxsize=1024)  # IR is immutable: equal bounds share one expression
def number_range(
    lo: Decimal | None,
    lo_incl: bool,
    hi: Decimal | None,
    hi_incl: bool,
    integer: bool,
    int_forms: str = "all",
) -> ir.Expr:
    """JSON numbers (spellings as in the module doc) with value in the interval; integers
    spelled as ``int_forms`` says."""
    if lo is None and hi is None:
        return _unbounded(integer, int_forms)
    return _number_range(lo, lo_incl, hi, hi_incl, integer, int_forms)


@functools.cache
def _unbounded(integer: bool, int_forms: str) -> ir.Expr:
    """Every JSON number, or every integer spelled as ``int_forms`` says: a constant of the
    engine (no schema's content), so ``clear_memos`` keeps it, where the ranges a schema's
    bounds make are forgotten; an unbounded integer's expression (and its digits capped, by
    identity in ``cap_digits``) cost ~0.2 ms of every cold schema with an integer in it."""
    return _number_range(None, True, None, True, integer, int_forms)


def _number_range(
    lo: Decimal | None, lo_incl: bool, hi: Decimal | None, hi_incl: bool, integer: bool, int_forms: str
) -> ir.Expr:
    if lo is None and hi is None and not integer:
        return JSON_NUMBER
    frac = int_forms == "all"

    def sci(a: Decimal, ai: bool, b: Decimal | None, bi: bool) -> ir.Expr:
        return ir.NOTHING if integer and int_forms == "plain" else sci_positive(a, ai, b, bi, integer)

    zero = Decimal(0)
    alts: list[ir.Expr] = []
    # Unsigned texts denote y >= 0.
    if hi is None or hi >= 0:
        plo, pli = (zero, True) if lo is None or lo < 0 else (lo, lo_incl)
        alts.append(plain_nonneg(plo, pli, hi, hi_incl, integer, int_fraction=frac))
        alts.append(sci(plo, pli, hi, hi_incl))
    # "-y" denotes -y: need -y in [lo, hi], i.e. y in [-hi, -lo].
    if lo is None or lo <= 0:
        if hi is None or hi > 0:
            nlo, nli = zero, True
        else:
            nlo, nli = -hi, hi_incl
        nhi = None if lo is None else -lo
        body = _alt_live(
            plain_nonneg(nlo, nli, nhi, lo_incl, integer, int_fraction=frac), sci(nlo, nli, nhi, lo_incl)
        )
        if body != ir.NOTHING:
            alts.append(ir.seq(ir.Literal(b"-"), body))
    return _alt_live(*alts)


# Canonical mode: an unbounded run of digits gets at most this many digits beyond its least.
# An IEEE double (RFC 8259 section 6: what interoperable parsers keep) needs at most 17
# significant digits and 3 exponent digits, and ``json.dumps`` writes every float and every
# int below 10**17 within these bounds, so every value such a parser keeps exactly keeps a
# spelling; a model can no longer write ``1000000000...`` without end.
CANONICAL_EXTRA_DIGITS = 17


def cap_digits(e: ir.Expr) -> ir.Expr:
    """``_cap_digits`` memoized by identity: ``number_range`` returns the same (cached) object
    for the same bounds, so every integer property of a schema, and of the next schema, shares
    one capped expression.  The memo keeps each key object alive, so an id is never reused."""
    hit = _CAPPED.get(id(e))
    if hit is None or hit[0] is not e:
        if len(_CAPPED) >= 4096:
            _CAPPED.clear()
        hit = _CAPPED[id(e)] = (e, _cap_digits(e))
    return hit[1]


_CAPPED: dict[int, tuple[ir.Expr, ir.Expr]] = {}


def _cap_digits(e: ir.Expr) -> ir.Expr:
    """``e`` with every unbounded repetition of a digit class (``\\d*``, ``0+``) bounded to
    ``CANONICAL_EXTRA_DIGITS`` beyond its least count: a sound subset of ``e``'s language that
    keeps a spelling of every value with at most 17 significant digits.  Recursion is on the
    depth of ``e`` (a number's few nested nodes).  A node nothing below changes is returned as
    it is where ``ir.seq``/``ir.alt`` would rebuild it equal (most of a range's fixed-length
    digit runs): rebuilding every node was most of an integer property's front end."""
    if isinstance(e, ir.Repeat):
        item = _cap_digits(e.item)
        if e.hi is None and isinstance(item, (ir.ByteClass, ir.Literal)):
            return ir.Repeat(item, e.lo, e.lo + CANONICAL_EXTRA_DIGITS)
        return e if item is e.item else ir.Repeat(item, e.lo, e.hi)
    if isinstance(e, (ir.Seq, ir.Alt)):
        t, old = type(e), e.items
        new = [_capped_child(x) for x in old]
        if len(old) != 1:  # a loop, not all() of a generator: one stopped early raises inside it
            for a, b in zip(new, old, strict=True):
                if a is not b or type(a) is t:
                    break
            else:
                return e  # what the constructor would make of the same items: an equal node
        return ir.seq(*new) if t is ir.Seq else ir.alt(*new)
    return e


def _capped_child(x: ir.Expr) -> ir.Expr:
    """``_cap_digits(x)``, taken from ``cap_digits``' memo when ``x`` is a part it holds (the
    shared constants: an integer's scientific spellings)."""
    hit = _CAPPED.get(id(x))
    return hit[1] if hit is not None and hit[0] is x else _cap_digits(x)


def multiple_of(k: int, rules: dict[str, ir.Expr], prefix: str, fraction: bool = True) -> ir.Expr:
    """Canonical integers (optionally ``-``, and ``.0+`` with ``fraction``) divisible by ``k``:
    a mod-k automaton written as right-linear rules (k rules)."""
    names = [f"{prefix}-mod{r}" for r in range(k)]
    for r in range(k):
        by_target: dict[int, list[int]] = {}
        for d in range(10):
            by_target.setdefault((10 * r + d) % k, []).append(d)
        alts: list[ir.Expr] = [ir.EPSILON] if r == 0 else []
        for t, ds in sorted(by_target.items()):
            cls = ir.ByteClass(ir.normalize_ranges([(0x30 + d, 0x30 + d) for d in ds], 0xFF))
            alts.append(ir.seq(cls, ir.Ref(names[t])))
        rules[names[r]] = ir.alt(*alts)
    first: dict[int, list[int]] = {}
    for d in range(1, 10):
        first.setdefault(d % k, []).append(d)
    starts = [
        ir.seq(ir.ByteClass(ir.normalize_ranges([(0x30 + d, 0x30 + d) for d in ds], 0xFF)), ir.Ref(names[t]))
        for t, ds in sorted(first.items())
    ]
    body = ir.alt(ir.Literal(b"0"), *starts)
    tail = opt(ir.seq(ir.Literal(b"."), ZERO_RUN)) if fraction else ir.EPSILON
    return ir.seq(opt(ir.Literal(b"-")), body, tail)


# --------------------------------------------------------------------------- decimal multipleOf
#
# A JSON number text ``-? I (.F)? ([eE] E)?`` denotes v = N * 10**(E - |F|), N the integer of the
# digits ``IF``.  With the divisor m = p / 10**q (p, q integers, q minimal) and p = 2**a 5**b p1
# (p1 prime to 10), v is a multiple of m iff p1 divides N and, writing N = N1 * 10**z (N1 not
# divisible by 10) and w = z + E - |F| (the decimal exponent of v's last nonzero digit),
#     v2(N1) >= A - w  and  v5(N1) >= B - w,   A = a - q, B = b - q
# (v / (2**a 5**b / 10**q) has no 2 or 5 in its denominator).  N1 is not divisible by 10, so one
# of v2(N1), v5(N1) is 0, and the condition is w >= W0 with
#     W0 = max(A, B) - min(v(N1), k),   k = |a - b|,  v = v2 if a > b else v5,
# where min(v(N1), k) is read off N1 mod 2**k (or 5**k).  Left to right the automaton keeps N mod
# p1, N1 mod 2**k (or 5**k), the zeros since the last nonzero digit (up to k) and where the last
# nonzero digit stands (c = z - |F|: the integer part's trailing zeros, or minus the fraction
# position); an exponent E is then accepted iff E >= W0 - c, a threshold test on E's digits.
#
# The whole language is not regular (``1.0...01e<E>`` is a multiple of 1 iff E is at least its
# length), so exponent spellings are accepted in this shape: a mantissa fraction of at most
# q + MULTIPLE_OF_SIG_DIGITS digits that is all zeros or ends in a nonzero digit (``1.25e3``,
# ``1.0e3``, ``12e1``; not ``1.250e3``), and before a negative exponent at most
# max(A, B, 0) + MULTIPLE_OF_INT_ZEROS trailing zeros of the integer part count (``100e-2`` is
# accepted, ``1000000000e-9`` under a divisor 1 is not).  Plain spellings (no exponent) are all
# accepted, trailing zeros too.  ``json.dumps`` writes at most 17 significant digits and no
# trailing zero before an exponent, so every float it writes keeps its spelling.

MULTIPLE_OF_SIG_DIGITS = 17
MULTIPLE_OF_INT_ZEROS = 4
MULTIPLE_OF_STATES = 20_000  # states of the product automaton before minimization
CANONICAL_MULTIPLE_EXPONENT_DIGITS = 3  # canonical mode: an IEEE double's exponent needs 3
_NUMBER_CHARS = "+-.0123456789Ee"


def decimal_divisor(m: Decimal) -> tuple[int, int]:
    """``(p, q)`` with ``m == p / 10**q``, p a positive integer and q >= 0 as small as can be."""
    _, digits, exp = m.normalize().as_tuple()
    assert isinstance(exp, int)
    n = int("".join(map(str, digits)))
    return (n * 10**exp, 0) if exp >= 0 else (n, -exp)


def _valuation(n: int, f: int) -> int:
    v = 0
    while n and n % f == 0:
        n //= f
        v += 1
    return v


def is_multiple(value: Decimal, m: Decimal) -> bool:
    """Exact: ``value / m`` is an integer (``multipleOf`` on exact decimals)."""
    if not value:
        return True
    p, q = decimal_divisor(m)
    scaled = value.scaleb(q)  # value * 10**q, exact
    return scaled == scaled.to_integral_value() and int(scaled) % p == 0


class _Multiples:
    """The step function of the automaton described above (states are tuples)."""

    def __init__(self, m: Decimal) -> None:
        p, q = decimal_divisor(m)
        a, b = _valuation(p, 2), _valuation(p, 5)
        self.p1 = p // (2**a * 5**b)
        self.top = max(a, b) - q  # max(A, B)
        self.k = abs(a - b)
        self.prime = 2 if a > b else 5
        self.mod = self.prime**self.k  # N1 mod ``mod`` tells min(v(N1), k)
        self.deep = q + MULTIPLE_OF_SIG_DIGITS  # longest mantissa fraction before an exponent
        self.plain = self.k - self.top  # a plain spelling's last nonzero fraction digit: at most here
        self.high = max(self.top, 0) + MULTIPLE_OF_INT_ZEROS  # integer trailing zeros followed

    def w0(self, y: tuple[int, int]) -> int:
        return self.top - y[1]

    def _y(self, n1: int) -> tuple[int, int]:
        """(N1 mod ``mod``, min(v(N1), k)) for the residue ``n1`` of N1."""
        return n1, min(_valuation(n1, self.prime) if n1 else self.k, self.k)

    def size_estimate(self) -> int:
        """About the states with a nonzero digit just read (the most numerous kind)."""
        return self.p1 * self.mod * (self.deep + self.high + 2)

    def first(self, d: int, pos: int) -> tuple | None:
        """The first nonzero digit: in the integer part (pos 0) or at fraction position pos.
        A number state is ``("num", R, Y, zc, c, f)``: R = N mod p1; Y = (N1 mod ``mod``, or
        only what the next nonzero digit needs of it after zeros; min(v(N1), k)); zc the zeros
        since the last nonzero digit (up to k); f None in the integer part (c: its
        trailing zeros, up to high + 1), else the fraction's length (up to deep + 1) and c its
        last nonzero digit's position negated (0 or more: the fraction is zeros so far; None:
        past ``plain`` and followed by zeros, so no spelling ends here)."""
        if pos > self.deep:
            return None
        return ("num", d % self.p1, self._y(d % self.mod), 0, -pos, None if pos == 0 else pos)

    def digit(self, st: tuple, d: int) -> tuple | None:
        _, r, y, zc, c, f = st
        r = (10 * r + d) % self.p1
        if d == 0:
            zc = min(zc + 1, self.k)
            # after z zeros the next nonzero digit sees N1 mod prime**(k - z - 1) only
            y = (y[0] % self.prime ** max(self.k - zc - 1, 0), y[1])
            if f is None:
                return ("num", r, y, zc, min(c + 1, self.high + 1), None)
            if c is not None and c < 0 and -c > self.plain:
                c = None  # only a later nonzero digit can make this a spelling again
            if c is None:
                y = (y[0], 0)
            return ("num", r, y, zc, c, min(f + 1, self.deep + 1))
        y = self._y((y[0] * 10 ** (zc + 1) + d) % self.mod)
        if f is None:
            return ("num", r, y, 0, 0, None)
        if f + 1 > self.deep:
            return None
        return ("num", r, y, 0, -(f + 1), f + 1)

    def threshold(self, st: tuple) -> int | None:
        """The least exponent that makes this mantissa a multiple; None: no exponent may follow."""
        _, r, y, _, c, f = st
        if r != 0 or c is None or (f is not None and c < 0 and f != -c):
            return None  # not a multiple, or a fraction ending in zeros
        return self.w0(y) - c

    def step(self, st: tuple, ch: str) -> tuple | None:  # noqa: C901 (one table of JSON number syntax)
        kind = st[0]
        dig = int(ch) if ch.isdigit() else None
        if kind in ("start", "minus"):
            if ch == "-" and kind == "start":
                return ("minus",)
            if dig == 0:
                return ("zero", None)
            return self.first(dig, 0) if dig else None
        if kind == "zero":  # the value is 0 so far; st[1]: None in the integer part, else fraction digits
            f = st[1]
            if ch == "." and f is None:
                return ("zdot",)
            if ch in "eE":
                return ("eany", 0)
            if dig is None or f is None:
                return None
            return ("zero", min(f + 1, self.deep + 1)) if dig == 0 else self.first(dig, f + 1)
        if kind == "zdot":
            if dig is None:
                return None
            return ("zero", 1) if dig == 0 else self.first(dig, 1)
        if kind == "num":
            if dig is not None:
                return self.digit(st, dig)
            if ch == "." and st[5] is None:
                return ("dot", *st[1:5])
            if ch in "eE":
                t = self.threshold(st)
                return None if t is None else ("esign", t)
            return None
        if kind == "dot":
            return self.digit(("num", *st[1:5], 0), dig) if dig is not None else None
        if kind == "eany":  # any exponent (the value is 0); st[1]: 0 after e, 1 after a sign, 2 digits
            if dig is not None:
                return ("eany", 2)
            return ("eany", 1) if ch in "+-" and st[1] == 0 else None
        if kind == "esign":
            t = st[1]
            if ch == "+":
                return ("epos", t, 0)
            if ch == "-":
                return ("eneg", t, 0, False) if t <= 0 else None
            return self.step(("epos", t, 0), ch)
        if kind == "epos":  # E >= t to come: E's value so far v < t
            if dig is None:
                return None
            v = 10 * st[2] + dig
            return ("eall",) if v >= st[1] else ("epos", st[1], v)
        if kind == "eneg":  # -E >= t: E's value so far v <= -t
            if dig is None:
                return None
            v = 10 * st[2] + dig
            return ("eneg", st[1], v, True) if v <= -st[1] else None
        if kind == "eall":
            return ("eall",) if dig is not None else None
        return None

    def accepting(self, st: tuple) -> bool:
        kind = st[0]
        if kind == "num":
            return st[1] == 0 and st[4] is not None and st[4] >= self.w0(st[2])
        if kind == "eany":
            return st[1] == 2
        if kind == "eneg":
            return bool(st[3])
        return kind in ("zero", "eall")


def multiples_rule_name(m: Decimal, base_expr: ir.Expr) -> str:
    """A rule name for the multiples of ``m`` in ``base_expr``: the same in every run."""
    digest = hashlib.sha1(repr(base_expr).encode()).hexdigest()[:12]
    return f"multiple-of-{m}-{digest}"


@functools.lru_cache(maxsize=256)  # IR and automata are immutable; a schema repeats its divisors
def multiples_within(m: Decimal, base_expr: ir.Expr, canonical: bool) -> chardfa.CharDFA:
    """The texts of ``base_expr`` (a number language; with ``canonical``, its digit runs capped
    by :func:`cap_digits`) whose value is an exact multiple of ``m`` > 0, in the spellings
    described above; minimal.  Raises :class:`GrammarError` past ``MULTIPLE_OF_STATES``."""
    whole = _multiples_product(m, base_expr)
    if not canonical:
        return whole
    try:  # the product of minimal automata: cheaper than capping inside the construction
        return chardfa.intersection([whole, chardfa.from_expr(cap_digits(base_expr)), _short_exponents()])
    except GrammarError as e:
        raise GrammarError(f"with canonical digit caps: {e.message}") from None


@functools.lru_cache(maxsize=1)
def _short_exponents() -> chardfa.CharDFA:
    """JSON numbers whose exponent has at most ``CANONICAL_MULTIPLE_EXPONENT_DIGITS`` digits:
    canonical mode's multiples keep only these (half the states of 18-digit exponents), and every
    double's ``json.dumps`` text is one (``1e-05``, ``1e+16``, ``5e-324``)."""
    sign = ir.ByteClass(((0x2B, 0x2B), (0x2D, 0x2D)))
    exp = ir.seq(ir.ByteClass(((0x45, 0x45), (0x65, 0x65))), opt(sign))
    return chardfa.from_expr(
        ir.seq(
            opt(ir.Literal(b"-")),
            ir.alt(ir.Literal(b"0"), ir.seq(NONZERO, ir.Repeat(DIGIT, 0, None))),
            opt(ir.seq(ir.Literal(b"."), ir.Repeat(DIGIT, 1, None))),
            opt(ir.seq(exp, ir.Repeat(DIGIT, 1, CANONICAL_MULTIPLE_EXPONENT_DIGITS))),
        )
    )


def _multiples_product(m: Decimal, base_expr: ir.Expr) -> chardfa.CharDFA:
    """:func:`multiples_within` without the caps: the product is built over the states both
    automata reach together, so bounds prune it."""
    auto = _Multiples(m)
    estimate = auto.size_estimate()
    if estimate > MULTIPLE_OF_STATES:  # don't start what cannot finish
        raise GrammarError(f"needs about {estimate} automaton states (more than {MULTIPLE_OF_STATES})")
    base = chardfa.from_expr(base_expr)
    atoms, _ = chardfa._refine([((ord(ch), ord(ch)),) for ch in _NUMBER_CHARS])
    atom_of = {ch: atoms.index(((ord(ch), ord(ch)),)) for ch in _NUMBER_CHARS}
    base_atom = {ch: next(i for i, rs in enumerate(base.atoms) if any(lo <= ord(ch) <= hi for lo, hi in rs))
                 for ch in _NUMBER_CHARS}  # fmt: skip
    start: tuple = (0, ("start",))
    index: dict[tuple, int] = {start: 0}
    order: list[tuple] = [start]
    trans: list[list[int]] = []
    for b, st in order:  # grows as states are found
        deadline.check("multipleOf automaton")
        row = [-1] * len(atoms)
        for ch in _NUMBER_CHARS:
            nb = base.trans[b][base_atom[ch]]
            nxt = auto.step(st, ch) if nb >= 0 else None
            if nxt is None:
                continue
            key = (nb, nxt)
            j = index.get(key)
            if j is None:
                if len(order) >= MULTIPLE_OF_STATES:
                    raise GrammarError(f"needs more than {MULTIPLE_OF_STATES} automaton states")
                j = index[key] = len(order)
                order.append(key)
            row[atom_of[ch]] = j
        trans.append(row)
    accept = [base.accept[b] and auto.accepting(st) for b, st in order]
    return chardfa.CharDFA(atoms, trans, accept).minimize(limit=MULTIPLE_OF_STATES)
