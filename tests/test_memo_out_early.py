"""A whole chain's memo check refused at its first out state whose flags differ (csrc/chains.c,
``memo_match``).

A memo kept for a chain whose rows equal ours, renamed, but which leaves to a state of other flags
(the string is the grammar's last value where ours is followed by a comma: the kept chain's out
state accepts, ours reads on) is refused.  With the early refusal on (the default) the check stops
at the first row that names that out state; off (``_core.chain_memo_out_early_enable(False)``, the
reference) it reads every row first.  The references: the same memos taken either way, every entry
equal to the other mode's, to every chain analysed and to plain walks; and, on, the refused checks
name fewer states (``_core.chain_memo_named``) -- most of the chain fewer.  On Llama-3 a JSON
Schema string's first mask (Snowplow's sp_4: the pinned string blocks, kept for three followers)
checks fewer states and its masks equal plain walks'.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, grammar, lit, seq
from .test_chain_memo import VOCAB, _all_entries, _assert_references, _assert_same, _replay, _string, _taken
from .test_engine_differential import _vocab
from .test_repeats import UNITS

CORPORA = Path(__file__).parent / "corpora"


def _early(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_memo_out_early_enable, on)


def _after(kept: ir.Grammar, ours: ir.Grammar, on: bool) -> tuple[list, int, int]:
    """ours's entries on a fresh vocabulary whose memos hold kept's chains: the entries, the memos
    taken and the states the whole-chain checks named."""
    vocab = _vocab(VOCAB)
    with _early(on):
        _all_entries(kept, vocab)
        taken, named = _taken(), _core.chain_memo_named()
        out = _all_entries(ours, vocab)
        return out, _taken() - taken, _core.chain_memo_named() - named


# (the other units' chains may be analysed from a later position: no whole-chain check to read)
@pytest.mark.parametrize("unit", ["escaped", "letters"])
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (2, 40)])
def test_out_state_refused_before_the_rows(unit: str, lo: int, hi: int) -> None:
    """The kept string ends the grammar, ours is followed by a comma: the rows are equal, the out
    states' flags are not.  The same memos taken and entries with the refusal on and off (equal
    to every chain analysed and to plain walks); on, the checks name fewer states by at least the
    chain's length (off: every row; on: the first few)."""
    kept = grammar(root=seq(lit("{"), _string(UNITS[unit], lo, hi)))
    ours = grammar(root=seq(_string(UNITS[unit], lo, hi), lit(",")))
    on, taken_on, named_on = _after(kept, ours, True)
    off, taken_off, named_off = _after(kept, ours, False)
    assert taken_on == taken_off
    assert named_off >= hi and named_on * 4 <= named_off, (named_on, named_off)
    _assert_references([ours], _vocab(VOCAB), [on], [off])


@pytest.mark.parametrize("unit", ["escaped", "letters"])
def test_memo_still_taken_where_the_out_state_fits(unit: str) -> None:
    """Both strings followed by a comma (the out states' flags equal): the memo is taken with the
    refusal on as off, every state named either way, the entries the references'."""
    kept = grammar(root=seq(lit("{"), _string(UNITS[unit], 0, 30), lit(",")))
    ours = grammar(root=seq(_string(UNITS[unit], 0, 30), lit(",")))
    on, taken_on, named_on = _after(kept, ours, True)
    off, taken_off, named_off = _after(kept, ours, False)
    assert taken_on == taken_off > 0
    assert named_on == named_off > 30
    _assert_same(on, off)
    _assert_references([ours], _vocab(VOCAB), [on])


def test_llama3_snowplow_string_start_checks_fewer_rows() -> None:
    """Snowplow's sp_4 (nullable strings of maxLength 4096 among many properties) along its first
    instance, as MaskBench replays it: the first mask after a string's opening quote takes the
    pinned block's memo after refusing those kept for other followers; on, those checks name fewer
    states than off (by most of a block), the same memos are taken, and every mask equals the
    plain walks' and the refusal off's."""
    pytest.importorskip("quicktok")
    from benchmarks.bench_maskbench import job_of, load_corpus

    rec = next(
        r for r in load_corpus(CORPORA / "jsonschemabench", 1, sample=False) if r["split"] == "Snowplow"
    )
    assert rec["id"] == "Snowplow/sp_4_Normalized"
    job = job_of(rec)
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    masks, named, taken = {}, {}, {}
    for mode in ("plain", "off", "on"):
        with _early(mode != "off"):
            n0, t0 = _core.chain_memo_named(), _taken()
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(job["text"]), vocab, _strategy=strategy)
            masks[mode] = _replay(c, job["valid"][:1])
            named[mode], taken[mode] = _core.chain_memo_named() - n0, _taken() - t0
    assert taken["on"] == taken["off"] > 0
    assert named["on"] + 500 <= named["off"], named
    for mode in ("off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"
