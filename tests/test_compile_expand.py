"""A rule used once is expanded in its caller's NFA (csrc/components.c, CM_IR_REF_EXPAND)
instead of being built on its own and copied: the tables are those of the reference, which
builds every rule on its own (tests/reference_pipeline.py), whether the expansion holds, its
estimate is over the inline cap (the rule is built on its own after all), or the caller's
build fails a limit with it (the rule is built on its own and the caller's ladder runs)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cfgmask import _core, ir
from cfgmask.compile.limits import CompileLimits
from cfgmask.frontends.gbnf import parse_gbnf

from .strategies import SMALL, grammars
from .test_compile_passes import _outcome, _rule_dfas, _tables

CHAIN = r"""
root ::= "[" item "]"
item ::= key ":" ws val
key ::= "\"" [a-z]+ "\""
val ::= num | "null"
num ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= " "?
"""


def _same(fn: Any) -> Any:
    """fn()'s outcome, an error without the rule it names (the reference does not name one)."""
    got = _outcome(fn)
    return (got[0], re.sub(r"^rule '[^']*': ", "", got[1])) if isinstance(got, tuple) else got


def _builds(fn: Any) -> tuple[Any, int]:
    """fn()'s outcome and the subset constructions it ran."""
    _core.compile_stats_enable(True)
    try:
        _core.compile_stats()
        got = _outcome(fn)
        builds = int(_core.compile_stats()["builds"])
    finally:
        _core.compile_stats_enable(False)
        _core.compile_stats()
    return got, builds


def test_a_chain_of_rules_used_once_is_built_once() -> None:
    g = parse_gbnf(CHAIN)
    dfas, builds = _builds(lambda: _rule_dfas(g, True))
    assert set(dfas) == {"root"} and builds == 1  # item, key, val, num, ws: expanded in root
    assert _tables(g, True) == _tables(g, False)


def test_an_estimate_over_the_cap_builds_the_rule_on_its_own() -> None:
    g = parse_gbnf(CHAIN)
    # num's NFA is over 8 states: built on its own (then too big to copy: a call)
    limits = CompileLimits(inline_max_states=8, inline_shared_states=4)
    got, builds = _builds(lambda: _tables(g, True, limits))
    assert isinstance(got, dict) and got == _tables(g, False, limits)
    assert builds > 1


def test_a_caller_over_the_limit_with_the_expansion_falls_back() -> None:
    # x ("ab" | "cd") expanded: 5 subset states; y's minimal DFA copied: 4 (no tail in
    # common: "ab" | "cb" shares its "b", and its subset construction passes through 3)
    g = parse_gbnf('root ::= "x" y\ny ::= "ab" | "cd"\n')
    for cap in range(2, 8):
        limits = CompileLimits(max_dfa_states=cap)
        want = _same(lambda limits=limits: _tables(g, False, limits))
        assert _same(lambda limits=limits: _tables(g, True, limits)) == want
    # y alone is over 3 states: the error names it, as when it was built on its own first
    assert "rule 'y'" in _outcome(lambda: _tables(g, True, CompileLimits(max_dfa_states=3)))[1]
    got, builds = _builds(lambda: _tables(g, True, CompileLimits(max_dfa_states=4)))
    assert isinstance(got, dict) and builds == 2  # y on its own, then root with its copy


def test_a_long_chain_is_cut() -> None:
    """C recurses on nested expansions: a chain of rules used once is cut every 256 rules
    (_dag.pyx MAX_NEST), the rule at the cut built on its own."""
    n = 600
    g = parse_gbnf(
        "\n".join([f'r{i} ::= "a" r{i + 1}' for i in range(n)] + [f'r{n} ::= "b"']).replace("r0 ", "root ", 1)
    )
    got, builds = _builds(lambda: _tables(g, True))
    assert isinstance(got, dict) and got == _tables(g, False)
    assert builds == 3  # r345 and r89 on their own (at 256 rules each from the end), then root


