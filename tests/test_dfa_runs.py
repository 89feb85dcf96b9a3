"""An inlined callee's DFA is copied into each caller's NFA from its rows kept as runs on it at its
first copy (csrc/thompson.c, ``tb_embed``; csrc/dfa.c, ``cm_dfa_runs_keep``): the later copies
take the runs (the core's counter), and the automata, tables and masks are those of copies that
walk the rows each time (``_core.dfa_runs_enable(False)``, the reference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile import prelude
from cfgmask.compile.cache import CACHE
from cfgmask.compile.tables import build_tables
from cfgmask.frontends.gbnf import parse_gbnf

from .test_compile_passes import _outcome, _rule_dfas, _tables, grammars_with_tokens

# `num` is inlined into five callers (each a rule of its own: used twice, not expanded)
NUMBERS = r"""
root ::= "{" (a | b | c | d | e) "}" | "[" a b c d e "]"
a ::= "a=" num ";"
b ::= "bb=" num ","
c ::= "c:" num
d ::= "dd" num "!" num
e ::= "e" num | num "e"
num ::= "-"? ("0" | [1-9] [0-9]{0,7}) ("." [0-9]{1,6})? ([eE] [+-]? [0-9]{1,3})?
"""

# the JSON number inlined into five properties
CORPUS = Path(__file__).parent / "corpora" / "jsonschemabench" / "Glaiveai2K.jsonl"
SCHEMA = next(
    r["schema"]
    for r in map(json.loads, CORPUS.read_text().splitlines())
    if r["id"] == "Glaiveai2K/calculate_area_2540405e"
)


@pytest.fixture
def runs_off() -> Iterator[None]:
    _core.dfa_runs_enable(False)
    try:
        yield
    finally:
        _core.dfa_runs_enable(True)


def _both(fn):  # type: ignore[no-untyped-def]
    """fn() with the runs (and how many copies reused them), then with every copy walking."""
    before = _core.dfa_runs_reused()
    got = _outcome(fn)
    reused = _core.dfa_runs_reused() - before
    _core.dfa_runs_enable(False)
    try:
        before = _core.dfa_runs_reused()
        want = _outcome(fn)
        assert _core.dfa_runs_reused() == before  # off: no copy takes them
    finally:
        _core.dfa_runs_enable(True)
    return got, want, reused


def test_copies_take_the_runs_and_give_the_same_automata() -> None:
    g = parse_gbnf(NUMBERS)
    got, want, reused = _both(lambda: _rule_dfas(g, True))
    assert got == want
    assert reused >= 4  # five copies of num (six in d's two): the first makes them


def test_copies_take_the_runs_and_give_the_same_tables() -> None:
    g = parse_gbnf(NUMBERS)
    got, want, reused = _both(lambda: _tables(g, True))
    assert got == want
    assert reused >= 4


def test_json_number_copies_give_the_same_tables() -> None:
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMA)).ir
    got, want, reused = _both(lambda: _tables(g, True))
    assert got == want
    assert reused >= 4  # the number in five properties


def _masks(schema: dict, doc: str) -> list[bytes]:
    cfgmask.clear_caches()
    tokens = [bytes([b]) for b in range(32, 127)] + [b'{"', b'":', b"12", b".5"]
    vocab = cfgmask.Vocabulary.from_token_bytes(tokens)
    m = cfgmask.Matcher(cfgmask.compile(cfgmask.Grammar.from_json_schema(json.dumps(schema)), vocab))
    out = []
    for ch in doc:
        out.append(m.allowed_tokens().tobytes())
        assert m.accept_bytes(ch.encode())
    return out


def test_json_number_copies_give_the_same_masks(runs_off: None) -> None:
    doc = '{"dimensions": {"base": -1.5e3, "width": 20}, "shape": "square"}'
    want = _masks(SCHEMA, doc)
    _core.dfa_runs_enable(True)
    assert _masks(SCHEMA, doc) == want


@given(grammars_with_tokens())
def test_runs_give_the_walks_automata(g) -> None:  # type: ignore[no-untyped-def]
    got, want, _ = _both(lambda: _rule_dfas(g, True))
    assert got == want


def test_the_prelude_keeps_its_runs_when_pinned() -> None:
    """The prelude's automata (pinned, never cleared) have their runs from when they were pinned,
    not from the first compile that copies them: no run a compile keeps outlives
    ``clear_caches``, and every cold compile finds what every other does."""
    prelude.pin()
    cfgmask.clear_caches()
    pinned = [dfa for dfas in CACHE._components.values() for dfa in dfas]
    assert pinned and all(dfa.handle.runs_kept for dfa in pinned)


COLD_TWICE = """
import json, sys
import cfgmask
from cfgmask import _core, ir
from cfgmask.compile import prelude
from cfgmask.compile.cache import CACHE
vocab = cfgmask.Vocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)])
schema = json.loads(sys.argv[1])
got = []
for _ in range(2):
    cfgmask.clear_caches()
    before = _core.dfa_runs_reused()
    cfgmask.compile(cfgmask.Grammar.from_json_schema(json.dumps(schema)), vocab)
    got.append(_core.dfa_runs_reused() - before)
print(got)
"""


def test_cold_compiles_find_the_same_runs() -> None:
    """The prelude's automata (pinned, not cleared) have their runs from when they were pinned, so
    the first cold compile of a process copies them as every later cold compile does: no run
    kept by an earlier compile outlives ``clear_caches``."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {}, "c": {"type": "array"}}}
    out = subprocess.run(
        [sys.executable, "-c", COLD_TWICE, json.dumps(schema)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    ).stdout
    first, second = json.loads(out)
    assert first == second


def _tables_after(start: threading.Barrier, g: ir.Grammar) -> object:
    start.wait()
    t = build_tables(g)
    return {
        f.name: (v.tobytes() if hasattr(v, "tobytes") else v) for f in fields(t) for v in [getattr(t, f.name)]
    }


def test_threads_copying_one_cached_dfa_build_the_same_tables() -> None:
    """Compiles on several threads at once copy the cached components' DFAs (the JSON number's,
    the string's) and keep their runs on them (one published, the others freed: cm_dfa_runs_keep):
    every thread's tables are those of a compile whose copies walk the rows."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMA)).ir
    _core.dfa_runs_enable(False)
    try:
        want = _tables(g, True)
    finally:
        _core.dfa_runs_enable(True)
    for _ in range(3):
        cfgmask.clear_caches()
        start = threading.Barrier(6)
        with ThreadPoolExecutor(6) as pool:
            got = list(pool.map(lambda _, b=start: _tables_after(b, g), range(6)))
        assert all(x == want for x in got)
