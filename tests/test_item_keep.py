"""The upward filter of a composed entry's uncertain tokens takes the item chart as the entry's
listed walk left it, truncated to the closure of (state, OUTER) they share, instead of making
that set again (csrc/walk.c ``item_chart``; ``_core.item_keep_enable``).

The references: every state's entry with the keep on equals it off and plain walks' (also with the
listed walk's chart reuse off, where no chart is left to keep, and under a small cache limit);
Llama-3 masks along a document of 40 optional properties equal too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import cfgmask
from cfgmask import _core

from .test_compose_unread import BLANKS
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import VOCAB, _optional_object, _same, llama3_chain_masks_same


@contextmanager
def _keep(on: bool) -> Iterator[None]:
    _core.item_keep_enable(on)
    cfgmask.clear_caches()
    try:
        yield
    finally:
        _core.item_keep_enable(True)
        cfgmask.clear_caches()


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the keep on or off; how many filters took the chart."""
    with _keep(on):
        n0 = _core.item_kept()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.item_kept() - n0


def _vocab() -> cfgmask.Vocabulary:
    toks = list(dict.fromkeys([*VOCAB, *BLANKS]))
    return cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the keep on equals it off and plain walks'; on, filters took the
    chart, off none."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    vocab = _vocab()
    on, kept = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert kept > 0 and none == 0, (kept, none)
    _same(on, off, "the keep off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


def test_listed_reuse_off_nothing_kept() -> None:
    """With the listed walk's own chart (reuse off) the filter's chart holds no walk's set: every
    filter makes it, and the entries are the same."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(17)))
    vocab = _vocab()
    _core.listed_reuse_enable(False)
    try:
        off_reuse, kept = _entries(g, vocab, True)
    finally:
        _core.listed_reuse_enable(True)
    _same(off_reuse, _entries(g, vocab, False)[0], "the keep off")
    assert kept == 0, kept


@pytest.mark.parametrize("limit", [1 << 12, 1 << 16])
def test_small_cache_entries_same(limit: int) -> None:
    """Under a small cache limit (parts rebuilt, filters of the same state again): entries equal."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(17)))
    vocab = _vocab()
    lim = cfgmask.MatcherLimits(max_cache_bytes=limit)
    _same(
        _entries(g, vocab, True, matcher_limits=lim)[0],
        _entries(g, vocab, False, matcher_limits=lim)[0],
        "off",
    )


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the keep on and
    off, and equal to plain walks' (its composed entries leave no token to filter: the keep is not
    taken there, the entry tests above take it)."""
    llama3_chain_masks_same(_keep, _core.item_kept, -1)
