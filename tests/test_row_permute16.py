"""A shaped row of 9 to 16 slots compared class by class with two permutes (csrc/chains.c,
``slots16_differ_avx2``).

A chain start checks its chain's rows against a memo's by each memo row's shape (see
tests/test_row_permute.py).  The permutes pick each class's slot target out of 8 first pairs'; a
string position's main state (an ASCII byte, an escape, the quote, the UTF-8 leads: ~10 distinct
targets) has more slots and had its ~30 other classes compared one by one.  With
``_core.chain_row_permute16_enable`` on (the default) such a row takes its target out of the first
8 first pairs' or the next 8 by the slot's fourth bit; off, those rows go to the plan's scalar loop
as before.  The references: the same memos taken, every entry equal on and off (and to every
chain analysed and plain walks), more rows permuted with it on where such shapes are met, and
Llama-3's masks along JSONSchemaBench documents equal on and off.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir

from .helpers import alt, chars, core_switch, grammar, lit, masks_along, seq
from .strategies import Vocab, vocabularies
from .test_chain_memo import VOCAB, _all_entries, _assert_references, _string, _taken, _two_values, repeated
from .test_engine_differential import _vocab
from .test_past_positions import _first_document
from .test_repeats import CHAIN_PIECES, UNITS
from .test_row_gather import AVX2


def _wide(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_row_permute16_enable, on)


def _entries_taken(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary, on: bool) -> tuple[list, int, int]:
    """Every state's entries of gs compiled one after the other (the later may take the earlier's
    memos) with the wide permutes on or off; the memos taken and the rows permuted."""
    with _wide(on):
        taken, permuted = _taken(), _core.chain_permuted_rows()
        out = [_all_entries(g, vocab) for g in gs]
        return out, _taken() - taken, _core.chain_permuted_rows() - permuted


def _assert_wide_changes_nothing(gs: list[ir.Grammar], vocab: cfgmask.Vocabulary) -> int:
    """On and off: the same memos taken, every entry equal to each other's, to every chain
    analysed and to plain walks, never fewer rows permuted on.  Returns the rows permuted on
    beyond off's (the rows of 9 to 16 slots)."""
    on, taken_on, permuted_on = _entries_taken(gs, vocab, True)
    off, taken_off, permuted_off = _entries_taken(gs, vocab, False)
    assert taken_on == taken_off
    assert permuted_on >= permuted_off
    if not AVX2:
        assert permuted_on == permuted_off == 0
    _assert_references(gs, vocab, on, off)
    return permuted_on - permuted_off


@pytest.mark.parametrize("unit", sorted(UNITS))
@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (3, 40)])
def test_wide_checks_equal_scalar(unit: str, lo: int, hi: int) -> None:
    """Two grammars, each with the same count twice (the second's chains take the first's memos,
    their states numbered otherwise): the same memos and entries with the wide permutes on and
    off."""
    vocab = _vocab(VOCAB)
    gs = [_two_values(UNITS[unit], lo, hi, ""), _two_values(UNITS[unit], lo, hi, "{{")]
    _assert_wide_changes_nothing(gs, vocab)


# characters of ten different lead bytes: a position's row has ~13 distinct targets (slots)
LEADS = "\u00e9\u0101\u0401\u05d0\u20ac\u3042\u4e00\U0001f600\u00f1\u0131"


def _leads(skip: str = "") -> ir.Expr:
    return alt(chars("ac"), lit("\\n"), *[chars(c) for c in LEADS if c != skip])


def _leads_vocab() -> cfgmask.Vocabulary:
    more = (c.encode() for c in LEADS + "\u0129" if c.encode() not in VOCAB.tokens)
    return _vocab(Vocab([*VOCAB.tokens, *more], (), ()))


@pytest.mark.parametrize(("lo", "hi"), [(0, 20), (3, 40)])
def test_wide_rows_permuted(lo: int, hi: int) -> None:
    """A string of ten lead bytes besides ASCII and an escape, its count twice in two grammars:
    its positions' rows have more than 8 slots, so with AVX2 the wide permutes take rows the
    scalar loop took; the same memos and entries on and off."""
    gs = [_two_values(_leads(), lo, hi, ""), _two_values(_leads(), lo, hi, "{{")]
    assert (_assert_wide_changes_nothing(gs, _leads_vocab()) > 0) == AVX2


@pytest.mark.parametrize("skip", ["", *LEADS[:-1]])
def test_each_lead_checked(skip: str) -> None:
    """The kept string of every lead, then one without the lead skip (its byte leads nowhere where
    the memo's leads on, in a slot past the first 8 or not): every entry the same with the wide
    permutes on and off, and the plain walks'."""
    gs = [_two_values(_leads(), 3, 40, ""), _two_values(_leads(skip), 3, 40, "{{")]
    _assert_wide_changes_nothing(gs, _leads_vocab())


