"""Code-point sets of ECMAScript's Unicode property escapes ``\\p{…}`` (``u`` flag).

ECMA-262 (22.2.2.9, tables 66-68) admits exactly three forms, names matched case-sensitively:

* ``General_Category=V`` / ``gc=V`` / a lone ``V``: a General_Category value or alias
  (``Letter``, ``L``, ``Lu``, ``punct``...).  Derived from Python's :mod:`unicodedata`, so its
  Unicode version is the running Python's (``unicodedata.unidata_version``: 14.0 on 3.11,
  15.0 on 3.12, 15.1 on 3.13); an engine on a newer Unicode puts characters assigned since
  in their new category where this one still sees ``Cn``.
* ``Script=V`` / ``sc=V`` / ``Script_Extensions=V`` / ``scx=V``: a script name or its
  four-letter code.  The standard library has no script table: these come from the
  maintained ``regex`` package (its own Unicode version, ``pip install cfgmask[ecmascript]``);
  without it such an escape is a :class:`GrammarError` saying so, never a guess.
* a lone binary property of table 67 (``Alphabetic``, ``White_Space``, ``Emoji``...):
  ``Any``, ``ASCII`` and ``Assigned`` from :mod:`unicodedata`, the others from ``regex``.

The tables of names below are the specification's (small, typed from ECMA-262 and Unicode's
PropertyValueAliases); the code-point sets are computed, once per name, by scanning every
code point.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from .. import ir

Ranges = tuple[tuple[int, int], ...]

# General_Category: every value's names (long name, short alias, other aliases).
_GC_VALUES = [
    ("Cased_Letter", "LC"), ("Close_Punctuation", "Pe"), ("Connector_Punctuation", "Pc"),
    ("Control", "Cc", "cntrl"), ("Currency_Symbol", "Sc"), ("Dash_Punctuation", "Pd"),
    ("Decimal_Number", "Nd", "digit"), ("Enclosing_Mark", "Me"), ("Final_Punctuation", "Pf"),
    ("Format", "Cf"), ("Initial_Punctuation", "Pi"), ("Letter", "L"), ("Letter_Number", "Nl"),
    ("Line_Separator", "Zl"), ("Lowercase_Letter", "Ll"), ("Mark", "M", "Combining_Mark"),
    ("Math_Symbol", "Sm"), ("Modifier_Letter", "Lm"), ("Modifier_Symbol", "Sk"),
    ("Nonspacing_Mark", "Mn"), ("Number", "N"), ("Open_Punctuation", "Ps"), ("Other", "C"),
    ("Other_Letter", "Lo"), ("Other_Number", "No"), ("Other_Punctuation", "Po"),
    ("Other_Symbol", "So"), ("Paragraph_Separator", "Zp"), ("Private_Use", "Co"),
    ("Punctuation", "P", "punct"), ("Separator", "Z"), ("Space_Separator", "Zs"),
    ("Spacing_Mark", "Mc"), ("Surrogate", "Cs"), ("Symbol", "S"), ("Titlecase_Letter", "Lt"),
    ("Unassigned", "Cn"), ("Uppercase_Letter", "Lu"),
]  # fmt: skip
# Each name → the two-letter categories it covers (a one-letter short alias is a group).
GENERAL_CATEGORY: dict[str, frozenset[str]] = {}
for _names in _GC_VALUES:
    _short = _names[1]
    _cats = frozenset({"Lu", "Ll", "Lt"}) if _short == "LC" else frozenset({_short})
    for _n in _names:
        GENERAL_CATEGORY[_n] = _cats
_GROUPS = "LMNPSZC"

# Binary properties of ECMA-262 table 67: name → canonical name (aliases included).
_BINARY = [
    ("ASCII",), ("ASCII_Hex_Digit", "AHex"), ("Alphabetic", "Alpha"), ("Any",), ("Assigned",),
    ("Bidi_Control", "Bidi_C"), ("Bidi_Mirrored", "Bidi_M"), ("Case_Ignorable", "CI"), ("Cased",),
    ("Changes_When_Casefolded", "CWCF"), ("Changes_When_Casemapped", "CWCM"),
    ("Changes_When_Lowercased", "CWL"), ("Changes_When_NFKC_Casefolded", "CWKCF"),
    ("Changes_When_Titlecased", "CWT"), ("Changes_When_Uppercased", "CWU"), ("Dash",),
    ("Default_Ignorable_Code_Point", "DI"), ("Deprecated", "Dep"), ("Diacritic", "Dia"),
    ("Emoji",), ("Emoji_Component", "EComp"), ("Emoji_Modifier", "EMod"),
    ("Emoji_Modifier_Base", "EBase"), ("Emoji_Presentation", "EPres"),
    ("Extended_Pictographic", "ExtPict"), ("Extender", "Ext"), ("Grapheme_Base", "Gr_Base"),
    ("Grapheme_Extend", "Gr_Ext"), ("Hex_Digit", "Hex"), ("IDS_Binary_Operator", "IDSB"),
    ("IDS_Trinary_Operator", "IDST"), ("ID_Continue", "IDC"), ("ID_Start", "IDS"),
    ("Ideographic", "Ideo"), ("Join_Control", "Join_C"), ("Logical_Order_Exception", "LOE"),
    ("Lowercase", "Lower"), ("Math",), ("Noncharacter_Code_Point", "NChar"),
    ("Pattern_Syntax", "Pat_Syn"), ("Pattern_White_Space", "Pat_WS"), ("Quotation_Mark", "QMark"),
    ("Radical",), ("Regional_Indicator", "RI"), ("Sentence_Terminal", "STerm"),
    ("Soft_Dotted", "SD"), ("Terminal_Punctuation", "Term"), ("Unified_Ideograph", "UIdeo"),
    ("Uppercase", "Upper"), ("Variation_Selector", "VS"), ("White_Space", "space"),
    ("XID_Continue", "XIDC"), ("XID_Start", "XIDS"),
]  # fmt: skip
BINARY: dict[str, str] = {n: names[0] for names in _BINARY for n in names}
_SCRIPT_KEYS = {
    "Script": "Script",
    "sc": "Script",
    "Script_Extensions": "Script_Extensions",
    "scx": "Script_Extensions",
}
# A script value as Unicode spells its names (``Old_Italic``, ``Grek``): the ``regex`` package
# matches names loosely, so the spelling is checked here (ECMAScript matches exactly).
_SCRIPT_SPELLING = re.compile(r"[A-Z][a-z]+(?:_[A-Z][a-z]+)*|[A-Z][a-z]{3}|SignWriting|Nko|NKo|Phags_Pa")


class PropertyError(ValueError):
    """An unknown property name or value (ECMAScript: a SyntaxError)."""


class PropertyTableMissing(PropertyError):
    """A valid property whose table needs the ``regex`` package, which is not installed."""


def property_ranges(body: str) -> Ranges:
    """The code points (surrogates excluded) of ``\\p{body}``; raises :class:`PropertyError`."""
    name, eq, value = body.partition("=")
    if eq:
        if name in ("General_Category", "gc"):
            if value not in GENERAL_CATEGORY:
                raise PropertyError(f"unknown General_Category value {value!r}")
            return _category(value)
        if name in _SCRIPT_KEYS:
            if not _SCRIPT_SPELLING.fullmatch(value):
                raise PropertyError(f"unknown script {value!r}")
            return _from_regex_package(f"{_SCRIPT_KEYS[name]}={value}")
        raise PropertyError(
            f"unknown property {name!r} (ECMAScript has General_Category, Script, Script_Extensions)"
        )
    if body in GENERAL_CATEGORY:
        return _category(body)
    if body in BINARY:
        return _binary(BINARY[body])
    raise PropertyError(f"unknown property {body!r}")


def _category(value: str) -> Ranges:
    return _categories(GENERAL_CATEGORY[value])


@functools.lru_cache(maxsize=256)
def _categories(cats: frozenset[str]) -> Ranges:
    table = _category_runs()
    if len(cats) == 1 and next(iter(cats)) in _GROUPS:  # one-letter alias: its whole group
        cats = frozenset(c for c in table if c[0] == next(iter(cats)))
    return ir.normalize_ranges([r for c in cats for r in table.get(c, ())])


@functools.lru_cache(maxsize=1)
def _category_runs() -> dict[str, list[tuple[int, int]]]:
    """Every two-letter category's runs of code points (surrogates excluded), in one pass."""
    out: dict[str, list[tuple[int, int]]] = {}
    last, start = "", 0
    lo, hi = ir.SURROGATES
    for cp in [*range(lo), *range(hi + 1, ir.MAX_CODE_POINT + 2)]:
        cat = unicodedata.category(chr(cp)) if cp <= ir.MAX_CODE_POINT else ""
        if cat != last or cp == hi + 1:
            if last:
                out.setdefault(last, []).append((start, (lo - 1) if cp == hi + 1 else cp - 1))
            last, start = cat, cp
    return out


