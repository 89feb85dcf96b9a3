"""A chain's shared walk looked up by the key hash its memo kept (csrc/chains.c ``key_hash_of``,
``chain_shared``; issue 12, session 44).  A form served by a vocabulary memo (a string's tail, a
Llama-3 block) carried the memo's ~11.5 K-word key to chain_shared, which hashed it again at each
chain start; the memo now keeps its key's hash, made with it, and the renamed form carries it.

With the kept hashes on and off: every state's entry the same and the shared walks the same
(``build_stats``: walks, entries, walks from the vocabulary); off, every kept hash is checked
against its key's own (``chain_key_hash_misses``, none allowed), and on, lookups take them
(``chain_key_hash_hits`` moves)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, same_entries
from .strategies import Vocab, vocabularies
from .test_bytes_memo import sp4_masks_on_off
from .test_engine_differential import _vocab
from .test_repeats import PIECES, _compile, bounded
from .test_wrap_deep import _props

NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
STATS = ("chain_walks", "chain_entries", "vocab_chain_walks")
# o9813's strings: a bounded one of minLength 1, a long one (blocks) and a pattern's count
O9813 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "description": {"type": "string", "maxLength": 32767},
        "code": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
    },
    "required": ["name", "description", "code"],
}


def _entries(compiled: cfgmask.CompiledGrammar) -> tuple[list[Any], dict]:
    """Every state's entry in state order, then the grammar's chain walk counts."""
    h = compiled._handle
    entries = [h.entry(s) for s in range(compiled.tables.n_states)]
    stats = h.build_stats
    return entries, {k: stats[k] for k in STATS}


def _both(build: Any) -> int:
    """``build()``'s entries and walk counts with the kept hashes on and off, compared; off, no
    kept hash differs from its key's; how many lookups took a kept hash on."""
    before = _core.chain_key_hash_hits()
    with core_switch(_core.chain_key_hash_memo_enable, True):
        build()  # a first compile keeps the vocabulary's memos (the second finds them)
        on, on_stats = build()
    hits = _core.chain_key_hash_hits() - before
    missed = _core.chain_key_hash_misses()
    with core_switch(_core.chain_key_hash_memo_enable, False):
        build()
        off, off_stats = build()
    assert _core.chain_key_hash_misses() == missed, "a kept key hash differs from its key's"
    same_entries(on, off, "kept hashes off")
    assert on_stats == off_stats
    return hits


@pytest.mark.parametrize("schema", [_props(45, 2000, 4096, 8192), O9813])
def test_llama3_key_hash_same_entries(schema: dict) -> None:
    """sp_4's string bounds and o9813's strings with Llama-3: every entry and the walk counts the
    same with the kept hashes on and off; the memo-served chains take their kept hash."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(schema)
    hits = _both(lambda: _entries(cfgmask.compile(g, vocab, _strategy=Strategy(**NO_MEMO))))
    assert hits > 0


def test_llama3_key_hash_masks_along_sp4() -> None:
    """The masks along sp_4's first valid document the same with the kept hashes on and off (off:
    no kept hash differs from its key's)."""
    sp4_masks_on_off(_core.chain_key_hash_memo_enable, _core.chain_key_hash_hits, _core.chain_key_hash_misses)


@given(bounded(), vocabularies(PIECES))
def test_small_blocks_key_hash_same_entries(case: tuple[Any, int], v: Vocab) -> None:
    """Random blocks and vocabularies: every entry and the walk counts the same with the kept
    hashes on and off, no kept hash unequal to its key's."""
    g, budget = case
    vocab = _vocab(v)
    _both(lambda: _entries(_compile(g, vocab, budget, wrap=1)))
