"""The form each keyword's value must have, checked once over the whole document before the walk.

A malformed schema (``{"type": 5}``, ``{"type": "objec"}``, ``{"minLength": -1}``, a pattern
Python's ``re`` cannot compile) is a :class:`~cfgmask.errors.GrammarError` that names the JSON
pointer of the keyword (of the element, inside an array), the form JSON Schema 2020-12 asks for
and what the schema holds there.  It is an error in lenient mode too: ``strict=False`` is about
keywords that cannot be enforced, not about invalid schemas.

The forms are those the walk reads, which include the older drafts' spellings in every draft (as
:func:`.merge.normalize` does): ``items`` as an array, ``dependencies``, boolean
``exclusiveMinimum``/``exclusiveMaximum``.  ``if``/``then``/``else`` are keywords from draft-07
on.  Annotations and unknown keywords are never checked, and their values never entered (JSON
Schema 2020-12 section 6.5); only the keywords that hold subschemas lead to more schemas.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import GrammarError
from ._wellformed import walk as _walk
from .merge import TYPES
from .report import pointer

# Where a check found the value wrong: (pointer tokens inside the value, the value found there, a hint).
Bad = tuple[tuple[object, ...], Any, str]
Check = Callable[[Any], "Bad | None"]
Children = Callable[[Any], Iterator[tuple[tuple[object, ...], Any]]]

TYPE_NAMES = "a string naming a JSON type (" + ", ".join(TYPES) + "), or a non-empty array of them"


def _number(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) and not isinstance(v, bool)


def _wrong(v: Any) -> Bad:
    return (), v, ""


def _pred(ok: Callable[[Any], bool]) -> Check:
    return lambda v: None if ok(v) else _wrong(v)


def _count(v: Any) -> bool:
    return _number(v) and v >= 0 and (isinstance(v, int) or v.is_integer())


def _elements(v: Any, each: Check, unique: bool = False) -> Bad | None:
    """Each element of the array ``v`` passes ``each`` (and none repeats, when ``unique``)."""
    if not isinstance(v, list):
        return _wrong(v)
    seen: set[object] = set()
    for i, x in enumerate(v):
        bad = each(x)
        if bad is not None:
            return (i, *bad[0]), bad[1], bad[2]
        if not unique:
            continue
        # a string is its own key (its JSON text is a function of it, and no other value's
        # text equals a tuple); other values are compared by their sorted JSON text
        key: object = ("str", x) if isinstance(x, str) else json.dumps(x, sort_keys=True, default=repr)
        if key in seen:
            return (i,), x, "a repeated element"
        seen.add(key)
    return None


def _type_name(v: Any) -> Bad | None:
    if isinstance(v, str) and v in TYPES:
        return None
    close = difflib.get_close_matches(v, TYPES, n=1) if isinstance(v, str) else []
    return (), v, f"did you mean {close[0]!r}?" if close else ""


def _type(v: Any) -> Bad | None:
    if isinstance(v, list) and v:
        return _elements(v, _type_name, unique=True)
    return _type_name(v) if isinstance(v, str) else _wrong(v)


def _regex(v: Any) -> Bad | None:
    """An ECMA-262 regular expression (``u`` flag): what JSON Schema's pattern keywords hold.
    A valid one that cfgmask cannot compile (a backreference) is not malformed: the walk
    reports the keyword ``rejected``."""
    if not isinstance(v, str):
        return _wrong(v)
    return _regex_text(v)


@functools.lru_cache(maxsize=1024)  # a pattern is checked once: schemas repeat their patterns
def _regex_text(v: str) -> Bad | None:
    if pattern_tree(v) is not None:
        return None  # parsed: well-formed (the tree is kept for the walk, pattern_tree's memo)
    from ..ecmascript import syntax_error

    e = syntax_error(v)  # parses again, for the error (a malformed pattern: the rare case)
    if e is not None:
        return (
            (),
            v,
            e.message + (f" at position {e.column - 1}" if e.column is not None and "\n" not in v else ""),
        )
    return None


def _schema(v: Any) -> Bad | None:
    return None if isinstance(v, (dict, bool)) else _wrong(v)


def _schemas(v: Any) -> Bad | None:
    return _elements(v, _schema) if isinstance(v, list) and v else _wrong(v)


def _map(each: Check, key: Check | None = None) -> Check:
    """An object whose values pass ``each`` (and whose keys pass ``key``)."""

    def check(v: Any) -> Bad | None:
        if not isinstance(v, dict):
            return _wrong(v)
        for k, x in v.items():
            bad = key(k) if key is not None else None
            if bad is None:
                bad = each(x)
            if bad is not None:
                return (k, *bad[0]), bad[1], bad[2]
        return None

    return check


def _strings(v: Any) -> Bad | None:
    return _elements(v, _STRING, unique=True)


def _items(v: Any) -> Bad | None:
    return _elements(v, _schema) if isinstance(v, list) else _schema(v)


def _dependency(v: Any) -> Bad | None:
    return _strings(v) if isinstance(v, list) else _schema(v)


def _one(v: Any) -> Iterator[tuple[tuple[object, ...], Any]]:
    yield (), v


def _each(v: Any) -> Iterator[tuple[tuple[object, ...], Any]]:
    if isinstance(v, list):
        for i, x in enumerate(v):
            yield (i,), x
    else:
        yield (), v


def _values(v: Any) -> Iterator[tuple[tuple[object, ...], Any]]:
    for k, x in v.items():
        if not isinstance(x, list):  # dependencies: an array of names holds no schema
            yield (k,), x


SCHEMA = "a schema (object or boolean)"
_STRING = _pred(lambda v: isinstance(v, str))
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains",
           "maxContains")  # fmt: skip
_ONE_SCHEMA = ("not", "additionalProperties", "propertyNames", "contains", "additionalItems",
               "unevaluatedProperties", "unevaluatedItems")  # fmt: skip

# (keywords, check, the expected form in words, the subschemas the value holds)
_ROWS: list[tuple[tuple[str, ...], Check, str, Children | None]] = [
    (_COUNTS, _pred(_count), "a non-negative integer", None),
    (("minimum", "maximum"), _pred(_number), "a number", None),
    (("exclusiveMinimum", "exclusiveMaximum"), _pred(lambda v: _number(v) or isinstance(v, bool)),
     "a number (a boolean in draft-04)", None),
    (("multipleOf",), _pred(lambda v: _number(v) and v > 0), "a number > 0", None),
    (("type",), _type, TYPE_NAMES, None),
    (("enum",), _pred(lambda v: isinstance(v, list)), "an array", None),
    (("required",), _strings, "an array of unique strings", None),
    (("dependentRequired",), _map(_strings), "an object of arrays of unique strings", None),
    (("uniqueItems",), _pred(lambda v: isinstance(v, bool)), "a boolean", None),
    (("pattern",), _regex, "a regular expression", None),
    (("format",), _STRING, "a string", None),
    (("$ref", "$dynamicRef", "$recursiveRef"), _STRING, "a string (a URI reference)", None),
    (_ONE_SCHEMA, _schema, SCHEMA, _one),
    (("allOf", "anyOf", "oneOf", "prefixItems"), _schemas, "a non-empty array of schemas", _each),
    (("items",), _items, f"{SCHEMA}, or (before 2020-12) an array of schemas", _each),
    (("properties", "$defs", "definitions", "dependentSchemas"), _map(_schema), "an object of schemas",
     _values),
    (("patternProperties",), _map(_schema, _regex), "an object of schemas keyed by regular expressions",
     _values),
    (("dependencies",), _map(_dependency), "an object of schemas or arrays of unique strings", _values),
]  # fmt: skip
# The commonest forms, tested inline by check_document (no call, no generator per keyword) when the
# value is plainly well formed; anything else (an error, a subclass) goes through the check above.
_TYPE, _STR, _ONE, _LIST, _ITEMS, _MAP, _NAMES, _ARRAY, _COUNT, _NUM = range(1, 11)
_QUICK = {
    "type": _TYPE, "format": _STR, "$ref": _STR, "enum": _ARRAY, "required": _NAMES, "items": _ITEMS,
    **dict.fromkeys(_ONE_SCHEMA, _ONE), **dict.fromkeys(("allOf", "anyOf", "oneOf", "prefixItems"), _LIST),
    **dict.fromkeys(("properties", "$defs", "definitions", "dependentSchemas"), _MAP),
    **dict.fromkeys(_COUNTS, _COUNT), "minimum": _NUM, "maximum": _NUM,
}  # fmt: skip
FORMS = {
    k: (check, expected, children, _QUICK.get(k, 0)) for ks, check, expected, children in _ROWS for k in ks
}
CONDITIONAL = {k: FORMS["not"] for k in ("if", "then", "else")}  # keywords from draft-07 on
FORMS_07 = {**FORMS, **CONDITIONAL}


_TYPE_SET = frozenset(TYPES)  # the compiled walk's test of a type name


# A pattern's parse (an ECMA-262 pattern, ``u`` flag) serves every reader of it in the front end:
# this check, :func:`.strings.everywhere` and the search language (:func:`..regex.ecmascript_search`),
# which each parsed it again (~0.2 M instructions a pattern, cold).  The tree is read, never
# written, by all three.  Schema content: ``clear_memos`` forgets it.
@functools.lru_cache(maxsize=256)
def pattern_tree(p: str) -> Any:
    """``ecmascript.parse(p)`` (an ``ecmascript.Parsed``, shared: read it, never change it), or
    None when ``p`` does not parse (the caller parses it again for the error)."""
    from ..ecmascript import parse

    try:
        return parse(p)
    except GrammarError:
        return None


def abbreviate(v: Any, width: int = 40) -> str:
    """``v`` as JSON text, cut to about ``width`` characters."""
    text = json.dumps(v, ensure_ascii=False, default=repr)
    return text if len(text) <= width else text[: width - 1] + "…"


# Where a subschema is: None for the root, else (its parent's place, keyword, pointer tokens).
Place = tuple[Any, str, tuple[object, ...]] | None


def check_document(root: Any, draft: int) -> None:
    """Raise a GrammarError at the first keyword (in document order) whose value is malformed
    (compiled: ``tests/reference_wellformed.py`` has the Python it follows)."""
    _walk(root, FORMS_07 if draft >= 7 else FORMS, _TYPE_SET, _slow, _not_schema)


def _not_schema(s: Any, at: Place) -> None:
    path = _pointer_of(at)
    raise GrammarError(f"the schema at {path or '/'} must be {SCHEMA}; got {abbreviate(s)}")


def _slow(
    k: str, v: Any, at: Place, form: tuple[Check, str, Children | None, int], subs: list[tuple[Any, Place]]
) -> None:
    """Keyword ``k`` checked by its row (raising if ``v`` is malformed), its subschemas put on ``subs``."""
    check, expected, children, _ = form
    bad = check(v)
    if bad is not None:
        raise malformed(pointer(_pointer_of(at), k, *bad[0]), k, expected, bad[1], bad[2])
    if children is not None:
        subs += [(x, (at, k, tokens)) for tokens, x in children(v)]


def _pointer_of(at: Place) -> str:
    parts: list[object] = []
    while at is not None:
        at, k, tokens = at
        parts[:0] = [k, *tokens]
    return pointer("", *parts)


def malformed(where: str, keyword: str, expected: str, got: Any, hint: str = "") -> GrammarError:
    msg = f"invalid JSON Schema: {keyword!r} at {where} must be {expected}; got {abbreviate(got)}"
    return GrammarError(msg + (f" ({hint})" if hint else ""), pointer=where)