def _shared_lead(prefix: str, second: str) -> ir.Grammar:
    """The leads' strings but \u0101 (lead C4) swapped for second, then \u0129 (C4 A9) after both:
    C3 and C4 stay classes of their own, and with second \u0129 both lead to the state reading A9
    (one slot of the memo's row, its other class C4), with \u0101 C4 leads elsewhere."""
    unit = alt(chars("ac"), lit("\\n"), *[chars(c) for c in LEADS if c != "\u0101"], chars(second))
    return grammar(root=seq(lit(prefix), _string(unit, 3, 40), lit(","), _string(unit, 3, 40), lit("\u0129")))


@pytest.mark.parametrize("second", ["\u0129", "\u0101"])
def test_other_class_in_a_late_slot_checked(second: str) -> None:
    """A memo whose row leads C3 and C4 into one slot (past the first 8), then our rows leading
    them to one state (the memo taken: 3) or C4 elsewhere (refused by the other class's lane: 2),
    on as off; every entry the plain walks'."""
    gs = [_shared_lead("", "\u0129"), _shared_lead("{{", second)]
    vocab = _leads_vocab()
    assert _assert_wide_changes_nothing(gs, vocab) > 0 or not AVX2
    with core_switch(_core.repeat_enable, False):  # memos taken, not positions proved alike (repeat.c)
        _, taken, _ = _entries_taken(gs, vocab, True)
    assert taken == (3 if second == "\u0129" else 2)


@given(repeated(), vocabularies(CHAIN_PIECES))
def test_wide_entries_equal_plain_walks(case: tuple[ir.Grammar, ir.Grammar], v: Vocab) -> None:
    """Hypothesis grammars sharing a count: the same memos taken, every entry equal, wide
    permutes on or off, to every chain analysed and to plain walks."""
    _assert_wide_changes_nothing(list(case), _vocab(v))


@pytest.mark.parametrize("sid", ["Github_medium/o9813", "Snowplow/sp_115_Normalized"])
def test_llama3_documents_masks(sid: str) -> None:
    """JSONSchemaBench documents whose strings' chain starts check a maxLength-255 string's rows
    (each position's main state ~10 slots): replayed cold, every mask the same with the wide
    permutes on and off, and more rows permuted with them on (with AVX2)."""
    schema, tokens = _first_document(sid)
    vocab = cfgmask.Vocabulary.llama3()
    masks, permuted = [], []
    for on in (True, False):
        cfgmask.clear_caches()
        before = _core.chain_permuted_rows()
        with _wide(on):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(schema), vocab)
            masks.append(masks_along(c, tokens, final=True))
        permuted.append(_core.chain_permuted_rows() - before)
    assert (permuted[0] > permuted[1]) == AVX2
    assert all(np.array_equal(a, b) for a, b in zip(masks[0], masks[1], strict=True))


# six leads of one continuation each (C3 80 .. C8 86): slots of their own before the leads below
FILL = "\u00c0\u0102\u0143\u0184\u01c5\u0206"
# DA and DB both reading {A9, B1} (one slot), DC reading {81, B1}; in MOVED, DB reads {81, B1} as DC
SWAPPED = "\u06a9\u06b1\u06e9\u06f1\u0701\u0731"
MOVED = "\u06a9\u06b1\u06c1\u06f1\u0701\u0731"


def _late_other(leads: str, prefix: str) -> ir.Grammar:
    """Two strings of the same count of ASCII, an escape, FILL and leads, then DB 81 (\u06c1: DB
    a class of its own apart from DA and DC in either grammar)."""
    unit = alt(chars("ac"), lit("\\n"), *[chars(c) for c in FILL + leads])
    return grammar(root=seq(lit(prefix), _string(unit, 3, 40), lit(","), _string(unit, 3, 40), lit("\u06c1")))


def test_only_an_other_class_in_a_late_slot_differs() -> None:
    """A memo whose positions' main row leads DA and DB to one state (a slot past the first 8:
    the dead bytes, ASCII, the escape and FILL's six come first), DC to another; then our rows
    leading DB with DC instead -- the same states, the same slots' first pairs, only DB's lane
    differs.  Refused on as off (ours analysed: 2 memos taken, not 3), every entry the plain
    walks' (a match would take DB to DA's state: DB A9 accepted, DB 81 not)."""
    gs = [_late_other(SWAPPED, ""), _late_other(MOVED, "{{")]
    more = (c.encode() for c in FILL + SWAPPED + MOVED if c.encode() not in VOCAB.tokens)
    vocab = _vocab(Vocab([*VOCAB.tokens, *more], (), ()))
    on, taken_on, permuted_on = _entries_taken(gs, vocab, True)
    off, taken_off, permuted_off = _entries_taken(gs, vocab, False)
    _assert_references(gs, vocab, on, off)
    assert taken_on == taken_off == 2
    assert (permuted_on > permuted_off) == AVX2