@given(grammars(alphabet=SMALL), st.sampled_from(((2000, 64), (16, 4), (4, 2), (8, 8))))
def test_expansions_give_the_reference_tables_under_small_caps(g: ir.Grammar, caps: tuple[int, int]) -> None:
    """Estimates near the inline caps: the same rules expanded, copied or called."""
    limits = CompileLimits(inline_max_states=caps[0], inline_shared_states=caps[1])
    assert _same(lambda: _tables(g, True, limits)) == _same(lambda: _tables(g, False, limits))


@given(grammars(alphabet=SMALL), st.sampled_from((3, 6, 12, 40)))
def test_expansions_compile_what_the_reference_compiles(g: ir.Grammar, max_states: int) -> None:
    """Under a small max_dfa_states: a caller's subset construction with a callee expanded can
    fit where the one with its minimal DFA copied does not (a copy's states stay apart from the
    caller's until minimization), so the expansion may hold where the reference fell back to
    less inlining; never the other way (a failed expansion falls back to the reference's
    ladder), and errors are the reference's.  Shared tails in C's Thompson construction
    (tests/test_thompson_tails.py) fit more: where only the reference hits the limit, C's
    outcome is the unlimited one (tables, or the error of an empty language)."""
    limits = CompileLimits(max_dfa_states=max_states)
    got, want = _same(lambda: _tables(g, True, limits)), _same(lambda: _tables(g, False, limits))
    if got != want and not isinstance(got, dict):
        assert isinstance(want, tuple) and want[0] == "LimitError" and "max_dfa_states" in want[1]
        assert got == _same(lambda: _tables(g, False))


def test_a_counted_copy_of_a_prefix_free_callee_is_bounded_by_its_chain() -> None:
    """s ::= c{0,N} with c's DFA D copied (used twice) and prefix-free: s's DFA has at most
    N x (|D| - 1) + 1 states (components.c, chain_bound), below the NFA count N x (|D| + 1), so s
    is expanded at that cap and not one state under it (a call then: its DFA is over the cap).
    A c with a word that is a prefix of another ("a" | "ab") keeps the NFA count."""
    n = 10
    for body, bound in (('[a-c] | "\\\\" [nt]', 2 * n + 1), ('"a" | "ab"', 4 * n + 2)):
        g = parse_gbnf(f'root ::= "q" s "q" | "<" c ">"\ns ::= c{{0,{n}}}\nc ::= {body}\n')
        for cap, builds in ((bound - 1, 3), (bound, 2)):  # c, s on its own, root; or c, root
            limits = CompileLimits(inline_max_states=cap)
            got = _builds(lambda g=g, limits=limits: _tables(g, True, limits))
            assert got == (_tables(g, False, limits), builds), (body, cap)


def test_a_body_over_its_estimate_is_expanded_on_trial_within_the_cap() -> None:
    """y's branches share t (a group: one node): its NFA count (count_states, 22) with a start and
    a final state is over the cap, its count with shared nodes once (dag_states) and its minimal
    DFA (12) are not: it is expanded in root on trial, root's subset construction counting y's own
    state sets (components.c, fsm.c cm_expand_watch): one build, root's, the reference's tables."""
    t = " ".join(f'"{c}" [0-9]' for c in "qrstu")
    g = parse_gbnf(f'root ::= "x" y "z" | "<" [a-z] ">"\ny ::= [a-b] ({t}) | [c-d] ({t})\n')
    for cap in (22, 23):  # (the reference: y alone, then root)
        limits = CompileLimits(inline_max_states=cap)
        got = _builds(lambda limits=limits: _tables(g, True, limits))
        assert got == (_tables(g, False, limits), 1), cap


