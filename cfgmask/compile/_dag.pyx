"""The hot loops of :mod:`.encode`, compiled: interning an IR tree into the hash-consed DAG
(its ids and per-id facts) and emitting interned nodes as the encoded IR C reads.

They do what ``Session._cid_rec``, ``Interner.add`` and ``Session._emit_rec`` did in Python,
node for node (the same ids in the same order, the same facts, the same code), without the
interpreter's cost per node: a p50 JSON Schema interns about 100 nodes and emits as many, and
the Python loops cost 2-4 us a node.  The slow Python versions are the tests' oracle
(``tests/reference_encode.py``).  Rare node kinds (token terminals, lookaheads, token texts)
and trees deeper than the recursion cap are left to the Python iterative walks of
:class:`~.encode.Session`, which share the memo; their new nodes' facts are still these
(``Interner.add`` is :meth:`Facts.add`, for every kind).
"""

from cpython.array cimport array, clone, resize_smart
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_Contains, PyDict_Copy, PyDict_DelItem, PyDict_GetItemWithError, PyDict_Next, PyDict_SetDefault
from cpython.long cimport PyLong_AsLong, PyLong_AsLongLongAndOverflow, PyLong_AsSsize_t, PyLong_CheckExact, PyLong_FromVoidPtr
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_Compare
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.set cimport PyFrozenSet_New, PySet_Add
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.sequence cimport PySequence_Fast_ITEMS
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdlib cimport qsort

from .._ir cimport Alt, ByteClass, CharClass, Literal, LiteralSet, Ref, Repeat, Seq

from .. import deadline
from .. import ir
from ..utf8 import without_surrogates
from .automaton import DFA

# CM_IR_* of csrc/cfgmask.h and the interned-only kinds, as encode.py numbers them (a test
# checks that both agree)
cdef enum:
    LIT = 1
    BYTES = 2
    UTF8 = 3
    SEQ = 4
    ALT = 5
    REPEAT = 6
    REF = 7
    TOKEN = 9  # interned kind only (encode._TOKEN): a reference to its label
    LOOKAHEAD = 10  # interned kind only (encode._LOOKAHEAD): a reference to its marker rule
    WORDS = 11  # interned kind of a literal set
    MAX_NEST = 256  # expansions nested in one caller (C recurses on them): a longer chain is cut
    MAX_DEPTH = 200  # as encode.py: past it the walks go on iteratively
    MAX_CODE_POINT = 0x10FFFF  # ir.MAX_CODE_POINT
    TREE_MAX = 256  # Facts.tree_uses: a node's tree this small is walked as a tree
    SURROGATE_LO = 0xD800  # ir.SURROGATES
    SURROGATE_HI = 0xDFFF

cdef unsigned int INF = 0xFFFFFFFF  # encode._INF: no upper bound

KINDS = (LIT, BYTES, UTF8, SEQ, ALT, REPEAT, REF, LOOKAHEAD, MAX_DEPTH)
MORE_KINDS = (TOKEN, WORDS)  # the other interned kinds the compiled walks tell apart

cdef frozenset NO_REFS = frozenset()
cdef dict NO_USES = {}
cdef list NO_CALLEES = []  # the callees of a rule that calls none (read only)
cdef dict NO_RULE_SIZES = {}  # the rule sizes a reference-free subtree's size reads (none; read only)
cdef object deadline_check = deadline.check


class Deep(Exception):
    """Nesting past the recursion cap: the caller walks the rest iteratively."""


class TooBig(Exception):
    """More nodes visited than the session's ``max_nodes``."""


cdef inline object oid(object x):
    """``id(x)``, without a call of the builtin."""
    return PyLong_FromVoidPtr(<void *>x)


cdef inline Py_ssize_t ptr_hash(PyObject *p) noexcept:
    """A table slot hash of an object's address (objects are 16-byte aligned)."""
    cdef size_t x = <size_t>p >> 4
    return <Py_ssize_t>((x * <size_t>0x9E3779B97F4A7C15) >> 17)


cdef extern from "Python.h":
    int PyObject_GC_IsTracked(object o)
    void PyObject_GC_UnTrack(void *o)
    object PyType_GenericAlloc(type t, Py_ssize_t n)


cdef extern from *:
    """
    /* no item of tuple t is of a type the cycle collector tracks (str, int, None, bool...) */
    static CYTHON_INLINE int cfgmask_atomic_items(PyObject *t) {
        Py_ssize_t i, n = PyTuple_GET_SIZE(t);
        for (i = 0; i < n; i++)
            if (PyType_IS_GC(Py_TYPE(PyTuple_GET_ITEM(t, i))))
                return 0;
        return 1;
    }
    """
    bint cfgmask_atomic_items(object t)


cdef object untrack(object x):
    """``x``, a tuple or frozenset the plan made to keep (a component's key, a member's spec),
    untracked by the cycle collector when none of its items is tracked: it can then be part
    of no cycle, and CPython's collector would untrack such a tuple itself, but only after
    walking it.  The collections that a cold compile's allocations set off in the plan
    walked each of them once or twice: 12 % of the plan's instructions, 6 % after this.
    A tuple of atomic items (the plan's keys and specs: names, ids, caps) is told by its
    items' type flags inline, where a call a item cost ~0.15 K instructions a tuple."""
    cdef Py_ssize_t i
    if type(x) is tuple:
        if cfgmask_atomic_items(x):
            PyObject_GC_UnTrack(<void *>x)
            return x
        for i in range(len(<tuple>x)):
            if PyObject_GC_IsTracked((<tuple>x)[i]):
                return x
    elif type(x) is frozenset:
        for y in <frozenset>x:
            if PyObject_GC_IsTracked(y):
                return x
    else:
        return x
    PyObject_GC_UnTrack(<void *>x)
    return x


cdef inline tuple new_tuple(Py_ssize_t n):
    """A tuple of n empty slots, each filled by ``set_item`` before it is read."""
    return PyTuple_New(n)


cdef inline void set_item(tuple t, Py_ssize_t i, object x):
    Py_INCREF(x)
    PyTuple_SET_ITEM(t, i, x)


ctypedef struct Fact:
    long long count  # tree size, or -1: past SMALL_MAX (the list holds it)
    long long maxprod  # largest product of repetition bounds, or -1: past SMALL_MAX
    long height
    Py_ssize_t maxlit
    bint plain
    bint has_refs
    # every repetition below has valid bounds (lo >= 0, hi None or >= lo): with maxprod 1
    # (each bounded by 1) the subtree needs no rewriting whatever the budget (``Clean``)
    bint valid

cdef long long SMALL_MAX = 1LL << 62


cdef inline long long small_int(object x) noexcept:
    """``x`` as a C integer when it is an int within 0..SMALL_MAX, else -1."""
    cdef int ovf = 0
    cdef long long v
    if not PyLong_CheckExact(x):
        return -1
    v = PyLong_AsLongLongAndOverflow(x, &ovf)
    if ovf != 0 or v < 0 or v > SMALL_MAX:  # an exact int only overflows: no error is set
        return -1
    return v


cdef bint valid_bounds(tuple key, const Fact *fa, Py_ssize_t fa_len, Py_ssize_t k):
    """Are the bounds of the repetition ``key`` and all below its item ``k`` valid (as
    ``Clean.walk`` tests them)?  False for bounds it cannot compare (left to the walk)."""
    lo, hi = key[2], key[3]
    if not 0 <= k < fa_len or not fa[k].valid:
        return False
    try:
        return bool(lo >= 0 and (hi is None or hi >= lo))
    except Exception:
        return False


