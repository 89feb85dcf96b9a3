"""One Tarjan walk over arrays (docs/design.md §7, helper ``glue50``): ``_dag.sccs_all`` and the
plan without ``call_graph_ids``' arrays number their graph by name (``calls_of``) and take the
walk the plan takes by index, so their components are still the Python walk's, in its order;
and the rules' uses counted in those arrays (``call_graph_ids(sess, rules, False)``, no uses
dict) give the plan the uses dict gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.compile import _dag, encode, graph
from cfgmask.compile.limits import CompileLimits

from .test_call_graph_lists import NAMES, _calls, _grammar
from .test_plan_by_index import _plans
from .test_plan_numbers import _wide

_name = st.sampled_from(NAMES + [f"r{i}" for i in range(20)])


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(_name, st.frozensets(_name, max_size=5), max_size=35))
def test_sccs_all_over_the_arrays_is_the_python_walk(g: dict[str, frozenset[str]]) -> None:
    """Many roots, long cycles, callees outside the graph (dropped), names in any script."""
    assert graph.sccs_all(g) == graph.sccs_all_py(g)


def test_a_chain_past_the_first_edge_room() -> None:
    """A cycle through 300 rules, each calling every rule of a fan (the edge slots grow)."""
    g = {f"c{i}": frozenset({f"c{(i + 1) % 300}", "f0", "f1", "f2"}) for i in range(300)}
    g.update({f"f{i}": frozenset({"outside"}) for i in range(3)})
    got = graph.sccs_all(g)
    assert got == graph.sccs_all_py(g)
    assert sorted(map(len, got)) == [1, 1, 1, 300]


def test_a_callee_that_is_no_rule_and_is_not_reached() -> None:
    """A rule calling an undefined name that the start does not reach: the plan by name (the arrays
    not ``ok``) numbers the graph itself and plans what is reached, as the plan by index does
    without that rule."""
    rules: dict[str, ir.Expr] = {n: ir.literal(n) for n in NAMES[:3]}
    rules["top"] = ir.Alt(tuple(ir.Ref(n) for n in NAMES[:3]))
    planned = []
    for extra in (True, False):
        sess = encode.Session()
        given_rules = dict(rules)
        if extra:
            given_rules["zz_lost"] = ir.Seq((ir.Ref(NAMES[0]), ir.Ref("missing")))
        cids, g, uses, by_idx = _dag.call_graph_ids(sess, given_rules)
        got = _dag.plan(sess, g, cids, uses, "top", set(), 64, 2000, None, by_idx)
        planned.append([(members, spec[1], spec[2]) for members, _, spec in got])
    assert planned[0] == planned[1]
    assert sorted(m for members, _, _ in planned[0] for m in members) == sorted(rules)


def _plan_counted(g: ir.Grammar, limits: CompileLimits) -> Any:
    """The plan, code and names of ``g`` in a new session, the uses counted in the arrays
    (``call_graph_ids(.., False)``, as ``components._plan`` asks: no uses dict)."""
    sess = encode.Session()
    cids, g2, uses, by_idx = _dag.call_graph_ids(sess, dict(g.rules), False)
    assert uses is None
    shared, single = limits.inline_shared_states, limits.inline_max_states
    planned = _dag.plan(sess, g2, cids, None, g.start, set(), shared, single, limits, by_idx)
    return (planned, sess.code.tolist(), sess.names)


@pytest.mark.parametrize("shared", [0, 3, 64])
def test_uses_counted_in_the_arrays_plan_as_the_dict(shared: int) -> None:
    """Callees used once (expanded in their caller) and more (not), fans past eight callees
    (sorted by ``list.sort``, their indices looked up again) and fewer (sorted with them)."""
    limits = CompileLimits(inline_shared_states=shared, inline_max_states=2000)
    a, b = _plans(_wide(), limits)  # by index, by name (the graph numbered by ``calls_of``)
    assert a == b == _plan_counted(_wide(), limits)
    assert any(spec[4] for _, _, spec in a[0])  # some rule used once was marked to expand


@settings(max_examples=40, deadline=None)
@given(_calls(12))
def test_random_graphs_uses_in_the_arrays_as_in_the_dict(calls: dict[str, list[str]]) -> None:
    """Random call lists (a name called twice by one rule, by several, none), names in any script."""
    a, b = _plans(_grammar(calls), CompileLimits())
    assert a == b == _plan_counted(_grammar(calls), CompileLimits())


def test_a_callee_that_is_no_rule_with_the_uses_in_the_arrays() -> None:
    """The arrays not ``ok``: the plan numbers the graph itself and reads the uses counted by name
    index; reached, the undefined name raises as by name."""
    rules: dict[str, ir.Expr] = {n: ir.Seq((ir.literal(n), ir.Ref("leaf"))) for n in NAMES[:3]}
    rules["leaf"] = ir.literal("x")
    rules["top"] = ir.Alt(tuple(ir.Ref(n) for n in NAMES[:3]))
    rules["zz_lost"] = ir.Seq((ir.Ref(NAMES[0]), ir.Ref("missing")))
    got = []
    for with_uses in (True, False):
        sess = encode.Session()
        cids, g, uses, by_idx = _dag.call_graph_ids(sess, dict(rules), with_uses)
        got.append(_dag.plan(sess, g, cids, uses, "top", set(), 64, 2000, None, by_idx))
        with pytest.raises(KeyError):
            _dag.plan(sess, g, cids, uses, "zz_lost", set(), 64, 2000, None, by_idx)
    assert got[0] == got[1]
    assert not any(spec[4] for members, _, spec in got[1] if members == ["leaf"])  # used three times
