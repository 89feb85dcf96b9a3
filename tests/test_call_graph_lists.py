"""``_dag.call_graph``'s callees as sorted lists (docs/design.md §7, helper ``glue46``): each rule's
list is ``sorted`` of the rule set its body refers to (``Interner.refs``), whether sorted by
insertion (two to eight names, compared in place) or by ``list.sort`` (more), for names in any
script (code point order), and the plan built from them is the Python loop's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.compile import components, encode
from cfgmask.compile.limits import CompileLimits

from .test_compile_passes import _outcome, _planned

# names that sort differently by code point than by case, accent or width (and one past the BMP)
NAMES = ["a", "B", "Z", "_x", "é", "e", "ä", "Ä", "zz", "z", "é2", "\U0001d538", "ſ", "a_b", "ab"]


def _grammar(calls: dict[str, list[str]]) -> ir.Grammar:
    """A rule for each name, calling the names given in that order (then a literal: productive)."""
    rules: dict[str, ir.Expr] = {}
    for name in NAMES:
        callees = calls.get(name, [])
        alts = [ir.Seq((ir.literal("("), ir.Ref(c), ir.literal(")"))) for c in callees]
        rules[name] = ir.Alt((ir.literal(f"<{name}>"), *alts)) if alts else ir.literal(f"<{name}>")
    rules["top"] = ir.Alt(tuple(ir.Ref(n) for n in NAMES))
    return ir.Grammar(rules, "top")


def _lists_are_sorted_refs(g: ir.Grammar) -> None:
    sess = encode.Session()
    rules = dict(g.rules)
    cids, graph, uses = components.call_graph(rules, sess)
    assert graph.keys() == rules.keys()
    for name, c in cids.items():
        assert type(graph[name]) is list
        assert graph[name] == sorted(sess.interner.refs[c]), name
    # the uses capped at 2, in the order the rules' uses meet the names (glue47: a name met first
    # is inserted by the probe that looks it up); the loop it replaced, in Python
    want: dict[str, int] = {}
    for c in cids.values():
        for n, v in sess.interner.uses[c].items():
            want[n] = min(2, want.get(n, 0) + v)
    assert list(uses.items()) == list(want.items())


def test_callee_lists_of_every_length_in_code_point_order() -> None:
    """Rules calling 0 to all 15 names (both sorts), each list in its body's order reversed."""
    calls = {n: list(reversed(NAMES[: i + 1])) for i, n in enumerate(NAMES)}
    _lists_are_sorted_refs(_grammar(calls))


def _calls(most: int) -> st.SearchStrategy[dict[str, list[str]]]:
    """Rules (some of NAMES) and the names each calls, up to ``most``."""
    name = st.sampled_from(NAMES)
    return st.dictionaries(name, st.lists(name, max_size=most), max_size=len(NAMES))


@settings(max_examples=60, deadline=None)
@given(_calls(12))
def test_random_callees_are_sorted_refs(calls: dict[str, list[str]]) -> None:
    """Random call lists (repeats, self calls, cycles) give the sorted rule sets."""
    _lists_are_sorted_refs(_grammar(calls))


@settings(max_examples=15, deadline=None)
@given(_calls(6))
def test_plan_from_the_lists_matches_the_python_loop(calls: dict[str, list[str]]) -> None:
    """The plan, encoded IR and DFAs from the lists as the Python loop's from the rule sets."""
    g = _grammar(calls)
    limits = CompileLimits(max_dfa_states=2000, inline_max_states=2000)
    got = [_outcome(lambda p=python: _planned(g, set(), limits, None, p)) for python in (False, True)]  # type: ignore[misc]
    assert got[0] == got[1]
