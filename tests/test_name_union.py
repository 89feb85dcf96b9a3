"""Name sets set once (csrc/loops.h ``cm_name_sets_enable``): a name's whole-trie run walk ORs
the vocabulary's set of every name byte's name tokens (vocab.h ``name_all``) instead of setting
each byte's ids; a walk that holds a first byte's name tokens already -- set by its own walks, or
by a part of a composed entry (``cm_entry.names``) -- does not set them again (arithmetic's
`primary`: its variable's letters after `call`'s); a run entry finds its letters' run once.

With ``_core.name_sets_enable`` on (the default) ``name_sets_hits()`` counts (unions taken, name
sets skipped).  Every state's entry is compared with the switch off and with whole walks on the
shipped grammars with Llama-3, the masks along arithmetic's benchmark documents in order from a
cold cache, and hypothesis grammars with a name in two places over random vocabularies that hold
enough names after one letter for a flat walk to take them in bulk: entries on, off and whole
walks, and the masks along random walks against the reference matcher.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_entries, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_name_runs import ARITHMETIC_DOCS, RUNS, RUNS_COMPOSED, _grammar
from .test_run_reuse import NAMES, PIECES


def _entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy | None = None
) -> list:
    with core_switch(_core.name_sets_enable, on):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy or Strategy()))


def _hits() -> np.ndarray:
    return np.array(_core.name_sets_hits())


def assert_same_entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, strategy: Strategy | None = None, walks: bool = True
) -> np.ndarray:
    """Every state's entry the same with the switch on and off (caches cleared between), and equal
    to whole walks; the (unions, skips) counted while on."""
    before = _hits()
    on = _entries(g, vocab, True, strategy)
    taken = _hits() - before
    before = _hits()
    same_entries(on, _entries(g, vocab, False, strategy), "switch off")
    assert (_hits() == before).all(), "a name set was taken or skipped while off"
    if walks:
        same_entries(on, _entries(g, vocab, True, WALKS_ONLY), "whole walks")
    return taken


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "c.gbnf", "sql.gbnf", "json.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """arithmetic: the variable's whole walk takes the union, `primary` skips its letters."""
    unions, skipped = assert_same_entries(shipped(name), cfgmask.Vocabulary.llama3(), walks=name != "c.gbnf")
    if name == "arithmetic.gbnf":
        assert unions > 0 and skipped > 0, (unions, skipped)


def _cold_pass(docs: list[list[int]], on: bool) -> tuple[list, np.ndarray]:
    """The masks along each document from a cold cache, with the switch on or off, and the
    (unions, skips) counted meanwhile."""
    before = _hits()
    with core_switch(_core.name_sets_enable, on):
        compiled = cfgmask.compile(shipped("arithmetic.gbnf"), cfgmask.Vocabulary.llama3())
        masks = [m for doc in docs for m in masks_along(compiled, doc)]
    return masks, _hits() - before


def test_arithmetic_documents_cold_pass_same_masks() -> None:
    """bench_gbnf's cold pass: every mask the same with the switch on and off, both shortcuts
    counted only when on."""
    vocab = cfgmask.Vocabulary.llama3()
    docs = [_longest_tokens(vocab, d) for d in ARITHMETIC_DOCS]
    (on, counted), (off, none) = _cold_pass(docs, True), _cold_pass(docs, False)
    assert (counted > 0).all() and (none == 0).all(), (counted, none)
    assert len(on) == len(off) == sum(len(d) for d in docs)
    differ = [i for i, (x, y) in enumerate(zip(on, off, strict=True)) if not np.array_equal(x, y)]
    assert not differ, f"masks {differ} differ"


# 80 names after `a` (a flat walk takes a first byte's names in bulk from 64 on), a few
# tokens that leave the name after it, and some after `b`
NAME_BLOCK = (
    *(b"a" + bytes([c, d]) for c in b"abcdefgh" for d in b"xyz0_"),
    *(b"a" + bytes([c]) for c in b"bcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"),
    b"a(", b"a)", b"a,", b"a ", b"ab(", b"ab)", b"a+", b"b1", b"bq", b"b_", b"b(",
)  # fmt: skip
# a composed `primary` beside `call` (the name start whose letters mark the names)
COMPOSED = Strategy(run_walks=1, count_chains=False)


def _with_names(v: Vocab) -> Vocab:
    return Vocab([*v.tokens, *NAME_BLOCK], v.stop_ids, v.special_ids)


def _names_vocab() -> Vocab:
    return _with_names(Vocab(tokens=[None, *(bytes([b]) for b in range(32, 127)), *PIECES], stop_ids=(0,)))


@pytest.mark.parametrize("strategy", [RUNS, RUNS_COMPOSED, COMPOSED])
def test_same_run_twice_takes_union(strategy: Strategy) -> None:
    """The hypothesis grammars reach the union where the two names share a run of every name byte
    (else the random tests would compare the switch's absence with itself).  They do not reach
    the skip (no composed state of theirs ORs a part with its letters' names marked): the
    shipped arithmetic with Llama-3 does, above."""
    unions, _ = assert_same_entries(_grammar(NAMES[0], NAMES[0]), _vocab(_names_vocab()), strategy)
    assert unions > 0, unions


def test_other_runs_take_no_union() -> None:
    """A run short of a name byte ([a-z0-9]) has no names counted, so no union."""
    unions, _ = assert_same_entries(_grammar(NAMES[2], NAMES[2]), _vocab(_names_vocab()), RUNS_COMPOSED)
    assert unions == 0


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
    vocabularies(PIECES),
    st.sampled_from((RUNS, RUNS_COMPOSED, COMPOSED)),
)
def test_random_name_grammars_same_entries(name: str, call: str, v: Vocab, strategy: Strategy) -> None:
    assert_same_entries(_grammar(name, call), _vocab(_with_names(v)), strategy)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), vocabularies(PIECES), st.data())
def test_random_name_grammars_masks_equal_reference(
    name: str, call: str, v: Vocab, data: st.DataObject
) -> None:
    """The masks along random walks with the shortcuts on: the reference matcher's, and those of
    whole walks."""
    g = _grammar(name, call)
    ref_m = ReferenceMatcher(g.ir)
    v = _with_names(v)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    with core_switch(_core.name_sets_enable, True):
        composed = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=COMPOSED))
        whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
        walk_agrees(
            ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, composed=composed, whole=whole
        )
