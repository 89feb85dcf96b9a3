# cython: language_level=3
"""The IR's node types as extension types (re-exported by :mod:`cfgmask.ir`, which documents them).

Why not dataclasses: a JSON Schema seen for the first time builds a few hundred nodes that the
compile glue then walks, hashes and interns, right after a ``gc.collect()`` that evicted the CPU
caches (docs/design.md §7, "Cold caches").  A dataclass node is a Python-level ``__init__`` (one
``object.__setattr__`` per field, as they are frozen), a tuple built for every ``__hash__`` and
``__eq__``, and an object the collector tracks.  Here construction, hashing and equality are C,
and only the composite nodes (``Seq``, ``Alt``, ``Repeat``) are tracked by the collector: a leaf
holds bytes, strings and tuples of ints, so it is never part of a cycle, and the collector's
passes (the one before each compile among them) skip it.

What the dataclasses gave is kept: the same constructors (positional or keyword, the same
defaults, no type checks), read-only attributes, equality between nodes of the same class only,
hashes equal for equal nodes (composite nodes compute theirs once), the dataclass ``repr``
(``benchmarks/frontend_fingerprint.py`` digests it), pickling and ``__match_args__``.  Composite
nodes are freed through CPython's trashcan, so dropping a deeply nested tree does not recurse
once per level on the C stack.  The classes are final: nothing subclassed the dataclasses, and
equality tests the exact class.  Pickles of nodes made by the dataclasses do not load (their state
was a list of fields).
"""

cimport cython
from cpython.dict cimport PyDict_SetItem
from cpython.object cimport Py_EQ, PyObject, PyObject_RichCompareBool


# T_OBJECT_EX and READONLY: structmember.h through 3.13 at least (3.12 adds Py_T_OBJECT_EX and
# Py_READONLY to Python.h and keeps these names)
cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
        const char *doc
    enum: T_OBJECT_EX
    enum: READONLY


cdef extern from "Python.h":
    ctypedef struct _TypeWithDict "PyTypeObject":
        PyObject *tp_dict
    object PyDescr_NewMember(void *tp, PyMemberDef *member)
    void PyType_Modified(void *tp)


cdef inline bint _same(object a, object b) except -1:
    # as the dataclasses compared their field tuples: identity first, then ==, as a bool
    return PyObject_RichCompareBool(a, b, Py_EQ)


cdef class Expr:
    """Base of IR expressions."""

    # repr and pickling from the fields (``__match_args__``, the dataclass's fields in order), as
    # the dataclasses gave them; equality and hashing are each class's own (they are the hot ones)
    def __repr__(self):
        cls = type(self)
        fields = ", ".join([f"{f}={getattr(self, f)!r}" for f in cls.__match_args__])
        return f"{cls.__qualname__}({fields})"

    def __reduce__(self):
        cls = type(self)
        return (cls, tuple([getattr(self, f) for f in cls.__match_args__]))


# ---- leaves: untracked by the collector (they reference no node) -----------------------------


@cython.no_gc
@cython.final
cdef class Literal(Expr):
    __match_args__ = ("data",)

    def __init__(self, data):
        self.data = data

    def __eq__(self, other):
        if type(other) is not Literal:
            return NotImplemented
        return _same(self.data, (<Literal>other).data)

    def __hash__(self):
        return hash((self.data,))


@cython.no_gc
@cython.final
cdef class CharClass(Expr):
    __match_args__ = ("ranges",)

    def __init__(self, ranges):
        self.ranges = ranges

    def __eq__(self, other):
        if type(other) is not CharClass:
            return NotImplemented
        return _same(self.ranges, (<CharClass>other).ranges)

    def __hash__(self):
        return hash((self.ranges,))


@cython.no_gc
@cython.final
cdef class ByteClass(Expr):
    __match_args__ = ("ranges",)

    def __init__(self, ranges):
        self.ranges = ranges

    def __eq__(self, other):
        if type(other) is not ByteClass:
            return NotImplemented
        return _same(self.ranges, (<ByteClass>other).ranges)

    def __hash__(self):
        return hash((self.ranges,))


@cython.no_gc
@cython.final
cdef class Ref(Expr):
    __match_args__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        if type(other) is not Ref:
            return NotImplemented
        return _same(self.name, (<Ref>other).name)

    def __hash__(self):
        return hash((self.name,))


@cython.no_gc
@cython.final
cdef class Token(Expr):
    __match_args__ = ("ids", "negated")

    def __init__(self, ids, negated=False):
        self.ids = ids
        self.negated = negated

    def __eq__(self, other):
        if type(other) is not Token:
            return NotImplemented
        return _same(self.ids, (<Token>other).ids) and _same(self.negated, (<Token>other).negated)

    def __hash__(self):
        return hash((self.ids, self.negated))


