"""A memo's rows checked against a chain's by each row's shape (csrc/chains.c, ``row_check``).

A chain's memo keeps, with its rows, each row's shape: which of its classes lead to one state.
A check of a chain's rows against the memo's (``memo_match``, ``prefix_match``, ``suffix_match``)
then names one pair of each of a row's distinct targets and compares the rest of our row with
that pair's target, instead of naming every class pair.  The references: with the shapes off
(``_core.chain_shapes_enable(False)``: every pair named, as before) the memos are taken exactly
as often, and every entry and mask equals the shapes on, every chain analysed and plain walks.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

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


def _shapes(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_shapes_enable, on)


def _entries_taken(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary, on: bool) -> tuple[list, int, int]:
    """Every state's entries of gs compiled one after the other (the later may take the earlier's
    memos), with the shapes on or off; the memos taken and the rows checked by shape."""
    with _shapes(on):
        taken, shaped = _taken(), _core.chain_shaped_rows()
        out = [_all_entries(g, vocab) for g in gs]
        return out, _taken() - taken, _core.chain_shaped_rows() - shaped


def _assert_shapes_change_nothing(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary) -> int:
    """Shapes on and off: the same memos taken, every entry equal to each other's, to every chain
    analysed and to plain walks.  Returns the rows checked by shape."""
    on, taken_on, shaped = _entries_taken(gs, vocab, True)
    off, taken_off, shaped_off = _entries_taken(gs, vocab, False)
    assert taken_on == taken_off
    assert shaped_off == 0
    with _memos(False):
        ref = [_all_entries(g, vocab) for g in gs]
    for g, x, y, z in zip(gs, on, off, ref, strict=True):
        _assert_same(x, y)
        _assert_same(x, z)
        _assert_same(x, _all_entries(g, vocab, count_chains=False))
    return shaped


@pytest.mark.parametrize("unit", sorted(UNITS))
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (1, 20), (3, 40), (0, 64)])
def test_shaped_checks_equal_pair_by_pair(unit: str, lo: int, hi: int) -> None:
    """Two grammars, each with the same count twice (the second's chains take the first's memos,
    their states numbered otherwise): the same memos taken and the same entries with the shapes
    on and off, and the rows were checked by shape."""
    vocab = _vocab(VOCAB)
    gs = [_two_values(UNITS[unit], lo, hi, ""), _two_values(UNITS[unit], lo, hi, "{{")]
    shaped = _assert_shapes_change_nothing(gs, vocab)
    if unit in ("letters", "escaped"):  # (memos taken: see test_chain_memo)
        assert shaped > 0


@pytest.mark.parametrize(
    ("kept", "other"),
    [
        (alt(lit("a"), lit("c")), chars("ac")),  # ours one class where the memo's row has two slots
        (chars("ac"), alt(lit("a"), lit("c"))),  # the memo's one class where ours has two: b dead
    ],
)
def test_shaped_check_fails_one_class_apart(kept: ir.Expr, other: ir.Expr) -> None:
    """The same count of a|c and of [a-c]: the rows differ in one byte, which a shape's check finds
    (in the second, only by comparing our row's two classes of one slot): not taken, on or off."""
    vocab = _vocab(Vocab([b"a", b"b", b"c", b"ab", b"bc", b'"', b'b"'], (), ()))
    gs = [grammar(root=_string(kept, 0, 25)), grammar(root=seq(lit("{"), _string(other, 0, 25)))]
    on, taken_on, _ = _entries_taken(gs, vocab, True)
    _, taken_off, _ = _entries_taken(gs, vocab, False)
    assert taken_on == taken_off
    _assert_same(on[1], _all_entries(gs[1], vocab, count_chains=False))


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_shaped_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars sharing a count: the same memos taken, every entry equal, shapes on or
    off, to every chain analysed and to plain walks."""
    _assert_shapes_change_nothing(list(case), _vocab(v))


@pytest.mark.parametrize(
    "string",
    [
        {"type": "string", "maxLength": 200},  # the pinned 255's first rows (a prefix memo)
        {"type": "string", "maxLength": 100},  # the pinned 140's later positions (suffix_match)
        {"type": "string", "minLength": 1, "maxLength": 255},  # the pinned chain itself
    ],
)
def test_llama3_masks_equal_with_shapes_off(string: dict) -> None:
    """Strings whose first positions are checked against the vocabulary's pinned chains: the
    rows are checked by shape, and every mask along values of many lengths (escapes, multi-byte
    characters, past the bound) equals the shapes off, every chain analysed and plain walks."""
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
        with _memos(mode != "analysed"), _shapes(mode != "off"):
            shaped = _core.chain_shaped_rows()
            strategy = Strategy(count_chains=mode != "plain")
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab, _strategy=strategy)
            masks[mode] = _replay(c, docs)
            assert (_core.chain_shaped_rows() > shaped) == (mode == "on")
    for mode in ("analysed", "off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"
