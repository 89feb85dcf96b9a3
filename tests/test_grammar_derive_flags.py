"""What cm_grammar_new derives per rule and per state in its one walk of the states
(csrc/grammar.c ``derive``), against the tables themselves: ``rule_block`` (every state of the
rule without calls or token edges, its accepting states reading no byte: wrap.c's test) and
each state's byte row (``state_bytes``, the spans of edges ORed two words at a time), in the
compiler's layout (each rule's states one block) and in a permuted one."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import cfgmask
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.tables import Tables

from .test_grammar_rows import BYTES, SCHEMAS, _expected, _handle, _permuted
from .test_tables_raw import _as_raw

MORE_SCHEMAS = {
    # numbers: accepting states that read more digits (not a block); strings: blocks
    "numbers": {
        "type": "object",
        "properties": {"n": {"type": "number"}, "i": {"type": "integer", "minimum": 3}},
    },
    "array": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
    "enum": {"enum": ["red", "green", 7, None]},
}

GBNF = {
    "arith": 'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9]+ | "(" expr ")"\n',
    "words": 'root ::= w (" " w)*\nw ::= [a-z]+\n',
}


def _schema_tables(schema: object) -> Tables:
    clear_caches()
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    return cfgmask.compile(g, BYTES, limits=cfgmask.CompileLimits(unroll_budget=1 << 12)).tables


def _gbnf_tables(text: str) -> Tables:
    clear_caches()
    return cfgmask.compile(cfgmask.Grammar.from_gbnf(text), BYTES).tables


def _all_tables() -> dict[str, Tables]:
    out = {name: _schema_tables(s) for name, s in {**SCHEMAS, **MORE_SCHEMAS}.items()}
    out.update({name: _gbnf_tables(text) for name, text in GBNF.items()})
    return out


def _expected_blocks(t: Tables) -> list[bool]:
    """rule_block from the tables: a rule is a block unless one of its states has a call or a
    token edge, or is accepting with a byte transition."""
    n_rules = len(t.rule_names)
    ref_off, tok_off = np.asarray(t.ref_off, dtype=np.int64), np.asarray(t.tok_off, dtype=np.int64)
    trans = np.asarray(t.trans)
    block = [True] * n_rules
    for s in range(t.n_states):
        solo = ref_off[s + 1] == ref_off[s] and tok_off[s + 1] == tok_off[s]
        if not solo or (bool(t.accepting[s]) and bool((trans[s] >= 0).any())):
            block[int(t.state_rule[s])] = False
    return block


def _got_blocks(t: Tables) -> list[bool]:
    h = _handle(t)
    return [h.rule_block(r) for r in range(len(t.rule_names))]


@pytest.fixture(scope="module")
def tables() -> dict[str, Tables]:
    return _all_tables()


def test_rule_block_against_the_tables(tables: dict[str, Tables]) -> None:
    seen = set()
    for name, t in tables.items():
        arrays = dataclasses.replace(t)
        want = _expected_blocks(arrays)
        seen.update(want)
        assert _got_blocks(t) == want, name  # raw, rules as blocks
        assert _got_blocks(arrays) == want, name
        p = _permuted(arrays, 5)
        assert _got_blocks(p) == _expected_blocks(p) == want, name  # rules keep their numbers
        assert _got_blocks(_as_raw(p)) == want, name
    assert seen == {True, False}  # both answers met: the test can tell them apart


def test_an_accepting_state_with_bytes_is_no_block(tables: dict[str, Tables]) -> None:
    """Some rule of the corpus above is kept from being a block by that alone (its states have
    no calls and no token edges): the half of the test a narrower check would miss."""
    found = False
    for t in tables.values():
        ref_off, tok_off = np.asarray(t.ref_off, dtype=np.int64), np.asarray(t.tok_off, dtype=np.int64)
        trans = np.asarray(t.trans)
        got = _got_blocks(t)
        for r in range(len(t.rule_names)):
            states = np.flatnonzero(np.asarray(t.state_rule) == r)
            solo = all(ref_off[s + 1] == ref_off[s] and tok_off[s + 1] == tok_off[s] for s in states)
            reads_on = any(bool(t.accepting[s]) and bool((trans[s] >= 0).any()) for s in states)
            if solo and reads_on:
                assert not got[r]
                found = True
    assert found


def test_row_bytes_of_more_grammars(tables: dict[str, Tables]) -> None:
    for name, t in tables.items():
        arrays = dataclasses.replace(t)
        h = _handle(t)
        assert [h.state_bytes(s) for s in range(t.n_states)] == _expected(arrays), name
        p = _permuted(arrays, 7)
        hp = _handle(p)
        assert [hp.state_bytes(s) for s in range(p.n_states)] == _expected(p), name


def test_rule_block_out_of_range(tables: dict[str, Tables]) -> None:
    t = tables["object"]
    with pytest.raises(IndexError):
        _handle(t).rule_block(len(t.rule_names))
