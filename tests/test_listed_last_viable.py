"""A listed walk's last byte of each text only checked, its set not built (csrc/walk.c
``walk_listed``; ``_core.listed_last_viable_enable``).

A composed entry's listed walk reads its candidates in trie order through one chart, keeping the
sets of the text before for the next one's shared prefix.  The set after a text's last byte is
only read again by a later text that extends the whole of it; the verdict on that byte needs no
set (``cm_chart_viable``, as ``scan_rest`` does for the filter), so the set is left unbuilt and a
longer text scans the byte again.  The references: every state's entry with the check on equals
it off and plain walks', over a vocabulary of an optional-property object's pieces with blanks and
prefixes of one another (texts that extend a checked one); the shipped grammars; Llama-3 masks
along a document of optional properties equal on, off and plain."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_compose_unread import BLANKS
from .test_entries import WALKS_ONLY, entries, shipped
from .test_listed_reuse import VOCAB, _optional_object, _same, llama3_chain_masks_same


def _last(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.listed_last_viable_enable, on)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the check on or off; how many last bytes it checked."""
    with _last(on):
        n0 = _core.listed_last_checked()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.listed_last_checked() - n0


# texts that extend one another, so a later text reads on past a checked last byte
PREFIXES = [b' "p', b' "p0', b' "p01', b' "p01_', b' "p01_b', b' "p01_b"', b' "p01_b":', b' "p01_b":1']


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the check on equals it off and plain walks'; on, last bytes were
    checked, off none."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    toks = list(dict.fromkeys([*VOCAB, *BLANKS, *PREFIXES]))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, checked = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert checked > 0 and none == 0, (checked, none)
    _same(on, off, "the check off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.lark"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Llama-3 over the shipped grammars (sql.lark with lookahead debts): entries on = off."""
    vocab = cfgmask.Vocabulary.llama3()
    on, _ = _entries(shipped(name), vocab, True)
    off, none = _entries(shipped(name), vocab, False)
    assert none == 0
    _same(on, off, "the check off")


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the check on and
    off, and equal to plain walks'."""
    llama3_chain_masks_same(_last, _core.listed_last_checked, 20)
