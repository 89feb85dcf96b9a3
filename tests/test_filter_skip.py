"""The upward filter's subtree skip (csrc/walk.c, ``cm_walk_filter_uncertain``;
``_core.filter_skip_enable``).

The filter reads a rule's uncertain tokens in trie order.  A token it drops for bytes of its
prefix alone -- the item's chart died on one of them, and every exit before that byte was no
exit, did not follow the rule, or met a pair stop whose two bytes lie in that prefix -- drops
every later token of that prefix's trie subtree the same way (after a JSON value's `ws`, ` the`
dies on its pair `th`, and so do ` there`, ` theory` and the rest under ` th`): those are skipped
unread, and counted as the pair stops they meet.  Every state's entry with the skip on must equal
it off, and plain walks'; the pair stops' count must not move; on a JSON Schema's value start with
Llama-3 most of its ~4,300 blank-led tokens must be skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import masks_along
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_filter_pairs import ANY_VALUES, OWN_RULES, PAIR_GRAMMARS, PAIR_PIECES, _pair_vocab


@contextmanager
def _skip(on: bool) -> Iterator[None]:
    _core.filter_skip_enable(on)
    try:
        yield
    finally:
        _core.filter_skip_enable(True)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: Any) -> tuple[list, int, int]:
    """Every state's entry, caches cleared, the skip on or off; the tokens skipped and the pair
    stops' answers while building them."""
    cfgmask.clear_caches()
    skipped, paired = _core.filter_skipped(), _core.filter_pair_hits()
    with _skip(on):
        got = entries(cfgmask.compile(g, vocab, **kw))
    return got, _core.filter_skipped() - skipped, _core.filter_pair_hits() - paired


def _same(a: list, b: list, what: str) -> None:
    differ = [
        s
        for s, (x, y) in enumerate(zip(a, b, strict=True))
        if not (np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]))
    ]
    assert not differ, f"states {differ[:8]}: entries differ from {what}"


def assert_skip_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False, **kw: Any) -> int:
    """Entries with the skip on equal to it off (and, plain, to plain walks'), the pair stops'
    count the same; how many tokens were skipped."""
    on, skipped, paired_on = _entries(g, vocab, True, **kw)
    off, none, paired_off = _entries(g, vocab, False, **kw)
    assert none == 0, "tokens skipped with the switch off"
    _same(on, off, "the skip off")
    assert paired_on == paired_off, ("pair stops counted", paired_on, paired_off)
    if plain:
        _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY, **kw)[0], "plain walks")
    return skipped


def test_json_schema_value_start_skips_most() -> None:
    """Llama-3's ~4,300 blank-led tokens at a value start: most die on their pair and share it with
    their subtree."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(ANY_VALUES))
    skipped = assert_skip_same(g, cfgmask.Vocabulary.llama3(), plain=True)
    assert skipped > 2000, skipped


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.lark"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """c's names and blanks leave rests many callers read on; sql.lark has lookahead debts (no pair
    stops: only chart deaths and exits that do not follow decide a prefix)."""
    assert_skip_same(shipped(name), cfgmask.Vocabulary.llama3())


def test_document_masks_same() -> None:
    """The masks along an indented document, caches cleared: each `ws` state filtered at its first
    use, with the skip and without."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(ANY_VALUES))
    vocab = cfgmask.Vocabulary.llama3()
    doc = {"a": True, "b": [1, {"k": None}, "x y"], "c": [1, 2], "d": "the end"}
    tokens = _longest_tokens(vocab, json.dumps(doc, indent=2).encode())
    got = []
    for on in (True, False):
        cfgmask.clear_caches()
        with _skip(on):
            got.append(masks_along(cfgmask.compile(g, vocab), tokens, final=True))
    for i, (a, b) in enumerate(zip(*got, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


@pytest.mark.parametrize("index", range(len(PAIR_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(index: int, seed: int) -> None:
    """Random rests of two to five bytes after a name's few bytes: subtrees that die on a pair, on
    the chart, or keep going under a shared prefix."""
    g = cfgmask.Grammar.from_gbnf(PAIR_GRAMMARS[index])
    skipped = assert_skip_same(g, _pair_vocab(seed), plain=True, limits=OWN_RULES)
    # the second grammar's blank run and pairs drop whole subtrees; the others' rests are decided
    # past their second byte (by the upward chart), so their entries only check the skip stays off
    assert skipped > 0 or index != 1, PAIR_GRAMMARS[index]


@given(st.integers(0, len(PAIR_GRAMMARS) - 1), PAIR_PIECES)
def test_hypothesis_same_entries(index: int, pieces: list) -> None:
    toks = {bytes([x]) for x in range(256)} | {head + rest for head, rest in pieces}
    g = cfgmask.Grammar.from_gbnf(PAIR_GRAMMARS[index])
    assert_skip_same(g, cfgmask.Vocabulary.from_token_bytes(sorted(toks)), limits=OWN_RULES)
