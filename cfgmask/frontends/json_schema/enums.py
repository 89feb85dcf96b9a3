"""``enum`` and ``const`` values as literal sets.

An enum of n strings is one :class:`~cfgmask.ir.LiteralSet`, whose minimal automaton the
compiler builds straight from the words (csrc/words.c): never an alternation of n
expressions, and nothing here runs a Python statement per value except in comprehensions
(types, the UTF-8 of the full language) and one call of the JSON encoder (the canonical
texts).  Values the set does not cover (numbers in the full language, arrays, objects,
strings with a lone surrogate in the full language) keep their own expressions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ... import deadline, ir
from .canonical import canonical_strings, has_surrogate, unspellable
from .merge import equality_key, evaluate
from .report import Reporter

_KEYWORDS_BY_TYPE = {"type"}  # keywords whose verdict on a string does not depend on which string


def kept_values(
    values: list[Any], rest: dict[str, Any], rep: Reporter, where: str
) -> tuple[list[str], list[Any]]:
    """The strings and the other values of ``values`` that satisfy the keywords ``rest`` beside
    the enum (strings as given, repeats included; the others without repeats)."""
    if set(map(type, values)) == {str}:  # the usual enum: no loop in Python
        strs, others = list(values), []
    else:
        strs = [v for v in values if type(v) is str]
        others = [v for v in values if type(v) is not str]
    if rest and strs:
        if set(rest) <= _KEYWORDS_BY_TYPE:
            if not _holds(rest, "", rep, where):
                strs = []
        else:
            strs = [v for v in strs if _holds(rest, v, rep, where)]
    kept: list[Any] = []
    seen: set[Any] = set()
    for v in others:
        deadline.check("JSON Schema enum")
        key = equality_key(v)
        if key not in seen and _holds(rest, v, rep, where):
            seen.add(key)
            kept.append(v)
    return strs, kept


def _holds(rest: dict[str, Any], v: Any, rep: Reporter, where: str) -> bool:
    if not rest:
        return True
    ok = evaluate(rest, v)
    if ok is None:
        rep.rejected(where, "enum", "a keyword beside enum/const cannot be evaluated on its values")
        return True
    return ok


def _plain(v: Any) -> bool:
    """A value whose canonical text ``json.dumps`` writes: null, a boolean, a finite number."""
    return v is None or isinstance(v, (bool, int)) or (isinstance(v, float) and math.isfinite(v))


def canonical_set(strs: list[str], others: list[Any], const_value: Callable[[Any], ir.Expr]) -> ir.Expr:
    """One spelling of each value: the canonical texts of the strings, ``json.dumps`` of the
    scalars (1.0 stays ``1.0``: a valid spelling of the number 1), in one literal set."""
    if has_surrogate("".join(strs)) and any(map(unspellable, strs)):
        strs = [v for v in strs if not unspellable(v)]
    words = canonical_strings(strs)
    words += [json.dumps(v).encode() for v in others if _plain(v)]
    alts = [const_value(v) for v in others if not _plain(v)]
    if len(words) == 1:
        alts.insert(0, ir.Literal(words[0]))
    elif words:
        alts.insert(0, ir.LiteralSet(tuple(words)))
    return ir.alt(*alts) if alts else ir.NOTHING


def _spelled_with_surrogates(s: str) -> ir.Expr:
    """Every spelling of a string with a lone surrogate: ``\\uDXXX`` (hex in either case) for
    the surrogate, every spelling of each other character."""
    from .lexical import encode_text

    parts: list[ir.Expr] = [ir.Literal(b'"')]
    for c in s:
        if "\ud800" <= c <= "\udfff":
            digits = [ir.alt(ir.Literal(d.encode()), ir.Literal(d.upper().encode())) for d in f"{ord(c):04x}"]
            parts += [ir.Literal(b"\\u"), *digits]
        else:
            parts.append(encode_text(c))
    parts.append(ir.Literal(b'"'))
    return ir.seq(*parts)


def full_set(strs: list[str], others: list[Any], const_value: Callable[[Any], ir.Expr]) -> ir.Expr:
    """Every spelling of each value: the strings as one JSON literal set (but a string with a
    surrogate, which only its escapes spell), the other values as ``const_value`` spells them."""
    alts = [const_value(v) for v in others]
    if strs:
        odd = [v for v in strs if has_surrogate(v)] if has_surrogate("".join(strs)) else []
        if odd:
            strs = [v for v in strs if not has_surrogate(v)]
            alts += [_spelled_with_surrogates(v) for v in dict.fromkeys(odd) if not unspellable(v)]
        if len(strs) == 1 and not alts:
            return const_value(strs[0])
        if strs:
            alts.insert(0, ir.LiteralSet(tuple([v.encode() for v in strs]), json=True))
    return ir.alt(*alts) if alts else ir.NOTHING
