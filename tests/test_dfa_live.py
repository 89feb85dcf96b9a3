"""Minimization's live mark (``cm_dfa_out.live``, csrc/register.c) against the Python trim.

A DFA marked live has every state reached from the start and reaching an accepting state when
every label edge is followed, so trimming it with every label productive keeps it whole and
csrc/dfa.c skips the walk over its rows (``trim``, ``can_accept``).  The mark is checked here
against ``reference_fsm.trim_states`` with every label productive (the independent reference),
and the C trim and ``can_accept`` of such DFAs (the path that reads no rows) against the
reference for every productive set.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.errors import LimitError

from . import reference_fsm as fsm
from .strategies import SMALL, grammars
from .test_compile_passes import _nfa_of


def _check(body: ir.Expr, productive_sets: list[set[str]] | None = None) -> bool | None:
    """Build body's DFA in C; the mark must agree with the reference trim, and the C trim and
    can_accept must equal the reference's for each productive set (all labels first).
    Returns the mark (None on a subset blow-up)."""
    nfa, start, final = _nfa_of(body)
    try:
        d = fsm.build_dfa(nfa, start, final, 100_000)
    except LimitError:
        return None
    py = fsm.DFA(list(d.states))
    labels = sorted({name for st_ in py.states for name, _ in st_.refs})
    everything = set(labels)
    whole = fsm.trim_states(py, everything)
    if d.handle.live:  # the mark: nothing to trim with every label productive
        assert whole is not None and whole.states == py.states
    if productive_sets is None:
        subsets = (set(c) for k in range(len(labels) + 1) for c in itertools.combinations(labels, k))
        productive_sets = list(itertools.islice(subsets, 16))
    for productive in [everything, *productive_sets]:
        assert fsm.can_accept(d, productive) == fsm.can_accept(py, productive)
        got, want = fsm.trim(d, productive), fsm.trim_states(py, productive)
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert got.states == want.states
    return bool(d.handle.live)


@given(grammars(alphabet=SMALL))
def test_live_mark_agrees_with_reference_trim(g: ir.Grammar) -> None:
    for body in g.rules.values():
        _check(body)


@pytest.mark.parametrize(
    ("body", "live"),
    [
        (ir.seq(ir.Repeat(ir.literal("ab"), 0, None), ir.literal("c")), True),
        (ir.seq(ir.literal("a"), ir.alt(ir.Ref("r"), ir.literal("b")), ir.literal("c")), True),
        (ir.seq(ir.Ref("r"), ir.Repeat(ir.seq(ir.Ref("q"), ir.literal("z")), 0, None)), True),
        # a branch into nothing: its state after "c" is dead, so the mark must be off
        (ir.seq(ir.literal("a"), ir.alt(ir.literal("b"), ir.seq(ir.literal("c"), ir.NOTHING))), False),
        (ir.alt(ir.literal("x"), ir.seq(ir.Repeat(ir.literal("yz"), 0, None), ir.NOTHING)), False),
        # a cycle of 70 states goes to Hopcroft, which leaves the mark unknown (off)
        (ir.Repeat(ir.literal("".join(chr(0x30 + i) for i in range(70))), 0, None), False),
    ],
)
def test_live_mark_cases(body: ir.Expr, live: bool) -> None:
    assert _check(body) is live


@given(st.lists(st.sampled_from(["a", "b", "ab", "ba"]), min_size=1, max_size=6), st.booleans())
def test_live_mark_with_dead_branches(words: list[str], dead: bool) -> None:
    """Alternatives of literals, one of them (optionally) running into nothing after a prefix
    the others share: the mark is on exactly when no state is dead."""
    branches: list[ir.Expr] = [ir.literal(w) for w in words]
    if dead:
        branches.append(ir.seq(ir.literal(words[0] + "q"), ir.NOTHING))
    body = ir.seq(ir.Repeat(ir.alt(*branches), 1, None), ir.Ref("r"))
    assert _check(body) is not dead