cdef class Facts:
    """An interner's per-id facts (``encode.Interner``): its lists, bound once (attribute
    lookups once, not once a node), and the one registration of a new node.

    Nodes are registered under the interner's lock (re-entrant): :meth:`add` takes it for
    one node, a compiled walk (``intern``, ``intern_all``) once for all of its nodes, and the
    ``add_*`` methods and ``insert`` run with it held, each key looked up once."""
    cdef dict ids
    cdef list keys, refs, uses
    # A node's tree size, height, longest literal, largest repetition product and plainness
    # live in ``fa`` alone (``Interner.count`` and the others are :class:`Column` views of it),
    # where five lists appended a node cost ~0.2 K instructions a new node and their growth
    # reallocations as much again (docs/design.md §7); a size or product past 2**62 is kept
    # in ``big`` (id -> (count, maxprod)).  ``lists``: a subclass that registers nodes its
    # own way (tests/reference_encode.py) gives its five lists, and they are read instead.
    cdef dict big
    cdef list count, height, maxlit, maxprod, plain  # a subclass's lists, or None
    cdef object acquire, release  # the interner's lock (bound once: ``with`` looks them up a call)
    cdef object marker_name  # encode.marker_name: the rule a lookahead refers to
    # The facts a new sequence or alternation reads of its children, per id in one C array
    # beside the lists (which stay the interface): a child costs one struct read instead of
    # six lists' items and the int objects they point to, each a cache miss when the caches
    # are cold (docs/design.md §7).  Written by ``insert``, under the lock, for every id.
    cdef Fact *fa
    cdef Py_ssize_t fa_len, fa_cap
    # The next id as an int object (``next_id``), made once a new node, not once a lookup: an
    # id past 256 is no cached small int, and ``len(self.keys)`` made one (an allocation and a
    # free) for every child key looked up, ~35 K instructions a median schema's compile once
    # the prelude's nodes push the new ids past 256.
    cdef object next_obj
    cdef Py_ssize_t next_n

    def __cinit__(self):
        self.fa = NULL
        self.fa_len = self.fa_cap = 0
        self.next_n = -1

    cdef inline object next_id(self):
        """``len(self.keys)``, the id a new node gets, as the int object kept for it."""
        cdef Py_ssize_t n = len(self.keys)
        if n != self.next_n:
            self.next_obj = n
            self.next_n = n
        return self.next_obj

    def __dealloc__(self):
        PyMem_Free(self.fa)

    def __init__(self, interner, marker_name):
        self.ids = interner.ids
        self.keys = interner.keys
        self.refs = interner._refs
        self.uses = interner._uses
        self.big = {}
        self.acquire = interner.lock.acquire
        self.release = interner.lock.release
        self.marker_name = marker_name

    def use_lists(self, list count, list height, list maxlit, list maxprod, list plain):
        """Keep the five facts in these lists too, and read them from there (a subclass's
        ``add`` appends to them itself; the C facts are then out of step)."""
        self.count, self.height, self.maxlit, self.maxprod, self.plain = count, height, maxlit, maxprod, plain

    cdef inline bint in_c(self, Py_ssize_t c) noexcept:
        """Are node ``c``'s five facts read from ``fa``?"""
        return self.count is None and 0 <= c < self.fa_len

    cdef object count_of(self, Py_ssize_t c):
        if self.in_c(c):
            return self.fa[c].count if self.fa[c].count >= 0 else (<tuple>self.big[c])[0]
        if self.count is None:
            raise IndexError("list index out of range")
        return self.count[c]

    cdef object maxprod_of(self, Py_ssize_t c):
        if self.in_c(c):
            return self.fa[c].maxprod if self.fa[c].maxprod >= 0 else (<tuple>self.big[c])[1]
        if self.maxprod is None:
            raise IndexError("list index out of range")
        return self.maxprod[c]

    cdef long height_of(self, Py_ssize_t c) except? -1:
        if self.in_c(c):
            return self.fa[c].height
        if self.height is None:
            raise IndexError("list index out of range")
        return self.height[c]

    cdef Py_ssize_t maxlit_of(self, Py_ssize_t c) except? -1:
        if self.in_c(c):
            return self.fa[c].maxlit
        if self.maxlit is None:
            raise IndexError("list index out of range")
        return self.maxlit[c]

    cdef int plain_of(self, Py_ssize_t c) except -1:
        if self.in_c(c):
            return self.fa[c].plain
        if self.plain is None:
            raise IndexError("list index out of range")
        return 1 if self.plain[c] else 0

    def fact(self, Py_ssize_t c, int field):
        """Node ``c``'s fact ``field`` (0 count, 1 height, 2 longest literal, 3 largest
        repetition product, 4 plain): what :class:`Column` reads."""
        if field == 0:
            return self.count_of(c)
        if field == 1:
            return self.height_of(c)
        if field == 2:
            return self.maxlit_of(c)
        if field == 3:
            return self.maxprod_of(c)
        return self.plain_of(c) == 1

    cpdef Py_ssize_t add(self, tuple key) except -1:
        """The id of the node ``key`` (kind, data, children's ids), registered with its facts if
        new: tree size (a shared subtree counted per use), height, longest literal, rules
        referenced, references per rule (capped at 2), largest product of repetition bounds on
        a path down, and whether it repeats nothing."""
        cdef object got
        cdef int kind = key[0]
        self.acquire()
        try:
            got = self.ids.get(key)
            if got is not None:
                return <Py_ssize_t>got
            if kind == SEQ or kind == ALT:
                return <Py_ssize_t>self.add_list(kind, <tuple>key[1])
            if kind == REPEAT:
                return <Py_ssize_t>self.add_repeat(key, <Py_ssize_t>key[1])
            if kind == LOOKAHEAD:
                name = self.marker_name(key[1])
                return <Py_ssize_t>self.insert(key, None, 1, 1, 0, True, 1, True)
            return <Py_ssize_t>self.add_leaf(key, None)
        finally:
            self.release()

    cdef inline PyObject *claim(self, tuple key, object i) except NULL:
        """``ids.setdefault(key, i)``, ``i`` the next id: a key hashed once, where a lookup and
        then an insert hash it twice (a node's key hashes its children's ids).  Returns ``i``
        itself when ``key`` is new: its caller then registers it (``insert`` with ``i``) or, if
        that raises, takes the claim back (``unclaim``)."""
        return PyDict_SetDefault(self.ids, key, i)

    cdef int unclaim(self, tuple key, object i) except -1:
        """Take back the claim of a new ``key`` whose registration raised (the lists are as
        they were: the facts are computed before anything is appended)."""
        if len(self.keys) == <Py_ssize_t>i:
            PyDict_DelItem(self.ids, key)
        return 0

    cdef object leaf_id(self, tuple key):
        """The id of the leaf ``key`` but a lookahead, registered if new."""
        cdef object i = self.next_id()
        cdef PyObject *got = self.claim(key, i)
        if got != <PyObject *>i:
            return <object>got
        try:
            return self.add_leaf(key, i)
        except BaseException:
            self.unclaim(key, i)
            raise

    cdef object insert(self, tuple key, object i, object count, long height, Py_ssize_t maxlit, bint has_refs,
                       object maxprod, bint plain, bint valid=True):
        """Register ``key``, new (the lock held, the key looked up), with its facts; its id.
        ``i``: the id claimed for it in ``ids`` (``claim``), or None (then it is added here).
        ``has_refs``: it refers to a rule (its rules and uses are then made when first asked:
        ``uses_of``).
        Ids travel as the int objects the interner keeps (the walks put them in their keys and
        memo), not as C ints made into new objects at each step."""
        cdef bint claimed = i is not None
        if not claimed:
            i = len(self.keys)
        cdef Fact *f
        cdef Py_ssize_t cap
        if self.fa_len == len(self.keys):  # in step with the lists (always, but for a subclass's add)
            if self.fa_len == self.fa_cap:
                # room for the prelude's nodes and a few compiles' before the first copy
                cap = 1024 if self.fa_cap < 1024 else 2 * self.fa_cap
                f = <Fact *>PyMem_Realloc(self.fa, cap * sizeof(Fact))
                if f == NULL:
                    raise MemoryError
                self.fa = f
                self.fa_cap = cap
            f = &self.fa[self.fa_len]
            f.count = small_int(count)
            f.maxprod = small_int(maxprod)
            f.height = height
            f.maxlit = maxlit
            f.plain = plain
            f.has_refs = has_refs
            f.valid = valid
            if f.count < 0 or f.maxprod < 0:
                self.big[self.fa_len] = (count, maxprod)
            self.fa_len += 1
        if self.count is not None:  # a subclass's lists
            self.count.append(count)
            self.height.append(height)
            self.maxlit.append(maxlit)
            self.maxprod.append(maxprod)
            self.plain.append(plain)
        self.refs.append(None if has_refs else NO_REFS)
        self.uses.append(None if has_refs else NO_USES)
        self.keys.append(key)
        if not claimed:
            self.ids[key] = i
        return i

    cdef object add_leaf(self, tuple key, object i):
        """``add`` of a new leaf but a lookahead: a literal, class, reference, token or literal
        set (``i``: as ``insert``)."""
        cdef int kind = key[0]
        if kind == LIT:
            return self.insert(key, i, 1, 1, len(<bytes>key[1]), False, 1, True)
        return self.insert(key, i, 1, 1, 0, kind == REF, 1, True)

    cdef object add_list(self, int kind, tuple kids):
        """``add`` of a sequence or alternation of interned ``kids``."""
        cdef tuple key = (kind, kids)
        cdef object i = self.next_id()
        cdef PyObject *got = self.claim(key, i)
        if got != <PyObject *>i:
            return <object>got
        try:
            return self.add_list_new(key, kids, i)
        except BaseException:
            self.unclaim(key, i)
            raise

    cdef object add_list_new(self, tuple key, tuple kids, object cid):
        """``add_list`` of a new node, its id ``cid`` claimed."""
        if not kids:
            return self.insert(key, cid, 1, 1, 0, False, 1, True)
        cdef object total, prod, p
        cdef long h = 0
        cdef Py_ssize_t lit = 0, k, n = len(kids), i
        cdef long long tc = 1, pc = 0
        cdef bint all_plain = True, big = False, has_refs = False, valid = True
        cdef const Fact *f
        if self.fa_len != len(self.keys) or self.count is not None:
            return self.add_list_py(key, kids, cid)
        for i in range(n):
            o = kids[i]
            k = <Py_ssize_t>o
            if not 0 <= k < self.fa_len:
                raise IndexError("list index out of range")
            f = &self.fa[k]
            if f.count < 0 or f.maxprod < 0:
                big = True  # a size or product past 2**62: summed as Python ints below
            else:
                tc += f.count
                if f.maxprod > pc:
                    pc = f.maxprod
                if tc > SMALL_MAX:
                    big = True
            if f.height > h:
                h = f.height
            if f.maxlit > lit:
                lit = f.maxlit
            if not f.plain:
                all_plain = False
            if f.has_refs:
                has_refs = True
            if not f.valid:
                valid = False
        if big:
            total = 1
            prod = None
            for o in kids:
                k = <Py_ssize_t>o
                total = total + self.count_of(k)
                p = self.maxprod_of(k)
                if prod is None or p > prod:
                    prod = p
        else:
            total = tc
            prod = pc
        return self.insert(key, cid, total, 1 + h, lit, has_refs, prod, all_plain, valid)

    cdef object add_list_py(self, tuple key, tuple kids, object i):
        """``add_list`` of a new node from the lists alone (the C facts out of step with them:
        a subclass registered ids its own way)."""
        cdef object total = 1, prod = None, p
        cdef long h = 0, x
        cdef Py_ssize_t lit = 0, y, k
        cdef bint all_plain = True, has_refs = False
        for o in kids:
            k = <Py_ssize_t>o
            total = total + self.count_of(k)
            x = self.height_of(k)
            if x > h:
                h = x
            y = self.maxlit_of(k)
            if y > lit:
                lit = y
            p = self.maxprod_of(k)
            if prod is None or p > prod:
                prod = p
            if not self.plain_of(k):
                all_plain = False
            if self.uses_of(k):
                has_refs = True
        return self.insert(key, i, total, 1 + h, lit, has_refs, prod, all_plain, False)

    cdef object add_repeat(self, tuple key, Py_ssize_t k):
        """``add`` of a repetition of interned ``k``."""
        cdef object i = self.next_id()
        cdef PyObject *got = self.claim(key, i)
        if got != <PyObject *>i:
            return <object>got
        try:
            bound = max(key[2], key[3] or 0, 1)
            has_refs = self.fa[k].has_refs if 0 <= k < self.fa_len else len(self.uses_of(k)) != 0
            return self.insert(key, i, 1 + self.count_of(k), 1 + self.height_of(k), self.maxlit_of(k), has_refs,
                               bound * self.maxprod_of(k), False, valid_bounds(key, self.fa, self.fa_len, k))
        except BaseException:
            self.unclaim(key, i)
            raise


    cpdef object uses_of(self, Py_ssize_t c):
        """``uses[c]``: the references per rule below node ``c`` (a shared subtree counted per
        use), capped at 2, made when first asked and kept.  Only the rule bodies' are asked
        for (``call_graph``), and a few inner nodes' (tail position, the repetition
        rewriter): a node is registered with ``has_refs`` only, where making every node's
        dict and rule set as it was registered cost a quarter of the interning's
        instructions (docs/design.md §7)."""
        cdef object u = self.uses[c]
        if u is not None:
            return u
        if c < self.fa_len and 0 <= self.fa[c].count <= TREE_MAX:
            u = self.tree_uses(c)
        else:
            u = self.dag_uses(c)
        self.uses[c] = u
        return u

    cpdef object refs_of(self, Py_ssize_t c):
        """``refs[c]``: the rules referred to below node ``c`` (``uses_of(c)``'s keys), made
        when first asked and kept."""
        cdef object r = self.refs[c]
        if r is None:
            r = PyFrozenSet_New(self.uses_of(c))
            self.refs[c] = r
        return r

    cdef dict tree_uses(self, Py_ssize_t c):
        """``uses_of(c)`` for a node of at most TREE_MAX tree nodes, by a walk of its tree
        (nothing kept for the nodes below): each reference met, left to right, counted into
        one dict (the merge of the children's dicts, capped at each level, gives the same
        counts in the same order)."""
        cdef Py_ssize_t stack[TREE_MAX]
        cdef Py_ssize_t sp = 1, x, j, k, n
        cdef dict out = {}
        cdef tuple key, kids
        cdef int kind
        stack[0] = c
        while sp:  # a push is a node of the tree: at most its size
            sp -= 1
            x = stack[sp]
            key = <tuple>self.keys[x]
            kind = key[0]
            if kind == SEQ or kind == ALT:
                kids = <tuple>key[1]
                for j in range(len(kids) - 1, -1, -1):  # popped left to right
                    k = <Py_ssize_t>kids[j]
                    if self.fa[k].has_refs:
                        stack[sp] = k
                        sp += 1
            elif kind == REPEAT:
                stack[sp] = <Py_ssize_t>key[1]
                sp += 1
            elif kind == REF or kind == LOOKAHEAD:
                name = key[1] if kind == REF else self.marker_name(key[1])
                n = len(out)
                PyDict_SetDefault(out, name, 1)  # one probe for a name met first (most)
                if len(out) == n:  # met before
                    out[name] = 2
        return out

    cdef dict dag_uses(self, Py_ssize_t c):
        """``uses_of(c)`` over the DAG below ``c``, each node's kept (children first,
        iteratively): a node of a large tree."""
        cdef list stack = [c], uses = self.uses, use_list
        cdef tuple key
        cdef int kind
        cdef bint missing
        cdef object u
        while stack:
            x = stack[len(stack) - 1]
            if uses[x] is not None:
                stack.pop()
                continue
            key = <tuple>self.keys[x]
            kind = key[0]
            if kind == SEQ or kind == ALT:
                missing = False
                for k in reversed(<tuple>key[1]):
                    if uses[k] is None:
                        stack.append(k)
                        missing = True
                if missing:
                    continue
                use_list = [uses[k] for k in <tuple>key[1] if uses[k]]
                if not use_list:
                    u = NO_USES
                elif len(use_list) == 1:
                    u = use_list[0]
                else:
                    u = merge_uses(use_list)
            elif kind == REPEAT:
                if uses[key[1]] is None:
                    stack.append(key[1])
                    continue
                u = uses[key[1]]
            elif kind == REF:
                u = {key[1]: 1}
            elif kind == LOOKAHEAD:
                u = {self.marker_name(key[1]): 1}
            else:
                u = NO_USES
            stack.pop()
            uses[x] = u
        return <dict>uses[c]


cdef class Lazy:
    """``Interner.refs`` or ``Interner.uses``: a read-only list of the nodes' rule sets or
    uses per rule, each made when first read (``Facts.refs_of``, ``uses_of``)."""
    cdef Facts facts
    cdef bint uses

    def __init__(self, Facts facts, bint uses):
        self.facts = facts
        self.uses = uses

    cdef object at(self, Py_ssize_t c):
        """Node ``c``'s item (``c`` in range)."""
        return self.facts.uses_of(c) if self.uses else self.facts.refs_of(c)

    def __len__(self):
        return len(self.facts.keys)

    def __getitem__(self, index):
        cdef Py_ssize_t n = len(self.facts.keys), c
        if type(index) is slice:
            return [self[i] for i in range(*index.indices(n))]
        c = index
        if c < 0:
            c += n
        if not 0 <= c < n:
            raise IndexError("list index out of range")
        return self.at(c)

    def __iter__(self):
        return iter([self[c] for c in range(len(self))])


cdef class Column(Lazy):
    """``Interner.count``, ``height``, ``maxlit``, ``maxprod`` or ``plain``: a read-only list
    of one fact of every node, read from the C facts (``Facts.fact``)."""
    cdef int field

    def __init__(self, Facts facts, int field):
        self.facts = facts
        self.field = field

    cdef object at(self, Py_ssize_t c):
        return self.facts.fact(c, self.field)

    def __eq__(self, other):
        if isinstance(other, (Column, list)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self):
        return f"Column({list(self)!r})"


cdef dict merge_uses(list use_list):
    """The sum of the uses per rule of ``use_list`` (dicts of 1 or 2), each capped at 2."""
    cdef dict out = {}, u
    cdef PyObject *got
    cdef Py_ssize_t k
    for u in use_list:
        for n, v in u.items():
            got = PyDict_GetItemWithError(out, n)
            k = <Py_ssize_t>v if got == NULL else <Py_ssize_t>v + PyLong_AsSsize_t(<object>got)
            out[n] = 2 if k >= 2 else k
    return out


