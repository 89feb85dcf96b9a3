"""Sufficient conditions for two schemas to share no instance (``oneOf`` = ``anyOf`` then).

Proved disjoint when, for every JSON type both allow: their enum/const values
are apart; or (objects) a property required by both has disjoint schemas
(a discriminator), or is required by one and forbidden by the other; or
(numbers) their intervals do not meet.  Anything else counts as overlapping.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ...errors import GrammarError
from .merge import Unmergeable, equal, evaluate, json_type, type_set
from .numbers import decimal_of
from .strings import pattern_matches

if TYPE_CHECKING:
    from .walk import SchemaCompiler


def _types(s: dict[str, Any]) -> set[str]:
    ts = type_set(s)
    if "enum" in s:
        vt = {json_type(v) for v in s["enum"]}
        if "integer" in vt:
            vt.add("number")
        ts &= vt
    return ts


def _interval(s: dict[str, Any]) -> tuple[Decimal | None, bool, Decimal | None, bool]:

    lo = hi = None
    li = hi_i = True
    if "minimum" in s:
        lo = decimal_of(s["minimum"])
    if "exclusiveMinimum" in s:
        d = decimal_of(s["exclusiveMinimum"])
        if lo is None or d >= lo:
            lo, li = d, False
    if "maximum" in s:
        hi = decimal_of(s["maximum"])
    if "exclusiveMaximum" in s:
        d = decimal_of(s["exclusiveMaximum"])
        if hi is None or d <= hi:
            hi, hi_i = d, False
    return lo, li, hi, hi_i


def _apart(a: tuple[Any, bool, Any, bool], b: tuple[Any, bool, Any, bool]) -> bool:
    def below(x: tuple[Any, bool, Any, bool], y: tuple[Any, bool, Any, bool]) -> bool:
        return (
            x[2] is not None and y[0] is not None and (x[2] < y[0] or (x[2] == y[0] and not (x[3] and y[1])))
        )

    return below(a, b) or below(b, a)


def disjoint(a: Any, b: Any, c: SchemaCompiler, depth: int = 0) -> bool:
    if a is False or b is False:
        return True
    if depth > 8 or a is True or b is True:
        return False
    try:
        a = c.resolve_part(a, "", [16])
        b = c.resolve_part(b, "", [16])
    except (Unmergeable, GrammarError):
        return False
    if "anyOf" in a or "oneOf" in a or "anyOf" in b or "oneOf" in b or "not" in a or "not" in b:
        return False
    if "enum" in a and all(evaluate(b, v) is False for v in a["enum"]):
        return True
    if "enum" in b and all(evaluate(a, v) is False for v in b["enum"]):
        return True
    if "enum" in a and "enum" in b and not any(equal(x, y) for x in a["enum"] for y in b["enum"]):
        return True
    shared = _types(a) & _types(b)
    for t in shared:
        if t == "object" and _objects_apart(a, b, c, depth):
            continue
        if t in ("integer", "number") and _apart(_interval(a), _interval(b)):
            continue
        return False
    return True


def _value_schema(s: dict[str, Any], key: str) -> Any:
    """The schema the value of ``key`` must satisfy in an instance of ``s`` (its property
    schema, the schemas of the patterns it matches, else additionalProperties); None when a
    pattern cannot be evaluated."""
    parts: list[Any] = []
    if key in s.get("properties", {}):
        parts.append(s["properties"][key])
    for p, ps in s.get("patternProperties", {}).items():
        hit = pattern_matches(p, key) if isinstance(p, str) else None
        if hit is None:
            return None
        if hit:
            parts.append(ps)
    if not parts:
        return s.get("additionalProperties", True)
    if any(x is False for x in parts):
        return False
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def _objects_apart(a: dict[str, Any], b: dict[str, Any], c: SchemaCompiler, depth: int) -> bool:
    """A property required by one side whose value schemas on the two sides share no value:
    no instance of the other side has it (a discriminator, or a property one side forbids)."""
    ra, rb = set(a.get("required", [])), set(b.get("required", []))
    for x, y, req in ((a, b, ra), (b, a, rb)):
        for p in req:
            vx, vy = _value_schema(x, p), _value_schema(y, p)
            if vx is None or vy is None:
                continue
            if vy is False or disjoint(vx, vy, c, depth + 1):
                return True
    return False
