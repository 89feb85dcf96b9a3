"""Stored run walks taken by other strategies, and a run entry's unread first bytes skipped
(csrc/loops.c ``cm_run_stored``, ``cm_run_entry_stored``, ``gap_dead``).

A name state (one that calls nothing and loops on its run of bytes) walks the trie through the
vocabulary's run walk of (run, range, depth), kept for the next state with the same run.  Two
shortcuts use that:

* *stored whole walks*: a state whose whole run walk the vocabulary holds already (arithmetic's
  `call` name after `primary`'s variable: both loop on ``[a-zA-Z0-9_]``) takes it as its entry
  instead of its loop entry's own walk of the whole trie;
* *dead gaps*: a run entry (a name's start, `call`'s first letter) walked the ranges of first
  bytes between its run edges from its state at depth 0; where the state reads none of those
  bytes, calls nothing and reads no token, every entry there dies at its first byte and the
  range is skipped.

``_core.name_runs_enable`` switches both; ``name_run_hits()`` and ``run_gaps_skipped()`` count
them.  Every state's entry is compared with the switch off and with whole walks on the shipped
grammars with Llama-3, the masks along arithmetic's benchmark documents in order (the cold pass
that motivated it), and hypothesis grammars with a name in two places (the same run or not) over
random vocabularies, entries and the masks along random walks against the reference matcher.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped

Entry = tuple[np.ndarray, np.ndarray]


def _entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy | None = None
) -> list:
    with core_switch(_core.name_runs_enable, on):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy or Strategy()))


def _counts() -> tuple[int, int]:
    return _core.name_run_hits(), _core.run_gaps_skipped()


def assert_same_entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy | None = None, walks: bool = True
) -> tuple[int, int]:
    """Every state's entry (states built in order, caches cleared first) the same with the switch
    on and off, and equal to whole walks; (stored walks taken, gaps skipped) with it on."""
    before = _counts()
    on = _entries(g, vocab, True, strategy)
    taken = tuple(a - b for a, b in zip(_counts(), before, strict=True))
    before = _counts()
    same_entries(on, _entries(g, vocab, False, strategy), "switch off")
    assert _counts() == before, "a shortcut was taken while off"
    if walks:
        same_entries(on, _entries(g, vocab, True, WALKS_ONLY), "whole walks")
    return taken  # type: ignore[return-value]


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "c.gbnf", "sql.gbnf", "json.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """arithmetic's `call` name takes `primary`'s variable's whole walk, and `call`'s start skips
    the first bytes it cannot read."""
    hits, gaps = assert_same_entries(shipped(name), cfgmask.Vocabulary.llama3(), walks=name != "c.gbnf")
    if name == "arithmetic.gbnf":
        assert hits > 0 and gaps > 0, (hits, gaps)


ARITHMETIC_DOCS = (
    b"1 + 2 * 3",
    b"(a + b) * (c - d) / 2",
    b"sqrt(b ^ 2 - 4 * a * c) / (2 * a)",
    b"max(1, min(x, 10)) % 3",
    b"total_cost / (1 + tax_rate) * 100",
)


def test_arithmetic_documents_cold_pass_same_masks() -> None:
    """bench_gbnf's cold pass: the grammar compiled once, its documents in order from a cold
    cache; every mask the same with the switch on and off, and the shortcuts were taken."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("arithmetic.gbnf")
    docs = [_longest_tokens(vocab, d) for d in ARITHMETIC_DOCS]
    out = {}
    for on in (True, False):
        before = _counts()
        with core_switch(_core.name_runs_enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
        taken = [a - b for a, b in zip(_counts(), before, strict=True)]
        assert (taken[0] > 0 and taken[1] > 0) if on else taken == [0, 0], (on, taken)
    same_document_masks(out[True], out[False], docs)


# A name in two places: inline in `primary` (where the rule may end after it) and before a
# call's parenthesis; NAME and CALL the same run or not.
GRAMMAR = """root ::= ws expr ws
expr ::= primary ( ws [-+*] ws primary )*
primary ::= {name} | call | [0-9]+ | "(" ws expr ws ")"
call ::= {call} ws "(" ws ( expr ( ws "," ws expr )* )? ws ")"
ws ::= [ \\t]{{0,3}}
"""
NAMES = ("[a-zA-Z_] [a-zA-Z0-9_]*", "[a-z] [a-z0-9]*", "[a-z]+", "[a-b] [a-z_]*")
PIECES = (
    b"a", b"ab", b"ab(", b"(a", b"(ab", b"a1", b"a_b", b" a", b"x", b"xy", b"b)", b"1", b"12",
    b"(", b")", b",", b", ", b" ", b"  ", b"+", b" +", b"-", b"*", b"z(", b"m,", b"a b",
)  # fmt: skip
# every state's run walk and run entry, however few entries a first byte leads; without chains
# and composed entries (which take these small grammars' name states otherwise) both shortcuts
# are reached, with them the default's order is checked
RUNS = Strategy(run_walks=1, count_chains=False, compose_entries=False)
RUNS_COMPOSED = Strategy(run_walks=1)


def _grammar(name: str, call: str) -> cfgmask.Grammar:
    return cfgmask.Grammar.from_gbnf(GRAMMAR.format(name=name, call=call))


def names_walk_agrees(name: str, call: str, v: Vocab, data: st.DataObject, enable: Any) -> None:
    """The masks along a random walk of the grammar of NAME and CALL with the switch ``enable`` on
    (RUNS): the reference matcher's, and those of whole walks."""
    g = _grammar(name, call)
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    with core_switch(enable, True):
        runs = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=RUNS))
        whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, runs=runs, whole=whole)


def test_same_run_twice_takes_the_stored_walk() -> None:
    """The hypothesis grammars reach both shortcuts where the two names share their run (else
    the random tests would compare the switch's absence with itself)."""
    v = Vocab(tokens=[None, *(bytes([b]) for b in range(32, 127)), *PIECES], stop_ids=(0,))
    hits, gaps = assert_same_entries(_grammar(NAMES[0], NAMES[0]), _vocab(v), RUNS)
    assert hits > 0 and gaps > 0, (hits, gaps)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
    vocabularies(PIECES),
    st.sampled_from((RUNS, RUNS_COMPOSED)),
)
def test_random_name_grammars_same_entries(name: str, call: str, v: Vocab, strategy: Strategy) -> None:
    assert_same_entries(_grammar(name, call), _vocab(v), strategy)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), vocabularies(PIECES), st.data())
def test_random_name_grammars_masks_equal_reference(
    name: str, call: str, v: Vocab, data: st.DataObject
) -> None:
    """The masks along random walks with the shortcuts on: the reference matcher's, and those of
    whole walks."""
    names_walk_agrees(name, call, v, data, _core.name_runs_enable)
