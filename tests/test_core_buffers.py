"""compile_components and compile_finish read the compiler's own arrays in place (an
``array('I')``, a ``bytearray``, numpy's int64 weights) and anything else through a typed
memoryview, as before (cfgmask/_core.pyx ``_in_u32``, ``_in_u8``, ``_in_i64``): every form of
the same values gives the same automata and tables, and a wrong one the memoryview's error."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile import components
from cfgmask.compile import flat as flat_mod
from cfgmask.compile import tables as tables_mod
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.prepare import prepare

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"enum": ["x", "yz"]}},
    "required": ["a"],
}


def _planned(g: Any) -> tuple[Any, Any, Any]:
    """A fresh session of ``g`` and what rule_dfas hands compile_components."""
    clear_caches()
    limits = CompileLimits()
    sess = prepare(g, limits)
    rules = dict(g.rules)
    plan = components._plan(rules, g.start, set(), limits, sess)
    rank, _ = sess.rank()
    from cfgmask.compile import _dag

    return sess, rank, _dag.comp_args(plan, rank, sess)


def _built(code: Any, rank: Any, args: Any) -> list[Any]:
    got = _core.compile_components(code, rank, args, 20_000, 2_000, 0, 0.0)
    return [
        None if comp is None else [(tuple(h.states()), list(values)) for h, values in comp] for comp in got
    ]


def test_components_read_any_uint32_buffer_alike() -> None:
    g = cfgmask.Grammar.from_json_schema(SCHEMA).ir
    sess, rank, args = _planned(g)
    code = sess.code
    assert type(code) is array and code.typecode == "I" and len(code) > 10
    want = _built(code, rank, args)
    assert any(c is not None for c in want)
    forms = (
        (np.frombuffer(code.tobytes(), dtype=np.uint32), rank),
        (code, np.frombuffer(rank.tobytes(), dtype=np.uint32)),
        (memoryview(code), memoryview(rank)),
        (np.array(code, dtype=np.uint32)[::-1][::-1].copy(), array("I", rank)),
    )
    for c, r in forms:
        assert _built(c, r, args) == want
    # a prefix of the code is another input: the length is read, not assumed
    with pytest.raises(Exception):  # noqa: B017 - C rejects a node past the end of the code
        _built(code[:2], rank, args)
    for bad in (np.asarray(code, dtype=np.int64), array("H", [1, 2])):
        with pytest.raises(ValueError, match="dtype mismatch"):
            _core.compile_components(bad, rank, args, 20_000, 2_000, 0, 0.0)
    with pytest.raises(ValueError, match="dtype mismatch"):
        _core.compile_components(code, np.asarray(rank, dtype=np.int32), args, 20_000, 2_000, 0, 0.0)


def _finish_inputs(g: Any) -> tuple[Any, list[Any], bytes, int]:
    clear_caches()
    limits = CompileLimits()
    sess = prepare(g, limits)
    built = components.rule_dfas(dict(g.rules), g.start, set(), limits, sess)
    from cfgmask.compile import _dag

    rank, _ = sess.rank()
    by_name, is_token, _states = _dag.finish_args(built, sess)
    return rank, by_name, is_token, sess.name(g.start)


def _flat(door: Any) -> tuple[Any, ...]:
    return tuple(door[i] for i in range(len(door)))


def test_finish_reads_any_buffer_of_its_types_alike() -> None:
    g = cfgmask.Grammar.from_gbnf('root ::= "a" <[5]> [b-d]+ ("e" | <[7]>)').ir
    rank, by_name, is_token, start = _finish_inputs(g)
    assert type(is_token) is bytes and any(is_token)  # what finish_args makes
    weights = flat_mod.class_weights(64)
    want = _flat(_core.compile_finish(rank, by_name, is_token, start, 0, 0.0, weights))
    assert want[9][0] > 0  # byte classes made: the weights were read
    plain = _core.compile_finish(rank, by_name, is_token, start, 0, 0.0, None)
    assert plain == want[:9]
    labels = (rank, np.frombuffer(rank.tobytes(), dtype=np.uint32), memoryview(rank))
    as_u8 = np.frombuffer(bytes(is_token), dtype=np.uint8)
    tokens = (is_token, bytearray(is_token), as_u8, memoryview(is_token))
    short = weights[: len(want[5])]  # one weight a state: enough
    as_q = array("q", short.tolist())
    weight_forms = (weights, short.copy(), as_q, short.astype(np.longlong), memoryview(short))
    for lab in labels:
        for tok in tokens:
            assert _flat(_core.compile_finish(lab, by_name, tok, start, 0, 0.0, weights)) == want
    for w in weight_forms:
        assert _flat(_core.compile_finish(rank, by_name, is_token, start, 0, 0.0, w)) == want
    # too few weights: read by their count (C leaves the byte classes to Python)
    few = _core.compile_finish(rank, by_name, is_token, start, 0, 0.0, short[:-1].copy())
    assert few[9][0] == 0
    # a token flag changed is read: C finds a token label on a rule's edge
    flipped = bytearray(is_token)
    flipped[flipped.index(1)] = 0
    with pytest.raises(ValueError, match="malformed"):
        _core.compile_finish(rank, by_name, flipped, start, 0, 0.0, weights)
    with pytest.raises(ValueError, match="bad arguments"):
        _core.compile_finish(rank, by_name, is_token[:-1], start, 0, 0.0, weights)
    for bad_w in (weights.astype(np.int32), weights.astype(np.uint64), weights[::2]):
        with pytest.raises(ValueError):
            _core.compile_finish(rank, by_name, is_token, start, 0, 0.0, bad_w)
    with pytest.raises(ValueError, match="dtype mismatch"):
        _core.compile_finish(rank, by_name, as_u8.astype(np.int16), start, 0, 0.0, weights)
    with pytest.raises(ValueError, match="dtype mismatch"):
        _core.compile_finish(np.asarray(rank, dtype=np.int64), by_name, is_token, start, 0, 0.0, weights)


def test_the_handle_asks_the_compilers_tables_for_no_segment_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables with ``_raw`` are never the segment form's: GrammarHandle does not ask them for
    ``state_seg`` (Tables' ``__getattr__`` raises for it, ~4 us a compile)."""
    asked: list[str] = []
    real = tables_mod.Tables.__getattr__

    def spy(self: Any, name: str) -> Any:
        asked.append(name)
        return real(self, name)

    monkeypatch.setattr(tables_mod.Tables, "__getattr__", spy)
    clear_caches()
    vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)])
    cg = cfgmask.compile(cfgmask.Grammar.from_json_schema(SCHEMA), vocab)
    assert "_raw" in cg.tables.__dict__
    assert asked == []
    assert not cg._handle.segments
    m = cfgmask.Matcher(cg)
    assert all(m.accept_token(b) for b in b'{"a":"x"}') and m.is_accepting()
