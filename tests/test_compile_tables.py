"""The tables that follow from the flat rules, made in C inside ``compile_finish``
(csrc/tables.c ``cm_flat_derive``: call and token edges as CSR, nullable rules, FOLLOW bytes,
global byte classes), against the Python passes they replace (``follow.py``,
``tables.byte_classes``, which stay the reference): every array of ``Tables`` equal on every
shipped grammar, JSON Schemas of the corpus, grammars with token terminals and lookahead
markers, and random grammars; the Python path takes over where C gives no byte classes (a
hash collision, or more states than weights).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import deadline, ir
from cfgmask.compile import flat as flat_mod
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.components import build_rules
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.prepare import prepare, validate
from cfgmask.compile.tables import Tables, tables_from_flat
from cfgmask.errors import GrammarError

from .strategies import grammars

_core: Any = importlib.import_module("cfgmask._core")
ROOT = Path(__file__).resolve().parent.parent
GRAMMARS = sorted((ROOT / "grammars").glob("*.gbnf")) + sorted((ROOT / "grammars").glob("*.lark"))
SPLITS = sorted((ROOT / "tests" / "corpora" / "jsonschemabench").glob("*.jsonl"))


def both(g: ir.Grammar, limits: CompileLimits | None = None) -> tuple[Tables, Tables, flat_mod.Flat]:
    """The tables through C's derived arrays, and through the Python passes from the same Flat."""
    limits = limits or CompileLimits()
    clear_caches()
    with deadline.Deadline(limits.deadline_ms, "compile"):
        sess = prepare(g, limits)
        validate(g, sess)
        f = build_rules(g, limits, sess)
        fast = tables_from_flat(g, f, sess, limits)
        assert f.derived is not None
        slow_flat = dataclasses.replace(f, derived=None)  # parts, refs, tokens made from the door
        slow = tables_from_flat(g, slow_flat, sess, limits)
    return fast, slow, f


def assert_same(a: Tables, b: Tables) -> None:
    for field in dataclasses.fields(Tables):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), field.name
        else:
            assert x == y, field.name


def _ir(path: Path) -> ir.Grammar:
    text = path.read_text(encoding="utf-8")
    g = cfgmask.Grammar.from_lark(text) if path.suffix == ".lark" else cfgmask.Grammar.from_gbnf(text)
    return g.ir


def _schemas(per_split: int = 8) -> list[tuple[str, Any]]:
    """The first ``per_split`` schemas of each split that the front end compiles (a refused one
    has no tables to compare)."""
    out = []
    for path in SPLITS:
        with path.open(encoding="utf-8") as f:
            taken = 0
            for i, line in enumerate(f):
                if taken == per_split:
                    break
                schema = json.loads(line)["schema"]
                try:
                    cfgmask.Grammar.from_json_schema(schema)
                except cfgmask.CfgmaskError:
                    continue
                out.append((f"{path.stem}:{i}", schema))
                taken += 1
    return out


SCHEMAS = _schemas()


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.name)
def test_shipped_grammars(path: Path) -> None:
    fast, slow, _ = both(_ir(path))
    assert_same(fast, slow)


@pytest.mark.parametrize("schema", [s for _, s in SCHEMAS], ids=[i for i, _ in SCHEMAS])
def test_json_schemas(schema: Any) -> None:
    fast, slow, _ = both(cfgmask.Grammar.from_json_schema(schema).ir)
    assert_same(fast, slow)


@pytest.mark.parametrize(
    "text",
    [
        'root ::= <[5]> x | !<[1]> root | "a"\nx ::= "b" x | <[3]> | ""',  # token edges, nullable
        # FOLLOW through nullable rules
        'root ::= a b c\na ::= "x"? a2\na2 ::= "(" a2 ")" | ""\nb ::= "y"* \nc ::= [^a]',
        'root ::= "(" root ")" root | ""',
    ],
)
def test_token_terminals_and_nullable_rules(text: str) -> None:
    fast, slow, f = both(cfgmask.Grammar.from_gbnf(text).ir)
    assert_same(fast, slow)


