"""A plain state that no state within a loop's reach leads back to, answered in no loop without
find_loop's backward marking (csrc/loops.c; `_core.loop_no_back_enable`).

Most plain states a loop entry asks of are in no loop (a key's position, a counted chain's): the
marking built every reached state's successor list and ran its rounds to find that nothing leads
back.  Now a transition into the state is looked for in every reached row first, and where there
is none the answer is given at once.  Here every state's entry with the switch on equals it off
(and whole walks) on small vocabularies under hypothesis and on Llama-3 (json.gbnf, a JSON Schema,
the first documents of corpus schemas), and `_core.loop_no_back_taken()` shows it was taken.
"""

from __future__ import annotations

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core

from .strategies import Vocab, vocabularies
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_engine_differential import _vocab
from .test_entries import assert_switch_same_entries
from .test_loop_exit_ends import assert_llama3_cases
from .test_loop_form_runs import SPLIT, STRING_PIECES, STRINGS, _small


def _check(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = True) -> int:
    return assert_switch_same_entries(
        _core.loop_no_back_enable, _core.loop_no_back_taken, g, vocab, what="every state marked", plain=plain
    )


def test_no_back_same_entries() -> None:
    assert _check(cfgmask.Grammar.from_gbnf(STRINGS), _small()) > 0


@given(vocabularies(STRING_PIECES))
def test_no_back_same_entries_any_vocab(v: Vocab) -> None:
    _check(cfgmask.Grammar.from_gbnf(STRINGS), _vocab(v))
    _check(cfgmask.Grammar.from_gbnf(SPLIT), _vocab(v))


def test_llama3_same_entries() -> None:
    assert_llama3_cases(_check)


def test_corpus_masks_same() -> None:
    """Llama-3 masks along the first documents of corpus schemas: the same with the shortcut and
    without, and the shortcut taken."""
    pytest.importorskip("quicktok")
    assert_corpus_masks_same_taken(_core.loop_no_back_enable, _core.loop_no_back_taken)
