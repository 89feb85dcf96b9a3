"""Tail parts kept as their accepted ids (csrc/compose.c ``tail_sparse``).

A tail part's walk (a callee's walk of one first byte's subtree) wrote a bitset of its own,
each zeroed first (16 KB for Llama-3); most parts walk a small subtree.  The walk now writes
into a zero spare bitset of the cache, and a part of a small subtree (1,024 entries at most)
keeps its accepted ids, read off the subtree, the bitset, zero again, going back to the
spares.  ``_core.tail_sparse_enable`` switches it (on by default; off: a bitset a part, the
reference); ``tail_sparse_parts()`` counts the parts kept as ids.  Checked: every state's
entry of sql.lark, sql and c with Llama-3 on, off and by whole walks; bench_gbnf's documents
of the three cold, on and off.
"""

from __future__ import annotations

import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries
from .test_compose_self import switch_entries
from .test_entries import WALKS_ONLY, _longest_tokens, shipped

GRAMMARS = ["sql.lark", "sql", "c"]


def _grammar(name: str) -> str:
    return shipped(name if name.endswith(".lark") else f"{name}.gbnf")


@pytest.mark.parametrize("name", GRAMMARS)
def test_same_entries(name: str) -> None:
    """Every state's entry with Llama-3, on and off, and equal to whole walks; parts kept as
    ids with it on (none while off)."""
    vocab = cfgmask.Vocabulary.llama3()
    g = _grammar(name)
    before = _core.tail_sparse_parts()
    on = switch_entries(g, vocab, _core.tail_sparse_enable, True, Strategy())
    assert _core.tail_sparse_parts() > before
    before = _core.tail_sparse_parts()
    same_entries(on, switch_entries(g, vocab, _core.tail_sparse_enable, False, Strategy()), "switch off")
    assert _core.tail_sparse_parts() == before, "parts kept as ids while off"
    same_entries(on, switch_entries(g, vocab, _core.tail_sparse_enable, True, WALKS_ONLY), "whole walks")


@pytest.mark.parametrize("name", GRAMMARS)
def test_documents_cold_pass_same_masks(name: str) -> None:
    """bench_gbnf's cold pass: the grammar compiled once, its documents in order from cold caches;
    every mask the same with the switch on and off."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = _grammar(name)
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name.removesuffix(".lark")]()]
    out = {}
    for on in (True, False):
        before = _core.tail_sparse_parts()
        with core_switch(_core.tail_sparse_enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
        assert (_core.tail_sparse_parts() > before) == on, (name, on)
    same_document_masks(out[True], out[False], docs)
