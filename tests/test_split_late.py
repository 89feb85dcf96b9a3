"""The closing-verdict split made late in a mask (csrc/mask.c, ``decide``).

A mask with fewer uncertain candidates than ``Strategy.closing_verdicts`` runs each through the
chart, unless they are long: a block string's position near the block's end holds a few dozen
tokens that cross it (runs of 30-128 spaces, `` ----...``), each run through the chart byte by
byte.  Such a mask starts with the chart and, once its checks have run a few dozen Earley steps,
makes the split a mask with many candidates makes at once and decides the rest by it.  Both
decide each token exactly, so every mask must stay the same with the switch off
(``_core.mask_split_late_enable(0)``: the chart decides them all), by default (1), and with the
split made at every such mask's first check (2), and equal to the pure-Python reference along
random walks with a rollback and a fork.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import ReferenceWalk, _vocab
from .test_past_positions import _first_document
from .test_verdicts import NO_MEMO, PIECES, shared_strings

# long runs that cross a bounded string's end, beside the closing tokens of test_verdicts
LONG = (b" " * 12, b" " * 13, b" " * 24, b"-" * 20, b" " + b"-" * 19, b"a" * 25, b'a" ', b"  ", b" ")


def _compile(g: ir.Grammar, vocab: cfgmask.Vocabulary, budget: int) -> cfgmask.CompiledGrammar:
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    return cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**NO_MEMO))


@given(shared_strings(), vocabularies(PIECES + LONG), st.sampled_from((0, 1, 2)), st.data())
def test_random_masks_equal_reference_with_rollback_and_fork(
    case: tuple[ir.Grammar, int], v: Vocab, mode: int, data: st.DataObject
) -> None:
    """JSON-like values whose strings are one rule, bounded or not: with the split made late at
    every mask with a candidate (2), by the steps (1) or never (0), the masks along a random walk,
    with a rollback into it and a fork, are the reference's."""
    with core_switch(_core.mask_split_late_enable, mode, 1):
        follow_with_rollback_and_fork(case, v, data)


def follow_with_rollback_and_fork(case: tuple[ir.Grammar, int], v: Vocab, data: st.DataObject) -> None:
    """A random walk of ``case``'s grammar (compiled cold over ``v``), with a rollback into it and a
    fork: every mask along it the reference's."""
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    m = cfgmask.Matcher(_compile(g, vocab, budget))
    walk = data.draw(token_walks(ref_m, v, max_steps=16))
    ids = walk.token_ids
    at = data.draw(st.integers(0, len(ids)))
    back = data.draw(st.integers(0, at))
    rw = ReferenceWalk(ref_m, v, vocab, ids)
    rw.follow(m, 0, at)
    f = m.fork()
    m.rollback(back)
    rw.follow(m, at - back)
    rw.follow(f, at)
    m.reset()
    rw.follow(m, 0)


def _same_masks_in_modes(schema: dict, tokens: list[int]) -> list[int]:
    """The masks along ``tokens`` (Llama-3, compiled cold) the same in modes 0, 1 and 2; the splits
    made late in each mode (none in mode 0)."""
    vocab = cfgmask.Vocabulary.llama3()
    masks, late = [], []
    for mode in (0, 1, 2):
        hits = _core.mask_split_late_hits()
        with core_switch(_core.mask_split_late_enable, mode, 1):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
        late.append(_core.mask_split_late_hits() - hits)
    assert late[0] == 0
    for other in masks[1:]:
        assert len(other) == len(masks[0])
        for i, (a, b) in enumerate(zip(masks[0], other, strict=True)):
            assert np.array_equal(a, b), f"mask {i} differs"
    return late


@pytest.mark.parametrize(
    "sid",
    ["Github_medium/o9813", "Snowplow/sp_333_Normalized", "Snowplow/sp_4_Normalized", "Github_medium/o61627"],
)
def test_llama3_documents_masks(sid: str) -> None:
    """JSONSchemaBench documents with block strings (o9813's description, sp_333's artifact
    near a block's end: a few dozen long candidates), replayed cold with Llama-3: the masks along
    the document the same in the three modes; splits made late in modes 1 and 2 only."""
    schema, tokens = _first_document(sid)
    late = _same_masks_in_modes(schema, tokens)
    assert late[2] >= late[1]
    if sid in ("Github_medium/o9813", "Snowplow/sp_333_Normalized"):
        assert late[1] > 0


def test_llama3_long_runs_near_a_block_end() -> None:
    """A string of maxLength 300 cut into blocks, filled with words up to each block's end and
    past it: every mask the same in the three modes, splits made late by the steps."""
    pytest.importorskip("quicktok")
    import quicktok

    enc = quicktok.get_encoding("llama3")
    schema = {"type": "object", "properties": {"d": {"type": "string", "maxLength": 300}}, "required": ["d"]}
    text = " ".join(["This is an example data table"] * 9)[:290]
    tokens = enc.encode_ordinary('{"d":"' + text + '"}')
    late = _same_masks_in_modes(schema, tokens)
    assert late[1] > 0 and late[2] >= late[1]
