"""``format`` values as regular languages over decoded characters.

Each function returns a character-level IR expression for the whole string;
the caller maps it to JSON spellings with :class:`lexical.Encoder`.  The
reading chosen for each format (also in ``FORMAT_READINGS``, which the
report quotes):

* ``date``: RFC 3339 ``full-date``; days checked against the month, and
  Feb 29 only in leap years (Gregorian rule, years 0000-9999).
* ``time``: RFC 3339 ``full-time`` (offset required); ``T``/``Z`` in either
  case; fractional seconds of any length; second ``60`` only as
  ``23:59:60`` with offset ``Z``/``+00:00``/``-00:00`` (a leap second at
  another local time is rejected: narrower than RFC 3339, never wider).
* ``date-time``: RFC 3339 ``date-time`` (the two above joined by ``T``/``t``).
* ``email``: RFC 5322 ``addr-spec`` restricted to a dot-atom local part and a
  hostname domain (no quoted strings, comments or address literals).
* ``hostname``: RFC 1123 section 2.1: dot-separated labels of 1-63 letters,
  digits and hyphens, not starting or ending with a hyphen (the 253-octet
  total of RFC 1035 is not checked).
* ``ipv4``: dotted quad of decimal octets 0-255 without leading zeros (RFC 3986
  ``dec-octet``).
* ``ipv6``: RFC 4291 section 2.2 text forms (RFC 3986 ``IPv6address``),
  including ``::`` compression and an embedded IPv4 tail; no zone index.
* ``uuid``: RFC 4122 ``8-4-4-4-12`` hex digits, either case, any version.
* ``uri``: RFC 3986 ``URI`` (scheme required); ``uri-reference``: RFC 3986
  ``URI-reference``.  ASCII only, as RFC 3986 (IRIs are ``iri``, unsupported).
* ``json-pointer``: RFC 6901.
* ``duration``: RFC 3339 Appendix A ``duration``.
* ``iri``, ``iri-reference``: RFC 3987 (``ucschar`` where RFC 3986 has ``unreserved``,
  ``iprivate`` in the query too).
* ``relative-json-pointer``: draft-handrews-relative-json-pointer-01, the one JSON Schema
  2020-12 cites: a non-negative integer, then ``#`` or a JSON pointer.
* ``uri-template``: RFC 6570 (level 4: operators, prefix and explode modifiers).
* ``idn-email``: RFC 6531 ``addr-spec`` restricted as ``email`` is, with UTF-8 (non-ASCII)
  characters in the local part; the domain stays an ASCII hostname (``idn-hostname``, IDNA2008
  with its contextual rules, is not written as an automaton: refused).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ... import ir
from ._ir_util import opt

FORMAT_READINGS = {
    "date": "RFC 3339 full-date, days per month, Feb 29 only in leap years",
    "time": "RFC 3339 full-time, offset required, leap second only as 23:59:60 UTC",
    "date-time": "RFC 3339 date-time, leap second only as 23:59:60 UTC",
    "email": "RFC 5322 addr-spec with dot-atom local part and RFC 1123 hostname domain",
    "hostname": "RFC 1123 labels of 1-63 LDH characters (253-octet total not checked)",
    "ipv4": "RFC 3986 dotted quad, octets 0-255 without leading zeros",
    "ipv6": "RFC 4291 text forms (RFC 3986 IPv6address), no zone index",
    "uuid": "RFC 4122 8-4-4-4-12 hex digits, any case, any version",
    "uri": "RFC 3986 URI (absolute, scheme required), ASCII",
    "uri-reference": "RFC 3986 URI-reference, ASCII",
    "json-pointer": "RFC 6901 JSON pointer",
    "duration": "RFC 3339 appendix A duration",
    "iri": "RFC 3987 IRI (absolute, scheme required)",
    "iri-reference": "RFC 3987 IRI-reference",
    "relative-json-pointer": "draft-handrews-relative-json-pointer-01 (no index manipulation)",
    "uri-template": "RFC 6570 URI Template, level 4",
    "idn-email": "RFC 6531 addr-spec with UTF-8 dot-atom local part and RFC 1123 (ASCII) hostname domain",
}


def L(s: str) -> ir.Expr:
    return ir.Literal(s.encode("ascii"))


def C(*spec: str) -> ir.Expr:
    """A character class from single characters and ``a-z`` style ranges."""
    ranges: list[tuple[int, int]] = []
    for s in spec:
        if len(s) == 3 and s[1] == "-":
            ranges.append((ord(s[0]), ord(s[2])))
        else:
            ranges.extend((ord(c), ord(c)) for c in s)
    return ir.char_class(ranges)


def R(e: ir.Expr, lo: int, hi: int | None) -> ir.Expr:
    return ir.Repeat(e, lo, hi)


DIGIT = C("0-9")
HEXDIG = C("0-9", "a-f", "A-F")
ALPHA = C("a-z", "A-Z")


def _two(lo: int, hi: int) -> ir.Expr:
    """Two-digit numbers lo..hi (zero padded)."""
    return ir.alt(*[ir.Literal(b"%02d" % v) for v in range(lo, hi + 1)])  # L(f"{v:02d}"), no call each


def _leap_year() -> ir.Expr:
    # yy divisible by 4 and not 00: 04 08 12 ... 96
    yy = ir.alt(ir.seq(L("0"), C("48")), ir.seq(C("2468"), C("048")), ir.seq(C("13579"), C("26")))
    century = ir.alt(ir.seq(C("02468"), C("048")), ir.seq(C("13579"), C("26")))  # 00, 04, ... 96
    return ir.alt(ir.seq(DIGIT, DIGIT, yy), ir.seq(century, L("00")))


def date() -> ir.Expr:
    year = R(DIGIT, 4, 4)
    d31 = ir.alt(ir.seq(L("0"), C("1-9")), ir.seq(C("12"), DIGIT), L("30"), L("31"))
    d30 = ir.alt(ir.seq(L("0"), C("1-9")), ir.seq(C("12"), DIGIT), L("30"))
    d28 = ir.alt(ir.seq(L("0"), C("1-9")), ir.seq(L("1"), DIGIT), ir.seq(L("2"), C("0-8")))
    m31 = ir.alt(*(L(m) for m in ("01", "03", "05", "07", "08", "10", "12")))
    m30 = ir.alt(*(L(m) for m in ("04", "06", "09", "11")))
    return ir.alt(
        ir.seq(year, L("-"), m31, L("-"), d31),
        ir.seq(year, L("-"), m30, L("-"), d30),
        ir.seq(year, L("-02-"), d28),
        ir.seq(_leap_year(), L("-02-29")),
    )


def _offset(hours: ir.Expr, minutes: ir.Expr) -> ir.Expr:
    return ir.alt(C("Zz"), ir.seq(C("+-"), hours, L(":"), minutes))


def time() -> ir.Expr:
    frac = opt(ir.seq(L("."), R(DIGIT, 1, None)))
    hours, minutes = _two(0, 23), _two(0, 59)  # each made once: IR is immutable, equal either way
    regular = ir.seq(hours, L(":"), minutes, L(":"), minutes, frac, _offset(hours, minutes))
    utc = ir.alt(C("Zz"), L("+00:00"), L("-00:00"))
    leap = ir.seq(L("23:59:60"), frac, utc)
    return ir.alt(regular, leap)


def date_time() -> ir.Expr:
    return ir.seq(date(), C("Tt"), time())


def _label() -> ir.Expr:
    ld = C("a-z", "A-Z", "0-9")
    return ir.seq(ld, opt(ir.seq(R(C("a-z", "A-Z", "0-9", "-"), 0, 61), ld)))


def hostname() -> ir.Expr:
    return ir.seq(_label(), R(ir.seq(L("."), _label()), 0, None))


def email() -> ir.Expr:
    atext = C("a-z", "A-Z", "0-9", "!#$%&'*+/=?^_`{|}~-")
    atom = R(atext, 1, None)
    return ir.seq(atom, R(ir.seq(L("."), atom), 0, None), L("@"), hostname())


def _dec_octet() -> ir.Expr:
    return ir.alt(
        DIGIT,
        ir.seq(C("1-9"), DIGIT),
        ir.seq(L("1"), DIGIT, DIGIT),
        ir.seq(L("2"), C("0-4"), DIGIT),
        ir.seq(L("25"), C("0-5")),
    )


def ipv4() -> ir.Expr:
    o = _dec_octet()
    return ir.seq(o, L("."), o, L("."), o, L("."), o)


def ipv6() -> ir.Expr:
    h16 = R(HEXDIG, 1, 4)
    h16c = ir.seq(h16, L(":"))
    ls32 = ir.alt(ir.seq(h16, L(":"), h16), ipv4())

    def upto(n: int) -> ir.Expr:  # [ *n( h16 ":" ) h16 ]
        return opt(ir.seq(R(h16c, 0, n), h16)) if n >= 0 else ir.EPSILON

    return ir.alt(
        ir.seq(R(h16c, 6, 6), ls32),
        ir.seq(L("::"), R(h16c, 5, 5), ls32),
        ir.seq(opt(h16), L("::"), R(h16c, 4, 4), ls32),
        ir.seq(upto(1), L("::"), R(h16c, 3, 3), ls32),
        ir.seq(upto(2), L("::"), R(h16c, 2, 2), ls32),
        ir.seq(upto(3), L("::"), h16c, ls32),
        ir.seq(upto(4), L("::"), ls32),
        ir.seq(upto(5), L("::"), h16),
        ir.seq(upto(6), L("::")),
    )


def uuid() -> ir.Expr:
    return ir.seq(
        R(HEXDIG, 8, 8), *(ir.seq(L("-"), R(HEXDIG, 4, 4)) for _ in range(3)), L("-"), R(HEXDIG, 12, 12)
    )


# RFC 3986 pieces; with ``iri``, the RFC 3987 ones (``ucschar`` joins the unreserved characters,
# ``iprivate`` the query)
_UNRESERVED = ("a-z", "A-Z", "0-9", "-._~")
_SUB_DELIMS = "!$&'()*+,;="
Ranges = Sequence[tuple[int, int]]
UCSCHAR: list[tuple[int, int]] = (
    [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)]
    + [(0x10000 * p, 0x10000 * p + 0xFFFD) for p in range(1, 14)]
    + [(0xE1000, 0xEFFFD)]
)
IPRIVATE: list[tuple[int, int]] = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]


def _cls(*spec: str, extra: Ranges = ()) -> ir.Expr:
    base = C(*spec)
    if not extra:
        return base
    assert isinstance(base, ir.CharClass)
    return ir.char_class([*base.ranges, *extra])


def _pct() -> ir.Expr:
    return ir.seq(L("%"), HEXDIG, HEXDIG)


def _pchar(u: Ranges = ()) -> ir.Expr:
    return ir.alt(_cls(*_UNRESERVED, _SUB_DELIMS, ":@", extra=u), _pct())


def _authority(u: Ranges = ()) -> ir.Expr:
    userinfo = R(ir.alt(_cls(*_UNRESERVED, _SUB_DELIMS, ":", extra=u), _pct()), 0, None)
    ipvfuture = ir.seq(C("vV"), R(HEXDIG, 1, None), L("."), R(C(*_UNRESERVED, _SUB_DELIMS, ":"), 1, None))
    ip_literal = ir.seq(L("["), ir.alt(ipv6(), ipvfuture), L("]"))
    reg_name = R(ir.alt(_cls(*_UNRESERVED, _SUB_DELIMS, extra=u), _pct()), 0, None)  # includes IPv4address
    host = ir.alt(ip_literal, reg_name)
    return ir.seq(opt(ir.seq(userinfo, L("@"))), host, opt(ir.seq(L(":"), R(DIGIT, 0, None))))


def _segments(u: Ranges = ()) -> tuple[ir.Expr, ir.Expr, ir.Expr]:
    segment = R(_pchar(u), 0, None)
    segment_nz = R(_pchar(u), 1, None)
    abempty = R(ir.seq(L("/"), segment), 0, None)
    return segment, segment_nz, abempty


def _query_fragment(u: Ranges = ()) -> ir.Expr:
    fchar = R(ir.alt(_pchar(u), C("/?")), 0, None)
    qchar = R(ir.alt(_pchar(u), _cls("/?", extra=IPRIVATE)), 0, None) if u else fchar
    return ir.seq(opt(ir.seq(L("?"), qchar)), opt(ir.seq(L("#"), fchar)))


def uri(u: Ranges = ()) -> ir.Expr:
    segment, segment_nz, abempty = _segments(u)
    # "+.-", not "+-.": C reads a three-character "x-y" as a range (that one let "," in)
    scheme = ir.seq(ALPHA, R(C("a-z", "A-Z", "0-9", "+.-"), 0, None))
    hier = ir.alt(
        ir.seq(L("//"), _authority(u), abempty),
        ir.seq(L("/"), opt(ir.seq(segment_nz, abempty))),  # path-absolute
        ir.seq(segment_nz, abempty),  # path-rootless
        ir.EPSILON,
    )
    return ir.seq(scheme, L(":"), hier, _query_fragment(u))


def uri_reference(u: Ranges = ()) -> ir.Expr:
    segment, segment_nz, abempty = _segments(u)
    nc_segment_nz = R(ir.alt(_cls(*_UNRESERVED, _SUB_DELIMS, "@", extra=u), _pct()), 1, None)
    relative = ir.alt(
        ir.seq(L("//"), _authority(u), abempty),
        ir.seq(L("/"), opt(ir.seq(segment_nz, abempty))),
        ir.seq(nc_segment_nz, abempty),  # path-noscheme
        ir.EPSILON,
    )
    return ir.alt(uri(u), ir.seq(relative, _query_fragment(u)))


def iri() -> ir.Expr:
    return uri(UCSCHAR)


def iri_reference() -> ir.Expr:
    return uri_reference(UCSCHAR)


def json_pointer() -> ir.Expr:
    unescaped = ir.char_class([(0, 0x2E), (0x30, 0x7D), (0x7F, ir.MAX_CODE_POINT)])
    token = R(ir.alt(unescaped, ir.seq(L("~"), C("01"))), 0, None)
    return R(ir.seq(L("/"), token), 0, None)


def relative_json_pointer() -> ir.Expr:
    return ir.seq(ir.alt(L("0"), ir.seq(C("1-9"), R(DIGIT, 0, None))), ir.alt(L("#"), json_pointer()))


def uri_template() -> ir.Expr:
    pct = _pct()
    # RFC 6570 literals; "'" too, which the ABNF leaves out and the JSON-Schema-Test-Suite counts valid
    literal = ir.alt(
        _cls("!", "#$", "&'", "(-;", "=", "?-[", "]", "_", "a-z", "~", extra=UCSCHAR + IPRIVATE), pct
    )
    varchar = ir.alt(C("a-z", "A-Z", "0-9", "_"), pct)
    varname = ir.seq(varchar, R(ir.seq(opt(L(".")), varchar), 0, None))
    modifier = ir.alt(ir.seq(L(":"), C("1-9"), R(DIGIT, 0, 3)), L("*"))
    varspec = ir.seq(varname, opt(modifier))
    expression = ir.seq(L("{"), opt(C("+#./;?&=,!@|")), varspec, R(ir.seq(L(","), varspec), 0, None), L("}"))
    return R(ir.alt(literal, expression), 0, None)


def idn_email() -> ir.Expr:
    atext = _cls("a-z", "A-Z", "0-9", "!#$%&'*+/=?^_`{|}~-", extra=[(0x80, ir.MAX_CODE_POINT)])
    atom = R(atext, 1, None)
    return ir.seq(atom, R(ir.seq(L("."), atom), 0, None), L("@"), hostname())


def duration() -> ir.Expr:
    n = R(DIGIT, 1, None)
    second = ir.seq(n, L("S"))
    minute = ir.seq(n, L("M"), opt(second))
    hour = ir.seq(n, L("H"), opt(minute))
    time_ = ir.seq(L("T"), ir.alt(hour, minute, second))
    day = ir.seq(n, L("D"))
    month = ir.seq(n, L("M"), opt(day))
    year = ir.seq(n, L("Y"), opt(month))
    date_ = ir.seq(ir.alt(day, month, year), opt(time_))
    week = ir.seq(n, L("W"))
    return ir.seq(L("P"), ir.alt(date_, time_, week))


FORMATS: dict[str, Callable[[], ir.Expr]] = {
    "date": date,
    "time": time,
    "date-time": date_time,
    "email": email,
    "hostname": hostname,
    "ipv4": ipv4,
    "ipv6": ipv6,
    "uuid": uuid,
    "uri": uri,
    "uri-reference": uri_reference,
    "json-pointer": json_pointer,
    "duration": duration,
    "iri": iri,
    "iri-reference": iri_reference,
    "relative-json-pointer": relative_json_pointer,
    "uri-template": uri_template,
    "idn-email": idn_email,
}
