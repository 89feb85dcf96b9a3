"""What the compiler's one walk of the rows hands the C grammar (csrc/tables.c's facts:
``state_bytes``, the per-state flags and ``rule_block``, written in place in compile_finish's
last item, ``Tables._raw``'s last; cm_grammar_new_facts borrows them instead of walking the rows
again): the same state bytes, flags (has_bytes, simple, has_tokens, plain, solo, calls), rule
blocks and entries as the grammar that walks its rows (the same tables without the facts),
for JSON schemas, grammars with token edges (a token state's own byte edges, not the FOLLOW
pass's every byte), lookahead markers and wide rows."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.compiled import clear_caches
from cfgmask.compile.tables import Tables

from .test_grammar_rows import BYTES, SCHEMAS, _handle
from .test_tables_raw import _as_raw

GBNF = {
    "tokens": 'root ::= "a" <[5]> [b-d]+ ("e" | <[7]>)',
    "token_rows": 'root ::= x | "q"\nx ::= ([a-f] | <[3]> | "zz") x | <[4]> "!" | ""',
    "nullable": 'root ::= <[5]> x | !<[1]> root | "a"\nx ::= "b" x | <[3]> | ""',
    "blocks": 'root ::= "[" item ("," item)* "]"\nitem ::= [0-9]+ | "\\"" [a-z]* "\\""',
    "returns": 'root ::= x "c" | "d" x "c" | "e" x "f" x\nx ::= "(" x ")" | "y"',
    # x called from more states than derive_returns sorts by insertion (16): its bit set
    "many_returns": "root ::= "
    + " | ".join(
        f'"{c}" (x | "{c}{c}") "{"z" if i % 3 else c}"' for i, c in enumerate("abcdefghijklmnopqrstu")
    )
    + '\nx ::= "(" x ")" | "y"',
}


def _compiled(kind: str, name: str) -> Tables:
    clear_caches()
    if kind == "schema":
        g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMAS[name]))
    elif kind == "gbnf":
        g = cfgmask.Grammar.from_gbnf(GBNF[name])
    else:  # a lookahead marker (lark's (?!...)) in a regular expression's terminal
        g = cfgmask.Grammar.from_lark('start: A "b"\nA: /a+(?!c)/')
    return cfgmask.compile(g, BYTES, limits=cfgmask.CompileLimits(unroll_budget=1 << 12)).tables


def _facts(h: _core.GrammarHandle, t: Tables) -> tuple[list[Any], list[int]]:
    return [h.state_bytes(s) for s in range(t.n_states)], [h.rule_block(r) for r in range(len(t.rule_names))]


def _flags(h: _core.GrammarHandle, t: Tables) -> list[tuple[int, int]]:
    return [h.state_flags(s) for s in range(t.n_states)]


CASES = [("schema", n) for n in sorted(SCHEMAS)] + [("gbnf", n) for n in sorted(GBNF)]
CASES.append(("lark", "lookahead"))


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_handed_facts_match_the_rows(kind: str, name: str) -> None:
    t = _compiled(kind, name)
    raw = vars(t)["_raw"]
    assert raw[18] is not None  # the compiler's facts travel: the grammar does not walk the rows
    assert len(raw[18]) == 45 * t.n_states + len(t.rule_names)  # csrc/cfgmask.h cm_facts_size
    given = _handle(t)
    walked = _handle(_as_raw(t))  # the same bytes without the facts: derive walks the rows
    assert _facts(given, t) == _facts(walked, t)
    assert _flags(given, t) == _flags(walked, t)
    for s in range(0, t.n_states, max(1, t.n_states // 12)):
        a, b = given.entry(s), walked.entry(s)
        assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


def test_token_states_have_their_own_bytes() -> None:
    """A state with token edges and byte edges: its bytes are the byte edges' (the FOLLOW pass
    sets every byte for it), and a state with token edges alone has none."""
    t = _compiled("gbnf", "token_rows")
    h = _handle(t)
    tok = [s for s in range(t.n_states) if t.tok_off[s + 1] > t.tok_off[s]]
    assert tok
    got = [h.state_bytes(s) for s in tok]
    assert any(on for on, _ in got) and all(words != [0xFFFFFFFF] * 8 for _, words in got)
    assert got == [_handle(_as_raw(t)).state_bytes(s) for s in tok]


def test_some_rule_is_a_block_and_some_is_not() -> None:
    """Both values of rule_block come through (a fact always 0 or always 1 would pass the
    comparison above only where the walk agrees)."""
    seen = set()
    for kind, name in CASES:
        t = _compiled(kind, name)
        seen |= set(_facts(_handle(t), t)[1])
    assert seen == {0, 1}


def test_every_flag_takes_both_values() -> None:
    """Each per-state flag handed over is 0 somewhere and 1 somewhere, and some state calls
    (a flag constant in the facts would pass the comparison only where the walk agrees)."""
    seen: set[tuple[int, bool]] = set()
    calls = False
    for kind, name in CASES:
        t = _compiled(kind, name)
        for bits, c in _flags(_handle(t), t):
            seen |= {(b, bool(bits >> b & 1)) for b in range(5)}
            calls |= c != 0
    assert seen == {(b, v) for b in range(5) for v in (False, True)}
    assert calls


def test_the_grammar_outlives_nothing_it_borrows() -> None:
    """The handle keeps the facts' bytes it borrows: dropping the tables and collecting leaves
    its entries and flags as they were (ASan would see a read of freed memory)."""
    import gc

    t = _compiled("schema", sorted(SCHEMAS)[0])
    h = _handle(t)
    want = _flags(h, t), [h.entry(s)[0].tolist() for s in range(t.n_states)]
    n = t.n_states
    del t
    gc.collect()
    assert [h.state_flags(s) for s in range(n)] == want[0]
    assert [h.entry(s)[0].tolist() for s in range(n)] == want[1]


def _returns(t: Tables) -> list[list[int]]:
    """Per rule, the distinct targets of the call edges that call it, ascending (from the tables)."""
    out: list[set[int]] = [set() for _ in t.rule_names]
    for r, s in zip(np.asarray(t.ref_rule).tolist(), np.asarray(t.ref_target).tolist(), strict=True):
        out[r].add(s)
    return [sorted(x) for x in out]


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_each_rule_returns_to_its_callers_targets_once_ascending(kind: str, name: str) -> None:
    """grammar.c's derive_returns (a counting sort of the call edges by target): each rule's
    return states are its call edges' distinct targets, ascending, in the grammar with the
    compiler's facts and in the one that walks its rows."""
    t = _compiled(kind, name)
    want = _returns(t)
    for h in (_handle(t), _handle(_as_raw(t))):
        assert [h.rule_returns(r) for r in range(len(t.rule_names))] == want
    ref = list(zip(np.asarray(t.ref_rule).tolist(), np.asarray(t.ref_target).tolist(), strict=True))
    if name == "returns":  # two calls of x go on in one state, and x returns to two states
        assert len(ref) > len(set(ref))
        assert any(len(w) > 1 for w in want)
    if name == "many_returns":  # a rule with over 16 call edges, repeats among them
        calls = [sum(r == k for r, _ in ref) for k in range(len(t.rule_names))]
        big = calls.index(max(calls))
        assert calls[big] > 16 and 1 < len(want[big]) < calls[big]
