"""The upward filter of a composed entry's uncertain tokens takes the item chart as the entry's
listed walk left it, truncated to the closure of (state, OUTER) they share, instead of making
that set again (csrc/walk.c ``item_chart``; ``_core.item_keep_enable``).

The references: every state's entry with the keep on equals it off and plain walks' (also with the
listed walk's chart reuse off, where no chart is left to keep, and under a small cache limit);
Llama-3 masks along a document of 40 optional properties equal too."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_compose_cands_memo import (
    chain_entries_same,
    chain_vocab,
    small_cache_entries_same,
    switched_entries,
)
from .test_listed_reuse import _optional_object, _same, llama3_chain_masks_same


def _keep(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.item_keep_enable, on)


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the keep on equals it off and plain walks'; on, filters took the
    chart, off none."""
    chain_entries_same(_keep, _core.item_kept, n)


def test_listed_reuse_off_nothing_kept() -> None:
    """With the listed walk's own chart (reuse off) the filter's chart holds no walk's set: every
    filter makes it, and the entries are the same."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(17)))
    vocab = chain_vocab()
    _core.listed_reuse_enable(False)
    try:
        off_reuse, kept = switched_entries(_keep, _core.item_kept, g, vocab, True)
    finally:
        _core.listed_reuse_enable(True)
    _same(off_reuse, switched_entries(_keep, _core.item_kept, g, vocab, False)[0], "the keep off")
    assert kept == 0, kept


@pytest.mark.parametrize("limit", [1 << 12, 1 << 16])
def test_small_cache_entries_same(limit: int) -> None:
    """Under a small cache limit (parts rebuilt, filters of the same state again): entries equal."""
    small_cache_entries_same(_keep, _core.item_kept, limit)


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the keep on and
    off, and equal to plain walks' (its composed entries leave no token to filter: the keep is not
    taken there, the entry tests above take it)."""
    llama3_chain_masks_same(_keep, _core.item_kept, -1)
