"""The table by global byte class of ``compile_finish`` (csrc/tables.c ``cm_flat_derive_trans``) made
a rule's rows at a time by AVX2 gathers (TRANS_GATHER, ``_core.derive_trans_gather_enable(True)``,
the default where the CPU has AVX2) and by the run walk (off, the reference): every derived item the
same, the table equal to one read off the rules' own rows, on the shipped grammars, JSON Schemas,
rules of 2 to 65 classes (global class counts around the gathers' 8 lanes), random grammars, and
Llama-3 masks along corpus documents; the gathers taken (their row count moved) where the CPU has
AVX2.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import ir
from cfgmask.errors import GrammarError

from .helpers import core_switch
from .strategies import grammars
from .test_compile_tables import GRAMMARS, SCHEMAS, _ir
from .test_derive_row_bits import _by_class_from_rows, _derived, _pairs
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_row_gather import AVX2

_core: Any = importlib.import_module("cfgmask._core")


def same_either_way(g: ir.Grammar) -> int:
    """Assert the derived items of ``g`` equal with the gathers on and off (and the table equal to
    the rules' rows read by class either way); returns the rows gathered with them on."""
    n0 = _core.derive_trans_gather_rows()
    on, widths = _derived(g)
    _by_class_from_rows(g)
    taken = _core.derive_trans_gather_rows() - n0
    with core_switch(_core.derive_trans_gather_enable, False):
        n1 = _core.derive_trans_gather_rows()
        off, widths_off = _derived(g)
        _by_class_from_rows(g)
        assert _core.derive_trans_gather_rows() == n1  # off: never gathered
    assert widths == widths_off
    assert on[0] > 0  # byte classes made
    assert len(on) == len(off)
    for i, (a, b) in enumerate(zip(on, off, strict=True)):
        assert a == b, i
    if AVX2:
        assert taken > 0
    return taken


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.name)
def test_shipped_grammars(path: Any) -> None:
    same_either_way(_ir(path))


@pytest.mark.parametrize("schema", [s for _, s in SCHEMAS], ids=[i for i, _ in SCHEMAS])
def test_json_schemas(schema: Any) -> None:
    same_either_way(cfgmask.Grammar.from_json_schema(schema).ir)


@pytest.mark.parametrize("k", [2, 3, 6, 7, 8, 9, 15, 16, 17, 24, 63, 64])
def test_global_classes_around_the_lanes(k: int) -> None:
    """k + 1 global classes: a row of fewer than 8 (the masked last lanes alone), of 8 and 16 (none
    masked), one past (a single masked lane), and rules past 64 classes (the run walk's other
    path when off)."""
    for g in (_pairs(k), _pairs(k, last=0x7F)):
        same_either_way(g)


def test_many_edge_classes_and_token_edges() -> None:
    for text in (
        'root ::= "\\"" ([a-z] | [A-Z] "x" | [0-9] "y" | "_" "z")* "\\"" | [a-e] "q" [f-j]',
        'root ::= <[5]> x | !<[1]> root | "a"\nx ::= "b" x | <[3]> | ""',
        'root ::= a b c\na ::= "x"? a2\na2 ::= "(" a2 ")" | ""\nb ::= "y"* \nc ::= [^a]',
    ):
        same_either_way(cfgmask.Grammar.from_gbnf(text).ir)


@settings(max_examples=60, deadline=None)
@given(grammars())
def test_random_grammars(g: ir.Grammar) -> None:
    try:
        _derived(g)
    except (GrammarError, cfgmask.LimitError):
        return
    same_either_way(g)


def test_corpus_masks_llama3() -> None:
    """Llama-3 masks along corpus documents the same with the gathers on and off, and taken on."""
    pytest.importorskip("quicktok")
    if not AVX2:
        pytest.skip("no AVX2: the gathers are never taken")
    assert_corpus_masks_same_taken(_core.derive_trans_gather_enable, _core.derive_trans_gather_rows)
