"""Schema algebra on dicts: normalizing draft spellings, exact intersection (``allOf``),
value equality as JSON Schema defines it, and a small evaluator for finite value sets."""

from __future__ import annotations

import math
from typing import Any

from ...errors import GrammarError

TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")

ANNOTATIONS = {
    "title", "description", "default", "examples", "example", "$comment", "deprecated", "readOnly",
    "writeOnly", "$schema", "$id", "id", "$anchor", "$defs", "definitions", "$vocabulary",
    "contentMediaType", "contentEncoding", "contentSchema", "nullable", "discriminator", "xml",
    "externalDocs", "$dynamicAnchor",
}  # fmt: skip


# Keywords of the JSON Schema vocabularies (drafts 4 to 2020-12); any other keyword is an
# annotation (JSON Schema 2020-12 section 6.5; the jsonschema package ignores it too).
VOCABULARY = {
    "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "dependentSchemas", "dependencies", "prefixItems", "items", "additionalItems", "contains", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "maxProperties", "minProperties", "required", "dependentRequired", "format",
}  # fmt: skip


_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains",
           "maxContains")  # fmt: skip


# The keywords normalize() may respell or check.
NORMALIZED = frozenset(
    (*_COUNTS, "exclusiveMaximum", "exclusiveMinimum", "items", "additionalItems", "dependencies", "const")
)


class Unmergeable(Exception):
    """Two schemas whose intersection this module cannot write as one schema."""

    def __init__(self, keyword: str, reason: str) -> None:
        super().__init__(reason)
        self.keyword = keyword
        self.reason = reason


def is_annotation(key: str) -> bool:
    return key in ANNOTATIONS or key.startswith("x-")


def normalize(s: dict[str, Any], draft: int) -> dict[str, Any]:
    """One spelling per concept: 2020-12 keywords; draft-04 boolean exclusives become
    numeric ones; draft-07 array ``items``/``additionalItems`` become ``prefixItems``/``items``;
    ``dependencies`` splits into ``dependentRequired``/``dependentSchemas``."""
    out = dict(s)
    if out.keys().isdisjoint(NORMALIZED):  # nothing to respell (most subschemas)
        return out
    for k in _COUNTS:
        if k not in out:
            continue
        v = out[k]
        if v.__class__ is int and v >= 0:  # the count as JSON gives it (most): kept as it is
            continue
        if isinstance(v, float) and v.is_integer():
            out[k] = int(v)
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise GrammarError(f"{k} must be a nonnegative integer")
    for bound, ex in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        if isinstance(out.get(ex), bool):
            flag = out.pop(ex)
            if flag and bound in out:
                out[ex] = out.pop(bound)
    items = out.get("items")
    if isinstance(items, list) or (draft <= 7 and "additionalItems" in out):
        if isinstance(items, list):
            out["prefixItems"] = items
            del out["items"]
            if "additionalItems" in out:
                out["items"] = out.pop("additionalItems")
        else:
            out.pop("additionalItems")  # additionalItems without array items has no effect
    elif "additionalItems" in out and "prefixItems" not in out:
        out.pop("additionalItems")
    deps = out.pop("dependencies", None)
    if isinstance(deps, dict):
        req = {k: v for k, v in deps.items() if isinstance(v, list)}
        sch = {k: v for k, v in deps.items() if not isinstance(v, list)}
        if req:
            out["dependentRequired"] = {**out.get("dependentRequired", {}), **req}
        if sch:
            out["dependentSchemas"] = {**out.get("dependentSchemas", {}), **sch}
    if "const" in out:
        c = out.pop("const")
        out["enum"] = [v for v in out["enum"] if equal(v, c)] if "enum" in out else [c]
    return out


def type_set(s: dict[str, Any]) -> set[str]:
    t = s.get("type", list(TYPES))
    ts = {t} if isinstance(t, str) else set(t)
    if "number" in ts:
        ts.add("integer")
    return ts


def _types_out(ts: set[str]) -> list[str]:
    if "number" in ts:
        ts = ts - {"integer"}
    return sorted(ts)


