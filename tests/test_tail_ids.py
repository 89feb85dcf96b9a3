"""Tail parts kept as ids (csrc/compose.c, ``tail_keep``; ``_core.tail_ids_enable``).

A tail part (a callee start's walk of one first byte's subtree, kept by the cache and ORed into
every composed state that takes it) that accepts at most n_words / 4 tokens is kept as their ids,
and its walk's bitset is a zero spare of the cache's, given back zero once the ids are taken out
(mode 1, the default).  Mode 2 keeps every tail part so (a small vocabulary's n_words / 4 is 0),
mode 0 each as a bitset of its own, as before.

Compared: every state's entry of c.gbnf and sql.gbnf with Llama-3 in modes 1, 2 and 0; the masks
along sql.lark's and sql.gbnf's first benchmark documents from a cold cache in modes 1 and 0
(sql.lark's mask after `SELECT id` takes ~100 tail parts, most of them a few hundred tokens);
hypothesis expression and statement grammars over small vocabularies with a tail part for every
byte edge, mode 2 against mode 0 and against whole walks.  The counter shows the ids were kept.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along
from .strategies import Vocab, vocabularies
from .test_entries import EXPR_PIECES, WALKS_ONLY, _longest_tokens, entries, expression_grammars, shipped
from .test_engine_differential import _vocab
from .test_tail_levels import EVERY_TAIL, PIECES, STMT_ALTS, STMT_ATOMS, STMT_NAMES, _stmt_grammar, _stmt_vocab


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, mode: int, strategy: Strategy | None = None) -> list:
    with core_switch(_core.tail_ids_enable, mode):
        return entries(cfgmask.compile(g, vocab, _strategy=strategy or Strategy()))


def _same(a: list, b: list, what: str) -> None:
    assert len(a) == len(b)
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x[0], y[0]), f"{what}: state {s}: accepted tokens differ"
        assert np.array_equal(x[1], y[1]), f"{what}: state {s}: uncertain tokens differ"


@pytest.mark.parametrize("name", ["c.gbnf", "sql.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    before = _core.tail_ids()
    on = _entries(shipped(name), vocab, 1)
    kept = _core.tail_ids() - before
    assert kept > 0, kept
    before = _core.tail_ids()
    off = _entries(shipped(name), vocab, 0)
    assert _core.tail_ids() == before  # off: none kept as ids
    _same(on, off, "ids off")
    _same(on, _entries(shipped(name), vocab, 2), "every tail part as ids")


@pytest.mark.parametrize("name", ["sql.lark", "sql.gbnf"])
def test_benchmark_documents_cold_same_masks(name: str) -> None:
    """bench_gbnf's cold pass (the grammar compiled once, its documents in order): every mask the
    same with tail parts kept as ids and without."""
    from benchmarks.documents import DOCUMENTS

    g = shipped(name)
    vocab = cfgmask.Vocabulary.llama3()
    docs = DOCUMENTS[name.removesuffix(".lark").removesuffix(".gbnf")]()[:2]
    out = []
    for mode in (1, 0):
        before = _core.tail_ids()
        with core_switch(_core.tail_ids_enable, mode):
            compiled = cfgmask.compile(g, vocab)
            out.append([masks_along(compiled, _longest_tokens(vocab, d.encode())) for d in docs])
        assert (_core.tail_ids() > before) == (mode == 1), mode
    for d, (a, b) in enumerate(zip(*out, strict=True)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert np.array_equal(x, y), f"document {d}: mask {i} differs"


@settings(max_examples=40, deadline=None)
@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_same_entries(text: str, v: Vocab) -> None:
    g = cfgmask.Grammar.from_gbnf(text)
    vocab = _vocab(v)
    ids = _entries(g, vocab, 2, EVERY_TAIL)
    _same(ids, _entries(g, vocab, 0, EVERY_TAIL), "ids off")
    _same(ids, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")


@pytest.mark.parametrize("name", STMT_NAMES)
def test_statement_grammar_same_entries(name: str) -> None:
    """c.gbnf's block in small: names inline beside an expression chain, every byte edge a tail
    part, each kept as ids."""
    g = _stmt_grammar(list(STMT_ALTS), list(STMT_ATOMS), name, "[ ]*")
    vocab = _stmt_vocab(list(PIECES))
    before = _core.tail_ids()
    ids = _entries(g, vocab, 2, EVERY_TAIL)
    assert _core.tail_ids() > before
    _same(ids, _entries(g, vocab, 0, EVERY_TAIL), "ids off")
    _same(ids, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from(STMT_ALTS), min_size=1, max_size=4, unique=True),
    st.lists(st.sampled_from(STMT_ATOMS), min_size=1, max_size=3, unique=True),
    st.sampled_from(STMT_NAMES),
    st.lists(st.sampled_from(PIECES), max_size=12, unique=True),
)
def test_random_statement_grammars_same_entries(
    stmts: list[str], atoms: list[str], name: str, pieces: list[bytes]
) -> None:
    g = _stmt_grammar(stmts, atoms, name, "[ ]*")
    vocab = _stmt_vocab(pieces)
    ids = _entries(g, vocab, 2, EVERY_TAIL)
    _same(ids, _entries(g, vocab, 0, EVERY_TAIL), "ids off")
    _same(ids, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")
