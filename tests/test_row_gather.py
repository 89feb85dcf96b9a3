"""A shaped row's other classes compared 8 at a time (csrc/chains.c, ``row_check``'s AVX2 gathers).

A chain's rows are checked against a memo's by each memo row's shape: one class pair of each
distinct target is named, and every other class of our row must lead where its slot's first pair
leads.  Where the CPU has AVX2 those other classes are compared with gathers, 8 lanes at a time
(padded with class 0), instead of one by one.  The references: with the gathers off
(``_core.chain_row_gather_enable(False)``: the plan's scalar loop) the memos are taken exactly as
often, and every entry and mask equals the gathers on, every chain analysed and plain walks; rows
whose one differing class sits past the first 8 lanes are refused either way.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import alt, chars, core_switch, grammar, lit, seq
from .strategies import Vocab, vocabularies
from .test_chain_memo import (
    VOCAB,
    _all_entries,
    _assert_same,
    _memos,
    _replay,
    _string,
    _taken,
    _two_values,
    repeated,
)
from .test_engine_differential import _vocab
from .test_repeats import CHAIN_PIECES, UNITS


def _has_avx2() -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and " avx2" in line for line in text.splitlines())


AVX2 = _has_avx2()


def _gather(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_row_gather_enable, on, default=False)


def _entries_taken(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary, on: bool) -> tuple[list, int, int]:
    """Every state's entries of gs compiled one after the other (the later may take the earlier's
    memos), with the gathers on or off; the memos taken and the rows gathered."""
    with _gather(on):
        taken, gathered = _taken(), _core.chain_gathered_rows()
        out = [_all_entries(g, vocab) for g in gs]
        return out, _taken() - taken, _core.chain_gathered_rows() - gathered


def _assert_gathers_change_nothing(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary) -> tuple[int, int]:
    """Gathers on and off: the same memos taken, every entry equal to each other's, to every chain
    analysed and to plain walks.  Returns the memos taken and the rows gathered."""
    on, taken_on, gathered = _entries_taken(gs, vocab, True)
    off, taken_off, gathered_off = _entries_taken(gs, vocab, False)
    assert taken_on == taken_off
    assert gathered_off == 0
    if not AVX2:
        assert gathered == 0
    with _memos(False):
        ref = [_all_entries(g, vocab) for g in gs]
    for g, x, y, z in zip(gs, on, off, ref, strict=True):
        _assert_same(x, y)
        _assert_same(x, z)
        _assert_same(x, _all_entries(g, vocab, count_chains=False))
    return taken_on, gathered


@pytest.mark.parametrize("unit", sorted(UNITS))
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (3, 40)])
def test_gathered_checks_equal_one_by_one(unit: str, lo: int, hi: int) -> None:
    """Two grammars, each with the same count twice (the second's chains take the first's memos,
    their states numbered otherwise): the same memos and entries with the gathers on and off, and
    (with AVX2) the rows were gathered."""
    vocab = _vocab(VOCAB)
    gs = [_two_values(UNITS[unit], lo, hi, ""), _two_values(UNITS[unit], lo, hi, "{{")]
    _, gathered = _assert_gathers_change_nothing(gs, vocab)
    if unit in ("letters", "escaped"):  # (memos taken: see test_chain_memo)
        assert (gathered > 0) == AVX2


# nineteen letters, each its own class (each doubled leads elsewhere), so a string position's
# "next" slot holds 18 other classes: three blocks of 8 lanes
LETTERS = "abcdefghijklmnopqrs"
WIDE_VOCAB = Vocab(
    [*(c.encode() for c in LETTERS), b"ab", b"rs", b"sa", b"ss", b'"', b's"', b'a"', b"{", b'{"'], (), ()
)


def _wide(skip: str, prefix: str) -> ir.Grammar:
    """A string of 0..25 of the letters but skip, after every letter doubled (which splits the
    letters' classes) and prefix."""
    doubled = alt(*(lit(c + c) for c in LETTERS))
    return grammar(root=seq(lit(prefix), doubled, _string(chars(*(c for c in LETTERS if c != skip)), 0, 25)))


@pytest.mark.parametrize(("skip", "taken"), [("", True), ("b", False), ("d", False), ("r", False)])
def test_wide_slot_checked_past_the_first_lanes(skip: str, taken: bool) -> None:
    """A kept string of a..s, then one of a..s but skip: with none skipped the rows are the kept
    ones renamed and the memo is taken; with a letter skipped our row leads it nowhere where the
    memo's leads on (the hint, the steps along s, is the same): the check refuses it on the first
    row, gathers on as off, and the entries are plain walks'.  b's and d's classes sit past the
    first 8 lanes (a check of those alone took their memos)."""
    gs, vocab = _wide_pair(skip, lambda: _gather(True), _core.chain_gathered_rows, taken)
    _assert_gathers_change_nothing(gs, vocab)


def _wide_pair(
    skip: str, switch: Callable[[], AbstractContextManager[None]], counter: Callable[[], int], taken: bool
) -> tuple[list[ir.Grammar], cfgmask.Vocabulary]:
    """The kept string of a..s and the one without skip (switch on): the second takes the first's
    memo exactly when `taken`, and counter rises there (with AVX2).  Returns both and the vocabulary."""
    vocab = _vocab(WIDE_VOCAB)
    gs = [_wide("", ""), _wide(skip, "{")]
    with _memos(True), switch():
        before = _taken()
        _all_entries(gs[1], vocab)
        alone = _taken() - before  # (its own chains' memos)
    with _memos(True), switch():
        _all_entries(gs[0], vocab)
        before, rows = _taken(), counter()
        _all_entries(gs[1], vocab)
        assert (_taken() - before > alone) == taken
        assert (counter() > rows) == AVX2
    return gs, vocab


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_gathered_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars sharing a count: the same memos taken, every entry equal, gathers on or
    off, to every chain analysed and to plain walks."""
    _assert_gathers_change_nothing(list(case), _vocab(v))


@pytest.mark.parametrize(
    "string",
    [
        {"type": "string", "maxLength": 200},  # the pinned 255's first rows (a prefix memo)
        {"type": "string", "maxLength": 100},  # the pinned 140's later positions (suffix_match)
        {"type": "string", "minLength": 1, "maxLength": 255},  # the pinned chain itself
    ],
)
def test_llama3_masks_equal_with_gathers_off(string: dict) -> None:
    """Strings whose first positions are checked against the vocabulary's pinned chains (Llama-3's
    rows: ~40 other classes a row, several blocks of lanes): the rows are gathered, and every mask
    along values of many lengths equals the gathers off, every chain analysed and plain walks."""
    vocab = cfgmask.Vocabulary.llama3()
    vocab._handle()
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    hi = string["maxLength"]
    schema = {"type": "object", "properties": {"n": string, "k": {"type": "integer"}}, "required": ["n"]}
    texts = ["x", "Example Data Table is a long text \u00e9 here \u20ac", 'ab\\u00e9\\"c\\n' * 12]
    texts += ["word " * (k // 5) + "y" * (k % 5) for k in (hi - 1, hi, hi + 3)]
    docs = [enc.encode_ordinary(f'{{"n":"{t}","k":1}}') for t in texts]
    masks: dict[str, list[np.ndarray]] = {}
    for mode in ("plain", "analysed", "off", "on"):
        with _memos(mode != "analysed"), _gather(mode != "off"):
            gathered = _core.chain_gathered_rows()
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab, _strategy=strategy)
            masks[mode] = _replay(c, docs)
            assert (_core.chain_gathered_rows() > gathered) == (mode == "on" and AVX2)
    for mode in ("analysed", "off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"