def test_a_body_inside_an_expanded_callee_is_tried_too() -> None:
    """y's branches share a group (an ALT: one node): NFA count 38, dag_states 21.  y sits inside
    p, itself expanded in root: y is tried there too (sp_0's 12 such trials were built on their
    own), p counts y by its dag_states (25: within the cap) and stays expanded: one build, root's,
    the reference's tables (the reference: y alone, p alone, then root)."""
    t = " ".join(f'"{c}" [0-9]' for c in "qrstuvwx")
    y = f'[a-b] ({t} | "k") | [c-d] ({t} | "k")'
    g = parse_gbnf(f'root ::= "x" p "z" | "<" [a-z] ">"\np ::= "(" y ")" | "-"\ny ::= {y}\n')
    for cap in (28, 32, 38):
        limits = CompileLimits(inline_max_states=cap)
        got = _builds(lambda limits=limits: _tables(g, True, limits))
        assert got == (_tables(g, False, limits), 1), cap


def test_a_nested_trial_over_the_cap_is_refused() -> None:
    """y = x x x x x x (x one shared node: dag_states 12, DFA 19) inside p, expanded in root:
    tried inside p (p itself expanded, or tried at caps 15-16) and refused, then built on its own
    (a call: over the cap) and p counted again: two builds, y's and root's, and the reference's
    tables (a nested trial without its guard expands y: its tables differ)."""
    y = " ".join(['("ab" [0-9])'] * 6)
    g = parse_gbnf(f'root ::= "<" p ">" | "z"\np ::= "(" y | "-"\ny ::= {y}\n')
    for cap in (15, 16, 17, 18):
        limits = CompileLimits(inline_max_states=cap)
        got = _builds(lambda limits=limits: _tables(g, True, limits))
        assert got == (_tables(g, False, limits), 2), cap


def test_a_body_with_no_shared_node_is_not_tried() -> None:
    """y's NFA count (3 a branch, 30) is over the cap while its minimal DFA has 4 states, but no
    node of y is shared: its count with shared nodes once is 30 too, so no trial is made (sp_333's
    was refused late in its caller's build, +2 %): y is built on its own, then copied or called,
    as the reference decides (with a trial at cap 4 or 29: one build)."""
    branches = " | ".join(f'[{a}-{b}] "q" [0-9]' for a, b in zip("acegikmoqs", "bdfhjlnprt", strict=True))
    g = parse_gbnf(f'root ::= "x" y "z" | "<" [a-z] ">"\ny ::= {branches}\n')
    for cap in (3, 4, 29):  # y alone then root
        limits = CompileLimits(inline_max_states=cap)
        got = _builds(lambda limits=limits: _tables(g, True, limits))
        assert got == (_tables(g, False, limits), 2), cap


def test_a_trial_whose_own_nfa_is_over_the_cap_is_refused() -> None:
    """y = x x x x x x with x one shared node ("ab" [0-9]): counted once (dag_states, 5 + 2 = 7)
    it is within the cap, so y is tried, but its own NFA (x built six times) and its DFA (19
    states) are over it: the trial is refused (in Thompson's pass or by the count) and y is
    built on its own, then called; the reference's tables."""
    g = parse_gbnf('root ::= "<" y ">" | "z"\ny ::= ' + " ".join(['("ab" [0-9])'] * 6) + "\n")
    for cap in (7, 12, 18):
        limits = CompileLimits(inline_max_states=cap)
        got = _builds(lambda limits=limits: _tables(g, True, limits))
        assert got == (_tables(g, False, limits), 2), cap


def test_a_trial_entered_again_while_running_is_refused() -> None:
    """y under a loop of its caller, its language a count of itself: a set of root's subset
    construction holds y's entry beside states of an earlier entry, so the count says nothing
    of y's own DFA and the trial stops there (y built on its own and copied): the reference's
    tables at every cap."""
    g = parse_gbnf('root ::= ("x" y)+\ny ::= [a-b] "x"? [0-9] | [c-d] "x"? [0-9] | [e-f] "xx"? [0-9]\n')
    for cap in range(2, 14):
        limits = CompileLimits(inline_max_states=cap)
        want = _same(lambda limits=limits: _tables(g, False, limits))
        assert _same(lambda limits=limits: _tables(g, True, limits)) == want