cdef class Interning:
    """One call of ``Session.cid``: the recursive walk of ``Session._cid_rec``."""
    cdef object sess
    cdef dict memo, ids
    cdef dict seed  # the prelude's objects' ids (Session.seed): asked where memo misses, never written
    cdef list keep
    cdef Facts facts
    cdef object max_nodes
    cdef Py_ssize_t next_check  # sess._next_check, kept here (written back when it moves)
    # The nodes met in this walk and their ids, by identity: an open-addressed table of
    # (node, id) pairs, both referenced (so no address is reused while it is here).  A leaf
    # met again (half of a JSON schema's leaf children are an object met before) costs a probe
    # here instead of its key's tuple and dict lookup; a composite one instead of the memo's.
    cdef PyObject **seen
    cdef Py_ssize_t seen_mask, seen_used

    def __cinit__(self):
        self.seen = NULL
        self.seen_mask = -1
        self.seen_used = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.seen != NULL:
            for i in range(2 * (self.seen_mask + 1)):
                Py_XDECREF(self.seen[i])
            PyMem_Free(self.seen)

    cdef inline PyObject *seen_get(self, object x) noexcept:
        cdef Py_ssize_t h
        cdef PyObject *k
        if self.seen == NULL:
            return NULL
        h = ptr_hash(<PyObject *>x) & self.seen_mask
        while True:
            k = self.seen[2 * h]
            if k == <PyObject *>x:
                return self.seen[2 * h + 1]
            if k == NULL:
                return NULL
            h = (h + 1) & self.seen_mask

    cdef int seen_put(self, object x, object v) except -1:
        cdef Py_ssize_t h, i, size
        cdef PyObject **old = self.seen
        cdef PyObject **t
        cdef Py_ssize_t old_size = self.seen_mask + 1
        if 2 * (self.seen_used + 1) > old_size:  # at most half full
            size = 64 if old_size < 64 else 2 * old_size
            t = <PyObject **>PyMem_Calloc(2 * size, sizeof(PyObject *))
            if t == NULL:
                raise MemoryError
            for i in range(old_size):
                if old[2 * i] != NULL:
                    h = ptr_hash(old[2 * i]) & (size - 1)
                    while t[2 * h] != NULL:
                        h = (h + 1) & (size - 1)
                    t[2 * h] = old[2 * i]
                    t[2 * h + 1] = old[2 * i + 1]
            PyMem_Free(old)
            self.seen = t
            self.seen_mask = size - 1
        h = ptr_hash(<PyObject *>x) & self.seen_mask
        while self.seen[2 * h] != NULL:
            h = (h + 1) & self.seen_mask
        Py_INCREF(x)
        Py_INCREF(v)
        self.seen[2 * h] = <PyObject *>x
        self.seen[2 * h + 1] = <PyObject *>v
        self.seen_used += 1
        return 0

    def __init__(self, sess, Facts facts):
        self.sess = sess
        self.memo = sess.memo
        self.seed = sess.seed
        self.keep = sess.keep
        self.facts = facts
        self.ids = facts.ids
        self.max_nodes = sess.max_nodes
        self.next_check = sess._next_check

    cdef object leaf(self, object x, object tx):
        """The id of a literal, class, reference or literal set ``x`` (of type ``tx``), or None
        for another kind."""
        cdef tuple key
        cdef PyObject *got
        if tx is Literal:
            key = (LIT, (<Literal>x).data)
        elif tx is CharClass:
            key = (UTF8, (<CharClass>x).ranges)
        elif tx is Ref:
            key = (REF, (<Ref>x).name)
        elif tx is ByteClass:
            key = (BYTES, (<ByteClass>x).ranges)
        elif tx is LiteralSet:  # (a JSON enum's words: one in a sixth of the schemas)
            key = (WORDS, (<LiteralSet>x).words, (<LiteralSet>x).json)
            self.sess.literal_sets = True  # as Session._cid_iter notes it (components.outline_sets)
        else:
            return None
        return self.facts.leaf_id(key)

    cdef object rec(self, object e, int depth, object eid):
        """The id of ``e`` (``eid``: its identity, the memo's key; not in the memo)."""
        cdef object t = type(e), g, tx, i, ox
        cdef Py_ssize_t k, n
        cdef tuple items, kids, key
        cdef dict memo = self.memo
        cdef PyObject *got
        if t is Seq or t is Alt:
            if depth > MAX_DEPTH:
                raise Deep
            items = (<Seq>e).items if t is Seq else (<Alt>e).items
            n = len(items)
            kids = new_tuple(n)
            for k in range(n):
                x = items[k]
                got = self.seen_get(x)
                if got != NULL:
                    set_item(kids, k, <object>got)
                    continue
                # a leaf child is looked up by its key (the first time in this walk), not
                # memoized in the session: the memo's two entries a new leaf cost are spared
                tx = type(x)
                g = self.leaf(x, tx)
                if g is None:
                    ox = oid(x)
                    got = PyDict_GetItemWithError(memo, ox)
                    if got == NULL:
                        got = PyDict_GetItemWithError(self.seed, ox)
                    g = self.rec(x, depth + 1, ox) if got == NULL else <object>got
                self.seen_put(x, g)
                set_item(kids, k, g)
            i = self.facts.add_list(SEQ if t is Seq else ALT, kids)
        elif t is Repeat:
            if depth > MAX_DEPTH:
                raise Deep
            x = (<Repeat>e).item
            ox = oid(x)
            got = PyDict_GetItemWithError(memo, ox)
            if got == NULL:
                got = PyDict_GetItemWithError(self.seed, ox)
            g = self.rec(x, depth + 1, ox) if got == NULL else <object>got
            i = self.facts.add_repeat((REPEAT, g, (<Repeat>e).lo, (<Repeat>e).hi), <Py_ssize_t>g)
        else:
            i = self.leaf(e, t)
            if i is None:
                return self.sess._cid_iter(e, self.max_nodes)
        memo[eid] = i
        self.keep.append(e)
        n = len(self.keep)
        if n >= self.next_check:
            self.next_check = n + 1024
            self.sess._next_check = self.next_check
            if self.max_nodes is not None and n > self.max_nodes:
                raise TooBig
            deadline_check("IR walk")
        return i


def intern(sess, root):
    """``Session._cid_rec(root, 0)``: raises :class:`Deep` past the recursion cap (what is
    done is memoized) and :class:`TooBig` past ``sess.max_nodes`` nodes."""
    cdef Facts facts = sess.interner.facts
    facts.acquire()
    try:
        return Interning(sess, facts).rec(root, 0, oid(root))
    finally:
        facts.release()


def intern_all(sess, dict rules):
    """``Session.cid`` of every rule body, by rule name (the walk set up once)."""
    cdef Facts facts = sess.interner.facts
    cdef Interning walk = Interning(sess, facts)
    # the rules' names, each value replaced by its body's id: a dict made at its size, where
    # one grown by an insert a name cost ~0.3 K instructions a name
    cdef dict out = PyDict_Copy(rules), memo = walk.memo, seed = walk.seed
    facts.acquire()
    try:
        for name, body in rules.items():
            ob = oid(body)
            got = memo.get(ob)
            if got is None:
                got = seed.get(ob)
            if got is None:
                try:
                    got = walk.rec(body, 0, ob)
                except Deep:  # the rest without recursion (what is done is memoized)
                    got = sess._cid_iter(body, walk.max_nodes)
            out[name] = got
    finally:
        facts.release()
    return out


cdef class Offsets:
    """``Session.offsets``: the offset in the code of each node emitted, by node id.  A C
    array over the ids (dense: a session's interner numbers its nodes 0, 1, ...), -1 where
    not emitted, with the read and write of a dict (``get``, ``in``, ``[]``, ``items``): the
    dict it replaces cost ~0.5 K instructions a node emitted, its resizes and an int object
    an entry, 1 % of a median JSON schema's compile."""
    cdef Py_ssize_t *at  # NULL, and ``cap`` 0, until the first write (an object starts zeroed)
    cdef Py_ssize_t cap, used

    def __dealloc__(self):
        PyMem_Free(self.at)

    cdef inline Py_ssize_t of(self, Py_ssize_t cid) noexcept:
        """The offset of ``cid``, or -1 (not emitted, or no node id)."""
        return self.at[cid] if 0 <= cid < self.cap else -1

    cdef int put(self, Py_ssize_t cid, Py_ssize_t off) except -1:
        cdef Py_ssize_t cap = self.cap, i
        cdef Py_ssize_t *p
        if cid < 0 or off < 0:
            raise ValueError(f"an offset {off} of node {cid}")
        if cid >= cap:
            while cap <= cid:
                cap = 256 if cap < 256 else 2 * cap
            p = <Py_ssize_t *>PyMem_Realloc(self.at, cap * sizeof(Py_ssize_t))
            if p == NULL:
                raise MemoryError
            for i in range(self.cap, cap):
                p[i] = -1
            self.at = p
            self.cap = cap
        if self.at[cid] < 0:
            self.used += 1
        self.at[cid] = off
        return 0

    def get(self, cid, default=None):
        cdef Py_ssize_t off = self.of(cid)
        return default if off < 0 else off

    def __contains__(self, cid):
        return self.of(cid) >= 0

    def __getitem__(self, cid):
        cdef Py_ssize_t off = self.of(cid)
        if off < 0:
            raise KeyError(cid)
        return off

    def __setitem__(self, cid, off):
        self.put(cid, off)

    def __len__(self):
        return self.used

    def items(self):
        """The (node id, offset) pairs, by node id."""
        cdef Py_ssize_t i
        return [(i, self.at[i]) for i in range(self.cap) if self.at[i] >= 0]


