"""A shaped row compared class by class with permutes (csrc/chains.c, ``row_check``'s
``slots_differ_avx2``).

A chain start checks the rows of its chain against a memo's by each memo row's shape: one class
pair of each distinct target is named, and every other class of our row must lead where its
slot's first pair leads.  Where the CPU has AVX2, each class of ours is in one class pair and the
shape has at most 8 slots, our row is read as it lies, 8 classes at a time, each lane's slot
picking its target out of the first pairs' with one permute, instead of the other classes one by
one; a whole check's rows so taken are read in one loop (``rows_permuted``), not through the row
check a row at a time (``_core.chain_rows_fused_enable(False)``).  The references: with the
permutes off (``_core.chain_row_permute_enable(False)``: the plan's scalar loop) or the loop off
the memos are taken exactly as often, and every entry and mask equals the permutes on, every
chain analysed and plain walks; a row whose one differing class sits in any lane (the
first block, a later one, the tail past the last full block) is refused either way.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir

from .helpers import core_switch, masks_along
from .strategies import Vocab, vocabularies
from .test_chain_memo import VOCAB, _all_entries, _assert_references, _taken, _two_values, repeated
from .test_engine_differential import _vocab
from .test_past_positions import _first_document
from .test_repeats import CHAIN_PIECES, UNITS
from .test_row_gather import AVX2, LETTERS, _wide_pair


def _permute(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_row_permute_enable, on)


def _fused(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_rows_fused_enable, on)


def _entries_taken(
    gs: list[ir.Grammar], vocab: cfgmask.Vocabulary, on: bool, fused: bool = True
) -> tuple[list, int, int]:
    """Every state's entries of gs compiled one after the other (the later may take the earlier's
    memos), with the permutes on or off (and a check's rows in one loop or through the row check
    a row at a time); the memos taken and the rows permuted."""
    with _permute(on), _fused(fused):
        taken, permuted = _taken(), _core.chain_permuted_rows()
        out = [_all_entries(g, vocab) for g in gs]
        return out, _taken() - taken, _core.chain_permuted_rows() - permuted


def _assert_permutes_change_nothing(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary) -> tuple[int, int]:
    """Permutes on (a check's rows in one loop or not) and off: the same memos taken, the same
    rows permuted, every entry equal to each other's, to every chain analysed and to plain walks.
    Returns the memos taken and the rows permuted."""
    on, taken_on, permuted = _entries_taken(gs, vocab, True)
    unfused, taken_unfused, permuted_unfused = _entries_taken(gs, vocab, True, fused=False)
    off, taken_off, permuted_off = _entries_taken(gs, vocab, False)
    assert taken_on == taken_unfused == taken_off
    assert permuted_off == 0
    assert permuted == permuted_unfused
    if not AVX2:
        assert permuted == 0
    _assert_references(gs, vocab, on, unfused, off)
    return taken_on, permuted


@pytest.mark.parametrize("unit", sorted(UNITS))
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (3, 40)])
def test_permuted_checks_equal_one_by_one(unit: str, lo: int, hi: int) -> None:
    """Two grammars, each with the same count twice (the second's chains take the first's memos,
    their states numbered otherwise): the same memos and entries with the permutes on and off,
    and (with AVX2) the rows were permuted."""
    vocab = _vocab(VOCAB)
    gs = [_two_values(UNITS[unit], lo, hi, ""), _two_values(UNITS[unit], lo, hi, "{{")]
    _, permuted = _assert_permutes_change_nothing(gs, vocab)
    if unit in ("letters", "escaped"):  # (memos taken: see test_chain_memo)
        assert (permuted > 0) == AVX2


@pytest.mark.parametrize("skip", ["", *LETTERS[:-1]])
def test_each_lane_checked(skip: str) -> None:
    """A kept string of a..s (each letter its own class), then one of a..s but skip: with none
    skipped the rows are the kept ones renamed and the memo is taken; with any one letter skipped
    our row leads it nowhere where the memo's leads on: the check refuses it, whichever lane (first
    block, later block, tail) the letter's class sits in, permutes on as off, and the entries are
    plain walks'.  (Not s: the memos' hint follows the greatest byte, so a string without s looks
    up no memo of the kept one.)"""
    gs, vocab = _wide_pair(skip, lambda: _permute(True), _core.chain_permuted_rows, skip == "")
    _assert_permutes_change_nothing(gs, vocab)


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_permuted_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars sharing a count: the same memos taken, every entry equal, permutes on
    or off, to every chain analysed and to plain walks."""
    _assert_permutes_change_nothing(list(case), _vocab(v))


@pytest.mark.parametrize(
    "sid", ["Snowplow/sp_115_Normalized", "Snowplow/sp_170_Normalized", "Github_trivial/o44010"]
)
def test_llama3_documents_masks(sid: str) -> None:
    """JSONSchemaBench documents whose strings' chain starts check the pinned chains' rows (a
    maxLength-255 string's ~2,000 rows): replayed cold, every mask the same with the permutes on
    and off, and rows permuted with them on only (with AVX2)."""
    schema, tokens = _first_document(sid)
    vocab = cfgmask.Vocabulary.llama3()
    masks = []
    for on, fused in ((True, True), (True, False), (False, False)):
        cfgmask.clear_caches()
        permuted = _core.chain_permuted_rows()
        with _permute(on), _fused(fused):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
        assert (_core.chain_permuted_rows() > permuted) == (on and AVX2)
    for other in masks[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(masks[0], other, strict=True))