@cython.no_gc
@cython.final
cdef class TokenText(Expr):
    __match_args__ = ("text", "negated")

    def __init__(self, text, negated=False):
        self.text = text
        self.negated = negated

    def __eq__(self, other):
        if type(other) is not TokenText:
            return NotImplemented
        return _same(self.text, (<TokenText>other).text) and _same(self.negated, (<TokenText>other).negated)

    def __hash__(self):
        return hash((self.text, self.negated))


@cython.no_gc
@cython.final
cdef class Lookahead(Expr):
    __match_args__ = ("forbidden",)

    def __init__(self, forbidden):
        self.forbidden = forbidden

    def __eq__(self, other):
        if type(other) is not Lookahead:
            return NotImplemented
        return _same(self.forbidden, (<Lookahead>other).forbidden)

    def __hash__(self):
        return hash((self.forbidden,))


@cython.no_gc
@cython.final
cdef class LiteralSet(Expr):
    __match_args__ = ("words", "json")

    def __init__(self, words, json=False):
        self.words = words
        self.json = json

    def __eq__(self, other):
        if type(other) is not LiteralSet:
            return NotImplemented
        return _same(self.words, (<LiteralSet>other).words) and _same(self.json, (<LiteralSet>other).json)

    def __hash__(self):
        return hash((self.words, self.json))




# ---- composite nodes: tracked by the collector, freed through the trashcan -------------------
#
# Each keeps its hash once computed (0: not yet; a computed 0 is stored as 1): hashing walks the
# whole subtree, and the compiler's hash-consing and the front ends' sharing hash the same
# subtrees again and again.  Two nodes whose hashes are both known and differ are unequal, which
# spares the deep comparison of the tuples.


@cython.trashcan(True)
@cython.final
cdef class Seq(Expr):
    __match_args__ = ("items",)

    def __init__(self, items):
        self.items = items
        self._hash = 0

    def __eq__(self, other):
        if type(other) is not Seq:
            return NotImplemented
        cdef Seq o = <Seq>other
        if self._hash and o._hash and self._hash != o._hash:
            return False
        return _same(self.items, o.items)

    def __hash__(self):
        if not self._hash:
            self._hash = hash((Seq, self.items)) or 1
        return self._hash


@cython.trashcan(True)
@cython.final
cdef class Alt(Expr):
    __match_args__ = ("items",)

    def __init__(self, items):
        self.items = items
        self._hash = 0

    def __eq__(self, other):
        if type(other) is not Alt:
            return NotImplemented
        cdef Alt o = <Alt>other
        if self._hash and o._hash and self._hash != o._hash:
            return False
        return _same(self.items, o.items)

    def __hash__(self):
        if not self._hash:
            self._hash = hash((Alt, self.items)) or 1
        return self._hash


@cython.trashcan(True)
@cython.final
cdef class Repeat(Expr):
    __match_args__ = ("item", "lo", "hi")

    def __init__(self, item, lo, hi):
        self.item = item
        self.lo = lo
        self.hi = hi
        self._hash = 0

    def __eq__(self, other):
        if type(other) is not Repeat:
            return NotImplemented
        cdef Repeat o = <Repeat>other
        if self._hash and o._hash and self._hash != o._hash:
            return False
        return _same(self.item, o.item) and _same(self.lo, o.lo) and _same(self.hi, o.hi)

    def __hash__(self):
        if not self._hash:
            self._hash = hash((Repeat, self.item, self.lo, self.hi)) or 1
        return self._hash




# ---- constructors that flatten (re-exported by cfgmask.ir) -------------------------------------
#
# The front ends call these a hundred times per JSON Schema; in C they run no bytecode, and when no
# argument needs flattening the argument tuple becomes the node's items as it is.

cdef inline Seq _seq_of(tuple items):
    cdef Seq out = Seq.__new__(Seq)
    out.items = items
    out._hash = 0
    return out


cdef inline Alt _alt_of(tuple items):
    cdef Alt out = Alt.__new__(Alt)
    out.items = items
    out._hash = 0
    return out


cdef object _flattened(tuple items, type kind):
    """``items`` as one node of ``kind`` (Seq or Alt), nested nodes of that kind spliced in; a
    single item is returned as is.  What seq and alt share."""
    cdef object it
    cdef list flat
    if len(items) == 1 and type(items[0]) is not kind:
        return items[0]
    for it in items:
        if type(it) is kind:
            break
    else:
        return _seq_of(items) if kind is Seq else _alt_of(items)
    flat = []
    for it in items:
        if type(it) is kind:
            flat.extend((<Seq>it).items if kind is Seq else (<Alt>it).items)
        else:
            flat.append(it)
    if len(flat) == 1:
        return flat[0]
    return _seq_of(tuple(flat)) if kind is Seq else _alt_of(tuple(flat))


