"""The IR's node types (cfgmask/_ir.pyx) behave as the frozen dataclasses they replaced.

The dataclasses are kept below as the executable spec: on random trees, the extension types have
the same repr (benchmarks/frontend_fingerprint.py digests it), the same equalities, hashes equal
for equal nodes, and survive pickling.  Then what a dataclass gave beyond that: keyword
construction and defaults, read-only attributes, ``__match_args__``; and what the extension types
add: leaves untracked by the collector, composites tracked and freed without recursing on the C
stack.
"""

from __future__ import annotations

import copy
import gc
import pickle
import subprocess
import sys
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir

# ---- the spec: the dataclasses of cfgmask/ir.py before the extension types --------------------


@dataclass(frozen=True, slots=True)
class Literal:
    data: bytes


@dataclass(frozen=True, slots=True)
class CharClass:
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ByteClass:
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Ref:
    name: str


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Any, ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Alt:
    items: tuple[Any, ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Repeat:
    item: Any
    lo: int
    hi: int | None
    _hash: int = field(default=0, init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Token:
    ids: tuple[int, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class TokenText:
    text: bytes
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Lookahead:
    forbidden: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class LiteralSet:
    words: tuple[bytes, ...]
    json: bool = False


SPEC = {
    c.__name__: c
    for c in (Literal, CharClass, ByteClass, Ref, Seq, Alt, Repeat, Token, TokenText, Lookahead, LiteralSet)
}

# ---- random trees, built twice: (spec, extension) ---------------------------------------------


def _node(name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    def side(i: int) -> tuple[Any, ...]:
        return tuple(tuple(a[i] for a in x) if isinstance(x, list) else x for x in args)

    return SPEC[name](*side(0), **kwargs), getattr(ir, name)(*side(1), **kwargs)


_ranges = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=3).map(tuple)
_leaves = st.one_of(
    st.binary(max_size=3).map(lambda b: _node("Literal", b)),
    _ranges.map(lambda r: _node("CharClass", r)),
    _ranges.map(lambda r: _node("ByteClass", r)),
    st.sampled_from(["a", "b", "é"]).map(lambda n: _node("Ref", n)),
    st.tuples(st.lists(st.integers(0, 9), max_size=2).map(tuple), st.booleans()).map(
        lambda t: _node("Token", t[0], negated=t[1])
    ),
    st.tuples(st.binary(max_size=2), st.booleans()).map(lambda t: _node("TokenText", *t)),
    _ranges.map(lambda r: _node("Lookahead", r)),
    st.tuples(st.lists(st.binary(max_size=2), max_size=3).map(tuple), st.booleans()).map(
        lambda t: _node("LiteralSet", t[0], json=t[1])
    ),
)


def _composite(kids: st.SearchStrategy[tuple[Any, Any]]) -> st.SearchStrategy[tuple[Any, Any]]:
    return st.one_of(
        st.lists(kids, max_size=3).map(lambda ks: _node("Seq", list(ks))),
        st.lists(kids, max_size=3).map(lambda ks: _node("Alt", list(ks))),
        st.tuples(kids, st.integers(0, 3), st.one_of(st.none(), st.integers(0, 5))).map(
            lambda t: (Repeat(t[0][0], t[1], t[2]), ir.Repeat(t[0][1], t[1], t[2]))
        ),
    )


trees = st.recursive(_leaves, _composite, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(trees, trees)
def test_same_repr_equality_and_hash_as_the_dataclasses(a: tuple[Any, Any], b: tuple[Any, Any]) -> None:
    (spec_a, new_a), (spec_b, new_b) = a, b
    assert repr(new_a) == repr(spec_a)
    assert (new_a == new_b) == (spec_a == spec_b)
    assert (new_a != new_b) == (spec_a != spec_b)
    # the composites' hashes are per process (they hash the class); equal nodes hash equal
    if new_a == new_b:
        assert hash(new_a) == hash(new_b)
        assert {new_a: 1}[new_b] == 1
    for node in (new_a, new_b):
        again = pickle.loads(pickle.dumps(node))
        assert type(again) is type(node) and again == node and hash(again) == hash(node)
        assert repr(again) == repr(node)
        assert copy.deepcopy(node) == node and copy.copy(node) == node


@settings(max_examples=100, deadline=None)
@given(trees)
def test_equal_after_hashing_either_side(a: tuple[Any, Any]) -> None:
    """The composites cache their hash and compare the caches first: a hashed node still equals
    an unhashed copy, and the other way round."""
    node = a[1]
    copy_ = pickle.loads(pickle.dumps(node))
    hash(node)
    assert node == copy_ and copy_ == node
    hash(copy_)
    assert node == copy_


def test_same_hash_as_the_dataclasses_for_leaves() -> None:
    """A leaf's hash is its fields' tuple's, as it was (the set orders of a process keep)."""
    leaves: list[tuple[str, tuple[Any, ...]]] = [
        ("Literal", (b"ab",)),
        ("CharClass", (((1, 5),),)),
        ("ByteClass", (((0, 255),),)),
        ("Ref", ("value",)),
        ("Token", ((1, 2), True)),
        ("TokenText", (b"<|end|>",)),
        ("Lookahead", (((48, 57),),)),
        ("LiteralSet", ((b"a", b"b"), True)),
    ]
    for name, args in leaves:
        assert hash(getattr(ir, name)(*args)) == hash(SPEC[name](*args)), name


def test_constructors_keywords_and_defaults() -> None:
    assert ir.Literal(data=b"x").data == b"x"
    assert ir.Repeat(item=ir.EPSILON, lo=1, hi=None) == ir.Repeat(ir.EPSILON, 1, None)
    assert ir.Token((3,)).negated is False and ir.Token((3,), True).negated is True
    assert ir.TokenText(b"t").negated is False
    assert ir.LiteralSet((b"a",)).json is False and ir.LiteralSet(words=(b"a",), json=True).json is True
    with pytest.raises(TypeError):
        ir.Repeat(ir.EPSILON, 1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ir.Literal(b"x", b"y")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ir.Ref(nam="x")  # type: ignore[call-arg]


def test_equality_is_per_class() -> None:
    assert ir.Seq(()) != ir.Alt(())
    assert ir.CharClass(((1, 2),)) != ir.ByteClass(((1, 2),))
    assert ir.Literal(b"a") != b"a" and ir.Ref("a") != "a"
    assert ir.Literal(b"a") != Literal(b"a")  # the spec's class is another class
    assert ir.Seq((ir.Literal(b"a"),)) == ir.Seq((ir.Literal(b"a"),))


def test_read_only() -> None:
    nodes: list[Any] = [
        ir.Literal(b"a"),
        ir.Seq(()),
        ir.Repeat(ir.EPSILON, 0, 1),
        ir.Token((1,)),
        ir.LiteralSet((b"a",)),
    ]
    for node in nodes:
        name = type(node).__match_args__[0]
        with pytest.raises(AttributeError):
            setattr(node, name, None)
        with pytest.raises(AttributeError):
            node.other = 1
        with pytest.raises(AttributeError):
            delattr(node, name)
        # a slot's kind of descriptor, which the interpreter reads at a fixed offset (_ir.pyx)
        assert type(vars(type(node))[name]) is type(vars(Literal)["data"])
    # what the dataclasses raised is an AttributeError too
    assert issubclass(FrozenInstanceError, AttributeError)


def test_isinstance_and_match() -> None:
    e = ir.Seq((ir.Literal(b"a"), ir.Repeat(ir.Ref("r"), 2, None)))
    assert all(isinstance(x, ir.Expr) for x in (e, *e.items, ir.NOTHING))
    assert not isinstance(e, ir.Alt)
    match e:
        case ir.Seq((ir.Literal(data), ir.Repeat(ir.Ref(name), lo, hi))):
            assert (data, name, lo, hi) == (b"a", "r", 2, None)
        case _:
            pytest.fail("no match")


def test_only_composites_are_tracked_by_the_collector() -> None:
    leaves = [
        ir.Literal(b"a"),
        ir.CharClass(((1, 2),)),
        ir.ByteClass(((1, 2),)),
        ir.Ref("r"),
        ir.Token((1,)),
        ir.TokenText(b"t"),
        ir.Lookahead(((1, 2),)),
        ir.LiteralSet((b"a",)),
    ]
    assert not any(gc.is_tracked(x) for x in leaves)
    composites = [ir.Seq(tuple(leaves)), ir.Alt(()), ir.Repeat(leaves[0], 0, None)]
    assert all(gc.is_tracked(x) for x in composites)
    # a cycle through a composite (only a mutable `items` can make one) is collected
    items: list[Any] = []
    node = ir.Seq(items)  # type: ignore[arg-type]
    items.append(node)
    gc.collect()
    del node, items
    assert gc.collect() >= 2


_DEEP = """
import sys, threading
from cfgmask import ir

def build_and_drop(kind):
    node = ir.Literal(b"x")
    for i in range(200_000):
        k = kind if kind != "mixed" else ("Seq", "Alt", "Repeat")[i % 3]
        node = ir.Repeat(node, 0, 1) if k == "Repeat" else getattr(ir, k)((node,))
    del node

threading.stack_size(1 << 20)
t = threading.Thread(target=build_and_drop, args=(sys.argv[1],))
t.start()
t.join()
print("freed")
"""


@pytest.mark.parametrize("kind", ["Seq", "Alt", "Repeat", "mixed"])
def test_deep_nesting_is_freed_without_overflowing_the_c_stack(kind: str) -> None:
    """200,000 levels dropped on a 1 MiB thread stack, in a child process (an overflow kills it):
    the trashcan defers the deeper deallocations.  Without it, ``Repeat`` (which holds its item
    directly, not through a tuple as ``Seq`` and ``Alt`` do) overflows here."""
    proc = subprocess.run([sys.executable, "-c", _DEEP, kind], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "freed", (proc.returncode, proc.stderr[-2000:])


def test_compiled_grammar_pickles_its_ir() -> None:
    from cfgmask import Grammar

    g = Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    again = pickle.loads(pickle.dumps(g.ir))
    assert again.rules == g.ir.rules and again.start == g.ir.start
    assert repr(again.rules) == repr(g.ir.rules)
