"""csrc/tables.c's walk of the flat rules' rows (session 32): a row of up to 64 classes has
its runs' starts found in one pass (``cm_run_starts``, its last 1-3 entries an overlapping
compare), a wider one is walked with ``cm_run_end``; the same walk records each narrow row's
classes with an edge, and ``columns_differ`` reads a row only where the pairs of classes it
checks (joined through a union-find) have an edge.  Against independent references: the
Python passes (``follow.py``, ``tables.byte_classes``: every array of Tables), and the full
[states, 256] matrix built here from the door's flat rules, under weights that make column
hashes collide (all ones, small values) so that the pair check decides: bytes share a class
exactly when their columns are equal, and a refusal is a real collision.  Grammars are made
so that their rules have class counts around each boundary of the walk (1-5, 15-17, 63-65,
more than 64) and columns that differ only by an edge against no edge."""

from __future__ import annotations

import string

import numpy as np
import pytest

import cfgmask
from cfgmask import ir
from cfgmask.compile import flat as flat_mod

from .test_compile_tables import _door, assert_same, both
from .test_derive_columns import _full, check_classes

LETTERS = string.ascii_letters + string.digits + "!#$%&()*+,-./:;<=>?@[]^_{|}~"


def _alternatives(n: int) -> str:
    """n first bytes, each with its own continuation: about 2n + 1 classes in one rule."""
    return "root ::= " + " | ".join(f'"{LETTERS[i]}{LETTERS[-1 - i]}"' for i in range(n))


def _gbnf(n: int) -> str:
    """A rule with n single-byte edges out of its start and a string-like loop beside it."""
    return f'root ::= item ("," item)*\nitem ::= [{LETTERS[:n]}] | "<" [^<>]* ">"'


GRAMMARS = (
    [(f"alternatives{n}", _alternatives(n)) for n in (1, 2, 3, 7, 8, 9, 31, 32, 33, 34, 40)]
    + [(f"classes{n}", _gbnf(n)) for n in (1, 2, 3, 4, 5, 14, 15, 16, 17, 30, 31, 32, 60, 61, 62, 63)]
    + [
        ("pairs", 'root ::= "a" ("x" | "y") "b" | "c" ("y" | "z") "d" | "e" [x-z]+ "f"'),
        ("edge_or_none", 'root ::= "a" "p" | "b" "q" | "p" "b" | "q" "a"'),
        ("string", 'root ::= "\\"" ([^"\\\\] | "\\\\" ["\\\\/bfnrt])* "\\""'),
    ]
)


def _ir(text: str) -> ir.Grammar:
    return cfgmask.Grammar.from_gbnf(text).ir


def _classes(door: tuple) -> np.ndarray:  # type: ignore[type-arg]
    """Each rule's class count, a row each."""
    rule_state = np.frombuffer(door[1], dtype=np.uint32)
    rule_trans = np.frombuffer(door[2], dtype=np.uint32)
    n = np.diff(rule_state.astype(np.int64))
    return np.diff(rule_trans.astype(np.int64))[n > 0] // n[n > 0]


def test_the_grammars_reach_each_boundary() -> None:
    """The sweep has narrow rows with every tail (nc % 4) and a rule of more than 64 classes
    (else the wide walk and the tails would go untested here)."""
    counts = set()
    for _, text in GRAMMARS:
        counts |= set(_classes(_door(_ir(text), flat_mod.class_weights(0))).tolist())
    assert {c % 4 for c in counts if 4 < c <= 64} == {0, 1, 2, 3}
    assert any(c > 64 for c in counts)
    assert any(16 < c <= 64 for c in counts)


@pytest.mark.parametrize("text", [t for _, t in GRAMMARS], ids=[n for n, _ in GRAMMARS])
def test_tables_against_the_python_passes(text: str) -> None:
    fast, slow, _ = both(_ir(text))
    assert_same(fast, slow)


@pytest.mark.parametrize("text", [t for _, t in GRAMMARS], ids=[n for n, _ in GRAMMARS])
def test_byte_classes_under_colliding_weights(text: str) -> None:
    g = _ir(text)
    probe = _door(g, flat_mod.class_weights(0))
    full = _full(probe)
    n = full.shape[0]
    assert check_classes(probe, flat_mod.class_weights(0)[:n], full)
    rng = np.random.default_rng(n)
    for values in ((1,), (1, 3), (0, 1), (5, 7, 11)):
        weights = rng.choice(np.array(values, dtype=np.int64), size=n)
        check_classes(_door(g, weights), weights, full)


def test_a_collision_of_an_edge_against_none_is_refused() -> None:
    """Weights of ones: a byte's key is the sum of its column (targets + 2), so two bytes whose
    columns hold the same targets in other rows collide; the rows where one of them has an edge
    and the other none are the ones the pair check must read."""
    refused = made = 0
    for _, text in GRAMMARS:
        g = _ir(text)
        full = _full(_door(g, flat_mod.class_weights(0)))
        ones = np.ones(full.shape[0], dtype=np.int64)
        if check_classes(_door(g, ones), ones, full):
            made += 1
        else:
            refused += 1
    assert refused and made  # both outcomes met, each checked against the matrix
