"""A mask's uncertain runs of one byte read through its closing split's items a plain stretch at a
time (csrc/mask.c, ``split_run``; issue 12, session 42).  At a block position of a maxLength
string the candidates are the string's closing tokens and ~110 runs (spaces, dashes, 16-128
bytes) that cross the block's end; ``check_split`` stepped each through every item a byte at a
time, ~2 B steps a run at budget B.  A stretch of states that only read the byte on (not
accepting, no call) is kept per (state, byte class) for the mask, and the positions where an item
acts (a rest verdict, a fallback, its end) are taken in the byte loop's order: the same verdicts.

With the stretches on and off: the masks equal along Snowplow sp_4's document and one of long runs
with Llama-3, and, with few candidates needed for the split, equal the reference's along random
walks of random blocks and vocabularies of runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, grammar, lit, masks_along, rep, seq, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import PIECES, UNIT, bounded
from .test_split_dead import NO_MEMO, sp4_document

# runs of a byte the string reads, of the closing quote, and of one it does not, 8 bytes and up
RUNS = (b"a" * 8, b"a" * 13, b"c" * 21, b'"' * 9, b"-" * 10, b"\n" * 8, b"aaaaaaaaaaaaaaaa")


@pytest.mark.parametrize("doc", ["sp_4", "runs"])
def test_llama3_split_runs_masks_along_a_document(doc: str) -> None:
    """The masks along sp_4's first valid document (its user agent crosses a block's positions),
    and along one of long runs, the same with the stretches on and off; the on pass takes some."""
    g, vocab, tokens = sp4_document(doc)
    before = _core.split_runs_taken()
    with core_switch(_core.split_runs_enable, True):
        on = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
    assert _core.split_runs_taken() > before
    with core_switch(_core.split_runs_enable, False):
        cfgmask.clear_caches()
        taken = _core.split_runs_taken()
        off = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
        assert _core.split_runs_taken() == taken
    assert all(np.array_equal(a, b) for a, b in zip(on, off, strict=True))


def _small(g: Any, vocab: cfgmask.Vocabulary, budget: int) -> cfgmask.CompiledGrammar:
    """Blocks of `budget` units, the split asked from the first candidate on."""
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    return cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(closing_verdicts=1, **NO_MEMO))


@pytest.mark.parametrize("budget", [8, 16, 24])
def test_small_block_split_runs_masks_along(budget: int) -> None:
    """A bounded string over runs of 8-21 bytes, walked a unit at a time past two blocks' ends:
    the masks with the stretches on equal those off and the reference's, and some runs take them."""
    g = grammar(root=seq(lit('"'), rep(UNIT, 0, 60), lit('"'), lit(",")))
    v = Vocab(tokens=[*PIECES, *RUNS, None], stop_ids=(len(PIECES) + len(RUNS),))
    vocab = _vocab(v)
    a, c = PIECES.index(b"a"), PIECES.index(b"c")
    walk = [PIECES.index(b'"'), *([a, c] * 26)]
    before = _core.split_runs_taken()
    with core_switch(_core.split_runs_enable, True):
        on = masks_along(_small(g, vocab, budget), walk, final=True)
        walk_agrees(
            ReferenceMatcher(g),
            v.tokens,
            v.stop_ids,
            v.special_ids,
            walk,
            on=cfgmask.Matcher(_small(g, vocab, budget)),
        )
    assert _core.split_runs_taken() > before
    with core_switch(_core.split_runs_enable, False):
        off = masks_along(_small(g, vocab, budget), walk, final=True)
    assert all(np.array_equal(x, y) for x, y in zip(on, off, strict=True))


@given(bounded(), vocabularies(PIECES + RUNS), st.data())
def test_small_blocks_split_runs_masks_equal_reference(
    case: tuple[Any, int], v: Vocab, data: st.DataObject
) -> None:
    """Random blocks and vocabularies of runs, the split from one candidate on: the masks with
    the stretches on and off along random walks equal the reference's."""
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=14))
    with core_switch(_core.split_runs_enable, True):
        on = cfgmask.Matcher(_small(g, vocab, budget))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, on=on)
    with core_switch(_core.split_runs_enable, False):
        off = cfgmask.Matcher(_small(g, vocab, budget))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, off=off)
