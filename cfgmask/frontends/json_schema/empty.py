"""Why a schema allows no value, in words, for the "language is empty" error.

The walk notes the pointer of each schema that compiles to the empty language
(:meth:`.walk.SchemaCompiler.schema`); the innermost one whose own keywords contradict each
other (an empty ``enum``, ``minLength`` above ``maxLength``, a required property whose schema
is ``false``...) is named.  Anything subtler gets the pointer of the schema alone.
"""

from __future__ import annotations

from typing import Any

from .report import pointer

_BOUNDS = (
    ("minLength", "maxLength"),
    ("minItems", "maxItems"),
    ("minProperties", "maxProperties"),
    ("minimum", "maximum"),
    ("minContains", "maxContains"),
)


def contradictions(s: dict[str, Any], path: str) -> list[str]:
    """The keywords of ``s`` that leave it no value, each said in words (empty when none is
    simple to tell)."""
    out: list[str] = []
    if s.get("enum") == []:
        out.append(f"{pointer(path, 'enum')} is an empty array")
    elif "enum" in s or "const" in s:
        k = "enum" if "enum" in s else "const"
        out.append(f"no value of {pointer(path, k)} satisfies the keywords beside it")
    for lo, hi in _BOUNDS:
        a, b = s.get(lo), s.get(hi)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > b:
            out.append(f"{pointer(path, lo)} ({a}) is above {pointer(path, hi)} ({b})")
    props = s.get("properties")
    for name in s.get("required", []):
        if isinstance(props, dict) and props.get(name) is False:
            where = pointer(path, "properties", name)
            out.append(f"{pointer(path, 'required')} names {name!r}, whose schema {where} is false")
    required = set(s.get("required", []))
    most = s.get("maxProperties")
    if isinstance(most, int) and len(required) > most:
        out.append(f"{pointer(path, 'required')} names {len(required)} keys, over maxProperties ({most})")
    return out


def because(s: Any, path: str, inner: str | None) -> str:
    """Why the schema ``s`` at ``path``, which compiled to nothing, allows no value: its own
    contradictions, else ``inner`` (the reason found under it), else its pointer alone."""
    if s is False:
        return f"the schema at {path or '/'} is false"
    found = contradictions(s, path) if isinstance(s, dict) else []
    return "; ".join(found) if found else inner or f"the schema at {path or '/'} allows no value"
