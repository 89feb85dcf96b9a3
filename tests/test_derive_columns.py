"""The C byte classes of ``compile_finish`` (csrc/tables.c: column hashes, each rule's equal
columns checked in one pass over its rows, the bytes' columns checked rule by rule) under
weights that make column hashes collide often, against the full [states, 256] matrix built
here from the flat rules: bytes share a class exactly when their columns are equal, the table
by class is the matrix's columns, and a refusal (no classes) is a real hash collision."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.errors import GrammarError

from .strategies import grammars
from .test_compile_tables import _door


def _door_or_none(g: ir.Grammar, weights: np.ndarray) -> tuple | None:  # type: ignore[type-arg]
    try:
        return _door(g, weights)
    except TypeError:  # compile_finish returned None: the start rule derives nothing
        return None
    except (GrammarError, cfgmask.LimitError):
        return None


def _full(door: tuple) -> np.ndarray:  # type: ignore[type-arg]
    """The [states, 256] matrix of the flat rules (one class table and one dense table a rule)."""
    rule_state = np.frombuffer(door[1], dtype=np.uint32)
    rule_trans = np.frombuffer(door[2], dtype=np.uint32)
    byte_class = np.frombuffer(door[3], dtype=np.uint8).reshape(-1, 256)
    trans = np.frombuffer(door[4], dtype=np.int32)
    rows = []
    for r in range(len(rule_state) - 1):
        n = int(rule_state[r + 1] - rule_state[r])
        t = trans[rule_trans[r] : rule_trans[r + 1]].reshape(n, -1)
        rows.append(t[:, byte_class[r]])
    return np.concatenate(rows)


def check_classes(door: tuple, weights: np.ndarray, full: np.ndarray) -> bool:  # type: ignore[type-arg]
    """The door's byte classes against the full matrix; True where C made them."""
    k, byte_class, by_class = door[9][0], np.frombuffer(door[9][1], dtype=np.uint8), door[9][2]
    if k == 0:  # refused: two bytes with different columns hash alike
        with np.errstate(over="ignore"):
            keys = weights @ (full.astype(np.int64) + 2)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        assert not np.array_equal(full, full[:, first[inverse.reshape(-1)]])
        return False
    table = np.frombuffer(by_class, dtype=np.int32).reshape(full.shape[0], k)
    assert np.array_equal(table[:, byte_class], full)  # each byte's column is its class's
    distinct = {table[:, c].tobytes() for c in range(k)}
    assert len(distinct) == k  # and bytes of different classes differ
    return True


@settings(max_examples=40, deadline=None)
@given(grammars(), st.sampled_from([(1,), (1, 3), (0, 1), (5, 7, 11)]), st.integers(0, 2**32 - 1))
def test_byte_classes_against_the_full_matrix(g: ir.Grammar, values: tuple[int, ...], seed: int) -> None:
    probe = _door_or_none(g, np.ones(1 << 16, dtype=np.int64))
    if probe is None or len(probe) < 10:
        return
    full = _full(probe)
    n = full.shape[0]
    weights = np.random.default_rng(seed).choice(np.array(values, dtype=np.int64), size=n)
    door = _door_or_none(g, weights)
    assert door is not None
    check_classes(door, weights, full)


@settings(max_examples=40, deadline=None)
@given(grammars(), st.integers(0, 2**32 - 1))
def test_class_numbers_follow_the_column_hashes(g: ir.Grammar, seed: int) -> None:
    """Classes are numbered in the order of each column's hash sum_s w[s] * (target + 2), mod
    2^64 as int64 (next_bytes adds each row's w once and w * (target + 1) over its runs with an
    edge only): odd weights over the whole 64-bit range, so the sums wrap, against numpy's."""
    probe = _door_or_none(g, np.ones(1 << 16, dtype=np.int64))
    if probe is None or len(probe) < 10:
        return
    full = _full(probe)
    n = full.shape[0]
    weights = np.random.default_rng(seed).integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64) | 1
    door = _door_or_none(g, weights)
    assert door is not None
    if not check_classes(door, weights, full):
        return  # a real collision (checked there)
    with np.errstate(over="ignore"):
        keys = weights @ (full.astype(np.int64) + 2)
    byte_class = np.frombuffer(door[9][1], dtype=np.uint8)
    _, first = np.unique(keys, return_index=True)  # the keys ascending, each one's first byte
    assert np.array_equal(byte_class[first], np.arange(len(first)))
