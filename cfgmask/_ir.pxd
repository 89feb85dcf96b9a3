# cython: language_level=3
# The IR's node types' fields, for the compiled walks that read them (cfgmask/compile/_dag.pyx
# cimports them: a field read is a load at a fixed offset, a type test a pointer compare).  The
# implementation and the why are cfgmask/_ir.pyx's.

cimport cython


cdef class Expr:
    pass


@cython.final
cdef class Literal(Expr):
    cdef readonly object data


@cython.final
cdef class CharClass(Expr):
    cdef readonly object ranges


@cython.final
cdef class ByteClass(Expr):
    cdef readonly object ranges


@cython.final
cdef class Ref(Expr):
    cdef readonly object name


@cython.final
cdef class Token(Expr):
    cdef readonly object ids
    cdef readonly object negated


@cython.final
cdef class TokenText(Expr):
    cdef readonly object text
    cdef readonly object negated


@cython.final
cdef class Lookahead(Expr):
    cdef readonly object forbidden


@cython.final
cdef class LiteralSet(Expr):
    cdef readonly object words
    cdef readonly object json


@cython.final
cdef class Seq(Expr):
    cdef readonly object items
    cdef Py_hash_t _hash


@cython.final
cdef class Alt(Expr):
    cdef readonly object items
    cdef Py_hash_t _hash


@cython.final
cdef class Repeat(Expr):
    cdef readonly object item
    cdef readonly object lo
    cdef readonly object hi
    cdef Py_hash_t _hash
