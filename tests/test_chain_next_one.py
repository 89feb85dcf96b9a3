"""A chain's next position taken without counting its bytes (csrc/chains.c, ``next_positions``).

A chain's first position tries the states it leads to on a byte as the next position, most
bytes first: the order needs the bytes of every class, counted over the 256 bytes.  A state
that leads to one such state alone takes it at once (``_core.chain_next_one_enable``, the
default).  The references: with it off (the bytes counted always) every entry and mask is the
same, and equal to every chain analysed and to plain walks; the counter moves with it on only.
"""

from __future__ import annotations

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir

from .strategies import Vocab, vocabularies
from .test_chain_memo import VOCAB, _two_values, repeated
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_engine_differential import _vocab
from .test_kept_batch import assert_switch_changes_nothing
from .test_loop_exit_ends import mixed_schema
from .test_repeats import CHAIN_PIECES, UNITS


def _assert_one_changes_nothing(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary) -> int:
    return assert_switch_changes_nothing(_core.chain_next_one_enable, _core.chain_next_one_taken, gs, vocab)


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_entries_equal_bytes_counted(unit: str) -> None:
    """Grammars with a count twice: every entry the same with the bytes counted or not, and the
    single candidate taken."""
    vocab = _vocab(VOCAB)
    gs = [_two_values(UNITS[unit], 0, 20, ""), _two_values(UNITS[unit], 3, 40, "{{")]
    assert _assert_one_changes_nothing(gs, vocab) > 0


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars with counts: every entry equal, on or off, to every chain analysed
    and to plain walks."""
    _assert_one_changes_nothing(list(case), _vocab(v))


def test_llama3_schema_entries_equal() -> None:
    """Llama-3 on a schema of strings, bounded strings, a pattern and an integer: every entry the
    same on and off, and the single candidate taken."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    g = mixed_schema()
    assert _assert_one_changes_nothing([g], vocab) > 0  # type: ignore[list-item]


def test_corpus_masks() -> None:
    """Llama-3 masks along corpus schemas' first documents: the same on and off, the counter
    moved on only."""
    pytest.importorskip("quicktok")
    assert_corpus_masks_same_taken(_core.chain_next_one_enable, _core.chain_next_one_taken)
