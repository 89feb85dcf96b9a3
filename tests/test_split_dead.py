"""A wrapping block position too wide for the filter takes the rests that no state of the block's
region reads on out of its split (csrc/chains.c, ``g_split_dead``; issue 12, session 42).  Near a
block's end Llama-3 puts 10^4-10^5 tokens at a string's end nodes, past the filter's limit, so the
entry keeps them all uncertain and the split's rest held the runs of spaces that end on a raw
newline or tab: each was stepped through ``check_split`` and found dead at every such mask.
``cm_walk_drop_dead`` proves them dead in every context; they leave the rest only (the entry's
uncertain tokens stay whole: a mask whose block cannot start again reads those).

With the cut on and off: every entry's accepted and uncertain tokens equal each other and plain
walks', the wrap bits equal, the rest on a subset of the rest off; the masks equal along
Snowplow sp_4's document and long strings with Llama-3, and equal the reference along random
walks of random blocks and vocabularies (the filter off, so small vocabularies take the cut)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, grammar, lit, masks_along, rep, seq, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import PIECES, UNIT, bounded
from .test_wrap_deep import _props

NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
PLAIN = {"count_chains": False, "share_loop_walks": False, "wrap_repeats": 0}
ROOT = Path(__file__).resolve().parents[1]
# runs that end on a byte no string state reads (a newline), or on one it does
DEAD_RUNS = (b"aaaaaaaaaaaaa\n", b"aaaaa\t", b"abcabcabc\n", b"abcabcabc,", b'bbbbbbbbb"x', b"ccccccc\\n")


def _entries(compiled: cfgmask.CompiledGrammar) -> list[tuple[Any, Any, Any]]:
    h = compiled._handle
    return [(*h.entry(s), h.entry_wrap(s)) for s in range(compiled.tables.n_states)]


def _built(on: bool, build: Any) -> Any:
    with core_switch(_core.chain_split_dead_enable, on):
        return build()


def _same(on: list, off: list, plain: list) -> int:
    """Entries equal but for the rest on being a subset of the rest off; how many rests fewer."""
    fewer = 0
    for s, (a, b, c) in enumerate(zip(on, off, plain, strict=True)):
        for x, what in ((b, "cut off"), (c, "plain walk")):
            assert np.array_equal(a[0], x[0]), f"state {s}: accepted tokens differ from the {what}"
            assert np.array_equal(a[1], x[1]), f"state {s}: uncertain tokens differ from the {what}"
        assert (a[2] is None) == (b[2] is None), f"state {s}: split by one of them only"
        if a[2] is not None:
            assert np.array_equal(a[2][0], b[2][0]), f"state {s}: wrap bits differ"
            kept, whole = set(a[2][1].tolist()), set(b[2][1].tolist())
            assert kept <= whole, f"state {s}: a rest the cut off does not have"
            fewer += len(whole - kept)
    return fewer


def _three(build: Callable[[bool], list]) -> tuple[int, int]:
    """``build(plain)``'s entries with the cut on, off, and as plain walks' (``build(True)``)
    compared (_same): the rests they lose, and how far the counter moved."""
    before = _core.chain_split_dead_dropped()
    on = _built(True, lambda: build(False))
    taken = _core.chain_split_dead_dropped() - before
    off = _built(False, lambda: build(False))
    plain = _built(False, lambda: build(True))
    return _same(on, off, plain), taken


@pytest.mark.parametrize("schema", [{"type": "string", "maxLength": 2000}, _props(45, 2000, 4096)])
def test_llama3_split_dead_same_entries(schema: dict) -> None:
    """sp_4's strings with Llama-3: every entry the same with the cut on and off and as plain
    walks'; the block's last positions (past the filter's limit) lose dead rests."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(schema)
    fewer, taken = _three(
        lambda plain: _entries(
            cfgmask.compile(g, vocab, _strategy=Strategy(**(PLAIN if plain else {}), **NO_MEMO))
        )
    )
    assert fewer == taken > 0


def _sp4() -> tuple[dict, dict]:
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if '"Snowplow/sp_4_Normalized"' in x)
    return case["schema"], next(t["data"] for t in case["tests"] if t["valid"])


@pytest.mark.parametrize("doc", ["sp_4", "runs"])
def test_llama3_split_dead_masks_along_a_document(doc: str) -> None:
    """The masks along sp_4's first valid document (its user agent crosses a block's last
    positions), and along one of long runs, the same with the cut on and off."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    schema, data = _sp4()
    if doc == "runs":
        data = {**data, "csUserAgent": "Mozilla/5.0 " + " " * 70 + "x" * 30 + "-" * 60, "csHost": "=" * 50}
    tokens = enc.encode_ordinary(json.dumps(data, separators=(",", ":")))
    g = cfgmask.Grammar.from_json_schema(schema)
    before = _core.chain_split_dead_dropped()
    on = _built(True, lambda: masks_along(cfgmask.compile(g, vocab), tokens, final=True))
    assert _core.chain_split_dead_dropped() > before
    off = _built(False, lambda: masks_along(cfgmask.compile(g, vocab), tokens, final=True))
    assert all(np.array_equal(a, b) for a, b in zip(on, off, strict=True))


def _small(g: Any, vocab: cfgmask.Vocabulary, budget: int, plain: bool) -> cfgmask.CompiledGrammar:
    """Blocks of `budget` units, the filter off (every wrapping position's rest is the unfiltered
    one the cut reads), wraps on every block entry or (plain) plain walks."""
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    kw = PLAIN if plain else {"wrap_repeats": 1}
    return cfgmask.compile(
        g, vocab, limits=limits, _strategy=Strategy(**kw, filter_uncertain=False, **NO_MEMO)
    )


def test_small_block_split_dead_moves() -> None:
    """A bounded string over a few runs that end on a newline: the cut takes some out."""
    g = grammar(root=seq(lit('"'), rep(UNIT, 0, 30), lit('"')))
    v = Vocab(
        tokens=[*PIECES, *DEAD_RUNS, b"aaaaaaaaaaa", None], stop_ids=(len(PIECES) + len(DEAD_RUNS) + 1,)
    )
    fewer, taken = _three(lambda plain: _entries(_small(g, _vocab(v), 8, plain)))
    assert fewer == taken > 0


@given(bounded(), vocabularies(PIECES + DEAD_RUNS))
def test_small_blocks_split_dead_same_entries(case: tuple[Any, int], v: Vocab) -> None:
    """Random blocks and vocabularies of runs ending on a newline, a tab, a comma, a quote, an
    escape, the filter off: every entry the same with the cut on and off and as plain walks'."""
    g, budget = case
    vocab = _vocab(v)
    _three(lambda plain: _entries(_small(g, vocab, budget, plain)))


@given(bounded(), vocabularies(PIECES + DEAD_RUNS), st.data())
def test_small_blocks_split_dead_masks_equal_reference(
    case: tuple[Any, int], v: Vocab, data: st.DataObject
) -> None:
    """The masks with the cut on (the filter off) along random walks equal the reference's and
    plain walks'."""
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    walk = data.draw(token_walks(ref_m, v, max_steps=14))
    with core_switch(_core.chain_split_dead_enable, True):
        cut, plain = (cfgmask.Matcher(_small(g, vocab, budget, p)) for p in (False, True))
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, cut=cut, plain=plain)
