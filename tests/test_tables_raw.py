"""Tables straight from the compiler hold the door's bytes (``Tables._raw``), which GrammarHandle
reads in place and the core borrows; their numpy fields are made when read.  Checked against the
array path (the same tables with every field an array, as the tests' edited copies, unpickled
tables of older builds and the disk cache give them): the same arrays, the same masks, the same
refusals of broken tables; pickling and assigning a field keep the content."""

from __future__ import annotations

import dataclasses
import gc
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.compiled import MatcherLimits, _settings, clear_caches
from cfgmask.compile.strategy import DEFAULT
from cfgmask.compile.tables import Tables
from cfgmask.errors import MatcherError

from .test_compile_tables import assert_same

ROOT = Path(__file__).resolve().parent.parent
BYTES = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b'{"', b'":', b"12", b"ab"])

GBNF = {
    "json": (ROOT / "grammars" / "json.gbnf").read_text(),
    "tokens": 'root ::= <[5]> x | !<[1]> root | "a"\nx ::= "b" x | <[3]> | ""',
    "pairs": 'root ::= "{" pair ("," pair)* "}"\npair ::= "\\"" [a-z]+ "\\":" [0-9]+',
}


def _lookahead() -> cfgmask.Grammar:
    word = ir.Seq(
        (ir.Repeat(ir.CharClass(((0x61, 0x7A),)), 1, None), ir.Lookahead(((0x61, 0x7A), (0xE9, 0xE9))))
    )
    body = ir.Seq((ir.Ref("w"), ir.Repeat(ir.Seq((ir.Literal(b" "), ir.Ref("w"))), 0, None)))
    return cfgmask.Grammar(ir.Grammar(rules={"root": body, "w": word}, start="root"))


def _grammars() -> dict[str, cfgmask.Grammar]:
    out = {name: cfgmask.Grammar.from_gbnf(text) for name, text in GBNF.items()}
    out["lookahead"] = _lookahead()
    out["schema"] = cfgmask.Grammar.from_json_schema(
        '{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}}'
    )
    return out


GRAMMARS = _grammars()


def _compiled(name: str) -> cfgmask.CompiledGrammar:
    clear_caches()
    return cfgmask.compile(GRAMMARS[name], BYTES)


def _arrays(t: Tables) -> Tables:
    """The same tables with every field an array (dataclasses.replace reads each field)."""
    out = dataclasses.replace(t)
    assert "_raw" not in vars(out)
    return out


def _as_raw(t: Tables) -> Tables:
    """Tables of the layout ``Tables._raw`` documents, made here from the arrays (so a broken
    array makes broken bytes)."""
    b = [np.ascontiguousarray(a).tobytes() for a in (t.byte_class, t.trans, t.state_rule, t.accepting)]
    edges = [np.ascontiguousarray(a).tobytes() for a in (t.ref_off, t.ref_rule, t.ref_target)]
    rule_state = np.append(t.rule_start, np.uint32(t.n_states)).astype(np.uint32).tobytes()
    sets = (
        None if not t.set_negated.size else tuple(a.tobytes() for a in (t.set_off, t.set_ids, t.set_negated))
    )
    la = None if not t.rule_la.any() else tuple(a.tobytes() for a in (t.rule_la, t.la_next, t.la_union))
    out = Tables.__new__(Tables)
    vars(out).update(
        rule_names=list(t.rule_names),
        start_rule=t.start_rule,
        stats=dict(t.stats),
        _raw=(
            int(t.state_rule.shape[0]),
            len(t.rule_names),
            int(t.trans.shape[1]),
            *b,
            *edges,
            rule_state,
            t.rule_nullable.tobytes(),
            t.rule_follow.tobytes(),
            t.tok_off.tobytes(),
            t.tok_set.tobytes(),
            t.tok_target.tobytes(),
            sets,
            la,
            None,  # no state facts: the core walks the rows (and checks them)
        ),
    )
    return out


def _handle(t: Tables) -> Any:
    return _core.GrammarHandle(t, BYTES._handle(), list(BYTES.stop_ids), _settings(MatcherLimits(), DEFAULT))