def seq(*items):
    """Concatenation, flattening nested sequences; a single item is returned as is."""
    return _flattened(items, Seq)


def alt(*items):
    """Alternation, flattening nested alternations; a single item is returned as is."""
    return _flattened(items, Alt)


cdef bint _normal(object ranges, object top):
    # ranges already as normalize_ranges leaves them: pairs of ints (tuples), sorted, in [0, top],
    # neither overlapping nor touching
    cdef object r, lo, hi
    cdef object prev = -2
    for r in ranges:
        if type(r) is not tuple or len(<tuple>r) != 2:
            return False
        lo = (<tuple>r)[0]
        hi = (<tuple>r)[1]
        if type(lo) is not int or type(hi) is not int:
            return False
        if lo <= prev + 1 or lo > hi or hi > top:
            return False
        prev = hi
    return True


def normalize_ranges(ranges, top=0x10FFFF):
    """Sort and merge inclusive ranges, clipped to ``[0, top]``; empty ranges dropped."""
    # (indices from the end are out: the module is compiled with wraparound off)
    cdef list cleaned, out
    cdef object lo, hi, last
    cdef Py_ssize_t n
    if (type(ranges) is tuple or type(ranges) is list) and type(top) is int and _normal(ranges, top):
        return ranges if type(ranges) is tuple else tuple(ranges)
    cleaned = []
    for lo, hi in ranges:
        if lo <= hi and hi >= 0 and lo <= top:
            cleaned.append((max(0, lo), min(top, hi)))
    cleaned.sort()
    out = []
    for lo, hi in cleaned:
        n = len(out)
        if n:
            last = out[n - 1]
            if lo <= last[1] + 1:
                if hi > last[1]:
                    out[n - 1] = (last[0], hi)
                continue
        out.append((lo, hi))
    return tuple(out)


# ---- attributes as member descriptors ----------------------------------------------------------
#
# Cython exposes a ``cdef readonly`` attribute through a getset descriptor, which CPython 3.11's
# specializing interpreter does not specialize: read from Python (the front ends and the compile
# glue read ``e.items``, ``e.data``... a few times per node) it costs ~3x a dataclass slot.  A
# member descriptor (what ``__slots__`` makes) is read by LOAD_ATTR_SLOT, one load at a fixed
# offset.  So each attribute's descriptor is replaced by a read-only member one at import.  The
# offset of the field is found in a sample whose fields hold sentinels, by scanning the object's
# words: Cython does not give the address of an object field.

cdef PyMemberDef _members[16]
cdef int _n_members = 0


cdef Py_ssize_t _offset_of(object sample, object sentinel) except -1:
    cdef PyObject **words = <PyObject **><PyObject *>sample
    cdef Py_ssize_t i, n = type(sample).__basicsize__ // sizeof(PyObject *)
    for i in range(n):
        if words[i] == <PyObject *>sentinel:
            return i * <Py_ssize_t>sizeof(PyObject *)
    raise RuntimeError(f"no field of {type(sample).__name__} holds the sentinel")


cdef _as_member(type cls, const char *name, object sample, object sentinel):
    # ``name`` is a C literal (static), as a PyMemberDef's name must outlive the type
    global _n_members
    if _n_members == 16:
        raise RuntimeError("more IR attributes than _members holds")
    cdef PyMemberDef *m = &_members[_n_members]
    _n_members += 1
    m.name = name
    m.type = T_OBJECT_EX
    m.offset = _offset_of(sample, sentinel)
    m.flags = READONLY
    m.doc = NULL
    PyDict_SetItem(<object>(<_TypeWithDict *><void *>cls).tp_dict, name.decode(), PyDescr_NewMember(<void *>cls, m))
    PyType_Modified(<void *>cls)


def _install_members():
    a, b, c = object(), object(), object()
    _as_member(Literal, "data", Literal(a), a)
    _as_member(CharClass, "ranges", CharClass(a), a)
    _as_member(ByteClass, "ranges", ByteClass(a), a)
    _as_member(Ref, "name", Ref(a), a)
    _as_member(Token, "ids", Token(a, b), a)
    _as_member(Token, "negated", Token(a, b), b)
    _as_member(TokenText, "text", TokenText(a, b), a)
    _as_member(TokenText, "negated", TokenText(a, b), b)
    _as_member(Lookahead, "forbidden", Lookahead(a), a)
    _as_member(LiteralSet, "words", LiteralSet(a, b), a)
    _as_member(LiteralSet, "json", LiteralSet(a, b), b)
    _as_member(Seq, "items", Seq(a), a)
    _as_member(Alt, "items", Alt(a), a)
    _as_member(Repeat, "item", Repeat(a, b, c), a)
    _as_member(Repeat, "lo", Repeat(a, b, c), b)
    _as_member(Repeat, "hi", Repeat(a, b, c), c)


_install_members()