def equal(a: Any, b: Any) -> bool:
    """JSON Schema equality: 1 == 1.0, True != 1, objects by key sets."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def equality_key(v: Any) -> Any:
    """A hashable key with ``equality_key(a) == equality_key(b)`` iff ``equal(a, b)``
    (so an enum of n values dedups in O(n), not O(n^2) comparisons)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return ("nan", id(v)) if math.isnan(v) else ("inf", v)  # nan equals nothing
        # equal numbers (int or float: Python compares them exactly) hash alike: the number is
        # its own key, as Fraction(v) was, without running fractions' Python per value
        return ("number", v)
    if isinstance(v, list):
        return ("list", tuple(equality_key(x) for x in v))
    if isinstance(v, dict):
        return ("object", frozenset((k, equality_key(x)) for k, x in v.items()))
    return ("other", id(v))


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


_MAXES = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
_MINS = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}
_OBJECT_KEYS = ("properties", "patternProperties", "additionalProperties")
_ARRAY_KEYS = ("prefixItems", "items")


def _all_of(a: Any, b: Any) -> Any:
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    if a is False or b is False:
        return False
    if a == b:
        return a
    return {"allOf": [a, b]}


def _merge_objects(a: dict[str, Any], b: dict[str, Any], out: dict[str, Any]) -> None:
    has_a = not a.keys().isdisjoint(_OBJECT_KEYS)
    has_b = not b.keys().isdisjoint(_OBJECT_KEYS)
    if not (has_a and has_b):
        src = a if has_a else b
        for k in _OBJECT_KEYS:
            if k in src:
                out[k] = src[k]
        return
    if a.get("patternProperties") or b.get("patternProperties"):
        if a.get("patternProperties") != b.get("patternProperties") or a.get("properties") != b.get(
            "properties"
        ):
            raise Unmergeable("allOf", "cannot intersect objects with patternProperties")
    pa, pb = a.get("properties", {}), b.get("properties", {})
    ada, adb = a.get("additionalProperties", True), b.get("additionalProperties", True)
    props = {}
    for k in list(pa) + [k for k in pb if k not in pa]:
        props[k] = _all_of(pa.get(k, ada), pb.get(k, adb))
    out["properties"] = props
    if a.get("patternProperties"):
        out["patternProperties"] = a["patternProperties"]
    add = _all_of(ada, adb)
    if add is not True:
        out["additionalProperties"] = add


def _merge_arrays(a: dict[str, Any], b: dict[str, Any], out: dict[str, Any]) -> None:
    has_a = any(k in a for k in _ARRAY_KEYS)
    has_b = any(k in b for k in _ARRAY_KEYS)
    if not (has_a and has_b):
        src = a if has_a else b
        for k in _ARRAY_KEYS:
            if k in src:
                out[k] = src[k]
        return
    xa, xb = a.get("prefixItems", []), b.get("prefixItems", [])
    ra, rb = a.get("items", True), b.get("items", True)
    n = max(len(xa), len(xb))
    prefix = [_all_of(xa[i] if i < len(xa) else ra, xb[i] if i < len(xb) else rb) for i in range(n)]
    if prefix:
        out["prefixItems"] = prefix
    rest = _all_of(ra, rb)
    if rest is not True:
        out["items"] = rest