cdef class Emitting:
    """``Session.emit`` for one or more roots: the recursive walk of ``Session._emit_rec``,
    the rest past the recursion cap left to ``Session._emit_iter``."""
    cdef object sess
    cdef Offsets offsets
    cdef dict name_idx
    cdef list keys
    cdef array code

    def __init__(self, sess):
        self.sess = sess
        self.offsets = sess.offsets
        self.keys = sess.interner.keys
        self.code = sess.code
        self.name_idx = sess.name_idx

    def emit(self, Py_ssize_t root):
        """``Session.emit(root)``."""
        cdef Py_ssize_t off = self.offsets.of(root)
        if off >= 0:
            return off
        try:
            return self.rec(root, 0)
        except Deep:  # the rest without recursion (what is done is kept)
            return self.sess._emit_iter(root)

    cdef Py_ssize_t node(self, object cid, int depth) except -1:
        """The offset of ``cid``, emitted if new."""
        cdef Py_ssize_t off = self.offsets.of(cid)
        return self.rec(cid, depth) if off < 0 else off

    cdef inline Py_ssize_t grow(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t at = len(self.code)
        resize_smart(self.code, at + n)
        return at

    cdef Py_ssize_t rec(self, object cid, int depth) except -1:
        """The offset of ``cid`` (not emitted yet), emitted with what it needs."""
        cdef tuple key = <tuple>self.keys[<Py_ssize_t>cid], kids
        cdef int kind = key[0]
        cdef Py_ssize_t n, i, at, off
        cdef unsigned int *out
        cdef unsigned int few[16]
        cdef unsigned int *offs
        cdef object o
        cdef bytes data
        cdef const unsigned char *p
        if kind == SEQ or kind == ALT:
            if depth > MAX_DEPTH:
                raise Deep
            kids = <tuple>key[1]
            n = len(kids)
            offs = &few[0]
            if n > 16:
                offs = <unsigned int *>PyMem_Malloc(n * sizeof(unsigned int))
                if offs == NULL:
                    raise MemoryError
            try:
                for i in range(n):
                    offs[i] = <unsigned int>self.node(kids[i], depth + 1)
                at = self.grow(2 + n)
                out = self.code.data.as_uints
                out[at] = kind
                out[at + 1] = <unsigned int>n
                for i in range(n):
                    out[at + 2 + i] = offs[i]
            finally:
                if offs != &few[0]:
                    PyMem_Free(offs)
        elif kind == REPEAT:
            if depth > MAX_DEPTH:
                raise Deep
            off = self.node(key[1], depth + 1)
            lo, hi = key[2], key[3]
            if not (0 <= lo < INF and (hi is None or lo <= hi < INF)):
                self.sess._repeat_code(key, off)  # raises the bounds' error
            at = self.grow(4)  # Session._repeat_code's, without a Python call
            out = self.code.data.as_uints
            out[at] = REPEAT
            out[at + 1] = <unsigned int>lo
            out[at + 2] = INF if hi is None else <unsigned int>hi
            out[at + 3] = <unsigned int>off
        elif kind == LIT:
            data = <bytes>key[1]
            n = len(data)
            at = self.grow(2 + n)
            out = self.code.data.as_uints
            out[at] = LIT
            out[at + 1] = <unsigned int>n
            p = <const unsigned char *>data
            for i in range(n):
                out[at + 2 + i] = p[i]
        elif kind == REF:
            o = self.name_idx.get(key[1])
            i = self.sess.name(key[1]) if o is None else <Py_ssize_t>o
            at = self.grow(2)
            out = self.code.data.as_uints
            out[at] = REF
            out[at + 1] = <unsigned int>i
        else:
            at = -1
            if kind == UTF8:
                at = self.char_class(key[1])
            elif kind == BYTES:
                at = self.byte_class(key[1])
            if at < 0:  # another kind, or ranges the fast paths leave to Python (its errors too)
                body = self.sess._leaf_code(key)
                at = len(self.code)
                self.code.extend(body)
        self.offsets.put(cid, at)
        return at

    cdef Py_ssize_t char_class(self, object ranges) except -2:
        """A character class's code (``encode._utf8_code``) written in place, without the
        Python of ``ir.normalize_ranges`` and ``utf8.without_surrogates`` and the tuple between
        (~10 us a JSON string's class, each compile with the caches cleared); -1 for ranges that
        are not a tuple of pairs of ints that fit the code (left to ``Session._leaf_code``)."""
        cdef Range *r = NULL
        cdef Py_ssize_t n = parse_ranges(ranges, &r), i, at, k, count
        if n < 0:
            return -1
        try:
            for i in range(n):
                if not (0 <= r[i].lo <= 0xFFFFFFFF and 0 <= r[i].hi <= 0xFFFFFFFF):
                    return -1
            at = self.grow(3 + 2 * n)
            write_ranges(self.code.data.as_uints + at, UTF8, r, n)
            k = normalize_ranges(r, n)
            count = utf8_seqs(r, k, r + n, self.code)
            self.code.data.as_uints[at + 2 + 2 * n] = <unsigned int>count
            return at
        finally:
            PyMem_Free(r)

    cdef Py_ssize_t byte_class(self, object ranges) except -2:
        """A byte class's code (``Session._leaf_code``) written in place; -1 for ranges that are
        not a tuple of pairs of ints within 0-255 (left to ``_leaf_code``, which raises)."""
        cdef Range *r = NULL
        cdef Py_ssize_t n = parse_ranges(ranges, &r), i, at
        if n < 0:
            return -1
        try:
            for i in range(n):
                if not (0 <= r[i].lo <= r[i].hi <= 255):
                    return -1
            at = self.grow(2 + 2 * n)
            write_ranges(self.code.data.as_uints + at, BYTES, r, n)
            return at
        finally:
            PyMem_Free(r)


# ---------------------------------------------------------------- character classes


cdef int utf8_encode(long cp, unsigned char *out) noexcept:
    """The UTF-8 bytes of ``cp`` (surrogates encoded as any other 3-byte value)."""
    if cp < 0x80:
        out[0] = <unsigned char>cp
        return 1
    if cp < 0x800:
        out[0] = <unsigned char>(0xC0 | (cp >> 6))
        out[1] = <unsigned char>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <unsigned char>(0xE0 | (cp >> 12))
        out[1] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <unsigned char>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <unsigned char>(0xF0 | (cp >> 18))
    out[1] = <unsigned char>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <unsigned char>(0x80 | (cp & 0x3F))
    return 4


cdef int put(array out, const unsigned int *vals, Py_ssize_t m) except -1:
    """Append ``vals[:m]`` to ``out``."""
    cdef Py_ssize_t at = len(out), i
    resize_smart(out, at + m)
    cdef unsigned int *p = out.data.as_uints + at
    for i in range(m):
        p[i] = vals[i]
    return 0


cdef int utf8_split(long lo, long hi, array out, Py_ssize_t *count) except -1:
    """``utf8._split``: the byte-range sequences of the code points lo..hi (no surrogates),
    each appended to ``out`` as its length and then its (low, high) byte pairs."""
    cdef long top, m
    cdef int i, n
    cdef unsigned char a[4]
    cdef unsigned char b[4]
    cdef unsigned int seq[9]
    if lo > hi:
        return 0
    for top in (0x7F, 0x7FF, 0xFFFF):
        if lo <= top < hi:
            utf8_split(lo, top, out, count)
            utf8_split(top + 1, hi, out, count)
            return 0
    if hi <= 0x7F:
        seq[0] = 1
        seq[1] = <unsigned int>lo
        seq[2] = <unsigned int>hi
        put(out, seq, 3)
        count[0] += 1
        return 0
    n = utf8_encode(lo, a)
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                utf8_split(lo, lo | m, out, count)
                utf8_split((lo | m) + 1, hi, out, count)
                return 0
            if hi & m != m:
                utf8_split(lo, (hi & ~m) - 1, out, count)
                utf8_split(hi & ~m, hi, out, count)
                return 0
    utf8_encode(hi, b)
    seq[0] = <unsigned int>n
    for i in range(n):
        seq[1 + 2 * i] = a[i]
        seq[2 + 2 * i] = b[i]
    put(out, seq, 1 + 2 * n)
    count[0] += 1
    return 0


cdef struct Range:
    long long lo, hi


cdef int range_order(const void *x, const void *y) noexcept nogil:
    cdef const Range *a = <const Range *>x
    cdef const Range *b = <const Range *>y
    if a.lo != b.lo:
        return -1 if a.lo < b.lo else 1
    if a.hi != b.hi:
        return -1 if a.hi < b.hi else 1
    return 0


cdef inline void write_ranges(unsigned int *out, unsigned int kind, const Range *r, Py_ssize_t n) noexcept:
    """A class's code head at ``out``: its kind, ``n``, then the ``n`` pairs as given."""
    cdef Py_ssize_t i
    out[0] = kind
    out[1] = <unsigned int>n
    for i in range(n):
        out[2 + 2 * i] = <unsigned int>r[i].lo
        out[3 + 2 * i] = <unsigned int>r[i].hi


cdef Py_ssize_t parse_ranges(object ranges, Range **out) except -2:
    """``ranges`` as C pairs in ``*out`` (room for 3 times as many: the caller's scratch; the
    caller frees it), their number; -1 (nothing allocated) unless ``ranges`` is a tuple of
    tuples of two ints within +-2**62, which the Python paths take (their errors included)."""
    cdef Py_ssize_t n, i
    cdef Range *r
    cdef tuple t = None
    cdef int ovf
    cdef long long lo, hi
    if type(ranges) is not tuple:
        return -1
    t = <tuple>ranges
    n = len(t)
    for i in range(n):
        x = t[i]
        if type(x) is not tuple or len(<tuple>x) != 2:
            return -1
        if not PyLong_CheckExact((<tuple>x)[0]) or not PyLong_CheckExact((<tuple>x)[1]):
            return -1
    r = <Range *>PyMem_Malloc((3 * n + 1) * sizeof(Range))
    if r == NULL:
        raise MemoryError
    for i in range(n):
        x = t[i]
        lo = PyLong_AsLongLongAndOverflow((<tuple>x)[0], &ovf)
        if ovf == 0:
            hi = PyLong_AsLongLongAndOverflow((<tuple>x)[1], &ovf)
        if ovf != 0 or not (-(1LL << 62) <= lo <= (1LL << 62)) or not (-(1LL << 62) <= hi <= (1LL << 62)):
            PyMem_Free(r)
            return -1
        r[i].lo = lo
        r[i].hi = hi
    out[0] = r
    return n


cdef Py_ssize_t normalize_ranges(Range *r, Py_ssize_t n) noexcept:
    """``ir.normalize_ranges`` (to U+10FFFF) in place: the ranges kept, clipped, sorted and
    merged; their number."""
    cdef Py_ssize_t i, m = 0, k = 0
    for i in range(n):
        if r[i].lo <= r[i].hi and r[i].hi >= 0 and r[i].lo <= MAX_CODE_POINT:
            r[m].lo = r[i].lo if r[i].lo > 0 else 0
            r[m].hi = r[i].hi if r[i].hi < MAX_CODE_POINT else MAX_CODE_POINT
            m += 1
    if m > 1:
        qsort(r, m, sizeof(Range), range_order)
    for i in range(m):
        if k and r[i].lo <= r[k - 1].hi + 1:
            if r[i].hi > r[k - 1].hi:
                r[k - 1].hi = r[i].hi
        else:
            r[k] = r[i]
            k += 1
    return k


cdef Py_ssize_t utf8_seqs(const Range *norm, Py_ssize_t k, Range *scratch, array out) except -1:
    """The UTF-8 byte sequences of the normalized ranges ``norm[:k]`` appended to ``out`` (each
    its length, then its pairs), as ``utf8.byte_sequences``; their number.  ``scratch``: room
    for 2k ranges."""
    cdef Py_ssize_t i, w = 0, count = 0
    cdef unsigned int seq[3]
    if k and norm[k - 1].hi <= 0x7F:  # ASCII only: one byte each (no wraparound)
        seq[0] = 1
        for i in range(k):
            seq[1] = <unsigned int>norm[i].lo
            seq[2] = <unsigned int>norm[i].hi
            put(out, seq, 3)
        return k
    for i in range(k):  # utf8.without_surrogates (what it normalizes again is normal already)
        if norm[i].hi < SURROGATE_LO or norm[i].lo > SURROGATE_HI:
            scratch[w] = norm[i]
            w += 1
            continue
        if norm[i].lo < SURROGATE_LO:
            scratch[w].lo = norm[i].lo
            scratch[w].hi = SURROGATE_LO - 1
            w += 1
        if norm[i].hi > SURROGATE_HI:
            scratch[w].lo = SURROGATE_HI + 1
            scratch[w].hi = norm[i].hi
            w += 1
    for i in range(w):
        utf8_split(<long>scratch[i].lo, <long>scratch[i].hi, out, &count)
    return count


def utf8_code(tuple ranges):
    """``encode._utf8_code`` uncached: a character class's ranges, then its UTF-8 byte
    sequences (``utf8.byte_sequences``), as CM_IR_UTF8 code."""
    cdef Range *r = NULL
    cdef Py_ssize_t n = parse_ranges(ranges, &r), count
    cdef array seqs
    if n < 0:
        return utf8_code_py(ranges)
    try:
        seqs = array("I")
        count = utf8_seqs(r, normalize_ranges(r, n), r + n, seqs)
    finally:
        PyMem_Free(r)
    cdef list out = [UTF8, n]
    for lo, hi in ranges:
        out += (lo, hi)
    out.append(count)
    out += seqs
    return tuple(out)


cdef int utf8_split_py(long lo, long hi, list out) except -1:
    """``utf8_split`` into a list (``utf8_code_py``'s)."""
    cdef array got = array("I")
    cdef Py_ssize_t count = 0
    utf8_split(lo, hi, got, &count)
    out += got
    return 0


def utf8_code_py(tuple ranges):
    """``utf8_code`` of ranges that are not pairs of small ints, through the Python of
    ``ir.normalize_ranges`` and ``utf8.without_surrogates`` (which raise what they raise)."""
    cdef list out = [UTF8, len(ranges)], seqs = []
    cdef Py_ssize_t count = 0
    for lo, hi in ranges:
        out += (lo, hi)
    norm = ir.normalize_ranges(ranges)
    if norm and norm[len(norm) - 1][1] <= 0x7F:  # ASCII only: one byte each (no wraparound)
        for lo, hi in norm:
            seqs += (1, lo, hi)
            count += 1
    else:
        for lo, hi in without_surrogates(norm):
            utf8_split_py(lo, hi, seqs)
        i = 0
        while i < len(seqs):  # count the sequences: each is its length, then its pairs
            i += 1 + 2 * <Py_ssize_t>seqs[i]
            count += 1
    out.append(count)
    out += seqs
    return tuple(out)


# -- the plan of components.rule_dfas


cdef list sorted_calls(object calls):
    """``sorted(calls)``: a frozenset of rule names or a node's uses (a dict by rule name; most
    hold none or one) as a new list, a few names sorted in place (``sort_names``), or the
    shared empty one (read only); a list is ``call_graph``'s, sorted already (read only)."""
    cdef Py_ssize_t n, pos = 0
    cdef list out
    cdef PyObject *k
    cdef PyObject *v
    if type(calls) is list:
        return <list>calls
    if type(calls) is dict:
        n = len(<dict>calls)
        if n == 0:
            return NO_CALLEES
        out = PyList_New(n)
        n = 0
        while PyDict_Next(<dict>calls, &pos, &k, &v):
            Py_INCREF(<object>k)
            PyList_SET_ITEM(out, n, <object>k)
            n += 1
        sort_names(out, n)
        return out
    if type(calls) is not frozenset:
        return sorted(calls)
    n = len(<frozenset>calls)
    if n == 0:
        return NO_CALLEES
    out = PyList_New(n)
    n = 0
    for x in <frozenset>calls:
        Py_INCREF(x)
        PyList_SET_ITEM(out, n, x)
        n += 1
    if n > 1:
        sort_names(out, n)
    return out


cdef struct Numbered:
    # What ``tarjan`` records for ``plan`` by Tarjan number, so the plan reads numbers where it
    # looked each member and callee up by name (``num[name]``, ~0.1 K instructions a probe,
    # several a component) and each rule's call set (``graph[m]``, ``m in calls``)
    Py_ssize_t *order  # every rule's number, in the order the components list their members
    Py_ssize_t *edge_at  # per rule: where its callees' numbers start in ``edges``
    Py_ssize_t *edges  # the callees' numbers, each rule's in its sorted callees' order
    unsigned char *loop  # per rule: it calls itself
    Py_ssize_t n_order, n_edges, edges_cap


cdef int numbered_init(Numbered *nb, Py_ssize_t n) except -1:
    """Room for ``n`` rules (the edges grow as they are met)."""
    nb.n_order = nb.n_edges = 0
    nb.edges_cap = 2 * n + 8
    nb.order = <Py_ssize_t *>PyMem_Malloc((2 * n + 1) * sizeof(Py_ssize_t))
    nb.edges = <Py_ssize_t *>PyMem_Malloc(nb.edges_cap * sizeof(Py_ssize_t))
    nb.loop = <unsigned char *>PyMem_Calloc(n + 1, 1)
    if nb.order == NULL or nb.edges == NULL or nb.loop == NULL:
        raise MemoryError
    nb.edge_at = nb.order + n
    return 0


cdef void numbered_free(Numbered *nb) noexcept:
    PyMem_Free(nb.order)
    PyMem_Free(nb.edges)
    PyMem_Free(nb.loop)
    nb.order = nb.edges = nb.edge_at = NULL
    nb.loop = NULL


cdef int grow_edges(Py_ssize_t **edges, Py_ssize_t *cap, Py_ssize_t need) except -1:
    """Room for ``need`` edges in ``edges[0]`` (``cap[0]`` of them now), doubled as needed."""
    cdef Py_ssize_t *e
    if need > cap[0]:
        e = <Py_ssize_t *>PyMem_Realloc(edges[0], 2 * need * sizeof(Py_ssize_t))
        if e == NULL:
            raise MemoryError
        edges[0] = e
        cap[0] = 2 * need
    return 0


cdef int numbered_reserve(Numbered *nb, Py_ssize_t w, Py_ssize_t n) except -1:
    """Slots for the ``n`` callees of rule ``w`` (numbered just now)."""
    if nb.n_edges + n > nb.edges_cap:
        grow_edges(&nb.edges, &nb.edges_cap, nb.n_edges + n)
    nb.edge_at[w] = nb.n_edges
    nb.n_edges += n
    return 0


cdef class Calls:
    """A call graph by name index, which Tarjan's walk (``tarjan``) and the plan read as arrays
    where they looked each rule and callee up by name (a dict probe a rule and an edge,
    ~0.1-0.3 K instructions each): each rule's callees' indices in its sorted list's order,
    and each rule's callee list and body id.  ``call_graph_ids`` fills one over the session's
    names (``sess.name_idx``); ``calls_of`` makes one from a graph by name.
    ``ok``: every callee of every rule has an index (else ``plan`` numbers the graph itself)."""
    cdef Py_ssize_t n, n_edges, edges_cap
    cdef Py_ssize_t *at  # per name index: where its callees' indices start in ``edges``
    cdef Py_ssize_t *cnt  # per name index: its callees, -1 for a name that is no rule
    cdef Py_ssize_t *edges
    # per name index: its uses by the rules, capped at 2 (``call_graph_ids(sess, rules, False)``:
    # counted here and no uses dict made, a probe a callee; else not counted, all 0)
    cdef Py_ssize_t *used
    cdef list lists, cids, names  # per name index: the rule's callee list and body id (None: no rule)
    cdef dict index  # name -> its index
    cdef bint ok

    def __cinit__(self):
        self.at = self.cnt = self.edges = self.used = NULL

    def __dealloc__(self):
        PyMem_Free(self.at)
        PyMem_Free(self.edges)

    cdef int setup(self, list names, dict index, Py_ssize_t room=0) except -1:
        """Indices for ``names`` (and ``room`` more, added as met), none a rule yet."""
        cdef Py_ssize_t i, n = len(names) + room
        self.n = len(names)
        self.names = names
        self.index = index
        self.at = <Py_ssize_t *>PyMem_Malloc((3 * n + 1) * sizeof(Py_ssize_t))
        self.edges_cap = 2 * n + 8
        self.edges = <Py_ssize_t *>PyMem_Malloc(self.edges_cap * sizeof(Py_ssize_t))
        if self.at == NULL or self.edges == NULL:
            raise MemoryError
        self.cnt = self.at + n
        self.used = self.at + 2 * n
        for i in range(n):
            self.cnt[i] = -1
            self.used[i] = 0
        self.lists = [None] * self.n
        self.cids = [None] * self.n
        self.ok = True
        return 0

    cdef int reserve(self, Py_ssize_t k) except -1:
        if self.n_edges + k > self.edges_cap:
            grow_edges(&self.edges, &self.edges_cap, self.n_edges + k)
        return 0


cdef Calls calls_of(dict graph, bint drop):
    """``graph`` (rule -> the rules it calls, a sorted list or any set) as :class:`Calls`: the
    rules indexed in the graph's order, each one's callees sorted (``sorted_calls``).  A
    callee that is no rule of the graph is dropped with ``drop`` (``sccs_all``), else given an
    index after the rules' as it is met, as a name that is no rule (``tarjan`` raises
    KeyError if it reaches it, as ``graph[name]`` did)."""
    cdef Calls calls = Calls()
    cdef Py_ssize_t i, j, k, e, n = len(graph), room = 0, pos = 0
    cdef list names = PyList_New(n), lists = PyList_New(n), kl
    cdef dict index = {}
    cdef PyObject *got
    cdef PyObject *pk
    cdef PyObject *pv
    i = 0
    while PyDict_Next(graph, &pos, &pk, &pv):
        index[<object>pk] = i
        Py_INCREF(<object>pk)
        PyList_SET_ITEM(names, i, <object>pk)
        kl = sorted_calls(<object>pv)
        Py_INCREF(kl)
        PyList_SET_ITEM(lists, i, kl)
        room += len(kl)
        i += 1
    calls.setup(names, index, 0 if drop else room)
    calls.lists = lists
    for i in range(n):
        kl = <list>lists[i]
        k = len(kl)
        calls.reserve(k)
        e = calls.at[i] = calls.n_edges
        for j in range(k):
            c = kl[j]
            got = PyDict_GetItemWithError(index, c)
            if got != NULL:
                calls.edges[e] = PyLong_AsSsize_t(<object>got)
            elif drop:
                continue
            else:
                calls.ok = False
                calls.edges[e] = len(names)
                index[c] = len(names)
                names.append(c)
            e += 1
        calls.cnt[i] = e - calls.at[i]
        calls.n_edges = e
    calls.n = len(names)
    return calls


cdef list tarjan(Calls calls, Py_ssize_t root, Py_ssize_t *num, Py_ssize_t *idx, Py_ssize_t *count, Numbered *nb,
                 Py_ssize_t *scratch=NULL):
    """``graph.sccs(graph, root)`` over ``calls`` (``root``: a name index): Tarjan's
    components of the part reachable from ``root``, callees before callers, children visited
    in their sorted lists' order (the same components in the same order), each a list of
    names.  Rules are numbered as they are reached (their Tarjan index, from ``count[0]``
    on, which is moved past them), and the index, low link, stack and path are C arrays over
    those numbers.  Fills ``num`` (per name index its number, or -1: the rules that an earlier
    call numbered are skipped, their components complete) and ``idx`` (per number its name
    index).  A name that is no rule raises KeyError when reached.  With ``nb`` (``plan``'s,
    numbers from 0): each component's members' numbers, each rule's callees' numbers and
    whether it calls itself, as they are met (``Numbered``).  ``scratch``: room for
    ``5 * (calls.n + 1)`` numbers, the caller's (``sccs_all``: one for all its roots), or
    None (then allocated here)."""
    cdef list out = [], comp, names = calls.names
    cdef Py_ssize_t cap = calls.n + 1, first = count[0], top, sp, v, w, x, r, child
    cdef Py_ssize_t n_num = first
    if nb != NULL and first != 0:
        raise ValueError("tarjan: numbers for the plan start at 0")
    cdef Py_ssize_t *mem = scratch
    if mem == NULL:
        mem = <Py_ssize_t *>PyMem_Malloc(5 * cap * sizeof(Py_ssize_t))
        if mem == NULL:
            raise MemoryError
    cdef Py_ssize_t *low = mem  # per rule: its low link
    cdef Py_ssize_t *on = mem + cap  # per rule: on the stack
    cdef Py_ssize_t *stk = mem + 2 * cap  # Tarjan's stack
    cdef Py_ssize_t *path = mem + 3 * cap  # the rules on the path from the root
    cdef Py_ssize_t *pos = mem + 4 * cap  # per rule on the path: its next callee
    try:
        if calls.cnt[root] < 0:
            raise KeyError(names[root])
        if nb != NULL:
            numbered_reserve(nb, first, calls.cnt[root])
        num[root] = first
        idx[first] = root
        low[first] = first
        on[first] = 1
        stk[0] = first
        path[0] = first
        pos[0] = 0
        n_num += 1
        sp = top = 1
        while top:
            v = path[top - 1]
            r = idx[v]
            if pos[top - 1] < calls.cnt[r]:
                child = calls.edges[calls.at[r] + pos[top - 1]]
                pos[top - 1] += 1
                w = num[child]
                if w < 0:
                    if calls.cnt[child] < 0:  # a rule not in the graph raises, as sccs
                        raise KeyError(names[child])
                    w = n_num
                    n_num += 1
                    if nb != NULL:
                        nb.edges[nb.edge_at[v] + pos[top - 1] - 1] = w
                        numbered_reserve(nb, w, calls.cnt[child])
                    num[child] = w
                    idx[w] = child
                    low[w] = w
                    on[w] = 1
                    stk[sp] = w
                    sp += 1
                    path[top] = w
                    pos[top] = 0
                    top += 1
                else:  # w < first: numbered by an earlier call
                    if nb != NULL:
                        nb.edges[nb.edge_at[v] + pos[top - 1] - 1] = w
                        if w == v:
                            nb.loop[v] = 1
                    if w >= first and on[w] and w < low[v]:
                        low[v] = w
                continue
            top -= 1
            if top:
                x = path[top - 1]
                if low[v] < low[x]:
                    low[x] = low[v]
            if low[v] == v:
                comp = []
                while True:
                    sp -= 1
                    x = stk[sp]
                    on[x] = 0
                    comp.append(names[idx[x]])
                    if nb != NULL:
                        nb.order[nb.n_order] = x
                        nb.n_order += 1
                    if x == v:
                        break
                out.append(comp)
    finally:
        if scratch == NULL:
            PyMem_Free(mem)
        count[0] = n_num
    return out


def sccs_all(dict graph):
    """``graph.sccs_all_py(graph)``: Tarjan's components of the whole graph, callees before
    callers, each root in the graph's order, children in sorted order (the same components in
    the same order), edges to rules outside the graph dropped."""
    cdef Calls calls = calls_of(graph, True)
    cdef list out = [], comps
    cdef Py_ssize_t i, j, count = 0, n = calls.n
    # per name index its number, per number its name index, and tarjan's scratch, for every root
    cdef Py_ssize_t *num = <Py_ssize_t *>PyMem_Malloc(7 * (n + 1) * sizeof(Py_ssize_t))
    if num == NULL:
        raise MemoryError
    cdef Py_ssize_t *idx = num + n + 1
    try:
        for i in range(n):
            num[i] = -1
        for i in range(n):
            if num[i] < 0:
                comps = tarjan(calls, i, num, idx, &count, NULL, num + 2 * (n + 1))
                for j in range(len(comps)):
                    out.append(comps[j])
    finally:
        PyMem_Free(num)
    return out


cdef class TailOnly:
    """``graph.tail_only_dag``: are all references to ``members`` below an interned node in
    tail position?  Each shared subtree is visited once a position."""
    cdef list keys
    cdef object refs, members
    cdef dict memo
    # The interner's facts when ``refs`` is its ``Lazy`` rule sets: a node's rules are then
    # read as the keys of its uses (``uses_of``), each member probed there, and a node that
    # refers to no rule is told by its flag -- where the rule set a node (made when first
    # asked: a frozenset) and its ``isdisjoint``, a method call, cost ~1.5 K instructions a
    # node visited
    cdef Facts facts

    def __init__(self, refs, list keys, members):
        self.refs = refs
        self.keys = keys
        self.members = members
        self.memo = {}
        self.facts = (<Lazy>refs).facts if type(refs) is Lazy and not (<Lazy>refs).uses else None

    cdef bint disjoint(self, Py_ssize_t c) except -1:
        """Does node ``c`` refer to no member (``refs[c].isdisjoint(members)``)?"""
        cdef Facts f = self.facts
        cdef dict u
        if f is None:
            return (<frozenset>self.refs[c]).isdisjoint(self.members)
        if f.in_c(c) and not f.fa[c].has_refs:
            return True
        u = <dict>f.uses_of(c)
        if len(u) < len(self.members):  # (a component of many rules)
            for m in u:
                if m in self.members:
                    return False
            return True
        for m in self.members:
            if PyDict_Contains(u, m) == 1:
                return False
        return True

    cdef int walk(self, Py_ssize_t c, bint tail, int depth) except -1:
        cdef tuple key, kids
        cdef int kind, got
        cdef Py_ssize_t i, last
        if self.disjoint(c):
            return 1
        if depth > MAX_DEPTH:
            raise Deep
        memo_key = (c, tail)
        g = self.memo.get(memo_key)
        if g is not None:
            return <int>g
        key = <tuple>self.keys[c]
        kind = key[0]
        if kind == REF:  # a member (refs[c] meets members)
            got = tail
        elif kind == SEQ:
            kids = key[1]
            last = len(kids) - 1
            got = 1
            for i in range(last + 1):
                if not self.walk(kids[i], tail and i == last, depth + 1):
                    got = 0
                    break
        elif kind == ALT:
            kids = key[1]
            got = 1
            for i in range(len(kids)):
                if not self.walk(kids[i], tail, depth + 1):
                    got = 0
                    break
        elif kind == REPEAT:
            got = self.walk(key[1], False, depth + 1)
        else:  # a lookahead's marker: tail_only does not count it as a reference
            got = 1
        self.memo[memo_key] = got
        return got


cdef bint tail_only(sess, refs, list keys, object cid, members) except -1:
    """``graph.tail_only_dag(sess, cid, members)``; past the recursion cap, that function."""
    try:
        return TailOnly(refs, keys, members).walk(cid, True, 0)
    except Deep:
        from .graph import tail_only_dag

        return tail_only_dag(sess, cid, members)


def plan(sess, dict graph, dict cids, uses, start, outlined, shared, single, lim, Calls by_idx=None):
    """``components._plan`` after ``call_graph``: the components reachable from ``start``,
    callees first, each as (members, key id, what compile_components takes for it).
    ``graph``: the rules each rule calls; ``uses``: each rule's uses, capped at 2 (None: read
    from ``by_idx``, which counted them: ``call_graph_ids(sess, rules, False)``);
    ``shared``, ``single``: the inline caps; ``lim``: the limits' key id (or the limits);
    ``by_idx``: the same graph by name index (``call_graph_ids``), read instead of the dicts
    (Tarjan's walk over arrays, each member's body id, uses and name index by number); without
    it, or where a callee or the start has no index, the plan numbers ``graph`` itself
    (``calls_of``) and reads each member's body id and name index by name.

    A rule used once, not recursive, regular and not a literal set is marked to expand
    (the last item of what compile_components takes): C builds it inside its caller's NFA,
    not on its own first (csrc/components.c), unless its caller is cached and does not
    call it (then it is not needed at all).

    A JSON schema's components are mostly one small rule each (~35 a schema), so what a
    component costs besides its body's code is kept to its key tuple, filled in place, its
    spec, and dict reads: the cache's lock is taken at the first key not seen yet and held
    to the end (not twice a component), the deadline read every 16 components, and a
    rule that does not call itself is given no member set."""
    cdef object cache = sess.cache
    cdef list out = [], comp, comps, callees, spec_members, keys = sess.interner.keys
    cdef object refs = sess.interner.refs
    cdef dict name_idx = sess.name_idx
    cdef Offsets offsets = sess.offsets
    cdef Emitting em = Emitting(sess)
    cdef object gen = sess.gen, m, c, calls, members, cap, key, cached, off, cid, u
    cdef bint recursive, regular, locked = False
    cdef Py_ssize_t k, n_comp, n_callees, at, i, w, x, n_rules, done = 0
    cdef Py_ssize_t depth
    cdef object lock_release = None
    cdef dict key_ids = None, components = None
    cdef tuple whole
    cdef PyObject *got
    # By Tarjan's number (every rule reached has one): each rule's key id, inline cap, body id
    # and name index, and whether it may expand, where dicts by name cost ~1 K instructions a
    # component more (a dict read or write for each member and callee, several times: 0.9 %
    # of a median JSON schema's compile)
    cdef list key_by, cap_by, cid_by, idx_by, callee_idx  # cid_by: its body's id; idx_by: its name index
    cdef Py_ssize_t *mem = NULL
    cdef Py_ssize_t *once  # the plan index of a rule that may expand in its caller, else -1
    cdef Py_ssize_t *nest  # a rule marked or left to expand: the expansions nested in it, itself included
    cdef Py_ssize_t *callee_num  # the current component's callees' numbers
    cdef Py_ssize_t *member_num  # the current component's members' numbers
    cdef Numbered nb  # by Tarjan: the members' and callees' numbers (no lookup by name)
    cdef Py_ssize_t at_order = 0, first_w
    cdef bint by_number  # the callees' numbers are tarjan's (a component of one rule, no self call)
    cdef Py_ssize_t *tnum = NULL  # per index of by_idx its Tarjan number, or -1
    cdef Py_ssize_t *w_idx = NULL  # per Tarjan number its index in by_idx
    cdef list lists_by, cids_by = None
    cdef dict index_of
    cdef Calls counted = by_idx  # the uses by name index where ``uses`` is None
    cdef bint by_name = by_idx is None or not by_idx.ok or PyDict_Contains(name_idx, start) != 1
    nb.order = nb.edges = nb.edge_at = NULL
    nb.loop = NULL
    if by_name:  # a callee or the start with no index: the graph numbered here
        by_idx = calls_of(graph, False)
    if cache is not None:  # AutomatonCache.key_id and get, without a Python call a component
        key_ids = cache._key_ids
        components = cache._components
    try:
        numbered_init(&nb, len(graph) + 1)
        tnum = <Py_ssize_t *>PyMem_Malloc(2 * (by_idx.n + 1) * sizeof(Py_ssize_t))
        if tnum == NULL:
            raise MemoryError
        w_idx = tnum + by_idx.n + 1
        for i in range(by_idx.n):
            tnum[i] = -1
        index_of = by_idx.index
        n_rules = 0
        comps = tarjan(by_idx, <Py_ssize_t>index_of[start], tnum, w_idx, &n_rules, &nb)
        lists_by = by_idx.lists
        if not by_name:
            cids_by = by_idx.cids
        key_by = [None] * n_rules
        cap_by = [None] * n_rules
        cid_by = [None] * n_rules
        idx_by = [None] * n_rules
        mem = <Py_ssize_t *>PyMem_Malloc((4 * n_rules + 1) * sizeof(Py_ssize_t))
        if mem == NULL:
            raise MemoryError
        once = mem
        nest = mem + n_rules
        callee_num = mem + 2 * n_rules
        member_num = mem + 3 * n_rules
        for i in range(n_rules):
            once[i] = -1
        for comp in comps:
            n_comp = len(comp)
            m = comp[0]
            first_w = at_order  # the members' numbers: nb.order[first_w:], as comp lists them
            at_order += n_comp
            by_number = False
            if n_comp == 1:  # most components: one rule
                w = nb.order[first_w]
                recursive = nb.loop[w]  # m in graph[m]
                if recursive:
                    members = {m}
                    regular = tail_only(sess, refs, keys, cids[m], members)
                    calls = lists_by[w_idx[w]]
                    # call_graph's sorted list: the others in its order (no set made and sorted)
                    callees = [c for c in <list>calls if c != m]
                else:
                    regular = True
                    callees = <list>lists_by[w_idx[w]]  # sorted(graph[m]) (or call_graph's list itself)
                    by_number = True
            else:
                members = set(comp)
                recursive = True
                regular = True
                for m in comp:
                    if not tail_only(sess, refs, keys, cids[m], members):
                        regular = False
                        break
                callees = sorted({c for m in comp for c in graph[m]} - members)
            if done & 15 == 0:
                deadline_check("rule loop")
            done += 1
            n_callees = len(callees)
            if by_number:  # tarjan's numbers of the callees, in their list's order
                for i in range(n_callees):
                    callee_num[i] = nb.edges[nb.edge_at[w] + i]
            else:
                for i in range(n_callees):  # reached from a member: numbered, in an earlier component
                    callee_num[i] = tnum[<Py_ssize_t>index_of[callees[i]]]
            # the key: (generation, limits, right-linear, members), each member's (name, id, cap),
            # then each callee's (name, key, cap), flat (equal keys, equal components); a
            # member's name is None in a component of one rule that does not call itself
            whole = None
            if cache is not None:
                whole = new_tuple(4 + 3 * (n_comp + n_callees))
                set_item(whole, 0, gen)
                set_item(whole, 1, lim)
                set_item(whole, 2, recursive and regular)
                set_item(whole, 3, n_comp)
            u = 0
            at = 4
            for i in range(n_comp):
                # Copying a rule into every caller makes tokens that span it context-independent,
                # but copies of copies grow exponentially (e.g. one rule per subset of object keys):
                # big automata are copied only into a single caller.
                m = comp[i]
                w = member_num[i] = nb.order[first_w + i]
                if not by_name:
                    x = w_idx[w]
                    cid = cid_by[w] = cids_by[x]
                    idx_by[w] = x
                    u = uses.get(m, 0) if uses is not None else counted.used[x]
                else:
                    cid = cid_by[w] = cids[m]
                    x = name_idx[m]
                    idx_by[w] = x
                    u = uses.get(m, 0) if uses is not None else counted.used[x] if 0 <= x < counted.n else 0
                cap = single if u <= 1 else shared
                cap = cap if regular and m not in outlined else 0
                cap_by[w] = cap
                if whole is not None:
                    # one rule that calls no member: its automaton is the same whatever the
                    # rule is called (labels name callees only), so its key has no name and a
                    # schema's plain string finds the prelude's `json-string`; the start rule's
                    # keeps it (the prelude does not pin a start: cache.pin's filter)
                    set_item(whole, at, m if recursive or n_comp > 1 or m == start else None)
                    set_item(whole, at + 1, cid)
                    set_item(whole, at + 2, cap)
                    at += 3
            if whole is not None:
                for i in range(n_callees):
                    w = callee_num[i]
                    set_item(whole, at, callees[i])
                    set_item(whole, at + 1, key_by[w])
                    set_item(whole, at + 2, cap_by[w])
                    at += 3
                untrack(whole)
                # once the lock is held (a key not seen yet was met), a key is looked up and, if
                # new, inserted in one probe: the tuple hashed once, where a lookup then an insert
                # hashed it twice (a cold compile's components are mostly new)
                got = NULL if locked else PyDict_GetItemWithError(key_ids, whole)
                if got != NULL:
                    key = <object>got
                else:
                    if not locked:  # held from here to the end of the plan
                        cache._lock.acquire()
                        lock_release = cache._lock.release
                        locked = True
                        key_ids = cache._key_ids  # as key_id reads them, under the lock
                        components = cache._components
                    key = <object>PyDict_SetDefault(key_ids, whole, len(key_ids))
                got = PyDict_GetItemWithError(components, key)
                cached = None if got == NULL else <object>got
            else:
                key = len(out)
                cached = None
            # the members' bodies as code: not for a cached component (C reads only its DFAs, and
            # the prelude's bodies, a JSON value's, cost a cold compile their emission every time)
            spec_members = []
            for i in range(n_comp):
                w = member_num[i]
                key_by[w] = key
                cid = cid_by[w]
                if cached is not None:
                    off = 0
                else:
                    k = offsets.of(cid)
                    if k >= 0:
                        off = k
                    else:
                        try:
                            off = em.rec(cid, 0)
                        except Deep:  # the rest without recursion (what is done is kept)
                            off = sess._emit_iter(cid)
                spec_members.append(untrack((idx_by[w], off, cap_by[w])))
            depth = 0
            for i in range(n_callees):
                w = callee_num[i]
                k = once[w]
                once[w] = -1
                if k >= 0 and (cached is None or not any(callees[i] in d.names for d in cached)):
                    item = <tuple>out[k]
                    spec = <tuple>item[2]  # (its spec's first four, True): no slice and unpacking
                    out[k] = (item[0], item[1], (spec[0], spec[1], spec[2], spec[3], True))
                    if nest[w] > depth:
                        depth = nest[w]
            m = comp[0]
            w = member_num[0]
            if (
                depth < MAX_NEST
                and n_comp == 1
                and not recursive
                and cached is None
                and u == 1
                and cap_by[w] > 0
                and m != start
                and (<tuple>keys[cid])[0] != WORDS
            ):
                once[w] = len(out)
                nest[w] = depth + 1
            callee_idx = [idx_by[callee_num[i]] for i in range(n_callees)]
            out.append((comp, key, (spec_members, callee_idx, recursive and regular, cached, False)))
    finally:
        PyMem_Free(mem)
        PyMem_Free(tnum)
        numbered_free(&nb)
        if locked:
            lock_release()
    return out


def collect(list plan, list args, list built, list ordered, cache, dfa_type, gen=None):
    """The rest of ``components.rule_dfas``: every member's DFA (a ``dfa_type``) and its
    labels' values (an ``array('I')``), by rule name, from what compile_components returned
    (None for a cached component: the DFAs and values given in ``args``); built components
    go to ``cache`` if it is still at generation ``gen``.  ``ordered``: the session's names in
    label-value order."""
    cdef dict out = {}
    cdef list members, got, dfas, names, new = []
    cdef tuple pair
    cdef array labs, tmpl = array("I")
    cdef Py_ssize_t k, i, j, n
    cdef unsigned int *p
    cdef bint plain_dfa = dfa_type is DFA
    for k in range(len(plan)):
        members, key, spec = plan[k]
        got = built[k]
        if got is None and spec[3] is None:  # expanded in its caller: no DFA of its own
            continue
        if got is None:  # cached: the DFAs and label values given
            for m, dfa, given in zip(members, spec[3], args[k][3]):
                out[m] = (dfa, given[1])
            continue
        if len(got) != len(members):
            raise ValueError("compile_components: one DFA per member")
        dfas = []
        for i in range(len(members)):
            pair = got[i]
            values = <list>pair[1]
            n = len(values)
            names = [None] * n
            labs = clone(tmpl, n, False)
            p = labs.data.as_uints
            for j in range(n):
                v = values[j]
                names[j] = ordered[v]
                p[j] = v
            if plain_dfa:  # DFA(handle, names) without its Python __init__ (a frame a DFA)
                dfa = PyType_GenericAlloc(<type>DFA, 0)
                dfa.handle = pair[0]
                dfa.names = names
                dfa._states = None
            else:
                dfa = dfa_type(pair[0], names)
            out[members[i]] = (dfa, labs)
            dfas.append(dfa)
        new.append((key, dfas))
    if cache is not None and new:
        if type(cache).put_all is AutomatonCache_put_all:
            put_all(cache, new, gen)
        else:
            cache.put_all(new, gen)
    return out


cdef object AutomatonCache_put_all = None  # cache.AutomatonCache.put_all, once imported


def set_put_all(f):
    """``cache.AutomatonCache.put_all`` (the cache module registers it at import): ``collect``
    does what it does inline for that class, and calls any other's."""
    global AutomatonCache_put_all
    AutomatonCache_put_all = f


cdef int put_all(cache, list built, gen) except -1:
    """``AutomatonCache.put_all(built, gen)`` without its Python frame and ``with``: each
    (key, automata) kept under the cache's lock, unless the generation moved on, the oldest
    component dropped past ``MAX_COMPONENTS``."""
    cdef object lock = cache._lock
    cdef dict comps
    cdef Py_ssize_t most
    lock.acquire()
    try:
        if gen is not None and gen != cache._interner.gen:
            return 0
        comps = cache._components
        most = cache.MAX_COMPONENTS
        for key, dfas in built:
            if len(comps) >= most:
                comps.pop(next(iter(comps)), None)
            comps[key] = dfas
    finally:
        lock.release()
    return 0


def ranks(list names, dict name_idx):
    """``Session.rank``: each name's label value (its position in name order, by name index)
    and the names in order; the loop over the names compiled (a cold compile numbers every
    rule, ~100 for a JSON schema)."""
    cdef list ordered = sorted(names)  # names are distinct: no ties
    cdef Py_ssize_t n = len(ordered), r, i
    cdef array rank = clone(array("I"), n, True)
    cdef unsigned int *p = rank.data.as_uints
    for r in range(n):
        i = name_idx[ordered[r]]
        if not 0 <= i < n:
            raise IndexError("a name's index is past the names")
        p[i] = <unsigned int>r
    return rank, ordered


def comp_args(list plan, array rank, sess):
    """``components.rule_dfas``' components as compile_components takes them: each planned
    spec, a cached component's with its DFAs as (handle, its labels' values in this session)
    (``components._given``, compiled: a loop over every label of the prelude's automata, which
    a JSON schema's compile reuses)."""
    cdef list out = [], given
    cdef dict name_idx = sess.name_idx
    cdef tuple spec
    cdef array labs, tmpl = array("I")
    cdef list names
    cdef Py_ssize_t j, n, i, n_rank = len(rank)
    cdef unsigned int *p
    cdef PyObject *got
    for item in plan:
        spec = <tuple>(<tuple>item)[2]
        cached = spec[3]
        if cached is None:
            out.append(spec)
            continue
        given = []
        for d in cached:
            names = <list>d.names
            n = len(names)
            labs = clone(tmpl, n, False)
            p = labs.data.as_uints
            for j in range(n):
                x = names[j]
                got = PyDict_GetItemWithError(name_idx, x)
                i = <Py_ssize_t>(<object>got) if got != NULL else <Py_ssize_t>sess.name(x)
                if not 0 <= i < n_rank:
                    raise IndexError("array index out of range")
                p[j] = rank.data.as_uints[i]
            given.append((d.handle, labs))
        out.append((spec[0], spec[1], spec[2], given) + spec[4:])
    return out


def undefined_ref(dict cids, refs, dict rules, dict markers):
    """``prepare.validate``'s loop: the first (rule, reference) of ``cids`` (rule -> DAG id)
    whose reference is neither a rule nor a lookahead's marker, or None (a rule's references
    in the order its body meets them, with the interner's facts)."""
    cdef Facts facts = (<Lazy>refs).facts if type(refs) is Lazy and not (<Lazy>refs).uses else None
    cdef dict u
    cdef Py_ssize_t pos
    cdef PyObject *k
    cdef PyObject *v
    for name, c in cids.items():
        if facts is None:
            for ref in refs[c]:
                if PyDict_Contains(rules, ref) != 1 and PyDict_Contains(markers, ref) != 1:
                    return name, ref
            continue
        # the rules referred to are the keys of the node's uses (``refs_of`` makes its set of
        # them), read in place: no iterator object a rule, the first met first
        u = <dict>facts.uses_of(c)
        pos = 0
        while PyDict_Next(u, &pos, &k, &v):
            if PyDict_Contains(rules, <object>k) != 1 and PyDict_Contains(markers, <object>k) != 1:
                return name, <object>k
    return None


cdef int sort_names(list names, Py_ssize_t n, Py_ssize_t *par=NULL) except -1:
    """``names.sort()`` of ``n`` distinct rule names: a few (most rules call two to six) by
    insertion, comparing str objects in place (``list.sort`` costs ~0.8 K instructions a call
    whatever the length; the order is the same: code point order, no ties).  ``par``: ``n``
    numbers moved with the names by the insertion; returns 1 where they were, 0 where
    ``list.sort`` ran (``par`` then as it was)."""
    cdef Py_ssize_t i, j, y
    cdef PyObject *x
    cdef PyObject **p
    if n > 8:
        names.sort()
        return 0
    for i in range(n):
        if not PyUnicode_CheckExact(<object>PyList_GET_ITEM(names, i)):
            names.sort()
            return 0
    p = PySequence_Fast_ITEMS(names)
    for i in range(1, n):
        x = p[i]
        y = par[i] if par != NULL else 0
        j = i
        while j > 0 and PyUnicode_Compare(<object>p[j - 1], <object>x) > 0:
            p[j] = p[j - 1]
            if par != NULL:
                par[j] = par[j - 1]
            j -= 1
        p[j] = x
        if par != NULL:
            par[j] = y
    return 1


def call_graph(sess, dict rules):
    """``components.call_graph``: each rule's DAG id, the rules it calls (a sorted list, read
    only: what Tarjan's walk and the plan read, in that order), and its uses capped at 2; every
    rule name numbered in sorted order, then the token terminals.

    A rule's callees are its body's uses' keys, sorted here once: the rule set ``refs_of``
    would make (a frozenset a rule, ~0.6 K instructions) is not made, and neither ``tarjan``
    nor a recursive rule's callees in ``plan`` sort a set again."""
    return graph_of(sess, rules, None, True)


def call_graph_ids(sess, dict rules, bint with_uses=True):
    """``call_graph`` and the same graph by name index (:class:`Calls`), which ``plan`` reads.
    Without ``with_uses`` the uses are counted in the arrays (``Calls.used``) and the uses
    dict is None: a callee's name is looked up once, for its index, where the dict cost an
    insert or a probe and a write a callee more (``components._plan``)."""
    cdef Calls by_idx = Calls()
    cids, graph, uses = graph_of(sess, rules, by_idx, with_uses)
    return cids, graph, uses, by_idx


cdef dict known_cids(sess, dict rules):
    """``sess.cids(rules)``, read from the memo where every body has an id already (the plan's
    rules: ``prepare`` interned the grammar's and the rewriters intern what they make), without
    the method's frame, a walk set up and the interner's lock taken; else ``sess.cids``."""
    cdef dict memo = sess.memo, seed = sess.seed, out = PyDict_Copy(rules)
    cdef PyObject *got
    cdef PyObject *k
    cdef PyObject *v
    cdef Py_ssize_t pos = 0
    while PyDict_Next(rules, &pos, &k, &v):
        ob = oid(<object>v)
        got = PyDict_GetItemWithError(memo, ob)
        if got == NULL:
            got = PyDict_GetItemWithError(seed, ob)
            if got == NULL:
                return sess.cids(rules)
        out[<object>k] = <object>got
    sess.max_nodes = None  # as sess.cids(rules) leaves it
    return out


cdef tuple graph_of(sess, dict rules, Calls by_idx, bint with_uses):
    """``call_graph``, and with ``by_idx`` that filled too (the names numbered first); without
    ``with_uses`` (``by_idx`` given) the uses are counted there and not in a dict (None)."""
    cdef dict cids = known_cids(sess, rules), graph = PyDict_Copy(cids), uses = {} if with_uses else None
    cdef dict name_idx = sess.name_idx, u
    cdef Facts facts = sess.interner.facts  # its uses read without ``Lazy``
    cdef list names = sess.names, calls
    cdef object c, n, v
    cdef Py_ssize_t k, k2, r2, pos, r = 0, e = 0
    cdef int in_step
    cdef PyObject *pk
    cdef PyObject *pv
    cdef PyObject *pu
    k = len(names)
    for name in sorted(rules):
        if name not in name_idx:
            name_idx[name] = len(names)
            names.append(name)
    if len(names) != k:
        sess._rank = None
    if by_idx is not None:
        by_idx.setup(names, name_idx)
    for name, c in cids.items():
        u = <dict>facts.uses_of(c)
        k = len(u)
        if by_idx is not None:
            r = <Py_ssize_t>name_idx[name]
            by_idx.cids[r] = c
        if k == 0:
            graph[name] = NO_CALLEES
            if by_idx is not None:
                by_idx.lists[r] = NO_CALLEES
                by_idx.cnt[r] = 0
                by_idx.at[r] = 0
            continue
        calls = PyList_New(k)
        if by_idx is not None:  # the callees' indices, in the uses' order, then sorted with the names
            by_idx.reserve(k)
            e = by_idx.at[r] = by_idx.n_edges
            by_idx.cnt[r] = k
            by_idx.n_edges += k
        k = 0
        pos = 0
        while PyDict_Next(u, &pos, &pk, &pv):
            n = <object>pk
            Py_INCREF(n)
            PyList_SET_ITEM(calls, k, n)
            k += 1
            if by_idx is not None:
                pu = PyDict_GetItemWithError(name_idx, n)
                r2 = PyLong_AsSsize_t(<object>pu) if pu != NULL else -1
                if not 0 <= r2 < by_idx.n:
                    r2 = -1  # a callee that is no rule (tarjan raises if it reaches it)
                    by_idx.ok = False
                elif not with_uses:  # its uses so far and this rule's, capped at 2
                    k2 = by_idx.used[r2] + <Py_ssize_t><object>pv
                    by_idx.used[r2] = 2 if k2 > 2 else k2
                by_idx.edges[e + k - 1] = r2
            if not with_uses:
                continue
            # the name's uses so far and this rule's, capped at 2: a name met first (most)
            # inserted in the probe that looks it up (the dict read once, not twice)
            k2 = len(uses)
            pu = PyDict_SetDefault(uses, n, <object>pv)
            if len(uses) == k2:  # met before
                k2 = PyLong_AsSsize_t(<object>pu) + <Py_ssize_t><object>pv
                uses[n] = 2 if k2 > 2 else k2
            elif <Py_ssize_t><object>pv > 2:
                uses[n] = 2
        in_step = 1
        if k > 1:
            in_step = sort_names(calls, k, by_idx.edges + e if by_idx is not None else NULL)
        graph[name] = calls
        if by_idx is not None:
            by_idx.lists[r] = calls
            for k2 in range(k):  # the callees' indices in the list's (sorted) order
                if in_step:
                    r2 = by_idx.edges[e + k2]
                else:  # sorted by list.sort: looked up again in its order
                    pu = PyDict_GetItemWithError(name_idx, <object>PyList_GET_ITEM(calls, k2))
                    r2 = PyLong_AsSsize_t(<object>pu) if pu != NULL else -1
                    if not 0 <= r2 < by_idx.n:
                        r2 = -1
                by_idx.edges[e + k2] = 0 if r2 < 0 else r2
    if sess.tokens:
        for ids, negated in sorted(sess.tokens):
            if ids:
                sess.token_name(ids, negated)
    return cids, graph, uses


def finish_args(dict built, sess):
    """What ``components.finish`` hands compile_finish for ``built`` (rule -> (DFA, label
    values)): per name index the (DFA handle, label values) or None, which names are token
    terminals (bytes of 0 and 1), and the rules' states in all."""
    cdef dict name_idx = sess.name_idx, token_sets = sess.token_sets
    cdef list names = sess.names, by_name = [None] * len(names)
    cdef tuple pair
    cdef Py_ssize_t total = 0, i, n = len(names)
    cdef bytearray is_token = bytearray(n)
    for name, pair in built.items():
        dfa = pair[0]
        handle = dfa.handle
        by_name[<Py_ssize_t>name_idx[name]] = (handle, pair[1])
        total += <Py_ssize_t>handle.n_states
    if token_sets:
        for i in range(n):
            if names[i] in token_sets:
                is_token[i] = 1
    return by_name, bytes(is_token), total


# -- repeats.RepeatRewriter's test of what needs no rewriting


cdef class Clean:
    """``RepeatRewriter.clean`` compiled: does the interned subtree ``cid`` need no rewriting
    (no repetition whose unrolled size passes the budget, valid bounds)?  Answers are kept in
    ``memo`` (the rewriter's, shared with its Python walk); ``size(item)`` is the size
    estimate of a repeated item (``repeats.dag_size`` with the rule sizes it needs), asked only
    of a repetition bounded above 1.  Past the recursion cap it raises :class:`Deep` (what is
    done is kept) and the caller walks the rest in Python."""
    cdef list keys
    cdef Facts facts  # the interner's: whether a node is plain (repeats nothing)
    cdef dict memo
    cdef object size, budget
    cdef Sizes sizes  # the interner's, for the reference-free items' sizes (or None)

    def __init__(self, interner, dict memo, size, budget):
        self.facts = interner.facts
        self.keys = interner.keys
        self.memo = memo
        self.size = size
        self.budget = budget
        sizes = getattr(interner, "sizes", None)
        self.sizes = sizes if type(sizes) is Sizes else None

    cdef object item_size(self, object item):
        """``size(item)``.  A reference-free item's here: it is the same for any rule sizes
        (``Sizes`` keeps it in the interner), where ``size``, a Python call, then a compiled
        one, cost ~2 K instructions a repetition (0.4 % of a median JSON schema's compile)."""
        if self.sizes is not None and not self.sizes.has_refs(<Py_ssize_t>item):
            try:
                return self.sizes.size(item, NO_RULE_SIZES, None, 0)
            except Deep:  # the rest as size finishes it (what is done is kept)
                pass
        return self.size(item)

    def __call__(self, Py_ssize_t cid):
        return self.walk(cid, 0)

    cdef bint walk(self, object cid, int depth) except -1:
        """``cid``: the id as the int object the keys hold (the memo's key: an id past 256
        made into a new int object for each lookup cost an allocation and a free)."""
        cdef tuple key
        cdef int kind
        cdef bint got
        cdef Py_ssize_t c = cid
        if self.facts.plain_of(c):
            return True
        if self.facts.in_c(c) and self.facts.fa[c].valid and self.facts.fa[c].maxprod == 1:
            return True  # each repetition below bounded by 1, with valid bounds: nothing to weigh
        g = self.memo.get(cid)
        if g is not None:
            return <bint>g
        if depth > MAX_DEPTH:
            raise Deep
        key = <tuple>self.keys[c]
        kind = key[0]
        got = True
        if kind == SEQ or kind == ALT:
            for k in <tuple>key[1]:
                if not self.walk(k, depth + 1):
                    got = False
                    break
        elif kind == REPEAT:
            item, lo, hi = key[1], key[2], key[3]
            bound = max(lo, hi or 0, 1)
            got = (
                lo >= 0
                and (hi is None or hi >= lo)
                and self.walk(item, depth + 1)
                and (bound <= 1 or self.item_size(item) * bound <= self.budget)
            )
        self.memo[cid] = got
        return got


def dirty_rules(sess, dict rules, Clean clean, max_product):
    """The names of ``rules`` that ``RepeatRewriter.expr`` may rewrite, in order: each rule
    whose body is not interned (a literal set outlined), not clean, or whose repetition
    bounds multiply past ``max_product``; the others it would keep as they are."""
    cdef dict memo = sess.memo, seed = sess.seed
    cdef Facts facts = sess.interner.facts
    cdef list out = []
    for name, body in rules.items():
        ob = oid(body)
        c = memo.get(ob)
        if c is None:
            c = seed.get(ob)
        try:
            if c is None or not clean.walk(c, 0) or facts.maxprod_of(<Py_ssize_t>c) > max_product:
                out.append(name)
        except Deep:
            out.append(name)
    return out


def state_rules(bytes rule_state):
    """The rule of every state, uint32 [states] as bytes, from ``rule_state`` (uint32 [rules +
    1] as bytes: each rule's first state, then the number of states; nondecreasing), as
    ``compile_finish`` returns it: a loop here, where numpy's ``repeat`` over a difference
    costs ~50 us with the caches cold (``flat.from_door``)."""
    cdef Py_ssize_t n = len(rule_state) // 4 - 1, r, s, total
    cdef const unsigned int *rs = <const unsigned int *><const char *>rule_state
    if n < 0:
        raise ValueError("state_rules: no rules")
    total = rs[n]
    if rs[0] != 0:
        raise ValueError("state_rules: rule_state is not a layout")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 4 * total)
    cdef unsigned int *p = <unsigned int *>PyBytes_AS_STRING(out)
    for r in range(n):
        if rs[r] > rs[r + 1] or rs[r + 1] > total:
            raise ValueError("state_rules: rule_state is not a layout")
        for s in range(rs[r], rs[r + 1]):
            p[s] = <unsigned int>r
    return out


