"""Both minimization paths of csrc/minimize.c against the Python reference (subset
construction and Moore's rounds in ``reference_fsm``), state for state.

The C core minimizes a DFA by registration over its strongly connected components
(csrc/register.c) when every cycle has at most 64 states, else by Hopcroft's refinement.
The cases here are built to reach each part of it: acyclic automata, self-loops, small
cycles minimized on their own, cycles equivalent to cycles or to acyclic states elsewhere
(the quotient match), cycles that are equivalent only in part, label edges inside cycles,
and cycles of more than 64 states (Hopcroft).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import _core, ir

from . import reference_fsm as fsm


def lit(s: str) -> ir.Expr:
    return ir.Literal(s.encode())


def star(e: ir.Expr) -> ir.Expr:
    return ir.Repeat(e, 0, None)


def seq(*items: ir.Expr) -> ir.Expr:
    return ir.Seq(tuple(items))


def alt(*items: ir.Expr) -> ir.Expr:
    return ir.Alt(tuple(items))


def _check(e: ir.Expr) -> int:
    nfa = fsm.NFA()
    final = nfa.state()
    start = nfa.state()
    fsm.Builder(nfa, {}, set(), {}).build(e, start, final, True)
    want = fsm.minimize(fsm.determinize(nfa, start, final, 100_000))
    got = fsm.build_dfa(nfa, start, final, 100_000).states
    assert got == want.states
    return len(got)


CASES = {
    "acyclic, shared suffixes": alt(lit("abcx"), lit("bbcx"), lit("cbcx"), lit("abd")),
    "self-loop": seq(lit("a"), star(lit("b")), lit("c")),
    "two equal loops merge": alt(
        seq(lit("a"), star(lit("bc")), lit("d")), seq(lit("e"), star(lit("bc")), lit("d"))
    ),
    "equal loops, different exits": alt(
        seq(lit("a"), star(lit("bc")), lit("d")), seq(lit("e"), star(lit("bc")), lit("f"))
    ),
    "unrolled copy equals the loop": alt(
        seq(lit("x"), lit("a"), star(lit("a"))), seq(lit("y"), star(lit("a")))
    ),
    "loop equal to acyclic only at its exit": alt(seq(lit("p"), star(lit("ab")), lit("z")), lit("qabz")),
    "nested loops": star(seq(lit("a"), star(lit("b")), lit("c"))),
    "loop with inner redundancy": star(alt(lit("ab"), lit("cb"))),
    "loop of 70 states (Hopcroft)": seq(star(lit("abcdefghij" * 7)), lit("!")),
    "two loops of 65 states, equal": alt(
        seq(lit("x"), star(lit("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!@#"))),
        seq(lit("y"), star(lit("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!@#"))),
    ),
    # a cycle of over 12 states (register.c chains its blocks by filter) whose states after x, y,
    # z, w, v, u share a filter and split three ways in a later round, w equal to y, v to x, u to z
    "a block of a cycle split three ways": star(
        alt(lit("xa1"), lit("ya2"), lit("za3"), lit("wa2"), lit("va1"), lit("ua3"), lit("ta2"), lit("sa1"))
    ),
    "loop of 64 states": star(lit("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!@")),
}


@pytest.fixture
def counters() -> Iterator[None]:
    _core.compile_stats_enable(True)
    _core.compile_stats()
    yield
    _core.compile_stats_enable(False)
    _core.compile_stats()


@pytest.mark.parametrize("name", sorted(CASES))
def test_minimal_dfa_equals_moores(name: str, counters: None) -> None:
    _check(CASES[name])
    hopcroft = _core.compile_stats()["hopcroft_states"]
    assert (hopcroft > 0) == ("Hopcroft" in name or "65 states" in name)


def test_label_edges_inside_cycles() -> None:
    """Calls (label edges) on a cycle and beside an equal cycle elsewhere."""
    loop = star(seq(ir.Ref("r"), lit("a")))
    _check(alt(seq(lit("x"), loop, lit("z")), seq(lit("y"), loop, lit("z"))))
    _check(alt(seq(lit("x"), loop), seq(lit("y"), star(seq(ir.Ref("s"), lit("a"))))))


def test_merges_happen() -> None:
    """The cases that should shrink do: the equal loops after 'a' and 'e' are one."""
    merged = _check(CASES["two equal loops merge"])
    apart = _check(CASES["equal loops, different exits"])
    assert merged < apart


ATOMS = st.sampled_from(["a", "b", "ab", "ba", "abc", "c", "aa"]).map(lit)


@st.composite
def regexes(draw: st.DrawFn, depth: int = 3) -> ir.Expr:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(ATOMS)
    kind = draw(st.sampled_from(["seq", "alt", "star", "bounded"]))
    if kind == "star":
        return star(draw(regexes(depth - 1)))
    if kind == "bounded":
        lo = draw(st.integers(0, 2))
        return ir.Repeat(draw(regexes(depth - 1)), lo, lo + draw(st.integers(0, 3)))
    items = tuple(draw(st.lists(regexes(depth - 1), min_size=2, max_size=3)))
    return ir.Seq(items) if kind == "seq" else ir.Alt(items)


@settings(max_examples=200, deadline=None)
@given(regexes(), regexes())
def test_random_regexes(a: ir.Expr, b: ir.Expr) -> None:
    """Alternatives that share sub-automata after different prefixes, as the copies of
    inlined rules do in a compiled grammar."""
    _check(alt(seq(lit("x"), a, b), seq(lit("y"), b), seq(lit("z"), a, b)))


@settings(max_examples=25, deadline=None)
@given(regexes(depth=2), st.integers(60, 70))
def test_random_big_cycles(a: ir.Expr, n: int) -> None:
    """Cycles around the 64-state limit, beside random small ones."""
    big = star(lit(("abc" * 30)[:n]))
    _check(alt(seq(lit("x"), big, a), seq(lit("y"), a), seq(lit("z"), big, a)))
