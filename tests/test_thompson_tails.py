"""Shared tails in the C Thompson construction (csrc/thompson.c, ``tb_to``, ``tb_edge_state``):
a node built toward the same end state twice, and a byte chain's inner states, are built once.

The language must not change, so every rule's minimal automaton is checked state for state
against the Python builder (``reference_fsm.Builder``, which copies every tail), on
expressions made to repeat their tails: alternatives ending in the same pieces, nested, and
literals and UTF-8 classes sharing suffixes; and on ``not_in``, whose trie of names ends
every node with the same ``.*`` and the same UTF-8 and escape sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import _core, ir
from cfgmask.frontends.json_schema import strings

from .test_compile_passes import _outcome, _rule_dfas, _tables, assert_c_automata_match_reference

# Pieces that recur, so the same node meets the same end: literals sharing suffixes, classes
# with multi-byte UTF-8 sequences (shared inner states), a loop, a reference.
PIECES = (
    ir.Literal(b"ab"),
    ir.Literal(b"xab"),
    ir.Literal(b"b"),
    ir.CharClass(((0x61, 0x62), (0xE9, 0xE9))),
    ir.CharClass(((0x80, 0x7FF),)),
    ir.CharClass(((0x63, 0x63), (0x800, 0x10FFFF))),
    ir.Repeat(ir.CharClass(((0x61, 0x63), (0x100, 0x200))), 0, None),
    ir.Repeat(ir.Literal(b"ab"), 1, 3),
    ir.Ref("leaf"),
)

LEAVES = st.sampled_from(PIECES)


def _tails(inner: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
    # alternatives of sequences that end alike: the tail is drawn from a pool of two
    tail = st.sampled_from(PIECES[:2] + PIECES[6:7])
    branch = st.builds(lambda xs, t: ir.seq(*xs, t), st.lists(inner, min_size=0, max_size=2), tail)
    return st.one_of(
        st.lists(branch, min_size=1, max_size=4).map(lambda xs: ir.alt(*xs)),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: ir.seq(*xs)),
        inner.map(lambda x: ir.Repeat(x, 0, 2)),
    )


EXPRS = st.recursive(LEAVES, _tails, max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(EXPRS, EXPRS)
def test_shared_tails_give_the_python_builders_automata(body: ir.Expr, other: ir.Expr) -> None:
    # r1 and leaf used twice: copied or called, not expanded (a rule used once in tail position may be
    # expanded where the reference calls it, whatever the tails: /work/notes/p90.md)
    rules: dict[str, ir.Expr] = {
        "r0": ir.seq(ir.alt(ir.seq(body, ir.Ref("r1")), ir.seq(other, ir.Ref("leaf"))), ir.Ref("r1")),
        "r1": ir.alt(other, ir.seq(body, ir.Literal(b"b")), ir.Ref("leaf")),
        "leaf": ir.alt(ir.Literal(b"qab"), ir.CharClass(((0x80, 0x7FF),))),
    }
    g = ir.Grammar(rules, "r0")
    assert_c_automata_match_reference(g)


NAMES = st.lists(st.text('abcé"\\', min_size=1, max_size=6), min_size=1, max_size=30, unique=True)


@settings(max_examples=40, deadline=None)
@given(NAMES, st.booleans(), st.sampled_from([None, 4, 24]))
def test_not_in_gives_the_python_builders_tables(
    names: list[str], canonical: bool, rule_size: int | None
) -> None:
    rules: dict[str, ir.Expr] = {}
    body = strings.not_in(names, rules if rule_size else None, canonical)
    rules["root"] = ir.seq(ir.Literal(b'"'), body, ir.Literal(b'"'))
    g = ir.Grammar(rules, "root")
    assert _outcome(lambda: _tables(g, True)) == _outcome(lambda: _tables(g, False))


def test_not_in_builds_its_tails_once() -> None:
    """The trie of 60 names ends each of its nodes with the same ``.*`` and the same UTF-8 and
    escape sequences: with the tails shared, subset construction passes through little more
    than the minimal states (7,731 for 144 with every tail copied; 173 shared)."""
    names = [f"{w}_{k}" for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta") for k in range(10)]
    g = ir.Grammar({"root": ir.seq(ir.Literal(b'"'), strings.not_in(names), ir.Literal(b'"'))}, "root")
    _core.compile_stats_enable(True)
    try:
        _core.compile_stats()
        _rule_dfas(g, True)
        got = _core.compile_stats()
    finally:
        _core.compile_stats_enable(False)
    assert got["builds"] == 1
    assert got["dfa_states"] < 2 * got["min_states"], (got["dfa_states"], got["min_states"])