@functools.lru_cache(maxsize=64)
def _binary(name: str) -> Ranges:
    if name == "Any":
        return ir.without_surrogates(((0, ir.MAX_CODE_POINT),))
    if name == "ASCII":
        return ((0, 0x7F),)
    if name == "Assigned":
        return _categories(frozenset(c for c in _category_runs() if c != "Cn"))
    return _from_regex_package(name)


@functools.lru_cache(maxsize=1)
def scalar_values() -> str:
    """Every Unicode scalar value (the code points less the surrogates) in order, as one string
    (4 MB, made once a process from a UTF-32 buffer: a loop of ``chr`` costs 0.3 s).  Regex
    engines are asked which of them a class matches (exact by construction)."""
    import numpy as np

    lo, hi = ir.SURROGATES
    cps = np.arange(ir.MAX_CODE_POINT + 1, dtype="<u4")
    return cps[(cps < lo) | (cps > hi)].tobytes().decode("utf-32-le")


def scalar_at(i: int) -> int:
    """The code point at index ``i`` of :func:`scalar_values`."""
    lo, hi = ir.SURROGATES
    return i if i < lo else i + (hi - lo + 1)


@functools.lru_cache(maxsize=256)
def _from_regex_package(prop: str) -> Ranges:
    try:
        import regex  # type: ignore[import-untyped]
    except ImportError:
        raise PropertyTableMissing(
            f"\\p{{{prop}}} needs the 'regex' package for its Unicode table (pip install cfgmask[ecmascript])"
        ) from None
    try:
        rx = regex.compile(f"\\p{{{prop}}}+")
    except regex.error:
        raise PropertyError(f"unknown property value {prop!r}") from None
    text = scalar_values()
    runs = [(ord(text[m.start()]), ord(text[m.end() - 1])) for m in rx.finditer(text)]
    return ir.without_surrogates(ir.normalize_ranges(runs))
