"""The upward filter's subtree skip after name stops (csrc/walk.c, ``cm_walk_filter_uncertain``;
``_core.filter_stop_skip_enable``).

A name stop decides an exit of an uncertain token by the name run after the exit and the byte (a
non-ASCII lead: the two bytes) that ends it, so a token whose every exit is no exit, does not
follow the rule, or is dropped by a name stop is dropped for bytes of its prefix alone, and every
later token of that prefix's trie subtree is dropped alike: those are skipped unread, as after a
pair stop (test_filter_skip).  sql.lark's `qualified_name` start with Llama-3: ~2,800 names that
run into a non-ASCII letter, about half of them skipped.  Every state's entry with the skip on
must equal it off and plain walks'; the name stops' count must not move; the masks along
bench_gbnf's sql.lark documents from cold caches the same; and a case where the stop's second
byte decides (a prefix one byte shorter would skip a token that lives)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import EXPR_PIECES, WALKS_ONLY, _longest_tokens, entries, expression_grammars, shipped
from .test_name_stops import NAME_STOP_GRAMMARS, name_vocab


def _entries(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, strategy: Strategy
) -> tuple[list, int, int]:
    """Every state's entry with the skip after name stops on or off, caches cleared; the tokens it
    skipped and the name stops' answers while building them."""
    with core_switch(_core.filter_stop_skip_enable, on):
        skipped, stops = _core.filter_stop_skipped(), _core.name_stop_hits()
        got = entries(cfgmask.compile(g, vocab, _strategy=strategy))
        return got, _core.filter_stop_skipped() - skipped, _core.name_stop_hits() - stops


def assert_stop_skip_same(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    strategy: Strategy | None = None,
    *,
    plain: bool = False,
    lark: bool = False,
) -> int:
    """Entries with the skip on equal to it off (and, plain, to whole walks'), and in a ``lark``
    grammar the name stops' count the same (a GBNF grammar's pair stops are made after a count
    of the exits read, so there a skip moves exits from the name stops to the pair stops); how
    many tokens the skip after name stops skipped."""
    strategy = strategy or Strategy()
    on, skipped, stops_on = _entries(g, vocab, True, strategy)
    off, none, stops_off = _entries(g, vocab, False, strategy)
    assert none == 0, "tokens skipped after a name stop with the switch off"
    same_entries(on, off, "the skip after name stops off")
    if lark:
        assert stops_on == stops_off, ("name stops counted", stops_on, stops_off)
    if plain:
        with core_switch(_core.filter_stop_skip_enable, True):
            same_entries(on, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")
    return skipped


@pytest.mark.parametrize("name", ["sql.lark", "c.gbnf"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """Every state's entry with Llama-3; sql.lark's names skip thousands of tokens."""
    skipped = assert_stop_skip_same(shipped(name), cfgmask.Vocabulary.llama3(), lark=name.endswith(".lark"))
    if name.endswith(".lark"):
        assert skipped > 5000, skipped


def sql_cold_pass_same(enable: Callable[[bool], None]) -> None:
    """bench_gbnf's cold pass of sql.lark: compiled once, its documents in order from cold
    caches; every mask the same with the `enable` switch on and off."""
    from benchmarks.documents import DOCUMENTS

    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("sql.lark")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS["sql"]()]
    out = {}
    for on in (True, False):
        with core_switch(enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
    same_document_masks(out[True], out[False], docs)


def test_documents_cold_pass_same_masks() -> None:
    """The cold pass of sql.lark: every mask the same with the skip and without."""
    sql_cold_pass_same(_core.filter_stop_skip_enable)


@pytest.mark.parametrize("index", range(len(NAME_STOP_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(index: int, seed: int) -> None:
    """Name stops in every filter (``name_stops=1``) over random name tokens: entries on = off
    and whole walks'."""
    g = NAME_STOP_GRAMMARS[index]
    assert_stop_skip_same(g, name_vocab(seed), Strategy(name_stops=1), plain=True, lark=index == 0)


# An alias may follow a name with no blank and ends in é (C3 A9) or ễ (E1 BB 85).  At an item's
# start `abạ` (ạ: E1 BA A1) exits after `a` and its rest `bạ` dies on BA, the second byte the
# stops read after E1: dropped for its first four bytes (`ab`, E1, BA), and `abạx` and `abạy`
# under them are skipped; `abễ` (an alias `bễ` after the name `a`) lives, and lies in the subtree
# of `ab` E1, a prefix one byte shorter.
SECOND_PIECES = ("abạ", "abạx", "abạy", "abễ", "abễx", "ab", "a", "b", " ", ",", "é", "ễ", "x", "y")


def test_second_byte_decides() -> None:
    """The skip reads the stop's second byte: the live token after the dead one keeps its place."""
    g = NAME_STOP_GRAMMARS[4]
    toks = sorted({bytes([b]) for b in range(256)} | {p.encode() for p in SECOND_PIECES})
    vocab = cfgmask.Vocabulary.from_token_bytes(toks)
    skipped = assert_stop_skip_same(g, vocab, Strategy(name_stops=1), plain=True)
    assert skipped > 0, "no token skipped after a name stop"
    mask = cfgmask.allocate_bitmask(1, vocab.size)
    cfgmask.Matcher(cfgmask.compile(g, vocab)).fill_bitmask(mask, 0)
    bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")
    assert bits[toks.index("abễ".encode())] and not bits[toks.index("abạ".encode())]


@settings(max_examples=40, deadline=None)
@given(expression_grammars(), vocabularies(EXPR_PIECES))
def test_expression_grammars_same_entries(text: str, v: Vocab) -> None:
    assert_stop_skip_same(cfgmask.Grammar.from_gbnf(text), _vocab(v), Strategy(name_stops=1))
