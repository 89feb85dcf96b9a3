"""The vocabulary's per-first-byte name sets (csrc/vocab.c ``build_names``, ``cm_vocab_names``).

A name walk under first byte b takes b's name tokens at once: one OR of a bit set where b has
one, else the ids one by one.  Since session 35 a byte gets a set from n_words / 8 name tokens
on (``_core.name_sets_div``, default 8; 1 is the rule before, three sets at Llama-3).  The
switch is read when a vocabulary's trie is built, so each side builds its own vocabulary.

Compared: every state's entry of c.gbnf and sql.gbnf with Llama-3 built under both rules, the
masks along the benchmark documents in order from a cold cache, and hypothesis grammars of names
over random vocabularies where every first byte with a name has a set (a huge divisor): entries
against whole walks and masks along random walks against the reference matcher.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import masks_along, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped

HUGE = 1 << 20  # every first byte that opens a name gets a set


@contextmanager
def name_sets(div: int) -> Iterator[None]:
    """Vocabularies whose trie is built inside have the sets of divisor `div`."""
    _core.name_sets_div(div)
    cfgmask.clear_caches()
    try:
        yield
    finally:
        _core.name_sets_div(0)
        cfgmask.clear_caches()


def _llama3(div: int) -> cfgmask.Vocabulary:
    with name_sets(div):
        vocab = cfgmask.Vocabulary.llama3()
        vocab._handle()
    return vocab


def test_llama3_sets_by_divisor() -> None:
    assert _llama3(1)._handle().name_sets() == 3
    assert _llama3(0)._handle().name_sets() == 28


def _same(a: list, b: list, what: str) -> None:
    assert len(a) == len(b)
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x[0], y[0]), f"{what}: state {s}: accepted tokens differ"
        assert np.array_equal(x[1], y[1]), f"{what}: state {s}: uncertain tokens differ"


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry the same with 28 sets and with 3."""
    g = shipped(name)
    cfgmask.clear_caches()
    many = entries(cfgmask.compile(g, _llama3(0)))
    cfgmask.clear_caches()
    _same(many, entries(cfgmask.compile(g, _llama3(1))), "three sets")


@pytest.mark.parametrize("name", ["c", "sql"])
def test_benchmark_documents_cold_same_masks(name: str) -> None:
    """bench_gbnf's cold pass (the grammar compiled once, its documents in order): every mask
    the same under both rules."""
    from benchmarks.documents import DOCUMENTS

    g = shipped(f"{name}.gbnf")
    out = []
    for div in (0, 1):
        vocab = _llama3(div)
        cfgmask.clear_caches()
        compiled = cfgmask.compile(g, vocab)
        out.append([masks_along(compiled, _longest_tokens(vocab, d.encode())) for d in DOCUMENTS[name]()[:2]])
    for d, (a, b) in enumerate(zip(*out, strict=True)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert np.array_equal(x, y), f"document {d}: mask {i} differs"


# names after blanks and punctuation, inline and before a call's parenthesis
GRAMMAR = """root ::= ws expr ws
expr ::= primary ( ws [-+*.] ws primary )*
primary ::= [a-zA-Z_] [a-zA-Z0-9_]* | call | [0-9]+ | "(" ws expr ws ")"
call ::= [a-z] [a-z0-9]* ws "(" ws ( expr ( ws "," ws expr )* )? ws ")"
ws ::= [ \\t]*
"""
PIECES = (
    b"a", b"ab", b" ab", b" a", b"\tb", b".x", b".xy", b"_a", b"(a", b"(ab", b"a1", b"a_b", b"x",
    b"xy", b" x1", b"b)", b"1", b"12", b"(", b")", b",", b", ", b" ", b"  ", b"+", b" +", b"-",
    b"*", b"z(", b"m,", b"a b", b"Q_9", b" Q", b"+a", b"-b",
)  # fmt: skip


def _vocab(v: Vocab) -> cfgmask.Vocabulary:
    with name_sets(HUGE):
        vocab = cfgmask.Vocabulary.from_token_bytes(
            v.tokens, stop_token_ids=v.stop_ids, special_token_ids=v.special_ids
        )
        vocab._handle()
    return vocab


def test_small_vocabulary_has_sets() -> None:
    """The hypothesis vocabularies reach the sets (else they would test the ids' path only)."""
    tokens = [None, *(bytes([b]) for b in range(32, 127)), *PIECES]
    assert _vocab(Vocab(tokens=tokens, stop_ids=(0,)))._handle().name_sets() >= 5


@settings(max_examples=40, deadline=None)
@given(vocabularies(PIECES), st.booleans())
def test_random_vocabularies_same_entries(v: Vocab, composed: bool) -> None:
    g = cfgmask.Grammar.from_gbnf(GRAMMAR)
    vocab = _vocab(v)
    cfgmask.clear_caches()
    fast = entries(cfgmask.compile(g, vocab, _strategy=Strategy(compose_entries=composed, run_walks=1)))
    cfgmask.clear_caches()
    _same(fast, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")


@settings(max_examples=30, deadline=None)
@given(vocabularies(PIECES), st.data())
def test_random_vocabularies_masks_equal_reference(v: Vocab, data: st.DataObject) -> None:
    g = cfgmask.Grammar.from_gbnf(GRAMMAR)
    ref_m = ReferenceMatcher(g.ir)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=12))
    cfgmask.clear_caches()
    fast = cfgmask.Matcher(cfgmask.compile(g, vocab))
    whole = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
    walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, fast=fast, whole=whole)
