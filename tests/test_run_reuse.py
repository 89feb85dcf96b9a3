"""A name's whole-trie run walk built from the stored walks of its first bytes' subtrees
(csrc/loops.c ``run_part_stored``, loopstore.c ``cm_walk_store_append_run``).

A name start (arithmetic's `call`, its first letter) walks each letter's subtree through the
vocabulary's run walk of (run, that subtree, depth 1); a name state of the same run (the variable
inside `primary`, after `(a`) walks the whole trie through the run walk of (run, whole trie,
depth 0), which goes one first byte at a time, each byte of the run that same subtree scan.  With
``_core.run_parts_enable`` on (the default) a byte whose subtree walk is stored takes it (its
tokens and its exits, in order) instead of scanning again; ``run_parts_hits()`` counts them.

Every state's entry is compared with the switch off and with whole walks on the shipped grammars
with Llama-3, the masks along arithmetic's benchmark documents in order from a cold cache, and
hypothesis grammars with a name in two places (the same run or not) over random vocabularies:
entries on, off and whole walks, and the masks along random walks against the reference matcher.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_name_runs import ARITHMETIC_DOCS, RUNS, RUNS_COMPOSED, _grammar, names_walk_agrees


def _entries(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    on: bool,
    strategy: Strategy | None = None,
    reverse: bool = False,
) -> list:
    """Every state's entry, built in order (or from the last state back: a name start's
    subtrees before a name state's whole walk where the start comes later), by state."""
    with core_switch(_core.run_parts_enable, on):
        compiled = cfgmask.compile(g, vocab, _strategy=strategy or Strategy())
        if not reverse:
            return entries(compiled)
        n = compiled.tables.n_states
        return [compiled._handle.entry(s) for s in range(n - 1, -1, -1)][::-1]


def assert_same_entries(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    strategy: Strategy | None = None,
    walks: bool = True,
    reverse: bool = False,
) -> int:
    """Every state's entry (states built in order or reversed, caches cleared first) the same
    with the switch on and off, and equal to whole walks; the subtrees taken from the store with
    it on."""
    before = _core.run_parts_hits()
    on = _entries(g, vocab, True, strategy, reverse)
    taken = _core.run_parts_hits() - before
    before = _core.run_parts_hits()
    same_entries(on, _entries(g, vocab, False, strategy, reverse), "switch off")
    assert _core.run_parts_hits() == before, "a stored subtree was taken while off"
    if walks:
        same_entries(on, _entries(g, vocab, True, WALKS_ONLY), "whole walks")
    return taken


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "c.gbnf", "sql.gbnf", "json.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """arithmetic's variable takes `call`'s letters' subtree walks."""
    hits = assert_same_entries(shipped(name), cfgmask.Vocabulary.llama3(), walks=name != "c.gbnf")
    if name == "arithmetic.gbnf":
        assert hits > 0


def test_arithmetic_documents_cold_pass_same_masks() -> None:
    """bench_gbnf's cold pass: the grammar compiled once, its documents in order from a cold
    cache (the variable's walk after `(a` is the second document's); every mask the same with
    the switch on and off, and stored subtrees taken only when on."""
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("arithmetic.gbnf")
    docs = [_longest_tokens(vocab, d) for d in ARITHMETIC_DOCS]
    out = {}
    for on in (True, False):
        before = _core.run_parts_hits()
        with core_switch(_core.run_parts_enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
        taken = _core.run_parts_hits() - before
        assert taken > 0 if on else taken == 0, (on, taken)
    same_document_masks(out[True], out[False], docs)


# test_name_runs's grammar, a name in two places: inline in `primary` (a name state of its own,
# over the whole trie) and before a call's parenthesis (a name start, its first bytes' subtrees);
# NAME and CALL the same run or not.  Only a run holding every name byte ([0-9A-Za-z_]) is walked
# a first byte at a time.
NAMES = ("[a-zA-Z_] [a-zA-Z0-9_]*", "[a-zA-Z0-9_]+", "[a-z] [a-z0-9]*", "[a-b] [a-zA-Z0-9_]*")
PIECES = (
    b"a", b"ab", b"ab(", b"(a", b"(ab", b"a1", b"a_b", b" a", b"x", b"xy", b"b)", b"1", b"12",
    b"(", b")", b",", b", ", b" ", b"  ", b"+", b" +", b"-", b"*", b"z(", b"m,", b"a b", b"Q_9",
)  # fmt: skip
# RUNS keeps every run walk, however few entries a first byte leads; without chains and composed
# entries (which take these small grammars' name states otherwise) the stored subtrees are
# reached, with them (RUNS_COMPOSED) the default's order is checked.


def _all_names_vocab() -> cfgmask.Vocabulary:
    return _vocab(Vocab(tokens=[None, *(bytes([b]) for b in range(32, 127)), *PIECES], stop_ids=(0,)))


def test_same_run_twice_takes_stored_subtrees() -> None:
    """The hypothesis grammars reach the stored subtrees where the two names share a run of
    every name byte (else the random tests would compare the switch's absence with itself)."""
    hits = assert_same_entries(_grammar(NAMES[0], NAMES[0]), _all_names_vocab(), RUNS, reverse=True)
    assert hits > 0


def test_other_runs_take_none() -> None:
    """A run short of a name byte is scanned whole (its subtrees not taken)."""
    assert assert_same_entries(_grammar(NAMES[2], NAMES[2]), _all_names_vocab(), RUNS, reverse=True) == 0


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
    vocabularies(PIECES),
    st.sampled_from((RUNS, RUNS_COMPOSED)),
    st.booleans(),
)
def test_random_name_grammars_same_entries(
    name: str, call: str, v: Vocab, strategy: Strategy, reverse: bool
) -> None:
    assert_same_entries(_grammar(name, call), _vocab(v), strategy, reverse=reverse)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), vocabularies(PIECES), st.data())
def test_random_name_grammars_masks_equal_reference(
    name: str, call: str, v: Vocab, data: st.DataObject
) -> None:
    """The masks along random walks with the stored subtrees on: the reference matcher's, and
    those of whole walks."""
    names_walk_agrees(name, call, v, data, _core.run_parts_enable)
