"""A block boundary's byte walk assembled from its string start's analysis (csrc/chains.c
``bytes_recall``; issue 12, session 43).  A long string's start is composed, its byte edges (the
partial tail and the closing quote) walked by the chain from the state with its calls left out;
every block boundary's state of the same value rule reads its bytes into the same states, so it
takes the start's chain instance instead of analysing the tail again.

With the shortcut on and off: every state's entry equal each other's and plain walks' (Llama-3's
strings of sp_4's bounds, random blocks over small vocabularies), the masks equal along sp_4's
first valid document (whose user agent stops on a block boundary).  The masks along random walks
of the same blocks, with the shortcut on (the default), equal the reference's in
tests/test_repeats.py (``test_blocks_masks_equal_reference``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_entries
from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import PIECES, _compile, bounded
from .test_wrap_deep import _props

NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
PLAIN = {"count_chains": False, "share_loop_walks": False, "wrap_repeats": 0}
ROOT = Path(__file__).resolve().parents[1]


def _entries(compiled: cfgmask.CompiledGrammar) -> list[tuple[Any, Any]]:
    """Every state's entry, in state order (a string's start before its boundaries)."""
    h = compiled._handle
    return [h.entry(s) for s in range(compiled.tables.n_states)]


def _three(build: Any) -> int:
    """``build(plain)``'s entries with the shortcut on, off, and as plain walks' compared; how
    many walks took a kept start's instance."""
    before = _core.chain_bytes_memo_hits()
    with core_switch(_core.chain_bytes_memo_enable, True):
        on = build(False)
    hits = _core.chain_bytes_memo_hits() - before
    with core_switch(_core.chain_bytes_memo_enable, False):
        off = build(False)
        plain = build(True)
    same_entries(on, off, "shortcut off")
    same_entries(on, plain, "plain walks")
    return hits


@pytest.mark.parametrize("schema", [{"type": "string", "maxLength": 2000}, _props(45, 2000, 4096, 8192)])
def test_llama3_bytes_memo_same_entries(schema: dict) -> None:
    """sp_4's string bounds with Llama-3: every entry the same with the shortcut on and off and as
    plain walks'; the boundaries take their start's instance."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(schema)
    hits = _three(
        lambda plain: _entries(
            cfgmask.compile(g, vocab, _strategy=Strategy(**(PLAIN if plain else {}), **NO_MEMO))
        )
    )
    assert hits > 0


def _sp4() -> tuple[dict, dict]:
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if '"Snowplow/sp_4_Normalized"' in x)
    return case["schema"], next(t["data"] for t in case["tests"] if t["valid"])


def sp4_masks_on_off(enable: Any, hits: Any, unmoved: Any = None) -> None:
    """The masks along sp_4's first valid document with the switch ``enable`` on and off, equal;
    ``hits()`` moves with it on, and ``unmoved()`` (where given) does not with it off."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    schema, data = _sp4()
    tokens = enc.encode_ordinary(json.dumps(data, separators=(",", ":")))
    g = cfgmask.Grammar.from_json_schema(schema)
    before = hits()
    with core_switch(enable, True):
        on = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
    assert hits() > before
    kept = unmoved() if unmoved else None
    with core_switch(enable, False):
        off = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
    assert (unmoved() if unmoved else None) == kept
    assert all(np.array_equal(a, b) for a, b in zip(on, off, strict=True))


def test_llama3_bytes_memo_masks_along_sp4() -> None:
    """The masks along sp_4's first valid document the same with the shortcut on and off; its user
    agent's second block boundary (fill 121) takes the string start's instance."""
    sp4_masks_on_off(_core.chain_bytes_memo_enable, _core.chain_bytes_memo_hits)


def _small(g: Any, vocab: cfgmask.Vocabulary, budget: int, plain: bool) -> cfgmask.CompiledGrammar:
    """Wraps on every block entry or (plain) no chains and every position walking the trie."""
    return _compile(g, vocab, budget, wrap=0 if plain else 1, chains=not plain)


@given(bounded(), vocabularies(PIECES))
def test_small_blocks_bytes_memo_same_entries(case: tuple[Any, int], v: Vocab) -> None:
    """Random blocks and vocabularies: every entry the same with the shortcut on and off and as
    plain walks'."""
    g, budget = case
    vocab = _vocab(v)
    _three(lambda plain: _entries(_small(g, vocab, budget, plain)))