def root_facts(interner, roots):
    """Over the ids ``roots``: the sum of their tree sizes, their greatest height and their
    longest literal (what ``prepare`` checks against the limits)."""
    cdef Facts facts = interner.facts
    cdef object total = 0
    cdef Py_ssize_t h = 0, lit = 0, x, k
    for c in roots:
        k = c
        total += facts.count_of(k)
        x = facts.height_of(k)
        if x > h:
            h = x
        x = facts.maxlit_of(k)
        if x > lit:
            lit = x
    return total, h, lit


# -- repeats.dag_size and outline_sets' test of a literal set below, compiled


cdef class Sizes:
    """``repeats.dag_size_py`` compiled: the size estimate (``repeats.size_estimate``) of an
    interned subtree, reference-free subtrees' kept in the interner's ``size0``, the others in
    the caller's ``memo`` (valid for one ``rule_size``).  The same values, kept in the same
    dicts: the repetition rewriter asked it of every repeated item that refers to a rule, and
    the rule sizes of every rule of such a grammar, in Python that cost ~0.1-8 ms a cold
    compile of those JSON schemas (a sixth of them), each node a Python call, a ``Lazy`` rule
    set made for its test of references, and a dict lookup (docs/design.md §7).  Past the
    recursion cap it raises :class:`Deep` (what is done is kept) and the caller walks the rest
    in Python."""
    cdef Facts facts
    cdef list keys
    cdef dict size0

    def __init__(self, interner):
        self.facts = interner.facts
        self.keys = interner.keys
        self.size0 = interner.size0

    def __call__(self, cid, dict rule_size, dict memo):
        if not 0 <= <Py_ssize_t>cid < len(self.keys):
            raise IndexError("list index out of range")
        return self.size(cid, rule_size, memo, 0)

    cdef bint has_refs(self, Py_ssize_t c) except -1:
        """``refs[c]`` is not empty (the C fact, where it is kept)."""
        if c < self.facts.fa_len:
            return self.facts.fa[c].has_refs
        return len(self.facts.refs_of(c)) != 0

    cdef object size(self, object c, dict rule_size, dict memo, int depth):
        """``dag_size_py(c)``; ``memo`` None for a reference-free subtree's walk (the Python's
        fresh dict, which that walk never writes)."""
        cdef PyObject *got
        cdef object v
        if depth > MAX_DEPTH:
            raise Deep
        if not self.has_refs(<Py_ssize_t>c):
            got = PyDict_GetItemWithError(self.size0, c)
            if got != NULL:
                return <object>got
            v = self.compute(c, rule_size, None, depth)
            self.size0[c] = v
            return v
        got = PyDict_GetItemWithError(memo, c)
        if got != NULL:
            return <object>got
        v = self.compute(c, rule_size, memo, depth)
        memo[c] = v
        return v

    cdef object compute(self, object c, dict rule_size, dict memo, int depth):
        """``repeats._dag_size_py(c)``."""
        cdef tuple key = <tuple>self.keys[<Py_ssize_t>c]
        cdef int kind = key[0]
        cdef PyObject *got
        cdef object total, n
        if kind == LIT:
            return max(1, len(key[1]))
        if kind == UTF8:
            return min(12, 2 * max(1, len(key[1])))
        if kind == REF:
            return rule_size.get(key[1], 4)
        if kind == BYTES or kind == TOKEN or kind == LOOKAHEAD:
            return 1
        if kind == WORDS:
            return max(1, sum(map(len, key[1])))
        if kind == SEQ or kind == ALT:
            total = 1
            for k in <tuple>key[1]:
                got = NULL if memo is None else PyDict_GetItemWithError(memo, k)
                total += self.size(k, rule_size, memo, depth + 1) if got == NULL else <object>got
            return total
        _, item, lo, hi = key
        n = hi if hi is not None else max(lo, 1)
        return 1 + self.size(item, rule_size, memo, depth + 1) * max(n, 1)


