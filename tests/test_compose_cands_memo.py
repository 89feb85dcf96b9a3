"""A call part's candidates after the unread cut kept by the cache, keyed by (the part's entry, the
bytes its return state reads), and found again (csrc/compose.c ``part_cands``;
``_core.compose_cands_memo_enable``).

In an object of optional properties each property's rest calls ``ws`` and returns to a state that
reads ``,`` alone: the same part filtered against the same row at every level of the chain, in
every mask that composes it.  The list depends on the pair alone, so it is filtered once.  The
references: every state's entry with the memo on equals it off and plain walks' (also with a cache
limit so small that parts and lists are not kept); Llama-3 masks along a document equal too."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_compose_unread import BLANKS
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import VOCAB, _optional_object, _same, llama3_chain_masks_same

Switch = Callable[[bool], AbstractContextManager[None]]


def _memo(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.compose_cands_memo_enable, on)


def switched_entries(
    switch: Switch,
    counter: Callable[[], int],
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    on: bool,
    **kw: object,
) -> tuple[list, int]:
    """Every state's entry, caches cleared, ``switch`` on or off; how far ``counter`` moved."""
    with switch(on):
        n0 = counter()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, counter() - n0


def chain_vocab() -> cfgmask.Vocabulary:
    """The optional chain's pieces, with blanks before them."""
    toks = list(dict.fromkeys([*VOCAB, *BLANKS]))
    return cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])


def chain_entries_same(switch: Switch, counter: Callable[[], int], n: int) -> None:
    """Every state's entry of n optional properties with ``switch`` on equals it off and plain
    walks'; on, ``counter`` moved, off not."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    vocab = chain_vocab()
    on, moved = switched_entries(switch, counter, g, vocab, True)
    off, none = switched_entries(switch, counter, g, vocab, False)
    assert moved > 0 and none == 0, (moved, none)
    _same(on, off, "the switch off")
    _same(on, switched_entries(switch, counter, g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


def small_cache_entries_same(switch: Switch, counter: Callable[[], int], limit: int) -> None:
    """The same entries with ``switch`` on and off under a cache limit of ``limit`` bytes."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(17)))
    vocab = chain_vocab()
    lim = cfgmask.MatcherLimits(max_cache_bytes=limit)
    on, _ = switched_entries(switch, counter, g, vocab, True, matcher_limits=lim)
    off, _ = switched_entries(switch, counter, g, vocab, False, matcher_limits=lim)
    _same(on, off, "the switch off")


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the memo on equals it off and plain walks'; on, lists were found
    again, off none."""
    chain_entries_same(_memo, _core.compose_cands_memo_hits, n)


@pytest.mark.parametrize("limit", [1, 1 << 12, 1 << 16])
def test_small_cache_entries_same(limit: int) -> None:
    """Past the cache's limit parts and lists are not kept (filtered each time): entries equal."""
    small_cache_entries_same(_memo, _core.compose_cands_memo_hits, limit)


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the memo on and
    off, and equal to plain walks'."""
    llama3_chain_masks_same(_memo, _core.compose_cands_memo_hits, 5)
