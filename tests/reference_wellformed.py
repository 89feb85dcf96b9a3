"""The JSON Schema front end's well-formedness walk the slow way, for the tests: the Python that
``cfgmask/frontends/json_schema/_wellformed.pyx`` compiles (``check_document``, with its inline
tests of the common forms, ``_quick``).  Both must raise the same error (message, pointer) or
none, visiting subschemas in the same order."""

from __future__ import annotations

from typing import Any

from cfgmask.frontends.json_schema import wellformed as W


def check_document_py(root: Any, draft: int) -> None:
    """:func:`~cfgmask.frontends.json_schema.wellformed.check_document` in Python."""
    forms = W.FORMS_07 if draft >= 7 else W.FORMS
    # the pointer string of a place is only written for an error
    stack: list[tuple[Any, W.Place]] = [(root, None)]
    seen: set[int] = set()
    while stack:
        s, at = stack.pop()
        if s.__class__ is bool:
            continue
        if not isinstance(s, dict):  # only reachable for the root: parents check their subschemas
            W._not_schema(s, at)
        if id(s) in seen:
            continue
        seen.add(id(s))
        subs: list[tuple[Any, W.Place]] = []
        for k, v in s.items():
            form = forms.get(k)
            if form is None:
                continue
            if form[3] and _quick(form[3], k, v, at, subs):
                continue
            W._slow(k, v, at, form, subs)
        stack.extend(reversed(subs))


def _quick(quick: int, k: str, v: Any, at: W.Place, subs: list[tuple[Any, W.Place]]) -> bool:
    """True when ``v`` plainly has the form of keyword ``k`` (its subschemas put on ``subs``, as
    the row's ``children`` would); False: ask the row's check."""
    cls = v.__class__
    if quick == W._TYPE:
        if cls is str:
            return v in W.TYPES
        if cls is not list or not v:
            return False
        for x in v:
            if x.__class__ is not str or x not in W.TYPES:
                return False
        return len(set(v)) == len(v)
    if quick == W._STR:
        return cls is str
    if quick == W._ONE or (quick == W._ITEMS and cls is not list):
        if cls is dict or cls is bool:
            subs.append((v, (at, k, ())))
            return True
        return False
    if quick == W._LIST or quick == W._ITEMS:
        if cls is not list or (quick == W._LIST and not v):
            return False
        for x in v:
            if x.__class__ is not dict and x.__class__ is not bool:
                return False
        subs += [(x, (at, k, (i,))) for i, x in enumerate(v)]
        return True
    if quick == W._MAP:
        if cls is not dict:
            return False
        for x in v.values():
            if x.__class__ is not dict and x.__class__ is not bool:
                return False
        subs += [(x, (at, k, (name,))) for name, x in v.items()]
        return True
    if quick == W._NAMES:
        if cls is not list:
            return False
        for x in v:
            if x.__class__ is not str:
                return False
        return len(set(v)) == len(v)
    if quick == W._ARRAY:
        return cls is list
    if quick == W._COUNT:
        return cls is int and v >= 0
    return cls is int  # _NUM: an int is a number (a float goes through the check: finite?)