def test_lookahead_markers() -> None:
    word = ir.Seq(
        (ir.Repeat(ir.CharClass(((0x61, 0x7A),)), 1, None), ir.Lookahead(((0x61, 0x7A), (0xE9, 0xE9))))
    )
    body = ir.Seq((ir.Ref("w"), ir.Repeat(ir.Seq((ir.Literal(b" "), ir.Ref("w"))), 0, None)))
    g = ir.Grammar(rules={"root": body, "w": word}, start="root")
    fast, slow, _ = both(g)
    assert_same(fast, slow)
    assert fast.rule_la.any()


@settings(max_examples=60, deadline=None)
@given(grammars())
def test_random_grammars(g: ir.Grammar) -> None:
    try:
        fast, slow, _ = both(g)
    except (GrammarError, cfgmask.LimitError):
        return
    assert_same(fast, slow)


def _door(g: ir.Grammar, weights: np.ndarray | None) -> tuple[Any, ...]:
    """What compile_finish returns for ``g`` with these byte-class weights (None: without them)."""
    from cfgmask.compile import components

    clear_caches()
    limits = CompileLimits()
    sess = prepare(g, limits)
    rules = g.rules
    built = components.rule_dfas(dict(rules), g.start, set(), limits, sess)
    rank, _ = sess.rank()
    by_name: list[Any] = [None] * len(sess.names)
    for name, (dfa, labels) in built.items():
        by_name[sess.name(name)] = (dfa.handle, labels)
    is_token = bytes(n in sess.token_sets for n in sess.names)
    return tuple(_core.compile_finish(rank, by_name, is_token, sess.name(g.start), 0, 0.0, weights))


def test_collision_and_short_weights_leave_byte_classes_to_python() -> None:
    g = cfgmask.Grammar.from_gbnf('root ::= "a" [b-d]+ "e"').ir
    n = len(_door(g, flat_mod.class_weights(0))[5])  # accepting: one byte a state
    assert n > 2
    assert _door(g, flat_mod.class_weights(0))[9][0] > 1  # byte classes made
    assert _door(g, np.zeros(n, dtype=np.int64))[9][0] == 0  # every column hashes alike
    assert _door(g, flat_mod.class_weights(0)[: n - 1].copy())[9][0] == 0  # too few weights
    # and compile() then makes them in Python, the same as with the weights
    reference, _, _ = both(g)
    saved = flat_mod._WEIGHTS
    try:
        flat_mod._WEIGHTS = saved[: n - 1].copy()  # class_weights grows it again when asked
        clear_caches()
        short = cfgmask.compile(g, cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)]))
    finally:
        flat_mod._WEIGHTS = saved
    assert_same(short.tables, reference)


def test_the_door_makes_the_flat_rules_tables_when_read() -> None:
    """With weights compile_finish returns a ``FlatDoor``: the same first nine items as without
    them (the flat rules' own tables made on first read, then kept), by index, negative index,
    slice and iteration."""
    g = cfgmask.Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "string"}}}).ir
    plain = _door(g, None)
    assert len(plain) == 9
    clear_caches()
    from cfgmask.compile import components

    limits = CompileLimits()
    sess = prepare(g, limits)
    built = components.rule_dfas(dict(g.rules), g.start, set(), limits, sess)
    rank, _ = sess.rank()
    by_name: list[Any] = [None] * len(sess.names)
    for name, (dfa, labels) in built.items():
        by_name[sess.name(name)] = (dfa.handle, labels)
    is_token = bytes(n in sess.token_sets for n in sess.names)
    door = _core.compile_finish(
        rank, by_name, is_token, sess.name(g.start), 0, 0.0, flat_mod.class_weights(64)
    )
    assert isinstance(door, _core.FlatDoor) and len(door) == 10
    assert door[4] == plain[4] and door[4] is door[4] and door[-6] is door[4]
    assert door[:9] == plain and tuple(door)[:9] == plain and door[2:7:2] == plain[2:7:2]
    assert door[9][0] > 0
    with pytest.raises(IndexError):
        door[10]
