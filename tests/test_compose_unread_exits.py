"""A call part's candidates chosen by the positions where its callee completes (csrc/compose.c
``unread_exits``; ``_core.compose_unread_exits_enable``).

A call part's uncertain token goes on in the composed state's chart only through the state the
call returns to, from a position where the callee completes inside the token.  The byte check
(``compose_unread_enable``) keeps a token where that state reads some byte after the first; the
exit check keeps it only where the state reads the byte right after one of the callee's
completions, read off the chart of the callee's start (its exits).  After a value in an object of
optional properties each property's rest calls ``ws`` and returns to a state that reads ``,``
alone: a blank, then a quote, then a comma later (`` "",``) passed the byte check at every level of
the chain, though ``ws`` ends after the blank.  The references: every state's entry with the check
on equals it off and plain walks', over a vocabulary of the object's pieces with blanks before them
(a comma right after the blank, or only later), also under a small cache limit and over random
vocabularies of such pieces; a left-recursive callee (the check declines); the shipped grammars;
Llama-3 masks along a document of optional properties equal on, off and plain."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_compose_cands_memo import switched_entries
from .test_compose_unread import BLANKS
from .test_entries import WALKS_ONLY, shipped
from .test_listed_reuse import VOCAB, _optional_object, _same, llama3_chain_masks_same


def _exits(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.compose_unread_exits_enable, on)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the check on or off; how many lists it chose."""
    return switched_entries(_exits, _core.compose_unread_exit_lists, g, vocab, on, **kw)


# a comma right after the blanks (read on) or only later (`ws` ended before: not read on)
LATER = [b' "",', b' "a",', b' ",', b" 1,", b" },", b"\n  },", b' "p0",', b"  ,", b" \n,", b"\t,", b' ""},']


def _vocab(extra: list[bytes]) -> cfgmask.Vocabulary:
    """The optional chain's pieces, blanks before them, and `extra`."""
    toks = [t for t in dict.fromkeys([*VOCAB, *BLANKS, *extra]) if t]
    return cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """Every state's entry with the check on equals it off and plain walks'; on, lists were chosen
    by exits, off none."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    vocab = _vocab(LATER)
    on, chosen = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert chosen > 0 and none == 0, (chosen, none)
    _same(on, off, "the check off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


@pytest.mark.parametrize("limit", [1, 1 << 12])
def test_small_cache_entries_same(limit: int) -> None:
    """Past the cache's limit parts and lists are not kept (chosen each time): entries equal."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(17)))
    lim = cfgmask.MatcherLimits(max_cache_bytes=limit)
    vocab = _vocab(LATER)
    on, _ = _entries(g, vocab, True, matcher_limits=lim)
    off, _ = _entries(g, vocab, False, matcher_limits=lim)
    _same(on, off, "the check off")


PIECES = [b" ", b"  ", b"\n", b"\t", b",", b'"', b"}", b"{", b":", b"1", b"p0", b"_a", b"true", b"]", b"["]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 7),
    toks=st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map(b"".join), max_size=40),
)
def test_random_vocabularies_same(n: int, toks: list[bytes]) -> None:
    """Random tokens of blanks, commas, quotes and braces over a chain of n optional properties:
    every state's entry with the check on equals it off."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    vocab = _vocab(toks)
    _same(_entries(g, vocab, True)[0], _entries(g, vocab, False)[0], "the check off")


# `items` calls itself first (left recursion), and the state after the call reads `]` or `}` alone
LEFT = r"""
root  ::= "[" items "]" | "{" items "}"
items ::= items "," item | item
item  ::= [0-9]+ | "\"" [a-z]* "\""
"""
LEFT_TOKENS = [
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b" ,",
    b' "',
    b'"a",',
    b"1,",
    b"12",
    b" 1",
    b"1 ,",
    b'" ,',
    b"]]",
    b" ]",
]


def test_left_recursive_callee_same() -> None:
    """A callee that calls itself first (the check declines: its start's first set calls it):
    entries on = off = plain walks."""
    g = cfgmask.Grammar.from_gbnf(LEFT)
    toks = [*LEFT_TOKENS, *(bytes([c]) for c in b'0123456789abc" \n,[]{}')]
    toks = list(dict.fromkeys(toks))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, _ = _entries(g, vocab, True)
    _same(on, _entries(g, vocab, False)[0], "the check off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.lark"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Llama-3 over the shipped grammars (sql.lark with lookahead debts): entries on = off, and
    off no list chosen by exits."""
    g, vocab = shipped(name), cfgmask.Vocabulary.llama3()
    (on, _), (off, none) = (_entries(g, vocab, mode) for mode in (True, False))
    _same(on, off, "the check off")
    assert none == 0, none


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties: every mask equal with the check on and
    off, and equal to plain walks'."""
    llama3_chain_masks_same(_exits, _core.compose_unread_exit_lists, 0)
