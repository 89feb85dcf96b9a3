"""An ECMAScript regex oracle for the tests: the ``regress`` package (Python bindings to the Rust
``regress`` engine, which implements ECMA-262 regular expressions), never Python's ``re``.

``regress`` reports match ranges in UTF-8 bytes; the tests only ask whether there is a match.
``jsonschema`` checks ``pattern`` and ``patternProperties`` with Python's ``re.search``;
:func:`ecma_validator` swaps in ``regress`` for both, which is what JSON Schema specifies.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import jsonschema
import regress


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> regress.Regex:
    return regress.Regex(pattern, "u")


def is_valid(pattern: str) -> bool:
    """Whether ECMAScript accepts ``pattern`` with the ``u`` flag."""
    try:
        compiled(pattern)
    except regress.RegressError:
        return False
    return True


def search(pattern: str, text: str) -> bool:
    """``/pattern/u.test(text)``."""
    return compiled(pattern).find(text) is not None


def fullmatch(pattern: str, text: str) -> bool:
    """``/^(?:pattern)$/u.test(text)``."""
    return compiled(f"^(?:{pattern})$").find(text) is not None


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, _s: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in patterns.items():
        for k, v in instance.items():
            if search(patrn, k):
                yield from validator.descend(v, subschema, path=k, schema_path=patrn)


def _additional_properties(validator: Any, aP: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``additionalProperties``: the members no ``properties`` name and no pattern covers."""
    if not validator.is_type(instance, "object"):
        return
    names, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in names and not any(search(p, k) for p in patterns)]
    if validator.is_type(aP, "object"):
        for k in extras:
            yield from validator.descend(instance[k], aP, path=k)
    elif not aP and extras:
        yield jsonschema.ValidationError(f"additional properties {extras!r} are not allowed")


def ecma_validator(schema: Any) -> Any:
    """A ``jsonschema`` validator for ``schema`` (formats asserted) whose pattern keywords use
    ECMA-262 semantics."""
    base = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(
        base,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
    return cls(schema, format_checker=base.FORMAT_CHECKER)