def rule_sizes(sess, dict rules, dict final, fallback):
    """``repeats.rule_sizes(rules, sess, final)`` compiled: every rule's size estimate,
    references expanded (a rule in a cycle counts 4 until it is sized), capped at 2**30; the
    subtrees' sizes that hold for the final rule sizes kept in ``final``.  The Python loop
    cost a function call, a method call and dict operations a rule (~1 ms a cold compile of
    the largest JSON schemas, docs/design.md §7).  ``fallback``: ``repeats.dag_size_py``,
    which finishes a size past the compiled walk's recursion cap."""
    cdef dict cids = sess.cids(rules), graph = {}, sizes = {}, memo
    cdef Facts facts = sess.interner.facts
    cdef Sizes sz = sess.interner.sizes
    cdef list comp
    cdef object cap = 1 << 30, size, c
    cdef bint settled
    cdef Py_ssize_t n_keys = len(sz.keys)
    for n, c in cids.items():
        # the body's uses (a dict by rule name, kept by the interner): its keys are the rules
        # it refers to, where the rule set ``refs_of`` makes (a frozenset a rule) cost more
        graph[n] = facts.uses_of(<Py_ssize_t>c)
    for comp in sccs_all(graph):
        for n in comp:
            if n not in sizes:
                sizes[n] = 4
        # a rule outside any cycle refers only to rules sized already: its subtrees' sizes are final
        settled = len(comp) == 1 and comp[0] not in graph[comp[0]]
        for n in comp:
            c = cids[n]
            memo = final if settled else {}
            if not 0 <= <Py_ssize_t>c < n_keys:
                raise IndexError("list index out of range")
            try:
                size = sz.size(c, sizes, memo, 0)
            except Deep:  # the rest in Python (what is done is kept)
                size = fallback(sess, c, sizes, memo)
            sizes[n] = cap if size > cap else size
    return sizes


