"""The plan over the call graph by name index (docs/design.md §7, helper ``glue48``):
``_dag.plan`` given ``call_graph_ids``' arrays (Tarjan's walk over C arrays, each member's body
id and name index by number) makes the plan, encoded IR and names that it makes from the dicts
by name; and ``Clean`` answers a subtree whose repetitions are all bounded by 1 (valid bounds)
at once, as its walk and the Python one (``clean_py``) do."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.compile import _dag, components, encode
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.repeats import RepeatRewriter

from .test_call_graph_lists import NAMES, _calls, _grammar
from .test_plan_numbers import _wide


def _plans(g: ir.Grammar, limits: CompileLimits) -> list[Any]:
    """The plan, code and names of ``g`` in two new sessions: by index, then by name."""
    out = []
    for by_index in (True, False):
        sess = encode.Session()
        rules = dict(g.rules)
        cids, graph, uses, by_idx = _dag.call_graph_ids(sess, rules)
        shared, single = limits.inline_shared_states, limits.inline_max_states
        planned = _dag.plan(
            sess, graph, cids, uses, g.start, set(), shared, single, limits, by_idx if by_index else None
        )
        out.append((planned, sess.code.tolist(), sess.names))
    return out


@pytest.mark.parametrize("shared", [0, 3, 64])
def test_plan_by_index_is_the_plan_by_name(shared: int) -> None:
    """Fans, a self call, a cycle of three, a callee shared across components."""
    a, b = _plans(_wide(), CompileLimits(inline_shared_states=shared, inline_max_states=2000))
    assert a == b


@settings(max_examples=40, deadline=None)
@given(_calls(8))
def test_random_graphs_plan_by_index_as_by_name(calls: dict[str, list[str]]) -> None:
    """Random call lists (repeats, self calls, cycles), names in any script."""
    a, b = _plans(_grammar(calls), CompileLimits())
    assert a == b


def test_a_callee_that_is_no_rule_falls_back_to_names() -> None:
    """A rule calling an undefined name: the arrays are not used (``ok`` false) and Tarjan's walk
    raises as by name when it reaches it."""
    rules: dict[str, ir.Expr] = {n: ir.literal(n) for n in NAMES[:3]}
    rules["top"] = ir.Alt((ir.Ref(NAMES[0]), ir.Ref("missing")))
    g = ir.Grammar(rules, "top")
    for by_index in (True, False):
        sess = encode.Session()
        cids, graph, uses, by_idx = _dag.call_graph_ids(sess, dict(rules))
        with pytest.raises(KeyError):
            _dag.plan(sess, graph, cids, uses, g.start, set(), 64, 2000, None, by_idx if by_index else None)


def test_a_start_that_is_no_rule_raises_as_by_name() -> None:
    rules: dict[str, ir.Expr] = {"a": ir.literal("a")}
    for by_index in (True, False):
        sess = encode.Session()
        cids, graph, uses, by_idx = _dag.call_graph_ids(sess, dict(rules))
        with pytest.raises(KeyError):
            _dag.plan(sess, graph, cids, uses, "nope", set(), 64, 2000, None, by_idx if by_index else None)


def test_components_plan_uses_the_arrays_and_matches_the_python_loop() -> None:
    """``components._plan`` (by index) against ``reference_encode.plan`` on the wide grammar."""
    from .reference_encode import plan as reference_plan

    g = _wide()
    limits = CompileLimits(inline_max_states=2000)
    got = []
    for plan in (components._plan, reference_plan):
        sess = encode.Session()
        rules = dict(g.rules)
        sess.cids(rules)
        got.append((plan(rules, g.start, set(), limits, sess), sess.code.tolist(), sess.names))
    assert got[0] == got[1]


_item = st.sampled_from([ir.literal("ab"), ir.CharClass(((48, 57),)), ir.Ref("r")])


@st.composite
def _repeats(draw: st.DrawFn, depth: int = 3) -> ir.Expr:
    """Nested repetitions, bounds by 1 or more, some invalid (hi below lo)."""
    if depth == 0 or draw(st.booleans()):
        return draw(_item)
    kind = draw(st.sampled_from(["seq", "alt", "rep"]))
    if kind == "rep":
        lo = draw(st.integers(0, 3))
        hi = draw(st.sampled_from([None, 0, 1, 2, 40, lo]))
        return ir.Repeat(draw(_repeats(depth - 1)), lo, hi)
    items = tuple(draw(st.lists(_repeats(depth - 1), min_size=1, max_size=3)))
    return ir.Seq(items) if kind == "seq" else ir.Alt(items)


@settings(max_examples=80, deadline=None)
@given(_repeats())
def test_clean_by_the_flag_as_by_the_walks(e: ir.Expr) -> None:
    """``Clean`` (with its shortcut) and ``clean_py`` give the same answer on every node, and a
    node with maxprod 1 and valid bounds is clean."""
    sess = encode.Session()
    rules = {"r": ir.literal("x"), "top": e}
    sess.cids(rules)
    limits = CompileLimits()
    fast, slow = RepeatRewriter(rules, limits, sess), RepeatRewriter(rules, limits, sess)
    it = sess.interner
    for c in range(len(it.keys)):
        got = fast.clean(c)
        assert got == slow.clean_py(c)
        key = it.keys[c]
        if it.maxprod[c] == 1 and key[0] == encode._REPEAT and key[3] is not None and key[3] < key[2]:
            assert not got  # invalid bounds are never clean, whatever the product
