"""A chain position's acc points filtered in one call (csrc/chains.c, ``kept_batch``).

An entry of a counted chain holds, for each acc point alive at its position (a trie subtree whose
tokens may end the count), the point's tokens that the uncertain-token filter keeps, cached per
rule and point.  A chain's first position meets ~100 points not cached yet; they are filtered in
one call, and each point takes the kept tokens of its own range.  The references: with the batch
off (``_core.chain_kept_batch_enable(False)``: a filter call a point, as before) every entry and
mask is the same, and equal to every chain analysed and to plain walks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch
from .strategies import Vocab, vocabularies
from .test_chain_memo import VOCAB, _all_entries, _assert_same, _memos, _replay, _two_values, repeated
from .test_engine_differential import _vocab
from .test_repeats import CHAIN_PIECES, UNITS


def _batch(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_kept_batch_enable, on)


def assert_switch_changes_nothing(
    enable: Callable[[bool], object],
    counter: Callable[[], int],
    gs: list[ir.Grammar],
    vocab: cfgmask.Vocabulary,
) -> int:
    """A chain strategy's switch (``enable``) on and off: every entry equal to each other's, to
    every chain analysed and to plain walks.  Returns how far ``counter`` moved with it on (it
    must not move with it off)."""
    out = {}
    for on in (True, False):
        with core_switch(enable, on):
            before = counter()
            out[on] = [_all_entries(g, vocab) for g in gs]
            moved = counter() - before
            if on:
                n_moved = moved
            else:
                assert moved == 0
    with _memos(False):
        ref = [_all_entries(g, vocab) for g in gs]
    for g, x, y, z in zip(gs, out[True], out[False], ref, strict=True):
        _assert_same(x, y)
        _assert_same(x, z)
        _assert_same(x, _all_entries(g, vocab, count_chains=False))
    return n_moved


def _assert_batch_changes_nothing(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary) -> int:
    """Batch on and off: every entry equal to each other's, to every chain analysed and to plain
    walks.  Returns the acc points filtered in batches."""
    return assert_switch_changes_nothing(_core.chain_kept_batch_enable, _core.chain_kept_batched, gs, vocab)


@pytest.mark.parametrize("unit", sorted(UNITS))
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (3, 40)])
def test_batched_entries_equal_one_call_a_point(unit: str, lo: int, hi: int) -> None:
    """Grammars with a count twice: every entry the same with the batch on and off, and equal to
    every chain analysed and to plain walks."""
    vocab = _vocab(VOCAB)
    gs = [_two_values(UNITS[unit], lo, hi, ""), _two_values(UNITS[unit], lo, hi, "{{")]
    _assert_batch_changes_nothing(gs, vocab)


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_batched_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars with counts: every entry equal, batch on or off, to every chain analysed
    and to plain walks."""
    _assert_batch_changes_nothing(list(case), _vocab(v))


@pytest.mark.parametrize(
    "string",
    [
        {"type": "string", "maxLength": 200},
        {"type": "string", "maxLength": 100},
        {"type": "string", "minLength": 1, "maxLength": 255},
        {"type": "string", "minLength": 3, "maxLength": 40},
    ],
)
def test_llama3_masks_equal_with_batch_off(string: dict) -> None:
    """Llama-3 strings (each first position meets ~100 acc points: tokens that close the string
    and go on, `",`, `"}`, `"]}` ...): points are filtered in batches, and every mask along values
    of many lengths (closed early, at the bound, past it) equals the batch off, every chain
    analysed and plain walks."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    hi = string["maxLength"]
    schema = {
        "type": "object",
        "properties": {"n": string, "k": {"type": "integer"}, "m": {"type": "array", "items": string}},
        "required": ["n"],
    }
    texts = ["x", "Example Data Table is a long text \u00e9 here \u20ac", 'ab\\u00e9\\"c\\n' * 3]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (hi - 1, hi, hi + 3)]
    docs = [enc.encode_ordinary(f'{{"n":"{t}","k":1,"m":["{t[:5]}","{t}"]}}') for t in texts]
    masks: dict[str, list[np.ndarray]] = {}
    for mode in ("plain", "analysed", "off", "on"):
        with _memos(mode != "analysed"), _batch(mode != "off"):
            batched = _core.chain_kept_batched()
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab, _strategy=strategy)
            masks[mode] = _replay(c, docs)
            assert (_core.chain_kept_batched() > batched) == (mode in ("on", "analysed"))
    for mode in ("analysed", "off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"