cdef class Outlining:
    """``components.outline_sets``' walk (its ``rewrite``), compiled: every literal set that is
    not a rule's whole body replaced by a reference to a rule of its own (one per distinct
    set, named and added to ``out`` in the order the walk meets them), the nodes above it
    rebuilt, the rest kept as they are; each node rewritten once (``memo``, by identity).
    Past the recursion cap it raises :class:`Deep` and the caller runs the Python walk from
    the start (the same names in the same order: the sets' ids are kept)."""
    cdef object sess
    cdef dict out, named, memo, known, seed
    cdef SetsBelow below

    def __init__(self, sess, dict out):
        self.sess = sess
        self.out = out
        self.named = {}  # set id -> its rule
        self.memo = {}  # id(node) -> node rewritten
        self.known = sess.memo  # Session.known's dicts
        self.seed = sess.seed
        self.below = SetsBelow(sess.interner.keys, {})  # DAG id -> a literal set inside

    cdef object name_of(self, object e):
        cdef object cid = self.sess.cid(e)
        cdef object got = self.named.get(cid)
        cdef Py_ssize_t k
        if got is None:
            k = len(self.named)
            while ("<literal set %d>" % k) in self.out:
                k += 1
            got = "<literal set %d>" % k
            self.named[cid] = got
            self.out[got] = e
        return got

    cdef object rewrite(self, object e, int depth):
        cdef object ob = oid(e), t, new, x, y
        cdef PyObject *got = PyDict_GetItemWithError(self.memo, ob)
        cdef tuple items, kids
        cdef Py_ssize_t k, n
        cdef bint changed
        if got != NULL:
            return <object>got
        if depth > MAX_DEPTH:
            raise Deep
        got = PyDict_GetItemWithError(self.known, ob)
        if got == NULL:
            got = PyDict_GetItemWithError(self.seed, ob)
        t = type(e)
        if got != NULL and not self.below.walk(<object>got, 0):  # nothing to outline below
            new = e
        elif t is LiteralSet:
            new = Ref(self.name_of(e))
        elif t is Seq or t is Alt:
            items = (<Seq>e).items if t is Seq else (<Alt>e).items
            n = len(items)
            kids = new_tuple(n)
            changed = False
            for k in range(n):
                x = items[k]
                y = self.rewrite(x, depth + 1)
                set_item(kids, k, y)
                if y is not x:
                    changed = True
            new = (Seq(kids) if t is Seq else Alt(kids)) if changed else e
        elif t is Repeat:
            x = (<Repeat>e).item
            y = self.rewrite(x, depth + 1)
            new = e if y is x else Repeat(y, (<Repeat>e).lo, (<Repeat>e).hi)
        else:
            new = e
        self.memo[ob] = new
        return new


