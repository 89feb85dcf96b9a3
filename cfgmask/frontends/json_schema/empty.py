"""Why a schema allows no value, in words, for the "language is empty" error.

The walk notes the pointer of each schema that compiles to the empty language
(:meth:`.walk.SchemaCompiler.schema`); the innermost one whose own keywords contradict each
other (an empty ``enum``, ``minLength`` above ``maxLength``, a required property whose schema
is ``false``...) is named.  Anything subtler gets the pointer of the schema alone.  The walk
keeps each reason as a :class:`Reason`, said (its text made) only when read: most are never
read (the empty branches of a ``oneOf`` written as a union, the outer links of a chain).
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


class Reason:
    """``because(s, path, inner)`` (or, with ``name``, a required key ``name`` of the object at
    ``path`` that can have no value: ``"<path>/required names 'name', and <inner>"``), its
    text made when first read (``str``); ``inner`` a str, a Reason or None.  A chain of reasons
    is said innermost first, without recursion (a schema may nest 2,000 deep)."""

    __slots__ = ("s", "path", "inner", "name", "text")

    def __init__(self, s: Any, path: str, inner: Reason | str | None, name: str | None = None) -> None:
        self.s = s
        self.path = path
        self.inner = inner
        self.name = name
        self.text: str | None = None

    def __str__(self) -> str:
        if self.text is None:
            chain: list[Reason] = []
            r: Reason | str | None = self
            while isinstance(r, Reason) and r.text is None:
                chain.append(r)
                r = r.inner
            inner = r.text if isinstance(r, Reason) else r
            for x in reversed(chain):
                if x.name is None:
                    inner = because(x.s, x.path, inner)
                else:
                    inner = f"{pointer(x.path, 'required')} names {x.name!r}, and {inner}"
                x.text, x.s, x.inner = inner, None, None  # said: what it read is freed
        return self.text  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (Reason, str)) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))
