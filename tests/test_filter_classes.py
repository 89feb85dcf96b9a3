"""The upward filter's class prefix (csrc/walk.c, ``cm_walk_filter_uncertain`` and
``follow_answer``; ``_core.filter_class_prefix_enable``).

Where a chart reads bytes through their class alone (no lookahead debts, no segments), two byte
strings of the same classes leave it the same sets and exits, so the filter's charts keep the
sets of the token before for the common prefix of classes, not only of bytes.  At a long JSON
string's block end the uncertain tokens are Llama-3's runs of `#`, `*`, `/`, `=`, `|` ... (one
class inside a string), each read from its first byte before.  Every state's entry with the
class prefix on must equal it off, and plain walks'; on, the counter of bytes taken by class
must move where tokens of one class sequence differ in bytes, and stay still off."""

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
from .test_filter_pairs import OWN_RULES
from .test_filter_skip import _same


@contextmanager
def _classes(on: bool) -> Iterator[None]:
    _core.filter_class_prefix_enable(on)
    try:
        yield
    finally:
        _core.filter_class_prefix_enable(True)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: Any) -> tuple[list, int]:
    """Every state's entry, caches cleared, the class prefix on or off; the bytes taken by class."""
    cfgmask.clear_caches()
    shared = _core.filter_class_shared()
    with _classes(on):
        got = entries(cfgmask.compile(g, vocab, **kw))
    return got, _core.filter_class_shared() - shared


def assert_classes_same(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False, **kw: Any
) -> int:
    """Entries with the class prefix on equal to it off (and, plain, to plain walks'); the bytes
    taken by class."""
    on, shared = _entries(g, vocab, True, **kw)
    off, none = _entries(g, vocab, False, **kw)
    assert none == 0, "bytes taken by class with the switch off"
    _same(on, off, "the class prefix off")
    if plain:
        _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY, **kw)[0], "plain walks")
    return shared


# A name whose class holds letters, `*` and `/` alike, and a counted string's text (blocks that
# wrap), each its own rule, then tails that read `#`, `=` and blanks apart: the rests after the
# rule's end decide, and uncertain tokens of one class sequence differ in bytes.
CLASS_GRAMMARS = [
    'root ::= item ( "," item )*\nitem ::= name ( "#" "#" | "=" "=" | " " )?\nname ::= [a-z*/]+',
    'root ::= item+\nitem ::= "\\"" text "\\"" ( "#" | " " "="? )\ntext ::= [a-z*/ ]{0,30}',
]
CLASS_BYTES = [*b'ab*/#= ",']


def _class_vocab(seed: int, n: int = 700) -> cfgmask.Vocabulary:
    """Every byte, and random strings of the grammars' own bytes, runs of one byte among them."""
    rng = np.random.default_rng(seed)
    toks = {bytes([b]) for b in range(256)}
    for _ in range(n):
        if rng.random() < 0.3:
            toks.add(bytes([int(rng.choice(CLASS_BYTES))]) * int(rng.integers(2, 60)) + b'"')
        else:
            toks.add(bytes(rng.choice(CLASS_BYTES, size=int(rng.integers(2, 12))).astype(np.uint8)))
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


LONG_STRING = {
    "type": "object",
    "properties": {"a": {"type": "string", "maxLength": 1024}, "b": {"type": "integer"}},
    "required": ["a"],
}


def test_json_long_string_takes_by_class() -> None:
    """Llama-3's runs of `#`, `*`, `/`, `=` ... past a long string's block ends: the filter's
    charts take most of each from the run before it."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(LONG_STRING))
    shared = assert_classes_same(g, cfgmask.Vocabulary.llama3())
    assert shared > 1000, shared


def test_json_document_masks_same() -> None:
    """The masks along a document whose string crosses block ends, caches cleared, with the class
    prefix and without."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(LONG_STRING))
    vocab = cfgmask.Vocabulary.llama3()
    doc = {"a": "x" * 30 + "%3A%3AReindeers-and-//" + "y" * 50, "b": 7}
    tokens = _longest_tokens(vocab, json.dumps(doc).encode())
    got = []
    for on in (True, False):
        cfgmask.clear_caches()
        with _classes(on):
            got.append(masks_along(cfgmask.compile(g, vocab), tokens, final=True))
    for i, (a, b) in enumerate(zip(*got, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.lark"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """sql.lark has lookahead debts: no bytes taken by class there."""
    shared = assert_classes_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "sql.lark":
        assert shared == 0, shared


@pytest.mark.parametrize("index", range(len(CLASS_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(index: int, seed: int) -> None:
    g = cfgmask.Grammar.from_gbnf(CLASS_GRAMMARS[index])
    shared = assert_classes_same(g, _class_vocab(seed), plain=True, limits=OWN_RULES)
    assert shared > 0, CLASS_GRAMMARS[index]


@given(
    st.integers(0, len(CLASS_GRAMMARS) - 1),
    st.lists(
        st.lists(st.sampled_from(CLASS_BYTES), min_size=2, max_size=14).map(bytes), min_size=1, max_size=80
    ),
)
def test_hypothesis_same_entries(index: int, pieces: list) -> None:
    toks = {bytes([x]) for x in range(256)} | set(pieces)
    g = cfgmask.Grammar.from_gbnf(CLASS_GRAMMARS[index])
    assert_classes_same(g, cfgmask.Vocabulary.from_token_bytes(sorted(toks)), plain=True, limits=OWN_RULES)