def _entries(t: Tables) -> list[tuple[bytes, bytes]]:
    """Every state's mask-cache entry (what the core derived from the tables)."""
    h = _handle(t)
    return [tuple(a.tobytes() for a in h.entry(s)) for s in range(t.n_states)]  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_raw_tables_are_the_arrays(name: str) -> None:
    t = _compiled(name).tables
    assert "_raw" in vars(t)  # straight from the compiler
    assert t.n_states == t.state_rule.shape[0] and t.n_classes == t.trans.shape[1]
    a = _arrays(t)
    assert_same(t, a)
    assert t.max_token_id == a.max_token_id
    assert _entries(t) == _entries(a)
    assert _entries(_as_raw(a)) == _entries(a)
    assert_same(_as_raw(a), a)


def test_token_sets_and_lookahead_travel_raw() -> None:
    t = _compiled("tokens").tables
    assert t.__dict__["_raw"][16] is not None and t.max_token_id == 5
    t = _compiled("lookahead").tables
    assert t.__dict__["_raw"][17] is not None and t.rule_la.any()
    assert _compiled("json").tables.__dict__["_raw"][16:18] == (None, None)


@pytest.mark.parametrize("name", ["json", "lookahead"])
def test_pickled_raw_tables_and_grammars(name: str) -> None:
    c = _compiled(name)
    t = pickle.loads(pickle.dumps(c.tables))
    assert_same(t, c.tables)
    c2 = pickle.loads(pickle.dumps(c))
    assert "_raw" in vars(c2.tables) and "trans" not in vars(c2.tables)  # read above, not pickled
    assert_same(c2.tables, c.tables)
    assert_same(pickle.loads(pickle.dumps(_arrays(c.tables))), c.tables)  # array tables as before
    assert _entries(c2.tables) == _entries(_arrays(c.tables))


def test_assigning_a_field_leaves_the_bytes() -> None:
    c = _compiled("pairs")
    t = pickle.loads(pickle.dumps(c.tables))
    reference = _arrays(c.tables)
    assert "_raw" in vars(t) and "accepting" not in vars(t)  # nothing read yet
    accepting = reference.accepting.copy()
    accepting[:] = 1
    t.accepting = accepting
    assert "_raw" not in vars(t)  # the handle now reads the arrays, the assigned one among them
    assert_same(t, dataclasses.replace(reference, accepting=accepting))
    assert _entries(t) == _entries(dataclasses.replace(reference, accepting=accepting))


def test_the_core_keeps_borrowed_bytes_alive() -> None:
    """The handle holds the bytes the core borrows: the Tables and the compiled grammar may go."""
    c = _compiled("json")
    expected = _entries(_arrays(c.tables))
    h = _handle(c.tables)
    del c
    clear_caches()
    gc.collect()
    got = [tuple(a.tobytes() for a in h.entry(s)) for s in range(len(expected))]
    assert got == expected


def _broken(t: Tables) -> list[Tables]:
    """Raw tables each broken in one way the array path refuses too."""
    out = []
    trans = t.trans.copy()
    trans[0, 0] = t.n_states  # a target out of range
    out.append(dataclasses.replace(t, trans=trans))
    trans = t.trans.copy()
    trans[-1, -1] = -2  # below none
    out.append(dataclasses.replace(t, trans=trans))
    trans = t.trans.copy()
    s = int(t.rule_start[t.state_rule[-1]])
    trans[s, 0] = int(np.flatnonzero(t.state_rule != t.state_rule[s])[0])  # into another rule
    out.append(dataclasses.replace(t, trans=trans))
    sr = t.state_rule.copy()
    sr[-1] = len(t.rule_names)  # no such rule
    out.append(dataclasses.replace(t, state_rule=sr))
    return out


def test_broken_raw_tables_are_refused() -> None:
    t = _arrays(_compiled("json").tables)
    for bad in _broken(t):  # what cm_grammar_new checks, whichever way it reads the tables
        with pytest.raises(MatcherError):
            _handle(bad)
        with pytest.raises(MatcherError):
            _handle(_as_raw(bad))
    raw = list(vars(_as_raw(t))["_raw"])  # what GrammarHandle checks: lengths and types
    for i, short in [(4, raw[4][:-4]), (7, raw[7][:-4]), (3, bytearray(raw[3])), (11, None)]:
        bad_raw = Tables.__new__(Tables)
        vars(bad_raw).update(
            rule_names=t.rule_names, start_rule=0, stats={}, _raw=tuple(raw[:i] + [short] + raw[i + 1 :])
        )
        with pytest.raises((ValueError, TypeError)):
            _handle(bad_raw)
