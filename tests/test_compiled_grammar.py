"""CompiledGrammar: picklable, shareable; Matcher API edges and errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import cfgmask

from .engine import BYTE_VOCAB

JSONISH = r"""
root  ::= "{" ws ( pair ( "," ws pair )* )? "}"
pair  ::= "\"" [a-z]+ "\"" ws ":" ws value ws
value ::= [0-9]+ | "true" | root
ws    ::= " "?
"""


@pytest.fixture(scope="module")
def compiled() -> cfgmask.CompiledGrammar:
    return cfgmask.compile(cfgmask.Grammar.from_gbnf(JSONISH), BYTE_VOCAB)


def _mask(m: cfgmask.Matcher) -> np.ndarray:
    mask = cfgmask.allocate_bitmask(1, BYTE_VOCAB.size)
    m.fill_bitmask(mask)
    return mask


def test_pickle_round_trip_gives_identical_masks(compiled) -> None:
    clone = pickle.loads(pickle.dumps(compiled))
    a, b = cfgmask.Matcher(compiled), cfgmask.Matcher(clone)
    for byte in b'{"ab": {"c":12}, "d": true}':
        assert np.array_equal(_mask(a), _mask(b))
        assert a.accept_token(byte) and b.accept_token(byte)
    assert a.is_accepting() and b.is_accepting()


def test_accept_returns_false_and_keeps_state(compiled) -> None:
    m = cfgmask.Matcher(compiled)
    before = _mask(m)
    assert not m.accept_token(ord("x"))
    assert not m.accept_bytes(b"{x")
    assert np.array_equal(_mask(m), before)
    assert m.num_tokens == 0


def test_stop_token_only_when_accepting(compiled) -> None:
    m = cfgmask.Matcher(compiled)
    stop = BYTE_VOCAB.stop_ids[0]
    assert not m.accept_token(stop)
    assert m.accept_bytes(b"{}")
    assert m.accept_token(stop) and m.is_terminated()
    assert not m.accept_token(ord(" "))
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()


def test_jump_forward_bytes(compiled) -> None:
    m = cfgmask.Matcher(compiled)
    assert m.jump_forward_bytes() == b"{"
    assert m.accept_bytes(b'{"ab"')
    assert m.jump_forward_bytes() == b""  # optional space or ':'
    assert m.accept_bytes(b" ")
    assert m.jump_forward_bytes() == b":"
    assert m.accept_bytes(b": tr")
    assert m.jump_forward_bytes() == b"ue"


@pytest.mark.parametrize("bad", [-1, BYTE_VOCAB.size, 10**12])
def test_out_of_range_token_raises(compiled, bad) -> None:
    with pytest.raises(cfgmask.MatcherError, match="out of range"):
        cfgmask.Matcher(compiled).accept_token(bad)


@pytest.mark.parametrize(
    "mask, error, match",
    [
        (np.zeros((1, 3), dtype=np.int32), ValueError, "needs"),
        (np.zeros((1, 9), dtype=np.int64), TypeError, "int32"),
        (np.zeros((2, 9), dtype=np.int32)[:, ::2], ValueError, "contiguous|needs"),
        (np.zeros((2, 2, 9), dtype=np.int32), ValueError, "shape"),
        (np.zeros((1, 9), dtype=np.int32).view(np.uint32), TypeError, "int32"),
        ([[0] * 9], TypeError, "numpy array"),
    ],
)
def test_wrong_buffers_raise(compiled, mask, error, match) -> None:
    """The same mistake gets the same exception from fill_bitmask, fill_bitmasks and
    apply_bitmask_inplace (cfgmask/buffers.py): TypeError for the kind of buffer, ValueError
    for its shape."""
    with pytest.raises(error, match=match):
        cfgmask.Matcher(compiled).fill_bitmask(mask)
    with pytest.raises(error, match=match):
        cfgmask.fill_bitmasks([cfgmask.Matcher(compiled)], mask)


def test_row_out_of_range_raises(compiled) -> None:
    with pytest.raises(IndexError, match="row"):
        cfgmask.Matcher(compiled).fill_bitmask(cfgmask.allocate_bitmask(2, BYTE_VOCAB.size), row=2)


def test_rollback_too_far_raises(compiled) -> None:
    m = cfgmask.Matcher(compiled)
    m.accept_bytes(b"{")
    with pytest.raises(cfgmask.MatcherError):
        m.rollback(2)


def test_empty_language_is_an_error() -> None:
    g = cfgmask.Grammar.from_gbnf('root ::= "a" x\nx ::= x "b"')
    with pytest.raises(cfgmask.GrammarError, match="empty"):
        cfgmask.compile(g, BYTE_VOCAB)


def test_big_repetition_compiles_small_and_exact() -> None:
    g = cfgmask.Grammar.from_gbnf('root ::= "a"{1,100000} "b"')
    c = cfgmask.compile(g, BYTE_VOCAB)
    assert c.tables.stats["states"] < 5000
    m = cfgmask.Matcher(c)
    assert m.accept_bytes(b"a" * 100000 + b"b") and m.is_accepting()
    m = cfgmask.Matcher(c)
    assert m.accept_bytes(b"a" * 100000) and not m.accept_bytes(b"a")
