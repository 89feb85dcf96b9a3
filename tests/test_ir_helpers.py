"""``ir.seq``, ``ir.alt`` and ``ir.normalize_ranges`` (in C, cfgmask/_ir.pyx) and
``ir.without_surrogates`` (by bisection) against the Python functions they replaced, kept below as
the spec: equal results (repr included: the front end's fingerprint digests it) and the same
errors, on random arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import ir

# ---- the spec: cfgmask/ir.py's Python functions before they moved to C ------------------------


def spec_normalize_ranges(ranges: Any, top: int = ir.MAX_CODE_POINT) -> tuple[tuple[int, int], ...]:
    cleaned = sorted((max(0, lo), min(top, hi)) for lo, hi in ranges if lo <= hi and hi >= 0 and lo <= top)
    out: list[tuple[int, int]] = []
    for lo, hi in cleaned:
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _spec_flatten(kind: type, items: tuple[ir.Expr, ...]) -> ir.Expr:
    if len(items) == 1 and items[0].__class__ is not kind:
        return items[0]
    flat: list[ir.Expr] = []
    for it in items:
        if it.__class__ is kind:
            flat += it.items  # type: ignore[attr-defined]
        else:
            flat.append(it)
    return flat[0] if len(flat) == 1 else kind(tuple(flat))


def spec_seq(*items: ir.Expr) -> ir.Expr:
    return _spec_flatten(ir.Seq, items)


def spec_alt(*items: ir.Expr) -> ir.Expr:
    return _spec_flatten(ir.Alt, items)


# ---- random arguments ---------------------------------------------------------------------------

_bound = st.integers(-3, 40) | st.sampled_from(
    [ir.MAX_CODE_POINT - 1, ir.MAX_CODE_POINT, ir.MAX_CODE_POINT + 5]
)
_pair = st.tuples(_bound, _bound)
_ranges = st.lists(_pair, max_size=8) | st.lists(_pair, max_size=8).map(tuple)
# normal inputs too (the C fast path returns them as they are)
_normal = st.lists(_pair, max_size=8).map(spec_normalize_ranges)

_leaf = st.sampled_from(
    [ir.Literal(b"a"), ir.Literal(b"b"), ir.Ref("r"), ir.CharClass(((48, 57),)), ir.EPSILON]
)
_expr = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3).map(lambda xs: ir.Seq(tuple(xs))),
        st.lists(kids, max_size=3).map(lambda xs: ir.Alt(tuple(xs))),
        kids.map(lambda x: ir.Repeat(x, 0, 1)),
    ),
    max_leaves=8,
)


@given(_ranges | _normal, st.sampled_from([ir.MAX_CODE_POINT, 255, 30, 0]))
def test_normalize_ranges_as_spec(ranges: Any, top: int) -> None:
    got = ir.normalize_ranges(ranges, top)
    want = spec_normalize_ranges(ranges, top)
    assert got == want and repr(got) == repr(want) and type(got) is tuple
    assert ir.normalize_ranges(ranges) == spec_normalize_ranges(ranges)


def test_normalize_ranges_odd_inputs() -> None:
    assert ir.normalize_ranges(iter([(5, 6), (0, 1)])) == ((0, 1), (5, 6))  # an iterator is read once
    assert ir.normalize_ranges([[3, 4], [0, 1]]) == ((0, 1), (3, 4))  # lists as pairs become tuples
    assert type(ir.normalize_ranges([[0, 1]])[0]) is tuple
    for bad in ([(1, 2, 3)], [(1,)], [5]):
        with pytest.raises((ValueError, TypeError)) as want:
            spec_normalize_ranges(bad)
        with pytest.raises(want.type):
            ir.normalize_ranges(bad)


@given(st.lists(_expr, max_size=4))
def test_seq_and_alt_as_spec(items: list[ir.Expr]) -> None:
    for fast, spec, kind in ((ir.seq, spec_seq, ir.Seq), (ir.alt, spec_alt, ir.Alt)):
        got, want = fast(*items), spec(*items)
        assert type(got) is type(want) and got == want and repr(got) == repr(want)
        if len(items) == 1 and type(items[0]) is not kind:  # a lone item of another kind: itself
            assert got is items[0]


def spec_without_surrogates(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Each range less D800-DFFF, one at a time (the front ends' loop before bisection)."""
    lo, hi = ir.SURROGATES
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        out.extend(r for r in ((a, min(b, lo - 1)), (max(a, hi + 1), b)) if r[0] <= r[1])
    return tuple(out)


_near = st.sampled_from([0, 0xD7FE, 0xD7FF, 0xD800, 0xD801, 0xDBFF, 0xDC00, 0xDFFE, 0xDFFF, 0xE000, 0xE001])
_points = st.one_of(_near, st.integers(0, ir.MAX_CODE_POINT))


@given(st.lists(st.tuples(_points, _points), max_size=8), st.booleans())
def test_without_surrogates_as_spec(pairs: list[tuple[int, int]], complement: bool) -> None:
    norm = ir.normalize_ranges(pairs)
    if complement:
        norm = ir.complement_ranges(norm)
    got = ir.without_surrogates(norm)
    assert got == spec_without_surrogates(norm)
    assert type(got) is tuple and all(type(r) is tuple for r in got)
    assert not any(a <= ir.SURROGATES[1] and b >= ir.SURROGATES[0] for a, b in got)
