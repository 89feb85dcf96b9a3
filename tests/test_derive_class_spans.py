"""The derived tables of ``compile_finish`` (csrc/tables.c ``cm_flat_derive_facts`` and
``cm_flat_derive_trans``) with a rule's contiguous byte classes read as spans (CLASS_SPANS,
``_core.derive_class_spans_enable(True)``, the default: the prefix unions of its classes' bytes and
the column hash sums a span at a time) and a byte at a time (off, the reference): every derived
item the same (byte classes, the table by class, nullable rules, FOLLOW bytes, edges, token sets
and the grammar's facts of the rows), with ROW_BITS on and off, on the shipped grammars, JSON
Schemas of the corpus, rules of 2 to 256 classes (a class starting at each 64-byte word's first
byte, the last class a single byte) and random grammars; and equal to the Python passes either
way.  (Every rule a compile makes has contiguous classes, cm_compile_finish writes them from its
DFA's class_lo: the byte loops stay for other flat rules and as the reference.)
"""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import ir
from cfgmask.errors import GrammarError

from .helpers import core_switch
from .strategies import grammars
from .test_compile_tables import GRAMMARS, SCHEMAS, _ir, assert_same, both
from .test_derive_row_bits import _by_class_from_rows, _derived

_core: Any = importlib.import_module("cfgmask._core")


def same_either_way(g: ir.Grammar) -> tuple[int, ...]:
    """Assert the derived item equal with CLASS_SPANS on and off (ROW_BITS on, then off), the
    tables equal to the Python passes' and the table by class to the rows' either way; returns
    the rules' class counts."""
    widths: tuple[int, ...] = ()
    for row_bits in (True, False):
        with core_switch(_core.derive_row_bits_enable, row_bits):
            on, widths = _derived(g)
            fast, slow, _ = both(g)
            assert_same(fast, slow)
            _by_class_from_rows(g)
            with core_switch(_core.derive_class_spans_enable, False):
                off, widths_off = _derived(g)
                fast_off, slow_off, _ = both(g)
                assert_same(fast_off, slow_off)
                _by_class_from_rows(g)
            assert (widths, on[0] > 0) == (widths_off, True)  # byte classes made
            assert on == off
    return widths


def _input(x: Any) -> ir.Grammar:
    """A shipped grammar (its path) or a corpus schema, as IR."""
    return _ir(x) if isinstance(x, Path) else cfgmask.Grammar.from_json_schema(x).ir


INPUTS = [(p.name, p) for p in GRAMMARS] + list(SCHEMAS)


@pytest.mark.parametrize("x", [x for _, x in INPUTS], ids=[i for i, _ in INPUTS])
def test_shipped_grammars_and_corpus_schemas(x: Any) -> None:
    same_either_way(_input(x))


def _bytes_rule(picked: list[int]) -> ir.Grammar:
    """root ::= b b | ... for each picked byte b: each picked byte a class of its own, the spans
    between them classes too."""
    body = ir.Alt(tuple(ir.Seq((ir.Literal(bytes([b])),) * 2) for b in picked))
    return ir.Grammar(rules={"root": body}, start="root")


@pytest.mark.parametrize(
    "picked",
    [
        [0],  # byte 0 a class of its own (class 0), the rest one class
        [255],  # the last class a single byte
        [0, 255],
        [63, 64, 127, 128, 191, 192],  # classes starting at each word's first byte and ending at its last
        [1, 65, 129, 193],
        list(range(0, 256, 2)),  # 256 classes: every byte its own
        list(range(256)),
        list(range(60, 70)),
    ],
    ids=lambda p: f"{len(p)}@{p[0]}",
)
def test_class_starts_at_word_edges(picked: list[int]) -> None:
    """Rules whose classes start at bytes 0, 63, 64, 127, 128, ... and at every byte: each span's
    mask and sum at a 64-bit word's edges, and a rule of 256 classes."""
    widths = same_either_way(_bytes_rule(picked))
    assert max(widths) >= len(picked)


SMALL = [
    'root ::= <[5]> x | !<[1]> root | "a"\nx ::= "b" x | <[3]> | ""',  # token edges, nullable
    'root ::= a b c\na ::= "x"? a2\na2 ::= "(" a2 ")" | ""\nb ::= "y"* \nc ::= [^a]',
    'root ::= "\\"" ([a-z] | [A-Z] "x" | [0-9] "y" | "_" "z")* "\\"" | [a-e] "q" [f-j]',  # a string's runs
]


@pytest.mark.parametrize("text", SMALL, ids=range(len(SMALL)))
def test_small_grammars(text: str) -> None:
    same_either_way(cfgmask.Grammar.from_gbnf(text).ir)


@settings(max_examples=60, deadline=None)
@given(grammars())
def test_random_grammars(g: ir.Grammar) -> None:
    with contextlib.suppress(GrammarError, cfgmask.LimitError):  # (refused: nothing to compare)
        same_either_way(g)
