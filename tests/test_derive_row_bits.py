"""The derived tables of ``compile_finish`` (csrc/tables.c ``cm_flat_derive_facts`` and
``cm_flat_derive_trans``) with each keyed row of up to 64 classes walked as bit masks of its edges
and run starts (ROW_BITS, ``_core.derive_row_bits_enable(True)``, the default) and run by run (off,
the reference): every item the same (byte classes, the table by class that the runs' ends make,
nullable rules, FOLLOW bytes, edges, token sets and the grammar's facts of the rows) on the
shipped grammars, JSON Schemas of the corpus, rules of 63 to 65 classes (a row's last class at
bit 63, and past the masks), rows of many edge classes in one stretch (a string's characters),
token edges, and random grammars; and equal to the Python passes (``follow.py``, ``tables.py``)
either way.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import deadline, ir
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.components import build_rules
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.prepare import prepare, validate
from cfgmask.errors import GrammarError

from .helpers import core_switch
from .strategies import grammars
from .test_compile_tables import GRAMMARS, SCHEMAS, _ir, assert_same, both

_core: Any = importlib.import_module("cfgmask._core")


def _finished(g: ir.Grammar) -> Any:
    """compile_finish's items for ``g`` (as ``compile`` calls it): the flat rules, the derived
    item at 9."""
    limits = CompileLimits()
    clear_caches()
    with deadline.Deadline(limits.deadline_ms, "compile"):
        sess = prepare(g, limits)
        validate(g, sess)
        return build_rules(g, limits, sess).__dict__["_got"][0]


def _derived(g: ir.Grammar) -> tuple[Any, tuple[int, ...]]:
    """compile_finish's derived item for ``g`` and the number of classes of each rule."""
    got = _finished(g)
    rs = np.frombuffer(got[1], dtype=np.uint32).astype(np.int64)
    rt = np.frombuffer(got[2], dtype=np.uint32).astype(np.int64)
    n = np.diff(rs)
    widths = tuple(int(w) for w in np.diff(rt)[n > 0] // n[n > 0])
    return tuple(got[9]), widths


def _by_class_from_rows(g: ir.Grammar) -> None:
    """The table by global class that ``cm_flat_derive_trans`` wrote (from the ROW_BITS rows'
    run-start and edge bits where the switch is on) equal to one read off the rules' own rows:
    state s's entry of global class c is its row's entry of its rule's class of c's first byte."""
    got = _finished(g)
    k, classes, trans = got[9][0], np.frombuffer(got[9][1], dtype=np.uint8), got[9][2]
    assert k > 0
    rs = np.frombuffer(got[1], dtype=np.uint32).astype(np.int64)
    rt = np.frombuffer(got[2], dtype=np.uint32).astype(np.int64)
    cls = np.frombuffer(got[3], dtype=np.uint8).reshape(-1, 256)
    rows = np.frombuffer(got[4], dtype=np.int32)
    first = np.array([int(np.flatnonzero(classes == c)[0]) for c in range(k)])
    want = np.empty((int(rs[-1]), k), dtype=np.int32)
    for r in range(len(rs) - 1):
        n = int(rs[r + 1] - rs[r])
        if n:
            t = rows[rt[r] : rt[r + 1]].reshape(n, -1)
            want[rs[r] : rs[r + 1]] = t[:, cls[r][first]]
    assert np.array_equal(np.frombuffer(trans, dtype=np.int32).reshape(-1, k), want)


@pytest.mark.parametrize("k", [15, 62, 63, 64])
def test_table_by_class_from_the_rows(k: int) -> None:
    """Runs with an edge that end at the row's last class (bit 63 of the masks at k = 63, and at
    65 classes the run-by-run walk), a string's many edge runs, with ROW_BITS on and off."""
    text = 'root ::= "\\"" ([a-z] | [A-Z] "x" | [0-9] "y" | "_" "z")* "\\"" | [a-e] "q" [f-j]'
    for g in (_pairs(k), _pairs(k, last=0x7F), cfgmask.Grammar.from_gbnf(text).ir):
        _by_class_from_rows(g)
        with core_switch(_core.derive_row_bits_enable, False):
            _by_class_from_rows(g)


def same_either_way(g: ir.Grammar) -> tuple[int, ...]:
    """Assert the derived item equal with ROW_BITS on and off, and the tables equal to the Python
    passes' either way; returns the rules' class counts."""
    on, widths = _derived(g)
    fast, slow, _ = both(g)
    assert_same(fast, slow)
    with core_switch(_core.derive_row_bits_enable, False):
        off, widths_off = _derived(g)
        fast_off, slow_off, _ = both(g)
        assert_same(fast_off, slow_off)
    assert widths == widths_off
    assert on[0] > 0  # byte classes made: every row was keyed
    assert len(on) == len(off)
    for i, (a, b) in enumerate(zip(on, off, strict=True)):
        assert a == b, i
    return widths


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.name)
def test_shipped_grammars(path: Any) -> None:
    same_either_way(_ir(path))


@pytest.mark.parametrize("schema", [s for _, s in SCHEMAS], ids=[i for i, _ in SCHEMAS])
def test_json_schemas(schema: Any) -> None:
    same_either_way(cfgmask.Grammar.from_json_schema(schema).ir)


def _pairs(k: int, last: int = 0xFF) -> ir.Grammar:
    """root ::= b0 b0 | b1 b1 | ...: k bytes, each to a state of its own, so the rule's classes
    are the k bytes and the span between them (k + 1): bytes 0 .. k - 2 and ``last`` (its class
    the rule's last)."""
    picked = list(range(k - 1)) + [last]
    body = ir.Alt(tuple(ir.Seq((ir.Literal(bytes([b])), ir.Literal(bytes([b])))) for b in picked))
    return ir.Grammar(rules={"root": body}, start="root")


@pytest.mark.parametrize("k", [2, 3, 4, 5, 15, 16, 17, 62, 63, 64])
def test_rules_up_to_and_past_64_classes(k: int) -> None:
    """A rule of k + 1 classes: rows of 3 to 65 classes, the scalar tail, the four-entry steps,
    the sixteen-entry ones, and a row whose last edge class is bit 63 (a span carried past the
    mask's top) or past the masks (65 classes: the run-by-run walk)."""
    widths = same_either_way(_pairs(k))
    assert k + 1 in widths


def test_many_edge_classes_in_one_stretch() -> None:
    """Rows of more than four edge classes after edge classes (a string's characters, one target
    or several) take cm_run_starts' pass; fewer, a compare a class."""
    text = 'root ::= "\\"" ([a-z] | [A-Z] "x" | [0-9] "y" | "_" "z")* "\\"" | [a-e] "q" [f-j]'
    widths = same_either_way(cfgmask.Grammar.from_gbnf(text).ir)
    assert max(widths) > 5


@pytest.mark.parametrize(
    "text",
    [
        'root ::= <[5]> x | !<[1]> root | "a"\nx ::= "b" x | <[3]> | ""',  # token edges, nullable
        'root ::= a b c\na ::= "x"? a2\na2 ::= "(" a2 ")" | ""\nb ::= "y"* \nc ::= [^a]',
    ],
)
def test_token_terminals_and_nullable_rules(text: str) -> None:
    same_either_way(cfgmask.Grammar.from_gbnf(text).ir)


@settings(max_examples=60, deadline=None)
@given(grammars())
def test_random_grammars(g: ir.Grammar) -> None:
    try:
        same_either_way(g)
    except (GrammarError, cfgmask.LimitError):
        return
