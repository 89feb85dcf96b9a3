"""The upward filter's scans of big sets kept by the set's version and the byte's class
(csrc/earley.c, ``scan_slot`` / ``scan_kept`` in ``cm_chart_scan``; ``_core.chart_scan_memo_enable``).

The rests of a `ws` start's uncertain tokens, read in trie order through the upward chart, come
back to the same big set (the first set of ~1,000 items, a string's content or close of hundreds)
and scan it again with a byte of a class it was scanned with before: the kernel, and so the
closure, is the same while the set's version is (a grammar without lookahead debts reads a byte
only through its class), so the closure is taken from the memo entry that scan made, or the scan
dies at once.  Every state's entry with it on must equal it off, and plain walks'; the masks
along real documents too; on, the counter must move where such scans recur, and stay still off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along
from .test_entries import WALKS_ONLY, _longest_tokens, entries, shipped
from .test_filter_pairs import OWN_RULES
from .test_filter_skip import _same
from .test_memo_big import BIG_BYTES, MANY, _big_vocab, _grammar

CORPORA = Path(__file__).parent / "corpora"


@contextmanager
def _kept(on: bool) -> Iterator[None]:
    with core_switch(_core.chart_scan_memo_enable, on):
        yield


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: Any) -> tuple[list, int]:
    """Every state's entry with kept scans on or off; the scans answered by them."""
    hits = _core.chart_scan_memo_hits()
    with _kept(on):
        got = entries(cfgmask.compile(g, vocab, **kw))
    return got, _core.chart_scan_memo_hits() - hits


def assert_kept_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, plain: bool = False, **kw: Any) -> int:
    """Entries with kept scans on equal to off (and, plain, to plain walks'); the scans answered."""
    on, hits = _entries(g, vocab, True, **kw)
    off, none = _entries(g, vocab, False, **kw)
    assert none == 0, "scans answered with the switch off"
    _same(on, off, "kept scans off")
    if plain:
        with _kept(True):
            _same(on, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY, **kw)), "plain walks")
    return hits


def test_json_many_values_answers_scans() -> None:
    """Llama-3's ` "...` tokens after a value start's `ws` over an object of many properties: the
    big sets of its upward chart are scanned again by bytes of a class met before."""
    hits = assert_kept_same(cfgmask.Grammar.from_json_schema(json.dumps(MANY)), cfgmask.Vocabulary.llama3())
    assert hits > 0, hits


@pytest.mark.parametrize("name", ["json.gbnf", "c.gbnf", "sql.lark"])
def test_shipped_grammars_same_entries(name: str) -> None:
    """sql.lark has lookahead debts: no scan is kept there (the byte, not its class, decides)."""
    hits = assert_kept_same(shipped(name), cfgmask.Vocabulary.llama3())
    if name == "sql.lark":
        assert hits == 0


def _masks(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, tokens: list[int], on: bool) -> tuple[list, int]:
    hits = _core.chart_scan_memo_hits()
    with _kept(on):
        got = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
    return got, _core.chart_scan_memo_hits() - hits


def _assert_masks_same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x, y), f"mask {i} differs"


def test_json_document_masks_same() -> None:
    g = cfgmask.Grammar.from_json_schema(json.dumps(MANY))
    vocab = cfgmask.Vocabulary.llama3()
    doc = {"s0": "ab(c)", "s5": "", "n3": 7, "o": [{"t0": "x", "t1": "2024-01-02T03:04:05Z"}]}
    tokens = _longest_tokens(vocab, json.dumps(doc).encode())
    _assert_masks_same(_masks(g, vocab, tokens, True)[0], _masks(g, vocab, tokens, False)[0])


def test_llama3_snowplow_first_documents_masks_same() -> None:
    """Snowplow's sp_333 and sp_339 (the largest first-use fills: a value start's `ws` after
    `"attempts":` and `"br_cookies":`) along the first 60 tokens of their first instances, as
    MaskBench replays them: the masks with kept scans equal those without, and scans are kept."""
    pytest.importorskip("quicktok")
    from benchmarks.bench_maskbench import job_of, load_corpus

    vocab = cfgmask.Vocabulary.llama3()
    recs = {
        r["id"]: r
        for r in load_corpus(CORPORA / "jsonschemabench", None, sample=False)
        if r["id"] in ("Snowplow/sp_333_Normalized", "Snowplow/sp_339_Normalized")
    }
    assert len(recs) == 2
    for rec in recs.values():
        job = job_of(rec)
        g = cfgmask.Grammar.from_json_schema(job["text"])
        tokens = list(job["valid"][0][:60])
        on, hits = _masks(g, vocab, tokens, True)
        off, none = _masks(g, vocab, tokens, False)
        assert hits > 0 and none == 0, (rec["id"], hits, none)
        _assert_masks_same(on, off)


@pytest.mark.parametrize("seed", range(3))
def test_random_vocab_same_entries(seed: int) -> None:
    assert_kept_same(cfgmask.Grammar.from_gbnf(_grammar(40)), _big_vocab(seed), plain=True, limits=OWN_RULES)


PIECE = st.lists(st.sampled_from(BIG_BYTES), min_size=1, max_size=10).map(bytes)
PIECES = st.lists(PIECE, min_size=1, max_size=80)


@given(st.integers(20, 48), PIECES)
def test_hypothesis_same_entries(n: int, pieces: list) -> None:
    """test_memo_big's blank before n string rules, over random blank-and-quote led pieces."""
    bare = {bytes([x]) for x in range(256)}
    vocab = cfgmask.Vocabulary.from_token_bytes(sorted(bare | set(pieces) | {b' "' + p for p in pieces}))
    assert_kept_same(cfgmask.Grammar.from_gbnf(_grammar(n)), vocab, plain=True, limits=OWN_RULES)
