"""cm_grammar_new (csrc/grammar.c) checks the tables it is given: targets in range, every
transition inside its state's rule, rule numbers in range.  Checked on the compiled tables
(states in rule order, the compiler's layout), on the same tables with the rules renumbered so
that the states are out of rule order (still valid: the same masks), and on broken copies of
each."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.compiled import MatcherLimits, _settings
from cfgmask.compile.strategy import DEFAULT
from cfgmask.compile.tables import Tables
from cfgmask.errors import MatcherError

VOCAB = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b'{"', b'":', b"12"])
GRAMMAR = r"""
root ::= "{" pair ("," pair)* "}"
pair ::= key ":" value
key ::= "\"" [a-z]+ "\""
value ::= [0-9]+ | key | root
"""


def _tables() -> Tables:
    c = cfgmask.compile(cfgmask.Grammar.from_gbnf(GRAMMAR), VOCAB)
    t = c.tables
    assert t.n_states > 10 and len(t.rule_names) >= 2
    assert np.all(np.diff(t.state_rule.astype(np.int64)) >= 0)  # the compiler's layout
    return t


def _handle(t: Tables) -> object:
    return _core.GrammarHandle(t, VOCAB._handle(), list(VOCAB.stop_ids), _settings(MatcherLimits(), DEFAULT))


def _renumbered(t: Tables) -> Tables:
    """The rules numbered backwards: every state's rule changes, so state_rule decreases."""
    n = len(t.rule_names)
    new = np.arange(n)[::-1].astype(np.uint32)  # old rule r -> new[r]
    order = np.argsort(new)  # new rule q was old rule order[q]
    la = t.rule_la[order].copy() if t.rule_la.size else t.rule_la
    return dataclasses.replace(
        t,
        rule_names=[t.rule_names[i] for i in order],
        start_rule=int(new[t.start_rule]),
        state_rule=new[t.state_rule],
        ref_rule=new[t.ref_rule] if t.ref_rule.size else t.ref_rule,
        rule_start=t.rule_start[order].copy(),
        rule_nullable=t.rule_nullable[order].copy(),
        rule_follow=t.rule_follow.reshape(n, 8)[order].reshape(-1).copy(),
        rule_la=la,
    )


def _masks(t: Tables, text: bytes) -> list[bytes]:
    c = cfgmask.CompiledGrammar(cfgmask.Grammar.from_gbnf(GRAMMAR), VOCAB, t, MatcherLimits())
    m = cfgmask.Matcher(c)
    mask = cfgmask.allocate_bitmask(1, VOCAB.size)
    out = []
    for b in text:
        m.fill_bitmask(mask, 0)
        out.append(mask.tobytes())
        assert m.accept_bytes(bytes([b]))
    return out


def test_renumbered_rules_give_the_same_masks() -> None:
    t = _tables()
    r = _renumbered(t)
    assert np.any(np.diff(r.state_rule.astype(np.int64)) < 0)  # out of rule order
    text = b'{"ab":12,"c":{"d":"e"}}'
    assert _masks(r, text) == _masks(t, text)


def _cross_rule(t: Tables) -> Tables:
    """A transition from the first state of the last rule into a state of another rule."""
    trans = t.trans.copy()
    s = int(t.rule_start[t.state_rule[-1]])
    other = int(np.flatnonzero(t.state_rule != t.state_rule[s])[0])
    trans[s, 0] = other
    return dataclasses.replace(t, trans=trans)


def _cross_rule_next_door(t: Tables) -> Tables:
    """A transition from a rule's last state to the first state of the next rule (just past
    the run of its states)."""
    trans = t.trans.copy()
    sr = t.state_rule.astype(np.int64)
    s = int(np.flatnonzero(np.diff(sr) != 0)[0])  # last state of the first run
    trans[s, 0] = s + 1
    return dataclasses.replace(t, trans=trans)


def _out_of_range(t: Tables) -> Tables:
    trans = t.trans.copy()
    trans[0, 0] = t.n_states
    return dataclasses.replace(t, trans=trans)


def _below_none(t: Tables) -> Tables:
    """A target below -1 (none) in the last class of the last state (the checks walk runs of
    equal targets: the end of the last row is a run's end)."""
    trans = t.trans.copy()
    trans[-1, -1] = -2
    return dataclasses.replace(t, trans=trans)


def _bad_rule(t: Tables) -> Tables:
    sr = t.state_rule.copy()
    sr[-1] = len(t.rule_names)
    return dataclasses.replace(t, state_rule=sr)


BREAKAGES = [_cross_rule, _cross_rule_next_door, _out_of_range, _below_none, _bad_rule]


@pytest.mark.parametrize("layout", ["compiled", "renumbered"])
@pytest.mark.parametrize("breakage", BREAKAGES)
def test_broken_tables_are_refused(layout: str, breakage) -> None:  # type: ignore[no-untyped-def]
    t = _tables()
    if layout == "renumbered":
        t = _renumbered(t)
    _handle(t)  # the tables as they are: accepted
    with pytest.raises(MatcherError, match="invalid argument"):
        _handle(breakage(t))
