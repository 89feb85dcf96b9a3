"""A wrapping block position's rests dropped without a question to the filter where no state of
the block's region reads the byte after their lead (csrc/walk.c, ``cm_walk_drop_dead``; issue
12, session 41).  A string start with Llama-3 asks its filter about the long runs of spaces,
dashes, slashes that end on a raw newline; the region of the block rule (every state reachable
from its return states through the lead's bytes, calls and returns) reads no newline, so they
die without a chart step.

The entries with the cut on equal those with it off (every rest asked) and those of plain walks
(no chains, no wraps), over strings of long and short bounds alone and beside each other, and
over random blocks and vocabularies of runs that end on a byte the grammar reads or not."""

from __future__ import annotations

import json
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
from .test_wrap_deep import _props

NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
PLAIN = {"count_chains": False, "share_loop_walks": False, "wrap_repeats": 0}


def _entries(compiled: cfgmask.CompiledGrammar) -> list[tuple[Any, Any, Any]]:
    h = compiled._handle
    return [(*h.entry(s), h.entry_wrap(s)) for s in range(compiled.tables.n_states)]


def _switched(on: bool, build: Any) -> Any:
    from cfgmask import _core

    cfgmask.clear_caches()
    _core.walk_drop_dead_enable(on)
    _core.chain_split_dead_enable(False)  # (its cut of unfiltered splits reads the same proof)
    try:
        return build()
    finally:
        _core.walk_drop_dead_enable(True)
        _core.chain_split_dead_enable(True)


def _built(schema: dict, vocab: cfgmask.Vocabulary, on: bool, **kw: Any) -> list[tuple[Any, Any, Any]]:
    g = cfgmask.Grammar.from_json_schema(schema)
    return _switched(on, lambda: _entries(cfgmask.compile(g, vocab, _strategy=Strategy(**kw, **NO_MEMO))))


@pytest.mark.parametrize(
    ("schema", "dropped"),
    [
        ({"type": "string", "maxLength": 1024}, True),  # the long runs after the first block's end
        (_props(1024, 1024, 700), True),  # sp_0's form: string properties of long bounds
        (_props(93, 1024), True),
        ({"type": "string", "maxLength": 140}, None),  # three blocks and a tail
        (_props(93, 120), None),
    ],
)
def test_llama3_drop_dead_same_entries(schema: dict, dropped: bool | None) -> None:
    """Strings of long and short bounds with Llama-3: every entry and split the same with the
    dead rests dropped as with each asked, and as plain walks'; the long bounds drop some."""
    pytest.importorskip("quicktok")
    from cfgmask import _core

    vocab = cfgmask.Vocabulary.llama3()
    before = _core.walk_dead_dropped()
    on = _built(schema, vocab, True)
    taken = _core.walk_dead_dropped() - before
    off = _built(schema, vocab, False)
    plain = _built(schema, vocab, False, **PLAIN)
    same_block_entries(on, off, plain, "rests asked")
    if dropped:
        assert taken > 0


def test_llama3_drop_dead_masks_along_a_document() -> None:
    """The masks along an instance of long strings (runs of spaces and dashes across the blocks)
    the same with the cut on and off."""
    quicktok = pytest.importorskip("quicktok")
    from .helpers import masks_along

    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    schema = _props(1024, 93, 1024)
    doc = {"p0": " " * 100 + "-" * 90 + "x", "p1": "=" * 80, "p2": "/" * 130 + "*" * 60}
    tokens = enc.encode_ordinary(json.dumps(doc, separators=(",", ":")))
    g = cfgmask.Grammar.from_json_schema(schema)

    def along() -> Any:
        return masks_along(cfgmask.compile(g, vocab), tokens, final=True)

    masks = [_switched(on, along) for on in (True, False)]
    assert all(np.array_equal(a, b) for a, b in zip(*masks, strict=True))


def _small_entries(g: Any, vocab: Any, on: bool, budget: int, **kw: Any) -> list[tuple[Any, Any, Any]]:
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    return _switched(
        on, lambda: _entries(cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**kw, **NO_MEMO)))
    )


@given(bounded(), vocabularies(PIECES + (b"aaaaaaaaaaaaa\n", b"abcabcabc,", b'bbbbbbbbb"x', b"ccccccc\\n")))
def test_small_blocks_drop_dead_same_entries(case: tuple[Any, int], v: Vocab) -> None:
    """Blocks of random counts and vocabularies of runs ending on a byte no state reads (a
    newline), on one the region reads (a comma after a list's string, a quote, an escape),
    wraps on every block entry: every entry and split with the cut on equal to it off and to
    plain walks'."""
    g, budget = case
    vocab = _vocab(v)
    on = _small_entries(g, vocab, True, budget, wrap_repeats=1)
    off = _small_entries(g, vocab, False, budget, wrap_repeats=1)
    plain = _small_entries(g, vocab, False, budget, **PLAIN)
    same_block_entries(on, off, plain, "rests asked")
