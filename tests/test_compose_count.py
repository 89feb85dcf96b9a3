"""A composed entry's count is found as its ids are taken out (csrc/compose.c ``count_later``,
csrc/bits.c ``cm_bits_take_max``; ``_core.compose_count_later_enable``).

``cm_compose`` counted the 4,008 words of its bitset (Llama-3) for every entry it composed, before
``cm_walk_finish`` took the accepted ids out of the same words in another pass; after a value in
an object of many optional properties (Snowplow's sp_339 after ``"br_cookies":true``) one mask
composes ~160 entries.  Now the take counts: a word is taken only if its bits fit under the ids'
limit (an eighth of the words), and past it the ids taken are set again and the words counted.
The references: every state's entry with it on equals it off and plain walks', over a vocabulary
whose ids' limit is a few tokens (so both the take and the give-back run); Llama-3 masks along a
document equal too."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import numpy as np
import pytest

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import VOCAB, _optional_object, _same, llama3_chain_masks_same


def _later(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.compose_count_later_enable, on)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the count left to the take or not; how many composed
    entries left it."""
    with _later(on):
        n0 = _core.compose_counted_later()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.compose_counted_later() - n0


# the object's pieces and numbers: ~1,100 tokens, 35 words, ids below 4 (an eighth of the words),
# so a composed entry of 4 or more accepted tokens gives its taken ids back
NUMBERS = [str(i).encode() for i in range(1000)] + [f"{i},".encode() for i in range(60)]


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the count left to the take equals it counted at once and plain
    walks'; on, composed entries left it, off none."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    toks = list(dict.fromkeys([*VOCAB, *NUMBERS]))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, later = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert later > 0 and none == 0, (later, none)
    sizes = {int(np.unpackbits(x[0].view(np.uint8)).sum()) for x in on}  # the accepted words' bits
    assert min(sizes) < 4 <= max(sizes), sizes  # entries on both sides of the ids' limit
    _same(on, off, "the count at once")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the count left
    to the take and counted at once, and equal to plain walks'."""
    llama3_chain_masks_same(_later, _core.compose_counted_later, 10)
