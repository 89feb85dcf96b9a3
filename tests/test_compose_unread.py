"""A call part's uncertain tokens that its return state cannot read on are left out of the
composed entry's listed walk (csrc/compose.c ``part_cands``; ``_core.compose_unread_enable``).

A composed state's candidates were every part's uncertain tokens, each walked through the state's
real chart.  A call part's token goes on there only through the state the call returns to; where
that state is no final state, calls nothing and reads no tokens, only its byte edges take the
token on, so a token none of whose bytes after the first they read dies on that path.  After a
value in an object of optional properties each property's rest calls ``ws`` (returning to a state
that reads ``,`` alone) and the next rest: ``ws``'s uncertain tokens were walked again at every
level.  The references: every state's entry with the cut on equals it off and plain walks', over
a vocabulary of the object's pieces with blanks before them (some with a comma after the blank, which
the return state reads, some without); Llama-3 masks along a document equal too."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import VOCAB, _optional_object, _same, llama3_chain_masks_same


def _unread(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.compose_unread_enable, on)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the cut on or off; how many candidates it left out."""
    with _unread(on):
        n0 = _core.compose_unread_skipped()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.compose_unread_skipped() - n0


# blanks before the object's pieces: `ws`'s uncertain tokens, read on by the state after `ws` (a
# comma) or not (a closing brace, a quote, a digit), the comma at each position after the first
BLANKS = [
    b" ,",
    b"  ,",
    b"\n,",
    b' ,"',
    b' ,"p',
    b' ,"p0',
    b" }",
    b"\n}",
    b"  }",
    b' "',
    b" 1",
    b" :",
    b" }}",
    b" },",
    b' },"',
    b" 1,",
    b'  "p0',
    b"\n  ",
    b"\t",
    b" \n",
]


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the cut on equals it off and plain walks'; on, candidates were
    left out, off none."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    toks = list(dict.fromkeys([*VOCAB, *BLANKS]))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, skipped = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert skipped > 0 and none == 0, (skipped, none)
    _same(on, off, "the cut off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the cut on and
    off, and equal to plain walks'."""
    llama3_chain_masks_same(_unread, _core.compose_unread_skipped, 100)
