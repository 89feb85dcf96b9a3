"""The walk of :func:`.wellformed.check_document`, compiled.

A p50 JSON Schema has about 10 subschemas and 25 keywords, and the interpreted walk cost ~0.1 M
instructions of its ~3.9 M cold compile (3 %): a few hundred bytecodes a keyword for a dict read,
a tuple unpacked and the inline tests of the common forms.  Here the same walk, keyword for
keyword: the same stack of (subschema, place) in the same order, the same inline tests, and
every other keyword handed back to Python (``slow``: the row's check, which raises, and its
subschemas).  ``tests/reference_wellformed.py`` has the Python it follows (``check_document_py``
and ``_quick``), the tests' oracle.
"""

# The inline forms, numbered as wellformed._QUICK numbers them (a test checks that both agree)
cdef enum:
    TYPE = 1
    STR = 2
    ONE = 3
    LIST = 4
    ITEMS = 5
    MAP = 6
    NAMES = 7
    ARRAY = 8
    COUNT = 9
    NUM = 10

QUICK_KINDS = (TYPE, STR, ONE, LIST, ITEMS, MAP, NAMES, ARRAY, COUNT, NUM)


cdef bint quick_form(int quick, object k, object v, object at, list subs, frozenset types) except -1:
    """The reference's ``_quick``: True when ``v`` plainly has the form (its subschemas put on
    ``subs``); False: ask the row's check."""
    cdef object cls = type(v), x, name
    if quick == TYPE:  # a name, or a list of distinct names (["string", "null"]: Snowplow's)
        if cls is str:
            return v in types
        if cls is not list or not v:
            return False
        for x in <list>v:
            if type(x) is not str or x not in types:
                return False
        return len(set(<list>v)) == len(<list>v)
    if quick == STR:
        return cls is str
    if quick == ONE or (quick == ITEMS and cls is not list):
        if cls is dict or cls is bool:
            subs.append((v, (at, k, ())))
            return True
        return False
    if quick == LIST or quick == ITEMS:
        if cls is not list or (quick == LIST and not v):
            return False
        for x in <list>v:
            if type(x) is not dict and type(x) is not bool:
                return False
        subs += [(x, (at, k, (i,))) for i, x in enumerate(<list>v)]
        return True
    if quick == MAP:
        if cls is not dict:
            return False
        for x in (<dict>v).values():
            if type(x) is not dict and type(x) is not bool:
                return False
        subs += [(x, (at, k, (name,))) for name, x in (<dict>v).items()]
        return True
    if quick == NAMES:
        if cls is not list:
            return False
        for x in <list>v:
            if type(x) is not str:
                return False
        return len(set(v)) == len(v)
    if quick == ARRAY:
        return cls is list
    if quick == COUNT:
        return cls is int and v >= 0
    return cls is int  # NUM: an int is a number (a float goes through the check: finite?)


def walk(object root, dict forms, frozenset types, object slow, object not_schema):
    """``check_document(root, draft)`` with ``forms`` the draft's rows; ``slow(k, v, at, form,
    subs)`` checks a keyword the inline tests do not settle (raising if malformed) and puts its
    subschemas on ``subs``; ``not_schema(s, at)`` raises for a root that is not a schema.
    ``types``: the JSON type names, as a set (a hashed test, not up to seven comparisons)."""
    cdef list stack = [(root, None)], subs
    cdef set seen = set()
    cdef tuple item, form
    cdef object s, at, k, v, got
    cdef int quick
    while stack:
        item = <tuple>stack.pop()
        s = item[0]
        at = item[1]
        if type(s) is bool:
            continue
        if not isinstance(s, dict):  # only reachable for the root: parents check their subschemas
            not_schema(s, at)
        if id(s) in seen:
            continue
        seen.add(id(s))
        subs = []
        for k, v in s.items():
            got = forms.get(k)
            if got is None:
                continue
            form = <tuple>got
            quick = form[3]
            if quick and quick_form(quick, k, v, at, subs, types):
                continue
            slow(k, v, at, form, subs)
        if subs:
            subs.reverse()
            stack += subs
