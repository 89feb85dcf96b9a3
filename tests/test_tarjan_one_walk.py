"""One Tarjan walk over arrays (docs/design.md §7, helper ``glue50``): ``_dag.sccs_all`` and the
plan without ``call_graph_ids``' arrays number their graph by name (``calls_of``) and take the
walk the plan takes by index, so their components are still the Python walk's, in its order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.compile import _dag, encode, graph

from .test_call_graph_lists import NAMES

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
