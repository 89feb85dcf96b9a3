"""A counted chain's bulk listing copied from the vocabulary's class table (csrc/chains.c
``class_ids_by_len``; ``_core.chain_class_ids_enable``).

A counted chain's walk lists the entries made only of its loop bytes X by length, filtering X's
first bytes' entries one by one (test_chain_bulk_by_len).  Where the vocabulary already holds X's
class table (csrc/flat.c, made by a flat walk's count of X: o61627's UUID), the table's X-only ids
by length are that listing in the same order, so each length's run is copied.  The references:
every state's entry equal to the plain walks' (count_chains off) with the copy on and off, on
Llama-3 after o61627's value made the table and on small vocabularies under hypothesis (tables and
takes wherever they apply); Llama-3's masks along o61627's document on and off; the copy made
exactly where a table of the chain's bytes is held (its counter).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along
from .test_entries import entries
from .test_flat_class_bulk import ALNUM, CLOSE, DASHED, FILLER, UUID, _bulk, _valued, o61627_document
from .test_repeats import assert_chain_entries
from .test_tokclass import _llama3, _mode


def _ids(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_class_ids_enable, on)


def _taken(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary) -> tuple[int, int]:
    """assert_chain_entries on `g`; how many listings copied the table, and how many were listed."""
    taken, listed = _core.chain_class_ids_taken(), _core.chain_bulk_listed()
    assert_chain_entries(g, vocab)
    return _core.chain_class_ids_taken() - taken, _core.chain_bulk_listed() - listed


def _make_table(vocab: cfgmask.Vocabulary, mode: int) -> None:
    """The class table of [0-9A-Za-z] on `vocab`: o61627's value's entries, the take in `mode`."""
    with _bulk(mode):
        n0 = _core.flat_class_bulk_walks()
        entries(cfgmask.compile(_valued(UUID), vocab))
        assert _core.flat_class_bulk_walks() > n0


LLAMA_CHAINS = [UUID, "^[0-9A-Za-z]{1,64}$", "^[0-9A-Za-z]{20}$"]


@pytest.mark.parametrize("pattern", LLAMA_CHAINS, ids=range(len(LLAMA_CHAINS)))
def test_llama3_chains_copy_same_entries(pattern: str) -> None:
    """Llama-3 after o61627's value made [0-9A-Za-z]'s table: a chain of the class lists its
    entries from the table when on (every listing copied), by the filter when off, and every entry
    equals the plain walks' both ways."""
    vocab = _llama3()
    _make_table(vocab, 1)
    g = _valued(pattern)
    for on in (True, False):
        with _mode(1), _ids(on):
            taken, listed = _taken(g, vocab)
            assert listed > 0 and taken == (listed if on else 0), (on, taken, listed)


def test_llama3_other_class_not_copied() -> None:
    """o9813's `^[0-9a-zA-Z_-]{1,255}$` is listed, but no table of its bytes is held: nothing copied."""
    vocab = _llama3()
    _make_table(vocab, 1)
    with _mode(1), _ids(True):
        taken, listed = _taken(_valued("^[0-9a-zA-Z_-]{1,255}$"), vocab)
    assert listed > 0 and taken == 0


def test_llama3_o61627_masks_same() -> None:
    """Llama-3 along o61627's document (two UUID values), the table made first: every mask equal
    with the copy on and off, and on it was taken."""
    g, tokens = o61627_document()
    vocab = _llama3()
    _make_table(vocab, 1)
    masks = {}
    for on in (False, True):
        with _ids(on):
            n0 = _core.chain_class_ids_taken()
            masks[on] = masks_along(cfgmask.compile(g, vocab), tokens)
            assert (_core.chain_class_ids_taken() > n0) == on
    for i, (x, y) in enumerate(zip(masks[False], masks[True], strict=True)):
        assert np.array_equal(x, y), f"mask {i} differs"


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 14),
    lo=st.sampled_from([None, 0, 1]),
    picks=st.lists(
        st.sampled_from([*ALNUM, *DASHED, *CLOSE, b"xx", b"0", b"Zz9", b"a\xc3"]), min_size=4, max_size=24
    ),
    runs=st.lists(st.text('0123abcxAZ-"', min_size=1, max_size=12), max_size=10),
)
def test_small_vocabularies_copy_same_entries(
    n: int, lo: int | None, picks: list[bytes], runs: list[str]
) -> None:
    """Hypothesis: small vocabularies of class runs, dashes and closing pieces, the class table of
    [0-9A-Za-z] made first where it applies (mode 2) and the chains' takes wherever they apply: a
    chain of the class (`{n}` or `{lo,n}`) has every entry the plain walks' with the copy on and off."""
    toks = list(dict.fromkeys(t for t in [*picks, *(r.encode() for r in runs), *FILLER] if t))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    count = f"{{{n}}}" if lo is None else f"{{{lo},{n}}}"
    g = _valued(f"^[0-9A-Za-z]{count}$")
    with _bulk(2), _mode(2):
        entries(cfgmask.compile(_valued(UUID), vocab))  # the table, where the take applies
        for on in (True, False):
            with _ids(on):
                assert_chain_entries(g, vocab)