def outline_sets(dict rules, sess):
    """``components.outline_sets_py`` compiled (the Python frames of its walk, its identity
    memo's lookup and its test a node cost ~4 K instructions a node of an enum's schema);
    raises :class:`Deep` past the recursion cap (the caller then runs the Python walk)."""
    cdef dict out = PyDict_Copy(rules)
    cdef Outlining walk = Outlining(sess, out)
    cdef Py_ssize_t i = 0
    for name, body in rules.items():
        if i & 15 == 0:
            deadline_check("literal sets")
        i += 1
        if type(body) is not LiteralSet:
            out[name] = walk.rewrite(body, 0)
    return out


cdef class SetsBelow:
    """``components.outline_sets``' test, compiled: is there a literal set below the interned
    node ``c``?  Answers are kept in ``below`` (shared with the Python walk, which takes over
    past the recursion cap: :class:`Deep`), the alternatives' and sequences' children tested
    left to right up to the first that holds one, as ``any`` does."""
    cdef list keys
    cdef dict below

    def __init__(self, list keys, dict below):
        self.keys = keys
        self.below = below

    def __call__(self, c):
        return self.walk(c, 0)

    cdef bint walk(self, object c, int depth) except -1:
        cdef PyObject *got = PyDict_GetItemWithError(self.below, c)
        cdef tuple key
        cdef int kind
        cdef bint out = False
        if got != NULL:
            return <bint>(<object>got)
        if depth > MAX_DEPTH:
            raise Deep
        key = <tuple>self.keys[<Py_ssize_t>c]
        kind = key[0]
        if kind == SEQ or kind == ALT:
            for k in <tuple>key[1]:
                if self.walk(k, depth + 1):
                    out = True
                    break
        else:
            out = kind == WORDS or (kind == REPEAT and self.walk(key[1], depth + 1))
        self.below[c] = out
        return out
