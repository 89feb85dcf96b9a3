"""The table by global byte class of ``compile_finish`` (csrc/tables.c ``cm_flat_derive_trans``) made
a rule's rows at a time by AVX2 gathers (TRANS_GATHER, ``_core.derive_trans_gather_enable(True)``,
turned on for this module: off by default, as a microcoded gather costs more time than it saves
instructions) and by the run walk (off, the reference): every derived item the
same, the table equal to one read off the rules' own rows, on the shipped grammars, JSON Schemas,
rules of 2 to 65 classes (global class counts around the gathers' 8 lanes), random grammars, and
Llama-3 masks along corpus documents; the gathers taken (their row count moved) where the CPU has
AVX2.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import ir
from cfgmask.compile import flat as flat_mod
from cfgmask.errors import GrammarError

from .helpers import core_switch
from .strategies import grammars
from .test_compile_tables import GRAMMARS, SCHEMAS, _door, _ir
from .test_derive_row_bits import _by_class_from_rows, _derived, _pairs
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_row_gather import AVX2

_core: Any = importlib.import_module("cfgmask._core")


@pytest.fixture(autouse=True, scope="module")
def _gathers_on() -> Iterator[None]:
    """The gathers on for this module's tests (each test's own switch restores them on), off after."""
    with core_switch(_core.derive_trans_gather_enable, True, default=False):
        yield


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
    assert (widths, on[0] > 0) == (widths_off, True)  # byte classes made
    assert tuple(on) == tuple(off)
    if AVX2:
        assert taken > 0
    return taken


SHIPPED = [(p.name, p, None) for p in GRAMMARS] + [(i, None, s) for i, s in SCHEMAS]


@pytest.mark.parametrize(("path", "schema"), [c[1:] for c in SHIPPED], ids=[c[0] for c in SHIPPED])
def test_shipped_grammars_and_schemas(path: Any, schema: Any) -> None:
    same_either_way(_ir(path) if path is not None else cfgmask.Grammar.from_json_schema(schema).ir)


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


def _doors_alike(g: ir.Grammar, weights: np.ndarray) -> int:
    """compile_finish's derived item for ``g`` with these weights the same with CLASS_SPANS (the
    collision check's joins by runs of bytes) and the gathers on and off; returns its n_classes."""
    want = _door(g, weights)[9]
    for enable in (_core.derive_class_spans_enable, _core.derive_trans_gather_enable):
        with core_switch(enable, False):
            got = _door(g, weights)[9]
        assert tuple(got) == tuple(want)
    return int(want[0])


def test_collisions_found_alike() -> None:
    """Weights with some states' zeroed: columns that differ only in those rows hash alike, a
    collision that the check of the columns must find (n_classes 0) with the classes joined by
    runs of bytes as a byte at a time; where none, the same classes and table."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^[a-f0-9]{2,}$"}, "n": {"type": "integer"}},
    }
    gs = [
        cfgmask.Grammar.from_gbnf('root ::= "a" [b-d]+ "e" | [0-9]+ "." [0-4x]').ir,
        cfgmask.Grammar.from_json_schema(schema).ir,
    ]
    # x's [n-z] told apart from the bytes it has no edge on in its first row alone, y's [n-p] and
    # "1" keyed apart everywhere: with that row's weight 0, [q-z] hashes as byte 0 though x's
    # classes of the two differ, a pair joined only where the key's first byte changes (at q),
    # inside x's class of [n-z]
    nested = cfgmask.Grammar.from_gbnf(
        'root ::= x y\nx ::= "1" | [n-z] "(" x ")"\ny ::= [n-p] "[" y "]" | "1"'
    )
    rng = np.random.default_rng(51)
    found = [0, 0]
    n = len(_door(nested.ir, flat_mod.class_weights(0))[5])
    for s in range(n):  # each state's weight 0 in turn
        w = flat_mod.class_weights(n)[:n].copy()
        w[s] = 0
        found[_doors_alike(nested.ir, w) > 0] += 1
    assert found[0] > 0
    for g in gs:
        n = len(_door(g, flat_mod.class_weights(0))[5])  # accepting: one byte a state
        for p in (0.02, 0.1, 0.3, 0.7):
            for _ in range(3):
                w = flat_mod.class_weights(n)[:n].copy()
                w[rng.random(n) < p] = 0
                found[_doors_alike(g, w) > 0] += 1
    assert found[0] > 0 and found[1] > 0  # collisions found, and classes made