def intersect(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One schema equivalent to ``allOf: [a, b]`` (both normalized, ``$ref``-free at the top)."""
    out: dict[str, Any] = {}
    keys = [k for k in a if not is_annotation(k)] + [k for k in b if k not in a and not is_annotation(k)]
    for k in keys:
        if k in _OBJECT_KEYS or k in _ARRAY_KEYS:
            continue
        if k not in a or k not in b:
            out[k] = a[k] if k in a else b[k]
            continue
        va, vb = a[k], b[k]
        if k == "type":
            out[k] = _types_out(type_set(a) & type_set(b))
        elif k == "enum":
            out[k] = [v for v in va if any(equal(v, w) for w in vb)]
        elif k in _MAXES:
            out[k] = _max(va, vb)
        elif k in _MINS:
            out[k] = _min(va, vb)
        elif k == "required":
            out[k] = list(dict.fromkeys(list(va) + list(vb)))
        elif k == "uniqueItems":
            out[k] = bool(va) or bool(vb)
        elif k == "multipleOf" and isinstance(va, int) and isinstance(vb, int) and not isinstance(va, bool):
            out[k] = va * vb // math.gcd(va, vb)
        elif k == "dependentRequired":
            out[k] = {d: list(dict.fromkeys(va.get(d, []) + vb.get(d, []))) for d in {**va, **vb}}
        elif k == "anyOf":
            if len(va) * len(vb) > 16:
                raise Unmergeable("anyOf", "intersecting two anyOf lists would multiply out too far")
            out[k] = [_all_of(x, y) for x in va for y in vb]
        elif k == "not":
            out[k] = {"anyOf": [va, vb]}
        elif va == vb:
            out[k] = va
        else:
            raise Unmergeable(k, f"cannot intersect two different {k!r} values exactly")
    _merge_objects(a, b, out)
    _merge_arrays(a, b, out)
    return out


# --------------------------------------------------------------------------- evaluation


def evaluate(s: Any, v: Any) -> bool | None:
    """Whether ``v`` satisfies ``s``; ``None`` when ``s`` uses something not evaluated here."""
    if s is True:
        return True
    if s is False:
        return False
    if not isinstance(s, dict):
        return None
    results: list[bool] = []
    t = json_type(v)
    for k, x in s.items():
        if is_annotation(k) or (k not in VOCABULARY and not k.startswith("$")):
            continue  # an annotation: no effect on validity
        r = _evaluate_keyword(k, x, s, v, t)
        if r is None:
            return None
        results.append(r)
    return all(results)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _evaluate_keyword(k: str, x: Any, s: dict[str, Any], v: Any, t: str) -> bool | None:  # noqa: C901
    if k == "type":
        ts = type_set(s)
        return t in ts or (t == "integer" and "number" in ts)
    if k == "enum":
        return any(equal(v, w) for w in x)
    if k == "const":
        return equal(v, x)
    if k in ("minLength", "maxLength", "pattern"):
        if t != "string":
            return True
        if k == "pattern":
            from .strings import pattern_matches

            return pattern_matches(x, v) if isinstance(x, str) else None
        return len(v) >= x if k == "minLength" else len(v) <= x
    if k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        if not _num(v) or isinstance(x, bool):
            return True if not _num(v) else None
        if k == "minimum":
            return v >= x
        if k == "maximum":
            return v <= x
        if k == "exclusiveMinimum":
            return v > x
        if k == "exclusiveMaximum":
            return v < x
        return None if isinstance(x, float) or isinstance(v, float) else v % x == 0
    if k in ("minItems", "maxItems"):
        return True if t != "array" else (len(v) >= x if k == "minItems" else len(v) <= x)
    if k in ("minProperties", "maxProperties"):
        return True if t != "object" else (len(v) >= x if k == "minProperties" else len(v) <= x)
    if k == "required":
        return True if t != "object" else all(r in v for r in x)
    if k == "items" and isinstance(x, (dict, bool)) and "prefixItems" not in s:
        if t != "array":
            return True
        return _all_known(evaluate(x, item) for item in v)
    if k == "properties":
        if t != "object":
            return True
        return _all_known(evaluate(x[p], v[p]) for p in x if p in v)
    if k == "additionalProperties":
        if t != "object":
            return True
        if s.get("patternProperties"):
            return None
        return _all_known(evaluate(x, v[p]) for p in v if p not in s.get("properties", {}))
    if k in ("anyOf", "oneOf", "allOf"):
        rs = [evaluate(b, v) for b in x]
        if None in rs:
            return None
        return any(rs) if k == "anyOf" else all(rs) if k == "allOf" else sum(map(bool, rs)) == 1
    if k == "not":
        r = evaluate(x, v)
        return None if r is None else not r
    return None


def _all_known(rs: Any) -> bool | None:
    out = True
    for r in rs:
        if r is None:
            return None
        out = out and r
    return out
