"""The closure memo of big kernels in the upward filter's chart (csrc/earley.c,
``close_memoized``; the chart's ``memo_big``, set by walk.c's ``follow_chart`` for the upward
chart; ``_core.chart_memo_big_enable``).

A `ws` rule called from every place of a JSON Schema grammar has an upward chart whose sets hold
hundreds of items (each property's value its own rule), and the sorted rests of its uncertain
tokens (` "#"`, ` "("`, ` ")"` ...) reach the same kernels again after other bytes and at other
positions: the string's content after any one character, its close after any content.  A closure
depends only on its kernel and the sets up to the kernel's newest origin (their versions), so
the memo that held kernels of at most 32 items now holds any in that chart.  Every state's entry
with it on must equal it off, and plain walks'; on, the counter of big closures taken from the
memo must move where such kernels recur, and stay still off."""

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
def _big(on: bool) -> Iterator[None]:
    _core.chart_memo_big_enable(on)
    try:
        yield
    finally:
        _core.chart_memo_big_enable(True)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: Any) -> tuple[list, int]:
    """Every state's entry, caches cleared, the big memo on or off; the big closures taken."""
    cfgmask.clear_caches()
    hits = _core.chart_memo_big_hits()
    with _big(on):
        got = entries(cfgmask.compile(g, vocab, **kw))
    return got, _core.chart_memo_big_hits() - hits


def assert_big_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False, **kw: Any) -> int:
    """Entries with the big memo on equal to it off (and, plain, to plain walks'); the big
    closures taken from the memo."""
    on, hits = _entries(g, vocab, True, **kw)
    off, none = _entries(g, vocab, False, **kw)
    assert none == 0, "big closures taken with the switch off"
    _same(on, off, "the big memo off")
    if plain:
        _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY, **kw)[0], "plain walks")
    return hits


# Many properties, each value its own rule: the `ws` rule's upward chart closes to hundreds of
# items, the string values' contents and closes to dozens each (as Snowplow's sp_333).
MANY = {
    "type": "object",
    "properties": {
        **{f"s{i}": {"type": "string", "maxLength": 10 + i} for i in range(24)},
        **{f"n{i}": {"type": "integer", "minimum": i} for i in range(8)},
        "o": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    f"t{i}": {"type": "string", **({"format": "date-time"} if i % 2 else {})}
                    for i in range(12)
                },
            },
        },
    },
    "required": ["s0", "o"],
}


def _many() -> cfgmask.Grammar:
    return cfgmask.Grammar.from_json_schema(json.dumps(MANY))


def test_json_many_values_takes_big_closures() -> None:
    """Llama-3's ` "...` tokens after the value start's `ws`: the string's closes and contents
    after different bytes are taken from the memo."""
    hits = assert_big_same(_many(), cfgmask.Vocabulary.llama3())
    assert hits > 20, hits


def test_json_document_masks_same() -> None:
    """The masks along a document, caches cleared, with the big memo and without."""
    g = _many()
    vocab = cfgmask.Vocabulary.llama3()
    doc = {"s0": "ab(c)", "s5": "", "n3": 7, "o": [{"t0": "x", "t1": "2024-01-02T03:04:05Z"}]}
    tokens = _longest_tokens(vocab, json.dumps(doc).encode())
    got = []
    for on in (True, False):
        cfgmask.clear_caches()
        with _big(on):
            got.append(masks_along(cfgmask.compile(g, vocab), tokens, final=True))
    for i, (a, b) in enumerate(zip(*got, strict=True)):
        assert np.array_equal(a, b), f"mask {i} differs"


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.lark"])
def test_shipped_grammars_same_entries(name: str) -> None:
    assert_big_same(shipped(name), cfgmask.Vocabulary.llama3())


# A blank called before forty string rules (each its own, as a schema's properties), then tails
# that read `,`, `;` and `)` apart: the blank's uncertain tokens ` "ab"`, ` "#(`, ... close the
# strings after different contents, one big kernel each time.
def _grammar(n: int) -> str:
    alts = " | ".join(f"s{i}" for i in range(n))
    rules = "\n".join(f's{i} ::= "\\"" [a-z#(]* "\\"" "{chr(65 + i % 26)}"?' for i in range(n))
    return f'root ::= item ( ws "," item )*\nitem ::= ws ( {alts} ) ( ";" | ")" )?\nws ::= " "?\n{rules}'


BIG_BYTES = [*b'ab#(" ,;)AB']


def _big_vocab(seed: int, n: int = 600) -> cfgmask.Vocabulary:
    """Every byte, and random strings of the grammar's bytes, most of them blank-and-quote led."""
    rng = np.random.default_rng(seed)
    toks = {bytes([b]) for b in range(256)}
    for _ in range(n):
        body = bytes(rng.choice(BIG_BYTES, size=int(rng.integers(1, 8))).astype(np.uint8))
        toks.add((b' "' if rng.random() < 0.7 else b"") + body)
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(seed: int) -> None:
    hits = assert_big_same(
        cfgmask.Grammar.from_gbnf(_grammar(40)), _big_vocab(seed), plain=True, limits=OWN_RULES
    )
    assert hits > 0, seed


@given(
    st.integers(20, 48),
    st.lists(
        st.lists(st.sampled_from(BIG_BYTES), min_size=1, max_size=10).map(bytes), min_size=1, max_size=80
    ),
)
def test_hypothesis_same_entries(n: int, pieces: list) -> None:
    toks = {bytes([x]) for x in range(256)} | {b' "' + p for p in pieces} | set(pieces)
    g = cfgmask.Grammar.from_gbnf(_grammar(n))
    assert_big_same(g, cfgmask.Vocabulary.from_token_bytes(sorted(toks)), plain=True, limits=OWN_RULES)
