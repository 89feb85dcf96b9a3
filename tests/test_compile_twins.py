"""Components with the same body are built once per compile (csrc/components.c copies the
first one's automaton): the copies are the automata the reference builds, and they are not
built again (the core's build counters).  (Each twin is used twice: a rule used once is
expanded in its caller instead, tests/test_compile_expand.py.)"""

from __future__ import annotations

from cfgmask import _core
from cfgmask.frontends.gbnf import parse_gbnf

from .test_compile_passes import _outcome, _rule_dfas

TWINS = r"""
root ::= a "," b "," c "," d | a b c d
a ::= [x-z]+ "!" | "(" [0-9]* ")"
b ::= [x-z]+ "!" | "(" [0-9]* ")"
c ::= [x-z]+ "!" | "(" [0-9]* ")"
d ::= [x-z]+ "?"
"""


def test_twins_are_the_reference_automata() -> None:
    g = parse_gbnf(TWINS)
    assert _outcome(lambda: _rule_dfas(g, True)) == _outcome(lambda: _rule_dfas(g, False))


def test_twins_are_built_once() -> None:
    g = parse_gbnf(TWINS)
    _core.compile_stats_enable(True)
    try:
        _core.compile_stats()
        dfas = _rule_dfas(g, True)
        builds = _core.compile_stats()["builds"]
    finally:
        _core.compile_stats_enable(False)
        _core.compile_stats()
    assert dfas["a"] == dfas["b"] == dfas["c"] != dfas["d"]
    assert builds == len(dfas) - 2  # b and c are copies of a
