"""A wrapping block position's rests kept without a question to the filter where the rule's
upward chart reads enough whole blocks in a row (csrc/chains.c, ``wrap_sure``; issue 12,
session 40).  A string start with Llama-3 has 46 rests -- runs of 49-128 spaces, dashes,
slashes -- that its filter read through an upward chart of every string property's count
states; those of need below ``B + d * b2`` (``d`` blocks after the first's end, as many as a
return state of the block calls it again in a row) are kept as they are.

The entries with the cut on equal those with it off (every rest asked) and those of plain walks
(no chains, no wraps), over strings whose bounds give the upward chart 1, 2 or many blocks in a
row, alone and beside each other (a property's long bound keeps a rest a short one's kills)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask.compile.strategy import Strategy

from .helpers import same_block_entries
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import PIECES, bounded

NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}


def _entries(compiled: cfgmask.CompiledGrammar) -> list[tuple[Any, Any, Any]]:
    h = compiled._handle
    return [(*h.entry(s), h.entry_wrap(s)) for s in range(compiled.tables.n_states)]


def _built(schema: dict, vocab: cfgmask.Vocabulary, deep: bool, **kw: Any) -> list[tuple[Any, Any, Any]]:
    from cfgmask import _core

    cfgmask.clear_caches()
    _core.chain_wrap_deep_enable(deep)
    try:
        g = cfgmask.Grammar.from_json_schema(schema)
        return _entries(cfgmask.compile(g, vocab, _strategy=Strategy(**kw, **NO_MEMO)))
    finally:
        _core.chain_wrap_deep_enable(True)


def _same(schema: dict) -> int:
    """Every state's entry and wrap split with the cut on equal to it off and to plain walks';
    how many rests the cut kept."""
    from cfgmask import _core

    vocab = cfgmask.Vocabulary.llama3()
    hits = _core.chain_wrap_deep_hits()
    on = _built(schema, vocab, True)
    taken = _core.chain_wrap_deep_hits() - hits
    off = _built(schema, vocab, False)
    plain = _built(schema, vocab, False, count_chains=False, share_loop_walks=False, wrap_repeats=0)
    same_block_entries(on, off, plain, "rests asked")
    return taken


def _props(*bounds: int) -> dict:
    return {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "maxLength": b} for i, b in enumerate(bounds)},
        "required": [f"p{i}" for i in range(len(bounds))],
    }


@pytest.mark.parametrize(
    ("schema", "kept"),
    [
        ({"type": "string", "maxLength": 1024}, True),  # many blocks: every long run kept at once
        (_props(1024, 1024, 700), True),  # sp_0's form: string properties of long bounds
        ({"type": "string", "maxLength": 93}, None),  # two blocks and a unit: the long runs die
        ({"type": "string", "maxLength": 140}, None),  # three blocks and a tail
        (_props(93, 1024), True),  # the short property's runs live in the long one's blocks
        (_props(93, 120), None),
    ],
)
def test_llama3_deep_wrap_same_entries(schema: dict, kept: bool | None) -> None:
    """Strings of long and short bounds with Llama-3: every entry and split the same with the
    rests kept by the blocks in a row as with each asked, and as plain walks'; the long bounds
    keep some without a question."""
    pytest.importorskip("quicktok")
    taken = _same(schema)
    if kept:
        assert taken > 0


def test_llama3_deep_wrap_masks_along_a_document() -> None:
    """The masks along an instance of long strings (its runs of spaces and dashes cross the
    blocks) the same with the cut on and off."""
    quicktok = pytest.importorskip("quicktok")
    from cfgmask import _core

    from .helpers import masks_along

    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    schema = _props(1024, 93, 1024)
    doc = {"p0": " " * 100 + "-" * 90 + "x", "p1": "=" * 80, "p2": "/" * 130}
    import json

    tokens = enc.encode_ordinary(json.dumps(doc, separators=(",", ":")))
    masks = []
    for deep in (True, False):
        cfgmask.clear_caches()
        _core.chain_wrap_deep_enable(deep)
        try:
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
        finally:
            _core.chain_wrap_deep_enable(True)
    assert all(np.array_equal(a, b) for a, b in zip(*masks, strict=True))


def _small_entries(g: Any, vocab: Any, deep: bool, budget: int, **kw: Any) -> list[tuple[Any, Any, Any]]:
    from cfgmask import _core

    _core.chain_wrap_deep_enable(deep)
    try:
        limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
        return _entries(cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**kw, **NO_MEMO)))
    finally:
        _core.chain_wrap_deep_enable(True)


@given(bounded(), vocabularies(PIECES + (b"aaaaaaaaaaaaa", b"abcabcabcabcabcabc")))
def test_small_blocks_deep_wrap_same_entries(case: tuple[Any, int], v: Vocab) -> None:
    """Blocks of random counts (few in a row: the upward chart can start fewer blocks than a long
    token needs) and vocabularies of long runs, wraps on every block entry: every entry and split
    with the cut on equal to it off and to plain walks'."""
    g, budget = case
    vocab = _vocab(v)
    on = _small_entries(g, vocab, True, budget, wrap_repeats=1)
    off = _small_entries(g, vocab, False, budget, wrap_repeats=1)
    walk = {"count_chains": False, "share_loop_walks": False, "wrap_repeats": 0}
    plain = _small_entries(g, vocab, False, budget, **walk)
    same_block_entries(on, off, plain, "rests asked")
